// The fabric simulator. Layout of this file:
//   1. elements: packets, egress ports with their links, switches, hosts (NIC + engine)
//   2. topology construction and naming
//   3. forwarding: SRv6 uSID shift-and-forward (precomputed) and ECMP with convergence
//   4. the data path: host transmit, switch enqueue (ECN, trim, drop, PFC), transmit
//   5. flows, faults, sampling, the partitioned event loop
#include "sim/simulation.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <type_traits>
#include <unordered_map>

#include "sim/event_queue.h"
#include "sim/partition.h"
#include "transport/ev_profile.h"
#include "transport/rng.h"
#include "wire/address_plan.h"
#include "wire/codec.h"
#include "wire/pcap.h"

namespace mrc::sim {

namespace {

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
  kFlowStart,     // a = flow
  kHostArrive,    // a = host, c = packet
  kHostPortFree,  // a = host, b = port
  kHostTimer,     // a = host
  kSwitchArrive,  // a = switch, b = ingress port, c = packet
  kPortFree,      // a = switch, b = port
  kPortDeliver,   // a = switch, b = port, c = packet: the head of the port's wire schedule
  kPause,         // a = node (switch, or host | kHostBit), b = port, c = 1 pause / 0 resume
  kFault,         // a = fault action
  kSample,        // a = plane
  kRouteUpdate,   // a = fault action whose routing view change is due
  kFlowAccept,    // blocks layout: c = index into accepts; the receiver's QP and receive buffer
  kThroughput,    // throughput sample (partition 0)
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

// Ring of queued packets that keeps its memory (no allocation in steady state).
template <typename T>
class Ring {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  void push(const T& p) {
    if (size_ == buf_.size()) grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = p;
    ++size_;
  }
  T pop() {
    const T p = buf_[head_];
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
    return p;
  }
  T pop_back() {
    --size_;
    return buf_[(head_ + size_) & (buf_.size() - 1)];
  }
  const T& front() const { return buf_[head_]; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  // Inserts before position `i` (0 = front).
  void insert(size_t i, const T& p) {
    push(p);
    for (size_t j = size_ - 1; j > i; --j)
      (*this)[j] = (*this)[j - 1];
    (*this)[i] = p;
  }

 private:
  void grow() {
    std::vector<T> n(std::max<size_t>(4, buf_.size() * 2));  // millions of ports: start small
    for (size_t i = 0; i < size_; ++i)
      n[i] = buf_[(head_ + i) & (buf_.size() - 1)];
    buf_ = std::move(n);
    head_ = 0;
  }
  std::vector<T> buf_;
  size_t head_ = 0, size_ = 0;
};
using PacketFifo = Ring<QueuedPacket>;

// Serialization time of `bytes` at `bps`, in ps.
Time serialization(uint64_t bytes, uint64_t bps) {
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

uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

}  // namespace

const char* transport_name(TransportKind k) {
  switch (k) {
    case TransportKind::kMrc:
      return "mrc";
    case TransportKind::kMrcOblivious:
      return "mrc_oblivious";
    case TransportKind::kRoce:
      return "roce";
  }
  return "?";
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
};

struct FlowState {
  uint32_t parts_left = 0;
  bool failed = false;
  // For flows.csv: the flow's QPs and their counters when it started (per-path packets
  // sent, truncated to 32 bits, and retransmits). Freed when the flow completes.
  std::vector<uint32_t> qpns;
  std::vector<uint32_t> path_sent_at_start;
  uint64_t retransmits_at_start = 0;
};

struct FaultAction {
  // kPathLoss: path_losses[bps] gets loss probability `value`.
  enum Kind : uint8_t { kLinkState, kBlackhole, kLoss, kRate, kPathLoss } kind = kLinkState;
  LinkRef link;
  bool host_side = false;  // acts on the host end of a host link (partition 0)
  uint8_t end = 0;         // switch-switch link: 0 both ends, 1 only a, 2 only b (blocks)
  bool flag = false;       // up / blackhole on
  double value = 0;        // loss probability
  uint64_t bps = 0;
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
  std::vector<std::vector<uint8_t>> outbound;
  uint32_t global_origin = 0;
  std::vector<FlowResult> completed;  // blocks: this window's completions, published at its end
  // Blocks: routing view changes (ECMP convergence) read by every switch, applied between
  // windows at their time (windows end there), in (time, fault) order.
  std::vector<std::pair<Time, uint32_t>> route_actions;
  size_t next_route_action = 0;
  std::vector<std::vector<uint32_t>> partition_switches;  // blocks: sampled per partition
  Time last_event = 0;                                    // latest event run here
  std::vector<uint64_t> qps_created;                      // blocks: per host, for stats
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
  std::vector<uint8_t> pcap_hosts;

  // ---- helpers ----
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
  // Out of line: the two-tier data path keeps its inlined forward() small.
  [[gnu::noinline]] uint32_t forward_fat_tree(const Switch& sw, const SimPacket& p);
  uint32_t forward_four_tier(const Switch& sw, const SimPacket& p);
  Result<uint64_t> check_fat_tree_usid() const;
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
  void send_remote(uint32_t partition, const SimEvent& e);
  Time communicate(uint64_t& total_events);
  Time global_scheduled = kNever;  // earliest event scheduled by schedule_global lately
  Time outbound_min = kNever;      // earliest event in outbound

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

  Status build();
  void build_fat_tree_switches(bool sample_links);
  // qp_index: which of a flow's QPs (transport.qps_per_flow); path_set: pinned EVs (0: none).
  void build_paths(HostId src, HostId dst, uint32_t plane, uint32_t qp_index, uint16_t path_set,
                   QpAttr& a);
  Result<QpPair> qp_for(HostId src, HostId dst, uint32_t plane, uint32_t qp_index = 0,
                        uint16_t path_set = 0);
  // QP table key: peer, pinned path set, QP index, plane (0xFF: every plane).
  static uint64_t qp_key(HostId peer, uint32_t plane, uint32_t qp_index, uint16_t path_set) {
    return (static_cast<uint64_t>(peer) << 32) | (static_cast<uint64_t>(path_set) << 16) |
           ((qp_index & 0xFF) << 8) | (plane & 0xFF);
  }
  std::vector<std::vector<PathRef>> path_sets;  // Simulation::add_path_set, id = index + 1
  Status configure_qp(Engine& e, uint32_t qpn, HostId me, HostId peer, uint32_t plane,
                      uint32_t dest_qpn, uint32_t qp_index = 0, uint16_t path_set = 0);
  Result<uint32_t> blocks_qp(HostId me, HostId peer, uint32_t plane, uint32_t qp_index,
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
  void snapshot_qp(FlowState& st, const Engine& e, uint32_t qpn);
  void count_flow_paths(FlowState& st, const Engine& e, FlowResult& r);
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
  void add_fault(FaultAction a, Time at);
  void dispatch(const SimEvent& e);
  void prefetch_ahead(const EventQueue& q);
  Time run(Time until);
  void tap(HostId h, const SimPacket& p);
};

// ---------------------------------------------------------------------------------------
// 2. Topology.

Status Simulation::Impl::build() {
  const TopologyConfig& t = cfg.topo;
  P = t.planes;
  const uint32_t mtu_wire = cfg.transport.mtu + 120 + kIpUdpBytes + kEthernetOverhead;
  const Time hop = t.link_delay + serialization(mtu_wire, t.link_bps);
  if (t.kind == TopologyKind::kFatTree) {
    // One plane; k/2 hosts and k/2 uplinks per leaf; pods as many as the hosts need (a core
    // has one port per pod, so at most k pods).
    fat_tree = true;
    if (P != 1 || (t.tiers != 3 && t.tiers != 4) || t.radix < 4 || t.radix % 2 != 0 ||
        t.hosts_per_leaf != 0 || t.spines != 0 || t.radix >= 0x4000)
      return fail(Error::kInvalidArgument);
    ft_tiers = t.tiers;
    half = t.radix / 2;
    H = U = half;
    const uint64_t pod_hosts = static_cast<uint64_t>(half) * half;
    if (ft_tiers == 3) {
      pods = static_cast<uint32_t>((t.hosts + pod_hosts - 1) / pod_hosts);
      if (pods > t.radix) return fail(Error::kInvalidArgument);
      cores = half * half;
    } else {
      // Whole superpods (a core has one port per superpod, so at most k of them).
      superpods = static_cast<uint32_t>((t.hosts + pod_hosts * half - 1) / (pod_hosts * half));
      if (superpods > t.radix) return fail(Error::kInvalidArgument);
      pods = superpods * half;
      ft_spines = superpods * half * half;
      cores = half * half * half;
      if (pods * half > kMaxFourTierAggsOrSpines || ft_spines > kMaxFourTierAggsOrSpines)
        return fail(Error::kInvalidArgument);
    }
    L = pods * half;
    aggs = pods * half;
    if (L > kMaxFatTreeSwitchesPerTier || cores > kMaxFatTreeSwitchesPerTier)
      return fail(Error::kInvalidArgument);
    S = aggs + ft_spines + cores;
    // Longest path: 2 x tiers links and 2 x tiers - 1 switches each way; within a pod 4 and
    // 3; within a superpod (four tiers) 6 and 5.
    base_rtt = 2 * ((2 * ft_tiers) * hop + (2 * ft_tiers - 1) * t.switch_latency);
  } else {
    H = t.hosts_per_leaf ? t.hosts_per_leaf : t.radix / 2;
    if (H == 0 || H >= t.radix) return fail(Error::kInvalidArgument);
    U = t.radix - H;
    L = (t.hosts + H - 1) / H;
    S = t.spines ? t.spines : U;
    if (S == 0 || U % S != 0) return fail(Error::kInvalidArgument);
    k_parallel = U / S;
    if (L * k_parallel > t.radix) return fail(Error::kInvalidArgument);  // spine ports
    // Base RTT of the longest path: 4 links each way, a full MTU serialized per hop.
    base_rtt = 2 * (4 * hop + 3 * t.switch_latency);
  }
  const uint64_t bdp = static_cast<uint64_t>(static_cast<__uint128_t>(t.link_bps) * base_rtt /
                                             (8 * kPicosPerSecond));
  const SwitchConfig& sw = cfg.sw;
  queue_bytes = sw.queue_bytes ? sw.queue_bytes : std::max<uint64_t>(bdp, 4 * mtu_wire);
  ecn_kmin = sw.ecn_kmin_bytes ? sw.ecn_kmin_bytes : queue_bytes / 5;
  ecn_kmax = sw.ecn_kmax_bytes ? sw.ecn_kmax_bytes : queue_bytes * 4 / 5;
  trim_threshold = sw.trim_threshold_bytes ? sw.trim_threshold_bytes : queue_bytes;
  pfc_xoff = sw.pfc_xoff_bytes ? sw.pfc_xoff_bytes : queue_bytes;
  pfc_xon = sw.pfc_xon_bytes ? sw.pfc_xon_bytes : pfc_xoff / 2;
  if (sw.pfc) queue_bytes = std::max(queue_bytes, 4 * pfc_xoff);  // lossless headroom

  // Partitions: hosts in 0, plane p in 1 + p, when links give a lookahead; or blocks.
  lookahead = t.link_delay;
  num_partitions = lookahead > 0 ? 1 + P : 1;
  if (blocks) {
    if (lookahead == 0) return fail(Error::kInvalidArgument);
    auto shape = fabric_shape(t);
    if (!shape) return fail(shape.error());
    layout = BlockLayout(*shape);
    num_partitions = layout.blocks();
    const uint32_t ranks = ex ? ex->ranks() : 1;
    if (ranks > num_partitions) return fail(Error::kInvalidArgument);
    rank = ex ? ex->rank() : 0;
    owned.assign(num_partitions, 0);
    for (uint32_t b = 0; b < num_partitions; ++b)
      owned[b] = BlockLayout::rank_of(b, num_partitions, ranks) == rank;
    outbound.assign(ranks, {});
  }
  global_origin = num_partitions;
  queues.clear();
  // Calendar: 8 ns buckets over a horizon that holds a hop's events (link delay, switch
  // latency, serialization) with room to spare, at least 2 us; timers beyond it wait in the
  // far heap. A short ring is what keeps the queue's memory in the cache.
  const Time width = 1 << 13;
  Time horizon = std::max<Time>(us(2), (t.link_delay + t.switch_latency) * 3 / 2 + ns(500));
  // At tens of thousands of hosts the engines' state dwarfs any cache, so a short ring buys
  // nothing, while every QP's timers (a few RTTs ahead) would go through the far heap (log n
  // with n ~ the QP count): cover them (benchmark B).
  // Blocks: per partition's share of the QPs (64 rings of 4096 buckets kept 0.8 GB more than
  // the default layout at 16,384 GPUs).
  if (static_cast<uint64_t>(t.hosts) * P / (blocks ? num_partitions : 1) >= 65536)
    horizon = std::max<Time>(horizon, us(32));
  const auto buckets = static_cast<uint32_t>(std::bit_ceil((horizon + width - 1) / width));
  for (uint32_t i = 0; i < num_partitions; ++i) {
    queues.emplace_back(width, buckets);
    rngs.emplace_back(cfg.seed * 0x9E3779B97F4A7C15ull + i);
  }
  seq.assign(num_partitions + 1, 0);  // + the global origin

  switches.resize(static_cast<size_t>(P) * (L + S));
  uint32_t link_id = 0;
  // Sampled: every switch-switch link direction, when there are not too many.
  const uint64_t sampled_links = fat_tree ? 2ull * (L + aggs + ft_spines) * half : 2ull * P * L * U;
  const bool sample_links = cfg.sample_interval > 0 && sampled_links <= 65536;
  if (fat_tree) build_fat_tree_switches(sample_links);
  for (uint32_t p = 0; p < (fat_tree ? 0 : P); ++p) {
    for (uint32_t l = 0; l < L; ++l) {
      Switch& s = switches[leaf_index(p, l)];
      s.kind = Switch::kLeaf;
      s.plane = p;
      s.index = l;
      s.partition = plane_partition(p);
      s.ports.resize(H + U);
      for (uint32_t i = 0; i < H; ++i) {
        Port& port = s.ports[i];
        port.peer = l * H + i;
        port.peer_port = p;
        port.peer_is_host = true;
      }
      for (uint32_t u = 0; u < U; ++u) {
        Port& port = s.ports[H + u];
        const uint32_t spine = u % S, lane = u / S;
        port.peer = spine_index(p, spine);
        port.peer_port = l * k_parallel + lane;
        if (sample_links) port.link_id = link_id++;
      }
    }
    for (uint32_t sp = 0; sp < S; ++sp) {
      Switch& s = switches[spine_index(p, sp)];
      s.kind = Switch::kSpine;
      s.plane = p;
      s.index = sp;
      s.partition = plane_partition(p);
      s.ports.resize(static_cast<size_t>(L) * k_parallel);
      for (uint32_t l = 0; l < L; ++l) {
        for (uint32_t lane = 0; lane < k_parallel; ++lane) {
          Port& port = s.ports[l * k_parallel + lane];
          port.peer = leaf_index(p, l);
          port.peer_port = H + lane * S + sp;
          if (sample_links) port.link_id = link_id++;
        }
      }
    }
  }
  for (Switch& s : switches) {
    for (Port& port : s.ports) {
      port.rate.set(t.link_bps);
      port.delay = t.link_delay;
    }
    s.ingress_bytes.assign(s.ports.size(), 0);
    s.pause_sent.assign(s.ports.size(), 0);
  }
  route_down.assign(
      fat_tree ? static_cast<size_t>(L + aggs + ft_spines) * half : static_cast<size_t>(P) * L * U,
      0);
  route_down_count.assign(P, 0);

  hosts.resize(t.hosts);
  engines.reserve(t.hosts);
  for (HostId h = 0; h < t.hosts; ++h) {
    Host& host = hosts[h];
    if (ex != nullptr && !owned[host_partition(h)]) {
      engines.push_back(nullptr);  // another rank's
      continue;
    }
    EngineConfig ec;
    ec.num_ports = static_cast<uint8_t>(P);
    ec.seed = cfg.seed * 1000003 + h;
    ec.max_qps = 1u << 20;
    // Drained after every engine call: small buffers suffice (131,072 engines at scale).
    ec.completion_capacity = 64;
    ec.event_capacity = 64;
    ec.ack_every = cfg.transport.ack_every;
    ec.port_remap_delay = cfg.transport.port_remap_delay;
    // A NIC knows its fabric's unloaded RTT: a QP's first packets do not wait for the ACK
    // timeout when they are lost (EngineConfig::fabric_rtt).
    ec.fabric_rtt = cfg.transport.borrow_rtt ? base_rtt : 0;
    ec.share_rtt = cfg.transport.borrow_rtt;
    ec.probe_budget_interval = cfg.transport.probe_budget_interval;
    ec.reverse_evs_per_plane = static_cast<uint8_t>(cfg.transport.reverse_evs_per_plane);
    host.engine = std::make_unique<Engine>(ec);
    engines.push_back(host.engine.get());
    // One phantom region covers all of this GPU's memory: placement is counted, not copied.
    host.keys = *host.engine->register_memory(nullptr, 1ull << 60, 0, kLocalWrite | kRemoteWrite);
    host.ports.resize(P);
    for (uint32_t p = 0; p < P; ++p) {
      HostPort& hp = host.ports[p];
      hp.leaf = leaf_index(p, leaf_of(h));
      hp.leaf_port = h % H;
      hp.rate.set(t.link_bps);
      hp.delay = t.link_delay;
    }
  }
  // The last hop's queues, numbered after the switch-switch links.
  const uint64_t host_links = static_cast<uint64_t>(t.hosts) * P;
  const bool sample_host_links =
      cfg.sample_interval > 0 && cfg.sample_host_links && host_links <= 65536;
  if (sample_host_links) {
    uint32_t next_id = sample_links ? static_cast<uint32_t>(sampled_links) : 0;
    for (Switch& s : switches) {
      if (s.kind != Switch::kLeaf) continue;
      for (Port& port : s.ports)
        if (port.peer_is_host && port.peer < t.hosts) port.link_id = next_id++;
    }
  }
  if (blocks) {
    for (Switch& s : switches)
      s.partition = switch_partition(s);
    partition_switches.assign(num_partitions, {});
    for (uint32_t i = 0; i < switches.size(); ++i)
      partition_switches[switches[i].partition].push_back(i);
    qps_created.assign(t.hosts, 0);
  }
  if (ex != nullptr) {
    // Another rank's hosts: only their memory keys are read here (a WRITE names the
    // destination's rkey), and every engine's first registration gets the same keys.
    MemoryKeys keys{};
    for (const Host& host : hosts)
      if (host.engine) keys = host.keys;
    for (Host& host : hosts)
      if (!host.engine) host.keys = keys;
  }
  if (cfg.sample_interval > 0 && (sample_links || sample_host_links)) {
    if (blocks) {
      for (uint32_t b = 0; b < num_partitions; ++b)
        schedule_global(b, cfg.sample_interval, kSample, b);
    } else {
      for (uint32_t p = 0; p < P; ++p)
        schedule(plane_partition(p), cfg.sample_interval, kSample, p);
    }
  }
  if (cfg.throughput_interval > 0) {
    rx_placed.assign(t.hosts, 0);
    if (blocks) {
      // A block's hosts are contiguous (leaves, or pods, in order).
      block_tp.assign(num_partitions, {});
      block_first_host.assign(num_partitions + 1, t.hosts);
      for (HostId h = t.hosts; h-- > 0;)
        block_first_host[host_partition(h)] = h;
      for (uint32_t b = num_partitions; b-- > 0;)
        block_first_host[b] = std::min(block_first_host[b], block_first_host[b + 1]);
      for (uint32_t b = 0; b < num_partitions; ++b)
        schedule_global(b, cfg.throughput_interval, kThroughput, b);
    } else {
      tx_placed.assign(t.hosts, 0);
      schedule(0, cfg.throughput_interval, kThroughput);
    }
  }
  for (Switch& s : switches) {
    for (Port& port : s.ports) {
      const uint32_t peer_partition =
          port.peer_is_host ? host_partition(port.peer) : switches[port.peer].partition;
      port.chain_ok = cfg.scheduled_departures && !cfg.sw.pfc && peer_partition == s.partition;
    }
  }
  if (ex != nullptr && !sample_links) {
    // Another rank's switches are never touched here: keep their names, not their ports.
    for (Switch& s : switches) {
      if (owned[s.partition]) continue;
      std::vector<Port>().swap(s.ports);
      std::vector<uint64_t>().swap(s.ingress_bytes);
      std::vector<uint8_t>().swap(s.pause_sent);
    }
  }
  return {};
}

uint32_t Simulation::Impl::switch_partition(const Switch& s) const {
  if (!blocks) return s.partition;
  if (!fat_tree)
    return s.kind == Switch::kLeaf ? layout.leaf_block(s.index) : layout.spine_block(s.index);
  switch (s.kind) {
    case Switch::kLeaf:
      return layout.leaf_block(s.index);
    case Switch::kAgg:
      return layout.agg_block(s.index);
    case Switch::kSpine:
      return layout.ft_spine_block(s.index);
    case Switch::kCore:
      return layout.core_block(s.index);
  }
  return 0;
}

// A fat tree's switches: leaves (host ports, then one uplink per agg of the pod), aggs (one
// down port per leaf of the pod, then one up port per core of its group), cores (one port per
// pod, to the agg of its group). Four tiers: aggs go up to the spines of their group in the
// superpod (agg a to local spines a*half .. a*half + half - 1), spines have one down port per
// pod of the superpod and one up port per core of their group (local spine s to cores
// s*half .. s*half + half - 1), cores one port per superpod.
void Simulation::Impl::build_fat_tree_switches(bool sample_links) {
  uint32_t link_id = 0;
  const auto make = [&](uint32_t id, Switch::Kind kind, uint32_t index, uint32_t ports) -> Switch& {
    Switch& s = switches[id];
    s.kind = kind;
    s.index = index;
    s.partition = plane_partition(0);
    s.ports.resize(ports);
    return s;
  };
  // A switch-to-switch port (link ids in build order when links are sampled).
  const auto wire_port = [&](Port& port, uint32_t peer, uint32_t peer_port) {
    port.peer = peer;
    port.peer_port = peer_port;
    if (sample_links) port.link_id = link_id++;
  };
  for (uint32_t e = 0; e < L; ++e) {
    const uint32_t pod = e / half;
    Switch& s = make(e, Switch::kLeaf, e, 2 * half);
    for (uint32_t i = 0; i < half; ++i) {
      Port& port = s.ports[i];
      port.peer = e * H + i;
      port.peer_port = 0;
      port.peer_is_host = true;
    }
    for (uint32_t a = 0; a < half; ++a)
      wire_port(s.ports[half + a], agg_switch(pod, a), e % half);
  }
  for (uint32_t g = 0; g < aggs; ++g) {
    const uint32_t pod = g / half, a = g % half;
    Switch& s = make(agg_switch(pod, a), Switch::kAgg, g, 2 * half);
    for (uint32_t i = 0; i < half; ++i) {
      wire_port(s.ports[i], pod * half + i, half + a);
      if (ft_tiers == 4) {
        wire_port(s.ports[half + i], ft_spine_switch((pod / half) * half * half + a * half + i),
                  pod % half);
      } else {
        wire_port(s.ports[half + i], core_switch(a * half + i), pod);
      }
    }
  }
  for (uint32_t g = 0; g < ft_spines; ++g) {
    const uint32_t superpod = g / (half * half), local = g % (half * half);
    Switch& s = make(ft_spine_switch(g), Switch::kSpine, g, 2 * half);
    for (uint32_t i = 0; i < half; ++i) {
      wire_port(s.ports[i], agg_switch(superpod * half + i, local / half), half + local % half);
      wire_port(s.ports[half + i], core_switch(local * half + i), superpod);
    }
  }
  // A core has one port per pod (three tiers) or per superpod (four).
  const uint32_t core_ports = ft_tiers == 4 ? superpods : pods;
  for (uint32_t c = 0; c < cores; ++c) {
    Switch& s = make(core_switch(c), Switch::kCore, c, core_ports);
    for (uint32_t q = 0; q < core_ports; ++q) {
      const uint32_t peer =
          ft_tiers == 4 ? ft_spine_switch(q * half * half + c / half) : agg_switch(q, c / half);
      wire_port(s.ports[q], peer, half + c % half);
    }
  }
}

std::vector<uint16_t> Simulation::Impl::ft_usids(HostId src, HostId dst, uint32_t path) const {
  const uint32_t src_leaf = leaf_of(src), dst_leaf = leaf_of(dst);
  const uint32_t src_pod = src_leaf / half, dst_pod = dst_leaf / half;
  std::vector<uint16_t> usids;
  if (ft_tiers == 4) {
    const uint32_t a = path / (half * half), local_spine = path / half;
    const uint32_t src_superpod = src_pod / half, dst_superpod = dst_pod / half;
    if (src_leaf != dst_leaf) {
      usids.push_back(static_cast<uint16_t>(kAggUsidBase + src_pod * half + a));
      if (src_pod != dst_pod) {
        usids.push_back(
            static_cast<uint16_t>(kFtSpineUsidBase + src_superpod * half * half + local_spine));
        if (src_superpod != dst_superpod) {
          usids.push_back(static_cast<uint16_t>(kCoreUsidBase + path));
          usids.push_back(
              static_cast<uint16_t>(kFtSpineUsidBase + dst_superpod * half * half + local_spine));
        }
        usids.push_back(static_cast<uint16_t>(kAggUsidBase + dst_pod * half + a));
      }
    }
    usids.push_back(static_cast<uint16_t>(kLeafUsidBase + dst_leaf));
    usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % H));
    return usids;
  }
  const uint32_t a = path / half;
  if (src_leaf != dst_leaf) {
    usids.push_back(static_cast<uint16_t>(kAggUsidBase + src_pod * half + a));
    if (src_pod != dst_pod) {
      usids.push_back(static_cast<uint16_t>(kCoreUsidBase + path));
      usids.push_back(static_cast<uint16_t>(kAggUsidBase + dst_pod * half + a));
    }
  }
  usids.push_back(static_cast<uint16_t>(kLeafUsidBase + dst_leaf));
  usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % H));
  return usids;
}

