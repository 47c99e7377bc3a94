// The PLAN half of mrc-fabric (net/fabric.h): pure functions, no root, no system calls
// besides inet_pton/ntop.
#include "net/fabric.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "wire/usid.h"

namespace mrc::net {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// Plan errors are bad input: a spec, a rate, a duration or a description that does not fit.
std::unexpected<NetError> plan_error(std::string msg) {
  return net_fail(NetErrc::kInvalidArgument, std::move(msg));
}

std::string hex4(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

// Link addresses: fd00:PP:X:Y::/64 with the end's number (1 = upper, 2 = lower) last.
wire::Ipv6Addr link_address(int plane, uint16_t x, uint16_t y, uint8_t end) {
  wire::Ipv6Addr a{};
  a[0] = 0xFD;
  a[2] = 0;
  a[3] = uint8_t(plane);
  a[4] = uint8_t(x >> 8);
  a[5] = uint8_t(x);
  a[6] = uint8_t(y >> 8);
  a[7] = uint8_t(y);
  a[15] = end;
  return a;
}

std::string usid_prefix(int plane, uint16_t usid) {
  const uint16_t list[] = {usid};
  return format_ipv6(wire::usid_carrier(plane_block(plane), list)) + "/48";
}

std::string block_prefix(int plane) {
  return format_ipv6(wire::usid_carrier(plane_block(plane), {})) + "/32";
}

// A link end's MAC, from its link address (link_address): locally administered unicast
// (02, or 06 for the lower end), then the plane and the link's two 16-bit numbers, so that
// every end of a fabric has its own and a capture names the link.
std::string link_mac(const wire::Ipv6Addr& addr) {
  char s[18];
  std::snprintf(s, sizeof s, "%02x:%02x:%02x:%02x:%02x:%02x", addr[15] == 1 ? 0x02 : 0x06, addr[3],
                addr[4], addr[5], addr[6], addr[7]);
  return s;
}

LinkEnd make_end(const Node& node, std::string ifname, const wire::Ipv6Addr& addr) {
  LinkEnd e;
  e.node = node.id;
  e.ns = node.ns;
  e.ifname = std::move(ifname);
  e.ip = format_ipv6(addr);
  e.address = e.ip + "/64";
  e.mac = link_mac(addr);
  return e;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Data planes

std::string_view dataplane_name(DataPlane d) {
  switch (d) {
    case DataPlane::kAuto:
      return "auto";
    case DataPlane::kKernel:
      return "kernel";
    case DataPlane::kBpf:
      return "bpf";
    case DataPlane::kEcmp:
      return "ecmp";
  }
  return "?";
}

std::optional<DataPlane> parse_dataplane(std::string_view text) {
  for (DataPlane d : {DataPlane::kAuto, DataPlane::kKernel, DataPlane::kBpf, DataPlane::kEcmp})
    if (text == dataplane_name(d)) return d;
  return std::nullopt;
}

bool has_source_routing(DataPlane d) {
  return d == DataPlane::kKernel || d == DataPlane::kBpf;
}

// ---------------------------------------------------------------------------------------------
// Shape and address plan

NetStatus validate(const FabricSpec& s) {
  if (s.name.empty() || s.name.size() > size_t(kMaxNameLength))
    return plan_error("fabric name must have 1.." + std::to_string(kMaxNameLength) + " characters");
  for (char c : s.name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok)
      return plan_error("fabric name '" + s.name +
                        "' may hold only letters, digits, '_' and '-' (it prefixes namespace "
                        "names and is passed to ip)");
  }
  if (s.hosts < 2 || s.hosts > kMaxHosts)
    return plan_error("--hosts must be in 2.." + std::to_string(kMaxHosts));
  if (s.planes < 1 || s.planes > kMaxPlanes)
    return plan_error("--planes must be in 1.." + std::to_string(kMaxPlanes));
  if (s.leaves < 1 || s.leaves > kMaxLeaves)
    return plan_error("--leaves must be in 1.." + std::to_string(kMaxLeaves));
  if (s.spines < 1 || s.spines > kMaxSpines)
    return plan_error("--spines must be in 1.." + std::to_string(kMaxSpines));
  if (s.leaves > s.hosts)
    return plan_error("--leaves (" + std::to_string(s.leaves) + ") exceeds --hosts (" +
                      std::to_string(s.hosts) + "): a leaf would have no host");
  if (s.mtu < 1280 || s.mtu > 65535)
    return plan_error("--mtu must be in 1280..65535 (IPv6 needs at least 1280)");
  return {};
}

int hosts_per_leaf(const FabricSpec& spec) {
  return (spec.hosts + spec.leaves - 1) / spec.leaves;
}

int leaf_of_host(const FabricSpec& spec, int host) {
  return host / hosts_per_leaf(spec);
}

std::string format_ipv6(const wire::Ipv6Addr& a) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, a.data(), buf, sizeof buf);
  return buf;
}

