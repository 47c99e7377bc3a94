// Tests for fi/fi_proto.h: endpoint names, connect messages and slot headers round-trip, and
// every malformed input (short, wrong magic or version, counts and fields out of range,
// trailing bytes) is refused with its error. The fuzz target fuzz/fuzz_fi_proto.cc holds the
// decoders to the same rules on arbitrary bytes; the seeds written here are its corpus.
#include "fi/fi_proto.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace mrc::fi {
namespace {

EndpointName two_planes() {
  EndpointName n;
  for (uint8_t p = 0; p < 2; ++p) {
    PlaneAddress a;
    a.addr = {0xfc, 0xbb, 0xbb, p, 0x40, 0x02};
    a.data_port = uint16_t(4791 + p);
    n.planes.push_back(a);
  }
  n.setup_port = 31000;
  return n;
}

ConnectMsg request() {
  ConnectMsg m;
  m.kind = ConnectKind::kRequest;
  m.ev_mode = 2;
  m.mpr_dest = 8;
  m.max_wimm_dest = 64;
  m.mtu = 4096;
  m.nonce = 0x0123456789ABCDEFull;
  m.from = two_planes();
  m.leaf_usids = {1, 2};
  m.qpn = 0x123456;
  m.first_psn = 0xABCDEF;
  m.ring_addr = 0x7F0012345000ull;
  m.ring_rkey = 0xDEADBEEF;
  m.ring_slots = 64;
  m.slot_bytes = 16384;
  return m;
}

TEST(FiProto, encode_name__round_trips_and_refuses_what_is_malformed) {
  const EndpointName n = two_planes();
  const auto bytes = encode_name(n);
  EXPECT_EQ(bytes.size(), name_bytes(n));
  EXPECT_EQ(bytes.size(), kNameHeaderBytes + 2 * kNamePlaneBytes);
  EXPECT_EQ(decode_name(bytes).value(), n);
  EXPECT_EQ(decode_name(std::span(bytes).first(bytes.size() - 1)).error(), Error::kTruncated);
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(decode_name(longer).error(), Error::kBadLength);
  auto magic = bytes;
  magic[0] ^= 1;
  EXPECT_EQ(decode_name(magic).error(), Error::kBadExtension);
  auto version = bytes;
  version[4] = 9;
  EXPECT_EQ(decode_name(version).error(), Error::kBadVersion);
  auto planes = bytes;
  planes[5] = 0;
  EXPECT_EQ(decode_name(planes).error(), Error::kBadExtension);
  planes[5] = kMaxPlanes + 1;
  EXPECT_FALSE(decode_name(planes));
  auto port = bytes;
  port[6] = port[7] = 0;  // setup port 0
  EXPECT_EQ(decode_name(port).error(), Error::kBadExtension);
}

TEST(FiProto, encode_connect__round_trips_every_kind) {
  for (ConnectKind k : {ConnectKind::kRequest, ConnectKind::kAccept, ConnectKind::kConfirm}) {
    ConnectMsg m = request();
    m.kind = k;
    const auto bytes = encode_connect(m);
    auto d = decode_connect(bytes);
    ASSERT_TRUE(d) << error_name(d.error());
    EXPECT_EQ(d->kind, k);
    EXPECT_EQ(d->nonce, m.nonce);
    EXPECT_EQ(d->from, m.from);
    EXPECT_EQ(d->leaf_usids, m.leaf_usids);
    EXPECT_EQ(d->qpn, m.qpn);
    EXPECT_EQ(d->first_psn, m.first_psn);
    EXPECT_EQ(d->ring_addr, m.ring_addr);
    EXPECT_EQ(d->ring_rkey, m.ring_rkey);
    EXPECT_EQ(d->ring_slots, m.ring_slots);
    EXPECT_EQ(d->slot_bytes, m.slot_bytes);
    EXPECT_EQ(d->mtu, m.mtu);
    EXPECT_EQ(d->max_wimm_dest, m.max_wimm_dest);
    EXPECT_EQ(encode_connect(*d), bytes);
  }
  // A reject needs no QP.
  ConnectMsg r;
  r.kind = ConnectKind::kReject;
  r.reject_reason = RejectReason::kTooManyPeers;
  r.from = two_planes();
  auto d = decode_connect(encode_connect(r));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reject_reason, RejectReason::kTooManyPeers);
}

