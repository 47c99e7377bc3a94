#!/usr/bin/env bash
# A failure on one rank ends the whole mpirun job within seconds, never a hang, with that
# rank's message: (1) rank 1's scenario file is bad while rank 0 has started the run
# and waits for it in the window exchange; (2) rank 1 is killed (SIGKILL) in the middle of the
# run. Usage: tests/mpi/failure.sh <mrc-sim> <mpirun>
set -euo pipefail
sim=$1
mpirun=$2
out=$(mktemp -d "${TMPDIR:-/tmp}/mrc-mpi-failure.XXXXXX")
trap 'rm -rf "$out"' EXIT
launch=("$mpirun" --oversubscribe --mca btl self,vader -np 2)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export MRC_SIM_HUGE_PAGES=0 OMPI_MCA_btl_vader_single_copy_mechanism=none
# A run that takes far longer than the limit below when nothing fails.
args=(--quiet --set topo.hosts=512 --set topo.radix=32 --set transport.kinds=[mrc]
      --set workload.size=64MiB --out "$out/run")
limit=60

# 1: rank 1's scenario file has an unknown key.
printf '[topo]\nhostz = 4\n' > "$out/bad.toml"
cat > "$out/rank.sh" <<SH
#!/usr/bin/env bash
if [ "\${OMPI_COMM_WORLD_RANK}" = 1 ]; then exec "$sim" "$out/bad.toml" ${args[*]}; fi
exec "$sim" ${args[*]}
SH
chmod +x "$out/rank.sh"
start=$(date +%s)
set +e
timeout $((limit + 30)) "${launch[@]}" "$out/rank.sh" > "$out/1.log" 2>&1
rc=$?
set -e
took=$(($(date +%s) - start))
if [ $rc = 0 ] || [ $rc = 124 ] || [ $took -gt $limit ]; then
  echo "FAIL bad scenario on rank 1: exit $rc after ${took}s"; cat "$out/1.log"; exit 1
fi
grep -q "rank 1: .*bad.toml.*hostz" "$out/1.log" || {
  echo "FAIL bad scenario on rank 1: no 'rank 1: ... bad.toml ... hostz' message"
  cat "$out/1.log"; exit 1
}
echo "ok   a rank with a bad scenario ends the job in ${took}s (exit $rc)"

# 2: rank 1 is killed two seconds into the run.
cat > "$out/rank.sh" <<SH
#!/usr/bin/env bash
"$sim" ${args[*]} &
pid=\$!
if [ "\${OMPI_COMM_WORLD_RANK}" = 1 ]; then sleep 2; kill -9 \$pid; fi
wait \$pid
SH
start=$(date +%s)
set +e
timeout $((limit + 30)) "${launch[@]}" "$out/rank.sh" > "$out/2.log" 2>&1
rc=$?
set -e
took=$(($(date +%s) - start))
if [ $rc = 0 ] || [ $rc = 124 ] || [ $took -gt $limit ]; then
  echo "FAIL killed rank 1: exit $rc after ${took}s"; cat "$out/2.log"; exit 1
fi
echo "ok   a killed rank ends the job in ${took}s (exit $rc)"
