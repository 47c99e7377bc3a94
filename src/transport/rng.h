// Seeded pseudo-random numbers for the engine (path-order offsets, probe ids, jitter).
// xoshiro256** (Blackman & Vigna), seeded through splitmix64. Deterministic: the same seed
// gives the same sequence on every platform. Never seeded from a clock.
#pragma once

#include <cstdint>

namespace mrc {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_)
      s = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n) (Lemire's multiply-shift; the tiny bias is irrelevant here).
  uint64_t below(uint64_t n) {
    return n == 0 ? 0 : static_cast<uint64_t>((static_cast<__uint128_t>(next()) * n) >> 64);
  }
  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace mrc
