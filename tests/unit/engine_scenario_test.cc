// Targeted scenarios: two engines over the fault network with one deliberate fault each, and
// an exact expectation about what the engine does (picoquic-style: completion-time ceilings
// and throughput floors guard performance; counters and the packet tap show behaviour).
// The last tests check that the workload harness itself notices corruption.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "support/pair.h"
#include "transport/psn.h"
#include "wire/codec.h"

namespace mrc::testnet {
namespace {

uint64_t drops(const EngineCounters& c, DropReason r) {
  return c.drops[static_cast<int>(r)];
}

Workload writes(int count, uint64_t size, WrOpcode op = WrOpcode::kWrite) {
  Workload w;
  for (int i = 0; i < count; ++i)
    w.messages.push_back({op, size});
  return w;
}

PairNet make(const NetConfig& n, PairConfig c, const Workload& w) {
  c.region_bytes = region_bytes_for(w);
  auto pn = make_pair_net(n, c);
  EXPECT_TRUE(pn.has_value());
  return std::move(*pn);
}

void expect_ok(const WorkloadResult& r) {
  for (const std::string& f : r.failures)
    ADD_FAILURE() << f;
  EXPECT_TRUE(r.all_completed);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_EQ(r.final_a, QpState::kRts);
}

// A trimmed packet is answered by one trim NACK and resent exactly once; a trim is
// congestion, not a path failure, so no EV changes state.
TEST(EngineScenario, TrimCausesExactlyOneResendOfThatPsn) {
  PairConfig c;
  c.psn_a = psn_add(0, -4);  // the trimmed PSN sits just before the 2^24 wrap
  const Workload w = writes(1, 16 * 4096);
  PairNet pn = make(NetConfig{}, c, w);
  const uint32_t victim = psn_add(c.psn_a, 2);
  ScriptedFault trim;
  trim.match.from_host = 0;
  trim.action = FaultAction::kTrim;
  trim.psns = {victim};
  pn.net->add_scripted(trim);
  std::map<uint32_t, int> sends;
  pn.net->set_tap([&](const TapRecord& t) {
    if (t.point != TapPoint::kSend || t.from_host != 0 || t.kind != PacketKind::kData) return;
    auto d = wire::decode(t.bytes);
    ASSERT_TRUE(d);
    ++sends[d->pkt.bth.psn];
  });
  const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(10));
  expect_ok(r);
  EXPECT_EQ(r.net.trimmed, 1u);
  ASSERT_EQ(sends.size(), 16u);
  for (const auto& [psn, n] : sends)
    EXPECT_EQ(n, psn == victim ? 2 : 1) << "psn " << psn;
  EXPECT_EQ(r.a.retransmits, 1u);
  EXPECT_EQ(r.a.trim_nacks_received, 1u);
  EXPECT_EQ(r.b.trimmed_received, 1u);
  EXPECT_EQ(r.b.nacks_sent, 1u);
  EXPECT_EQ(r.a.ev_state_changes, 0u);
  EXPECT_EQ(r.a.timeouts, 0u);
  EXPECT_EQ(r.bytes_verified, 16u * 4096);
}

// A one-packet message whose packet is lost (a failed path) is resent at the tail-loss
// probe, which a QP without an RTT sample of its own takes from the fabric's RTT
// (EngineConfig::fabric_rtt), not at the ACK timeout (paper 2.1: failover in microseconds).
TEST(EngineScenario, LonePacketLostBeforeAnyRttSampleIsResentAfterAFewFabricRtts) {
  for (const Time fabric_rtt : {Time{0}, us(3)}) {
    SCOPED_TRACE(fabric_rtt);
    PairConfig c;
    c.timeout = 12;  // 4.2 ms
    c.fabric_rtt = fabric_rtt;
    const Workload w = writes(1, 2048);
    PairNet pn = make(NetConfig{}, c, w);
    ScriptedFault drop;
    drop.match.from_host = 0;
    drop.action = FaultAction::kDrop;
    drop.psns = {c.psn_a};
    pn.net->add_scripted(drop);
    const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(50));
    expect_ok(r);
    EXPECT_EQ(r.net.dropped_scripted, 1u);
    if (fabric_rtt == 0) {
      // Nothing known about the fabric: the ACK timeout, as before.
      EXPECT_EQ(r.a.timeouts, 1u);
      EXPECT_GE(r.end - r.start, ms(4));
      EXPECT_EQ(r.a.losses_pto_borrowed_rtt, 0u);
    } else {
      // srtt 3 us + max(4 rttvar, reordering window 3 us) + ACK delay 2 us = 11 us, then an
      // RTT (~2.5 us here) for the retransmission.
      EXPECT_EQ(r.a.timeouts, 0u);
      EXPECT_LT(r.end - r.start, us(20));
      EXPECT_EQ(r.a.losses_pto, 1u);
      EXPECT_EQ(r.a.losses_pto_borrowed_rtt, 1u);
    }
  }
}

