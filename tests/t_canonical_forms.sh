#!/usr/bin/env bash
# Held-out export forms that must fuse like the zoo's reference forms (TAP).
# Each form is exported with scripts/export_llm.py (tests' cache), compiled
# with `llmc compile` and checked for:
#   - fused: ops per decoder layer equal to the reference form's;
#   - onnxruntime's ids and logits (within 1e-4 * max|logit|) for a 7-token
#     prompt + 16 greedy steps (scripts/ort_generate.js on the same file).
# Forms:
#   rotary-only  llama, q[..., :head_dim] rotated, the empty rest dropped
#                (identity Slices, removed by the identity pass)
#   rotary-cat   llama, the same with the empty q[..., head_dim:] concatenated
#   rotary1-hf   transformers' Phi at partial_rotary_factor 1.0
#   gelu-tanh    phi with F.gelu(approximate="tanh") (torch's decomposed export)
#   gelu-tanh16  that model in float16 compute (scripts/make_fp16.py): GELU
#                constants rounded to float16
# and position tables: gpt2 (learned wpe) and phi (cached RoPE cos/sin) with
# 128 rows compile without --max-context to a plan of max context 128 that
# fuses as the 256-row reference does, and --max-context 1024 is refused
# naming the table, with nothing written.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/canonical_forms
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
PROMPT=5,17,42,7,99,3,250
MAX_NEW=16

# export TAG ARG...: the model.onnx of export_llm.py ARG... (tiny, seed 0)
export_form() {
    local tag=$1
    shift
    zoo_export "$tag-s0" --size tiny --seed 0 "$@"
}

# compiled TAG MODEL [ARG...]: compiles into $WORK/TAG.plan, log in TAG.log
compiled() {
    local tag=$1 model=$2
    shift 2
    "$LLMC" compile "$model" -o "$WORK/$tag.plan" "$@" >"$WORK/$tag.log" 2>&1
}

ops_per_layer() {   # ops_per_layer TAG
    sed -n 's/^ops per decoder layer: \([0-9]*\).*/\1/p' "$WORK/$1.log"
}

# same_fusion TAG REF: TAG's plan has REF's ops per layer and attention in every layer
same_fusion() {
    local got want
    got=$(ops_per_layer "$1") want=$(ops_per_layer "$2")
    grep "ops per decoder layer" "$WORK/$1.log" "$WORK/$2.log"
    [ -n "$got" ] && [ "$got" = "$want" ] && ! grep -q "attention fused in only" "$WORK/$1.log"
}

# matches_ort TAG MODEL: llmc's ids and logits against onnxruntime's
matches_ort() {
    local tag=$1 model=$2 ort_ids
    ort_ids=$(ort_generate "$model" "$WORK/$tag.ort.bin" --prompt-ids "$PROMPT" --max-new "$MAX_NEW") || return 1
    "$LLMC" run "$WORK/$tag.plan" --prompt-ids "$PROMPT" --max-new "$MAX_NEW" \
        --logits-out "$WORK/$tag.llmc.bin" >"$WORK/$tag.llmc.ids" || return 1
    echo "ort : $ort_ids"
    echo "llmc: $(cat "$WORK/$tag.llmc.ids")"
    [ "$ort_ids" = "$(cat "$WORK/$tag.llmc.ids")" ] &&
        "$PY" scripts/compare_logits.py "$WORK/$tag.ort.bin" "$WORK/$tag.llmc.bin" --vocab 512 --rtol 1e-4
}

# form TAG REF_TAG REF_ARGS -- FORM_ARGS: export both, compile at 256, check
form() {
    local tag=$1 ref=$2 ref_args=() args=() model ref_model
    shift 2
    while [ "$1" != "--" ]; do ref_args+=("$1"); shift; done
    shift
    args=("$@")
    if ! ref_model=$(export_form "$ref" "${ref_args[@]}") || ! model=$(export_form "$tag" "${args[@]}"); then
        check "$tag: exported" false
        return
    fi
    check "$tag: compiles" compiled "$tag" "$model" --max-context 256
    compiled "$ref" "$ref_model" --max-context 256
    check "$tag: fuses to the ops per layer of $ref" same_fusion "$tag" "$ref"
    check "$tag: ids and logits match onnxruntime" matches_ort "$tag" "$model"
}

form llama-rotary-only llama-op17 --family llama --opset 17 -- --family llama --opset 17 --rotary-slice only
form llama-rotary-cat llama-op17 --family llama --opset 17 -- --family llama --opset 17 --rotary-slice cat
form phi-rotary1-hf phi-op17-hf --family phi --opset 17 --style hf -- \
    --family phi --opset 17 --style hf --rotary-fraction 1.0
form phi-gelu-tanh phi-op17 --family phi --opset 17 -- --family phi --opset 17 --act gelu_tanh
form phi-gelu-tanh-op14 phi-op14 --family phi --opset 14 -- --family phi --opset 14 --act gelu_tanh
form gpt2-gelu-tanh gpt2-op17 --family gpt2 --opset 17 -- --family gpt2 --opset 17 --act gelu_tanh
check "phi-gelu-tanh: activation-fusion makes 2 tanh GELUs" grep "2 gelu (2 tanh form)" "$WORK/phi-gelu-tanh.log"

# float16 compute: the GELU constants are float16's
fp16_gelu() {
    local model
    model=$(export_form phi-op17 --family phi --opset 17 --act gelu_tanh) &&
        "$PY" scripts/make_fp16.py "$model" "$WORK/gelu16.onnx" --form compute16 &&
        compiled gelu-tanh16 "$WORK/gelu16.onnx" --max-context 256 &&
        grep "activation-fusion" "$WORK/gelu-tanh16.log" | grep "2 gelu (2 tanh form)" &&
        same_fusion gelu-tanh16 phi-gelu-tanh
}
check "phi-gelu-tanh in float16 compute: 2 tanh GELUs fused, ops per layer of float32" fp16_gelu

# position tables of 128 rows
positions() {   # positions FAMILY TABLE
    local family=$1 table=$2 model
    model=$(export_form "$family-op17-pos128" --family "$family" --opset 17 --max-positions 128) || return 1
    check "$family, 128 positions: compiles without --max-context" compiled "$family-pos128" "$model"
    check "$family, 128 positions: the plan's max context is 128" \
        grep -qx "max context 128 tokens" <("$LLMC" inspect "$WORK/$family-pos128.plan")
    check "$family, 128 positions: fuses to the ops per layer of the 256-position model" \
        same_fusion "$family-pos128" "$family-op17"
    check "$family, 128 positions: ids and logits match onnxruntime" matches_ort "$family-pos128" "$model"
    refused() {
        ! compiled refused "$model" --max-context 1024 && [ ! -e "$WORK/refused.plan" ] &&
            grep -q "error: --max-context 1024 is more than the 128 rows of position table '$table'" "$WORK/refused.log"
        local rc=$?
        cat "$WORK/refused.log"
        return $rc
    }
    check "$family, 128 positions: --max-context 1024 is refused naming '$table', nothing written" refused
}
compiled gpt2-op17 "$(export_form gpt2-op17 --family gpt2 --opset 17)" --max-context 256
positions gpt2 wpe.weight
compiled phi-op17 "$(export_form phi-op17 --family phi --opset 17)" --max-context 256
positions phi /rope/Constant_output_0   # torch writes the cos buffer as a Constant
tap_done
