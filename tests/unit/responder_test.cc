#include "transport/responder.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "support/path_descs.h"

namespace mrc {
namespace {

constexpr uint32_t kQpn = 5;
constexpr uint32_t kMtu = 1024;

// One responder and what its QP would hand it: an engine view with a registered region, the
// QP's paths (8 on 2 ports) and a reverse EV set that is off (ACKs go back the way data came).
struct Harness {
  explicit Harness(bool mrc = true, EngineConfig config = {}) : env(config), mrc(mrc) {
    paths.init(testpaths::paths(8, 2), 1, 2, PathPolicy{}, 1);
    reverse.configure(0, 2);
    keys = *env.memory.register_region(buffer.data(), buffer.size(), 0, kRemoteWrite);
    rx.window.allocate(env.config.qp_initial_ring);
  }
  ResponderContext context() {
    return ResponderContext{env, paths, reverse, in_control, kQpn, kMtu, max_wimm_dest, mrc};
  }
  // Packet `index` of a `count`-packet message `msg` starting at PSN `first`.
  RxPacket data(uint32_t msg, uint32_t first, uint32_t index, uint32_t count, bool imm = false) {
    RxPacket p;
    p.port = static_cast<uint8_t>(index % 2);
    wire::TransportPacket& t = p.pkt;
    t.bth.opcode = imm ? wire::Opcode::kWriteOnlyImm : wire::Opcode::kWriteOnly;
    t.bth.dest_qp = kQpn;
    t.bth.psn = first + index;
    t.reth = wire::Reth{uint64_t{kMtu} * (first + index), keys.rkey, kMtu};
    t.imm = 0xAB;
    t.data.msg_num = msg;
    t.data.pkt_index = index;
    t.data.pkt_count = count;
    t.data.ev_index = static_cast<uint16_t>(index % 8);
    t.payload = payload.data();
    t.payload_len = kMtu;
    return p;
  }
  // As the QP does: the rings exist before a data packet is looked at (they go when idle).
  Status receive(Time now, const RxPacket& p) {
    if (!rx.window.allocated()) rx.window.allocate(env.config.qp_initial_ring);
    return mrc ? rx.on_data(context(), now, p) : rx.on_roce_data(context(), now, p);
  }
  std::vector<Completion> completions() {
    std::vector<Completion> v;
    while (!env.completions.empty())
      v.push_back(env.completions.pop_front());
    return v;
  }

  QpEnv env;
  bool mrc;
  PathSet paths;
  ReversePathSet reverse;
  bool in_control = false;
  uint16_t max_wimm_dest = 64;
  std::array<uint8_t, 16 * kMtu> buffer{};
  std::array<uint8_t, kMtu> payload{};
  MemoryKeys keys{};
  Responder rx{1024, 0, 0, 0};
};

TEST(Responder, on_data__places_packets_and_asks_for_an_ack_every_few) {
  Harness h;
  h.payload.fill(0x5A);
  for (uint32_t i = 0; i + 1 < h.env.config.ack_every; ++i)
    ASSERT_TRUE(h.receive(us(1), h.data(0, 0, i, 8)));
  EXPECT_FALSE(h.rx.ack_now);  // fewer than ack_every: the delayed ACK
  EXPECT_EQ(h.rx.ack_due, us(1) + h.env.config.ack_delay);
  EXPECT_EQ(h.rx.deadline(), h.rx.ack_due);
  ASSERT_TRUE(h.receive(us(2), h.data(0, 0, h.env.config.ack_every - 1, 8)));
  EXPECT_TRUE(h.rx.ack_now);
  EXPECT_TRUE(h.in_control);
  EXPECT_EQ(h.env.control_ring.size(), 1u);
  EXPECT_EQ(h.env.counters.data_received, h.env.config.ack_every);
  EXPECT_EQ(h.env.counters.bytes_placed, uint64_t{kMtu} * h.env.config.ack_every);
  EXPECT_EQ(h.buffer[0], 0x5A);
  EXPECT_EQ(h.rx.window.echo_count(), h.env.config.ack_every);
}

TEST(Responder, on_data__acknowledges_a_duplicate_without_placing_or_checking_its_key) {
  Harness h;
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 0, 2)));
  RxPacket dup = h.data(0, 0, 0, 2);
  dup.pkt.reth.rkey ^= 1;  // the region may have been deregistered since
  ASSERT_TRUE(h.receive(1, dup));
  EXPECT_EQ(h.env.counters.duplicates, 1u);
  EXPECT_EQ(h.env.counters.data_received, 1u);
  EXPECT_TRUE(h.rx.ack_now);  // a duplicate is acknowledged at once
  // A new packet with a bad key is dropped and changes nothing.
  RxPacket bad = h.data(0, 0, 1, 2);
  bad.pkt.reth.rkey ^= 1;
  EXPECT_EQ(h.receive(2, bad).error(), Error::kBadRkey);
  EXPECT_EQ(h.env.counters.drops[static_cast<int>(DropReason::kBadRkey)], 1u);
}

