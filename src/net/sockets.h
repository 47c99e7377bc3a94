// Socket vocabulary of the Linux driver: errors with messages, owned file descriptors, IPv6
// endpoints, and the clock that turns CLOCK_MONOTONIC into engine time.
//
// The core reports errors as bare `mrc::Error` codes; network setup needs to say *what* went
// wrong ("connection refused by [::1]:18515", "peer speaks hello version 2, we speak 1"), so
// src/net returns NetError, a code plus a message. Nothing here throws.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "common/types.h"

namespace mrc::net {

enum class NetErrc : uint8_t {
  kSystem,           // a system call failed (message names it and errno)
  kRefused,          // the peer is absent: connection refused
  kTimeout,          // the peer did not answer in time
  kVersionMismatch,  // hello versions differ
  kBadHello,         // malformed hello / side-channel frame
  kIncompatible,     // the peers' settings cannot work together
  kNoRoute,          // the data path does not reach the peer on some plane
  kPeerClosed,       // the side channel closed early
  kInvalidArgument,  // bad option or address
  kEngine,           // the engine rejected a call
  kVerifyFailed,     // payload verification found mismatches
};
const char* net_errc_name(NetErrc c);

struct NetError {
  NetErrc code = NetErrc::kSystem;
  std::string message;
};

template <typename T>
using NetResult = std::expected<T, NetError>;
using NetStatus = std::expected<void, NetError>;

inline std::unexpected<NetError> net_fail(NetErrc code, std::string message) {
  return std::unexpected<NetError>(NetError{code, std::move(message)});
}
// "<what>: <strerror>" with ECONNREFUSED -> kRefused, ETIMEDOUT -> kTimeout, else kSystem.
std::unexpected<NetError> errno_fail(std::string_view what, int err);
// An engine error as a NetError ("<what>: bad rkey").
std::unexpected<NetError> engine_fail(std::string_view what, Error e);

// An owned file descriptor (closed on destruction).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An IPv6 address and UDP/TCP port. An IPv4 endpoint is written as its IPv4-mapped address
// (::ffff:a.b.c.d, RFC 4291 2.5.5.2), as RoCEv2 writes an IPv4 GID.
struct Endpoint {
  in6_addr addr{};
  uint16_t port = 0;
};

// Whether `a` is an IPv4-mapped address (::ffff:a.b.c.d): an IPv4 address.
inline bool is_ipv4_mapped(const in6_addr& a) {
  return IN6_IS_ADDR_V4MAPPED(&a);
}

// "fcbb:bb00:4000::" -> address. kInvalidArgument with the text in the message.
NetResult<in6_addr> parse_in6(std::string_view text);
// "ADDR" (port = default_port) or "[ADDR]:PORT".
NetResult<Endpoint> parse_endpoint(std::string_view text, uint16_t default_port);
std::string format_in6(const in6_addr& a);
std::string format_endpoint(const Endpoint& e);  // "[addr]:port"
sockaddr_in6 to_sockaddr(const Endpoint& e);

// Room for one UDP_SEGMENT control message (udp(7)): a message of several datagrams of
// `size` bytes (the last may be shorter) that the kernel, or a NIC with USO, cuts apart.
struct alignas(cmsghdr) UdpSegmentControl {
  uint8_t bytes[CMSG_SPACE(sizeof(uint16_t))];
};
// Points `h`'s control at `room` holding UDP_SEGMENT = `size`.
void set_udp_segment(msghdr& h, UdpSegmentControl& room, uint16_t size);
// At most this many datagrams per UDP GSO send (the kernel's UDP_MAX_SEGMENTS is 64 or more),
// and all of them within one IPv6 payload, or over IPv4 within one IPv4 packet (its total
// length counts the 20-byte IPv4 header too: a larger GSO send fails with EMSGSIZE).
inline constexpr size_t kMaxGsoDatagrams = 64;
// IPV6_FLOWINFO_SEND from linux/in6.h (not in glibc's <netinet/in.h>, and the two headers do
// not mix): with it a datagram's flow label is the sender's sin6_flowinfo.
inline constexpr int kIpv6FlowinfoSend = 33;
inline constexpr size_t kMaxGsoBytes = 65535 - 8;
inline constexpr size_t kMaxGsoBytesIpv4 = 65535 - 20 - 8;

// Engine time from CLOCK_MONOTONIC, counted from the clock's creation (so 2^64 ps, 213 days,
// is measured from process start rather than from boot).
class MonotonicClock {
 public:
  MonotonicClock();
  Time now() const;
  // Engine time `t` as an absolute CLOCK_MONOTONIC nanosecond count.
  uint64_t to_monotonic_ns(Time t) const { return epoch_ns_ + t / kPicosPerNano; }
  // The inverse (0 for instants before the clock's creation).
  Time from_monotonic_ns(uint64_t ns) const {
    return ns > epoch_ns_ ? (ns - epoch_ns_) * kPicosPerNano : 0;
  }

 private:
  uint64_t epoch_ns_;
};

uint64_t monotonic_ns();

}  // namespace mrc::net
