// mrc::Requester: the requester side of a QP: its state (the send queue, the PSN ring --
// which WR and packet each outstanding PSN carries, its state and latest transmission --, the
// retransmission queue, the loss detector of loss_detector.h, the congestion controller) and
// its protocol: segmenting WRs into packets and spraying them over the QP's paths, acting on
// ACKs, trim NACKs and CNPs, declaring losses (RACK, the tail-loss probe, the ACK timeout) and
// resending them on other paths, completing WRs in order.
//
// It keeps no pointer to its QP or engine: each call is handed what it needs
// (RequesterContext), as the responder is (responder.h). What it cannot decide alone it
// returns: a call after which the QP must enter ERR returns the status its first WR completes
// with. Path-state changes go through the context's report_path_change, which moves the QP's
// reverse EV set and tells the engine.
//
// Rings follow what is in flight (docs/performance.md, "Bytes per QP"): none until the QP
// first posts work, small then, doubled when a new entry would not fit (up to sq_depth and
// the MPR rounded up to a power of two), and given back once every WR has completed and
// every PSN is acknowledged. The loss detector is made when the QP first posts work and kept.
// A QP holds its Requester by value (the QP's size is part of what Engine::qp_memory reports).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/array.h"
#include "common/ring.h"
#include "common/types.h"
#include "transport/cc/cc.h"
#include "transport/control.h"
#include "transport/engine_types.h"
#include "transport/loss_detector.h"
#include "transport/path_set.h"
#include "transport/psn.h"
#include "transport/qp_env.h"
#include "transport/reverse_path.h"
#include "wire/headers.h"

namespace mrc {

// The transmit queue whose order a transmission on path `ev` keeps (EngineConfig::
// transmit_order): its port's, or the path's own.
inline uint32_t transmit_queue(const QpEnv& env, const PathSet& paths, uint16_t ev) {
  return env.transmit_order == TransmitOrder::kPerPort ? paths.port_of(ev) : ev;
}

// What a requester is handed by its QP for a call.
struct RequesterContext {
  QpEnv& env;
  PathSet& paths;
  ReversePathSet& reverse;  // a path out of use takes the QP's ACK slots off it (paper 2.4)
  bool& in_ready;           // the QP's place in the engine's ready ring
  PacketAddress addr;       // the QP's packets' common header (control.h fill_common)
  uint64_t seed;            // the QP's seed (ReversePathSet::on_path_unusable)
  uint32_t mtu;             // QpAttr::path_mtu
  bool mrc;                 // TransportMode::kMrc (else RoCEv2)
  void mark_ready() const { env.mark_ready(in_ready, addr.qpn); }
  // A path changed state (PathStateChange from PathSet): a path out of use takes the reverse
  // set's slots on it elsewhere, a path back in use makes the QP ready (data may have waited
  // for one), a backup swapped in is counted; the engine hears of each (Event).
  void report_path_change(Time now, int ev, const PathStateChange& c) const;
  // A reverse-set slot moved (ReverseChange): counted and reported (kAckEvChange).
  void report_reverse_change(Time now, const ReverseChange& c) const;
};

struct Requester {
  // What produce_data did. kPortsBusy: something could be sent but not on the ports asked
  // for; kIdle: nothing can be sent now (no work, window, congestion window or pacing).
  enum class DataResult { kSent, kPortsBusy, kIdle };
  enum class PktState : uint8_t { kFree, kInflight, kAcked, kLost };
  struct SendWr {
    uint64_t wr_id = 0;
    const uint8_t* local = nullptr;  // host pointer of the source (nullptr: phantom)
    uint64_t length = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;
    uint32_t msg_num = 0;
    uint32_t npkts = 0;
    uint32_t next_pkt = 0;  // next packet index to send for the first time
    uint32_t acked_pkts = 0;
    bool with_imm = false;
    bool signaled = true;
  };
  struct TxPkt {
    uint64_t wr_seq = 0;  // sequence number of the WR (index into sq modulo capacity)
    uint32_t pkt_index = 0;
    uint32_t bytes = 0;
    Time sent_at = 0;  // latest transmission
    uint32_t rec = 0;  // latest transmission record
    uint16_t ev = 0;   // path of the latest transmission
    PktState state = PktState::kFree;
    uint8_t transmissions : 7 = 0;  // saturates at kMaxTransmissions
    // The latest loss declared was the tail-loss probe's (LossCause::kPto): if it proves
    // spurious, the PTO was short, not the reordering window (on_spurious_loss).
    uint8_t lost_to_pto : 1 = 0;
  };
  static constexpr uint8_t kMaxTransmissions = 127;

