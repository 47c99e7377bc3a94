#include "wire/crc32.h"

#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mrc::wire {
namespace {

inline uint32_t load_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = std::byteswap(v);
  return v;
}

}  // namespace

uint32_t crc32_update_tables(uint32_t state, std::span<const uint8_t> data) {
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

#if defined(__x86_64__)
namespace {

// ---- Carry-less multiplication folding (x86-64 PCLMULQDQ) --------------------------------
// After Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
// Instruction" (Intel, 2009), in the reflected (LSB-first) domain. The constants are derived
// here, not copied: see fold_constant().
//
// Invariant: a 128-bit register R stands for 16 message bytes whose CRC contribution equals
// that of everything folded so far. R's low qword holds the first 8 bytes, the higher-degree
// half H; the high qword the lower-degree half L (reflected: bit i of a qword is the
// coefficient of x^(63-i)). Appending 16 bytes D gives R*x^128 + D = H*x^192 + L*x^128 + D,
// and modulo P that is H*(x^192 mod P) + L*(x^128 mod P) + D: two carry-less multiplies
// of 64 x 32 bits, no reduction needed (the products have degree < 96). Folding across k
// blocks uses x^(128k + 64) and x^(128k) instead. At the end, the 16 bytes of R go through
// the table CRC from state 0, which reduces them.

// x^e mod P for the CRC-32 polynomial P = x^32 + 0x04C11DB7 (normal bit order, bit k is x^k).
constexpr uint64_t x_pow_mod_p(int e) {
  uint64_t r = 1;  // x^0
  for (int i = 0; i < e; ++i) {
    r <<= 1;
    if (r & (1ull << 32)) r ^= 0x104C11DB7ull;
  }
  return r;
}

// The 64-bit reflected operand for "multiply by x^e mod P". A carry-less product of two
// reflected 64-bit operands, read as a reflected 128-bit value, is the polynomial product
// times x (bit k of the product is the coefficient of x^(126-k), the 128-bit reading says
// x^(127-k)); asking for x^(e-1) cancels that.
constexpr uint64_t fold_constant(int e) {
  const uint64_t c = x_pow_mod_p(e - 1);
  uint64_t w = 0;
  for (int k = 0; k < 32; ++k)
    if (c & (1ull << k)) w |= 1ull << (63 - k);
  return w;
}

// Low qword multiplies H (the register's low qword), high qword multiplies L.
constexpr uint64_t kFold1H = fold_constant(128 + 64), kFold1L = fold_constant(128);
constexpr uint64_t kFold4H = fold_constant(512 + 64), kFold4L = fold_constant(512);

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i r, __m128i k, __m128i d) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00), _mm_clmulepi64_si128(r, k, 0x11)), d);
}

// The common end of both folding paths: the rest in 16-byte steps, then the register's 16
// bytes and the last n < 16 bytes through the tables (which reduce them).
__attribute__((target("pclmul,sse4.1"))) inline uint32_t finish_fold(__m128i r, const uint8_t* p,
                                                                     size_t n) {
  const __m128i k1 =
      _mm_set_epi64x(static_cast<long long>(kFold1L), static_cast<long long>(kFold1H));
  while (n >= 16) {
    r = fold(r, k1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    p += 16;
    n -= 16;
  }
  alignas(16) uint8_t bytes[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(bytes), r);
  const uint32_t s = crc32_update_tables(0, std::span<const uint8_t>(bytes, 16));
  return crc32_update_tables(s, std::span<const uint8_t>(p, n));
}

__attribute__((target("pclmul,sse4.1"))) uint32_t crc32_update_clmul(uint32_t state,
                                                                     const uint8_t* p, size_t n) {
  // Precondition: n >= 64. The state enters as an XOR into the first four bytes (a CRC
  // register is a pending XOR on the message that follows).
  auto load = [](const uint8_t* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); };
  __m128i r0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i r1 = load(p + 16), r2 = load(p + 32), r3 = load(p + 48);
  p += 64;
  n -= 64;
  const __m128i k4 =
      _mm_set_epi64x(static_cast<long long>(kFold4L), static_cast<long long>(kFold4H));
  while (n >= 64) {
    r0 = fold(r0, k4, load(p));
    r1 = fold(r1, k4, load(p + 16));
    r2 = fold(r2, k4, load(p + 32));
    r3 = fold(r3, k4, load(p + 48));
    p += 64;
    n -= 64;
  }
  const __m128i k1 =
      _mm_set_epi64x(static_cast<long long>(kFold1L), static_cast<long long>(kFold1H));
  return finish_fold(fold(fold(fold(r0, k1, r1), k1, r2), k1, r3), p, n);
}

