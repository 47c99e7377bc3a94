// libFuzzer target: mrc-perf's hello (net::decode_hello and the server's bounds,
// net::check_client_hello) on arbitrary bytes from a client.
//
// decode_hello is a strict inverse of encode_hello: whenever it accepts bytes, encoding the
// result must give them back. check_client_hello must never accept a hello whose buffer
// (msg_size x slots x QPs) or path count is beyond its limits, whatever overflows.
// Seeds: fuzz/corpus/fuzz_hello/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "net/hello.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fuzz_hello: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mrc::net;
  const std::span<const uint8_t> bytes(data, size);
  auto h = decode_hello(bytes);
  if (!h) {
    if (h.error().message.empty()) die("an error without a message");
    return 0;
  }
  const auto again = encode_hello(*h);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
    die("encode(decode(bytes)) != bytes");
  HelloLimits limits;
  limits.max_buffer_bytes = 1ull << 30;
  if (check_client_hello(*h, limits)) {
    const unsigned __int128 buffer =
        static_cast<unsigned __int128>(h->msg_size) * h->slots * h->qps.size();
    if (buffer == 0 || buffer > limits.max_buffer_bytes) die("a buffer beyond the limit accepted");
    const uint64_t paths = uint64_t{h->qps.size()} * h->planes.size() * h->evs_per_plane;
    if (paths == 0 || paths > limits.max_paths) die("a path count beyond the limit accepted");
    if (h->mtu < 256 || h->mtu > 9000) die("an MTU out of range accepted");
  }
  return 0;
}
