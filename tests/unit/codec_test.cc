// Tests for wire/codec.h (and wire/crc32.h). Order follows codec.h: opcode table, encode
// (golden bytes per packet type), decode (round trip, every rejection, truncation), the
// transport-only pair, the ICRC. The fuzz seed corpus is generated (and checked) at the end.
#include "wire/codec.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "wire/crc32.h"
#include "wire/usid.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace mrc {
void PrintTo(Error e, std::ostream* os) {
  *os << error_name(e);
}
}  // namespace mrc

namespace mrc::wire {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr Opcode kAllOpcodes[] = {Opcode::kWriteOnly, Opcode::kWriteOnlyImm, Opcode::kAck,
                                  Opcode::kCnp,       Opcode::kTrimNack,     Opcode::kProbe,
                                  Opcode::kProbeReply};

// "0A 70 FFFF ..." -> bytes. Whitespace is ignored; '#' starts a comment up to the newline.
Bytes hex(std::string_view text) {
  Bytes out;
  int nibbles = 0;
  uint8_t byte = 0;
  bool comment = false;
  for (char c : text) {
    if (c == '#' || c == '\n') comment = c == '#';
    if (comment) continue;
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      continue;
    }
    byte = static_cast<uint8_t>(byte << 4 | v);
    if (++nibbles % 2 == 0) out.push_back(byte);
  }
  EXPECT_EQ(nibbles % 2, 0) << "odd number of hex digits";
  return out;
}

Ipv6Addr addr(std::string_view text) {
  Bytes b = hex(text);
  Ipv6Addr a{};
  EXPECT_EQ(b.size(), a.size());
  std::copy_n(b.begin(), std::min(b.size(), a.size()), a.begin());
  return a;
}

template <typename T>
Error error_of(const Result<T>& r) {
  return r ? Error::kOk : r.error();
}

Bytes encode_or_die(const Datagram& d) {
  Bytes out(encoded_size(d));
  auto n = encode(d, out);
  EXPECT_TRUE(n.has_value()) << error_name(error_of(n));
  if (n) {
    EXPECT_EQ(*n, out.size());
  }
  return out;
}

Bytes encode_transport_or_die(const TransportPacket& p) {
  Bytes out(transport_header_bytes(p.bth.opcode) + p.payload_len + ((0u - p.payload_len) & 3));
  auto n = encode_transport(p, out);
  EXPECT_TRUE(n.has_value()) << error_name(error_of(n));
  if (n) {
    EXPECT_EQ(*n, out.size());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Independent reference implementations (bit by bit, no tables) for the integrity fields.

uint32_t ref_crc32_update(uint32_t state, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    state ^= p[i];
    for (int b = 0; b < 8; ++b)
      state = (state & 1) ? (state >> 1) ^ 0xEDB88320u : state >> 1;
  }
  return state;
}

size_t srh_bytes_of(const Bytes& d) {
  return d[6] == 43 ? 8 + 8 * size_t{d[41]} : 0;
}

// The MRC ICRC written out from its definition in codec.h / docs/wire-format.md.
uint32_t ref_icrc(const Bytes& d) {
  const size_t srh = srh_bytes_of(d);
  Bytes m(8, 0xFF);
  Bytes ip(d.begin(), d.begin() + 40);
  ip[0] |= 0x0F;
  ip[1] = ip[2] = ip[3] = 0xFF;
  const size_t plen = (size_t{d[4]} << 8 | d[5]) - srh;
  ip[4] = static_cast<uint8_t>(plen >> 8);
  ip[5] = static_cast<uint8_t>(plen);
  ip[6] = srh ? d[40] : d[6];
  ip[7] = 0xFF;
  std::fill(ip.begin() + 24, ip.end(), 0xFF);
  m.insert(m.end(), ip.begin(), ip.end());
  Bytes rest(d.begin() + 40 + srh, d.end() - 4);
  rest[6] = rest[7] = 0xFF;  // UDP checksum
  rest[8 + 4] = 0xFF;        // BTH resv8a
  m.insert(m.end(), rest.begin(), rest.end());
  return ~ref_crc32_update(0xFFFFFFFF, m.data(), m.size());
}

uint32_t stored_icrc(const Bytes& d) {
  const size_t n = d.size();
  return uint32_t{d[n - 4]} | uint32_t{d[n - 3]} << 8 | uint32_t{d[n - 2]} << 16 |
         uint32_t{d[n - 1]} << 24;
}

// RFC 1071 sum of big-endian 16-bit words.
uint32_t ref_sum(const uint8_t* p, size_t n, uint32_t acc) {
  for (size_t i = 0; i < n; i += 2)
    acc += uint32_t{p[i]} << 8 | (i + 1 < n ? p[i + 1] : 0);
  return acc;
}

// The UDP checksum field a correct sender writes (final destination: SRH segments[0]).
uint16_t ref_udp_checksum(const Bytes& d) {
  const size_t srh = srh_bytes_of(d);
  const uint8_t* final_dst = srh ? d.data() + 40 + 8 : d.data() + 24;
  const size_t udp_len = d.size() - 40 - srh;
  Bytes udp(d.begin() + 40 + srh, d.end());
  udp[6] = udp[7] = 0;
  uint32_t acc = ref_sum(d.data() + 8, 16, 0);
  acc = ref_sum(final_dst, 16, acc);
  acc += static_cast<uint32_t>(udp_len >> 16) + static_cast<uint32_t>(udp_len & 0xFFFF) + 17;
  acc = ref_sum(udp.data(), udp.size(), acc);
  while (acc >> 16)
    acc = (acc & 0xFFFF) + (acc >> 16);
  const uint16_t c = static_cast<uint16_t>(~acc);
  return c == 0 ? 0xFFFF : c;
}

// After patching bytes of an encoded datagram: make the ICRC and UDP checksum valid again.
void reseal(Bytes& d) {
  const uint32_t c = ref_icrc(d);
  for (int i = 0; i < 4; ++i)
    d[d.size() - 4 + i] = static_cast<uint8_t>(c >> (8 * i));
  const size_t u = 40 + srh_bytes_of(d);
  const uint16_t s = ref_udp_checksum(d);
  d[u + 6] = static_cast<uint8_t>(s >> 8);
  d[u + 7] = static_cast<uint8_t>(s);
}

// ---------------------------------------------------------------------------------------------
// Hand-written examples. The bytes in each golden string were written field by field from
// docs/wire-format.md; the ICRC and UDP checksum were computed with Python's zlib.crc32 and
// an RFC 1071 sum, independently of this code.

const uint8_t kHello[] = {'h', 'e', 'l', 'l', 'o'};
const uint8_t kEightBytes[] = {1, 2, 3, 4, 5, 6, 7, 8};

const Ipv6Addr kSrc = addr("fd00 0000 0000 0000 0000 0000 0000 0001");
const Ipv6Addr kDst = addr("fd00 0000 0000 0000 0000 0000 0000 0002");

Datagram example_write_only() {
  Datagram d;
  d.ip.traffic_class = kDscpData << 2 | kEcnEct0;
  d.ip.flow_label = 0xABCDE;
  d.ip.hop_limit = 64;
  d.ip.src = kSrc;
  d.ip.dst = kDst;
  d.udp.src_port = 0xC123;
  TransportPacket& p = d.pkt;
  p.bth.opcode = Opcode::kWriteOnly;
  p.bth.dest_qp = 0x012345;
  p.bth.ack_req = true;
  p.bth.psn = 0xABCDEF;
  p.reth = {.va = 0x00007F00DEADBEEF, .rkey = 0x1234ABCD, .dma_len = 5};
  p.data = {.msg_num = 0x102,
            .pkt_index = 3,
            .pkt_count = 16,
            .tx_time_ps = 0x123456789,
            .ev_index = 0x0203,
            .flags = DataExt::kRetransmit | DataExt::kAckNow};
  p.payload = kHello;
  p.payload_len = 5;
  return d;
}
constexpr std::string_view kWriteOnlyGolden = R"(
  66AABCDE 0048 11 40                                  # IPv6: v6 tc 0x6A flow 0xABCDE, len 72
  fd000000000000000000000000000001                     # src
  fd000000000000000000000000000002                     # dst
  C123 12B7 0048 388D                                  # UDP: sport, 4791, len, checksum
  0A 70 FFFF 00 012345 80 ABCDEF                       # BTH: WRITE ONLY, M, pad 3, QP, A, PSN
  00007F00DEADBEEF 1234ABCD 00000005                   # RETH: va, rkey, dma len
  00000102 00000003 00000010 0203 0009                 # data ext: msg, index, count, EV, flags
  0000000123456789                                     # data ext: tx time (ps)
  68656C6C6F 000000                                    # "hello" + 3 pad bytes
  024BCDED                                             # ICRC 0xEDCD4B02, LSB first
)";