// A QP's first packets borrow the RTT its engine measured on its other QPs
// (EngineConfig::share_rtt): a second QP between the same hosts, with nothing configured,
// resends a lost lone packet after a few measured RTTs.
TEST(EngineScenario, NewQpBorrowsTheRttOfItsEnginesOtherQps) {
  PairConfig c;
  c.timeout = 12;
  const Workload w = writes(4, 8192);
  PairNet pn = make(NetConfig{}, c, w);
  const WorkloadResult first = run_workload(*pn.net, pn.pair, w, ms(50));
  expect_ok(first);
  // A second pair on the same engines.
  auto second = connect_pair(*pn.net, pn.pair.a.host, pn.pair.b.host, [&] {
    PairConfig c2 = c;
    c2.region_bytes = region_bytes_for(w);
    c2.psn_a = 1000;
    return c2;
  }());
  ASSERT_TRUE(second.has_value());
  ScriptedFault drop;
  drop.match.from_host = 0;
  drop.action = FaultAction::kDrop;
  drop.psns = {1000};  // the second QP's first packet
  pn.net->add_scripted(drop);
  const Workload one = writes(1, 2048);
  const WorkloadResult r = run_workload(*pn.net, *second, one, pn.net->now() + ms(50));
  expect_ok(r);
  EXPECT_EQ(r.a.timeouts, 0u);
  EXPECT_LT(r.end - r.start, us(30));
  EXPECT_EQ(r.a.losses_pto_borrowed_rtt, 1u);
}