  TxPkt& pkt(uint32_t psn) { return pkts[psn & pkt_mask]; }
  const TxPkt& pkt(uint32_t psn) const { return pkts[psn & pkt_mask]; }
  SendWr& wr_at(uint64_t seq) { return sq[seq % sq.size()]; }
  // Inline: the ACK's and RACK's loops call these once per PSN or record.
  uint32_t outstanding_psns() const { return static_cast<uint32_t>(psn_diff(next_psn, snd_una)); }
  // Whether `psn` is outstanding: sent and not yet below snd_una.
  bool psn_in_flight_range(uint32_t psn) const {
    return psn_diff(psn, snd_una) >= 0 && psn_diff(next_psn, psn) > 0;
  }
  // Whether `psn`'s latest loss was declared by the tail-loss probe, as far as its ring slot
  // still tells: a PSN acknowledged since keeps its slot until a newer PSN takes it (a
  // duplicate's echo usually comes after the original's acknowledgement). False where the
  // slot is gone (released or reused rings).
  bool lost_to_pto(uint32_t psn) const {
    const int32_t behind = psn_diff(next_psn, psn);
    return !pkts.empty() && behind > 0 && static_cast<uint32_t>(behind) <= pkt_mask + 1 &&
           pkts[psn & pkt_mask].lost_to_pto;
  }
  // Whether transmission record `seq` is its PSN's latest transmission, still in flight.
  bool record_current(uint32_t seq) const {
    const LossDetector::Record& r = loss->at(seq);
    if (!psn_in_flight_range(r.psn)) return false;
    const TxPkt& p = pkts[r.psn & pkt_mask];
    return p.state == PktState::kInflight && p.rec == seq;
  }
  // Each doubles its ring, keeping the live entries at the slots their PSN / sequence number
  // names. Cold and out of line: inlined, their loops would cost every packet's caller
  // register spills.
  [[gnu::cold, gnu::noinline]] void grow_pkt_ring();
  [[gnu::cold, gnu::noinline]] void grow_sq(uint32_t sq_depth);

  // ---- Setup ----------------------------------------------------------------------------
  // RTS, its attributes checked by the QP: the windows, the loss timing, the first PSN, and
  // a congestion controller of `cc_spec` for packets of `mtu` bytes.
  void to_rts(QpEnv& env, const CcSpec& cc_spec, uint32_t mtu, Time now, const QpAttr& a);
  // The rings, when the QP first posts work or again after release_idle_rings: each starts at
  // EngineConfig::qp_initial_ring entries (the send queue up to `sq_depth`). RoCEv2 keeps no
  // transmission records.
  void ensure_rings(const QpEnv& env, size_t num_paths, bool mrc, uint32_t sq_depth);
  // Makes the loss detector, starting where one made at RTS would be.
  LossDetector& ensure_loss();
  // What LossDetector::start was or would have been given at RTS.
  LossTiming loss_timing() const;
  // Gives the rings back once idle (rings_idle) and lets the paths give theirs.
  void release_idle_rings(PathSet& paths, Time now);
  QpStats stats(const QpEnv& env) const;

  // ---- Sending --------------------------------------------------------------------------
  // Writes the next data packet (a retransmission first, on another path than the one that
  // lost it) into `out`, if one may go on a port in `mask`.
  DataResult produce_data(const RequesterContext& c, Time now, uint32_t mask, TxPacket& out);

  // ---- What the responder says ----------------------------------------------------------
  // An MRC ACK checked by validate_ack: cumulative and selective acknowledgement, the
  // echoes' per-path signals (ECN, RTT, loss on that path), RACK. Returns kSuccess, or the
  // status the QP fails with (an ACK that contradicts an earlier one: kAckContradiction).
  WcStatus on_ack(const RequesterContext& c, Time now, const RxPacket& rx);
  // A RoCEv2 ACK or sequence NAK (go-back-N from the PSN it names).
  void on_roce_ack(const RequesterContext& c, Time now, const RxPacket& rx);
  // A trim NACK checked by the QP (a PSN sent, a path held): the packet is resent.
  void on_trim_nack(const RequesterContext& c, Time now, const RxPacket& rx);
  void on_cnp(const RequesterContext& c, Time now);

