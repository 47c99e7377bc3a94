#include "transport/requester.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "transport/psn.h"

namespace mrc {
namespace {

using PktState = Requester::PktState;

// A requester whose PSN ring holds `n` entries and whose outstanding PSNs are
// [first, first + count), each carrying packet k of WR k.
Requester outstanding(uint32_t n, uint32_t first, uint32_t count) {
  Requester r;
  r.pkts.assign(n, Requester::TxPkt{});
  r.pkt_mask = n - 1;
  r.pkt_limit = 1024;
  r.snd_una = r.next_psn = r.gbn_next = first;
  for (uint32_t k = 0; k < count; ++k) {
    Requester::TxPkt& p = r.pkt(r.next_psn);
    p.wr_seq = k;
    p.state = PktState::kInflight;
    r.next_psn = psn_add(r.next_psn, 1);
  }
  return r;
}

TEST(Requester, psn_in_flight_range__from_snd_una_up_to_next_psn) {
  const Requester r = outstanding(8, kPsnMask - 1, 3);  // wraps: kPsnMask - 1, kPsnMask, 0
  EXPECT_EQ(r.outstanding_psns(), 3u);
  EXPECT_TRUE(r.psn_in_flight_range(kPsnMask - 1));
  EXPECT_TRUE(r.psn_in_flight_range(0));
  EXPECT_FALSE(r.psn_in_flight_range(1));
  EXPECT_FALSE(r.psn_in_flight_range(kPsnMask - 2));
}

TEST(Requester, grow_pkt_ring__keeps_each_outstanding_psn_at_its_slot) {
  Requester r = outstanding(4, 6, 4);  // PSNs 6..9 fill the ring of 4
  r.grow_pkt_ring();
  EXPECT_EQ(r.pkts.size(), 8u);
  EXPECT_EQ(r.pkt_mask, 7u);
  for (uint32_t k = 0; k < 4; ++k) {
    EXPECT_EQ(r.pkt(6 + k).wr_seq, k);
    EXPECT_EQ(r.pkt(6 + k).state, PktState::kInflight);
  }
}

TEST(Requester, grow_sq__keeps_the_wrs_not_completed_up_to_the_depth) {
  Requester r;
  r.sq.resize(4);
  r.sq_head = 3;
  r.sq_tail = 7;  // WRs 3..6, wrapping the ring of 4
  for (uint64_t s = r.sq_head; s != r.sq_tail; ++s)
    r.wr_at(s).wr_id = 100 + s;
  r.grow_sq(6);
  EXPECT_EQ(r.sq.size(), 6u);  // doubling stops at sq_depth
  for (uint64_t s = r.sq_head; s != r.sq_tail; ++s)
    EXPECT_EQ(r.wr_at(s).wr_id, 100 + s);
}

TEST(Requester, advance_una__frees_acknowledged_psns_up_to_the_first_hole) {
  Requester r = outstanding(8, 10, 4);
  r.pkt(10).state = PktState::kAcked;
  r.pkt(11).state = PktState::kAcked;
  r.pkt(13).state = PktState::kAcked;
  r.advance_una();
  EXPECT_EQ(r.snd_una, 12u);
  EXPECT_EQ(r.gbn_next, 12u);  // go-back-N never resends below snd_una
  EXPECT_EQ(r.pkt(10).state, PktState::kFree);
  EXPECT_EQ(r.pkt(13).state, PktState::kAcked);
}

TEST(Requester, compact_retx__keeps_only_psns_still_lost) {
  Requester r = outstanding(8, 0, 4);
  r.retx = Ring<uint32_t>(4);
  r.pkt(1).state = PktState::kLost;
  r.pkt(3).state = PktState::kLost;
  for (uint32_t psn : {1u, 2u, 3u, 9u})
    r.retx.push_back(psn);  // 2 acknowledged since, 9 not outstanding
  r.compact_retx();
  ASSERT_EQ(r.retx.size(), 2u);
  EXPECT_EQ(r.retx.front(), 1u);
}

TEST(Requester, release_rings__once_idle_gives_every_ring_back) {
  Requester r = outstanding(8, 0, 2);
  r.sq.resize(4);
  r.retx = Ring<uint32_t>(8);
  r.loss = std::make_unique<LossDetector>();
  EXPECT_FALSE(r.rings_idle());  // PSNs outstanding
  r.pkt(0).state = r.pkt(1).state = PktState::kAcked;
  r.advance_una();
  EXPECT_TRUE(r.rings_idle());
  r.release_rings();
  EXPECT_TRUE(r.sq.empty());
  EXPECT_TRUE(r.pkts.empty());
  EXPECT_EQ(r.pkt_mask, 0u);
  EXPECT_EQ(r.retx.capacity(), 0u);
  EXPECT_NE(r.loss, nullptr);  // the detector stays: its estimates carry over
}

WriteWr write(uint64_t wr_id, uint64_t length, bool imm = false, bool signaled = true) {
  WriteWr wr;
  wr.wr_id = wr_id;
  wr.opcode = imm ? WrOpcode::kWriteImm : WrOpcode::kWrite;
  wr.length = length;
  wr.signaled = signaled;
  return wr;
}

std::vector<Completion> completions(QpEnv& env) {
  std::vector<Completion> v;
  while (!env.completions.empty())
    v.push_back(env.completions.pop_front());
  return v;
}

TEST(Requester, post__segments_a_write_by_the_mtu_and_grows_the_queue) {
  Requester r;
  r.sq.resize(1);
  r.post(write(1, 0), nullptr, 1000, false, 4);
  r.post(write(2, 2500, true), nullptr, 1000, false, 4);  // the queue doubles
  EXPECT_EQ(r.sq.size(), 2u);
  r.sq_head = 1;  // WR 0 completed: room for one more without growing
  EXPECT_EQ(r.sq_tail, 2u);
  EXPECT_EQ(r.wr_at(0).npkts, 1u);  // an empty WRITE is one packet
  EXPECT_EQ(r.wr_at(1).npkts, 3u);
  EXPECT_EQ(r.wr_at(1).msg_num, 1u);
  EXPECT_TRUE(r.wr_at(1).with_imm);
  r.post(write(3, 10, false, false), nullptr, 1000, true, 4);
  EXPECT_EQ(r.sq.size(), 2u);
  EXPECT_TRUE(r.wr_at(2).signaled);  // sq_sig_all
  EXPECT_EQ(r.wr_at(2).wr_id, 3u);
}

TEST(Requester, complete_send_wrs__in_order_once_every_packet_is_acknowledged) {
  QpEnv env(EngineConfig{});
  Requester r;
  r.sq.resize(4);
  r.post(write(1, 10, true), nullptr, 1000, false, 4);
  r.post(write(2, 10), nullptr, 1000, false, 4);
  r.post(write(3, 10, false, false), nullptr, 1000, false, 4);
  r.sq_send = 3;  // all segmented
  r.wimm_outstanding = 1;
  r.wr_at(1).acked_pkts = 1;
  r.wr_at(2).acked_pkts = 1;
  r.complete_send_wrs(env, 9, us(1));
  EXPECT_TRUE(completions(env).empty());  // the first WR is not acknowledged yet
  r.wr_at(0).acked_pkts = 1;
  r.complete_send_wrs(env, 9, us(2));
  const auto done = completions(env);
  ASSERT_EQ(done.size(), 2u);  // the third is unsignaled
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].opcode, WcOpcode::kWriteImm);
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_EQ(done[1].time, us(2));
  EXPECT_EQ(r.wimm_outstanding, 0u);
  EXPECT_EQ(r.sq_head, 3u);
}

