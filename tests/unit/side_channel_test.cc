#include "net/side_channel.h"

#include <gtest/gtest.h>

#include <thread>

namespace mrc::net {
namespace {

TEST(SideChannel, RefusedWhenNobodyListens) {
  // Bind and close a listener to get a port nobody listens on.
  uint16_t port;
  {
    auto l = SideListener::listen(0);
    ASSERT_TRUE(l);
    port = l->port();
  }
  auto c = SideChannel::connect("::1", port, 200);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, NetErrc::kRefused);
  EXPECT_NE(c.error().message.find("server running"), std::string::npos);
}

TEST(SideChannel, AcceptTimesOut) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  auto c = l->accept(50);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, NetErrc::kTimeout);
}

TEST(SideChannel, ExchangesFramesAndReportsClose) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  std::thread server([&] {
    auto s = l->accept(2000);
    ASSERT_TRUE(s);
    auto f = s->recv_frame(2000);
    ASSERT_TRUE(f);
    ASSERT_TRUE(s->send_frame(*f));  // echo, then close
  });
  auto c = SideChannel::connect("::1", l->port(), 2000);
  ASSERT_TRUE(c) << c.error().message;
  const std::vector<uint8_t> msg = {1, 2, 3, 4, 5};
  ASSERT_TRUE(c->send_frame(msg));
  auto back = c->recv_frame(2000);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, msg);
  server.join();
  auto closed = c->recv_frame(2000);
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code, NetErrc::kPeerClosed);
}

TEST(SideChannel, RecvTimesOut) {
  auto l = SideListener::listen(0);
  ASSERT_TRUE(l);
  auto c = SideChannel::connect("::1", l->port(), 2000);
  ASSERT_TRUE(c);
  auto s = l->accept(2000);
  ASSERT_TRUE(s);
  auto f = c->recv_frame(30);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, NetErrc::kTimeout);
}

}  // namespace
}  // namespace mrc::net
