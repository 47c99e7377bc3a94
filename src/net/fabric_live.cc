// mrc-fabric's APPLY half (net/fabric_live.h).
#include "net/fabric_live.h"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "net/dataplane.h"
#include "net/fabric_probe.h"
#include "net/netns_exec.h"
#include "net/route_netlink.h"
#include "net/usid_bpf.h"

namespace mrc::net {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::unexpected<NetError> live_error(std::string msg) {
  return net_fail(NetErrc::kSystem, std::move(msg));
}
std::unexpected<NetError> bad_argument(std::string msg) {
  return net_fail(NetErrc::kInvalidArgument, std::move(msg));
}

NetStatus write_file_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) return live_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return live_error("cannot rename " + tmp.string() + ": " + ec.message());
  return {};
}

NetResult<json> read_json(const fs::path& path) {
  std::ifstream f(path);
  if (!f) return live_error("cannot read " + path.string());
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    return live_error(path.string() + ": " + e.what());
  }
}

NetStatus save_faults(std::string_view name, const FaultState& faults) {
  return write_file_atomically(fs::path(state_dir(name)) / "faults.json",
                               faults.to_json().dump(2) + "\n");
}

NetStatus apply_nft(const FabricPlan& plan, const FaultState& faults, const std::string& ns) {
  return run_checked({"nft", "-f", "-"}, nft_script(plan, faults, ns), ns);
}

NetStatus apply_rate(const FabricPlan& plan, const Link& link, uint64_t rate_bps) {
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

}  // namespace

std::vector<std::string> fabric_namespaces(std::string_view name) {
  std::vector<std::string> out;
  for (auto& ns : list_netns())
    if (is_fabric_namespace(name, ns)) out.push_back(std::move(ns));
  return out;
}

NetStatus check_privileges() {
  if (geteuid() != 0) return live_error("mrc-fabric needs root (it creates network namespaces)");
  auto r = run_command({"ip", "netns", "list"});
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0)
    return live_error("`ip netns` is unavailable: " + trimmed(r->err) + " (install iproute2)");
  return {};
}

std::string state_dir(std::string_view name) {
  return "/run/mrc-fabric/" + std::string(name);
}

namespace {
// Present in the state directory from the start of `up` until it has finished: namespaces
// without fabric.json are an `up` in progress or one that died part-way.
constexpr const char* kIncompleteMarker = "incomplete";
}  // namespace

