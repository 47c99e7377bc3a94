#include "net/fabric.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>

#include "net/route_netlink.h"
#include "net/sockets.h"
#include "wire/usid.h"

namespace mrc::net {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string hex4(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep = " ") {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    out += l;
    out += '\n';
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
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

LinkEnd make_end(const Node& node, std::string ifname, const wire::Ipv6Addr& addr) {
  LinkEnd e;
  e.node = node.id;
  e.ns = node.ns;
  e.ifname = std::move(ifname);
  e.ip = format_ipv6(addr);
  e.address = e.ip + "/64";
  return e;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shape and address plan

FabricStatus validate(const FabricSpec& s) {
  if (s.name.empty() || s.name.size() > size_t(kMaxNameLength))
    return fabric_error("fabric name must have 1.." + std::to_string(kMaxNameLength) +
                        " characters");
  for (char c : s.name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok)
      return fabric_error("fabric name '" + s.name +
                          "' may hold only letters, digits, '_' and '-' (it prefixes namespace "
                          "names and is passed to ip)");
  }
  if (s.hosts < 2 || s.hosts > kMaxHosts)
    return fabric_error("--hosts must be in 2.." + std::to_string(kMaxHosts));
  if (s.planes < 1 || s.planes > kMaxPlanes)
    return fabric_error("--planes must be in 1.." + std::to_string(kMaxPlanes));
  if (s.leaves < 1 || s.leaves > kMaxLeaves)
    return fabric_error("--leaves must be in 1.." + std::to_string(kMaxLeaves));
  if (s.spines < 1 || s.spines > kMaxSpines)
    return fabric_error("--spines must be in 1.." + std::to_string(kMaxSpines));
  if (s.leaves > s.hosts)
    return fabric_error("--leaves (" + std::to_string(s.leaves) + ") exceeds --hosts (" +
                        std::to_string(s.hosts) + "): a leaf would have no host");
  if (s.mtu < 1280 || s.mtu > 65535)
    return fabric_error("--mtu must be in 1280..65535 (IPv6 needs at least 1280)");
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

FabricResult<FabricPlan> plan_fabric(const FabricSpec& spec) {
  if (auto ok = validate(spec); !ok) return std::unexpected(ok.error());
  FabricPlan plan;
  plan.spec = spec;
  const std::string prefix = spec.name + "-";

  // Nodes: hosts, then per plane leaves and spines. Indexes are recomputed below by id.
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
  const auto host_node = [&](int h) -> const Node& { return plan.nodes[size_t(h)]; };
  const auto leaf_node = [&](int p, int l) -> const Node& {
    return plan.nodes[size_t(spec.hosts + p * (spec.leaves + spec.spines) + l)];
  };
  const auto spine_node = [&](int p, int s) -> const Node& {
    return plan.nodes[size_t(spec.hosts + p * (spec.leaves + spec.spines) + spec.leaves + s)];
  };

  // Links. Host links host-major (h0-p0, h0-p1, h1-p0, ...), then leaf-spine links per plane.
  for (int h = 0; h < spec.hosts; ++h) {
    for (int p = 0; p < spec.planes; ++p) {
      Link link;
      link.name = host_link_name(h, p);
      link.kind = LinkKind::kHostLeaf;
      link.plane = p;
      link.host = h;
      link.leaf = leaf_of_host(spec, h);
      link.upper =
          make_end(leaf_node(p, link.leaf), host_id(h), link_address(p, host_usid(h), 0, 1));
      link.lower =
          make_end(host_node(h), "p" + std::to_string(p), link_address(p, host_usid(h), 0, 2));
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
        link.upper = make_end(spine_node(p, s), "l" + std::to_string(l),
                              link_address(p, spine_usid(s), leaf_usid(l), 1));
        link.lower = make_end(leaf_node(p, l), "s" + std::to_string(s),
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

  const auto host_link = [&](int h, int p) -> const Link& {
    return plan.links[size_t(h * spec.planes + p)];
  };
  const auto fabric_link = [&](int p, int l, int s) -> const Link& {
    return plan.links[size_t(spec.hosts * spec.planes + (p * spec.leaves + l) * spec.spines + s)];
  };

  // Routes. Hosts: the plane's block out of the plane's port, sourced from the port address.
  for (int h = 0; h < spec.hosts; ++h) {
    for (int p = 0; p < spec.planes; ++p) {
      const Link& l = host_link(h, p);
      Route r;
      r.ns = host_node(h).ns;
      r.prefix = block_prefix(p);
      r.nexthops = {{l.upper.ip, l.lower.ifname}};
      r.src = format_ipv6(host_address(p, h));
      plan.routes.push_back(std::move(r));
    }
  }
  for (int p = 0; p < spec.planes; ++p) {
    for (int l = 0; l < spec.leaves; ++l) {
      const Node& leaf = leaf_node(p, l);
      plan.routes.push_back(
          {leaf.ns, usid_prefix(p, leaf_usid(l)), RouteKind::kSeg6End, {}, {}, false});
      for (int s = 0; s < spec.spines; ++s) {
        const Link& up = fabric_link(p, l, s);
        plan.routes.push_back({leaf.ns,
                               usid_prefix(p, spine_usid(s)),
                               RouteKind::kForward,
                               {{up.upper.ip, up.lower.ifname}},
                               {},
                               false});
      }
      for (int h = 0; h < spec.hosts; ++h) {
        Route r{leaf.ns, usid_prefix(p, host_usid(h)), RouteKind::kForward, {}, {}, false};
        if (leaf_of_host(spec, h) == l) {
          const Link& down = host_link(h, p);
          r.nexthops = {{down.lower.ip, down.upper.ifname}};
        } else {
          // Plain mode only: any spine reaches the host's leaf (ECMP by the multipath hash).
          r.plain = true;
          for (int s = 0; s < spec.spines; ++s) {
            const Link& up = fabric_link(p, l, s);
            r.nexthops.push_back({up.upper.ip, up.lower.ifname});
          }
        }
        plan.routes.push_back(std::move(r));
      }
    }
    for (int s = 0; s < spec.spines; ++s) {
      const Node& spine = spine_node(p, s);
      plan.routes.push_back(
          {spine.ns, usid_prefix(p, spine_usid(s)), RouteKind::kSeg6End, {}, {}, false});
      for (int l = 0; l < spec.leaves; ++l) {
        const Link& down = fabric_link(p, l, s);
        plan.routes.push_back({spine.ns,
                               usid_prefix(p, leaf_usid(l)),
                               RouteKind::kForward,
                               {{down.lower.ip, down.upper.ifname}},
                               {},
                               false});
      }
      for (int h = 0; h < spec.hosts; ++h) {
        const Link& down = fabric_link(p, leaf_of_host(spec, h), s);
        plan.routes.push_back({spine.ns,
                               usid_prefix(p, host_usid(h)),
                               RouteKind::kForward,
                               {{down.lower.ip, down.upper.ifname}},
                               {},
                               true});
      }
    }
  }
  return plan;
}

std::vector<Sysctl> sysctls_for(const Node& node) {
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
    out.push_back({c + "seg6_enabled", "1"});
    out.push_back({c + "accept_ra", "0"});
    out.push_back({c + "router_solicitations", "0"});
    out.push_back({c + "ignore_routes_with_linkdown", "1"});
  }
  // lo exists before `default` is written.
  out.push_back({"net.ipv6.conf.lo.seg6_enabled", "1"});
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
    out.push_back("link add name " + l.lower.ifname + " netns " + l.lower.ns +
                  " type veth peer name " + l.upper.ifname + " netns " + l.upper.ns);
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

std::vector<std::string> node_setup_lines(const FabricPlan& plan, const Node& node) {
  std::vector<std::string> out{"link set lo up"};
  if (node.kind != NodeKind::kHost) {
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

FabricResult<uint64_t> parse_rate(std::string_view text) {
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
    return fabric_error("bad rate '" + std::string(text) +
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

FabricResult<uint64_t> parse_duration_us(std::string_view text) {
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
  return fabric_error("bad duration '" + std::string(text) + "' (expected e.g. 100ms, 2s, 500us)");
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

FabricResult<FaultState> FaultState::from_json(const json& j) {
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
    return fabric_error(std::string("faults.json: ") + e.what());
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

ordered_json describe(const FabricPlan& plan) {
  const FabricSpec& s = plan.spec;
  ordered_json j;
  j["schema"] = "mrc-fabric/1";
  j["name"] = s.name;
  j["spec"] = {{"hosts", s.hosts},   {"planes", s.planes}, {"leaves", s.leaves},
               {"spines", s.spines}, {"mtu", s.mtu},       {"rate_bps", s.rate_bps}};
  j["usid"] = {{"format", "F3216"},        {"block_bits", 32},         {"usid_bits", 16},
               {"leaf_usid_base", 0x0001}, {"host_usid_base", 0x4000}, {"spine_usid_base", 0x8000}};
  j["multipath_hash"] = {
      {"policy", kMultipathHashPolicy},
      {"fields", kMultipathHashFields},
      {"fields_meaning", "src addr, dst addr, next header, flow label, UDP src port, dst port"}};
  ordered_json planes = ordered_json::array();
  for (int p = 0; p < s.planes; ++p) {
    ordered_json plane;
    plane["plane"] = p;
    plane["block"] = block_prefix(p);
    plane["block_hex"] = hex4(plane_block(p) >> 16) + hex4(plane_block(p) & 0xFFFF);
    ordered_json leaves = ordered_json::array();
    ordered_json spines = ordered_json::array();
    for (const auto& n : plan.nodes) {
      if (n.plane != p) continue;
      ordered_json o;
      o[n.kind == NodeKind::kLeaf ? "leaf" : "spine"] = n.index;
      o["id"] = n.id;
      o["namespace"] = n.ns;
      o["usid"] = n.usid;
      o["usid_hex"] = hex4(n.usid);
      o["sid"] = usid_prefix(p, n.usid);
      if (n.kind == NodeKind::kLeaf) {
        std::vector<int> hosts;
        for (int h = 0; h < s.hosts; ++h)
          if (leaf_of_host(s, h) == n.index) hosts.push_back(h);
        o["hosts"] = hosts;
        leaves.push_back(o);
      } else {
        spines.push_back(o);
      }
    }
    plane["leaves"] = leaves;
    plane["spines"] = spines;
    planes.push_back(plane);
  }
  j["planes"] = planes;
  ordered_json hosts = ordered_json::array();
  for (int h = 0; h < s.hosts; ++h) {
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
    hosts.push_back(o);
  }
  j["hosts"] = hosts;
  ordered_json links = ordered_json::array();
  for (const auto& l : plan.links) {
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
                                              {"address", e->address}};
    links.push_back(o);
  }
  j["links"] = links;
  return j;
}

FabricResult<FabricSpec> spec_from_description(const json& j) {
  FabricSpec s;
  try {
    if (j.value("schema", std::string()) != "mrc-fabric/1")
      return fabric_error("fabric.json: unknown schema (expected mrc-fabric/1)");
    s.name = j.at("name").get<std::string>();
    const auto& js = j.at("spec");
    s.hosts = js.at("hosts").get<int>();
    s.planes = js.at("planes").get<int>();
    s.leaves = js.at("leaves").get<int>();
    s.spines = js.at("spines").get<int>();
    s.mtu = js.at("mtu").get<int>();
    s.rate_bps = js.at("rate_bps").get<uint64_t>();
  } catch (const json::exception& e) {
    return fabric_error(std::string("fabric.json: ") + e.what());
  }
  if (auto ok = validate(s); !ok) return std::unexpected("fabric.json: " + ok.error());
  return s;
}

// ---------------------------------------------------------------------------------------------
// Apply

namespace {

// `ip`, `tc` and `nft` live in /usr/sbin, which a non-login root shell's PATH may lack.
std::string resolve_tool(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = getenv("PATH") ? getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

// Writes a child's complaint to its stderr without allocating (after fork).
void child_complain(const char* what, const char* detail) {
  const char* err = strerror(errno);
  for (const char* s : {what, " ", detail, ": ", err, "\n"}) {
    if (write(2, s, strlen(s)) < 0) break;
  }
}

int enter_netns(const std::string& netns) {
  const std::string path = "/run/netns/" + netns;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int rc = setns(fd, CLONE_NEWNET);
  close(fd);
  return rc;
}

// A child's stdin, stdout and stderr are anonymous memory files, not pipes: the parent writes
// the whole input before the fork and reads the output after the exit, so children can run
// side by side without a poll loop and none can block on a full pipe.
int memfd_with(std::string_view data) {
  const int fd = memfd_create("mrc-fabric", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    done += size_t(w);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

std::string read_memfd(int fd) {
  std::string out;
  char buf[8192];
  off_t off = 0;
  while (true) {
    const ssize_t r = pread(fd, buf, sizeof buf, off);
    if (r <= 0) break;
    out.append(buf, size_t(r));
    off += r;
  }
  return out;
}

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

// fork and run `child` (which returns an exit code or execs) with `input` on its stdin.
template <typename ChildFn>
FabricResult<Spawned> spawn_child(ChildFn child, std::string_view input, const std::string& what) {
  const int in = memfd_with(input);
  const int out = memfd_with({});
  const int err = memfd_with({});
  if (in < 0 || out < 0 || err < 0) {
    for (int fd : {in, out, err})
      if (fd >= 0) close(fd);
    return fabric_error(what + ": memfd: " + strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {in, out, err})
      close(fd);
    return fabric_error(what + ": fork: " + strerror(errno));
  }
  if (pid == 0) {
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    _exit(child());
  }
  close(in);
  return Spawned{pid, out, err};
}

CommandOutput wait_child(const Spawned& s) {
  int status = 0;
  while (waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
  }
  CommandOutput result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_memfd(s.out_fd);
  result.err = read_memfd(s.err_fd);
  close(s.out_fd);
  close(s.err_fd);
  return result;
}

template <typename ChildFn>
FabricResult<CommandOutput> run_child(ChildFn child, std::string_view input,
                                      const std::string& what) {
  auto s = spawn_child(child, input, what);
  if (!s) return std::unexpected(s.error());
  return wait_child(*s);
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

// One unit of apply work, run in a child process: a command (argv), or when argv is empty,
// sysctl writes. Both inside `netns` when it is set.
struct Job {
  std::string netns;
  std::vector<std::string> argv;
  std::string input;
  std::vector<Sysctl> sysctls;

  std::string what() const {
    std::string w = argv.empty() ? "sysctl" : join(argv);
    if (!netns.empty()) w += " (in " + netns + ")";
    return w;
  }
};

// Everything a job's child needs, allocated before the fork.
struct PreparedJob {
  const Job* job = nullptr;
  std::string tool;
  std::vector<char*> cargv;
  std::vector<std::string> paths;  // /proc/sys/... for each sysctl

  explicit PreparedJob(const Job& j) : job(&j) {
    if (!j.argv.empty()) {
      tool = resolve_tool(j.argv[0]);
      for (const auto& a : j.argv)
        cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
    }
    for (const auto& s : j.sysctls) {
      // /proc/sys/net shows the network namespace of the task that opens it: the child
      // writes after entering `netns`.
      std::string path = "/proc/sys/" + s.key;
      std::replace(path.begin() + 10, path.end(), '.', '/');
      paths.push_back(std::move(path));
    }
  }

  int run_in_child() {
    if (!job->netns.empty() && enter_netns(job->netns) != 0) {
      child_complain("setns", job->netns.c_str());
      return 126;
    }
    if (!cargv.empty()) {
      execv(tool.c_str(), cargv.data());
      child_complain("exec", tool.c_str());
      return 127;
    }
    for (size_t i = 0; i < paths.size(); ++i) {
      const Sysctl& s = job->sysctls[i];
      const int fd = open(paths[i].c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        if (s.optional && errno == ENOENT) continue;
        child_complain("open", paths[i].c_str());
        return 1;
      }
      const bool ok = write(fd, s.value.data(), s.value.size()) == ssize_t(s.value.size());
      close(fd);
      if (!ok && !s.optional) {
        child_complain("write", paths[i].c_str());
        return 1;
      }
    }
    return 0;
  }
};

std::string trimmed(std::string s);

// Runs jobs side by side, at most `parallel` at a time (namespaces are independent; on a
// loaded machine a process start costs 10-30 ms, so a serial `up` would take seconds).
// Every job's output, in job order; a job that could not be started has an error. With
// `stop_on_failure`, no job is started after one has failed (those say "not run").
std::vector<FabricResult<CommandOutput>> run_jobs_collect(const std::vector<Job>& jobs,
                                                          bool stop_on_failure,
                                                          size_t parallel = 8) {
  std::vector<PreparedJob> prepared;
  prepared.reserve(jobs.size());
  for (const auto& j : jobs)
    prepared.emplace_back(j);
  std::vector<FabricResult<CommandOutput>> results(jobs.size(),
                                                   fabric_error("not run (an earlier job failed)"));
  std::vector<std::pair<size_t, Spawned>> running;
  bool failed = false;
  const auto reap_one = [&] {
    const auto [index, spawned] = running.front();
    running.erase(running.begin());
    results[index] = wait_child(spawned);
    failed = failed || results[index]->exit_code != 0;
  };
  for (size_t i = 0; i < prepared.size(); ++i) {
    if (running.size() >= parallel) reap_one();
    if (stop_on_failure && failed) break;
    auto s = spawn_child([&] { return prepared[i].run_in_child(); }, jobs[i].input, jobs[i].what());
    if (!s) {
      results[i] = std::unexpected(s.error());
      failed = true;
      continue;
    }
    running.emplace_back(i, *s);
  }
  while (!running.empty())
    reap_one();
  return results;
}

// The same, stopping at the first failure, which it returns.
FabricStatus run_jobs(const std::vector<Job>& jobs) {
  const auto results = run_jobs_collect(jobs, /*stop_on_failure=*/true);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!results[i]) {
      if (results[i].error().starts_with("not run")) continue;
      return std::unexpected(results[i].error());
    }
    if (results[i]->exit_code != 0)
      return fabric_error(jobs[i].what() + " exited with " + std::to_string(results[i]->exit_code) +
                          ": " + trimmed(results[i]->err + results[i]->out));
  }
  return {};
}

std::vector<std::string> list_netns() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec))
    out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> fabric_namespaces(std::string_view name) {
  std::vector<std::string> out;
  for (auto& ns : list_netns())
    if (is_fabric_namespace(name, ns)) out.push_back(std::move(ns));
  return out;
}

// `ip -batch` inside `ns` (entered by setns in the child: `ip -n` would also build a private
// mount namespace and remount /sys, about 10 ms per call that link flapping cannot afford).
FabricStatus ip_batch(const std::string& ns, const std::vector<std::string>& lines,
                      bool force = false) {
  std::vector<std::string> argv{"ip"};
  if (force) argv.push_back("-force");
  argv.insert(argv.end(), {"-batch", "-"});
  return run_checked(argv, joined_lines(lines), ns);
}

FabricStatus write_file_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) return fabric_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return fabric_error("cannot rename " + tmp.string() + ": " + ec.message());
  return {};
}

FabricResult<json> read_json(const fs::path& path) {
  std::ifstream f(path);
  if (!f) return fabric_error("cannot read " + path.string());
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    return fabric_error(path.string() + ": " + e.what());
  }
}

FabricStatus save_faults(std::string_view name, const FaultState& faults) {
  return write_file_atomically(fs::path(state_dir(name)) / "faults.json",
                               faults.to_json().dump(2) + "\n");
}

FabricStatus apply_nft(const FabricPlan& plan, const FaultState& faults, const std::string& ns) {
  return run_checked({"nft", "-f", "-"}, nft_script(plan, faults, ns), ns);
}

FabricStatus apply_rate(const FabricPlan& plan, const Link& link, uint64_t rate_bps) {
  for (const LinkEnd* e : {&link.upper, &link.lower}) {
    std::vector<std::string> argv{"tc"};
    for (auto& a : tbf_args(e->ifname, rate_bps, plan.spec.mtu))
      argv.push_back(std::move(a));
    if (rate_bps == 0) {
      // Deleting a root qdisc that is not there fails; that is the state we want anyway.
      auto r = run_command(argv, {}, e->ns);
      if (!r) return std::unexpected(r.error());
      continue;
    }
    if (auto ok = run_checked(argv, {}, e->ns); !ok) return ok;
  }
  return {};
}

std::string known_names_hint(const FabricPlan& plan, bool switches) {
  std::string hint = " (links look like " + plan.links.front().name + ", " + plan.links.back().name;
  if (switches) hint += "; switches like " + leaf_id(0, 0) + ", " + spine_id(0, 0);
  return hint + ")";
}

// A socket that lives in `ns`: enter the namespace on this thread, create, come back.
// (A socket stays in the namespace it was created in.)
FabricResult<int> socket_in_netns(const std::string& ns,
                                  const std::function<FabricResult<int>()>& open_socket) {
  const int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) return fabric_error(std::string("open own netns: ") + strerror(errno));
  const std::string path = "/run/netns/" + ns;
  const int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    close(self);
    return fabric_error("open " + path + ": " + strerror(errno));
  }
  int fd = -1;
  std::string err;
  if (setns(target, CLONE_NEWNET) != 0) {
    err = "setns " + ns + ": " + strerror(errno);
  } else {
    auto opened = open_socket();
    if (opened)
      fd = *opened;
    else
      err = opened.error();
    if (setns(self, CLONE_NEWNET) != 0) {
      // Stuck in the wrong namespace: nothing after this could be trusted.
      std::perror("setns back to the original network namespace");
      std::abort();
    }
  }
  close(self);
  close(target);
  if (fd < 0) return fabric_error(err);
  return fd;
}

FabricResult<int> udp_socket_in_netns(const std::string& ns) {
  return socket_in_netns(ns, []() -> FabricResult<int> {
    const int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fabric_error(std::string("socket: ") + strerror(errno));
    return fd;
  });
}

FabricResult<int> interface_index(int sock, const std::string& ifname) {
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
  if (ioctl(sock, SIOCGIFINDEX, &ifr) != 0)
    return fabric_error("interface " + ifname + ": " + strerror(errno));
  return ifr.ifr_ifindex;
}

FabricResult<short> interface_flags(int sock, const std::string& ifname) {
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
  if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0)
    return fabric_error("interface " + ifname + ": " + strerror(errno));
  return ifr.ifr_flags;
}

FabricResult<bool> interface_is_up(int sock, const std::string& ifname) {
  auto flags = interface_flags(sock, ifname);
  if (!flags) return std::unexpected(flags.error());
  return (*flags & IFF_UP) != 0;
}

FabricResult<bool> interface_is_running(int sock, const std::string& ifname) {
  auto flags = interface_flags(sock, ifname);
  if (!flags) return std::unexpected(flags.error());
  return (*flags & IFF_RUNNING) != 0;
}

FabricStatus set_interface_up(int sock, const std::string& ifname, bool up) {
  auto flags = interface_flags(sock, ifname);
  if (!flags) return std::unexpected(flags.error());
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
  ifr.ifr_flags = *flags;
  if (up)
    ifr.ifr_flags = short(ifr.ifr_flags | IFF_UP);
  else
    ifr.ifr_flags = short(ifr.ifr_flags & ~IFF_UP);
  if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0)
    return fabric_error("set " + ifname + (up ? " up: " : " down: ") + strerror(errno));
  return {};
}

}  // namespace

FabricResult<CommandOutput> run_command(const std::vector<std::string>& argv,
                                        std::string_view input, std::string_view netns) {
  if (argv.empty()) return fabric_error("run_command: empty argv");
  const Job job{std::string(netns), argv, {}, {}};
  PreparedJob prepared(job);
  return run_child([&] { return prepared.run_in_child(); }, input, job.what());
}

FabricStatus run_checked(const std::vector<std::string>& argv, std::string_view input,
                         std::string_view netns) {
  auto r = run_command(argv, input, netns);
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) {
    std::string msg = join(argv);
    if (!netns.empty()) msg += " (in " + std::string(netns) + ")";
    msg += " exited with " + std::to_string(r->exit_code) + ": " + trimmed(r->err + r->out);
    return fabric_error(msg);
  }
  return {};
}

FabricStatus check_privileges() {
  if (geteuid() != 0) return fabric_error("mrc-fabric needs root (it creates network namespaces)");
  auto r = run_command({"ip", "netns", "list"});
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0)
    return fabric_error("`ip netns` is unavailable: " + trimmed(r->err) + " (install iproute2)");
  return {};
}

std::string state_dir(std::string_view name) {
  return "/run/mrc-fabric/" + std::string(name);
}

FabricResult<FabricPlan> fabric_up(const FabricSpec& spec, const UpOptions& options) {
  auto plan = plan_fabric(spec);
  if (!plan) return plan;
  if (auto ok = check_privileges(); !ok) return std::unexpected(ok.error());
  if (const auto existing = fabric_namespaces(spec.name); !existing.empty()) {
    if (!options.replace)
      return fabric_error("fabric '" + spec.name + "' already exists (" + existing.front() +
                          ", ...): run `mrc-fabric down --name " + spec.name +
                          "` first, or pass --replace");
    if (auto down = fabric_down(spec.name); !down) return std::unexpected(down.error());
  }
  const auto fail_and_clean = [&](const std::string& msg) -> FabricResult<FabricPlan> {
    (void)fabric_down(spec.name);
    return fabric_error("up failed, fabric removed again: " + msg);
  };
  std::error_code ec;
  fs::create_directories(state_dir(spec.name), ec);
  if (ec) return fabric_error("cannot create " + state_dir(spec.name) + ": " + ec.message());

  if (auto ok = ip_batch({}, netns_add_lines(*plan)); !ok) return fail_and_clean(ok.error());
  // Sysctls before the veths exist: conf/default/* applies to interfaces created later.
  std::vector<Job> sysctl_jobs;
  for (const auto& n : plan->nodes)
    sysctl_jobs.push_back({n.ns, {}, {}, sysctls_for(n)});
  if (auto ok = run_jobs(sysctl_jobs); !ok) return fail_and_clean(ok.error());
  if (auto ok = ip_batch({}, veth_lines(*plan)); !ok) return fail_and_clean(ok.error());
  std::vector<Job> setup_jobs;
  for (const auto& n : plan->nodes)
    setup_jobs.push_back(
        {n.ns, {"ip", "-batch", "-"}, joined_lines(node_setup_lines(*plan, n)), {}});
  if (auto ok = run_jobs(setup_jobs); !ok) {
    std::string msg = ok.error();
    if (msg.find("seg6local") != std::string::npos)
      msg +=
          " (the kernel needs SRv6 seg6local End with the NEXT-C-SID flavour: Linux >= 6.1"
          " with CONFIG_IPV6_SEG6_LWTUNNEL, and iproute2 >= 6.1)";
    return fail_and_clean(msg);
  }
  if (spec.rate_bps > 0) {
    std::vector<Job> tc_jobs;
    for (const auto& n : plan->nodes) {
      std::vector<std::string> lines;
      for (const Link* l : plan->links_in(n.ns)) {
        const LinkEnd& e = l->upper.ns == n.ns ? l->upper : l->lower;
        lines.push_back(join(tbf_args(e.ifname, spec.rate_bps, spec.mtu)));
      }
      tc_jobs.push_back({n.ns, {"tc", "-batch", "-"}, joined_lines(lines), {}});
    }
    if (auto ok = run_jobs(tc_jobs); !ok) return fail_and_clean(ok.error());
  }
  const fs::path dir = state_dir(spec.name);
  if (auto ok = write_file_atomically(dir / "fabric.json", describe(*plan).dump(2) + "\n"); !ok)
    return fail_and_clean(ok.error());
  if (auto ok = save_faults(spec.name, {}); !ok) return fail_and_clean(ok.error());
  return plan;
}

std::vector<int> fabric_processes(std::string_view name) {
  // Like `ip netns pids`: a process is in a namespace when its /proc/PID/ns/net is the same
  // nsfs inode as the namespace's bind mount under /run/netns.
  std::set<std::pair<dev_t, ino_t>> inodes;
  for (const auto& ns : fabric_namespaces(name)) {
    struct stat st {};
    if (stat(("/run/netns/" + ns).c_str(), &st) == 0) inodes.insert({st.st_dev, st.st_ino});
  }
  std::vector<int> pids;
  if (inodes.empty()) return pids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename();
    if (!all_digits(pid)) continue;
    struct stat st {};
    if (stat(("/proc/" + pid + "/ns/net").c_str(), &st) == 0 &&
        inodes.contains({st.st_dev, st.st_ino}))
      pids.push_back(std::stoi(pid));
  }
  return pids;
}

FabricResult<int> fabric_down(std::string_view name, bool kill_processes) {
  const std::string fabric(name);
  FabricSpec probe;
  probe.name = fabric;
  // Only the name matters here; validate it so that nothing odd reaches ip or rm.
  probe.hosts = 2;
  probe.leaves = 1;
  if (auto ok = validate(probe); !ok) return std::unexpected(ok.error());
  if (geteuid() != 0) return fabric_error("mrc-fabric needs root (it removes network namespaces)");
  const fs::path dir = state_dir(fabric);
  // Background flappers of this fabric (processes this tool started; each left its pid).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename();
    if (!file.starts_with("flap-") || !file.ends_with(".pid")) continue;
    std::ifstream f(e.path());
    pid_t pid = 0;
    if (f >> pid && pid > 1) {
      // Only if the pid still names an mrc-fabric flapper (pids are reused).
      std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(cmd)), {});
      if (cmdline.find("flap") != std::string::npos) kill(pid, SIGTERM);
    }
  }
  if (kill_processes) {
    // Processes inside keep a deleted namespace (and its veths) alive until they exit.
    auto pids = fabric_processes(fabric);
    for (int pid : pids)
      kill(pid, SIGTERM);
    for (int wait_ms = 0; !pids.empty() && wait_ms < 1000; wait_ms += 20) {
      usleep(20'000);
      pids = fabric_processes(fabric);
    }
    for (int pid : pids)
      kill(pid, SIGKILL);
  }
  const auto namespaces = fabric_namespaces(fabric);
  if (!namespaces.empty()) {
    std::vector<std::string> lines;
    for (const auto& ns : namespaces)
      lines.push_back("netns del " + ns);
    (void)ip_batch({}, lines, /*force=*/true);
  }
  fs::remove_all(dir, ec);
  if (const auto left = fabric_namespaces(fabric); !left.empty())
    return fabric_error("could not remove namespace " + left.front() + " (and " +
                        std::to_string(left.size() - 1) + " more)");
  return int(namespaces.size());
}

