// Congestion control behind one small interface. The requester asks `can_send` before each
// new packet, reports sends, acknowledgements, losses and CNPs, and honours `next_send_time`
// (pacing; rate-based algorithms such as DCQCN) and `next_timer`/`on_timer` (periodic work).
// Implementations: NSCC (UET 1.0, MRC's default), DCQCN (RoCEv2 baseline), and a fixed
// window (CC disabled: "algorithm NULL" in the OCP API).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/types.h"

namespace mrc::cc {

// One acknowledged packet, as the requester learned it from an ACK echo.
struct AckSample {
  Time now = 0;
  uint32_t acked_bytes = 0;  // payload bytes newly acknowledged by this sample
  Time rtt = 0;              // send -> ACK, with the responder's service time removed
  bool ecn = false;          // the packet arrived CE-marked
  bool trimmed = false;      // the packet was trimmed (reported by a trim NACK)
};

// NSCC parameters, mirroring struct mrc_ctl_cc_nscc_cfg (OCP MRC 1.0) with UET 1.0 defaults.
// Times are in picoseconds here (the OCP struct uses ns; the API layer converts).
// The fraction of the window a trimmed packet's resend keeps by default where the switches
// hash the EVs (NsccConfig::hashed_paths; docs/engine.md, "Decisions").
inline constexpr double kHashedTrimKeep = 0.8;

struct NsccConfig {
  bool disable_qa = false;
  uint32_t adjust_bytes_threshold = 0;  // bytes; 0 = 8 * mtu
  Time adjust_period_threshold = 0;     // 0 = base_rtt
  Time base_rtt = 0;                    // required (unloaded RTT of the longest path)
  double eta = 0;                       // 0 = derived: 0.15 * mtu ... see nscc.cc
  double fi = 0;                        // 0 = derived
  double fi_scale = 0;                  // 0 = derived
  double gamma = 0.8;
  double max_md_jump = 0.5;
  uint64_t max_cwnd = 0;  // bytes; 0 = 1.5 * BDP (needs link_bps)
  uint8_t qa_gate = 3;
  Time qa_threshold = 0;  // 0 = 4 * target_delay
  Time target_delay = 0;  // 0 = 0.75 * base_rtt (trimming enabled)
  uint32_t mtu = 4096;    // payload bytes per packet
  uint64_t link_bps = 0;  // NIC line rate (all ports), bits/s, for BDP
  // What a loss that was not a trim does to the window: the fraction it keeps (not in the OCP
  // struct). 1, the default: nothing (paper 2.1: with trimming, a loss is a path failure or a
  // bit error, not congestion). A loss still arms quick adapt. A fabric that drops instead of
  // trimming signals congestion by loss: set it there (0.5 = max_md_jump, the cut a trimmed
  // packet's resend makes). docs/congestion-control.md, "Loss".
  double loss_keep = 1.0;
  // What a trimmed packet's resend does to the window: the fraction it keeps (not in the OCP
  // struct). 0, the default: kHashedTrimKeep where the QP's EVs are hashed by the switches
  // (hashed_paths), else max_md_jump, the largest cut (a full queue is the strongest congestion
  // signal). On a fabric whose switches hash the EVs (ECMP), a trim is mostly an inner queue
  // that hashed EVs of several QPs overfilled: one of the QP's many paths, which ECN steering
  // and EV replacement move away from (paper 2.1), and a halved window is then recovered over
  // hundreds of RTTs while the QP's other paths stay idle. docs/congestion-control.md, "Loss".
  double trim_keep = 0;
  // The QP's EVs are hash inputs of ECMP switches (STEV and UDP EVs on a conventional fabric),
  // not source routes: the default trim_keep is then kHashedTrimKeep. Set by every world from
  // what it knows (the simulator's path_mode ecmp, the Linux driver's and the C API's EV mode).
  bool hashed_paths = false;
  // Whether a trim in the last two quick-adapt periods turns the "delay high, no ECN" fair
  // increase into no change (not in the OCP struct). UET's rule reads an unmarked high delay
  // as a draining queue, which holds when every hop marks ECN; the paper's switches do not
  // mark on the last hop (paper 2.1), so in an incast the only marks are trims while the
  // delay stays high, and fair increases would refill the window the trims cut.
  // docs/congestion-control.md, "Incast without last-hop ECN".
  bool trim_stops_fair_increase = true;
  // Smallest window, bytes (not in the OCP struct); 0 = mtu / 4, at most mtu. Below one MTU the
  // window is a rate: one packet in flight, and a packet of b bytes leaves b * base_rtt / cwnd
  // after the one before (paced, next_send_time); mtu turns pacing off. An incast whose fair share
  // is below one MTU per RTT (400 Gb/s over 256 senders) needs it: with a floor of one MTU the
  // senders keep more than the pipe and the last hop's queue in flight, and the excess is trimmed.
  // docs/congestion-control.md, "Incast without last-hop ECN".
  uint32_t min_cwnd = 0;
  friend bool operator==(const NsccConfig&, const NsccConfig&) = default;
};

// DCQCN parameters (Zhu et al., SIGCOMM 2015; defaults as in Mellanox/NVIDIA NICs).
struct DcqcnConfig {
  uint64_t line_rate_bps = 100'000'000'000ull;
  uint64_t min_rate_bps = 100'000'000ull;
  double g = 1.0 / 256;                               // alpha EWMA gain
  Time alpha_update_period = 0;                       // 0 = 55 us
  Time rate_increase_period = 0;                      // 0 = 300 us (timer)
  uint64_t byte_counter = 10'000'000;                 // bytes between byte-counter increase events
  uint32_t fast_recovery_steps = 5;                   // F
  uint64_t additive_increase_bps = 5'000'000'000ull;  // R_AI
  uint64_t hyper_increase_bps = 50'000'000'000ull;    // R_HAI
  Time cnp_interval = 0;  // 0 = 50 us: receiver sends at most one CNP per period
  uint32_t mtu = 4096;
  friend bool operator==(const DcqcnConfig&, const DcqcnConfig&) = default;
};

class CongestionControl {
 public:
  virtual ~CongestionControl() = default;
  // Congestion window in bytes (UINT64_MAX for pure rate-based algorithms).
  virtual uint64_t cwnd() const = 0;
  // Earliest time the next packet of `bytes` may leave (pacing). 0 = now.
  virtual Time next_send_time() const = 0;
  virtual void on_send(Time now, uint32_t bytes, uint64_t inflight_bytes) = 0;
  virtual void on_ack(const AckSample& s, uint64_t inflight_bytes) = 0;
  // A packet was declared lost: no trim NACK, so a path failure, a bit error, or (on a fabric
  // that drops instead of trimming) congestion.
  virtual void on_loss(Time now, uint32_t bytes) = 0;
  // A trimmed packet is resent (after its trim NACK arrived as on_ack with trimmed = true):
  // congestion. By default the same as a loss.
  virtual void on_trim_loss(Time now, uint32_t bytes) { on_loss(now, bytes); }
  // A CNP arrived (DCQCN). Other algorithms ignore it.
  virtual void on_cnp(Time now) { (void)now; }
  // Periodic work (DCQCN timers). kNever if none.
  virtual Time next_timer() const { return kNever; }
  virtual void on_timer(Time now) { (void)now; }
  virtual const char* name() const = 0;
  // Bytes of the object (Engine::qp_memory: what one QP costs).
  virtual size_t object_bytes() const = 0;
};

std::unique_ptr<CongestionControl> make_nscc(const NsccConfig& cfg);
std::unique_ptr<CongestionControl> make_dcqcn(const DcqcnConfig& cfg);
// A fixed window: CC disabled (the OCP "algorithm NULL"); `window` bytes in flight.
std::unique_ptr<CongestionControl> make_fixed_window(uint64_t window);

}  // namespace mrc::cc
