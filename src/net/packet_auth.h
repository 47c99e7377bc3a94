// Authenticated data packets: AES-128-GCM per datagram, keys per direction, replay protection
// by a packet counter. The anchor is the Ultra Ethernet transport's security sublayer (one AEAD
// tag per packet, a per-direction key, the nonce made of a salt and a counter that is never
// reused); docs/linux-driver.md, "Authenticated packets", says what it guards against.
//
// Trailer. Behind a sealed datagram's ICRC (the transport packet as it is without
// authentication):
//   counter (8, big-endian) | tag (16)
// The GCM nonce is the direction's 4-byte salt followed by the counter (RFC 5288's layout).
// kAuthenticate: the transport packet is the GCM's additional data (GMAC), so a capture still
// reads; kEncrypt: it is the plaintext, encrypted in place. Every datagram takes the next
// counter (a retransmission is a new datagram), so (key, nonce) never repeats; the receiver
// keeps a window of the counters it accepted and drops a repeat or one too old for it.
//
// Keys. Each end of the side channel's --psk handshake (net/psk.h) sends an ephemeral X25519
// public key inside its signed hello; both compute the shared secret and derive the two
// directions' keys and salts with HKDF-SHA256 over it and the pre-shared key, bound to the
// connection's challenge and the client's tag. Without the pre-shared key a host cannot learn
// or replace the keys; a later theft of the pre-shared key does not reveal the keys of a past
// session (the X25519 secrets are gone).
//
// Nothing here touches the engine: the Linux driver seals what the engine sends and opens what
// it receives before wire::decode.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "net/hello.h"
#include "net/psk.h"
#include "net/sockets.h"
#include "wire/headers.h"

namespace mrc::net {

inline constexpr size_t kAuthKeyBytes = 16;                           // AES-128
inline constexpr size_t kAuthSaltBytes = 4;                           // the nonce's fixed part
inline constexpr size_t kAuthCounterBytes = wire::kAuthCounterBytes;  // the nonce's counter
inline constexpr size_t kAuthTagBytes = wire::kAuthTagBytes;          // GCM tag
inline constexpr size_t kAuthTrailerBytes = wire::kAuthTrailerBytes;
// Counters the receiver remembers behind the highest it accepted: reordering across planes
// deeper than this turns a late datagram into a loss (dropped as too old), never into a repeat.
inline constexpr uint64_t kReplayWindow = 8192;

enum class AuthMode : uint8_t {
  kOff = 0,
  kAuthenticate = 1,  // GMAC over the transport packet
  kEncrypt = 2,       // AES-GCM: the transport packet encrypted as well
};
std::string_view auth_mode_name(AuthMode mode);
// The hello flags that announce `mode` (hello.h, kHelloAuth and kHelloEncrypt), and the mode
// that hello flags announce (nullopt: encryption without authentication, which means nothing).
uint8_t hello_auth_flags(AuthMode mode);
std::optional<AuthMode> hello_auth_mode(uint8_t flags);

// One direction's key and nonce salt.
struct DirectionKey {
  std::array<uint8_t, kAuthKeyBytes> key{};
  std::array<uint8_t, kAuthSaltBytes> salt{};
  friend bool operator==(const DirectionKey&, const DirectionKey&) = default;
};
struct PacketKeys {
  DirectionKey send;     // what this end seals with
  DirectionKey receive;  // what it opens with (the peer's send)
};

// An ephemeral X25519 key pair from the kernel's CSPRNG.
struct KeyShare {
  std::array<uint8_t, kKeyShareBytes> secret{};
  KeySharePub pub{};
};
NetResult<KeyShare> make_key_share();

// The session's packet keys at the end playing `role`: the client's send key is the server's
// receive key. kRefused when the peer's public key is a low-order point (the shared secret
// would be all zero: an attacker's choice, not a secret).
NetResult<PacketKeys> derive_packet_keys(const Psk& psk, std::span<const uint8_t> challenge,
                                         const PskTag& client_tag, const KeyShare& mine,
                                         std::span<const uint8_t> peer_pub, HelloRole role);

// One AES-128-GCM key's cipher context (OpenSSL's EVP; the key schedule is computed once).
struct GcmContext;
struct GcmContextFree {
  void operator()(GcmContext* c) const;
};
using GcmContextPtr = std::unique_ptr<GcmContext, GcmContextFree>;

// Seals datagrams of one direction.
class PacketSealer {
 public:
  PacketSealer(const DirectionKey& key, AuthMode mode);
  // Seals the `len` bytes at `packet` (encrypting them in place with kEncrypt) and writes the
  // trailer behind them; `packet` must have kAuthTrailerBytes of room after `len`. Returns the
  // sealed length, len + kAuthTrailerBytes (0 if the cipher failed: do not send).
  size_t seal(uint8_t* packet, size_t len);
  // kAuthenticate only: seals the datagram made of `pieces` in order (headers, a payload left
  // in registered memory, pad and ICRC) without copying them, and writes the trailer at
  // `trailer`. False if the cipher failed (or the mode encrypts).
  bool seal_pieces(std::initializer_list<std::span<const uint8_t>> pieces, uint8_t* trailer);
  AuthMode mode() const { return mode_; }
  uint64_t sealed() const { return next_counter_; }

 private:
  GcmContextPtr ctx_;
  std::array<uint8_t, kAuthSaltBytes> salt_{};
  AuthMode mode_;
  uint64_t next_counter_ = 0;
};

// Which counters were accepted: the highest and a bitmap of the kReplayWindow below it
// (RFC 4303's anti-replay window, sized for multipath reordering).
class ReplayWindow {
 public:
  enum class Verdict : uint8_t { kNew, kRepeat, kTooOld };
  Verdict check(uint64_t counter) const;
  void accept(uint64_t counter);  // after check() said kNew and the tag was right

 private:
  static constexpr size_t kWords = kReplayWindow / 64;
  std::array<uint64_t, kWords> bits_{};  // bit (c % kReplayWindow) for counter c in the window
  uint64_t highest_ = 0;
  bool any_ = false;
};

enum class OpenError : uint8_t {
  kShort,     // no room for a trailer
  kBadTag,    // forged, corrupted, or sealed under another key (checked first)
  kReplayed,  // authentic, but its counter was accepted before
  kTooOld,    // authentic, but its counter is below the replay window
};
std::string_view open_error_name(OpenError e);

// Opens datagrams of one direction.
class PacketOpener {
 public:
  PacketOpener(const DirectionKey& key, AuthMode mode);
  // Checks the trailer of the `len` bytes at `datagram` and returns the transport packet's
  // length (decrypted in place with kEncrypt). On an error the opener's state is unchanged
  // (a forged packet cannot move the replay window); with kEncrypt the bytes are garbage then.
  std::expected<size_t, OpenError> open(uint8_t* datagram, size_t len);

 private:
  GcmContextPtr ctx_;
  std::array<uint8_t, kAuthSaltBytes> salt_{};
  AuthMode mode_;
  ReplayWindow window_;
};

}  // namespace mrc::net