std::optional<wire::Ipv6Addr> parse_ipv6(std::string_view text) {
  wire::Ipv6Addr a{};
  const std::string s(text);
  if (inet_pton(AF_INET6, s.c_str(), a.data()) != 1) return std::nullopt;
  return a;
}

wire::Ipv6Addr host_address(int plane, int host) {
  const uint16_t list[] = {host_usid(host)};
  return wire::usid_carrier(plane_block(plane), list);
}

wire::Ipv6Addr srv6_address(const FabricSpec& spec, int plane, std::optional<int> spine,
                            int dst_host) {
  const int leaf = leaf_of_host(spec, dst_host);
  if (spine) {
    const uint16_t list[] = {spine_usid(*spine), leaf_usid(leaf), host_usid(dst_host)};
    return wire::usid_carrier(plane_block(plane), list);
  }
  const uint16_t list[] = {leaf_usid(leaf), host_usid(dst_host)};
  return wire::usid_carrier(plane_block(plane), list);
}

std::string host_id(int host) {
  // Appending (not "h" + to_string) sidesteps a g++ 12 -Wrestrict false positive.
  std::string id = "h";
  id += std::to_string(host);
  return id;
}
std::string leaf_id(int plane, int leaf) {
  return "p" + std::to_string(plane) + "-l" + std::to_string(leaf);
}
std::string spine_id(int plane, int spine) {
  return "p" + std::to_string(plane) + "-s" + std::to_string(spine);
}
std::string host_link_name(int host, int plane) {
  return host_id(host) + "-p" + std::to_string(plane);
}
std::string fabric_link_name(int plane, int leaf, int spine) {
  return leaf_id(plane, leaf) + "-s" + std::to_string(spine);
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_fabric_namespace(std::string_view name, std::string_view ns) {
  if (ns.size() <= name.size() + 1 || !ns.starts_with(name) || ns[name.size()] != '-') return false;
  const std::string_view rest = ns.substr(name.size() + 1);
  if (rest.starts_with('h')) return all_digits(rest.substr(1));
  // p<N>-l<N> or p<N>-s<N>
  if (!rest.starts_with('p')) return false;
  const size_t dash = rest.find('-');
  if (dash == std::string_view::npos || !all_digits(rest.substr(1, dash - 1))) return false;
  const std::string_view sw = rest.substr(dash + 1);
  return (sw.starts_with('l') || sw.starts_with('s')) && all_digits(sw.substr(1));
}

// ---------------------------------------------------------------------------------------------
// The plan

std::string_view node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kHost:
      return "host";
    case NodeKind::kLeaf:
      return "leaf";
    case NodeKind::kSpine:
      return "spine";
  }
  return "?";
}

