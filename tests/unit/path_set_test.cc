#include "transport/path_set.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>

namespace mrc {
namespace {

std::vector<PathDesc> paths(int n, int ports) {
  std::vector<PathDesc> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)].port = static_cast<uint8_t>(i % ports);
  return v;
}

TEST(PathSet, pick__round_robin_interleaves_planes) {
  PathSet s;
  auto p = paths(8, 4);
  s.init(p, 1, 4, PathPolicy{}, 1);
  int last_port = -1;
  std::set<int> seen;
  for (int k = 0; k < 8; ++k) {
    const int i = s.pick(0, 0xF);
    ASSERT_NE(i, PathSet::kNone);
    EXPECT_NE(static_cast<int>(s.path(i).desc.port), last_port);
    last_port = s.path(i).desc.port;
    seen.insert(i);
  }
  EXPECT_EQ(seen.size(), 8u);  // a full cycle visits every path once
}

TEST(PathSet, pick__respects_port_mask_and_exclude) {
  PathSet s;
  s.init(paths(4, 2), 1, 2, PathPolicy{}, 1);
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(s.path(s.pick(0, 0x2)).desc.port, 1);
  EXPECT_NE(s.pick(0, 0x1, 0), 0);  // 2 is the other port-0 path
  // Only the excluded path is possible: it is still returned (last resort).
  PathSet one;
  one.init(paths(1, 1), 1, 1, PathPolicy{}, 1);
  EXPECT_EQ(one.pick(0, 0x1, 0), 0);
}

TEST(PathSet, pick__burst_stays_on_a_path_then_moves_on_in_round_robin_order) {
  PathSet single, burst;
  PathPolicy pol;
  single.init(paths(8, 2), 1, 2, pol, 7);
  pol.burst = 3;
  burst.init(paths(8, 2), 1, 2, pol, 7);
  // Every third pick is the next path of per-packet spraying, and the two in between repeat it.
  for (int k = 0; k < 2 * 8; ++k) {
    const int next = single.pick(0, 0x3);
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(burst.pick(0, 0x3), next) << "burst " << k << " pick " << j;
  }
}

TEST(PathSet, pick__burst_ends_when_its_path_no_longer_qualifies) {
  PathPolicy pol;
  pol.burst = 4;
  pol.ecn_cooldown = us(5);
  PathSet s;
  s.init(paths(4, 2), 1, 2, pol, 1);
  const int a = s.pick(0, 0x3);
  EXPECT_EQ(s.pick(0, 0x3), a);
  s.on_ecn(a, 0);  // cooling down: the burst ends, and the new path starts one
  const int b = s.pick(us(1), 0x3);
  EXPECT_NE(b, a);
  EXPECT_EQ(s.pick(us(1), 0x3), b);
  EXPECT_NE(s.pick(us(1), 0x3, b), b);  // a retransmission avoids its old path
  const int c = s.pick(us(1), 0x3);
  ASSERT_EQ(s.on_loss(c, us(1)).to, ev::EvState::kAssumedBad);
  const int d = s.pick(us(1), 0x3);
  EXPECT_NE(d, c);
  const uint32_t other_port = 1u << (1 - s.path(d).desc.port);
  EXPECT_NE(s.path(s.pick(us(1), other_port)).desc.port, s.path(d).desc.port);
  const int e = s.pick(us(1), 0x3);
  ASSERT_TRUE(s.replace(e, PathDesc{.port = s.path(e).desc.port}));
  EXPECT_NE(s.pick(us(1), 0x3), e);  // a replaced EV is not the one the burst was for
}

TEST(PathSet, pick__no_burst_while_a_failure_is_being_found_out) {
  PathPolicy pol;
  pol.burst = 4;
  PathSet s, single;
  s.init(paths(8, 2), 1, 2, pol, 3);
  single.init(paths(8, 2), 1, 2, PathPolicy{}, 3);
  const int a = s.pick(0, 0x3);
  EXPECT_EQ(s.pick(0, 0x3), a);
  s.on_loss(a, 0);  // a loss ends the burst; ASSUMED_BAD path: per-packet spraying
  ASSERT_EQ(s.path(a).state, ev::EvState::kAssumedBad);
  ASSERT_EQ(single.pick(0, 0x3), a);  // the same cursor as s
  single.on_loss(a, 0);
  for (int k = 0; k < 7; ++k)
    EXPECT_EQ(s.pick(0, 0x3), single.pick(0, 0x3)) << k;
  uint64_t probe = 0;
  ASSERT_EQ(s.take_due_probe(pol.probe_interval, 0x3, &probe), a);
  ASSERT_TRUE(s.on_probe_reply(a, probe).changed);  // back in use: bursts again
  const int b = s.pick(0, 0x3);
  EXPECT_EQ(s.pick(0, 0x3), b);
  // A retransmission (a path to avoid) neither continues a burst nor starts one.
  const int r = s.pick(0, 0x3, b);
  EXPECT_NE(r, b);
  EXPECT_NE(s.pick(0, 0x3), r);
}

