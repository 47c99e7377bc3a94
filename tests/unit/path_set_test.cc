#include "transport/path_set.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>

#include "support/path_descs.h"

namespace mrc {
namespace {

using testpaths::paths;

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
  pol.resurrect_probes = 1;  // the first answer revives (resurrection: tested below)
  pol.resurrect_window = 0;
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
  ASSERT_TRUE(s.on_probe_reply(a, probe, pol.probe_interval).changed);  // back in use: bursts again
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

TEST(PathSet, on_ecn__cool_downs_stay_exact_when_their_epoch_moves) {
  // Slot::cool_off counts 32 bits of picoseconds from an epoch: a stamp set long after the
  // epoch moves it, and stamps still running keep their exact end.
  PathSet s;
  PathPolicy pol;
  pol.ecn_cooldown = us(5);
  s.init(paths(3, 1), 1, 1, pol, 1);
  s.on_ecn(0, 0);
  const Time later = ms(10);  // beyond 2^32 ps of the first epoch
  s.on_ecn(1, later);
  s.on_ecn(2, later + us(4));  // path 1 cools until later + 5 us, path 2 until later + 9 us
  EXPECT_EQ(s.pick(later + us(4), 0x1), 0);  // path 0's old cool-down has ended
  EXPECT_EQ(s.pick(later + us(4), 0x1), 0);
  std::set<int> at5;
  for (int k = 0; k < 4; ++k)
    at5.insert(s.pick(later + us(5), 0x1));
  EXPECT_EQ(at5, (std::set<int>{0, 1}));  // path 1 back exactly at its end, path 2 not yet
  std::set<int> at9;
  for (int k = 0; k < 6; ++k)
    at9.insert(s.pick(later + us(9), 0x1));
  EXPECT_EQ(at9, (std::set<int>{0, 1, 2}));
}

TEST(PathSet, on_ecn__cool_down_longer_than_the_stamp_is_clamped) {
  PathSet s;
  PathPolicy pol;
  pol.ecn_cooldown = ms(10);
  s.init(paths(1, 1), 1, 1, pol, 1);
  EXPECT_LE(s.policy().ecn_cooldown, Time{UINT32_MAX});
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
  pol.resurrect_probes = 1;  // the first answer revives (resurrection: tested below)
  pol.resurrect_window = 0;
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
  EXPECT_FALSE(s.on_probe_reply(2, id + 1, us(12)).changed);  // not the outstanding probe
  auto g = s.on_probe_reply(2, id, us(12));
  EXPECT_TRUE(g.changed);
  EXPECT_EQ(g.to, ev::EvState::kGood);
  EXPECT_EQ(s.usable_count(), 4u);
  EXPECT_EQ(s.next_probe_time(), kNever);
}

// Paper 2.1, 3: an EV comes back only when enough probes succeed over time.
TEST(PathSet, on_probe_reply__revives_after_enough_answers_over_the_window) {
  PathSet s;
  PathPolicy pol;
  pol.probe_interval = us(10);
  pol.resurrect_probes = 4;
  pol.resurrect_window = us(50);
  s.init(paths(4, 2), 1, 2, pol, 1);
  ASSERT_TRUE(s.on_loss(2, 0).changed);
  Time now = 0;
  Time revived = kNever;
  int answers = 0;
  while (revived == kNever && now < us(500)) {
    now = s.next_probe_time();
    uint64_t id = 0;
    bool unanswered = true;
    ASSERT_EQ(s.take_due_probe(now, 0x3, &id, &unanswered), 2);
    EXPECT_FALSE(unanswered);
    ++answers;
    if (s.on_probe_reply(2, id, now + us(1)).changed) revived = now + us(1);
  }
  // Answers at 11, 21, ...: the fourth comes at 41 us, but the window since the first (11 us)
  // lasts until 61 us: the sixth answer.
  EXPECT_EQ(revived, us(61));
  EXPECT_EQ(answers, 6);
  EXPECT_EQ(s.path(2).state, ev::EvState::kGood);
  EXPECT_EQ(s.next_probe_time(), kNever);
}

TEST(PathSet, take_due_probe__unanswered_probes_back_off_up_to_the_limit_and_restart_the_count) {
  PathSet s;
  PathPolicy pol;
  pol.probe_interval = us(10);
  pol.probe_backoff_limit = 3;
  pol.resurrect_probes = 3;
  pol.resurrect_window = 0;
  s.init(paths(4, 2), 1, 2, pol, 1);
  ASSERT_TRUE(s.on_loss(1, 0).changed);
  std::vector<Time> gaps;
  Time prev = 0;
  uint64_t id = 0;
  for (int k = 0; k < 6; ++k) {
    const Time t = s.next_probe_time();
    bool unanswered = false;
    ASSERT_EQ(s.take_due_probe(t, 0x3, &id, &unanswered), 1);
    EXPECT_EQ(unanswered, k > 0);  // the first probe had no predecessor
    gaps.push_back(t - prev);
    prev = t;
  }
  EXPECT_EQ(gaps, (std::vector<Time>{us(10), us(10), us(20), us(40), us(80), us(80)}));
  // Two answers, then one unanswered probe: the count starts over.
  Time t = prev;
  ASSERT_FALSE(s.on_probe_reply(1, id, t + us(1)).changed);
  t = s.next_probe_time();
  EXPECT_EQ(t, prev + us(10));  // after an answer: the base interval
  ASSERT_EQ(s.take_due_probe(t, 0x3, &id), 1);
  ASSERT_FALSE(s.on_probe_reply(1, id, t + us(1)).changed);
  t = s.next_probe_time();
  ASSERT_EQ(s.take_due_probe(t, 0x3, &id), 1);  // not answered
  for (int k = 0; k < 2; ++k) {
    t = s.next_probe_time();
    ASSERT_EQ(s.take_due_probe(t, 0x3, &id), 1);
    ASSERT_FALSE(s.on_probe_reply(1, id, t + us(1)).changed) << k;
  }
  t = s.next_probe_time();
  ASSERT_EQ(s.take_due_probe(t, 0x3, &id), 1);
  EXPECT_TRUE(s.on_probe_reply(1, id, t + us(1)).changed);  // the third answer in a row
}

TEST(PathSet, on_delivered__revives_only_when_every_loss_against_the_path_is_undone) {
  PathSet s;
  s.init(paths(4, 2), 1, 2, PathPolicy{}, 1);
  ASSERT_TRUE(s.on_loss(0, 0).changed);
  EXPECT_TRUE(s.on_delivered(0).changed);  // the loss was reordering: the mark was a mistake
  ASSERT_TRUE(s.on_loss(0, us(1)).changed);
  s.on_loss(0, us(2));                      // a second packet lost on it
  EXPECT_FALSE(s.on_delivered(0).changed);  // one late packet does not outweigh that
  EXPECT_EQ(s.path(0).state, ev::EvState::kAssumedBad);
  EXPECT_TRUE(s.on_delivered(0).changed);  // the second loss was reordering too
  PathSet p;
  p.init(paths(4, 2), 1, 2, PathPolicy{}, 1);
  ASSERT_TRUE(p.on_loss(1, 0).changed);
  uint64_t id = 0;
  ASSERT_EQ(p.take_due_probe(p.next_probe_time(), 0x3, &id), 1);
  ASSERT_EQ(p.take_due_probe(p.next_probe_time(), 0x3, &id), 1);  // the first went unanswered
  EXPECT_FALSE(p.on_delivered(1).changed);
}

// A loss right after the path delivered a trimmed header is congestion (a header dropped at
// a full queue), not a failure: no mark while PathPolicy::trim_hold lasts.
TEST(PathSet, on_loss__held_shortly_after_a_trim) {
  PathSet s;
  PathPolicy pol;
  pol.trim_hold = us(20);
  s.init(paths(4, 2), 1, 2, pol, 1);
  s.on_trim(1, us(10));
  const PathStateChange held = s.on_loss(1, us(29));
  EXPECT_FALSE(held.changed);
  EXPECT_TRUE(held.held);
  EXPECT_EQ(s.path(1).state, ev::EvState::kGood);
  const PathStateChange marked = s.on_loss(1, us(30));
  EXPECT_TRUE(marked.changed);
  EXPECT_FALSE(marked.held);
  EXPECT_EQ(s.path(1).state, ev::EvState::kAssumedBad);
}

TEST(PathSet, defer_probes__holds_every_due_probe_until_then) {
  PathSet s;
  PathPolicy pol;
  pol.probe_interval = us(10);
  s.init(paths(4, 2), 1, 2, pol, 1);
  s.on_loss(0, 0);
  s.on_loss(1, us(5));
  EXPECT_EQ(s.next_probe_time(), us(10));
  s.defer_probes(us(12));
  EXPECT_EQ(s.next_probe_time(), us(12));
  uint64_t id = 0;
  EXPECT_EQ(s.take_due_probe(us(11), 0x3, &id), PathSet::kNone);
  EXPECT_NE(s.take_due_probe(us(15), 0x3, &id), PathSet::kNone);
}

TEST(PathSet, on_loss__never_below_min_active) {
  PathSet s;
  s.init(paths(3, 1), 2, 1, PathPolicy{}, 1);
  EXPECT_TRUE(s.on_loss(0, 0).changed);
  EXPECT_FALSE(s.on_loss(1, 0).changed);  // would leave 1 < 2
  EXPECT_EQ(s.usable_count(), 2u);
}

// A QP at its floor may be held on a blackholed path while a merely lossy one answers probes:
// there the first answer revives, and the kept path can then be mapped out.
TEST(PathSet, on_probe_reply__at_the_min_active_floor_the_first_answer_revives) {
  PathSet s;
  PathPolicy pol;
  pol.probe_interval = us(10);
  s.init(paths(3, 1), 1, 1, pol, 1);      // resurrect_probes 32 over 1 ms by default
  ASSERT_TRUE(s.on_loss(0, 0).changed);   // lossy
  ASSERT_TRUE(s.on_loss(2, 0).changed);   // blackholed
  EXPECT_FALSE(s.on_loss(1, 0).changed);  // blackholed, but the floor keeps it
  ASSERT_EQ(s.usable_count(), 1u);
  uint64_t id = 0;
  const Time t = s.next_probe_time();
  const int probed = s.take_due_probe(t, 0x1, &id);
  ASSERT_NE(probed, PathSet::kNone);
  EXPECT_TRUE(s.on_probe_reply(probed, id, t + us(1)).changed);
  EXPECT_EQ(s.usable_count(), 2u);
  EXPECT_TRUE(s.on_loss(1, t + us(2)).changed);  // above the floor again: mapped out
  EXPECT_EQ(s.usable_count(), 1u);
  EXPECT_EQ(s.path(probed).state, ev::EvState::kGood);
}

TEST(PathSet, set_port_up__removes_and_restores_its_paths) {
  PathSet s;
  s.init(paths(4, 2), 1, 2, PathPolicy{}, 1);
  s.set_port_up(0, false, 0);
  EXPECT_EQ(s.usable_count(), 2u);
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(s.path(s.pick(0, 0x3)).desc.port, 1);
  s.set_port_up(1, false, 0);
  EXPECT_EQ(s.pick(0, 0x3), PathSet::kNone);
  s.set_port_up(0, true, 0);
  EXPECT_EQ(s.usable_count(), 2u);
}

// Paper 3 and 5.2.2: a NIC port that comes back is used again promptly. Its paths that the
// dead port made lose packets are probed as soon as the port is back and return on the first
// answer; a path that then fails its probe goes back to the full resurrection rule.
TEST(PathSet, set_port_up__paths_the_dead_port_mapped_out_return_on_the_first_answer) {
  for (const bool peer : {false, true}) {
    PathSet s;
    PathPolicy pol;
    pol.probe_interval = us(10);
    s.init(paths(8, 2), 1, 2, pol, 1);
    // Port 1 dies: its packets on paths 1 and 3 are lost and mark them before the port is
    // seen down (a NIC's remap delay; at the peer, the bitmap's round trip).
    ASSERT_TRUE(s.on_loss(1, us(1)).changed);
    ASSERT_TRUE(s.on_loss(3, us(2)).changed);
    if (peer) {
      s.set_peer_ports_down(0x2, us(5));
    } else {
      s.set_port_up(1, false, us(5));
    }
    ASSERT_TRUE(s.on_loss(5, us(6)).changed);  // a packet in flight found lost later
    uint64_t id = 0;
    EXPECT_EQ(s.take_due_probe(us(100), 0x3, &id), PathSet::kNone);  // no probe while down
    if (peer) {
      s.set_peer_ports_down(0, us(300));
    } else {
      s.set_port_up(1, true, us(300));
    }
    EXPECT_EQ(s.next_probe_time(), us(300));
    std::set<int> returned;
    int failing = PathSet::kNone;
    for (int k = 0; k < 3; ++k) {
      const int i = s.take_due_probe(us(300), 0x3, &id);
      ASSERT_NE(i, PathSet::kNone);
      if (i == 5) {  // path 5 is dead for another reason: its probe goes unanswered
        failing = i;
        continue;
      }
      const PathStateChange c = s.on_probe_reply(i, id, us(302));
      EXPECT_TRUE(c.changed) << "path " << i;
      returned.insert(i);
    }
    EXPECT_EQ(returned, (std::set<int>{1, 3}));
    ASSERT_EQ(failing, 5);
    EXPECT_EQ(s.path(5).state, ev::EvState::kAssumedBad);
    // Its next probe finds the last one unanswered: from then on it needs resurrect_probes
    // answers over resurrect_window like any path.
    bool unanswered = false;
    const Time t = s.next_probe_time();
    ASSERT_EQ(s.take_due_probe(t, 0x3, &id, &unanswered), 5);
    EXPECT_TRUE(unanswered);
    EXPECT_FALSE(s.on_probe_reply(5, id, t + us(1)).changed);
    EXPECT_EQ(s.usable_count(), 7u);
  }
}

TEST(PathSet, set_port_up__with_port_return_probes_0_a_returning_port_waits_for_resurrection) {
  PathSet s;
  PathPolicy pol;
  pol.probe_interval = us(10);
  pol.port_return_probes = 0;
  s.init(paths(4, 2), 1, 2, pol, 1);
  ASSERT_TRUE(s.on_loss(1, us(1)).changed);
  s.set_port_up(1, false, us(5));
  s.set_port_up(1, true, us(300));
  uint64_t id = 0;
  const Time t = s.next_probe_time();
  ASSERT_EQ(s.take_due_probe(t, 0x3, &id), 1);
  EXPECT_FALSE(s.on_probe_reply(1, id, t + us(1)).changed);  // 1 of 32 answers
  EXPECT_EQ(s.path(1).state, ev::EvState::kAssumedBad);
}

// A path mapped out before its port was seen down, and losing a packet after the port is
// back, was not only the port's fault: the full rule.
TEST(PathSet, on_loss__after_the_port_is_back_a_path_needs_the_full_resurrection) {
  PathSet s;
  PathPolicy pol;
  pol.probe_interval = us(10);
  s.init(paths(4, 2), 1, 2, pol, 1);
  ASSERT_TRUE(s.on_loss(1, us(1)).changed);
  s.set_port_up(1, false, us(5));
  s.set_port_up(1, true, us(300));
  EXPECT_FALSE(s.on_loss(1, us(301)).changed);  // a packet sent on it before it was marked
  uint64_t id = 0;
  ASSERT_EQ(s.take_due_probe(us(300), 0x3, &id), 1);
  EXPECT_FALSE(s.on_probe_reply(1, id, us(302)).changed);
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
RC_GTEST_PROP(PathSet, pick__only_returns_usable_paths, ()) {
  const int n = *rc::gen::inRange(1, 64);
  const int ports = *rc::gen::inRange(1, 8);
  PathSet s;
  PathPolicy pol;
  pol.burst = *rc::gen::inRange<uint32_t>(1, 17);
  pol.ecn_steering = *rc::gen::arbitrary<bool>();
  pol.active_per_plane = *rc::gen::inRange<uint32_t>(0, 4);
  pol.ecn_swap_marks = *rc::gen::inRange<uint32_t>(0, 3);
  s.init(paths(n, ports), 0, static_cast<uint8_t>(ports), pol, *rc::gen::arbitrary<uint64_t>());
  enum Op { kLoss, kDeny, kAllow, kPortDown, kPortUp, kEcn, kUnmarked, kReplace, kPick, kOps };
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
        s.set_port_up(static_cast<uint8_t>(arg % ports), false, now);
        break;
      case kPortUp:
        s.set_port_up(static_cast<uint8_t>(arg % ports), true, now);
        break;
      case kEcn: {
        const PathStateChange c = s.on_ecn(path, now);
        if (c.swapped_in != PathSet::kNone) {  // same port; the GOOD backup is now active
          RC_ASSERT(c.replaced == path);
          RC_ASSERT(!s.active(path));
          RC_ASSERT(s.active(c.swapped_in));
          RC_ASSERT(s.port_of(c.swapped_in) == s.port_of(path));
          RC_ASSERT(s.state_of(c.swapped_in) == ev::EvState::kGood);
        }
        break;
      }
      case kUnmarked:
        s.on_unmarked(path);
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
          return s.active(k) && s.path(k).state == ev::EvState::kGood &&
                 s.port_up(s.path(k).desc.port) && ((mask >> s.path(k).desc.port) & 1);
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

// ---- active and backup sets (paper 2.1, 2.4, 4) --------------------------------------------

// Usable active paths per port.
std::vector<int> usable_per_port(const PathSet& s, int ports) {
  std::vector<int> n(static_cast<size_t>(ports), 0);
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (s.active(i) && s.state_of(i) == ev::EvState::kGood && s.port_up(s.port_of(i)))
      ++n[s.port_of(i)];
  }
  return n;
}

TEST(PathSet, init__active_per_plane_sprays_the_first_evs_of_each_port_and_keeps_the_rest_back) {
  PathSet s;
  PathPolicy pol;
  pol.active_per_plane = 2;
  s.init(paths(12, 4), 1, 4, pol, 3);  // 3 per port: 2 active, 1 backup
  EXPECT_EQ(s.usable_count(), 8u);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(s.active(i), i < 8) << i;
  std::set<int> seen;
  for (int k = 0; k < 32; ++k)
    seen.insert(s.pick(0, 0xF));
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(PathSet, on_loss__a_backup_of_the_same_port_takes_the_mapped_out_evs_slot) {
  PathSet s;
  PathPolicy pol;
  pol.active_per_plane = 2;
  pol.resurrect_probes = 1;  // the first answer revives (resurrection: tested below)
  pol.resurrect_window = 0;
  s.init(paths(12, 4), 1, 4, pol, 3);
  const PathStateChange c = s.on_loss(5, us(1));  // port 1
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(c.replaced, 5);
  EXPECT_EQ(c.swapped_in, 9);  // port 1's backup
  EXPECT_FALSE(s.active(5));
  EXPECT_TRUE(s.active(9));
  EXPECT_EQ(s.swaps(), 1u);
  EXPECT_EQ(usable_per_port(s, 4), (std::vector<int>{2, 2, 2, 2}));  // planes stay equal
  // Port 1 has no backup left: its next loss leaves it one short, as without a backup set.
  const PathStateChange d = s.on_loss(1, us(2));
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.swapped_in, PathSet::kNone);
  EXPECT_EQ(usable_per_port(s, 4), (std::vector<int>{2, 1, 2, 2}));
  // The probed EV 5 answers: it is a GOOD backup now, and refills the slot EV 1 left bad.
  uint64_t id = 0;
  int probed = PathSet::kNone;
  while ((probed = s.take_due_probe(us(100), 0xF, &id)) != 5)
    ASSERT_NE(probed, PathSet::kNone);
  const PathStateChange r = s.on_probe_reply(5, id, us(101));
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.swapped_in, 5);
  EXPECT_EQ(r.replaced, 1);
  EXPECT_EQ(usable_per_port(s, 4), (std::vector<int>{2, 2, 2, 2}));
}

TEST(PathSet, on_loss__without_backups_a_mapped_out_ev_is_only_skipped) {
  PathSet s;
  s.init(paths(12, 4), 1, 4, PathPolicy{}, 3);
  const PathStateChange c = s.on_loss(5, us(1));
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(c.swapped_in, PathSet::kNone);
  EXPECT_EQ(usable_per_port(s, 4), (std::vector<int>{3, 2, 3, 3}));
  EXPECT_EQ(s.swaps(), 0u);
}

TEST(PathSet, set_denied__swaps_a_backup_in_and_a_denied_ev_at_init_starts_as_a_backup) {
  std::vector<PathDesc> v = paths(8, 2);
  v[0].state = ev::EvState::kDenied;
  PathSet s;
  PathPolicy pol;
  pol.active_per_plane = 3;
  s.init(v, 1, 2, pol, 1);
  EXPECT_FALSE(s.active(0));
  EXPECT_TRUE(s.active(6));  // port 0's backup took the denied EV's slot
  EXPECT_EQ(s.swaps(), 0u);  // configuration, not a swap
  EXPECT_EQ(usable_per_port(s, 2), (std::vector<int>{3, 3}));
  const PathStateChange c = s.set_denied(3, true);  // port 1
  EXPECT_EQ(c.swapped_in, 7);
  EXPECT_EQ(usable_per_port(s, 2), (std::vector<int>{3, 3}));
}

TEST(PathSet, on_ecn__a_run_of_marks_swaps_the_ev_for_a_backup_in_rotation) {
  PathSet s;
  PathPolicy pol;
  pol.active_per_plane = 2;
  pol.ecn_swap_marks = 3;
  s.init(paths(16, 4), 1, 4, pol, 3);  // port 1: 1 and 5 active, 9 and 13 backups
  // An unmarked echo ends a run: two marks, a clean echo, two marks change nothing.
  EXPECT_EQ(s.on_ecn(1, us(1)).swapped_in, PathSet::kNone);
  EXPECT_EQ(s.on_ecn(1, us(1)).swapped_in, PathSet::kNone);
  s.on_unmarked(1);
  EXPECT_EQ(s.on_ecn(1, us(2)).swapped_in, PathSet::kNone);
  EXPECT_EQ(s.on_ecn(1, us(2)).swapped_in, PathSet::kNone);
  EXPECT_TRUE(s.active(1));
  // The third mark in a row: a backup of port 1 takes the slot; nothing changed state.
  const PathStateChange c = s.on_ecn(1, us(3));
  EXPECT_FALSE(c.changed);
  EXPECT_EQ(c.replaced, 1);
  EXPECT_EQ(c.swapped_in, 9);
  EXPECT_FALSE(s.active(1));
  EXPECT_EQ(s.state_of(1), ev::EvState::kGood);  // a congested EV waits as a GOOD backup
  EXPECT_EQ(s.swaps(), 1u);
  EXPECT_EQ(s.ecn_swaps(), 1u);
  EXPECT_EQ(usable_per_port(s, 4), (std::vector<int>{2, 2, 2, 2}));  // planes stay equal
  // The new EV starts without cool-down or marks, and is picked at once.
  std::set<int> seen;
  for (int k = 0; k < 8; ++k)
    seen.insert(s.pick(us(3), 0x2));
  EXPECT_EQ(seen, (std::set<int>{5, 9}));
  // Backups rotate: the next congested EV of port 1 takes 13, not the 1 that just left.
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(s.on_ecn(5, us(4)).swapped_in, PathSet::kNone);
  EXPECT_EQ(s.on_ecn(5, us(4)).swapped_in, 13);
  for (int k = 0; k < 2; ++k)
    s.on_ecn(9, us(5));
  EXPECT_EQ(s.on_ecn(9, us(5)).swapped_in, 1);
  // Marks on a backup (echoes of packets it sent while active) change nothing.
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(s.on_ecn(5, us(6)).swapped_in, PathSet::kNone);
  EXPECT_EQ(s.ecn_swaps(), 3u);
}

TEST(PathSet, on_ecn__without_swap_marks_backups_or_steering_only_recycles) {
  for (int variant = 0; variant < 3; ++variant) {
    PathPolicy pol;
    pol.active_per_plane = variant == 0 ? 0 : 2;
    pol.ecn_swap_marks = variant == 1 ? 0 : 1;
    pol.ecn_steering = variant != 2;
    PathSet s;
    s.init(paths(8, 2), 1, 2, pol, 1);
    for (int k = 0; k < 10; ++k)
      EXPECT_EQ(s.on_ecn(0, us(1)).swapped_in, PathSet::kNone) << variant;
    EXPECT_TRUE(s.active(0)) << variant;
    EXPECT_EQ(s.ecn_swaps(), 0u) << variant;
  }
  // A port without a GOOD backup keeps its marked EV (still recycled).
  PathPolicy pol;
  pol.active_per_plane = 2;
  pol.ecn_swap_marks = 1;
  pol.ecn_cooldown = us(5);
  PathSet s;
  s.init(paths(4, 2), 1, 2, pol, 1);
  EXPECT_EQ(s.on_ecn(0, 0).swapped_in, PathSet::kNone);
  EXPECT_NE(s.pick(us(1), 0x1), 0);
}

TEST(PathSet, ev__expands_the_template_and_keeps_evs_that_differ_widely_whole) {
  std::vector<PathDesc> v(4);
  for (int i = 0; i < 4; ++i) {
    v[static_cast<size_t>(i)].ev[0] = 0x20;
    v[static_cast<size_t>(i)].ev[4] = 0x11;
    v[static_cast<size_t>(i)].ev[5] = static_cast<uint8_t>(i);  // a spine uSID
    v[static_cast<size_t>(i)].ev[9] = 0x33;
  }
  PathSet s;
  s.init(v, 1, 1, PathPolicy{}, 1);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(s.ev(i), v[static_cast<size_t>(i)].ev);
  const size_t compact = s.heap_bytes();
  // An EV differing in bytes 0 and 31: no 4-byte window holds the difference.
  PathDesc wide = v[2];
  wide.ev[31] = 0xEE;
  wide.ev[0] = 0x21;
  ASSERT_TRUE(s.replace(2, wide));
  EXPECT_EQ(s.ev(2), wide.ev);
  EXPECT_EQ(s.ev(1), v[1].ev);
  EXPECT_EQ(s.ev(3), v[3].ev);
  // Later replacements in table form keep their own entries.
  PathDesc other = v[0];
  other.ev[20] = 0x5A;
  ASSERT_TRUE(s.replace(3, other));
  EXPECT_EQ(s.ev(3), other.ev);
  EXPECT_EQ(s.ev(0), v[0].ev);
  EXPECT_EQ(s.ev(2), wide.ev);
  EXPECT_GT(s.heap_bytes(), compact);  // the table costs 32 bytes a path
}

TEST(PathSet, ev__values_wider_than_16_bits_and_loss_counts_are_kept_per_path) {
  // EVs that count up from the first (a generated profile) are computed from the template
  // and the index: a path then holds only its state. Once one does not fit, every path's
  // value is stored, 2 bytes each, and 2 more when one needs four bytes; losses are counted
  // only for paths that lost packets.
  std::vector<PathDesc> v(4);
  for (int i = 0; i < 4; ++i) {
    v[static_cast<size_t>(i)].ev[10] = static_cast<uint8_t>(0x40 + i);
    v[static_cast<size_t>(i)].ev[11] = static_cast<uint8_t>(i);
  }
  PathSet s;
  s.init(v, 1, 1, PathPolicy{}, 1);
  const size_t narrow = s.heap_bytes();
  EXPECT_EQ(narrow, 1u);  // four 2-bit states
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(s.ev(i), v[static_cast<size_t>(i)].ev);
  PathDesc wider = v[3];
  wider.ev[8] = 0x99;  // now the EVs differ in bytes 8..11
  ASSERT_TRUE(s.replace(3, wider));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(s.ev(i), v[static_cast<size_t>(i)].ev);
  EXPECT_EQ(s.ev(3), wider.ev);
  EXPECT_EQ(s.heap_bytes(), narrow + 4 * 2 * sizeof(uint16_t));
  PathPolicy keep;
  keep.loss_marking = false;
  s.init(v, 1, 1, keep, 1);
  s.on_loss(2, 0);
  s.on_loss(2, 0);
  s.on_loss(0, 0);
  EXPECT_EQ(s.path(0).losses, 1u);
  EXPECT_EQ(s.path(1).losses, 0u);
  EXPECT_EQ(s.path(2).losses, 2u);
  ASSERT_TRUE(s.replace(2, v[2]));
  EXPECT_EQ(s.path(2).losses, 0u);  // a replaced EV starts afresh
  EXPECT_EQ(s.path(0).losses, 1u);
}

// Whatever happens, a port never has a GOOD backup while one of its active EVs is not GOOD,
// and the active set of a port never grows beyond active_per_plane (replace keeps ports here).
RC_GTEST_PROP(PathSet, backups__fill_every_active_slot_they_can, ()) {
  const int ports = *rc::gen::inRange(1, 5);
  const int per_port = *rc::gen::inRange(1, 6);
  const int n = ports * per_port;
  PathPolicy pol;
  pol.active_per_plane = static_cast<uint32_t>(*rc::gen::inRange(1, per_port + 1));
  pol.resurrect_probes = 1;
  pol.resurrect_window = 0;
  PathSet s;
  s.init(paths(n, ports), 0, static_cast<uint8_t>(ports), pol, *rc::gen::arbitrary<uint64_t>());
  enum Op { kLoss, kDeny, kAllow, kProbe, kDelivered, kReplace, kOps };
  const auto ops = *rc::gen::container<std::vector<std::pair<int, int>>>(
      rc::gen::pair(rc::gen::inRange(0, static_cast<int>(kOps)), rc::gen::inRange(0, 64)));
  Time now = 0;
  for (const auto& [op, arg] : ops) {
    now += us(60);
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
      case kProbe: {
        uint64_t id = 0;
        const int p = s.take_due_probe(now, ~0u, &id);
        if (p != PathSet::kNone) s.on_probe_reply(p, id, now);
        break;
      }
      case kDelivered:
        s.on_delivered(path);
        break;
      default: {
        PathDesc d{.port = s.port_of(path)};
        d.state = arg % 2 ? ev::EvState::kGood : ev::EvState::kDenied;
        RC_ASSERT(static_cast<bool>(s.replace(path, d)));
      }
    }
    for (int port = 0; port < ports; ++port) {
      int active = 0, active_bad = 0, good_backups = 0;
      for (int i = 0; i < n; ++i) {
        if (s.port_of(i) != port) continue;
        const bool good = s.state_of(i) == ev::EvState::kGood;
        if (s.active(i)) {
          ++active;
          active_bad += good ? 0 : 1;
        } else {
          good_backups += good ? 1 : 0;
        }
      }
      RC_ASSERT(active == static_cast<int>(pol.active_per_plane));
      RC_ASSERT(active_bad == 0 || good_backups == 0);
    }
  }
}

// Paper Figs 12-13 with the simulator's probe interval: an EV that drops 20% of its packets
// (probes and data alike) is marked on its first loss and then stays out: revived rarely if
// ever, and at once marked again by the data it then loses; an EV whose loss stops comes
// back within the resurrection window plus the backed-off probe interval.
RC_GTEST_PROP(PathSet, on_loss__a_lossy_ev_stays_out_and_a_recovered_ev_comes_back, ()) {
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const bool recovers = *rc::gen::arbitrary<bool>();
  PathPolicy pol;
  pol.probe_interval = us(20);
  PathSet s;
  s.init(paths(8, 2), 1, 2, pol, seed);
  Rng rng(seed);
  const auto lost = [&] { return rng.below(5) == 0; };  // 20%
  constexpr int kEv = 3;
  constexpr Time kRecovery = ms(20), kEnd = ms(40);
  RC_ASSERT(s.on_loss(kEv, 0).changed);
  uint64_t reply_id = 0;
  Time reply_at = kNever;
  Time good_time = 0, back_at = kNever;
  int revivals = 0;
  for (Time now = 0; now < kEnd; now += us(1)) {
    const bool lossy = !recovers || now < kRecovery;
    if (recovers && now == kRecovery && s.path(kEv).state == ev::EvState::kGood) back_at = now;
    if (reply_at <= now) {
      if (s.on_probe_reply(kEv, reply_id, now).changed) {
        ++revivals;
        if (recovers && now >= kRecovery && back_at == kNever) back_at = now;
      }
      reply_at = kNever;
    }
    uint64_t id = 0;
    if (s.next_probe_time() <= now && s.take_due_probe(now, 0x3, &id) == kEv && !(lossy && lost()))
      reply_id = id, reply_at = now + us(3);
    if (s.path(kEv).state == ev::EvState::kGood) {
      good_time += us(1);
      // One data packet per microsecond on it; a loss marks it again.
      if (lossy && lost()) s.on_loss(kEv, now);
    }
  }
  if (!recovers) {
    RC_ASSERT(revivals <= 1);
    RC_ASSERT(good_time <= us(20));
  } else {
    RC_ASSERT(back_at != kNever);
    // The first answer comes within the longest backed-off interval of the recovery.
    RC_ASSERT(back_at <= kRecovery + (pol.probe_interval << pol.probe_backoff_limit) +
                             pol.resurrect_window + us(30));
    RC_ASSERT(s.path(kEv).state == ev::EvState::kGood);
  }
}

// Paper 2.1, 2.3: a path holds its state; its EV value and port are computed from the
// template and its index while the set is regular (a generated profile: port i % ports, the
// same value on every port, counting up), the round-robin order is stored only once a swap
// makes it irregular, and ECN cool-down stamps only while a path cools.
TEST(PathSet, heap_bytes__a_regular_set_holds_two_bits_a_path_until_it_needs_more) {
  constexpr int kPorts = 4, kN = 16;
  constexpr size_t kStates = kN / 4;  // 2 bits a path
  auto v = paths(kN, kPorts);
  for (int i = 0; i < kN; ++i)
    v[static_cast<size_t>(i)].ev[3] = static_cast<uint8_t>(10 + 3 * (i / kPorts));
  PathPolicy pol;
  pol.active_per_plane = 2;  // paths 0-7 active, 8-15 backups
  pol.ecn_cooldown = us(8);
  pol.ecn_swap_marks = 0;  // the cool-down stamps alone (runs of marks add a byte a position)
  PathSet s;
  s.init(v, 1, kPorts, pol, 1);
  EXPECT_EQ(s.heap_bytes(), kStates);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(s.ev(i), v[static_cast<size_t>(i)].ev);
    EXPECT_EQ(s.port_of(i), i % kPorts);
    EXPECT_EQ(s.active(i), i < 8);
  }
  // ECN: a stamp per active position while a path cools, none once every cool-down is over.
  s.on_ecn(1, us(1));
  EXPECT_EQ(s.heap_bytes(), kStates + 8 * sizeof(uint32_t));
  EXPECT_NE(s.pick(us(2), 0x2), 1) << "path 1 cools: port 1's other active path goes";
  EXPECT_EQ(s.heap_bytes(), kStates + 8 * sizeof(uint32_t));
  s.pick(us(1) + pol.ecn_cooldown, 0xF);
  EXPECT_EQ(s.heap_bytes(), kStates);
  // A swap: the order is stored (a position per active path, a slot per path).
  const auto c = s.on_loss(2, us(20));
  ASSERT_TRUE(c.changed);
  EXPECT_EQ(c.swapped_in, 10);
  EXPECT_TRUE(s.active(10));
  EXPECT_FALSE(s.active(2));
  EXPECT_GE(s.heap_bytes(), kStates + 8 * sizeof(uint16_t) + kN * sizeof(uint16_t));
  // A port that does not follow the index: ports are stored, one byte a path.
  PathSet t;
  auto w = v;
  std::swap(w[0].port, w[1].port);
  t.init(w, 1, kPorts, PathPolicy{}, 1);
  EXPECT_EQ(t.port_of(0), 1);
  EXPECT_EQ(t.port_of(1), 0);
  EXPECT_GE(t.heap_bytes(), kStates + kN);
}