// An EV blackholed (requester -> responder) goes ASSUMED_BAD on its first loss, then carries
// only probes; once the blackhole heals, enough probes answer over time (PathPolicy::resurrect_*)
// and it is GOOD and carries data again.
TEST(EngineScenario, BlackholedEvIsProbedUntilHealed) {
  constexpr int kEv = 3;
  PairConfig c;
  c.planes = 2;
  c.evs = 8;
  c.path_policy.resurrect_probes = 4;  // shorter than the default, to fit the transfer
  c.path_policy.resurrect_window = us(100);
  const Workload w = writes(1000, 16 * 1024);  // ~16 MB: ~700 us at 2 x 100 Gb/s
  PairNet pn = make(NetConfig{}, c, w);
  const uint8_t port = kEv % c.planes;
  PathFault bh;
  bh.match.from_host = 0;
  bh.match.port = port;
  bh.match.ev_index = kEv;
  bh.blackhole = true;
  bh.until = us(100);
  pn.net->add_path_fault(bh);
  struct Sent {
    Time at;
    PacketKind kind;
  };
  std::vector<Sent> on_ev;
  pn.net->set_tap([&](const TapRecord& t) {
    if (t.point == TapPoint::kSend && t.from_host == 0 && t.ev_index == kEv)
      on_ev.push_back({t.time, t.kind});
  });
  const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(50));
  expect_ok(r);

  Time bad_at = kNever, good_at = kNever;
  for (const auto& [h, e] : r.events) {
    if (h != 0 || e.type != EventType::kEvStateChange || e.ev_index != kEv) continue;
    if (e.to == ev::EvState::kAssumedBad && bad_at == kNever) bad_at = e.time;
    if (e.to == ev::EvState::kGood && bad_at != kNever && good_at == kNever) good_at = e.time;
  }
  ASSERT_NE(bad_at, kNever) << "EV " << kEv << " never became ASSUMED_BAD";
  ASSERT_NE(good_at, kNever) << "EV " << kEv << " never became GOOD again";
  EXPECT_LT(bad_at, us(20));    // the first loss is detected within a few RTTs
  EXPECT_GE(good_at, us(100));  // not before the blackhole healed
  // Enough answers over time (PathPolicy::resurrect_*): the window after the first answer,
  // which comes within a backed-off probe interval of the healing.
  const PathPolicy& pol = c.path_policy;
  EXPECT_GE(good_at, us(100) + pol.resurrect_window);
  EXPECT_LT(good_at, us(100) + (pol.probe_interval << 2) + pol.resurrect_window +
                         pol.resurrect_probes * pol.probe_interval + us(20));
  int probes = 0, data_while_bad = 0, data_after = 0;
  for (const Sent& s : on_ev) {
    if (s.at > bad_at && s.at < good_at) {
      probes += s.kind == PacketKind::kProbe;
      data_while_bad += s.kind == PacketKind::kData;
    }
    if (s.at > good_at) data_after += s.kind == PacketKind::kData;
  }
  EXPECT_GE(probes, 1);
  EXPECT_EQ(data_while_bad, 0);
  EXPECT_GT(data_after, 0);
  EXPECT_GE(pn.net->path_counter(0, port, kEv).sent_probes, 1u);
  const PathSet* ps = pn.net->engine(0).qp_paths(pn.pair.a.qpn);
  ASSERT_NE(ps, nullptr);
  EXPECT_GE(ps->path(kEv).losses, 1u);
  EXPECT_EQ(ps->path(kEv).state, ev::EvState::kGood);
  EXPECT_GT(r.net.dropped_blackhole, 0u);
}

// Probes of a path that stays dead back off (PathPolicy::probe_backoff_limit) instead of
// going out every probe interval for ever.
TEST(EngineScenario, ProbesOfADeadPathBackOff) {
  for (const uint32_t limit : {0u, 5u}) {
    SCOPED_TRACE(limit);
    PairConfig c;
    c.planes = 2;
    c.evs = 8;
    c.path_policy.probe_interval = us(50);
    c.path_policy.probe_backoff_limit = limit;
    Workload w = writes(1, 16 * 4096);  // 16 packets: every EV gets one
    w.linger = ms(10);
    PairNet pn = make(NetConfig{}, c, w);
    pn.net->blackhole(3 % c.planes, 3);
    const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(20));
    expect_ok(r);
    const uint64_t probes = pn.net->path_counter(0, 3 % c.planes, 3).sent_probes;
    if (limit == 0) {
      EXPECT_GE(probes, 190u);  // one per 50 us for 10 ms
      EXPECT_GE(r.a.probes_unanswered, 189u);
    } else {
      // 50, 100, ..., 1600 us, then every 1.6 ms: 5 + (10 ms - 3.1 ms) / 1.6 ms.
      EXPECT_LE(probes, 12u);
      EXPECT_GE(probes, 8u);
    }
    EXPECT_EQ(r.a.ev_state_changes, 1u);  // it never came back
  }
}

