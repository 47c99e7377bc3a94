#!/usr/bin/env python3
"""Summarises an engine event log (JSON lines; docs/engine.md, "Event log"), as written by
`mrc-perf --qlog FILE`, the C API's MRC_SOFT_QLOG and `mrc-sim --qlog-hosts`.

  scripts/qlog-summary.py FILE [--qpn N] [--node N] [--timeline K]

Prints, per engine (node) and QP: the time span, packets sent by kind (and retransmissions),
packets received and those dropped with their verdicts, losses by cause and by path, ACK
timeouts, the congestion window's range and last value, and path events (state changes,
swaps) per path; with --timeline K, the first K records of the selection as they happened.
Exit status: 0, 2 for a file that cannot be read or a line that is not a JSON object.
"""
import argparse
import collections
import json
import signal
import sys


def die(message):
    print(f"qlog-summary: {message}", file=sys.stderr)
    sys.exit(2)


def load(path):
    records = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    die(f"{path}:{lineno}: not JSON ({e.msg})")
                if not isinstance(r, dict) or "event" not in r or "time_ps" not in r:
                    die(f"{path}:{lineno}: not an event log record")
                records.append(r)
    except OSError as e:
        die(f"{path}: {e.strerror}")
    return records


def fmt_us(ps):
    return f"{ps / 1e6:.3f} us"


def summarise(key, rs):
    node, qpn = key
    where = f"node {node} " if node is not None else ""
    span = (rs[0]["time_ps"], rs[-1]["time_ps"])
    print(f"{where}QP {qpn}: {len(rs)} records, {fmt_us(span[0])} .. {fmt_us(span[1])}")
    sent = collections.Counter()
    retx = 0
    received = collections.Counter()
    verdicts = collections.Counter()
    losses = collections.Counter()
    loss_paths = collections.Counter()
    timeouts = 0
    cwnds = []
    path_events = collections.defaultdict(list)
    for r in rs:
        e = r["event"]
        if e == "packet_sent":
            sent[r["packet"]] += 1
            retx += bool(r.get("retransmit"))
        elif e == "packet_received":
            received[r["packet"]] += 1
            if r.get("verdict") != "ok":
                verdicts[r.get("verdict")] += 1
        elif e == "packet_lost":
            losses[r["cause"]] += 1
            loss_paths[(r["port"], r["ev"])] += 1
        elif e == "timeout":
            timeouts += 1
        elif e == "cc_update":
            cwnds.append(r["cwnd"])
        elif e in ("path_state", "path_swap", "ack_path_change"):
            path_events[(r.get("port"), r.get("ev"))].append(r)
    if sent:
        print(f"  sent      {sum(sent.values())}: " +
              ", ".join(f"{k} {v}" for k, v in sorted(sent.items())) + f"; retransmissions {retx}")
    if received:
        print(f"  received  {sum(received.values())}: " +
              ", ".join(f"{k} {v}" for k, v in sorted(received.items())))
    if verdicts:
        print("  dropped   " + ", ".join(f"{k} {v}" for k, v in verdicts.most_common()))
    if losses:
        print(f"  lost      {sum(losses.values())}: " +
              ", ".join(f"{k} {v}" for k, v in losses.most_common()) + "; worst paths (port/ev): " +
              ", ".join(f"{p}/{ev} {n}" for (p, ev), n in loss_paths.most_common(5)))
    if timeouts:
        print(f"  timeouts  {timeouts}")
    if cwnds:
        print(f"  cwnd      {len(cwnds)} changes, min {min(cwnds)} max {max(cwnds)} last {cwnds[-1]} B")
    for (port, ev), evs in sorted(path_events.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
        steps = []
        for r in evs:
            if r["event"] == "path_state":
                steps.append(f"{fmt_us(r['time_ps'])} {r['from']}->{r['to']}")
            elif r["event"] == "path_swap":
                steps.append(f"{fmt_us(r['time_ps'])} swapped in for {r['replaced']}")
            else:
                steps.append(f"{fmt_us(r['time_ps'])} ack path (out {r['replaced']})")
        print(f"  path {port}/{ev}: " + "; ".join(steps[:6]) + (" ..." if len(steps) > 6 else ""))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--qpn", type=int, help="only this QP")
    ap.add_argument("--node", type=int, help="only this node (mrc-sim's host)")
    ap.add_argument("--timeline", type=int, default=0, metavar="K", help="print the first K records")
    a = ap.parse_args(argv)
    records = load(a.file)
    sel = [r for r in records
           if (a.qpn is None or r.get("qpn") == a.qpn) and (a.node is None or r.get("node") == a.node)]
    kinds = collections.Counter(r["event"] for r in sel)
    print(f"{a.file}: {len(sel)} of {len(records)} records: " +
          ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    groups = collections.defaultdict(list)
    for r in sel:
        groups[(r.get("node"), r.get("qpn"))].append(r)
    for key in sorted(groups, key=lambda k: (k[0] if k[0] is not None else -1, k[1])):
        summarise(key, groups[key])
    for r in sel[:a.timeline]:
        print(json.dumps(r, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output quietly
    sys.exit(main(sys.argv[1:]))
