// Tests for fi/rdm_endpoint.h: two (or three) endpoints, each over an engine on the in-memory
// fault network (tests/support/fault_net.h), their setup datagrams carried by the test with a
// delay (and, where a test says so, lost). Messages eager and rendezvous, tagged with ignore
// bits, unexpected and in order, truncation, RMA writes with remote CQ data, credits under a
// flood, connection setup with lost datagrams, a peer that never answers, a connection that
// dies (and the first cause it reports), simultaneous connects, cancel, and bad arguments.
#include "fi/rdm_endpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "support/fault_net.h"

namespace mrc::fi {
namespace {

using testnet::FaultNet;
using testnet::HostId;

constexpr Time kSetupDelay = us(20);

class Harness;

// The Io of host `self`: peers are FaultNet hosts, setup datagrams go through the harness.
class TestIo : public RdmEndpoint::Io {
 public:
  TestIo(Harness& h, HostId self) : h_(h), self_(self) {}
  NetResult<uint32_t> bind_peer(const EndpointName& name) override;
  void send_setup(const EndpointName& to, std::span<const uint8_t> datagram) override;

 private:
  Harness& h_;
  HostId self_;
};

EndpointName name_of(HostId h) {
  EndpointName n;
  for (uint8_t p = 0; p < 2; ++p) {
    PlaneAddress a;
    const auto addr = FaultNet::address(h, p);
    std::memcpy(a.addr.data(), addr.data(), 16);
    a.data_port = 4791;
    n.planes.push_back(a);
  }
  n.setup_port = uint16_t(20000 + h);
  return n;
}

RdmConfig test_config() {
  RdmConfig c;
  c.session.driver.ev_mode = ev::FormatMode::kStev;
  c.session.driver.ports.resize(2);
  c.session.random_identifiers = false;
  c.session.mtu = 4096;
  c.session.evs_per_plane = 8;
  c.ring_slots = 16;
  c.slot_bytes = 8192;
  c.connect_retry = ms(2);
  c.connect_timeout = ms(50);
  return c;
}

class Harness {
 public:
  explicit Harness(int hosts, RdmConfig cfg = test_config()) {
    testnet::NetConfig nc;
    nc.seed = 7;
    net_ = std::make_unique<FaultNet>(nc);
    for (int h = 0; h < hosts; ++h) {
      EngineConfig ec;
      ec.num_ports = 2;
      ec.seed = uint64_t(h) + 1;
      net_->add_engine(ec);
      ios_.push_back(std::make_unique<TestIo>(*this, h));
      auto ep = RdmEndpoint::create(net_->engine(h), *ios_.back(), cfg, name_of(h));
      EXPECT_TRUE(ep) << ep.error().message;
      eps_.push_back(std::move(*ep));
    }
    net_->on_completion([this](HostId h, const Completion& c) {
      engine_done_[h].push_back(c);
      eps_[size_t(h)]->on_engine_completion(net_->now(), c);
      collect(h);
    });
    net_->on_event([this](HostId h, const Event& e) {
      eps_[size_t(h)]->on_engine_event(net_->now(), e);
      collect(h);
    });
  }

  FaultNet& net() { return *net_; }
  RdmEndpoint& ep(HostId h) { return *eps_[size_t(h)]; }
  uint32_t peer(HostId from, HostId to) { return *ep(from).insert_peer(name_of(to)); }

  // Setup datagrams: delivered after kSetupDelay unless `drop_setup` says otherwise.
  std::function<bool(HostId from, HostId to, const ConnectMsg&)> drop_setup;
  bool silent(HostId h) const { return silent_.contains(h); }
  void make_silent(HostId h) { silent_.insert(h); }

  void deliver_setup(HostId from, const EndpointName& to, std::vector<uint8_t> bytes) {
    const HostId dst = to.setup_port - 20000;
    auto m = decode_connect(bytes);
    ASSERT_TRUE(m);
    if (silent(dst) || (drop_setup && drop_setup(from, dst, *m))) return;
    net_->schedule(net_->now() + kSetupDelay, [this, dst, bytes](Time now) {
      ep(dst).on_setup_datagram(now, bytes);
      after_input(dst);
    });
  }

  void after_input(HostId h) {
    net_->kick(h);
    collect(h);
    const Time t = ep(h).next_deadline();
    if (t != kNever && !timer_armed_[h]) {
      timer_armed_[h] = true;
      net_->schedule(std::max(t, net_->now()), [this, h](Time now) {
        timer_armed_[h] = false;
        ep(h).on_timer(now);
        after_input(h);
      });
    }
  }

