// The simulator's insides, shared by its source files (private: not installed, included only
// by src/sim/simulation*.cc): the event types, the packet record, egress ports with their
// links, switches, hosts (NIC + engine), flow and fault state, and Simulation::Impl, which
// holds the whole fabric. Where each part of Impl is defined:
//   simulation_topology.cc    building the fabric, its names, QPs and their paths (EVs)
//   simulation_forwarding.cc  forwarding (SRv6 uSID routes, ECMP with routing convergence)
//                             and its self-checks against hop-by-hop uSID processing
//   simulation_datapath.cc    hosts' transmit and receive; switch queues (ECN, trimming,
//                             drops, PFC), scheduled departures, transmission
//   simulation_run.cc         the event loop, the blocks layout's windows over ranks
//   simulation.cc             the public API, flows, faults, sampling, statistics
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ring.h"
#include "sim/event_queue.h"
#include "sim/partition.h"
#include "sim/simulation.h"
#include "transport/ev_profile.h"
#include "transport/event_log.h"
#include "transport/rng.h"
#include "wire/address_plan.h"
#include "wire/codec.h"
#include "wire/pcap.h"

namespace mrc::sim {

// Bytes on the wire around the transport bytes: IPv6 (40) + UDP (8), and Ethernet framing
// (preamble 8 + header 14 + FCS 4 + inter-frame gap 12 = 38), so a link's capacity is the
// real one.
constexpr uint32_t kIpUdpBytes = wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes;
constexpr uint32_t kEthernetOverhead = 38;
// The uSID address plan (wire/address_plan.h): one block for every plane, disjoint uSID
// ranges per tier.
constexpr uint32_t kLocatorBlock = wire::kFabricLocatorBlock;
using wire::kAggUsidBase;
using wire::kCoreUsidBase;
using wire::kHostUsidBase;
using wire::kLeafUsidBase;
using wire::kSpineUsidBase;
constexpr uint16_t kNoSpine = 0xFFFF;
constexpr uint32_t kMaxFatTreeSwitchesPerTier = 0x3FFF;  // each tier's uSID range
// Four tiers: the aggs' range is split with the spines (tier 3).
constexpr uint16_t kFtSpineUsidBase = wire::kFatTreeSpineUsidBase;
constexpr uint32_t kMaxFourTierAggsOrSpines = 0x2000;

enum SimEventType : uint32_t {
  kFlowStart,      // a = flow
  kHostArrive,     // a = host, c = packet
  kHostPortFree,   // a = host, b = port
  kHostTimer,      // a = host
  kSwitchArrive,   // a = switch, b = ingress port, c = packet
  kPortFree,       // a = switch, b = port
  kPortDeliver,    // a = switch, b = port, c = packet: the head of the port's wire schedule
  kPause,          // a = node (switch, or host | kHostBit), b = port, c = 1 pause / 0 resume
  kFault,          // a = fault action
  kSample,         // a = plane
  kRouteUpdate,    // a = fault action whose routing view change is due
  kFlowAccept,     // blocks layout: c = index into accepts; the receiver's QP and receive buffer
  kThroughput,     // throughput sample (partition 0)
  kDenylistRound,  // a = partition: apply the denylist round due now to its hosts
};
constexpr uint32_t kHostBit = 1u << 31;

enum PacketFlags : uint8_t {
  kCe = 1 << 0,       // ECN congestion experienced
  kTrimmed = 1 << 1,  // payload cut by a switch
  kHigh = 1 << 2,     // control or trimmed: high-priority queue
  kEct = 1 << 3,      // ECN-capable (data)
};

// What a data packet carries above UDP (no payload bytes: memory is phantom). Control
// packets (ACKs with their SACK, NACKs, probes, CNPs) are rarer and bigger; they keep a whole
// TransportPacket in a side pool. At 131,072 GPUs with a message in flight each, packet size
// is what decides whether the run fits in memory.
struct DataBody {
  wire::Bth bth;
  wire::Reth reth;
  uint32_t imm = 0;
  uint32_t payload_len = 0;
  wire::DataExt data;
};

// The fields switches read come first: a switch touches only the first cache line (the run
// loop prefetches it one event ahead); the transport body is read at the destination host.
struct alignas(64) SimPacket {
  uint32_t wire_bytes = 0;
  uint32_t src = 0, dst = 0;
  uint32_t dst_leaf = 0;      // leaf_of(dst), computed once per packet (not per hop)
  uint32_t entropy = 0;       // ECMP hash input (the EV's bits)
  uint16_t spine = kNoSpine;  // SRv6: the spine the EV names (fat tree: the path, see ft_path)
  uint8_t plane = 0;
  uint8_t flags = 0;
  uint32_t control = 0;  // control packets: index into the control pool
  bool is_data = false;
  // Blocks layout: which of the pair's QPs sent it (transport.qps_per_flow index, pinned path
  // set), so that the receiver finds its own end of that QP (host_arrive).
  uint8_t qp_index = 0;
  uint16_t path_set = 0;
  DataBody body;  // data packets
};

// A queued packet: its handle plus what dequeueing needs, so that a port can start the next
// transmission without touching the (cold, by then) packet record: the packet pool is far
// larger than the caches, and that one load was three quarters of start_tx's time.
struct QueuedPacket {
  uint32_t idx = 0;
  uint16_t wire_bytes = 0;  // <= 9000 + headers (EngineConfig limits path_mtu to 9000)
  uint16_t ingress = 0;     // ingress port (PFC accounting); radix <= 65535
};

// A packet with a scheduled departure (see Port::wire).
struct ScheduledPacket {
  uint32_t idx = 0;
  uint16_t wire_bytes = 0;
  bool high = false;  // priority class: high entries that have not started precede low ones
  Time start = 0;     // transmission starts
  Time arrive = 0;    // arrival at the peer (switch latency included)
};

// A port's queue of packets (common/ring.h: keeps its memory, no allocation in steady state).
using PacketFifo = Ring<QueuedPacket>;

// Serialization time of `bytes` at `bps`, in ps.
inline Time serialization(uint64_t bytes, uint64_t bps) {
  // Common rates (100G: 80 ps/B, 400G: 20 ps/B, ...) divide exactly: skip the 128-bit divide.
  const uint64_t ps_per_byte = 8 * kPicosPerSecond / bps;
  if (ps_per_byte * bps == 8 * kPicosPerSecond) return bytes * ps_per_byte;
  return static_cast<Time>((static_cast<__uint128_t>(bytes) * 8 * kPicosPerSecond) / bps);
}

// A link's rate with its per-byte time precomputed: serialization runs once per packet per
// hop, and a division there is a measurable share of the simulator's time.
class LinkRate {
 public:
  void set(uint64_t bps) {
    bps_ = bps;
    const uint64_t per_byte = 8 * kPicosPerSecond / bps;
    exact_ps_per_byte_ = per_byte * bps == 8 * kPicosPerSecond ? per_byte : 0;
  }
  uint64_t bps() const { return bps_; }
  Time serialize(uint64_t bytes) const {
    return exact_ps_per_byte_ ? bytes * exact_ps_per_byte_ : serialization(bytes, bps_);
  }