uint16_t Simulation::Impl::ft_path(const ev::ExpandedEv& carrier) const {
  const uint16_t first = ev::usid_at(carrier, 0);
  if (ft_tiers == 4) {
    if (first < kAggUsidBase || first >= kFtSpineUsidBase) return kNoSpine;  // within the leaf
    const uint32_t a = (first - kAggUsidBase) % half;
    const uint16_t second = ev::usid_at(carrier, 1);
    if (second < kFtSpineUsidBase) return static_cast<uint16_t>(a * half * half);  // in the pod
    const uint16_t third = ev::usid_at(carrier, 2);
    if (third >= kCoreUsidBase) return static_cast<uint16_t>(third - kCoreUsidBase);
    return static_cast<uint16_t>(((second - kFtSpineUsidBase) % (half * half)) * half);
  }
  if (first < kAggUsidBase || first >= kCoreUsidBase) return kNoSpine;  // within the leaf
  const uint16_t second = ev::usid_at(carrier, 1);
  if (second >= kCoreUsidBase) return static_cast<uint16_t>(second - kCoreUsidBase);
  return static_cast<uint16_t>(((first - kAggUsidBase) % half) * half);
}

// The paths of a QP from src to dst on `plane` (RoCE: one QP per plane) or on every plane
// (MRC: plane = UINT32_MAX).
void Simulation::Impl::build_paths(HostId src, HostId dst, uint32_t plane, uint32_t qp_index,
                                   uint16_t path_set, QpAttr& a) {
  const TransportConfig& tc = cfg.transport;
  // Seeded by the unordered pair: both ends of a QP pair draw the same choices, so path i
  // names the same plane and spine in both directions (control packets rely on that). The
  // further QPs of a flow (qps_per_flow) draw their own.
  const uint64_t lo = std::min(src, dst), hi = std::max(src, dst);
  Rng rng(cfg.seed ^ (lo << 32 | hi) ^ 0xA5A5A5A5ull ^
          (qp_index ? mix32(qp_index) * 0x9E3779B97F4A7C15ull : 0));
  auto entropy_ev = [&](uint32_t v) {
    ev::ExpandedEv e{};
    e[0] = static_cast<uint8_t>(v >> 24);
    e[1] = static_cast<uint8_t>(v >> 16);
    e[2] = static_cast<uint8_t>(v >> 8);
    e[3] = static_cast<uint8_t>(v);
    return e;
  };
  if (tc.kind == TransportKind::kRoce) {
    PathDesc d;
    d.port = static_cast<uint8_t>(plane);
    d.ev = entropy_ev(static_cast<uint32_t>(rng.next()));
    a.paths.push_back(d);
    a.ev_min_active = 1;
    return;
  }
  if (path_set != 0) {
    // Pinned EVs (add_path_set checked them: two-tier, SRv6): exactly the listed paths.
    for (const PathRef& r : path_sets[path_set - 1]) {
      PathDesc d;
      d.port = static_cast<uint8_t>(r.plane);
      std::vector<uint16_t> usids;
      if (leaf_of(src) != leaf_of(dst))
        usids.push_back(static_cast<uint16_t>(kSpineUsidBase + r.spine));
      usids.push_back(static_cast<uint16_t>(kLeafUsidBase + leaf_of(dst)));
      usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % H));
      d.ev = *ev::srv6_carrier(kLocatorBlock, usids);
      a.paths.push_back(d);
    }
    a.ev_min_active = std::max<uint32_t>(1, static_cast<uint32_t>(a.paths.size()) / 8);
    return;
  }
  if (fat_tree) {
    // Every QP gets the same number of EVs, evenly spaced over the half^2 paths between pods
    // (four tiers: half^3 between superpods) (rotated per pair). Nearer pairs have fewer distinct
    // paths: half within a pod (the path names an agg), one within a leaf; their EVs repeat those
    // paths.
    const uint32_t n_paths = ft_num_paths();
    const uint32_t per =
        tc.evs_per_plane ? std::min(tc.evs_per_plane, n_paths) : std::min(n_paths, 64u);
    const uint32_t offset = static_cast<uint32_t>(rng.below(n_paths));
    for (uint32_t e = 0; e < per; ++e) {
      PathDesc d;
      d.port = 0;
      if (tc.path_mode == PathMode::kSrv6) {
        const uint32_t path =
            static_cast<uint32_t>((static_cast<uint64_t>(e) * n_paths / per + offset) % n_paths);
        d.ev = *ev::srv6_carrier(kLocatorBlock, ft_usids(src, dst, path));
      } else {
        d.ev = entropy_ev(static_cast<uint32_t>(rng.next()));
      }
      a.paths.push_back(d);
    }
    a.ev_min_active = std::max<uint32_t>(1, per / 8);
    return;
  }
  const uint32_t per_plane = active_evs_per_plane();
  const uint32_t backups = backup_evs_per_plane();
  const bool same_leaf = leaf_of(src) == leaf_of(dst);
  // With fewer EVs than spines, each QP gets its own evenly spaced subset (rotated by a
  // per-pair offset), so that together the QPs of a fabric use every spine.
  std::vector<uint32_t> offset(P);
  for (uint32_t p = 0; p < P; ++p)
    offset[p] = static_cast<uint32_t>(rng.below(S));
  // Backup b of plane p: the spines the active set leaves out, evenly spaced (paper 2.4).
  std::vector<uint8_t> taken;
  auto backup_spine = [&](uint32_t p, uint32_t b) {
    taken.assign(S, 0);
    for (uint32_t e = 0; e < per_plane; ++e)
      taken[(e * S / per_plane + offset[p]) % S] = 1;
    const uint32_t free = S - per_plane;
    const uint32_t k = static_cast<uint32_t>(static_cast<uint64_t>(b) * free / backups);
    for (uint32_t s = 0, seen = 0; s < S; ++s) {
      const uint32_t spine = (offset[p] + s) % S;
      if (taken[spine]) continue;
      if (seen++ == k) return spine;
    }
    return offset[p];  // not reached: backups <= free
  };
  for (uint32_t e = 0; e < per_plane + backups; ++e) {
    for (uint32_t p = 0; p < P; ++p) {
      PathDesc d;
      d.port = static_cast<uint8_t>(p);
      if (tc.path_mode == PathMode::kSrv6) {
        // EV e names a spine (the destination's leaf and host uSIDs follow). Same-leaf
        // destinations need no spine.
        const uint32_t spine_index =
            e < per_plane ? (e * S / per_plane + offset[p]) % S : backup_spine(p, e - per_plane);
        const uint16_t spine = static_cast<uint16_t>(kSpineUsidBase + spine_index);
        const uint16_t leaf = static_cast<uint16_t>(kLeafUsidBase + leaf_of(dst));
        const uint16_t host = static_cast<uint16_t>(kHostUsidBase + dst % H);
        std::vector<uint16_t> usids;
        if (!same_leaf) usids.push_back(spine);
        usids.push_back(leaf);
        usids.push_back(host);
        d.ev = *ev::srv6_carrier(kLocatorBlock, usids);
      } else {
        d.ev = entropy_ev(static_cast<uint32_t>(rng.next()));
      }
      a.paths.push_back(d);
    }
  }
  a.path_policy.active_per_plane = backups ? per_plane : 0;
  a.ev_min_active = std::max<uint32_t>(1, per_plane * P / 8);
}

uint32_t Simulation::Impl::active_evs_per_plane() const {
  const uint32_t by_paper = std::max<uint32_t>(1, 256 / P);
  // ECMP: an EV is hashed, not a spine; more EVs than spines weight the uplinks more evenly.
  if (ecmp_evs()) return cfg.transport.evs_per_plane ? cfg.transport.evs_per_plane : by_paper;
  return cfg.transport.evs_per_plane ? std::min(cfg.transport.evs_per_plane, S)
                                     : std::min(S, by_paper);
}

uint32_t Simulation::Impl::backup_evs_per_plane() const {
  const uint32_t active = active_evs_per_plane();
  const uint32_t want = cfg.transport.backup_evs_per_plane == TransportConfig::kAutoBackup
                            ? (active + 3) / 4
                            : cfg.transport.backup_evs_per_plane;
  return ecmp_evs() ? want : std::min(want, S - active);
}

Result<QpPair> Simulation::Impl::qp_for(HostId src, HostId dst, uint32_t plane, uint32_t qp_index,
                                        uint16_t path_set) {
  const uint64_t key = qp_key(dst, plane, qp_index, path_set);
  auto it = hosts[src].qps.find(key);
  if (it != hosts[src].qps.end()) return it->second;
  Engine& es = *hosts[src].engine;
  Engine& ed = *hosts[dst].engine;
  QpCreateAttr ca;
  ca.sq_depth = 64;  // flows beyond this queue in the engine's post_write error path
  ca.rq_depth = 64;
  auto qs = es.create_qp(ca);
  auto qd = ed.create_qp(ca);
  if (!qs || !qd) return fail(Error::kNoResources);
  if (auto s = configure_qp(es, *qs, src, dst, plane, *qd, qp_index, path_set); !s)
    return fail(s.error());
  if (auto s = configure_qp(ed, *qd, dst, src, plane, *qs, qp_index, path_set); !s)
    return fail(s.error());
  const QpPair fwd{*qs, *qd};
  hosts[src].qps[key] = fwd;
  hosts[dst].qps[qp_key(src, plane, qp_index, path_set)] = QpPair{*qd, *qs};
  return fwd;
}

// The blocks layout: host `me`'s QP for `peer`, created on first use by either end on its
// own (the sender when a flow starts, the receiver one lookahead later: kFlowAccept), so no
// partition touches another's engine. Neither end knows the other's QP number: packets are
// delivered to the receiver's QP for the sender (host_arrive), and dest_qpn stays 0.
Result<uint32_t> Simulation::Impl::blocks_qp(HostId me, HostId peer, uint32_t plane,
                                             uint32_t qp_index, uint16_t path_set) {
  const uint64_t key = qp_key(peer, plane, qp_index, path_set);
  auto it = hosts[me].qps.find(key);
  if (it != hosts[me].qps.end()) return it->second.local_qpn;
  Engine& e = *hosts[me].engine;
  QpCreateAttr ca;
  ca.sq_depth = 64;  // as qp_for
  ca.rq_depth = 64;
  auto q = e.create_qp(ca);
  if (!q) return fail(Error::kNoResources);
  if (auto s = configure_qp(e, *q, me, peer, plane, 0, qp_index, path_set); !s)
    return fail(s.error());
  hosts[me].qps[key] = QpPair{*q, 0};
  if (qp_index != 0 || path_set != 0) hosts[me].qp_sub[*q] = (qp_index << 16) | path_set;
  ++qps_created[me];
  return *q;
}

