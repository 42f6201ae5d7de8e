#!/usr/bin/env bash
# The op budget of a fused decoder layer, for both export styles (our own
# torch modules and transformers' eager modeling code, `--style hf`): at
# most 8 plan ops per layer for LLaMA, Qwen2 and GPT-2 and 6 for Phi (its
# attention and MLP read one LayerNorm), measured by scripts/op_counts.py
# (3-layer minus 2-layer export) beside ONNX Runtime's own optimized graph.
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
BUILD=${BUILD:-build}
WORK=$BUILD/op_counts
mkdir -p "$WORK"
/usr/bin/python3 scripts/op_counts.py --llmc "$BUILD/llmc" --work "$WORK" >"$WORK/table.txt" 2>&1
rc=$?
sed 's/^/# /' "$WORK/table.txt"
check "op_counts.py ran on every family, opset and style" test "$rc" -eq 0 -a -s "$WORK/table.txt"
per_layer() { awk -v m="$1" '$1 == m {print $8}' "$WORK/table.txt"; }
for m in llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@14 gpt2@17 phi@14 phi@17 \
         llama@14:hf llama@17:hf qwen2@14:hf qwen2@17:hf gpt2@14:hf gpt2@17:hf phi@14:hf phi@17:hf; do
    limit=8
    [ "${m%%@*}" = phi ] && limit=6
    count=$(per_layer "$m")
    check "$m: ${count:-?} plan ops per decoder layer (<= $limit)" test -n "$count" -a "${count:-99}" -le "$limit"
done
echo "# summary: ops per layer $(awk '$5 == "|" {printf "%s=%s ", $1, $8}' "$WORK/table.txt")"
tap_done
