// SRv6 micro-SID (uSID) carriers: the destination-address encoding of a source route.
//
// MRC uses the F3216 format (RFC 9800 "Compressed SRv6 Segment List Encoding", NEXT-C-SID
// flavour; OCP MRC 5.7): a 32-bit locator block followed by up to six 16-bit uSIDs. The first
// uSID after the block is the active one.
//
//    0                   1                   2                   3
//    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//   |                    Locator block (32 bits)                    |
//   +-------------------------------+-------------------------------+
//   |        uSID 1 (active)        |            uSID 2             |
//   +-------------------------------+-------------------------------+
//   |            uSID 3             |            uSID 4             |
//   +-------------------------------+-------------------------------+
//   |            uSID 5             |            uSID 6             |
//   +-------------------------------+-------------------------------+
//
// A switch whose uSID is the active one ("End with NEXT-C-SID", RFC 9800 4.1) either shifts
// the remaining uSIDs left by 16 bits, filling with zero, and forwards on the new DA; or, at
// the end of the carrier (no uSID follows the active one), it acts as the segment endpoint:
// it takes the next SRH segment (segments left > 0) or delivers the packet. uSID value 0 is
// the end-of-carrier marker and is never a node's uSID.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "wire/headers.h"

namespace mrc::wire {

inline constexpr int kUsidBlockBytes = 4;
inline constexpr int kUsidBytes = 2;
inline constexpr int kUsidsPerCarrier = (16 - kUsidBlockBytes) / kUsidBytes;  // 6

// A carrier: `block` (big-endian) then `usids` in order, the rest zero. Precondition: at most
// kUsidsPerCarrier uSIDs, none zero (zero ends the carrier); extra uSIDs are dropped (the
// EV module validates lists before they get here).
Ipv6Addr usid_carrier(uint32_t block, std::span<const uint16_t> usids);

// A carrier taken apart. `count` is the number of uSIDs before the first zero one: the hops
// this carrier still routes through (0 for a carrier that is used up).
struct UsidView {
  uint32_t block = 0;
  std::array<uint16_t, kUsidsPerCarrier> usids{};  // all six slots, active first
  int count = 0;

  static UsidView of(const Ipv6Addr& carrier);
  // The uSIDs before the end-of-carrier marker.
  std::span<const uint16_t> active_list() const { return {usids.data(), size_t(count)}; }
  friend bool operator==(const UsidView&, const UsidView&) = default;
};

// The locator block: the first 32 bits, big-endian.
uint32_t usid_block(const Ipv6Addr& carrier);

// The active uSID: bits 32..47 (0 when the carrier is used up).
uint16_t usid_active(const Ipv6Addr& carrier);

// Shift-and-forward: the carrier with the active uSID removed, the following ones moved left
// by 16 bits and the last slot zero-filled. The block is unchanged.
Ipv6Addr usid_shift(const Ipv6Addr& carrier);

// True when no uSID follows the active one (bits 48..127 all zero): the node owning the
// active uSID is this carrier's last, so it must not shift; it ends the segment.
bool usid_is_end_of_carrier(const Ipv6Addr& carrier);

}  // namespace mrc::wire
