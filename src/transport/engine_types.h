// The engine's API types: QP states and attributes, work requests, completions, events, the
// packets a driver moves, the configuration and the counters. engine.h, the external
// contract, includes this header; the QP and its parts (qp.h, qp_env.h) use these types
// without the Engine class, so that the engine owns its QPs and not the other way round.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/types.h"
#include "transport/cc/cc.h"
#include "transport/cc/nscc.h"
#include "transport/ev_profile.h"
#include "transport/path_set.h"
#include "wire/headers.h"

namespace mrc {

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kErr };
const char* qp_state_name(QpState s);

// Which transport a QP runs.
enum class TransportMode : uint8_t {
  kMrc,   // MRC: spraying over the EV set, SACK, RACK-style loss detection, trim NACKs
  kRoce,  // RoCEv2 baseline: one path (ECMP), in-order responder, go-back-N, CNPs
};

enum class CcAlgorithm : uint8_t { kNone, kNscc, kDcqcn, kFixedWindow };

struct CcSpec {
  CcAlgorithm algorithm = CcAlgorithm::kNscc;
  cc::NsccConfig nscc;
  cc::DcqcnConfig dcqcn;
  uint64_t fixed_window = 1 << 20;  // bytes, for kFixedWindow
  friend bool operator==(const CcSpec&, const CcSpec&) = default;
};

// The bytes one QP holds (Engine::qp_memory), by what holds them: container capacities, not
// their use, and no allocator overhead.
struct QpMemory {
  uint64_t object = 0;  // the QP object: its fixed fields and the headers of its containers
  uint64_t paths = 0;   // per path: the path set's arrays and the requester's per-path FIFOs
  uint64_t rings = 0;   // requester and responder rings and queues
  uint64_t cc = 0;      // the congestion control object
  uint64_t total() const { return object + paths + rings + cc; }
};

// The order a driver keeps between poll_transmit() and the wire; RACK's rule for packets
// that share a send time relies on it (Qp::rack_tie_due). kPerPort: each port's packets
// leave in the order they were produced (the simulator; the Linux driver in SRV6 mode, one
// socket per port). kPerPath: only each path's do (the Linux driver in STEV and UDP modes
// sends from one socket per UDP source port, i.e. per path, one socket after another).
enum class TransmitOrder : uint8_t { kPerPort, kPerPath };