  void collect(HostId h) {
    FiCompletion c;
    while (ep(h).poll_completion(c))
      done_[h].push_back(c);
  }
  std::vector<FiCompletion>& done(HostId h) { return done_[h]; }
  // What host h's engine completed, in the order the endpoint saw it.
  const std::vector<Completion>& engine_done(HostId h) { return engine_done_[h]; }

  // Runs until `n` completions wait at host h (or the time limit).
  bool run_until_done(HostId h, size_t n, Time limit = 5 * kPicosPerSecond) {
    net_->run_until(limit, [&] { return done_[h].size() >= n; });
    return done_[h].size() >= n;
  }

 private:
  std::unique_ptr<FaultNet> net_;
  std::vector<std::unique_ptr<TestIo>> ios_;
  std::vector<std::unique_ptr<RdmEndpoint>> eps_;
  std::map<HostId, std::vector<FiCompletion>> done_;
  std::map<HostId, std::vector<Completion>> engine_done_;
  std::map<HostId, bool> timer_armed_;
  std::set<HostId> silent_;
};

NetResult<uint32_t> TestIo::bind_peer(const EndpointName& name) {
  return uint32_t(name.setup_port - 20000);  // the FaultNet host id
}

void TestIo::send_setup(const EndpointName& to, std::span<const uint8_t> datagram) {
  h_.deliver_setup(self_, to, std::vector<uint8_t>(datagram.begin(), datagram.end()));
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = uint8_t(seed + i * 131 + (i >> 8));
  return v;
}

void* ctx(uintptr_t v) {
  return reinterpret_cast<void*>(v);
}

// Host 0 sends host 1 one 8-byte message (context 1) that a receive posted there (context 9)
// takes: afterwards the connection is up and idle. `v` and `r` are the buffers, `to1` host 0's
// name for host 1.
::testing::AssertionResult one_message_0_to_1(Harness& h, uint32_t to1, uint64_t& v, uint64_t& r) {
  if (!h.ep(1).recv(0, std::nullopt, &r, 8, true, 1, 0, ctx(9)))
    return ::testing::AssertionFailure() << "recv";
  if (!h.ep(0).send(0, to1, &v, 8, true, 1, std::nullopt, ctx(1)))
    return ::testing::AssertionFailure() << "send";
  h.after_input(0);
  if (!h.run_until_done(1, 1)) return ::testing::AssertionFailure() << "host 1 did not receive";
  if (!h.run_until_done(0, 1))
    return ::testing::AssertionFailure() << "host 0's send did not complete";
  return ::testing::AssertionSuccess();
}

TEST(RdmEndpoint, send__eager_and_rendezvous_messages_arrive_whole_and_in_order) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  const std::vector<size_t> sizes = {0, 1, 100, 8192 - kSlotHeaderBytes, 8192, 100'000, 3 << 20};
  std::vector<std::vector<uint8_t>> sent, got;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(pattern(sizes[i], uint8_t(i)));
    got.emplace_back(sizes[i] + 16, 0xEE);
  }
  // Half the receives posted before the sends, half after (unexpected eager and RTS).
  for (size_t i = 0; i < sizes.size() / 2; ++i)
    ASSERT_TRUE(h.ep(1).recv(h.net().now(), std::nullopt, got[i].data(), got[i].size(), true, 7, 0,
                             ctx(100 + i)));
  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_TRUE(h.ep(0).send(h.net().now(), to1, sent[i].data(), sizes[i], true, 7, std::nullopt,
                             ctx(i + 1)));
  h.after_input(0);
  h.after_input(1);
  h.net().run_until(h.net().now() + ms(5));
  for (size_t i = sizes.size() / 2; i < sizes.size(); ++i) {
    ASSERT_TRUE(h.ep(1).recv(h.net().now(), std::nullopt, got[i].data(), got[i].size(), true, 7, 0,
                             ctx(100 + i)));
    h.after_input(1);
  }
  ASSERT_TRUE(h.run_until_done(1, sizes.size()));
  ASSERT_TRUE(h.run_until_done(0, sizes.size()));
  // Same tag, so the matching order is the sending order.
  for (size_t i = 0; i < sizes.size(); ++i) {
    const FiCompletion& c = h.done(1)[i];
    EXPECT_EQ(c.error, OpError::kNone) << op_error_text(c.error);
    EXPECT_EQ(c.kind, OpKind::kRecv);
    const size_t k = size_t(reinterpret_cast<uintptr_t>(c.context)) - 100;
    ASSERT_LT(k, sizes.size());
    EXPECT_EQ(c.len, sizes[k]);
    EXPECT_EQ(c.peer, *h.ep(1).find_peer(name_of(0)));
    EXPECT_TRUE(std::equal(sent[k].begin(), sent[k].end(), got[k].begin())) << "message " << k;
    EXPECT_EQ(got[k][sizes[k]], 0xEE) << "wrote past the message";
  }
  for (const auto& c : h.done(0)) {
    EXPECT_EQ(c.kind, OpKind::kSend);
    EXPECT_EQ(c.error, OpError::kNone);
  }
  EXPECT_EQ(h.ep(0).counters().rndv_sent, 3u);  // 8,192 B and up: over a slot's payload
  EXPECT_GE(h.ep(1).counters().unexpected, 1u);
}

TEST(RdmEndpoint, recv__tags_match_under_the_ignore_mask_and_untagged_stays_apart) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  uint64_t a = 0, b = 0, c = 0;
  const uint64_t va = 0xA, vb = 0xB, vc = 0xC;
  // A receive for tag 0x1200 ignoring the low byte, one for exactly 0x5, one untagged.
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, &a, 8, true, 0x1200, 0xFF, ctx(1)));
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, &b, 8, true, 0x5, 0, ctx(2)));
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, &c, 8, false, 0, 0, ctx(3)));
  ASSERT_TRUE(h.ep(0).send(0, to1, &vc, 8, false, 0x5, std::nullopt, ctx(13)));  // untagged
  ASSERT_TRUE(h.ep(0).send(0, to1, &vb, 8, true, 0x5, 42, ctx(12)));
  ASSERT_TRUE(h.ep(0).send(0, to1, &va, 8, true, 0x12AB, std::nullopt, ctx(11)));
  h.after_input(0);
  h.after_input(1);
  ASSERT_TRUE(h.run_until_done(1, 3));
  EXPECT_EQ(a, va);
  EXPECT_EQ(b, vb);
  EXPECT_EQ(c, vc);
  for (const auto& d : h.done(1)) {
    if (d.context == ctx(1)) {
      EXPECT_EQ(d.tag, 0x12ABu);
    } else if (d.context == ctx(2)) {
      EXPECT_TRUE(d.has_data);
      EXPECT_EQ(d.data, 42u);
    } else {
      EXPECT_FALSE(d.tagged);
    }
  }
}