// One end of a QP pair, from RESET to RTS.
Status Simulation::Impl::configure_qp(Engine& e, uint32_t qpn, HostId me, HostId peer,
                                      uint32_t plane, uint32_t dest_qpn, uint32_t qp_index,
                                      uint16_t path_set) {
  const TransportConfig& tc = cfg.transport;
  const uint64_t link =
      static_cast<uint64_t>(tc.kind == TransportKind::kRoce ? 1 : P) * cfg.topo.link_bps;
  const uint64_t bdp =
      static_cast<uint64_t>(static_cast<__uint128_t>(link) * base_rtt / (8 * kPicosPerSecond));
  {
    QpAttr a;
    a.transport = tc.kind == TransportKind::kRoce ? TransportMode::kRoce : TransportMode::kMrc;
    build_paths(me, peer, plane, qp_index, path_set, a);
    a.path_policy.ecn_steering = tc.kind == TransportKind::kMrc;
    // Recycle an ECN-marked path for a few round-robin visits, not a whole RTT: with tens
    // of paths a long cooldown parks most of them and piles traffic on the rest (measured:
    // 128-GPU permutation, max FCT/ideal 1.19 at base_rtt/16 against 1.35 at base_rtt).
    a.path_policy.ecn_cooldown = tc.ecn_cooldown ? tc.ecn_cooldown : base_rtt / 16;
    if (tc.ecn_cooldown == 0 && ecmp_evs()) {
      // Hashed EVs collide on links, and steering only acts if the cool-down outlasts the
      // marked EV's next turn: at least one round-robin cycle of a port's active EVs at line
      // rate (at 400G, 64 EVs: 5.2 us against base_rtt / 16 = 0.5 us, which skipped nothing:
      // docs/engine.md, "decisions").
      const Time packet = static_cast<Time>(static_cast<__uint128_t>(tc.mtu) * 8 * kPicosPerSecond /
                                            cfg.topo.link_bps);
      a.path_policy.ecn_cooldown =
          std::max(a.path_policy.ecn_cooldown, active_evs_per_plane() * packet);
    }
    a.path_policy.probe_interval = tc.probe_interval;
    a.path_policy.probe_backoff_limit = tc.probe_backoff_limit;
    a.path_policy.resurrect_probes = tc.resurrect_probes;
    a.path_policy.resurrect_window = tc.resurrect_window;
    a.path_policy.trim_hold = tc.trim_hold;
    a.path_policy.ecn_swap_marks = tc.ecn_swap_marks;
    CcAlgorithm alg = tc.cc;
    if (tc.kind == TransportKind::kRoce && alg == CcAlgorithm::kNscc) alg = CcAlgorithm::kDcqcn;
    a.cc.algorithm = alg;
    a.cc.nscc.base_rtt = base_rtt;
    a.cc.nscc.link_bps = link;
    a.cc.nscc.mtu = tc.mtu;
    // Paper 2.1: with trimming a loss is a path signal, not congestion; a fabric that drops
    // instead of trimming signals congestion by loss, as before (NsccConfig::loss_keep).
    a.cc.nscc.loss_keep =
        tc.loss_keep > 0 ? tc.loss_keep : (cfg.sw.trimming ? 1.0 : a.cc.nscc.max_md_jump);
    a.cc.dcqcn.line_rate_bps = link;
    a.cc.dcqcn.mtu = tc.mtu;
    // DCQCN as the paper evaluates it (Zhu et al. 2015, section 5: T = 55 us for both the
    // alpha and the rate-increase timers), not the slower 300 us NIC default, which would
    // make the baseline look worse than a tuned deployment.
    a.cc.dcqcn.alpha_update_period = us(55);
    a.cc.dcqcn.rate_increase_period = us(55);
    a.cc.fixed_window = 2 * bdp;
    a.dest_qpn = dest_qpn;
    a.peer = peer;
    a.path_mtu = tc.mtu;
    uint32_t mpr = tc.mpr;
    if (mpr == 0) {
      // Room for 2 BDPs of PSNs (NSCC's window is at most 1.5 BDP) plus one MPR unit of
      // slack for reordering and retransmissions.
      const uint64_t psns = 2 * bdp / tc.mtu + 128;
      mpr = static_cast<uint32_t>(std::clamp<uint64_t>((psns + 127) / 128, 1, 255));
    }
    a.mpr = a.mpr_dest = static_cast<uint8_t>(mpr);
    a.max_wimm = a.max_wimm_dest = 256;
    a.timeout = tc.timeout != TransportConfig::kTimeoutAuto ? tc.timeout
                : tc.kind == TransportKind::kRoce           ? 12
                                                            : 8;
    a.retry_linear = 7;
    a.retry_exp = 7;
    if (auto s = e.modify_qp(now, qpn, QpState::kInit, a); !s) return fail(s.error());
    if (auto s = e.modify_qp(now, qpn, QpState::kRtr, a); !s) return fail(s.error());
    if (auto s = e.modify_qp(now, qpn, QpState::kRts, a); !s) return fail(s.error());
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// 3. Forwarding.

uint32_t Simulation::Impl::forward(const Switch& sw, const SimPacket& p) {
  if (fat_tree) [[unlikely]]
    return forward_fat_tree(sw, p);
  const uint32_t dst_leaf = p.dst_leaf;
  if (sw.kind == Switch::kSpine) {
    // Spine: the active uSID after its own End is the destination leaf; ECMP spines have one
    // route per leaf too. Parallel links are chosen by the packet's entropy.
    const uint32_t lane = k_parallel > 1 ? mix32(p.entropy ^ sw.index) % k_parallel : 0;
    return dst_leaf * k_parallel + lane;
  }
  if (sw.index == dst_leaf) return p.dst - dst_leaf * H;  // host-facing port
  const uint32_t lane_pick = k_parallel > 1 ? mix32(p.entropy + 7) % k_parallel : 0;
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    // Static uSID route: the spine the sender chose. Never rerouted.
    const uint32_t spine = p.spine == kNoSpine ? 0 : p.spine;  // < S (send_from_host)
    return H + lane_pick * S + spine;
  }
  // ECMP over the uplinks the routing view still lists.
  const uint32_t h =
      mix32((static_cast<uint64_t>(p.entropy) << 32) ^ (static_cast<uint64_t>(p.src) << 20) ^
            p.dst ^ (static_cast<uint64_t>(sw.index + 1) << 52));
  if (route_down_count[sw.plane] == 0) return H + h % U;
  uint32_t alive[1024];
  uint32_t n = 0;
  const size_t base = static_cast<size_t>(sw.plane) * L;
  for (uint32_t u = 0; u < U && n < 1024; ++u) {
    const uint32_t spine = u % S;
    // Usable if our link to the spine is up and the spine still reaches the destination
    // leaf (on the same lane), as routing sees it.
    if (route_down[(base + sw.index) * U + u]) continue;
    if (route_down[(base + dst_leaf) * U + (u / S) * S + spine]) continue;
    alive[n++] = u;
  }
  if (n == 0) return H + h % U;  // no route: the packet dies on a dead link
  return H + alive[h % n];
}

// Whether agg `a` of `pod` still reaches `dst_leaf` as routing sees it: down to it within the
// pod, else through one of its cores whose link to agg `a` of the destination pod is up.
bool Simulation::Impl::ft_agg_reaches(uint32_t pod, uint32_t a, uint32_t dst_leaf) const {
  const uint32_t dst_pod = dst_leaf / half;
  if (route_down[ft_route_leaf_agg(dst_leaf, a)]) return false;
  if (pod == dst_pod) return true;
  for (uint32_t j = 0; j < half; ++j)
    if (!route_down[ft_route_agg_core(pod, a, j)] && !route_down[ft_route_agg_core(dst_pod, a, j)])
      return true;
  return false;
}

// Fat tree: down is unique (core -> the destination pod's agg of its group -> leaf -> host);
// up, SRv6 follows the path the sender chose (leaf: its agg, agg: its core), ECMP hashes per
// switch over the up ports that routing still lists.
uint32_t Simulation::Impl::forward_fat_tree(const Switch& sw, const SimPacket& p) {
  if (ft_tiers == 4) return forward_four_tier(sw, p);
  const uint32_t dst_leaf = p.dst_leaf, dst_pod = dst_leaf / half;
  if (sw.kind == Switch::kCore) return dst_pod;
  const uint32_t pod = sw.index / half;
  if (sw.kind == Switch::kLeaf && sw.index == dst_leaf) return p.dst - dst_leaf * H;
  if (sw.kind == Switch::kAgg && pod == dst_pod) return dst_leaf % half;
  const bool leaf = sw.kind == Switch::kLeaf;
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    const uint32_t path = p.spine == kNoSpine ? 0 : p.spine;  // < half^2 (ft_path)
    return half + (leaf ? path / half : path % half);
  }
  const uint32_t h = mix32(
      (static_cast<uint64_t>(p.entropy) << 32) ^ (static_cast<uint64_t>(p.src) << 20) ^ p.dst ^
      (static_cast<uint64_t>(sw.index + 1) << 44) ^ (static_cast<uint64_t>(sw.kind) << 60));
  if (route_down_count[0] == 0) return half + h % half;
  uint32_t alive[1024];
  uint32_t n = 0;
  for (uint32_t u = 0; u < half && n < 1024; ++u) {
    if (leaf) {
      if (route_down[ft_route_leaf_agg(sw.index, u)] || !ft_agg_reaches(pod, u, dst_leaf)) continue;
    } else {
      const uint32_t a = sw.index % half;
      if (route_down[ft_route_agg_core(pod, a, u)] ||
          route_down[ft_route_agg_core(dst_pod, a, u)] ||
          route_down[ft_route_leaf_agg(dst_leaf, a)])
        continue;
    }
    alive[n++] = u;
  }
  if (n == 0) return half + h % half;  // no route: the packet dies on a dead link
  return half + alive[h % n];
}

// Four tiers, as routing sees it: local spine `spine` reaches `dst_leaf` down through the
// destination pod's agg of its group when the superpod is the destination's, else through
// one of its cores whose link to the destination superpod's spine of the same group is up.
bool Simulation::Impl::ft4_spine_reaches(uint32_t spine, uint32_t dst_leaf) const {
  const uint32_t sq = half * half, dst_pod = dst_leaf / half, dst_superpod = dst_pod / half;
  const uint32_t local = spine % sq, a = local / half;
  const uint32_t dst_spine = dst_superpod * sq + local;
  // From the destination superpod's spine of this group down to the destination leaf.
  if (route_down[ft_route_agg_core(dst_pod, a, local % half)] ||
      route_down[ft_route_leaf_agg(dst_leaf, a)])
    return false;
  if (spine / sq == dst_superpod) return true;
  for (uint32_t j = 0; j < half; ++j)
    if (!route_down[ft_route_spine_core(spine, j)] &&
        !route_down[ft_route_spine_core(dst_spine, j)])
      return true;
  return false;
}

// Four tiers: agg `a` of `pod` reaches `dst_leaf` down within its pod, else through one of
// the spines of its group (its link to the spine up, and the spine reaching the leaf).
bool Simulation::Impl::ft4_agg_reaches(uint32_t pod, uint32_t a, uint32_t dst_leaf) const {
  if (pod == dst_leaf / half) return !route_down[ft_route_leaf_agg(dst_leaf, a)];
  for (uint32_t j = 0; j < half; ++j)
    if (!route_down[ft_route_agg_core(pod, a, j)] &&
        ft4_spine_reaches((pod / half) * half * half + a * half + j, dst_leaf))
      return true;
  return false;
}

// Four tiers: down is unique (core -> the destination superpod's spine of its group -> the
// destination pod's agg of that group -> leaf -> host); up, SRv6 follows the sender's path
// (leaf: agg path / half^2, agg: spine (path / half) mod half within its group, spine: core
// path mod half), ECMP hashes per switch over the up ports that routing still lists.
uint32_t Simulation::Impl::forward_four_tier(const Switch& sw, const SimPacket& p) {
  const uint32_t dst_leaf = p.dst_leaf, dst_pod = dst_leaf / half, dst_superpod = dst_pod / half;
  const uint32_t sq = half * half;
  switch (sw.kind) {
    case Switch::kCore:
      return dst_superpod;
    case Switch::kSpine:
      if (sw.index / sq == dst_superpod) return dst_pod % half;
      break;
    case Switch::kAgg:
      if (sw.index / half == dst_pod) return dst_leaf % half;
      break;
    default:
      if (sw.index == dst_leaf) return p.dst - dst_leaf * H;
      break;
  }
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    const uint32_t path = p.spine == kNoSpine ? 0 : p.spine;  // < half^3 (ft_path)
    if (sw.kind == Switch::kLeaf) return half + path / sq;
    if (sw.kind == Switch::kAgg) return half + (path / half) % half;
    return half + path % half;
  }
  const uint32_t h = mix32(
      (static_cast<uint64_t>(p.entropy) << 32) ^ (static_cast<uint64_t>(p.src) << 20) ^ p.dst ^
      (static_cast<uint64_t>(sw.index + 1) << 44) ^ (static_cast<uint64_t>(sw.kind) << 60));
  if (route_down_count[0] == 0) return half + h % half;
  uint32_t alive[1024];
  uint32_t n = 0;
  const uint32_t pod = sw.index / half;
  for (uint32_t u = 0; u < half && n < 1024; ++u) {
    bool usable;
    if (sw.kind == Switch::kLeaf) {
      usable = !route_down[ft_route_leaf_agg(sw.index, u)] && ft4_agg_reaches(pod, u, dst_leaf);
    } else if (sw.kind == Switch::kAgg) {
      usable = !route_down[ft_route_agg_core(pod, sw.index % half, u)] &&
               ft4_spine_reaches((pod / half) * sq + (sw.index % half) * half + u, dst_leaf);
    } else {
      const uint32_t dst_spine = dst_superpod * sq + sw.index % sq;
      usable = !route_down[ft_route_spine_core(sw.index, u)] &&
               !route_down[ft_route_spine_core(dst_spine, u)] &&
               ft4_spine_reaches(dst_spine, dst_leaf);
    }
    if (usable) alive[n++] = u;
  }
  if (n == 0) return half + h % half;  // no route: the packet dies on a dead link
  return half + alive[h % n];
}

// ---------------------------------------------------------------------------------------
// 4. Data path.

void Simulation::Impl::service_host(HostId h) {
  Host& host = hosts[h];
  Engine& e = *host.engine;
  uint32_t mask = 0;
  for (uint32_t p = 0; p < P; ++p) {
    const HostPort& hp = host.ports[p];
    if (hp.busy_until <= now && !hp.paused) mask |= 1u << p;
  }
  TxPacket tx;
  while (mask && e.poll_transmit(now, mask, tx)) {
    send_from_host(h, tx);
    mask &= ~(1u << tx.port);
  }
  Completion c;
  while (e.poll_completion(c))
    on_completion(h, c);
  Event ev;
  while (e.poll_event(ev)) {
    if (ev.type == mrc::EventType::kEvStateChange) {
      ev_events.push_back(EvEvent{now, h, ev.qpn, ev.ev_index, ev.port, ev.from, ev.to});
    } else if (ev.type == mrc::EventType::kEvSwap) {
      ev_events.push_back(EvEvent{now, h, ev.qpn, ev.ev_index, ev.port, ev.from, ev.to,
                                  static_cast<int32_t>(ev.replaced)});
    } else if (ev.type == mrc::EventType::kAckEvChange) {
      ev_events.push_back(EvEvent{
          now, h, ev.qpn, ev.ev_index, ev.port, ev.from, ev.to,
          ev.replaced == mrc::Event::kNoPath ? -1 : static_cast<int32_t>(ev.replaced), true});
    }
  }
  // A deadline already in the past fires now; timer_at must hold the event's own time, or
  // the event would look stale when it runs and the host would never be woken again.
  const Time d = std::max(e.next_deadline(), now);
  if (d < host.timer_at) {
    host.timer_at = d;
    schedule(host_partition(h), d, kHostTimer, h);
  }
}

void Simulation::Impl::send_from_host(HostId h, const TxPacket& tx) {
  Host& host = hosts[h];
  HostPort& hp = host.ports[tx.port];
  const uint32_t idx = alloc_packet();
  SimPacket& p = packets[idx];
  const bool data = tx.pkt.bth.opcode == wire::Opcode::kWriteOnly ||
                    tx.pkt.bth.opcode == wire::Opcode::kWriteOnlyImm;
  p.is_data = data;
  if (data) {
    p.body = DataBody{tx.pkt.bth, tx.pkt.reth, tx.pkt.imm, tx.pkt.payload_len, tx.pkt.data};
  } else {
    p.control = alloc_control();
    controls[p.control] = tx.pkt;
    controls[p.control].payload = nullptr;
  }
  p.wire_bytes = tx.transport_bytes + kIpUdpBytes + kEthernetOverhead;
  p.src = h;
  p.dst = tx.peer;
  p.plane = tx.port;
  p.flags = data ? kEct : kHigh;
  p.entropy =
      (static_cast<uint32_t>(tx.ev[0]) << 24) | (tx.ev[1] << 16) | (tx.ev[2] << 8) | tx.ev[3];
  p.spine = kNoSpine;
  if (cfg.transport.path_mode == PathMode::kSrv6 && cfg.transport.kind != TransportKind::kRoce) {
    if (fat_tree) [[unlikely]] {
      p.spine = ft_path(tx.ev);
    } else {
      const uint16_t first = ev::usid_at(tx.ev, 0);
      if (first >= kSpineUsidBase) p.spine = static_cast<uint16_t>((first - kSpineUsidBase) % S);
    }
  }
  p.dst_leaf = leaf_of(p.dst);
  p.qp_index = 0;
  p.path_set = 0;
  if (!host.qp_sub.empty()) [[unlikely]] {
    if (auto it = host.qp_sub.find(tx.src_qpn); it != host.qp_sub.end()) {
      p.qp_index = static_cast<uint8_t>(it->second >> 16);
      p.path_set = static_cast<uint16_t>(it->second);
    }
  }
  if (pcap && pcap_hosts[h]) tap(h, p);
  const Time ser = hp.rate.serialize(p.wire_bytes);
  hp.busy_until = now + ser;
  schedule(host_partition(h), hp.busy_until, kHostPortFree, h, tx.port);
  if (!hp.up || hp.blackhole || (hp.loss > 0 && rngs[cur_partition].chance(hp.loss))) {
    ++counters.fault_drops;
    ++counters.drops;
    free_packet(idx);
    return;
  }
  const Switch& leaf = switches[hp.leaf];
  schedule(leaf.partition, now + ser + hp.delay + cfg.topo.switch_latency, kSwitchArrive, hp.leaf,
           hp.leaf_port, idx);
}

