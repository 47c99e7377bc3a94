#include "wire/codec.h"

#include <array>
#include <bit>
#include <cstring>

#include "common/be_codec.h"
#include "wire/crc32.h"

namespace mrc::wire {
namespace {

// ---------------------------------------------------------------------------------------------
// Big-endian field access. memcpy + byteswap compiles to a load and a bswap (movbe).

template <typename T>
constexpr T to_big(T v) {
  if constexpr (std::endian::native == std::endian::little) return std::byteswap(v);
  return v;
}
inline void put16(uint8_t* p, uint16_t v) {
  v = to_big(v);
  std::memcpy(p, &v, sizeof v);
}
inline void put32(uint8_t* p, uint32_t v) {
  v = to_big(v);
  std::memcpy(p, &v, sizeof v);
}
inline void put64(uint8_t* p, uint64_t v) {
  v = to_big(v);
  std::memcpy(p, &v, sizeof v);
}
inline uint16_t get16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return to_big(v);
}
inline uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return to_big(v);
}
inline uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return to_big(v);
}

// ---------------------------------------------------------------------------------------------
// The opcode table: the one place that says which headers follow the BTH (cf. Linux rxe's
// rxe_opcode.c). Headers always appear in this order: BTH, RETH, ImmDt, AETH, then exactly
// one MRC extension (or the CNP's reserved bytes), then the payload.

enum Part : uint16_t {
  kPartReth = 1 << 0,
  kPartImmDt = 1 << 1,
  kPartAeth = 1 << 2,
  kPartDataExt = 1 << 3,
  kPartSackExt = 1 << 4,
  kPartTrimNackExt = 1 << 5,
  kPartProbeExt = 1 << 6,
  kPartCnpReserved = 1 << 7,
  kPartPayload = 1 << 8,  // the opcode may carry payload bytes
};

struct OpcodeRow {
  Opcode opcode;
  const char* name;
  uint16_t parts;
};

constexpr OpcodeRow kOpcodeRows[] = {
    {Opcode::kWriteOnly, "RC_RDMA_WRITE_ONLY", kPartReth | kPartDataExt | kPartPayload},
    {Opcode::kWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
     kPartReth | kPartImmDt | kPartDataExt | kPartPayload},
    {Opcode::kAck, "RC_ACKNOWLEDGE", kPartAeth | kPartSackExt},
    {Opcode::kCnp, "ROCE_CNP", kPartCnpReserved},
    {Opcode::kTrimNack, "MRC_TRIM_NACK", kPartAeth | kPartTrimNackExt},
    // Probes may be padded with payload (e.g. to probe a path at full MTU).
    {Opcode::kProbe, "MRC_PROBE", kPartProbeExt | kPartPayload},
    {Opcode::kProbeReply, "MRC_PROBE_REPLY", kPartProbeExt | kPartPayload},
};

// Derived per-opcode layout, indexed by the opcode byte. Offsets count from the BTH start.
struct OpcodeInfo {
  const char* name = nullptr;  // null: not an opcode MRC uses
  uint16_t parts = 0;
  uint8_t reth = 0, immdt = 0, aeth = 0, ext = 0;
  uint8_t length = 0;  // BTH through the end of the extension
};

constexpr uint32_t extension_bytes(uint16_t parts) {
  if (parts & kPartDataExt) return kDataExtBytes;
  if (parts & kPartSackExt) return kSackExtBytes;
  if (parts & kPartTrimNackExt) return kTrimNackExtBytes;
  if (parts & kPartProbeExt) return kProbeExtBytes;
  if (parts & kPartCnpReserved) return kCnpReservedBytes;
  return 0;
}

