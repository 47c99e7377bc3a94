#!/usr/bin/env bash
# MPI over libfabric providers: MRC's (`mrc`, build/lib/libmrc-fi.so) and libfabric's own
# (tcp;ofi_rxm, udp;ofi_rxd, tcp;ofi_rxm;ofi_mrail), through Open MPI's mtl ofi (root;
# docs/libfabric.md, "Numbers"). Two ranks of build/bin/mrc-mpi-perf, pinned to CPUs 0 and 1:
#   1. loopback: mrc-perf alone (4 MiB WRITEs, the reference MPI over MRC is held to), then
#      each provider: ping-pong latency at 8 B and stream bandwidth at 4 MiB;
#   2. a namespace fabric (mrc-fabric: 4 hosts, 2 planes, 2 leaves and 2 spines per plane,
#      data plane auto), rank 0 on h0 and rank 1 on h2: mrc-perf h0 -> h2 (reference), then
#      for each provider the same latency and bandwidth, an allreduce loop with the control
#      injections (the same faults aimed at h1's idle link: what injecting costs the machine),
#      and the same loop through faults: 2 s in, the plane-0 spine
#      leaf 0 sends the most to is blackholed (silently: the path the provider uses) until the
#      end; 5 s in, h0's plane-0 link goes down for 50 ms. Every allreduce result is checked.
#      Reported per fault: the slowest iteration that overlaps the second after it.
#      For mrc also the 8-B latency within a leaf (h0 -> h1), beside h0 -> h2's across the
#      spines (paper 5.2.1).
# libfabric's providers reach the fabric through bench/fi_netns_preload.c (the rank enters the
# host's namespace at its first libfabric call, after PMIx is up); MRC's through FI_MRC_FABRIC.
# ofi_mrail is named by its whole stack (Open MPI's provider_include matches the name exactly)
# and reported as unavailable when Open MPI cannot open it.
# The last line: mrc_lat_8B_us=... mrc_bw_4MiB_gbps=... mrc_vs_perf=... (loopback), and
# fabric_<provider>_{bw_gbps,median_ms,blackhole_ms,blackhole_control_ms,flap_ms,
# flap_control_ms}=... for each provider, fabric_mrc_lat_{same_leaf,cross_spine}_us=....
#   scripts/bench-fi.sh [SECONDS]           seconds of each allreduce loop on the fabric (8)
#   MRC_BENCH_FI_PROVIDERS="mrc tcp;ofi_rxm" scripts/bench-fi.sh   a subset
#   MRC_BIN_DIR=build-x/bin scripts/bench-fi.sh                    another build tree
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-8}
bin=${MRC_BIN_DIR:-build/bin}
lib=$(cd "$bin/../lib" && pwd)
providers=${MRC_BENCH_FI_PROVIDERS:-"mrc tcp;ofi_rxm udp;ofi_rxd tcp;ofi_rxm;ofi_mrail"}
export PATH="$PATH:/usr/sbin:/sbin"
for t in mrc-fabric mrc-perf mrc-mpi-perf; do
  [ -x "$bin/$t" ] || { echo "bench-fi: $bin/$t is not built (scripts/setup.sh)" >&2; exit 2; }
done
for f in libmrc-fi.so libmrc-fi-netns.so; do
  [ -e "$lib/$f" ] || { echo "bench-fi: $lib/$f is not built (scripts/setup.sh)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "bench-fi: mpirun is missing (scripts/setup.sh)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench-fi: needs root (network namespaces)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "bench-fi: needs 2 CPUs" >&2; exit 2; }
export FI_PROVIDER_PATH=$lib