TEST(Responder, on_data__drops_what_the_window_or_framing_refuses) {
  Harness h;
  EXPECT_EQ(h.receive(0, h.data(0, 2000, 0, 1)).error(), Error::kPsnOutOfWindow);
  RxPacket inconsistent = h.data(0, 0, 0, 1);
  inconsistent.pkt.data.pkt_count = 0;
  EXPECT_EQ(h.receive(0, inconsistent).error(), Error::kBadExtension);
  RxPacket long_payload = h.data(0, 0, 0, 1);
  long_payload.pkt.reth.dma_len = long_payload.pkt.payload_len = kMtu + 4;
  EXPECT_EQ(h.receive(0, long_payload).error(), Error::kInvalidArgument);
  EXPECT_EQ(h.env.counters.drops[static_cast<int>(DropReason::kPsnOutOfWindow)], 1u);
  EXPECT_EQ(h.env.counters.drops[static_cast<int>(DropReason::kInconsistent)], 1u);
  EXPECT_EQ(h.env.counters.drops[static_cast<int>(DropReason::kPayloadTooLong)], 1u);
  EXPECT_EQ(h.env.counters.data_received, 0u);
}

TEST(Responder, on_data__a_trimmed_packet_queues_its_nack) {
  Harness h;
  RxPacket trimmed = h.data(0, 0, 1, 2);
  trimmed.trimmed = true;
  trimmed.pkt.payload_len = 0;
  ASSERT_TRUE(h.receive(0, trimmed));
  ASSERT_EQ(h.rx.nacks.size(), 1u);
  EXPECT_EQ(h.rx.nacks.front().psn, 1u);
  EXPECT_EQ(h.rx.nacks.front().ev, 1);
  EXPECT_TRUE(h.rx.has_control());
  EXPECT_TRUE(h.in_control);
  EXPECT_EQ(h.env.counters.trimmed_received, 1u);
  EXPECT_EQ(h.env.counters.data_received, 0u);
}

TEST(Responder, complete_recv_messages__a_write_with_immediate_waits_for_its_receive) {
  Harness h;
  const auto c = h.context();
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 0, 1, true)));
  EXPECT_TRUE(h.completions().empty());  // no RNR: the message waits
  EXPECT_EQ(h.rx.wimm_dest_open, 1u);
  ASSERT_TRUE(h.rx.post_recv(c, 77, 4));
  const auto done = h.completions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 77u);
  EXPECT_EQ(done[0].opcode, WcOpcode::kRecvImm);
  EXPECT_EQ(done[0].imm, 0xABu);
  EXPECT_EQ(done[0].byte_len, kMtu);
  EXPECT_EQ(h.rx.wimm_dest_open, 0u);
}

TEST(Responder, post_recv__refuses_beyond_the_receive_queue_depth) {
  Harness h;
  const auto c = h.context();
  ASSERT_TRUE(h.rx.post_recv(c, 1, 2));
  ASSERT_TRUE(h.rx.post_recv(c, 2, 2));
  EXPECT_EQ(h.rx.post_recv(c, 3, 2).error(), Error::kQueueFull);
}

