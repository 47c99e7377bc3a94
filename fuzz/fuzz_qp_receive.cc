// libFuzzer target for the whole receive path of a connected QP pair.
//
// Per input (cheap: small windows, small rings; the harness is built once and reset before
// each input, Harness::reset): engines A and B (2 ports, 8 EVs each QP),
// one QP each, connected both ways (each QP is requester and responder); each engine has a
// local-only source buffer and a remote-writable destination buffer with 64 guard bytes on
// either side; A has a 3-packet WRITE and a WRITE-with-immediate to B in flight, B has two
// receives posted and a WRITE to A in flight. The input then drives both engines.
//
// Input: byte 0 selects the mode.
//   even: raw datagrams. Records [ctl][len lo][len hi][len bytes]: ctl bit 0 = engine (A/B),
//         the bytes go to Engine::on_datagram (ICRC checked). After each record, ctl bit 1
//         pumps the genuine traffic both ways, ctl bit 2 advances time and runs timers.
//   odd:  operations (structure-aware), one op byte each, see run_ops(). Among them: take a
//         valid encoded packet (crafted data/ACK/NACK/probe/probe reply/CNP, or any packet the
//         engines really sent in this run), overwrite/flip fuzzer-chosen bytes (nothing
//         recomputed), then either hand the bytes to on_datagram (ICRC checked) or decode them
//         with verify_icrc = false and call on_packet (past the ICRC, into the engine).
//
// After every step: completions and events are drained and checked, then the invariants:
//   - guard bytes around every destination region and every source buffer are unchanged;
//   - each completion names a WR that was posted and not yet completed, send WRs complete in
//     posting order, receive WRs in posting order; completions never exceed posted WRs;
//   - no completion was dropped; the requester never had more than MPR PSNs or max_wimm
//     WRITE-with-imm messages outstanding;
//   - while only genuine packets reached the engines (dropped, trimmed, ECN-marked,
//     duplicated, reordered, delayed by the input, never forged), a WRITE that completes
//     successfully has its source bytes in place at the responder (unless another WRITE
//     overlapped its range), and a WRITE outside the responder's region never succeeds.
// A violation prints what broke and aborts.
//
// MRC_FUZZ_QP_WRITE_SEEDS=<dir> makes the binary write its seed inputs to <dir> and exit
// (fuzz/corpus/fuzz_qp_receive/ holds them).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/engine.h"
#include "wire/codec.h"

