// NSCC (UET 1.0): one test per rule of docs/congestion-control.md, then a closed loop over a
// toy bottleneck showing that four senders share it fairly with a bounded queue.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <queue>
#include <vector>

#include "transport/cc/cc.h"
#include "transport/cc/nscc.h"

namespace mrc::cc {
namespace {

// 100 Gb/s, 10 us base RTT: BDP 125 000 bytes, max_cwnd 187 500, target 7.5 us.
NsccConfig config(bool qa = true) {
  NsccConfig c;
  c.base_rtt = us(10);
  c.link_bps = 100'000'000'000ull;
  c.mtu = 4096;
  c.disable_qa = !qa;
  // A loss halves the window (a fabric without trimming): the tests below use losses to make
  // room below max_cwnd. The default, no cut, is tested by
  // Nscc.on_loss__by_default_keeps_the_window_and_arms_quick_adapt.
  c.loss_keep = 0.5;
  return c;
}

constexpr uint32_t kMtu = 4096;

AckSample ack(Time now, Time rtt, bool ecn = false, uint32_t bytes = kMtu) {
  return AckSample{.now = now, .acked_bytes = bytes, .rtt = rtt, .ecn = ecn, .trimmed = false};
}
AckSample trim(Time now, Time rtt) {
  return AckSample{.now = now, .acked_bytes = 0, .rtt = rtt, .ecn = false, .trimmed = true};
}

// Leaves room below max_cwnd for increase tests: a loss at `now` halves the window.
void halve(Nscc& cc, Time now) {
  cc.on_loss(now, kMtu);
  ASSERT_EQ(cc.stats().loss_decreases, 1u);
}

// ---------------------------------------------------------------------------------------------
// Parameters and defaults.

TEST(Nscc, stats__objects_given_a_shared_stats_count_into_it_and_keep_none_of_their_own) {
  const auto params = std::make_shared<const NsccParams>(resolve_nscc(config()));
  Nscc::Stats shared;
  Nscc a(params, &shared);
  Nscc b(params, &shared);
  a.on_loss(0, kMtu);
  b.on_loss(0, kMtu);
  EXPECT_EQ(shared.loss_decreases, 2u);
  EXPECT_EQ(&a.stats(), &shared);
  Nscc alone(config());
  alone.on_loss(0, kMtu);
  EXPECT_EQ(alone.stats().loss_decreases, 1u);
  EXPECT_EQ(shared.loss_decreases, 2u);
  // The shared counters are not the object's memory; its own are.
  EXPECT_EQ(alone.object_bytes(), a.object_bytes() + sizeof(Nscc::Stats));
}

TEST(Nscc, resolve__defaults_derived_from_config) {
  const NsccParams p = resolve_nscc(config());
  EXPECT_TRUE(p.qa_enabled);
  EXPECT_EQ(p.mtu, 4096u);
  EXPECT_EQ(p.base_rtt, us(10));
  EXPECT_EQ(p.target_delay, ns(7500));              // 0.75 * base_rtt
  EXPECT_EQ(p.qa_threshold, ns(30000));             // 4 * target
  EXPECT_EQ(p.qa_period, ns(17500));                // base_rtt + target
  EXPECT_EQ(p.adjust_period, us(10));               // 1 base RTT
  EXPECT_EQ(p.adjust_bytes, 8u * 4096);             // 8 MTU
  EXPECT_EQ(p.fast_increase_delay, ns(937) + 500);  // target / 8
  EXPECT_EQ(p.max_cwnd, 187'500u);                  // 1.5 * 125 000
  EXPECT_EQ(p.min_cwnd, 1024u);                     // mtu / 4
  EXPECT_DOUBLE_EQ(p.bdp, 125'000.0);
  EXPECT_DOUBLE_EQ(p.scale, 125'000.0 / 150'000.0);
  EXPECT_DOUBLE_EQ(p.fi, 4096 * p.scale);  // 1 MTU per RTT at the reference network
  EXPECT_DOUBLE_EQ(p.prop_gain, 4 * p.fi);
  EXPECT_DOUBLE_EQ(p.eta, 0.15 * 4096 * p.scale);
  EXPECT_DOUBLE_EQ(p.fi_scale, 0.25);  // clamp(0.25 * scale, 0.25, 1)
  EXPECT_DOUBLE_EQ(p.gamma, 0.8);
  EXPECT_DOUBLE_EQ(p.max_md_jump, 0.5);
  EXPECT_EQ(p.qa_gate, 3);
  EXPECT_DOUBLE_EQ(p.delay_ewma_gain, 0.0125);
}

TEST(Nscc, resolve__explicit_values_are_kept) {
  NsccConfig c = config();
  c.target_delay = us(3);
  c.qa_threshold = us(20);
  c.adjust_period_threshold = us(4);
  c.adjust_bytes_threshold = 10'000;
  c.max_cwnd = 1'000'000;
  c.fi = 100;
  c.fi_scale = 0.5;
  c.eta = 7;
  c.gamma = 0.5;
  c.max_md_jump = 0.7;
  c.qa_gate = 2;
  c.min_cwnd = 512;
  const NsccParams p = resolve_nscc(c);
  EXPECT_EQ(p.min_cwnd, 512u);
  EXPECT_EQ(p.target_delay, us(3));
  EXPECT_EQ(p.qa_threshold, us(20));
  EXPECT_EQ(p.qa_period, us(13));
  EXPECT_EQ(p.adjust_period, us(4));
  EXPECT_EQ(p.adjust_bytes, 10'000u);
  EXPECT_EQ(p.max_cwnd, 1'000'000u);
  EXPECT_DOUBLE_EQ(p.fi, 100);
  EXPECT_DOUBLE_EQ(p.prop_gain, 400);
  EXPECT_DOUBLE_EQ(p.fi_scale, 0.5);
  EXPECT_DOUBLE_EQ(p.eta, 7);
  EXPECT_DOUBLE_EQ(p.gamma, 0.5);
  EXPECT_DOUBLE_EQ(p.max_md_jump, 0.7);
  EXPECT_EQ(p.qa_gate, 2);
}

TEST(Nscc, resolve__gains_scale_with_max_cwnd) {
  NsccConfig c = config();
  c.link_bps = 400'000'000'000ull;  // 4x the BDP
  const NsccParams p = resolve_nscc(c);
  EXPECT_EQ(p.max_cwnd, 750'000u);
  EXPECT_DOUBLE_EQ(p.fi, 4096 * 500'000.0 / 150'000.0);
  EXPECT_DOUBLE_EQ(p.fi_scale, 0.25 * 500'000.0 / 150'000.0);
  c.link_bps = 1'600'000'000'000ull;  // fast increase never more than doubles per RTT
  EXPECT_DOUBLE_EQ(resolve_nscc(c).fi_scale, 1.0);
}

TEST(Nscc, resolve__missing_values_fall_back_to_reference_network) {
  NsccConfig c;  // no base_rtt, no link rate, no max_cwnd
  const NsccParams p = resolve_nscc(c);
  EXPECT_EQ(p.base_rtt, kNsccReferenceRtt);
  EXPECT_EQ(p.max_cwnd, 225'000u);  // 1.5 * 150 kB
  EXPECT_DOUBLE_EQ(p.scale, 1.0);
  c.gamma = 3;  // out of range
  c.max_md_jump = -1;
  c.max_cwnd = 100;  // below one MTU
  const NsccParams q = resolve_nscc(c);
  EXPECT_DOUBLE_EQ(q.gamma, 0.8);
  EXPECT_DOUBLE_EQ(q.max_md_jump, 0.5);
  EXPECT_EQ(q.max_cwnd, 4096u);
}

TEST(Nscc, init__starts_at_max_cwnd_without_pacing) {
  auto cc = make_nscc(config());
  EXPECT_STREQ(cc->name(), "uet-1.0-nscc");
  EXPECT_EQ(cc->cwnd(), 187'500u);
  EXPECT_EQ(cc->next_send_time(), 0u);
  EXPECT_EQ(cc->next_timer(), kNever);
  cc->on_cnp(us(1));  // ignored
  EXPECT_EQ(cc->cwnd(), 187'500u);
}

// ---------------------------------------------------------------------------------------------
// The four quadrants.

TEST(Nscc, on_ack__no_ecn_high_delay_fair_increase) {
  Nscc cc(config(false));
  halve(cc, 0);
  const double w0 = cc.cwnd_exact();
  const Time rtt = us(10) + us(8);  // delay 8 us >= target 7.5 us
  for (int i = 1; i <= 7; ++i)
    cc.on_ack(ack(ns(100) * i, rtt), 0);
  EXPECT_EQ(cc.stats().fair_increase_acks, 7u);
  EXPECT_DOUBLE_EQ(cc.pending_increase(), cc.params().fi * 7 * kMtu);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w0);  // batched: nothing applied yet
  cc.on_ack(ack(ns(800), rtt), 0);        // 8 MTU acked: adjust
  // eta is per adjust_period (10 us) of time: 0.8 us since the last adjustment gets 8% of it.
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w0 + cc.params().fi * 8 * kMtu / w0 + cc.params().eta * 0.08);
  EXPECT_EQ(cc.stats().adjustments, 1u);
}

// Paper 2.1: the last hop does not mark ECN, so after a trim an unmarked high delay is the
// receiver's queue, not a draining one: no fair increase for two quick-adapt periods.
TEST(Nscc, on_ack__no_ecn_high_delay_after_a_trim_holds_the_window) {
  for (const bool rule : {true, false}) {
    NsccConfig c = config(false);
    c.trim_stops_fair_increase = rule;
    Nscc cc(c);
    halve(cc, 0);
    cc.on_ack(trim(ns(100), us(10) + us(2)), 0);  // trim, low delay: no decrease either
    const Time rtt = us(10) + us(8);              // delay 8 us >= target 7.5 us
    for (int i = 2; i <= 8; ++i)
      cc.on_ack(ack(ns(100) * i, rtt), 0);
    EXPECT_EQ(cc.stats().fair_increase_acks, rule ? 0u : 7u);
    // Two periods (base_rtt + target = 17.5 us each) without a trim: fair increase again.
    for (int i = 1; i <= 4; ++i)
      cc.on_ack(ack(us(20) * i, rtt), 0);
    EXPECT_GE(cc.stats().fair_increase_acks, rule ? 1u : 8u);
  }
}

TEST(Nscc, on_ack__no_ecn_low_delay_proportional_increase) {
  Nscc cc(config(false));
  halve(cc, 0);
  const NsccParams& p = cc.params();
  // Delay a quarter of the target: increase proportional to the headroom (3/4).
  cc.on_ack(ack(ns(100), us(10) + p.target_delay / 4), 0);
  EXPECT_EQ(cc.stats().proportional_increase_acks, 1u);
  EXPECT_NEAR(cc.pending_increase(), p.prop_gain * kMtu * 0.75, 1e-3);
  // Closer to the target, less.
  Nscc near(config(false));
  halve(near, 0);
  near.on_ack(ack(ns(100), us(10) + p.target_delay * 3 / 4), 0);
  EXPECT_NEAR(near.pending_increase(), p.prop_gain * kMtu * 0.25, 1e-3);
  // At low delay it is faster than fair increase.
  EXPECT_GT(cc.pending_increase(), p.fi * kMtu);
}

TEST(Nscc, on_ack__no_ecn_low_delay_fast_increase) {
  Nscc cc(config(false));
  halve(cc, 0);
  const NsccParams& p = cc.params();
  // Zero queueing delay: proportional increase until a whole window has been acknowledged.
  Time t = ns(10);
  uint64_t acked = 0;
  while (cc.stats().fast_increase_acks == 0) {
    cc.on_ack(ack(t, us(10)), 0);
    acked += kMtu;
    t += ns(10);
    ASSERT_LT(acked, 1'000'000u);
  }
  EXPECT_GE(acked, static_cast<uint64_t>(p.max_cwnd / 2));
  EXPECT_GT(cc.stats().proportional_increase_acks, 0u);
  // In fast increase each ACK grows the window immediately by fi_scale * acked bytes.
  const double w = cc.cwnd_exact();
  cc.on_ack(ack(t, us(10)), 0);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w + p.fi_scale * kMtu);
  // One marked ACK ends it.
  cc.on_ack(ack(t + ns(10), us(10), true), 0);
  const uint64_t fast = cc.stats().fast_increase_acks;
  cc.on_ack(ack(t + ns(20), us(10)), 0);
  EXPECT_EQ(cc.stats().fast_increase_acks, fast);
}

// Drives avg_delay above the target with marked high-delay samples, then checks that the
// decrease happens at most once per base RTT and by the UET formula.
TEST(Nscc, on_ack__ecn_and_high_delay_decreases_once_per_rtt) {
  Nscc cc(config(false));
  const NsccParams& p = cc.params();
  const Time rtt = us(10) + 3 * p.target_delay;  // delay = 3 * target
  std::vector<Time> cuts;
  Time t = 0;
  for (int i = 0; i < 4000; ++i, t += ns(20)) {  // 80 us = 8 base RTTs
    const double before = cc.cwnd_exact();
    const uint64_t mds = cc.stats().multiplicative_decreases;
    cc.on_ack(ack(t, rtt, true), 0);
    if (cc.stats().multiplicative_decreases != mds) {
      const double avg = cc.avg_delay();
      const double target = static_cast<double>(p.target_delay);
      const double keep = std::max(1 - p.gamma * (avg - target) / avg, p.max_md_jump);
      EXPECT_NEAR(cc.cwnd_exact(), std::max(before * keep, double(p.min_cwnd)), 1e-6);
      cuts.push_back(t);
    }
  }
  ASSERT_GE(cuts.size(), 5u);
  for (size_t i = 1; i < cuts.size(); ++i)
    EXPECT_GE(cuts[i] - cuts[i - 1], p.base_rtt);
  EXPECT_EQ(cc.stats().multiplicative_decreases, cuts.size());
  EXPECT_EQ(cc.stats().noop_acks, 0u);
}

TEST(Nscc, on_ack__ecn_and_high_delay_needs_avg_delay_above_target) {
  Nscc cc(config(false));
  // The first marked sample: per-packet delay is high but the slow average is not yet.
  cc.on_ack(ack(ns(1), us(10) + us(20), true), 0);
  EXPECT_LT(cc.avg_delay(), double(cc.params().target_delay));
  EXPECT_EQ(cc.stats().multiplicative_decreases, 0u);
  EXPECT_EQ(cc.cwnd(), cc.params().max_cwnd);
}

TEST(Nscc, on_ack__decrease_never_deeper_than_max_md_jump) {
  Nscc cc(config(false));
  const Time rtt = us(10) + us(1000);
  // The first decrease comes as soon as avg_delay passes the target; by the second (one base
  // RTT and 1000 samples later) avg_delay >> target and the formula alone would keep ~0.2.
  double before = cc.cwnd_exact();
  Time t = 0;
  while (cc.stats().multiplicative_decreases < 2) {
    before = cc.cwnd_exact();
    cc.on_ack(ack(t, rtt, true), 0);
    t += ns(10);
  }
  EXPECT_GT(cc.avg_delay(), 10.0 * double(cc.params().target_delay));
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), before * 0.5);
}

TEST(Nscc, on_ack__ecn_low_delay_keeps_window) {
  Nscc cc(config(false));
  halve(cc, 0);
  const double w = cc.cwnd_exact();
  // Many marked low-delay ACKs, across several adjustment periods and byte thresholds.
  for (int i = 1; i <= 200; ++i)
    cc.on_ack(ack(ns(500) * i, us(10) + us(2), true), 0);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w);
  EXPECT_EQ(cc.stats().noop_acks, 200u);
  EXPECT_EQ(cc.stats().multiplicative_decreases, 0u);
  EXPECT_EQ(cc.stats().adjustments, 0u);  // no eta either: nothing to increase
}

TEST(Nscc, on_ack__rtt_below_base_rtt_is_zero_delay) {
  Nscc cc(config(false));
  halve(cc, 0);
  cc.on_ack(ack(ns(100), us(5)), 0);  // a shorter path than the configured (longest) one
  EXPECT_NEAR(cc.pending_increase(), cc.params().prop_gain * kMtu, 1e-3);
  EXPECT_DOUBLE_EQ(cc.avg_delay(), 0.0);
}

TEST(Nscc, on_ack__trim_is_a_congestion_mark) {
  Nscc cc(config(false));
  for (int i = 0; i < 500; ++i)
    cc.on_ack(trim(ns(10) * i, us(10) + us(20)), 0);
  EXPECT_GE(cc.stats().multiplicative_decreases, 1u);  // trim + high delay: decrease
  EXPECT_EQ(cc.stats().fair_increase_acks, 0u);
  Nscc low(config(false));
  low.on_ack(trim(ns(10), us(10) + us(1)), 0);  // trim + low delay: no change
  EXPECT_EQ(low.stats().noop_acks, 1u);
  EXPECT_EQ(low.pending_increase(), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Delay average.

TEST(Nscc, avg_delay__ewma_of_queueing_delay) {
  Nscc cc(config(false));
  cc.on_ack(ack(ns(1), us(10) + us(20), true), 0);
  EXPECT_DOUBLE_EQ(cc.avg_delay(), 0.0125 * double(us(20)));
  cc.on_ack(ack(ns(2), us(10) + us(20), true), 0);
  EXPECT_DOUBLE_EQ(cc.avg_delay(), 0.0125 * double(us(20)) * (1 + 0.9875));
}

TEST(Nscc, avg_delay__unmarked_high_delay_is_discounted) {
  Nscc cc(config(false));
  cc.on_ack(ack(ns(1), us(10) + us(20)), 0);  // no ECN, 20 us <= 5 * base: one slow path
  EXPECT_DOUBLE_EQ(cc.avg_delay(), 0.0125 * 0.25 * double(us(10)));
  Nscc outlier(config(false));
  outlier.on_ack(ack(ns(1), us(10) + us(60)), 0);  // > 5 * base RTT: trusted
  EXPECT_DOUBLE_EQ(outlier.avg_delay(), 0.0125 * double(us(60)));
}

// ---------------------------------------------------------------------------------------------
// Batching (adjust thresholds).

TEST(Nscc, adjust__applied_after_adjust_bytes_threshold) {
  NsccConfig c = config(false);
  c.adjust_bytes_threshold = 3 * kMtu;
  Nscc cc(c);
  halve(cc, 0);
  const double w = cc.cwnd_exact();
  cc.on_ack(ack(ns(1), us(10)), 0);
  cc.on_ack(ack(ns(2), us(10)), 0);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w);
  cc.on_ack(ack(ns(3), us(10)), 0);
  EXPECT_GT(cc.cwnd_exact(), w);
  EXPECT_EQ(cc.stats().adjustments, 1u);
  EXPECT_EQ(cc.pending_increase(), 0.0);
}

TEST(Nscc, adjust__applied_after_adjust_period_threshold) {
  Nscc cc(config(false));
  halve(cc, 0);
  const double w = cc.cwnd_exact();
  cc.on_ack(ack(us(1), us(10)), 0);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w);
  cc.on_ack(ack(us(10), us(10)), 0);  // one base RTT since the first event (the loss at 0)
  EXPECT_EQ(cc.stats().adjustments, 1u);
  const double inc = cc.params().prop_gain * 2 * kMtu;
  EXPECT_NEAR(cc.cwnd_exact(), w + inc / w + cc.params().eta, 1e-6);
}

TEST(Nscc, adjust__eta_is_per_adjust_period_of_time) {
  // Byte-triggered adjustments get eta in proportion to the time since the previous one, so
  // eta per RTT does not grow with the window.
  NsccConfig c = config(false);
  c.fi = 1e-9;  // isolate eta
  Nscc cc(c);
  halve(cc, 0);
  const double w = cc.cwnd_exact();
  for (int i = 1; i <= 8; ++i)
    cc.on_ack(ack(us(2) + i, us(18)), 0);  // 2 us: 20%
  EXPECT_NEAR(cc.cwnd_exact(), w + 0.2 * cc.params().eta, 1e-3);
  for (int i = 1; i <= 8; ++i)
    cc.on_ack(ack(us(30) + i, us(18)), 0);  // > 1 period: all
  EXPECT_NEAR(cc.cwnd_exact(), w + 1.2 * cc.params().eta, 1e-3);
}

TEST(Nscc, adjust__same_gain_per_window_whatever_the_window) {
  // Increases accumulate per acknowledged byte and are divided by the window when applied:
  // after one window of ACKs a small and a large window have both earned fi bytes. Equal
  // additive gains plus proportional cuts is what makes competing flows converge (AIMD).
  NsccConfig c = config(false);
  c.adjust_bytes_threshold = 1u << 30;  // never apply: inspect the accumulator
  c.adjust_period_threshold = ms(100);
  for (int halvings : {1, 3}) {
    SCOPED_TRACE(halvings);
    Nscc cc(c);
    for (int i = 0; i < halvings; ++i)
      cc.on_loss(us(10) * i, kMtu);
    const double w = cc.cwnd_exact();
    const uint32_t chunk = static_cast<uint32_t>(w / 16);
    for (int i = 0; i < 16; ++i)
      cc.on_ack(ack(us(50) + i, us(18), false, chunk), 0);
    EXPECT_NEAR(cc.pending_increase() / w, cc.params().fi, 0.01 * cc.params().fi);
  }
}

// ---------------------------------------------------------------------------------------------
// Quick adapt.

// Runs one quick-adapt period in which `acks` packets are acknowledged with queueing delay
// `delay`, then closes it with an ACK at the period's end.
Nscc& run_period(Nscc& cc, int acks, Time delay, bool ecn = false) {
  const Time base = cc.params().base_rtt;
  for (int i = 0; i < acks; ++i)
    cc.on_ack(ack(ns(100) * (i + 1), base + delay, ecn), 100'000);
  cc.on_ack(ack(cc.params().qa_period, base + delay, ecn), 100'000);
  return cc;
}

TEST(Nscc, quick_adapt__high_delay_and_little_achieved_resets_window) {
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  run_period(cc, 2, us(40));  // 40 us > qa_threshold (30 us); 3 packets < 187500 >> 3
  EXPECT_EQ(cc.stats().quick_adapts, 1u);
  EXPECT_EQ(cc.cwnd(), 3u * kMtu);
}

TEST(Nscc, quick_adapt__gate_blocks_when_enough_was_achieved) {
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  // max_cwnd >> 3 = 23437 bytes: 6 packets (24576) is enough.
  run_period(cc, 5, us(40));
  EXPECT_EQ(cc.stats().quick_adapts, 0u);
  Nscc lower(config());
  lower.on_send(0, kMtu, kMtu);
  run_period(lower, 4, us(40));  // 5 packets = 20480 < 23437
  EXPECT_EQ(lower.stats().quick_adapts, 1u);
}

TEST(Nscc, quick_adapt__needs_a_congestion_trigger) {
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  run_period(cc, 1, us(20));  // little achieved, but delay below qa_threshold and no loss
  EXPECT_EQ(cc.stats().quick_adapts, 0u);
}

TEST(Nscc, quick_adapt__armed_by_trim) {
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  cc.on_ack(trim(ns(100), us(11)), 100'000);
  run_period(cc, 1, us(1));
  EXPECT_EQ(cc.stats().quick_adapts, 1u);
  EXPECT_EQ(cc.cwnd(), 2u * kMtu);
}

TEST(Nscc, quick_adapt__armed_by_loss) {
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  cc.on_loss(ns(100), kMtu);  // also halves the window
  run_period(cc, 1, us(1));
  EXPECT_EQ(cc.stats().quick_adapts, 1u);
  EXPECT_EQ(cc.cwnd(), 2u * kMtu);
}

TEST(Nscc, quick_adapt__never_below_one_mtu) {
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  cc.on_ack(trim(ns(100), us(50)), 100'000);
  cc.on_ack(trim(cc.params().qa_period, us(50)), 100'000);  // nothing delivered at all
  EXPECT_EQ(cc.stats().quick_adapts, 1u);
  EXPECT_EQ(cc.cwnd(), kMtu);
}

TEST(Nscc, quick_adapt__at_most_once_per_period_and_ignores_stale_feedback) {
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  run_period(cc, 1, us(40));  // fires; 100 000 bytes were in flight
  ASSERT_EQ(cc.stats().quick_adapts, 1u);
  const uint64_t w = cc.cwnd();
  // The old pipeline drains with high delay and marks: ignored, no decrease, no second QA.
  const Time t0 = cc.params().qa_period;
  for (int i = 1; i <= 24; ++i)
    cc.on_ack(ack(t0 + ns(100) * i, us(60), true), 100'000 - i * kMtu);
  EXPECT_EQ(cc.stats().ignored_acks, 24u);
  EXPECT_EQ(cc.cwnd(), w);
  EXPECT_EQ(cc.stats().multiplicative_decreases, 0u);
  EXPECT_EQ(cc.stats().quick_adapts, 1u);
  // Past 100 000 bytes, feedback counts again.
  cc.on_ack(ack(t0 + us(3), us(10)), 0);
  cc.on_ack(ack(t0 + us(3) + 1, us(10)), 0);
  EXPECT_EQ(cc.stats().ignored_acks, 25u);
  EXPECT_EQ(cc.stats().proportional_increase_acks, 1u);
}

TEST(Nscc, quick_adapt__stale_feedback_ends_when_the_old_pipeline_is_gone) {
  // 100 000 bytes were in flight when quick adapt fired, but most of them were acknowledged
  // without a sample (cumulatively): an ACK reports one packet left in flight. That ACK and
  // the last packet's are stale; the next one counts.
  Nscc cc(config());
  cc.on_send(0, kMtu, kMtu);
  run_period(cc, 1, us(40));
  ASSERT_EQ(cc.stats().quick_adapts, 1u);
  const Time t0 = cc.params().qa_period;
  cc.on_ack(ack(t0 + ns(100), us(10)), kMtu);
  cc.on_ack(ack(t0 + ns(200), us(10)), 0);
  cc.on_ack(ack(t0 + ns(300), us(10)), 0);
  EXPECT_EQ(cc.stats().ignored_acks, 2u);
  EXPECT_EQ(cc.stats().proportional_increase_acks, 1u);
}

TEST(Nscc, quick_adapt__disabled_by_config) {
  Nscc cc(config(false));
  cc.on_send(0, kMtu, kMtu);
  run_period(cc, 2, us(40));
  EXPECT_EQ(cc.stats().quick_adapts, 0u);
  EXPECT_EQ(cc.cwnd(), cc.params().max_cwnd);
}

// ---------------------------------------------------------------------------------------------
// Loss and bounds.

// Paper 2.1: with trimming, a loss that was not a trim is a path signal (a failed link, a bit
// error), not congestion: by default the window stays; quick adapt is still armed.
TEST(Nscc, on_loss__by_default_keeps_the_window_and_arms_quick_adapt) {
  NsccConfig c = config();
  c.loss_keep = NsccConfig{}.loss_keep;
  EXPECT_DOUBLE_EQ(c.loss_keep, 1.0);
  Nscc cc(c);
  const double w = cc.cwnd_exact();
  cc.on_loss(us(1), kMtu);
  cc.on_loss(us(12), kMtu);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w);
  EXPECT_EQ(cc.stats().loss_decreases, 0u);
  Nscc starved(c);
  starved.on_send(0, kMtu, kMtu);
  starved.on_loss(ns(100), kMtu);
  run_period(starved, 1, us(1));  // nothing delivered in the period: quick adapt fires
  EXPECT_EQ(starved.stats().quick_adapts, 1u);
}

// A trimmed packet's resend is congestion: it cuts by max_md_jump whatever loss_keep says.
TEST(Nscc, on_loss__trim_loss_cuts_by_max_md_jump_once_per_base_rtt) {
  NsccConfig c = config(false);
  c.loss_keep = 1.0;
  Nscc cc(c);
  const double w = cc.cwnd_exact();
  cc.on_trim_loss(us(1), kMtu);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.5);
  cc.on_trim_loss(us(5), kMtu);  // same RTT: the same congestion event
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.5);
  cc.on_loss(us(20), kMtu);  // a loss keeps it
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.5);
  EXPECT_EQ(cc.stats().loss_decreases, 1u);
}

// NsccConfig::trim_keep (a fabric whose switches hash the EVs): a trimmed packet's resend keeps
// that fraction instead of max_md_jump, still once per base RTT; 0 and out-of-range values
// mean max_md_jump.
TEST(Nscc, on_trim_loss__keeps_trim_keep_of_the_window_once_per_base_rtt) {
  NsccConfig c = config(false);
  c.trim_keep = 0.8;
  Nscc cc(c);
  const double w = cc.cwnd_exact();
  cc.on_trim_loss(us(1), kMtu);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.8);
  cc.on_trim_loss(us(5), kMtu);  // same RTT: the same congestion event
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.8);
  cc.on_trim_loss(us(12), kMtu);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.8 * 0.8);
  cc.on_loss(us(30), kMtu);  // a non-trim loss still follows loss_keep (0.5 here)
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.8 * 0.8 * 0.5);
  EXPECT_EQ(cc.stats().loss_decreases, 3u);
  for (double keep : {0.0, -1.0, 1.5}) {
    c.trim_keep = keep;
    c.max_md_jump = 0.4;
    EXPECT_DOUBLE_EQ(resolve_nscc(c).trim_keep, 0.4) << keep;
  }
  EXPECT_DOUBLE_EQ(resolve_nscc(config()).trim_keep, 0.5);  // the default: max_md_jump
}

// On hashed paths (NsccConfig::hashed_paths: STEV or UDP EVs through ECMP switches) the default
// cut of a trimmed packet's resend is kHashedTrimKeep, in every world that sets the flag; a
// trim_keep of the caller's still wins, and out-of-range values mean the default.
TEST(Nscc, resolve_nscc__hashed_paths_keep_more_of_the_window_on_a_trim) {
  NsccConfig c = config();
  c.hashed_paths = true;
  EXPECT_DOUBLE_EQ(resolve_nscc(c).trim_keep, kHashedTrimKeep);
  EXPECT_DOUBLE_EQ(kHashedTrimKeep, 0.8);
  c.trim_keep = 0.6;
  EXPECT_DOUBLE_EQ(resolve_nscc(c).trim_keep, 0.6);
  c.trim_keep = 1.5;
  EXPECT_DOUBLE_EQ(resolve_nscc(c).trim_keep, kHashedTrimKeep);
  c.hashed_paths = false;
  EXPECT_DOUBLE_EQ(resolve_nscc(c).trim_keep, 0.5);
}

TEST(Nscc, on_loss__out_of_range_loss_keep_means_no_cut) {
  for (double keep : {0.0, -1.0, 1.5}) {
    NsccConfig c = config();
    c.loss_keep = keep;
    EXPECT_DOUBLE_EQ(resolve_nscc(c).loss_keep, 1.0) << keep;
  }
}

TEST(Nscc, on_loss__cuts_by_loss_keep_once_per_base_rtt) {
  Nscc cc(config(false));
  const double w = cc.cwnd_exact();
  cc.on_loss(us(1), kMtu);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.5);
  cc.on_loss(us(5), kMtu);  // same RTT: the same congestion event
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.5);
  cc.on_loss(us(11), kMtu);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), w * 0.25);
  EXPECT_EQ(cc.stats().loss_decreases, 2u);
}

