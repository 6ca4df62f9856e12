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
# The three faces (DPDK's rte_ethdev.h / rte_ethdev_core.h / ethdev_driver.h): the driver interface
# is installed only as a driver SDK, the fast-path table only through fastpath.hpp, and a
# data-path translation unit compiles against fastpath.hpp alone.
include=$(dirname "$(find "$stage$prefix" -name rdmadev.hpp -print -quit)")
if [ -e "$include/driver.hpp" ] && ! "$meson" introspect "$build" --buildoptions |
    python3 -c 'import json,sys; sys.exit(0 if next(o["value"] for o in json.load(sys.stdin) if o["name"]=="driver_sdk") else 1)'; then
  echo "driver.hpp is installed without -Ddriver_sdk=true"; exit 1
fi
cat > "$stage/core_alone.cpp" <<'CPP'
#include <prdma/rdmadev/fastpath_core.hpp>
CPP
# shellcheck disable=SC2046
if g++ -std=c++20 -fsyntax-only "$stage/core_alone.cpp" $("${pkg[@]}" --cflags prdma) 2>/dev/null; then
  echo "fastpath_core.hpp compiled on its own: it must only come through fastpath.hpp"; exit 1
fi
cat > "$stage/data_path.cpp" <<'CPP'
#include <prdma/rdmadev/fastpath.hpp>
// Polls without the control API: a QP and a CQ are only their fast-path handles here.
unsigned drain(const prdma::rdma::CqQueue& cq, const prdma::rdma::QpQueue& qp) {
    prdma::rdma::WorkCompletion wc[8];
    const unsigned n = prdma::rdma::poll_cq(cq, wc);
    return n + static_cast<unsigned>(prdma::rdma::post_error(qp));
}
#ifdef PRDMA_RDMADEV_RDMADEV_HPP
#error "fastpath.hpp pulled in the control API"
#endif
CPP
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only "$stage/data_path.cpp" $("${pkg[@]}" --cflags prdma)
echo "faces: driver.hpp not installed, fastpath_core.hpp refused alone, fastpath.hpp stands alone"
# Sealed: without the driver SDK the package holds no registry, key table, translation table or
# gather/place helper, and an application that includes only the two rdmadev headers registers
# memory, builds a signalled WRITE and posts it.
if ! "$meson" introspect "$build" --buildoptions |
    python3 -c 'import json,sys; sys.exit(0 if next(o["value"] for o in json.load(sys.stdin) if o["name"]=="driver_sdk") else 1)'; then
  for internal in memory_registry memory_key translation_table region_io sge_cursor; do
    if [ -n "$(find "$stage$prefix" -path "*prdma/mem/$internal.hpp" -print -quit)" ]; then
      echo "prdma/mem/$internal.hpp is installed without -Ddriver_sdk=true"; exit 1
    fi
  done
fi
cat > "$stage/sealed.cpp" <<'CPP'
#include <type_traits>

#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
// Only the two public rdmadev headers: a region's keys, a WRITE built from them, posted.
template <typename T, typename = void> struct complete : std::false_type {};
template <typename T> struct complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
static_assert(!complete<prdma::mem::MemoryRegistry>::value, "the registry leaked into the API");
static_assert(!complete<prdma::mem::TranslationTable>::value, "a translation table leaked");
unsigned post_one(prdma::rdma::ProtectionDomain& pd, const prdma::rdma::QueuePair& qp, void* buf,
                  std::uint64_t remote, prdma::mem::MemoryKey rkey) {
    auto mr = pd.register_memory(buf, 64, prdma::mem::access_local_write);
    if (!mr) {
        return 0;
    }
    const prdma::rdma::SendWr wr = prdma::rdma::write_wr(
        1, prdma::rdma::Sge{reinterpret_cast<std::uintptr_t>(buf), 64, mr->lkey()}, remote, rkey,
        prdma::rdma::SendFlags{prdma::rdma::send_signaled});
    return prdma::rdma::post_send(qp, {&wr, 1});
}
CPP
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only "$stage/sealed.cpp" $("${pkg[@]}" --cflags prdma)
echo "sealed: no lib/mem internals installed; rdmadev.hpp and fastpath.hpp compile a WRITE alone"
libdir=$(dirname "$(find "$stage$prefix" -name 'libprdma_common.so' -print -quit)")
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$stage/consumer"
# The installed driver: an example built from the installed sources with pkg-config alone creates
# rdma_swroce0 from its EAL arguments and runs a WRITE through it.
example=$(find "$stage$prefix" -path '*prdma/examples/hello_write.cpp' -print -quit)
[ -n "$example" ] || { echo "examples/hello_write.cpp was not installed"; exit 1; }
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Werror -o "$stage/hello_write" "$example" \
  $("${pkg[@]}" --cflags prdma) $("${pkg[@]}" --libs prdma)
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$stage/hello_write" -l 0 \
  --log-level='*:error' --vdev=net_ring0 --vdev=rdma_swroce0,port=net_ring0,ip=10.0.0.1
