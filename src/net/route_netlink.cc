#include "net/route_netlink.h"

#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mrc::net {
namespace {

std::unexpected<NetError> bad_route(std::string msg) {
  return net_fail(NetErrc::kInvalidArgument, std::move(msg));
}
std::unexpected<NetError> fail(std::string msg) {
  return net_fail(NetErrc::kSystem, std::move(msg));
}

// Appends netlink attributes to a message, keeping every header 4-byte aligned (NLA_ALIGN /
// RTA_ALIGN / RTNH_ALIGN are all 4).
class MessageWriter {
 public:
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t> take() { return std::move(bytes_); }

  template <typename T>
  size_t put(const T& value) {
    const size_t at = bytes_.size();
    bytes_.resize(at + RTA_ALIGN(sizeof(T)));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
    return at;
  }
  // An attribute with a payload; returns its offset (for nested attributes' lengths).
  size_t attr(uint16_t type, const void* data, size_t len) {
    const size_t at = bytes_.size();
    bytes_.resize(at + RTA_ALIGN(RTA_LENGTH(len)));
    rtattr a{static_cast<unsigned short>(RTA_LENGTH(len)), type};
    std::memcpy(bytes_.data() + at, &a, sizeof a);
    if (len) std::memcpy(bytes_.data() + at + RTA_LENGTH(0), data, len);
    return at;
  }
  // Sets the 16-bit length at `at` (an rtattr's or rtnexthop's first field) to cover
  // everything written since.
  void close_length(size_t at) {
    const auto len = static_cast<unsigned short>(bytes_.size() - at);
    std::memcpy(bytes_.data() + at, &len, sizeof len);
  }
  void set_message_length() {
    const auto len = static_cast<uint32_t>(bytes_.size());
    std::memcpy(bytes_.data(), &len, sizeof len);
  }

 private:
  std::vector<uint8_t> bytes_;
};

std::string address_text(const in6_addr& a) {
  char s[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, &a, s, sizeof s);
  return s;
}

// The extended ACK's message (NLMSGERR_ATTR_MSG), if the kernel attached one.
std::string extended_ack_message(const nlmsghdr* h) {
  if (!(h->nlmsg_flags & NLM_F_ACK_TLVS)) return {};
  // With NETLINK_CAP_ACK the error carries only the request's header.
  const size_t fixed = NLMSG_ALIGN(sizeof(nlmsgerr));
  if (h->nlmsg_len < NLMSG_HDRLEN + fixed) return {};
  const auto* p = reinterpret_cast<const uint8_t*>(h) + NLMSG_HDRLEN + fixed;
  size_t left = h->nlmsg_len - NLMSG_HDRLEN - fixed;
  while (left >= sizeof(nlattr)) {
    nlattr a;
    std::memcpy(&a, p, sizeof a);
    if (a.nla_len < sizeof a || a.nla_len > left) break;
    if ((a.nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
      const char* text = reinterpret_cast<const char*>(p + NLA_HDRLEN);
      return std::string(text, strnlen(text, a.nla_len - NLA_HDRLEN));
    }
    const size_t step = NLA_ALIGN(a.nla_len);
    if (step >= left) break;
    p += step;
    left -= step;
  }
  return {};
}

// NLMSG_OK(h, left) with the comparison of the message length (unsigned) against the bytes
// left (signed, so that NLMSG_NEXT past the end makes it negative) spelled out: the macro's
// own mixes the two, which clang's -Wsign-compare reports.
bool netlink_message_fits(const nlmsghdr* h, int left) {
  return left >= static_cast<int>(sizeof(nlmsghdr)) && h->nlmsg_len >= sizeof(nlmsghdr) &&
         h->nlmsg_len <= static_cast<uint32_t>(left);
}

}  // namespace

NetStatus parse_route_prefix(const std::string& text, NetlinkRoute& r) {
  const size_t slash = text.find('/');
  const std::string addr = text.substr(0, slash);
  in6_addr dst{};
  if (inet_pton(AF_INET6, addr.c_str(), &dst) != 1)
    return bad_route("bad IPv6 prefix '" + text + "': not an address");
  int len = 128;
  if (slash != std::string::npos) {
    const std::string digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3 ||
        digits.find_first_not_of("0123456789") != std::string::npos || std::stoi(digits) > 128)
      return bad_route("bad IPv6 prefix '" + text + "': length must be 0..128");
    len = std::stoi(digits);
  }
  for (int bit = len; bit < 128; ++bit)
    if (dst.s6_addr[bit / 8] & (0x80 >> (bit % 8)))
      return bad_route("bad IPv6 prefix '" + text + "': host bits set");
  r.dst = dst;
  r.prefix_len = static_cast<uint8_t>(len);
  return {};
}