 private:
  uint64_t bps_ = 0;
  Time exact_ps_per_byte_ = 0;  // 0: the rate does not divide 8e12 exactly
};

inline uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// An egress port and the directed link behind it.
struct Port {
  uint32_t peer = 0;       // switch index, or host id when peer_is_host
  uint32_t peer_port = 0;  // ingress port number at the peer
  bool peer_is_host = false;
  LinkRate rate;
  Time delay = 0;
  Time busy_until = 0;
  bool free_pending = false;  // a kPortFree event is scheduled
  // Scheduled departures. Without PFC, and while the link has no fault, an output-queued port
  // knows when a packet it enqueues will start: when the frames ahead of it (after the one on
  // the wire, for a high-priority packet) end. Such a port keeps its packets in `wire`, in
  // transmission order with their start and arrival times, from enqueue until they reach
  // the peer, and one kPortDeliver event walks them to the peer: one event per packet and
  // hop instead of a port-free event plus an arrival event (benchmark A: 14 M of 39 M events
  // were port-free events). The entries that have not started are the queue (`waiting`,
  // settled lazily); a high-priority packet is inserted before the waiting low ones, which
  // move back by its serialization time. The wire schedule reads only the port's own state,
  // so it is used only when the peer is in the same partition (the handoff to another
  // partition must keep a lookahead's notice, which the event-by-event path gives). A fault
  // or rate change on the link recalls the waiting entries to the queues below first
  // (recall()); the port then goes event by event, and back to the schedule at the first
  // frame boundary where the link is healthy (start_tx()).
  Ring<ScheduledPacket> wire;
  uint32_t waiting = 0;   // the last `waiting` entries of `wire` had not started at the last settle
  bool chained = false;   // new packets join `wire`
  bool chain_ok = false;  // the peer is in this switch's partition, and no PFC
  bool up = true;
  bool blackhole = false;
  bool paused = false;  // PFC: the peer paused our low-priority queue
  double loss = 0;
  uint32_t link_id = UINT32_MAX;  // sampled links only
  PacketFifo low, high;
  uint64_t queue_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t sampled_tx_bytes = 0;
};

struct Switch {
  enum Kind : uint8_t { kLeaf, kSpine, kAgg, kCore } kind = kLeaf;  // kAgg, kCore: fat tree
  uint32_t plane = 0, index = 0;
  uint32_t partition = 0;
  std::vector<Port> ports;
  std::vector<uint64_t> ingress_bytes;  // PFC: bytes queued here that came in on port i
  std::vector<uint8_t> pause_sent;
};

struct HostPort {
  uint32_t leaf = 0;  // switch index
  uint32_t leaf_port = 0;
  LinkRate rate;
  Time delay = 0;
  Time busy_until = 0;
  bool up = true;
  bool blackhole = false;
  bool paused = false;
  double loss = 0;
};

struct QpPair {
  uint32_t local_qpn = 0;
  uint32_t remote_qpn = 0;
};

struct Host {
  std::unique_ptr<Engine> engine;
  std::vector<HostPort> ports;
  Time timer_at = kNever;
  MemoryKeys keys;
  std::unordered_map<uint64_t, QpPair> qps;                   // (peer << 8 | plane) -> QP pair
  std::unordered_map<uint32_t, std::deque<WriteWr>> backlog;  // qpn -> WRs waiting for room
  // Blocks layout: QP number -> qp_index << 16 | path_set, for QPs other than a pair's first
  // with the transport's own EVs (none in most runs).
  std::unordered_map<uint32_t, uint32_t> qp_sub;
  // Data packets sent per path of each QP that carries running flows (flows.csv's
  // paths_used; the engine keeps no per-path counts): from its first running flow's start
  // until its last one ends.
  struct PathCounts {
    uint32_t flows = 0;          // running flows (flow parts) on the QP
    std::vector<uint32_t> sent;  // per path, modulo 2^32
  };
  std::unordered_map<uint32_t, PathCounts> path_counts;  // qpn -> counts
};

struct FlowState {
  uint32_t parts_left = 0;
  bool failed = false;
  // For flows.csv: the flow's QPs and their counters when it started (per-path packets
  // sent, Host::path_counts, and retransmits). Freed when the flow completes.
  std::vector<uint32_t> qpns;
  std::vector<uint32_t> path_sent_at_start;
  uint64_t retransmits_at_start = 0;
};

struct FaultAction {
  // kPathLoss: path_losses[bps] gets loss probability `value`.
  // kNicSees: the NIC learns a host link's state (`flag`), nic_detect after the change.
  enum Kind : uint8_t {
    kLinkState,
    kBlackhole,
    kLoss,
    kRate,
    kPathLoss,
    kNicSees
  } kind = kLinkState;
  LinkRef link;
  bool host_side = false;  // acts on the host end of a host link (partition 0)
  uint8_t end = 0;         // switch-switch link: 0 both ends, 1 only a, 2 only b (blocks)
  bool flag = false;       // up / blackhole on
  double value = 0;        // loss probability
  uint64_t bps = 0;
  Time nic_detect = 0;  // kLinkState on a host link: the NIC sees it this much later
};

// What this rank sends a rank at the end of a window. The bytes only grow and `used` marks
// the window's part: appending never zero-fills or reallocates once a run's largest window
// has been seen.
struct OutBuffer {
  std::vector<uint8_t> bytes;
  size_t used = 0;
  uint8_t* grow(size_t n) {
    if (used + n > bytes.size()) bytes.resize(std::max(2 * bytes.size(), used + n));
    uint8_t* p = bytes.data() + used;
    used += n;
    return p;
  }
};

// Simulation::enable_event_log's file: one writer, one EventLog per logging host.
struct EventLogFile {
  // The EventLog of one host: its records, with "node" = the host, into the shared buffer.
  struct Host final : EventLog {
    EventLogFile* file = nullptr;
    int64_t node = 0;
    void record(const LogRecord& r) override {
      append_log_json(file->buf, r, node);
      if (file->buf.size() >= (64u << 10)) file->flush();
    }
  };
  std::FILE* f = nullptr;
  std::string buf;
  std::vector<std::unique_ptr<Host>> hosts;
  void flush() {
    if (!buf.empty()) std::fwrite(buf.data(), 1, buf.size(), f);
    buf.clear();
  }
  ~EventLogFile() {
    flush();
    std::fclose(f);
  }
};

struct Simulation::Impl {
  SimConfig cfg;
  // Two-tier: H hosts and U uplinks per leaf, S spines and L leaves per plane. A fat tree is
  // one plane of L leaves (switches 0..L-1), then `aggs` aggregation switches, then `cores`
  // cores (S = aggs + cores, so a plane still spans L + S switches); H = U = half = k/2.
  uint32_t H = 0, U = 0, S = 0, L = 0, P = 0, k_parallel = 1;
  bool fat_tree = false;
  uint32_t half = 0, pods = 0, aggs = 0, cores = 0;
  // Four-tier fat trees (ft_tiers = 4): superpods of `half` pods and half^2 spines each; the
  // spines sit between the aggs and the cores (switches L + aggs ..), S = aggs + ft_spines +
  // cores. Three tiers: ft_tiers = 3, no superpods or spines.
  uint32_t ft_tiers = 0, superpods = 0, ft_spines = 0;
  Time base_rtt = 0;  // longest path (leaf-spine-leaf; fat tree: via a core), both ways
  uint64_t queue_bytes = 0, ecn_kmin = 0, ecn_kmax = 0, trim_threshold = 0;
  uint64_t pfc_xoff = 0, pfc_xon = 0;
  bool ecn_last_hop = true;  // cfg.sw.ecn_last_hop, resolved
  Time lookahead = 0;
  uint32_t num_partitions = 1;
  // The blocks layout (cfg.block_partitions; partition.h) and, in a run over several ranks,
  // this rank's share: owned[p] for the partitions this process runs. Events for the others
  // are serialized into outbound[rank] and exchanged at the end of each window. Events that
  // every rank schedules alike (setup, workload callbacks) take the key of a partition of
  // their own (global_origin = num_partitions), so their order never depends on the ranks.
  bool blocks = false;
  BlockLayout layout;
  RankExchange* ex = nullptr;
  uint32_t rank = 0;
  std::vector<uint8_t> owned;
  std::vector<OutBuffer> outbound;
  std::vector<uint8_t> inbound;  // what the ranks sent this one (RankExchange::exchange)
  uint32_t global_origin = 0;
  std::vector<FlowResult> completed;  // blocks: this window's completions, published at its end
  // Blocks: routing view changes (ECMP convergence) read by every switch, applied between
  // windows at their time (windows end there), in (time, fault) order.
  std::vector<std::pair<Time, uint32_t>> route_actions;
  size_t next_route_action = 0;
  std::vector<std::vector<uint32_t>> partition_switches;  // blocks: sampled per partition
  // Clustermapper's denylist (cfg.denylist, sim/denylist.h). Its probe rounds read the host
  // links' fault schedule, not live port state, so every partition (and every rank) computes
  // the same rounds, in order, whichever asks first: the decisions never depend on the layout.
  struct HostLinkChange {
    Time at = 0;
    FaultAction::Kind kind = FaultAction::kLinkState;
    bool flag = false;
    double value = 0;
  };
  struct WatchedLink {
    uint32_t link = 0;                    // host * P + plane
    std::vector<HostLinkChange> changes;  // by time (stable: same-time order kept)
    size_t applied = 0;                   // changes folded into the state below
    bool up = true, blackhole = false;
    double loss = 0;
    std::vector<std::pair<Time, bool>> verdicts;  // (round time, denied) at each change
  };
  struct DenylistChange {
    uint32_t link = 0;
    bool denied = false;
  };
  std::unique_ptr<LinkDenylist> denylist;
  std::vector<std::pair<uint32_t, HostLinkChange>> host_link_changes;  // (link, change)
  std::vector<WatchedLink> watched;
  std::vector<std::vector<DenylistChange>> denylist_rounds;  // round k (at k * interval) - 1
  Rng denylist_rng{0};
  std::vector<DenylistRecord> denylist_log;
  Time last_event = 0;                // latest event run here
  std::vector<uint64_t> qps_created;  // blocks: per host, for stats
  // After a run over several ranks: the whole fabric's results.
  bool merged = false;
  SimStats merged_stats;
  std::vector<LinkSample> merged_samples;
  std::vector<EvEvent> merged_ev_events;

