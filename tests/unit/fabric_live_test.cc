// Tests for net/fabric.h, the APPLY half, on a real namespace fabric (root): 4 hosts, 2 planes,
// 2 leaves and 2 spines per plane under a unique name, on the data plane MRC_TEST_DATAPLANE
// names (tests/support/test_dataplane.h; ctest runs the program once per data plane). On the
// source-routing planes a fault must break exactly the SRv6 paths through it; on hashed ECMP
// the plain addresses route around a link that is down, and lose what hashes onto a
// blackhole. UDP probes (zero checksum, see
// run_probes) check every SRv6 path and every plain ECMP address and the planned permanent
// neighbours, then each fault: admin-down breaks exactly the paths through the link and `up`
// restores the deleted neighbours and routes, a blackhole
// drops silently with the link up and its routes in place, `loss 50` loses about half, and
// `down` leaves no namespace behind. Skips (with the reason) when not root or without
// `ip netns`.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/fabric.h"
#include "net/fabric_live.h"
#include "net/fabric_probe.h"
#include "net/netns_exec.h"
#include "net/usid_bpf.h"
#include "support/test_dataplane.h"

namespace mrc::net {
namespace {

class FabricLive : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto ok = check_privileges(); !ok) {
      skip_reason_ = "needs root and `ip netns`: " + ok.error().message;
      return;
    }
    const auto dataplane = test::test_dataplane();
    if (!dataplane.skip_reason.empty()) {
      skip_reason_ = dataplane.skip_reason;
      return;
    }
    spec_.dataplane = dataplane.plane;
    spec_.name = "ftest" + std::to_string(getpid());
    spec_.hosts = 4;
    spec_.planes = 2;
    spec_.leaves = 2;
    spec_.spines = 2;
    spec_.mtu = 9000;
    auto plan = fabric_up(spec_);
    if (!plan) {
      up_error_ = plan.error().message;
      return;
    }
    plan_ = new FabricPlan(std::move(*plan));
  }
  static void TearDownTestSuite() {
    if (plan_) (void)fabric_down(spec_.name);
    delete plan_;
    plan_ = nullptr;
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_TRUE(up_error_.empty()) << "fabric up failed: " << up_error_;
    ASSERT_NE(plan_, nullptr);
  }

  static bool srv6() { return has_source_routing(spec_.dataplane); }
  // The probes whose path is exact: SRv6 (through each spine, and the same-leaf route); on
  // ECMP the plain ones, exact only in their host links.
  static std::vector<Probe> exact_probes() {
    auto probes = all_probes(spec_);
    if (srv6()) std::erase_if(probes, [](const Probe& p) { return p.via == Probe::Via::kPlain; });
    return probes;
  }
  static std::vector<std::string> links_of(const Probe& p) {
    return path_links(spec_, p.plane, p.src_host, p.dst_host,
                      p.via == Probe::Via::kSpine ? std::optional<int>(p.spine) : std::nullopt);
  }
  static bool crosses(const Probe& p, const std::string& link) {
    const auto links = links_of(p);
    return std::find(links.begin(), links.end(), link) != links.end();
  }
  static bool crosses_switch(const Probe& p, const std::string& switch_id) {
    for (const auto& l : links_of(p)) {
      const Link* link = plan_->link(l);
      if (link->upper.node == switch_id || link->lower.node == switch_id) return true;
    }
    return false;
  }
  // Every probe delivered everything.
  static void expect_all_reach(std::vector<Probe> probes, const std::string& when) {
    ASSERT_TRUE(run_probes(*plan_, probes, 2, 300));
    for (const auto& p : probes)
      EXPECT_EQ(p.received, p.sent) << when << ": " << p.label() << " " << p.destination;
  }
  // Probes whose path crosses `broken(p)` lose everything, the others nothing.
  template <typename Broken>
  static void expect_exactly_broken(const std::string& when, Broken broken) {
    auto probes = exact_probes();
    ASSERT_TRUE(run_probes(*plan_, probes, 2, 300));
    int broken_count = 0;
    for (const auto& p : probes) {
      if (broken(p)) {
        ++broken_count;
        EXPECT_EQ(p.received, 0) << when << ": " << p.label() << " should be cut";
      } else {
        EXPECT_EQ(p.received, p.sent) << when << ": " << p.label() << " should work";
      }
    }
    EXPECT_GT(broken_count, 0) << when;
  }

  // ECMP: probes crossing a blackholed switch or link are lost or not as the hash chose, but
  // some are lost, none whose two hosts share a leaf (never leaves the leaf), and the link
  // or switch stays up.
  static void expect_some_hashed_onto(const std::string& when) {
    auto probes = all_probes(spec_);
    ASSERT_TRUE(run_probes(*plan_, probes, 2, 300));
    int lost = 0;
    for (const auto& p : probes) {
      if (p.received < p.sent) ++lost;
      if (leaf_of_host(spec_, p.src_host) == leaf_of_host(spec_, p.dst_host)) {
        EXPECT_EQ(p.received, p.sent) << when << ": " << p.label();
      }
    }
    EXPECT_GT(lost, 0) << when << ": no probe hashed onto it";
  }

  static std::string routes(const std::string& ns) {
    auto r = run_command({"ip", "-6", "route", "show"}, {}, ns);
    return r ? r->out : "";
  }
  static std::string neighbours(const std::string& ns, const std::string& ifname) {
    auto r = run_command({"ip", "-6", "neigh", "show", "dev", ifname}, {}, ns);
    return r ? r->out : "?";
  }
  static std::string operstate(const std::string& ns, const std::string& ifname) {
    auto r = run_command({"ip", "-j", "link", "show", "dev", ifname}, {}, ns);
    if (!r || r->exit_code != 0) return "?";
    return nlohmann::json::parse(r->out).at(0).value("operstate", "?");
  }

  // The ECMP route of plane `plane`'s leaf 0 to host 3 (on the other leaf) has a live nexthop
  // through `dev` (the kernel keeps a nexthop whose link is down as "dead linkdown").
  static bool ecmp_route_has(int plane, const std::string& dev) {
    const std::string r = routes(spec_.name + "-p" + std::to_string(plane) + "-l0");
    const std::string prefix = "fcbb:bb0" + std::to_string(plane) + ":4003::/48";
    size_t at = r.find(prefix);
    if (at == std::string::npos) return false;
    // The route's own line and its "\tnexthop via ... dev X" lines.
    for (size_t line_end = r.find('\n', at); line_end != std::string::npos;
         line_end = r.find('\n', at)) {
      const std::string line = r.substr(at, line_end - at);
      if (at != r.find(prefix) && !line.starts_with("\t")) break;
      if ((line + " ").find("dev " + dev + " ") != std::string::npos)
        return line.find("dead") == std::string::npos;
      at = line_end + 1;
    }
    return false;
  }

  static inline FabricSpec spec_;
  static inline FabricPlan* plan_ = nullptr;
  static inline std::string skip_reason_;
  static inline std::string up_error_;
};

