#include "transport/engine.h"

#include <algorithm>
#include <functional>

#include "transport/event_log.h"
#include "transport/qp.h"
#include "wire/codec.h"

namespace mrc {

Engine::Engine(const EngineConfig& config)
    : env_(config),
      qpn_cipher_(config.identifier_key ? config.identifier_key * 0x9E3779B97F4A7C15ull | 1 : 0,
                  std::clamp<int>(config.qpn_bits & ~1, 8, 24)),
      rng_(config.seed) {}

Engine::~Engine() = default;

// ---- memory ---------------------------------------------------------------------------

Result<MemoryKeys> Engine::register_memory(void* base, uint64_t length, uint64_t iova,
                                           uint32_t access) {
  return env_.memory.register_region(base, length, iova, access);
}

Status Engine::deregister_memory(uint32_t lkey) {
  return env_.memory.deregister(lkey);
}

Status Engine::set_memory_access(uint32_t lkey, uint32_t access) {
  return env_.memory.set_access(lkey, access);
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
      if (qps_.size() >= std::min<uint32_t>(env_.config.max_qps, qpn_cipher_.mask() - kFirstQpn))
        return fail(Error::kNoResources);
      slot = qps_.size();
      qps_.emplace_back();
    }
    qpn = qpn_cipher_.encrypt(kFirstQpn + static_cast<uint32_t>(slot));
    // QPN 0 and 1 are InfiniBand's special QPs: a slot the key maps there stays unused.
    if (qpn >= kFirstQpn) break;
  }
  qps_[slot] = std::make_unique<Qp>(env_, qpn, attr, rng_.next());
  return qpn;
}

Status Engine::modify_qp(Time now, uint32_t qpn, QpState target, const QpAttr& attr) {
  Qp* qp = find_qp(qpn);
  if (!qp) return fail(Error::kUnknownQp);
  if (target == QpState::kReset) {
    // RESET forgets everything: a fresh object, keeping only the scheduling flags (the
    // rings may still hold this QPN).
    auto fresh = std::make_unique<Qp>(env_, qpn, qp->create_attr(), rng_.next());
    fresh->in_ready = qp->in_ready;
    fresh->in_control = qp->in_control;
    fresh->in_rearm = qp->in_rearm;
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
  env_.ready_ring.remove_if([qpn](uint32_t q) { return q == qpn; });
  env_.control_ring.remove_if([qpn](uint32_t q) { return q == qpn; });
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
    ++env_.counters.drops[static_cast<int>(reason)];
    if (env_.log) [[unlikely]]
      log_received(now, rx, e, nullptr, 0);
    return fail(e);
  };
  if (rx.port >= env_.config.num_ports) return drop(DropReason::kDecode, Error::kInvalidArgument);
  Qp* qp = find_qp(rx.pkt.bth.dest_qp);
  if (!qp) return drop(DropReason::kUnknownQp, Error::kUnknownQp);
  // Peer binding before anything else about the packet is looked at (set_peer_addresses).
  if (!from_peer(qp->peer(), rx)) return drop(DropReason::kWrongPeer, Error::kInvalidArgument);
  const uint64_t cwnd_before = env_.log ? cwnd_of(*qp) : 0;
  auto s = qp->on_packet(now, rx);
  if (env_.log) [[unlikely]]
    log_received(now, rx, s ? Error::kOk : s.error(), qp, cwnd_before);
  rearm(qp);
  return s;
}

void Engine::log_sent(Time now, const TxPacket& out) {
  LogRecord r(now, LogKind::kPacketSent, out.src_qpn);
  r.opcode = out.pkt.bth.opcode;
  r.psn = out.pkt.bth.psn;
  r.ev = out.ev_index;
  r.port = out.port;
  r.bytes = out.transport_bytes;
  r.retransmit = out.pkt.data.flags & wire::DataExt::kRetransmit;
  env_.log->record(r);
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
  env_.log->record(r);
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
  env_.log->record(u);
}