// The same folding with VPCLMULQDQ on 256-bit registers (AVX2, for CPUs with VPCLMULQDQ but
// no AVX-512, such as AMD Zen 3): each of four registers carries two 16-byte lanes, so one step
// folds 128 bytes, every lane across x^1024. At the end the four registers fold into one
// (x^256 apart) and its two lanes into one 128-bit register (x^128 apart).
constexpr uint64_t kFold8H = fold_constant(1024 + 64), kFold8L = fold_constant(1024);
constexpr uint64_t kFold2H = fold_constant(256 + 64), kFold2L = fold_constant(256);

__attribute__((target("avx2,vpclmulqdq"))) inline __m256i fold256(__m256i r, __m256i k, __m256i d) {
  return _mm256_xor_si256(
      _mm256_xor_si256(_mm256_clmulepi64_epi128(r, k, 0x00), _mm256_clmulepi64_epi128(r, k, 0x11)),
      d);
}

__attribute__((target("avx2"))) inline __m256i load256(const uint8_t* q) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
}

__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1"))) uint32_t crc32_update_vclmul256(
    uint32_t state, const uint8_t* p, size_t n) {
  // Precondition: n >= 128.
  __m256i y0 = _mm256_xor_si256(load256(p),
                                _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(state))));
  __m256i y1 = load256(p + 32), y2 = load256(p + 64), y3 = load256(p + 96);
  p += 128;
  n -= 128;
  const __m256i k8 = _mm256_broadcastsi128_si256(
      _mm_set_epi64x(static_cast<long long>(kFold8L), static_cast<long long>(kFold8H)));
  while (n >= 128) {
    y0 = fold256(y0, k8, load256(p));
    y1 = fold256(y1, k8, load256(p + 32));
    y2 = fold256(y2, k8, load256(p + 64));
    y3 = fold256(y3, k8, load256(p + 96));
    p += 128;
    n -= 128;
  }
  const __m256i k2 = _mm256_broadcastsi128_si256(
      _mm_set_epi64x(static_cast<long long>(kFold2L), static_cast<long long>(kFold2H)));
  const __m256i y = fold256(fold256(fold256(y0, k2, y1), k2, y2), k2, y3);
  const __m128i k1 =
      _mm_set_epi64x(static_cast<long long>(kFold1L), static_cast<long long>(kFold1H));
  const __m128i r = fold(_mm256_castsi256_si128(y), k1, _mm256_extracti128_si256(y, 1));
  // Clean upper halves before the SSE tail and the caller (see crc32_update_vclmul below).
  _mm256_zeroupper();
  return finish_fold(r, p, n);
}

// The same folding with VPCLMULQDQ on 512-bit registers (AVX-512): each of four registers
// carries four 16-byte lanes, so one step folds 256 bytes, every lane across x^2048. At the
// end the four registers fold into one (x^512 apart), its four lanes into one 128-bit
// register (x^128 apart), and the 128-bit path above finishes.
constexpr uint64_t kFold16H = fold_constant(2048 + 64), kFold16L = fold_constant(2048);

