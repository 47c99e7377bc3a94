#!/usr/bin/env bash
# Formats every tracked C++ file with the repository's .clang-format.
#   scripts/format.sh           rewrite files in place
#   scripts/format.sh --check   list files that differ, exit 1 if any (no changes)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' | grep -v '^fuzz/compat/')
if [ "${1:-}" = "--check" ]; then
  bad=$(clang-format --dry-run "${files[@]}" 2>&1 | grep -o '^[^:]*:[0-9]*:[0-9]*: warning' | cut -d: -f1 | sort -u || true)
  if [ -n "$bad" ]; then
    echo "not formatted:"; echo "$bad"; exit 1
  fi
  echo "format: ${#files[@]} files ok"
else
  clang-format -i "${files[@]}"
fi
