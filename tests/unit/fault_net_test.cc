// Unit tests of the fault network itself (tests/support/fault_net.h), driven by scripted
// endpoints rather than engines so that every timing and fault is exactly predictable.
#include "support/fault_net.h"

#include <gtest/gtest.h>

#include <cassert>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "wire/codec.h"

namespace mrc::testnet {
namespace {

// An endpoint that sends scripted packets and records what it receives.
class ScriptEndpoint final : public Endpoint {
 public:
  struct Pending {
    Time at;
    TxPacket tx;
  };
  struct Received {
    Time at;
    uint8_t port;
    bool decoded;
    uint32_t psn;
    uint8_t dscp;
    uint8_t ecn;
    uint32_t payload_len;
    uint32_t dma_len;
    wire::Opcode opcode;
  };
  struct PortCall {
    Time at;
    uint8_t port;
    bool up;
  };

  // Queues a data packet of `payload` bytes (PSN `psn`) for (port, ev) to host `peer`, to be
  // sent at or after `at`.
  void send_data(Time at, int peer, uint8_t port, uint16_t ev, uint32_t psn, uint32_t payload) {
    TxPacket tx;
    tx.port = port;
    tx.ev_index = ev;
    tx.peer = static_cast<uint32_t>(peer);
    tx.pkt.bth.opcode = wire::Opcode::kWriteOnly;
    tx.pkt.bth.dest_qp = 7;
    tx.pkt.bth.psn = psn;
    tx.pkt.reth.va = 0x1000;
    tx.pkt.reth.rkey = 0x100;
    tx.pkt.reth.dma_len = payload;
    tx.pkt.data.pkt_count = 1;
    tx.pkt.data.ev_index = ev;
    assert(payload <= payload_.size());  // queued packets point into payload_: never resized
    tx.pkt.payload = payload == 0 ? nullptr : payload_.data();
    tx.pkt.payload_len = payload;
    pending_.push_back({at, tx});
  }
  void send_ack(Time at, int peer, uint8_t port, uint16_t ev, uint32_t psn) {
    TxPacket tx;
    tx.port = port;
    tx.ev_index = ev;
    tx.peer = static_cast<uint32_t>(peer);
    tx.pkt.bth.opcode = wire::Opcode::kAck;
    tx.pkt.bth.dest_qp = 7;
    tx.pkt.bth.psn = psn;
    tx.pkt.sack.cum_psn = psn;
    tx.pkt.sack.sack_base = psn;
    pending_.push_back({at, tx});
  }

  Status on_datagram(Time now, uint8_t port, std::span<const uint8_t> bytes) override {
    auto d = wire::decode(bytes);
    Received r{now, port, d.has_value(), 0, 0, 0, 0, 0, wire::Opcode::kWriteOnly};
    if (d) {
      r.psn = d->pkt.bth.psn;
      r.dscp = d->ip.dscp();
      r.ecn = d->ip.ecn();
      r.payload_len = d->pkt.payload_len;
      r.dma_len = d->pkt.reth.dma_len;
      r.opcode = d->pkt.bth.opcode;
    }
    received.push_back(r);
    if (!d) return fail(d.error());
    return {};
  }
  bool poll_transmit(Time now, uint32_t mask, TxPacket& out) override {
    last_now_ = now;
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->at <= now && ((mask >> it->tx.port) & 1)) {
        out = it->tx;
        pending_.erase(it);
        send_times.push_back(now);
        return true;
      }
    }
    return false;
  }
  bool poll_completion(Completion&) override { return false; }
  bool poll_event(Event&) override { return false; }
  Time next_deadline() override {
    if (always_due_) return last_now_;
    Time d = kNever;
    for (const Pending& p : pending_)
      if (p.at > last_now_) d = std::min(d, p.at);
    return d;
  }
  void on_timer(Time now) override { last_now_ = now; }
  void set_port_up(Time now, uint8_t port, bool up) override {
    last_now_ = now;
    port_calls.push_back({now, port, up});
  }

  void set_always_due() { always_due_ = true; }

