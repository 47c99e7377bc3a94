#!/usr/bin/env bash
# Whole-run simulator benchmarks (docs/performance.md). Runs mrc-sim on a committed scenario and
# ends with one line:
#   wall_s=<s> peak_rss_mb=<MB> fct_p50_us=<us> fct_max_us=<us> ideal_us=<us>
# Usage: scripts/bench-sim.sh A|B|C|S (A: 1024 hosts at 400G; B: 131,072 GPUs, 8 planes; C: B
# serially and under `mpirun -np 2`, ending with one line
#   ranks=2 wall_s=<s> speedup=<serial/parallel> identical=<yes|no> peak_rss_mb_per_rank=<MB>
#   exchange_pct=<%> wait_pct=<%>  (the larger rank's share of the wall time)
# where identical compares flows.csv, links.csv, ev_events.jsonl and summary.json without its
# "run" section; the serial run uses the blocks layout by default; S: how the cost grows with
# the work, a table of events, events/s per core, wall time and peak memory against hosts for
# B's scenario (MRC_BENCH_S_HOSTS, default 1024 4096 16384 65536 131072) and for a ring
# AllReduce of 16 MiB per rank (scenarios/claims/allreduce.toml, MRC only, radix 128;
# MRC_BENCH_S_AR_HOSTS, default 256 512 1024 2048), each serially and under `mpirun -np 2`
# (~25 minutes and 11 GB at the defaults), ending with one line
#   b_events_per_s_per_core=<serial>/<2 ranks at the largest B> b_wall_s=<...> ...).
# MRC_BENCH_REF=PATH (A and B) measures this build against a reference mrc-sim in the same
# run (see below). Results are recorded in docs/performance.md. Wall time is the only noisy
# number (the simulation itself is deterministic): compare runs made side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-A}
case "$which" in
  A|a) scenario=scenarios/bench/a.toml ;;
  B|b) scenario=scenarios/bench/b.toml ;;
  C|c) scenario=${MRC_BENCH_C_SCENARIO:-scenarios/bench/b.toml} ;;
  S|s) scenario=scenarios/bench/b.toml ;;
  *) echo "usage: scripts/bench-sim.sh A|B|C|S" >&2; exit 2 ;;
esac
# MRC_BENCH_BIN: the mrc-sim to measure (default build/bin/mrc-sim, built if missing).
sim=${MRC_BENCH_BIN:-build/bin/mrc-sim}
if [ ! -x "$sim" ]; then
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
  "$sim" "$scenario" "${extra[@]}" --quiet --out "$out/serial"
  t1=$(date +%s.%N)
  "${launch[@]}" "$sim" "$scenario" "${extra[@]}" --quiet --out "$out/ranks2"
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
# The exchange's share of the 2-rank wall time, per rank: the transfer (its time in the
# window exchanges less the wait) and the wait until the other rank had ended the window
# (imbalance between the ranks, or between the CPUs they got).
ex = rp.get("exchange", {})
transfer = [s_ - w for s_, w in zip(ex.get("seconds_per_rank", []), ex.get("wait_seconds_per_rank", []))]
waits = ex.get("wait_seconds_per_rank", [])
pct = lambda xs: 100 * max(xs, default=0) / parallel  # noqa: E731
print("exchange per rank: transfer s %s, waiting for the other rank s %s" % (
    [round(x, 2) for x in transfer], [round(x, 2) for x in waits]))
print("ranks=2 wall_s=%.2f speedup=%.2f identical=%s peak_rss_mb_per_rank=%.0f "
      "exchange_pct=%.1f wait_pct=%.1f" % (parallel, serial / parallel, "yes" if same else "no", mb,
                                           pct(transfer), pct(waits)))
PY
  exit 0
