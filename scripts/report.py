#!/usr/bin/python3
"""The claims study: run the scenarios of scenarios/claims/ with mrc-sim and
mrc-topo, and write docs/results.md and docs/results/*.png.

    scripts/report.py --mode quick|full|smoke [--bin DIR] [--runs DIR] [--docs DIR] [--reuse]

Normally called by scripts/report.sh. Every simulation runs sequentially under `nice -n 10`
(the machine is shared); each run directory is RUNS/<run id>/ (summary.json, flows.csv,
links.csv, ev_events.jsonl). --reuse skips runs whose summary.json exists with the same
command (for re-rendering the report without re-simulating).

Needs Debian's python3-matplotlib: run with /usr/bin/python3.
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict

from report_common import PAPER_BEGIN, REPO, dur_us, markdown_table, plt, provenance_stamp, run_mrc_sim

SCEN = "scenarios/claims"
COLORS = {"mrc": "#1f77b4", "mrc_oblivious": "#17becf", "roce": "#d62728", "roce_pfc": "#ff7f0e"}

def machine_description():
    """The CPU model and core count of the machine rendering the report, e.g. "2 cores
    (AMD EPYC)": named once in the report's header."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = os.cpu_count() or 0
    return f"{cores} core{'s' if cores != 1 else ''} ({model})"


# ---- the experiments, per mode ----------------------------------------------------------------
#
# A run = (id, scenario file, [--set overrides]). Quick mode uses the same scenario files at
# smaller scales (the overrides say how); full mode uses the study's full scales.


def strided_group(hosts, per_leaf):
    """Ring order in which consecutive ranks sit on different leaves (every hop crosses spines)."""
    leaves = hosts // per_leaf
    return [(k % leaves) * per_leaf + k // leaves for k in range(hosts)]


def group_set(hosts, per_leaf):
    return "workload.group=[" + ",".join(map(str, strided_group(hosts, per_leaf))) + "]"


FAULTS = ["link-down", "spine-reboots", "blackhole", "gray-loss", "flap"]
FAULT_TITLES = {
    "link-down": "(a) one leaf-spine link down",
    "spine-reboots": "(b) four spines rebooted one after another",
    "blackhole": "(c) silent blackhole of a spine",
    "gray-loss": "(d) 1% gray loss on one link",
    "flap": "(e) flapping link",
}


# The EV-set study: the adaptive-vs-oblivious permutation on 16 spines per plane (radix 32),
# with uplink samples.
EVSET_BASE = ["topo.radix=32", "run.sample_interval=20us"]
EVSET_VARIANTS = [
    ("spread-16", ["transport.evs_per_plane=16", "transport.backup_evs_per_plane=0"]),
    ("spread-4-backup-4", ["transport.evs_per_plane=4", "transport.backup_evs_per_plane=4"]),
    ("random-4-backup-4", ["transport.ev_choice=random", "transport.evs_per_plane=4",
                           "transport.backup_evs_per_plane=4"]),
    ("random-4-no-backup", ["transport.ev_choice=random", "transport.evs_per_plane=4",
                            "transport.backup_evs_per_plane=0"]),
]


def plan(mode):
    runs = []
    R = lambda rid, scen, *sets: runs.append((rid, f"{SCEN}/{scen}.toml", list(sets)))  # noqa

    if mode == "smoke":
        R("smoke-permutation", "lb-permutation", "topo.hosts=32", "topo.planes=2", "topo.radix=8",
          "workload.size=64KiB", "transport.kinds=[mrc,roce_pfc]", "run.sample_interval=2us")
        R("smoke-train-link-down", "train-link-down", "topo.hosts=16", "topo.radix=8",
          "topo.planes=2", "workload.size=64KiB", "workload.iterations=4", "workload.compute=10us",
          "fault.0.at=150us", "fault.0.link=p0/leaf0-spine0", group_set(16, 4))
        return runs

    quick = mode == "quick"
    # Experiment 1 at packet level: the conventional 800G three-tier fat tree of the same
    # per-GPU bandwidth, same permutation as e2-perm-1024.
    R("e1-fattree-perm-1024", "lb-permutation-fattree")
    # Experiment 2: load balancing.
    if quick:
        R("e2-perm-1024", "lb-permutation")
        R("e2-a2a-128", "lb-alltoall", "topo.hosts=128", "topo.radix=16", "workload.size=2MiB")
    else:
        R("e2-perm-1024", "lb-permutation")
        R("e2-perm-8192", "lb-permutation", "topo.hosts=8192", "topo.radix=128",
          "run.sample_interval=100us")
        # All-to-all at 1,024 ranks: 1,047,552 flows of 16 KiB (4 packets) on 523,776 QP pairs.
        # QP rings grow with what is in flight (src/transport/qp.h); the report's header gives the
        # measured bytes per QP and peak RSS. A 4-packet flow uses 4 paths whatever the EV count.
        R("e2-a2a-1024", "lb-alltoall", "workload.size=16MiB", "transport.evs_per_plane=4",
          "transport.kinds=[mrc,mrc_oblivious]")
        # 2,048 ranks (the largest two-tier fabric of radix 64): 4,192,256 flows of 8 KiB, MRC
        # only (~16 GB, ~9 min); no link samples (links.csv would hold 2 x 65,536 link directions
        # per sample).
        R("e2-a2a-2048", "lb-alltoall", "topo.hosts=2048", "workload.size=16MiB",
          "transport.evs_per_plane=4", "transport.kinds=[mrc]", "run.sample_interval=0ns")
        # RoCEv2 splits every flow over the 8 planes (one QP per plane per pair): 8x MRC's QPs.
        # At 1,024 ranks that is 8,380,416 QPs (~15 GB, the most a 23 GB machine runs); the
        # report computes what 2,048 ranks would need (section 2, "All-to-all at scale").
        R("e2-a2a-1024-roce", "lb-alltoall", "workload.size=16MiB", "transport.kinds=[roce_pfc]",
          "run.sample_interval=0ns")
        R("e2-a2a-128", "lb-alltoall", "topo.hosts=128", "topo.radix=16", "workload.size=8MiB")
    # Experiment 3: AllReduce busbw over message sizes.
    if quick:
        # 64 ranks: a ring needs chunks (size / n) well above a BDP to approach the line rate.
        for s in ["1MiB", "4MiB", "16MiB", "64MiB", "256MiB"]:
            R(f"e3-allreduce-64-{s}", "allreduce", "topo.hosts=64", "topo.radix=16",
              f"workload.size={s}")
    else:
        # 1 GiB at 1,024 ranks is 2 TiB of simulated traffic, 4x the 256 MiB run: beyond 2 h.
        for s in ["1MiB", "16MiB", "64MiB", "256MiB"]:
            R(f"e3-allreduce-1024-{s}", "allreduce", f"workload.size={s}")
        # 1 GiB at 64 ranks (128 GiB of traffic, ~2 min) stands in for 1 GiB at 1,024.
        for s in ["64MiB", "256MiB", "1GiB"]:
            R(f"e3-allreduce-64-{s}", "allreduce", "topo.hosts=64", "topo.radix=16",
              f"workload.size={s}")
    # Experiment 4: incast N -> 1, trimming on and off.
    ns = [16, 64, 255] if quick else [16, 64, 128, 256]
    for n in ns:
        R(f"e4-incast-{n}-trim", "incast", f"workload.senders={n}")
        R(f"e4-incast-{n}-notrim", "incast", f"workload.senders={n}", "switch.trimming=false",
          "transport.kinds=[mrc,mrc_oblivious]")
    # Experiment 5: training through faults.
    if quick:
        # 64 GPUs, flat ring (126 chained steps): ~0.4 ms iterations, faults at 2 ms of ~5 ms.
        scale = ["topo.hosts=64", group_set(64, 8)]
    else:
        # 1,024 GPUs on 8 planes of radix 64; 512 KiB AllReduce per iteration. A flat ring over
        # 1,024 ranks is 2 x 1,023 chained steps, ~2 M flows and ~50 M events per iteration
        # (~90 s each): hours for the 23 runs. Like large jobs, the loop runs the two-level
        # ring instead: rows of 32 consecutive ranks of the leaf-strided group (one GPU per
        # leaf, so every row hop crosses the spines: 32/33 of the bytes), columns
        # = the 32 GPUs of a leaf. 124 chained steps, ~250 k flows and ~2.4 M events per
        # iteration (~4-5 s); MRC iterations ~0.58 ms (0.1 ms compute).
        scale = ["topo.hosts=1024", "topo.planes=8", "topo.radix=64", "workload.size=512KiB",
                 group_set(1024, 32), "workload.algorithm=ring2d", "workload.row=32"]
    # Full scale: the fault at 3 ms lands in iteration ~6 of 12 (5 iterations give the base, 6
    # show the recovery). The flap lasts 4 ms (10 x 200 us down, 200 us up) and the four
    # reboots run 2-6 ms (the scenario's times), so those runs have more iterations. Measured
    # on the shared 2-core machine: e5-link-down 108 s of simulator wall time (MRC 32 s, RoCE
    # 77 s; 1.3 GB), ~3-4 s per MRC and ~6-7 s per RoCE iteration: e5 + e6 ~25-35 min.
    timing = {} if quick else {
        "link-down": ["fault.0.at=3ms", "workload.iterations=12"],
        "blackhole": ["fault.0.at=3ms", "workload.iterations=12"],
        "gray-loss": ["fault.0.at=3ms", "workload.iterations=12"],
        "flap": ["fault.0.at=3ms", "workload.iterations=16"],
        "spine-reboots": ["workload.iterations=14"],
    }
    for f in FAULTS:
        fs = timing.get(f, [])
        R(f"e5-{f}", f"train-{f}", *scale, *fs)
        R(f"e5-{f}-roce-1s", f"train-{f}", *scale, *fs, "transport.kinds=[roce_pfc]",
          "transport.routing_convergence=1s")
    # Experiment 6: failover sensitivity (MRC, blackholed spine and a downed link).
    base6 = scale + ["transport.kinds=[mrc]"]
    for to in [6, 8, 12, 16]:
        R(f"e6-timeout-{to}", "train-blackhole", *base6, *timing.get("blackhole", []),
          f"transport.timeout={to}")
    for pi in ["2us", "20us", "200us", "2ms"]:
        R(f"e6-probe-{pi}", "train-flap", *base6, *timing.get("flap", []),
          f"transport.probe_interval={pi}")
    for ev in [1, 2, 4, 8, 16]:
        R(f"e6-evs-{ev}", "train-blackhole", *base6, *timing.get("blackhole", []),
          f"transport.evs_per_plane={ev}")
    # Experiment 8: small messages through a link failure (one-packet flows: a QP without an RTT
    # sample of its own). 1,024 GPUs: ~10 min and ~5 GB per run with 4 EVs per plane.
    e8 = [("128-2KiB", []), ("128-32KiB", ["workload.size=4MiB"])]
    if not quick:
        e8.append(("1024-2KiB", ["topo.hosts=1024", "topo.planes=8", "topo.radix=64",
                                 "workload.size=2MiB", "transport.evs_per_plane=4"]))
    for name, sets in e8:
        R(f"e8-{name}-nofault", "a2a-small-linkdown", *sets, "fault=[]")
        R(f"e8-{name}-linkdown", "a2a-small-linkdown", *sets)
    # Adaptive vs oblivious spraying: the analysis sweep (default fabric, no fault).
    for name, sets in [("default", []),
                       ("cooldown-4us", ["transport.ecn_cooldown=4us"]),
                       ("cooldown-20us", ["transport.ecn_cooldown=20us"]),
                       ("cooldown-100us", ["transport.ecn_cooldown=100us"]),
                       ("evs-4", ["transport.evs_per_plane=4"]),
                       ("evs-32", ["transport.evs_per_plane=32"]),
                       ("ecn-high", ["switch.ecn_kmin=60KB", "switch.ecn_kmax=100KB"]),
                       ("queue-4bdp", ["switch.queue=400KB"]),
                       ("linkdown", ["@fault"]),
                       ("linkdown-cooldown-4us", ["@fault", "transport.ecn_cooldown=4us"]),
                       ("linkdown-ecn-high", ["@fault", "switch.ecn_kmin=60KB", "switch.ecn_kmax=100KB"]),
                       ("linkdown-queue-4bdp", ["@fault", "switch.queue=400KB"]),
                       ("seed2", ["seed=2"]), ("seed3", ["seed=3"]),
                       ("linkdown-seed2", ["@fault", "seed=2"]), ("linkdown-seed3", ["@fault", "seed=3"])]:
        R(f"ao-{name}", "adaptive-vs-oblivious", *sets)
    # The EV set's structure at small scale (paper 2.1/2.4): QPs with a few random spines per plane
    # and backups, as production QPs take ~32 of 256, against today's spread over every spine.
    for name, sets in EVSET_VARIANTS:
        R(f"evset-{name}", "adaptive-vs-oblivious", *EVSET_BASE, *sets)
    # Spraying on a hashed fabric (STEV): benchmark A's fabric, MRC's EVs hashed by the leaves,
    # next to source routing and single-path ECMP (quick: 256 of its 1,024 hosts).
    stev = ["topo.hosts=256"] if quick else []
    R("stev-ecmp", "stev-permutation", *stev)
    R("stev-srv6", "stev-permutation", *stev, "transport.path_mode=srv6", "transport.evs_per_plane=0",
      "transport.kinds=[mrc]")
    R("stev-ecmp-noswap", "stev-permutation", *stev, "transport.ecn_swap_marks=0", "transport.kinds=[mrc]")
    R("stev-ecmp-halfcut", "stev-permutation", *stev, "transport.trim_keep=0.5", "transport.kinds=[mrc]")
    # The EV set, cool-down and trim cut of the engine before ECN-driven replacement: 32 EVs (the
    # set was capped at the spine count), no backups, cool-down base RTT / 16, a trim halves the
    # window.
    R("stev-ecmp-before", "stev-permutation", *stev, "transport.evs_per_plane=32",
      "transport.backup_evs_per_plane=0", "transport.ecn_swap_marks=0", "transport.ecn_cooldown=542ns",
      "transport.trim_keep=0.5", "transport.kinds=[mrc]")
    if not quick:
        R("e7-131k", "scale-131k")
    return runs


# ---- running ---------------------------------------------------------------------------------


def run_all(runs, a):
    os.makedirs(a.runs, exist_ok=True)
    log = []
    t_all = time.time()
    for i, (rid, scen, sets) in enumerate(runs):
        scen_path = scen
        real_sets = [s for s in sets if not s.startswith("@")]
        if "@fault" in sets:
            scen_path = scen.replace(".toml", "-linkdown.toml")
        announce = lambda: print(  # noqa
            f"[{i + 1}/{len(runs)}] {rid}: mrc-sim {scen_path} {' '.join(short(s) for s in real_sets)}",
            file=sys.stderr, flush=True)
        dt = run_mrc_sim(os.path.join(a.bin, "mrc-sim"), scen_path, real_sets, os.path.join(a.runs, rid),
                         a.reuse, announce)
        if dt is None:
            log.append((rid, 0.0, "reused"))
            continue
        log.append((rid, dt, "ran"))
        print(f"      {dt:.1f} s (total {time.time() - t_all:.0f} s)", file=sys.stderr, flush=True)
    return log


def short(s):
    return s if len(s) < 60 else s[:40] + "...]"


# ---- loading and metrics -----------------------------------------------------------------------


class Run:
    def __init__(self, rid, scen, sets, runs_dir):
        self.id, self.scen, self.sets = rid, scen, [s for s in sets if not s.startswith("@")]
        if "@fault" in sets:
            self.scen = scen.replace(".toml", "-linkdown.toml")
        self.dir = os.path.join(runs_dir, rid)
        with open(os.path.join(self.dir, "summary.json")) as f:
            self.s = json.load(f)
        self.t = {t["name"]: t for t in self.s["transports"]}
        self.seed = self.s["seed"]
        self.cfg = self.s["config"]

    def flows(self):
        out = {}
        p = os.path.join(self.dir, "flows.csv")
        with open(p) as f:
            for row in csv.DictReader(f):
                out.setdefault(row["transport"], []).append(row)
        return out

    def ev_events(self):
        out = []
        p = os.path.join(self.dir, "ev_events.jsonl")
        if os.path.exists(p):
            with open(p) as f:
                for line in f:
                    if line.strip():
                        out.append(json.loads(line))
        return out

    def source(self):
        sets = " ".join(f"--set {short(s)}" for s in self.sets)
        return f"`{self.scen}`" + (f" `{sets}`" if sets else "") + f", seed {self.seed}"

    def label(self):
        return f"{os.path.basename(self.scen)} seed {self.seed}"

    def fault_us(self):
        return [dur_us(f["at"]) for f in self.cfg.get("faults", [])]

    def per_host_gbps(self):
        t = self.cfg["topo"]
        return t["planes"] * rate_gbps(t["link_rate"])


def rate_gbps(s):
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]?)bps", str(s), re.I)
    v = float(m.group(1))
    return v * {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}[m.group(2).upper()]


