// What mrc-perf's parts share. The program's parts (tools/mrc-perf/):
//   main.cc     the command line and the choice of server or client
//   options.cc  Options as the command line sets them, checked; the session's configuration
//   server.cc   the server: accepting clients, serving their rounds, the server's summary
//   client.cc   the client: the handshake, the rounds, the report (table, MRC lines, JSON)
//   raw_udp.cc  the raw UDP blast of --raw-udp, both sides (the path's limit without MRC)
//   perf.cc     what several parts use: control messages, waiting for one, CPU time, logging
// The control protocol itself is net/perf_protocol.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "net/perf_protocol.h"
#include "net/session.h"
#include "net/side_channel.h"

namespace CLI {
class App;
}

namespace mrc::perf {

using namespace mrc::net;
using Json = nlohmann::ordered_json;

struct Options {
  std::string server;  // empty: we are the server
  uint16_t side_port = kDefaultSidePort;
  uint64_t size = 65536;
  bool all_sizes = false;
  uint64_t iters = 5000;
  double duration_s = 0;
  uint32_t qps = 1;
  std::vector<std::string> local;
  std::vector<std::string> ifnames;
  std::string fabric;
  int host = -1;
  uint32_t spines = 0;
  int leaf = -1;
  std::string ev_mode = "srv6";
  uint32_t evs = 8;
  uint32_t mtu = 4096;
  bool gbits = false;
  bool write_imm = false;
  bool verify = false;
  std::string json_path;
  std::string qlog_path;  // --qlog: the engine's event log, JSON lines (net/qlog_file.h)
  uint32_t tx_depth = 128;
  std::string cc = "nscc";
  double link_gbps = 10;
  // Software-path window (net::kSoftwarePathBaseRtt): --base-rtt-us 50 --mpr 4 restore the
  // fabric values (every ACK then released a few packets, 1.1 per sendmmsg).
  double base_rtt_us = double(net::kSoftwarePathBaseRtt) / double(us(1));
  double reorder_us = 0;  // 0: the engine's adaptive window (min RTT, grown on false losses)
  uint32_t mpr = net::kSoftwarePathMpr;
  uint32_t ack_every = net::SessionConfig{}.ack_every;
  bool no_icrc_verify = false;
  bool busy_poll = false;
  bool no_rx_timestamps = false;  // DriverConfig::rx_timestamps off
  bool no_gso = false;            // DriverConfig::gso off
  // Receive coalescing (DriverConfig::rx_coalesce): a stream is read in turns at most this
  // often, so the responder sends fewer ACKs and both ends wake less (docs/linux-driver.md,
  // "Goodput"). 0: read every datagram as soon as it arrives.
  double rx_coalesce_us = double(net::kSoftwarePathRxCoalesce) / double(us(1));
  // DriverConfig::tx_turn_budget: transmit time per driver turn before the ACKs are read.
  double tx_turn_us = 250;
  // DriverConfig::ack_repeat_after (negative: the EV mode's default).
  double ack_repeat_us = -1;
  uint32_t batch = 64;       // DriverConfig::batch
  uint32_t spray_burst = 1;  // SessionConfig::spray_burst (0: the driver's GSO run)
  int connect_timeout_ms = 5000;
  int accept_timeout_ms = -1;
  // Server: a client must start its test (its first round or raw blast) this long after the
  // handshake, and then never be silent (no message, no data packet) for idle_timeout_ms;
  // one that does not is dropped and, if it never started, the next client served.
  int start_timeout_ms = 4000;
  int idle_timeout_ms = 10000;
  int probe_ms = 2000;
  uint64_t seed = 1;
  uint16_t data_port = 0;
  bool raw_udp = false;  // client: raw UDP blasts before and after MRC (the path's limit)
  double raw_seconds = 2;
  std::string psk_path;            // shared secret for the side channel (net/psk.h)
  std::string packet_auth;         // client: auth, encrypt or off (empty: auth with --psk)
  uint64_t max_buffer_mib = 1024;  // server: largest buffer a client's hello may ask for
};

// ----- options (options.cc) -------------------------------------------------------------

// The options of the command line, described (CLI11), in the order --help lists them.
void add_options(CLI::App& app, Options& o);

// What the options cannot check alone: the exit status of a bad argument, or nullopt.
std::optional<int> check_arguments(const CLI::App& app, const Options& o);

// The session's configuration from the options: the client's (`client_hello` null), or the
// server's for the client whose hello it is (the server follows the client's test).
NetResult<SessionConfig> session_config(const Options& o, const Hello* client_hello);

// ----- shared (perf.cc) -----------------------------------------------------------------

// A control message's fields (net/perf_protocol.h); one that does not decode has none.
PerfFields kv_decode(std::span<const uint8_t> b);
std::vector<uint8_t> kv_encode(const std::vector<std::pair<std::string, uint64_t>>& kv);
// A field of a control message (0 when absent).
uint64_t get(const PerfFields& kv, const std::string& k);

// Polls the driver until a side-channel frame arrives (the peer's engine must keep being
// served while we wait).
NetResult<std::vector<uint8_t>> wait_frame(Session& s, SideChannel& ch, Time timeout);

// The process's CPU seconds (user + system), and the CPU clock in Hz (0 when unknown).
double cpu_seconds();
double cpu_hz();

// Logs a server-side message on stderr.
void server_log(const std::string& line);

// ----- the raw UDP blast (raw_udp.cc) ---------------------------------------------------

struct RawResult {
  double gbps = 0;  // payload (MTU bytes per datagram) received per second at the server
  uint64_t sent = 0, received = 0;
  size_t datagram_bytes = 0;
  double client_cycles_per_byte = 0;
};

// Server side of --raw-udp: counts what arrives until the client's next frame, then answers
// with the counts. 0, or 1 when it failed.
int serve_raw(Session& ss, SideChannel& ch, int idle_timeout_ms);

// Client side of --raw-udp: a blast of --raw-seconds towards the server's raw sockets.
NetResult<RawResult> run_raw(Session& cs, SideChannel& ch, const Options& o);

// ----- server and client (server.cc, client.cc): the exit status ------------------------

int run_server(const Options& o);
int run_client(const Options& o);

}  // namespace mrc::perf
