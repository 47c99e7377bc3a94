// mrc-perf's server against clients that do not play by its rules, on loopback: a stranger
// whose hello is valid but who then says nothing, or leaves, or starts a test and goes
// silent. The server drops each at its deadline (--start-timeout-ms, --idle-timeout-ms), goes
// on to serve the real client when the stranger never started a test, and commits no buffer
// memory for a hello alone (docs/linux-driver.md, "The side channel").
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "net/hello.h"
#include "net/session.h"
#include "net/side_channel.h"
#include "support/child_process.h"

namespace mrc::net {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kPerf = fs::path(MRC_BINARY_DIR) / "bin" / "mrc-perf";

// A side-channel port nobody listens on now (the kernel's pick, released).
uint16_t free_port() {
  auto l = SideListener::listen(0);
  return l ? l->port() : 0;
}

// The resident memory of process `pid` in MiB (VmRSS), or -1.
long rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  return -1;
}

// A host that completes the handshake as an mrc-perf client would, asking for a buffer of
// `msg_size` x 2 slots, and then does only what the test says.
struct Stranger {
  std::unique_ptr<Session> session;
  std::optional<SideChannel> ch;
  Hello server;

  static std::optional<Stranger> handshake(uint16_t port, uint64_t msg_size) {
    Stranger s;
    SessionConfig sc;
    PortConfig pc;
    pc.local = *parse_endpoint("::1", 0);
    sc.driver.ports.push_back(pc);
    sc.spine_usids.push_back({});
    sc.leaf_usids.push_back(0);
    auto session = Session::create(sc);
    if (!session) return std::nullopt;
    s.session = std::move(*session);
    auto ch = SideChannel::connect("::1", port, 10'000);
    if (!ch) return std::nullopt;
    s.ch = std::move(*ch);
    Hello mine = s.session->hello(HelloRole::kClient);
    mine.msg_size = msg_size;
    mine.slots = 2;
    if (!s.ch->send_frame(encode_hello(mine))) return std::nullopt;
    auto answer = s.ch->recv_frame(10'000);
    if (!answer) return std::nullopt;
    auto h = decode_hello(*answer);
    if (!h) return std::nullopt;
    s.server = *h;
    return s;
  }
  bool say(const std::string& kv) {
    return bool(ch->send_frame(std::vector<uint8_t>(kv.begin(), kv.end())));
  }
};

class MrcPerfServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kPerf)) GTEST_SKIP() << kPerf << " not built (-DMRC_BUILD_TOOLS=OFF)";
    dir_ = fs::temp_directory_path() / ("mrc_perf_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    port_ = free_port();
    ASSERT_NE(port_, 0);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  test::ChildProcess server(std::vector<std::string> extra) {
    std::vector<std::string> argv = {kPerf.string(), "-p", std::to_string(port_),
                                     "--accept-timeout-ms", "60000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto c = test::spawn(argv, (dir_ / "server.out").string());
    EXPECT_TRUE(c.wait_for_output("Waiting for client", 10s)) << c.output();
    return c;
  }
  test::ChildProcess client(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {kPerf.string(), "::1",   "-p", std::to_string(port_),
                                     "-s",           "65536", "-n", "1000",
                                     "--verify"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return test::spawn(argv, (dir_ / "client.out").string());
  }
  // A shared-secret file only its owner may read (load_psk refuses others).
  std::string psk_file() {
    const fs::path p = dir_ / "psk";
    std::ofstream(p) << "0123456789abcdef0123456789abcdef\n";
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
    return p.string();
  }
  nlohmann::json read_json(const std::string& name) {
    std::ifstream in(dir_ / name);
    return nlohmann::json::parse(in, nullptr, false);
  }
  fs::path dir_;
  uint16_t port_ = 0;
};

TEST_F(MrcPerfServer, serve__a_silent_stranger_is_dropped_and_the_real_client_served) {
  auto srv = server({"--start-timeout-ms", "1500"});
  // The stranger asks for 2 x 256 MiB and says nothing more; the server commits none of it.
  auto stranger = Stranger::handshake(port_, 256ull << 20);
  ASSERT_TRUE(stranger) << srv.output();
  const long rss = rss_mib(srv.pid);
  EXPECT_GE(rss, 0);
  EXPECT_LT(rss, 256) << "MiB resident while a 512 MiB buffer is only promised";
  // The real client, meanwhile: served once the stranger's deadline passed.
  auto cli = client();
  const int client_rc = cli.wait(60s);
  const int server_rc = srv.wait(30s);
  EXPECT_EQ(client_rc, 0) << cli.output() << "\n--- server:\n" << srv.output();
  EXPECT_EQ(server_rc, 0) << srv.output();
  EXPECT_NE(srv.output().find("did not start a test within the start timeout: dropped"),
            std::string::npos)
      << srv.output();
  EXPECT_NE(cli.output().find("MRC verify        : OK"), std::string::npos) << cli.output();
  // The stranger was told why.
  auto why = stranger->ch->recv_frame(1000);
  ASSERT_TRUE(why);
  EXPECT_NE(std::string(why->begin(), why->end()).find("did not start a test"), std::string::npos);
}

TEST_F(MrcPerfServer, serve__a_stranger_that_leaves_after_its_hello_does_not_end_the_server) {
  auto srv = server({});
  {
    auto stranger = Stranger::handshake(port_, 65536);
    ASSERT_TRUE(stranger) << srv.output();
  }  // gone
  auto cli = client();
  EXPECT_EQ(cli.wait(60s), 0) << cli.output() << "\n--- server:\n" << srv.output();
  EXPECT_EQ(srv.wait(30s), 0) << srv.output();
}

// A client that started its test was served: when it goes silent the one-shot server ends,
// failed, at --idle-timeout-ms.
TEST_F(MrcPerfServer,
       serve__a_client_silent_after_its_first_round_ends_the_server_at_the_idle_timeout) {
  auto srv = server({"--idle-timeout-ms", "800"});
  auto stranger = Stranger::handshake(port_, 65536);
  ASSERT_TRUE(stranger) << srv.output();
  ASSERT_TRUE(stranger->say("round=1\nsize=4096\n"));
  auto ready = stranger->ch->recv_frame(5000);
  ASSERT_TRUE(ready) << srv.output();
  EXPECT_EQ(std::string(ready->begin(), ready->end()), "ready=1\n");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(srv.wait(20s), 1) << srv.output();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(waited, 0.5);
  EXPECT_LT(waited, 10.0);
  EXPECT_NE(srv.output().find("sent nothing for"), std::string::npos) << srv.output();
}

// A raw UDP blast first (--raw-udp) starts the test without writing: the first round after it
// still gets the buffer's write access, and the transfer verifies.
TEST_F(MrcPerfServer, serve__a_raw_blast_before_the_first_round_keeps_the_writes_granted) {
  auto srv = server({});
  auto cli = client({"--raw-udp", "--raw-seconds", "0.2"});
  EXPECT_EQ(cli.wait(60s), 0) << cli.output() << "\n--- server:\n" << srv.output();
  EXPECT_EQ(srv.wait(30s), 0) << srv.output();
  EXPECT_NE(cli.output().find("MRC verify        : OK"), std::string::npos) << cli.output();
  const std::string out = cli.output();
  const size_t line = out.find("MRC drops server");
  ASSERT_NE(line, std::string::npos) << out;
  const std::string drops = out.substr(line, out.find('\n', line) - line);
  EXPECT_NE(drops.find(" bad_rkey=0 "), std::string::npos) << drops;
}

// With --psk both ends derive packet keys in the handshake and every datagram carries a tag
// (net/packet_auth.h): the transfer verifies in each mode the client asks for, each end opens
// what the other sent and refuses nothing, and with `off` no datagram carries a trailer.
TEST_F(MrcPerfServer, serve__psk_sessions_authenticate_the_packets_the_client_asks_for) {
  const std::string psk = psk_file();
  for (const char* mode : {"auth", "encrypt", "off"}) {
    SCOPED_TRACE(mode);
    auto srv = server({"--psk", psk, "--json", (dir_ / "server.json").string()});
    auto cli =
        client({"--psk", psk, "--packet-auth", mode, "--json", (dir_ / "client.json").string()});
    ASSERT_EQ(cli.wait(60s), 0) << cli.output() << "\n--- server:\n" << srv.output();
    ASSERT_EQ(srv.wait(30s), 0) << srv.output();
    EXPECT_NE(cli.output().find("MRC verify        : OK"), std::string::npos) << cli.output();
    const bool sealed = std::string(mode) != "off";
    for (const char* side : {"client.json", "server.json"}) {
      const nlohmann::json j = read_json(side);
      ASSERT_TRUE(j.is_object()) << side;
      EXPECT_EQ(j.value("packet_auth", ""), mode) << side;
      const nlohmann::json& c = j.at("counters");
      EXPECT_EQ(c.value("drop_auth_failed", 1u), 0u) << side;
      EXPECT_EQ(c.value("drop_auth_replayed", 1u), 0u) << side;
      if (sealed) {
        EXPECT_GT(c.value("auth_opened", 0u), 0u) << side;
      } else {
        EXPECT_EQ(c.value("auth_opened", 1u), 0u) << side;
      }
    }
  }
}

}  // namespace
}  // namespace mrc::net
