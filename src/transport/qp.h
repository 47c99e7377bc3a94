// One queue pair: the requester (segmentation, spraying, loss recovery, completions) and the
// responder (checks, placement, SACK generation, immediates) of an MRC or RoCEv2 RC
// connection. Owned and driven by Engine (engine.h, the external contract); all it sees of
// the engine is the QpEnv it is handed (qp_env.h).
//
// The QP is the state machine, the dispatch of received packets, the control packets' table
// and the combination of its parts' timers; the parts live in modules of their own, each
// handed what it needs for a call:
//   Requester (requester.h)           the requester (tx_): the send queue, the PSN ring, the
//                                     retransmission queue, congestion control, and its
//                                     protocol: sending, ACK processing, loss recovery,
//                                     completions (RequesterContext);
//   LossDetector (loss_detector.h)    the requester's transmission records in send order and
//                                     per path, RACK, the tail-loss probe, the ACK timeout;
//   Responder (responder.h)           the responder: checks, placement, completions in order,
//                                     the ACKs, NACKs and CNPs it owes; made when the QP first
//                                     receives (rx_), given back when idle (ResponderContext);
//   ReceiveWindow (receive_window.h)  the responder's PSN bitmap, open messages and the
//                                     echoes its next ACK carries;
//   control.h                         the control packets: one table of kinds (the rows of
//                                     produce_control) served by one emit step, and the
//                                     paths they take.
// What a part cannot decide alone it returns (a requester call after which the QP fails
// returns the status to fail with); path-state changes are reported through the context
// (RequesterContext::report_path_change).
//
// Ring memory follows what is in flight, not the window: every ring (the PSN ring, the
// transmission records, the retransmission queue, the send queue, the responder's PSN bitmap
// and message ring, and the small control queues) starts at EngineConfig::qp_initial_ring
// entries and doubles when a new entry would not fit, up to its protocol limit (MPR,
// sq_depth, ...). Window checks use the limits, never the current size, so behaviour does not
// depend on how far a ring has grown. A simulated all-to-all holds ~a million QPs that carry a
// few packets each, so a QP also frees its rings once idle (release_idle_requester_rings; the
// responder's when its window is idle) and holds the responder's state only once it receives
// (Responder). docs/performance.md, "Bytes per QP".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/array.h"
#include "common/ring.h"
#include "transport/control.h"
#include "transport/engine_types.h"
#include "transport/loss_detector.h"
#include "transport/qp_env.h"
#include "transport/receive_window.h"
#include "transport/requester.h"
#include "transport/responder.h"
#include "transport/reverse_path.h"

namespace mrc {

class Qp {
 public:
  Qp(QpEnv& env, uint32_t qpn, const QpCreateAttr& attr, uint64_t seed);
  ~Qp();

  uint32_t qpn() const { return qpn_; }
  uint32_t peer() const { return peer_; }  // QpAttr::peer (0 before RTR)
  QpState state() const { return state_; }
  const PathSet& paths() const { return paths_; }
  QpStats stats() const;  // the counts below and the loss detector's estimates
  QpMemory memory() const;
  const QpCreateAttr& create_attr() const { return create_; }

  Status modify(Time now, QpState target, const QpAttr& attr);
  Status post_write(Time now, const WriteWr& wr);
  Status post_recv(uint64_t wr_id);
  Status on_packet(Time now, const RxPacket& rx);
  Status set_path_denied(Time now, int ev_index, bool denied);
  Status replace_path(Time now, int ev_index, const PathDesc& desc);
  Status update(const QpUpdate& u);
  QpLimits limits() const;
  Status reconfigure_cc(const CcSpec& cc);
  const cc::CongestionControl* congestion_control() const { return tx_.cc.get(); }
  void set_port_up(Time now, uint8_t port, bool up);

  // Control packets (ACK, NACK, CNP, probe, probe reply) pending?
  bool has_control() const;
  // Writes the next control packet into `out` if one can go out on a port in `mask`.
  bool produce_control(Time now, uint32_t mask, TxPacket& out);

  using DataResult = Requester::DataResult;
  // Writes the next data packet (retransmission first) into `out` (Requester::produce_data).
  // kIdle: the QP leaves the ready list. Inline: the engine calls it for every packet sent.
  DataResult produce_data(Time now, uint32_t mask, TxPacket& out) {
    if (state_ != QpState::kRts) return DataResult::kIdle;
    return tx_.produce_data(requester_context(), now, mask, out);
  }