constexpr std::array<OpcodeInfo, 256> make_opcode_table() {
  std::array<OpcodeInfo, 256> table{};
  for (const OpcodeRow& row : kOpcodeRows) {
    OpcodeInfo& info = table[static_cast<uint8_t>(row.opcode)];
    info.name = row.name;
    info.parts = row.parts;
    uint32_t offset = kBthBytes;
    if (row.parts & kPartReth) info.reth = offset, offset += kRethBytes;
    if (row.parts & kPartImmDt) info.immdt = offset, offset += kImmDtBytes;
    if (row.parts & kPartAeth) info.aeth = offset, offset += kAethBytes;
    info.ext = offset;
    info.length = offset + extension_bytes(row.parts);
  }
  return table;
}
constexpr std::array<OpcodeInfo, 256> kOpcodeTable = make_opcode_table();

static_assert(kOpcodeTable[0x0A].length == 52 && kOpcodeTable[0x0B].length == 56);
static_assert(kOpcodeTable[0x11].length == 120 && kOpcodeTable[0x81].length == 28);
static_assert(kOpcodeTable[0xC0].length == 28 && kOpcodeTable[0xC1].length == 36);
static_assert(kSackExtBytes == 104);

inline const OpcodeInfo& info_of(Opcode op) {
  return kOpcodeTable[static_cast<uint8_t>(op)];
}

constexpr uint32_t pad_for(uint32_t payload_len) {
  return (0u - payload_len) & 3u;
}

// ---------------------------------------------------------------------------------------------
// Field rules shared by encode and decode, so that encode accepts exactly what decode would.

// `may_be_trimmed`: a zero-length payload may come with any RETH dma_len (the packet was cut
// by a switch; dma_len keeps the original length).
Error check_fields(const TransportPacket& p, const OpcodeInfo& info, bool may_be_trimmed) {
  if (p.bth.dest_qp > kMax24 || p.bth.psn > kMax24) return Error::kBadExtension;
  const uint16_t parts = info.parts;
  if ((parts & kPartReth) && p.reth.dma_len != p.payload_len &&
      !(may_be_trimmed && p.payload_len == 0)) {
    return Error::kBadExtension;
  }
  if ((parts & kPartAeth) && p.aeth.msn > kMax24) return Error::kBadExtension;
  if (parts & kPartDataExt) {
    if (p.data.pkt_count == 0 || p.data.pkt_index >= p.data.pkt_count) {
      return Error::kBadExtension;
    }
  } else if (parts & kPartSackExt) {
    const SackExt& s = p.sack;
    if (s.cum_psn > kMax24 || s.sack_base > kMax24 || s.echo_count > kMaxAckEchoes ||
        s.ports_down > kMax24) {
      return Error::kBadExtension;
    }
    for (int i = 0; i < s.echo_count; ++i) {
      if (s.echo[i].psn > kMax24) return Error::kBadExtension;
    }
  } else if (parts & kPartTrimNackExt) {
    if (p.nack.psn > kMax24 || p.nack.cum_psn > kMax24) return Error::kBadExtension;
  }
  return Error::kOk;
}

// Checks everything encode_transport needs; returns the transport bytes through the pad.
Result<size_t> check_transport_for_encode(const TransportPacket& p, bool may_be_trimmed) {
  const OpcodeInfo& info = info_of(p.bth.opcode);
  if (info.name == nullptr) return fail(Error::kBadOpcode);
  if (p.bth.tver != 0) return fail(Error::kBadVersion);
  if (p.payload_len != 0 && !(info.parts & kPartPayload)) return fail(Error::kBadLength);
  if (Error e = check_fields(p, info, may_be_trimmed); e != Error::kOk) return fail(e);
  return size_t{info.length} + p.payload_len + pad_for(p.payload_len);
}

// ---------------------------------------------------------------------------------------------
// Transport (BTH and up) writer and parser.

