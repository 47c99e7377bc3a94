// CRC-32 throughput of each implementation (wire/crc32.h), per input size: the ICRC of every
// MRC packet (about 4 KiB of payload plus the headers) is one of these per packet and side.
//   build/bin/crc32_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Counter `bytes_per_second` is the throughput; a path the CPU lacks is skipped.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "wire/crc32.h"

namespace mrc::wire {
namespace {

void BM_Crc32(benchmark::State& state) {
  const auto path = static_cast<Crc32Path>(state.range(0));
  if (!crc32_path_available(path)) {
    state.SkipWithError("not available on this CPU");
    return;
  }
  std::vector<uint8_t> data(static_cast<size_t>(state.range(1)));
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 131 + 7);
  uint32_t crc = kCrc32Preset;
  for (auto _ : state) {
    crc = crc32_update_path(path, crc, data);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(1));
}

BENCHMARK(BM_Crc32)
    ->ArgNames({"path", "bytes"})
    ->ArgsProduct({{static_cast<int64_t>(Crc32Path::kTables),
                    static_cast<int64_t>(Crc32Path::kClmul),
                    static_cast<int64_t>(Crc32Path::kVclmul)},
                   {64, 1024, 4096, 9000}});

}  // namespace
}  // namespace mrc::wire

BENCHMARK_MAIN();