namespace mrc {
namespace {

constexpr int kPorts = 2;
constexpr int kEvs = 8;
constexpr uint32_t kMtu = 256;
constexpr size_t kGuard = 64;
constexpr size_t kBufBytes = 4096;
constexpr uint64_t kSrcIova = 0x1000;
constexpr uint64_t kDstIova = 0x100000;
constexpr uint8_t kMpr = 1;  // 128 PSNs: the window edges are easy to reach
constexpr uint16_t kMaxWimm = 4;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kInitDst = 0x5A;
constexpr size_t kMaxDatagram = 9216;
constexpr size_t kMaxTemplates = 24;
constexpr int kMaxSteps = 512;

[[noreturn]] void violation(const char* what, uint64_t a = 0, uint64_t b = 0) {
  std::fprintf(stderr, "fuzz_qp_receive: INVARIANT VIOLATED: %s (%llu, %llu)\n", what,
               static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  std::abort();
}

// Bytes of the input, consumed from the front; zeros once exhausted.
class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  std::span<const uint8_t> take(size_t k) {
    k = std::min(k, n_ - std::min(i_, n_));
    std::span<const uint8_t> s(d_ + i_, k);
    i_ += k;
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

// A buffer with guard bytes on both sides; only the middle is registered.
struct Guarded {
  std::vector<uint8_t> bytes;
  Guarded(uint8_t fill) : bytes(kBufBytes + 2 * kGuard, kGuardByte) {
    std::fill(bytes.begin() + kGuard, bytes.end() - kGuard, fill);
  }
  uint8_t* inner() { return bytes.data() + kGuard; }
  void fill(uint8_t v) {
    std::fill(bytes.begin(), bytes.begin() + kGuard, kGuardByte);
    std::fill(bytes.begin() + kGuard, bytes.end() - kGuard, v);
    std::fill(bytes.end() - kGuard, bytes.end(), kGuardByte);
  }
  void check(const char* what) const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (bytes[i] != kGuardByte) violation(what, i, bytes[i]);
      if (bytes[bytes.size() - 1 - i] != kGuardByte) violation(what, bytes.size() - 1 - i, 0);
    }
  }
};

struct Side {
  std::unique_ptr<Engine> eng;
  uint32_t qpn = 0;
  Guarded src{0}, dst{kInitDst};
  std::vector<uint8_t> src_copy;
  MemoryKeys src_keys, dst_keys;
  std::deque<uint64_t> sends, recvs;  // posted, not completed, in posting order
  uint64_t posted = 0, next_wr = 1;
  uint64_t completions = 0;
  struct Range {
    uint64_t wr_id, local_off, remote_off, len;
  };
  std::vector<Range> writes;  // every WRITE this side posted (to the peer's destination)
  bool forged = false;        // bytes not sent by the peer engine were delivered here
};

struct Template {
  std::vector<uint8_t> bytes;
  int to = 0;  // the engine it was addressed to
};

QpAttr qp_attr(uint32_t dest_qpn) {
  QpAttr a;
  for (int i = 0; i < kEvs; ++i) {
    PathDesc d;
    d.port = static_cast<uint8_t>(i % kPorts);
    d.ev[0] = static_cast<uint8_t>(i);
    a.paths.push_back(d);
  }
  a.ev_min_active = 2;
  a.cc.algorithm = CcAlgorithm::kNscc;
  a.cc.nscc.base_rtt = us(4);
  a.cc.nscc.link_bps = 200'000'000'000ull;
  a.dest_qpn = dest_qpn;
  a.path_mtu = kMtu;
  a.mpr = kMpr;
  a.mpr_dest = kMpr;
  a.max_wimm = kMaxWimm;
  a.max_wimm_dest = kMaxWimm;
  a.timeout = 4;  // 16 us
  a.retry_linear = 2;
  a.retry_exp = 2;
  return a;
}

wire::Datagram envelope(const wire::TransportPacket& p, uint8_t ecn = wire::kEcnEct0,
                        uint8_t dscp = wire::kDscpData) {
  wire::Datagram d;
  d.ip.traffic_class = static_cast<uint8_t>(dscp << 2 | ecn);
  d.ip.src[15] = 1;
  d.ip.dst[15] = 2;
  d.udp.src_port = 0xC000;
  d.pkt = p;
  return d;
}

// Encodes into a scratch buffer, then copies only the datagram: sizing `out` to the largest
// datagram first would zero 9 KiB per packet, a large share of a run under the sanitizers.
bool encode_to(const wire::Datagram& d, std::vector<uint8_t>& out) {
  static std::array<uint8_t, kMaxDatagram> scratch;
  auto n = wire::encode(d, scratch);
  if (!n) {
    out.clear();
    return false;
  }
  out.assign(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(*n));
  return true;
}

class Harness {
 public:
  Harness() { reset(); }

