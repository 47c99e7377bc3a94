// The connection-setup message the two ends of an mrc-perf (or any src/net) connection
// exchange over the TCP side channel, like perftest's pp_exchange. Versioned and framed so
// that a peer of another version gets a clear "versions differ" error instead of garbage.
//
// Layout (all integers big-endian):
//   magic "MRCH" (4) | version (2) | body length (4) | body | CRC-32 of everything before (4)
// The version is read before the body, so a future body layout still yields
// kVersionMismatch. The body is fixed fields, then the plane and QP arrays with their counts.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "net/sockets.h"

namespace mrc::net {

inline constexpr uint16_t kHelloVersion = 1;
inline constexpr uint32_t kHelloMagic = 0x4D524348;  // "MRCH"
inline constexpr uint32_t kHelloMaxPlanes = 32;      // EngineConfig::num_ports limit
inline constexpr uint32_t kHelloMaxQps = 4096;
inline constexpr uint32_t kHelloMaxBytes = 1 << 20;

enum class HelloRole : uint8_t { kClient = 1, kServer = 2 };

// Flags of the test the client asks for.
inline constexpr uint8_t kHelloWriteImm = 1 << 0;
inline constexpr uint8_t kHelloVerify = 1 << 1;
// The session's packets carry an authentication trailer (net/packet_auth.h, AuthMode): bit 2
// alone authenticates, bits 2 and 3 encrypt as well. Both ends must say the same.
inline constexpr uint8_t kHelloAuth = 1 << 2;
inline constexpr uint8_t kHelloEncrypt = 1 << 3;

struct HelloPlane {
  std::array<uint8_t, 16> addr{};  // this end's address on the plane
  uint16_t udp_port = 0;           // where its data socket listens
  uint16_t leaf_usid = 0;          // uSID of its leaf on this plane (0: unknown / no fabric)
  friend bool operator==(const HelloPlane&, const HelloPlane&) = default;
};

struct HelloQp {
  uint32_t qpn = 0;
  uint32_t first_psn = 0;  // the PSN this end sends first (the peer's rq_psn)
  friend bool operator==(const HelloQp&, const HelloQp&) = default;
};

struct Hello {
  uint16_t version = kHelloVersion;
  HelloRole role = HelloRole::kClient;
  uint8_t transport = 0;  // TransportMode
  uint8_t ev_mode = 0;    // ev::FormatMode (OCP bits)
  uint16_t evs_per_plane = 0;
  uint8_t cc = 0;  // CcAlgorithm
  uint32_t mtu = 0;
  uint8_t mpr_dest = 0;        // responder window this end accepts (units of 128 PSNs)
  uint16_t max_wimm_dest = 0;  // WRITE_IMM in flight this end accepts
  uint8_t flags = 0;           // kHelloWriteImm | kHelloVerify
  uint32_t rkey = 0;           // this end's buffer
  uint64_t remote_addr = 0;
  uint64_t remote_len = 0;
  uint64_t msg_size = 0;  // client: bytes per message (0 with a sweep)
  uint64_t slots = 0;     // client: messages the buffer holds per QP (verify layout)
  uint64_t seed = 0;      // client: verify pattern seed
  std::vector<HelloPlane> planes;
  std::vector<HelloQp> qps;
  friend bool operator==(const Hello&, const Hello&) = default;
};

std::vector<uint8_t> encode_hello(const Hello& h);

// A server's refusal instead of its hello: magic "MRCR", then a line of text saying why
// (printable ASCII, at most kRefusalMaxChars). decode_hello returns it as kRefused.
inline constexpr uint32_t kRefusalMagic = 0x4D524352;  // "MRCR"
inline constexpr size_t kRefusalMaxChars = 300;
std::vector<uint8_t> encode_refusal(std::string_view why);

// A server with a shared secret (--psk) greets each connection with a challenge before
// anything is read: magic "MRCC" and kChallengeBytes from the CSPRNG. decode_hello of it is
// kRefused ("needs --psk"), for a client without the secret.
inline constexpr uint32_t kChallengeMagic = 0x4D524343;  // "MRCC"
inline constexpr size_t kChallengeBytes = 32;

// What a server accepts in a client's hello: everything the server sizes from it is bounded
// here, before anything is allocated (docs/linux-driver.md, "Security").
struct HelloLimits {
  uint64_t max_buffer_bytes = 1ull << 30;  // msg_size x slots x QPs: the server's buffer
  uint32_t max_evs_per_plane = 256;
  uint64_t max_paths = 1 << 16;  // QPs x planes x EVs per plane: the path sets' memory
};
// kIncompatible naming the first field out of bounds (or that overflows), with a message
// fit to be sent back as a refusal.
NetStatus check_client_hello(const Hello& h, const HelloLimits& limits);

// Strict inverse of encode_hello. Errors: kBadHello (truncated, wrong magic, body length or
// counts out of range, trailing bytes, CRC mismatch, a role/enum byte out of range),
// kVersionMismatch (a well-framed hello of another version), kRefused (a refusal or a
// challenge, see above).
NetResult<Hello> decode_hello(std::span<const uint8_t> bytes);

}  // namespace mrc::net
