#include "net/hello.h"

#include <algorithm>
#include <string>

#include "common/be_codec.h"
#include "transport/ev_profile.h"
#include "wire/crc32.h"

namespace mrc::net {
namespace {

using Writer = BeWriter;
using Reader = BeReader;

constexpr size_t kPrefixBytes = 4 + 2 + 4;
constexpr size_t kFixedBodyBytes = 1 + 1 + 1 + 2 + 1 + 4 + 1 + 2 + 1 + 4 + 8 * 5 + 2 + 2;
constexpr size_t kPlaneBytes = 16 + 2 + 2;
constexpr size_t kQpBytes = 8;

}  // namespace

std::vector<uint8_t> encode_hello(const Hello& h) {
  std::vector<uint8_t> out;
  out.reserve(kPrefixBytes + kFixedBodyBytes + h.planes.size() * kPlaneBytes +
              h.qps.size() * kQpBytes + 4);
  Writer w(out);
  const size_t body = kFixedBodyBytes + h.planes.size() * kPlaneBytes + h.qps.size() * kQpBytes;
  w.u32(kHelloMagic);
  w.u16(h.version);
  w.u32(static_cast<uint32_t>(body));
  w.u8(static_cast<uint8_t>(h.role));
  w.u8(h.transport);
  w.u8(h.ev_mode);
  w.u16(h.evs_per_plane);
  w.u8(h.cc);
  w.u32(h.mtu);
  w.u8(h.mpr_dest);
  w.u16(h.max_wimm_dest);
  w.u8(h.flags);
  w.u32(h.rkey);
  w.u64(h.remote_addr);
  w.u64(h.remote_len);
  w.u64(h.msg_size);
  w.u64(h.slots);
  w.u64(h.seed);
  w.u16(static_cast<uint16_t>(h.planes.size()));
  w.u16(static_cast<uint16_t>(h.qps.size()));
  for (const HelloPlane& p : h.planes) {
    w.bytes(p.addr);
    w.u16(p.udp_port);
    w.u16(p.leaf_usid);
  }
  for (const HelloQp& q : h.qps) {
    w.u32(q.qpn);
    w.u32(q.first_psn);
  }
  w.u32(wire::crc32(out));
  return out;
}

std::vector<uint8_t> encode_refusal(std::string_view why) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.u32(kRefusalMagic);
  for (char c : why.substr(0, kRefusalMaxChars))
    w.u8(c >= 0x20 && c < 0x7F ? static_cast<uint8_t>(c) : '?');
  return out;
}

NetStatus check_client_hello(const Hello& h, const HelloLimits& l) {
  auto refuse = [](const std::string& why) { return net_fail(NetErrc::kIncompatible, why); };
  if (h.role != HelloRole::kClient) return refuse("the hello is not a client's");
  const auto mode = static_cast<ev::FormatMode>(h.ev_mode);
  if (mode != ev::FormatMode::kSrv6 && mode != ev::FormatMode::kStev &&
      mode != ev::FormatMode::kUdp)
    return refuse("EV mode " + std::to_string(h.ev_mode) + " unknown");
  if (h.evs_per_plane == 0 || h.evs_per_plane > l.max_evs_per_plane)
    return refuse("EVs per plane must be 1.." + std::to_string(l.max_evs_per_plane) + ", not " +
                  std::to_string(h.evs_per_plane));
  if (h.mtu < 256 || h.mtu > 9000) return refuse("MTU must be 256..9000");
  if (h.qps.empty()) return refuse("no QPs");
  if (h.mpr_dest == 0) return refuse("MPR 0");
  if (h.max_wimm_dest == 0) return refuse("WRITE_IMM limit 0");
  const uint64_t paths = uint64_t{h.qps.size()} * h.planes.size() * h.evs_per_plane;
  if (paths > l.max_paths)
    return refuse(std::to_string(paths) +
                  " paths (QPs x planes x EVs) above this server's limit of " +
                  std::to_string(l.max_paths));
  if (h.msg_size == 0 || h.slots == 0) return refuse("message size and slots must be positive");
  uint64_t per_qp = 0, buffer = 0;
  if (__builtin_mul_overflow(h.msg_size, h.slots, &per_qp) ||
      __builtin_mul_overflow(per_qp, uint64_t{h.qps.size()}, &buffer) ||
      buffer > l.max_buffer_bytes)
    return refuse("a buffer of " + std::to_string(h.msg_size) + " B x " + std::to_string(h.slots) +
                  " slots x " + std::to_string(h.qps.size()) +
                  " QPs is above this server's limit of " + std::to_string(l.max_buffer_bytes) +
                  " B (--max-buffer-mib)");
  return {};
}

