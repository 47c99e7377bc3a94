#include "net/udp_driver.h"

#include <arpa/inet.h>
#include <linux/net_tstamp.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <unordered_map>

#include "net/ping.h"
#include "wire/codec.h"
#include "wire/crc32.h"

namespace mrc::net {
namespace {

// A wait in engine time (picoseconds) as epoll_pwait2's timeout.
timespec to_timespec(Time t) {
  return timespec{static_cast<time_t>(t / kPicosPerSecond),
                  static_cast<long>((t % kPicosPerSecond) / kPicosPerNano)};
}

constexpr size_t kHeaderRoom = wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes;  // 48
// Largest transport packet: path MTU 9000 (QpAttr limit) + transport headers + pad + ICRC.
constexpr size_t kMaxTransportBytes = 9000 + 256;
constexpr size_t kSlotBytes = kHeaderRoom + kMaxTransportBytes;
// Payloads from this size on are sent from registered memory (a three-piece iovec) instead of
// being copied into the slot; below it the copy is cheaper than the extra iovecs.
constexpr uint32_t kZeroCopyMin = 512;

// epoll token of the wake-up eventfd (ports use their index).
constexpr uint32_t kWakeToken = UINT32_MAX;
// Events one epoll wait can report: every data socket and the wake-up eventfd.
constexpr int kEpollEvents = static_cast<int>(kMaxDriverPorts) + 1;
// Transmit rounds (a batch each) one turn runs at most, whatever tx_turn_budget allows.
constexpr uint32_t kMaxTxRoundsPerTurn = 64;
// Received datagrams held per poll turn, over all ports: every port is drained into this pool
// before the engine sees any of it, so packets reach the engine in arrival order across
// planes (see receive_ready). 8 batches: ~4.7 MiB at the default batch of 64.
constexpr uint32_t kRxPoolBatches = 8;

// Kernel receive timestamps on a data socket (software, CLOCK_REALTIME, in SCM_TIMESTAMPING's
// first timespec), or none. SO_TIMESTAMPING, not SO_TIMESTAMPNS: while any socket asks for
// receive stamps the kernel stamps every packet entering any device of the machine
// (net_timestamp_check), and only SO_TIMESTAMPING gives that up again when the socket stops
// asking (sock_set_timestamping -> sock_disable_timestamp; SO_TIMESTAMPNS holds it until the
// socket closes), which UdpDriver::set_rx_timestamps needs.
NetStatus set_timestamping(int fd, bool on) {
  const int flags = on ? SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE : 0;
  if (::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) != 0)
    return errno_fail("SO_TIMESTAMPING", errno);
  return {};
}

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

// The IPv6 + UDP headers the kernel puts in front of a transport packet of `transport_bytes`
// (as far as the ICRC covers them; the masked fields are written as the wire would carry).
void write_headers(uint8_t* h, const in6_addr& src, const in6_addr& dst, uint16_t src_port,
                   uint8_t traffic_class, uint32_t flow_label, size_t transport_bytes) {
  const uint16_t udp_len = static_cast<uint16_t>(wire::kUdpHeaderBytes + transport_bytes);
  h[0] = static_cast<uint8_t>(0x60 | traffic_class >> 4);
  h[1] = static_cast<uint8_t>((traffic_class & 0x0F) << 4 | ((flow_label >> 16) & 0x0F));
  h[2] = static_cast<uint8_t>(flow_label >> 8);
  h[3] = static_cast<uint8_t>(flow_label);
  put16(h + 4, udp_len);
  h[6] = wire::kIpProtoUdp;
  h[7] = wire::kDefaultHopLimit;
  std::memcpy(h + 8, &src, 16);
  std::memcpy(h + 24, &dst, 16);
  uint8_t* u = h + wire::kIpv6HeaderBytes;
  put16(u, src_port);
  put16(u + 2, kIcrcUdpPort);
  put16(u + 4, udp_len);
  put16(u + 6, 0);
}

void set_buffer(int fd, int force_opt, int opt, int bytes) {
  // The FORCE variants ignore net.core.{r,w}mem_max but need CAP_NET_ADMIN (socket(7)).
  if (::setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

}  // namespace

struct UdpDriver::Impl {
  struct Socket {
    UniqueFd fd;
    uint8_t port = 0;
    uint16_t src_port = 0;
    bool gso = false;               // sends UDP GSO groups (DriverConfig::gso)
    bool ipv4 = false;              // its port is IPv4 (an IPv4-mapped address)
    std::vector<uint32_t> backlog;  // slots waiting for this socket (EAGAIN)
    std::vector<uint32_t> batch;    // slots of the current round
  };
  struct Slot {
    sockaddr_in6 dst{};
    uint32_t bytes = 0;  // transport bytes (whole datagram's UDP payload)
    uint32_t socket = 0;
    // Headers at data + kHeaderRoom; with a payload left in registered memory (`payload`
    // non-null) `head` bytes of headers, then `payload_len` bytes at `payload`, then the
    // pad and ICRC (`bytes` - head - payload_len) at data + kHeaderRoom + head.
    const uint8_t* payload = nullptr;
    uint32_t payload_len = 0;
    uint32_t head = 0;
  };

  UniqueFd epoll;
  std::vector<Socket> sockets;  // [0, ports) = data sockets
  std::vector<Endpoint> local;
  std::vector<std::unordered_map<uint16_t, uint32_t>> src_sockets;  // per port
  // SRV6 mode: the socket each port transmits on (see open()).
  std::vector<uint32_t> tx_socket;
  std::unordered_map<uint32_t, std::vector<Endpoint>> peers;
  // DriverConfig::auth: each peer's sealer and opener (set_peer_keys).
  struct PeerAuth {
    PacketSealer sealer;
    PacketOpener opener;
  };
  std::unordered_map<uint32_t, std::unique_ptr<PeerAuth>> auth;

  // Transmit slots.
  std::vector<uint8_t> tx_mem;
  std::vector<Slot> tx_slots;
  std::vector<uint32_t> tx_free;
  uint32_t blocked_ports = 0;  // bit p: some socket of port p has a backlog

  // Receive slots (a pool of kRxPoolBatches * batch, shared by the ports).
  struct RxEntry {
    Time arrived = 0;  // kernel arrival time (SO_TIMESTAMPING), engine time
    uint32_t slot = 0;
    uint32_t bytes = 0;
    uint8_t port = 0;
  };
  std::vector<uint8_t> rx_mem;
  std::vector<mmsghdr> rx_msgs;
  std::vector<iovec> rx_iov;
  std::vector<sockaddr_in6> rx_from;
  // Per datagram: IPV6_TCLASS (20 bytes) or IP_TOS (17), SCM_TIMESTAMPING (64 bytes) and
  // SO_RXQ_OVFL (20 bytes), each aligned.
  std::vector<std::array<uint8_t, 128>> rx_control;
  std::vector<RxEntry> rx_entries;
  uint32_t rx_per_port = 0;       // pool share of one port per turn
  Time last_now = 0;              // the latest `now` handed to the engine (it never decreases)
  std::vector<uint32_t> touched;  // sockets with packets in the current transmit round
  UniqueFd wake_fd;               // eventfd: UdpDriver::wake()
  UniqueFd wake_epoll;            // epoll of wake_fd alone: a wait that holds the ports
  Time last_rx_at = 0;            // when the latest receive ran (rx_coalesce)
  Time stream_at = kNever;        // the latest receive of >= kRxCoalesceMinDatagrams
  bool tx_more = false;           // the last transmit phase ended on its time budget

  std::vector<mmsghdr> tx_msgs;
  std::vector<iovec> tx_iov;
  // Per message of a sendmmsg: its UDP_SEGMENT control message and how many datagrams
  // (queued slots) it carries.
  std::vector<UdpSegmentControl> tx_control;
  std::vector<uint32_t> tx_msg_datagrams;

  uint32_t pong_mask = 0;
  uint64_t ping_nonce = 0;
  // Token bucket of answers to strangers' pings (DriverConfig::stranger_pings_per_second).
  double stranger_ping_tokens = kStrangerPingBurst;
  Time stranger_ping_refill_at = 0;
  static constexpr double kStrangerPingBurst = 64;
  bool sticky_error = false;
  NetError error;

  bool is_peer_address(const in6_addr& a) const { return peer_at(a) != nullptr; }
  // The peer whose ports include address `a` (nullptr: a stranger).
  const std::pair<const uint32_t, std::vector<Endpoint>>* peer_at(const in6_addr& a) const {
    for (const auto& entry : peers)
      for (const Endpoint& e : entry.second)
        if (std::memcmp(&e.addr, &a, 16) == 0) return &entry;
    return nullptr;
  }
  // The keys of the peer at address `a` (nullptr: a stranger or a peer without keys).
  PeerAuth* auth_at(const in6_addr& a) {
    const auto* peer = peer_at(a);
    if (!peer) return nullptr;
    auto it = auth.find(peer->first);
    return it == auth.end() ? nullptr : it->second.get();
  }
  uint8_t* tx_data(uint32_t slot) { return tx_mem.data() + size_t{slot} * kSlotBytes; }
  uint8_t* rx_data(uint32_t slot) { return rx_mem.data() + size_t{slot} * kSlotBytes; }
};

UdpDriver::UdpDriver(Engine& engine, const DriverConfig& config)
    : engine_(engine), config_(config), impl_(std::make_unique<Impl>()) {}

UdpDriver::~UdpDriver() = default;

namespace {

// The IPv6 options of a socket of an IPv6 port: traffic class, the driver's own flow labels,
// no fragmentation.
void set_ipv6_options(int fd, const DriverConfig& cfg) {
  const int one = 1;
  const int tclass = cfg.traffic_class;
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass);
  // ipv6(7): with IPV6_FLOWINFO_SEND the flow label comes from sin6_flowinfo. The kernel
  // accepts any label without a flow-label lease (IPV6_FLOWLABEL_MGR) as long as no socket
  // of the network namespace holds an exclusive lease (fl6_sock_lookup, net/ipv6/ip6_flowlabel.c).
  ::setsockopt(fd, IPPROTO_IPV6, kIpv6FlowinfoSend, &one, sizeof one);
  // Every label is the sender's (ev::path_flow_label; pings: ping_flow_label): a label of 0
  // stays 0 instead of the kernel's per-datagram hash (ip6_make_flowlabel).
  const int zero = 0;
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, &zero, sizeof zero);
  // Never fragment: a datagram above the path MTU fails with EMSGSIZE (reported) instead of
  // crossing the fabric as fragments that sprayed paths would reorder.
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, &one, sizeof one);
}

