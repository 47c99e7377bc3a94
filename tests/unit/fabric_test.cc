// Tests for net/fabric.h, the PLAN half (no root needed): address plan, names, routes walked
// hop by hop through a model of the kernel's forwarding, command lines, faults, description.
// The live half (namespaces, kernel forwarding, faults) is tests/unit/fabric_live_test.cc.
#include "net/fabric.h"
#include "net/fabric_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "wire/usid.h"

namespace mrc::net {
namespace {

FabricSpec small_spec() {
  FabricSpec s;
  s.name = "t";
  s.hosts = 4;
  s.planes = 2;
  s.leaves = 2;
  s.spines = 2;
  return s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// ---------------------------------------------------------------------------------------------
// Shape and address plan

TEST(FabricSpec, validate__accepts_the_default_and_rejects_bad_shapes) {
  EXPECT_TRUE(validate(FabricSpec{}).has_value());
  auto bad = [](auto mutate) {
    FabricSpec s;
    mutate(s);
    return !validate(s).has_value();
  };
  EXPECT_TRUE(bad([](FabricSpec& s) { s.name = ""; }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.name = "a b"; }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.name = "x;rm"; }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.name = std::string(33, 'a'); }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.hosts = 1; }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.planes = 0; }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.planes = 257; }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.spines = 0; }));
  EXPECT_TRUE(bad([](FabricSpec& s) { s.leaves = 5; }));  // more leaves than hosts
  EXPECT_TRUE(bad([](FabricSpec& s) { s.mtu = 1200; }));
  EXPECT_FALSE(bad([](FabricSpec& s) { s.name = "mrc_2-b"; }));
  EXPECT_FALSE(bad([](FabricSpec& s) { s.planes = 256; }));
}

TEST(FabricPlan, leaf_of_host__splits_hosts_evenly_over_leaves) {
  FabricSpec s = small_spec();
  EXPECT_EQ(hosts_per_leaf(s), 2);
  EXPECT_EQ(leaf_of_host(s, 0), 0);
  EXPECT_EQ(leaf_of_host(s, 1), 0);
  EXPECT_EQ(leaf_of_host(s, 2), 1);
  EXPECT_EQ(leaf_of_host(s, 3), 1);
  s.hosts = 5;  // ceil(5/2) = 3 per leaf
  EXPECT_EQ(leaf_of_host(s, 2), 0);
  EXPECT_EQ(leaf_of_host(s, 3), 1);
  EXPECT_EQ(leaf_of_host(s, 4), 1);
}

TEST(FabricPlan, plan_fabric__usids_and_blocks_follow_the_address_plan) {
  EXPECT_EQ(plane_block(0), 0xFCBBBB00u);
  EXPECT_EQ(plane_block(1), 0xFCBBBB01u);
  EXPECT_EQ(plane_block(255), 0xFCBBBBFFu);
  EXPECT_EQ(leaf_usid(0), 0x0001);
  EXPECT_EQ(leaf_usid(3), 0x0004);
  EXPECT_EQ(spine_usid(0), 0x8000);
  EXPECT_EQ(spine_usid(7), 0x8007);
  EXPECT_EQ(host_usid(0), 0x4000);
  EXPECT_EQ(host_usid(18), 0x4012);
}

TEST(FabricPlan, srv6_address__host_and_srv6_addresses_follow_the_address_plan) {
  const FabricSpec s = small_spec();
  EXPECT_EQ(format_ipv6(host_address(0, 0)), "fcbb:bb00:4000::");
  EXPECT_EQ(format_ipv6(host_address(1, 2)), "fcbb:bb01:4002::");
  EXPECT_EQ(format_ipv6(host_address(255, 3)), "fcbb:bbff:4003::");
  // host 3 sits on leaf 1 (uSID 0x0002).
  EXPECT_EQ(format_ipv6(srv6_address(s, 0, 1, 3)), "fcbb:bb00:8001:2:4003::");
  EXPECT_EQ(format_ipv6(srv6_address(s, 1, 0, 0)), "fcbb:bb01:8000:1:4000::");
  EXPECT_EQ(format_ipv6(srv6_address(s, 0, std::nullopt, 3)), "fcbb:bb00:2:4003::");
  // The carrier seen by the wire functions: block, then spine, leaf, host uSIDs.
  const auto v = wire::UsidView::of(srv6_address(s, 1, 1, 2));
  EXPECT_EQ(v.block, 0xFCBBBB01u);
  ASSERT_EQ(v.count, 3);
  EXPECT_EQ(v.usids[0], 0x8001);
  EXPECT_EQ(v.usids[1], 0x0002);
  EXPECT_EQ(v.usids[2], 0x4002);
}

