// mrc-fabric: multi-plane two-tier Clos fabrics built from Linux network namespaces. Three data
// planes (DataPlane): the switches forward uSID carriers with the kernel's SRv6 (seg6local End,
// NEXT-C-SID flavour), or with an eBPF program doing the same where the kernel has no SRv6
// (net/usid_bpf.h), or they only route the plain addresses with hashed ECMP.
//
// Four parts, one header each:
//   net/fabric.h        PLAN (pure, no root, tested by fabric_test): FabricSpec -> FabricPlan,
//                       the namespaces, veth links, addresses, sysctls and routes, the
//                       `ip`/`tc`/`nft` lines that realise them, faults.json and fabric.json.
//   net/netns_exec.h    running commands and opening sockets inside namespaces (root).
//   net/fabric_live.h   APPLY and read back (root): up, down, faults, status, recorded in
//                       /run/mrc-fabric/<name>/.
//   net/fabric_probe.h  UDP reachability probes between host namespaces (root).
// The root parts are tested by fabric_live_test on a real fabric.
//
// The address plan is a contract with the Linux driver and mrc-perf (docs/fabric.md):
//   plane p's locator block           fcbb:bbPP::/32            (PP = p, two hex digits)
//   leaf l / spine s / host h uSIDs   0x0001+l / 0x8000+s / 0x4000+h (wire/address_plan.h)
//   host h's port on plane p          fcbb:bbPP:(4000+h)::/128  (interface pP in the host)
//   SRv6 DA a->b via spine s          fcbb:bbPP:(8000+s):(1+leaf(b)):(4000+b)::
//   SRv6 DA a->b on the same leaf     fcbb:bbPP:(1+leaf(b)):(4000+b)::
//   plain (ECMP) DA                   fcbb:bbPP:(4000+b)::
//   link addresses (nexthops)         host link  fd00:PP:(4000+h)::/64, leaf ::1, host ::2
//                                     leaf-spine fd00:PP:(8000+s):(1+l)::/64, spine ::1, leaf ::2
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "net/sockets.h"
#include "wire/address_plan.h"
#include "wire/headers.h"