// The NIC's probe budget (EngineConfig::probe_budget_*) bounds probes over all paths and
// QPs: three dead paths probed every 10 us would send ~3,000 probes in 10 ms.
TEST(EngineScenario, ProbeRateStaysWithinTheNicsBudget) {
  PairConfig c;
  c.planes = 2;
  c.evs = 8;
  c.path_policy.probe_interval = us(10);
  c.path_policy.probe_backoff_limit = 0;
  c.probe_budget_interval = us(100);
  c.probe_budget_burst = 2;
  Workload w = writes(1, 16 * 4096);
  w.linger = ms(10);
  PairNet pn = make(NetConfig{}, c, w);
  for (int ev : {1, 3, 4})
    pn.net->blackhole(ev % c.planes, ev);
  const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(20));
  expect_ok(r);
  const Time span = r.end + w.linger - r.start;
  EXPECT_LE(r.a.probes_sent, 2 + span / us(100) + 1);
  EXPECT_GE(r.a.probes_sent, span / us(100) - 2);  // the budget is used, not starved
  EXPECT_GT(r.a.probes_deferred, 0u);
}

// A port going down mid-transfer loses no data: the packets that left on it are resent on
// the other ports, and traffic continues there.
TEST(EngineScenario, PortDownLosesNoDataAndTrafficMovesToOtherPorts) {
  PairConfig c;
  c.planes = 4;
  c.evs = 16;
  const Workload w = writes(200, 16 * 1024);  // ~3.2 MB: ~70 us at 4 x 100 Gb/s
  PairNet pn = make(NetConfig{}, c, w);
  constexpr Time kDown = us(20);
  pn.net->add_port_fault(PortFault{-1, 2, kDown, kNever});
  std::map<int, uint64_t> data_after;
  uint64_t data_on_2_before = 0;
  pn.net->set_tap([&](const TapRecord& t) {
    if (t.point != TapPoint::kSend || t.from_host != 0 || t.kind != PacketKind::kData) return;
    if (t.time > kDown) ++data_after[t.port];
    if (t.time < kDown && t.port == 2) ++data_on_2_before;
  });
  const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(50));
  expect_ok(r);
  EXPECT_EQ(r.bytes_verified, 200u * 16 * 1024);
  EXPECT_GT(data_on_2_before, 0u);
  EXPECT_EQ(data_after[2], 0u);
  for (int p : {0, 1, 3})
    EXPECT_GT(data_after[p], 100u) << "port " << p;
  bool saw_port_event = false;
  for (const auto& [h, e] : r.events)
    saw_port_event |= h == 0 && e.type == EventType::kPortChange;
  EXPECT_TRUE(saw_port_event);
  EXPECT_GT(r.net.dropped_port_down, 0u);  // packets were on the wire when it went down
  EXPECT_EQ(r.a.timeouts, 0u);             // recovered without waiting for the ACK timeout
}

// A failed spine kills an EV in both directions (the responder's EV e routes through the
// same spine). The responder must not keep sending ACKs and probe replies on dead reverse
// paths: before the fix (control packets now return along the reverse of the path they
// answer) 3 of 4 ACKs were lost here, every first ACK of a packet could be lost, Karn's rule
// left srtt at 0 and the PTO fell back to the ACK timeout: one 4 KiB WRITE took ~7 ACK
// timeouts (7.3 ms) instead of ~20 us. Found by EngineProperty.BlackholedEvsAreRoutedAround.
TEST(EngineScenario, SymmetricEvFailureDoesNotStallOnLostAcks) {
  PairConfig c;
  c.planes = 1;
  c.evs = 4;
  c.timeout = 10;  // 1.05 ms ACK timeout
  const Workload w = writes(1, 4096);
  PairNet pn = make(NetConfig{}, c, w);
  for (int ev = 1; ev <= 3; ++ev)
    pn.net->blackhole(0, ev);  // both directions, for ever
  const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(50));
  expect_ok(r);
  EXPECT_LT(r.end - r.start, us(200)) << "timeouts=" << r.a.timeouts;
  EXPECT_EQ(r.a.timeouts, 0u);
}

// ---- Bad input ---------------------------------------------------------------------------