  // Back to the state every input starts from: fresh engines (constructing one is cheap and
  // keeps each input's run independent of the inputs before it, as libFuzzer needs to replay
  // a crash on its own), the buffers refilled in place, the crafted templates kept. Everything
  // else the harness owns is reused, so that an input costs its run, not an allocation of every
  // buffer and a re-encoding of every template.
  void reset() {
    now_ = us(1);
    held_.clear();
    dyn_next_ = 0;
    for (int i = 0; i < 2; ++i) {
      EngineConfig cfg;
      cfg.num_ports = kPorts;
      cfg.seed = 11 + static_cast<uint64_t>(i);
      cfg.max_qps = 4;
      // Above the most a drain can find (an ERR flush of a full send and receive queue, 64 +
      // 64 WRs), small enough that a fresh engine's completion queue costs little to clear.
      cfg.completion_capacity = 256;
      cfg.event_capacity = 64;
      Side& s = side_[i];
      s.eng = std::make_unique<Engine>(cfg);
      if (s.src_copy.empty()) {
        for (size_t k = 0; k < kBufBytes; ++k)
          s.src.inner()[k] = static_cast<uint8_t>(k * 7 + i);
        s.src_copy.assign(s.src.bytes.begin(), s.src.bytes.end());
      } else {
        std::copy(s.src_copy.begin(), s.src_copy.end(), s.src.bytes.begin());
      }
      s.dst.fill(kInitDst);
      s.sends.clear();
      s.recvs.clear();
      s.writes.clear();
      s.posted = 0;
      s.next_wr = 1;
      s.completions = 0;
      s.forged = false;
      s.src_keys = *s.eng->register_memory(s.src.inner(), kBufBytes, kSrcIova, kLocalWrite);
      s.dst_keys =
          *s.eng->register_memory(s.dst.inner(), kBufBytes, kDstIova, kLocalWrite | kRemoteWrite);
      s.qpn = *s.eng->create_qp(QpCreateAttr{64, 64, true});
    }
    for (int i = 0; i < 2; ++i) {
      const QpAttr a = qp_attr(side_[1 - i].qpn);
      Engine& e = *side_[i].eng;
      if (!e.modify_qp(0, side_[i].qpn, QpState::kInit, a) ||
          !e.modify_qp(0, side_[i].qpn, QpState::kRtr, a) ||
          !e.modify_qp(0, side_[i].qpn, QpState::kRts, a)) {
        violation("setup: modify_qp failed");
      }
    }
    // The work in flight.
    post_write(0, 0, 3 * kMtu, 0, false);
    post_write(0, 3 * kMtu, kMtu, 3 * kMtu, true);
    post_recv(1);
    post_recv(1);
    post_write(1, 0, 2 * kMtu, 0, false);
    // The crafted templates name QPNs and rkeys, which fresh engines hand out the same way
    // every time; built once, rebuilt should that ever change.
    const std::array<uint32_t, 4> ids{side_[0].qpn, side_[1].qpn, side_[0].dst_keys.rkey,
                                      side_[1].dst_keys.rkey};
    if (templates_.size() < kStaticTemplates || ids != template_ids_) {
      templates_.clear();
      build_static_templates();
      template_ids_ = ids;
    } else {
      templates_.resize(kStaticTemplates);
    }
    check();
  }

  void run(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.u8();
    if (mode % 2 == 0) {
      run_raw(in);
    } else {
      run_ops(in);
    }
  }

  // Seeds: a few valid inputs in both framings.
  std::vector<std::vector<uint8_t>> seeds() {
    std::vector<std::vector<uint8_t>> out;
    auto raw_record = [](std::vector<uint8_t>& v, uint8_t ctl, const std::vector<uint8_t>& b) {
      v.push_back(ctl);
      v.push_back(static_cast<uint8_t>(b.size()));
      v.push_back(static_cast<uint8_t>(b.size() >> 8));
      v.insert(v.end(), b.begin(), b.end());
    };
    // Raw: each crafted template to its engine, with pumps and timers in between.
    for (size_t t = 0; t < templates_.size(); ++t) {
      std::vector<uint8_t> v{0};
      raw_record(v, static_cast<uint8_t>(templates_[t].to | 2), templates_[t].bytes);
      out.push_back(v);
    }
    {
      std::vector<uint8_t> v{0};
      for (const Template& t : templates_)
        raw_record(v, static_cast<uint8_t>(t.to | 6), t.bytes);
      out.push_back(v);
    }
    // Ops: pump everything delivered, a few times, then timers.
    out.push_back({1, 2, 2, 2, 2, 4, 0, 2, 2});
    // Ops: pump with drops/trims/ECN/holds, release, timers, more work.
    out.push_back({1, 10, 1, 2, 3, 4, 0, 0, 0, 0, 0, 3, 4, 9, 1, 5, 0, 40, 0, 0, 2, 2, 7, 2});
    // Ops: replay each template unmutated through both delivery paths.
    for (size_t t = 0; t < kStaticTemplates; ++t) {
      out.push_back({1, 1, static_cast<uint8_t>(t), 0, 1, static_cast<uint8_t>(t), 0x80, 2});
    }
    // Ops: a mutation of the ACK's cumulative PSN through decode without ICRC.
    out.push_back({1, 2, 1, 2, 0x81, 0x43, 0x00, 0x7F, 2, 2});
    return out;
  }

 private:
  static constexpr size_t kStaticTemplates = 8;

