// One queue pair: the requester (segmentation, spraying, loss recovery, completions) and the
// responder (checks, placement, SACK generation, immediates) of an MRC or RoCEv2 RC
// connection. Owned and driven by Engine (engine.h, the external contract); all it sees of
// the engine is the QpEnv it is handed (qp_env.h).
//
// The QP is the state machine, the dispatch of received packets and the requester's protocol
// (sending, ACK processing, loss recovery); its other parts live in modules of their own, each
// handed what it needs:
//   Requester (requester.h)           the requester's state (tx_): the send queue, the PSN
//                                     ring (which WR/packet a PSN carries, its state -- in
//                                     flight / acknowledged / lost and queued for resend --
//                                     and its latest transmission), the retransmission queue,
//                                     and the bookkeeping that needs nothing else;
//   LossDetector (loss_detector.h)    the requester's transmission records in send order and
//                                     per path, RACK, the tail-loss probe, the ACK timeout;
//   Responder (responder.h)           the responder: checks, placement, completions in order,
//                                     the ACKs, NACKs and CNPs it owes; made when the QP first
//                                     receives (rx_), given back when idle;
//   ReceiveWindow (receive_window.h)  the responder's PSN bitmap, open messages and the
//                                     echoes its next ACK carries;
//   control.h                         the control packets: one table of kinds (the rows of
//                                     produce_control) served by one emit step, and the
//                                     paths they take.
// The QP acts on a loss (resend on another path, congestion control, path state); trim NACKs
// declare their PSN lost directly.
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
  const cc::CongestionControl* congestion_control() const { return cc_.get(); }
  void set_port_up(Time now, uint8_t port, bool up);
  // The peer's port-state bitmap (from its ACKs) changed: stop using its dead ports' planes.
  void on_peer_ports(Time now, uint32_t ports_down);

  // Control packets (ACK, NACK, CNP, probe, probe reply) pending?
  bool has_control() const;
  // Writes the next control packet into `out` if one can go out on a port in `mask`.
  bool produce_control(Time now, uint32_t mask, TxPacket& out);

  enum class DataResult { kSent, kPortsBusy, kIdle };
  // Writes the next data packet (retransmission first) into `out`. kPortsBusy: something
  // could be sent but not on the ports in `mask`; kIdle: nothing can be sent now (no work,
  // window, congestion window or pacing): the QP leaves the ready list.
  DataResult produce_data(Time now, uint32_t mask, TxPacket& out);

  Time deadline() const;
  void on_timer(Time now);

  // Engine bookkeeping: in_ready, in_control and armed, declared below (the flags share a
  // word with rx_msg_base_).

 private:
  // ---- requester types (requester.h) ------------------------------------------------
  using PktState = Requester::PktState;
  using SendWr = Requester::SendWr;
  using TxPkt = Requester::TxPkt;

  // ---- transitions --------------------------------------------------------------------
  Status to_init(const QpAttr& a);
  Status to_rtr(const QpAttr& a);
  Status to_rts(Time now, const QpAttr& a);
  void to_err(Time now, WcStatus first_status);

  // ---- requester ------------------------------------------------------------------------
  bool is_mrc() const { return transport_ == TransportMode::kMrc; }
  void ensure_requester_rings();
  void ensure_responder();
  void ensure_responder_rings();
  void release_idle_requester_rings(Time now);
  void release_idle_responder(Time now);
  // The size a ring whose limit is `limit` (a power of two) starts at.
  uint32_t initial_ring(uint32_t limit) const;
  // start_new_packet once the PSN ring has doubled: cold and out of line (Requester::
  // grow_pkt_ring), so that the common path needs no stack frame.
  [[gnu::cold, gnu::noinline]] void grow_and_start_new_packet(Time now, SendWr& w, uint32_t bytes);
  bool window_allows_new(const SendWr& w) const;
  bool cc_allows(Time now, uint32_t bytes) const;
  DataResult blocked_by_cc(Time now);
  DataResult produce_roce_data(Time now, uint32_t mask, TxPacket& out);
  SendWr* sendable_new_packet(Time now, uint32_t& bytes, DataResult& why_not);
  void start_new_packet(Time now, SendWr& w, uint32_t bytes);
  void fill_data(Time now, uint32_t psn, int path, bool retransmit, TxPacket& out);
  void on_ack(Time now, const RxPacket& rx);
  void on_roce_ack(Time now, const RxPacket& rx);
  void on_trim_nack(Time now, const RxPacket& rx);
  void on_probe_reply(Time now, const RxPacket& rx);
  // Marks `psn` acknowledged (first time only). Returns true if newly acknowledged.
  bool ack_psn(Time now, uint32_t psn);
  void declare_lost(Time now, uint32_t psn, bool mark_path, LossCause cause);
  void on_spurious_loss(Time now, uint16_t ev, bool by_pto);
  void on_duplicate_echo(bool by_pto);
  // What loss detection borrows from the engine (LossContext).
  LossContext loss_context() const;
  // `known_end`: PSNs from it on are beyond what the ACK reports (cumulative + SACK bitmap),
  // so their absence proves nothing.
  void detect_losses_on_path(Time now, uint16_t ev, uint32_t upto_rec, uint32_t known_end);
  void detect_losses_rack(Time now, bool check_pto);
  void note_delivered(Time sent_at, uint32_t seq, uint16_t ev);
  bool has_outstanding() const;
  void on_rto(Time now);
  void report_path_change(Time now, int ev, const PathStateChange& c);

  // ---- responder (responder.h) and control packets (control.h) --------------------------
  // What the responder is handed for a call.
  ResponderContext responder_context();
  void on_probe(Time now, const RxPacket& rx);
  void fill_common(TxPacket& out, uint8_t port, int path);
  // The path of an ACK or trim NACK (control.h ack_path) from this QP's paths and responder.
  int ack_path(Time now, uint8_t preferred_port, int preferred_path, uint32_t mask, bool repeat);
  void report_reverse_change(Time now, const ReverseChange& c);
  // The QP's requests to its engine (QpEnv): data to send, a control packet pending.
  void mark_ready() { env_.mark_ready(in_ready, qpn_); }
  void mark_control() { env_.mark_control(in_control, qpn_); }

  QpEnv& env_;  // all the QP sees of its engine
  const uint32_t qpn_;
  QpCreateAttr create_;
  QpState state_ = QpState::kReset;
  TransportMode transport_ = TransportMode::kMrc;
  // (Fields are ordered so that small ones share what padding would take: docs/
  // performance.md, "Bytes per QP".)
  bool probes_due_ = false;         // a path probe is due (control pending)
  bool reverse_probe_due_ = false;  // a reverse-set probe is due (control pending)
  uint8_t loss_timeout_ = kDefaultAckTimeout, loss_retry_linear_ = kDefaultRetryLinear,
          loss_retry_exp_ = kDefaultRetryExp;  // RTS (tx_.loss)
  uint64_t seed_;

  // Attributes.
  uint32_t dest_qpn_ = 0, peer_ = 0, mtu_ = 4096;
  uint32_t mpr_psns_ = 1024;
  uint16_t max_wimm_ = 64, max_wimm_dest_ = 64;
  uint32_t wimm_outstanding_ = 0;  // requester

  PathSet paths_;
  ReversePathSet reverse_;  // responder: where its ACKs go (paper 2.4)
  struct SendCounts {
    uint64_t data_sent = 0, retransmits = 0;
  } sent_;
  std::shared_ptr<const CcSpec> cc_spec_;  // the engine's copy (QpEnv::cc_specs); set at INIT
  std::unique_ptr<cc::CongestionControl> cc_;
  Time pacing_wait_until_ = kNever;  // blocked by pacing until then

  // The requester's state (requester.h); its rings exist while it has work, its loss
  // detector once it has posted some.
  Requester tx_;
  // The transmit queue whose order a transmission on path `ev` keeps.
  uint32_t transmit_queue(uint16_t ev) const;
  // Makes the loss detector, starting where one made at RTS would be.
  LossDetector& ensure_loss();
  LossTiming loss_timing() const;

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
  Time armed = kNever;

 private:
  uint64_t rx_received_bytes_ = 0;
  // Probe replies: a requester answers the peer responder's reverse-set probes too. Made by
  // the first probe, gone once empty (most QPs hold none at a time).
  std::unique_ptr<Ring<ProbeReply>> probe_replies_;
};

}  // namespace mrc
