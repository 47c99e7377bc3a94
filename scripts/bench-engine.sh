#!/usr/bin/env bash
# Builds engine_bench in the Release tree and runs the engine microbenchmarks
# (bench/engine_bench.cc), 5 repetitions, medians only (the machine is shared and noisy).
# Writes the JSON to build/bench-engine.json, prints a Markdown table of the medians (for
# docs/performance.md) and ends with exactly one line `ns_per_packet=<N>`, N = median(send,
# 1 QP) + median(receive, phantom) + median(ACK processing per data packet), one decimal. A
# benchmark that reports an error (engine_bench checks its loop's counters) fails the script.
#   scripts/bench-engine.sh                      build + run everything
#   MRC_BUILD_DIR=build-x scripts/bench-engine.sh   another build tree
#   MRC_BENCH_REPS=9 scripts/bench-engine.sh     more repetitions
#   scripts/bench-engine.sh --benchmark_min_time=1   extra arguments go to engine_bench
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${MRC_BUILD_DIR:-build}
REPS=${MRC_BENCH_REPS:-5}
export MRC_BUILD_DIR=$BUILD_DIR

# Reuse the Release tree setup.sh makes and build only engine_bench in it (the machine may be
# shared, and someone else's half-finished file must not stop the benchmark); a machine
# without the packages or the tree gets the whole setup first.
have_all=1
for p in cmake ninja-build g++ libbenchmark-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || have_all=0
done
if [ "$have_all" = 1 ] && [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake --build "$BUILD_DIR" --target engine_bench >&2
else
  scripts/setup.sh >&2
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
if [ "$build_type" != Release ]; then
  echo "bench-engine: $BUILD_DIR is a '$build_type' tree; the figures are for Release" >&2
  exit 1
fi

JSON=$BUILD_DIR/bench-engine.json
echo "bench-engine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$BUILD_DIR/bin/engine_bench" \
  --benchmark_repetitions="$REPS" \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$JSON" --benchmark_out_format=json \
  "$@" >&2

python3 - "$JSON" <<'EOF'
import json, sys

with open(sys.argv[1]) as f:
    data = json.load(f)
errors = [b for b in data["benchmarks"] if b.get("error_occurred")]
for b in errors:
    print(f"bench-engine: {b['name']}: {b.get('error_message', '?')}", file=sys.stderr)
if errors:
    sys.exit(f"bench-engine: {len(errors)} benchmark runs reported an error")
med = {}
for b in data["benchmarks"]:
    if b.get("aggregate_name") == "median":
        med[b["run_name"].replace("/manual_time", "")] = b.get("ns_per_packet")

rows = [
    ("BM_Send/qps:1", "(a) send: poll_transmit, data packet, 1 QP"),
    ("BM_Send/qps:64", "(a) send: poll_transmit, data packet, 64 QPs"),
    ("BM_Receive/memcpy:0", "(b) receive: on_packet, phantom region (no copy)"),
    ("BM_Receive/memcpy:1", "(b) receive: on_packet, real memory (4 KiB memcpy)"),
    ("BM_AckProcess", "(c) ACK processing at the requester, per data packet"),
    ("BM_AckGenerate", "(d) ACK generation at the responder, per data packet"),
]
print("| component | benchmark | median ns/packet |")
print("| --- | --- | ---: |")
for name, what in rows:
    v = med.get(name)
    print(f"| {what} | `{name}` | {'n/a' if v is None else f'{v:.1f}'} |")
need = ["BM_Send/qps:1", "BM_Receive/memcpy:0", "BM_AckProcess"]
if any(med.get(n) is None for n in need):
    sys.exit("bench-engine: missing medians for " + ", ".join(n for n in need if med.get(n) is None))
total = sum(med[n] for n in need)
if med.get("BM_AckGenerate") is not None:
    print(f"\n(a)+(b)+(c)+(d) including ACK generation: {total + med['BM_AckGenerate']:.1f} ns")
print(f"ns_per_packet={total:.1f}")
EOF