Status Engine::on_datagram(Time now, uint8_t port, std::span<const uint8_t> bytes) {
  auto d = wire::decode(bytes);
  if (!d) {
    ++env_.counters.drops[static_cast<int>(DropReason::kDecode)];
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
  if (!env_.timers.empty()) __builtin_prefetch(env_.timers.data());
  if (!env_.ready_ring.empty()) __builtin_prefetch(&env_.ready_ring.front());
  if (!env_.control_ring.empty()) __builtin_prefetch(&env_.control_ring.front());
}

void Engine::prefetch() const {
  __builtin_prefetch(&env_.port_up_mask);
  __builtin_prefetch(&env_.ready_ring);
  __builtin_prefetch(&env_.timers);
  const size_t n = std::min<size_t>(qps_.size(), 2);
  for (size_t i = 0; i < n; ++i)
    if (const Qp* qp = qps_[i].get()) {
      for (size_t line = 0; line < 4; ++line)
        __builtin_prefetch(reinterpret_cast<const char*>(qp) + 64 * line);
    }
}

bool Engine::poll_transmit(Time now, uint32_t port_mask, TxPacket& out) {
  port_mask &= env_.port_up_mask;
  if (!port_mask) return false;
  // Control packets first: they are small and unblock the peer.
  for (size_t n = env_.control_ring.size(); n > 0; --n) {
    const uint32_t qpn = env_.control_ring.pop_front();
    Qp* qp = find_qp(qpn);
    if (!qp || !qp->in_control) continue;
    qp->in_control = false;
    const bool sent = qp->produce_control(now, port_mask, out);
    if (qp->has_control()) mark_control(qp);
    if (sent) {
      rearm(qp);
      if (env_.log) [[unlikely]]
        log_sent(now, out);
      return true;
    }
  }
  // Then data, one packet per QP in turn.
  for (size_t n = env_.ready_ring.size(); n > 0; --n) {
    const uint32_t qpn = env_.ready_ring.pop_front();
    Qp* qp = find_qp(qpn);
    if (!qp || !qp->in_ready) continue;
    qp->in_ready = false;
    // A resend of a trimmed packet cuts the window as it leaves (cc::on_trim_loss).
    const uint64_t cwnd_before = env_.log ? cwnd_of(*qp) : 0;
    switch (qp->produce_data(now, port_mask, out)) {
      case Qp::DataResult::kSent:
        mark_ready(qp);
        rearm(qp);
        if (env_.log) [[unlikely]] {
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
  if (port >= env_.config.num_ports) return;
  if (up) {
    // Back within the delay: nothing was remapped.
    std::erase_if(remaps_, [port](const PendingRemap& r) { return r.port == port; });
  } else if (env_.config.port_remap_delay > 0 && ((env_.port_up_mask >> port) & 1)) {
    // Paper 3: the NIC remaps the port's EVs after a while; its QPs use the port until then.
    for (const PendingRemap& r : remaps_)
      if (r.port == port) return;
    remaps_.push_back(PendingRemap{now + env_.config.port_remap_delay, port});
    next_remap_ = std::min(next_remap_, now + env_.config.port_remap_delay);
    return;
  }
  apply_port_state(now, port, up);
}

void Engine::apply_port_state(Time now, uint8_t port, bool up) {
  const bool was_up = (env_.port_up_mask >> port) & 1;
  if (was_up == up) return;
  if (up) {
    env_.port_up_mask |= 1u << port;
  } else {
    env_.port_up_mask &= ~(1u << port);
  }
  for (auto& qp : qps_) {
    if (!qp) continue;
    qp->set_port_up(now, port, up);
    rearm(qp.get());
  }
  env_.emit_event(Event{EventType::kPortChange, 0, 0, port,
                        up ? ev::EvState::kAssumedBad : ev::EvState::kGood,
                        up ? ev::EvState::kGood : ev::EvState::kAssumedBad, now});
}

// ---- outputs --------------------------------------------------------------------------

bool Engine::poll_completion(Completion& out) {
  if (env_.completions.empty()) return false;
  out = env_.completions.pop_front();
  return true;
}

bool Engine::poll_event(Event& out) {
  if (env_.events.empty()) return false;
  out = env_.events.pop_front();
  return true;
}

void Engine::mark_ready(Qp* qp) {
  env_.mark_ready(qp->in_ready, qp->qpn());
}

void Engine::mark_control(Qp* qp) {
  env_.mark_control(qp->in_control, qp->qpn());
}

void Engine::rearm(Qp* qp) {
  if (qp->in_rearm) return;
  qp->in_rearm = true;
  env_.rearm_pending.push_back(qp->qpn());
}

void Engine::arm_pending() {
  for (const uint32_t qpn : env_.rearm_pending) {
    Qp* qp = find_qp(qpn);
    if (!qp || !qp->in_rearm) continue;  // destroyed (or reset and already armed)
    qp->in_rearm = false;
    env_.rearm(qp->armed, qpn, qp->deadline());
  }
  env_.rearm_pending.clear();
}

Time Engine::next_deadline() {
  arm_pending();
  while (!env_.timers.empty()) {
    const QpEnv::TimerEntry& top = env_.timers.front();
    const Qp* qp = find_qp(top.qpn);
    if (qp && qp->armed == top.at) return std::min(top.at, next_remap_);
    std::pop_heap(env_.timers.begin(), env_.timers.end(), std::greater<>());
    env_.timers.pop_back();
  }
  return next_remap_;
}

void Engine::on_timer(Time now) {
  arm_pending();
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
  while (!env_.timers.empty() && env_.timers.front().at <= now) {
    const QpEnv::TimerEntry top = env_.timers.front();
    std::pop_heap(env_.timers.begin(), env_.timers.end(), std::greater<>());
    env_.timers.pop_back();
    Qp* qp = find_qp(top.qpn);
    if (!qp || qp->armed != top.at) continue;  // stale entry
    qp->armed = kNever;
    const uint64_t cwnd_before = env_.log ? cwnd_of(*qp) : 0;
    qp->on_timer(now);
    if (env_.log) [[unlikely]]
      log_cwnd_change(now, *qp, cwnd_before);  // losses a timer declared cut the window
    // At once, not pending: a deadline the timer left at or before `now` fires in this loop.
    env_.rearm(qp->armed, qp->qpn(), qp->deadline());
  }
}

}  // namespace mrc