TEST(PathSet, on_ecn__recycles_path_for_cooldown) {
  PathSet s;
  PathPolicy pol;
  pol.ecn_cooldown = us(5);
  s.init(paths(2, 1), 1, 1, pol, 1);
  s.on_ecn(0, 0);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(s.pick(us(1), 0x1), 1);
  EXPECT_EQ(s.usable_count(), 2u);  // cooling is not a state change
  std::set<int> after;
  for (int k = 0; k < 4; ++k)
    after.insert(s.pick(us(6), 0x1));
  EXPECT_EQ(after.size(), 2u);
}

TEST(PathSet, on_ecn__oblivious_policy_ignores_it) {
  PathSet s;
  PathPolicy pol;
  pol.ecn_steering = false;
  s.init(paths(2, 1), 1, 1, pol, 1);
  s.on_ecn(0, 0);
  std::set<int> seen;
  for (int k = 0; k < 2; ++k)
    seen.insert(s.pick(1, 0x1));
  EXPECT_EQ(seen.size(), 2u);
}

TEST(PathSet, on_loss__marks_assumed_bad_until_probe_reply) {
  PathSet s;
  PathPolicy pol;
  pol.probe_interval = us(10);
  s.init(paths(4, 2), 1, 2, pol, 1);
  auto c = s.on_loss(2, us(1));
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(c.to, ev::EvState::kAssumedBad);
  EXPECT_EQ(s.usable_count(), 3u);
  for (int k = 0; k < 12; ++k)
    EXPECT_NE(s.pick(us(2), 0x3), 2);
  EXPECT_EQ(s.next_probe_time(), us(11));
  uint64_t id = 0;
  EXPECT_EQ(s.take_due_probe(us(5), 0x3, &id), PathSet::kNone);
  EXPECT_EQ(s.take_due_probe(us(11), 0x3, &id), 2);
  EXPECT_FALSE(s.on_probe_reply(2, id + 1).changed);  // not the outstanding probe
  auto g = s.on_probe_reply(2, id);
  EXPECT_TRUE(g.changed);
  EXPECT_EQ(g.to, ev::EvState::kGood);
  EXPECT_EQ(s.usable_count(), 4u);
  EXPECT_EQ(s.next_probe_time(), kNever);
}

TEST(PathSet, on_loss__never_below_min_active) {
  PathSet s;
  s.init(paths(3, 1), 2, 1, PathPolicy{}, 1);
  EXPECT_TRUE(s.on_loss(0, 0).changed);
  EXPECT_FALSE(s.on_loss(1, 0).changed);  // would leave 1 < 2
  EXPECT_EQ(s.usable_count(), 2u);
}

TEST(PathSet, set_port_up__removes_and_restores_its_paths) {
  PathSet s;
  s.init(paths(4, 2), 1, 2, PathPolicy{}, 1);
  s.set_port_up(0, false);
  EXPECT_EQ(s.usable_count(), 2u);
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(s.path(s.pick(0, 0x3)).desc.port, 1);
  s.set_port_up(1, false);
  EXPECT_EQ(s.pick(0, 0x3), PathSet::kNone);
  s.set_port_up(0, true);
  EXPECT_EQ(s.usable_count(), 2u);
}

TEST(PathSet, set_denied__never_used_and_reversible) {
  PathSet s;
  s.init(paths(2, 1), 0, 1, PathPolicy{}, 1);
  EXPECT_TRUE(s.set_denied(0, true).changed);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(s.pick(0, 0x1), 1);
  EXPECT_FALSE(s.set_denied(0, true).changed);
  EXPECT_TRUE(s.set_denied(0, false).changed);
  EXPECT_EQ(s.usable_count(), 2u);
}

