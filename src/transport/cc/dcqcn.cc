// DCQCN reaction point. "Paper" = Zhu et al., SIGCOMM 2015; section numbers are the paper's.
#include "transport/cc/dcqcn.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace mrc::cc {

namespace {

// Rc is considered back at line rate within this fraction of it: the averaging
// Rc = (Rt + Rc) / 2 only approaches Rt asymptotically.
constexpr double kLineRateTolerance = 1e-6;

}  // namespace

DcqcnParams resolve_dcqcn(const DcqcnConfig& cfg) {
  DcqcnParams p;
  p.line_rate_bps = cfg.line_rate_bps != 0 ? double(cfg.line_rate_bps) : 100e9;
  p.min_rate_bps = std::min(double(cfg.min_rate_bps), p.line_rate_bps);
  if (p.min_rate_bps <= 0) p.min_rate_bps = std::min(1e6, p.line_rate_bps);  // 1 Mb/s floor
  p.g = cfg.g > 0 && cfg.g <= 1 ? cfg.g : 1.0 / 256;
  p.alpha_update_period = cfg.alpha_update_period != 0 ? cfg.alpha_update_period : us(55);
  p.rate_increase_period = cfg.rate_increase_period != 0 ? cfg.rate_increase_period : us(300);
  p.byte_counter = cfg.byte_counter != 0 ? cfg.byte_counter : 10'000'000;
  p.fast_recovery_steps = cfg.fast_recovery_steps;
  p.additive_increase_bps = double(cfg.additive_increase_bps);
  p.hyper_increase_bps = double(cfg.hyper_increase_bps);
  p.cnp_interval = cnp_interval(cfg);
  p.mtu = cfg.mtu != 0 ? cfg.mtu : 4096;
  return p;
}

Time cnp_interval(const DcqcnConfig& cfg) {
  return cfg.cnp_interval != 0 ? cfg.cnp_interval : us(50);
}

// A new QP starts at line rate with no rate limiter engaged (paper 3.1: the RP starts at line
// rate; there is no slow start).
Dcqcn::Dcqcn(const DcqcnConfig& cfg)
    : p_(resolve_dcqcn(cfg)), rc_(p_.line_rate_bps), rt_(p_.line_rate_bps) {}

Time Dcqcn::tx_time(uint32_t bytes) const {
  return static_cast<Time>(std::ceil(double(bytes) * 8.0 * double(kPicosPerSecond) / rc_));
}

// Pacing: the next packet leaves one serialisation time (at Rc) after this one; an idle
// sender does not bank credit (max with now).
void Dcqcn::on_send(Time now, uint32_t bytes, uint64_t inflight_bytes) {
  (void)inflight_bytes;
  next_tx_ = std::max(now, next_tx_) + tx_time(bytes);
  if (!limited_) return;
  // Byte counter (paper 3.1): one increase event per B bytes sent since the last CNP.
  bytes_since_event_ += bytes;
  while (limited_ && bytes_since_event_ >= p_.byte_counter) {
    bytes_since_event_ -= p_.byte_counter;
    ++bc_count_;
    increase_event();
  }
}

void Dcqcn::on_ack(const AckSample& s, uint64_t inflight_bytes) {
  (void)s;
  (void)inflight_bytes;
}

void Dcqcn::on_loss(Time now, uint32_t bytes) {
  (void)now;
  (void)bytes;
}

// Paper 3.1, "rate decrease": Rt = Rc, Rc = Rc (1 - alpha/2), alpha = (1 - g) alpha + g, and
// the timer, byte counter and both event counts restart.
void Dcqcn::on_cnp(Time now) {
  if (!limited_ && next_alpha_ != kNever && now >= next_alpha_) {
    // alpha keeps decaying every K without CNPs even while Rc is at line rate; we stop the
    // timer then (no periodic work for idle QPs) and catch up here.
    const uint64_t periods = (now - next_alpha_) / p_.alpha_update_period + 1;
    alpha_ *= std::pow(1.0 - p_.g, static_cast<double>(periods));
  }
  rt_ = rc_;
  rc_ = std::max(rc_ * (1.0 - alpha_ / 2.0), p_.min_rate_bps);
  alpha_ = (1.0 - p_.g) * alpha_ + p_.g;
  t_count_ = 0;
  bc_count_ = 0;
  bytes_since_event_ = 0;
  limited_ = true;
  next_alpha_ = now + p_.alpha_update_period;
  next_increase_ = now + p_.rate_increase_period;
}

// Paper 3.1 / Figure 6, "rate increase": each timer or byte-counter event first runs F steps
// of fast recovery towards Rt; then additive increase raises Rt by R_AI while only one counter
// has passed F, and hyper increase raises it by i * R_HAI once both have (i = min(T, BC) - F).
// In every case Rc = (Rt + Rc) / 2.
void Dcqcn::increase_event() {
  const uint32_t f = p_.fast_recovery_steps;
  const uint32_t hi = std::max(t_count_, bc_count_);
  const uint32_t lo = std::min(t_count_, bc_count_);
  if (hi > f) {
    if (lo > f) {
      rt_ += double(lo - f) * p_.hyper_increase_bps;
    } else {
      rt_ += p_.additive_increase_bps;
    }
  }
  rt_ = std::min(rt_, p_.line_rate_bps);
  rc_ = std::clamp((rt_ + rc_) / 2.0, p_.min_rate_bps, p_.line_rate_bps);
  if (rc_ >= p_.line_rate_bps * (1.0 - kLineRateTolerance)) {
    // Back at line rate: release the rate limiter and its timers.
    rc_ = p_.line_rate_bps;
    limited_ = false;
    next_increase_ = kNever;
  }
}

Time Dcqcn::next_timer() const {
  return limited_ ? std::min(next_alpha_, next_increase_) : kNever;
}

// Runs every timer due at or before `now`, in time order (alpha first on a tie).
void Dcqcn::on_timer(Time now) {
  while (limited_) {
    if (next_alpha_ <= now && next_alpha_ <= next_increase_) {
      // Paper 3.1: alpha = (1 - g) alpha every K without a CNP.
      alpha_ *= 1.0 - p_.g;
      next_alpha_ += p_.alpha_update_period;
    } else if (next_increase_ <= now) {
      next_increase_ += p_.rate_increase_period;
      ++t_count_;
      increase_event();
    } else {
      break;
    }
  }
}

std::unique_ptr<CongestionControl> make_dcqcn(const DcqcnConfig& cfg) {
  return std::make_unique<Dcqcn>(cfg);
}

}  // namespace mrc::cc
