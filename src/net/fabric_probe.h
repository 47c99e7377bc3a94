// Reachability probes (root): UDP datagrams between the host namespaces of a running fabric,
// over every SRv6 path and every plain (ECMP) address. Used by `mrc-fabric check`, by
// `mrc-fabric up` to return only once every path forwards, and by the tests.
#pragma once

#include <string>
#include <vector>

#include "net/fabric.h"
#include "net/sockets.h"

namespace mrc::net {

struct Probe {
  int src_host = 0;
  int dst_host = 0;
  int plane = 0;
  enum class Via { kSpine, kSameLeaf, kPlain } via = Via::kPlain;
  int spine = -1;  // kSpine
  int sent = 0;
  int received = 0;
  std::string destination;  // filled in by run_probes

  std::string label() const;
};

// The probes covering every ordered host pair on every plane: one per spine, the same-leaf
// route where the pair shares a leaf (both on the source-routing data planes only), and the
// plain address.
std::vector<Probe> all_probes(const FabricSpec& spec);

// Sends `count` datagrams per probe (zero UDP checksum: the DA changes on the way, so a
// checksum over the sender's DA would be wrong at the receiver), waits up to `wait_ms` after
// the last send for stragglers, and fills in sent/received.
NetStatus run_probes(const FabricPlan& plan, std::vector<Probe>& probes, int count, int wait_ms);

// Probes every path of the fabric, one datagram each, and repeats the lost ones until all
// have arrived or `timeout_ms` has passed. A fresh fabric needs this: the kernel marks a veth's
// routes usable only after its link-watch work has seen the carrier (a deferred work item,
// later on a loaded machine), and drops what it forwards before that. The error names the
// paths still lost. Fabrics with more than `max_probes` paths are probed from host 0 to every
// host and back on every plane, through every spine, which still crosses every link both
// ways.
NetStatus wait_until_forwarding(const FabricPlan& plan, int timeout_ms, size_t max_probes = 4096);

}  // namespace mrc::net