// Whatever the EVs and ports (regular or not) and whatever replaces them, every path reports
// the EV and port it was given.
RC_GTEST_PROP(PathSet, ev__every_path_reports_its_ev_and_port, ()) {
  const int ports = *rc::gen::inRange(1, 9);
  const int n = *rc::gen::inRange(1, 80);
  const bool regular = *rc::gen::arbitrary<bool>();
  const uint32_t first = *rc::gen::arbitrary<uint32_t>();
  const uint32_t step = *rc::gen::element(0u, 1u, 3u, 0x10000u, 0xFFFFFFFFu);
  std::vector<PathDesc> model(static_cast<size_t>(n));
  auto set_value = [](PathDesc& d, uint32_t x) {
    d.ev[4] = static_cast<uint8_t>(x >> 24);
    d.ev[5] = static_cast<uint8_t>(x >> 16);
    d.ev[6] = static_cast<uint8_t>(x >> 8);
    d.ev[7] = static_cast<uint8_t>(x);
  };
  for (int i = 0; i < n; ++i) {
    PathDesc& d = model[static_cast<size_t>(i)];
    d.ev[0] = 0x20;
    if (regular) {
      d.port = static_cast<uint8_t>(i % ports);
      set_value(d, first + static_cast<uint32_t>(i / ports) * step);
    } else {
      d.port = static_cast<uint8_t>(*rc::gen::inRange(0, ports));
      set_value(d, *rc::gen::element(first, first + 1, *rc::gen::arbitrary<uint32_t>()));
    }
  }
  PathSet s;
  s.init(model, 0, static_cast<uint8_t>(ports), PathPolicy{}, 1);
  const auto check = [&] {
    for (int i = 0; i < n; ++i) {
      RC_ASSERT(s.ev(i) == model[static_cast<size_t>(i)].ev);
      RC_ASSERT(s.port_of(i) == model[static_cast<size_t>(i)].port);
      RC_ASSERT(s.path(i).desc.port == model[static_cast<size_t>(i)].port);
    }
  };
  check();
  const int replaces = *rc::gen::inRange(0, 6);
  for (int r = 0; r < replaces; ++r) {
    const int i = *rc::gen::inRange(0, n);
    PathDesc d = model[static_cast<size_t>(i)];
    d.port = static_cast<uint8_t>(*rc::gen::inRange(0, ports));
    set_value(d, *rc::gen::arbitrary<uint32_t>());
    if (*rc::gen::arbitrary<bool>()) d.ev[20] = 0x77;  // beyond the template's window: a table
    RC_ASSERT(static_cast<bool>(s.replace(i, d)));
    model[static_cast<size_t>(i)] = d;
    check();
  }
}

