#include "transport/memory_table.h"

#include <gtest/gtest.h>

namespace mrc {
namespace {

TEST(MemoryTable, register_region__basic_remote_write_check) {
  MemoryTable t;
  uint8_t buf[256];
  auto k = t.register_region(buf, sizeof buf, 0x1000, kRemoteWrite);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->lkey, k->rkey);
  auto r = t.check_remote_write(k->rkey, 0x1000, 256);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)->base, buf);
  EXPECT_EQ(t.size(), 1u);
}

TEST(MemoryTable, register_region__rejects_empty_and_overflowing_ranges) {
  MemoryTable t;
  EXPECT_EQ(t.register_region(nullptr, 0, 0, kRemoteWrite).error(), Error::kInvalidArgument);
  EXPECT_EQ(t.register_region(nullptr, 16, UINT64_MAX - 4, kRemoteWrite).error(),
            Error::kInvalidArgument);
}

TEST(MemoryTable, check_remote_write__bounds_and_access) {
  MemoryTable t;
  auto k = *t.register_region(nullptr, 100, 1000, kRemoteWrite);
  EXPECT_TRUE(t.check_remote_write(k.rkey, 1000, 100));
  EXPECT_TRUE(t.check_remote_write(k.rkey, 1100, 0));
  EXPECT_EQ(t.check_remote_write(k.rkey, 999, 1).error(), Error::kBadAddress);
  EXPECT_EQ(t.check_remote_write(k.rkey, 1001, 100).error(), Error::kBadAddress);
  EXPECT_EQ(t.check_remote_write(k.rkey, 1050, UINT64_MAX).error(), Error::kBadAddress);
  EXPECT_EQ(t.check_remote_write(k.rkey + 1, 1000, 1).error(), Error::kBadRkey);
  auto local_only = *t.register_region(nullptr, 100, 0, kLocalWrite);
  EXPECT_EQ(t.check_remote_write(local_only.rkey, 0, 1).error(), Error::kBadRkey);
  EXPECT_TRUE(t.check_local(local_only.lkey, 0, 100));
}

TEST(MemoryTable, deregister__stale_key_does_not_name_the_successor) {
  MemoryTable t;
  auto a = *t.register_region(nullptr, 64, 0, kRemoteWrite);
  ASSERT_TRUE(t.deregister(a.lkey));
  EXPECT_EQ(t.deregister(a.lkey).error(), Error::kNotFound);
  auto b = *t.register_region(nullptr, 64, 0, kRemoteWrite);
  EXPECT_NE(a.rkey, b.rkey);  // same slot, new generation
  EXPECT_EQ(t.check_remote_write(a.rkey, 0, 1).error(), Error::kBadRkey);
  EXPECT_TRUE(t.check_remote_write(b.rkey, 0, 1));
}

TEST(MemoryTable, set_access__grants_and_withdraws_remote_write_keeping_the_keys) {
  MemoryTable t(0x1234);
  auto k = *t.register_region(nullptr, 64, 0, kLocalWrite);
  EXPECT_EQ(t.check_remote_write(k.rkey, 0, 1).error(), Error::kBadRkey);
  ASSERT_TRUE(t.set_access(k.lkey, kLocalWrite | kRemoteWrite));
  EXPECT_TRUE(t.check_remote_write(k.rkey, 0, 1));
  ASSERT_TRUE(t.set_access(k.lkey, kLocalWrite));
  EXPECT_EQ(t.check_remote_write(k.rkey, 0, 1).error(), Error::kBadRkey);
  EXPECT_TRUE(t.check_local(k.lkey, 0, 64));
  ASSERT_TRUE(t.deregister(k.lkey));
  EXPECT_EQ(t.set_access(k.lkey, kRemoteWrite).error(), Error::kNotFound);
}

}  // namespace
}  // namespace mrc
