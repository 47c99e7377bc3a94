// The MRC engine: a sans-IO protocol core for one NIC (host), driven identically by the
// packet simulator (src/sim), the Linux UDP driver (src/net) and the OCP C API (src/api).
//
// The engine never reads a clock, opens a socket, sleeps, starts a thread or allocates per
// packet. Its inputs are:
//   - a received packet and the current time          on_packet() / on_datagram()
//   - a posted work request                            post_write() / post_recv()
//   - a timer that fired                               on_timer()
//   - a port going down or up                          set_port_up()
// Its outputs are pulled by the driver:
//   - packets to send, each with its NIC port and path  poll_transmit()
//   - completions                                       poll_completion()
//   - async events (EV state changes, QP errors)        poll_event()
//   - the next deadline                                 next_deadline()
//
// Calling sequence (the contract every driver follows, as ngtcp2's handle_expiry does):
//   1. After any input, drain poll_transmit() for every port that can send (in the
//      simulator: when a port goes idle; a port_mask selects which ports may be used), and
//      drain poll_completion()/poll_event().
//   2. Read next_deadline(); when the clock reaches it, call on_timer(now), then step 1.
//   3. `now` never decreases between calls.
// With the same inputs at the same times and the same seed, the outputs are identical.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/ring.h"
#include "common/shared_constants.h"
#include "common/types.h"
#include "transport/cc/cc.h"
#include "transport/cc/nscc.h"
#include "transport/ev_profile.h"
#include "transport/id_cipher.h"
#include "transport/memory_table.h"
#include "transport/path_set.h"
#include "wire/headers.h"

namespace mrc {

class Qp;
class EventLog;
struct LogRecord;

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
  // An ACK reported missing a PSN an earlier ACK had acknowledged (Qp::on_ack): one of the
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

class Engine {
 public:
  explicit Engine(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return config_; }
  // A driver declares the order it keeps (TransmitOrder) when it opens; kPerPort until then.
  void set_transmit_order(TransmitOrder order) { transmit_order_ = order; }
  TransmitOrder transmit_order() const { return transmit_order_; }
  // Tail-ACK repeat (MRC responders; 0, the default: off). Where an ACK's way back is not the
  // path its packet came by -- ECMP modes, in which the reverse flow label or UDP port hashes
  // onto a spine of its own -- a dead spine that data avoids can still eat ACKs, and the last
  // ACK before the requester runs out of window or work has no later ACK to cover for it:
  // the requester would wait for its tail-loss probe (milliseconds on software paths). So
  // when no packet has arrived for `after` since an ACK went out, the responder sends its
  // state once more, on another port where one is up, else on another path (Qp::
  // ack_repeat_path: never the way the lost ACK went while there is another), without echoes
  // (they were delivered or lost with the first copy; resending them would count their
  // bytes twice). A driver whose reverse paths are not its forward paths sets this when it
  // opens (net::UdpDriver in STEV and UDP modes); docs/linux-driver.md, "Tail-ACK repeat".
  void set_ack_repeat_after(Time after) { ack_repeat_after_ = after > 0 ? after : 0; }
  Time ack_repeat_after() const { return ack_repeat_after_; }

  // ---- Memory -------------------------------------------------------------------------
  // `base` may be nullptr: a phantom region (placement is counted, nothing is copied).
  Result<MemoryKeys> register_memory(void* base, uint64_t length, uint64_t iova, uint32_t access);
  Status deregister_memory(uint32_t lkey);
  // A registered region's access flags changed, keys kept (MemoryTable::set_access).
  Status set_memory_access(uint32_t lkey, uint32_t access);

