// The Linux driver: runs one mrc::Engine over UDP/IPv6 sockets (IPv4 for a port with an
// IPv4-mapped address, below), one NIC port (plane) per local address. All I/O of the Linux
// world lives here; the engine stays sans-IO.
//
// Sockets. Each port has a data socket bound to its address (and interface, SO_BINDTODEVICE,
// when named) on its UDP port: it receives everything for the port and sends SRV6-mode
// packets and everything whose path needs no particular source port. The EV chooses the path:
//   SRV6  the destination address is the EV's uSID carrier (bytes 0-15); the kernel's
//         seg6local "End flavors next-csid" forwards on it, so no SRH is needed and every
//         packet of a sendmmsg batch may take another path;
//   STEV  flow label (sin6_flowinfo + IPV6_FLOWINFO_SEND) and UDP source port;
//   UDP   UDP source port.
// A UDP socket sends from the port it is bound to, so for STEV/UDP each distinct EV source
// port gets its own send-only socket on the port's address (created on first use, bound with
// SO_REUSEADDR so two engines on one address may share them). If that bind fails the packet
// leaves from the data socket (counted as src_port_fallbacks).
//
// IPv4. A port whose address is IPv4-mapped (::ffff:a.b.c.d) sends and receives IPv4 through
// the same AF_INET6 sockets, with IPV6_V6ONLY off for that port alone (IPv6 ports stay
// IPv6-only). Its packets leave with the traffic class as the TOS byte (IP_TOS; arrivals
// report it with IP_RECVTOS), DF set (IP_MTU_DISCOVER, as IPV6_DONTFRAG for IPv6), GSO sends
// within one IPv4 packet (kMaxGsoBytesIpv4) and no flow label: STEV's 20 label bits do not
// reach the wire, only its source-port bits steer. The ICRC is computed over the IPv6 form of
// the headers (the mapped addresses) at both ends. SRV6 mode is refused (its EV is an IPv6
// destination address), and both ends of a plane must use one IP version (set_peer).
//
// Wire. A UDP socket carries the transport packet (BTH .. payload, pad, ICRC); the kernel
// builds IPv6 and UDP. The ICRC (wire/codec.h) still covers the invariant IPv6/UDP fields:
// the sender computes it over the headers it knows the kernel will build (its source address
// and port, lengths; destination port written as 4791 whatever the configured port, so a
// test port does not change the CRC), and the receiver rebuilds those headers in front of the
// payload from recvmsg (source address and port, traffic class from IPV6_RECVTCLASS), then
// decodes the whole datagram with wire::decode. ECN CE and the DSCP trimmed mark reach the
// engine that way. Packets leave with ECT(0) (IPV6_TCLASS) so switches mark instead of drop.
// SRV6 mode sends and accepts zero UDP checksums (UDP_NO_CHECK6_TX/RX): uSID shifts rewrite
// the destination the checksum covers; the ICRC, always verified in that mode, takes its place.
//
// Loop. poll() is one turn of the engine's calling sequence: receive what is already waiting,
// run timers, drain poll_transmit into batches per socket (sendmmsg), then wait
// (epoll_pwait2, nanosecond timeout) for a readable port, wake() or the engine's next
// deadline, and receive and transmit again. Receiving drains every readable port (recvmmsg)
// before the engine sees anything and hands packets over in kernel arrival order
// (SO_TIMESTAMPING), each at its arrival time, with deadlines that fell between arrivals run
// in between: the engine sees the time order a NIC would (docs/linux-driver.md). A full
// socket buffer (EAGAIN) keeps the packets queued in the driver and masks that port out of
// poll_transmit until they leave; nothing the engine handed over is dropped locally.
// No busy-wait unless DriverConfig::busy_poll.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "net/packet_auth.h"
#include "net/sockets.h"
#include "transport/engine.h"
#include "wire/headers.h"

