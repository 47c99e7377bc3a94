// Workloads for the fabric simulator: traffic patterns and collectives that add flows to a
// Simulation (or any FlowSink), and the import of htsim connection-matrix files (.cm).
//
// Two kinds of workload:
//   - static flow sets, made up front by pure, seeded generators (permutation, uniform random,
//     incast, all-to-all): same arguments + seed -> the same flows;
//   - dependent workloads driven by flow completions (ring AllReduce, the training loop,
//     htsim triggers): a flow starts when the flows it depends on complete, at their
//     completion time. A WorkloadDriver routes each completion to the workload that added the
//     flow.
//
// Completion means requester completion (FlowResult::end, the last ACK back at the sender).
// A workload that waits for a receive instead (a ring step starts when its predecessor's data
// is in, as NCCL's does) sends WRITEs with immediate and acts on the reception
// (Workload::on_received, at FlowResult::received: the receive completion at the
// destination), about half a base RTT before the sender's completion.
//
// Nothing here touches Simulation directly (see runner.h for that glue), so the logic is
// testable against a fake FlowSink.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "sim/simulation.h"

namespace mrc::sim {

// Where a workload's flows go: a Simulation (runner.h adapts one) or a fake in tests.
class FlowSink {
 public:
  virtual ~FlowSink() = default;
  virtual SimResult<FlowId> add_flow(const FlowSpec& spec) = 0;
};

// ---- static flow sets (pure, deterministic) ----------------------------------------------

// A uniformly random derangement of 0..n-1 (perm[i] != i for every i); n >= 2.
SimResult<std::vector<uint32_t>> random_derangement(uint32_t n, uint64_t seed);

// Every host of `hosts` sends `bytes` to perm[i] (a random derangement), all at `start`.
SimResult<std::vector<FlowSpec>> permutation_flows(const std::vector<HostId>& hosts, uint64_t bytes,
                                                   Time start, uint64_t seed);
// `count` flows, each from a uniformly random host to a different uniformly random host,
// starting uniformly at random in [start, start + spread).
SimResult<std::vector<FlowSpec>> uniform_random_flows(const std::vector<HostId>& hosts,
                                                      uint32_t count, uint64_t bytes, Time start,
                                                      Time spread, uint64_t seed);
// `senders` hosts send `bytes` each to `dst`, all at `start`. The senders are the hosts
// following dst in `hosts` (wrapping around), so they are deterministic and spread over leaves
// in host order.
SimResult<std::vector<FlowSpec>> incast_flows(const std::vector<HostId>& hosts, HostId dst,
                                              uint32_t senders, uint64_t bytes, Time start);
// Every rank sends bytes_per_rank / n to every other rank (nccl-tests AlltoAll: S is the
// bytes per rank, split into n equal parts), all at `start`.
SimResult<std::vector<FlowSpec>> all_to_all_flows(const std::vector<HostId>& group,
                                                  uint64_t bytes_per_rank, Time start);

// 0..n-1.
std::vector<HostId> all_hosts(uint32_t n);

// A non-negative decimal ("12", "12.5", ".5") times `scale`, rounded to the nearest integer,
// computed exactly (no floating point). nullopt on bad syntax or overflow.
std::optional<uint64_t> parse_scaled_decimal(std::string_view s, uint64_t scale);

// ---- collective results ------------------------------------------------------------------

enum class CollectiveKind : uint8_t { kAllReduce, kAllToAll };
const char* collective_name(CollectiveKind k);  // "allreduce", "all_to_all"

// nccl-tests bus bandwidth factor: AllReduce 2(n-1)/n, AlltoAll (n-1)/n.
double busbw_factor(CollectiveKind k, uint32_t ranks);

struct CollectiveResult {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint32_t iteration = 0;  // training-loop iteration (0 for a lone collective)
  uint32_t ranks = 0;
  uint64_t bytes = 0;  // S: bytes per rank (nccl-tests "size")
  Time start = 0;
  Time end = 0;  // completion of its last flow
  uint32_t flows = 0;
  bool ok = true;  // every flow completed successfully
  Time time() const { return end - start; }
  // nccl-tests units: GB/s = 1e9 bytes per second. algbw = S / t, busbw = algbw * factor.
  double algbw_GBps() const;
  double busbw_GBps() const;
};

struct IterationResult {
  uint32_t index = 0;
  Time start = 0;       // iteration start (compute begins)
  Time comm_start = 0;  // compute done, AllReduce starts
  Time end = kNever;    // AllReduce done (kNever: not finished when the run stopped)
  bool ok = true;
  bool finished() const { return end != kNever; }
  Time time() const { return end - start; }
};

// ---- dependent workloads -----------------------------------------------------------------

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string_view name() const = 0;
  // Adds the initial flows.
  virtual SimStatus start(FlowSink& sink) = 0;
  // `r` is one of the flows this workload added (through `sink`); may add more flows.
  virtual SimStatus on_complete(const FlowResult& r, FlowSink& sink) = 0;
  // `r` (one of its flows, sent with immediate) is whole at its receiver (r.received); comes
  // before on_complete for the same flow; may add flows.
  virtual SimStatus on_received(const FlowResult&, FlowSink&) { return {}; }
  // Everything this workload will ever add has completed (or it gave up).
  virtual bool done() const = 0;
  virtual const std::vector<CollectiveResult>& collectives() const { return kNoCollectives; }
  virtual const std::vector<IterationResult>& iterations() const { return kNoIterations; }
  // The payload bytes of every flow it will add, once started (mrc-sim's progress line); 0
  // when not known ahead (streams that run until a deadline, flows started by triggers).
  virtual uint64_t total_bytes() const { return 0; }

