// MRC wire format: header structures. Byte layouts, diagrams and the reasoning behind every
// choice are in docs/wire-format.md; encode/decode live in wire/codec.h.
//
// A datagram is IPv6 [+ SRH] + UDP(4791) + BTH + (opcode-dependent extension headers) +
// payload + ICRC. The engine deals only in `TransportPacket` (BTH and up); the drivers build
// the IPv6/UDP/SRH envelope from the path (expanded EV) the engine chose.
#pragma once

#include <array>
#include <cstdint>

namespace mrc::wire {

using Ipv6Addr = std::array<uint8_t, 16>;

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoRouting = 43;
inline constexpr uint8_t kSrhRoutingType = 4;
inline constexpr uint32_t kIcrcBytes = 4;
// Authenticated packets' trailer behind the ICRC: an 8-byte counter and a 16-byte AES-GCM tag
// (docs/wire-format.md, "Authentication trailer"; net/packet_auth.h seals and opens it).
inline constexpr uint32_t kAuthCounterBytes = 8;
inline constexpr uint32_t kAuthTagBytes = 16;
inline constexpr uint32_t kAuthTrailerBytes = kAuthCounterBytes + kAuthTagBytes;
// The IPv6 hop limit packets leave with (Linux's default, net.ipv6.conf.*.hop_limit).
inline constexpr uint8_t kDefaultHopLimit = 64;

// Fixed header sizes on the wire, in bytes. The MRC extension sizes are our decision and
// are explained in docs/wire-format.md; wire/codec.h has the per-opcode totals.
inline constexpr uint32_t kIpv6HeaderBytes = 40;
inline constexpr uint32_t kSrhFixedBytes = 8;  // before the segment list
inline constexpr uint32_t kSrhSegmentBytes = 16;
inline constexpr uint32_t kUdpHeaderBytes = 8;
inline constexpr uint32_t kBthBytes = 12;
inline constexpr uint32_t kRethBytes = 16;
inline constexpr uint32_t kImmDtBytes = 4;
inline constexpr uint32_t kAethBytes = 4;
inline constexpr uint32_t kDataExtBytes = 24;
inline constexpr uint32_t kAckEchoBytes = 8;
inline constexpr uint32_t kSackExtBytes = 40 + 8 * kAckEchoBytes;  // 104: echoes always present
inline constexpr uint32_t kTrimNackExtBytes = 12;
inline constexpr uint32_t kProbeExtBytes = 24;
inline constexpr uint32_t kCnpReservedBytes = 16;  // IBTA A17.9.2: 16 reserved bytes after BTH

// PSNs, QPNs and MSNs are 24-bit quantities (IBTA 9.2, 9.3.5); the codec rejects larger ones.
inline constexpr uint32_t kMax24 = 0xFFFFFF;

// ECN codepoints (RFC 3168), the low two bits of the IPv6 traffic class.
inline constexpr uint8_t kEcnNotEct = 0, kEcnEct1 = 1, kEcnEct0 = 2, kEcnCe = 3;
// A switch that trims a packet rewrites its DSCP to this codepoint (our decision, as in UET's
// trimming: the header survives, the payload is cut, the DSCP says so).
inline constexpr uint8_t kDscpTrimmed = 46;
inline constexpr uint8_t kDscpData = 26;

// BTH opcodes. Data packets use the standard RC WRITE ONLY opcodes so that every packet
// stands alone with its own RETH (out-of-order placement); ACKs use RC ACKNOWLEDGE; CNP is
// the RoCEv2 congestion notification; 0xC0.. are manufacturer-specific (IBTA reserves
// 0xC0-0xFF for vendor use) and carry MRC's own packet types.
enum class Opcode : uint8_t {
  kWriteOnly = 0x0A,     // RC RDMA WRITE Only: RETH + MRC data ext + payload
  kWriteOnlyImm = 0x0B,  // RC RDMA WRITE Only with Immediate: RETH + ImmDt + data ext
  kAck = 0x11,           // RC Acknowledge: AETH + MRC SACK ext
  kCnp = 0x81,           // RoCEv2 CNP (DCQCN baseline): 16 reserved bytes
  kTrimNack = 0xC0,      // MRC trim NACK: AETH + trim NACK ext
  kProbe = 0xC1,         // MRC path probe request: probe ext
  kProbeReply = 0xC2,    // MRC path probe response: probe ext
};

struct Ipv6Header {
  uint8_t traffic_class = 0;    // DSCP (6 bits) << 2 | ECN (2 bits)
  uint32_t flow_label = 0;      // 20 bits
  uint16_t payload_length = 0;  // bytes after the fixed 40-byte header (filled by encode)
  uint8_t next_header = kIpProtoUdp;
  uint8_t hop_limit = kDefaultHopLimit;
  Ipv6Addr src{};
  Ipv6Addr dst{};

