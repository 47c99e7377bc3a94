// On top of FaultNet: a connected QP pair between two engine hosts and a verified
// WRITE / WRITE_IMM workload. Used by the unit, property and scenario tests and by
// tools/mrc-pair.
//
// connect_pair() registers one memory region per side, surrounded by guard bytes, creates a
// QP on each host and moves both RESET -> INIT -> RTR -> RTS; the paths come from an EV
// profile constructor (ev::make_stev_profile / make_srv6_profile / make_udp_profile), so entry i
// is on port i % planes.
//
// run_workload() posts a list of messages on A toward B (receives for immediates posted on B
// in advance), runs the network until everything completes or a simulated time limit, and
// checks, as completions are polled and at the end:
//   - every posted WR completes exactly once at the requester; requester completions come in
//     posting order;
//   - a successful requester completion, and every receive completion at B, finds the
//     destination bytes of its message (and, for a receive, of every earlier message) already
//     placed: no completion before its data;
//   - immediates arrive exactly once, in posting order, on the receives in posting order,
//     with the message's length;
//   - at the end: the bytes of every successful message equal the source; bytes of failed
//     messages are either source or untouched; gaps between messages, guard bytes around
//     both regions and the whole source region are untouched;
//   - engine high-water marks stay within MPR and WIMM; nothing was dropped from the
//     completion queue; the network saw no engine contract violation.
// Every violation becomes a readable line in WorkloadResult::failures.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support/fault_net.h"

namespace mrc::testnet {

// The fill pattern of guard bytes and gaps (position-dependent, so a shifted write shows).
uint8_t guard_byte(uint64_t i);

// A registered buffer with `guard` pattern bytes on each side. Move-only: the engine holds a
// pointer into `backing`.
class GuardedRegion {
 public:
  GuardedRegion() = default;
  GuardedRegion(uint64_t length, uint64_t guard, uint64_t iova);
  GuardedRegion(GuardedRegion&&) = default;
  GuardedRegion& operator=(GuardedRegion&&) = default;
  GuardedRegion(const GuardedRegion&) = delete;
  GuardedRegion& operator=(const GuardedRegion&) = delete;

  uint8_t* data() { return backing_.data() + guard_; }
  const uint8_t* data() const { return backing_.data() + guard_; }
  uint64_t length() const { return length_; }
  uint64_t iova() const { return iova_; }
  // Index of the first guard byte that changed, or -1 if all are intact.
  int64_t first_bad_guard() const;

  MemoryKeys keys;