// The IPv4 options of a socket of an IPv4 port (an AF_INET6 socket bound to an IPv4-mapped
// address sends and receives IPv4; the kernel applies IPPROTO_IP options to that traffic and
// ignores the IPv6 ones): the traffic class as the TOS byte (IPV6_TCLASS does not reach IPv4
// packets), DF with EMSGSIZE above the path MTU (IPV6_DONTFRAG does not stop IPv4
// fragmentation). No flow label: IPv4 has none, and the kernel ignores sin6_flowinfo for a
// mapped destination.
NetStatus set_ipv4_options(int fd, const DriverConfig& cfg) {
  const int tos = cfg.traffic_class;
  if (::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0)
    return errno_fail("IP_TOS", errno);
  const int pmtu = IP_PMTUDISC_DO;
  if (::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0)
    return errno_fail("IP_MTU_DISCOVER", errno);
  return {};
}

NetResult<UniqueFd> open_socket(const PortConfig& pc, const DriverConfig& cfg, uint16_t port,
                                bool data_socket) {
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return errno_fail("socket(AF_INET6, SOCK_DGRAM)", errno);
  const int one = 1;
  // An IPv4 port (IPv4-mapped address) needs a dual-stack socket: the kernel refuses to bind
  // an IPv6-only socket to a mapped address (EINVAL). An IPv6 port stays IPv6-only, whatever
  // net.ipv6.bindv6only says.
  const bool ipv4 = is_ipv4_mapped(pc.local.addr);
  const int v6only = ipv4 ? 0 : 1;
  if (::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) != 0)
    return errno_fail("IPV6_V6ONLY", errno);
  if (!data_socket) ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!pc.ifname.empty() && ::setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, pc.ifname.c_str(),
                                         static_cast<socklen_t>(pc.ifname.size())) != 0)
    return errno_fail("SO_BINDTODEVICE " + pc.ifname, errno);
  if (!ipv4) {
    set_ipv6_options(fd.get(), cfg);
  } else if (auto st = set_ipv4_options(fd.get(), cfg); !st) {
    return std::unexpected(st.error());
  }
  set_buffer(fd.get(), SO_SNDBUFFORCE, SO_SNDBUF, cfg.socket_buffer);
  if (cfg.ev_mode == ev::FormatMode::kSrv6) {  // IPv6 ports only (check_driver_config)
    // Every uSID shift rewrites the destination address, so a UDP checksum over the first DA
    // is wrong at the receiver (docs/fabric.md, pitfall 2; veth hides it, real NICs drop).
    // Zero checksums instead, as RFC 6936 allows for UDP over IPv6 when the payload carries
    // its own end-to-end check: here the RoCEv2 ICRC, which open() keeps verified in this
    // mode. TX: send 0; RX: accept 0 (the kernel drops zero-checksum UDP/IPv6 otherwise).
    if (::setsockopt(fd.get(), IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one) != 0)
      return errno_fail("UDP_NO_CHECK6_TX", errno);
    if (data_socket && ::setsockopt(fd.get(), IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one) != 0)
      return errno_fail("UDP_NO_CHECK6_RX", errno);
  }
  if (data_socket) {
    // The traffic class of each datagram read (ECN CE, the trimmed DSCP): IPV6_TCLASS control
    // messages for IPv6, IP_TOS ones for IPv4 (IPV6_RECVTCLASS reports IPv6 datagrams only).
    if (!ipv4) {
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
    } else if (::setsockopt(fd.get(), IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0) {
      return errno_fail("IP_RECVTOS", errno);
    }
    // The kernel's count of datagrams it dropped for this socket (receive buffer full)
    // arrives with each datagram read (PortStats::rx_kernel_drops).
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
    if (cfg.rx_timestamps) {
      if (auto st = set_timestamping(fd.get(), true); !st) return std::unexpected(st.error());
    }
    set_buffer(fd.get(), SO_RCVBUFFORCE, SO_RCVBUF, cfg.socket_buffer);
  }
  sockaddr_in6 a = to_sockaddr(Endpoint{pc.local.addr, port});
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return errno_fail("bind " + format_endpoint(Endpoint{pc.local.addr, port}), errno);
  return fd;
}

// The address a socket is bound to.
sockaddr_in6 bound_address(int fd) {
  sockaddr_in6 a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a;
}

// An open socket of `port` added to m.sockets; returns its index.
uint32_t add_socket(UdpDriver::Impl& m, const DriverConfig& cfg, uint8_t port, UniqueFd fd) {
  UdpDriver::Impl::Socket s;
  s.src_port = ntohs(bound_address(fd.get()).sin6_port);
  s.fd = std::move(fd);
  s.port = port;
  s.gso = gso_allowed(cfg);
  s.ipv4 = is_ipv4_mapped(cfg.ports[port].local.addr);
  m.sockets.push_back(std::move(s));
  return static_cast<uint32_t>(m.sockets.size() - 1);
}

// A send-only socket of `port` from `src_port` (0: an ephemeral one), outside the epoll set;
// returns its index in m.sockets.
NetResult<uint32_t> add_send_socket(UdpDriver::Impl& m, const DriverConfig& cfg, uint8_t port,
                                    uint16_t src_port) {
  auto fd = open_socket(cfg.ports[port], cfg, src_port, false);
  if (!fd) return std::unexpected(fd.error());
  return add_socket(m, cfg, port, std::move(*fd));
}

// What the driver cannot run with.
NetStatus check_driver_config(const Engine& engine, const DriverConfig& cfg) {
  if (cfg.ports.empty() || cfg.ports.size() > kMaxDriverPorts)
    return net_fail(NetErrc::kInvalidArgument,
                    "1 to " + std::to_string(kMaxDriverPorts) + " ports required");
  if (engine.config().num_ports != cfg.ports.size())
    return net_fail(NetErrc::kInvalidArgument, "engine port count differs from driver ports");
  if (cfg.batch == 0 || cfg.batch > 1024)
    return net_fail(NetErrc::kInvalidArgument, "batch must be 1..1024");
  // SRV6 sends zero UDP checksums (open_socket): the ICRC is then the only check on the
  // payload, and RFC 6936 permits zero-checksum UDP/IPv6 only with such an end-to-end check.
  if (cfg.ev_mode == ev::FormatMode::kSrv6 && !cfg.verify_icrc)
    return net_fail(NetErrc::kInvalidArgument,
                    "SRV6 mode sends zero UDP checksums (uSID shifts rewrite the destination), "
                    "so the ICRC must be verified: drop --no-icrc-verify");
  // SRV6 mode's EV is the packet's IPv6 destination address (the uSID carrier the fabric's
  // SRv6 routes forward on): an IPv4 packet has no such address to carry it in.
  for (size_t p = 0; p < cfg.ports.size() && cfg.ev_mode == ev::FormatMode::kSrv6; ++p) {
    if (is_ipv4_mapped(cfg.ports[p].local.addr))
      return net_fail(NetErrc::kInvalidArgument,
                      "port " + std::to_string(p) + " (" + format_in6(cfg.ports[p].local.addr) +
                          ") is IPv4, and SRV6 mode cannot run over IPv4: its EV is the "
                          "packet's IPv6 destination address (a uSID carrier), which an IPv4 "
                          "packet does not have; use the UDP EV mode (entropy in the UDP "
                          "source port) or an IPv6 address");
  }
  return {};
}

