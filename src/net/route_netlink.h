// Static IPv6 routes and neighbour entries over rtnetlink (rtnetlink(7)), in-process.
//
// Why: mrc-fabric restores the static routes the kernel deleted with an admin-down interface
// each time a link comes back up. Doing that with `ip -batch` costs a fork and an exec per
// namespace (~10 ms of CPU per up edge, measured with `perf sched`), taken from the two
// cores the endpoints under test run on: a link flapping every 100 ms then showed up as
// multi-millisecond gaps in MRC's completions that a switch's link flap would never cause.
// One RTM_NEWROUTE per route (NLM_F_CREATE | NLM_F_REPLACE, as `ip route replace` sends)
// costs the kernel's route insertion alone.
//
// Only what mrc-fabric's plain routes need: a destination prefix, one or more nexthops
// (gateway + output interface; several = ECMP multipath) and an optional preferred source,
// in the main table with the kernel's default metric. SRv6 seg6local routes are not covered
// (they live on the SID device, which never goes down, so they are never deleted).
//
// Neighbours: mrc-fabric gives every link end a planned MAC address and its peer a permanent
// neighbour entry, so that no packet waits for neighbour discovery; the kernel deletes
// permanent entries too when an interface goes admin-down, and mrc-fabric puts them back with
// RTM_NEWNEIGH (NUD_PERMANENT, NLM_F_CREATE | NLM_F_REPLACE, as `ip neigh replace ... nud
// permanent` sends).
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/sockets.h"

namespace mrc::net {

struct NetlinkNexthop {
  in6_addr gateway{};
  int ifindex = 0;
};

struct NetlinkRoute {
  in6_addr dst{};
  uint8_t prefix_len = 128;
  std::vector<NetlinkNexthop> nexthops;  // one: RTA_GATEWAY + RTA_OIF; several: RTA_MULTIPATH
  std::optional<in6_addr> src;           // RTA_PREFSRC
};

// A permanent IPv6 neighbour entry: `dst` on interface `ifindex` is at `lladdr`.
struct NetlinkNeighbour {
  in6_addr dst{};
  int ifindex = 0;
  std::array<uint8_t, 6> lladdr{};
};

// Errors are NetError: kInvalidArgument for a bad prefix or route, kSystem for the socket and
// the kernel's answers.

// Parses "ADDR/LEN" (LEN 0..128) into dst and prefix_len; host bits must be zero, as the
// kernel refuses them ("Invalid prefix for given prefix length").
NetStatus parse_route_prefix(const std::string& text, NetlinkRoute& r);

// The RTM_NEWROUTE request that creates or replaces `r` (NLM_F_REQUEST | NLM_F_ACK |
// NLM_F_CREATE | NLM_F_REPLACE, sequence number `seq`). Fails on a route without nexthops.
NetResult<std::vector<uint8_t>> encode_route_replace(const NetlinkRoute& r, uint32_t seq);

// The RTM_NEWNEIGH request that creates or replaces `n` as a permanent entry (NLM_F_REQUEST |
// NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, sequence number `seq`).
std::vector<uint8_t> encode_neighbour_replace(const NetlinkNeighbour& n, uint32_t seq);

// Parses "aa:bb:cc:dd:ee:ff" (hex digits of either case); fails on anything else.
NetStatus parse_mac(const std::string& text, std::array<uint8_t, 6>& mac);

// A NETLINK_ROUTE socket in the calling thread's network namespace (close it with close(2)).
NetResult<int> open_route_netlink();

// Sends one request per route on `fd` and reads every acknowledgement; the first kernel
// error names its route's position and the errno text. Routes before it are in place.
NetStatus replace_routes(int fd, std::span<const NetlinkRoute> routes);

// The same for neighbour entries: one request each, every acknowledgement read, the first
// error names its entry.
NetStatus replace_neighbours(int fd, std::span<const NetlinkNeighbour> neighbours);

}  // namespace mrc::net
