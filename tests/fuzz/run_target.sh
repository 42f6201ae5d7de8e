#!/usr/bin/env bash
# Runs one libFuzzer target for SECONDS, or until RUNS inputs when RUNS is
# set in the environment:
#   [RUNS=N] tests/fuzz/run_target.sh TARGET SECONDS [OUT_DIR]
# Corpus: OUT_DIR/corpus/TARGET (kept between runs, new units land there)
# plus the seeds in $BUILD/fuzz/seeds/TARGET; crashing inputs go to
# OUT_DIR/artifacts/TARGET/, the log to OUT_DIR/logs/TARGET.log.  OUT_DIR
# defaults to $BUILD/fuzz; the binary is $FUZZ_BIN_DIR/TARGET (default
# $BUILD/fuzz).  Prints one line
#   TARGET: N execs in S s (R/s), corpus C units, crashes K
# and exits non-zero when libFuzzer reported a crash, leak, sanitizer
# report, timeout (hang) or out-of-memory.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
target=$1 seconds=$2 out=${3:-$BUILD/fuzz}
bin=${FUZZ_BIN_DIR:-$BUILD/fuzz}/$target
[ -x "$bin" ] || { echo "$target: $bin missing (make fuzz-build)" >&2; exit 2; }
corpus=$out/corpus/$target artifacts=$out/artifacts/$target log=$out/logs/$target.log
mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
seeds=$BUILD/fuzz/seeds/$target
[ -d "$seeds" ] || seeds=

# -timeout: seconds one input may take before it counts as a hang;
# -rss_limit_mb: beyond this the target is out of memory (a finding too).
before=$(find "$artifacts" -type f | wc -l) start=$(date +%s)
export FUZZ_CALIBRATE_PLAN=${FUZZ_CALIBRATE_PLAN:-$BUILD/fuzz/models/calibrate.plan}   # fuzz_calibrate's plan
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
"$bin" -max_total_time="$seconds" ${RUNS:+-runs=$RUNS} -timeout=20 -rss_limit_mb=2048 -detect_leaks=1 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" $seeds >"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
time_s=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
crashes=$(( $(find "$artifacts" -type f | wc -l) - before ))   # this run's findings
units=$(find "$corpus" -type f | wc -l)
execs=${execs:-0} time_s=${time_s:-$(( $(date +%s) - start ))}   # no "Done" line after a finding
echo "$target: $execs execs in $time_s s ($((execs / (time_s > 0 ? time_s : 1)))/s), corpus $units units, crashes $crashes"
if [ "$rc" -ne 0 ]; then
    echo "$target: libFuzzer exited with status $rc; see $log" >&2
    grep -m1 -E '^==[0-9]+==ERROR|runtime error|^SUMMARY' "$log" >&2
fi
exit "$rc"
