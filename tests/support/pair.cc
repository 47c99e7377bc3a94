#include "support/pair.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace mrc::testnet {

uint8_t guard_byte(uint64_t i) {
  return static_cast<uint8_t>(0xA5 ^ (i * 0x3B) ^ (i >> 8));
}

GuardedRegion::GuardedRegion(uint64_t length, uint64_t guard, uint64_t iova)
    : backing_(length + 2 * guard), guard_(guard), length_(length), iova_(iova) {
  for (uint64_t i = 0; i < backing_.size(); ++i)
    backing_[i] = guard_byte(i);
}

int64_t GuardedRegion::first_bad_guard() const {
  for (uint64_t i = 0; i < guard_; ++i)
    if (backing_[i] != guard_byte(i)) return static_cast<int64_t>(i);
  for (uint64_t i = guard_ + length_; i < backing_.size(); ++i)
    if (backing_[i] != guard_byte(i)) return static_cast<int64_t>(i);
  return -1;
}

EngineConfig pair_engine_config(const PairConfig& cfg, uint64_t seed) {
  EngineConfig e;
  e.num_ports = cfg.planes;
  e.seed = seed;
  e.max_qps = 16;
  e.completion_capacity = 4096;  // drained after every input: never more than a few pending
  e.event_capacity = 4096;
  e.fabric_rtt = cfg.fabric_rtt;
  e.probe_budget_interval = cfg.probe_budget_interval;
  e.probe_budget_burst = cfg.probe_budget_burst;
  return e;
}

