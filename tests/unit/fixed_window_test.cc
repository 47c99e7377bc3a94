// Fixed window (CC disabled, the OCP "algorithm NULL").
#include <gtest/gtest.h>

#include "transport/cc/cc.h"
#include "transport/cc/fixed_window.h"

namespace mrc::cc {
namespace {

TEST(FixedWindow, ctor__window_pacing_and_name) {
  auto cc = make_fixed_window(64 * 1024);
  EXPECT_EQ(cc->cwnd(), 64u * 1024);
  EXPECT_EQ(cc->next_send_time(), 0u);
  EXPECT_EQ(cc->next_timer(), kNever);
  EXPECT_STREQ(cc->name(), "fixed");
}

TEST(FixedWindow, on_events__window_never_changes) {
  auto cc = make_fixed_window(10'000);
  cc->on_send(us(1), 4096, 4096);
  cc->on_ack({.now = us(2), .acked_bytes = 4096, .rtt = us(100), .ecn = true}, 0);
  cc->on_ack({.now = us(3), .acked_bytes = 0, .rtt = us(100), .trimmed = true}, 0);
  cc->on_loss(us(4), 4096);
  cc->on_cnp(us(5));
  cc->on_timer(us(6));
  EXPECT_EQ(cc->cwnd(), 10'000u);
  EXPECT_EQ(cc->next_send_time(), 0u);
}

TEST(FixedWindow, set_window__new_size_and_zero_means_unlimited) {
  FixedWindow cc(10'000);
  cc.set_window(20'000);
  EXPECT_EQ(cc.cwnd(), 20'000u);
  cc.set_window(0);
  EXPECT_EQ(cc.cwnd(), UINT64_MAX);
}

TEST(FixedWindow, ctor__zero_means_unlimited) {
  EXPECT_EQ(make_fixed_window(0)->cwnd(), UINT64_MAX);
}

}  // namespace
}  // namespace mrc::cc
