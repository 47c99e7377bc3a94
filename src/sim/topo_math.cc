#include "sim/topo_math.h"

#include <cmath>
#include <limits>
#include <string>

namespace mrc::sim {
namespace {

constexpr uint64_t kMaxHosts = uint64_t{1} << 40;  // keeps every product below 2^64
constexpr uint32_t kMaxRadix = 65536;
constexpr uint32_t kMaxTiers = 8;
constexpr uint32_t kMaxPlanes = 1024;

uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a)
    return std::numeric_limits<uint64_t>::max();
  return a * b;
}

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// Largest divisor of n that is <= limit (limit >= 1, n >= 1).
uint64_t largest_divisor_at_most(uint64_t n, uint64_t limit) {
  for (uint64_t c = std::min(n, limit); c > 1; --c)
    if (n % c == 0) return c;
  return 1;
}

SimError invalid(std::string what) {
  return SimError{Error::kInvalidArgument, std::move(what)};
}

bool bad_real(double v) {
  return !std::isfinite(v) || v < 0;
}

std::string num(uint64_t v) {
  return std::to_string(v);
}

}  // namespace

uint32_t leaf_host_ports(uint32_t radix, double oversub) {
  if (radix == 0 || !std::isfinite(oversub) || oversub < 1.0) return 0;
  // u = ceil(R / (1 + o)); never more oversubscribed than asked for. The small epsilon keeps
  // exact ratios exact (R = 512, o = 3 -> u = 128, not 129).
  const double up = std::ceil(static_cast<double>(radix) / (1.0 + oversub) - 1e-9);
  const auto u = static_cast<uint32_t>(std::max(1.0, up));
  return u >= radix ? 0 : radix - u;
}

uint64_t clos_capacity(uint32_t radix, uint32_t leaf_down, uint32_t tiers) {
  if (tiers == 0 || radix == 0) return 0;
  if (tiers == 1) return radix;
  uint64_t cap = sat_mul(radix, leaf_down);
  for (uint32_t t = 3; t <= tiers; ++t)
    cap = sat_mul(cap, radix / 2);
  return cap;
}

std::optional<SimError> check(const ClosParams& p) {
  if (p.hosts == 0) return invalid("hosts must be at least 1");
  if (p.hosts > kMaxHosts) return invalid("hosts must be at most 2^40");
  if (p.radix < 4 || p.radix % 2 != 0 || p.radix > kMaxRadix)
    return invalid("radix must be even and in [4, 65536], got " + num(p.radix));
  if (!std::isfinite(p.oversub) || p.oversub < 1.0)
    return invalid("oversubscription (leaf host ports : uplinks) must be >= 1");
  const uint32_t d = leaf_host_ports(p.radix, p.oversub);
  if (d == 0 || d >= p.radix)
    return invalid("oversubscription " + std::to_string(p.oversub) + " leaves no uplink on a " +
                   num(p.radix) + "-port leaf");
  if (p.max_tiers < 1 || p.max_tiers > kMaxTiers) return invalid("max_tiers must be in [1, 8]");
  const uint64_t cap = clos_capacity(p.radix, d, p.max_tiers);
  if (p.hosts > cap)
    return SimError{Error::kTooBig, num(p.hosts) + " hosts exceed the " + num(p.max_tiers) +
                                        "-tier capacity of radix " + num(p.radix) + " (" +
                                        num(cap) + " with " + num(d) +
                                        " hosts per leaf); allow more tiers, use a " +
                                        "larger radix or more oversubscription"};
  return std::nullopt;
}

