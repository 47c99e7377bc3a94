// net/route_netlink: prefix and MAC parsing, the RTM_NEWROUTE and RTM_NEWNEIGH bytes (walked
// back with the kernel's own RTA_* / RTNH_* / NDA_* macros), and, as root, routes and
// neighbours replaced in a scratch network namespace and read back with `ip -6 route` and
// `ip -6 neigh`, plus the kernel's error for a bad interface.
#include "net/route_netlink.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "net/fabric_live.h"
#include "net/netns_exec.h"

namespace mrc::net {
namespace {

in6_addr addr(const char* text) {
  in6_addr a{};
  EXPECT_EQ(inet_pton(AF_INET6, text, &a), 1) << text;
  return a;
}

TEST(RouteNetlink, parse_route_prefix__parses_prefixes_and_refuses_bad_ones) {
  NetlinkRoute r;
  ASSERT_TRUE(parse_route_prefix("fcbb:bb00:8001::/48", r));
  EXPECT_EQ(r.prefix_len, 48);
  const in6_addr want = addr("fcbb:bb00:8001::");
  EXPECT_EQ(std::memcmp(&r.dst, &want, 16), 0);
  ASSERT_TRUE(parse_route_prefix("fd00::1", r));
  EXPECT_EQ(r.prefix_len, 128);
  ASSERT_TRUE(parse_route_prefix("::/0", r));
  EXPECT_EQ(r.prefix_len, 0);
  for (const char* bad :
       {"x/48", "fcbb::/129", "fcbb::/", "fcbb::/4a", "fcbb::1/48", "10.0.0.0/8"}) {
    NetlinkRoute before;
    before.prefix_len = 7;
    auto st = parse_route_prefix(bad, before);
    EXPECT_FALSE(st) << bad;
    if (!st) {
      EXPECT_NE(st.error().message.find(bad), std::string::npos) << st.error().message;
    }
    EXPECT_EQ(before.prefix_len, 7) << bad << ": a refused prefix changes nothing";
  }
}

// The attributes of a request, in order (type, payload).
struct Attr {
  unsigned short type;
  std::vector<uint8_t> payload;
};
std::vector<Attr> attrs_of(const std::vector<uint8_t>& msg) {
  std::vector<Attr> out;
  const auto* h = reinterpret_cast<const nlmsghdr*>(msg.data());
  const auto* rtm = static_cast<const rtmsg*>(NLMSG_DATA(h));
  int len = static_cast<int>(RTM_PAYLOAD(h));
  for (const rtattr* a = RTM_RTA(rtm); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    const auto* p = static_cast<const uint8_t*>(RTA_DATA(a));
    out.push_back({a->rta_type, std::vector<uint8_t>(p, p + RTA_PAYLOAD(a))});
  }
  EXPECT_EQ(len, 0) << "attributes end exactly at the message's end";
  return out;
}

TEST(RouteNetlink, encode_route_replace__single_nexthop_as_ip_route_replace_does) {
  NetlinkRoute r;
  ASSERT_TRUE(parse_route_prefix("fcbb:bb00:8001::/48", r));
  r.nexthops.push_back({addr("fd00:0:8001:1::1"), 7});
  auto msg = encode_route_replace(r, 42);
  ASSERT_TRUE(msg) << msg.error().message;
  // The vector's buffer comes from operator new: aligned for nlmsghdr.
  const std::vector<uint8_t> bytes = *msg;
  const auto* h = reinterpret_cast<const nlmsghdr*>(bytes.data());
  EXPECT_EQ(h->nlmsg_len, bytes.size());
  EXPECT_EQ(h->nlmsg_type, RTM_NEWROUTE);
  EXPECT_EQ(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE);
  EXPECT_EQ(h->nlmsg_seq, 42u);
  const auto* rtm = static_cast<const rtmsg*>(NLMSG_DATA(h));
  EXPECT_EQ(rtm->rtm_family, AF_INET6);
  EXPECT_EQ(rtm->rtm_dst_len, 48);
  EXPECT_EQ(rtm->rtm_table, RT_TABLE_MAIN);
  EXPECT_EQ(rtm->rtm_protocol, RTPROT_BOOT);
  EXPECT_EQ(rtm->rtm_type, RTN_UNICAST);
  const auto attrs = attrs_of(bytes);
  ASSERT_EQ(attrs.size(), 3u);
  EXPECT_EQ(attrs[0].type, RTA_DST);
  EXPECT_EQ(std::memcmp(attrs[0].payload.data(), &r.dst, 16), 0);
  EXPECT_EQ(attrs[1].type, RTA_GATEWAY);
  EXPECT_EQ(std::memcmp(attrs[1].payload.data(), &r.nexthops[0].gateway, 16), 0);
  EXPECT_EQ(attrs[2].type, RTA_OIF);
  int oif = 0;
  ASSERT_EQ(attrs[2].payload.size(), sizeof oif);
  std::memcpy(&oif, attrs[2].payload.data(), sizeof oif);
  EXPECT_EQ(oif, 7);
}

TEST(RouteNetlink, encode_route_replace__ecmp_nexthops_as_one_multipath_attribute) {
  NetlinkRoute r;
  ASSERT_TRUE(parse_route_prefix("fcbb:bb00:4002::/48", r));
  r.nexthops.push_back({addr("fd00:0:8000:1::1"), 3});
  r.nexthops.push_back({addr("fd00:0:8001:1::1"), 4});
  r.src = addr("fcbb:bb00:4000::");
  auto msg = encode_route_replace(r, 1);
  ASSERT_TRUE(msg) << msg.error().message;
  const auto attrs = attrs_of(*msg);
  ASSERT_EQ(attrs.size(), 3u);
  EXPECT_EQ(attrs[0].type, RTA_DST);
  EXPECT_EQ(attrs[1].type, RTA_MULTIPATH);
  EXPECT_EQ(attrs[2].type, RTA_PREFSRC);
  EXPECT_EQ(std::memcmp(attrs[2].payload.data(), &*r.src, 16), 0);
  // Walk the rtnexthop entries as the kernel does (rtm_get_nexthop / RTNH_OK).
  const std::vector<uint8_t>& mp = attrs[1].payload;
  int left = static_cast<int>(mp.size());
  size_t i = 0;
  // RTNH_OK reads rtnh_len before it looks at `left`: check the room first.
  for (auto* nh = reinterpret_cast<const rtnexthop*>(mp.data());
       left >= static_cast<int>(sizeof(rtnexthop)) && RTNH_OK(nh, left);
       left -= static_cast<int>(RTNH_ALIGN(nh->rtnh_len)), nh = RTNH_NEXT(nh), ++i) {
    ASSERT_LT(i, r.nexthops.size());
    EXPECT_EQ(nh->rtnh_ifindex, r.nexthops[i].ifindex);
    EXPECT_EQ(nh->rtnh_hops, 0) << "weight 1";
    int alen = static_cast<int>(nh->rtnh_len - sizeof(rtnexthop));
    const auto* a = reinterpret_cast<const rtattr*>(RTNH_DATA(nh));
    ASSERT_TRUE(RTA_OK(a, alen));
    EXPECT_EQ(a->rta_type, RTA_GATEWAY);
    EXPECT_EQ(std::memcmp(RTA_DATA(a), &r.nexthops[i].gateway, 16), 0);
  }
  EXPECT_EQ(i, 2u);
  EXPECT_EQ(left, 0);
}

TEST(RouteNetlink, encode_route_replace__refuses_a_route_without_nexthops) {
  NetlinkRoute r;
  ASSERT_TRUE(parse_route_prefix("fcbb::/32", r));
  auto msg = encode_route_replace(r, 1);
  ASSERT_FALSE(msg);
  EXPECT_NE(msg.error().message.find("fcbb::/32"), std::string::npos) << msg.error().message;
}

TEST(RouteNetlink, parse_mac__parses_macs_and_refuses_bad_ones) {
  std::array<uint8_t, 6> mac{};
  ASSERT_TRUE(parse_mac("06:01:40:02:aB:ff", mac));
  EXPECT_EQ(mac, (std::array<uint8_t, 6>{0x06, 0x01, 0x40, 0x02, 0xAB, 0xFF}));
  for (const char* bad : {"", "06:01:40:02:ab", "06:01:40:02:ab:ff:00", "06-01-40-02-ab-ff",
                          "g6:01:40:02:ab:ff", "06:01:40:02:ab:f"}) {
    std::array<uint8_t, 6> before{1, 2, 3, 4, 5, 6};
    auto st = parse_mac(bad, before);
    EXPECT_FALSE(st) << bad;
    EXPECT_EQ(before, (std::array<uint8_t, 6>{1, 2, 3, 4, 5, 6})) << bad << ": unchanged";
  }
}

TEST(RouteNetlink, encode_neighbour_replace__permanent_entry_as_ip_neigh_replace_does) {
  NetlinkNeighbour n;
  n.dst = addr("fd00:1:4002::2");
  n.ifindex = 7;
  n.lladdr = {0x06, 0x01, 0x40, 0x02, 0x00, 0x00};
  const auto msg = encode_neighbour_replace(n, 3);
  const auto* h = reinterpret_cast<const nlmsghdr*>(msg.data());
  ASSERT_EQ(h->nlmsg_len, msg.size());
  EXPECT_EQ(h->nlmsg_type, RTM_NEWNEIGH);
  EXPECT_EQ(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE);
  EXPECT_EQ(h->nlmsg_seq, 3u);
  const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
  EXPECT_EQ(nd->ndm_family, AF_INET6);
  EXPECT_EQ(nd->ndm_ifindex, 7);
  EXPECT_EQ(nd->ndm_state, NUD_PERMANENT);
  int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(ndmsg)));
  std::vector<Attr> attrs;
  for (auto* a = reinterpret_cast<const rtattr*>(reinterpret_cast<const uint8_t*>(nd) +
                                                 NLMSG_ALIGN(sizeof(ndmsg)));
       RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    const auto* p = static_cast<const uint8_t*>(RTA_DATA(a));
    attrs.push_back({a->rta_type, std::vector<uint8_t>(p, p + RTA_PAYLOAD(a))});
  }
  EXPECT_EQ(len, 0);
  ASSERT_EQ(attrs.size(), 2u);
  EXPECT_EQ(attrs[0].type, NDA_DST);
  EXPECT_EQ(std::memcmp(attrs[0].payload.data(), &n.dst, 16), 0);
  EXPECT_EQ(attrs[1].type, NDA_LLADDR);
  EXPECT_EQ(attrs[1].payload, std::vector<uint8_t>(n.lladdr.begin(), n.lladdr.end()));
}

