// libFuzzer target: wire::decode_transport (BTH and up) on arbitrary bytes.
//
// Whenever decode_transport succeeds, encode_transport must accept the packet, decoding that
// must give the same packet, and encoding again must give the same bytes. The input itself
// may differ from the encoding only in reserved bits and pad bytes, so it is not compared.
// Seeds: fuzz/corpus/fuzz_decode_transport/ (written by tests/unit/codec_test.cc).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/codec.h"

namespace {

using mrc::wire::TransportPacket;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_decode_transport: %s\n", what);
  std::abort();
}

bool same(const TransportPacket& a, const TransportPacket& b) {
  return a.bth == b.bth && a.reth == b.reth && a.imm == b.imm && a.aeth == b.aeth &&
         a.data == b.data && a.sack == b.sack && a.nack == b.nack && a.probe == b.probe &&
         a.payload_len == b.payload_len &&
         (a.payload_len == 0 || std::memcmp(a.payload, b.payload, a.payload_len) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> input(data, data + size);
  auto p = mrc::wire::decode_transport(input);
  if (!p) return 0;
  std::vector<uint8_t> first(size);  // payload + pad are canonical, so the size is the same
  auto n = mrc::wire::encode_transport(*p, first);
  if (!n) die("encode_transport rejected a decoded packet");
  if (*n != size) die("re-encoded size differs");
  auto again = mrc::wire::decode_transport(first);
  if (!again) die("decode_transport rejected what encode_transport produced");
  if (!same(*p, *again)) die("decode(encode(p)) != p");
  std::vector<uint8_t> second(size);
  auto m = mrc::wire::encode_transport(*again, second);
  if (!m || second != first) die("encoding is not idempotent");
  return 0;
}
