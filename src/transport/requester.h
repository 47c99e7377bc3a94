// mrc::Requester: the requester side's state of a QP and the bookkeeping that needs nothing
// else: the send queue (the WRs posted and not yet completed), the PSN ring (which WR and
// packet each outstanding PSN carries, its state and latest transmission), the
// retransmission queue and the loss detector (loss_detector.h). The QP sends, acts on ACKs
// and declares losses with it (qp.cc); what needs nothing but this state is here: posting,
// completing and flushing WRs, ring growth and release, an ACK's checks.
//
// Rings follow what is in flight (docs/performance.md, "Bytes per QP"): none until the QP
// first posts work, small then, doubled when a new entry would not fit (up to sq_depth and
// the MPR rounded up to a power of two), and given back once every WR has completed and
// every PSN is acknowledged. The loss detector is made when the QP first posts work and kept.
// A QP holds its Requester by value, its fields where the QP's own were (the QP's size is
// part of what Engine::qp_memory reports).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/array.h"
#include "common/ring.h"
#include "common/types.h"
#include "transport/engine_types.h"
#include "transport/loss_detector.h"
#include "transport/psn.h"
#include "transport/qp_env.h"
#include "wire/headers.h"

namespace mrc {

struct Requester {
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
    // spurious, the PTO was short, not the reordering window (Qp::on_spurious_loss).
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
  // ---- The send queue's life: posted, completed in order, flushed -------------------------
  // Queues a WRITE (with immediate) of `local` (nullptr: phantom), checked by the caller, as
  // its packets of at most `mtu` bytes; the queue grows up to `sq_depth`. The rings exist.
  void post(const WriteWr& wr, const uint8_t* local, uint32_t mtu, bool sig_all, uint32_t sq_depth);
  // Completes the WRs whose packets are all acknowledged, in order (a WRITE_IMM completed
  // leaves `wimm_outstanding`).
  void complete_send_wrs(QpEnv& env, uint32_t qpn, Time now, uint32_t& wimm_outstanding);
  // The QP entered ERR: every WR not completed completes with an error.
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
  // timeout): made when the QP first posts work (Qp::ensure_loss), so that a QP that only
  // receives holds none. Until then RTS's reordering window and time are kept here, for it to
  // start from.
  std::unique_ptr<LossDetector> loss;
  Time loss_reorder_window = 0;
  Time rts_at = 0;
};

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
