// Per-packet CPU cost of the sans-IO engine, one component at a time:
//   BM_Send         requester Engine::poll_transmit producing one data packet
//   BM_Receive      responder Engine::on_packet of one in-window data packet (placement check,
//                   SACK bookkeeping); /phantom = destination registered with base == nullptr
//                   (no memcpy), /memcpy = real memory (a 4 KiB copy per packet)
//   BM_AckGenerate  responder Engine::poll_transmit producing the ACKs, per data packet
//   BM_AckProcess   requester Engine::on_packet of an ACK (SACK + up to 8 echoes, ack_every=4),
//                   per data packet acknowledged
//
// Every benchmark runs the same closed loop between two engines (one batch per iteration):
// send a batch of data packets, deliver them to the responder in groups of ack_every
// draining its ACKs after each group (as a driver does after each input), deliver the ACKs to
// the requester, then (untimed) repost work and poll completions, and (timed) run due timers.
// Each stage is timed on its own with the TSC, and a benchmark reports the stage it names
// through manual timing, so the untimed driver work (copying TxPacket into RxPacket, reposting
// work) costs nothing. The timers (next_deadline, where the engine arms the deadlines of the
// QPs that sent or received, and on_timer) count with sending for the requester and with
// receiving for the responder. Counter `ns_per_packet` = that stage's nanoseconds / data packets of
// the batch.
//
// Control traffic besides data and ACKs: with the engine's defaults the responder keeps its
// reverse EV set fresh (EngineConfig::reverse_evs_per_plane = 2, docs/engine.md "Reverse
// path"): a QP that receives data and sends none sends one reverse probe per
// Engine::reverse_probe_interval() (50 us here: the responder has no RTT sample), and the
// requester answers each with a probe reply. They are part of what the engine costs per data
// packet, so they go through the stages that carry them (the probe with the ACKs: generated in
// (d), processed in (c); the reply with the data: sent in (a), received in (b)) and are
// amortized over the data packets. A batch is `batch` data packets plus whatever probe replies
// the requester emits on the way; the check after the run accounts for every such packet
// against the engines' counters and bounds the probe rate, so anything else fails the run.
//
// Settings (realistic ones for an 800G NIC): 4096-byte MTU, 8 planes, 128 EVs, NSCC with
// base_rtt 4 us and link 800 Gb/s, mpr = mpr_dest = 64, 1 MiB writes, ack_every 4; every other
// EngineConfig field at its default (unkeyed identifiers, reverse EV set on).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/engine.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace mrc {
namespace {

// ---- clock --------------------------------------------------------------------------------
// The stages are short (a few hundred ns per group of 4 packets): the TSC costs a few ns to
// read where clock_gettime on a KVM guest (kvm-clock) costs tens. Its rate is calibrated once
// against steady_clock and the cost of one read is subtracted from every interval.

inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

struct ClockCal {
  double ns_per_tick = 1.0;
  double overhead_ticks = 0.0;  // an empty interval
};

const ClockCal& clock_cal() {
  static const ClockCal cal = [] {
    ClockCal c;
    using clk = std::chrono::steady_clock;
    const auto w0 = clk::now();
    const uint64_t t0 = ticks();
    while (clk::now() - w0 < std::chrono::milliseconds(50)) {
    }
    const auto w1 = clk::now();
    const uint64_t t1 = ticks();
    const double ns = std::chrono::duration<double, std::nano>(w1 - w0).count();
    c.ns_per_tick = ns / static_cast<double>(t1 - t0);
    // Median of many empty intervals (the minimum undercounts: reads can overlap).
    std::vector<uint64_t> d(10001);
    for (auto& x : d) {
      const uint64_t a = ticks();
      const uint64_t b = ticks();
      x = b - a;
    }
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    c.overhead_ticks = static_cast<double>(d[d.size() / 2]);
    return c;
  }();
  return cal;
}

// ---- the loop -----------------------------------------------------------------------------

constexpr int kPorts = 8;
constexpr int kEvs = 128;
constexpr uint32_t kMtu = 4096;
constexpr uint64_t kMsgBytes = 1 << 20;
constexpr uint64_t kSrcBytes = 1 << 20;
constexpr uint64_t kDstBytes = 4 << 20;  // writes cycle over 4 slots of 1 MiB
constexpr uint64_t kSrcIova = 0x10000000;
constexpr uint64_t kDstIova = 0x40000000;
constexpr Time kSerialize = 41'000;  // 4 KiB + headers at 800 Gb/s, ps
constexpr Time kPropagation = us(1);
constexpr uint32_t kAllPorts = (1u << kPorts) - 1;

struct LoopOptions {
  int qps = 1;
  bool real_memory = false;  // false: phantom regions (no bytes, no memcpy)
};

struct StageTicks {
  double send = 0, receive = 0, ack_generate = 0, ack_process = 0;
};

// The packets the loop carried, by kind (running totals).
struct Traffic {
  uint64_t data = 0;            // requester -> responder data packets (WRITE / WRITE-imm)
  uint64_t probe_replies = 0;   // requester -> responder: answers to reverse probes
  uint64_t acks = 0;            // responder -> requester
  uint64_t reverse_probes = 0;  // responder -> requester: probes of its reverse EV set
  uint64_t other = 0;           // anything else, either way (must stay 0)
  Traffic operator-(const Traffic& o) const {
    return {data - o.data, probe_replies - o.probe_replies, acks - o.acks,
            reverse_probes - o.reverse_probes, other - o.other};
  }
};

inline bool is_data(const wire::TransportPacket& p) {
  return p.bth.opcode == wire::Opcode::kWriteOnly || p.bth.opcode == wire::Opcode::kWriteOnlyImm;
}

QpAttr qp_attr(uint32_t dest_qpn) {
  QpAttr a;
  for (int i = 0; i < kEvs; ++i) {
    PathDesc d;
    d.port = static_cast<uint8_t>(i % kPorts);
    d.ev[0] = static_cast<uint8_t>(i);
    d.ev[1] = static_cast<uint8_t>(i >> 8);
    a.paths.push_back(d);
  }
  a.ev_min_active = 1;
  a.cc.algorithm = CcAlgorithm::kNscc;
  a.cc.nscc.base_rtt = us(4);
  a.cc.nscc.link_bps = 800'000'000'000ull;
  a.dest_qpn = dest_qpn;
  a.path_mtu = kMtu;
  a.mpr = 64;
  a.mpr_dest = 64;
  return a;
}

class Loop {
 public:
  explicit Loop(const LoopOptions& o) : opt_(o) {
    for (int i = 0; i < 2; ++i) {
      EngineConfig cfg;
      cfg.num_ports = kPorts;
      cfg.seed = 7 + static_cast<uint64_t>(i);
      eng_[i] = std::make_unique<Engine>(cfg);
    }
    if (opt_.real_memory) {
      src_.resize(kSrcBytes);
      for (size_t i = 0; i < src_.size(); ++i)
        src_[i] = static_cast<uint8_t>(i * 131 + 7);
      dst_.assign(kDstBytes, 0);
    }
    src_keys_ = *eng_[0]->register_memory(opt_.real_memory ? src_.data() : nullptr, kSrcBytes,
                                          kSrcIova, kLocalWrite);
    dst_keys_ = *eng_[1]->register_memory(opt_.real_memory ? dst_.data() : nullptr, kDstBytes,
                                          kDstIova, kLocalWrite | kRemoteWrite);
    for (int q = 0; q < opt_.qps; ++q) {
      qpn_[0].push_back(*eng_[0]->create_qp(QpCreateAttr{}));
      qpn_[1].push_back(*eng_[1]->create_qp(QpCreateAttr{}));
    }
    for (int q = 0; q < opt_.qps; ++q) {
      for (int i = 0; i < 2; ++i) {
        const QpAttr a = qp_attr(qpn_[1 - i][static_cast<size_t>(q)]);
        const uint32_t qpn = qpn_[i][static_cast<size_t>(q)];
        ok_ = ok_ && eng_[i]->modify_qp(0, qpn, QpState::kInit, a).has_value() &&
              eng_[i]->modify_qp(0, qpn, QpState::kRtr, a).has_value() &&
              eng_[i]->modify_qp(0, qpn, QpState::kRts, a).has_value();
      }
    }
    // QPNs are the engine's to choose (consecutive only while identifiers are unkeyed).
    for (int q = 0; q < opt_.qps; ++q)
      qp_index_[qpn_[0][static_cast<size_t>(q)]] = static_cast<size_t>(q);
    posted_.assign(static_cast<size_t>(opt_.qps), 0);
    completed_.assign(static_cast<size_t>(opt_.qps), 0);
    // 4 packets per QP per batch so that every responder QP acknowledges (ack_every = 4);
    // at least 64 packets so the per-batch clock reads are amortized.
    batch_ = std::max(64, 4 * opt_.qps);
    // Room for control packets beside the data: at most one probe reply per QP (a QP has one
    // reverse probe outstanding at a time), and per group of 4 data packets one ACK, plus one
    // reverse probe per QP. Running out of room fails the batch.
    tx_.resize(static_cast<size_t>(batch_ + 2 * opt_.qps + 8));
    rx_.resize(tx_.size());
    ack_tx_.resize(static_cast<size_t>(batch_ + 2 * opt_.qps + 64));
    ack_rx_.resize(ack_tx_.size());
    refill();
  }