  Time deadline() const;
  void on_timer(Time now);

  // Engine bookkeeping: in_ready, in_control and armed, declared below (the flags share a
  // word with rx_msg_base_ and max_wimm_dest_), and in_rearm (a bit beside probes_due_).

 private:
  // ---- transitions --------------------------------------------------------------------
  Status to_init(const QpAttr& a);
  Status to_rtr(const QpAttr& a);
  Status to_rts(Time now, const QpAttr& a);
  void to_err(Time now, WcStatus first_status);

  bool is_mrc() const { return transport_ == TransportMode::kMrc; }
  // What the requester is handed for a call.
  RequesterContext requester_context() {
    return RequesterContext{env_, paths_, reverse_, in_ready, address(), seed_, mtu_, is_mrc()};
  }
  // A requester call returned `s`: anything but kSuccess fails the QP with it (true then).
  bool failed(Time now, WcStatus s) {
    if (s == WcStatus::kSuccess) return false;
    to_err(now, s);
    return true;
  }
  void ensure_responder();
  void ensure_responder_rings();
  void release_idle_responder(Time now);

  // ---- responder (responder.h) and control packets (control.h) --------------------------
  // What the responder is handed for a call.
  ResponderContext responder_context();
  void on_probe(Time now, const RxPacket& rx);
  void on_probe_reply(Time now, const RxPacket& rx);
  PacketAddress address() const { return PacketAddress{qpn_, peer_, dest_qpn_}; }
  // The path of an ACK or trim NACK (control.h ack_path) from this QP's paths and responder.
  int ack_path(Time now, uint8_t preferred_port, int preferred_path, uint32_t mask, bool repeat);
  // The QP's requests to its engine (QpEnv): data to send, a control packet pending.
  void mark_ready() { env_.mark_ready(in_ready, qpn_); }
  void mark_control() { env_.mark_control(in_control, qpn_); }

  QpEnv& env_;  // all the QP sees of its engine
  const uint32_t qpn_;
  QpCreateAttr create_;
  // (Fields are ordered so that small ones share what padding would take: docs/
  // performance.md, "Bytes per QP".)
  QpState state_ = QpState::kReset;
  TransportMode transport_ = TransportMode::kMrc;
  bool probes_due_ : 1 = false;         // a path probe is due (control pending)
  bool reverse_probe_due_ : 1 = false;  // a reverse-set probe is due (control pending)

 public:
  bool in_rearm : 1 = false;  // engine bookkeeping: in QpEnv::rearm_pending (Engine::rearm)

 private:
  // Attributes (RTR; the requester's RTS attributes are the Requester's).
  uint32_t dest_qpn_ = 0;
  uint64_t seed_;
  uint32_t peer_ = 0, mtu_ = 4096;

  PathSet paths_;
  ReversePathSet reverse_;                 // responder: where its ACKs go (paper 2.4)
  std::shared_ptr<const CcSpec> cc_spec_;  // the engine's copy (QpEnv::cc_specs); set at INIT

  // The requester (requester.h); its rings exist while it has work, its loss detector once
  // it has posted some.
  Requester tx_;

  // Responder state: allocated when the QP first receives (ensure_responder).
  std::unique_ptr<Responder> rx_;
  // RTR: the first PSN the responder expects; after release_idle_responder, the next one.
  uint32_t rq_psn_ = 0;
  uint32_t mpr_dest_psns_ = 1024;  // RTR: MPR_dest in PSNs (the responder's window)
  // Where a released responder's window resumes (release_idle_responder): its next message
  // and the payload bytes received so far.
  uint32_t rx_msg_base_ = 0;

 public:
  // Engine bookkeeping.
  bool in_ready = false;
  bool in_control = false;

 private:
  uint16_t max_wimm_dest_ = 64;  // RTR: QpAttr::max_wimm_dest, QpUpdate::max_wimm_dest

 public:
  Time armed = kNever;

 private:
  uint64_t rx_received_bytes_ = 0;
  // Probe replies: a requester answers the peer responder's reverse-set probes too. Made by
  // the first probe, gone once empty (most QPs hold none at a time).
  std::unique_ptr<Ring<ProbeReply>> probe_replies_;
};

}  // namespace mrc