def size_str(n):
    for unit, sc in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= sc:
            return f"{n / sc:g} {unit}"
    return f"{n} B"


def f1(x, nd=1):
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return "-"
    return f"{x:,.{nd}f}"


def link_util(run, tname):
    """Mean and p99 utilisation over every leaf-spine link direction and every sample from 0 to
    the transport's makespan (links.csv omits idle samples: they count as 0)."""
    p = os.path.join(run.dir, "links.csv")
    interval = dur_us(run.cfg["run"]["sample_interval"])
    t = run.t[tname]
    if not os.path.exists(p) or not interval:
        return None, None
    end_us = t["makespan_ps"] / 1e6
    topo = run.cfg["topo"]
    hpl = topo["hosts_per_leaf"] or topo["radix"] // 2
    leaves = t["fabric"]["leaves_per_plane"]
    n_links = topo["planes"] * leaves * (topo["radix"] - hpl) * 2
    n_samples = max(1, math.ceil(end_us / interval))
    total = 0.0
    vals = []
    with open(p) as f:
        for row in csv.DictReader(f):
            if row["transport"] != tname:
                continue
            if float(row["time_ns"]) / 1e3 > n_samples * interval + 1e-9:
                continue
            u = float(row["utilization"])
            total += u
            vals.append(u)
    mean = total / (n_links * n_samples)
    cells = n_links * n_samples
    vals.sort(reverse=True)
    k = int(cells * 0.01)
    p99 = vals[k] if k < len(vals) else 0.0
    return mean, p99


# ---- figures -----------------------------------------------------------------------------------


def save(fig, docs, name):
    os.makedirs(os.path.join(docs, "results"), exist_ok=True)
    path = os.path.join(docs, "results", name)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f"results/{name}"