// Root only: a scratch namespace with two interfaces (veth pairs kept inside it).
class RouteNetlinkLive : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto ok = check_privileges(); !ok)
      GTEST_SKIP() << "needs root and `ip netns`: " << ok.error().message;
    ns_ = "rtnl" + std::to_string(getpid());
    ASSERT_TRUE(run_checked({"ip", "netns", "add", ns_}));
    const char* setup =
        "link add d0 type veth peer name d0p\n"
        "link add d1 type veth peer name d1p\n"
        "link set d0 up\n"
        "link set d0p up\n"
        "link set d1 up\n"
        "link set d1p up\n"
        "addr add fd00:0::1/64 dev d0 nodad\n"
        "addr add fd00:1::1/64 dev d1 nodad\n"
        "addr add fcbb:bb00:4000::/128 dev d0 nodad\n";
    auto ok = run_checked({"ip", "-batch", "-"}, setup, ns_);
    ASSERT_TRUE(ok) << ok.error().message;
  }
  void TearDown() override {
    if (!ns_.empty()) (void)run_command({"ip", "netns", "del", ns_});
  }
  // Runs `f` on a thread inside the namespace (setns moves only the calling thread).
  template <typename F>
  auto in_namespace(F f) {
    return std::async(std::launch::async,
                      [&] {
                        const int fd = open(("/run/netns/" + ns_).c_str(), O_RDONLY | O_CLOEXEC);
                        EXPECT_GE(fd, 0);
                        EXPECT_EQ(setns(fd, CLONE_NEWNET), 0);
                        close(fd);
                        return f();
                      })
        .get();
  }
  // Replaces `rs` (built inside the namespace, where the interface indexes are) `times`
  // times over one netlink socket of the namespace.
  template <typename MakeRoutes>
  NetStatus replace_in_namespace(MakeRoutes make, int times = 1) {
    return in_namespace([&]() -> NetStatus {
      const std::vector<NetlinkRoute> rs = make();
      auto fd = open_route_netlink();
      if (!fd) return std::unexpected(fd.error());
      NetStatus ok;
      for (int i = 0; i < times && ok; ++i)
        ok = replace_routes(*fd, rs);
      close(*fd);
      return ok;
    });
  }
  // Replaces `neighbours(ifindex of d0)` over one netlink socket of the namespace.
  template <typename MakeNeighbours>
  NetStatus replace_neighbours_in_namespace(MakeNeighbours make) {
    return in_namespace([&]() -> NetStatus {
      const std::vector<NetlinkNeighbour> ns = make();
      auto fd = open_route_netlink();
      if (!fd) return std::unexpected(fd.error());
      NetStatus ok = replace_neighbours(*fd, ns);
      close(*fd);
      return ok;
    });
  }
  std::string neighbours() {
    auto r = run_command({"ip", "-6", "neigh", "show"}, {}, ns_);
    return r ? r->out : r.error().message;
  }
  std::string routes() {
    auto r = run_command({"ip", "-6", "route", "show"}, {}, ns_);
    return r ? r->out : r.error().message;
  }
  std::string ns_;
};