struct Crafter {
  const Pair& p;
  // A datagram to host `to_b ? B : A` (port 0) with the given transport packet.
  std::vector<uint8_t> bytes(const wire::TransportPacket& t, bool to_b = true) const {
    wire::Datagram d;
    d.ip.traffic_class = wire::kDscpData << 2;
    d.ip.src = FaultNet::address(to_b ? p.a.host : p.b.host, 0);
    d.ip.dst = FaultNet::address(to_b ? p.b.host : p.a.host, 0);
    d.udp.src_port = 0xC123;
    d.pkt = t;
    std::vector<uint8_t> out(wire::encoded_size(d));
    auto n = wire::encode(d, out);
    EXPECT_TRUE(n) << (n ? "" : error_name(n.error()));
    if (n) out.resize(*n);
    return out;
  }
  // A one-packet WRITE of `len` bytes (pattern 0xEE) to B.
  wire::TransportPacket data(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len) const {
    static const std::vector<uint8_t> junk(9000, 0xEE);
    wire::TransportPacket t;
    t.bth.opcode = wire::Opcode::kWriteOnly;
    t.bth.dest_qp = p.b.qpn;
    t.bth.psn = psn;
    t.reth.va = va;
    t.reth.rkey = rkey;
    t.reth.dma_len = len;
    t.data.msg_num = 0;
    t.data.pkt_index = 0;
    t.data.pkt_count = 1;
    t.data.flags = wire::DataExt::kLastOfMessage;
    t.payload = junk.data();
    t.payload_len = len;
    return t;
  }
};

// Packets with a bad QPN, rkey, address or PSN (and garbage, and an ACK for PSNs never sent)
// are dropped and counted, change nothing (guard bytes included), and a transfer running
// at the same time is unaffected.
TEST(EngineScenario, BadPacketsAreDroppedAndCountedAndChangeNothing) {
  PairConfig c;
  c.psn_a = psn_add(0, -2);
  const Workload w = writes(40, 8 * 1024);
  PairNet pn = make(NetConfig{}, c, w);
  FaultNet& net = *pn.net;
  const Pair& p = pn.pair;
  const Crafter k{p};
  const uint64_t len = p.b.region.length();
  const uint64_t base = p.b.region.iova();
  const uint32_t rkey = p.b.region.keys.rkey;
  const uint32_t window = 128u * c.mpr_dest;

  const wire::TransportPacket bad_qpn = [&] {
    wire::TransportPacket t = k.data(c.psn_a, base, rkey, 64);
    t.bth.dest_qp = p.b.qpn + 1000;
    return t;
  }();
  const wire::TransportPacket bad_rkey = k.data(c.psn_a, base, rkey ^ 0x00FFFF00u, 64);
  const wire::TransportPacket past_end = k.data(c.psn_a, base + len - 10, rkey, 64);
  const wire::TransportPacket before_start = k.data(c.psn_a, base - 32, rkey, 64);  // guard
  // Just behind the expected PSN is a duplicate (re-acknowledged, never placed); far behind
  // is stale.
  const wire::TransportPacket stale = k.data(psn_add(c.psn_a, -(1 << 20)), base, rkey, 64);
  const wire::TransportPacket future = k.data(psn_add(c.psn_a, window + 5), base, rkey, 64);
  wire::TransportPacket bogus_ack;
  bogus_ack.bth.opcode = wire::Opcode::kAck;
  bogus_ack.bth.dest_qp = p.a.qpn;
  bogus_ack.sack.cum_psn = psn_add(c.psn_a, 5000);
  bogus_ack.sack.sack_base = bogus_ack.sack.cum_psn;
  bogus_ack.bth.psn = psn_add(bogus_ack.sack.cum_psn, -1);

  // Before any traffic: exact counts.
  for (const wire::TransportPacket* t :
       {&bad_qpn, &bad_rkey, &past_end, &before_start, &stale, &future})
    net.inject(0, p.b.host, 0, k.bytes(*t));
  net.inject(0, p.b.host, 1, {0x60, 0, 0, 0, 1, 2, 3});
  net.inject(0, p.a.host, 0, k.bytes(bogus_ack, false));
  net.run_until(us(1));
  const EngineCounters& a = net.engine(p.a.host).counters();
  const EngineCounters& b = net.engine(p.b.host).counters();
  EXPECT_EQ(drops(b, DropReason::kUnknownQp), 1u);
  EXPECT_EQ(drops(b, DropReason::kBadRkey), 1u);
  EXPECT_EQ(drops(b, DropReason::kBadAddress), 2u);
  EXPECT_EQ(drops(b, DropReason::kPsnOutOfWindow), 2u);
  EXPECT_EQ(drops(b, DropReason::kDecode), 1u);
  EXPECT_EQ(drops(a, DropReason::kBadAck), 1u);
  EXPECT_EQ(b.bytes_placed, 0u);
  EXPECT_EQ(b.acks_sent, 0u);
  EXPECT_EQ(net.counters().rx_rejected, 8u);

  // During the transfer: the same packets, repeatedly, must not disturb it. (PSN-relative
  // ones use PSNs that stay stale / beyond the window / carry bad keys whatever the state.)
  const wire::TransportPacket far_future = k.data(psn_add(c.psn_a, 1 << 22), base, rkey, 64);
  for (int i = 1; i <= 20; ++i) {
    const Time at = us(1) + i * ns(700);
    for (const wire::TransportPacket* t : {&bad_qpn, &far_future, &stale})
      net.inject(at, p.b.host, static_cast<uint8_t>(i % c.planes), k.bytes(*t));
    net.inject(at, p.b.host, 0, k.bytes(k.data(psn_add(c.psn_a, -(1 << 21)), base - 16, rkey, 16)));
    net.inject(at, p.a.host, 1, k.bytes(bogus_ack, false));
  }
  const WorkloadResult r = run_workload(net, pn.pair, w, ms(10));
  expect_ok(r);
  EXPECT_EQ(r.bytes_verified, 40u * 8 * 1024);
  EXPECT_EQ(drops(r.b, DropReason::kUnknownQp), 21u);
  EXPECT_EQ(drops(r.b, DropReason::kPsnOutOfWindow), 2u + 3 * 20u);
  EXPECT_EQ(drops(r.a, DropReason::kBadAck), 21u);
  EXPECT_EQ(r.b.bytes_placed, 40u * 8 * 1024);
}