  std::vector<Switch> switches;  // plane-major: leaves then spines
  std::vector<Host> hosts;
  // engines[h] == hosts[h].engine.get(): the run loop's prefetch finds an engine in this
  // dense array (1 MB at 131,072 hosts, cache-resident) instead of the host's cold record.
  std::vector<const Engine*> engines;
  std::vector<SimPacket> packets;
  std::vector<uint32_t> free_packets;

  std::vector<EventQueue> queues;  // one per partition
  std::vector<uint64_t> seq;       // per partition
  std::vector<Rng> rngs;           // per partition
  uint32_t cur_partition = 0;
  Time now = 0;
  uint64_t events = 0;

  // Flow records. A run over several ranks keeps only the flows its hosts send (flow_slot:
  // flow id -> index here, kNoSlot for another rank's) and gathers them on rank 0 at the end;
  // otherwise flows[f] is flow f.
  std::vector<FlowResult> flows;
  std::vector<FlowState> flow_state;
  std::vector<uint32_t> flow_slot;
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  size_t num_flows = 0;  // added, on every rank
  size_t flows_done = 0;
  bool sparse_flows() const { return ex != nullptr; }
  FlowResult* flow_record(FlowId f) {
    if (!sparse_flows()) return f < flows.size() ? &flows[f] : nullptr;
    return f < flow_slot.size() && flow_slot[f] != kNoSlot ? &flows[flow_slot[f]] : nullptr;
  }
  FlowState& flow_state_of(FlowId f) { return flow_state[sparse_flows() ? flow_slot[f] : f]; }
  // Receive completions so far of flows not yet whole at their receiver (with_imm parts).
  std::unordered_map<FlowId, uint32_t> parts_received;
  // Blocks: reception times published, of flows not yet complete (every rank alike).
  std::unordered_map<FlowId, Time> received_at;
  std::vector<std::function<void(const FlowResult&)>> flow_cbs;
  std::vector<std::function<void(const FlowResult&)>> received_cbs;
  std::function<void(Time, uint64_t)> progress_cb;

