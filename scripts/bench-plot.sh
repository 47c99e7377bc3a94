#!/usr/bin/env bash
# mrc-plot on a large run directory (docs/simulator.md, "mrc-plot"): the default scenario's run
# (mrc-sim --out) with its flows.csv replicated to ~40 MB (every flow of every transport
# repeated with new flow ids, so the file keeps the real one's columns, transports, sizes and
# unfinished flows; the whole table repeated), then `mrc-plot` timed 3 times: wall and CPU seconds (user + system; on a shared machine the wall time is
# mostly the machine's load). Ends with one line:
#   flows_csv_mb=<MB> flows=<rows> links_csv_mb=<MB> wall_s=<s,s,s> median_wall_s=<s>
#   median_cpu_s=<s> load=<1-minute load average>
# Usage: scripts/bench-plot.sh [MB]   (default 40)
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-40}
if [ ! -x build/bin/mrc-sim ]; then
  MRC_SKIP_APT=${MRC_SKIP_APT:-1} scripts/setup.sh >/dev/null
fi
out=build/bench-plot
rm -rf "$out"
build/bin/mrc-sim --quiet --out "$out/run" >/dev/null
python3 - "$out/run/flows.csv" "$mb" <<'PY'
import sys
path, mb = sys.argv[1], float(sys.argv[2])
lines = open(path).read().splitlines()
header, rows = lines[0], [r.split(",", 1)[1] for r in lines[1:]]
with open(path, "w") as f:
    f.write(header + "\n")
    n = 0
    while f.tell() < mb * 1e6:
        f.write("".join(f"{n + i},{r}\n" for i, r in enumerate(rows)))
        n += len(rows)
PY
python3 - "$out" <<'PY'
import os, statistics, subprocess, sys, time
out = sys.argv[1]
times, cpus = [], []
for _ in range(3):
    t0, c0 = time.monotonic(), os.times()
    subprocess.run(["build/bin/mrc-plot", f"{out}/run", "--out", f"{out}/figures"], check=True,
                   stdout=subprocess.DEVNULL)
    c1 = os.times()
    times.append(time.monotonic() - t0)
    cpus.append(c1.children_user - c0.children_user + c1.children_system - c0.children_system)
path = f"{out}/run/flows.csv"
rows = sum(1 for _ in open(path)) - 1
print(f"flows_csv_mb={os.path.getsize(path) / 1e6:.1f} flows={rows} "
      f"links_csv_mb={os.path.getsize(f'{out}/run/links.csv') / 1e6:.1f} "
      f"wall_s={','.join(f'{t:.1f}' for t in times)} median_wall_s={statistics.median(times):.1f} "
      f"median_cpu_s={statistics.median(cpus):.1f} load={os.getloadavg()[0]:.1f}")
PY
