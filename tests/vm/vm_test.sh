#!/usr/bin/env bash
# The vm suite: a QEMU guest (usertools/prdma-vm: q35, intel-iommu, a virtio-net-pci NIC with
# iommu_platform on br-data of usertools/prdma-testbed) binds its NIC to vfio-pci with
# dpdk-devbind.py and runs prdma-perf on it through DPDK's net_virtio over VFIO against a
# prdma-perf in test-bed host 1 (net_af_packet on data0, 10.100.0.1); then dma_map_test shows the
# vIOMMU enforcing ExternalMemory's rte_dev_dma_map. Builds the guest (prdma-vm build) when
# missing or older than usertools/prdma-vm. Root; takes the test-bed down at the end.
#   vm_test.sh BUILD_DIR
set -uo pipefail
build=$(realpath "${1:?vm_test.sh BUILD_DIR}")
top=$(cd "$(dirname "$0")/../.." && pwd)
vmdir=$build/vm
out=$vmdir/run
perf=$build/apps/prdma-perf/prdma-perf
say() { printf 'vm_test: %s\n' "$*"; }

[ "$(id -u)" -eq 0 ] || { say "needs root: skipped"; exit 77; }
command -v qemu-system-x86_64 >/dev/null ||
  { say "no qemu-system-x86_64 (usertools/prdma-vm deps, or prdma-setup deps): skipped"; exit 77; }
if [ ! -f "$vmdir/vmlinuz" ] || [ ! -f "$vmdir/initramfs.cpio.gz" ] ||
  [ "$top/usertools/prdma-vm" -nt "$vmdir/initramfs.cpio.gz" ]; then
  "$top/usertools/prdma-vm" build --dir "$vmdir" || exit 1
fi

server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  [ -n "${capture_pid:-}" ] && kill "$capture_pid" 2>/dev/null
  "$top/usertools/prdma-testbed" down >/dev/null 2>&1
}
trap cleanup EXIT
"$top/usertools/prdma-testbed" up --hosts 2 || exit 1

# The servers, one per guest test, each started when the guest is ready for it (files in the run
# directory, which the guest shares): a polling server does not take a core from the booting guest.
serve() {
  local n=$1 args=$2 i=0
  while [ ! -e "$out/guest-ready-$n" ]; do
    sleep 0.2
    i=$((i + 1))
    [ $i -lt 3000 ] || return 1
    [ -e "$out/status" ] || [ -e "$out/vm-exited" ] && return 1
  done
  # shellcheck disable=SC2086
  ip netns exec prdma-h1 timeout 240 "$perf" ${args%% *} -l 0 --no-telemetry --log-level=lib.eal:error \
    --log-level=prdma.*:warning --vdev=net_af_packet0,iface=data0 \
    --vdev=rdma_swroce0,port=net_af_packet0,ip=10.100.0.1 -- ${args#* } --verify \
    -p $((19600 + n)) >"$out/server-$n.out" 2>&1 &
  server_pid=$!
  sleep 1
  : >"$out/server-$n-up"
  wait "$server_pid"
  local rc=$?
  server_pid=
  say "server $n ($args) exited $rc"
  return $rc
}
servers() {
  serve 1 "write_lat -n 200 -s 64" && serve 2 "write_bw -n 1000 -s 4096"
}
# prdma-vm run clears the run directory first: start the servers once it has.
rm -rf "$out"
( while [ ! -f "$out/cmd" ]; do sleep 0.1; done; servers ) &
servers_pid=$!

# Host 2 counts dma_map_test's frames: the data from mapped memory must arrive, and only once.
capdir=$(mktemp -d)
ip netns exec prdma-h2 python3 "$top/tests/vm/capture.py" data0 "$capdir/stop" "$capdir/counts" &
capture_pid=$!

start=$(date +%s.%N)
"$top/usertools/prdma-vm" run --dir "$vmdir" --timeout 900 --cwd "$top" -- \
  "sh $top/tests/vm/guest.sh $build"
rc=$?
end=$(date +%s.%N)
# A guest that ended early (before or during a test) leaves no server waiting for it.
: >"$out/vm-exited"
[ "$rc" -eq 0 ] || ip netns pids prdma-h1 | xargs -r kill 2>/dev/null
wait "$servers_pid"
servers_rc=$?
: >"$capdir/stop"
wait "$capture_pid"
read -r _ data _ other <"$capdir/counts" || { data=-1; other=-1; }
rm -rf "$capdir"
say "host 2 received $data frames carrying dma_map_test's data (1024 sent from mapped memory) and $other other non-IP frames (anything sent for the refused reads)"
for f in "$out"/server-*.out; do [ -f "$f" ] && { say "${f##*/}:"; cat "$f"; }; done
say "console: $(grep -cE 'DMAR|vtd|virtio' "$out/console.log" || true) QEMU/IOMMU lines about the fault:"
grep -E 'vtd|DMAR|bogus|virtio' "$out/console.log" | grep -v '^guest\|^dma_map' | head -5
say "accel $(cat "$out/accel" 2>/dev/null), guest ready after $(cat "$out/ready" 2>/dev/null)s of its kernel, $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')s in all"
say "guest status $rc, servers $servers_rc"
[ "$data" -eq 1024 ] || say "FAIL: host 2 should have received exactly the 1024 frames from mapped memory"
[ "$rc" -eq 0 ] && [ "$servers_rc" -eq 0 ] && [ "$data" -eq 1024 ]