  std::vector<FaultAction> faults;
  // ECMP routing view: links (plane, leaf, uplink) that routing has withdrawn.
  std::vector<uint8_t> route_down;         // index (plane * L + leaf) * U + uplink
  std::vector<uint32_t> route_down_count;  // per plane

  std::vector<LinkSample> samples;
  std::vector<EvEvent> ev_events;

  // Simulation::path_loss rules; checked at leaves only while one is active.
  struct PathLoss {
    HostId src = 0, dst = 0;
    PathRef path;
    double probability = 0;
  };
  std::vector<PathLoss> path_losses;
  uint32_t path_losses_active = 0;
  bool path_lost(const Switch& sw, uint32_t egress, const SimPacket& p);

  // Throughput series (cfg.throughput_interval): bytes placed since the last sample.
  std::vector<uint64_t> rx_placed, tx_placed;          // per host
  std::unordered_map<uint64_t, uint64_t> pair_placed;  // src << 32 | dst
  std::vector<ThroughputSample> throughput;
  // Blocks layout: a block counts the bytes its hosts receive (rx_placed) and, per sender and
  // pair, in maps of its own; it writes their rows at its kThroughput events (a = block).
  // merge_results adds up the senders' rows of all blocks.
  struct BlockThroughput {
    std::unordered_map<HostId, uint64_t> tx;
    std::unordered_map<uint64_t, uint64_t> pair;
  };
  std::vector<BlockThroughput> block_tp;
  std::vector<ThroughputSample> throughput_local;  // blocks: this rank's rows
  std::vector<HostId> block_first_host;            // blocks: hosts of block b are [b], [b + 1])
  void sample_throughput(uint32_t block);
  void emit_block_throughput(uint32_t block);
  // After a run: the bytes placed since the last sample go to the interval they fall in.
  void flush_throughput();
  void emit_throughput();       // a row per busy series at `now`, counters reset
  Time throughput_flushed = 0;  // the interval end flush_throughput() last wrote
  SimStats counters;

