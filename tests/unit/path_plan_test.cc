#include "net/path_plan.h"

#include <gtest/gtest.h>

#include <cstring>

#include "net/sockets.h"

namespace mrc::net {
namespace {

std::string da(const PathDesc& d) {
  in6_addr a;
  std::memcpy(&a, d.ev.data(), 16);
  return format_in6(a);
}

PlanePaths plane(int p, int host, uint16_t peer_leaf, uint16_t local_leaf, int spines) {
  PlanePaths pl;
  char buf[64];
  std::snprintf(buf, sizeof buf, "fcbb:bb%02x:%x::", p, 0x4000 + host);
  pl.peer_addr = *parse_in6(buf);
  pl.peer_leaf_usid = peer_leaf;
  pl.local_leaf_usid = local_leaf;
  for (int s = 0; s < spines; ++s)
    pl.spine_usids.push_back(static_cast<uint16_t>(0x8000 + s));
  return pl;
}

TEST(PathPlan, plan_paths__srv6_enumerates_spines_per_plane_interleaved) {
  // Peer: host 3 on leaf 1 (uSID 0x0002); we are on leaf 0 (uSID 0x0001); 2 spines.
  std::vector<PlanePaths> planes = {plane(0, 3, 2, 1, 2), plane(1, 3, 2, 1, 2)};
  auto paths = plan_paths(ev::FormatMode::kSrv6, 3, planes, 0);
  ASSERT_TRUE(paths);
  ASSERT_EQ(paths->size(), 6u);
  EXPECT_EQ((*paths)[0].port, 0);
  EXPECT_EQ((*paths)[1].port, 1);
  EXPECT_EQ(da((*paths)[0]), "fcbb:bb00:8000:2:4003::");
  EXPECT_EQ(da((*paths)[1]), "fcbb:bb01:8000:2:4003::");
  EXPECT_EQ(da((*paths)[2]), "fcbb:bb00:8001:2:4003::");
  EXPECT_EQ(da((*paths)[4]), "fcbb:bb00:8000:2:4003::");  // more EVs than spines repeat
}

TEST(PathPlan, plan_paths__srv6_rotation_and_same_leaf) {
  std::vector<PlanePaths> planes = {plane(0, 3, 2, 1, 4)};
  auto rotated = plan_paths(ev::FormatMode::kSrv6, 1, planes, 3);
  ASSERT_TRUE(rotated);
  EXPECT_EQ(da((*rotated)[0]), "fcbb:bb00:8003:2:4003::");
  std::vector<PlanePaths> same = {plane(0, 1, 1, 1, 4)};
  auto local = plan_paths(ev::FormatMode::kSrv6, 2, same, 0);
  ASSERT_TRUE(local);
  EXPECT_EQ(da((*local)[0]), "fcbb:bb00:1:4001::");
}

TEST(PathPlan, plan_paths__srv6_without_fabric_knowledge_uses_the_plain_address) {
  std::vector<PlanePaths> planes = {plane(0, 3, 0, 0, 0)};
  auto paths = plan_paths(ev::FormatMode::kSrv6, 2, planes, 0);
  ASSERT_TRUE(paths);
  EXPECT_EQ(da((*paths)[1]), "fcbb:bb00:4003::");
}

TEST(PathPlan, plan_paths__stev_and_udp_come_from_the_ev_profiles) {
  std::vector<PlanePaths> planes = {plane(0, 3, 0, 0, 0), plane(1, 3, 0, 0, 0)};
  auto stev = plan_paths(ev::FormatMode::kStev, 4, planes, 0);
  ASSERT_TRUE(stev);
  EXPECT_EQ(stev->size(), 8u);
  auto udp = plan_paths(ev::FormatMode::kUdp, 4, planes, 0);
  ASSERT_TRUE(udp);
  EXPECT_EQ((*udp)[0].ev[0], 0xC0);  // source port 49152
  EXPECT_EQ((*udp)[1].port, 1);
}

TEST(PathPlan, plan_paths__rejects_empty_input) {
  EXPECT_FALSE(plan_paths(ev::FormatMode::kSrv6, 0, std::vector<PlanePaths>(1), 0));
  EXPECT_FALSE(plan_paths(ev::FormatMode::kSrv6, 1, {}, 0));
}

}  // namespace
}  // namespace mrc::net
