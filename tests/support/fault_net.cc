#include "support/fault_net.h"

#include <algorithm>
#include <cassert>

#include "wire/codec.h"

namespace mrc::testnet {

PacketKind packet_kind(wire::Opcode op) {
  switch (op) {
    case wire::Opcode::kWriteOnly:
    case wire::Opcode::kWriteOnlyImm:
      return PacketKind::kData;
    case wire::Opcode::kAck:
      return PacketKind::kAck;
    case wire::Opcode::kTrimNack:
      return PacketKind::kTrimNack;
    case wire::Opcode::kProbe:
      return PacketKind::kProbe;
    case wire::Opcode::kProbeReply:
      return PacketKind::kProbeReply;
    case wire::Opcode::kCnp:
      return PacketKind::kCnp;
  }
  return PacketKind::kOther;
}

const char* packet_kind_name(PacketKind k) {
  switch (k) {
    case PacketKind::kData:
      return "data";
    case PacketKind::kAck:
      return "ack";
    case PacketKind::kTrimNack:
      return "trim_nack";
    case PacketKind::kProbe:
      return "probe";
    case PacketKind::kProbeReply:
      return "probe_reply";
    case PacketKind::kCnp:
      return "cnp";
    case PacketKind::kOther:
      return "other";
    case PacketKind::kAny:
      return "any";
  }
  return "unknown";
}

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::kStopped:
      return "stopped";
    case RunStatus::kIdle:
      return "idle";
    case RunStatus::kTimeLimit:
      return "time_limit";
    case RunStatus::kEventLimit:
      return "event_limit";
    case RunStatus::kLivelock:
      return "livelock";
  }
  return "unknown";
}

namespace {

// Byte offsets inside the fixed IPv6 header (RFC 8200): version(4) | traffic class(8) |
// flow label(20). The traffic class straddles bytes 0 and 1; ECN is its low two bits.
constexpr size_t kTcHighByte = 0;
constexpr size_t kTcLowByte = 1;

uint8_t traffic_class_of(std::span<const uint8_t> b) {
  return static_cast<uint8_t>(((b[kTcHighByte] & 0x0F) << 4) | (b[kTcLowByte] >> 4));
}

void set_traffic_class(std::span<uint8_t> b, uint8_t tc) {
  b[kTcHighByte] = static_cast<uint8_t>((b[kTcHighByte] & 0xF0) | (tc >> 4));
  b[kTcLowByte] = static_cast<uint8_t>((b[kTcLowByte] & 0x0F) | ((tc & 0x0F) << 4));
}

uint64_t bytes_in(Time duration, uint64_t bps) {
  return static_cast<uint64_t>(static_cast<__uint128_t>(duration) * bps / (8 * kPicosPerSecond));
}

}  // namespace

