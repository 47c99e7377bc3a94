#include "transport/id_cipher.h"

namespace mrc {
namespace {
constexpr int kRounds = 4;

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

IdCipher::IdCipher(uint64_t key, int bits)
    : key_(key),
      half_bits_(bits / 2),
      half_mask_(static_cast<uint32_t>((1ull << (bits / 2)) - 1)),
      mask_(static_cast<uint32_t>((1ull << bits) - 1)) {}

uint32_t IdCipher::round(int r, uint32_t half) const {
  return static_cast<uint32_t>(mix(key_ ^ (uint64_t{static_cast<uint32_t>(r)} << 40) ^ half)) &
         half_mask_;
}

uint32_t IdCipher::encrypt(uint32_t x) const {
  if (key_ == 0) return x;
  uint32_t left = (x >> half_bits_) & half_mask_, right = x & half_mask_;
  for (int r = 0; r < kRounds; ++r) {
    const uint32_t next = left ^ round(r, right);
    left = right;
    right = next;
  }
  return left << half_bits_ | right;
}

uint32_t IdCipher::decrypt(uint32_t y) const {
  if (key_ == 0) return y;
  uint32_t left = (y >> half_bits_) & half_mask_, right = y & half_mask_;
  for (int r = kRounds - 1; r >= 0; --r) {
    const uint32_t prev = right ^ round(r, left);
    right = left;
    left = prev;
  }
  return left << half_bits_ | right;
}

}  // namespace mrc
