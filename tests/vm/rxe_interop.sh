#!/usr/bin/env bash
# The vm suite's interoperability test: swroce (net_af_packet over data0 of test-bed host 1, RoCE
# address 10.100.0.1) against Linux's soft RoCE (rdma_rxe on the prdma-vm guest's roce0,
# 10.100.0.20, on the same br-data) driven by perftest's ib_* tools (Debian's perftest), both
# ways: the host's program the client of ib_TEST serving in the guest, then ib_TEST in the guest
# the client of the host's program. The host's program is prdma-perf for a case "TEST OPTIONS",
# and for "verbs:TEST OPTIONS" Debian's own ib_TEST (or ibv_TEST for TEST rc_pingpong,
# srq_pingpong or ud_pingpong, on both ends) with libprdma-verbs preloaded, the engine on a service lcore. The TCP exchange goes
# over br-kern (192.168.100.1 <-> 192.168.100.10). A case "ipv6:CASE" runs CASE over IPv6
# instead (swroce fd64::1, rxe fd64::20): each side finds the other's MAC by neighbour discovery.
# A case "lossy:CASE" has swroce drop 2 % of what it receives and of what it sends (its rx_drop and
# tx_drop devargs): rxe's go-back-N and swroce's recover each other's losses.
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
shim=$build/lib/verbs/libprdma-verbs.so
base_port=18600
swroce_ip=10.100.0.1 # fd64::1 for an ipv6: case
swroce_faults=       # the drop devargs of a lossy: case
say() { printf 'rxe_interop: %s\n' "$*"; }

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(
  "write_lat -n 1000"
  "write_bw -n 1000 -s 4096"
  "read_lat -n 1000"
  "send_lat -n 1000"
  "send_lat -n 500 --use-srq"
  "send_lat -n 500 -c UD"
  "send_bw -n 200 -s 64 -c UD"
  "verbs:write_lat -n 300"
  "verbs:read_lat -n 300"
  "verbs:send_lat -n 300"
  "verbs:write_bw -n 500 -s 65536"
  "verbs:rc_pingpong -n 200 -s 4096 -c"
  "verbs:srq_pingpong -n 200 -s 4096 -q 8 -r 64"
  "verbs:ud_pingpong -n 200 -s 1024 -r 64 -c"
  "verbs:send_lat -n 300 -c UD"
  "verbs:send_bw -n 300 -s 512 -c UD --use-srq"
  "ipv6:write_lat -n 300"
  "ipv6:verbs:send_lat -n 200 -c UD"
  "lossy:write_bw -n 500 -s 16384"
  "lossy:send_lat -n 300"
)
if [ ! -f "$shim" ]; then # built without libprdma-verbs (meson option verbs)
  kept=()
  for c in "${cases[@]}"; do
    case $c in verbs:*) say "no $shim: skipped '$c'" ;; *) kept+=("$c") ;; esac
  done
  cases=("${kept[@]}")
fi

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
    --vdev=rdma_swroce0,port=net_af_packet0,ip=$swroce_ip$swroce_faults -- -F ${swroce_faults:+--stats} "$@"
}

# TEST OPTS... : Debian's verbs program in host 1, on swroce over data0 through libprdma-verbs.
h1_verbs() {
  local test=$1 prog
  shift
  case $test in
    rc_pingpong | srq_pingpong | ud_pingpong) prog=("ibv_$test" -d rdma_swroce0 -g 0) ;;
    *) prog=("ib_$test" -d rdma_swroce0 -x 0 -F) ;;
  esac
  ip netns exec prdma-h1 env LD_PRELOAD="$shim" PRDMA_EAL_ARGS="-l 0,1 --main-lcore 0 -S 1 \
--no-huge -m 256 --no-telemetry --log-level=*:error --vdev=net_af_packet0,iface=data0 \
--vdev=rdma_swroce0,port=net_af_packet0,ip=$swroce_ip$swroce_faults,progress=service" \
    timeout 240 "${prog[@]}" "$@"
}
h1_run() { # CASE-TEST OPTS... : the host's program for a case
  local test=$1
  shift
  swroce_ip=10.100.0.1 swroce_faults=
  case $test in lossy:*) swroce_faults=,rx_drop=0.02,tx_drop=0.02,seed=11 test=${test#lossy:} ;; esac
  case $test in ipv6:*) swroce_ip=fd64::1 test=${test#ipv6:} ;; esac
  case $test in
    verbs:*) h1_verbs "${test#verbs:}" "$@" ;;
    *) h1_perf "$test" "$@" ;;
  esac
}

