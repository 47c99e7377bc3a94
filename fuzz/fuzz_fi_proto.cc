// libFuzzer target: the libfabric provider's protocol decoders (fi/fi_proto.h) on arbitrary
// bytes, as a stranger's setup datagram or a peer's ring slot would bring them.
//
// decode_connect and decode_name are strict inverses of their encoders: whatever they accept
// encodes back to the same bytes. decode_slot_header accepts only known kinds and flags.
// Seeds: fuzz/corpus/fuzz_fi_proto/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "fi/fi_proto.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_fi_proto: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mrc::fi;
  const std::span<const uint8_t> bytes(data, size);
  if (auto m = decode_connect(bytes)) {
    const auto again = encode_connect(*m);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
      die("encode_connect(decode_connect(bytes)) != bytes");
    if (m->from.planes.empty() || m->from.planes.size() > kMaxPlanes) die("plane count accepted");
  }
  if (auto n = decode_name(bytes)) {
    const auto again = encode_name(*n);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
      die("encode_name(decode_name(bytes)) != bytes");
  }
  if (auto h = decode_slot_header(bytes)) {
    if (size < kSlotHeaderBytes) die("a short slot header accepted");
    if (uint8_t(h->kind) < 1 || uint8_t(h->kind) > 5) die("an unknown slot kind accepted");
  }
  return 0;
}