void Simulation::Impl::host_arrive(HostId h, uint32_t idx) {
  SimPacket& p = packets[idx];

  if (pcap && pcap_hosts[h]) tap(h, p);
  RxPacket rx;
  rx.port = p.plane;
  rx.ecn_ce = p.flags & kCe;
  rx.trimmed = p.flags & kTrimmed;
  to_transport(p, rx.pkt);
  if (blocks) {
    // The sender addressed the QP pair, not a QP number (blocks_qp): deliver to this host's
    // QP for the sender.
    const uint32_t plane_key = cfg.transport.kind == TransportKind::kRoce ? p.plane : 0xFF;
    auto it = hosts[h].qps.find(qp_key(p.src, plane_key, p.qp_index, p.path_set));
    if (it != hosts[h].qps.end()) rx.pkt.bth.dest_qp = it->second.local_qpn;
  }
  const HostId src = p.src;
  free_packet(idx);
  if (cfg.throughput_interval > 0) [[unlikely]] {
    Engine& e = *hosts[h].engine;
    const uint64_t before = e.counters().bytes_placed;
    (void)e.on_packet(now, rx);
    if (const uint64_t placed = e.counters().bytes_placed - before; placed > 0) {
      rx_placed[h] += placed;
      if (blocks) {
        BlockThroughput& bt = block_tp[host_partition(h)];
        bt.tx[src] += placed;
        bt.pair[(static_cast<uint64_t>(src) << 32) | h] += placed;
      } else {
        tx_placed[src] += placed;
        pair_placed[(static_cast<uint64_t>(src) << 32) | h] += placed;
      }
    }
  } else {
    (void)hosts[h].engine->on_packet(now, rx);
  }
  service_host(h);
}

void Simulation::Impl::switch_arrive(uint32_t swi, uint32_t ingress, uint32_t idx) {
  Switch& sw = switches[swi];
  SimPacket& p = packets[idx];
  const uint32_t egress = forward(sw, p);
  if (path_losses_active > 0 && path_lost(sw, egress, p)) [[unlikely]] {
    ++counters.fault_drops;
    ++counters.drops;
    free_packet(idx);
    return;
  }
  Port& out = sw.ports[egress];
  bool high = p.flags & kHigh;
  const SwitchConfig& sc = cfg.sw;
  if (out.waiting) settle(out);
  if (!high) {
    if (sc.trimming && out.queue_bytes + p.wire_bytes > trim_threshold) {
      // Trim: forward the headers at high priority; the receiver NACKs, the sender resends.
      const uint32_t header = p.wire_bytes - p.body.payload_len;
      p.wire_bytes = header;
      p.body.payload_len = 0;
      p.flags = static_cast<uint8_t>((p.flags | kTrimmed | kHigh) & ~kCe);
      high = true;
      ++counters.trims;
    } else if (!sc.pfc && out.queue_bytes + p.wire_bytes > queue_bytes) {
      ++counters.drops;
      free_packet(idx);
      return;
    } else if ((p.flags & kEct) && (ecn_last_hop || !out.peer_is_host)) {
      // RED-style marking on the queue the packet joins (not on the last hop unless
      // switch.ecn_last_hop: paper 2.1).
      const uint64_t q = out.queue_bytes;
      if (q >= ecn_kmax) {
        p.flags |= kCe;
      } else if (q > ecn_kmin) {
        const double prob = cfg.sw.ecn_pmax * static_cast<double>(q - ecn_kmin) /
                            static_cast<double>(ecn_kmax - ecn_kmin);
        if (rngs[cur_partition].chance(prob)) p.flags |= kCe;
      }
      if (p.flags & kCe) ++counters.ecn_marks;
    }
  }
  if (high && out.queue_bytes + p.wire_bytes > 4 * queue_bytes) {
    ++counters.drops;  // even headers have a limit
    free_packet(idx);
    return;
  }
  if (out.chained || (out.chain_ok && out.low.empty() && out.high.empty() &&
                      out.busy_until <= now && out.up && !out.blackhole && out.loss == 0)) {
    schedule_departure(swi, egress, idx, p.wire_bytes, high);
    return;
  }
  const QueuedPacket queued{idx, static_cast<uint16_t>(p.wire_bytes),
                            static_cast<uint16_t>(ingress)};
  if (high) {
    out.high.push(queued);
  } else {
    out.low.push(queued);
    if (sc.pfc) {
      sw.ingress_bytes[ingress] += p.wire_bytes;
      if (!sw.pause_sent[ingress] && sw.ingress_bytes[ingress] > pfc_xoff) {
        sw.pause_sent[ingress] = 1;
        send_pause(swi, ingress, true);
      }
    }
  }
  out.queue_bytes += p.wire_bytes;
  if (out.busy_until <= now) {
    start_tx(swi, egress);
  } else if (!out.free_pending) {
    out.free_pending = true;
    schedule(sw.partition, out.busy_until, kPortFree, swi, egress);
  }
}

void Simulation::Impl::schedule_departure(uint32_t swi, uint32_t port_index, uint32_t idx,
                                          uint32_t wire_bytes, bool high) {
  Port& out = switches[swi].ports[port_index];
  out.chained = true;
  const Time ser = out.rate.serialize(wire_bytes);
  const Time hop = out.delay + (out.peer_is_host ? 0 : cfg.topo.switch_latency);
  ScheduledPacket e{idx, static_cast<uint16_t>(wire_bytes), high, 0, 0};
  size_t pos = out.wire.size();
  if (high) {
    // Strict priority: after the frame on the wire and the high entries waiting, before the
    // waiting low ones.
    pos -= out.waiting;
    while (pos < out.wire.size() && out.wire[pos].high)
      ++pos;
  }
  if (pos == out.wire.size()) {
    e.start = std::max(now, out.busy_until);
    e.arrive = e.start + ser + hop;
    out.wire.push(e);
    out.busy_until = e.start + ser;
  } else {
    e.start = out.wire[pos].start;
    e.arrive = e.start + ser + hop;
    out.wire.insert(pos, e);
    for (size_t i = pos + 1; i < out.wire.size(); ++i) {
      out.wire[i].start += ser;
      out.wire[i].arrive += ser;
    }
    out.busy_until += ser;
  }
  if (e.start > now) {
    ++out.waiting;
    out.queue_bytes += wire_bytes;
  } else {
    out.tx_bytes += wire_bytes;
  }
  if (out.wire.size() == 1)
    schedule(switches[swi].partition, e.arrive, kPortDeliver, swi, port_index, idx);
}

void Simulation::Impl::settle(Port& out) {
  while (out.waiting) {
    const ScheduledPacket& e = out.wire[out.wire.size() - out.waiting];
    if (e.start > now) break;
    --out.waiting;
    out.queue_bytes -= e.wire_bytes;
    out.tx_bytes += e.wire_bytes;
  }
}

void Simulation::Impl::deliver(uint32_t swi, uint32_t port_index) {
  Port& out = switches[swi].ports[port_index];
  if (out.waiting) settle(out);
  const uint32_t idx = out.wire.pop().idx;
  // The next entry has started (it follows the one just delivered on the wire), so no later
  // insertion can move it: its event stands.
  if (!out.wire.empty()) {
    schedule(switches[swi].partition, out.wire.front().arrive, kPortDeliver, swi, port_index,
             out.wire.front().idx);
  }
  if (out.peer_is_host) {
    host_arrive(out.peer, idx);
  } else {
    switch_arrive(out.peer, out.peer_port, idx);
  }
}

void Simulation::Impl::recall(uint32_t swi, uint32_t port_index) {
  Port& out = switches[swi].ports[port_index];
  if (!out.chained) return;
  settle(out);
  out.chained = false;
  if (out.waiting == 0) return;
  // Waiting entries start back to back after the frame on the wire: the port is busy until
  // the first of them would have started. Highs precede lows, so class order is kept.
  out.busy_until = out.wire[out.wire.size() - out.waiting].start;
  for (size_t i = out.wire.size() - out.waiting; i < out.wire.size(); ++i) {
    const ScheduledPacket& e = out.wire[i];
    const QueuedPacket q{e.idx, e.wire_bytes, 0};  // ingress: PFC only, never scheduled
    if (e.high) {
      out.high.push(q);
    } else {
      out.low.push(q);
    }
  }
  for (; out.waiting > 0; --out.waiting)
    (void)out.wire.pop_back();
  out.free_pending = true;
  schedule(switches[swi].partition, out.busy_until, kPortFree, swi, port_index);
}

void Simulation::Impl::start_tx(uint32_t swi, uint32_t port_index) {
  Switch& sw = switches[swi];
  Port& out = sw.ports[port_index];
  if (out.busy_until > now) return;  // still serializing; its kPortFree will call again
  if (out.chained) return;           // a stale kPortFree: the wire schedule sends on its own
  if (out.chain_ok && out.up && !out.blackhole && out.loss == 0) {
    // A frame boundary on a healthy link (after a recall, a rate change or a repair): the
    // queue goes back to scheduled departures, in the order this function would send it.
    for (PacketFifo* fifo : {&out.high, &out.low}) {
      while (!fifo->empty()) {
        const QueuedPacket q = fifo->pop();
        out.queue_bytes -= q.wire_bytes;
        schedule_departure(swi, port_index, q.idx, q.wire_bytes, fifo == &out.high);
      }
    }
    return;
  }
  QueuedPacket q;
  bool high;
  if (!out.high.empty()) {
    q = out.high.pop();
    high = true;
  } else if (!out.low.empty() && !out.paused) {
    q = out.low.pop();
    high = false;
  } else {
    return;
  }
  const uint32_t idx = q.idx;
  out.queue_bytes -= q.wire_bytes;
  if (cfg.sw.pfc && !high) {
    uint64_t& b = sw.ingress_bytes[q.ingress];
    b -= std::min<uint64_t>(b, q.wire_bytes);
    if (sw.pause_sent[q.ingress] && b < pfc_xon) {
      sw.pause_sent[q.ingress] = 0;
      send_pause(swi, q.ingress, false);
    }
  }
  const Time ser = out.rate.serialize(q.wire_bytes);
  out.busy_until = now + ser;
  out.tx_bytes += q.wire_bytes;
  if (!out.high.empty() || (!out.low.empty() && !out.paused)) {
    out.free_pending = true;
    schedule(sw.partition, out.busy_until, kPortFree, swi, port_index);
  } else {
    out.free_pending = false;
  }
  if (!out.up || out.blackhole || (out.loss > 0 && rngs[cur_partition].chance(out.loss))) {
    ++counters.fault_drops;
    ++counters.drops;
    free_packet(idx);
    return;
  }
  const Time arrive = now + ser + out.delay;
  if (out.peer_is_host) {
    schedule(host_partition(out.peer), arrive, kHostArrive, out.peer, 0, idx);
  } else {
    schedule(switches[out.peer].partition, arrive + cfg.topo.switch_latency, kSwitchArrive,
             out.peer, out.peer_port, idx);
  }
}

// PFC (IEEE 802.1Qbb): ask the upstream end of `ingress` to pause (or resume) its
// low-priority queue. The frame takes one link delay.
void Simulation::Impl::send_pause(uint32_t swi, uint32_t ingress, bool pause) {
  const Switch& sw = switches[swi];
  if (pause) ++counters.pfc_pauses;
  if (sw.kind == Switch::kLeaf && ingress < H) {
    const HostId h = sw.index * H + ingress;
    if (h < hosts.size())
      schedule(host_partition(h), now + cfg.topo.link_delay, kPause, h | kHostBit, sw.plane, pause);
    return;
  }
  const Port& back = sw.ports[ingress];
  schedule(switches[back.peer].partition, now + back.delay, kPause, back.peer, back.peer_port,
           pause);
}

void Simulation::Impl::handle_pause(uint32_t node, uint32_t port, bool pause) {
  if (node & kHostBit) {
    const HostId h = node & ~kHostBit;
    hosts[h].ports[port].paused = pause;
    if (!pause) service_host(h);
    return;
  }
  Port& out = switches[node].ports[port];
  out.paused = pause;
  if (pause) return;
  // IEEE 802.1Qbb: XON lets the paused priority transmit at the next frame boundary. The port
  // may be mid-frame (a control packet, which PFC does not pause), and start_tx scheduled no
  // kPortFree for the end of that frame because the paused queue could not use it: schedule
  // one now, or the queued data would wait for the next arrival at this port (the ACK timeout,
  // 4.2 ms, when the port's last flows are the ones waiting).
  if (out.busy_until <= now) {
    start_tx(node, port);
  } else if (!out.free_pending && !out.low.empty()) {
    out.free_pending = true;
    schedule(switches[node].partition, out.busy_until, kPortFree, node, port);
  }
}

// ---------------------------------------------------------------------------------------
// 5. Flows, faults, sampling, the event loop.

void Simulation::Impl::flow_start(FlowId f) {
  // A copy: a flow that fails here completes at once, and the workload's callback may add
  // flows (growing `flows`) before service_host(s.src) below.
  const FlowSpec s = flow_record(f)->spec;
  const bool roce = cfg.transport.kind == TransportKind::kRoce;
  // RoCE: a QP per plane; either way transport.qps_per_flow QPs (per plane), the bytes split
  // evenly over them.
  const uint32_t per_qp = roce ? P : 1;
  const uint32_t parts = per_qp * cfg.transport.qps_per_flow;
  FlowState& st = flow_state_of(f);
  st.parts_left = parts;
  for (uint32_t part = 0; part < parts; ++part) {
    const uint32_t plane = roce ? part % P : 0xFF;
    Result<QpPair> qp = fail(Error::kNoResources);
    if (blocks) {
      // The receiver's end is set up in its own partition, one lookahead later: before any
      // packet of this flow can get there (two links away at least).
      if (auto q = blocks_qp(s.src, s.dst, plane, part / per_qp, roce ? 0 : s.path_set))
        qp = QpPair{*q, 0};
      // What the receiver needs of the flow travels with the event (its rank may not hold
      // the flow's record).
      const uint32_t ai = pool_take(accepts, free_accepts);
      accepts[ai] = FlowAccept{f, s.src, s.dst, part, s.path_set, s.with_imm};
      schedule(host_partition(s.dst), now + lookahead, kFlowAccept, 0, 0, ai);
    } else {
      qp = qp_for(s.src, s.dst, plane, part / per_qp, roce ? 0 : s.path_set);
    }
    uint64_t bytes = s.bytes / parts + (part < s.bytes % parts ? 1 : 0);
    if (!qp) {
      st.failed = true;
      --st.parts_left;
      continue;
    }
    if (s.with_imm && !blocks) (void)hosts[s.dst].engine->post_recv(qp->remote_qpn, f);
    snapshot_qp(st, *hosts[s.src].engine, qp->local_qpn);
    WriteWr w;
    w.wr_id = (static_cast<uint64_t>(f) << 16) | part;
    w.opcode = s.with_imm ? WrOpcode::kWriteImm : WrOpcode::kWrite;
    w.lkey = hosts[s.src].keys.lkey;
    w.length = bytes;
    w.rkey = hosts[s.dst].keys.rkey;
    w.imm = f;
    Host& src = hosts[s.src];
    auto posted = src.engine->post_write(now, qp->local_qpn, w);
    if (!posted && posted.error() == Error::kQueueFull) {
      // The send queue is full: the WR waits in the host's backlog for a completion.
      src.backlog[qp->local_qpn].push_back(w);
    } else if (!posted) {
      st.failed = true;
      --st.parts_left;
    }
  }
  if (st.parts_left == 0) {
    FlowResult r = *flow_record(f);
    r.end = now;
    r.fct = now - s.start;
    r.ok = false;
    finish_flow(r);
  }
  service_host(s.src);
}

// Blocks layout: the receiving end of a flow's QP (part `part`) and its receive buffer.
void Simulation::Impl::flow_accept(uint32_t ai) {
  const FlowAccept a = accepts[ai];
  free_accepts.push_back(ai);
  const HostId dst = a.dst, src = a.src;
  const uint32_t part = a.part;
  const FlowId f = a.flow;
  const uint16_t path_set = a.path_set;
  const bool with_imm = a.with_imm;
  const bool roce = cfg.transport.kind == TransportKind::kRoce;
  const uint32_t per_qp = roce ? P : 1;
  auto q = blocks_qp(dst, src, roce ? part % P : 0xFF, part / per_qp, roce ? 0 : path_set);
  // Without a QP here (out of QPs) the sender's packets are dropped and its QP fails.
  if (!q) return;
  if (with_imm) (void)hosts[dst].engine->post_recv(*q, f);
  service_host(dst);
}

// A flow is done (r: its result). The default layout tells the workload at once; the blocks
// layout collects the window's completions and publishes them, on every rank, in (end, flow)
// order when the window ends (publish_completions).
void Simulation::Impl::finish_flow(const FlowResult& r) {
  if (blocks) {
    completed.push_back(r);
    return;
  }
  const Time received = flows[r.id].received;
  flows[r.id] = r;
  flows[r.id].received = received;
  ++flows_done;
  for (auto& cb : flow_cbs)
    cb(flows[r.id]);
}

// Flow f is whole at its receiver. The blocks layout publishes it with the window's
// completions (a record with end = kNever marks a reception).
void Simulation::Impl::flow_received(FlowId f) {
  if (blocks) {
    FlowResult r;
    r.id = f;
    r.end = kNever;
    r.received = now;
    completed.push_back(r);
    return;
  }
  flows[f].received = now;
  for (auto& cb : received_cbs)
    cb(flows[f]);
}

