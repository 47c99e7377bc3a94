#include "transport/loss_detector.h"

#include "wire/headers.h"

namespace mrc {

void LossDetector::start(uint32_t limit, const LossTiming& timing, uint32_t first_psn) {
  timing_ = timing;
  limit_ = limit;
  head_ = tail_ = mark_ = 0;
  ack_reach_base_ = first_psn;
}

void LossDetector::allocate(uint32_t initial, size_t paths) {
  recs_ = std::make_unique<Record[]>(initial);
  mask_ = initial - 1;
  path_fifos_ = paths ? std::make_unique<PathFifo[]>(paths) : nullptr;
  fifo_count_ = static_cast<uint16_t>(paths);
}

void LossDetector::set_timeout(uint8_t timeout) {
  timing_.timeout = timeout;
  // The learned PTO floor stays below the ACK timeout (see pto_floor_).
  pto_floor_ = std::min(pto_floor_, pto_floor_limit());
}

// Doubles the ring, moving the live records [head_, tail_) to their slots in the bigger ring.
// Only the live range is copied: slots outside it are never read before they are written
// (every reader checks the range first: the QP's is_current, the range test in
// detect_on_path).
void LossDetector::grow() {
  std::unique_ptr<Record[]> old = std::make_unique<Record[]>(2 * (static_cast<size_t>(mask_) + 1));
  old.swap(recs_);
  const uint32_t old_mask = mask_;
  mask_ = 2 * mask_ + 1;
  for (uint32_t i = head_; i != tail_; ++i)
    recs_[i & mask_] = old[i & old_mask];
}

void LossDetector::note_queue_delivered(Time sent_at, uint32_t seq, uint32_t queue) {
  // Per transmit queue, the newest delivered transmission by send time, ties broken by send
  // order (RFC 8985 6.1): one queue's packets leave in the order they were produced, even when
  // a driver hands the kernel a whole batch with one timestamp.
  if (queue >= queue_rack_.size()) queue_rack_.resize(size_t{queue} + 1);
  QueueRack& qr = queue_rack_[queue];
  if (!qr.seen || sent_at > qr.sent_at ||
      (sent_at == qr.sent_at && static_cast<int32_t>(seq - qr.seq) > 0)) {
    qr = QueueRack{sent_at, seq, true};
  }
}

Time LossDetector::rack_tie_due(uint32_t seq, uint32_t queue, const LossContext& ctx) const {
  // RFC 8985 6.2's timer for what the send-time rule cannot see: a transmission sent at the
  // same instant as a delivered one of its transmit queue, but before it, is lost an RTT plus
  // the reordering window after it left. (A loss in a driver's first batch, on a path
  // blackholed before setup, otherwise waited for the next batch or the probe timeout.) Only
  // within a queue: a driver that sends one socket's share of a batch after another's sends
  // the later sockets' packets hundreds of microseconds after their common timestamp, so
  // across sockets the rule declared 15,000 false losses in 3 s (STEV mode, mrc-fabric).
  if (!same_instant_sends_ || srtt_ == 0) return kNever;
  const Record& r = at(seq);
  if (queue >= queue_rack_.size()) return kNever;
  const QueueRack& qr = queue_rack_[queue];
  if (!qr.seen || qr.sent_at != r.sent_at || static_cast<int32_t>(seq - qr.seq) >= 0) return kNever;
  return r.sent_at + std::max(srtt_, raw_srtt_) + reorder_window(ctx);
}

void LossDetector::widen_reorder_window() {
  reorder_multiplier_ = std::min<uint32_t>(reorder_multiplier_ + 1, kMaxReorderMultiplier);
  losses_since_spurious_ = 0;
}

void LossDetector::note_loss(LossCause cause) {
  if ((cause == LossCause::kPathOrder || cause == LossCause::kRack) && reorder_multiplier_ &&
      ++losses_since_spurious_ >= kReorderPersistLosses) {
    reorder_multiplier_ /= 2;
    losses_since_spurious_ = 0;
  }
}

bool LossDetector::reportable_by_last_ack(uint32_t psn) const {
  const int32_t reach = psn_diff(psn, ack_reach_base_);
  return reach >= 0 && reach < 64 * wire::kSackBitmapWords;
}

void LossDetector::note_ack_reach(uint32_t sack_base) {
  if (psn_diff(sack_base, ack_reach_base_) > 0) ack_reach_base_ = sack_base;
}

void LossDetector::learn_pto_floor(Time now, Time sent_at) {
  if (now <= sent_at) return;
  pto_floor_ = std::min(std::max(pto_floor_, now - sent_at), pto_floor_limit());
  pto_floor_at_ = now;
}

bool LossDetector::on_rto() {
  if (rto_count_ < UINT16_MAX) ++rto_count_;
  const bool infinite = timing_.retry_exp == 25;
  return infinite || rto_count_ <= static_cast<uint32_t>(timing_.retry_linear) + timing_.retry_exp;
}

Time LossDetector::reorder_window(const LossContext& ctx) const {
  if (timing_.reorder_window) return timing_.reorder_window;
  // Paths of one fabric differ mostly by queueing; one minimum RTT of slack keeps
  // spraying's reordering from looking like loss while still failing over in a few RTTs.
  Time min_rtt = min_rtt_;
  if (min_rtt == kNever) min_rtt = ctx.borrowed.min_rtt;  // no sample of our own yet
  const Time base = std::max<Time>(min_rtt == kNever ? us(10) : min_rtt, us(1));
  const Time grown = base + base * reorder_multiplier_ / 2;
  // Each spurious loss widens the window by half a minimum RTT (RFC 8985 6.2 widens it on
  // evidence of spurious recovery; 16 real losses in a row halve the widening). Up to 4
  // minimum RTTs always; beyond that only as far as the RTT's own spread (srtt + 4 rttvar):
  // a software responder that reads one plane's socket a millisecond after another's
  // reorders by far more than a fabric's queues, and every loss RACK declares there is
  // spurious. The PTO then waits srtt beyond this window (pto()).
  const Time srtt = std::max(srtt_, raw_srtt_);
  const Time rttvar = std::max(rttvar_, raw_rttvar_);
  return std::min(grown, std::max(4 * base, srtt + 4 * rttvar));
}

Time LossDetector::pto(const LossContext& ctx) const {
  Time srtt = std::max(srtt_, raw_srtt_);
  Time rttvar = std::max(rttvar_, raw_rttvar_);
  if (srtt_ == 0) {
    // No sample of our own (a small message's first packets): the NIC's RTT to its fabric
    // (EngineConfig::share_rtt, fabric_rtt), so that a packet lost to a failed path is resent
    // after a few RTTs rather than the ACK timeout (paper 2.1). Nothing known: the timeout.
    if (ctx.borrowed.srtt == 0) return rto_base();
    srtt = ctx.borrowed.srtt;
    rttvar = ctx.borrowed.rttvar;
  }
  // RFC 8985 7.2: the probe precedes the ACK timeout. A learned floor alone never pushes it
  // past half the ACK timeout (pto_floor_limit), which would declare the whole window lost;
  // backoff after probes without progress still may.
  return std::min(
      rto_base(),
      std::max(pto_floor_, srtt + std::max(4 * rttvar, reorder_window(ctx)) + ctx.ack_delay));
}

}  // namespace mrc
