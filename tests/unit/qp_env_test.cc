#include "transport/qp_env.h"

#include <gtest/gtest.h>

#include "transport/event_log.h"

namespace mrc {
namespace {

struct CountingLog : EventLog {
  int records = 0;
  void record(const LogRecord&) override { ++records; }
};

TEST(QpEnv, QpEnv__clamps_the_configuration_and_starts_with_every_port_up) {
  EngineConfig c;
  c.num_ports = 40;
  c.ack_every = 0;
  QpEnv env(c);
  EXPECT_EQ(env.config.num_ports, 32);
  EXPECT_EQ(env.config.ack_every, 1u);
  EXPECT_EQ(env.port_up_mask, ~0u);
  c.num_ports = 4;
  c.ack_every = 100;
  QpEnv four(c);
  EXPECT_EQ(four.port_up_mask, 0xFu);
  EXPECT_EQ(four.config.ack_every, static_cast<uint32_t>(wire::kMaxAckEchoes));
}

TEST(QpEnv, mark_ready__queues_a_qp_once_until_its_flag_is_cleared) {
  QpEnv env(EngineConfig{});
  bool queued = false;
  env.mark_ready(queued, 7);
  env.mark_ready(queued, 7);
  EXPECT_TRUE(queued);
  ASSERT_EQ(env.ready_ring.size(), 1u);
  EXPECT_EQ(env.ready_ring.front(), 7u);
  EXPECT_TRUE(env.control_ring.empty());
  queued = false;  // the engine took it off the ring
  env.mark_ready(queued, 7);
  EXPECT_EQ(env.ready_ring.size(), 2u);
}

TEST(QpEnv, mark_control__queues_a_qp_once) {
  QpEnv env(EngineConfig{});
  bool queued = false;
  env.mark_control(queued, 3);
  env.mark_control(queued, 3);
  ASSERT_EQ(env.control_ring.size(), 1u);
  EXPECT_EQ(env.control_ring.front(), 3u);
  EXPECT_TRUE(env.ready_ring.empty());
}

TEST(QpEnv, rearm__adds_a_timer_only_for_an_earlier_deadline) {
  QpEnv env(EngineConfig{});
  Time armed = kNever;
  env.rearm(armed, 5, us(10));
  EXPECT_EQ(armed, us(10));
  env.rearm(armed, 5, us(20));  // later: the armed entry fires first and re-arms then
  EXPECT_EQ(armed, us(10));
  env.rearm(armed, 5, us(4));
  EXPECT_EQ(armed, us(4));
  ASSERT_EQ(env.timers.size(), 2u);
  EXPECT_EQ(env.timers.front().at, us(4));  // a min-heap
  EXPECT_EQ(env.timers.front().qpn, 5u);
}

TEST(QpEnv, emit_completion__counts_errors_and_drops_beyond_capacity) {
  EngineConfig c;
  c.completion_capacity = 2;
  QpEnv env(c);
  env.emit_completion(Completion{1, 2, WcStatus::kSuccess});
  env.emit_completion(Completion{2, 2, WcStatus::kFlushed});
  env.emit_completion(Completion{3, 2, WcStatus::kSuccess});
  EXPECT_EQ(env.counters.completions, 3u);
  EXPECT_EQ(env.counters.completion_errors, 1u);
  EXPECT_EQ(env.counters.completions_dropped, 1u);
  ASSERT_EQ(env.completions.size(), 2u);
  EXPECT_EQ(env.completions.front().wr_id, 1u);
}

TEST(QpEnv, emit_event__queues_logs_and_counts_drops) {
  EngineConfig c;
  c.event_capacity = 1;
  QpEnv env(c);
  CountingLog log;
  env.log = &log;
  EXPECT_TRUE(env.logging());
  Event e;
  e.type = EventType::kQpError;
  e.qpn = 9;
  env.emit_event(e);
  env.emit_event(e);
  EXPECT_EQ(env.events.size(), 1u);
  EXPECT_EQ(env.counters.events_dropped, 1u);
  EXPECT_EQ(log.records, 2);  // the log sees what the queue could not hold
}

TEST(QpEnv, ports_down_bitmap__names_the_ports_out_of_use) {
  EngineConfig c;
  c.num_ports = 4;
  QpEnv env(c);
  EXPECT_EQ(env.ports_down_bitmap(), 0u);
  env.port_up_mask &= ~(1u << 2);
  EXPECT_EQ(env.ports_down_bitmap(), 1u << 2);
}

TEST(QpEnv, borrowed_rtt__shared_samples_then_fabric_rtt_then_nothing) {
  EngineConfig c;
  QpEnv none(c);
  EXPECT_EQ(none.borrowed_rtt().srtt, 0);
  c.fabric_rtt = us(8);
  QpEnv env(c);
  EXPECT_EQ(env.borrowed_rtt().srtt, us(8));
  EXPECT_EQ(env.borrowed_rtt().rttvar, us(4));
  env.note_rtt_sample(us(2));
  EXPECT_EQ(env.borrowed_rtt().srtt, us(2));
  EXPECT_EQ(env.borrowed_rtt().min_rtt, us(2));
  env.note_rtt_sample(us(10));  // RFC 6298 smoothing: 7/8 old + 1/8 new
  EXPECT_EQ(env.borrowed_rtt().srtt, us(3));
  c.share_rtt = false;
  QpEnv own(c);
  own.note_rtt_sample(us(2));
  EXPECT_EQ(own.borrowed_rtt().srtt, us(8));
}

TEST(QpEnv, take_probe_token__spends_the_burst_then_refills_one_per_interval) {
  EngineConfig c;
  c.probe_budget_burst = 2;
  c.probe_budget_interval = ns(500);
  QpEnv env(c);
  EXPECT_TRUE(env.take_probe_token(0));
  EXPECT_TRUE(env.take_probe_token(0));
  EXPECT_FALSE(env.take_probe_token(0));
  EXPECT_EQ(env.next_probe_token(), ns(500));
  EXPECT_FALSE(env.take_probe_token(ns(499)));
  EXPECT_TRUE(env.take_probe_token(ns(500)));
  env.refund_probe_token();
  EXPECT_TRUE(env.take_probe_token(ns(500)));
  EXPECT_FALSE(env.take_probe_token(ns(500)));
}

TEST(QpEnv, take_probe_token__is_unlimited_without_an_interval) {
  EngineConfig c;
  c.probe_budget_burst = 1;
  c.probe_budget_interval = 0;
  QpEnv env(c);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(env.take_probe_token(0));
}

TEST(QpEnv, reverse_probe_interval__configured_else_twice_the_rtt_else_50_us) {
  EngineConfig c;
  QpEnv unknown(c);
  EXPECT_EQ(unknown.reverse_probe_interval(), us(50));
  c.fabric_rtt = ns(500);
  QpEnv small(c);
  EXPECT_EQ(small.reverse_probe_interval(), us(2));  // at least 2 us
  c.fabric_rtt = us(6);
  QpEnv rtt(c);
  EXPECT_EQ(rtt.reverse_probe_interval(), us(12));
  c.reverse_probe_interval = us(7);
  QpEnv set(c);
  EXPECT_EQ(set.reverse_probe_interval(), us(7));
}

}  // namespace
}  // namespace mrc
