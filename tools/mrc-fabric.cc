// mrc-fabric: multi-plane two-tier Clos fabrics of network namespaces whose switches forward
// uSID carriers with the kernel's SRv6 (seg6local End, NEXT-C-SID) or an eBPF program doing
// the same, or route plain addresses with hashed ECMP. Root only. Address plan, fabric.json
// schema and pitfalls: docs/fabric.md.
//
//   mrc-fabric up --hosts 4 --planes 2 --leaves 2 --spines 2 [--mtu 9000] [--rate 10gbit]
//                 [--dataplane auto|kernel|bpf|ecmp]
//   mrc-fabric dataplanes                which data planes this kernel can run, and why not
//   mrc-fabric down                      removes everything of the fabric (also after a crash)
//   mrc-fabric show | status [--json]    fabric.json | per-link counters and faults
//   mrc-fabric exec h0 ping -6 fcbb:bb00:4001::
//   mrc-fabric link down p0-l0-s1 | link up p0-l0-s1
//   mrc-fabric blackhole p0-s1 [--off] | loss p0-l0-s0 5 | rate h0-p1 1gbit
//   mrc-fabric flap p0-l0-s1 --period 100ms [--count N | --duration 5s] [--background]
//   mrc-fabric check                     UDP probes over every path; exit 1 if any is lost
//   mrc-fabric paths h0 h3               the SRv6 and plain destinations and their links
//
// Every command takes --name (default "mrc"). Exit status: 0 ok, 1 failure, 2 bad arguments.
#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "net/dataplane.h"
#include "net/fabric.h"
#include "net/fabric_live.h"
#include "net/fabric_probe.h"
#include "net/netns_exec.h"