TEST(FabricPlan, parse_ipv6__round_trips_format_ipv6) {
  const auto a = parse_ipv6("fcbb:bb01:8000:2:4003::");
  ASSERT_TRUE(a);
  EXPECT_EQ(format_ipv6(*a), "fcbb:bb01:8000:2:4003::");
  EXPECT_FALSE(parse_ipv6("fcbb::zz"));
  EXPECT_FALSE(parse_ipv6(""));
}

TEST(FabricPlan, host_id__names_hosts_switches_and_links) {
  EXPECT_EQ(host_id(2), "h2");
  EXPECT_EQ(leaf_id(1, 0), "p1-l0");
  EXPECT_EQ(spine_id(0, 3), "p0-s3");
  EXPECT_EQ(host_link_name(2, 1), "h2-p1");
  EXPECT_EQ(fabric_link_name(0, 1, 3), "p0-l1-s3");
}

TEST(FabricPlan, is_fabric_namespace__matches_by_exact_pattern) {
  EXPECT_TRUE(is_fabric_namespace("mrc", "mrc-h0"));
  EXPECT_TRUE(is_fabric_namespace("mrc", "mrc-h12"));
  EXPECT_TRUE(is_fabric_namespace("mrc", "mrc-p0-l1"));
  EXPECT_TRUE(is_fabric_namespace("mrc", "mrc-p12-s3"));
  EXPECT_FALSE(is_fabric_namespace("mrc", "mrc-x-h0"));  // fabric "mrc-x"
  EXPECT_FALSE(is_fabric_namespace("mrc", "mrc-h"));
  EXPECT_FALSE(is_fabric_namespace("mrc", "mrc-hx"));
  EXPECT_FALSE(is_fabric_namespace("mrc", "mrc-p0-x1"));
  EXPECT_FALSE(is_fabric_namespace("mrc", "mrc-p0"));
  EXPECT_FALSE(is_fabric_namespace("mrc", "mrch0"));
  EXPECT_FALSE(is_fabric_namespace("mrc", "other-h0"));
  EXPECT_FALSE(is_fabric_namespace("mrc", "mrc"));
  EXPECT_TRUE(is_fabric_namespace("a-p0", "a-p0-h1"));
  EXPECT_FALSE(is_fabric_namespace("a", "a-p0-h1"));  // belongs to fabric "a-p0"
}

// ---------------------------------------------------------------------------------------------
// The plan

TEST(FabricPlan, plan_fabric__nodes_links_and_names) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->nodes.size(), 4u + 2 * (2 + 2));
  EXPECT_EQ(plan->links.size(), 4u * 2 + 2 * 2 * 2);
  std::set<std::string> namespaces;
  for (const auto& n : plan->nodes) {
    EXPECT_TRUE(n.ns.starts_with("t-")) << n.ns;
    EXPECT_TRUE(is_fabric_namespace("t", n.ns)) << n.ns;
    EXPECT_TRUE(namespaces.insert(n.ns).second) << n.ns;
  }
  const Node* s1 = plan->node("p1-s1");
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->ns, "t-p1-s1");
  EXPECT_EQ(s1->usid, 0x8001);
  const Link* hl = plan->link("h2-p1");
  ASSERT_NE(hl, nullptr);
  EXPECT_EQ(hl->upper.ns, "t-p1-l1");
  EXPECT_EQ(hl->upper.ifname, "h2");
  EXPECT_EQ(hl->upper.address, "fd00:1:4002::1/64");
  EXPECT_EQ(hl->lower.ns, "t-h2");
  EXPECT_EQ(hl->lower.ifname, "p1");
  EXPECT_EQ(hl->lower.address, "fd00:1:4002::2/64");
  const Link* fl = plan->link("p0-l1-s0");
  ASSERT_NE(fl, nullptr);
  EXPECT_EQ(fl->upper.ns, "t-p0-s0");
  EXPECT_EQ(fl->upper.ifname, "l1");
  EXPECT_EQ(fl->upper.address, "fd00:0:8000:2::1/64");
  EXPECT_EQ(fl->lower.ns, "t-p0-l1");
  EXPECT_EQ(fl->lower.ifname, "s0");
  EXPECT_EQ(fl->lower.address, "fd00:0:8000:2::2/64");
  EXPECT_EQ(plan->link("p0-l2-s0"), nullptr);
}

TEST(FabricPlan, plan_fabric__interface_names_fit_and_names_addresses_and_macs_are_unique) {
  FabricSpec s = small_spec();
  s.hosts = 1000;
  s.leaves = 40;
  s.spines = 20;
  s.planes = 1;
  auto plan = plan_fabric(s);
  ASSERT_TRUE(plan) << plan.error().message;
  std::map<std::string, std::set<std::string>> names;
  std::set<std::string> ips;
  std::set<std::string> macs;
  for (const auto& l : plan->links) {
    for (const LinkEnd* e : {&l.upper, &l.lower}) {
      EXPECT_LE(e->ifname.size(), 15u) << e->ifname;  // IFNAMSIZ - 1
      EXPECT_TRUE(names[e->ns].insert(e->ifname).second) << e->ns << " " << e->ifname;
      EXPECT_TRUE(ips.insert(e->ip).second) << e->ip;
      EXPECT_TRUE(macs.insert(e->mac).second) << e->mac;
      // Locally administered unicast: bit 1 of the first octet set, bit 0 clear.
      EXPECT_EQ(std::stoi(e->mac.substr(0, 2), nullptr, 16) & 0x03, 0x02) << e->mac;
    }
  }
}