// Adds `fd` to `epoll` for input, with `token` as its data.
NetStatus watch_input(const UniqueFd& epoll, int fd, uint32_t token) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = token;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return errno_fail("epoll_ctl", errno);
  return {};
}

// Each port's data socket (bound to its local endpoint, watched by the epoll set with the
// port as token; m.sockets[p]) and, in SRV6 mode, its send socket (m.tx_socket[p]).
NetStatus open_port_sockets(UdpDriver::Impl& m, const DriverConfig& cfg) {
  for (size_t p = 0; p < cfg.ports.size(); ++p) {
    auto fd = open_socket(cfg.ports[p], cfg, cfg.ports[p].local.port, true);
    if (!fd) return std::unexpected(fd.error());
    const sockaddr_in6 a = bound_address(fd->get());
    m.local.push_back(Endpoint{a.sin6_addr, ntohs(a.sin6_port)});
    if (auto st = watch_input(m.epoll, fd->get(), static_cast<uint32_t>(p)); !st) return st;
    add_socket(m, cfg, static_cast<uint8_t>(p), std::move(*fd));
  }
  // SRV6 mode transmits on a second socket per port, one that epoll does not watch. With the
  // data socket in an epoll set its wait queue is never empty, so every sent datagram's
  // release (sock_wfree) woke it: a wait-queue lock with interrupts off per packet, 3-4% of
  // the sender's CPU on a namespace fabric (perf; docs/perf-log.md, "Linux driver: where the
  // remaining stalls come from"). The ACKs still come to the data socket: the peer addresses
  // the port exchanged at setup, whatever the source port (the STEV/UDP modes' source-port
  // sockets already rely on that).
  if (cfg.ev_mode == ev::FormatMode::kSrv6) {
    for (size_t p = 0; p < cfg.ports.size(); ++p) {
      auto index = add_send_socket(m, cfg, static_cast<uint8_t>(p), 0);
      if (!index) return std::unexpected(index.error());
      m.tx_socket.push_back(*index);
    }
  }
  return {};
}

// The transmit and receive slot pools and their message arrays, sized for `batch`.
void size_pools(UdpDriver::Impl& m, const DriverConfig& cfg) {
  // Two batches of transmit slots: one being filled while the other waits in backlogs.
  const uint32_t tx_count = 2 * cfg.batch;
  m.tx_mem.resize(size_t{tx_count} * kSlotBytes);
  m.tx_slots.resize(tx_count);
  for (uint32_t i = tx_count; i-- > 0;)
    m.tx_free.push_back(i);
  m.tx_msgs.resize(cfg.batch);
  m.tx_iov.resize(size_t{3} * cfg.batch);
  m.tx_control.resize(cfg.batch);
  m.tx_msg_datagrams.resize(cfg.batch);
  const uint32_t rx_count = kRxPoolBatches * cfg.batch;
  m.rx_per_port = std::max<uint32_t>(cfg.batch, rx_count / static_cast<uint32_t>(cfg.ports.size()));
  m.rx_mem.resize(size_t{rx_count} * kSlotBytes);
  m.rx_msgs.resize(rx_count);
  m.rx_iov.resize(rx_count);
  m.rx_from.resize(rx_count);
  m.rx_control.resize(rx_count);
  m.rx_entries.reserve(rx_count);
  m.touched.reserve(64);
}

// wake()'s eventfd, watched by the epoll set and by an epoll set of its own (a wait that
// holds the ports).
NetStatus open_wake(UdpDriver::Impl& m) {
  m.wake_fd = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!m.wake_fd) return errno_fail("eventfd", errno);
  if (auto st = watch_input(m.epoll, m.wake_fd.get(), kWakeToken); !st) return st;
  m.wake_epoll = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!m.wake_epoll) return errno_fail("epoll_create1", errno);
  return watch_input(m.wake_epoll, m.wake_fd.get(), kWakeToken);
}

}  // namespace

bool gso_allowed(const DriverConfig& cfg) {
  return cfg.gso && cfg.ev_mode != ev::FormatMode::kSrv6;  // GSO needs UDP checksums
}

namespace {

// The UDP payload one GSO send may carry on a socket of an IPv4 or IPv6 port.
size_t max_gso_bytes(bool ipv4) {
  return ipv4 ? kMaxGsoBytesIpv4 : kMaxGsoBytes;
}

}  // namespace

uint32_t spray_burst(const DriverConfig& cfg, uint32_t mtu) {
  if (!gso_allowed(cfg)) return 1;
  // One burst size for every port: the smaller IPv4 limit if any port is IPv4.
  bool any_ipv4 = false;
  for (const PortConfig& p : cfg.ports)
    any_ipv4 = any_ipv4 || is_ipv4_mapped(p.local.addr);
  // The largest full data datagram: BTH, RETH, immediate, MRC data extension, payload, its
  // pad, ICRC. A run is also cut at the end of a batch (send_queued).
  const size_t datagram = wire::kBthBytes + wire::kRethBytes + wire::kImmDtBytes +
                          wire::kDataExtBytes + mtu + ((0u - mtu) & 3u) + wire::kIcrcBytes;
  return static_cast<uint32_t>(
      std::clamp<size_t>(max_gso_bytes(any_ipv4) / datagram, 1,
                         std::min<size_t>(kMaxGsoDatagrams, std::max(cfg.batch, 1u))));
}

Time default_ack_repeat_after(ev::FormatMode mode) {
  return mode == ev::FormatMode::kSrv6 ? 0 : 250 * kPicosPerMicro;
}

NetResult<std::unique_ptr<UdpDriver>> UdpDriver::open(Engine& engine, const DriverConfig& cfg) {
  if (auto st = check_driver_config(engine, cfg); !st) return std::unexpected(st.error());
  std::unique_ptr<UdpDriver> d(new UdpDriver(engine, cfg));
  Impl& m = *d->impl_;
  // SRV6 mode sends each port's packets from one socket, in the order they were produced;
  // STEV and UDP modes from a socket per UDP source port (per path), one after another.
  engine.set_transmit_order(cfg.ev_mode == ev::FormatMode::kSrv6 ? TransmitOrder::kPerPort
                                                                 : TransmitOrder::kPerPath);
  engine.set_ack_repeat_after(cfg.ack_repeat_after.value_or(default_ack_repeat_after(cfg.ev_mode)));
  m.epoll = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!m.epoll) return errno_fail("epoll_create1", errno);
  d->stats_.ports.resize(cfg.ports.size());
  m.src_sockets.resize(cfg.ports.size());
  if (auto st = open_port_sockets(m, cfg); !st) return std::unexpected(st.error());
  size_pools(m, cfg);
  if (auto st = open_wake(m); !st) return std::unexpected(st.error());
  return d;
}