namespace {

using namespace mrc::net;

int report(const NetStatus& s) {
  if (s) return 0;
  fmt::print(stderr, "mrc-fabric: {}\n", s.error().message);
  return 1;
}

// Set by SIGINT/SIGTERM/SIGHUP during `up`: it stops between steps and removes what it built.
volatile std::sig_atomic_t g_up_interrupted = 0;
void on_up_signal(int) {
  g_up_interrupted = 1;
}

// A bad argument: one line naming it, exit 2 (tools/cli.h).
int bad_argument(const std::string& what) {
  fmt::print(stderr, "mrc-fabric: {} (see mrc-fabric --help)\n", what);
  return mrc::tools::kExitBadArguments;
}

// The fabric name alone (letters, digits, '_', '-'): the other fields keep valid defaults.
std::string name_error(const std::string& name) {
  FabricSpec only_name;
  only_name.name = name;
  const auto ok = validate(only_name);
  return ok ? std::string() : ok.error().message;
}

// Link and switch names as mrc-sim spells them ("p0/leaf3-spine7", "p1/host5", "p0/spine2",
// "p1/leaf5") in this fabric's spelling ("p0-l3-s7", "h5-p1", "p0-s2", "p1-l5"); other text
// unchanged. Both programs take both (docs/fabric.md, docs/simulator.md).
// A hand-written matcher rather than std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized
// under -O2 with the sanitizers, and these three shapes need no more than this.
class NameScanner {
 public:
  explicit NameScanner(std::string_view text) : rest_(text) {}
  bool literal(std::string_view word) {
    if (!rest_.starts_with(word)) return false;
    rest_.remove_prefix(word.size());
    return true;
  }
  // One or more decimal digits, returned as written.
  std::optional<std::string> digits() {
    const std::size_t n = rest_.find_first_not_of("0123456789");
    const std::size_t len = n == std::string_view::npos ? rest_.size() : n;
    if (len == 0) return std::nullopt;
    std::string out(rest_.substr(0, len));
    rest_.remove_prefix(len);
    return out;
  }
  bool done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

std::string fabric_spelling(const std::string& name) {
  NameScanner s(name);
  if (!s.literal("p")) return name;
  const auto plane = s.digits();
  if (!plane || !s.literal("/")) return name;
  if (s.literal("host")) {
    const auto host = s.digits();
    return host && s.done() ? "h" + *host + "-p" + *plane : name;
  }
  const bool leaf = s.literal("leaf");
  if (!leaf && !s.literal("spine")) return name;
  const auto first = s.digits();
  if (!first) return name;
  if (s.done()) return "p" + *plane + (leaf ? "-l" : "-s") + *first;
  if (!leaf || !s.literal("-spine")) return name;
  const auto spine = s.digits();
  return spine && s.done() ? "p" + *plane + "-l" + *first + "-s" + *spine : name;
}

// HOST as "h3" or "3".
std::optional<int> parse_host(const FabricPlan& plan, std::string text) {
  if (text.starts_with("h")) text.erase(0, 1);
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int h = std::stoi(text);
  if (h >= plan.spec.hosts) return std::nullopt;
  return h;
}

void print_status(const nlohmann::ordered_json& st) {
  fmt::print("{:<12} {:<9} {:>9} {:>5} {:>9} | {:<6} {:>10} {:>12} {:>10} {:>12} {:>7} {:>8}\n",
             "link", "state", "blackhole", "loss", "rate", "end", "tx_pkts", "tx_bytes", "rx_pkts",
             "rx_bytes", "drops", "fault_dr");
  for (const auto& l : st["links"]) {
    const uint64_t rate = l["rate_bps"];
    bool first = true;
    for (const char* side : {"upper", "lower"}) {
      const auto& e = l[side];
      const uint64_t drops =
          e.value("tx_dropped", uint64_t(0)) + e.value("rx_dropped", uint64_t(0));
      if (first)
        fmt::print("{:<12} {:<9} {:>9} {:>4}% {:>9} | ", l["name"].get<std::string>(),
                   l["state"].get<std::string>(), l["blackhole"].get<bool>() ? "yes" : "-",
                   l["loss_percent"].get<int>(), rate ? format_rate(rate) : "-");
      else
        fmt::print("{:<12} {:<9} {:>9} {:>5} {:>9} | ", "", "", "", "", "");
      fmt::print("{:<6} {:>10} {:>12} {:>10} {:>12} {:>7} {:>8}\n", e["node"].get<std::string>(),
                 e.value("tx_packets", uint64_t(0)), e.value("tx_bytes", uint64_t(0)),
                 e.value("rx_packets", uint64_t(0)), e.value("rx_bytes", uint64_t(0)), drops,
                 e.value("fault_dropped", uint64_t(0)));
      first = false;
    }
  }
  if (!st["blackholed_switches"].empty())
    fmt::print("blackholed switches: {}\n", st["blackholed_switches"].dump());
  fmt::print("data plane: {}\n", st.value("dataplane", "?"));
  if (st.contains("usid_endpoints")) {
    fmt::print("{:<8} {:<22} {:>12} {:>12} {:>10}\n", "switch", "uN SID (eBPF)", "shifted",
               "segment_next", "dropped");
    for (const auto& e : st["usid_endpoints"]) {
      if (e.contains("error")) {
        fmt::print("{:<8} {:<22} {}\n", e["node"].get<std::string>(), e["sid"].get<std::string>(),
                   e["error"].get<std::string>());
        continue;
      }
      fmt::print("{:<8} {:<22} {:>12} {:>12} {:>10}\n", e["node"].get<std::string>(),
                 e["sid"].get<std::string>(), e["shifted"].get<uint64_t>(),
                 e["segment_next"].get<uint64_t>(), e["dropped"].get<uint64_t>());
    }
  }
}

// Detaches a child that flaps the link; its pid goes to the state directory so that `down`
// can stop it.
int flap_in_background(const FabricPlan& plan, const std::string& link, uint64_t period_us,
                       int count, uint64_t duration_us) {
  const std::string pidfile = state_dir(plan.spec.name) + "/flap-" + link + ".pid";
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid > 0) {
    fmt::print("flapping {} in the background (pid {}); stop with: kill {}\n", link, pid, pid);
    return 0;
  }
  setsid();
  {
    std::ofstream f(pidfile);
    f << getpid() << "\n";
  }
  if (FILE* devnull = std::fopen("/dev/null", "r+")) {
    dup2(fileno(devnull), 0);
    dup2(fileno(devnull), 1);
    std::fclose(devnull);
  }
  const auto s = flap_link(plan, link, period_us, count, duration_us);
  std::error_code ec;
  std::filesystem::remove(pidfile, ec);
  _exit(s ? 0 : 1);
}

// `exec HOST command...`: everything after HOST belongs to the command (CLI11 would take its
// options for ours), so this one is parsed by hand. Returns only on failure, or -1 for
// --help: main's CLI11 parse then prints the subcommand's help like every other's.
int run_exec(std::string name, std::vector<std::string> args) {
  size_t i = 0;
  while (i < args.size() && args[i].starts_with("--name")) {
    if (args[i] == "--name") {
      if (i + 1 >= args.size()) return bad_argument("exec: --name needs a value");
      name = args[i + 1];
      i += 2;
    } else if (args[i].starts_with("--name=")) {
      name = args[i].substr(7);
      i += 1;
    } else {
      break;
    }
  }
  if (i < args.size() && (args[i] == "--help" || args[i] == "-h")) return -1;
  if (const std::string e = name_error(name); !e.empty()) return bad_argument(e);
  if (i >= args.size()) return bad_argument("exec: HOST and COMMAND are required");
  const std::string host = args[i++];
  if (host.starts_with("-")) return bad_argument("exec: unknown option '" + host + "'");
  if (i < args.size() && args[i] == "--") ++i;
  if (i >= args.size()) return bad_argument("exec: no command given after " + host);
  auto plan = load_fabric(name);
  if (!plan) return report(std::unexpected(plan.error()));
  const auto h = parse_host(*plan, host);
  if (!h)
    return bad_argument(
        fmt::format("exec: unknown host '{}' (h0..h{})", host, plan->spec.hosts - 1));
  // `ip netns exec` also gives the command the namespace's /sys view.
  std::vector<std::string> full{"ip", "netns", "exec", plan->nodes[size_t(*h)].ns};
  full.insert(full.end(), args.begin() + long(i), args.end());
  std::vector<char*> cargs;
  for (auto& a : full)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execvp("ip", cargs.data());
  execv("/usr/sbin/ip", cargs.data());
  std::perror("exec ip");
  return 1;
}

// Every option and subcommand of the command line (main() parses into it).
struct FabricArgs {
  std::string name = "mrc";
  FabricSpec spec;
  std::string rate_text;
  bool replace = false;
  int forwarding_timeout_ms = 10'000;
  bool kill_processes = false;
  bool json_out = false;
  std::string host;  // exec: listed for --help only (run_exec parses it)
  std::vector<std::string> command;
  std::string action, target;
  bool off = false;
  int percent = 0;
  std::string period_text = "100ms", duration_text;
  int count = 0;
  bool background = false;
  std::string from_host, to_host;
  int probes_per_path = 3;
  // Values parsed from the texts above by check_values.
  uint64_t rate_bps = 0, period_us = 0, duration_us = 0;