namespace {

// A server's refusal or a --psk challenge where a hello was expected: the error to report
// (kRefused). Anything else passes.
NetStatus check_not_refused(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4) return {};
  const uint32_t magic = Reader(bytes).u32();
  if (magic == kRefusalMagic) {
    std::string why;
    for (uint8_t c : bytes.subspan(4).first(std::min(bytes.size() - 4, kRefusalMaxChars)))
      why += c >= 0x20 && c < 0x7F ? static_cast<char>(c) : '?';
    return net_fail(NetErrc::kRefused, "the server refused: " + why);
  }
  if (magic == kChallengeMagic)
    return net_fail(NetErrc::kRefused,
                    "the server asks for a shared secret: run the client with its --psk");
  return {};
}

// The hello's frame: magic, version (into h.version), body length and the CRC-32 over all
// before it. Returns the body.
NetResult<std::span<const uint8_t>> hello_body(std::span<const uint8_t> bytes, Hello& h) {
  if (bytes.size() < kPrefixBytes + 4)
    return net_fail(NetErrc::kBadHello,
                    "hello truncated (" + std::to_string(bytes.size()) + " bytes)");
  Reader prefix(bytes);
  if (prefix.u32() != kHelloMagic)
    return net_fail(NetErrc::kBadHello, "not an MRC hello (bad magic): is the peer mrc-perf?");
  h.version = prefix.u16();
  if (h.version != kHelloVersion)
    return net_fail(NetErrc::kVersionMismatch,
                    "peer speaks hello version " + std::to_string(h.version) + ", we speak " +
                        std::to_string(kHelloVersion) + ": run the same mrc-perf on both ends");
  const uint32_t body = prefix.u32();
  if (body > kHelloMaxBytes || kPrefixBytes + body + 4 != bytes.size())
    return net_fail(NetErrc::kBadHello, "hello length " + std::to_string(body) +
                                            " does not match the frame (" +
                                            std::to_string(bytes.size()) + " bytes)");
  const uint32_t crc = static_cast<uint32_t>(bytes[bytes.size() - 4]) << 24 |
                       static_cast<uint32_t>(bytes[bytes.size() - 3]) << 16 |
                       static_cast<uint32_t>(bytes[bytes.size() - 2]) << 8 |
                       bytes[bytes.size() - 1];
  if (wire::crc32(bytes.first(bytes.size() - 4)) != crc)
    return net_fail(NetErrc::kBadHello, "hello CRC mismatch (corrupted side channel?)");
  return bytes.subspan(kPrefixBytes, body);
}

// The body's fixed fields, then its plane and QP arrays (counts checked against the limits
// and the bytes left).
NetStatus read_hello_body(Reader& r, Hello& h) {
  const uint8_t role = r.u8();
  if (role != static_cast<uint8_t>(HelloRole::kClient) &&
      role != static_cast<uint8_t>(HelloRole::kServer))
    return net_fail(NetErrc::kBadHello, "hello role " + std::to_string(role) + " unknown");
  h.role = static_cast<HelloRole>(role);
  h.transport = r.u8();
  h.ev_mode = r.u8();
  h.evs_per_plane = r.u16();
  h.cc = r.u8();
  h.mtu = r.u32();
  h.mpr_dest = r.u8();
  h.max_wimm_dest = r.u16();
  h.flags = r.u8();
  h.rkey = r.u32();
  h.remote_addr = r.u64();
  h.remote_len = r.u64();
  h.msg_size = r.u64();
  h.slots = r.u64();
  h.seed = r.u64();
  const uint16_t planes = r.u16();
  const uint16_t qps = r.u16();
  if (!r.ok()) return net_fail(NetErrc::kBadHello, "hello body truncated");
  if (planes == 0 || planes > kHelloMaxPlanes || qps > kHelloMaxQps)
    return net_fail(NetErrc::kBadHello, "hello counts out of range (planes " +
                                            std::to_string(planes) + ", QPs " +
                                            std::to_string(qps) + ")");
  if (r.left() != planes * kPlaneBytes + qps * kQpBytes)
    return net_fail(NetErrc::kBadHello, "hello arrays do not match their counts");
  h.planes.resize(planes);
  for (HelloPlane& p : h.planes) {
    r.bytes(p.addr);
    p.udp_port = r.u16();
    p.leaf_usid = r.u16();
  }
  h.qps.resize(qps);
  for (HelloQp& q : h.qps) {
    q.qpn = r.u32();
    q.first_psn = r.u32();
  }
  if (!r.ok()) return net_fail(NetErrc::kBadHello, "hello arrays truncated");
  return {};
}

}  // namespace

NetResult<Hello> decode_hello(std::span<const uint8_t> bytes) {
  if (auto st = check_not_refused(bytes); !st) return std::unexpected(st.error());
  Hello h;
  auto body = hello_body(bytes, h);
  if (!body) return std::unexpected(body.error());
  Reader r(*body);
  if (auto st = read_hello_body(r, h); !st) return std::unexpected(st.error());
  return h;
}

}  // namespace mrc::net