TEST(Nscc, cwnd__stays_within_min_cwnd_and_max_cwnd) {
  Nscc cc(config(false));
  Time t = 0;
  for (int i = 0; i < 100; ++i, t += us(11)) {
    cc.on_loss(t, kMtu);
    ASSERT_GE(cc.cwnd(), cc.params().min_cwnd);
  }
  EXPECT_EQ(cc.cwnd(), kMtu / 4);  // the default floor
  for (int i = 0; i < 20000; ++i, t += ns(50)) {
    cc.on_ack(ack(t, us(10)), 0);  // empty network: proportional then fast increase
    ASSERT_LE(cc.cwnd(), cc.params().max_cwnd);
  }
  EXPECT_EQ(cc.cwnd(), cc.params().max_cwnd);
}

TEST(Nscc, resolve_nscc__min_cwnd_is_at_most_one_mtu) {
  NsccConfig c = config();
  c.min_cwnd = 3 * kMtu;
  EXPECT_EQ(resolve_nscc(c).min_cwnd, kMtu);
  c.min_cwnd = kMtu;  // the window-only NSCC: never paced
  EXPECT_EQ(resolve_nscc(c).min_cwnd, kMtu);
}

// Cuts a fresh NSCC down to its floor (losses, one per base RTT, each halving the window).
void cut_to_floor(Nscc& cc, Time& t) {
  for (int i = 0; i < 12; ++i, t += us(11))
    cc.on_loss(t, kMtu);
  ASSERT_EQ(cc.cwnd_exact(), double(cc.params().min_cwnd));
}

