// The TCP side channel that sets up a connection, as perftest does (server listens on a TCP
// port, default 18515; the client connects; both exchange a hello, then sync per test
// round). Frames are a 4-byte big-endian length and that many bytes (at most 1 MiB).
//
// Every wait has a deadline, so an absent or stuck peer ends in kRefused / kTimeout with a
// message naming the address, never in a hang.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/sockets.h"

namespace mrc::net {

inline constexpr uint16_t kDefaultSidePort = 18515;  // perftest's default
inline constexpr uint32_t kMaxFrameBytes = 1 << 20;

class SideChannel {
 public:
  SideChannel() = default;
  explicit SideChannel(UniqueFd fd, std::string peer_name)
      : fd_(std::move(fd)), peer_(std::move(peer_name)) {}

  // Connects to host:port ("::1", "10.0.0.2", "server.example"; any family getaddrinfo
  // resolves). Retries refused connections until `timeout_ms` so a client may start just
  // before its server; kRefused / kTimeout afterwards.
  static NetResult<SideChannel> connect(const std::string& host, uint16_t port, int timeout_ms);

  NetStatus send_frame(std::span<const uint8_t> payload, int timeout_ms = 10'000);
  // Blocks until a whole frame arrived (kTimeout / kPeerClosed otherwise).
  NetResult<std::vector<uint8_t>> recv_frame(int timeout_ms);
  // Non-blocking: a whole frame if one has arrived, std::nullopt if not yet.
  NetResult<std::optional<std::vector<uint8_t>>> try_recv_frame();

  int fd() const { return fd_.get(); }
  const std::string& peer_name() const { return peer_; }

 private:
  NetResult<bool> read_available();  // appends what the socket has; false = nothing
  std::optional<std::vector<uint8_t>> take_frame();

  UniqueFd fd_;
  std::string peer_;
  std::vector<uint8_t> rx_;
  bool closed_ = false;
};

class SideListener {
 public:
  // Listens on [::]:port (dual-stack, so IPv4 clients work too); port 0 picks one.
  static NetResult<SideListener> listen(uint16_t port);
  // Waits up to timeout_ms (< 0: forever) for one client.
  NetResult<SideChannel> accept(int timeout_ms);
  uint16_t port() const { return port_; }

 private:
  UniqueFd fd_;
  uint16_t port_ = 0;
};

}  // namespace mrc::net