TEST(PathSet, replace__new_ev_takes_the_index_and_starts_fresh) {
  PathSet s;
  PathPolicy pol;
  pol.ecn_cooldown = us(100);
  s.init(paths(4, 2), 1, 2, pol, 1);
  // Path 1 (port 1) is ASSUMED_BAD and path 3 cools down after ECN; both are replaced.
  ASSERT_TRUE(s.on_loss(1, 0).changed);
  s.on_ecn(3, 0);
  EXPECT_EQ(s.usable_count(), 3u);
  EXPECT_NE(s.next_probe_time(), kNever);
  PathDesc d;
  d.ev[0] = 0x77;
  d.port = 0;  // moves to the other plane
  ASSERT_TRUE(s.replace(1, d));
  EXPECT_EQ(s.path(1).desc.ev[0], 0x77);
  EXPECT_EQ(s.path(1).desc.port, 0);
  EXPECT_EQ(s.path(1).state, ev::EvState::kGood);
  EXPECT_EQ(s.path(1).losses, 0u);
  EXPECT_EQ(s.usable_count(), 4u);
  EXPECT_EQ(s.next_probe_time(), kNever);  // the old EV's probe is forgotten
  PathDesc d3;
  d3.port = 1;
  ASSERT_TRUE(s.replace(3, d3));
  // Three paths on port 0 now, one on port 1; every path is picked in a cycle, 3 at once
  // (no cool-down carried over from the old EV).
  std::set<int> seen;
  for (int k = 0; k < 4; ++k)
    seen.insert(s.pick(us(1), 0x3));
  EXPECT_EQ(seen.size(), 4u);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(s.path(s.pick(us(1), 0x2)).desc.port, 1);
  // A DENIED replacement is never used.
  PathDesc denied = d;
  denied.state = ev::EvState::kDenied;
  ASSERT_TRUE(s.replace(0, denied));
  EXPECT_EQ(s.usable_count(), 3u);
  for (int k = 0; k < 8; ++k)
    EXPECT_NE(s.pick(us(1), 0x3), 0);
}

TEST(PathSet, replace__bad_input_changes_nothing) {
  PathSet s;
  s.init(paths(2, 2), 1, 2, PathPolicy{}, 1);
  PathDesc d;
  d.ev[0] = 9;
  EXPECT_EQ(s.replace(2, d).error(), Error::kInvalidArgument);  // index out of range
  EXPECT_EQ(s.replace(-1, d).error(), Error::kInvalidArgument);
  d.port = 2;
  EXPECT_EQ(s.replace(0, d).error(), Error::kInvalidArgument);  // no port 2
  d.port = 0;
  d.state = ev::EvState::kAssumedBad;
  EXPECT_EQ(s.replace(0, d).error(), Error::kInvalidArgument);  // only the NIC marks bad
  EXPECT_EQ(s.path(0).desc.ev[0], 0);
  EXPECT_EQ(s.usable_count(), 2u);
}

// Random changes between picks (so that bursts are under way when their path changes): every
// pick returns a GOOD path on an up port in its mask, and the excluded path only when no other
// qualifies.
RC_GTEST_PROP(PathSet, pick_only_returns_usable_paths, ()) {
  const int n = *rc::gen::inRange(1, 64);
  const int ports = *rc::gen::inRange(1, 8);
  PathSet s;
  PathPolicy pol;
  pol.burst = *rc::gen::inRange<uint32_t>(1, 17);
  pol.ecn_steering = *rc::gen::arbitrary<bool>();
  s.init(paths(n, ports), 0, static_cast<uint8_t>(ports), pol, *rc::gen::arbitrary<uint64_t>());
  enum Op { kLoss, kDeny, kAllow, kPortDown, kPortUp, kEcn, kReplace, kPick, kOps };
  const auto ops = *rc::gen::container<std::vector<std::pair<int, int>>>(
      rc::gen::pair(rc::gen::inRange(0, static_cast<int>(kOps)), rc::gen::inRange(0, 64)));
  Time now = 0;
  for (const auto& [op, arg] : ops) {
    now += us(1);
    const int path = arg % n;
    switch (op) {
      case kLoss:
        s.on_loss(path, now);
        break;
      case kDeny:
        s.set_denied(path, true);
        break;
      case kAllow:
        s.set_denied(path, false);
        break;
      case kPortDown:
        s.set_port_up(static_cast<uint8_t>(arg % ports), false);
        break;
      case kPortUp:
        s.set_port_up(static_cast<uint8_t>(arg % ports), true);
        break;
      case kEcn:
        s.on_ecn(path, now);
        break;
      case kReplace:
        RC_ASSERT(static_cast<bool>(
            s.replace(path, PathDesc{.port = static_cast<uint8_t>((arg / n) % ports)})));
        break;
      default: {
        const uint32_t mask = static_cast<uint32_t>(arg) * 37 % 255 + 1;
        const int exclude = arg % 3 == 0 ? path : PathSet::kNone;
        const int i = s.pick(now, mask, exclude);
        const auto qualifies = [&](int k) {
          return s.path(k).state == ev::EvState::kGood && s.port_up(s.path(k).desc.port) &&
                 ((mask >> s.path(k).desc.port) & 1);
        };
        if (i == PathSet::kNone) {
          for (int k = 0; k < n; ++k)
            RC_ASSERT(!qualifies(k));
          break;
        }
        RC_ASSERT(qualifies(i));
        if (i == exclude)
          for (int k = 0; k < n; ++k)
            RC_ASSERT(k == exclude || !qualifies(k));
      }
    }
  }
}

}  // namespace
}  // namespace mrc
