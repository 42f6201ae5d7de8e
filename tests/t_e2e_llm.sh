#!/usr/bin/env bash
# End-to-end LLM parity: llmc vs ONNX Runtime on tiny random decoder models.
#
# For each family@opset: export a tiny model (tests/zoo.sh, from the tests'
# cache) and
# compile it with `llmc compile` (the whole pass pipeline: fused attention
# with the runtime's own KV cache).  Then for prompts of 1, 7 and 64 tokens,
# each followed by 32 greedy decode steps, run ONNX Runtime
# (scripts/ort_generate.js, its outputs kept in the tests' cache:
# tests/cache.sh) and `llmc run`, and check (TAP):
#   - the generated token ids are identical
#   - every logits row is within 1e-4 * max|ref logit| (scripts/compare_logits.py)
# and, once per variant, that attention fusion took every decoder layer (the
# compile log's attention-fusion line), so no export shape loses its fusion
# silently.
# If $BUILD/llmc does not exist the llmc checks are reported as `not ok`.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=/usr/bin/python3          # Debian python: has torch + onnx (pyenv python does not)
MAX_NEW=32
VOCAB=512                    # tiny size vocabulary
# family@opset[:option], the options of tests/zoo.sh's zoo_model: hf
# (transformers' modeling code), triu / where-additive (other causal masks),
# single / per-tensor (external weight files), genai (onnxruntime-genai's
# model-builder graph: GroupQueryAttention, SkipSimplifiedLayerNormalization,
# Phi-2's SkipLayerNormalization and FastGelu;
# genai-rotary with RotaryEmbedding nodes; genai-softcap with
# GroupQueryAttention's score soft-cap; genai-longrope with the If between
# LongRoPE's long and short caches, over a pretraining context of 256 =
# the --max-context compiled here, so the short ones).  mistral's sliding window of 16 is
# crossed by the 64-token prompt and the decode steps.  Opsets above 17 are torch's opset 17
# export raised by scripts/onnx_opset_upgrade.py.
# phi4: phi3 in Phi-4-mini's shape (hf style: GQA, rotary 0.75, LongRoPE, tied).
VARIANTS=${E2E_VARIANTS:-"llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@14 gpt2@17 phi@14 phi@17 qwen2@14:single gpt2@17:per-tensor
    llama@14:hf llama@17:hf qwen2@14:hf qwen2@17:hf gpt2@14:hf gpt2@17:hf phi@14:hf phi@17:hf
    llama@14:triu phi@17:triu gpt2@17:where-additive
    llama@17:sdpa qwen2@14:sdpa
    llama@17:genai qwen2@17:genai phi@17:genai llama@17:genai-rotary qwen2@17:genai-rotary
    phi@17:genai-rotary
    llama@18 qwen2@18:hf gpt2@18 phi@18:hf qwen2@21 gpt2@21:hf
    qwen3@17 qwen3@17:hf qwen3@14
    llama32@17 llama32@17:hf smollm2@17:hf smollm3@17 smollm3@17:hf granite@17 granite@17:hf olmo2@17 olmo2@17:hf
    phi3@17 phi3@17:hf phi3@17:phi4 phi3@17:genai
    mistral@17 mistral@17:hf mistral@17:genai llama@17:genai-softcap
    gemma2@17 gemma2@17:hf gemma3@17 gemma3@17:hf
    qwen3@17:genai llama32@17:genai smollm3@17:genai granite@17:genai
    phi3@17:genai-longrope gemma2@17:genai gemma3@21:genai"}

WORK=$BUILD/e2e_llm
mkdir -p "$WORK"
. tests/zoo.sh

check_no=0
failures=0
ok()     { check_no=$((check_no + 1)); echo "ok $check_no - $1"; }
not_ok() { check_no=$((check_no + 1)); failures=$((failures + 1)); echo "not ok $check_no - $1"; }
diag()   { sed 's/^/# /' "$@"; }

# Prompts of 1, 7 and 64 tokens (ids below the tiny vocabulary).
PROMPTS="5 5,17,42,7,99,3,250 $(seq -s, 0 63 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i * 37 + 11) % 512}')"

run_ort() {
    local model=$1 base=$2 prompt=$3
    ort_generate "$model" "$base.ort.bin" --prompt-ids "$prompt" --max-new "$MAX_NEW" \
        >"$base.ort.tok" 2>"$base.ort.log"
}

run_llmc() {
    local plan=$1 base=$2 prompt=$3
    "$BUILD/llmc" run "$plan" --prompt-ids "$prompt" --max-new "$MAX_NEW" \
        --logits-out "$base.llmc.bin" >"$base.llmc.tok" 2>"$base.llmc.log"
}

compile_llmc() {
    local model=$1 plan=$2
    [ -x "$BUILD/llmc" ] && "$BUILD/llmc" compile "$model" -o "$plan" --max-context 256 >"$plan.log" 2>&1
}

# Two checks per prompt; any failure before comparing fails both.
test_prompt() {
    local name=$1 model=$2 plan=$3 base=$4 prompt=$5 why=$6
    if [ -z "$why" ] && ! run_ort "$model" "$base" "$prompt"; then
        why="onnxruntime failed"; diag "$base.ort.log"
    elif [ -z "$why" ] && ! run_llmc "$plan" "$base" "$prompt"; then
        why="llmc run failed"; diag "$base.llmc.log"
    fi
    if [ -n "$why" ]; then
        not_ok "$name: tokens match onnxruntime ($why)"
        not_ok "$name: logits within 1e-4 of onnxruntime ($why)"
        return
    fi
    if cmp -s "$base.ort.tok" "$base.llmc.tok"; then
        ok "$name: tokens match onnxruntime"
    else
        not_ok "$name: tokens match onnxruntime"
        echo "# ort : $(cat "$base.ort.tok")"
        echo "# llmc: $(cat "$base.llmc.tok")"
    fi
    if "$PY" scripts/compare_logits.py "$base.ort.bin" "$base.llmc.bin" \
            --vocab "$VOCAB" --rtol 1e-4 >"$base.cmp.log" 2>&1; then
        ok "$name: logits within 1e-4 of onnxruntime"
    else
        not_ok "$name: logits within 1e-4 of onnxruntime"
    fi
    diag "$base.cmp.log"
}

# check_fused NAME LOG WHY: the log's "attention-fusion ... K of N layers fused" has K = N > 0.
check_fused() {
    local line
    line=$(grep -oE 'attention-fusion .* [0-9]+ of [0-9]+ layers fused' "$2" 2>/dev/null | grep -oE '[0-9]+ of [0-9]+ layers')
    if [ -z "$3" ] && [ -n "$line" ] && [ "${line%% of *}" = "$(echo "${line#* of }" | cut -d' ' -f1)" ] &&
       [ "${line%% of *}" -gt 0 ]; then
        ok "$1: attention fused in $line"
    else
        not_ok "$1: attention fused in every layer (${3:-${line:-no attention-fusion line}})"
    fi
}

test_variant() {
    local spec=${1%:*} option=""
    [ "$spec" != "$1" ] && option=${1#*:}
    local family=${spec%@*} opset=${spec#*@}
    local name="$family opset $opset" tag=$family-op$opset${option:+-$option}
    case $option in
        hf) name="$name, transformers style" ;;
        sdpa) name="$name, transformers style with SDPA attention" ;;
        triu|where-additive) name="$name, $option mask" ;;
        genai) name="$name, onnxruntime-genai builder form" ;;
        genai-rotary) name="$name, onnxruntime-genai builder form with RotaryEmbedding" ;;
        phi4) name="$name, transformers style, Phi-4-mini shape (GQA, rotary 0.75, LongRoPE, tied)" ;;
        genai-softcap) name="$name, onnxruntime-genai builder form with softcap 2" ;;
        genai-longrope) name="$name, onnxruntime-genai builder form with LongRoPE's If over two cache pairs" ;;
        ?*) name="$name, $option external data" ;;
    esac
    local model plan=$WORK/$tag.plan why=""
    rm -f "$WORK/$tag".*
    if ! model=$(zoo_spec_model "$1" 2>"$WORK/$tag.export.log"); then
        why="export failed"; diag "$WORK/$tag.export.log"
    elif ! compile_llmc "$model" "$plan"; then
        why="llmc compile failed"; [ -f "$plan.log" ] && diag "$plan.log"
    fi
    check_fused "$name" "$plan.log" "$why"
    local prompt
    for prompt in $PROMPTS; do
        local n=$(echo "$prompt" | tr , '\n' | wc -l)
        test_prompt "$name, $n-token prompt + $MAX_NEW" "$model" "$plan" "$WORK/$tag-p$n" "$prompt" "$why"
    done
}

set -- $VARIANTS
zoo_prefetch "$@"
echo "1..$(($# * 7))"
for variant in "$@"; do
    test_variant "$variant"
done
[ "$failures" -eq 0 ]
