#!/usr/bin/env bash
# The Linux driver against the path's limit and against TCP/MPTCP, on one namespace fabric
# (root; docs/performance.md, "Linux driver"). 4 hosts, 2 planes, 2 leaves and 2 spines per
# plane; h0 (leaf 0) sends to h2 (leaf 1) over both planes:
#   1. mrc-perf (SRV6 mode, 64 KiB WRITEs, MTU 4096) goodput;
#   2. a raw UDP sendmmsg blast (mrc-perf --raw-udp, in the same invocation, before and after
#      MRC) with MRC's datagram size over the same planes and SRv6 paths -> ratio_vs_udp = MRC
#      goodput / the mean of the two blasts' UDP received (median of 3 rounds);
#   3. iperf3 TCP (plain ECMP address, one plane) and MPTCP (mptcpize, a subflow per plane);
#   CPU cycles per payload byte of each (user+system time of both ends x the CPU clock);
#   0. the platform's own freezes: oslat (rt-tests) spins on the transfer's CPUs and reports the
#      longest time it was not running, the floor under any stall measured here;
#   4. the same silent cut (blackhole of a whole plane-0 spine, the one MPTCP's plane-0
#      subflow hashes onto) during a transfer: the stall of each, the longest gap that ends
#      after the cut and began within 1 s of it -- MRC's between completions (mrc-perf),
#      MPTCP's between reads that returned data (tools/mrc-tcp-stall.cc, under mptcpize).
#   5. authenticated packets (mrc-perf --psk --packet-auth; docs/linux-driver.md): MRC's
#      goodput with a tag on every datagram, and with encryption, against MRC without, rounds
#      interleaved -> auth_ratio, encrypt_ratio (medians of the rounds' ratios);
#   6. the same MRC/UDP ratio and MRC cut on a hashed-ECMP fabric (mrc-fabric --dataplane
#      ecmp: no source routing, mrc-perf in UDP EV mode, the EV in the UDP source port).
# Sections 0-5 run on the data plane MRC_BENCH_DATAPLANE names (default auto: the kernel's
# SRv6 if it has seg6local, else the eBPF uN program); the first line says which.
# The last line is: ratio_vs_udp=<r> mrc_stall_ms=<ms> mptcp_stall_ms=<ms> dataplane=<d>
#   auth_ratio=<r> encrypt_ratio=<r> ecmp_ratio_vs_udp=<r> ecmp_mrc_stall_ms=<ms>
#   scripts/bench-net.sh [SECONDS]     seconds per throughput run (default 5)
#   MRC_BENCH_DATAPLANE=bpf scripts/bench-net.sh     the fabric's data plane (kernel, bpf)
#   MRC_BIN_DIR=build-x/bin scripts/bench-net.sh     binaries from another build tree
#   MRC_BENCH_ROUNDS=5 scripts/bench-net.sh          MRC/UDP rounds (median counts; default 3)
#   MRC_BENCH_CPUS=1,0 scripts/bench-net.sh          client,server CPUs (default 0,1; none)
#   MRC_BENCH_OSLAT_SECONDS=30 scripts/bench-net.sh  how long oslat looks for freezes (default 10)
# Everything run in the client host is pinned to one CPU and everything in the server host
# to another (taskset): the sender does the whole fabric's forwarding in its own softirq, and
# unpinned the blast sometimes got part of it done on the second CPU (7.3 or 11 Gb/s from one
# run to the next on a 2-vCPU guest), which made any ratio to it a coin toss. Pinned, the
# blast repeats within ~3%. docs/perf-log.md, "Linux driver: where the remaining stalls come from".
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${MRC_BENCH_ROUNDS:-3}
bin=${MRC_BIN_DIR:-build/bin}
export PATH="$PATH:/usr/sbin:/sbin"
for t in mrc-fabric mrc-perf mrc-tcp-stall; do
  [ -x "$bin/$t" ] || { echo "bench-net: $bin/$t is not built (scripts/setup.sh)" >&2; exit 2; }
done
for t in iperf3 mptcpize python3 oslat; do
  command -v "$t" >/dev/null || { echo "bench-net: $t is missing (scripts/setup.sh)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench-net: needs root (network namespaces)" >&2; exit 2; }

