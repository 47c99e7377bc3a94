// The simulator's error type: every fallible call in src/sim returns SimResult / SimStatus.
//
// The core reports bare `mrc::Error` codes; the simulator's callers need to know *what* was
// wrong ("f.toml:7: fault 'link_down' on p0/leaf9-spine0: ...", "topo.hosts_per_leaf 40 must be
// below topo.radix 32"), so src/sim returns SimError, a code plus a message for a person, as
// src/net does with NetError. The code is the core's vocabulary (kInvalidArgument for bad input,
// kTooBig for what exceeds a limit, kIoError for a file, or the engine's own code). Nothing
// here throws.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "common/types.h"

namespace mrc::sim {

struct SimError {
  Error code = Error::kInvalidArgument;
  std::string message;
};

template <typename T>
using SimResult = std::expected<T, SimError>;
using SimStatus = std::expected<void, SimError>;

inline std::unexpected<SimError> sim_fail(Error code, std::string message) {
  return std::unexpected<SimError>(SimError{code, std::move(message)});
}
// Bad input (a scenario, workload, fault or configuration value): kInvalidArgument.
inline std::unexpected<SimError> sim_fail(std::string message) {
  return sim_fail(Error::kInvalidArgument, std::move(message));
}
// `e` with `context` before its message ("workload: " + message), its code kept.
inline std::unexpected<SimError> sim_fail(std::string_view context, const SimError& e) {
  return sim_fail(e.code, std::string(context) + e.message);
}

}  // namespace mrc::sim