  // ---- QPs ----------------------------------------------------------------------------
  // A new QP in RESET. Errors: kNoResources, kInvalidArgument (depths 0 or > 65536).
  Result<uint32_t> create_qp(const QpCreateAttr& attr);
  // Moves a QP to `target`, taking the attributes that transition requires (see QpAttr).
  // Legal: RESET->INIT->RTR->RTS, any->ERR, any->RESET. Errors: kUnknownQp,
  // kBadQpState (illegal transition), kInvalidArgument (attribute out of range; the QP is
  // unchanged).
  Status modify_qp(Time now, uint32_t qpn, QpState target, const QpAttr& attr);
  Status destroy_qp(uint32_t qpn);
  Result<QpState> qp_state(uint32_t qpn) const;
  // The path set of a QP (for tools and the controller). nullptr if no such QP.
  const PathSet* qp_paths(uint32_t qpn) const;
  // A QP's own packet counters (the engine-wide ones are in counters()). kUnknownQp.
  Result<QpStats> qp_stats(uint32_t qpn) const;
  // What a QP's memory goes to (QpMemory). kUnknownQp.
  Result<QpMemory> qp_memory(uint32_t qpn) const;
  // Controller: deny or allow a path of a QP (OCP MODIFY_EV_STATE).
  Status set_path_denied(Time now, uint32_t qpn, int ev_index, bool denied);
  // Changes the limits of a live QP (OCP mrc.h 3.8, attribute-only modifies in RTR / RTS; see
  // QpUpdate). Takes effect at once: a raised max_wimm lets waiting WRITE_IMMs go, a lowered one
  // holds new ones until enough complete (nothing in flight is recalled); a lowered
  // max_wimm_dest drops new WRITE_IMM messages beyond it (kWimmExceeded) until open ones
  // complete; a new timeout re-arms the ACK timer from the last progress; the retry counts apply
  // from the next expiry on. Errors, with nothing changed: kUnknownQp; kBadQpState for a
  // requester limit before RTS, max_wimm_dest before RTR, or any change in ERR;
  // kInvalidArgument for a value out of range.
  Status update_qp(Time now, uint32_t qpn, const QpUpdate& update);
  // The limits a QP runs with. kUnknownQp.
  Result<QpLimits> qp_limits(uint32_t qpn) const;
  // Controller: path `ev_index` of a QP becomes `desc` (OCP 5.5 REPLACE_EV / MODIFY_FIELDS on
  // an ONLINE EV profile with MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE). The old EV leaves the
  // set as a denied one does: its packets still in flight are resent on other paths (without
  // marking any path bad); the new EV starts in desc.state (kGood or kDenied) with nothing
  // learned. No EV event is emitted: the controller made the change. Errors, with nothing
  // changed: kUnknownQp; kBadQpState in RESET (no path set); kInvalidArgument for an index out of
  // range, a port beyond the engine's, or desc.state kAssumedBad.
  Status replace_path(Time now, uint32_t qpn, int ev_index, const PathDesc& desc);
  // Reconfigures a QP's congestion control in place (OCP 5.5: CONFIG of an ONLINE CC profile
  // with MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE). The algorithm must stay the same; its state
  // (window, delay average, quick-adapt period) carries over and is clamped to the new bounds:
  // NSCC takes every new parameter (cc::Nscc::reconfigure), a fixed window its new size, kNone
  // has nothing to change. Before RTS (no controller running yet) the spec is stored for the
  // RTS transition. Errors, with nothing changed: kUnknownQp; kBadQpState in RESET;
  // kInvalidArgument for another algorithm, DCQCN (not reconfigurable in place: its rate state is
  // tied to the old line rate), or a spec to_init would reject (NSCC base_rtt 0, a fixed window of
  // 0).
  Status reconfigure_cc(Time now, uint32_t qpn, const CcSpec& cc);
  // The congestion control of a QP in RTS (nullptr otherwise, or without CC), for tools/tests.
  const cc::CongestionControl* qp_cc(uint32_t qpn) const;

