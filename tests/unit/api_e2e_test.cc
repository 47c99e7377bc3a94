// End to end over the C API with separate processes: a controller process
// (`mrc-ctl apply` of a TOML file with EV format / EV / CC profiles) and two application
// processes (examples/mrc_write_bw, server and client) exchange WRITE_IMM over 2 planes while
// a second `mrc-ctl apply` changes the ONLINE EV and CC profiles under their live QPs
// (MODIFY_ONLINE) and `mrc-ctl port 1 disable` takes plane 1 out of service mid-run: the
// transfer completes, the data is verified, and both applications see IBV_EVENT_PORT_ERR on
// port 1.
//
//   LoopbackNode      one node in a private network namespace, planes fd00:1::1 and fd00:2::1
//                     on lo (both applications share the node state, as on one host)
//   NamespaceFabric   two nodes on `mrc-fabric up --hosts 2 --planes 2 --leaves 1 --spines 2`
//                     (processes via `ip netns exec`), a controller per node; plane 1 is
//                     disabled on the client's node
//   CrashedApplicationsDoNotHoldProfiles
//                     applications killed with SIGKILL while their QPs use the profiles: the
//                     controller can take the profiles OFFLINE (ocp-mrc-api.md 5.5 EBUSY)
//
// Needs root (skipped with a message otherwise) and the programs built next to this test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <mrc_ctl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/test_dataplane.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

bool g_ready = false;
std::string g_skip_reason;
std::string g_dir;  // scratch directory

std::string bin(const std::string& name) {
  return std::string(MRC_BINARY_DIR) + "/bin/" + name;
}

class E2eEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (::geteuid() != 0) {
      g_skip_reason = "needs root for network namespaces";
      return;
    }
    for (const char* b : {"mrc-ctl", "mrc_write_bw"})
      if (::access(bin(b).c_str(), X_OK) != 0) {
        g_skip_reason = bin(b) + " is not built";
        return;
      }
    if (::unshare(CLONE_NEWNET) != 0) {
      g_skip_reason = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
      return;
    }
    if (std::system("ip link set lo up && ip -6 addr add fd00:1::1/64 dev lo nodad && "
                    "ip -6 addr add fd00:2::1/64 dev lo nodad") != 0) {
      g_skip_reason = "cannot configure addresses with ip(8)";
      return;
    }
    char tmpl[] = "/tmp/mrc_e2e_XXXXXX";
    if (!::mkdtemp(tmpl)) {
      g_skip_reason = "mkdtemp failed";
      return;
    }
    g_dir = tmpl;
    ::unsetenv("MRC_SOFT_CONFIG");
    ::unsetenv("MRC_SOFT_LENIENT");
    g_ready = true;
  }
  void TearDown() override {
    if (!g_dir.empty()) std::system(("rm -rf " + g_dir).c_str());
  }
};

const auto* const g_env = ::testing::AddGlobalTestEnvironment(new E2eEnvironment);

#define REQUIRE_ROOT() \
  if (!g_ready) GTEST_SKIP() << g_skip_reason

// A child process with its stdout and stderr in one pipe.
class Proc {
 public:
  Proc(const std::vector<std::string>& argv, const std::vector<std::string>& env_add) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    std::vector<std::string> env(env_add);  // first: getenv returns the first match
    for (char** e = environ; *e; ++e)
      env.emplace_back(*e);
    std::vector<char*> cargv, cenv;
    for (auto& a : argv)
      cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (auto& e : env)
      cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
    if (::posix_spawnp(&pid_, cargv[0], &fa, nullptr, cargv.data(), cenv.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    fd_ = fds[0];
    ::fcntl(fd_, F_SETFL, O_NONBLOCK);
  }
  ~Proc() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  bool started() const { return pid_ > 0; }
  const std::string& output() const { return out_; }

  // Reads output until `text` appears (true) or the timeout / end of output (false).
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (out_.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      if (left.count() <= 0 || !read_some(static_cast<int>(left.count()))) return false;
    }
    return true;
  }
  // Exit status (-1 on timeout: killed; 128 + signal if signalled).
  int wait(std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        while (read_some(50)) {
        }
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      read_some(20);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    while (read_some(50)) {
    }
    return -1;
  }
  void kill9() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  // false at end of output or timeout.
  bool read_some(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) return false;
    out_.append(buf, static_cast<size_t>(n));
    return true;
  }
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
};