  std::unique_ptr<wire::PcapWriter> pcap;
  std::unique_ptr<EventLogFile> event_log;  // enable_event_log
  std::vector<uint8_t> pcap_hosts;

  // ---- small queries and conversions ----
  uint32_t leaf_index(uint32_t plane, uint32_t leaf) const { return plane * (L + S) + leaf; }
  uint32_t spine_index(uint32_t plane, uint32_t spine) const { return plane * (L + S) + L + spine; }
  uint32_t leaf_of(HostId h) const { return h / H; }
  uint32_t agg_switch(uint32_t pod, uint32_t a) const { return L + pod * half + a; }
  uint32_t ft_spine_switch(uint32_t s) const { return L + aggs + s; }
  uint32_t core_switch(uint32_t c) const { return L + aggs + ft_spines + c; }
  // Links on the shortest path between two hosts: 2 within a leaf, 4 through a spine (fat
  // tree: through an agg within a pod), 6 through a core (four tiers: through a spine within a
  // superpod), 8 through a four-tier core. The path has one switch fewer than links.
  uint32_t pair_links(HostId a, HostId b) const {
    const uint32_t la = leaf_of(a), lb = leaf_of(b);
    if (la == lb) return 2;
    if (!fat_tree) return 4;
    if (la / half == lb / half) return 4;
    if (ft_tiers == 4 && la / (half * half) == lb / (half * half)) return 6;
    return 2 * ft_tiers;
  }
  Time ideal_fct(const FlowSpec& spec) const;
  // What a packet carries on the wire around its transport bytes: IPv6, UDP, Ethernet (with
  // preamble and gap) and, with transport.packet_auth, the authentication trailer.
  uint32_t packet_overhead() const {
    return kIpUdpBytes + kEthernetOverhead +
           (cfg.transport.packet_auth ? wire::kAuthTrailerBytes : 0);
  }
  // Fat tree SRv6 paths. A path is a number in [0, half^2): core `path` for pods apart (agg
  // path / half on both sides: core c is wired to agg c / half of every pod), agg path / half
  // within a pod; kNoSpine within a leaf. The carrier is agg, core, agg, leaf, host (5 uSIDs;
  // fewer for nearer pairs): the source leaf routes on the agg uSID.
  // Four tiers: a path is in [0, half^3): core `path` between superpods (local spine
  // path / half and agg path / half^2 on both sides), spine path / half within a superpod,
  // agg path / half^2 within a pod. Between superpods the route is agg, spine, core, spine,
  // agg, leaf, host: 7 uSIDs, the last in the SRH segment.
  std::vector<uint16_t> ft_usids(HostId src, HostId dst, uint32_t path) const;
  uint32_t ft_num_paths() const { return ft_tiers == 4 ? half * half * half : half * half; }
  uint16_t ft_path(const ev::ExpandedEv& carrier) const;  // what the switches act on
  // Out of line: forward(), which the data path calls for every packet (from
  // simulation_datapath.cc, another translation unit, so a call, not inlined), stays small for
  // the two-tier fabrics.
  [[gnu::noinline]] uint32_t forward_fat_tree(const Switch& sw, const SimPacket& p);
  uint32_t forward_four_tier(const Switch& sw, const SimPacket& p);
  // A fat tree switch's ECMP up port: the packet's hash over the up ports u in [0, half) for
  // which `usable(u)` holds as routing sees it (every up port while no link is down).
  template <typename Usable>
  uint32_t ft_ecmp_up_port(const Switch& sw, const SimPacket& p, Usable usable) const;
  SimResult<uint64_t> check_fat_tree_usid() const;
  // Fat tree ECMP routing view: index of a leaf-agg or agg-core link in route_down.
  size_t ft_route_leaf_agg(uint32_t leaf, uint32_t a) const {
    return static_cast<size_t>(leaf) * half + a;
  }
  size_t ft_route_agg_core(uint32_t pod, uint32_t a, uint32_t j) const {
    return static_cast<size_t>(L) * half + (static_cast<size_t>(pod) * half + a) * half + j;
  }
  bool ft_agg_reaches(uint32_t pod, uint32_t a, uint32_t dst_leaf) const;
  // Four tiers: spine-core links follow the agg-spine links in route_down.
  size_t ft_route_spine_core(uint32_t spine, uint32_t j) const {
    return (static_cast<size_t>(L) + aggs) * half + static_cast<size_t>(spine) * half + j;
  }
  bool ft4_spine_reaches(uint32_t spine, uint32_t dst_leaf) const;
  bool ft4_agg_reaches(uint32_t pod, uint32_t a, uint32_t dst_leaf) const;
  // The two directed ports of a switch-switch link: (switch, port) of each end.
  struct LinkEnds {
    uint32_t sw_a, port_a, sw_b, port_b;
  };
  LinkEnds link_ends(const LinkRef& l) const;
  size_t route_index(const LinkRef& l) const;
  uint32_t plane_partition(uint32_t plane) const { return num_partitions == 1 ? 0 : 1 + plane; }
  uint32_t host_partition(HostId h) const { return blocks ? layout.host_block(h) : 0; }
  uint32_t switch_partition(const Switch& s) const;