  std::vector<Received> received;
  std::vector<Time> send_times;
  std::vector<PortCall> port_calls;

 private:
  std::deque<Pending> pending_;
  std::vector<uint8_t> payload_ = std::vector<uint8_t>(9000, 0x5A);
  Time last_now_ = 0;
  bool always_due_ = false;
};

struct TwoHosts {
  explicit TwoHosts(const NetConfig& cfg, uint8_t ports = 2) : net(cfg) {
    auto ea = std::make_unique<ScriptEndpoint>();
    auto eb = std::make_unique<ScriptEndpoint>();
    a = ea.get();
    b = eb.get();
    net.add_endpoint(std::move(ea), ports);
    net.add_endpoint(std::move(eb), ports);
  }
  FaultNet net;
  ScriptEndpoint* a;
  ScriptEndpoint* b;
};

// Datagram bytes of a scripted data packet with `payload` bytes and the default envelope.
size_t data_bytes(uint32_t payload) {
  return wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes +
         wire::transport_header_bytes(wire::Opcode::kWriteOnly) + payload +
         ((4 - payload % 4) % 4) + wire::kIcrcBytes;
}

TEST(FaultNet, deliver__delay_is_serialization_twice_plus_propagation) {
  NetConfig cfg;
  cfg.delay = us(3);
  TwoHosts t(cfg);
  t.a->send_data(0, 1, 0, 0, 100, 1000);
  t.net.kick(0);
  EXPECT_EQ(t.net.run_until(ms(1)), RunStatus::kIdle);
  ASSERT_EQ(t.b->received.size(), 1u);
  const Time ser = t.net.serialization_time(data_bytes(1000), cfg.link_bps);
  // 1038 bytes (+38 framing) at 100 Gb/s: 86.24 ns, rounded up to the picosecond.
  EXPECT_EQ(ser, (data_bytes(1000) + 38) * 8 * 10);
  EXPECT_EQ(t.b->received[0].at, 2 * ser + us(3));
  EXPECT_TRUE(t.b->received[0].decoded);
  EXPECT_EQ(t.b->received[0].psn, 100u);
  EXPECT_EQ(t.b->received[0].port, 0);
  EXPECT_EQ(t.net.counters().sent, 1u);
  EXPECT_EQ(t.net.counters().delivered, 1u);
  EXPECT_EQ(t.net.counters().sent_bytes, data_bytes(1000));
}

TEST(FaultNet, send__port_serializes_back_to_back_packets) {
  NetConfig cfg;
  cfg.delay = us(1);
  TwoHosts t(cfg);
  for (uint32_t i = 0; i < 10; ++i)
    t.a->send_data(0, 1, 0, 0, i, 4000);
  t.net.kick(0);
  t.net.run_until(ms(1));
  ASSERT_EQ(t.b->received.size(), 10u);
  const Time ser = t.net.serialization_time(data_bytes(4000), cfg.link_bps);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(t.a->send_times[i], i * ser) << i;  // polled only when the port went idle
    EXPECT_EQ(t.b->received[i].at, (i + 2) * ser + us(1)) << i;
    EXPECT_EQ(t.b->received[i].psn, i);
  }
}

TEST(FaultNet, send__ports_serialize_independently) {
  TwoHosts t(NetConfig{});
  t.a->send_data(0, 1, 0, 0, 0, 4000);
  t.a->send_data(0, 1, 1, 0, 1, 4000);
  t.net.kick(0);
  t.net.run_until(ms(1));
  ASSERT_EQ(t.a->send_times.size(), 2u);
  EXPECT_EQ(t.a->send_times[0], 0u);
  EXPECT_EQ(t.a->send_times[1], 0u);  // port 1 was idle: both leave at once
  ASSERT_EQ(t.b->received.size(), 2u);
  EXPECT_EQ(t.b->received[0].at, t.b->received[1].at);
  EXPECT_EQ(t.b->received[1].port, 1);
}