namespace mrc::net {

// Errors are NetError (net/sockets.h) with a message for a person: which spec field, which
// command, which namespace, what the tool said.

// ---------------------------------------------------------------------------------------------
// Shape and address plan (the contract)

// How the switches forward (docs/fabric.md, "Data planes"):
//   kKernel  seg6local End routes with the NEXT-C-SID flavour (CONFIG_IPV6_SEG6_LWTUNNEL)
//   kBpf     the same uN behaviour in a tc ingress eBPF program on every switch interface
//   kEcmp    no source routing: plain addresses only, the L4 multipath hash picks the spine
//            (the conventional data centre; MRC's UDP and STEV EV modes spread over it)
//   kAuto    resolved by `up`: kernel if it works, else bpf (net/dataplane.h)
enum class DataPlane { kAuto, kKernel, kBpf, kEcmp };
std::string_view dataplane_name(DataPlane d);  // "auto", "kernel", "bpf", "ecmp"
std::optional<DataPlane> parse_dataplane(std::string_view text);
// The data plane forwards SRv6 uSID carriers (kernel, bpf).
bool has_source_routing(DataPlane d);

struct FabricSpec {
  std::string name = "mrc";                  // namespace prefix and state directory name
  DataPlane dataplane = DataPlane::kKernel;  // kAuto only before `up` resolves it
  int hosts = 4;
  int planes = 2;
  int leaves = 2;  // per plane
  int spines = 2;  // per plane
  int mtu = 9000;
  uint64_t rate_bps = 0;  // per link and direction; 0 = unlimited
  friend bool operator==(const FabricSpec&, const FabricSpec&) = default;
};

// Limits that keep every uSID and link address inside its 16-bit field.
inline constexpr int kMaxPlanes = 256;
inline constexpr int kMaxHosts = wire::kMaxHostUsids - 1;
inline constexpr int kMaxLeaves = wire::kMaxLeafUsids - 1;
inline constexpr int kMaxSpines = wire::kMaxSpineUsids;
inline constexpr int kMaxNameLength = 32;

NetStatus validate(const FabricSpec& spec);

// The uSID address plan (one definition, wire/address_plan.h).
using wire::host_usid;
using wire::leaf_usid;
using wire::plane_block;
using wire::spine_usid;

// Hosts are split evenly over the leaves: leaf(h) = h / ceil(H / L), the same in every plane.
int hosts_per_leaf(const FabricSpec& spec);
int leaf_of_host(const FabricSpec& spec, int host);

// RFC 5952 text ("fcbb:bb01:4002::").
std::string format_ipv6(const wire::Ipv6Addr& a);
std::optional<wire::Ipv6Addr> parse_ipv6(std::string_view text);

// Host h's port address on plane p: fcbb:bbPP:(4000+h)::. Also the plain (ECMP) destination.
wire::Ipv6Addr host_address(int plane, int host);
// The SRv6 destination from any host to `dst_host` on `plane`: through `spine` (any pair,
// also two hosts on one leaf: up to the spine and back), or the same-leaf form without a
// spine (`spine` = nullopt; only valid when both hosts share a leaf).
wire::Ipv6Addr srv6_address(const FabricSpec& spec, int plane, std::optional<int> spine,
                            int dst_host);

// Names. Namespaces: <name>-h<h>, <name>-p<p>-l<l>, <name>-p<p>-s<s>.
// Links: h<h>-p<p> (host port), p<p>-l<l>-s<s> (leaf-spine). Switches: p<p>-l<l>, p<p>-s<s>.
std::string host_id(int host);
std::string leaf_id(int plane, int leaf);
std::string spine_id(int plane, int spine);
std::string host_link_name(int host, int plane);
std::string fabric_link_name(int plane, int leaf, int spine);

// True when `ns` is one of the namespaces a fabric called `name` creates (h<N>, p<N>-l<N>,
// p<N>-s<N> after "<name>-"): how `down` finds leftovers after a crash without its state file,
// and why another fabric whose name merely starts with the same letters is left alone.
bool is_fabric_namespace(std::string_view name, std::string_view ns);

// A non-empty run of decimal digits (the numbers in node names, a pid file's name).
bool all_digits(std::string_view s);

// ---------------------------------------------------------------------------------------------
// The plan

enum class NodeKind { kHost, kLeaf, kSpine };
std::string_view node_kind_name(NodeKind k);

struct Node {
  NodeKind kind = NodeKind::kHost;
  int plane = -1;  // -1 for hosts (they are in every plane)
  int index = 0;   // host, leaf or spine index
  std::string id;  // "h0", "p0-l1", "p1-s0"
  std::string ns;  // "<name>-" + id
  uint16_t usid = 0;
};

// One end of a veth link. `address` is the link address with its prefix ("fd00:0:4000::1/64").
struct LinkEnd {
  std::string node;  // node id
  std::string ns;
  std::string ifname;
  std::string address;  // CIDR
  std::string ip;       // without the prefix length: the nexthop the other end routes via
  // The interface's MAC address, planned ("06:00:40:02:00:00"): the other end holds it as a
  // permanent neighbour entry for `ip`, so no packet waits for neighbour discovery.
  std::string mac;
};

enum class LinkKind { kHostLeaf, kLeafSpine };

struct Link {
  std::string name;  // "h2-p1", "p0-l0-s1"
  LinkKind kind = LinkKind::kHostLeaf;
  int plane = 0;
  int host = -1;  // host links
  int leaf = 0;
  int spine = -1;  // leaf-spine links
  LinkEnd upper;   // towards the spines: the leaf of a host link, the spine of a fabric link
  LinkEnd lower;   // the host of a host link, the leaf of a fabric link
};

struct Nexthop {
  std::string via;
  std::string dev;
  friend bool operator==(const Nexthop&, const Nexthop&) = default;
};

enum class RouteKind { kForward, kSeg6End };

struct Route {
  std::string ns;
  std::string prefix;
  RouteKind kind = RouteKind::kForward;
  std::vector<Nexthop> nexthops;  // kForward: one = static, several = ECMP
  std::string src;                // preferred source (host routes), may be empty
  bool plain = false;             // part of the plain (non-SRv6) ECMP routing
};

// A switch's uN endpoint: packets to `sid` (its locator block and uSID, a /48) have their
// carrier shifted there (RFC 9800 4.1). Realised as a seg6local End route (kernel) or as the
// eBPF program on each of `interfaces` (bpf); absent on an ECMP fabric.
struct UsidEndpoint {
  std::string ns;
  std::string node;      // node id
  wire::Ipv6Addr sid{};  // the /48 prefix, the rest zero
  std::string prefix;    // "fcbb:bb00:8001::/48"
  std::vector<std::string> interfaces;
};

struct Sysctl {
  std::string key;  // dotted, as sysctl(8) spells it: "net.ipv6.conf.all.forwarding"
  std::string value;
  bool optional = false;  // missing on older kernels: skipped silently
};

struct Address {
  std::string ns;
  std::string ifname;
  std::string cidr;
};

struct FabricPlan {
  FabricSpec spec;
  std::vector<Node> nodes;  // hosts, then per plane its leaves and spines
  std::vector<Link> links;  // host links (host-major), then leaf-spine links per plane
  std::vector<Address> addresses;
  std::vector<Route> routes;
  std::vector<UsidEndpoint> usid_endpoints;  // one per switch on the SRv6 data planes

