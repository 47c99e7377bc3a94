// The fabric's uSID address plan: one definition shared by the simulator (src/sim), the
// namespace fabric (src/net/fabric.*) and mrc-perf.
//
// Every plane uses the F3216 uSID format (wire/usid.h): a 32-bit locator block, then 16-bit
// uSIDs. The block is fcbb:bb00::/32 (the prefix of the SRv6 uSID examples) with the plane
// number in its last byte (fcbb:bbPP::/32); the simulator uses plane 0's block on every plane,
// since its switches know their plane. Each tier owns a disjoint range of uSID values, so a
// switch never mistakes another tier's uSID for its own (paper 3.3: the source names every hop):
//
//   leaf l     0x0001 + l      (0x0001..0x3fff)
//   host h     0x4000 + h      (0x4000..0x7fff)
//   spine s    0x8000 + s      (0x8000..0xffff)
//
// Fat trees (simulator only) keep leaves and hosts and split the upper half: aggregation
// switches from 0x8000, the third tier's spines from 0xa000 (four-tier trees), cores from
// 0xc000. uSID 0 ends a carrier and is never a node's uSID.
#pragma once

#include <cstdint>

namespace mrc::wire {

inline constexpr uint32_t kFabricLocatorBlock = 0xFCBBBB00u;  // fcbb:bb00::/32
inline constexpr uint16_t kLeafUsidBase = 0x0001;
inline constexpr uint16_t kHostUsidBase = 0x4000;
inline constexpr uint16_t kSpineUsidBase = 0x8000;
inline constexpr uint16_t kAggUsidBase = 0x8000;
inline constexpr uint16_t kFatTreeSpineUsidBase = 0xA000;
inline constexpr uint16_t kCoreUsidBase = 0xC000;

// Counts that keep each tier inside its range.
inline constexpr int kMaxLeafUsids = kHostUsidBase - kLeafUsidBase;   // 0x3fff
inline constexpr int kMaxHostUsids = kSpineUsidBase - kHostUsidBase;  // 0x4000
inline constexpr int kMaxSpineUsids = 0x10000 - kSpineUsidBase;       // 0x8000

// Plane p's locator block: fcbb:bbPP::/32.
inline constexpr uint32_t plane_block(int plane) {
  return kFabricLocatorBlock | uint32_t(plane & 0xFF);
}
inline constexpr uint16_t leaf_usid(int leaf) {
  return uint16_t(kLeafUsidBase + leaf);
}
inline constexpr uint16_t host_usid(int host) {
  return uint16_t(kHostUsidBase + host);
}
inline constexpr uint16_t spine_usid(int spine) {
  return uint16_t(kSpineUsidBase + spine);
}

}  // namespace mrc::wire
