// Basic vocabulary shared by every layer: time, errors, results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string_view>

namespace mrc {

// Time is an integer count of picoseconds. The engine never reads a clock: every entry point
// takes `now`. The simulator counts picoseconds natively; the Linux driver multiplies its
// CLOCK_MONOTONIC nanoseconds by 1000. 2^64 ps is 213 days.
using Time = uint64_t;
inline constexpr Time kNever = UINT64_MAX;
inline constexpr Time kPicosPerNano = 1000;
inline constexpr Time kPicosPerMicro = 1000 * kPicosPerNano;
inline constexpr Time kPicosPerMilli = 1000 * kPicosPerMicro;
inline constexpr Time kPicosPerSecond = 1000 * kPicosPerMilli;
constexpr Time ns(uint64_t v) {
  return v * kPicosPerNano;
}
constexpr Time us(uint64_t v) {
  return v * kPicosPerMicro;
}
constexpr Time ms(uint64_t v) {
  return v * kPicosPerMilli;
}

// Every error the core can report. Values are stable (they appear in counters and logs).
enum class Error : uint16_t {
  kOk = 0,
  // Decoding (wire/).
  kTruncated,      // buffer shorter than the headers it claims
  kBadVersion,     // IPv6 version != 6, BTH transport version != 0
  kBadNextHeader,  // not UDP (or SRH then UDP)
  kBadSrh,         // SRH routing type != 4, inconsistent lengths or segments left
  kBadUdpPort,     // destination port != 4791
  kBadLength,      // IPv6 payload length / UDP length disagree with the buffer
  kBadOpcode,      // BTH opcode not one MRC uses
  kBadPadCount,    // pad count inconsistent with payload
  kBadIcrc,        // ICRC mismatch
  kBadExtension,   // MRC extension header fields out of range
  // Engine input validation (transport/).
  kUnknownQp,        // destination QPN not found
  kBadQpState,       // operation not allowed in the QP's state
  kBadRkey,          // rkey does not name a registered region
  kBadAddress,       // [va, va+len) not inside the region, or access not allowed
  kPsnOutOfWindow,   // PSN stale or beyond the tracking window
  kInvalidArgument,  // API misuse (bad attribute value, bad WR)
  kQueueFull,        // send queue / receive queue / WIMM limit full
  kNoResources,      // table full
  kNotFound,         // id not found
  kBadEvProfile,     // EV profile / format validation failed
  kTooBig,           // array too small / too many entries (E2BIG)
  kBusy,             // EBUSY
  // Added after the first release of this list; kept at the end so values stay stable.
  kBadUdpChecksum,  // UDP checksum mismatch (wire/, only when asked to verify it)
  kIoError,         // a file could not be opened or written (wire/pcap)
};

// Stable, human-readable name of an error ("truncated", "bad rkey", ...).
std::string_view error_name(Error e);

template <typename T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

// Index `i` wrapped into a ring of `n` slots, for i < 2n (head + count, head + 1): a compare
// instead of a 64-bit division, which rings on the per-packet path would otherwise pay.
inline constexpr size_t ring_wrap(size_t i, size_t n) {
  return i >= n ? i - n : i;
}

inline std::unexpected<Error> fail(Error e) {
  return std::unexpected<Error>(e);
}

}  // namespace mrc
