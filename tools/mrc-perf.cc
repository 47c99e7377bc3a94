// mrc-perf: the ib_write_bw of MRC. A server and a client (perftest style: the client names
// the server) set up QPs over a TCP side channel and the client streams RDMA WRITEs (or
// WRITE_IMM) through the Linux UDP driver, spraying over every plane and EV.
//
//   mrc-perf --local ::1                       server (waits for one client)
//   mrc-perf --local ::1 ::1 -s 65536 -n 5000  client
//   mrc-perf -a --verify --write-imm ...       sweep 2..2^23 bytes, payload checked
//   mrc-perf --fabric /run/mrc-fabric/mrc/fabric.json --host 0 [SERVER]
//
// Output: perftest's ib_write_bw table (same header line and column layout; --report_gbits
// switches to Gb/sec), then MRC lines: per-plane bytes, retransmits, trims, EV state changes,
// drops by reason (ours and the server's), the longest gap between completions (stall).
// Exit status: 0 on success; 1 on verify mismatches, QP errors or a failed run; 2 on bad
// arguments or setup errors (peer absent, versions differ, no route).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <net/if.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "net/fabric.h"
#include "net/packet_auth.h"
#include "net/pattern.h"
#include "net/perf_protocol.h"
#include "net/psk.h"
#include "net/session.h"
#include "net/side_channel.h"
#include "wire/address_plan.h"
#include "wire/codec.h"

namespace {

using namespace mrc;
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
  uint32_t tx_depth = 128;
  std::string cc = "nscc";
  double link_gbps = 10;
  // Software-path window (net::kSoftwarePathBaseRtt): --base-rtt-us 50 --mpr 4 restore the
  // fabric values (every ACK then released a few packets, 1.1 per sendmmsg).
  double base_rtt_us = double(net::kSoftwarePathBaseRtt) / double(us(1));
  double reorder_us = 0;  // 0: the engine's adaptive window (min RTT, grown on false losses)
  uint32_t mpr = net::kSoftwarePathMpr;
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

constexpr const char* kLine =
    "---------------------------------------------------------------------------------------\n";

// A control message's fields (net/perf_protocol.h); one that does not decode has none, and
// is then no message either end acts on.
PerfFields kv_decode(std::span<const uint8_t> b) {
  auto f = decode_perf_message(b);
  return f ? std::move(*f) : PerfFields{};
}

std::vector<uint8_t> kv_encode(const std::vector<std::pair<std::string, uint64_t>>& kv) {
  return encode_perf_message(kv);
}

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

struct RoundResult {
  uint64_t bytes = 0, iters = 0;
  double bw_peak = 0, bw_avg = 0, msg_rate = 0;  // MB/s or Gb/s per --report_gbits
  double stall_ms = 0;
  // The longest gaps between completions, longest first: (length, when the gap ended,
  // both in engine time; the end is relative to the round's start) -- to line a stall up
  // with what happened then (a fault injected, a kernel thread on the core).
  static constexpr size_t kGapsKept = 5;
  std::vector<std::pair<Time, Time>> longest_gaps;
  // Every gap of kLongGap or more, in order, up to kLongGapsKept, as mrc-tcp-stall lists
  // TCP's (when it began after the round's start, length): the stall caused by a fault is the
  // longest one that ends after the fault (scripts/bench-net.sh).
  static constexpr Time kLongGap = ms(1);
  static constexpr size_t kLongGapsKept = 10'000;
  std::vector<std::pair<Time, Time>> long_gaps;
  uint64_t start_monotonic_ns = 0;  // CLOCK_MONOTONIC at the round's start
  uint64_t mismatches = 0;

  void note_gap(Time length, Time ended_after_start) {
    if (length >= kLongGap && long_gaps.size() < kLongGapsKept)
      long_gaps.push_back({ended_after_start - length, length});
    if (longest_gaps.size() == kGapsKept && length <= longest_gaps.back().first) return;
    auto at = std::find_if(longest_gaps.begin(), longest_gaps.end(),
                           [&](const auto& g) { return g.first < length; });
    longest_gaps.insert(at, {length, ended_after_start});
    if (longest_gaps.size() > kGapsKept) longest_gaps.pop_back();
  }
};

Json longest_gaps_json(const RoundResult& r) {
  Json gaps = Json::array();
  for (const auto& [length, ended] : r.longest_gaps)
    gaps.push_back({{"ms", static_cast<double>(length) / 1e9},
                    {"ended_at_s", static_cast<double>(ended) / 1e12}});
  return gaps;
}

Json long_gaps_json(const RoundResult& r) {
  Json gaps = Json::array();
  for (const auto& [began, length] : r.long_gaps)
    gaps.push_back(
        Json::array({static_cast<double>(began) / 1e12, static_cast<double>(length) / 1e9}));
  return gaps;
}

void print_header(const Options& o, Session& s) {
  std::fputs(kLine, stdout);
  std::printf("                    RDMA_Write%s BW Test\n", o.write_imm ? "_Imm" : "");
  std::printf(" Dual-port       : OFF\t\tDevice         : mrc-udp\n");
  std::printf(" Number of qps   : %u\t\tTransport type : MRC\n", o.qps);
  std::printf(" Connection type : RC\t\tUsing SRQ      : OFF\n");
  std::printf(" TX depth        : %u\n", o.tx_depth);
  std::printf(" CQ Moderation   : 1\n");
  std::printf(" Mtu             : %u[B]\n", s.config().mtu);
  std::printf(" Link type       : Ethernet\n");
  std::printf(" Planes          : %zu\t\tEV mode        : %s x %u\n",
              s.config().driver.ports.size(), o.ev_mode.c_str(), s.config().evs_per_plane);
  std::printf(" Max inline data : 0[B]\t\tPacket auth    : %s\n",
              std::string(auth_mode_name(s.config().driver.auth)).c_str());
  std::printf(" rdma_cm QPs\t : OFF\n");
  std::printf(" Data ex. method : Ethernet\n");
  std::fputs(kLine, stdout);
  const Hello mine = s.hello(HelloRole::kClient);
  const Hello& peer = s.peer();
  for (size_t i = 0; i < mine.qps.size(); ++i) {
    std::printf(" local address: LID 0000 QPN %#06x PSN %#08x RKey %#08x VAddr %#016llx\n",
                mine.qps[i].qpn, mine.qps[i].first_psn, mine.rkey,
                static_cast<unsigned long long>(mine.remote_addr));
    for (const HelloPlane& p : mine.planes) {
      in6_addr a;
      std::memcpy(&a, p.addr.data(), 16);
      std::printf(" GID: %s port %u\n", format_in6(a).c_str(), p.udp_port);
    }
    std::printf(" remote address: LID 0000 QPN %#06x PSN %#08x RKey %#08x VAddr %#016llx\n",
                peer.qps[i].qpn, peer.qps[i].first_psn, peer.rkey,
                static_cast<unsigned long long>(peer.remote_addr));
    for (const HelloPlane& p : peer.planes) {
      in6_addr a;
      std::memcpy(&a, p.addr.data(), 16);
      std::printf(" GID: %s port %u\n", format_in6(a).c_str(), p.udp_port);
    }
  }
  std::fputs(kLine, stdout);
  std::printf("%s\n", o.gbits
                          ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
                            "MsgRate[Mpps]"
                          : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   "
                            "MsgRate[Mpps]");
  std::fflush(stdout);
}

void print_row(const RoundResult& r) {
  std::printf(" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n",
              static_cast<unsigned long>(r.bytes), static_cast<unsigned long>(r.iters), r.bw_peak,
              r.bw_avg, r.msg_rate);
  std::fflush(stdout);
}

std::string drops_line(const std::map<std::string, uint64_t>& kv) {
  std::string s;
  for (const auto& [k, v] : kv)
    if (k.rfind("drop_", 0) == 0) s += fmt::format(" {}={}", k.substr(5), v);
  return s;
}

uint64_t get(const PerfFields& kv, const std::string& k) {
  return perf_field(kv, k);
}

void print_mrc_lines(const std::map<std::string, uint64_t>& local,
                     const std::map<std::string, uint64_t>& remote, size_t planes,
                     double stall_ms) {
  for (size_t p = 0; p < planes; ++p) {
    const std::string pre = "plane" + std::to_string(p) + "_";
    std::printf(
        " MRC plane %zu       : tx %lu B (%lu pkts)  rx %lu B  | server rx %lu B  tx %lu B\n", p,
        get(local, pre + "tx_bytes"), get(local, pre + "tx_packets"), get(local, pre + "rx_bytes"),
        get(remote, pre + "rx_bytes"), get(remote, pre + "tx_bytes"));
  }
  std::printf(
      " MRC retransmits   : %lu (losses %lu, spurious %lu, timeouts %lu; %lu arrived as "
      "duplicates)\n",
      get(local, "retransmits"), get(local, "losses_detected"), get(local, "spurious_losses"),
      get(local, "timeouts"), get(local, "duplicate_retransmits"));
  std::printf(" MRC trims         : %lu trim NACKs received, %lu trimmed at server; ECN %lu\n",
              get(local, "trim_nacks_received"), get(remote, "trimmed_received"),
              get(remote, "ecn_received"));
  std::printf(" MRC EV changes    : %lu (server %lu)\n", get(local, "ev_state_changes"),
              get(remote, "ev_state_changes"));
  std::printf(" MRC drops client  :%s\n", drops_line(local).c_str());
  std::printf(" MRC drops server  :%s\n", drops_line(remote).c_str());
  std::printf(
      " MRC stall         : %.3f ms (longest gap between completions, the first from the first "
      "post)\n",
      stall_ms);
  std::fputs(kLine, stdout);
}

// Polls the driver until a side-channel frame arrives (the peer's engine must keep being
// served while we wait: it ACKs, retransmits, answers probes).
// Liveness (docs/linux-driver.md, "A peer that goes away"): after an ACK timeout the client
// asks the server over the side channel whether it is there; the server answers at once. A
// server that neither acknowledges data nor answers for kLivenessWait is gone: its host died
// or its process stopped without closing the channel. The wait covers TCP's own recovery
// (a 200 ms minimum RTO, retried on another path) over a fabric with a fault.
constexpr Time kLivenessWait = ms(1000);

NetResult<std::vector<uint8_t>> wait_frame(Session& s, SideChannel& ch, Time timeout) {
  const Time start = s.driver().now();
  while (true) {
    auto f = ch.try_recv_frame();
    if (!f) return std::unexpected(f.error());
    // A late answer to a liveness question (perf_alive) is not the message waited for.
    if (*f && !is_perf_alive(**f)) return std::move(**f);
    if (s.driver().now() - start > timeout)
      return net_fail(NetErrc::kTimeout, "no message from " + ch.peer_name());
    if (auto st = s.driver().poll(us(500)); !st) return std::unexpected(st.error());
  }
}

std::vector<uint64_t> sweep_sizes(const Options& o) {
  std::vector<uint64_t> sizes;
  if (!o.all_sizes) return {o.size};
  for (uint64_t s = 2; s <= (1ull << 23); s *= 2)
    sizes.push_back(s);
  return sizes;
}

uint64_t slots_for(const Options& o, uint64_t max_size) {
  if (!o.verify) return 1;
  // Enough slots that no slot is rewritten while its previous message may be unchecked (the
  // client keeps fewer messages outstanding than slots), within 256 MiB per side.
  const uint64_t budget = (256ull << 20) / std::max<uint32_t>(1, o.qps);
  return std::clamp<uint64_t>(budget / std::max<uint64_t>(1, max_size), 2, o.tx_depth + 1);
}

// ----- CPU cost and the raw UDP limit ---------------------------------------------------

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// The CPU clock in Hz from /proc/cpuinfo (first "cpu MHz"; 0 when absent): cycles per byte
// are CPU seconds (getrusage, user + system) times this over the bytes moved.
double cpu_hz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return std::strtod(line.c_str() + colon + 1, nullptr) * 1e6;
    }
  return 0;
}