TEST_F(FabricLive, fabric_up__every_host_reaches_every_host_on_every_plane_and_path) {
  // Every link end has its planned MAC and its peer's as a permanent neighbour entry.
  for (const Link& l : plan_->links) {
    for (const auto& [self, peer] :
         {std::pair{&l.upper, &l.lower}, std::pair{&l.lower, &l.upper}}) {
      const std::string want = peer->ip + " lladdr " + peer->mac + " PERMANENT";
      EXPECT_NE(neighbours(self->ns, self->ifname).find(want), std::string::npos)
          << l.name << " in " << self->ns << ": " << neighbours(self->ns, self->ifname);
    }
  }
  expect_all_reach(all_probes(spec_), "fresh fabric");
  // The description is where the driver reads it.
  const std::string file = state_dir(spec_.name) + "/fabric.json";
  ASSERT_TRUE(std::filesystem::exists(file));
  auto loaded = load_fabric(spec_.name);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->spec, spec_);
  if (spec_.dataplane == DataPlane::kBpf) {
    // Every switch's uN program shifted the carriers of the probes that crossed it.
    for (const UsidEndpoint& e : plan_->usid_endpoints) {
      auto c = attached_usid_counters(e.ns, e.interfaces.back());
      ASSERT_TRUE(c) << c.error().message;
      EXPECT_GT(c->shifted, 0u) << e.node;
      EXPECT_EQ(c->dropped, 0u) << e.node;
    }
  }
  if (!srv6()) {
    EXPECT_TRUE(plan_->usid_endpoints.empty());
  }
}