NetResult<std::vector<uint8_t>> encode_route_replace(const NetlinkRoute& r, uint32_t seq) {
  if (r.nexthops.empty())
    return bad_route("route " + address_text(r.dst) + "/" + std::to_string(r.prefix_len) +
                     " has no nexthop");
  if (r.prefix_len > 128) return bad_route("prefix length above 128");
  MessageWriter w;
  nlmsghdr h{};
  h.nlmsg_type = RTM_NEWROUTE;
  h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
  h.nlmsg_seq = seq;
  w.put(h);
  rtmsg m{};
  m.rtm_family = AF_INET6;
  m.rtm_dst_len = r.prefix_len;
  m.rtm_table = RT_TABLE_MAIN;
  m.rtm_protocol = RTPROT_BOOT;  // what `ip route` sets by default
  m.rtm_scope = RT_SCOPE_UNIVERSE;
  m.rtm_type = RTN_UNICAST;
  w.put(m);
  w.attr(RTA_DST, &r.dst, sizeof r.dst);
  if (r.nexthops.size() == 1) {
    const NetlinkNexthop& nh = r.nexthops[0];
    w.attr(RTA_GATEWAY, &nh.gateway, sizeof nh.gateway);
    const int oif = nh.ifindex;
    w.attr(RTA_OIF, &oif, sizeof oif);
  } else {
    const size_t mp = w.attr(RTA_MULTIPATH, nullptr, 0);
    for (const NetlinkNexthop& nh : r.nexthops) {
      rtnexthop rtnh{};
      rtnh.rtnh_ifindex = nh.ifindex;  // rtnh_hops 0: weight 1
      const size_t at = w.put(rtnh);
      w.attr(RTA_GATEWAY, &nh.gateway, sizeof nh.gateway);
      w.close_length(at);
    }
    w.close_length(mp);
  }
  if (r.src) w.attr(RTA_PREFSRC, &*r.src, sizeof *r.src);
  w.set_message_length();
  return w.take();
}

NetResult<int> open_route_netlink() {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return fail(std::string("netlink socket: ") + std::strerror(errno));
  const int one = 1;
  // Errors carry the kernel's reason text, and not the whole request back.
  (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  return fd;
}

namespace {

// Sends `batch` (`count` requests with sequence numbers 1..count, in one datagram: the kernel
// handles them in order and acknowledges each) and reads every acknowledgement. The first
// kernel error is reported as "<what(index)>: <errno text> (<extended ack>)"; requests before
// it took effect.
template <typename What>
NetStatus send_requests(int fd, const std::vector<uint8_t>& batch, size_t count, What what) {
  if (count == 0) return {};
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, batch.data(), batch.size(), 0, reinterpret_cast<const sockaddr*>(&kernel),
             sizeof kernel) < 0)
    return fail(std::string("netlink send: ") + std::strerror(errno));
  size_t acked = 0;
  std::string first_error;
  alignas(nlmsghdr) uint8_t buf[16384];
  while (acked < count) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::string("netlink receive: ") + std::strerror(errno));
    }
    auto left = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); netlink_message_fits(h, left);
         h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type != NLMSG_ERROR) continue;
      nlmsgerr e;
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof e)) return fail("netlink: truncated acknowledgement");
      std::memcpy(&e, NLMSG_DATA(h), sizeof e);
      ++acked;
      if (e.error != 0 && first_error.empty()) {
        const bool known = h->nlmsg_seq >= 1 && h->nlmsg_seq <= count;
        first_error =
            (known ? what(h->nlmsg_seq - 1) : std::string("?")) + ": " + std::strerror(-e.error);
        if (auto ext = extended_ack_message(h); !ext.empty()) first_error += " (" + ext + ")";
      }
    }
  }
  if (!first_error.empty()) return fail(first_error);
  return {};
}

std::string mac_text(const std::array<uint8_t, 6>& m) {
  char s[18];
  std::snprintf(s, sizeof s, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return s;
}

}  // namespace

NetStatus replace_routes(int fd, std::span<const NetlinkRoute> routes) {
  std::vector<uint8_t> batch;
  for (size_t i = 0; i < routes.size(); ++i) {
    auto msg = encode_route_replace(routes[i], static_cast<uint32_t>(i + 1));
    if (!msg) return std::unexpected(msg.error());
    batch.insert(batch.end(), msg->begin(), msg->end());
  }
  return send_requests(fd, batch, routes.size(), [&](size_t i) {
    return "route replace " + address_text(routes[i].dst) + "/" +
           std::to_string(routes[i].prefix_len);
  });
}

std::vector<uint8_t> encode_neighbour_replace(const NetlinkNeighbour& n, uint32_t seq) {
  MessageWriter w;
  nlmsghdr h{};
  h.nlmsg_type = RTM_NEWNEIGH;
  h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
  h.nlmsg_seq = seq;
  w.put(h);
  ndmsg m{};
  m.ndm_family = AF_INET6;
  m.ndm_ifindex = n.ifindex;
  m.ndm_state = NUD_PERMANENT;
  w.put(m);
  w.attr(NDA_DST, &n.dst, sizeof n.dst);
  w.attr(NDA_LLADDR, n.lladdr.data(), n.lladdr.size());
  w.set_message_length();
  return w.take();
}

NetStatus parse_mac(const std::string& text, std::array<uint8_t, 6>& mac) {
  std::array<uint8_t, 6> out{};
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() != 17) return bad_route("bad MAC address '" + text + "'");
  for (size_t i = 0; i < 6; ++i) {
    const int hi = hex(text[3 * i]);
    const int lo = hex(text[3 * i + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && text[3 * i + 2] != ':'))
      return bad_route("bad MAC address '" + text + "'");
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  mac = out;
  return {};
}

NetStatus replace_neighbours(int fd, std::span<const NetlinkNeighbour> neighbours) {
  std::vector<uint8_t> batch;
  for (size_t i = 0; i < neighbours.size(); ++i) {
    auto msg = encode_neighbour_replace(neighbours[i], static_cast<uint32_t>(i + 1));
    batch.insert(batch.end(), msg.begin(), msg.end());
  }
  return send_requests(fd, batch, neighbours.size(), [&](size_t i) {
    return "neighbour replace " + address_text(neighbours[i].dst) + " lladdr " +
           mac_text(neighbours[i].lladdr);
  });
}

}  // namespace mrc::net
