// Scenario files (TOML) for mrc-sim: topology + switches + the transports to compare +
// workload + faults + seed + run limits, with `--set key=value` overrides. The format is
// documented in docs/simulator.md; every key (type, range, unit, default, doc, the kinds it
// is for) is in the table of sim/scenario_schema.h.
//
// Units: durations, rates and sizes are written with their unit, as strings ("1us", "2.5ms",
// "400Gbps", "16MiB"); sizes may also be a plain integer count of bytes, and a duration of 0
// may be written as 0. Counts (hosts, planes, ...) are plain integers.
//
// Errors are values carrying a message for a person: "<file>:<line>: key 'topo.hosts':
// expected a positive integer, got string \"many\"". Unknown keys are errors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/simulation.h"
#include "sim/workloads.h"

namespace mrc::sim {

struct WorkloadConfig {
  enum Kind : uint8_t {
    kPermutation,
    kUniform,
    kIncast,
    kAllToAll,
    kAllReduce,
    kTraining,
    kHtsim,
    kSteady,  // long-running streams of messages (SteadyStreams) over a permutation
    kFlows,   // an explicit list of flows or streams, optionally with pinned EVs
  } kind = kPermutation;
  uint64_t size = 1 << 20;  // bytes per flow (permutation/uniform/incast) or per rank
  Time start = 0;
  uint32_t flows = 0;         // uniform: number of flows (0 = one per host)
  Time spread = 0;            // uniform: start times spread over [start, start + spread)
  uint32_t senders = 0;       // incast (0 = every other host)
  HostId dst = 0;             // incast
  uint32_t ranks = 0;         // collectives: the first `ranks` hosts (0 = all hosts)
  std::vector<HostId> group;  // collectives: explicit ranks (overrides `ranks`)
  uint32_t iterations = 1;    // training
  Time compute = 0;           // training: compute time per iteration
  // allreduce, training: the flat ring or the two-level ring of `row` ranks per row.
  enum Algorithm : uint8_t { kRing, kRing2d } algorithm = kRing;
  uint32_t row = 0;    // ring2d: ranks per row (consecutive ranks of the group)
  std::string file;    // htsim: .cm path (relative paths: to the scenario file)
  Time until = 0;      // steady: no message starts at or after this time
  uint32_t depth = 2;  // steady, flows: messages in flight per stream
  // flows: [[workload.flow]] entries. A flow with `until` is a stream of messages until then.
  struct Flow {
    HostId src = 0, dst = 0;
    uint64_t size = 1 << 20;
    Time start = 0;
    Time until = 0;                       // 0: one message
    std::vector<PathRef> paths;           // pinned EVs (empty: the transport's own)
    std::vector<std::string> path_names;  // as written
    std::vector<PathRef> backup_paths;    // pinned backup EVs (need `paths`)
    std::vector<std::string> backup_path_names;
    uint32_t line = 0;
  };
  std::vector<Flow> flow_list;
};
const char* workload_kind_name(WorkloadConfig::Kind k);
const char* allreduce_algorithm_name(WorkloadConfig::Algorithm a);  // "ring", "ring2d"

struct FaultConfig {
  enum Kind : uint8_t {
    kLinkDown,
    kLinkUp,
    kSwitchReboot,
    kBlackhole,
    kBlackholeSwitch,
    kGrayLoss,
    kDegrade,
    kFlap,
    kPathLoss,         // loss on one path (EV) of one pair only
    kBlackholeReboot,  // a switch stops forwarding, then is rebooted
  } kind = kLinkDown;
  LinkRef link;                // the link (with `links`: the first)
  std::vector<LinkRef> links;  // link faults: every link it acts on (`link` or `links`)
  SwitchRef sw;
  HostId src = 0, dst = 0;  // path_loss: the pair
  PathRef path;             // path_loss: the spine (plane, spine) its EV names
  Time reboot_at = 0;       // blackhole_reboot: forwarding stops at `at`, the reboot starts here
  Time at = 0;
  Time until = kNever;     // blackhole, blackhole_switch, gray_loss, degrade
  Time duration = 0;       // switch_reboot, blackhole_reboot (the reboot's length)
  Time period = 0;         // flap
  uint32_t count = 0;      // flap
  double probability = 0;  // gray_loss
  uint64_t rate_bps = 0;   // degrade
  Time nic_detect = 0;     // link_down, link_up, flap on host links: when the NIC sees it
  std::string target;      // the link(s), switch or path as written ("p0/leaf1-spine2")
  bool listed = false;     // the links were written as `links` (an array), not `link`
  uint32_t line = 0;
};
const char* fault_kind_name(FaultConfig::Kind k);

// One run of the comparison: a transport kind and the complete configuration it runs with.
struct TransportRun {
  std::string name;  // "mrc", "mrc_oblivious", "roce", "roce_pfc"
  SimConfig config;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source;  // file path, or "<default>"
  uint64_t seed = 1;
  SimConfig base;  // topo, switch, transport settings shared by every run
  std::vector<std::string> kinds;
  std::string cc = "default";  // as written: "default" = NSCC for MRC, DCQCN for RoCE
  // transport.qps_per_flow written as a table per kind ({roce = 8}): those kinds' values
  // (the others keep base.transport.qps_per_flow, 1). Empty when written as one integer.
  std::map<std::string, uint32_t> qps_per_kind;
  std::vector<TransportRun> runs;  // one per kind, in order
  WorkloadConfig workload;
  std::vector<FaultConfig> faults;
  Time until = kNever;                 // run limit in simulated time per transport
  std::vector<std::string> overrides;  // the --set arguments applied, in order
};

// Parses a scenario; `overrides` are "dotted.key=value" strings applied on top of the file
// (value: a TOML value; a bare word is a string; [a, b] of bare words is an array of strings).
SimResult<Scenario> parse_scenario(std::string_view toml_text, std::string_view filename,
                                   const std::vector<std::string>& overrides = {});
SimResult<Scenario> load_scenario(const std::string& path,
                                  const std::vector<std::string>& overrides = {});

// The embedded default scenario (a small multi-plane fabric, a permutation, MRC against
// RoCEv2/ECMP and MRC oblivious, a leaf-spine link failure mid-run).
std::string_view default_scenario_toml();
SimResult<Scenario> default_scenario(const std::vector<std::string>& overrides = {});

// Names: "p0/leaf3-spine7" (also "p0/leaf3->spine7"), "p1/host5" (host-leaf link),
// "p0/spine2", "p0/leaf1".
SimResult<LinkRef> parse_link_name(std::string_view s);
SimResult<SwitchRef> parse_switch_name(std::string_view s);
std::string link_name(const LinkRef& l);
std::string switch_name(const SwitchRef& s);

// Units ("1.5us" -> ps, "400Gbps" -> bit/s, "4KiB" -> bytes). Errors say what was expected.
SimResult<Time> parse_duration(std::string_view s);
SimResult<uint64_t> parse_rate(std::string_view s);
SimResult<uint64_t> parse_size(std::string_view s);
std::string format_duration(Time t);  // "1.5us", "never"
std::string format_rate(uint64_t bps);
std::string format_size(uint64_t bytes);

}  // namespace mrc::sim
