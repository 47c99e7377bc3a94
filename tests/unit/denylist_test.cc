#include "sim/denylist.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace mrc::sim {
namespace {

DenylistConfig config(uint32_t probes = 100, double deny_loss = 0.05, uint32_t clear_rounds = 3) {
  DenylistConfig c;
  c.interval = us(100);
  c.probes = probes;
  c.deny_loss = deny_loss;
  c.clear_rounds = clear_rounds;
  return c;
}

using Change = LinkDenylist::Change;

TEST(LinkDenylist, a_round_at_the_threshold_denies_and_one_below_does_not) {
  LinkDenylist d(config(100, 0.05), 4, 2);
  EXPECT_EQ(d.on_round(0, 4), Change::kNone);
  EXPECT_FALSE(d.denied(0));
  EXPECT_EQ(d.on_round(0, 5), Change::kDenied);
  EXPECT_TRUE(d.denied(0));
  EXPECT_EQ(d.denials(), 1u);
  EXPECT_EQ(d.on_round(0, 50), Change::kNone);  // already denied
  EXPECT_EQ(d.denials(), 1u);
}

TEST(LinkDenylist, allowed_again_after_clear_rounds_in_a_row) {
  LinkDenylist d(config(100, 0.05, 3), 2, 4);
  ASSERT_EQ(d.on_round(5, 20), Change::kDenied);
  EXPECT_EQ(d.on_round(5, 0), Change::kNone);
  EXPECT_EQ(d.on_round(5, 1), Change::kNone);
  EXPECT_EQ(d.on_round(5, 9), Change::kNone);  // lossy again: the run starts over
  EXPECT_EQ(d.on_round(5, 0), Change::kNone);
  EXPECT_EQ(d.on_round(5, 0), Change::kNone);
  EXPECT_EQ(d.on_round(5, 0), Change::kAllowed);
  EXPECT_FALSE(d.denied(5));
  EXPECT_EQ(d.allows(), 1u);
  EXPECT_EQ(d.on_round(5, 0), Change::kNone);
}

TEST(LinkDenylist, never_denies_the_last_plane_of_a_nic) {
  LinkDenylist d(config(), 2, 3);
  EXPECT_EQ(d.on_round(3, 100), Change::kDenied);  // nic 1, plane 0
  EXPECT_EQ(d.on_round(4, 100), Change::kDenied);  // nic 1, plane 1
  EXPECT_EQ(d.on_round(5, 100), Change::kNone);    // nic 1's last plane stays
  EXPECT_EQ(d.denied_planes(1), 2u);
  EXPECT_EQ(d.on_round(0, 100), Change::kDenied);  // another NIC is on its own
  EXPECT_EQ(d.denied_planes(0), 1u);
  LinkDenylist one(config(), 1, 1);
  EXPECT_EQ(one.on_round(0, 100), Change::kNone);  // a single plane is never denied
}

TEST(LinkDenylist, a_round_without_loss_never_denies_even_with_threshold_zero) {
  LinkDenylist d(config(100, 0.0), 1, 2);
  EXPECT_EQ(d.on_round(0, 0), Change::kNone);
  EXPECT_EQ(d.on_round(0, 1), Change::kDenied);
}

// Whatever the rounds, the policy's state is what its rules say: a NIC keeps a plane, the
// counters add up, and a link denied is allowed only after clear_rounds clean rounds.
RC_GTEST_PROP(LinkDenylist, state_follows_the_rules_for_any_rounds, ()) {
  const auto planes = *rc::gen::inRange<uint32_t>(1, 5);
  const auto nics = *rc::gen::inRange<uint32_t>(1, 4);
  const auto clear = *rc::gen::inRange<uint32_t>(1, 4);
  LinkDenylist d(config(20, 0.1, clear), nics, planes);
  std::vector<uint32_t> clean(nics * planes, 0);
  const auto rounds = *rc::gen::container<std::vector<std::pair<uint32_t, uint32_t>>>(rc::gen::pair(
      rc::gen::inRange<uint32_t>(0, nics * planes), rc::gen::inRange<uint32_t>(0, 21)));
  for (auto [link, lost] : rounds) {
    const bool was = d.denied(link);
    const Change c = d.on_round(link, lost);
    const bool lossy = lost >= 2;
    if (was) {
      clean[link] = lossy ? 0 : clean[link] + 1;
      RC_ASSERT((c == Change::kAllowed) == (clean[link] >= clear));
      if (c == Change::kAllowed) clean[link] = 0;
    } else {
      RC_ASSERT(c != Change::kAllowed);
      if (!lossy) RC_ASSERT(c == Change::kNone);
      clean[link] = 0;
    }
    for (uint32_t n = 0; n < nics; ++n) {
      const bool keeps_a_plane =
          planes == 1 ? d.denied_planes(n) == 0 : d.denied_planes(n) < planes;
      RC_ASSERT(keeps_a_plane);
    }
  }
  uint64_t denied = 0;
  for (uint32_t l = 0; l < nics * planes; ++l)
    denied += d.denied(l);
  RC_ASSERT(d.denials() - d.allows() == denied);
}

}  // namespace
}  // namespace mrc::sim
