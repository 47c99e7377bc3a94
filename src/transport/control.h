// Control packets (ACKs, trim NACKs, CNPs, probes and probe replies): their kinds in the order
// a QP serves them, their sizes on the wire, the paths they take, and the one step that sends
// the first of them that can go.
//
// A QP lists its kinds in a table (ControlRow: whether one is pending, which path it takes,
// what it carries) and hands the table to emit_control, which serves the first row that is
// pending and finds a path on the ports asked for, fills the packet's common header, counts it
// and sets its size. A row whose path is not free now leaves the next row its turn; a row may
// also end the step (a probe that found the NIC's probe budget spent: QpEnv::take_probe_token).
// The engine serves QPs with control packets before data (docs/engine.md, "Sans-IO contract").
#pragma once

#include <cstdint>
#include <tuple>

#include "transport/engine_types.h"
#include "transport/path_set.h"
#include "transport/receive_window.h"
#include "transport/reverse_path.h"
#include "wire/headers.h"

namespace mrc {

// The kinds, in the order a QP serves them: what lets the peer's requester go on first (a
// trimmed packet's NACK asks for exactly the packet it lost; the ACK moves its window), then the
// tail-ACK repeat (Engine::set_ack_repeat_after), RoCE's CNP, and the probes, which only
// measure paths: replies to the peer's probes, then this QP's own of its paths and of its
// reverse EV set (paper 2.4).
enum class ControlKind : uint8_t {
  kTrimNack,
  kAck,  // and RoCEv2's sequence NAK, an ACK with a NAK syndrome
  kAckRepeat,
  kCnp,
  kProbeReply,
  kProbe,
  kReverseProbe,
};
inline constexpr int kControlKinds = 7;
const char* control_kind_name(ControlKind k);

// Bytes above UDP: BTH + extensions + ICRC (docs/wire-format.md).
inline constexpr uint32_t kAckWireBytes =
    wire::kBthBytes + wire::kAethBytes + wire::kSackExtBytes + wire::kIcrcBytes;
inline constexpr uint32_t kTrimNackWireBytes =
    wire::kBthBytes + wire::kAethBytes + wire::kTrimNackExtBytes + wire::kIcrcBytes;
inline constexpr uint32_t kProbeWireBytes =
    wire::kBthBytes + wire::kProbeExtBytes + wire::kIcrcBytes;
inline constexpr uint32_t kCnpWireBytes =
    wire::kBthBytes + wire::kCnpReservedBytes + wire::kIcrcBytes;
constexpr uint32_t control_wire_bytes(ControlKind k) {
  switch (k) {
    case ControlKind::kTrimNack:
      return kTrimNackWireBytes;
    case ControlKind::kAck:
    case ControlKind::kAckRepeat:
      return kAckWireBytes;
    case ControlKind::kCnp:
      return kCnpWireBytes;
    case ControlKind::kProbeReply:
    case ControlKind::kProbe:
    case ControlKind::kReverseProbe:
      return kProbeWireBytes;
  }
  return 0;
}

// AETH syndromes (IBTA 9.7.5.1.1): ACK with "credits invalid", NAK PSN sequence error.
inline constexpr uint8_t kAethAck = 0x1F;
inline constexpr uint8_t kAethNakSeqErr = 0x60;

// Who a QP's packets are from and for: the header fields every packet it sends carries.
struct PacketAddress {
  uint32_t qpn = 0;       // this QP (TxPacket::src_qpn)
  uint32_t peer = 0;      // QpAttr::peer
  uint32_t dest_qpn = 0;  // QpAttr::dest_qpn (BTH)
};
// The common header of a packet from `a` on path `path` of `paths` (data and control): its
// port, EV, addresses and a BTH with nothing else set, no payload. Inline: every packet
// sent fills it.
inline void fill_common(TxPacket& out, const PathSet& paths, const PacketAddress& a, int path) {
  out.port = paths.port_of(path);
  out.ev_index = static_cast<uint16_t>(path);
  out.ev = paths.ev(path);
  out.peer = a.peer;
  out.src_qpn = a.qpn;
  out.pkt.bth = wire::Bth{};
  out.pkt.bth.dest_qp = a.dest_qpn;
  out.pkt.payload = nullptr;
  out.pkt.payload_len = 0;
}

// A trimmed packet to NACK: its PSN and the path and port it came by.
struct TrimNack {
  uint32_t psn = 0;
  uint16_t ev = 0;
  uint8_t port = 0;
};

// A probe to answer, the port it came in on and when.
struct ProbeReply {
  wire::ProbeExt probe;
  uint8_t port = 0;
  Time arrived = 0;
};

// What a row's choice of path came to.
struct ControlChoice {
  int path = PathSet::kNone;  // kNone: not on the ports asked for; the next row has its turn
  bool stop = false;          // nothing more goes out in this step
  uint64_t probe_id = 0;      // kProbe, kReverseProbe: the probe's identifier
};

// One kind of control packet of an owner (the QP): how to tell one is pending
// (bool(const Owner&)), choose its path (ControlChoice(Owner&, Time now, uint32_t mask); it
// may take the packet off its queue only once it can go), fill what is particular to it
// (void(Owner&, Time now, const ControlChoice&, TxPacket&)) and what runs once it is filled
// (void(Owner&, Time now)). The functions are the row's types, not pointers, so that the emit
// step compiles to the owner's code for each kind in turn, with no indirect call.
template <class Pending, class Choose, class Fill, class After>
struct ControlRow {
  ControlKind kind;
  uint64_t EngineCounters::*sent;  // counted as one goes out
  Pending pending;
  Choose choose;
  Fill fill;
  After after;
};
template <class Pending, class Choose, class Fill, class After>
constexpr ControlRow<Pending, Choose, Fill, After> control_row(ControlKind kind,
                                                               uint64_t EngineCounters::*sent,
                                                               Pending pending, Choose choose,
                                                               Fill fill, After after) {
  return {kind, sent, pending, choose, fill, after};
}
// The `after` of a row with nothing to do then.
struct NothingAfter {
  template <class Owner>
  constexpr void operator()(Owner&, Time) const {}
};

// The emit step: the first row of `rows` (a tuple of ControlRows, in the order they are
// served) that is pending and whose choice finds a path goes out. `header` fills what every
// packet of the owner carries (port, path, addresses, BTH). False when nothing can go now on
// the ports in `mask`.
template <class Owner, class Header, class... Rows>
bool emit_control(Owner& owner, const std::tuple<Rows...>& rows, Header header,
                  EngineCounters& counters, Time now, uint32_t mask, TxPacket& out) {
  bool sent = false;
  // True once the step is over: a packet went out, or a row stopped it.
  const auto serve = [&](const auto& row) {
    if (!row.pending(owner)) return false;
    const ControlChoice c = row.choose(owner, now, mask);
    if (c.stop) return true;
    if (c.path == PathSet::kNone) return false;
    header(owner, out, c.path);
    row.fill(owner, now, c, out);
    out.transport_bytes = control_wire_bytes(row.kind);
    ++(counters.*row.sent);
    row.after(owner, now);
    sent = true;
    return true;
  };
  std::apply([&](const auto&... row) { (serve(row) || ...); }, rows);
  return sent;
}

// ---- Paths of control packets ---------------------------------------------------------

// Probe replies, CNPs (RoCE) and ACKs without a reverse EV set (ack_path) go back along the
// reverse of the path the packet they answer took (EV sets are configured symmetrically:
// index i names the same plane and spine both ways). That path demonstrably works in one
// direction, so it is the best guess for the other when nothing else is known. Probe replies
// use the probed path even if we think it bad (`allow_assumed_bad`): that is what is being
// tested. Else a path of the preferred port, else of any port in `mask`; kNone if none.
int control_path(PathSet& paths, Time now, uint8_t preferred_port, int preferred_path,
                 uint32_t mask, bool allow_assumed_bad);

// A probe reply's path: on the port the probe came in on, which names its plane at both
// ends, so the round trip measures that plane and no other. The probed path where it lies on
// that port, else another path of the port; kNone while the port is outside `mask` (the reply
// waits for it). Taking any free port instead would send the reply to the peer's port of
// another plane, which may be the very port it reported down: the probe would go unanswered
// and the probed path, working, would stay out of use (PathPolicy::resurrect_probes wants
// answers in a row). Only when that port is down here does the reply take control_path's
// choice.
int probe_reply_path(PathSet& paths, Time now, uint8_t port, int probed_path, uint32_t mask);

// The way the responder's last ACK went (the tail-ACK repeat avoids it).
struct LastAck {
  uint8_t port = 0;
  int path = -1;  // PathSet::kNone before the first
};

// The path of an ACK or trim NACK: the reverse EV set's next (paper 2.4), else (set off or
// every slot mapped out) the reverse of a path data just came by (`preferred_path`, else the
// newest echo of `window` whose port is free; with `waits_for_port`, EngineConfig::
// ack_waits_for_port, kNone while those ports are busy), else control_path. `repeat`: the
// tail-ACK repeat, which avoids the last ACK's way (ack_repeat_path).
int ack_path(PathSet& paths, ReversePathSet& reverse, const ReceiveWindow* window,
             bool waits_for_port, Time now, uint8_t preferred_port, int preferred_path,
             const LastAck& last, uint32_t mask, bool repeat);

// The tail-ACK repeat's path: not the way the last ACK went, which may be what ate it. A GOOD
// path on another up port (another plane's spines), else another path on the same port
// (another hash through the fabric), else that path itself. kNone while a better choice
// exists on a port outside `mask`.
int ack_repeat_path(const PathSet& paths, const LastAck& last, uint32_t mask);

}  // namespace mrc
