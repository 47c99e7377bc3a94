#!/usr/bin/env bash
# Whole-run simulator benchmarks (issue 3, section 8). Runs mrc-sim on a committed scenario and
# ends with one line:
#   wall_s=<s> peak_rss_mb=<MB> fct_p50_us=<us> fct_max_us=<us> ideal_us=<us>
# Usage: scripts/bench-sim.sh A|B   (A: 1024 hosts at 400G; B: 131,072 GPUs, 8 planes)
# Results are recorded in docs/performance.md. The machine is shared: run it twice and
# compare; wall time is the only noisy number (the simulation itself is deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-A}
case "$which" in
  A|a) scenario=scenarios/bench/a.toml ;;
  B|b) scenario=scenarios/bench/b.toml ;;
  *) echo "usage: scripts/bench-sim.sh A|B" >&2; exit 2 ;;
esac
if [ ! -x build/bin/mrc-sim ]; then
  MRC_SKIP_APT=${MRC_SKIP_APT:-1} scripts/setup.sh > /dev/null
fi
out=build/bench-sim-${which,,}
rm -rf "$out"
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
