#include "transport/engine.h"

#include <algorithm>
#include <functional>

#include "transport/event_log.h"
#include "transport/qp.h"
#include "wire/codec.h"

namespace mrc {

const char* qp_state_name(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kErr:
      return "ERR";
  }
  return "?";
}

const char* wc_status_name(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "success";
    case WcStatus::kRetryExceeded:
      return "retry exceeded";
    case WcStatus::kFlushed:
      return "flushed";
    case WcStatus::kAckContradiction:
      return "ACK contradicted an earlier one";
  }
  return "?";
}

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kDecode:
      return "decode";
    case DropReason::kUnknownQp:
      return "unknown_qp";
    case DropReason::kBadState:
      return "bad_state";
    case DropReason::kBadRkey:
      return "bad_rkey";
    case DropReason::kBadAddress:
      return "bad_address";
    case DropReason::kPsnOutOfWindow:
      return "psn_out_of_window";
    case DropReason::kBadAck:
      return "bad_ack";
    case DropReason::kWimmExceeded:
      return "wimm_exceeded";
    case DropReason::kBadOpcode:
      return "bad_opcode";
    case DropReason::kInconsistent:
      return "inconsistent";
    case DropReason::kWrongPeer:
      return "wrong_peer";
    case DropReason::kPayloadTooLong:
      return "payload_too_long";
    case DropReason::kCount:
      break;
  }
  return "?";
}

Engine::Engine(const EngineConfig& config)
    : config_(config),
      memory_(config.identifier_key),
      qpn_cipher_(config.identifier_key ? config.identifier_key * 0x9E3779B97F4A7C15ull | 1 : 0,
                  std::clamp<int>(config.qpn_bits & ~1, 8, 24)),
      port_up_mask_(config.num_ports >= 32 ? ~0u : (1u << config.num_ports) - 1),
      rng_(config.seed) {
  config_.num_ports = std::clamp<uint8_t>(config_.num_ports, 1, 32);
  config_.ack_every = std::clamp<uint32_t>(config_.ack_every, 1, wire::kMaxAckEchoes);
  // The scheduling rings hold each QP at most once; they start small and grow with the
  // number of QPs (a simulated host with two QPs should not pay for max_qps).
  ready_ring_.reserve(std::min<uint32_t>(config_.max_qps, 8));
  control_ring_.reserve(std::min<uint32_t>(config_.max_qps, 8));
  completions_.reserve(std::max<uint32_t>(config_.completion_capacity, 1));
  events_.reserve(std::max<uint32_t>(config_.event_capacity, 1));
  probe_tokens_ = std::max<uint32_t>(1, config_.probe_budget_burst);  // starts full
}

Engine::~Engine() = default;

// ---- memory ---------------------------------------------------------------------------

Result<MemoryKeys> Engine::register_memory(void* base, uint64_t length, uint64_t iova,
                                           uint32_t access) {
  return memory_.register_region(base, length, iova, access);
}

Status Engine::deregister_memory(uint32_t lkey) {
  return memory_.deregister(lkey);
}

Status Engine::set_memory_access(uint32_t lkey, uint32_t access) {
  return memory_.set_access(lkey, access);
}

// ---- QPs ------------------------------------------------------------------------------

Qp* Engine::find_qp(uint32_t qpn) const {
  if (qpn < kFirstQpn || qpn > qpn_cipher_.mask()) return nullptr;
  const uint32_t index = qpn_cipher_.decrypt(qpn);
  if (index < kFirstQpn) return nullptr;
  const size_t slot = index - kFirstQpn;
  if (slot >= qps_.size()) return nullptr;
  Qp* qp = qps_[slot].get();
  return qp && qp->qpn() == qpn ? qp : nullptr;
}

Result<uint32_t> Engine::create_qp(const QpCreateAttr& attr) {
  if (attr.sq_depth == 0 || attr.sq_depth > 65536 || attr.rq_depth == 0 || attr.rq_depth > 65536) {
    return fail(Error::kInvalidArgument);
  }
  size_t slot;
  uint32_t qpn;
  while (true) {
    if (!free_qp_slots_.empty()) {
      slot = free_qp_slots_.back();
      free_qp_slots_.pop_back();
    } else {
      if (qps_.size() >= std::min<uint32_t>(config_.max_qps, qpn_cipher_.mask() - kFirstQpn))
        return fail(Error::kNoResources);
      slot = qps_.size();
      qps_.emplace_back();
    }
    qpn = qpn_cipher_.encrypt(kFirstQpn + static_cast<uint32_t>(slot));
    // QPN 0 and 1 are InfiniBand's special QPs: a slot the key maps there stays unused.
    if (qpn >= kFirstQpn) break;
  }
  qps_[slot] = std::make_unique<Qp>(*this, qpn, attr, rng_.next());
  return qpn;
}