TEST(FabricPlan, plan_fabric__addresses_include_the_host_identity) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  int found = 0;
  for (const auto& a : plan->addresses)
    if (a.ns == "t-h3" && a.ifname == "p1") {
      EXPECT_TRUE(a.cidr == "fcbb:bb01:4003::/128" || a.cidr == "fd00:1:4003::2/64") << a.cidr;
      ++found;
    }
  EXPECT_EQ(found, 2);
}

// A model of the kernel's IPv6 forwarding over the plan: the switch's uN endpoint first (the
// eBPF plane rewrites before routing; the kernel's End route is the longest match for the
// SID), shifting with usid_shift, then longest prefix match over each namespace's routes and
// addresses, nexthops resolved to the link whose far end owns the address. Returns the links
// crossed, or an error string. `choose` picks among ECMP nexthops.
struct Walk {
  std::vector<std::string> links;
  std::string error;
};

bool prefix_match(const std::string& prefix, const wire::Ipv6Addr& a, int* len_out) {
  const size_t slash = prefix.find('/');
  const auto p = parse_ipv6(prefix.substr(0, slash));
  const int len = std::stoi(prefix.substr(slash + 1));
  if (!p) return false;
  for (int bit = 0; bit < len; ++bit) {
    const int byte = bit / 8, mask = 0x80 >> (bit % 8);
    if (((*p)[size_t(byte)] ^ a[size_t(byte)]) & mask) return false;
  }
  *len_out = len;
  return true;
}

Walk walk(const FabricPlan& plan, const std::string& from_ns, wire::Ipv6Addr da, size_t choose,
          const std::set<std::string>& down_links = {}) {
  Walk w;
  std::string ns = from_ns;
  for (int hops = 0; hops < 16; ++hops) {
    // Local delivery: the DA is assigned here.
    for (const auto& a : plan.addresses)
      if (a.ns == ns && a.cidr.substr(0, a.cidr.find('/')) == format_ipv6(da)) return w;
    const UsidEndpoint* endpoint = nullptr;
    for (const auto& e : plan.usid_endpoints) {
      int len = 0;
      if (e.ns == ns && prefix_match(e.prefix, da, &len)) endpoint = &e;
    }
    if (endpoint) {
      if (wire::usid_is_end_of_carrier(da)) {
        w.error = "End at the end of the carrier in " + ns;
        return w;
      }
      da = wire::usid_shift(da);
      continue;  // looked up again in the same namespace
    }
    const Route* best = nullptr;
    int best_len = -1;
    for (const auto& r : plan.routes) {
      int len = 0;
      if (r.ns == ns && prefix_match(r.prefix, da, &len) && len > best_len) {
        best = &r;
        best_len = len;
      }
    }
    if (!best) {
      w.error = "no route in " + ns + " for " + format_ipv6(da);
      return w;
    }
    if (best->kind == RouteKind::kSeg6End) {
      w.error = "End route without an endpoint in " + ns;
      return w;
    }
    const Nexthop& nh = best->nexthops[choose % best->nexthops.size()];
    const Link* crossed = nullptr;
    for (const auto& l : plan.links) {
      const LinkEnd& here = l.upper.ns == ns ? l.upper : l.lower;
      const LinkEnd& there = l.upper.ns == ns ? l.lower : l.upper;
      if ((l.upper.ns == ns || l.lower.ns == ns) && here.ifname == nh.dev && there.ip == nh.via)
        crossed = &l;
    }
    if (!crossed) {
      w.error = "nexthop " + nh.via + " dev " + nh.dev + " is not on a link of " + ns;
      return w;
    }
    if (down_links.contains(crossed->name)) {
      w.error = "down";
      return w;
    }
    w.links.push_back(crossed->name);
    ns = crossed->upper.ns == ns ? crossed->lower.ns : crossed->upper.ns;
  }
  w.error = "loop";
  return w;
}

FabricSpec on(DataPlane d, FabricSpec s = small_spec()) {
  s.dataplane = d;
  return s;
}