  // ---- work ---------------------------------------------------------------------------
  void post_write(int i, uint64_t local_off, uint64_t len, uint64_t remote_off, bool imm) {
    Side& s = side_[i];
    WriteWr w;
    w.wr_id = s.next_wr++;
    w.opcode = imm ? WrOpcode::kWriteImm : WrOpcode::kWrite;
    w.lkey = s.src_keys.lkey;
    w.local_addr = kSrcIova + local_off;
    w.length = len;
    w.remote_addr = kDstIova + remote_off;
    w.rkey = side_[1 - i].dst_keys.rkey;
    w.imm = static_cast<uint32_t>(w.wr_id * 3);
    if (s.eng->post_write(now_, s.qpn, w)) {
      s.sends.push_back(w.wr_id);
      s.writes.push_back(Side::Range{w.wr_id, local_off, remote_off, len});
      ++s.posted;
    }
  }
  void post_recv(int i) {
    Side& s = side_[i];
    const uint64_t id = s.next_wr++;
    if (s.eng->post_recv(s.qpn, id)) {
      s.recvs.push_back(id);
      ++s.posted;
    }
  }

  // ---- templates ------------------------------------------------------------------------
  void add_template(std::vector<uint8_t> bytes, int to) {
    if (bytes.empty()) return;
    if (templates_.size() < kMaxTemplates) {
      templates_.push_back(Template{std::move(bytes), to});
    } else {
      // Keep the crafted ones, recycle the slots of packets seen in flight.
      templates_[kStaticTemplates + dyn_next_++ % (kMaxTemplates - kStaticTemplates)] =
          Template{std::move(bytes), to};
    }
  }

  void build_static_templates() {
    static const std::array<uint8_t, kMtu> payload = [] {
      std::array<uint8_t, kMtu> p{};
      for (size_t i = 0; i < p.size(); ++i)
        p[i] = static_cast<uint8_t>(0xC3 ^ i);
      return p;
    }();
    auto data = [&](int to, bool imm, uint32_t psn, uint32_t msg, uint32_t idx, uint32_t cnt) {
      wire::TransportPacket p;
      p.bth.opcode = imm ? wire::Opcode::kWriteOnlyImm : wire::Opcode::kWriteOnly;
      p.bth.dest_qp = side_[to].qpn;
      p.bth.psn = psn;
      p.reth = wire::Reth{kDstIova + idx * kMtu, side_[to].dst_keys.rkey, kMtu};
      p.imm = 77;
      uint16_t flags = idx + 1 == cnt ? wire::DataExt::kLastOfMessage : 0;
      if (imm) flags |= wire::DataExt::kHasImm;
      p.data = wire::DataExt{msg, idx, cnt, us(1), 3, flags};
      p.payload = payload.data();
      p.payload_len = kMtu;
      return p;
    };
    std::vector<uint8_t> b;
    // 0: WRITE packet 1 of 3 to B (A's first message), 1: WRITE-imm to B (second message).
    encode_to(envelope(data(1, false, 1, 0, 1, 3)), b);
    add_template(b, 1);
    encode_to(envelope(data(1, true, 3, 1, 0, 1)), b);
    add_template(b, 1);
    // 2: SACK to A: cumulative PSN 1, PSN 2 selectively, two echoes.
    {
      wire::TransportPacket p;
      p.bth.opcode = wire::Opcode::kAck;
      p.bth.dest_qp = side_[0].qpn;
      p.bth.psn = 0;
      p.aeth = wire::Aeth{0x1F, 0};
      p.sack.cum_psn = 1;
      p.sack.sack_base = 1;
      p.sack.bitmap[0] = 0x2;
      p.sack.received_bytes = 2 * kMtu;
      p.sack.service_time_ns = 100;
      p.sack.echo_count = 2;
      p.sack.echo[0] = wire::AckEcho{0, 0, 0};
      p.sack.echo[1] = wire::AckEcho{2, 1, wire::AckEcho::kEcnCe};
      encode_to(envelope(p), b);
      add_template(b, 0);
    }
    // 3: trim NACK to A for PSN 0.
    {
      wire::TransportPacket p;
      p.bth.opcode = wire::Opcode::kTrimNack;
      p.bth.dest_qp = side_[0].qpn;
      p.aeth = wire::Aeth{0x60, 0};
      p.nack = wire::TrimNackExt{0, 0, 0, 0};
      encode_to(envelope(p), b);
      add_template(b, 0);
    }
    // 4: probe to B, 5: probe reply to A.
    {
      wire::TransportPacket p;
      p.bth.opcode = wire::Opcode::kProbe;
      p.bth.dest_qp = side_[1].qpn;
      p.probe = wire::ProbeExt{(uint64_t{1} << 48) | 5, us(2), 0, 1, 1, 0};
      encode_to(envelope(p), b);
      add_template(b, 1);
      p.bth.opcode = wire::Opcode::kProbeReply;
      p.bth.dest_qp = side_[0].qpn;
      p.probe.service_time_ns = 10;
      encode_to(envelope(p), b);
      add_template(b, 0);
    }
    // 6: CNP to A.
    {
      wire::TransportPacket p;
      p.bth.opcode = wire::Opcode::kCnp;
      p.bth.dest_qp = side_[0].qpn;
      p.bth.becn = true;
      encode_to(envelope(p), b);
      add_template(b, 0);
    }
    // 7: WRITE to A (B's message), last packet of 2, trimmed by a switch.
    {
      wire::TransportPacket p = data(0, false, 1, 0, 1, 2);
      p.payload = nullptr;
      p.payload_len = 0;
      encode_to(envelope(p, wire::kEcnCe, wire::kDscpTrimmed), b);
      add_template(b, 0);
    }
    if (templates_.size() != kStaticTemplates) violation("setup: template encode failed");
  }

