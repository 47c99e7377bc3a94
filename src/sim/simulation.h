// The packet-level fabric simulator: multi-plane two-tier Clos fabrics, or a single-plane
// three- or four-tier fat tree (the conventional baseline), of output-queued switches, NICs
// with one port per plane, and one MRC engine (src/transport) per host.
//
// A Simulation is an ordinary object (no global state: two can run in one process). Time is
// integer picoseconds. Same configuration + seed -> identical results.
//
// Partitioning: every element belongs to a partition; elements of different partitions
// exchange packets only over links whose propagation delay is at least the lookahead (the
// link delay), and the run advances in windows of one lookahead, partition by partition.
// Two layouts: the serial default (plane k's switches in partition k + 1, hosts and NICs in
// partition 0), and blocks (src/sim/partition.h: groups of leaves with their hosts across all
// planes, spines split), which a run over several processes (MPI, RankExchange) uses: each
// rank holds a range of blocks and results do not depend on how many ranks there are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/types.h"
#include "sim/denylist.h"
#include "sim/sim_error.h"
#include "transport/engine.h"

namespace mrc::sim {

using HostId = uint32_t;
using FlowId = uint32_t;

// ---- configuration ---------------------------------------------------------------------

enum class TopologyKind : uint8_t {
  kClos2,    // multi-plane two-tier Clos: per plane, leaves and spines
  kFatTree,  // single-plane k-ary fat tree: pods of k/2 leaves + k/2 aggs, (k/2)^2 cores;
             // four tiers: superpods of k/2 pods + (k/2)^2 spines, (k/2)^3 cores
};

struct TopologyConfig {
  TopologyKind kind = TopologyKind::kClos2;
  // kFatTree: switch tiers, 3 or 4. A four-tier route needs 7 uSIDs: the destination
  // address carries 6 and one SRH segment the rest (docs/topology.md).
  uint32_t tiers = 3;
  uint32_t hosts = 64;  // GPUs (one NIC each)
  uint32_t planes = 2;  // NIC ports = independent planes
  uint32_t radix = 16;  // switch ports (every switch); kFatTree: k, even
  // kClos2: leaf ports facing hosts; the rest face spines. 0 = radix / 2 (non-blocking).
  // With oversubscription o: hosts_per_leaf = radix * o / (o + 1). kFatTree: must be 0 (k/2).
  uint32_t hosts_per_leaf = 0;
  uint32_t spines = 0;  // kClos2: spines per plane; 0 = uplinks per leaf. kFatTree: must be 0
  uint64_t link_bps = 100'000'000'000ull;  // every link (one plane port = one link)
  Time link_delay = ns(500);               // propagation per link
  Time switch_latency = 0;                 // per switch traversal
};

struct SwitchConfig {
  uint64_t queue_bytes = 0;  // per egress port; 0 = 1 BDP of the fabric
  // ECN marking on enqueue: probability 0 below kmin, rising linearly to pmax at kmax,
  // 1 above (RED-style, as in DCQCN deployments). 0 = derived from the queue.
  uint64_t ecn_kmin_bytes = 0;
  uint64_t ecn_kmax_bytes = 0;
  double ecn_pmax = 1.0;
  bool trimming = true;               // trim instead of drop above trim_threshold
  uint64_t trim_threshold_bytes = 0;  // 0 = queue_bytes
  bool pfc = false;                   // lossless (RoCE baseline): pause upstream above xoff
  uint64_t pfc_xoff_bytes = 0;        // 0 = derived
  uint64_t pfc_xon_bytes = 0;
  // ECN marking on the last hop, the leaf's egress port towards the receiving host. Paper
  // 2.1: an MRC fabric marks ECN "in the normal randomized manner, but disable[s] ECN on the
  // last hop to the receiver": ECN steers load away from congested inner queues, and incast
  // at the last hop is handled by trimming. DCQCN (RoCE) needs the last hop's marks, as
  // deployed. kAuto: off for MRC transports, on for RoCE (Simulation::create resolves it, and
  // config() reports kOn or kOff).
  enum class EcnLastHop : uint8_t { kAuto, kOn, kOff };
  EcnLastHop ecn_last_hop = EcnLastHop::kAuto;
};

enum class TransportKind : uint8_t {
  kMrc,           // adaptive spraying over SRv6 paths (EV = spine), NSCC
  kMrcOblivious,  // spraying without ECN steering (ablation)
  kRoce,          // one ECMP path per QP, go-back-N, DCQCN
};
const char* transport_name(TransportKind k);

enum class PathMode : uint8_t {
  kSrv6,  // EVs expand to uSID carriers; switches shift-and-forward, never reroute
  kEcmp,  // EVs are flow-label/UDP-port entropy; switches hash (STEV/UDP modes, RoCE)
};

struct TransportConfig {
  TransportKind kind = TransportKind::kMrc;
  PathMode path_mode = PathMode::kSrv6;  // forced to kEcmp for kRoce
  uint32_t mtu = 4096;                   // payload bytes per packet
  // Active EVs per plane of an MRC QP. 0: min(spines, 256 / planes) -- the paper's 128-256
  // EVs per QP (2.1), equal per plane, but never two EVs on one spine (a repeated SRv6 path
  // adds no diversity); fat trees: min(paths, 64). With path_mode ecmp an EV is a hash input,
  // not a path: 0 means 256 / planes and a given count is not capped by the spines.
  // docs/engine.md, "decisions".
  uint32_t evs_per_plane = 0;
  // Backup EVs per plane (paper 2.4): spines outside the active set, evenly spaced (ecmp:
  // further random entropies); a mapped-out or congested (ecn_swap_marks) active EV is
  // swapped for one of its plane's backups. kAutoBackup: ceil(active / 4), at most the
  // spines outside the active set with srv6; 0: none (a mapped-out EV is only skipped).
  static constexpr uint32_t kAutoBackup = UINT32_MAX;
  uint32_t backup_evs_per_plane = kAutoBackup;
  // Which spines a QP's EVs name (srv6 on a two-tier Clos; ECMP EVs are random hashes
  // anyway). Spread: evenly spaced over the plane's spines, rotated per pair, backups evenly
  // between them: with fewer EVs than spines the QPs of a fabric load every spine alike by
  // construction. Random: each QP draws its active and backup spines of each plane at random
  // (paper 2.1: each QP "randomly selects a subset of paths within each plane"; senders do not
  // coordinate, so the aggregate "may be slightly uneven" and ECN steering smooths it).
  enum class EvChoice : uint8_t { kSpread, kRandom } ev_choice = EvChoice::kSpread;
  // ECN-driven EV replacement (PathPolicy::ecn_swap_marks, paper 2.1, 5.2.5): an active EV
  // whose ACKs echo ECN this many times in a row is swapped for a backup of its plane. 0: off.
  uint32_t ecn_swap_marks = PathPolicy{}.ecn_swap_marks;
  // How long a NIC takes to remap a dead port's EVs to its other ports (EngineConfig::
  // port_remap_delay; paper 3). Packets it sends on the port until then are lost.
  Time port_remap_delay = 0;
  CcAlgorithm cc = CcAlgorithm::kNscc;  // kRoce uses kDcqcn unless set otherwise
  uint8_t mpr = 0;                      // 0 = derived from the BDP
  // ACK timeout exponent (1.024 us * 2^timeout). kTimeoutAuto: 8 (262 us, as OCP's examples;
  // ~30-50 base RTTs of the simulated fabrics, far above their queueing delays) for MRC, 12
  // (4.2 ms) for RoCE, whose deployed NICs and collective libraries use long timeouts
  // (docs/engine.md, "Decisions").
  static constexpr uint8_t kTimeoutAuto = 0xFF;
  uint8_t timeout = kTimeoutAuto;
  uint32_t ack_every = 4;
  Time probe_interval = us(20);
  // Probe cadence and resurrection (PathPolicy), the NIC's probe budget (EngineConfig).
  uint32_t probe_backoff_limit = PathPolicy{}.probe_backoff_limit;
  uint32_t resurrect_probes = PathPolicy{}.resurrect_probes;
  Time resurrect_window = PathPolicy{}.resurrect_window;
  uint32_t port_return_probes = PathPolicy{}.port_return_probes;
  Time trim_hold = PathPolicy{}.trim_hold;
  Time probe_budget_interval = EngineConfig{}.probe_budget_interval;
  // The reverse EV set of ACKs (EngineConfig::reverse_evs_per_plane, paper 2.4; the engine's
  // default). 0: ACKs take the reverse of their data packet's path.
  uint32_t reverse_evs_per_plane = 2;
  // A QP's first packets use the fabric's RTT (EngineConfig::fabric_rtt = the base RTT, and
  // share_rtt) for their tail-loss probe; false: the ACK timeout, as before.
  bool borrow_rtt = true;
  // An ACK whose data packet's port is busy waits for it instead of taking another port's
  // next data path (EngineConfig::ack_waits_for_port); false: any free port at once, as before.
  bool ack_waits_for_port = true;
  // Authenticated packets (docs/linux-driver.md, "Authenticated packets"): every packet carries
  // the authentication trailer (wire::kAuthTrailerBytes) on the wire. Bytes only: the simulated
  // NICs do not compute tags, and a trimmed header is taken as its trailer still matched.
  bool packet_auth = false;
  // NsccConfig::loss_keep; 0 = 1 (no cut) with trimming, max_md_jump (0.5) without.
  double loss_keep = 0;
  // NsccConfig::trim_keep: the fraction of the window a trimmed packet's resend keeps; 0 = the
  // engine's default: kHashedTrimKeep (0.8) where the switches hash MRC's EVs (path_mode ecmp,
  // two tiers: NsccConfig::hashed_paths), max_md_jump (0.5) otherwise (docs/engine.md,
  // "decisions").
  double trim_keep = 0;
  // NsccConfig::min_cwnd, bytes: the smallest NSCC window, paced below one MTU; 0 = mtu / 4.
  uint64_t nscc_min_cwnd = 0;
  // NsccConfig::disable_qa inverted: NSCC's quick adapt (UET; docs/congestion-control.md).
  bool nscc_quick_adapt = true;
  // 0 = base RTT / 16 (a few round-robin visits); path_mode ecmp: at least one round-robin
  // cycle of a port's active EVs at line rate.
  Time ecn_cooldown = 0;
  // ECMP mode: after a link dies, switches remove it from their ECMP groups after this
  // delay (models BGP convergence). kNever = never.
  Time routing_convergence = kNever;
  // QPs per flow: the flow's bytes are split evenly over this many QPs between the pair (per
  // plane for RoCE), each with its own EVs (RoCE: its own ECMP hash), as NCCL's QP scaling
  // does (NCCL_IB_QPS_PER_CONNECTION). RoCE's multi-QP baseline 1/4/8/16 (paper 5.2.7); an
  // MRC QP sprays, so MRC needs 1.
  uint32_t qps_per_flow = 1;
  // DCQCN's reaction and notification points (`[dcqcn]` in a scenario): RoCE kinds, and MRC
  // with cc = dcqcn. The line rate and MTU come from the fabric. Both timers default to 55 us,
  // as Zhu et al. evaluate DCQCN (SIGCOMM 2015, section 5), not the NICs' 300-us
  // rate-increase default, which would make the baseline look worse than a tuned deployment.
  cc::DcqcnConfig dcqcn = [] {
    cc::DcqcnConfig c;
    c.alpha_update_period = us(55);
    c.rate_increase_period = us(55);
    c.cnp_interval = us(50);
    return c;
  }();
};

struct SimConfig {
  TopologyConfig topo;
  SwitchConfig sw;
  TransportConfig transport;
  uint64_t seed = 1;
  Time sample_interval = us(10);  // link utilisation / queue time series; 0 = off
  // Switch ports schedule each packet's departure when it is enqueued (one event per packet
  // and hop) rather than event by event (a port-free event per packet). The same model;
  // results differ only in the order of simultaneous events. false: for validation.
  bool scheduled_departures = true;
  // The blocks layout (see the top of this file). It differs from the default in the order of
  // simultaneous events and in two rules a distributed run needs: a flow's reception and
  // completion reach the workload (on_flow_received, on_flow_complete) at the end of the
  // lookahead window they fall in, and a flow the callback adds starts no earlier than one
  // lookahead after the reception or completion; a receiver's QP is created one lookahead
  // after the flow starts. Needs link_delay > 0. mrc-sim runs it by default.
  bool block_partitions = false;
  // Also sample the last hop's queues (leaf -> host ports, where incast queues build) into
  // link_samples(), named "p0/leaf3->host5", when the fabric has at most 65,536 of them.
  bool sample_host_links = true;
  // Throughput time series (throughput_samples()): bytes placed at the receivers per host
  // and per (src, dst) pair over each interval; 0 = off.
  Time throughput_interval = 0;
  // Clustermapper's denylist of lossy NIC-T0 links (sim/denylist.h; interval 0 = none).
  DenylistConfig denylist;
};

// ---- naming elements -------------------------------------------------------------------

// A link is named by its upper end: host h's port to its leaf in plane p, or leaf l's uplink
// to spine s in plane p. Both directions of a link fail together. Fat trees (one plane):
// kHostLeaf as above (plane 0), kLeafAgg (pod, local leaf a, local agg b) and kAggCore
// (pod, local agg a, core b; core b is wired to agg b / (k/2) of every pod). Four-tier fat
// trees (pods numbered globally, superpod = pod / (k/2); spines numbered globally, superpod =
// spine / (k/2)^2): kLeafAgg as above, kAggSpine (pod, local agg a, spine b; spine b is wired
// to agg (b mod (k/2)^2) / (k/2) of every pod of its superpod) and kSpineCore (spine a, core
// b; core b is wired to local spine b / (k/2) of every superpod, so b / (k/2) == a mod
// (k/2)^2).
struct LinkRef {
  enum Kind : uint8_t {
    kHostLeaf,
    kLeafSpine,
    kLeafAgg,
    kAggCore,
    kAggSpine,
    kSpineCore
  } kind = kLeafSpine;
  uint32_t plane = 0;
  // host (kHostLeaf), leaf (kLeafSpine, kLeafAgg), agg (kAggCore, kAggSpine), spine
  // (kSpineCore)
  uint32_t a = 0;
  // unused (kHostLeaf), spine (kLeafSpine, kAggSpine), agg (kLeafAgg), core (kAggCore,
  // kSpineCore)
  uint32_t b = 0;
  uint32_t pod = 0;  // kLeafAgg, kAggCore, kAggSpine
};
// Switches: kLeaf/kSpine of a two-tier plane; kPodLeaf/kAgg (pod, local index), kFtSpine
// (index; four tiers) and kCore (index) of a fat tree.
struct SwitchRef {
  enum Kind : uint8_t { kLeaf, kSpine, kPodLeaf, kAgg, kCore, kFtSpine } kind = kSpine;
  uint32_t plane = 0;
  uint32_t index = 0;
  uint32_t pod = 0;  // kPodLeaf, kAgg
};

// ---- flows and results -----------------------------------------------------------------

// The largest flow add_flow takes (a QP's message: 2 GiB).
inline constexpr uint64_t kMaxFlowBytes = 1ull << 31;

struct FlowSpec {
  HostId src = 0;
  HostId dst = 0;
  uint64_t bytes = 0;
  Time start = 0;
  bool with_imm = false;
  uint32_t tag = 0;  // workload's own label (collective step, iteration, ...)
  // Pinned EVs: a path set of Simulation::add_path_set (0 = the transport's own EV set). The
  // flow gets QPs of its own, whose EVs are exactly that set's paths (MRC; RoCE ignores it).
  uint16_t path_set = 0;
};

// One path of a pinned EV set (two-tier Clos, SRv6): the plane and the spine the EV names.
struct PathRef {
  uint32_t plane = 0;
  uint32_t spine = 0;
};

struct FlowResult {
  FlowId id = 0;
  FlowSpec spec;
  Time end = 0;        // requester completion time (kNever if unfinished)
  Time fct = 0;        // end - start
  Time ideal_fct = 0;  // alone on an idle fabric: line rate of all planes + own path, ACK back
  bool ok = false;     // completed successfully
  uint64_t retransmits = 0;
  uint32_t paths_used = 0;
  // When the receiver held all of it: its receive completion (flows with with_imm, which
  // post a receive at the destination); kNever otherwise or until then.
  Time received = kNever;
};

struct SimStats {
  uint64_t events = 0;
  uint64_t data_packets = 0;  // first transmissions
  uint64_t retransmits = 0;
  uint64_t drops = 0;        // tail drops + fault drops
  uint64_t fault_drops = 0;  // link down, blackhole, gray loss
  uint64_t trims = 0;
  uint64_t ecn_marks = 0;
  uint64_t pfc_pauses = 0;
  uint64_t qp_errors = 0;
  uint64_t ev_state_changes = 0;
  uint64_t ev_swaps = 0;        // active EVs replaced by a backup of their plane
  uint64_t ev_ecn_swaps = 0;    // of which GOOD EVs replaced after ECN (ecn_swap_marks)
  uint64_t ack_ev_changes = 0;  // reverse EV set slots changed (paper 2.4)
  uint64_t reverse_probes = 0;  // probes of the reverse EV sets
  uint64_t reverse_probes_unanswered = 0;
  uint64_t peer_port_changes = 0;  // ACK port-state bitmaps that changed a QP's view (paper 3)
  uint64_t timeouts = 0;
  // QP memory at the end of the run (Engine::qp_memory, summed over every QP of every host).
  uint64_t qps = 0;
  uint64_t qp_bytes = 0;
  uint64_t qp_path_bytes = 0;  // of which per-path state (QpMemory::paths)
  // An MRC QP's EVs per plane on a two-tier Clos (TransportConfig::evs_per_plane and
  // backup_evs_per_plane resolved; 0 for RoCE and fat trees).
  uint32_t evs_active_per_plane = 0;
  uint32_t evs_backup_per_plane = 0;
  uint64_t pto_losses = 0;         // tail-loss probes (EngineCounters::losses_pto)
  uint64_t pto_borrowed_rtt = 0;   // of those, by QPs without an RTT sample of their own
  uint64_t probes_sent = 0;        // probes of ASSUMED_BAD paths
  uint64_t probes_unanswered = 0;  // no reply by the time the next was due
  uint64_t probes_deferred = 0;    // waited for the NIC's probe budget
};

// One sample of a link direction's state (time series, every sample_interval).
struct LinkSample {
  Time time = 0;
  uint32_t link = 0;         // index into link_names()
  float utilization = 0;     // fraction of capacity used since the previous sample
  uint32_t queue_bytes = 0;  // egress queue at the sample time
};

// One throughput sample: payload bytes placed at receivers (duplicates excluded) in the
// interval ending at `time`: per receiving host (kHostRx, src unused), per sending host
// (kHostTx, dst unused), per ordered pair (kPair: the flows of a pair, one series).
struct ThroughputSample {
  Time time = 0;
  enum Kind : uint8_t { kHostRx, kHostTx, kPair } kind = kPair;
  HostId src = 0, dst = 0;
  uint64_t bytes = 0;
};

// A denylist entry added or removed (SimConfig::denylist): host `host`'s link to its T0 in
// `plane` at `time`.
struct DenylistRecord {
  Time time = 0;
  HostId host = 0;
  uint32_t plane = 0;
  bool denied = false;
};

struct EvEvent {
  Time time;
  HostId host;
  uint32_t qpn;
  uint16_t ev_index;
  uint8_t plane;
  ev::EvState from, to;
  int32_t replaced = -1;  // a swap (EventType::kEvSwap): the EV that left; -1: a state change
  // A reverse EV set change (EventType::kAckEvChange, paper 2.4): ev_index is the EV that
  // came in and `replaced` the one that left (-1 / 0xFFFF: none).
  bool ack_ev = false;
};

class RankExchange;  // partition.h

class Simulation {
 public:
  // Validates the configuration (clear error on nonsense: zero hosts, radix too small for
  // the host count, ...). Errors: kInvalidArgument. With `exchange` (a run over several
  // ranks; implies block_partitions), this process holds its rank's blocks only: the hosts,
  // engines and switches of other ranks are not built, and every rank must make the same
  // calls (add_flow, faults, run) in the same order. Results (stats(), link_samples(),
  // ev_events()) are those of the whole fabric on every rank after run(); flows() is every
  // flow on rank 0 and the flows a rank sent on the others (a rank keeps only the records of
  // the flows its hosts send).
  static SimResult<std::unique_ptr<Simulation>> create(const SimConfig& cfg,
                                                       RankExchange* exchange = nullptr);
  ~Simulation();

