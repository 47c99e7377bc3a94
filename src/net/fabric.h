// mrc-fabric: multi-plane two-tier Clos fabrics built from Linux network namespaces, with the
// kernel's SRv6 data plane (seg6local End, NEXT-C-SID flavour) forwarding uSID carriers.
//
// Two halves:
//   PLAN  (pure, no root): FabricSpec -> FabricPlan, the namespaces, veth links, addresses,
//         sysctls and routes, and the `ip`/`tc`/`nft` lines that realise them.
//   APPLY (root): runs `ip -batch`, `tc -batch`, `nft -f` and writes sysctls in each namespace
//         (fork + setns + exec, never a shell), records the fabric in
//         /run/mrc-fabric/<name>/fabric.json, and injects faults.
//
// The address plan is a contract with the Linux driver and mrc-perf (docs/fabric.md):
//   plane p's locator block           fcbb:bbPP::/32            (PP = p, two hex digits)
//   leaf l / spine s / host h uSIDs   0x0001+l / 0x8000+s / 0x4000+h
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

#include "wire/headers.h"

namespace mrc::net {

// Errors carry a message for a person: which command, which namespace, what the tool said.
template <typename T>
using FabricResult = std::expected<T, std::string>;
using FabricStatus = std::expected<void, std::string>;
inline std::unexpected<std::string> fabric_error(std::string msg) {
  return std::unexpected<std::string>(std::move(msg));
}

// ---------------------------------------------------------------------------------------------
// Shape and address plan (the contract)

struct FabricSpec {
  std::string name = "mrc";  // namespace prefix and state directory name
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
inline constexpr int kMaxHosts = 0x4000 - 1;   // host uSIDs 0x4000.. stay below 0x8000
inline constexpr int kMaxLeaves = 0x4000 - 2;  // leaf uSIDs 0x0001.. stay below 0x4000
inline constexpr int kMaxSpines = 0x8000;      // spine uSIDs 0x8000..0xffff
inline constexpr int kMaxNameLength = 32;

FabricStatus validate(const FabricSpec& spec);

inline constexpr uint32_t plane_block(int plane) {
  return 0xFCBBBB00u | uint32_t(plane);
}
inline constexpr uint16_t leaf_usid(int leaf) {
  return uint16_t(0x0001 + leaf);
}
inline constexpr uint16_t spine_usid(int spine) {
  return uint16_t(0x8000 + spine);
}
inline constexpr uint16_t host_usid(int host) {
  return uint16_t(0x4000 + host);
}

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

// Multipath hash: policy 3 (custom) with fields src/dst address, next header, flow label,
// UDP source and destination port, so both the flow label (STEV) and the UDP source port
// select an ECMP path.
inline constexpr int kMultipathHashPolicy = 3;
inline constexpr int kMultipathHashFields = 0x3F;

FabricResult<FabricPlan> plan_fabric(const FabricSpec& spec);

std::vector<Sysctl> sysctls_for(const Node& node);

// The links a packet from `src_host` to `dst_host` on `plane` crosses, in order: through
// `spine` (two hosts on one leaf cross their leaf-spine link twice, up and back down), or on
// the leaf when `spine` is nullopt.
std::vector<std::string> path_links(const FabricSpec& spec, int plane, int src_host, int dst_host,
                                    std::optional<int> spine);

// `ip -batch` lines (no shell quoting; every token is a name or address this module made).
std::vector<std::string> netns_add_lines(const FabricPlan& plan);
std::vector<std::string> veth_lines(const FabricPlan& plan);
// Interfaces up, MTU, addresses, then every route of the node (route replace).
std::vector<std::string> node_setup_lines(const FabricPlan& plan, const Node& node);
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
FabricResult<uint64_t> parse_rate(std::string_view text);
std::string format_rate(uint64_t bps);
// Durations "100ms", "1s", "250us", "2.5s" -> microseconds.
FabricResult<uint64_t> parse_duration_us(std::string_view text);

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
  static FabricResult<FaultState> from_json(const nlohmann::json& j);
};

inline constexpr std::string_view kNftTable = "mrc_fabric";

// The whole nftables script for one namespace: drops (blackhole) and random drops (loss) on
// ingress of the affected interfaces; always deletes the previous table first, atomically.
std::string nft_script(const FabricPlan& plan, const FaultState& faults, std::string_view ns);

// The machine-readable description written to fabric.json (schema in docs/fabric.md).
nlohmann::ordered_json describe(const FabricPlan& plan);
FabricResult<FabricSpec> spec_from_description(const nlohmann::json& j);

// ---------------------------------------------------------------------------------------------
// Apply (root)

struct CommandOutput {
  int exit_code = 0;
  std::string out;
  std::string err;
};

// fork + (setns into `netns` when not empty) + execvp; stdin from `input`, output captured.
FabricResult<CommandOutput> run_command(const std::vector<std::string>& argv,
                                        std::string_view input = {}, std::string_view netns = {});
// The same, but a non-zero exit is an error carrying the command and its stderr.
FabricStatus run_checked(const std::vector<std::string>& argv, std::string_view input = {},
                         std::string_view netns = {});

// Can this process build fabrics (root, `ip netns` works)? The message says why not.
FabricStatus check_privileges();

std::string state_dir(std::string_view name);  // /run/mrc-fabric/<name>

struct UpOptions {
  bool replace = false;  // tear down an existing fabric of that name first
};

FabricResult<FabricPlan> fabric_up(const FabricSpec& spec, const UpOptions& options = {});
// Removes every namespace of the fabric (found by name pattern), background flappers, and the
// state directory. Idempotent. Returns the number of namespaces removed. Processes still
// running inside keep their namespace alive after its name is gone: with `kill_processes`
// they get SIGTERM, and SIGKILL after a second.
FabricResult<int> fabric_down(std::string_view name, bool kill_processes = false);
// The pids of processes running in any namespace of the fabric.
std::vector<int> fabric_processes(std::string_view name);
// The plan of a running fabric, from its fabric.json.
FabricResult<FabricPlan> load_fabric(std::string_view name);
FabricResult<FaultState> load_faults(std::string_view name);

FabricStatus set_link_admin(const FabricPlan& plan, std::string_view link, bool up);
// `target` is a link name or a switch id ("p0-s1", "p0-l0").
FabricStatus set_blackhole(const FabricPlan& plan, std::string_view target, bool on);
FabricStatus set_loss(const FabricPlan& plan, std::string_view link, int percent);
// rate_bps 0 = back to the fabric's rate (or unlimited).
FabricStatus set_rate(const FabricPlan& plan, std::string_view link, uint64_t rate_bps);

// Toggles a link: down for half of `period_us`, up for the other half, `count` times (0 =
// until `duration_us` passes, or forever when both are 0, or until SIGINT/SIGTERM). Always
// leaves the link up.
FabricStatus flap_link(const FabricPlan& plan, std::string_view link, uint64_t period_us, int count,
                       uint64_t duration_us);

// Per-link counters and fault state (the `status` command), from every namespace.
FabricResult<nlohmann::ordered_json> fabric_status(const FabricPlan& plan);

// The fabric interfaces in `ns` that are administratively down.
FabricResult<std::set<std::string>> down_interfaces(const FabricPlan& plan, std::string_view ns);

// ---------------------------------------------------------------------------------------------
// Reachability probes (tests and `mrc-fabric check`): UDP datagrams between host namespaces.

struct Probe {
  int src_host = 0;
  int dst_host = 0;
  int plane = 0;
  enum class Via { kSpine, kSameLeaf, kPlain } via = Via::kPlain;
  int spine = -1;  // kSpine
  int sent = 0;
  int received = 0;
  std::string destination;  // filled in by run_probes

  std::string label() const;
};

// The probes covering every ordered host pair on every plane: one per spine, the same-leaf
// route where the pair shares a leaf, and the plain address.
std::vector<Probe> all_probes(const FabricSpec& spec);

// Sends `count` datagrams per probe (zero UDP checksum: the DA changes on the way, so a
// checksum over the sender's DA would be wrong at the receiver), waits up to `wait_ms` after
// the last send for stragglers, and fills in sent/received.
FabricStatus run_probes(const FabricPlan& plan, std::vector<Probe>& probes, int count, int wait_ms);

}  // namespace mrc::net
