#!/usr/bin/env bash
# The vm suite's interoperability test: prdma-perf (swroce on net_af_packet over data0 of test-bed
# host 1, RoCE address 10.100.0.1) against Linux's soft RoCE (rdma_rxe on the prdma-vm guest's
# roce0, 10.100.0.20, on the same br-data) driven by perftest's ib_* tools (Debian's perftest), both
# ways: prdma-perf client -> ib_TEST server in the guest, and ib_TEST client in the guest ->
# prdma-perf server. The TCP exchange goes over br-kern (192.168.100.1 <-> 192.168.100.10).
# Every run must exit 0 and print a result row. The frames on br-data are captured to
# BUILD_DIR/vm/rxe.pcap (tshark -r rxe.pcap -d udp.port==4791,infiniband).
# Root; needs qemu-system-x86_64 and perftest + rdma-core + ibverbs-providers (prdma-setup deps),
# skipped otherwise. Builds the guest when missing or without rdma_rxe. Takes the test-bed down.
#   rxe_interop.sh BUILD_DIR [CASE...]     CASE: "TEST OPTIONS", default the list below
set -uo pipefail
build=$(realpath "${1:?rxe_interop.sh BUILD_DIR}")
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
vmdir=$build/vm
out=$vmdir/run
perf=$build/apps/prdma-perf/prdma-perf
base_port=18600
say() { printf 'rxe_interop: %s\n' "$*"; }

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(
  "write_lat -n 1000"
  "write_bw -n 1000 -s 4096"
  "read_lat -n 1000"
  "send_lat -n 1000"
)

[ "$(id -u)" -eq 0 ] || { say "needs root: skipped"; exit 77; }
command -v qemu-system-x86_64 >/dev/null ||
  { say "no qemu-system-x86_64 (prdma-setup deps): skipped"; exit 77; }
for t in ib_write_lat ibv_devinfo rdma; do
  command -v $t >/dev/null || { say "no $t (apt-get install perftest rdma-core ibverbs-providers ibverbs-utils iproute2): skipped"; exit 77; }
