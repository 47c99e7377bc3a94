// libFuzzer target: wire::decode on arbitrary bytes.
//
// Every input is decoded twice: as a receiver would (ICRC checked) and with both integrity
// checks off, so that mutated inputs reach the transport parser instead of stopping at the
// ICRC. Whenever decode succeeds:
//   - encode must accept the result (encode takes everything decode returns) and produce a
//     datagram of the same size;
//   - decoding that again, with the ICRC and UDP checksum verified, must give the same
//     datagram (the UDP checksum aside: encode computes a fresh one);
//   - encoding the second result must reproduce the first encoding byte for byte.
// Seeds: fuzz/corpus/fuzz_decode_datagram/ (written by tests/unit/codec_test.cc).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/codec.h"

namespace {

using mrc::wire::Datagram;
using mrc::wire::TransportPacket;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_decode_datagram: %s\n", what);
  std::abort();
}

bool same_transport(const TransportPacket& a, const TransportPacket& b) {
  return a.bth == b.bth && a.reth == b.reth && a.imm == b.imm && a.aeth == b.aeth &&
         a.data == b.data && a.sack == b.sack && a.nack == b.nack && a.probe == b.probe &&
         a.payload_len == b.payload_len &&
         (a.payload_len == 0 || std::memcmp(a.payload, b.payload, a.payload_len) == 0);
}

bool same_except_udp_checksum(const Datagram& a, const Datagram& b) {
  mrc::wire::UdpHeader ua = a.udp, ub = b.udp;
  ua.checksum = ub.checksum = 0;
  return a.ip == b.ip && a.has_srh == b.has_srh && a.srh == b.srh && ua == ub &&
         same_transport(a.pkt, b.pkt);
}

void check_round_trip(const Datagram& d, size_t input_size) {
  std::vector<uint8_t> first(mrc::wire::encoded_size(d));
  auto n = mrc::wire::encode(d, first);
  if (!n) die("encode rejected a decoded datagram");
  if (*n != first.size() || *n != input_size) die("re-encoded size differs");
  auto again = mrc::wire::decode(first, {.verify_icrc = true, .verify_udp_checksum = true});
  if (!again) die("decode rejected what encode produced");
  if (!same_except_udp_checksum(d, *again)) die("decode(encode(d)) != d");
  std::vector<uint8_t> second(first.size());
  auto m = mrc::wire::encode(*again, second);
  if (!m || second != first) die("encoding is not idempotent");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy so that the payload pointer decode returns points into memory we own and ASan
  // guards exactly.
  const std::vector<uint8_t> input(data, data + size);
  if (auto d = mrc::wire::decode(input)) check_round_trip(*d, size);
  if (auto d = mrc::wire::decode(input, {.verify_icrc = false, .verify_udp_checksum = false})) {
    check_round_trip(*d, size);
  }
  return 0;
}