def mrc_plot(a, run, which, docs, name):
    """Run tools' mrc-plot on a run directory and keep one of its figures."""
    tmp = os.path.join(run.dir, "plots")
    if not os.path.exists(os.path.join(tmp, which)):
        subprocess.run(["nice", "-n", "10", "/usr/bin/python3", os.path.join(a.bin, "mrc-plot"),
                        run.dir, "--out", tmp], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    os.makedirs(os.path.join(docs, "results"), exist_ok=True)
    shutil.copy(os.path.join(tmp, which), os.path.join(docs, "results", name))
    return f"results/{name}"


# ---- the report ----------------------------------------------------------------------------


class Report:
    def __init__(self):
        self.lines = []
        self.claims = []  # (claim, measurement, verdict, why)
        self.runs = None  # the runs behind the tables being written (their last-hop ECN setting)
        self.roce_a2a_stop = None  # where RoCEv2's all-to-all stops (a2a_scale), for the header

    def w(self, s=""):
        self.lines.append(s)

    def table(self, head, rows):
        self.lines += markdown_table(head, rows)
        note = last_hop_ecn_note(self.runs)
        if note:
            self.w()
            self.w(note)
        self.w()


def last_hop_ecn_note(runs):
    """Which transports' switches mark ECN on the last hop to the receiver, for the line under a
    table: MRC's follow the paper (2.1: ECN steers load in the fabric, trimming handles incast),
    the RoCE/DCQCN baseline keeps it (DCQCN needs it)."""
    on, off, on_cc = set(), set(), set()
    for r in runs or []:
        for name, t in r.t.items():
            marks = t.get("switch", {}).get("ecn_last_hop")
            (on if marks else off).add(name)
            if marks:
                on_cc.add(t.get("cc", "?"))
    if not on and not off:
        return ""
    part = lambda names: ", ".join(f"`{n}`" for n in sorted(names))  # noqa
    text = []
    if off:
        text.append(f"off for {part(off)} (paper 2.1)")
    if on:
        text.append(f"on for {part(on)} (congestion control {', '.join(sorted(on_cc))}, which "
                    "reads the receiver's queue from ECN)")
    return "ECN on the last hop to the receiver (`switch.ecn_last_hop`): " + "; ".join(text) + "."


def exp1(a, rep, runs):
    rep.w("## 1. Topology economics (`mrc-topo`)")
    rep.w()
    gpus = [8192, 32768, 131072]
    variants = [("defaults", []), ("copper host links (`--host-link-m 1`)", ["--host-link-m", "1"]),
                ("one pluggable per port (`--packaging per-port`)", ["--packaging", "per-port"]),
                ("leaves 3:1 oversubscribed (`--oversub 3`)", ["--oversub", "3"])]
    results = {}
    for name, extra in variants:
        cmd = [os.path.join(a.bin, "mrc-topo"), "--gpus", *map(str, gpus), "--json", *extra]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        results[name] = json.loads(p.stdout)
    d = results["defaults"]
    rep.w("Command: `mrc-topo --gpus 8192 32768 131072 --json` (closed form, no simulation, no seed): "
          "multi-plane 8 x 100G planes of radix-512 switches in two tiers against one 800G plane of "
          "radix-64 switches in the fewest tiers that fit. Assumptions (from `mrc-topo`; "
          "docs/topology.md gives their sources):")
    rep.w()
    for k, v in d.get("assumptions", {}).items():
        rep.w(f"- `{k}` = {v}")
    rep.w()
    rows = []
    for s in d["sizes"]:
        mp, cv, r = s["multi_plane"], s["conventional"], s["ratios"]
        rows.append([f"{s['gpus']:,}", f"{mp['tiers']} / {cv['tiers']}",
                     f"{mp['worst_case_hops']} / {cv['worst_case_hops']}",
                     f"{mp['switches']:,} / {cv['switches']:,} ({r['switches']:.2f})",
                     f"{mp['links']:,} / {cv['links']:,} ({r['links']:.2f})",
                     f"{mp['transceivers']:,} / {cv['transceivers']:,} ({r['transceivers']:.2f})",
                     f"{mp['modules_800g_equiv']:,} / {cv['modules_800g_equiv']:,} ({r['modules_800g_equiv']:.2f})",
                     f"{mp['power_w'] / 1e6:.2f} / {cv['power_w'] / 1e6:.2f} MW ({r['power']:.2f})"])
    rep.table(["GPUs", "tiers", "worst-case hops", "switches", "links", "transceivers (optical ends)",
               "800G-equivalent optics", "power"], rows)
    rep.w("Multi-plane / conventional (ratio). Sensitivity of the ratios (switches / 800G-eq. optics / "
          "power) to one assumption at a time:")
    rep.w()
    rows = []
    for name, _ in variants:
        cells = []
        for s in results[name]["sizes"]:
            r = s.get("ratios") or {}
            cells.append(f"{r.get('switches', 0):.2f} / {r.get('modules_800g_equiv', 0):.2f} / "
                         f"{r.get('power', 0):.2f}")
        rows.append([name] + cells)
    rep.table(["variant"] + [f"{g:,} GPUs" for g in gpus], rows)
    big = d["sizes"][-1]
    small = d["sizes"][0]
    rep.claims.append((
        "More than 100,000 GPUs in two switch tiers (131,072 with 8 x 100G planes of radix 512) where 800G designs need three or four",
        f"{big['gpus']:,} GPUs: {big['multi_plane']['tiers']} tiers multi-plane vs {big['conventional']['tiers']} conventional; "
        f"8k/32k: 2 vs {small['conventional']['tiers']}",
        "holds", "closed form (mrc-topo); the packet-level comparison below runs the same permutation on both designs"))
    rep.claims.append((
        "Worst-case 3 switch hops instead of 5-7",
        f"{small['multi_plane']['worst_case_hops']} vs {small['conventional']['worst_case_hops']} (8k, 32k), "
        f"{big['multi_plane']['worst_case_hops']} vs {big['conventional']['worst_case_hops']} (131k)",
        "holds", "by construction (2t - 1)"))
    rep.claims.append((
        "About 3/5 of the switches and 2/3 of the optics; lower power",
        f"switches {small['ratios']['switches']:.2f} (8k) / {big['ratios']['switches']:.2f} (131k); optics by bandwidth "
        f"{small['ratios']['modules_800g_equiv']:.2f} / {big['ratios']['modules_800g_equiv']:.2f}; "
        f"transceiver ends {small['ratios']['transceivers']:.2f} / {big['ratios']['transceivers']:.2f}; power "
        f"{small['ratios']['power']:.2f} / {big['ratios']['power']:.2f}",
        "holds, with a caveat",
        "optics hold only counted by bandwidth (8 x 100G lanes share one breakout module); counted as "
        "pluggable ends per port the multi-plane design has 4-5.3x more; power advantage shrinks to "
        f"{results['one pluggable per port (`--packaging per-port`)']['sizes'][0]['ratios']['power']:.2f} with per-port optics"))
    ft = next((r for r in runs if r.id == "e1-fattree-perm-1024"), None)
    mp = next((r for r in runs if r.id == "e2-perm-1024"), None)
    if ft and mp:
        rep.w("### The two designs at packet level: the same permutation on both")
        rep.w()
        rep.w(f"Multi-plane: {mp.source()} ({mp.cfg['topo']['hosts']} GPUs, {mp.cfg['topo']['planes']} x "
              f"{mp.cfg['topo']['link_rate']} planes, two tiers, 3 switch hops). Conventional: {ft.source()} "
              f"({ft.cfg['topo']['hosts']} GPUs, one {ft.cfg['topo']['link_rate']} plane, a three-tier fat tree "
              "of radix 16, 5 switch hops). Same per-GPU bandwidth, same 4 MiB permutation, same seed.")
        rep.w()
        rows = []
        for r, fabric in [(mp, "8 x 100G, 2 tiers"), (ft, "1 x 800G, 3 tiers")]:
            for name, t in r.t.items():
                rows.append([fabric, name, f"{t['flows']['completed']}/{t['flows']['count']}",
                             f1(t["fct_us"]["p50"]), f1(t["fct_us"]["p99"]), f1(t["fct_us"]["max"]),
                             f1(t["fct_us"]["ideal_max"]), f1(t["slowdown"]["p99"], 2), f1(t["slowdown"]["max"], 2),
                             t["counters"]["drops"], t["counters"]["pfc_pauses"]])
        rep.runs = runs
        rep.table(["fabric", "transport", "done", "FCT p50 us", "p99 us", "max us", "ideal max us",
                   "slowdown p99", "max", "drops", "PFC pauses"], rows)
        m_mp, m_ft = mp.t.get("mrc"), ft.t.get("mrc")
        r_mp, r_ft = mp.t.get("roce_pfc"), ft.t.get("roce_pfc")
        if m_mp and m_ft and r_mp and r_ft:
            rep.w(f"MRC's worst flow is {m_mp['slowdown']['max']:.2f}x its ideal on the multi-plane fabric and "
                  f"{m_ft['slowdown']['max']:.2f}x on the fat tree; RoCEv2 with PFC {r_mp['slowdown']['max']:.1f}x "
                  f"and {r_ft['slowdown']['max']:.1f}x. Spraying, not the number of planes, is what removes the "
                  "collisions: on a non-blocking fabric without faults both designs carry a permutation near "
                  "line rate under MRC. What the multi-plane design buys is the tier count (fewer hops, "
                  "switches and optics, above) and independent planes that fail separately (experiment 5).")
            rep.w()
    rep.w()


def exp2(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## 2. Load balancing: permutation and all-to-all")
    rep.w()
    rep.w("FCT = flow completion time (requester completion); ideal = size at the line rate of every "
          "plane the transport uses, the last packet across the pair's own path and an ACK back: the "
          "flow alone on an idle fabric (the simulator's `ideal_fct_ns`, `docs/simulator.md`); "
          "slowdown = FCT / ideal per flow. Link utilisation: mean (and p99 over link x sample) of "
          "every leaf-spine link direction from t = 0 to the transport's last completion, from "
          "`links.csv` (missing rows = idle).")
    rep.w()
    verdict_rows = []
    for r in runs:
        rep.w(f"### {r.id}: {r.s['scenario']['description']}")
        rep.w()
        w = r.cfg["workload"]
        rep.w(f"Source: {r.source()}. {r.cfg['topo']['hosts']} GPUs, {r.cfg['topo']['planes']} planes x "
              f"{r.cfg['topo']['link_rate']}, {w['kind']} of {size_str(w['size'])} per GPU.")
        rep.w()
        rows = []
        for name, t in r.t.items():
            mean, p99 = link_util(r, name)
            fl = t["flows"]
            rows.append([name, f"{fl['completed']}/{fl['count']}", f1(t["fct_us"]["p50"]), f1(t["fct_us"]["p99"]),
                         f1(t["fct_us"]["max"]), f1(t["fct_us"]["ideal_max"]), f1(t["slowdown"]["p50"], 2),
                         f1(t["slowdown"]["p99"], 2), f1(t["slowdown"]["max"], 2),
                         f1(None if mean is None else 100 * mean) + " / " + f1(None if p99 is None else 100 * p99),
                         t["counters"]["drops"], t["counters"]["trims"], t["counters"]["retransmits"],
                         t["counters"]["timeouts"], t["counters"]["pfc_pauses"]])
            verdict_rows.append((r, name, t))
        rep.table(["transport", "done", "FCT p50 us", "p99 us", "max us", "ideal max us", "slowdown p50",
                   "p99", "max", "link util mean / p99 %", "drops", "trims", "retx", "timeouts", "PFC pauses"], rows)
        img = mrc_plot(a, r, "fct_cdf.png", docs, f"{r.id}-fct_cdf.png")
        rep.w(f"![FCT CDF, {r.label()}]({img})")
        rep.w()
        rep.w(f"*Figure: FCT and slowdown CDFs, {r.source()}.*")
        rep.w()
        if w["kind"] == "all_to_all":
            # Every flow starts at t = 0 and the NIC interleaves a GPU's n - 1 flows, so per-flow
            # slowdowns say little; the collective's time is the last completion.
            n = len(w.get("group") or []) or r.cfg["topo"]["hosts"]
            ideal = a2a_ideal_us(r)
            done = ", ".join(f"{name} {f1(t['fct_us']['max'])} us ({t['fct_us']['max'] / ideal:.2f}x)"
                             for name, t in r.t.items())
            rep.w(f"All-to-all completion (the last flow's FCT): {done}; ideal {f1(ideal)} us = "
                  f"{n - 1} x {size_str(w['size'] // n)} per GPU at the per-GPU line rate "
                  f"({r.per_host_gbps():g} Gb/s).")
            mrc, obl = r.t.get("mrc"), r.t.get("mrc_oblivious")
            if mrc and obl and mrc["fct_us"] == obl["fct_us"] and mrc["counters"] == obl["counters"]:
                # The two differ only where a path is still cooling after an ECN echo.
                mtu = r.cfg["transport"].get("mtu", 4096)
                gap_us = (n - 1) * (mtu + 100) * 8 / (r.per_host_gbps() * 1e3)
                rep.w(f"Adaptive and oblivious MRC give identical results here. They differ only in "
                      f"skipping a path for the ECN cooldown (base RTT / 16, well under 1 us) after an "
                      f"ECN echo, and each GPU's NIC serves its {n - 1} QPs in turn, so one QP's "
                      f"consecutive packets leave ~{gap_us:.0f} us apart: no path is still cooling "
                      f"when the QP picks again. Every QP's window holds its whole flow, so the "
                      f"all-to-all starts as a {n - 1}-to-1 incast at every GPU; trimming turns the "
                      f"overflow into NACKs ({mrc['counters']['trims']:,} trims) and resends.")
            rep.w()
    a2a_scale(a, rep, [r for r in runs if r.cfg["workload"]["kind"] == "all_to_all"
                       and r.cfg["topo"]["hosts"] >= 1024])
    # The claim.
    perm = [x for x in verdict_rows if x[0].id.startswith("e2-perm")]
    if perm:
        r0 = perm[0][0]
        mrc = r0.t.get("mrc")
        roce = r0.t.get("roce_pfc")
        obl = r0.t.get("mrc_oblivious")
        holds = mrc and mrc["slowdown"]["max"] <= 1.5 and roce and roce["slowdown"]["max"] >= 2 * mrc["slowdown"]["max"]
        meas = (f"{r0.id}: MRC slowdown p99 {mrc['slowdown']['p99']:.2f}, max {mrc['slowdown']['max']:.2f}; "
                f"oblivious max {obl['slowdown']['max']:.2f}; RoCE+PFC max {roce['slowdown']['max']:.1f}, "
                f"RoCE max {r0.t['roce']['slowdown']['max']:.1f}")
        why = ("spraying removes ECMP collisions; the RoCE tails are ACK timeouts (go-back-N) after drops "
               "or PFC-paused queues")
        if mrc["slowdown"]["max"] > obl["slowdown"]["max"] + 0.02:
            why += ("; but adaptive MRC is not better than oblivious spraying here (see 'Adaptive vs "
                    "oblivious')")
        rep.claims.append(("Near line-rate utilisation: spraying removes flow collisions", meas,
                           "holds" if holds else "does not hold", why))


def a2a_ideal_us(r):
    """An all-to-all's ideal completion: every GPU's n - 1 flows at the per-GPU line rate."""
    w = r.cfg["workload"]
    n = len(w.get("group") or []) or r.cfg["topo"]["hosts"]
    return w["size"] // n * (n - 1) * 8 / (r.per_host_gbps() * 1e3)


def built_from(r):
    """The commit a run's mrc-sim was built from (its version string ends in `(hash)`)."""
    m = re.search(r"\(([^)]*)\)$", r.s.get("version", ""))
    return m.group(1) if m else "?"


def mem_total_bytes():
    """The rendering machine's memory (MemTotal of /proc/meminfo), 0 when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def ranks_plan_bytes(a, run, kinds):
    """What `mrc-sim --ranks-plan 1` predicts one process needs for a run's scenario with other
    transports (MemoryModel, src/sim/partition.h), and the command."""
    sets = [s for s in run.sets if not s.startswith(("transport.kinds=", "transport.evs_per_plane="))]
    sets += [f"transport.kinds=[{kinds}]"]
    cmd = [os.path.join(a.bin, "mrc-sim"), run.scen, "--ranks-plan", "1"]
    for x in sets:
        cmd += ["--set", x]
    out = subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True).stdout
    lines = [ln.split() for ln in out.splitlines() if ln.split()]
    # The column "predicted MB" (the names before it are one word each; exchange columns follow).
    col = next(ln for ln in lines if ln[0] == "rank").index("predicted")
    rows = [ln for ln in lines if ln[0] == "0"]
    return float(rows[-1][col]) * 2**20, " ".join(["mrc-sim", run.scen, "--ranks-plan", "1"] +
                                                 [f"--set {x}" for x in sets])


def largest_a2a_fitting(mem, qps_per_pair, bytes_per_qp, hosts_per_leaf):
    """The largest all-to-all (whole leaves of GPUs) whose QPs, at bytes_per_qp each, fit in mem:
    n (n - 1) qps_per_pair bytes_per_qp <= mem."""
    pairs = mem / (qps_per_pair * bytes_per_qp)
    n = int((1 + math.sqrt(1 + 4 * pairs)) / 2)
    return n // hosts_per_leaf * hosts_per_leaf


def a2a_scale(a, rep, runs):
    """The all-to-alls at 1,024 GPUs and more side by side (completion, QPs, memory), and where
    RoCEv2's one QP per plane per pair stops on the rendering machine."""
    if not runs:
        return
    runs = sorted(runs, key=lambda r: (r.cfg["topo"]["hosts"], r.id))
    outer, rep.runs = rep.runs, runs  # the ECN note under the table names these runs' transports
    rep.w("### All-to-all at scale: QPs and memory")
    rep.w()
    rep.w("Every rank pair of an all-to-all is a QP pair: MRC sprays one QP over all planes, RoCEv2 "
          "uses one QP per plane per pair. QPs and bytes per QP are `summary.json`'s `qp_memory` (the "
          "engine's count of what a QP holds, mean over requesters and responders, no allocator "
          "overhead); peak RSS is the whole simulator process (`run.peak_rss_bytes`: fabric, packets, "
          "flow records and results; a run's transports run one after another), and RSS per QP divides "
          "it by the QPs. ACK timeouts = `counters.timeouts`. `mrc_oblivious` rows are left out where "
          "they equal `mrc` (above).")
    rep.w()
    rows = []
    for r in runs:
        n = r.cfg["topo"]["hosts"]
        for name, t in r.t.items():
            mrc = r.t.get("mrc")
            if name == "mrc_oblivious" and mrc and mrc["fct_us"] == t["fct_us"]:
                continue
            qm = t.get("qp_memory", {})
            peak = r.s["run"]["peak_rss_bytes"]
            wall = r.s["run"].get("wall_seconds_per_transport", {}).get(name, r.s["run"]["wall_seconds"])
            rows.append([r.id, f"{n:,}", name, f"{t['flows']['completed']:,}/{t['flows']['count']:,}",
                         f1(t["fct_us"]["p99"]), f1(t["fct_us"]["max"]),
                         f"{t['fct_us']['max'] / a2a_ideal_us(r):.2f}", f"{t['counters']['timeouts']:,}",
                         f"{qm.get('qps', 0):,}", f"{qm.get('bytes_per_qp', 0):,.0f}", f1(peak / 1e9),
                         f"{peak / qm['qps']:,.0f}" if qm.get("qps") else "-", f1(wall, 0), built_from(r)])
    rep.table(["run", "GPUs", "transport", "flows completed", "FCT p99 us", "max us", "max / ideal",
               "ACK timeouts", "QPs", "bytes per QP", "peak RSS GB", "RSS per QP B", "wall s",
               "mrc-sim built from"], rows)
    rep.runs = outer
    if len({built_from(r) for r in runs}) > 1:
        rep.w("The runs were made by different builds (last column; `--reuse` keeps a run made by the "
              "same command, whatever build made it): where their engines differ, so do bytes per QP.")
        rep.w()
    # Where RoCEv2 stops: its largest run measured, scaled by its QP count to the largest MRC run.
    mem = mem_total_bytes()
    biggest = lambda pick: max(  # noqa
        ((r, name, t) for r in runs for name, t in r.t.items() if pick(name) and t.get("qp_memory", {}).get("qps")),
        key=lambda x: x[0].cfg["topo"]["hosts"], default=None)
    top_mrc, top_roce = biggest(lambda k: k.startswith("mrc")), biggest(lambda k: k.startswith("roce"))
    if not (top_mrc and top_roce and mem):
        return
    rm, _, tm = top_mrc
    rr, roce_name, tr = top_roce
    n_m, n_r = rm.cfg["topo"]["hosts"], rr.cfg["topo"]["hosts"]
    hpl = rr.cfg["topo"]["hosts_per_leaf"] or rr.cfg["topo"]["radix"] // 2
    per_pair = tr["qp_memory"]["qps"] / (n_r * (n_r - 1))
    rss_per_qp_r = rr.s["run"]["peak_rss_bytes"] / tr["qp_memory"]["qps"]
    rss_per_qp_m = rm.s["run"]["peak_rss_bytes"] / tm["qp_memory"]["qps"]
    roce_qps = per_pair * n_m * (n_m - 1)
    plan_r, _ = ranks_plan_bytes(a, rr, roce_name)
    plan_m, plan_cmd = ranks_plan_bytes(a, rm, roce_name)
    fits_r = largest_a2a_fitting(mem, per_pair, rss_per_qp_r, hpl)
    fits_m = largest_a2a_fitting(mem, tm["qp_memory"]["qps"] / (n_m * (n_m - 1)), rss_per_qp_m, hpl)
    rep.w(f"**Where RoCEv2 stops.** The largest RoCEv2 all-to-all here, {rr.id} ({roce_name}, {n_r:,} GPUs), "
          f"holds {tr['qp_memory']['qps']:,} QPs ({per_pair:g} per GPU pair, one per plane) in "
          f"{rr.s['run']['peak_rss_bytes'] / 1e9:.1f} GB ({rss_per_qp_r:,.0f} B of RSS per QP); "
          f"{tr['flows']['completed']:,} of {tr['flows']['count']:,} flows completed. At {n_m:,} GPUs, where "
          f"MRC ran on {tm['qp_memory']['qps']:,} QPs in {rm.s['run']['peak_rss_bytes'] / 1e9:.1f} GB, "
          f"RoCEv2 needs {roce_qps:,.0f} QPs: {roce_qps * rss_per_qp_r / 1e9:.0f} GB at the RSS per QP "
          f"measured at {n_r:,} GPUs (`{plan_cmd}` predicts {plan_m / 1e9:.0f} GB; its model predicts "
          f"{plan_r / 1e9:.1f} GB for {rr.id}, measured {rr.s['run']['peak_rss_bytes'] / 1e9:.1f} GB), "
          f"against the {mem / 1e9:.1f} GB ({mem / 2**30:.1f} GiB, MemTotal) of the machine that rendered this report. Scaled "
          f"the same way (RSS per QP constant, whole leaves of {hpl} GPUs), that memory holds a RoCEv2 "
          f"all-to-all of at most {fits_r:,} GPUs and an MRC one of {fits_m:,} (an extrapolation, not "
          f"a run).")
    rep.w()
    rep.roce_a2a_stop = (f"at {n_m:,} ranks that is {roce_qps:,.0f} QPs, ~{roce_qps * rss_per_qp_r / 1e9:.0f} GB "
                         f"at its measured RSS per QP against the rendering machine's {mem / 1e9:.1f} GB, "
                         f"which hold at most ~{fits_r:,} ranks")


def exp3(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## 3. Ring AllReduce bus bandwidth")
    rep.w()
    rep.w("nccl-tests definitions: t = first step start to last step end, algbw = size / t, busbw = "
          "algbw x 2(n-1)/n, GB/s = 10^9 B/s. Ideal busbw = the per-GPU line rate (planes x link rate), "
          "the bound a bandwidth-optimal ring reaches for large messages. The ring is in host order "
          "(as a topology-aware NCCL ring: most hops stay inside a leaf).")
    rep.w()
    rows = []
    series = {}
    for r in runs:
        ideal = r.per_host_gbps() / 8
        for name, t in r.t.items():
            c = t["collectives"][0] if t["collectives"] else None
            if not c:
                rows.append([r.id, name, size_str(r.cfg["workload"]["size"]), "-", "-", "-", "-", r.source()])
                continue
            rows.append([r.id, name, size_str(c["bytes"]), c["ranks"], f1(c["time_us"]), f1(c["algbw_GBps"], 2),
                         f1(c["busbw_GBps"], 2), f"{c['busbw_GBps'] / ideal:.2f}", r.source()])
            series.setdefault(name, []).append((c["bytes"], c["busbw_GBps"]))
    rep.table(["run", "transport", "size", "ranks", "time us", "algbw GB/s", "busbw GB/s", "busbw / ideal",
               "source"], rows)
    if runs:
        ideal = runs[0].per_host_gbps() / 8
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, pts in series.items():
            pts.sort()
            ax.plot([p[0] / 2**20 for p in pts], [p[1] for p in pts], "o-", color=COLORS.get(name), label=name)
        ax.axhline(ideal, color="gray", ls="--", label=f"ideal {ideal:g} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size per rank (MiB)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"Ring AllReduce busbw, {runs[0].cfg['topo']['hosts']} ranks - "
                     f"{os.path.basename(runs[0].scen)} seed {runs[0].seed} (--set workload.size)", fontsize=9)
        img = save(fig, docs, "e3-allreduce-busbw.png")
        rep.w(f"![AllReduce busbw]({img})")
        rep.w()
        big = max(series.get("mrc", [(0, 0)]))
        rep.claims.append(("Near line-rate collective bandwidth (AllReduce)",
                           f"MRC busbw {big[1]:.1f} GB/s at {size_str(big[0])} = {big[1] / ideal:.2f} of ideal "
                           f"{ideal:g} GB/s", "holds" if big[1] / ideal >= 0.8 else "partly",
                           "small messages are latency-bound: 2(n-1) ring steps each cost at least a base RTT "
                           "(requester completion), the same for every transport"))


def exp4(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## 4. Incast N -> 1")
    rep.w()
    rep.w("Goodput = bytes delivered to the receiver / time of the last completion, against the receiver's "
          "line rate (planes x link rate). Tail = FCT p99 and max. Timeouts = ACK timeouts fired "
          "(`counters.timeouts`). Last flow / fair share = the last completion against the time the "
          "receiver's line rate needs for all N flows' payload bytes "
          "(`slowdown.last_done_vs_fair_share`; the FCTs' slowdown against a flow alone on the fabric is in "
          "`summary.json`). Switches do not mark ECN on the last hop (paper 2.1, `switch.ecn_last_hop`), so "
          "the receiver's queue signals MRC by trimming and delay only. Trimming only applies to MRC runs "
          "(RoCE never trims).")
    rep.w()
    rows = []
    pts = {}
    for r in runs:
        trim = r.cfg["switch"]["trimming"]
        line = r.per_host_gbps()
        n = r.cfg["workload"]["senders"]
        for name, t in r.t.items():
            mk = t["makespan_ps"] / 1e6
            gp = t["flows"]["bytes_delivered"] * 8 / (mk * 1e3) if mk else 0
            label = f"{name}{'' if name.startswith('roce') else (' trim' if trim else ' no-trim')}"
            fair = t["slowdown"].get("last_done_vs_fair_share", 0.0)
            rows.append([n, label, f"{t['flows']['completed']}/{t['flows']['count']}", f1(gp), f"{gp / line:.2f}",
                         f"{fair:.2f}", f1(t["fct_us"]["p50"]), f1(t["fct_us"]["p99"]), f1(t["fct_us"]["max"]),
                         t["counters"]["timeouts"], t["counters"]["drops"], t["counters"]["trims"],
                         t["counters"]["retransmits"], t["counters"]["qp_errors"], r.source()])
            pts.setdefault(label, []).append((n, gp / line, t["fct_us"]["max"], t["counters"]["timeouts"], fair))
    rep.table(["N", "transport", "done", "goodput Gb/s", "of line rate", "last flow / fair share", "FCT p50 us",
               "p99 us", "max us", "timeouts", "drops", "trims", "retx", "QP errors", "source"], rows)
    if runs:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
        for label, p in pts.items():
            p.sort()
            base = label.split()[0]
            ls = "--" if "no-trim" in label else "-"
            ax1.plot([x[0] for x in p], [x[1] for x in p], "o" + ls, color=COLORS.get(base), label=label)
            ax2.plot([x[0] for x in p], [x[2] for x in p], "o" + ls, color=COLORS.get(base), label=label)
        ax1.set_ylabel("goodput / receiver line rate")
        ax2.set_ylabel("FCT max (us, log)")
        ax2.set_yscale("log")
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("senders N")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"Incast N -> 1, {size_str(runs[0].cfg['workload']['size'])} per sender - "
                     f"{os.path.basename(runs[0].scen)} seed {runs[0].seed} (--set workload.senders, "
                     "switch.trimming)", fontsize=9)
        img = save(fig, docs, "e4-incast.png")
        rep.w(f"![Incast]({img})")
        rep.w()
        mt = pts.get("mrc trim", [])
        mn = pts.get("mrc no-trim", [])
        rp = pts.get("roce_pfc", [])
        if mt:
            top = max(mt)  # the largest fan-in
            meas = (f"MRC+trimming, {min(x[0] for x in mt)}-{top[0]} senders: {sum(x[3] for x in mt)} ACK timeouts; "
                    f"last flow at {top[4]:.2f} of the fair share at {top[0]} senders "
                    f"({min(x[4] for x in mt):.2f}-{max(x[4] for x in mt):.2f} over N), "
                    f"{min(x[1] for x in mt):.2f}-{max(x[1] for x in mt):.2f} of line rate; without trimming "
                    f"{sum(x[3] for x in mn)} timeouts, max FCT up to {max(x[2] for x in mn):,.0f} us; RoCE+PFC "
                    f"{min(x[1] for x in rp):.2f}-{max(x[1] for x in rp):.2f} of line rate")
            # The claim is about timeouts; the study also asks the largest fan-in's last flow to
            # end within this multiple of its fair share.
            fair_limit = 1.1
            holds = sum(x[3] for x in mt) == 0 and top[4] <= fair_limit
            ok_n = [x[0] for x in mt if x[3] == 0]
            bad_n = [x[0] for x in mt if x[3] > 0]
            mn_bad = [x[0] for x in mn if x[3] > 0]
            why = ("trimming turns overflow into NACKs and resends; a QP without an RTT sample times its "
                   "tail-loss probe from the fabric's RTT, and NSCC's window goes below one MTU (paced) where "
                   "the fair share is below one MTU per RTT (docs/congestion-control.md), so the trimmed headers "
                   "the last hop drops are found without the ACK timeout; RoCE+PFC, lossless, is closer to line "
                   "rate (no resends); without trimming the losses are recovered by RACK and the tail-loss probe" +
                   (f", and from {min(mn_bad)} senders some only by the ACK timeout" if mn_bad else "") +
                   f" (goodput without trimming {min(x[1] for x in mn):.2f}-{max(x[1] for x in mn):.2f}"
                   " of line rate)")
            if bad_n:
                why = (f"holds up to {max(ok_n) if ok_n else 0} senders; at {', '.join(map(str, bad_n))} senders "
                       "some trimmed headers wait for the ACK timeout. " + why)
            elif top[4] > fair_limit:
                why = (f"no ACK timeout at any fan-in, but at {top[0]} senders the last flow ends at "
                       f"{top[4]:.3f} of its fair share, past the {fair_limit} this study asks of the largest "
                       "fan-in. " + why)
            rep.claims.append(("Incast without timeouts (trimming)", meas, "holds" if holds else "partly", why))


def iteration_metrics(run, tname):
    """Per-iteration analysis of a training run (definitions in the report)."""
    t = run.t[tname]
    its = t.get("iterations", [])
    faults = run.fault_us()
    tf = min(faults) if faults else None
    done = [i for i in its if i["time_us"] is not None]
    pre = [i["time_us"] for i in done if tf is not None and i["start_us"] + i["time_us"] <= tf]
    base = statistics.median(pre) if pre else (statistics.median([i["time_us"] for i in done]) if done else None)
    post = [i for i in done if tf is not None and i["start_us"] + i["time_us"] > tf]
    lost = sum(i["time_us"] - base for i in post) if base else None
    worst = max((i["time_us"] for i in post), default=None)
    slow = [i for i in post if i["time_us"] > 1.05 * base]
    restore = None
    status = ""
    if t.get("job_aborted"):
        status = "job aborted"
    elif len(done) < len(its):
        status = "not finished at run.until"
    if slow and not status:
        last = slow[-1]
        after = [i for i in post if i["index"] > last["index"]]
        if after:
            restore = last["start_us"] + last["time_us"] - tf
        else:
            status = "not restored by the last iteration"
    elif not slow and not status:
        restore = 0.0
    # EV detection: first ASSUMED_BAD after the fault.
    det = None
    if tname.startswith("mrc") and tf is not None:
        evs = [e for e in run.ev_events() if e["transport"] == tname and e.get("to") == "assumed_bad"
               and e["time_ns"] / 1e3 >= tf]
        if evs:
            det = min(e["time_ns"] for e in evs) / 1e3 - tf
    return dict(base=base, worst=worst, lost=lost, restore=restore, status=status, det=det,
                done=len(done), n=len(its), qp=t["counters"]["qp_errors"], tf=tf,
                retx=t["counters"]["retransmits"], timeouts=t["counters"]["timeouts"],
                evchg=t["counters"]["ev_state_changes"])


def row_share(row, n):
    """Share of a two-level AllReduce's bytes sent in its row stages: 2(r-1)/r x S per rank
    there, 2(n/r-1)/n x S in the column stage."""
    rows_b, col_b = (row - 1) / row, (n // row - 1) / n
    return rows_b / (rows_b + col_b)


def exp5(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## 5. Training through failures")
    rep.w()
    algos = {(r.cfg["workload"].get("algorithm", "ring"), r.cfg["workload"].get("row", 0),
              len(r.cfg["workload"].get("group", [])) or r.cfg["topo"]["hosts"]) for r in runs}
    how = []
    for algo, row, n in sorted(algos):
        if algo == "ring2d":
            how.append(f"at {n:,} GPUs the two-level ring AllReduce (`workload.algorithm = \"ring2d\"`, "
                       f"`row = {row}`): reduce-scatter in rows of {row} consecutive ranks, AllReduce of "
                       f"the shard in each column, all-gather in the rows; with the leaf-strided order every "
                       f"row hop crosses the spine layer (the row stages carry {row_share(row, n):.0%} of "
                       f"the bytes) "
                       f"and each column is one leaf")
        else:
            how.append(f"at {n:,} GPUs a flat ring AllReduce over every GPU, in which every hop "
                       "crosses the spine layer")
    rep.w("A training loop: each iteration = compute, then an AllReduce over every GPU in a leaf-strided "
          "rank order (`workload.group`: consecutive ranks on different leaves); "
          + "; ".join(how or ["a ring AllReduce over every GPU"]) + ". Definitions, per transport:")
    rep.w()
    rep.w("- **base**: median iteration time of the iterations that end before the (first) fault.")
    rep.w("- **worst**: the longest iteration that ends after the fault.")
    rep.w("- **lost**: sum over iterations ending after the fault of (iteration time - base): the job time "
          "the fault cost (microsecond resolution, unlike the restore time).")
    rep.w("- **restore**: time from the fault to the end of the last iteration slower than 1.05 x base, "
          "provided a later iteration is back within 5% (0 = no iteration slowed by more than 5%; "
          "iteration resolution).")
    rep.w("- **detect**: MRC only, time from the fault to the first EV marked ASSUMED_BAD (`ev_events.jsonl`).")
    rep.w()
    rep.w("MRC runs use SRv6 source routes (the fabric never reroutes); RoCEv2 runs (ECMP, go-back-N, DCQCN, "
          "PFC) remove dead next hops after the routing convergence delay (`transport.routing_convergence`: "
          "50 ms in the scenario files, 1 s in the `-roce-1s` runs). A blackhole keeps links up, so ECMP "
          "never converges away from it. Retry budget for every QP: 7 retries at the ACK timeout "
          "(1.024 us x 2^12 = 4.2 ms) then 7 with exponential backoff (~1.1 s in all) before a QP error.")
    rep.w()
    rows = []
    by_fault = {}
    for r in runs:
        fault = re.sub(r"^(e5-|smoke-train-)", "", r.id).replace("-roce-1s", "")
        for name, t in r.t.items():
            conv = r.cfg["transport"]["routing_convergence"]
            label = name if name.startswith("mrc") else f"{name} (convergence {conv})"
            m = iteration_metrics(r, name)
            by_fault.setdefault(fault, []).append((label, r, name, m))
            rows.append([FAULT_TITLES.get(fault, fault), label, f"{m['done']}/{m['n']}", f1(m["base"]), f1(m["worst"]),
                         f1(m["lost"]), (f1(m["restore"]) if m["restore"] is not None else "-") +
                         (f" ({m['status']})" if m["status"] else ""), f1(m["det"], 2), m["qp"], m["timeouts"],
                         m["retx"], r.source()])
    rep.table(["fault", "transport", "iterations done", "base us", "worst us", "lost us", "restore us",
               "detect us", "QP errors", "timeouts", "retx", "source"], rows)
    if by_fault:
        fig, axes = plt.subplots(1, len(by_fault), figsize=(4.2 * len(by_fault), 4), squeeze=False)
        for ax, (fault, entries) in zip(axes[0], by_fault.items()):
            for label, r, name, m in entries:
                its = [i for i in r.t[name]["iterations"] if i["time_us"] is not None]
                ls = ":" if "1s" in label else "-"
                ax.plot([i["index"] for i in its], [i["time_us"] / 1e3 for i in its], "o" + ls, ms=3,
                        color=COLORS.get(name), label=label)
            ax.set_yscale("log")
            ax.set_title(FAULT_TITLES.get(fault, fault) + f"\n{os.path.basename(entries[0][1].scen)} seed "
                         f"{entries[0][1].seed}", fontsize=8)
            ax.set_xlabel("iteration")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
        axes[0][0].set_ylabel("iteration time (ms, log)")
        fig.tight_layout()
        img = save(fig, docs, "e5-training-iterations.png")
        rep.w(f"![iteration times through faults]({img})")
        rep.w()
        rep.w("*Figure: per-iteration time through each fault, every transport; scenario and seed in each "
              "panel title, overrides in the table above.*")
        rep.w()
    mrc_ok = all(m["qp"] == 0 and not m["status"] for e in by_fault.values() for (l, r, n, m) in e if n == "mrc")
    mrc_lost = [m["lost"] for e in by_fault.values() for (l, r, n, m) in e if n == "mrc" and m["lost"] is not None]
    roce = [(f, l, m) for f, e in by_fault.items() for (l, r, n, m) in e if n.startswith("roce")]
    roce_worst = max((m["lost"] or 0) for _, _, m in roce) if roce else 0
    roce_abort = [f"{f} ({l})" for f, l, m in roce if m["status"]]
    dets = [m["det"] for e in by_fault.values() for (l, r, n, m) in e if n == "mrc" and m["det"] is not None]
    rep.claims.append((
        "Training jobs ride out link failures and the reboot of four tier-1 switches without interruption",
        f"MRC: every fault, all iterations done, 0 QP errors: {'yes' if mrc_ok else 'no'}; job time lost "
        f"{min(mrc_lost):,.0f}-{max(mrc_lost):,.0f} us per fault. RoCEv2+PFC: up to {roce_worst / 1e3:,.1f} ms lost"
        + (f"; aborted/unfinished: {', '.join(roce_abort)}" if roce_abort else ""),
        "holds" if mrc_ok else "does not hold", "see experiment 5 for each fault"))
    if dets:
        rep.claims.append((
            "Failures routed around in microseconds instead of seconds",
            f"MRC marks a path through the fault bad {min(dets):.1f}-{max(dets):.1f} us after the fault; "
            f"the affected iteration is {min(mrc_lost):,.0f}-{max(mrc_lost):,.0f} us longer; RoCEv2 waits for "
            "ACK timeouts (ms) and routing convergence (50 ms - 1 s)",
            "holds for detection and rerouting", "microseconds depend on traffic being in flight on the bad "
            "path (RACK-style detection); a tail loss with no later packet waits for the tail-loss probe (a "
            "few RTTs), an idle path for the next packet sent on it or a probe (experiment 6)"))


def exp6(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## 6. Failover sensitivity (MRC)")
    rep.w()
    rep.w("The experiment 5 training loop with MRC only; one parameter changed at a time (`--set`). "
          "ACK timeout and EV count with the blackholed spine (c), probe interval with the flapping link "
          "(e), where paths come back and probes decide how soon they are used again. Metrics as in "
          "experiment 5.")
    rep.w()
    rows = []
    groups = {}
    for r in runs:
        param = r.id.split("-")[1]
        val = r.id.split("-", 2)[2]
        m = iteration_metrics(r, "mrc")
        groups.setdefault(param, []).append((val, m, r))
        rows.append([param, val, f1(m["base"]), f1(m["worst"]), f1(m["lost"]),
                     (f1(m["restore"]) if m["restore"] is not None else "-") + (f" ({m['status']})" if m["status"] else ""),
                     f1(m["det"], 2), m["qp"], m["timeouts"], m["retx"], m["evchg"], r.source()])
    rep.table(["parameter", "value", "base us", "worst us", "lost us", "restore us", "detect us", "QP errors",
               "timeouts", "retx", "EV changes", "source"], rows)
    if groups:
        fig, axes = plt.subplots(1, len(groups), figsize=(4.3 * len(groups), 3.8), squeeze=False)
        names = {"timeout": "ACK timeout exponent (1.024 us x 2^k)", "probe": "probe interval",
                 "evs": "EVs per plane"}
        for ax, (param, pts) in zip(axes[0], groups.items()):
            xs = list(range(len(pts)))
            ax.bar(xs, [max(0.0, m["lost"] or 0) for _, m, _ in pts], color="#1f77b4")
            ax.set_xticks(xs)
            ax.set_xticklabels([v for v, _, _ in pts])
            ax.set_xlabel(names.get(param, param))
            ax.set_ylabel("job time lost (us)")
            ax.set_title(f"{os.path.basename(pts[0][2].scen)} seed {pts[0][2].seed}", fontsize=8)
            ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        img = save(fig, docs, "e6-sensitivity.png")
        rep.w(f"![failover sensitivity]({img})")
        rep.w()


def exp8(a, rep, runs):
    rep.runs = runs
    rep.w("## 8. Small messages through a failure (MRC)")
    rep.w()
    rep.w("An all-to-all whose flows are one packet (2 KiB) or eight (32 KiB), with a leaf-spine link "
          "down 10 us into the run, against the same run without the fault. A QP that has sent one "
          "packet has no RTT sample of its own; its tail-loss probe takes the engine's shared RTT or "
          "the fabric's base RTT (`pto borrowed`), so a packet lost on the dead link is resent after "
          "a few RTTs, not at the ACK timeout (paper 2.1: failures bypassed in a few tens of "
          "microseconds). Target: max FCT at most 2x the fault-free max, no ACK timeouts.")
    rep.w()
    rows = []
    pairs = {}
    for r in runs:
        key, kind = r.id.rsplit("-", 1)
        pairs.setdefault(key, {})[kind] = r
    worst = []
    for key, d in pairs.items():
        if "nofault" not in d or "linkdown" not in d:
            continue
        base = d["nofault"].t["mrc"]
        for kind in ("nofault", "linkdown"):
            t = d[kind].t["mrc"]
            c = t["counters"]
            ratio = t["fct_us"]["max"] / base["fct_us"]["max"]
            if kind == "linkdown":
                worst.append((key, ratio, c["timeouts"]))
            hosts = d[kind].cfg["topo"]["hosts"]
            flow = t["flows"]["bytes_delivered"] / max(1, t["flows"]["count"])
            rows.append([hosts, size_str(flow), kind, f1(t["fct_us"]["p50"]), f1(t["fct_us"]["p99"]),
                         f1(t["fct_us"]["max"]), f1(ratio, 2), c["timeouts"], c["fault_drops"],
                         c.get("pto_losses", "-"), c.get("pto_borrowed_rtt", "-"), d[kind].source()])
    rep.table(["GPUs", "flow", "run", "FCT p50 us", "FCT p99 us", "FCT max us", "max / fault-free max",
               "ACK timeouts", "fault drops", "PTO resends", "pto borrowed", "source"], rows)
    if worst:
        ok = all(r <= 2.0 and to == 0 for _, r, to in worst)
        no_timeouts = all(to == 0 for _, _, to in worst)
        meas = ", ".join(f"{k[3:]}: max {r:.2f}x fault-free, {to} ACK timeouts" for k, r, to in worst)
        verdict = "holds" if ok else ("partly" if no_timeouts else "no")
        rep.claims.append(("Small messages fail over in microseconds", meas, verdict,
                           "a QP without an RTT sample times its tail-loss probe from the fabric's RTT "
                           "(shared by the NIC's QPs), so no packet waits for the ACK timeout; at "
                           "1,024 GPUs the slowest flows, to or from the failed link's leaf, needed "
                           "2-3 resends each"))


def exp_ao(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## Adaptive vs oblivious spraying: a sweep, not a tuning")
    rep.w()
    rep.w("The ablation `mrc_oblivious` sprays round-robin and ignores ECN; `mrc` recycles an EV whose ACK "
          "echoes ECN for `transport.ecn_cooldown` (default base RTT / 16, 0.4 us here; with ECMP hashing "
          "at least one round-robin cycle of a port's active EVs, docs/engine.md \"Decisions\"). Same fabric, workload and seed "
          "(`scenarios/claims/adaptive-vs-oblivious.toml`: 128 GPUs, 4 planes, permutation of 4 MiB, no "
          "fault; `-linkdown` adds the README default's link failure); one knob changed per row.")
    rep.w()
    rows = []
    pts = []
    for r in runs:
        m, o = r.t["mrc"], r.t["mrc_oblivious"]
        rows.append([r.id[3:], f1(m["slowdown"]["p50"], 3), f1(m["slowdown"]["p99"], 3), f1(m["slowdown"]["max"], 3),
                     f1(o["slowdown"]["p50"], 3), f1(o["slowdown"]["p99"], 3), f1(o["slowdown"]["max"], 3),
                     m["counters"]["ecn_marks"], o["counters"]["ecn_marks"], m["counters"]["trims"],
                     o["counters"]["trims"], r.source()])
        pts.append((r.id[3:], m["slowdown"]["max"], o["slowdown"]["max"]))
    rep.table(["variant", "mrc p50", "mrc p99", "mrc max", "obl p50", "obl p99", "obl max", "mrc ECN marks",
               "obl ECN marks", "mrc trims", "obl trims", "source"], rows)
    if pts:
        fig, ax = plt.subplots(figsize=(9, 3.8))
        xs = range(len(pts))
        ax.bar([x - 0.2 for x in xs], [p[1] for p in pts], 0.4, color=COLORS["mrc"], label="mrc (adaptive)")
        ax.bar([x + 0.2 for x in xs], [p[2] for p in pts], 0.4, color=COLORS["mrc_oblivious"], label="mrc_oblivious")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([p[0] for p in pts], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("worst flow slowdown (FCT / ideal)")
        ax.set_ylim(1.0, max(max(p[1], p[2]) for p in pts) * 1.05)
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_title(f"adaptive vs oblivious, adaptive-vs-oblivious.toml seed {runs[0].seed} (--set per variant)",
                     fontsize=9)
        img = save(fig, docs, "ao-sweep.png")
        rep.w(f"![adaptive vs oblivious]({img})")
        rep.w()
        d = {p[0]: p for p in pts}
        nf = [d[k] for k in ("default", "seed2", "seed3") if k in d]
        lf = [d[k] for k in ("linkdown", "linkdown-seed2", "linkdown-seed3") if k in d]
        win = lambda L: sum(1 for p in L if p[1] < p[2])  # noqa
        fmt = lambda L: ", ".join(f"{p[1]:.2f} vs {p[2]:.2f}" for p in L)  # noqa
        rep.claims.append((
            "ECN-adaptive spraying beats oblivious spraying",
            f"default settings, worst-flow slowdown adaptive vs oblivious over seeds 1-3: no fault "
            f"{fmt(nf)} (adaptive better in {win(nf)}/{len(nf)}); with the link failure {fmt(lf)} "
            f"(better in {win(lf)}/{len(lf)}); ECN cooldowns of 4 us and more (10x the default base RTT / 16) make adaptive worse",
            ("holds without faults (small margin)" if win(nf) == len(nf) else
             f"mixed without faults ({win(nf)}/{len(nf)} seeds)") +
            ("" if win(lf) == len(lf) else
             f"; with the link failure on {win(lf)} of {len(lf)} seeds (mixed across seeds)"),
            "the worst flow under a failure is set by loss recovery of the packets lost on the dead link, "
            "not by load balance; longer EV cooldowns shrink the EV set (analysis below)"))


def uplink_spread(run, tname):
    """Busiest leaf->spine uplink over the mean of all uplinks (bytes over the run, from links.csv),
    or None without link samples."""
    p = os.path.join(run.dir, "links.csv")
    if not os.path.exists(p):
        return None
    end_us = run.t[tname]["makespan_ps"] / 1e6
    topo = run.cfg["topo"]
    hpl = topo["hosts_per_leaf"] or topo["radix"] // 2
    n_up = topo["planes"] * run.t[tname]["fabric"]["leaves_per_plane"] * (topo["radix"] - hpl)
    load = defaultdict(float)
    with open(p) as f:
        for row in csv.DictReader(f):
            if row["transport"] == tname and "->spine" in row["link"] and float(row["time_ns"]) / 1e3 <= end_us:
                load[row["link"]] += float(row["utilization"])
    if not load:
        return None
    return max(load.values()) / (sum(load.values()) / n_up)


def exp_evsets(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## The EV set at small scale: random subsets and backups")
    rep.w()
    rep.w("Production QPs take ~32 EVs per plane out of 256 spines, chosen at random and without coordination, "
          "plus a backup set (paper 2.1, 2.4): the aggregate \"may be slightly uneven\" and ECN steering smooths "
          "it. The fabrics of the other sections have at most as many spines as a QP has EVs per plane, so each "
          "QP names every spine once and balance holds by construction. Here the adaptive-vs-oblivious "
          "permutation (128 GPUs, 4 planes) runs on 16 spines per plane (radix 32) with 16 EVs per plane (every "
          "spine, the default), and with 4 active and 4 backup EVs per plane spread evenly or drawn at random "
          "(`transport.ev_choice`), and at random without backups (no replacement). Uplink spread: the busiest "
          "leaf-to-spine uplink's bytes over the mean uplink's.")
    rep.w()
    rows = []
    d = {}
    for r in runs:
        name = r.id[len("evset-"):]
        m, o = r.t["mrc"], r.t["mrc_oblivious"]
        um, uo = uplink_spread(r, "mrc"), uplink_spread(r, "mrc_oblivious")
        d[name] = (m, o, um, uo)
        rows.append([name, f1(m["slowdown"]["p99"], 3), f1(m["slowdown"]["max"], 3), f1(o["slowdown"]["p99"], 3),
                     f1(o["slowdown"]["max"], 3), f1(um, 2), f1(uo, 2), m["counters"]["ecn_marks"],
                     o["counters"]["ecn_marks"], m["counters"]["ev_ecn_swaps"], r.source()])
    rep.table(["EV set", "mrc p99", "mrc max", "obl p99", "obl max", "mrc uplink spread", "obl uplink spread",
               "mrc ECN marks", "obl ECN marks", "mrc ECN swaps", "source"], rows)
    if {"spread-16", "random-4-backup-4", "random-4-no-backup"} <= set(d):
        full, rnd, nob = d["spread-16"], d["random-4-backup-4"], d["random-4-no-backup"]
        smooths = rnd[0]["slowdown"]["p99"] < rnd[1]["slowdown"]["p99"]
        swaps_help = rnd[0]["slowdown"]["p99"] < nob[0]["slowdown"]["p99"]
        uneven = (rnd[3] or 0) > (full[3] or 0)
        spr = d.get("spread-4-backup-4")
        if spr:
            rep.w(f"Spreading 4 EVs evenly over a plane does not make the aggregate even either (oblivious: busiest "
                  f"uplink {f1(spr[3], 2)}x the mean): each pair's rotation is random, so only a set that names "
                  "every spine is balanced by construction.")
            rep.w()
        rep.w(f"With random subsets the uplinks are less even than with every spine in each QP's set (oblivious "
              f"spraying: busiest uplink {f1(rnd[3], 2)}x the mean against {f1(full[3], 2)}x), ECN steering "
              f"{'lowers' if smooths else 'does not lower'} the tail (p99 {f1(rnd[0]['slowdown']['p99'], 3)} "
              f"against {f1(rnd[1]['slowdown']['p99'], 3)} oblivious), and replacement with backups "
              f"({rnd[0]['counters']['ev_ecn_swaps']:,} ECN swaps) {'helps' if swaps_help else 'does not help'} "
              f"(p99 {f1(nob[0]['slowdown']['p99'], 3)} without backups). Four EVs per plane are also far fewer "
              f"than production's 32: each QP's packets leave over 4 uplinks instead of 16, so every variant with "
              f"4 is slower than the full set (p99 {f1(full[0]['slowdown']['p99'], 3)}) whatever the choice.")
        rep.w()
        rep.claims.append((
            "ECN steering smooths the unevenness of uncoordinated random EV subsets (paper 2.1)",
            f"4 random EVs + 4 backups per plane of 16 spines: uplink spread {f1(rnd[3], 2)}x oblivious "
            f"(every spine: {f1(full[3], 2)}x); p99 slowdown {f1(rnd[0]['slowdown']['p99'], 3)} adaptive, "
            f"{f1(rnd[1]['slowdown']['p99'], 3)} oblivious, {f1(nob[0]['slowdown']['p99'], 3)} without backups",
            "holds" if smooths and uneven else "does not hold",
            "" if smooths and uneven else "the random subsets are not less even, or ECN steering does not lower the tail"))


def exp_stev(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## Spraying on a hashed fabric (STEV)")
    rep.w()
    rep.w("MRC's EVs also work on a conventional ECMP fabric: each EV is hashed by the switches to "
          "one of their equal-cost next hops (paper 2.1, 2.3). A hashed EV set is uneven (64 random "
          "EVs over 32 uplinks load some uplinks 3-4 times more than others), so the ECN signal must "
          "steer: a marked EV is skipped for at least one round-robin cycle, and an EV marked "
          "`transport.ecn_swap_marks` (4) times in a row is replaced by a backup of its plane, which "
          "hashes elsewhere (docs/engine.md, \"ECN-driven replacement\"). A trim there is mostly an "
          "inner queue that colliding EVs overfilled, one path of the QP's many, which steering moves "
          "away from: a trimmed packet's resend keeps 0.8 of the window instead of halving it "
          "(`transport.trim_keep`, auto: 0.8 where the switches hash the EVs, 0.5 elsewhere; "
          "docs/congestion-control.md). Same fabric, workload and seed per row "
          "(`scenarios/claims/stev-permutation.toml`: benchmark A's fabric and permutation); "
          "`ecmp-noswap` turns the replacement off, `ecmp-halfcut` the softer trim cut, and "
          "`ecmp-before` is the EV set, cool-down and trim cut the engine used before (32 EVs, no "
          "backups, cool-down base RTT / 16, a trim halves the window).")
    rep.w()
    rows = []
    bars = []
    for r in runs:
        for name, t in r.t.items():
            label = f"{r.id[5:]} {name}"
            rows.append([r.id[5:], name, t.get("path_mode", "?"), f1(t["slowdown"]["p50"], 3),
                         f1(t["slowdown"]["p99"], 3), f1(t["slowdown"]["max"], 3), t["counters"]["trims"],
                         t["counters"]["ecn_marks"], t["counters"].get("ev_ecn_swaps", 0),
                         t["counters"]["retransmits"], r.source()])
            bars.append((label, t["slowdown"]["p99"], t["slowdown"]["max"], name))
    rep.table(["run", "transport", "paths", "p50", "p99", "max", "trims", "ECN marks", "ECN swaps",
               "retx", "source"], rows)
    if bars:
        fig, ax = plt.subplots(figsize=(9, 3.8))
        xs = range(len(bars))
        ax.bar([x - 0.2 for x in xs], [b[1] for b in bars], 0.4, color="#9ecae1", label="p99")
        ax.bar([x + 0.2 for x in xs], [b[2] for b in bars], 0.4,
               color=[COLORS.get(b[3], "#555555") for b in bars], label="max")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([b[0] for b in bars], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("FCT / ideal")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_title(f"STEV vs source routing vs single-path ECMP, stev-permutation.toml seed {runs[0].seed}",
                     fontsize=9)
        img = save(fig, docs, "stev.png")
        rep.w(f"![stev]({img})")
        rep.w()
    d = {(r.id[5:], n): t for r in runs for n, t in r.t.items()}
    m, b, s6 = d.get(("ecmp", "mrc")), d.get(("ecmp-before", "mrc")), d.get(("srv6", "mrc"))
    if m and b and s6:
        ok = m["slowdown"]["max"] <= 1.3 and m["slowdown"]["p99"] <= 1.2
        rep.claims.append((
            "MRC's adaptive spraying balances a hashed (ECMP) fabric",
            f"STEV p99/max {m['slowdown']['p99']:.2f}/{m['slowdown']['max']:.2f} x ideal "
            f"(before ECN-driven replacement and the softer trim cut: {b['slowdown']['p99']:.2f}/{b['slowdown']['max']:.2f}; "
            f"source-routed {s6['slowdown']['p99']:.2f}/{s6['slowdown']['max']:.2f})",
            "holds" if ok else "not within p99 <= 1.2, max <= 1.3",
            "hashing leaves a residual imbalance that steering and a softer trim cut reduce but source "
            "routing avoids; most of the gain is the trim cut (rows `ecmp-noswap`, `ecmp-halfcut`)"))


def exp7(a, rep, runs, docs):
    rep.runs = runs
    rep.w("## 7. Scale: the full 131,072-GPU, 8-plane fabric")
    rep.w()
    if not runs:
        rep.w("Full mode only (~10 min and ~13 GB per transport run): `scripts/report.sh` without `--quick`.")
        rep.w()
        return
    for r in runs:
        rows = []
        for name, t in r.t.items():
            rows.append([name, f"{t['flows']['completed']}/{t['flows']['count']}", f1(t["fct_us"]["p50"]),
                         f1(t["fct_us"]["max"]), f1(t["slowdown"]["max"], 2), t["counters"]["qp_errors"],
                         t["counters"]["trims"], t["counters"]["retransmits"], f1(r.s["run"]["wall_seconds"]),
                         f1(r.s["run"]["peak_rss_bytes"] / 2**20, 0)])
        rep.w(f"Source: {r.source()}.")
        rep.w()
        rep.table(["transport", "done", "FCT p50 us", "max us", "max slowdown", "QP errors", "trims", "retx",
                   "wall s", "peak RSS MiB"], rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["quick", "full", "smoke"], default="quick")
    ap.add_argument("--bin", default=os.path.join(REPO, "build/bin"))
    ap.add_argument("--runs", default=None)
    ap.add_argument("--docs", default=os.path.join(REPO, "docs"))
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    a.runs = os.path.abspath(a.runs or os.path.join(REPO, "out", "claims", a.mode))
    t0 = time.time()
    runs_plan = plan(a.mode)
    log = run_all(runs_plan, a)
    docs = os.path.abspath(a.docs)
    res_dir = os.path.join(docs, "results")
    if os.path.isdir(res_dir):
        for f in os.listdir(res_dir):
            if f.endswith(".png"):
                os.remove(os.path.join(res_dir, f))
    os.makedirs(res_dir, exist_ok=True)
    runs = [Run(rid, scen, sets, a.runs) for rid, scen, sets in runs_plan]
    by = lambda p: [r for r in runs if r.id.startswith(p)]  # noqa
    rep = Report()
    body = Report()
    body.claims = rep.claims
    if a.mode != "smoke":
        exp1(a, body, by("e1-") + by("e2-perm-1024"))
    exp2(a, body, by("e2-") + by("smoke-perm"), docs)
    exp3(a, body, by("e3-"), docs)
    exp4(a, body, by("e4-"), docs)
    exp5(a, body, by("e5-") + by("smoke-train"), docs)
    exp6(a, body, by("e6-"), docs)
    if by("ao-"):
        exp_ao(a, body, by("ao-"), docs)
        with open(os.path.join(REPO, "scripts", "report-analysis.md")) as f:
            body.w(f.read())
    if by("evset-"):
        exp_evsets(a, body, by("evset-"), docs)
    if by("stev-"):
        exp_stev(a, body, by("stev-"), docs)
    exp7(a, body, by("e7-"), docs)
    if by("e8-"):
        exp8(a, body, by("e8-"))

    version = runs[0].s.get("version", "?") if runs else "?"
    # mrc-sim's version string ends in `git describe` when the binary was built (reused runs
    # keep the version they were made with): the page names the release only, the run
    # directories' summary.json keep the whole string.
    version = re.sub(r" \([^)]*\)$", "", version)
    sim_wall = sum(r.s["run"]["wall_seconds"] for r in runs)
    rep.w("# MRC claims, measured")
    rep.w()
    # The smoke mode's two tiny runs check the pipeline; they skip the fingerprint's ~20 s.
    rep.w(provenance_stamp("claims", [r.s.get("version", "") for r in runs],
                           None if a.mode == "smoke" else os.path.join(a.bin, "mrc-sim")))
    rep.w()
    rep.w(f"**Mode: {a.mode}.** Generated by `scripts/report.sh{'' if a.mode == 'full' else ' --' + a.mode}` "
          f"with `{version}`; {len(runs_plan)} simulator runs, {sim_wall / 60:.1f} min of simulator wall time "
          f"(sum of `run.wall_seconds`) on {machine_description()}. Every run is deterministic (fixed seeds, same seed for every transport of a run): "
          "re-running gives the same numbers. Every table and figure names its scenario "
          "(`scenarios/claims/*.toml`), the `--set` overrides and the seed; run directories are under "
          f"`out/claims/{a.mode}/<run id>/`.")
    rep.w()
    if a.mode == "quick":
        rep.w("Quick mode runs smaller scales than the full study (full mode: `scripts/report.sh`): "
              "permutation at 1,024 GPUs (full: also 8,192 GPUs), all-to-all at 128 GPUs with 2 MiB "
              "(full: MRC at 1,024 and 2,048 GPUs and RoCEv2 with PFC at 1,024 GPUs with 16 MiB, all transports at 128 GPUs with 8 MiB), AllReduce at 64 GPUs up to 256 MiB (full: 1,024 GPUs up to 256 MiB and 64 GPUs up to 1 GiB; 1 GiB at "
              "1,024 ranks is 2 TiB of simulated traffic, beyond the 2 h budget), incast up to 255 senders, "
              "training and sensitivity at 64 GPUs with a flat ring AllReduce (full: 1,024 GPUs with the "
              "two-level ring, rows of 32), no 131,072-GPU run.")
        rep.w()
    elif a.mode == "full":
        by_id = {r.id: r for r in runs}

        def qp_run(rid, name):
            """`N QPs (B bytes per QP, G GB peak RSS)` of one transport of a run, read from it."""
            r = by_id.get(rid)
            qm = r.t.get(name, {}).get("qp_memory", {}) if r else {}
            if not qm.get("qps"):
                return None
            return (f"{qm['qps']:,} QPs ({qm['bytes_per_qp']:,.0f} bytes per QP, "
                    f"{r.s['run']['peak_rss_bytes'] / 1e9:.1f} GB peak RSS)")

        m1024, m2048, r1024 = (qp_run("e2-a2a-1024", "mrc"), qp_run("e2-a2a-2048", "mrc"),
                               qp_run("e2-a2a-1024-roce", "roce_pfc"))
        mrc_text = " and ".join(x for x in [m1024 and f"at 1,024 ranks on {m1024}",
                                            m2048 and f"at 2,048 ranks (the largest two-tier fabric of "
                                                      f"radix 64) on {m2048}"] if x)
        roce_text = (f"RoCEv2 with PFC runs it at 1,024 ranks on {r1024}. " if r1024 else "")
        rep.w("Where full mode departs from the study's target scales, and why: every rank pair of an "
              f"all-to-all is a QP pair. MRC runs it (16 MiB per rank, 4 EVs per plane) {mrc_text}: "
              "`qp_memory` bytes per QP (`Engine::qp_memory`, the mean over requesters and responders; "
              "docs/performance.md, \"Bytes per QP\"), peak RSS of the whole run with the simulator's "
              f"per-flow state. {roce_text}RoCEv2 needs one QP per plane per pair, 8x MRC's QPs"
              f"{': ' + body.roce_a2a_stop if body.roce_a2a_stop else ''} (section 2, \"All-to-all at "
              "scale\"). All four transports run the all-to-all at 128 GPUs (8 MiB per rank). 8,192 ranks "
              "are 67 M MRC QPs, beyond one machine (docs/performance.md, \"2,048 and 8,192 GPUs\", "
              "predicts what they need). AllReduce at 1,024 GPUs goes up to 256 MiB; "
              "1 GiB at 1,024 ranks is 2 TiB of simulated traffic, 4x the 256 MiB run (see its wall time in the "
              "run table), beyond the 2 h budget, so 1 GiB runs at 64 GPUs instead. The training loop "
              "(experiments 5 and 6) at 1,024 GPUs runs the two-level ring AllReduce "
              "(`workload.algorithm = \"ring2d\"`, rows of 32 ranks), as large jobs do: a flat ring over 1,024 "
              "ranks is 2 x 1,023 chained steps and ~2 M flows per iteration (~90 s of simulation each), "
              "hours for the 23 runs; experiment 3 measures the flat ring.")
        rep.w()
    rep.w("## The claims")
    rep.w()
    rep.runs = body.runs = None  # the claims and the run list cover every run
    rep.table(["claim", "our measurement", "holds?", "why / caveat"],
              [[c, m, v, w] for c, m, v, w in rep.claims])
    rep.lines += body.lines
    rep.w("## Runs")
    rep.w()
    rep.table(["run", "scenario", "simulator wall s", "seed"],
              [[rid, f"`{r.scen}`", f"{r.s['run']['wall_seconds']:.1f}", r.seed]
               for (rid, dt, st), r in zip(log, runs)])
    # The paper's experiments (scripts/report.sh paper) keep their section at the end of the file.
    path = os.path.join(docs, "results.md")
    paper = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if PAPER_BEGIN in old:
            paper = "\n" + old[old.index(PAPER_BEGIN):].rstrip() + "\n"
    with open(path, "w") as f:
        f.write("\n".join(rep.lines).rstrip() + "\n" + paper)
    print(f"report.py: wrote {os.path.join(docs, 'results.md')} ({time.time() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