name=bfi$$
work=$(mktemp -d /tmp/bench-fi.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  "$bin/mrc-fabric" down --kill --name "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fab() { "$bin/mrc-fabric" "$@" --name "$name"; }
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" "$1" | tail -1; }  # FILE KEY: KEY=value's value
# A provider's name in a key: tcp;ofi_rxm -> tcp_ofi_rxm.
key_of() { echo "$1" | tr ';' '_'; }
mono_offset=$(python3 -c "import time; print(time.monotonic() - time.time())")
now_mono() { python3 -c "print(float('$EPOCHREALTIME'.replace(',', '.')) + $mono_offset)"; }

mpi=(mpirun --allow-run-as-root --oversubscribe --mca pml cm --mca mtl ofi --mca btl self)
# RANK HOST PROVIDER: the command prefix of one rank (CPU RANK; on fabric host HOST unless "").
rank_env() {
  local rank=$1 host=$2 prov=$3
  local e=(env taskset -c "$rank")
  if [ -n "$host" ]; then
    local a0 a1
    a0=fcbb:bb00:$(printf %x $((0x4000 + host)))::
    a1=fcbb:bb01:$(printf %x $((0x4000 + host)))::
    case $prov in
      mrc) e=(env FI_MRC_FABRIC="/run/mrc-fabric/$name/fabric.json" FI_MRC_HOST="$host"
              taskset -c "$rank") ;;
      *ofi_mrail) e=(env LD_PRELOAD="$lib/libmrc-fi-netns.so" MRC_FI_NETNS="$name-h$host"
                    FI_OFI_MRAIL_ADDR="$a0,$a1" taskset -c "$rank") ;;
      *) e=(env LD_PRELOAD="$lib/libmrc-fi-netns.so" MRC_FI_NETNS="$name-h$host"
            MRC_FI_SRC_ADDR="$a0" taskset -c "$rank") ;;
    esac
  elif [[ $prov == *ofi_mrail ]]; then
    e=(env "FI_OFI_MRAIL_ADDR=lo,lo" taskset -c "$rank")
  fi
  echo "${e[@]}"
}
# OUT PROVIDER HOST0 HOST1 ARGS...: mrc-mpi-perf on two ranks; 0 if it ran clean.
run_mpi() {
  local out=$1 prov=$2 h0=$3 h1=$4
  shift 4
  local rc=0
  # shellcheck disable=SC2046
  timeout 300 "${mpi[@]}" --mca mtl_ofi_provider_include "$prov" \
    -np 1 $(rank_env 0 "$h0" "$prov") "$bin/mrc-mpi-perf" "$@" : \
    -np 1 $(rank_env 1 "$h1" "$prov") "$bin/mrc-mpi-perf" "$@" >"$out" 2>&1 || rc=$?
  if [ "$rc" = 124 ]; then
    echo "bench-fi: no progress: killed after 300 s" >>"$out"
    return 1
  fi
  [ "$rc" = 0 ] && grep -q "errors=0" "$out"
}
# Why a provider did not run: run_mpi's own verdict (a run killed for making no progress), else
# the failing libfabric call Open MPI names, else the first MPI or program error, else the
# last line.
why() {
  local line
  line=$(grep -m1 "^bench-fi: " "$1" || grep -m1 -oE "OFI Libfabric library call \([a-z_]+\)" "$1" ||
    grep -m1 -E "mrc-mpi-perf:|MPI_ERR|error|failed" "$1" || grep -v '^ *$' "$1" | tail -1 || true)
  echo "$line" | sed 's/^ *//' | cut -c1-120
}

summary=()
# ---- 1. loopback ------------------------------------------------------------------------------
"$bin/mrc-perf" --local ::1 --ev-mode udp -s 4194304 -n 400 --report_gbits -p 18555 \
  >"$work/perf.s" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "Waiting for client" "$work/perf.s" 2>/dev/null && break; sleep 0.05; done
taskset -c 0 "$bin/mrc-perf" --local ::1 --ev-mode udp -s 4194304 -n 400 --report_gbits -p 18555 \
  localhost >"$work/perf.c" 2>&1