struct EngineConfig {
  uint8_t num_ports = 1;  // NIC ports (planes), at most 32
  uint64_t seed = 1;
  // 0: QPNs count up from kFirstQpn and memory keys name their slot (the simulator and tests:
  // readable and reproducible). Otherwise both are a permutation keyed by this value
  // (IdCipher), so that a host that was not handed them at setup cannot name them; drivers
  // on real networks pass a key drawn from a CSPRNG (net::secure_random_u64), docs/
  // linux-driver.md, "Security". The engine itself never draws randomness.
  uint64_t identifier_key = 0;
  // Width of the QPNs the engine hands out (even, 8..24): the C API puts its process slot in
  // the bits above 16 of the QPN it shows (docs/c-api.md, "QP numbers"), so its engine's
  // QPNs (keyed or not) must fit in 16. At most 2^bits - 2 QPs.
  uint8_t qpn_bits = 24;
  uint32_t max_qps = 4096;
  uint32_t completion_capacity = 1 << 16;  // completions buffered before poll
  uint32_t event_capacity = 4096;          // async events buffered; overflow is counted as dropped
  // Responder ACK policy: an ACK goes out after `ack_every` new packets (<= 8, the echo
  // capacity), at once for packets flagged AckNow, and otherwise after `ack_delay`.
  uint32_t ack_every = 4;
  Time ack_delay = us(2);
  Time cnp_interval = us(50);  // RoCE: at most one CNP per QP per interval (DCQCN NP)
  // Entries each ring of a QP starts with (requester PSNs and transmission records, the
  // retransmission and send queues, the responder's PSN bitmap and messages, the receive and
  // control queues; rounded up to a power of two where the ring needs one). Rings double
  // when full up to their protocol limits (MPR, sq_depth, rq_depth), which alone decide what
  // may be in flight: memory follows the traffic, not the window (a simulated all-to-all has
  // ~a million QPs carrying a few packets each). A value at or above the limits allocates
  // each ring whole when the QP first sends / receives.
  uint32_t qp_initial_ring = 4;
  // How long the NIC takes to remap a dead port's EVs to its other ports after it sees the
  // link go down (paper 3: remapping the EVs of many QPs "is not instantaneous"). Until then
  // QPs keep sending on the port and those packets are lost. A port that comes back is used
  // at once; one that comes back within the delay was never remapped. 0: at once.
  Time port_remap_delay = 0;
  // What a QP that has no RTT sample of its own yet (a small message: one or two packets)
  // assumes for its tail-loss probe and reordering window, so that a packet lost to a failed
  // path is resent after a few fabric RTTs instead of the ACK timeout (paper 2.1: failures
  // are bypassed "in a few tens of microseconds"). In order: the engine's RTT estimate from
  // its other QPs' samples (`share_rtt`: every QP of a NIC crosses the same fabric, so their
  // RTT is this QP's best guess; engine-wide, not per peer, so it costs no memory per peer),
  // else `fabric_rtt` (the unloaded RTT the operator or driver knows; 0: unknown), else the
  // ACK timeout. docs/engine.md, "Decisions".
  Time fabric_rtt = 0;
  bool share_rtt = true;
  // The NIC's budget for probes of paths taken out of use, over all its QPs: a token bucket of
  // `probe_budget_burst` probes refilled one per `probe_budget_interval` (0: unlimited). A QP
  // whose probe finds no token waits for one (probes_deferred). The default, 2 M probes/s of
  // ~100 bytes, is under 1% of a 400 Gb/s NIC: with per-QP probing, a dead spine seen by
  // thousands of QPs would otherwise draw millions of probes a second.
  Time probe_budget_interval = ns(500);
  uint32_t probe_budget_burst = 256;
  // The reverse EV set (paper 2.4, ReversePathSet): the paths an MRC QP's ACKs and trim NACKs
  // take, `reverse_evs_per_plane` per port (at most 8), refreshed by one probe per
  // `reverse_probe_interval` while the QP receives data and sends none. 0 EVs: control
  // packets take the reverse of the path their data packet came by. Interval 0: twice the
  // engine's RTT estimate (borrowed_rtt), at least 2 us; 50 us when no RTT is known.
  // docs/engine.md, "Reverse path".
  uint8_t reverse_evs_per_plane = 2;
  Time reverse_probe_interval = 0;
  // Without a reverse EV set (or with none of its EVs live), an ACK or trim NACK takes the
  // reverse of a path its data came by: the packet that asked for it, else another the ACK
  // reports (its echoes, newest first) whose port is free. Each crossed a working spine
  // moments ago (paper 2.4: control on EVs known to work; in a symmetric EV set the same
  // spine). When all those ports are busy, `ack_waits_for_port` holds the ACK for one
  // (control goes first: at most one data packet's serialization) instead of sending it at
  // once on a free port's next data path, which nothing has checked: after a leaf-spine link
  // fails it may cross it, and a small message's ACK is lost. false: any free port at once.
  // docs/engine.md, "Decisions".
  bool ack_waits_for_port = true;
};

// An RTT estimate (RFC 6298 smoothing): a QP's own, or the engine's shared one.
struct RttEstimate {
  Time srtt = 0;  // 0: no sample yet
  Time rttvar = 0;
  Time min_rtt = kNever;
};

// RFC 6298 2.2-2.3: a smoothed RTT and its variation after one more sample (the first sets
// both). The one rule for every estimate the engine keeps (a QP's, the engine's shared one).
inline void smooth_rtt(Time& srtt, Time& rttvar, Time sample) {
  if (srtt == 0) {
    srtt = sample;
    rttvar = sample / 2;
    return;
  }
  const Time diff = srtt > sample ? srtt - sample : sample - srtt;
  rttvar = (3 * rttvar + diff) / 4;
  srtt = (7 * srtt + sample) / 8;
}

// Loss recovery's defaults, the one place they are set (QpAttr, LossTiming, the QP's RTS
// copy, SessionConfig): an ACK timeout of 1.024 us x 2^14 = 16.8 ms (OCP mrc.h's unit; IBTA's
// is 4.096 us), then 7 retries at that interval and 7 doubling ones.
inline constexpr uint8_t kDefaultAckTimeout = 14;
inline constexpr uint8_t kDefaultRetryLinear = 7;
inline constexpr uint8_t kDefaultRetryExp = 7;