TEST_F(FabricLive, fabric_up__ping_over_the_plain_address) {
  // ICMP through an SRv6 DA fails by design (the echo checksum covers the first DA); plain
  // addresses answer.
  auto r = run_command({"ping", "-6", "-c", "1", "-W", "2", format_ipv6(host_address(1, 3))}, {},
                       plan_->nodes[0].ns);
  ASSERT_TRUE(r) << r.error().message;
  if (r->exit_code == 127) GTEST_SKIP() << "ping is not installed (iputils-ping)";
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
}

TEST_F(FabricLive, set_link_admin__down_cuts_exactly_its_paths_and_up_restores_the_routes) {
  const std::string link = "p0-l0-s1";
  if (!srv6()) {
    // Hashed ECMP without a routing protocol: leaf 0 stops using the nexthop whose link is
    // down, but spine 1 lost its only route to leaf 0 and the other leaf still hashes onto
    // spine 1. So every probe from leaf 0 arrives; the lost ones are exactly some from leaf 1
    // to leaf 0 on plane 0 (what routing convergence, or MRC's path choice, has to fix).
    ASSERT_TRUE(ecmp_route_has(0, "s1"));
    ASSERT_TRUE(set_link_admin(*plan_, link, false));
    EXPECT_FALSE(ecmp_route_has(0, "s1"));
    EXPECT_TRUE(ecmp_route_has(0, "s0"));
    auto probes = all_probes(spec_);
    ASSERT_TRUE(run_probes(*plan_, probes, 2, 300));
    for (const auto& p : probes) {
      const bool toward_leaf0 = p.plane == 0 && leaf_of_host(spec_, p.src_host) == 1 &&
                                leaf_of_host(spec_, p.dst_host) == 0;
      if (!toward_leaf0) {
        EXPECT_EQ(p.received, p.sent) << "p0-l0-s1 down: " << p.label();
      }
    }
    ASSERT_TRUE(set_link_admin(*plan_, link, true));
    EXPECT_TRUE(ecmp_route_has(0, "s1"));
    expect_all_reach(all_probes(spec_), "after p0-l0-s1 up");
    return;
  }
  ASSERT_NE(routes(spec_.name + "-p0-l0").find("fcbb:bb00:8001::/48"), std::string::npos);
  ASSERT_TRUE(set_link_admin(*plan_, link, false));
  // The kernel deleted the static route to spine 1 with the interface.
  EXPECT_EQ(routes(spec_.name + "-p0-l0").find("fcbb:bb00:8001::/48"), std::string::npos);
  expect_exactly_broken("p0-l0-s1 down", [&](const Probe& p) { return crosses(p, link); });
  ASSERT_TRUE(set_link_admin(*plan_, link, true));
  EXPECT_NE(routes(spec_.name + "-p0-l0").find("fcbb:bb00:8001::/48"), std::string::npos);
  EXPECT_NE(routes(spec_.name + "-p0-s1").find("fcbb:bb00:1::/48"), std::string::npos);
  expect_all_reach(all_probes(spec_), "after p0-l0-s1 up");
}