namespace {

bool up_interrupted(const UpOptions& options) {
  return options.interrupted && *options.interrupted != 0;
}

// A step of `up`, then a look at the interruption flag (a signal also stops the step's
// children when it reaches the whole process group; the step then fails).
NetStatus up_step(const NetStatus& ok, const UpOptions& options) {
  if (!ok) return ok;
  if (up_interrupted(options)) return live_error("interrupted");
  return {};
}

// One job per node running `tool -batch -` on the node's lines.
std::vector<Job> batch_jobs(const FabricPlan& plan, const std::string& tool,
                            const std::function<std::vector<std::string>(const Node&)>& lines) {
  std::vector<Job> jobs;
  for (const auto& n : plan.nodes)
    jobs.push_back({n.ns, {tool, "-batch", "-"}, joined_lines(lines(n)), {}});
  return jobs;
}

// The planned namespaces, their sysctls, links, addresses and routes, and the rate limits.
NetStatus build_fabric(const FabricPlan& plan, const UpOptions& options) {
  const FabricSpec& spec = plan.spec;
  if (auto st = up_step(ip_batch({}, netns_add_lines(plan)), options); !st) return st;
  // Sysctls before the veths exist: conf/default/* applies to interfaces created later.
  std::vector<Job> sysctl_jobs;
  for (const auto& n : plan.nodes)
    sysctl_jobs.push_back({n.ns, {}, {}, sysctls_for(spec, n)});
  if (auto st = up_step(run_jobs(sysctl_jobs), options); !st) return st;
  if (auto st = up_step(ip_batch({}, veth_lines(plan)), options); !st) return st;
  const auto setup = [&](const Node& n) { return node_setup_lines(plan, n); };
  if (auto st = up_step(run_jobs(batch_jobs(plan, "ip", setup)), options); !st) {
    NetError e = st.error();
    if (spec.dataplane == DataPlane::kKernel &&
        (e.message.find("seg6local") != std::string::npos ||
         e.message.find("lwt encapsulation") != std::string::npos))
      e.message +=
          " (the kernel data plane needs SRv6 seg6local End with the NEXT-C-SID flavour: Linux"
          " >= 6.1 with CONFIG_IPV6_SEG6_LWTUNNEL, and iproute2 >= 6.1; --dataplane bpf or auto"
          " works without it)";
    return std::unexpected(e);
  }
  if (spec.dataplane == DataPlane::kBpf) {
    // One program instance per switch, its SID in its own map, on every interface.
    for (const UsidEndpoint& e : plan.usid_endpoints) {
      auto prog = UsidEndProgram::load(e.sid);
      if (!prog) return std::unexpected(prog.error());
      if (auto st = up_step(prog->attach(e.ns, e.interfaces), options); !st) return st;
    }
  }
  if (spec.rate_bps == 0) return {};
  const auto rate_limits = [&](const Node& n) {
    std::vector<std::string> lines;
    for (const Link* l : plan.links_in(n.ns)) {
      const LinkEnd& e = l->upper.ns == n.ns ? l->upper : l->lower;
      lines.push_back(join_args(tbf_args(e.ifname, spec.rate_bps, spec.mtu)));
    }
    return lines;
  };
  return up_step(run_jobs(batch_jobs(plan, "tc", rate_limits)), options);
}

}  // namespace

