#!/usr/bin/env bash
# The claims study: regenerate docs/results.md and docs/results/*.png from the
# scenarios in scenarios/claims/.
#
#   scripts/report.sh           full mode (target scales, <= 2 h, includes 131,072 GPUs)
#   scripts/report.sh --quick   small scales, <= 10 min on 2 cores
#   scripts/report.sh --smoke   two tiny runs through the whole pipeline into a scratch
#                               directory (CI: ctest report_smoke); docs/ is not touched
#   scripts/report.sh paper     the paper's experiments (scenarios/paper/, Figs 4-22 and section 4 scaled):
#                               the section "The paper's experiments, reproduced" of
#                               docs/results.md and docs/figures/paper/*.png; 126 runs, 25-80
#                               min on 2 cores (scripts/report_paper.py; --only
#                               fig16,..., --quick: Figs 16-17 at 4-16 MiB only)
#   extra arguments go to scripts/report.py or report_paper.py (e.g. --reuse: re-render
#   without re-simulating)
#
# MRC_BIN_DIR selects the binaries (default build/bin): MRC_BIN_DIR=build-claims/bin.
# Simulations run one at a time under nice -n 10; run directories go to out/claims/<mode>/
# (paper: out/paper/).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${MRC_BIN_DIR:-$root/build/bin}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
mode=full
args=()
for a in "$@"; do
  case "$a" in
    --quick) mode=quick ;;
    --smoke) mode=smoke ;;
    --full) mode=full ;;
    paper) mode=paper ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done
for t in mrc-sim mrc-topo mrc-plot; do
  [[ -x "$bin/$t" ]] || { echo "report.sh: $bin/$t not found (build it, or set MRC_BIN_DIR)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  { echo "report.sh: /usr/bin/python3 needs python3-matplotlib (scripts/setup.sh)" >&2; exit 2; }
if [[ $mode == paper ]]; then
  exec /usr/bin/python3 "$root/scripts/report_paper.py" --bin "$bin" "${args[@]}"
fi
if [[ $mode == smoke ]]; then
  scratch="${MRC_SMOKE_DIR:-$(mktemp -d /tmp/mrc-report-smoke.XXXXXX)}"
  /usr/bin/python3 "$root/scripts/report.py" --mode smoke --bin "$bin" --runs "$scratch/runs" \
    --docs "$scratch/docs" "${args[@]}"
  test -s "$scratch/docs/results.md"
  ls "$scratch"/docs/results/*.png >/dev/null
  grep -q '^| run | scenario' "$scratch/docs/results.md"
  echo "report.sh --smoke: ok ($scratch/docs/results.md)"
  [[ -n "${MRC_SMOKE_DIR:-}" ]] || rm -rf "$scratch"
  exit 0
fi
exec /usr/bin/python3 "$root/scripts/report.py" --mode "$mode" --bin "$bin" "${args[@]}"