std::vector<std::pair<std::string, uint64_t>> driver_counters(const DriverStats& ds,
                                                              const EngineCounters& c) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t p = 0; p < ds.ports.size(); ++p) {
    const PortStats& ps = ds.ports[p];
    const std::string pre = "plane" + std::to_string(p) + "_";
    out.emplace_back(pre + "tx_packets", ps.tx_packets);
    out.emplace_back(pre + "tx_bytes", ps.tx_bytes);
    out.emplace_back(pre + "rx_packets", ps.rx_packets);
    out.emplace_back(pre + "rx_bytes", ps.rx_bytes);
    out.emplace_back(pre + "rx_ce", ps.rx_ce);
    out.emplace_back(pre + "tx_blocked", ps.tx_blocked);
    out.emplace_back(pre + "tx_errors", ps.tx_errors);
  }
  uint64_t kernel_drops = 0;
  for (size_t p = 0; p < ds.ports.size(); ++p) {
    out.emplace_back("plane" + std::to_string(p) + "_rx_kernel_drops", ds.ports[p].rx_kernel_drops);
    kernel_drops += ds.ports[p].rx_kernel_drops;
  }
  // Every reason a datagram that reached us was not used is a drop_<reason> counter (the
  // engine's, then the driver's own), and what the kernel dropped before we could read it.
  out.emplace_back("drop_kernel_rcvbuf", kernel_drops);
  out.emplace_back("drop_ping_from_stranger", ds.pings_from_strangers);
  out.emplace_back("drop_ping_rate_limited", ds.pings_rate_limited);
  out.emplace_back("drop_auth_failed", ds.auth_failed);
  out.emplace_back("drop_auth_replayed", ds.auth_replayed);
  out.emplace_back("auth_opened", ds.auth_opened);
  out.emplace_back("decode_drops", ds.decode_drops);
  out.emplace_back("driver_wakeups", ds.wakeups);
  out.emplace_back("driver_rx_holds", ds.rx_holds);
  out.emplace_back("sendmmsg_calls", ds.sendmmsg_calls);
  out.emplace_back("recvmmsg_calls", ds.recvmmsg_calls);
  out.emplace_back("gso_sends", ds.gso_sends);
  out.emplace_back("gso_fallbacks", ds.gso_fallbacks);
  out.emplace_back("data_sent", c.data_sent);
  out.emplace_back("retransmits", c.retransmits);
  out.emplace_back("acks_sent", c.acks_sent);
  out.emplace_back("ack_repeats", c.ack_repeats);
  out.emplace_back("data_received", c.data_received);
  out.emplace_back("duplicates", c.duplicates);
  out.emplace_back("trimmed_received", c.trimmed_received);
  out.emplace_back("trim_nacks_received", c.trim_nacks_received);
  out.emplace_back("trim_nacks_stale", c.trim_nacks_stale);
  out.emplace_back("acks_received", c.acks_received);
  out.emplace_back("acks_advancing", c.acks_advancing);
  for (size_t p = 0; p < ds.ports.size() && p < std::size(c.acks_advancing_by_port); ++p)
    out.emplace_back("plane" + std::to_string(p) + "_acks_advancing", c.acks_advancing_by_port[p]);
  out.emplace_back("ack_contradictions", c.ack_contradictions);
  out.emplace_back("peer_port_changes", c.peer_port_changes);
  out.emplace_back("probes_received", c.probes_received);
  out.emplace_back("probe_replies_sent", c.probe_replies_sent);
  out.emplace_back("probe_replies_received", c.probe_replies_received);
  out.emplace_back("cnps_received", c.cnps_received);
  out.emplace_back("ecn_received", c.ecn_received);
  out.emplace_back("bytes_placed", c.bytes_placed);
  out.emplace_back("losses_detected", c.losses_detected);
  out.emplace_back("losses_path_order", c.losses_path_order);
  out.emplace_back("losses_rack", c.losses_rack);
  out.emplace_back("losses_pto", c.losses_pto);
  out.emplace_back("losses_rto", c.losses_rto);
  out.emplace_back("losses_other", c.losses_other);
  out.emplace_back("spurious_losses", c.spurious_losses);
  out.emplace_back("losses_undone", c.losses_undone);
  out.emplace_back("losses_acked_before_resend", c.losses_acked_before_resend);
  out.emplace_back("duplicate_retransmits", c.duplicate_retransmits);
  out.emplace_back("timeouts", c.timeouts);
  out.emplace_back("probes_sent", c.probes_sent);
  out.emplace_back("ev_state_changes", c.ev_state_changes);
  out.emplace_back("completion_errors", c.completion_errors);
  for (int r = 0; r < static_cast<int>(DropReason::kCount); ++r)
    out.emplace_back(std::string("drop_") + drop_reason_name(static_cast<DropReason>(r)),
                     c.drops[r]);
  return out;
}

const Endpoint& UdpDriver::local(uint8_t port) const {
  return impl_->local.at(port);
}

int UdpDriver::data_socket(uint8_t port) const {
  return impl_->sockets.at(port).fd.get();
}

NetStatus UdpDriver::set_rx_timestamps(bool on) {
  for (uint8_t p = 0; p < config_.ports.size(); ++p)
    if (auto st = set_timestamping(data_socket(p), on); !st) return st;
  config_.rx_timestamps = on;
  return {};
}

NetStatus UdpDriver::set_peer(uint32_t peer, std::span<const Endpoint> ports) {
  if (ports.size() != config_.ports.size())
    return net_fail(NetErrc::kIncompatible, "peer has " + std::to_string(ports.size()) +
                                                " planes, we have " +
                                                std::to_string(config_.ports.size()));
  // A plane speaks one IP version: an IPv6 socket cannot reach an IPv4 peer, nor the reverse.
  for (size_t p = 0; p < ports.size(); ++p) {
    const bool ours = is_ipv4_mapped(impl_->local[p].addr);
    if (is_ipv4_mapped(ports[p].addr) != ours)
      return net_fail(NetErrc::kIncompatible,
                      "plane " + std::to_string(p) + ": the peer's address " +
                          format_in6(ports[p].addr) + " is " + (ours ? "IPv6" : "IPv4") +
                          ", ours (" + format_in6(impl_->local[p].addr) + ") is " +
                          (ours ? "IPv4" : "IPv6") + ": both ends of a plane use one IP version");
  }
  impl_->peers[peer] = std::vector<Endpoint>(ports.begin(), ports.end());
  std::vector<Ipv6Address> addresses;
  for (const Endpoint& e : ports) {
    Ipv6Address a;
    std::memcpy(a.data(), &e.addr, 16);
    if (std::find(addresses.begin(), addresses.end(), a) == addresses.end()) addresses.push_back(a);
  }
  engine_.set_peer_addresses(peer, addresses);
  return {};
}

NetStatus UdpDriver::set_peer_keys(uint32_t peer, const PacketKeys& keys) {
  if (config_.auth == AuthMode::kOff)
    return net_fail(NetErrc::kInvalidArgument,
                    "packet keys for a driver that does not authenticate (DriverConfig::auth)");
  impl_->auth[peer] = std::make_unique<Impl::PeerAuth>(Impl::PeerAuth{
      PacketSealer(keys.send, config_.auth), PacketOpener(keys.receive, config_.auth)});
  return {};
}

namespace {

int64_t realtime_minus_monotonic_ns() {
  timespec rt{}, mono{};
  ::clock_gettime(CLOCK_REALTIME, &rt);
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  return (int64_t{rt.tv_sec} - int64_t{mono.tv_sec}) * 1'000'000'000 +
         (int64_t{rt.tv_nsec} - int64_t{mono.tv_nsec});
}

// What a driver turn works with: the driver's parts, handed to the steps of poll() together.
struct Turn {
  UdpDriver::Impl& m;
  Engine& engine;
  const DriverConfig& cfg;
  DriverStats& stats;
  const MonotonicClock& clock;
};

using RxEntry = UdpDriver::Impl::RxEntry;

// Slots [first, first + count) of the receive pool made ready for one recvmmsg.
void arm_rx_slots(UdpDriver::Impl& m, uint32_t first, uint32_t count) {
  for (uint32_t i = first; i < first + count; ++i) {
    m.rx_iov[i] = iovec{m.rx_data(i) + kHeaderRoom, kMaxTransportBytes};
    msghdr& h = m.rx_msgs[i].msg_hdr;
    h = msghdr{};
    h.msg_name = &m.rx_from[i];
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_iov = &m.rx_iov[i];
    h.msg_iovlen = 1;
    h.msg_control = m.rx_control[i].data();
    h.msg_controllen = m.rx_control[i].size();
  }
}

// The entry of the datagram received into `slot` on `port`: its arrival as the kernel's
// software stamp (realtime ns; 0 without one, converted to engine time by
// order_by_arrival). The socket's overflow count (SO_RXQ_OVFL) goes to the port's stats.
RxEntry rx_entry(UdpDriver::Impl& m, PortStats& ps, uint32_t slot, uint8_t port) {
  RxEntry e;
  e.slot = slot;
  e.bytes = m.rx_msgs[slot].msg_len;
  e.port = port;
  const msghdr& h = m.rx_msgs[slot].msg_hdr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
      uint32_t dropped = 0;  // since the socket was opened
      std::memcpy(&dropped, CMSG_DATA(c), sizeof dropped);
      ps.rx_kernel_drops = std::max<uint64_t>(ps.rx_kernel_drops, dropped);
    }
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
      // struct scm_timestamping: ts[0] is the software stamp (the others are zero).
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      e.arrived = static_cast<Time>(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec);
    }
  }
  return e;
}