  // ---- delivery -------------------------------------------------------------------------
  void deliver_bytes(int to, std::span<const uint8_t> bytes, uint8_t port, bool forged = true) {
    side_[to].forged |= forged;
    (void)side_[to].eng->on_datagram(now_, static_cast<uint8_t>(port % kPorts), bytes);
  }

  void deliver_unchecked(int to, std::span<const uint8_t> bytes, uint8_t port) {
    wire::DecodeOptions opt;
    opt.verify_icrc = false;
    auto d = wire::decode(bytes, opt);
    if (!d) return;
    RxPacket rx;
    rx.port = static_cast<uint8_t>(port % kPorts);
    rx.ecn_ce = d->ip.ecn() == wire::kEcnCe;
    rx.trimmed = d->ip.dscp() == wire::kDscpTrimmed;
    rx.pkt = d->pkt;
    side_[to].forged = true;
    (void)side_[to].eng->on_packet(now_, rx);
  }

  // Polls both engines and sends their packets, each with a fate from the input.
  void pump(Input& in, bool with_fates) {
    for (int round = 0; round < 4; ++round) {
      bool any = false;
      for (int i = 0; i < 2; ++i) {
        for (int k = 0; k < 64; ++k) {
          TxPacket tx;
          if (!side_[i].eng->poll_transmit(now_, (1u << kPorts) - 1, tx)) break;
          any = true;
          const uint8_t fate = with_fates ? in.u8() % 8 : 0;
          // 0,6,7 deliver; 1 drop; 2 trim; 3 ECN CE; 4 hold (reordered, delivered later);
          // 5 duplicate.
          if (fate == 1) continue;
          wire::TransportPacket p = tx.pkt;
          uint8_t ecn = wire::kEcnEct0, dscp = wire::kDscpData;
          if (fate == 2 && p.payload_len > 0) {
            p.payload = nullptr;
            p.payload_len = 0;
            dscp = wire::kDscpTrimmed;
          }
          if (fate == 3) ecn = wire::kEcnCe;
          std::vector<uint8_t> b;
          if (!encode_to(envelope(p, ecn, dscp), b)) violation("engine sent an unencodable packet");
          add_template(b, 1 - i);
          if (fate == 4) {
            held_.push_back(Template{std::move(b), 1 - i});
            if (held_.size() > 64) held_.pop_front();
          } else {
            deliver_bytes(1 - i, b, tx.port, false);
            if (fate == 5) {
              settle();
              deliver_bytes(1 - i, b, tx.port, false);
            }
          }
          settle();
        }
      }
      if (!any) break;
    }
  }