NetResult<FabricPlan> fabric_up(const FabricSpec& requested, const UpOptions& options) {
  if (auto ok = validate(requested); !ok) return std::unexpected(ok.error());
  if (auto ok = check_privileges(); !ok) return std::unexpected(ok.error());
  FabricSpec spec = requested;
  auto dataplane = resolve_dataplane(requested.dataplane);
  if (!dataplane) return std::unexpected(dataplane.error());
  spec.dataplane = *dataplane;
  auto plan = plan_fabric(spec);
  if (!plan) return plan;
  if (const auto existing = fabric_namespaces(spec.name); !existing.empty()) {
    if (!options.replace)
      return live_error("fabric '" + spec.name + "' already exists (" + existing.front() +
                        ", ...): run `mrc-fabric down --name " + spec.name +
                        "` first, or pass --replace");
    if (auto down = fabric_down(spec.name); !down) return std::unexpected(down.error());
  }
  // Whatever fails from here removes what was built.
  const auto fail_and_clean = [&](const std::string& msg) -> NetResult<FabricPlan> {
    (void)fabric_down(spec.name);
    if (up_interrupted(options)) return live_error("up interrupted, fabric removed again");
    return live_error("up failed, fabric removed again: " + msg);
  };
  const fs::path dir = state_dir(spec.name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return live_error("cannot create " + dir.string() + ": " + ec.message());
  if (auto ok = write_file_atomically(dir / kIncompleteMarker, std::to_string(getpid()) + "\n");
      !ok)
    return fail_and_clean(ok.error().message);
  if (auto st = build_fabric(*plan, options); !st) return fail_and_clean(st.error().message);
  // "Up" means every path forwards: the kernel uses a veth's routes only once its link-watch
  // work has seen the carrier, which on a loaded machine can be a second after `ip` returned.
  if (options.forwarding_timeout_ms > 0)
    if (auto st = up_step(wait_until_forwarding(*plan, options.forwarding_timeout_ms), options);
        !st)
      return fail_and_clean(st.error().message);
  if (auto st = up_step(save_faults(spec.name, {}), options); !st)
    return fail_and_clean(st.error().message);
  if (auto st = up_step(write_file_atomically(dir / "fabric.json", describe(*plan).dump(2) + "\n"),
                        options);
      !st)
    return fail_and_clean(st.error().message);
  fs::remove(dir / kIncompleteMarker, ec);
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

NetResult<int> fabric_down(std::string_view name, bool kill_processes) {
  const std::string fabric(name);
  FabricSpec probe;
  probe.name = fabric;
  // Only the name matters here; validate it so that nothing odd reaches ip or rm.
  probe.hosts = 2;
  probe.leaves = 1;
  if (auto ok = validate(probe); !ok) return std::unexpected(ok.error());
  if (geteuid() != 0) return live_error("mrc-fabric needs root (it removes network namespaces)");
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
    return live_error("could not remove namespace " + left.front() + " (and " +
                      std::to_string(left.size() - 1) + " more)");
  return int(namespaces.size());
}

NetResult<FabricPlan> load_fabric(std::string_view name) {
  const fs::path dir = state_dir(name);
  const fs::path file = dir / "fabric.json";
  if (!fs::exists(file)) {
    const auto namespaces = fabric_namespaces(name);
    std::error_code ec;
    if (namespaces.empty() && !fs::exists(dir / kIncompleteMarker, ec))
      return live_error("no fabric '" + std::string(name) + "' (" + file.string() +
                        " missing): run `mrc-fabric up` first");
    std::string builder;
    if (std::ifstream f(dir / kIncompleteMarker); f) {
      pid_t pid = 0;
      if (f >> pid && pid > 1 && kill(pid, 0) == 0)
        builder = " (`up` still running as pid " + std::to_string(pid) + ")";
    }
    return live_error("fabric '" + std::string(name) +
                      "' is incomplete: " + std::to_string(namespaces.size()) +
                      " namespaces but no " + file.string() + builder +
                      "; remove it with `mrc-fabric down --name " + std::string(name) + "`");
  }
  auto j = read_json(file);
  if (!j) return std::unexpected(j.error());
  auto spec = spec_from_description(*j);
  if (!spec) return std::unexpected(spec.error());
  return plan_fabric(*spec);
}

NetResult<FaultState> load_faults(std::string_view name) {
  const fs::path file = fs::path(state_dir(name)) / "faults.json";
  if (!fs::exists(file)) return FaultState{};
  auto j = read_json(file);
  if (!j) return std::unexpected(j.error());
  return FaultState::from_json(*j);
}

NetResult<std::set<std::string>> down_interfaces(const FabricPlan& plan, std::string_view ns) {
  auto sock = udp_socket_in_netns(std::string(ns));
  if (!sock) return std::unexpected(sock.error());
  std::set<std::string> down;
  std::string err;
  for (const Link* l : plan.links_in(ns)) {
    const LinkEnd& e = l->upper.ns == ns ? l->upper : l->lower;
    auto up = interface_is_up(*sock, e.ifname);
    if (!up) {
      err = std::string(ns) + ": " + up.error().message;
      break;
    }
    if (!*up) down.insert(e.ifname);
  }
  close(*sock);
  if (!err.empty()) return live_error(err);
  return down;
}

// A planned forwarding route as rtnetlink takes it, without nexthops through `down`
// interfaces (nullopt when none is left); `sock` lives in the route's namespace.
NetResult<std::optional<NetlinkRoute>> netlink_route(const Route& r, int sock,
                                                     const std::set<std::string>& down) {
  NetlinkRoute nr;
  if (auto ok = parse_route_prefix(r.prefix, nr); !ok) return std::unexpected(ok.error());
  for (const Nexthop& nh : r.nexthops) {
    if (down.contains(nh.dev)) continue;
    NetlinkNexthop n;
    if (inet_pton(AF_INET6, nh.via.c_str(), &n.gateway) != 1)
      return live_error("bad gateway '" + nh.via + "'");
    auto index = interface_index(sock, nh.dev);
    if (!index) return std::unexpected(index.error());
    n.ifindex = *index;
    nr.nexthops.push_back(n);
  }
  if (!r.src.empty()) {
    nr.src.emplace();
    if (inet_pton(AF_INET6, r.src.c_str(), &*nr.src) != 1)
      return live_error("bad source '" + r.src + "'");
  }
  if (nr.nexthops.empty()) return std::nullopt;
  return nr;
}

// Re-installs `ns`'s planned forwarding routes without nexthops through interfaces that are
// down (see set_link_admin).
NetStatus restore_forward_routes(const FabricPlan& plan, const std::string& ns) {
  auto down = down_interfaces(plan, ns);
  if (!down) return std::unexpected(down.error());
  auto sock = udp_socket_in_netns(ns);
  if (!sock) return std::unexpected(sock.error());
  const UniqueFd sock_fd(*sock);
  std::vector<NetlinkRoute> routes;
  for (const Route& r : plan.routes) {
    if (r.ns != ns || r.kind != RouteKind::kForward) continue;
    auto nr = netlink_route(r, sock_fd.get(), *down);
    if (!nr) return live_error(ns + ": " + nr.error().message);
    if (*nr) routes.push_back(std::move(**nr));
  }
  auto nl = socket_in_netns(ns, open_route_netlink);
  if (!nl) return std::unexpected(nl.error());
  const UniqueFd nl_fd(*nl);
  if (auto ok = replace_routes(nl_fd.get(), routes); !ok)
    return live_error(ns + ": " + ok.error().message);
  return {};
}

// Puts back the permanent neighbour entry for `peer` on `self`'s interface (see
// neighbour_lines in net/fabric.h), which the kernel deleted with the interface; `sock` lives
// in `self`'s namespace.
NetStatus restore_neighbour(const LinkEnd& self, const LinkEnd& peer, int sock) {
  NetlinkNeighbour n;
  if (inet_pton(AF_INET6, peer.ip.c_str(), &n.dst) != 1)
    return live_error("bad link address '" + peer.ip + "'");
  if (auto ok = parse_mac(peer.mac, n.lladdr); !ok) return std::unexpected(ok.error());
  auto index = interface_index(sock, self.ifname);
  if (!index) return std::unexpected(index.error());
  n.ifindex = *index;
  auto nl = socket_in_netns(self.ns, open_route_netlink);
  if (!nl) return std::unexpected(nl.error());
  const UniqueFd nl_fd(*nl);
  if (auto ok = replace_neighbours(nl_fd.get(), std::span(&n, 1)); !ok)
    return live_error(self.ns + ": " + ok.error().message);
  return {};
}

NetStatus set_link_admin(const FabricPlan& plan, std::string_view name, bool up) {
  const Link* link = plan.link(name);
  if (!link)
    return bad_argument("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
  // Interface flags by ioctl from sockets in the two namespaces: no process per change, so a
  // link can flap every few milliseconds.
  const std::array<const LinkEnd*, 2> ends{&link->upper, &link->lower};
  std::array<UniqueFd, 2> socks;
  for (size_t i = 0; i < ends.size(); ++i) {
    auto sock = udp_socket_in_netns(ends[i]->ns);
    if (!sock) return std::unexpected(sock.error());
    socks[i] = UniqueFd(*sock);
    if (auto ok = set_interface_up(*sock, ends[i]->ifname, up); !ok)
      return live_error(ends[i]->ns + ": " + ok.error().message);
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
      if (!r) return live_error(ends[i]->ns + ": " + r.error().message);
      running = *r;
    }
    if (running) break;
    if (waited_us >= 2'000'000)
      return live_error("link '" + std::string(name) + "' is up but not running after 2 s");
    const timespec step{0, 100'000};
    nanosleep(&step, nullptr);
  }
  // The kernel deleted the permanent neighbour entries of both ends with the interfaces: put
  // them back before the routes that use them.
  for (size_t i = 0; i < ends.size(); ++i) {
    if (auto ok = restore_neighbour(*ends[i], *ends[1 - i], socks[i].get()); !ok) return ok;
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

NetStatus set_blackhole(const FabricPlan& plan, std::string_view target, bool on) {
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
    return bad_argument("unknown link or switch '" + std::string(target) + "'" +
                        known_names_hint(plan, true));
  }
  std::erase_if(faults->links, [](const auto& kv) { return kv.second == LinkFaults{}; });
  if (auto ok = save_faults(plan.spec.name, *faults); !ok) return ok;
  for (const auto& ns : namespaces)
    if (auto ok = apply_nft(plan, *faults, ns); !ok) return ok;
  return {};
}

NetStatus set_loss(const FabricPlan& plan, std::string_view name, int percent) {
  const Link* link = plan.link(name);
  if (!link)
    return bad_argument("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
  if (percent < 0 || percent > 100) return bad_argument("loss must be 0..100 percent");
  auto faults = load_faults(plan.spec.name);
  if (!faults) return std::unexpected(faults.error());
  faults->links[link->name].loss_percent = percent;
  std::erase_if(faults->links, [](const auto& kv) { return kv.second == LinkFaults{}; });
  if (auto ok = save_faults(plan.spec.name, *faults); !ok) return ok;
  for (const auto& ns : {link->upper.ns, link->lower.ns})
    if (auto ok = apply_nft(plan, *faults, ns); !ok) return ok;
  return {};
}

NetStatus set_rate(const FabricPlan& plan, std::string_view name, uint64_t rate_bps) {
  const Link* link = plan.link(name);
  if (!link)
    return bad_argument("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
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

NetStatus flap_link(const FabricPlan& plan, std::string_view name, uint64_t period_us, int count,
                    uint64_t duration_us) {
  if (!plan.link(name))
    return bad_argument("unknown link '" + std::string(name) + "'" + known_names_hint(plan, false));
  if (period_us < 2000) return bad_argument("flap period must be at least 2ms");
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
  NetStatus status;
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

namespace {

// What the namespaces report: per namespace its interfaces as `ip -s -j link show` lists
// them, and the packets the fault rules dropped per interface (nft counters of the in_<if>
// chains).
struct LiveState {
  std::map<std::string, std::map<std::string, json>> devs;       // ns -> ifname -> ip -j
  std::map<std::string, std::map<std::string, uint64_t>> drops;  // ns -> ifname -> packets
};

// The fault counters of `ns` from `nft -j list table`; a listing that does not parse is
// skipped (counters are a convenience; a format change must not break status).
void read_fault_drops(const std::string& ns, const std::string& listing_text, LiveState& st) {
  try {
    const json listing = json::parse(listing_text);
    for (const auto& item : listing.at("nftables")) {
      if (!item.contains("rule")) continue;
      const auto& rule = item["rule"];
      std::string chain = rule.value("chain", "");
      if (!chain.starts_with("in_")) continue;
      for (const auto& expr : rule.at("expr"))
        if (expr.contains("counter"))
          st.drops[ns][chain.substr(3)] += expr["counter"].value("packets", uint64_t(0));
    }
  } catch (const json::exception&) {
  }
}

NetResult<LiveState> read_live_state(const FabricPlan& plan) {
  std::vector<Job> jobs;
  for (const auto& n : plan.nodes) {
    jobs.push_back({n.ns, {"ip", "-s", "-j", "link", "show"}, {}, {}});
    jobs.push_back(
        {n.ns, {"nft", "-j", "list", "table", "netdev", std::string(kNftTable)}, {}, {}});
  }
  const auto outputs = run_jobs_collect(jobs, /*stop_on_failure=*/false);
  LiveState st;
  for (size_t ni = 0; ni < plan.nodes.size(); ++ni) {
    const Node& n = plan.nodes[ni];
    const auto& r = outputs[2 * ni];
    if (!r) return std::unexpected(r.error());
    if (r->exit_code != 0)
      return live_error("namespace " + n.ns + " is missing or broken: " + trimmed(r->err));
    try {
      const json listing = json::parse(r->out);
      for (const auto& d : listing)
        st.devs[n.ns][d.at("ifname")] = d;
    } catch (const json::exception& e) {
      return live_error("ip -j in " + n.ns + ": " + e.what());
    }
    const auto& nft = outputs[2 * ni + 1];
    if (nft && nft->exit_code == 0) read_fault_drops(n.ns, nft->out, st);  // no table: no faults
  }
  return st;
}

// One end of a link: its interface's state and counters (operstate MISSING when the
// interface is gone) and the packets the fault rules dropped there; `up` says whether it is
// administratively up.
ordered_json link_end_status(const LinkEnd& e, const LiveState& st, bool& up) {
  ordered_json je;
  je["node"] = e.node;
  je["interface"] = e.ifname;
  const json* d = nullptr;
  if (const auto nsit = st.devs.find(e.ns); nsit != st.devs.end())
    if (auto it = nsit->second.find(e.ifname); it != nsit->second.end()) d = &it->second;
  up = false;
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
  if (auto it = st.drops.find(e.ns); it != st.drops.end())
    if (auto jt = it->second.find(e.ifname); jt != it->second.end()) fault_drops = jt->second;
  je["fault_dropped"] = fault_drops;
  return je;
}

// A link: up, half-down or down by its ends, the faults on it (a blackholed switch at either
// end blackholes it), its rate, and both ends.
ordered_json link_status(const FabricPlan& plan, const Link& l, const FaultState& faults,
                         const LiveState& st) {
  ordered_json o;
  o["name"] = l.name;
  LinkFaults f;
  if (auto it = faults.links.find(l.name); it != faults.links.end()) f = it->second;
  bool upper_up = false, lower_up = false;
  ordered_json upper = link_end_status(l.upper, st, upper_up);
  ordered_json lower = link_end_status(l.lower, st, lower_up);
  o["state"] = upper_up && lower_up ? "up" : (upper_up || lower_up ? "half-down" : "down");
  const bool switch_dark = faults.blackholed_switches.contains(l.upper.node) ||
                           faults.blackholed_switches.contains(l.lower.node);
  o["blackhole"] = f.blackhole || switch_dark;
  o["loss_percent"] = f.loss_percent;
  o["rate_bps"] = f.rate_bps ? f.rate_bps : plan.spec.rate_bps;
  o["upper"] = std::move(upper);
  o["lower"] = std::move(lower);
  return o;
}

}  // namespace

NetResult<ordered_json> fabric_status(const FabricPlan& plan) {
  auto faults = load_faults(plan.spec.name);
  if (!faults) return std::unexpected(faults.error());
  auto st = read_live_state(plan);
  if (!st) return std::unexpected(st.error());
  ordered_json out;
  out["name"] = plan.spec.name;
  out["dataplane"] = dataplane_name(plan.spec.dataplane);
  out["blackholed_switches"] = faults->blackholed_switches;
  if (plan.spec.dataplane == DataPlane::kBpf) {
    // The uN programs' counters, one instance per switch (read from its first interface).
    ordered_json endpoints = ordered_json::array();
    for (const UsidEndpoint& e : plan.usid_endpoints) {
      ordered_json o{{"node", e.node}, {"sid", e.prefix}};
      if (auto c = attached_usid_counters(e.ns, e.interfaces.front()); c) {
        o["shifted"] = c->shifted;
        o["segment_next"] = c->segment_next;
        o["dropped"] = c->dropped;
      } else {
        o["error"] = c.error().message;
      }
      endpoints.push_back(std::move(o));
    }
    out["usid_endpoints"] = endpoints;
  }
  ordered_json links = ordered_json::array();
  for (const auto& l : plan.links)
    links.push_back(link_status(plan, l, *faults, *st));
  out["links"] = links;
  return out;
}

}  // namespace mrc::net