  CLI::App *up = nullptr, *down = nullptr, *show = nullptr, *status = nullptr, *exec = nullptr,
           *link = nullptr, *blackhole = nullptr, *loss = nullptr, *rate = nullptr, *flap = nullptr,
           *paths = nullptr, *check = nullptr, *dataplanes = nullptr;
  std::string dataplane_text = "auto";
};

// `up`, `down`, `show`, `status` and `exec`: the fabric's life and what it runs.
void add_fabric_commands(CLI::App& app, FabricArgs& a) {
  a.up = app.add_subcommand("up", "build the fabric");
  a.up->add_option("--hosts", a.spec.hosts, "hosts")
      ->capture_default_str()
      ->check(CLI::Range(2, kMaxHosts));
  a.up->add_option("--planes", a.spec.planes, "planes (NIC ports per host)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxPlanes));
  a.up->add_option("--leaves", a.spec.leaves, "leaves per plane (at most --hosts)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxLeaves));
  a.up->add_option("--spines", a.spec.spines, "spines per plane")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxSpines));
  a.up->add_option("--mtu", a.spec.mtu, "MTU of every link")
      ->capture_default_str()
      ->check(CLI::Range(1280, 65535));
  a.up->add_option("--rate", a.rate_text, "per-link rate limit (tbf), e.g. 10gbit");
  a.up->add_option("--dataplane", a.dataplane_text,
                   "how the switches forward: kernel (SRv6 seg6local), bpf (the same uN in "
                   "eBPF), ecmp (hashed ECMP, no source routing), auto (kernel, else bpf)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "kernel", "bpf", "ecmp"}));
  a.up->add_flag("--replace", a.replace, "tear down an existing fabric of that name first");
  a.up->add_option("--wait-ms", a.forwarding_timeout_ms,
                   "return once every path forwards (UDP probes), or fail and remove the fabric "
                   "after this long; 0 skips the check")
      ->capture_default_str()
      ->check(CLI::Range(0, 600'000));

  a.down = app.add_subcommand("down", "remove the fabric (idempotent, also after a crash)");
  a.down->add_flag("--kill", a.kill_processes,
                   "also stop processes running in the fabric (SIGTERM, then SIGKILL)");
  a.show = app.add_subcommand("show", "print fabric.json");
  a.dataplanes = app.add_subcommand(
      "dataplanes", "which data planes this kernel can run (each tried in a throwaway namespace)");
  a.status = app.add_subcommand("status", "per-link counters and fault state");
  a.status->add_flag("--json", a.json_out, "one JSON object");

  // Listed for --help; run_exec handles it before CLI11 sees the command's own options.
  a.exec = app.add_subcommand("exec", "run a command in a host namespace: exec HOST cmd...");
  a.exec->add_option("host", a.host, "h0 .. h<hosts-1>, or the bare number")->required();
  a.exec
      ->add_option("command", a.command,
                   "COMMAND [ARGS...]: everything after HOST (put -- first if COMMAND starts "
                   "with a dash)")
      ->required();
  a.exec->footer([] {
    return std::string(
        "Runs COMMAND in host HOST's network namespace (`ip netns exec`), with the namespace's "
        "/sys view. --name NAME (before or after exec) picks the fabric.\n"
        "Example: mrc-fabric exec h0 ping -6 -c 1 fcbb:bb00:4001::\n");
  });
  mrc::tools::set_exit_codes(*a.exec, "COMMAND's own; 1 the fabric is missing or exec failed");
}

// `link`, `blackhole`, `loss`, `rate` and `flap`: faults on a running fabric.
void add_fault_commands(CLI::App& app, FabricArgs& a) {
  a.link = app.add_subcommand("link", "admin down/up of a link (both ends)");
  a.link->add_option("action", a.action, "down | up")
      ->required()
      ->check(CLI::IsMember({"down", "up"}));
  a.link->add_option("link", a.target, "link name, e.g. p0-l0-s1 or h2-p1")->required();

  a.blackhole = app.add_subcommand("blackhole", "silently drop on a link or a whole switch");
  a.blackhole->add_option("target", a.target, "link (p0-l0-s1, h2-p1) or switch (p0-s1, p0-l0)")
      ->required();
  a.blackhole->add_flag("--off", a.off, "remove the blackhole");

  a.loss = app.add_subcommand("loss", "random loss on a link, each direction (0 removes)");
  a.loss->add_option("link", a.target, "link name")->required();
  a.loss->add_option("percent", a.percent, "0..100")->required()->check(CLI::Range(0, 100));

  a.rate = app.add_subcommand("rate", "rate limit a link, each direction (0 = fabric rate)");
  a.rate->add_option("link", a.target, "link name")->required();
  a.rate->add_option("rate", a.rate_text, "e.g. 1gbit, 100mbit, 0")->required();

  a.flap = app.add_subcommand(
      "flap", "toggle a link: down for half the period, up for the other half; ends up");
  a.flap->add_option("link", a.target, "link name")->required();
  a.flap->add_option("--period", a.period_text, "one down+up cycle")->capture_default_str();
  a.flap->add_option("--count", a.count, "cycles (0 = until --duration, or until interrupted)")
      ->check(CLI::Range(0, 1'000'000'000));
  a.flap->add_option("--duration", a.duration_text, "stop after this long, e.g. 5s");
  a.flap->add_flag("--background", a.background, "detach; `down` or kill PID stops it");
}

// `paths` and `check`: what the fabric's routes are and whether they forward.
void add_query_commands(CLI::App& app, FabricArgs& a) {
  a.paths = app.add_subcommand("paths", "destination addresses and links from one host to another");
  a.paths->add_option("from", a.from_host, "h0 or 0")->required();
  a.paths->add_option("to", a.to_host, "h3 or 3")->required();

  a.check = app.add_subcommand("check", "UDP probes over every path (SRv6 and plain)");
  a.check->add_option("--count", a.probes_per_path, "datagrams per path")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
}

// Values whose form or range the parser cannot check: bad arguments too, before anything
// runs. Returns the exit status of a bad argument, or -1.
int check_values(FabricArgs& a) {
  a.spec.name = a.name;
  if (const std::string e = name_error(a.name); !e.empty()) return bad_argument(e);
  if (!a.rate_text.empty()) {
    auto r = parse_rate(a.rate_text);
    if (!r) return bad_argument(r.error().message);
    a.rate_bps = *r;
  }
  if (*a.flap) {
    auto period = parse_duration_us(a.period_text);
    if (!period) return bad_argument("--period: " + period.error().message);
    if (*period < 2000) return bad_argument("--period must be at least 2ms");
    a.period_us = *period;
    if (!a.duration_text.empty()) {
      auto d = parse_duration_us(a.duration_text);
      if (!d) return bad_argument("--duration: " + d.error().message);
      a.duration_us = *d;
    }
  }
  return -1;
}

int run_up(FabricArgs& a) {
  a.spec.rate_bps = a.rate_bps;
  a.spec.dataplane = parse_dataplane(a.dataplane_text).value_or(DataPlane::kAuto);
  if (auto ok = validate(a.spec); !ok) return bad_argument(ok.error().message);
  struct sigaction sa {};
  sa.sa_handler = on_up_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaction(sig, &sa, nullptr);
  auto plan = fabric_up(a.spec, {.replace = a.replace,
                                 .forwarding_timeout_ms = a.forwarding_timeout_ms,
                                 .interrupted = &g_up_interrupted});
  if (!plan) return report(std::unexpected(plan.error()));
  const FabricSpec& spec = plan->spec;
  fmt::print(
      "fabric '{}' up: {} hosts, {} planes x ({} leaves + {} spines), {} links, mtu {}{}, data "
      "plane {}{}\n",
      a.name, spec.hosts, spec.planes, spec.leaves, spec.spines, plan->links.size(), spec.mtu,
      spec.rate_bps ? ", rate " + format_rate(spec.rate_bps) : "", dataplane_name(spec.dataplane),
      a.spec.dataplane == DataPlane::kAuto ? " (auto)" : "");
  fmt::print("description: {}/fabric.json\n", state_dir(a.name));
  return 0;
}

// Each data plane: usable here or not, and why not.
int run_dataplanes() {
  auto checks = probe_dataplanes();
  if (!checks) return report(std::unexpected(checks.error()));
  for (const auto& c : *checks)
    fmt::print("{:<7} {}\n", dataplane_name(c.plane), c.usable ? "usable" : "no: " + c.reason);
  auto chosen = resolve_dataplane(DataPlane::kAuto);
  fmt::print("auto    {}\n",
             chosen ? std::string(dataplane_name(*chosen)) : "no: " + chosen.error().message);
  return 0;
}

int run_down(const FabricArgs& a) {
  if (const auto pids = fabric_processes(a.name); !pids.empty() && !a.kill_processes) {
    std::string list;
    for (int pid : pids)
      list += " " + std::to_string(pid);
    fmt::print(stderr,
               "mrc-fabric: warning: processes still run in the fabric (pids{}); their "
               "namespaces and links live on until they exit (use down --kill)\n",
               list);
  }
  auto n = fabric_down(a.name, a.kill_processes);
  if (!n) return report(std::unexpected(n.error()));
  fmt::print("fabric '{}' down: {} namespaces removed\n", a.name, *n);
  return 0;
}

int run_show(const std::string& name) {
  std::ifstream f(state_dir(name) + "/fabric.json");
  if (!f) {
    const auto plan = load_fabric(name);  // says why: missing, or an `up` that did not finish
    fmt::print(stderr, "mrc-fabric: {}\n",
               plan ? "cannot read " + state_dir(name) + "/fabric.json" : plan.error().message);
    return 1;
  }
  std::cout << f.rdbuf();
  return 0;
}

// A fault command on a link (or, for blackhole, a switch) of the fabric; one the fabric does
// not have is a bad argument.
int run_fault(const FabricPlan& plan, FabricArgs& a) {
  a.target = fabric_spelling(a.target);
  if ((*a.link || *a.loss || *a.rate || *a.flap) && !plan.link(a.target))
    return bad_argument(
        fmt::format("unknown link '{}' (e.g. p0-l0-s1 or p0/leaf0-spine1, h2-p1)", a.target));
  if (*a.blackhole && !plan.link(a.target) && !plan.node(a.target))
    return bad_argument(
        fmt::format("unknown link or switch '{}' (e.g. p0-l0-s1, h2-p1, p0-s1, p0-l0)", a.target));
  if (*a.link) return report(set_link_admin(plan, a.target, a.action == "up"));
  if (*a.blackhole) return report(set_blackhole(plan, a.target, !a.off));
  if (*a.loss) return report(set_loss(plan, a.target, a.percent));
  if (*a.rate) return report(set_rate(plan, a.target, a.rate_bps));
  if (a.background) return flap_in_background(plan, a.target, a.period_us, a.count, a.duration_us);
  return report(flap_link(plan, a.target, a.period_us, a.count, a.duration_us));
}

int run_paths(const FabricPlan& plan, const FabricArgs& args) {
  const auto a = parse_host(plan, args.from_host), b = parse_host(plan, args.to_host);
  if (!a || !b || *a == *b)
    return bad_argument(
        fmt::format("paths: need two different hosts in h0..h{}", plan.spec.hosts - 1));
  const FabricSpec& sp = plan.spec;
  const auto print = [&](int p, const std::string& kind, const mrc::wire::Ipv6Addr& da,
                         std::optional<int> spine) {
    std::string links;
    for (const auto& l : path_links(sp, p, *a, *b, spine))
      links += " " + l;
    fmt::print("p{} {:<10} {:<28} {}\n", p, kind, format_ipv6(da),
               spine || kind != "plain" ? links.substr(1) : "(ECMP)");
  };
  for (int p = 0; p < sp.planes; ++p) {
    for (int s = 0; s < sp.spines; ++s)
      print(p, "via s" + std::to_string(s), srv6_address(sp, p, s, *b), s);
    if (leaf_of_host(sp, *a) == leaf_of_host(sp, *b))
      print(p, "same-leaf", srv6_address(sp, p, std::nullopt, *b), std::nullopt);
    print(p, "plain", host_address(p, *b), std::nullopt);
  }
  return 0;
}

int run_check(const FabricPlan& plan, int probes_per_path) {
  auto probes = all_probes(plan.spec);
  if (auto ok = run_probes(plan, probes, probes_per_path, 300); !ok) return report(ok);
  int lost_paths = 0;
  for (const auto& p : probes) {
    if (p.received < p.sent) {
      ++lost_paths;
      fmt::print("LOST {:<24} {:<32} {}/{}\n", p.label(), p.destination, p.received, p.sent);
    }
  }
  fmt::print("{} paths, {} with losses\n", probes.size(), lost_paths);
  return lost_paths ? 1 : 0;
}

// `exec` takes everything after its host as the command, so it is found before CLI11 parses
// (a --name before it still counts). Returns -1 when the command line is not an exec, or is
// `exec --help` (CLI11 prints it).
int exec_before_parsing(int argc, char** argv) {
  std::string name = "mrc";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--name" && i + 1 < argc) {
      name = argv[++i];
    } else if (a.starts_with("--name=")) {
      name = a.substr(7);
    } else {
      if (a == "exec") return run_exec(name, std::vector<std::string>(argv + i + 1, argv + argc));
      break;
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int rc = exec_before_parsing(argc, argv); rc >= 0) return rc;
  CLI::App app{"mrc-fabric: multi-plane two-tier SRv6 fabrics of network namespaces (root)",
               "mrc-fabric"};
  mrc::tools::set_exit_codes(
      app,
      "0 done, 1 failed (no fabric, a command in a namespace failed, `check`: a path lost "
      "probes; exec: the command's own)");
  app.require_subcommand(1);
  app.fallthrough();  // --name may follow the subcommand
  FabricArgs a;
  app.add_option("--name", a.name, "fabric name: namespace prefix and state directory")
      ->capture_default_str();
  add_fabric_commands(app, a);
  add_fault_commands(app, a);
  add_query_commands(app, a);
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;
  if (const int rc = check_values(a); rc >= 0) return rc;

  if (*a.up) return run_up(a);
  if (*a.dataplanes) return run_dataplanes();
  if (*a.down) return run_down(a);
  if (*a.show) return run_show(a.name);
  auto plan = load_fabric(a.name);
  if (!plan) return report(std::unexpected(plan.error()));
  if (*a.status) {
    auto st = fabric_status(*plan);
    if (!st) return report(std::unexpected(st.error()));
    if (a.json_out)
      fmt::print("{}\n", st->dump(2));
    else
      print_status(*st);
    return 0;
  }
  if (*a.link || *a.blackhole || *a.loss || *a.rate || *a.flap) return run_fault(*plan, a);
  if (*a.paths) return run_paths(*plan, a);
  if (*a.check) return run_check(*plan, a.probes_per_path);
  return 2;
}