TEST(Nscc, next_send_time__no_pacing_at_one_mtu_or_more) {
  NsccConfig c = config(false);
  c.min_cwnd = kMtu;
  Nscc cc(c);
  Time t = 0;
  for (int i = 0; i < 12; ++i, t += us(11))
    cc.on_loss(t, kMtu);
  ASSERT_EQ(cc.cwnd(), kMtu);
  cc.on_send(t, kMtu, kMtu);
  EXPECT_EQ(cc.next_send_time(), 0);
}

TEST(Nscc, next_send_time__below_one_mtu_a_packet_every_bytes_times_base_rtt_over_cwnd) {
  Nscc cc(config(false));
  Time t = 0;
  cut_to_floor(cc, t);                // 1024 bytes: a quarter of a packet per base RTT
  EXPECT_EQ(cc.next_send_time(), 0);  // nothing sent yet
  cc.on_send(t, kMtu, kMtu);
  EXPECT_EQ(cc.next_send_time(), t + 4 * us(10));  // four base RTTs for one MTU
  // A queueing delay does not stretch the pacing (the base RTT paces, not the measured one).
  cc.on_ack(ack(t + us(40), us(40), true), 0);
  const Time sent = t + us(41);
  cc.on_send(sent, 2048, 2048);  // a half packet: half the wait
  const double w = cc.cwnd_exact();
  ASSERT_LT(w, double(kMtu));
  EXPECT_EQ(cc.next_send_time(), sent + static_cast<Time>(double(us(10)) * 2048 / w));
}