// Writes BTH..pad at `out`, which has room for info.length + payload_len + pad bytes.
void write_transport(const TransportPacket& p, const OpcodeInfo& info, uint8_t* out) {
  const uint32_t pad = pad_for(p.payload_len);
  // BTH (IBTA 9.2): OpCode | SE M PadCnt(2) TVer(4) | P_Key | F B Resv6 | DestQP(24) |
  // A Resv7 | PSN(24).
  out[0] = static_cast<uint8_t>(p.bth.opcode);
  out[1] = static_cast<uint8_t>(p.bth.solicited << 7 | p.bth.mig_req << 6 | pad << 4);
  put16(out + 2, p.bth.pkey);
  put32(out + 4, uint32_t{p.bth.fecn} << 31 | uint32_t{p.bth.becn} << 30 | p.bth.dest_qp);
  put32(out + 8, uint32_t{p.bth.ack_req} << 31 | p.bth.psn);

  const uint16_t parts = info.parts;
  if (parts & kPartReth) {
    uint8_t* r = out + info.reth;
    put64(r, p.reth.va);
    put32(r + 8, p.reth.rkey);
    put32(r + 12, p.reth.dma_len);
  }
  if (parts & kPartImmDt) put32(out + info.immdt, p.imm);
  if (parts & kPartAeth) put32(out + info.aeth, uint32_t{p.aeth.syndrome} << 24 | p.aeth.msn);

  uint8_t* x = out + info.ext;
  if (parts & kPartDataExt) {
    put32(x, p.data.msg_num);
    put32(x + 4, p.data.pkt_index);
    put32(x + 8, p.data.pkt_count);
    put16(x + 12, p.data.ev_index);
    put16(x + 14, p.data.flags & DataExt::kAllFlags);
    put64(x + 16, p.data.tx_time_ps);
  } else if (parts & kPartSackExt) {
    const SackExt& s = p.sack;
    put32(x, s.cum_psn);
    put32(x + 4, s.sack_base);
    put64(x + 8, s.bitmap[0]);
    put64(x + 16, s.bitmap[1]);
    put64(x + 24, s.received_bytes);
    put32(x + 32, s.service_time_ns);
    put32(x + 36, uint32_t{s.echo_count} << 24 | s.ports_down);
    for (int i = 0; i < kMaxAckEchoes; ++i) {
      uint8_t* e = x + 40 + i * kAckEchoBytes;
      if (i < s.echo_count) {
        put32(e, s.echo[i].psn);
        put32(e + 4, uint32_t{s.echo[i].ev_index} << 16 |
                         uint32_t{static_cast<uint8_t>(s.echo[i].flags & AckEcho::kAllFlags)} << 8);
      } else {
        std::memset(e, 0, kAckEchoBytes);
      }
    }
  } else if (parts & kPartTrimNackExt) {
    put32(x, p.nack.psn);
    put32(x + 4, p.nack.cum_psn);
    put32(x + 8, uint32_t{p.nack.ev_index} << 16);
  } else if (parts & kPartProbeExt) {
    put64(x, p.probe.probe_id);
    put64(x + 8, p.probe.tx_time_ps);
    put32(x + 16, p.probe.service_time_ns);
    put16(x + 20, p.probe.ev_index);
    x[22] = p.probe.port;
    x[23] = p.probe.flags;
  } else if (parts & kPartCnpReserved) {
    std::memset(x, 0, kCnpReservedBytes);
  }

  uint8_t* payload = out + info.length;
  if (p.payload_len > 0) {
    if (p.payload != nullptr) {
      std::memcpy(payload, p.payload, p.payload_len);
    } else {
      std::memset(payload, 0, p.payload_len);
    }
  }
  // Pad bytes are zero (IBTA 9.2.4 leaves their value open; zero keeps output deterministic).
  for (uint32_t i = 0; i < pad; ++i)
    payload[p.payload_len + i] = 0;
}

