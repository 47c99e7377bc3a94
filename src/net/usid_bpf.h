// The eBPF uN data plane of mrc-fabric (root): src/net/bpf/usid_end.bpf.c, compiled with
// clang's BPF target at build time and carried inside this library, loaded through libbpf.
//
// One UsidEndProgram per switch: load() creates the program and its maps and writes the
// switch's SID into them; attach() puts it at the clsact ingress of each interface in the
// switch's namespace, where it shifts uSID carriers addressed to the switch before the kernel
// routes them (seg6local End with NEXT-C-SID, done in eBPF). Once attached, the program lives
// as long as the interfaces; the object here can go. run() feeds one frame through the loaded
// program (BPF_PROG_TEST_RUN), which is how the tests check it against wire/usid.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/sockets.h"
#include "wire/headers.h"

namespace mrc::net {

// Built with the eBPF plane (clang and libbpf were found at build time).
bool usid_bpf_built();

struct UsidBpfCounters {
  uint64_t shifted = 0;       // carriers shifted to the next uSID
  uint64_t segment_next = 0;  // end of carrier, the next SRH segment copied in
  uint64_t dropped = 0;       // end of carrier without a segment left, or a bad SRH
  friend bool operator==(const UsidBpfCounters&, const UsidBpfCounters&) = default;
};

// What the program did to one frame (tc verdict: 0 TC_ACT_OK, 2 TC_ACT_SHOT).
struct UsidBpfRun {
  int verdict = 0;
  std::vector<uint8_t> frame;  // the frame after the program
};
inline constexpr int kTcActOk = 0;
inline constexpr int kTcActShot = 2;

class UsidEndProgram {
 public:
  // Loads one instance for the switch owning `sid` (its first 48 bits: block and uSID). The
  // error says what the kernel or libbpf refused (no CAP_BPF, no BPF syscall, verifier).
  static NetResult<UsidEndProgram> load(const wire::Ipv6Addr& sid);

  UsidEndProgram(UsidEndProgram&&) noexcept;
  UsidEndProgram& operator=(UsidEndProgram&&) noexcept;
  ~UsidEndProgram();

  // Attaches at the clsact ingress of each interface of `ns` (created if missing; an earlier
  // filter of ours is replaced).
  NetStatus attach(const std::string& ns, const std::vector<std::string>& interfaces) const;
  NetResult<UsidBpfRun> run(const std::vector<uint8_t>& frame) const;
  NetResult<UsidBpfCounters> counters() const;

 private:
  struct Impl;
  explicit UsidEndProgram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The counters of the program attached at `interface` in `ns` (status), or an error when none
// is attached there.
NetResult<UsidBpfCounters> attached_usid_counters(const std::string& ns,
                                                  const std::string& interface);

}  // namespace mrc::net
