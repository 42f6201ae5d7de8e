#!/usr/bin/env bash
# Fuzzing in `make check`: every libFuzzer target (tests/fuzz/, built by
# `make fuzz-build`) first replays its regression inputs
# (tests/fuzz/regressions/<target>/: inputs that once crashed it), then
# fuzzes for FUZZ_SECONDS (default 5) from the seed corpora
# (scripts/fuzz_seeds.sh).  A crash, leak, sanitizer report, hang or
# out-of-memory fails the check; the summary gives executions per target.
# tier: plain-only (the fuzz targets are ASan + UBSan builds in every tier)
# needs: fuzz-build
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-5}
WORK=$BUILD/test-data/fuzz
mkdir -p "$WORK"
. tests/tap.sh
targets="fuzz_onnx_import fuzz_onnx_tensor fuzz_compile fuzz_plan_open fuzz_plan_run fuzz_tokenizer
         fuzz_calibrate fuzz_chunked fuzz_delegate"

replay() {
    local bin=$1; shift
    ASAN_OPTIONS=detect_leaks=1 FUZZ_CALIBRATE_PLAN=$BUILD/fuzz/models/calibrate.plan "$bin" -runs=1 -timeout=20 "$@"   # a hang fails too
}

check "seed corpora generated" env BUILD="$BUILD" scripts/fuzz_seeds.sh
summary=
for t in $targets; do
    bin=$BUILD/fuzz/$t
    regressions=$(find "tests/fuzz/regressions/$t" -type f 2>/dev/null | sort)
    if [ -n "$regressions" ]; then
        # shellcheck disable=SC2086
        check "$t replays $(wc -l <<<"$regressions") regression input(s)" replay "$bin" $regressions
    fi
    check "$t fuzzes ${SECONDS_PER_TARGET}s without a finding" \
        tests/fuzz/run_target.sh "$t" "$SECONDS_PER_TARGET" "$WORK"
    line=$(grep -h "^$t: " "$WORK/last.log" | tail -1)
    summary="$summary${summary:+; }$(sed 's/^\([a-z_]*\): \([0-9]*\) execs in [0-9]* s (\([0-9]*\)\/s).*/\1 \2 execs (\3\/s)/' <<<"$line")"
done
echo "# summary: $summary"
tap_done
