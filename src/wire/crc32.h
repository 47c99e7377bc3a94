// CRC-32 as used by Ethernet, zlib and the InfiniBand/RoCEv2 ICRC (IEEE 802.3 polynomial
// 0x04C11DB7, processed LSB first, i.e. the reflected polynomial 0xEDB88320).
//
// Portable path: slice-by-8 (Kounavis and Berry, "Novel Table Lookup-Based Algorithms for
// High-Performance CRC Generation", 2008): eight 256-entry tables, generated at compile time,
// consume 8 bytes per step. The tables are constant data, so there is no initialisation order to
// care about and nothing mutable to share between threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace mrc::wire {

// The register value before any byte: all ones (IEEE 802.3 and IBTA 7.8.1 both preset it).
inline constexpr uint32_t kCrc32Preset = 0xFFFFFFFFu;

namespace crc32_detail {
inline constexpr uint32_t kReflectedPoly = 0xEDB88320u;

constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit)
      c = (c & 1) ? (c >> 1) ^ kReflectedPoly : c >> 1;
    t[0][i] = c;
  }
  // t[k][i]: the CRC contribution of byte value i followed by k zero bytes.
  for (int k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i)
      t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}
inline constexpr auto kTables = make_tables();
}  // namespace crc32_detail

// Advances the CRC register `state` over `data`. No final inversion: chain calls, then take
// ~state (or use crc32()). crc32_update(kCrc32Preset, x) == ~crc32(x). On x86-64 CPUs with
// PCLMULQDQ, inputs of 64 bytes or more fold 64 bytes per step with carry-less multiplies
// (about ten times the table method's speed; the ICRC of every packet goes through here);
// with VPCLMULQDQ and AVX-512F, inputs of 256 bytes or more fold 256 bytes per step; with
// VPCLMULQDQ and AVX2 alone, inputs of 128 bytes or more fold 128 bytes per step.
uint32_t crc32_update(uint32_t state, std::span<const uint8_t> data);

// The slice-by-8 table method alone (the portable path, and the reference in tests).
uint32_t crc32_update_tables(uint32_t state, std::span<const uint8_t> data);

// The implementations crc32_update chooses from (by input size and the CPU), each callable on
// its own for tests and benchmarks: kClmul folds 64 bytes per step with PCLMULQDQ (x86-64),
// kVclmul256 128 bytes with VPCLMULQDQ on 256-bit registers (x86-64 with AVX2), kVclmul 256
// bytes with VPCLMULQDQ on 512-bit registers (x86-64 with AVX-512F).
enum class Crc32Path : uint8_t { kTables, kClmul, kVclmul, kVclmul256 };
bool crc32_path_available(Crc32Path path);
// The path's own result over any length (shorter inputs than its step go through the tables).
// Precondition: crc32_path_available(path).
uint32_t crc32_update_path(Crc32Path path, uint32_t state, std::span<const uint8_t> data);

// The standard CRC-32 of `data` (zlib's crc32(0, data, n)); crc32("123456789") == 0xCBF43926.
inline uint32_t crc32(std::span<const uint8_t> data) {
  return ~crc32_update(kCrc32Preset, data);
}

// A byte-at-a-time constexpr version of crc32_update, for compile-time constants (the ICRC
// prefix state) and as the test's reference implementation.
constexpr uint32_t crc32_update_bytewise(uint32_t state, std::span<const uint8_t> data) {
  for (uint8_t b : data)
    state = crc32_detail::kTables[0][(state ^ b) & 0xFF] ^ (state >> 8);
  return state;
}

}  // namespace mrc::wire