// One recvmmsg of up to `want` datagrams from `port` into the pool from slot `first`; their
// entries are appended to m.rx_entries. Returns how many were read.
uint32_t read_port(Turn& t, uint8_t port, uint32_t first, uint32_t want) {
  UdpDriver::Impl& m = t.m;
  arm_rx_slots(m, first, want);
  const int n =
      ::recvmmsg(m.sockets[port].fd.get(), m.rx_msgs.data() + first, want, MSG_DONTWAIT, nullptr);
  ++t.stats.recvmmsg_calls;
  if (n <= 0) return 0;
  for (uint32_t i = first; i < first + static_cast<uint32_t>(n); ++i)
    m.rx_entries.push_back(rx_entry(m, t.stats.ports[port], i, port));
  return static_cast<uint32_t>(n);
}

// Reads every port in `ready` (bit p) until it is empty or its share of the pool is used,
// into m.rx_entries. Rounds of up to `batch` datagrams per port, the ports in turn so that
// their arrival times stay close; no further round once reading has taken tx_turn_budget: a
// responder ACKs once per turn, so a turn that reads the whole pool (~9 ms on a namespace
// fabric) was a 9 ms gap in the requester's ACKs.
void read_ports(Turn& t, uint32_t ready) {
  UdpDriver::Impl& m = t.m;
  m.rx_entries.clear();
  const uint32_t pool = static_cast<uint32_t>(m.rx_msgs.size());
  uint32_t used = 0;
  const Time rx_start = t.clock.now();
  std::array<uint32_t, 32> left{};
  for (uint32_t bits = ready; bits; bits &= bits - 1)
    left[static_cast<size_t>(std::countr_zero(bits))] = m.rx_per_port;
  for (bool more = true; more && used < pool;) {
    more = false;
    if (used > 0 && t.clock.now() - rx_start >= t.cfg.tx_turn_budget) break;
    for (uint32_t bits = ready; bits && used < pool; bits &= bits - 1) {
      const uint8_t port = static_cast<uint8_t>(std::countr_zero(bits));
      uint32_t& budget = left[port];
      if (budget == 0) continue;
      const uint32_t want = std::min({t.cfg.batch, budget, pool - used});
      const uint32_t n = read_port(t, port, used, want);
      used += n;
      budget -= n;
      if (n < want)
        budget = 0;  // the port is empty
      else
        more = more || budget > 0;
    }
  }
}

// The entries' arrival times in engine time (the kernel's stamp, or the time of the read
// without one), clamped to [the latest `now` the engine saw, the read], and the entries in
// arrival order. Each port's entries are already in arrival order and their slots ascend in
// read order: sorting by (time, slot) merges them stably without std::stable_sort's heap
// buffer.
void order_by_arrival(UdpDriver::Impl& m, const MonotonicClock& clock) {
  const Time latest = m.last_rx_at;
  const int64_t offset = realtime_minus_monotonic_ns();
  for (RxEntry& e : m.rx_entries) {
    const int64_t mono = static_cast<int64_t>(e.arrived) - offset;
    Time at = e.arrived && mono > 0 ? clock.from_monotonic_ns(static_cast<uint64_t>(mono)) : latest;
    e.arrived = std::clamp(at, m.last_now, latest);
  }
  std::sort(m.rx_entries.begin(), m.rx_entries.end(), [](const auto& a, const auto& b) {
    return a.arrived != b.arrived ? a.arrived < b.arrived : a.slot < b.slot;
  });
}

// One answer to a stranger's ping from the bucket, refilled at stranger_pings_per_second.
bool take_stranger_ping_token(Turn& t) {
  UdpDriver::Impl& m = t.m;
  const Time now = t.clock.now();
  if (now > m.stranger_ping_refill_at) {
    const double refill = static_cast<double>(now - m.stranger_ping_refill_at) /
                          static_cast<double>(kPicosPerSecond) * t.cfg.stranger_pings_per_second;
    m.stranger_ping_tokens =
        std::min(UdpDriver::Impl::kStrangerPingBurst, m.stranger_ping_tokens + refill);
    m.stranger_ping_refill_at = now;
  }
  if (m.stranger_ping_tokens < 1) return false;
  m.stranger_ping_tokens -= 1;
  return true;
}

// The driver's own datagrams: a ping is answered on the port it came by (another ECMP path
// per ping), a pong is noted for probe_planes; either from a host that is not a peer is
// dropped unless pings_from_anyone. Returns false for anything else (a transport packet).
bool handle_ping(Turn& t, uint8_t port, const sockaddr_in6& from, uint8_t* payload, size_t len) {
  const bool ping = is_ping(payload, len);
  if (!ping && !is_pong(payload, len)) return false;
  if (!t.m.is_peer_address(from.sin6_addr)) {
    if (!t.cfg.pings_from_anyone) {
      ++t.stats.pings_from_strangers;
      return true;
    }
    if (ping && !take_stranger_ping_token(t)) {
      ++t.stats.pings_rate_limited;
      return true;
    }
  }
  if (ping) {
    std::memcpy(payload, kPongMagic, 8);
    sockaddr_in6 to = from;
    to.sin6_flowinfo = htonl(ping_flow_label(payload, true));
    ::sendto(t.m.sockets[port].fd.get(), payload, len, 0, reinterpret_cast<const sockaddr*>(&to),
             sizeof to);
    ++t.stats.pings_answered;
    return true;
  }
  if (payload[8] < 32) t.m.pong_mask |= 1u << payload[8];
  ++t.stats.pongs_received;
  return true;
}

// The traffic class a datagram arrived with (IPV6_TCLASS; over IPv4 the TOS byte, IP_TOS,
// which has the same DSCP and ECN bits), 0 if the kernel gave none.
uint8_t received_tclass(const msghdr& h) {
  uint8_t tclass = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      int v = 0;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      tclass = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      tclass = *CMSG_DATA(c);  // one byte
    }
  }
  return tclass;
}

// One received datagram to the engine at its arrival time: the IPv6 and UDP headers the
// socket took off are written back in front of it (with the traffic class's ECN and trim
// marks), then it is decoded and handed over; what does not decode is counted and dropped.
void deliver(Turn& t, const RxEntry& e) {
  UdpDriver::Impl& m = t.m;
  PortStats& ps = t.stats.ports[e.port];
  const size_t len = e.bytes;
  uint8_t* buf = m.rx_data(e.slot);
  const sockaddr_in6& from = m.rx_from[e.slot];
  ++ps.rx_packets;
  ps.rx_bytes += len;
  if (handle_ping(t, e.port, from, buf + kHeaderRoom, len)) return;
  size_t transport = len;
  if (t.cfg.auth != AuthMode::kOff) {
    // Before anything else: a datagram that does not open under its source's keys is dropped,
    // whatever it says (net/packet_auth.h).
    UdpDriver::Impl::PeerAuth* keys = m.auth_at(from.sin6_addr);
    auto opened = keys ? keys->opener.open(buf + kHeaderRoom, len)
                       : std::expected<size_t, OpenError>(std::unexpected(OpenError::kBadTag));
    if (!opened) {
      const bool replay =
          opened.error() == OpenError::kReplayed || opened.error() == OpenError::kTooOld;
      ++(replay ? t.stats.auth_replayed : t.stats.auth_failed);
      return;
    }
    ++t.stats.auth_opened;
    transport = *opened;
  }
  const uint8_t tclass = received_tclass(m.rx_msgs[e.slot].msg_hdr);
  write_headers(buf, from.sin6_addr, m.local[e.port].addr, ntohs(from.sin6_port), tclass, 0,
                transport);
  wire::DecodeOptions opt;
  opt.verify_icrc = t.cfg.verify_icrc;
  auto dg = wire::decode(std::span<const uint8_t>(buf, kHeaderRoom + transport), opt);
  if (!dg) {
    ++t.engine.mutable_counters().drops[static_cast<int>(DropReason::kDecode)];
    ++t.stats.decode_errors[static_cast<size_t>(dg.error()) % t.stats.decode_errors.size()];
    ++t.stats.decode_drops;
    return;
  }
  RxPacket rx;
  rx.port = e.port;
  rx.source_known = true;
  std::memcpy(rx.source.data(), &from.sin6_addr, 16);
  rx.ecn_ce = (tclass & 0x3) == wire::kEcnCe;
  rx.trimmed = (tclass >> 2) == wire::kDscpTrimmed;
  ps.rx_ce += rx.ecn_ce;
  ps.rx_trimmed += rx.trimmed;
  rx.pkt = dg->pkt;
  (void)t.engine.on_packet(e.arrived, rx);  // drops are counted by the engine
}