TEST_F(RouteNetlinkLive, replace_routes__single_and_multipath_routes) {
  // Twice: replacing again is idempotent, as `ip route replace` is.
  auto st = replace_in_namespace(
      [] {
        NetlinkRoute single, multi;
        (void)parse_route_prefix("fcbb:bb00:8001::/48", single);
        single.nexthops.push_back({addr("fd00:0::2"), static_cast<int>(if_nametoindex("d0"))});
        (void)parse_route_prefix("fcbb:bb00:4002::/48", multi);
        multi.nexthops.push_back({addr("fd00:0::2"), static_cast<int>(if_nametoindex("d0"))});
        multi.nexthops.push_back({addr("fd00:1::2"), static_cast<int>(if_nametoindex("d1"))});
        multi.src = addr("fcbb:bb00:4000::");
        return std::vector<NetlinkRoute>{single, multi};
      },
      2);
  ASSERT_TRUE(st) << st.error().message;
  const std::string table = routes();
  EXPECT_NE(table.find("fcbb:bb00:8001::/48 via fd00::2 dev d0"), std::string::npos) << table;
  EXPECT_NE(table.find("fcbb:bb00:4002::/48 src fcbb:bb00:4000::"), std::string::npos) << table;
  EXPECT_NE(table.find("nexthop via fd00::2 dev d0 weight 1"), std::string::npos) << table;
  EXPECT_NE(table.find("nexthop via fd00:1::2 dev d1 weight 1"), std::string::npos) << table;
}

