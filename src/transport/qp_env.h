// mrc::QpEnv: what an engine hands its QPs, and the only part of the engine they see. As
// ngtcp2's modules are handed their collaborators (ngtcp2_rtb_init takes its rst, cc and log),
// a QP and its parts are given this one object at construction and never the Engine:
//   - what they read: the configuration, the transmit order, the tail-ACK repeat interval, the
//     registered memory, which ports are up, and the configuration constants shared by every
//     QP (CC specifications, path policies, NSCC parameters: docs/performance.md, "Bytes per
//     QP");
//   - what they count into: the engine's counters and NSCC's statistics;
//   - how they ask to be served: the ready ring (data to send), the control ring (a control
//     packet pending) and the timer heap (a deadline moved), each QP at most once in a ring
//     (its flags say whether it is there);
//   - what they report: completions, events and the event log;
//   - what they share: the engine's RTT estimate and the NIC's probe budget.
// The engine owns one, polls its rings and queues, and keeps the rest of its state (the QP
// table, peers, pending port remaps) to itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/ring.h"
#include "common/shared_constants.h"
#include "transport/engine_types.h"
#include "transport/memory_table.h"

namespace mrc {

class EventLog;
struct LogRecord;

struct QpEnv {
  explicit QpEnv(const EngineConfig& config);

  // ---- Read by QPs ----------------------------------------------------------------------
  EngineConfig config;  // clamped (num_ports 1..32, ack_every 1..kMaxAckEchoes)
  TransmitOrder transmit_order = TransmitOrder::kPerPort;
  Time ack_repeat_after = 0;  // Engine::set_ack_repeat_after
  MemoryTable memory;
  uint32_t port_up_mask;
  // Configuration QPs only read, one copy per distinct value instead of one per QP.
  SharedConstants<CcSpec, CcSpec> cc_specs;
  SharedConstants<PathPolicy, PathPolicy> path_policies;
  SharedConstants<cc::NsccConfig, cc::NsccParams> nscc_params;

  // ---- Counted into -------------------------------------------------------------------
  EngineCounters counters;
  cc::Nscc::Stats nscc_stats;  // what the QPs' NSCC objects count into
  // Counts a received packet dropped for `reason` (EngineCounters::drops) and returns `error`.
  Status drop(DropReason reason, Error error) {
    ++counters.drops[static_cast<int>(reason)];
    return fail(error);
  }

  // ---- Scheduling ---------------------------------------------------------------------
  // FIFO rings of QPNs; `queued` is the QP's flag saying it is in the ring.
  void mark_ready(bool& queued, uint32_t qpn) {
    if (queued) return;
    queued = true;
    ready_ring.push_back(qpn);  // grows (doubling) only when the QP count grows
  }
  void mark_control(bool& queued, uint32_t qpn) {
    if (queued) return;
    queued = true;
    control_ring.push_back(qpn);
  }
  // A QP's deadline may have moved to `deadline`; `armed` is the one its timer entry has.
  void rearm(Time& armed, uint32_t qpn, Time deadline) {
    if (deadline < armed) {
      armed = deadline;
      timers.push_back(TimerEntry{deadline, qpn});
      std::push_heap(timers.begin(), timers.end(), std::greater<>());
    }
  }
  struct TimerEntry {
    Time at;
    uint32_t qpn;
    bool operator>(const TimerEntry& o) const { return at > o.at || (at == o.at && qpn > o.qpn); }
  };
  Ring<uint32_t> ready_ring, control_ring;
  std::vector<TimerEntry> timers;  // binary min-heap, lazily invalidated
  // QPs whose deadline may have moved since it was last armed: the engine computes each one's
  // deadline once, when the driver next asks for the timers (Engine::next_deadline, on_timer),
  // not after every packet (a requester's deadline costs ~110 instructions, and a QP sends
  // and receives several packets per turn of the driver).
  std::vector<uint32_t> rearm_pending;

  // ---- Reports ------------------------------------------------------------------------
  void emit_completion(const Completion& c);
  void emit_event(const Event& e);
  bool logging() const { return log != nullptr; }
  void record(const LogRecord& r);  // to the event log (only while logging())
  Ring<Completion> completions;     // bounded: a full queue drops (counted)
  Ring<Event> events;               // bounded likewise
  EventLog* log = nullptr;          // Engine::set_event_log

  // ---- Shared estimates and budgets ---------------------------------------------------
  // The port-state bitmap ACKs carry (wire::SackExt::ports_down): ports this NIC has taken
  // out of use, the first 24.
  uint32_t ports_down_bitmap() const;
  // Every QP's RTT samples feed the engine's shared estimate (EngineConfig::share_rtt); `raw`
  // includes the responder's service time, as the tail-loss probe must (RFC 6298 gains, as
  // each QP smooths its own; inline: once per acknowledged packet).
  void note_rtt_sample(Time raw) {
    if (!config.share_rtt) return;
    shared_rtt_.min_rtt = std::min(shared_rtt_.min_rtt, raw);
    smooth_rtt(shared_rtt_.srtt, shared_rtt_.rttvar, raw);
  }
  // What a QP without a sample of its own assumes (EngineConfig::fabric_rtt, share_rtt);
  // srtt 0 if nothing is known.
  RttEstimate borrowed_rtt() const {
    if (shared_rtt_.srtt > 0) return shared_rtt_;
    if (config.fabric_rtt > 0)
      return RttEstimate{config.fabric_rtt, config.fabric_rtt / 2, config.fabric_rtt};
    return {};
  }
  // Takes one probe from the NIC's budget (EngineConfig::probe_budget_*); false if none is
  // left, and then next_probe_token() says when there will be one.
  bool take_probe_token(Time now);
  Time next_probe_token() const;
  void refund_probe_token();  // a token taken for a probe that could not go after all
  // EngineConfig::reverse_probe_interval, or the default it stands for.
  Time reverse_probe_interval() const;

 private:
  RttEstimate shared_rtt_;
  // Probe budget: tokens as of probe_tokens_at_.
  uint64_t probe_tokens_ = 0;
  Time probe_tokens_at_ = 0;
};

}  // namespace mrc
