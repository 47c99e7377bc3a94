// Byte-exact encoding and decoding of MRC datagrams (docs/wire-format.md has the diagrams).
//
// Layout, outermost first:
//   IPv6 (40) [+ SRH (8 + 16 * segments)] + UDP (8, dst port 4791)
//   + BTH (12) + opcode-dependent headers + MRC extension   <- transport_header_bytes(op)
//   + payload + pad (0..3 zero bytes, to a multiple of 4) + ICRC (4)
//
// Which headers follow the BTH is decided by one table in codec.cc (a row per opcode, as in
// Linux rxe's rxe_opcode.c). Nothing here allocates; decode() points into the caller's buffer.
//
// Integrity. The ICRC is the RoCEv2 invariant CRC (IBTA vol. 1 annex A17.4.5.2) with two MRC
// changes, both because SRv6 switches legitimately rewrite these bytes in flight:
//   - the IPv6 destination address is masked to ones, like the other mutable fields
//     (traffic class, flow label, hop limit): uSID switches shift it at every hop;
//   - the SRH is skipped, and the IPv6 header is covered as if the SRH were absent (next
//     header = UDP, payload length = UDP length): SR endpoints rewrite segments left and the
//     DA, and a penultimate-segment-pop node may remove the SRH altogether.
// Without an SRH and with an unchanged DA the only difference from a stock RoCEv2 ICRC is the
// DA mask. The ICRC is stored least significant byte first, as RoCEv2 NICs do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/types.h"
#include "wire/headers.h"

namespace mrc::wire {

// Stable name of an opcode for logs and dissectors ("RC_RDMA_WRITE_ONLY", "MRC_TRIM_NACK",
// ...), or "UNKNOWN" for a byte that is not one of the Opcode enumerators.
const char* opcode_name(Opcode op);

// Bytes from the start of the BTH to the end of the MRC extension (or of the CNP's reserved
// bytes): everything before the payload, excluding pad and ICRC. 0 for an opcode MRC does not
// use. Values: kWriteOnly 52, kWriteOnlyImm 56, kAck 120, kCnp 28, kTrimNack 28, kProbe 36,
// kProbeReply 36.
uint32_t transport_header_bytes(Opcode op);

// Bytes encode(d) writes: IPv6 + SRH (if d.has_srh) + UDP + transport headers + payload + pad
// + ICRC. Meaningful for datagrams encode() accepts (it uses d.srh.num_segments and
// d.pkt.payload_len as given).
size_t encoded_size(const Datagram& d);

// Encodes `d` into the start of `out`; returns the bytes written (== encoded_size(d)).
// Filled in, whatever `d` says: IPv6 next header (43 with an SRH, else 17), payload length;
// SRH next header (17) and hdr ext len; UDP length and checksum (RFC 8200 8.1 pseudo-header
// whose destination is the final one: srh.segments[0] when an SRH is present, else ip.dst);
// BTH pad count; the ICRC. Reserved bits and bytes are written as zero; DataExt and AckEcho
// flags outside kAllFlags are dropped. A null payload with payload_len > 0 is written as
// zeros (the simulator carries lengths, not bytes).
// Errors (all checked before the first byte is written: on error `out` is untouched):
//   kBadOpcode     d.pkt.bth.opcode is not an Opcode enumerator
//   kBadVersion    bth.tver != 0
//   kInvalidArgument ip.flow_label does not fit 20 bits
//   kBadSrh        has_srh and num_segments not in [1, kMaxSrhSegments], last_entry !=
//                  num_segments - 1, or segments_left > last_entry
//   kBadUdpPort    udp.dst_port != 4791
//   kBadLength     payload on an opcode that carries none (kAck, kTrimNack, kCnp)
//   kBadExtension  the transport fields decode() would reject (see decode)
//   kTooBig        the IPv6 payload length would exceed 65535, or `out` is too small
Result<size_t> encode(const Datagram& d, std::span<uint8_t> out);

struct DecodeOptions {
  bool verify_icrc = true;
  // Off by default: uSID switches rewrite the destination address, so the receiver cannot in
  // general rebuild the sender's pseudo-header; the ICRC protects the bytes end to end.
  bool verify_udp_checksum = false;
};

// Decodes one IPv6 datagram (starting at the IPv6 header, ending at the ICRC; no link-layer
// header or trailer). On success every field is what the wire carried, d.pkt.payload points
// into `in` (null when payload_len == 0), reserved bits are dropped and the parts the opcode
// does not carry keep their defaults. Never allocates; never reads outside `in`.
// Errors (checked layer by layer from the outside in; the integrity checks, ICRC then
// UDP checksum, after all framing checks and before the kBadExtension field checks):
//   kTruncated     `in` ends before a header that must be there (IPv6, SRH, UDP, BTH, the
//                  opcode's headers, ICRC), or before the end the IPv6 payload length gives
//   kBadVersion    IPv6 version != 6, or BTH transport version != 0
//   kBadLength     bytes follow the end the IPv6 payload length gives; UDP length != the
//                  bytes after the SRH; payload bytes on an opcode that carries none
//   kBadNextHeader IPv6 next header neither UDP nor routing (43); after an SRH, not UDP
//   kBadSrh        routing type != 4, hdr ext len != 2 * (last_entry + 1) (MRC sends no
//                  TLVs), more than kMaxSrhSegments segments, segments_left > last_entry
//   kBadUdpPort    UDP destination port != 4791
//   kBadOpcode     BTH opcode not one MRC uses
//   kBadPadCount   pad count larger than the bytes after the headers, or payload + pad not
//                  a multiple of 4
//   kBadIcrc       ICRC mismatch (when opt.verify_icrc)
//   kBadUdpChecksum UDP checksum mismatch (when opt.verify_udp_checksum; 0 = not computed
//                  is accepted)
//   kBadExtension  a 24-bit field (PSN, cum PSN, SACK base, echo PSN) above 2^24 - 1; data
//                  ext pkt_count == 0 or pkt_index >= pkt_count; SACK echo_count >
//                  kMaxAckEchoes; RETH dma_len != payload_len, unless the packet is trimmed
//                  (DSCP == kDscpTrimmed and payload_len == 0; dma_len then keeps the
//                  original length)
Result<Datagram> decode(std::span<const uint8_t> in, const DecodeOptions& opt = {});

// BTH and up only: the bytes encode() puts between the UDP header and the ICRC (BTH with its
// pad count, headers, payload, pad). No IP, UDP or ICRC. Same errors as encode() for the
// transport part (kBadOpcode, kBadVersion, kBadLength, kBadExtension, kTooBig), with one
// difference: without the IPv6 DSCP a packet with payload_len == 0 may carry any dma_len
// (it may be trimmed).
Result<size_t> encode_transport(const TransportPacket& p, std::span<uint8_t> out);

// Inverse of encode_transport: payload = the bytes after the extension minus the BTH pad.
// Errors as decode() for the BTH and up: kTruncated, kBadOpcode, kBadVersion, kBadPadCount,
// kBadLength, kBadExtension (trimming relaxed as in encode_transport).
Result<TransportPacket> decode_transport(std::span<const uint8_t> in);

// The MRC ICRC (see the top of this file) of an IPv6 datagram given without its last four
// bytes: `datagram_without_icrc` runs from the IPv6 header to the end of the pad. Store the
// result least significant byte first. Returns 0 when the span is too short to hold IPv6 [+
// the SRH its header announces] + UDP + BTH (decode never asks for that).
uint32_t icrc(std::span<const uint8_t> datagram_without_icrc);

}  // namespace mrc::wire
