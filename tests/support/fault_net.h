// An in-memory fault network for tests and tools: a small deterministic discrete-event driver
// that connects engines (usually two) port by port and injects faults, in the spirit of
// ngtcp2's examples/sim, picoquic's sim_link (loss masks) and s2n-quic's io/testing/model.rs
// (every knob states its semantics).
//
// Model.
//   - Hosts 0..N-1, each an Endpoint (normally an mrc::Engine) with `num_ports` NIC ports.
//     Port p of every host is cabled to plane p: one switch per plane, so a packet sent on
//     port p reaches the peer's port p. The peer is TxPacket::peer (= QpAttr::peer), which
//     pair.h's connect_pair sets to the peer's host id.
//   - Each (host, port) link has a rate. The port serializes: the endpoint is polled with a
//     port's bit in port_mask only while that port is idle and up; a packet of B bytes keeps
//     the port busy for (B + framing_bytes) * 8 / rate.
//   - After serialization the packet enters its plane's switch. Faults are applied there, in
//     a fixed order (below). The switch's egress toward the destination port serializes again
//     at the destination port's rate (a FIFO queue; queue-based ECN/trim/tail drop measure its
//     backlog), then the packet propagates for `delay` + per-path extra delay + jitter.
//   - Packets cross as real bytes: the envelope (IPv6 + UDP [+ SRH]) is built from the
//     sending QP's EV with ev::apply_to_envelope, wire::encode writes the datagram into a
//     pooled buffer (copying the payload: TxPacket payloads are only valid until the next
//     engine call), faults edit the bytes, and the receiver gets them via on_datagram().
//   - The driver follows engine.h's calling sequence exactly: after every input it drains
//     poll_transmit (idle, up ports), poll_completion and poll_event; it calls on_timer at
//     next_deadline(); `now` never decreases.
//   - Time is integer picoseconds; events sharing a time run in the order they were
//     scheduled. All randomness comes from one mrc::Rng seeded by NetConfig::seed, drawn in
//     event order, so the same configuration and seed give identical runs. No global state.
//
// Fault order at the switch, for each packet (the first that fires decides a drop):
//   source port down -> path blackhole -> scripted faults (nth packet) -> random loss (global
//   + path) -> corruption -> trim (scripted / random / queue threshold) -> queue tail drop ->
//   ECN CE (scripted / random / queue threshold) -> duplication.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "common/types.h"
#include "transport/engine.h"
#include "transport/ev_profile.h"
#include "transport/rng.h"
#include "wire/headers.h"

namespace mrc::testnet {

using HostId = int;

// What the network sees a packet as, from its BTH opcode.
enum class PacketKind : uint8_t { kData, kAck, kTrimNack, kProbe, kProbeReply, kCnp, kOther, kAny };
PacketKind packet_kind(wire::Opcode op);
const char* packet_kind_name(PacketKind k);

// The driver-facing half of mrc::Engine. The network drives Endpoints so that it can be
// tested (and used) with scripted endpoints as well as engines.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual Status on_datagram(Time now, uint8_t port, std::span<const uint8_t> bytes) = 0;
  virtual bool poll_transmit(Time now, uint32_t port_mask, TxPacket& out) = 0;
  virtual bool poll_completion(Completion& out) = 0;
  virtual bool poll_event(Event& out) = 0;
  virtual Time next_deadline() = 0;
  virtual void on_timer(Time now) = 0;
  virtual void set_port_up(Time now, uint8_t port, bool up) = 0;
  // The engine behind this endpoint, if any.
  virtual Engine* engine() { return nullptr; }
};

// An Endpoint that owns an mrc::Engine and forwards to it. Defined in engine_endpoint.cc so
// that tests of the network alone do not need the engine's implementation.
std::unique_ptr<Endpoint> make_engine_endpoint(const EngineConfig& cfg);

// Selects packets. A field left at its wildcard (-1 / kAny) matches anything.
struct PacketMatch {
  int from_host = -1;  // sending host; -1: both directions
  int to_host = -1;    // receiving host
  int port = -1;       // the sender's port = the plane
  int ev_index = -1;   // TxPacket::ev_index chosen by the sender (ACKs carry their own)
  PacketKind kind = PacketKind::kAny;
};

