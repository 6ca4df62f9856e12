#!/usr/bin/env bash
# Fails when any tracked C++ source differs from .clang-format's layout; lists the files and the
# command that fixes them.
set -euo pipefail
root=$1
clang_format=${2:-clang-format}
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp' '*.h' '*.cc')
else
  mapfile -t files < <(find lib drivers apps examples bench tests include -name '*.cpp' -o -name '*.hpp')
fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if ! "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done
if [ ${#bad[@]} -ne 0 ]; then
  echo "clang-format differs in ${#bad[@]} file(s):"
  printf '  %s\n' "${bad[@]}"
  echo "fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "clang-format: ${#files[@]} files clean"
