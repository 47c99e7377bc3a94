// The TCP side channel that sets up a connection, as perftest does (server listens on a TCP
// port, default 18515; the client connects; both exchange a hello, then sync per test
// round). Frames are a 4-byte big-endian length and that many bytes, at most a limit per
// channel (kMaxFrameBytes unless set lower; a larger announced length is refused before a
// byte of it is buffered).
//
// Every wait has a deadline, so an absent or stuck peer ends in kRefused / kTimeout with a
// message naming the address, never in a hang. A server takes its client with
// SideListener::accept_handshake: any number of connections at once, each with its own
// deadline and a bounded buffer, so garbage, idle or slow connections neither block the real
// client nor end the server (docs/linux-driver.md, "Security").
#pragma once

#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/sockets.h"

namespace mrc::net {

inline constexpr uint16_t kDefaultSidePort = 18515;  // perftest's default
inline constexpr uint32_t kMaxFrameBytes = 1 << 20;

// What the first bytes of a receive buffer hold (parse_frame).
enum class FrameStatus : uint8_t {
  kNeedMore,  // not a whole frame yet (and its length, if known, is within the limit)
  kFrame,     // a whole frame: 4 + length bytes
  kTooLarge,  // its announced length is above the limit: the peer is not an MRC peer
};
struct FrameView {
  FrameStatus status = FrameStatus::kNeedMore;
  uint32_t length = 0;  // the announced payload length (once 4 bytes are there)
};
// The side channel's frame decoder (pure, for the fuzzer): what `buffered` starts with.
FrameView parse_frame(std::span<const uint8_t> buffered, uint32_t max_frame);

class SideChannel {
 public:
  SideChannel() = default;
  explicit SideChannel(UniqueFd fd, std::string peer_name, uint32_t max_frame = kMaxFrameBytes)
      : fd_(std::move(fd)), peer_(std::move(peer_name)), max_frame_(max_frame) {}

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
  // The peer's address, for a channel SideListener accepted (all zero otherwise).
  const in6_addr& peer_address() const { return peer_addr_; }
  // Frames above `bytes` are refused (kBadHello) from now on (at most kMaxFrameBytes).
  void set_max_frame(uint32_t bytes) { max_frame_ = std::min(bytes, kMaxFrameBytes); }
  uint32_t max_frame() const { return max_frame_; }
  // Whether the peer has closed its end (seen by the last receive), frames still buffered
  // or not: a client notices a server that went away without waiting for a reply.
  bool peer_closed();
  // What accept_handshake sent on this connection before its first frame (a challenge).
  const std::vector<uint8_t>& greeting() const { return greeting_; }

 private:
  friend class SideListener;
  NetResult<bool> read_available();  // appends what the socket has; false = nothing
  std::optional<std::vector<uint8_t>> take_frame();

  UniqueFd fd_;
  std::string peer_;
  in6_addr peer_addr_{};
  uint32_t max_frame_ = kMaxFrameBytes;
  // Received bytes; those before rx_head_ were handed out. They are dropped at the next read,
  // not per frame, so a peer's stream of tiny frames costs linear time, not a move of the
  // buffer per frame.
  std::vector<uint8_t> rx_;
  size_t rx_head_ = 0;
  std::span<const uint8_t> buffered() const { return std::span(rx_).subspan(rx_head_); }
  std::vector<uint8_t> greeting_;
  bool closed_ = false;
};

// How SideListener::accept_handshake treats connections before one is taken.
struct HandshakeLimits {
  int handshake_timeout_ms = 5000;  // per connection: its first frame must arrive by then
  size_t max_pending = 64;          // connections in handshake at once (below: which one gives way)
  // Connections in handshake from one address at once: beyond, that address's oldest gives
  // way. When max_pending is reached, the oldest of the address holding the most gives way,
  // so a host that opens connections fast closes its own, never another host's.
  size_t max_pending_per_source = 8;
  uint32_t max_first_frame = 64 << 10;
  // Sent on every new connection before anything is read (empty: nothing); kept in
  // SideChannel::greeting(). A server with a shared secret sends its challenge this way.
  std::function<std::vector<uint8_t>()> greeting;
};

// The verdict on a connection's first frame (accept_handshake).
enum class HandshakeVerdict : uint8_t { kTake, kClose };

class SideListener {
 public:
  // Listens on [::]:port (dual-stack, so IPv4 clients work too); port 0 picks one.
  static NetResult<SideListener> listen(uint16_t port);
  // Waits up to timeout_ms (< 0: forever) for one client.
  NetResult<SideChannel> accept(int timeout_ms);
  // Serves connections until `first_frame` takes one, for up to timeout_ms (< 0: forever):
  // accepts every connection that arrives (no limit but max_pending and
  // max_pending_per_source, beyond which one gives way as they say), gives each
  // handshake_timeout_ms to send a first frame of at most max_first_frame bytes, and hands
  // each such frame to `first_frame`, oldest connection first. kClose (after the callback
  // answered, e.g. with a refusal) closes that connection and serving goes on; connections
  // that time out, close, send too much or fail are closed and counted in `log` (a line
  // each, for the operator). Returns the taken channel, its frame in `frame`. Connections
  // still in handshake then stay with the listener for the next call (a frame that arrived
  // meanwhile is read before any deadline is applied). Nothing a connecting peer does ends
  // this call but the timeout.
  NetResult<SideChannel> accept_handshake(
      int timeout_ms, const HandshakeLimits& limits,
      const std::function<HandshakeVerdict(SideChannel&, std::span<const uint8_t>)>& first_frame,
      std::vector<uint8_t>& frame, const std::function<void(const std::string&)>& log = {});
  uint16_t port() const { return port_; }
  // Closes the connections in handshake from `addr` (a server done with a host that held
  // it); their number.
  size_t close_pending_from(const in6_addr& addr);
  size_t pending() const { return pending_.size(); }

 private:
  // A connection in handshake: accepted, its first frame not taken yet.
  struct Pending {
    SideChannel ch;
    uint64_t deadline_ns;
  };
  void admit(SideChannel ch, const HandshakeLimits& limits,
             const std::function<void(const std::string&)>& note);
  std::optional<SideChannel> read_first_frames(
      const std::vector<pollfd>& fds,
      const std::function<HandshakeVerdict(SideChannel&, std::span<const uint8_t>)>& first_frame,
      std::vector<uint8_t>& frame, const std::function<void(const std::string&)>& note);
  void close_expired(uint64_t now, int timeout_ms,
                     const std::function<void(const std::string&)>& note);

  UniqueFd fd_;
  uint16_t port_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace mrc::net