  // Inlined into every caller on the data path: GCC's unit-growth limit otherwise decides,
  // and an out-of-line call here cost ~3% of all instructions in benchmark A.
  [[gnu::always_inline]] void schedule(uint32_t partition, Time t, uint32_t type, uint32_t a = 0,
                                       uint32_t b = 0, uint32_t c = 0) {
    SimEvent e;
    e.time = t;
    e.key = (static_cast<uint64_t>(cur_partition) << 48) | seq[cur_partition]++;
    e.type = type;
    e.a = a;
    e.b = b;
    e.c = c;
    if (ex != nullptr && !owned[partition]) [[unlikely]] {
      send_remote(partition, e);
      return;
    }
    queues[partition].push(e);
  }
  // Blocks layout: an event every rank schedules alike (setup, workload callbacks); only the
  // rank holding `partition` keeps it.
  void schedule_global(uint32_t partition, Time t, uint32_t type, uint32_t a = 0, uint32_t b = 0) {
    const uint32_t saved = cur_partition;
    cur_partition = global_origin;
    global_scheduled = std::min(global_scheduled, t);
    if (ex == nullptr || owned[partition]) {
      schedule(partition, t, type, a, b);
    } else {
      ++seq[global_origin];
    }
    cur_partition = saved;
  }
  // An event for a partition another rank holds is queued in remote_pending and serialized
  // by encode_remote, in the order sent, a chunk at a time (send_remote) and at the window's
  // end (communicate). Deferred, the packet records it reads can be prefetched a few events
  // ahead: read when it is sent, each was a cache miss of its own (the record of a packet
  // that waited in a switch queue), a third of the exchange's cost.
  void send_remote(uint32_t partition, const SimEvent& e) {
    outbound_min = std::min(outbound_min, e.time);
    remote_pending.push_back({partition, e});
    if (remote_pending.size() >= kRemoteChunk) encode_remote();
  }
  void encode_remote();
  Time communicate(uint64_t& total_events);
  struct RemoteEvent {
    uint32_t partition = 0;
    SimEvent event;
  };
  // A chunk's packets stay allocated until it is encoded: 4096 packet records hold 512 KB (a
  // control packet's transport header 256 bytes more).
  static constexpr size_t kRemoteChunk = 4096;
  std::vector<RemoteEvent> remote_pending;
  Time global_scheduled = kNever;     // earliest event scheduled by schedule_global lately
  Time outbound_min = kNever;         // earliest event sent to another rank (encoded or pending)
  Simulation::WindowBalance balance;  // communicate(): every rank's events, window by window

