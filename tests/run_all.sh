#!/usr/bin/env bash
# Runs the tests of one tier, TEST_JOBS at a time (default: nproc), and
# prints a line per test in a fixed order (unit tests, then tests/t_*.sh,
# each by name), a table of the tests' wall times (slowest first) and the
# closing line "N passed, N failed".
# Tests speak TAP: each check is a line "ok N - what" or "not ok N - what".
#   build/tests/test_*   unit tests (tests/unit/test_*.c): every tier
#   tests/t_*.sh         end-to-end tests (CLI, ONNX Runtime parity, conformance)
# A test that exits non-zero without reporting a failed check counts as one
# failure, so a crash can never pass silently; so does one that runs longer
# than TEST_TIMEOUT seconds (default 900).
#
# Tiers (TIER): `make check` runs the tier plain, every test;
# `make check SAN=1` (the ASan + UBSan build) runs the tier san, which leaves
# out the tests whose header holds the line
#   # tier: plain-only (why)
# (the fuzz campaign, whose targets are sanitizer builds in every tier; the
# cross-compiled and firmware runs under qemu; the install test; valgrind).
# A header line "# needs: TARGET..." names the make targets a test needs
# beyond `make all unit`; `make check` builds those of its tier's tests.
#   tests/run_all.sh --list     prints the tier's tests, one a line
#   tests/run_all.sh --needs    prints the make targets they need
# TESTS="name..." runs only those of the tier's tests.
#
# Every test gets a scratch folder of its own, $BUILD/tmp/NAME, as TMPDIR;
# its output goes to $BUILD/test-logs/NAME.log.  Tests start longest first
# (the wall times of the last run, $BUILD/test-logs/times.txt, else the
# plain build's, else the order of SLOW_FIRST below) so that the longest
# one does not start last.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
# the tier: san for a sanitizer build (SAN_FLAGS, set by `make check`), else plain
case ${SAN_FLAGS:-} in *-fsanitize*) TIER=${TIER:-san} ;; *) TIER=${TIER:-plain} ;; esac
export BUILD
# Model exports and reference outputs, shared by the build folders (tests/cache.sh).
export LLMC_CACHE=${LLMC_CACHE:-build/cache}
case $TIER in
    plain|san) ;;
    *) echo "run_all.sh: unknown TIER '$TIER' (plain or san)" >&2; exit 2 ;;
esac

# The header of a test: its leading comment lines.
header() { awk 'NR > 1 && !/^#/ { exit } { print }' "$1"; }
in_tier() {   # in_tier SCRIPT
    [ "$TIER" = plain ] || ! header "$1" | grep -q '^# tier: plain-only\b'
}

# The tier's tests: name, then the command that runs it.
declare -A cmd
names=()
for t in tests/t_*.sh; do
    [ -f "$t" ] && in_tier "$t" || continue
    name=$(basename "$t" .sh)
    cmd[$name]="bash $t"
    names+=("$name")
done
case ${1:-} in
    --list) printf '%s\n' "$(for t in "$BUILD"/tests/test_*; do [ -x "$t" ] && basename "$t"; done)" "${names[@]}" |
                grep .; exit 0 ;;
    --needs) for name in "${names[@]}"; do header "tests/$name.sh" | sed -n 's/^# needs: //p'; done |
                 tr ' ' '\n' | grep . | sort -u; exit 0 ;;
    "") ;;
    *) echo "usage: tests/run_all.sh [--list | --needs]" >&2; exit 2 ;;
esac
unit=()
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    cmd[$name]=$t
    unit+=("$name")
done
names=("${unit[@]}" "${names[@]}")
if [ -n "${TESTS:-}" ]; then
    picked=()
    for name in "${names[@]}"; do
        case " $TESTS " in *" $name "*) picked+=("$name") ;; esac
    done
    names=("${picked[@]}")
fi

log_dir=$BUILD/test-logs
mkdir -p "$log_dir"
jobs=${TEST_JOBS:-$(nproc)}