// ---- Performance guards ------------------------------------------------------------------

// One flow of 64 x 128 KiB over 2 x 100 Gb/s: completes within a ceiling and reaches a
// goodput floor close to the line rate (payload efficiency at 4 KiB MTU is ~96.6%).
TEST(EngineScenario, SingleFlowMeetsCompletionCeilingAndThroughputFloor) {
  PairConfig c;
  c.planes = 2;
  c.evs = 16;
  NetConfig n;
  n.delay = us(2);
  const Workload w = writes(64, 128 * 1024);
  PairNet pn = make(n, c, w);
  const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(20));
  expect_ok(r);
  const double line_gbps = 2 * 100.0;
  const Time ideal = static_cast<Time>(64.0 * 128 * 1024 * 8 / (line_gbps * 1e9) * 1e12);
  std::printf("single flow: %.1f Gb/s, %.1f us (ideal %.1f us)\n", r.goodput_gbps,
              (r.end - r.start) / 1e6, ideal / 1e6);
  EXPECT_LT(r.end - r.start, ideal * 115 / 100 + us(15));
  EXPECT_GT(r.goodput_gbps, 0.85 * line_gbps);
  EXPECT_EQ(r.a.retransmits, 0u);
}

// Same over a lossy, trimming, reordering network: a looser ceiling, still no failure.
TEST(EngineScenario, SingleFlowUnderLossTrimAndJitterStaysWithinCeiling) {
  PairConfig c;
  c.planes = 2;
  c.evs = 32;
  NetConfig n;
  n.delay = us(2);
  n.loss = 0.005;
  n.trim = 0.01;
  n.jitter = us(1);
  n.seed = 11;
  const Workload w = writes(64, 128 * 1024);
  PairNet pn = make(n, c, w);
  const WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(20));
  expect_ok(r);
  const Time ideal = static_cast<Time>(64.0 * 128 * 1024 * 8 / (200e9) * 1e12);
  std::printf("lossy flow: %.1f Gb/s, %.1f us, %lu retransmits\n", r.goodput_gbps,
              (r.end - r.start) / 1e6, static_cast<unsigned long>(r.a.retransmits));
  EXPECT_LT(r.end - r.start, 2 * ideal + us(50));
  EXPECT_GT(r.a.retransmits, 0u);
}