// The compact form is only a form: a set whose values and ports are stored (a replace that
// changed them and put them back) picks, marks, swaps and probes exactly as the regular one.
RC_GTEST_PROP(PathSet, pick__stored_and_computed_paths_behave_alike, ()) {
  const int ports = *rc::gen::inRange(1, 5);
  const int per_port = *rc::gen::inRange(1, 7);
  const int n = ports * per_port;
  auto v = paths(n, ports);
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)].ev[3] = static_cast<uint8_t>(i / ports);
  PathPolicy pol;
  pol.active_per_plane = static_cast<uint32_t>(*rc::gen::inRange(0, per_port + 1));
  pol.ecn_swap_marks = static_cast<uint32_t>(*rc::gen::inRange(0, 3));
  pol.resurrect_probes = static_cast<uint32_t>(*rc::gen::inRange(1, 3));
  pol.resurrect_window = 0;
  pol.burst = static_cast<uint32_t>(*rc::gen::inRange(1, 3));
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  PathSet a, b;
  a.init(v, 1, static_cast<uint8_t>(ports), pol, seed);
  b.init(v, 1, static_cast<uint8_t>(ports), pol, seed);
  if (ports > 1) {
    PathDesc moved = v[0];
    moved.port = 1;
    moved.ev[3] = 0xEE;
    RC_ASSERT(static_cast<bool>(b.replace(0, moved)));
    RC_ASSERT(static_cast<bool>(b.replace(0, v[0])));
    RC_ASSERT(b.heap_bytes() > a.heap_bytes());  // values and ports stored
  }
  enum Op { kPick, kEcn, kTrim, kUnmarked, kLoss, kProbe, kDelivered, kDeny, kAllow, kPort, kOps };
  const auto ops = *rc::gen::container<std::vector<std::pair<int, int>>>(
      rc::gen::pair(rc::gen::inRange(0, static_cast<int>(kOps)), rc::gen::inRange(0, 64)));
  Time now = 0;
  for (const auto& [op, arg] : ops) {
    now += ns(700) * static_cast<Time>(1 + arg % 5);
    const int path = arg % n;
    PathStateChange ca, cb;
    switch (op) {
      case kPick: {
        const uint32_t mask = static_cast<uint32_t>(arg) | 1u;
        const int exclude = arg % 3 == 0 ? path : PathSet::kNone;
        RC_ASSERT(a.pick(now, mask, exclude) == b.pick(now, mask, exclude));
        break;
      }
      case kEcn:
        ca = a.on_ecn(path, now);
        cb = b.on_ecn(path, now);
        break;
      case kTrim:
        ca = a.on_trim(path, now);
        cb = b.on_trim(path, now);
        break;
      case kUnmarked:
        a.on_unmarked(path);
        b.on_unmarked(path);
        break;
      case kLoss:
        ca = a.on_loss(path, now);
        cb = b.on_loss(path, now);
        break;
      case kProbe: {
        uint64_t ia = 0, ib = 0;
        const int pa = a.take_due_probe(now, ~0u, &ia);
        RC_ASSERT(pa == b.take_due_probe(now, ~0u, &ib));
        RC_ASSERT(ia == ib);
        if (pa != PathSet::kNone && arg % 4 != 0) {
          ca = a.on_probe_reply(pa, ia, now);
          cb = b.on_probe_reply(pa, ib, now);
        }
        break;
      }
      case kDelivered:
        ca = a.on_delivered(path);
        cb = b.on_delivered(path);
        break;
      case kDeny:
        ca = a.set_denied(path, true);
        cb = b.set_denied(path, true);
        break;
      case kAllow:
        ca = a.set_denied(path, false);
        cb = b.set_denied(path, false);
        break;
      default: {
        const auto port = static_cast<uint8_t>(arg % ports);
        const bool up = arg % 3 != 0;
        a.set_port_up(port, up, now);
        b.set_port_up(port, up, now);
      }
    }
    RC_ASSERT(ca.changed == cb.changed);
    RC_ASSERT(ca.swapped_in == cb.swapped_in);
    RC_ASSERT(ca.replaced == cb.replaced);
    RC_ASSERT(a.usable_count() == b.usable_count());
    RC_ASSERT(a.swaps() == b.swaps());
    RC_ASSERT(a.next_probe_time() == b.next_probe_time());
    for (int i = 0; i < n; ++i) {
      RC_ASSERT(a.state_of(i) == b.state_of(i));
      RC_ASSERT(a.active(i) == b.active(i));
      RC_ASSERT(a.port_of(i) == b.port_of(i));
      RC_ASSERT(a.ev(i) == b.ev(i));
    }
  }
}

// One rule for the ECN cool-down in every world (PathPolicy::ecn_cooldown 0): base RTT / 16,
// and where the switches hash the EVs, at least one round-robin cycle of a port's active EVs.
TEST(PathSet, default_ecn_cooldown__base_rtt_over_16_and_a_round_robin_cycle_when_hashed) {
  EXPECT_EQ(default_ecn_cooldown(ns(8600), false, 64, 4096, 100'000'000'000ull), ns(8600) / 16);
  // 400G, 4 KiB: a packet every 81.92 ns; 64 active EVs a port: 5.24 us per cycle.
  EXPECT_EQ(default_ecn_cooldown(ns(8600), true, 64, 4096, 400'000'000'000ull), 64 * Time{81920});
  // A cycle shorter than base RTT / 16 changes nothing.
  EXPECT_EQ(default_ecn_cooldown(ms(2), true, 8, 4096, 10'000'000'000ull), ms(2) / 16);
  EXPECT_EQ(default_ecn_cooldown(us(16), true, 8, 4096, 0), us(1));  // no line rate: no cycle
}

}  // namespace
}  // namespace mrc
