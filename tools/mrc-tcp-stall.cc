// mrc-tcp-stall: a TCP sender and a receiver that times every read, to measure how long a
// TCP or MPTCP connection stops delivering when a path fails (scripts/bench-net.sh). The
// receiver reports the longest gap between two reads that returned data, with when it
// started, at microsecond resolution. iperf3's shortest report interval is 0.1 s, too coarse
// for stalls that MRC keeps to milliseconds. Plain socket(AF_INET6, SOCK_STREAM) calls, so
// `mptcpize run mrc-tcp-stall ...` turns both ends into MPTCP.
//
//   mrc-tcp-stall recv [--port 5300]                 waits for one connection, reads to EOF
//   mrc-tcp-stall send ADDR [--port 5300] [-D 6]     writes 64 KiB blocks for -D seconds
//
// The receiver prints "listening", then one JSON object: bytes, seconds (first to last byte),
// gbps, stall_ms, stall_at_s (offset of the gap's start from the first byte), gaps (every gap
// of 20 ms or more as [at_s, ms], in order), first_byte_monotonic_s (CLOCK_MONOTONIC, the
// clock of every namespace, so a script can place a fault it injected among the gaps),
// cpu_seconds.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int fail(const char* what) {
  std::fprintf(stderr, "mrc-tcp-stall: %s: %s\n", what, std::strerror(errno));
  return 1;
}

int run_recv(uint16_t port) {
  const int listener = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return fail("socket");
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_port = htons(port);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) return fail("bind");
  if (::listen(listener, 1) != 0) return fail("listen");
  std::printf("listening\n");
  std::fflush(stdout);
  const int fd = ::accept(listener, nullptr, nullptr);
  if (fd < 0) return fail("accept");
  std::vector<char> buffer(1 << 20);
  uint64_t bytes = 0;
  Clock::time_point first{}, last{}, stall_start{};
  Clock::duration stall{};
  std::vector<std::pair<Clock::time_point, Clock::duration>> long_gaps;
  double cpu_first = 0;
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const auto now = Clock::now();
    if (bytes == 0) {
      first = last = now;
      cpu_first = cpu_seconds();
    }
    if (now - last >= std::chrono::milliseconds(20)) long_gaps.emplace_back(last, now - last);
    if (now - last > stall) {
      stall = now - last;
      stall_start = last;
    }
    last = now;
    bytes += static_cast<uint64_t>(n);
  }
  const double secs = std::chrono::duration<double>(last - first).count();
  nlohmann::ordered_json j;
  j["role"] = "recv";
  j["bytes"] = bytes;
  j["seconds"] = secs;
  j["gbps"] = secs > 0 ? static_cast<double>(bytes) * 8 / secs / 1e9 : 0.0;
  j["stall_ms"] = std::chrono::duration<double, std::milli>(stall).count();
  j["stall_at_s"] = std::chrono::duration<double>(stall_start - first).count();
  j["first_byte_monotonic_s"] = std::chrono::duration<double>(first.time_since_epoch()).count();
  j["gaps"] = nlohmann::json::array();
  for (const auto& [at, gap] : long_gaps)
    j["gaps"].push_back({std::chrono::duration<double>(at - first).count(),
                         std::chrono::duration<double, std::milli>(gap).count()});
  j["cpu_seconds"] = cpu_seconds() - cpu_first;
  std::printf("%s\n", j.dump().c_str());
  ::close(fd);
  ::close(listener);
  return bytes ? 0 : 1;
}

int run_send(const std::string& address, uint16_t port, double duration_s) {
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_port = htons(port);
  if (inet_pton(AF_INET6, address.c_str(), &to.sin6_addr) != 1) {
    return mrc::tools::fail_setup("mrc-tcp-stall", fmt::format("not an IPv6 address: {}", address));
  }
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail("socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return fail("connect");
  std::vector<char> block(64 << 10, 'x');
  uint64_t bytes = 0;
  const auto start = Clock::now();
  const double cpu0 = cpu_seconds();
  while (std::chrono::duration<double>(Clock::now() - start).count() < duration_s) {
    const ssize_t n = ::write(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    bytes += static_cast<uint64_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  // Wait for the receiver to close, so every byte was read before we report.
  char sink[256];
  while (::read(fd, sink, sizeof sink) > 0) {
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  nlohmann::ordered_json j;
  j["role"] = "send";
  j["bytes"] = bytes;
  j["seconds"] = secs;
  j["gbps"] = static_cast<double>(bytes) * 8 / secs / 1e9;
  j["cpu_seconds"] = cpu_seconds() - cpu0;
  std::printf("%s\n", j.dump().c_str());
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mrc-tcp-stall: longest gap in received bytes of one TCP/MPTCP connection "
      "(scripts/bench-net.sh)",
      "mrc-tcp-stall"};
  mrc::tools::set_exit_codes(app, "0 measured, 1 a socket call failed");
  uint16_t port = 5300;
  double duration_s = 6;
  std::string address;
  app.add_option("--port", port, "TCP port (1 to 65535)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  auto* recv = app.add_subcommand("recv", "accept one connection, read to EOF, report the stall");
  auto* send = app.add_subcommand("send", "connect and write for -D seconds");
  send->add_option("address", address, "receiver's IPv6 address")->required();
  send->add_option("-D,--duration", duration_s, "seconds of writing (0.1 to 3600)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  // --port and --fabric may follow the subcommand.
  send->fallthrough();
  recv->fallthrough();
  app.require_subcommand(1);
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;
  (void)recv;
  return send->parsed() ? run_send(address, port, duration_s) : run_recv(port);
}
