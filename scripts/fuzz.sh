#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each one over its corpus.
#   scripts/fuzz.sh                          every fuzz/fuzz_*.cc target, 60 s each
#   scripts/fuzz.sh 300                      every target, 300 s each
#   scripts/fuzz.sh 30 fuzz_decode_datagram  only the named targets
# Exits non-zero if a target does not build or libFuzzer reports a crash, sanitizer error,
# leak, timeout or out-of-memory. The input that did it is in build-fuzz/artifacts/<target>/;
# replay it with build-fuzz/bin/<target> <file>.
# The committed seeds (fuzz/corpus/<target>/) are only read; inputs libFuzzer finds go to
# build-fuzz/corpus/<target>/ (copy good ones into fuzz/corpus/ by hand if worth keeping).
# Environment: MRC_BUILD_JOBS (default 2) for ninja; MRC_FUZZ_ARGS for extra libFuzzer flags.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[ $# -gt 0 ] && shift
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "usage: scripts/fuzz.sh [seconds] [target...]" >&2
  exit 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/fuzz_*.cc; do
    [ -e "$src" ] && targets+=("$(basename "$src" .cc)")
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "scripts/fuzz.sh: no fuzz/fuzz_*.cc targets" >&2
  exit 1
fi
for t in "${targets[@]}"; do
  if [ ! -e "fuzz/$t.cc" ]; then
    echo "scripts/fuzz.sh: no such target: $t (fuzz/$t.cc)" >&2
    exit 2
  fi
done

build=build-fuzz
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
CC=clang CXX=clang++ cmake -S . -B "$build" "${generator[@]}" -DMRC_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMRC_BUILD_BENCH=OFF -DMRC_BUILD_TOOLS=OFF > /dev/null
cmake --build "$build" -j "${MRC_BUILD_JOBS:-2}" --target "${targets[@]}"

failed=()
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  dirs=("$work")
  [ -d "fuzz/corpus/$t" ] && dirs+=("fuzz/corpus/$t")
  echo "=== $t: ${seconds}s over ${dirs[*]}"
  # shellcheck disable=SC2086  # MRC_FUZZ_ARGS is a list of flags
  if ! "$build/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" ${MRC_FUZZ_ARGS:-} "${dirs[@]}"; then
    echo "=== $t: FAILED (see $artifacts/)" >&2
    failed+=("$t")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "scripts/fuzz.sh: ${#targets[@]} target(s) ran ${seconds}s each without a crash"