SimResult<ClosSizing> size_clos(const ClosParams& p) {
  if (auto problem = check(p)) return std::unexpected(*problem);
  const uint64_t n = p.hosts;
  const uint64_t r = p.radix;
  const uint64_t half = r / 2;
  ClosSizing s;
  s.host_links = n;

  // One switch takes every host when it can.
  if (n <= r) {
    s.tiers = 1;
    s.leaf_down = p.radix;
    s.leaf_up = 0;
    s.switches_per_tier = {1};
    s.switches = 1;
    s.capacity = r;
    s.worst_case_hops = 1;
    return s;
  }

  s.leaf_down = leaf_host_ports(p.radix, p.oversub);
  s.leaf_up = p.radix - s.leaf_down;
  s.tiers = 2;
  while (clos_capacity(p.radix, s.leaf_down, s.tiers) < n)
    ++s.tiers;  // check() bounds it
  s.capacity = clos_capacity(p.radix, s.leaf_down, s.tiers);
  s.worst_case_hops = 2 * s.tiers - 1;

  const uint64_t leaves = ceil_div(n, s.leaf_down);
  const uint64_t boundary_links = leaves * s.leaf_up;  // links across every tier boundary
  s.switches_per_tier.push_back(leaves);
  uint64_t children = leaves;     // pods of the tier below
  uint64_t child_up = s.leaf_up;  // up-ports of a full child pod
  for (uint32_t tier = 2; tier < s.tiers; ++tier) {
    const uint64_t pods = ceil_div(children, half);
    // A full pod (R/2 children) has one switch per child up-port, one link to each child.
    uint64_t last;
    if (p.uniform_links) {
      const uint64_t last_children = children - (pods - 1) * half;
      last = child_up / largest_divisor_at_most(child_up, half / last_children);
    } else {
      last = ceil_div(boundary_links - (pods - 1) * half * child_up, half);
    }
    s.switches_per_tier.push_back((pods - 1) * child_up + last);
    children = pods;
    child_up *= half;
  }
  s.switches_per_tier.push_back(p.uniform_links
                                    ? child_up / largest_divisor_at_most(child_up, r / children)
                                    : ceil_div(boundary_links, r));

  for (uint64_t v : s.switches_per_tier)
    s.switches += v;
  s.switch_links = static_cast<uint64_t>(s.tiers - 1) * boundary_links;
  return s;
}

const char* packaging_name(OpticsPackaging p) {
  switch (p) {
    case OpticsPackaging::kBreakout:
      return "breakout";
    case OpticsPackaging::kPerPort:
      return "per-port";
  }
  return "?";
}

std::optional<SimError> check(const Assumptions& a) {
  if (bad_real(a.host_link_m) || bad_real(a.copper_reach_m))
    return invalid("cable lengths must be finite and >= 0");
  if (a.lane_gbps == 0) return invalid("lane_gbps must be positive");
  if (a.module_lanes == 0 || a.module_lanes > 64) return invalid("module_lanes must be in [1, 64]");
  if (bad_real(a.switch_w) || bad_real(a.xcvr_100g_w) || bad_real(a.xcvr_200g_w) ||
      bad_real(a.xcvr_400g_w) || bad_real(a.xcvr_800g_w) || bad_real(a.xcvr_1600g_w) ||
      bad_real(a.copper_end_w))
    return invalid("power figures must be finite and >= 0");
  return std::nullopt;
}

SimResult<double> transceiver_w(const Assumptions& a, uint32_t gbps) {
  if (gbps == 0) return sim_fail("a link of 0 Gb/s has no transceiver");
  if (gbps <= 100) return a.xcvr_100g_w;
  if (gbps <= 200) return a.xcvr_200g_w;
  if (gbps <= 400) return a.xcvr_400g_w;
  if (gbps <= 800) return a.xcvr_800g_w;
  if (gbps <= 1600) return a.xcvr_1600g_w;
  return sim_fail("no transceiver above 1600 Gb/s (" + num(gbps) + " Gb/s)");
}

DesignParams multi_plane_params(uint64_t gpus) {
  return DesignParams{
      .gpus = gpus, .planes = 8, .link_gbps = 100, .radix = 512, .oversub = 1.0, .max_tiers = 2};
}

DesignParams conventional_params(uint64_t gpus) {
  return DesignParams{
      .gpus = gpus, .planes = 1, .link_gbps = 800, .radix = 64, .oversub = 1.0, .max_tiers = 4};
}

std::optional<SimError> check(const DesignParams& p, const Assumptions& a) {
  if (auto problem = check(a)) return problem;
  if (p.planes == 0 || p.planes > kMaxPlanes) return invalid("planes must be in [1, 1024]");
  if (p.link_gbps == 0 || p.link_gbps % a.lane_gbps != 0)
    return invalid("link speed " + num(p.link_gbps) + "G must be a positive multiple of the " +
                   num(a.lane_gbps) + "G lane");
  if (p.link_gbps > 1600) return invalid("link speed above 1600G has no transceiver power figure");
  if (sat_mul(p.gpus, p.planes) > kMaxHosts) return invalid("gpus * planes must be at most 2^40");
  // Module speeds that the breakout packaging may need must have a power figure.
  const uint64_t module_gbps = static_cast<uint64_t>(a.module_lanes) * a.lane_gbps;
  if (a.packaging == OpticsPackaging::kBreakout && p.link_gbps < module_gbps && module_gbps > 1600)
    return invalid("a module of " + num(a.module_lanes) + " x " + num(a.lane_gbps) +
                   "G lanes has no transceiver power figure (max 1600G)");
  return check(ClosParams{.hosts = p.gpus,
                          .radix = p.radix,
                          .oversub = p.oversub,
                          .max_tiers = p.max_tiers,
                          .uniform_links = p.uniform_links});
}

