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

TEST(Hello, RoundTrips) {
  const Hello h = sample();
  auto d = decode_hello(encode_hello(h));
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(*d, h);
}

TEST(Hello, EveryTruncationIsRejected) {
  const auto bytes = encode_hello(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto d = decode_hello(std::span(bytes).first(n));
    ASSERT_FALSE(d) << n;
    EXPECT_EQ(d.error().code, NetErrc::kBadHello) << n;
  }
}

TEST(Hello, OtherVersionIsAVersionMismatch) {
  Hello h = sample();
  h.version = kHelloVersion + 1;
  auto d = decode_hello(encode_hello(h));
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, NetErrc::kVersionMismatch);
  EXPECT_NE(d.error().message.find("version"), std::string::npos);
}

TEST(Hello, EverySingleBitFlipIsRejectedOrHarmless) {
  const auto bytes = encode_hello(sample());
  for (size_t i = 0; i < bytes.size() * 8; ++i) {
    auto b = bytes;
    b[i / 8] ^= static_cast<uint8_t>(1u << (i % 8));
    EXPECT_FALSE(decode_hello(b)) << "bit " << i;  // CRC-32 catches every single-bit error
  }
}

TEST(Hello, ZeroPlanesRejected) {
  Hello h = sample();
  h.planes.clear();
  EXPECT_FALSE(decode_hello(encode_hello(h)));
}

RC_GTEST_PROP(HelloProperty, GarbageNeverCrashesAndIsRejected, (const std::vector<uint8_t>& junk)) {
  auto d = decode_hello(junk);
  RC_ASSERT(!d);
}

RC_GTEST_PROP(HelloProperty, GarbageAfterAValidPrefixIsRejected,
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

}  // namespace
}  // namespace mrc::net