Status Engine::modify_qp(Time now, uint32_t qpn, QpState target, const QpAttr& attr) {
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  if (target == QpState::kReset) {
    // RESET forgets everything: a fresh object, keeping only the scheduling flags (the
    // rings may still hold this QPN).
    auto fresh = std::make_unique<Qp>(*this, qpn, qp->create_attr(), rng_.next());
    fresh->in_ready = qp->in_ready;
    fresh->in_control = qp->in_control;
    fresh->armed = qp->armed;
    qps_[qpn_cipher_.decrypt(qpn) - kFirstQpn] = std::move(fresh);
    return {};
  }
  auto s = qp->modify(now, target, attr);
  rearm(qp);
  return s;
}

Status Engine::destroy_qp(uint32_t qpn) {
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  ready_ring_.remove_if([qpn](uint32_t q) { return q == qpn; });
  control_ring_.remove_if([qpn](uint32_t q) { return q == qpn; });
  const uint32_t slot = qpn_cipher_.decrypt(qpn) - kFirstQpn;
  qps_[slot].reset();
  free_qp_slots_.push_back(slot);
  return {};
}

Result<QpState> Engine::qp_state(uint32_t qpn) const {
  const Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  return qp->state();
}

const PathSet* Engine::qp_paths(uint32_t qpn) const {
  const Qp* qp = find_qp(qpn);
  return qp ? &qp->paths() : nullptr;
}

Result<QpStats> Engine::qp_stats(uint32_t qpn) const {
  const Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  return qp->stats();
}

Result<QpMemory> Engine::qp_memory(uint32_t qpn) const {
  const Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  return qp->memory();
}

Status Engine::set_path_denied(Time now, uint32_t qpn, int ev_index, bool denied) {
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  auto s = qp->set_path_denied(now, ev_index, denied);
  rearm(qp);
  return s;
}

Status Engine::update_qp(Time now, uint32_t qpn, const QpUpdate& update) {
  (void)now;  // the QP's timers are re-armed from their own bookkeeping
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  auto s = qp->update(update);
  rearm(qp);  // a shorter ACK timeout moves the deadline earlier
  return s;
}

Result<QpLimits> Engine::qp_limits(uint32_t qpn) const {
  const Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  return qp->limits();
}

Status Engine::replace_path(Time now, uint32_t qpn, int ev_index, const PathDesc& desc) {
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  auto s = qp->replace_path(now, ev_index, desc);
  rearm(qp);
  return s;
}

Status Engine::reconfigure_cc(Time now, uint32_t qpn, const CcSpec& cc) {
  (void)now;
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  auto s = qp->reconfigure_cc(cc);
  rearm(qp);
  return s;
}

const cc::CongestionControl* Engine::qp_cc(uint32_t qpn) const {
  const Qp* qp = find_qp(qpn);
  return qp && qp->state() == QpState::kRts ? qp->congestion_control() : nullptr;
}

// ---- work -----------------------------------------------------------------------------

Status Engine::post_write(Time now, uint32_t qpn, const WriteWr& wr) {
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  auto s = qp->post_write(now, wr);
  rearm(qp);
  return s;
}

Status Engine::post_recv(uint32_t qpn, uint64_t wr_id) {
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  auto s = qp->post_recv(wr_id);
  rearm(qp);
  return s;
}

// ---- network --------------------------------------------------------------------------

void Engine::set_peer_addresses(uint32_t peer, std::span<const Ipv6Address> addresses) {
  if (addresses.empty()) {
    peer_addresses_.erase(peer);
    return;
  }
  peer_addresses_[peer].assign(addresses.begin(), addresses.end());
}

bool Engine::from_peer(uint32_t peer, const RxPacket& rx) const {
  if (peer_addresses_.empty()) return true;
  const auto it = peer_addresses_.find(peer);
  if (it == peer_addresses_.end()) return true;
  if (!rx.source_known) return false;
  return std::find(it->second.begin(), it->second.end(), rx.source) != it->second.end();
}

