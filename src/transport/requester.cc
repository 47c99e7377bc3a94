#include "transport/requester.h"

#include <algorithm>

#include "transport/psn.h"

namespace mrc {

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

void Requester::complete_send_wrs(QpEnv& env, uint32_t qpn, Time now, uint32_t& wimm_outstanding) {
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

}  // namespace mrc
