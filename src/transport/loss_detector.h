// The requester's transmission records and loss detection: which transmissions are in
// flight, in send order and per path, and when one of them is lost (per-path order, RACK,
// the tail-loss probe) or the whole flight has waited too long (the ACK timeout). The
// requester (requester.h) owns one; it keeps the per-PSN state (which packet a PSN carries, whether
// it is acknowledged) and acts on a loss (resend, congestion control, path state).
//
// Records live in a ring of transmissions in send order (up to twice the PSN ring's limit;
// records are linked by sequence number, never by slot). Each transmission is also linked
// into a FIFO per path. Both are consumed from the front only, so loss detection costs O(1)
// amortized per packet:
//   - per-path order: paths are FIFO (a static SRv6 path or one ECMP hash), so when a
//     transmission on path e is acknowledged, every earlier transmission on e still
//     unacknowledged is lost;
//   - RACK (RFC 8985 in spirit): a transmission is lost when one sent more than the
//     reordering window later has been acknowledged, or when one sent on the same transmit
//     queue at the same instant but later in order has, and an RTT plus the window have
//     passed (a driver's batch shares one send time);
//   - PTO: the oldest transmission has waited longer than srtt + max(4 rttvar, reordering
//     window) (tail loss; no later packet exists to reveal it);
//   - the ACK timeout (RTO): retry.linear_cnt retries at the IBTA timeout, then doubling.
//
// The ring starts at EngineConfig::qp_initial_ring entries and doubles when a new record
// would not fit, up to its limit; window checks use the limit (full()), never the current
// size, so behaviour does not depend on how far the ring has grown.
//
// Loops that find losses call back into the requester: `is_current(seq)` (the record is its
// PSN's latest transmission and the PSN still in flight), `queue_of(ev)` (the transmit queue
// a transmission on path ev keeps the order of: Engine::transmit_order) and
// `lose(psn, cause)`.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/array.h"
#include "common/types.h"
#include "transport/engine.h"
#include "transport/psn.h"

namespace mrc {

enum class LossCause : uint8_t { kPathOrder, kRack, kPto, kRto, kTrim, kOther };

// The QP attributes of loss recovery (OCP mrc.h 3.8, the RTS transition; update_qp).
struct LossTiming {
  uint8_t timeout = kDefaultAckTimeout;        // ACK timeout 1.024 us x 2^timeout
  uint8_t retry_linear = kDefaultRetryLinear;  // retries at the fixed interval
  uint8_t retry_exp = kDefaultRetryExp;        // then doubling retries; 25: forever
  Time reorder_window = 0;  // RACK reordering window; 0: learned (reorder_window())
};

// What loss detection borrows from the engine at a call: the RTT a QP without a sample of
// its own assumes (QpEnv::borrowed_rtt) and the responder's ACK delay
// (EngineConfig::ack_delay), which the tail-loss probe waits out.
struct LossContext {
  RttEstimate borrowed;
  Time ack_delay = 0;
};

class LossDetector {
 public:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Record {
    uint32_t psn = 0;
    uint32_t next = kNil;  // next transmission on the same path
    Time sent_at = 0;
    uint16_t ev = 0;
    bool linked = false;  // still in its path FIFO
  };

  // RTS: at most `limit` (a power of two) transmissions in flight; timing from the QP's
  // attributes; the oldest PSN the first ACK may report is `first_psn`.
  void start(uint32_t limit, const LossTiming& timing, uint32_t first_psn);
  // The ring (`initial` records, a power of two) and one FIFO per path: when the QP first
  // sends, and again after release().
  void allocate(uint32_t initial, size_t paths);
  bool allocated() const { return recs_ != nullptr; }
  // Frees the ring, the FIFOs and the per-queue RACK state of a QP with nothing in flight
  // (empty(): every record retired, so every FIFO is empty too). Sequence numbers go on from
  // tail(). The per-queue state only serves RACK's tie rule for a transmission sent at the
  // same instant as a delivered one: every later transmission leaves after that one's ACK
  // came back, so none can tie with what it held.
  void release() {
    recs_.reset();
    mask_ = 0;
    path_fifos_.reset();
    fifo_count_ = 0;
    queue_rack_.clear();
  }
  const LossTiming& timing() const { return timing_; }
  // update_qp: new ACK timeout and retry counts (the learned PTO floor stays below half the
  // new timeout).
  void set_timeout(uint8_t timeout);
  void set_retry(uint8_t linear, uint8_t exp) {
    timing_.retry_linear = linear;
    timing_.retry_exp = exp;
  }