  const SimConfig& config() const;
  uint32_t num_hosts() const;
  uint32_t num_leaves() const;  // per plane (fat tree: all leaves)
  uint32_t num_spines() const;  // per plane (fat tree: the cores)
  uint32_t leaf_of(HostId h) const;
  // Fat trees: pods, aggregation switches per pod (= leaves per pod = k/2), cores; four
  // tiers: superpods (k/2 pods each) and spines ((k/2)^2 per superpod). Two-tier fabrics (and
  // superpods, spines of three-tier fat trees): 0.
  uint32_t num_pods() const;
  uint32_t pod_width() const;
  uint32_t num_cores() const;
  uint32_t num_superpods() const;
  uint32_t num_fat_tree_spines() const;
  // Switch hops of the shortest path between two hosts (1, 3, or 5 in a three-tier fat tree;
  // 7 between superpods of a four-tier one).
  uint32_t switch_hops(HostId a, HostId b) const;
  // One line for people: "1 plane x (16 leaves + 8 spines)", "3-tier fat tree k=8: 8 pods x
  // (4 leaves + 4 aggs) + 16 cores" or "4-tier fat tree k=4: 4 superpods x (2 pods x (2 leaves
  // + 2 aggs) + 4 spines) + 8 cores".
  std::string fabric_description() const;
  // Whether the link or switch exists in this fabric; the error says why not (what does
  // exist). Errors: kInvalidArgument.
  SimStatus check_link(const LinkRef& l) const;
  SimStatus check_switch(const SwitchRef& s) const;