  bool ok() const { return ok_; }
  int batch() const { return batch_; }
  const Engine& requester() const { return *eng_[0]; }
  const Engine& responder() const { return *eng_[1]; }
  const Traffic& traffic() const { return traffic_; }
  Time now() const { return now_; }
  const uint8_t* dst() const { return dst_.data(); }

  // One batch through all stages; adds each stage's ticks to `t`. nullptr, or why the batch
  // could not be run.
  const char* run_batch(StageTicks& t) {
    const double overhead = clock_cal().overhead_ticks;
    Engine& req = *eng_[0];
    Engine& rsp = *eng_[1];
    const size_t n = static_cast<size_t>(batch_);

    // 1. Send: poll_transmit, one packet per call, until the batch has `n` data packets
    // (probe replies, if any, go out among them).
    Time now = now_;
    uint64_t a = ticks();
    size_t sent = 0, data = 0;
    while (data < n && sent < tx_.size()) {
      if (!req.poll_transmit(now, kAllPorts, tx_[sent])) break;
      data += is_data(tx_[sent].pkt);
      ++sent;
      now += kSerialize;
    }
    uint64_t b = ticks();
    t.send += static_cast<double>(b - a) - overhead;
    if (data != n) {
      return sent == tx_.size() ? "requester sent more control packets than a batch has room for"
                                : "loop stalled: the requester stopped sending (window closed?)";
    }

    // Untimed: the "network", and the groups of 4 data packets the responder gets between
    // drains (a control packet joins the group it arrives in).
    group_end_.clear();
    size_t group_data = 0;
    for (size_t i = 0; i < sent; ++i) {
      rx_[i].port = tx_[i].port;
      rx_[i].ecn_ce = false;
      rx_[i].trimmed = false;
      rx_[i].pkt = tx_[i].pkt;  // payload points into the requester's registered memory
      if (is_data(tx_[i].pkt)) {
        if (++group_data == 4) {
          group_end_.push_back(i + 1);
          group_data = 0;
        }
      } else if (tx_[i].pkt.bth.opcode == wire::Opcode::kProbeReply) {
        ++traffic_.probe_replies;
      } else {
        ++traffic_.other;
      }
    }
    traffic_.data += data;
    if (group_end_.empty()) group_end_.push_back(sent);
    group_end_.back() = sent;  // trailing control packets join the last group

    // 2. Receive in groups of 4 (ack_every), draining the responder after each group.
    Time rnow = now_ + kPropagation;
    size_t nack = 0;
    size_t j = 0;
    for (const size_t end : group_end_) {
      a = ticks();
      for (; j < end; ++j) {
        (void)rsp.on_packet(rnow, rx_[j]);
        rnow += kSerialize;
      }
      b = ticks();
      while (nack < ack_tx_.size() && rsp.poll_transmit(rnow, kAllPorts, ack_tx_[nack]))
        ++nack;
      const uint64_t c = ticks();
      t.receive += static_cast<double>(b - a) - overhead;
      t.ack_generate += static_cast<double>(c - b) - overhead;
    }
    if (nack == ack_tx_.size()) return "responder sent more packets than a batch has room for";

    for (size_t k = 0; k < nack; ++k) {
      ack_rx_[k].port = ack_tx_[k].port;
      ack_rx_[k].ecn_ce = false;
      ack_rx_[k].trimmed = false;
      ack_rx_[k].pkt = ack_tx_[k].pkt;
      switch (ack_tx_[k].pkt.bth.opcode) {
        case wire::Opcode::kAck:
          ++traffic_.acks;
          break;
        case wire::Opcode::kProbe:
          ++traffic_.reverse_probes;
          break;
        default:
          ++traffic_.other;
      }
    }

    // 3. ACK processing at the requester (and the reverse probes, which queue replies).
    const Time anow = rnow + kPropagation;
    a = ticks();
    for (size_t k = 0; k < nack; ++k)
      (void)req.on_packet(anow, ack_rx_[k]);
    b = ticks();
    t.ack_process += static_cast<double>(b - a) - overhead;

    // Untimed: the rest of the driver's duties, but for the timers: the engine arms a QP's
    // deadline when the driver asks for it (Engine::next_deadline), so that work is the
    // requester's (counted with sending) and the responder's (counted with receiving).
    now_ = std::max(now, anow);
    for (int i = 0; i < 2; ++i) {
      Completion c;
      while (eng_[i]->poll_completion(c)) {
        if (i == 0) ++completed_[qp_index_.at(c.qpn)];
      }
      Event e;
      while (eng_[i]->poll_event(e)) {
      }
      a = ticks();
      if (eng_[i]->next_deadline() <= now_) eng_[i]->on_timer(now_);
      b = ticks();
      (i == 0 ? t.send : t.receive) += static_cast<double>(b - a) - overhead;
    }
    refill();
    return ok_ ? nullptr : "post_write failed";
  }