 protected:
  static const std::vector<CollectiveResult> kNoCollectives;
  static const std::vector<IterationResult> kNoIterations;
};

// A fixed list of flows (permutation, uniform, incast, htsim without triggers, ...).
class StaticFlows final : public Workload {
 public:
  StaticFlows(std::string name, std::vector<FlowSpec> flows);
  std::string_view name() const override { return name_; }
  SimStatus start(FlowSink& sink) override;
  SimStatus on_complete(const FlowResult& r, FlowSink& sink) override;
  bool done() const override { return completed_ == flows_.size(); }
  uint64_t total_bytes() const override { return total_; }

 private:
  std::string name_;
  std::vector<FlowSpec> flows_;
  uint64_t total_ = 0;
  size_t completed_ = 0;
};

// Long-running bulk streams, as ib_write_bw runs them: each stream sends messages of `bytes`
// from src to dst back to back, `depth` of them posted at once (the message rate a NIC
// sustains with a few WRs in flight), from `start`; a completion posts the next message while
// its time is before `until`. A stream with until <= start sends `depth` messages. A failed
// message (QP error) ends its stream. Every message is a flow (tag = the stream's index), so a
// fault timeline cuts through the traffic wherever it falls.
class SteadyStreams final : public Workload {
 public:
  struct Stream {
    HostId src = 0, dst = 0;
    uint64_t bytes = 0;
    Time start = 0;
    Time until = 0;
    uint32_t depth = 1;
    uint16_t path_set = 0;  // FlowSpec::path_set of its messages
  };
  SteadyStreams(std::string name, std::vector<Stream> streams);
  std::string_view name() const override { return name_; }
  SimStatus start(FlowSink& sink) override;
  SimStatus on_complete(const FlowResult& r, FlowSink& sink) override;
  bool done() const override { return started_ && in_flight_ == 0; }
  uint64_t total_bytes() const override;           // 0 unless every stream sends only its `depth`
  uint64_t messages() const { return messages_; }  // posted so far

 private:
  SimStatus post(uint32_t stream, Time at, FlowSink& sink);
  std::string name_;
  std::vector<Stream> streams_;
  std::unordered_map<FlowId, uint32_t> stream_of_;
  uint64_t in_flight_ = 0;
  uint64_t messages_ = 0;
  bool started_ = false;
};

// Every host of `hosts` streams to a random derangement partner (permutation_flows' pairs).
SimResult<std::vector<SteadyStreams::Stream>> steady_permutation(const std::vector<HostId>& hosts,
                                                                 uint64_t bytes, Time start,
                                                                 Time until, uint32_t depth,
                                                                 uint64_t seed);

// All-to-all as a collective: all flows at once; reports time, algbw and busbw.
class AllToAll final : public Workload {
 public:
  AllToAll(std::vector<HostId> group, uint64_t bytes_per_rank, Time start);
  std::string_view name() const override { return "all_to_all"; }
  SimStatus start(FlowSink& sink) override;
  SimStatus on_complete(const FlowResult& r, FlowSink& sink) override;
  bool done() const override { return started_ && remaining_ == 0; }
  const std::vector<CollectiveResult>& collectives() const override { return results_; }
  uint64_t total_bytes() const override { return total_; }

