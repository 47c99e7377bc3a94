// Reachability probes (net/fabric_probe.h).
#include "net/fabric_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>

#include "net/netns_exec.h"

namespace mrc::net {

namespace {

std::unexpected<NetError> probe_error(std::string msg) {
  return net_fail(NetErrc::kSystem, std::move(msg));
}

}  // namespace

std::string Probe::label() const {
  std::string s = host_id(src_host) + "->" + host_id(dst_host) + " p" + std::to_string(plane);
  switch (via) {
    case Via::kSpine:
      return s + " via s" + std::to_string(spine);
    case Via::kSameLeaf:
      return s + " same-leaf";
    case Via::kPlain:
      return s + " plain";
  }
  return s;
}

std::vector<Probe> all_probes(const FabricSpec& spec) {
  std::vector<Probe> out;
  for (int p = 0; p < spec.planes; ++p) {
    for (int a = 0; a < spec.hosts; ++a) {
      for (int b = 0; b < spec.hosts; ++b) {
        if (a == b) continue;
        Probe pr;
        pr.src_host = a;
        pr.dst_host = b;
        pr.plane = p;
        const bool srv6 = has_source_routing(spec.dataplane);
        for (int s = 0; s < spec.spines && srv6; ++s) {
          pr.via = Probe::Via::kSpine;
          pr.spine = s;
          out.push_back(pr);
        }
        pr.spine = -1;
        if (srv6 && leaf_of_host(spec, a) == leaf_of_host(spec, b)) {
          pr.via = Probe::Via::kSameLeaf;
          out.push_back(pr);
        }
        pr.via = Probe::Via::kPlain;
        out.push_back(pr);
      }
    }
  }
  return out;
}

namespace {

struct FdCloser {
  std::vector<int> fds;
  ~FdCloser() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
};

constexpr uint32_t kProbeMagic = 0x4D524350;  // "MRCP"

struct ProbePayload {
  uint32_t magic;
  uint32_t index;
  uint64_t nonce;
};

}  // namespace

namespace {

// The sockets of a probe run: one receiver per host (any address, any plane) and one sender
// per host port, closed when the run ends.
struct ProbeSockets {
  FdCloser fds;
  std::vector<int> rx;            // per host
  std::vector<uint16_t> rx_port;  // per host: the receiver's UDP port
  std::vector<int> tx;            // per host and plane: host * planes + plane
};

// A probe receiver in `ns`: any address, zero UDP checksums accepted (probe senders send
// them, see open_sender), a 4 MiB receive buffer. Its fd goes to `fds`; returns it and its
// port.
NetResult<std::pair<int, uint16_t>> open_receiver(const std::string& ns, FdCloser& fds) {
  auto r = udp_socket_in_netns(ns);
  if (!r) return std::unexpected(r.error());
  fds.fds.push_back(*r);
  const int one = 1;
  setsockopt(*r, IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one);
  const int rcvbuf = 4 << 20;
  setsockopt(*r, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  if (bind(*r, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0)
    return probe_error("bind in " + ns + ": " + strerror(errno));
  socklen_t len = sizeof any;
  getsockname(*r, reinterpret_cast<sockaddr*>(&any), &len);
  return std::pair{*r, ntohs(any.sin6_port)};
}

// A probe sender of host `h`'s port on plane `p`, bound to that port's address. The DA is
// rewritten hop by hop (uSID shift), so a checksum over the sender's DA would be wrong where
// the packet ends; IPv6 UDP allows zero checksums with this opt-in.
NetResult<int> open_sender(const std::string& ns, int p, int h, FdCloser& fds) {
  auto t = udp_socket_in_netns(ns);
  if (!t) return std::unexpected(t.error());
  fds.fds.push_back(*t);
  const int one = 1;
  setsockopt(*t, IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one);
  sockaddr_in6 src{};
  src.sin6_family = AF_INET6;
  const auto a = host_address(p, h);
  std::memcpy(&src.sin6_addr, a.data(), 16);
  if (bind(*t, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0)
    return probe_error("bind " + format_ipv6(a) + " in " + ns + ": " + strerror(errno));
  return *t;
}

NetStatus open_probe_sockets(const FabricPlan& plan, ProbeSockets& ps) {
  const FabricSpec& spec = plan.spec;
  ps.rx.assign(size_t(spec.hosts), -1);
  ps.rx_port.assign(size_t(spec.hosts), 0);
  ps.tx.assign(size_t(spec.hosts * spec.planes), -1);
  for (int h = 0; h < spec.hosts; ++h) {
    const std::string& ns = plan.nodes[size_t(h)].ns;
    auto r = open_receiver(ns, ps.fds);
    if (!r) return std::unexpected(r.error());
    std::tie(ps.rx[size_t(h)], ps.rx_port[size_t(h)]) = *r;
    for (int p = 0; p < spec.planes; ++p) {
      auto t = open_sender(ns, p, h, ps.fds);
      if (!t) return std::unexpected(t.error());
      ps.tx[size_t(h * spec.planes + p)] = *t;
    }
  }
  return {};
}

// Each probe's destination address (SRv6 via its spine, on its leaf, or plain), its counts
// zeroed; an error names a probe outside the fabric.
NetStatus resolve_probes(const FabricSpec& spec, std::vector<Probe>& probes) {
  for (auto& pr : probes) {
    if (pr.src_host < 0 || pr.src_host >= spec.hosts || pr.dst_host < 0 ||
        pr.dst_host >= spec.hosts || pr.plane < 0 || pr.plane >= spec.planes ||
        (pr.via == Probe::Via::kSpine && (pr.spine < 0 || pr.spine >= spec.spines)))
      return probe_error("probe " + pr.label() + " is outside the fabric");
    switch (pr.via) {
      case Probe::Via::kSpine:
        pr.destination = format_ipv6(srv6_address(spec, pr.plane, pr.spine, pr.dst_host));
        break;
      case Probe::Via::kSameLeaf:
        pr.destination = format_ipv6(srv6_address(spec, pr.plane, std::nullopt, pr.dst_host));
        break;
      case Probe::Via::kPlain:
        pr.destination = format_ipv6(host_address(pr.plane, pr.dst_host));
        break;
    }
    pr.sent = pr.received = 0;
  }
  return {};
}

// Counts what the receivers hold of this run's probes (`nonce`).
void drain_answers(const ProbeSockets& ps, std::vector<Probe>& probes, uint64_t nonce) {
  for (int fd : ps.rx) {
    ProbePayload msg;
    while (true) {
      const ssize_t n = recv(fd, &msg, sizeof msg, 0);
      if (n < 0) break;
      if (n == sizeof msg && msg.magic == kProbeMagic && msg.nonce == nonce &&
          msg.index < probes.size())
        ++probes[msg.index].received;
    }
  }
}

// One probe of every path from its source port to the destination host's receiver.
void send_probe_round(const ProbeSockets& ps, int planes, std::vector<Probe>& probes,
                      uint64_t nonce) {
  for (size_t i = 0; i < probes.size(); ++i) {
    Probe& pr = probes[i];
    sockaddr_in6 dst{};
    dst.sin6_family = AF_INET6;
    const auto addr = parse_ipv6(pr.destination);
    std::memcpy(&dst.sin6_addr, addr->data(), 16);
    dst.sin6_port = htons(ps.rx_port[size_t(pr.dst_host)]);
    const ProbePayload msg{kProbeMagic, uint32_t(i), nonce};
    ++pr.sent;
    // Failures (no route while a port is down) are lost probes, not errors.
    (void)sendto(ps.tx[size_t(pr.src_host * planes + pr.plane)], &msg, sizeof msg, 0,
                 reinterpret_cast<sockaddr*>(&dst), sizeof dst);
  }
}

// Waits up to `wait_ms` for the answers still missing, counting them as they come.
void await_answers(const ProbeSockets& ps, std::vector<Probe>& probes, uint64_t nonce,
                   int wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> pfds;
    for (int fd : ps.rx)
      pfds.push_back({fd, POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (poll(pfds.data(), nfds_t(pfds.size()), int(std::max<int64_t>(1, left.count()))) <= 0)
      continue;
    drain_answers(ps, probes, nonce);
    bool all = true;
    for (const auto& pr : probes)
      all = all && pr.received >= pr.sent;
    if (all) return;
  }
}

}  // namespace

NetStatus run_probes(const FabricPlan& plan, std::vector<Probe>& probes, int count, int wait_ms) {
  ProbeSockets ps;
  if (auto st = open_probe_sockets(plan, ps); !st) return st;
  if (auto st = resolve_probes(plan.spec, probes); !st) return st;
  const uint64_t nonce = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  for (int round = 0; round < count; ++round) {
    send_probe_round(ps, plan.spec.planes, probes, nonce);
    drain_answers(ps, probes, nonce);
    // Pace rounds a little so that no queue on the way (veth backlog, socket) overflows.
    if (round + 1 < count) usleep(100);
  }
  await_answers(ps, probes, nonce, wait_ms);
  return {};
}

NetStatus wait_until_forwarding(const FabricPlan& plan, int timeout_ms, size_t max_probes) {
  std::vector<Probe> pending = all_probes(plan.spec);
  if (pending.size() > max_probes)
    std::erase_if(pending, [](const Probe& p) { return p.src_host != 0 && p.dst_host != 0; });
  const size_t total = pending.size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int wait_ms = 50;
  while (true) {
    if (auto ok = run_probes(plan, pending, 1, wait_ms); !ok) return ok;
    std::erase_if(pending, [](const Probe& p) { return p.received >= p.sent; });
    if (pending.empty()) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string msg = std::to_string(pending.size()) + " of " + std::to_string(total) +
                        " paths still lose every probe after " + std::to_string(timeout_ms) +
                        " ms:";
      for (size_t i = 0; i < pending.size() && i < 4; ++i)
        msg += (i ? ", " : " ") + pending[i].label() + " (" + pending[i].destination + ")";
      if (pending.size() > 4) msg += ", ...";
      return net_fail(NetErrc::kTimeout, msg);
    }
    // The lost ones again, a little later and with more patience for stragglers.
    usleep(20'000);
    wait_ms = std::min(2 * wait_ms, 400);
  }
}

}  // namespace mrc::net
