// The libfabric provider's protocol messages (fi/fi_proto.h).
#include "fi/fi_proto.h"

#include <cstring>

#include "common/be_codec.h"

namespace mrc::fi {

namespace {

using Writer = BeWriter;
using Reader = BeReader;

void write_name(Writer& w, const EndpointName& n) {
  w.u32(kNameMagic);
  w.u8(kProtoVersion);
  w.u8(uint8_t(n.planes.size()));
  w.u16(n.setup_port);
  for (const auto& p : n.planes) {
    w.bytes(p.addr);
    w.u16(p.data_port);
  }
}

Result<EndpointName> read_name(Reader& r) {
  EndpointName n;
  if (r.u32() != kNameMagic)
    return std::unexpected(r.ok() ? Error::kBadExtension : Error::kTruncated);
  const uint8_t version = r.u8();
  const uint8_t planes = r.u8();
  n.setup_port = r.u16();
  if (!r.ok()) return std::unexpected(Error::kTruncated);
  if (version != kProtoVersion) return std::unexpected(Error::kBadVersion);
  if (planes == 0 || planes > kMaxPlanes) return std::unexpected(Error::kBadExtension);
  n.planes.resize(planes);
  for (auto& p : n.planes) {
    r.bytes(p.addr);
    p.data_port = r.u16();
  }
  if (!r.ok()) return std::unexpected(Error::kTruncated);
  if (n.setup_port == 0) return std::unexpected(Error::kBadExtension);
  for (const auto& p : n.planes)
    if (p.data_port == 0) return std::unexpected(Error::kBadExtension);
  return n;
}

}  // namespace

size_t name_bytes(const EndpointName& n) {
  return kNameHeaderBytes + n.planes.size() * kNamePlaneBytes;
}

std::vector<uint8_t> encode_name(const EndpointName& n) {
  std::vector<uint8_t> out;
  out.reserve(name_bytes(n));
  Writer w(out);
  write_name(w, n);
  return out;
}

Result<EndpointName> decode_name(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  auto n = read_name(r);
  if (!n) return n;
  if (r.left() != 0) return std::unexpected(Error::kBadLength);
  return n;
}

std::vector<uint8_t> encode_connect(const ConnectMsg& m) {
  std::vector<uint8_t> out;
  out.reserve(kConnectFixedBytes + name_bytes(m.from));
  Writer w(out);
  w.u32(kConnectMagic);
  w.u8(kProtoVersion);
  w.u8(uint8_t(m.kind));
  w.u8(uint8_t(m.reject_reason));
  w.u8(m.ev_mode);
  w.u8(m.mpr_dest);
  w.u8(0);
  w.u16(m.max_wimm_dest);
  w.u32(m.mtu);
  w.u64(m.nonce);
  w.u32(m.qpn);
  w.u32(m.first_psn);
  w.u64(m.ring_addr);
  w.u32(m.ring_rkey);
  w.u16(m.ring_slots);
  w.u16(0);
  w.u32(m.slot_bytes);
  write_name(w, m.from);
  for (size_t i = 0; i < m.from.planes.size(); ++i)
    w.u16(i < m.leaf_usids.size() ? m.leaf_usids[i] : 0);
  return out;
}

Result<ConnectMsg> decode_connect(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  ConnectMsg m;
  const uint32_t magic = r.u32();
  const uint8_t version = r.u8();
  const uint8_t kind = r.u8();
  const uint8_t reason = r.u8();
  m.ev_mode = r.u8();
  m.mpr_dest = r.u8();
  const uint8_t reserved8 = r.u8();
  m.max_wimm_dest = r.u16();
  m.mtu = r.u32();
  m.nonce = r.u64();
  m.qpn = r.u32();
  m.first_psn = r.u32();
  m.ring_addr = r.u64();
  m.ring_rkey = r.u32();
  m.ring_slots = r.u16();
  const uint16_t reserved16 = r.u16();
  m.slot_bytes = r.u32();
  if (!r.ok()) return std::unexpected(Error::kTruncated);
  if (magic != kConnectMagic) return std::unexpected(Error::kBadExtension);
  if (version != kProtoVersion) return std::unexpected(Error::kBadVersion);
  // Reserved fields are zero: a later version may give them a meaning this one cannot honour.
  if (reserved8 != 0 || reserved16 != 0) return std::unexpected(Error::kBadExtension);
  if (kind < uint8_t(ConnectKind::kRequest) || kind > uint8_t(ConnectKind::kConfirm))
    return std::unexpected(Error::kBadExtension);
  if (reason > uint8_t(RejectReason::kTooManyPeers)) return std::unexpected(Error::kBadExtension);
  m.kind = ConnectKind(kind);
  m.reject_reason = RejectReason(reason);
  auto from = read_name(r);
  if (!from) return std::unexpected(from.error());
  m.leaf_usids.resize(from->planes.size());
  for (auto& u : m.leaf_usids)
    u = r.u16();
  if (!r.ok()) return std::unexpected(Error::kTruncated);
  if (r.left() != 0) return std::unexpected(Error::kBadLength);
  m.from = std::move(*from);
  if (m.kind != ConnectKind::kReject) {
    // A connection needs a QP, a window and a ring of at least one slot that holds a header.
    if (m.qpn == 0 || m.qpn > 0xFFFFFF || m.first_psn > 0xFFFFFF || m.mpr_dest == 0 ||
        m.mtu < 256 || m.mtu > 9000 || m.ring_slots == 0 || m.slot_bytes < kSlotHeaderBytes ||
        m.slot_bytes > (1u << 24))
      return std::unexpected(Error::kBadExtension);
  }
  return m;
}

void encode_slot_header(const SlotHeader& h, std::span<uint8_t, kSlotHeaderBytes> out) {
  std::vector<uint8_t> v;
  v.reserve(kSlotHeaderBytes);
  Writer w(v);
  w.u8(uint8_t(h.kind));
  w.u8(h.flags);
  w.u16(h.credits);
  w.u32(h.sequence);
  w.u64(h.tag);
  w.u64(h.data);
  w.u64(h.length);
  w.u64(h.send_cookie);
  w.u64(h.recv_cookie);
  w.u64(h.addr);
  w.u32(h.rkey);
  w.u32(0);
  std::memcpy(out.data(), v.data(), kSlotHeaderBytes);
}

Result<SlotHeader> decode_slot_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < kSlotHeaderBytes) return std::unexpected(Error::kTruncated);
  Reader r(bytes.first(kSlotHeaderBytes));
  SlotHeader h;
  const uint8_t kind = r.u8();
  h.flags = r.u8();
  h.credits = r.u16();
  h.sequence = r.u32();
  h.tag = r.u64();
  h.data = r.u64();
  h.length = r.u64();
  h.send_cookie = r.u64();
  h.recv_cookie = r.u64();
  h.addr = r.u64();
  h.rkey = r.u32();
  if (kind < uint8_t(SlotKind::kEager) || kind > uint8_t(SlotKind::kRemoteData))
    return std::unexpected(Error::kBadExtension);
  if ((h.flags & ~(kSlotTagged | kSlotHasData)) != 0) return std::unexpected(Error::kBadExtension);
  h.kind = SlotKind(kind);
  return h;
}

}  // namespace mrc::fi