// Attributes of modify_qp(), grouped by the transition that requires them
// (mrc-background.md; OCP mrc.h section 3.8).
struct QpAttr {
  // RESET -> INIT: the path set (from the EV profile) and congestion control.
  TransportMode transport = TransportMode::kMrc;
  std::vector<PathDesc> paths;  // MRC: the EV set; RoCE: exactly one path
  uint32_t ev_min_active = 1;
  PathPolicy path_policy;
  CcSpec cc;
  // INIT -> RTR: the peer and the responder's limits.
  uint32_t dest_qpn = 0;
  uint32_t peer = 0;            // driver's name for the peer (address vector), opaque
  uint32_t rq_psn = 0;          // first PSN expected from the peer
  uint32_t path_mtu = 4096;     // payload bytes per packet (256..9000)
  uint16_t max_wimm_dest = 64;  // WRITE-with-imm messages in flight as responder
  uint8_t mpr_dest = 8;         // responder window, units of 128 PSNs (1..255)
  // RTR -> RTS: the requester's limits.
  uint32_t sq_psn = 0;                         // first PSN this QP sends
  uint16_t max_wimm = 64;                      // WRITE-with-imm messages in flight as requester
  uint8_t mpr = 8;                             // outstanding PSN range, units of 128 PSNs (1..255)
  uint8_t timeout = kDefaultAckTimeout;        // ACK timeout = 1.024 us * 2^timeout (0..24)
  uint8_t retry_linear = kDefaultRetryLinear;  // fixed-interval retries (0..7)
  uint8_t retry_exp = kDefaultRetryExp;        // exponential-backoff retries (0..25; 25 = infinite)
  Time reorder_window = 0;                     // RACK reordering window; 0 = min RTT seen (>= 1 us)
};

// Attributes a live QP may change (Engine::update_qp). Unset fields stay as they are. The
// requester's limits -- the RTS attributes of OCP mrc.h 3.8: ACK timeout, retry counts,
// max_wimm -- change in RTS; the responder's max_wimm_dest (an RTR attribute) in RTR and RTS.
// MPR cannot change: it sizes the PSN rings and the responder's window, which hold packets in
// flight (OCP: dynamic MPR is the optional MRC_DEVICE_CAP_DYNAMIC_MPR, not offered here).
struct QpUpdate {
  std::optional<uint8_t> timeout = {};         // 0..24: ACK timeout = 1.024 us * 2^timeout
  std::optional<uint8_t> retry_linear = {};    // 0..7
  std::optional<uint8_t> retry_exp = {};       // 0..25 (25 = infinite)
  std::optional<uint16_t> max_wimm = {};       // >= 1
  std::optional<uint16_t> max_wimm_dest = {};  // >= 1
};

// The limits a QP runs with now (Engine::qp_limits), as set by modify_qp and update_qp.
struct QpLimits {
  uint8_t timeout = 0;
  uint8_t retry_linear = 0;
  uint8_t retry_exp = 0;
  uint16_t max_wimm = 0;
  uint16_t max_wimm_dest = 0;
  uint32_t mpr_psns = 0;       // requester window, PSNs
  uint32_t mpr_dest_psns = 0;  // responder window, PSNs
};

struct QpCreateAttr {
  uint32_t sq_depth = 256;  // work requests outstanding (power of two is not needed)
  uint32_t rq_depth = 256;  // receive WRs (for immediates)
  bool sq_sig_all = true;   // every send WR completes (else only signaled ones)
};

enum class WrOpcode : uint8_t { kWrite, kWriteImm };

struct WriteWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kWrite;
  uint32_t lkey = 0;        // local region of the source buffer
  uint64_t local_addr = 0;  // iova of the source buffer within that region
  uint64_t length = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;  // host order
  bool signaled = true;
};

enum class WcStatus : uint8_t {
  kSuccess,
  kRetryExceeded,  // the ACK timeout expired more often than the retry limits allow
  kFlushed,        // the QP entered ERR before this WR could complete
  // An ACK reported missing a PSN an earlier ACK had acknowledged (Requester::on_ack): one of the
  // two was not the responder's, and WRs may have completed for data it never received.
  kAckContradiction,
};
const char* wc_status_name(WcStatus s);

enum class WcOpcode : uint8_t { kWrite, kWriteImm, kRecvImm };

struct Completion {
  uint64_t wr_id = 0;
  uint32_t qpn = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kWrite;
  uint32_t imm = 0;       // kRecvImm
  uint64_t byte_len = 0;  // kRecvImm: bytes of the message
  Time time = 0;          // when the engine produced it
};