 private:
  std::vector<HostId> group_;
  uint64_t bytes_;
  Time start_;
  uint64_t total_ = 0;
  bool started_ = false;
  uint32_t remaining_ = 0;
  CollectiveResult current_;
  std::vector<CollectiveResult> results_;
};

// Ring AllReduce of S bytes per rank over the n ranks of `group`, flat or two-level (2D).
//
// Flat (row = 0): the standard ring: 2(n-1) steps (n-1 reduce-scatter, n-1 all-gather); in
// step k rank i sends one chunk (S/n bytes, the first S mod n chunks one byte larger) to rank
// i+1.
//
// Two-level (row = r, 2 <= r, r divides n): the ranks form a grid of n/r rows of r
// consecutive ranks of the group (rank i sits in row i / r, column i % r); the group order
// decides which hosts share a row. Three stages, each a set of disjoint rings that run
// concurrently:
//   1. reduce-scatter within each row: r-1 steps of a shard (S/r bytes); the rank in column
//      c then holds shard (c+1) mod r, reduced over its row;
//   2. AllReduce of that shard within each column (across the rows): 2(n/r - 1) steps of a
//      shard's chunk (S/n bytes);
//   3. all-gather within each row: r-1 steps of a shard.
// Per rank that is 2(r-1) + 2(n/r-1) chained steps instead of 2(n-1): large jobs use it
// because a flat ring's latency (and the simulator's work: n x 2(n-1) flows) grows with n.
// The bytes each rank sends are the same 2(n-1)/n x S as the flat ring's (up to rounding),
// so busbw keeps the nccl-tests AllReduce factor 2(n-1)/n.
//
// Chaining, both layouts: step 0 of every rank starts at `start`. Within a stage, a rank's
// step k+1 starts when its step-k receive (from its predecessor in that stage's ring) is
// done. A rank starts a stage (its step 0 there) when it has finished the previous stage
// (every receive of it done), and no step of a stage before that: a receive of a later stage
// that arrives early waits for it. Sizes: a buffer of B bytes split into m chunks gives chunk
// j B/m bytes, the first B mod m chunks one byte more.
class RingAllReduce final : public Workload {
 public:
  using DoneFn = std::function<SimStatus(const CollectiveResult&, FlowSink&)>;
  RingAllReduce(std::vector<HostId> group, uint64_t bytes, Time start, uint32_t row = 0,
                uint32_t iteration = 0, DoneFn on_done = nullptr);
  std::string_view name() const override { return "allreduce"; }
  SimStatus start(FlowSink& sink) override;
  SimStatus on_complete(const FlowResult& r, FlowSink& sink) override;
  SimStatus on_received(const FlowResult& r, FlowSink& sink) override;
  bool done() const override { return finished_; }
  const std::vector<CollectiveResult>& collectives() const override { return results_; }
  uint64_t total_bytes() const override { return total_; }  // every rank's every step

  // The schedule (valid once the group and row are: start() checks them). Steps are
  // numbered per rank across the stages: stage 1's, then stage 2's, then stage 3's.
  uint32_t steps() const;  // per rank
  uint32_t stages() const { return static_cast<uint32_t>(stages_.size()); }
  uint32_t stage_of(uint32_t step) const;
  // The rank that `rank` sends to in `step` (its successor in that stage's ring).
  uint32_t peer(uint32_t rank, uint32_t step) const;
  // The chunk of the stage's buffer that `rank` sends in `step` (the standard ring schedule)
  // and its size.
  uint32_t chunk_of(uint32_t rank, uint32_t step) const;
  uint64_t step_bytes(uint32_t rank, uint32_t step) const;
  // Tag carried by the flow of (rank, step): iteration << 16 | step.
  static uint32_t tag(uint32_t iteration, uint32_t step) { return iteration << 16 | step; }

 private:
  // One stage: disjoint rings of `len` ranks, ranks `stride` apart (rows: stride 1, columns:
  // stride row); the flat ring is one row of n.
  struct Stage {
    enum Op : uint8_t { kReduceScatter, kAllGather, kAllReduce } op;
    uint32_t stride;
    uint32_t len;
    uint32_t first;  // its first step
    uint32_t steps;
  };
  uint32_t n() const { return static_cast<uint32_t>(group_.size()); }
  uint32_t position(const Stage& s, uint32_t rank) const { return rank / s.stride % s.len; }
  uint64_t buffer_bytes(const Stage& s, uint32_t rank) const;
  SimStatus send(uint32_t rank, uint32_t step, Time at, FlowSink& sink);
  SimStatus on_receive(uint32_t rank, uint32_t step, Time at, FlowSink& sink);

