#include "transport/qp.h"

#include <algorithm>
#include <cstring>

#include "transport/cc/fixed_window.h"
#include "transport/cc/nscc.h"
#include "transport/control.h"
#include "transport/event_log.h"
#include "transport/psn.h"

namespace mrc {

namespace {

constexpr uint32_t kProbeReplyQueue = 32;

}  // namespace

Qp::Qp(QpEnv& env, uint32_t qpn, const QpCreateAttr& attr, uint64_t seed)
    : env_(env), qpn_(qpn), create_(attr), seed_(seed) {}

Qp::~Qp() = default;

// ---------------------------------------------------------------------------------------
// State machine (OCP mrc.h 3.8: RESET -> INIT -> RTR -> RTS, ERR and RESET from any state).

Status Qp::modify(Time now, QpState target, const QpAttr& a) {
  switch (target) {
    case QpState::kReset:
      return fail(Error::kInvalidArgument);  // the engine replaces the QP object instead
    case QpState::kErr:
      if (state_ != QpState::kErr) to_err(now, WcStatus::kFlushed);
      return {};
    case QpState::kInit:
      if (state_ != QpState::kReset) return fail(Error::kBadQpState);
      return to_init(a);
    case QpState::kRtr:
      if (state_ != QpState::kInit) return fail(Error::kBadQpState);
      return to_rtr(a);
    case QpState::kRts:
      if (state_ != QpState::kRtr) return fail(Error::kBadQpState);
      return to_rts(now, a);
  }
  return fail(Error::kInvalidArgument);
}

Status Qp::to_init(const QpAttr& a) {
  const uint8_t ports = env_.config.num_ports;
  if (a.paths.empty() || a.paths.size() > 65535) return fail(Error::kInvalidArgument);
  if (a.transport == TransportMode::kRoce && a.paths.size() != 1) {
    return fail(Error::kInvalidArgument);
  }
  for (const PathDesc& p : a.paths) {
    if (p.port >= ports || p.state == ev::EvState::kAssumedBad) {
      return fail(Error::kInvalidArgument);
    }
  }
  if (a.ev_min_active > a.paths.size()) return fail(Error::kInvalidArgument);
  if (a.path_policy.burst == 0) return fail(Error::kInvalidArgument);
  if (a.path_policy.ecn_swap_marks > 255) return fail(Error::kInvalidArgument);  // Slot::ecn_run
  switch (a.cc.algorithm) {
    case CcAlgorithm::kNscc:
      if (a.cc.nscc.base_rtt == 0) return fail(Error::kInvalidArgument);
      break;
    case CcAlgorithm::kDcqcn:
      if (a.cc.dcqcn.line_rate_bps == 0) return fail(Error::kInvalidArgument);
      break;
    case CcAlgorithm::kFixedWindow:
      if (a.cc.fixed_window == 0) return fail(Error::kInvalidArgument);
      break;
    case CcAlgorithm::kNone:
      break;
  }
  transport_ = a.transport;
  PathPolicy policy = a.path_policy;
  if (policy.ecn_cooldown == 0 && !a.paths.empty()) {
    const cc::NsccConfig& n = a.cc.nscc;
    const auto per_port =
        policy.active_per_plane
            ? policy.active_per_plane
            : std::max<uint32_t>(1, static_cast<uint32_t>(a.paths.size() / ports));
    policy.ecn_cooldown = n.base_rtt > 0 ? default_ecn_cooldown(n.base_rtt, n.hashed_paths,
                                                                per_port, n.mtu, n.link_bps / ports)
                                         : kEcnCooldownWithoutRtt;
  }
  if (transport_ == TransportMode::kRoce) {
    // One ECMP path and nothing to steer to: RoCEv2 relies on the network (PFC, routing).
    policy.ecn_steering = false;
    policy.loss_marking = false;
  }
  paths_.init(
      a.paths, a.ev_min_active, ports,
      env_.path_policies.get(policy, [](const PathPolicy& p) { return PathSet::clamped(p); }),
      seed_);
  reverse_.configure(transport_ == TransportMode::kMrc
                         ? std::min<uint8_t>(env_.config.reverse_evs_per_plane, 8)
                         : 0,
                     ports);
  for (uint8_t p = 0; p < ports; ++p) {
    if (!((env_.port_up_mask >> p) & 1)) paths_.set_port_up(p, false, 0);
  }
  cc_spec_ = env_.cc_specs.get(a.cc, [](const CcSpec& c) { return c; });
  state_ = QpState::kInit;
  return {};
}

Status Qp::to_rtr(const QpAttr& a) {
  if (a.path_mtu < 64 || a.path_mtu > 9000 || a.mpr_dest == 0 || a.dest_qpn > kPsnMask ||
      a.rq_psn > kPsnMask || a.max_wimm_dest == 0) {
    return fail(Error::kInvalidArgument);
  }
  dest_qpn_ = a.dest_qpn;
  peer_ = a.peer;
  mtu_ = a.path_mtu;
  max_wimm_dest_ = a.max_wimm_dest;
  mpr_dest_psns_ = 128u * a.mpr_dest;
  rq_psn_ = a.rq_psn;
  state_ = QpState::kRtr;
  return {};
}

Status Qp::to_rts(Time now, const QpAttr& a) {
  if (a.mpr == 0 || a.timeout > 24 || a.retry_linear > 7 || a.retry_exp > 25 ||
      a.sq_psn > kPsnMask || a.max_wimm == 0) {
    return fail(Error::kInvalidArgument);
  }
  tx_.to_rts(env_, *cc_spec_, mtu_, now, a);
  state_ = QpState::kRts;
  return {};
}

void Qp::to_err(Time now, WcStatus first_status) {
  const bool was_error = state_ == QpState::kErr;
  state_ = QpState::kErr;
  tx_.flush(env_, qpn_, now, first_status);
  if (rx_) rx_->flush(env_, qpn_, now);
  probe_replies_.reset();
  probes_due_ = false;
  if (!was_error) {
    env_.emit_event(
        Event{EventType::kQpError, qpn_, 0, 0, ev::EvState::kGood, ev::EvState::kGood, now});
  }
}

QpMemory Qp::memory() const {
  QpMemory m;
  m.object = sizeof(Qp);
  m.paths = paths_.heap_bytes() + reverse_.heap_bytes();
  m.rings = tx_.sq.capacity() * sizeof(Requester::SendWr) +
            tx_.pkts.capacity() * sizeof(Requester::TxPkt) + tx_.retx.storage_bytes() +
            (probe_replies_ ? sizeof(*probe_replies_) + probe_replies_->storage_bytes() : 0);
  if (tx_.loss) {
    m.object += sizeof(LossDetector);
    m.paths += tx_.loss->path_bytes();
    m.rings += tx_.loss->ring_bytes();
  }
  if (rx_) {
    m.object += sizeof(Responder);
    m.rings += rx_->ring_bytes();
  }
  m.cc = tx_.cc ? tx_.cc->object_bytes() : 0;
  return m;
}

// ---------------------------------------------------------------------------------------
// Posting work, and the responder's state made and given back.

// The responder's state exists once the QP receives (a data packet or a posted receive): the
// requester of a pair, which only receives ACKs, never holds it. Its window starts where RTR
// said (rq_psn_, mpr_dest_psns_), or where the state released when idle left it
// (release_idle_responder).
void Qp::ensure_responder() {
  if (rx_) return;
  rx_ = std::make_unique<Responder>(mpr_dest_psns_, rq_psn_, rx_msg_base_, rx_received_bytes_);
}

// A responder with nothing left to do (every message complete and acknowledged, no ACK,
// repeat, NACK or CNP due, no receive posted, no echo queued) holds nothing but where its
// window stands: the next PSN and message it expects and the bytes it has received (the
// SACK's running count). It keeps those in the QP and gives its state back; the next packet
// or posted receive makes it again (ensure_responder) exactly as it was: the fields dropped
// are each written before they are next read (the ACK's port and path and the arrival time
// by the next data packet, the last ACK's port and path by the next ACK, which alone arms a
// repeat). A RoCEv2 responder that sent a CNP keeps it (its rate limit needs the time).
// docs/performance.md, "Bytes per QP".
void Qp::release_idle_responder(Time now) {
  if (!rx_) return;
  const Responder& r = *rx_;
  if (!r.idle()) return;
  rq_psn_ = r.window.base();
  rx_msg_base_ = r.window.msg_base();
  rx_received_bytes_ = r.window.received_bytes();
  rx_.reset();
  paths_.release_idle(now);
}

void Qp::ensure_responder_rings() {
  ensure_responder();
  if (!rx_->window.allocated()) rx_->window.allocate(env_.config.qp_initial_ring);
}

Status Qp::post_write(Time now, const WriteWr& wr) {
  if (state_ != QpState::kRts) return fail(Error::kBadQpState);
  if (wr.opcode != WrOpcode::kWrite && wr.opcode != WrOpcode::kWriteImm) {
    return fail(Error::kInvalidArgument);
  }
  if (wr.length > (1ull << 31)) return fail(Error::kInvalidArgument);  // IBTA max message
  if (wr.remote_addr + wr.length < wr.remote_addr) return fail(Error::kInvalidArgument);
  if (tx_.sq_tail - tx_.sq_head >= create_.sq_depth) return fail(Error::kQueueFull);
  const uint8_t* local = nullptr;
  if (wr.length > 0) {
    auto region = env_.memory.check_local(wr.lkey, wr.local_addr, wr.length);
    if (!region) return fail(region.error());
    if ((*region)->base) local = (*region)->base + (wr.local_addr - (*region)->iova);
  }
  tx_.ensure_rings(env_, paths_.size(), is_mrc(), create_.sq_depth);
  tx_.post(wr, local, mtu_, create_.sq_sig_all, create_.sq_depth);
  (void)now;
  mark_ready();
  return {};
}

Status Qp::post_recv(uint64_t wr_id) {
  if (state_ != QpState::kRtr && state_ != QpState::kRts) return fail(Error::kBadQpState);
  ensure_responder();
  return rx_->post_recv(responder_context(), wr_id, create_.rq_depth);
}

// ---------------------------------------------------------------------------------------
// The requester (requester.h).

QpStats Qp::stats() const {
  return tx_.stats(env_);
}

// A probe reply answers one of this QP's path probes, or (tagged) one of its reverse set's.
void Qp::on_probe_reply(Time now, const RxPacket& rx) {
  const wire::ProbeExt& pr = rx.pkt.probe;
  if (pr.ev_index >= paths_.size()) return;
  const RequesterContext c = requester_context();
  if (pr.probe_id & ReversePathSet::kProbeTag) {
    c.report_reverse_change(now, reverse_.on_probe_reply(pr.probe_id, pr.ev_index));
    return;
  }
  c.report_path_change(now, pr.ev_index, paths_.on_probe_reply(pr.ev_index, pr.probe_id, now));
}

// ---------------------------------------------------------------------------------------
// Receive dispatch.

Status Qp::on_packet(Time now, const RxPacket& rx) {
  const wire::TransportPacket& t = rx.pkt;
  const bool receiving = state_ == QpState::kRtr || state_ == QpState::kRts;
  const bool sending = state_ == QpState::kRts;
  switch (t.bth.opcode) {
    case wire::Opcode::kWriteOnly:
    case wire::Opcode::kWriteOnlyImm:
      if (!receiving) return env_.drop(DropReason::kBadState, Error::kBadQpState);
      ensure_responder_rings();
      return is_mrc() ? rx_->on_data(responder_context(), now, rx)
                      : rx_->on_roce_data(responder_context(), now, rx);
    case wire::Opcode::kAck:
      if (!sending) return env_.drop(DropReason::kBadState, Error::kBadQpState);
      if (auto v = tx_.validate_ack(t.sack, paths_.size()); !v)
        return env_.drop(DropReason::kBadAck, v.error());
      ++env_.counters.acks_received;
      if (is_mrc()) {
        failed(now, tx_.on_ack(requester_context(), now, rx));
      } else {
        tx_.on_roce_ack(requester_context(), now, rx);
      }
      return {};
    case wire::Opcode::kTrimNack:
      if (!sending) return env_.drop(DropReason::kBadState, Error::kBadQpState);
      if (!is_mrc()) return env_.drop(DropReason::kBadOpcode, Error::kBadOpcode);
      // A NACK for a PSN never sent, or on a path we do not have, is as bad as such an ACK.
      if (psn_diff(tx_.next_psn, t.nack.psn) <= 0 || t.nack.ev_index >= paths_.size())
        return env_.drop(DropReason::kBadAck, Error::kBadExtension);
      tx_.on_trim_nack(requester_context(), now, rx);
      return {};
    case wire::Opcode::kProbe:
      if (!receiving) return env_.drop(DropReason::kBadState, Error::kBadQpState);
      // The reply goes back on the path the probe names: one we have, on a port we have.
      if (t.probe.ev_index >= paths_.size() || t.probe.port >= env_.config.num_ports)
        return env_.drop(DropReason::kInconsistent, Error::kBadExtension);
      ++env_.counters.probes_received;
      on_probe(now, rx);
      return {};
    case wire::Opcode::kProbeReply:
      if (!sending) return env_.drop(DropReason::kBadState, Error::kBadQpState);
      if (t.probe.ev_index >= paths_.size())
        return env_.drop(DropReason::kInconsistent, Error::kBadExtension);
      ++env_.counters.probe_replies_received;
      on_probe_reply(now, rx);
      return {};
    case wire::Opcode::kCnp:
      if (!sending) return env_.drop(DropReason::kBadState, Error::kBadQpState);
      ++env_.counters.cnps_received;
      tx_.on_cnp(requester_context(), now);
      return {};
  }
  return env_.drop(DropReason::kBadOpcode, Error::kBadOpcode);
}

// ---------------------------------------------------------------------------------------
// Probes of the peer (a requester answers the responder's reverse-set probes too).

void Qp::on_probe(Time now, const RxPacket& rx) {
  if (!probe_replies_) probe_replies_ = std::make_unique<Ring<ProbeReply>>();
  if (!probe_replies_->push_back_within(ProbeReply{rx.pkt.probe, rx.port, now}, kProbeReplyQueue,
                                        env_.config.qp_initial_ring)) {
    return;  // overloaded: the prober retries
  }
  mark_control();
}

// ---------------------------------------------------------------------------------------
// Control packets.

bool Qp::has_control() const {
  if (probe_replies_ || probes_due_ || reverse_probe_due_) return true;
  return rx_ && rx_->has_control();
}

bool Qp::produce_control(Time now, uint32_t mask, TxPacket& out) {
  if (state_ == QpState::kErr || state_ == QpState::kReset || state_ == QpState::kInit) {
    return false;
  }
  // The QP's control packets (control.h), in the order they are served. Each row keeps together
  // what one kind needs: whether one is pending, its path, what it carries.
  static constexpr auto kRows = std::tuple{
      // A trimmed packet's NACK: on the reverse EV set, else back the way the packet came.
      control_row(
          ControlKind::kTrimNack, &EngineCounters::nacks_sent,
          [](const Qp& q) { return q.rx_ && !q.rx_->nacks.empty(); },
          [](Qp& q, Time now, uint32_t mask) {
            const TrimNack& n = q.rx_->nacks.front();
            return ControlChoice{q.ack_path(now, n.port, n.ev, mask, false)};
          },
          [](Qp& q, Time, const ControlChoice&, TxPacket& out) {
            const TrimNack n = q.rx_->nacks.pop_front();
            if (q.rx_->nacks.empty()) q.rx_->nacks = {};  // storage only while there is work
            wire::TransportPacket& t = out.pkt;
            t.bth.opcode = wire::Opcode::kTrimNack;
            t.bth.psn = n.psn;
            t.aeth = wire::Aeth{kAethNakSeqErr, q.rx_->window.msg_base() & kPsnMask};
            t.nack = wire::TrimNackExt{n.psn, q.rx_->window.base(), n.ev, 0};
          },
          [](Qp& q, Time now) { q.release_idle_responder(now); }),
      // The ACK (RoCEv2: or the sequence NAK, one per gap, IBTA 9.7.5.2.2).
      control_row(
          ControlKind::kAck, &EngineCounters::acks_sent,
          [](const Qp& q) { return q.rx_ && (q.rx_->roce_nak_pending || q.rx_->ack_now); },
          [](Qp& q, Time now, uint32_t mask) {
            return ControlChoice{q.ack_path(now, q.rx_->ack_port, q.rx_->ack_path, mask, false)};
          },
          [](Qp& q, Time now, const ControlChoice&, TxPacket& out) {
            q.rx_->fill_ack(q.env_, q.is_mrc(), now, out);
            if (q.rx_->roce_nak_pending) {
              out.pkt.aeth.syndrome = kAethNakSeqErr;
              q.rx_->roce_nak_pending = false;
              ++q.env_.counters.nacks_sent;
            }
          },
          [](Qp& q, Time now) { q.release_idle_responder(now); }),
      // The tail-ACK repeat (Engine::set_ack_repeat_after): an ACK too, counted in acks_sent.
      control_row(
          ControlKind::kAckRepeat, &EngineCounters::ack_repeats,
          [](const Qp& q) { return q.rx_ && q.rx_->ack_repeat_now; },
          [](Qp& q, Time now, uint32_t mask) {
            return ControlChoice{q.ack_path(now, q.rx_->ack_port, q.rx_->ack_path, mask, true)};
          },
          [](Qp& q, Time now, const ControlChoice&, TxPacket& out) {
            q.rx_->fill_ack(q.env_, q.is_mrc(), now,
                            out);  // no echoes: an arrival since the last ACK cancels the repeat
            q.rx_->ack_repeat_due = kNever;  // once per quiet spell
            ++q.env_.counters.acks_sent;
          },
          [](Qp& q, Time now) { q.release_idle_responder(now); }),
      // RoCEv2's congestion notification (DCQCN's notification point, on_roce_data).
      control_row(
          ControlKind::kCnp, &EngineCounters::cnps_sent,
          [](const Qp& q) { return q.rx_ && q.rx_->cnp_pending; },
          [](Qp& q, Time now, uint32_t mask) {
            return ControlChoice{
                control_path(q.paths_, now, q.rx_->ack_port, q.rx_->ack_path, mask, false)};
          },
          [](Qp& q, Time now, const ControlChoice&, TxPacket& out) {
            q.rx_->cnp_pending = false;
            q.rx_->cnp_ever = true;
            q.rx_->last_cnp = now;
            out.pkt.bth.opcode = wire::Opcode::kCnp;
            out.pkt.bth.becn = true;
          },
          NothingAfter{}),
      // A reply to the peer's probe, on the port the probe came in on, so the probe measures
      // that plane (probe_reply_path).
      control_row(
          ControlKind::kProbeReply, &EngineCounters::probe_replies_sent,
          [](const Qp& q) { return q.probe_replies_ != nullptr; },
          [](Qp& q, Time now, uint32_t mask) {
            const ProbeReply& r = q.probe_replies_->front();
            return ControlChoice{probe_reply_path(q.paths_, now, r.port, r.probe.ev_index, mask)};
          },
          [](Qp& q, Time now, const ControlChoice&, TxPacket& out) {
            const ProbeReply r = q.probe_replies_->pop_front();
            if (q.probe_replies_->empty()) q.probe_replies_.reset();
            out.pkt.bth.opcode = wire::Opcode::kProbeReply;
            out.pkt.probe = r.probe;
            out.pkt.probe.service_time_ns =
                static_cast<uint32_t>((now - r.arrived) / kPicosPerNano);
          },
          NothingAfter{}),
      // A probe of a path out of use (PathSet::take_due_probe).
      control_row(
          ControlKind::kProbe, &EngineCounters::probes_sent,
          [](const Qp& q) { return q.probes_due_ && q.state_ == QpState::kRts; },
          [](Qp& q, Time now, uint32_t mask) {
            // The NIC's probe budget (EngineConfig::probe_budget_*): without a token every due
            // probe waits for the next one, and the QP's timer brings it back then.
            if (!q.env_.take_probe_token(now)) {
              ++q.env_.counters.probes_deferred;
              q.paths_.defer_probes(q.env_.next_probe_token());
              q.probes_due_ = false;
              q.env_.rearm(q.armed, q.qpn_, q.deadline());
              return ControlChoice{PathSet::kNone, true};
            }
            ControlChoice c;
            bool unanswered = false;
            c.path = q.paths_.take_due_probe(now, mask, &c.probe_id, &unanswered);
            if (unanswered) ++q.env_.counters.probes_unanswered;
            if (c.path != PathSet::kNone) {
              q.probes_due_ = q.paths_.next_probe_time() <= now;
            } else {
              q.env_.refund_probe_token();  // none could go on the ports in `mask`
              if (q.paths_.next_probe_time() > now) q.probes_due_ = false;
            }
            return c;
          },
          [](Qp& q, Time now, const ControlChoice& c, TxPacket& out) {
            out.pkt.bth.opcode = wire::Opcode::kProbe;
            out.pkt.probe = wire::ProbeExt{
                c.probe_id, now, 0, static_cast<uint16_t>(c.path), q.paths_.port_of(c.path), 0};
          },
          NothingAfter{}),
      // Paper 2.4: one probe per interval on the reverse set while the QP only receives. It
      // shares the NIC's probe budget with the path probes.
      control_row(
          ControlKind::kReverseProbe, &EngineCounters::reverse_probes_sent,
          [](const Qp& q) { return q.reverse_probe_due_; },
          [](Qp& q, Time now, uint32_t mask) {
            if (!q.env_.take_probe_token(now)) {
              ++q.env_.counters.probes_deferred;
              q.reverse_.defer_probe(q.env_.next_probe_token());
              q.reverse_probe_due_ = false;
              q.env_.rearm(q.armed, q.qpn_, q.deadline());
              return ControlChoice{PathSet::kNone, true};
            }
            const ReversePathSet::Probe p = q.reverse_.take_probe(
                now, mask, q.paths_, q.env_.reverse_probe_interval(),
                q.state_ == QpState::kRts && q.tx_.has_outstanding(q.paths_), q.seed_);
            if (p.previous_unanswered) ++q.env_.counters.reverse_probes_unanswered;
            q.requester_context().report_reverse_change(now, p.mapped_out);
            if (q.reverse_.next_probe_time() > now) q.reverse_probe_due_ = false;
            if (p.path == ReversePathSet::kNone) q.env_.refund_probe_token();
            return ControlChoice{p.path, false, p.id};
          },
          [](Qp& q, Time now, const ControlChoice& c, TxPacket& out) {
            out.pkt.bth.opcode = wire::Opcode::kProbe;
            out.pkt.probe = wire::ProbeExt{
                c.probe_id, now, 0, static_cast<uint16_t>(c.path), q.paths_.port_of(c.path), 0};
          },
          NothingAfter{})};
  return emit_control(
      *this, kRows,
      [](Qp& q, TxPacket& o, int path) { fill_common(o, q.paths_, q.address(), path); },
      env_.counters, now, mask, out);
}

ResponderContext Qp::responder_context() {
  return ResponderContext{env_, paths_, reverse_, in_control, qpn_, mtu_, max_wimm_dest_, is_mrc()};
}

int Qp::ack_path(Time now, uint8_t preferred_port, int preferred_path, uint32_t mask, bool repeat) {
  return mrc::ack_path(paths_, reverse_, rx_ ? &rx_->window : nullptr,
                       env_.config.ack_waits_for_port, now, preferred_port, preferred_path,
                       LastAck{rx_->last_ack_port, rx_->last_ack_path}, mask, repeat);
}

// ---------------------------------------------------------------------------------------
// Timers and ports.

Time Qp::deadline() const {
  Time d = kNever;
  if (rx_) d = rx_->deadline();
  if (!reverse_probe_due_) d = std::min(d, reverse_.next_probe_time());
  if (state_ != QpState::kRts) return d;
  d = std::min(d, tx_.deadline(env_, paths_, is_mrc()));
  if (!probes_due_) d = std::min(d, paths_.next_probe_time());
  return d;
}

void Qp::on_timer(Time now) {
  if (rx_ && rx_->on_timer(now)) mark_control();
  if (!reverse_probe_due_ && reverse_.next_probe_time() <= now) {
    reverse_probe_due_ = true;
    mark_control();
  }
  if (state_ != QpState::kRts) return;
  if (failed(now, tx_.on_timer(requester_context(), now))) return;
  if (!probes_due_ && paths_.next_probe_time() <= now) {
    probes_due_ = true;
    mark_control();
  }
}

void Qp::set_port_up(Time now, uint8_t port, bool up) {
  if (state_ == QpState::kReset) return;
  paths_.set_port_up(port, up, now);
  // Packets that left on a dead port are gone: resend them elsewhere at once. The paths
  // themselves are not to blame, so they keep their state for when the port returns.
  if (!up && state_ == QpState::kRts) tx_.resend_on_port(requester_context(), now, port);
  mark_ready();
}

Status Qp::set_path_denied(Time now, int ev_index, bool denied) {
  if (state_ == QpState::kReset) return fail(Error::kBadQpState);
  if (ev_index < 0 || static_cast<size_t>(ev_index) >= paths_.size()) {
    return fail(Error::kInvalidArgument);
  }
  const RequesterContext c = requester_context();
  c.report_path_change(now, ev_index, paths_.set_denied(ev_index, denied));
  if (denied && state_ == QpState::kRts) tx_.resend_on_path(c, now, ev_index);
  mark_ready();
  return {};
}

// The old EV leaves the set the way a denied one does (its packets in flight are resent on
// other paths, no path is marked), then the new one takes its index: a later ACK, NACK or
// probe reply for the old EV then names a path that no longer holds what it was sent on, so
// only retransmissions -- never loss marking -- may follow from it (engine.h replace_path).
Status Qp::replace_path(Time now, int ev_index, const PathDesc& desc) {
  if (state_ == QpState::kReset) return fail(Error::kBadQpState);
  if (ev_index < 0 || static_cast<size_t>(ev_index) >= paths_.size()) {
    return fail(Error::kInvalidArgument);
  }
  if (auto st = paths_.replace(ev_index, desc); !st) return st;
  // A reverse slot on it would carry ACKs on an EV no probe has tried: take another.
  const RequesterContext c = requester_context();
  c.report_reverse_change(now, reverse_.on_path_unusable(ev_index, paths_, seed_));
  if (state_ == QpState::kRts) tx_.resend_on_path(c, now, ev_index);
  mark_ready();
  return {};
}

// OCP mrc.h 3.8: timeout, retry counts and max_wimm are the RTS transition's attributes,
// max_wimm_dest the RTR transition's; a live QP takes new values of them here. Everything is
// checked before anything changes.
Status Qp::update(const QpUpdate& u) {
  const bool requester = u.timeout || u.retry_linear || u.retry_exp || u.max_wimm;
  const bool responder = u.max_wimm_dest.has_value();
  if (!requester && !responder) return {};
  if (requester && state_ != QpState::kRts) return fail(Error::kBadQpState);
  if (responder && state_ != QpState::kRtr && state_ != QpState::kRts) {
    return fail(Error::kBadQpState);
  }
  if ((u.timeout && *u.timeout > 24) || (u.retry_linear && *u.retry_linear > 7) ||
      (u.retry_exp && *u.retry_exp > 25) || (u.max_wimm && *u.max_wimm == 0) ||
      (u.max_wimm_dest && *u.max_wimm_dest == 0)) {
    return fail(Error::kInvalidArgument);
  }
  if (requester) {
    LossDetector& loss = tx_.ensure_loss();
    if (u.timeout) loss.set_timeout(*u.timeout);
    const LossTiming& lt = loss.timing();
    loss.set_retry(u.retry_linear.value_or(lt.retry_linear), u.retry_exp.value_or(lt.retry_exp));
  }
  if (u.max_wimm) {
    tx_.max_wimm = *u.max_wimm;
    mark_ready();  // WRITE_IMMs held by the old limit may go now
  }
  if (u.max_wimm_dest) max_wimm_dest_ = *u.max_wimm_dest;
  return {};
}

QpLimits Qp::limits() const {
  const LossTiming lt = tx_.loss ? tx_.loss->timing() : tx_.loss_timing();
  return QpLimits{lt.timeout,     lt.retry_linear, lt.retry_exp,  tx_.max_wimm,
                  max_wimm_dest_, tx_.mpr_psns,    mpr_dest_psns_};
}

// OCP 5.5 CC CONFIG on an ONLINE profile: the running algorithm takes the new parameters and
// keeps its state (engine.h reconfigure_cc).
Status Qp::reconfigure_cc(const CcSpec& c) {
  if (state_ == QpState::kReset) return fail(Error::kBadQpState);
  if (c.algorithm != cc_spec_->algorithm) return fail(Error::kInvalidArgument);
  switch (c.algorithm) {
    case CcAlgorithm::kNscc:
      if (c.nscc.base_rtt == 0) return fail(Error::kInvalidArgument);
      break;
    case CcAlgorithm::kFixedWindow:
      if (c.fixed_window == 0) return fail(Error::kInvalidArgument);
      break;
    case CcAlgorithm::kDcqcn:
      return fail(Error::kInvalidArgument);
    case CcAlgorithm::kNone:
      break;
  }
  cc_spec_ = env_.cc_specs.get(c, [](const CcSpec& spec) { return spec; });
  if (!tx_.cc) return {};  // before RTS: used when the controller is made at RTS
  if (c.algorithm == CcAlgorithm::kNscc) {
    cc::NsccConfig cfg = c.nscc;
    cfg.mtu = mtu_;
    static_cast<cc::Nscc*>(tx_.cc.get())->reconfigure(env_.nscc_params.get(cfg, cc::resolve_nscc));
  } else if (c.algorithm == CcAlgorithm::kFixedWindow) {
    static_cast<cc::FixedWindow*>(tx_.cc.get())->set_window(c.fixed_window);
  }
  mark_ready();  // a larger window may let packets go
  return {};
}

}  // namespace mrc
