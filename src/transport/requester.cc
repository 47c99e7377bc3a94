#include "transport/requester.h"

#include <algorithm>
#include <bit>

#include "transport/cc/fixed_window.h"
#include "transport/cc/nscc.h"
#include "transport/event_log.h"
#include "transport/psn.h"

namespace mrc {

namespace {

// The size a ring whose limit is `limit` (a power of two) starts at.
uint32_t initial_ring(uint32_t qp_initial_ring, uint32_t limit) {
  const uint64_t want = std::bit_ceil(std::max<uint64_t>(qp_initial_ring, 1));  // may be 2^32
  return static_cast<uint32_t>(std::min<uint64_t>(want, limit));
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

}  // namespace

void Requester::post(const WriteWr& wr, const uint8_t* local, uint32_t mtu, bool sig_all,
                     uint32_t sq_depth) {
  if (sq_tail - sq_head == sq.size()) grow_sq(sq_depth);
  SendWr& w = wr_at(sq_tail);
  w = SendWr{};
  w.wr_id = wr.wr_id;
  w.local = local;
  w.length = wr.length;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.imm = wr.imm;
  w.msg_num = next_msg_num++;
  w.npkts = wr.length == 0 ? 1 : static_cast<uint32_t>((wr.length + mtu - 1) / mtu);
  w.with_imm = wr.opcode == WrOpcode::kWriteImm;
  w.signaled = wr.signaled || sig_all;
  ++sq_tail;
}

void Requester::complete_send_wrs(QpEnv& env, uint32_t qpn, Time now) {
  // In order: a WR completes once all its packets are acknowledged and all earlier WRs have
  // completed (RC ordering).
  while (sq_head != sq_send) {
    SendWr& w = wr_at(sq_head);
    if (w.acked_pkts < w.npkts) break;
    if (w.signaled) {
      env.emit_completion(Completion{w.wr_id, qpn, WcStatus::kSuccess,
                                     w.with_imm ? WcOpcode::kWriteImm : WcOpcode::kWrite, 0,
                                     w.length, now});
    }
    if (w.with_imm) --wimm_outstanding;
    ++sq_head;
  }
}

void Requester::flush(QpEnv& env, uint32_t qpn, Time now, WcStatus first_status) {
  // Every outstanding send WR completes with an error: the oldest with the cause, the rest
  // flushed (as libibverbs reports IBV_WC_RETRY_EXC_ERR then IBV_WC_WR_FLUSH_ERR).
  WcStatus status = first_status;
  for (uint64_t s = sq_head; s != sq_tail; ++s) {
    SendWr& w = wr_at(s);
    env.emit_completion(Completion{w.wr_id, qpn, status,
                                   w.with_imm ? WcOpcode::kWriteImm : WcOpcode::kWrite, 0, w.length,
                                   now});
    status = WcStatus::kFlushed;
  }
  sq_head = sq_send = sq_tail;
  retx.clear();
  inflight_bytes = 0;
  wimm_outstanding = 0;
  pacing_wait_until = kNever;
}

Status Requester::validate_ack(const wire::SackExt& s, size_t num_paths) const {
  // An ACK may be old (reordered behind newer ones) but never for PSNs not yet sent, nor name
  // a path this QP does not have. Such an ACK is dropped whole, before any of it is used, and
  // the QP goes on as if it never came (a forged one must not stop the real ones).
  if (psn_diff(next_psn, s.cum_psn) < 0 || psn_diff(next_psn, s.sack_base) < 0)
    return fail(Error::kBadExtension);
  for (int i = 0; i < s.echo_count; ++i) {
    const wire::AckEcho& e = s.echo[static_cast<size_t>(i)];
    if (psn_diff(next_psn, e.psn) <= 0 || e.ev_index >= num_paths) {
      return fail(Error::kBadExtension);
    }
  }
  const bool sent =
      for_each_sacked_psn(s, [&](uint32_t psn) { return psn_diff(next_psn, psn) > 0; });
  if (!sent) return fail(Error::kBadExtension);
  return {};
}

// A responder's cumulative PSN never goes back: once an ACK said every PSN before U arrived,
// every ACK it makes later says so too. An ACK that echoes a packet sent after we learnt of
// U = snd_una (its only transmission, so no earlier copy can be what it echoes) was made
// after the responder had that packet, hence after the ACK that told us of U: if it puts the
// first missing PSN below U, one of the two ACKs was not the responder's. A forged ACK for packets
// that were lost is caught this way when the real ACKs come, rather than as a retry limit
// exhausted against a responder that waits for data the requester believes delivered.
bool Requester::contradicts_acknowledged(const wire::SackExt& s) const {
  if (psn_diff(snd_una, s.cum_psn) <= 0) return false;
  for (int i = 0; i < s.echo_count; ++i) {
    const wire::AckEcho& e = s.echo[static_cast<size_t>(i)];
    if (!psn_in_flight_range(e.psn)) continue;
    const TxPkt& p = pkt(e.psn);
    if (p.state != PktState::kFree && p.transmissions == 1 && p.ev == e.ev_index &&
        loss->made_since_mark(p.rec))
      return true;
  }
  return false;
}

void Requester::learn_pto_floor_from_echoes(Time now, const wire::SackExt& s) {
  // An echo names the transmission and is sent when that packet is read: evidence of how
  // long its acknowledgement took wherever the PSN lies (ack_psn covers the others).
  for (int i = 0; i < s.echo_count; ++i) {
    const wire::AckEcho& e = s.echo[static_cast<size_t>(i)];
    if ((e.flags & wire::AckEcho::kDuplicate) || !psn_in_flight_range(e.psn)) continue;
    const TxPkt& p = pkt(e.psn);
    if (p.state == PktState::kLost && p.transmissions == 1 && p.ev == e.ev_index)
      loss->learn_pto_floor(now, p.sent_at);
  }
}

// Doubles the PSN ring, moving the live PSNs [snd_una, next_psn) to their slots in the
// bigger ring. Only the live range is copied: slots outside it are never read before they
// are written (every reader checks the range first: psn_in_flight_range, record_current).
void Requester::grow_pkt_ring() {
  Array<TxPkt> old(2 * (static_cast<size_t>(pkt_mask) + 1), TxPkt{});
  old.swap(pkts);
  const uint32_t old_mask = pkt_mask;
  pkt_mask = 2 * pkt_mask + 1;
  for (uint32_t psn = snd_una; psn != next_psn; psn = psn_add(psn, 1))
    pkts[psn & pkt_mask] = old[psn & old_mask];
}

// Only WRs from sq_head on are ever read again: a completed WR's packets are all
// acknowledged, so nothing resends them.
void Requester::grow_sq(uint32_t sq_depth) {
  const size_t n = std::min<size_t>(2 * sq.size(), sq_depth);
  Array<SendWr> old(n);
  old.swap(sq);
  for (uint64_t s = sq_head; s != sq_tail; ++s)
    sq[s % n] = old[s % old.size()];
}

void Requester::advance_una() {
  while (snd_una != next_psn && pkt(snd_una).state == PktState::kAcked) {
    pkt(snd_una).state = PktState::kFree;
    snd_una = psn_add(snd_una, 1);
  }
  if (psn_lt(gbn_next, snd_una)) gbn_next = snd_una;
}

// The retransmission queue may hold PSNs acknowledged after they were queued (skipped when
// popped). If it fills up with such entries, keep only the ones still waiting.
void Requester::compact_retx() {
  retx.remove_if([this](uint32_t psn) {
    return !psn_in_flight_range(psn) || pkt(psn).state != PktState::kLost;
  });
}

// Stale entries of the retransmission queue (PSNs acknowledged after they were queued) go
// with the rings: popping skips them anyway.
void Requester::release_rings() {
  sq.clear();
  pkts.clear();
  pkt_mask = 0;
  retx = Ring<uint32_t>();
  if (loss) loss->release();
}

// ---------------------------------------------------------------------------------------
// Reports of path-state changes.

void RequesterContext::report_reverse_change(Time now, const ReverseChange& r) const {
  if (!r.changed) return;
  ++env.counters.ack_ev_changes;
  Event e{EventType::kAckEvChange,
          addr.qpn,
          r.to >= 0 ? static_cast<uint16_t>(r.to) : Event::kNoPath,
          reverse.slot_port(static_cast<uint32_t>(r.slot)),
          r.from >= 0 ? paths.state_of(r.from) : ev::EvState::kGood,
          r.to >= 0 ? paths.state_of(r.to) : ev::EvState::kGood,
          now};
  e.replaced = r.from >= 0 ? static_cast<uint16_t>(r.from) : Event::kNoPath;
  env.emit_event(e);
}

void RequesterContext::report_path_change(Time now, int ev, const PathStateChange& p) const {
  if (p.changed) {
    if (p.to != ev::EvState::kGood) {
      report_reverse_change(now, reverse.on_path_unusable(ev, paths, seed));
    } else {
      // A path back in use (a probe answered) can carry the data that waited for one: with no
      // usable path produce_data returned kIdle and the QP left the ready ring, and nothing
      // else would bring it back (a probe reply is not an ACK).
      mark_ready();
    }
    ++env.counters.ev_state_changes;
    env.emit_event(Event{EventType::kEvStateChange, addr.qpn, static_cast<uint16_t>(ev),
                         paths.port_of(ev), p.from, p.to, now});
  }
  if (p.swapped_in == PathSet::kNone) return;
  // A backup of the same plane took the place of an EV mapped out (paper 2.4) or congested
  // (ECN, PathPolicy::ecn_swap_marks: the replaced EV is still GOOD) in the active set.
  ++env.counters.ev_swaps;
  if (paths.state_of(p.replaced) == ev::EvState::kGood) ++env.counters.ev_ecn_swaps;
  Event swap{EventType::kEvSwap,
             addr.qpn,
             static_cast<uint16_t>(p.swapped_in),
             paths.port_of(p.swapped_in),
             paths.state_of(p.replaced),
             paths.state_of(p.swapped_in),
             now};
  swap.replaced = static_cast<uint16_t>(p.replaced);
  env.emit_event(swap);
}

// ---------------------------------------------------------------------------------------
// Setup.

void Requester::to_rts(QpEnv& env, const CcSpec& cc_spec, uint32_t mtu, Time now, const QpAttr& a) {
  mpr_psns = 128u * a.mpr;
  max_wimm = a.max_wimm;
  pkt_limit = pow2_at_least(mpr_psns);
  loss_timeout = a.timeout;
  loss_retry_linear = a.retry_linear;
  loss_retry_exp = a.retry_exp;
  loss_reorder_window = a.reorder_window;
  if (loss) loss->start(2 * pkt_limit, loss_timing(), a.sq_psn);
  retx.clear();
  snd_una = next_psn = gbn_next = a.sq_psn;
  switch (cc_spec.algorithm) {
    case CcAlgorithm::kNscc: {
      cc::NsccConfig cfg = cc_spec.nscc;
      cfg.mtu = mtu;
      cc = std::make_unique<cc::Nscc>(env.nscc_params.get(cfg, cc::resolve_nscc), &env.nscc_stats);
      break;
    }
    case CcAlgorithm::kDcqcn: {
      cc::DcqcnConfig cfg = cc_spec.dcqcn;
      cfg.mtu = mtu;
      cc = cc::make_dcqcn(cfg);
      break;
    }
    case CcAlgorithm::kFixedWindow:
      cc = cc::make_fixed_window(cc_spec.fixed_window);
      break;
    case CcAlgorithm::kNone:
      cc.reset();
      break;
  }
  rts_at = now;
  if (loss) loss->restart_rto_clock(now);
}

// A QP's rings are allocated when its role first needs them (many QPs of a large
// simulation only ever send or only ever receive), small, and grow with what is in flight.
void Requester::ensure_rings(const QpEnv& env, size_t num_paths, bool mrc, uint32_t sq_depth) {
  if (!sq.empty()) return;
  sq.resize(std::clamp<uint32_t>(env.config.qp_initial_ring, 1, sq_depth));
  const uint32_t n = initial_ring(env.config.qp_initial_ring, pkt_limit);
  pkts.assign(n, TxPkt{});
  pkt_mask = n - 1;
  retx = Ring<uint32_t>(n);
  ensure_loss();
  if (mrc) loss->allocate(2 * n, num_paths);
}

// What LossDetector::start would have been given at RTS, and the clock it would have
// restarted then: a detector made later starts where one made at RTS would be.
LossTiming Requester::loss_timing() const {
  return LossTiming{loss_timeout, loss_retry_linear, loss_retry_exp, loss_reorder_window};
}

LossDetector& Requester::ensure_loss() {
  if (!loss) {
    loss = std::make_unique<LossDetector>();
    // Nothing has been sent before the detector exists: snd_una is still RTS's sq_psn.
    loss->start(2 * pkt_limit, loss_timing(), snd_una);
    loss->restart_rto_clock(rts_at);
  }
  return *loss;
}

// The rings go once every WR has completed and every PSN is acknowledged (then every
// transmission record has been retired too: the ACK's RACK pass retires records that are not
// current); the next post allocates them again (docs/performance.md, "Bytes per QP").
void Requester::release_idle_rings(PathSet& paths, Time now) {
  if (sq.empty() || !rings_idle()) return;
  release_rings();
  paths.release_idle(now);
}

QpStats Requester::stats(const QpEnv& env) const {
  QpStats s;
  s.data_sent = data_sent;
  s.retransmits = retransmits;
  if (loss) {
    s.srtt = loss->srtt();
    s.reorder_window = loss->reorder_window(loss_context(env));
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// Sending.

bool Requester::window_allows_new(const SendWr& w, bool mrc) const {
  if (outstanding_psns() >= mpr_psns) return false;  // MPR
  if (mrc && loss->full()) return false;
  if (w.next_pkt == 0 && w.with_imm && wimm_outstanding >= max_wimm) return false;  // WIMM
  return true;
}

bool Requester::cc_allows(Time now, uint32_t bytes) const {
  if (!cc) return true;
  if (inflight_bytes > 0 && inflight_bytes + bytes > cc->cwnd()) return false;
  return cc->next_send_time() <= now;
}

Requester::DataResult Requester::blocked_by_cc(Time now) {
  if (cc && cc->next_send_time() > now) pacing_wait_until = cc->next_send_time();
  return DataResult::kIdle;
}

Requester::DataResult Requester::produce_data(const RequesterContext& c, Time now, uint32_t mask,
                                              TxPacket& out) {
  if (!c.mrc) return produce_roce_data(c, now, mask, out);

  // Retransmissions first, each on a different path than the one that lost it.
  while (!retx.empty()) {
    const uint32_t psn = retx.front();
    TxPkt& p = pkt(psn);
    if (p.state != PktState::kLost || !psn_in_flight_range(psn)) {
      retx.pop_front();
      continue;
    }
    // A tail-loss probe is not held back by congestion control (RFC 9002 6.2.4): when every
    // ACK of a flight was lost the window never opens again, and only the probe's ACK can
    // open it before the ACK timeout declares the whole window lost.
    if (!loss->pto_probe_due() && !cc_allows(now, p.bytes)) return blocked_by_cc(now);
    if (loss->full()) return DataResult::kIdle;
    const int path = c.paths.pick(now, mask, p.ev);
    if (path == PathSet::kNone)
      return c.paths.usable_count() ? DataResult::kPortsBusy : DataResult::kIdle;
    loss->clear_pto_probe();
    retx.pop_front();
    fill_data(c, now, psn, path, true, out);
    return DataResult::kSent;
  }

  uint32_t bytes = 0;
  DataResult why_not = DataResult::kIdle;
  SendWr* w = sendable_new_packet(now, c.mtu, c.mrc, bytes, why_not);
  if (!w) return why_not;
  const int path = c.paths.pick(now, mask);
  if (path == PathSet::kNone)
    return c.paths.usable_count() ? DataResult::kPortsBusy : DataResult::kIdle;
  start_new_packet(c, now, *w, bytes);
  fill_data(c, now, psn_add(next_psn, -1), path, false, out);
  return DataResult::kSent;
}

// The WR whose next packet may go out now as a new PSN, and that packet's size; nullptr
// (with the reason in `why_not`) when there is no work or a window (MPR, WIMM, record ring)
// or congestion control holds it back.
Requester::SendWr* Requester::sendable_new_packet(Time now, uint32_t mtu, bool mrc, uint32_t& bytes,
                                                  DataResult& why_not) {
  why_not = DataResult::kIdle;
  if (sq_send == sq_tail) return nullptr;
  SendWr& w = wr_at(sq_send);
  if (!window_allows_new(w, mrc)) return nullptr;
  const uint64_t off = static_cast<uint64_t>(w.next_pkt) * mtu;
  bytes = static_cast<uint32_t>(std::min<uint64_t>(mtu, w.length - off));
  if (!cc_allows(now, bytes)) {
    why_not = blocked_by_cc(now);
    return nullptr;
  }
  return &w;
}

void Requester::start_new_packet(const RequesterContext& c, Time now, SendWr& w, uint32_t bytes) {
  // The ACK timeout counts time without progress while something is outstanding, so a packet
  // that leaves with nothing outstanding starts its clock (RFC 6298 5.1; IBTA's transport
  // timer likewise runs only while requests are outstanding). Otherwise a QP idle for longer
  // than the timeout finds it already due when its first ACK arrives: a spurious timeout
  // that declares the whole window lost.
  if (snd_una == next_psn) loss->restart_rto_clock(now);
  // The PSN ring grows here only, where a PSN is taken (window_allows_new keeps the
  // outstanding range within pkt_limit). A tail call, so that the common path needs no
  // stack frame: ~20 instructions per packet otherwise (callgrind, benchmark A at 128 hosts).
  if (((next_psn - snd_una) & kPsnMask) > pkt_mask) [[unlikely]] {
    return grow_and_start_new_packet(c, now, w, bytes);
  }
  const uint32_t psn = next_psn;
  next_psn = psn_add(next_psn, 1);
  TxPkt& p = pkt(psn);
  p = TxPkt{};
  p.wr_seq = sq_send;
  p.pkt_index = w.next_pkt;
  p.bytes = bytes;
  if (w.next_pkt == 0 && w.with_imm) {
    ++wimm_outstanding;
    auto& hw = c.env.counters.max_outstanding_wimm;
    hw = std::max<uint64_t>(hw, wimm_outstanding);
  }
  if (++w.next_pkt == w.npkts) ++sq_send;
  auto& hw = c.env.counters.max_outstanding_psns;
  hw = std::max<uint64_t>(hw, outstanding_psns());
}

void Requester::grow_and_start_new_packet(const RequesterContext& c, Time now, SendWr& w,
                                          uint32_t bytes) {
  grow_pkt_ring();
  start_new_packet(c, now, w, bytes);
}

// RoCEv2 baseline: one path, PSN order, go-back-N from gbn_next after a NAK or timeout.
Requester::DataResult Requester::produce_roce_data(const RequesterContext& c, Time now,
                                                   uint32_t mask, TxPacket& out) {
  const uint8_t path_port = c.paths.port_of(0);
  const bool port_ok = c.paths.port_up(path_port);
  if (psn_lt(gbn_next, next_psn)) {
    const uint32_t psn = gbn_next;
    TxPkt& p = pkt(psn);
    if (!cc_allows(now, p.bytes)) return blocked_by_cc(now);
    if (!port_ok) return DataResult::kIdle;
    if (!((mask >> path_port) & 1)) return DataResult::kPortsBusy;
    gbn_next = psn_add(gbn_next, 1);
    fill_data(c, now, psn, 0, true, out);
    return DataResult::kSent;
  }
  uint32_t bytes = 0;
  DataResult why_not = DataResult::kIdle;
  SendWr* w = sendable_new_packet(now, c.mtu, c.mrc, bytes, why_not);
  if (!w) return why_not;
  if (!port_ok) return DataResult::kIdle;
  if (!((mask >> path_port) & 1)) return DataResult::kPortsBusy;
  start_new_packet(c, now, *w, bytes);
  gbn_next = next_psn;
  fill_data(c, now, psn_add(next_psn, -1), 0, false, out);
  return DataResult::kSent;
}

void Requester::fill_data(const RequesterContext& c, Time now, uint32_t psn, int path,
                          bool retransmit, TxPacket& out) {
  TxPkt& p = pkt(psn);
  const SendWr& w = wr_at(p.wr_seq);
  const uint64_t off = static_cast<uint64_t>(p.pkt_index) * c.mtu;
  const bool last = p.pkt_index + 1 == w.npkts;
  fill_common(out, c.paths, c.addr, path);
  wire::TransportPacket& t = out.pkt;
  t.bth.opcode = w.with_imm ? wire::Opcode::kWriteOnlyImm : wire::Opcode::kWriteOnly;
  t.bth.psn = psn;
  t.bth.solicited = last && w.with_imm;
  // Ask for a prompt ACK at the end of a message (its completion waits for it), when the
  // window is about to close, and for retransmissions (recovery is waiting).
  const bool ack_now = last || retransmit || outstanding_psns() + 8 >= mpr_psns;
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

  if (p.state != PktState::kInflight) inflight_bytes += p.bytes;
  p.state = PktState::kInflight;
  p.sent_at = now;
  p.ev = static_cast<uint16_t>(path);
  if (p.transmissions < kMaxTransmissions) ++p.transmissions;
  if (c.mrc) p.rec = loss->record(psn, path, now);
  if (cc) cc->on_send(now, p.bytes, inflight_bytes);
  if (retransmit) {
    ++c.env.counters.retransmits;
    ++retransmits;
  } else {
    ++c.env.counters.data_sent;
    ++data_sent;
  }
}

// ---------------------------------------------------------------------------------------
// Acknowledgements and loss detection.

void Requester::ack_new_psn(const RequesterContext& c, Time now, uint32_t psn, TxPkt& p) {
  if (c.mrc && p.state == PktState::kLost && p.transmissions > 1)
    ++c.env.counters.losses_acked_before_resend;
  if (c.mrc && p.state == PktState::kLost && p.transmissions == 1) {
    // Declared lost, but the only transmission was delivered: reordering, not loss. Same
    // lesson as a spurious retransmission (the path works; widen the reordering window).
    ++c.env.counters.losses_undone;
    on_spurious_loss(c, now, p.ev, p.lost_to_pto);
    // Timing evidence only if the previous ACK could have reported this PSN (its bitmap
    // reached it): then it arrived after that ACK left. Beyond that reach a hole hides a
    // PSN until the hole is filled, and its send-to-ACK time would be the whole recovery's.
    if (loss->reportable_by_last_ack(psn)) loss->learn_pto_floor(now, p.sent_at);
  } else {
    loss->age_pto_floor(now);
  }
  if (p.state == PktState::kInflight) inflight_bytes -= std::min<uint64_t>(inflight_bytes, p.bytes);
  p.state = PktState::kAcked;
  ++wr_at(p.wr_seq).acked_pkts;
  // With a single transmission we know exactly which send was delivered (RACK needs that).
  if (p.transmissions == 1) note_delivered(c, p.sent_at, p.rec, p.ev);
}

WcStatus Requester::on_ack(const RequesterContext& c, Time now, const RxPacket& rx) {
  ensure_loss();  // an ACK before any post (stray) still reaches the detector
  const wire::SackExt& s = rx.pkt.sack;
  if (contradicts_acknowledged(s)) {
    ++c.env.counters.ack_contradictions;
    return WcStatus::kAckContradiction;
  }
  bool progress = false;
  if (s.ports_down != c.paths.peer_ports_down()) on_peer_ports(c, now, s.ports_down);
  // Only a PSN declared lost teaches the floor, and every one waits in `retx` until resent.
  if (!retx.empty()) learn_pto_floor_from_echoes(now, s);
  // 1. Cumulative part.
  if (psn_diff(s.cum_psn, snd_una) > 0) {
    for (uint32_t psn = snd_una; psn != s.cum_psn; psn = psn_add(psn, 1)) {
      progress |= ack_psn(c, now, psn);
    }
  }
  // 2. Selective part: only bits inside what is outstanding.
  for_each_sacked_psn(s, [&](uint32_t psn) {
    if (psn_in_flight_range(psn)) progress |= ack_psn(c, now, psn);
    return true;
  });
  // 3. Echoes: per-packet ECN/trim/path attribution, RTT samples, per-path loss detection.
  const Time service = static_cast<Time>(s.service_time_ns) * kPicosPerNano;
  for (int i = 0; i < s.echo_count; ++i) {
    const wire::AckEcho& e = s.echo[static_cast<size_t>(i)];
    if (e.flags & wire::AckEcho::kDuplicate) on_duplicate_echo(c, lost_to_pto(e.psn));
    if (e.ev_index >= c.paths.size() || !psn_in_flight_range(e.psn)) continue;
    TxPkt& p = pkt(e.psn);
    const bool ecn = e.flags & wire::AckEcho::kEcnCe;
    if (ecn) {
      c.report_path_change(now, e.ev_index, c.paths.on_ecn(e.ev_index, now));
    } else {
      c.paths.on_unmarked(e.ev_index);
    }
    // The echo names the path it arrived on; if that is the latest transmission's path we
    // know which send it was (retransmissions always change path when they can).
    const bool exact = p.ev == e.ev_index && p.transmissions > 0 && p.state != PktState::kFree;
    Time rtt = 0;
    if (exact) {
      note_delivered(c, p.sent_at, p.rec, p.ev);
      const Time raw = now > p.sent_at ? now - p.sent_at : 0;
      rtt = raw > service ? raw - service : raw;
      if (!(e.flags & wire::AckEcho::kDuplicate)) {
        loss->rtt_sample(rtt, raw);
        c.env.note_rtt_sample(raw);
      }
      detect_losses_on_path(c, now, e.ev_index, p.rec,
                            psn_add(s.sack_base, 64 * wire::kSackBitmapWords));
    } else if (p.transmissions > 1 && p.state != PktState::kFree &&
               !(e.flags & wire::AckEcho::kDuplicate)) {
      on_spurious_loss(c, now, e.ev_index, p.lost_to_pto);
    } else if (p.transmissions > 1 && p.state != PktState::kFree) {
      // A duplicate that came by another path than the latest transmission: an earlier
      // transmission, declared lost on that path, arrived after all. The loss no longer counts
      // against the path (PathSet::on_delivered; the window was widened above).
      c.report_path_change(now, e.ev_index, c.paths.on_delivered(e.ev_index));
    }
    const uint32_t bytes = p.bytes;
    progress |= ack_psn(c, now, e.psn);
    if (cc && exact) cc->on_ack(cc::AckSample{now, bytes, rtt, ecn, false}, inflight_bytes);
  }
  // 4. RACK: anything sent well before a delivered packet is lost (judged against this
  // ACK's bitmap reach).
  loss->note_ack_reach(s.sack_base);
  detect_losses_rack(c, now, false);
  if (progress) {
    loss->on_answer(now);
    loss->clear_pto_probe();
  }
  const uint32_t una_before = snd_una;
  advance_una();
  if (snd_una != una_before) loss->mark();
  if (progress) {
    ++c.env.counters.acks_advancing;
    ++c.env.counters.acks_advancing_by_port[rx.port & 31];
  }
  complete_send_wrs(c.env, c.addr.qpn, now);
  release_idle_rings(c.paths, now);
  c.mark_ready();
  return WcStatus::kSuccess;
}

void Requester::on_roce_ack(const RequesterContext& c, Time now, const RxPacket& rx) {
  ensure_loss();
  const wire::SackExt& s = rx.pkt.sack;
  bool progress = false;
  if (psn_diff(s.cum_psn, snd_una) > 0) {
    for (uint32_t psn = snd_una; psn != s.cum_psn; psn = psn_add(psn, 1)) {
      const TxPkt& p = pkt(psn);
      const Time sent = p.sent_at;
      const uint32_t bytes = p.bytes;
      progress |= ack_psn(c, now, psn);
      if (cc && psn_add(psn, 1) == s.cum_psn && now > sent) {
        cc->on_ack(cc::AckSample{now, bytes, now - sent, false, false}, inflight_bytes);
      }
    }
  }
  if (aeth_is_nak(rx.pkt.aeth.syndrome)) {
    // PSN sequence error: the responder expects cum_psn. Go back and resend from there.
    ++c.env.counters.losses_detected;
    if (psn_lt(s.cum_psn, gbn_next)) {
      // A NAK overtaken by a later ACK may name PSNs before snd_una: acknowledged, freed,
      // and no longer in the ring.
      const uint32_t from = psn_lt(s.cum_psn, snd_una) ? snd_una : s.cum_psn;
      for (uint32_t psn = from; psn != gbn_next; psn = psn_add(psn, 1)) {
        TxPkt& p = pkt(psn);
        if (p.state == PktState::kInflight) {
          inflight_bytes -= std::min<uint64_t>(inflight_bytes, p.bytes);
          p.state = PktState::kLost;
        }
      }
      // CC hears of the loss with the first resent packet's size (one MTU if nothing of the
      // stale NAK's range is left in the ring).
      if (cc) cc->on_loss(now, from != gbn_next ? pkt(from).bytes : c.mtu);
      gbn_next = s.cum_psn;
    }
  }
  if (progress) loss->on_roce_progress(now);
  advance_una();
  complete_send_wrs(c.env, c.addr.qpn, now);
  release_idle_rings(c.paths, now);
  c.mark_ready();
}

// Paper 3: "MRC then uses a port state bitmap in SACK packets to notify remote QP endpoints
// that the port is down, so they also remap their EVs to avoid the failed plane." Packets
// already sent towards a dead peer port are resent elsewhere at once, as for a local port;
// no path is marked (the paths are fine, the peer's port is not), so none is probed while
// the port is down, and the plane is used again when an ACK says the port is back.
void Requester::on_peer_ports(const RequesterContext& c, Time now, uint32_t ports_down) {
  const uint32_t newly_down = ports_down & ~c.paths.peer_ports_down();
  c.paths.set_peer_ports_down(ports_down, now);
  ++c.env.counters.peer_port_changes;
  if (newly_down) {
    resend_where(c, now, [&](const LossDetector::Record& r) {
      return ((newly_down >> c.paths.port_of(r.ev)) & 1) != 0;
    });
  }
  c.mark_ready();
}

// An earlier transmission of a packet we resent has arrived: the loss was reordering, not
// loss. Widen the reordering window (RFC 8985 section 6.2 grows it the same way on DSACK),
// and give the path back its GOOD state: it has just delivered a packet. A loss the tail-loss
// probe declared (`by_pto`) says nothing of reordering: no later packet had arrived, the PTO
// only expired before the ACK came (a responder descheduled for milliseconds), which the PTO
// floor learns (LossDetector::learn_pto_floor). Widening on it too left a software path's
// window milliseconds wide after a few such stalls, and a blackholed path's packets waited
// that long for RACK (docs/libfabric.md, "Through faults").
void Requester::on_spurious_loss(const RequesterContext& c, Time now, uint16_t ev, bool by_pto) {
  ++c.env.counters.spurious_losses;
  if (!by_pto) loss->widen_reorder_window();
  c.report_path_change(now, ev, c.paths.on_delivered(ev));
}

// The responder already had a PSN when another copy arrived (a DSACK). Copies exist only
// because we resent, so a loss we declared was reordering after all: widen the window as RFC
// 8985 6.2 does on DSACK. This sees what on_spurious_loss's callers cannot: an original
// acknowledged only after its retransmission had left, as when a software responder reads
// one plane's socket hundreds of microseconds after another's (the ACK reports the newer
// plane's packets, RACK declares the older plane's lost, and every retransmission then
// arrives as a duplicate). The original's path is not known here; its probe brings it back.
void Requester::on_duplicate_echo(const RequesterContext& c, bool by_pto) {
  ++c.env.counters.duplicate_retransmits;
  if (!by_pto) loss->widen_reorder_window();
}

void Requester::detect_losses_on_path(const RequesterContext& c, Time now, uint16_t ev,
                                      uint32_t upto, uint32_t known_end) {
  loss->detect_on_path(
      ev, upto, known_end, [this](uint32_t seq) { return record_current(seq); },
      [this, &c, now](uint32_t psn, LossCause cause) { declare_lost(c, now, psn, true, cause); });
}

void Requester::detect_losses_rack(const RequesterContext& c, Time now, bool check_pto) {
  loss->detect_rack(
      now, check_pto, loss_context(c.env), [this](uint32_t seq) { return record_current(seq); },
      [&c](uint16_t ev) { return transmit_queue(c.env, c.paths, ev); },
      [this, &c, now](uint32_t psn, LossCause cause) {
        if (cause == LossCause::kPto && loss->srtt() == 0) ++c.env.counters.losses_pto_borrowed_rtt;
        // RACK's evidence is a later transmission delivered; for a PSN beyond the newest
        // ACK's bitmap that is no evidence the PSN was not: only an echo could have said
        // so, and echoes die with their ACK (a peer port that went down, paper 3). Resend
        // it, but leave its path in use: a false loss there would take working EVs out of
        // use until probes bring them back (a ring through a flapping T0, Figs 6-7).
        const bool blame = cause != LossCause::kRack || loss->reportable_by_last_ack(psn);
        declare_lost(c, now, psn, blame, cause);
      });
}

void Requester::declare_lost(const RequesterContext& c, Time now, uint32_t psn, bool mark_path,
                             LossCause cause) {
  TxPkt& p = pkt(psn);
  if (p.state != PktState::kInflight) return;
  EngineCounters& n = c.env.counters;
  switch (cause) {
    case LossCause::kPathOrder:
      ++n.losses_path_order;
      break;
    case LossCause::kRack:
      ++n.losses_rack;
      break;
    case LossCause::kPto:
      ++n.losses_pto;
      break;
    case LossCause::kRto:
      ++n.losses_rto;
      break;
    case LossCause::kTrim:
    case LossCause::kOther:
      ++n.losses_other;
      break;
  }
  loss->note_loss(cause);
  if (c.env.logging()) [[unlikely]] {
    LogRecord r(now, LogKind::kPacketLost, c.addr.qpn);
    r.psn = psn;
    r.ev = p.ev;
    r.port = c.paths.port_of(p.ev);
    r.bytes = p.bytes;
    r.cause = cause;
    c.env.record(r);
  }
  p.state = PktState::kLost;
  p.lost_to_pto = cause == LossCause::kPto;
  inflight_bytes -= std::min<uint64_t>(inflight_bytes, p.bytes);
  if (retx.full()) {
    compact_retx();
    // Entries left are distinct lost PSNs in flight, fewer than pkt_limit, so the ring never
    // needs more. Growing once it stays over half full keeps compaction amortized O(1).
    const size_t cap = retx.capacity();
    if (retx.size() > (cap - 1) / 2 && cap < pkt_limit) retx.reserve(2 * cap);
  }
  retx.push_back(psn);
  ++n.losses_detected;
  // Loss is a path signal, trimming the congestion signal (paper 2.1): CC tells them apart
  // (NsccConfig::loss_keep).
  if (cc) {
    if (cause == LossCause::kTrim) {
      cc->on_trim_loss(now, p.bytes);
    } else {
      cc->on_loss(now, p.bytes);
    }
  }
  if (mark_path) {
    const PathStateChange change = c.paths.on_loss(p.ev, now);
    if (change.held) ++n.losses_on_trimming_paths;
    c.report_path_change(now, p.ev, change);
  }
  c.mark_ready();
}

template <typename F>
void Requester::resend_where(const RequesterContext& c, Time now, F gone) {
  for (uint32_t seq = loss->head(); seq != loss->tail(); ++seq) {
    const LossDetector::Record& r = loss->at(seq);
    if (gone(r) && record_current(seq)) declare_lost(c, now, r.psn, false, LossCause::kOther);
  }
}

void Requester::resend_on_port(const RequesterContext& c, Time now, uint8_t port) {
  if (!c.mrc || !loss) return;
  resend_where(c, now,
               [&](const LossDetector::Record& r) { return c.paths.port_of(r.ev) == port; });
}

void Requester::resend_on_path(const RequesterContext& c, Time now, int ev) {
  if (!c.mrc || !loss) return;
  resend_where(c, now, [ev](const LossDetector::Record& r) { return r.ev == ev; });
}

WcStatus Requester::on_rto(const RequesterContext& c, Time now) {
  ++c.env.counters.timeouts;
  if (c.env.logging()) [[unlikely]] {
    LogRecord r(now, LogKind::kTimeout, c.addr.qpn);
    r.psn = snd_una;
    r.inflight = inflight_bytes;
    c.env.record(r);
  }
  if (!loss->on_rto()) return WcStatus::kRetryExceeded;
  if (c.mrc) {
    // A whole ACK timeout without a word from the peer: its last port-state bitmap may be
    // stale (a port it reported down came back while every packet went to another of its
    // ports that has died since, so no ACK could say so). Forget it and try every plane
    // again; a port that is still down loses those packets and the next ACK reports it.
    if (c.paths.peer_ports_down() != 0) c.paths.set_peer_ports_down(0, now);
    for (uint32_t seq = loss->head(); seq != loss->tail(); ++seq) {
      if (record_current(seq)) declare_lost(c, now, loss->at(seq).psn, true, LossCause::kRto);
    }
    detect_losses_rack(c, now, false);
  } else {
    for (uint32_t psn = snd_una; psn != next_psn; psn = psn_add(psn, 1)) {
      TxPkt& p = pkt(psn);
      if (p.state == PktState::kInflight) {
        inflight_bytes -= std::min<uint64_t>(inflight_bytes, p.bytes);
        p.state = PktState::kLost;
      }
    }
    gbn_next = snd_una;
    if (cc && snd_una != next_psn) cc->on_loss(now, pkt(snd_una).bytes);
  }
  loss->restart_rto_clock(now);
  c.mark_ready();
  return WcStatus::kSuccess;
}

void Requester::on_trim_nack(const RequesterContext& c, Time now, const RxPacket& rx) {
  const wire::TrimNackExt& n = rx.pkt.nack;
  ++c.env.counters.trim_nacks_received;
  if (!psn_in_flight_range(n.psn) || pkt(n.psn).state != PktState::kInflight ||
      pkt(n.psn).ev != n.ev_index) {
    ++c.env.counters.trim_nacks_stale;  // that transmission is no longer in flight
    return;
  }
  TxPkt& p = pkt(n.psn);
  // A trim is congestion on that path, not a failure: recycle the path, tell CC, resend.
  if (n.ev_index < c.paths.size())
    c.report_path_change(now, n.ev_index, c.paths.on_trim(n.ev_index, now));
  if (cc) cc->on_ack(cc::AckSample{now, 0, now - p.sent_at, true, true}, inflight_bytes);
  const Time sent_at = p.sent_at;
  declare_lost(c, now, n.psn, false, LossCause::kTrim);
  // The NACK is an answer: the responder hears us and the path delivers (headers, at least).
  // Under a large incast every packet of a flight may be trimmed for a while; that is not the
  // silence the tail-loss probe's backoff and the ACK timeout are for (RFC 8985 7.2, RFC 6298
  // restart on an answer), so both start over.
  loss->on_answer(now);
  // The trimmed header arrived: a transmission sent a reordering window before it and still
  // unacknowledged was lost (its header dropped at a full queue, or the path failed): RACK,
  // as for a delivered packet (trimmed headers skip the data queues, so they are ahead of
  // the untrimmed packets sent before them by at most those queues, under a window).
  loss->note_header_delivered(sent_at);
  detect_losses_rack(c, now, false);
}

void Requester::on_cnp(const RequesterContext& c, Time now) {
  if (cc) cc->on_cnp(now);
  c.mark_ready();
}

// ---------------------------------------------------------------------------------------
// Timers.

WcStatus Requester::on_timer(const RequesterContext& c, Time now) {
  if (pacing_wait_until <= now) {
    pacing_wait_until = kNever;
    c.mark_ready();
  }
  if (cc && cc->next_timer() <= now) {
    cc->on_timer(now);
    c.mark_ready();
  }
  if (loss && has_outstanding(c.paths) && loss->rto_due() <= now) return on_rto(c, now);
  if (c.mrc && loss) detect_losses_rack(c, now, true);
  return WcStatus::kSuccess;
}

}  // namespace mrc