// Reads every port in `ready` (bit p) and hands the datagrams to the engine in kernel
// arrival order, each with its arrival time as `now` and with any engine deadline that fell
// between two arrivals run in between.
//
// Why: the engine's loss detectors reason about time order. Reading plane 0's queue to the
// end before plane 1's (or a whole batch of one port, then the other) would show the
// responder holes that do not exist on the wire, and its ACKs would tell the requester so;
// a process descheduled for milliseconds (on cores shared with other work) would let the PTO
// fire before the ACKs already queued in the socket are looked at. With arrival order and
// arrival times the engine sees what a NIC would have seen; only the transmit side still runs
// late.
void receive_ready(Turn& t, uint32_t ready) {
  UdpDriver::Impl& m = t.m;
  read_ports(t, ready);
  m.last_rx_at = t.clock.now();
  if (m.rx_entries.size() >= kRxCoalesceMinDatagrams) m.stream_at = m.last_rx_at;
  if (m.rx_entries.empty()) return;
  order_by_arrival(m, t.clock);
  for (const RxEntry& e : m.rx_entries) {
    if (const Time due = t.engine.next_deadline(); due <= e.arrived)
      t.engine.on_timer(std::max(due, m.last_now));
    m.last_now = e.arrived;
    deliver(t, e);
  }
}

}  // namespace

// Same destination address, port and flow label: one path.
static bool same_path(const sockaddr_in6& a, const sockaddr_in6& b) {
  return a.sin6_port == b.sin6_port && a.sin6_flowinfo == b.sin6_flowinfo &&
         std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof a.sin6_addr) == 0;
}

// How many queued datagrams from `first` (at most `avail`) one message carries: one, or with
// GSO a run on one path, all of one size but the last, which may be shorter (udp(7)).
static size_t message_run(const UdpDriver::Impl& m, const std::vector<uint32_t>& queue,
                          size_t first, size_t avail, const UdpDriver::Impl::Socket& s) {
  if (!s.gso) return 1;
  const UdpDriver::Impl::Slot& head = m.tx_slots[queue[first]];
  const size_t limit =
      std::min({avail, kMaxGsoDatagrams, max_gso_bytes(s.ipv4) / std::max(head.bytes, 1u)});
  size_t count = 1;
  while (count < limit) {
    const UdpDriver::Impl::Slot& next = m.tx_slots[queue[first + count]];
    if (next.bytes > head.bytes || !same_path(next.dst, head.dst)) break;
    ++count;
    if (next.bytes < head.bytes) break;
  }
  return count;
}

// A slot's datagram as iovecs at `iov`: headers, the payload where it is registered, pad and
// ICRC (the kernel's copy into the skb is the only one), or the slot's bytes in one piece.
// Returns how many.
static size_t datagram_iovecs(UdpDriver::Impl& m, uint32_t index, iovec* iov) {
  const UdpDriver::Impl::Slot& slot = m.tx_slots[index];
  uint8_t* transport = m.tx_data(index) + kHeaderRoom;
  if (!slot.payload) {
    iov[0] = iovec{transport, slot.bytes};
    return 1;
  }
  iov[0] = iovec{transport, slot.head};
  iov[1] = iovec{const_cast<uint8_t*>(slot.payload), slot.payload_len};
  iov[2] = iovec{transport + slot.head, slot.bytes - slot.head - slot.payload_len};
  return 3;
}

// The messages of one sendmmsg: up to tx_msgs.size() queued datagrams from `done` (3 iovecs
// each), in the queue's order, each message one datagram or a GSO run (message_run).
// Returns how many messages; tx_msg_datagrams says how many datagrams each carries.
static size_t prepare_messages(UdpDriver::Impl& m, const std::vector<uint32_t>& queue, size_t done,
                               const UdpDriver::Impl::Socket& s) {
  const size_t avail = std::min(queue.size() - done, m.tx_msgs.size());
  size_t msgs = 0, used = 0;
  while (used < avail) {
    const UdpDriver::Impl::Slot& head = m.tx_slots[queue[done + used]];
    const size_t count = message_run(m, queue, done + used, avail - used, s);
    iovec* iov = &m.tx_iov[3 * used];
    size_t iovs = 0;
    for (size_t k = 0; k < count; ++k)
      iovs += datagram_iovecs(m, queue[done + used + k], iov + iovs);
    msghdr& h = m.tx_msgs[msgs].msg_hdr;
    h = msghdr{};
    h.msg_name = const_cast<sockaddr_in6*>(&head.dst);
    h.msg_namelen = sizeof head.dst;
    h.msg_iov = iov;
    h.msg_iovlen = iovs;
    if (count > 1) set_udp_segment(h, m.tx_control[msgs], static_cast<uint16_t>(head.bytes));
    m.tx_msg_datagrams[msgs++] = static_cast<uint32_t>(count);
    used += count;
  }
  return msgs;
}

// Sends the slots queued on socket `s` with sendmmsg. Returns false on a hard error.
static bool send_queued(UdpDriver::Impl& m, DriverStats& stats, std::vector<uint32_t>& queue,
                        UdpDriver::Impl::Socket& s, NetError& err) {
  size_t done = 0;
  while (done < queue.size()) {
    const size_t msgs = prepare_messages(m, queue, done, s);
    const int sent = ::sendmmsg(s.fd.get(), m.tx_msgs.data(), static_cast<unsigned>(msgs), 0);
    ++stats.sendmmsg_calls;
    PortStats& ps = stats.ports[s.port];
    if (sent < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
        ++ps.tx_blocked;
        break;
      }
      if (m.tx_msg_datagrams[0] > 1 && (errno == EINVAL || errno == EIO || errno == EOPNOTSUPP ||
                                        errno == EMSGSIZE || errno == ENOPROTOOPT)) {
        // This socket's route refuses GSO (a device without the offload or the software
        // fallback for it): send its datagrams one by one from now on.
        s.gso = false;
        ++stats.gso_fallbacks;
        continue;
      }
      if (errno == EMSGSIZE) {
        err = NetError{NetErrc::kInvalidArgument,
                       "datagram of " + std::to_string(m.tx_slots[queue[done]].bytes) +
                           " bytes exceeds the MTU of port " + std::to_string(s.port) +
                           ": lower the path MTU (-m)"};
        return false;
      }
      // Unreachable destination and the like: the packets are lost, as on a wire; the
      // engine detects it. Skip the first message so the rest of the batch goes out.
      for (uint32_t k = 0; k < m.tx_msg_datagrams[0]; ++k) {
        ++ps.tx_errors;
        m.tx_free.push_back(queue[done++]);
      }
      continue;
    }
    for (int i = 0; i < sent; ++i) {
      const uint32_t count = m.tx_msg_datagrams[static_cast<size_t>(i)];
      stats.gso_sends += count > 1;
      for (uint32_t k = 0; k < count; ++k) {
        ++ps.tx_packets;
        ps.tx_bytes += m.tx_slots[queue[done]].bytes;
        m.tx_free.push_back(queue[done++]);
      }
    }
  }
  queue.erase(queue.begin(), queue.begin() + static_cast<ptrdiff_t>(done));
  return true;
}

namespace {

// The socket of `port` that sends from `src_port` (created on first use).
uint32_t socket_for(UdpDriver::Impl& m, const DriverConfig& cfg, DriverStats& stats, uint8_t port,
                    uint16_t src_port) {
  auto& map = m.src_sockets[port];
  if (auto it = map.find(src_port); it != map.end()) return it->second;
  auto index = add_send_socket(m, cfg, port, src_port);
  if (!index) ++stats.ports[port].src_port_fallbacks;
  return map.emplace(src_port, index.value_or(port)).first->second;  // fallback: data socket
}

}  // namespace

