// Forwarding (part of Simulation, see simulation_impl.h): the egress port a switch picks for a
// packet. SRv6 uSID routes are precomputed (the sender's chosen spine, or fat tree path, rides
// in the packet); ECMP hashes over the uplinks that the routing view still lists (routing
// convergence after a fault). The self-checks walk every path with hop-by-hop uSID processing
// and compare it with the precomputed forwarding (Simulation::check_usid_forwarding).
#include <algorithm>

#include "sim/simulation_impl.h"

namespace mrc::sim {

uint32_t Simulation::Impl::forward(const Switch& sw, const SimPacket& p) {
  if (fat_tree) [[unlikely]]
    return forward_fat_tree(sw, p);
  const uint32_t dst_leaf = p.dst_leaf;
  if (sw.kind == Switch::kSpine) {
    // Spine: the active uSID after its own End is the destination leaf; ECMP spines have one
    // route per leaf too. Parallel links are chosen by the packet's entropy.
    const uint32_t lane = k_parallel > 1 ? mix32(p.entropy ^ sw.index) % k_parallel : 0;
    return dst_leaf * k_parallel + lane;
  }
  if (sw.index == dst_leaf) return p.dst - dst_leaf * H;  // host-facing port
  const uint32_t lane_pick = k_parallel > 1 ? mix32(p.entropy + 7) % k_parallel : 0;
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    // Static uSID route: the spine the sender chose. Never rerouted.
    const uint32_t spine = p.spine == kNoSpine ? 0 : p.spine;  // < S (send_from_host)
    return H + lane_pick * S + spine;
  }
  // ECMP over the uplinks the routing view still lists.
  const uint32_t h =
      mix32((static_cast<uint64_t>(p.entropy) << 32) ^ (static_cast<uint64_t>(p.src) << 20) ^
            p.dst ^ (static_cast<uint64_t>(sw.index + 1) << 52));
  if (route_down_count[sw.plane] == 0) return H + h % U;
  uint32_t alive[1024];
  uint32_t n = 0;
  const size_t base = static_cast<size_t>(sw.plane) * L;
  for (uint32_t u = 0; u < U && n < 1024; ++u) {
    const uint32_t spine = u % S;
    // Usable if our link to the spine is up and the spine still reaches the destination
    // leaf (on the same lane), as routing sees it.
    if (route_down[(base + sw.index) * U + u]) continue;
    if (route_down[(base + dst_leaf) * U + (u / S) * S + spine]) continue;
    alive[n++] = u;
  }
  if (n == 0) return H + h % U;  // no route: the packet dies on a dead link
  return H + alive[h % n];
}

// Whether agg `a` of `pod` still reaches `dst_leaf` as routing sees it: down to it within the
// pod, else through one of its cores whose link to agg `a` of the destination pod is up.
bool Simulation::Impl::ft_agg_reaches(uint32_t pod, uint32_t a, uint32_t dst_leaf) const {
  const uint32_t dst_pod = dst_leaf / half;
  if (route_down[ft_route_leaf_agg(dst_leaf, a)]) return false;
  if (pod == dst_pod) return true;
  for (uint32_t j = 0; j < half; ++j)
    if (!route_down[ft_route_agg_core(pod, a, j)] && !route_down[ft_route_agg_core(dst_pod, a, j)])
      return true;
  return false;
}

template <typename Usable>
uint32_t Simulation::Impl::ft_ecmp_up_port(const Switch& sw, const SimPacket& p,
                                           Usable usable) const {
  const uint32_t h = mix32(
      (static_cast<uint64_t>(p.entropy) << 32) ^ (static_cast<uint64_t>(p.src) << 20) ^ p.dst ^
      (static_cast<uint64_t>(sw.index + 1) << 44) ^ (static_cast<uint64_t>(sw.kind) << 60));
  if (route_down_count[0] == 0) return half + h % half;
  uint32_t alive[1024];
  uint32_t n = 0;
  for (uint32_t u = 0; u < half && n < 1024; ++u)
    if (usable(u)) alive[n++] = u;
  if (n == 0) return half + h % half;  // no route: the packet dies on a dead link
  return half + alive[h % n];
}

