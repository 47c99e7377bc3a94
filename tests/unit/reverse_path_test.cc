#include "transport/reverse_path.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>

#include "support/path_descs.h"

namespace mrc {
namespace {

using testpaths::paths;

constexpr Time kInterval = us(10);

// `n` paths over `ports` planes (PathSet seeded with `seed`) and a reverse set of `per_plane`
// EVs a plane over them.
struct Sets {
  PathSet ps;
  ReversePathSet r;
  Sets(int n, int ports, int per_plane, uint64_t seed = 1) {
    ps.init(paths(n, ports), 1, static_cast<uint8_t>(ports), PathPolicy{}, seed);
    r.configure(static_cast<uint8_t>(per_plane), static_cast<uint8_t>(ports));
  }
};

// Data arrived on every path once: before the first probe, each fills an empty slot of its port.
void feed(ReversePathSet& r, const PathSet& ps) {
  for (size_t i = 0; i < ps.size(); ++i)
    r.on_data_path(static_cast<int>(i), ps);
}

// Drives the set as a responder does: data keeps arriving, probes are taken when due and
// answered unless `dead` says the path's round trip is broken.
struct Driver {
  ReversePathSet& r;
  PathSet& ps;
  Time now = 0;
  int probes = 0;
  int changes = 0;

  void run(Time until, const std::set<int>& dead) {
    r.on_inbound(now, [] { return kInterval; });
    while (now < until) {
      now += us(1);
      r.on_inbound(now, [] { return kInterval; });
      if (r.next_probe_time() > now) continue;
      const ReversePathSet::Probe p = r.take_probe(now, ~0u, ps, kInterval, false, 1);
      if (p.mapped_out.changed) ++changes;
      if (p.path == ReversePathSet::kNone) continue;
      ++probes;
      if (!dead.count(p.path) && r.on_probe_reply(p.id, p.path).changed) ++changes;
    }
  }
};

TEST(ReversePathSet, pick__fills_evs_per_plane_per_port_and_sprays_over_planes) {
  Sets sets(16, 4, 2);
  auto& [ps, r] = sets;
  EXPECT_EQ(r.slots(), 8u);
  EXPECT_EQ(r.pick(0xF, ps), ReversePathSet::kNone);  // nothing known yet: the caller falls back
  feed(r, ps);
  std::set<int> seen;
  int last_port = -1;
  for (int k = 0; k < 8; ++k) {
    const int i = r.pick(0xF, ps);
    ASSERT_NE(i, ReversePathSet::kNone);
    EXPECT_NE(ps.port_of(i), last_port);  // consecutive ACKs alternate planes
    last_port = ps.port_of(i);
    seen.insert(i);
  }
  EXPECT_EQ(seen.size(), 8u);  // two distinct EVs per plane, each used once a round
  std::set<int> per_port[4];
  for (int i : seen)
    per_port[ps.port_of(i)].insert(i);
  for (const auto& p : per_port)
    EXPECT_EQ(p.size(), 2u);
  for (int k = 0; k < 8; ++k)
    EXPECT_EQ(ps.port_of(r.pick(0x4, ps)), 2);  // a mask keeps it on its ports
}

TEST(ReversePathSet, pick__disabled_set_picks_nothing) {
  Sets sets(4, 2, 0);
  auto& [ps, r] = sets;
  EXPECT_FALSE(r.enabled());
  EXPECT_EQ(r.pick(0x3, ps), ReversePathSet::kNone);
  EXPECT_FALSE(r.any_live(ps));
}

TEST(ReversePathSet, take_probe__unanswered_probe_maps_a_dead_ev_out_and_a_probe_refills_it) {
  Sets sets(16, 2, 1, 3);
  auto& [ps, r] = sets;
  feed(r, ps);
  const int victim = r.pick(0x1, ps);  // the port-0 slot
  ASSERT_NE(victim, ReversePathSet::kNone);
  Driver d{r, ps};
  d.run(us(200), {victim});
  for (uint32_t s = 0; s < r.slots(); ++s) {
    EXPECT_NE(r.slot_path(s), victim) << "slot " << s;
    EXPECT_NE(r.slot_path(s), ReversePathSet::kNone) << "slot " << s;  // refilled
  }
  EXPECT_EQ(ps.port_of(r.slot_path(0)), 0);  // still one EV on each plane
  EXPECT_GE(d.changes, 2);                   // mapped out, then filled
  EXPECT_LE(d.probes, 200 / 10 + 1);         // at most one probe per interval
}

TEST(ReversePathSet, take_probe__no_probe_without_inbound_data_or_with_outbound_data) {
  Sets sets(4, 2, 2);
  auto& [ps, r] = sets;
  EXPECT_EQ(r.next_probe_time(), kNever);
  EXPECT_TRUE(r.on_inbound(0, [] { return kInterval; }));  // one packet: the clock starts
  EXPECT_EQ(r.next_probe_time(), kInterval);
  // Nothing more arrived: no probe, and probing stops.
  EXPECT_EQ(r.take_probe(kInterval, ~0u, ps, kInterval, false, 1).path, ReversePathSet::kNone);
  EXPECT_EQ(r.next_probe_time(), kNever);
  // Inbound again, but the QP sends data too: its SACKs keep the paths, no probe.
  r.on_inbound(us(20), [] { return kInterval; });
  r.on_inbound(us(21), [] { return kInterval; });
  EXPECT_EQ(r.take_probe(us(30), ~0u, ps, kInterval, true, 1).path, ReversePathSet::kNone);
  r.on_inbound(us(31), [] { return kInterval; });
  EXPECT_NE(r.take_probe(us(40), ~0u, ps, kInterval, false, 1).path, ReversePathSet::kNone);
}

TEST(ReversePathSet, on_inbound__asks_for_the_interval_only_when_a_spell_starts) {
  Sets sets(4, 2, 2);
  auto& [ps, r] = sets;
  int asked = 0;
  const auto interval = [&asked] {
    ++asked;
    return kInterval;
  };
  EXPECT_TRUE(r.on_inbound(0, interval));
  EXPECT_FALSE(r.on_inbound(us(1), interval));
  EXPECT_FALSE(r.on_inbound(us(2), interval));
  EXPECT_EQ(asked, 1);
}

TEST(ReversePathSet, on_ack_loss__brings_the_next_probe_forward) {
  Sets sets(4, 2, 1);
  auto& [ps, r] = sets;
  r.on_inbound(0, [] { return kInterval; });
  r.on_ack_loss(us(1));
  EXPECT_EQ(r.next_probe_time(), us(1));
  const auto p = r.take_probe(us(1), ~0u, ps, kInterval, false, 1);
  ASSERT_NE(p.path, ReversePathSet::kNone);
  // While that probe is outstanding a second signal changes nothing: declaring it unanswered
  // early would map out a path whose answer is on its way.
  r.on_ack_loss(us(2));
  EXPECT_EQ(r.next_probe_time(), us(1) + kInterval);
}

TEST(ReversePathSet, on_probe_reply__stale_or_foreign_answer_changes_nothing) {
  Sets sets(8, 2, 1);
  auto& [ps, r] = sets;
  feed(r, ps);
  r.on_inbound(0, [] { return kInterval; });
  r.on_inbound(us(1), [] { return kInterval; });
  const auto p = r.take_probe(kInterval, ~0u, ps, kInterval, false, 1);
  ASSERT_NE(p.path, ReversePathSet::kNone);
  EXPECT_FALSE(r.on_probe_reply(p.id + 1, p.path).changed);
  EXPECT_FALSE(r.on_probe_reply(p.id, (p.path + 2) % 8).changed);
  EXPECT_FALSE(r.on_probe_reply(p.id, p.path).changed);  // a live slot: confirmed
  EXPECT_FALSE(r.on_probe_reply(p.id, p.path).changed);  // twice: ignored
}

TEST(ReversePathSet, on_path_unusable__a_path_the_qps_data_found_dead_is_replaced_at_once) {
  Sets sets(8, 2, 1);
  auto& [ps, r] = sets;
  feed(r, ps);
  const int i = r.pick(0x1, ps);
  ps.on_loss(i, 0);
  ASSERT_EQ(ps.state_of(i), ev::EvState::kAssumedBad);
  const ReverseChange c = r.on_path_unusable(i, ps, 1);
  ASSERT_TRUE(c.changed);
  EXPECT_EQ(c.from, i);
  ASSERT_NE(c.to, ReversePathSet::kNone);
  EXPECT_EQ(ps.port_of(c.to), 0);
  EXPECT_EQ(ps.state_of(c.to), ev::EvState::kGood);
  EXPECT_FALSE(r.on_path_unusable(i, ps, 1).changed);  // no longer in the set
}

// The slot to verify sits on a busy port (its ACK just left on it): the probe waits for that
// port instead of going to another slot, so the slot the ACKs use is the one checked.
TEST(ReversePathSet, take_probe__a_verification_waits_for_its_busy_port) {
  Sets sets(2, 2, 1);  // path 0 on port 0, path 1 on port 1, one slot each
  auto& [ps, r] = sets;
  feed(r, ps);
  Driver d{r, ps};
  d.run(kInterval, {});  // the first probe (both slots live: a verification) is answered
  ASSERT_EQ(d.probes, 1);
  const uint32_t next_slot = 1;  // verifications take turns: slot 0 was the first
  const uint32_t busy = 1u << r.slot_port(next_slot);
  r.on_inbound(d.now + us(1), [] { return kInterval; });
  const Time due = r.next_probe_time();
  const auto waiting = r.take_probe(due, ~0u & ~busy, ps, kInterval, false, 1);
  EXPECT_EQ(waiting.path, ReversePathSet::kNone);
  EXPECT_EQ(r.next_probe_time(), due);  // still due
  const auto p = r.take_probe(due + ns(100), ~0u, ps, kInterval, false, 1);
  EXPECT_EQ(p.path, r.slot_path(next_slot));
}

// Refills go round the empty slots: a plane whose only EV is dead (its empty slot comes
// first) does not take every refill from the others.
TEST(ReversePathSet, take_probe__refills_take_turns_over_the_empty_slots) {
  Sets sets(8, 4, 1);  // 4 planes, 2 paths each, one slot each; nothing fed: all empty
  auto& [ps, r] = sets;
  std::set<int> dead;
  for (int i = 0; i < 8; ++i)
    if (ps.port_of(i) == 0) dead.insert(i);  // plane 0 dead both ways
  Driver d{r, ps};
  d.run(8 * kInterval + us(1), dead);
  for (uint32_t s = 0; s < r.slots(); ++s) {
    if (r.slot_port(s) == 0)
      EXPECT_EQ(r.slot_path(s), ReversePathSet::kNone);
    else
      EXPECT_NE(r.slot_path(s), ReversePathSet::kNone) << "slot " << s;
  }
}

// Whatever dies, the set keeps only EVs of the right plane, never a duplicate, and every
// live slot whose path is dead both ways is mapped out within two probe rounds over the set.
RC_GTEST_PROP(ReversePathSet, probes_converge_to_working_evs, ()) {
  const int ports = *rc::gen::inRange(1, 5);
  const int per_port = *rc::gen::inRange(2, 9);
  const int per_plane = *rc::gen::inRange(1, 4);
  Sets sets(ports * per_port, ports, per_plane, *rc::gen::arbitrary<uint64_t>());
  auto& [ps, r] = sets;
  std::set<int> dead;
  for (int i = 0; i < ports * per_port; ++i)
    if (*rc::gen::inRange(0, 3) == 0) dead.insert(i);
  feed(r, ps);
  Driver d{r, ps};
  const Time rounds = 2 * static_cast<Time>(r.slots()) + 2 * per_port * ports;
  d.run(rounds * kInterval * 2, dead);
  std::set<int> in_set;
  for (uint32_t s = 0; s < r.slots(); ++s) {
    const int i = r.slot_path(s);
    if (i == ReversePathSet::kNone) continue;
    RC_ASSERT(ps.port_of(i) == r.slot_port(s));
    RC_ASSERT(in_set.insert(i).second);
    RC_ASSERT(!dead.count(i));
  }
}

}  // namespace
}  // namespace mrc
