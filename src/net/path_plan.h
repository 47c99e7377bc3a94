// The EV list (path set) of one QP towards a peer, from this end's fabric knowledge and the
// peer's per-plane addresses and leaf uSIDs (exchanged in the hello).
//
// Address plan of the namespace fabric (docs/fabric.md): plane p uses the SRv6 locator block
// fcbb:bbPP::/32; leaf l has uSID 0x0001 + l, spine s 0x8000 + s, host h 0x4000 + h; host h's
// port on plane p is fcbb:bbPP:(4000+h)::. The SRv6 path to host b via spine s is the carrier
// fcbb:bbPP:(8000+s):(1+leaf(b)):(4000+b):: (same leaf: fcbb:bbPP:(1+leaf(b)):(4000+b)::), so
// the locator block and host uSID come from the peer's plane address and the EVs of a plane
// enumerate its spines (more EVs than spines repeat spines).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <vector>

#include "common/types.h"
#include "transport/path_set.h"

namespace mrc::net {

struct PlanePaths {
  in6_addr peer_addr{};         // the peer's address on this plane
  uint16_t peer_leaf_usid = 0;  // 0: unknown
  uint16_t local_leaf_usid = 0;
  std::vector<uint16_t> spine_usids;  // this plane's spines (empty: no fabric knowledge)
};

// evs_per_plane EVs on every plane, interleaved (entry i is on plane i % planes), as the
// simulator and ev::make_*_profile order them. `rotation` shifts the spine choice per QP so
// the QPs of a host together cover every spine when EVs < spines.
//   SRV6: the uSID carriers above; without spines or leaf knowledge the peer's plain address
//         (ECMP-routed, every EV the same route).
//   STEV / UDP: ev::make_stev_profile / make_udp_profile, expanded.
// Errors: kInvalidArgument (no planes, evs_per_plane 0, more than 32 planes), EV profile
// errors.
Result<std::vector<PathDesc>> plan_paths(ev::FormatMode mode, uint32_t evs_per_plane,
                                         std::span<const PlanePaths> planes, uint32_t rotation);

}  // namespace mrc::net
