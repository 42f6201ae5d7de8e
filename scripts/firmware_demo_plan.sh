#!/usr/bin/env bash
# The firmware demo's plan: the trained model of models/ compiled w4a8 for
# target generic with its tokenizer and a 64-token context, into
# $BUILD/firmware-demo/demo.plan (left untouched when the bytes are the
# same, so makes do not rebuild); prints its path.  scripts/firmware_demo.sh
# runs it on the boards, scripts/firmware_core.sh sizes the core linked
# with its op resolver.  Each run compiles into a file of its own and renames
# it over the plan, so runs at the same time (t_firmware_core and
# t_firmware_demo) never see a partial plan.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PLAN=$BUILD/firmware-demo/demo.plan
mkdir -p "$(dirname "$PLAN")"
NEW=$(mktemp "$PLAN.new.XXXXXX")
trap 'rm -f "$NEW"' EXIT
"$BUILD/llmc" compile models/tiny-llama.onnx --target generic --quant w4a8 \
    --tokenizer models/tokenizer.json --max-context 64 --quiet -o "$NEW" >/dev/null
cmp -s "$NEW" "$PLAN" 2>/dev/null || { chmod 644 "$NEW" && mv "$NEW" "$PLAN"; }
echo "$PLAN"
