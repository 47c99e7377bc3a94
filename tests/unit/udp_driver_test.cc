// The Linux UDP driver on its own (no session): wake() ends a waiting poll early from another
// thread, the ping format is recognised, arrival-ordered delivery keeps time monotonic.
#include "net/udp_driver.h"

#include <gtest/gtest.h>
#include <linux/net_tstamp.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "net/path_plan.h"
#include "net/ping.h"

namespace mrc::net {
namespace {

struct OneDriver {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<UdpDriver> driver;
};

OneDriver open_loopback(uint8_t ports, ev::FormatMode mode = ev::FormatMode::kSrv6,
                        std::optional<Time> ack_repeat_after = {}, int socket_buffer = 0) {
  OneDriver d;
  EngineConfig ec;
  ec.num_ports = ports;
  d.engine = std::make_unique<Engine>(ec);
  DriverConfig dc;
  dc.ev_mode = mode;
  dc.ack_repeat_after = ack_repeat_after;
  if (socket_buffer) dc.socket_buffer = socket_buffer;
  for (uint8_t p = 0; p < ports; ++p)
    dc.ports.push_back(PortConfig{*parse_endpoint("::1", 0), ""});
  auto drv = UdpDriver::open(*d.engine, dc);
  EXPECT_TRUE(drv);
  if (drv) d.driver = std::move(*drv);
  return d;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(UdpDriver, wake__from_another_thread_ends_a_waiting_poll) {
  OneDriver d = open_loopback(2);
  ASSERT_TRUE(d.driver);
  std::atomic<bool> polling{false};
  std::thread waker([&] {
    while (!polling)
      std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    d.driver->wake();
  });
  const auto start = std::chrono::steady_clock::now();
  polling = true;
  // Nothing to do and no deadline: without the wake-up this poll would sleep 10 s (a
  // first poll may return at once when the wake-up arrives before it waits; loop until seen).
  while (d.driver->stats().wake_calls_seen == 0 && seconds_since(start) < 10)
    ASSERT_TRUE(d.driver->poll(ms(10'000)));
  waker.join();
  EXPECT_EQ(d.driver->stats().wake_calls_seen, 1u);
  EXPECT_LT(seconds_since(start), 5.0);
}

TEST(UdpDriver, wake__before_poll_ends_the_next_poll_and_counts_once) {
  OneDriver d = open_loopback(1);
  ASSERT_TRUE(d.driver);
  d.driver->wake();
  d.driver->wake();  // coalesced: one eventfd counter
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(d.driver->poll(ms(10'000)));
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(d.driver->stats().wake_calls_seen, 1u);
  // The wake-up is consumed: the next poll waits its full (short) timeout.
  const auto again = std::chrono::steady_clock::now();
  ASSERT_TRUE(d.driver->poll(ms(30)));
  EXPECT_GE(seconds_since(again), 0.025);
  EXPECT_EQ(d.driver->stats().wake_calls_seen, 1u);
}

TEST(UdpDriver, poll__ping_is_answered_with_the_pong_magic) {
  OneDriver a = open_loopback(1), b = open_loopback(1);
  ASSERT_TRUE(a.driver && b.driver);
  const Endpoint eb = b.driver->local(0), ea = a.driver->local(0);
  ASSERT_TRUE(a.driver->set_peer(1, std::span(&eb, 1)));
  ASSERT_TRUE(b.driver->set_peer(1, std::span(&ea, 1)));  // pings are answered to peers only
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop)
      (void)b.driver->poll(ms(5));
  });
  EXPECT_TRUE(a.driver->probe_planes(1, ms(2000)));
  stop = true;
  b.driver->wake();
  t.join();
  EXPECT_GE(b.driver->stats().pings_answered, 1u);
  EXPECT_GE(a.driver->stats().pongs_received, 1u);
}

// Ping reflection: a driver answers (and believes) pings and pongs only from its peers'
// addresses; the rest is counted.
TEST(UdpDriver, poll__ping_from_a_stranger_is_not_answered_and_is_counted) {
  OneDriver d = open_loopback(1);
  ASSERT_TRUE(d.driver);
  Endpoint elsewhere = *parse_endpoint("fd00:dead::1", 4791);
  ASSERT_TRUE(d.driver->set_peer(1, std::span(&elsewhere, 1)));
  UniqueFd tx(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(tx);
  uint8_t ping[kPingBytes] = {};
  std::memcpy(ping, kPingMagic, 8);
  const sockaddr_in6 to = to_sockaddr(d.driver->local(0));
  for (const char* magic : {kPingMagic, kPongMagic}) {
    std::memcpy(ping, magic, 8);
    ASSERT_EQ(
        ::sendto(tx.get(), ping, sizeof ping, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
        static_cast<ssize_t>(sizeof ping));
  }
  for (int i = 0; i < 40 && d.driver->stats().pings_from_strangers < 2; ++i)
    ASSERT_TRUE(d.driver->poll(ms(5)));
  EXPECT_EQ(d.driver->stats().pings_from_strangers, 2u);
  EXPECT_EQ(d.driver->stats().pings_answered, 0u);
  EXPECT_EQ(d.driver->stats().pongs_received, 0u);
}

// A probe responder for anyone (the C API's device, pings_from_anyone) answers strangers at a
// bounded rate: a flood of pings is answered for its burst and the limit, the rest counted.
TEST(UdpDriver, poll__pings_from_strangers_are_answered_at_a_bounded_rate) {
  EngineConfig ec;
  Engine engine(ec);
  DriverConfig dc;
  dc.ports.push_back(PortConfig{*parse_endpoint("::1", 0), ""});
  dc.pings_from_anyone = true;
  dc.stranger_pings_per_second = 10;
  auto drv = UdpDriver::open(engine, dc);
  ASSERT_TRUE(drv);
  UdpDriver& d = **drv;
  UniqueFd tx(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(tx);
  uint8_t ping[kPingBytes] = {};
  std::memcpy(ping, kPingMagic, 8);
  const sockaddr_in6 to = to_sockaddr(d.local(0));
  constexpr uint64_t kPings = 300;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < kPings; ++i)
    ASSERT_EQ(
        ::sendto(tx.get(), ping, sizeof ping, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
        static_cast<ssize_t>(sizeof ping));
  const auto seen = [&] { return d.stats().pings_answered + d.stats().pings_rate_limited; };
  for (int i = 0; i < 200 && seen() < kPings; ++i)
    ASSERT_TRUE(d.poll(ms(5)));
  EXPECT_EQ(seen(), kPings);
  const double secs = seconds_since(start);
  EXPECT_GE(d.stats().pings_answered, 64u);
  EXPECT_LE(d.stats().pings_answered, 64u + static_cast<uint64_t>(secs * 10) + 1);
  EXPECT_EQ(d.stats().pings_from_strangers, 0u);
}

// A flood the process cannot read in time: the kernel's drops for our socket are counted.
TEST(UdpDriver, poll__rx_kernel_drops_count_what_a_full_receive_buffer_lost) {
  OneDriver d = open_loopback(1, ev::FormatMode::kSrv6, {}, 4096);
  ASSERT_TRUE(d.driver);
  UniqueFd tx(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(tx);
  const sockaddr_in6 to = to_sockaddr(d.driver->local(0));
  std::vector<uint8_t> junk(1000, 0x5A);
  for (int i = 0; i < 500; ++i)
    (void)::sendto(tx.get(), junk.data(), junk.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                   sizeof to);
  // One more after the flood: it carries the count (SO_RXQ_OVFL comes with a datagram read).
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(d.driver->poll(ms(5)));
    (void)::sendto(tx.get(), junk.data(), junk.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                   sizeof to);
  }
  ASSERT_TRUE(d.driver->poll(ms(5)));
  const PortStats& ps = d.driver->stats().ports[0];
  EXPECT_GT(ps.rx_kernel_drops, 0u);
  EXPECT_GE(ps.rx_packets + ps.rx_kernel_drops, 500u);
  EXPECT_GT(d.driver->stats().decode_drops, 0u);  // what was read is junk, counted as such
}

int udp_option(int fd, int opt) {
  int v = -1;
  socklen_t len = sizeof v;
  EXPECT_EQ(::getsockopt(fd, IPPROTO_UDP, opt, &v, &len), 0);
  return v;
}

// docs/fabric.md pitfall 2: uSID shifts rewrite the DA the UDP checksum covers, so SRV6 mode
// sends zero checksums and accepts them; the other modes keep the kernel's checksums.
TEST(UdpDriver, open__srv6_sends_and_accepts_zero_udp_checksums) {
  OneDriver srv6 = open_loopback(2, ev::FormatMode::kSrv6);
  OneDriver stev = open_loopback(1, ev::FormatMode::kStev);
  ASSERT_TRUE(srv6.driver && stev.driver);
  for (uint8_t p = 0; p < 2; ++p) {
    EXPECT_EQ(udp_option(srv6.driver->data_socket(p), UDP_NO_CHECK6_TX), 1);
    EXPECT_EQ(udp_option(srv6.driver->data_socket(p), UDP_NO_CHECK6_RX), 1);
  }
  EXPECT_EQ(udp_option(stev.driver->data_socket(0), UDP_NO_CHECK6_TX), 0);
  EXPECT_EQ(udp_option(stev.driver->data_socket(0), UDP_NO_CHECK6_RX), 0);

  // What RX changes: a zero-checksum ping reaches the SRV6 driver (answered) and is dropped
  // by the kernel in front of the STEV one.
  UniqueFd tx(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(tx);
  const int one = 1;
  ASSERT_EQ(::setsockopt(tx.get(), IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one), 0);
  ASSERT_EQ(::setsockopt(tx.get(), IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one), 0);
  uint8_t ping[kPingBytes] = {};
  std::memcpy(ping, kPingMagic, 8);
  const Endpoint loopback = *parse_endpoint("::1", 9);
  const Endpoint loopbacks[2] = {loopback, loopback};
  ASSERT_TRUE(srv6.driver->set_peer(1, loopbacks));  // pings are answered to peers only
  ASSERT_TRUE(stev.driver->set_peer(1, std::span(&loopback, 1)));
  for (OneDriver* d : {&srv6, &stev}) {
    const sockaddr_in6 to = to_sockaddr(d->driver->local(0));
    ASSERT_EQ(
        ::sendto(tx.get(), ping, sizeof ping, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
        static_cast<ssize_t>(sizeof ping));
    for (int i = 0; i < 20 && d->driver->stats().pings_answered == 0; ++i)
      ASSERT_TRUE(d->driver->poll(ms(5)));
  }
  EXPECT_EQ(srv6.driver->stats().pings_answered, 1u);
  EXPECT_EQ(stev.driver->stats().pings_answered, 0u);
}

int socket_option(int fd, int level, int opt) {
  int v = -1;
  socklen_t len = sizeof v;
  EXPECT_EQ(::getsockopt(fd, level, opt, &v, &len), 0);
  return v;
}

// Receive timestamps by SO_TIMESTAMPING (which, unlike SO_TIMESTAMPNS, releases the kernel's
// machine-wide stamping when turned off), per DriverConfig and at run time; no automatic
// flow labels (the driver sets every label itself).
TEST(UdpDriver, set_rx_timestamps__follow_the_config_and_turn_off_at_run_time) {
  constexpr int kStamps = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
  OneDriver d = open_loopback(2);
  ASSERT_TRUE(d.driver);
  EXPECT_TRUE(d.driver->config().rx_timestamps);
  for (uint8_t p = 0; p < 2; ++p) {
    const int fd = d.driver->data_socket(p);
    EXPECT_EQ(socket_option(fd, SOL_SOCKET, SO_TIMESTAMPING), kStamps);
    EXPECT_EQ(socket_option(fd, SOL_SOCKET, SO_TIMESTAMPNS), 0);
    EXPECT_EQ(socket_option(fd, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL), 0);
  }
  ASSERT_TRUE(d.driver->set_rx_timestamps(false));
  EXPECT_FALSE(d.driver->config().rx_timestamps);
  for (uint8_t p = 0; p < 2; ++p)
    EXPECT_EQ(socket_option(d.driver->data_socket(p), SOL_SOCKET, SO_TIMESTAMPING), 0);
  ASSERT_TRUE(d.driver->set_rx_timestamps(true));
  EXPECT_EQ(socket_option(d.driver->data_socket(1), SOL_SOCKET, SO_TIMESTAMPING), kStamps);

  Engine engine(EngineConfig{});
  DriverConfig dc;
  dc.rx_timestamps = false;
  dc.ports.push_back(PortConfig{*parse_endpoint("::1", 0), ""});
  auto off = UdpDriver::open(engine, dc);
  ASSERT_TRUE(off);
  EXPECT_EQ(socket_option((*off)->data_socket(0), SOL_SOCKET, SO_TIMESTAMPING), 0);
}

// Zero checksums leave the ICRC as the only check on the payload: SRV6 refuses to drop it.
TEST(UdpDriver, open__srv6_refuses_to_skip_the_icrc) {
  EngineConfig ec;
  ec.num_ports = 1;
  Engine engine(ec);
  DriverConfig dc;
  dc.ports.push_back(PortConfig{*parse_endpoint("::1", 0), ""});
  dc.ev_mode = ev::FormatMode::kSrv6;
  dc.verify_icrc = false;
  auto drv = UdpDriver::open(engine, dc);
  ASSERT_FALSE(drv);
  EXPECT_EQ(drv.error().code, NetErrc::kInvalidArgument);
  dc.ev_mode = ev::FormatMode::kStev;
  EXPECT_TRUE(UdpDriver::open(engine, dc));
}

// The order the driver keeps between the engine and the wire decides which packets RACK's
// same-instant rule may compare (Engine::set_transmit_order): SRV6 sends each port's packets
// from one socket; STEV and UDP from a socket per source port, i.e. per path.
TEST(UdpDriver, open__declares_the_transmit_order_it_keeps) {
  for (const auto& [mode, order] : {std::pair{ev::FormatMode::kSrv6, TransmitOrder::kPerPort},
                                    std::pair{ev::FormatMode::kStev, TransmitOrder::kPerPath},
                                    std::pair{ev::FormatMode::kUdp, TransmitOrder::kPerPath}}) {
    OneDriver d = open_loopback(2, mode);
    ASSERT_TRUE(d.driver);
    EXPECT_EQ(d.engine->transmit_order(), order) << static_cast<int>(mode);
  }
}

// ACKs hash onto reverse paths of their own only in the ECMP modes: only they repeat a tail
// ACK unless told otherwise (docs/linux-driver.md, "Tail-ACK repeat").
TEST(UdpDriver, open__turns_the_tail_ack_repeat_on_where_acks_take_paths_of_their_own) {
  EXPECT_EQ(open_loopback(2, ev::FormatMode::kSrv6).engine->ack_repeat_after(), 0);
  EXPECT_EQ(open_loopback(2, ev::FormatMode::kStev).engine->ack_repeat_after(), us(250));
  EXPECT_EQ(open_loopback(2, ev::FormatMode::kUdp).engine->ack_repeat_after(), us(250));
  EXPECT_EQ(open_loopback(2, ev::FormatMode::kStev, 0).engine->ack_repeat_after(), 0);
  EXPECT_EQ(open_loopback(2, ev::FormatMode::kSrv6, us(100)).engine->ack_repeat_after(), us(100));
}

TEST(UdpDriver, spray_burst__is_the_gso_run_where_it_sends_gso) {
  DriverConfig c;
  c.ev_mode = ev::FormatMode::kSrv6;
  EXPECT_EQ(spray_burst(c, 4096), 1u);  // zero UDP checksums: no GSO
  c.ev_mode = ev::FormatMode::kStev;
  EXPECT_EQ(spray_burst(c, 4096),
            15u);  // 15 datagrams of <= 4,159 B fit one 64 KiB send, 16 do not
  EXPECT_EQ(spray_burst(c, 1024), 60u);
  EXPECT_EQ(spray_burst(c, 256), kMaxGsoDatagrams);
  EXPECT_EQ(spray_burst(c, 9000), 7u);
  EXPECT_EQ(spray_burst(c, 1500), 42u);  // 1,500 needs no pad: 1,560 B a datagram
  c.batch = 8;
  EXPECT_EQ(spray_burst(c, 4096), 8u);  // a run ends with its batch
  c.batch = 64;
  // An IPv4 port: one GSO send stays within one IPv4 packet (65,507 bytes of UDP payload).
  c.ports.push_back(PortConfig{*parse_endpoint("::1", 0), ""});
  EXPECT_EQ(spray_burst(c, 1500), 42u);
  c.ports.push_back(PortConfig{*parse_endpoint("::ffff:10.0.0.1", 0), ""});
  EXPECT_EQ(spray_burst(c, 1500), 41u);  // 42 * 1,560 B is 65,520
  EXPECT_EQ(spray_burst(c, 4096), 15u);
  c.gso = false;
  EXPECT_EQ(spray_burst(c, 4096), 1u);
}

// One end of a QP pair over a driver: engine, driver, registered buffer, QP.
struct QpEnd {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<UdpDriver> driver;
  std::vector<uint8_t> buffer;
  MemoryKeys keys;
  uint32_t qpn = 0;
};

// A driver of one port on `address`, `mode`, sending with `traffic_class`; a QP and a
// registered buffer of `bytes`.
void open_end(QpEnd& e, const char* address, ev::FormatMode mode, uint8_t traffic_class,
              size_t bytes, AuthMode auth = AuthMode::kOff) {
  EngineConfig ec;
  ec.num_ports = 1;
  e.engine = std::make_unique<Engine>(ec);
  DriverConfig dc;
  dc.ev_mode = mode;
  dc.traffic_class = traffic_class;
  dc.auth = auth;
  dc.ports.push_back(PortConfig{*parse_endpoint(address, 0), ""});
  auto drv = UdpDriver::open(*e.engine, dc);
  ASSERT_TRUE(drv) << drv.error().message;
  e.driver = std::move(*drv);
  e.buffer.assign(bytes, 0);
  auto keys =
      e.engine->register_memory(e.buffer.data(), bytes, reinterpret_cast<uint64_t>(e.buffer.data()),
                                kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(keys);
  e.keys = *keys;
  auto q = e.engine->create_qp(QpCreateAttr{});
  ASSERT_TRUE(q);
  e.qpn = *q;
}

// `e`'s QP to `peer`'s, over `evs` paths of the driver's mode, with a fixed window; `burst`
// packets in a row on one path (PathPolicy::burst).
void connect_end(QpEnd& e, const QpEnd& peer, uint32_t evs, uint32_t mtu, uint32_t burst) {
  const Endpoint there = peer.driver->local(0);
  ASSERT_TRUE(e.driver->set_peer(1, std::span(&there, 1)));
  PlanePaths plane;
  plane.peer_addr = there.addr;
  auto paths = plan_paths(e.driver->config().ev_mode, evs, std::span(&plane, 1), 0);
  ASSERT_TRUE(paths);
  QpAttr a;
  a.paths = std::move(*paths);
  a.cc.algorithm = CcAlgorithm::kFixedWindow;
  a.dest_qpn = peer.qpn;
  a.peer = 1;
  a.path_mtu = mtu;
  a.path_policy.burst = burst;
  for (QpState target : {QpState::kInit, QpState::kRtr, QpState::kRts})
    ASSERT_TRUE(e.engine->modify_qp(e.driver->now(), e.qpn, target, a)) << qp_state_name(target);
}

// Posts `count` WRITEs of `bytes` from `from`'s buffer into consecutive slots of `to`'s.
void post_writes(QpEnd& from, const QpEnd& to, size_t bytes, int count) {
  for (int m = 0; m < count; ++m) {
    WriteWr wr;
    wr.wr_id = static_cast<uint64_t>(m);
    wr.lkey = from.keys.lkey;
    wr.local_addr = reinterpret_cast<uint64_t>(from.buffer.data());
    wr.length = static_cast<uint32_t>(bytes);
    wr.remote_addr = reinterpret_cast<uint64_t>(to.buffer.data()) + m * bytes;
    wr.rkey = to.keys.rkey;
    ASSERT_TRUE(from.engine->post_write(from.driver->now(), from.qpn, wr));
  }
}

// Serves both drivers until `count` WRITEs of `a` completed (each successfully), at most 20 s.
void complete_writes(QpEnd& a, QpEnd& b, int count) {
  int done = 0;
  const auto start = std::chrono::steady_clock::now();
  while (done < count && seconds_since(start) < 20) {
    ASSERT_TRUE(a.driver->poll(us(200)));
    ASSERT_TRUE(b.driver->poll(us(200)));
    Completion c;
    while (a.engine->poll_completion(c)) {
      ASSERT_EQ(c.status, WcStatus::kSuccess) << wc_status_name(c.status);
      ++done;
    }
  }
  ASSERT_EQ(done, count);
}

// An IPv4 port (IPv4-mapped address) runs over IPv4 on a dual-stack socket: two drivers on
// 127.0.0.1 in UDP mode (EVs in the UDP source port) carry WRITEs whose data arrives intact.
// The sender's traffic class is CE, so the receiver counting CE shows that the TOS byte went
// out (IP_TOS, not IPV6_TCLASS) and came back (IP_RECVTOS). Path MTU 1504 and bursts of 64
// packets: 42 datagrams of 1,560 B fit one IPv6 payload but not one IPv4 packet, so the
// driver cuts its GSO runs at 41 and never falls back to single datagrams.
TEST(UdpDriver, poll__udp_mode_over_ipv4_loopback_carries_verified_data) {
  constexpr size_t kMsg = 64 * 1024;
  constexpr int kMessages = 16;
  QpEnd a, b;
  open_end(a, "::ffff:127.0.0.1", ev::FormatMode::kUdp, wire::kEcnCe, kMsg);
  open_end(b, "::ffff:127.0.0.1", ev::FormatMode::kUdp, 0x02, kMsg * kMessages);
  ASSERT_TRUE(a.driver && b.driver);
  for (QpEnd* e : {&a, &b}) {
    EXPECT_TRUE(is_ipv4_mapped(e->driver->local(0).addr));
    const int fd = e->driver->data_socket(0);
    EXPECT_EQ(socket_option(fd, IPPROTO_IPV6, IPV6_V6ONLY), 0);
    EXPECT_EQ(socket_option(fd, IPPROTO_IP, IP_RECVTOS), 1);
    EXPECT_EQ(socket_option(fd, IPPROTO_IP, IP_MTU_DISCOVER), IP_PMTUDISC_DO);
  }
  EXPECT_EQ(socket_option(a.driver->data_socket(0), IPPROTO_IP, IP_TOS), wire::kEcnCe);
  EXPECT_EQ(socket_option(b.driver->data_socket(0), IPPROTO_IP, IP_TOS), 0x02);
  // An IPv6 port stays IPv6-only.
  OneDriver v6 = open_loopback(1, ev::FormatMode::kUdp);
  ASSERT_TRUE(v6.driver);
  EXPECT_EQ(socket_option(v6.driver->data_socket(0), IPPROTO_IPV6, IPV6_V6ONLY), 1);

  // An IPv6 peer on an IPv4 plane is refused, and changes nothing.
  const Endpoint v6_peer = v6.driver->local(0);
  const auto wrong = a.driver->set_peer(1, std::span(&v6_peer, 1));
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, NetErrc::kIncompatible);
  EXPECT_NE(wrong.error().message.find("IP version"), std::string::npos) << wrong.error().message;

  connect_end(a, b, 8, 1504, 64);
  connect_end(b, a, 8, 1504, 64);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::vector<uint8_t>& src = a.buffer;
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<uint8_t>(i * 7 + 3);
  post_writes(a, b, kMsg, kMessages);
  complete_writes(a, b, kMessages);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  for (int m = 0; m < kMessages; ++m)
    ASSERT_EQ(std::memcmp(b.buffer.data() + m * kMsg, src.data(), kMsg), 0) << "message " << m;
  const PortStats& rx = b.driver->stats().ports[0];
  EXPECT_GE(rx.rx_packets, static_cast<uint64_t>(kMessages) * (kMsg / 1504));
  EXPECT_EQ(rx.rx_ce, rx.rx_packets);  // every datagram of `a` arrived with CE
  EXPECT_EQ(a.driver->stats().ports[0].rx_ce, 0u);
  EXPECT_EQ(b.driver->stats().decode_drops, 0u);
  EXPECT_EQ(a.driver->stats().ports[0].tx_errors, 0u);
  // Several source ports: the EVs took their own sockets, all bound to the IPv4 address.
  EXPECT_EQ(a.driver->stats().ports[0].src_port_fallbacks, 0u);
  EXPECT_GT(a.driver->stats().gso_sends, 0u);
  EXPECT_EQ(a.driver->stats().gso_fallbacks, 0u);
}

DirectionKey test_key(uint8_t fill) {
  DirectionKey k;
  k.key.fill(fill);
  k.salt.fill(static_cast<uint8_t>(~fill));
  return k;
}

// Authenticated packets (DriverConfig::auth), in both modes, UDP EVs with GSO and payloads
// sealed where they lie: a transfer verifies, and datagrams from the receiver's peer address
// that do not open under its keys are dropped before the engine sees them. The attackers are
// engines on the same address (so their datagrams bear the peer's source address, as a spoofer's
// would) whose QPs name the receiver's QPN, rkey, buffer and PSNs exactly: one seals with a key
// of its own, one sends no trailer. Nothing of theirs is placed, and the real transfer still
// runs after them.
TEST(UdpDriver,
     poll__authenticated_packets_verify_and_forgeries_from_the_peer_address_are_dropped) {
  constexpr size_t kMsg = 64 * 1024;
  constexpr int kMessages = 8;
  for (AuthMode mode : {AuthMode::kAuthenticate, AuthMode::kEncrypt}) {
    SCOPED_TRACE(std::string(auth_mode_name(mode)));
    QpEnd a, b, forger, plain;
    open_end(a, "::1", ev::FormatMode::kUdp, 0x02, kMsg, mode);
    open_end(b, "::1", ev::FormatMode::kUdp, 0x02, kMsg * kMessages, mode);
    open_end(forger, "::1", ev::FormatMode::kUdp, 0x02, kMsg, mode);
    open_end(plain, "::1", ev::FormatMode::kUdp, 0x02, kMsg);
    ASSERT_TRUE(a.driver && b.driver && forger.driver && plain.driver);
    connect_end(a, b, 8, 4096, 16);
    connect_end(b, a, 8, 4096, 16);
    connect_end(forger, b, 8, 4096, 16);
    connect_end(plain, b, 8, 4096, 16);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_TRUE(a.driver->set_peer_keys(1, PacketKeys{test_key(1), test_key(2)}));
    ASSERT_TRUE(b.driver->set_peer_keys(1, PacketKeys{test_key(2), test_key(1)}));
    ASSERT_TRUE(forger.driver->set_peer_keys(1, PacketKeys{test_key(3), test_key(4)}));
    EXPECT_EQ(plain.driver->set_peer_keys(1, PacketKeys{}).error().code, NetErrc::kInvalidArgument);

    // The forgeries first, while every PSN they carry is in the receiver's window.
    for (QpEnd* bad : {&forger, &plain}) {
      std::fill(bad->buffer.begin(), bad->buffer.end(), uint8_t{0xEE});
      post_writes(*bad, b, kMsg, 1);
    }
    const auto start = std::chrono::steady_clock::now();
    while (seconds_since(start) < 0.3) {
      ASSERT_TRUE(forger.driver->poll(us(100)));
      ASSERT_TRUE(plain.driver->poll(us(100)));
      ASSERT_TRUE(b.driver->poll(us(100)));
    }
    const DriverStats& bs = b.driver->stats();
    EXPECT_GE(bs.auth_failed, 2 * kMsg / 4096) << "both forgers' datagrams";
    EXPECT_EQ(bs.auth_opened, 0u);
    EXPECT_EQ(b.engine->counters().data_received, 0u) << "no forgery reached the engine";
    EXPECT_TRUE(std::all_of(b.buffer.begin(), b.buffer.end(), [](uint8_t x) { return x == 0; }));

    for (size_t i = 0; i < a.buffer.size(); ++i)
      a.buffer[i] = static_cast<uint8_t>(i * 13 + 5);
    post_writes(a, b, kMsg, kMessages);
    complete_writes(a, b, kMessages);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    for (int m = 0; m < kMessages; ++m)
      ASSERT_EQ(std::memcmp(b.buffer.data() + m * kMsg, a.buffer.data(), kMsg), 0) << m;
    EXPECT_GE(bs.auth_opened, kMessages * kMsg / 4096);
    EXPECT_EQ(bs.auth_replayed, 0u);
    EXPECT_EQ(a.driver->stats().auth_failed, 0u);
    EXPECT_GT(a.driver->stats().auth_opened, 0u) << "the ACKs are sealed too";
    EXPECT_EQ(bs.decode_drops, 0u);
    if (mode == AuthMode::kAuthenticate) {
      EXPECT_GT(a.driver->stats().gso_sends, 0u);
    }
  }
}

// SRV6 mode's EV is the packet's IPv6 destination address: an IPv4 port cannot carry it, and
// open() says so (STEV and UDP modes open).
TEST(UdpDriver, open__srv6_over_ipv4_is_refused_with_the_reason) {
  EngineConfig ec;
  ec.num_ports = 2;
  Engine engine(ec);
  DriverConfig dc;
  dc.ev_mode = ev::FormatMode::kSrv6;
  dc.ports.push_back(PortConfig{*parse_endpoint("::1", 0), ""});
  dc.ports.push_back(PortConfig{*parse_endpoint("::ffff:127.0.0.1", 0), ""});
  auto drv = UdpDriver::open(engine, dc);
  ASSERT_FALSE(drv);
  EXPECT_EQ(drv.error().code, NetErrc::kInvalidArgument);
  const std::string& msg = drv.error().message;
  EXPECT_NE(msg.find("port 1 (::ffff:127.0.0.1) is IPv4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("SRV6 mode cannot run over IPv4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("IPv6 destination address"), std::string::npos) << msg;
  EXPECT_EQ(engine.transmit_order(), TransmitOrder::kPerPort);  // untouched: the default
  for (ev::FormatMode mode : {ev::FormatMode::kUdp, ev::FormatMode::kStev}) {
    dc.ev_mode = mode;
    auto ok = UdpDriver::open(engine, dc);
    EXPECT_TRUE(ok) << (ok ? "" : ok.error().message);
  }
}

TEST(Ping, is_ping__recognises_only_its_exact_size) {
  uint8_t ping[kPingBytes] = {};
  std::memcpy(ping, kPingMagic, 8);
  EXPECT_TRUE(is_ping(ping, kPingBytes));
  EXPECT_FALSE(is_pong(ping, kPingBytes));
  EXPECT_FALSE(is_ping(ping, kPingBytes - 1));
  std::memcpy(ping, kPongMagic, 8);
  EXPECT_TRUE(is_pong(ping, kPingBytes));
  EXPECT_EQ(kPingBytes, 17u);  // src/api's endpoint probe sends and expects this size
}

}  // namespace
}  // namespace mrc::net
