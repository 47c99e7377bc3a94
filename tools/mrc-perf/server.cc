// mrc-perf's server: accepts clients one at a time (each held to its deadlines), serves the
// client's rounds (and raw blasts) and ends with the summary of the client actually served.
#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
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
// `qlog`: the event log (--qlog) its engine writes to, or nullptr.
NetResult<std::unique_ptr<Session>> open_client_session(const Options& o, const Hello& client,
                                                        const std::optional<PacketKeys>& keys,
                                                        EventLog* qlog) {
  auto sc = session_config(o, &client);
  if (!sc) return std::unexpected(sc.error());
  auto s = Session::create(*sc);
  if (!s) return std::unexpected(s.error());
  (*s)->engine().set_event_log(qlog);
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
                                        const std::optional<Psk>& psk, uint64_t accept_start,
                                        EventLog* qlog) {
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
    auto s = open_client_session(o, a.hello, keys, qlog);
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

}  // namespace

int run_server(const Options& o) {
  std::optional<Psk> psk;
  if (!o.psk_path.empty()) {
    auto p = load_psk(o.psk_path);
    if (!p) return tools::fail_setup("mrc-perf", p.error().message);
    psk = std::move(*p);
  }
  // Opened before any session: the sessions' engines log into it and go first.
  std::unique_ptr<QlogFile> qlog;
  if (!o.qlog_path.empty()) {
    auto q = QlogFile::open(o.qlog_path);
    if (!q) return tools::fail_setup("mrc-perf", q.error().message);
    qlog = std::move(*q);
  }
  auto listener = SideListener::listen(o.side_port);
  if (!listener) return tools::fail_setup("mrc-perf", listener.error().message);
  std::printf(
      "\n************************************\n* Waiting for client to connect... *\n"
      "************************************\n");
  std::fflush(stdout);
  const uint64_t accept_start = monotonic_ns();
  while (true) {
    auto accepted = accept_client(o, *listener, psk, accept_start, qlog.get());
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

}  // namespace mrc::perf
