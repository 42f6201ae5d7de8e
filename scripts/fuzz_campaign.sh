#!/usr/bin/env bash
# A long fuzzing campaign: the targets one after another on one core, each
# until it has executed CAMPAIGN_RUNS inputs (default 10,000,000) or spent
# CAMPAIGN_SECONDS (default 3 hours), whichever comes first.
#   scripts/fuzz_campaign.sh [OUT_DIR]        (default $BUILD/fuzz-campaign)
# CAMPAIGN_TARGETS picks the targets (default the eight below); run two campaigns
# with disjoint targets and the same OUT_DIR to use two cores.
#
# Each target runs in-process (tests/fuzz/run_target.sh), so the first
# crash, leak, sanitizer report, hang (> 20 s) or out-of-memory (> 2 GB)
# ends that target with the input saved in OUT_DIR/artifacts/TARGET/.  Each
# binary is copied into OUT_DIR/bin when its turn comes, so rebuilding
# meanwhile does not disturb the run.  OUT_DIR/summary.txt gets a line per
# target as it finishes:
#   TARGET: N execs in S s (R/s), corpus C units, crashes K, exit E
#
# CAMPAIGN_BACKGROUND=1 detaches the campaign into a session of its own at
# the lowest priority, so builds and benchmarks started from another shell
# keep the cores: nice alone does not do it where the kernel groups
# processes by session (/proc/sys/kernel/sched_autogroup_enabled), as it
# shares the CPU between sessions first and applies nice only within one;
# four campaigns at nice 19 in sessions of their own took the decode of a
# benchmark from about 30 to 12 tok/s.  So the detached campaign also sets
# its session's group to nice 19 (/proc/self/autogroup).
set -u
if [ "${CAMPAIGN_BACKGROUND:-0}" = 1 ] && [ -z "${CAMPAIGN_DETACHED:-}" ]; then
    CAMPAIGN_DETACHED=1 setsid nice -n 19 "$0" "$@" </dev/null >/dev/null 2>&1 &
    echo "campaign detached: pid $!"
    exit 0
fi
if [ -n "${CAMPAIGN_DETACHED:-}" ] && [ -w /proc/self/autogroup ]; then
    echo 19 >/proc/self/autogroup
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=${1:-$BUILD/fuzz-campaign}
targets=${CAMPAIGN_TARGETS:-fuzz_onnx_tensor fuzz_onnx_import fuzz_compile fuzz_plan_open fuzz_plan_run
                          fuzz_calibrate fuzz_chunked fuzz_delegate}
runs=${CAMPAIGN_RUNS:-10000000}
seconds=${CAMPAIGN_SECONDS:-10800}
mkdir -p "$out/bin"
status=0
for t in $targets; do
    cp -p "$BUILD/fuzz/$t" "$out/bin/$t.tmp" && mv "$out/bin/$t.tmp" "$out/bin/$t" || exit 1
    echo "$t: started $(date -u +%FT%TZ), binary built $(date -u -r "$out/bin/$t" +%FT%TZ)," \
         "HEAD $(git rev-parse --short HEAD)" >>"$out/summary.txt"
    line=$(RUNS=$runs FUZZ_BIN_DIR=$out/bin BUILD=$BUILD tests/fuzz/run_target.sh "$t" "$seconds" "$out")
    rc=$?
    echo "$line, exit $rc" >>"$out/summary.txt"
    [ "$rc" -eq 0 ] || status=1
done
exit "$status"