echo "installed driver: hello_write built from the installed example ran over rdma_swroce0"
# rc_pingpong from the installed sources, between two processes over memif.
example=$(dirname "$example")/rc_pingpong.cpp
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Werror -o "$stage/rc_pingpong" "$example" \
  $("${pkg[@]}" --cflags prdma) $("${pkg[@]}" --libs prdma)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
memif() { echo "--vdev=net_memif0,role=$1,socket=$stage/pp.sock,socket-abstract=no"; }
LD_LIBRARY_PATH="$libdir" timeout 60 "$stage/rc_pingpong" -l 0 --log-level='*:error' \
  "$(memif server)" --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1 -- -p "$port" -n 1000 \
  > "$stage/server.out" 2>&1 &
server=$!
for _ in $(seq 200); do [ -S "$stage/pp.sock" ] && break; sleep 0.05; done
LD_LIBRARY_PATH="$libdir" timeout 60 "$stage/rc_pingpong" -l 1 --log-level='*:error' \
  "$(memif client)" --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.2 -- -p "$port" -n 1000 \
  127.0.0.1 || { kill "$server" 2>/dev/null; cat "$stage/server.out"; exit 1; }
wait "$server" || { cat "$stage/server.out"; exit 1; }
grep -q '^1000 iters in' "$stage/server.out" || { cat "$stage/server.out"; exit 1; }
echo "installed driver: rc_pingpong built from the installed example ran between two processes"
# write_read from the installed sources: fast-register, WRITE and READ through it, invalidate.
example=$(dirname "$example")/write_read.cpp
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Werror -o "$stage/write_read" "$example" \
  $("${pkg[@]}" --cflags prdma) $("${pkg[@]}" --libs prdma)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
memif() { echo "--vdev=net_memif0,role=$1,socket=$stage/wr.sock,socket-abstract=no"; }
LD_LIBRARY_PATH="$libdir" timeout 60 "$stage/write_read" -l 0 --log-level='*:error' \
  "$(memif server)" --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1 -- -p "$port" -s 10000 \
  > "$stage/server.out" 2>&1 &
server=$!
for _ in $(seq 200); do [ -S "$stage/wr.sock" ] && break; sleep 0.05; done
LD_LIBRARY_PATH="$libdir" timeout 60 "$stage/write_read" -l 1 --log-level='*:error' \
  "$(memif client)" --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.2 -- -p "$port" -s 10000 \
  127.0.0.1 > "$stage/client.out" 2>&1 ||
  { kill "$server" 2>/dev/null; cat "$stage/client.out" "$stage/server.out"; exit 1; }
wait "$server" || { cat "$stage/server.out"; exit 1; }
grep -q '^round 3: rkey 0x[0-9a-f]* invalidated$' "$stage/server.out" ||
  { cat "$stage/server.out"; exit 1; }
grep -q 'invalidated rkey .*: remote_access_error (expected)$' "$stage/client.out" ||
  { cat "$stage/client.out"; exit 1; }
echo "installed driver: write_read built from the installed example ran between two processes"
