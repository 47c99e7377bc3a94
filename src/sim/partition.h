// How a distributed (MPI) run divides the fabric: the partition function, the plan that
// `mrc-sim --ranks-plan N` prints, and the interface a Simulation uses to reach the other
// ranks (implemented over MPI in mpi_exchange.h; docs/simulator.md, "Running on several
// machines").
//
// The partition function. A run has B blocks (logical partitions), B = min(leaf groups, 64),
// fixed by the topology alone, never by the number of ranks:
//   - two-tier Clos: leaf l of *every* plane, with its hosts (engines, QPs), is in block
//     l * B / L; spine s of every plane in block s * B / S;
//   - fat tree: the leaves and aggs of pod p in block p * B / pods, spine g in g * B / spines,
//     core c in c * B / cores.
// A host and its leaves share a block, so the only links between blocks are switch-switch
// links (leaf-spine, agg-core, ...), each with the fabric's link delay: that delay is the
// lookahead of the conservative synchronization. Ranks hold contiguous ranges of blocks
// (block b on rank b * N / B), so each rank holds about 1/N of the hosts and QPs, of the
// leaves and of the spines of every plane, and of the packets and events they handle.
//
// Events are ordered by (time, origin block, sequence number within the origin block): a key
// that does not depend on which rank holds a block, which is what makes a run on 1, 2 or N
// ranks produce the same results.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/simulation.h"

namespace mrc::sim {

constexpr uint32_t kMaxBlocks = 64;

// Counts of a fabric's elements, as Simulation builds it (without building it).
struct FabricShape {
  bool fat_tree = false;
  uint32_t hosts = 0, planes = 0;
  uint32_t hosts_per_leaf = 0;                                      // H
  uint32_t uplinks = 0;                                             // per leaf
  uint32_t leaves = 0;                                              // per plane (fat tree: all)
  uint32_t spines = 0;                                              // per plane (fat tree: 0)
  uint32_t pods = 0, half = 0, aggs = 0, ft_spines = 0, cores = 0;  // fat tree
};
// Errors: kInvalidArgument (the configuration Simulation::create would reject).
SimResult<FabricShape> fabric_shape(const TopologyConfig& t);

// The blocks of a fabric and which rank holds each.
class BlockLayout {
 public:
  BlockLayout() = default;
  explicit BlockLayout(const FabricShape& s);

  uint32_t blocks() const { return blocks_; }
  // Leaf index within its plane (fat tree: global leaf index).
  uint32_t leaf_block(uint32_t leaf) const;
  uint32_t spine_block(uint32_t spine) const;     // two-tier spine index within its plane
  uint32_t agg_block(uint32_t agg) const;         // fat tree: global agg index
  uint32_t ft_spine_block(uint32_t spine) const;  // four-tier fat tree spine
  uint32_t core_block(uint32_t core) const;       // fat tree core
  uint32_t host_block(HostId h) const { return leaf_block(h / shape_.hosts_per_leaf); }
  static uint32_t rank_of(uint32_t block, uint32_t blocks, uint32_t ranks) {
    return static_cast<uint32_t>(static_cast<uint64_t>(block) * ranks / blocks);
  }