TEST(Nscc, adjust__below_one_mtu_one_increase_at_most_doubles_the_window) {
  Nscc cc(config(false));
  Time t = 0;
  cut_to_floor(cc, t);
  // One ACK of a whole packet at half the target delay, adjusted at once (the period has
  // elapsed): the proportional gain (4 fi * headroom 1/2 per window acked, window 1024) would
  // be ~7 MTU; doubling caps it.
  const Time rtt = us(10) + cc.params().target_delay / 2;
  cc.on_ack(ack(t + us(11), rtt), 0);
  ASSERT_EQ(cc.stats().proportional_increase_acks, 1u);
  ASSERT_EQ(cc.stats().adjustments, 1u);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), 2048.0);
  cc.on_ack(ack(t + us(22), rtt), 0);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), 4096.0);
  // From one MTU up the increase is the UET one, unbounded: more than double.
  cc.on_ack(ack(t + us(33), rtt), 0);
  EXPECT_GT(cc.cwnd_exact(), 8192.0);
}

TEST(Nscc, quick_adapt__never_raises_a_window_below_one_mtu) {
  Nscc cc(config());
  Time t = 0;
  for (int i = 0; i < 12; ++i, t += us(11))
    cc.on_loss(t, kMtu);
  const double floor = cc.cwnd_exact();
  ASSERT_LT(floor, double(kMtu));
  // A period with a trim and nothing delivered: quick adapt would set max(0, mtu), a raise.
  const uint64_t before = cc.stats().quick_adapts;
  cc.on_ack(trim(t + ns(100), us(50)), kMtu);
  cc.on_ack(trim(t + ns(100) + cc.params().qa_period, us(50)), kMtu);
  EXPECT_EQ(cc.stats().quick_adapts, before);
  EXPECT_LE(cc.cwnd_exact(), floor);
}

