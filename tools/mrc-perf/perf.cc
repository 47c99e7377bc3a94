// What several of mrc-perf's parts use (perf.h).
#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "perf.h"

namespace mrc::perf {

// A control message's fields (net/perf_protocol.h); one that does not decode has none, and
// is then no message either end acts on.
PerfFields kv_decode(std::span<const uint8_t> b) {
  auto f = decode_perf_message(b);
  return f ? std::move(*f) : PerfFields{};
}

std::vector<uint8_t> kv_encode(const std::vector<std::pair<std::string, uint64_t>>& kv) {
  return encode_perf_message(kv);
}

uint64_t get(const PerfFields& kv, const std::string& k) {
  return perf_field(kv, k);
}

// Polls the driver until a side-channel frame arrives (the peer's engine must keep being
// served while we wait: it ACKs, retransmits, answers probes).
NetResult<std::vector<uint8_t>> wait_frame(Session& s, SideChannel& ch, Time timeout) {
  const Time start = s.driver().now();
  while (true) {
    auto f = ch.try_recv_frame();
    if (!f) return std::unexpected(f.error());
    // A late answer to a liveness question (perf_alive) is not the message waited for.
    if (*f && !is_perf_alive(**f)) return std::move(**f);
    if (s.driver().now() - start > timeout)
      return net_fail(NetErrc::kTimeout, "no message from " + ch.peer_name());
    if (auto st = s.driver().poll(us(500)); !st) return std::unexpected(st.error());
  }
}

// ----- CPU cost -------------------------------------------------------------------------

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// The CPU clock in Hz from /proc/cpuinfo (first "cpu MHz"; 0 when absent): cycles per byte
// are CPU seconds (getrusage, user + system) times this over the bytes moved.
double cpu_hz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return std::strtod(line.c_str() + colon + 1, nullptr) * 1e6;
    }
  return 0;
}

// Logs a server-side message on stderr.
void server_log(const std::string& line) {
  std::fprintf(stderr, "mrc-perf: %s\n", line.c_str());
}

}  // namespace mrc::perf