// Fat tree: down is unique (core -> the destination pod's agg of its group -> leaf -> host);
// up, SRv6 follows the path the sender chose (leaf: its agg, agg: its core), ECMP hashes per
// switch over the up ports that routing still lists.
uint32_t Simulation::Impl::forward_fat_tree(const Switch& sw, const SimPacket& p) {
  if (ft_tiers == 4) return forward_four_tier(sw, p);
  const uint32_t dst_leaf = p.dst_leaf, dst_pod = dst_leaf / half;
  if (sw.kind == Switch::kCore) return dst_pod;
  const uint32_t pod = sw.index / half;
  if (sw.kind == Switch::kLeaf && sw.index == dst_leaf) return p.dst - dst_leaf * H;
  if (sw.kind == Switch::kAgg && pod == dst_pod) return dst_leaf % half;
  const bool leaf = sw.kind == Switch::kLeaf;
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    const uint32_t path = p.spine == kNoSpine ? 0 : p.spine;  // < half^2 (ft_path)
    return half + (leaf ? path / half : path % half);
  }
  return ft_ecmp_up_port(sw, p, [&](uint32_t u) {
    if (leaf)
      return !route_down[ft_route_leaf_agg(sw.index, u)] && ft_agg_reaches(pod, u, dst_leaf);
    const uint32_t a = sw.index % half;
    return !route_down[ft_route_agg_core(pod, a, u)] &&
           !route_down[ft_route_agg_core(dst_pod, a, u)] &&
           !route_down[ft_route_leaf_agg(dst_leaf, a)];
  });
}

// Four tiers, as routing sees it: local spine `spine` reaches `dst_leaf` down through the
// destination pod's agg of its group when the superpod is the destination's, else through
// one of its cores whose link to the destination superpod's spine of the same group is up.
bool Simulation::Impl::ft4_spine_reaches(uint32_t spine, uint32_t dst_leaf) const {
  const uint32_t sq = half * half, dst_pod = dst_leaf / half, dst_superpod = dst_pod / half;
  const uint32_t local = spine % sq, a = local / half;
  const uint32_t dst_spine = dst_superpod * sq + local;
  // From the destination superpod's spine of this group down to the destination leaf.
  if (route_down[ft_route_agg_core(dst_pod, a, local % half)] ||
      route_down[ft_route_leaf_agg(dst_leaf, a)])
    return false;
  if (spine / sq == dst_superpod) return true;
  for (uint32_t j = 0; j < half; ++j)
    if (!route_down[ft_route_spine_core(spine, j)] &&
        !route_down[ft_route_spine_core(dst_spine, j)])
      return true;
  return false;
}

// Four tiers: agg `a` of `pod` reaches `dst_leaf` down within its pod, else through one of
// the spines of its group (its link to the spine up, and the spine reaching the leaf).
bool Simulation::Impl::ft4_agg_reaches(uint32_t pod, uint32_t a, uint32_t dst_leaf) const {
  if (pod == dst_leaf / half) return !route_down[ft_route_leaf_agg(dst_leaf, a)];
  for (uint32_t j = 0; j < half; ++j)
    if (!route_down[ft_route_agg_core(pod, a, j)] &&
        ft4_spine_reaches((pod / half) * half * half + a * half + j, dst_leaf))
      return true;
  return false;
}