// Parses BTH..pad from `in` (exactly those bytes). Checks framing (kTruncated, kBadOpcode,
// kBadVersion, kBadPadCount, kBadLength) but not the field rules.
Error parse_transport(const uint8_t* in, size_t size, TransportPacket& p) {
  if (size < kBthBytes) return Error::kTruncated;
  const OpcodeInfo& info = kOpcodeTable[in[0]];
  if (info.name == nullptr) return Error::kBadOpcode;
  if ((in[1] & 0x0F) != 0) return Error::kBadVersion;
  if (size < info.length) return Error::kTruncated;
  const size_t body = size - info.length;  // payload + pad
  const uint8_t pad = (in[1] >> 4) & 3;
  if (pad > body || body % 4 != 0) return Error::kBadPadCount;
  const size_t payload_len = body - pad;
  if (payload_len != 0 && !(info.parts & kPartPayload)) return Error::kBadLength;

  p.bth.opcode = static_cast<Opcode>(in[0]);
  p.bth.solicited = in[1] & 0x80;
  p.bth.mig_req = in[1] & 0x40;
  p.bth.pad_count = pad;
  p.bth.tver = 0;
  p.bth.pkey = get16(in + 2);
  const uint32_t w1 = get32(in + 4);
  p.bth.fecn = w1 >> 31;
  p.bth.becn = (w1 >> 30) & 1;
  p.bth.dest_qp = w1 & kMax24;
  const uint32_t w2 = get32(in + 8);
  p.bth.ack_req = w2 >> 31;
  p.bth.psn = w2 & kMax24;

  const uint16_t parts = info.parts;
  if (parts & kPartReth) {
    const uint8_t* r = in + info.reth;
    p.reth.va = get64(r);
    p.reth.rkey = get32(r + 8);
    p.reth.dma_len = get32(r + 12);
  }
  if (parts & kPartImmDt) p.imm = get32(in + info.immdt);
  if (parts & kPartAeth) {
    const uint32_t a = get32(in + info.aeth);
    p.aeth.syndrome = a >> 24;
    p.aeth.msn = a & kMax24;
  }

  const uint8_t* x = in + info.ext;
  if (parts & kPartDataExt) {
    p.data.msg_num = get32(x);
    p.data.pkt_index = get32(x + 4);
    p.data.pkt_count = get32(x + 8);
    p.data.ev_index = get16(x + 12);
    p.data.flags = get16(x + 14) & DataExt::kAllFlags;
    p.data.tx_time_ps = get64(x + 16);
  } else if (parts & kPartSackExt) {
    SackExt& s = p.sack;
    s.cum_psn = get32(x);
    s.sack_base = get32(x + 4);
    s.bitmap[0] = get64(x + 8);
    s.bitmap[1] = get64(x + 16);
    s.received_bytes = get64(x + 24);
    s.service_time_ns = get32(x + 32);
    s.echo_count = x[36];
    s.ports_down = get32(x + 36) & kMax24;
    // Entries past echo_count are reserved: left at their defaults. A count above the
    // maximum is reported by check_fields; parse only what fits.
    const int echoes = s.echo_count < kMaxAckEchoes ? s.echo_count : kMaxAckEchoes;
    for (int i = 0; i < echoes; ++i) {
      const uint8_t* e = x + 40 + i * kAckEchoBytes;
      s.echo[i].psn = get32(e);
      s.echo[i].ev_index = get16(e + 4);
      s.echo[i].flags = e[6] & AckEcho::kAllFlags;
    }
  } else if (parts & kPartTrimNackExt) {
    p.nack.psn = get32(x);
    p.nack.cum_psn = get32(x + 4);
    p.nack.ev_index = get16(x + 8);
    p.nack.reserved = 0;
  } else if (parts & kPartProbeExt) {
    p.probe.probe_id = get64(x);
    p.probe.tx_time_ps = get64(x + 8);
    p.probe.service_time_ns = get32(x + 16);
    p.probe.ev_index = get16(x + 20);
    p.probe.port = x[22];
    p.probe.flags = x[23];
  }

  p.payload_len = static_cast<uint32_t>(payload_len);
  p.payload = payload_len > 0 ? in + info.length : nullptr;
  return Error::kOk;
}

// ---------------------------------------------------------------------------------------------
// ICRC and UDP checksum.

