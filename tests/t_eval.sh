#!/usr/bin/env bash
# `llmc eval` on the trained model of models/ against ONNX Runtime
# (scripts/ort_eval.js) on a slice of its held-out text: the tokenizer.json
# read by the JS reference gives the ids train_tiny.py's own BPE encoder
# gives; llmc's f32 perplexity is within 0.1% of ONNX Runtime's; w8a8 is
# within 1% of f32 and w4a8 within 5%; bad id files are
# refused with the byte offset or token they fail at.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/eval
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
MODEL=models/tiny-llama.onnx
TOKENIZER=models/tokenizer.json
CONTEXT=128 STRIDE=64
# About 1500 tokens: whole lines from the start of the held-out text.
head -c 6000 models/heldout.txt | sed '$d' >"$WORK/slice.txt"

# ONNX Runtime's perplexity (ort.txt) and the reference tokenizer's ids
# (slice.ids), from the tests' cache (tests/cache.sh): keyed by the scripts,
# the packages, the model, the tokenizer, the text and the window.  A failed
# run is not cached: it runs again into $WORK for the checks to show.
. tests/cache.sh
ort_eval() {   # ort_eval DIR: ort.txt and slice.ids into DIR
    node scripts/ort_eval.js "$MODEL" --text "$WORK/slice.txt" --tokenizer "$TOKENIZER" \
        --dump-ids "$1/slice.ids" --context $CONTEXT --stride $STRIDE >"$1/ort.txt" 2>&1
}
cache_ort_env
ORT_EVAL=$LLMC_CACHE/ort/eval-$(cache_digest "ort_eval $CONTEXT $STRIDE $CACHE_ORT_ENV" \
    scripts/ort_eval.js scripts/ort_generate.js .deps/node_modules/@huggingface/tokenizers/package.json \
    "$MODEL" "$TOKENIZER" "$WORK/slice.txt")
cache_fill "$ORT_EVAL" ort_eval && cp "$ORT_EVAL/ort.txt" "$ORT_EVAL/slice.ids" "$WORK/" || ort_eval "$WORK"

python_ids() {   # train_tiny.py's encoder with the merges of tokenizer.json
    $PY - "$TOKENIZER" "$WORK/slice.txt" <<'PYEOF'
import json, sys
sys.path.insert(0, "scripts")
import train_tiny
tok = json.load(open(sys.argv[1], encoding="utf-8"))
merges = [tuple(m.split(" ")) for m in tok["model"]["merges"]]
specials = [t["content"] for t in sorted(tok["added_tokens"], key=lambda t: t["id"])]
enc = train_tiny.BpeEncoder(merges, specials)
assert enc.vocab == tok["model"]["vocab"], "vocab rebuilt from the merges differs"
print(",".join(map(str, enc.encode(open(sys.argv[2], encoding="utf-8").read()))))
PYEOF
}
python_ids >"$WORK/slice.py.ids"
check "JS reference ids equal train_tiny.py's encoder" \
    cmp "$WORK/slice.ids" "$WORK/slice.py.ids"

ppl_of() { sed -n 's/^perplexity \([0-9.]*\) .*/\1/p' "$1"; }
tokens_of() { sed -n 's/.* tokens \([0-9]*\) .*/\1/p' "$1"; }
for q in f32 w8a8 w4a8; do
    "$LLMC" compile "$MODEL" --quant $q --max-context $CONTEXT --tokenizer "$TOKENIZER" --quiet \
        -o "$WORK/$q.plan" >"$WORK/compile-$q.log" 2>&1
    "$LLMC" eval "$WORK/$q.plan" --text "$WORK/slice.txt" --context $CONTEXT --stride $STRIDE \
        >"$WORK/$q.txt" 2>&1
done
"$LLMC" eval "$WORK/f32.plan" --ids "$WORK/slice.ids" --context $CONTEXT --stride $STRIDE \
    >"$WORK/f32-ids.txt" 2>&1
check "f32: --text (the plan's tokenizer) and --ids (the JS reference's ids) give the same perplexity" \
    test "$(ppl_of "$WORK/f32.txt")" = "$(ppl_of "$WORK/f32-ids.txt")" -a -n "$(ppl_of "$WORK/f32.txt")"
ORT=$(ppl_of "$WORK/ort.txt") F32=$(ppl_of "$WORK/f32.txt")
W8=$(ppl_of "$WORK/w8a8.txt") W4=$(ppl_of "$WORK/w4a8.txt")
echo "# summary: perplexity on $(tokens_of "$WORK/f32.txt") tokens:" \
     "ORT ${ORT:-?} f32 ${F32:-?} w8a8 ${W8:-?} w4a8 ${W4:-?}"

N_IDS=$(tr ',' '\n' <"$WORK/slice.ids" | grep -c .)
# Overlapping windows score every token but the first: llmc and ORT alike.
check "llmc and ORT both score the $((N_IDS - 1)) tokens after the first" \
    test "$(tokens_of "$WORK/f32.txt")" = $((N_IDS - 1)) -a "$(tokens_of "$WORK/ort.txt")" = $((N_IDS - 1))
check "f32 perplexity $F32 within 0.1% of ONNX Runtime's $ORT" within "$F32" "$ORT" 0.001
check "w8a8 perplexity $W8 within 1% of f32's $F32" within "$W8" "$F32" 0.01
check "w4a8 perplexity $W4 within 5% of f32's $F32" within "$W4" "$F32" 0.05

exits_with() {   # exits_with CODE PATTERN command...: exit code and message
    local want=$1 pattern=$2; shift 2
    "$@" >"$WORK/bad.out" 2>&1; local got=$?
    cat "$WORK/bad.out"
    [ "$got" -eq "$want" ] && grep -q -- "$pattern" "$WORK/bad.out"
}
printf '1, 2,x3\n' >"$WORK/bad-char.ids"
printf '1 2 2048\n' >"$WORK/bad-vocab.ids"
printf '7\n' >"$WORK/one.ids"
check "a non-digit is refused with its byte offset" exits_with 3 "byte 5" \
    "$LLMC" eval "$WORK/f32.plan" --ids "$WORK/bad-char.ids"
check "an id outside the vocabulary is refused" exits_with 3 "id 2048 (token 2)" \
    "$LLMC" eval "$WORK/f32.plan" --ids "$WORK/bad-vocab.ids"
check "one id is too few" exits_with 3 "at least 2" "$LLMC" eval "$WORK/f32.plan" --ids "$WORK/one.ids"
check "eval --help prints usage and exits 0" sh -c "'$LLMC' eval --help | grep -q '^usage: llmc eval'"
check "eval without --ids or --text is a usage error" exits_with 2 "exactly one of --text FILE or --ids FILE" \
    "$LLMC" eval "$WORK/f32.plan"
check "a window beyond the plan's context is a usage error" exits_with 2 "max context" \
    "$LLMC" eval "$WORK/f32.plan" --ids "$WORK/slice.ids" --context $((CONTEXT + 1))
check "a stride longer than the window is a usage error" exits_with 2 "longer than the window" \
    "$LLMC" eval "$WORK/f32.plan" --ids "$WORK/slice.ids" --context 16 --stride 17
tap_done
