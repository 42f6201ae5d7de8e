#!/usr/bin/env bash
# Speculative decoding (llmc run --speculate K, llmc_rt_speculate_step):
#   - greedy with K = 1, 4, 8 prints exactly plain greedy's ids on tiny
#     llama, mistral (sliding window 16, crossed by the 64-token prompt and
#     the generated tokens) and gemma2 (windowed and global layers
#     alternating), for prompts of 1, 7 and 64 tokens and a repetitive one,
#     and exactly plain greedy's text on the trained model (models/) for a
#     passage of models/heldout.txt quoted again and for a short prompt,
#     also after a chunked prefill (--npu-chunk 8, --delegate cpu);
#     drafts are verified on the repetitive prompts, and accepted on the
#     trained model's (the rates are printed);
#   - sampling with --speculate runs, and a seed repeats its ids
#     (tests/unit/test_rt_speculate.c checks its distribution);
#   - rewind: tests/speculate/rewind_check.c (bitwise logits after a
#     rewind, refusal past a sliding window's span) on the same plans;
#   - --draft PLAN: the ids stay plain greedy's, a plan drafting for itself
#     has every draft accepted;
#   - refusals: a plan compiled with --logits last (naming --logits all), a
#     draft plan of another vocabulary (naming both), K outside 1..32.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/speculate
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
MAX_NEW=40

setup() {
    local family model
    for family in llama mistral gemma2; do
        model=$(zoo_model $family 17) || return 1
        "$BUILD/llmc" compile "$model" -o "$WORK/$family.plan" --max-context 256 --quiet || return 1
    done
    "$BUILD/llmc" compile "$(zoo_model llama 17)" -o "$WORK/llama-last.plan" --max-context 256 \
        --logits last --quiet || return 1
    "$BUILD/llmc" compile models/tiny-llama.onnx -o "$WORK/trained.plan" --max-context 512 \
        --tokenizer models/tokenizer.json --quiet || return 1
    # SAN_FLAGS: a sanitizer build's archives need its runtime
    gcc -std=c11 -Wall -Wextra -Werror -O2 -g ${SAN_FLAGS:-} -D_POSIX_C_SOURCE=200809L \
        -D_ISOC11_SOURCE -Iruntime -Itests/unit tests/speculate/rewind_check.c \
        "$BUILD/libllmcrt.a" -lm -o "$WORK/rewind_check"
}
check "export and compile the plans, build rewind_check" setup

# --stats' acceptance line: "... N drafted, A accepted (R%), T tokens per step"
accepted_of() { sed -n 's/.* \([0-9]*\) accepted (.*/\1/p' "$1"; }
drafted_of() { sed -n 's/.* \([0-9]*\) drafted, .*/\1/p' "$1"; }
rate_of() { sed -n 's/.* accepted (\([0-9.]*%\)), \([0-9.]*\) tokens per step/\1 kept, \2 tokens per step/p' "$1"; }

# same_ids PLAN NAME K ARGS...: --speculate K (with --draft $DRAFT if set)
# prints what plain decoding prints.
same_ids() {
    local plan=$1 name=$2 k=$3
    shift 3
    "$BUILD/llmc" run "$plan" "$@" --max-new $MAX_NEW >"$WORK/$name.plain" 2>&1 || return 1
    "$BUILD/llmc" run "$plan" "$@" --max-new $MAX_NEW --speculate "$k" --stats ${DRAFT:+--draft "$DRAFT"} \
        >"$WORK/$name.k$k" 2>"$WORK/$name.k$k.log" || { cat "$WORK/$name.k$k.log"; return 1; }
    cmp "$WORK/$name.plain" "$WORK/$name.k$k" || { head -c 400 "$WORK/$name.plain" "$WORK/$name.k$k"; return 1; }
}
count() { echo "$1" | tr , '\n' | wc -l; }