TEST_F(FabricLive, set_link_admin__host_port_down_cuts_that_plane_of_the_host) {
  const std::string link = "h2-p1";
  ASSERT_TRUE(set_link_admin(*plan_, link, false));
  expect_exactly_broken("h2-p1 down", [&](const Probe& p) { return crosses(p, link); });
  EXPECT_EQ(neighbours(spec_.name + "-p1-l1", "h2"), "") << "the kernel flushes them on down";
  ASSERT_TRUE(set_link_admin(*plan_, link, true));
  // Both ends hold their peer's planned MAC again before any packet needs it.
  const Link* l = plan_->link(link);
  EXPECT_NE(neighbours(spec_.name + "-p1-l1", "h2").find(l->lower.mac + " PERMANENT"),
            std::string::npos);
  EXPECT_NE(neighbours(spec_.name + "-h2", "p1").find(l->upper.mac + " PERMANENT"),
            std::string::npos);
  expect_all_reach(all_probes(spec_), "after h2-p1 up");
}

TEST_F(FabricLive, set_blackhole__drops_silently_with_the_link_up) {
  const std::string link = "p1-l1-s0";
  ASSERT_TRUE(set_blackhole(*plan_, link, true));
  if (srv6()) {
    expect_exactly_broken("p1-l1-s0 blackholed", [&](const Probe& p) { return crosses(p, link); });
    EXPECT_NE(routes(spec_.name + "-p1-l1").find("fcbb:bb01:8000::/48"), std::string::npos);
  } else {
    expect_some_hashed_onto("p1-l1-s0 blackholed");
  }
  EXPECT_EQ(operstate(spec_.name + "-p1-l1", "s0"), "UP");
  EXPECT_EQ(operstate(spec_.name + "-p1-s0", "l1"), "UP");
  auto st = fabric_status(*plan_);
  ASSERT_TRUE(st) << st.error().message;
  bool seen = false;
  for (const auto& l : (*st)["links"]) {
    if (l["name"] != link) continue;
    seen = true;
    EXPECT_EQ(l["state"], "up");
    EXPECT_EQ(l["blackhole"], true);
    EXPECT_GT(
        l["upper"]["fault_dropped"].get<uint64_t>() + l["lower"]["fault_dropped"].get<uint64_t>(),
        0u);
  }
  EXPECT_TRUE(seen);
  ASSERT_TRUE(set_blackhole(*plan_, link, false));
  expect_all_reach(all_probes(spec_), "after the blackhole is lifted");
}

TEST_F(FabricLive, set_blackhole__switch_cuts_every_path_through_it) {
  ASSERT_TRUE(set_blackhole(*plan_, "p0-s1", true));
  if (srv6())
    expect_exactly_broken("p0-s1 blackholed",
                          [&](const Probe& p) { return crosses_switch(p, "p0-s1"); });
  else
    expect_some_hashed_onto("p0-s1 blackholed");
  ASSERT_TRUE(set_blackhole(*plan_, "p0-s1", false));
  expect_all_reach(all_probes(spec_), "after the switch blackhole is lifted");
  EXPECT_FALSE(set_blackhole(*plan_, "p0-s9", true));
  EXPECT_FALSE(set_blackhole(*plan_, "h0", true));
}

TEST_F(FabricLive, set_loss__50_percent_loses_about_half) {
  // h0 (leaf 0) -> h2 (leaf 1) through spine 0 crosses p0-l0-s0 once; on ECMP the probe's
  // spine is the hash's, so the loss goes on h0's own port, which it surely crosses.
  const std::string link = srv6() ? "p0-l0-s0" : "h0-p0";
  ASSERT_TRUE(set_loss(*plan_, link, 50));
  std::vector<Probe> probes(1);
  probes[0].src_host = 0;
  probes[0].dst_host = 2;
  probes[0].plane = 0;
  probes[0].via = srv6() ? Probe::Via::kSpine : Probe::Via::kPlain;
  probes[0].spine = srv6() ? 0 : -1;
  ASSERT_TRUE(run_probes(*plan_, probes, 400, 300));
  // Binomial(400, 0.5): sd 10; 140..260 is 6 sd.
  EXPECT_GT(probes[0].received, 140);
  EXPECT_LT(probes[0].received, 260);
  ASSERT_TRUE(set_loss(*plan_, link, 0));
  ASSERT_TRUE(run_probes(*plan_, probes, 100, 300));
  EXPECT_EQ(probes[0].received, 100);
  EXPECT_FALSE(set_loss(*plan_, link, 101));
}

