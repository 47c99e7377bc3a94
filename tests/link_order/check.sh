#!/usr/bin/env bash
# The link order of libmrc and rdma-core's libibverbs (docs/c-api.md, "Link order"): linked
# -lmrc before -libverbs, an application finds mrc_soft0 and libmrc says nothing; linked
# -libverbs before -lmrc, its ibv_* calls go to libibverbs (which does not list mrc_soft0) and
# libmrc says so on stderr when it is loaded, naming both libraries and the fix.
# Usage: tests/link_order/check.sh <program linked -lmrc -libverbs> <program linked -libverbs -lmrc>
set -euo pipefail
mrc_first=$1
verbs_first=$2
out=$(mktemp -d "${TMPDIR:-/tmp}/mrc-link-order.XXXXXX")
trap 'rm -rf "$out"' EXIT
unset MRC_SOFT_CONFIG
export MRC_SOFT_PORTS=::1
fail=0
bad() {
  echo "FAIL $*"
  fail=1
}

# Each program needs both libraries, in the order its name says (else this test tests nothing).
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E '^lib(mrc|ibverbs)\.so' | tr '\n' ' '; }
[ "$(needed "$mrc_first")" = "libmrc.so libibverbs.so.1 " ] ||
  bad "$mrc_first needs '$(needed "$mrc_first")', not libmrc.so then libibverbs.so.1"
[ "$(needed "$verbs_first")" = "libibverbs.so.1 libmrc.so " ] ||
  bad "$verbs_first needs '$(needed "$verbs_first")', not libibverbs.so.1 then libmrc.so"

run() {  # run <program> <name>: stdout to $out/<name>.out, stderr to $out/<name>.err
  local rc=0
  "$1" >"$out/$2.out" 2>"$out/$2.err" || rc=$?
  [ "$rc" = 0 ] || bad "$2: exit status $rc"
  sed "s/^/  $2 stdout: /" "$out/$2.out"
  sed "s/^/  $2 stderr: /" "$out/$2.err"
}

run "$mrc_first" mrc_first
grep -q '^resolved .*/libmrc\.so$' "$out/mrc_first.out" ||
  bad "mrc_first: ibv_get_device_list does not come from libmrc.so"
grep -qx 'found mrc_soft0' "$out/mrc_first.out" || bad "mrc_first: mrc_soft0 not listed"
if grep -q 'resolves to' "$out/mrc_first.err"; then
  bad "mrc_first: a link-order warning although -lmrc comes first"
fi
[ "$fail" = 0 ] && echo "ok   -lmrc -libverbs: mrc_soft0 found, no warning"

run "$verbs_first" verbs_first
grep -q '^resolved .*/libibverbs\.so' "$out/verbs_first.out" ||
  bad "verbs_first: ibv_get_device_list does not come from libibverbs"
grep -qx 'no mrc_soft0' "$out/verbs_first.out" ||
  bad "verbs_first: mrc_soft0 found although libibverbs lists the devices"
grep -Eq '^mrc_soft0: ibv_get_device_list resolves to .*libibverbs\.so[^ ]*, not to .*libmrc\.so: link -lmrc before -libverbs' \
  "$out/verbs_first.err" || bad "verbs_first: no link-order warning on stderr"
[ "$(grep -c 'resolves to' "$out/verbs_first.err")" -le 1 ] || bad "verbs_first: the warning repeats"
[ "$fail" = 0 ] && echo "ok   -libverbs -lmrc: mrc_soft0 not found, the warning names both libraries"
exit "$fail"
