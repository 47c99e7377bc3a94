// The libfabric provider's own protocol over MRC (docs/libfabric.md, "Protocol"): what two
// endpoints say to set up a connection, and the header of every message they write into each
// other's receive rings.
//
// MRC has only RDMA WRITE and WRITE-with-immediate. A libfabric message (fi_send, fi_tsend)
// therefore travels as a WRITE_IMM into a slot of a ring the receiver registered for this
// sender; the slot starts with a SlotHeader, the immediate names the slot. Small messages
// carry their payload after the header (eager); large ones announce themselves (RTS), the
// receiver answers with where to write (CTS), the sender WRITEs the data straight into the
// receive buffer and says so (FIN). Credits (free slots) flow back in every header and, when
// nothing else goes back, in a WRITE_IMM of no payload whose immediate carries the count.
//
// Connection setup runs over a small UDP socket per endpoint (its "setup port"), three ways:
// a request (repeated until answered) carries the requester's QP number, first PSN and ring;
// the accept answers with the accepter's; the confirm tells the accepter the requester's QP
// is ready, and only then does the accepter send (its accept is repeated until a confirm, or
// anything else from the requester's QP, arrives). Both ends create their QP before they
// speak, so two ends connecting to each other at once meet in one connection.
//
// All integers are big-endian on the wire. Decoders check every length and field and never
// read past the input (fuzz/fi_proto_fuzz.cc).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/types.h"

namespace mrc::fi {

// ---------------------------------------------------------------------------------------------
// Endpoint names (fi_getname): where a peer's planes listen, and its setup port.

inline constexpr uint32_t kNameMagic = 0x4D524346;  // "MRCF"
inline constexpr uint8_t kProtoVersion = 1;
inline constexpr size_t kMaxPlanes = 8;

struct PlaneAddress {
  std::array<uint8_t, 16> addr{};  // IPv6 (or IPv4-mapped)
  uint16_t data_port = 0;          // the UDP port of MRC's data socket on this plane
  friend bool operator==(const PlaneAddress&, const PlaneAddress&) = default;
  friend auto operator<=>(const PlaneAddress&, const PlaneAddress&) = default;
};

struct EndpointName {
  std::vector<PlaneAddress> planes;  // 1..kMaxPlanes
  uint16_t setup_port = 0;           // UDP, on plane 0's address
  friend bool operator==(const EndpointName&, const EndpointName&) = default;
  friend auto operator<=>(const EndpointName&, const EndpointName&) = default;
};

// magic(4) version(1) planes(1) setup_port(2), then per plane addr(16) data_port(2).
inline constexpr size_t kNameHeaderBytes = 8;
inline constexpr size_t kNamePlaneBytes = 18;
inline constexpr size_t kMaxNameBytes = kNameHeaderBytes + kMaxPlanes * kNamePlaneBytes;
size_t name_bytes(const EndpointName& n);
std::vector<uint8_t> encode_name(const EndpointName& n);
Result<EndpointName> decode_name(std::span<const uint8_t> bytes);

// ---------------------------------------------------------------------------------------------
// Connection setup (one UDP datagram each way)

enum class ConnectKind : uint8_t {
  kRequest = 1,  // "here is my QP for you": answer with yours
  kAccept = 2,   // the answer (also sent again for a repeated request)
  kReject = 3,   // the peer cannot take the connection (reason in `reject_reason`)
  kConfirm = 4,  // "your accept arrived, my QP is ready": the accepter may now send
};

enum class RejectReason : uint8_t {
  kNone = 0,
  kIncompatible = 1,  // planes, EV mode or MTU differ
  kTooManyPeers = 2,  // the endpoint's peer table is full
};

struct ConnectMsg {
  ConnectKind kind = ConnectKind::kRequest;
  RejectReason reject_reason = RejectReason::kNone;
  uint8_t ev_mode = 0;  // ev::FormatMode of the sender's driver
  uint8_t mpr_dest = 0;
  uint16_t max_wimm_dest = 0;
  uint32_t mtu = 0;
  uint64_t nonce = 0;  // the requester's; echoed by the answer
  EndpointName from;   // who sends (a receiver that has not met it learns it here)
  // The sender's leaf uSID on each of its planes (0: unknown), for SRV6 paths towards it.
  std::vector<uint16_t> leaf_usids;
  uint32_t qpn = 0;
  uint32_t first_psn = 0;
  // The ring the sender registered for the receiver's messages.
  uint64_t ring_addr = 0;
  uint32_t ring_rkey = 0;
  uint16_t ring_slots = 0;
  uint32_t slot_bytes = 0;
};

inline constexpr uint32_t kConnectMagic = 0x4D524343;  // "MRCC"
inline constexpr size_t kConnectFixedBytes = 48;
std::vector<uint8_t> encode_connect(const ConnectMsg& m);
Result<ConnectMsg> decode_connect(std::span<const uint8_t> bytes);

// ---------------------------------------------------------------------------------------------
// Ring slots

enum class SlotKind : uint8_t {
  kEager = 1,       // a whole message: header, then the payload
  kRts = 2,         // a large message waits at the sender: header (total length), no payload
  kCts = 3,         // the receiver's buffer for an RTS (to the sender's ring)
  kFin = 4,         // the sender wrote the data of a CTS
  kRemoteData = 5,  // fi_writedata's CQ data, after its RMA write
};

inline constexpr uint8_t kSlotTagged = 1;   // a tagged message (fi_tsend)
inline constexpr uint8_t kSlotHasData = 2;  // carries remote CQ data

struct SlotHeader {
  SlotKind kind = SlotKind::kEager;
  uint8_t flags = 0;
  uint16_t credits = 0;      // slots of the sender's ring the receiver may write again
  uint32_t sequence = 0;     // per direction of a connection, from 0: slot = sequence % slots
  uint64_t tag = 0;          // kEager, kRts
  uint64_t data = 0;         // remote CQ data (kSlotHasData)
  uint64_t length = 0;       // kEager, kRts: the message's length; kCts: bytes to write
  uint64_t send_cookie = 0;  // kRts, kCts: the sender's operation
  uint64_t recv_cookie = 0;  // kCts, kFin: the receiver's operation
  uint64_t addr = 0;         // kCts: where to write
  uint32_t rkey = 0;         // kCts
};

inline constexpr size_t kSlotHeaderBytes = 64;
void encode_slot_header(const SlotHeader& h, std::span<uint8_t, kSlotHeaderBytes> out);
Result<SlotHeader> decode_slot_header(std::span<const uint8_t> bytes);

// The immediate of a WRITE_IMM: a slot (its index) or a credit return (the count).
inline constexpr uint32_t kImmCredit = 1u << 31;
inline constexpr uint32_t imm_for_slot(uint32_t slot) {
  return slot & ~kImmCredit;
}
inline constexpr uint32_t imm_for_credits(uint32_t count) {
  return kImmCredit | (count & ~kImmCredit);
}

}  // namespace mrc::fi