SHORT=5,17,42,7,99,3,250
LONG=$(seq -s, 0 63 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i * 37 + 11) % 512}')
REPEAT=$(for i in 1 2 3 4 5 6; do printf '%s,' "$SHORT,1,2,3,4,5"; done | sed 's/,$//')
for family in llama mistral gemma2; do
    for prompt in 5 "$SHORT" "$LONG" "$REPEAT"; do
        for k in 1 4 8; do
            check "$family, a prompt of $(count "$prompt") tokens, greedy: --speculate $k gives plain decoding's ids" \
                same_ids "$WORK/$family.plan" "$family-$(count "$prompt")" $k --prompt-ids "$prompt"
        done
    done
    # a random model does not continue the repetition: drafts are made, few kept
    log=$WORK/$family-$(count "$REPEAT").k4.log
    check "$family, repetitive prompt, --speculate 4: drafts were verified ($(rate_of "$log"))" \
        test "$(drafted_of "$log")" -gt 0
done

# The trained model: a held-out passage, then its first line quoted again.
PASSAGE="$(head -c 700 models/heldout.txt)
Quote: $(sed -n 2p models/heldout.txt | cut -c1-60)"
for k in 1 4 8; do
    check "trained model, quoted passage: --speculate $k gives plain greedy's text" \
        same_ids "$WORK/trained.plan" trained-quote $k --prompt "$PASSAGE"
    check "trained model, short prompt: --speculate $k gives plain greedy's text" \
        same_ids "$WORK/trained.plan" trained-short $k --prompt "The king said unto"
done
check "trained model, quoted passage, --speculate 4: drafts accepted ($(rate_of "$WORK/trained-quote.k4.log"))" \
    test "$(accepted_of "$WORK/trained-quote.k4.log")" -gt 0

# --logits-out with --speculate: each token's row, from the verifying feed;
# a feed of several rows accumulates in another order than one row, so the
# rows agree with plain decoding's to rounding, not bitwise.
rows_close() {
    "$BUILD/llmc" run "$WORK/trained.plan" --prompt "$PASSAGE" --max-new $MAX_NEW \
        --logits-out "$WORK/rows.plain" >/dev/null &&
    "$BUILD/llmc" run "$WORK/trained.plan" --prompt "$PASSAGE" --max-new $MAX_NEW --speculate 4 \
        --logits-out "$WORK/rows.k4" >/dev/null &&
    /usr/bin/python3 -c '
import sys, numpy as np
a, b = (np.fromfile(f, dtype=np.float32).reshape(-1, 2048) for f in sys.argv[1:])
d = np.abs(a - b).max() / np.abs(a).max()
print("rows", len(a), len(b), "max difference / max |logit|", d)
sys.exit(not (a.shape == b.shape and d <= 1e-5))' "$WORK/rows.plain" "$WORK/rows.k4"
}
check "trained model, --speculate 4 --logits-out: every token's row within 1e-5 of plain decoding's (relative to max |logit|)" \
    rows_close
cat "$WORK/last.log" | sed 's/^/# /'

bench_table() {
    printf 'The king said unto' >"$WORK/short.txt"
    "$BUILD/llmc" bench "$WORK/trained.plan" --speculate 4 -n 16 -r 1 -t 1 \
        --prompt-file "$WORK/short.txt" >"$WORK/bench.out" || return 1
    cat "$WORK/bench.out"
    grep -q '^| short.txt | [0-9]* + 16 |' "$WORK/bench.out" && grep -q 'ids identical' "$WORK/bench.out"
}
check "llmc bench --speculate 4 --prompt-file: a row for the prompt, ids identical to plain decoding" \
    bench_table

