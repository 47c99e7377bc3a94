// libFuzzer target: mrc-perf's control-message decoder (net/perf_protocol.h) on arbitrary
// bytes, as a stranger past the hellos would send them. What it accepts encodes back to the
// same bytes once its fields are in key order, and decodes to the same fields again.
// Seeds: fuzz/corpus/fuzz_perf_message/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "net/perf_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mrc::net;
  auto fields = decode_perf_message(std::span<const uint8_t>(data, size));
  if (!fields) return 0;
  const std::vector<std::pair<std::string, uint64_t>> ordered(fields->begin(), fields->end());
  auto again = decode_perf_message(encode_perf_message(ordered));
  if (!again || *again != *fields) {
    std::fprintf(stderr, "fuzz_perf_message: decode(encode(decode(bytes))) differs\n");
    std::abort();
  }
  return 0;
}