  // A WRITE of spec.bytes from src to dst at spec.start (one QP per ordered host pair per
  // transport, created on first use). Errors: kInvalidArgument (bad host, src == dst).
  SimResult<FlowId> add_flow(const FlowSpec& spec);
  // Registers a pinned EV set for FlowSpec::path_set; returns its id (1, 2, ...). `backups`
  // wait as the set's backup EVs (PathPolicy::active_per_plane: they stand in for an active
  // EV of their plane that is mapped out or swapped out after ECN). Errors: kInvalidArgument
  // (no paths, more than 4096 with the backups, a plane or spine the fabric does not have, a
  // fat tree, MRC with path_mode ecmp: an entropy names no spine; with backups, planes with
  // different numbers of active paths, or a backup on a plane without active paths).
  SimResult<uint16_t> add_path_set(std::vector<PathRef> paths, std::vector<PathRef> backups = {});
  // Called when a flow completes (successfully or not), in simulated-time order; may add
  // flows (dependent workloads: collectives, training iterations).
  void on_flow_complete(std::function<void(const FlowResult&)> cb);
  // Called when a flow with with_imm has reached its receiver whole (every part's receive
  // completion at the destination; r.received), before its completion; may add flows. In the
  // blocks layout r carries only id and received (the receiver's rank may not hold the
  // flow's record); the completion's record has received too. This
  // is what a receiver acts on (a ring's next step: NCCL waits for its receive, not for the
  // sender's ACK).
  void on_flow_received(std::function<void(const FlowResult&)> cb);

