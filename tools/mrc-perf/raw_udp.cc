// The raw UDP blast of --raw-udp, both sides: the path's limit without MRC (same planes,
// paths and datagram size as MRC's), which the client reports MRC's goodput against.
#include <fmt/core.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "perf.h"
#include "wire/codec.h"

namespace mrc::perf {

namespace {

// Bytes of the transport packet (BTH .. payload, ICRC) MRC sends for a full `mtu` payload:
// the raw blast sends datagrams of exactly this size.
size_t mrc_datagram_bytes(uint32_t mtu) {
  std::vector<uint8_t> payload(mtu), buf(mtu + 512);
  wire::TransportPacket pkt;
  pkt.bth.opcode = wire::Opcode::kWriteOnly;
  pkt.reth.dma_len = mtu;
  pkt.data.pkt_count = 1;
  pkt.payload = payload.data();
  pkt.payload_len = mtu;
  auto n = wire::encode_transport(pkt, buf);
  return n ? *n + 4 : mtu + 64;
}

NetResult<UniqueFd> raw_socket(const in6_addr& addr, ev::FormatMode mode) {
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return errno_fail("socket", errno);
  const int one = 1, bytes = 8 << 20;
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  ::setsockopt(fd.get(), IPPROTO_IPV6, 33 /* IPV6_FLOWINFO_SEND */, &one, sizeof one);
  const int zero = 0;  // the driver's labels exactly (ev::path_flow_label), no kernel hash
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, &zero, sizeof zero);
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_DONTFRAG, &one, sizeof one);
  if (mode == ev::FormatMode::kSrv6) {
    // As the driver's sockets (docs/linux-driver.md): a checksum over the first uSID DA is
    // wrong after the shifts, and real NICs would drop the blast at the receiver.
    ::setsockopt(fd.get(), IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one);
    ::setsockopt(fd.get(), IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one);
  }
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  sockaddr_in6 a = to_sockaddr(Endpoint{addr, 0});
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return errno_fail("bind " + format_in6(addr), errno);
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_in6 a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin6_port);
}

// While it lives, the driver's sockets do not ask for kernel arrival times: one socket that
// does makes the kernel stamp every packet at every hop of the namespace fabric
// (UdpDriver::set_rx_timestamps), ~6% of the blast's sending core on mrc-fabric, a cost of
// MRC's that the path's limit must not carry (docs/perf-log.md, "Linux driver: an honest blast").
class RxTimestampsOff {
 public:
  explicit RxTimestampsOff(UdpDriver& d) : d_(d), was_on_(d.config().rx_timestamps) {
    if (was_on_) warn(d_.set_rx_timestamps(false));
  }
  ~RxTimestampsOff() {
    if (was_on_) warn(d_.set_rx_timestamps(true));
  }
  RxTimestampsOff(const RxTimestampsOff&) = delete;
  RxTimestampsOff& operator=(const RxTimestampsOff&) = delete;

 private:
  static void warn(const NetStatus& st) {
    if (!st) std::fprintf(stderr, "mrc-perf: raw UDP: %s\n", st.error().message.c_str());
  }
  UdpDriver& d_;
  bool was_on_;
};

}  // namespace