# The host's half of rxe_guest.sh's handshake.
host_side() {
  local n=0 c test opts port pid i
  for c in "${cases[@]}"; do
    n=$((n + 1))
    test=${c%% *}
    opts=${c#"$test"}
    port=$((base_port + 2 * n))
    # A: the host's client against ib_TEST in the guest.
    wait_file "$out/guest-up-A-$n" 600 || return 1
    # shellcheck disable=SC2086
    h1_run "$test" $opts -p $port 192.168.100.10 >"$out/host-A-$n.out" 2>&1
    echo $? >"$out/host-A-$n.rc"
    : >"$out/host-done-A-$n"
    # B: the host's server, ib_TEST in the guest the client.
    wait_file "$out/guest-ready-B-$n" 300 || return 1
    # shellcheck disable=SC2086
    h1_run "$test" $opts -p $((port + 1)) >"$out/host-B-$n.out" 2>&1 &
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
ip netns exec prdma-sw tshark -q -i br-data -s 192 -w "$pcap" -f 'udp port 4791 or arp or icmp6' \
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
# ibv_rc_pingpong's, ibv_srq_pingpong's and ibv_ud_pingpong's result line, on both ends: "N iters in S seconds = U usec/iter".
pp_row() { grep -E '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$1" 2>/dev/null | tail -1; }
fail=0
n=0
say "results (bytes, iterations, then t_min t_max t_typical t_avg ... us, or BW peak/avg MB/s):"
for c in "${cases[@]}"; do
  n=$((n + 1))
  test=${c%% *}
  test=${test#lossy:}
  test=${test#ipv6:}
  prog=ib_${test#verbs:}
  host=prdma-perf
  case $test in
    verbs:rc_pingpong | verbs:srq_pingpong | verbs:ud_pingpong)
      prog=ibv_${test#verbs:} host="$prog on libprdma-verbs" ;;
    verbs:*) host="$prog on libprdma-verbs" ;;
  esac
  for dir in A B; do
    if [ $dir = A ]; then
      what="$host client -> $prog server (rxe)"
      client=host
      server=guest
    else
      what="$prog client (rxe) -> $host server"
      client=guest
      server=host
    fi
    crc=$(cat "$out/$client-$dir-$n.rc" 2>/dev/null || echo none)
    src=$(cat "$out/$server-$dir-$n.rc" 2>/dev/null || echo none)
    if [ "${prog%_pingpong}" != "$prog" ]; then
      crow=$(pp_row "$out/$client-$dir-$n.out")
      srow=$(pp_row "$out/$server-$dir-$n.out")
    elif [ $client = host ]; then
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
    case ${test#verbs:} in write_lat|send_lat|*_pingpong) [ -n "$srow" ] || ok=0 ;; esac
    # A lossy case proves itself: swroce dropped frames, and the run still passed.
    case $c in
      lossy:verbs:* | lossy:ipv6:verbs:*) ;;
      lossy:*) grep -qE 'rx_dropped_injected=[1-9]' "$out/host-$dir-$n.out" || ok=0 ;;
    esac
    # The shim refuses with a "libprdma-verbs:" line; the programs say "failed" or "couldn't".
    case $test in
      verbs:*) ! grep -qiE "libprdma-verbs:|failed|couldn't|invalid data" \
        "$out/host-$dir-$n.out" "$out/guest-$dir-$n.out" 2>/dev/null || ok=0 ;;
    esac
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
  say "br-data capture $pcap (swroce 10.100.0.1 and fd64::1, rxe 10.100.0.20 and fd64::20), RoCE frames per sender and opcode:"
  tshark -r "$pcap" -Y infiniband -T fields -e ip.src -e ipv6.src -e infiniband.bth.opcode 2>/dev/null |
    sort | uniq -c | awk '{printf "  %s op %s: %s\n", $2, $3, $1}'
  say "neighbour discovery on br-data (ICMPv6 type, source, target):"
  tshark -r "$pcap" -Y 'icmpv6.type == 135 || icmpv6.type == 136' -T fields -e icmpv6.type \
    -e ipv6.src -e icmpv6.nd.ns.target_address -e icmpv6.nd.na.target_address \
    -e icmpv6.checksum.status 2>/dev/null | sort | uniq -c | sed 's/^/  /'
fi
say "accel $(cat "$out/accel" 2>/dev/null), guest ready after $(cat "$out/ready" 2>/dev/null)s of its kernel, $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')s in all; guest status $rc"
[ "$rc" -eq 0 ] && [ $fail -eq 0 ]
