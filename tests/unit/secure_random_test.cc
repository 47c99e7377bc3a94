// secure_random (src/net/secure_random.h): getrandom(2) wrappers.
#include "net/secure_random.h"

#include <gtest/gtest.h>

#include <array>
#include <set>

namespace mrc::net {
namespace {

TEST(SecureRandom, secure_random_u64__values_differ_and_are_never_zero) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 64; ++i) {
    auto v = secure_random_u64();
    ASSERT_TRUE(v) << v.error().message;
    EXPECT_NE(*v, 0u);
    seen.insert(*v);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST(SecureRandom, secure_random_bytes__fills_every_byte) {
  std::array<uint8_t, 4096> a{}, b{};
  ASSERT_TRUE(secure_random_bytes(a));
  ASSERT_TRUE(secure_random_bytes(b));
  EXPECT_NE(a, b);
  int zeros = 0;
  for (uint8_t x : a)
    zeros += x == 0;
  EXPECT_LT(zeros, 64);  // ~16 expected
}

}  // namespace
}  // namespace mrc::net
