// The side channel's optional shared secret (mrc-perf --psk FILE): HMAC-SHA256 over the
// hellos, bound to a per-connection challenge, for networks that are not closed.
//
// Exchange (docs/linux-driver.md, "Security"): the server greets each connection with a
// challenge (hello.h, kChallengeMagic and 32 bytes from the CSPRNG); the client sends its hello
// and an ephemeral X25519 public key (its key share, net/packet_auth.h) followed by
// client_tag = HMAC(key, "mrc client" | challenge | hello | key share); the server checks it and
// answers with its hello and key share followed by HMAC(key, "mrc server" | challenge |
// client_tag | server hello | key share). Without the key a host can neither start a test at a
// server nor pose as one to a client; a recorded hello is useless against another challenge.
// The key shares give the session's packet keys (derive_packet_keys). The frames themselves
// are not encrypted: the hellos name QPNs, keys and PSNs, which a host on the path can read;
// authenticated packets (net/packet_auth.h) make that knowledge useless to it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "net/sockets.h"

namespace mrc::net {

inline constexpr size_t kPskTagBytes = 32;
inline constexpr size_t kPskMinBytes = 16;
inline constexpr size_t kKeyShareBytes = 32;  // an X25519 public key
using PskTag = std::array<uint8_t, kPskTagBytes>;
using KeySharePub = std::array<uint8_t, kKeyShareBytes>;

struct Psk {
  std::vector<uint8_t> key;
};

// A signed frame's contents once its tag is checked: the encoded hello and the sender's key
// share.
struct SignedHello {
  std::vector<uint8_t> hello;
  KeySharePub key_share{};
};

// Reads the secret from `path`: its whole contents (a trailing newline removed), at least
// kPskMinBytes, at most 4 KiB. kInvalidArgument if missing, too short, or readable by others
// than its owner (the secret would not be one).
NetResult<Psk> load_psk(const std::string& path);

// HMAC-SHA256 of the parts in order under the key.
PskTag psk_tag(const Psk& psk, std::initializer_list<std::span<const uint8_t>> parts);
// Constant-time comparison of a received tag with the expected one.
bool psk_tag_equal(std::span<const uint8_t> received, const PskTag& expected);

// The challenge frame a server greets a connection with (fresh CSPRNG bytes).
NetResult<std::vector<uint8_t>> make_challenge();

// Client side: `hello` and `key_share` with their tag appended, under the server's
// `challenge` frame (kRefused if the frame is not a challenge). `client_tag` receives the tag
// for verify_server_hello and the key derivation.
NetResult<std::vector<uint8_t>> sign_client_hello(const Psk& psk,
                                                  std::span<const uint8_t> challenge,
                                                  std::span<const uint8_t> hello,
                                                  const KeySharePub& key_share, PskTag& client_tag);
// Server side: the hello and key share inside `frame` if its tag is right (kRefused otherwise).
NetResult<SignedHello> open_client_hello(const Psk& psk, std::span<const uint8_t> challenge,
                                         std::span<const uint8_t> frame, PskTag& client_tag);
// Server side: its hello and key share with the answer's tag appended.
std::vector<uint8_t> sign_server_hello(const Psk& psk, std::span<const uint8_t> challenge,
                                       const PskTag& client_tag, std::span<const uint8_t> hello,
                                       const KeySharePub& key_share);
// Client side: the server's hello and key share inside `frame` if its tag is right (kRefused
// otherwise).
NetResult<SignedHello> open_server_hello(const Psk& psk, std::span<const uint8_t> challenge,
                                         const PskTag& client_tag, std::span<const uint8_t> frame);

}  // namespace mrc::net
