#include "transport/loss_detector.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <utility>
#include <vector>

namespace mrc {
namespace {

// A detector over `paths` paths with room for `limit` records (starting at 4).
LossDetector make(uint32_t limit = 64, size_t paths = 4, LossTiming timing = {}) {
  LossDetector d;
  d.start(limit, timing, 0);
  d.allocate(4, paths);
  return d;
}

using Losses = std::vector<std::pair<uint32_t, LossCause>>;

// Runs RACK with every record current, one transmit queue per path.
Losses rack(LossDetector& d, Time now, bool check_pto, LossContext ctx = {}) {
  Losses lost;
  d.detect_rack(
      now, check_pto, ctx, [](uint32_t) { return true; }, [](uint16_t ev) { return ev; },
      [&](uint32_t psn, LossCause c) { lost.emplace_back(psn, c); });
  return lost;
}

TEST(LossDetector, record__grows_the_ring_keeping_records_at_their_sequence_numbers) {
  LossDetector d = make(64);
  const size_t before = d.ring_bytes();
  for (uint32_t psn = 0; psn < 20; ++psn)
    EXPECT_EQ(d.record(psn, static_cast<int>(psn % 4), us(psn)), psn);
  EXPECT_GT(d.ring_bytes(), before);
  for (uint32_t seq = 0; seq < 20; ++seq) {
    EXPECT_EQ(d.at(seq).psn, seq);
    EXPECT_EQ(d.at(seq).ev, seq % 4);
    EXPECT_TRUE(d.at(seq).linked);
  }
  EXPECT_FALSE(d.full());
}

TEST(LossDetector, full__at_the_limit_whatever_the_ring_size) {
  LossDetector d = make(8);
  for (uint32_t psn = 0; psn < 8; ++psn)
    d.record(psn, 0, us(psn));
  EXPECT_TRUE(d.full());
  EXPECT_EQ(d.tail() - d.head(), 8u);
}

TEST(LossDetector, release__frees_the_ring_and_fifos_and_sequence_numbers_go_on) {
  LossDetector d = make();
  d.record(0, 1, us(0));
  d.record(1, 1, us(1));
  d.note_delivered(us(1), 1, [] { return uint32_t{1}; });
  EXPECT_TRUE(rack(d, us(2), false).empty());  // neither lost: within the window
  // Nothing current any more (both acknowledged): RACK retires them.
  d.detect_rack(
      us(2), false, LossContext{}, [](uint32_t) { return false; }, [](uint16_t ev) { return ev; },
      [](uint32_t, LossCause) {});
  ASSERT_TRUE(d.empty());
  d.release();
  EXPECT_FALSE(d.allocated());
  EXPECT_EQ(d.ring_bytes() + d.path_bytes(), 0u);
  d.allocate(4, 4);
  EXPECT_EQ(d.record(2, 1, us(3)), 2u);
  EXPECT_TRUE(d.at(2).linked);
  Losses lost;
  d.detect_on_path(
      1, 2, 100, [](uint32_t) { return true; },
      [&](uint32_t psn, LossCause c) { lost.emplace_back(psn, c); });
  EXPECT_TRUE(lost.empty());  // the FIFO starts empty: nothing before record 2
}

TEST(LossDetector, detect_on_path__loses_earlier_transmissions_on_that_path_only) {
  LossDetector d = make();
  d.record(0, 0, us(0));  // seq 0, path 0
  d.record(1, 1, us(1));  // seq 1, path 1
  d.record(2, 0, us(2));  // seq 2, path 0
  d.record(3, 0, us(3));  // seq 3, path 0: delivered
  Losses lost;
  d.detect_on_path(
      0, 3, 100, [](uint32_t) { return true; },
      [&](uint32_t psn, LossCause c) { lost.emplace_back(psn, c); });
  EXPECT_EQ(lost, (Losses{{0, LossCause::kPathOrder}, {2, LossCause::kPathOrder}}));
  EXPECT_FALSE(d.at(0).linked);
  EXPECT_TRUE(d.at(1).linked);  // another path's record stays queued
}

TEST(LossDetector, detect_on_path__leaves_psns_beyond_the_acks_reach_and_stale_records) {
  LossDetector d = make();
  d.record(10, 0, us(0));
  d.record(200, 0, us(1));  // beyond known_end
  d.record(11, 0, us(2));   // not current (acknowledged since)
  d.record(12, 0, us(3));
  Losses lost;
  d.detect_on_path(
      0, 3, 100, [](uint32_t seq) { return seq != 2; },
      [&](uint32_t psn, LossCause c) { lost.emplace_back(psn, c); });
  EXPECT_EQ(lost, (Losses{{10, LossCause::kPathOrder}}));
}

TEST(LossDetector, detect_on_path__ignores_a_record_not_queued_on_the_named_path) {
  LossDetector d = make();
  d.record(0, 0, us(0));
  d.record(1, 1, us(1));
  Losses lost;
  d.detect_on_path(
      0, 1, 100, [](uint32_t) { return true; },
      [&](uint32_t psn, LossCause c) { lost.emplace_back(psn, c); });
  EXPECT_TRUE(lost.empty());
  EXPECT_TRUE(d.at(0).linked);
}

TEST(LossDetector, detect_rack__loses_what_was_sent_a_reordering_window_before_a_delivery) {
  LossTiming t;
  t.reorder_window = us(5);
  LossDetector d = make(64, 4, t);
  d.record(0, 0, us(0));
  d.record(1, 1, us(6));
  d.record(2, 2, us(10));
  d.note_delivered(us(10), 2, [] { return uint32_t{2}; });
  // 10 > 0 + 5: PSN 0 is lost; PSN 1 (10 <= 6 + 5) was sent within the window.
  EXPECT_EQ(rack(d, us(11), false), (Losses{{0, LossCause::kRack}}));
  EXPECT_EQ(d.head(), 1u);  // retired up to the first record RACK keeps
}

TEST(LossDetector, detect_rack__tail_loss_probe_fires_once_per_backed_off_pto) {
  LossDetector d = make();
  d.rtt_sample(us(10), us(10));
  d.record(0, 0, us(0));
  d.record(1, 1, us(0));
  const LossContext ctx{};
  const Time due = d.pto_due(us(0), ctx);
  EXPECT_GT(due, us(10));
  EXPECT_TRUE(rack(d, due - 1, true, ctx).empty());
  EXPECT_EQ(rack(d, due, true, ctx), (Losses{{0, LossCause::kPto}}));  // only the oldest
  EXPECT_TRUE(d.pto_probe_due());
  // The next probe waits twice as long from the one that fired.
  EXPECT_EQ(d.pto_due(us(0), ctx), due + 2 * d.pto(ctx));
  d.on_answer(due);
  EXPECT_EQ(d.pto_due(us(0), ctx), due + d.pto(ctx));
}

TEST(LossDetector, pto__borrows_the_engines_rtt_before_a_sample_of_its_own) {
  LossDetector d = make();
  EXPECT_EQ(d.pto(LossContext{}), d.rto_base());  // nothing known: the ACK timeout
  LossContext ctx;
  ctx.borrowed = RttEstimate{us(10), us(2), us(8)};
  EXPECT_LT(d.pto(ctx), d.rto_base());
  EXPECT_GE(d.pto(ctx), us(10) + 4 * us(2));
}

TEST(LossDetector, note_delivered__asks_for_the_queue_only_once_two_sends_shared_an_instant) {
  LossDetector d = make();
  int asked = 0;
  const auto queue = [&asked] {
    ++asked;
    return uint32_t{0};
  };
  d.record(0, 0, us(1));
  d.record(1, 0, us(2));
  d.note_delivered(us(1), 0, queue);
  EXPECT_EQ(asked, 0);    // distinct send times: RACK's time rule alone decides
  d.record(2, 0, us(2));  // the same instant as PSN 1
  d.note_delivered(us(2), 1, queue);
  EXPECT_EQ(asked, 1);
}

TEST(LossDetector, rack_tie_due__only_within_a_transmit_queue_and_after_an_rtt_sample) {
  LossDetector d = make();
  d.record(0, 0, us(5));
  d.record(1, 0, us(5));  // the same instant: the tie rule may apply
  d.record(2, 1, us(5));
  d.note_delivered(us(5), 1, [] { return uint32_t{0}; });
  const LossContext ctx{};
  EXPECT_EQ(d.rack_tie_due(0, 0, ctx), kNever);  // no RTT sample yet
  d.rtt_sample(us(10), us(10));
  EXPECT_EQ(d.rack_tie_due(0, 0, ctx), us(5) + us(10) + d.reorder_window(ctx));
  EXPECT_EQ(d.rack_tie_due(0, 1, ctx), kNever);  // another queue delivered nothing
  EXPECT_EQ(d.rack_tie_due(1, 0, ctx), kNever);  // the delivered one itself
}

TEST(LossDetector, reorder_window__widens_on_spurious_loss_and_sixteen_losses_halve_it) {
  LossDetector d = make();
  d.rtt_sample(us(10), us(10));
  d.rtt_sample(us(10), us(30));  // a wide raw spread: room to widen beyond 4 min RTTs
  const LossContext ctx{};
  const Time base = d.reorder_window(ctx);
  EXPECT_EQ(base, us(10));
  d.widen_reorder_window();
  d.widen_reorder_window();
  EXPECT_EQ(d.reorder_window(ctx), us(20));
  for (int i = 0; i < 15; ++i)
    d.note_loss(LossCause::kRack);
  EXPECT_EQ(d.reorder_window(ctx), us(20));
  d.note_loss(LossCause::kPathOrder);
  EXPECT_EQ(d.reorder_window(ctx), us(15));
  d.note_loss(LossCause::kTrim);  // not a reordering verdict
  EXPECT_EQ(d.reorder_window(ctx), us(15));
}

TEST(LossDetector, on_rto__backs_off_after_the_linear_retries_and_ends_after_all) {
  LossTiming t;
  t.timeout = 10;
  t.retry_linear = 2;
  t.retry_exp = 1;
  LossDetector d = make(64, 4, t);
  d.restart_rto_clock(0);
  const Time base = d.rto_base();
  EXPECT_EQ(base, (1024 * kPicosPerNano) << 10);
  EXPECT_EQ(d.rto_due(), base);
  EXPECT_TRUE(d.on_rto());
  EXPECT_EQ(d.rto_interval(), base);
  EXPECT_TRUE(d.on_rto());
  EXPECT_EQ(d.rto_interval(), 2 * base);
  EXPECT_TRUE(d.on_rto());
  EXPECT_FALSE(d.on_rto());  // 2 linear + 1 exponential retries used
}

TEST(LossDetector, learn_pto_floor__is_capped_at_half_the_timeout_and_ages) {
  LossDetector d = make();
  d.learn_pto_floor(ms(10000), 0);  // far more than the ACK timeout
  EXPECT_EQ(d.pto(LossContext{}), d.rto_base());
  LossContext ctx;
  ctx.borrowed = RttEstimate{us(1), 0, us(1)};
  EXPECT_EQ(d.pto(ctx), d.rto_base() / 2);
  d.age_pto_floor(ms(10000) + ms(1001));
  EXPECT_EQ(d.pto(ctx), d.rto_base() / 4);
  d.set_timeout(2);  // a shorter timeout lowers the floor with it
  EXPECT_LE(d.pto(ctx), d.rto_base());
}

TEST(LossDetector, reportable_by_last_ack__covers_the_128_psns_from_its_sack_base) {
  LossDetector d;
  d.start(64, LossTiming{}, 1000);
  EXPECT_TRUE(d.reportable_by_last_ack(1000));
  EXPECT_TRUE(d.reportable_by_last_ack(1127));
  EXPECT_FALSE(d.reportable_by_last_ack(1128));
  EXPECT_FALSE(d.reportable_by_last_ack(999));
  d.note_ack_reach(1100);
  d.note_ack_reach(1050);  // an older ACK does not move it back
  EXPECT_FALSE(d.reportable_by_last_ack(1099));
  EXPECT_TRUE(d.reportable_by_last_ack(1227));
}

// Property: whatever the sends and deliveries, path order never loses a transmission on
// another path or one sent after the delivered one, and every record RACK retires was
// judged.
RC_GTEST_PROP(LossDetector, detect_on_path__loses_only_earlier_sends_of_its_path, ()) {
  const auto paths = *rc::gen::inRange<uint16_t>(1, 5);
  const auto sends = *rc::gen::inRange<uint32_t>(1, 60);
  LossDetector d = make(64, paths);
  std::map<uint32_t, uint16_t> path_of;
  for (uint32_t psn = 0; psn < sends; ++psn) {
    const auto ev = *rc::gen::inRange<uint16_t>(0, paths);
    d.record(psn, ev, us(psn));
    path_of[psn] = ev;
  }
  const auto upto = *rc::gen::inRange<uint32_t>(0, sends);
  Losses lost;
  d.detect_on_path(
      path_of[upto], upto, 1u << 20, [](uint32_t) { return true; },
      [&](uint32_t psn, LossCause c) { lost.emplace_back(psn, c); });
  uint32_t expected = 0;
  for (uint32_t psn = 0; psn < upto; ++psn)
    expected += path_of[psn] == path_of[upto];
  RC_ASSERT(lost.size() == expected);
  for (const auto& [psn, cause] : lost) {
    RC_ASSERT(psn < upto);
    RC_ASSERT(path_of[psn] == path_of[upto]);
    RC_ASSERT(cause == LossCause::kPathOrder);
  }
}

}  // namespace
}  // namespace mrc
