#include "net/sockets.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace mrc::net {
namespace {

TEST(Sockets, parse_endpoint__parses_endpoints) {
  auto a = parse_endpoint("fcbb:bb01:4002::", 4791);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->port, 4791);
  EXPECT_EQ(format_in6(a->addr), "fcbb:bb01:4002::");
  auto b = parse_endpoint("[::1]:9000", 4791);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->port, 9000);
  EXPECT_EQ(format_endpoint(*b), "[::1]:9000");
}

TEST(Sockets, parse_endpoint__rejects_bad_endpoints) {
  for (const char* s : {"", "1.2.3.4", "[::1]", "[::1]:", "[::1]:70000", "[::1]x", "zz::1"}) {
    auto e = parse_endpoint(s, 1);
    ASSERT_FALSE(e) << s;
    EXPECT_EQ(e.error().code, NetErrc::kInvalidArgument);
    EXPECT_FALSE(e.error().message.empty());
  }
}

TEST(Sockets, errno_fail__maps_errno_to_codes) {
  EXPECT_EQ(errno_fail("x", ECONNREFUSED).error().code, NetErrc::kRefused);
  EXPECT_EQ(errno_fail("x", ETIMEDOUT).error().code, NetErrc::kTimeout);
  EXPECT_EQ(errno_fail("x", ENETUNREACH).error().code, NetErrc::kNoRoute);
  EXPECT_EQ(errno_fail("connect", EPERM).error().message.rfind("connect: ", 0), 0u);
}

TEST(Sockets, monotonic_clock__now_is_monotonic_picoseconds) {
  MonotonicClock c;
  const Time a = c.now();
  const Time b = c.now();
  EXPECT_LE(a, b);
  EXPECT_LT(b, ms(1000));  // counted from the clock's creation
}

}  // namespace
}  // namespace mrc::net