FaultNet::FaultNet(const NetConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {}
FaultNet::~FaultNet() = default;

HostId FaultNet::add_endpoint(std::unique_ptr<Endpoint> ep, uint8_t num_ports) {
  Host h;
  h.engine = ep->engine();
  h.ep = std::move(ep);
  h.num_ports = num_ports;
  h.ports.resize(num_ports);
  for (Port& p : h.ports)
    p.rate_bps = cfg_.link_bps;
  hosts_.push_back(std::move(h));
  return static_cast<HostId>(hosts_.size() - 1);
}

void FaultNet::set_port_rate(HostId h, uint8_t port, uint64_t bps) {
  hosts_[idx(h)].ports.at(port).rate_bps = bps;
}

uint64_t FaultNet::port_rate(HostId h, uint8_t port) const {
  return hosts_[idx(h)].ports.at(port).rate_bps;
}

void FaultNet::set_ev_format(HostId h, uint32_t qpn, ev::FormatMode mode) {
  hosts_[idx(h)].formats[qpn] = mode;
}

wire::Ipv6Addr FaultNet::address(HostId h, uint8_t port) {
  wire::Ipv6Addr a{};
  a[0] = 0xfd;
  a[7] = port;
  const uint32_t id = static_cast<uint32_t>(h) + 1;
  a[12] = static_cast<uint8_t>(id >> 24);
  a[13] = static_cast<uint8_t>(id >> 16);
  a[14] = static_cast<uint8_t>(id >> 8);
  a[15] = static_cast<uint8_t>(id);
  return a;
}

Time FaultNet::serialization_time(uint64_t bytes, uint64_t bps) const {
  if (bps == 0) return 0;
  const __uint128_t bits = static_cast<__uint128_t>(bytes + cfg_.framing_bytes) * 8;
  return static_cast<Time>((bits * kPicosPerSecond + bps - 1) / bps);
}

bool FaultNet::port_up(HostId h, uint8_t port) const {
  const Host& host = hosts_[idx(h)];
  return port < host.num_ports && host.ports[port].up;
}

PathCounters FaultNet::path_counter(int from_host, int port, int ev_index) const {
  auto it = path_counters_.find({from_host, port, ev_index});
  return it == path_counters_.end() ? PathCounters{} : it->second;
}

// ---- Faults ----------------------------------------------------------------------------------

void FaultNet::add_path_fault(const PathFault& f) {
  path_faults_.push_back(f);
}

void FaultNet::blackhole(int port, int ev_index, Time from, Time until) {
  PathFault f;
  f.match.port = port;
  f.match.ev_index = ev_index;
  f.from = from;
  f.until = until;
  f.blackhole = true;
  add_path_fault(f);
}

void FaultNet::add_scripted(const ScriptedFault& f) {
  scripted_.push_back(Scripted{f, 0, {}});
}

void FaultNet::add_port_fault(const PortFault& f) {
  for (int h = 0; h < num_hosts(); ++h) {
    if (f.host != -1 && f.host != h) continue;
    if (f.port >= hosts_[idx(h)].num_ports) continue;
    push(std::max(f.down_at, now_), EvType::kPortChange, h, f.port, 0);
    if (f.up_at != kNever) push(std::max(f.up_at, now_), EvType::kPortChange, h, f.port, 1);
  }
}

void FaultNet::add_flap(const PortFlap& f) {
  Time t = f.start;
  for (uint32_t i = 0; i < f.cycles; ++i) {
    add_port_fault(PortFault{f.host, f.port, t, t + f.down_for});
    t += f.down_for + f.up_for;
  }
}

bool FaultNet::matches(const PacketMatch& m, const Packet& p) const {
  return (m.from_host == -1 || m.from_host == p.from) && (m.to_host == -1 || m.to_host == p.to) &&
         (m.port == -1 || m.port == p.port) && (m.ev_index == -1 || m.ev_index == p.ev_index) &&
         (m.kind == PacketKind::kAny || m.kind == p.kind);
}

// ---- Event queue -------------------------------------------------------------------------------

void FaultNet::push(Time at, EvType type, int host, uint8_t port, uint64_t arg) {
  heap_.push_back(SimEvent{at, seq_++, type, host, port, arg});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

void FaultNet::schedule(Time at, std::function<void(Time)> fn) {
  uint64_t slot;
  if (!free_callbacks_.empty()) {
    slot = free_callbacks_.back();
    free_callbacks_.pop_back();
    callbacks_[slot] = std::move(fn);
  } else {
    slot = callbacks_.size();
    callbacks_.push_back(std::move(fn));
  }
  push(std::max(at, now_), EvType::kCallback, -1, 0, slot);
}

void FaultNet::inject(Time at, HostId to, uint8_t port, std::vector<uint8_t> bytes) {
  const uint32_t slot = alloc_packet();
  Packet& p = packets_[slot];
  p.bytes = std::move(bytes);
  p.from = -1;
  p.to = to;
  p.port = port;
  p.ev_index = -1;
  auto dg = wire::decode(p.bytes, wire::DecodeOptions{.verify_icrc = false});
  p.kind = dg ? packet_kind(dg->pkt.bth.opcode) : PacketKind::kOther;
  ++counters_.injected;
  push(std::max(at, now_), EvType::kDeliver, to, port, slot);
}

uint32_t FaultNet::alloc_packet() {
  if (!free_packets_.empty()) {
    const uint32_t slot = free_packets_.back();
    free_packets_.pop_back();
    Packet& p = packets_[slot];
    p.trimmed = false;
    p.psn = 0;
    p.transport_offset = 0;
    return slot;
  }
  packets_.emplace_back();
  return static_cast<uint32_t>(packets_.size() - 1);
}

void FaultNet::free_packet(uint32_t slot) {
  free_packets_.push_back(slot);
}

RunStatus FaultNet::run_until(Time limit, const std::function<bool()>& stop) {
  if (stop && stop()) return RunStatus::kStopped;
  uint64_t processed = 0;
  while (!heap_.empty()) {
    if (livelock_) return RunStatus::kLivelock;
    if (heap_.front().at > limit) {
      now_ = std::max(now_, limit);
      return RunStatus::kTimeLimit;
    }
    if (++processed > cfg_.max_events) return RunStatus::kEventLimit;
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    const SimEvent e = heap_.back();
    heap_.pop_back();
    assert(e.at >= now_);
    now_ = e.at;
    ++counters_.events;
    switch (e.type) {
      case EvType::kSwitch:
        at_switch(static_cast<uint32_t>(e.arg));
        break;
      case EvType::kDeliver:
        deliver(static_cast<uint32_t>(e.arg));
        break;
      case EvType::kPortIdle:
        hosts_[idx(e.host)].ports[e.port].busy = false;
        service(e.host);
        break;
      case EvType::kTimer: {
        Host& h = hosts_[idx(e.host)];
        if (e.arg != h.timer_gen) break;  // superseded
        h.timer_at = kNever;
        if (h.last_timer_at == now_) {
          if (++h.same_instant_timers >= cfg_.livelock_timer_calls) {
            livelock_ = true;  // reported by the loop; the endpoint is not called again
            break;
          }
        } else {
          h.last_timer_at = now_;
          h.same_instant_timers = 0;
        }
        ++counters_.timers_fired;
        h.ep->on_timer(now_);
        service(e.host);
        break;
      }
      case EvType::kPortChange:
        set_port(e.host, e.port, e.arg != 0);
        break;
      case EvType::kCallback: {
        auto fn = std::move(callbacks_[e.arg]);
        callbacks_[e.arg] = nullptr;
        free_callbacks_.push_back(static_cast<uint32_t>(e.arg));
        if (fn) fn(now_);
        break;
      }
    }
    if (stop && stop()) return RunStatus::kStopped;
  }
  if (livelock_) return RunStatus::kLivelock;
  return RunStatus::kIdle;
}

// ---- The calling sequence ----------------------------------------------------------------------

void FaultNet::kick(HostId h) {
  service(h);
}

void FaultNet::service(HostId h) {
  auto idle_mask = [&] {
    const Host& host = hosts_[idx(h)];
    uint32_t m = 0;
    for (uint8_t p = 0; p < host.num_ports; ++p)
      if (host.ports[p].up && !host.ports[p].busy) m |= 1u << p;
    return m;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    TxPacket tx;
    for (uint32_t mask = idle_mask(); mask != 0 && hosts_[idx(h)].ep->poll_transmit(now_, mask, tx);
         mask = idle_mask()) {
      progress = true;
      if (tx.port >= hosts_[idx(h)].num_ports || !((mask >> tx.port) & 1)) {
        ++counters_.tx_port_violations;  // the engine broke the port_mask contract
        continue;
      }
      send(h, tx);
    }
    Completion c;
    while (hosts_[idx(h)].ep->poll_completion(c)) {
      progress = true;
      hosts_[idx(h)].completions.push_back(c);
      if (completion_fn_) completion_fn_(h, c);
    }
    Event ev;
    while (hosts_[idx(h)].ep->poll_event(ev)) {
      progress = true;
      hosts_[idx(h)].events.push_back(ev);
      if (event_fn_) event_fn_(h, ev);
    }
  }
  refresh_timer(h);
}

void FaultNet::refresh_timer(HostId h) {
  Host& host = hosts_[idx(h)];
  Time d = host.ep->next_deadline();
  if (d == kNever) {
    if (host.timer_at != kNever) {
      ++host.timer_gen;
      host.timer_at = kNever;
    }
    return;
  }
  d = std::max(d, now_);
  if (d == host.timer_at) return;
  ++host.timer_gen;
  host.timer_at = d;
  push(d, EvType::kTimer, h, 0, host.timer_gen);
}

void FaultNet::set_port(HostId h, uint8_t port, bool up) {
  Host& host = hosts_[idx(h)];
  if (host.ports[port].up == up) return;
  host.ports[port].up = up;
  ++counters_.port_changes;
  host.ep->set_port_up(now_, port, up);
  service(h);
}

// ---- Packets
// -------------------------------------------------------------------------------------

void FaultNet::send(HostId h, const TxPacket& tx) {
  const uint32_t slot = alloc_packet();
  Packet& p = packets_[slot];
  p.from = h;
  p.to = static_cast<int>(tx.peer);
  p.port = tx.port;
  p.ev_index = tx.ev_index;
  p.kind = packet_kind(tx.pkt.bth.opcode);
  p.psn = tx.pkt.bth.psn;

  wire::Datagram dg;
  // Data is ECN-capable (ECT(0)); control packets are not, as RoCEv2 NICs do.
  dg.ip.traffic_class = static_cast<uint8_t>(
      (wire::kDscpData << 2) | (p.kind == PacketKind::kData ? wire::kEcnEct0 : wire::kEcnNotEct));
  dg.ip.src = address(h, tx.port);
  dg.ip.dst = address(p.to, tx.port);
  dg.udp.src_port = 0xC000;
  {
    const auto& formats = hosts_[idx(h)].formats;
    auto it = formats.find(tx.src_qpn);
    const ev::FormatMode mode = it == formats.end() ? ev::FormatMode::kStev : it->second;
    ev::apply_to_envelope(mode, tx.ev, dg.ip, dg.udp, dg.srh, dg.has_srh);
  }
  dg.pkt = tx.pkt;  // the payload pointer is read by encode() below, before any engine call
  p.bytes.resize(wire::encoded_size(dg));
  auto n = wire::encode(dg, p.bytes);
  if (!n) {
    ++counters_.encode_errors;
    free_packet(slot);
    return;
  }
  p.bytes.resize(*n);
  p.transport_offset =
      wire::kIpv6HeaderBytes +
      (dg.has_srh ? wire::kSrhFixedBytes + wire::kSrhSegmentBytes * dg.srh.num_segments : 0);

  ++counters_.sent;
  counters_.sent_bytes += p.bytes.size();
  ++counters_.sent_by_kind[static_cast<int>(p.kind)];
  PathCounters& pc = path_counters_[{p.from, p.port, p.ev_index}];
  if (p.kind == PacketKind::kData)
    ++pc.sent_data;
  else if (p.kind == PacketKind::kProbe)
    ++pc.sent_probes;
  else
    ++pc.sent_other;
  tap(TapPoint::kSend, p);

  Port& port = hosts_[idx(h)].ports[tx.port];
  const Time done = now_ + serialization_time(p.bytes.size(), port.rate_bps);
  port.busy = true;
  push(done, EvType::kPortIdle, h, tx.port, 0);
  push(done, EvType::kSwitch, h, tx.port, slot);
}

void FaultNet::drop(uint32_t slot, const char* reason, uint64_t& counter) {
  ++counter;
  const Packet& p = packets_[slot];
  if (p.from >= 0) ++path_counters_[{p.from, p.port, p.ev_index}].dropped;
  tap(TapPoint::kDrop, p, reason);
  free_packet(slot);
}

void FaultNet::at_switch(uint32_t slot) {
  // Scripted faults count every packet that reaches the switch, whatever happens next.
  bool s_drop = false, s_trim = false, s_ce = false, s_dup = false, s_corrupt = false;
  {
    const Packet& p = packets_[slot];
    for (Scripted& s : scripted_) {
      if (!matches(s.fault.match, p)) continue;
      const uint64_t ordinal = s.seen++;
      bool hit = std::find(s.fault.nth.begin(), s.fault.nth.end(), ordinal) != s.fault.nth.end();
      if (!hit && p.kind == PacketKind::kData &&
          std::find(s.fault.psns.begin(), s.fault.psns.end(), p.psn) != s.fault.psns.end()) {
        uint32_t& hits = s.psn_hits[p.psn];
        if (hits < s.fault.times) {
          ++hits;
          hit = true;
        }
      }
      if (!hit) continue;
      switch (s.fault.action) {
        case FaultAction::kDrop:
          s_drop = true;
          break;
        case FaultAction::kTrim:
          s_trim = true;
          break;
        case FaultAction::kMarkCe:
          s_ce = true;
          break;
        case FaultAction::kDuplicate:
          s_dup = true;
          break;
        case FaultAction::kCorrupt:
          s_corrupt = true;
          break;
      }
    }
  }

  Packet& p = packets_[slot];
  if (p.to < 0 || p.to >= num_hosts() || p.port >= hosts_[idx(p.to)].num_ports)
    return drop(slot, "no_route", counters_.dropped_no_route);
  if (!hosts_[idx(p.from)].ports[p.port].up)
    return drop(slot, "port_down", counters_.dropped_port_down);

  double loss = cfg_.loss;
  Time extra_delay = 0;
  for (const PathFault& f : path_faults_) {
    if (now_ < f.from || now_ >= f.until || !matches(f.match, p)) continue;
    if (f.blackhole) return drop(slot, "blackhole", counters_.dropped_blackhole);
    loss += f.loss;
    extra_delay += f.extra_delay;
  }
  if (s_drop) return drop(slot, "scripted", counters_.dropped_scripted);
  if (loss > 0 && rng_.chance(loss)) return drop(slot, "loss", counters_.dropped_loss);

  if (s_corrupt || (cfg_.corrupt > 0 && rng_.chance(cfg_.corrupt))) corrupt_packet(p);

  // Only data packets are trimmed (trim_packet() leaves 0-byte writes alone).
  const bool has_payload = p.kind == PacketKind::kData;
  if ((s_trim || (cfg_.trim > 0 && rng_.chance(cfg_.trim))) && has_payload) trim_packet(p);

  Host& dst = hosts_[idx(p.to)];
  Port& egress = dst.ports[p.port];
  const uint64_t backlog =
      egress.egress_free_at > now_ ? bytes_in(egress.egress_free_at - now_, egress.rate_bps) : 0;
  counters_.max_queue_bytes = std::max(counters_.max_queue_bytes, backlog);
  if (!p.trimmed && has_payload && cfg_.trim_threshold_bytes > 0 &&
      backlog > cfg_.trim_threshold_bytes) {
    if (trim_packet(p)) ++counters_.trimmed_queue;
  }
  if (!p.trimmed && cfg_.queue_limit_bytes > 0 && backlog + p.bytes.size() > cfg_.queue_limit_bytes)
    return drop(slot, "queue", counters_.dropped_queue);

  const bool ect = (traffic_class_of(p.bytes) & 3) != wire::kEcnNotEct;
  if (s_ce) {
    mark_ce(p);
  } else if (ect && cfg_.ecn > 0 && rng_.chance(cfg_.ecn)) {
    mark_ce(p);
  } else if (ect && cfg_.ecn_threshold_bytes > 0 && backlog > cfg_.ecn_threshold_bytes) {
    mark_ce(p);
    ++counters_.ecn_marked_queue;
  }

  Time depart;
  const Time ser = serialization_time(p.bytes.size(), egress.rate_bps);
  if (p.trimmed) {
    depart = now_ + ser;  // high priority: overtakes the queue
  } else {
    egress.egress_free_at = std::max(now_, egress.egress_free_at) + ser;
    depart = egress.egress_free_at;
  }
  Time arrive = depart + cfg_.delay + extra_delay;
  if (cfg_.jitter > 0) arrive += rng_.below(cfg_.jitter + 1);
  const int to = p.to;
  const uint8_t port = p.port;
  push(arrive, EvType::kDeliver, to, port, slot);

  if (s_dup || (cfg_.duplicate > 0 && rng_.chance(cfg_.duplicate))) {
    const uint32_t copy = duplicate_packet(slot);
    ++counters_.duplicated;
    push(arrive + rng_.below(cfg_.duplicate_spread + 1), EvType::kDeliver, to, port, copy);
  }
}

void FaultNet::deliver(uint32_t slot) {
  Packet& p = packets_[slot];
  if (p.to < 0 || p.to >= num_hosts())  // only inject() can name a host that does not exist
    return drop(slot, "no_route", counters_.dropped_no_route);
  Host& dst = hosts_[idx(p.to)];
  if (p.port >= dst.num_ports) return drop(slot, "no_route", counters_.dropped_no_route);
  if (!dst.ports[p.port].up) return drop(slot, "port_down", counters_.dropped_port_down);
  ++counters_.delivered;
  counters_.delivered_bytes += p.bytes.size();
  if (p.from >= 0) ++path_counters_[{p.from, p.port, p.ev_index}].delivered;
  tap(TapPoint::kDeliver, p);
  const int to = p.to;
  auto st = dst.ep->on_datagram(now_, p.port, p.bytes);
  if (!st) ++counters_.rx_rejected;
  free_packet(slot);
  service(to);
}

uint32_t FaultNet::duplicate_packet(uint32_t slot) {
  const uint32_t copy = alloc_packet();  // packets_ is a deque: `slot` stays valid
  const Packet& src = packets_[slot];
  Packet& dst = packets_[copy];
  dst.from = src.from;
  dst.to = src.to;
  dst.port = src.port;
  dst.ev_index = src.ev_index;
  dst.kind = src.kind;
  dst.psn = src.psn;
  dst.transport_offset = src.transport_offset;
  dst.trimmed = src.trimmed;
  dst.bytes.assign(src.bytes.begin(), src.bytes.end());
  return copy;
}

bool FaultNet::trim_packet(Packet& p) {
  auto dg = wire::decode(p.bytes, wire::DecodeOptions{.verify_icrc = false});
  if (!dg || dg->pkt.payload_len == 0) return false;
  dg->ip.traffic_class =
      static_cast<uint8_t>((wire::kDscpTrimmed << 2) | (dg->ip.traffic_class & 3));
  dg->pkt.payload = nullptr;
  dg->pkt.payload_len = 0;
  scratch_.resize(wire::encoded_size(*dg));
  auto n = wire::encode(*dg, scratch_);
  if (!n) return false;
  p.bytes.assign(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(*n));
  p.trimmed = true;
  ++counters_.trimmed;
  return true;
}

void FaultNet::mark_ce(Packet& p) {
  // The ICRC masks the traffic class (it is mutable in flight), so this is all a switch does.
  set_traffic_class(p.bytes, static_cast<uint8_t>(traffic_class_of(p.bytes) | wire::kEcnCe));
  ++counters_.ecn_marked;
}

void FaultNet::corrupt_packet(Packet& p) {
  // Only bytes the ICRC covers (UDP header onwards): the IPv6 header's mutable fields and the
  // SRH are legitimately rewritten in flight and are not protected.
  if (p.bytes.size() <= p.transport_offset) return;
  const size_t span = p.bytes.size() - p.transport_offset;
  const size_t at = p.transport_offset + rng_.below(span);
  p.bytes[at] ^= static_cast<uint8_t>(1u << rng_.below(8));
  ++counters_.corrupted;
}

void FaultNet::tap(TapPoint point, const Packet& p, const char* reason) {
  if (pcap_ && (point == TapPoint::kDeliver || (point == TapPoint::kDrop && pcap_drops_)))
    pcap_->write(now_, p.bytes);
  if (!tap_fn_) return;
  TapRecord r;
  r.time = now_;
  r.point = point;
  r.from_host = p.from;
  r.to_host = p.to;
  r.port = p.port;
  r.ev_index = p.ev_index;
  r.kind = p.kind;
  r.drop_reason = reason;
  r.bytes = p.bytes;
  tap_fn_(r);
}

}  // namespace mrc::testnet