TEST(RdmEndpoint, recv__a_short_buffer_truncates_eager_and_rendezvous) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  const auto small = pattern(1000, 1), large = pattern(200'000, 2);
  std::vector<uint8_t> r1(100), r2(50'000);
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, r1.data(), r1.size(), true, 1, 0, ctx(1)));
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, r2.data(), r2.size(), true, 2, 0, ctx(2)));
  ASSERT_TRUE(h.ep(0).send(0, to1, small.data(), small.size(), true, 1, std::nullopt, ctx(11)));
  ASSERT_TRUE(h.ep(0).send(0, to1, large.data(), large.size(), true, 2, std::nullopt, ctx(12)));
  h.after_input(0);
  ASSERT_TRUE(h.run_until_done(1, 2));
  ASSERT_TRUE(h.run_until_done(0, 2));
  for (const auto& c : h.done(1)) {
    EXPECT_EQ(c.error, OpError::kTruncated);
    if (c.context == ctx(1)) {
      EXPECT_EQ(c.len, 100u);
      EXPECT_EQ(c.olen, 900u);
      EXPECT_TRUE(std::equal(r1.begin(), r1.end(), small.begin()));
    } else {
      EXPECT_EQ(c.len, 50'000u);
      EXPECT_EQ(c.olen, 150'000u);
      EXPECT_TRUE(std::equal(r2.begin(), r2.end(), large.begin()));
    }
  }
  for (const auto& c : h.done(0))
    EXPECT_EQ(c.error, OpError::kNone);  // the sender's side completed normally
}

// FI_PEEK reports an arrived message and leaves it; FI_CLAIM sets it aside so that only the
// claiming context receives it; FI_DISCARD drops a claimed one (eager or rendezvous) without an
// error, and the sender's operations complete.
TEST(RdmEndpoint, peek__reports_claims_and_discards_arrived_messages) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  const auto small = pattern(1000, 3), large = pattern(100'000, 4), other = pattern(10, 5);
  ASSERT_TRUE(h.ep(0).send(0, to1, small.data(), small.size(), true, 0x51, 7, ctx(11)));
  ASSERT_TRUE(h.ep(0).send(0, to1, large.data(), large.size(), true, 0x52, std::nullopt, ctx(12)));
  ASSERT_TRUE(h.ep(0).send(0, to1, other.data(), other.size(), true, 0x53, std::nullopt, ctx(13)));
  h.after_input(0);
  h.net().run_until(ms(20), [] { return false; });  // all three arrive unexpected

  // Nothing matches tag 0x99; tag 0x51 is there: length, tag and data, no bytes moved.
  ASSERT_TRUE(h.ep(1).peek(std::nullopt, 0x99, 0, ctx(1), false));
  ASSERT_TRUE(h.ep(1).peek(std::nullopt, 0x51, 0, ctx(2), false));
  h.collect(1);
  ASSERT_EQ(h.done(1).size(), 2u);
  EXPECT_EQ(h.done(1)[0].error, OpError::kNoMessage);
  EXPECT_EQ(h.done(1)[1].error, OpError::kNone);
  EXPECT_EQ(h.done(1)[1].len, 1000u);
  EXPECT_EQ(h.done(1)[1].tag, 0x51u);
  EXPECT_TRUE(h.done(1)[1].has_data);
  EXPECT_EQ(h.done(1)[1].data, 7u);

  // Claim 0x51 (under the ignore mask 0xF: any of the three, the first is 0x51); a plain
  // receive for it then takes the next unclaimed one, 0x52.
  ASSERT_TRUE(h.ep(1).peek(std::nullopt, 0x50, 0xF, ctx(3), true));
  std::vector<uint8_t> got(200'000);
  ASSERT_TRUE(
      h.ep(1).recv(h.net().now(), std::nullopt, got.data(), got.size(), true, 0x50, 0xF, ctx(4)));
  h.after_input(1);
  ASSERT_TRUE(h.run_until_done(1, 4));
  EXPECT_EQ(h.done(1)[2].context, ctx(3));
  EXPECT_EQ(h.done(1)[2].tag, 0x51u);
  EXPECT_EQ(h.done(1)[3].context, ctx(4));
  EXPECT_EQ(h.done(1)[3].tag, 0x52u);
  EXPECT_EQ(h.done(1)[3].len, 100'000u);
  EXPECT_TRUE(std::equal(large.begin(), large.end(), got.begin()));

  // Only the claiming context receives the claimed message; a wrong one changes nothing.
  EXPECT_FALSE(h.ep(1).recv_claimed(h.net().now(), ctx(99), got.data(), got.size(), false));
  ASSERT_TRUE(h.ep(1).recv_claimed(h.net().now(), ctx(3), got.data(), got.size(), false));
  h.collect(1);
  ASSERT_EQ(h.done(1).size(), 5u);
  EXPECT_EQ(h.done(1)[4].error, OpError::kNone);
  EXPECT_EQ(h.done(1)[4].len, 1000u);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), got.begin()));

  // Discard: claim 0x53 and drop it, no error; a second claim finds nothing.
  ASSERT_TRUE(h.ep(1).peek(std::nullopt, 0x53, 0, ctx(5), true));
  ASSERT_TRUE(h.ep(1).recv_claimed(h.net().now(), ctx(5), nullptr, 0, true));
  ASSERT_TRUE(h.ep(1).peek(std::nullopt, 0x53, 0, ctx(6), true));
  h.collect(1);
  ASSERT_EQ(h.done(1).size(), 8u);
  EXPECT_EQ(h.done(1)[6].error, OpError::kNone);
  EXPECT_EQ(h.done(1)[6].len, 0u);
  EXPECT_EQ(h.done(1)[7].error, OpError::kNoMessage);
  ASSERT_TRUE(h.run_until_done(0, 3));
  for (const auto& c : h.done(0))
    EXPECT_EQ(c.error, OpError::kNone);
}

