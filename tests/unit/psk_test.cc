// The side channel's shared secret (src/net/psk.h).
#include "net/psk.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "net/hello.h"

namespace mrc::net {
namespace {

std::string write_secret(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = ::testing::TempDir() + "psk_test_" + std::to_string(::getpid()) + name;
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(Psk, load_psk__needs_a_private_file_of_16_bytes_or_more) {
  auto ok = load_psk(write_secret("ok", "0123456789abcdef\n", 0600));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->key.size(), 16u);  // the newline is not part of it
  auto shared = load_psk(write_secret("shared", "0123456789abcdef", 0644));
  ASSERT_FALSE(shared);
  EXPECT_NE(shared.error().message.find("chmod 600"), std::string::npos);
  EXPECT_FALSE(load_psk(write_secret("short", "short", 0600)));
  EXPECT_FALSE(load_psk("/nonexistent/psk"));
}

TEST(Psk, psk_tag__is_hmac_sha256) {
  // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
  Psk p;
  p.key = {'J', 'e', 'f', 'e'};
  const std::string data = "what do ya want for nothing?";
  const auto tag =
      psk_tag(p, {std::span(reinterpret_cast<const uint8_t*>(data.data()), 10),
                  std::span(reinterpret_cast<const uint8_t*>(data.data()) + 10, data.size() - 10)});
  const uint8_t want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                          0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                          0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_TRUE(psk_tag_equal(want, tag));
  EXPECT_FALSE(psk_tag_equal(std::span(want).first(31), tag));
}

TEST(Psk, exchange__matching_secrets_pass_and_any_difference_is_refused) {
  Psk a, b;
  a.key.assign(32, 'a');
  b.key.assign(32, 'b');
  auto challenge = make_challenge();
  ASSERT_TRUE(challenge);
  const std::vector<uint8_t> hello = {1, 2, 3, 4, 5};
  KeySharePub cshare{}, sshare{};
  cshare.fill(0xc1);
  sshare.fill(0x5e);
  PskTag ctag{}, stag_seen{};
  auto signed_hello = sign_client_hello(a, *challenge, hello, cshare, ctag);
  ASSERT_TRUE(signed_hello);
  auto opened = open_client_hello(a, *challenge, *signed_hello, stag_seen);
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_EQ(opened->hello, hello);
  EXPECT_EQ(opened->key_share, cshare);
  EXPECT_EQ(stag_seen, ctag);
  // Another key, another challenge (a replay), a changed byte (of the hello, of the key share),
  // no tag at all.
  EXPECT_EQ(open_client_hello(b, *challenge, *signed_hello, stag_seen).error().code,
            NetErrc::kRefused);
  auto other = make_challenge();
  EXPECT_FALSE(open_client_hello(a, *other, *signed_hello, stag_seen));
  auto changed = *signed_hello;
  changed[0] ^= 1;
  EXPECT_FALSE(open_client_hello(a, *challenge, changed, stag_seen));
  changed = *signed_hello;
  changed[hello.size()] ^= 1;
  EXPECT_FALSE(open_client_hello(a, *challenge, changed, stag_seen));
  EXPECT_FALSE(open_client_hello(a, *challenge, std::vector<uint8_t>(10, 0), stag_seen));
  // The server's answer is bound to the client's tag.
  const std::vector<uint8_t> server_hello = {9, 8, 7};
  auto answer = sign_server_hello(a, *challenge, ctag, server_hello, sshare);
  auto back = open_server_hello(a, *challenge, ctag, answer);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->hello, server_hello);
  EXPECT_EQ(back->key_share, sshare);
  PskTag other_tag = ctag;
  other_tag[0] ^= 1;
  EXPECT_FALSE(open_server_hello(a, *challenge, other_tag, answer));
  // A client that gets something else than a challenge says so.
  EXPECT_EQ(sign_client_hello(a, hello, hello, cshare, ctag).error().code, NetErrc::kRefused);
}

}  // namespace
}  // namespace mrc::net
