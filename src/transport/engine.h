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
#include "transport/engine_types.h"
#include "transport/ev_profile.h"
#include "transport/id_cipher.h"
#include "transport/memory_table.h"
#include "transport/path_set.h"
#include "transport/qp_env.h"
#include "wire/headers.h"

namespace mrc {

class Qp;
class EventLog;
struct LogRecord;

class Engine {
 public:
  explicit Engine(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return env_.config; }
  // A driver declares the order it keeps (TransmitOrder) when it opens; kPerPort until then.
  void set_transmit_order(TransmitOrder order) { env_.transmit_order = order; }
  TransmitOrder transmit_order() const { return env_.transmit_order; }
  // Tail-ACK repeat (MRC responders; 0, the default: off). Where an ACK's way back is not the
  // path its packet came by -- ECMP modes, in which the reverse flow label or UDP port hashes
  // onto a spine of its own -- a dead spine that data avoids can still eat ACKs, and the last
  // ACK before the requester runs out of window or work has no later ACK to cover for it:
  // the requester would wait for its tail-loss probe (milliseconds on software paths). So
  // when no packet has arrived for `after` since an ACK went out, the responder sends its
  // state once more, on another port where one is up, else on another path (ack_repeat_path
  // in control.h: never the way the lost ACK went while there is another), without echoes
  // (they were delivered or lost with the first copy; resending them would count their
  // bytes twice). A driver whose reverse paths are not its forward paths sets this when it
  // opens (net::UdpDriver in STEV and UDP modes); docs/linux-driver.md, "Tail-ACK repeat".
  void set_ack_repeat_after(Time after) { env_.ack_repeat_after = after > 0 ? after : 0; }
  Time ack_repeat_after() const { return env_.ack_repeat_after; }

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
  void set_event_log(EventLog* log) { env_.log = log; }
  EventLog* event_log() const { return env_.log; }

  const EngineCounters& counters() const { return env_.counters; }
  // NSCC's decisions, summed over every QP of this engine that ran it (cc::Nscc::Stats).
  const cc::Nscc::Stats& nscc_stats() const { return env_.nscc_stats; }
  EngineCounters& mutable_counters() { return env_.counters; }
  // The registered memory (register_memory), as the QPs check it.
  MemoryTable& memory() { return env_.memory; }
  // EngineConfig::reverse_probe_interval, or the default it stands for.
  Time reverse_probe_interval() const { return env_.reverse_probe_interval(); }

 private:
  // Applies a port state to every QP (Engine::set_port_up, at once or after the remap delay).
  void apply_port_state(Time now, uint8_t port, bool up);
  Qp* find_qp(uint32_t qpn) const;
  // Whether `rx` may come from `peer` (set_peer_addresses).
  bool from_peer(uint32_t peer, const RxPacket& rx) const;

  // What the QPs see of the engine (QpEnv): configuration, counters, the scheduling rings and
  // timers, the completion and event queues, the shared RTT estimate and probe budget.
  QpEnv env_;
  IdCipher qpn_cipher_;                   // slot + kFirstQpn <-> QPN (EngineConfig::identifier_key)
  std::vector<std::unique_ptr<Qp>> qps_;  // index = slot (qpn_cipher_.decrypt(qpn) - kFirstQpn)
  std::unordered_map<uint32_t, std::vector<Ipv6Address>> peer_addresses_;
  std::vector<uint32_t> free_qp_slots_;
  // Ports seen down and not yet remapped (EngineConfig::port_remap_delay), with when to
  // remap them (a short list: empty but for a fault).
  struct PendingRemap {
    Time at;
    uint8_t port;
  };
  std::vector<PendingRemap> remaps_;
  Time next_remap_ = kNever;
  Rng rng_;

  // Event log records of what the engine itself sees (only while logging()).
  void log_sent(Time now, const TxPacket& out);
  void log_received(Time now, const RxPacket& rx, Error verdict, const Qp* qp,
                    uint64_t cwnd_before);
  static uint64_t cwnd_of(const Qp& qp);  // 0 without congestion control
  void log_cwnd_change(Time now, const Qp& qp, uint64_t before);
  void mark_ready(Qp* qp);    // QP may have data to send
  void mark_control(Qp* qp);  // QP has a control packet to send
  void rearm(Qp* qp);         // QP's deadline may have changed (armed by arm_pending)
  void arm_pending();         // arms the deadlines of the QPs rearm() named since
};

inline constexpr uint32_t kFirstQpn = 2;  // QPN 0 and 1 are special in InfiniBand

}  // namespace mrc
