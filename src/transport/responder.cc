#include "transport/responder.h"

#include <algorithm>
#include <cstring>

#include "transport/psn.h"

namespace mrc {

namespace {

constexpr uint32_t kTrimNackQueue = 64;

}  // namespace

Responder::Responder(uint32_t mpr_dest_psns, uint32_t first_psn, uint32_t msg_base,
                     uint64_t received_bytes) {
  window.start(mpr_dest_psns, first_psn, msg_base, received_bytes);
}

Status Responder::post_recv(const ResponderContext& c, uint64_t wr_id, uint32_t rq_depth) {
  if (!rq.push_back_within(wr_id, rq_depth, c.env.config.qp_initial_ring)) {
    return fail(Error::kQueueFull);
  }
  // A message may be placed and waiting for this receive (MRC has no RNR).
  complete_recv_messages(c, newest_arrival);
  return {};
}

// Every message complete and acknowledged, no ACK, repeat, NACK or CNP due, no receive posted,
// no echo queued: all that is left is where the window stands (Qp::release_idle_responder).
// The fields a new responder starts without are each written before they are next read (the
// ACK's port and path and the arrival time by the next data packet, the last ACK's port and
// path by the next ACK, which alone arms a repeat). A RoCEv2 responder that sent a CNP is
// never idle (its rate limit needs the time).
bool Responder::idle() const {
  return window.idle() && window.echo_count() == 0 && wimm_dest_open == 0 && rq.empty() &&
         unacked_packets == 0 && !ack_now && ack_due == kNever && !ack_repeat_now &&
         ack_repeat_due == kNever && nacks.empty() && !roce_nak_pending &&
         !roce_nak_sent_for_base && !cnp_pending && !cnp_ever;
}

bool Responder::on_timer(Time now) {
  bool pending = false;
  if (ack_due <= now) {
    ack_due = kNever;
    ack_now = pending = true;
  }
  if (ack_repeat_due <= now) {
    ack_repeat_due = kNever;
    ack_repeat_now = pending = true;
  }
  return pending;
}

void Responder::flush(QpEnv& env, uint32_t qpn, Time now) {
  while (!rq.empty()) {
    env.emit_completion(
        Completion{rq.pop_front(), qpn, WcStatus::kFlushed, WcOpcode::kRecvImm, 0, 0, now});
  }
  window.clear_echoes();
  ack_now = false;
  ack_due = kNever;
  ack_repeat_due = kNever;
  ack_repeat_now = false;
  nacks.clear();
  roce_nak_pending = cnp_pending = false;
}

// The checks every data packet passes before it has any effect, a duplicate's ACK included:
// framing (packet count and index, the payload against RETH's length unless trimmed) and
// payload within the path MTU. Counts the drop.
Status Responder::check_framing(const ResponderContext& c, const RxPacket& rx) {
  const wire::TransportPacket& t = rx.pkt;
  if (t.data.pkt_count == 0 || t.data.pkt_index >= t.data.pkt_count ||
      (!rx.trimmed && t.payload_len != t.reth.dma_len)) {
    return c.env.drop(DropReason::kInconsistent, Error::kBadExtension);
  }
  if (t.reth.dma_len > c.mtu || t.payload_len > c.mtu)
    return c.env.drop(DropReason::kPayloadTooLong, Error::kInvalidArgument);
  return {};
}

// The checks a packet not received before passes on top of framing, a trimmed packet's NACK
// included (a forged trimmed packet would otherwise make the requester resend at will): rkey
// with remote write access and the range it names (a trimmed packet's announced length, its
// payload being cut). Counts the drop.
Result<const MemoryRegion*> Responder::check_data(const ResponderContext& c, const RxPacket& rx) {
  const wire::TransportPacket& t = rx.pkt;
  if (auto s = check_framing(c, rx); !s) return fail(s.error());
  auto region = c.env.memory.check_remote_write(t.reth.rkey, t.reth.va, t.reth.dma_len);
  if (!region) {
    ++c.env.counters.drops[static_cast<int>(
        region.error() == Error::kBadRkey ? DropReason::kBadRkey : DropReason::kBadAddress)];
    return fail(region.error());
  }
  return region;
}

// Checks what a data packet whose PSN is acceptable says about its message, then places it
// into `r` (what check_data found). Returns the drop reason; on error nothing has changed.
Status Responder::accept_data(const ResponderContext& c, Time now, const RxPacket& rx,
                              const MemoryRegion* r) {
  const wire::TransportPacket& t = rx.pkt;
  const bool with_imm = t.bth.opcode == wire::Opcode::kWriteOnlyImm;
  const uint32_t msg = t.data.msg_num;
  if (!window.message_in_window(msg))
    return c.env.drop(DropReason::kPsnOutOfWindow, Error::kPsnOutOfWindow);
  const uint32_t last_psn =
      psn_add(t.bth.psn, static_cast<int64_t>(t.data.pkt_count) - 1 - t.data.pkt_index);
  // A message beyond the ring is not known (its slot holds another message number).
  const ReceiveWindow::Message* seen = window.find(msg);
  const bool known = seen != nullptr;
  if (known && (seen->last_psn != last_psn || seen->with_imm != with_imm)) {
    return c.env.drop(DropReason::kInconsistent, Error::kBadExtension);
  }
  // Over the limit a WRITE-with-imm is dropped (the requester resends it), except the message
  // that completes next: messages complete in order, so if later ones held every slot and the
  // next were refused, none could ever complete. Only that one message at a time goes over
  // the limit, and only while a requester sends more than the limit allows (or after
  // update_qp lowered it below what was already open).
  if (!known && with_imm && wimm_dest_open >= c.max_wimm_dest && msg != window.msg_base()) {
    return c.env.drop(DropReason::kWimmExceeded, Error::kQueueFull);
  }
  if (rx.trimmed) {
    // The header survived, the payload did not: ask for exactly this packet again. The QP is
    // active inbound all the same (paper 2.4): the resend this NACK brings does not end a
    // silence (queue_echo).
    ++c.env.counters.trimmed_received;
    c.reverse.on_inbound(now, [&] { return c.env.reverse_probe_interval(); });
    if (nacks.push_back_within(TrimNack{t.bth.psn, t.data.ev_index, rx.port}, kTrimNackQueue,
                               c.env.config.qp_initial_ring)) {
      c.mark_control();
    }
    return {};
  }
  if (r->base && t.payload && t.payload_len) {
    std::memcpy(r->base + (t.reth.va - r->iova), t.payload, t.payload_len);
  }
  if (!known && with_imm) ++wimm_dest_open;
  ReceiveWindow::Message& m = known ? window.get(msg) : window.open(msg, last_psn, t.imm, with_imm);
  m.bytes += t.payload_len;
  const bool advanced = window.mark_received(t.bth.psn, t.payload_len);
  c.env.counters.bytes_placed += t.payload_len;
  ++c.env.counters.data_received;
  uint8_t flags = 0;
  if (rx.ecn_ce) {
    ++c.env.counters.ecn_received;
    flags |= wire::AckEcho::kEcnCe;
  }
  if (t.data.flags & wire::DataExt::kRetransmit) flags |= wire::AckEcho::kRetransmit;
  queue_echo(c, now, rx, flags);
  if (advanced) complete_recv_messages(c, now);
  return {};
}

Status Responder::on_data(const ResponderContext& c, Time now, const RxPacket& rx) {
  const uint32_t psn = rx.pkt.bth.psn;
  const int32_t d = window.offset(psn);
  if (!window.acceptable(d)) {
    return c.env.drop(DropReason::kPsnOutOfWindow, Error::kPsnOutOfWindow);  // stale or beyond
  }
  if (window.arrived(d)) {
    // Received before: never placed or completed twice, but acknowledged again (the earlier
    // ACK may have been lost) without a look at its key, as IB responders treat a duplicate
    // WRITE (rxe checks the PSN before the rkey and acknowledges duplicates): the application
    // may have seen the message complete and deregistered the region since, and a withheld
    // ACK would make the requester resend until it gives up (kRetryExceeded).
    if (auto s = check_framing(c, rx); !s) return s;
    ++c.env.counters.duplicates;
    queue_echo(c, now, rx, wire::AckEcho::kDuplicate);
    return {};
  }
  const auto region = check_data(c, rx);
  if (!region) return fail(region.error());
  // The bitmap grows here only, for a PSN inside the window but beyond the ring.
  window.cover(static_cast<uint32_t>(d));
  return accept_data(c, now, rx, *region);
}

Status Responder::on_roce_data(const ResponderContext& c, Time now, const RxPacket& rx) {
  const int32_t d = window.offset(rx.pkt.bth.psn);
  if (!window.acceptable(d)) return c.env.drop(DropReason::kPsnOutOfWindow, Error::kPsnOutOfWindow);
  if (d < 0) {
    // Acknowledged again without a look at its key, as in on_data.
    if (auto s = check_framing(c, rx); !s) return s;
    ++c.env.counters.duplicates;
    queue_echo(c, now, rx, wire::AckEcho::kDuplicate);
    ack_now = true;
    c.mark_control();
    return {};
  }
  const auto region = check_data(c, rx);
  if (!region) return fail(region.error());
  if (d > 0 || rx.trimmed) {
    // RoCEv2 responders accept only the expected PSN; one NAK per gap (IBTA 9.7.5.2.2).
    ++c.env.counters.out_of_sequence;
    if (!roce_nak_sent_for_base) {
      roce_nak_sent_for_base = true;
      roce_nak_pending = true;
      c.mark_control();
    }
    return {};
  }
  if (rx.ecn_ce) {
    // DCQCN notification point: at most one CNP per interval per QP.
    if (!cnp_ever || now >= last_cnp + c.env.config.cnp_interval) {
      cnp_pending = true;
      c.mark_control();
    }
  }
  const uint32_t before = window.base();
  auto s = accept_data(c, now, rx, *region);
  if (s && window.base() != before) roce_nak_sent_for_base = false;
  return s;
}

void Responder::complete_recv_messages(const ResponderContext& c, Time now) {
  while (ReceiveWindow::Message* m = window.completable()) {
    if (m->with_imm) {
      if (rq.empty()) break;  // no RNR in MRC: wait for the application's receive
      const uint64_t wr_id = rq.pop_front();
      c.env.emit_completion(
          Completion{wr_id, c.qpn, WcStatus::kSuccess, WcOpcode::kRecvImm, m->imm, m->bytes, now});
      --wimm_dest_open;
    }
    window.complete_next();
    ack_now = true;
  }
  if (window.allocated() && window.idle()) window.release();
  if (ack_now) c.mark_control();
}

void Responder::queue_echo(const ResponderContext& c, Time now, const RxPacket& rx, uint8_t flags) {
  // A duplicate's echo is the requester's DSACK (on_duplicate_echo).
  window.add_echo(wire::AckEcho{rx.pkt.bth.psn, rx.pkt.data.ev_index, flags});
  newest_arrival = now;
  // Paper 2.4: the reverse set is probed while the QP is active inbound. A resent packet we
  // already had means the ACK that reported it was lost: probe the set now. So does a resent
  // packet that ends an inbound silence: the peer's ACK timeout fired, so its data or our
  // ACKs died, and only a probe tells which. Otherwise a peer that resends one packet per
  // timeout would never make an active spell (a lone arrival only starts the clock), and a
  // slot that loses every ACK would never be verified.
  c.reverse.on_data_path(rx.pkt.data.ev_index, c.paths);
  const bool spell_started =
      c.reverse.on_inbound(now, [&] { return c.env.reverse_probe_interval(); });
  if ((flags & wire::AckEcho::kDuplicate) ||
      (spell_started && (flags & wire::AckEcho::kRetransmit)))
    c.reverse.on_ack_loss(now);
  ack_port = rx.port;
  ack_path = rx.pkt.data.ev_index;
  ack_repeat_due = kNever;  // this packet's own ACK carries the state: no repeat
  ack_repeat_now = false;
  ++unacked_packets;
  if (unacked_packets >= c.env.config.ack_every || rx.pkt.bth.ack_req ||
      (flags & wire::AckEcho::kDuplicate)) {
    ack_now = true;
    c.mark_control();
  } else if (ack_due == kNever) {
    ack_due = now + c.env.config.ack_delay;
  }
}

void Responder::fill_ack(const QpEnv& env, bool mrc, Time now, TxPacket& out) {
  wire::TransportPacket& t = out.pkt;
  t.bth.opcode = wire::Opcode::kAck;
  t.bth.psn = psn_add(window.base(), -1);
  t.aeth = wire::Aeth{kAethAck, window.msg_base() & kPsnMask};
  wire::SackExt& s = t.sack;
  window.fill_sack(s);  // cumulative PSN, bitmap, received bytes, echoes
  s.service_time_ns =
      static_cast<uint32_t>(std::min<Time>((now - newest_arrival) / kPicosPerNano, UINT32_MAX));
  s.ports_down = env.ports_down_bitmap();
  unacked_packets = 0;
  ack_now = false;
  ack_due = kNever;
  ack_repeat_now = false;  // this ACK carries the state a pending repeat would have
  last_ack_port = out.port;
  last_ack_path = out.ev_index;
  if (env.ack_repeat_after > 0 && mrc) ack_repeat_due = now + env.ack_repeat_after;
}

}  // namespace mrc