TEST(Requester, flush__the_oldest_wr_gets_the_cause_the_rest_are_flushed) {
  QpEnv env(EngineConfig{});
  Requester r = outstanding(8, 0, 2);
  r.sq.resize(4);
  r.post(write(1, 10), nullptr, 1000, false, 4);
  r.post(write(2, 10), nullptr, 1000, false, 4);
  r.inflight_bytes = 20;
  r.wimm_outstanding = 1;
  r.pacing_wait_until = us(5);
  r.flush(env, 9, us(3), WcStatus::kRetryExceeded);
  const auto done = completions(env);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(done[1].status, WcStatus::kFlushed);
  EXPECT_EQ(r.sq_head, r.sq_tail);
  EXPECT_EQ(r.inflight_bytes, 0u);
  EXPECT_EQ(r.wimm_outstanding, 0u);
  EXPECT_EQ(r.pacing_wait_until, kNever);
}

// An ACK for PSN 3 of a requester that has sent PSNs 0..2 only (its cumulative part, an echo
// or a SACK bit), or that names a path it does not have, is refused whole.
TEST(Requester, validate_ack__refuses_psns_not_sent_and_paths_not_held) {
  const Requester r = outstanding(8, 0, 3);
  wire::SackExt s;
  s.cum_psn = 3;
  s.sack_base = 3;
  EXPECT_TRUE(r.validate_ack(s, 4));
  s.cum_psn = 4;
  EXPECT_EQ(r.validate_ack(s, 4).error(), Error::kBadExtension);
  s.cum_psn = 3;
  s.echo_count = 1;
  s.echo[0] = wire::AckEcho{2, 3, 0};
  EXPECT_TRUE(r.validate_ack(s, 4));
  EXPECT_EQ(r.validate_ack(s, 3).error(), Error::kBadExtension);  // path 3 of 3
  s.echo[0] = wire::AckEcho{3, 0, 0};
  EXPECT_EQ(r.validate_ack(s, 4).error(), Error::kBadExtension);
  s.echo_count = 0;
  s.sack_base = 2;
  s.bitmap[0] = 1u << 1;  // PSN 3
  EXPECT_EQ(r.validate_ack(s, 4).error(), Error::kBadExtension);
}

