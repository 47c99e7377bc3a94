#include "transport/receive_window.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>
#include <vector>

namespace mrc {
namespace {

ReceiveWindow make(uint32_t mpr_dest_psns = 1024, uint32_t first_psn = 0) {
  ReceiveWindow w;
  w.start(mpr_dest_psns, first_psn);
  w.allocate(4);
  return w;
}

TEST(ReceiveWindow, start__limit_is_mpr_dest_rounded_up_to_a_power_of_two_at_least_128) {
  ReceiveWindow w;
  w.start(100, 7);
  EXPECT_EQ(w.limit(), 128u);
  EXPECT_EQ(w.base(), 7u);
  w.start(1000, 0);
  EXPECT_EQ(w.limit(), 1024u);
  EXPECT_FALSE(w.allocated());
}

TEST(ReceiveWindow, acceptable__from_a_limit_behind_to_mpr_dest_ahead) {
  ReceiveWindow w = make(256, 1000);
  EXPECT_TRUE(w.acceptable(w.offset(1000)));
  EXPECT_TRUE(w.acceptable(w.offset(1000 + 255)));
  EXPECT_FALSE(w.acceptable(w.offset(1000 + 256)));
  EXPECT_TRUE(w.acceptable(w.offset(1000 - 256)));
  EXPECT_FALSE(w.acceptable(w.offset(1000 - 257)));
}

TEST(ReceiveWindow, mark_received__advances_the_base_over_what_arrived) {
  ReceiveWindow w = make();
  EXPECT_FALSE(w.mark_received(1, 100));  // a hole at 0
  EXPECT_FALSE(w.mark_received(2, 100));
  EXPECT_EQ(w.base(), 0u);
  EXPECT_TRUE(w.received(2));
  EXPECT_TRUE(w.mark_received(0, 100));
  EXPECT_EQ(w.base(), 3u);
  EXPECT_EQ(w.received_bytes(), 300u);
}

TEST(ReceiveWindow, arrived__behind_the_base_always_beyond_the_ring_never) {
  ReceiveWindow w = make();
  ASSERT_TRUE(w.mark_received(0, 100));
  EXPECT_FALSE(w.mark_received(2, 100));
  EXPECT_TRUE(w.arrived(-1));  // PSN 0, behind the base
  EXPECT_FALSE(w.arrived(0));  // PSN 1, the hole
  EXPECT_TRUE(w.arrived(1));   // PSN 2
  // PSN 2 + the ring size shares PSN 2's bit but never arrived (the ring was not grown).
  const int32_t ring = 64;  // make(): allocate(4), one word of bits
  EXPECT_FALSE(w.arrived(1 + ring));
  EXPECT_TRUE(w.received(2 + ring));  // what received() alone would say
}

TEST(ReceiveWindow, cover__grows_the_bitmap_keeping_what_arrived) {
  ReceiveWindow w = make(1024, kPsnMask - 10);  // the window wraps the PSN space
  const size_t before = w.ring_bytes();
  w.mark_received(psn_add(kPsnMask - 10, 5), 1);
  w.cover(500);
  w.mark_received(psn_add(kPsnMask - 10, 500), 1);
  EXPECT_GT(w.ring_bytes(), before);
  EXPECT_TRUE(w.received(psn_add(kPsnMask - 10, 5)));
  EXPECT_TRUE(w.received(psn_add(kPsnMask - 10, 500)));
  EXPECT_FALSE(w.received(psn_add(kPsnMask - 10, 6)));
  const size_t grown = w.ring_bytes();
  w.cover(2000);  // beyond MPR_dest: not the window's
  EXPECT_EQ(w.ring_bytes(), grown);
}

TEST(ReceiveWindow, fill_sack__reports_the_bitmap_from_the_base_and_consumes_the_echoes) {
  ReceiveWindow w = make();
  w.cover(100);
  for (uint32_t psn : {0u, 1u, 3u, 64u, 127u})
    w.mark_received(psn, 10);
  w.add_echo(wire::AckEcho{3, 1, 0});
  wire::SackExt s;
  w.fill_sack(s);
  EXPECT_EQ(s.cum_psn, 2u);
  EXPECT_EQ(s.sack_base, 2u);
  EXPECT_EQ(s.bitmap[0], (1ull << 1) | (1ull << 62));  // 3 and 64 from base 2
  EXPECT_EQ(s.bitmap[1], 1ull << 61);                  // 127
  EXPECT_EQ(s.received_bytes, 50u);
  ASSERT_EQ(s.echo_count, 1);
  EXPECT_EQ(s.echo[0].psn, 3u);
  wire::SackExt again;
  w.fill_sack(again);
  EXPECT_EQ(again.echo_count, 0);
}

TEST(ReceiveWindow, add_echo__when_full_keeps_duplicates_and_drops_the_oldest_plain_echo) {
  ReceiveWindow w = make();
  w.add_echo(wire::AckEcho{0, 0, wire::AckEcho::kDuplicate});
  for (uint32_t psn = 1; psn < wire::kMaxAckEchoes; ++psn)
    w.add_echo(wire::AckEcho{psn, 0, 0});
  w.add_echo(wire::AckEcho{100, 0, 0});  // full: echo 1 (the oldest plain one) gives way
  wire::SackExt s;
  w.fill_sack(s);
  ASSERT_EQ(s.echo_count, wire::kMaxAckEchoes);
  EXPECT_EQ(s.echo[0].psn, 0u);
  EXPECT_EQ(s.echo[1].psn, 2u);
  EXPECT_EQ(s.echo[wire::kMaxAckEchoes - 1].psn, 100u);
}

TEST(ReceiveWindow, messages__complete_in_order_once_their_last_psn_arrived) {
  ReceiveWindow w = make();
  w.open(1, 1, 0, false);
  w.mark_received(1, 10);
  EXPECT_EQ(w.completable(), nullptr);  // message 0 comes first
  w.open(0, 0, 0, false);
  w.mark_received(0, 10);
  ASSERT_NE(w.completable(), nullptr);
  EXPECT_EQ(w.completable()->msg_num, 0u);
  w.complete_next();
  ASSERT_NE(w.completable(), nullptr);
  EXPECT_EQ(w.completable()->msg_num, 1u);
  w.complete_next();
  EXPECT_EQ(w.completable(), nullptr);
  EXPECT_EQ(w.msg_base(), 2u);
  EXPECT_EQ(w.find(1), nullptr);
}

TEST(ReceiveWindow, open__grows_the_message_ring_keeping_open_messages) {
  ReceiveWindow w = make();
  w.open(2, 9, 0, false);
  w.open(40, 50, 7, true);
  ASSERT_NE(w.find(2), nullptr);
  EXPECT_EQ(w.find(2)->last_psn, 9u);
  ASSERT_NE(w.find(40), nullptr);
  EXPECT_TRUE(w.find(40)->with_imm);
  EXPECT_EQ(w.get(40).imm, 7u);
  EXPECT_EQ(w.find(3), nullptr);
  EXPECT_TRUE(w.message_in_window(w.limit() - 1));
  EXPECT_FALSE(w.message_in_window(w.limit()));
}

TEST(ReceiveWindow, idle__once_nothing_is_ahead_of_the_base_and_no_message_is_open) {
  ReceiveWindow w = make();
  EXPECT_TRUE(w.idle());
  w.open(0, 1, 0, false);
  EXPECT_FALSE(w.idle());
  w.mark_received(1, 10);  // ahead of the base
  w.mark_received(0, 10);
  EXPECT_FALSE(w.idle());  // the message is still open
  ASSERT_NE(w.completable(), nullptr);
  w.complete_next();
  EXPECT_TRUE(w.idle());
  w.release();
  EXPECT_FALSE(w.allocated());
  EXPECT_EQ(w.ring_bytes(), 0u);
  // Without rings the ACK still says where the window stands, with an empty bitmap.
  wire::SackExt s;
  w.fill_sack(s);
  EXPECT_EQ(s.cum_psn, 2u);
  EXPECT_EQ(s.bitmap[0], 0u);
  EXPECT_EQ(s.received_bytes, 20u);
  w.allocate(4);  // the next message: rings again, the window where it was
  EXPECT_EQ(w.base(), 2u);
  EXPECT_EQ(w.msg_base(), 1u);
  EXPECT_TRUE(w.mark_received(2, 10));
}

// Property: any arrival order inside the window leaves the base at the first PSN not
// received and the SACK bitmap naming exactly the PSNs received after it.
RC_GTEST_PROP(ReceiveWindow, mark_received__matches_a_set_of_arrivals, ()) {
  const auto first = *rc::gen::element(0u, 1000u, kPsnMask - 20);
  const auto arrivals = *rc::gen::container<std::vector<uint32_t>>(rc::gen::inRange(0u, 300u));
  ReceiveWindow w = make(512, first);
  std::set<uint32_t> got;
  for (const uint32_t off : arrivals) {
    const uint32_t psn = psn_add(first, off);
    const int32_t d = w.offset(psn);
    if (d < 0 || w.received(psn)) continue;  // duplicates are not placed again
    w.cover(static_cast<uint32_t>(d));
    w.mark_received(psn, 1);
    got.insert(off);
  }
  uint32_t base = 0;
  while (got.count(base))
    ++base;
  RC_ASSERT(w.base() == psn_add(first, base));
  wire::SackExt s;
  w.fill_sack(s);
  for (uint32_t i = 0; i < 64u * wire::kSackBitmapWords; ++i) {
    const bool bit = (s.bitmap[i / 64] >> (i % 64)) & 1;
    RC_ASSERT(bit == (got.count(base + i) > 0));
  }
}

}  // namespace
}  // namespace mrc
