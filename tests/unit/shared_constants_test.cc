#include "common/shared_constants.h"

#include <gtest/gtest.h>

#include <string>

namespace mrc {
namespace {

TEST(SharedConstants, get__equal_keys_share_one_value_made_once) {
  SharedConstants<int, std::string> c;
  int made = 0;
  auto make = [&](int k) {
    ++made;
    return std::to_string(k);
  };
  const auto a = c.get(7, make);
  const auto b = c.get(7, make);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(*a, "7");
  EXPECT_EQ(made, 1);
  EXPECT_EQ(c.size(), 1u);
}

TEST(SharedConstants, get__different_keys_get_their_own_values) {
  SharedConstants<int, std::string> c;
  auto make = [](int k) { return std::to_string(k); };
  const auto a = c.get(1, make);
  const auto b = c.get(2, make);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(*a, "1");
  EXPECT_EQ(*b, "2");
  EXPECT_EQ(c.size(), 2u);
}

TEST(SharedConstants, get__past_the_limit_values_are_correct_but_not_kept) {
  SharedConstants<int, int> c;
  auto twice = [](int k) { return 2 * k; };
  constexpr size_t kMax = SharedConstants<int, int>::kMaxEntries;
  for (int k = 0; k < static_cast<int>(kMax); ++k)
    c.get(k, twice);
  EXPECT_EQ(c.size(), kMax);
  const auto x = c.get(1000, twice);
  const auto y = c.get(1000, twice);
  EXPECT_EQ(*x, 2000);
  EXPECT_EQ(*y, 2000);
  EXPECT_NE(x.get(), y.get());  // not kept: the list stays bounded
  EXPECT_EQ(c.size(), kMax);
  EXPECT_EQ(c.get(3, twice).get(), c.get(3, twice).get());  // earlier keys still shared
}

}  // namespace
}  // namespace mrc