TEST(FiProto, decode_connect__refuses_fields_out_of_range) {
  const auto bad = [](auto mutate) {
    ConnectMsg m = request();
    mutate(m);
    return !decode_connect(encode_connect(m)).has_value();
  };
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.qpn = 0; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.qpn = 1 << 24; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.first_psn = 1 << 24; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.mpr_dest = 0; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.mtu = 100; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.mtu = 9001; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.ring_slots = 0; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.slot_bytes = kSlotHeaderBytes - 1; }));
  EXPECT_TRUE(bad([](ConnectMsg& m) { m.slot_bytes = (1u << 24) + 1; }));
  EXPECT_FALSE(bad([](ConnectMsg&) {}));
  const auto bytes = encode_connect(request());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_connect(std::span(bytes).first(n))) << n;
  auto kind = bytes;
  kind[5] = 9;
  EXPECT_EQ(decode_connect(kind).error(), Error::kBadExtension);
  for (const size_t reserved : {9, 46, 47}) {  // the bytes encode_connect writes as zero
    auto r = bytes;
    r[reserved] = 1;
    EXPECT_EQ(decode_connect(r).error(), Error::kBadExtension) << reserved;
  }
  auto trailing = bytes;
  trailing.push_back(1);
  EXPECT_EQ(decode_connect(trailing).error(), Error::kBadLength);
}

TEST(FiProto, encode_slot_header__round_trips_and_refuses_unknown_kinds) {
  SlotHeader h;
  h.kind = SlotKind::kCts;
  h.flags = kSlotTagged | kSlotHasData;
  h.credits = 17;
  h.sequence = 0xFFFFFFF0;
  h.tag = 0x1122334455667788ull;
  h.data = 42;
  h.length = 1ull << 33;
  h.send_cookie = 5;
  h.recv_cookie = 6;
  h.addr = 0x7F00AA;
  h.rkey = 0xABCD;
  std::array<uint8_t, kSlotHeaderBytes> buf{};
  encode_slot_header(h, buf);
  auto d = decode_slot_header(buf);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, h.kind);
  EXPECT_EQ(d->flags, h.flags);
  EXPECT_EQ(d->credits, h.credits);
  EXPECT_EQ(d->sequence, h.sequence);
  EXPECT_EQ(d->tag, h.tag);
  EXPECT_EQ(d->data, h.data);
  EXPECT_EQ(d->length, h.length);
  EXPECT_EQ(d->send_cookie, h.send_cookie);
  EXPECT_EQ(d->recv_cookie, h.recv_cookie);
  EXPECT_EQ(d->addr, h.addr);
  EXPECT_EQ(d->rkey, h.rkey);
  EXPECT_EQ(decode_slot_header(std::span(buf).first(kSlotHeaderBytes - 1)).error(),
            Error::kTruncated);
  auto kind = buf;
  kind[0] = 0;
  EXPECT_EQ(decode_slot_header(kind).error(), Error::kBadExtension);
  kind[0] = 6;
  EXPECT_EQ(decode_slot_header(kind).error(), Error::kBadExtension);
  auto flags = buf;
  flags[1] = 0x80;
  EXPECT_EQ(decode_slot_header(flags).error(), Error::kBadExtension);
  EXPECT_EQ(imm_for_slot(5), 5u);
  EXPECT_EQ(imm_for_credits(5) & ~kImmCredit, 5u);
  EXPECT_NE(imm_for_credits(5) & kImmCredit, 0u);
}

// The fuzz target's seeds, written where fuzz/corpus/fuzz_fi_proto/ keeps them; run with
// MRC_WRITE_FUZZ_SEEDS=1 to refresh them after a format change.
TEST(FiProto, seeds__for_the_fuzz_target) {
  if (!std::getenv("MRC_WRITE_FUZZ_SEEDS")) GTEST_SKIP() << "MRC_WRITE_FUZZ_SEEDS not set";
  const std::filesystem::path dir =
      std::filesystem::path(MRC_SOURCE_DIR) / "fuzz/corpus/fuzz_fi_proto";
  std::filesystem::create_directories(dir);
  const auto put = [&](const char* name, const std::vector<uint8_t>& b) {
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  };
  put("request.bin", encode_connect(request()));
  put("name.bin", encode_name(two_planes()));
  std::vector<uint8_t> slot(kSlotHeaderBytes);
  SlotHeader h;
  h.kind = SlotKind::kRts;
  encode_slot_header(h, std::span<uint8_t, kSlotHeaderBytes>(slot.data(), kSlotHeaderBytes));
  put("slot.bin", slot);
}

}  // namespace
}  // namespace mrc::fi