TEST_F(FabricLive, set_rate__installs_and_removes_tbf) {
  ASSERT_TRUE(set_rate(*plan_, "h1-p0", 100'000'000));
  auto r = run_command({"tc", "qdisc", "show", "dev", "p0"}, {}, spec_.name + "-h1");
  ASSERT_TRUE(r);
  EXPECT_NE(r->out.find("tbf"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("100Mbit"), std::string::npos) << r->out;
  ASSERT_TRUE(set_rate(*plan_, "h1-p0", 0));
  r = run_command({"tc", "qdisc", "show", "dev", "p0"}, {}, spec_.name + "-h1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out.find("tbf"), std::string::npos) << r->out;
}

TEST_F(FabricLive, flap_link__ends_with_the_link_up_and_routes_back) {
  ASSERT_TRUE(flap_link(*plan_, "p1-l0-s1", 20'000, 3, 0));
  if (srv6()) {
    EXPECT_NE(routes(spec_.name + "-p1-l0").find("fcbb:bb01:8001::/48"), std::string::npos);
  } else {
    EXPECT_TRUE(ecmp_route_has(1, "s1"));
  }
  expect_all_reach(all_probes(spec_), "after flapping");
}

TEST_F(FabricLive, cli__status_exec_check_and_exec_help) {
  const std::string tool = std::string(MRC_BINARY_DIR) + "/bin/mrc-fabric";
  if (access(tool.c_str(), X_OK) != 0) GTEST_SKIP() << tool << " not built";
  auto st = run_command({tool, "status", "--json", "--name", spec_.name});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0) << st->err;
  const auto j = nlohmann::json::parse(st->out);
  EXPECT_EQ(j["links"].size(), plan_->links.size());
  auto ex = run_command({tool, "exec", "--name", spec_.name, "h3", "ip", "-6", "addr", "show"});
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->exit_code, 0) << ex->err;
  EXPECT_NE(ex->out.find("fcbb:bb01:4003::"), std::string::npos) << ex->out;
  auto check = run_command({tool, "check", "--name", spec_.name});
  ASSERT_TRUE(check);
  EXPECT_EQ(check->exit_code, 0) << check->out;
  auto help = run_command({tool, "exec", "--help"});
  ASSERT_TRUE(help);
  EXPECT_EQ(help->exit_code, 0) << help->err;
  EXPECT_NE(help->out.find("Usage: mrc-fabric exec"), std::string::npos) << help->out;
  // mrc-sim's spelling of a link names the same link as the fabric's; a link the fabric does
  // not have is a bad argument (exit 2, one line).
  const auto link_state = [&](const std::string& name) {
    auto s = run_command({tool, "status", "--json", "--name", spec_.name});
    const auto status = nlohmann::json::parse(s->out);
    for (const auto& l : status["links"])
      if (l["name"] == name) return l["state"].get<std::string>();
    return std::string("missing");
  };
  auto down = run_command({tool, "link", "down", "p1/leaf0-spine1", "--name", spec_.name});
  ASSERT_TRUE(down);
  EXPECT_EQ(down->exit_code, 0) << down->err;
  EXPECT_NE(link_state("p1-l0-s1"), "up");
  auto up = run_command({tool, "link", "up", "p1-l0-s1", "--name", spec_.name});
  ASSERT_TRUE(up);
  EXPECT_EQ(up->exit_code, 0) << up->err;
  EXPECT_EQ(link_state("p1-l0-s1"), "up");
  auto unknown = run_command({tool, "link", "down", "p9/leaf0-spine1", "--name", spec_.name});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->exit_code, 2) << unknown->err;
  EXPECT_EQ(std::count(unknown->err.begin(), unknown->err.end(), '\n'), 1) << unknown->err;
  expect_all_reach(all_probes(spec_), "after link down and up by the command line");
}

// An `up` that died part-way (here: one namespace and the marker, no fabric.json): status
// (load_fabric) says the fabric is incomplete and how to remove it, and down removes it.
TEST_F(FabricLive, load_fabric__incomplete_up_is_reported_and_down_removes_it) {
  const std::string name = spec_.name + "x";
  ASSERT_TRUE(run_checked({"ip", "netns", "add", name + "-h0"}));
  auto loaded = load_fabric(name);
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find("incomplete"), std::string::npos) << loaded.error().message;
  EXPECT_NE(loaded.error().message.find("mrc-fabric down"), std::string::npos);
  auto n = fabric_down(name);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 1);
  EXPECT_TRUE(fabric_namespaces(name).empty());
  EXPECT_NE(load_fabric(name).error().message.find("no fabric"), std::string::npos);
}

