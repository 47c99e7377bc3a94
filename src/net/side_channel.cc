#include "net/side_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mrc::net {
namespace {

int remaining_ms(uint64_t deadline_ns) {
  const uint64_t now = monotonic_ns();
  if (now >= deadline_ns) return 0;
  return static_cast<int>((deadline_ns - now + 999'999) / 1'000'000);
}

std::string host_port(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

// One non-blocking connect attempt to `ai`, waiting at most `wait_ms`. Returns the errno of
// the failure (0 = connected).
int try_connect(const addrinfo* ai, int wait_ms, UniqueFd& out) {
  UniqueFd fd(
      ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
  if (!fd) return errno;
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno;
    pollfd p{fd.get(), POLLOUT, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n == 0) return ETIMEDOUT;
    if (n < 0) return errno;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return err;
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  out = std::move(fd);
  return 0;
}

}  // namespace

NetResult<SideChannel> SideChannel::connect(const std::string& host, uint16_t port,
                                            int timeout_ms) {
  const std::string name = host_port(host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return net_fail(NetErrc::kInvalidArgument,
                    "cannot resolve '" + host + "': " + ::gai_strerror(rc));
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  int last_err = ETIMEDOUT;
  UniqueFd fd;
  // Refused: the server may not be listening yet; retry every 50 ms until the deadline.
  while (true) {
    for (const addrinfo* ai = res; ai; ai = ai->ai_next) {
      last_err = try_connect(ai, std::max(1, remaining_ms(deadline)), fd);
      if (last_err == 0) break;
    }
    if (last_err == 0 || remaining_ms(deadline) == 0) break;
    if (last_err != ECONNREFUSED && last_err != ETIMEDOUT) break;
    ::usleep(50'000);
  }
  ::freeaddrinfo(res);
  if (last_err != 0) {
    auto e = errno_fail("side channel to " + name, last_err);
    if (last_err == ECONNREFUSED)
      e.error().message += " (is the server running? start it first with the same -p)";
    return e;
  }
  return SideChannel(std::move(fd), name);
}

NetStatus SideChannel::send_frame(std::span<const uint8_t> payload, int timeout_ms) {
  if (payload.size() > kMaxFrameBytes)
    return net_fail(NetErrc::kInvalidArgument, "side-channel frame too large");
  std::vector<uint8_t> buf(4 + payload.size());
  const uint32_t n = static_cast<uint32_t>(payload.size());
  buf[0] = static_cast<uint8_t>(n >> 24);
  buf[1] = static_cast<uint8_t>(n >> 16);
  buf[2] = static_cast<uint8_t>(n >> 8);
  buf[3] = static_cast<uint8_t>(n);
  std::memcpy(buf.data() + 4, payload.data(), payload.size());
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  size_t sent = 0;
  while (sent < buf.size()) {
    const ssize_t w = ::send(fd_.get(), buf.data() + sent, buf.size() - sent, MSG_NOSIGNAL);
    if (w > 0) {
      sent += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR)
      return errno_fail("side channel send to " + peer_, errno);
    pollfd p{fd_.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) == 0)
      return net_fail(NetErrc::kTimeout, "side channel send to " + peer_ + " timed out");
  }
  return {};
}

FrameView parse_frame(std::span<const uint8_t> b, uint32_t max_frame) {
  if (b.size() < 4) return {};
  const uint32_t n = static_cast<uint32_t>(b[0]) << 24 | static_cast<uint32_t>(b[1]) << 16 |
                     static_cast<uint32_t>(b[2]) << 8 | b[3];
  if (n > max_frame) return {FrameStatus::kTooLarge, n};
  if (b.size() - 4 < n) return {FrameStatus::kNeedMore, n};
  return {FrameStatus::kFrame, n};
}

bool SideChannel::peer_closed() {
  if (!closed_) (void)read_available();
  return closed_;
}

NetResult<bool> SideChannel::read_available() {
  uint8_t tmp[16384];
  bool any = false;
  // Never more than one frame of the limit (and its length) beyond what is taken: a peer
  // that sends without end fills its own socket buffer, not our memory.
  const size_t cap = size_t{max_frame_} + 4 + sizeof tmp;
  rx_.erase(rx_.begin(), rx_.begin() + static_cast<ptrdiff_t>(rx_head_));
  rx_head_ = 0;
  while (rx_.size() < cap) {
    const ssize_t r = ::recv(fd_.get(), tmp, std::min(sizeof tmp, cap - rx_.size()), MSG_DONTWAIT);
    if (r > 0) {
      rx_.insert(rx_.end(), tmp, tmp + r);
      any = true;
      continue;
    }
    if (r == 0) {
      // Keep what arrived with the FIN: the peer's last frame is often its report. What is
      // buffered is judged first (a frame, or a length over the limit); try_recv_frame says
      // "closed" only when nothing of it is left to hand out.
      closed_ = true;
      return any;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return any;
    if (errno == EINTR) continue;
    return errno_fail("side channel receive from " + peer_, errno);
  }
  return any;
}

std::optional<std::vector<uint8_t>> SideChannel::take_frame() {
  const std::span<const uint8_t> b = buffered();
  const FrameView v = parse_frame(b, max_frame_);
  if (v.status != FrameStatus::kFrame) return std::nullopt;
  std::vector<uint8_t> frame(b.begin() + 4, b.begin() + 4 + v.length);
  rx_head_ += 4 + size_t{v.length};
  return frame;
}

NetResult<std::optional<std::vector<uint8_t>>> SideChannel::try_recv_frame() {
  if (auto f = take_frame()) return f;
  if (!closed_) {
    auto r = read_available();
    if (!r) return std::unexpected(r.error());
  }
  const FrameView v = parse_frame(buffered(), max_frame_);
  if (v.status == FrameStatus::kTooLarge)
    return net_fail(NetErrc::kBadHello, "side-channel frame of " + std::to_string(v.length) +
                                            " bytes from " + peer_ + " (limit " +
                                            std::to_string(max_frame_) + "): not an MRC peer?");
  if (auto f = take_frame()) return f;
  if (closed_) return net_fail(NetErrc::kPeerClosed, "side channel closed by " + peer_);
  return std::optional<std::vector<uint8_t>>{};
}

NetResult<std::vector<uint8_t>> SideChannel::recv_frame(int timeout_ms) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  while (true) {
    auto f = try_recv_frame();
    if (!f) return std::unexpected(f.error());
    if (*f) return std::move(**f);
    const int wait = remaining_ms(deadline);
    if (wait == 0)
      return net_fail(NetErrc::kTimeout,
                      "no answer from " + peer_ + " within " + std::to_string(timeout_ms) + " ms");
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, wait);
  }
}

NetResult<SideListener> SideListener::listen(uint16_t port) {
  SideListener l;
  l.fd_ = UniqueFd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l.fd_) return errno_fail("socket", errno);
  const int one = 1, zero = 0;
  ::setsockopt(l.fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(l.fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  a.sin6_port = htons(port);
  if (::bind(l.fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return errno_fail("bind side channel port " + std::to_string(port), errno);
  // A backlog for clients that arrive while garbage connections are being served.
  if (::listen(l.fd_.get(), 128) != 0) return errno_fail("listen", errno);
  socklen_t len = sizeof a;
  ::getsockname(l.fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
  l.port_ = ntohs(a.sin6_port);
  return l;
}

namespace {

using HandshakeLog = std::function<void(const std::string&)>;

// One accepted connection, non-blocking, with TCP_NODELAY; its peer's name, its address in
// `from`.
NetResult<SideChannel> accept_one(int listen_fd, in6_addr& from) {
  sockaddr_in6 peer{};
  socklen_t len = sizeof peer;
  UniqueFd fd(
      ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) return errno_fail("accept", errno);
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  from = peer.sin6_addr;
  return SideChannel(std::move(fd),
                     format_endpoint(Endpoint{peer.sin6_addr, ntohs(peer.sin6_port)}));
}

// How long poll may wait: until the first handshake deadline or the end (-1: no end).
template <typename Pending>
int handshake_wait_ms(const std::vector<Pending>& pending, uint64_t now, uint64_t end) {
  uint64_t wake = end;
  for (const Pending& p : pending)
    wake = std::min(wake, p.deadline_ns);
  if (wake == UINT64_MAX) return -1;
  const uint64_t wait_ns = wake > now ? wake - now : 0;
  return static_cast<int>(std::min<uint64_t>((wait_ns + 999'999) / 1'000'000, INT32_MAX));
}

bool same_address(const in6_addr& a, const in6_addr& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

// Expired handshakes close: an idle connection holds nothing for long.
void SideListener::close_expired(uint64_t now, int timeout_ms, const HandshakeLog& note) {
  for (size_t i = 0; i < pending_.size();) {
    if (now >= pending_[i].deadline_ns) {
      note("side channel: " + pending_[i].ch.peer_name() + " sent no hello within " +
           std::to_string(timeout_ms) + " ms: closed");
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

// A new connection joins the handshakes; when its address, or the listener, holds as many
// as allowed, one gives way first: its address's oldest, or the oldest of the address that
// holds the most.
void SideListener::admit(SideChannel ch, const HandshakeLimits& limits, const HandshakeLog& note) {
  const auto count_from = [&](const in6_addr& a) {
    return static_cast<size_t>(
        std::count_if(pending_.begin(), pending_.end(),
                      [&](const Pending& p) { return same_address(p.ch.peer_address(), a); }));
  };
  const auto close_oldest_from = [&](const in6_addr& a, const std::string& why) {
    const auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
      return same_address(p.ch.peer_address(), a);
    });
    note("side channel: " + why + ": the oldest, " + it->ch.peer_name() + ", closed");
    pending_.erase(it);
  };
  const size_t per_source = std::max<size_t>(limits.max_pending_per_source, 1);
  if (const size_t mine = count_from(ch.peer_address()); mine >= per_source) {
    close_oldest_from(ch.peer_address(),
                      std::to_string(mine) + " connections in handshake from one address");
  } else if (pending_.size() >= std::max<size_t>(limits.max_pending, 1)) {
    in6_addr busiest = pending_.front().ch.peer_address();
    size_t most = 0;
    for (const Pending& p : pending_)
      if (const size_t n = count_from(p.ch.peer_address()); n > most) {
        most = n;
        busiest = p.ch.peer_address();
      }
    close_oldest_from(busiest, std::to_string(pending_.size()) + " connections in handshake");
  }
  ch.set_max_frame(limits.max_first_frame);
  if (limits.greeting) {
    ch.greeting_ = limits.greeting();
    if (!ch.greeting_.empty()) (void)ch.send_frame(ch.greeting_, 100);
  }
  pending_.push_back(Pending{std::move(ch), monotonic_ns() + static_cast<uint64_t>(std::max(
                                                                 limits.handshake_timeout_ms, 1)) *
                                                                 1'000'000});
}

// Reads the pending connections poll found readable (`fds` after the listener's entry, in
// order, oldest first; the list changes as they are read): one whose first frame is taken
// is returned, with the frame in `frame`; one that fails or is refused is closed.
std::optional<SideChannel> SideListener::read_first_frames(
    const std::vector<pollfd>& fds,
    const std::function<HandshakeVerdict(SideChannel&, std::span<const uint8_t>)>& first_frame,
    std::vector<uint8_t>& frame, const HandshakeLog& note) {
  std::vector<int> readable;
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents) readable.push_back(fds[i].fd);
  for (int fd : readable) {
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Pending& p) { return p.ch.fd() == fd; });
    if (it == pending_.end()) continue;
    auto f = it->ch.try_recv_frame();
    if (!f) {
      note("side channel: " + it->ch.peer_name() + ": " + f.error().message + ": closed");
      pending_.erase(it);
      continue;
    }
    if (!*f) continue;  // not whole yet
    if (first_frame(it->ch, **f) == HandshakeVerdict::kTake) {
      SideChannel taken = std::move(it->ch);
      pending_.erase(it);
      taken.set_max_frame(kMaxFrameBytes);
      frame = std::move(**f);
      return taken;
    }
    pending_.erase(it);
  }
  return std::nullopt;
}

size_t SideListener::close_pending_from(const in6_addr& addr) {
  const size_t before = pending_.size();
  std::erase_if(pending_,
                [&](const Pending& p) { return same_address(p.ch.peer_address(), addr); });
  return before - pending_.size();
}

NetResult<SideChannel> SideListener::accept_handshake(
    int timeout_ms, const HandshakeLimits& limits,
    const std::function<HandshakeVerdict(SideChannel&, std::span<const uint8_t>)>& first_frame,
    std::vector<uint8_t>& frame, const std::function<void(const std::string&)>& log) {
  const HandshakeLog note = [&](const std::string& line) {
    if (log) log(line);
  };
  const uint64_t end =
      timeout_ms < 0 ? UINT64_MAX : monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  std::vector<pollfd> fds;
  // The first turn does not wait: frames that arrived while the caller was busy elsewhere
  // (connections kept from the last call) are read before their deadlines are looked at.
  bool first_turn = true;
  while (true) {
    const uint64_t now = monotonic_ns();
    if (!first_turn) {
      close_expired(now, limits.handshake_timeout_ms, note);
      if (now >= end)
        return net_fail(NetErrc::kTimeout, "no client completed a handshake on side-channel port " +
                                               std::to_string(port_) + " within " +
                                               std::to_string(timeout_ms) + " ms");
    }
    fds.clear();
    fds.push_back(pollfd{fd_.get(), POLLIN, 0});
    for (const Pending& p : pending_)
      fds.push_back(pollfd{p.ch.fd(), POLLIN, 0});
    const int n =
        ::poll(fds.data(), fds.size(), first_turn ? 0 : handshake_wait_ms(pending_, now, end));
    first_turn = false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_fail("poll", errno);
    }
    if (n == 0) continue;
    if (auto taken = read_first_frames(fds, first_frame, frame, note)) return std::move(*taken);
    if (!(fds[0].revents & POLLIN)) continue;
    // Every connection waiting in the backlog, not just one per turn.
    for (int k = 0; k < 64; ++k) {
      pollfd lp{fd_.get(), POLLIN, 0};
      if (k > 0 && ::poll(&lp, 1, 0) <= 0) break;
      in6_addr from{};
      auto ch = accept_one(fd_.get(), from);
      if (!ch) {
        if (ch.error().code == NetErrc::kSystem && (errno == EMFILE || errno == ENFILE)) {
          // Out of descriptors: make room by closing the oldest handshake.
          if (!pending_.empty()) pending_.erase(pending_.begin());
        }
        break;
      }
      ch->peer_addr_ = from;
      admit(std::move(*ch), limits, note);
    }
  }
}

NetResult<SideChannel> SideListener::accept(int timeout_ms) {
  pollfd p{fd_.get(), POLLIN, 0};
  const int n = ::poll(&p, 1, timeout_ms);
  if (n == 0)
    return net_fail(NetErrc::kTimeout, "no client connected to side-channel port " +
                                           std::to_string(port_) + " within " +
                                           std::to_string(timeout_ms) + " ms");
  if (n < 0) return errno_fail("poll", errno);
  sockaddr_in6 peer{};
  socklen_t len = sizeof peer;
  UniqueFd fd(::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC));
  if (!fd) return errno_fail("accept", errno);
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return SideChannel(std::move(fd),
                     format_endpoint(Endpoint{peer.sin6_addr, ntohs(peer.sin6_port)}));
}

}  // namespace mrc::net
