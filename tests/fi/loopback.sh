#!/usr/bin/env bash
# The `mrc` libfabric provider on loopback, driven by programs that know nothing of MRC
# (docs/libfabric.md): libfabric's fi_info and fi_pingpong (every size, data checked), Open
# MPI's mtl ofi running mrc-mpi-perf (ping-pong 1 B to 8 MiB checked, allreduce every result
# checked) and mrc-sim distributed over two ranks (results identical to the serial run).
# Usage: tests/fi/loopback.sh <build dir> <mpirun>
set -euo pipefail
build=$(cd "$1" && pwd)
mpirun=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
export FI_PROVIDER_PATH=$build/lib
out=$(mktemp -d "${TMPDIR:-/tmp}/mrc-fi-loopback.XXXXXX")
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

fi_info -p mrc > "$out/info" || { echo "FAIL fi_info -p mrc lists nothing"; exit 1; }
grep -q "provider: mrc" "$out/info" || { echo "FAIL fi_info: no mrc provider"; exit 1; }
grep -q "FI_EP_RDM" "$out/info" || { echo "FAIL fi_info: no RDM endpoint"; exit 1; }
echo "ok   fi_info -p mrc"

# fi_pingpong: a TCP control port of its own (-B/-P), so that parallel runs do not collide.
port=$((20000 + RANDOM % 20000))
timeout 120 fi_pingpong -p mrc -e rdm -c -S all -I 10 -B "$port" > "$out/pp-server" 2>&1 &
server=$!
sleep 0.5
if ! timeout 120 fi_pingpong -p mrc -e rdm -c -S all -I 10 -P "$port" localhost \
    > "$out/pp-client" 2>&1; then
  echo "FAIL fi_pingpong client:"; cat "$out/pp-client"; cat "$out/pp-server"; exit 1
fi
wait "$server" || { echo "FAIL fi_pingpong server:"; cat "$out/pp-server"; exit 1; }
server=
sizes=$(grep -cE '^[0-9.]+[kmg]? +10 +=10 ' "$out/pp-client" || true)
[ "$sizes" -ge 40 ] || { echo "FAIL fi_pingpong ran $sizes sizes:"; cat "$out/pp-client"; exit 1; }
echo "ok   fi_pingpong -p mrc -e rdm -c -S all: $sizes sizes, 0 B to 6 MiB, data checked"

launch=("$mpirun" --oversubscribe --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include mrc
        --mca btl self -np 2)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
if ! timeout 300 "${launch[@]}" "$build/bin/mrc-mpi-perf" --max-size 8388608 --iters 10 \
    --allreduce-iters 50 > "$out/mpi" 2>&1; then
  echo "FAIL mrc-mpi-perf over mrc:"; cat "$out/mpi"; exit 1
fi
grep -q "errors=0" "$out/mpi" || { echo "FAIL mrc-mpi-perf:"; cat "$out/mpi"; exit 1; }
echo "ok   mrc-mpi-perf over MPI's mtl ofi + mrc: $(tail -1 "$out/mpi")"

if [ -x "$build/bin/mrc-sim" ]; then
  MRC_MPI_PROVIDER=mrc "$src/tests/mpi/identity.sh" "$build/bin/mrc-sim" "$mpirun" 2
fi
