#include "net/side_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace mrc::net {
namespace {

TEST(SideChannel, connect__refused_when_nobody_listens) {
  // Bind and close a listener to get a port nobody listens on.
  uint16_t port;
  {
    auto l = SideListener::listen(0);
    ASSERT_TRUE(l);
    port = l->port();
  }
  auto c = SideChannel::connect("::1", port, 200);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, NetErrc::kRefused);
  EXPECT_NE(c.error().message.find("server running"), std::string::npos);
}

TEST(SideChannel, accept__times_out) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  auto c = l->accept(50);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, NetErrc::kTimeout);
}

TEST(SideChannel, send_frame__exchanges_frames_and_reports_close) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  std::thread server([&] {
    auto s = l->accept(2000);
    ASSERT_TRUE(s);
    auto f = s->recv_frame(2000);
    ASSERT_TRUE(f);
    ASSERT_TRUE(s->send_frame(*f));  // echo, then close
  });
  auto c = SideChannel::connect("::1", l->port(), 2000);
  ASSERT_TRUE(c) << c.error().message;
  const std::vector<uint8_t> msg = {1, 2, 3, 4, 5};
  ASSERT_TRUE(c->send_frame(msg));
  auto back = c->recv_frame(2000);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, msg);
  server.join();
  auto closed = c->recv_frame(2000);
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code, NetErrc::kPeerClosed);
}

TEST(SideChannel, recv_frame__times_out) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  auto c = SideChannel::connect("::1", l->port(), 2000);
  ASSERT_TRUE(c);
  auto s = l->accept(2000);
  ASSERT_TRUE(s);
  auto f = c->recv_frame(30);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, NetErrc::kTimeout);
}

}  // namespace
}  // namespace mrc::net