void Simulation::Impl::on_completion(HostId h, const Completion& c) {
  if (c.opcode == WcOpcode::kRecvImm) {
    // The receive a flow with immediate posted at its destination (wr_id = flow).
    const auto f = static_cast<FlowId>(c.wr_id);
    if (c.status != WcStatus::kSuccess || f >= num_flows) return;
    if (const uint32_t parts = flow_parts(); parts > 1) {
      uint32_t& n = parts_received[f];
      if (++n < parts) return;
      parts_received.erase(f);
    }
    flow_received(f);
    return;
  }
  Host& host = hosts[h];
  if (!host.backlog.empty()) {
    auto it = host.backlog.find(c.qpn);
    if (it != host.backlog.end() && !it->second.empty()) {
      if (host.engine->post_write(now, c.qpn, it->second.front())) it->second.pop_front();
      if (it->second.empty()) host.backlog.erase(it);
    }
  }
  const FlowId f = static_cast<FlowId>(c.wr_id >> 16);
  FlowResult* rec = flow_record(f);
  if (rec == nullptr) return;
  FlowState& st = flow_state_of(f);
  if (c.status != WcStatus::kSuccess) st.failed = true;
  if (st.parts_left == 0 || --st.parts_left > 0) return;
  FlowResult r = *rec;
  r.end = now;
  r.fct = now - r.spec.start;
  r.ok = !st.failed;
  count_flow_paths(st, *host.engine, r);
  finish_flow(r);
}

void Simulation::Impl::snapshot_qp(FlowState& st, const Engine& e, uint32_t qpn) {
  st.qpns.push_back(qpn);
  if (auto stats = e.qp_stats(qpn)) st.retransmits_at_start += stats->retransmits;
  if (const PathSet* ps = e.qp_paths(qpn)) {
    for (size_t i = 0; i < ps->size(); ++i)
      st.path_sent_at_start.push_back(
          static_cast<uint32_t>(ps->path(static_cast<int>(i)).packets_sent));
  }
}

// Retransmits and paths that carried packets on the flow's QPs while it ran (flows sharing a
// QP at the same time share these counts; docs/simulator.md).
void Simulation::Impl::count_flow_paths(FlowState& st, const Engine& e, FlowResult& r) {
  uint64_t retx = 0;
  uint32_t used = 0;
  size_t k = 0;
  for (uint32_t qpn : st.qpns) {
    if (auto stats = e.qp_stats(qpn)) retx += stats->retransmits;
    if (const PathSet* ps = e.qp_paths(qpn)) {
      for (size_t i = 0; i < ps->size() && k < st.path_sent_at_start.size(); ++i, ++k) {
        const auto sent = static_cast<uint32_t>(ps->path(static_cast<int>(i)).packets_sent);
        if (sent != st.path_sent_at_start[k]) ++used;
      }
    }
  }
  r.retransmits = retx - std::min(retx, st.retransmits_at_start);
  r.paths_used = used;
  std::vector<uint32_t>().swap(st.qpns);
  std::vector<uint32_t>().swap(st.path_sent_at_start);
}

void Simulation::Impl::add_fault(FaultAction a, Time at) {
  if (blocks) {
    // Each end of a link acts in its own partition (a host and its leaf share one); the
    // routing view (ECMP convergence) changes between windows, for every switch at once.
    const auto add = [&](const FaultAction& x, uint32_t partition) {
      faults.push_back(x);
      schedule_global(partition, at, kFault, static_cast<uint32_t>(faults.size() - 1));
    };
    if (a.link.kind == LinkRef::kHostLeaf) {
      FaultAction host_side = a;
      host_side.host_side = true;
      add(host_side, host_partition(a.link.a));
      add(a, host_partition(a.link.a));
      return;
    }
    const LinkEnds ends = link_ends(a.link);
    const auto first = static_cast<uint32_t>(faults.size());
    for (uint8_t end = 1; end <= 2; ++end) {
      FaultAction one = a;
      one.end = end;
      add(one, switches[end == 1 ? ends.sw_a : ends.sw_b].partition);
    }
    if (a.kind == FaultAction::kLinkState &&
        (cfg.transport.path_mode == PathMode::kEcmp ||
         cfg.transport.kind == TransportKind::kRoce) &&
        cfg.transport.routing_convergence != kNever) {
      route_actions.emplace_back(at + cfg.transport.routing_convergence, first);
    }
    return;
  }
  // Host links have two ends in different partitions: one action for each.
  if (a.link.kind == LinkRef::kHostLeaf && a.kind == FaultAction::kLinkState) {
    FaultAction host_side = a;
    host_side.host_side = true;
    faults.push_back(host_side);
    schedule(0, at, kFault, static_cast<uint32_t>(faults.size() - 1));
  } else if (a.link.kind == LinkRef::kHostLeaf) {
    FaultAction host_side = a;
    host_side.host_side = true;
    faults.push_back(host_side);
    schedule(0, at, kFault, static_cast<uint32_t>(faults.size() - 1));
  }
  faults.push_back(a);
  schedule(plane_partition(a.link.plane), at, kFault, static_cast<uint32_t>(faults.size() - 1));
}

bool Simulation::Impl::path_lost(const Switch& sw, uint32_t egress, const SimPacket& p) {
  if (fat_tree || sw.kind != Switch::kLeaf || egress < H) return false;
  const uint32_t spine = (egress - H) % S;
  for (const PathLoss& r : path_losses)
    if (r.probability > 0 && r.src == p.src && r.dst == p.dst && r.path.plane == sw.plane &&
        r.path.spine == spine)
      return rngs[cur_partition].chance(r.probability);
  return false;
}

void Simulation::Impl::apply_fault(uint32_t idx) {
  const FaultAction& a = faults[idx];
  if (a.kind == FaultAction::kPathLoss) {
    PathLoss& r = path_losses[a.bps];
    if (r.probability == 0 && a.value > 0) ++path_losses_active;
    if (r.probability > 0 && a.value == 0) --path_losses_active;
    r.probability = a.value;
    return;
  }
  const LinkRef& l = a.link;
  auto apply = [&](auto& port) {
    switch (a.kind) {
      case FaultAction::kLinkState:
        port.up = a.flag;
        break;
      case FaultAction::kBlackhole:
        port.blackhole = a.flag;
        break;
      case FaultAction::kLoss:
        port.loss = a.value;
        break;
      case FaultAction::kRate:
        port.rate.set(a.bps);
        break;
      case FaultAction::kPathLoss:
        break;  // not a port's state (path_losses)
    }
  };
  if (l.kind == LinkRef::kHostLeaf) {
    if (a.host_side) {
      apply(hosts[l.a].ports[l.plane]);
      // The NIC sees its own link go down (loss of signal) and tells the engine.
      if (a.kind == FaultAction::kLinkState) {
        hosts[l.a].engine->set_port_up(now, static_cast<uint8_t>(l.plane), a.flag);
        service_host(l.a);
      }
    } else {
      // Departures were scheduled under the link's old state: recall them first.
      recall(leaf_index(l.plane, leaf_of(l.a)), l.a % H);
      Switch& leaf = switches[leaf_index(l.plane, leaf_of(l.a))];
      apply(leaf.ports[l.a % H]);
      if (a.kind == FaultAction::kLinkState && a.flag)
        start_tx(leaf_index(l.plane, leaf_of(l.a)), l.a % H);
    }
    return;
  }
  // Switch-switch link: both directions. Switches never reroute in SRv6 mode; in ECMP mode
  // the routing view follows after the convergence delay.
  const LinkEnds ends = link_ends(l);
  const bool at_a = a.end != 2, at_b = a.end != 1;
  if (at_a) recall(ends.sw_a, ends.port_a);
  if (at_b) recall(ends.sw_b, ends.port_b);
  if (at_a) apply(switches[ends.sw_a].ports[ends.port_a]);
  if (at_b) apply(switches[ends.sw_b].ports[ends.port_b]);
  if (a.kind == FaultAction::kLinkState) {
    if (a.flag) {
      if (at_a) start_tx(ends.sw_a, ends.port_a);
      if (at_b) start_tx(ends.sw_b, ends.port_b);
    }
    if (blocks) return;  // route_actions
    if (cfg.transport.path_mode == PathMode::kEcmp || cfg.transport.kind == TransportKind::kRoce) {
      if (cfg.transport.routing_convergence != kNever) {
        schedule(cur_partition, now + cfg.transport.routing_convergence, kRouteUpdate, idx);
      }
    }
  }
}

Simulation::Impl::LinkEnds Simulation::Impl::link_ends(const LinkRef& l) const {
  switch (l.kind) {
    case LinkRef::kLeafAgg:
      return {l.pod * half + l.a, half + l.b, agg_switch(l.pod, l.b), l.a};
    case LinkRef::kAggCore:
      return {agg_switch(l.pod, l.a), half + l.b % half, core_switch(l.b), l.pod};
    case LinkRef::kAggSpine:
      return {agg_switch(l.pod, l.a), half + l.b % half, ft_spine_switch(l.b), l.pod % half};
    case LinkRef::kSpineCore:
      return {ft_spine_switch(l.a), half + l.b % half, core_switch(l.b), l.a / (half * half)};
    default: {
      const uint32_t spine = l.b % S, lane = l.b / S;
      return {leaf_index(l.plane, l.a), H + lane * S + spine, spine_index(l.plane, spine),
              l.a * k_parallel + lane};
    }
  }
}

size_t Simulation::Impl::route_index(const LinkRef& l) const {
  switch (l.kind) {
    case LinkRef::kLeafAgg:
      return ft_route_leaf_agg(l.pod * half + l.a, l.b);
    case LinkRef::kAggCore:
    case LinkRef::kAggSpine:  // agg up port b mod half (spine b of the agg's group)
      return ft_route_agg_core(l.pod, l.a, l.b % half);
    case LinkRef::kSpineCore:
      return ft_route_spine_core(l.a, l.b % half);
    default:
      return (static_cast<size_t>(l.plane) * L + l.a) * U + l.b;
  }
}

void Simulation::Impl::route_update(uint32_t idx) {
  const FaultAction& a = faults[idx];
  const size_t i = route_index(a.link);
  const uint8_t down = a.flag ? 0 : 1;
  if (route_down[i] == down) return;
  route_down[i] = down;
  if (down) {
    ++route_down_count[a.link.plane];
  } else {
    --route_down_count[a.link.plane];
  }
}

// `plane`: the plane sampled (blocks layout: the partition).
void Simulation::Impl::sample(uint32_t plane) {
  const Time interval = cfg.sample_interval;
  const auto sample_switch = [&](uint32_t i) {
    for (Port& port : switches[i].ports) {
      if (port.link_id == UINT32_MAX) continue;
      if (port.waiting) settle(port);
      const uint64_t bytes = port.tx_bytes - port.sampled_tx_bytes;
      port.sampled_tx_bytes = port.tx_bytes;
      if (bytes == 0 && port.queue_bytes == 0) continue;  // idle: no sample (links.csv omits it)
      const double cap = static_cast<double>(port.rate.bps()) * static_cast<double>(interval) /
                         (8.0 * static_cast<double>(kPicosPerSecond));
      samples.push_back(LinkSample{now, port.link_id, static_cast<float>(bytes / cap),
                                   static_cast<uint32_t>(port.queue_bytes)});
    }
  };
  if (blocks) {
    for (uint32_t i : partition_switches[plane])
      sample_switch(i);
    // Completions are published between windows: every rank sees the same count.
    if (flows_done < num_flows) schedule(plane, now + interval, kSample, plane);
    return;
  }
  for (uint32_t i = plane * (L + S); i < (plane + 1) * (L + S); ++i)
    sample_switch(i);
  // Keep sampling while anything is still going on (a flow ends when it is counted done).
  if (flows_done < num_flows) schedule(plane_partition(plane), now + interval, kSample, plane);
}

void Simulation::Impl::flush_throughput() {
  if (cfg.throughput_interval == 0 || now == 0) return;
  const Time end =
      (now + cfg.throughput_interval - 1) / cfg.throughput_interval * cfg.throughput_interval;
  const Time saved = now;
  now = end;
  if (blocks) {
    for (uint32_t b = 0; b < num_partitions; ++b)
      if (ex == nullptr || owned[b]) emit_block_throughput(b);
  } else {
    emit_throughput();
  }
  now = saved;
  throughput_flushed = end;
}

void Simulation::Impl::sample_throughput(uint32_t block) {
  // An interval that flush_throughput() already wrote (the run stopped inside it) gets its
  // later bytes in the next one.
  if (blocks) {
    if (now > throughput_flushed) emit_block_throughput(block);
    // Completions are published between windows: every rank sees the same count.
    if (flows_done < num_flows) schedule(block, now + cfg.throughput_interval, kThroughput, block);
    return;
  }
  if (now > throughput_flushed) emit_throughput();
  if (flows_done < num_flows) schedule(0, now + cfg.throughput_interval, kThroughput);
}

// One block's rows (its receivers, and its share of every sender's and pair's bytes), in the
// order of emit_throughput once merge_results has sorted and added them up.
void Simulation::Impl::emit_block_throughput(uint32_t b) {
  for (HostId h = block_first_host[b]; h < block_first_host[b + 1]; ++h) {
    if (rx_placed[h] > 0)
      throughput_local.push_back({now, ThroughputSample::kHostRx, 0, h, rx_placed[h]});
    rx_placed[h] = 0;
  }
  BlockThroughput& bt = block_tp[b];
  for (const auto& [src, bytes] : bt.tx)
    throughput_local.push_back({now, ThroughputSample::kHostTx, src, 0, bytes});
  for (const auto& [key, bytes] : bt.pair)
    throughput_local.push_back({now, ThroughputSample::kPair, static_cast<HostId>(key >> 32),
                                static_cast<HostId>(key & 0xFFFFFFFF), bytes});
  bt.tx.clear();
  bt.pair.clear();
}

void Simulation::Impl::emit_throughput() {
  for (HostId h = 0; h < hosts.size(); ++h) {
    if (rx_placed[h] > 0)
      throughput.push_back({now, ThroughputSample::kHostRx, 0, h, rx_placed[h]});
    rx_placed[h] = 0;
  }
  for (HostId h = 0; h < hosts.size(); ++h) {
    if (tx_placed[h] > 0)
      throughput.push_back({now, ThroughputSample::kHostTx, h, 0, tx_placed[h]});
    tx_placed[h] = 0;
  }
  // In pair order, whatever the hash table's.
  std::vector<std::pair<uint64_t, uint64_t>> pairs(pair_placed.begin(), pair_placed.end());
  std::sort(pairs.begin(), pairs.end());
  for (const auto& [key, bytes] : pairs)
    throughput.push_back({now, ThroughputSample::kPair, static_cast<HostId>(key >> 32),
                          static_cast<HostId>(key & 0xFFFFFFFF), bytes});
  pair_placed.clear();
}

void Simulation::Impl::tap(HostId h, const SimPacket& p) {
  (void)h;
  wire::Datagram d;
  d.ip.traffic_class =
      static_cast<uint8_t>(((p.flags & kTrimmed) ? wire::kDscpTrimmed << 2 : wire::kDscpData << 2) |
                           ((p.flags & kCe) ? wire::kEcnCe : wire::kEcnEct0));
  d.ip.flow_label = p.entropy >> 12;
  d.ip.src = wire::usid_carrier(
      kLocatorBlock, std::array<uint16_t, 2>{static_cast<uint16_t>(kLeafUsidBase + leaf_of(p.src)),
                                             static_cast<uint16_t>(kHostUsidBase + p.src % H)});
  d.ip.dst = wire::usid_carrier(
      kLocatorBlock, std::array<uint16_t, 2>{static_cast<uint16_t>(kLeafUsidBase + leaf_of(p.dst)),
                                             static_cast<uint16_t>(kHostUsidBase + p.dst % H)});
  d.udp.src_port = static_cast<uint16_t>(0xC000 | (p.entropy & 0xFFF));
  to_transport(p, d.pkt);
  static thread_local std::vector<uint8_t> zeros;
  if (zeros.size() < d.pkt.payload_len) zeros.assign(d.pkt.payload_len, 0);
  d.pkt.payload = d.pkt.payload_len ? zeros.data() : nullptr;
  std::vector<uint8_t> buf(wire::encoded_size(d));
  if (auto n = wire::encode(d, buf)) (void)pcap->write(now, std::span(buf.data(), *n));
}

void Simulation::Impl::dispatch(const SimEvent& e) {
  switch (e.type) {
    case kFlowStart:
      flow_start(e.a);
      break;
    case kHostArrive:
      host_arrive(e.a, e.c);
      break;
    case kHostPortFree:
      service_host(e.a);
      break;
    case kHostTimer:
      if (hosts[e.a].timer_at == e.time) {
        hosts[e.a].timer_at = kNever;
        hosts[e.a].engine->on_timer(now);
        service_host(e.a);
      }
      break;
    case kSwitchArrive:
      switch_arrive(e.a, e.b, e.c);
      break;
    case kPortFree: {
      // A transmission may have started at this very time before this event ran (a packet
      // arriving at an idle port); then a newer kPortFree is pending and this one is stale.
      Port& out = switches[e.a].ports[e.b];
      if (out.busy_until > now) break;
      out.free_pending = false;
      start_tx(e.a, e.b);
      break;
    }
    case kPortDeliver:
      deliver(e.a, e.b);
      break;
    case kPause:
      handle_pause(e.a, e.b, e.c != 0);
      break;
    case kFault:
      apply_fault(e.a);
      break;
    case kSample:
      sample(e.a);
      break;
    case kRouteUpdate:
      route_update(e.a);
      break;
    case kFlowAccept:
      flow_accept(e.c);
      break;
    case kThroughput:
      sample_throughput(e.a);
      break;
  }
}

