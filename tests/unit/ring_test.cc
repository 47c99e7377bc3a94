#include "common/ring.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <deque>
#include <memory>
#include <vector>

namespace mrc {
namespace {

// The ring's entries front to back.
template <typename T>
std::vector<T> contents(const Ring<T>& r) {
  std::vector<T> out;
  for (size_t i = 0; i < r.size(); ++i)
    out.push_back(r[i]);
  return out;
}

TEST(Ring, push_back__grows_from_empty_storage_to_the_minimum_then_doubles) {
  Ring<int> r;
  EXPECT_EQ(r.capacity(), 0u);
  r.push_back(1);
  EXPECT_EQ(r.capacity(), Ring<int>::kMinCapacity);
  for (int i = 2; i <= 5; ++i)
    r.push_back(i);
  EXPECT_EQ(r.capacity(), 2 * Ring<int>::kMinCapacity);
  EXPECT_EQ(contents(r), (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(Ring, push_back__keeps_the_order_when_growing_a_wrapped_ring) {
  Ring<int> r(3);
  r.push_back(1);
  r.push_back(2);
  r.push_back(3);
  EXPECT_EQ(r.pop_front(), 1);
  r.push_back(4);  // wraps to slot 0
  r.push_back(5);  // full: grows
  EXPECT_EQ(contents(r), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(r.capacity(), 6u);
}

TEST(Ring, push_back__of_an_entry_of_the_ring_itself_survives_growth) {
  Ring<std::vector<int>> r(1);
  r.push_back(std::vector<int>(100, 7));
  r.push_back(r.front());  // full: the argument lives in the storage that grows
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1], std::vector<int>(100, 7));
}

TEST(Ring, try_push_back__refuses_when_full_and_changes_nothing) {
  Ring<int> r(2);
  EXPECT_TRUE(r.try_push_back(1));
  EXPECT_TRUE(r.try_push_back(2));
  EXPECT_TRUE(r.full());
  EXPECT_FALSE(r.try_push_back(3));
  EXPECT_EQ(r.capacity(), 2u);
  EXPECT_EQ(contents(r), (std::vector<int>{1, 2}));
}

TEST(Ring, try_push_back__on_a_ring_without_storage_refuses) {
  Ring<int> r;
  EXPECT_FALSE(r.try_push_back(1));
  EXPECT_TRUE(r.empty());
}

TEST(Ring, pop_front__and_pop_back_take_from_both_ends) {
  Ring<int> r(4);
  for (int i = 1; i <= 4; ++i)
    r.push_back(i);
  EXPECT_EQ(r.pop_front(), 1);
  EXPECT_EQ(r.pop_back(), 4);
  EXPECT_EQ(r.front(), 2);
  EXPECT_EQ(r.back(), 3);
  EXPECT_EQ(r.size(), 2u);
}

TEST(Ring, pop_front__moves_move_only_entries_out) {
  Ring<std::unique_ptr<int>> r;
  r.push_back(nullptr);
  r.front() = std::make_unique<int>(42);
  std::unique_ptr<int> p = r.pop_front();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 42);
  EXPECT_TRUE(r.empty());
}

TEST(Ring, insert__at_front_middle_and_back) {
  Ring<int> r;
  r.push_back(2);
  r.push_back(4);
  r.insert(0, 1);
  r.insert(2, 3);
  r.insert(4, 5);
  EXPECT_EQ(contents(r), (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(Ring, remove_if__keeps_the_order_of_the_rest) {
  Ring<int> r(4);
  r.push_back(0);
  r.push_back(0);
  (void)r.pop_front();
  (void)r.pop_front();  // head in the middle: the entries below wrap
  for (int i = 1; i <= 4; ++i)
    r.push_back(i);
  EXPECT_EQ(r.remove_if([](int v) { return v % 2 == 0; }), 2u);
  EXPECT_EQ(contents(r), (std::vector<int>{1, 3}));
  r.push_back(5);
  EXPECT_EQ(contents(r), (std::vector<int>{1, 3, 5}));
}

TEST(Ring, clear__keeps_the_storage) {
  Ring<int> r(8);
  r.push_back(1);
  r.clear();
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.capacity(), 8u);
  r.push_back(2);
  EXPECT_EQ(r.front(), 2);
}

TEST(Ring, reserve__grows_to_exactly_the_request_and_never_shrinks) {
  Ring<int> r(2);
  r.push_back(1);
  r.push_back(2);
  (void)r.pop_front();
  r.push_back(3);  // wrapped
  r.reserve(5);
  EXPECT_EQ(r.capacity(), 5u);
  EXPECT_EQ(contents(r), (std::vector<int>{2, 3}));
  r.reserve(1);
  EXPECT_EQ(r.capacity(), 5u);
  EXPECT_EQ(r.storage_bytes(), 5 * sizeof(int));
}

TEST(Ring, push_back_within__grows_from_first_then_doubles_up_to_the_limit) {
  Ring<int> r;
  EXPECT_TRUE(r.push_back_within(1, 10, 2));
  EXPECT_EQ(r.capacity(), 2u);
  EXPECT_TRUE(r.push_back_within(2, 10, 2));
  EXPECT_TRUE(r.push_back_within(3, 10, 2));
  EXPECT_EQ(r.capacity(), 4u);
  for (int i = 4; i <= 10; ++i)
    EXPECT_TRUE(r.push_back_within(i, 10, 2));
  EXPECT_EQ(r.capacity(), 10u);  // 8 doubled is 16: capped at the limit
  EXPECT_FALSE(r.push_back_within(11, 10, 2));
  EXPECT_EQ(r.size(), 10u);
  EXPECT_EQ(r.back(), 10);
}

TEST(Ring, copy__keeps_the_entries_in_order_and_the_capacity) {
  Ring<int> r(3);
  r.push_back(1);
  r.push_back(2);
  (void)r.pop_front();
  r.push_back(3);
  r.push_back(4);  // wrapped
  Ring<int> c = r;
  EXPECT_EQ(contents(c), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(c.capacity(), 3u);
  Ring<int> m = std::move(c);
  EXPECT_EQ(contents(m), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(c.capacity(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
}

// A QP holds several rings (docs/performance.md, "Bytes per QP"): a pointer and three 32-bit
// counters.
TEST(Ring, object__is_a_pointer_and_three_32_bit_counters) {
  EXPECT_LE(sizeof(Ring<uint64_t>), 24u);
}

// Property: any sequence of operations leaves the ring holding what std::deque holds after
// the same operations (bounded pushes refused exactly when the ring is at its capacity).
enum class Op {
  kPushBack,
  kTryPushBack,
  kPopFront,
  kPopBack,
  kInsert,
  kRemoveIf,
  kClear,
  kReserve
};

RC_GTEST_PROP(Ring, operations__match_std_deque, ()) {
  const auto initial = *rc::gen::inRange<size_t>(0, 6);
  const auto ops = *rc::gen::container<std::vector<std::pair<Op, int>>>(
      rc::gen::pair(rc::gen::element(Op::kPushBack, Op::kTryPushBack, Op::kPopFront, Op::kPopBack,
                                     Op::kInsert, Op::kRemoveIf, Op::kClear, Op::kReserve),
                    rc::gen::inRange(0, 1000)));
  Ring<int> ring(initial);
  std::deque<int> model;
  for (const auto& [op, v] : ops) {
    switch (op) {
      case Op::kPushBack:
        ring.push_back(v);
        model.push_back(v);
        break;
      case Op::kTryPushBack: {
        const bool room = model.size() < ring.capacity();
        RC_ASSERT(ring.try_push_back(v) == room);
        if (room) model.push_back(v);
        break;
      }
      case Op::kPopFront:
        if (model.empty()) break;
        RC_ASSERT(ring.pop_front() == model.front());
        model.pop_front();
        break;
      case Op::kPopBack:
        if (model.empty()) break;
        RC_ASSERT(ring.pop_back() == model.back());
        model.pop_back();
        break;
      case Op::kInsert: {
        const size_t at = static_cast<size_t>(v) % (model.size() + 1);
        ring.insert(at, v);
        model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), v);
        break;
      }
      case Op::kRemoveIf: {
        const int m = v % 5 + 2;
        const auto pred = [m](int x) { return x % m == 0; };
        const size_t before = model.size();
        std::erase_if(model, pred);
        RC_ASSERT(ring.remove_if(pred) == before - model.size());
        break;
      }
      case Op::kClear:
        ring.clear();
        model.clear();
        break;
      case Op::kReserve:
        ring.reserve(static_cast<size_t>(v % 64));
        RC_ASSERT(ring.capacity() >= static_cast<size_t>(v % 64));
        break;
    }
    RC_ASSERT(ring.size() == model.size());
    RC_ASSERT(ring.capacity() >= ring.size());
    RC_ASSERT(contents(ring) == std::vector<int>(model.begin(), model.end()));
    if (!model.empty()) {
      RC_ASSERT(ring.front() == model.front());
      RC_ASSERT(ring.back() == model.back());
    }
  }
}

}  // namespace
}  // namespace mrc
