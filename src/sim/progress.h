// The remaining wall time of a simulator run (mrc-sim's progress line), from how much of the
// workload is done: the payload bytes placed at the receivers against the bytes the workload
// moves in all, or the simulated time against the run's deadline when the workload is bounded
// by time (steady streams).
//
// Why bytes and not flows or simulated time: flows of a permutation or an all-to-all end
// together at the very end, and a collective adds its flows step by step, so flows done say
// little; simulated time runs fast through idle stretches (a retransmission timeout, a
// collective waiting for its slowest rank) and slowly through busy ones. The simulator's cost
// is its events, about a fixed number per packet, so the bytes placed follow the wall time
// closely. The rate is the one over the latest half of the elapsed wall time: the fabric's fill
// at the start and a run's different phases (a fault, a collective's stages) weigh less than
// in the average over the whole run.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "common/types.h"

namespace mrc::sim {

struct EtaEstimate {
  double fraction = 0;            // of the workload done, 0..1 (0 when not known)
  std::optional<double> seconds;  // remaining wall seconds, when they can be estimated
  std::string reason;             // why not, when `seconds` is empty
};

class EtaEstimator {
 public:
  // `total_bytes`: the payload the workload moves in all; `deadline`: the simulated time the
  // workload ends at when it is bounded by time instead. With neither (0, 0), `unknown` says
  // why there is no estimate.
  EtaEstimator(uint64_t total_bytes, Time deadline, std::string unknown);

  // One progress report: wall seconds since the run began, simulated time, bytes placed.
  // No estimate before 1% of the workload or 1 s of wall time (too little to go on), nor while
  // nothing moved over the latest half of the run.
  EtaEstimate update(double wall_seconds, Time now, uint64_t bytes_placed);

 private:
  struct Sample {
    double wall;
    double fraction;
  };
  uint64_t total_bytes_;
  Time deadline_;
  std::string unknown_;
  std::deque<Sample> window_;  // from about half the elapsed wall time on
};

// "12s", "4m05s", "1h02m": a remaining time as the progress line shows it.
std::string format_eta(double seconds);

}  // namespace mrc::sim