TEST_F(RouteNetlinkLive, replace_routes__reports_the_kernels_error_and_keeps_the_routes_before_it) {
  auto st = replace_in_namespace([] {
    NetlinkRoute good, bad;
    (void)parse_route_prefix("fcbb:1::/48", good);
    good.nexthops.push_back({addr("fd00:0::2"), static_cast<int>(if_nametoindex("d0"))});
    (void)parse_route_prefix("fcbb:2::/48", bad);
    bad.nexthops.push_back({addr("fd00:0::2"), 999999});  // no such interface
    return std::vector<NetlinkRoute>{good, bad};
  });
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("fcbb:2::/48"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("No such device"), std::string::npos) << st.error().message;
  const std::string table = routes();
  EXPECT_NE(table.find("fcbb:1::/48"), std::string::npos) << table;
  EXPECT_EQ(table.find("fcbb:2::/48"), std::string::npos) << table;
}

TEST_F(RouteNetlinkLive, replace_neighbours__permanent_entries_and_the_kernels_error) {
  auto st = replace_neighbours_in_namespace([] {
    NetlinkNeighbour a, b;
    a.dst = addr("fd00:0::2");
    a.ifindex = static_cast<int>(if_nametoindex("d0"));
    a.lladdr = {0x06, 0x00, 0x40, 0x00, 0x00, 0x01};
    b = a;
    b.lladdr = {0x06, 0x00, 0x40, 0x00, 0x00, 0x02};  // replaces a
    return std::vector<NetlinkNeighbour>{a, b};
  });
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_NE(neighbours().find("fd00::2 dev d0 lladdr 06:00:40:00:00:02 PERMANENT"),
            std::string::npos)
      << neighbours();
  st = replace_neighbours_in_namespace([] {
    NetlinkNeighbour bad;
    bad.dst = addr("fd00:0::3");
    bad.ifindex = 999999;  // no such interface
    return std::vector<NetlinkNeighbour>{bad};
  });
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("fd00::3"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("No such device"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace mrc::net