// Runs a command to completion; returns the exit status and its output.
int run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
        std::string* output = nullptr,
        std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  Proc p(argv, env);
  if (!p.started()) return -1;
  const int rc = p.wait(timeout);
  if (output) *output = p.output();
  return rc;
}

// EV format 1 (UDP source port), EV profile 2 (GEN: 16 source ports 0xC000 + v over both
// planes), CC profile 3 (UET NSCC): the example's file.
std::string profiles_toml() {
  return std::string(MRC_SOURCE_DIR) + "/examples/profiles.toml";
}

// examples/profiles.toml with what MODIFY_ONLINE may change while the profiles are ONLINE and
// in use: the EV field (source ports 0xD000 + v instead of 0xC000 + v: every EV changes) and
// the NSCC configuration (a 256 KiB window). `mrc-ctl apply` of it updates them in place.
std::string live_profiles_toml() {
  const std::string path = g_dir + "/live_profiles.toml";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return path;
  std::fputs(
      "[[ev_format]]\nid = 1\nmode = \"udp\"\nwidths = [16]\n"
      "[[ev_profile]]\nid = 2\nmode = \"gen\"\nformat = 1\ncount = 16\nmin_active = 2\n"
      "fields = [{width = 16, init_val = 0xD000, min_val = 0, max_val = 7, mask = 0x0FFF}]\n"
      "[[cc_profile]]\nid = 3\nalgorithm = \"uet-1.0-nscc\"\nbase_rtt_ns = 50000\n"
      "max_cwnd = 262144\n",
      f);
  std::fclose(f);
  return path;
}

std::vector<std::string> node_env(const std::string& shm, const std::string& ports) {
  return {"MRC_SOFT_SHM=" + shm, "MRC_SOFT_PORTS=" + ports, "MRC_SOFT_EV_MODE=udp",
          "MRC_SOFT_UDP_PORT=26791"};
}

struct ShmGuard {
  std::string name;
  ~ShmGuard() { ::shm_unlink(name.c_str()); }
};

// Where a node's commands run: `wrap` prefixes them (e.g. ip netns exec NS), `env` selects
// the node's state and ports.
struct Node {
  std::vector<std::string> wrap, env;
};

// Server and client of mrc_write_bw; while the client pauses, every node in `nodes` changes
// its ONLINE EV and CC profiles under the live QPs (`mrc-ctl apply` of live_profiles_toml():
// MODIFY_ONLINE, picked up by the applications' progress threads) and then disables plane 1
// (mrc-ctl), which resumes the client: the remaining writes run on the new EVs and CC
// configuration. Returns after both exited.
void transfer_with_plane_failure(const std::vector<std::string>& server_wrap,
                                 const std::vector<std::string>& server_env,
                                 const std::vector<std::string>& client_wrap,
                                 const std::vector<std::string>& client_env,
                                 const std::string& server_addr, const std::string& tcp_port,
                                 const std::vector<Node>& nodes) {
  auto cmd = [](std::vector<std::string> wrap, std::vector<std::string> args) {
    wrap.insert(wrap.end(), args.begin(), args.end());
    return wrap;
  };
  const std::string prog = bin("mrc_write_bw");
  Proc server(cmd(server_wrap, {prog, "--imm", "-e", "2", "-c", "3", "-p", tcp_port,
                                "--expect-port-down", "--timeout", "60"}),
              server_env);
  ASSERT_TRUE(server.started());
  Proc client(cmd(client_wrap, {prog,
                                "--imm",
                                "-e",
                                "2",
                                "-c",
                                "3",
                                "-p",
                                tcp_port,
                                "-s",
                                "65536",
                                "-n",
                                "300",
                                "-t",
                                "64",
                                "--pause-at",
                                "100",
                                "--expect-port-down",
                                "--timeout",
                                "60",
                                server_addr}),
              client_env);
  ASSERT_TRUE(client.started());
  ASSERT_TRUE(client.wait_for("paused at 100 writes", std::chrono::seconds(30))) << "client:\n"
                                                                                 << client.output();
  std::string out;
  for (const Node& n : nodes) {
    ASSERT_EQ(run(cmd(n.wrap, {bin("mrc-ctl"), "apply", live_profiles_toml()}), n.env, &out), 0)
        << out;
    EXPECT_NE(out.find("ev_profile 2 updated online"), std::string::npos) << out;
    EXPECT_NE(out.find("cc_profile 3 updated online"), std::string::npos) << out;
  }
  for (const Node& n : nodes)
    ASSERT_EQ(run(cmd(n.wrap, {bin("mrc-ctl"), "port", "1", "disable"}), n.env, &out), 0) << out;
  const int crc = client.wait(std::chrono::seconds(60));
  const int src = server.wait(std::chrono::seconds(10));
  EXPECT_EQ(crc, 0) << "client:\n" << client.output();
  EXPECT_EQ(src, 0) << "server:\n" << server.output();
  EXPECT_NE(client.output().find("async event: IBV_EVENT_PORT_ERR port 1"), std::string::npos)
      << client.output();
  EXPECT_NE(client.output().find("RDMA_Write_Imm BW Test"), std::string::npos);
  EXPECT_NE(client.output().find("verified by the server: ok"), std::string::npos);
  EXPECT_NE(server.output().find("300 verified in place"), std::string::npos) << server.output();
  for (const Node& n : nodes)
    EXPECT_EQ(run(cmd(n.wrap, {bin("mrc-ctl"), "port", "1", "enable"}), n.env), 0);
}

