// DCQCN reaction point (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
// SIGCOMM 2015, section 3.1 and Figure 6), the RoCEv2 baseline's congestion control, with the
// defaults of NVIDIA/Mellanox NICs where the paper leaves them open.
//
// Rate-based: the sender paces at the current rate Rc. A CNP cuts Rc by alpha/2 and remembers
// the old rate as the target Rt; a timer and a byte counter then raise Rc back towards Rt
// (fast recovery), and raise Rt itself (additive, then hyper increase). The notification point
// (the responder sending at most one CNP per cnp_interval per QP when it receives CE-marked
// packets) lives in the engine's responder; cnp_interval() gives its default.
#pragma once

#include <cstdint>

#include "common/types.h"
#include "transport/cc/cc.h"

namespace mrc::cc {

// Every DcqcnConfig value with its default resolved (see resolve_dcqcn).
struct DcqcnParams {
  double line_rate_bps = 0;          // upper bound of Rc and Rt, and the initial rate
  double min_rate_bps = 0;           // lower bound of Rc
  double g = 0;                      // alpha EWMA gain
  Time alpha_update_period = 0;      // ps (paper: K = 55 us)
  Time rate_increase_period = 0;     // ps (timer T; NVIDIA rpg_time_reset = 300 us)
  uint64_t byte_counter = 0;         // bytes between byte-counter events (B)
  uint32_t fast_recovery_steps = 0;  // F
  double additive_increase_bps = 0;  // R_AI
  double hyper_increase_bps = 0;     // R_HAI
  Time cnp_interval = 0;             // ps, notification point: at most one CNP per QP per interval
  uint32_t mtu = 0;
};

// Resolves zero fields of `cfg` to their defaults and repairs inconsistent values (min rate
// above line rate, g outside (0, 1], zero byte counter). Never fails.
DcqcnParams resolve_dcqcn(const DcqcnConfig& cfg);

// The notification point's CNP interval (responder side): cfg.cnp_interval, or 50 us.
Time cnp_interval(const DcqcnConfig& cfg);

// `now` must never decrease across calls (the engine's clock is monotonic).
class Dcqcn final : public CongestionControl {
 public:
  explicit Dcqcn(const DcqcnConfig& cfg);

  // Rate-only: no window. The engine's own limits (send queue, PSN window) bound inflight.
  uint64_t cwnd() const override { return UINT64_MAX; }
  // When the next packet may leave: the previous one's departure plus its serialisation time
  // at Rc. 0 before the first send.
  Time next_send_time() const override { return next_tx_; }
  void on_send(Time now, uint32_t bytes, uint64_t inflight_bytes) override;
  // DCQCN reacts to CNPs only; ACKs and losses (go-back-N recovers them) leave the rate alone.
  void on_ack(const AckSample& s, uint64_t inflight_bytes) override;
  void on_loss(Time now, uint32_t bytes) override;
  void on_cnp(Time now) override;
  Time next_timer() const override;
  void on_timer(Time now) override;
  const char* name() const override { return "dcqcn"; }
  size_t object_bytes() const override { return sizeof(*this); }

  const DcqcnParams& params() const { return p_; }
  double rate_bps() const { return rc_; }         // Rc
  double target_rate_bps() const { return rt_; }  // Rt
  double alpha() const { return alpha_; }
  // Increase events since the last CNP, by source (the paper's T and BC counters).
  uint32_t timer_events() const { return t_count_; }
  uint32_t byte_events() const { return bc_count_; }
  // True between a CNP and the return of Rc to line rate (the NIC's rate limiter is engaged).
  bool limited() const { return limited_; }
  // Serialisation time of `bytes` at rate Rc, ps, rounded up.
  Time tx_time(uint32_t bytes) const;

 private:
  void increase_event();

  DcqcnParams p_;
  double rc_ = 0;
  double rt_ = 0;
  double alpha_ = 1.0;  // paper: initial alpha = 1, so the first CNP halves the rate
  bool limited_ = false;
  uint32_t t_count_ = 0;
  uint32_t bc_count_ = 0;
  uint64_t bytes_since_event_ = 0;
  Time next_alpha_ = kNever;     // next alpha decay (also kept while not limited, see on_cnp)
  Time next_increase_ = kNever;  // next rate-increase timer event
  Time next_tx_ = 0;
};

}  // namespace mrc::cc