Datagram example_write_only_imm_srh() {
  Datagram d;
  d.ip.traffic_class = kDscpData << 2;
  d.ip.flow_label = 1;
  d.ip.hop_limit = 63;
  d.ip.src = kSrc;
  const uint16_t usids[] = {0x0100, 0x0200};
  d.ip.dst = usid_carrier(0xFCBBBB00, usids);
  d.has_srh = true;
  d.srh.segments_left = 1;
  d.srh.last_entry = 1;
  d.srh.tag = 7;
  d.srh.num_segments = 2;
  d.srh.segments[0] = addr("fd00 0000 0000 0000 0000 0000 0000 0009");
  d.srh.segments[1] = d.ip.dst;
  d.udp.src_port = 0xC000;
  TransportPacket& p = d.pkt;
  p.bth.opcode = Opcode::kWriteOnlyImm;
  p.bth.solicited = true;
  p.bth.pkey = 0x8001;
  p.bth.dest_qp = 7;
  p.bth.psn = 0x10;
  p.reth = {.va = 0x100000, .rkey = 0x100, .dma_len = 8};
  p.imm = 0xCAFEF00D;
  p.data = {.msg_num = 0,
            .pkt_index = 0,
            .pkt_count = 1,
            .tx_time_ps = 1'000'000,
            .ev_index = 1,
            .flags = DataExt::kLastOfMessage | DataExt::kHasImm};
  p.payload = kEightBytes;
  p.payload_len = 8;
  return d;
}
constexpr std::string_view kWriteOnlyImmSrhGolden = R"(
  66800001 0074 2B 3F                                  # IPv6: tc 0x68, flow 1, len 116, SRH
  fd000000000000000000000000000001                     # src
  fcbbbb00010002000000000000000000                     # dst: uSID carrier fcbb:bb00 / 0100 0200
  11 04 04 01 01 00 0007                               # SRH: UDP, len 4, type 4, SL 1, LE 1, tag
  fd000000000000000000000000000009                     # segment list [0] (final)
  fcbbbb00010002000000000000000000                     # segment list [1] (= DA)
  C000 12B7 004C BD23                                  # UDP
  0B C0 8001 00 000007 00 000010                       # BTH: WRITE ONLY IMM, SE M, pkey 0x8001
  0000000000100000 00000100 00000008                   # RETH
  CAFEF00D                                             # ImmDt
  00000000 00000000 00000001 0001 0006                 # data ext: last of message, has imm
  00000000000F4240                                     # tx time 1 us
  0102030405060708                                     # payload, no pad
  6AD57031                                             # ICRC 0x3170D56A
)";

// A WRITE ONLY that a switch trimmed: DSCP 46, no payload, RETH keeps the original length.
Datagram example_trimmed() {
  Datagram d;
  d.ip.traffic_class = kDscpTrimmed << 2;
  d.ip.hop_limit = 64;
  d.ip.src = kSrc;
  d.ip.dst = kDst;
  d.udp.src_port = 0xC005;
  TransportPacket& p = d.pkt;
  p.bth.opcode = Opcode::kWriteOnly;
  p.bth.dest_qp = 0x012345;
  p.bth.psn = 0x20;
  p.reth = {.va = 0x1000, .rkey = 1, .dma_len = 4096};
  p.data = {.msg_num = 1,
            .pkt_index = 0,
            .pkt_count = 1,
            .tx_time_ps = 100,
            .ev_index = 5,
            .flags = DataExt::kLastOfMessage};
  return d;
}
constexpr std::string_view kTrimmedGolden = R"(
  6B800000 0040 11 40                                  # IPv6: DSCP 46 (trimmed), len 64
  fd000000000000000000000000000001
  fd000000000000000000000000000002
  C005 12B7 0040 1FF2
  0A 40 FFFF 00 012345 00 000020
  0000000000001000 00000001 00001000                   # RETH: dma len 4096, no payload follows
  00000001 00000000 00000001 0005 0002 0000000000000064
  AF2D1579
)";

TransportPacket example_ack() {
  TransportPacket p;
  p.bth.opcode = Opcode::kAck;
  p.bth.dest_qp = 0x42;
  p.bth.psn = 0x100;
  p.aeth = {.syndrome = 0x1F, .msn = 7};
  SackExt& s = p.sack;
  s.cum_psn = 0x100;
  s.sack_base = 0x101;
  s.bitmap = {0x8000000000000005, 0x1};
  s.received_bytes = 0x100000000;
  s.service_time_ns = 1500;
  s.echo_count = 2;
  s.ports_down = 0x2;  // port 1 down
  s.echo[0] = {.psn = 0x102, .ev_index = 7, .flags = AckEcho::kEcnCe};
  s.echo[1] = {.psn = 0x164, .ev_index = 0x123, .flags = AckEcho::kTrimmed | AckEcho::kRetransmit};
  return p;
}
constexpr std::string_view kAckGolden = R"(
  11 40 FFFF 00 000042 00 000100                       # BTH: ACKNOWLEDGE, PSN 0x100
  1F 000007                                            # AETH: ACK (credits 31 = none), MSN 7
  00000100 00000101                                    # SACK: cumulative PSN, bitmap base
  8000000000000005 0000000000000001                    # bitmap words 0, 1
  0000000100000000 000005DC                            # received bytes, service time 1500 ns
  02 000002                                            # echo count, ports down: port 1
  00000102 0007 01 00                                  # echo 0: PSN, EV, ECN CE
  00000164 0123 06 00                                  # echo 1: trimmed | retransmit
  0000000000000000 0000000000000000 0000000000000000   # echoes 2-7: zero
  0000000000000000 0000000000000000 0000000000000000
)";

TransportPacket example_cnp() {
  TransportPacket p;
  p.bth.opcode = Opcode::kCnp;
  p.bth.mig_req = false;
  p.bth.becn = true;
  p.bth.dest_qp = 0xD2;
  return p;
}
constexpr std::string_view kCnpGolden = R"(
  81 00 FFFF 40 0000D2 00 000000                       # BTH: CNP, BECN, QP 0xD2 (IBTA A17.9.2)
  00000000000000000000000000000000                     # 16 reserved bytes
)";

TransportPacket example_trim_nack() {
  TransportPacket p;
  p.bth.opcode = Opcode::kTrimNack;
  p.bth.dest_qp = 0x42;
  p.bth.psn = 0x100;
  p.aeth = {.syndrome = 0x60, .msn = 7};
  p.nack = {.psn = 0x105, .cum_psn = 0x100, .ev_index = 0x11};
  return p;
}
constexpr std::string_view kTrimNackGolden = R"(
  C0 40 FFFF 00 000042 00 000100                       # BTH: MRC trim NACK
  60 000007                                            # AETH
  00000105 00000100 0011 0000                          # trimmed PSN, cumulative PSN, EV, rsvd
)";

TransportPacket example_probe(bool reply) {
  TransportPacket p;
  p.bth.opcode = reply ? Opcode::kProbeReply : Opcode::kProbe;
  p.bth.dest_qp = 1;
  p.bth.ack_req = !reply;
  p.probe = {.probe_id = 0x0102030405060708,
             .tx_time_ps = 1'000'000,
             .service_time_ns = reply ? 250u : 0u,
             .ev_index = 4,
             .port = 2,
             .flags = static_cast<uint8_t>(reply ? 0x80 : 0)};
  return p;
}
constexpr std::string_view kProbeGolden = R"(
  C1 40 FFFF 00 000001 80 000000                       # BTH: MRC probe, A
  0102030405060708 00000000000F4240                    # probe id, tx time
  00000000 0004 02 00                                  # service time, EV, port, flags
)";
constexpr std::string_view kProbeReplyGolden = R"(
  C2 40 FFFF 00 000001 00 000000                       # BTH: MRC probe reply
  0102030405060708 00000000000F4240
  000000FA 0004 02 80                                  # service time 250 ns
)";

// A plain IPv6/UDP envelope around `p`.
Datagram envelope(const TransportPacket& p) {
  Datagram d;
  d.ip.traffic_class = kDscpData << 2;
  d.ip.flow_label = 0x12345;
  d.ip.src = kSrc;
  d.ip.dst = kDst;
  d.udp.src_port = 0xC777;
  d.pkt = p;
  return d;
}