namespace {

Result<ev::EvProfile> make_profile(const PairConfig& cfg) {
  const int ports = cfg.planes;
  switch (cfg.ev_format) {
    case ev::FormatMode::kSrv6: {
      // One generated uSID (the spine) per path: enough bits for the EVs of one plane.
      const uint32_t per_plane = (cfg.evs + cfg.planes - 1) / cfg.planes;
      int bits = 1;
      while (bits < 16 && (1u << bits) < per_plane)
        ++bits;
      return ev::make_srv6_profile(0xFC00'0000, 1, bits, cfg.evs, ports, cfg.ev_min_active);
    }
    case ev::FormatMode::kUdp:
      return ev::make_udp_profile(cfg.evs, ports, cfg.ev_min_active);
    case ev::FormatMode::kStev:
      break;
  }
  return ev::make_stev_profile(cfg.evs, ports, cfg.ev_min_active);
}

Time derived_base_rtt(const FaultNet& net, const PairConfig& cfg) {
  const NetConfig& n = net.config();
  // Unloaded: data serialized at the sender and the switch egress, the ACK likewise, two
  // propagation delays, worst-case jitter, and the responder's ACK coalescing delay.
  const Time data = net.serialization_time(cfg.path_mtu + 120, n.link_bps);
  const Time ack = net.serialization_time(200, n.link_bps);
  return 2 * n.delay + n.jitter + 2 * data + 2 * ack + us(2);
}

}  // namespace

Result<QpAttr> pair_qp_attr(const FaultNet& net, const PairConfig& cfg, bool side_a, HostId peer,
                            uint32_t dest_qpn) {
  auto profile = make_profile(cfg);
  if (!profile) return fail(profile.error());
  auto evs = ev::expand_all(*profile);
  if (!evs) return fail(evs.error());
  QpAttr a;
  a.transport = cfg.transport;
  for (size_t i = 0; i < evs->size(); ++i) {
    PathDesc d;
    d.ev = (*evs)[i];
    d.port = profile->entries[i].port;
    d.state = profile->entries[i].state;
    a.paths.push_back(d);
  }
  if (cfg.transport == TransportMode::kRoce) a.paths.resize(1);  // one ECMP path
  a.ev_min_active = cfg.transport == TransportMode::kRoce ? 1 : cfg.ev_min_active;
  a.path_policy = cfg.path_policy;

  const uint64_t link = net.config().link_bps;
  a.cc.algorithm = cfg.cc;
  a.cc.nscc.base_rtt = cfg.base_rtt != 0 ? cfg.base_rtt : derived_base_rtt(net, cfg);
  a.cc.nscc.mtu = cfg.path_mtu;
  a.cc.nscc.link_bps = link * (cfg.transport == TransportMode::kRoce ? 1 : cfg.planes);
  a.cc.dcqcn.line_rate_bps = link;
  a.cc.dcqcn.mtu = cfg.path_mtu;
  a.cc.fixed_window = cfg.fixed_window;

  a.dest_qpn = dest_qpn;
  a.peer = static_cast<uint32_t>(peer);
  a.rq_psn = side_a ? cfg.psn_b : cfg.psn_a;
  a.sq_psn = side_a ? cfg.psn_a : cfg.psn_b;
  a.path_mtu = cfg.path_mtu;
  a.max_wimm_dest = cfg.max_wimm_dest;
  a.mpr_dest = cfg.mpr_dest;
  a.max_wimm = cfg.max_wimm;
  a.mpr = cfg.mpr;
  a.timeout = cfg.timeout;
  a.retry_linear = cfg.retry_linear;
  a.retry_exp = cfg.retry_exp;
  a.reorder_window = cfg.reorder_window;
  return a;
}

Result<Pair> connect_pair(FaultNet& net, HostId a, HostId b, const PairConfig& cfg) {
  Pair p;
  p.cfg = cfg;
  p.a.host = a;
  p.b.host = b;
  p.a.region = GuardedRegion(cfg.region_bytes, cfg.guard_bytes, cfg.iova_a);
  p.b.region = GuardedRegion(cfg.region_bytes, cfg.guard_bytes, cfg.iova_b);
  const QpCreateAttr create{cfg.sq_depth, cfg.rq_depth, true};
  for (QpEnd* end : {&p.a, &p.b}) {
    Engine& e = net.engine(end->host);
    auto keys = e.register_memory(end->region.data(), end->region.length(), end->region.iova(),
                                  kLocalWrite | kRemoteWrite);
    if (!keys) return fail(keys.error());
    end->region.keys = *keys;
    auto qpn = e.create_qp(create);
    if (!qpn) return fail(qpn.error());
    end->qpn = *qpn;
  }
  const Time now = net.now();
  for (int side = 0; side < 2; ++side) {
    QpEnd& self = side == 0 ? p.a : p.b;
    const QpEnd& peer = side == 0 ? p.b : p.a;
    auto attr = pair_qp_attr(net, cfg, side == 0, peer.host, peer.qpn);
    if (!attr) return fail(attr.error());
    Engine& e = net.engine(self.host);
    for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
      auto st = e.modify_qp(now, self.qpn, s, *attr);
      if (!st) return fail(st.error());
    }
    net.set_ev_format(self.host, self.qpn, cfg.ev_format);
  }
  net.kick(a);
  net.kick(b);
  return p;
}

Result<PairNet> make_pair_net(const NetConfig& net_cfg, const PairConfig& cfg) {
  PairNet pn;
  pn.net = std::make_unique<FaultNet>(net_cfg);
  const HostId a = pn.net->add_engine(pair_engine_config(cfg, net_cfg.seed * 2 + 1));
  const HostId b = pn.net->add_engine(pair_engine_config(cfg, net_cfg.seed * 2 + 2));
  auto pair = connect_pair(*pn.net, a, b, cfg);
  if (!pair) return fail(pair.error());
  pn.pair = std::move(*pair);
  return pn;
}

uint64_t region_bytes_for(const Workload& w) {
  uint64_t total = w.gap_bytes;
  for (const MessageSpec& m : w.messages)
    total += m.size + w.gap_bytes;
  return std::max<uint64_t>(total, 1);
}

// ---- run_workload ------------------------------------------------------------------------------

namespace {

constexpr uint64_t kRecvWrIdBase = 0x8000'0000'0000'0000ull;

class WorkloadRun {
 public:
  WorkloadRun(FaultNet& net, Pair& pair, const Workload& w) : net_(net), pair_(pair), w_(w) {
    imm_salt_ = static_cast<uint32_t>((w.data_seed * 0x9E3779B97F4A7C15ull) >> 32);
  }

