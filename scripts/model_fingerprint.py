#!/usr/bin/env python3
"""The model's fingerprint: one hash of what mrc-sim computes on a fixed set of short runs.

A generated section of docs/results.md names the commit its runs were built from, and
scripts/check-docs.py notes when src/transport or src/sim changed after it. Most such changes
(a refactoring, a faster data structure) leave every output byte the same, and the section's
numbers hold; some move them. The fingerprint tells the two apart: the report records it
beside the commit, and `scripts/check-docs.py --fingerprint build/bin/mrc-sim` computes it
again from the binary at hand. When the two agree, the section is current in spite of the
commits.

The runs cover each mechanism the reports exercise, each in a few seconds or less: the default
run (MRC against RoCE), ECN steering (Fig 14's first layout, scenarios/fingerprint/), a lossy EV and its probes (Figs 12-13), failed
T0-T1 links and resurrection (Fig 9c), the denylist (section 4), DCQCN profiles (Fig 22), an
incast with PFC and DCQCN (Figs 18, 21), port flaps (Figs 6-7), and a ring AllReduce with
random loss for MRC over SRv6 and over ECMP entropy and for RoCE with QP scaling (Fig 16). The
hash covers each run's flows.csv, links.csv, ev_events.jsonl and the per-transport results of
summary.json (not its wall-clock figures). It is a sample: a change that moves only
behaviour none of these runs reaches keeps the fingerprint, so regenerating after a model
change remains the rule.

  scripts/model_fingerprint.py [MRC_SIM]   print the fingerprint of MRC_SIM (default
                                            build/bin/mrc-sim), ~20 s
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = "scenarios/paper"
FOUR_MIB = ["workload.size=4MiB"]
# (name, scenario or None for the embedded default, --set arguments)
RUNS = [
    ("default", None, []),
    ("ecn-steering", "scenarios/fingerprint/ecn-steering.toml", []),
    ("lossy-ev", f"{PAPER}/fig12-13-lossy-ev.toml", []),
    ("t0t1-links-down", f"{PAPER}/fig09c-twenty-t0t1-links-down.toml", []),
    ("denylist", f"{PAPER}/sec4-lossy-nic-link-denylist.toml", []),
    ("dcqcn-profiles", f"{PAPER}/fig22-dcqcn-profiles.toml", []),
    ("incast-victim", f"{PAPER}/fig18-21-incast-victim.toml", []),
    ("port-flaps", f"{PAPER}/fig06-07-t0-transceiver-flap.toml", []),
    ("allreduce-mrc-loss", f"{PAPER}/fig16-allreduce-mrc.toml", FOUR_MIB),
    ("allreduce-mrc-ecmp-loss", f"{PAPER}/fig16-allreduce-mrc.toml", FOUR_MIB + ["transport.path_mode=ecmp"]),
    ("allreduce-roce-loss", f"{PAPER}/fig16-allreduce-roce.toml", FOUR_MIB + ["transport.qps_per_flow=4"]),
]
OUTPUTS = ("flows.csv", "links.csv", "ev_events.jsonl")


def fingerprint(mrc_sim):
    """(fingerprint, version) of the mrc-sim binary at `mrc_sim`: "sha256:" and 16 hex digits,
    and the version its summary.json gives ("mrc-sim 0.1.0 (92e6ab6)": the commit it was built
    from). Raises RuntimeError naming the run when mrc-sim fails."""
    h = hashlib.sha256()
    version = ""
    with tempfile.TemporaryDirectory(prefix="mrc-fingerprint.") as tmp:
        for name, scenario, sets in RUNS:
            out = os.path.join(tmp, name)
            cmd = [mrc_sim] + ([scenario] if scenario else []) + ["--out", out, "--quiet"]
            for s in sets:
                cmd += ["--set", s]
            p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}: {p.stderr.strip()[-300:]}")
            h.update(name.encode() + b"\0")
            for f in OUTPUTS:
                path = os.path.join(out, f)
                if os.path.exists(path):
                    with open(path, "rb") as fh:
                        h.update(f.encode() + b"\0" + fh.read())
            with open(os.path.join(out, "summary.json")) as fh:
                summary = json.load(fh)
            version = version or summary.get("version", "")
            h.update(json.dumps(summary["transports"], sort_keys=True).encode())
    return "sha256:" + h.hexdigest()[:16], version


def main(argv):
    mrc_sim = argv[1] if len(argv) > 1 else os.path.join(REPO, "build", "bin", "mrc-sim")
    if not os.access(mrc_sim, os.X_OK):
        print(f"model_fingerprint.py: {mrc_sim} is not an executable mrc-sim (build it first)", file=sys.stderr)
        return 2
    try:
        print(fingerprint(os.path.abspath(mrc_sim))[0])
    except RuntimeError as e:
        print(f"model_fingerprint.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
