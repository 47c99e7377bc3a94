// UET 1.0 NSCC. Section references ("UET 3.6.13") are to the Ultra Ethernet Transport 1.0
// specification's NSCC description; where that text is not public we follow the published
// model of it (the UEC htsim NSCC model, as documented publicly) and say so. Every decision is
// listed in docs/congestion-control.md.
#include "transport/cc/nscc.h"

#include <algorithm>
#include <memory>

namespace mrc::cc {

namespace {

// Weight of one delay sample in avg_delay (1/80). Deliberately slow: with per-packet spraying
// each sample comes from a different path, and only congestion seen across many paths should
// move the size of a decrease (the quadrant itself reacts to the raw sample).
constexpr double kDelayEwmaGain = 0.0125;
// Default gains at the reference network, in MTUs, scaled by bdp / reference bdp.
constexpr double kFairIncreaseMtus = 1.0;     // fi: one packet per RTT (AIMD probing)
constexpr double kEtaMtus = 0.15;             // eta: per adjustment that saw an increase
constexpr double kPropToFair = 4.0;           // proportional increase at zero delay = 4 * fi
constexpr double kFiScaleAtReference = 0.25;  // fast increase: +25% per RTT at 100G/12us
// A non-ECN sample above target is fed to avg_delay as base_rtt / 4 unless it exceeds
// 5 * base_rtt: high delay without a mark is most likely one slow path, not the fabric.
constexpr double kUnmarkedDelayDiscount = 0.25;
constexpr uint64_t kTrustUnmarkedDelayRtts = 5;
// Default smallest window: a quarter of an MTU, a packet every 4 base RTTs: an incast of 4 x
// as many senders as have a fair share of one MTU per RTT. (An eighth did as well in the
// 256-sender incasts; the larger floor keeps a paced sender's gaps shorter.)
constexpr uint32_t kMinCwndMtuFraction = 4;

Time or_default(Time v, Time d) {
  return v != 0 ? v : d;
}

}  // namespace

NsccParams resolve_nscc(const NsccConfig& cfg) {
  NsccParams p;
  p.qa_enabled = !cfg.disable_qa;
  p.mtu = cfg.mtu != 0 ? cfg.mtu : 4096;
  p.base_rtt = or_default(cfg.base_rtt, kNsccReferenceRtt);
  // UET: target queueing delay 0.75 * base RTT when the fabric trims (MRC relies on trimming).
  p.target_delay = or_default(cfg.target_delay, p.base_rtt * 3 / 4);
  if (p.target_delay == 0) p.target_delay = 1;
  p.qa_threshold = or_default(cfg.qa_threshold, 4 * p.target_delay);
  p.qa_period = p.base_rtt + p.target_delay;
  p.adjust_period = or_default(cfg.adjust_period_threshold, p.base_rtt);
  p.adjust_bytes = cfg.adjust_bytes_threshold != 0 ? cfg.adjust_bytes_threshold : 8ull * p.mtu;
  p.fast_increase_delay = p.target_delay / 8;

  // max_cwnd = 1.5 * BDP (UET), BDP from the configured base RTT and the NIC line rate.
  if (cfg.max_cwnd != 0) {
    p.max_cwnd = cfg.max_cwnd;
  } else {
    const double link = cfg.link_bps != 0 ? static_cast<double>(cfg.link_bps)
                                          : static_cast<double>(kNsccReferenceLinkBps);
    const double bdp = static_cast<double>(p.base_rtt) * link / (8.0 * kPicosPerSecond);
    p.max_cwnd = static_cast<uint64_t>(1.5 * bdp);
  }
  p.max_cwnd = std::max<uint64_t>(p.max_cwnd, p.mtu);
  p.min_cwnd = cfg.min_cwnd != 0 ? std::min(cfg.min_cwnd, p.mtu)
                                 : std::max<uint32_t>(p.mtu / kMinCwndMtuFraction, 1);
  p.bdp = static_cast<double>(p.max_cwnd) / 1.5;
  p.scale = p.bdp / kNsccReferenceBdp;

  const double mtu = p.mtu;
  p.fi = cfg.fi > 0 ? cfg.fi : kFairIncreaseMtus * mtu * p.scale;
  p.prop_gain = kPropToFair * p.fi;
  p.eta = cfg.eta > 0 ? cfg.eta : kEtaMtus * mtu * p.scale;
  p.fi_scale =
      cfg.fi_scale > 0 ? cfg.fi_scale : std::clamp(kFiScaleAtReference * p.scale, 0.25, 1.0);
  p.gamma = cfg.gamma > 0 && cfg.gamma <= 1 ? cfg.gamma : 0.8;
  p.max_md_jump = cfg.max_md_jump > 0 && cfg.max_md_jump <= 1 ? cfg.max_md_jump : 0.5;
  p.loss_keep = cfg.loss_keep > 0 && cfg.loss_keep <= 1 ? cfg.loss_keep : 1.0;
  p.trim_keep = cfg.trim_keep > 0 && cfg.trim_keep <= 1 ? cfg.trim_keep
                : cfg.hashed_paths                      ? kHashedTrimKeep
                                                        : p.max_md_jump;
  p.trim_stops_fair_increase = cfg.trim_stops_fair_increase;
  p.qa_gate = std::min<uint8_t>(cfg.qa_gate, 63);
  p.delay_ewma_gain = kDelayEwmaGain;
  return p;
}

// UET: the window starts at max_cwnd (1.5 * BDP): a new flow may fill the pipe in its first
// RTT; the fabric's trimming and the decrease rules absorb the excess.
Nscc::Nscc(const NsccConfig& cfg) : Nscc(std::make_shared<const NsccParams>(resolve_nscc(cfg))) {}

Nscc::Nscc(std::shared_ptr<const NsccParams> params, Stats* stats)
    : p_(std::move(params)), stats_(stats), cwnd_(static_cast<double>(p_->max_cwnd)) {}

void Nscc::reconfigure(const NsccConfig& cfg) {
  reconfigure(std::make_shared<const NsccParams>(resolve_nscc(cfg)));
}

void Nscc::reconfigure(std::shared_ptr<const NsccParams> params) {
  p_ = std::move(params);
  clamp();
}

void Nscc::start(Time now) {
  if (started_) return;
  started_ = true;
  last_adjust_ = now;
  qa_start_ = now;
}

void Nscc::clamp() {
  cwnd_ = std::clamp(cwnd_, double(p_->min_cwnd), double(p_->max_cwnd));
}

// [decision] Below one MTU, one increase at most doubles the window. The batched increase is
// per window acknowledged (inc / cwnd), so the ACK of one packet sent by a window far below one
// MTU is worth several RTTs of gain: unbounded, a 1 KB window would jump to several MTUs on one
// ACK and the senders of an incast would refill the last hop at once. From one MTU up the UET
// rules apply unchanged (a doubling bound there slows the regrowth of the flows left when an
// incast ends: 16 senders of 256 KiB, 1.16 -> 1.38 of the fair share).
void Nscc::grow(double bytes) {
  cwnd_ += cwnd_ < p_->mtu ? std::min(bytes, cwnd_) : bytes;
  clamp();
}

// [decision] A window of cwnd bytes per base RTT below one MTU: a packet of b bytes every
// b * base_rtt / cwnd (delay-based controllers such as Swift pace a window below one packet
// the same way). Paced by the base RTT, not a smoothed one: in an incast the measured RTT is
// inflated by the very queue the senders should drain, and pacing by it kept the last flows
// slow after the incast ended (16 senders: 1.38 of the fair share with the smoothed RTT,
// 1.15 with the base RTT).
Time Nscc::next_send_time() const {
  if (cwnd_ >= p_->mtu || last_send_bytes_ == 0) return 0;
  return last_send_ +
         static_cast<Time>(static_cast<double>(p_->base_rtt) * last_send_bytes_ / cwnd_);
}

void Nscc::on_send(Time now, uint32_t bytes, uint64_t inflight_bytes) {
  start(now);
  inflight_ = inflight_bytes;
  last_send_ = now;
  last_send_bytes_ = bytes;
}

void Nscc::update_avg_delay(Time delay, bool congested) {
  double sample = static_cast<double>(delay);
  if (!congested && delay > p_->target_delay && delay <= kTrustUnmarkedDelayRtts * p_->base_rtt) {
    sample = kUnmarkedDelayDiscount * static_cast<double>(p_->base_rtt);
  }
  avg_delay_ += p_->delay_ewma_gain * (sample - avg_delay_);
}

// UET 3.6.13 multiplicative decrease: cut in proportion to how much of the (averaged) delay is
// excess over the target, never below max_md_jump of the window, at most once per base RTT so
// that one RTT's worth of marks (all caused by the same queue) counts once.
void Nscc::multiplicative_decrease(Time now) {
  if (last_md_ != kNever && now - last_md_ < p_->base_rtt) return;
  const double target = static_cast<double>(p_->target_delay);
  if (avg_delay_ <= target) return;  // the smoothed delay does not confirm congestion yet
  const double keep =
      std::max(1.0 - p_->gamma * (avg_delay_ - target) / avg_delay_, p_->max_md_jump);
  cwnd_ *= keep;
  clamp();
  last_md_ = now;
  // Increases accumulated before the cut were earned by a larger window; drop them.
  inc_bytes_ = 0;
  increased_ = false;
  ++stats_->multiplicative_decreases;
}

// UET quick adapt: once per period (base_rtt + target_delay), if the period saw a loss, a trim
// or a delay above qa_threshold, and the flow delivered less than max_cwnd >> qa_gate, the
// window becomes what was delivered. The feedback of packets already in flight describes the
// old window; it is ignored until that many bytes have been acknowledged.
bool Nscc::end_qa_period(Time now) {
  bool fired = false;
  if (p_->qa_enabled && (qa_congestion_ || qa_delay_) &&
      achieved_ < (p_->max_cwnd >> p_->qa_gate)) {
    const double achieved = std::max<double>(static_cast<double>(achieved_), p_->mtu);
    if (achieved < cwnd_) {
      cwnd_ = achieved;
      clamp();
      bytes_to_ignore_ = inflight_;
      bytes_ignored_ = 0;
      inc_bytes_ = 0;
      increased_ = false;
      fast_bytes_ = 0;
      ++stats_->quick_adapts;
      fired = true;
    }
  }
  qa_start_ = now;
  achieved_ = 0;
  qa_congestion_ = false;
  qa_delay_ = false;
  trimmed_last_period_ = qa_trimmed_;
  qa_trimmed_ = false;
  return fired;
}

// Batched increase (UET "adjust"): increases accumulate as bytes^2 and are divided by the
// window when applied, so every flow gains the same number of bytes per RTT whatever its
// window (the AIMD fairness argument). eta is a small additive probe per adjust_period of
// time: a byte-triggered adjustment gets the share of eta for the time elapsed since the last
// one. (A whole eta per byte-triggered adjustment would give a large window more eta per RTT
// than a small one, a multiplicative increase that defeats convergence to fair shares.) eta
// is added only when the period hit an increase quadrant: ECN-marked periods never grow.
void Nscc::adjust(Time now) {
  const Time elapsed = now - last_adjust_;
  if (increased_) {
    const double eta_share =
        std::min(1.0, static_cast<double>(elapsed) / static_cast<double>(p_->adjust_period));
    grow(inc_bytes_ / cwnd_ + p_->eta * eta_share);
    ++stats_->adjustments;
  }
  inc_bytes_ = 0;
  increased_ = false;
  bytes_since_adjust_ = 0;
  last_adjust_ = now;
}

void Nscc::on_ack(const AckSample& s, uint64_t inflight_bytes) {
  start(s.now);
  inflight_ = inflight_bytes;
  const uint64_t sample_bytes = s.acked_bytes != 0 ? s.acked_bytes : p_->mtu;
  if (bytes_ignored_ < bytes_to_ignore_) {
    // [decision] What is left of the pipeline quick adapt replaced is at most this ACK's
    // bytes plus what is still in flight. Samples come from the engine's per-packet echoes
    // only: PSNs a cumulative ACK or the bitmap covers (echoes lost with an ACK, or more
    // arrivals than echo slots) never count towards bytes_ignored_, and without this bound
    // the phase outlived its pipeline: a ring step through a flapping T0 sent one packet per
    // RTT for 960 us while 800 KB "in flight" at the quick adapt trickled in 4 KB per echo.
    bytes_to_ignore_ = std::min(bytes_to_ignore_, bytes_ignored_ + sample_bytes + inflight_);
  }
  const Time delay = s.rtt > p_->base_rtt ? s.rtt - p_->base_rtt : 0;
  // A trim is the strongest congestion mark: the packet met a full queue.
  const bool congested = s.ecn || s.trimmed;
  const uint32_t delivered = s.trimmed ? 0 : s.acked_bytes;
  update_avg_delay(delay, congested);
  achieved_ += delivered;

  if (bytes_ignored_ < bytes_to_ignore_) {
    // Stale feedback from the window quick adapt replaced. A trim NACK carries no byte count;
    // count it as one packet of the old pipeline.
    bytes_ignored_ += sample_bytes;
    ++stats_->ignored_acks;
    maybe_quick_adapt(s.now);  // keep the period running, with no trigger armed
    return;
  }
  if (s.trimmed) qa_congestion_ = qa_trimmed_ = true;
  if (delay > p_->qa_threshold) qa_delay_ = true;
  if (maybe_quick_adapt(s.now)) return;

  const Time target = p_->target_delay;
  if (!congested && delay < p_->fast_increase_delay) {
    fast_bytes_ += delivered;
  } else {
    fast_bytes_ = 0;
  }

  if (!congested && delay >= target && p_->trim_stops_fair_increase &&
      (qa_trimmed_ || trimmed_last_period_)) {
    // Delay high, no mark, and this flow's packets were trimmed within the last two quick-adapt
    // periods: the queue is the receiver's last hop, where the paper's switches do not mark
    // ECN (paper 2.1), not a draining one. Hold the window; the trims cut it.
    ++stats_->noop_acks;
  } else if (!congested && delay >= target) {
    // Delay high but no mark: the queue is draining (delay is the trailing signal). Grow gently.
    inc_bytes_ += p_->fi * delivered;
    increased_ = true;
    ++stats_->fair_increase_acks;
  } else if (!congested) {
    if (fast_bytes_ >= static_cast<uint64_t>(cwnd_)) {
      // A whole window came back with an empty network: grow multiplicatively, now.
      grow(p_->fi_scale * delivered);
      ++stats_->fast_increase_acks;
    } else {
      // Linear in the headroom below target: fastest on an empty queue, zero at the target.
      const double headroom = static_cast<double>(target - delay) / static_cast<double>(target);
      inc_bytes_ += p_->prop_gain * delivered * headroom;
      increased_ = true;
      ++stats_->proportional_increase_acks;
    }
  } else if (delay >= target) {
    multiplicative_decrease(s.now);
  } else {
    // ECN with low delay: one path is congested, the fabric is not. Path selection reacts
    // (the EV is recycled); the window does not (UET NSCC "no change" quadrant).
    ++stats_->noop_acks;
  }
  maybe_adjust(s.now, delivered);
}

// A loss that was not a trim is a path signal, not congestion (paper 2.1): it arms quick
// adapt and keeps loss_keep of the window (1 by default: all of it). A trimmed packet's resend
// is congestion: it keeps trim_keep of the window (by default max_md_jump, the largest allowed
// step), on top of the trimmed ACK sample. Both share the once-per-base-RTT limit with ECN
// decreases.
void Nscc::on_loss(Time now, uint32_t bytes) {
  on_lost(now, bytes, p_->loss_keep);
}

void Nscc::on_trim_loss(Time now, uint32_t bytes) {
  on_lost(now, bytes, p_->trim_keep);
}

void Nscc::on_lost(Time now, uint32_t bytes, double keep) {
  start(now);
  inflight_ -= std::min<uint64_t>(inflight_, bytes);
  if (bytes_ignored_ < bytes_to_ignore_) {
    bytes_ignored_ += bytes;  // lost from the pipeline quick adapt already accounted for
    return;
  }
  qa_congestion_ = true;
  if (maybe_quick_adapt(now)) return;
  if (keep >= 1.0) return;
  if (last_md_ != kNever && now - last_md_ < p_->base_rtt) return;
  cwnd_ *= keep;
  clamp();
  last_md_ = now;
  inc_bytes_ = 0;
  increased_ = false;
  fast_bytes_ = 0;
  ++stats_->loss_decreases;
}

std::unique_ptr<CongestionControl> make_nscc(const NsccConfig& cfg) {
  return std::make_unique<Nscc>(cfg);
}

}  // namespace mrc::cc
