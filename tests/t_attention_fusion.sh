#!/usr/bin/env bash
# Attention and RoPE fusion on the exported tiny families (TAP).
#
# For each family@opset: export a tiny model (tests/zoo.sh, from the tests'
# cache), compile it with --dump-passes and read the IR
# dumped after attention-fusion.  Every layer must be fused: one
# llmc.Attention per past_key_values.N.key input of the import, no Softmax
# left, no past/present in the graph I/O, and for the RoPE families no Neg
# left (every rotate-half became an llmc.Rope).  The dumps are written
# before codegen, so this does not need codegen to lower llmc.Attention.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MAX_CONTEXT=256              # the tiny models' RoPE tables hold 256 positions
# family@opset[:option], the options of tests/zoo.sh's zoo_model: hf
# (transformers' modeling code), triu / where-additive (other causal masks).
VARIANTS="llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@17 phi@14 phi@17
          llama@14:hf llama@17:hf qwen2@14:hf qwen2@17:hf gpt2@14:hf gpt2@17:hf phi@14:hf phi@17:hf
          llama@14:triu phi@17:triu gpt2@17:where-additive"
WORK=$BUILD/attention_fusion
mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh

# The compile may fail in codegen (llmc.Attention lowering): only the dump counts.
dump_passes() {
    local model=$1 dir=$2
    rm -rf "$dir"
    "$BUILD/llmc" compile "$model" -o "$dir.plan" --max-context "$MAX_CONTEXT" --explain \
        --dump-passes "$dir" >"$dir.log" 2>&1
    ls "$dir"/*-attention-fusion.txt
}

count() { grep -c -E "$1" "$2"; }
equal() { [ "$1" -eq "$2" ] || { echo "got $1, want $2"; return 1; }; }
no_fusion_refusals() { ! grep -E '(attention|rope)-fusion: .* not fused' "$1"; }

for variant in $VARIANTS; do
    spec=${variant%:*} option=""
    [ "$spec" != "$variant" ] && option=${variant#*:}
    family=${spec%@*} opset=${spec#*@}${option:+ ($option)} dir=$WORK/${spec%@*}-op${spec#*@}${option:+-$option}
    model=$(zoo_spec_model "$variant")
    check "$family opset $opset: exported" test -s "$model"
    check "$family opset $opset: passes dumped" dump_passes "$model" "$dir"
    after=$(ls "$dir"/*-attention-fusion.txt)
    layers=$(count '^input +past_key_values\.[0-9]+\.key ' "$dir/00-import.txt")
    check "$family opset $opset: $layers layers in the import" test "$layers" -gt 0
    check "$family opset $opset: one llmc.Attention per layer" \
        equal "$(count '^node +llmc\.Attention ' "$after")" "$layers"
    check "$family opset $opset: no Softmax left" equal "$(count '^node +Softmax ' "$after")" 0
    check "$family opset $opset: no past/present graph I/O" \
        equal "$(count '^(input|output) +(past|present)' "$after")" 0
    check "$family opset $opset: no fusion refused (--explain)" no_fusion_refusals "$dir.log"
    if [ "$family" != gpt2 ]; then
        check "$family opset $opset: every rotate-half became llmc.Rope (no Neg left)" \
            equal "$(count '^node +Neg ' "$after")" 0
    fi
done
tap_done