  const Node* node(std::string_view id) const;
  const Link* link(std::string_view name) const;
  // The links whose one end is in `ns`.
  std::vector<const Link*> links_in(std::string_view ns) const;
};

// The seg6local End routes hang off this always-up veth pair inside every switch (not `lo`:
// IPv6 turns routes through the loopback device into reject routes; not a real link: an
// admin-down would delete the End route with the link's routes).
inline constexpr std::string_view kSidDevice = "sid0";
inline constexpr std::string_view kSidPeerDevice = "sid1";

// Multipath hash of the plain addresses (every data plane): policy 3 (custom) with fields
// src/dst address, next header, flow label, UDP source and destination port: the L4 5-tuple
// and the IPv6 flow label (RFC 6438), so both the UDP source port (UDP EVs) and the flow label
// (STEV; mrc-perf's setup ping, which varies only the label between retries) select a path.
inline constexpr int kMultipathHashPolicy = 3;
inline constexpr int kMultipathHashFields = 0x3F;

NetResult<FabricPlan> plan_fabric(const FabricSpec& spec);

std::vector<Sysctl> sysctls_for(const FabricSpec& spec, const Node& node);

// The links a packet from `src_host` to `dst_host` on `plane` crosses, in order: through
// `spine` (two hosts on one leaf cross their leaf-spine link twice, up and back down), or on
// the leaf when `spine` is nullopt.
std::vector<std::string> path_links(const FabricSpec& spec, int plane, int src_host, int dst_host,
                                    std::optional<int> spine);

// `ip -batch` lines (no shell quoting; every token is a name or address this module made).
std::vector<std::string> netns_add_lines(const FabricPlan& plan);
std::vector<std::string> veth_lines(const FabricPlan& plan);
// Interfaces up, MTU, addresses, the peers' permanent neighbour entries, then every route of
// the node (route replace).
std::vector<std::string> node_setup_lines(const FabricPlan& plan, const Node& node);
// `neigh replace PEER_IP lladdr PEER_MAC dev IF nud permanent` for each link end in `ns`:
// with the planned MACs, no packet waits for neighbour discovery (and a fault's loss never
// hits a solicitation, which would stall a link for a second per lost one).
std::vector<std::string> neighbour_lines(const FabricPlan& plan, std::string_view ns);
// The node's routes as `route replace` lines, leaving out nexthops through interfaces in
// `down_ifaces` (the kernel refuses them, "Nexthop device is not up") and routes left with
// none. Used on `up` and to restore what an admin-down deleted.
std::vector<std::string> route_lines(const FabricPlan& plan, std::string_view ns,
                                     const std::set<std::string>& down_ifaces);
std::string route_line(const Route& r);

// tc: a tbf root qdisc on one interface (rate 0 = delete the root qdisc).
std::vector<std::string> tbf_args(std::string_view ifname, uint64_t rate_bps, int mtu);

// Rates as tc spells them: "10gbit", "100mbit", "1.5gbit", "800kbit", "1000bit" or a plain
// number of bit/s; "0", "off" and "none" mean unlimited (0).
NetResult<uint64_t> parse_rate(std::string_view text);
std::string format_rate(uint64_t bps);
// Durations "100ms", "1s", "250us", "2.5s" -> microseconds.
NetResult<uint64_t> parse_duration_us(std::string_view text);

// ---------------------------------------------------------------------------------------------
// Faults (recorded in faults.json; admin-down state is read back from the kernel)

struct LinkFaults {
  bool blackhole = false;
  int loss_percent = 0;
  uint64_t rate_bps = 0;  // 0 = the fabric's rate
  friend bool operator==(const LinkFaults&, const LinkFaults&) = default;
};

struct FaultState {
  std::map<std::string, LinkFaults> links;  // by link name; absent = no fault
  std::set<std::string> blackholed_switches;
  nlohmann::ordered_json to_json() const;
  static NetResult<FaultState> from_json(const nlohmann::json& j);
};

inline constexpr std::string_view kNftTable = "mrc_fabric";

// The whole nftables script for one namespace: drops (blackhole) and random drops (loss) on
// ingress of the affected interfaces; always deletes the previous table first, atomically.
std::string nft_script(const FabricPlan& plan, const FaultState& faults, std::string_view ns);

// The machine-readable description written to fabric.json (schema in docs/fabric.md).
nlohmann::ordered_json describe(const FabricPlan& plan);
NetResult<FabricSpec> spec_from_description(const nlohmann::json& j);

// What an endpoint on host `host` needs from a fabric to build its EVs (mrc-perf --fabric, the
// libfabric provider's FI_MRC_FABRIC): its port address on every plane, its leaf's uSID and
// every spine's uSID per plane.
struct HostView {
  std::string netns;                               // the host's network namespace
  std::vector<std::string> addresses;              // per plane, RFC 5952 text
  std::vector<uint16_t> leaf_usids;                // per plane
  std::vector<std::vector<uint16_t>> spine_usids;  // per plane
};
NetResult<HostView> host_view(const FabricSpec& spec, int host);
// The same from a fabric.json that `mrc-fabric up` wrote; errors name the file.
NetResult<HostView> host_view_from_file(const std::string& path, int host);

}  // namespace mrc::net
