#!/usr/bin/env bash
# Soak test: runs the engine property tests (tests/unit/engine_property_test.cc) over N random
# fault schedules in total (default 10000), in batches with distinct rapidcheck seeds, two
# batches at a time. Prints every failing schedule's report and reproduce string, then a
# final line `failures=<count>` (failed property runs; each stops at its first failing
# schedule). Exit status 1 if that count is not 0.
#   scripts/soak.sh [N]
#   MRC_SOAK_SEED=123 scripts/soak.sh 50000     fixed base seed (batch i uses seed + i)
#   MRC_BUILD_DIR=build-asan scripts/soak.sh     another build tree (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."

total=${1:-10000}
if ! [[ "$total" =~ ^[0-9]+$ ]] || [ "$total" -lt 1 ]; then
  echo "usage: scripts/soak.sh [N]   (N = number of schedules, default 10000)" >&2
  exit 2
fi
build=${MRC_BUILD_DIR:-build}
bin="$build/bin/test_engine_property"
if [ ! -x "$bin" ]; then
  echo "soak: building $bin"
  [ -f "$build/build.ninja" ] ||
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMRC_BUILD_BENCH=OFF >/dev/null
  ninja -C "$build" test_engine_property >/dev/null
fi

props=$("$bin" --gtest_list_tests | grep -c '^  ')
per_prop=$(((total + props - 1) / props))
batch_cases=200  # per property and batch: ~1000 schedules, a few seconds
batches=$(((per_prop + batch_cases - 1) / batch_cases))
cases=$(((per_prop + batches - 1) / batches))
base_seed=${MRC_SOAK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
jobs=$(nproc 2>/dev/null || echo 2)
[ "$jobs" -gt 2 ] && jobs=2

logs=$(mktemp -d "${TMPDIR:-/tmp}/mrc-soak.XXXXXX")
echo "soak: $((cases * batches * props)) schedules: $batches batch(es) x $props properties x" \
  "$cases cases, seeds $base_seed..$((base_seed + batches - 1)), logs in $logs"
start=$(date +%s)

run_batch() {
  # Two statements: in `local i=$1 seed=$((base_seed + i))` the arithmetic expands before `i`
  # is assigned, which gave every batch the same seed.
  local i=$1
  local seed=$((base_seed + i))
  echo "$seed" >"$logs/batch-$i.seed"
  # MRC_PROPERTY_SCALE is ignored when RC_PARAMS names max_success.
  if RC_PARAMS="max_success=$cases seed=$seed" "$bin" >"$logs/batch-$i.log" 2>&1; then
    echo "ok" >"$logs/batch-$i.status"
  else
    echo "failed" >"$logs/batch-$i.status"
  fi
}
export -f run_batch
export base_seed cases bin logs

seq 0 $((batches - 1)) | xargs -P "$jobs" -I{} bash -c 'run_batch {}'

failures=0
for ((i = 0; i < batches; i++)); do
  log="$logs/batch-$i.log"
  n=$(grep -c '^\[  FAILED  \] EngineProperty\.[A-Za-z_]* (' "$log" || true)
  if [ "$n" -eq 0 ] && [ "$(cat "$logs/batch-$i.status")" != ok ]; then
    n=1  # crashed or aborted before gtest could report
  fi
  if [ "$n" -gt 0 ]; then
    failures=$((failures + n))
    echo "---- batch $i (seed $((base_seed + i))): $n failure(s)"
    if grep -q 'Falsifiable' "$log"; then
      sed -n '/Falsifiable/,/^\[  FAILED/p' "$log" | head -120
      grep -A1 'To reproduce' "$log" || true
    else
      tail -40 "$log"  # a crash or sanitizer report
    fi
  fi
done
# The seeds rapidcheck actually used (it prints its configuration at the start of each run):
# every batch must differ, or the schedules repeat.
used=$(cat "$logs"/batch-*.seed | sort -u | wc -l)
reported=$(grep -ho 'seed=[0-9]*' "$logs"/batch-*.log | sort -u | wc -l)
echo "soak: $batches batch(es), $used distinct seed(s) given, $reported distinct seed(s) reported by rapidcheck"
if [ "$used" -ne "$batches" ]; then
  echo "soak: batches share a seed" >&2
  failures=$((failures + 1))
fi
echo "soak: $(($(date +%s) - start)) s"
echo "failures=$failures"
[ "$failures" -eq 0 ]
