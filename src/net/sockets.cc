#include "net/sockets.h"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

namespace mrc::net {

const char* net_errc_name(NetErrc c) {
  switch (c) {
    case NetErrc::kSystem:
      return "system";
    case NetErrc::kRefused:
      return "refused";
    case NetErrc::kTimeout:
      return "timeout";
    case NetErrc::kVersionMismatch:
      return "version mismatch";
    case NetErrc::kBadHello:
      return "bad hello";
    case NetErrc::kIncompatible:
      return "incompatible";
    case NetErrc::kNoRoute:
      return "no route";
    case NetErrc::kPeerClosed:
      return "peer closed";
    case NetErrc::kInvalidArgument:
      return "invalid argument";
    case NetErrc::kEngine:
      return "engine";
    case NetErrc::kVerifyFailed:
      return "verify failed";
  }
  return "unknown";
}

std::unexpected<NetError> errno_fail(std::string_view what, int err) {
  NetErrc code = NetErrc::kSystem;
  if (err == ECONNREFUSED) code = NetErrc::kRefused;
  if (err == ETIMEDOUT) code = NetErrc::kTimeout;
  if (err == ENETUNREACH || err == EHOSTUNREACH) code = NetErrc::kNoRoute;
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return net_fail(code, std::move(msg));
}

std::unexpected<NetError> engine_fail(std::string_view what, Error e) {
  std::string msg(what);
  msg += ": ";
  msg += error_name(e);
  return net_fail(NetErrc::kEngine, std::move(msg));
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

NetResult<in6_addr> parse_in6(std::string_view text) {
  std::string s(text);
  in6_addr a{};
  if (::inet_pton(AF_INET6, s.c_str(), &a) != 1)
    return net_fail(NetErrc::kInvalidArgument, "not an IPv6 address: '" + s + "'");
  return a;
}

NetResult<Endpoint> parse_endpoint(std::string_view text, uint16_t default_port) {
  Endpoint e;
  e.port = default_port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return net_fail(NetErrc::kInvalidArgument,
                      "endpoint must be ADDR or [ADDR]:PORT: '" + std::string(text) + "'");
    auto a = parse_in6(text.substr(1, close - 1));
    if (!a) return std::unexpected(a.error());
    e.addr = *a;
    const std::string_view port = text.substr(close + 2);
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc() || ptr != port.data() + port.size() || v > 65535)
      return net_fail(NetErrc::kInvalidArgument, "bad port in '" + std::string(text) + "'");
    e.port = static_cast<uint16_t>(v);
    return e;
  }
  auto a = parse_in6(text);
  if (!a) return std::unexpected(a.error());
  e.addr = *a;
  return e;
}

std::string format_in6(const in6_addr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
  return buf;
}

std::string format_endpoint(const Endpoint& e) {
  std::string s = "[";
  s += format_in6(e.addr);
  s += "]:";
  s += std::to_string(e.port);
  return s;
}

sockaddr_in6 to_sockaddr(const Endpoint& e) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_addr = e.addr;
  s.sin6_port = htons(e.port);
  return s;
}

void set_udp_segment(msghdr& h, UdpSegmentControl& room, uint16_t size) {
  h.msg_control = room.bytes;
  h.msg_controllen = sizeof room.bytes;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof size);
  std::memcpy(CMSG_DATA(c), &size, sizeof size);
}

uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

MonotonicClock::MonotonicClock() : epoch_ns_(monotonic_ns()) {}

Time MonotonicClock::now() const {
  return (monotonic_ns() - epoch_ns_) * kPicosPerNano;
}

}  // namespace mrc::net