// Four tiers: down is unique (core -> the destination superpod's spine of its group -> the
// destination pod's agg of that group -> leaf -> host); up, SRv6 follows the sender's path
// (leaf: agg path / half^2, agg: spine (path / half) mod half within its group, spine: core
// path mod half), ECMP hashes per switch over the up ports that routing still lists.
uint32_t Simulation::Impl::forward_four_tier(const Switch& sw, const SimPacket& p) {
  const uint32_t dst_leaf = p.dst_leaf, dst_pod = dst_leaf / half, dst_superpod = dst_pod / half;
  const uint32_t sq = half * half;
  switch (sw.kind) {
    case Switch::kCore:
      return dst_superpod;
    case Switch::kSpine:
      if (sw.index / sq == dst_superpod) return dst_pod % half;
      break;
    case Switch::kAgg:
      if (sw.index / half == dst_pod) return dst_leaf % half;
      break;
    default:
      if (sw.index == dst_leaf) return p.dst - dst_leaf * H;
      break;
  }
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    const uint32_t path = p.spine == kNoSpine ? 0 : p.spine;  // < half^3 (ft_path)
    if (sw.kind == Switch::kLeaf) return half + path / sq;
    if (sw.kind == Switch::kAgg) return half + (path / half) % half;
    return half + path % half;
  }
  const uint32_t pod = sw.index / half;
  return ft_ecmp_up_port(sw, p, [&](uint32_t u) {
    if (sw.kind == Switch::kLeaf)
      return !route_down[ft_route_leaf_agg(sw.index, u)] && ft4_agg_reaches(pod, u, dst_leaf);
    if (sw.kind == Switch::kAgg)
      return !route_down[ft_route_agg_core(pod, sw.index % half, u)] &&
             ft4_spine_reaches((pod / half) * sq + (sw.index % half) * half + u, dst_leaf);
    const uint32_t dst_spine = dst_superpod * sq + sw.index % sq;
    return !route_down[ft_route_spine_core(sw.index, u)] &&
           !route_down[ft_route_spine_core(dst_spine, u)] && ft4_spine_reaches(dst_spine, dst_leaf);
  });
}

namespace {

// A uSID self-check that found the walked route and the simulator's forwarding apart.
std::unexpected<SimError> usid_mismatch(HostId src, HostId dst, uint32_t path, const char* what) {
  return sim_fail(Error::kBadExtension, "uSID forwarding check, host " + std::to_string(src) +
                                            " -> " + std::to_string(dst) + " path " +
                                            std::to_string(path) + ": " + what);
}

}  // namespace

SimResult<uint64_t> Simulation::check_usid_forwarding() const {
  const Impl& m = *impl_;
  if (m.cfg.transport.path_mode != PathMode::kSrv6)
    return sim_fail("the uSID forwarding check needs transport.path_mode = \"srv6\"");
  if (m.fat_tree) return m.check_fat_tree_usid();
  uint64_t checked = 0;
  for (uint32_t plane = 0; plane < m.P; ++plane) {
    for (HostId src = 0; src < m.hosts.size(); ++src) {
      for (HostId dst = 0; dst < m.hosts.size(); ++dst) {
        if (src == dst) continue;
        const bool same_leaf = m.leaf_of(src) == m.leaf_of(dst);
        for (uint32_t spine = 0; spine < (same_leaf ? 1 : m.S); ++spine) {
          // The carrier a QP's path would hold (as build_paths writes it).
          std::vector<uint16_t> usids;
          if (!same_leaf) usids.push_back(static_cast<uint16_t>(kSpineUsidBase + spine));
          usids.push_back(static_cast<uint16_t>(kLeafUsidBase + m.leaf_of(dst)));
          usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % m.H));
          wire::Ipv6Addr da = wire::usid_carrier(kLocatorBlock, usids);
          SimPacket p;
          p.src = src;
          p.dst = dst;
          p.dst_leaf = m.leaf_of(dst);
          p.plane = static_cast<uint8_t>(plane);
          p.spine = same_leaf ? kNoSpine : static_cast<uint16_t>(spine);
          p.entropy = mix32(src * 31 + dst);
          // Walk both from the source's leaf until a host port is reached.
          uint32_t sw = m.leaf_index(plane, m.leaf_of(src));
          for (int hop = 0; hop < 4; ++hop) {
            const Switch& x = m.switches[sw];
            const uint16_t mine = static_cast<uint16_t>(
                x.kind == Switch::kLeaf ? kLeafUsidBase + x.index : kSpineUsidBase + x.index);
            if (wire::usid_active(da) == mine) da = wire::usid_shift(da);  // End (next-csid)
            const uint16_t active = wire::usid_active(da);
            uint32_t usid_port;
            if (x.kind == Switch::kLeaf && active >= kHostUsidBase && active < kSpineUsidBase) {
              usid_port = active - kHostUsidBase;  // to the host
            } else if (x.kind == Switch::kLeaf && active >= kSpineUsidBase) {
              usid_port = m.H + (active - kSpineUsidBase);  // up to the spine
            } else if (x.kind == Switch::kSpine && active >= kLeafUsidBase &&
                       active < kHostUsidBase) {
              usid_port = (active - kLeafUsidBase) * m.k_parallel;  // down to the leaf
            } else {
              return usid_mismatch(src, dst, spine, "no static route for the active uSID");
            }
            uint32_t fwd_port = const_cast<Impl&>(m).forward(x, p);
            if (m.k_parallel > 1) {
              // Parallel links are an ECMP choice among equal uSID routes: compare the group.
              if (x.kind == Switch::kSpine) fwd_port -= fwd_port % m.k_parallel;
              if (x.kind == Switch::kLeaf && fwd_port >= m.H)
                fwd_port = m.H + (fwd_port - m.H) % m.S;
            }
            if (usid_port != fwd_port)
              return usid_mismatch(src, dst, spine, "the uSID route and the forwarding differ");
            const Port& out = x.ports[fwd_port];
            if (out.peer_is_host) {
              if (out.peer != dst)
                return usid_mismatch(src, dst, spine, "delivered to another host");
              break;
            }
            sw = out.peer;
          }
          ++checked;
        }
      }
    }
  }
  return checked;
}

