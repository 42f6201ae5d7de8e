#!/usr/bin/env bash
# Weight bytes that change after a plan was opened (a bit flipped in flash
# or RAM), on the trained model's plan:
#   - llmc verify hashes every segment: a plan with one bit flipped in the
#     middle of the file is refused, naming a segment whose bytes hold it;
#   - llmc_rt_plan_reverify (driven by tests/soak/soak.c, which holds the
#     plan in its own memory and flips bit 0 of a weight's middle byte after
#     T generated tokens) names the segment, the tensor and a byte range
#     holding the flipped byte; generation with the session option
#     "re-verify every N tokens" stops with that error within N tokens of
#     the flip instead of running on;
#   - without a flip the option changes nothing: llmc run --reverify 1 and
#     --reverify 5 give the ids and logits of a run without it, which are
#     ONNX Runtime's greedy ids on the same ONNX file; the soak driver's
#     reference context is the same with and without the option.
# needs: soak-bin
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
SOAK=$BUILD/soak/llmc-soak
WORK=$BUILD/test-data/reverify
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/cache.sh
MODEL=models/tiny-llama.onnx
PLAN=$WORK/tiny.plan
PROMPT=913,431,423,44,1145,410,298 # "And God said, Let there be"

check "compile the trained model (max context 64)" \
    "$LLMC" compile "$MODEL" --tokenizer models/tokenizer.json --max-context 64 --quiet -o "$PLAN"

# ---- llmc verify: a bit flipped in the file ----
size=$(stat -c %s "$PLAN")
flip_at=$((size / 2))
flip_file() {   # flip_file IN OUT BYTE: bit 0 of byte BYTE flipped
    /usr/bin/python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[int(sys.argv[3])] ^= 1; open(sys.argv[2], "wb").write(b)' "$@"
}
flip_file "$PLAN" "$WORK/flipped.plan" "$flip_at"
"$LLMC" verify "$WORK/flipped.plan" >"$WORK/verify.out" 2>"$WORK/verify.err"
check "llmc verify refuses the plan with bit 0 of byte $flip_at flipped (exit 6)" test $? -eq 6
# "segment K: xxhash64 of SIZE bytes at OFFSET does not match"
read -r seg_size seg_off <<<"$(sed -n 's/.*segment [0-9]*: xxhash64 of \([0-9]*\) bytes at \([0-9]*\) does not match.*/\1 \2/p' "$WORK/verify.err")"
check "... naming the segment that holds byte $flip_at (${seg_size:-?} bytes at ${seg_off:-?})" \
    test -n "${seg_off:-}" -a "${seg_off:-1}" -le "$flip_at" -a "$flip_at" -lt "$((${seg_off:-0} + ${seg_size:-0}))"
check "llmc verify accepts the plan itself" "$LLMC" verify "$PLAN"
"$LLMC" run "$WORK/flipped.plan" --prompt-ids "$PROMPT" --max-new 4 --reverify 100 >/dev/null 2>"$WORK/run_flipped.err"
check "llmc run --reverify refuses the flipped plan at open (exit 6)" test $? -eq 6
check "... with the hash mismatch" grep -q "weight segment hash mismatch\|does not match" "$WORK/run_flipped.err"

# ---- llmc_rt_plan_reverify and the session option, a bit flipped in memory ----
# flipped TENSOR AFTER EVERY: the driver's output in $WORK/TENSOR.out/.err, its exit status
flipped() {
    "$SOAK" "$PLAN" --tokens 400 --reverify "$3" --flip-tensor "$1" --flip-after "$2" \
        >"$WORK/$1.out" 2>"$WORK/$1.err"
}
for case in "embed_tokens.weight 100 50" "norm.weight 130 25"; do
    read -r tensor after every <<<"$case"
    flipped "$tensor" "$after" "$every"
    rc=$?
    byte=$(sed -n 's/^flipped bit 0 of byte \([0-9]*\) .*/\1/p' "$WORK/$tensor.out")
    msg=$(sed -n 's/^reverify: //p' "$WORK/$tensor.out")
    read -r lo hi <<<"$(sed -n 's/.*segment [0-9]* ([^)]*): xxhash64 of its [0-9]* bytes at \[\([0-9]*\), \([0-9]*\)).*/\1 \2/p' <<<"$msg")"
    check "$tensor: llmc_rt_plan_reverify after the flip: weight segment hash mismatch naming $tensor" \
        grep -q "^reverify: weight segment hash mismatch: segment [0-9]* ($tensor): " "$WORK/$tensor.out"
    check "$tensor: ... and a byte range [${lo:-?}, ${hi:-?}) holding the flipped byte ${byte:-?}" \
        test -n "${byte:-}" -a -n "${lo:-}" -a "${lo:-1}" -le "${byte:-0}" -a "${byte:-0}" -lt "${hi:-0}"
    stopped=$(sed -n 's/^llmc-soak: generation stopped after \([0-9]*\) tokens$/\1/p' "$WORK/$tensor.err")
    check "$tensor: generation re-verifying every $every tokens stops (exit 6) after the flip at $after, within $every tokens (at ${stopped:-?})" \
        test "$rc" -eq 6 -a -n "${stopped:-}" -a "${stopped:-0}" -ge "$after" -a "${stopped:-0}" -le "$((after + every))"
    check "$tensor: ... with the hash mismatch naming $tensor" \
        grep -q "^llmc-soak: feed: weight segment hash mismatch: re-verified after [0-9]* tokens: segment [0-9]* ($tensor)" "$WORK/$tensor.err"
done
"$SOAK" "$PLAN" --tokens 200 --flip-tensor norm.weight --flip-after 70 >"$WORK/nohook.out" 2>&1
rc=$?
check "without the option the same flip goes unnoticed: generation runs to the end, on other logits (exit 1, the soak's reference context differs)" \
    bash -c "test $rc -eq 1 && grep -q '^last reference context: DIFFERS' '$WORK/nohook.out'"

# ---- no flip: the option changes nothing ----
"$LLMC" run "$PLAN" --prompt-ids "$PROMPT" --max-new 24 --logits-out "$WORK/plain.bin" >"$WORK/plain.ids" 2>"$WORK/plain.err"
check "llmc run without --reverify" test $? -eq 0
for every in 1 5; do
    check "llmc run --reverify $every: the same ids and bitwise the same logits" \
        bash -c "'$LLMC' run '$PLAN' --prompt-ids $PROMPT --max-new 24 --reverify $every --logits-out '$WORK/r$every.bin' >'$WORK/r$every.ids' &&
                 cmp '$WORK/plain.ids' '$WORK/r$every.ids' && cmp '$WORK/plain.bin' '$WORK/r$every.bin'"
done
ref=$(ort_generate "$MODEL" "$WORK/ort.bin" --prompt-ids "$PROMPT" --max-new 24)
check "... which are ONNX Runtime's greedy ids ($ref)" test -n "$ref" -a "$ref" = "$(cat "$WORK/plain.ids")"
"$SOAK" "$PLAN" --tokens 300 >"$WORK/soak_plain.out" 2>&1
check "the soak driver without the option: soak ok" grep -q "^soak ok" "$WORK/soak_plain.out"
"$SOAK" "$PLAN" --tokens 300 --reverify 7 >"$WORK/soak_rv.out" 2>&1
check "with --reverify 7: soak ok, the first context's ids unchanged" \
    bash -c "grep -q '^soak ok' '$WORK/soak_rv.out' && diff <(grep '^ids' '$WORK/soak_plain.out') <(grep '^ids' '$WORK/soak_rv.out')"
tap_done