// The state the next events touch is cold: the packet pool, the engines of thousands of hosts
// and the switch ports are far larger than the caches. Start loading it while this event
// runs, in two stages because an engine's QPs are reached through the engine: the engine
// object of the event after next, then the next event's packet, engine state (QPs) and port.
// Benchmark A: together ~15 % of wall time.
void Simulation::Impl::prefetch_ahead(const EventQueue& q) {
  const auto host_event = [](const SimEvent& n) {
    return n.type == kHostArrive || n.type == kHostPortFree || n.type == kHostTimer;
  };
  // Three stages, one event apart (Engine::prefetch_tables): the engine object two events
  // ahead, its tables one event ahead, its QPs for the next event.
  if (const SimEvent* n3 = q.peek_ahead(2); n3 && host_event(*n3)) {
    const char* engine = reinterpret_cast<const char*>(engines[n3->a]);
    for (int line = 0; line < 4; ++line)
      __builtin_prefetch(engine + 64 * line);
    __builtin_prefetch(&hosts[n3->a]);
  }
  if (const SimEvent* n2 = q.peek_ahead(1); n2 && host_event(*n2)) {
    engines[n2->a]->prefetch_tables();
  }
  const SimEvent* n = q.peek_ready();
  if (!n) return;
  if (n->type == kSwitchArrive || n->type == kHostArrive || n->type == kPortDeliver)
    __builtin_prefetch(&packets[n->c]);
  if (host_event(*n)) engines[n->a]->prefetch();
  if (n->type == kPortDeliver) __builtin_prefetch(&switches[n->a].ports[n->b]);
}

Time Simulation::Impl::run(Time until) {
  if (blocks) return run_blocks(until);
  uint64_t next_progress = events + (1u << 22);
  while (true) {
    // Done when every flow has finished: probes of paths that stay dead would otherwise keep
    // the event queues busy for ever.
    if (num_flows > 0 && flows_done == num_flows) break;
    Time t = kNever;
    for (auto& q : queues)
      t = std::min(t, q.peek_time());
    if (t == kNever || t > until) break;
    // Conservative window: nothing sent across partitions arrives sooner than the lookahead.
    const Time end = num_partitions > 1 ? t + lookahead : t + 1;
    for (uint32_t pi = 0; pi < num_partitions; ++pi) {
      EventQueue& q = queues[pi];
      cur_partition = pi;
      while (true) {
        const Time next = q.peek_time();  // kNever when empty
        if (next >= end || next > until) break;
        const SimEvent e = q.pop();
        prefetch_ahead(q);
        now = e.time;
        ++events;
        dispatch(e);
      }
    }
    now = std::max(now, t);
    if (progress_cb && events >= next_progress) {
      progress_cb(now, events);
      next_progress = events + (1u << 22);
    }
  }
  return now;
}

// ---------------------------------------------------------------------------------------
// 6. The blocks layout's run: windows of one lookahead over the partitions this rank holds,
// then the events for other ranks' partitions are exchanged and the window's flow
// completions published (on every rank, in (end, flow) order). The window sequence is the
// same on any number of ranks (each starts at the earliest event of the whole fabric), and
// so is every partition's order of events (time, origin partition, origin sequence): results
// do not depend on the number of ranks. docs/simulator.md, "Running on several machines".

namespace {
// An event for another rank: where it goes, and the packet it carries (kSwitchArrive).
struct RemoteHeader {
  uint32_t partition = 0;
  uint32_t carries = 0;  // 0 nothing, 1 a data packet, 2 a control packet, 3 a FlowAccept
  SimEvent event;
};
static_assert(std::is_trivially_copyable_v<SimPacket>);
static_assert(std::is_trivially_copyable_v<wire::TransportPacket>);
static_assert(std::is_trivially_copyable_v<FlowResult>);
static_assert(std::is_trivially_copyable_v<LinkSample>);
static_assert(std::is_trivially_copyable_v<EvEvent>);
static_assert(std::is_trivially_copyable_v<ThroughputSample>);

template <typename T>
void append(std::vector<uint8_t>& out, const T& x) {
  const size_t n = out.size();
  out.resize(n + sizeof(T));
  std::memcpy(out.data() + n, &x, sizeof(T));
}
template <typename T>
T take(const std::vector<uint8_t>& in, size_t& pos) {
  T x;
  std::memcpy(&x, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return x;
}
template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}
template <typename T>
std::vector<T> from_bytes(const std::vector<uint8_t>& in) {
  std::vector<T> v(in.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), in.data(), v.size() * sizeof(T));
  return v;
}
// What a rank sends every other rank at the end of a window, ahead of the events for it.
struct WindowHeader {
  Time next = kNever;        // the sender's earliest event after the window (held or sent)
  uint64_t events = 0;       // events the sender has run so far (progress)
  uint64_t completions = 0;  // flow results that follow (the window's, to every rank)
  uint64_t event_bytes = 0;  // then the events for the receiver
};
}  // namespace

void Simulation::Impl::send_remote(uint32_t partition, const SimEvent& e) {
  std::vector<uint8_t>& out =
      outbound[BlockLayout::rank_of(partition, num_partitions, ex->ranks())];
  if (out.size() < sizeof(WindowHeader)) out.resize(sizeof(WindowHeader));  // communicate()
  outbound_min = std::min(outbound_min, e.time);
  RemoteHeader h;
  h.partition = partition;
  h.event = e;
  if (e.type == kSwitchArrive) {
    const SimPacket& p = packets[e.c];
    h.carries = p.is_data ? 1 : 2;
    append(out, h);
    append(out, p);
    if (!p.is_data) append(out, controls[p.control]);
    free_packet(e.c);
    return;
  }
  if (e.type == kFlowAccept) {
    h.carries = 3;
    append(out, h);
    append(out, accepts[e.c]);
    free_accepts.push_back(e.c);
    return;
  }
  append(out, h);
}

// One exchange per window: events for other ranks' partitions, this window's flow
// completions (to every rank), the earliest time each rank will need next and its event count.
// Returns the start of the next window (before the workload adds flows); completions go to
// `completed` in rank order.
Time Simulation::Impl::communicate(uint64_t& total_events) {
  const uint32_t ranks = ex->ranks();
  WindowHeader mine;
  for (uint32_t pi = 0; pi < num_partitions; ++pi)
    if (owned[pi]) mine.next = std::min(mine.next, queues[pi].peek_time());
  mine.next = std::min(mine.next, outbound_min);  // the earliest event sent
  mine.events = events;
  mine.completions = completed.size();
  // Each rank's buffer starts with room for its header (send_remote appends after it).
  for (uint32_t r = 0; r < ranks; ++r) {
    std::vector<uint8_t>& out = outbound[r];
    if (out.size() < sizeof(WindowHeader)) out.resize(sizeof(WindowHeader));
    WindowHeader h = mine;
    h.event_bytes = out.size() - sizeof(WindowHeader);
    std::memcpy(out.data(), &h, sizeof h);
    for (const FlowResult& f : completed)
      append(out, f);
  }
  completed.clear();
  const std::vector<uint8_t> in = ex->exchange(outbound);
  for (auto& out : outbound)
    out.resize(sizeof(WindowHeader));
  outbound_min = kNever;
  Time next = kNever;
  total_events = 0;
  size_t pos = 0;
  while (pos < in.size()) {
    const auto h = take<WindowHeader>(in, pos);
    next = std::min(next, h.next);
    total_events += h.events;
    const size_t end = pos + h.event_bytes;
    while (pos < end) {
      const auto rh = take<RemoteHeader>(in, pos);
      SimEvent e = rh.event;
      if (rh.carries == 3) {
        const uint32_t ai = pool_take(accepts, free_accepts);
        accepts[ai] = take<FlowAccept>(in, pos);
        e.c = ai;
      } else if (rh.carries != 0) {
        const uint32_t idx = alloc_packet();
        packets[idx] = take<SimPacket>(in, pos);
        if (rh.carries == 2) {
          const uint32_t c = alloc_control();
          controls[c] = take<wire::TransportPacket>(in, pos);
          packets[idx].control = c;
        }
        e.c = idx;
      }
      queues[rh.partition].push(e);
    }
    for (uint64_t i = 0; i < h.completions; ++i)
      completed.push_back(take<FlowResult>(in, pos));
  }
  return next;
}

void Simulation::Impl::publish_completions(std::vector<FlowResult> done) {
  // Receptions (end == kNever) and completions by time; at one time receptions first, then
  // by flow. A flow's reception always comes before its completion.
  const auto at = [](const FlowResult& r) { return r.end == kNever ? r.received : r.end; };
  std::sort(done.begin(), done.end(), [&](const FlowResult& x, const FlowResult& y) {
    if (at(x) != at(y)) return at(x) < at(y);
    if ((x.end == kNever) != (y.end == kNever)) return x.end == kNever;
    return x.id < y.id;
  });
  const Time saved = now;
  for (const FlowResult& r : done) {
    // The workload hears of it one lookahead later (at the earliest, in the next window): a
    // flow it adds now starts no earlier than that (add_flow).
    now = at(r) + lookahead;
    // Every rank hands the workload the same record: a reception carries the flow id and
    // the time only (the receiver's rank may not hold the flow's record), a completion the
    // sender's result with the reception time.
    if (r.end == kNever) {
      received_at[r.id] = r.received;
      if (FlowResult* rec = flow_record(r.id)) rec->received = r.received;
      for (auto& cb : received_cbs)
        cb(r);
      continue;
    }
    FlowResult done_r = r;
    if (auto it = received_at.find(r.id); it != received_at.end()) {
      done_r.received = it->second;
      received_at.erase(it);
    }
    if (FlowResult* rec = flow_record(r.id)) *rec = done_r;
    ++flows_done;
    for (auto& cb : flow_cbs)
      cb(done_r);
  }
  now = saved;
}

Time Simulation::Impl::run_blocks(Time until) {
  std::sort(route_actions.begin() + static_cast<std::ptrdiff_t>(next_route_action),
            route_actions.end());
  uint64_t next_progress = events + (1u << 22);
  const auto earliest_here = [&] {
    Time e = kNever;
    for (uint32_t pi = 0; pi < num_partitions; ++pi)
      if (owned[pi]) e = std::min(e, queues[pi].peek_time());
    return e;
  };
  // Each window starts at the earliest event of the whole fabric.
  Time t = earliest_here();
  if (ex != nullptr) {
    std::vector<uint64_t> m{t};
    ex->all_min(m);
    t = m[0];
  }
  Time stopped = t;
  while (true) {
    if (num_flows > 0 && flows_done == num_flows) break;
    if (t == kNever || t > until) break;
    stopped = t;
    // Routing view changes due by then, in order; a window ends at the next one.
    while (next_route_action < route_actions.size() &&
           route_actions[next_route_action].first <= t) {
      route_update(route_actions[next_route_action].second);
      ++next_route_action;
    }
    Time end = t + lookahead;
    if (next_route_action < route_actions.size())
      end = std::min(end, route_actions[next_route_action].first);
    for (uint32_t pi = 0; pi < num_partitions; ++pi) {
      if (!owned[pi]) continue;
      EventQueue& q = queues[pi];
      cur_partition = pi;
      while (true) {
        const Time next = q.peek_time();
        if (next >= end || next > until) break;
        const SimEvent e = q.pop();
        prefetch_ahead(q);
        now = e.time;
        last_event = std::max(last_event, now);
        ++events;
        dispatch(e);
      }
    }
    now = t;
    uint64_t total_events = events;
    Time next = kNever;
    std::vector<FlowResult> done;
    if (ex != nullptr) next = communicate(total_events);
    done.swap(completed);
    global_scheduled = kNever;
    publish_completions(std::move(done));
    next = ex != nullptr ? std::min(next, global_scheduled) : earliest_here();
    if (progress_cb && total_events >= next_progress) {
      // t: where the slowest rank is (every rank has finished the window before t).
      if (ex == nullptr || ex->rank() == 0) progress_cb(t, total_events);
      next_progress = total_events + (1u << 22);
    }
    t = next;
  }
  // Where the run stopped: the latest event anywhere (at least the last window's start).
  Time latest = std::max(last_event, stopped == kNever ? 0 : stopped);
  if (ex != nullptr) {
    std::vector<uint64_t> m{~latest};
    ex->all_min(m);
    latest = ~m[0];
  }
  now = std::max(now, latest);
  flush_throughput();
  merge_results();
  return now;
}

// Results of the whole fabric, in an order independent of the ranks: link samples by (time,
// link), EV events by (time, host) (a host's own events keep their order).
void Simulation::Impl::merge_results() {
  if (ex != nullptr) {
    merged_samples = from_bytes<LinkSample>(ex->all_gather(to_bytes(samples)));
    merged_ev_events = from_bytes<EvEvent>(ex->all_gather(to_bytes(ev_events)));
  } else {
    merged_samples = samples;
    merged_ev_events = ev_events;
  }
  std::stable_sort(merged_samples.begin(), merged_samples.end(),
                   [](const LinkSample& x, const LinkSample& y) {
                     return x.time != y.time ? x.time < y.time : x.link < y.link;
                   });
  if (cfg.throughput_interval > 0) {
    // Every block's rows: sorted as emit_throughput writes them, a sender's rows of one
    // interval (one per receiving block) added up.
    std::vector<ThroughputSample> all =
        ex != nullptr ? from_bytes<ThroughputSample>(ex->all_gather(to_bytes(throughput_local)))
                      : throughput_local;
    const auto key = [](const ThroughputSample& x) {
      return std::make_tuple(x.time, x.kind, x.src, x.dst);
    };
    std::sort(all.begin(), all.end(), [&](const ThroughputSample& x, const ThroughputSample& y) {
      return key(x) < key(y);
    });
    throughput.clear();
    for (const ThroughputSample& x : all) {
      if (!throughput.empty() && key(throughput.back()) == key(x)) {
        throughput.back().bytes += x.bytes;
      } else {
        throughput.push_back(x);
      }
    }
  }
  std::stable_sort(merged_ev_events.begin(), merged_ev_events.end(),
                   [](const EvEvent& x, const EvEvent& y) {
                     return x.time != y.time ? x.time < y.time : x.host < y.host;
                   });
  SimStats s = counters;
  s.events = events;
  add_engine_stats(s);
  if (sparse_flows()) {
    // This rank's flows (the ones it sent) to rank 0, which then holds every flow's result;
    // the others keep their own. Failed flows are counted here, over every rank.
    for (const FlowResult& f : flows)
      s.qp_errors += (f.end != kNever && !f.ok) ? 1 : 0;
    const std::vector<FlowResult> all = from_bytes<FlowResult>(ex->gather(to_bytes(flows)));
    if (rank == 0) {
      std::vector<FlowResult> whole(num_flows);
      for (const FlowResult& f : all)
        whole[f.id] = f;
      flows = std::move(whole);
    }
  }
  if (ex != nullptr) {
    std::vector<uint64_t> v{s.events,
                            s.data_packets,
                            s.retransmits,
                            s.drops,
                            s.fault_drops,
                            s.trims,
                            s.ecn_marks,
                            s.pfc_pauses,
                            s.ev_state_changes,
                            s.timeouts,
                            s.ev_swaps,
                            s.qps,
                            s.qp_bytes,
                            s.qp_path_bytes,
                            s.peer_port_changes,
                            s.pto_losses,
                            s.pto_borrowed_rtt,
                            s.probes_sent,
                            s.probes_unanswered,
                            s.probes_deferred,
                            s.ev_ecn_swaps,
                            s.qp_errors,
                            s.ack_ev_changes,
                            s.reverse_probes,
                            s.reverse_probes_unanswered};
    ex->all_sum(v);
    s.qp_errors = v[21];
    s.ack_ev_changes = v[22];
    s.reverse_probes = v[23];
    s.reverse_probes_unanswered = v[24];
    s.peer_port_changes = v[14];
    s.pto_losses = v[15];
    s.pto_borrowed_rtt = v[16];
    s.probes_sent = v[17];
    s.probes_unanswered = v[18];
    s.probes_deferred = v[19];
    s.ev_ecn_swaps = v[20];
    s.ev_swaps = v[10];
    s.qps = v[11];
    s.qp_bytes = v[12];
    s.qp_path_bytes = v[13];
    s.events = v[0];
    s.data_packets = v[1];
    s.retransmits = v[2];
    s.drops = v[3];
    s.fault_drops = v[4];
    s.trims = v[5];
    s.ecn_marks = v[6];
    s.pfc_pauses = v[7];
    s.ev_state_changes = v[8];
    s.timeouts = v[9];
  }
  merged_stats = s;
  merged = true;
}

// ---------------------------------------------------------------------------------------
// Public API.

Simulation::Simulation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulation::~Simulation() = default;

Result<std::unique_ptr<Simulation>> Simulation::create(const SimConfig& cfg,
                                                       RankExchange* exchange) {
  const TopologyConfig& t = cfg.topo;
  if (t.hosts < 2 || t.planes == 0 || t.planes > 32 || t.radix < 2 || t.link_bps == 0 ||
      cfg.transport.mtu < 64 || cfg.transport.mtu > 9000 || cfg.transport.ack_every == 0 ||
      cfg.transport.qps_per_flow == 0 || cfg.transport.qps_per_flow > 256) {
    return fail(Error::kInvalidArgument);
  }
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->ex = exchange;
  impl->blocks = cfg.block_partitions || exchange != nullptr;
  impl->cfg.block_partitions = impl->blocks;
  if (cfg.transport.kind == TransportKind::kRoce) {
    // RoCEv2 as deployed: ECMP paths, and switches that drop (or pause, with PFC) rather than
    // trim: a RoCE NIC cannot make use of a trimmed packet.
    impl->cfg.transport.path_mode = PathMode::kEcmp;
    impl->cfg.sw.trimming = false;
  }
  using Lh = SwitchConfig::EcnLastHop;
  if (impl->cfg.sw.ecn_last_hop == Lh::kAuto)
    impl->cfg.sw.ecn_last_hop = cfg.transport.kind == TransportKind::kRoce ? Lh::kOn : Lh::kOff;
  impl->ecn_last_hop = impl->cfg.sw.ecn_last_hop == Lh::kOn;
  if (auto s = impl->build(); !s) return fail(s.error());
  return std::unique_ptr<Simulation>(new Simulation(std::move(impl)));
}