FabricResult<FabricPlan> load_fabric(std::string_view name) {
  const fs::path file = fs::path(state_dir(name)) / "fabric.json";
  if (!fs::exists(file))
    return fabric_error("no fabric '" + std::string(name) + "' (" + file.string() +
                        " missing): run `mrc-fabric up` first");
  auto j = read_json(file);
  if (!j) return std::unexpected(j.error());
  auto spec = spec_from_description(*j);
  if (!spec) return std::unexpected(spec.error());
  return plan_fabric(*spec);
}

FabricResult<FaultState> load_faults(std::string_view name) {
  const fs::path file = fs::path(state_dir(name)) / "faults.json";
  if (!fs::exists(file)) return FaultState{};
  auto j = read_json(file);
  if (!j) return std::unexpected(j.error());
  return FaultState::from_json(*j);
}

FabricResult<std::set<std::string>> down_interfaces(const FabricPlan& plan, std::string_view ns) {
  auto sock = udp_socket_in_netns(std::string(ns));
  if (!sock) return std::unexpected(sock.error());
  std::set<std::string> down;
  std::string err;
  for (const Link* l : plan.links_in(ns)) {
    const LinkEnd& e = l->upper.ns == ns ? l->upper : l->lower;
    auto up = interface_is_up(*sock, e.ifname);
    if (!up) {
      err = std::string(ns) + ": " + up.error();
      break;
    }
    if (!*up) down.insert(e.ifname);
  }
  close(*sock);
  if (!err.empty()) return fabric_error(err);
  return down;
}