wait "${pids[-1]}"
perf_gbps=$(awk '$1 == 4194304 {print $4}' "$work/perf.c" | tail -1)
echo "loopback: mrc-perf alone ${perf_gbps} Gb/s (4 MiB WRITEs, UDP EV mode)"
printf '%-14s %14s %16s\n' provider lat_8B_us bw_4MiB_gbps
for prov in $providers; do
  if run_mpi "$work/lo.$(key_of "$prov")" "$prov" "" "" --max-size 4194304 --allreduce-iters 50; then
    f="$work/lo.$(key_of "$prov")"
    printf '%-14s %14s %16s\n' "$prov" "$(kv "$f" lat_8B_us)" "$(kv "$f" bw_4MiB_gbps)"
    if [ "$prov" = mrc ]; then
      summary+=("mrc_lat_8B_us=$(kv "$f" lat_8B_us)" "mrc_bw_4MiB_gbps=$(kv "$f" bw_4MiB_gbps)"
                "mrc_vs_perf=$(python3 -c "print(round($(kv "$f" bw_4MiB_gbps) / $perf_gbps, 3))")")
    fi
  else
    printf '%-14s %s\n' "$prov" "does not run: $(why "$work/lo.$(key_of "$prov")")"
  fi
done

# ---- 2. the fabric ----------------------------------------------------------------------------
fab up --hosts 4 --planes 2 --leaves 2 --spines 2 --dataplane "${MRC_BENCH_DATAPLANE:-auto}" >/dev/null
dataplane=$(json "/run/mrc-fabric/$name/fabric.json" "j['dataplane']")
echo "fabric $name: 4 hosts, 2 planes x (2 leaves + 2 spines), data plane $dataplane; rank 0 on h0, rank 1 on h2"
ip netns exec "$name-h2" "$bin/mrc-perf" --fabric "/run/mrc-fabric/$name/fabric.json" --host 2 \
  -s 4194304 -n 300 --report_gbits -p 18556 >"$work/fperf.s" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "Waiting for client" "$work/fperf.s" 2>/dev/null && break; sleep 0.05; done
ip netns exec "$name-h0" taskset -c 0 "$bin/mrc-perf" --fabric "/run/mrc-fabric/$name/fabric.json" \
  --host 0 -s 4194304 -n 300 --report_gbits -p 18556 fcbb:bb00:4002:: >"$work/fperf.c" 2>&1
wait "${pids[-1]}"
fperf_gbps=$(awk '$1 == 4194304 {print $4}' "$work/fperf.c" | tail -1)
echo "fabric: mrc-perf alone ${fperf_gbps} Gb/s (4 MiB WRITEs, SRV6 EV mode)"

