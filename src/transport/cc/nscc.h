// NSCC: the UET 1.0 Network Signal-based Congestion Control, MRC's default algorithm
// ("uet-1.0-nscc"), parameterised by struct mrc_ctl_cc_nscc_cfg (OCP MRC 1.0, section 5.3).
//
// A sender-side window algorithm driven by two signals per acknowledged packet: the queueing
// delay (rtt - base_rtt) and the ECN echo. The four (delay, ECN) quadrants select fair increase,
// proportional increase, multiplicative decrease or no change; increases are batched and
// applied once per adjustment period; quick adapt resets the window to what was actually
// delivered when a flow is starved. docs/congestion-control.md gives the rules, every default
// and every place where we had to choose because the UET text is not public.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "common/types.h"
#include "transport/cc/cc.h"

namespace mrc::cc {

// The network the UET NSCC gains were tuned for: 100 Gb/s with a 12 us unloaded RTT, so a
// BDP of 150 kB. Gains scale with (our BDP / this BDP) so that the number of RTTs needed to
// fill the pipe or converge does not depend on link speed (UET 1.0 NSCC parameter scaling).
inline constexpr uint64_t kNsccReferenceLinkBps = 100'000'000'000ull;
inline constexpr Time kNsccReferenceRtt = us(12);
inline constexpr double kNsccReferenceBdp = 150'000.0;  // bytes

// Every NsccConfig value with its default resolved (see resolve_nscc).
struct NsccParams {
  bool qa_enabled = true;
  uint32_t mtu = 0;              // bytes; also the smallest window quick adapt sets
  uint64_t min_cwnd = 0;         // bytes, lower window bound; below mtu the window is paced
  Time base_rtt = 0;             // ps
  Time target_delay = 0;         // ps, queueing delay that separates "low" from "high"
  Time qa_threshold = 0;         // ps, queueing delay that arms quick adapt
  Time qa_period = 0;            // ps, quick-adapt evaluation period: base_rtt + target
  Time adjust_period = 0;        // ps, time trigger for applying batched increases
  Time fast_increase_delay = 0;  // ps, "empty network" bound for fast increase: target / 8
  uint64_t adjust_bytes = 0;     // bytes, byte trigger for applying batched increases
  uint64_t max_cwnd = 0;         // bytes, upper window bound and initial window
  double bdp = 0;                // bytes the window is sized for: max_cwnd / 1.5
  double scale = 0;              // bdp / kNsccReferenceBdp
  double fi = 0;                 // bytes of window per window acknowledged (fair increase)
  double prop_gain = 0;          // bytes per window at zero delay (proportional increase)
  double fi_scale = 0;           // window bytes per acked byte in fast increase
  double eta = 0;                // bytes added per adjustment that saw an increase
  double gamma = 0;              // multiplicative-decrease gain
  double max_md_jump = 0;        // smallest fraction of the window one decrease keeps
  double loss_keep = 0;          // fraction of the window a (non-trim) loss keeps
  double trim_keep = 0;          // fraction a trimmed packet's resend keeps (max_md_jump)
  bool trim_stops_fair_increase = true;
  double delay_ewma_gain = 0;  // weight of one sample in avg_delay
  uint8_t qa_gate = 0;         // quick adapt only if achieved < max_cwnd >> qa_gate
};

// Resolves the zero ("use the default") fields of `cfg`. Never fails: out-of-range values are
// replaced by their defaults, and a missing base_rtt or line rate falls back to the UET
// reference network (12 us, 100 Gb/s); the API layer is expected to validate before this.
NsccParams resolve_nscc(const NsccConfig& cfg);

// `now` must never decrease across calls (the engine's clock is monotonic).
class Nscc final : public CongestionControl {
 public:
  // Counters of the decisions taken, for tests and the engine's statistics. Kept outside the
  // per-QP object: an engine's QPs count into one Stats (Engine::nscc_stats), 72 bytes a QP
  // less (docs/performance.md, "Bytes per QP").
  struct Stats {
    uint64_t fair_increase_acks = 0;
    uint64_t proportional_increase_acks = 0;
    uint64_t fast_increase_acks = 0;
    uint64_t noop_acks = 0;  // ECN with low delay: left to load balancing
    uint64_t multiplicative_decreases = 0;
    uint64_t quick_adapts = 0;
    uint64_t loss_decreases = 0;
    uint64_t adjustments = 0;   // batched increases applied
    uint64_t ignored_acks = 0;  // stale feedback after a quick adapt
  };

  // Counts into a Stats of its own (stats()).
  explicit Nscc(const NsccConfig& cfg);
  // Parameters resolved once and shared by every QP with the same configuration (Engine
  // keeps them in a SharedConstants): a QP's NSCC object holds only its window state. Counts
  // into `stats` (shared, outliving the object) if given, else into a Stats of its own.
  explicit Nscc(std::shared_ptr<const NsccParams> params, Stats* stats = nullptr);