const SimConfig& Simulation::config() const {
  return impl_->cfg;
}
uint32_t Simulation::num_hosts() const {
  return static_cast<uint32_t>(impl_->hosts.size());
}
uint32_t Simulation::num_leaves() const {
  return impl_->L;
}
uint32_t Simulation::num_spines() const {
  return impl_->fat_tree ? impl_->cores : impl_->S;
}
uint32_t Simulation::leaf_of(HostId h) const {
  return impl_->leaf_of(h);
}
uint32_t Simulation::num_pods() const {
  return impl_->pods;
}
uint32_t Simulation::pod_width() const {
  return impl_->half;
}
uint32_t Simulation::num_cores() const {
  return impl_->cores;
}
uint32_t Simulation::num_superpods() const {
  return impl_->superpods;
}
uint32_t Simulation::num_fat_tree_spines() const {
  return impl_->ft_spines;
}
uint32_t Simulation::switch_hops(HostId a, HostId b) const {
  const Impl& m = *impl_;
  const uint32_t la = m.leaf_of(a), lb = m.leaf_of(b);
  if (la == lb) return 1;
  if (!m.fat_tree) return 3;
  if (la / m.half == lb / m.half) return 3;
  if (m.ft_tiers == 3 || la / (m.half * m.half) == lb / (m.half * m.half)) return 5;
  return 7;
}

std::string Simulation::fabric_description() const {
  const Impl& m = *impl_;
  auto plural = [](uint32_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  if (m.fat_tree && m.ft_tiers == 4)
    return "4-tier fat tree k=" + std::to_string(m.cfg.topo.radix) + ": " +
           plural(m.superpods, "superpod") + " x (" + plural(m.half, "pod") + " x (" +
           std::to_string(m.half) + " leaves + " + std::to_string(m.half) + " aggs) + " +
           std::to_string(m.half * m.half) + " spines) + " + std::to_string(m.cores) + " cores";
  if (m.fat_tree)
    return "3-tier fat tree k=" + std::to_string(m.cfg.topo.radix) + ": " + plural(m.pods, "pod") +
           " x (" + std::to_string(m.half) + " leaves + " + std::to_string(m.half) + " aggs) + " +
           std::to_string(m.cores) + " cores";
  return plural(m.P, "plane") + " x (" + std::to_string(m.L) + " leaves + " + std::to_string(m.S) +
         " spines)";
}

std::string Simulation::check_link(const LinkRef& l) const {
  const Impl& m = *impl_;
  const std::string hosts = std::to_string(m.hosts.size());
  if (m.fat_tree) {
    const std::string pods = std::to_string(m.pods), half = std::to_string(m.half);
    switch (l.kind) {
      case LinkRef::kHostLeaf:
        if (l.plane != 0) return "a fat tree has one plane: name host links \"host5\"";
        if (l.a >= m.hosts.size())
          return "host " + std::to_string(l.a) + " does not exist (" + hosts + " hosts)";
        return {};
      case LinkRef::kLeafSpine:
        return m.ft_tiers == 4 ? "the fabric is a four-tier fat tree: name links like "
                                 "\"pod1/leaf0-agg2\", \"pod1/agg2-spine9\", "
                                 "\"spine9-core37\" or \"host5\""
                               : "the fabric is a fat tree: name links like \"pod1/leaf0-agg2\", "
                                 "\"pod1/agg2-core9\" or \"host5\"";
      case LinkRef::kAggSpine:
      case LinkRef::kSpineCore: {
        if (m.ft_tiers != 4)
          return "the fabric is a three-tier fat tree (no spines): name links like "
                 "\"pod1/agg2-core9\"";
        const uint32_t sq = m.half * m.half;
        const std::string spines = std::to_string(m.ft_spines);
        if (l.kind == LinkRef::kAggSpine) {
          if (l.pod >= m.pods)
            return "pod " + std::to_string(l.pod) + " does not exist (the fabric has " + pods +
                   " pods: pod0..pod" + std::to_string(m.pods - 1) + ")";
          if (l.a >= m.half) return "agg indices within a pod are 0.." + std::to_string(m.half - 1);
          const uint32_t first = (l.pod / m.half) * sq + l.a * m.half;
          if (l.b < first || l.b >= first + m.half)
            return "agg " + std::to_string(l.a) + " of pod " + std::to_string(l.pod) +
                   " is wired to spines " + std::to_string(first) + ".." +
                   std::to_string(first + m.half - 1) + " (superpod " +
                   std::to_string(l.pod / m.half) + ", local spine s to agg s / " + half + ")";
          return {};
        }
        if (l.a >= m.ft_spines)
          return "spine " + std::to_string(l.a) + " does not exist (" + spines + " spines)";
        const uint32_t first = (l.a % sq) * m.half;
        if (l.b < first || l.b >= first + m.half)
          return "spine " + std::to_string(l.a) + " is wired to cores " + std::to_string(first) +
                 ".." + std::to_string(first + m.half - 1) + " (core c to local spine c / " + half +
                 " of every superpod)";
        return {};
      }
      case LinkRef::kLeafAgg:
      case LinkRef::kAggCore:
        if (l.kind == LinkRef::kAggCore && m.ft_tiers == 4)
          return "the fabric is a four-tier fat tree: aggs connect to spines "
                 "(\"pod1/agg2-spine9\"), spines to cores (\"spine9-core37\")";
        if (l.pod >= m.pods)
          return "pod " + std::to_string(l.pod) + " does not exist (the fabric has " + pods +
                 " pods: pod0..pod" + std::to_string(m.pods - 1) + ")";
        if (l.a >= m.half || (l.kind == LinkRef::kLeafAgg && l.b >= m.half))
          return std::string(l.kind == LinkRef::kLeafAgg ? "leaf and agg" : "agg") +
                 " indices within a pod are 0.." + std::to_string(m.half - 1);
        if (l.kind == LinkRef::kAggCore && (l.b >= m.cores || l.b / m.half != l.a))
          return "agg " + std::to_string(l.a) + " of a pod is wired to cores " +
                 std::to_string(l.a * m.half) + ".." + std::to_string((l.a + 1) * m.half - 1) +
                 " (core c to agg c / " + half + " of every pod)";
        return {};
    }
    return "unknown link";
  }
  if (l.plane >= m.P)
    return "plane " + std::to_string(l.plane) + " does not exist (the fabric has " +
           std::to_string(m.P) + " planes: p0..p" + std::to_string(m.P - 1) + ")";
  switch (l.kind) {
    case LinkRef::kHostLeaf:
      if (l.a >= m.hosts.size())
        return "host " + std::to_string(l.a) + " does not exist (" + hosts + " hosts)";
      return {};
    case LinkRef::kLeafSpine:
      if (l.a >= m.L || l.b >= m.S)
        return "no such link: the fabric has leaves 0.." + std::to_string(m.L - 1) +
               " and spines 0.." + std::to_string(m.S - 1) + " per plane";
      return {};
    default:
      return "the fabric is a two-tier Clos: name links like \"p0/leaf3-spine7\" or "
             "\"p1/host5\"";
  }
}

std::string Simulation::check_switch(const SwitchRef& s) const {
  const Impl& m = *impl_;
  if (m.fat_tree) {
    switch (s.kind) {
      case SwitchRef::kPodLeaf:
      case SwitchRef::kAgg:
        if (s.pod >= m.pods)
          return "pod " + std::to_string(s.pod) + " does not exist (the fabric has " +
                 std::to_string(m.pods) + " pods: pod0..pod" + std::to_string(m.pods - 1) + ")";
        if (s.index >= m.half)
          return std::string(s.kind == SwitchRef::kAgg ? "agg " : "leaf ") +
                 std::to_string(s.index) + " does not exist (" + std::to_string(m.half) +
                 " per pod)";
        return {};
      case SwitchRef::kCore:
        if (s.index >= m.cores)
          return "core " + std::to_string(s.index) + " does not exist (" + std::to_string(m.cores) +
                 " cores)";
        return {};
      case SwitchRef::kFtSpine:
        if (m.ft_tiers != 4) return "the fabric is a three-tier fat tree: it has no spines";
        if (s.index >= m.ft_spines)
          return "spine " + std::to_string(s.index) + " does not exist (" +
                 std::to_string(m.ft_spines) + " spines)";
        return {};
      default:
        return "the fabric is a fat tree: name switches like \"pod1/leaf0\", \"pod1/agg2\" or "
               "\"core9\"";
    }
  }
  if (s.kind != SwitchRef::kLeaf && s.kind != SwitchRef::kSpine)
    return "the fabric is a two-tier Clos: name switches like \"p0/spine2\" or \"p1/leaf5\"";
  if (s.plane >= m.P)
    return "plane " + std::to_string(s.plane) + " does not exist (the fabric has " +
           std::to_string(m.P) + " planes: p0..p" + std::to_string(m.P - 1) + ")";
  const uint32_t n = s.kind == SwitchRef::kLeaf ? m.L : m.S;
  if (s.index >= n)
    return (s.kind == SwitchRef::kLeaf ? "leaf " : "spine ") + std::to_string(s.index) +
           " does not exist (" + std::to_string(n) + " per plane)";
  return {};
}

// The ideal FCT: the flow alone on an idle fabric, a lower bound no transport can beat. The
// flow's bytes are split into parts as flow_start splits them (RoCE: a QP per plane). Its data
// packets (BTH, RETH, data extension, ImmDt for WRITE_IMM, ICRC; IPv6, UDP, Ethernet) leave
// the NIC at the full rate of the planes they may use (MRC sprays over all of them, a RoCE
// part stays on its plane), though no faster than one packet on one link; the last one then
// crosses the pair's own shortest path, each further link serializing it again (store and
// forward); the requester completes when a header-sized ACK is back over as many links. The
// smallest data packet stands for the last one, so that the bound holds for every flow size.
// A flow alone that its congestion window does not hold back finishes exactly at the ideal
// (Simulation.ideal_fct__is_the_fct_of_the_flow_alone_on_the_fabric).
Time Simulation::Impl::ideal_fct(const FlowSpec& spec) const {
  const TopologyConfig& t = cfg.topo;
  const uint64_t mtu = cfg.transport.mtu;
  const uint64_t per_packet = wire::kBthBytes + wire::kRethBytes + wire::kDataExtBytes +
                              (spec.with_imm ? wire::kImmDtBytes : 0) + wire::kIcrcBytes +
                              kIpUdpBytes + kEthernetOverhead;
  const uint64_t ack = wire::kBthBytes + wire::kAethBytes + wire::kSackExtBytes + wire::kIcrcBytes +
                       kIpUdpBytes + kEthernetOverhead;
  const uint32_t links = pair_links(spec.src, spec.dst);
  const Time ack_path = links * t.link_delay + (links - 1) * t.switch_latency +
                        links * serialization(ack, t.link_bps);
  // A lane: the NIC ports a set of parts shares (RoCE: one plane each; MRC: one over all).
  struct Lane {
    uint64_t wire = 0, largest = 0, smallest = UINT64_MAX;
  };
  const bool roce = cfg.transport.kind == TransportKind::kRoce;
  const uint32_t per_qp = roce ? P : 1;
  const uint32_t parts = per_qp * cfg.transport.qps_per_flow;
  std::vector<Lane> lanes(roce ? P : 1);
  for (uint32_t part = 0; part < parts; ++part) {
    const uint64_t bytes = spec.bytes / parts + (part < spec.bytes % parts ? 1 : 0);
    const uint64_t pkts = std::max<uint64_t>(1, (bytes + mtu - 1) / mtu);
    // Payloads are padded to 4 bytes (BTH pad count).
    const auto padded = [](uint64_t payload) { return (payload + 3) / 4 * 4; };
    const uint64_t full = padded(mtu) + per_packet;
    const uint64_t last = padded(bytes - (pkts - 1) * mtu) + per_packet;
    Lane& lane = lanes[roce ? part % P : 0];
    lane.wire += (pkts - 1) * full + last;
    lane.largest = std::max(lane.largest, pkts > 1 ? full : last);
    lane.smallest = std::min(lane.smallest, last);
  }
  const uint64_t lane_bps = roce ? t.link_bps : t.link_bps * P;
  Time ideal = 0;
  for (const Lane& lane : lanes) {
    if (lane.wire == 0) continue;
    const Time nic =
        std::max(serialization(lane.wire, lane_bps), serialization(lane.largest, t.link_bps));
    const Time data_path = links * t.link_delay + (links - 1) * t.switch_latency +
                           (links - 1) * serialization(lane.smallest, t.link_bps);
    ideal = std::max(ideal, nic + data_path + ack_path);
  }
  return ideal;
}

Result<FlowId> Simulation::add_flow(const FlowSpec& spec) {
  Impl& m = *impl_;
  if (spec.src >= m.hosts.size() || spec.dst >= m.hosts.size() || spec.src == spec.dst ||
      spec.bytes > kMaxFlowBytes || spec.path_set > m.path_sets.size()) {
    return fail(Error::kInvalidArgument);
  }
  FlowResult r;
  r.id = static_cast<FlowId>(m.num_flows);
  r.spec = spec;
  r.spec.start = std::max(spec.start, m.now);
  r.end = kNever;
  r.ideal_fct = m.ideal_fct(spec);
  ++m.num_flows;
  if (m.sparse_flows()) {
    // Over several ranks: the record only where the sender is.
    if (!m.owned[m.host_partition(spec.src)]) {
      m.flow_slot.push_back(Impl::kNoSlot);
    } else {
      m.flow_slot.push_back(static_cast<uint32_t>(m.flows.size()));
      m.flows.push_back(r);
      m.flow_state.emplace_back();
    }
  } else {
    m.flows.push_back(r);
    m.flow_state.emplace_back();
  }
  if (m.blocks) {
    m.schedule_global(m.host_partition(spec.src), r.spec.start, kFlowStart, r.id);
    return r.id;
  }
  const uint32_t saved = m.cur_partition;
  m.cur_partition = 0;
  m.schedule(0, r.spec.start, kFlowStart, r.id);
  m.cur_partition = saved;
  return r.id;
}

Result<uint16_t> Simulation::add_path_set(std::vector<PathRef> paths) {
  Impl& m = *impl_;
  const bool mrc_ecmp =
      m.cfg.transport.kind != TransportKind::kRoce && m.cfg.transport.path_mode == PathMode::kEcmp;
  if (paths.empty() || paths.size() > 4096 || m.fat_tree || mrc_ecmp ||
      m.path_sets.size() >= 0xFFFF)
    return fail(Error::kInvalidArgument);
  for (const PathRef& r : paths)
    if (r.plane >= m.P || r.spine >= m.S) return fail(Error::kInvalidArgument);
  m.path_sets.push_back(std::move(paths));
  return static_cast<uint16_t>(m.path_sets.size());
}

void Simulation::on_flow_complete(std::function<void(const FlowResult&)> cb) {
  impl_->flow_cbs.push_back(std::move(cb));
}
void Simulation::on_flow_received(std::function<void(const FlowResult&)> cb) {
  impl_->received_cbs.push_back(std::move(cb));
}

namespace {
FaultAction link_action(FaultAction::Kind k, LinkRef l, bool flag, double value = 0,
                        uint64_t bps = 0) {
  FaultAction a;
  a.kind = k;
  a.link = l;
  a.flag = flag;
  a.value = value;
  a.bps = bps;
  return a;
}
}  // namespace

void Simulation::link_down(LinkRef l, Time at) {
  impl_->add_fault(link_action(FaultAction::kLinkState, l, false), at);
}
void Simulation::link_up(LinkRef l, Time at) {
  impl_->add_fault(link_action(FaultAction::kLinkState, l, true), at);
}

// Every link of a switch, as LinkRefs.
static std::vector<LinkRef> switch_links(const Simulation& sim, SwitchRef s) {
  std::vector<LinkRef> v;
  if (const uint32_t half = sim.pod_width(); half > 0) {
    const bool four_tier = sim.num_superpods() > 0;
    const uint32_t sq = half * half;
    switch (s.kind) {
      case SwitchRef::kPodLeaf:
        for (uint32_t i = 0; i < half; ++i) {
          const uint32_t h = (s.pod * half + s.index) * half + i;
          if (h < sim.num_hosts()) v.push_back(LinkRef{LinkRef::kHostLeaf, 0, h, 0, 0});
        }
        for (uint32_t a = 0; a < half; ++a)
          v.push_back(LinkRef{LinkRef::kLeafAgg, 0, s.index, a, s.pod});
        break;
      case SwitchRef::kAgg:
        for (uint32_t i = 0; i < half; ++i) {
          v.push_back(LinkRef{LinkRef::kLeafAgg, 0, i, s.index, s.pod});
          if (four_tier) {
            const uint32_t spine = (s.pod / half) * sq + s.index * half + i;
            v.push_back(LinkRef{LinkRef::kAggSpine, 0, s.index, spine, s.pod});
          } else {
            v.push_back(LinkRef{LinkRef::kAggCore, 0, s.index, s.index * half + i, s.pod});
          }
        }
        break;
      case SwitchRef::kFtSpine: {
        const uint32_t superpod = s.index / sq, local = s.index % sq;
        for (uint32_t i = 0; i < half; ++i) {
          v.push_back(LinkRef{LinkRef::kAggSpine, 0, local / half, s.index, superpod * half + i});
          v.push_back(LinkRef{LinkRef::kSpineCore, 0, s.index, local * half + i, 0});
        }
        break;
      }
      case SwitchRef::kCore:
        if (four_tier) {
          for (uint32_t q = 0; q < sim.num_superpods(); ++q)
            v.push_back(LinkRef{LinkRef::kSpineCore, 0, q * sq + s.index / half, s.index, 0});
          break;
        }
        for (uint32_t q = 0; q < sim.num_pods(); ++q)
          v.push_back(LinkRef{LinkRef::kAggCore, 0, s.index / half, s.index, q});
        break;
      default:
        break;  // not a fat-tree switch (check_switch says so)
    }
    return v;
  }
  const uint32_t H = sim.config().topo.hosts_per_leaf ? sim.config().topo.hosts_per_leaf
                                                      : sim.config().topo.radix / 2;
  const uint32_t U = sim.config().topo.radix - H;
  if (s.kind == SwitchRef::kLeaf) {
    for (uint32_t i = 0; i < H; ++i) {
      const uint32_t h = s.index * H + i;
      if (h < sim.num_hosts()) v.push_back(LinkRef{LinkRef::kHostLeaf, s.plane, h, 0});
    }
    for (uint32_t u = 0; u < U; ++u)
      v.push_back(LinkRef{LinkRef::kLeafSpine, s.plane, s.index, u});
  } else {
    const uint32_t S = sim.num_spines();
    for (uint32_t l = 0; l < sim.num_leaves(); ++l) {
      for (uint32_t u = s.index; u < U; u += S)
        v.push_back(LinkRef{LinkRef::kLeafSpine, s.plane, l, u});
    }
  }
  return v;
}

void Simulation::switch_reboot(SwitchRef s, Time at, Time duration) {
  for (const LinkRef& l : switch_links(*this, s)) {
    link_down(l, at);
    link_up(l, at + duration);
  }
}
void Simulation::blackhole(LinkRef l, Time from, Time until) {
  impl_->add_fault(link_action(FaultAction::kBlackhole, l, true), from);
  if (until != kNever) impl_->add_fault(link_action(FaultAction::kBlackhole, l, false), until);
}
void Simulation::blackhole_switch(SwitchRef s, Time from, Time until) {
  for (const LinkRef& l : switch_links(*this, s))
    blackhole(l, from, until);
}
void Simulation::gray_loss(LinkRef l, double p, Time from, Time until) {
  impl_->add_fault(link_action(FaultAction::kLoss, l, true, p), from);
  if (until != kNever) impl_->add_fault(link_action(FaultAction::kLoss, l, true, 0), until);
}
void Simulation::degrade(LinkRef l, uint64_t bps, Time from, Time until) {
  impl_->add_fault(link_action(FaultAction::kRate, l, true, 0, bps), from);
  if (until != kNever) {
    impl_->add_fault(link_action(FaultAction::kRate, l, true, 0, impl_->cfg.topo.link_bps), until);
  }
}
void Simulation::flap(LinkRef l, Time start, Time period, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    link_down(l, start + 2 * i * period);
    link_up(l, start + (2 * i + 1) * period);
  }
}

