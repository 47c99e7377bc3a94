// Data plane detection (net/dataplane.h).
#include "net/dataplane.h"

#include <unistd.h>

#include "net/netns_exec.h"
#include "net/usid_bpf.h"

namespace mrc::net {

namespace {

std::unexpected<NetError> dataplane_error(std::string msg) {
  return net_fail(NetErrc::kSystem, std::move(msg));
}

// The probe namespace: two veths (dpa, dpb) up, each with an address, nothing else. Always
// "name X" and "dev X": ip reads a bare name that abbreviates a keyword as the keyword.
constexpr const char* kProbeSetup[] = {
    "link set dev lo up",
    "link add name dpa type veth peer name dpb",
    "addr add fd99:0:0:a::1/64 dev dpa nodad",
    "addr add fd99:0:0:b::1/64 dev dpb nodad",
    "link set dev dpa up",
    "link set dev dpb up",
};

DataPlaneCheck check_kernel(const std::string& ns) {
  DataPlaneCheck c{DataPlane::kKernel, false, {}};
  auto r = run_command(
      {"ip", "-6", "route", "add", "fcbb:bbff:8000::/48", "encap", "seg6local", "action", "End",
       "flavors", "next-csid", "lblen", "32", "nflen", "16", "dev", "dpa"},
      {}, ns);
  if (!r) {
    c.reason = r.error().message;
  } else if (r->exit_code != 0) {
    const std::string said = trimmed(r->err);
    if (said.find("lwt encapsulation type not supported") != std::string::npos ||
        said.find("Operation not supported") != std::string::npos)
      c.reason = "the kernel has no SRv6 seg6local routes (\"" + said +
                 "\"): it needs CONFIG_IPV6_SEG6_LWTUNNEL, Linux >= 6.1 for the NEXT-C-SID flavour";
    else if (said.find("flavors") != std::string::npos ||
             said.find("next-csid") != std::string::npos ||
             said.find("Unknown") != std::string::npos ||
             said.find("Error: argument") != std::string::npos)
      c.reason =
          "iproute2 cannot set SRv6 End flavours (\"" + said + "\"): it needs iproute2 >= 6.1";
    else
      c.reason = "a seg6local End route was refused: " + said;
  } else {
    c.usable = true;
  }
  return c;
}

DataPlaneCheck check_bpf(const std::string& ns) {
  DataPlaneCheck c{DataPlane::kBpf, false, {}};
  if (!usid_bpf_built()) {
    c.reason =
        "this build has no eBPF data plane (clang and libbpf-dev were missing at build "
        "time: run scripts/setup.sh)";
    return c;
  }
  auto prog = UsidEndProgram::load(*parse_ipv6("fcbb:bbff:8000::"));
  if (!prog) {
    c.reason = prog.error().message +
               " (the eBPF plane needs CONFIG_BPF_SYSCALL, and "
               "CONFIG_BPF_JIT for speed)";
    return c;
  }
  if (auto ok = prog->attach(ns, {"dpa", "dpb"}); !ok) {
    c.reason = ok.error().message;
    return c;
  }
  c.usable = true;
  return c;
}

DataPlaneCheck check_ecmp(const std::string& ns) {
  DataPlaneCheck c{DataPlane::kEcmp, false, {}};
  auto r =
      run_command({"ip", "-6", "route", "add", "fcbb:bbff:4000::/48", "nexthop", "via",
                   "fd99:0:0:a::2", "dev", "dpa", "nexthop", "via", "fd99:0:0:b::2", "dev", "dpb"},
                  {}, ns);
  if (!r) {
    c.reason = r.error().message;
  } else if (r->exit_code != 0) {
    c.reason = "a multipath route was refused (\"" + trimmed(r->err) +
               "\"): the kernel needs CONFIG_IP_ROUTE_MULTIPATH";
  } else {
    c.usable = true;
  }
  return c;
}

}  // namespace

NetResult<std::vector<DataPlaneCheck>> probe_dataplanes() {
  if (geteuid() != 0) return dataplane_error("probing data planes needs root");
  const std::string ns = "mrc-dpprobe-" + std::to_string(getpid());
  (void)ip_batch({}, {"netns del " + ns}, /*force=*/true);
  if (auto ok = ip_batch({}, {"netns add " + ns}); !ok)
    return dataplane_error("cannot create a network namespace to probe in: " + ok.error().message +
                           " (the kernel needs CONFIG_NET_NS)");
  std::vector<DataPlaneCheck> checks;
  std::vector<std::string> setup(std::begin(kProbeSetup), std::end(kProbeSetup));
  if (auto ok = ip_batch(ns, setup); !ok) {
    (void)ip_batch({}, {"netns del " + ns}, true);
    return dataplane_error("cannot make a veth pair to probe on: " + ok.error().message +
                           " (the kernel needs CONFIG_VETH)");
  }
  checks.push_back(check_kernel(ns));
  checks.push_back(check_bpf(ns));
  checks.push_back(check_ecmp(ns));
  (void)ip_batch({}, {"netns del " + ns}, true);
  return checks;
}

NetResult<DataPlane> resolve_dataplane(DataPlane requested) {
  auto checks = probe_dataplanes();
  if (!checks) return std::unexpected(checks.error());
  const auto find = [&](DataPlane d) -> const DataPlaneCheck& {
    for (const auto& c : *checks)
      if (c.plane == d) return c;
    return checks->front();
  };
  if (requested != DataPlane::kAuto) {
    const DataPlaneCheck& c = find(requested);
    if (c.usable) return requested;
    return dataplane_error("data plane '" + std::string(dataplane_name(requested)) +
                           "' cannot run here: " + c.reason);
  }
  for (DataPlane d : {DataPlane::kKernel, DataPlane::kBpf})
    if (find(d).usable) return d;
  return dataplane_error(
      "no source-routing data plane can run here: kernel: " + find(DataPlane::kKernel).reason +
      "; bpf: " + find(DataPlane::kBpf).reason +
      (find(DataPlane::kEcmp).usable
           ? " (--dataplane ecmp works: hashed ECMP without source routing)"
           : ""));
}

}  // namespace mrc::net