  uint64_t cwnd() const override { return static_cast<uint64_t>(cwnd_); }
  // Window-based from one MTU up: no pacing. Below one MTU the window is a rate: the engine
  // keeps one packet in flight (it always lets one go with nothing in flight), and that packet
  // waits until bytes * base_rtt / cwnd after the one before it.
  Time next_send_time() const override;
  void on_send(Time now, uint32_t bytes, uint64_t inflight_bytes) override;
  void on_ack(const AckSample& s, uint64_t inflight_bytes) override;
  void on_loss(Time now, uint32_t bytes) override;
  void on_trim_loss(Time now, uint32_t bytes) override;
  const char* name() const override { return "uet-1.0-nscc"; }
  size_t object_bytes() const override {
    return sizeof(*this) + (stats_.owned() ? sizeof(Stats) : 0);
  }

  // New parameters for a running flow (OCP 5.5: CONFIG of an ONLINE CC profile with
  // MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE). Resolved as by the constructor; the window,
  // delay average, batched increase and quick-adapt period carry over (a configuration change
  // is not a congestion signal), the window clamped to the new [mtu, max_cwnd].
  void reconfigure(const NsccConfig& cfg);
  void reconfigure(std::shared_ptr<const NsccParams> params);

  const NsccParams& params() const { return *p_; }
  // What this object counted into: its own Stats, or the shared one it was given.
  const Stats& stats() const { return *stats_; }
  double cwnd_exact() const { return cwnd_; }
  // EWMA of the queueing delay, ps (drives the size of a multiplicative decrease).
  double avg_delay() const { return avg_delay_; }
  // Increase accumulated since the last adjustment (bytes^2; divided by cwnd when applied).
  double pending_increase() const { return inc_bytes_; }

 private:
  void start(Time now);
  void update_avg_delay(Time delay, bool congested);
  void multiplicative_decrease(Time now);
  // Evaluates quick adapt if its period has elapsed; true if the window was reset. The tests
  // are inline (every acknowledged packet asks; a period ends a few times per RTT).
  bool maybe_quick_adapt(Time now) {
    return now - qa_start_ >= p_->qa_period && end_qa_period(now);
  }
  bool end_qa_period(Time now);
  // Counts `delivered` towards the next window adjustment and makes it when it is due.
  void maybe_adjust(Time now, uint32_t delivered) {
    bytes_since_adjust_ += delivered;
    if (bytes_since_adjust_ >= p_->adjust_bytes || now - last_adjust_ >= p_->adjust_period)
      adjust(now);
  }
  void adjust(Time now);
  // A loss or a trimmed packet's resend: arms quick adapt, then keeps `keep` of the window.
  void on_lost(Time now, uint32_t bytes, double keep);
  void clamp();
  // Adds `bytes` to the window (below one MTU at most doubling it), then clamps.
  void grow(double bytes);

  std::shared_ptr<const NsccParams> p_;  // never null
  // The shared Stats given, or one of its own, deleted with it: one word, the low bit saying
  // which (docs/performance.md, "Bytes per QP").
  class StatsRef {
   public:
    explicit StatsRef(Stats* shared)
        : v_(shared ? reinterpret_cast<uintptr_t>(shared)
                    : reinterpret_cast<uintptr_t>(new Stats()) | 1u) {}
    StatsRef(StatsRef&& o) noexcept : v_(std::exchange(o.v_, 0)) {}
    StatsRef& operator=(StatsRef&& o) noexcept {
      if (this != &o) {
        reset();
        v_ = std::exchange(o.v_, 0);
      }
      return *this;
    }
    ~StatsRef() { reset(); }
    Stats* operator->() const { return get(); }
    Stats& operator*() const { return *get(); }
    Stats* get() const { return reinterpret_cast<Stats*>(v_ & ~uintptr_t{1}); }
    bool owned() const { return v_ & 1u; }

   private:
    void reset() {
      if (owned()) delete get();
      v_ = 0;
    }
    uintptr_t v_ = 0;
  };
  StatsRef stats_;        // never null
  double cwnd_ = 0;       // bytes
  double avg_delay_ = 0;  // ps
  double inc_bytes_ = 0;  // batched increase, bytes^2
  // The flags are single bits and share one word with the pacing's packet size (docs/
  // performance.md, "Bytes per QP").
  bool increased_ : 1 = false;  // an increase quadrant was hit since the last adjustment
  bool started_ : 1 = false;
  // Quick adapt flags (with the other fields of quick adapt below; here to share one word).
  bool qa_congestion_ : 1 = false;        // loss or trim since qa_start_
  bool qa_delay_ : 1 = false;             // a delay sample above qa_threshold since qa_start_
  bool qa_trimmed_ : 1 = false;           // a trimmed packet reported since qa_start_
  bool trimmed_last_period_ : 1 = false;  // ... or in the quick-adapt period before
  uint32_t last_send_bytes_ = 0;          // pacing below one MTU: the last packet sent's size
  Time last_adjust_ = 0;
  uint64_t bytes_since_adjust_ = 0;
  Time last_md_ = kNever;    // time of the last multiplicative decrease
  uint64_t fast_bytes_ = 0;  // consecutive bytes acked at near-zero delay without ECN
  // Quick adapt.
  Time qa_start_ = 0;
  uint64_t achieved_ = 0;  // bytes delivered since qa_start_
  uint64_t bytes_to_ignore_ = 0;
  uint64_t bytes_ignored_ = 0;
  uint64_t inflight_ = 0;  // last value the engine reported
  // Pacing below one MTU: the last packet sent.
  Time last_send_ = 0;
};

}  // namespace mrc::cc