// The whole stack is deterministic: same seeds and faults, same run, event for event.
TEST(EngineScenario, SameSeedSameRun) {
  auto once = [] {
    PairConfig c;
    c.planes = 4;
    c.evs = 32;
    NetConfig n;
    n.seed = 99;
    n.loss = 0.01;
    n.trim = 0.02;
    n.duplicate = 0.01;
    n.ecn = 0.05;
    n.jitter = us(1);
    Workload w = writes(30, 20000, WrOpcode::kWriteImm);
    PairNet pn = make(n, c, w);
    pn.net->blackhole(1, 5, us(2), us(40));
    pn.net->add_port_fault(PortFault{-1, 2, us(10), us(30)});
    WorkloadResult r = run_workload(*pn.net, pn.pair, w, ms(20));
    expect_ok(r);
    std::vector<Time> times;
    for (const WrOutcome& o : r.wrs)
      times.push_back(o.completed_at);
    return std::tuple{times, describe(r.a), describe(r.b), describe(r.net), r.events.size()};
  };
  const auto first = once();
  EXPECT_EQ(first, once());
  EXPECT_NE(std::get<1>(first).find("retransmits="), std::string::npos);  // faults happened
}

// ---- The harness notices corruption --------------------------------------------------------

TEST(WorkloadHarness, DetectsWritesOutsideMessagesAndGuardDamage) {
  const Workload w = writes(4, 1000);
  PairNet pn = make(NetConfig{}, PairConfig{}, w);
  Pair& p = pn.pair;
  pn.net->schedule(ns(100), [&](Time) {
    p.b.region.data()[10] ^= 1;                       // a gap before message 0
    p.b.region.data()[p.b.region.length() - 1] ^= 1;  // after the last message
    p.b.region.data()[-1] ^= 1;                       // the guard before B's region
    p.a.region.data()[p.a.region.length()] ^= 1;      // the guard after A's region
    p.a.region.data()[2000] ^= 1;                     // the source
  });
  const WorkloadResult r = run_workload(*pn.net, p, w, ms(1));
  auto has = [&](const char* needle) {
    for (const std::string& f : r.failures)
      if (f.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("gap byte")) << ::testing::PrintToString(r.failures);
  EXPECT_TRUE(has("after the last message"));
  EXPECT_TRUE(has("around B's region"));
  EXPECT_TRUE(has("around A's region"));
  EXPECT_TRUE(has("source region changed"));
}

TEST(WorkloadHarness, DetectsMissingAndWrongData) {
  const Workload w = writes(3, 5000);
  PairNet pn = make(NetConfig{}, PairConfig{}, w);
  Pair& p = pn.pair;
  // Corrupt message 1's destination after it is placed (during the linger), before the end
  // checks.
  bool done = false;
  pn.net->schedule(us(15), [&](Time) {
    p.b.region.data()[64 + 5000 + 64 + 17] ^= 0x80;
    done = true;
  });
  const WorkloadResult r = run_workload(*pn.net, p, w, ms(1));
  EXPECT_TRUE(done);
  bool found = false;
  for (const std::string& f : r.failures)
    found |= f.find("differs from source") != std::string::npos;
  EXPECT_TRUE(found) << ::testing::PrintToString(r.failures);
  EXPECT_EQ(r.bytes_verified, 2u * 5000);
}

}  // namespace
}  // namespace mrc::testnet