  std::vector<HostId> group_;
  uint64_t bytes_;
  Time start_;
  uint32_t row_;
  uint32_t iteration_;
  DoneFn on_done_;
  std::vector<Stage> stages_;
  std::vector<uint32_t> stage_at_;     // per rank: the stage it is in
  std::vector<uint32_t> received_in_;  // per rank x stage: receives done
  std::vector<bool> received_;         // per rank x step (two-level only)
  // flow -> rank << 32 | step, kReceived once its receive has been acted on
  std::unordered_map<FlowId, uint64_t> owner_;
  static constexpr uint64_t kReceived = 1ull << 63;
  uint64_t total_ = 0;
  uint32_t remaining_ = 0;
  bool finished_ = false;
  CollectiveResult current_;
  std::vector<CollectiveResult> results_;
};

// A training loop: `iterations` times, compute for `compute` (no traffic), then a ring
// AllReduce of `bytes` per rank over `group` (flat, or two-level with `row` ranks per row: see
// RingAllReduce). Iteration i+1 starts when iteration i's
// AllReduce is done. An AllReduce with a failed flow (QP error) ends the job: the loop stops
// there, as NCCL aborts a communicator.
class TrainingLoop final : public Workload {
 public:
  TrainingLoop(std::vector<HostId> group, uint64_t bytes, Time compute, uint32_t iterations,
               Time start, uint32_t row = 0);
  std::string_view name() const override { return "training"; }
  SimStatus start(FlowSink& sink) override;
  SimStatus on_complete(const FlowResult& r, FlowSink& sink) override;
  SimStatus on_received(const FlowResult& r, FlowSink& sink) override;
  bool done() const override { return finished_; }
  const std::vector<CollectiveResult>& collectives() const override { return collectives_; }
  const std::vector<IterationResult>& iterations() const override { return iterations_; }
  uint64_t total_bytes() const override { return total_; }  // every iteration's AllReduce
  bool aborted() const { return aborted_; }

 private:
  SimStatus begin_iteration(uint32_t index, Time at, FlowSink& sink);

  std::vector<HostId> group_;
  uint64_t bytes_;
  Time compute_;
  uint32_t count_;
  Time start_;
  uint32_t row_;
  std::unique_ptr<RingAllReduce> current_;
  std::vector<std::unique_ptr<RingAllReduce>> retired_;  // kept until the driver is idle
  std::vector<CollectiveResult> collectives_;
  std::vector<IterationResult> iterations_;
  uint64_t total_ = 0;
  bool finished_ = false;
  bool aborted_ = false;
};

// ---- htsim connection matrices (.cm) ------------------------------------------------------
//
// Grammar (csg-htsim sim/datacenter/connection_matrix.cpp; '#' starts a comment line):
//   Nodes N
//   Connections C
//   Triggers T                       (optional; number of trigger lines)
//   Failures F                       (optional; number of failure lines)
//   <src>-><dst> [id I] (start <us> | trigger T) size <bytes> [prio P] [addon]
//                [send_done_trigger T] [recv_done_trigger T]
//   trigger id T oneshot|multishot|barrier [count K]
//   failure switch_type TOR|AGG|CORE switch_id S [link_id L] [plane P] [at <us>]
// `start` is in microseconds (a decimal). `plane` and `at` are our extensions (htsim fails
// links from time 0 in its only plane). `prio` and `addon` are accepted and ignored.
struct HtsimConnection {
  HostId src = 0;
  HostId dst = 0;
  uint64_t bytes = 0;
  std::optional<Time> start;  // unset: started by `trigger`
  uint32_t id = 0;            // 0 = none
  uint32_t trigger = 0;       // 0 = none
  uint32_t send_done_trigger = 0;
  uint32_t recv_done_trigger = 0;
  uint32_t line = 0;
};
struct HtsimTrigger {
  enum Type : uint8_t { kOneshot, kMultishot, kBarrier } type = kOneshot;
  uint32_t id = 0;
  uint32_t count = 0;  // barrier: activations needed
  uint32_t line = 0;
};
struct HtsimFailure {
  enum SwitchType : uint8_t { kTor, kAgg, kCore } switch_type = kTor;
  uint32_t switch_id = 0;
  std::optional<uint32_t> link_id;  // unset: the whole switch fails
  uint32_t plane = 0;
  Time at = 0;
  uint32_t line = 0;
};
struct HtsimMatrix {
  uint32_t nodes = 0;
  std::vector<HtsimConnection> connections;
  std::vector<HtsimTrigger> triggers;
  std::vector<HtsimFailure> failures;
};