  // Lays out memory, posts receives and the first writes. False if the workload does not
  // fit (a failure is recorded).
  bool start();
  bool owns(HostId h, const Completion& c) const;
  void on_completion(HostId h, const Completion& c);
  void on_event(HostId h, const Event& e);
  bool done() const;
  WorkloadResult finish(bool started, RunStatus status);

 private:
  Engine& ea() { return net_.engine(pair_.a.host); }
  Engine& eb() { return net_.engine(pair_.b.host); }
  void fail_msg(std::string s) {
    if (w_.verbose) std::fprintf(stderr, "[t=%.3fus] %s\n", net_.now() / 1e6, s.c_str());
    r_.failures.push_back(std::move(s));
  }
  bool placed(size_t i) const {
    const WrOutcome& o = r_.wrs[i];
    return o.size == 0 || std::memcmp(pair_.b.region.data() + o.offset,
                                      pair_.a.region.data() + o.offset, o.size) == 0;
  }
  bool layout();
  void post_recvs();
  void post_more();
  void on_requester_completion(const Completion& c);
  void on_recv_completion(const Completion& c);
  void final_checks();

  FaultNet& net_;
  Pair& pair_;
  const Workload& w_;
  WorkloadResult r_;
  uint32_t imm_salt_ = 0;
  size_t next_post_ = 0;
  bool posting_stopped_ = false;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  size_t next_in_order_ = 0;      // requester completions must follow posting order
  std::vector<size_t> imm_msgs_;  // indices of WRITE_IMM messages, in order
  size_t next_imm_ = 0;           // next expected immediate (index into imm_msgs_)
  size_t verified_prefix_ = 0;    // messages [0, prefix) checked placed
  uint64_t imm_successes_ = 0;
  std::vector<uint8_t> src_copy_;     // A's region before the run
  std::vector<uint8_t> dst_initial_;  // B's region before the run
};

bool WorkloadRun::layout() {
  const uint64_t need = region_bytes_for(w_);
  if (pair_.a.region.length() < need || pair_.b.region.length() < need) {
    fail_msg("workload needs " + std::to_string(need) + " bytes per region, regions hold " +
             std::to_string(std::min(pair_.a.region.length(), pair_.b.region.length())));
    return false;
  }
  Rng rng(w_.data_seed);
  uint8_t* src = pair_.a.region.data();
  uint8_t* dst = pair_.b.region.data();
  const uint64_t len = pair_.a.region.length();
  // Source: random bytes everywhere. Destination: the guard pattern in gaps and the complement
  // of the source in message areas, so every byte that is not placed differs from the source.
  for (uint64_t i = 0; i < len; i += 8) {
    const uint64_t v = rng.next();
    for (uint64_t k = 0; k < 8 && i + k < len; ++k)
      src[i + k] = static_cast<uint8_t>(v >> (8 * k));
  }
  for (uint64_t i = 0; i < pair_.b.region.length(); ++i)
    dst[i] = guard_byte(i * 7 + 3);
  uint64_t off = w_.gap_bytes;
  r_.wrs.resize(w_.messages.size());
  for (size_t i = 0; i < w_.messages.size(); ++i) {
    WrOutcome& o = r_.wrs[i];
    o.wr_id = i;
    o.opcode = w_.messages[i].opcode;
    o.size = w_.messages[i].size;
    o.offset = off;
    for (uint64_t k = 0; k < o.size; ++k)
      dst[off + k] = static_cast<uint8_t>(~src[off + k]);
    if (o.opcode == WrOpcode::kWriteImm) imm_msgs_.push_back(i);
    off += o.size + w_.gap_bytes;
  }
  src_copy_.assign(src, src + len);
  dst_initial_.assign(dst, dst + pair_.b.region.length());
  return true;
}

void WorkloadRun::post_recvs() {
  for (size_t k = 0; k < imm_msgs_.size(); ++k) {
    auto st = eb().post_recv(pair_.b.qpn, kRecvWrIdBase | k);
    if (!st) {
      fail_msg("post_recv " + std::to_string(k) +
               " failed: " + std::string(error_name(st.error())));
      break;
    }
  }
  net_.kick(pair_.b.host);
}

void WorkloadRun::post_more() {
  while (!posting_stopped_ && next_post_ < r_.wrs.size()) {
    WrOutcome& o = r_.wrs[next_post_];
    WriteWr wr;
    wr.wr_id = o.wr_id;
    wr.opcode = o.opcode;
    wr.lkey = pair_.a.region.keys.lkey;
    wr.local_addr = pair_.a.region.iova() + o.offset;
    wr.length = o.size;
    wr.remote_addr = pair_.b.region.iova() + o.offset;
    wr.rkey = pair_.b.region.keys.rkey;
    wr.imm = imm_salt_ ^ static_cast<uint32_t>(next_post_);
    auto st = ea().post_write(net_.now(), pair_.a.qpn, wr);
    if (!st) {
      if (st.error() == Error::kQueueFull) return;  // retried on the next completion
      auto state = ea().qp_state(pair_.a.qpn);
      if (!(state && *state == QpState::kErr))
        fail_msg("post_write " + std::to_string(next_post_) +
                 " failed: " + std::string(error_name(st.error())));
      posting_stopped_ = true;
      r_.unposted = r_.wrs.size() - next_post_;
      return;
    }
    o.posted = true;
    o.posted_at = net_.now();
    if (posted_ == 0) r_.start = net_.now();
    ++posted_;
    ++next_post_;
  }
}

void WorkloadRun::on_completion(HostId h, const Completion& c) {
  if (h == pair_.a.host && c.qpn == pair_.a.qpn && c.opcode != WcOpcode::kRecvImm) {
    on_requester_completion(c);
    post_more();  // the engine is being drained: posting here follows the calling sequence
  } else if (h == pair_.b.host && c.qpn == pair_.b.qpn && c.opcode == WcOpcode::kRecvImm) {
    on_recv_completion(c);
  } else {
    fail_msg("unexpected completion on host " + std::to_string(h) + " qpn " +
             std::to_string(c.qpn) + " wr_id " + std::to_string(c.wr_id));
  }
}

void WorkloadRun::on_requester_completion(const Completion& c) {
  if (c.wr_id >= r_.wrs.size() || !r_.wrs[c.wr_id].posted) {
    fail_msg("requester completion for unknown wr_id " + std::to_string(c.wr_id));
    return;
  }
  WrOutcome& o = r_.wrs[c.wr_id];
  r_.completion_order.push_back(c.wr_id);
  if (++o.completions > 1) {
    fail_msg("wr " + std::to_string(c.wr_id) + " completed " + std::to_string(o.completions) +
             " times (status " + wc_status_name(c.status) + ")");
    return;
  }
  ++completed_;
  if (c.wr_id != next_in_order_)
    fail_msg("requester completion out of order: wr " + std::to_string(c.wr_id) + " before wr " +
             std::to_string(next_in_order_));
  next_in_order_ = std::max<size_t>(next_in_order_, c.wr_id + 1);
  o.status = c.status;
  o.completed_at = net_.now();
  const WcOpcode want = o.opcode == WrOpcode::kWriteImm ? WcOpcode::kWriteImm : WcOpcode::kWrite;
  if (c.opcode != want) fail_msg("wr " + std::to_string(c.wr_id) + ": wrong completion opcode");
  if (c.status == WcStatus::kSuccess) {
    ++r_.successes;
    r_.end = net_.now();
    if (o.opcode == WrOpcode::kWriteImm) ++imm_successes_;
    if (!placed(c.wr_id))
      fail_msg("wr " + std::to_string(c.wr_id) + " (" + std::to_string(o.size) +
               " bytes) completed successfully before its data was placed");
  } else {
    ++r_.errors;
  }
}

void WorkloadRun::on_recv_completion(const Completion& c) {
  ++r_.recv_completions;
  r_.imm_order.push_back(c.imm);
  if (c.status != WcStatus::kSuccess) {
    fail_msg(std::string("receive completion with status ") + wc_status_name(c.status));
    return;
  }
  const uint32_t idx = c.imm ^ imm_salt_;
  if (idx >= r_.wrs.size() || r_.wrs[idx].opcode != WrOpcode::kWriteImm) {
    fail_msg("receive completion with unknown immediate " + std::to_string(c.imm));
    return;
  }
  WrOutcome& o = r_.wrs[idx];
  if (++o.recv_completions > 1) {
    fail_msg("immediate of wr " + std::to_string(idx) + " delivered " +
             std::to_string(o.recv_completions) + " times");
    return;
  }
  if (next_imm_ >= imm_msgs_.size() || imm_msgs_[next_imm_] != idx) {
    fail_msg("immediate of wr " + std::to_string(idx) + " out of order (expected wr " +
             (next_imm_ < imm_msgs_.size() ? std::to_string(imm_msgs_[next_imm_]) : "none") + ")");
  } else if (c.wr_id != (kRecvWrIdBase | next_imm_)) {
    fail_msg("immediate of wr " + std::to_string(idx) + " completed receive wr_id " +
             std::to_string(c.wr_id & ~kRecvWrIdBase) + ", expected " + std::to_string(next_imm_));
  }
  ++next_imm_;
  if (c.byte_len != o.size)
    fail_msg("receive completion of wr " + std::to_string(idx) + " says " +
             std::to_string(c.byte_len) + " bytes, message has " + std::to_string(o.size));
  // RC ordering: this message and every earlier one must be fully placed by now.
  for (; verified_prefix_ <= idx; ++verified_prefix_) {
    if (!placed(verified_prefix_))
      fail_msg("receive completion of wr " + std::to_string(idx) + " polled before wr " +
               std::to_string(verified_prefix_) + " was placed");
  }
}

bool WorkloadRun::done() const {
  const bool posting_done = posting_stopped_ || next_post_ == r_.wrs.size();
  return posting_done && completed_ == posted_ && r_.recv_completions >= imm_successes_;
}

void WorkloadRun::final_checks() {
  const uint8_t* src = pair_.a.region.data();
  const uint8_t* dst = pair_.b.region.data();
  // Completion counts.
  for (const WrOutcome& o : r_.wrs) {
    if (o.posted && o.completions == 0)
      fail_msg("wr " + std::to_string(o.wr_id) + " never completed");
    if (o.opcode == WrOpcode::kWriteImm && o.completions == 1 && o.status == WcStatus::kSuccess &&
        o.recv_completions == 0)
      fail_msg("wr " + std::to_string(o.wr_id) +
               " completed at the requester but its immediate never arrived");
  }
  // Destination bytes.
  uint64_t prev_end = 0;
  for (const WrOutcome& o : r_.wrs) {
    for (uint64_t i = prev_end; i < o.offset; ++i) {
      if (dst[i] != dst_initial_[i]) {
        fail_msg("destination gap byte at offset " + std::to_string(i) + " was overwritten");
        break;
      }
    }
    prev_end = o.offset + o.size;
    const bool ok = o.completions == 1 && o.status == WcStatus::kSuccess;
    if (ok) {
      if (std::memcmp(dst + o.offset, src + o.offset, o.size) == 0) {
        r_.bytes_verified += o.size;
      } else {
        fail_msg("wr " + std::to_string(o.wr_id) + ": destination differs from source");
      }
    } else {
      for (uint64_t k = 0; k < o.size; ++k) {
        const uint64_t i = o.offset + k;
        if (dst[i] != src[i] && dst[i] != dst_initial_[i]) {
          fail_msg("wr " + std::to_string(o.wr_id) + " (failed): foreign byte at +" +
                   std::to_string(k));
          break;
        }
      }
    }
  }
  for (uint64_t i = prev_end; i < pair_.b.region.length(); ++i) {
    if (dst[i] != dst_initial_[i]) {
      fail_msg("destination byte after the last message (offset " + std::to_string(i) +
               ") was overwritten");
      break;
    }
  }
  if (std::memcmp(src, src_copy_.data(), src_copy_.size()) != 0)
    fail_msg("the source region changed");
  if (int64_t g = pair_.a.region.first_bad_guard(); g >= 0)
    fail_msg("guard byte " + std::to_string(g) + " around A's region changed");
  if (int64_t g = pair_.b.region.first_bad_guard(); g >= 0)
    fail_msg("guard byte " + std::to_string(g) + " around B's region changed");

  // Engine limits and contract.
  const PairConfig& cfg = pair_.cfg;
  const uint64_t psn_limit = 128ull * cfg.mpr;
  for (const auto& [name, c] : {std::pair{"A", &r_.a}, std::pair{"B", &r_.b}}) {
    if (c->max_outstanding_psns > psn_limit)
      fail_msg(std::string(name) + ": max_outstanding_psns " +
               std::to_string(c->max_outstanding_psns) + " > MPR limit " +
               std::to_string(psn_limit));
    if (c->max_outstanding_wimm > cfg.max_wimm)
      fail_msg(std::string(name) + ": max_outstanding_wimm " +
               std::to_string(c->max_outstanding_wimm) + " > max_wimm " +
               std::to_string(cfg.max_wimm));
    if (c->completions_dropped != 0) fail_msg(std::string(name) + ": completions dropped");
  }
  if (r_.net.tx_port_violations != 0) fail_msg("engine sent on a port outside port_mask");
  if (r_.net.encode_errors != 0) fail_msg("engine produced a packet the codec refused");
}

bool WorkloadRun::start() {
  if (!layout()) return false;
  post_recvs();
  post_more();
  net_.kick(pair_.a.host);
  return true;
}

bool WorkloadRun::owns(HostId h, const Completion& c) const {
  return (h == pair_.a.host && c.qpn == pair_.a.qpn) || (h == pair_.b.host && c.qpn == pair_.b.qpn);
}

void WorkloadRun::on_event(HostId h, const Event& e) {
  // Port changes concern every QP of the host; other events name their QP.
  const bool mine =
      (h == pair_.a.host && (e.qpn == pair_.a.qpn || e.type == EventType::kPortChange)) ||
      (h == pair_.b.host && (e.qpn == pair_.b.qpn || e.type == EventType::kPortChange));
  if (mine) r_.events.emplace_back(h, e);
}

WorkloadResult WorkloadRun::finish(bool started, RunStatus status) {
  r_.run_status = status;
  if (started) {
    if (done()) {
      r_.all_completed = true;
    } else {
      fail_msg(std::string("did not finish (") + run_status_name(status) + " at " +
               std::to_string(net_.now() / kPicosPerMicro) + " us): posted " +
               std::to_string(posted_) + ", completed " + std::to_string(completed_) +
               ", receives " + std::to_string(r_.recv_completions) + "/" +
               std::to_string(imm_successes_));
    }
    if (status == RunStatus::kLivelock) fail_msg("an engine livelocked its timer");
  }
  r_.a = ea().counters();
  r_.b = eb().counters();
  r_.net = net_.counters();
  if (auto st = ea().qp_state(pair_.a.qpn)) r_.final_a = *st;
  if (auto st = eb().qp_state(pair_.b.qpn)) r_.final_b = *st;
  if (started && !r_.wrs.empty()) final_checks();
  if (r_.end > r_.start) {
    uint64_t bytes = 0;
    for (const WrOutcome& o : r_.wrs)
      if (o.completions == 1 && o.status == WcStatus::kSuccess) bytes += o.size;
    r_.goodput_gbps =
        static_cast<double>(bytes) * 8.0 * 1000.0 / static_cast<double>(r_.end - r_.start);
  }
  return std::move(r_);
}

}  // namespace

