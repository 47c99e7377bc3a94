#include "common/array.h"

#include <gtest/gtest.h>

#include <vector>

namespace mrc {
namespace {

std::vector<int> contents(const Array<int>& a) {
  return std::vector<int>(a.begin(), a.end());
}

TEST(Array, header__is_smaller_than_a_vector) {
  EXPECT_EQ(sizeof(Array<int>), 16u);
  EXPECT_LT(sizeof(Array<int>), sizeof(std::vector<int>));
}

TEST(Array, assign__sets_size_and_every_entry) {
  Array<int> a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  a.assign(3, 7);
  EXPECT_EQ(contents(a), (std::vector<int>{7, 7, 7}));
  EXPECT_EQ(a.capacity(), 3u);
  a.assign(3, 1);  // same size: entries overwritten
  EXPECT_EQ(contents(a), (std::vector<int>{1, 1, 1}));
  a.assign(0, 1);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
}

TEST(Array, resize__keeps_the_prefix_and_value_initializes_the_rest) {
  Array<int> a(2, 5);
  a[1] = 6;
  a.resize(4);
  EXPECT_EQ(contents(a), (std::vector<int>{5, 6, 0, 0}));
  a.resize(1);
  EXPECT_EQ(contents(a), (std::vector<int>{5}));
}

TEST(Array, constructor__value_initializes_structs_with_their_defaults) {
  struct S {
    int x = 42;
  };
  Array<S> a(3);
  for (const S& s : a)
    EXPECT_EQ(s.x, 42);
}

TEST(Array, swap_move_and_copy__exchange_or_duplicate_contents) {
  Array<int> a(2, 1), b(3, 2);
  a.swap(b);
  EXPECT_EQ(contents(a), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(contents(b), (std::vector<int>{1, 1}));
  Array<int> c(a);
  c[0] = 9;
  EXPECT_EQ(a[0], 2);
  Array<int> d(std::move(c));
  EXPECT_TRUE(c.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(contents(d), (std::vector<int>{9, 2, 2}));
  d.clear();
  EXPECT_TRUE(d.empty());
}

}  // namespace
}  // namespace mrc