  // ---- faults (times are absolute) ----
  // A host link's `nic_detect`: how long after the change the NIC sees it (paper 5.1, Fig 6:
  // NIC and switch see a link go down at different times). Until then a NIC keeps sending
  // into a dead link (its packets are lost) or leaves a live one unused. Switch-switch links
  // ignore it.
  void link_down(LinkRef l, Time at, Time nic_detect = 0);
  void link_up(LinkRef l, Time at, Time nic_detect = 0);
  void switch_reboot(SwitchRef s, Time at, Time duration);  // all its links down, then up
  void blackhole(LinkRef l, Time from, Time until);         // silent drops, link stays up
  void blackhole_switch(SwitchRef s, Time from, Time until);
  void gray_loss(LinkRef l, double probability, Time from, Time until);
  void degrade(LinkRef l, uint64_t bps, Time from, Time until);
  void flap(LinkRef l, Time start, Time period, uint32_t count,
            Time nic_detect = 0);  // down/up every period
  // Loss on one path only: the packets from `src` to `dst` that the source's leaf sends up
  // to `path`'s spine are dropped with `probability` (the paper's EV-level error injection,
  // 5.2.4; other pairs on the same link are untouched). Two-tier fabrics (check_switch on
  // the spine first; a fat tree ignores it).
  void path_loss(HostId src, HostId dst, PathRef path, double probability, Time from, Time until);