TEST(FabricPlan, plan_fabric__every_srv6_path_is_forwarded_through_exactly_its_links) {
  FabricSpec larger = small_spec();
  larger.hosts = 7;
  larger.leaves = 3;
  larger.spines = 3;
  larger.planes = 3;
  for (const FabricSpec& s :
       {small_spec(), larger, on(DataPlane::kBpf), on(DataPlane::kBpf, larger)}) {
    auto plan = plan_fabric(s);
    ASSERT_TRUE(plan) << plan.error().message;
    for (int p = 0; p < s.planes; ++p) {
      for (int a = 0; a < s.hosts; ++a) {
        for (int b = 0; b < s.hosts; ++b) {
          if (a == b) continue;
          const std::string src = plan->nodes[size_t(a)].ns;
          for (int sp = 0; sp < s.spines; ++sp) {
            const Walk w = walk(*plan, src, srv6_address(s, p, sp, b), 0);
            EXPECT_EQ(w.error, "") << a << "->" << b << " p" << p << " s" << sp;
            EXPECT_EQ(w.links, path_links(s, p, a, b, sp)) << a << "->" << b;
          }
          if (leaf_of_host(s, a) == leaf_of_host(s, b)) {
            const Walk w = walk(*plan, src, srv6_address(s, p, std::nullopt, b), 0);
            EXPECT_EQ(w.error, "");
            EXPECT_EQ(w.links, path_links(s, p, a, b, std::nullopt));
            EXPECT_EQ(w.links.size(), 2u);
          }
          // Plain: every ECMP choice reaches the host.
          for (size_t choice = 0; choice < size_t(s.spines); ++choice) {
            const Walk w = walk(*plan, src, host_address(p, b), choice);
            EXPECT_EQ(w.error, "") << "plain " << a << "->" << b;
            EXPECT_EQ(w.links.back(), host_link_name(b, p));
          }
        }
      }
    }
  }
}

TEST(FabricPlan, route_lines__a_down_link_breaks_exactly_the_paths_through_it) {
  const FabricSpec s = small_spec();
  auto plan = plan_fabric(s);
  ASSERT_TRUE(plan);
  const std::set<std::string> down{"p0-l0-s1"};
  for (int a = 0; a < s.hosts; ++a)
    for (int b = 0; b < s.hosts; ++b)
      for (int sp = 0; sp < s.spines; ++sp) {
        if (a == b) continue;
        const auto links = path_links(s, 0, a, b, sp);
        const bool through = contains(links, "p0-l0-s1");
        const Walk w = walk(*plan, plan->nodes[size_t(a)].ns, srv6_address(s, 0, sp, b), 0, down);
        EXPECT_EQ(w.error == "down", through) << a << "->" << b << " s" << sp;
      }
}

TEST(FabricPlan, plan_fabric__routes_per_node) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  const auto leaf = route_lines(*plan, "t-p1-l0", {});
  EXPECT_TRUE(contains(leaf,
                       "route replace fcbb:bb01:1::/48 encap seg6local action End flavors "
                       "next-csid lblen 32 nflen 16 dev sid0"));
  EXPECT_TRUE(contains(leaf, "route replace fcbb:bb01:8001::/48 via fd00:1:8001:1::1 dev s1"));
  EXPECT_TRUE(contains(leaf, "route replace fcbb:bb01:4001::/48 via fd00:1:4001::2 dev h1"));
  EXPECT_TRUE(contains(leaf,
                       "route replace fcbb:bb01:4003::/48 nexthop via fd00:1:8000:1::1 dev s0 "
                       "nexthop via fd00:1:8001:1::1 dev s1"));
  EXPECT_EQ(leaf.size(), 1u + 2 + 4);  // End, spines, hosts
  const auto spine = route_lines(*plan, "t-p0-s1", {});
  EXPECT_TRUE(contains(spine, "route replace fcbb:bb00:2::/48 via fd00:0:8001:2::2 dev l1"));
  EXPECT_TRUE(contains(spine, "route replace fcbb:bb00:4000::/48 via fd00:0:8001:1::2 dev l0"));
  EXPECT_EQ(spine.size(), 1u + 2 + 4);  // End, leaves, hosts
  const auto host = route_lines(*plan, "t-h2", {});
  EXPECT_EQ(host,
            (std::vector<std::string>{
                "route replace fcbb:bb00::/32 via fd00:0:4002::1 dev p0 src fcbb:bb00:4002::",
                "route replace fcbb:bb01::/32 via fd00:1:4002::1 dev p1 src fcbb:bb01:4002::"}));
}

TEST(FabricPlan, route_lines__leave_out_down_interfaces) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  const auto leaf = route_lines(*plan, "t-p1-l0", {"s1"});
  EXPECT_FALSE(contains(leaf, "route replace fcbb:bb01:8001::/48 via fd00:1:8001:1::1 dev s1"));
  EXPECT_TRUE(contains(leaf, "route replace fcbb:bb01:4003::/48 via fd00:1:8000:1::1 dev s0"));
  const auto both = route_lines(*plan, "t-p1-l0", {"s0", "s1"});
  for (const auto& l : both)
    EXPECT_EQ(l.find("4003"), std::string::npos) << l;
  // The End route hangs off sid0, which no fault touches.
  EXPECT_EQ(both.front().find("seg6local") != std::string::npos, true);
}