// A discarded rendezvous message: the receiver asks for no bytes, the sender completes.
TEST(RdmEndpoint, recv_claimed__discarding_a_rendezvous_message_completes_the_sender) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  const auto large = pattern(300'000, 6);
  ASSERT_TRUE(h.ep(0).send(0, to1, large.data(), large.size(), true, 1, std::nullopt, ctx(11)));
  h.after_input(0);
  h.net().run_until(ms(20), [] { return false; });
  ASSERT_TRUE(h.ep(1).peek(std::nullopt, 1, 0, ctx(1), true));
  ASSERT_TRUE(h.ep(1).recv_claimed(h.net().now(), ctx(1), nullptr, 0, true));
  h.after_input(1);
  ASSERT_TRUE(h.run_until_done(1, 2));
  EXPECT_EQ(h.done(1)[0].len, 300'000u);  // the peek
  EXPECT_EQ(h.done(1)[1].error, OpError::kNone);
  EXPECT_EQ(h.done(1)[1].len, 0u);
  ASSERT_TRUE(h.run_until_done(0, 1));
  EXPECT_EQ(h.done(0)[0].error, OpError::kNone);
}

TEST(RdmEndpoint, write__places_the_data_and_writedata_raises_a_remote_entry_after_it) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  std::vector<uint8_t> target(300'000, 0);
  auto keys = h.ep(1).register_memory(target.data(), target.size(), true);
  ASSERT_TRUE(keys);
  const auto src = pattern(250'000, 9);
  ASSERT_TRUE(h.ep(0).write(0, to1, src.data(), src.size(),
                            reinterpret_cast<uint64_t>(target.data()) + 1000, keys->rkey, 77,
                            ctx(5)));
  h.after_input(0);
  ASSERT_TRUE(h.run_until_done(1, 1));
  ASSERT_TRUE(h.run_until_done(0, 1));
  const FiCompletion& remote = h.done(1)[0];
  EXPECT_EQ(remote.kind, OpKind::kRemoteData);
  EXPECT_EQ(remote.data, 77u);
  // The data was placed before the entry was raised.
  EXPECT_TRUE(std::equal(src.begin(), src.end(), target.begin() + 1000));
  EXPECT_EQ(h.done(0)[0].kind, OpKind::kWrite);
  EXPECT_EQ(h.done(0)[0].error, OpError::kNone);
  // A write to a key the peer never registered kills the connection: an error, no hang.
  ASSERT_TRUE(h.ep(0).write(h.net().now(), to1, src.data(), 100, 0x1000, keys->rkey + 99,
                            std::nullopt, ctx(6)));
  h.after_input(0);
  ASSERT_TRUE(h.run_until_done(0, 2, h.net().now() + 20 * kPicosPerSecond));
  EXPECT_NE(h.done(0)[1].error, OpError::kNone);
  // The responder drops such a WRITE without an answer (the engine has no NAK for it), so the
  // requester's first cause is the retry budget running out.
  EXPECT_EQ(h.done(0)[1].cause, FailureCause::kRetryExceeded);
  EXPECT_GT(h.net().engine(1).counters().drops[int(DropReason::kBadRkey)], 0u);
}

TEST(RdmEndpoint, send__a_flood_without_receives_waits_for_credits_and_loses_nothing) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  constexpr int kMessages = 200;  // 12 rings' worth
  std::vector<uint32_t> values(kMessages);
  std::iota(values.begin(), values.end(), 1000);
  for (int i = 0; i < kMessages; ++i)
    ASSERT_TRUE(h.ep(0).send(h.net().now(), to1, &values[size_t(i)], 4, true, 3, std::nullopt,
                             ctx(uintptr_t(i + 1))));
  h.after_input(0);
  ASSERT_TRUE(h.run_until_done(0, kMessages));
  EXPECT_EQ(h.ep(1).counters().unexpected, uint64_t(kMessages));
  std::vector<uint32_t> got(kMessages);
  for (int i = 0; i < kMessages; ++i)
    ASSERT_TRUE(h.ep(1).recv(h.net().now(), std::nullopt, &got[size_t(i)], 4, true, 3, 0, ctx(1)));
  h.collect(1);
  EXPECT_EQ(got, values);  // in sending order
  EXPECT_GT(h.ep(1).counters().credit_messages + h.ep(0).counters().credit_messages, 0u);
}

TEST(RdmEndpoint, connect__lost_setup_datagrams_are_repeated_and_simultaneous_connects_meet) {
  Harness h(2);
  int dropped = 0;
  h.drop_setup = [&](HostId, HostId, const ConnectMsg&) { return dropped++ < 3; };
  const uint32_t to1 = h.peer(0, 1), to0 = h.peer(1, 0);
  uint64_t x = 1, y = 2, rx = 0, ry = 0;
  ASSERT_TRUE(h.ep(0).send(0, to1, &x, 8, true, 1, std::nullopt, ctx(1)));
  ASSERT_TRUE(h.ep(1).send(0, to0, &y, 8, true, 1, std::nullopt, ctx(2)));
  ASSERT_TRUE(h.ep(0).recv(0, std::nullopt, &ry, 8, true, 1, 0, ctx(3)));
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, &rx, 8, true, 1, 0, ctx(4)));
  h.after_input(0);
  h.after_input(1);
  ASSERT_TRUE(h.run_until_done(0, 2));
  ASSERT_TRUE(h.run_until_done(1, 2));
  EXPECT_EQ(rx, 1u);
  EXPECT_EQ(ry, 2u);
  EXPECT_GE(dropped, 5);  // 3 lost, then requests, accepts and confirms got through
  EXPECT_EQ(h.net().engine(0).counters().timeouts, 0u);
}