std::vector<WorkloadResult> run_workloads(FaultNet& net, std::span<Pair* const> pairs,
                                          std::span<const Workload> workloads, Time time_limit) {
  std::vector<std::unique_ptr<WorkloadRun>> runs;
  for (size_t i = 0; i < pairs.size() && i < workloads.size(); ++i)
    runs.push_back(std::make_unique<WorkloadRun>(net, *pairs[i], workloads[i]));
  net.on_completion([&runs](HostId h, const Completion& c) {
    for (auto& r : runs) {
      if (r->owns(h, c)) return r->on_completion(h, c);
    }
    if (!runs.empty()) runs.front()->on_completion(h, c);  // reported as unexpected
  });
  net.on_event([&runs](HostId h, const Event& e) {
    for (auto& r : runs)
      r->on_event(h, e);
  });
  std::vector<bool> started;
  for (auto& r : runs)
    started.push_back(r->start());
  auto all_done = [&] {
    for (size_t i = 0; i < runs.size(); ++i)
      if (started[i] && !runs[i]->done()) return false;
    return true;
  };
  RunStatus status = net.run_until(time_limit, all_done);
  if (all_done()) {
    // Keep going a little: a late duplicate completion must not go unnoticed.
    Time linger = 0;
    for (const Workload& w : workloads)
      linger = std::max(linger, w.linger);
    const RunStatus s = net.run_until(std::min(time_limit, net.now() + linger));
    if (s == RunStatus::kLivelock || s == RunStatus::kEventLimit) status = s;
  }
  std::vector<WorkloadResult> results;
  for (size_t i = 0; i < runs.size(); ++i)
    results.push_back(runs[i]->finish(started[i], status));
  net.on_completion({});
  net.on_event({});
  return results;
}