  // ---- Time -----------------------------------------------------------------------------
  // The earliest of the ACK timeout, loss detection's next deadline, pacing and the
  // congestion controller's timer (kNever: none).
  Time deadline(const QpEnv& env, const PathSet& paths, bool mrc) const;
  // Acts on what is due by `now`. Returns kSuccess, or kRetryExceeded when the ACK timeout
  // has fired more often than the retry counts allow (the QP fails).
  WcStatus on_timer(const RequesterContext& c, Time now);
  // PSNs in flight, or work held back because no path is usable.
  bool has_outstanding(const PathSet& paths) const {
    return snd_una != next_psn || (sq_send != sq_tail && paths.usable_count() == 0);
  }

  // ---- Paths the QP's owner takes out of use --------------------------------------------
  // Every packet whose latest transmission is in flight on `port` (or on path `ev`) is gone
  // with it: declared lost at once and resent elsewhere. The paths are not blamed.
  void resend_on_port(const RequesterContext& c, Time now, uint8_t port);
  void resend_on_path(const RequesterContext& c, Time now, int ev);
  // ---- The send queue's life: posted, completed in order, flushed -------------------------
  // Queues a WRITE (with immediate) of `local` (nullptr: phantom), checked by the caller, as
  // its packets of at most `mtu` bytes; the queue grows up to `sq_depth`. The rings exist.
  void post(const WriteWr& wr, const uint8_t* local, uint32_t mtu, bool sig_all, uint32_t sq_depth);
  // Completes the WRs whose packets are all acknowledged, in order (a WRITE_IMM completed
  // leaves wimm_outstanding).
  void complete_send_wrs(QpEnv& env, uint32_t qpn, Time now);
  // The QP entered ERR: every WR not completed completes with an error; nothing is in flight
  // or paced any more.
  void flush(QpEnv& env, uint32_t qpn, Time now, WcStatus first_status);

  // ---- An ACK's checks ----------------------------------------------------------------
  // Whether ACK `s` may be used at all: nothing in it beyond what was sent, no path beyond
  // the QP's `num_paths` (else the whole ACK is dropped, kBadExtension).
  Status validate_ack(const wire::SackExt& s, size_t num_paths) const;
  // Whether ACK `s` reports missing a PSN an earlier ACK acknowledged, when it is provably
  // the newer of the two (it echoes a packet sent after that acknowledgement).
  bool contradicts_acknowledged(const wire::SackExt& s) const;
  // Raises the PTO floor (LossDetector::learn_pto_floor) from the ACK's echoes of packets
  // already declared lost.
  void learn_pto_floor_from_echoes(Time now, const wire::SackExt& s);

  // Frees the PSNs acknowledged from snd_una on.
  void advance_una();
  // Keeps in the retransmission queue only the PSNs still waiting for a resend.
  void compact_retx();
  // Every WR completed, every PSN acknowledged, every transmission record retired: the rings
  // may go (release_rings).
  bool rings_idle() const {
    return sq_head == sq_tail && snd_una == next_psn && (!loss || loss->empty());
  }
  void release_rings();

  Array<SendWr> sq;      // indexed by WR sequence number modulo its size (up to sq_depth)
  uint64_t sq_head = 0;  // oldest WR not completed
  uint64_t sq_send = 0;  // WR being segmented
  uint64_t sq_tail = 0;  // next free
  uint32_t next_msg_num = 0;
  uint32_t gbn_next = 0;  // RoCE: next PSN to (re)send in go-back-N
  Array<TxPkt> pkts;
  uint32_t pkt_mask = 0;   // pkts.size() - 1
  uint32_t pkt_limit = 0;  // what pkts may grow to: the MPR rounded up to a power of two
  uint32_t snd_una = 0, next_psn = 0;
  uint64_t inflight_bytes = 0;
  Ring<uint32_t> retx;  // PSNs queued for retransmission (up to pkt_limit)
  // The loss detection (transmission records, RTT estimate, RACK, tail-loss probe, ACK
  // timeout): made when the QP first posts work (ensure_loss), so that a QP that only
  // receives holds none. Until then RTS's reordering window and time are kept here, for it to
  // start from.
  std::unique_ptr<LossDetector> loss;
  Time loss_reorder_window = 0;
  Time rts_at = 0;
  std::unique_ptr<cc::CongestionControl> cc;  // made at RTS (none: CcAlgorithm::kNone)
  Time pacing_wait_until = kNever;            // blocked by pacing until then
  uint64_t data_sent = 0, retransmits = 0;    // this QP's (QpStats)
  uint32_t mpr_psns = 1024;                   // RTS: MPR in PSNs (the window)
  uint32_t wimm_outstanding = 0;              // WRITE_IMMs sent and not completed
  uint16_t max_wimm = 64;                     // RTS: QpAttr::max_wimm, QpUpdate::max_wimm
  uint8_t loss_timeout = kDefaultAckTimeout, loss_retry_linear = kDefaultRetryLinear,
          loss_retry_exp = kDefaultRetryExp;  // RTS (loss_timing)