fi
if [ "${which,,}" = s ]; then
  launch=(mpirun -np 2 --bind-to none)
  [ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
  [ "$(nproc)" -lt 2 ] && launch+=(--oversubscribe)
  # ID LABEL SCENARIO HOSTS ARGS...: the serial run and the 2-rank run, one table row each.
  row() {
    local id=$1 wl=$2 scen=$3 hosts=$4; shift 4
    local d="$out/$id-$hosts"
    "$sim" "$scen" --set "topo.hosts=$hosts" "$@" --quiet --out "$d-serial"
    "${launch[@]}" "$sim" "$scen" --set "topo.hosts=$hosts" "$@" --quiet --out "$d-ranks2"
    python3 - "$wl" "$hosts" "$d" <<'PY'
import json, sys
wl, hosts, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for mode in ("serial", "ranks2"):
    j = json.load(open(f"{d}-{mode}/summary.json"))
    r = j["run"]
    events = sum(t["events"] for t in j["transports"])
    cores = r.get("ranks", 1)
    rss = max(r.get("peak_rss_bytes_per_rank") or [r["peak_rss_bytes"]])
    print(f"| {wl} | {hosts:,} | {'serial' if cores == 1 else f'{cores} ranks'} | {events / 1e6:,.1f} M | "
          f"{events / r['wall_seconds'] / cores / 1e6:.2f} M | {r['wall_seconds']:.1f} | {rss / 2**20:,.0f} |")
PY
  }
  echo "| workload | hosts | run | events | events/s per core | wall s | peak RSS MB (per rank) |"
  echo "|---|---:|---|---:|---:|---:|---:|"
  for h in ${MRC_BENCH_S_HOSTS:-1024 4096 16384 65536 131072}; do
    row b "benchmark B (permutation, 1 MiB)" scenarios/bench/b.toml "$h"
  done
  for h in ${MRC_BENCH_S_AR_HOSTS:-256 512 1024 2048}; do
    row ar "ring AllReduce, 16 MiB" scenarios/claims/allreduce.toml "$h" \
      --set "transport.kinds=[mrc]" --set topo.radix=128
  done
  python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
def last(prefix):
    runs = sorted(glob.glob(f"{out}/{prefix}-*-serial"), key=lambda p: int(p.split("-")[-2]))
    d = runs[-1][: -len("-serial")]
    vals = []
    for mode in ("serial", "ranks2"):
        j = json.load(open(f"{d}-{mode}/summary.json"))
        r = j["run"]
        ev = sum(t["events"] for t in j["transports"])
        vals.append((ev / r["wall_seconds"] / r.get("ranks", 1) / 1e6, r["wall_seconds"]))
    return int(d.split("-")[-1]), vals
hb, b = last("b")
ha, a = last("ar")
print(f"b_hosts={hb} b_meps_per_core={b[0][0]:.2f}/{b[1][0]:.2f} b_wall_s={b[0][1]:.1f}/{b[1][1]:.1f} "
      f"b_speedup={b[0][1] / b[1][1]:.2f} ar_hosts={ha} ar_meps_per_core={a[0][0]:.2f}/{a[1][0]:.2f} "
      f"ar_wall_s={a[0][1]:.1f}/{a[1][1]:.1f} ar_speedup={a[0][1] / a[1][1]:.2f}")
PY
  exit 0
fi
# MRC_BENCH_ARGS: extra arguments for this build's mrc-sim (e.g. "--set k=v").
args=(${MRC_BENCH_ARGS:-})
summary() {
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["transports"][0]
run = d["run"]
print("wall_s=%.2f peak_rss_mb=%.0f fct_p50_us=%.1f fct_max_us=%.1f ideal_us=%.1f" % (
    run["wall_seconds"], run["peak_rss_bytes"] / 2**20, t["fct_us"]["p50"], t["fct_us"]["max"],
    t["fct_us"]["ideal_max"]))
PY
}
if [ -z "${MRC_BENCH_REF:-}" ]; then
  "$sim" "$scenario" "${args[@]}" --out "$out"
  summary "$out/summary.json"
  exit 0
fi
# MRC_BENCH_REF=PATH: a reference mrc-sim (e.g. an older build) runs the same scenario
# (MRC_BENCH_REF_ARGS: its extra arguments) interleaved with this build, MRC_BENCH_RUNS times
# each (default 3), reference first; on a shared machine the load then weighs on both alike.
# Prints every run and ends with the medians and this build's ratios to the reference:
#   wall_s=<s> peak_rss_mb=<MB> ref_wall_s=<s> ref_peak_rss_mb=<MB> wall_ratio=<x> rss_ratio=<x>
ref_args=(${MRC_BENCH_REF_ARGS:-})
runs=${MRC_BENCH_RUNS:-3}
[ -x "$MRC_BENCH_REF" ] || { echo "MRC_BENCH_REF: not an executable: $MRC_BENCH_REF" >&2; exit 2; }
for i in $(seq 1 "$runs"); do
  "$MRC_BENCH_REF" "$scenario" "${ref_args[@]}" --quiet --out "$out/ref$i"
  echo "run $i reference: $(summary "$out/ref$i/summary.json")"
  "$sim" "$scenario" "${args[@]}" --quiet --out "$out/new$i"
  echo "run $i this build: $(summary "$out/new$i/summary.json")"
done
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def medians(prefix):
    runs_ = [json.load(open(f"{out}/{prefix}{i}/summary.json"))["run"] for i in range(1, runs + 1)]
    return (statistics.median(r["wall_seconds"] for r in runs_),
            statistics.median(r["peak_rss_bytes"] for r in runs_) / 2**20)
(w, m), (rw, rm) = medians("new"), medians("ref")
print("wall_s=%.2f peak_rss_mb=%.0f ref_wall_s=%.2f ref_peak_rss_mb=%.0f wall_ratio=%.3f "
      "rss_ratio=%.3f" % (w, m, rw, rm, w / rw, m / rm))
PY