WorkloadResult run_workload(FaultNet& net, Pair& pair, const Workload& w, Time time_limit) {
  Pair* p = &pair;
  return std::move(run_workloads(net, std::span<Pair* const>(&p, 1),
                                 std::span<const Workload>(&w, 1), time_limit)
                       .front());
}

std::string describe(const EngineCounters& c) {
  std::ostringstream os;
  auto f = [&](const char* n, uint64_t v) {
    if (v != 0) os << n << "=" << v << " ";
  };
  f("data_sent", c.data_sent);
  f("retransmits", c.retransmits);
  f("acks_sent", c.acks_sent);
  f("nacks_sent", c.nacks_sent);
  f("probes_sent", c.probes_sent);
  f("probe_replies_sent", c.probe_replies_sent);
  f("cnps_sent", c.cnps_sent);
  f("data_received", c.data_received);
  f("duplicates", c.duplicates);
  f("trimmed_received", c.trimmed_received);
  f("ecn_received", c.ecn_received);
  f("bytes_placed", c.bytes_placed);
  f("losses_detected", c.losses_detected);
  f("timeouts", c.timeouts);
  f("trim_nacks_received", c.trim_nacks_received);
  f("ev_state_changes", c.ev_state_changes);
  f("ev_swaps", c.ev_swaps);
  f("ack_ev_changes", c.ack_ev_changes);
  f("reverse_probes_sent", c.reverse_probes_sent);
  f("reverse_probes_unanswered", c.reverse_probes_unanswered);
  f("probes_deferred", c.probes_deferred);
  f("peer_port_changes", c.peer_port_changes);
  f("completions", c.completions);
  f("completion_errors", c.completion_errors);
  f("completions_dropped", c.completions_dropped);
  f("events_dropped", c.events_dropped);
  for (int i = 0; i < static_cast<int>(DropReason::kCount); ++i)
    if (c.drops[i] != 0)
      os << "drop." << drop_reason_name(static_cast<DropReason>(i)) << "=" << c.drops[i] << " ";
  f("max_outstanding_psns", c.max_outstanding_psns);
  f("max_outstanding_wimm", c.max_outstanding_wimm);
  return os.str();
}

std::string describe(const NetCounters& c) {
  std::ostringstream os;
  auto f = [&](const char* n, uint64_t v) {
    if (v != 0) os << n << "=" << v << " ";
  };
  f("sent", c.sent);
  f("delivered", c.delivered);
  f("rx_rejected", c.rx_rejected);
  f("dropped_loss", c.dropped_loss);
  f("dropped_scripted", c.dropped_scripted);
  f("dropped_blackhole", c.dropped_blackhole);
  f("dropped_port_down", c.dropped_port_down);
  f("dropped_queue", c.dropped_queue);
  f("dropped_no_route", c.dropped_no_route);
  f("trimmed", c.trimmed);
  f("ecn_marked", c.ecn_marked);
  f("duplicated", c.duplicated);
  f("corrupted", c.corrupted);
  f("injected", c.injected);
  f("timers_fired", c.timers_fired);
  f("port_changes", c.port_changes);
  f("encode_errors", c.encode_errors);
  f("tx_port_violations", c.tx_port_violations);
  f("max_queue_bytes", c.max_queue_bytes);
  f("events", c.events);
  return os.str();
}

}  // namespace mrc::testnet