  std::vector<wire::TransportPacket> controls;
  std::vector<uint32_t> free_controls;
  // Pools: a freed slot is reused before the vector grows (no per-packet allocation).
  template <typename T>
  static uint32_t pool_take(std::vector<T>& items, std::vector<uint32_t>& free) {
    if (!free.empty()) {
      const uint32_t i = free.back();
      free.pop_back();
      return i;
    }
    items.emplace_back();
    return static_cast<uint32_t>(items.size() - 1);
  }
  uint32_t alloc_control() { return pool_take(controls, free_controls); }
  void to_transport(const SimPacket& p, wire::TransportPacket& t) const {
    if (!p.is_data) {
      t = controls[p.control];
      return;
    }
    t.bth = p.body.bth;
    t.reth = p.body.reth;
    t.imm = p.body.imm;
    t.data = p.body.data;
    t.payload = nullptr;
    t.payload_len = p.body.payload_len;
  }

  uint32_t alloc_packet() { return pool_take(packets, free_packets); }
  void free_packet(uint32_t i) {
    if (!packets[i].is_data) free_controls.push_back(packets[i].control);
    free_packets.push_back(i);
  }

  // Building the fabric (simulation_topology.cc): build() runs the steps below in order.
  SimStatus build();
  SimStatus shape_fat_tree(Time hop);
  SimStatus shape_two_tier(Time hop);
  void set_queue_thresholds(uint32_t mtu_wire);
  SimStatus set_up_partitions();
  void build_fat_tree_switches(bool sample_links);
  void build_two_tier_switches(bool sample_links);
  // Switch `id`'s identity and `ports` unwired ports (the two builders above wire them).
  Switch& place_switch(uint32_t id, Switch::Kind kind, uint32_t plane, uint32_t index,
                       size_t ports);
  void set_up_ports_and_routing_view();
  void build_hosts();
  void number_host_links(uint32_t first_id);
  void assign_block_partitions();
  void share_memory_keys();
  void schedule_link_samples();
  void set_up_throughput();
  void set_departure_chains();
  void release_remote_switch_ports();
  // qp_index: which of a flow's QPs (transport.qps_per_flow); path_set: pinned EVs (0: none).
  void build_paths(HostId src, HostId dst, uint32_t plane, uint32_t qp_index, uint16_t path_set,
                   QpAttr& a);
  SimResult<QpPair> qp_for(HostId src, HostId dst, uint32_t plane, uint32_t qp_index = 0,
                           uint16_t path_set = 0);
  // QP table key: peer, pinned path set, QP index, plane (0xFF: every plane).
  static uint64_t qp_key(HostId peer, uint32_t plane, uint32_t qp_index, uint16_t path_set) {
    return (static_cast<uint64_t>(peer) << 32) | (static_cast<uint64_t>(path_set) << 16) |
           ((qp_index & 0xFF) << 8) | (plane & 0xFF);
  }
  // A pinned EV set (Simulation::add_path_set): the active paths, then the backups; with
  // backups, active_per_plane is each plane's number of active paths (0: no backups).
  struct PinnedPaths {
    std::vector<PathRef> active;
    std::vector<PathRef> backup;
    uint32_t active_per_plane = 0;
  };
  std::vector<PinnedPaths> path_sets;  // Simulation::add_path_set, id = index + 1
  SimStatus configure_qp(Engine& e, uint32_t qpn, HostId me, HostId peer, uint32_t plane,
                         uint32_t dest_qpn, uint32_t qp_index = 0, uint16_t path_set = 0);
  SimResult<uint32_t> blocks_qp(HostId me, HostId peer, uint32_t plane, uint32_t qp_index,
                                uint16_t path_set);
  // EVs per plane of an MRC QP on a two-tier Clos (TransportConfig::evs_per_plane and
  // backup_evs_per_plane resolved against the fabric).
  uint32_t active_evs_per_plane() const;
  uint32_t backup_evs_per_plane() const;
  // An MRC QP's EVs are ECMP hash inputs on a two-tier Clos (path_mode ecmp), not spines.
  bool ecmp_evs() const {
    return cfg.transport.path_mode == PathMode::kEcmp &&
           cfg.transport.kind != TransportKind::kRoce && !fat_tree;
  }
  // Simulation::stats parts: engine counters and QP memory of this rank's hosts; EV counts.
  void add_engine_stats(SimStats& s) const;
  void add_ev_counts(SimStats& s) const;