# A chunked prefill (--npu-chunk, --delegate cpu) fills the caches the
# speculative steps then extend and rewind.
npu_same() {
    head -c 4000 models/heldout.txt >"$WORK/calib.txt"
    "$BUILD/llmc" compile models/tiny-llama.onnx -o "$WORK/npu.plan" --max-context 512 --quiet \
        --tokenizer models/tokenizer.json --quant w8a8 --calibrate "$WORK/calib.txt" --npu-chunk 8 \
        >"$WORK/npu.log" 2>&1 || { cat "$WORK/npu.log"; return 1; }
    same_ids "$WORK/npu.plan" npu 4 --prompt "$PASSAGE" --delegate cpu
}
check "trained model, w8a8 --npu-chunk 8, prompt through --delegate cpu: --speculate 4 gives plain greedy's text" \
    npu_same

sampled() {
    local run
    for run in 1 2; do
        "$BUILD/llmc" run "$WORK/trained.plan" --prompt-ids "$REPEAT" --max-new $MAX_NEW \
            --speculate 4 --temp 0.7 --top-k 40 --seed 7 >"$WORK/sampled.$run" || return 1
    done
    cmp "$WORK/sampled.1" "$WORK/sampled.2" && test "$(wc -w <"$WORK/sampled.1")" -eq $MAX_NEW
}
check "sampling with --speculate 4 generates $MAX_NEW tokens, and the seed repeats them" sampled

# prompt lengths FIRST..LAST by 3: every offset of mistral's 16-position
# window, and across the caches' 64-position chunk edge
"$WORK/rewind_check" "$WORK/llama.plan" 1 48 3 "$WORK/mistral.plan" 10 90 3 \
    "$WORK/gemma2.plan" 10 90 3 "$WORK/trained.plan" 1 70 3 >"$WORK/rewind.tap" 2>&1
check "rewind_check ran to its end" grep -q '^1\.\.' "$WORK/rewind.tap"
while read -r line; do
    case $line in
        "ok "*) check "${line#ok * - }" true ;;
        "not ok "*) check "${line#not ok * - }" false ;;
        "#"*) echo "$line" ;;
    esac
done <"$WORK/rewind.tap"

# --draft PLAN: the target's own plan drafts exactly its greedy tokens;
# another model's drafts are mostly rejected; the ids stay plain greedy's.
for draft in llama mistral; do
    DRAFT=$WORK/$draft.plan check "llama with --draft $draft --speculate 4: plain decoding's ids" \
        same_ids "$WORK/llama.plan" "draft-$draft" 4 --prompt-ids "$LONG"
done
log=$WORK/draft-llama.k4.log
check "llama drafting for itself: every draft accepted ($(rate_of "$log"))" \
    sh -c "test '$(drafted_of "$log")' -gt 0 && test '$(drafted_of "$log")' -eq '$(accepted_of "$log")'"
refused_vocab() {
    ! "$BUILD/llmc" run "$WORK/trained.plan" --prompt-ids 5 --speculate 4 --draft "$WORK/llama.plan" \
        >/dev/null 2>"$WORK/vocab.err" && grep -q "512" "$WORK/vocab.err" && grep -q "2048" "$WORK/vocab.err"
}
check "a draft plan of another vocabulary is refused, naming both sizes" refused_vocab
sed 's/^/# /' "$WORK/vocab.err"

refused_last() {
    ! "$BUILD/llmc" run "$WORK/llama-last.plan" --prompt-ids "$SHORT" --max-new 8 --speculate 4 \
        >"$WORK/last.out" 2>"$WORK/last.err" &&
        grep -q -- "--logits last" "$WORK/last.err" && grep -q -- "--logits all" "$WORK/last.err" &&
        "$BUILD/llmc" run "$WORK/llama-last.plan" --prompt-ids "$SHORT" --max-new 8 >/dev/null
}
check "a plan compiled with --logits last is refused with --speculate, naming --logits all" \
    refused_last
sed 's/^/# /' "$WORK/last.err"
for k in 0 33; do
    check "--speculate $k is a usage error (exit 2)" \
        sh -c "'$BUILD/llmc' run '$WORK/llama.plan' --prompt-ids 5 --speculate $k 2>/dev/null; test \$? -eq 2"
done
tap_done
