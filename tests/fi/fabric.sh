#!/usr/bin/env bash
# The `mrc` libfabric provider between two hosts of a 2-plane namespace fabric (root;
# docs/libfabric.md, "Open MPI over MRC"): the processes start in the root namespace and the
# provider opens its sockets in the fabric hosts' namespaces (FI_MRC_FABRIC, FI_MRC_HOST), with
# SRv6 entropy values over both planes and both spines. h0 and h2 sit on different leaves:
#   fi_pingpong -c -S all (its control channel over loopback, its data over the fabric);
#   mrc-mpi-perf over Open MPI's mtl ofi (ping-pong 1 B to 8 MiB checked, allreduce checked);
#   the same, with a silent blackhole of a plane-0 spine and a 50 ms flap of h0's plane-0 link
#   during an allreduce loop: no MPI error, every result right.
# Without root or network namespaces it prints "skipped: ..." (ctest SKIP_REGULAR_EXPRESSION).
# Usage: tests/fi/fabric.sh <build dir> <mpirun>
set -euo pipefail
build=$(cd "$1" && pwd)
mpirun=$2
bin=$build/bin
export FI_PROVIDER_PATH=$build/lib PATH="$PATH:/usr/sbin:/sbin"
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 0; }
name=fit$$
out=$(mktemp -d "${TMPDIR:-/tmp}/mrc-fi-fabric.XXXXXX")
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  "$bin/mrc-fabric" down --kill --name "$name" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT
if ! "$bin/mrc-fabric" up --name "$name" --hosts 4 --planes 2 --leaves 2 --spines 2 \
    >"$out/up" 2>&1; then
  echo "skipped: no namespace fabric here: $(tail -1 "$out/up")"
  exit 0
fi
fabric=/run/mrc-fabric/$name/fabric.json
echo "ok   $(head -1 "$out/up")"

port=$((20000 + RANDOM % 20000))
FI_MRC_FABRIC=$fabric FI_MRC_HOST=2 timeout 120 fi_pingpong -p mrc -e rdm -c -S all -I 5 \
  -B "$port" >"$out/pp-server" 2>&1 &
server=$!
sleep 0.5
if ! FI_MRC_FABRIC=$fabric FI_MRC_HOST=0 timeout 120 fi_pingpong -p mrc -e rdm -c -S all -I 5 \
    -P "$port" localhost >"$out/pp-client" 2>&1; then
  echo "FAIL fi_pingpong over the fabric:"; cat "$out/pp-client" "$out/pp-server"; exit 1
fi
wait "$server" || { echo "FAIL fi_pingpong server:"; cat "$out/pp-server"; exit 1; }
server=
echo "ok   fi_pingpong -c -S all, h0 -> h2: $(grep -cE '^[0-9.]+[kmg]? +5 +=5 ' "$out/pp-client") sizes"

mpi() {  # OUT ARGS...: mrc-mpi-perf, rank 0 on h0 and rank 1 on h2
  local o=$1
  shift
  local launch=("$mpirun" --oversubscribe --mca pml cm --mca mtl ofi
                --mca mtl_ofi_provider_include mrc --mca btl self)
  [ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
  timeout 300 "${launch[@]}" -np 1 env FI_MRC_FABRIC="$fabric" FI_MRC_HOST=0 "$bin/mrc-mpi-perf" "$@" : \
    -np 1 env FI_MRC_FABRIC="$fabric" FI_MRC_HOST=2 "$bin/mrc-mpi-perf" "$@" >"$o" 2>&1
}
mpi "$out/mpi" --max-size 8388608 --iters 5 --allreduce-iters 50 ||
  { echo "FAIL mrc-mpi-perf over the fabric:"; cat "$out/mpi"; exit 1; }
grep -q "errors=0" "$out/mpi" || { echo "FAIL mrc-mpi-perf:"; cat "$out/mpi"; exit 1; }
echo "ok   mrc-mpi-perf h0 <-> h2: $(tail -1 "$out/mpi")"

mpi "$out/faults" --no-pingpong --duration 5 &
job=$!
sleep 1.5
"$bin/mrc-fabric" blackhole p0-s0 --name "$name" >/dev/null
sleep 1.5
"$bin/mrc-fabric" flap h0-p0 --period 100ms --count 1 --name "$name" >/dev/null
if ! wait "$job" || ! grep -q "errors=0" "$out/faults"; then
  echo "FAIL allreduce through a spine blackhole and a link flap:"; cat "$out/faults"; exit 1
fi
echo "ok   allreduce through a blackholed spine and a 50 ms link flap: $(tail -1 "$out/faults")"