// Server side of --raw-udp: one socket per plane on the plane's address; counts what arrives
// until the client's next frame, then answers with the counts.
int serve_raw(Session& ss, SideChannel& ch, int idle_timeout_ms) {
  const size_t P = ss.config().driver.ports.size();
  // The blast measures the path without MRC: no kernel stamps for MRC's sockets meanwhile.
  RxTimestampsOff no_stamps(ss.driver());
  std::vector<UniqueFd> fds;
  std::string reply;
  for (size_t p = 0; p < P; ++p) {
    auto fd =
        raw_socket(ss.driver().local(static_cast<uint8_t>(p)).addr, ss.config().driver.ev_mode);
    if (!fd) {
      std::fprintf(stderr, "mrc-perf: raw UDP: %s\n", fd.error().message.c_str());
      return 1;
    }
    reply += fmt::format("raw_port{}={}\n", p, bound_port(fd->get()));
    fds.push_back(std::move(*fd));
  }
  if (!ch.send_frame(std::vector<uint8_t>(reply.begin(), reply.end()))) return 1;
  constexpr unsigned kBatch = 64;
  constexpr size_t kSlot = 9400;
  std::vector<uint8_t> mem(kBatch * kSlot);
  std::vector<mmsghdr> msgs(kBatch);
  std::vector<iovec> iov(kBatch);
  uint64_t packets = 0, bytes = 0, first_ns = 0, last_ns = 0;
  std::vector<pollfd> pfds;
  for (const UniqueFd& fd : fds)
    pfds.push_back(pollfd{fd.get(), POLLIN, 0});
  pfds.push_back(pollfd{ch.fd(), POLLIN, 0});
  const uint64_t idle_ns = static_cast<uint64_t>(idle_timeout_ms) * 1'000'000;
  uint64_t last_heard = monotonic_ns();
  for (uint64_t turn = 0;; ++turn) {
    bool got = false;
    for (const UniqueFd& fd : fds) {
      for (unsigned i = 0; i < kBatch; ++i) {
        iov[i] = iovec{mem.data() + i * kSlot, kSlot};
        msgs[i].msg_hdr = msghdr{};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = ::recvmmsg(fd.get(), msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) continue;
      got = true;
      const uint64_t t = monotonic_ns();
      if (!first_ns) first_ns = t;
      last_ns = t;
      packets += static_cast<uint64_t>(n);
      for (int i = 0; i < n; ++i)
        bytes += msgs[static_cast<size_t>(i)].msg_len;
    }
    if (got) last_heard = last_ns;
    if (!got) {
      ::poll(pfds.data(), pfds.size(), 1);
      if (monotonic_ns() - last_heard > idle_ns) {
        server_log(
            fmt::format("{}: nothing in a raw blast for {} ms", ch.peer_name(), idle_timeout_ms));
        return 1;
      }
    }
    if (got && turn % 64 != 0) continue;
    auto f = ch.try_recv_frame();
    if (!f) return 1;
    if (*f) break;  // "rawend"
  }
  // The first batch's arrival opens the interval: leave its packets out of the rate.
  (void)ch.send_frame(
      kv_encode({{"raw_packets", packets}, {"raw_bytes", bytes}, {"raw_ns", last_ns - first_ns}}));
  return 0;
}

namespace {

// The sending side of a raw UDP blast, set up as MRC's driver sends. Each datagram: its
// headers from a small buffer of its own, the payload (the MTU's bytes) straight from the
// registered buffer, cycling through it as MRC's messages do, so that both pay the same copy
// from the same memory.
struct RawBlast {
  static constexpr size_t kBatch = 64;  // datagrams per plane and sendmmsg
  struct Plane {
    UniqueFd fd;
    std::vector<sockaddr_in6> dsts;  // the paths; each message goes to the next
    std::vector<mmsghdr> msgs;
    size_t per_msg = 1;  // datagrams per message (a UDP GSO run)
    size_t next_path = 0;
  };
  uint32_t mtu = 0;
  std::vector<uint8_t> headers;
  // A registered buffer smaller than one payload (small messages without --verify) cannot
  // source it: then a buffer of its own, as large as one payload.
  std::vector<uint8_t> own_payload;
  uint8_t* source = nullptr;
  uint64_t pieces = 1;  // payload-sized pieces of the source
  uint64_t next_piece = 0;
  std::vector<std::array<iovec, 2>> iovs;  // kBatch per plane: headers, payload
  std::vector<UdpSegmentControl> control;  // kBatch per plane with GSO
  std::vector<Plane> planes;
};

// The destinations of plane `p`'s datagrams: the server's raw port on that plane over each of
// the paths MRC sprays on (SRV6: the EV's uSID destination; STEV: its flow label), or the
// plain address when the QP has no path on the plane.
std::vector<sockaddr_in6> raw_paths(Session& cs, size_t p, const Endpoint& peer) {
  const ev::FormatMode mode = cs.config().driver.ev_mode;
  const PathSet* paths = cs.engine().qp_paths(cs.qpns()[0]);
  std::vector<sockaddr_in6> out;
  for (size_t i = 0; paths && i < paths->size(); ++i) {
    const PathDesc& d = paths->path(static_cast<int>(i)).desc;
    if (d.port != p) continue;
    sockaddr_in6 a = to_sockaddr(peer);
    if (mode == ev::FormatMode::kSrv6) {
      bool zero = true;
      for (uint8_t b : std::span(d.ev).first(16))
        zero = zero && b == 0;
      if (!zero) std::memcpy(&a.sin6_addr, d.ev.data(), 16);
    }
    a.sin6_flowinfo = htonl(ev::path_flow_label(mode, d.ev) & 0xFFFFF);
    out.push_back(a);
  }
  if (out.empty()) out.push_back(to_sockaddr(peer));
  return out;
}

// Plane `p`'s messages over its kBatch datagrams: with GSO (STEV/UDP modes, as the driver) a
// path's run of datagrams (spray_burst) in one UDP_SEGMENT send, else one datagram each.
void arm_raw_messages(RawBlast& b, size_t p, bool gso, const DriverConfig& dc,
                      size_t datagram_bytes) {
  constexpr size_t kBatch = RawBlast::kBatch;
  RawBlast::Plane& pl = b.planes[p];
  for (size_t i = 0; i < kBatch; ++i) {
    std::array<iovec, 2>& v = b.iovs[p * kBatch + i];
    v[0] = iovec{b.headers.data(), b.headers.size()};
    v[1] = iovec{b.source, b.mtu};  // iov_base: set before each sendmmsg (send_raw)
  }
  pl.per_msg = gso ? std::clamp<size_t>(spray_burst(dc, b.mtu), 1, kBatch) : 1;
  pl.msgs.resize(kBatch / pl.per_msg);
  for (size_t i = 0; i < pl.msgs.size(); ++i) {
    msghdr& h = pl.msgs[i].msg_hdr;
    h = msghdr{};
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_iov = b.iovs[p * kBatch + i * pl.per_msg].data();  // contiguous: 2 per datagram
    h.msg_iovlen = 2 * pl.per_msg;
    if (gso && pl.per_msg > 1)
      set_udp_segment(h, b.control[p * kBatch + i], static_cast<uint16_t>(datagram_bytes));
  }
}

// A blast towards the server's raw ports (`kv`: raw_port<p> per plane), one socket per plane
// at the session's plane address.
NetResult<RawBlast> make_raw_blast(Session& cs, const std::map<std::string, uint64_t>& kv,
                                   size_t datagram_bytes) {
  const DriverConfig& dc = cs.config().driver;
  const size_t P = dc.ports.size();
  RawBlast b;
  b.mtu = cs.config().mtu;
  b.headers.assign(datagram_bytes - b.mtu, 0x5A);
  b.own_payload.assign(cs.buffer_bytes() < b.mtu ? b.mtu : 0, 0x5A);
  b.source = b.own_payload.empty() ? cs.buffer() : b.own_payload.data();
  b.pieces = std::max<uint64_t>(1, cs.buffer_bytes() / b.mtu);
  b.iovs.resize(P * RawBlast::kBatch);
  const bool gso = gso_allowed(dc);
  b.control.resize(gso ? P * RawBlast::kBatch : 0);
  b.planes.resize(P);
  for (size_t p = 0; p < P; ++p) {
    auto fd = raw_socket(cs.driver().local(static_cast<uint8_t>(p)).addr, dc.ev_mode);
    if (!fd) return std::unexpected(fd.error());
    b.planes[p].fd = std::move(*fd);
    Endpoint peer;
    std::memcpy(&peer.addr, cs.peer().planes[p].addr.data(), 16);
    peer.port = static_cast<uint16_t>(get(kv, "raw_port" + std::to_string(p)));
    if (peer.port == 0)
      return net_fail(NetErrc::kBadHello,
                      "server sent no raw UDP port for plane " + std::to_string(p));
    b.planes[p].dsts = raw_paths(cs, p, peer);
    arm_raw_messages(b, p, gso, dc, datagram_bytes);
  }
  return b;
}

// Sends for `seconds`, the planes in turn, a batch each; returns the datagrams sent.
uint64_t send_raw(RawBlast& b, double seconds) {
  constexpr size_t kBatch = RawBlast::kBatch;
  uint64_t sent = 0;
  const uint64_t stop = monotonic_ns() + static_cast<uint64_t>(seconds * 1e9);
  while (monotonic_ns() < stop)
    for (size_t p = 0; p < b.planes.size(); ++p) {
      RawBlast::Plane& pl = b.planes[p];
      for (size_t i = 0; i < kBatch; ++i)
        b.iovs[p * kBatch + i][1].iov_base = b.source + (b.next_piece++ % b.pieces) * b.mtu;
      for (mmsghdr& m : pl.msgs) {
        m.msg_hdr.msg_name = &pl.dsts[pl.next_path];
        pl.next_path = pl.next_path + 1 == pl.dsts.size() ? 0 : pl.next_path + 1;
      }
      const int n =
          ::sendmmsg(pl.fd.get(), pl.msgs.data(), static_cast<unsigned>(pl.msgs.size()), 0);
      if (n > 0) sent += static_cast<uint64_t>(n) * pl.per_msg;
    }
  return sent;
}

}  // namespace

// Client side of --raw-udp: for `seconds`, sendmmsg batches of MRC-sized datagrams from one
// socket per plane (the session's plane addresses) to the server's raw sockets, over the same
// paths MRC sprays on (SRV6: the EVs' uSID destinations; STEV: their flow labels), with UDP GSO
// where MRC's driver uses it (STEV/UDP modes unless --no-gso).
NetResult<RawResult> run_raw(Session& cs, SideChannel& ch, const Options& o) {
  RxTimestampsOff no_stamps(cs.driver());  // as serve_raw
  if (auto st = ch.send_frame(perf_raw()); !st) return std::unexpected(st.error());
  auto frame = wait_frame(cs, ch, ms(10'000));
  if (!frame) return std::unexpected(frame.error());
  RawResult r;
  r.datagram_bytes = mrc_datagram_bytes(cs.config().mtu);
  auto blast = make_raw_blast(cs, kv_decode(*frame), r.datagram_bytes);
  if (!blast) return std::unexpected(blast.error());
  const double cpu0 = cpu_seconds();
  r.sent = send_raw(*blast, o.raw_seconds);
  const double cpu = cpu_seconds() - cpu0;
  ::usleep(20'000);  // let the last datagrams land
  if (auto st = ch.send_frame(perf_raw_end()); !st) return std::unexpected(st.error());
  auto counts = wait_frame(cs, ch, ms(10'000));
  if (!counts) return std::unexpected(counts.error());
  const auto c = kv_decode(*counts);
  r.received = get(c, "raw_packets");
  const double secs = static_cast<double>(get(c, "raw_ns")) / 1e9;
  if (secs > 0) r.gbps = static_cast<double>(r.received) * cs.config().mtu * 8 / secs / 1e9;
  const double hz = cpu_hz();
  if (r.sent) r.client_cycles_per_byte = cpu * hz / (static_cast<double>(r.sent) * cs.config().mtu);
  return r;
}

}  // namespace mrc::perf