TEST(RdmEndpoint, connect__a_peer_that_never_answers_fails_its_operations) {
  Harness h(3);
  h.make_silent(2);
  const uint32_t to2 = h.peer(0, 2);
  uint64_t v = 0;
  ASSERT_TRUE(h.ep(0).send(0, to2, &v, 8, true, 1, std::nullopt, ctx(1)));
  ASSERT_TRUE(h.ep(0).recv(0, to2, &v, 8, true, 1, 0, ctx(2)));
  h.after_input(0);
  ASSERT_TRUE(h.run_until_done(0, 2));
  for (const auto& c : h.done(0))
    EXPECT_EQ(c.error, OpError::kUnreachable);
  // Operations after the failure complete at once with the same error.
  ASSERT_TRUE(h.ep(0).send(h.net().now(), to2, &v, 8, true, 1, std::nullopt, ctx(3)));
  h.collect(0);
  ASSERT_EQ(h.done(0).size(), 3u);
  EXPECT_EQ(h.done(0)[2].error, OpError::kUnreachable);
}

TEST(RdmEndpoint, send__a_connection_that_dies_completes_everything_with_an_error) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  uint64_t v = 5, r = 0;
  ASSERT_TRUE(one_message_0_to_1(h, to1, v, r));
  // Every port of host 1 goes down for good: the next messages can never be acknowledged.
  for (uint8_t p = 0; p < 2; ++p)
    h.net().add_port_fault({1, p, h.net().now(), kNever});
  const auto big = pattern(100'000, 3);
  ASSERT_TRUE(h.ep(0).send(h.net().now(), to1, &v, 8, true, 1, std::nullopt, ctx(2)));
  ASSERT_TRUE(
      h.ep(0).send(h.net().now(), to1, big.data(), big.size(), true, 1, std::nullopt, ctx(3)));
  h.after_input(0);
  ASSERT_TRUE(h.run_until_done(0, 3, h.net().now() + 600 * kPicosPerSecond));
  EXPECT_EQ(h.done(0)[0].error, OpError::kNone);
  for (size_t i = 1; i < 3; ++i)
    EXPECT_EQ(h.done(0)[i].error, OpError::kPeerFailed) << i;
}

