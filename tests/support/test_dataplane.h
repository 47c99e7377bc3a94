// The data plane a namespace test runs on. ctest registers each namespace test program once
// per data plane (tests/CMakeLists.txt: NAME.kernel, NAME.bpf, NAME.ecmp) with
// MRC_TEST_DATAPLANE set; run by hand without it, a program takes what `up --dataplane auto`
// takes. A data plane this kernel cannot run skips every test of the program with one line
// that ctest's SKIP_REGULAR_EXPRESSION recognises ("data plane '...' cannot run here: why").
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "net/dataplane.h"
#include "net/fabric.h"

namespace mrc::test {

struct TestDataPlane {
  net::DataPlane plane = net::DataPlane::kAuto;
  std::string skip_reason;  // empty when the tests can run
};

// Resolves MRC_TEST_DATAPLANE on this kernel (root needed to probe; the caller checks root
// first and skips with its own reason).
inline TestDataPlane test_dataplane() {
  TestDataPlane t;
  const char* env = std::getenv("MRC_TEST_DATAPLANE");
  const std::string requested = env && *env ? env : "auto";
  const auto parsed = net::parse_dataplane(requested);
  if (!parsed) {
    t.skip_reason = "data plane '" + requested +
                    "' cannot run here: MRC_TEST_DATAPLANE must be auto, kernel, bpf or ecmp";
    return t;
  }
  auto resolved = net::resolve_dataplane(*parsed);
  if (!resolved) {
    t.skip_reason = resolved.error().message;
    if (t.skip_reason.find("cannot run here") == std::string::npos)
      t.skip_reason = "data plane '" + requested + "' cannot run here: " + t.skip_reason;
    return t;
  }
  t.plane = *resolved;
  return t;
}

// mrc-perf's EV mode for a data plane when a test does not choose one: SRV6 (the default)
// where the switches source-route, UDP (the EV in the UDP source port) on hashed ECMP.
inline std::vector<std::string> default_ev_mode_args(net::DataPlane d) {
  if (net::has_source_routing(d)) return {};
  return {"--ev-mode", "udp"};
}

}  // namespace mrc::test