__attribute__((target("avx512f,vpclmulqdq"))) inline __m512i fold512(__m512i r, __m512i k,
                                                                     __m512i d) {
  // 0x96: the three-way XOR.
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(r, k, 0x00),
                                   _mm512_clmulepi64_epi128(r, k, 0x11), d, 0x96);
}

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) uint32_t crc32_update_vclmul(
    uint32_t state, const uint8_t* p, size_t n) {
  // Precondition: n >= 256.
  __m512i z0 = _mm512_xor_si512(_mm512_loadu_si512(p),
                                _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(state))));
  __m512i z1 = _mm512_loadu_si512(p + 64), z2 = _mm512_loadu_si512(p + 128),
          z3 = _mm512_loadu_si512(p + 192);
  p += 256;
  n -= 256;
  const __m512i k16 = _mm512_maskz_broadcast_i32x4(
      0xFFFF, _mm_set_epi64x(static_cast<long long>(kFold16L), static_cast<long long>(kFold16H)));
  while (n >= 256) {
    z0 = fold512(z0, k16, _mm512_loadu_si512(p));
    z1 = fold512(z1, k16, _mm512_loadu_si512(p + 64));
    z2 = fold512(z2, k16, _mm512_loadu_si512(p + 128));
    z3 = fold512(z3, k16, _mm512_loadu_si512(p + 192));
    p += 256;
    n -= 256;
  }
  const __m512i k4 = _mm512_maskz_broadcast_i32x4(
      0xFFFF, _mm_set_epi64x(static_cast<long long>(kFold4L), static_cast<long long>(kFold4H)));
  const __m512i z = fold512(fold512(fold512(z0, k4, z1), k4, z2), k4, z3);
  const __m128i k1 =
      _mm_set_epi64x(static_cast<long long>(kFold1L), static_cast<long long>(kFold1H));
  const __m128i r = fold(fold(fold(_mm512_maskz_extracti32x4_epi32(0xF, z, 0), k1,
                                   _mm512_maskz_extracti32x4_epi32(0xF, z, 1)),
                              k1, _mm512_maskz_extracti32x4_epi32(0xF, z, 2)),
                         k1, _mm512_maskz_extracti32x4_epi32(0xF, z, 3));
  // Clean upper register state before returning to SSE code. GCC 12 emits no VZEROUPPER
  // for this function (its table-driven tail is a tail call), and on Intel cores dirty upper
  // ZMM halves make every later legacy-SSE instruction merge into them: in a profile of the
  // SRV6 sender, 1.8% of the core sat on the first SSE load after this returned (Intel's
  // optimization manual: "Mixing AVX and SSE code", use VZEROUPPER before returning).
  _mm256_zeroupper();
  return finish_fold(r, p, n);
}

bool have_vclmul() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return yes;
}

bool have_vclmul256() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return yes;
}

bool have_clmul() {
  // __builtin_cpu_init first: this may run before libgcc's own constructor has filled in the
  // CPU model (a static initializer of another translation unit calling the CRC).
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return yes;
}

}  // namespace
#endif

bool crc32_path_available(Crc32Path path) {
  switch (path) {
    case Crc32Path::kTables:
      return true;
#if defined(__x86_64__)
    case Crc32Path::kClmul:
      return have_clmul();
    case Crc32Path::kVclmul256:
      return have_vclmul256();
    case Crc32Path::kVclmul:
      return have_vclmul();
#endif
    default:
      return false;
  }
}

uint32_t crc32_update_path(Crc32Path path, uint32_t state, std::span<const uint8_t> data) {
#if defined(__x86_64__)
  if (path == Crc32Path::kVclmul && data.size() >= 256)
    return crc32_update_vclmul(state, data.data(), data.size());
  if (path == Crc32Path::kVclmul256 && data.size() >= 128)
    return crc32_update_vclmul256(state, data.data(), data.size());
  if (path == Crc32Path::kClmul && data.size() >= 64)
    return crc32_update_clmul(state, data.data(), data.size());
#endif
  return crc32_update_tables(state, data);
}

uint32_t crc32_update(uint32_t state, std::span<const uint8_t> data) {
#if defined(__x86_64__)
  if (data.size() >= 256 && have_vclmul())
    return crc32_update_vclmul(state, data.data(), data.size());
  if (data.size() >= 128 && have_vclmul256())
    return crc32_update_vclmul256(state, data.data(), data.size());
  if (data.size() >= 64 && have_clmul()) return crc32_update_clmul(state, data.data(), data.size());
#endif
  return crc32_update_tables(state, data);
}

}  // namespace mrc::wire
