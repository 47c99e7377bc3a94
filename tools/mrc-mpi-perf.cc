// mrc-mpi-perf: an MPI program that measures and checks a transport through MPI, for MPI over
// the `mrc` libfabric provider (docs/libfabric.md) and the providers it is compared with.
//
//   pingpong  ranks 0 and 1: latency (half the round trip) and bandwidth from 1 B to 64 MiB;
//             the first and the last message of every size are checked byte for byte
//   stream    ranks 0 -> 1, a window of non-blocking sends (osu_bw's method): bandwidth
//   allreduce every rank: MPI_Allreduce (sum of uint64) in a loop; every element of every
//             result is checked; per-iteration times, the slowest reported with its start
//
// With --duration the allreduce loop runs for that long (a fault schedule runs beside it), and
// --timeline writes every iteration's start and duration for the script that injected them.
// Rank 0 prints a table and ends with one key=value line. Any wrong byte or MPI error exits 1.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"

namespace {

struct Options {
  uint64_t min_size = 1;
  uint64_t max_size = 64ull << 20;
  int iters = 0;  // 0: by size
  int window = 16;
  uint64_t allreduce_count = 1 << 16;
  int allreduce_iters = 200;
  double duration_s = 0;
  std::string timeline;  // rank 0: one line per allreduce iteration
  bool no_pingpong = false;
  bool no_stream = false;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Round trips per size: many for small messages, a few for large ones (a few seconds in all).
int iterations_for(uint64_t size, int fixed) {
  if (fixed > 0) return fixed;
  if (size <= 64 << 10) return 1000;
  if (size <= 1 << 20) return 100;
  return 20;
}

// The byte at `i` of message `seq` of `size` bytes: every byte of every message differs from
// its neighbours, so a shifted, stale or partly written buffer is caught.
uint8_t pattern(uint64_t size, uint64_t seq, uint64_t i) {
  uint64_t x = (size * 0x9E3779B97F4A7C15ull) ^ (seq * 0xBF58476D1CE4E5B9ull) ^ i;
  x ^= x >> 29;
  return uint8_t(x * 0x94D049BB133111EBull >> 56);
}

void fill(std::vector<uint8_t>& buf, uint64_t size, uint64_t seq) {
  for (uint64_t i = 0; i < size; ++i)
    buf[i] = pattern(size, seq, i);
}

// The index of the first wrong byte, or -1.
int64_t first_wrong(const std::vector<uint8_t>& buf, uint64_t size, uint64_t seq) {
  for (uint64_t i = 0; i < size; ++i)
    if (buf[i] != pattern(size, seq, i)) return int64_t(i);
  return -1;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "mrc-mpi-perf: %s\n", what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(std::string(call) + ": " + std::string(text, size_t(len)));
}

std::vector<uint64_t> sizes_between(uint64_t lo, uint64_t hi) {
  std::vector<uint64_t> out;
  for (uint64_t s = lo; s <= hi; s *= 2)
    out.push_back(s);
  return out;
}

std::string size_text(uint64_t s) {
  if (s >= (1 << 20) && s % (1 << 20) == 0) return std::to_string(s >> 20) + "MiB";
  if (s >= (1 << 10) && s % (1 << 10) == 0) return std::to_string(s >> 10) + "KiB";
  return std::to_string(s) + "B";
}

struct PingResult {
  uint64_t size;
  double lat_us;
  double gbps;
};

// Ranks 0 and 1 exchange `size` bytes `iters` times (after a checked warm-up exchange).
PingResult pingpong(int rank, uint64_t size, int iters, std::vector<uint8_t>& buf) {
  const int tag = 1;
  const int peer = rank == 0 ? 1 : 0;
  auto exchange = [&](uint64_t seq, bool checked) {
    if (rank == 0) {
      if (checked) fill(buf, size, seq);
      check(MPI_Send(buf.data(), int(size), MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
      check(MPI_Recv(buf.data(), int(size), MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Recv");
    } else {
      check(MPI_Recv(buf.data(), int(size), MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Recv");
      check(MPI_Send(buf.data(), int(size), MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
    }
    // Rank 1 echoes what it got: both ends see message `seq` unchanged.
    if (checked)
      if (const int64_t at = first_wrong(buf, size, seq); at >= 0)
        fail("pingpong " + size_text(size) + ": rank " + std::to_string(rank) +
             " got a wrong byte at offset " + std::to_string(at));
  };
  exchange(0, true);
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i)
    exchange(0, false);
  const double t = now_s() - t0;
  exchange(1, true);
  const double one_way = t / iters / 2;
  return {size, one_way * 1e6, double(size) * 8 / one_way / 1e9};
}

// Rank 0 sends a window of `window` messages of `size` bytes, rank 1 acknowledges each window
// with a zero-byte message; bandwidth is what crossed over the time. The last window is checked.
double stream(int rank, uint64_t size, int iters, int window, std::vector<uint8_t>& buf) {
  std::vector<MPI_Request> req(static_cast<size_t>(window));
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(window), std::vector<uint8_t>(size));
  const int peer = rank == 0 ? 1 : 0;
  auto one_window = [&](bool checked) {
    if (rank == 0) {
      for (int w = 0; w < window; ++w) {
        if (checked) fill(bufs[size_t(w)], size, uint64_t(w) + 7);
        check(MPI_Isend(bufs[size_t(w)].data(), int(size), MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                        &req[size_t(w)]),
              "MPI_Isend");
      }
      check(MPI_Waitall(window, req.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
      check(MPI_Recv(nullptr, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    } else {
      for (int w = 0; w < window; ++w)
        check(MPI_Irecv(bufs[size_t(w)].data(), int(size), MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                        &req[size_t(w)]),
              "MPI_Irecv");
      check(MPI_Waitall(window, req.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
      check(MPI_Send(nullptr, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD), "MPI_Send");
      if (checked)
        for (int w = 0; w < window; ++w)
          if (const int64_t at = first_wrong(bufs[size_t(w)], size, uint64_t(w) + 7); at >= 0)
            fail("stream " + size_text(size) + ": message " + std::to_string(w) +
                 " has a wrong byte at offset " + std::to_string(at));
    }
  };
  (void)buf;
  one_window(false);
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i)
    one_window(false);
  const double t = now_s() - t0;
  one_window(true);
  return double(size) * window * iters * 8 / t / 1e9;
}

// Element `i` of rank `r`'s contribution in iteration `it` (sums wrap modulo 2^64 alike on
// every rank, so the expected result is exact).
uint64_t contribution(uint64_t it, uint64_t r, uint64_t i) {
  return (it + 1) * 0x9E3779B97F4A7C15ull + (r + 1) * 0xC2B2AE3D27D4EB4Full +
         i * 0x165667B19E3779F9ull;
}

struct AllreduceResult {
  int iterations = 0;
  double median_ms = 0;
  double slowest_ms = 0;
  double slowest_at_s = 0;  // seconds from the loop's start
};

AllreduceResult allreduce(int rank, int ranks, const Options& o) {
  const uint64_t n = o.allreduce_count;
  std::vector<uint64_t> in(n), out(n);
  std::vector<double> times;
  std::vector<double> starts;
  const double start = now_s();
  AllreduceResult res;
  for (uint64_t it = 0;; ++it) {
    if (o.duration_s > 0) {
      // Every rank must agree to go on: rank 0's clock decides.
      int go = now_s() - start < o.duration_s;
      check(MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
      if (!go) break;
    } else if (it >= uint64_t(o.allreduce_iters)) {
      break;
    }
    for (uint64_t i = 0; i < n; ++i)
      in[i] = contribution(it, uint64_t(rank), i);
    const double t0 = now_s();
    check(MPI_Allreduce(in.data(), out.data(), int(n), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
    const double t = now_s() - t0;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t want = 0;
      for (int r = 0; r < ranks; ++r)
        want += contribution(it, uint64_t(r), i);
      if (out[i] != want)
        fail("allreduce iteration " + std::to_string(it) + ": element " + std::to_string(i) +
             " on rank " + std::to_string(rank) + " is wrong");
    }
    times.push_back(t);
    starts.push_back(t0);
    if (t * 1e3 > res.slowest_ms) {
      res.slowest_ms = t * 1e3;
      res.slowest_at_s = t0 - start;
    }
  }
  if (rank == 0 && !o.timeline.empty()) {
    FILE* f = std::fopen(o.timeline.c_str(), "w");
    if (!f) fail("cannot write " + o.timeline);
    std::fprintf(f, "# start_monotonic_s duration_ms\n");
    for (size_t i = 0; i < times.size(); ++i)
      std::fprintf(f, "%.6f %.3f\n", starts[i], times[i] * 1e3);
    std::fclose(f);
  }
  res.iterations = int(times.size());
  if (!times.empty()) {
    std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
    res.median_ms = times[times.size() / 2] * 1e3;
  }
  // The job's slowest iteration is the slowest any rank saw.
  double mine = res.slowest_ms, worst = 0;
  check(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  if (worst > mine) res.slowest_at_s = -1;  // another rank's: its start is not known here
  res.slowest_ms = worst;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  // Arguments first, before MPI starts: a bad one ends every rank alike with status 2.
  Options o;
  CLI::App app{"Latency, bandwidth and checked allreduce through MPI (docs/libfabric.md)",
               "mrc-mpi-perf"};
  app.add_option("--min-size", o.min_size, "smallest ping-pong message, bytes (default 1)");
  app.add_option("--max-size", o.max_size, "largest ping-pong message, bytes (default 64 MiB)");
  app.add_option("--iters", o.iters, "round trips per size (default: 1000 to 20 by size)");
  app.add_option("--window", o.window, "messages in flight in the stream test (default 16)");
  app.add_option("--allreduce-count", o.allreduce_count, "uint64 elements per allreduce");
  app.add_option("--allreduce-iters", o.allreduce_iters, "allreduce iterations (default 200)");
  app.add_option("--duration", o.duration_s, "run the allreduce loop this many seconds instead");
  app.add_option("--timeline", o.timeline,
                 "rank 0 writes each allreduce iteration's start (CLOCK_MONOTONIC s) and "
                 "duration (ms) to this file");
  app.add_flag("--no-pingpong", o.no_pingpong, "skip the ping-pong sizes");
  app.add_flag("--no-stream", o.no_stream, "skip the stream bandwidth test");
  mrc::tools::set_exit_codes(app,
                             "0 every message and result was right, 1 a wrong byte or an "
                             "MPI error");
  if (const int code = mrc::tools::parse(app, argc, argv); code >= 0) return code;
  if (o.min_size == 0 || o.min_size > o.max_size || o.max_size > (1ull << 30) || o.window < 1 ||
      o.iters < 0 || o.allreduce_iters < 0 || o.duration_s < 0 || o.allreduce_count == 0 ||
      o.allreduce_count > (1u << 28)) {
    std::fprintf(stderr,
                 "mrc-mpi-perf: need 1 <= --min-size <= --max-size <= 1 GiB, --window >= 1, "
                 "1 <= --allreduce-count <= 2^28 and no negative count or duration\n");
    return mrc::tools::kExitBadArguments;
  }

  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  const bool two = ranks >= 2;
  std::vector<PingResult> pings;
  std::vector<double> streams;
  const auto sizes = sizes_between(o.min_size, o.max_size);
  if (two && !o.no_pingpong) {
    std::vector<uint8_t> buf(o.max_size);
    for (uint64_t s : sizes) {
      if (rank <= 1) pings.push_back(pingpong(rank, s, iterations_for(s, o.iters), buf));
      // Windows enough for half a GiB (at least a tenth of the round trips, at least two).
      const uint64_t windows = std::max<uint64_t>({2, uint64_t(iterations_for(s, o.iters)) / 10,
                                                   (512ull << 20) / (s * uint64_t(o.window))});
      if (rank <= 1 && !o.no_stream)
        streams.push_back(stream(rank, s, int(std::min<uint64_t>(windows, 1000)), o.window, buf));
    }
  }
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const AllreduceResult ar = allreduce(rank, ranks, o);

  if (rank == 0) {
    if (!pings.empty()) {
      std::printf("%10s %12s %14s %14s\n", "size", "latency_us", "pingpong_gbps",
                  o.no_stream ? "" : "stream_gbps");
      for (size_t i = 0; i < pings.size(); ++i)
        std::printf("%10s %12.2f %14.3f %14s\n", size_text(pings[i].size).c_str(), pings[i].lat_us,
                    pings[i].gbps,
                    streams.empty() ? "" : std::to_string(streams[i]).substr(0, 7).c_str());
    }
    std::printf(
        "allreduce: %d ranks, %llu x uint64, %d iterations, every result checked; "
        "median %.3f ms, slowest %.3f ms%s\n",
        ranks, static_cast<unsigned long long>(o.allreduce_count), ar.iterations, ar.median_ms,
        ar.slowest_ms,
        ar.slowest_at_s >= 0
            ? (" at " + std::to_string(ar.slowest_at_s).substr(0, 5) + " s").c_str()
            : "");
    auto find = [&](uint64_t s, bool bw) -> std::string {
      for (size_t i = 0; i < pings.size(); ++i)
        if (pings[i].size == s) {
          const double v = bw ? (streams.empty() ? pings[i].gbps : streams[i]) : pings[i].lat_us;
          char text[32];
          std::snprintf(text, sizeof text, "%.3f", v);
          return text;
        }
      return "na";
    };
    std::printf(
        "lat_8B_us=%s bw_4MiB_gbps=%s allreduce_iters=%d allreduce_median_ms=%.3f "
        "allreduce_slowest_ms=%.3f errors=0\n",
        find(8, false).c_str(), find(4 << 20, true).c_str(), ar.iterations, ar.median_ms,
        ar.slowest_ms);
  }
  MPI_Finalize();
  return 0;
}