Status Engine::on_packet(Time now, const RxPacket& rx) {
  const auto drop = [&](DropReason reason, Error e) {
    ++counters_.drops[static_cast<int>(reason)];
    if (log_) [[unlikely]]
      log_received(now, rx, e, nullptr, 0);
    return fail(e);
  };
  if (rx.port >= config_.num_ports) return drop(DropReason::kDecode, Error::kInvalidArgument);
  Qp* qp = find_qp(rx.pkt.bth.dest_qp);
  if (!qp) return drop(DropReason::kUnknownQp, Error::kUnknownQp);
  // Peer binding before anything else about the packet is looked at (set_peer_addresses).
  if (!from_peer(qp->peer(), rx)) return drop(DropReason::kWrongPeer, Error::kInvalidArgument);
  const uint64_t cwnd_before = log_ ? cwnd_of(*qp) : 0;
  auto s = qp->on_packet(now, rx);
  if (log_) [[unlikely]]
    log_received(now, rx, s ? Error::kOk : s.error(), qp, cwnd_before);
  rearm(qp);
  return s;
}

void Engine::log(const LogRecord& r) {
  log_->record(r);
}

void Engine::log_sent(Time now, const TxPacket& out) {
  LogRecord r(now, LogKind::kPacketSent, out.src_qpn);
  r.opcode = out.pkt.bth.opcode;
  r.psn = out.pkt.bth.psn;
  r.ev = out.ev_index;
  r.port = out.port;
  r.bytes = out.transport_bytes;
  r.retransmit = out.pkt.data.flags & wire::DataExt::kRetransmit;
  log_->record(r);
}

void Engine::log_received(Time now, const RxPacket& rx, Error verdict, const Qp* qp,
                          uint64_t cwnd_before) {
  LogRecord r(now, LogKind::kPacketReceived, rx.pkt.bth.dest_qp);
  r.opcode = rx.pkt.bth.opcode;
  r.psn = rx.pkt.bth.psn;
  r.ev = rx.pkt.data.ev_index;
  r.port = rx.port;
  r.bytes = rx.pkt.payload_len;
  r.ecn_ce = rx.ecn_ce;
  r.trimmed = rx.trimmed;
  r.verdict = verdict;
  log_->record(r);
  if (qp) log_cwnd_change(now, *qp, cwnd_before);  // ACKs, NACKs, CNPs
}

uint64_t Engine::cwnd_of(const Qp& qp) {
  const cc::CongestionControl* cc = qp.congestion_control();
  return cc ? cc->cwnd() : 0;
}

void Engine::log_cwnd_change(Time now, const Qp& qp, uint64_t before) {
  const uint64_t cwnd = cwnd_of(qp);
  if (cwnd == before) return;
  LogRecord u(now, LogKind::kCcUpdate, qp.qpn());
  u.cwnd = cwnd;
  log_->record(u);
}

Status Engine::on_datagram(Time now, uint8_t port, std::span<const uint8_t> bytes) {
  auto d = wire::decode(bytes);
  if (!d) {
    ++counters_.drops[static_cast<int>(DropReason::kDecode)];
    return fail(d.error());
  }
  RxPacket rx;
  rx.port = port;
  rx.source_known = true;
  rx.source = d->ip.src;
  rx.ecn_ce = d->ip.ecn() == wire::kEcnCe;
  rx.trimmed = d->ip.dscp() == wire::kDscpTrimmed;
  rx.pkt = d->pkt;
  return on_packet(now, rx);
}

void Engine::prefetch_tables() const {
  if (!qps_.empty()) __builtin_prefetch(qps_.data());
  if (!timers_.empty()) __builtin_prefetch(timers_.data());
  if (!ready_ring_.empty()) __builtin_prefetch(&ready_ring_.front());
  if (!control_ring_.empty()) __builtin_prefetch(&control_ring_.front());
}

void Engine::prefetch() const {
  __builtin_prefetch(&port_up_mask_);
  __builtin_prefetch(&ready_ring_);
  __builtin_prefetch(&timers_);
  const size_t n = std::min<size_t>(qps_.size(), 2);
  for (size_t i = 0; i < n; ++i)
    if (const Qp* qp = qps_[i].get()) {
      for (size_t line = 0; line < 4; ++line)
        __builtin_prefetch(reinterpret_cast<const char*>(qp) + 64 * line);
    }
}

