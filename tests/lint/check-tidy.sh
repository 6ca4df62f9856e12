#!/usr/bin/env bash
# clang-tidy (checks from .clang-tidy, warnings as errors) over every tracked .cpp in the
# compilation database; two files at a time, the machine has two cores.
set -euo pipefail
root=$1
build=$2
clang_tidy=${3:-clang-tidy}
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- 'lib/*.cpp' 'drivers/*.cpp' 'apps/*.cpp' 'examples/*.cpp')
else
  mapfile -t files < <(find lib drivers apps examples -name '*.cpp')
fi
[ ${#files[@]} -gt 0 ] || { echo "clang-tidy: no sources"; exit 0; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! printf '%s\0' "${files[@]}" |
    xargs -0 -P 2 -n 1 "$clang_tidy" -p "$build" --quiet --warnings-as-errors='*' >"$log" 2>&1; then
  grep -E 'error:|warning:' "$log" | sort -u | head -50
  echo "clang-tidy: findings above (full log: rerun with $clang_tidy -p $build FILE)"
  exit 1
fi
echo "clang-tidy: ${#files[@]} files clean"
