#include "sim/topo_math.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

namespace mrc::sim {
namespace {

using Tiers = std::vector<uint64_t>;

ClosSizing clos(uint64_t hosts, uint32_t radix, double oversub = 1.0, uint32_t max_tiers = 4) {
  auto s = size_clos(
      ClosParams{.hosts = hosts, .radix = radix, .oversub = oversub, .max_tiers = max_tiers});
  EXPECT_TRUE(s.has_value()) << hosts << " hosts, radix " << radix;
  return s.value_or(ClosSizing{});
}

DesignReport design(const DesignParams& p, const Assumptions& a = {}) {
  auto r = size_design(p, a);
  EXPECT_TRUE(r.has_value()) << p.gpus << " GPUs";
  return r.value_or(DesignReport{});
}

// ---- the MRC claim setting -------------------------------------------------------------

TEST(TopoMath, multi_plane__radix_512_two_tiers_hold_131072_hosts_per_plane) {
  EXPECT_EQ(leaf_host_ports(512, 1.0), 256u);
  EXPECT_EQ(clos_capacity(512, 256, 2), 131072u);  // R * R / 2
  const ClosSizing s = clos(131072, 512, 1.0, 2);
  EXPECT_EQ(s.tiers, 2u);
  EXPECT_EQ(s.switches_per_tier, (Tiers{512, 256}));  // 512 leaves, 256 spines per plane
  EXPECT_EQ(s.worst_case_hops, 3u);
  EXPECT_EQ(s.switch_links, 131072u);

  const DesignReport r = design(multi_plane_params(131072));
  EXPECT_EQ(r.params.planes, 8u);
  EXPECT_EQ(r.tiers, 2u);
  EXPECT_EQ(r.switches, 8u * 768u);
  EXPECT_EQ(r.host_links, 8u * 131072u);
  EXPECT_EQ(r.switch_links, 8u * 131072u);
  EXPECT_EQ(r.two_tier_capacity, 131072u);
  EXPECT_EQ(r.worst_case_hops, 3u);
}

TEST(TopoMath, conventional__800g_radix_64_needs_4_tiers_for_131072_and_3_for_8k_32k) {
  EXPECT_EQ(clos_capacity(64, 32, 2), 2048u);     // R^2 / 2
  EXPECT_EQ(clos_capacity(64, 32, 3), 65536u);    // R^3 / 4
  EXPECT_EQ(clos_capacity(64, 32, 4), 2097152u);  // R^4 / 8
  EXPECT_EQ(design(conventional_params(131072)).tiers, 4u);
  EXPECT_EQ(design(conventional_params(131072)).worst_case_hops, 7u);
  EXPECT_EQ(design(conventional_params(65536)).tiers, 3u);
  EXPECT_EQ(design(conventional_params(65537)).tiers, 4u);
  EXPECT_EQ(design(conventional_params(32768)).tiers, 3u);
  EXPECT_EQ(design(conventional_params(8192)).tiers, 3u);
  EXPECT_EQ(design(conventional_params(8192)).worst_case_hops, 5u);
  EXPECT_EQ(design(conventional_params(2048)).tiers, 2u);
}

TEST(TopoMath, conventional__full_fat_trees_have_textbook_switch_counts) {
  // k = 64 three-tier fat tree: 5k^2/4 switches.
  EXPECT_EQ(clos(65536, 64).switches_per_tier, (Tiers{2048, 2048, 1024}));
  EXPECT_EQ(clos(65536, 64).switches, 5120u);
  EXPECT_EQ(clos(2048, 64).switches_per_tier, (Tiers{64, 32}));
  // Full four tiers: (2t-1) (R/2)^(t-1) = 7 * 32^3.
  EXPECT_EQ(clos(2097152, 64).switches, 7u * 32768u);
  // Per tier boundary, one link per host (non-blocking).
  EXPECT_EQ(clos(65536, 64).switch_links, 2u * 65536u);
}

TEST(TopoMath, conventional__partial_builds_count_switches_per_pod) {
  // 32 full pods of 32 leaves + 32 aggregation switches; cores with 2 links to every pod.
  EXPECT_EQ(clos(32768, 64).switches_per_tier, (Tiers{1024, 1024, 512}));
  // 8 pods; cores take 8 links from every pod.
  EXPECT_EQ(clos(8192, 64).switches_per_tier, (Tiers{256, 256, 128}));
  // 4 tiers for 131,072: 128 pods of level 2, 4 pods of level 3 (each with 1024 tier-3
  // switches), 2048 top switches with 16 links to each level-3 pod.
  EXPECT_EQ(clos(131072, 64).switches_per_tier, (Tiers{4096, 4096, 4096, 2048}));
  EXPECT_EQ(clos(131072, 64).switches, 14336u);
}

TEST(TopoMath, claims__switch_and_optics_ratios) {
  // Against a three-tier 800G design the model gives the claimed 3/5 switches and 2/3 optics
  // (optics by bandwidth: 800G-module equivalents), against four tiers 3/7 and 1/2.
  for (uint64_t n : {8192u, 32768u, 65536u}) {
    const DesignReport mp = design(multi_plane_params(n));
    const DesignReport cv = design(conventional_params(n));
    ASSERT_EQ(cv.tiers, 3u);
    EXPECT_DOUBLE_EQ(static_cast<double>(mp.switches) / static_cast<double>(cv.switches), 0.6) << n;
    EXPECT_EQ(3 * mp.modules_800g_equiv, 2 * cv.modules_800g_equiv) << n;
    EXPECT_EQ(3 * mp.optical_modules, 2 * cv.optical_modules) << n;
  }
  const DesignReport mp = design(multi_plane_params(131072));
  const DesignReport cv = design(conventional_params(131072));
  EXPECT_EQ(7 * mp.switches, 3 * cv.switches);
  EXPECT_EQ(2 * mp.optical_modules, cv.optical_modules);
  // Counted as pluggable ports (one per 100G link end) the multi-plane design has more.
  EXPECT_GT(mp.transceivers, cv.transceivers);
  EXPECT_EQ(mp.transceivers, 2u * (8u * 131072u + 8u * 131072u));
  EXPECT_EQ(cv.transceivers, 2u * (131072u + 3u * 131072u));
}

TEST(TopoMath, optics__breakout_modules_and_power) {
  const Assumptions a;  // defaults: optical host links, breakout, 15 W per 800G module
  const DesignReport mp = design(multi_plane_params(8192), a);
  // Per GPU: 1 NIC module, 1/8 of a leaf host-side module, 1/8 + 1/8 for the leaf-spine link
  // in each of 8 planes = 4 modules.
  EXPECT_EQ(mp.optical_modules, 4u * 8192u);
  EXPECT_EQ(mp.optical_lanes, 32u * 8192u);
  EXPECT_DOUBLE_EQ(mp.switch_power_w, 384 * a.switch_w);
  EXPECT_DOUBLE_EQ(mp.optics_power_w, 4.0 * 8192 * a.xcvr_800g_w);
  EXPECT_DOUBLE_EQ(mp.power_w, mp.switch_power_w + mp.optics_power_w);

  Assumptions per_port = a;
  per_port.packaging = OpticsPackaging::kPerPort;
  const DesignReport pp = design(multi_plane_params(8192), per_port);
  EXPECT_EQ(pp.optical_modules, pp.transceivers);
  EXPECT_DOUBLE_EQ(pp.optics_power_w, static_cast<double>(pp.transceivers) * a.xcvr_100g_w);
  // 800G ports fill a module either way.
  const DesignReport cv = design(conventional_params(8192), a);
  const DesignReport cv_pp = design(conventional_params(8192), per_port);
  EXPECT_EQ(cv.optical_modules, cv.transceivers);
  EXPECT_DOUBLE_EQ(cv.optics_power_w, cv_pp.optics_power_w);
}

TEST(TopoMath, optics__copper_host_links_have_no_transceivers) {
  Assumptions a;
  a.host_link_m = 1.5;  // within the 2 m DAC reach
  a.copper_end_w = 0.25;
  const DesignReport mp = design(multi_plane_params(8192), a);
  EXPECT_FALSE(mp.host_links_optical);
  EXPECT_EQ(mp.transceivers, 2u * mp.switch_links);
  EXPECT_EQ(mp.optical_modules, 2u * 8192u);  // leaf uplink side + spine side
  EXPECT_DOUBLE_EQ(mp.optics_power_w, 2.0 * 8192 * a.xcvr_800g_w + 2.0 * 8 * 8192 * 0.25);
  a.host_link_m = 2.0;  // exactly at the reach: still copper
  EXPECT_FALSE(design(conventional_params(8192), a).host_links_optical);
  a.host_link_m = 2.01;
  EXPECT_TRUE(design(conventional_params(8192), a).host_links_optical);
}

TEST(TopoMath, transceiver_w__power_table_entries_and_errors) {
  const Assumptions a;
  EXPECT_DOUBLE_EQ(*transceiver_w(a, 100), a.xcvr_100g_w);
  EXPECT_DOUBLE_EQ(*transceiver_w(a, 50), a.xcvr_100g_w);  // next entry up
  EXPECT_DOUBLE_EQ(*transceiver_w(a, 300), a.xcvr_400g_w);
  EXPECT_DOUBLE_EQ(*transceiver_w(a, 800), a.xcvr_800g_w);
  EXPECT_DOUBLE_EQ(*transceiver_w(a, 1600), a.xcvr_1600g_w);
  EXPECT_EQ(transceiver_w(a, 0).error().code, Error::kInvalidArgument);
  EXPECT_EQ(transceiver_w(a, 3200).error().code, Error::kInvalidArgument);
}

// ---- edge cases ------------------------------------------------------------------------

TEST(TopoMath, edge__hosts_not_a_multiple_of_the_leaf_size) {
  // 1000 hosts on radix 64: 32 leaves (the last with 8 hosts), each leaf cables all 32
  // uplinks; 16 spines with 2 links to every leaf.
  const ClosSizing s = clos(1000, 64);
  EXPECT_EQ(s.tiers, 2u);
  EXPECT_EQ(s.switches_per_tier, (Tiers{32, 16}));
  EXPECT_EQ(s.host_links, 1000u);
  EXPECT_EQ(s.switch_links, 32u * 32u);
  EXPECT_EQ(clos(64, 64).switches_per_tier, (Tiers{1}));     // fits one switch
  EXPECT_EQ(clos(65, 64).switches_per_tier, (Tiers{3, 2}));  // 16 links per leaf-spine pair

  // One leaf more than 32: equal parallel links (c | 256, 33 c <= 512 -> c = 8) need 32
  // spines; the port-count minimum is 17 (links per pair 15 or 16).
  EXPECT_EQ(clos(8292, 512).switches_per_tier, (Tiers{33, 32}));
  auto min = size_clos(ClosParams{.hosts = 8292, .radix = 512, .uniform_links = false});
  ASSERT_TRUE(min.has_value());
  EXPECT_EQ(min->switches_per_tier, (Tiers{33, 17}));
  EXPECT_EQ(min->switch_links, 33u * 256u);

  // Three tiers, the last pod holding a single leaf: one aggregation switch for it; 64 cores
  // with 16 links per pod (uniform) or 33 cores (minimum).
  EXPECT_EQ(clos(2049, 64).switches_per_tier, (Tiers{65, 65, 64}));
  auto min3 = size_clos(ClosParams{.hosts = 2049, .radix = 64, .uniform_links = false});
  ASSERT_TRUE(min3.has_value());
  EXPECT_EQ(min3->switches_per_tier, (Tiers{65, 65, 33}));

  // A partly filled leaf in the multi-plane design: its host-side module is counted whole.
  const DesignReport r = design(multi_plane_params(8292));
  // NIC 8292 + leaf host side (32 full leaves x 32 modules + 1 partial leaf: 100 lanes -> 13)
  // per plane + leaf uplinks 33 x 32 + spine side 33 x 256 / 8, per plane.
  EXPECT_EQ(r.optical_modules, 8292u + 8u * (32u * 32u + 13u) + 8u * (33u * 32u + 33u * 32u));
}

TEST(TopoMath, edge__single_switch_and_tiny_fabrics) {
  const ClosSizing s = clos(64, 64);
  EXPECT_EQ(s.tiers, 1u);
  EXPECT_EQ(s.switches, 1u);
  EXPECT_EQ(s.switch_links, 0u);
  EXPECT_EQ(s.worst_case_hops, 1u);
  EXPECT_EQ(clos(1, 4).switches, 1u);
  const DesignReport r = design(DesignParams{
      .gpus = 8, .planes = 8, .link_gbps = 100, .radix = 512, .oversub = 1.0, .max_tiers = 2});
  EXPECT_EQ(r.switches, 8u);
  EXPECT_EQ(r.switch_links, 0u);
  EXPECT_EQ(r.optical_modules, 8u + 8u);  // one NIC module each, one leaf module per plane
}

TEST(TopoMath, edge__oversubscription) {
  EXPECT_EQ(leaf_host_ports(512, 3.0), 384u);
  EXPECT_EQ(leaf_host_ports(512, 2.0), 341u);  // 171 uplinks: never worse than 2:1
  EXPECT_EQ(leaf_host_ports(64, 1.0), 32u);
  // 3:1 leaves put 196,608 hosts per plane in two tiers.
  EXPECT_EQ(clos_capacity(512, 384, 2), 196608u);
  const ClosSizing s = clos(196608, 512, 3.0, 2);
  EXPECT_EQ(s.switches_per_tier, (Tiers{512, 128}));
  EXPECT_EQ(s.switch_links, 512u * 128u);
  // 131,072 hosts at 3:1: 342 leaves with 128 uplinks each; spines with one link per leaf
  // (uniform) or 86 spines with one or two links per leaf (minimum).
  EXPECT_EQ(clos(131072, 512, 3.0, 2).switches_per_tier, (Tiers{342, 128}));
  auto min = size_clos(ClosParams{
      .hosts = 131072, .radix = 512, .oversub = 3.0, .max_tiers = 2, .uniform_links = false});
  ASSERT_TRUE(min.has_value());
  EXPECT_EQ(min->switches_per_tier, (Tiers{342, 86}));
  // Odd uplink counts: 8192 hosts at 2:1 -> 25 leaves x 171 uplinks, c = 19 -> 9 spines.
  EXPECT_EQ(clos(8192, 512, 2.0, 2).switches_per_tier, (Tiers{25, 9}));
  // Oversubscription only at the leaves: the conventional 3-tier capacity grows by d.
  EXPECT_EQ(clos_capacity(64, 48, 3), 64u * 32u * 48u);
}

TEST(TopoMath, edge__beyond_capacity_is_too_big_with_a_reason) {
  const ClosParams p{.hosts = 131073, .radix = 512, .oversub = 1.0, .max_tiers = 2};
  EXPECT_EQ(size_clos(p).error().code, Error::kTooBig);
  auto problem = check(p);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->code, Error::kTooBig);
  EXPECT_NE(problem->message.find("131072"), std::string::npos) << problem->message;
  EXPECT_EQ(size_design(multi_plane_params(131073), Assumptions{}).error().code, Error::kTooBig);
  // With a third tier allowed it is a three-tier multi-plane fabric.
  DesignParams three = multi_plane_params(131073);
  three.max_tiers = 3;
  EXPECT_EQ(design(three).tiers, 3u);
  EXPECT_EQ(design(three).worst_case_hops, 5u);
  // Beyond four tiers of radix 64.
  EXPECT_EQ(size_design(conventional_params(2097153), Assumptions{}).error().code, Error::kTooBig);
}

TEST(TopoMath, edge__invalid_inputs_are_errors) {
  const auto bad = [](ClosParams p) {
    auto r = size_clos(p);
    return !r.has_value() && r.error().code == Error::kInvalidArgument && check(p).has_value();
  };
  EXPECT_TRUE(bad({.hosts = 0, .radix = 64}));
  EXPECT_TRUE(bad({.hosts = 10, .radix = 63}));  // odd
  EXPECT_TRUE(bad({.hosts = 10, .radix = 2}));
  EXPECT_TRUE(bad({.hosts = 10, .radix = 64, .oversub = 0.5}));
  EXPECT_TRUE(bad({.hosts = 10, .radix = 64, .oversub = NAN}));
  EXPECT_TRUE(bad({.hosts = 10, .radix = 64, .oversub = INFINITY}));
  EXPECT_EQ(leaf_host_ports(64, 1000.0), 63u);  // extreme ratios keep one uplink
  EXPECT_TRUE(bad({.hosts = 10, .radix = 64, .oversub = 1, .max_tiers = 0}));
  EXPECT_TRUE(bad({.hosts = 10, .radix = 64, .oversub = 1, .max_tiers = 9}));
  EXPECT_TRUE(bad({.hosts = (uint64_t{1} << 40) + 1, .radix = 64}));

  const auto bad_design = [](DesignParams p, Assumptions a = {}) {
    auto r = size_design(p, a);
    return !r.has_value() && r.error().code == Error::kInvalidArgument && check(p, a).has_value();
  };
  DesignParams p = multi_plane_params(8192);
  p.planes = 0;
  EXPECT_TRUE(bad_design(p));
  p = multi_plane_params(8192);
  p.link_gbps = 150;  // not a whole number of 100G lanes
  EXPECT_TRUE(bad_design(p));
  p.link_gbps = 3200;
  EXPECT_TRUE(bad_design(p));
  Assumptions a;
  a.switch_w = -1;
  EXPECT_TRUE(bad_design(multi_plane_params(8192), a));
  a = {};
  a.lane_gbps = 0;
  EXPECT_TRUE(bad_design(multi_plane_params(8192), a));
  a = {};
  a.host_link_m = INFINITY;
  EXPECT_TRUE(bad_design(multi_plane_params(8192), a));
}

// ---- properties ------------------------------------------------------------------------

RC_GTEST_PROP(TopoMath, prop__sizing_is_consistent, ()) {
  const uint32_t radix = 2 * *rc::gen::inRange<uint32_t>(2, 257);
  const double oversub = *rc::gen::element(1.0, 1.5, 2.0, 3.0);
  const uint32_t d = leaf_host_ports(radix, oversub);
  RC_PRE(d > 0 && d < radix);
  const uint32_t max_tiers = *rc::gen::inRange<uint32_t>(1, 5);
  const uint64_t cap = clos_capacity(radix, d, max_tiers);
  const uint64_t hosts = *rc::gen::inRange<uint64_t>(1, std::min<uint64_t>(cap, 1u << 22) + 1);
  const bool uniform = *rc::gen::arbitrary<bool>();
  auto s = size_clos(ClosParams{.hosts = hosts,
                                .radix = radix,
                                .oversub = oversub,
                                .max_tiers = max_tiers,
                                .uniform_links = uniform});
  RC_ASSERT(s.has_value());
  RC_ASSERT(s->tiers <= max_tiers);
  RC_ASSERT(hosts <= s->capacity);
  // Fewest tiers: one tier fewer would not fit.
  if (s->tiers > 1) RC_ASSERT(hosts > clos_capacity(radix, d, s->tiers - 1));
  RC_ASSERT(s->switches_per_tier.size() == s->tiers);
  uint64_t total = 0;
  for (uint64_t v : s->switches_per_tier)
    total += v;
  RC_ASSERT(total == s->switches);
  RC_ASSERT(s->worst_case_hops == 2 * s->tiers - 1);
  if (s->tiers >= 2) {
    const uint64_t leaves = s->switches_per_tier.front();
    RC_ASSERT(leaves * s->leaf_down >= hosts);
    RC_ASSERT((leaves - 1) * s->leaf_down < hosts);
    // Enough switch ports at every tier boundary: the top tier takes leaves * u links on
    // R ports each, middle tiers on R/2 down-ports each.
    const uint64_t links = leaves * s->leaf_up;
    RC_ASSERT(s->switches_per_tier.back() * radix >= links);
    for (size_t t = 1; t + 1 < s->switches_per_tier.size(); ++t)
      RC_ASSERT(s->switches_per_tier[t] * (radix / 2) >= links);
    RC_ASSERT(s->switch_links == (s->tiers - 1) * links);
  }
  // The port-count rule never needs more switches than the uniform one, and the two agree
  // on full builds.
  auto other = size_clos(ClosParams{.hosts = hosts,
                                    .radix = radix,
                                    .oversub = oversub,
                                    .max_tiers = max_tiers,
                                    .uniform_links = !uniform});
  RC_ASSERT(other.has_value());
  const uint64_t min_sw = uniform ? other->switches : s->switches;
  const uint64_t uni_sw = uniform ? s->switches : other->switches;
  RC_ASSERT(min_sw <= uni_sw);
  if (hosts == s->capacity) RC_ASSERT(min_sw == uni_sw);
}

}  // namespace
}  // namespace mrc::sim