// CRC register after the 8 bytes of ones that stand for the masked LRH (IBTA A17.4.5.2);
// Linux rxe hard-codes the same 0xdebb20e3.
constexpr uint32_t kIcrcSeed = [] {
  constexpr std::array<uint8_t, 8> ones{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  return crc32_update_bytewise(kCrc32Preset, ones);
}();
static_assert(kIcrcSeed == 0xDEBB20E3u);

// `dgram` holds IPv6 + `srh_bytes` of SRH + UDP + BTH + ... up to (excluding) the ICRC,
// `size` bytes in all, at least 40 + srh_bytes + 8 + 12.
uint32_t icrc_of(const uint8_t* dgram, size_t srh_bytes, size_t size) {
  // The invariant fields of IPv6 + UDP + BTH, masked (IBTA A17.4.5.2 plus MRC's DA and SRH
  // rules, see codec.h).
  // The masked 60 bytes, then as much of what follows as fits: one CRC call of 64 bytes or
  // more runs the carry-less multiply path (wire/crc32.h); 60 bytes alone would go through
  // the tables (31 ns, against 81 ns for a whole 4 KiB payload by VPCLMULQDQ).
  uint8_t masked[128];
  uint8_t* ip = masked;
  ip[0] = dgram[0] | 0x0F;  // version kept; traffic class and flow label to ones
  ip[1] = ip[2] = ip[3] = 0xFF;
  const uint8_t next_header = srh_bytes != 0 ? dgram[kIpv6HeaderBytes] : dgram[6];
  put16(ip + 4, static_cast<uint16_t>(get16(dgram + 4) - srh_bytes));  // as without the SRH
  ip[6] = next_header;
  ip[7] = 0xFF;                        // hop limit
  std::memcpy(ip + 8, dgram + 8, 16);  // source
  std::memset(ip + 24, 0xFF, 16);      // destination
  const uint8_t* udp_in = dgram + kIpv6HeaderBytes + srh_bytes;
  uint8_t* udp = masked + kIpv6HeaderBytes;
  std::memcpy(udp, udp_in, 6);
  udp[6] = udp[7] = 0xFF;  // checksum
  uint8_t* bth = udp + kUdpHeaderBytes;
  std::memcpy(bth, udp_in + kUdpHeaderBytes, kBthBytes);
  bth[4] = 0xFF;  // resv8a (FECN, BECN, reserved): switches may set FECN
  constexpr size_t kMaskedBytes = kIpv6HeaderBytes + kUdpHeaderBytes + kBthBytes;
  const size_t covered = kIpv6HeaderBytes + srh_bytes + kUdpHeaderBytes + kBthBytes;
  const size_t rest = size - covered;
  const size_t take = std::min(rest, sizeof masked - kMaskedBytes);
  std::memcpy(masked + kMaskedBytes, dgram + covered, take);
  uint32_t state = crc32_update(kIcrcSeed, std::span<const uint8_t>(masked, kMaskedBytes + take));
  state = crc32_update(state, std::span<const uint8_t>(dgram + covered + take, rest - take));
  return ~state;
}

// Ones'-complement sum (RFC 1071) of `n` bytes in native byte order; the folded result,
// stored in memory as is, is the big-endian sum (RFC 1071 1.2(B)). `p` must start at an even
// offset of the checksummed data.
//
// The bulk runs on 16-byte vectors (GCC/Clang vector extensions: SSE2 on x86-64, NEON on
// Arm, no intrinsics): each 32-bit lane holds two 16-bit words, which are split with a mask
// and a shift and added into 32-bit lane sums. A lane gains at most 0xFFFF per step, so
// folding every 2^15 steps keeps the lanes from overflowing.
uint64_t ones_sum(const uint8_t* p, size_t n, uint64_t acc) {
  using U32x4 = uint32_t __attribute__((vector_size(16)));
  constexpr U32x4 kLow16 = {0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF};
  while (n >= 32) {
    U32x4 s0{}, s1{}, s2{}, s3{};
    size_t steps = n / 32 < (size_t{1} << 15) ? n / 32 : (size_t{1} << 15);
    n -= steps * 32;
    for (; steps > 0; --steps) {
      U32x4 a, b;
      std::memcpy(&a, p, sizeof a);
      std::memcpy(&b, p + 16, sizeof b);
      s0 += a & kLow16;
      s1 += a >> 16;
      s2 += b & kLow16;
      s3 += b >> 16;
      p += 32;
    }
    const U32x4 s = (s0 & kLow16) + (s0 >> 16) + (s1 & kLow16) + (s1 >> 16) + (s2 & kLow16) +
                    (s2 >> 16) + (s3 & kLow16) + (s3 >> 16);
    acc += uint64_t{s[0]} + s[1] + s[2] + s[3];
  }
  while (n >= 4) {
    uint32_t w;
    std::memcpy(&w, p, sizeof w);
    acc += w;
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    uint16_t w;
    std::memcpy(&w, p, sizeof w);
    acc += w;
    p += 2;
    n -= 2;
  }
  if (n == 1) {
    const uint8_t last[2] = {p[0], 0};
    uint16_t w;
    std::memcpy(&w, last, sizeof w);
    acc += w;
  }
  return acc;
}

uint16_t fold(uint64_t acc) {
  while (acc >> 16)
    acc = (acc & 0xFFFF) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

// Ones'-complement sum over the IPv6 pseudo-header (RFC 8200 8.1) and the UDP datagram `udp`
// of `udp_len` bytes (checksum field included as it stands), in native order.
uint16_t udp_sum(const uint8_t* src, const uint8_t* final_dst, const uint8_t* udp, size_t udp_len) {
  uint8_t pseudo[40];
  std::memcpy(pseudo, src, 16);
  std::memcpy(pseudo + 16, final_dst, 16);
  put32(pseudo + 32, static_cast<uint32_t>(udp_len));
  put32(pseudo + 36, kIpProtoUdp);
  return fold(ones_sum(udp, udp_len, ones_sum(pseudo, sizeof pseudo, 0)));
}

// ---------------------------------------------------------------------------------------------
// Datagram parser.

Error decode_into(std::span<const uint8_t> in, const DecodeOptions& opt, Datagram& d) {
  const uint8_t* b = in.data();
  const size_t size = in.size();
  if (size < kIpv6HeaderBytes) return Error::kTruncated;
  if ((b[0] >> 4) != 6) return Error::kBadVersion;
  const size_t end = kIpv6HeaderBytes + get16(b + 4);
  if (size < end) return Error::kTruncated;
  if (size > end) return Error::kBadLength;

  Ipv6Header& ip = d.ip;
  const uint32_t w0 = get32(b);
  ip.traffic_class = static_cast<uint8_t>(w0 >> 20);
  ip.flow_label = w0 & 0xFFFFF;
  ip.payload_length = get16(b + 4);
  ip.next_header = b[6];
  ip.hop_limit = b[7];
  std::memcpy(ip.src.data(), b + 8, 16);
  std::memcpy(ip.dst.data(), b + 24, 16);

  size_t off = kIpv6HeaderBytes;
  size_t srh_bytes = 0;
  if (ip.next_header == kIpProtoRouting) {
    // Segment Routing Header, RFC 8754 section 2.
    if (end - off < kSrhFixedBytes) return Error::kTruncated;
    const uint8_t* s = b + off;
    if (s[2] != kSrhRoutingType) return Error::kBadSrh;
    srh_bytes = kSrhFixedBytes + 8 * size_t{s[1]};
    if (end - off < srh_bytes) return Error::kTruncated;
    const uint8_t last_entry = s[4];
    if (last_entry >= kMaxSrhSegments || s[1] != 2 * (last_entry + 1) || s[3] > last_entry) {
      return Error::kBadSrh;
    }
    if (s[0] != kIpProtoUdp) return Error::kBadNextHeader;
    d.has_srh = true;
    SrhHeader& srh = d.srh;
    srh.next_header = s[0];
    srh.segments_left = s[3];
    srh.last_entry = last_entry;
    srh.flags = s[5];
    srh.tag = get16(s + 6);
    srh.num_segments = last_entry + 1;
    for (int i = 0; i < srh.num_segments; ++i) {
      std::memcpy(srh.segments[i].data(), s + kSrhFixedBytes + i * kSrhSegmentBytes, 16);
    }
    off += srh_bytes;
  } else if (ip.next_header != kIpProtoUdp) {
    return Error::kBadNextHeader;
  }

  if (end - off < kUdpHeaderBytes) return Error::kTruncated;
  const uint8_t* u = b + off;
  d.udp.src_port = get16(u);
  d.udp.dst_port = get16(u + 2);
  d.udp.length = get16(u + 4);
  d.udp.checksum = get16(u + 6);
  if (d.udp.dst_port != kRoceV2Port) return Error::kBadUdpPort;
  if (d.udp.length != end - off) return Error::kBadLength;
  const size_t udp_offset = off;
  off += kUdpHeaderBytes;

  // BTH..pad, then the ICRC.
  const size_t rest = end - off;
  if (rest < kBthBytes + kIcrcBytes) return Error::kTruncated;
  if (Error e = parse_transport(b + off, rest - kIcrcBytes, d.pkt); e != Error::kOk) return e;

  if (opt.verify_icrc &&
      get_le32(b + end - kIcrcBytes) != icrc_of(b, srh_bytes, end - kIcrcBytes)) {
    return Error::kBadIcrc;
  }
  if (opt.verify_udp_checksum && d.udp.checksum != 0) {
    const uint8_t* final_dst = d.has_srh ? d.srh.segments[0].data() : ip.dst.data();
    if (udp_sum(b + 8, final_dst, b + udp_offset, end - udp_offset) != 0xFFFF) {
      return Error::kBadUdpChecksum;
    }
  }
  const bool trimmed = ip.dscp() == kDscpTrimmed;
  return check_fields(d.pkt, info_of(d.pkt.bth.opcode), trimmed);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

const char* opcode_name(Opcode op) {
  const char* name = info_of(op).name;
  return name != nullptr ? name : "UNKNOWN";
}

uint32_t transport_header_bytes(Opcode op) {
  return info_of(op).length;
}

size_t encoded_size(const Datagram& d) {
  const size_t srh = d.has_srh ? kSrhFixedBytes + kSrhSegmentBytes * size_t{d.srh.num_segments} : 0;
  return kIpv6HeaderBytes + srh + kUdpHeaderBytes + transport_header_bytes(d.pkt.bth.opcode) +
         d.pkt.payload_len + pad_for(d.pkt.payload_len) + kIcrcBytes;
}

Result<size_t> encode(const Datagram& d, std::span<uint8_t> out) {
  // Validate everything before writing anything.
  auto transport = check_transport_for_encode(d.pkt, d.ip.dscp() == kDscpTrimmed);
  if (!transport) return fail(transport.error());
  if (d.ip.flow_label > 0xFFFFF) return fail(Error::kInvalidArgument);
  size_t srh_bytes = 0;
  if (d.has_srh) {
    const SrhHeader& s = d.srh;
    if (s.num_segments == 0 || s.num_segments > kMaxSrhSegments ||
        s.last_entry + 1 != s.num_segments || s.segments_left > s.last_entry) {
      return fail(Error::kBadSrh);
    }
    srh_bytes = kSrhFixedBytes + kSrhSegmentBytes * size_t{s.num_segments};
  }
  if (d.udp.dst_port != kRoceV2Port) return fail(Error::kBadUdpPort);
  const size_t udp_len = kUdpHeaderBytes + *transport + kIcrcBytes;
  const size_t ip_payload = srh_bytes + udp_len;
  if (ip_payload > 0xFFFF) return fail(Error::kTooBig);
  const size_t total = kIpv6HeaderBytes + ip_payload;
  if (out.size() < total) return fail(Error::kTooBig);

  uint8_t* b = out.data();
  // IPv6, RFC 8200 section 3.
  put32(b, 6u << 28 | uint32_t{d.ip.traffic_class} << 20 | d.ip.flow_label);
  put16(b + 4, static_cast<uint16_t>(ip_payload));
  b[6] = d.has_srh ? kIpProtoRouting : kIpProtoUdp;
  b[7] = d.ip.hop_limit;
  std::memcpy(b + 8, d.ip.src.data(), 16);
  std::memcpy(b + 24, d.ip.dst.data(), 16);
  size_t off = kIpv6HeaderBytes;
  if (d.has_srh) {
    // SRH, RFC 8754 section 2: hdr ext len counts 8-octet units after the first 8 octets.
    const SrhHeader& s = d.srh;
    uint8_t* h = b + off;
    h[0] = kIpProtoUdp;
    h[1] = static_cast<uint8_t>(2 * s.num_segments);
    h[2] = kSrhRoutingType;
    h[3] = s.segments_left;
    h[4] = s.last_entry;
    h[5] = s.flags;
    put16(h + 6, s.tag);
    for (int i = 0; i < s.num_segments; ++i) {
      std::memcpy(h + kSrhFixedBytes + i * kSrhSegmentBytes, s.segments[i].data(), 16);
    }
    off += srh_bytes;
  }
  uint8_t* udp = b + off;
  put16(udp, d.udp.src_port);
  put16(udp + 2, d.udp.dst_port);
  put16(udp + 4, static_cast<uint16_t>(udp_len));
  put16(udp + 6, 0);
  write_transport(d.pkt, info_of(d.pkt.bth.opcode), udp + kUdpHeaderBytes);

  // The ICRC goes on the wire least significant byte first (IBTA 7.8.1; RoCEv2 NICs and
  // Linux rxe store the CRC register as a little-endian word).
  put_le32(b + total - kIcrcBytes, icrc_of(b, srh_bytes, total - kIcrcBytes));
  // The checksum covers the ICRC, so it comes last. Zero would mean "no checksum"
  // (RFC 768), so a computed zero is sent as 0xFFFF.
  const uint8_t* final_dst = d.has_srh ? d.srh.segments[0].data() : d.ip.dst.data();
  uint16_t sum = static_cast<uint16_t>(~udp_sum(b + 8, final_dst, udp, udp_len));
  if (sum == 0) sum = 0xFFFF;
  std::memcpy(udp + 6, &sum, sizeof sum);  // native-order sum: already in wire order
  return total;
}

Result<Datagram> decode(std::span<const uint8_t> in, const DecodeOptions& opt) {
  Result<Datagram> result{std::in_place};  // one named result: constructed in place
  if (Error e = decode_into(in, opt, *result); e != Error::kOk) result = fail(e);
  return result;
}

Result<size_t> encode_transport(const TransportPacket& p, std::span<uint8_t> out) {
  auto size = check_transport_for_encode(p, /*may_be_trimmed=*/true);
  if (!size) return size;
  if (out.size() < *size) return fail(Error::kTooBig);
  write_transport(p, info_of(p.bth.opcode), out.data());
  return size;
}

Result<TransportPacket> decode_transport(std::span<const uint8_t> in) {
  Result<TransportPacket> result{std::in_place};
  TransportPacket& p = *result;
  Error e = parse_transport(in.data(), in.size(), p);
  if (e == Error::kOk) e = check_fields(p, info_of(p.bth.opcode), /*may_be_trimmed=*/true);
  if (e != Error::kOk) result = fail(e);
  return result;
}

uint32_t icrc(std::span<const uint8_t> datagram_without_icrc) {
  const uint8_t* b = datagram_without_icrc.data();
  const size_t size = datagram_without_icrc.size();
  if (size < kIpv6HeaderBytes) return 0;
  size_t srh_bytes = 0;
  if (b[6] == kIpProtoRouting) {
    if (size < kIpv6HeaderBytes + kSrhFixedBytes) return 0;
    srh_bytes = kSrhFixedBytes + 8 * size_t{b[kIpv6HeaderBytes + 1]};
  }
  if (size < kIpv6HeaderBytes + srh_bytes + kUdpHeaderBytes + kBthBytes) return 0;
  return icrc_of(b, srh_bytes, size);
}

}  // namespace mrc::wire
