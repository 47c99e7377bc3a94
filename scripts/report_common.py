"""What the two report generators share: scripts/report.py (the claims study) and
scripts/report_paper.py (the paper's experiments), both writing docs/results.md.

- REPO and plt: the repository root, and matplotlib set up to draw into files;
- PAPER_BEGIN and PAPER_END: the markers around the section report_paper.py writes (report.py
  rewrites the rest of the file and keeps everything from PAPER_BEGIN on);
- run_mrc_sim: one simulator run under `nice -n 10`, skipped with --reuse when its run
  directory was made by the same command;
- dur_us and markdown_table: a scenario's durations in microseconds, a Markdown table;
- provenance_stamp: the comment each generated section carries, naming the commit its runs'
  mrc-sim was built from and the model's fingerprint (scripts/model_fingerprint.py);
  scripts/check-docs.py says when src/transport or src/sim changed after that commit, and
  with --fingerprint whether the outputs moved.

Needs Debian's python3-matplotlib: run with /usr/bin/python3.
"""
import os
import re
import shutil
import subprocess
import sys
import time

from model_fingerprint import fingerprint

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: F401  (the generators draw with it)
except ImportError as e:  # pragma: no cover
    sys.exit(f"{os.path.basename(sys.argv[0])}: needs python3-matplotlib ({e}); run with /usr/bin/python3")

__all__ = ["PAPER_BEGIN", "PAPER_END", "REPO", "dur_us", "markdown_table", "plt",
           "provenance_stamp", "run_mrc_sim"]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER_BEGIN = "<!-- paper:begin (scripts/report.sh paper writes this section) -->"
PAPER_END = "<!-- paper:end -->"


def provenance_stamp(section, versions, mrc_sim=None):
    """The HTML comment a generated section starts with:
        <!-- generated-from: SECTION commit=SHA[ dirty][ fingerprint=sha256:HEX] -->
    SHA is the commit the runs' mrc-sim was built from, read from the `git describe` that
    summary.json's version ends in ("mrc-sim 0.1.0 (c3e5176-dirty)"); `dirty` when any binary
    was built from a modified tree, `unknown` when the versions name no commit or differ.
    With `mrc_sim` (the binary the runs used), the model's fingerprint follows
    (scripts/model_fingerprint.py, ~20 s). scripts/check-docs.py compares the commit with the
    sources now (src/transport, src/sim) and, given a binary, the fingerprint with its own."""
    commits, dirty = set(), False
    for v in versions:
        m = re.search(r"\(([^)]*)\)\s*$", v or "")
        describe = m.group(1) if m else ""
        dirty = dirty or describe.endswith("-dirty")
        describe = describe.removesuffix("-dirty")
        sha = re.search(r"(?:-g)?([0-9a-f]{7,40})$", describe)
        commits.add(sha.group(1) if sha else "unknown")
    commit = commits.pop() if len(commits) == 1 else "unknown"
    if commit != "unknown":
        full = subprocess.run(["git", "-C", REPO, "rev-parse", "--verify", "-q", commit + "^{commit}"],
                              capture_output=True, text=True)
        if full.returncode == 0:
            commit = full.stdout.strip()
    fp = f" fingerprint={fingerprint(mrc_sim)[0]}" if mrc_sim else ""
    return f"<!-- generated-from: {section} commit={commit}{' dirty' if dirty else ''}{fp} -->"


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