namespace mrc::net {

// The UDP port the ICRC's pseudo-header always names (RoCEv2's port).
inline constexpr uint16_t kIcrcUdpPort = wire::kRoceV2Port;

// Ports (planes) one driver runs at most: the engine's port masks are 32 bits.
inline constexpr size_t kMaxDriverPorts = 32;

struct PortConfig {
  Endpoint local;      // address and UDP port (0: any free port)
  std::string ifname;  // SO_BINDTODEVICE when not empty
};

struct DriverConfig {
  std::vector<PortConfig> ports;  // index = engine port (plane)
  ev::FormatMode ev_mode = ev::FormatMode::kSrv6;
  // wire::decode checks the ICRC of every datagram. Off: only the UDP checksum (computed
  // and checked by the kernel over the same bytes) protects the payload. Must stay on in
  // SRV6 mode, which sends zero UDP checksums (open() refuses otherwise).
  bool verify_icrc = true;
  bool busy_poll = false;  // never sleep (one core spins)
  uint32_t batch = 64;     // packets per sendmmsg/recvmmsg
  // SO_SNDBUF/SO_RCVBUF (FORCE variants when permitted). A receive queue must hold a whole
  // window of the peer on one plane while this process is not running (ms on a loaded host):
  // 32 MiB is ~4,000 datagrams of 4 KiB (the kernel charges ~2x the payload).
  int socket_buffer = 32 << 20;
  uint8_t traffic_class = 0x02;  // ECT(0), RFC 3168
  // UDP GSO (udp(7) UDP_SEGMENT) in STEV and UDP modes: consecutive datagrams of one socket
  // to one destination and flow label (one path) leave as one send that the kernel, or a NIC
  // with USO, cuts into datagrams. Never in SRV6 mode: Linux refuses GSO with the zero UDP
  // checksums that mode sends (docs/linux-driver.md). A socket whose sends GSO fails on falls
  // back to plain datagrams (DriverStats::gso_fallbacks).
  bool gso = true;
  // Kernel arrival times (software receive stamps): a datagram read late (another port's
  // queue first, the process descheduled) still reaches the engine at the time it arrived, so
  // the responder's ACK service time covers its wait in the socket and the requester's RTT
  // does not. Off: a datagram arrives when it is read. The cost is the machine's, not this
  // socket's: see UdpDriver::set_rx_timestamps.
  bool rx_timestamps = true;
  // Receive coalescing (a NIC's interrupt moderation): while a stream runs (a receive brought
  // at least kRxCoalesceMinDatagrams within the last few holds), the ports are read at most
  // once per this interval (due timers, transmit and wake() still run on time), so a stream is
  // read in fewer, larger turns. Each turn costs a
  // wake-up, an epoll and recvmmsg per port and, at a responder, an ACK: on a software path
  // an ACK crosses every hop of the fabric as a datagram, as expensive as a data packet's
  // forwarding (docs/linux-driver.md, "Goodput"). A lone datagram (ping-pong) is never held.
  // 0: off (every readable port is read at once).
  Time rx_coalesce = 0;
  // Time one turn may spend transmitting (at least one round of `batch` packets) before it
  // returns, so that the next turn reads the ACKs that arrived meanwhile; reading stops after
  // the same time (at least one round of `batch` per port), so that a responder's ACK (one per
  // turn) is not held back by a long read. On a software path
  // each sendmmsg runs the datagram's whole trip through the fabric in this process (~10-30 us
  // per 4 KiB datagram on a namespace fabric): 64 unbounded rounds were up to 60 ms, and
  // every ACK of that time reached the engine at its end (arrival times never go back behind a
  // `now` the engine has seen), after the ACK timeout had fired (docs/linux-driver.md).
  Time tx_turn_budget = 250 * kPicosPerMicro;
  // Whom the driver answers pings from: its peers' addresses only (set_peer), so that it cannot
  // be made to reflect traffic at an address an attacker names; or anyone, where the data
  // socket is a node's probe responder for hosts it has no QP with (the C API: a controller
  // probes any endpoint, OCP 5.2 EV_PROBE).
  bool pings_from_anyone = false;
  // With pings_from_anyone, pings from addresses that are not a peer's are answered at most
  // this often per second (bursts of up to 64): a pong is no larger than its ping, and the
  // limit keeps a stranger from turning the responder into a reflector at line rate. The rest
  // are dropped, counted as pings_rate_limited. Peers' pings are never limited.
  uint32_t stranger_pings_per_second = 1000;
  // Authenticated packets (net/packet_auth.h): every datagram to a peer is sealed with that
  // peer's send key (set_peer_keys) and every datagram from a peer's address must open with its
  // receive key before it is decoded; what does not is dropped and counted (auth_failed,
  // auth_replayed) and the engine never sees it. Driver pings stay unauthenticated (they are
  // answered to peers' addresses only and reach no QP). kOff: no trailer.
  AuthMode auth = AuthMode::kOff;
  // Tail-ACK repeat of this host's responders (Engine::set_ack_repeat_after): unset, the
  // mode's default (default_ack_repeat_after); 0: off.
  std::optional<Time> ack_repeat_after;
};

// The tail-ACK repeat a mode needs (Engine::set_ack_repeat_after). STEV and UDP modes: 250 us.
// Their ACKs take a flow label or UDP port of their own through the fabric's ECMP hash, so a
// spine that data has left behind can still eat them, and a requester out of window whose
// last ACK was lost would otherwise wait for its tail-loss probe, which on a software path
// has learned milliseconds (docs/linux-driver.md, "Tail-ACK repeat"). 250 us is a few RTTs
// of a namespace fabric and far below that probe; a streaming responder is never quiet so
// long, so only the end of a flight pays one extra ACK. SRV6 mode: off (0); an ACK takes the
// reverse of the SRv6 path its packet demonstrably came by.
Time default_ack_repeat_after(ev::FormatMode mode);

// Whether the driver sends UDP GSO with `config`: DriverConfig::gso outside SRV6 mode, whose
// zero UDP checksums Linux refuses GSO with.
bool gso_allowed(const DriverConfig& config);

// How many packets in a row a QP with path MTU `mtu` should send on one path for this driver
// (PathPolicy::burst): where it sends UDP GSO (gso_allowed), as many full data datagrams as one
// GSO send carries (kMaxGsoDatagrams, kMaxGsoBytes; at most a batch), so that each path's
// share of a batch leaves in one send and a batch visits few sockets; else 1 (per-packet
// spraying). A socket that falls back from GSO at run time (gso_fallbacks) keeps its QPs'
// bursts: they then cost nothing but coarser spraying.
uint32_t spray_burst(const DriverConfig& config, uint32_t mtu);

// A receive of fewer datagrams than this does not start receive coalescing.
inline constexpr uint32_t kRxCoalesceMinDatagrams = 2;

struct PortStats {
  uint64_t tx_packets = 0, tx_bytes = 0;  // bytes = UDP payload
  uint64_t rx_packets = 0, rx_bytes = 0;
  uint64_t rx_ce = 0;       // arrived with ECN CE
  uint64_t rx_trimmed = 0;  // arrived with the trimmed DSCP
  uint64_t tx_blocked = 0;  // sendmmsg returned EAGAIN (queued, resent later)
  uint64_t tx_errors = 0;   // other send errors (packet lost; the engine recovers)
  uint64_t src_port_fallbacks = 0;
  // Datagrams the kernel dropped for this port's data socket because its receive buffer was
  // full (SO_RXQ_OVFL: Udp6RcvbufErrors of this socket alone). A flood of junk at the port
  // shows here, not in the engine's drops: those datagrams were never read.
  uint64_t rx_kernel_drops = 0;
};

struct DriverStats {
  std::vector<PortStats> ports;
  // Datagrams the driver could not decode, by wire error (index = mrc::Error value). Each is
  // also counted in the engine's drops[kDecode].
  std::array<uint64_t, 64> decode_errors{};
  uint64_t decode_drops = 0;
  uint64_t pings_answered = 0, pongs_received = 0;
  // Pings and pongs from an address that is no peer's (set_peer): not answered, not believed
  // (the driver would otherwise reflect traffic at any address an attacker names).
  uint64_t pings_from_strangers = 0;
  // Pings from strangers beyond DriverConfig::stranger_pings_per_second (pings_from_anyone).
  uint64_t pings_rate_limited = 0;
  uint64_t wakeups = 0;   // poll turns that went on to wait
  uint64_t rx_holds = 0;  // of those: waits that held a readable port (rx_coalesce)
  // System calls, for the batch sizes actually achieved (packets / calls).
  uint64_t sendmmsg_calls = 0, recvmmsg_calls = 0;
  // UDP GSO: sends that carried two or more datagrams, and sockets that gave GSO up.
  uint64_t gso_sends = 0, gso_fallbacks = 0;
  uint64_t wake_calls_seen = 0;  // polls ended early by wake()
  // DriverConfig::auth: datagrams dropped before decoding because their tag was wrong, they had
  // no trailer, or their source is no peer with keys (a forgery, whatever address it bears);
  // and authentic ones whose counter was accepted before or fell behind the replay window.
  uint64_t auth_failed = 0, auth_replayed = 0;
  uint64_t auth_opened = 0;  // datagrams that passed
};

// The counters of a driver and its engine as (name, value) pairs, names stable for scripts and
// the same wherever they are reported (Session::counters, mrc-perf --json, the C API's
// mrc_soft_query_counters): plane<p>_tx_bytes, ..., retransmits, and drop_<reason> for every
// reason a datagram that reached a data socket was not used (the engine's DropReason, the
// driver's ping_from_stranger) or never read (kernel_rcvbuf: SO_RXQ_OVFL).
std::vector<std::pair<std::string, uint64_t>> driver_counters(const DriverStats& driver,
                                                              const EngineCounters& engine);

class UdpDriver {
 public:
  // Opens the sockets of every port. `engine.config().num_ports` must equal the port count.
  // kInvalidArgument for a configuration it cannot run (among others: SRV6 mode with an IPv4
  // port, SRV6 mode without ICRC verification).
  static NetResult<std::unique_ptr<UdpDriver>> open(Engine& engine, const DriverConfig& config);
  ~UdpDriver();
  UdpDriver(const UdpDriver&) = delete;
  UdpDriver& operator=(const UdpDriver&) = delete;