// The datagram `d` as decode() reports it after encode(): lengths, next headers, pad count
// and checksum filled in.
Datagram as_encoded(Datagram d, const Bytes& wire) {
  const size_t srh = d.has_srh ? 8 + 16 * size_t{d.srh.num_segments} : 0;
  d.ip.payload_length = static_cast<uint16_t>(wire.size() - 40);
  d.ip.next_header = d.has_srh ? kIpProtoRouting : kIpProtoUdp;
  if (d.has_srh) d.srh.next_header = kIpProtoUdp;
  d.udp.length = static_cast<uint16_t>(wire.size() - 40 - srh);
  d.udp.checksum = static_cast<uint16_t>(wire[40 + srh + 6] << 8 | wire[40 + srh + 7]);
  d.pkt.bth.pad_count = static_cast<uint8_t>((0u - d.pkt.payload_len) & 3);
  return d;
}

// "" when equal, else the first differing part. Payloads compare by content.
std::string diff(const TransportPacket& a, const TransportPacket& b) {
  if (!(a.bth == b.bth)) return "bth";
  if (!(a.reth == b.reth)) return "reth";
  if (a.imm != b.imm) return "imm";
  if (!(a.aeth == b.aeth)) return "aeth";
  if (!(a.data == b.data)) return "data ext";
  if (!(a.sack == b.sack)) return "sack ext";
  if (!(a.nack == b.nack)) return "trim nack ext";
  if (!(a.probe == b.probe)) return "probe ext";
  if (a.payload_len != b.payload_len) return "payload_len";
  if (a.payload_len > 0 && (a.payload == nullptr || b.payload == nullptr ||
                            !std::equal(a.payload, a.payload + a.payload_len, b.payload))) {
    return "payload bytes";
  }
  return "";
}
std::string diff(const Datagram& a, const Datagram& b) {
  if (!(a.ip == b.ip)) return "ipv6";
  if (a.has_srh != b.has_srh) return "has_srh";
  if (!(a.srh == b.srh)) return "srh";
  if (!(a.udp == b.udp)) return "udp";
  return diff(a.pkt, b.pkt);
}

// ---------------------------------------------------------------------------------------------
// Opcode table

TEST(OpcodeTable, opcode_name__names_and_header_sizes) {
  EXPECT_STREQ(opcode_name(Opcode::kWriteOnly), "RC_RDMA_WRITE_ONLY");
  EXPECT_STREQ(opcode_name(Opcode::kWriteOnlyImm), "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE");
  EXPECT_STREQ(opcode_name(Opcode::kAck), "RC_ACKNOWLEDGE");
  EXPECT_STREQ(opcode_name(Opcode::kCnp), "ROCE_CNP");
  EXPECT_STREQ(opcode_name(Opcode::kTrimNack), "MRC_TRIM_NACK");
  EXPECT_STREQ(opcode_name(Opcode::kProbe), "MRC_PROBE");
  EXPECT_STREQ(opcode_name(Opcode::kProbeReply), "MRC_PROBE_REPLY");
  EXPECT_STREQ(opcode_name(static_cast<Opcode>(0x04)), "UNKNOWN");

  EXPECT_EQ(transport_header_bytes(Opcode::kWriteOnly), 12u + 16 + 24);
  EXPECT_EQ(transport_header_bytes(Opcode::kWriteOnlyImm), 12u + 16 + 4 + 24);
  EXPECT_EQ(transport_header_bytes(Opcode::kAck), 12u + 4 + 104);
  EXPECT_EQ(transport_header_bytes(Opcode::kCnp), 12u + 16);
  EXPECT_EQ(transport_header_bytes(Opcode::kTrimNack), 12u + 4 + 12);
  EXPECT_EQ(transport_header_bytes(Opcode::kProbe), 12u + 24);
  EXPECT_EQ(transport_header_bytes(Opcode::kProbeReply), 12u + 24);
  EXPECT_EQ(transport_header_bytes(static_cast<Opcode>(0x04)), 0u);
}

// ---------------------------------------------------------------------------------------------
// encode: golden bytes

TEST(Encode, encode__write_only_golden) {
  const Bytes wire = encode_or_die(example_write_only());
  EXPECT_EQ(wire, hex(kWriteOnlyGolden));
}

TEST(Encode, encode__write_only_imm_with_srh_golden) {
  const Bytes wire = encode_or_die(example_write_only_imm_srh());
  EXPECT_EQ(wire, hex(kWriteOnlyImmSrhGolden));
}

TEST(Encode, encode__trimmed_write_only_golden) {
  const Bytes wire = encode_or_die(example_trimmed());
  EXPECT_EQ(wire, hex(kTrimmedGolden));
}

TEST(EncodeTransport, encode_transport__golden_per_opcode) {
  EXPECT_EQ(encode_transport_or_die(example_ack()), hex(kAckGolden));
  EXPECT_EQ(encode_transport_or_die(example_cnp()), hex(kCnpGolden));
  EXPECT_EQ(encode_transport_or_die(example_trim_nack()), hex(kTrimNackGolden));
  EXPECT_EQ(encode_transport_or_die(example_probe(false)), hex(kProbeGolden));
  EXPECT_EQ(encode_transport_or_die(example_probe(true)), hex(kProbeReplyGolden));
  // The data packets' transport bytes are the middle of their datagram goldens.
  const Bytes wo = hex(kWriteOnlyGolden);
  EXPECT_EQ(encode_transport_or_die(example_write_only().pkt),
            Bytes(wo.begin() + 48, wo.end() - 4));
  const Bytes woi = hex(kWriteOnlyImmSrhGolden);
  EXPECT_EQ(encode_transport_or_die(example_write_only_imm_srh().pkt),
            Bytes(woi.begin() + 40 + 40 + 8, woi.end() - 4));
}

TEST(Encode, encode__datagram_is_envelope_plus_transport_plus_icrc) {
  for (const TransportPacket& p : {example_ack(), example_cnp(), example_trim_nack(),
                                   example_probe(false), example_probe(true)}) {
    const Bytes wire = encode_or_die(envelope(p));
    const Bytes transport = encode_transport_or_die(p);
    ASSERT_EQ(wire.size(), 48 + transport.size() + 4) << opcode_name(p.bth.opcode);
    EXPECT_TRUE(std::equal(transport.begin(), transport.end(), wire.begin() + 48));
    EXPECT_EQ(stored_icrc(wire), ref_icrc(wire));
    EXPECT_EQ(wire[46] << 8 | wire[47], ref_udp_checksum(wire));
  }
}

TEST(Encode, encode__reserved_bits_written_as_zero) {
  Datagram d = example_write_only();
  d.pkt.data.flags = 0xFFFF;
  const Bytes wire = encode_or_die(d);
  EXPECT_EQ(wire[48 + 28 + 14], 0x00);
  EXPECT_EQ(wire[48 + 28 + 15], 0x0F);

  TransportPacket ack = example_ack();
  ack.sack.echo[0].flags = 0xFF;
  ack.sack.echo[5] = {.psn = 9, .ev_index = 9, .flags = 1};  // beyond echo_count
  ack.nack.reserved = 0xFFFF;                                // not part of an ACK
  EXPECT_EQ(encode_transport_or_die(ack)[16 + 40 + 6], 0x0F);
  Bytes expected = hex(kAckGolden);
  expected[16 + 40 + 6] = 0x0F;
  EXPECT_EQ(encode_transport_or_die(ack), expected);

  TransportPacket nack = example_trim_nack();
  nack.nack.reserved = 0xFFFF;
  EXPECT_EQ(encode_transport_or_die(nack), hex(kTrimNackGolden));
}

TEST(Encode, encode__null_payload_is_written_as_zeros) {
  Datagram d = example_write_only();
  d.pkt.payload = nullptr;
  const Bytes wire = encode_or_die(d);
  const size_t at = 48 + 52;
  EXPECT_EQ(Bytes(wire.begin() + at, wire.begin() + at + 8), Bytes(8, 0));
}

TEST(Encode, encode__derives_next_headers_from_has_srh) {
  Datagram d = example_write_only_imm_srh();
  d.ip.next_header = 99;
  d.srh.next_header = 99;
  EXPECT_EQ(encode_or_die(d), hex(kWriteOnlyImmSrhGolden));
}

TEST(Encode, encoded_size__matches_encode) {
  EXPECT_EQ(encoded_size(example_write_only()), 112u);
  EXPECT_EQ(encoded_size(example_write_only_imm_srh()), 156u);
  EXPECT_EQ(encoded_size(envelope(example_ack())), 40u + 8 + 120 + 4);
}