// Every distinct path of every ordered pair of a fat tree, walked with hop-by-hop uSID
// processing and with the precomputed forwarding the simulator uses. Each switch: if the
// active uSID is its own, End: with more uSIDs in the carrier, shift (NEXT-C-SID, RFC 9800);
// at the end of the carrier, take the SRH's next segment into the destination address
// (segments_left 1 -> 0, RFC 8754 section 4.3.1.1). Then a static route for the active uSID.
// Four-tier routes between superpods are the only ones with a second carrier (7 uSIDs): the
// destination leaf ends the first one and routes on the host uSID of the segment.
SimResult<uint64_t> Simulation::Impl::check_fat_tree_usid() const {
  uint64_t checked = 0;
  const uint32_t n_paths = ft_num_paths(), sq = half * half;
  const bool four = ft_tiers == 4;
  // uSID ranges per tier (four tiers split the upper half of the aggs' range with the spines).
  const uint16_t agg_end = four ? kFtSpineUsidBase : kCoreUsidBase;
  auto is_host = [](uint16_t u) { return u >= kHostUsidBase && u < kAggUsidBase; };
  auto is_leaf = [](uint16_t u) { return u >= kLeafUsidBase && u < kHostUsidBase; };
  auto is_agg = [&](uint16_t u) { return u >= kAggUsidBase && u < agg_end; };
  auto is_spine = [&](uint16_t u) { return four && u >= kFtSpineUsidBase && u < kCoreUsidBase; };
  auto is_core = [](uint16_t u) { return u >= kCoreUsidBase; };
  for (HostId src = 0; src < hosts.size(); ++src) {
    for (HostId dst = 0; dst < hosts.size(); ++dst) {
      if (src == dst) continue;
      const uint32_t sl = leaf_of(src), dl = leaf_of(dst);
      // Distinct paths: one per core between pods (four tiers: between superpods), one per
      // spine between pods of a superpod, one per agg within a pod, one in a leaf.
      const uint32_t n = sl == dl                     ? 1
                         : sl / half == dl / half     ? half
                         : four && sl / sq == dl / sq ? sq
                                                      : n_paths;
      const uint32_t step = n_paths / n;
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t path = i * step;
        const std::vector<uint16_t> usids = ft_usids(src, dst, path);
        const auto carrier = ev::srv6_carrier(kLocatorBlock, usids);
        if (!carrier) return usid_mismatch(src, dst, path, "more uSIDs than DA + SRH hold");
        // The headers as the sender writes them (ev::apply_to_envelope): the first carrier is
        // the destination address, a second one the SRH's remaining segment.
        wire::Ipv6Addr da{}, segment{};
        std::copy_n(carrier->begin(), 16, da.begin());
        std::copy_n(carrier->begin() + 16, 16, segment.begin());
        bool segment_left = usids.size() > static_cast<size_t>(ev::kUsidsPerCarrier);
        SimPacket p;
        p.src = src;
        p.dst = dst;
        p.dst_leaf = dl;
        p.spine = ft_path(*carrier);
        p.entropy = mix32(src * 31 + dst);
        uint32_t sw = sl;
        bool arrived = false;
        for (uint32_t hop = 0; hop < 2 * ft_tiers - 1 && !arrived; ++hop) {
          const Switch& x = switches[sw];
          const uint16_t mine =
              static_cast<uint16_t>(x.kind == Switch::kLeaf    ? kLeafUsidBase + x.index
                                    : x.kind == Switch::kAgg   ? kAggUsidBase + x.index
                                    : x.kind == Switch::kSpine ? kFtSpineUsidBase + x.index
                                                               : kCoreUsidBase + x.index);
          if (wire::usid_active(da) == mine) {
            if (!wire::usid_is_end_of_carrier(da)) {
              da = wire::usid_shift(da);  // End with NEXT-C-SID
            } else if (segment_left) {
              da = segment;  // End with SRH: segments_left 1 -> 0, DA = segment list[0]
              segment_left = false;
            } else {
              return usid_mismatch(src, dst, path, "the route ends at a switch");
            }
          }
          const uint16_t active = wire::usid_active(da);
          const uint32_t pod = x.index / half;
          uint32_t usid_port = UINT32_MAX;  // no static route for this uSID
          if (x.kind == Switch::kLeaf) {
            if (is_host(active)) {
              usid_port = active - kHostUsidBase;
            } else if (is_agg(active) && (active - kAggUsidBase) / half == pod) {
              usid_port = half + (active - kAggUsidBase) % half;  // up to an agg of the pod
            }
          } else if (x.kind == Switch::kAgg) {
            const uint32_t a = x.index % half;
            if (is_leaf(active) && (active - kLeafUsidBase) / half == pod) {
              usid_port = (active - kLeafUsidBase) % half;  // down to a leaf of the pod
            } else if (!four && is_core(active) && (active - kCoreUsidBase) / half == a &&
                       static_cast<uint32_t>(active - kCoreUsidBase) < cores) {
              usid_port = half + (active - kCoreUsidBase) % half;  // up to a core of the group
            } else if (is_spine(active)) {
              const uint32_t spine = active - kFtSpineUsidBase;
              if (spine / sq == pod / half && (spine % sq) / half == a)
                usid_port = half + spine % half;  // up to a spine of the group
            }
          } else if (x.kind == Switch::kSpine) {
            const uint32_t local = x.index % sq;
            if (is_agg(active)) {
              const uint32_t agg = active - kAggUsidBase;  // pod * half + a
              if (agg / sq == x.index / sq && agg % half == local / half)
                usid_port = (agg / half) % half;  // down to that agg's pod
            } else if (is_core(active) && (active - kCoreUsidBase) / half == local &&
                       static_cast<uint32_t>(active - kCoreUsidBase) < cores) {
              usid_port = half + (active - kCoreUsidBase) % half;  // up to a core of the group
            }
          } else if (four && is_spine(active) &&
                     ((active - kFtSpineUsidBase) % sq) == x.index / half) {
            usid_port = (active - kFtSpineUsidBase) / sq;  // core: down to that superpod
          } else if (!four && is_agg(active) && (active - kAggUsidBase) % half == x.index / half) {
            usid_port = (active - kAggUsidBase) / half;  // core: down to that agg's pod
          }
          if (usid_port == UINT32_MAX)
            return usid_mismatch(src, dst, path, "no static route for the active uSID");
          const uint32_t fwd_port = const_cast<Impl&>(*this).forward(x, p);
          if (usid_port != fwd_port)
            return usid_mismatch(src, dst, path, "the uSID route and the forwarding differ");
          const Port& out = x.ports[fwd_port];
          if (out.peer_is_host) {
            if (out.peer != dst) return usid_mismatch(src, dst, path, "delivered to another host");
            arrived = true;
          }
          sw = out.peer;
        }
        // Arrived, with every uSID of both carriers used (the host's is the last).
        if (!arrived || segment_left)
          return usid_mismatch(src, dst, path, "not delivered with every uSID used");
        ++checked;
      }
    }
  }
  return checked;
}

}  // namespace mrc::sim
