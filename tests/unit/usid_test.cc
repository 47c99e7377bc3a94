// Tests for wire/usid.h, in the order of its functions.
#include "wire/usid.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <vector>

namespace mrc::wire {
namespace {

Ipv6Addr bytes(std::initializer_list<uint8_t> list) {
  Ipv6Addr a{};
  std::copy(list.begin(), list.end(), a.begin());
  return a;
}

TEST(UsidCarrier, usid_carrier__block_then_usids_then_zeros) {
  const uint16_t usids[] = {0x0100, 0x0203, 0xFFFE};
  EXPECT_EQ(usid_carrier(0xFCBBBB00, usids),
            bytes({0xFC, 0xBB, 0xBB, 0x00, 0x01, 0x00, 0x02, 0x03, 0xFF, 0xFE, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(usid_carrier(0x42424242, {}),
            bytes({0x42, 0x42, 0x42, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  const uint16_t six[] = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(usid_carrier(0x01020304, six), bytes({1, 2, 3, 4, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6}));
}

TEST(UsidView, of__splits_block_and_usids) {
  const uint16_t usids[] = {0x0100, 0x0200};
  const UsidView v = UsidView::of(usid_carrier(0xFCBBBB00, usids));
  EXPECT_EQ(v.block, 0xFCBBBB00u);
  EXPECT_EQ(v.count, 2);
  EXPECT_EQ(v.usids, (std::array<uint16_t, kUsidsPerCarrier>{0x0100, 0x0200, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<uint16_t>(v.active_list().begin(), v.active_list().end()),
            (std::vector<uint16_t>{0x0100, 0x0200}));
}

TEST(UsidView, of__count_stops_at_first_zero_and_full_carrier_counts_six) {
  // A zero in the middle ends the carrier: what follows is not routed on.
  const Ipv6Addr gap = bytes({0, 0, 0, 1, 0, 7, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(UsidView::of(gap).count, 1);
  const uint16_t six[] = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(UsidView::of(usid_carrier(0, six)).count, 6);
  EXPECT_EQ(UsidView::of(Ipv6Addr{}).count, 0);
}

TEST(UsidBlockAndActive, usid_block_and_active__read_the_right_bits) {
  const Ipv6Addr a = bytes({0xFC, 0xBB, 0xBB, 0x00, 0xAB, 0xCD, 0x12, 0x34});
  EXPECT_EQ(usid_block(a), 0xFCBBBB00u);
  EXPECT_EQ(usid_active(a), 0xABCDu);
  EXPECT_EQ(usid_active(Ipv6Addr{}), 0u);
}

TEST(UsidShift, usid_shift__drops_active_shifts_left_and_zero_fills) {
  const uint16_t usids[] = {0x0100, 0x0200, 0x0300};
  Ipv6Addr a = usid_carrier(0xFCBBBB00, usids);
  a = usid_shift(a);
  EXPECT_EQ(a, bytes({0xFC, 0xBB, 0xBB, 0x00, 0x02, 0x00, 0x03, 0x00}));
  a = usid_shift(a);
  EXPECT_EQ(a, bytes({0xFC, 0xBB, 0xBB, 0x00, 0x03, 0x00}));
  a = usid_shift(a);
  EXPECT_EQ(a, bytes({0xFC, 0xBB, 0xBB, 0x00}));
  EXPECT_EQ(usid_shift(a), a) << "shifting a used-up carrier changes nothing";

  // A full carrier: the last slot is refilled with zero.
  const uint16_t six[] = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(usid_shift(usid_carrier(7, six)),
            bytes({0, 0, 0, 7, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 0}));
}

TEST(UsidIsEndOfCarrier, usid_is_end_of_carrier__true_only_when_nothing_follows_the_active_usid) {
  const uint16_t two[] = {0x0100, 0x0200};
  const Ipv6Addr a = usid_carrier(0xFCBBBB00, two);
  EXPECT_FALSE(usid_is_end_of_carrier(a));
  EXPECT_TRUE(usid_is_end_of_carrier(usid_shift(a)));
  EXPECT_TRUE(usid_is_end_of_carrier(usid_carrier(1, {})));
  const Ipv6Addr last_byte = bytes({0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  EXPECT_FALSE(usid_is_end_of_carrier(last_byte));
}

// A switch walk: every node on the path sees its own uSID active, in order, and the last one
// sees the end of the carrier.
RC_GTEST_PROP(UsidProperty, usid_shift__forwarding_visits_each_usid_once_in_order, ()) {
  const auto block = *rc::gen::arbitrary<uint32_t>();
  const auto usids = *rc::gen::container<std::vector<uint16_t>>(
      *rc::gen::inRange<size_t>(1, kUsidsPerCarrier + 1), rc::gen::inRange<uint16_t>(1, 0xFFFF));
  Ipv6Addr da = usid_carrier(block, usids);
  RC_ASSERT(UsidView::of(da).count == static_cast<int>(usids.size()));
  for (size_t hop = 0; hop < usids.size(); ++hop) {
    RC_ASSERT(usid_block(da) == block);
    RC_ASSERT(usid_active(da) == usids[hop]);
    const bool last = hop + 1 == usids.size();
    RC_ASSERT(usid_is_end_of_carrier(da) == last);
    if (!last) da = usid_shift(da);
  }
  const std::vector<uint16_t> rest{usids.back()};
  RC_ASSERT(da == usid_carrier(block, rest));
}

}  // namespace
}  // namespace mrc::wire