spine_bytes() {  # plane-0 bytes leaf 0 has sent towards each spine: "S0 S1"
  ip netns exec "$name-p0-l0" cat /sys/class/net/s0/statistics/tx_bytes \
    /sys/class/net/s1/statistics/tx_bytes | tr '\n' ' '
  echo
}
# TIMELINE FROM: the slowest iteration (ms) overlapping [FROM, FROM + 1 s] on CLOCK_MONOTONIC.
slowest_after() {
  python3 - "$1" "$2" <<'PY'
import sys
at = float(sys.argv[2])
worst = 0.0
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    start, ms = (float(x) for x in line.split())
    if start <= at + 1 and start + ms / 1e3 >= at:
        worst = max(worst, ms)
print(round(worst, 3))
PY
}
echo "allreduce iterations: the median, and the slowest in the second after each fault / after the same injection on an idle link (control)"
printf '%-14s %10s %12s %10s %18s %18s\n' provider lat_8B_us bw_4MiB_gbps median_ms blackhole_ms flap_ms
for prov in $providers; do
  k=$(key_of "$prov")
  if ! run_mpi "$work/f.$k" "$prov" 0 2 --max-size 4194304 --allreduce-iters 50; then
    printf '%-14s %s\n' "$prov" "does not run: $(why "$work/f.$k")"
    continue
  fi
  if [ "$prov" = mrc ]; then
    # Paper 5.2.1: point-to-point latency within a leaf (h0 -> h1) against across the spines
    # (h0 -> h2, the run above).
    if run_mpi "$work/leaf.$k" "$prov" 0 1 --min-size 8 --max-size 8 --allreduce-iters 1; then
      same=$(kv "$work/leaf.$k" lat_8B_us)
      echo "mrc: latency 8 B within leaf 0 (h0 -> h1) $same us, across the spines (h0 -> h2) $(kv "$work/f.$k" lat_8B_us) us"
      summary+=("fabric_mrc_lat_same_leaf_us=$same" "fabric_mrc_lat_cross_spine_us=$(kv "$work/f.$k" lat_8B_us)")
    else
      echo "mrc: latency within leaf 0 does not run: $(why "$work/leaf.$k")"
    fi
  fi
  # The control run: the same injections aimed at h1's plane-0 link, which carries nothing of
  # this job. Changing a namespace's nftables or links stops the machine for a moment (up to
  # ~100 ms on a 2-vCPU guest); what the control run shows after an injection is that, not the
  # fault.
  run_mpi "$work/clean.$k" "$prov" 0 2 --no-pingpong --duration "$seconds" \
    --timeline "$work/clean.$k.tl" &
  job=$!
  pids+=("$job")
  sleep 2
  ctl_bh_at=$(now_mono)
  fab blackhole h1-p0 >/dev/null
  sleep 3
  ctl_fl_at=$(now_mono)
  fab flap h1-p0 --period 100ms --count 1 >/dev/null
  wait "$job" || { echo "bench-fi: $prov control run failed:" >&2; cat "$work/clean.$k" >&2; exit 1; }
  fab blackhole h1-p0 --off >/dev/null
  run_mpi "$work/fault.$k" "$prov" 0 2 --no-pingpong --duration "$seconds" \
    --timeline "$work/fault.$k.tl" &
  job=$!
  pids+=("$job")
  sleep 1.5
  read -r a0 a1 < <(spine_bytes)
  sleep 0.5
  read -r b0 b1 < <(spine_bytes)
  cut=0
  [ $((b1 - a1)) -gt $((b0 - a0)) ] && cut=1
  cut_at=$(now_mono)
  fab blackhole "p0-s$cut" >/dev/null
  sleep 3
  flap_at=$(now_mono)
  fab flap h0-p0 --period 100ms --count 1 >/dev/null
  ok=1
  wait "$job" || ok=0
  fab blackhole "p0-s$cut" --off >/dev/null
  if [ $ok = 0 ]; then
    printf '%-14s %10s %12s %10s %s\n' "$prov" "$(kv "$work/f.$k" lat_8B_us)" \
      "$(kv "$work/f.$k" bw_4MiB_gbps)" "$(kv "$work/clean.$k" allreduce_median_ms)" \
      "FAILED through the faults (p0-s$cut): $(why "$work/fault.$k")"
    summary+=("fabric_${k}_faults=failed")
    continue
  fi
  clean=$(kv "$work/clean.$k" allreduce_median_ms)
  ctl_bh=$(slowest_after "$work/clean.$k.tl" "$ctl_bh_at")
  ctl_fl=$(slowest_after "$work/clean.$k.tl" "$ctl_fl_at")
  bh=$(slowest_after "$work/fault.$k.tl" "$cut_at")
  fl=$(slowest_after "$work/fault.$k.tl" "$flap_at")
  printf '%-14s %10s %12s %10s %18s %18s\n' "$prov" "$(kv "$work/f.$k" lat_8B_us)" \
    "$(kv "$work/f.$k" bw_4MiB_gbps)" "$clean" "$bh / $ctl_bh (p0-s$cut)" "$fl / $ctl_fl"
  summary+=("fabric_${k}_bw_gbps=$(kv "$work/f.$k" bw_4MiB_gbps)" "fabric_${k}_median_ms=$clean"
            "fabric_${k}_blackhole_ms=$bh" "fabric_${k}_blackhole_control_ms=$ctl_bh"
            "fabric_${k}_flap_ms=$fl" "fabric_${k}_flap_control_ms=$ctl_fl")
done
summary+=("fabric_perf_gbps=$fperf_gbps" "dataplane=$dataplane")
echo "${summary[*]}"