// A fault on a set of paths during a time window [from, until) (time at the switch).
struct PathFault {
  PacketMatch match;  // usually {port, ev_index}; from_host -1 affects both directions
  Time from = 0;
  Time until = kNever;
  bool blackhole = false;  // silently drop every matching packet (a dead spine / link)
  double loss = 0;         // extra drop probability on top of NetConfig::loss
  Time extra_delay = 0;    // added to the one-way delay (a longer path): reorders vs. others
};

// A deterministic fault on exactly the Nth packets that match (picoquic's loss mask, by
// ordinal rather than by a rotating 64-bit mask so that tests read naturally).
enum class FaultAction : uint8_t {
  kDrop,       // silently lost
  kTrim,       // payload cut (data packets only; others are left alone)
  kMarkCe,     // ECN CE set (any packet)
  kDuplicate,  // delivered twice
  kCorrupt,    // one bit flipped after the IPv6/SRH headers (decode must reject it)
};
struct ScriptedFault {
  PacketMatch match;
  FaultAction action = FaultAction::kDrop;
  // 0-based ordinals among the packets matching `match`, counted at the switch from the
  // start of the run (packets dropped by an earlier stage of the fault order still count).
  std::vector<uint64_t> nth;
  // Alternatively (or additionally): every matching data packet whose BTH PSN is in this
  // list, for its first `times` occurrences (e.g. "trim PSN 5 once").
  std::vector<uint32_t> psns;
  uint32_t times = 1;
};

// A port (NIC port = plane link) going down, and optionally up again. Both the endpoints and
// the link see it: set_port_up(now, port, false) is called on every host the fault names, and
// while a port is down the network drops what it would send or receive.
struct PortFault {
  int host = -1;  // -1: port `port` of every host (both ends of the plane)
  uint8_t port = 0;
  Time down_at = 0;
  Time up_at = kNever;  // kNever: stays down
};

// A flapping link: `cycles` times, down for `down_for` then up for `up_for`, from `start`.
struct PortFlap {
  int host = -1;
  uint8_t port = 0;
  Time start = 0;
  Time down_for = us(10);
  Time up_for = us(10);
  uint32_t cycles = 1;
};

// Global knobs. Probabilities are per packet, drawn independently at the switch.
struct NetConfig {
  uint64_t seed = 1;
  // Default rate of every host port (bits/s); set_port_rate overrides one port.
  uint64_t link_bps = 100'000'000'000ull;
  // Bytes the link carries per packet beyond the IPv6 datagram (Ethernet header 14 + FCS 4 +
  // preamble 8 + inter-frame gap 12): they cost serialization time, they are not delivered.
  uint32_t framing_bytes = 38;
  // One-way propagation delay of every packet (host -> switch -> host, excluding
  // serialization and queueing).
  Time delay = us(1);
  // Each packet gets an extra uniform random delay in [0, jitter]. > 0 reorders packets.
  Time jitter = 0;
  // Probability a packet (any kind) is silently dropped.
  double loss = 0;
  // Probability a packet (any kind) is delivered twice; the copy arrives up to
  // `duplicate_spread` after the original (uniform).
  double duplicate = 0;
  Time duplicate_spread = us(1);
  // Probability a data packet with payload is trimmed: DSCP set to wire::kDscpTrimmed, the
  // payload removed, headers kept (RETH.dma_len keeps the original length), and it skips the
  // egress queue (trimmed headers travel at high priority, as in UET/NDP switches).
  double trim = 0;
  // Probability an ECN-capable packet (data) is CE-marked.
  double ecn = 0;
  // Probability one bit after the IPv6 [+ SRH] headers is flipped: the ICRC must catch it.
  double corrupt = 0;
  // Egress queue toward each host port, measured in bytes waiting to serialize when the
  // packet arrives. 0 disables each threshold. Above ecn_threshold_bytes ECT packets are
  // CE-marked; above trim_threshold_bytes data packets are trimmed; a packet that would take
  // the backlog above queue_limit_bytes is dropped (tail drop).
  uint64_t ecn_threshold_bytes = 0;
  uint64_t trim_threshold_bytes = 0;
  uint64_t queue_limit_bytes = 0;
  // Safety valve: run_until stops (kEventLimit) after this many events in one call.
  uint64_t max_events = 200'000'000;
  // An endpoint whose next_deadline() stays <= now after on_timer this many times in a row
  // at one instant is livelocked: run_until stops with kLivelock.
  uint32_t livelock_timer_calls = 100'000;
};

// Everything the network did. Every packet that enters a switch ends in exactly one of
// delivered / dropped_* (duplicates add to `duplicated` and then count like packets).
struct NetCounters {
  uint64_t sent = 0;        // packets polled from endpoints
  uint64_t sent_bytes = 0;  // IPv6 datagram bytes
  uint64_t sent_by_kind[static_cast<int>(PacketKind::kAny)] = {};
  uint64_t delivered = 0;  // handed to on_datagram
  uint64_t delivered_bytes = 0;
  uint64_t rx_rejected = 0;       // on_datagram returned an error (the engine counts why)
  uint64_t dropped_loss = 0;      // random loss (global + path)
  uint64_t dropped_scripted = 0;  // ScriptedFault kDrop
  uint64_t dropped_blackhole = 0;
  uint64_t dropped_port_down = 0;  // source or destination port down
  uint64_t dropped_queue = 0;      // tail drop
  uint64_t dropped_no_route = 0;   // peer host or port does not exist
  uint64_t trimmed = 0;
  uint64_t trimmed_queue = 0;  // of which by the queue threshold
  uint64_t ecn_marked = 0;
  uint64_t ecn_marked_queue = 0;  // of which by the queue threshold
  uint64_t duplicated = 0;
  uint64_t corrupted = 0;
  uint64_t injected = 0;            // inject() datagrams
  uint64_t timers_fired = 0;        // on_timer calls
  uint64_t port_changes = 0;        // set_port_up calls made
  uint64_t encode_errors = 0;       // a TxPacket the codec refused (an engine bug)
  uint64_t tx_port_violations = 0;  // a TxPacket on a port outside port_mask (an engine bug)
  uint64_t max_queue_bytes = 0;     // highest egress backlog seen
  uint64_t events = 0;              // discrete events processed
};

// Per path (sender host, port, ev_index) packet counts.
struct PathCounters {
  uint64_t sent_data = 0;
  uint64_t sent_probes = 0;
  uint64_t sent_other = 0;
  uint64_t dropped = 0;
  uint64_t delivered = 0;
};
using PathKey = std::tuple<int, int, int>;  // (from_host, port, ev_index)

// One packet seen at a tap point.
enum class TapPoint : uint8_t { kSend, kDrop, kDeliver };
struct TapRecord {
  Time time = 0;
  TapPoint point = TapPoint::kSend;
  int from_host = 0;
  int to_host = 0;
  uint8_t port = 0;
  int ev_index = -1;  // -1 for injected datagrams
  PacketKind kind = PacketKind::kOther;
  const char* drop_reason = "";    // kDrop: "loss", "blackhole", ...
  std::span<const uint8_t> bytes;  // the IPv6 datagram as it is at that point
};

enum class RunStatus : uint8_t {
  kStopped,     // the stop predicate returned true
  kIdle,        // no events left (every endpoint idle, no timers)
  kTimeLimit,   // the next event is after the limit; now() == limit
  kEventLimit,  // NetConfig::max_events reached
  kLivelock,    // an endpoint's deadline did not advance (see livelock_timer_calls)
};
const char* run_status_name(RunStatus s);

class FaultNet {
 public:
  explicit FaultNet(const NetConfig& cfg = {});
  ~FaultNet();
  FaultNet(const FaultNet&) = delete;
  FaultNet& operator=(const FaultNet&) = delete;

  // Where enable_pcap() writes (pcap_tap.cc implements it with wire::PcapWriter).
  class Pcap {
   public:
    virtual ~Pcap() = default;
    virtual void write(Time t, std::span<const uint8_t> datagram) = 0;
    // Flushes and closes; the first failure of any write or of the close (kIoError).
    virtual Status close() = 0;
  };

  // ---- Topology --------------------------------------------------------------------------
  // Creates an Engine host (cfg.num_ports ports). Returns its host id (0, 1, ...).
  HostId add_engine(const EngineConfig& cfg);
  HostId add_endpoint(std::unique_ptr<Endpoint> ep, uint8_t num_ports);
  int num_hosts() const { return static_cast<int>(hosts_.size()); }
  Endpoint& endpoint(HostId h) { return *hosts_[idx(h)].ep; }
  // The engine of host h (the host must have been added with add_engine).
  Engine& engine(HostId h) { return *hosts_[idx(h)].engine; }
  uint8_t num_ports(HostId h) const { return hosts_[idx(h)].num_ports; }
  void set_port_rate(HostId h, uint8_t port, uint64_t bps);
  uint64_t port_rate(HostId h, uint8_t port) const;
  // The EV format the envelope builder uses for packets of (host, qpn); default STEV.
  void set_ev_format(HostId h, uint32_t qpn, ev::FormatMode mode);
  // IPv6 address of a host port: fd00:0:0:<port>::<host + 1>.
  static wire::Ipv6Addr address(HostId h, uint8_t port);
  // Time to serialize `bytes` (datagram bytes, framing added) at `bps`.
  Time serialization_time(uint64_t bytes, uint64_t bps) const;

  // ---- Faults ------------------------------------------------------------------------------
  void add_path_fault(const PathFault& f);
  // Shorthand: blackhole path (port, ev_index) in both directions during [from, until).
  void blackhole(int port, int ev_index, Time from = 0, Time until = kNever);
  void add_scripted(const ScriptedFault& f);
  void add_port_fault(const PortFault& f);
  void add_flap(const PortFlap& f);
  NetConfig& config() { return cfg_; }  // knobs may change between runs
  const NetConfig& config() const { return cfg_; }

  // ---- Driving -----------------------------------------------------------------------------
  Time now() const { return now_; }
  // Runs `fn(now)` at time `at` (>= now) in event order; fn may call engine APIs on any host
  // and must then call kick() on those hosts.
  void schedule(Time at, std::function<void(Time)> fn);
  // Delivers raw bytes to (host, port) at time `at`, as if from the wire (bypasses faults).
  void inject(Time at, HostId to, uint8_t port, std::vector<uint8_t> bytes);
  // Follows the calling sequence after an external input to host h (post_write, modify_qp,
  // post_recv, ...): drains transmit/completions/events and re-reads the deadline.
  void kick(HostId h);
  // Processes events in time order until `stop()` is true (checked after every event), no
  // events are left, or the next event is later than `limit`.
  RunStatus run_until(Time limit, const std::function<bool()>& stop = {});
  bool port_up(HostId h, uint8_t port) const;

  // ---- Observing ---------------------------------------------------------------------------
  // Called for every completion / event drained from an endpoint, in drain order. Handlers
  // may call engine APIs on host h (the drain loop continues until nothing is left).
  void on_completion(std::function<void(HostId, const Completion&)> fn) {
    completion_fn_ = std::move(fn);
  }
  void on_event(std::function<void(HostId, const Event&)> fn) { event_fn_ = std::move(fn); }
  // Sees every packet at send, drop and delivery (bytes valid during the call only).
  void set_tap(std::function<void(const TapRecord&)> fn) { tap_fn_ = std::move(fn); }
  // Writes every delivered datagram (and, if `include_drops`, dropped ones) to a pcap file
  // via wire/pcap.h. Errors: kIoError if the file cannot be opened.
  Status enable_pcap(const std::string& path, bool include_drops = false);
  // Closes the pcap file (later datagrams are not written). A failed write does not stop the
  // run, so a caller that keeps the capture asks here whether it is whole: kIoError if any
  // record or the final flush could not be written (a full disk, /dev/full). No pcap: ok.
  Status close_pcap();

  const NetCounters& counters() const { return counters_; }
  const std::map<PathKey, PathCounters>& path_counters() const { return path_counters_; }
  PathCounters path_counter(int from_host, int port, int ev_index) const;
  // Completions / events drained from host h so far, in order.
  const std::vector<Completion>& completions(HostId h) const { return hosts_[idx(h)].completions; }
  const std::vector<Event>& events(HostId h) const { return hosts_[idx(h)].events; }

 private:
  enum class EvType : uint8_t { kSwitch, kDeliver, kPortIdle, kTimer, kPortChange, kCallback };
  struct SimEvent {
    Time at;
    uint64_t seq;
    EvType type;
    int host;
    uint8_t port;
    uint64_t arg;
    bool operator>(const SimEvent& o) const { return at > o.at || (at == o.at && seq > o.seq); }
  };
  struct Port {
    uint64_t rate_bps = 0;
    bool up = true;
    bool busy = false;
    Time egress_free_at = 0;  // switch egress toward this port is busy until then
  };
  struct Host {
    std::unique_ptr<Endpoint> ep;
    Engine* engine = nullptr;
    uint8_t num_ports = 0;
    std::vector<Port> ports;
    Time timer_at = kNever;  // the deadline we have an event for
    uint64_t timer_gen = 0;  // invalidates superseded timer events
    uint32_t same_instant_timers = 0;
    Time last_timer_at = kNever;
    std::map<uint32_t, ev::FormatMode> formats;
    std::vector<Completion> completions;
    std::vector<Event> events;
  };
  // A packet in the network.
  struct Packet {
    std::vector<uint8_t> bytes;  // pooled; size() = datagram length
    int from = 0;
    int to = 0;
    uint8_t port = 0;
    int ev_index = -1;
    PacketKind kind = PacketKind::kOther;
    uint32_t psn = 0;
    size_t transport_offset = 0;  // start of the UDP header (corruption goes after it)
    bool trimmed = false;
  };

  size_t idx(HostId h) const { return static_cast<size_t>(h); }
  void push(Time at, EvType type, int host, uint8_t port, uint64_t arg);
  uint32_t alloc_packet();
  void free_packet(uint32_t slot);
  void service(HostId h);
  void send(HostId h, const TxPacket& tx);
  void at_switch(uint32_t slot);
  void deliver(uint32_t slot);
  void drop(uint32_t slot, const char* reason, uint64_t& counter);
  void set_port(HostId h, uint8_t port, bool up);
  void refresh_timer(HostId h);
  bool matches(const PacketMatch& m, const Packet& p) const;
  bool trim_packet(Packet& p);
  void mark_ce(Packet& p);
  void corrupt_packet(Packet& p);
  uint32_t duplicate_packet(uint32_t slot);
  void tap(TapPoint point, const Packet& p, const char* reason = "");

  NetConfig cfg_;
  Rng rng_;
  Time now_ = 0;
  uint64_t seq_ = 0;
  std::vector<SimEvent> heap_;  // binary min-heap on (at, seq)
  std::vector<Host> hosts_;
  std::deque<Packet> packets_;  // a deque: slots stay put while others are added
  std::vector<uint32_t> free_packets_;
  std::vector<std::function<void(Time)>> callbacks_;
  std::vector<uint32_t> free_callbacks_;
  std::vector<PathFault> path_faults_;
  struct Scripted {
    ScriptedFault fault;
    uint64_t seen = 0;
    std::map<uint32_t, uint32_t> psn_hits;
  };
  std::vector<Scripted> scripted_;
  std::function<void(HostId, const Completion&)> completion_fn_;
  std::function<void(HostId, const Event&)> event_fn_;
  std::function<void(const TapRecord&)> tap_fn_;
  std::unique_ptr<Pcap> pcap_;
  bool pcap_drops_ = false;
  NetCounters counters_;
  std::map<PathKey, PathCounters> path_counters_;
  bool livelock_ = false;
  std::vector<uint8_t> scratch_;  // decode/re-encode buffer for trimming
};

}  // namespace mrc::testnet