  uint8_t dscp() const { return traffic_class >> 2; }
  uint8_t ecn() const { return traffic_class & 3; }
  friend bool operator==(const Ipv6Header&, const Ipv6Header&) = default;
};

// Segment Routing Header (RFC 8754), routing type 4. MRC uses at most one segment beyond the
// destination address (SRV6 EV format: DA + one SRH segment), we allow a few for generality.
inline constexpr int kMaxSrhSegments = 4;
struct SrhHeader {
  uint8_t next_header = kIpProtoUdp;
  uint8_t segments_left = 0;
  uint8_t last_entry = 0;  // index of the last element of the segment list
  uint8_t flags = 0;
  uint16_t tag = 0;
  uint8_t num_segments = 0;  // entries used in `segments` (= last_entry + 1)
  std::array<Ipv6Addr, kMaxSrhSegments> segments{};
  friend bool operator==(const SrhHeader&, const SrhHeader&) = default;
};

struct UdpHeader {
  uint16_t src_port = 0;  // carries EV bits in STEV/UDP formats
  uint16_t dst_port = kRoceV2Port;
  uint16_t length = 0;    // filled by encode
  uint16_t checksum = 0;  // filled by encode (RFC 8200: mandatory over IPv6)
  friend bool operator==(const UdpHeader&, const UdpHeader&) = default;
};

// InfiniBand Base Transport Header (IBTA vol. 1, 9.2). 12 bytes.
struct Bth {
  Opcode opcode = Opcode::kWriteOnly;
  bool solicited = false;
  bool mig_req = true;
  uint8_t pad_count = 0;  // 0..3 bytes of pad before ICRC
  uint8_t tver = 0;
  uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;
  uint32_t psn = 0;  // 24 bits
  friend bool operator==(const Bth&, const Bth&) = default;
};

// RDMA Extended Transport Header: this packet's own target (16 bytes).
struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;  // payload bytes of *this packet* (kept when the packet is trimmed)
  friend bool operator==(const Reth&, const Reth&) = default;
};

// ACK Extended Transport Header (4 bytes): syndrome + 24-bit MSN.
struct Aeth {
  uint8_t syndrome = 0;  // 0x00..0x1F = ACK with credit count; 0x60.. = NAK
  uint32_t msn = 0;      // 24 bits: messages completed at the responder
  friend bool operator==(const Aeth&, const Aeth&) = default;
};

// MRC data extension, after RETH (and ImmDt): 24 bytes.
struct DataExt {
  enum Flags : uint16_t {
    kRetransmit = 1 << 0,     // this is a retransmission
    kLastOfMessage = 1 << 1,  // pkt_index == pkt_count - 1 (redundant, for dissectors)
    kHasImm = 1 << 2,         // the message is a WRITE with immediate
    kAckNow = 1 << 3,         // sender asks for an immediate ACK (window nearly full)
  };
  // Bits the codec carries; the others are reserved: zero on encode, ignored on decode.
  static constexpr uint16_t kAllFlags = kRetransmit | kLastOfMessage | kHasImm | kAckNow;
  uint32_t msg_num = 0;     // message sequence number within the QP (from 0)
  uint32_t pkt_index = 0;   // index of this packet within its message
  uint32_t pkt_count = 0;   // packets in the message (>= 1)
  uint64_t tx_time_ps = 0;  // sender's transmit timestamp, picoseconds
  uint16_t ev_index = 0;    // index of the EV (path) in the sender's EV set
  uint16_t flags = 0;
  friend bool operator==(const DataExt&, const DataExt&) = default;
};

