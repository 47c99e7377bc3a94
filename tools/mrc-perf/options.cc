// mrc-perf's options: the command line (CLI11), the checks the options cannot make alone,
// and the session's configuration they give (the server's follows its client's hello).
#include <net/if.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "net/fabric.h"
#include "net/packet_auth.h"
#include "perf.h"
#include "wire/address_plan.h"

namespace mrc::perf {

namespace {

// Fabric knowledge from mrc-fabric's fabric.json (net::host_view_from_file): this host's
// address on every plane, its leaf's uSID and every spine's uSID.
NetResult<HostView> read_fabric(const Options& o) {
  if (o.fabric.empty()) return HostView{};
  if (o.host < 0) return net_fail(NetErrc::kInvalidArgument, "--fabric needs --host");
  return host_view_from_file(o.fabric, o.host);
}

// Packet authentication (net/packet_auth.h): the client's --packet-auth (auth by default with
// --psk, whose handshake gives the keys); a server follows its client, which it can only with
// a --psk of its own.
NetResult<AuthMode> session_auth_mode(const Options& o, const Hello* client_hello) {
  if (client_hello) {
    const std::optional<AuthMode> mode = hello_auth_mode(client_hello->flags);
    if (!mode)
      return net_fail(NetErrc::kIncompatible,
                      "the client's packet authentication flags mean nothing");
    if (*mode != AuthMode::kOff && o.psk_path.empty())
      return net_fail(NetErrc::kIncompatible,
                      "the client asks for authenticated packets (--packet-auth): this server "
                      "has no --psk to derive their keys from");
    return *mode;
  }
  if (o.packet_auth == "off" || (o.packet_auth.empty() && o.psk_path.empty()))
    return AuthMode::kOff;
  const AuthMode mode = o.packet_auth == "encrypt" ? AuthMode::kEncrypt : AuthMode::kAuthenticate;
  if (o.psk_path.empty())
    return net_fail(
        NetErrc::kInvalidArgument,
        "--packet-auth " + o.packet_auth + " needs --psk: the packet keys come from its handshake");
  return mode;
}

}  // namespace

NetResult<SessionConfig> session_config(const Options& o, const Hello* client_hello) {
  SessionConfig sc;
  auto fabric = read_fabric(o);
  if (!fabric) return std::unexpected(fabric.error());
  std::vector<std::string> local = o.local;
  if (local.empty()) local = fabric->addresses;
  if (local.empty()) local.push_back("::1");
  for (size_t p = 0; p < local.size(); ++p) {
    auto ep = parse_endpoint(local[p], o.data_port);
    if (!ep) return std::unexpected(ep.error());
    PortConfig pc;
    pc.local = *ep;
    if (p < o.ifnames.size()) pc.ifname = o.ifnames[p];
    sc.driver.ports.push_back(pc);
  }
  if (o.ev_mode == "srv6")
    sc.driver.ev_mode = ev::FormatMode::kSrv6;
  else if (o.ev_mode == "stev")
    sc.driver.ev_mode = ev::FormatMode::kStev;
  else if (o.ev_mode == "udp")
    sc.driver.ev_mode = ev::FormatMode::kUdp;
  else
    return net_fail(NetErrc::kInvalidArgument, "--ev-mode must be srv6, stev or udp");
  if (auto mode = session_auth_mode(o, client_hello); !mode)
    return std::unexpected(mode.error());
  else
    sc.driver.auth = *mode;
  sc.driver.verify_icrc = !o.no_icrc_verify;
  sc.driver.busy_poll = o.busy_poll;
  sc.driver.rx_timestamps = !o.no_rx_timestamps;
  sc.driver.gso = !o.no_gso;
  sc.driver.rx_coalesce = static_cast<Time>(o.rx_coalesce_us * 1e6);
  sc.driver.tx_turn_budget = static_cast<Time>(o.tx_turn_us * 1e6);
  if (o.ack_repeat_us >= 0) sc.driver.ack_repeat_after = static_cast<Time>(o.ack_repeat_us * 1e6);
  sc.driver.batch = o.batch;
  sc.spray_burst = o.spray_burst;
  const size_t P = sc.driver.ports.size();
  if (!fabric->addresses.empty()) {
    sc.spine_usids = fabric->spine_usids;
    sc.leaf_usids = fabric->leaf_usids;
  } else {
    for (size_t p = 0; p < P; ++p) {
      std::vector<uint16_t> sp;
      for (uint32_t s = 0; s < o.spines; ++s)
        sp.push_back(wire::spine_usid(static_cast<int>(s)));
      sc.spine_usids.push_back(sp);
      sc.leaf_usids.push_back(o.leaf >= 0 ? wire::leaf_usid(o.leaf) : 0);
    }
  }
  sc.evs_per_plane = o.evs;
  sc.qps = o.qps;
  sc.mtu = o.mtu;
  sc.mpr = static_cast<uint8_t>(std::clamp<uint32_t>(o.mpr, 1, 255));
  sc.ack_every = o.ack_every;
  sc.cc = o.cc == "fixed"  ? CcAlgorithm::kFixedWindow
          : o.cc == "none" ? CcAlgorithm::kNone
                           : CcAlgorithm::kNscc;
  sc.link_bps = static_cast<uint64_t>(o.link_gbps * 1e9);
  sc.base_rtt = static_cast<Time>(o.base_rtt_us * 1e6);
  sc.reorder_window = static_cast<Time>(o.reorder_us * 1e6);
  sc.sq_depth = std::max<uint32_t>(o.tx_depth, 16);
  sc.seed = o.seed ^ (client_hello ? 0x5EEDu : 0u);
  if (client_hello) {
    // The server follows the client's test: QPs, EV mode and count, MTU, buffer layout.
    sc.qps = static_cast<uint32_t>(client_hello->qps.size());
    sc.driver.ev_mode = static_cast<ev::FormatMode>(client_hello->ev_mode);
    sc.evs_per_plane = client_hello->evs_per_plane;
    sc.mtu = client_hello->mtu;
    sc.buffer_bytes = std::max<uint64_t>(1, client_hello->msg_size * client_hello->slots) * sc.qps;
  }
  return sc;
}

namespace {

// The transfer: server or client, sizes, counts, QPs.
void add_transfer_options(CLI::App& app, Options& o) {
  app.add_option("server", o.server, "server to connect to (client mode); none = be the server");
  app.add_option("-p,--port", o.side_port, "side-channel TCP port")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("-s,--size", o.size, "bytes per message")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_flag("-a,--all", o.all_sizes, "sweep sizes 2 .. 2^23");
  app.add_option("-n,--iters", o.iters, "messages per size")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("-D,--duration", o.duration_s, "seconds per size (instead of -n)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("-q,--qp", o.qps, "QPs (1 to 1024)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
}

// This host's planes and paths: addresses, interfaces, fabric, EVs, MTU.
void add_path_options(CLI::App& app, Options& o) {
  app.add_option("--local", o.local,
                 "local address per plane, ADDR or [ADDR]:PORT (comma separated)")
      ->delimiter(',');
  app.add_option("--ifname", o.ifnames, "interface per plane (SO_BINDTODEVICE)")->delimiter(',');
  app.add_option("--fabric", o.fabric,
                 "mrc-fabric fabric.json: this host's plane addresses, leaf and spine uSIDs");
  app.add_option("--host", o.host, "this host's index in --fabric")->check(CLI::Range(0, 1 << 20));
  app.add_option("--spines", o.spines, "spines per plane (without --fabric)")
      ->check(CLI::Range(0u, 65535u));
  app.add_option("--leaf", o.leaf, "this host's leaf index (without --fabric)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--ev-mode", o.ev_mode, "srv6 | stev | udp")
      ->capture_default_str()
      ->check(CLI::IsMember({"srv6", "stev", "udp"}));
  app.add_option("--evs", o.evs, "EVs per plane (1 to 4096)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  app.add_option("-m,--mtu", o.mtu, "path MTU (payload bytes per packet)")
      ->capture_default_str()
      ->check(CLI::Range(256u, 9000u));
}

// What is sent and reported: units, WRITE with immediate, verification, JSON, depth.
void add_report_options(CLI::App& app, Options& o) {
  app.add_flag("--report_gbits", o.gbits, "report Gb/sec instead of MB/sec");
  app.add_flag("--write-imm", o.write_imm, "RDMA WRITE with immediate");
  app.add_flag("--verify", o.verify, "check every payload byte at the server");
  app.add_option("--json", o.json_path, "write results as JSON");
  app.add_option("--qlog", o.qlog_path,
                 "write the engine's event log as JSON lines: every packet sent, received and "
                 "lost, ACK timeouts, window and path changes (docs/engine.md, \"Event log\"; "
                 "scripts/qlog-summary.py summarises one)");
  app.add_option("-t,--tx-depth", o.tx_depth, "messages outstanding (1 to 65536)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
}

// Congestion control and loss recovery.
void add_congestion_options(CLI::App& app, Options& o) {
  app.add_option("--cc", o.cc, "nscc | fixed | none")
      ->capture_default_str()
      ->check(CLI::IsMember({"nscc", "fixed", "none"}));
  app.add_option("--link-gbps", o.link_gbps, "per-plane line rate for the CC")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 100000.0));
  app.add_option("--base-rtt-us", o.base_rtt_us, "unloaded RTT for the CC")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e7));
  app.add_option("--reorder-us", o.reorder_us, "RACK reordering window")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--mpr", o.mpr, "outstanding PSNs, units of 128")
      ->capture_default_str()
      ->check(CLI::Range(1u, 512u));
  app.add_option("--ack-every", o.ack_every,
                 "as responder, acknowledge after this many new packets (an ACK also follows "
                 "a packet that asks for one, and the delayed-ACK timer)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 8u));
}

// The Linux driver: checksums, polling, GSO, timestamps, batching, spraying.
void add_driver_options(CLI::App& app, Options& o) {
  app.add_flag("--no-icrc-verify", o.no_icrc_verify,
               "do not check the ICRC on receive (the UDP checksum still covers the payload; "
               "refused in SRV6 mode, which sends zero UDP checksums)");
  app.add_flag("--busy-poll", o.busy_poll, "spin instead of sleeping in epoll");
  app.add_flag("--no-gso", o.no_gso,
               "send every datagram on its own (STEV/UDP modes group a path's datagrams into UDP "
               "GSO sends; SRV6 mode never does: it sends zero UDP checksums)");
  app.add_flag("--no-rx-timestamps", o.no_rx_timestamps,
               "no kernel arrival times: a datagram arrives when it is read (while any socket "
               "asks for them the kernel stamps every packet at every hop of the machine)");
  app.add_option("--rx-coalesce-us", o.rx_coalesce_us,
                 "read a stream at most this often (0: every datagram at once)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--tx-turn-us", o.tx_turn_us,
                 "transmit at most this long per driver turn before reading ACKs (at least one "
                 "batch; 1e9: the old unbounded 64 batches)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--ack-repeat-us", o.ack_repeat_us,
                 "as responder, send the last ACK again on another plane after this long without "
                 "a packet (0: never; default: 250 in STEV and UDP modes, whose ACKs hash onto "
                 "paths of their own, 0 in SRV6 mode)")
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--batch", o.batch,
                 "packets a driver turn produces before sending them, and datagrams per "
                 "recvmmsg (a UDP GSO send groups a path's datagrams of one batch)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--spray-burst", o.spray_burst,
                 "packets in a row on one path (1: per-packet spraying; 0: the driver's UDP GSO "
                 "run in STEV/UDP modes: faster, slower to find a failed path out)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--data-port", o.data_port, "UDP port of the data sockets (0: any)");
}

// The raw-UDP comparison, timeouts, seed and the side channel's security.
void add_session_options(CLI::App& app, Options& o) {
  app.add_flag("--raw-udp", o.raw_udp,
               "client: blast raw UDP (same planes, paths and datagram size, sendmmsg; UDP GSO "
               "where MRC uses it) for "
               "--raw-seconds before and again after MRC, and report MRC's goodput as a ratio "
               "of the two blasts' mean");
  app.add_option("--raw-seconds", o.raw_seconds, "duration of the --raw-udp blast")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--connect-timeout-ms", o.connect_timeout_ms,
                 "client: give up connecting to the server's side channel after this long")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400000));
  app.add_option("--accept-timeout-ms", o.accept_timeout_ms, "server: give up (-1: never)")
      ->check(CLI::Range(-1, 86400000));
  app.add_option("--start-timeout-ms", o.start_timeout_ms,
                 "server: drop a client that has not started its test this long after the "
                 "handshake, and serve the next")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400000));
  app.add_option("--idle-timeout-ms", o.idle_timeout_ms,
                 "server: drop a client that sends nothing (no message, no data packet) for "
                 "this long")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400000));
  app.add_option("--probe-ms", o.probe_ms, "data-path reachability timeout")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400000));
  app.add_option("--seed", o.seed,
                 "seed of the engines' random choices and of the --verify payload pattern")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{INT64_MAX}));
  app.add_option("--psk", o.psk_path,
                 "shared-secret file (both ends): the side channel's hellos carry an HMAC-SHA256 "
                 "under it, bound to a per-connection challenge");
  app.add_option("--packet-auth", o.packet_auth,
                 "client: authenticated data packets (AES-128-GCM tag per datagram, keys from the "
                 "--psk handshake; docs/linux-driver.md): auth (the default with --psk), encrypt "
                 "(the payload too) or off. A server follows its client")
      ->check(CLI::IsMember({"auth", "encrypt", "off"}));
  app.add_option("--max-buffer-mib", o.max_buffer_mib,
                 "server: refuse a client whose test needs a larger buffer")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24))
      ->capture_default_str();
}

}  // namespace

