// mrc-fabric's APPLY half (root): builds a planned fabric (net/fabric.h) in network
// namespaces, removes it, injects faults and reads its state back. A fabric is recorded in
// /run/mrc-fabric/<name>/: fabric.json (the description, docs/fabric.md), faults.json, and
// the pid files of background flappers.
#pragma once

#include <csignal>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "net/fabric.h"
#include "net/sockets.h"

namespace mrc::net {

// Can this process build fabrics (root, `ip netns` works)? The message says why not.
NetStatus check_privileges();

std::string state_dir(std::string_view name);  // /run/mrc-fabric/<name>

struct UpOptions {
  bool replace = false;  // tear down an existing fabric of that name first
  // `up` returns once every path forwards (fabric_probe.h wait_until_forwarding), or fails
  // and removes the fabric after this long. 0 skips the check.
  int forwarding_timeout_ms = 10'000;
  // Polled between steps: when it turns true (a signal handler sets it), `up` stops, removes
  // what it built and fails with "interrupted".
  const volatile std::sig_atomic_t* interrupted = nullptr;
};

// Builds the fabric on `spec.dataplane`, kAuto resolved first (net/dataplane.h); the returned
// plan's spec names the data plane built. The state directory and an "incomplete" marker come
// first, fabric.json last, so a fabric whose `up` was killed part-way is seen as such by `status`
// and removed by `down`; on any failure (or interruption) `up` removes what it built itself.
NetResult<FabricPlan> fabric_up(const FabricSpec& spec, const UpOptions& options = {});
// Removes every namespace of the fabric (found by name pattern), background flappers, and the
// state directory. Idempotent. Returns the number of namespaces removed. Processes still
// running inside keep their namespace alive after its name is gone: with `kill_processes`
// they get SIGTERM, and SIGKILL after a second.
NetResult<int> fabric_down(std::string_view name, bool kill_processes = false);
// The pids of processes running in any namespace of the fabric.
std::vector<int> fabric_processes(std::string_view name);
// The namespaces of fabric `name` that exist now (by name pattern, is_fabric_namespace).
std::vector<std::string> fabric_namespaces(std::string_view name);
// The plan of a running fabric, from its fabric.json. A fabric whose `up` did not finish
// (namespaces without fabric.json) is an error that says so and how to remove it.
NetResult<FabricPlan> load_fabric(std::string_view name);
NetResult<FaultState> load_faults(std::string_view name);

NetStatus set_link_admin(const FabricPlan& plan, std::string_view link, bool up);
// `target` is a link name or a switch id ("p0-s1", "p0-l0").
NetStatus set_blackhole(const FabricPlan& plan, std::string_view target, bool on);
NetStatus set_loss(const FabricPlan& plan, std::string_view link, int percent);
// rate_bps 0 = back to the fabric's rate (or unlimited).
NetStatus set_rate(const FabricPlan& plan, std::string_view link, uint64_t rate_bps);

// Toggles a link: down for half of `period_us`, up for the other half, `count` times (0 =
// until `duration_us` passes, or forever when both are 0, or until SIGINT/SIGTERM). Always
// leaves the link up.
NetStatus flap_link(const FabricPlan& plan, std::string_view link, uint64_t period_us, int count,
                    uint64_t duration_us);

// Per-link counters and fault state (the `status` command), from every namespace.
NetResult<nlohmann::ordered_json> fabric_status(const FabricPlan& plan);

// The fabric interfaces in `ns` that are administratively down.
NetResult<std::set<std::string>> down_interfaces(const FabricPlan& plan, std::string_view ns);

}  // namespace mrc::net