  // ---- records -------------------------------------------------------------------------
  bool full() const { return tail_ - head_ >= limit_; }
  bool empty() const { return head_ == tail_; }
  uint32_t head() const { return head_; }  // oldest record not yet retired
  uint32_t tail() const { return tail_; }  // next sequence number
  // A mark between the records made so far and those to come (Qp: where Requester::snd_una
  // last moved, for Requester::contradicts_acknowledged), and whether record `seq` was made
  // after it.
  void mark() { mark_ = tail_; }
  bool made_since_mark(uint32_t seq) const { return static_cast<int32_t>(seq - mark_) >= 0; }
  const Record& at(uint32_t seq) const { return recs_[seq & mask_]; }
  // Records a transmission of `psn` on `path` at `now` (the caller checked !full());
  // returns its sequence number. Inline: once per packet sent.
  uint32_t record(uint32_t psn, int path, Time now) {
    // The ring grows here only; the QP keeps the records in flight within the limit (full()).
    if (tail_ - head_ > mask_) grow();
    const uint32_t seq = tail_++;
    // Two transmissions at one instant: only then can RACK's tie rule ever apply (a driver's
    // batch; the simulator sends one packet per port per instant).
    if (seq != head_ && recs_[(seq - 1) & mask_].sent_at == now) same_instant_sends_ = true;
    Record& r = recs_[seq & mask_];
    r = Record{psn, kNil, now, static_cast<uint16_t>(path), true};
    PathFifo& f = path_fifos_[static_cast<size_t>(path)];
    if (f.tail != kNil) {
      recs_[f.tail & mask_].next = seq;
    } else {
      f.head = seq;
    }
    f.tail = seq;
    return seq;
  }
  size_t ring_bytes() const {
    return (recs_ ? (size_t{mask_} + 1) * sizeof(Record) : 0) +
           queue_rack_.capacity() * sizeof(QueueRack);
  }
  size_t path_bytes() const { return size_t{fifo_count_} * sizeof(PathFifo); }

  // ---- evidence --------------------------------------------------------------------------
  // A transmission sent at `sent_at` as record `seq` was delivered; `queue_of()` names its
  // transmit queue, asked only once two transmissions shared a send time (inline: once per
  // acknowledged packet).
  template <std::invocable QueueOf>
  void note_delivered(Time sent_at, uint32_t seq, QueueOf queue_of) {
    rack_time_ = std::max(rack_time_, sent_at);
    if (same_instant_sends_) note_queue_delivered(sent_at, seq, queue_of());
  }
  // A trimmed header of a transmission sent at `sent_at` arrived: what was sent a window
  // before it is lost as if it had been delivered (trimmed headers overtake the data queues).
  void note_header_delivered(Time sent_at) { rack_time_ = std::max(rack_time_, sent_at); }
  // An RTT sample: `rtt` without the responder's service time, `raw` with it (both smoothed;
  // inline: once per acknowledged packet).
  void rtt_sample(Time rtt, Time raw) {
    min_rtt_ = std::min(min_rtt_, rtt);
    smooth_rtt(srtt_, rttvar_, rtt);
    smooth_rtt(raw_srtt_, raw_rttvar_, raw);
  }
  // Evidence of reordering (a loss undone, a duplicate at the responder): widen the window.
  void widen_reorder_window();
  // A loss was declared for `cause` (16 in a row by RACK or path order halve the widening).
  void note_loss(LossCause cause);
  // PSNs in [sack_base of the newest ACK, + 128) were reportable by it: a loss undone there
  // is timing evidence (learn_pto_floor), and a RACK loss there blames its path (Qp).
  bool reportable_by_last_ack(uint32_t psn) const;
  void note_ack_reach(uint32_t sack_base);
  // Raises the PTO floor to how long the acknowledgement of a packet sent at `sent_at`,
  // already declared lost, took.
  void learn_pto_floor(Time now, Time sent_at);
  // An acknowledgement without such evidence: the floor halves every kPtoFloorHalfLife
  // (inline: once per acknowledged packet).
  void age_pto_floor(Time now) {
    if (pto_floor_ && now - pto_floor_at_ > kPtoFloorHalfLife) {
      pto_floor_ /= 2;
      pto_floor_at_ = now;
    }
  }

  // ---- progress and timers ---------------------------------------------------------------
  // The ACK timeout counts from `now` (a packet left with nothing outstanding, an answer
  // came, the timeout fired).
  void restart_rto_clock(Time now) { last_progress_ = now; }
  // Progress (a new PSN acknowledged, a trim NACK): the timeout and its retry count start
  // over, and so does the tail-loss probe's backoff.
  void on_answer(Time now) {
    last_progress_ = now;
    rto_count_ = 0;
    pto_backoff_ = 0;
  }
  // RoCEv2 progress: no tail-loss probe.
  void on_roce_progress(Time now) {
    last_progress_ = now;
    rto_count_ = 0;
  }
  // The ACK timeout fired: false once the retries are exhausted.
  bool on_rto();
  // When the ACK timeout fires (while something is outstanding).
  Time rto_due() const { return last_progress_ + rto_interval(); }
  // The next retransmission is the tail-loss probe: it ignores the congestion window.
  bool pto_probe_due() const { return pto_probe_due_; }
  void clear_pto_probe() { pto_probe_due_ = false; }
  // When the oldest record is due for the tail-loss probe or RACK's tie rule (kNever if
  // there is none).
  template <typename QueueOf>
  Time next_deadline(const LossContext& ctx, QueueOf queue_of) const;