TEST(FabricPlan, node_setup_lines__bring_up_interfaces_then_address_then_route) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  const auto lines = node_setup_lines(*plan, *plan->node("p0-l0"));
  EXPECT_EQ(lines.front(), "link set lo up");
  const auto at = [&](const std::string& l) {
    return std::find(lines.begin(), lines.end(), l) - lines.begin();
  };
  const auto sid = at("link add sid0 type veth peer name sid1");
  const auto up = at("link set dev s1 mtu 9000 up");
  const auto addr = at("addr add fd00:0:8001:1::2/64 dev s1 nodad");
  const auto neigh =
      at("neigh replace fd00:0:8001:1::1 lladdr 02:00:80:01:00:01 dev s1 nud permanent");
  const auto route = at("route replace fcbb:bb00:8001::/48 via fd00:0:8001:1::1 dev s1");
  EXPECT_LT(sid, up);
  EXPECT_LT(up, addr);
  EXPECT_LT(addr, neigh);
  EXPECT_LT(neigh, route);
  EXPECT_LT(route, long(lines.size()));
  const auto host_lines = node_setup_lines(*plan, *plan->node("h1"));
  EXPECT_TRUE(contains(host_lines, "addr add fcbb:bb01:4001::/128 dev p1 nodad"));
  for (const auto& l : host_lines)
    EXPECT_EQ(l.find("sid0"), std::string::npos);
}

TEST(FabricPlan, veth_lines__one_namespace_per_node_and_both_link_ends_in_theirs) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  const auto ns = netns_add_lines(*plan);
  EXPECT_EQ(ns.size(), plan->nodes.size());
  EXPECT_EQ(ns.front(), "netns add t-h0");
  const auto veths = veth_lines(*plan);
  EXPECT_EQ(veths.size(), plan->links.size());
  EXPECT_TRUE(contains(veths,
                       "link add name p1 address 06:01:40:02:00:00 netns t-h2 type veth peer name "
                       "h2 address 02:01:40:02:00:00 netns t-p1-l1"));
  EXPECT_TRUE(contains(veths,
                       "link add name s1 address 06:00:80:01:00:01 netns t-p0-l0 type veth peer "
                       "name l0 address 02:00:80:01:00:01 netns t-p0-s1"));
}

TEST(FabricPlan, neighbour_lines__each_end_knows_its_peers_planned_mac) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  const auto leaf = neighbour_lines(*plan, "t-p1-l1");
  EXPECT_EQ(leaf.size(), plan->links_in("t-p1-l1").size());
  EXPECT_TRUE(
      contains(leaf, "neigh replace fd00:1:4002::2 lladdr 06:01:40:02:00:00 dev h2 nud permanent"));
  const auto host = neighbour_lines(*plan, "t-h2");
  EXPECT_TRUE(
      contains(host, "neigh replace fd00:1:4002::1 lladdr 02:01:40:02:00:00 dev p1 nud permanent"));
}

TEST(FabricPlan, sysctls_for__routers_and_hosts) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  const auto find = [](const std::vector<Sysctl>& v, const std::string& key) -> std::string {
    for (const auto& s : v)
      if (s.key == key) return s.value;
    return "<absent>";
  };
  const auto leaf = sysctls_for(plan->spec, *plan->node("p0-l0"));
  EXPECT_EQ(find(leaf, "net.ipv6.conf.all.forwarding"), "1");
  EXPECT_EQ(find(leaf, "net.ipv6.conf.default.forwarding"), "1");
  EXPECT_EQ(find(leaf, "net.ipv6.conf.all.keep_addr_on_down"), "1");
  EXPECT_EQ(find(leaf, "net.ipv6.conf.default.seg6_enabled"), "1");
  EXPECT_EQ(find(leaf, "net.ipv6.conf.default.accept_dad"), "0");
  EXPECT_EQ(find(leaf, "net.ipv6.fib_multipath_hash_policy"), "3");
  EXPECT_EQ(find(leaf, "net.ipv6.fib_multipath_hash_fields"), "63");
  const auto host = sysctls_for(plan->spec, *plan->node("h0"));
  EXPECT_EQ(find(host, "net.ipv6.conf.all.forwarding"), "0");
  EXPECT_EQ(find(host, "net.ipv6.conf.all.keep_addr_on_down"), "1");
  EXPECT_EQ(find(host, "net.ipv6.fib_multipath_hash_policy"), "<absent>");
  // Without kernel SRv6 no seg6 knob is written (absent where CONFIG_IPV6_SEG6_LWTUNNEL is
  // off); every data plane hashes the same fields.
  const FabricSpec ecmp = on(DataPlane::kEcmp);
  const auto ecmp_leaf = sysctls_for(ecmp, *plan->node("p0-l0"));
  EXPECT_EQ(find(ecmp_leaf, "net.ipv6.conf.default.seg6_enabled"), "<absent>");
  EXPECT_EQ(find(ecmp_leaf, "net.ipv6.fib_multipath_hash_policy"), "3");
  EXPECT_EQ(find(ecmp_leaf, "net.ipv6.fib_multipath_hash_fields"), "63");
  const auto bpf_leaf = sysctls_for(on(DataPlane::kBpf), *plan->node("p0-l0"));
  EXPECT_EQ(find(bpf_leaf, "net.ipv6.conf.default.seg6_enabled"), "<absent>");
  EXPECT_EQ(find(bpf_leaf, "net.ipv6.fib_multipath_hash_policy"), "3");
}

