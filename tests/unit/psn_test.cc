#include "transport/psn.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace mrc {
namespace {

TEST(Psn, psn_add__wraps_at_2_pow_24) {
  EXPECT_EQ(psn_add(kPsnMask, 1), 0u);
  EXPECT_EQ(psn_add(0, -1), kPsnMask);
  EXPECT_EQ(psn_add(5, 10), 15u);
}

TEST(Psn, psn_diff__signed_modular_distance) {
  EXPECT_EQ(psn_diff(0, kPsnMask), 1);
  EXPECT_EQ(psn_diff(kPsnMask, 0), -1);
  EXPECT_EQ(psn_diff(100, 40), 60);
  EXPECT_EQ(psn_diff(kPsnHalf, 0), -static_cast<int32_t>(kPsnHalf));
}

TEST(Psn, psn_lt__across_the_wrap) {
  EXPECT_TRUE(psn_lt(kPsnMask - 3, 2));
  EXPECT_FALSE(psn_lt(2, kPsnMask - 3));
  EXPECT_TRUE(psn_le(7, 7));
  EXPECT_FALSE(psn_lt(7, 7));
}

TEST(Psn, pow2_at_least__rounds_up_to_a_power_of_two_and_zero_to_one) {
  EXPECT_EQ(pow2_at_least(0), 1u);
  EXPECT_EQ(pow2_at_least(1), 1u);
  EXPECT_EQ(pow2_at_least(3), 4u);
  EXPECT_EQ(pow2_at_least(4096), 4096u);
  EXPECT_EQ(pow2_at_least(4097), 8192u);
}

RC_GTEST_PROP(Psn, psn_diff__inverts_psn_add, (uint32_t base, int32_t delta)) {
  base &= kPsnMask;
  const int32_t d = delta % static_cast<int32_t>(kPsnHalf);
  RC_ASSERT(psn_diff(psn_add(base, d), base) == d);
}

}  // namespace
}  // namespace mrc