// One acknowledged packet echoed back to the sender, so it can attribute ECN/trim/delay to
// the path (EV) it took. 8 bytes on the wire.
struct AckEcho {
  enum Flags : uint8_t {
    kEcnCe = 1 << 0,       // arrived with ECN CE
    kTrimmed = 1 << 1,     // arrived trimmed (payload cut)
    kRetransmit = 1 << 2,  // was a retransmission
    kDuplicate = 1 << 3,   // was already received (not placed again)
  };
  // Bits the codec carries; the others are reserved: zero on encode, ignored on decode.
  static constexpr uint8_t kAllFlags = kEcnCe | kTrimmed | kRetransmit | kDuplicate;
  uint32_t psn = 0;  // 24 bits
  uint16_t ev_index = 0;
  uint8_t flags = 0;
  friend bool operator==(const AckEcho&, const AckEcho&) = default;
};

// MRC selective ACK extension, after AETH. The BTH PSN of an ACK is the cumulative PSN.
inline constexpr int kSackBitmapWords = 2;  // 128 PSNs after sack_base
inline constexpr int kMaxAckEchoes = 8;
struct SackExt {
  uint32_t cum_psn = 0;    // every PSN before this one has been received (24 bits)
  uint32_t sack_base = 0;  // PSN of bit 0 of `bitmap` (24 bits)
  std::array<uint64_t, kSackBitmapWords> bitmap{};  // bit i set: sack_base+i received
  uint64_t received_bytes = 0;   // payload bytes received on this QP (running count)
  uint32_t service_time_ns = 0;  // time the responder held the newest echoed packet
  uint8_t echo_count = 0;        // valid entries in `echo`
  // Port-state bitmap (paper 3): bit i set = the sender's NIC port i is down, so the peer
  // stops spraying on that plane. 24 bits (ports 0-23); all zero = every port up, which is
  // also what a sender that predates the field writes (it was reserved).
  uint32_t ports_down = 0;
  std::array<AckEcho, kMaxAckEchoes> echo{};
  friend bool operator==(const SackExt&, const SackExt&) = default;
};
inline constexpr uint32_t kSackPortsDownBits = 24;

// MRC trim NACK extension, after AETH: "PSN `psn` arrived trimmed on EV `ev_index`; resend".
struct TrimNackExt {
  uint32_t psn = 0;      // 24 bits: the trimmed packet
  uint32_t cum_psn = 0;  // 24 bits: the responder's cumulative PSN, as in the SACK
  uint16_t ev_index = 0;
  uint16_t reserved = 0;  // written as zero, decoded as zero
  friend bool operator==(const TrimNackExt&, const TrimNackExt&) = default;
};

// MRC probe request/response extension. A probe names the path (EV index + port) it was
// sent on; the reply echoes everything and adds the responder's service time.
struct ProbeExt {
  uint64_t probe_id = 0;         // chosen by the prober
  uint64_t tx_time_ps = 0;       // prober's transmit timestamp (echoed)
  uint32_t service_time_ns = 0;  // reply only: time between request arrival and reply
  uint16_t ev_index = 0;
  uint8_t port = 0;   // 0-based NIC port (plane) the request went out on
  uint8_t flags = 0;  // opaque to the codec: the prober's, echoed by the responder
  friend bool operator==(const ProbeExt&, const ProbeExt&) = default;
};

// Everything from BTH up. Which optional parts are valid follows from bth.opcode:
//   kWriteOnly    reth, data, payload
//   kWriteOnlyImm reth, imm, data, payload
//   kAck          aeth, sack
//   kTrimNack     aeth, nack
//   kProbe/Reply  probe
//   kCnp          (nothing)
// The payload is not owned: it points into a caller's buffer (or is null with a length in
// the simulator, which carries no payload bytes).
struct TransportPacket {
  Bth bth;
  Reth reth;
  uint32_t imm = 0;  // ImmDt, host order
  Aeth aeth;
  DataExt data;
  SackExt sack;
  TrimNackExt nack;
  ProbeExt probe;
  const uint8_t* payload = nullptr;  // encode writes payload_len zero bytes when null
  uint32_t payload_len = 0;          // bytes present (0 if trimmed), excluding the BTH pad
};

// A whole datagram as decoded from / encoded to bytes. encode() derives the next-header
// fields from has_srh and fills the lengths, checksum and pad count; decode() reports what
// the wire said.
struct Datagram {
  Ipv6Header ip;
  bool has_srh = false;
  SrhHeader srh;
  UdpHeader udp;
  TransportPacket pkt;
};

}  // namespace mrc::wire