// Bytes of the transport packet (BTH .. payload, ICRC) MRC sends for a full `mtu` payload:
// the raw blast sends datagrams of exactly this size.
size_t mrc_datagram_bytes(uint32_t mtu) {
  std::vector<uint8_t> payload(mtu), buf(mtu + 512);
  wire::TransportPacket pkt;
  pkt.bth.opcode = wire::Opcode::kWriteOnly;
  pkt.reth.dma_len = mtu;
  pkt.data.pkt_count = 1;
  pkt.payload = payload.data();
  pkt.payload_len = mtu;
  auto n = wire::encode_transport(pkt, buf);
  return n ? *n + 4 : mtu + 64;
}

NetResult<UniqueFd> raw_socket(const in6_addr& addr, ev::FormatMode mode) {
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return errno_fail("socket", errno);
  const int one = 1, bytes = 8 << 20;
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  ::setsockopt(fd.get(), IPPROTO_IPV6, 33 /* IPV6_FLOWINFO_SEND */, &one, sizeof one);
  const int zero = 0;  // the driver's labels exactly (ev::path_flow_label), no kernel hash
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, &zero, sizeof zero);
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_DONTFRAG, &one, sizeof one);
  if (mode == ev::FormatMode::kSrv6) {
    // As the driver's sockets (docs/linux-driver.md): a checksum over the first uSID DA is
    // wrong after the shifts, and real NICs would drop the blast at the receiver.
    ::setsockopt(fd.get(), IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one);
    ::setsockopt(fd.get(), IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one);
  }
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  sockaddr_in6 a = to_sockaddr(Endpoint{addr, 0});
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return errno_fail("bind " + format_in6(addr), errno);
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_in6 a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin6_port);
}

// While it lives, the driver's sockets do not ask for kernel arrival times: one socket that
// does makes the kernel stamp every packet at every hop of the namespace fabric
// (UdpDriver::set_rx_timestamps), ~6% of the blast's sending core on mrc-fabric, a cost of
// MRC's that the path's limit must not carry (docs/perf-log.md, "Linux driver: an honest blast").
class RxTimestampsOff {
 public:
  explicit RxTimestampsOff(UdpDriver& d) : d_(d), was_on_(d.config().rx_timestamps) {
    if (was_on_) warn(d_.set_rx_timestamps(false));
  }
  ~RxTimestampsOff() {
    if (was_on_) warn(d_.set_rx_timestamps(true));
  }
  RxTimestampsOff(const RxTimestampsOff&) = delete;
  RxTimestampsOff& operator=(const RxTimestampsOff&) = delete;

 private:
  static void warn(const NetStatus& st) {
    if (!st) std::fprintf(stderr, "mrc-perf: raw UDP: %s\n", st.error().message.c_str());
  }
  UdpDriver& d_;
  bool was_on_;
};

// Logs a server-side message on stderr.
void server_log(const std::string& line) {
  std::fprintf(stderr, "mrc-perf: %s\n", line.c_str());
}

