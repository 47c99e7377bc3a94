#include "net/packet_auth.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace mrc::net {
namespace {

DirectionKey key_of(uint8_t fill) {
  DirectionKey k;
  k.key.fill(fill);
  k.salt.fill(static_cast<uint8_t>(fill ^ 0x5a));
  return k;
}

// A transport packet of `len` bytes with room for the trailer behind it.
std::vector<uint8_t> packet(size_t len, uint8_t seed) {
  std::vector<uint8_t> p(len + kAuthTrailerBytes);
  for (size_t i = 0; i < len; ++i)
    p[i] = static_cast<uint8_t>(seed + i * 7);
  return p;
}

TEST(PacketAuth, seal__encrypt_mode_matches_the_gcm_specifications_test_case_2) {
  // McGrew and Viega, "The Galois/Counter Mode of Operation", test case 2: key and IV zero,
  // 16 zero bytes. Our nonce is salt | counter, so a zero salt and the first counter (0) make
  // the all-zero IV.
  PacketSealer s(DirectionKey{}, AuthMode::kEncrypt);
  std::vector<uint8_t> p(16 + kAuthTrailerBytes, 0);
  ASSERT_EQ(s.seal(p.data(), 16), 16 + kAuthTrailerBytes);
  const std::vector<uint8_t> ciphertext = {0x03, 0x88, 0xda, 0xce, 0x60, 0xb6, 0xa3, 0x92,
                                           0xf3, 0x28, 0xc2, 0xb9, 0x71, 0xb2, 0xfe, 0x78};
  const std::vector<uint8_t> tag = {0xab, 0x6e, 0x47, 0xd4, 0x2c, 0xec, 0x13, 0xbd,
                                    0xf5, 0x3a, 0x67, 0xb2, 0x12, 0x57, 0xbd, 0xdf};
  EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.begin() + 16), ciphertext);
  EXPECT_EQ(std::vector<uint8_t>(p.begin() + 16, p.begin() + 24), std::vector<uint8_t>(8, 0));
  EXPECT_EQ(std::vector<uint8_t>(p.begin() + 24, p.end()), tag);
}

TEST(PacketAuth, open__returns_what_was_sealed_in_both_modes) {
  for (AuthMode mode : {AuthMode::kAuthenticate, AuthMode::kEncrypt}) {
    PacketSealer s(key_of(1), mode);
    PacketOpener o(key_of(1), mode);
    for (size_t len : {0, 1, 15, 16, 17, 60, 4096 + 32}) {
      auto p = packet(len, static_cast<uint8_t>(len));
      const auto original = p;
      const size_t sealed = s.seal(p.data(), len);
      ASSERT_EQ(sealed, len + kAuthTrailerBytes);
      if (mode == AuthMode::kAuthenticate) {
        EXPECT_TRUE(
            std::equal(p.begin(), p.begin() + static_cast<ptrdiff_t>(len), original.begin()))
            << "GMAC leaves the packet as it was";
      }
      auto opened = o.open(p.data(), sealed);
      ASSERT_TRUE(opened) << auth_mode_name(mode) << " len " << len << ": "
                          << open_error_name(opened.error());
      EXPECT_EQ(*opened, len);
      EXPECT_TRUE(std::equal(p.begin(), p.begin() + static_cast<ptrdiff_t>(len), original.begin()));
    }
    EXPECT_EQ(s.sealed(), 7u);
  }
}