TEST(FaultNet, send__slower_receiver_builds_a_queue_that_marks_and_drops) {
  NetConfig cfg;
  cfg.ecn_threshold_bytes = 8000;
  cfg.queue_limit_bytes = 30000;
  TwoHosts t(cfg);
  t.net.set_port_rate(1, 0, 25'000'000'000ull);  // the switch egress runs at 1/4 of the rate
  for (uint32_t i = 0; i < 20; ++i)
    t.a->send_data(0, 1, 0, 0, i, 4000);
  t.net.kick(0);
  t.net.run_until(ms(1));
  const NetCounters& c = t.net.counters();
  EXPECT_GT(c.max_queue_bytes, 8000u);
  EXPECT_LE(c.max_queue_bytes, 30000u);
  EXPECT_GT(c.ecn_marked_queue, 0u);
  EXPECT_EQ(c.ecn_marked, c.ecn_marked_queue);
  EXPECT_GT(c.dropped_queue, 0u);
  EXPECT_EQ(c.delivered + c.dropped_queue, 20u);
  // Delivered packets leave the egress one slow serialization apart.
  const Time slow = t.net.serialization_time(data_bytes(4000), 25'000'000'000ull);
  ASSERT_GE(t.b->received.size(), 2u);
  EXPECT_EQ(t.b->received[1].at - t.b->received[0].at, slow);
  int ce = 0;
  for (const auto& r : t.b->received)
    ce += r.ecn == wire::kEcnCe;
  EXPECT_EQ(static_cast<uint64_t>(ce), c.ecn_marked);
  EXPECT_EQ(t.b->received[0].ecn, wire::kEcnEct0);  // the first found an empty queue
}

TEST(FaultNet, loss_mask__drops_exactly_the_nth_matching_packets) {
  TwoHosts t(NetConfig{});
  ScriptedFault f;
  f.match.from_host = 0;
  f.match.kind = PacketKind::kData;
  f.nth = {2, 5};
  t.net.add_scripted(f);
  for (uint32_t i = 0; i < 8; ++i)
    t.a->send_data(0, 1, static_cast<uint8_t>(i % 2), 0, i, 100);
  t.b->send_ack(0, 0, 0, 0, 42);  // not data: neither counted nor dropped
  t.net.kick(0);
  t.net.kick(1);
  t.net.run_until(ms(1));
  std::vector<uint32_t> psns;
  for (const auto& r : t.b->received)
    psns.push_back(r.psn);
  std::sort(psns.begin(), psns.end());
  EXPECT_EQ(psns, (std::vector<uint32_t>{0, 1, 3, 4, 6, 7}));
  ASSERT_EQ(t.a->received.size(), 1u);
  EXPECT_EQ(t.net.counters().dropped_scripted, 2u);
  EXPECT_EQ(t.net.path_counter(0, 0, 0).dropped, 1u);  // psn 2 went on port 0
  EXPECT_EQ(t.net.path_counter(0, 1, 0).dropped, 1u);  // psn 5 on port 1
}

TEST(FaultNet, trim_psn__happens_once_and_keeps_headers) {
  TwoHosts t(NetConfig{});
  ScriptedFault f;
  f.action = FaultAction::kTrim;
  f.psns = {3};
  f.times = 1;
  t.net.add_scripted(f);
  t.a->send_data(0, 1, 0, 0, 3, 3000);
  t.a->send_data(us(5), 1, 0, 0, 3, 3000);  // the resend is not trimmed again
  t.a->send_data(0, 1, 0, 0, 4, 3000);
  t.net.kick(0);
  t.net.run_until(ms(1));
  ASSERT_EQ(t.b->received.size(), 3u);
  EXPECT_EQ(t.net.counters().trimmed, 1u);
  int trimmed = 0;
  for (const auto& r : t.b->received) {
    ASSERT_TRUE(r.decoded);  // the ICRC still matches: a trimmed packet is well formed
    if (r.dscp == wire::kDscpTrimmed) {
      ++trimmed;
      EXPECT_EQ(r.psn, 3u);
      EXPECT_EQ(r.payload_len, 0u);
      EXPECT_EQ(r.dma_len, 3000u);  // RETH keeps the original length
    } else {
      EXPECT_EQ(r.payload_len, 3000u);
    }
  }
  EXPECT_EQ(trimmed, 1);
  // The trimmed packet is shorter at the egress, so it arrives before a full one would.
  EXPECT_LT(t.b->received[0].at, 2 * t.net.serialization_time(data_bytes(3000), 100e9) + us(1));
}

TEST(FaultNet, duplication__delivers_twice) {
  {
    TwoHosts t(NetConfig{});
    ScriptedFault f;
    f.action = FaultAction::kDuplicate;
    f.nth = {1};
    t.net.add_scripted(f);
    for (uint32_t i = 0; i < 3; ++i)
      t.a->send_data(0, 1, 0, 0, i, 64);
    t.net.kick(0);
    t.net.run_until(ms(1));
    std::vector<uint32_t> psns;
    for (const auto& r : t.b->received)
      psns.push_back(r.psn);
    std::sort(psns.begin(), psns.end());
    EXPECT_EQ(psns, (std::vector<uint32_t>{0, 1, 1, 2}));
    EXPECT_EQ(t.net.counters().duplicated, 1u);
  }
  {
    NetConfig cfg;
    cfg.duplicate = 1.0;
    TwoHosts t(cfg);
    for (uint32_t i = 0; i < 5; ++i)
      t.a->send_data(0, 1, 0, 0, i, 64);
    t.net.kick(0);
    t.net.run_until(ms(1));
    EXPECT_EQ(t.b->received.size(), 10u);
    EXPECT_EQ(t.net.counters().duplicated, 5u);
    EXPECT_EQ(t.net.counters().delivered, 10u);
  }
}

TEST(FaultNet, blackhole__drops_only_its_path_during_its_window) {
  TwoHosts t(NetConfig{});
  t.net.blackhole(/*port=*/1, /*ev_index=*/3, us(10), us(20));
  // Before, during and after the window, on the blackholed path and on a neighbour.
  for (Time at : {us(0), us(12), us(15), us(30)}) {
    t.a->send_data(at, 1, 1, 3, static_cast<uint32_t>(at / us(1)), 100);
    t.a->send_data(at, 1, 1, 4, 1000 + static_cast<uint32_t>(at / us(1)), 100);
    t.a->send_data(at, 1, 0, 3, 2000 + static_cast<uint32_t>(at / us(1)), 100);
  }
  t.b->send_ack(us(15), 0, 1, 3, 7);  // the reverse direction of that path is dead too
  t.net.kick(0);
  t.net.kick(1);
  t.net.run_until(ms(1));
  std::vector<uint32_t> psns;
  for (const auto& r : t.b->received)
    psns.push_back(r.psn);
  std::sort(psns.begin(), psns.end());
  EXPECT_EQ(psns, (std::vector<uint32_t>{0, 30, 1000, 1012, 1015, 1030, 2000, 2012, 2015, 2030}));
  EXPECT_TRUE(t.a->received.empty());
  EXPECT_EQ(t.net.counters().dropped_blackhole, 3u);
  EXPECT_EQ(t.net.path_counter(0, 1, 3).dropped, 2u);
  EXPECT_EQ(t.net.path_counter(0, 1, 3).delivered, 2u);
  EXPECT_EQ(t.net.path_counter(1, 1, 3).dropped, 1u);
}

TEST(FaultNet, port_down__is_seen_by_both_ends_and_the_link_drops) {
  NetConfig cfg;
  cfg.delay = us(5);
  TwoHosts t(cfg);
  t.net.add_port_fault(PortFault{-1, 1, us(10), us(50)});
  t.a->send_data(us(8), 1, 1, 0, 1, 100);   // in flight when the port goes down: dropped
  t.a->send_data(us(20), 1, 1, 0, 2, 100);  // waits: the port is not polled while down
  t.a->send_data(us(20), 1, 0, 0, 3, 100);  // the other port carries on
  t.net.kick(0);
  t.net.run_until(ms(1));
  for (ScriptEndpoint* e : {t.a, t.b}) {
    ASSERT_EQ(e->port_calls.size(), 2u);
    EXPECT_EQ(e->port_calls[0].at, us(10));
    EXPECT_EQ(e->port_calls[0].port, 1);
    EXPECT_FALSE(e->port_calls[0].up);
    EXPECT_EQ(e->port_calls[1].at, us(50));
    EXPECT_TRUE(e->port_calls[1].up);
  }
  ASSERT_EQ(t.b->received.size(), 2u);
  EXPECT_EQ(t.b->received[0].psn, 3u);
  EXPECT_EQ(t.b->received[1].psn, 2u);
  EXPECT_GE(t.b->received[1].at, us(55));  // sent when the port came back up
  EXPECT_EQ(t.a->send_times[1], us(20));
  EXPECT_EQ(t.a->send_times[2], us(50));
  EXPECT_EQ(t.net.counters().dropped_port_down, 1u);
  EXPECT_EQ(t.net.counters().port_changes, 4u);
  EXPECT_TRUE(t.net.port_up(0, 1));
}

TEST(FaultNet, port_down__one_sided_fault_and_flaps) {
  TwoHosts t(NetConfig{});
  t.net.add_port_fault(PortFault{1, 0, us(5), kNever});
  t.net.add_flap(PortFlap{0, 1, us(10), us(3), us(7), 3});
  t.a->send_data(us(6), 1, 0, 0, 1, 100);  // host 0's port 0 is up, host 1's is down
  t.net.kick(0);
  t.net.run_until(ms(1));
  EXPECT_TRUE(t.b->received.empty());
  EXPECT_EQ(t.net.counters().dropped_port_down, 1u);
  ASSERT_EQ(t.b->port_calls.size(), 1u);
  ASSERT_EQ(t.a->port_calls.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(t.a->port_calls[i].port, 1);
    EXPECT_EQ(t.a->port_calls[i].up, i % 2 == 1);
    EXPECT_EQ(t.a->port_calls[i].at, us(10) + (i / 2) * us(10) + (i % 2) * us(3));
  }
  EXPECT_FALSE(t.net.port_up(1, 0));
}

TEST(FaultNet, random_faults__trim_ecn_and_corruption) {
  NetConfig cfg;
  cfg.trim = 1.0;
  TwoHosts t(cfg);
  t.a->send_data(0, 1, 0, 0, 1, 500);
  t.a->send_data(0, 1, 0, 0, 2, 0);  // nothing to trim
  t.b->send_ack(0, 0, 0, 0, 9);      // control packets are never trimmed
  t.net.kick(0);
  t.net.kick(1);
  t.net.run_until(ms(1));
  EXPECT_EQ(t.net.counters().trimmed, 1u);
  ASSERT_EQ(t.b->received.size(), 2u);
  ASSERT_EQ(t.a->received.size(), 1u);
  EXPECT_EQ(t.a->received[0].dscp, wire::kDscpData);

  NetConfig ecn;
  ecn.ecn = 1.0;
  TwoHosts u(ecn);
  u.a->send_data(0, 1, 0, 0, 1, 500);
  u.b->send_ack(0, 0, 0, 0, 9);
  u.net.kick(0);
  u.net.kick(1);
  u.net.run_until(ms(1));
  ASSERT_EQ(u.b->received.size(), 1u);
  EXPECT_EQ(u.b->received[0].ecn, wire::kEcnCe);
  ASSERT_EQ(u.a->received.size(), 1u);
  EXPECT_EQ(u.a->received[0].ecn, wire::kEcnNotEct);  // not ECN-capable: never marked
  EXPECT_EQ(u.net.counters().ecn_marked, 1u);

  NetConfig bad;
  bad.corrupt = 1.0;
  TwoHosts v(bad);
  for (uint32_t i = 0; i < 50; ++i)
    v.a->send_data(0, 1, 0, 0, i, 200);
  v.net.kick(0);
  v.net.run_until(ms(1));
  ASSERT_EQ(v.b->received.size(), 50u);
  for (const auto& r : v.b->received)
    EXPECT_FALSE(r.decoded);
  EXPECT_EQ(v.net.counters().corrupted, 50u);
  EXPECT_EQ(v.net.counters().rx_rejected, 50u);
}

TEST(FaultNet, jitter__reorders_but_loses_nothing) {
  NetConfig cfg;
  cfg.jitter = us(5);
  TwoHosts t(cfg);
  for (uint32_t i = 0; i < 200; ++i)
    t.a->send_data(0, 1, 0, 0, i, 64);
  t.net.kick(0);
  t.net.run_until(ms(1));
  ASSERT_EQ(t.b->received.size(), 200u);
  int inversions = 0;
  for (size_t i = 1; i < 200; ++i)
    inversions += t.b->received[i].psn < t.b->received[i - 1].psn;
  EXPECT_GT(inversions, 10);
}

TEST(FaultNet, path_fault__extra_delay_and_loss) {
  TwoHosts t(NetConfig{});
  PathFault slow;
  slow.match.port = 0;
  slow.match.ev_index = 1;
  slow.extra_delay = us(100);
  t.net.add_path_fault(slow);
  PathFault lossy;
  lossy.match.port = 0;
  lossy.match.ev_index = 2;
  lossy.loss = 1.0;
  t.net.add_path_fault(lossy);
  t.a->send_data(0, 1, 0, 1, 1, 64);
  t.a->send_data(0, 1, 0, 0, 2, 64);
  t.a->send_data(0, 1, 0, 2, 3, 64);
  t.net.kick(0);
  t.net.run_until(ms(1));
  ASSERT_EQ(t.b->received.size(), 2u);
  EXPECT_EQ(t.b->received[0].psn, 2u);  // overtook the slow path
  EXPECT_EQ(t.b->received[1].psn, 1u);
  EXPECT_GT(t.b->received[1].at, us(100));
  EXPECT_EQ(t.net.counters().dropped_loss, 1u);
}

// Same seed, same run: every counter and every arrival identical; another seed differs.
TEST(FaultNet, run__same_seed_gives_identical_runs) {
  auto run = [](uint64_t seed) {
    NetConfig cfg;
    cfg.seed = seed;
    cfg.loss = 0.1;
    cfg.duplicate = 0.1;
    cfg.trim = 0.1;
    cfg.ecn = 0.2;
    cfg.jitter = us(2);
    TwoHosts t(cfg);
    for (uint32_t i = 0; i < 300; ++i) {
      t.a->send_data(i * ns(100), 1, static_cast<uint8_t>(i % 2), static_cast<uint16_t>(i % 7), i,
                     100 + i);
      t.b->send_ack(i * ns(300), 0, static_cast<uint8_t>(i % 2), static_cast<uint16_t>(i % 5), i);
    }
    t.net.kick(0);
    t.net.kick(1);
    t.net.run_until(ms(1));
    std::vector<std::tuple<Time, uint32_t, uint8_t, uint8_t, uint32_t>> trace;
    for (const auto& r : t.b->received)
      trace.emplace_back(r.at, r.psn, r.dscp, r.ecn, r.payload_len);
    for (const auto& r : t.a->received)
      trace.emplace_back(r.at, r.psn, r.dscp, r.ecn, r.payload_len);
    const NetCounters& c = t.net.counters();
    std::vector<uint64_t> counters = {c.sent,       c.delivered,  c.dropped_loss,
                                      c.duplicated, c.trimmed,    c.ecn_marked,
                                      c.events,     c.sent_bytes, c.delivered_bytes};
    return std::pair{trace, counters};
  };
  const auto r1 = run(7);
  const auto r2 = run(7);
  const auto r3 = run(8);
  EXPECT_EQ(r1.first, r2.first);
  EXPECT_EQ(r1.second, r2.second);
  EXPECT_NE(r1.first, r3.first);
  EXPECT_GT(r1.second[2], 0u);  // the knobs did something
  EXPECT_GT(r1.second[3], 0u);
  EXPECT_GT(r1.second[4], 0u);
  EXPECT_GT(r1.second[5], 0u);
  // Conservation: every packet sent (plus every copy) is delivered or dropped.
  EXPECT_EQ(r1.second[0] + r1.second[3], r1.second[1] + r1.second[2]);
}

TEST(FaultNet, inject__delivers_raw_bytes_at_their_time) {
  TwoHosts t(NetConfig{});
  wire::Datagram d;
  d.pkt.bth.opcode = wire::Opcode::kAck;
  d.pkt.bth.psn = 77;
  std::vector<uint8_t> bytes(wire::encoded_size(d));
  ASSERT_TRUE(wire::encode(d, bytes));
  t.net.inject(us(42), 1, 1, bytes);
  t.net.inject(us(43), 1, 0, {1, 2, 3});  // garbage: rejected by the receiver
  t.net.run_until(ms(1));
  ASSERT_EQ(t.b->received.size(), 2u);
  EXPECT_EQ(t.b->received[0].at, us(42));
  EXPECT_EQ(t.b->received[0].psn, 77u);
  EXPECT_EQ(t.b->received[0].port, 1);
  EXPECT_FALSE(t.b->received[1].decoded);
  EXPECT_EQ(t.net.counters().injected, 2u);
  EXPECT_EQ(t.net.counters().rx_rejected, 1u);
}

TEST(FaultNet, schedule__runs_callbacks_in_time_order_and_stop_predicate) {
  TwoHosts t(NetConfig{});
  std::vector<int> order;
  t.net.schedule(us(3), [&](Time now) {
    EXPECT_EQ(now, us(3));
    order.push_back(3);
  });
  t.net.schedule(us(1), [&](Time) { order.push_back(1); });
  t.net.schedule(us(1), [&](Time) { order.push_back(2); });  // same time: FIFO
  t.net.schedule(us(9), [&](Time) { order.push_back(9); });
  EXPECT_EQ(t.net.run_until(us(5)), RunStatus::kTimeLimit);
  EXPECT_EQ(t.net.now(), us(5));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(t.net.run_until(ms(1), [&] { return order.size() == 4; }), RunStatus::kStopped);
  EXPECT_EQ(t.net.now(), us(9));
}

TEST(FaultNet, run__detects_a_timer_livelock) {
  NetConfig cfg;
  cfg.livelock_timer_calls = 1000;
  TwoHosts t(cfg);
  t.a->set_always_due();
  t.net.kick(0);
  EXPECT_EQ(t.net.run_until(ms(1)), RunStatus::kLivelock);
  EXPECT_EQ(t.net.counters().timers_fired, 1000u);
}

TEST(FaultNet, pcap_tap__writes_delivered_datagrams) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "mrc_fault_net_test.pcap").string();
  {
    TwoHosts t(NetConfig{});
    ASSERT_TRUE(t.net.enable_pcap(path));
    for (uint32_t i = 0; i < 4; ++i)
      t.a->send_data(0, 1, 0, 0, i, 100);
    t.net.kick(0);
    t.net.run_until(ms(1));
  }  // the network's destruction closes the file
  const auto size = std::filesystem::file_size(path);
  // 24-byte file header + 4 records of (16-byte record header + 14 Ethernet + datagram).
  EXPECT_EQ(size, 24 + 4 * (16 + 14 + data_bytes(100)));
  std::filesystem::remove(path);
}

TEST(FaultNet, close_pcap__reports_a_capture_that_could_not_be_written) {
  // /dev/full opens and takes the buffered header, then refuses every write: the run goes on,
  // and close_pcap() says the file is incomplete.
  TwoHosts t(NetConfig{});
  ASSERT_TRUE(t.net.enable_pcap("/dev/full"));
  for (uint32_t i = 0; i < 4; ++i)
    t.a->send_data(0, 1, 0, 0, i, 100);
  t.net.kick(0);
  t.net.run_until(ms(1));
  EXPECT_EQ(t.net.counters().delivered, 4u);
  const Status st = t.net.close_pcap();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error(), Error::kIoError);
  // Without a capture, or once closed, there is nothing to report.
  EXPECT_TRUE(t.net.close_pcap());
}

}  // namespace
}  // namespace mrc::testnet