// A peer that stops answering (every packet it sends is lost, so its ACKs never come back):
// the retry budget runs out on the eager send's WRITE_IMM, and the engine then flushes the
// QP's receives. The connection reports the first error, once, with the operation, status,
// peer and the engine's view of the QP; the operations it fails carry that cause; the flushed
// receives after it, and one more fed by hand, change nothing.
TEST(RdmEndpoint, failure__the_first_error_is_the_cause_and_flushes_after_it_do_not_replace_it) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  uint64_t v = 5, r = 0, never = 0;
  ASSERT_TRUE(one_message_0_to_1(h, to1, v, r));
  EXPECT_EQ(h.ep(0).failure(to1), nullptr);
  PeerFailure f;
  EXPECT_FALSE(h.ep(0).poll_failure(f));

  // From now on nothing host 1 sends arrives; a receive from it waits at host 0.
  testnet::PathFault silence;
  silence.match.from_host = 1;
  silence.from = h.net().now();
  silence.blackhole = true;
  h.net().add_path_fault(silence);
  ASSERT_TRUE(h.ep(0).recv(h.net().now(), to1, &never, 8, true, 2, 0, ctx(3)));
  ASSERT_TRUE(h.ep(0).send(h.net().now(), to1, &v, 8, true, 1, std::nullopt, ctx(2)));
  h.after_input(0);
  ASSERT_TRUE(h.run_until_done(0, 3, h.net().now() + 600 * kPicosPerSecond));

  // The engine's order: the send WR with the cause, then the flushed receives.
  const auto& ec = h.engine_done(0);
  const auto first_error = std::find_if(
      ec.begin(), ec.end(), [](const Completion& c) { return c.status != WcStatus::kSuccess; });
  ASSERT_NE(first_error, ec.end());
  EXPECT_EQ(first_error->status, WcStatus::kRetryExceeded);
  EXPECT_NE(first_error->opcode, WcOpcode::kRecvImm);
  const bool flushed_recv_after = std::any_of(first_error + 1, ec.end(), [](const Completion& c) {
    return c.opcode == WcOpcode::kRecvImm && c.status == WcStatus::kFlushed;
  });
  EXPECT_TRUE(flushed_recv_after);

  const PeerFailure* pf = h.ep(0).failure(to1);
  ASSERT_NE(pf, nullptr);
  EXPECT_EQ(pf->peer, to1);
  EXPECT_EQ(pf->error, OpError::kPeerFailed);
  EXPECT_EQ(pf->cause, FailureCause::kRetryExceeded);
  const std::string text = pf->text;
  for (const std::string& part :
       {"peer " + std::to_string(to1) + " (mrc:[", std::string("WRITE_IMM (eager message"),
        std::string("failed: retry exceeded"), std::string(" in ERR"), std::string("retries")})
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in: " << text;
  EXPECT_EQ(text.find("flushed"), std::string::npos) << text;

  // Once, with that text.
  ASSERT_TRUE(h.ep(0).poll_failure(f));
  EXPECT_EQ(f.text, text);
  EXPECT_EQ(f.cause, FailureCause::kRetryExceeded);
  EXPECT_FALSE(h.ep(0).poll_failure(f));

  // The send and the directed receive fail with the connection's first cause.
  for (size_t i = 1; i < 3; ++i) {
    const FiCompletion& c = h.done(0)[i];
    EXPECT_EQ(c.error, OpError::kPeerFailed) << i;
    EXPECT_EQ(c.cause, FailureCause::kRetryExceeded) << i;
    EXPECT_EQ(c.peer, to1) << i;
  }

  // One more flushed receive on the same QP, and the QP's error event again: nothing changes.
  Completion flushed;
  flushed.qpn = first_error->qpn;
  flushed.status = WcStatus::kFlushed;
  flushed.opcode = WcOpcode::kRecvImm;
  h.ep(0).on_engine_completion(h.net().now(), flushed);
  Event qp_error;
  qp_error.type = EventType::kQpError;
  qp_error.qpn = first_error->qpn;
  h.ep(0).on_engine_event(h.net().now(), qp_error);
  EXPECT_EQ(h.ep(0).failure(to1)->text, text);
  EXPECT_EQ(h.ep(0).failure(to1)->cause, FailureCause::kRetryExceeded);
  EXPECT_FALSE(h.ep(0).poll_failure(f));
  EXPECT_EQ(h.ep(0).counters().peers_failed, 1u);

  // Later operations complete at once, with the same cause.
  ASSERT_TRUE(h.ep(0).send(h.net().now(), to1, &v, 8, true, 1, std::nullopt, ctx(4)));
  h.collect(0);
  ASSERT_EQ(h.done(0).size(), 4u);
  EXPECT_EQ(h.done(0)[3].cause, FailureCause::kRetryExceeded);
}