 private:
  std::vector<uint8_t> backing_;
  uint64_t guard_ = 0;
  uint64_t length_ = 0;
  uint64_t iova_ = 0;
};

struct PairConfig {
  uint8_t planes = 2;  // NIC ports per host
  uint32_t evs = 16;   // paths per QP over all planes (RoCE uses the first)
  ev::FormatMode ev_format = ev::FormatMode::kStev;  // kStev, kSrv6 or kUdp
  TransportMode transport = TransportMode::kMrc;
  CcAlgorithm cc = CcAlgorithm::kNscc;
  uint64_t fixed_window = 1 << 20;  // bytes, for CcAlgorithm::kFixedWindow
  Time base_rtt = 0;                // NSCC base RTT; 0 = derived from the network
  uint32_t ev_min_active = 1;
  PathPolicy path_policy;
  uint32_t path_mtu = 4096;
  uint8_t mpr = 8;
  uint8_t mpr_dest = 8;
  uint16_t max_wimm = 64;
  uint16_t max_wimm_dest = 64;
  uint8_t timeout = 14;
  uint8_t retry_linear = 7;
  uint8_t retry_exp = 7;
  Time reorder_window = 0;
  Time fabric_rtt = 0;  // EngineConfig::fabric_rtt of both engines
  Time probe_budget_interval = EngineConfig{}.probe_budget_interval;  // both engines
  uint32_t probe_budget_burst = EngineConfig{}.probe_budget_burst;
  uint32_t psn_a = 0;  // first PSN A sends (B's rq_psn)
  uint32_t psn_b = 0;  // first PSN B sends (A's rq_psn)
  uint32_t sq_depth = 256;
  uint32_t rq_depth = 256;
  uint64_t region_bytes = 1 << 20;  // registered bytes per side
  uint64_t guard_bytes = 256;
  uint64_t iova_a = 0x1000'0000;
  uint64_t iova_b = 0x2000'0000;
};

// An EngineConfig matching a pair config (ports = planes), sized for a few QPs so that tests
// creating thousands of engines stay cheap.
EngineConfig pair_engine_config(const PairConfig& cfg, uint64_t seed);

struct QpEnd {
  HostId host = 0;
  uint32_t qpn = 0;
  GuardedRegion region;
};

struct Pair {
  QpEnd a;  // requester in run_workload
  QpEnd b;  // responder
  PairConfig cfg;
};

// The QP attributes connect_pair uses for `self` (toward `peer`), paths included.
Result<QpAttr> pair_qp_attr(const FaultNet& net, const PairConfig& cfg, bool side_a, HostId peer,
                            uint32_t dest_qpn);

// Creates and connects a QP on each of hosts a and b (engine hosts). Errors: whatever the
// EV profile constructors, register_memory, create_qp or modify_qp return.
Result<Pair> connect_pair(FaultNet& net, HostId a, HostId b, const PairConfig& cfg);

// Two engine hosts (seeds derived from `seed`) plus a connected pair. The network is heap
// allocated so the Pair's regions and the engines stay put.
struct PairNet {
  std::unique_ptr<FaultNet> net;
  Pair pair;
};
Result<PairNet> make_pair_net(const NetConfig& net_cfg, const PairConfig& cfg);

struct MessageSpec {
  WrOpcode opcode = WrOpcode::kWrite;
  uint64_t size = 0;
};

struct Workload {
  std::vector<MessageSpec> messages;  // posted in order on A, written into B
  uint64_t gap_bytes = 64;            // pattern-filled gap before each message in B
  uint64_t data_seed = 1;             // source bytes
  Time linger = us(20);               // keep running after the last completion (late dups)
  bool verbose = false;               // print failures as they happen (stderr)
};

// Registered bytes each side needs for `w`.
uint64_t region_bytes_for(const Workload& w);

struct WrOutcome {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kWrite;
  uint64_t size = 0;
  uint64_t offset = 0;  // in both regions
  bool posted = false;
  int completions = 0;  // requester completions (must end at 1)
  WcStatus status = WcStatus::kSuccess;
  Time posted_at = 0;
  Time completed_at = kNever;
  int recv_completions = 0;  // WRITE_IMM: receive completions at B
};

struct WorkloadResult {
  RunStatus run_status = RunStatus::kIdle;
  bool all_completed = false;  // every WR completed once (+ every imm if successful)
  std::vector<WrOutcome> wrs;
  std::vector<uint64_t> completion_order;  // requester wr_ids, in poll order
  std::vector<uint32_t> imm_order;         // immediates at B, in poll order
  uint64_t successes = 0;
  uint64_t errors = 0;    // requester completions with an error status
  uint64_t unposted = 0;  // WRs post_write refused (QP in ERR)
  uint64_t recv_completions = 0;
  uint64_t bytes_verified = 0;                   // bytes of successful messages equal at the end
  std::vector<std::pair<HostId, Event>> events;  // every async event, both hosts
  std::vector<std::string> failures;             // every violated expectation
  Time start = 0;                                // first post
  Time end = 0;                                  // last requester completion
  double goodput_gbps = 0;                       // successful bytes / (end - start)
  EngineCounters a;                              // engine counters at the end (whole engines)
  EngineCounters b;
  NetCounters net;
  QpState final_a = QpState::kReset;
  QpState final_b = QpState::kReset;
  bool ok() const { return failures.empty(); }
};

// Runs `w` over `pair` until done or until net.now() reaches `time_limit` (absolute).
// The pair's regions must hold region_bytes_for(w).
WorkloadResult run_workload(FaultNet& net, Pair& pair, const Workload& w, Time time_limit);

// Several pairs at once (workloads[i] on pairs[i]), e.g. two QPs between the same engines or
// one in each direction. The engine limit checks use each pair's own MPR/WIMM against the
// engine-wide high-water marks, so give every pair sharing an engine the same limits.
std::vector<WorkloadResult> run_workloads(FaultNet& net, std::span<Pair* const> pairs,
                                          std::span<const Workload> workloads, Time time_limit);

// One line per non-zero counter, for failure messages.
std::string describe(const EngineCounters& c);
std::string describe(const NetCounters& c);

}  // namespace mrc::testnet
