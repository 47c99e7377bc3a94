// Topology economics: closed-form sizing of AI fabrics, no simulation.
//
// Two designs are compared (docs/topology.md has the formulas, the assumptions and the
// analysis of the MRC claims):
//   - multi-plane: every GPU's NIC is split into P ports of L Gb/s; port k goes to plane k; each
//     plane is an independent folded Clos (two tiers in the MRC setting: 8 x 100G, radix 512);
//   - conventional: one plane at the full NIC speed (800G, radix 64), as many tiers as needed.
// Both are the same object here: P planes of a t-tier folded Clos of radix-R switches (P = 1
// for the conventional design), so one function sizes both.
//
// Folded Clos model (per plane, N hosts):
//   - leaves: d = R - ceil(R / (1 + o)) host ports, u = R - d uplinks (o = oversubscription);
//     o = 1 gives d = u = R/2. Switches above the leaves are non-blocking (R/2 down, R/2 up),
//     the top tier uses all R ports downwards.
//   - capacity: 1 tier R hosts (one switch); t >= 2 tiers R * (R/2)^(t-2) * d, i.e. R^2/2,
//     R^3/4, R^4/8 for o = 1. The fewest tiers that fit N are used.
//   - a level-j pod holds R/2 level-(j-1) pods (a level-1 pod is a leaf) and one tier-j switch
//     per up-port of a child; the top tier has one switch per up-port of a level-(t-1) pod.
//     Partial builds (N below capacity) are counted per pod, with ceil. Every leaf cables all
//     u uplinks, so each tier boundary carries leaves * u links. Two rules for a pod with
//     m < R/2 children (the last one; at the top: b pods on R ports):
//       uniform (default): every child has the same number c of parallel links to every
//         switch of the pod (equal-cost paths, as ECMP and spine-indexed EVs assume): c is the
//         largest divisor of a full child's up-port count U with m * c <= R/2, U / c switches;
//       minimum: ceil(up-ports of the pod's children / R/2) switches, parallel-link counts
//         differing by one between pairs (the port-count lower bound).
//     Both agree whenever the counts are powers of two (every case in the MRC claims).
//   - worst-case switch hops (leaf - ... - top - ... - leaf): 2t - 1.
//
// Errors are values: invalid parameters -> Error::kInvalidArgument; N beyond the capacity of
// max_tiers tiers -> Error::kTooBig. check() returns the same verdict with a sentence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "sim/sim_error.h"

namespace mrc::sim {

// ---- one plane: a folded Clos ----------------------------------------------------------

struct ClosParams {
  uint64_t hosts = 0;         // endpoints attached to this plane (one port each)
  uint32_t radix = 0;         // ports per switch, all at the link speed (even, >= 4)
  double oversub = 1.0;       // leaf host ports : leaf uplinks, >= 1; upper tiers non-blocking
  uint32_t max_tiers = 4;     // refuse (kTooBig) rather than build more tiers than this (1..8)
  bool uniform_links = true;  // partial pods: equal parallel links (true) or minimum switches
};

struct ClosSizing {
  uint32_t tiers = 0;
  uint32_t leaf_down = 0;                   // host ports per leaf (d)
  uint32_t leaf_up = 0;                     // uplinks per leaf (u; 0 with one tier)
  std::vector<uint64_t> switches_per_tier;  // [0] = leaves ... [tiers-1] = top tier
  uint64_t switches = 0;
  uint64_t host_links = 0;       // = hosts
  uint64_t switch_links = 0;     // (tiers - 1) * leaves * u
  uint64_t capacity = 0;         // max hosts with this many tiers
  uint32_t worst_case_hops = 0;  // switches on the longest path: 2 * tiers - 1
};

// Leaf host ports d for radix R and oversubscription o (R - ceil(R / (1 + o))).
uint32_t leaf_host_ports(uint32_t radix, double oversub);
// Max hosts of a `tiers`-tier folded Clos whose leaves have d host ports (saturates at
// UINT64_MAX). tiers = 1 is a single switch (R hosts).
uint64_t clos_capacity(uint32_t radix, uint32_t leaf_down, uint32_t tiers);
std::optional<SimError> check(const ClosParams& p);
SimResult<ClosSizing> size_clos(const ClosParams& p);

// ---- assumptions: media, optics packaging, power ---------------------------------------

enum class OpticsPackaging : uint8_t {
  // Every device packs its optical lanes into modules of module_lanes lanes (an 800G OSFP
  // DR8 module carries 8 x 100G lanes and breaks out to 8 x 100G ports): a radix-512 x 100G
  // switch has 64 OSFP cages, not 512. Ports as wide as a module use one module each.
  kBreakout,
  // One pluggable per optical link end at the link speed (e.g. a QSFP28 100G per 100G port).
  kPerPort,
};
const char* packaging_name(OpticsPackaging p);

// Every number a result depends on, with a default. Sources for the defaults are in the
// comments and in docs/topology.md; they are public ranges, not quotes: use your vendor's.
struct Assumptions {
  // Media. Host (NIC-leaf) links are passive copper (DAC: no transceivers) when they are no
  // longer than copper_reach_m, otherwise optical (a transceiver at each end). Switch-switch
  // links are always optical (2 transceivers). 2 m: IEEE 802.3ck 100GBASE-CR1..CR8 (100G per
  // lane passive copper) reach. 30 m: a GPU rack to an end/middle-of-row leaf; AI racks
  // (~100 kW) rarely fit their leaves, and a multi-plane NIC reaches P different leaves.
  double host_link_m = 30.0;
  double copper_reach_m = 2.0;