  // ---- detection -------------------------------------------------------------------------
  // Path order: record `upto` on path `ev` was delivered; every earlier transmission on that
  // path still current and below `known_end` (beyond it an ACK proves nothing) is lost.
  template <typename IsCurrent, typename Lose>
  void detect_on_path(uint16_t ev, uint32_t upto, uint32_t known_end, IsCurrent is_current,
                      Lose lose);
  // RACK from the oldest record, and (`check_pto`) the tail-loss probe for the oldest.
  // Retires records from the front as it goes.
  template <typename IsCurrent, typename QueueOf, typename Lose>
  void detect_rack(Time now, bool check_pto, const LossContext& ctx, IsCurrent is_current,
                   QueueOf queue_of, Lose lose);

  // ---- estimates -------------------------------------------------------------------------
  Time srtt() const { return srtt_; }
  Time reorder_window(const LossContext& ctx) const;
  Time pto(const LossContext& ctx) const;
  // When the PTO fires for a transmission sent at `oldest_sent` (backed off, at most one
  // tail-loss probe per PTO).
  Time pto_due(Time oldest_sent, const LossContext& ctx) const {
    return std::max(oldest_sent, pto_fired_at_) + (pto(ctx) << pto_backoff_);
  }
  // When record `seq` is lost by RACK's tie rule; kNever where the rule does not apply.
  Time rack_tie_due(uint32_t seq, uint32_t queue, const LossContext& ctx) const;
  Time rto_base() const { return (1024 * kPicosPerNano) << timing_.timeout; }
  // Retry.linear_cnt retries at the fixed interval, then exponential backoff.
  Time rto_interval() const {
    if (rto_count_ < timing_.retry_linear) return rto_base();
    const uint32_t shift = std::min<uint32_t>(rto_count_ - timing_.retry_linear + 1, 16);
    return rto_base() << shift;
  }

 private:
  struct PathFifo {
    uint32_t head = kNil, tail = kNil;
  };
  // Per transmit queue, the newest delivered transmission, ties in send time broken by send
  // order (note_delivered, rack_tie_due). Sized by the highest queue seen.
  struct QueueRack {
    Time sent_at = 0;
    uint32_t seq = 0;
    bool seen = false;
  };
  // Cold and out of line: inlined, the loop would cost every packet's caller register spills.
  [[gnu::cold, gnu::noinline]] void grow();
  // note_delivered's part for a detector that has seen two sends share an instant.
  void note_queue_delivered(Time sent_at, uint32_t seq, uint32_t queue);
  void unlink_head(PathFifo& f, Record& r) {
    f.head = r.next;
    if (f.head == kNil) f.tail = kNil;
    r.linked = false;
  }
  Time pto_floor_limit() const { return rto_base() / 2; }