  // Where QpAttr::peer `peer` listens on each port (index = port). Its addresses become the
  // only sources its QPs accept packets from (Engine::set_peer_addresses: any of them, for
  // any plane; the UDP source port is not bound, STEV/UDP modes send from one per path), and
  // the only ones the driver answers pings from.
  // kIncompatible if the peer has another number of ports or another IP version (IPv4-mapped
  // or not) than ours on some plane; nothing changes then.
  NetStatus set_peer(uint32_t peer, std::span<const Endpoint> ports);
  // The packet keys of `peer` (DriverConfig::auth): its datagrams are sealed and opened with
  // them from now on; a new call starts fresh counters. kInvalidArgument when the driver does
  // not authenticate.
  NetStatus set_peer_keys(uint32_t peer, const PacketKeys& keys);

  Time now() const { return clock_.now(); }
  const MonotonicClock& clock() const { return clock_; }
  Engine& engine() { return engine_; }
  // The bound endpoint of port p (the real UDP port when configured as 0).
  const Endpoint& local(uint8_t port) const;
  const DriverConfig& config() const { return config_; }
  // The data socket of port p (tests and diagnostics read its options; do not read from it).
  int data_socket(uint8_t port) const;

  // Turns kernel arrival times (DriverConfig::rx_timestamps) on or off on the data sockets.
  // While one socket of the machine asks for them, the kernel stamps every packet at every
  // device it enters (net_timestamp_check), machine-wide: on a namespace fabric at every hop,
  // ~100 cycles each on a kvm-clock VM. So a measurement of the path without MRC turns them
  // off while it runs (mrc-perf --raw-udp).
  NetStatus set_rx_timestamps(bool on);

  // One turn of the loop; waits at most `max_wait` (0: do not block). Errors: a socket
  // failure that will not go away (e.g. EMSGSIZE: the MTU is too large for the interface).
  NetStatus poll(Time max_wait);
  // Ends a poll() that is waiting, or the next one, early (after its receive and transmit
  // work). The only call that is safe from another thread: it writes an eventfd that is in
  // poll's epoll set. Several wake()s before a poll count as one.
  void wake();

  // Reachability check over the data path: sends a driver-level ping (never seen by the
  // engine) from every port to the peer's address on that port until each is answered.
  // kNoRoute naming the silent planes after `timeout`.
  NetStatus probe_planes(uint32_t peer, Time timeout);

  const DriverStats& stats() const { return stats_; }

  struct Impl;

 private:
  UdpDriver(Engine& engine, const DriverConfig& config);
  Engine& engine_;
  DriverConfig config_;
  MonotonicClock clock_;
  DriverStats stats_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrc::net
