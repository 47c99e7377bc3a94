// The driver-level reachability ping of the Linux UDP driver, shared by everything that sends
// or answers one (UdpDriver::probe_planes, the C API's endpoint probes): 8 magic bytes, the
// plane (1 byte), a nonce (8 bytes, sender's byte order; echoed back unchanged). A data
// socket answers a ping by sending the same datagram back with the pong magic. 'M' (0x4D) is
// no MRC opcode, so a ping is never mistaken for a transport packet and never reaches the
// engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mrc::net {

inline constexpr char kPingMagic[8] = {'M', 'R', 'C', 'P', 'I', 'N', 'G', '1'};
inline constexpr char kPongMagic[8] = {'M', 'R', 'C', 'P', 'O', 'N', 'G', '1'};
inline constexpr size_t kPingBytes = 8 + 1 + 8;

inline bool is_ping(const uint8_t* p, size_t len) {
  return len == kPingBytes && std::memcmp(p, kPingMagic, 8) == 0;
}
inline bool is_pong(const uint8_t* p, size_t len) {
  return len == kPingBytes && std::memcmp(p, kPongMagic, 8) == 0;
}

}  // namespace mrc::net