  // ---- running ----
  // Runs until every flow added so far is done (flows added by on_flow_complete callbacks
  // count), nothing is scheduled, or `until`. Returns now().
  Time run(Time until = kNever);
  Time now() const;
  // Optional progress report every 2^22 events (the callback gets now() and events).
  void on_progress(std::function<void(Time, uint64_t)> cb);
  // Payload bytes placed at the receivers so far (duplicates excluded), over this process's
  // hosts (a rank's own in a distributed run).
  uint64_t bytes_placed() const;
  // How evenly a distributed run's windows divided the work (every rank's event counts,
  // learnt from the window headers): events per rank, and over the windows the sum of the
  // busiest rank's events and of all ranks' events. busiest_sum * ranks / total_sum is 1.0
  // when every window is even; a run can go no faster than that ratio over the perfect
  // split, whatever the CPUs. Empty (zeros) for a serial run.
  struct WindowBalance {
    std::vector<uint64_t> events_per_rank;
    uint64_t busiest_sum = 0;
    uint64_t total_sum = 0;
  };
  WindowBalance window_balance() const;

  // ---- results ----
  const std::vector<FlowResult>& flows() const;
  SimStats stats() const;
  // Busy samples only: an idle link direction (nothing sent, empty queue) has no sample.
  const std::vector<LinkSample>& link_samples() const;
  const std::vector<ThroughputSample>& throughput_samples() const;
  // "p0/leaf3->spine7", "p0/spine7->leaf3"; fat trees "pod1/leaf0->agg2", "pod1/agg2->leaf0",
  // "pod1/agg2->core9", "core9->pod1/agg2"; four tiers "pod1/agg0->spine1", "spine1->core2",
  // and back.
  std::vector<std::string> link_names() const;
  const std::vector<EvEvent>& ev_events() const;
  // The denylist's entries as they came and went, in time order (empty without one).
  const std::vector<DenylistRecord>& denylist_log() const;
  // Checks that the precomputed SRv6 forwarding the fabric uses equals hop-by-hop uSID
  // processing (each switch: if the active uSID is its own, shift; then route on the active
  // uSID) for every source host, destination host and spine of every plane (fat trees: every
  // distinct path of every pair: its agg and core), by walking both. Four-tier routes span
  // the destination address and one SRH segment: the switch whose uSID ends the first carrier
  // copies the segment into the address (End with SRH, RFC 8754 / RFC 9800) and routes on it.
  // Returns the number of routes checked. Errors: kInvalidArgument (not an SRv6 fabric),
  // kBadExtension (a route differs: a bug).
  SimResult<uint64_t> check_usid_forwarding() const;
  // Writes packets sent or received by `hosts` to a pcap (decodable with our dissector).
  SimStatus enable_pcap(const std::string& path, std::vector<HostId> hosts);
  // Writes the event log (transport/event_log.h) of the engines of `hosts` (those on this
  // rank) to `path` as JSON lines, each with "node" = its host. Before run().
  SimStatus enable_event_log(const std::string& path, std::vector<HostId> hosts);

 private:
  struct Impl;
  explicit Simulation(std::unique_ptr<Impl> impl);
  // check_link, check_switch: empty, or why not.
  std::string why_no_link(const LinkRef& l) const;
  std::string why_no_switch(const SwitchRef& s) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrc::sim