TEST(PacketAuth, open__any_flipped_bit_is_a_bad_tag_and_the_window_does_not_move) {
  for (AuthMode mode : {AuthMode::kAuthenticate, AuthMode::kEncrypt}) {
    PacketSealer s(key_of(2), mode);
    PacketOpener o(key_of(2), mode);
    auto p = packet(100, 3);
    const size_t sealed = s.seal(p.data(), 100);
    for (size_t bit = 0; bit < sealed * 8; ++bit) {
      auto forged = p;
      forged[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      auto opened = o.open(forged.data(), sealed);
      ASSERT_FALSE(opened) << "bit " << bit;
      EXPECT_EQ(opened.error(), OpenError::kBadTag) << "bit " << bit;
    }
    // None of the forgeries (some with counters far ahead) moved the window: the real one opens.
    auto opened = o.open(p.data(), sealed);
    ASSERT_TRUE(opened) << open_error_name(opened.error());
    EXPECT_EQ(*opened, 100u);
  }
}

TEST(PacketAuth, open__refuses_another_key_a_short_datagram_and_a_replay) {
  PacketSealer s(key_of(3), AuthMode::kAuthenticate);
  auto p = packet(64, 9);
  const size_t sealed = s.seal(p.data(), 64);
  // The other direction's key (a reflected packet) and another mode.
  EXPECT_EQ(PacketOpener(key_of(4), AuthMode::kAuthenticate).open(p.data(), sealed).error(),
            OpenError::kBadTag);
  auto copy = p;
  EXPECT_EQ(PacketOpener(key_of(3), AuthMode::kEncrypt).open(copy.data(), sealed).error(),
            OpenError::kBadTag);
  PacketOpener o(key_of(3), AuthMode::kAuthenticate);
  EXPECT_EQ(o.open(p.data(), kAuthTrailerBytes - 1).error(), OpenError::kShort);
  ASSERT_TRUE(o.open(p.data(), sealed));
  EXPECT_EQ(o.open(p.data(), sealed).error(), OpenError::kReplayed);
}

TEST(PacketAuth, open__accepts_reordering_within_the_window_and_drops_what_is_older) {
  PacketSealer s(key_of(5), AuthMode::kAuthenticate);
  PacketOpener o(key_of(5), AuthMode::kAuthenticate);
  std::vector<std::vector<uint8_t>> sent;
  const size_t n = kReplayWindow + 10;
  for (size_t i = 0; i < n; ++i) {
    sent.push_back(packet(32, static_cast<uint8_t>(i)));
    s.seal(sent.back().data(), 32);
  }
  const size_t len = 32 + kAuthTrailerBytes;
  // Counter 0 first, then the newest: 0 is now kReplayWindow + 9 behind.
  ASSERT_TRUE(o.open(sent[0].data(), len));
  ASSERT_TRUE(o.open(sent[n - 1].data(), len));
  EXPECT_EQ(o.open(sent[1].data(), len).error(), OpenError::kTooOld);
  EXPECT_EQ(o.open(sent[9].data(), len).error(), OpenError::kTooOld);
  // The oldest counter still in the window, and everything after it, in reverse.
  for (size_t i = n - 2; i >= 10; --i)
    ASSERT_TRUE(o.open(sent[i].data(), len)) << "counter " << i;
  EXPECT_EQ(o.open(sent[10].data(), len).error(), OpenError::kReplayed);
}

TEST(ReplayWindow, check__agrees_with_a_set_of_accepted_counters) {
  std::mt19937_64 rng(7);
  ReplayWindow w;
  std::set<uint64_t> accepted;
  uint64_t highest = 0;
  for (int step = 0; step < 200'000; ++step) {
    // Mostly near the front, sometimes far behind or far ahead.
    const uint64_t pick = rng() % 100;
    uint64_t c = highest + rng() % 64;
    if (pick < 20 && highest > 0)
      c = highest - rng() % std::min<uint64_t>(highest, 2 * kReplayWindow);
    if (pick == 99) c = highest + kReplayWindow + rng() % 1000;
    ReplayWindow::Verdict want = ReplayWindow::Verdict::kNew;
    if (!accepted.empty() && c + kReplayWindow <= highest)
      want = ReplayWindow::Verdict::kTooOld;
    else if (accepted.count(c))
      want = ReplayWindow::Verdict::kRepeat;
    ASSERT_EQ(w.check(c), want) << "step " << step << " counter " << c << " highest " << highest;
    if (want == ReplayWindow::Verdict::kNew) {
      w.accept(c);
      accepted.insert(c);
      highest = std::max(highest, c);
    }
  }
}

TEST(PacketAuth, derive_packet_keys__both_ends_agree_and_nothing_else_does) {
  Psk psk;
  psk.key.assign(32, 'k');
  const std::vector<uint8_t> challenge(36, 0x11);
  PskTag tag{};
  tag.fill(0x22);
  auto client = make_key_share();
  auto server = make_key_share();
  ASSERT_TRUE(client && server);
  auto c = derive_packet_keys(psk, challenge, tag, *client, server->pub, HelloRole::kClient);
  auto s = derive_packet_keys(psk, challenge, tag, *server, client->pub, HelloRole::kServer);
  ASSERT_TRUE(c && s);
  EXPECT_EQ(c->send, s->receive);
  EXPECT_EQ(c->receive, s->send);
  EXPECT_NE(c->send, c->receive);
  // Another pre-shared key, challenge or client tag: other keys.
  Psk other = psk;
  other.key[0] ^= 1;
  EXPECT_NE(
      derive_packet_keys(other, challenge, tag, *client, server->pub, HelloRole::kClient)->send,
      c->send);
  auto challenge2 = challenge;
  challenge2[0] ^= 1;
  EXPECT_NE(
      derive_packet_keys(psk, challenge2, tag, *client, server->pub, HelloRole::kClient)->send,
      c->send);
  PskTag tag2 = tag;
  tag2[0] ^= 1;
  EXPECT_NE(
      derive_packet_keys(psk, challenge, tag2, *client, server->pub, HelloRole::kClient)->send,
      c->send);
  // A low-order point (here u = 0) makes an all-zero secret: refused.
  const KeySharePub zero{};
  auto bad = derive_packet_keys(psk, challenge, tag, *client, zero, HelloRole::kClient);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, NetErrc::kRefused);
  EXPECT_FALSE(derive_packet_keys(psk, challenge, tag, *client, std::span(zero).first(31),
                                  HelloRole::kClient));
}

}  // namespace
}  // namespace mrc::net