  OpticsPackaging packaging = OpticsPackaging::kBreakout;
  uint32_t lane_gbps = 100;   // SerDes/optical lane (100G PAM4: 51.2T = 512 lanes)
  uint32_t module_lanes = 8;  // lanes per module (OSFP 800G: 8 x 100G)

  // Power. A 51.2T switch (64 x 800G or 512 x 100G: same ASIC, same 512 x 100G SerDes)
  // without optics. Public figures: ~0.7-0.9 kW for the ASIC class (optical power estimators
  // quoting Tomahawk 5); 913 W typical without transceivers for a 2RU 64-port 51.2T system
  // (UfiSpace S9321-64E datasheet summary); maximum/provisioned power is higher (fans at
  // speed, PSU losses: 2 x 3 kW supplies are common). 1.5 kW sits in the ~1.2-2 kW
  // provisioning class. Same figure for both designs; docs/topology.md shows 0.9 kW too.
  double switch_w = 1500.0;
  // Pluggable transceiver power by module speed (typical/maximum in public datasheets):
  // QSFP28 100G SR4/DR ~2.5-3.5 W (e.g. ProLabs: 3.0 W max short reach); QSFP56 200G FR4
  // ~5-7 W; QSFP-DD/OSFP 400G DR4/FR4 ~8-12 W (datasheets list 10-12 W max); OSFP 800G
  // DR8/2xFR4 ~13-18 W (vendor FAQ: 13-18 W; trade press: 14-20 W per 800G port); 1.6T
  // ~23-30 W (~17 pJ/bit quoted). A module narrower than a table entry takes the next one up.
  double xcvr_100g_w = 3.0;
  double xcvr_200g_w = 5.5;
  double xcvr_400g_w = 10.0;
  double xcvr_800g_w = 15.0;
  double xcvr_1600g_w = 25.0;
  // Per end of a copper host link: 0 for passive DAC (ProLabs lists < 1 W per QSFP28 DAC
  // end); set ~5-12 W for active electrical cables (AEC) at 800G.
  double copper_end_w = 0.0;
};

std::optional<SimError> check(const Assumptions& a);
// Power of one pluggable of `gbps` (the smallest table entry >= gbps); kInvalidArgument
// above 1.6T or for 0.
SimResult<double> transceiver_w(const Assumptions& a, uint32_t gbps);

// ---- a whole design: P planes of a folded Clos -----------------------------------------

struct DesignParams {
  uint64_t gpus = 0;
  uint32_t planes = 1;     // NIC ports = independent planes (1 = conventional)
  uint32_t link_gbps = 0;  // per NIC port, = switch port speed
  uint32_t radix = 0;      // switch ports at link_gbps
  double oversub = 1.0;    // leaf oversubscription (both designs: leaves only)
  uint32_t max_tiers = 4;
  bool uniform_links = true;  // see ClosParams
};

// The MRC claim setting: 8 x 100G planes of radix-512 switches, two tiers.
DesignParams multi_plane_params(uint64_t gpus);
// The conventional baseline: one 800G plane of radix-64 (51.2T) switches, up to four tiers.
DesignParams conventional_params(uint64_t gpus);

struct DesignReport {
  DesignParams params;
  ClosSizing plane;  // one plane (all planes are identical)
  uint32_t tiers = 0;
  uint32_t worst_case_hops = 0;
  uint64_t two_tier_capacity = 0;  // GPUs that fit in two tiers with these switches
  uint64_t switches = 0;           // all planes
  uint64_t host_links = 0;         // gpus * planes
  uint64_t switch_links = 0;
  uint64_t links = 0;
  bool host_links_optical = false;
  uint64_t transceivers = 0;        // optical link ends (a pluggable port per end)
  uint64_t optical_lanes = 0;       // lanes at optical link ends (bandwidth-normalised optics)
  uint64_t optical_modules = 0;     // pluggable modules under the chosen packaging
  uint64_t modules_800g_equiv = 0;  // ceil(optical_lanes * lane_gbps / 800)
  double switch_power_w = 0;
  double optics_power_w = 0;  // transceivers (+ copper ends)
  double power_w = 0;         // switches + optics; NICs excluded (same in both designs)
};

std::optional<SimError> check(const DesignParams& p, const Assumptions& a);
SimResult<DesignReport> size_design(const DesignParams& p, const Assumptions& a);

}  // namespace mrc::sim
