#!/usr/bin/env bash
# A run under mpirun gives the same results as the plain serial run (`mrc-sim` without
# --partition): flows.csv, links.csv, ev_events.jsonl, flows_ts.csv and summary.json (without
# its "run" section: wall time, memory, ranks) byte for byte, on 1, 2 and 4 ranks (4
# oversubscribed on a 2-core machine). Three small, short scenarios (the ranks synchronise every
# lookahead of simulated time, so on a loaded machine the wall time grows with the simulated
# time) that together cover: a permutation on a fat tree with a failed agg-core link; a ring
# AllReduce (flows added by receptions and completions) on a two-plane leaf-spine fabric with a
# failed link, a blackholed one and gray loss, MRC and RoCE with 4 QPs per RoCE flow; pinned
# paths with a throughput series.
# Usage: tests/mpi/identity.sh <mrc-sim> <mpirun> [ranks...]
# MRC_MPI_PROVIDER=<name>: the ranks talk through Open MPI's mtl ofi and that libfabric
# provider (e.g. mrc, loaded from FI_PROVIDER_PATH) instead of shared memory.
set -euo pipefail
sim=$1
mpirun=$2
shift 2
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(1 2 4)
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/mrc-mpi-identity.XXXXXX")
trap 'rm -rf "$out"' EXIT
# Root (containers, CI) needs --allow-run-as-root; more ranks than cores --oversubscribe. The
# shared-memory transport only: no network needed.
if [ -n "${MRC_MPI_PROVIDER:-}" ]; then
  launch=("$mpirun" --oversubscribe --mca pml cm --mca mtl ofi
          --mca mtl_ofi_provider_include "$MRC_MPI_PROVIDER" --mca btl self)
else
  launch=("$mpirun" --oversubscribe --mca btl self,vader)
fi
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
export MRC_SIM_HUGE_PAGES=0 OMPI_MCA_btl_vader_single_copy_mechanism=none

compare() {  # compare <serial dir> <mpi dir> <label>
  local f
  for f in flows.csv links.csv ev_events.jsonl flows_ts.csv; do
    [ -e "$1/$f" ] || [ -e "$2/$f" ] || continue
    if ! cmp -s "$1/$f" "$2/$f"; then
      echo "FAIL $3: $f differs"; diff "$1/$f" "$2/$f" | head -5; return 1
    fi
  done
  python3 - "$1/summary.json" "$2/summary.json" "$3" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ra, rb = a.pop("run"), b.pop("run")
if a != b:
    sys.exit("FAIL %s: summary.json differs" % sys.argv[3])
if rb["partition"] != "blocks" or ra["partition"] != "blocks":
    sys.exit("FAIL %s: not the blocks layout" % sys.argv[3])
PY
  echo "ok   $3"
}

run_case() {  # run_case <what__case> <mrc-sim arguments...>
  local name=$1 n
  shift
  "$sim" --quiet "$@" --out "$out/$name-serial"
  for n in "${ranks[@]}"; do
    "${launch[@]}" -np "$n" "$sim" --quiet "$@" --out "$out/$name-$n"
    compare "$out/$name-serial" "$out/$name-$n" "$name on $n ranks"
  done
}

run_case fat_tree_permutation__failed_agg_core_link --set topo.kind=fat_tree --set topo.hosts=16 \
  --set topo.radix=4 --set topo.planes=1 --set transport.kinds=[mrc] --set workload.size=1MiB \
  --set fault.0.link=pod1/agg1-core3 --set run.sample_interval=5us
run_case ring_allreduce__failed_blackholed_and_lossy_links_roce_four_qps \
  "$src/tests/mpi/allreduce_faults.toml"
run_case pinned_paths__throughput_series "$src/scenarios/paper/fig14-two-flows-one-ev.toml" \
  --set topo.hosts=16 --set run.until=300us --set workload.flow.0.until=200us \
  --set workload.flow.1.start=50us --set workload.flow.1.until=200us
