// Tests for net/usid_bpf.h: the eBPF uN program run on crafted frames (BPF_PROG_TEST_RUN, root;
// no namespace needed), held to wire/usid.h's usid_shift, the reference the simulator and the
// driver use, and to seg6local End's rules at the end of a carrier. Skips with the reason when
// the program cannot be loaded (not root, no BPF, or built without clang/libbpf).
#include "net/usid_bpf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "net/fabric.h"
#include "wire/address_plan.h"
#include "wire/usid.h"

namespace mrc::net {
namespace {

constexpr size_t kEth = 14, kIp6 = 40, kDaddr = kEth + 24;

// An Ethernet + IPv6 frame to `da` carrying `next_header` and then `rest` (UDP by default).
std::vector<uint8_t> frame_to(const wire::Ipv6Addr& da, std::vector<uint8_t> rest = {},
                              uint8_t next_header = 17) {
  if (rest.empty()) {
    rest = {0xC0, 0x01, 0x12, 0xB7, 0x00, 0x10, 0x00, 0x00};  // UDP, zero checksum
    for (int i = 0; i < 8; ++i)
      rest.push_back(uint8_t(0xA0 + i));
  }
  // Written into a frame of its final size (growing a vector from a braced list trips
  // g++ 12's -Warray-bounds here).
  std::vector<uint8_t> f(kEth + kIp6 + rest.size());
  const uint8_t eth[kEth] = {0x02, 0, 0, 0, 0, 1, 0x06, 0, 0, 0, 0, 2, 0x86, 0xDD};
  const uint16_t plen = uint16_t(rest.size());
  const uint8_t ip6[8] = {0x60,          0x0A,        0xBC, 0xDE, uint8_t(plen >> 8),
                          uint8_t(plen), next_header, 64};
  const auto src = *parse_ipv6("fcbb:bb00:4000::");
  std::memcpy(f.data(), eth, kEth);
  std::memcpy(f.data() + kEth, ip6, sizeof ip6);
  std::memcpy(f.data() + kEth + 8, src.data(), 16);
  std::memcpy(f.data() + kDaddr, da.data(), 16);
  std::memcpy(f.data() + kEth + kIp6, rest.data(), rest.size());
  return f;
}

wire::Ipv6Addr daddr_of(const std::vector<uint8_t>& f) {
  wire::Ipv6Addr a{};
  std::memcpy(a.data(), f.data() + kDaddr, 16);
  return a;
}

wire::Ipv6Addr carrier(std::initializer_list<uint16_t> usids, int plane = 0) {
  const std::vector<uint16_t> list(usids);
  return wire::usid_carrier(wire::plane_block(plane), list);
}

class UsidBpf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto p = UsidEndProgram::load(carrier({wire::spine_usid(1)}));
    if (!p) {
      skip_reason_ = p.error().message;
      return;
    }
    spine_ = new UsidEndProgram(std::move(*p));
  }
  static void TearDownTestSuite() {
    delete spine_;
    spine_ = nullptr;
  }
  void SetUp() override {
    if (!spine_) GTEST_SKIP() << "cannot load the uN program: " << skip_reason_;
  }
  static UsidBpfRun run(const UsidEndProgram& p, const std::vector<uint8_t>& f) {
    auto r = p.run(f);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : UsidBpfRun{};
  }

  static inline UsidEndProgram* spine_ = nullptr;
  static inline std::string skip_reason_;
};

TEST_F(UsidBpf, run__shifts_a_carrier_addressed_to_the_switch_and_nothing_else) {
  const auto da = carrier({wire::spine_usid(1), wire::leaf_usid(1), wire::host_usid(3)});
  const auto in = frame_to(da);
  const auto before = spine_->counters();
  ASSERT_TRUE(before);
  const auto out = run(*spine_, in);
  EXPECT_EQ(out.verdict, kTcActOk);
  ASSERT_EQ(out.frame.size(), in.size());
  EXPECT_EQ(daddr_of(out.frame), wire::usid_shift(da));
  EXPECT_EQ(format_ipv6(daddr_of(out.frame)), "fcbb:bb00:2:4003::");
  // Only the destination changed: hop limit (the forwarding path decrements it), flow label,
  // source and the UDP header with its (zero) checksum are as they were.
  for (size_t i = 0; i < in.size(); ++i)
    if (i < kDaddr || i >= kDaddr + 16) {
      EXPECT_EQ(out.frame[i], in[i]) << "byte " << i;
    }
  EXPECT_EQ(spine_->counters()->shifted, before->shifted + 1);
  // Another switch's SID, another plane's block, a plain address: untouched.
  for (const auto& other :
       {carrier({wire::spine_usid(0), wire::leaf_usid(1), wire::host_usid(3)}),
        carrier({wire::spine_usid(1), wire::leaf_usid(1), wire::host_usid(3)}, 1),
        carrier({wire::host_usid(3)})}) {
    const auto f = frame_to(other);
    const auto r = run(*spine_, f);
    EXPECT_EQ(r.verdict, kTcActOk);
    EXPECT_EQ(r.frame, f) << format_ipv6(other);
  }
  EXPECT_EQ(spine_->counters()->shifted, before->shifted + 1);
}