TEST(Nscc, reconfigure__new_parameters_keep_the_flow_state) {
  Nscc cc(config());
  Time t = 0;
  cc.on_loss(t, kMtu);  // the window is now half of max_cwnd
  const double before = cc.cwnd_exact();
  const auto decreases = cc.stats().loss_decreases;
  NsccConfig c = config();
  c.target_delay = us(2);
  c.gamma = 0.5;
  cc.reconfigure(c);
  EXPECT_EQ(cc.params().target_delay, us(2));
  EXPECT_DOUBLE_EQ(cc.params().gamma, 0.5);
  EXPECT_DOUBLE_EQ(cc.cwnd_exact(), before);  // not a congestion signal
  EXPECT_EQ(cc.stats().loss_decreases, decreases);
  // A smaller max_cwnd clamps the window; a larger one lets it grow there.
  c.max_cwnd = 3 * kMtu;
  cc.reconfigure(c);
  EXPECT_EQ(cc.cwnd(), 3u * kMtu);
  c.max_cwnd = 0;  // default again: 1.5 * BDP
  cc.reconfigure(c);
  EXPECT_EQ(cc.params().max_cwnd, 187'500u);
  for (int i = 0; i < 20000; ++i, t += ns(50))
    cc.on_ack(ack(t, us(10)), 0);
  EXPECT_EQ(cc.cwnd(), 187'500u);
}

// ---------------------------------------------------------------------------------------------
// Closed loop: N senders, one FIFO bottleneck of capacity C with ECN marking above K bytes,
// ACKs returning after a fixed propagation delay. No engine: the test is the network.

struct ClosedLoopResult {
  std::array<double, 4> share{};  // of the bottleneck capacity, in the measurement window
  double utilisation = 0;
  double max_queue = 0;   // bytes, after the last sender started
  double mean_queue = 0;  // bytes, in the measurement window
};

ClosedLoopResult run_closed_loop(const NsccConfig& cfg, double ecn_k_bytes) {
  constexpr int kFlows = 4;
  constexpr double kBytesPerPs = 100e9 / 8 / 1e12;  // 100 Gb/s
  const Time ser = static_cast<Time>(kMtu / kBytesPerPs);
  const Time prop = cfg.base_rtt - ser;  // unloaded RTT = base_rtt
  const std::array<Time, kFlows> start = {0, us(300), us(600), us(900)};
  const Time measure_from = ms(4), end = ms(12);

  struct Ev {
    Time t;
    int flow;
    Time sent;
    bool ecn;
    bool operator>(const Ev& o) const { return t > o.t || (t == o.t && flow > o.flow); }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> events;
  std::vector<Nscc> cc;
  for (int f = 0; f < kFlows; ++f)
    cc.emplace_back(cfg);
  std::array<uint64_t, kFlows> inflight{}, delivered{};
  Time link_free = 0;
  ClosedLoopResult r;
  double queue_sum = 0;
  uint64_t queue_samples = 0;

  auto send_all = [&](int f, Time now) {
    while (inflight[f] + kMtu <= cc[f].cwnd()) {
      const double backlog = link_free > now ? double(link_free - now) * kBytesPerPs : 0;
      const bool ecn = backlog > ecn_k_bytes;
      link_free = std::max(link_free, now) + ser;
      inflight[f] += kMtu;
      cc[f].on_send(now, kMtu, inflight[f]);
      events.push({link_free + prop, f, now, ecn});
      if (now >= start[kFlows - 1] + us(100)) r.max_queue = std::max(r.max_queue, backlog);
      if (now >= measure_from) {
        queue_sum += backlog;
        ++queue_samples;
      }
    }
  };
  for (int f = 0; f < kFlows; ++f)
    events.push({start[f], f, kNever, false});
  while (!events.empty() && events.top().t < end) {
    const Ev e = events.top();
    events.pop();
    if (e.sent != kNever) {
      inflight[e.flow] -= kMtu;
      if (e.t >= measure_from) delivered[e.flow] += kMtu;
      cc[e.flow].on_ack(ack(e.t, e.t - e.sent, e.ecn), inflight[e.flow]);
    }
    send_all(e.flow, e.t);
  }
  const double capacity = kBytesPerPs * double(end - measure_from);
  double total = 0;
  for (int f = 0; f < kFlows; ++f) {
    r.share[f] = delivered[f] / capacity;
    total += delivered[f];
  }
  r.utilisation = total / capacity;
  r.mean_queue = queue_sum / std::max<uint64_t>(queue_samples, 1);
  for (int f = 0; f < kFlows; ++f)
    EXPECT_EQ(cc[f].stats().loss_decreases, 0u);
  return r;
}

// Step ECN marking at K (at or above the target queue, 93 750 bytes here: see
// docs/congestion-control.md for why a K below it freezes the windows in the "no change"
// quadrant). Four senders start 300 us apart, each with a 1.5-BDP window.
TEST(Nscc, closed_loop__four_senders_share_a_bottleneck) {
  const NsccConfig cfg = config();
  const double bdp = 125'000;
  for (double k : {0.9 * bdp, bdp, 1.5 * bdp}) {
    SCOPED_TRACE(k);
    const ClosedLoopResult r = run_closed_loop(cfg, k);
    std::printf("nscc K=%.0f: shares %.3f %.3f %.3f %.3f util %.3f queue mean %.0f max %.0f\n", k,
                r.share[0], r.share[1], r.share[2], r.share[3], r.utilisation, r.mean_queue,
                r.max_queue);
    for (int f = 0; f < 4; ++f) {
      SCOPED_TRACE(f);
      EXPECT_GT(r.share[f], 0.17);
      EXPECT_LT(r.share[f], 0.33);
    }
    EXPECT_GT(r.utilisation, 0.95);
    // Bounded: the queue settles just above K, never more than half a BDP beyond it.
    EXPECT_LT(r.max_queue, k + 0.5 * bdp);
    EXPECT_LT(r.mean_queue, k + 0.25 * bdp);
  }
}

}  // namespace
}  // namespace mrc::cc