name=bnet$$
work=$(mktemp -d /tmp/bench-net.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  "$bin/mrc-fabric" down --kill --name "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fab() { "$bin/mrc-fabric" "$@" --name "$name"; }
cpus=${MRC_BENCH_CPUS:-0,1}
[ "$(nproc)" -ge 2 ] || cpus=none
in_host() {  # HOST CMD...: in the host's namespace, on its CPU
  local h=$1; shift
  if [ "$cpus" = none ]; then
    ip netns exec "$name-h$h" "$@"
  else
    local cpu=${cpus%,*}
    [ "$h" = "$server" ] && cpu=${cpus#*,}
    ip netns exec "$name-h$h" taskset -c "$cpu" "$@"
  fi
}
# Runs a command in a host under /usr/bin/time (user and system seconds into FILE.time).
timed() { local h=$1 file=$2; shift 2; in_host "$h" /usr/bin/time -f "%U %S" -o "$file.time" "$@"; }
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
# When a cut happens, on CLOCK_MONOTONIC (the clock of mrc-perf's and mrc-tcp-stall's JSON):
# bash's $EPOCHREALTIME, a builtin, taken just before the cut, plus CLOCK_MONOTONIC -
# CLOCK_REALTIME measured once here. Starting a process to read the clock right before a cut
# would take a core from the transfer for tens of milliseconds (and the python3 on PATH may be
# a pyenv shim that takes a second to start, which dated MPTCP's cut a second late).
mono_offset=$(python3 -c "import time; print(time.monotonic() - time.time())")
at_mono() { python3 -c "print(float('$1'.replace(',', '.')) + $mono_offset)"; }  # REALTIME
# FILE GAPS START COND DEFAULT: of the gaps [began_s, ms] the Python expression GAPS lists in
# FILE's JSON (j), with START its time zero on CLOCK_MONOTONIC, those for which COND holds (a
# Python expression of b and e, when the gap began and ended on CLOCK_MONOTONIC): the longest,
# in ms (DEFAULT if none).
longest_gap() {
  json "$1" "round(max([g[1] for g in $2 for b in [$3 + g[0]] for e in [b + g[1] / 1e3] if $4] + [$5]), 3)"
}
# A cut's stall: the longest gap that ends after the cut and began before one second after it
# (MPTCP's retransmission timeouts all fall within it; a longer MPTCP gap that begins in it
# counts whole). Later gaps are the platform's, as are those before the cut: both printed for
# comparison. The machine stops a busy loop for up to ~5-8 ms per 10 s (oslat, above), so
# counting the rest of a 10 s run after the cut would mostly measure that.
stall_cond() { echo "e > $1 and b < $1 + 1"; }  # AT (CLOCK_MONOTONIC)
cpu_s() { cat "${@/%/.time}" | awk '{s += $1 + $2} END {print s}'; }  # PREFIX...: summed
wait_for() {  # FILE TEXT: until FILE contains TEXT (10 s)
  for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "bench-net: timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}
mhz=$(awk -F: '/cpu MHz/ {print $2; exit}' /proc/cpuinfo | tr -d ' ')
cycles_per_byte() {  # CPU_SECONDS BYTES
  python3 -c "import sys; print(round(float(sys.argv[1]) * float(sys.argv[3]) * 1e6 / float(sys.argv[2]), 2))" "$1" "$2" "$mhz"
}

server=2 client=0
srv_p0=fcbb:bb00:4002:: srv_p1=fcbb:bb01:4002::
perf_args() { echo "--local fcbb:bb00:$(printf %x $((0x4000 + $1)))::,fcbb:bb01:$(printf %x $((0x4000 + $1))):: --spines 2 --leaf $(($1 / 2))"; }

dataplane_arg=${MRC_BENCH_DATAPLANE:-auto}
fab up --hosts 4 --planes 2 --leaves 2 --spines 2 --dataplane "$dataplane_arg" >/dev/null
dataplane=$(json "/run/mrc-fabric/$name/fabric.json" "j['dataplane']")
echo "fabric $name: 4 hosts, 2 planes x (2 leaves + 2 spines), data plane $dataplane ($dataplane_arg); h$client -> h$server; ${seconds}s per run; CPU ${mhz} MHz; client,server CPUs: ${cpus}; load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 0. the platform's freezes ----------------------------------------------------------------
# No stall measured here can be shorter than the longest time the machine stops running a
# process that wants to run. oslat (rt-tests) spins on the transfer's CPUs with nothing else
# running and reports the longest gap between two reads of the clock: on the 2-vCPU KVM guest of docs/performance.md 3-5 ms
# per 10 s on an idle machine, with no steal time accounted (docs/perf-log.md, "Linux driver: what the fault-free gaps are").
oslat_cpus=$cpus
[ "$cpus" = none ] && oslat_cpus=0-$(($(nproc) - 1))
oslat -c "$oslat_cpus" -C "${oslat_cpus%%[,-]*}" -D "${MRC_BENCH_OSLAT_SECONDS:-10}" -q \
  --json="$work/oslat.json" >/dev/null
platform_freeze=$(json "$work/oslat.json" "round(max(t['max'] for t in j['thread'].values()) / 1e3, 3)")
echo "platform: a busy loop on CPUs ${oslat_cpus} (oslat, ${MRC_BENCH_OSLAT_SECONDS:-10} s, idle fabric) stopped for up to $(json "$work/oslat.json" "' / '.join(str(round(t['max'] / 1e3, 3)) for t in j['thread'].values())") ms"

# ---- 1. and 2. MRC against raw UDP ------------------------------------------------------------
ev_args=()  # the EV mode of both ends (none: SRV6, mrc-perf's default)
server_args=()  # the server's own (--psk)
run_mrc() {  # LABEL PORT [CLIENT ARGS...]: client JSON in $work/LABEL.c.json
  local label=$1 port=$2; shift 2
  # shellcheck disable=SC2046
  timed $server "$work/$label.s" "$bin/mrc-perf" $(perf_args $server) "${ev_args[@]}" "${server_args[@]}" -p "$port" \
    --json "$work/$label.s.json" --accept-timeout-ms 30000 >"$work/$label.s.out" 2>&1 &
  pids+=($!)
  wait_for "$work/$label.s.out" "Waiting for client"
  # shellcheck disable=SC2046
  timed $client "$work/$label.c" "$bin/mrc-perf" $(perf_args $client) "${ev_args[@]}" -p "$port" -s 65536 -m 4096 \
    --json "$work/$label.c.json" "$@" $srv_p1 >"$work/$label.c.out" 2>&1 || {
    echo "bench-net: mrc-perf $label failed:" >&2; cat "$work/$label.c.out" "$work/$label.s.out" >&2; return 1; }
  wait "${pids[-1]}"
}
# Each round is one mrc-perf invocation: a raw UDP sendmmsg blast (--raw-udp: the same planes,
# SRv6 paths and datagram size as MRC) for half the time, MRC itself, the blast again for the
# other half; the ratio of MRC to the blasts' mean (a load that drifts over the round hits both
# sides alike). The median round counts (the machine is shared: load spikes hit single runs,
# not the path).
raw_seconds=$(awk -v s="$seconds" 'BEGIN {print s / 2}')
ratios=()
for round in $(seq "$rounds"); do
  run_mrc "mrc$round" $((18600 + round)) -D "$seconds" --raw-udp --raw-seconds "$raw_seconds"
  j=$work/mrc$round.c.json
  read -r r g u pkt cpb ucpb st ccpb scpb dpa ub ua < <(json "$j" "' '.join(str(x) for x in [round(j['ratio_vs_udp'], 3), round(j['results'][0]['goodput_gbps'], 3), round(j['raw_udp']['goodput_gbps'], 3), j['raw_udp']['datagram_bytes'], round(j['cpu']['client_cycles_per_byte'] + j['cpu']['server_cycles_per_byte'], 2), round(j['raw_udp']['client_cycles_per_byte'], 2), round(j['stall_ms'], 1), round(j['cpu']['client_cycles_per_byte'], 2), round(j['cpu']['server_cycles_per_byte'], 2), round(j['server_counters'].get('data_received', 0) / max(1, j['server_counters'].get('acks_sent', 0)), 1), round(j['raw_udp'].get('before_gbps', 0), 2), round(j['raw_udp'].get('after_gbps', 0), 2)])")
  echo "round $round: mrc ${g} Gb/s, raw udp ${u} Gb/s (${ub} before, ${ua} after; datagram ${pkt} B) -> ratio ${r}; stall ${st} ms; cycles/B mrc ${cpb} (client ${ccpb} + server ${scpb}), udp ${ucpb} (sender); server: ${dpa} data packets per ACK"
  ratios+=("$r $g $u $cpb $ucpb")
done
read -r ratio mrc_gbps udp_gbps mrc_cpb udp_cpb < <(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p")
echo "median: ratio_vs_udp ${ratio} (mrc ${mrc_gbps} Gb/s, raw udp ${udp_gbps} Gb/s)"

# ---- 3. TCP and MPTCP -----------------------------------------------------------------------
run_iperf() {  # LABEL PORT WRAPPER...: "Gb/s-received cycles/B" into $work/LABEL.result
  local label=$1 port=$2; shift 2
  timed $server "$work/$label.s" "$@" iperf3 -s -1 -p "$port" >"$work/$label.s.out" 2>&1 &
  pids+=($!)
  sleep 0.5
  timed $client "$work/$label.c" "$@" iperf3 -c $srv_p0 -p "$port" -t "$seconds" -J >"$work/$label.c.json"
  wait "${pids[-1]}"
  local gbps bytes
  gbps=$(json "$work/$label.c.json" "round(j['end']['sum_received']['bits_per_second'] / 1e9, 3)")
  bytes=$(json "$work/$label.c.json" "j['end']['sum_received']['bytes']")
  echo "$gbps $(cycles_per_byte "$(cpu_s "$work/$label.c" "$work/$label.s")" "$bytes")" >"$work/$label.result"
}
run_iperf tcp 5201 env
read -r tcp_gbps tcp_cpb <"$work/tcp.result"
echo "tcp:   ${tcp_gbps} Gb/s (one plane, ECMP)  cycles/B ${tcp_cpb}"
# MPTCP: the client adds a subflow from its plane-1 address, the server announces its own.
for h in $client $server; do
  in_host "$h" sysctl -qw net.mptcp.enabled=1
  in_host "$h" ip mptcp limits set subflows 2 add_addr_accepted 2
done
in_host $client ip mptcp endpoint add fcbb:bb01:4000:: dev p1 subflow
in_host $server ip mptcp endpoint add $srv_p1 dev p1 signal
run_iperf mptcp 5202 mptcpize run
read -r mptcp_gbps mptcp_cpb <"$work/mptcp.result"
echo "mptcp: ${mptcp_gbps} Gb/s (a subflow per plane)  cycles/B ${mptcp_cpb}"

# ---- 4. the same silent spine cut for MPTCP and MRC -----------------------------------------
spine_bytes() {  # plane-0 bytes leaf 0 has sent towards each spine: "S0 S1" (fast: sysfs)
  ip netns exec "$name-p0-l0" cat /sys/class/net/s0/statistics/tx_bytes \
    /sys/class/net/s1/statistics/tx_bytes | tr '\n' ' '
  echo
}
# MPTCP first: the spine its plane-0 subflow hashes onto is the one to cut.
in_host $server timeout 40 mptcpize run "$bin/mrc-tcp-stall" recv --port 5300 >"$work/cut_mptcp.r.out" 2>&1 &
pids+=($!)
wait_for "$work/cut_mptcp.r.out" listening
in_host $client timeout 40 mptcpize run "$bin/mrc-tcp-stall" send $srv_p0 --port 5300 -D 10 >"$work/cut_mptcp.s.out" 2>&1 &
pids+=($!)
sleep 2.5
read -r a0 a1 < <(spine_bytes)
sleep 0.5
read -r b0 b1 < <(spine_bytes)
cut=0
[ $((b1 - a1)) -gt $((b0 - a0)) ] && cut=1
echo "cut:   blackholing spine p0-s$cut (MPTCP's plane-0 subflow: $(((b0 - a0) >> 20)) / $(((b1 - a1) >> 20)) MiB in 0.5 s via s0 / s1)"
cut_real=$EPOCHREALTIME  # just before the cut: gaps that end after it include the cut's
fab blackhole "p0-s$cut" >/dev/null
wait "${pids[-1]}"
wait "${pids[-2]}"
fab blackhole "p0-s$cut" --off >/dev/null
cut_at=$(at_mono "$cut_real")
tail -1 "$work/cut_mptcp.r.out" >"$work/cut_mptcp.json"
# The stall caused by the cut (stall_cond); the gaps before it and well after it are the
# machine's, printed for comparison.
mptcp_gaps=("$work/cut_mptcp.json" "j['gaps']" "j['first_byte_monotonic_s']")
mptcp_stall=$(longest_gap "${mptcp_gaps[@]}" "$(stall_cond "$cut_at")" 0)
echo "mptcp: stall ${mptcp_stall} ms after the cut at $(json "$work/cut_mptcp.json" "round($cut_at - j['first_byte_monotonic_s'], 2)") s; longest gap (of 20 ms or more) before it $(longest_gap "${mptcp_gaps[@]}" "e <= $cut_at" 0) ms, from 1 s after it $(longest_gap "${mptcp_gaps[@]}" "b >= $cut_at + 1" 0) ms; $(json "$work/cut_mptcp.json" "round(j['gbps'], 3)") Gb/s over the run; gaps >= 100 ms [s, ms]: $(json "$work/cut_mptcp.json" "[[round(a, 2), round(b)] for a, b in j['gaps'] if b >= 100]")"

# MRC: the same cut 3 s into a 10 s transfer, every byte verified. Its stall, as MPTCP's
# (stall_cond), of the gaps between completions (mrc-perf lists every gap of 1 ms or more;
# none reads as 1 ms, an upper bound). Then a control: the same
# transfer and the same injection aimed at a link no transfer uses (idle host h1's plane-0
# port): the stall the injection itself causes (mrc-fabric and nft need ~20 ms of CPU on this
# 2-CPU machine; docs/perf-log.md, "Linux driver: an honest blast").
mrc_cut() {  # LABEL PORT TARGET: the cut's stall in ms; prints a line about it
  local label=$1 port=$2 target=$3
  # SCHED_IDLE: the injector runs in the time the transfer leaves idle (the server's core has
  # some), not in slices taken from it (4 s transfers, three each: a no-op injection's stall
  # 3.0 / 6.5 / 3.8 ms against 7.3 / 4.8 / 4.7 ms at normal priority).
  ( sleep 3.5; echo "$EPOCHREALTIME" >"$work/$label.at"
    chrt -i 0 "$bin/mrc-fabric" blackhole "$target" --name "$name" >/dev/null
    echo "$EPOCHREALTIME" >"$work/$label.done" ) &
  pids+=($!)
  run_mrc "$label" "$port" -D 10 --verify >&2
  fab blackhole "$target" --off >/dev/null
  local at ended stall took j=$work/$label.c.json r="j['results'][0]"
  at=$(at_mono "$(cat "$work/$label.at")")
  ended=$(at_mono "$(cat "$work/$label.done")")
  local gaps=("$j" "${r}['gaps_over_1ms']" "${r}['start_monotonic_s']")
  stall=$(longest_gap "${gaps[@]}" "$(stall_cond "$at")" 1.0)
  took=$(python3 -c "print(round(($ended - $at) * 1e3))")  # a starved injection misses the transfer
  echo "$stall"
  echo "mrc:   $target blackholed (injection took ${took} ms): stall ${stall} ms after it at $(json "$j" "round($at - ${r}['start_monotonic_s'], 2)") s; longest gap before it $(longest_gap "${gaps[@]}" "e <= $at" 0) ms, from 1 s after it $(longest_gap "${gaps[@]}" "b >= $at + 1" 0) ms; verify $(json "$j" "'ok' if j['ok'] and j['mismatches'] == 0 else 'FAILED'"), $(json "$j" "round(${r}['goodput_gbps'], 3)") Gb/s over the run, EV changes $(json "$j" "j['counters']['ev_state_changes']"), gaps >= 1 ms: $(json "$j" "len(${r}['gaps_over_1ms'])")" >&2
}
mrc_stall=$(mrc_cut cut_mrc 18599 "p0-s$cut")
mrc_control=$(mrc_cut cut_control 18598 h1-p0)
echo "mrc:   the cut's stall ${mrc_stall} ms; the same injection on an idle link ${mrc_control} ms"

echo "mrc_gbps=$mrc_gbps udp_gbps=$udp_gbps tcp_gbps=$tcp_gbps mptcp_gbps=$mptcp_gbps cycles_per_byte: mrc=$mrc_cpb udp=$udp_cpb tcp=$tcp_cpb mptcp=$mptcp_cpb platform_freeze_ms=$platform_freeze"

# ---- 5. authenticated packets: what the tag (and encryption) cost in goodput ------------------
psk=$work/psk
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$psk")
server_args=(--psk "$psk")
auth_rows=()
for round in $(seq "$rounds"); do
  g=()
  for mode in off auth encrypt; do
    run_mrc "auth_$mode$round" $((18620 + ${#auth_rows[@]} * 3 + ${#g[@]})) -D "$seconds" \
      --psk "$psk" --packet-auth "$mode"
    g+=("$(json "$work/auth_$mode$round.c.json" "round(j['results'][0]['goodput_gbps'], 3)")")
  done
  r=$(python3 -c "import sys; o, a, e = map(float, sys.argv[1:]); print(round(a / o, 3), round(e / o, 3))" "${g[@]}")
  echo "auth round $round: mrc ${g[0]} Gb/s, with packet auth ${g[1]}, encrypted ${g[2]} -> ratios $r"
  auth_rows+=("$r")
done
server_args=()
auth_ratio=$(printf '%s\n' "${auth_rows[@]}" | awk '{print $1}' | sort -n | sed -n "$(((rounds + 1) / 2))p")
encrypt_ratio=$(printf '%s\n' "${auth_rows[@]}" | awk '{print $2}' | sort -n | sed -n "$(((rounds + 1) / 2))p")
echo "auth median: packet auth / none ${auth_ratio}, encrypted / none ${encrypt_ratio}"

# ---- 6. hashed ECMP: no source routing, the EV in the UDP source port -----------------------
fab down --kill >/dev/null
fab up --hosts 4 --planes 2 --leaves 2 --spines 2 --dataplane ecmp >/dev/null
ev_args=(--ev-mode udp)
ecmp_ratios=()
for round in $(seq "$rounds"); do
  run_mrc "ecmp$round" $((18610 + round)) -D "$seconds" --raw-udp --raw-seconds "$raw_seconds"
  j=$work/ecmp$round.c.json
  read -r r g u < <(json "$j" "' '.join(str(x) for x in [round(j['ratio_vs_udp'], 3), round(j['results'][0]['goodput_gbps'], 3), round(j['raw_udp']['goodput_gbps'], 3)])")
  echo "ecmp round $round: mrc (udp mode) ${g} Gb/s, raw udp ${u} Gb/s -> ratio ${r}"
  ecmp_ratios+=("$r $g $u")
done
read -r ecmp_ratio ecmp_mrc_gbps ecmp_udp_gbps < <(printf '%s\n' "${ecmp_ratios[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p")
ecmp_stall=$(mrc_cut ecmp_cut 18609 "p0-s$cut")
echo "ecmp median: ratio_vs_udp ${ecmp_ratio} (mrc ${ecmp_mrc_gbps} Gb/s, raw udp ${ecmp_udp_gbps} Gb/s); the cut's stall ${ecmp_stall} ms"
echo "ratio_vs_udp=$ratio mrc_stall_ms=$mrc_stall mptcp_stall_ms=$mptcp_stall dataplane=$dataplane auth_ratio=$auth_ratio encrypt_ratio=$encrypt_ratio ecmp_ratio_vs_udp=$ecmp_ratio ecmp_mrc_stall_ms=$ecmp_stall"
