// DCQCN reaction point (Zhu et al., SIGCOMM 2015): rate decrease and alpha on CNP, alpha
// decay, the fast recovery / additive / hyper increase state machine, pacing, clamps; then a
// closed loop over a toy bottleneck with a CNP-generating receiver.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <queue>
#include <utility>
#include <vector>

#include "transport/cc/cc.h"
#include "transport/cc/dcqcn.h"

namespace mrc::cc {
namespace {

constexpr uint32_t kMtu = 4096;
constexpr double kGbps = 1e9;

TEST(Dcqcn, resolve__defaults) {
  const DcqcnConfig c;
  const DcqcnParams p = resolve_dcqcn(c);
  EXPECT_DOUBLE_EQ(p.line_rate_bps, 100 * kGbps);
  EXPECT_DOUBLE_EQ(p.min_rate_bps, 0.1 * kGbps);
  EXPECT_DOUBLE_EQ(p.g, 1.0 / 256);
  EXPECT_EQ(p.alpha_update_period, us(55));
  EXPECT_EQ(p.rate_increase_period, us(300));
  EXPECT_EQ(p.byte_counter, 10'000'000u);
  EXPECT_EQ(p.fast_recovery_steps, 5u);
  EXPECT_DOUBLE_EQ(p.additive_increase_bps, 5 * kGbps);
  EXPECT_DOUBLE_EQ(p.hyper_increase_bps, 50 * kGbps);
  EXPECT_EQ(p.cnp_interval, us(50));
  EXPECT_EQ(cnp_interval(c), us(50));
}

TEST(Dcqcn, resolve__explicit_values_kept_and_inconsistent_ones_repaired) {
  DcqcnConfig c;
  c.line_rate_bps = 400'000'000'000ull;
  c.alpha_update_period = us(10);
  c.rate_increase_period = us(20);
  c.cnp_interval = us(4);
  c.g = 1.0 / 16;
  const DcqcnParams p = resolve_dcqcn(c);
  EXPECT_DOUBLE_EQ(p.line_rate_bps, 400 * kGbps);
  EXPECT_EQ(p.alpha_update_period, us(10));
  EXPECT_EQ(p.rate_increase_period, us(20));
  EXPECT_EQ(cnp_interval(c), us(4));
  EXPECT_DOUBLE_EQ(p.g, 1.0 / 16);
  c.min_rate_bps = 1'000'000'000'000ull;  // above line rate
  c.g = 2;
  c.byte_counter = 0;
  const DcqcnParams q = resolve_dcqcn(c);
  EXPECT_DOUBLE_EQ(q.min_rate_bps, q.line_rate_bps);
  EXPECT_DOUBLE_EQ(q.g, 1.0 / 256);
  EXPECT_EQ(q.byte_counter, 10'000'000u);
}

TEST(Dcqcn, ctor__starts_at_line_rate_with_no_window_and_no_timers) {
  auto cc = make_dcqcn(DcqcnConfig{});
  EXPECT_STREQ(cc->name(), "dcqcn");
  EXPECT_EQ(cc->cwnd(), UINT64_MAX);
  EXPECT_EQ(cc->next_send_time(), 0u);
  EXPECT_EQ(cc->next_timer(), kNever);
  Dcqcn d{DcqcnConfig{}};
  EXPECT_DOUBLE_EQ(d.rate_bps(), 100 * kGbps);
  EXPECT_DOUBLE_EQ(d.alpha(), 1.0);
  EXPECT_FALSE(d.limited());
}

TEST(Dcqcn, on_ack__acks_and_losses_leave_the_rate_alone) {
  Dcqcn d{DcqcnConfig{}};
  d.on_ack({.now = us(1), .acked_bytes = kMtu, .rtt = us(100), .ecn = true, .trimmed = false}, 0);
  d.on_loss(us(2), kMtu);
  EXPECT_DOUBLE_EQ(d.rate_bps(), 100 * kGbps);
  EXPECT_EQ(d.next_timer(), kNever);
}

// ---------------------------------------------------------------------------------------------
// Rate decrease and alpha.

TEST(Dcqcn, on_cnp__cuts_rate_by_half_alpha_and_raises_alpha) {
  DcqcnConfig c;
  c.g = 1.0 / 16;
  Dcqcn d(c);
  d.on_cnp(us(1));
  // alpha starts at 1: Rc halves, Rt remembers the old rate, alpha = (1-g)*1 + g = 1.
  EXPECT_DOUBLE_EQ(d.rate_bps(), 50 * kGbps);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 100 * kGbps);
  EXPECT_DOUBLE_EQ(d.alpha(), 1.0);
  EXPECT_TRUE(d.limited());
  // Two alpha periods without CNP: alpha = (1-g)^2.
  d.on_timer(us(1) + us(110));
  const double a = std::pow(1 - 1.0 / 16, 2);
  EXPECT_DOUBLE_EQ(d.alpha(), a);
  const double rc = d.rate_bps();
  d.on_cnp(us(120));
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), rc);
  EXPECT_DOUBLE_EQ(d.rate_bps(), rc * (1 - a / 2));
  EXPECT_DOUBLE_EQ(d.alpha(), (1 - 1.0 / 16) * a + 1.0 / 16);
}

