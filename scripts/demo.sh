#!/usr/bin/env bash
# The newcomer's tour: compile the small LLaMA-style model trained on the
# King James Bible and fortunes (models/, scripts/train_tiny.py) with its
# tokenizer into a plan, describe the plan, then generate text from a text
# prompt: the plan's tokenizer encodes it and decodes the tokens as they come.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=$BUILD/demo
mkdir -p "$out"
echo "== compile (models/tiny-llama.onnx + models/tokenizer.json, w8a8)"
"$BUILD/llmc" compile models/tiny-llama.onnx --tokenizer models/tokenizer.json --quant w8a8 \
    --max-context 256 -o "$out/tiny-llama.plan"
echo "== inspect"
"$BUILD/llmc" inspect "$out/tiny-llama.plan"
prompt="And God said unto Moses,"
echo "== run: \"$prompt\" -> 48 tokens (temperature 0.8, top-k 40, seed 1)"
"$BUILD/llmc" run "$out/tiny-llama.plan" --prompt "$prompt" --max-new 48 \
    --temp 0.8 --top-k 40 --seed 1
echo
