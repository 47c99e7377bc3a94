"""What the two report generators share: scripts/report.py (the claims study) and
scripts/report_paper.py (the paper's experiments), both writing docs/results.md.

- REPO and plt: the repository root, and matplotlib set up to draw into files;
- PAPER_BEGIN and PAPER_END: the markers around the section report_paper.py writes (report.py
  rewrites the rest of the file and keeps everything from PAPER_BEGIN on);
- run_mrc_sim: one simulator run under `nice -n 10`, skipped with --reuse when its run
  directory was made by the same command;
- dur_us and markdown_table: a scenario's durations in microseconds, a Markdown table.

Needs Debian's python3-matplotlib: run with /usr/bin/python3.
"""
import os
import re
import shutil
import subprocess
import sys
import time

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: F401  (the generators draw with it)
except ImportError as e:  # pragma: no cover
    sys.exit(f"{os.path.basename(sys.argv[0])}: needs python3-matplotlib ({e}); run with /usr/bin/python3")

__all__ = ["PAPER_BEGIN", "PAPER_END", "REPO", "dur_us", "markdown_table", "plt", "run_mrc_sim"]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER_BEGIN = "<!-- paper:begin (scripts/report.sh paper writes this section) -->"
PAPER_END = "<!-- paper:end -->"


def run_mrc_sim(mrc_sim, scenario, sets, out, reuse, announce=None):
    """Runs `mrc-sim SCENARIO --out OUT --quiet --set S...` under nice -n 10 and records the
    command in OUT/command.txt. With reuse, a run directory whose summary.json exists and whose
    command.txt names the same command is kept as it is. announce() is called just before a
    run starts. Returns the wall seconds the run took, or None when it was reused; exits with
    the command when mrc-sim fails."""
    cmd = [mrc_sim, scenario, "--out", out, "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    text = " ".join(cmd)
    stamp = os.path.join(out, "command.txt")
    if reuse and os.path.exists(os.path.join(out, "summary.json")) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == text:
                return None
    if os.path.isdir(out):
        shutil.rmtree(out)
    if announce:
        announce()
    t0 = time.time()
    p = subprocess.run(["nice", "-n", "10"] + cmd, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {os.path.basename(out)} failed (exit {p.returncode}): {text}")
    with open(stamp, "w") as f:
        f.write(text + "\n")
    return time.time() - t0


def dur_us(s):
    """A scenario duration ("1.5ms", "200us", "0") in microseconds; None if it is not one."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ps|ns|us|ms|s)?\s*", str(s))
    if not m:
        return None
    return float(m.group(1)) * {"ps": 1e-6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, None: 1.0}[m.group(2)]


def markdown_table(head, rows):
    """The lines of a Markdown table: the first column left-aligned, the others right-aligned."""
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out