// `mrc-fabric up` stopped by SIGTERM at several points of its work: it either finished before
// the signal (then status works) or removed everything it had built; down and status agree.
TEST_F(FabricLive, cli_up__interrupted_leaves_nothing_behind) {
  const std::string tool = std::string(MRC_BINARY_DIR) + "/bin/mrc-fabric";
  if (access(tool.c_str(), X_OK) != 0) GTEST_SKIP() << tool << " not built";
  const std::string name = spec_.name + "i";
  for (const int delay_ms : {5, 40, 150}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      const std::string dataplane(dataplane_name(spec_.dataplane));
      execl(tool.c_str(), tool.c_str(), "up", "--name", name.c_str(), "--hosts", "4", "--planes",
            "2", "--dataplane", dataplane.c_str(), nullptr);
      _exit(127);
    }
    usleep(useconds_t(delay_ms) * 1000);
    kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    // Killed outright (the signal came before the handler was installed, before any work) or
    // exited: either way what exists must be a whole fabric or nothing.
    auto loaded = load_fabric(name);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      EXPECT_TRUE(loaded) << loaded.error().message;
    } else {
      EXPECT_TRUE(fabric_namespaces(name).empty()) << "delay " << delay_ms << " ms";
      EXPECT_FALSE(std::filesystem::exists(state_dir(name))) << "delay " << delay_ms << " ms";
      ASSERT_FALSE(loaded);
      EXPECT_NE(loaded.error().message.find("no fabric"), std::string::npos)
          << loaded.error().message;
    }
    auto n = fabric_down(name);
    ASSERT_TRUE(n) << n.error().message;
    EXPECT_TRUE(fabric_namespaces(name).empty());
  }
}

// Runs last (gtest keeps declaration order): down, also after a "crash" that left a stray
// namespace and no state file.
TEST_F(FabricLive, zz_fabric_down__removes_everything_even_after_a_crash) {
  ASSERT_TRUE(run_checked({"ip", "netns", "add", spec_.name + "-p0-s9"}));
  std::filesystem::remove_all(state_dir(spec_.name));
  // A process left inside a host: found, and stopped by down(kill_processes).
  const std::string host_ns = "/run/netns/" + spec_.name + "-h1";
  const pid_t sleeper = fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    const int fd = open(host_ns.c_str(), O_RDONLY);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(126);
    execlp("sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  for (int i = 0; i < 200 && fabric_processes(spec_.name).empty(); ++i)
    usleep(10'000);
  EXPECT_EQ(fabric_processes(spec_.name), std::vector<int>{sleeper});
  auto n = fabric_down(spec_.name, /*kill_processes=*/true);
  int status = 0;
  EXPECT_EQ(waitpid(sleeper, &status, 0), sleeper);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, int(plan_->nodes.size()) + 1);
  for (const auto& e : std::filesystem::directory_iterator("/run/netns"))
    EXPECT_FALSE(is_fabric_namespace(spec_.name, e.path().filename().string())) << e.path();
  EXPECT_FALSE(std::filesystem::exists(state_dir(spec_.name)));
  auto again = fabric_down(spec_.name);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, 0);
}

}  // namespace
}  // namespace mrc::net