TEST(ApiE2e, mrc_api__loopback_node_writes_and_reads_back) {
  REQUIRE_ROOT();
  ShmGuard shm{"/mrc_e2e_lo_" + std::to_string(::getpid())};
  const auto env = node_env(shm.name, "fd00:1::1/64,fd00:2::1/64");
  std::string out;
  // The controller process configures the profiles and exits; they persist in node state.
  ASSERT_EQ(run({bin("mrc-ctl"), "apply", profiles_toml()}, env, &out), 0) << out;
  EXPECT_NE(out.find("ev_profile 2 online"), std::string::npos) << out;
  transfer_with_plane_failure({}, env, {}, env, "::1", "18611", {Node{{}, env}});
  // The controller still sees the profile and its 16 EVs.
  ASSERT_EQ(run({bin("mrc-ctl"), "show", "2"}, env, &out), 0) << out;
  EXPECT_NE(out.find("count=16"), std::string::npos) << out;
  // What ONLINE profiles may not change is refused, and nothing changes.
  const std::string bad = g_dir + "/bad_profiles.toml";
  FILE* f = std::fopen(bad.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      "[[ev_profile]]\nid = 2\nmode = \"gen\"\nformat = 1\ncount = 8\nmin_active = 2\n"
      "fields = [{width = 16, init_val = 0xC000, min_val = 0, max_val = 7, mask = 0x3FFF}]\n",
      f);
  std::fclose(f);
  EXPECT_NE(run({bin("mrc-ctl"), "apply", bad}, env, &out), 0) << out;
  EXPECT_NE(out.find("cannot change while ONLINE"), std::string::npos) << out;
}