// A QP the engine moves to ERR with nothing outstanding to complete says so through its event.
TEST(RdmEndpoint, failure__a_qp_error_event_without_completions_fails_the_peer) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  uint64_t v = 5, r = 0;
  ASSERT_TRUE(one_message_0_to_1(h, to1, v, r));
  ASSERT_FALSE(h.engine_done(0).empty());
  Event qp_error;
  qp_error.type = EventType::kQpError;
  qp_error.qpn = h.engine_done(0).front().qpn;
  h.ep(0).on_engine_event(h.net().now(), qp_error);
  const PeerFailure* pf = h.ep(0).failure(to1);
  ASSERT_NE(pf, nullptr);
  EXPECT_EQ(pf->cause, FailureCause::kQpError);
  EXPECT_NE(pf->text.find("moved its QP to ERR"), std::string::npos) << pf->text;
  // Events of other kinds and of unknown QPs change nothing.
  Event other;
  other.type = EventType::kEvStateChange;
  other.qpn = qp_error.qpn;
  h.ep(1).on_engine_event(h.net().now(), other);
  qp_error.qpn = 0x7FFFFF;
  h.ep(1).on_engine_event(h.net().now(), qp_error);
  EXPECT_EQ(h.ep(1).counters().peers_failed, 0u);
}