// The bitmap's PSNs come in order across both words and wrap at 2^24; f's false stops.
TEST(Requester, for_each_sacked_psn__every_set_bit_in_psn_order) {
  wire::SackExt s;
  s.sack_base = kPsnMask - 1;
  s.bitmap[0] = (1ull << 0) | (1ull << 2) | (1ull << 63);
  s.bitmap[1] = 1ull << 5;
  std::vector<uint32_t> seen;
  EXPECT_TRUE(for_each_sacked_psn(s, [&](uint32_t psn) {
    seen.push_back(psn);
    return true;
  }));
  EXPECT_EQ(seen, (std::vector<uint32_t>{kPsnMask - 1, 0, 61, 67}));
  seen.clear();
  EXPECT_FALSE(for_each_sacked_psn(s, [&](uint32_t psn) {
    seen.push_back(psn);
    return seen.size() < 2;
  }));
  EXPECT_EQ(seen.size(), 2u);
  s.bitmap = {};
  EXPECT_TRUE(for_each_sacked_psn(s, [](uint32_t) { return false; }));
}

// PSNs 0..1 were acknowledged (snd_una 2) before PSN 2 was sent; an ACK echoing PSN 2 that
// says PSN 1 is missing cannot be the responder's.
TEST(Requester, contradicts_acknowledged__an_ack_newer_than_snd_una_that_goes_back) {
  Requester r = outstanding(8, 0, 2);
  r.loss = std::make_unique<LossDetector>();
  r.loss->start(16, LossTiming{}, 0);
  r.loss->allocate(16, 2);
  for (uint32_t psn = 0; psn < 2; ++psn)
    r.pkt(psn).rec = r.loss->record(psn, 0, 0);
  r.pkt(0).state = r.pkt(1).state = PktState::kAcked;
  r.advance_una();
  r.loss->mark();
  Requester::TxPkt& p = r.pkt(r.next_psn);
  p.state = PktState::kInflight;
  p.transmissions = 1;
  p.ev = 1;
  p.rec = r.loss->record(r.next_psn, 1, 0);
  r.next_psn = 3;
  wire::SackExt s;
  s.cum_psn = 1;  // PSN 1 missing
  s.echo_count = 1;
  s.echo[0] = wire::AckEcho{2, 1, 0};
  EXPECT_TRUE(r.contradicts_acknowledged(s));
  s.cum_psn = 2;
  EXPECT_FALSE(r.contradicts_acknowledged(s));
  s.cum_psn = 1;
  s.echo[0].ev_index = 0;  // not the latest transmission's path: could be an older copy's
  EXPECT_FALSE(r.contradicts_acknowledged(s));
}