enum class EventType : uint8_t {
  kEvStateChange,  // a path changed state (GOOD <-> ASSUMED_BAD, DENIED)
  kQpError,        // a QP entered ERR
  kPortChange,     // set_port_up changed a port
  // A backup EV replaced a mapped-out active EV of the same plane (PathPolicy::
  // active_per_plane): ev_index is the backup that became active, `replaced` the EV that
  // left; from/to are their states.
  kEvSwap,
  // A slot of a QP's reverse EV set (the paths of its ACKs, paper 2.4) changed: ev_index is
  // the path that came in, `replaced` the one that left (kNoPath: none; a slot mapped out
  // stays empty until a probe refills it); `port` the slot's plane.
  kAckEvChange,
};

struct Event {
  EventType type = EventType::kEvStateChange;
  uint32_t qpn = 0;
  uint16_t ev_index = 0;
  uint8_t port = 0;
  ev::EvState from = ev::EvState::kGood;
  ev::EvState to = ev::EvState::kGood;
  Time time = 0;
  uint16_t replaced = 0;                       // kEvSwap: the EV that left the active set
  static constexpr uint16_t kNoPath = 0xFFFF;  // kAckEvChange: no path came in / left
};

// One packet for the driver to send. `pkt.payload` points into registered memory (nullptr
// for phantom regions) and stays valid until the next engine call.
struct TxPacket {
  uint8_t port = 0;       // NIC port (plane)
  uint16_t ev_index = 0;  // path index within the QP's set
  ev::ExpandedEv ev{};    // expanded EV (the path on the wire)
  uint32_t peer = 0;      // QpAttr::peer of the sending QP
  uint32_t src_qpn = 0;
  uint32_t transport_bytes = 0;  // BTH .. payload + ICRC: what crosses the wire above UDP
  wire::TransportPacket pkt;
};

// An IPv6 address as the engine compares it (network byte order).
using Ipv6Address = wire::Ipv6Addr;

// A received packet, already parsed (the simulator hands these over directly; the Linux
// driver uses on_datagram, which decodes and calls on_packet).
struct RxPacket {
  uint8_t port = 0;
  // The datagram's IPv6 source, when the driver knows it. A QP whose peer has addresses
  // (Engine::set_peer_addresses) accepts packets only from one of them (kWrongPeer).
  bool source_known = false;
  Ipv6Address source{};
  bool ecn_ce = false;   // IPv6 ECN field was CE
  bool trimmed = false;  // a switch cut the payload (DSCP kDscpTrimmed)
  wire::TransportPacket pkt;
};

// Per-QP counters (requester side).
struct QpStats {
  uint64_t data_sent = 0;    // first transmissions of data packets
  uint64_t retransmits = 0;  // data packets sent again
  // The requester's loss detection now (0 before the QP first posts work): its smoothed RTT
  // and RACK's reordering window (docs/engine.md, "Loss detection").
  Time srtt = 0;
  Time reorder_window = 0;
};

// Why received packets were dropped. Every drop is counted; none changes QP state.
enum class DropReason : uint8_t {
  kDecode,  // malformed bytes (on_datagram)
  kUnknownQp,
  kBadState,  // QP not in a state that accepts this packet
  kBadRkey,
  kBadAddress,
  kPsnOutOfWindow,  // stale or beyond the responder window
  kBadAck,          // ACK/NACK for PSNs never sent
  kWimmExceeded,    // responder: more WRITE-with-imm in flight than max_wimm_dest
  kBadOpcode,
  kInconsistent,    // fields contradict what the QP knows (e.g. message size changed)
  kWrongPeer,       // source address is not one of the QP's peer's (Engine::set_peer_addresses)
  kPayloadTooLong,  // payload (or a trimmed packet's announced length) above the path MTU
  kCount
};
const char* drop_reason_name(DropReason r);

