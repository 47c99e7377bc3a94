#include "net/hello.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace mrc::net {
namespace {

Hello sample() {
  Hello h;
  h.role = HelloRole::kServer;
  h.transport = 0;
  h.ev_mode = 2;
  h.evs_per_plane = 16;
  h.cc = 1;
  h.mtu = 4096;
  h.mpr_dest = 8;
  h.max_wimm_dest = 64;
  h.flags = kHelloVerify | kHelloWriteImm;
  h.rkey = 0x1234;
  h.remote_addr = 0x7f0000001000;
  h.remote_len = 1 << 20;
  h.msg_size = 65536;
  h.slots = 16;
  h.seed = 42;
  for (int p = 0; p < 2; ++p) {
    HelloPlane hp;
    hp.addr = {0xfc, 0xbb, 0xbb, static_cast<uint8_t>(p), 0x40, 0x01};
    hp.udp_port = 4791;
    hp.leaf_usid = 1;
    h.planes.push_back(hp);
  }
  h.qps = {{2, 100}, {3, 0xFFFFFF}};
  return h;
}

TEST(Hello, decode_hello__round_trips_encode_hello) {
  const Hello h = sample();
  auto d = decode_hello(encode_hello(h));
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(*d, h);
}

TEST(Hello, decode_hello__every_truncation_is_rejected) {
  const auto bytes = encode_hello(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto d = decode_hello(std::span(bytes).first(n));
    ASSERT_FALSE(d) << n;
    EXPECT_EQ(d.error().code, NetErrc::kBadHello) << n;
  }
}

TEST(Hello, decode_hello__other_version_is_a_version_mismatch) {
  Hello h = sample();
  h.version = kHelloVersion + 1;
  auto d = decode_hello(encode_hello(h));
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, NetErrc::kVersionMismatch);
  EXPECT_NE(d.error().message.find("version"), std::string::npos);
}

TEST(Hello, decode_hello__every_single_bit_flip_is_rejected_or_harmless) {
  const auto bytes = encode_hello(sample());
  for (size_t i = 0; i < bytes.size() * 8; ++i) {
    auto b = bytes;
    b[i / 8] ^= static_cast<uint8_t>(1u << (i % 8));
    EXPECT_FALSE(decode_hello(b)) << "bit " << i;  // CRC-32 catches every single-bit error
  }
}

TEST(Hello, decode_hello__zero_planes_rejected) {
  Hello h = sample();
  h.planes.clear();
  EXPECT_FALSE(decode_hello(encode_hello(h)));
}

RC_GTEST_PROP(HelloProperty, decode_hello__garbage_never_crashes_and_is_rejected,
              (const std::vector<uint8_t>& junk)) {
  auto d = decode_hello(junk);
  RC_ASSERT(!d);
}

RC_GTEST_PROP(HelloProperty, decode_hello__garbage_after_a_valid_prefix_is_rejected,
              (const std::vector<uint8_t>& junk)) {
  auto bytes = encode_hello(sample());
  const size_t cut = *rc::gen::inRange<size_t>(0, bytes.size());
  bytes.resize(cut);
  bytes.insert(bytes.end(), junk.begin(), junk.end());
  auto d = decode_hello(bytes);
  // Only the exact original can decode; anything else is rejected with a message.
  if (d)
    RC_ASSERT(*d == sample());
  else
    RC_ASSERT(!d.error().message.empty());
}

TEST(Hello, decode_hello__a_refusal_or_a_challenge_is_kRefused_with_the_reason) {
  auto r = decode_hello(encode_refusal("a buffer of 2^60 B\x01 is too large"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, NetErrc::kRefused);
  EXPECT_EQ(r.error().message, "the server refused: a buffer of 2^60 B? is too large");
  std::vector<uint8_t> challenge = {'M', 'R', 'C', 'C'};
  challenge.resize(4 + kChallengeBytes, 7);
  r = decode_hello(challenge);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, NetErrc::kRefused);
  EXPECT_NE(r.error().message.find("--psk"), std::string::npos);
  EXPECT_LE(encode_refusal(std::string(10'000, 'x')).size(), 4 + kRefusalMaxChars);
}

Hello client_sample() {
  Hello h = sample();
  h.role = HelloRole::kClient;
  return h;
}

TEST(Hello, check_client_hello__accepts_a_sane_test) {
  EXPECT_TRUE(check_client_hello(client_sample(), HelloLimits{}));
}

TEST(Hello, check_client_hello__refuses_what_would_allocate_or_overflow) {
  const HelloLimits limits;
  auto refused = [&](Hello h) { return !check_client_hello(h, limits); };
  Hello h = client_sample();
  h.msg_size = 1ull << 60;  // "a hello asking for a 2^60-byte buffer"
  EXPECT_TRUE(refused(h));
  h.msg_size = 1ull << 32;  // msg_size x slots overflows to 0
  h.slots = 1ull << 32;
  EXPECT_TRUE(refused(h));
  h = client_sample();
  h.slots = (1ull << 63) + 1;  // x 2 QPs wraps to a small number
  h.msg_size = 2;
  EXPECT_TRUE(refused(h));
  h = client_sample();
  h.msg_size = 0;
  EXPECT_TRUE(refused(h));
  h = client_sample();
  h.evs_per_plane = 60'000;
  EXPECT_TRUE(refused(h));
  h = client_sample();
  h.ev_mode = 3;
  EXPECT_TRUE(refused(h));
  h = client_sample();
  h.mtu = 100;
  EXPECT_TRUE(refused(h));
  h = client_sample();
  h.role = HelloRole::kServer;
  EXPECT_TRUE(refused(h));
  h = client_sample();
  h.qps.resize(kHelloMaxQps);
  h.evs_per_plane = 256;  // 4096 x 2 x 256 paths
  EXPECT_TRUE(refused(h));
  HelloLimits small;
  small.max_buffer_bytes = 1 << 20;
  EXPECT_FALSE(check_client_hello(client_sample(), small));  // 65536 x 16 x 2 QPs = 2 MiB
}

}  // namespace
}  // namespace mrc::net
