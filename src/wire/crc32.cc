#include "wire/crc32.h"

#include <bit>
#include <cstring>

namespace mrc::wire {
namespace {

inline uint32_t load_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = std::byteswap(v);
  return v;
}

}  // namespace

uint32_t crc32_update(uint32_t state, std::span<const uint8_t> data) {
  const auto& t = crc32_detail::kTables;
  const uint8_t* p = data.data();
  size_t n = data.size();
  while (n >= 8) {
    // The register is reflected, so the first byte in memory is its low byte: XOR the first
    // four bytes into it, then look all eight bytes up at their distance from the end.
    const uint32_t lo = load_le32(p) ^ state;
    const uint32_t hi = load_le32(p + 4);
    state = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
            t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0)
    state = t[0][(state ^ *p++) & 0xFF] ^ (state >> 8);
  return state;
}

}  // namespace mrc::wire