TEST(FabricPlan, plan_fabric__bpf_plane_has_an_endpoint_per_switch_and_no_end_routes) {
  auto plan = plan_fabric(on(DataPlane::kBpf));
  ASSERT_TRUE(plan) << plan.error().message;
  for (const auto& r : plan->routes)
    EXPECT_NE(r.kind, RouteKind::kSeg6End) << r.ns << " " << r.prefix;
  ASSERT_EQ(plan->usid_endpoints.size(), 2u * (2 + 2));
  for (const auto& e : plan->usid_endpoints) {
    const Node* n = plan->node(e.node);
    ASSERT_NE(n, nullptr);
    EXPECT_NE(n->kind, NodeKind::kHost);
    EXPECT_EQ(e.ns, n->ns);
    EXPECT_EQ(wire::usid_active(e.sid), n->usid);
    EXPECT_EQ(wire::usid_block(e.sid), plane_block(n->plane));
    EXPECT_EQ(e.prefix, format_ipv6(e.sid) + "/48");
    // Every interface of the switch (a packet may enter anywhere), and no SID device.
    EXPECT_EQ(e.interfaces.size(), plan->links_in(e.ns).size());
  }
  EXPECT_EQ(plan->usid_endpoints.front().interfaces,
            (std::vector<std::string>{"h0", "h1", "s0", "s1"}));
  for (const auto& l : node_setup_lines(*plan, *plan->node("p0-s0")))
    EXPECT_EQ(l.find("sid0"), std::string::npos) << l;
  // The kernel plane has the same endpoints, realised as End routes.
  auto kernel = plan_fabric(small_spec());
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel->usid_endpoints.size(), plan->usid_endpoints.size());
}

TEST(FabricPlan, plan_fabric__ecmp_plane_routes_only_plain_addresses) {
  FabricSpec larger = on(DataPlane::kEcmp);
  larger.hosts = 7;
  larger.leaves = 3;
  larger.spines = 3;
  for (const FabricSpec& s : {on(DataPlane::kEcmp), larger}) {
    auto plan = plan_fabric(s);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->usid_endpoints.empty());
    for (int p = 0; p < s.planes; ++p)
      for (int a = 0; a < s.hosts; ++a)
        for (int b = 0; b < s.hosts; ++b) {
          if (a == b) continue;
          const std::string src = plan->nodes[size_t(a)].ns;
          // Every hash choice reaches the host; an SRv6 carrier has no route.
          for (size_t choice = 0; choice < size_t(s.spines); ++choice) {
            const Walk w = walk(*plan, src, host_address(p, b), choice);
            EXPECT_EQ(w.error, "") << a << "->" << b;
            const size_t hops = leaf_of_host(s, a) == leaf_of_host(s, b) ? 2u : 4u;
            EXPECT_EQ(w.links.size(), hops) << a << "->" << b;
          }
          EXPECT_NE(walk(*plan, src, srv6_address(s, p, 0, b), 0).error, "");
        }
  }
  const auto leaf = route_lines(*plan_fabric(on(DataPlane::kEcmp)), "t-p1-l0", {});
  EXPECT_EQ(leaf.size(), 4u);  // hosts only
}

TEST(FabricPlan, parse_dataplane__names_round_trip) {
  for (DataPlane d : {DataPlane::kAuto, DataPlane::kKernel, DataPlane::kBpf, DataPlane::kEcmp})
    EXPECT_EQ(parse_dataplane(dataplane_name(d)), d);
  EXPECT_EQ(parse_dataplane("seg6"), std::nullopt);
  EXPECT_TRUE(has_source_routing(DataPlane::kKernel));
  EXPECT_TRUE(has_source_routing(DataPlane::kBpf));
  EXPECT_FALSE(has_source_routing(DataPlane::kEcmp));
  EXPECT_FALSE(plan_fabric(on(DataPlane::kAuto)).has_value());
}

TEST(FabricPlan, path_links__lists_the_links_in_order) {
  const FabricSpec s = small_spec();
  EXPECT_EQ(path_links(s, 1, 0, 3, 1),
            (std::vector<std::string>{"h0-p1", "p1-l0-s1", "p1-l1-s1", "h3-p1"}));
  EXPECT_EQ(path_links(s, 0, 0, 1, 0),
            (std::vector<std::string>{"h0-p0", "p0-l0-s0", "p0-l0-s0", "h1-p0"}));
  EXPECT_EQ(path_links(s, 0, 0, 1, std::nullopt), (std::vector<std::string>{"h0-p0", "h1-p0"}));
}