  // ---- Work ---------------------------------------------------------------------------
  // Errors: kUnknownQp, kBadQpState (not RTS), kQueueFull (send queue full),
  // kBadRkey/kBadAddress (local buffer not in a registered region), kInvalidArgument.
  Status post_write(Time now, uint32_t qpn, const WriteWr& wr);
  // A receive WR for one incoming immediate. Allowed from RTR. Errors: kUnknownQp,
  // kBadQpState, kQueueFull.
  Status post_recv(uint32_t qpn, uint64_t wr_id);

  // ---- Network ------------------------------------------------------------------------
  // The addresses `peer` (QpAttr::peer) sends from: any of its planes' addresses; in SRV6
  // mode the source of a packet is the peer's port address, the uSID carrier being only the
  // destination. From then on every QP of that peer drops (kWrongPeer) a packet whose
  // RxPacket::source is not one of them or is unknown, before anything else about it is
  // looked at. A peer without addresses is not checked (the simulator, whose packets come
  // from its own fabric). Stricter than a RoCE NIC, which accepts any source that names the
  // QP: we run over UDP on networks that are not closed (docs/linux-driver.md, "Security").
  // An empty span forgets the peer's addresses.
  void set_peer_addresses(uint32_t peer, std::span<const Ipv6Address> addresses);
  // Processes one received packet. Returns the drop reason as an error if it was dropped
  // (already counted); a dropped packet changes no state.
  Status on_packet(Time now, const RxPacket& rx);
  // Decodes a whole IPv6/UDP datagram received on `port` and processes it.
  Status on_datagram(Time now, uint8_t port, std::span<const uint8_t> bytes);
  // Fills `out` with the next packet to send on one of the ports in `port_mask` (bit i =
  // port i). Control packets (ACKs, NACKs, probes) go first, then data, round-robin over
  // QPs. Returns false when nothing can be sent now (check next_deadline()).
  bool poll_transmit(Time now, uint32_t port_mask, TxPacket& out);
  void set_port_up(Time now, uint8_t port, bool up);

  // ---- Outputs ------------------------------------------------------------------------
  bool poll_completion(Completion& out);
  bool poll_event(Event& out);
  // Hints for a driver that knows which engine it will call soon (a simulator with thousands
  // of hosts, whose engine state is cold on every call), in the order the driver issues them,
  // one event apart so each finds the loads of the one before done: the driver prefetches the
  // engine object itself, then prefetch_tables() (the QP table, the timer heap's top, the
  // ready ring's head: it reads the engine object), then prefetch() (the first QPs: it reads
  // the QP table) before calling poll_transmit, on_packet or next_deadline. No effect on
  // behaviour.
  void prefetch_tables() const;
  void prefetch() const;
  // Earliest time on_timer() has work (kNever if none).
  Time next_deadline();
  void on_timer(Time now);

  // The structured event log (transport/event_log.h): every packet sent, received and declared
  // lost, ACK timeout, congestion window change and Event from now on goes to `log`, which the
  // caller owns and keeps alive; nullptr (the default) turns it off.
  void set_event_log(EventLog* log) { log_ = log; }
  EventLog* event_log() const { return log_; }

  const EngineCounters& counters() const { return counters_; }
  // NSCC's decisions, summed over every QP of this engine that ran it (cc::Nscc::Stats).
  const cc::Nscc::Stats& nscc_stats() const { return nscc_stats_; }
  EngineCounters& mutable_counters() { return counters_; }

