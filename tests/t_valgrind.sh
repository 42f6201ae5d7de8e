#!/usr/bin/env bash
# valgrind memcheck over the compiler and the runtime: `llmc compile` of a
# tiny LLaMA-style model, then `llmc run` of a 4-token prompt and 32 decode
# steps.  Each must report 0 errors and leak nothing (definitely,
# indirectly or possibly lost; blocks still reachable at exit are listed
# in the log, not counted).  Under SAN=1 the binaries carry ASan, which
# valgrind cannot run: the checks are skipped there (the plain build runs
# them).
# tier: plain-only (valgrind cannot run ASan binaries)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
WORK=$BUILD/test-data/valgrind
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh

if grep -q -- '-fsanitize' <<<"${SAN_FLAGS:-}"; then
    echo "ok 1 # skip valgrind cannot run ASan-instrumented binaries (SAN=1); the plain build runs this test"
    echo "1..1"
    exit 0
fi

memcheck() {   # memcheck NAME command... : valgrind clean, log in $WORK/NAME.vg
    local name=$1; shift
    valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite,indirect,possible --show-leak-kinds=all \
        --log-file="$WORK/$name.vg" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
    local rc=$?
    grep -E 'ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|All heap blocks' "$WORK/$name.vg"
    [ "$rc" -eq 0 ] || { echo "exit status $rc"; cat "$WORK/$name.err"; return 1; }
    grep -q 'ERROR SUMMARY: 0 errors' "$WORK/$name.vg"
}

MODEL=$WORK/llama.onnx
check "tiny model exported" /usr/bin/python3 scripts/export_llm.py --family llama --opset 14 \
    --size tiny --seed 4 --out "$MODEL"
check "llmc compile under memcheck: 0 errors, 0 leaks" \
    memcheck compile "$LLMC" compile "$MODEL" -o "$WORK/llama.plan" --max-context 64
check "llmc run (prompt + 32 decode steps) under memcheck: 0 errors, 0 leaks" \
    memcheck run "$LLMC" run "$WORK/llama.plan" --prompt-ids 1,7,42,300 --max-new 32
check "memcheck's run generated 32 tokens" \
    sh -c "tr -c '0-9\n' ' ' <'$WORK/run.out' | wc -w | grep -qx '3[2-9]\|[4-9][0-9]'"
tap_done
