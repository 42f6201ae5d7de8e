#!/usr/bin/env bash
# The newcomer's tour: export a tiny LLaMA-style model with PyTorch, compile
# it to a plan, describe the plan, and generate 16 tokens with the runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=$BUILD/demo
mkdir -p "$out"
echo "== export (PyTorch, random weights, seed 1)"
/usr/bin/python3 scripts/export_llm.py --family llama --opset 17 --size tiny --seed 1 --out "$out/llama.onnx"
echo "== compile"
"$BUILD/llmc" compile "$out/llama.onnx" -o "$out/llama.plan" --max-context 256
echo "== inspect"
"$BUILD/llmc" inspect "$out/llama.plan"
echo "== run: prompt 5,17,42,7 -> 16 greedy tokens"
"$BUILD/llmc" run "$out/llama.plan" --prompt-ids 5,17,42,7 --max-new 16