  LossTiming timing_;
  // The ring (mask_ + 1 records) and the FIFOs (fifo_count_): plain arrays, their sizes kept
  // with the other counters (docs/performance.md, "Bytes per QP").
  std::unique_ptr<Record[]> recs_;
  uint32_t mask_ = 0;   // records in the ring - 1
  uint32_t limit_ = 0;  // 2 x the PSN ring's limit: also the limit on transmissions in flight
  uint32_t head_ = 0, tail_ = 0;
  std::unique_ptr<PathFifo[]> path_fifos_;
  Array<QueueRack> queue_rack_;
  // Consecutive ACK timeouts without progress, saturating (the retry limits stop at 14; an
  // infinite budget only needs the count past 16). 16 bits, next to the flags and
  // pto_backoff_: one 8-byte word (docs/performance.md, "Bytes per QP").
  uint16_t rto_count_ = 0;
  bool same_instant_sends_ = false;  // set once two transmissions shared a send time
  bool pto_probe_due_ = false;
  uint16_t fifo_count_ = 0;  // path FIFOs (paths are indexed by 16 bits)
  uint8_t pto_backoff_ = 0;  // tail-loss probes fired without progress (below)
  Time rack_time_ = 0;       // latest send time of a transmission known delivered
  Time srtt_ = 0, rttvar_ = 0, min_rtt_ = kNever;
  // The same smoothing over raw samples (send to ACK arrival, the responder's service time
  // included): the PTO waits for an ACK, so it must cover a responder that holds packets
  // (a software responder reading its socket late); srtt_ stays the path's RTT for CC.
  Time raw_srtt_ = 0, raw_rttvar_ = 0;
  // Window up to 4 min RTTs, or to srtt + 4 rttvar where that is more (reorder_window()).
  static constexpr uint32_t kMaxReorderMultiplier = 4096;
  uint32_t reorder_multiplier_ = 0;  // grows with each spurious loss detection
  // RFC 8985 6.2 lets a widened window persist for 16 loss recoveries without evidence of a
  // spurious one; here: every 16 losses detected by RACK or path order since the last
  // spurious loss halve the multiplier.
  static constexpr uint32_t kReorderPersistLosses = 16;
  uint32_t losses_since_spurious_ = 0;
  // Learned lower bound of the PTO: how long the acknowledgement of a packet we had already
  // declared lost took (a responder descheduled for milliseconds, a software path), where the
  // previous ACK could have reported it or an echo names it. Zero on hardware paths (nothing
  // is ever undone); halves every kPtoFloorHalfLife without new evidence; at most
  // pto_floor_limit() (half the ACK timeout). If the ACKs between were lost, a sample includes
  // that gap too (bounded by the limit and the half-life).
  static constexpr Time kPtoFloorHalfLife = ms(1000);
  Time pto_floor_ = 0;
  Time pto_floor_at_ = 0;
  // sack_base of the newest ACK so far: PSNs in [it, it + 128) were reportable by that ACK.
  uint32_t ack_reach_base_ = 0;
  uint32_t mark_ = 0;  // mark()
  // Tail-loss probing: the last PTO and how often it fired without progress since
  // (pto_backoff_, with the flags above; each doubles the next wait, as RFC 8985 backs off).
  static constexpr uint32_t kMaxPtoBackoff = 6;
  Time pto_fired_at_ = 0;
  Time last_progress_ = 0;
};

// ---- templates ---------------------------------------------------------------------------

template <typename QueueOf>
Time LossDetector::next_deadline(const LossContext& ctx, QueueOf queue_of) const {
  if (empty()) return kNever;
  const Record& r = at(head_);
  return std::min(pto_due(r.sent_at, ctx), rack_tie_due(head_, queue_of(r.ev), ctx));
}

template <typename IsCurrent, typename Lose>
void LossDetector::detect_on_path(uint16_t ev, uint32_t upto, uint32_t known_end,
                                  IsCurrent is_current, Lose lose) {
  // Only walk if `upto` is still queued on this path; otherwise the walk could not stop.
  if (tail_ - upto > tail_ - head_) return;
  const Record& target = at(upto);
  if (!target.linked || target.ev != ev) return;
  PathFifo& f = path_fifos_[ev];
  while (f.head != kNil) {
    const uint32_t seq = f.head;
    Record& r = recs_[seq & mask_];
    unlink_head(f, r);
    if (seq == upto) break;
    // A PSN past the ACK's bitmap may well have arrived (a receiver that read one plane's
    // socket ahead of another leaves holes wider than the bitmap): leave it to RACK/PTO.
    if (is_current(seq) && psn_lt(r.psn, known_end)) lose(r.psn, LossCause::kPathOrder);
  }
}

template <typename IsCurrent, typename QueueOf, typename Lose>
void LossDetector::detect_rack(Time now, bool check_pto, const LossContext& ctx,
                               IsCurrent is_current, QueueOf queue_of, Lose lose) {
  const Time reo = reorder_window(ctx);
  while (head_ != tail_) {
    const uint32_t seq = head_;
    Record& r = recs_[seq & mask_];
    if (is_current(seq)) {
      // Sent a window before a delivered transmission, or tied with one (rack_tie_due).
      const bool rack =
          rack_time_ > r.sent_at + reo || rack_tie_due(seq, queue_of(r.ev), ctx) <= now;
      // PTO as a tail-loss probe (RFC 8985 section 7): only the oldest transmission, once per
      // (backed-off) PTO. Its ACK lets RACK judge the rest. Declaring the whole window lost
      // would resend it all whenever the responder is merely silent for a while (a software
      // responder descheduled for milliseconds); a path failure while others still deliver
      // is RACK's job, so failover does not wait for this.
      const bool pto_hit = check_pto && !rack && pto_due(r.sent_at, ctx) <= now;
      if (!rack && !pto_hit) break;
      if (pto_hit) {
        check_pto = false;
        pto_fired_at_ = now;
        pto_backoff_ = static_cast<uint8_t>(std::min<uint32_t>(pto_backoff_ + 1u, kMaxPtoBackoff));
        pto_probe_due_ = true;
      }
      lose(r.psn, rack ? LossCause::kRack : LossCause::kPto);
    }
    // The oldest record is necessarily the head of its path FIFO.
    if (r.linked) unlink_head(path_fifos_[r.ev], r);
    ++head_;
  }
}

}  // namespace mrc
