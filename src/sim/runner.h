// Runs a scenario: for each transport, a Simulation with the scenario's fabric, its workload
// (workloads.h) and its faults, then the headline metrics a network architect reads. The
// mrc-sim tool writes these to summary.json / flows.csv / links.csv / ev_events.jsonl.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/partition.h"
#include "sim/scenario.h"
#include "sim/simulation.h"
#include "sim/workloads.h"

namespace mrc::sim {

// Adapts a Simulation to the FlowSink the workloads use.
class SimulationSink final : public FlowSink {
 public:
  explicit SimulationSink(Simulation& sim) : sim_(sim) {}
  SimResult<FlowId> add_flow(const FlowSpec& spec) override { return sim_.add_flow(spec); }

 private:
  Simulation& sim_;
};

// The workload of a scenario for a fabric of `hosts` hosts (loads the .cm file for htsim).
SimResult<std::unique_ptr<Workload>> make_workload(const WorkloadConfig& w, uint32_t hosts,
                                                   uint64_t seed);
// Schedules the scenario's faults (and an htsim matrix's failure lines); checks every link
// and switch exists in `sim`'s fabric. Errors name the fault's line in the scenario file.
SimStatus apply_faults(Simulation& sim, const Scenario& sc);
SimStatus apply_htsim_failures(Simulation& sim, const HtsimMatrix& m, const std::string& file);

// Nearest-rank percentile (p in [0, 100]) of an unsorted sample; 0 for an empty one.
double percentile(std::vector<double> v, double p);

struct FlowSummary {
  uint64_t count = 0;       // flows added
  uint64_t completed = 0;   // completed successfully
  uint64_t failed = 0;      // completed with an error (QP error)
  uint64_t unfinished = 0;  // still running at the end of the run
  double fct_p50_us = 0, fct_p99_us = 0, fct_max_us = 0;
  double ideal_max_us = 0;                                      // largest ideal FCT
  double slowdown_p50 = 0, slowdown_p99 = 0, slowdown_max = 0;  // fct / ideal_fct
  double goodput_mean_gbps = 0, goodput_min_gbps = 0;           // bytes * 8 / fct per flow
  uint64_t bytes = 0;                                           // delivered by completed flows
};
// Over the successfully completed flows (FCT, slowdown, goodput) and all flows (counts).
FlowSummary summarize_flows(const std::vector<FlowResult>& flows);

struct TransportResult {
  std::string name;
  SimConfig config;
  Time sim_time = 0;       // where the simulation stopped (the workload done, or run.until)
  Time makespan = 0;       // completion of the last flow
  bool hit_limit = false;  // stopped by run.until with flows still running
  SimStats stats;
  FlowSummary summary;
  std::vector<FlowResult> flows;
  std::vector<std::string> link_names;
  std::vector<LinkSample> link_samples;
  std::vector<ThroughputSample> throughput;
  std::vector<EvEvent> ev_events;
  std::vector<DenylistRecord> denylist;  // entries added and removed (SimConfig::denylist)
  std::vector<CollectiveResult> collectives;
  std::vector<IterationResult> iterations;
  bool job_aborted = false;           // training loop stopped by a failed AllReduce
  std::string workload_error;         // an error raised while the simulation ran (empty = none)
  uint32_t leaves = 0, spines = 0;    // per plane, as the simulator built the fabric (fat tree:
                                      // all leaves; spines = cores)
  uint32_t pods = 0, cores = 0;       // fat tree only
  std::string fabric;                 // Simulation::fabric_description()
  Simulation::WindowBalance balance;  // distributed runs: how evenly the windows split
};

// Where a run is (RunHooks::progress), every 2^22 events.
struct RunProgress {
  Time now = 0;  // simulated
  uint64_t events = 0;
  uint64_t flows_completed = 0, flows_added = 0;
  // Payload placed at the receivers (Simulation::bytes_placed: this rank's hosts in a
  // distributed run) and the workload's whole payload (WorkloadDriver::total_bytes: 0 when
  // not known ahead).
  uint64_t bytes_placed = 0, bytes_total = 0;
};

struct RunHooks {
  // Progress: transport name and where the run is.
  std::function<void(const std::string&, const RunProgress&)> progress;
  // Writes a pcap of these hosts to pcap_path (empty = none).
  std::string pcap_path;
  std::vector<HostId> pcap_hosts;
  // Writes the event log (transport/event_log.h) of these hosts' engines to qlog_path (empty =
  // none).
  std::string qlog_path;
  std::vector<HostId> qlog_hosts;
  // The blocks layout (SimConfig::block_partitions), and the other ranks of a distributed
  // run (implies blocks; every rank calls run_transport alike).
  bool block_partitions = false;
  RankExchange* exchange = nullptr;
  // Called once the run has stopped, before its results are copied out (mrc-sim
  // --measure-rank reads the process's memory here).
  std::function<void(const Simulation&)> after_run;
};

// Why the scenario cannot run in the blocks layout (the layout of mpirun runs and of serial
// mrc-sim runs by default), or empty: it needs topo.link_delay > 0 (the lookahead).
std::string blocks_layout_limit(const Scenario& sc);

// One transport of the scenario, start to end.
SimResult<TransportResult> run_transport(const Scenario& sc, const TransportRun& run,
                                         const RunHooks& hooks = {});

}  // namespace mrc::sim
