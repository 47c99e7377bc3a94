// The side channel's optional shared secret (mrc-perf --psk FILE): HMAC-SHA256 over the
// hellos, bound to a per-connection challenge, for networks that are not closed.
//
// Exchange (docs/linux-driver.md, "Security"): the server greets each connection with a
// challenge (hello.h, kChallengeMagic and 32 bytes from the CSPRNG); the client sends its hello
// followed by client_tag = HMAC(key, "mrc client" | challenge | hello); the server checks it
// and answers with its hello followed by HMAC(key, "mrc server" | challenge | client_tag |
// server hello). Without the key a host can neither start a test at a server nor pose as one
// to a client; a recorded hello is useless against another challenge. The frames themselves
// are not encrypted: the hellos name QPNs, keys and PSNs, which a host on the path can read
// (the threat model is a host off the path; see the docs).
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
using PskTag = std::array<uint8_t, kPskTagBytes>;

struct Psk {
  std::vector<uint8_t> key;
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

// Client side: `hello` with its tag appended, under the server's `challenge` frame (kRefused
// if the frame is not a challenge). `client_tag` receives the tag for verify_server_hello.
NetResult<std::vector<uint8_t>> sign_client_hello(const Psk& psk,
                                                  std::span<const uint8_t> challenge,
                                                  std::span<const uint8_t> hello,
                                                  PskTag& client_tag);
// Server side: the hello inside `frame` if its tag is right (kRefused otherwise).
NetResult<std::vector<uint8_t>> open_client_hello(const Psk& psk,
                                                  std::span<const uint8_t> challenge,
                                                  std::span<const uint8_t> frame,
                                                  PskTag& client_tag);
// Server side: its hello with the answer's tag appended.
std::vector<uint8_t> sign_server_hello(const Psk& psk, std::span<const uint8_t> challenge,
                                       const PskTag& client_tag, std::span<const uint8_t> hello);
// Client side: the server's hello inside `frame` if its tag is right (kRefused otherwise).
NetResult<std::vector<uint8_t>> open_server_hello(const Psk& psk,
                                                  std::span<const uint8_t> challenge,
                                                  const PskTag& client_tag,
                                                  std::span<const uint8_t> frame);

}  // namespace mrc::net
