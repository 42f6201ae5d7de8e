#!/usr/bin/env bash
# The Qwen2-0.5B-shaped export (hidden 896, 24 layers, 14 heads, 2 KV heads,
# intermediate 4864, vocab 151936; ~2.5 GB of fp32 weights in torch's
# one-file-per-tensor external data) compiled and run end to end.
# Prints the compile's wall time and peak RSS (which must stay well below
# two copies of the weights), the plan size, and greedy tokens from llmc and
# from ONNX Runtime on the same file.  Not part of `make check` (minutes, GBs).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DIR=$BUILD/big
MODEL=$DIR/qwen2-0.5b.onnx
PROMPT=${PROMPT:-5,17,42,7}
MAX_NEW=${MAX_NEW:-8}
mkdir -p "$DIR"
if [ ! -s "$MODEL" ]; then
    echo "== export (PyTorch, random weights; takes about a minute)"
    /usr/bin/python3 scripts/export_llm.py --family qwen2 --opset 14 --size qwen2-0.5b --seed 0 --out "$MODEL"
fi
echo "== model: $(du -sh "$DIR" | cut -f1) in $(ls "$DIR" | wc -l) files"
echo "== compile"
/usr/bin/time -f "compile: %e s wall, peak RSS %M KiB" \
    "$BUILD/llmc" compile "$MODEL" -o "$DIR/qwen2-0.5b.plan" --max-context 512 | tail -2
echo "== plan: $(stat -c %s "$DIR/qwen2-0.5b.plan") bytes"
"$BUILD/llmc" verify "$DIR/qwen2-0.5b.plan"
echo "== run ($MAX_NEW greedy tokens)"
/usr/bin/time -f "llmc run: %e s wall, peak RSS %M KiB" \
    "$BUILD/llmc" run "$DIR/qwen2-0.5b.plan" --prompt-ids "$PROMPT" --max-new "$MAX_NEW" \
    --logits-out "$DIR/llmc.bin" | tee "$DIR/llmc.tok"
/usr/bin/time -f "onnxruntime: %e s wall, peak RSS %M KiB" \
    node scripts/ort_generate.js "$MODEL" --prompt-ids "$PROMPT" --max-new "$MAX_NEW" \
    --logits-out "$DIR/ort.bin" | tee "$DIR/ort.tok"
cmp -s "$DIR/llmc.tok" "$DIR/ort.tok" && echo "tokens: identical" || echo "tokens: DIFFER"
/usr/bin/python3 scripts/compare_logits.py "$DIR/ort.bin" "$DIR/llmc.bin" --vocab 151936 --rtol 1e-4
