// CRC-32 throughput of each implementation (wire/crc32.h), per input size: the ICRC of every
// MRC packet (about 4 KiB of payload plus the headers) is one of these per packet and side.
//   build/bin/crc32_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Counter `bytes_per_second` is the throughput; a path the CPU lacks is not registered (an
// error would read as a failure: the CI's benchmark smoke stage fails on any).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "wire/codec.h"
#include "wire/crc32.h"

namespace mrc::wire {
namespace {

void BM_Crc32(benchmark::State& state) {
  const auto path = static_cast<Crc32Path>(state.range(0));
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

// The paths this CPU has (crc32_path_available is safe before main: it runs cpuid itself).
[[maybe_unused]] const auto* const crc32_registered = [] {
  std::vector<int64_t> paths;
  for (const Crc32Path p :
       {Crc32Path::kTables, Crc32Path::kClmul, Crc32Path::kVclmul256, Crc32Path::kVclmul}) {
    if (crc32_path_available(p)) paths.push_back(static_cast<int64_t>(p));
  }
  return benchmark::RegisterBenchmark("BM_Crc32", BM_Crc32)
      ->ArgNames({"path", "bytes"})
      ->ArgsProduct({paths, {64, 1024, 4096, 9000}});
}();

// The ICRC of a datagram's headers alone, as the Linux driver computes it for every packet it
// sends (the payload continues the register from registered memory): IPv6 + UDP + the
// transport headers of a WRITE (100 bytes), and with an SRH of two segments (140 bytes).
void BM_IcrcHeaders(benchmark::State& state) {
  const size_t srh = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> h(100 + srh);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = static_cast<uint8_t>(i * 37 + 11);
  h[0] = 0x60;
  h[6] = srh ? kIpProtoRouting : kIpProtoUdp;
  if (srh) h[kIpv6HeaderBytes + 1] = static_cast<uint8_t>((srh - kSrhFixedBytes) / 8);
  for (auto _ : state) {
    benchmark::DoNotOptimize(h.data());
    uint32_t crc = icrc(h);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * h.size()));
}

BENCHMARK(BM_IcrcHeaders)->ArgName("srh_bytes")->Arg(0)->Arg(40);

}  // namespace
}  // namespace mrc::wire

BENCHMARK_MAIN();