// encode: every error, and `out` untouched on error.
TEST(Encode, encode__rejects_invalid_datagrams) {
  struct Case {
    const char* what;
    void (*mutate)(Datagram&);
    Error want;
  };
  const Case cases[] = {
      {"unknown opcode", [](Datagram& d) { d.pkt.bth.opcode = static_cast<Opcode>(4); },
       Error::kBadOpcode},
      {"tver", [](Datagram& d) { d.pkt.bth.tver = 1; }, Error::kBadVersion},
      {"flow label > 20 bits", [](Datagram& d) { d.ip.flow_label = 1 << 20; },
       Error::kInvalidArgument},
      {"srh without segments",
       [](Datagram& d) {
         d.has_srh = true;
         d.srh.num_segments = 0;
       },
       Error::kBadSrh},
      {"srh too many segments",
       [](Datagram& d) {
         d.has_srh = true;
         d.srh.num_segments = kMaxSrhSegments + 1;
         d.srh.last_entry = kMaxSrhSegments;
       },
       Error::kBadSrh},
      {"srh last entry", [](Datagram& d) { d.has_srh = true, d.srh.num_segments = 2; },
       Error::kBadSrh},
      {"srh segments left",
       [](Datagram& d) {
         d.has_srh = true;
         d.srh.num_segments = 1;
         d.srh.segments_left = 1;
       },
       Error::kBadSrh},
      {"udp port", [](Datagram& d) { d.udp.dst_port = 4792; }, Error::kBadUdpPort},
      {"payload on an ACK",
       [](Datagram& d) {
         d.pkt.bth.opcode = Opcode::kAck;
         d.pkt.sack = {};
       },
       Error::kBadLength},
      {"qpn > 24 bits", [](Datagram& d) { d.pkt.bth.dest_qp = 1 << 24; }, Error::kBadExtension},
      {"psn > 24 bits", [](Datagram& d) { d.pkt.bth.psn = 1 << 24; }, Error::kBadExtension},
      {"pkt_count 0", [](Datagram& d) { d.pkt.data.pkt_count = 0; }, Error::kBadExtension},
      {"pkt_index >= pkt_count", [](Datagram& d) { d.pkt.data.pkt_index = 16; },
       Error::kBadExtension},
      {"dma_len != payload", [](Datagram& d) { d.pkt.reth.dma_len = 6; }, Error::kBadExtension},
      {"trimmed DSCP but payload present",
       [](Datagram& d) {
         d.ip.traffic_class = kDscpTrimmed << 2;
         d.pkt.reth.dma_len = 4096;
       },
       Error::kBadExtension},
      {"payload too big for IPv6",
       [](Datagram& d) {
         d.pkt.payload = nullptr;
         d.pkt.payload_len = d.pkt.reth.dma_len = 65536 - 8 - 52 - 4;  // IPv6 length 65536
       },
       Error::kTooBig},
  };
  for (const Case& c : cases) {
    Datagram d = example_write_only();
    c.mutate(d);
    Bytes out(70000, 0xAA);
    EXPECT_EQ(error_of(encode(d, out)), c.want) << c.what;
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xAA; }))
        << c.what << ": output touched";
  }

  Bytes buf(200);
  TransportPacket ack = example_ack();
  ack.aeth.msn = 1 << 24;
  EXPECT_EQ(error_of(encode(envelope(ack), buf)), Error::kBadExtension);
  ack = example_ack();
  ack.sack.echo_count = kMaxAckEchoes + 1;
  EXPECT_EQ(error_of(encode(envelope(ack), buf)), Error::kBadExtension);
  ack = example_ack();
  ack.sack.echo[1].psn = 1 << 24;
  EXPECT_EQ(error_of(encode(envelope(ack), buf)), Error::kBadExtension);
  ack = example_ack();
  ack.sack.ports_down = 1 << wire::kSackPortsDownBits;  // port 24: beyond the bitmap
  EXPECT_EQ(error_of(encode(envelope(ack), buf)), Error::kBadExtension);
  TransportPacket nack = example_trim_nack();
  nack.nack.cum_psn = 1 << 24;
  EXPECT_EQ(error_of(encode(envelope(nack), buf)), Error::kBadExtension);
}

TEST(Encode, encode__largest_datagram_fits_the_ipv6_length) {
  Datagram d = example_write_only();
  d.pkt.payload = nullptr;
  // Payload + pad is a multiple of 4, so the largest IPv6 payload length is 65532.
  d.pkt.payload_len = d.pkt.reth.dma_len = 65532 - 8 - 52 - 4;
  Bytes out(encoded_size(d));
  ASSERT_EQ(out.size(), 40u + 65532);
  ASSERT_TRUE(encode(d, out).has_value());
  auto got = decode(out, {.verify_icrc = true, .verify_udp_checksum = true});
  ASSERT_TRUE(got.has_value()) << error_name(got.error());
  EXPECT_EQ(got->pkt.payload_len, d.pkt.payload_len);
}

TEST(Encode, encode__output_one_byte_short_is_too_big) {
  const Datagram d = example_write_only();
  Bytes out(encoded_size(d) - 1);
  EXPECT_EQ(error_of(encode(d, out)), Error::kTooBig);
  Bytes tout(transport_header_bytes(Opcode::kWriteOnly) + 7);
  EXPECT_EQ(error_of(encode_transport(d.pkt, tout)), Error::kTooBig);
}

// ---------------------------------------------------------------------------------------------
// decode: examples

TEST(Decode, decode__golden_datagrams_round_trip) {
  for (const Datagram& d :
       {example_write_only(), example_write_only_imm_srh(), example_trimmed(),
        envelope(example_ack()), envelope(example_cnp()), envelope(example_trim_nack()),
        envelope(example_probe(false)), envelope(example_probe(true))}) {
    const Bytes wire = encode_or_die(d);
    auto got = decode(wire, {.verify_icrc = true, .verify_udp_checksum = true});
    ASSERT_TRUE(got.has_value()) << opcode_name(d.pkt.bth.opcode) << ": "
                                 << error_name(got.error());
    EXPECT_EQ(diff(*got, as_encoded(d, wire)), "") << opcode_name(d.pkt.bth.opcode);
    if (got->pkt.payload_len > 0) {
      EXPECT_EQ(got->pkt.payload,
                wire.data() + wire.size() - 4 - got->pkt.bth.pad_count - got->pkt.payload_len)
          << "payload points into the input";
    } else {
      EXPECT_EQ(got->pkt.payload, nullptr);
    }
  }
}

TEST(Decode, decode__trimmed_packet_keeps_original_dma_len) {
  auto got = decode(hex(kTrimmedGolden));
  ASSERT_TRUE(got.has_value()) << error_name(got.error());
  EXPECT_EQ(got->ip.dscp(), kDscpTrimmed);
  EXPECT_EQ(got->pkt.payload_len, 0u);
  EXPECT_EQ(got->pkt.reth.dma_len, 4096u);
}

TEST(Decode, decode__reserved_bits_are_ignored) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire[48 + 4] |= 0x3F;       // BTH resv6
  wire[48 + 8] |= 0x7F;       // BTH resv7
  wire[48 + 28 + 14] = 0xFF;  // data ext flags: reserved bits set
  reseal(wire);
  auto got = decode(wire);
  ASSERT_TRUE(got.has_value()) << error_name(got.error());
  EXPECT_EQ(got->pkt.data.flags, DataExt::kRetransmit | DataExt::kAckNow);
  EXPECT_EQ(got->pkt.bth.dest_qp, 0x012345u);
  EXPECT_EQ(got->pkt.bth.psn, 0xABCDEFu);

  Bytes ack = encode_or_die(envelope(example_ack()));
  ack[48 + 16 + 40 + 6] |= 0xF0;     // echo 0 flags: reserved bits
  ack[48 + 16 + 40 + 7] = 0xFF;      // echo 0 reserved byte
  ack[48 + 16 + 40 + 8 * 5] = 0xFF;  // echo 5, beyond echo_count
  reseal(ack);
  auto got_ack = decode(ack);
  ASSERT_TRUE(got_ack.has_value()) << error_name(got_ack.error());
  EXPECT_EQ(got_ack->pkt.sack, example_ack().sack);
}

TEST(Decode, decode__fecn_becn_and_udp_checksum_are_outside_the_icrc) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire[48 + 4] |= 0xC0;  // a switch marks FECN and BECN
  wire[46] ^= 0x55;      // ...and nobody fixes the UDP checksum
  auto got = decode(wire);
  ASSERT_TRUE(got.has_value()) << error_name(got.error());
  EXPECT_TRUE(got->pkt.bth.fecn);
  EXPECT_TRUE(got->pkt.bth.becn);
}

