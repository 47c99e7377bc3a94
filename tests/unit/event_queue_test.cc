// The calendar queue must pop events in exactly (time, key) order, whatever mix of
// same-time work, near events, pushes into the open bucket and far-future timers it sees.
#include "sim/event_queue.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <vector>

namespace mrc::sim {
namespace {

TEST(EventQueue, peek__empty_queue_peeks_never) {
  EventQueue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.peek_time(), kNever);
  EXPECT_EQ(q.peek_ready(), nullptr);
}

TEST(EventQueue, pop__ties_break_on_key) {
  EventQueue q(1024, 16);
  q.push(SimEvent{.time = 5000, .key = 3});
  q.push(SimEvent{.time = 5000, .key = 1});
  q.push(SimEvent{.time = 5000, .key = 2});
  EXPECT_EQ(q.pop().key, 1u);
  EXPECT_EQ(q.pop().key, 2u);
  EXPECT_EQ(q.pop().key, 3u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, pop__far_events_come_back_in_order) {
  // Horizon = 1024 ps x 16 buckets: these are all beyond it at first.
  EventQueue q(1024, 16);
  for (Time t : {Time{1'000'000}, Time{50'000}, Time{20'000'000}, Time{50'001}})
    q.push(SimEvent{.time = t, .key = t});
  EXPECT_EQ(q.pop().time, 50'000u);
  EXPECT_EQ(q.pop().time, 50'001u);
  EXPECT_EQ(q.pop().time, 1'000'000u);
  EXPECT_EQ(q.pop().time, 20'000'000u);
}

TEST(EventQueue, pop__a_burst_leaves_no_large_buffers_behind_it) {
  // 64 buckets of 1024 ps; every bucket receives a burst of 1000 events once, then the ring
  // goes round three more times with one event per bucket.
  EventQueue q(1024, 64);
  const size_t empty_bytes = q.buffer_bytes();
  Time t = 0;
  for (uint32_t b = 0; b < 64; ++b)
    for (uint32_t i = 0; i < 1000; ++i)
      q.push(SimEvent{.time = b * 1024 + i % 1024, .key = t++});
  const size_t burst_bytes = q.buffer_bytes();
  EXPECT_GE(burst_bytes, 64 * 1000 * sizeof(SimEvent));
  Time now = 0;
  for (uint32_t round = 0; round < 4; ++round) {
    while (!q.empty())
      now = q.pop().time;
    for (uint32_t b = 0; b < 64; ++b)
      q.push(SimEvent{.time = now + 1 + b * 1024, .key = t++});
  }
  // Buckets keep small buffers only; one bucket's burst may stay in the sort buffer.
  EXPECT_LT(q.buffer_bytes(),
            empty_bytes + 64 * 64 * sizeof(SimEvent) + 2 * 1024 * sizeof(SimEvent));
  EXPECT_LT(q.buffer_bytes() * 10, burst_bytes);
}

TEST(EventQueue, peek_ready__is_the_next_pop) {
  EventQueue q(1024, 16);
  q.push(SimEvent{.time = 10, .key = 1});
  q.push(SimEvent{.time = 20, .key = 2});
  ASSERT_EQ(q.peek_time(), 10u);  // opens the bucket
  const SimEvent* next = q.peek_ready();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->key, 1u);
  q.pop();
  ASSERT_NE(q.peek_ready(), nullptr);
  EXPECT_EQ(q.peek_ready()->key, 2u);
}

TEST(EventQueue, peek_ahead__guesses_the_following_events_of_the_open_bucket) {
  EventQueue q(1024, 16);
  EXPECT_EQ(q.peek_ahead(0), nullptr);  // nothing open
  q.push(SimEvent{.time = 30, .key = 3});
  q.push(SimEvent{.time = 10, .key = 1});
  q.push(SimEvent{.time = 20, .key = 2});
  ASSERT_EQ(q.peek_time(), 10u);  // opens the bucket
  ASSERT_NE(q.peek_ahead(0), nullptr);
  EXPECT_EQ(q.peek_ahead(0)->key, 1u);
  EXPECT_EQ(q.peek_ahead(1)->key, 2u);
  EXPECT_EQ(q.peek_ahead(2)->key, 3u);
  EXPECT_EQ(q.peek_ahead(3), nullptr);
  q.pop();
  EXPECT_EQ(q.peek_ahead(1)->key, 3u);
}

// Buckets of thousands of events (a big fabric's steady state) go through the radix passes;
// many share a time and their keys are not in push order. Widths 2^13 and 2^14 are radix
// sorted, 2^15 falls back to a comparison sort: all must pop in (time, key) order.
TEST(EventQueue, pop__big_buckets_pop_in_time_key_order) {
  for (const Time width : {Time{1} << 13, Time{1} << 14, Time{1} << 15}) {
    EventQueue q(width, 64);
    std::vector<SimEvent> ref;
    uint64_t x = 12345;
    for (uint64_t i = 0; i < 20'000; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const Time t = (x >> 33) % (4 * width) / 7 * 7;  // 4 buckets, many equal times
      const SimEvent e{.time = t, .key = (i * 7919) % 20'011};
      q.push(e);
      ref.push_back(e);
    }
    std::sort(ref.begin(), ref.end(),
              [](const SimEvent& a, const SimEvent& b) { return a.before(b); });
    for (const SimEvent& want : ref) {
      const SimEvent got = q.pop();
      ASSERT_EQ(got.time, want.time) << "width " << width;
      ASSERT_EQ(got.key, want.key) << "width " << width;
    }
    EXPECT_TRUE(q.empty());
  }
}

// Simulation-like use: pop one event, push a few at or after its time (never before: the
// simulator only schedules into the future), compare with a sorted reference.
RC_GTEST_PROP(EventQueue, pop__in_time_key_order, ()) {
  const Time width = Time{1} << *rc::gen::inRange(0, 14);
  const uint32_t buckets = 1u << *rc::gen::inRange(1, 10);
  EventQueue q(width, buckets);
  std::vector<SimEvent> ref;
  uint64_t seq = 0;
  auto push = [&](Time t) {
    SimEvent e{.time = t, .key = seq++ ^ 0x5555};  // keys not in push order
    q.push(e);
    ref.push_back(e);
  };
  const int initial = *rc::gen::inRange(1, 50);
  for (int i = 0; i < initial; ++i)
    push(*rc::gen::inRange<Time>(0, 100'000));
  Time now = 0;
  int steps = 0;
  while (!ref.empty() && steps++ < 2000) {
    auto it = std::min_element(ref.begin(), ref.end(),
                               [](const SimEvent& a, const SimEvent& b) { return a.before(b); });
    RC_ASSERT(q.peek_time() == it->time);
    const SimEvent got = q.pop();
    RC_ASSERT(got.time == it->time);
    RC_ASSERT(got.key == it->key);
    ref.erase(it);
    RC_ASSERT(got.time >= now);
    now = got.time;
    const int children = *rc::gen::inRange(0, 3);
    for (int c = 0; c < children; ++c) {
      // Mostly near (same time, same bucket, a few buckets on), sometimes far beyond.
      const Time delta =
          *rc::gen::weightedOneOf<Time>({{3, rc::gen::just<Time>(0)},
                                         {6, rc::gen::inRange<Time>(0, 4 * width)},
                                         {2, rc::gen::inRange<Time>(0, 100'000)},
                                         {1, rc::gen::inRange<Time>(0, 100'000'000)}});
      push(now + delta);
    }
    RC_ASSERT(q.size() == ref.size());
  }
}

}  // namespace
}  // namespace mrc::sim
