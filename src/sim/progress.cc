#include "sim/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace mrc::sim {

namespace {
constexpr double kMinFraction = 0.01;
constexpr double kMinWallSeconds = 1.0;
}  // namespace

EtaEstimator::EtaEstimator(uint64_t total_bytes, Time deadline, std::string unknown)
    : total_bytes_(total_bytes), deadline_(deadline), unknown_(std::move(unknown)) {}

EtaEstimate EtaEstimator::update(double wall_seconds, Time now, uint64_t bytes_placed) {
  EtaEstimate e;
  if (total_bytes_ > 0)
    e.fraction =
        std::min(1.0, static_cast<double>(bytes_placed) / static_cast<double>(total_bytes_));
  else if (deadline_ > 0)
    e.fraction = std::min(1.0, static_cast<double>(now) / static_cast<double>(deadline_));
  else {
    e.reason = unknown_;
    return e;
  }
  // The window: the latest sample at or before half the elapsed time, and every one after.
  window_.push_back({wall_seconds, e.fraction});
  while (window_.size() > 2 && window_[1].wall <= wall_seconds / 2)
    window_.pop_front();
  if (e.fraction < kMinFraction || wall_seconds < kMinWallSeconds) {
    e.reason = "ETA from 1% and 1 s on";
    return e;
  }
  const Sample& from = window_.front();
  const double done = e.fraction - from.fraction, took = wall_seconds - from.wall;
  if (window_.size() < 2 || done <= 0 || took <= 0) {
    // The first report past the thresholds, or nothing done over the latest half of the run:
    // the whole run's average rate, if any.
    if (window_.size() < 2 && e.fraction > 0) {
      e.seconds = wall_seconds * (1 - e.fraction) / e.fraction;
      return e;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "no ETA: nothing done for %.0f s", took);
    e.reason = buf;
    return e;
  }
  e.seconds = took * (1 - e.fraction) / done;
  return e;
}

std::string format_eta(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  return buf;
}

}  // namespace mrc::sim