TEST(FabricPlan, all_probes__cover_every_path) {
  const FabricSpec s = small_spec();
  const auto probes = all_probes(s);
  // Per plane: 12 ordered pairs x (2 spines + plain) + 4 same-leaf pairs.
  EXPECT_EQ(probes.size(), 2u * (12 * 3 + 4));
  EXPECT_EQ(probes.front().label(), "h0->h1 p0 via s0");
  // An ECMP fabric has only the plain addresses.
  const auto plain = all_probes(on(DataPlane::kEcmp));
  EXPECT_EQ(plain.size(), 2u * 12);
  for (const auto& p : plain)
    EXPECT_EQ(p.via, Probe::Via::kPlain);
}

// ---------------------------------------------------------------------------------------------
// tc, rates, durations

TEST(FabricRate, parse_rate__parses_and_format_rate_formats) {
  EXPECT_EQ(parse_rate("10gbit").value(), 10'000'000'000ull);
  EXPECT_EQ(parse_rate("1.5gbit").value(), 1'500'000'000ull);
  EXPECT_EQ(parse_rate("100mbit").value(), 100'000'000ull);
  EXPECT_EQ(parse_rate("800kbit").value(), 800'000ull);
  EXPECT_EQ(parse_rate("64000").value(), 64'000ull);
  EXPECT_EQ(parse_rate("0").value(), 0ull);
  EXPECT_EQ(parse_rate("off").value(), 0ull);
  EXPECT_FALSE(parse_rate("fast"));
  EXPECT_FALSE(parse_rate("10gbps"));
  EXPECT_FALSE(parse_rate("-1gbit"));
  EXPECT_FALSE(parse_rate("1bit"));  // below 8kbit
  EXPECT_EQ(format_rate(10'000'000'000ull), "10gbit");
  EXPECT_EQ(format_rate(1'500'000'000ull), "1.5gbit");
  EXPECT_EQ(format_rate(0), "unlimited");
}

TEST(FabricRate, tbf_args__bucket_holds_a_frame_and_a_millisecond) {
  const auto args = tbf_args("s0", 10'000'000'000ull, 9000);
  ASSERT_EQ(args.size(), 12u);
  EXPECT_EQ(args[1], "replace");
  EXPECT_EQ(args[3], "s0");
  EXPECT_EQ(args[7], "10000000000bit");
  EXPECT_EQ(std::stoull(args[9]), 1'250'000ull);  // 1 ms at 10 Gbit/s
  const auto slow = tbf_args("s0", 1'000'000ull, 9000);
  EXPECT_GE(std::stoull(slow[9]), 9014ull);  // a jumbo frame still fits
  EXPECT_EQ(tbf_args("h1", 0, 9000),
            (std::vector<std::string>{"qdisc", "del", "dev", "h1", "root"}));
}

TEST(FabricRate, parse_duration_us__units_and_errors) {
  EXPECT_EQ(parse_duration_us("100ms").value(), 100'000ull);
  EXPECT_EQ(parse_duration_us("2s").value(), 2'000'000ull);
  EXPECT_EQ(parse_duration_us("2.5s").value(), 2'500'000ull);
  EXPECT_EQ(parse_duration_us("250us").value(), 250ull);
  EXPECT_FALSE(parse_duration_us("100"));
  EXPECT_FALSE(parse_duration_us("fast"));
}

// ---------------------------------------------------------------------------------------------
// Faults and description

TEST(FabricFaults, nft_script__blackhole_loss_and_switch) {
  auto plan = plan_fabric(small_spec());
  ASSERT_TRUE(plan);
  FaultState f;
  EXPECT_EQ(nft_script(*plan, f, "t-p0-l0"),
            "table netdev mrc_fabric\ndelete table netdev mrc_fabric\n");
  f.links["p0-l0-s1"].blackhole = true;
  f.links["p0-l0-s0"].loss_percent = 5;
  const std::string leaf = nft_script(*plan, f, "t-p0-l0");
  EXPECT_NE(leaf.find("chain in_s1 {\n    type filter hook ingress device \"s1\" priority 0; "
                      "policy accept;\n    counter drop\n  }"),
            std::string::npos)
      << leaf;
  EXPECT_NE(leaf.find("numgen random mod 100 < 5 counter drop"), std::string::npos) << leaf;
  EXPECT_EQ(leaf.find("in_h0"), std::string::npos);
  // The far end of the blackholed link drops too.
  EXPECT_NE(nft_script(*plan, f, "t-p0-s1").find("chain in_l0"), std::string::npos);
  // A whole switch: every interface.
  FaultState sw;
  sw.blackholed_switches.insert("p1-s0");
  const std::string spine = nft_script(*plan, sw, "t-p1-s0");
  EXPECT_NE(spine.find("chain in_l0"), std::string::npos);
  EXPECT_NE(spine.find("chain in_l1"), std::string::npos);
  EXPECT_EQ(nft_script(*plan, sw, "t-p1-l0").find("chain"), std::string::npos);
}

TEST(FabricFaults, to_json__round_trips_through_from_json) {
  FaultState f;
  f.links["h1-p0"] = LinkFaults{true, 7, 1'000'000'000ull};
  f.blackholed_switches.insert("p0-s1");
  const auto back = FaultState::from_json(nlohmann::json::parse(f.to_json().dump()));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->links, f.links);
  EXPECT_EQ(back->blackholed_switches, f.blackholed_switches);
  EXPECT_FALSE(FaultState::from_json(nlohmann::json::parse(R"({"links": {"x": 3}})")));
}

TEST(FabricDescription, describe__schema_fields) {
  FabricSpec s = small_spec();
  s.rate_bps = 10'000'000'000ull;
  auto plan = plan_fabric(s);
  ASSERT_TRUE(plan);
  const auto j = describe(*plan);
  EXPECT_EQ(j["schema"], "mrc-fabric/1");
  EXPECT_EQ(j["name"], "t");
  EXPECT_EQ(j["spec"]["hosts"], 4);
  EXPECT_EQ(j["spec"]["rate_bps"], 10'000'000'000ull);
  ASSERT_EQ(j["planes"].size(), 2u);
  EXPECT_EQ(j["planes"][1]["block"], "fcbb:bb01::/32");
  EXPECT_EQ(j["planes"][1]["block_hex"], "fcbbbb01");
  EXPECT_EQ(j["planes"][1]["spines"][1]["usid"], 0x8001);
  EXPECT_EQ(j["planes"][1]["spines"][1]["usid_hex"], "8001");
  EXPECT_EQ(j["planes"][1]["spines"][1]["namespace"], "t-p1-s1");
  EXPECT_EQ(j["planes"][1]["spines"][1]["sid"], "fcbb:bb01:8001::/48");
  EXPECT_EQ(j["planes"][0]["leaves"][1]["usid"], 2);
  // The same JSON type on both sides: clang finds ordered_json == json ambiguous.
  EXPECT_EQ(j["planes"][0]["leaves"][1]["hosts"].dump(), "[2,3]");
  ASSERT_EQ(j["hosts"].size(), 4u);
  const auto& h3 = j["hosts"][3];
  EXPECT_EQ(h3["namespace"], "t-h3");
  EXPECT_EQ(h3["usid"], 0x4003);
  EXPECT_EQ(h3["leaf"], 1);
  EXPECT_EQ(h3["ports"][1]["interface"], "p1");
  EXPECT_EQ(h3["ports"][1]["address"], "fcbb:bb01:4003::");
  EXPECT_EQ(h3["ports"][1]["link"], "h3-p1");
  EXPECT_EQ(h3["ports"][1]["gateway"], "fd00:1:4003::1");
  ASSERT_EQ(j["links"].size(), plan->links.size());
  const auto& fl = j["links"].back();
  EXPECT_EQ(fl["name"], "p1-l1-s1");
  EXPECT_EQ(fl["kind"], "leaf-spine");
  EXPECT_EQ(fl["upper"]["namespace"], "t-p1-s1");
  EXPECT_EQ(fl["upper"]["interface"], "l1");
  EXPECT_EQ(fl["lower"]["interface"], "s1");
  const auto spec = spec_from_description(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(*spec, s);
  EXPECT_EQ(j["dataplane"], "kernel");
  EXPECT_EQ(j["source_routing"], true);
  EXPECT_FALSE(spec_from_description(nlohmann::json::parse(R"({"schema": "other"})")));
  // The data plane round-trips; a description from before data planes is a kernel fabric; an
  // unknown one is refused.
  for (DataPlane d : {DataPlane::kBpf, DataPlane::kEcmp}) {
    auto other = plan_fabric(on(d));
    ASSERT_TRUE(other);
    const auto jd = describe(*other);
    EXPECT_EQ(jd["dataplane"], std::string(dataplane_name(d)));
    EXPECT_EQ(spec_from_description(nlohmann::json::parse(jd.dump()))->dataplane, d);
  }
  auto old = nlohmann::json::parse(j.dump());
  old.erase("dataplane");
  EXPECT_EQ(spec_from_description(old)->dataplane, DataPlane::kKernel);
  old["dataplane"] = "auto";
  EXPECT_FALSE(spec_from_description(old));
  const auto ecmp = describe(*plan_fabric(on(DataPlane::kEcmp)));
  EXPECT_EQ(ecmp["multipath_hash"]["policy"], 3);
  EXPECT_FALSE(ecmp["planes"][0]["spines"][0].contains("sid"));
}

}  // namespace
}  // namespace mrc::net
