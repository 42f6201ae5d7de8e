#!/usr/bin/env bash
# A long fuzzing campaign: every target one after another (one core), each
# for its own time budget, in libFuzzer's fork mode with one worker so that
# a crash, hang or out-of-memory is recorded and fuzzing goes on.
#   scripts/fuzz_campaign.sh [OUT_DIR]        (default $BUILD/fuzz-campaign)
# Budgets: CAMPAIGN_SECONDS_<target> (seconds), default 3600 each.  Each
# target's binary is copied into OUT_DIR/bin when its turn comes, so
# rebuilding meanwhile does not disturb the run.  Writes OUT_DIR/summary.txt,
# one line per target as it finishes:
#   TARGET execs N seconds S execs_per_s R crashes C timeouts T ooms O corpus U
# Crashing inputs: OUT_DIR/artifacts/TARGET/; corpus: OUT_DIR/corpus/TARGET.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=${1:-$BUILD/fuzz-campaign}
targets=${CAMPAIGN_TARGETS:-fuzz_onnx_tensor fuzz_onnx_import fuzz_compile fuzz_plan_open fuzz_plan_run}
mkdir -p "$out/bin" "$out/logs"
export ASAN_OPTIONS=detect_leaks=1:symbolize=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
echo "campaign started $(date -u +%FT%TZ) at commit $(git rev-parse --short HEAD) in $out" >>"$out/summary.txt"
for t in $targets; do
    var=CAMPAIGN_SECONDS_$t
    seconds=${!var:-3600}
    cp -p "$BUILD/fuzz/$t" "$out/bin/$t.tmp" && mv "$out/bin/$t.tmp" "$out/bin/$t" || exit 1
    echo "$t: started $(date -u +%FT%TZ), binary built $(date -u -r "$out/bin/$t" +%FT%TZ), HEAD $(git rev-parse --short HEAD)" >>"$out/summary.txt"
    corpus=$out/corpus/$t artifacts=$out/artifacts/$t log=$out/logs/$t.log
    mkdir -p "$corpus" "$artifacts"
    start=$(date +%s)
    "$out/bin/$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -detect_leaks=1 \
        -artifact_prefix="$artifacts/" "$corpus" "$BUILD/fuzz/seeds/$t" >"$log" 2>&1
    elapsed=$(( $(date +%s) - start ))
    # Fork mode's progress lines: "#EXECS: cov: .. corp: UNITS .. oom/timeout/crash: O/T/C time: ..."
    last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
    execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$last")
    otc=$(sed -n 's/.*oom\/timeout\/crash: \([0-9]*\/[0-9]*\/[0-9]*\).*/\1/p' <<<"$last")
    execs=${execs:-0} otc=${otc:-0/0/0}
    echo "$t execs $execs seconds $elapsed execs_per_s $((execs / (elapsed ? elapsed : 1)))" \
         "crashes ${otc##*/} timeouts $(cut -d/ -f2 <<<"$otc") ooms ${otc%%/*}" \
         "corpus $(find "$corpus" -type f | wc -l) artifacts $(find "$artifacts" -type f | wc -l)" >>"$out/summary.txt"
done
echo "campaign finished $(date -u +%FT%TZ)" >>"$out/summary.txt"
