#include "net/path_plan.h"

#include <cstring>

namespace mrc::net {

Result<std::vector<PathDesc>> plan_paths(ev::FormatMode mode, uint32_t evs_per_plane,
                                         std::span<const PlanePaths> planes, uint32_t rotation) {
  const uint32_t P = static_cast<uint32_t>(planes.size());
  if (P == 0 || P > 32 || evs_per_plane == 0) return fail(Error::kInvalidArgument);
  std::vector<PathDesc> out;
  if (mode != ev::FormatMode::kSrv6) {
    auto profile = mode == ev::FormatMode::kUdp
                       ? ev::make_udp_profile(evs_per_plane * P, static_cast<int>(P), 1)
                       : ev::make_stev_profile(evs_per_plane * P, static_cast<int>(P), 1);
    if (!profile) return fail(profile.error());
    auto evs = ev::expand_all(*profile);
    if (!evs) return fail(evs.error());
    for (size_t i = 0; i < evs->size(); ++i)
      out.push_back(PathDesc{(*evs)[i], profile->entries[i].port, profile->entries[i].state});
    return out;
  }
  for (uint32_t e = 0; e < evs_per_plane; ++e) {
    for (uint32_t p = 0; p < P; ++p) {
      const PlanePaths& pl = planes[p];
      const uint8_t* a = pl.peer_addr.s6_addr;
      PathDesc d;
      d.port = static_cast<uint8_t>(p);
      const bool known = pl.peer_leaf_usid != 0 && pl.local_leaf_usid != 0;
      const bool same_leaf = known && pl.peer_leaf_usid == pl.local_leaf_usid;
      if (!known || (!same_leaf && pl.spine_usids.empty())) {
        std::memcpy(d.ev.data(), a, 16);
      } else {
        const uint32_t block = static_cast<uint32_t>(a[0]) << 24 |
                               static_cast<uint32_t>(a[1]) << 16 |
                               static_cast<uint32_t>(a[2]) << 8 | a[3];
        const uint16_t host = static_cast<uint16_t>(a[4] << 8 | a[5]);
        std::vector<uint16_t> usids;
        if (!same_leaf) {
          const size_t S = pl.spine_usids.size();
          usids.push_back(pl.spine_usids[(e + rotation) % S]);
        }
        usids.push_back(pl.peer_leaf_usid);
        usids.push_back(host);
        auto carrier = ev::srv6_carrier(block, usids);
        if (!carrier) return fail(carrier.error());
        d.ev = *carrier;
      }
      out.push_back(d);
    }
  }
  return out;
}

}  // namespace mrc::net