 private:
  // Keeps every requester QP's send queue nearly full of 1 MiB writes.
  void refill() {
    for (int q = 0; q < opt_.qps; ++q) {
      const size_t s = static_cast<size_t>(q);
      while (posted_[s] - completed_[s] < 64) {
        WriteWr w;
        w.wr_id = posted_[s];
        w.lkey = src_keys_.lkey;
        w.local_addr = kSrcIova;
        w.length = kMsgBytes;
        w.remote_addr = kDstIova + (posted_[s] % (kDstBytes / kMsgBytes)) * kMsgBytes;
        w.rkey = dst_keys_.rkey;
        if (!eng_[0]->post_write(now_, qpn_[0][s], w)) {
          ok_ = false;
          return;
        }
        ++posted_[s];
      }
    }
  }

  LoopOptions opt_;
  std::unique_ptr<Engine> eng_[2];
  std::vector<uint32_t> qpn_[2];
  std::unordered_map<uint32_t, size_t> qp_index_;  // requester QPN -> index in qpn_[0]
  std::vector<uint8_t> src_, dst_;
  MemoryKeys src_keys_, dst_keys_;
  std::vector<uint64_t> posted_, completed_;
  int batch_ = 64;
  std::vector<TxPacket> tx_, ack_tx_;
  std::vector<RxPacket> rx_, ack_rx_;
  std::vector<size_t> group_end_;
  Time now_ = us(1);
  Traffic traffic_;
  bool ok_ = true;
};

enum class Stage { kSend, kReceive, kAckGenerate, kAckProcess };

double stage_ticks(const StageTicks& t, Stage s) {
  switch (s) {
    case Stage::kSend:
      return t.send;
    case Stage::kReceive:
      return t.receive;
    case Stage::kAckGenerate:
      return t.ack_generate;
    case Stage::kAckProcess:
      return t.ack_process;
  }
  return 0;
}

// What a measured run must look like: every data packet sent once and placed once, nothing
// dropped, lost or resent (else we measure recovery, not the fast path), and no control
// traffic but ACKs and the reverse-set probes with their replies, each packet matched by the
// engine counter that produced it, and the probes no more often than one per QP per probe
// interval. An empty string, or what differs (with the counters).
std::string check_run(const Loop& loop, int qps, uint64_t packets, const Traffic& d, Time elapsed,
                      const EngineCounters& req0, const EngineCounters& req,
                      const EngineCounters& rsp0, const EngineCounters& rsp) {
  std::string why;
  auto expect = [&why](bool ok, const std::string& what) {
    if (!ok) why += (why.empty() ? "" : "; ") + what;
  };
  auto u = [](uint64_t v) { return std::to_string(v); };
  for (int r = 0; r < static_cast<int>(DropReason::kCount); ++r) {
    const uint64_t n = req.drops[r] - req0.drops[r] + rsp.drops[r] - rsp0.drops[r];
    expect(n == 0, u(n) + " drops (" + drop_reason_name(static_cast<DropReason>(r)) + ")");
  }
  const uint64_t sent = req.data_sent - req0.data_sent;
  const uint64_t placed = rsp.data_received - rsp0.data_received;
  expect(d.data == packets && sent == packets && placed == packets,
         "data packets: " + u(packets) + " in the batches, " + u(d.data) + " seen, " + u(sent) +
             " sent, " + u(placed) + " placed");
  expect(req.retransmits == req0.retransmits && req.losses_detected == req0.losses_detected &&
             req.timeouts == req0.timeouts && rsp.duplicates == rsp0.duplicates,
         u(req.retransmits - req0.retransmits) + " retransmissions, " +
             u(req.losses_detected - req0.losses_detected) + " losses, " +
             u(req.timeouts - req0.timeouts) + " timeouts, " + u(rsp.duplicates - rsp0.duplicates) +
             " duplicates");
  expect(d.other == 0, u(d.other) + " packets neither data, ACK, reverse probe nor probe reply");
  expect(d.acks == rsp.acks_sent - rsp0.acks_sent,
         u(d.acks) + " ACKs seen, responder counted " + u(rsp.acks_sent - rsp0.acks_sent));
  const uint64_t probes = rsp.reverse_probes_sent - rsp0.reverse_probes_sent;
  const uint64_t replies = req.probe_replies_sent - req0.probe_replies_sent;
  expect(d.reverse_probes == probes && rsp.probes_sent == rsp0.probes_sent &&
             req.probes_sent == req0.probes_sent,
         u(d.reverse_probes) + " probes seen, " + u(probes) + " reverse probes and " +
             u(rsp.probes_sent - rsp0.probes_sent + req.probes_sent - req0.probes_sent) +
             " path probes counted");
  expect(d.probe_replies == replies,
         u(d.probe_replies) + " probe replies seen, requester counted " + u(replies));
  expect(rsp.reverse_probes_unanswered == rsp0.reverse_probes_unanswered &&
             rsp.ack_ev_changes == rsp0.ack_ev_changes,
         u(rsp.reverse_probes_unanswered - rsp0.reverse_probes_unanswered) +
             " reverse probes unanswered, " + u(rsp.ack_ev_changes - rsp0.ack_ev_changes) +
             " reverse EV set changes");
  const Time interval = loop.responder().reverse_probe_interval();
  const uint64_t max_probes = static_cast<uint64_t>(qps) * (elapsed / interval + 1);
  expect(probes <= max_probes, u(probes) + " reverse probes in " + u(elapsed / 1000000) +
                                   " us of engine time, at most " + u(max_probes) + " expected");
  return why;
}

void run_stage(benchmark::State& state, Stage stage, const LoopOptions& opt) {
  const ClockCal& cal = clock_cal();
  Loop loop(opt);
  if (!loop.ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  // Warm up: the window opens, RTT estimates and NSCC settle, caches fill, the reverse EV set
  // is filled.
  StageTicks warm;
  for (int i = 0; i < 200; ++i) {
    if (const char* err = loop.run_batch(warm)) {
      state.SkipWithError((std::string("warm-up: ") + err).c_str());
      return;
    }
  }
  const EngineCounters before_req = loop.requester().counters();
  const EngineCounters before_rsp = loop.responder().counters();
  const Traffic traffic_before = loop.traffic();
  const Time time_before = loop.now();
  double total_ns = 0;
  uint64_t packets = 0;
  const uint64_t loop_start = ticks();
  for (auto _ : state) {
    StageTicks t;
    if (const char* err = loop.run_batch(t)) {
      state.SkipWithError(err);
      return;
    }
    const double ns = std::max(0.0, stage_ticks(t, stage)) * cal.ns_per_tick;
    state.SetIterationTime(ns * 1e-9);
    total_ns += ns;
    packets += static_cast<uint64_t>(loop.batch());
  }
  const double loop_ns = static_cast<double>(ticks() - loop_start) * cal.ns_per_tick;
  const Traffic d = loop.traffic() - traffic_before;
  const std::string why =
      check_run(loop, opt.qps, packets, d, loop.now() - time_before, before_req,
                loop.requester().counters(), before_rsp, loop.responder().counters());
  if (!why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const auto per_packet = [packets](double v) {
    return benchmark::Counter(packets ? v / static_cast<double>(packets) : 0.0);
  };
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  state.counters["ns_per_packet"] = per_packet(total_ns);
  state.counters["acks_per_packet"] = per_packet(static_cast<double>(d.acks));
  // Reverse probes (responder) plus their replies (requester), per data packet.
  state.counters["probes_per_packet"] =
      per_packet(static_cast<double>(d.reverse_probes + d.probe_replies));
  state.counters["batch"] = benchmark::Counter(loop.batch());
  // Everything per packet: all four stages plus the driver work (a sanity check of the clock
  // against the CPU time column, which covers the same loop).
  state.counters["loop_ns_per_packet"] = per_packet(loop_ns);
}

void BM_Send(benchmark::State& state) {
  run_stage(state, Stage::kSend, LoopOptions{static_cast<int>(state.range(0)), false});
}
void BM_Receive(benchmark::State& state) {
  run_stage(state, Stage::kReceive, LoopOptions{1, state.range(0) != 0});
}
void BM_AckGenerate(benchmark::State& state) {
  run_stage(state, Stage::kAckGenerate, LoopOptions{1, false});
}
void BM_AckProcess(benchmark::State& state) {
  run_stage(state, Stage::kAckProcess, LoopOptions{1, false});
}

// Real (memcpy) placement next to phantom, so the copy's share is visible.
BENCHMARK(BM_Send)->ArgName("qps")->Arg(1)->Arg(64)->UseManualTime();
BENCHMARK(BM_Receive)->ArgName("memcpy")->Arg(0)->Arg(1)->UseManualTime();
BENCHMARK(BM_AckProcess)->UseManualTime();
BENCHMARK(BM_AckGenerate)->UseManualTime();

}  // namespace
}  // namespace mrc

BENCHMARK_MAIN();