TEST_F(UsidBpf, run__a_route_through_spine_and_leaf_ends_at_the_host_address) {
  auto leaf = UsidEndProgram::load(carrier({wire::leaf_usid(1)}));
  ASSERT_TRUE(leaf) << leaf.error().message;
  const auto da = carrier({wire::spine_usid(1), wire::leaf_usid(1), wire::host_usid(3)});
  const auto at_leaf = run(*spine_, frame_to(da));
  const auto at_host = run(*leaf, at_leaf.frame);
  EXPECT_EQ(at_host.verdict, kTcActOk);
  EXPECT_EQ(daddr_of(at_host.frame), host_address(0, 3));
  EXPECT_EQ(leaf->counters()->shifted, 1u);
}

// Random carriers of one to six uSIDs, the first the switch's: the program's result is
// usid_shift's, byte for byte, and any other first uSID is left alone.
TEST_F(UsidBpf, run__agrees_with_usid_shift_on_random_carriers) {
  std::mt19937_64 rng(20261205);
  for (int i = 0; i < 500; ++i) {
    std::vector<uint16_t> list{rng() % 4 == 0 ? uint16_t(1 + rng() % 0xFFFE) : wire::spine_usid(1)};
    const int more = int(rng() % 6);
    for (int k = 0; k < more; ++k)
      list.push_back(uint16_t(1 + rng() % 0xFFFE));
    const auto da = wire::usid_carrier(wire::plane_block(0), list);
    const auto r = run(*spine_, frame_to(da));
    if (list[0] != wire::spine_usid(1)) {
      EXPECT_EQ(daddr_of(r.frame), da);
      continue;
    }
    if (more == 0) {
      EXPECT_EQ(r.verdict, kTcActShot) << format_ipv6(da);  // end of carrier, no SRH
      continue;
    }
    EXPECT_EQ(r.verdict, kTcActOk);
    EXPECT_EQ(daddr_of(r.frame), wire::usid_shift(da)) << format_ipv6(da);
  }
}

TEST_F(UsidBpf, run__end_of_carrier_takes_the_next_srh_segment_or_drops) {
  const auto da = carrier({wire::spine_usid(1)});
  const auto before = spine_->counters();
  ASSERT_TRUE(before);
  // No SRH: End has nothing to do at the end of its carrier (RFC 8986 4.1): dropped.
  EXPECT_EQ(run(*spine_, frame_to(da)).verdict, kTcActShot);
  // An SRH (RFC 8754) with two segments, segments left 1: segment 0 becomes the destination.
  const auto next = carrier({wire::leaf_usid(0), wire::host_usid(1)});
  const auto last = carrier({wire::host_usid(1)});
  std::vector<uint8_t> srh = {17, 4, 4, 1, 1, 0, 0, 0};  // next UDP, len 4, type 4, SL 1, LE 1
  srh.insert(srh.end(), next.begin(), next.end());       // segment 0
  srh.insert(srh.end(), last.begin(), last.end());       // segment 1 (unused here)
  const std::vector<uint8_t> udp = {0xC0, 0x01, 0x12, 0xB7, 0x00, 0x08, 0x00, 0x00};
  srh.insert(srh.end(), udp.begin(), udp.end());
  const auto out = run(*spine_, frame_to(da, srh, 43));
  EXPECT_EQ(out.verdict, kTcActOk);
  EXPECT_EQ(daddr_of(out.frame), next);
  EXPECT_EQ(out.frame[kEth + kIp6 + 3], 0) << "segments left decremented";
  // Segments left 0, a routing header of another type, a truncated SRH: dropped.
  auto used_up = srh;
  used_up[3] = 0;
  EXPECT_EQ(run(*spine_, frame_to(da, used_up, 43)).verdict, kTcActShot);
  auto other_type = srh;
  other_type[2] = 3;
  EXPECT_EQ(run(*spine_, frame_to(da, other_type, 43)).verdict, kTcActShot);
  EXPECT_EQ(
      run(*spine_, frame_to(da, std::vector<uint8_t>(srh.begin(), srh.begin() + 20), 43)).verdict,
      kTcActShot);
  const auto after = spine_->counters();
  EXPECT_EQ(after->segment_next, before->segment_next + 1);
  EXPECT_EQ(after->dropped, before->dropped + 4);
}

TEST_F(UsidBpf, run__passes_what_is_not_ipv6_and_needs_no_payload) {
  const auto da = carrier({wire::spine_usid(1), wire::host_usid(2)});
  auto ipv4 = frame_to(da);
  ipv4[12] = 0x08;
  ipv4[13] = 0x00;
  const auto r4 = run(*spine_, ipv4);
  EXPECT_EQ(r4.verdict, kTcActOk);
  EXPECT_EQ(r4.frame, ipv4);
  // (An IPv6 frame shorter than its fixed header never reaches the program: the kernel drops
  // it before tc, and BPF_PROG_TEST_RUN refuses one. Such a frame passes untouched, since
  // loading its destination fails.)
  // A frame of the IPv6 header alone, addressed to the switch: shifted all the same.
  const auto full = frame_to(da);
  const std::vector<uint8_t> bare(full.begin(), full.begin() + long(kEth + kIp6));
  const auto rb = run(*spine_, bare);
  EXPECT_EQ(rb.verdict, kTcActOk);
  EXPECT_EQ(daddr_of(rb.frame), wire::usid_shift(da));
}

}  // namespace
}  // namespace mrc::net