 private:
  bool window_allows_new(const SendWr& w, bool mrc) const;
  bool cc_allows(Time now, uint32_t bytes) const;
  DataResult blocked_by_cc(Time now);
  DataResult produce_roce_data(const RequesterContext& c, Time now, uint32_t mask, TxPacket& out);
  // The WR whose next packet may go out now as a new PSN, and that packet's size.
  SendWr* sendable_new_packet(Time now, uint32_t mtu, bool mrc, uint32_t& bytes,
                              DataResult& why_not);
  void start_new_packet(const RequesterContext& c, Time now, SendWr& w, uint32_t bytes);
  // start_new_packet once the PSN ring has doubled: cold and out of line (grow_pkt_ring), so
  // that the common path needs no stack frame.
  [[gnu::cold, gnu::noinline]] void grow_and_start_new_packet(const RequesterContext& c, Time now,
                                                              SendWr& w, uint32_t bytes);
  void fill_data(const RequesterContext& c, Time now, uint32_t psn, int path, bool retransmit,
                 TxPacket& out);
  // Marks `psn` acknowledged (first time only). Returns true if newly acknowledged. Inline
  // test: an ACK's echoes name PSNs its cumulative part has just acknowledged.
  bool ack_psn(const RequesterContext& c, Time now, uint32_t psn) {
    TxPkt& p = pkt(psn);
    if (p.state == PktState::kAcked || p.state == PktState::kFree) return false;
    ack_new_psn(c, now, psn, p);
    return true;
  }
  void ack_new_psn(const RequesterContext& c, Time now, uint32_t psn, TxPkt& p);
  void note_delivered(const RequesterContext& c, Time sent_at, uint32_t seq, uint16_t ev) {
    loss->note_delivered(sent_at, seq, [&] { return transmit_queue(c.env, c.paths, ev); });
  }
  void on_peer_ports(const RequesterContext& c, Time now, uint32_t ports_down);
  void on_spurious_loss(const RequesterContext& c, Time now, uint16_t ev, bool by_pto);
  void on_duplicate_echo(const RequesterContext& c, bool by_pto);
  // `known_end`: PSNs from it on are beyond what the ACK reports (cumulative + SACK bitmap),
  // so their absence proves nothing.
  void detect_losses_on_path(const RequesterContext& c, Time now, uint16_t ev, uint32_t upto_rec,
                             uint32_t known_end);
  void detect_losses_rack(const RequesterContext& c, Time now, bool check_pto);
  void declare_lost(const RequesterContext& c, Time now, uint32_t psn, bool mark_path,
                    LossCause cause);
  // Declares lost, without blaming its path, every current transmission `gone` names.
  template <typename F>
  void resend_where(const RequesterContext& c, Time now, F gone);
  WcStatus on_rto(const RequesterContext& c, Time now);
};

// What loss detection borrows from the engine.
inline LossContext loss_context(const QpEnv& env) {
  return LossContext{env.borrowed_rtt(), env.config.ack_delay};
}

// Inline: the engine asks for a QP's deadline a few times per packet sent (Engine::rearm).
inline Time Requester::deadline(const QpEnv& env, const PathSet& paths, bool mrc) const {
  Time d = pacing_wait_until;
  // Only a QP that has posted work has something outstanding (and its detector).
  if (loss && has_outstanding(paths)) d = std::min(d, loss->rto_due());
  if (mrc && loss && !loss->empty()) {
    d = std::min(d, loss->next_deadline(loss_context(env), [&](uint16_t ev) {
      return transmit_queue(env, paths, ev);
    }));
  }
  if (cc) d = std::min(d, cc->next_timer());
  return d;
}

// Calls f(psn) for every PSN the SACK bitmap of `s` reports received, in PSN order; stops
// at the first f that returns false and returns false then (true when every call did).
template <typename F>
bool for_each_sacked_psn(const wire::SackExt& s, F f) {
  for (int w = 0; w < wire::kSackBitmapWords; ++w) {
    uint64_t bits = s.bitmap[static_cast<size_t>(w)];
    while (bits) {
      const int b = std::countr_zero(bits);
      bits &= bits - 1;
      if (!f(psn_add(s.sack_base, 64 * w + b))) return false;
    }
  }
  return true;
}

}  // namespace mrc
