// The driver-level reachability ping of the Linux UDP driver, shared by everything that sends
// or answers one (UdpDriver::probe_planes, the C API's endpoint probes): 8 magic bytes, the
// plane (1 byte), a nonce (8 bytes, sender's byte order; echoed back unchanged). A data
// socket answers a ping by sending the same datagram back with the pong magic. 'M' (0x4D) is
// no MRC opcode, so a ping is never mistaken for a transport packet and never reaches the
// engine.
//
// Flow labels. Both directions carry a flow label derived from the nonce
// (ping_flow_label): the plain destination address a ping goes to is routed by ECMP, and
// fabrics hash on the flow label (mrc-fabric: fields 0x3f), so every retry (a new nonce)
// and its pong take another path. With a fixed label one dead spine that the hash happens to
// pick (a silent blackhole from before setup) would fail a healthy plane's probe every time.
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

// The 20-bit flow label of a ping or its pong (`p`: the datagram, kPingBytes long), never 0
// (0 lets the kernel pick a label of its own, the same for every datagram of the socket).
// The pong's differs from the ping's, so the two directions spread independently.
inline uint32_t ping_flow_label(const uint8_t* p, bool pong) {
  uint64_t nonce = 0;
  std::memcpy(&nonce, p + 9, 8);
  const uint64_t h = (nonce + (pong ? 0x632BE59BD9B4E019ull : 0)) * 0x9E3779B97F4A7C15ull;
  const uint32_t label = static_cast<uint32_t>(h >> 44);
  return label ? label : 1;
}

}  // namespace mrc::net