const Node* FabricPlan::node(std::string_view id) const {
  for (const auto& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

const Link* FabricPlan::link(std::string_view name) const {
  for (const auto& l : links)
    if (l.name == name) return &l;
  return nullptr;
}

std::vector<const Link*> FabricPlan::links_in(std::string_view ns) const {
  std::vector<const Link*> out;
  for (const auto& l : links)
    if (l.upper.ns == ns || l.lower.ns == ns) out.push_back(&l);
  return out;
}

namespace {

// Where plan_fabric's nodes and links stand in the plan: nodes are hosts, then per plane its
// leaves and spines; links are host links host-major (h0-p0, h0-p1, h1-p0, ...), then the
// leaf-spine links per plane, leaf-major.
struct PlanIndex {
  const FabricPlan& plan;
  const FabricSpec& spec;

  const Node& host_node(int h) const { return plan.nodes[size_t(h)]; }
  const Node& leaf_node(int p, int l) const {
    return plan.nodes[size_t(spec.hosts + p * (spec.leaves + spec.spines) + l)];
  }
  const Node& spine_node(int p, int s) const {
    return plan.nodes[size_t(spec.hosts + p * (spec.leaves + spec.spines) + spec.leaves + s)];
  }
  const Link& host_link(int h, int p) const { return plan.links[size_t(h * spec.planes + p)]; }
  const Link& fabric_link(int p, int l, int s) const {
    return plan.links[size_t(spec.hosts * spec.planes + (p * spec.leaves + l) * spec.spines + s)];
  }
};

// An interface named after what is at its other end: "p1" (a host's port on plane 1), "l0"
// (a spine's port to leaf 0), "s3" (a leaf's port to spine 3). Built in place: GCC 12 warns
// (-Wrestrict, a false positive) on "l" + std::to_string(l) once inlined here.
std::string port_name(char kind, int index) {
  std::string name(1, kind);
  name += std::to_string(index);
  return name;
}

void plan_nodes(FabricPlan& plan) {
  const FabricSpec& spec = plan.spec;
  const std::string prefix = spec.name + "-";
  for (int h = 0; h < spec.hosts; ++h)
    plan.nodes.push_back({NodeKind::kHost, -1, h, host_id(h), prefix + host_id(h), host_usid(h)});
  for (int p = 0; p < spec.planes; ++p) {
    for (int l = 0; l < spec.leaves; ++l)
      plan.nodes.push_back(
          {NodeKind::kLeaf, p, l, leaf_id(p, l), prefix + leaf_id(p, l), leaf_usid(l)});
    for (int s = 0; s < spec.spines; ++s)
      plan.nodes.push_back(
          {NodeKind::kSpine, p, s, spine_id(p, s), prefix + spine_id(p, s), spine_usid(s)});
  }
}

// The links with their ends' addresses, and every address the plan assigns: both ends of
// every link, and each host port's own /128.
void plan_links(FabricPlan& plan) {
  const FabricSpec& spec = plan.spec;
  const PlanIndex at{plan, spec};
  for (int h = 0; h < spec.hosts; ++h) {
    for (int p = 0; p < spec.planes; ++p) {
      Link link;
      link.name = host_link_name(h, p);
      link.kind = LinkKind::kHostLeaf;
      link.plane = p;
      link.host = h;
      link.leaf = leaf_of_host(spec, h);
      link.upper =
          make_end(at.leaf_node(p, link.leaf), host_id(h), link_address(p, host_usid(h), 0, 1));
      link.lower =
          make_end(at.host_node(h), port_name('p', p), link_address(p, host_usid(h), 0, 2));
      plan.links.push_back(std::move(link));
    }
  }
  for (int p = 0; p < spec.planes; ++p) {
    for (int l = 0; l < spec.leaves; ++l) {
      for (int s = 0; s < spec.spines; ++s) {
        Link link;
        link.name = fabric_link_name(p, l, s);
        link.kind = LinkKind::kLeafSpine;
        link.plane = p;
        link.leaf = l;
        link.spine = s;
        link.upper = make_end(at.spine_node(p, s), port_name('l', l),
                              link_address(p, spine_usid(s), leaf_usid(l), 1));
        link.lower = make_end(at.leaf_node(p, l), port_name('s', s),
                              link_address(p, spine_usid(s), leaf_usid(l), 2));
        plan.links.push_back(std::move(link));
      }
    }
  }
  for (const auto& link : plan.links) {
    plan.addresses.push_back({link.upper.ns, link.upper.ifname, link.upper.address});
    plan.addresses.push_back({link.lower.ns, link.lower.ifname, link.lower.address});
    if (link.kind == LinkKind::kHostLeaf)
      plan.addresses.push_back({link.lower.ns, link.lower.ifname,
                                format_ipv6(host_address(link.plane, link.host)) + "/128"});
  }
}

// A static route of `ns` to `prefix` via one link end (SRv6 forwarding unless `plain`).
Route forward_route(const std::string& ns, std::string prefix, const LinkEnd& via,
                    const LinkEnd& dev, bool plain = false) {
  return {ns, std::move(prefix), RouteKind::kForward, {{via.ip, dev.ifname}}, {}, plain};
}

// Hosts: the plane's block out of the plane's port, sourced from the port address.
void plan_host_routes(FabricPlan& plan, const PlanIndex& at) {
  const FabricSpec& spec = plan.spec;
  for (int h = 0; h < spec.hosts; ++h) {
    for (int p = 0; p < spec.planes; ++p) {
      const Link& l = at.host_link(h, p);
      Route r = forward_route(at.host_node(h).ns, block_prefix(p), l.upper, l.lower);
      r.src = format_ipv6(host_address(p, h));
      plan.routes.push_back(std::move(r));
    }
  }
}

// A switch's uN endpoint on the SRv6 data planes: the End route (kernel) and the endpoint
// record (both; the eBPF plane attaches its program from it).
void plan_usid_endpoint(FabricPlan& plan, const Node& node, int p) {
  if (!has_source_routing(plan.spec.dataplane)) return;
  UsidEndpoint e;
  e.ns = node.ns;
  e.node = node.id;
  const uint16_t list[] = {node.usid};
  e.sid = wire::usid_carrier(plane_block(p), list);
  e.prefix = usid_prefix(p, node.usid);
  for (const Link* l : plan.links_in(node.ns))
    e.interfaces.push_back(l->upper.ns == node.ns ? l->upper.ifname : l->lower.ifname);
  if (plan.spec.dataplane == DataPlane::kKernel)
    plan.routes.push_back({node.ns, e.prefix, RouteKind::kSeg6End, {}, {}, false});
  plan.usid_endpoints.push_back(std::move(e));
}

// Leaf l of plane p: its own uSID ends there (End), each spine's uSID goes up to that spine,
// each host's down to it (its own hosts) or, in plain mode only, up to any spine (ECMP by the
// multipath hash: any spine reaches the host's leaf). An ECMP fabric has only the plain routes.
void plan_leaf_routes(FabricPlan& plan, const PlanIndex& at, int p, int l) {
  const FabricSpec& spec = plan.spec;
  const Node& leaf = at.leaf_node(p, l);
  plan_usid_endpoint(plan, leaf, p);
  for (int s = 0; s < spec.spines && has_source_routing(spec.dataplane); ++s) {
    const Link& up = at.fabric_link(p, l, s);
    plan.routes.push_back(
        forward_route(leaf.ns, usid_prefix(p, spine_usid(s)), up.upper, up.lower));
  }
  for (int h = 0; h < spec.hosts; ++h) {
    Route r{leaf.ns, usid_prefix(p, host_usid(h)), RouteKind::kForward, {}, {}, false};
    if (leaf_of_host(spec, h) == l) {
      const Link& down = at.host_link(h, p);
      r.nexthops = {{down.lower.ip, down.upper.ifname}};
    } else {
      r.plain = true;
      for (int s = 0; s < spec.spines; ++s) {
        const Link& up = at.fabric_link(p, l, s);
        r.nexthops.push_back({up.upper.ip, up.lower.ifname});
      }
    }
    plan.routes.push_back(std::move(r));
  }
}

// Spine s of plane p: its own uSID ends there (End), each leaf's uSID goes down to that leaf,
// and in plain mode each host's down to the host's leaf.
void plan_spine_routes(FabricPlan& plan, const PlanIndex& at, int p, int s) {
  const FabricSpec& spec = plan.spec;
  const Node& spine = at.spine_node(p, s);
  plan_usid_endpoint(plan, spine, p);
  for (int l = 0; l < spec.leaves && has_source_routing(spec.dataplane); ++l) {
    const Link& down = at.fabric_link(p, l, s);
    plan.routes.push_back(
        forward_route(spine.ns, usid_prefix(p, leaf_usid(l)), down.lower, down.upper));
  }
  for (int h = 0; h < spec.hosts; ++h) {
    const Link& down = at.fabric_link(p, leaf_of_host(spec, h), s);
    plan.routes.push_back(
        forward_route(spine.ns, usid_prefix(p, host_usid(h)), down.lower, down.upper, true));
  }
}

}  // namespace

NetResult<FabricPlan> plan_fabric(const FabricSpec& spec) {
  if (auto ok = validate(spec); !ok) return std::unexpected(ok.error());
  if (spec.dataplane == DataPlane::kAuto)
    return plan_error("data plane 'auto' must be resolved before planning (mrc-fabric up does)");
  FabricPlan plan;
  plan.spec = spec;
  plan_nodes(plan);
  plan_links(plan);
  const PlanIndex at{plan, plan.spec};
  plan_host_routes(plan, at);
  for (int p = 0; p < spec.planes; ++p) {
    for (int l = 0; l < spec.leaves; ++l)
      plan_leaf_routes(plan, at, p, l);
    for (int s = 0; s < spec.spines; ++s)
      plan_spine_routes(plan, at, p, s);
  }
  return plan;
}

std::vector<Sysctl> sysctls_for(const FabricSpec& spec, const Node& node) {
  std::vector<Sysctl> out;
  const bool router = node.kind != NodeKind::kHost;
  // `all` and `default` both: `default` reaches interfaces created later (the veths), `all`
  // is what several checks read (seg6_enabled is the minimum of all and the device).
  for (const char* scope : {"all", "default"}) {
    const std::string c = std::string("net.ipv6.conf.") + scope + ".";
    out.push_back({c + "forwarding", router ? "1" : "0"});
    out.push_back({c + "accept_dad", "0"});
    out.push_back({c + "dad_transmits", "0"});
    out.push_back({c + "keep_addr_on_down", "1"});
    if (spec.dataplane == DataPlane::kKernel) out.push_back({c + "seg6_enabled", "1"});
    out.push_back({c + "accept_ra", "0"});
    out.push_back({c + "router_solicitations", "0"});
    out.push_back({c + "ignore_routes_with_linkdown", "1"});
  }
  // lo exists before `default` is written.
  if (spec.dataplane == DataPlane::kKernel) out.push_back({"net.ipv6.conf.lo.seg6_enabled", "1"});
  if (router) {
    out.push_back({"net.ipv6.fib_multipath_hash_policy", std::to_string(kMultipathHashPolicy)});
    out.push_back({"net.ipv6.fib_multipath_hash_fields", std::to_string(kMultipathHashFields)});
    // A fixed seed (Linux >= 6.11) makes ECMP choices repeat from one `up` to the next.
    out.push_back({"net.ipv4.fib_multipath_hash_seed", "0x4d5243", true});
  }
  return out;
}

std::vector<std::string> path_links(const FabricSpec& spec, int plane, int src_host, int dst_host,
                                    std::optional<int> spine) {
  std::vector<std::string> out{host_link_name(src_host, plane)};
  if (spine) {
    out.push_back(fabric_link_name(plane, leaf_of_host(spec, src_host), *spine));
    out.push_back(fabric_link_name(plane, leaf_of_host(spec, dst_host), *spine));
  }
  out.push_back(host_link_name(dst_host, plane));
  return out;
}

std::vector<std::string> netns_add_lines(const FabricPlan& plan) {
  std::vector<std::string> out;
  for (const auto& n : plan.nodes)
    out.push_back("netns add " + n.ns);
  return out;
}

std::vector<std::string> veth_lines(const FabricPlan& plan) {
  // Both ends are created directly in their namespaces: names only need to be unique there.
  std::vector<std::string> out;
  for (const auto& l : plan.links)
    out.push_back("link add name " + l.lower.ifname + " address " + l.lower.mac + " netns " +
                  l.lower.ns + " type veth peer name " + l.upper.ifname + " address " +
                  l.upper.mac + " netns " + l.upper.ns);
  return out;
}

std::string route_line(const Route& r) {
  std::string line = "route replace " + r.prefix;
  if (r.kind == RouteKind::kSeg6End) {
    line += " encap seg6local action End flavors next-csid lblen 32 nflen 16 dev ";
    line += kSidDevice;
    return line;
  }
  if (r.nexthops.size() == 1) {
    line += " via " + r.nexthops[0].via + " dev " + r.nexthops[0].dev;
  } else {
    for (const auto& nh : r.nexthops)
      line += " nexthop via " + nh.via + " dev " + nh.dev;
  }
  if (!r.src.empty()) line += " src " + r.src;
  return line;
}

std::vector<std::string> route_lines(const FabricPlan& plan, std::string_view ns,
                                     const std::set<std::string>& down_ifaces) {
  std::vector<std::string> out;
  for (const auto& r : plan.routes) {
    if (r.ns != ns) continue;
    if (r.kind == RouteKind::kSeg6End) {
      out.push_back(route_line(r));
      continue;
    }
    Route live = r;
    std::erase_if(live.nexthops, [&](const Nexthop& nh) { return down_ifaces.contains(nh.dev); });
    if (!live.nexthops.empty()) out.push_back(route_line(live));
  }
  return out;
}

std::vector<std::string> neighbour_lines(const FabricPlan& plan, std::string_view ns) {
  std::vector<std::string> out;
  for (const Link* l : plan.links_in(ns)) {
    const bool upper = l->upper.ns == ns;
    const LinkEnd& self = upper ? l->upper : l->lower;
    const LinkEnd& peer = upper ? l->lower : l->upper;
    out.push_back("neigh replace " + peer.ip + " lladdr " + peer.mac + " dev " + self.ifname +
                  " nud permanent");
  }
  return out;
}

std::vector<std::string> node_setup_lines(const FabricPlan& plan, const Node& node) {
  std::vector<std::string> out{"link set lo up"};
  if (node.kind != NodeKind::kHost && plan.spec.dataplane == DataPlane::kKernel) {
    out.push_back("link add " + std::string(kSidDevice) + " type veth peer name " +
                  std::string(kSidPeerDevice));
    out.push_back("link set dev " + std::string(kSidDevice) + " up");
    out.push_back("link set dev " + std::string(kSidPeerDevice) + " up");
  }
  const std::string mtu = std::to_string(plan.spec.mtu);
  for (const Link* l : plan.links_in(node.ns)) {
    const LinkEnd& e = l->upper.ns == node.ns ? l->upper : l->lower;
    // Always "dev NAME": ip reads a bare name that abbreviates a keyword ("a") as the keyword.
    out.push_back("link set dev " + e.ifname + " mtu " + mtu + " up");
  }
  for (const auto& a : plan.addresses)
    if (a.ns == node.ns) out.push_back("addr add " + a.cidr + " dev " + a.ifname + " nodad");
  for (auto& n : neighbour_lines(plan, node.ns))
    out.push_back(std::move(n));
  for (auto& r : route_lines(plan, node.ns, {}))
    out.push_back(std::move(r));
  return out;
}

std::vector<std::string> tbf_args(std::string_view ifname, uint64_t rate_bps, int mtu) {
  if (rate_bps == 0) return {"qdisc", "del", "dev", std::string(ifname), "root"};
  // The bucket must hold a whole frame (tbf drops larger packets outright) and about 1 ms of
  // line rate so that the kernel's timer granularity does not cap the rate; the queue in
  // front holds another 1 ms (or 4 frames at low rates).
  const uint64_t frame = uint64_t(mtu) + 14;
  const uint64_t per_ms = rate_bps / 8 / 1000;
  const uint64_t burst = std::max(4 * frame, per_ms);
  const uint64_t limit = burst + std::max(4 * frame, per_ms);
  return {"qdisc", "replace",
          "dev",   std::string(ifname),
          "root",  "tbf",
          "rate",  std::to_string(rate_bps) + "bit",
          "burst", std::to_string(burst),
          "limit", std::to_string(limit)};
}

NetResult<uint64_t> parse_rate(std::string_view text) {
  if (text == "0" || text == "off" || text == "none") return 0;
  static const std::pair<std::string_view, double> units[] = {
      {"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}};
  double scale = 1;
  std::string_view number = text;
  for (const auto& [suffix, factor] : units) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      number = text.substr(0, text.size() - suffix.size());
      scale = factor;
      break;
    }
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || end != number.data() + number.size() || !(v > 0) || v * scale < 8000 ||
      v * scale > 1e13)
    return plan_error("bad rate '" + std::string(text) +
                      "' (expected e.g. 10gbit, 100mbit, 800kbit; at least 8kbit; or 0/off)");
  return uint64_t(std::llround(v * scale));
}

std::string format_rate(uint64_t bps) {
  if (bps == 0) return "unlimited";
  static const std::pair<const char*, uint64_t> units[] = {
      {"tbit", 1000000000000ull}, {"gbit", 1000000000ull}, {"mbit", 1000000ull}, {"kbit", 1000ull}};
  for (const auto& [suffix, factor] : units) {
    if (bps >= factor) {
      char buf[32];
      if (bps % factor == 0)
        std::snprintf(buf, sizeof buf, "%llu%s", (unsigned long long)(bps / factor), suffix);
      else
        std::snprintf(buf, sizeof buf, "%g%s", double(bps) / double(factor), suffix);
      return buf;
    }
  }
  return std::to_string(bps) + "bit";
}

NetResult<uint64_t> parse_duration_us(std::string_view text) {
  static const std::pair<std::string_view, double> units[] = {{"us", 1}, {"ms", 1e3}, {"s", 1e6}};
  for (const auto& [suffix, factor] : units) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      const std::string_view number = text.substr(0, text.size() - suffix.size());
      double v = 0;
      const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
      if (ec == std::errc() && end == number.data() + number.size() && v >= 0 && v < 1e9)
        return uint64_t(std::llround(v * factor));
      break;
    }
  }
  return plan_error("bad duration '" + std::string(text) + "' (expected e.g. 100ms, 2s, 500us)");
}