// Server side of --raw-udp: one socket per plane on the plane's address; counts what arrives
// until the client's next frame, then answers with the counts.
int serve_raw(Session& ss, SideChannel& ch, int idle_timeout_ms) {
  const size_t P = ss.config().driver.ports.size();
  // The blast measures the path without MRC: no kernel stamps for MRC's sockets meanwhile.
  RxTimestampsOff no_stamps(ss.driver());
  std::vector<UniqueFd> fds;
  std::string reply;
  for (size_t p = 0; p < P; ++p) {
    auto fd =
        raw_socket(ss.driver().local(static_cast<uint8_t>(p)).addr, ss.config().driver.ev_mode);
    if (!fd) {
      std::fprintf(stderr, "mrc-perf: raw UDP: %s\n", fd.error().message.c_str());
      return 1;
    }
    reply += fmt::format("raw_port{}={}\n", p, bound_port(fd->get()));
    fds.push_back(std::move(*fd));
  }
  if (!ch.send_frame(std::vector<uint8_t>(reply.begin(), reply.end()))) return 1;
  constexpr unsigned kBatch = 64;
  constexpr size_t kSlot = 9400;
  std::vector<uint8_t> mem(kBatch * kSlot);
  std::vector<mmsghdr> msgs(kBatch);
  std::vector<iovec> iov(kBatch);
  uint64_t packets = 0, bytes = 0, first_ns = 0, last_ns = 0;
  std::vector<pollfd> pfds;
  for (const UniqueFd& fd : fds)
    pfds.push_back(pollfd{fd.get(), POLLIN, 0});
  pfds.push_back(pollfd{ch.fd(), POLLIN, 0});
  const uint64_t idle_ns = static_cast<uint64_t>(idle_timeout_ms) * 1'000'000;
  uint64_t last_heard = monotonic_ns();
  for (uint64_t turn = 0;; ++turn) {
    bool got = false;
    for (const UniqueFd& fd : fds) {
      for (unsigned i = 0; i < kBatch; ++i) {
        iov[i] = iovec{mem.data() + i * kSlot, kSlot};
        msgs[i].msg_hdr = msghdr{};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = ::recvmmsg(fd.get(), msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) continue;
      got = true;
      const uint64_t t = monotonic_ns();
      if (!first_ns) first_ns = t;
      last_ns = t;
      packets += static_cast<uint64_t>(n);
      for (int i = 0; i < n; ++i)
        bytes += msgs[static_cast<size_t>(i)].msg_len;
    }
    if (got) last_heard = last_ns;
    if (!got) {
      ::poll(pfds.data(), pfds.size(), 1);
      if (monotonic_ns() - last_heard > idle_ns) {
        server_log(
            fmt::format("{}: nothing in a raw blast for {} ms", ch.peer_name(), idle_timeout_ms));
        return 1;
      }
    }
    if (got && turn % 64 != 0) continue;
    auto f = ch.try_recv_frame();
    if (!f) return 1;
    if (*f) break;  // "rawend"
  }
  // The first batch's arrival opens the interval: leave its packets out of the rate.
  (void)ch.send_frame(
      kv_encode({{"raw_packets", packets}, {"raw_bytes", bytes}, {"raw_ns", last_ns - first_ns}}));
  return 0;
}

struct RawResult {
  double gbps = 0;  // payload (MTU bytes per datagram) received per second at the server
  uint64_t sent = 0, received = 0;
  size_t datagram_bytes = 0;
  double client_cycles_per_byte = 0;
};

// Client side of --raw-udp: for `seconds`, sendmmsg batches of MRC-sized datagrams from one
// socket per plane (the session's plane addresses) to the server's raw sockets, over the same
// paths MRC sprays on (SRV6: the EVs' uSID destinations; STEV: their flow labels), with UDP GSO
// where MRC's driver uses it (STEV/UDP modes unless --no-gso).
// The sending side of a raw UDP blast, set up as MRC's driver sends. Each datagram: its
// headers from a small buffer of its own, the payload (the MTU's bytes) straight from the
// registered buffer, cycling through it as MRC's messages do, so that both pay the same copy
// from the same memory.
struct RawBlast {
  static constexpr size_t kBatch = 64;  // datagrams per plane and sendmmsg
  struct Plane {
    UniqueFd fd;
    std::vector<sockaddr_in6> dsts;  // the paths; each message goes to the next
    std::vector<mmsghdr> msgs;
    size_t per_msg = 1;  // datagrams per message (a UDP GSO run)
    size_t next_path = 0;
  };
  uint32_t mtu = 0;
  std::vector<uint8_t> headers;
  // A registered buffer smaller than one payload (small messages without --verify) cannot
  // source it: then a buffer of its own, as large as one payload.
  std::vector<uint8_t> own_payload;
  uint8_t* source = nullptr;
  uint64_t pieces = 1;  // payload-sized pieces of the source
  uint64_t next_piece = 0;
  std::vector<std::array<iovec, 2>> iovs;  // kBatch per plane: headers, payload
  std::vector<UdpSegmentControl> control;  // kBatch per plane with GSO
  std::vector<Plane> planes;
};

// The destinations of plane `p`'s datagrams: the server's raw port on that plane over each of
// the paths MRC sprays on (SRV6: the EV's uSID destination; STEV: its flow label), or the
// plain address when the QP has no path on the plane.
std::vector<sockaddr_in6> raw_paths(Session& cs, size_t p, const Endpoint& peer) {
  const ev::FormatMode mode = cs.config().driver.ev_mode;
  const PathSet* paths = cs.engine().qp_paths(cs.qpns()[0]);
  std::vector<sockaddr_in6> out;
  for (size_t i = 0; paths && i < paths->size(); ++i) {
    const PathDesc& d = paths->path(static_cast<int>(i)).desc;
    if (d.port != p) continue;
    sockaddr_in6 a = to_sockaddr(peer);
    if (mode == ev::FormatMode::kSrv6) {
      bool zero = true;
      for (uint8_t b : std::span(d.ev).first(16))
        zero = zero && b == 0;
      if (!zero) std::memcpy(&a.sin6_addr, d.ev.data(), 16);
    }
    a.sin6_flowinfo = htonl(ev::path_flow_label(mode, d.ev) & 0xFFFFF);
    out.push_back(a);
  }
  if (out.empty()) out.push_back(to_sockaddr(peer));
  return out;
}

// Plane `p`'s messages over its kBatch datagrams: with GSO (STEV/UDP modes, as the driver) a
// path's run of datagrams (spray_burst) in one UDP_SEGMENT send, else one datagram each.
void arm_raw_messages(RawBlast& b, size_t p, bool gso, const DriverConfig& dc,
                      size_t datagram_bytes) {
  constexpr size_t kBatch = RawBlast::kBatch;
  RawBlast::Plane& pl = b.planes[p];
  for (size_t i = 0; i < kBatch; ++i) {
    std::array<iovec, 2>& v = b.iovs[p * kBatch + i];
    v[0] = iovec{b.headers.data(), b.headers.size()};
    v[1] = iovec{b.source, b.mtu};  // iov_base: set before each sendmmsg (send_raw)
  }
  pl.per_msg = gso ? std::clamp<size_t>(spray_burst(dc, b.mtu), 1, kBatch) : 1;
  pl.msgs.resize(kBatch / pl.per_msg);
  for (size_t i = 0; i < pl.msgs.size(); ++i) {
    msghdr& h = pl.msgs[i].msg_hdr;
    h = msghdr{};
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_iov = b.iovs[p * kBatch + i * pl.per_msg].data();  // contiguous: 2 per datagram
    h.msg_iovlen = 2 * pl.per_msg;
    if (gso && pl.per_msg > 1)
      set_udp_segment(h, b.control[p * kBatch + i], static_cast<uint16_t>(datagram_bytes));
  }
}

// A blast towards the server's raw ports (`kv`: raw_port<p> per plane), one socket per plane
// at the session's plane address.
NetResult<RawBlast> make_raw_blast(Session& cs, const std::map<std::string, uint64_t>& kv,
                                   size_t datagram_bytes) {
  const DriverConfig& dc = cs.config().driver;
  const size_t P = dc.ports.size();
  RawBlast b;
  b.mtu = cs.config().mtu;
  b.headers.assign(datagram_bytes - b.mtu, 0x5A);
  b.own_payload.assign(cs.buffer_bytes() < b.mtu ? b.mtu : 0, 0x5A);
  b.source = b.own_payload.empty() ? cs.buffer() : b.own_payload.data();
  b.pieces = std::max<uint64_t>(1, cs.buffer_bytes() / b.mtu);
  b.iovs.resize(P * RawBlast::kBatch);
  const bool gso = gso_allowed(dc);
  b.control.resize(gso ? P * RawBlast::kBatch : 0);
  b.planes.resize(P);
  for (size_t p = 0; p < P; ++p) {
    auto fd = raw_socket(cs.driver().local(static_cast<uint8_t>(p)).addr, dc.ev_mode);
    if (!fd) return std::unexpected(fd.error());
    b.planes[p].fd = std::move(*fd);
    Endpoint peer;
    std::memcpy(&peer.addr, cs.peer().planes[p].addr.data(), 16);
    peer.port = static_cast<uint16_t>(get(kv, "raw_port" + std::to_string(p)));
    if (peer.port == 0)
      return net_fail(NetErrc::kBadHello,
                      "server sent no raw UDP port for plane " + std::to_string(p));
    b.planes[p].dsts = raw_paths(cs, p, peer);
    arm_raw_messages(b, p, gso, dc, datagram_bytes);
  }
  return b;
}

// Sends for `seconds`, the planes in turn, a batch each; returns the datagrams sent.
uint64_t send_raw(RawBlast& b, double seconds) {
  constexpr size_t kBatch = RawBlast::kBatch;
  uint64_t sent = 0;
  const uint64_t stop = monotonic_ns() + static_cast<uint64_t>(seconds * 1e9);
  while (monotonic_ns() < stop)
    for (size_t p = 0; p < b.planes.size(); ++p) {
      RawBlast::Plane& pl = b.planes[p];
      for (size_t i = 0; i < kBatch; ++i)
        b.iovs[p * kBatch + i][1].iov_base = b.source + (b.next_piece++ % b.pieces) * b.mtu;
      for (mmsghdr& m : pl.msgs) {
        m.msg_hdr.msg_name = &pl.dsts[pl.next_path];
        pl.next_path = pl.next_path + 1 == pl.dsts.size() ? 0 : pl.next_path + 1;
      }
      const int n =
          ::sendmmsg(pl.fd.get(), pl.msgs.data(), static_cast<unsigned>(pl.msgs.size()), 0);
      if (n > 0) sent += static_cast<uint64_t>(n) * pl.per_msg;
    }
  return sent;
}

NetResult<RawResult> run_raw(Session& cs, SideChannel& ch, const Options& o) {
  RxTimestampsOff no_stamps(cs.driver());  // as serve_raw
  if (auto st = ch.send_frame(perf_raw()); !st) return std::unexpected(st.error());
  auto frame = wait_frame(cs, ch, ms(10'000));
  if (!frame) return std::unexpected(frame.error());
  RawResult r;
  r.datagram_bytes = mrc_datagram_bytes(cs.config().mtu);
  auto blast = make_raw_blast(cs, kv_decode(*frame), r.datagram_bytes);
  if (!blast) return std::unexpected(blast.error());
  const double cpu0 = cpu_seconds();
  r.sent = send_raw(*blast, o.raw_seconds);
  const double cpu = cpu_seconds() - cpu0;
  ::usleep(20'000);  // let the last datagrams land
  if (auto st = ch.send_frame(perf_raw_end()); !st) return std::unexpected(st.error());
  auto counts = wait_frame(cs, ch, ms(10'000));
  if (!counts) return std::unexpected(counts.error());
  const auto c = kv_decode(*counts);
  r.received = get(c, "raw_packets");
  const double secs = static_cast<double>(get(c, "raw_ns")) / 1e9;
  if (secs > 0) r.gbps = static_cast<double>(r.received) * cs.config().mtu * 8 / secs / 1e9;
  const double hz = cpu_hz();
  if (r.sent) r.client_cycles_per_byte = cpu * hz / (static_cast<double>(r.sent) * cs.config().mtu);
  return r;
}

// ----- server ---------------------------------------------------------------------------

// A client taken by the server: its side channel, its hello and the session set up for it.
struct AcceptedClient {
  std::optional<SideChannel> ch;
  Hello hello;
  std::unique_ptr<Session> session;
};

// Tells a client why it is refused (best effort) and logs it.
void refuse_client(SideChannel& ch, const std::string& why) {
  server_log(ch.peer_name() + ": " + why + ": refused");
  (void)ch.send_frame(encode_refusal(why), 100);
}

// The session for an accepted client's test, connected to it; the error says why it cannot be.
// `keys`: the packet keys of the --psk handshake (used when the client asks for authenticated
// packets).
NetResult<std::unique_ptr<Session>> open_client_session(const Options& o, const Hello& client,
                                                        const std::optional<PacketKeys>& keys) {
  auto sc = session_config(o, &client);
  if (!sc) return std::unexpected(sc.error());
  auto s = Session::create(*sc);
  if (!s) return std::unexpected(s.error());
  if (sc->driver.auth != AuthMode::kOff) {
    if (!keys) return net_fail(NetErrc::kIncompatible, "no packet keys: the handshake had none");
    if (auto st = (*s)->set_packet_keys(*keys); !st) return std::unexpected(st.error());
  }
  // Peer first: the client's first pings (probe_planes) come right after our hello, and the
  // driver answers pings only from its peers' addresses.
  if (auto st = (*s)->connect(client); !st) return std::unexpected(st.error());
  // The client may write the buffer once its test starts (begin_server_round): a hello alone
  // commits no memory (the buffer's pages are the kernel's until written).
  if (auto st = (*s)->set_remote_write(false); !st) return std::unexpected(st.error());
  return std::move(*s);
}

// Accepts clients until one's test is set up (--accept-timeout-ms, counted from
// `accept_start`, bounds the wait). Clients are served one at a time, but any number may
// connect: each gets a handshake deadline and a bounded first frame, and one that fails
// (garbage, idle, too slow, asking for more than --max-buffer-mib, a wrong --psk) is refused
// with a message and closed while the server serves on (docs/linux-driver.md, "Security").
NetResult<AcceptedClient> accept_client(const Options& o, SideListener& listener,
                                        const std::optional<Psk>& psk, uint64_t accept_start) {
  HelloLimits limits;
  limits.max_buffer_bytes = o.max_buffer_mib << 20;
  HandshakeLimits hl;
  if (psk)
    hl.greeting = [] {
      auto c = make_challenge();
      return c ? *c : std::vector<uint8_t>{};
    };
  AcceptedClient a;
  PskTag client_tag{};
  KeySharePub client_share{};
  while (true) {
    int left = -1;
    if (o.accept_timeout_ms >= 0) {
      const uint64_t spent_ms = (monotonic_ns() - accept_start) / 1'000'000;
      left = static_cast<int>(
          std::max<int64_t>(0, o.accept_timeout_ms - static_cast<int64_t>(spent_ms)));
    }
    std::vector<uint8_t> first;
    auto taken = listener.accept_handshake(
        left, hl,
        [&](SideChannel& c, std::span<const uint8_t> frame) {
          const auto refuse = [&](const std::string& why) {
            refuse_client(c, why);
            return HandshakeVerdict::kClose;
          };
          std::vector<uint8_t> body(frame.begin(), frame.end());
          if (psk) {
            auto opened = open_client_hello(*psk, c.greeting(), frame, client_tag);
            if (!opened) return refuse(opened.error().message);
            body = std::move(opened->hello);
            client_share = opened->key_share;
          }
          auto h = decode_hello(body);
          if (!h) return refuse(h.error().message);
          if (auto st = check_client_hello(*h, limits); !st) return refuse(st.error().message);
          a.hello = std::move(*h);
          return HandshakeVerdict::kTake;
        },
        first, server_log);
    if (!taken) return std::unexpected(taken.error());
    a.ch = std::move(*taken);
    // The packet keys from the two key shares (net/packet_auth.h).
    std::optional<KeyShare> share;
    std::optional<PacketKeys> keys;
    if (psk) {
      auto made = make_key_share();
      if (!made) return std::unexpected(made.error());
      share = *made;
      auto derived = derive_packet_keys(*psk, a.ch->greeting(), client_tag, *share, client_share,
                                        HelloRole::kServer);
      if (!derived) {
        refuse_client(*a.ch, derived.error().message);
        a.ch.reset();
        continue;
      }
      keys = *derived;
    }
    // The client's test, set up; what cannot be is refused and the next client served.
    auto s = open_client_session(o, a.hello, keys);
    if (!s) {
      refuse_client(*a.ch, s.error().message);
      a.ch.reset();
      continue;
    }
    std::vector<uint8_t> hello = encode_hello((*s)->hello(HelloRole::kServer));
    if (psk) hello = sign_server_hello(*psk, a.ch->greeting(), client_tag, hello, share->pub);
    if (auto st = a.ch->send_frame(hello); !st) {
      server_log(a.ch->peer_name() + ": " + st.error().message);
      a.ch.reset();
      continue;
    }
    a.session = std::move(*s);
    return a;
  }
}

// What the server keeps while it serves a client's rounds.
struct ServedClient {
  Session& ss;
  SideChannel& ch;
  const Hello& client;
  bool imm = false;                       // the client writes with immediate
  bool verify = false;                    // the server checks the written patterns
  uint64_t slots = 1;                     // buffer slots per QP
  std::map<uint32_t, uint32_t> qp_index;  // QPN -> the QP's index
  uint64_t total_mismatches = 0, qp_errors = 0;
  uint64_t client_qp_errors = 0;  // the client's QPs that failed, as its bye says
  uint64_t round_size = 0, imm_received = 0;
  double round_cpu0 = 0, server_cpu_s = 0;
  Json rounds = Json::array();
  // Whether the client started its test (a round or a raw blast): a client that never does
  // is dropped and the server serves the next (serve_client).
  bool started = false;
  bool writes_granted = false;  // the client may write the buffer (from its first round)
  Time start_deadline = 0;      // --start-timeout-ms after the handshake
  Time idle_timeout = 0;        // --idle-timeout-ms
  Time last_heard = 0;          // the client's last message or data packet
  uint64_t packets_seen = 0;    // data packets received by then

  ServedClient(Session& session, SideChannel& side, const Hello& hello, const Options& o)
      : ss(session), ch(side), client(hello) {
    last_heard = ss.driver().now();
    start_deadline = last_heard + ms(o.start_timeout_ms);
    idle_timeout = ms(o.idle_timeout_ms);
    imm = client.flags & kHelloWriteImm;
    verify = client.flags & kHelloVerify;
    slots = std::max<uint64_t>(1, client.slots);
    for (size_t i = 0; i < ss.qpns().size(); ++i)
      qp_index[ss.qpns()[i]] = static_cast<uint32_t>(i);
  }

  // The pattern mismatches of QP `q`'s slot `slot`, written by the client's iteration `it`.
  uint64_t mismatches(uint32_t q, uint64_t slot, uint64_t it) const {
    return count_pattern_mismatches(ss.buffer() + (q * slots + slot) * client.msg_size, round_size,
                                    client.seed, q, it);
  }
};

// The engine's completions and events: a WRITE_IMM's receive is counted, posted again (every
// QP's receive queue stays full) and, with verify, its slot checked; a failed completion and
// a QP in ERR are QP errors.
void drain_completions(ServedClient& sc) {
  Engine& e = sc.ss.engine();
  Completion c;
  while (e.poll_completion(c)) {
    if (c.status != WcStatus::kSuccess) {
      ++sc.qp_errors;
      continue;
    }
    if (c.opcode != WcOpcode::kRecvImm) continue;
    ++sc.imm_received;
    (void)e.post_recv(c.qpn, c.wr_id);
    if (sc.verify)
      sc.total_mismatches += sc.mismatches(sc.qp_index[c.qpn], c.imm % sc.slots, c.imm);
  }
  Event ev;
  while (e.poll_event(ev))
    if (ev.type == EventType::kQpError) ++sc.qp_errors;
}

// "round": a round of `size`-byte writes starts; the server answers "ready". False (refused)
// when the size is above the hello's message size: every check reads round_size bytes of a
// slot of msg_size bytes.
bool begin_server_round(ServedClient& sc, const std::map<std::string, uint64_t>& msg) {
  sc.round_size = get(msg, "size");
  if (sc.round_size == 0 || sc.round_size > sc.client.msg_size) {
    server_log(fmt::format("{} asked for rounds of {} bytes, above its hello's {}",
                           sc.ch.peer_name(), sc.round_size, sc.client.msg_size));
    (void)sc.ch.send_frame(encode_refusal("round size above the hello's message size"), 100);
    return false;
  }
  // The first round grants the writes (a raw blast before it starts the test, not the writes).
  if (!sc.writes_granted) {
    if (auto st = sc.ss.set_remote_write(true); !st) {
      server_log(st.error().message);
      return false;
    }
    sc.writes_granted = true;
  }
  sc.started = true;
  sc.imm_received = 0;
  sc.round_cpu0 = cpu_seconds();
  (void)sc.ch.send_frame(perf_ready());
  return true;
}

// "end": the client posted `iters` writes. With WRITE_IMM the server waits (serving the data
// path, up to 10 s) until every immediate arrived; without, it checks each slot for the last
// iteration that used it. The answer: the totals so far.
void end_server_round(ServedClient& sc, const std::map<std::string, uint64_t>& msg) {
  Session& ss = sc.ss;
  const uint64_t iters = get(msg, "iters");
  const Time start = ss.driver().now();
  while (sc.imm && sc.imm_received < iters && ss.driver().now() - start < ms(10'000)) {
    (void)ss.driver().poll(us(500));
    drain_completions(sc);
  }
  if (sc.verify && !sc.imm) {
    const uint64_t per_qp_iters = get(msg, "per_qp_iters");
    for (uint32_t q = 0; q < ss.qpns().size(); ++q)
      for (uint64_t slot = 0; slot < std::min(sc.slots, per_qp_iters); ++slot)
        sc.total_mismatches +=
            sc.mismatches(q, slot, ((per_qp_iters - 1 - slot) / sc.slots) * sc.slots + slot);
  }
  sc.server_cpu_s += cpu_seconds() - sc.round_cpu0;
  std::vector<std::pair<std::string, uint64_t>> reply = {
      {"mismatches", sc.total_mismatches},
      {"imm_received", sc.imm_received},
      {"qp_errors", sc.qp_errors},
      {"cpu_us", static_cast<uint64_t>(sc.server_cpu_s * 1e6)}};
  (void)sc.ch.send_frame(kv_encode(reply));
  sc.rounds.push_back({{"bytes", sc.round_size}, {"imm_received", sc.imm_received}});
}

// Whether the client still keeps its deadlines: it started its test by start_deadline, and
// since, has not been silent (no message, no data packet received) for idle_timeout. A
// client that fails them is told so and logged.
bool client_keeps_time(ServedClient& sc) {
  const Time now = sc.ss.driver().now();
  const EngineCounters& c = sc.ss.engine().counters();
  if (const uint64_t seen = c.data_received + c.duplicates + c.trimmed_received;
      seen != sc.packets_seen) {
    sc.packets_seen = seen;
    sc.last_heard = now;
  }
  std::string why;
  if (!sc.started && now >= sc.start_deadline)
    why = "did not start a test within the start timeout";
  else if (now - sc.last_heard >= sc.idle_timeout)
    why = fmt::format("sent nothing for {} ms", (now - sc.last_heard) / ms(1));
  if (why.empty()) return true;
  server_log(sc.ch.peer_name() + ": " + why + ": dropped");
  (void)sc.ch.send_frame(encode_refusal(why), 100);
  return false;
}

// Serves the data path and answers the client's messages (round, end, raw, alive) until it
// says bye. 0, or 1 when the side channel or the driver failed, a round was refused or the
// client missed a deadline (client_keeps_time).
int serve_client(ServedClient& sc, const Options& o) {
  Session& ss = sc.ss;
  // Receives for WRITE_IMM: keep every QP's receive queue full.
  for (uint32_t qpn : ss.qpns())
    for (uint32_t k = 0; k < ss.config().rq_depth; ++k)
      (void)ss.engine().post_recv(qpn, k);
  Time next_channel_check = 0;
  while (true) {
    // Serve the data path until the client says something. The side channel is looked at
    // every millisecond, not every turn: each look is a recv() system call, ~3% of the
    // server's CPU when it was made per turn.
    NetResult<std::optional<std::vector<uint8_t>>> f{std::nullopt};
    if (const Time now = ss.driver().now(); now >= next_channel_check) {
      next_channel_check = now + ms(1);
      f = sc.ch.try_recv_frame();
    }
    if (!f) {
      server_log(f.error().message);
      return 1;
    }
    if (!*f) {
      if (auto st = ss.driver().poll(us(500)); !st) {
        server_log(st.error().message);
        return 1;
      }
      drain_completions(sc);
      if (!client_keeps_time(sc)) return 1;
      continue;
    }
    sc.last_heard = ss.driver().now();
    const auto msg = kv_decode(**f);
    if (msg.count("raw")) {
      sc.started = true;
      if (serve_raw(ss, sc.ch, o.idle_timeout_ms) != 0) return 1;
      sc.last_heard = ss.driver().now();
    } else if (msg.count("round")) {
      if (!begin_server_round(sc, msg)) return 1;
    } else if (msg.count("end")) {
      end_server_round(sc, msg);
    } else if (msg.count("alive")) {
      (void)sc.ch.send_frame(perf_alive());  // the same line answers it
    } else if (msg.count("bye")) {
      sc.client_qp_errors = get(msg, "qp_errors");
      (void)sc.ch.send_frame(kv_encode(ss.counters()));
      return 0;
    }
  }
}

// The server's summary line, and its --json file.
void print_server_summary(const Options& o, const ServedClient& sc, bool failed) {
  std::printf(
      " MRC server        : mismatches %lu, QP errors %lu (client's %lu), decode drops %lu\n",
      sc.total_mismatches, sc.qp_errors, sc.client_qp_errors, sc.ss.driver().stats().decode_drops);
  if (o.json_path.empty()) return;
  Json j;
  j["role"] = "server";
  j["ok"] = !failed;
  j["packet_auth"] = auth_mode_name(sc.ss.config().driver.auth);
  j["mismatches"] = sc.total_mismatches;
  j["qp_errors"] = sc.qp_errors;
  j["client_qp_errors"] = sc.client_qp_errors;
  j["rounds"] = sc.rounds;
  Json c;
  for (const auto& [k, v] : sc.ss.counters())
    c[k] = v;
  j["counters"] = c;
  std::ofstream(o.json_path) << j.dump(2) << "\n";
}

int run_server(const Options& o) {
  std::optional<Psk> psk;
  if (!o.psk_path.empty()) {
    auto p = load_psk(o.psk_path);
    if (!p) return tools::fail_setup("mrc-perf", p.error().message);
    psk = std::move(*p);
  }
  auto listener = SideListener::listen(o.side_port);
  if (!listener) return tools::fail_setup("mrc-perf", listener.error().message);
  std::printf(
      "\n************************************\n* Waiting for client to connect... *\n"
      "************************************\n");
  std::fflush(stdout);
  const uint64_t accept_start = monotonic_ns();
  while (true) {
    auto accepted = accept_client(o, *listener, psk, accept_start);
    if (!accepted) return tools::fail_setup("mrc-perf", accepted.error().message);
    // After the handshake the client sends short key=value messages only.
    accepted->ch->set_max_frame(64 << 10);
    ServedClient sc(*accepted->session, *accepted->ch, accepted->hello, o);
    const int rc = serve_client(sc, o);
    if (!sc.started) {
      // Never served: it held the server for --start-timeout-ms at most. Its other
      // connections in handshake go too; the next client is served.
      if (const size_t n = listener->close_pending_from(accepted->ch->peer_address()))
        server_log(fmt::format("{}: {} more connection(s) in handshake closed",
                               accepted->ch->peer_name(), n));
      continue;
    }
    // One-shot: the client actually served ends the server, with its test's verdict.
    const bool failed =
        rc != 0 || sc.total_mismatches != 0 || sc.qp_errors != 0 || sc.client_qp_errors != 0;
    print_server_summary(o, sc, failed);
    return failed ? 1 : 0;
  }
}

// ----- client ---------------------------------------------------------------------------

// A client run's totals over its rounds, and the first cause of a failure: what follows from
// it (a QP in ERR flushing its work, a server that stops answering) would only hide it.
struct ClientTotals {
  Json results = Json::array();
  uint64_t mismatches = 0, qp_errors = 0;
  uint64_t own_qp_errors = 0;  // of qp_errors: the client's own QPs (the server's add to it)
  double worst_stall_ms = 0;
  double client_cpu_s = 0, server_cpu_s = 0, goodput_gbps = 0;
  uint64_t bytes_moved = 0;
  bool failed = false;
  std::string error;

  void note_error(std::string why) {
    if (error.empty()) error = std::move(why);
  }
};

// What a client's rounds work with.
struct ClientRun {
  const Options& o;
  Session& cs;
  SideChannel& ch;
  const Hello& server;
  uint64_t max_size = 0;  // bytes of a buffer slot (the largest size of the sweep)
  uint64_t slots = 0;     // slots per QP
  uint32_t limit = 0;     // messages outstanding
  double unit = 0;        // bytes per reported MB or Gb
  ClientTotals& t;
};

// What the client's handshake gives: the server's hello and, with --psk, the packet keys.
struct ServerAnswer {
  Hello hello;
  std::optional<PacketKeys> keys;
};

// The hello exchange over the side channel (signed and checked with --psk, with the key shares
// of the packet keys); the server's hello.
NetResult<ServerAnswer> client_handshake(const Options& o, SideChannel& ch, const Hello& mine) {
  std::vector<uint8_t> hello = encode_hello(mine);
  std::optional<Psk> psk;
  std::optional<KeyShare> share;
  std::vector<uint8_t> challenge;
  PskTag client_tag{};
  if (!o.psk_path.empty()) {
    auto p = load_psk(o.psk_path);
    if (!p) return std::unexpected(p.error());
    psk = std::move(*p);
    auto made = make_key_share();
    if (!made) return std::unexpected(made.error());
    share = *made;
    auto c = ch.recv_frame(10'000);
    if (!c) {
      NetError e = c.error();
      e.message += " (waiting for the server's challenge: does it run with --psk?)";
      return std::unexpected(e);
    }
    challenge = std::move(*c);
    auto signed_hello = sign_client_hello(*psk, challenge, hello, share->pub, client_tag);
    if (!signed_hello) return std::unexpected(signed_hello.error());
    hello = std::move(*signed_hello);
  }
  if (auto st = ch.send_frame(hello); !st) return std::unexpected(st.error());
  auto frame = ch.recv_frame(10'000);
  if (!frame) return std::unexpected(frame.error());
  std::vector<uint8_t> server_bytes = std::move(*frame);
  ServerAnswer answer;
  if (psk) {
    if (auto refused = decode_hello(server_bytes);
        !refused && refused.error().code == NetErrc::kRefused)
      return std::unexpected(refused.error());
    auto opened = open_server_hello(*psk, challenge, client_tag, server_bytes);
    if (!opened) return std::unexpected(opened.error());
    server_bytes = std::move(opened->hello);
    auto keys = derive_packet_keys(*psk, challenge, client_tag, *share, opened->key_share,
                                   HelloRole::kClient);
    if (!keys) return std::unexpected(keys.error());
    answer.keys = *keys;
  }
  auto decoded = decode_hello(server_bytes);
  if (!decoded) return std::unexpected(decoded.error());
  answer.hello = std::move(*decoded);
  return answer;
}

// The round failed: why is noted (the first cause is kept), and the round stops.
void fail_round(ClientRun& c, std::string why) {
  c.t.note_error(std::move(why));
  c.t.failed = true;
}

// Asks the server for a round of `size`-byte messages and waits until it is ready; false
// (the cause noted) when it does not answer.
bool start_round(ClientRun& c, uint64_t size) {
  if (auto st = c.ch.send_frame(perf_round(size)); !st) {
    fail_round(c, st.error().message);
    return false;
  }
  if (auto r = wait_frame(c.cs, c.ch, ms(10'000)); !r) {
    fail_round(c, r.error().message);
    return false;
  }
  return true;
}

// A round's transfer as the client saw it, and the iterations of QP 0 (the slot each QP's
// last writes used, for the server's check).
struct PostedRound {
  RoundResult r;
  uint64_t per_qp_iters = 0;
};

// Where a round stands while post_round runs it.
struct RoundProgress {
  uint64_t size = 0;  // bytes per write
  double cpu0 = 0;    // the process's CPU seconds at the start
  Time t0 = 0;        // the round's start (engine time)
  Time stop_at = kNever;
  uint64_t want = 0;             // writes to post (-n; UINT64_MAX with -D)
  std::vector<uint64_t> per_qp;  // writes posted per QP
  std::vector<Time> completed_at;
  uint64_t posted = 0, completed = 0, failed_completions = 0;
  bool stop = false;  // post nothing more; the round ends when what was posted has completed
  // The stall clock starts once the first messages are posted: with --verify, writing their
  // patterns (tx_depth x size bytes, milliseconds at 8 MiB) is the application's time, not a
  // gap the transport left.
  bool stall_clock_started = false;
  Time last_completion = 0;
  // The server's liveness (check_server): when the side channel was next to be looked at,
  // the ACK timeouts seen so far, when the server was asked whether it is alive (kNever: no
  // question open) and when a write last completed.
  Time next_channel_check = 0;
  uint64_t timeouts_seen = 0;
  Time alive_asked = kNever, last_progress = 0;
  RoundResult r;

  RoundProgress(const ClientRun& c, uint64_t bytes) : size(bytes) {
    const Options& o = c.o;
    cpu0 = cpu_seconds();
    t0 = last_completion = next_channel_check = last_progress = c.cs.driver().now();
    stop_at = o.duration_s > 0 ? t0 + static_cast<Time>(o.duration_s * 1e12) : kNever;
    want = o.duration_s > 0 ? UINT64_MAX : o.iters;
    per_qp.assign(o.qps, 0);
    completed_at.reserve(o.duration_s > 0 ? 1 << 16 : o.iters);
    timeouts_seen = c.cs.engine().counters().timeouts;
    r.start_monotonic_ns = c.cs.driver().clock().to_monotonic_ns(t0);
  }
  uint64_t outstanding() const { return posted - completed - failed_completions; }
};

// Posts writes round robin over the QPs while fewer than -t are outstanding (each QP's
// writes cycle through its buffer slots), until the QP's queue is full or the round has
// posted what it wants.
void post_writes(ClientRun& c, RoundProgress& p, Time now) {
  const Options& o = c.o;
  Engine& e = c.cs.engine();
  while (!p.stop && p.posted < p.want && p.outstanding() < c.limit) {
    const uint32_t q = static_cast<uint32_t>(p.posted % o.qps);
    const uint64_t it = p.per_qp[q];
    const uint64_t off = (q * c.slots + it % c.slots) * c.max_size;
    if (o.verify) fill_pattern(c.cs.buffer() + off, p.size, o.seed, q, it);
    WriteWr wr;
    wr.wr_id = p.posted;
    wr.opcode = o.write_imm ? WrOpcode::kWriteImm : WrOpcode::kWrite;
    wr.lkey = c.cs.keys().lkey;
    wr.local_addr = reinterpret_cast<uint64_t>(c.cs.buffer()) + off;
    wr.length = p.size;
    wr.remote_addr = c.server.remote_addr + off;
    wr.rkey = c.server.rkey;
    wr.imm = static_cast<uint32_t>(it);
    if (auto st = e.post_write(now, c.cs.qpns()[q], wr); !st) {
      if (st.error() == Error::kQueueFull) return;
      fail_round(c, std::string("post_write: ") + std::string(error_name(st.error())));
      p.stop = true;
      return;
    }
    ++p.per_qp[q];
    ++p.posted;
  }
}

// Every 5 ms: is the server still there? A server that exits closes the side channel at
// once (its kernel does): noticed within a few milliseconds rather than the QP's ACK timeout
// (docs/linux-driver.md). After an ACK timeout the server is asked over the side channel;
// no answer and no completion for kLivenessWait means its host or process is gone. False
// (the round failed) when the server is gone.
bool check_server(ClientRun& c, RoundProgress& p) {
  SideChannel& ch = c.ch;
  const Time t = c.cs.driver().now();
  if (t < p.next_channel_check) return true;
  p.next_channel_check = t + ms(5);
  if (ch.peer_closed()) {
    fail_round(c, "the server closed the side channel (" + ch.peer_name() +
                      ") during the transfer: it exited?");
    return false;
  }
  for (auto f = ch.try_recv_frame(); f && *f; f = ch.try_recv_frame())
    if (is_perf_alive(**f)) p.alive_asked = kNever;
  if (const uint64_t to = c.cs.engine().counters().timeouts; to != p.timeouts_seen) {
    p.timeouts_seen = to;
    if (p.alive_asked == kNever && ch.send_frame(perf_alive(), 100)) p.alive_asked = t;
  }
  if (p.alive_asked != kNever && t - p.alive_asked > kLivenessWait &&
      t - p.last_progress > kLivenessWait) {
    fail_round(
        c, fmt::format("the server ({}) neither acknowledged data nor answered the side channel "
                       "for {} ms after an ACK timeout: its host or process is gone",
                       ch.peer_name(), kLivenessWait / kPicosPerMilli));
    return false;
  }
  return true;
}

// The engine's completions and events: a successful write is an iteration done (its gap
// since the previous one measured); a failed or flushed one and a QP in ERR count as QP
// errors only. False (the round failed) once there is a QP error.
bool collect_completions(ClientRun& c, RoundProgress& p) {
  Engine& e = c.cs.engine();
  ClientTotals& totals = c.t;
  Completion wc;
  while (e.poll_completion(wc)) {
    if (wc.status != WcStatus::kSuccess) {
      ++totals.qp_errors;
      ++totals.own_qp_errors;
      ++p.failed_completions;
      totals.note_error(std::string("QP error: a write completed with ") +
                        wc_status_name(wc.status));
      continue;
    }
    ++p.completed;
    p.r.note_gap(wc.time - p.last_completion, wc.time - p.t0);
    p.last_completion = wc.time;
    p.last_progress = std::max(p.last_progress, wc.time);
    p.completed_at.push_back(wc.time);
  }
  Event ev;
  while (e.poll_event(ev))
    if (ev.type == EventType::kQpError) {
      ++totals.qp_errors;
      ++totals.own_qp_errors;
      totals.note_error("QP entered ERR");
      p.stop = true;
    }
  if (totals.qp_errors) totals.failed = true;
  return !totals.qp_errors;
}

// The round's numbers: average bandwidth and message rate from the start to the last
// completion, peak bandwidth over any -t consecutive completions, the longest stall; the
// totals of the run follow.
PostedRound measure_round(ClientRun& c, RoundProgress& p) {
  ClientTotals& totals = c.t;
  RoundResult& r = p.r;
  const uint64_t size = p.size, completed = p.completed;
  totals.client_cpu_s += cpu_seconds() - p.cpu0;
  totals.bytes_moved += size * completed;
  r.bytes = size;
  r.iters = completed;
  const double secs = std::max(1e-12, static_cast<double>(p.last_completion - p.t0) / 1e12);
  r.bw_avg = static_cast<double>(size) * static_cast<double>(completed) / secs / c.unit;
  r.msg_rate = static_cast<double>(completed) / secs / 1e6;
  const std::vector<Time>& at = p.completed_at;
  const size_t w = std::min<size_t>(c.o.tx_depth, at.size() > 1 ? at.size() - 1 : 0);
  for (size_t i = w; w > 0 && i < at.size(); ++i) {
    const Time dt = at[i] - at[i - w];
    if (dt > 0)
      r.bw_peak = std::max(r.bw_peak, static_cast<double>(size) * static_cast<double>(w) /
                                          (static_cast<double>(dt) / 1e12) / c.unit);
  }
  if (r.bw_peak < r.bw_avg) r.bw_peak = r.bw_avg;
  r.stall_ms = r.longest_gaps.empty() ? 0 : static_cast<double>(r.longest_gaps[0].first) / 1e9;
  totals.worst_stall_ms = std::max(totals.worst_stall_ms, r.stall_ms);
  return {std::move(r), p.per_qp.empty() ? 0 : p.per_qp[0]};
}

// Posts `size`-byte writes (-n of them or for -D seconds, -t outstanding) round robin over
// the QPs, serving the driver and watching the side channel, until every posted write has
// completed or the round has failed (c.t.failed, the cause noted); measures the round.
PostedRound post_round(ClientRun& c, uint64_t size) {
  RoundProgress p(c, size);
  while (!p.stop || p.outstanding() > 0) {
    const Time now = c.cs.driver().now();
    if (now >= p.stop_at) p.stop = true;
    post_writes(c, p, now);
    if (p.posted >= p.want) p.stop = true;
    if (!p.stall_clock_started && p.posted > 0) {
      p.last_completion = c.cs.driver().now();
      p.stall_clock_started = true;
    }
    if (!check_server(c, p)) break;
    if (auto st = c.cs.driver().poll(ms(1)); !st) {
      fail_round(c, st.error().message);
      break;
    }
    if (!collect_completions(c, p)) break;
  }
  return measure_round(c, p);
}

// Ends a round: the server verifies and answers with its totals; the row is printed and
// kept for --json.
void end_round(ClientRun& c, PostedRound& p) {
  ClientTotals& t = c.t;
  RoundResult& r = p.r;
  const uint64_t completed = r.iters;
  // Tell the server the round is over; it verifies and answers.
  (void)c.ch.send_frame(perf_end(completed, p.per_qp_iters));
  auto reply = wait_frame(c.cs, c.ch, ms(15'000));
  if (!reply) {
    t.note_error(reply.error().message);
    t.failed = true;
    return;
  }
  auto kv = kv_decode(*reply);
  const uint64_t server_mismatches = get(kv, "mismatches");
  r.mismatches = server_mismatches - t.mismatches;
  t.mismatches = server_mismatches;
  t.qp_errors += get(kv, "qp_errors");
  t.server_cpu_s = static_cast<double>(get(kv, "cpu_us")) / 1e6;
  if (c.o.write_imm && get(kv, "imm_received") < completed) {
    t.note_error(
        fmt::format("server received {} immediates of {}", get(kv, "imm_received"), completed));
    t.failed = true;
  }
  print_row(r);
  t.goodput_gbps = r.bw_avg * c.unit * 8 / 1e9;  // the last size's (the only one without -a)
  t.results.push_back({{"bytes", r.bytes},
                       {"iterations", r.iters},
                       {"bw_peak", r.bw_peak},
                       {"bw_average", r.bw_avg},
                       {"unit", c.o.gbits ? "Gb/sec" : "MB/sec"},
                       {"msg_rate_mpps", r.msg_rate},
                       {"goodput_gbps", r.bw_avg * c.unit * 8 / 1e9},
                       {"stall_ms", r.stall_ms},
                       {"longest_gaps", longest_gaps_json(r)},
                       {"gaps_over_1ms", long_gaps_json(r)},
                       {"start_monotonic_s", static_cast<double>(r.start_monotonic_ns) / 1e9},
                       {"mismatches", r.mismatches}});
}

// The raw UDP blasts around the MRC run (--raw-udp): the one before, the one after, and
// their mean (the one compared).
struct RawBlasts {
  std::optional<RawResult> mean, before, after;
};

// The lines after the table: counters, verification, CPU, the raw UDP comparison.
void print_client_summary(ClientRun& c, const RawBlasts& raw,
                          const std::map<std::string, uint64_t>& local,
                          const std::map<std::string, uint64_t>& remote, double hz) {
  const ClientTotals& t = c.t;
  Session& cs = c.cs;
  print_mrc_lines(local, remote, cs.config().driver.ports.size(), t.worst_stall_ms);
  if (!t.error.empty()) std::fprintf(stderr, "mrc-perf: %s\n", t.error.c_str());
  if (c.o.verify && !t.failed)
    std::printf(" MRC verify        : OK (every byte checked at the server)\n");
  const double client_cpb =
      t.bytes_moved ? t.client_cpu_s * hz / static_cast<double>(t.bytes_moved) : 0;
  const double server_cpb =
      t.bytes_moved ? t.server_cpu_s * hz / static_cast<double>(t.bytes_moved) : 0;
  std::printf(" MRC CPU           : client %.2f cycles/B (%.3f s), server %.2f cycles/B (%.3f s)\n",
              client_cpb, t.client_cpu_s, server_cpb, t.server_cpu_s);
  if (raw.mean) {
    const RawResult& m = *raw.mean;
    std::printf(
        " MRC vs raw UDP    : raw %.2f Gb/s (%lu of %lu datagrams of %zu B arrived, client %.2f "
        "cycles/B), MRC %.2f Gb/s, ratio %.3f\n",
        m.gbps, static_cast<unsigned long>(m.received), static_cast<unsigned long>(m.sent),
        m.datagram_bytes, m.client_cycles_per_byte, t.goodput_gbps,
        m.gbps > 0 ? t.goodput_gbps / m.gbps : 0.0);
    if (cs.driver().stats().gso_sends) {
      const PathSet* ps = cs.engine().qp_paths(cs.qpns()[0]);
      std::printf(
          " MRC vs raw UDP    : both sent UDP GSO: the blast runs of %u datagrams a path, MRC "
          "runs of up to %u (--spray-burst; --no-gso: single datagrams)\n",
          spray_burst(cs.config().driver, cs.config().mtu), ps ? ps->policy().burst : 1u);
    }
  }
  if (raw.mean && raw.after)
    std::printf(" MRC raw UDP blasts: %.2f Gb/s before MRC, %.2f Gb/s after (the mean counts)\n",
                raw.before->gbps, raw.after->gbps);
}

// The client's --json report.
void write_client_json(ClientRun& c, const RawBlasts& raw,
                       const std::map<std::string, uint64_t>& local,
                       const std::map<std::string, uint64_t>& remote, double hz) {
  const Options& o = c.o;
  const ClientTotals& t = c.t;
  Session& cs = c.cs;
  const double client_cpb =
      t.bytes_moved ? t.client_cpu_s * hz / static_cast<double>(t.bytes_moved) : 0;
  const double server_cpb =
      t.bytes_moved ? t.server_cpu_s * hz / static_cast<double>(t.bytes_moved) : 0;
  Json j;
  j["role"] = "client";
  j["ok"] = !t.failed;
  if (!t.error.empty()) j["error"] = t.error;
  j["ev_mode"] = o.ev_mode;
  j["packet_auth"] = auth_mode_name(cs.config().driver.auth);
  j["planes"] = cs.config().driver.ports.size();
  j["evs_per_plane"] = cs.config().evs_per_plane;
  j["qps"] = o.qps;
  j["mtu"] = cs.config().mtu;
  j["write_imm"] = o.write_imm;
  j["verify"] = o.verify;
  j["mismatches"] = t.mismatches;
  j["qp_errors"] = t.qp_errors;
  j["stall_ms"] = t.worst_stall_ms;
  j["results"] = t.results;
  j["cpu"] = {{"client_cpu_s", t.client_cpu_s},
              {"server_cpu_s", t.server_cpu_s},
              {"cpu_hz", hz},
              {"bytes", t.bytes_moved},
              {"client_cycles_per_byte", client_cpb},
              {"server_cycles_per_byte", server_cpb}};
  if (raw.mean) {
    j["raw_udp"] = {{"goodput_gbps", raw.mean->gbps},
                    {"datagrams_sent", raw.mean->sent},
                    {"datagrams_received", raw.mean->received},
                    {"datagram_bytes", raw.mean->datagram_bytes},
                    {"client_cycles_per_byte", raw.mean->client_cycles_per_byte},
                    {"before_gbps", raw.before->gbps},
                    {"after_gbps", raw.after ? raw.after->gbps : 0.0}};
    j["ratio_vs_udp"] = raw.mean->gbps > 0 ? t.goodput_gbps / raw.mean->gbps : 0.0;
  }
  Json lj, rj;
  for (const auto& [k, v] : local)
    lj[k] = v;
  for (const auto& [k, v] : remote)
    rj[k] = v;
  j["counters"] = lj;
  j["server_counters"] = rj;
  std::ofstream(o.json_path) << j.dump(2) << "\n";
}

// A failure before the first round: one line, and with --json a report that says what kind
// of failure it was. Returns the exit status (2).
int fail_client_setup(const Options& o, const NetError& e) {
  const int rc = tools::fail_setup("mrc-perf", e.message);
  if (!o.json_path.empty()) {
    Json j;
    j["role"] = "client";
    j["ok"] = false;
    j["error"] = e.message;
    j["error_kind"] = net_errc_name(e.code);
    std::ofstream(o.json_path) << j.dump(2) << "\n";
  }
  return rc;
}

// The client's hello: the session's, with the test the server is to expect (write with
// immediate, verify, the slot size and count, the pattern's seed).
Hello client_hello(const Options& o, const Session& cs, uint64_t max_size, uint64_t slots) {
  Hello mine = cs.hello(HelloRole::kClient);
  mine.flags |=
      static_cast<uint8_t>((o.write_imm ? kHelloWriteImm : 0) | (o.verify ? kHelloVerify : 0));
  mine.msg_size = max_size;
  mine.slots = slots;
  mine.seed = o.seed;
  return mine;
}

// The rounds of the sweep, one per size. A failed round ends the run: waiting for a server
// that may be gone (its answer timeouts are seconds) would only delay the report of the
// first cause.
void run_rounds(ClientRun& c, const std::vector<uint64_t>& sizes) {
  for (uint64_t size : sizes) {
    if (!start_round(c, size)) return;
    PostedRound round = post_round(c, size);
    if (c.t.failed) return;
    end_round(c, round);
    if (c.t.failed) return;
  }
}

// The blast again after MRC: the machine's load drifts over seconds (other processes on the
// same cores), so the limit is the mean of a blast before and one after the MRC run.
void blast_after_mrc(ClientRun& c, RawBlasts& raw) {
  if (raw.before && !c.t.failed) {
    if (auto rr = run_raw(c.cs, c.ch, c.o); !rr)
      fail_round(c, "raw UDP after MRC: " + rr.error().message);
    else
      raw.after = *rr;
  }
  raw.mean = raw.before;
  if (raw.before && raw.after) {
    raw.mean->gbps = (raw.before->gbps + raw.after->gbps) / 2;
    raw.mean->sent += raw.after->sent;
    raw.mean->received += raw.after->received;
    raw.mean->client_cycles_per_byte =
        (raw.before->client_cycles_per_byte + raw.after->client_cycles_per_byte) / 2;
  }
}

// Says bye; the server's counters come back (after a failure only if they come at once).
std::map<std::string, uint64_t> say_bye(ClientRun& c) {
  // The client's QP errors go with it: the server sees only its own QPs.
  (void)c.ch.send_frame(perf_bye(c.t.own_qp_errors), c.t.failed ? 100 : 10'000);
  if (auto r = wait_frame(c.cs, c.ch, c.t.failed ? ms(200) : ms(5'000)); r) return kv_decode(*r);
  return {};
}

int run_client(const Options& o) {
  auto sc = session_config(o, nullptr);
  if (!sc) return tools::fail_setup("mrc-perf", sc.error().message);
  const std::vector<uint64_t> sizes = sweep_sizes(o);
  const uint64_t max_size = sizes.back();
  const uint64_t slots = slots_for(o, max_size);
  sc->buffer_bytes = max_size * slots * o.qps;
  auto ch = SideChannel::connect(o.server, o.side_port, o.connect_timeout_ms);
  if (!ch) return tools::fail_setup("mrc-perf", ch.error().message);
  auto s = Session::create(*sc);
  if (!s) return tools::fail_setup("mrc-perf", s.error().message);
  Session& cs = **s;
  auto answer = client_handshake(o, *ch, client_hello(o, cs, max_size, slots));
  if (!answer) return fail_client_setup(o, answer.error());
  if (cs.config().driver.auth != AuthMode::kOff)
    if (auto st = cs.set_packet_keys(*answer->keys); !st) return fail_client_setup(o, st.error());
  const Hello* server = &answer->hello;
  if (auto st = cs.connect(*server); !st) return fail_client_setup(o, st.error());
  if (auto st = cs.driver().probe_planes(Session::kPeerId, ms(o.probe_ms)); !st)
    return fail_client_setup(o, st.error());
  print_header(o, cs);
  RawBlasts raw;
  if (o.raw_udp) {
    auto rr = run_raw(cs, *ch, o);
    if (!rr) return fail_client_setup(o, rr.error());
    raw.before = *rr;
  }

  ClientTotals t;
  ClientRun c{
      o,
      cs,
      *ch,
      *server,
      max_size,
      slots,
      o.verify ? std::min<uint32_t>(o.tx_depth, static_cast<uint32_t>(slots - 1)) : o.tx_depth,
      o.gbits ? 125'000'000.0 : 1048576.0,  // perftest: Gb = 1e9 bits, MB = 2^20
      t};
  run_rounds(c, sizes);
  blast_after_mrc(c, raw);
  const std::map<std::string, uint64_t> remote = say_bye(c);
  std::fputs(kLine, stdout);
  std::map<std::string, uint64_t> local;
  for (const auto& [k, v] : cs.counters())
    local[k] = v;
  if (t.mismatches)
    fail_round(c, fmt::format("verify: {} bytes differ from the pattern", t.mismatches));
  if (t.qp_errors) t.failed = true;
  const double hz = cpu_hz();
  print_client_summary(c, raw, local, remote, hz);
  if (!o.json_path.empty()) write_client_json(c, raw, local, remote, hz);
  return t.failed ? 1 : 0;
}

}  // namespace

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
  if (!o.json_path.empty()) {
    // Found out now rather than when the results are written.
    const std::filesystem::path json(o.json_path);
    const std::filesystem::path dir = json.has_parent_path() ? json.parent_path() : ".";
    std::error_code ec;
    if (std::filesystem::is_directory(json, ec) || !std::filesystem::is_directory(dir, ec))
      return mrc::tools::bad_argument(app, "--json {}: not a file in an existing directory",
                                      o.json_path);
  }
  for (const std::string& ifname : o.ifnames)
    if (!ifname.empty() && if_nametoindex(ifname.c_str()) == 0)
      return mrc::tools::bad_argument(app, "--ifname: no interface '{}' here", ifname);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "mrc-perf: RDMA WRITE bandwidth over MRC on Linux UDP/IPv6 (like ib_write_bw); "
      "docs/linux-driver.md",
      "mrc-perf"};
  mrc::tools::set_exit_codes(app, "0 the transfer completed (and verified), 1 it failed",
                             "bad arguments, or a test that could not start (no server, a "
                             "refusal, no client within --accept-timeout-ms)");
  add_transfer_options(app, o);
  add_path_options(app, o);
  add_report_options(app, o);
  add_congestion_options(app, o);
  add_driver_options(app, o);
  add_session_options(app, o);
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;
  if (const std::optional<int> rc = check_arguments(app, o)) return *rc;
  return o.server.empty() ? run_server(o) : run_client(o);
}