  void release_held() {
    while (!held_.empty()) {
      Template t = std::move(held_.back());  // newest first: reordering
      held_.pop_back();
      deliver_bytes(t.to, t.bytes, 0, false);
      settle();
    }
  }

  void advance(Time dt) {
    now_ += dt;
    for (int i = 0; i < 2; ++i) {
      if (side_[i].eng->next_deadline() <= now_) side_[i].eng->on_timer(now_);
    }
    settle();
  }

  // ---- the two modes --------------------------------------------------------------------
  void run_raw(Input& in) {
    for (int step = 0; step < kMaxSteps && !in.empty(); ++step) {
      const uint8_t ctl = in.u8();
      const size_t len = std::min<size_t>(in.u16(), kMaxDatagram);
      deliver_bytes(ctl & 1, in.take(len), static_cast<uint8_t>(ctl >> 3));
      settle();
      if (ctl & 2) pump(in, false);
      if (ctl & 4) advance(us(1) << ((ctl >> 3) & 15));
    }
  }

  void run_ops(Input& in) {
    for (int step = 0; step < kMaxSteps && !in.empty(); ++step) {
      const uint8_t op = in.u8();
      switch (op % 8) {
        case 0: {  // raw datagram
          const uint8_t ctl = in.u8();
          const size_t len = std::min<size_t>(in.u16(), kMaxDatagram);
          deliver_bytes(ctl & 1, in.take(len), static_cast<uint8_t>(ctl >> 1));
          break;
        }
        case 1: {  // mutate a template
          const Template& t = templates_[in.u8() % templates_.size()];
          std::vector<uint8_t> b = t.bytes;
          const uint8_t ctl = in.u8();
          const int nmut = ctl & 15;
          for (int k = 0; k < nmut; ++k) {
            const uint16_t off = in.u16();
            const uint8_t v = in.u8();
            if (b.empty()) break;
            uint8_t& x = b[off % b.size()];
            if (off & 0x8000) {
              x ^= static_cast<uint8_t>(v | 1);
            } else {
              x = v;
            }
          }
          if (ctl & 0x10) b.resize(b.size() - std::min<size_t>(b.size(), in.u8()));  // truncate
          const int to = (ctl & 0x20) ? 1 - t.to : t.to;
          const uint8_t port = static_cast<uint8_t>(ctl >> 6);
          if (ctl & 0x80) {
            deliver_unchecked(to, b, port);
          } else {
            deliver_bytes(to, b, port);
          }
          break;
        }
        case 2:
          pump(in, (op & 8) != 0);
          break;
        case 3:
          release_held();
          break;
        case 4: {  // time: (n + 1) << scale ns
          const uint8_t n = in.u8();
          advance(ns(static_cast<uint64_t>(n) + 1) << (in.u8() % 24));
          break;
        }
        case 5: {  // more work
          const int i = (op >> 3) & 1;
          const uint8_t kind = in.u8();
          if (kind & 1) {
            post_recv(i);
          } else {
            const uint64_t local_off = static_cast<uint64_t>(in.u8()) * 16;
            const uint64_t len = static_cast<uint64_t>(in.u16()) % (kBufBytes + 64);
            const uint64_t remote_off = static_cast<uint64_t>(in.u16()) % (kBufBytes + 512);
            post_write(i, local_off, len, remote_off, (kind & 2) != 0);
          }
          break;
        }
        case 6: {  // ports and paths
          const int i = (op >> 3) & 1;
          const uint8_t v = in.u8();
          if (v & 1) {
            side_[i].eng->set_port_up(now_, static_cast<uint8_t>((v >> 1) % kPorts), (v & 2) != 0);
          } else {
            (void)side_[i].eng->set_path_denied(now_, side_[i].qpn, (v >> 2) % (kEvs + 1),
                                                (v & 2) != 0);
          }
          break;
        }
        case 7: {  // QP state changes (ERR flushes everything)
          const int i = (op >> 3) & 1;
          if ((op >> 4) == 1) {
            (void)side_[i].eng->modify_qp(now_, side_[i].qpn, QpState::kErr, QpAttr{});
          } else {
            advance(ms(1));
          }
          break;
        }
      }
      settle();
    }
  }