struct EngineCounters {
  uint64_t data_sent = 0;  // data packets, first transmissions
  uint64_t retransmits = 0;
  uint64_t acks_sent = 0;
  uint64_t ack_repeats = 0;  // tail-ACK repeats (Engine::set_ack_repeat_after), in acks_sent too
  uint64_t nacks_sent = 0;   // trim NACKs + RoCE sequence NAKs
  uint64_t probes_sent = 0;
  uint64_t probes_unanswered = 0;  // no reply by the time the path's next probe was due
  uint64_t probes_deferred = 0;    // a due probe waited for the NIC's probe budget
  uint64_t probe_replies_sent = 0;
  uint64_t cnps_sent = 0;
  uint64_t data_received = 0;  // accepted and placed
  uint64_t duplicates = 0;     // received again, not placed again
  uint64_t trimmed_received = 0;
  uint64_t out_of_sequence = 0;  // RoCE responder: dropped for arriving out of order
  uint64_t ecn_received = 0;
  uint64_t bytes_placed = 0;
  uint64_t losses_detected = 0;  // RACK / per-path order / PTO
  // Which detector declared each MRC loss (their sum is losses_detected minus RoCE NAKs).
  uint64_t losses_path_order = 0;  // a later transmission on the same path was delivered
  uint64_t losses_rack = 0;        // a transmission sent a reorder window later was delivered
  uint64_t losses_pto = 0;         // the oldest transmission outlived the probe timeout
  // Of those: fired by a QP with no RTT sample of its own, on the engine's shared estimate or
  // EngineConfig::fabric_rtt (without them such a loss waited for the ACK timeout).
  uint64_t losses_pto_borrowed_rtt = 0;
  uint64_t losses_rto = 0;    // resent by an ACK timeout
  uint64_t losses_other = 0;  // trim NACK, port down, path denied
  // Losses that did not mark their path: it had delivered a trimmed header just before
  // (PathPolicy::trim_hold): congestion, not a failure.
  uint64_t losses_on_trimming_paths = 0;
  uint64_t spurious_losses = 0;  // declared lost, then the original arrived after all
  // Of those: acknowledged before the retransmission even left (the cheapest false loss;
  // the rest were resent for nothing).
  uint64_t losses_undone = 0;
  // Declared lost again after a retransmission, then acknowledged before the next one left:
  // some copy arrived, which one is unknown (so not in losses_undone). With losses_undone and
  // retransmits it accounts for every loss declared.
  uint64_t losses_acked_before_resend = 0;
  // A retransmission that reached the responder after another copy had (its echo says
  // duplicate: a DSACK, RFC 8985 6.2): resent for nothing, whether or not spurious_losses
  // saw the original arrive.
  uint64_t duplicate_retransmits = 0;
  uint64_t timeouts = 0;  // ACK timeout (RTO) expirations
  uint64_t trim_nacks_received = 0;
  uint64_t ev_state_changes = 0;
  uint64_t ev_swaps = 0;  // active EVs replaced by a backup (kEvSwap)
  // Of those, GOOD EVs replaced after a run of ECN marks (PathPolicy::ecn_swap_marks).
  uint64_t ev_ecn_swaps = 0;
  // The reverse EV set (paper 2.4): slot changes (kAckEvChange: filled by an answered probe,
  // mapped out by an unanswered one, replaced after the QP's own data found the path dead),
  // its probes and those that went unanswered.
  uint64_t ack_ev_changes = 0;
  uint64_t reverse_probes_sent = 0;
  uint64_t reverse_probes_unanswered = 0;
  // ACKs whose port-state bitmap changed what a QP knows of its peer's ports (paper 3).
  uint64_t peer_port_changes = 0;
  // Control packets accepted (every check passed, docs/linux-driver.md "Security"), by kind:
  // what a host off the path could make count only by forging the peer's address.
  uint64_t acks_received = 0;
  uint64_t acks_advancing = 0;  // of those: acknowledged a PSN not acknowledged before
  // ACKs that contradicted an earlier one (WcStatus::kAckContradiction; the QP ended).
  uint64_t ack_contradictions = 0;
  uint64_t trim_nacks_stale = 0;  // of trim_nacks_received: no such packet in flight, ignored
  uint64_t probes_received = 0;
  uint64_t probe_replies_received = 0;
  uint64_t cnps_received = 0;
  // acks_advancing by the port (plane) they arrived on.
  uint64_t acks_advancing_by_port[32] = {};
  uint64_t completions = 0;
  uint64_t completion_errors = 0;
  uint64_t completions_dropped = 0;  // completion buffer overflow (must stay 0)
  uint64_t events_dropped = 0;
  uint64_t drops[static_cast<int>(DropReason::kCount)] = {};
  uint64_t max_outstanding_psns = 0;  // high-water mark across QPs (MPR check)
  uint64_t max_outstanding_wimm = 0;  // high-water mark across QPs (WIMM check)
};

}  // namespace mrc