  // ---- Internal plumbing used by Qp ---------------------------------------------------
  MemoryTable& memory() { return memory_; }
  void emit_completion(const Completion& c);
  void emit_event(const Event& e);
  bool logging() const { return log_ != nullptr; }
  void log(const LogRecord& r);  // to the event log (only while logging())
  void mark_ready(Qp* qp);       // QP may have data to send
  void mark_control(Qp* qp);     // QP has a control packet to send
  void rearm(Qp* qp);            // QP's deadline may have changed
  // The port-state bitmap ACKs carry (wire::SackExt::ports_down): ports this NIC has taken
  // out of use, the first 24.
  uint32_t ports_down_bitmap() const;
  // Every QP's RTT samples feed the engine's shared estimate (EngineConfig::share_rtt); `raw`
  // includes the responder's service time, as the tail-loss probe must.
  void note_rtt_sample(Time raw);
  // What a QP without a sample of its own assumes (EngineConfig::fabric_rtt, share_rtt);
  // srtt 0 if nothing is known.
  RttEstimate borrowed_rtt() const;
  // Takes one probe from the NIC's budget (EngineConfig::probe_budget_*); false if none is
  // left, and then next_probe_token() says when there will be one.
  bool take_probe_token(Time now);
  Time next_probe_token() const;
  void refund_probe_token();  // a token taken for a probe that could not go after all
  // EngineConfig::reverse_probe_interval, or the default it stands for.
  Time reverse_probe_interval() const;

 private:
  // Applies a port state to every QP (Engine::set_port_up, at once or after the remap delay).
  void apply_port_state(Time now, uint8_t port, bool up);
  Qp* find_qp(uint32_t qpn) const;
  // Whether `rx` may come from `peer` (set_peer_addresses).
  bool from_peer(uint32_t peer, const RxPacket& rx) const;

  struct TimerEntry {
    Time at;
    uint32_t qpn;
    bool operator>(const TimerEntry& o) const { return at > o.at || (at == o.at && qpn > o.qpn); }
  };

  EngineConfig config_;
  TransmitOrder transmit_order_ = TransmitOrder::kPerPort;
  Time ack_repeat_after_ = 0;
  MemoryTable memory_;
  IdCipher qpn_cipher_;                   // slot + kFirstQpn <-> QPN (EngineConfig::identifier_key)
  std::vector<std::unique_ptr<Qp>> qps_;  // index = slot (qpn_cipher_.decrypt(qpn) - kFirstQpn)
  std::unordered_map<uint32_t, std::vector<Ipv6Address>> peer_addresses_;
  std::vector<uint32_t> free_qp_slots_;
  // FIFO rings of QPNs (each QP at most once in each, guarded by flags on the QP).
  Ring<uint32_t> ready_ring_, control_ring_;
  std::vector<TimerEntry> timers_;  // binary min-heap, lazily invalidated
  Ring<Completion> completions_;    // bounded: a full queue drops (counted)
  Ring<Event> events_;              // bounded likewise
  uint32_t port_up_mask_;
  // Ports seen down and not yet remapped (EngineConfig::port_remap_delay), with when to
  // remap them (a short list: empty but for a fault).
  struct PendingRemap {
    Time at;
    uint8_t port;
  };
  std::vector<PendingRemap> remaps_;
  Time next_remap_ = kNever;
  Rng rng_;
  RttEstimate shared_rtt_;
  // Probe budget: tokens as of probe_tokens_at_.
  uint64_t probe_tokens_ = 0;
  Time probe_tokens_at_ = 0;
  EngineCounters counters_;
  // Configuration QPs only read, one copy per distinct value instead of one per QP
  // (docs/performance.md, "Bytes per QP").
  SharedConstants<CcSpec, CcSpec> cc_specs_;
  SharedConstants<PathPolicy, PathPolicy> path_policies_;
  SharedConstants<cc::NsccConfig, cc::NsccParams> nscc_params_;
  cc::Nscc::Stats nscc_stats_;  // what the QPs' NSCC objects count into
  EventLog* log_ = nullptr;     // set_event_log

  // Event log records of what the engine itself sees (only while logging()).
  void log_sent(Time now, const TxPacket& out);
  void log_received(Time now, const RxPacket& rx, Error verdict, const Qp* qp,
                    uint64_t cwnd_before);
  static uint64_t cwnd_of(const Qp& qp);  // 0 without congestion control
  void log_cwnd_change(Time now, const Qp& qp, uint64_t before);

  friend class Qp;
};

inline constexpr uint32_t kFirstQpn = 2;  // QPN 0 and 1 are special in InfiniBand

}  // namespace mrc