// A planned forwarding route as rtnetlink takes it, without nexthops through `down`
// interfaces (nullopt when none is left); `sock` lives in the route's namespace.
FabricResult<std::optional<NetlinkRoute>> netlink_route(const Route& r, int sock,
                                                        const std::set<std::string>& down) {
  NetlinkRoute nr;
  if (auto ok = parse_route_prefix(r.prefix, nr); !ok) return fabric_error(ok.error());
  for (const Nexthop& nh : r.nexthops) {
    if (down.contains(nh.dev)) continue;
    NetlinkNexthop n;
    if (inet_pton(AF_INET6, nh.via.c_str(), &n.gateway) != 1)
      return fabric_error("bad gateway '" + nh.via + "'");
    auto index = interface_index(sock, nh.dev);
    if (!index) return std::unexpected(index.error());
    n.ifindex = *index;
    nr.nexthops.push_back(n);
  }
  if (!r.src.empty()) {
    nr.src.emplace();
    if (inet_pton(AF_INET6, r.src.c_str(), &*nr.src) != 1)
      return fabric_error("bad source '" + r.src + "'");
  }
  if (nr.nexthops.empty()) return std::nullopt;
  return nr;
}

// Re-installs `ns`'s planned forwarding routes without nexthops through interfaces that are
// down (see set_link_admin).
FabricStatus restore_forward_routes(const FabricPlan& plan, const std::string& ns) {
  auto down = down_interfaces(plan, ns);
  if (!down) return std::unexpected(down.error());
  auto sock = udp_socket_in_netns(ns);
  if (!sock) return std::unexpected(sock.error());
  const UniqueFd sock_fd(*sock);
  std::vector<NetlinkRoute> routes;
  for (const Route& r : plan.routes) {
    if (r.ns != ns || r.kind != RouteKind::kForward) continue;
    auto nr = netlink_route(r, sock_fd.get(), *down);
    if (!nr) return fabric_error(ns + ": " + nr.error());
    if (*nr) routes.push_back(std::move(**nr));
  }
  auto nl = socket_in_netns(ns, open_route_netlink);
  if (!nl) return std::unexpected(nl.error());
  const UniqueFd nl_fd(*nl);
  if (auto ok = replace_routes(nl_fd.get(), routes); !ok)
    return fabric_error(ns + ": " + ok.error());
  return {};
}