namespace {

// Optical modules and their power, device by device.
struct ModuleTally {
  const Assumptions& a;
  uint64_t modules = 0;
  double watts = 0;

  // `count` devices (or link-end groups), each with `lanes` optical lanes of breakout ports.
  void breakout(uint64_t count, uint64_t lanes) {
    if (count == 0 || lanes == 0) return;
    const uint64_t full = lanes / a.module_lanes;
    const uint64_t rem = lanes % a.module_lanes;
    modules += count * (full + (rem != 0 ? 1 : 0));
    watts += static_cast<double>(count * full) * *transceiver_w(a, a.module_lanes * a.lane_gbps);
    if (rem != 0)
      watts +=
          static_cast<double>(count) * *transceiver_w(a, static_cast<uint32_t>(rem) * a.lane_gbps);
  }
  // `ends` link ends, one module each at `gbps`.
  void per_port(uint64_t ends, uint32_t gbps) {
    modules += ends;
    watts += static_cast<double>(ends) * *transceiver_w(a, gbps);
  }
};

}  // namespace

SimResult<DesignReport> size_design(const DesignParams& p, const Assumptions& a) {
  if (auto problem = check(p, a)) return std::unexpected(*problem);
  auto plane = size_clos(ClosParams{.hosts = p.gpus,
                                    .radix = p.radix,
                                    .oversub = p.oversub,
                                    .max_tiers = p.max_tiers,
                                    .uniform_links = p.uniform_links});
  if (!plane) return std::unexpected(plane.error());

  DesignReport r;
  r.params = p;
  r.plane = *plane;
  r.tiers = plane->tiers;
  r.worst_case_hops = plane->worst_case_hops;
  r.two_tier_capacity = clos_capacity(p.radix, leaf_host_ports(p.radix, p.oversub), 2);
  const uint64_t planes = p.planes;
  r.switches = planes * plane->switches;
  r.host_links = planes * plane->host_links;
  r.switch_links = planes * plane->switch_links;
  r.links = r.host_links + r.switch_links;
  r.host_links_optical = a.host_link_m > a.copper_reach_m;

  const uint64_t lanes_per_port = p.link_gbps / a.lane_gbps;
  r.transceivers = 2 * r.switch_links + (r.host_links_optical ? 2 * r.host_links : 0);
  r.optical_lanes = r.transceivers * lanes_per_port;
  r.modules_800g_equiv = ceil_div(r.optical_lanes * a.lane_gbps, 800);

  ModuleTally tally{a};
  if (a.packaging == OpticsPackaging::kPerPort || lanes_per_port >= a.module_lanes) {
    tally.per_port(r.transceivers, p.link_gbps);
  } else {
    // Breakout: count modules device by device (a NIC, a leaf's host side, a leaf's uplink
    // side); above the leaves, lanes are pooled per tier boundary (exact when every switch's
    // used ports fill whole modules, as in all power-of-two designs).
    const uint64_t leaves = plane->switches_per_tier.front();
    if (r.host_links_optical) {
      tally.breakout(p.gpus, planes * lanes_per_port);  // NIC: P ports in one module
      const uint64_t full_leaves = p.gpus / plane->leaf_down;
      const uint64_t last_hosts = p.gpus % plane->leaf_down;
      tally.breakout(planes * full_leaves, plane->leaf_down * lanes_per_port);
      tally.breakout(planes * (last_hosts != 0 ? 1 : 0), last_hosts * lanes_per_port);
    }
    if (plane->tiers >= 2) {
      tally.breakout(planes * leaves, plane->leaf_up * lanes_per_port);  // leaf uplinks
      const uint64_t boundary_lanes = leaves * plane->leaf_up * lanes_per_port;
      // Upper end of the leaf boundary, then both ends of every boundary above it.
      const uint64_t pooled_ends = 1 + 2 * (plane->tiers - 2);
      tally.breakout(planes * pooled_ends, boundary_lanes);
    }
  }
  r.optical_modules = tally.modules;
  r.switch_power_w = static_cast<double>(r.switches) * a.switch_w;
  r.optics_power_w = tally.watts;
  if (!r.host_links_optical)
    r.optics_power_w += static_cast<double>(2 * r.host_links) * a.copper_end_w;
  r.power_w = r.switch_power_w + r.optics_power_w;
  return r;
}

}  // namespace mrc::sim
