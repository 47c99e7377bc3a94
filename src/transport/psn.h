// 24-bit packet sequence numbers (IBTA vol. 1, 9.7.1: PSNs are 24 bits and wrap). All
// comparisons are modular: a is "before" b when (b - a) mod 2^24 is in (0, 2^23).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace mrc {

inline constexpr uint32_t kPsnBits = 24;
inline constexpr uint32_t kPsnMask = (1u << kPsnBits) - 1;
inline constexpr uint32_t kPsnHalf = 1u << (kPsnBits - 1);

constexpr uint32_t psn_add(uint32_t psn, int64_t delta) {
  return static_cast<uint32_t>(static_cast<int64_t>(psn) + delta) & kPsnMask;
}
// Signed distance b - a in (-2^23, 2^23].
constexpr int32_t psn_diff(uint32_t b, uint32_t a) {
  uint32_t d = (b - a) & kPsnMask;
  return d >= kPsnHalf ? static_cast<int32_t>(d) - static_cast<int32_t>(1u << kPsnBits)
                       : static_cast<int32_t>(d);
}
constexpr bool psn_lt(uint32_t a, uint32_t b) {
  return psn_diff(b, a) > 0;
}
constexpr bool psn_le(uint32_t a, uint32_t b) {
  return psn_diff(b, a) >= 0;
}

// The smallest power of two at least `n` (1 for 0): the size of a ring indexed by PSN, whose
// slot is the PSN masked.
constexpr uint32_t pow2_at_least(uint64_t n) {
  return static_cast<uint32_t>(std::bit_ceil(std::max<uint64_t>(n, 1)));
}

}  // namespace mrc
