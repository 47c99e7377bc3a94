#!/usr/bin/env bash
# Whole-run simulator benchmarks (docs/performance.md). Runs mrc-sim on a committed scenario and
# ends with one line:
#   wall_s=<s> peak_rss_mb=<MB> fct_p50_us=<us> fct_max_us=<us> ideal_us=<us>
# Usage: scripts/bench-sim.sh A|B|C (A: 1024 hosts at 400G; B: 131,072 GPUs, 8 planes; C: B
# serially and under `mpirun -np 2`, ending with one line
#   ranks=2 wall_s=<s> speedup=<serial/parallel> identical=<yes|no> peak_rss_mb_per_rank=<MB>
# where identical compares flows.csv, links.csv, ev_events.jsonl and summary.json without its
# "run" section; the serial run uses the blocks layout by default).
# Results are recorded in docs/performance.md. The machine is shared: run it twice and
# compare; wall time is the only noisy number (the simulation itself is deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-A}
case "$which" in
  A|a) scenario=scenarios/bench/a.toml ;;
  B|b) scenario=scenarios/bench/b.toml ;;
  C|c) scenario=${MRC_BENCH_C_SCENARIO:-scenarios/bench/b.toml} ;;
  *) echo "usage: scripts/bench-sim.sh A|B|C" >&2; exit 2 ;;
esac
if [ ! -x build/bin/mrc-sim ]; then
  MRC_SKIP_APT=${MRC_SKIP_APT:-1} scripts/setup.sh > /dev/null
fi
out=build/bench-sim-${which,,}
rm -rf "$out"
if [ "${which,,}" = c ]; then
  # MRC_BENCH_C_SCENARIO and MRC_BENCH_C_ARGS (e.g. "--set topo.hosts=8192") run a smaller
  # fabric the same way. --bind-to none: the machine's other work decides where ranks run.
  extra=(${MRC_BENCH_C_ARGS:-})
  launch=(mpirun -np 2 --bind-to none)
  [ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
  [ "$(nproc)" -lt 2 ] && launch+=(--oversubscribe)
  t0=$(date +%s.%N)
  build/bin/mrc-sim "$scenario" "${extra[@]}" --quiet --out "$out/serial"
  t1=$(date +%s.%N)
  "${launch[@]}" build/bin/mrc-sim "$scenario" "${extra[@]}" --quiet --out "$out/ranks2"
  t2=$(date +%s.%N)
  python3 - "$out" "$t0" "$t1" "$t2" <<'PY'
import filecmp, json, sys
out, t0, t1, t2 = sys.argv[1], *map(float, sys.argv[2:])
same = all(filecmp.cmp(f"{out}/serial/{f}", f"{out}/ranks2/{f}", shallow=False)
           for f in ("flows.csv", "links.csv", "ev_events.jsonl"))
s, p = (json.load(open(f"{out}/{d}/summary.json")) for d in ("serial", "ranks2"))
rs, rp = s.pop("run"), p.pop("run")
same = same and s == p
serial, parallel = t1 - t0, t2 - t1
mb = max(rp["peak_rss_bytes_per_rank"]) / 2**20
print("serial (blocks layout): wall_s=%.2f peak_rss_mb=%.0f; events %d; mpirun -np 2 ranks' "
      "peak RSS MB %s (%.2f of serial)" % (serial, rs["peak_rss_bytes"] / 2**20, s["events"],
      [round(b / 2**20) for b in rp["peak_rss_bytes_per_rank"]],
      mb / (rs["peak_rss_bytes"] / 2**20)))
print("ranks=2 wall_s=%.2f speedup=%.2f identical=%s peak_rss_mb_per_rank=%.0f" % (
    parallel, serial / parallel, "yes" if same else "no", mb))
PY
  exit 0
fi
build/bin/mrc-sim "$scenario" --out "$out"
python3 - "$out/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["transports"][0]
run = d["run"]
print("wall_s=%.2f peak_rss_mb=%.0f fct_p50_us=%.1f fct_max_us=%.1f ideal_us=%.1f" % (
    run["wall_seconds"], run["peak_rss_bytes"] / 2**20, t["fct_us"]["p50"], t["fct_us"]["max"],
    t["fct_us"]["ideal_max"]))
PY