// ---------------------------------------------------------------------------------------------
// Faults

ordered_json FaultState::to_json() const {
  ordered_json j;
  ordered_json jl = ordered_json::object();
  for (const auto& [name, f] : links)
    jl[name] = {
        {"blackhole", f.blackhole}, {"loss_percent", f.loss_percent}, {"rate_bps", f.rate_bps}};
  j["links"] = jl;
  j["blackholed_switches"] = blackholed_switches;
  return j;
}

NetResult<FaultState> FaultState::from_json(const json& j) {
  FaultState s;
  try {
    if (j.contains("links")) {
      for (const auto& [name, f] : j.at("links").items()) {
        LinkFaults lf;
        lf.blackhole = f.value("blackhole", false);
        lf.loss_percent = f.value("loss_percent", 0);
        lf.rate_bps = f.value("rate_bps", uint64_t(0));
        s.links[name] = lf;
      }
    }
    if (j.contains("blackholed_switches"))
      for (const auto& sw : j.at("blackholed_switches"))
        s.blackholed_switches.insert(sw);
  } catch (const json::exception& e) {
    return plan_error(std::string("faults.json: ") + e.what());
  }
  return s;
}

std::string nft_script(const FabricPlan& plan, const FaultState& faults, std::string_view ns) {
  // "table X" then "delete table X" in one transaction: removes the table whether or not it
  // existed (a bare delete fails when it does not).
  const std::string table = "table netdev " + std::string(kNftTable);
  std::string out = table + "\ndelete " + table + "\n";
  std::string chains;
  const Node* owner = nullptr;
  for (const auto& n : plan.nodes)
    if (n.ns == ns) owner = &n;
  const bool switch_dark = owner && faults.blackholed_switches.contains(owner->id);
  for (const Link* l : plan.links_in(ns)) {
    const LinkEnd& e = l->upper.ns == ns ? l->upper : l->lower;
    LinkFaults f;
    if (auto it = faults.links.find(l->name); it != faults.links.end()) f = it->second;
    std::string rule;
    if (switch_dark || f.blackhole)
      rule = "counter drop";
    else if (f.loss_percent > 0)
      rule = "numgen random mod 100 < " + std::to_string(f.loss_percent) + " counter drop";
    else
      continue;
    chains += "  chain in_" + e.ifname + " {\n    type filter hook ingress device \"" + e.ifname +
              "\" priority 0; policy accept;\n    " + rule + "\n  }\n";
  }
  if (!chains.empty()) out += table + " {\n" + chains + "}\n";
  return out;
}

