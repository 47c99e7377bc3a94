#include "sim/progress.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mrc::sim {
namespace {

constexpr uint64_t kTotal = 1'000'000;

TEST(EtaEstimator, update__steady_rate_gives_the_remaining_time) {
  EtaEstimator eta(kTotal, 0, "unused");
  EtaEstimate e;
  for (int s = 1; s <= 40; ++s)  // 1% a second: 100 s in all
    e = eta.update(s, 0, kTotal / 100 * s);
  EXPECT_DOUBLE_EQ(e.fraction, 0.4);
  ASSERT_TRUE(e.seconds);
  EXPECT_NEAR(*e.seconds, 60, 1e-6);
}

TEST(EtaEstimator, update__a_slow_start_weighs_only_while_it_is_recent) {
  // 10 s for the first 1%, then 1% a second: the whole run's average would say ~2.3x the time
  // left at 10%; the latest half of the run's rate is the real one.
  EtaEstimator eta(kTotal, 0, "unused");
  EtaEstimate e;
  e = eta.update(10, 0, kTotal / 100);
  for (int s = 11; s <= 40; ++s)
    e = eta.update(s, 0, kTotal / 100 * (1 + s - 10));
  ASSERT_TRUE(e.seconds);
  EXPECT_NEAR(e.fraction, 0.31, 1e-9);
  EXPECT_NEAR(*e.seconds, 69, 1e-6);
}

TEST(EtaEstimator, update__a_slowdown_shows_within_half_the_elapsed_time) {
  // 1% a second for 50 s, then 0.25% a second: at 100 s the rate is the slow one.
  EtaEstimator eta(kTotal, 0, "unused");
  EtaEstimate e;
  for (int s = 1; s <= 100; ++s) {
    const double pct = s <= 50 ? s : 50 + 0.25 * (s - 50);
    e = eta.update(s, 0, static_cast<uint64_t>(kTotal * pct / 100));
  }
  ASSERT_TRUE(e.seconds);
  EXPECT_NEAR(e.fraction, 0.625, 1e-6);
  EXPECT_NEAR(*e.seconds, 37.5 / 0.25, 0.5);
}

TEST(EtaEstimator, update__no_estimate_before_one_percent_or_one_second) {
  EtaEstimator eta(kTotal, 0, "unused");
  EtaEstimate e = eta.update(0.5, 0, kTotal / 10);
  EXPECT_FALSE(e.seconds);
  EXPECT_EQ(e.reason, "ETA from 1% and 1 s on");
  e = eta.update(5, 0, kTotal / 1000);
  EXPECT_FALSE(e.seconds);
  EXPECT_EQ(e.reason, "ETA from 1% and 1 s on");
  EXPECT_DOUBLE_EQ(e.fraction, 0.001);
}

TEST(EtaEstimator, update__nothing_done_over_the_latest_half_says_so) {
  EtaEstimator eta(kTotal, 0, "unused");
  (void)eta.update(1, 0, kTotal / 10);
  (void)eta.update(2, 0, kTotal / 5);
  EtaEstimate e;
  for (int s = 3; s <= 10; ++s)
    e = eta.update(s, 0, kTotal / 5);
  EXPECT_FALSE(e.seconds);
  EXPECT_EQ(e.reason, "no ETA: nothing done for 5 s");
}

TEST(EtaEstimator, update__a_time_bounded_workload_uses_its_deadline) {
  EtaEstimator eta(0, 1000, "unused");
  EtaEstimate e;
  for (int s = 1; s <= 10; ++s)
    e = eta.update(s, static_cast<Time>(50 * s), 0);  // 5% of the deadline a second
  EXPECT_DOUBLE_EQ(e.fraction, 0.5);
  ASSERT_TRUE(e.seconds);
  EXPECT_NEAR(*e.seconds, 10, 1e-6);
}

TEST(EtaEstimator, update__unknown_size_and_no_deadline_give_the_reason) {
  EtaEstimator eta(0, 0, "no ETA: flows started by triggers");
  const EtaEstimate e = eta.update(30, 5000, 12345);
  EXPECT_FALSE(e.seconds);
  EXPECT_EQ(e.fraction, 0);
  EXPECT_EQ(e.reason, "no ETA: flows started by triggers");
}

TEST(EtaEstimator, update__bytes_beyond_the_total_cap_the_fraction) {
  EtaEstimator eta(kTotal, 0, "unused");
  (void)eta.update(1, 0, kTotal / 2);
  const EtaEstimate e = eta.update(2, 0, 2 * kTotal);
  EXPECT_DOUBLE_EQ(e.fraction, 1.0);
  ASSERT_TRUE(e.seconds);
  EXPECT_DOUBLE_EQ(*e.seconds, 0);
}

TEST(EtaEstimator, format_eta__seconds_minutes_hours) {
  EXPECT_EQ(format_eta(0), "0s");
  EXPECT_EQ(format_eta(-3), "0s");
  EXPECT_EQ(format_eta(59.4), "59s");
  EXPECT_EQ(format_eta(245), "4m05s");
  EXPECT_EQ(format_eta(3720), "1h02m");
}

}  // namespace
}  // namespace mrc::sim