namespace mrc::net {
namespace {

std::vector<uint8_t> framed(uint32_t n, std::span<const uint8_t> body = {}) {
  std::vector<uint8_t> b(4 + body.size());
  for (int i = 0; i < 4; ++i)
    b[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (24 - 8 * i));
  std::copy(body.begin(), body.end(), b.begin() + 4);
  return b;
}

// A raw TCP connection to the listener (no framing of ours).
UniqueFd raw_connect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  a.sin6_port = htons(port);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// A raw TCP connection to the listener from 127.0.0.2 (IPv4 on the dual-stack listener): a
// second host on one machine.
UniqueFd raw_connect_v4(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7F000002);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

bool send_all(const UniqueFd& fd, std::span<const uint8_t> b) {
  return ::send(fd.get(), b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
}

TEST(SideChannel, parse_frame__needs_more_frame_and_too_large) {
  const uint8_t body[3] = {7, 8, 9};
  EXPECT_EQ(parse_frame({}, 100).status, FrameStatus::kNeedMore);
  auto b = framed(3, body);
  EXPECT_EQ(parse_frame(std::span(b).first(3), 100).status, FrameStatus::kNeedMore);
  EXPECT_EQ(parse_frame(std::span(b).first(6), 100).status, FrameStatus::kNeedMore);
  const FrameView v = parse_frame(b, 100);
  EXPECT_EQ(v.status, FrameStatus::kFrame);
  EXPECT_EQ(v.length, 3u);
  EXPECT_EQ(parse_frame(b, 2).status, FrameStatus::kTooLarge);
  auto huge = framed(0xCA8A3A4F);  // "frame of 3398070607 bytes"
  EXPECT_EQ(parse_frame(huge, kMaxFrameBytes).status, FrameStatus::kTooLarge);
}

TEST(SideChannel, try_recv_frame__refuses_a_frame_above_the_limit_before_buffering_it) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  UniqueFd raw = raw_connect(l->port());
  auto s = l->accept(2000);
  ASSERT_TRUE(s);
  s->set_max_frame(1024);
  auto b = framed(1025, std::vector<uint8_t>(1025, 1));
  ASSERT_EQ(::send(raw.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  auto f = s->recv_frame(2000);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, NetErrc::kBadHello);
  EXPECT_NE(f.error().message.find("limit 1024"), std::string::npos) << f.error().message;
}

// A length over the limit that was buffered in an earlier read, when the peer has closed by
// the time it is reached: the length is what is wrong, not the close. (The buffer holds one
// frame of the limit plus one read, 16388 bytes at limit 0: 4096 empty frames and the bad
// length fill it exactly, so the close is seen only after the frames are handed out.)
TEST(SideChannel, try_recv_frame__judges_buffered_bytes_before_the_close) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::vector<uint8_t> stream(4096 * 4, 0);
  const auto bad = framed(1);
  stream.insert(stream.end(), bad.begin(), bad.begin() + 4);
  ASSERT_EQ(::send(sv[1], stream.data(), stream.size(), 0), static_cast<ssize_t>(stream.size()));
  ::close(sv[1]);
  SideChannel ch{UniqueFd(sv[0]), "peer", 0};
  ch.set_max_frame(0);
  size_t frames = 0;
  while (true) {
    auto f = ch.try_recv_frame();
    if (!f) {
      EXPECT_EQ(f.error().code, NetErrc::kBadHello) << f.error().message;
      break;
    }
    ASSERT_TRUE(*f);
    EXPECT_TRUE((*f)->empty());
    ++frames;
  }
  EXPECT_EQ(frames, 4096u);
}

// The side-channel attacks the server must survive, at once: garbage, an idle connection, a
// slow one sending a byte at a time, 100 connections held open, and a refused client -- then
// the real client.
TEST(SideChannel, accept_handshake__garbage_idle_slow_and_held_connections_do_not_stop_it) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  const uint16_t port = l->port();
  std::atomic<bool> done{false};
  std::string refusal_seen;
  std::thread attackers([&] {
    std::vector<UniqueFd> held;
    for (int i = 0; i < 100; ++i)
      held.push_back(raw_connect(port));
    UniqueFd garbage = raw_connect(port);
    const uint8_t junk[] = {0xCA, 0x8A, 0x3A, 0x4F, 1, 2, 3};
    (void)::send(garbage.get(), junk, sizeof junk, 0);
    UniqueFd idle = raw_connect(port);
    auto refused = SideChannel::connect("::1", port, 2000);
    if (refused) {
      (void)refused->send_frame(std::vector<uint8_t>{'n', 'o'});
      auto r = refused->recv_frame(3000);
      if (r) refusal_seen.assign(r->begin(), r->end());
    }
    UniqueFd slow = raw_connect(port);
    const auto slow_frame = framed(4, std::vector<uint8_t>{'s', 'l', 'o', 'w'});
    for (uint8_t byte : slow_frame) {
      if (done) break;
      (void)::send(slow.get(), &byte, 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
    // The real client, after all of that.
    auto c = SideChannel::connect("::1", port, 2000);
    if (c) {
      (void)c->send_frame(std::vector<uint8_t>{'o', 'k'});
      (void)c->recv_frame(3000);
    }
    while (!done)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  HandshakeLimits limits;
  limits.handshake_timeout_ms = 400;
  limits.max_pending = 32;
  limits.max_first_frame = 64;
  std::vector<std::string> log;
  std::vector<uint8_t> frame;
  const auto start = std::chrono::steady_clock::now();
  auto taken = l->accept_handshake(
      20'000, limits,
      [&](SideChannel& ch, std::span<const uint8_t> f) {
        if (f.size() == 2 && f[0] == 'o') return HandshakeVerdict::kTake;
        (void)ch.send_frame(std::vector<uint8_t>{'r', 'e', 'f', 'u', 's', 'e', 'd'});
        return HandshakeVerdict::kClose;
      },
      frame, [&](const std::string& line) { log.push_back(line); });
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(frame, (std::vector<uint8_t>{'o', 'k'}));
  ASSERT_TRUE(taken->send_frame(std::vector<uint8_t>{'h', 'i'}));
  done = true;
  attackers.join();
  EXPECT_EQ(refusal_seen, "refused");
  EXPECT_LT(secs, 10.0);
  bool too_large = false, idle = false, evicted = false;
  for (const auto& line : log) {
    too_large |= line.find("limit 64") != std::string::npos;
    idle |= line.find("sent no hello within 400 ms") != std::string::npos;
    evicted |= line.find("the oldest") != std::string::npos;
  }
  EXPECT_TRUE(too_large) << "garbage refused";
  EXPECT_TRUE(idle) << "idle and slow connections closed on their deadline";
  EXPECT_TRUE(evicted) << "held connections beyond max_pending give way";
}

// One host opening connections as fast as it can closes its own handshakes, never another
// host's: the victim connects first and sends its hello after the flood.
TEST(SideChannel, accept_handshake__a_flooding_host_evicts_only_its_own_connections) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  const uint16_t port = l->port();
  UniqueFd victim = raw_connect(port);  // from ::1
  std::vector<UniqueFd> flood;
  for (int i = 0; i < 100; ++i)  // within the listen backlog: connect() does not wait
    flood.push_back(raw_connect_v4(port));
  HandshakeLimits limits;
  limits.max_pending = 16;
  limits.max_pending_per_source = 4;
  std::vector<std::string> log;
  std::vector<uint8_t> frame;
  const auto take_ok = [&](SideChannel&, std::span<const uint8_t> f) {
    return f.size() == 2 && f[0] == 'o' ? HandshakeVerdict::kTake : HandshakeVerdict::kClose;
  };
  const auto note = [&](const std::string& line) { log.push_back(line); };
  // Serve the flood for a while: nothing is taken.
  auto none = l->accept_handshake(300, limits, take_ok, frame, note);
  ASSERT_FALSE(none);
  EXPECT_EQ(l->pending(), 5u) << "the victim and the flood's newest 4";
  const auto hello = framed(2, std::vector<uint8_t>{'o', 'k'});
  ASSERT_TRUE(send_all(victim, hello));
  auto taken = l->accept_handshake(2000, limits, take_ok, frame, note);
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(taken->peer_name().find("::1"), 1u) << taken->peer_name();
  EXPECT_EQ(l->pending(), 4u) << "the flood's newest stay for the next call";
  size_t own = 0;
  for (const auto& line : log)
    own += line.find("from one address: the oldest") != std::string::npos;
  EXPECT_EQ(own, 96u);
}

// Connections still in handshake when one is taken stay for the next call, and a hello that
// arrived meanwhile is read at once, whatever its deadline.
TEST(SideChannel, accept_handshake__keeps_other_connections_for_the_next_call) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  UniqueFd first = raw_connect(l->port());
  UniqueFd second = raw_connect_v4(l->port());
  UniqueFd third = raw_connect_v4(l->port());
  ASSERT_TRUE(send_all(first, framed(2, std::vector<uint8_t>{'o', '1'})));
  HandshakeLimits limits;
  limits.handshake_timeout_ms = 100;
  std::vector<uint8_t> frame;
  const auto take = [](SideChannel&, std::span<const uint8_t>) { return HandshakeVerdict::kTake; };
  auto a = l->accept_handshake(2000, limits, take, frame, {});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(frame, (std::vector<uint8_t>{'o', '1'}));
  EXPECT_EQ(l->pending(), 2u);
  ASSERT_TRUE(send_all(second, framed(2, std::vector<uint8_t>{'o', '2'})));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the deadline
  auto b = l->accept_handshake(2000, limits, take, frame, {});
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(frame, (std::vector<uint8_t>{'o', '2'}));
  // The third sent nothing: a server done with its host closes it.
  in6_addr v4_mapped{};
  ASSERT_EQ(::inet_pton(AF_INET6, "::ffff:127.0.0.2", &v4_mapped), 1);
  EXPECT_EQ(l->close_pending_from(v4_mapped), 1u);
  EXPECT_EQ(l->pending(), 0u);
}

TEST(SideChannel, accept_handshake__sends_a_greeting_first_and_keeps_it) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  std::thread client([&] {
    auto c = SideChannel::connect("::1", l->port(), 2000);
    ASSERT_TRUE(c);
    auto g = c->recv_frame(2000);
    ASSERT_TRUE(g);
    ASSERT_TRUE(c->send_frame(*g));  // echo it as the first frame
  });
  HandshakeLimits limits;
  limits.greeting = [] { return std::vector<uint8_t>{1, 2, 3}; };
  std::vector<uint8_t> frame;
  auto taken = l->accept_handshake(
      5000, limits,
      [&](SideChannel& ch, std::span<const uint8_t> f) {
        return std::equal(f.begin(), f.end(), ch.greeting().begin(), ch.greeting().end())
                   ? HandshakeVerdict::kTake
                   : HandshakeVerdict::kClose;
      },
      frame);
  client.join();
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(taken->greeting(), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(SideChannel, peer_closed__seen_without_a_frame) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  auto c = SideChannel::connect("::1", l->port(), 2000);
  ASSERT_TRUE(c);
  {
    auto s = l->accept(2000);
    ASSERT_TRUE(s);
    EXPECT_FALSE(c->peer_closed());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(c->peer_closed());
}

}  // namespace
}  // namespace mrc::net