namespace {

// A switch of plane p: its index, names, uSID and SID; a leaf lists its hosts.
ordered_json describe_switch(const FabricSpec& s, const Node& n) {
  ordered_json o;
  o[n.kind == NodeKind::kLeaf ? "leaf" : "spine"] = n.index;
  o["id"] = n.id;
  o["namespace"] = n.ns;
  o["usid"] = n.usid;
  o["usid_hex"] = hex4(n.usid);
  if (has_source_routing(s.dataplane)) o["sid"] = usid_prefix(n.plane, n.usid);
  if (n.kind == NodeKind::kLeaf) {
    std::vector<int> hosts;
    for (int h = 0; h < s.hosts; ++h)
      if (leaf_of_host(s, h) == n.index) hosts.push_back(h);
    o["hosts"] = hosts;
  }
  return o;
}

// Plane p: its locator block and its leaves and spines.
ordered_json describe_plane(const FabricPlan& plan, int p) {
  ordered_json plane;
  plane["plane"] = p;
  plane["block"] = block_prefix(p);
  plane["block_hex"] = hex4(plane_block(p) >> 16) + hex4(plane_block(p) & 0xFFFF);
  ordered_json leaves = ordered_json::array();
  ordered_json spines = ordered_json::array();
  for (const auto& n : plan.nodes) {
    if (n.plane != p) continue;
    (n.kind == NodeKind::kLeaf ? leaves : spines).push_back(describe_switch(plan.spec, n));
  }
  plane["leaves"] = leaves;
  plane["spines"] = spines;
  return plane;
}

// Host h: its names, uSID, leaf, and per plane its port (interface, address, link, gateway).
ordered_json describe_host(const FabricPlan& plan, int h) {
  const FabricSpec& s = plan.spec;
  const Node& n = plan.nodes[size_t(h)];
  ordered_json o;
  o["host"] = h;
  o["id"] = n.id;
  o["namespace"] = n.ns;
  o["usid"] = n.usid;
  o["usid_hex"] = hex4(n.usid);
  o["leaf"] = leaf_of_host(s, h);
  ordered_json ports = ordered_json::array();
  for (int p = 0; p < s.planes; ++p) {
    const Link& l = plan.links[size_t(h * s.planes + p)];
    ports.push_back({{"plane", p},
                     {"interface", l.lower.ifname},
                     {"address", format_ipv6(host_address(p, h))},
                     {"link", l.name},
                     {"link_address", l.lower.address},
                     {"gateway", l.upper.ip}});
  }
  o["ports"] = ports;
  return o;
}

ordered_json describe_link(const Link& l) {
  ordered_json o;
  o["name"] = l.name;
  o["kind"] = l.kind == LinkKind::kHostLeaf ? "host-leaf" : "leaf-spine";
  o["plane"] = l.plane;
  if (l.kind == LinkKind::kHostLeaf) o["host"] = l.host;
  o["leaf"] = l.leaf;
  if (l.kind == LinkKind::kLeafSpine) o["spine"] = l.spine;
  for (const auto* e : {&l.upper, &l.lower})
    o[e == &l.upper ? "upper" : "lower"] = {{"node", e->node},
                                            {"namespace", e->ns},
                                            {"interface", e->ifname},
                                            {"address", e->address},
                                            {"mac", e->mac}};
  return o;
}

}  // namespace

