#!/usr/bin/env bash
# The firmware demo's plan: the trained model of models/ compiled w4a8 for
# target generic with its tokenizer and a 64-token context, into
# $BUILD/firmware-demo/demo.plan (left untouched when the bytes are the
# same, so makes do not rebuild); prints its path.  scripts/firmware_demo.sh
# runs it on the boards, scripts/firmware_core.sh sizes the core linked
# with its op resolver.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PLAN=$BUILD/firmware-demo/demo.plan
mkdir -p "$(dirname "$PLAN")"
"$BUILD/llmc" compile models/tiny-llama.onnx --target generic --quant w4a8 \
    --tokenizer models/tokenizer.json --max-context 64 --quiet -o "$PLAN.new" >/dev/null
cmp -s "$PLAN.new" "$PLAN" 2>/dev/null && rm "$PLAN.new" || mv "$PLAN.new" "$PLAN"
echo "$PLAN"
