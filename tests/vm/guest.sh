#!/bin/sh
# Runs inside the prdma-vm guest (usertools/prdma-vm run), chrooted into the host's root: binds the
# IOMMU-platform virtio NIC to vfio-pci with DPDK's dpdk-devbind.py, runs prdma-perf on it (DPDK's
# net_virtio over VFIO) against the prdma-perf server that vm_test.sh starts in test-bed host 1,
# then the DMA-mapping demonstration (dma_map_test). Handshake with the host through files in
# $PRDMA_VM_OUT (shared over 9p): guest-bound -> server-N-up.
#   guest.sh BUILD_DIR
set -u
build=$1
out=$PRDMA_VM_OUT
bdf=0000:00:03.0
perf=$build/apps/prdma-perf/prdma-perf
step() { echo "guest: $*"; }
now() { cut -d' ' -f1 /proc/uptime; }

step "binding $bdf to vfio-pci with dpdk-devbind.py ($(now)s)"
modprobe vfio-pci 2>/dev/null || true   # already loaded by the initramfs
dpdk-devbind.py -b vfio-pci "$bdf" 2>&1 | grep -v libkmod
drv=$(basename "$(readlink /sys/bus/pci/devices/$bdf/driver)")
group=$(basename "$(readlink /sys/bus/pci/devices/$bdf/iommu_group)")
step "$bdf: driver $drv, IOMMU group $group ($(ls /dev/vfio | tr '\n' ' '))"
[ "$drv" = vfio-pci ] || { step "FAIL: not bound to vfio-pci"; exit 1; }
[ -c "/dev/vfio/$group" ] || { step "FAIL: no /dev/vfio/$group"; exit 1; }
step "hugepages: $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) x 2 MiB"

eal="-l 1 --no-telemetry --log-level=lib.eal:warning --log-level=prdma.*:warning -a $bdf"
eal="$eal --vdev=rdma_swroce0,port=$bdf,ip=10.100.0.10 --"
rc=0
n=0
for t in "write_lat -n 200 -s 64" "write_bw -n 1000 -s 4096"; do
  n=$((n + 1))
  : >"$out/guest-ready-$n"
  i=0
  while [ ! -e "$out/server-$n-up" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  step "prdma-perf $t --verify against 192.168.100.1 ($(now)s)"
  start=$(now)
  # shellcheck disable=SC2086
  timeout 240 "$perf" ${t%% *} $eal ${t#* } --verify -p $((19600 + n)) 192.168.100.1 \
    >"$out/perf-$n.out" 2>&1
  r=$?
  cat "$out/perf-$n.out"
  step "prdma-perf ${t%% *} exited $r after $(echo "$(now) $start" | awk '{printf "%.1f", $1 - $2}')s"
  [ $r -eq 0 ] || rc=1
done

step "DMA mapping under the vIOMMU ($(now)s)"
timeout 120 "$build/tests/vm/vm-dma-map-test" -l 1 --no-telemetry --log-level=lib.eal:warning \
  -a "$bdf" 2>&1
r=$?
step "dma_map_test exited $r"
[ $r -eq 0 ] || rc=1
step "done ($(now)s), status $rc"
exit $rc
