#!/usr/bin/env bash
# Runs setup (install + Release build), then every test. With --sanitize it also builds a
# second tree (build-asan/) with ASan+UBSan and runs the whole suite there.
#   scripts/test.sh              Release tests
#   scripts/test.sh --sanitize   Release tests, then ASan+UBSan tests
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=0
for a in "$@"; do
  case "$a" in
    --sanitize) sanitize=1 ;;
    *) echo "usage: scripts/test.sh [--sanitize]" >&2; exit 2 ;;
  esac
done

scripts/setup.sh
jobs=$(nproc)
# The namespace tests (fabric_live, net_fabric, api_e2e) run once per mrc-fabric data plane,
# as NAME.kernel, NAME.bpf and NAME.ecmp; those this kernel cannot run are skipped. Say which.
if [ "$(id -u)" = 0 ] && [ -x build/bin/mrc-fabric ]; then
  echo "test: data planes for the namespace tests (mrc-fabric dataplanes):"
  build/bin/mrc-fabric dataplanes | sed 's/^/  /' || true
fi
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "$sanitize" = 1 ]; then
  # Without MPI: LeakSanitizer reports Open MPI's own allocations at exit. The serial blocks
  # layout (test_partition) still runs there; mpi_identity runs in the Release tree.
  MRC_SKIP_APT=1 MRC_BUILD_DIR=build-asan \
    MRC_CMAKE_ARGS="-DMRC_SANITIZE=ON -DMRC_BUILD_BENCH=OFF -DMRC_MPI=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo" \
    scripts/setup.sh
  # The sanitizer build runs the same suite; property tests take fewer cases there.
  MRC_PROPERTY_SCALE=${MRC_PROPERTY_SCALE:-0.25} \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi
