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

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "net/pattern.h"
#include "net/session.h"
#include "net/side_channel.h"

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
  double base_rtt_us = 50;
  double reorder_us = 2000;
  uint32_t mpr = 4;
  bool no_icrc_verify = false;
  bool busy_poll = false;
  int connect_timeout_ms = 5000;
  int accept_timeout_ms = -1;
  int probe_ms = 2000;
  uint64_t seed = 1;
  uint16_t data_port = 0;
};

constexpr const char* kLine =
    "---------------------------------------------------------------------------------------\n";

std::string kv_encode(const std::vector<std::pair<std::string, uint64_t>>& kv) {
  std::string s;
  for (const auto& [k, v] : kv)
    s += k + "=" + std::to_string(v) + "\n";
  return s;
}

std::map<std::string, uint64_t> kv_decode(std::span<const uint8_t> b) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(std::string(b.begin(), b.end()));
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[line.substr(0, eq)] = std::strtoull(line.c_str() + eq + 1, nullptr, 10);
  }
  return out;
}

std::vector<uint8_t> bytes_of(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// Fabric knowledge from mrc-fabric's fabric.json (docs/fabric.md). Tolerant of the exact
// layout: reads "planes", "spines" (count) or per-plane "spine_usids", "hosts_per_leaf" or a
// "hosts" array with "leaf" fields.
struct FabricInfo {
  uint32_t planes = 0;
  std::vector<std::vector<uint16_t>> spine_usids;
  std::vector<uint16_t> leaf_usids;
};

NetResult<FabricInfo> read_fabric(const Options& o) {
  FabricInfo f;
  if (o.fabric.empty()) return f;
  std::ifstream in(o.fabric);
  if (!in) return net_fail(NetErrc::kInvalidArgument, "cannot read " + o.fabric);
  Json j = Json::parse(in, nullptr, false);
  if (j.is_discarded()) return net_fail(NetErrc::kInvalidArgument, o.fabric + ": not JSON");
  if (o.host < 0) return net_fail(NetErrc::kInvalidArgument, "--fabric needs --host");
  f.planes = j.value("planes", 0u);
  if (f.planes == 0 || f.planes > 32)
    return net_fail(NetErrc::kInvalidArgument, o.fabric + ": no plane count");
  uint32_t leaf = 0;
  if (j.contains("hosts") && j["hosts"].is_array() &&
      static_cast<size_t>(o.host) < j["hosts"].size() && j["hosts"][o.host].is_object())
    leaf = j["hosts"][o.host].value("leaf", 0u);
  else if (j.contains("hosts_per_leaf"))
    leaf = static_cast<uint32_t>(o.host) / std::max(1u, j.value("hosts_per_leaf", 1u));
  for (uint32_t p = 0; p < f.planes; ++p) {
    std::vector<uint16_t> sp;
    if (j.contains("spine_usids") && j["spine_usids"].is_array() && p < j["spine_usids"].size())
      for (const auto& u : j["spine_usids"][p])
        sp.push_back(static_cast<uint16_t>(u.get<uint32_t>()));
    else
      for (uint32_t s = 0; s < j.value("spines", 0u); ++s)
        sp.push_back(static_cast<uint16_t>(0x8000 + s));
    f.spine_usids.push_back(sp);
    f.leaf_usids.push_back(static_cast<uint16_t>(0x0001 + leaf));
  }
  return f;
}

NetResult<SessionConfig> session_config(const Options& o, const Hello* client_hello) {
  SessionConfig sc;
  auto fabric = read_fabric(o);
  if (!fabric) return std::unexpected(fabric.error());
  std::vector<std::string> local = o.local;
  if (local.empty() && fabric->planes > 0) {
    for (uint32_t p = 0; p < fabric->planes; ++p)
      local.push_back(fmt::format("fcbb:bb{:02x}:{:x}::", p, 0x4000 + o.host));
  }
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
  sc.driver.verify_icrc = !o.no_icrc_verify;
  sc.driver.busy_poll = o.busy_poll;
  const size_t P = sc.driver.ports.size();
  if (fabric->planes > 0) {
    sc.spine_usids = fabric->spine_usids;
    sc.leaf_usids = fabric->leaf_usids;
  } else {
    for (size_t p = 0; p < P; ++p) {
      std::vector<uint16_t> sp;
      for (uint32_t s = 0; s < o.spines; ++s)
        sp.push_back(static_cast<uint16_t>(0x8000 + s));
      sc.spine_usids.push_back(sp);
      sc.leaf_usids.push_back(o.leaf >= 0 ? static_cast<uint16_t>(0x0001 + o.leaf) : 0);
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
  uint64_t mismatches = 0;
};

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
  std::printf(" Max inline data : 0[B]\n");
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

uint64_t get(const std::map<std::string, uint64_t>& kv, const std::string& k) {
  auto it = kv.find(k);
  return it == kv.end() ? 0 : it->second;
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
  std::printf(" MRC retransmits   : %lu (losses %lu, spurious %lu, timeouts %lu)\n",
              get(local, "retransmits"), get(local, "losses_detected"),
              get(local, "spurious_losses"), get(local, "timeouts"));
  std::printf(" MRC trims         : %lu trim NACKs received, %lu trimmed at server; ECN %lu\n",
              get(local, "trim_nacks_received"), get(remote, "trimmed_received"),
              get(remote, "ecn_received"));
  std::printf(" MRC EV changes    : %lu (server %lu)\n", get(local, "ev_state_changes"),
              get(remote, "ev_state_changes"));
  std::printf(" MRC drops client  :%s\n", drops_line(local).c_str());
  std::printf(" MRC drops server  :%s\n", drops_line(remote).c_str());
  std::printf(" MRC stall         : %.3f ms (longest gap between completions)\n", stall_ms);
  std::fputs(kLine, stdout);
}

// Polls the driver until a side-channel frame arrives (the peer's engine must keep being
// served while we wait: it ACKs, retransmits, answers probes).
NetResult<std::vector<uint8_t>> wait_frame(Session& s, SideChannel& ch, Time timeout) {
  const Time start = s.driver().now();
  while (true) {
    auto f = ch.try_recv_frame();
    if (!f) return std::unexpected(f.error());
    if (*f) return std::move(**f);
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

// ----- server ---------------------------------------------------------------------------

int run_server(const Options& o) {
  auto listener = SideListener::listen(o.side_port);
  if (!listener) {
    std::fprintf(stderr, "mrc-perf: %s\n", listener.error().message.c_str());
    return 2;
  }
  std::printf(
      "\n************************************\n* Waiting for client to connect... *\n"
      "************************************\n");
  std::fflush(stdout);
  auto ch = listener->accept(o.accept_timeout_ms);
  if (!ch) {
    std::fprintf(stderr, "mrc-perf: %s\n", ch.error().message.c_str());
    return 2;
  }
  auto frame = ch->recv_frame(10'000);
  if (!frame) {
    std::fprintf(stderr, "mrc-perf: %s\n", frame.error().message.c_str());
    return 2;
  }
  auto client = decode_hello(*frame);
  if (!client) {
    // Answer with our own hello so the client reports the mismatch too.
    Hello h;
    h.role = HelloRole::kServer;
    h.planes.resize(1);
    (void)ch->send_frame(encode_hello(h));
    std::fprintf(stderr, "mrc-perf: %s\n", client.error().message.c_str());
    return 2;
  }
  auto sc = session_config(o, &*client);
  if (!sc) {
    std::fprintf(stderr, "mrc-perf: %s\n", sc.error().message.c_str());
    return 2;
  }
  auto s = Session::create(*sc);
  if (!s) {
    std::fprintf(stderr, "mrc-perf: %s\n", s.error().message.c_str());
    return 2;
  }
  Session& ss = **s;
  if (auto st = ch->send_frame(encode_hello(ss.hello(HelloRole::kServer))); !st) {
    std::fprintf(stderr, "mrc-perf: %s\n", st.error().message.c_str());
    return 2;
  }
  if (auto st = ss.connect(*client); !st) {
    std::fprintf(stderr, "mrc-perf: %s\n", st.error().message.c_str());
    return 2;
  }
  const bool imm = client->flags & kHelloWriteImm;
  const bool verify = client->flags & kHelloVerify;
  const uint64_t slots = std::max<uint64_t>(1, client->slots);
  std::map<uint32_t, uint32_t> qp_index;
  for (size_t i = 0; i < ss.qpns().size(); ++i)
    qp_index[ss.qpns()[i]] = static_cast<uint32_t>(i);
  // Receives for WRITE_IMM: keep every QP's receive queue full.
  for (uint32_t qpn : ss.qpns())
    for (uint32_t k = 0; k < ss.config().rq_depth; ++k)
      (void)ss.engine().post_recv(qpn, k);
  uint64_t total_mismatches = 0, qp_errors = 0;
  uint64_t round_size = 0, imm_received = 0;
  Json rounds = Json::array();
  int rc = 0;
  while (true) {
    // Serve the data path until the client says something.
    auto f = ch->try_recv_frame();
    if (!f) {
      std::fprintf(stderr, "mrc-perf: %s\n", f.error().message.c_str());
      rc = 1;
      break;
    }
    if (!*f) {
      if (auto st = ss.driver().poll(us(500)); !st) {
        std::fprintf(stderr, "mrc-perf: %s\n", st.error().message.c_str());
        rc = 1;
        break;
      }
      Completion c;
      while (ss.engine().poll_completion(c)) {
        if (c.status != WcStatus::kSuccess) {
          ++qp_errors;
          continue;
        }
        if (c.opcode != WcOpcode::kRecvImm) continue;
        ++imm_received;
        (void)ss.engine().post_recv(c.qpn, c.wr_id);
        if (verify) {
          const uint32_t q = qp_index[c.qpn];
          const uint64_t slot = c.imm % slots;
          total_mismatches +=
              count_pattern_mismatches(ss.buffer() + (q * slots + slot) * client->msg_size,
                                       round_size, client->seed, q, c.imm);
        }
      }
      Event e;
      while (ss.engine().poll_event(e))
        if (e.type == EventType::kQpError) ++qp_errors;
      continue;
    }
    auto msg = kv_decode(**f);
    if (msg.count("round")) {
      round_size = get(msg, "size");
      imm_received = 0;
      (void)ch->send_frame(bytes_of("ready=1\n"));
    } else if (msg.count("end")) {
      const uint64_t iters = get(msg, "iters");
      // WRITE_IMM: wait (serving the data path) until every immediate arrived.
      const Time start = ss.driver().now();
      while (imm && imm_received < iters && ss.driver().now() - start < ms(10'000)) {
        (void)ss.driver().poll(us(500));
        Completion c;
        while (ss.engine().poll_completion(c)) {
          if (c.status != WcStatus::kSuccess || c.opcode != WcOpcode::kRecvImm) continue;
          ++imm_received;
          (void)ss.engine().post_recv(c.qpn, c.wr_id);
          if (verify) {
            const uint32_t q = qp_index[c.qpn];
            total_mismatches += count_pattern_mismatches(
                ss.buffer() + (q * slots + c.imm % slots) * client->msg_size, round_size,
                client->seed, q, c.imm);
          }
        }
      }
      uint64_t round_mismatches = 0;
      if (verify && !imm) {
        // Each slot holds the last iteration that used it.
        const uint64_t per_qp_iters = get(msg, "per_qp_iters");
        for (uint32_t q = 0; q < ss.qpns().size(); ++q) {
          for (uint64_t slot = 0; slot < std::min(slots, per_qp_iters); ++slot) {
            const uint64_t last = ((per_qp_iters - 1 - slot) / slots) * slots + slot;
            round_mismatches +=
                count_pattern_mismatches(ss.buffer() + (q * slots + slot) * client->msg_size,
                                         round_size, client->seed, q, last);
          }
        }
        total_mismatches += round_mismatches;
      }
      std::vector<std::pair<std::string, uint64_t>> reply = {{"mismatches", total_mismatches},
                                                             {"imm_received", imm_received},
                                                             {"qp_errors", qp_errors}};
      (void)ch->send_frame(bytes_of(kv_encode(reply)));
      rounds.push_back({{"bytes", round_size}, {"imm_received", imm_received}});
    } else if (msg.count("bye")) {
      (void)ch->send_frame(bytes_of(kv_encode(ss.counters())));
      break;
    }
  }
  const bool failed = rc != 0 || total_mismatches != 0 || qp_errors != 0;
  std::printf(" MRC server        : mismatches %lu, QP errors %lu, decode drops %lu\n",
              total_mismatches, qp_errors, ss.driver().stats().decode_drops);
  if (!o.json_path.empty()) {
    Json j;
    j["role"] = "server";
    j["ok"] = !failed;
    j["mismatches"] = total_mismatches;
    j["qp_errors"] = qp_errors;
    j["rounds"] = rounds;
    Json c;
    for (const auto& [k, v] : ss.counters())
      c[k] = v;
    j["counters"] = c;
    std::ofstream(o.json_path) << j.dump(2) << "\n";
  }
  return failed ? 1 : 0;
}

// ----- client ---------------------------------------------------------------------------

int run_client(const Options& o) {
  auto sc = session_config(o, nullptr);
  if (!sc) {
    std::fprintf(stderr, "mrc-perf: %s\n", sc.error().message.c_str());
    return 2;
  }
  const std::vector<uint64_t> sizes = sweep_sizes(o);
  const uint64_t max_size = sizes.back();
  const uint64_t slots = slots_for(o, max_size);
  sc->buffer_bytes = max_size * slots * o.qps;
  auto ch = SideChannel::connect(o.server, o.side_port, o.connect_timeout_ms);
  if (!ch) {
    std::fprintf(stderr, "mrc-perf: %s\n", ch.error().message.c_str());
    return 2;
  }
  auto s = Session::create(*sc);
  if (!s) {
    std::fprintf(stderr, "mrc-perf: %s\n", s.error().message.c_str());
    return 2;
  }
  Session& cs = **s;
  Hello mine = cs.hello(HelloRole::kClient);
  mine.flags =
      static_cast<uint8_t>((o.write_imm ? kHelloWriteImm : 0) | (o.verify ? kHelloVerify : 0));
  mine.msg_size = max_size;
  mine.slots = slots;
  mine.seed = o.seed;
  auto fail_setup = [&](const NetError& e) {
    std::fprintf(stderr, "mrc-perf: %s\n", e.message.c_str());
    if (!o.json_path.empty()) {
      Json j;
      j["role"] = "client";
      j["ok"] = false;
      j["error"] = e.message;
      j["error_kind"] = net_errc_name(e.code);
      std::ofstream(o.json_path) << j.dump(2) << "\n";
    }
    return 2;
  };
  if (auto st = ch->send_frame(encode_hello(mine)); !st) return fail_setup(st.error());
  auto frame = ch->recv_frame(10'000);
  if (!frame) return fail_setup(frame.error());
  auto server = decode_hello(*frame);
  if (!server) return fail_setup(server.error());
  if (auto st = cs.connect(*server); !st) return fail_setup(st.error());
  if (auto st = cs.driver().probe_planes(Session::kPeerId, ms(o.probe_ms)); !st)
    return fail_setup(st.error());
  print_header(o, cs);

  const double unit = o.gbits ? 125'000'000.0 : 1048576.0;  // perftest: Gb = 1e9 bits, MB = 2^20
  const uint32_t limit =
      o.verify ? std::min<uint32_t>(o.tx_depth, static_cast<uint32_t>(slots - 1)) : o.tx_depth;
  Json results = Json::array();
  uint64_t mismatches = 0, qp_errors = 0;
  double worst_stall_ms = 0;
  bool failed = false;
  std::string error;
  for (uint64_t size : sizes) {
    if (auto st = ch->send_frame(bytes_of(fmt::format("round=1\nsize={}\n", size))); !st) {
      error = st.error().message;
      failed = true;
      break;
    }
    if (auto r = wait_frame(cs, *ch, ms(10'000)); !r) {
      error = r.error().message;
      failed = true;
      break;
    }
    Engine& e = cs.engine();
    const Time t0 = cs.driver().now();
    const Time stop_at = o.duration_s > 0 ? t0 + static_cast<Time>(o.duration_s * 1e12) : kNever;
    const uint64_t want = o.duration_s > 0 ? UINT64_MAX : o.iters;
    std::vector<uint64_t> per_qp(o.qps, 0);
    std::vector<Time> completed_at;
    completed_at.reserve(o.duration_s > 0 ? 1 << 16 : o.iters);
    uint64_t posted = 0, completed = 0;
    Time last_completion = t0, max_gap = 0;
    bool stop = false;
    while (!stop || completed < posted) {
      Time now = cs.driver().now();
      if (now >= stop_at) stop = true;
      while (!stop && posted < want && posted - completed < limit) {
        const uint32_t q = static_cast<uint32_t>(posted % o.qps);
        const uint64_t it = per_qp[q];
        const uint64_t slot = it % slots;
        const uint64_t off = (q * slots + slot) * max_size;
        if (o.verify) fill_pattern(cs.buffer() + off, size, o.seed, q, it);
        WriteWr wr;
        wr.wr_id = posted;
        wr.opcode = o.write_imm ? WrOpcode::kWriteImm : WrOpcode::kWrite;
        wr.lkey = cs.keys().lkey;
        wr.local_addr = reinterpret_cast<uint64_t>(cs.buffer()) + off;
        wr.length = size;
        wr.remote_addr = server->remote_addr + off;
        wr.rkey = server->rkey;
        wr.imm = static_cast<uint32_t>(it);
        auto st = e.post_write(now, cs.qpns()[q], wr);
        if (!st) {
          if (st.error() == Error::kQueueFull) break;
          error = std::string("post_write: ") + std::string(error_name(st.error()));
          failed = stop = true;
          break;
        }
        ++per_qp[q];
        ++posted;
      }
      if (posted >= want) stop = true;
      if (auto st = cs.driver().poll(ms(1)); !st) {
        error = st.error().message;
        failed = true;
        break;
      }
      Completion c;
      while (e.poll_completion(c)) {
        if (c.status != WcStatus::kSuccess) {
          ++qp_errors;
          error = std::string("QP error: ") + wc_status_name(c.status);
        }
        ++completed;
        max_gap = std::max(max_gap, c.time - last_completion);
        last_completion = c.time;
        completed_at.push_back(c.time);
      }
      Event ev;
      while (e.poll_event(ev))
        if (ev.type == EventType::kQpError) {
          ++qp_errors;
          error = "QP entered ERR";
          stop = true;
        }
      if (qp_errors) {
        failed = true;
        break;
      }
    }
    const Time t1 = last_completion;
    RoundResult r;
    r.bytes = size;
    r.iters = completed;
    const double secs = std::max(1e-12, static_cast<double>(t1 - t0) / 1e12);
    r.bw_avg = static_cast<double>(size) * static_cast<double>(completed) / secs / unit;
    r.msg_rate = static_cast<double>(completed) / secs / 1e6;
    const size_t w =
        std::min<size_t>(o.tx_depth, completed_at.size() > 1 ? completed_at.size() - 1 : 0);
    for (size_t i = w; w > 0 && i < completed_at.size(); ++i) {
      const Time dt = completed_at[i] - completed_at[i - w];
      if (dt > 0)
        r.bw_peak = std::max(r.bw_peak, static_cast<double>(size) * static_cast<double>(w) /
                                            (static_cast<double>(dt) / 1e12) / unit);
    }
    if (r.bw_peak < r.bw_avg) r.bw_peak = r.bw_avg;
    r.stall_ms = static_cast<double>(max_gap) / 1e9;
    worst_stall_ms = std::max(worst_stall_ms, r.stall_ms);
    // Tell the server the round is over; it verifies and answers.
    const uint64_t per_qp_iters = per_qp.empty() ? 0 : per_qp[0];
    (void)ch->send_frame(
        bytes_of(fmt::format("end=1\niters={}\nper_qp_iters={}\n", completed, per_qp_iters)));
    auto reply = wait_frame(cs, *ch, ms(15'000));
    if (!reply) {
      error = reply.error().message;
      failed = true;
      break;
    }
    auto kv = kv_decode(*reply);
    const uint64_t server_mismatches = get(kv, "mismatches");
    r.mismatches = server_mismatches - mismatches;
    mismatches = server_mismatches;
    qp_errors += get(kv, "qp_errors");
    if (o.write_imm && get(kv, "imm_received") < completed) {
      error =
          fmt::format("server received {} immediates of {}", get(kv, "imm_received"), completed);
      failed = true;
    }
    print_row(r);
    results.push_back({{"bytes", r.bytes},
                       {"iterations", r.iters},
                       {"bw_peak", r.bw_peak},
                       {"bw_average", r.bw_avg},
                       {"unit", o.gbits ? "Gb/sec" : "MB/sec"},
                       {"msg_rate_mpps", r.msg_rate},
                       {"goodput_gbps", r.bw_avg * unit * 8 / 1e9},
                       {"stall_ms", r.stall_ms},
                       {"mismatches", r.mismatches}});
    if (failed) break;
  }
  (void)ch->send_frame(bytes_of("bye=1\n"));
  std::map<std::string, uint64_t> remote;
  if (auto r = wait_frame(cs, *ch, ms(5'000)); r) remote = kv_decode(*r);
  std::fputs(kLine, stdout);
  std::map<std::string, uint64_t> local;
  for (const auto& [k, v] : cs.counters())
    local[k] = v;
  print_mrc_lines(local, remote, cs.config().driver.ports.size(), worst_stall_ms);
  if (mismatches) {
    error = fmt::format("verify: {} bytes differ from the pattern", mismatches);
    failed = true;
  }
  if (qp_errors) failed = true;
  if (!error.empty()) std::fprintf(stderr, "mrc-perf: %s\n", error.c_str());
  if (o.verify && !failed)
    std::printf(" MRC verify        : OK (every byte checked at the server)\n");
  if (!o.json_path.empty()) {
    Json j;
    j["role"] = "client";
    j["ok"] = !failed;
    if (!error.empty()) j["error"] = error;
    j["ev_mode"] = o.ev_mode;
    j["planes"] = cs.config().driver.ports.size();
    j["evs_per_plane"] = cs.config().evs_per_plane;
    j["qps"] = o.qps;
    j["mtu"] = cs.config().mtu;
    j["write_imm"] = o.write_imm;
    j["verify"] = o.verify;
    j["mismatches"] = mismatches;
    j["qp_errors"] = qp_errors;
    j["stall_ms"] = worst_stall_ms;
    j["results"] = results;
    Json lj, rj;
    for (const auto& [k, v] : local)
      lj[k] = v;
    for (const auto& [k, v] : remote)
      rj[k] = v;
    j["counters"] = lj;
    j["server_counters"] = rj;
    std::ofstream(o.json_path) << j.dump(2) << "\n";
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"mrc-perf: RDMA WRITE bandwidth over MRC on Linux UDP/IPv6 (like ib_write_bw)"};
  app.add_option("server", o.server, "server to connect to (client mode); none = be the server");
  app.add_option("-p,--port", o.side_port, "side-channel TCP port")->capture_default_str();
  app.add_option("-s,--size", o.size, "bytes per message")->capture_default_str();
  app.add_flag("-a,--all", o.all_sizes, "sweep sizes 2 .. 2^23");
  app.add_option("-n,--iters", o.iters, "messages per size")->capture_default_str();
  app.add_option("-D,--duration", o.duration_s, "seconds per size (instead of -n)");
  app.add_option("-q,--qp", o.qps, "QPs")->capture_default_str();
  app.add_option("--local", o.local,
                 "local address per plane, ADDR or [ADDR]:PORT (comma separated)")
      ->delimiter(',');
  app.add_option("--ifname", o.ifnames, "interface per plane (SO_BINDTODEVICE)")->delimiter(',');
  app.add_option("--fabric", o.fabric, "mrc-fabric fabric.json (planes, spines, leaves)");
  app.add_option("--host", o.host, "this host's index in --fabric");
  app.add_option("--spines", o.spines, "spines per plane (without --fabric)");
  app.add_option("--leaf", o.leaf, "this host's leaf index (without --fabric)");
  app.add_option("--ev-mode", o.ev_mode, "srv6 | stev | udp")->capture_default_str();
  app.add_option("--evs", o.evs, "EVs per plane")->capture_default_str();
  app.add_option("-m,--mtu", o.mtu, "path MTU (payload bytes per packet)")->capture_default_str();
  app.add_flag("--report_gbits", o.gbits, "report Gb/sec instead of MB/sec");
  app.add_flag("--write-imm", o.write_imm, "RDMA WRITE with immediate");
  app.add_flag("--verify", o.verify, "check every payload byte at the server");
  app.add_option("--json", o.json_path, "write results as JSON");
  app.add_option("-t,--tx-depth", o.tx_depth, "messages outstanding")->capture_default_str();
  app.add_option("--cc", o.cc, "nscc | fixed | none")->capture_default_str();
  app.add_option("--link-gbps", o.link_gbps, "per-plane line rate for the CC")
      ->capture_default_str();
  app.add_option("--base-rtt-us", o.base_rtt_us, "unloaded RTT for the CC")->capture_default_str();
  app.add_option("--reorder-us", o.reorder_us, "RACK reordering window")->capture_default_str();
  app.add_option("--mpr", o.mpr, "outstanding PSNs, units of 128")->capture_default_str();
  app.add_flag("--no-icrc-verify", o.no_icrc_verify,
               "do not check the ICRC on receive (the UDP checksum still covers the payload)");
  app.add_flag("--busy-poll", o.busy_poll, "spin instead of sleeping in epoll");
  app.add_option("--data-port", o.data_port, "UDP port of the data sockets (0: any)");
  app.add_option("--connect-timeout-ms", o.connect_timeout_ms)->capture_default_str();
  app.add_option("--accept-timeout-ms", o.accept_timeout_ms, "server: give up (-1: never)");
  app.add_option("--probe-ms", o.probe_ms, "data-path reachability timeout")->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.size == 0 && !o.all_sizes) o.size = 1;
  if (o.qps == 0 || o.tx_depth == 0 || o.evs == 0) {
    std::fprintf(stderr, "mrc-perf: -q, -t and --evs must be positive\n");
    return 2;
  }
  return o.server.empty() ? run_server(o) : run_client(o);
}