// ---------------------------------------------------------------------------------------------
// decode: every rejection, each triggered on purpose.

Error decode_error(const Bytes& wire, DecodeOptions opt = {}) {
  return error_of(decode(wire, opt));
}

void set16(Bytes& d, size_t at, uint16_t v) {
  d[at] = static_cast<uint8_t>(v >> 8);
  d[at + 1] = static_cast<uint8_t>(v);
}
void set32(Bytes& d, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    d[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

// Cut `d` to `size` bytes and fix the IPv6 payload length and (when present) UDP length so
// that only the inner layers see the truncation.
Bytes cut_consistently(const Bytes& d, size_t size) {
  Bytes c(d.begin(), d.begin() + size);
  if (size >= 40) set16(c, 4, static_cast<uint16_t>(size - 40));
  const size_t udp = 40 + srh_bytes_of(d);
  if (size >= udp + 8) set16(c, udp + 4, static_cast<uint16_t>(size - udp));
  return c;
}

TEST(Decode, decode__truncated_at_each_layer) {
  const Bytes wo = hex(kWriteOnlyGolden);
  const Bytes srh = hex(kWriteOnlyImmSrhGolden);
  EXPECT_EQ(decode_error(Bytes(wo.begin(), wo.begin() + 39)), Error::kTruncated) << "IPv6";
  EXPECT_EQ(decode_error(Bytes(wo.begin(), wo.end() - 1)), Error::kTruncated) << "IPv6 length";
  EXPECT_EQ(decode_error(cut_consistently(srh, 44)), Error::kTruncated) << "SRH fixed part";
  EXPECT_EQ(decode_error(cut_consistently(srh, 60)), Error::kTruncated) << "SRH segments";
  EXPECT_EQ(decode_error(cut_consistently(wo, 45)), Error::kTruncated) << "UDP";
  EXPECT_EQ(decode_error(cut_consistently(wo, 48 + 11)), Error::kTruncated) << "BTH";
  EXPECT_EQ(decode_error(cut_consistently(wo, 48 + 12 + 3)), Error::kTruncated) << "no ICRC";
  EXPECT_EQ(decode_error(cut_consistently(wo, 48 + 40)), Error::kTruncated) << "RETH/ext";
}

TEST(Decode, decode__bad_version) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire[0] = 0x46;  // IPv4
  EXPECT_EQ(decode_error(wire), Error::kBadVersion);
  wire = hex(kWriteOnlyGolden);
  wire[48 + 1] |= 0x01;  // BTH TVer 1
  reseal(wire);
  EXPECT_EQ(decode_error(wire), Error::kBadVersion);
}

TEST(Decode, decode__bad_next_header) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire[6] = 6;  // TCP
  EXPECT_EQ(decode_error(wire), Error::kBadNextHeader);
  wire = hex(kWriteOnlyImmSrhGolden);
  wire[40] = 59;  // SRH followed by "no next header"
  EXPECT_EQ(decode_error(wire), Error::kBadNextHeader);
}

TEST(Decode, decode__bad_srh) {
  const Bytes good = hex(kWriteOnlyImmSrhGolden);
  Bytes wire = good;
  wire[42] = 3;  // routing type: RPL source route
  EXPECT_EQ(decode_error(wire), Error::kBadSrh) << "type";
  wire = good;
  wire[44] = 0;  // last entry 0, but hdr ext len says 2 segments
  EXPECT_EQ(decode_error(wire), Error::kBadSrh) << "hdr ext len vs last entry";
  wire = good;
  wire[43] = 2;  // segments left > last entry
  EXPECT_EQ(decode_error(wire), Error::kBadSrh) << "segments left";

  // Five segments: consistent but more than kMaxSrhSegments.
  Datagram d = example_write_only();
  d.has_srh = true;
  d.srh.num_segments = 4;
  d.srh.last_entry = 3;
  Bytes four = encode_or_die(d);
  Bytes five(four.begin(), four.begin() + 40 + 8 + 64);
  five.insert(five.end(), 16, 0x11);
  five.insert(five.end(), four.begin() + 40 + 8 + 64, four.end());
  set16(five, 4, static_cast<uint16_t>(five.size() - 40));
  five[41] = 10;
  five[44] = 4;
  EXPECT_EQ(decode_error(five), Error::kBadSrh) << "too many segments";
}

TEST(Decode, decode__bad_udp_port) {
  Bytes wire = hex(kWriteOnlyGolden);
  set16(wire, 42, 4792);
  EXPECT_EQ(decode_error(wire), Error::kBadUdpPort);
}

TEST(Decode, decode__bad_length) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire.push_back(0);  // one byte beyond the IPv6 payload length
  EXPECT_EQ(decode_error(wire), Error::kBadLength) << "trailing byte";
  wire = hex(kWriteOnlyGolden);
  set16(wire, 44, 0x0047);  // UDP length one short
  EXPECT_EQ(decode_error(wire), Error::kBadLength) << "UDP length";
  // An ACK with four payload bytes.
  Bytes ack = encode_or_die(envelope(example_ack()));
  ack.insert(ack.end() - 4, 4, 0x00);
  set16(ack, 4, static_cast<uint16_t>(ack.size() - 40));
  set16(ack, 44, static_cast<uint16_t>(ack.size() - 40));
  reseal(ack);
  EXPECT_EQ(decode_error(ack), Error::kBadLength) << "payload on ACK";
}

TEST(Decode, decode__bad_opcode) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire[48] = 0x04;  // RC SEND ONLY: not used by MRC
  reseal(wire);
  EXPECT_EQ(decode_error(wire), Error::kBadOpcode);
}

TEST(Decode, decode__bad_pad_count) {
  // Trimmed packet (no payload) claiming 2 pad bytes.
  Bytes wire = hex(kTrimmedGolden);
  wire[48 + 1] |= 0x20;
  reseal(wire);
  EXPECT_EQ(decode_error(wire), Error::kBadPadCount) << "pad > bytes";
  // "hello" + 3 pad bytes, but the BTH says 1: payload + pad not a multiple of 4 is fine on
  // its face (8 bytes), so shorten the packet by one byte instead.
  wire = hex(kWriteOnlyGolden);
  wire.erase(wire.end() - 5);  // drop one pad byte: 7 bytes of payload + pad
  set16(wire, 4, static_cast<uint16_t>(wire.size() - 40));
  set16(wire, 44, static_cast<uint16_t>(wire.size() - 40));
  reseal(wire);
  EXPECT_EQ(decode_error(wire), Error::kBadPadCount) << "not a multiple of 4";
}

TEST(Decode, decode__bad_icrc) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire[wire.size() - 6] ^= 0x01;  // one payload bit
  EXPECT_EQ(decode_error(wire), Error::kBadIcrc);
  EXPECT_EQ(decode_error(wire, {.verify_icrc = false}), Error::kOk);
  wire = hex(kWriteOnlyGolden);
  wire[wire.size() - 1] ^= 0x80;  // the ICRC itself
  EXPECT_EQ(decode_error(wire), Error::kBadIcrc);
}

TEST(Decode, decode__bad_udp_checksum_only_when_asked) {
  Bytes wire = hex(kWriteOnlyGolden);
  wire[47] ^= 0x01;
  EXPECT_EQ(decode_error(wire), Error::kOk);
  EXPECT_EQ(decode_error(wire, {.verify_udp_checksum = true}), Error::kBadUdpChecksum);
  set16(wire, 46, 0);  // "no checksum": accepted
  EXPECT_EQ(decode_error(wire, {.verify_udp_checksum = true}), Error::kOk);
  EXPECT_EQ(decode_error(hex(kWriteOnlyImmSrhGolden), {.verify_udp_checksum = true}), Error::kOk);
}