ordered_json describe(const FabricPlan& plan) {
  const FabricSpec& s = plan.spec;
  ordered_json j;
  j["schema"] = "mrc-fabric/1";
  j["name"] = s.name;
  j["spec"] = {{"hosts", s.hosts},   {"planes", s.planes}, {"leaves", s.leaves},
               {"spines", s.spines}, {"mtu", s.mtu},       {"rate_bps", s.rate_bps}};
  j["dataplane"] = dataplane_name(s.dataplane);
  j["source_routing"] = has_source_routing(s.dataplane);
  j["usid"] = {{"format", "F3216"},
               {"block_bits", 32},
               {"usid_bits", 16},
               {"leaf_usid_base", wire::kLeafUsidBase},
               {"host_usid_base", wire::kHostUsidBase},
               {"spine_usid_base", wire::kSpineUsidBase}};
  j["multipath_hash"] = {
      {"policy", kMultipathHashPolicy},
      {"fields", kMultipathHashFields},
      {"fields_meaning", "src addr, dst addr, next header, flow label, UDP src port, dst port"}};
  ordered_json planes = ordered_json::array();
  for (int p = 0; p < s.planes; ++p)
    planes.push_back(describe_plane(plan, p));
  j["planes"] = planes;
  ordered_json hosts = ordered_json::array();
  for (int h = 0; h < s.hosts; ++h)
    hosts.push_back(describe_host(plan, h));
  j["hosts"] = hosts;
  ordered_json links = ordered_json::array();
  for (const auto& l : plan.links)
    links.push_back(describe_link(l));
  j["links"] = links;
  return j;
}