  // data path
  void service_host(HostId h);
  void send_from_host(HostId h, const TxPacket& tx);
  void snapshot_qp(FlowState& st, Host& host, uint32_t qpn);
  void count_flow_paths(FlowState& st, Host& host, FlowResult& r);
  void host_arrive(HostId h, uint32_t pkt);
  uint32_t forward(const Switch& sw, const SimPacket& p);
  void switch_arrive(uint32_t sw, uint32_t ingress, uint32_t pkt);
  void start_tx(uint32_t sw, uint32_t port);
  void schedule_departure(uint32_t sw, uint32_t port, uint32_t idx, uint32_t wire_bytes, bool high);
  void settle(Port& out);  // waiting entries of the wire schedule that have started leave the queue
  void deliver(uint32_t sw, uint32_t port);
  void recall(uint32_t sw, uint32_t port);
  void send_pause(uint32_t sw, uint32_t ingress, bool pause);
  void handle_pause(uint32_t node, uint32_t port, bool pause);

  // flows, faults, sampling
  void flow_start(FlowId f);
  void flow_accept(uint32_t accept_index);
  void schedule_accept(FlowId f, const FlowSpec& s, uint32_t part, Time at);
  // Blocks: what a flow's receiving end needs (kFlowAccept), in a pool like packets.
  struct FlowAccept {
    FlowId flow = 0;
    HostId src = 0, dst = 0;
    uint32_t part = 0;
    uint16_t path_set = 0;
    bool with_imm = false;
  };
  std::vector<FlowAccept> accepts;
  std::vector<uint32_t> free_accepts;
  void finish_flow(const FlowResult& r);
  void flow_received(FlowId f);
  uint32_t flow_parts() const {
    return (cfg.transport.kind == TransportKind::kRoce ? P : 1) * cfg.transport.qps_per_flow;
  }
  void publish_completions(std::vector<FlowResult> done);
  Time run_blocks(Time until);
  void merge_results();
  void on_completion(HostId h, const Completion& c);
  void apply_fault(uint32_t idx);
  void route_update(uint32_t idx);
  void sample(uint32_t plane);
  void set_up_denylist();
  void compute_denylist_rounds(uint64_t through);
  bool denylisted(uint32_t link, Time at);
  void denylist_round(uint32_t partition);
  void apply_denylist_change(HostId g, const DenylistChange& c);
  void add_fault(FaultAction a, Time at);
  void dispatch(const SimEvent& e);
  void prefetch_ahead(const EventQueue& q);
  Time run(Time until);
  void tap(HostId h, const SimPacket& p);
};

}  // namespace mrc::sim
