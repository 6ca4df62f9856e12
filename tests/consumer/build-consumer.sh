#!/usr/bin/env bash
# Installs the build into a scratch DESTDIR, then compiles and runs consumer.cpp using only
# `pkg-config prdma`, as an application outside the tree would.
set -euo pipefail
meson=$1
build=$2
source=$3
stage=$(mktemp -d /tmp/prdma-consumer.XXXXXX)
trap 'rm -rf "$stage"' EXIT

"$meson" install -C "$build" --no-rebuild --quiet --destdir "$stage" >/dev/null
prefix=$("$meson" introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
pc=$(find "$stage$prefix" -name prdma.pc -print -quit)
[ -n "$pc" ] || { echo "prdma.pc was not installed under $stage$prefix"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
# prdma.pc is relocatable (prefix from its own location), so the staged copy needs no override.
pkg=(pkg-config)
echo "pkg-config prdma: $("${pkg[@]}" --modversion prdma)"
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Werror -o "$stage/consumer" "$source" \
  $("${pkg[@]}" --cflags prdma) $("${pkg[@]}" --libs prdma)
libdir=$(dirname "$(find "$stage$prefix" -name 'libprdma_common.so' -print -quit)")
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$stage/consumer"