// The ACKs of a rendezvous message's data are lost for a while (from just after the receiver
// sends its CTS). The receiver deregisters its buffer when the FIN arrives; its engine drops
// a resent data packet for a key it no longer has without acknowledging it, so a FIN that
// went out before the data was acknowledged would leave the sender resending into a dead key
// until its retry budget ran out. The FIN follows the data's acknowledgement instead, and the
// send completes with the FIN's: both operations complete, the data intact, and no packet
// meets a dead key.
TEST(RdmEndpoint, rendezvous__lost_data_acks_do_not_strand_the_sender_on_a_deregistered_buffer) {
  Harness h(2);
  const uint32_t to1 = h.peer(0, 1);
  const auto big = pattern(100'000, 11);
  std::vector<uint8_t> got(big.size());
  Time cts_sent = kNever;
  h.net().set_tap([&](const testnet::TapRecord& t) {
    if (t.point == testnet::TapPoint::kSend && t.from_host == 1 &&
        t.kind == testnet::PacketKind::kData && cts_sent == kNever)
      cts_sent = t.time;  // host 1's first data packet: the CTS
  });
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, got.data(), got.size(), true, 4, 0, ctx(9)));
  ASSERT_TRUE(h.ep(0).send(0, to1, big.data(), big.size(), true, 4, std::nullopt, ctx(1)));
  h.after_input(0);
  h.net().run_until(ms(100), [&] { return cts_sent != kNever; });
  ASSERT_NE(cts_sent, kNever);
  // The RTS's ACK left with the CTS; the data's ACKs leave a one-way delay later at least.
  testnet::PathFault lose_acks;
  lose_acks.match.from_host = 1;
  lose_acks.match.kind = testnet::PacketKind::kAck;
  lose_acks.from = cts_sent + us(1);
  lose_acks.until = cts_sent + ms(40);
  lose_acks.blackhole = true;
  h.net().add_path_fault(lose_acks);
  ASSERT_TRUE(h.run_until_done(0, 1, h.net().now() + 30 * kPicosPerSecond));
  // The send completes with its FIN, which the receiver had by then: a sender that stops
  // driving its endpoint after the completion leaves nothing undelivered.
  ASSERT_EQ(h.done(1).size(), 1u);
  EXPECT_EQ(h.done(1)[0].error, OpError::kNone) << op_error_text(h.done(1)[0].error);
  EXPECT_EQ(h.done(1)[0].len, big.size());
  EXPECT_EQ(got, big);
  EXPECT_EQ(h.done(0)[0].error, OpError::kNone) << op_error_text(h.done(0)[0].error);
  EXPECT_EQ(h.ep(0).failure(to1), nullptr) << h.ep(0).failure(to1)->text;
  EXPECT_GT(h.net().counters().dropped_blackhole, 0u);  // the fault did take ACKs
  EXPECT_EQ(h.net().engine(1).counters().drops[int(DropReason::kBadRkey)], 0u);
}

TEST(RdmEndpoint, cancel__a_posted_receive_completes_canceled_and_bad_arguments_change_nothing) {
  Harness h(2);
  uint64_t v = 0;
  ASSERT_TRUE(h.ep(1).recv(0, std::nullopt, &v, 8, true, 1, 0, ctx(1)));
  EXPECT_TRUE(h.ep(1).cancel(ctx(1)));
  EXPECT_FALSE(h.ep(1).cancel(ctx(1)));
  h.collect(1);
  ASSERT_EQ(h.done(1).size(), 1u);
  EXPECT_EQ(h.done(1)[0].error, OpError::kCanceled);
  EXPECT_FALSE(h.ep(0).send(0, 99, &v, 8, true, 1, std::nullopt, ctx(2)));  // no such peer
  EXPECT_FALSE(h.ep(0).send(0, h.peer(0, 1), nullptr, 8, true, 1, std::nullopt, ctx(2)));
  EXPECT_FALSE(h.ep(0).recv(0, 42, &v, 8, true, 1, 0, ctx(3)));
  EXPECT_FALSE(h.ep(0).insert_peer(EndpointName{}));  // no planes
  h.collect(0);
  EXPECT_TRUE(h.done(0).empty());
  EXPECT_EQ(h.net().engine(0).counters().data_sent, 0u);
}

TEST(RdmEndpoint, on_setup_datagram__garbage_and_strangers_leave_no_state) {
  Harness h(2);
  h.ep(0).on_setup_datagram(0, std::vector<uint8_t>{1, 2, 3});
  EXPECT_EQ(h.ep(0).counters().setup_bad, 1u);
  // An accept nobody asked for.
  ConnectMsg m;
  m.kind = ConnectKind::kAccept;
  m.from = name_of(1);
  m.leaf_usids.resize(2);
  m.qpn = 5;
  m.mpr_dest = 8;
  m.mtu = 4096;
  m.ring_slots = 4;
  m.slot_bytes = 4096;
  h.ep(0).on_setup_datagram(0, encode_connect(m));
  EXPECT_EQ(h.ep(0).counters().setup_bad, 2u);
  EXPECT_FALSE(h.ep(0).find_peer(name_of(1)));
  // A request with another MTU: refused, nothing kept.
  m.kind = ConnectKind::kRequest;
  m.mtu = 1024;
  h.ep(0).on_setup_datagram(0, encode_connect(m));
  EXPECT_EQ(h.ep(0).counters().setup_rejected, 1u);
  EXPECT_FALSE(h.ep(0).find_peer(name_of(1)));
}

}  // namespace
}  // namespace mrc::fi
