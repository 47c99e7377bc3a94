// Which of mrc-fabric's data planes this kernel can run (root): each is tried for real in a
// throwaway network namespace, and what fails is named with the kernel option or package that
// would make it work (docs/fabric.md, "Data planes").
#pragma once

#include <string>
#include <vector>

#include "net/fabric.h"
#include "net/sockets.h"

namespace mrc::net {

struct DataPlaneCheck {
  DataPlane plane = DataPlane::kKernel;
  bool usable = false;
  std::string reason;  // why not, with what to do; empty when usable
};

// kernel: a seg6local End route with the NEXT-C-SID flavour is accepted; bpf: the uN program
// loads and attaches at a veth's clsact ingress; ecmp: a multipath route is accepted. In that
// order.
NetResult<std::vector<DataPlaneCheck>> probe_dataplanes();

// The data plane `up` builds: `requested` itself when this kernel can run it (else an error
// saying what is missing), or for kAuto the kernel's SRv6 if it works, else eBPF, else an
// error naming the missing kernel options. (ECMP is never chosen for kAuto: it has no source
// routing, which a user asking for a fabric without saying otherwise expects.)
NetResult<DataPlane> resolve_dataplane(DataPlane requested);

}  // namespace mrc::net