// ---- The protocol, driven through a RequesterContext alone -----------------------------

// An MRC requester at RTS on four paths over two ports, without congestion control, and
// everything its context names.
struct RtsRequester {
  QpEnv env{EngineConfig{}};
  PathSet paths;
  ReversePathSet reverse;
  bool in_ready = false;
  Requester r;
  explicit RtsRequester(QpAttr a = {}) {
    std::vector<PathDesc> d(4);
    for (size_t i = 0; i < d.size(); ++i)
      d[i].port = static_cast<uint8_t>(i % 2);
    paths.init(d, 0, 2, PathPolicy{}, 1);
    CcSpec none;
    none.algorithm = CcAlgorithm::kNone;
    r.to_rts(env, none, 1000, 0, a);
  }
  // Posts a WRITE as the QP does: its rings first (they go once idle).
  void post(const WriteWr& wr) {
    r.ensure_rings(env, paths.size(), true, 16);
    r.post(wr, nullptr, 1000, false, 16);
  }
  RequesterContext context() {
    return RequesterContext{env, paths, reverse, in_ready, PacketAddress{5, 7, 9}, 1, 1000, true};
  }
  // Sends every packet it can at `now`; their PSNs.
  std::vector<uint32_t> send_all(Time now) {
    std::vector<uint32_t> psns;
    TxPacket out;
    while (r.produce_data(context(), now, 0b11, out) == Requester::DataResult::kSent)
      psns.push_back(out.pkt.bth.psn);
    return psns;
  }
  // An ACK whose cumulative PSN is `cum`, echoing `echo` (if any) as arrived on its latest
  // transmission's path.
  RxPacket ack(uint32_t cum, std::optional<uint32_t> echo = {}) {
    RxPacket rx;
    rx.pkt.bth.opcode = wire::Opcode::kAck;
    rx.pkt.sack.cum_psn = rx.pkt.sack.sack_base = cum;
    if (echo) {
      rx.pkt.sack.echo_count = 1;
      rx.pkt.sack.echo[0] = wire::AckEcho{*echo, r.pkt(*echo).ev, 0};
    }
    return rx;
  }
};

TEST(Requester, produce_data__new_psns_in_order_each_on_the_next_path) {
  RtsRequester q;
  q.post(write(1, 3000));
  TxPacket out;
  EXPECT_EQ(q.r.produce_data(q.context(), us(1), 0, out), Requester::DataResult::kPortsBusy);
  std::vector<uint16_t> evs;
  for (uint32_t psn = 0; psn < 3; ++psn) {
    ASSERT_EQ(q.r.produce_data(q.context(), us(1), 0b11, out), Requester::DataResult::kSent);
    EXPECT_EQ(out.pkt.bth.psn, psn);
    EXPECT_EQ(out.pkt.payload_len, 1000u);
    EXPECT_EQ(out.pkt.bth.dest_qp, 9u);
    EXPECT_EQ(out.src_qpn, 5u);
    EXPECT_EQ(out.peer, 7u);
    EXPECT_EQ(out.port, q.paths.port_of(out.ev_index));
    evs.push_back(out.ev_index);
  }
  EXPECT_TRUE(out.pkt.bth.ack_req);  // the message's last packet asks for a prompt ACK
  EXPECT_NE(evs[0], evs[1]);
  EXPECT_NE(evs[1], evs[2]);
  EXPECT_EQ(q.r.produce_data(q.context(), us(1), 0b11, out), Requester::DataResult::kIdle);
  EXPECT_EQ(q.env.counters.data_sent, 3u);
  EXPECT_EQ(q.r.outstanding_psns(), 3u);
}