FabricStatus set_link_admin(const FabricPlan& plan, std::string_view name, bool up) {
  const Link* link = plan.link(name);
  if (!link)
    return fabric_error("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
  // Interface flags by ioctl from sockets in the two namespaces: no process per change, so a
  // link can flap every few milliseconds.
  const std::array<const LinkEnd*, 2> ends{&link->upper, &link->lower};
  std::array<UniqueFd, 2> socks;
  for (size_t i = 0; i < ends.size(); ++i) {
    auto sock = udp_socket_in_netns(ends[i]->ns);
    if (!sock) return std::unexpected(sock.error());
    socks[i] = UniqueFd(*sock);
    if (auto ok = set_interface_up(*sock, ends[i]->ifname, up); !ok)
      return fabric_error(ends[i]->ns + ": " + ok.error());
  }
  if (!up) return {};
  // The kernel activates an interface's queue when linkwatch has seen the carrier come up,
  // from a workqueue shortly after the flag change; until then it drops every packet,
  // neighbour solicitations included, and a lost solicitation is retried only after a second
  // (RetransTimer). Return once both ends run, so that "up" means traffic flows.
  for (int waited_us = 0;; waited_us += 100) {
    bool running = true;
    for (size_t i = 0; i < ends.size() && running; ++i) {
      auto r = interface_is_running(socks[i].get(), ends[i]->ifname);
      if (!r) return fabric_error(ends[i]->ns + ": " + r.error());
      running = *r;
    }
    if (running) break;
    if (waited_us >= 2'000'000)
      return fabric_error("link '" + std::string(name) + "' is up but not running after 2 s");
    const timespec step{0, 100'000};
    nanosleep(&step, nullptr);
  }
  // The kernel deleted every static route through the interface when it went down, and
  // does not bring them back: restore the planned forwarding routes of both ends (replace is
  // idempotent), leaving out nexthops through interfaces that are still down. Over
  // rtnetlink from this process (net/route_netlink.h says why not `ip`); the SRv6 End
  // routes sit on the SID device, which never goes down.
  for (const LinkEnd* e : ends) {
    if (auto ok = restore_forward_routes(plan, e->ns); !ok) return ok;
  }
  return {};
}

FabricStatus set_blackhole(const FabricPlan& plan, std::string_view target, bool on) {
  auto faults = load_faults(plan.spec.name);
  if (!faults) return std::unexpected(faults.error());
  std::vector<std::string> namespaces;
  if (const Link* link = plan.link(target)) {
    faults->links[link->name].blackhole = on;
    namespaces = {link->upper.ns, link->lower.ns};
  } else if (const Node* node = plan.node(target); node && node->kind != NodeKind::kHost) {
    if (on)
      faults->blackholed_switches.insert(node->id);
    else
      faults->blackholed_switches.erase(node->id);
    namespaces = {node->ns};
  } else {
    return fabric_error("unknown link or switch '" + std::string(target) + "'" +
                        known_names_hint(plan, true));
  }
  std::erase_if(faults->links, [](const auto& kv) { return kv.second == LinkFaults{}; });
  if (auto ok = save_faults(plan.spec.name, *faults); !ok) return ok;
  for (const auto& ns : namespaces)
    if (auto ok = apply_nft(plan, *faults, ns); !ok) return ok;
  return {};
}

FabricStatus set_loss(const FabricPlan& plan, std::string_view name, int percent) {
  const Link* link = plan.link(name);
  if (!link)
    return fabric_error("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
  if (percent < 0 || percent > 100) return fabric_error("loss must be 0..100 percent");
  auto faults = load_faults(plan.spec.name);
  if (!faults) return std::unexpected(faults.error());
  faults->links[link->name].loss_percent = percent;
  std::erase_if(faults->links, [](const auto& kv) { return kv.second == LinkFaults{}; });
  if (auto ok = save_faults(plan.spec.name, *faults); !ok) return ok;
  for (const auto& ns : {link->upper.ns, link->lower.ns})
    if (auto ok = apply_nft(plan, *faults, ns); !ok) return ok;
  return {};
}

FabricStatus set_rate(const FabricPlan& plan, std::string_view name, uint64_t rate_bps) {
  const Link* link = plan.link(name);
  if (!link)
    return fabric_error("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
  auto faults = load_faults(plan.spec.name);
  if (!faults) return std::unexpected(faults.error());
  faults->links[link->name].rate_bps = rate_bps;
  std::erase_if(faults->links, [](const auto& kv) { return kv.second == LinkFaults{}; });
  if (auto ok = save_faults(plan.spec.name, *faults); !ok) return ok;
  return apply_rate(plan, *link, rate_bps ? rate_bps : plan.spec.rate_bps);
}

namespace {
volatile sig_atomic_t g_stop_flapping = 0;
void on_stop_signal(int) {
  g_stop_flapping = 1;
}

// Sleeps until `deadline` (CLOCK_MONOTONIC) unless a stop signal arrives first.
void sleep_until(const timespec& deadline) {
  while (!g_stop_flapping &&
         clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
  }
}

timespec add_us(timespec t, uint64_t us) {
  t.tv_sec += time_t(us / 1000000);
  t.tv_nsec += long(us % 1000000) * 1000;
  if (t.tv_nsec >= 1000000000) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000;
  }
  return t;
}
}  // namespace

FabricStatus flap_link(const FabricPlan& plan, std::string_view name, uint64_t period_us, int count,
                       uint64_t duration_us) {
  if (!plan.link(name))
    return fabric_error("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
  if (period_us < 2000) return fabric_error("flap period must be at least 2ms");
  g_stop_flapping = 0;
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  const timespec end = add_us(start, duration_us);
  FabricStatus status;
  timespec next = start;
  for (int i = 0; !g_stop_flapping && (count == 0 || i < count); ++i) {
    if (duration_us > 0 && count == 0) {
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
        break;
    }
    if (status = set_link_admin(plan, name, false); !status) break;
    next = add_us(next, period_us / 2);
    sleep_until(next);
    if (status = set_link_admin(plan, name, true); !status) break;
    next = add_us(next, period_us - period_us / 2);
    sleep_until(next);
  }
  // Always leave the link up (also after a signal between the two halves).
  auto restored = set_link_admin(plan, name, true);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (!status) return status;
  return restored;
}

FabricResult<ordered_json> fabric_status(const FabricPlan& plan) {
  auto faults = load_faults(plan.spec.name);
  if (!faults) return std::unexpected(faults.error());
  // Per namespace: interface flags and counters, and the nft drop counters per chain.
  std::map<std::string, std::map<std::string, json>> devs;       // ns -> ifname -> ip -j
  std::map<std::string, std::map<std::string, uint64_t>> drops;  // ns -> ifname -> packets
  std::vector<Job> jobs;
  for (const auto& n : plan.nodes) {
    jobs.push_back({n.ns, {"ip", "-s", "-j", "link", "show"}, {}, {}});
    jobs.push_back(
        {n.ns, {"nft", "-j", "list", "table", "netdev", std::string(kNftTable)}, {}, {}});
  }
  const auto outputs = run_jobs_collect(jobs, /*stop_on_failure=*/false);
  for (size_t ni = 0; ni < plan.nodes.size(); ++ni) {
    const Node& n = plan.nodes[ni];
    const auto& r = outputs[2 * ni];
    if (!r) return std::unexpected(r.error());
    if (r->exit_code != 0)
      return fabric_error("namespace " + n.ns + " is missing or broken: " + trimmed(r->err));
    try {
      const json listing = json::parse(r->out);
      for (const auto& d : listing)
        devs[n.ns][d.at("ifname")] = d;
    } catch (const json::exception& e) {
      return fabric_error("ip -j in " + n.ns + ": " + e.what());
    }
    const auto& nft = outputs[2 * ni + 1];
    if (!nft || nft->exit_code != 0) continue;  // no table: no faults there
    try {
      const json listing = json::parse(nft->out);
      for (const auto& item : listing.at("nftables")) {
        if (!item.contains("rule")) continue;
        const auto& rule = item["rule"];
        std::string chain = rule.value("chain", "");
        if (!chain.starts_with("in_")) continue;
        for (const auto& expr : rule.at("expr"))
          if (expr.contains("counter"))
            drops[n.ns][chain.substr(3)] += expr["counter"].value("packets", uint64_t(0));
      }
    } catch (const json::exception&) {
      // Counters are a convenience; a format change must not break status.
    }
  }
  ordered_json out;
  out["name"] = plan.spec.name;
  out["blackholed_switches"] = faults->blackholed_switches;
  ordered_json links = ordered_json::array();
  for (const auto& l : plan.links) {
    ordered_json o;
    o["name"] = l.name;
    LinkFaults f;
    if (auto it = faults->links.find(l.name); it != faults->links.end()) f = it->second;
    bool all_up = true, any_up = false;
    ordered_json ends = ordered_json::array();
    for (const LinkEnd* e : {&l.upper, &l.lower}) {
      ordered_json je;
      je["node"] = e->node;
      je["interface"] = e->ifname;
      const auto nsit = devs.find(e->ns);
      const json* d = nullptr;
      if (nsit != devs.end())
        if (auto it = nsit->second.find(e->ifname); it != nsit->second.end()) d = &it->second;
      bool up = false;
      if (d) {
        const auto& flags = d->at("flags");
        up = std::find(flags.begin(), flags.end(), "UP") != flags.end();
        je["operstate"] = d->value("operstate", "");
        const json stats = d->value("stats64", json::object());
        const json rx = stats.value("rx", json::object());
        const json tx = stats.value("tx", json::object());
        je["tx_packets"] = tx.value("packets", uint64_t(0));
        je["tx_bytes"] = tx.value("bytes", uint64_t(0));
        je["tx_dropped"] = tx.value("dropped", uint64_t(0));
        je["rx_packets"] = rx.value("packets", uint64_t(0));
        je["rx_bytes"] = rx.value("bytes", uint64_t(0));
        je["rx_dropped"] = rx.value("dropped", uint64_t(0));
      } else {
        je["operstate"] = "MISSING";
      }
      je["admin_up"] = up;
      uint64_t fault_drops = 0;
      if (auto it = drops.find(e->ns); it != drops.end())
        if (auto jt = it->second.find(e->ifname); jt != it->second.end()) fault_drops = jt->second;
      je["fault_dropped"] = fault_drops;
      all_up = all_up && up;
      any_up = any_up || up;
      ends.push_back(je);
    }
    o["state"] = all_up ? "up" : (any_up ? "half-down" : "down");
    const bool switch_dark = faults->blackholed_switches.contains(l.upper.node) ||
                             faults->blackholed_switches.contains(l.lower.node);
    o["blackhole"] = f.blackhole || switch_dark;
    o["loss_percent"] = f.loss_percent;
    o["rate_bps"] = f.rate_bps ? f.rate_bps : plan.spec.rate_bps;
    o["upper"] = ends[0];
    o["lower"] = ends[1];
    links.push_back(o);
  }
  out["links"] = links;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Probes

std::string Probe::label() const {
  std::string s = host_id(src_host) + "->" + host_id(dst_host) + " p" + std::to_string(plane);
  switch (via) {
    case Via::kSpine:
      return s + " via s" + std::to_string(spine);
    case Via::kSameLeaf:
      return s + " same-leaf";
    case Via::kPlain:
      return s + " plain";
  }
  return s;
}

std::vector<Probe> all_probes(const FabricSpec& spec) {
  std::vector<Probe> out;
  for (int p = 0; p < spec.planes; ++p) {
    for (int a = 0; a < spec.hosts; ++a) {
      for (int b = 0; b < spec.hosts; ++b) {
        if (a == b) continue;
        Probe pr;
        pr.src_host = a;
        pr.dst_host = b;
        pr.plane = p;
        for (int s = 0; s < spec.spines; ++s) {
          pr.via = Probe::Via::kSpine;
          pr.spine = s;
          out.push_back(pr);
        }
        pr.spine = -1;
        if (leaf_of_host(spec, a) == leaf_of_host(spec, b)) {
          pr.via = Probe::Via::kSameLeaf;
          out.push_back(pr);
        }
        pr.via = Probe::Via::kPlain;
        out.push_back(pr);
      }
    }
  }
  return out;
}

namespace {

struct FdCloser {
  std::vector<int> fds;
  ~FdCloser() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
};

constexpr uint32_t kProbeMagic = 0x4D524350;  // "MRCP"

struct ProbePayload {
  uint32_t magic;
  uint32_t index;
  uint64_t nonce;
};

}  // namespace

FabricStatus run_probes(const FabricPlan& plan, std::vector<Probe>& probes, int count,
                        int wait_ms) {
  const FabricSpec& spec = plan.spec;
  FdCloser fds;
  // One receiver per host (any address, any plane), one sender per host port.
  std::vector<int> rx(size_t(spec.hosts), -1);
  std::vector<uint16_t> rx_port(size_t(spec.hosts), 0);
  std::vector<int> tx(size_t(spec.hosts * spec.planes), -1);
  const int one = 1;
  for (int h = 0; h < spec.hosts; ++h) {
    const std::string& ns = plan.nodes[size_t(h)].ns;
    auto r = udp_socket_in_netns(ns);
    if (!r) return std::unexpected(r.error());
    fds.fds.push_back(*r);
    rx[size_t(h)] = *r;
    // Zero checksums are accepted: see UDP_NO_CHECK6_TX below.
    setsockopt(*r, IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one);
    const int rcvbuf = 4 << 20;
    setsockopt(*r, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    if (bind(*r, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0)
      return fabric_error("bind in " + ns + ": " + strerror(errno));
    socklen_t len = sizeof any;
    getsockname(*r, reinterpret_cast<sockaddr*>(&any), &len);
    rx_port[size_t(h)] = ntohs(any.sin6_port);
    for (int p = 0; p < spec.planes; ++p) {
      auto t = udp_socket_in_netns(ns);
      if (!t) return std::unexpected(t.error());
      fds.fds.push_back(*t);
      tx[size_t(h * spec.planes + p)] = *t;
      // The DA is rewritten hop by hop (uSID shift), so a checksum over the sender's DA would
      // be wrong where the packet ends; IPv6 UDP allows zero checksums with this opt-in.
      setsockopt(*t, IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one);
      sockaddr_in6 src{};
      src.sin6_family = AF_INET6;
      const auto a = host_address(p, h);
      std::memcpy(&src.sin6_addr, a.data(), 16);
      if (bind(*t, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0)
        return fabric_error("bind " + format_ipv6(a) + " in " + ns + ": " + strerror(errno));
    }
  }
  for (auto& pr : probes) {
    if (pr.src_host < 0 || pr.src_host >= spec.hosts || pr.dst_host < 0 ||
        pr.dst_host >= spec.hosts || pr.plane < 0 || pr.plane >= spec.planes ||
        (pr.via == Probe::Via::kSpine && (pr.spine < 0 || pr.spine >= spec.spines)))
      return fabric_error("probe " + pr.label() + " is outside the fabric");
    switch (pr.via) {
      case Probe::Via::kSpine:
        pr.destination = format_ipv6(srv6_address(spec, pr.plane, pr.spine, pr.dst_host));
        break;
      case Probe::Via::kSameLeaf:
        pr.destination = format_ipv6(srv6_address(spec, pr.plane, std::nullopt, pr.dst_host));
        break;
      case Probe::Via::kPlain:
        pr.destination = format_ipv6(host_address(pr.plane, pr.dst_host));
        break;
    }
    pr.sent = pr.received = 0;
  }
  const uint64_t nonce = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  const auto drain = [&] {
    for (int fd : rx) {
      ProbePayload msg;
      while (true) {
        const ssize_t n = recv(fd, &msg, sizeof msg, 0);
        if (n < 0) break;
        if (n == sizeof msg && msg.magic == kProbeMagic && msg.nonce == nonce &&
            msg.index < probes.size())
          ++probes[msg.index].received;
      }
    }
  };
  for (int round = 0; round < count; ++round) {
    for (size_t i = 0; i < probes.size(); ++i) {
      Probe& pr = probes[i];
      sockaddr_in6 dst{};
      dst.sin6_family = AF_INET6;
      const auto addr = parse_ipv6(pr.destination);
      std::memcpy(&dst.sin6_addr, addr->data(), 16);
      dst.sin6_port = htons(rx_port[size_t(pr.dst_host)]);
      const ProbePayload msg{kProbeMagic, uint32_t(i), nonce};
      ++pr.sent;
      // Failures (no route while a port is down) are lost probes, not errors.
      (void)sendto(tx[size_t(pr.src_host * spec.planes + pr.plane)], &msg, sizeof msg, 0,
                   reinterpret_cast<sockaddr*>(&dst), sizeof dst);
    }
    drain();
    // Pace rounds a little so that no queue on the way (veth backlog, socket) overflows.
    if (round + 1 < count) usleep(100);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> pfds;
    for (int fd : rx)
      pfds.push_back({fd, POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (poll(pfds.data(), nfds_t(pfds.size()), int(std::max<int64_t>(1, left.count()))) <= 0)
      continue;
    drain();
    bool all = true;
    for (const auto& pr : probes)
      all = all && pr.received >= pr.sent;
    if (all) break;
  }
  return {};
}

}  // namespace mrc::net