bool Engine::poll_transmit(Time now, uint32_t port_mask, TxPacket& out) {
  port_mask &= port_up_mask_;
  if (!port_mask) return false;
  // Control packets first: they are small and unblock the peer.
  for (size_t n = control_ring_.size(); n > 0; --n) {
    const uint32_t qpn = control_ring_.pop_front();
    Qp* qp = find_qp(qpn);
    if (!qp || !qp->in_control) continue;
    qp->in_control = false;
    const bool sent = qp->produce_control(now, port_mask, out);
    if (qp->has_control()) mark_control(qp);
    if (sent) {
      rearm(qp);
      if (log_) [[unlikely]]
        log_sent(now, out);
      return true;
    }
  }
  // Then data, one packet per QP in turn.
  for (size_t n = ready_ring_.size(); n > 0; --n) {
    const uint32_t qpn = ready_ring_.pop_front();
    Qp* qp = find_qp(qpn);
    if (!qp || !qp->in_ready) continue;
    qp->in_ready = false;
    // A resend of a trimmed packet cuts the window as it leaves (cc::on_trim_loss).
    const uint64_t cwnd_before = log_ ? cwnd_of(*qp) : 0;
    switch (qp->produce_data(now, port_mask, out)) {
      case Qp::DataResult::kSent:
        mark_ready(qp);
        rearm(qp);
        if (log_) [[unlikely]] {
          log_sent(now, out);
          log_cwnd_change(now, *qp, cwnd_before);
        }
        return true;
      case Qp::DataResult::kPortsBusy:
        mark_ready(qp);
        break;
      case Qp::DataResult::kIdle:
        rearm(qp);
        break;
    }
  }
  return false;
}

void Engine::set_port_up(Time now, uint8_t port, bool up) {
  if (port >= config_.num_ports) return;
  if (up) {
    // Back within the delay: nothing was remapped.
    std::erase_if(remaps_, [port](const PendingRemap& r) { return r.port == port; });
  } else if (config_.port_remap_delay > 0 && ((port_up_mask_ >> port) & 1)) {
    // Paper 3: the NIC remaps the port's EVs after a while; its QPs use the port until then.
    for (const PendingRemap& r : remaps_)
      if (r.port == port) return;
    remaps_.push_back(PendingRemap{now + config_.port_remap_delay, port});
    next_remap_ = std::min(next_remap_, now + config_.port_remap_delay);
    return;
  }
  apply_port_state(now, port, up);
}

uint32_t Engine::ports_down_bitmap() const {
  const uint32_t all = config_.num_ports >= 32 ? ~0u : (1u << config_.num_ports) - 1;
  return ~port_up_mask_ & all & ((1u << wire::kSackPortsDownBits) - 1);
}

void Engine::apply_port_state(Time now, uint8_t port, bool up) {
  const bool was_up = (port_up_mask_ >> port) & 1;
  if (was_up == up) return;
  if (up) {
    port_up_mask_ |= 1u << port;
  } else {
    port_up_mask_ &= ~(1u << port);
  }
  for (auto& qp : qps_) {
    if (!qp) continue;
    qp->set_port_up(now, port, up);
    rearm(qp.get());
  }
  emit_event(Event{EventType::kPortChange, 0, 0, port,
                   up ? ev::EvState::kAssumedBad : ev::EvState::kGood,
                   up ? ev::EvState::kGood : ev::EvState::kAssumedBad, now});
}

// ---- outputs --------------------------------------------------------------------------

void Engine::emit_completion(const Completion& c) {
  ++counters_.completions;
  if (c.status != WcStatus::kSuccess) ++counters_.completion_errors;
  if (!completions_.try_push_back(c)) ++counters_.completions_dropped;
}

bool Engine::poll_completion(Completion& out) {
  if (completions_.empty()) return false;
  out = completions_.pop_front();
  return true;
}

void Engine::emit_event(const Event& e) {
  // The OCP EV event queue reports drops the same way.
  if (!events_.try_push_back(e)) ++counters_.events_dropped;
  if (log_) [[unlikely]] {
    LogRecord r(e.time, LogKind::kEvent, e.qpn);
    r.event = e;
    log_->record(r);
  }
}

bool Engine::poll_event(Event& out) {
  if (events_.empty()) return false;
  out = events_.pop_front();
  return true;
}

void Engine::mark_ready(Qp* qp) {
  if (qp->in_ready) return;
  qp->in_ready = true;
  ready_ring_.push_back(qp->qpn());  // grows (doubling) only when the QP count grows
}