done
ls /usr/lib/*/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 ||
  { say "no rxe provider for libibverbs (ibverbs-providers): skipped"; exit 77; }
if [ ! -f "$vmdir/vmlinuz" ] || [ ! -f "$vmdir/initramfs.cpio.gz" ] ||
  ! grep -qx rdma_rxe.ko "$vmdir/modules" 2>/dev/null ||
  [ "$top/usertools/prdma-vm" -nt "$vmdir/initramfs.cpio.gz" ]; then
  "$top/usertools/prdma-vm" build --dir "$vmdir" || exit 1
fi

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  "$top/usertools/prdma-testbed" down >/dev/null 2>&1
}
trap cleanup EXIT
"$top/usertools/prdma-testbed" up --hosts 2 || exit 1

casefile=$vmdir/rxe-cases
printf '%s\n' "${cases[@]}" >"$casefile"

wait_file() { # FILE SECONDS: false when it does not come, or the guest has ended
  local i=0
  while [ ! -e "$1" ]; do
    sleep 0.2
    i=$((i + 1))
    [ $i -lt $(($2 * 5)) ] || return 1
    [ -e "$out/status" ] || [ -e "$out/vm-exited" ] && return 1
  done
  return 0
}
listening() { ip netns exec prdma-h1 ss -ltnH "sport = :$1" 2>/dev/null | grep -q .; }
h1_perf() { # TEST OPTS... : prdma-perf in host 1 on swroce over data0
  local test=$1
  shift
  ip netns exec prdma-h1 timeout 240 "$perf" "$test" -l 0 --no-telemetry \
    --log-level=lib.eal:error --log-level=prdma.*:warning --vdev=net_af_packet0,iface=data0 \
    --vdev=rdma_swroce0,port=net_af_packet0,ip=10.100.0.1 -- -F "$@"
}

# The host's half of rxe_guest.sh's handshake.
host_side() {
  local n=0 c test opts port pid i
  for c in "${cases[@]}"; do
    n=$((n + 1))
    test=${c%% *}
    opts=${c#"$test"}
    port=$((base_port + 2 * n))
    # A: prdma-perf client against ib_TEST in the guest.
    wait_file "$out/guest-up-A-$n" 600 || return 1
    # shellcheck disable=SC2086
    h1_perf "$test" $opts -p $port 192.168.100.10 >"$out/host-A-$n.out" 2>&1
    echo $? >"$out/host-A-$n.rc"
    : >"$out/host-done-A-$n"
    # B: prdma-perf server, ib_TEST in the guest the client.
    wait_file "$out/guest-ready-B-$n" 300 || return 1
    # shellcheck disable=SC2086
    h1_perf "$test" $opts -p $((port + 1)) >"$out/host-B-$n.out" 2>&1 &
    pid=$!
    i=0
    while ! listening $((port + 1)) && [ $i -lt 300 ] && kill -0 $pid 2>/dev/null; do
      sleep 0.1
      i=$((i + 1))
    done
    : >"$out/host-up-B-$n"
    wait $pid
    echo $? >"$out/host-B-$n.rc"
    : >"$out/host-done-B-$n"
  done
}

# prdma-vm run clears the run directory first: start once it has.
rm -rf "$out"
( while [ ! -f "$out/cmd" ]; do sleep 0.1; done; host_side ) &
pids+=($!)
pcap=$vmdir/rxe.pcap
rm -f "$pcap"
ip netns exec prdma-sw tshark -q -i br-data -s 192 -w "$pcap" -f 'udp port 4791 or arp' \
  >/dev/null 2>&1 &
pids+=($!)

start=$(date +%s.%N)
"$top/usertools/prdma-vm" run --dir "$vmdir" --timeout 1500 --cwd "$top" -- \
  "sh $top/tests/vm/rxe_guest.sh $casefile"
rc=$?
end=$(date +%s.%N)
: >"$out/vm-exited"
wait "${pids[0]}"
kill "${pids[1]}" 2>/dev/null
wait "${pids[1]}" 2>/dev/null
pids=()

# A perftest result row: "#bytes #iterations" then numbers. perftest in the guest turns cycles
# into microseconds with a CPU clock it samples itself, and under TCG that sampling now and then
# fails (it returns 0 MHz): its latency row is then all "inf" although every iteration ran. Such a
# row from rxe's side still proves the exchange worked and is accepted, and said; prdma's side
# must print numbers.
row() { grep -E '^ *[0-9]+ +[0-9]+ +[0-9]+\.[0-9]+ +[0-9.]+' "$1" 2>/dev/null | tail -1; }
rxe_row() { grep -E '^ *[0-9]+ +[0-9]+ +([0-9]+\.[0-9]+|inf) +([0-9.]+|inf)' "$1" 2>/dev/null | tail -1; }
fail=0
n=0
say "results (bytes, iterations, then t_min t_max t_typical t_avg ... us, or BW peak/avg MB/s):"
for c in "${cases[@]}"; do
  n=$((n + 1))
  test=${c%% *}
  for dir in A B; do
    if [ $dir = A ]; then
      what="prdma-perf client -> ib_$test server (rxe)"
      client=host
      server=guest
    else
      what="ib_$test client (rxe) -> prdma-perf server"
      client=guest
      server=host
    fi
    crc=$(cat "$out/$client-$dir-$n.rc" 2>/dev/null || echo none)
    src=$(cat "$out/$server-$dir-$n.rc" 2>/dev/null || echo none)
    if [ $client = host ]; then
      crow=$(row "$out/$client-$dir-$n.out")
      srow=$(rxe_row "$out/$server-$dir-$n.out")
    else
      crow=$(rxe_row "$out/$client-$dir-$n.out")
      srow=$(row "$out/$server-$dir-$n.out")
    fi
    note=
    case "$crow $srow" in *inf*) note=" (rxe's perftest printed inf: its CPU clock sampling failed under TCG)" ;; esac
    ok=1
    [ "$crc" = 0 ] && [ "$src" = 0 ] && [ -n "$crow" ] || ok=0
    # write_lat and send_lat print the row on both sides (read_lat's server prints none).
    case $test in write_lat|send_lat) [ -n "$srow" ] || ok=0 ;; esac
    if [ $ok = 1 ]; then
      say "PASS $c: $what: client:${crow}${note}"
    else
      fail=1
      say "FAIL $c: $what: client exit $crc, server exit $src"
      for f in "$out/host-$dir-$n.out" "$out/guest-$dir-$n.out"; do
        [ -f "$f" ] && { say "--- ${f##*/}:"; tail -25 "$f"; }
      done
    fi
  done
done
if command -v tshark >/dev/null && [ -s "$pcap" ]; then
  # Per sender and BTH opcode (4 SEND only, 6/7/8 WRITE first/middle/last, 10 WRITE only,
  # 12 READ request, 16 READ response only, 17 ACK): more than the iterations are resends.
  say "br-data capture $pcap (swroce 10.100.0.1, rxe 10.100.0.20), RoCE frames per sender and opcode:"
  tshark -r "$pcap" -Y infiniband -T fields -e ip.src -e infiniband.bth.opcode 2>/dev/null |
    sort | uniq -c | awk '{printf "  %s op %s: %s\n", $2, $3, $1}'
fi
say "accel $(cat "$out/accel" 2>/dev/null), guest ready after $(cat "$out/ready" 2>/dev/null)s of its kernel, $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')s in all; guest status $rc"
[ "$rc" -eq 0 ] && [ $fail -eq 0 ]