NetResult<FabricSpec> spec_from_description(const json& j) {
  FabricSpec s;
  try {
    if (j.value("schema", std::string()) != "mrc-fabric/1")
      return plan_error("fabric.json: unknown schema (expected mrc-fabric/1)");
    s.name = j.at("name").get<std::string>();
    const auto& js = j.at("spec");
    s.hosts = js.at("hosts").get<int>();
    s.planes = js.at("planes").get<int>();
    s.leaves = js.at("leaves").get<int>();
    s.spines = js.at("spines").get<int>();
    s.mtu = js.at("mtu").get<int>();
    s.rate_bps = js.at("rate_bps").get<uint64_t>();
    // Written since the data planes exist; a description without it is a kernel SRv6 fabric.
    const std::string dp = j.value("dataplane", std::string("kernel"));
    const auto parsed = parse_dataplane(dp);
    if (!parsed || *parsed == DataPlane::kAuto)
      return plan_error("fabric.json: unknown data plane '" + dp + "'");
    s.dataplane = *parsed;
  } catch (const json::exception& e) {
    return plan_error(std::string("fabric.json: ") + e.what());
  }
  if (auto ok = validate(s); !ok) return plan_error("fabric.json: " + ok.error().message);
  return s;
}

NetResult<HostView> host_view(const FabricSpec& spec, int host) {
  if (auto ok = validate(spec); !ok) return std::unexpected(ok.error());
  if (host < 0 || host >= spec.hosts)
    return plan_error("no host " + std::to_string(host) + " (the fabric has " +
                      std::to_string(spec.hosts) + ")");
  HostView v;
  v.netns = spec.name + "-" + host_id(host);
  for (int p = 0; p < spec.planes; ++p) {
    v.addresses.push_back(format_ipv6(host_address(p, host)));
    v.leaf_usids.push_back(leaf_usid(leaf_of_host(spec, host)));
    std::vector<uint16_t> spines;
    for (int sp = 0; sp < spec.spines; ++sp)
      spines.push_back(spine_usid(sp));
    v.spine_usids.push_back(std::move(spines));
  }
  return v;
}

NetResult<HostView> host_view_from_file(const std::string& path, int host) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return plan_error(path + " is a directory");
  std::ifstream in(path);
  if (!in) return plan_error("cannot read " + path);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return plan_error(path + ": not JSON");
  auto spec = spec_from_description(j);
  if (!spec) return plan_error(path + ": " + spec.error().message);
  auto view = host_view(*spec, host);
  if (!view) return plan_error(path + ": " + view.error().message);
  return view;
}

}  // namespace mrc::net