TEST(ApiE2e, mrc_ctl_modify_ev_profile__crashed_applications_do_not_hold_profiles) {
  REQUIRE_ROOT();
  ShmGuard shm{"/mrc_e2e_crash_" + std::to_string(::getpid())};
  const auto env = node_env(shm.name, "fd00:1::1/64,fd00:2::1/64");
  std::string out;
  ASSERT_EQ(run({bin("mrc-ctl"), "apply", profiles_toml()}, env, &out), 0) << out;
  const std::string prog = bin("mrc_write_bw");
  {
    Proc server({prog, "--imm", "-e", "2", "-c", "3", "-p", "18612"}, env);
    Proc client({prog, "--imm", "-e", "2", "-c", "3", "-p", "18612", "-n", "100", "--pause-at",
                 "10", "::1"},
                env);
    ASSERT_TRUE(client.wait_for("paused at 10 writes", std::chrono::seconds(30)))
        << client.output();
    // Both processes have a QP on profiles 2 and 3: the controller cannot take them OFFLINE.
    for (const auto& kv : env) {
      const auto eq = kv.find('=');
      ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_EQ(n, 1);
    ibv_context* ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    ASSERT_NE(ctx, nullptr);
    mrc_context* m = mrc_create_context(ctx, nullptr);
    ASSERT_NE(m, nullptr);
    mrc_ctl_ev_profile_attr e{};
    e.profile_state = MRC_CTL_PROFILE_OFFLINE;
    EXPECT_EQ(mrc_ctl_modify_ev_profile(m, 2, &e, MRC_CTL_EV_PROFILE_STATE), -1);
    EXPECT_EQ(errno, EBUSY);
    // Crash both (no ibv_close_device, no mrc_destroy_qp).
    client.kill9();
    server.kill9();
    ASSERT_EQ(mrc_ctl_modify_ev_profile(m, 2, &e, MRC_CTL_EV_PROFILE_STATE), 0)
        << std::strerror(errno);
    mrc_ctl_cc_profile_attr c{};
    c.profile_state = MRC_CTL_PROFILE_OFFLINE;
    EXPECT_EQ(mrc_ctl_modify_cc_profile(m, 3, &c, MRC_CTL_CC_PROFILE_STATE), 0)
        << std::strerror(errno);
    EXPECT_EQ(mrc_destroy_context(m), 0);
    EXPECT_EQ(ibv_close_device(ctx), 0);
  }
}

// The namespace fabric: 2 hosts, 2 planes, 1 leaf and 2 spines per plane, on the data plane
// MRC_TEST_DATAPLANE names (ctest runs it once per data plane; the C API's UDP EV mode needs
// no source routing). Each host is a node with its own node state (MRC_SOFT_SHM) and
// controller.
TEST(ApiE2e, mrc_api__namespace_fabric_transfer) {
  REQUIRE_ROOT();
  if (::access(bin("mrc-fabric").c_str(), X_OK) != 0) GTEST_SKIP() << "mrc-fabric not built";
  if (std::system("ip netns list >/dev/null 2>&1") != 0) GTEST_SKIP() << "no ip netns";
  const auto dataplane = mrc::test::test_dataplane();
  if (!dataplane.skip_reason.empty()) GTEST_SKIP() << dataplane.skip_reason;
  const std::string name = "e2e" + std::to_string(::getpid());
  struct FabricGuard {
    std::string name;
    ~FabricGuard() { run({bin("mrc-fabric"), "down", "--kill", "--name", name}, {}); }
  } guard{name};
  std::string out;
  ASSERT_EQ(run({bin("mrc-fabric"), "up", "--name", name, "--hosts", "2", "--planes", "2",
                 "--leaves", "1", "--spines", "2", "--dataplane",
                 std::string(mrc::net::dataplane_name(dataplane.plane))},
                {}, &out, std::chrono::seconds(60)),
            0)
      << out;
  ShmGuard shm0{"/mrc_e2e_" + name + "_h0"}, shm1{"/mrc_e2e_" + name + "_h1"};
  // Host h's port on plane p is fcbb:bbPP:(4000+h)::; the /32 plane prefix plus the peer's
  // host bits name the peer on every plane (docs/c-api.md, docs/fabric.md).
  const auto env0 = node_env(shm0.name, "fcbb:bb00:4000::/32%p0,fcbb:bb01:4000::/32%p1");
  const auto env1 = node_env(shm1.name, "fcbb:bb00:4001::/32%p0,fcbb:bb01:4001::/32%p1");
  const std::vector<std::string> in0{"ip", "netns", "exec", name + "-h0"},
      in1{"ip", "netns", "exec", name + "-h1"};
  auto with = [](std::vector<std::string> wrap, std::vector<std::string> args) {
    wrap.insert(wrap.end(), args.begin(), args.end());
    return wrap;
  };
  const std::string toml = profiles_toml();
  ASSERT_EQ(run(with(in0, {bin("mrc-ctl"), "apply", toml}), env0, &out), 0) << out;
  ASSERT_EQ(run(with(in1, {bin("mrc-ctl"), "apply", toml}), env1, &out), 0) << out;
  // Server on h1, client on h0; plane 1 disabled on both nodes (the client's last: it resumes
  // on that node's event).
  transfer_with_plane_failure(in1, env1, in0, env0, "fcbb:bb00:4001::", "18613",
                              {Node{in1, env1}, Node{in0, env0}});
}

}  // namespace