// Errors: "<filename>:<line>: <what was expected>".
SimResult<HtsimMatrix> parse_htsim_cm(std::string_view text, std::string_view filename);
SimResult<HtsimMatrix> load_htsim_cm(const std::string& path);

// A failure line as a fault on our two-tier fabric: TOR = leaf `switch_id`, link_id = its
// uplink to spine `link_id`; AGG/CORE = spine `switch_id`, link_id = its downlink to leaf
// `link_id`. Without link_id the whole switch goes down. Permanent from `at`.
struct HtsimFault {
  bool whole_switch = false;
  LinkRef link;
  SwitchRef sw;
  Time at = 0;
};
SimResult<HtsimFault> htsim_fault(const HtsimFailure& f, uint32_t leaves, uint32_t spines,
                                  uint32_t planes, std::string_view filename);

// Runs a matrix: flows with a start time start then; a flow with `trigger T` starts when T
// fires; a completed flow activates its send_done_trigger and recv_done_trigger (both at its
// completion time). oneshot: fires all its flows on the first activation; multishot: each
// activation starts its next flow (in file order); barrier: fires all its flows after
// `count` activations.
class HtsimWorkload final : public Workload {
 public:
  explicit HtsimWorkload(HtsimMatrix m);
  std::string_view name() const override { return "htsim"; }
  SimStatus start(FlowSink& sink) override;
  SimStatus on_complete(const FlowResult& r, FlowSink& sink) override;
  bool done() const override;
  uint64_t total_bytes() const override;  // 0 with triggers (they may never fire)
  uint32_t started() const { return started_; }

 private:
  SimStatus activate(uint32_t trigger, Time at, FlowSink& sink);
  SimStatus launch(uint32_t conn, Time at, FlowSink& sink);

  struct TriggerState {
    HtsimTrigger spec;
    std::vector<uint32_t> targets;  // connection indices, file order
    uint32_t next = 0;              // multishot
    uint32_t activations = 0;
    bool fired = false;
  };
  HtsimMatrix m_;
  std::unordered_map<uint32_t, TriggerState> triggers_;
  std::unordered_map<FlowId, uint32_t> conn_of_;
  uint32_t started_ = 0;
  uint32_t completed_ = 0;
};

// ---- driver ------------------------------------------------------------------------------

// Owns workloads, adds their flows to a sink and routes completions back to the owner.
// Errors raised inside a completion callback cannot propagate through the simulator; the
// first is kept in error() (and later completions are ignored).
class WorkloadDriver {
 public:
  explicit WorkloadDriver(FlowSink& sink);
  ~WorkloadDriver();
  Workload& add(std::unique_ptr<Workload> w);
  SimStatus start();
  void on_flow_complete(const FlowResult& r);
  void on_flow_received(const FlowResult& r);
  const std::optional<SimError>& error() const { return error_; }
  const std::vector<std::unique_ptr<Workload>>& workloads() const { return workloads_; }
  uint64_t flows_added() const { return added_; }
  uint64_t flows_completed() const { return completed_; }
  // Every workload's Workload::total_bytes(), once started; 0 if one of them does not know.
  uint64_t total_bytes() const;
  bool done() const;

 private:
  class Tracking;
  FlowSink& sink_;
  std::vector<std::unique_ptr<Workload>> workloads_;
  // Flow id -> workload index, kNoOwner for flows not added here or completed. Flow ids are
  // dense (Simulation numbers them 0, 1, ...), and every rank of a distributed run holds an
  // entry per flow of the whole workload: 4 bytes each, where a hash map took ~40 (8,192
  // GPUs' all-to-all: 67 M flows, 0.27 GB a rank instead of 2.6 GB).
  std::vector<uint32_t> owner_;
  static constexpr uint32_t kNoOwner = UINT32_MAX;
  uint32_t owner_of(FlowId f) const { return f < owner_.size() ? owner_[f] : kNoOwner; }
  uint64_t added_ = 0;
  uint64_t completed_ = 0;
  std::optional<SimError> error_;
  std::unique_ptr<Tracking> tracking_;
};

}  // namespace mrc::sim
