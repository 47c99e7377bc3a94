// One end of an MRC connection over the Linux driver: an engine, its UdpDriver, a registered
// buffer and N QPs, set up from the two hellos exchanged over the side channel. mrc-perf and
// the tests share it; the side channel itself (who sends first, test rounds) is the caller's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "net/hello.h"
#include "net/path_plan.h"
#include "net/udp_driver.h"

namespace mrc::net {

// The window of a software path (a host stack at both ends; docs/linux-driver.md, "Goodput"):
// the RTT the congestion control sees is the peer's scheduling delay (ms on a loaded host), not
// a fabric's 50 us. NSCC's max_cwnd is 1.5 x base_rtt x link: at 50 us it capped the window at
// ~190 KB and every ACK released a few packets. 2,048 PSNs (mpr 16: 8 MiB at 4 KiB) fit the
// driver's 32 MiB socket buffers. mrc-perf's defaults and the libfabric provider's.
inline constexpr Time kSoftwarePathBaseRtt = us(2000);
inline constexpr uint8_t kSoftwarePathMpr = 16;
// Receive coalescing on a software path (DriverConfig::rx_coalesce): a stream is read in turns
// at most this often, so the responder sends fewer ACKs, each of which crosses every hop of a
// namespace fabric as dearly as a data packet. A lone datagram is never held.
inline constexpr Time kSoftwarePathRxCoalesce = us(250);

struct SessionConfig {
  DriverConfig driver;                             // ports, EV mode, ICRC, busy poll
  std::vector<uint16_t> leaf_usids;                // per plane (empty / 0: unknown)
  std::vector<std::vector<uint16_t>> spine_usids;  // per plane (empty: none known)
  uint32_t evs_per_plane = 8;
  uint32_t qps = 1;
  uint32_t mtu = 4096;
  uint8_t mpr = 8;         // our requester window and what we accept as responder
  uint16_t max_wimm = 64;  // likewise for WRITE_IMM
  CcAlgorithm cc = CcAlgorithm::kNscc;
  uint64_t link_bps = 10'000'000'000ull;  // per plane, for the CC's BDP
  Time base_rtt = us(50);                 // unloaded RTT, for NSCC
  uint64_t buffer_bytes = 1 << 20;        // registered buffer (both directions)
  uint32_t sq_depth = 256;
  uint32_t rq_depth = 1024;
  // RACK reordering window; 0 = the engine's adaptive one (one min RTT, widened on each
  // false loss). The driver hands packets over in kernel arrival order across planes, so a
  // software path needs no constant of its own (docs/linux-driver.md).
  Time reorder_window = 0;
  // Between probes of a path taken out of use. The engine's 50 us default suits hardware
  // RTTs; a software path whose RTT is a scheduling delay would flood a dead path with
  // probes (a blackholed spine drew 136,638 probes in 6 s and goodput fell fivefold).
  Time probe_interval = ms(1);
  uint8_t timeout = kDefaultAckTimeout;  // ACK timeout exponent (QpAttr::timeout)
  // As responder: an ACK after this many new packets (EngineConfig::ack_every, 1..8).
  uint32_t ack_every = EngineConfig{}.ack_every;
  // Packets in a row on one path (PathPolicy::burst). 1: per-packet spraying. 0: the driver's
  // UDP GSO run (spray_burst(): 15 packets of 4 KiB in STEV/UDP modes, 1 in SRV6 mode), faster
  // but slower to find a failure out (docs/linux-driver.md, "Bursts per path, opt-in").
  uint32_t spray_burst = 1;
  uint64_t seed = 1;  // the engine's generator (path order, probe ids); first PSNs if fixed
  // QPNs, memory keys and first PSNs from the kernel's CSPRNG (secure_random), so that a host
  // that did not see the hellos cannot name them (docs/linux-driver.md, "Security"). false:
  // derived from `seed` (reproducible runs and tests; QPNs and keys count up as in the
  // simulator).
  bool random_identifiers = true;
};

// The peer QP a session QP connects to, as its hello (or another setup exchange) names it.
struct PeerQp {
  uint32_t peer_id = 0;  // QpAttr::peer: the driver's name for the peer (UdpDriver::set_peer)
  uint32_t qpn = 0;
  uint32_t first_psn = 0;
  uint8_t mpr_dest = 0;  // what the peer's responder accepts
  uint16_t max_wimm_dest = 0;
};

// The engine of a session: its ports, seed, identifier key (from the kernel's CSPRNG when
// random_identifiers) and the fabric RTT its QPs start from.
NetResult<EngineConfig> session_engine_config(const SessionConfig& config);

// A session QP's attributes towards `peer`: `paths` (net/path_plan.h), congestion control for
// the session's line rate over every plane and its base RTT, the PSNs, and window limits no
// larger than the peer's responder accepts (as with RDMA's rd_atomic pair). Session::connect
// and the libfabric provider's connections both take them from here.
QpAttr session_qp_attr(const SessionConfig& config, const PeerQp& peer, uint32_t sq_psn,
                       std::vector<PathDesc> paths);

// Anonymous memory of `bytes` bytes, unmapped when the pointer goes.
struct Unmap {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};
using MappedBuffer = std::unique_ptr<uint8_t, Unmap>;

class Session {
 public:
  // Engine, driver (sockets bound), buffer registered, QPs created (RESET).
  static NetResult<std::unique_ptr<Session>> create(const SessionConfig& config);

  // This end's hello (planes with their bound ports, QPNs, buffer, limits).
  Hello hello(HelloRole role) const;
  // Checks the peer's hello against ours (planes, QPs, EV mode, MTU) and moves every QP to
  // RTS with paths towards the peer. kIncompatible with what differs.
  // With SessionConfig::driver.auth, the packet keys must be set first (set_packet_keys), and
  // the peer's hello must ask for the same authentication.
  NetStatus connect(const Hello& peer);
  // The packet keys (net/packet_auth.h, derived in the side channel's --psk handshake).
  NetStatus set_packet_keys(const PacketKeys& keys);

  Engine& engine() { return *engine_; }
  UdpDriver& driver() { return *driver_; }
  const SessionConfig& config() const { return config_; }
  uint8_t* buffer() { return buffer_.get(); }
  // Whether the peer may write the buffer (on after create). Off, its WRITEs are dropped as
  // `bad_rkey` and nothing is placed: a server grants it when the client's test starts.
  NetStatus set_remote_write(bool allowed);
  uint64_t buffer_bytes() const { return config_.buffer_bytes; }
  const MemoryKeys& keys() const { return keys_; }
  const std::vector<uint32_t>& qpns() const { return qpns_; }
  const Hello& peer() const { return peer_; }
  static constexpr uint32_t kPeerId = 1;

  // Engine and driver counters as (name, value) pairs, names stable for scripts:
  // plane<p>_tx_bytes, plane<p>_rx_bytes, retransmits, drop_<reason>, ...
  std::vector<std::pair<std::string, uint64_t>> counters()
      const;  // QpAttr::peer of every QP (one peer per session)

 private:
  SessionConfig config_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<UdpDriver> driver_;
  MappedBuffer buffer_;
  MemoryKeys keys_;
  std::vector<uint32_t> qpns_;
  std::vector<uint32_t> first_psn_;
  Hello peer_;
  bool have_keys_ = false;
};

}  // namespace mrc::net