TEST(Decode, decode__bad_extension) {
  const size_t ext = 48 + 28;  // data ext of the WRITE ONLY golden
  struct Case {
    const char* what;
    void (*patch)(Bytes&);
  };
  const Case data_cases[] = {
      {"pkt_count 0", [](Bytes& w) { set32(w, ext + 8, 0); }},
      {"pkt_index == pkt_count", [](Bytes& w) { set32(w, ext + 4, 16); }},
      {"dma_len != payload", [](Bytes& w) { set32(w, 48 + 12 + 12, 4); }},
  };
  for (const Case& c : data_cases) {
    Bytes wire = hex(kWriteOnlyGolden);
    c.patch(wire);
    reseal(wire);
    EXPECT_EQ(decode_error(wire), Error::kBadExtension) << c.what;
  }
  // Zero payload but not marked trimmed: dma_len must be 0.
  Bytes untrimmed = hex(kTrimmedGolden);
  untrimmed[0] = 0x66;
  untrimmed[1] = 0x80;  // DSCP 26
  reseal(untrimmed);
  EXPECT_EQ(decode_error(untrimmed), Error::kBadExtension) << "payload 0, not trimmed";

  const size_t sack = 48 + 16;
  const Case ack_cases[] = {
      {"cum_psn > 24 bits", [](Bytes& w) { w[sack] = 1; }},
      {"sack_base > 24 bits", [](Bytes& w) { w[sack + 4] = 1; }},
      {"echo_count > max", [](Bytes& w) { w[sack + 36] = kMaxAckEchoes + 1; }},
      {"echo psn > 24 bits", [](Bytes& w) { w[sack + 40 + 8] = 0x80; }},
  };
  for (const Case& c : ack_cases) {
    Bytes wire = encode_or_die(envelope(example_ack()));
    c.patch(wire);
    reseal(wire);
    EXPECT_EQ(decode_error(wire), Error::kBadExtension) << c.what;
  }
  const size_t nack = 48 + 16;
  for (size_t at : {nack, nack + 4}) {
    Bytes wire = encode_or_die(envelope(example_trim_nack()));
    wire[at] = 0x01;
    reseal(wire);
    EXPECT_EQ(decode_error(wire), Error::kBadExtension) << "trim NACK PSN at " << at;
  }
}