Time Simulation::run(Time until) {
  const Time t = impl_->run(until);
  if (!impl_->blocks) impl_->flush_throughput();  // the blocks layout's run_blocks did
  return t;
}
Time Simulation::now() const {
  return impl_->now;
}
void Simulation::on_progress(std::function<void(Time, uint64_t)> cb) {
  impl_->progress_cb = std::move(cb);
}
const std::vector<FlowResult>& Simulation::flows() const {
  return impl_->flows;
}

SimStats Simulation::stats() const {
  if (impl_->merged) {
    SimStats s = impl_->merged_stats;
    if (!impl_->sparse_flows())  // else counted over every rank by merge_results
      for (const FlowResult& f : impl_->flows)
        s.qp_errors += (f.end != kNever && !f.ok) ? 1 : 0;
    impl_->add_ev_counts(s);
    return s;
  }
  SimStats s = impl_->counters;
  s.events = impl_->events;
  impl_->add_engine_stats(s);
  for (const FlowResult& f : impl_->flows)
    s.qp_errors += (f.end != kNever && !f.ok) ? 1 : 0;
  impl_->add_ev_counts(s);
  return s;
}

// The engines' counters and QP memory of this rank's hosts (another rank's have no engine).
void Simulation::Impl::add_engine_stats(SimStats& s) const {
  for (const Host& h : hosts) {
    if (!h.engine) continue;
    const EngineCounters& c = h.engine->counters();
    s.data_packets += c.data_sent;
    s.retransmits += c.retransmits;
    s.ev_state_changes += c.ev_state_changes;
    s.ev_swaps += c.ev_swaps;
    s.ev_ecn_swaps += c.ev_ecn_swaps;
    s.peer_port_changes += c.peer_port_changes;
    s.timeouts += c.timeouts;
    s.pto_losses += c.losses_pto;
    s.pto_borrowed_rtt += c.losses_pto_borrowed_rtt;
    s.probes_sent += c.probes_sent;
    s.probes_unanswered += c.probes_unanswered;
    s.probes_deferred += c.probes_deferred;
    s.ack_ev_changes += c.ack_ev_changes;
    s.reverse_probes += c.reverse_probes_sent;
    s.reverse_probes_unanswered += c.reverse_probes_unanswered;
    for (const auto& [key, pair] : h.qps) {
      if (auto m = h.engine->qp_memory(pair.local_qpn)) {
        ++s.qps;
        s.qp_bytes += m->total();
        s.qp_path_bytes += m->paths;
      }
    }
  }
}

void Simulation::Impl::add_ev_counts(SimStats& s) const {
  if (!fat_tree && cfg.transport.kind != TransportKind::kRoce) {
    s.evs_active_per_plane = active_evs_per_plane();
    s.evs_backup_per_plane = backup_evs_per_plane();
  }
}

const std::vector<LinkSample>& Simulation::link_samples() const {
  if (impl_->merged) return impl_->merged_samples;
  return impl_->samples;
}
const std::vector<ThroughputSample>& Simulation::throughput_samples() const {
  return impl_->throughput;
}

void Simulation::path_loss(HostId src, HostId dst, PathRef path, double probability, Time from,
                           Time until) {
  Impl& m = *impl_;
  FaultAction a;
  a.kind = FaultAction::kPathLoss;
  a.link = LinkRef{LinkRef::kLeafSpine, path.plane, 0, 0};  // scheduled in the plane's partition
  a.bps = m.path_losses.size();
  m.path_losses.push_back(Impl::PathLoss{src, dst, path, 0});
  a.value = probability;
  m.add_fault(a, from);
  if (until != kNever) {
    a.value = 0;
    m.add_fault(a, until);
  }
}

std::vector<std::string> Simulation::link_names() const {
  const Impl& m = *impl_;
  std::vector<std::string> names;
  for (const Switch& s : m.switches) {
    for (const Port& port : s.ports) {
      if (port.link_id == UINT32_MAX) continue;
      if (names.size() <= port.link_id) names.resize(port.link_id + 1);
      if (port.peer_is_host) {
        // The last hop: "p0/leaf3->host5", fat trees "pod1/leaf0->host5".
        std::string n = m.fat_tree ? "pod" : "p";
        n += std::to_string(m.fat_tree ? s.index / m.half : s.plane);
        n += "/leaf";
        n += std::to_string(m.fat_tree ? s.index % m.half : s.index);
        n += "->host";
        n += std::to_string(port.peer);
        names[port.link_id] = std::move(n);
        continue;
      }
      const Switch& peer = m.switches[port.peer];
      if (m.fat_tree) {
        // Leaves and aggs by pod and index within it, cores by number.
        auto name = [&](const Switch& x) {
          if (x.kind == Switch::kCore) return "core" + std::to_string(x.index);
          if (x.kind == Switch::kSpine) return "spine" + std::to_string(x.index);
          return "pod" + std::to_string(x.index / m.half) +
                 (x.kind == Switch::kLeaf ? "/leaf" : "/agg") + std::to_string(x.index % m.half);
        };
        std::string n = name(s) + "->";
        const std::string p = name(peer);
        // Within a pod the peer's pod is implied: "pod1/leaf0->agg2".
        const bool in_pod = (s.kind == Switch::kLeaf || s.kind == Switch::kAgg) &&
                            (peer.kind == Switch::kLeaf || peer.kind == Switch::kAgg);
        n += in_pod ? p.substr(p.find('/') + 1) : p;
        names[port.link_id] = std::move(n);
        continue;
      }
      std::string n = "p";
      n += std::to_string(s.plane);
      n += s.kind == Switch::kLeaf ? "/leaf" : "/spine";
      n += std::to_string(s.index);
      n += peer.kind == Switch::kLeaf ? "->leaf" : "->spine";
      n += std::to_string(peer.index);
      names[port.link_id] = std::move(n);
    }
  }
  return names;
}

const std::vector<EvEvent>& Simulation::ev_events() const {
  if (impl_->merged) return impl_->merged_ev_events;
  return impl_->ev_events;
}

Result<uint64_t> Simulation::check_usid_forwarding() const {
  const Impl& m = *impl_;
  if (m.cfg.transport.path_mode != PathMode::kSrv6) return fail(Error::kInvalidArgument);
  if (m.fat_tree) return m.check_fat_tree_usid();
  uint64_t checked = 0;
  for (uint32_t plane = 0; plane < m.P; ++plane) {
    for (HostId src = 0; src < m.hosts.size(); ++src) {
      for (HostId dst = 0; dst < m.hosts.size(); ++dst) {
        if (src == dst) continue;
        const bool same_leaf = m.leaf_of(src) == m.leaf_of(dst);
        for (uint32_t spine = 0; spine < (same_leaf ? 1 : m.S); ++spine) {
          // The carrier a QP's path would hold (as build_paths writes it).
          std::vector<uint16_t> usids;
          if (!same_leaf) usids.push_back(static_cast<uint16_t>(kSpineUsidBase + spine));
          usids.push_back(static_cast<uint16_t>(kLeafUsidBase + m.leaf_of(dst)));
          usids.push_back(static_cast<uint16_t>(kHostUsidBase + dst % m.H));
          wire::Ipv6Addr da = wire::usid_carrier(kLocatorBlock, usids);
          SimPacket p;
          p.src = src;
          p.dst = dst;
          p.dst_leaf = m.leaf_of(dst);
          p.plane = static_cast<uint8_t>(plane);
          p.spine = same_leaf ? kNoSpine : static_cast<uint16_t>(spine);
          p.entropy = mix32(src * 31 + dst);
          // Walk both from the source's leaf until a host port is reached.
          uint32_t sw = m.leaf_index(plane, m.leaf_of(src));
          for (int hop = 0; hop < 4; ++hop) {
            const Switch& x = m.switches[sw];
            const uint16_t mine = static_cast<uint16_t>(
                x.kind == Switch::kLeaf ? kLeafUsidBase + x.index : kSpineUsidBase + x.index);
            if (wire::usid_active(da) == mine) da = wire::usid_shift(da);  // End (next-csid)
            const uint16_t active = wire::usid_active(da);
            uint32_t usid_port;
            if (x.kind == Switch::kLeaf && active >= kHostUsidBase && active < kSpineUsidBase) {
              usid_port = active - kHostUsidBase;  // to the host
            } else if (x.kind == Switch::kLeaf && active >= kSpineUsidBase) {
              usid_port = m.H + (active - kSpineUsidBase);  // up to the spine
            } else if (x.kind == Switch::kSpine && active >= kLeafUsidBase &&
                       active < kHostUsidBase) {
              usid_port = (active - kLeafUsidBase) * m.k_parallel;  // down to the leaf
            } else {
              return fail(Error::kBadExtension);  // no static route for this uSID
            }
            uint32_t fwd_port = const_cast<Impl&>(m).forward(x, p);
            if (m.k_parallel > 1) {
              // Parallel links are an ECMP choice among equal uSID routes: compare the group.
              if (x.kind == Switch::kSpine) fwd_port -= fwd_port % m.k_parallel;
              if (x.kind == Switch::kLeaf && fwd_port >= m.H)
                fwd_port = m.H + (fwd_port - m.H) % m.S;
            }
            if (usid_port != fwd_port) return fail(Error::kBadExtension);
            const Port& out = x.ports[fwd_port];
            if (out.peer_is_host) {
              if (out.peer != dst) return fail(Error::kBadExtension);
              break;
            }
            sw = out.peer;
          }
          ++checked;
        }
      }
    }
  }
  return checked;
}

// Every distinct path of every ordered pair of a fat tree, walked with hop-by-hop uSID
// processing and with the precomputed forwarding the simulator uses. Each switch: if the
// active uSID is its own, End: with more uSIDs in the carrier, shift (NEXT-C-SID, RFC 9800);
// at the end of the carrier, take the SRH's next segment into the destination address
// (segments_left 1 -> 0, RFC 8754 section 4.3.1.1). Then a static route for the active uSID.
// Four-tier routes between superpods are the only ones with a second carrier (7 uSIDs): the
// destination leaf ends the first one and routes on the host uSID of the segment.
Result<uint64_t> Simulation::Impl::check_fat_tree_usid() const {
  uint64_t checked = 0;
  const uint32_t n_paths = ft_num_paths(), sq = half * half;
  const bool four = ft_tiers == 4;
  // uSID ranges per tier (four tiers split the upper half of the aggs' range with the spines).
  const uint16_t agg_end = four ? kFtSpineUsidBase : kCoreUsidBase;
  auto is_host = [](uint16_t u) { return u >= kHostUsidBase && u < kAggUsidBase; };
  auto is_leaf = [](uint16_t u) { return u >= kLeafUsidBase && u < kHostUsidBase; };
  auto is_agg = [&](uint16_t u) { return u >= kAggUsidBase && u < agg_end; };
  auto is_spine = [&](uint16_t u) { return four && u >= kFtSpineUsidBase && u < kCoreUsidBase; };
  auto is_core = [](uint16_t u) { return u >= kCoreUsidBase; };
  for (HostId src = 0; src < hosts.size(); ++src) {
    for (HostId dst = 0; dst < hosts.size(); ++dst) {
      if (src == dst) continue;
      const uint32_t sl = leaf_of(src), dl = leaf_of(dst);
      // Distinct paths: one per core between pods (four tiers: between superpods), one per
      // spine between pods of a superpod, one per agg within a pod, one in a leaf.
      const uint32_t n = sl == dl                     ? 1
                         : sl / half == dl / half     ? half
                         : four && sl / sq == dl / sq ? sq
                                                      : n_paths;
      const uint32_t step = n_paths / n;
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t path = i * step;
        const std::vector<uint16_t> usids = ft_usids(src, dst, path);
        const auto carrier = ev::srv6_carrier(kLocatorBlock, usids);
        if (!carrier) return fail(Error::kBadExtension);  // more uSIDs than DA + SRH hold
        // The headers as the sender writes them (ev::apply_to_envelope): the first carrier is
        // the destination address, a second one the SRH's remaining segment.
        wire::Ipv6Addr da{}, segment{};
        std::copy_n(carrier->begin(), 16, da.begin());
        std::copy_n(carrier->begin() + 16, 16, segment.begin());
        bool segment_left = usids.size() > static_cast<size_t>(ev::kUsidsPerCarrier);
        SimPacket p;
        p.src = src;
        p.dst = dst;
        p.dst_leaf = dl;
        p.spine = ft_path(*carrier);
        p.entropy = mix32(src * 31 + dst);
        uint32_t sw = sl;
        bool arrived = false;
        for (uint32_t hop = 0; hop < 2 * ft_tiers - 1 && !arrived; ++hop) {
          const Switch& x = switches[sw];
          const uint16_t mine =
              static_cast<uint16_t>(x.kind == Switch::kLeaf    ? kLeafUsidBase + x.index
                                    : x.kind == Switch::kAgg   ? kAggUsidBase + x.index
                                    : x.kind == Switch::kSpine ? kFtSpineUsidBase + x.index
                                                               : kCoreUsidBase + x.index);
          if (wire::usid_active(da) == mine) {
            if (!wire::usid_is_end_of_carrier(da)) {
              da = wire::usid_shift(da);  // End with NEXT-C-SID
            } else if (segment_left) {
              da = segment;  // End with SRH: segments_left 1 -> 0, DA = segment list[0]
              segment_left = false;
            } else {
              return fail(Error::kBadExtension);  // a switch is not a route's destination
            }
          }
          const uint16_t active = wire::usid_active(da);
          const uint32_t pod = x.index / half;
          uint32_t usid_port = UINT32_MAX;  // no static route for this uSID
          if (x.kind == Switch::kLeaf) {
            if (is_host(active)) {
              usid_port = active - kHostUsidBase;
            } else if (is_agg(active) && (active - kAggUsidBase) / half == pod) {
              usid_port = half + (active - kAggUsidBase) % half;  // up to an agg of the pod
            }
          } else if (x.kind == Switch::kAgg) {
            const uint32_t a = x.index % half;
            if (is_leaf(active) && (active - kLeafUsidBase) / half == pod) {
              usid_port = (active - kLeafUsidBase) % half;  // down to a leaf of the pod
            } else if (!four && is_core(active) && (active - kCoreUsidBase) / half == a &&
                       static_cast<uint32_t>(active - kCoreUsidBase) < cores) {
              usid_port = half + (active - kCoreUsidBase) % half;  // up to a core of the group
            } else if (is_spine(active)) {
              const uint32_t spine = active - kFtSpineUsidBase;
              if (spine / sq == pod / half && (spine % sq) / half == a)
                usid_port = half + spine % half;  // up to a spine of the group
            }
          } else if (x.kind == Switch::kSpine) {
            const uint32_t local = x.index % sq;
            if (is_agg(active)) {
              const uint32_t agg = active - kAggUsidBase;  // pod * half + a
              if (agg / sq == x.index / sq && agg % half == local / half)
                usid_port = (agg / half) % half;  // down to that agg's pod
            } else if (is_core(active) && (active - kCoreUsidBase) / half == local &&
                       static_cast<uint32_t>(active - kCoreUsidBase) < cores) {
              usid_port = half + (active - kCoreUsidBase) % half;  // up to a core of the group
            }
          } else if (four && is_spine(active) &&
                     ((active - kFtSpineUsidBase) % sq) == x.index / half) {
            usid_port = (active - kFtSpineUsidBase) / sq;  // core: down to that superpod
          } else if (!four && is_agg(active) && (active - kAggUsidBase) % half == x.index / half) {
            usid_port = (active - kAggUsidBase) / half;  // core: down to that agg's pod
          }
          if (usid_port == UINT32_MAX) return fail(Error::kBadExtension);
          const uint32_t fwd_port = const_cast<Impl&>(*this).forward(x, p);
          if (usid_port != fwd_port) return fail(Error::kBadExtension);
          const Port& out = x.ports[fwd_port];
          if (out.peer_is_host) {
            if (out.peer != dst) return fail(Error::kBadExtension);
            arrived = true;
          }
          sw = out.peer;
        }
        // Arrived, with every uSID of both carriers used (the host's is the last).
        if (!arrived || segment_left) return fail(Error::kBadExtension);
        ++checked;
      }
    }
  }
  return checked;
}

Status Simulation::enable_pcap(const std::string& path, std::vector<HostId> which) {
  auto w = wire::PcapWriter::open(path);
  if (!w) return fail(w.error());
  impl_->pcap = std::make_unique<wire::PcapWriter>(std::move(*w));
  impl_->pcap_hosts.assign(impl_->hosts.size(), 0);
  for (HostId h : which) {
    if (h < impl_->hosts.size()) impl_->pcap_hosts[h] = 1;
  }
  return {};
}

}  // namespace mrc::sim
