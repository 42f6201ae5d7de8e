#!/usr/bin/env bash
# `llmc run` generation flags on a tiny exported LLaMA: the greedy contract
# without flags (ids = argmax of the --logits-out rows), --temp 0 and
# --top-k 1 equal to greedy, seeds reproducible, top-k/top-p draws inside
# their candidate sets, --stop, and refused values.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/generate
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
exits_with() {   # exits_with CODE command...
    local want=$1; shift
    "$@"; local got=$?
    [ "$got" -eq "$want" ] || { echo "exit status $got, expected $want"; return 1; }
}

MODEL=$(zoo_export llama-op14-s5 --family llama --opset 14 --size tiny --seed 5 2>"$WORK/export.log")
PLAN=$WORK/llama.plan
check "the tiny llama compiles" "$LLMC" compile "$MODEL" -o "$PLAN" --max-context 64
PROMPT=3,14,15,92,65
run() { "$LLMC" run "$PLAN" --prompt-ids "$PROMPT" --max-new 12 "$@"; }
run --logits-out "$WORK/greedy.bin" >"$WORK/greedy.txt" 2>"$WORK/greedy.err"

# ids (file) against the logits rows (file): every id passes `test` (a python
# expression over row, tok), e.g. greedy: tok == argmax(row)
rows_check() {
    $PY - "$1" "$2" "$3" <<'PYEOF'
import sys
import numpy as np
ids = [int(t) for t in open(sys.argv[1]).read().split()]
rows = np.fromfile(sys.argv[2], dtype="<f4").reshape(len(ids), -1)
for k, (tok, row) in enumerate(zip(ids, rows)):
    order = np.argsort(-row, kind="stable")
    p = np.exp(row - row.max()); p /= p.sum()
    nucleus = order[: int(np.searchsorted(np.cumsum(p[order]), 0.5)) + 1]
    if not eval(sys.argv[3]):
        sys.exit("token %d: id %d fails %s" % (k, tok, sys.argv[3]))
print("%d ids checked" % len(ids))
PYEOF
}
check "greedy without flags: 12 ids, each the argmax of its --logits-out row" \
    rows_check "$WORK/greedy.txt" "$WORK/greedy.bin" "tok == int(np.argmax(row))"
same_as_greedy() { run "$@" >"$WORK/out.txt" && diff "$WORK/greedy.txt" "$WORK/out.txt"; }
check "--temp 0 is greedy" same_as_greedy --temp 0
check "--top-k 1 with a seed is greedy" same_as_greedy --top-k 1 --seed 9 --temp 2
check "--top-p 1e-6 is greedy" same_as_greedy --top-p 0.000001 --seed 4

run --temp 1.5 --seed 7 >"$WORK/s7a.txt"
run --temp 1.5 --seed 7 >"$WORK/s7b.txt"
run --temp 1.5 --seed 8 >"$WORK/s8.txt"
check "same seed, same ids" diff "$WORK/s7a.txt" "$WORK/s7b.txt"
check "another seed, other ids" sh -c "! cmp -s '$WORK/s7a.txt' '$WORK/s8.txt'"
check "sampled output is 12 ids" sh -c "[ \$(wc -w <'$WORK/s7a.txt') -eq 12 ]"

run --top-k 5 --seed 3 --logits-out "$WORK/k5.bin" >"$WORK/k5.txt"
check "--top-k 5: every id among the 5 highest logits of its row" \
    rows_check "$WORK/k5.txt" "$WORK/k5.bin" "tok in order[:5]"
run --top-p 0.5 --temp 1 --seed 3 --logits-out "$WORK/p5.bin" >"$WORK/p5.txt"
check "--top-p 0.5: every id inside the nucleus of its row" \
    rows_check "$WORK/p5.txt" "$WORK/p5.bin" "tok in nucleus"

STOP=$(cut -d' ' -f4 "$WORK/greedy.txt")
run --stop "$STOP,999999" >"$WORK/stop.txt"
expect_stop() {
    $PY - "$WORK/greedy.txt" "$WORK/stop.txt" "$STOP" <<'PYEOF'
import sys
greedy = open(sys.argv[1]).read().split()
got = open(sys.argv[2]).read().split()
want = greedy[: greedy.index(sys.argv[3]) + 1]
sys.exit(0 if got == want else "got %s, want %s" % (got, want))
PYEOF
}
check "--stop ends generation after the first stop id" expect_stop

check "--top-p 0 is refused (exit 2)" exits_with 2 run --top-p 0
check "--top-p 1.5 is refused (exit 2)" exits_with 2 run --top-p 1.5
check "--temp -1 is refused (exit 2)" exits_with 2 run --temp -1
check "--seed x is refused (exit 2)" exits_with 2 run --seed x
check "--stop with a bad list is refused (exit 2)" exits_with 2 run --stop '1,,2'
check "run --help documents the sampling flags" sh -c "'$LLMC' run --help | grep -q -- '--top-p P'"
tap_done