// Every option, in the order --help lists them.
void add_options(CLI::App& app, Options& o) {
  add_transfer_options(app, o);
  add_path_options(app, o);
  add_report_options(app, o);
  add_congestion_options(app, o);
  add_driver_options(app, o);
  add_session_options(app, o);
}

// What the options cannot check alone: the exit status of a bad argument, or nullopt.
std::optional<int> check_arguments(const CLI::App& app, const Options& o) {
  if (o.no_icrc_verify && o.ev_mode == "srv6" && !o.server.empty()) {
    // SRV6 sends zero UDP checksums: the ICRC is the only check left (docs/linux-driver.md).
    // (A server follows the client's mode; its driver refuses the combination itself.)
    return mrc::tools::bad_argument(
        app,
        "--no-icrc-verify is refused in SRV6 mode: it sends zero UDP checksums (uSID shifts "
        "rewrite the destination), the ICRC is the only check");
  }
  // An empty SERVER (a variable that expanded to nothing) must not start a server.
  if (app.count("server") > 0 && o.server.empty())
    return mrc::tools::bad_argument(app, "SERVER is empty (give none to be the server)");
  if (o.host >= 0 && o.fabric.empty())
    return mrc::tools::bad_argument(app, "--host needs --fabric");
  if (o.qps == 0 || o.tx_depth == 0 || o.evs == 0)
    return mrc::tools::bad_argument(app, "-q, -t and --evs must be positive");
  // This host's side of the configuration (addresses, --fabric, interfaces), checked before a
  // server waits for its first client.
  if (auto sc = session_config(o, nullptr); !sc)
    return mrc::tools::bad_argument(app, "{}", sc.error().message);
  // Found out now rather than when the results are written.
  for (const auto& [flag, path] : {std::pair{"--json", &o.json_path}, {"--qlog", &o.qlog_path}}) {
    if (path->empty()) continue;
    const std::filesystem::path file(*path);
    const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec) || !std::filesystem::is_directory(dir, ec))
      return mrc::tools::bad_argument(app, "{} {}: not a file in an existing directory", flag,
                                      *path);
  }
  for (const std::string& ifname : o.ifnames)
    if (!ifname.empty() && if_nametoindex(ifname.c_str()) == 0)
      return mrc::tools::bad_argument(app, "--ifname: no interface '{}' here", ifname);
  return std::nullopt;
}

}  // namespace mrc::perf
