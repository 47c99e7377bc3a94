// mrc-perf's client: the handshake, the rounds of RDMA WRITEs (one per size of the sweep),
// the raw UDP blasts around them (--raw-udp) and the report: perftest's table, the MRC lines
// and the --json file.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "net/packet_auth.h"
#include "net/pattern.h"
#include "net/psk.h"
#include "net/qlog_file.h"
#include "perf.h"

namespace mrc::perf {

namespace {

constexpr const char* kLine =
    "---------------------------------------------------------------------------------------\n";

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

// Liveness (docs/linux-driver.md, "A peer that goes away"): after an ACK timeout the client
// asks the server over the side channel whether it is there; the server answers at once. A
// server that neither acknowledges data nor answers for kLivenessWait is gone: its host died
// or its process stopped without closing the channel. The wait covers TCP's own recovery
// (a 200 ms minimum RTO, retried on another path) over a fabric with a fault.
constexpr Time kLivenessWait = ms(1000);

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

}  // namespace

int run_client(const Options& o) {
  auto sc = session_config(o, nullptr);
  if (!sc) return tools::fail_setup("mrc-perf", sc.error().message);
  const std::vector<uint64_t> sizes = sweep_sizes(o);
  const uint64_t max_size = sizes.back();
  const uint64_t slots = slots_for(o, max_size);
  sc->buffer_bytes = max_size * slots * o.qps;
  // Opened before the session: its engine logs into it and goes first.
  std::unique_ptr<QlogFile> qlog;
  if (!o.qlog_path.empty()) {
    auto q = QlogFile::open(o.qlog_path);
    if (!q) return tools::fail_setup("mrc-perf", q.error().message);
    qlog = std::move(*q);
  }
  auto ch = SideChannel::connect(o.server, o.side_port, o.connect_timeout_ms);
  if (!ch) return tools::fail_setup("mrc-perf", ch.error().message);
  auto s = Session::create(*sc);
  if (!s) return tools::fail_setup("mrc-perf", s.error().message);
  Session& cs = **s;
  cs.engine().set_event_log(qlog.get());
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

}  // namespace mrc::perf