TEST(Dcqcn, on_timer__alpha_decays_every_period_without_cnp) {
  DcqcnConfig c;
  c.g = 1.0 / 16;
  c.rate_increase_period = ms(10);  // keep rate increases out of the way
  Dcqcn d(c);
  d.on_cnp(0);
  EXPECT_EQ(d.next_timer(), us(55));
  d.on_timer(us(54));
  EXPECT_DOUBLE_EQ(d.alpha(), 1.0);
  d.on_timer(us(55));
  EXPECT_DOUBLE_EQ(d.alpha(), 1 - 1.0 / 16);
  EXPECT_EQ(d.next_timer(), us(110));
  d.on_timer(us(55) * 4);  // catches up every period that is due
  EXPECT_DOUBLE_EQ(d.alpha(), std::pow(1 - 1.0 / 16, 4));
  // A CNP restarts the alpha period.
  d.on_cnp(us(230));
  EXPECT_EQ(d.next_timer(), us(230) + us(55));
}

TEST(Dcqcn, on_cnp__rate_never_below_min_rate) {
  Dcqcn d{DcqcnConfig{}};
  for (int i = 0; i < 100; ++i)
    d.on_cnp(us(1) * i);
  EXPECT_DOUBLE_EQ(d.rate_bps(), 0.1 * kGbps);
  d.on_send(ms(1), kMtu, 0);
  EXPECT_EQ(d.next_send_time(), ms(1) + ns(327'680));  // 4096 B at 100 Mb/s = 327.68 us
}

// ---------------------------------------------------------------------------------------------
// Rate increase.

// Fires the next rate-increase timer (and any alpha decay due before it).
void next_increase(Dcqcn& d) {
  const uint32_t t = d.timer_events();
  while (d.timer_events() == t && d.limited())
    d.on_timer(d.next_timer());
}

TEST(Dcqcn, on_timer__fast_recovery_halves_the_distance_to_target) {
  Dcqcn d{DcqcnConfig{}};
  d.on_cnp(0);
  const double rt = d.target_rate_bps(), rc0 = d.rate_bps();
  for (int k = 1; k <= 5; ++k) {  // F = 5 events of fast recovery
    next_increase(d);
    EXPECT_EQ(d.timer_events(), uint32_t(k));
    EXPECT_DOUBLE_EQ(d.target_rate_bps(), rt);
    EXPECT_DOUBLE_EQ(d.rate_bps(), rt - (rt - rc0) / std::pow(2, k));
  }
}

TEST(Dcqcn, on_timer__additive_then_hyper_increase) {
  DcqcnConfig c;
  c.additive_increase_bps = 1'000'000'000ull;  // 1 Gb/s
  c.hyper_increase_bps = 10'000'000'000ull;    // 10 Gb/s
  c.byte_counter = 1'000'000;
  Dcqcn d(c);
  d.on_cnp(0);
  d.on_cnp(1);  // Rt = 50, Rc = 25 Gb/s
  ASSERT_DOUBLE_EQ(d.target_rate_bps(), 50 * kGbps);
  double rc = d.rate_bps();
  auto expect_step = [&](double rt) {
    EXPECT_DOUBLE_EQ(d.target_rate_bps(), rt);
    rc = (rt + rc) / 2;
    EXPECT_DOUBLE_EQ(d.rate_bps(), rc);
  };
  for (int k = 1; k <= 5; ++k) {
    next_increase(d);
    expect_step(50 * kGbps);  // fast recovery: T <= F
  }
  next_increase(d);
  expect_step(51 * kGbps);  // T = 6 > F, BC = 0: additive
  next_increase(d);
  expect_step(52 * kGbps);  // T = 7
  // Byte counter: BC = 1..5 still additive (min(T, BC) <= F).
  for (int k = 1; k <= 5; ++k) {
    d.on_send(ms(3), 1'000'000, 0);
    EXPECT_EQ(d.byte_events(), uint32_t(k));
    expect_step((52 + k) * kGbps);
  }
  // BC = 6: both counters past F: hyper increase by i * R_HAI, i = min(T, BC) - F = 1.
  d.on_send(ms(3), 1'000'000, 0);
  expect_step(67 * kGbps);
  next_increase(d);  // T = 8, BC = 6: i = 1
  expect_step(77 * kGbps);
  d.on_send(ms(3), 1'000'000, 0);  // BC = 7: i = 2
  expect_step(97 * kGbps);
}

TEST(Dcqcn, on_timer__returns_to_line_rate_and_releases_timers) {
  Dcqcn d{DcqcnConfig{}};
  d.on_cnp(0);
  d.on_cnp(1);
  Time t = 0;
  while (d.limited()) {
    t = d.next_timer();
    ASSERT_LT(t, ms(100));
    d.on_timer(t);
    ASSERT_LE(d.rate_bps(), 100 * kGbps);
    ASSERT_LE(d.target_rate_bps(), 100 * kGbps);
  }
  EXPECT_DOUBLE_EQ(d.rate_bps(), 100 * kGbps);
  EXPECT_EQ(d.next_timer(), kNever);
  // No byte-counter events at line rate either.
  d.on_send(t, 100'000'000, 0);
  EXPECT_EQ(d.byte_events(), 0u);
}

TEST(Dcqcn, on_cnp__resets_counters_and_byte_count) {
  DcqcnConfig c;
  c.byte_counter = 1'000'000;
  Dcqcn d(c);
  d.on_cnp(0);
  next_increase(d);
  d.on_send(us(400), 1'500'000, 0);  // one event, 500 000 bytes towards the next
  EXPECT_EQ(d.timer_events(), 1u);
  EXPECT_EQ(d.byte_events(), 1u);
  d.on_cnp(us(500));
  EXPECT_EQ(d.timer_events(), 0u);
  EXPECT_EQ(d.byte_events(), 0u);
  d.on_send(us(501), 600'000, 0);  // would have completed the old count
  EXPECT_EQ(d.byte_events(), 0u);
  EXPECT_EQ(d.next_timer(), us(500) + us(55));
}

TEST(Dcqcn, on_cnp__alpha_keeps_decaying_while_at_line_rate) {
  DcqcnConfig c;
  c.g = 1.0 / 16;
  c.rate_increase_period = us(1);
  c.additive_increase_bps = 100'000'000'000ull;
  Dcqcn d(c);
  d.on_cnp(0);
  Time released = 0;
  while (d.limited())
    d.on_timer(released = d.next_timer());
  ASSERT_LT(released, us(55));  // back at line rate before the first alpha period ended...
  EXPECT_EQ(d.next_timer(), kNever);
  EXPECT_DOUBLE_EQ(d.alpha(), 1.0);
  d.on_cnp(us(55) * 11);  // ...but 11 periods later alpha has decayed 11 times
  const double a = std::pow(1 - 1.0 / 16, 11);
  EXPECT_NEAR(d.rate_bps(), 100 * kGbps * (1 - a / 2), 1.0);
}

// ---------------------------------------------------------------------------------------------
// Pacing.

TEST(Dcqcn, on_send__pacing_spacing_equals_bytes_over_rate) {
  Dcqcn d{DcqcnConfig{}};
  EXPECT_EQ(d.tx_time(kMtu), ns(327) + 680);  // 4096 * 8 / 100 Gb/s = 327.68 ns
  d.on_send(0, kMtu, 0);
  EXPECT_EQ(d.next_send_time(), 327'680u);
  d.on_send(d.next_send_time(), kMtu, 0);
  EXPECT_EQ(d.next_send_time(), 655'360u);
  // Back-to-back calls (the engine sending early) still space packets.
  d.on_send(d.next_send_time() - 1000, kMtu, 0);
  EXPECT_EQ(d.next_send_time(), 983'040u);
  // An idle sender banks no credit.
  d.on_send(us(10), kMtu, 0);
  EXPECT_EQ(d.next_send_time(), us(10) + 327'680);
  // At half the rate, twice the spacing.
  d.on_cnp(us(11));
  d.on_send(us(20), kMtu, 0);
  EXPECT_EQ(d.next_send_time(), us(20) + 655'360);
}

// ---------------------------------------------------------------------------------------------
// Closed loop: four paced senders into one FIFO bottleneck (100 Gb/s) that CE-marks packets
// arriving above K queued bytes; the receiver is the notification point, sending at most one
// CNP per flow per cnp_interval; 5 us each way. Lossless (PFC-like): the queue is unbounded.

struct ClosedLoopResult {
  std::array<double, 4> share{};
  double utilisation = 0;
  double max_queue = 0;
  double mean_queue = 0;
};

ClosedLoopResult run_closed_loop(const DcqcnConfig& cfg, double ecn_k_bytes) {
  constexpr int kFlows = 4;
  constexpr double kBytesPerPs = 100e9 / 8 / 1e12;
  const Time ser = static_cast<Time>(kMtu / kBytesPerPs);
  const Time prop = us(5);
  const std::array<Time, kFlows> start = {0, ms(1), ms(2), ms(3)};
  const Time measure_from = ms(30), end = ms(60);
  const Time interval = cnp_interval(cfg);

  std::vector<Dcqcn> cc;
  for (int f = 0; f < kFlows; ++f)
    cc.emplace_back(cfg);
  using Cnp = std::pair<Time, int>;
  std::priority_queue<Cnp, std::vector<Cnp>, std::greater<>> cnps;
  std::array<Time, kFlows> last_cnp;
  last_cnp.fill(kNever);
  std::array<uint64_t, kFlows> delivered{};
  Time link_free = 0;
  ClosedLoopResult r;
  double queue_sum = 0;
  uint64_t queue_samples = 0;
  for (;;) {
    // Earliest of: a CNP arriving, a sender allowed to send, a sender's CC timer.
    Time t = kNever;
    int kind = -1, who = -1;
    if (!cnps.empty()) {
      t = cnps.top().first;
      who = cnps.top().second;
      kind = 0;
    }
    for (int f = 0; f < kFlows; ++f) {
      const Time send = std::max(start[f], cc[f].next_send_time());
      if (send < t) {
        t = send;
        kind = 1;
        who = f;
      }
      const Time timer = cc[f].next_timer();
      if (timer < t) {
        t = timer;
        kind = 2;
        who = f;
      }
    }
    if (t >= end) break;
    if (kind == 0) {
      cnps.pop();
      cc[who].on_cnp(t);
    } else if (kind == 2) {
      cc[who].on_timer(t);
    } else {
      const double backlog = link_free > t ? double(link_free - t) * kBytesPerPs : 0;
      const bool ce = backlog > ecn_k_bytes;
      link_free = std::max(link_free, t) + ser;
      cc[who].on_send(t, kMtu, 0);
      const Time arrive = link_free + prop;
      if (link_free >= measure_from) delivered[who] += kMtu;
      if (ce && (last_cnp[who] == kNever || arrive - last_cnp[who] >= interval)) {
        last_cnp[who] = arrive;
        cnps.push({arrive + prop, who});
      }
      if (t >= start[kFlows - 1] + us(100)) r.max_queue = std::max(r.max_queue, backlog);
      if (t >= measure_from) {
        queue_sum += backlog;
        ++queue_samples;
      }
    }
  }
  const double capacity = kBytesPerPs * double(end - measure_from);
  double total = 0;
  for (int f = 0; f < kFlows; ++f) {
    r.share[f] = delivered[f] / capacity;
    total += delivered[f];
  }
  r.utilisation = total / capacity;
  r.mean_queue = queue_sum / std::max<uint64_t>(queue_samples, 1);
  return r;
}

TEST(Dcqcn, closed_loop__four_senders_share_a_bottleneck) {
  const DcqcnConfig cfg;       // NIC defaults
  const double bdp = 125'000;  // 100 Gb/s * 10 us
  for (double k : {20'000.0, 40'000.0, 60'000.0}) {
    SCOPED_TRACE(k);
    const ClosedLoopResult r = run_closed_loop(cfg, k);
    std::printf("dcqcn K=%.0f: shares %.3f %.3f %.3f %.3f util %.3f queue mean %.0f max %.0f\n", k,
                r.share[0], r.share[1], r.share[2], r.share[3], r.utilisation, r.mean_queue,
                r.max_queue);
    for (int f = 0; f < 4; ++f) {
      SCOPED_TRACE(f);
      EXPECT_GT(r.share[f], 0.15);
      EXPECT_LT(r.share[f], 0.35);
    }
    EXPECT_GT(r.utilisation, 0.9);
    EXPECT_LT(r.mean_queue, k);
    EXPECT_LT(r.max_queue, 2 * bdp);
  }
}

}  // namespace
}  // namespace mrc::cc