// Truncation at every byte offset: always an error, never a read outside the buffer (each
// prefix is copied into its own heap block, so ASan sees an overread).
TEST(Decode, decode__truncation_at_every_offset_is_an_error) {
  for (const Datagram& d : {example_write_only(), example_write_only_imm_srh(), example_trimmed(),
                            envelope(example_ack()), envelope(example_cnp()),
                            envelope(example_trim_nack()), envelope(example_probe(true))}) {
    const Bytes wire = encode_or_die(d);
    for (size_t n = 0; n < wire.size(); ++n) {
      const Bytes cut(wire.begin(), wire.begin() + n);
      EXPECT_EQ(decode_error(cut), Error::kTruncated) << opcode_name(d.pkt.bth.opcode) << " " << n;
      // With the lengths fixed up the inner layers must notice (the ICRC at the latest).
      const Bytes fixed = cut_consistently(wire, n);
      EXPECT_NE(decode_error(fixed), Error::kOk) << opcode_name(d.pkt.bth.opcode) << " " << n;
      (void)decode(fixed, {.verify_icrc = false, .verify_udp_checksum = true});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// decode_transport

TEST(DecodeTransport, decode_transport__golden_round_trip_and_errors) {
  for (const TransportPacket& p :
       {example_write_only().pkt, example_write_only_imm_srh().pkt, example_ack(), example_cnp(),
        example_trim_nack(), example_probe(false), example_probe(true)}) {
    const Bytes bytes = encode_transport_or_die(p);
    auto got = decode_transport(bytes);
    ASSERT_TRUE(got.has_value()) << error_name(got.error());
    TransportPacket want = p;
    want.bth.pad_count = static_cast<uint8_t>((0u - p.payload_len) & 3);
    EXPECT_EQ(diff(*got, want), "") << opcode_name(p.bth.opcode);
    for (size_t n = 0; n < bytes.size(); ++n) {
      const Bytes cut(bytes.begin(), bytes.begin() + n);
      auto r = decode_transport(cut);
      if (n < transport_header_bytes(p.bth.opcode)) {
        EXPECT_EQ(error_of(r), Error::kTruncated) << n;
      } else if (r) {
        // A shorter valid packet (fewer payload bytes): it must re-encode to the same
        // headers and payload.
        const Bytes again = encode_transport_or_die(*r);
        const size_t keep = transport_header_bytes(p.bth.opcode) + r->payload_len;
        ASSERT_LE(keep, again.size());
        Bytes want_prefix(cut.begin(), cut.begin() + keep);
        want_prefix[1] = again[1];  // the pad count is recomputed
        EXPECT_EQ(Bytes(again.begin(), again.begin() + keep), want_prefix) << n;
      }
    }
  }
  EXPECT_EQ(error_of(decode_transport(Bytes{0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
            Error::kBadOpcode);
  Bytes cnp = hex(kCnpGolden);
  cnp[1] = 0x02;
  EXPECT_EQ(error_of(decode_transport(cnp)), Error::kBadVersion);
  cnp = hex(kCnpGolden);
  cnp[1] = 0x10;
  EXPECT_EQ(error_of(decode_transport(cnp)), Error::kBadPadCount);
  cnp = hex(kCnpGolden);
  cnp.insert(cnp.end(), 4, 0);
  EXPECT_EQ(error_of(decode_transport(cnp)), Error::kBadLength);
  Bytes ack = hex(kAckGolden);
  ack[16 + 36] = 9;
  EXPECT_EQ(error_of(decode_transport(ack)), Error::kBadExtension);
}

TEST(DecodeTransport, decode_transport__zero_payload_with_any_dma_len_may_be_trimmed) {
  TransportPacket p = example_write_only().pkt;
  p.payload = nullptr;
  p.payload_len = 0;
  const Bytes bytes = encode_transport_or_die(p);
  auto got = decode_transport(bytes);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->reth.dma_len, 5u);
}

// ---------------------------------------------------------------------------------------------
// Round-trip properties over random valid datagrams of every opcode, with and without SRH.

struct Sample {
  Datagram d;
  Bytes payload;
};

uint32_t gen24() {
  return *rc::gen::inRange<uint32_t>(0, 1u << 24);
}

// Random valid transport packet of opcode `op`; the parts the opcode does not carry stay at
// their defaults (which is what decode reports). Call from inside a property.
void random_transport(Opcode op, bool trimmed, TransportPacket& p, Bytes& payload) {
  p.bth.opcode = op;
  p.bth.solicited = *rc::gen::arbitrary<bool>();
  p.bth.mig_req = *rc::gen::arbitrary<bool>();
  p.bth.pkey = *rc::gen::arbitrary<uint16_t>();
  p.bth.fecn = *rc::gen::arbitrary<bool>();
  p.bth.becn = *rc::gen::arbitrary<bool>();
  p.bth.dest_qp = gen24();
  p.bth.ack_req = *rc::gen::arbitrary<bool>();
  p.bth.psn = gen24();
  const bool data = op == Opcode::kWriteOnly || op == Opcode::kWriteOnlyImm;
  const bool has_payload = data || op == Opcode::kProbe || op == Opcode::kProbeReply;
  if (has_payload && !trimmed) {
    payload = *rc::gen::container<Bytes>(*rc::gen::inRange<size_t>(0, 1200),
                                         rc::gen::arbitrary<uint8_t>());
    p.payload = payload.empty() ? nullptr : payload.data();
    p.payload_len = static_cast<uint32_t>(payload.size());
  }
  if (data) {
    p.reth.va = *rc::gen::arbitrary<uint64_t>();
    p.reth.rkey = *rc::gen::arbitrary<uint32_t>();
    p.reth.dma_len = trimmed ? *rc::gen::arbitrary<uint32_t>() : p.payload_len;
    if (op == Opcode::kWriteOnlyImm) p.imm = *rc::gen::arbitrary<uint32_t>();
    p.data.msg_num = *rc::gen::arbitrary<uint32_t>();
    p.data.pkt_count = *rc::gen::inRange<uint32_t>(1, 0xFFFFFFFF);
    p.data.pkt_index = *rc::gen::inRange<uint32_t>(0, p.data.pkt_count);
    p.data.tx_time_ps = *rc::gen::arbitrary<uint64_t>();
    p.data.ev_index = *rc::gen::arbitrary<uint16_t>();
    p.data.flags = *rc::gen::arbitrary<uint16_t>() & DataExt::kAllFlags;
  }
  if (op == Opcode::kAck || op == Opcode::kTrimNack) {
    p.aeth.syndrome = *rc::gen::arbitrary<uint8_t>();
    p.aeth.msn = gen24();
  }
  if (op == Opcode::kAck) {
    SackExt& s = p.sack;
    s.cum_psn = gen24();
    s.sack_base = gen24();
    s.bitmap = {*rc::gen::arbitrary<uint64_t>(), *rc::gen::arbitrary<uint64_t>()};
    s.received_bytes = *rc::gen::arbitrary<uint64_t>();
    s.service_time_ns = *rc::gen::arbitrary<uint32_t>();
    s.ports_down = gen24();
    s.echo_count = *rc::gen::inRange<uint8_t>(0, kMaxAckEchoes + 1);
    for (int i = 0; i < s.echo_count; ++i) {
      s.echo[i].psn = gen24();
      s.echo[i].ev_index = *rc::gen::arbitrary<uint16_t>();
      s.echo[i].flags = *rc::gen::arbitrary<uint8_t>() & AckEcho::kAllFlags;
    }
  }
  if (op == Opcode::kTrimNack) {
    p.nack.psn = gen24();
    p.nack.cum_psn = gen24();
    p.nack.ev_index = *rc::gen::arbitrary<uint16_t>();
  }
  if (op == Opcode::kProbe || op == Opcode::kProbeReply) {
    p.probe.probe_id = *rc::gen::arbitrary<uint64_t>();
    p.probe.tx_time_ps = *rc::gen::arbitrary<uint64_t>();
    p.probe.service_time_ns = *rc::gen::arbitrary<uint32_t>();
    p.probe.ev_index = *rc::gen::arbitrary<uint16_t>();
    p.probe.port = *rc::gen::arbitrary<uint8_t>();
    p.probe.flags = *rc::gen::arbitrary<uint8_t>();
  }
}

Ipv6Addr gen_addr() {
  Ipv6Addr a;
  for (auto& b : a)
    b = *rc::gen::arbitrary<uint8_t>();
  return a;
}

void random_datagram(Opcode op, bool with_srh, Sample& s) {
  Datagram& d = s.d;
  const bool data = op == Opcode::kWriteOnly || op == Opcode::kWriteOnlyImm;
  const bool trimmed = data && *rc::gen::arbitrary<bool>() && *rc::gen::arbitrary<bool>();
  const uint8_t dscp = trimmed ? kDscpTrimmed : *rc::gen::inRange<uint8_t>(0, 64);
  d.ip.traffic_class = static_cast<uint8_t>(dscp << 2 | *rc::gen::inRange<uint8_t>(0, 4));
  d.ip.flow_label = *rc::gen::inRange<uint32_t>(0, 1u << 20);
  d.ip.hop_limit = *rc::gen::arbitrary<uint8_t>();
  d.ip.src = gen_addr();
  d.ip.dst = gen_addr();
  if (with_srh) {
    d.has_srh = true;
    d.srh.num_segments = *rc::gen::inRange<uint8_t>(1, kMaxSrhSegments + 1);
    d.srh.last_entry = d.srh.num_segments - 1;
    d.srh.segments_left = *rc::gen::inRange<uint8_t>(0, d.srh.num_segments);
    d.srh.flags = *rc::gen::arbitrary<uint8_t>();
    d.srh.tag = *rc::gen::arbitrary<uint16_t>();
    for (int i = 0; i < d.srh.num_segments; ++i)
      d.srh.segments[i] = gen_addr();
  }
  d.udp.src_port = *rc::gen::arbitrary<uint16_t>();
  random_transport(op, trimmed, d.pkt, s.payload);
}

RC_GTEST_PROP(CodecProperty, decode__inverts_encode_for_every_opcode, ()) {
  for (Opcode op : kAllOpcodes) {
    for (bool with_srh : {false, true}) {
      Sample s;
      random_datagram(op, with_srh, s);
      const Datagram& d = s.d;
      Bytes wire(encoded_size(d));
      auto n = encode(d, wire);
      RC_ASSERT(n.has_value());
      RC_ASSERT(*n == wire.size());
      RC_ASSERT(stored_icrc(wire) == ref_icrc(wire));
      const size_t udp = 40 + srh_bytes_of(wire);
      RC_ASSERT((wire[udp + 6] << 8 | wire[udp + 7]) == ref_udp_checksum(wire));
      auto got = decode(wire, {.verify_icrc = true, .verify_udp_checksum = true});
      RC_ASSERT(got.has_value());
      RC_ASSERT(diff(*got, as_encoded(d, wire)) == "");
      // And the transport part alone.
      Bytes transport(wire.begin() + udp + 8, wire.end() - 4);
      Bytes t(transport.size());
      RC_ASSERT(encode_transport(d.pkt, t).has_value());
      RC_ASSERT(t == transport);
      auto tp = decode_transport(t);
      RC_ASSERT(tp.has_value());
      RC_ASSERT(diff(*tp, as_encoded(d, wire).pkt) == "");
    }
  }
}

// The ICRC ignores exactly what switches may rewrite: traffic class, flow label, hop limit,
// destination address, the whole SRH (even its removal), FECN/BECN, the UDP checksum.
RC_GTEST_PROP(CodecProperty, icrc__survives_in_flight_rewrites, ()) {
  Sample s;
  random_datagram(
      *rc::gen::elementOf(std::vector<Opcode>(std::begin(kAllOpcodes), std::end(kAllOpcodes))),
      true, s);
  const Bytes wire = encode_or_die(s.d);
  const uint32_t original = icrc(std::span(wire).first(wire.size() - 4));
  RC_ASSERT(original == stored_icrc(wire));

  Datagram moved = s.d;
  moved.ip.traffic_class = *rc::gen::arbitrary<uint8_t>();
  moved.ip.flow_label = *rc::gen::inRange<uint32_t>(0, 1u << 20);
  moved.ip.hop_limit = *rc::gen::arbitrary<uint8_t>();
  moved.ip.dst = usid_shift(gen_addr());
  moved.srh.segments_left = 0;
  moved.srh.segments[0] = gen_addr();
  moved.pkt.bth.fecn = true;
  moved.pkt.bth.becn = true;
  if (moved.pkt.reth.dma_len != moved.pkt.payload_len) {
    moved.ip.traffic_class = kDscpTrimmed << 2;  // stays a valid trimmed packet
  }
  const Bytes rewritten = encode_or_die(moved);
  RC_ASSERT(stored_icrc(rewritten) == original);
  moved.has_srh = false;  // penultimate segment pop
  const Bytes popped = encode_or_die(moved);
  RC_ASSERT(stored_icrc(popped) == original);

  // Anything else is covered: flip one bit of the BTH or beyond.
  Bytes flipped = wire;
  const size_t bth = 48 + srh_bytes_of(wire);
  const size_t at = *rc::gen::inRange<size_t>(bth, wire.size() - 4);
  RC_PRE(at != bth + 4);  // resv8a is masked
  flipped[at] ^= static_cast<uint8_t>(1 << *rc::gen::inRange(0, 8));
  RC_ASSERT(icrc(std::span(flipped).first(flipped.size() - 4)) != original);
}

// ---------------------------------------------------------------------------------------------
// CRC-32 and ICRC known answers.

TEST(Crc32, crc32__check_value_and_slicing_matches_bytewise) {
  const std::string_view check = "123456789";
  EXPECT_EQ(crc32(std::span(reinterpret_cast<const uint8_t*>(check.data()), check.size())),
            0xCBF43926u);
  Bytes data(1031);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n :
         {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{64}, size_t{1000}}) {
      std::span<const uint8_t> s(data.data() + offset, n);
      EXPECT_EQ(crc32_update(0x12345678, s), ref_crc32_update(0x12345678, s.data(), n));
      EXPECT_EQ(crc32_update_bytewise(0x12345678, s), ref_crc32_update(0x12345678, s.data(), n));
    }
  }
}

// The carry-less multiply path (x86-64 with PCLMULQDQ, inputs >= 64 bytes) against the
// table method and the bit-by-bit reference: every length around the 16- and 64-byte
// folding boundaries, unaligned starts, random states.
RC_GTEST_PROP(Crc32Property, crc32_update__folding_path_matches_tables, ()) {
  const auto n = *rc::gen::inRange<size_t>(0, 9100);
  const auto offset = *rc::gen::inRange<size_t>(0, 16);
  const auto state = *rc::gen::arbitrary<uint32_t>();
  const auto seed = *rc::gen::arbitrary<uint32_t>();
  Bytes data(n + offset);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
  std::span<const uint8_t> s(data.data() + offset, n);
  RC_ASSERT(crc32_update(state, s) == crc32_update_tables(state, s));
  RC_ASSERT(crc32_update(state, s) == ref_crc32_update(state, s.data(), n));
  for (Crc32Path path : {Crc32Path::kClmul, Crc32Path::kVclmul256, Crc32Path::kVclmul}) {
    if (crc32_path_available(path)) {
      RC_ASSERT(crc32_update_path(path, state, s) == crc32_update_tables(state, s));
    }
  }
}

TEST(Crc32, crc32_update__folding_boundaries_match_tables) {
  // Around the 16-, 64-, 128- and 256-byte steps (the last two: VPCLMULQDQ with AVX2 and with
  // AVX-512).
  Bytes data(800);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t n = 0; n <= 780; ++n) {
    std::span<const uint8_t> s(data.data() + 3, n);
    const uint32_t want = ref_crc32_update(0xFFFFFFFF, s.data(), n);
    ASSERT_EQ(crc32_update(0xFFFFFFFF, s), want) << n;
    for (Crc32Path path :
         {Crc32Path::kTables, Crc32Path::kClmul, Crc32Path::kVclmul256, Crc32Path::kVclmul}) {
      if (crc32_path_available(path)) {
        ASSERT_EQ(crc32_update_path(path, 0xFFFFFFFF, s), want) << n << " path " << int(path);
      }
    }
  }
}

#if defined(__x86_64__)
// XINUSE (XGETBV with ECX = 1, where CPUID.(EAX=0DH,ECX=1):EAX[2] says it exists): a bit per
// register-state component that is not in its initial configuration. Bit 2: the upper halves
// of YMM0-15; bit 6: the upper halves of ZMM0-15 (Intel SDM vol. 1, 13.6).
bool have_xinuse() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(0xD, 1, &a, &b, &c, &d) && (a & (1u << 2));
}
__attribute__((target("xsave"))) uint64_t xinuse() {
  return _xgetbv(1);
}
__attribute__((target("avx"))) void zero_upper() {
  _mm256_zeroupper();
}
// XINUSE right after dirtying YMM0's upper half, in one asm block (GCC puts a VZEROUPPER at
// the end of any function it compiles for AVX, asm or not).
uint64_t xinuse_with_a_dirty_upper_half() {
  uint32_t lo = 0, hi = 0;
  asm volatile(
      "vpcmpeqb %%ymm0, %%ymm0, %%ymm0\n\t"
      "movl $1, %%ecx\n\t"
      "xgetbv"
      : "=a"(lo), "=d"(hi)
      :
      : "rcx", "xmm0");
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// The VPCLMULQDQ paths must return with clean upper register halves. Left dirty, every later
// legacy-SSE instruction on an Intel core merges into them: it cost the SRV6 sender 1.8% of
// its core at the first SSE load after the ICRC, and MRC's goodput ratio to the raw UDP blast
// moved 0.87 -> 0.94 with the VZEROUPPER (docs/perf-log.md, "Linux driver: the ICRC left dirty
// upper ZMM halves").
TEST(Crc32, crc32_update__vclmul_paths_return_with_clean_upper_register_halves) {
  if (!have_xinuse()) GTEST_SKIP() << "no XINUSE on this CPU";
  constexpr uint64_t kUpperHalves = (1u << 2) | (1u << 6);
  const Bytes data(4096, 0x5A);
  // Calibration both ways: XINUSE must show a dirty upper half and its cleaning here.
  if (!(xinuse_with_a_dirty_upper_half() & kUpperHalves))
    GTEST_SKIP() << "this CPU does not report dirty upper halves";
  zero_upper();
  if (xinuse() & kUpperHalves) GTEST_SKIP() << "this CPU does not report VZEROUPPER's state";
  int checked = 0;
  for (Crc32Path path : {Crc32Path::kVclmul256, Crc32Path::kVclmul}) {
    if (!crc32_path_available(path)) continue;
    const uint32_t crc = crc32_update_path(path, 0, data);
    const uint64_t in_use = xinuse();
    EXPECT_EQ(in_use & kUpperHalves, 0u)
        << "path " << int(path) << " XINUSE " << std::hex << in_use;
    EXPECT_EQ(crc, crc32_update_tables(0, data));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no VPCLMULQDQ path on this CPU";
}
#endif

// A RoCEv2 CNP captured on a Mellanox ConnectX-4 Lx (IPv4; scapy's test/contrib/roce.uts).
// Masking it as IBTA A17.4.5.2 says and running our CRC gives the ICRC the NIC sent, which
// pins down the CRC variant, the 8-byte ones prefix and the LSB-first byte order.
TEST(Icrc, icrc__matches_hardware_rocev2_capture) {
  const Bytes frame =
      hex("e41d2dab2bc2 7cfe90643b32 0800"              // Ethernet
          "45c2003c718c400040119161 0a001101 0a001201"  // IPv4, ToS 0xc2, TTL 64
          "000012b700280000"                            // UDP 0 -> 4791, checksum 0
          "8100ffff4000011800000000"                    // BTH CNP, BECN, QP 0x118
          "00000000000000000000000000000000"            // reserved
          "82fd002a");                                  // ICRC
  Bytes masked(8, 0xFF);
  masked.insert(masked.end(), frame.begin() + 14, frame.end() - 4);
  const size_t ip = 8;
  masked[ip + 1] = 0xFF;                             // type of service
  masked[ip + 8] = 0xFF;                             // TTL
  masked[ip + 10] = masked[ip + 11] = 0xFF;          // header checksum
  masked[ip + 20 + 6] = masked[ip + 20 + 7] = 0xFF;  // UDP checksum
  masked[ip + 28 + 4] = 0xFF;                        // BTH resv8a
  const uint32_t c = crc32(masked);
  const Bytes on_wire{static_cast<uint8_t>(c), static_cast<uint8_t>(c >> 8),
                      static_cast<uint8_t>(c >> 16), static_cast<uint8_t>(c >> 24)};
  EXPECT_EQ(on_wire, Bytes(frame.end() - 4, frame.end()));
}

TEST(Icrc, icrc__golden_values_and_short_input) {
  const Bytes wo = hex(kWriteOnlyGolden);
  EXPECT_EQ(icrc(std::span(wo).first(wo.size() - 4)), 0xEDCD4B02u);
  const Bytes srh = hex(kWriteOnlyImmSrhGolden);
  EXPECT_EQ(icrc(std::span(srh).first(srh.size() - 4)), 0x3170D56Au);
  EXPECT_EQ(icrc(std::span(wo).first(59)), 0u);  // no complete BTH
  EXPECT_EQ(icrc(std::span(srh).first(40 + 40 + 8 + 11)), 0u);
}

// ---------------------------------------------------------------------------------------------
// Fuzz seed corpus: one named, valid packet per opcode (plus SRH and trimmed variants), for
// fuzz/corpus/<target>/. The committed files must equal what this generates; run with
// MRC_WRITE_FUZZ_SEEDS=1 to rewrite them after a deliberate format change.

std::vector<std::pair<std::string, Datagram>> seed_datagrams() {
  Datagram ack_srh = envelope(example_ack());
  ack_srh.has_srh = true;
  ack_srh.srh.num_segments = 1;
  ack_srh.srh.segments[0] = kDst;
  Datagram probe_payload = envelope(example_probe(false));
  static const uint8_t kPadding[13] = {};
  probe_payload.pkt.payload = kPadding;
  probe_payload.pkt.payload_len = sizeof kPadding;
  return {
      {"write_only", example_write_only()},
      {"write_only_imm_srh", example_write_only_imm_srh()},
      {"write_only_trimmed", example_trimmed()},
      {"ack", envelope(example_ack())},
      {"ack_srh", ack_srh},
      {"cnp", envelope(example_cnp())},
      {"trim_nack", envelope(example_trim_nack())},
      {"probe", envelope(example_probe(false))},
      {"probe_padded", probe_payload},
      {"probe_reply", envelope(example_probe(true))},
  };
}

void check_or_write_seed(const std::filesystem::path& path, const Bytes& bytes) {
  if (std::getenv("MRC_WRITE_FUZZ_SEEDS") != nullptr) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << path << " missing: run test_codec with MRC_WRITE_FUZZ_SEEDS=1";
  const Bytes committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(committed, bytes) << path << " is stale: run test_codec with MRC_WRITE_FUZZ_SEEDS=1";
}

TEST(FuzzCorpus, seeds__match_the_codec) {
  const std::filesystem::path corpus = std::filesystem::path(MRC_SOURCE_DIR) / "fuzz" / "corpus";
  std::vector<Bytes> transports;
  for (const auto& [name, d] : seed_datagrams()) {
    const Bytes wire = encode_or_die(d);
    ASSERT_TRUE(decode(wire).has_value()) << name;
    check_or_write_seed(corpus / "fuzz_decode_datagram" / (name + ".bin"), wire);
    const size_t udp = 40 + srh_bytes_of(wire);
    Bytes transport(wire.begin() + udp + 8, wire.end() - 4);
    if (std::find(transports.begin(), transports.end(), transport) != transports.end()) continue;
    check_or_write_seed(corpus / "fuzz_decode_transport" / (name + ".bin"), transport);
    transports.push_back(transport);
  }
}

}  // namespace
}  // namespace mrc::wire