namespace {

// A transport packet encoded into a transmit slot, before its ICRC: `bytes` of BTH ..
// payload and pad. A payload of at least kZeroCopyMin stays in registered memory (`payload`
// non-null): the slot holds `head` bytes of headers, then room for the pad and the ICRC.
struct Framed {
  size_t bytes = 0;
  uint32_t head = 0, pad = 0;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
};

// Encodes `tx` behind the slot's header room at `buf`, with room for an authentication
// trailer; nullopt if it does not encode. `copy_payload`: the payload is always copied (it is
// to be encrypted in place).
std::optional<Framed> frame_packet(uint8_t* buf, TxPacket& tx, bool copy_payload) {
  // A payload of at least kZeroCopyMin leaves from registered memory: encode the headers
  // alone (payload_len 0 is what a trimmed packet carries, so RETH's dma_len may differ),
  // then set the BTH pad count, the one header field the payload length changes. Saves
  // copying the payload into the slot (2% of a sender's CPU).
  Framed f;
  const uint32_t payload_len = tx.pkt.payload_len;
  if (tx.pkt.payload && payload_len >= kZeroCopyMin && !copy_payload) {
    f.payload = tx.pkt.payload;
    tx.pkt.payload = nullptr;
    tx.pkt.payload_len = 0;
  }
  auto n = wire::encode_transport(
      tx.pkt, std::span<uint8_t>(buf + kHeaderRoom,
                                 kMaxTransportBytes - wire::kIcrcBytes - kAuthTrailerBytes));
  if (f.payload) {
    tx.pkt.payload = f.payload;
    tx.pkt.payload_len = payload_len;
  }
  if (!n) return std::nullopt;
  f.bytes = *n;
  if (f.payload) {
    f.head = static_cast<uint32_t>(*n);
    f.pad = (0u - payload_len) & 3u;
    f.payload_len = payload_len;
    buf[kHeaderRoom + 1] = static_cast<uint8_t>((buf[kHeaderRoom + 1] & ~0x30) | f.pad << 4);
    f.bytes = *n + payload_len + f.pad;
  }
  return f;
}

// Writes the ICRC behind the framed packet; the IPv6 and UDP headers at `buf` are written.
void append_icrc(uint8_t* buf, const Framed& f) {
  uint32_t crc = 0;
  uint8_t* trailer = buf + kHeaderRoom + f.bytes;
  if (f.payload) {
    // The ICRC over the pieces: wire::icrc of the headers returns the complement of the
    // CRC register after them (icrc_of), so the payload and pad continue that register.
    uint32_t state = ~wire::icrc(std::span<const uint8_t>(buf, kHeaderRoom + f.head));
    state = wire::crc32_update(state, std::span<const uint8_t>(f.payload, f.payload_len));
    trailer = buf + kHeaderRoom + f.head;
    std::memset(trailer, 0, f.pad);
    state = wire::crc32_update(state, std::span<const uint8_t>(trailer, f.pad));
    crc = ~state;
    trailer += f.pad;
  } else {
    crc = wire::icrc(std::span<const uint8_t>(buf, kHeaderRoom + f.bytes));
  }
  trailer[0] = static_cast<uint8_t>(crc);
  trailer[1] = static_cast<uint8_t>(crc >> 8);
  trailer[2] = static_cast<uint8_t>(crc >> 16);
  trailer[3] = static_cast<uint8_t>(crc >> 24);
}

// Seals the framed datagram of `bytes` bytes (ICRC written) and appends the trailer; returns
// the length on the wire, 0 if the cipher failed. A payload left in registered memory is
// authenticated where it lies (the trailer follows the pad and ICRC in the slot).
size_t seal_datagram(PacketSealer& sealer, uint8_t* buf, const Framed& f, size_t bytes) {
  uint8_t* transport = buf + kHeaderRoom;
  if (!f.payload) return sealer.seal(transport, bytes);
  uint8_t* tail = transport + f.head;
  const size_t tail_len = f.pad + wire::kIcrcBytes;
  const bool ok = sealer.seal_pieces({std::span<const uint8_t>(transport, f.head),
                                      std::span<const uint8_t>(f.payload, f.payload_len),
                                      std::span<const uint8_t>(tail, tail_len)},
                                     tail + tail_len);
  return ok ? bytes + kAuthTrailerBytes : 0;
}

// Where a packet leaves: its destination address, the socket and that socket's source port.
struct Route {
  in6_addr dst{};
  uint32_t socket = 0;
  uint16_t src_port = 0;
};

// The route of `tx` to `peer` as the EV format says (see the header: SRV6 addresses the EV's
// uSID carrier, STEV and UDP choose a source port).
Route route_of(Turn& t, const TxPacket& tx, const Endpoint& peer) {
  Route r{peer.addr, tx.port, t.m.local[tx.port].port};
  if (t.cfg.ev_mode == ev::FormatMode::kSrv6) {
    // The EV's uSID carrier is the destination; an all-zero EV (tests) keeps the peer's
    // address.
    bool zero = true;
    for (int i = 0; i < 16; ++i)
      zero = zero && tx.ev[static_cast<size_t>(i)] == 0;
    if (!zero) std::memcpy(&r.dst, tx.ev.data(), 16);
    r.socket = t.m.tx_socket[tx.port];
    r.src_port = t.m.sockets[r.socket].src_port;
  } else {
    wire::Ipv6Header ip;
    wire::UdpHeader udp;
    wire::SrhHeader srh;
    bool has_srh = false;
    udp.src_port = r.src_port;
    ev::apply_to_envelope(t.cfg.ev_mode, tx.ev, ip, udp, srh, has_srh);
    if (udp.src_port != r.src_port) {
      r.socket = socket_for(t.m, t.cfg, t.stats, tx.port, udp.src_port);
      r.src_port = t.m.sockets[r.socket].src_port;
    }
  }
  return r;
}

// Puts `tx` into transmit slot `slot` as a whole datagram (transport packet and ICRC) and
// queues the slot on its socket's batch; a packet that cannot be framed or has no peer
// endpoint frees the slot and counts as a send error.
void queue_packet(Turn& t, TxPacket& tx, uint32_t slot) {
  UdpDriver::Impl& m = t.m;
  uint8_t* buf = m.tx_data(slot);
  const bool sealed = t.cfg.auth != AuthMode::kOff;
  const std::optional<Framed> f = frame_packet(buf, tx, t.cfg.auth == AuthMode::kEncrypt);
  auto pit = m.peers.find(tx.peer);
  auto kit = sealed ? m.auth.find(tx.peer) : m.auth.end();
  if (!f || pit == m.peers.end() || tx.port >= pit->second.size() ||
      (sealed && kit == m.auth.end())) {  // never unsealed to a peer that expects a seal
    m.tx_free.push_back(slot);
    ++t.stats.ports[tx.port].tx_errors;
    return;
  }
  const Endpoint& peer = pit->second[tx.port];
  // Every mode labels the path (a hash of the EV outside STEV: a few ns a packet).
  const uint32_t flow_label = ev::path_flow_label(t.cfg.ev_mode, tx.ev);
  const Route r = route_of(t, tx, peer);
  const size_t datagram_bytes = f->bytes + wire::kIcrcBytes;
  write_headers(buf, m.local[tx.port].addr, r.dst, r.src_port, t.cfg.traffic_class, flow_label,
                datagram_bytes);
  append_icrc(buf, *f);
  // The seal covers the datagram as the peer decodes it (the ICRC's headers name the length
  // without the trailer): sealed last.
  const size_t wire_bytes =
      sealed ? seal_datagram(kit->second->sealer, buf, *f, datagram_bytes) : datagram_bytes;
  if (wire_bytes == 0) {
    m.tx_free.push_back(slot);
    ++t.stats.ports[tx.port].tx_errors;
    return;
  }
  UdpDriver::Impl::Slot& s = m.tx_slots[slot];
  s.bytes = static_cast<uint32_t>(wire_bytes);
  s.payload = f->payload;
  s.payload_len = f->payload_len;
  s.head = f->head;
  s.socket = r.socket;
  s.dst = to_sockaddr(Endpoint{r.dst, peer.port});
  // IPv4 has no flow label (the kernel ignores it): 0, so that GSO runs follow the real path.
  if (!m.sockets[r.socket].ipv4) s.dst.sin6_flowinfo = htonl(flow_label & 0xFFFFF);
  if (m.sockets[r.socket].batch.empty()) m.touched.push_back(r.socket);
  m.sockets[r.socket].batch.push_back(slot);
}

// The ports' bits: bit p for each of the `ports` ports.
uint32_t all_ports_mask(size_t ports) {
  return ports >= kMaxDriverPorts ? ~0u : (1u << ports) - 1;
}

// Transmit rounds: backlogs first, then fresh packets for ports that are not blocked, at
// most kMaxTxRoundsPerTurn rounds and tx_turn_budget of time (at least one round): see
// DriverConfig::tx_turn_budget. Sets m.tx_more when the budget ended the phase.
NetStatus transmit(Turn& t, Time now) {
  UdpDriver::Impl& m = t.m;
  const Time tx_start = now;
  m.tx_more = false;
  for (uint32_t round = 0; round < kMaxTxRoundsPerTurn; ++round) {
    if (round > 0 && t.clock.now() - tx_start >= t.cfg.tx_turn_budget) {
      m.tx_more = true;
      break;
    }
    m.blocked_ports = 0;
    for (UdpDriver::Impl::Socket& s : m.sockets) {
      if (s.backlog.empty()) continue;
      if (!send_queued(m, t.stats, s.backlog, s, m.error)) return std::unexpected(m.error);
      if (!s.backlog.empty()) m.blocked_ports |= 1u << s.port;
    }
    const uint32_t mask = all_ports_mask(t.cfg.ports.size()) & ~m.blocked_ports;
    if (!mask) break;
    uint32_t produced = 0;
    TxPacket tx;
    m.touched.clear();
    now = std::max(t.clock.now(), m.last_now);
    m.last_now = now;
    while (produced < t.cfg.batch && !m.tx_free.empty() && t.engine.poll_transmit(now, mask, tx)) {
      const uint32_t slot = m.tx_free.back();
      m.tx_free.pop_back();
      queue_packet(t, tx, slot);
      ++produced;
    }
    for (uint32_t si : m.touched) {
      UdpDriver::Impl::Socket& s = m.sockets[si];
      if (!send_queued(m, t.stats, s.batch, s, m.error)) return std::unexpected(m.error);
      // What did not fit stays queued, in order, ahead of anything newer.
      s.backlog.insert(s.backlog.end(), s.batch.begin(), s.batch.end());
      s.batch.clear();
    }
    if (produced < t.cfg.batch) break;
  }
  return {};
}

// The engine's timers that are due, then the transmit phase.
NetStatus service(Turn& t) {
  const Time now = std::max(t.clock.now(), t.m.last_now);
  t.m.last_now = now;
  if (t.engine.next_deadline() <= now) t.engine.on_timer(now);
  return transmit(t, now);
}

// Readable ports of `events` as a bit mask; drains the wake-up eventfd.
uint32_t ready_ports(Turn& t, const epoll_event* events, int n) {
  uint32_t ready = 0;
  for (int i = 0; i < n; ++i) {
    if (events[i].data.u32 == kWakeToken) {
      uint64_t count = 0;
      (void)!::read(t.m.wake_fd.get(), &count, sizeof count);
      ++t.stats.wake_calls_seen;
    } else {
      ready |= 1u << events[i].data.u32;
    }
  }
  return ready;
}

// How long the turn may sleep: up to `max_wait`, not past the engine's next deadline, at
// most 20 us while a socket has a backlog, not at all with busy_poll.
Time wait_time(Turn& t, Time now, Time max_wait) {
  Time wait = max_wait;
  const Time deadline = t.engine.next_deadline();
  if (deadline <= now)
    wait = 0;
  else if (deadline - now < wait)
    wait = deadline - now;
  bool backlog = false;
  for (const UdpDriver::Impl::Socket& s : t.m.sockets)
    backlog = backlog || !s.backlog.empty();
  if (backlog) wait = std::min<Time>(wait, us(20));
  if (t.cfg.busy_poll) wait = 0;
  return wait;
}

// Timer slack defaults to 50 us (prctl(2)); the engine's ACK delay is 2 us. Once per thread.
void tighten_timer_slack() {
  thread_local bool slack_set = false;
  if (!slack_set) {
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    slack_set = true;
  }
}

// Receive coalescing (DriverConfig::rx_coalesce): while a stream runs -- a receive of
// several datagrams within the last kRxStreamHolds holds -- the ports are read at most once
// per rx_coalesce; transmit still runs. A receive that finds the ports empty (the sender was
// descheduled) keeps holding: waking on the next datagram would read it alone, and that
// wake-up is an IPI the sender pays. A due engine deadline ends the hold: input first, as in
// poll(), so a timer never fires against an ACK already waiting in a socket. Returns until
// when the ports are held (0: not held).
Time rx_hold_until(Turn& t, Time now) {
  constexpr Time kRxStreamHolds = 4;
  const Time coalesce = t.cfg.rx_coalesce;
  if (coalesce > 0 && t.m.stream_at != kNever && now - t.m.stream_at < kRxStreamHolds * coalesce &&
      t.engine.next_deadline() > now)
    return t.m.last_rx_at + coalesce;
  return 0;
}

}  // namespace

