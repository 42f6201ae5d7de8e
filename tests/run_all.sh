#!/usr/bin/env bash
# Runs every test and prints the closing line "N passed, N failed".
# Tests speak TAP: each check is a line "ok N - what" or "not ok N - what".
#   build/tests/test_*   unit tests (tests/unit/test_*.c)
#   tests/t_*.sh         end-to-end tests (CLI, ONNX Runtime parity, conformance)
# A test that exits non-zero without reporting a failed check counts as one
# failure, so a crash can never pass silently.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
passed=0 failed=0
log_dir=$BUILD/test-logs
mkdir -p "$log_dir"

run_one() {
    local name=$1; shift
    local log=$log_dir/$name.log
    # A hang is a failure too: no single test may take longer than this.
    timeout "${TEST_TIMEOUT:-900}" "$@" >"$log" 2>&1
    local rc=$?
    local ok notok
    ok=$(grep -c '^ok ' "$log")
    notok=$(grep -c '^not ok ' "$log")
    if [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then
        notok=1
        echo "not ok - $name exited with status $rc" >>"$log"
    fi
    passed=$((passed + ok))
    failed=$((failed + notok))
    printf '%-40s %5d passed %5d failed\n' "$name" "$ok" "$notok"
    grep '^# summary: ' "$log" | sed 's/^# summary: /    /'
    if [ "$notok" -ne 0 ]; then
        grep -A3 '^not ok' "$log" | head -40 | sed 's/^/    /'
    fi
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in tests/t_*.sh; do
    [ -f "$t" ] || continue
    run_one "$(basename "$t" .sh)" bash "$t"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
