// mrc-udp-blast: the raw UDP limit of a path on an mrc-fabric, for comparing mrc-perf against
// (scripts/bench-net.sh). No transport at all: the sender fills sendmmsg batches of datagrams of
// one size and sprays them over every plane and every spine (the SRv6 destination through each
// spine, as mrc-perf's SRV6 mode does), one socket per plane; the receiver counts what arrives
// with recvmmsg. Both print one JSON object with their bytes, rate and CPU time.
//
//   mrc-udp-blast recv --fabric NAME --host 2 [--port 9400] [--idle-ms 1000]
//   mrc-udp-blast send --fabric NAME --host 0 --to 2 [--size 4136] [-D 5] [--port 9400]
//
// Run each inside its host (`mrc-fabric exec hN ...`). The receiver reports the rate between
// its first and last datagram and exits after --idle-ms without one (or at --max-s).
#include <fmt/core.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/fabric.h"

namespace {

using Clock = std::chrono::steady_clock;
using mrc::net::FabricSpec;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

sockaddr_in6 socket_address(const mrc::wire::Ipv6Addr& a, uint16_t port) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  std::memcpy(&s.sin6_addr, a.data(), 16);
  s.sin6_port = htons(port);
  return s;
}

// CPU seconds (user + system) of this process so far.
double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// One UDP socket bound to the host's address on `plane` (its port there), large buffers like
// the driver's.
int plane_socket(int plane, int host, uint16_t port) {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int buffer = 8 << 20;
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buffer, sizeof buffer) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  const sockaddr_in6 local = socket_address(mrc::net::host_address(plane, host), port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int run_send(const FabricSpec& spec, int host, int to, uint32_t size, double duration_s,
             uint16_t port) {
  std::vector<int> fds;
  std::vector<std::vector<sockaddr_in6>> destinations(spec.planes);
  for (int p = 0; p < spec.planes; ++p) {
    const int fd = plane_socket(p, host, 0);
    if (fd < 0) {
      std::fprintf(stderr, "mrc-udp-blast: plane %d socket: %s\n", p, std::strerror(errno));
      return 2;
    }
    fds.push_back(fd);
    for (int s = 0; s < spec.spines; ++s)
      destinations[p].push_back(socket_address(mrc::net::srv6_address(spec, p, s, to), port));
  }
  constexpr size_t kBatch = 64;
  std::vector<uint8_t> payload(size, 0xA5);
  iovec iov{payload.data(), payload.size()};
  std::vector<mmsghdr> msgs(kBatch);
  uint64_t packets = 0, bytes = 0, errors = 0;
  const auto start = Clock::now();
  const double cpu0 = cpu_seconds();
  size_t next_path = 0;
  while (seconds_since(start) < duration_s) {
    // Planes in turn, each batch spread over that plane's spines.
    for (int p = 0; p < spec.planes; ++p) {
      for (size_t i = 0; i < kBatch; ++i) {
        msgs[i] = {};
        msgs[i].msg_hdr.msg_name = &destinations[p][(next_path + i) % destinations[p].size()];
        msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in6);
        msgs[i].msg_hdr.msg_iov = &iov;
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = ::sendmmsg(fds[p], msgs.data(), kBatch, 0);
      if (n < 0) {
        ++errors;  // e.g. ENETUNREACH while a link is down: keep going
        continue;
      }
      packets += static_cast<uint64_t>(n);
      bytes += static_cast<uint64_t>(n) * size;
    }
    next_path += kBatch;
  }
  const double secs = seconds_since(start);
  nlohmann::ordered_json j;
  j["role"] = "send";
  j["size"] = size;
  j["tx_packets"] = packets;
  j["tx_bytes"] = bytes;
  j["send_errors"] = errors;
  j["seconds"] = secs;
  j["gbps"] = static_cast<double>(bytes) * 8 / secs / 1e9;
  j["cpu_seconds"] = cpu_seconds() - cpu0;
  std::printf("%s\n", j.dump().c_str());
  for (int fd : fds)
    ::close(fd);
  return 0;
}

int run_recv(const FabricSpec& spec, int host, uint16_t port, int idle_ms, double max_s) {
  std::vector<pollfd> pfds;
  for (int p = 0; p < spec.planes; ++p) {
    const int fd = plane_socket(p, host, port);
    if (fd < 0) {
      std::fprintf(stderr, "mrc-udp-blast: plane %d socket: %s\n", p, std::strerror(errno));
      return 2;
    }
    pfds.push_back({fd, POLLIN, 0});
  }
  std::printf("listening\n");
  std::fflush(stdout);
  constexpr size_t kBatch = 64;
  constexpr size_t kMaxDatagram = 65536;
  std::vector<uint8_t> buffers(kBatch * kMaxDatagram);
  std::vector<iovec> iovs(kBatch);
  std::vector<mmsghdr> msgs(kBatch);
  uint64_t packets = 0, bytes = 0;
  const auto opened = Clock::now();
  Clock::time_point first{}, last{};
  double cpu_first = 0;
  while (seconds_since(opened) < max_s) {
    const int ready = ::poll(pfds.data(), pfds.size(), idle_ms);
    if (ready == 0 && packets > 0) break;  // the sender is done
    if (ready <= 0) continue;
    for (auto& pfd : pfds) {
      if (!(pfd.revents & POLLIN)) continue;
      for (size_t i = 0; i < kBatch; ++i) {
        iovs[i] = {buffers.data() + i * kMaxDatagram, kMaxDatagram};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = ::recvmmsg(pfd.fd, msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) continue;
      if (packets == 0) {
        first = Clock::now();
        cpu_first = cpu_seconds();
      }
      last = Clock::now();
      packets += static_cast<uint64_t>(n);
      for (int i = 0; i < n; ++i)
        bytes += msgs[i].msg_len;
    }
  }
  const double secs = packets ? std::chrono::duration<double>(last - first).count() : 0;
  nlohmann::ordered_json j;
  j["role"] = "recv";
  j["rx_packets"] = packets;
  j["rx_bytes"] = bytes;
  j["seconds"] = secs;
  j["gbps"] = secs > 0 ? static_cast<double>(bytes) * 8 / secs / 1e9 : 0.0;
  j["cpu_seconds"] = packets ? cpu_seconds() - cpu_first : 0.0;
  std::printf("%s\n", j.dump().c_str());
  for (auto& pfd : pfds)
    ::close(pfd.fd);
  return packets ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mrc-udp-blast: raw UDP sendmmsg blast over every plane and spine of an mrc-fabric"};
  std::string fabric = "mrc";
  int host = -1, to = -1, idle_ms = 1000;
  uint32_t size = 4136;
  double duration_s = 5, max_s = 120;
  uint16_t port = 9400;
  app.add_option("--fabric", fabric, "mrc-fabric name")->capture_default_str();
  app.add_option("--port", port, "receiver UDP port")->capture_default_str();
  auto* send = app.add_subcommand("send", "blast datagrams at host --to");
  send->add_option("--host", host, "this host's index")->required();
  send->add_option("--to", to, "receiving host's index")->required();
  send->add_option("--size", size, "UDP payload bytes per datagram")->capture_default_str();
  send->add_option("-D,--duration", duration_s, "seconds")->capture_default_str();
  auto* recv = app.add_subcommand("recv", "count datagrams until the sender stops");
  recv->add_option("--host", host, "this host's index")->required();
  recv->add_option("--idle-ms", idle_ms, "exit after this long without a datagram")
      ->capture_default_str();
  recv->add_option("--max-s", max_s, "exit after this long in any case")->capture_default_str();
  // --port and --fabric may follow the subcommand.
  send->fallthrough();
  recv->fallthrough();
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  auto plan = mrc::net::load_fabric(fabric);
  if (!plan) {
    std::fprintf(stderr, "mrc-udp-blast: %s\n", plan.error().c_str());
    return 2;
  }
  const FabricSpec& spec = plan->spec;
  if (host < 0 || host >= spec.hosts || (send->parsed() && (to < 0 || to >= spec.hosts))) {
    std::fprintf(stderr, "mrc-udp-blast: host index out of range (fabric has %d)\n", spec.hosts);
    return 2;
  }
  if (size == 0 || size > 65000) {
    std::fprintf(stderr, "mrc-udp-blast: --size must be 1..65000\n");
    return 2;
  }
  return send->parsed() ? run_send(spec, host, to, size, duration_s, port)
                        : run_recv(spec, host, port, idle_ms, max_s);
}