# Start order: longest first by the last run's times; tests without a time
# in SLOW_FIRST's order, the rest by name.  (Longest first on 2 cores: the
# plain tier's t_fuzz alone takes a third of its test time.)
SLOW_FIRST="t_fuzz t_e2e_llm t_fp16 t_calibrate t_npu t_embed t_quant t_kvcache t_onnx_conformance
            t_op_counts t_golden t_npu_export t_attention_fusion t_tokenizer t_eval"
times=$log_dir/times.txt
[ -s "$times" ] || times=build/test-logs/times.txt
declare -A est
if [ -s "$times" ]; then
    while read -r name secs; do est[$name]=$secs; done <"$times"
fi
rank=0
for name in $SLOW_FIRST; do
    rank=$((rank + 1))
    [ -n "${est[$name]:-}" ] || est[$name]=$((100000 - rank))
done
mapfile -t order < <(for name in "${names[@]}"; do echo "${est[$name]:-0} $name"; done |
                     sort -k1,1gr -k2,2 | cut -d' ' -f2)

# run_one NAME: runs the test (in the background), then writes
# NAME.result: "passed failed seconds".
run_one() {
    local name=$1 log=$log_dir/$1.log tmp=$BUILD/tmp/$1 start end rc ok notok
    rm -rf "$tmp" && mkdir -p "$tmp"
    start=$EPOCHREALTIME
    TMPDIR=$(realpath "$tmp") timeout "${TEST_TIMEOUT:-900}" ${cmd[$name]} >"$log" 2>&1 </dev/null
    rc=$?
    end=$EPOCHREALTIME
    ok=$(grep -c '^ok ' "$log")
    notok=$(grep -c '^not ok ' "$log")
    if [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then
        notok=1
        if [ "$rc" -eq 124 ]; then
            echo "not ok - $name timed out after ${TEST_TIMEOUT:-900} s" >>"$log"
        else
            echo "not ok - $name exited with status $rc" >>"$log"
        fi
    fi
    echo "$ok $notok $(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')" >"$log_dir/$name.result.tmp"
    mv "$log_dir/$name.result.tmp" "$log_dir/$name.result"
}

passed=0 failed=0 shown=0
# Prints the lines of the tests, in the order of $names, whose results are in.
show_ready() {
    local name ok notok secs
    while [ "$shown" -lt "${#names[@]}" ]; do
        name=${names[shown]}
        [ -f "$log_dir/$name.result" ] || return 0
        read -r ok notok secs <"$log_dir/$name.result"
        passed=$((passed + ok))
        failed=$((failed + notok))
        printf '%-40s %5d passed %5d failed %8.1f s\n' "$name" "$ok" "$notok" "$secs"
        grep '^# summary: ' "$log_dir/$name.log" | sed 's/^# summary: /    /'
        if [ "$notok" -ne 0 ]; then
            grep -A3 '^not ok' "$log_dir/$name.log" | head -40 | sed 's/^/    /'
        fi
        shown=$((shown + 1))
    done
}

for name in "${names[@]}"; do rm -f "$log_dir/$name.result"; done
wall_start=$EPOCHREALTIME
running=0 next=0
while [ "$next" -lt "${#order[@]}" ] || [ "$running" -gt 0 ]; do
    while [ "$running" -lt "$jobs" ] && [ "$next" -lt "${#order[@]}" ]; do
        run_one "${order[next]}" &
        running=$((running + 1)) next=$((next + 1))
    done
    wait -n
    running=$((running - 1))
    show_ready
done
wall_end=$EPOCHREALTIME

# The wall times, slowest first; kept for the next run's start order.
for name in "${names[@]}"; do
    read -r _ _ secs <"$log_dir/$name.result"
    echo "$name $secs"
done | sort -k2,2gr >"$log_dir/times.new"
[ -n "${TESTS:-}" ] || cp "$log_dir/times.new" "$log_dir/times.txt"
echo
echo "wall time per test, slowest first (tier $TIER, $jobs at a time):"
awk '{ printf "  %-38s %8.1f s\n", $1, $2; sum += $2 }
     END { printf "  %-38s %8.1f s\n", "(sum)", sum }' "$log_dir/times.new"
awk -v s="$wall_start" -v e="$wall_end" 'BEGIN { printf "  %-38s %8.1f s\n", "(wall)", e - s }'
rm -f "$log_dir/times.new"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
