#!/bin/sh
# Runs inside the prdma-vm guest (usertools/prdma-vm run), chrooted into the host's root: makes a
# Linux soft-RoCE device (rdma_rxe) on roce0 (10.100.0.20 on br-data), finds its RoCE v2 GID of
# 10.100.0.20, then for each case in CASES (one "TEST OPTIONS" a line, e.g. "write_lat -n 1000")
# runs perftest's ib_TEST against the program of test-bed host 1 (rxe_interop.sh: prdma-perf, or for
# "verbs:TEST OPTIONS" the same program on libprdma-verbs; rdma-core's ibv_TEST for TEST
# rc_pingpong, srq_pingpong or ud_pingpong) both ways:
#   A: ib_TEST server here, the host's client there (TCP exchange to 192.168.100.10)
#   B: the host's server there, ib_TEST client here (to 192.168.100.1)
# A case "ipv6:CASE" runs over rxe's RoCE v2 GID of fd64::20 (added to roce0 here) instead.
# Handshake through files in $PRDMA_VM_OUT (shared with the host over 9p):
#   A: guest-up-A-N (server listening) -> host-done-A-N;  B: guest-ready-B-N -> host-up-B-N.
#   rxe_guest.sh CASES
set -u
cases=$1
out=$PRDMA_VM_OUT
base_port=18600
step() { echo "rxe-guest: $*"; }
now() { cut -d' ' -f1 /proc/uptime; }
wait_file() { # FILE SECONDS
  i=0
  while [ ! -e "$1" ] && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
  [ -e "$1" ]
}
listening() { ss -ltnH "sport = :$1" 2>/dev/null | grep -q .; }

ip -6 addr add fd64::20/64 dev roce0 nodad || step "no IPv6 on roce0: ipv6: cases will fail"
step "roce0: $(ip -br addr show roce0 2>&1)"
rdma link add rxe0 type rxe netdev roce0 || { step "FAIL: rdma link add"; dmesg | tail -5; exit 1; }
rdma link show
ibv_devinfo -v -d rxe0 2>&1 | grep -E 'hca_id|transport|state|max_mtu|active_mtu|GID\[' 
gids=/sys/class/infiniband/rxe0/ports/1/gids
types=/sys/class/infiniband/rxe0/ports/1/gid_attrs/types
want=0000:0000:0000:0000:0000:ffff:0a64:0014   # ::ffff:10.100.0.20
idx=
for g in 0 1 2 3 4 5 6 7; do   # the table's used entries come first
  gid=$(cat "$gids/$g" 2>/dev/null) || break
  type=$(cat "$types/$g" 2>/dev/null) || break
  step "GID[$g] $gid $type"
  [ "$gid" = "$want" ] && [ "$type" = "RoCE v2" ] && [ -z "$idx" ] && idx=$g
done
[ -n "$idx" ] || { step "FAIL: no RoCE v2 GID for 10.100.0.20"; exit 1; }
step "RoCE v2 GID index of 10.100.0.20: $idx"
echo "$idx" >"$out/gid-index"
want6=fd64:0000:0000:0000:0000:0000:0000:0020
idx6=
for g in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
  gid=$(cat "$gids/$g" 2>/dev/null) || break
  type=$(cat "$types/$g" 2>/dev/null) || break
  [ "$gid" = "$want6" ] && [ "$type" = "RoCE v2" ] && [ -z "$idx6" ] && idx6=$g
done
step "RoCE v2 GID index of fd64::20: ${idx6:-none}"

rc=0
n=0
while read -r test opts; do
  [ -n "$test" ] || continue
  n=$((n + 1))
  port=$((base_port + 2 * n))
  gid_index=$idx
  test=${test#lossy:} # swroce's drops: nothing changes here
  case $test in ipv6:*) test=${test#ipv6:} gid_index=${idx6:-none} ;; esac
  test=${test#verbs:}
  case $test in
    rc_pingpong | srq_pingpong | ud_pingpong) prog="ibv_$test -d rxe0 -g $gid_index" ;;
    *) prog="ib_$test -d rxe0 -x $gid_index -F" ;;
  esac
  # A: ib_TEST serves, prdma-perf (host 1) is the client.
  step "A$n: $prog $opts -p $port (server; the host's program the client) ($(now)s)"
  # shellcheck disable=SC2086
  timeout 240 $prog $opts -p $port >"$out/guest-A-$n.out" 2>&1 &
  pid=$!
  i=0
  while ! listening $port && [ $i -lt 300 ] && kill -0 $pid 2>/dev/null; do
    sleep 0.1; i=$((i + 1))
  done
  : >"$out/guest-up-A-$n"
  wait $pid
  r=$?
  cat "$out/guest-A-$n.out"
  echo "$r" >"$out/guest-A-$n.rc"
  step "A$n: ${prog%% *} (server) exited $r ($(now)s)"
  [ $r -eq 0 ] || rc=1
  wait_file "$out/host-done-A-$n" 300 || step "A$n: the host's client never finished"

  # B: the host's program serves, ib_TEST is the client.
  : >"$out/guest-ready-B-$n"
  if wait_file "$out/host-up-B-$n" 120; then
    step "B$n: $prog $opts -p $((port + 1)) 192.168.100.1 ($(now)s)"
    # shellcheck disable=SC2086
    timeout 240 $prog $opts -p $((port + 1)) 192.168.100.1 \
      >"$out/guest-B-$n.out" 2>&1
    r=$?
    cat "$out/guest-B-$n.out"
  else
    step "B$n: the host's server never came up"
    r=124
  fi
  echo "$r" >"$out/guest-B-$n.rc"
  step "B$n: ${prog%% *} (client) exited $r ($(now)s)"
  [ $r -eq 0 ] || rc=1
  wait_file "$out/host-done-B-$n" 300 || step "B$n: the host's server never finished"
done <"$cases"
step "rdma statistics: $(rdma statistic show link rxe0/1 2>&1 | tr -s ' \n' ' ')"
ip -s link show roce0
ip neigh show dev roce0
ip -6 neigh show dev roce0
step "done ($(now)s), status $rc"
exit $rc