void Engine::mark_control(Qp* qp) {
  if (qp->in_control) return;
  qp->in_control = true;
  control_ring_.push_back(qp->qpn());
}

void Engine::rearm(Qp* qp) {
  const Time d = qp->deadline();
  if (d < qp->armed) {
    qp->armed = d;
    timers_.push_back(TimerEntry{d, qp->qpn()});
    std::push_heap(timers_.begin(), timers_.end(), std::greater<>());
  }
}

void Engine::note_rtt_sample(Time raw) {
  if (!config_.share_rtt) return;
  RttEstimate& e = shared_rtt_;
  e.min_rtt = std::min(e.min_rtt, raw);
  if (e.srtt == 0) {
    e.srtt = raw;
    e.rttvar = raw / 2;
    return;
  }
  // RFC 6298 gains, as each QP smooths its own.
  const Time diff = e.srtt > raw ? e.srtt - raw : raw - e.srtt;
  e.rttvar = (3 * e.rttvar + diff) / 4;
  e.srtt = (7 * e.srtt + raw) / 8;
}

RttEstimate Engine::borrowed_rtt() const {
  if (shared_rtt_.srtt > 0) return shared_rtt_;
  if (config_.fabric_rtt > 0)
    return RttEstimate{config_.fabric_rtt, config_.fabric_rtt / 2, config_.fabric_rtt};
  return {};
}

bool Engine::take_probe_token(Time now) {
  const Time every = config_.probe_budget_interval;
  if (every == 0) return true;
  const uint64_t burst = std::max<uint32_t>(1, config_.probe_budget_burst);
  if (now > probe_tokens_at_) {
    const uint64_t earned = (now - probe_tokens_at_) / every;
    if (probe_tokens_ + earned >= burst) {
      probe_tokens_ = burst;
      probe_tokens_at_ = now;
    } else {
      probe_tokens_ += earned;
      probe_tokens_at_ += earned * every;  // keep the fraction of a token earned so far
    }
  }
  if (probe_tokens_ == 0) return false;
  --probe_tokens_;
  return true;
}

Time Engine::next_probe_token() const {
  return probe_tokens_ > 0 ? probe_tokens_at_ : probe_tokens_at_ + config_.probe_budget_interval;
}

void Engine::refund_probe_token() {
  if (config_.probe_budget_interval > 0) ++probe_tokens_;
}

// Paper 2.4 probes the reverse set "each RTT"; twice the RTT estimate leaves the answer (which
// queues behind data at the peer's NIC and in the fabric) time to come back before the probe
// counts as unanswered.
Time Engine::reverse_probe_interval() const {
  if (config_.reverse_probe_interval > 0) return config_.reverse_probe_interval;
  const Time rtt = borrowed_rtt().srtt;
  return rtt > 0 ? std::max<Time>(2 * rtt, us(2)) : us(50);
}

Time Engine::next_deadline() {
  while (!timers_.empty()) {
    const TimerEntry& top = timers_.front();
    const Qp* qp = find_qp(top.qpn);
    if (qp && qp->armed == top.at) return std::min(top.at, next_remap_);
    std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
    timers_.pop_back();
  }
  return next_remap_;
}

void Engine::on_timer(Time now) {
  if (next_remap_ <= now) {
    next_remap_ = kNever;
    std::vector<PendingRemap> due;
    for (const PendingRemap& r : remaps_) {
      if (r.at <= now) {
        due.push_back(r);
      } else {
        next_remap_ = std::min(next_remap_, r.at);
      }
    }
    std::erase_if(remaps_, [now](const PendingRemap& r) { return r.at <= now; });
    for (const PendingRemap& r : due)
      apply_port_state(now, r.port, false);
  }
  while (!timers_.empty() && timers_.front().at <= now) {
    const TimerEntry top = timers_.front();
    std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
    timers_.pop_back();
    Qp* qp = find_qp(top.qpn);
    if (!qp || qp->armed != top.at) continue;  // stale entry
    qp->armed = kNever;
    const uint64_t cwnd_before = log_ ? cwnd_of(*qp) : 0;
    qp->on_timer(now);
    if (log_) [[unlikely]]
      log_cwnd_change(now, *qp, cwnd_before);  // losses a timer declared cut the window
    rearm(qp);
  }
}

}  // namespace mrc