TEST(Requester, on_ack__acknowledges_completes_and_makes_the_qp_ready) {
  RtsRequester q;
  q.post(write(1, 2000));
  ASSERT_EQ(q.send_all(us(1)).size(), 2u);
  EXPECT_EQ(q.r.on_ack(q.context(), us(5), q.ack(2, 1)), WcStatus::kSuccess);
  EXPECT_EQ(q.r.snd_una, 2u);
  EXPECT_EQ(q.r.inflight_bytes, 0u);
  EXPECT_TRUE(q.in_ready);
  const auto done = completions(q.env);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].status, WcStatus::kSuccess);
  EXPECT_EQ(q.env.counters.acks_advancing, 1u);
}

// PSNs 0..1 acknowledged, then PSN 2 sent: an ACK echoing PSN 2 that says PSN 1 is missing
// contradicts the first. The requester returns what the QP fails with and acknowledges nothing.
TEST(Requester, on_ack__one_contradicting_an_earlier_ack_returns_the_status_to_fail_with) {
  RtsRequester q;
  q.post(write(1, 2000));
  q.send_all(us(1));
  ASSERT_EQ(q.r.on_ack(q.context(), us(5), q.ack(2)), WcStatus::kSuccess);
  q.post(write(2, 1000));
  ASSERT_EQ(q.send_all(us(6)), std::vector<uint32_t>{2});
  EXPECT_EQ(q.r.on_ack(q.context(), us(9), q.ack(1, 2)), WcStatus::kAckContradiction);
  EXPECT_EQ(q.env.counters.ack_contradictions, 1u);
  EXPECT_EQ(q.r.pkt(2).state, PktState::kInflight);
}

// With no retries allowed the first ACK timeout is the last: on_timer returns the status the
// QP fails with. With one retry the packet is declared lost and queued for resending.
TEST(Requester, on_timer__the_ack_timeout_past_its_retries_returns_retry_exceeded) {
  QpAttr a;
  a.timeout = 4;
  a.retry_linear = 1;
  a.retry_exp = 0;
  RtsRequester q(a);
  q.post(write(1, 1000));
  q.send_all(us(1));
  Time due = q.r.loss->rto_due();
  EXPECT_LE(q.r.deadline(q.env, q.paths, true), due);
  EXPECT_EQ(q.r.on_timer(q.context(), due), WcStatus::kSuccess);
  EXPECT_EQ(q.env.counters.timeouts, 1u);
  EXPECT_EQ(q.r.pkt(0).state, PktState::kLost);
  EXPECT_EQ(q.r.retx.size(), 1u);
  due = q.r.loss->rto_due();
  EXPECT_EQ(q.r.on_timer(q.context(), due), WcStatus::kRetryExceeded);
  EXPECT_EQ(q.env.counters.timeouts, 2u);
}

// A port going down: what is in flight on it is resent elsewhere, and no path is blamed.
TEST(Requester, resend_on_port__declares_its_packets_lost_without_marking_paths) {
  RtsRequester q;
  q.post(write(1, 4000));
  ASSERT_EQ(q.send_all(us(1)).size(), 4u);
  q.r.resend_on_port(q.context(), us(2), 1);
  uint32_t lost = 0;
  for (uint32_t psn = 0; psn < 4; ++psn) {
    const bool on_port = q.paths.port_of(q.r.pkt(psn).ev) == 1;
    EXPECT_EQ(q.r.pkt(psn).state, on_port ? PktState::kLost : PktState::kInflight);
    lost += on_port;
  }
  EXPECT_EQ(lost, 2u);
  EXPECT_EQ(q.r.retx.size(), 2u);
  EXPECT_EQ(q.env.counters.ev_state_changes, 0u);
}

}  // namespace
}  // namespace mrc
