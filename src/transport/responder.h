// mrc::Responder: the responder side of a QP. It checks received data packets and places them
// into registered memory, completes messages in order (WRITE-with-immediate ones against posted
// receives), and schedules the ACKs (cumulative PSN, SACK bitmap, echoes), trim NACKs, RoCEv2
// sequence NAKs and CNPs the QP's control table (control.h) sends. The PSN bitmap, the open
// messages and the echoes are its ReceiveWindow (receive_window.h).
//
// A QP holds a Responder only while it receives (Qp::ensure_responder): the requester of a
// pair, which only receives ACKs, never does, and a responder with nothing left to do gives
// its state back (idle(); docs/performance.md, "Bytes per QP"). So that it costs no more than
// its state, it keeps no pointer to its QP or engine: each call is handed what it needs
// (ResponderContext).
#pragma once

#include <cstdint>

#include "common/ring.h"
#include "transport/control.h"
#include "transport/engine_types.h"
#include "transport/memory_table.h"
#include "transport/path_set.h"
#include "transport/qp_env.h"
#include "transport/receive_window.h"
#include "transport/reverse_path.h"

namespace mrc {

// What a responder is handed by its QP for a call.
struct ResponderContext {
  QpEnv& env;
  PathSet& paths;
  ReversePathSet& reverse;  // where the QP's ACKs go (paper 2.4)
  bool& in_control;         // the QP's place in the engine's control ring
  uint32_t qpn;
  uint32_t mtu;            // QpAttr::path_mtu
  uint16_t max_wimm_dest;  // QpAttr::max_wimm_dest, QpUpdate::max_wimm_dest
  bool mrc;                // TransportMode::kMrc (else RoCEv2)
  void mark_control() const { env.mark_control(in_control, qpn); }
};

struct Responder {
  // The window starts at `first_psn` (RTR's rq_psn, or where a released responder stood), its
  // message numbering at `msg_base`, its SACK byte count at `received_bytes`.
  Responder(uint32_t mpr_dest_psns, uint32_t first_psn, uint32_t msg_base, uint64_t received_bytes);

  // A data packet the QP may receive (RTR or RTS) whose rings exist (ReceiveWindow::allocate):
  // MRC accepts any PSN of its window; RoCEv2 only the next one. Returns the drop reason as an
  // error (counted; nothing changed).
  Status on_data(const ResponderContext& c, Time now, const RxPacket& rx);
  Status on_roce_data(const ResponderContext& c, Time now, const RxPacket& rx);
  // A posted receive (at most `rq_depth` waiting); a message placed before may complete now.
  Status post_recv(const ResponderContext& c, uint64_t wr_id, uint32_t rq_depth);
  // Completes the messages whose packets have all arrived, in order.
  void complete_recv_messages(const ResponderContext& c, Time now);
  // Fills the ACK (the common header is in `out`) and starts the next ACK's count; `mrc`:
  // the QP runs MRC (only MRC responders repeat their last ACK).
  void fill_ack(const QpEnv& env, bool mrc, Time now, TxPacket& out);

  // An ACK, repeat, NACK or CNP is pending.
  bool has_control() const {
    return ack_now || ack_repeat_now || !nacks.empty() || roce_nak_pending || cnp_pending;
  }
  // Nothing left to do: the QP may keep only where the window stands and give this back.
  bool idle() const;
  // When the delayed ACK or the tail-ACK repeat is due (kNever: none).
  Time deadline() const {
    Time d = ack_now ? kNever : ack_due;
    if (!ack_repeat_now) d = std::min(d, ack_repeat_due);
    return d;
  }
  // Makes the ACK or repeat due by `now` pending; true if one is.
  bool on_timer(Time now);
  // The QP entered ERR: posted receives complete flushed, nothing more is sent.
  void flush(QpEnv& env, uint32_t qpn, Time now);
  uint64_t ring_bytes() const {
    return window.ring_bytes() + rq.storage_bytes() + nacks.storage_bytes();
  }

  ReceiveWindow window;
  uint32_t wimm_dest_open = 0;   // WRITE-with-imm messages seen but not completed
  Ring<uint64_t> rq;             // posted receive wr_ids
  uint32_t unacked_packets = 0;  // accepted since the last ACK
  bool ack_now = false;
  Time ack_due = kNever;
  Time newest_arrival = 0;
  uint8_t ack_port = 0;
  int ack_path = -1;  // path index of the newest packet to acknowledge
  // Tail-ACK repeat (Engine::set_ack_repeat_after): due when no packet arrives by then after
  // an ACK; pending once due; the port and path the last ACK took (the repeat avoids them).
  Time ack_repeat_due = kNever;
  bool ack_repeat_now = false;
  uint8_t last_ack_port = 0;
  int last_ack_path = -1;
  Ring<TrimNack> nacks;
  bool roce_nak_pending = false;
  bool roce_nak_sent_for_base = false;
  bool cnp_pending = false;
  bool cnp_ever = false;
  Time last_cnp = 0;

 private:
  Status check_framing(const ResponderContext& c, const RxPacket& rx);
  Result<const MemoryRegion*> check_data(const ResponderContext& c, const RxPacket& rx);
  Status accept_data(const ResponderContext& c, Time now, const RxPacket& rx,
                     const MemoryRegion* region);
  void queue_echo(const ResponderContext& c, Time now, const RxPacket& rx, uint8_t flags);
};

}  // namespace mrc