TEST(Responder, on_roce_data__accepts_only_the_next_psn_and_naks_once_per_gap) {
  Harness h(false);
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 1, 3)));  // PSN 1 before 0
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 2, 3)));
  EXPECT_EQ(h.env.counters.out_of_sequence, 2u);
  EXPECT_TRUE(h.rx.roce_nak_pending);
  h.rx.roce_nak_pending = false;  // sent
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 2, 3)));
  EXPECT_FALSE(h.rx.roce_nak_pending);  // one NAK per gap
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 0, 3)));
  EXPECT_EQ(h.rx.window.base(), 1u);
  EXPECT_FALSE(h.rx.roce_nak_sent_for_base);  // the gap moved: the next one gets its NAK
}

TEST(Responder, on_roce_data__a_marked_packet_asks_for_one_cnp_per_interval) {
  Harness h(false);
  RxPacket marked = h.data(0, 0, 0, 4);
  marked.ecn_ce = true;
  ASSERT_TRUE(h.receive(0, marked));
  EXPECT_TRUE(h.rx.cnp_pending);
  h.rx.cnp_pending = false;  // sent
  h.rx.cnp_ever = true;
  h.rx.last_cnp = 0;
  marked = h.data(0, 0, 1, 4);
  marked.ecn_ce = true;
  ASSERT_TRUE(h.receive(h.env.config.cnp_interval - 1, marked));
  EXPECT_FALSE(h.rx.cnp_pending);
  marked = h.data(0, 0, 2, 4);
  marked.ecn_ce = true;
  ASSERT_TRUE(h.receive(h.env.config.cnp_interval, marked));
  EXPECT_TRUE(h.rx.cnp_pending);
}

TEST(Responder, fill_ack__reports_the_window_and_arms_the_repeat) {
  Harness h;
  h.env.ack_repeat_after = us(250);
  ASSERT_TRUE(h.receive(us(1), h.data(0, 0, 0, 2)));
  ASSERT_TRUE(h.receive(us(1), h.data(0, 0, 1, 2)));
  TxPacket out;
  out.port = 1;
  out.ev_index = 3;
  h.rx.fill_ack(h.env, true, us(3), out);
  EXPECT_EQ(out.pkt.bth.opcode, wire::Opcode::kAck);
  EXPECT_EQ(out.pkt.bth.psn, 1u);
  EXPECT_EQ(out.pkt.aeth.syndrome, kAethAck);
  EXPECT_EQ(out.pkt.sack.cum_psn, 2u);
  EXPECT_EQ(out.pkt.sack.echo_count, 2);
  EXPECT_EQ(out.pkt.sack.service_time_ns, 2000u);
  EXPECT_FALSE(h.rx.ack_now);
  EXPECT_EQ(h.rx.ack_due, kNever);
  EXPECT_EQ(h.rx.last_ack_port, 1);
  EXPECT_EQ(h.rx.last_ack_path, 3);
  EXPECT_EQ(h.rx.ack_repeat_due, us(253));
  EXPECT_EQ(h.rx.deadline(), us(253));
  EXPECT_TRUE(h.rx.on_timer(us(253)));
  EXPECT_TRUE(h.rx.ack_repeat_now);
  EXPECT_EQ(h.rx.deadline(), kNever);
}

TEST(Responder, idle__once_every_message_is_complete_and_acknowledged) {
  Harness h;
  EXPECT_TRUE(h.rx.idle());
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 0, 1)));
  EXPECT_FALSE(h.rx.idle());  // its ACK is due
  TxPacket out;
  h.rx.fill_ack(h.env, true, 0, out);
  EXPECT_TRUE(h.rx.idle());
}

TEST(Responder, flush__completes_posted_receives_and_cancels_what_was_due) {
  Harness h;
  const auto c = h.context();
  ASSERT_TRUE(h.rx.post_recv(c, 1, 4));
  ASSERT_TRUE(h.rx.post_recv(c, 2, 4));
  ASSERT_TRUE(h.receive(0, h.data(0, 0, 0, 2)));
  h.rx.flush(h.env, kQpn, us(5));
  const auto done = h.completions();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status, WcStatus::kFlushed);
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_FALSE(h.rx.has_control());
  EXPECT_EQ(h.rx.deadline(), kNever);
  EXPECT_EQ(h.rx.window.echo_count(), 0u);
}

}  // namespace
}  // namespace mrc
