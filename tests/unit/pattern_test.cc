#include "net/pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace mrc::net {
namespace {

TEST(Pattern, fill_pattern__then_count_pattern_mismatches_is_zero) {
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 4096u, 65537u}) {
    std::vector<uint8_t> b(n);
    fill_pattern(b.data(), n, 1, 0, 5);
    EXPECT_EQ(count_pattern_mismatches(b.data(), n, 1, 0, 5), 0u) << n;
  }
}

TEST(Pattern, fill_pattern__depends_on_seed_qp_and_iteration) {
  std::vector<uint8_t> b(4096);
  fill_pattern(b.data(), b.size(), 1, 0, 5);
  EXPECT_GT(count_pattern_mismatches(b.data(), b.size(), 2, 0, 5), 4000u);
  EXPECT_GT(count_pattern_mismatches(b.data(), b.size(), 1, 1, 5), 4000u);
  EXPECT_GT(count_pattern_mismatches(b.data(), b.size(), 1, 0, 6), 4000u);
}

TEST(Pattern, count_pattern_mismatches__counts_corrupted_bytes) {
  std::vector<uint8_t> b(1000);
  fill_pattern(b.data(), b.size(), 9, 3, 1);
  b[0] ^= 1;
  b[500] ^= 0xFF;
  b[999] ^= 0x10;
  EXPECT_EQ(count_pattern_mismatches(b.data(), b.size(), 9, 3, 1), 3u);
}

}  // namespace
}  // namespace mrc::net
