// The datagram (BTH .. ICRC) a host would send for a transport packet from a given address
// and UDP port: valid framing and a valid ICRC, computed over the IPv6/UDP fields the kernel
// builds for a datagram from there (net/udp_driver.h), whatever the packet's fields say. For
// the tests that send crafted packets at a live driver (session_test, net_fabric_test).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "net/udp_driver.h"
#include "wire/codec.h"

namespace mrc::testnet {

inline std::vector<uint8_t> forged_datagram(const wire::TransportPacket& pkt,
                                            const sockaddr_in6& from) {
  std::vector<uint8_t> buf(48 + 9400);
  auto n = wire::encode_transport(pkt, std::span(buf).subspan(48));
  if (!n) return {};
  uint8_t* h = buf.data();  // IPv6 (40) and UDP (8) headers as the ICRC sees them
  std::memset(h, 0, 48);
  h[0] = 0x60;
  const uint16_t len = static_cast<uint16_t>(8 + *n + 4);
  h[4] = static_cast<uint8_t>(len >> 8);
  h[5] = static_cast<uint8_t>(len);
  h[6] = 17;
  std::memcpy(h + 8, &from.sin6_addr, 16);
  h[40] = static_cast<uint8_t>(ntohs(from.sin6_port) >> 8);
  h[41] = static_cast<uint8_t>(ntohs(from.sin6_port));
  h[42] = net::kIcrcUdpPort >> 8;
  h[43] = net::kIcrcUdpPort & 0xFF;
  h[44] = h[4];
  h[45] = h[5];
  const uint32_t crc = wire::icrc(std::span<const uint8_t>(buf.data(), 48 + *n));
  for (int i = 0; i < 4; ++i)
    buf[48 + *n + i] = static_cast<uint8_t>(crc >> (8 * i));
  return std::vector<uint8_t>(buf.begin() + 48, buf.begin() + 48 + *n + 4);
}

}  // namespace mrc::testnet