NetStatus UdpDriver::poll(Time max_wait) {
  Impl& m = *impl_;
  tighten_timer_slack();
  Turn t{m, engine_, config_, stats_, clock_};
  const Time t0 = clock_.now();
  const Time hold_until = rx_hold_until(t, t0);
  epoll_event events[kEpollEvents];
  // Waits up to `ts` for the data sockets and receives from the readable ones; returns what
  // epoll_pwait2 returned (errno intact on failure).
  const auto poll_and_receive = [&](const timespec& ts) {
    const int got = ::epoll_pwait2(m.epoll.get(), events, kEpollEvents, &ts, nullptr);
    if (got > 0) {
      if (const uint32_t ready = ready_ports(t, events, got)) receive_ready(t, ready);
    }
    return got;
  };
  int n = 0;
  if (t0 >= hold_until) {
    // Input first: whatever arrived since the last turn is older than any deadline that may
    // have passed meanwhile (an ACK waiting in the socket must not lose the race against the
    // PTO just because this process was not running).
    n = poll_and_receive(timespec{0, 0});
    if (n < 0 && errno != EINTR) return errno_fail("epoll_pwait2", errno);
    // One receive per turn: the caller sees the completions of this input before more is
    // placed (a WRITE_IMM's buffer is checked before its slot can be written again).
    if (n > 0) return service(t);
  }
  if (auto s = service(t); !s) return s;
  // The transmit phase stopped on its budget with more to send: no wait; the next turn reads
  // the input that arrived meanwhile first.
  if (m.tx_more) return {};
  ++stats_.wakeups;
  // Wait for input, a wake() or the next deadline.
  const Time now = clock_.now();
  const Time wait = wait_time(t, now, max_wait);
  if (now < hold_until) {
    // Hold the ports: sleep on wake() alone until the hold ends (or a deadline, or
    // max_wait), then read every port without asking epoll which are readable (in a
    // stream they all are; an empty one costs one recvmmsg that returns EAGAIN).
    const timespec ts = to_timespec(std::min(wait, hold_until - now));
    ++stats_.rx_holds;
    n = ::epoll_pwait2(m.wake_epoll.get(), events, 1, &ts, nullptr);
    if (n < 0 && errno != EINTR) return errno_fail("epoll_pwait2", errno);
    if (n > 0) (void)ready_ports(t, events, n);
    receive_ready(t, all_ports_mask(config_.ports.size()));
    return service(t);
  }
  n = poll_and_receive(to_timespec(wait));
  if (n < 0 && errno != EINTR) return errno_fail("epoll_pwait2", errno);
  return service(t);
}

void UdpDriver::wake() {
  const uint64_t one = 1;
  // EAGAIN only when the counter would overflow: a wake-up is pending anyway.
  (void)!::write(impl_->wake_fd.get(), &one, sizeof one);
}

NetStatus UdpDriver::probe_planes(uint32_t peer, Time timeout) {
  Impl& m = *impl_;
  auto pit = m.peers.find(peer);
  if (pit == m.peers.end()) return net_fail(NetErrc::kInvalidArgument, "unknown peer");
  const uint32_t want = all_ports_mask(config_.ports.size());
  m.pong_mask = 0;
  const Time start = now();
  Time next_ping = start;
  while ((m.pong_mask & want) != want) {
    const Time t = now();
    if (t - start >= timeout) break;
    if (t >= next_ping) {
      for (size_t p = 0; p < config_.ports.size(); ++p) {
        if (m.pong_mask & (1u << p)) continue;
        uint8_t ping[kPingBytes];
        std::memcpy(ping, kPingMagic, 8);
        ping[8] = static_cast<uint8_t>(p);
        const uint64_t nonce = ++m.ping_nonce;
        std::memcpy(ping + 9, &nonce, 8);
        sockaddr_in6 dst = to_sockaddr(pit->second[p]);
        // Each retry hashes onto another ECMP path (net/ping.h): a blackholed spine the
        // first label happens to pick does not fail a plane that has healthy ones.
        dst.sin6_flowinfo = htonl(ping_flow_label(ping, false));
        ::sendto(m.sockets[p].fd.get(), ping, sizeof ping, 0,
                 reinterpret_cast<const sockaddr*>(&dst), sizeof dst);
      }
      next_ping = t + ms(20);
    }
    if (auto s = poll(ms(5)); !s) return s;
  }
  if ((m.pong_mask & want) == want) return {};
  std::string msg =
      "no reply over the data path within " + std::to_string(timeout / kPicosPerMilli) + " ms from";
  for (size_t p = 0; p < config_.ports.size(); ++p)
    if (!(m.pong_mask & (1u << p)))
      msg += " plane " + std::to_string(p) + " (" + format_endpoint(pit->second[p]) + ")";
  msg += ": the fabric has no route to the peer there (or a firewall drops UDP)";
  return net_fail(NetErrc::kNoRoute, std::move(msg));
}

}  // namespace mrc::net
