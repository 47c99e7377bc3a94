#include "transport/qp.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "transport/cc/fixed_window.h"
#include "transport/cc/nscc.h"
#include "transport/control.h"
#include "transport/event_log.h"
#include "transport/psn.h"

namespace mrc {

namespace {

uint32_t pow2_at_least(uint64_t n) {
  return static_cast<uint32_t>(std::bit_ceil(std::max<uint64_t>(n, 1)));
}

uint32_t pad_bytes(uint32_t payload) {
  return (4 - (payload & 3)) & 3;
}

// Bytes above UDP: BTH + extensions + payload + pad + ICRC (docs/wire-format.md).
uint32_t data_wire_bytes(bool imm, uint32_t payload) {
  return wire::kBthBytes + wire::kRethBytes + (imm ? wire::kImmDtBytes : 0) + wire::kDataExtBytes +
         payload + pad_bytes(payload) + wire::kIcrcBytes;
}

// Whether an AETH syndrome is a NAK (IBTA 9.7.5.1.1; control.h has the two a QP sends).
bool aeth_is_nak(uint8_t syndrome) {
  return (syndrome & 0x60) == 0x60;
}

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
  mpr_psns_ = 128u * a.mpr;
  max_wimm_ = a.max_wimm;
  tx_.pkt_limit = pow2_at_least(mpr_psns_);
  loss_timeout_ = a.timeout;
  loss_retry_linear_ = a.retry_linear;
  loss_retry_exp_ = a.retry_exp;
  tx_.loss_reorder_window = a.reorder_window;
  if (tx_.loss) tx_.loss->start(2 * tx_.pkt_limit, loss_timing(), a.sq_psn);
  tx_.retx.clear();
  tx_.snd_una = tx_.next_psn = tx_.gbn_next = a.sq_psn;
  switch (cc_spec_->algorithm) {
    case CcAlgorithm::kNscc: {
      cc::NsccConfig cfg = cc_spec_->nscc;
      cfg.mtu = mtu_;
      cc_ =
          std::make_unique<cc::Nscc>(env_.nscc_params.get(cfg, cc::resolve_nscc), &env_.nscc_stats);
      break;
    }
    case CcAlgorithm::kDcqcn: {
      cc::DcqcnConfig cfg = cc_spec_->dcqcn;
      cfg.mtu = mtu_;
      cc_ = cc::make_dcqcn(cfg);
      break;
    }
    case CcAlgorithm::kFixedWindow:
      cc_ = cc::make_fixed_window(cc_spec_->fixed_window);
      break;
    case CcAlgorithm::kNone:
      cc_.reset();
      break;
  }
  tx_.rts_at = now;
  if (tx_.loss) tx_.loss->restart_rto_clock(now);
  state_ = QpState::kRts;
  return {};
}

void Qp::to_err(Time now, WcStatus first_status) {
  const bool was_error = state_ == QpState::kErr;
  state_ = QpState::kErr;
  tx_.flush(env_, qpn_, now, first_status);
  wimm_outstanding_ = 0;
  if (rx_) rx_->flush(env_, qpn_, now);
  probe_replies_.reset();
  probes_due_ = false;
  pacing_wait_until_ = kNever;
  if (!was_error) {
    env_.emit_event(
        Event{EventType::kQpError, qpn_, 0, 0, ev::EvState::kGood, ev::EvState::kGood, now});
  }
}

QpMemory Qp::memory() const {
  QpMemory m;
  m.object = sizeof(Qp);
  m.paths = paths_.heap_bytes() + reverse_.heap_bytes();
  m.rings = tx_.sq.capacity() * sizeof(SendWr) + tx_.pkts.capacity() * sizeof(TxPkt) +
            tx_.retx.storage_bytes() +
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
  m.cc = cc_ ? cc_->object_bytes() : 0;
  return m;
}

// ---------------------------------------------------------------------------------------
// Posting work.

// A QP's rings are allocated when its role first needs them (many QPs of a large
// simulation only ever send or only ever receive), small, and grow with what is in flight
// (qp.h). RoCEv2 keeps no transmission records.
void Qp::ensure_requester_rings() {
  if (!tx_.sq.empty()) return;
  tx_.sq.resize(std::clamp<uint32_t>(env_.config.qp_initial_ring, 1, create_.sq_depth));
  const uint32_t n = initial_ring(tx_.pkt_limit);
  tx_.pkts.assign(n, TxPkt{});
  tx_.pkt_mask = n - 1;
  tx_.retx = Ring<uint32_t>(n);
  ensure_loss();
  if (is_mrc()) tx_.loss->allocate(2 * n, paths_.size());
}

// What LossDetector::start would have been given at RTS, and the clock it would have
// restarted then: a detector made later starts where one made at RTS would be.
LossTiming Qp::loss_timing() const {
  return LossTiming{loss_timeout_, loss_retry_linear_, loss_retry_exp_, tx_.loss_reorder_window};
}

LossDetector& Qp::ensure_loss() {
  if (!tx_.loss) {
    tx_.loss = std::make_unique<LossDetector>();
    // Nothing has been sent before the detector exists: tx_.snd_una is still RTS's sq_psn.
    tx_.loss->start(2 * tx_.pkt_limit, loss_timing(), tx_.snd_una);
    tx_.loss->restart_rto_clock(tx_.rts_at);
  }
  return *tx_.loss;
}

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

// A QP keeps its rings only while it has work (docs/performance.md, "Bytes per QP"): a
// simulated all-to-all holds ~a million QPs, each of which sends or receives a few messages.
// The requester's go once every WR has completed and every PSN is acknowledged (then every
// transmission record has been retired too: the ACK's RACK pass retires records that are not
// current); the next post_write allocates them again.
void Qp::release_idle_requester_rings(Time now) {
  if (tx_.sq.empty() || !tx_.rings_idle()) return;
  tx_.release_rings();
  paths_.release_idle(now);
}

uint32_t Qp::initial_ring(uint32_t limit) const {
  const uint64_t want = std::bit_ceil(std::max<uint64_t>(env_.config.qp_initial_ring, 1));
  return static_cast<uint32_t>(std::min<uint64_t>(want, limit));
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
  ensure_requester_rings();
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
// Requester: sending.

bool Qp::window_allows_new(const SendWr& w) const {
  if (tx_.outstanding_psns() >= mpr_psns_) return false;  // MPR
  if (is_mrc() && tx_.loss->full()) return false;
  if (w.next_pkt == 0 && w.with_imm && wimm_outstanding_ >= max_wimm_) return false;  // WIMM
  return true;
}

bool Qp::cc_allows(Time now, uint32_t bytes) const {
  if (!cc_) return true;
  if (tx_.inflight_bytes > 0 && tx_.inflight_bytes + bytes > cc_->cwnd()) return false;
  return cc_->next_send_time() <= now;
}

Qp::DataResult Qp::blocked_by_cc(Time now) {
  if (cc_ && cc_->next_send_time() > now) pacing_wait_until_ = cc_->next_send_time();
  return DataResult::kIdle;
}

Qp::DataResult Qp::produce_data(Time now, uint32_t mask, TxPacket& out) {
  if (state_ != QpState::kRts) return DataResult::kIdle;
  if (!is_mrc()) return produce_roce_data(now, mask, out);

  // Retransmissions first, each on a different path than the one that lost it.
  while (!tx_.retx.empty()) {
    const uint32_t psn = tx_.retx.front();
    TxPkt& p = tx_.pkt(psn);
    if (p.state != PktState::kLost || !tx_.psn_in_flight_range(psn)) {
      tx_.retx.pop_front();
      continue;
    }
    // A tail-loss probe is not held back by congestion control (RFC 9002 6.2.4): when every
    // ACK of a flight was lost the window never opens again, and only the probe's ACK can
    // open it before the ACK timeout declares the whole window lost.
    if (!tx_.loss->pto_probe_due() && !cc_allows(now, p.bytes)) return blocked_by_cc(now);
    if (tx_.loss->full()) return DataResult::kIdle;
    const int path = paths_.pick(now, mask, p.ev);
    if (path == PathSet::kNone)
      return paths_.usable_count() ? DataResult::kPortsBusy : DataResult::kIdle;
    tx_.loss->clear_pto_probe();
    tx_.retx.pop_front();
    fill_data(now, psn, path, true, out);
    return DataResult::kSent;
  }

  uint32_t bytes = 0;
  DataResult why_not = DataResult::kIdle;
  SendWr* w = sendable_new_packet(now, bytes, why_not);
  if (!w) return why_not;
  const int path = paths_.pick(now, mask);
  if (path == PathSet::kNone)
    return paths_.usable_count() ? DataResult::kPortsBusy : DataResult::kIdle;
  start_new_packet(now, *w, bytes);
  fill_data(now, psn_add(tx_.next_psn, -1), path, false, out);
  return DataResult::kSent;
}

// The WR whose next packet may go out now as a new PSN, and that packet's size; nullptr
// (with the reason in `why_not`) when there is no work or a window (MPR, WIMM, record ring)
// or congestion control holds it back.
Qp::SendWr* Qp::sendable_new_packet(Time now, uint32_t& bytes, DataResult& why_not) {
  why_not = DataResult::kIdle;
  if (tx_.sq_send == tx_.sq_tail) return nullptr;
  SendWr& w = tx_.wr_at(tx_.sq_send);
  if (!window_allows_new(w)) return nullptr;
  const uint64_t off = static_cast<uint64_t>(w.next_pkt) * mtu_;
  bytes = static_cast<uint32_t>(std::min<uint64_t>(mtu_, w.length - off));
  if (!cc_allows(now, bytes)) {
    why_not = blocked_by_cc(now);
    return nullptr;
  }
  return &w;
}

void Qp::start_new_packet(Time now, SendWr& w, uint32_t bytes) {
  // The ACK timeout counts time without progress while something is outstanding, so a packet
  // that leaves with nothing outstanding starts its clock (RFC 6298 5.1; IBTA's transport
  // timer likewise runs only while requests are outstanding). Otherwise a QP idle for longer
  // than the timeout finds it already due when its first ACK arrives: a spurious timeout
  // that declares the whole window lost.
  if (tx_.snd_una == tx_.next_psn) tx_.loss->restart_rto_clock(now);
  // The PSN ring grows here only, where a PSN is taken (window_allows_new keeps the
  // outstanding range within tx_.pkt_limit). A tail call, so that the common path needs no
  // stack frame: ~20 instructions per packet otherwise (callgrind, benchmark A at 128 hosts).
  if (((tx_.next_psn - tx_.snd_una) & kPsnMask) > tx_.pkt_mask) [[unlikely]] {
    return grow_and_start_new_packet(now, w, bytes);
  }
  const uint32_t psn = tx_.next_psn;
  tx_.next_psn = psn_add(tx_.next_psn, 1);
  TxPkt& p = tx_.pkt(psn);
  p = TxPkt{};
  p.wr_seq = tx_.sq_send;
  p.pkt_index = w.next_pkt;
  p.bytes = bytes;
  if (w.next_pkt == 0 && w.with_imm) {
    ++wimm_outstanding_;
    auto& hw = env_.counters.max_outstanding_wimm;
    hw = std::max<uint64_t>(hw, wimm_outstanding_);
  }
  if (++w.next_pkt == w.npkts) ++tx_.sq_send;
  auto& hw = env_.counters.max_outstanding_psns;
  hw = std::max<uint64_t>(hw, tx_.outstanding_psns());
}

void Qp::grow_and_start_new_packet(Time now, SendWr& w, uint32_t bytes) {
  tx_.grow_pkt_ring();
  start_new_packet(now, w, bytes);
}

// RoCEv2 baseline: one path, PSN order, go-back-N from tx_.gbn_next after a NAK or timeout.
Qp::DataResult Qp::produce_roce_data(Time now, uint32_t mask, TxPacket& out) {
  const uint8_t path_port = paths_.port_of(0);
  const bool port_ok = paths_.port_up(path_port);
  if (psn_lt(tx_.gbn_next, tx_.next_psn)) {
    const uint32_t psn = tx_.gbn_next;
    TxPkt& p = tx_.pkt(psn);
    if (!cc_allows(now, p.bytes)) return blocked_by_cc(now);
    if (!port_ok) return DataResult::kIdle;
    if (!((mask >> path_port) & 1)) return DataResult::kPortsBusy;
    tx_.gbn_next = psn_add(tx_.gbn_next, 1);
    fill_data(now, psn, 0, true, out);
    return DataResult::kSent;
  }
  uint32_t bytes = 0;
  DataResult why_not = DataResult::kIdle;
  SendWr* w = sendable_new_packet(now, bytes, why_not);
  if (!w) return why_not;
  if (!port_ok) return DataResult::kIdle;
  if (!((mask >> path_port) & 1)) return DataResult::kPortsBusy;
  start_new_packet(now, *w, bytes);
  tx_.gbn_next = tx_.next_psn;
  fill_data(now, psn_add(tx_.next_psn, -1), 0, false, out);
  return DataResult::kSent;
}

void Qp::fill_data(Time now, uint32_t psn, int path, bool retransmit, TxPacket& out) {
  TxPkt& p = tx_.pkt(psn);
  const SendWr& w = tx_.wr_at(p.wr_seq);
  const uint64_t off = static_cast<uint64_t>(p.pkt_index) * mtu_;
  const bool last = p.pkt_index + 1 == w.npkts;
  fill_common(out, paths_.port_of(path), path);
  wire::TransportPacket& t = out.pkt;
  t.bth.opcode = w.with_imm ? wire::Opcode::kWriteOnlyImm : wire::Opcode::kWriteOnly;
  t.bth.psn = psn;
  t.bth.solicited = last && w.with_imm;
  // Ask for a prompt ACK at the end of a message (its completion waits for it), when the
  // window is about to close, and for retransmissions (recovery is waiting).
  const bool ack_now = last || retransmit || tx_.outstanding_psns() + 8 >= mpr_psns_;
  t.bth.ack_req = ack_now;
  t.reth = wire::Reth{w.remote_addr + off, w.rkey, p.bytes};
  t.imm = w.imm;
  uint16_t flags = 0;
  if (retransmit) flags |= wire::DataExt::kRetransmit;
  if (last) flags |= wire::DataExt::kLastOfMessage;
  if (w.with_imm) flags |= wire::DataExt::kHasImm;
  if (ack_now) flags |= wire::DataExt::kAckNow;
  t.data = wire::DataExt{w.msg_num, p.pkt_index, w.npkts, now, static_cast<uint16_t>(path), flags};
  t.payload = w.local ? w.local + off : nullptr;
  t.payload_len = p.bytes;
  out.transport_bytes = data_wire_bytes(w.with_imm, p.bytes);

  if (p.state != PktState::kInflight) tx_.inflight_bytes += p.bytes;
  p.state = PktState::kInflight;
  p.sent_at = now;
  p.ev = static_cast<uint16_t>(path);
  if (p.transmissions < Requester::kMaxTransmissions) ++p.transmissions;
  if (is_mrc()) p.rec = tx_.loss->record(psn, path, now);
  if (cc_) cc_->on_send(now, p.bytes, tx_.inflight_bytes);
  if (retransmit) {
    ++env_.counters.retransmits;
    ++sent_.retransmits;
  } else {
    ++env_.counters.data_sent;
    ++sent_.data_sent;
  }
}

// ---------------------------------------------------------------------------------------
// Requester: acknowledgements and loss detection.

bool Qp::ack_psn(Time now, uint32_t psn) {
  TxPkt& p = tx_.pkt(psn);
  if (p.state == PktState::kAcked || p.state == PktState::kFree) return false;
  if (is_mrc() && p.state == PktState::kLost && p.transmissions > 1)
    ++env_.counters.losses_acked_before_resend;
  if (is_mrc() && p.state == PktState::kLost && p.transmissions == 1) {
    // Declared lost, but the only transmission was delivered: reordering, not loss. Same
    // lesson as a spurious retransmission (the path works; widen the reordering window).
    ++env_.counters.losses_undone;
    on_spurious_loss(now, p.ev, p.lost_to_pto);
    // Timing evidence only if the previous ACK could have reported this PSN (its bitmap
    // reached it): then it arrived after that ACK left. Beyond that reach a hole hides a
    // PSN until the hole is filled, and its send-to-ACK time would be the whole recovery's.
    if (tx_.loss->reportable_by_last_ack(psn)) tx_.loss->learn_pto_floor(now, p.sent_at);
  } else {
    tx_.loss->age_pto_floor(now);
  }
  if (p.state == PktState::kInflight)
    tx_.inflight_bytes -= std::min<uint64_t>(tx_.inflight_bytes, p.bytes);
  p.state = PktState::kAcked;
  ++tx_.wr_at(p.wr_seq).acked_pkts;
  // With a single transmission we know exactly which send was delivered (RACK needs that).
  if (p.transmissions == 1) note_delivered(p.sent_at, p.rec, p.ev);
  return true;
}

void Qp::note_delivered(Time sent_at, uint32_t seq, uint16_t ev) {
  tx_.loss->note_delivered(sent_at, seq, transmit_queue(ev));
}

uint32_t Qp::transmit_queue(uint16_t ev) const {
  return env_.transmit_order == TransmitOrder::kPerPort ? paths_.port_of(ev) : ev;
}

QpStats Qp::stats() const {
  QpStats s;
  s.data_sent = sent_.data_sent;
  s.retransmits = sent_.retransmits;
  if (tx_.loss) {
    s.srtt = tx_.loss->srtt();
    s.reorder_window = tx_.loss->reorder_window(loss_context());
  }
  return s;
}

LossContext Qp::loss_context() const {
  return LossContext{env_.borrowed_rtt(), env_.config.ack_delay};
}

void Qp::on_ack(Time now, const RxPacket& rx) {
  ensure_loss();  // an ACK before any post (stray) still reaches the detector
  const wire::SackExt& s = rx.pkt.sack;
  if (tx_.contradicts_acknowledged(s)) {
    ++env_.counters.ack_contradictions;
    to_err(now, WcStatus::kAckContradiction);
    return;
  }
  bool progress = false;
  if (s.ports_down != paths_.peer_ports_down()) on_peer_ports(now, s.ports_down);
  tx_.learn_pto_floor_from_echoes(now, s);
  // 1. Cumulative part.
  if (psn_diff(s.cum_psn, tx_.snd_una) > 0) {
    for (uint32_t psn = tx_.snd_una; psn != s.cum_psn; psn = psn_add(psn, 1)) {
      progress |= ack_psn(now, psn);
    }
  }
  // 2. Selective part: only bits inside what is outstanding.
  for_each_sacked_psn(s, [&](uint32_t psn) {
    if (tx_.psn_in_flight_range(psn)) progress |= ack_psn(now, psn);
    return true;
  });
  // 3. Echoes: per-packet ECN/trim/path attribution, RTT samples, per-path loss detection.
  const Time service = static_cast<Time>(s.service_time_ns) * kPicosPerNano;
  for (int i = 0; i < s.echo_count; ++i) {
    const wire::AckEcho& e = s.echo[static_cast<size_t>(i)];
    if (e.flags & wire::AckEcho::kDuplicate) on_duplicate_echo(tx_.lost_to_pto(e.psn));
    if (e.ev_index >= paths_.size() || !tx_.psn_in_flight_range(e.psn)) continue;
    TxPkt& p = tx_.pkt(e.psn);
    const bool ecn = e.flags & wire::AckEcho::kEcnCe;
    if (ecn) {
      report_path_change(now, e.ev_index, paths_.on_ecn(e.ev_index, now));
    } else {
      paths_.on_unmarked(e.ev_index);
    }
    // The echo names the path it arrived on; if that is the latest transmission's path we
    // know which send it was (retransmissions always change path when they can).
    const bool exact = p.ev == e.ev_index && p.transmissions > 0 && p.state != PktState::kFree;
    Time rtt = 0;
    if (exact) {
      note_delivered(p.sent_at, p.rec, p.ev);
      const Time raw = now > p.sent_at ? now - p.sent_at : 0;
      rtt = raw > service ? raw - service : raw;
      if (!(e.flags & wire::AckEcho::kDuplicate)) {
        tx_.loss->rtt_sample(rtt, raw);
        env_.note_rtt_sample(raw);
      }
      detect_losses_on_path(now, e.ev_index, p.rec,
                            psn_add(s.sack_base, 64 * wire::kSackBitmapWords));
    } else if (p.transmissions > 1 && p.state != PktState::kFree &&
               !(e.flags & wire::AckEcho::kDuplicate)) {
      on_spurious_loss(now, e.ev_index, p.lost_to_pto);
    } else if (p.transmissions > 1 && p.state != PktState::kFree) {
      // A duplicate that came by another path than the latest transmission: an earlier
      // transmission, declared lost on that path, arrived after all. The loss no longer counts
      // against the path (PathSet::on_delivered; the window was widened above).
      report_path_change(now, e.ev_index, paths_.on_delivered(e.ev_index));
    }
    const uint32_t bytes = p.bytes;
    progress |= ack_psn(now, e.psn);
    if (cc_ && exact) cc_->on_ack(cc::AckSample{now, bytes, rtt, ecn, false}, tx_.inflight_bytes);
  }
  // 4. RACK: anything sent well before a delivered packet is lost (judged against this
  // ACK's bitmap reach).
  tx_.loss->note_ack_reach(s.sack_base);
  detect_losses_rack(now, false);
  if (progress) {
    tx_.loss->on_answer(now);
    tx_.loss->clear_pto_probe();
  }
  const uint32_t una_before = tx_.snd_una;
  tx_.advance_una();
  if (tx_.snd_una != una_before) tx_.loss->mark();
  if (progress) {
    ++env_.counters.acks_advancing;
    ++env_.counters.acks_advancing_by_port[rx.port & 31];
  }
  tx_.complete_send_wrs(env_, qpn_, now, wimm_outstanding_);
  release_idle_requester_rings(now);
  mark_ready();
}

void Qp::on_roce_ack(Time now, const RxPacket& rx) {
  ensure_loss();
  const wire::SackExt& s = rx.pkt.sack;
  bool progress = false;
  if (psn_diff(s.cum_psn, tx_.snd_una) > 0) {
    for (uint32_t psn = tx_.snd_una; psn != s.cum_psn; psn = psn_add(psn, 1)) {
      const TxPkt& p = tx_.pkt(psn);
      const Time sent = p.sent_at;
      const uint32_t bytes = p.bytes;
      progress |= ack_psn(now, psn);
      if (cc_ && psn_add(psn, 1) == s.cum_psn && now > sent) {
        cc_->on_ack(cc::AckSample{now, bytes, now - sent, false, false}, tx_.inflight_bytes);
      }
    }
  }
  if (aeth_is_nak(rx.pkt.aeth.syndrome)) {
    // PSN sequence error: the responder expects cum_psn. Go back and resend from there.
    ++env_.counters.losses_detected;
    if (psn_lt(s.cum_psn, tx_.gbn_next)) {
      // A NAK overtaken by a later ACK may name PSNs before tx_.snd_una: acknowledged, freed,
      // and no longer in the ring.
      const uint32_t from = psn_lt(s.cum_psn, tx_.snd_una) ? tx_.snd_una : s.cum_psn;
      for (uint32_t psn = from; psn != tx_.gbn_next; psn = psn_add(psn, 1)) {
        TxPkt& p = tx_.pkt(psn);
        if (p.state == PktState::kInflight) {
          tx_.inflight_bytes -= std::min<uint64_t>(tx_.inflight_bytes, p.bytes);
          p.state = PktState::kLost;
        }
      }
      // CC hears of the loss with the first resent packet's size (one MTU if nothing of the
      // stale NAK's range is left in the ring).
      if (cc_) cc_->on_loss(now, from != tx_.gbn_next ? tx_.pkt(from).bytes : mtu_);
      tx_.gbn_next = s.cum_psn;
    }
  }
  if (progress) tx_.loss->on_roce_progress(now);
  tx_.advance_una();
  tx_.complete_send_wrs(env_, qpn_, now, wimm_outstanding_);
  release_idle_requester_rings(now);
  mark_ready();
}

// An earlier transmission of a packet we resent has arrived: the loss was reordering, not
// loss. Widen the reordering window (RFC 8985 section 6.2 grows it the same way on DSACK),
// and give the path back its GOOD state: it has just delivered a packet. A loss the tail-loss
// probe declared (`by_pto`) says nothing of reordering: no later packet had arrived, the PTO
// only expired before the ACK came (a responder descheduled for milliseconds), which the PTO
// floor learns (LossDetector::learn_pto_floor). Widening on it too left a software path's
// window milliseconds wide after a few such stalls, and a blackholed path's packets waited
// that long for RACK (docs/libfabric.md, "Through faults").
void Qp::on_spurious_loss(Time now, uint16_t ev, bool by_pto) {
  ++env_.counters.spurious_losses;
  if (!by_pto) tx_.loss->widen_reorder_window();
  report_path_change(now, ev, paths_.on_delivered(ev));
}

// The responder already had a PSN when another copy arrived (a DSACK). Copies exist only
// because we resent, so a loss we declared was reordering after all: widen the window as RFC
// 8985 6.2 does on DSACK. This sees what on_spurious_loss's callers cannot: an original
// acknowledged only after its retransmission had left, as when a software responder reads
// one plane's socket hundreds of microseconds after another's (the ACK reports the newer
// plane's packets, RACK declares the older plane's lost, and every retransmission then
// arrives as a duplicate). The original's path is not known here; its probe brings it back.
void Qp::on_duplicate_echo(bool by_pto) {
  ++env_.counters.duplicate_retransmits;
  if (!by_pto) tx_.loss->widen_reorder_window();
}

void Qp::detect_losses_on_path(Time now, uint16_t ev, uint32_t upto, uint32_t known_end) {
  tx_.loss->detect_on_path(
      ev, upto, known_end, [this](uint32_t seq) { return tx_.record_current(seq); },
      [this, now](uint32_t psn, LossCause cause) { declare_lost(now, psn, true, cause); });
}

void Qp::detect_losses_rack(Time now, bool check_pto) {
  tx_.loss->detect_rack(
      now, check_pto, loss_context(), [this](uint32_t seq) { return tx_.record_current(seq); },
      [this](uint16_t ev) { return transmit_queue(ev); },
      [this, now](uint32_t psn, LossCause cause) {
        if (cause == LossCause::kPto && tx_.loss->srtt() == 0)
          ++env_.counters.losses_pto_borrowed_rtt;
        // RACK's evidence is a later transmission delivered; for a PSN beyond the newest
        // ACK's bitmap that is no evidence the PSN was not: only an echo could have said
        // so, and echoes die with their ACK (a peer port that went down, paper 3). Resend
        // it, but leave its path in use: a false loss there would take working EVs out of
        // use until probes bring them back (a ring through a flapping T0, Figs 6-7).
        const bool blame = cause != LossCause::kRack || tx_.loss->reportable_by_last_ack(psn);
        declare_lost(now, psn, blame, cause);
      });
}

void Qp::declare_lost(Time now, uint32_t psn, bool mark_path, LossCause cause) {
  TxPkt& p = tx_.pkt(psn);
  if (p.state != PktState::kInflight) return;
  EngineCounters& c = env_.counters;
  switch (cause) {
    case LossCause::kPathOrder:
      ++c.losses_path_order;
      break;
    case LossCause::kRack:
      ++c.losses_rack;
      break;
    case LossCause::kPto:
      ++c.losses_pto;
      break;
    case LossCause::kRto:
      ++c.losses_rto;
      break;
    case LossCause::kTrim:
    case LossCause::kOther:
      ++c.losses_other;
      break;
  }
  tx_.loss->note_loss(cause);
  if (env_.logging()) [[unlikely]] {
    LogRecord r(now, LogKind::kPacketLost, qpn_);
    r.psn = psn;
    r.ev = p.ev;
    r.port = paths_.port_of(p.ev);
    r.bytes = p.bytes;
    r.cause = cause;
    env_.record(r);
  }
  p.state = PktState::kLost;
  p.lost_to_pto = cause == LossCause::kPto;
  tx_.inflight_bytes -= std::min<uint64_t>(tx_.inflight_bytes, p.bytes);
  if (tx_.retx.full()) {
    tx_.compact_retx();
    // Entries left are distinct lost PSNs in flight, fewer than tx_.pkt_limit, so the ring never
    // needs more. Growing once it stays over half full keeps compaction amortized O(1).
    const size_t cap = tx_.retx.capacity();
    if (tx_.retx.size() > (cap - 1) / 2 && cap < tx_.pkt_limit) tx_.retx.reserve(2 * cap);
  }
  tx_.retx.push_back(psn);
  ++env_.counters.losses_detected;
  // Loss is a path signal, trimming the congestion signal (paper 2.1): CC tells them apart
  // (NsccConfig::loss_keep).
  if (cc_) {
    if (cause == LossCause::kTrim) {
      cc_->on_trim_loss(now, p.bytes);
    } else {
      cc_->on_loss(now, p.bytes);
    }
  }
  if (mark_path) {
    const PathStateChange c = paths_.on_loss(p.ev, now);
    if (c.held) ++env_.counters.losses_on_trimming_paths;
    report_path_change(now, p.ev, c);
  }
  mark_ready();
}

bool Qp::has_outstanding() const {
  return tx_.snd_una != tx_.next_psn || (tx_.sq_send != tx_.sq_tail && paths_.usable_count() == 0);
}

void Qp::on_rto(Time now) {
  ++env_.counters.timeouts;
  if (env_.logging()) [[unlikely]] {
    LogRecord r(now, LogKind::kTimeout, qpn_);
    r.psn = tx_.snd_una;
    r.inflight = tx_.inflight_bytes;
    env_.record(r);
  }
  if (!tx_.loss->on_rto()) {
    to_err(now, WcStatus::kRetryExceeded);
    return;
  }
  if (is_mrc()) {
    // A whole ACK timeout without a word from the peer: its last port-state bitmap may be
    // stale (a port it reported down came back while every packet went to another of its
    // ports that has died since, so no ACK could say so). Forget it and try every plane
    // again; a port that is still down loses those packets and the next ACK reports it.
    if (paths_.peer_ports_down() != 0) paths_.set_peer_ports_down(0, now);
    for (uint32_t seq = tx_.loss->head(); seq != tx_.loss->tail(); ++seq) {
      if (tx_.record_current(seq)) declare_lost(now, tx_.loss->at(seq).psn, true, LossCause::kRto);
    }
    detect_losses_rack(now, false);
  } else {
    for (uint32_t psn = tx_.snd_una; psn != tx_.next_psn; psn = psn_add(psn, 1)) {
      TxPkt& p = tx_.pkt(psn);
      if (p.state == PktState::kInflight) {
        tx_.inflight_bytes -= std::min<uint64_t>(tx_.inflight_bytes, p.bytes);
        p.state = PktState::kLost;
      }
    }
    tx_.gbn_next = tx_.snd_una;
    if (cc_ && tx_.snd_una != tx_.next_psn) cc_->on_loss(now, tx_.pkt(tx_.snd_una).bytes);
  }
  tx_.loss->restart_rto_clock(now);
  mark_ready();
}

void Qp::on_trim_nack(Time now, const RxPacket& rx) {
  const wire::TrimNackExt& n = rx.pkt.nack;
  ++env_.counters.trim_nacks_received;
  if (!tx_.psn_in_flight_range(n.psn) || tx_.pkt(n.psn).state != PktState::kInflight ||
      tx_.pkt(n.psn).ev != n.ev_index) {
    ++env_.counters.trim_nacks_stale;  // that transmission is no longer in flight
    return;
  }
  TxPkt& p = tx_.pkt(n.psn);
  // A trim is congestion on that path, not a failure: recycle the path, tell CC, resend.
  if (n.ev_index < paths_.size())
    report_path_change(now, n.ev_index, paths_.on_trim(n.ev_index, now));
  if (cc_) cc_->on_ack(cc::AckSample{now, 0, now - p.sent_at, true, true}, tx_.inflight_bytes);
  const Time sent_at = p.sent_at;
  declare_lost(now, n.psn, false, LossCause::kTrim);
  // The NACK is an answer: the responder hears us and the path delivers (headers, at least).
  // Under a large incast every packet of a flight may be trimmed for a while; that is not the
  // silence the tail-loss probe's backoff and the ACK timeout are for (RFC 8985 7.2, RFC 6298
  // restart on an answer), so both start over.
  tx_.loss->on_answer(now);
  // The trimmed header arrived: a transmission sent a reordering window before it and still
  // unacknowledged was lost (its header dropped at a full queue, or the path failed): RACK,
  // as for a delivered packet (trimmed headers skip the data queues, so they are ahead of
  // the untrimmed packets sent before them by at most those queues, under a window).
  tx_.loss->note_header_delivered(sent_at);
  detect_losses_rack(now, false);
}

void Qp::on_probe_reply(Time now, const RxPacket& rx) {
  const wire::ProbeExt& pr = rx.pkt.probe;
  if (pr.ev_index >= paths_.size()) return;
  if (pr.probe_id & ReversePathSet::kProbeTag) {
    report_reverse_change(now, reverse_.on_probe_reply(pr.probe_id, pr.ev_index));
    return;
  }
  report_path_change(now, pr.ev_index, paths_.on_probe_reply(pr.ev_index, pr.probe_id, now));
}

void Qp::report_reverse_change(Time now, const ReverseChange& c) {
  if (!c.changed) return;
  ++env_.counters.ack_ev_changes;
  Event e{EventType::kAckEvChange,
          qpn_,
          c.to >= 0 ? static_cast<uint16_t>(c.to) : Event::kNoPath,
          reverse_.slot_port(static_cast<uint32_t>(c.slot)),
          c.from >= 0 ? paths_.state_of(c.from) : ev::EvState::kGood,
          c.to >= 0 ? paths_.state_of(c.to) : ev::EvState::kGood,
          now};
  e.replaced = c.from >= 0 ? static_cast<uint16_t>(c.from) : Event::kNoPath;
  env_.emit_event(e);
}

void Qp::report_path_change(Time now, int ev, const PathStateChange& c) {
  if (c.changed) {
    if (c.to != ev::EvState::kGood) {
      report_reverse_change(now, reverse_.on_path_unusable(ev, paths_, seed_));
    } else {
      // A path back in use (a probe answered) can carry the data that waited for one: with no
      // usable path produce_data returned kIdle and the QP left the ready ring, and nothing
      // else would bring it back (a probe reply is not an ACK).
      mark_ready();
    }
    ++env_.counters.ev_state_changes;
    env_.emit_event(Event{EventType::kEvStateChange, qpn_, static_cast<uint16_t>(ev),
                          paths_.port_of(ev), c.from, c.to, now});
  }
  if (c.swapped_in == PathSet::kNone) return;
  // A backup of the same plane took the place of an EV mapped out (paper 2.4) or congested
  // (ECN, PathPolicy::ecn_swap_marks: the replaced EV is still GOOD) in the active set.
  ++env_.counters.ev_swaps;
  if (paths_.state_of(c.replaced) == ev::EvState::kGood) ++env_.counters.ev_ecn_swaps;
  Event swap{EventType::kEvSwap,
             qpn_,
             static_cast<uint16_t>(c.swapped_in),
             paths_.port_of(c.swapped_in),
             paths_.state_of(c.replaced),
             paths_.state_of(c.swapped_in),
             now};
  swap.replaced = static_cast<uint16_t>(c.replaced);
  env_.emit_event(swap);
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
        on_ack(now, rx);
      } else {
        on_roce_ack(now, rx);
      }
      return {};
    case wire::Opcode::kTrimNack:
      if (!sending) return env_.drop(DropReason::kBadState, Error::kBadQpState);
      if (!is_mrc()) return env_.drop(DropReason::kBadOpcode, Error::kBadOpcode);
      // A NACK for a PSN never sent, or on a path we do not have, is as bad as such an ACK.
      if (psn_diff(tx_.next_psn, t.nack.psn) <= 0 || t.nack.ev_index >= paths_.size())
        return env_.drop(DropReason::kBadAck, Error::kBadExtension);
      on_trim_nack(now, rx);
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
      if (cc_) cc_->on_cnp(now);
      mark_ready();
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

void Qp::fill_common(TxPacket& out, uint8_t port, int path) {
  out.port = port;
  out.ev_index = static_cast<uint16_t>(path);
  out.ev = paths_.ev(path);
  out.peer = peer_;
  out.src_qpn = qpn_;
  out.pkt.bth = wire::Bth{};
  out.pkt.bth.dest_qp = dest_qpn_;
  out.pkt.payload = nullptr;
  out.pkt.payload_len = 0;
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
            const ReversePathSet::Probe p =
                q.reverse_.take_probe(now, mask, q.paths_, q.env_.reverse_probe_interval(),
                                      q.state_ == QpState::kRts && q.has_outstanding(), q.seed_);
            if (p.previous_unanswered) ++q.env_.counters.reverse_probes_unanswered;
            q.report_reverse_change(now, p.mapped_out);
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
      [](Qp& q, TxPacket& o, int path) { q.fill_common(o, q.paths_.port_of(path), path); },
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
  // Only a QP that has posted work has something outstanding (and its detector).
  if (tx_.loss && has_outstanding()) d = std::min(d, tx_.loss->rto_due());
  if (is_mrc() && tx_.loss && !tx_.loss->empty()) {
    d = std::min(d, tx_.loss->next_deadline(loss_context(),
                                            [this](uint16_t ev) { return transmit_queue(ev); }));
  }
  if (!probes_due_) d = std::min(d, paths_.next_probe_time());
  d = std::min(d, pacing_wait_until_);
  if (cc_) d = std::min(d, cc_->next_timer());
  return d;
}

void Qp::on_timer(Time now) {
  if (rx_ && rx_->on_timer(now)) mark_control();
  if (!reverse_probe_due_ && reverse_.next_probe_time() <= now) {
    reverse_probe_due_ = true;
    mark_control();
  }
  if (state_ != QpState::kRts) return;
  if (pacing_wait_until_ <= now) {
    pacing_wait_until_ = kNever;
    mark_ready();
  }
  if (cc_ && cc_->next_timer() <= now) {
    cc_->on_timer(now);
    mark_ready();
  }
  if (tx_.loss && has_outstanding() && tx_.loss->rto_due() <= now) {
    on_rto(now);
    if (state_ != QpState::kRts) return;
  } else if (is_mrc() && tx_.loss) {
    detect_losses_rack(now, true);
  }
  if (!probes_due_ && paths_.next_probe_time() <= now) {
    probes_due_ = true;
    mark_control();
  }
}

void Qp::set_port_up(Time now, uint8_t port, bool up) {
  if (state_ == QpState::kReset) return;
  paths_.set_port_up(port, up, now);
  if (!up && state_ == QpState::kRts && is_mrc() && tx_.loss) {
    // Packets that left on a dead port are gone: resend them elsewhere at once. The paths
    // themselves are not to blame, so they keep their state for when the port returns.
    for (uint32_t seq = tx_.loss->head(); seq != tx_.loss->tail(); ++seq) {
      const LossDetector::Record& r = tx_.loss->at(seq);
      if (paths_.port_of(r.ev) == port && tx_.record_current(seq))
        declare_lost(now, r.psn, false, LossCause::kOther);
    }
  }
  mark_ready();
}

// Paper 3: "MRC then uses a port state bitmap in SACK packets to notify remote QP endpoints
// that the port is down, so they also remap their EVs to avoid the failed plane." Packets
// already sent towards a dead peer port are resent elsewhere at once, as for a local port;
// no path is marked (the paths are fine, the peer's port is not), so none is probed while
// the port is down, and the plane is used again when an ACK says the port is back.
void Qp::on_peer_ports(Time now, uint32_t ports_down) {
  const uint32_t newly_down = ports_down & ~paths_.peer_ports_down();
  paths_.set_peer_ports_down(ports_down, now);
  ++env_.counters.peer_port_changes;
  if (newly_down && state_ == QpState::kRts && tx_.loss) {
    for (uint32_t seq = tx_.loss->head(); seq != tx_.loss->tail(); ++seq) {
      const LossDetector::Record& r = tx_.loss->at(seq);
      if (((newly_down >> paths_.port_of(r.ev)) & 1) && tx_.record_current(seq))
        declare_lost(now, r.psn, false, LossCause::kOther);
    }
  }
  mark_ready();
}

Status Qp::set_path_denied(Time now, int ev_index, bool denied) {
  if (state_ == QpState::kReset) return fail(Error::kBadQpState);
  if (ev_index < 0 || static_cast<size_t>(ev_index) >= paths_.size()) {
    return fail(Error::kInvalidArgument);
  }
  report_path_change(now, ev_index, paths_.set_denied(ev_index, denied));
  if (denied && state_ == QpState::kRts && is_mrc() && tx_.loss) {
    for (uint32_t seq = tx_.loss->head(); seq != tx_.loss->tail(); ++seq) {
      const LossDetector::Record& r = tx_.loss->at(seq);
      if (r.ev == ev_index && tx_.record_current(seq))
        declare_lost(now, r.psn, false, LossCause::kOther);
    }
  }
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
  report_reverse_change(now, reverse_.on_path_unusable(ev_index, paths_, seed_));
  if (state_ == QpState::kRts && is_mrc() && tx_.loss) {
    for (uint32_t seq = tx_.loss->head(); seq != tx_.loss->tail(); ++seq) {
      const LossDetector::Record& r = tx_.loss->at(seq);
      if (r.ev == ev_index && tx_.record_current(seq))
        declare_lost(now, r.psn, false, LossCause::kOther);
    }
  }
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
    LossDetector& loss = ensure_loss();
    if (u.timeout) loss.set_timeout(*u.timeout);
    const LossTiming& lt = loss.timing();
    loss.set_retry(u.retry_linear.value_or(lt.retry_linear), u.retry_exp.value_or(lt.retry_exp));
  }
  if (u.max_wimm) {
    max_wimm_ = *u.max_wimm;
    mark_ready();  // WRITE_IMMs held by the old limit may go now
  }
  if (u.max_wimm_dest) max_wimm_dest_ = *u.max_wimm_dest;
  return {};
}

QpLimits Qp::limits() const {
  const LossTiming lt = tx_.loss ? tx_.loss->timing() : loss_timing();
  return QpLimits{lt.timeout,     lt.retry_linear, lt.retry_exp,  max_wimm_,
                  max_wimm_dest_, mpr_psns_,       mpr_dest_psns_};
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
  if (!cc_) return {};  // before RTS: used when the controller is made at RTS
  if (c.algorithm == CcAlgorithm::kNscc) {
    cc::NsccConfig cfg = c.nscc;
    cfg.mtu = mtu_;
    static_cast<cc::Nscc*>(cc_.get())->reconfigure(env_.nscc_params.get(cfg, cc::resolve_nscc));
  } else if (c.algorithm == CcAlgorithm::kFixedWindow) {
    static_cast<cc::FixedWindow*>(cc_.get())->set_window(c.fixed_window);
  }
  mark_ready();  // a larger window may let packets go
  return {};
}

}  // namespace mrc
