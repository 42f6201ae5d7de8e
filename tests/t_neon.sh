#!/usr/bin/env bash
# NEON kernels (runtime/kernels/arm_neon/): `make aarch64-tests` cross-
# compiles them and tests/unit_arm/test_neon_quant.c with
# aarch64-linux-gnu-gcc (scripts/deps.sh installs it: a missing cross
# compiler fails here, it is not skipped), and the test runs under
# qemu-aarch64 on three CPU models:
#   max          dotprod and i8mm: every check, both tables' qtile
#   cortex-a76   dotprod, no i8mm: the CPU checks say so; neon-dot qtile only
#   cortex-a53   neither: the CPU checks say false; quantize_rows only
# The test's TAP lines are passed through, renumbered, with the CPU model
# in front; a crash (SIGILL) or a missing plan line is a failure.
# tier: plain-only (cross-compiled without sanitizers, run under qemu)
# needs: aarch64-tests
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/neon
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
BIN=$BUILD/aarch64/test_neon_quant

check "make aarch64-tests cross-compiles the NEON kernels and their test" \
    make -s aarch64-tests BUILD="$BUILD"

# run_on CPU DOT I8MM: the test under qemu-aarch64 -cpu CPU, expecting its
# CPU checks to say DOT and I8MM; its checks become ours.
run_on() {
    local cpu=$1 log=$WORK/$1.log line plan=0 rc
    qemu-aarch64 -cpu "$cpu" "$BIN" "$2" "$3" >"$log" 2>&1
    rc=$?
    while IFS= read -r line; do
        case $line in
            "ok "*) n=$((n + 1)); echo "ok $n - [$cpu] ${line#ok * - }" ;;
            "not ok "*) n=$((n + 1)); failures=$((failures + 1))
                echo "not ok $n - [$cpu] ${line#not ok * - }" ;;
            1..*) plan=1 ;;
            *) echo "# [$cpu] $line" ;;
        esac
    done <"$log"
    check "[$cpu] test_neon_quant exits 0 after its plan line (status $rc)" \
        test "$rc" -eq 0 -a "$plan" -eq 1
}

run_on max 1 1
run_on cortex-a76 1 0
run_on cortex-a53 0 0
tap_done