  // ---- invariants -------------------------------------------------------------------------
  void settle() {
    for (int i = 0; i < 2; ++i) {
      Side& s = side_[i];
      Completion c;
      while (s.eng->poll_completion(c)) {
        ++s.completions;
        if (c.qpn != s.qpn) violation("completion for an unknown QP", c.qpn, s.qpn);
        std::deque<uint64_t>& q = c.opcode == WcOpcode::kRecvImm ? s.recvs : s.sends;
        if (q.empty()) violation("completion without an outstanding WR", c.wr_id, i);
        if (q.front() != c.wr_id)
          violation("completion out of order or unknown", c.wr_id, q.front());
        q.pop_front();
        if (c.opcode != WcOpcode::kRecvImm && c.status == WcStatus::kSuccess) {
          check_placed(i, c.wr_id);
        }
      }
      Event e;
      while (s.eng->poll_event(e)) {
      }
    }
    check();
  }

  // A WRITE that completed successfully at its requester has been placed at the responder:
  // when only genuine packets (dropped, trimmed, marked, duplicated, reordered, delayed, but
  // never forged) reached both engines, and no other WRITE of that side ever overlapped its
  // destination range, the range holds exactly the source bytes.
  void check_placed(int i, uint64_t wr_id) const {
    const Side& s = side_[i];
    const Side& peer = side_[1 - i];
    if (s.forged || peer.forged) return;
    const Side::Range* w = nullptr;
    for (const Side::Range& r : s.writes) {
      if (r.wr_id == wr_id) w = &r;
    }
    if (!w || w->len == 0) return;
    for (const Side::Range& r : s.writes) {
      if (r.wr_id != wr_id && r.len && r.remote_off < w->remote_off + w->len &&
          w->remote_off < r.remote_off + r.len) {
        return;
      }
    }
    if (w->remote_off + w->len > kBufBytes) {
      violation("WRITE outside the peer's region completed successfully", wr_id, i);
    }
    const uint8_t* want = s.src.bytes.data() + kGuard + w->local_off;
    const uint8_t* got = peer.dst.bytes.data() + kGuard + w->remote_off;
    if (std::memcmp(want, got, w->len) != 0) {
      violation("WRITE completed successfully but its bytes are not in place", wr_id, i);
    }
  }

  void check() const {
    for (int i = 0; i < 2; ++i) {
      const Side& s = side_[i];
      s.dst.check(i == 0 ? "A destination guard bytes changed"
                         : "B destination guard bytes changed");
      // memcmp, not vector !=: the instrumented byte loop would trace every byte, every step.
      if (std::memcmp(s.src.bytes.data(), s.src_copy.data(), s.src_copy.size()) != 0)
        violation("source buffer (local-only region) changed", i, 0);
      const EngineCounters& c = s.eng->counters();
      if (s.completions > s.posted)
        violation("more completions than posted WRs", s.completions, s.posted);
      if (c.completions != s.completions) {
        violation("completion counter disagrees with completions polled", c.completions,
                  s.completions);
      }
      if (c.completions_dropped) violation("completion dropped", c.completions_dropped, 0);
      if (c.max_outstanding_psns > 128u * kMpr) {
        violation("requester exceeded MPR", c.max_outstanding_psns, 128u * kMpr);
      }
      if (c.max_outstanding_wimm > kMaxWimm) {
        violation("requester exceeded max_wimm", c.max_outstanding_wimm, kMaxWimm);
      }
    }
  }

  Side side_[2];
  std::vector<Template> templates_;
  std::array<uint32_t, 4> template_ids_{};  // QPNs and rkeys the crafted templates name
  size_t dyn_next_ = 0;
  std::deque<Template> held_;
  Time now_ = us(1);
};

}  // namespace
}  // namespace mrc

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("MRC_FUZZ_QP_WRITE_SEEDS")) {
    mrc::Harness h;
    int n = 0;
    for (const auto& s : h.seeds()) {
      const std::string path = std::string(dir) + "/seed-" + std::to_string(n++);
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f) std::abort();
      std::fwrite(s.data(), 1, s.size(), f);
      std::fclose(f);
    }
    std::fprintf(stderr, "wrote %d seeds to %s\n", n, dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One harness for the whole campaign, reset before each input (see Harness::reset).
  static mrc::Harness* h = new mrc::Harness;
  h->reset();
  h->run(data, size);
  return 0;
}