 private:
  static uint32_t spread(uint32_t i, uint32_t n, uint32_t blocks) {
    return n == 0 ? 0 : static_cast<uint32_t>(static_cast<uint64_t>(i) * blocks / n);
  }
  FabricShape shape_;
  uint32_t blocks_ = 1;
};

// What `mrc-sim --ranks-plan N` prints: per rank, the elements it holds and a prediction of
// its memory; and the links between ranks.
struct RankPlan {
  uint32_t blocks = 0;
  uint64_t hosts = 0, switches = 0, ports = 0, qps = 0, flows = 0;
  uint64_t sent_bytes = 0;  // of the flows this rank's hosts send, each host's up to 1 MiB
  uint64_t predicted_bytes = 0;
  // The exchange: packets (data, and the ACKs they cause) this rank's elements hand to
  // another rank's, expected over the paths a flow sprays over; and the bytes they take.
  double exchange_packets = 0;
  uint64_t exchange_bytes = 0;
};
struct PartitionPlan {
  uint32_t ranks = 0, blocks = 0;
  uint64_t cross_rank_links = 0;  // switch-switch links with ends on different ranks
  uint64_t links = 0;             // all switch-switch links
  Time lookahead = 0;
  // Of the flows' data packets, how many rank boundaries one crosses on average (a path's
  // switch-switch hops with ends on different ranks, averaged over the paths it may take).
  double crossings_per_packet = 0;
  std::vector<RankPlan> per_rank;
};
// Memory model of the prediction (bytes). The QP terms were fitted on 2026-12-02 (least
// squares) to the peak RSS of eleven serial all-to-alls of 16 MiB per rank, MRC, 8 planes:
// 128, 256 and 512 GPUs, radix 32 and 64, 4 to 32 EVs per plane (32 to 256 paths per QP;
// 16,256 to 261,632 QPs), the other terms held at their values (docs/performance.md, "2,048
// and 8,192 GPUs"; the per-path cost is lower beyond 256 paths, where the model
// over-predicts). `base`: the program (a serial run has about 8 MB of it) and Open MPI with the
// exchange buffers (6-10 MB a rank on 2 and 4 ranks of the default scenario). The other terms:
// benchmark B's permutation of 1 MiB messages (64 paths per QP) at 16,384 GPUs, serially and on 2
// ranks.
struct MemoryModel {
  uint64_t per_host = 36 << 10;  // engine, NIC ports, host record, its packets and events
  uint64_t per_qp_base = 3110;   // QP and its rings, its table entries, allocator overhead
  uint64_t per_qp_path = 17;     // per path (EV) of a QP
  uint64_t per_port = 230;       // switch egress port with its queues
  uint64_t per_flow = 160;       // flow record and result (at its sender's rank)
  uint64_t per_flow_index = 8;   // every flow's index slot and workload owner, on every rank
  // Packets and engine records in flight, at the sender's rank: this share of the first MiB
  // each host sends (a host's window, not its flows', bounds what is in flight).
  double in_flight_share = 0.03;
  uint64_t base = 20ull << 20;  // program, MPI, event queues, exchange buffers
};
// Exchange model of the prediction. A packet that crosses a rank boundary is serialized
// into the exchange buffer (its event header and packet record whole, the transport header
// of a control packet without its zero words) at about this many bytes: 168-169 measured on
// 2026-12-07 for MRC under mpirun (benchmark A on 2 and 4 ranks, the default scenario's MRC
// run on 2), against the packets the plan predicts (docs/performance.md, "Ranks: the
// exchange"). Not counted: retransmissions, probes, pause frames (RoCE's go-back-N and PFC
// add 20-27 % in the default scenario) and the windows' own headers.
struct ExchangeModel {
  double bytes_per_packet = 169;
};
// `flows`: the flows the workload adds at its start (dependent workloads add more later; the
// plan counts what is known). `paths_per_qp`: EVs of a QP over all planes.
SimResult<PartitionPlan> plan_partition(const SimConfig& cfg, uint32_t ranks,
                                        const std::vector<FlowSpec>& flows, uint32_t paths_per_qp,
                                        const MemoryModel& model = {},
                                        const ExchangeModel& exchange = {});
std::string format_plan(const PartitionPlan& p);

// The other ranks of a distributed run, as a Simulation sees them. Every call is collective:
// all ranks make the same calls in the same order.
class RankExchange {
 public:
  virtual ~RankExchange() = default;
  virtual uint32_t rank() const = 0;
  virtual uint32_t ranks() const = 0;
  // Sends out[r] to rank r (out.size() == ranks()); writes what every rank sent to this one,
  // concatenated in rank order, to the front of `in` and returns its length. `in` only grows,
  // so a run's windows reuse one buffer: a fresh one each window (tens of MB in a large run)
  // cost its page faults and zeroing every time.
  virtual size_t exchange(const std::vector<std::span<const uint8_t>>& out,
                          std::vector<uint8_t>& in) = 0;
  // Every rank's `mine`, concatenated in rank order, on every rank.
  virtual std::vector<uint8_t> all_gather(const std::vector<uint8_t>& mine) = 0;
  // Every rank's `mine`, concatenated in rank order, on rank 0 (the others get nothing).
  virtual std::vector<uint8_t> gather(const std::vector<uint8_t>& mine) = 0;
  // Element-wise minimum / sum over the ranks.
  virtual void all_min(std::vector<uint64_t>& v) = 0;
  virtual void all_sum(std::vector<uint64_t>& v) = 0;
  // Stops every rank: prints "rank R: message" and ends the job with `status` (never
  // returns). For failures seen by one rank only.
  [[noreturn]] virtual void abort(const std::string& message, int status) = 0;
  // What exchange() has cost this rank so far: calls (windows), bytes sent to other ranks,
  // and wall time inside it (sending, receiving, waiting for the slowest rank), of which
  // `wait_ns` went to waiting until every rank had ended the window: the load imbalance
  // between the ranks (or between the CPUs they run on), not the cost of the transfer.
  struct Cost {
    uint64_t calls = 0, bytes_sent = 0, wall_ns = 0, wait_ns = 0;
  };
  virtual Cost cost() const = 0;
  // True for LoneRank (one rank of an N-rank run measured alone): what the other ranks
  // would send never comes. The simulation then schedules itself the flow accepts that the
  // senders' ranks would send it (they follow from the flow specs, which every rank has).
  virtual bool others_absent() const { return false; }
};

// One rank of an N-rank run without the other N-1 (`mrc-sim --ranks-plan N --measure-rank K`):
// the process builds exactly what rank K builds (its blocks' hosts, engines, switches and
// flow records; its QPs as the flows start) to measure its memory. What it would send the
// others is counted and dropped, and nothing arrives from them: the run is the real rank's
// only until the first packet from another rank could arrive (two link delays after the
// first flow starts: a host's packet crosses its own leaf before it reaches another rank's
// spine). Collectives return this rank's part alone.
class LoneRank final : public RankExchange {
 public:
  LoneRank(uint32_t rank, uint32_t ranks) : rank_(rank), ranks_(ranks) {}
  uint32_t rank() const override { return rank_; }
  uint32_t ranks() const override { return ranks_; }
  size_t exchange(const std::vector<std::span<const uint8_t>>& out,
                  std::vector<uint8_t>& in) override;
  std::vector<uint8_t> all_gather(const std::vector<uint8_t>& mine) override { return mine; }
  std::vector<uint8_t> gather(const std::vector<uint8_t>& mine) override {
    return rank_ == 0 ? mine : std::vector<uint8_t>{};
  }
  void all_min(std::vector<uint64_t>&) override {}
  void all_sum(std::vector<uint64_t>&) override {}
  [[noreturn]] void abort(const std::string& message, int status) override;
  Cost cost() const override { return cost_; }
  bool others_absent() const override { return true; }

 private:
  uint32_t rank_, ranks_;
  Cost cost_;
};

}  // namespace mrc::sim
