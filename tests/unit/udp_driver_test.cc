// The Linux UDP driver on its own (no session): wake() ends a waiting poll early from another
// thread, the ping format is recognised, arrival-ordered delivery keeps time monotonic.
#include "net/udp_driver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "net/ping.h"

namespace mrc::net {
namespace {

struct OneDriver {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<UdpDriver> driver;
};

OneDriver open_loopback(uint8_t ports) {
  OneDriver d;
  EngineConfig ec;
  ec.num_ports = ports;
  d.engine = std::make_unique<Engine>(ec);
  DriverConfig dc;
  for (uint8_t p = 0; p < ports; ++p)
    dc.ports.push_back(PortConfig{*parse_endpoint("::1", 0), ""});
  auto drv = UdpDriver::open(*d.engine, dc);
  EXPECT_TRUE(drv);
  if (drv) d.driver = std::move(*drv);
  return d;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(UdpDriver, WakeFromAnotherThreadEndsAWaitingPoll) {
  OneDriver d = open_loopback(2);
  ASSERT_TRUE(d.driver);
  std::atomic<bool> polling{false};
  std::thread waker([&] {
    while (!polling)
      std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    d.driver->wake();
  });
  const auto start = std::chrono::steady_clock::now();
  polling = true;
  // Nothing to do and no deadline: without the wake-up this poll would sleep 10 s (a
  // first poll may return at once when the wake-up arrives before it waits; loop until seen).
  while (d.driver->stats().wake_calls_seen == 0 && seconds_since(start) < 10)
    ASSERT_TRUE(d.driver->poll(ms(10'000)));
  waker.join();
  EXPECT_EQ(d.driver->stats().wake_calls_seen, 1u);
  EXPECT_LT(seconds_since(start), 5.0);
}

TEST(UdpDriver, WakeBeforePollEndsTheNextPollAndCountsOnce) {
  OneDriver d = open_loopback(1);
  ASSERT_TRUE(d.driver);
  d.driver->wake();
  d.driver->wake();  // coalesced: one eventfd counter
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(d.driver->poll(ms(10'000)));
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(d.driver->stats().wake_calls_seen, 1u);
  // The wake-up is consumed: the next poll waits its full (short) timeout.
  const auto again = std::chrono::steady_clock::now();
  ASSERT_TRUE(d.driver->poll(ms(30)));
  EXPECT_GE(seconds_since(again), 0.025);
  EXPECT_EQ(d.driver->stats().wake_calls_seen, 1u);
}

TEST(UdpDriver, PingIsAnsweredWithThePongMagic) {
  OneDriver a = open_loopback(1), b = open_loopback(1);
  ASSERT_TRUE(a.driver && b.driver);
  const Endpoint eb = b.driver->local(0);
  ASSERT_TRUE(a.driver->set_peer(1, std::span(&eb, 1)));
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop)
      (void)b.driver->poll(ms(5));
  });
  EXPECT_TRUE(a.driver->probe_planes(1, ms(2000)));
  stop = true;
  b.driver->wake();
  t.join();
  EXPECT_GE(b.driver->stats().pings_answered, 1u);
  EXPECT_GE(a.driver->stats().pongs_received, 1u);
}

TEST(Ping, FormatIsRecognisedOnlyAtItsExactSize) {
  uint8_t ping[kPingBytes] = {};
  std::memcpy(ping, kPingMagic, 8);
  EXPECT_TRUE(is_ping(ping, kPingBytes));
  EXPECT_FALSE(is_pong(ping, kPingBytes));
  EXPECT_FALSE(is_ping(ping, kPingBytes - 1));
  std::memcpy(ping, kPongMagic, 8);
  EXPECT_TRUE(is_pong(ping, kPingBytes));
  EXPECT_EQ(kPingBytes, 17u);  // src/api's endpoint probe sends and expects this size
}

}  // namespace
}  // namespace mrc::net
