#!/usr/bin/env bash
# Runs one libFuzzer harness for a bounded time from its seed corpus and says what it did.
#
#   run-fuzzer.sh HARNESS SEED_DIR WORK_DIR MAX_LEN [SECONDS] [libFuzzer options...]
#
# SECONDS defaults to $PRDMA_FUZZ_SECONDS, else 30. New inputs go to WORK_DIR/corpus (the seed
# folder in the repository is only read), crash reproducers to WORK_DIR/crash-*, and the full
# libFuzzer log to WORK_DIR/last-run.log. Exit status: 0 clean, libFuzzer's own status otherwise.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
harness=$1
seeds=$2
work=$3
max_len=$4
shift 4
seconds=${PRDMA_FUZZ_SECONDS:-30}
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
[ -x "$harness" ] || { echo "run-fuzzer: no harness at $harness (build it first)" >&2; exit 2; }
[ -d "$seeds" ] || { echo "run-fuzzer: no seed corpus at $seeds" >&2; exit 2; }
mkdir -p "$work/corpus"
log=$work/last-run.log

# Findings must fail: UBSan stops at the first report, ASan aborts so libFuzzer saves the input.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}

rc=0
"$harness" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$work/" "$@" "$work/corpus" "$seeds" >"$log" 2>&1 || rc=$?

name=$(basename "$harness")
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
last=$(grep -E '^#[0-9]+.*(cov|DONE)' "$log" | tail -1 || true)
echo "$name: ${execs:-?} runs in ${seconds}s (${speed:-?}/s); last status: ${last:-none}"
if [ $rc -ne 0 ]; then
  grep -E 'ERROR|fuzz:|runtime error|SUMMARY|Test unit written|deadly signal' "$log" | head -20 || true
  tail -60 "$log"
  echo "$name: FAILED (exit $rc); reproduce with: $harness $work/crash-<id> (full log: $log)"
fi
exit $rc
