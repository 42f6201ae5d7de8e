#!/usr/bin/env bash
# Issue 3's op budget: at most 10 plan ops per decoder layer for every family
# and opset, measured by scripts/op_counts.py (3-layer minus 2-layer export)
# beside ONNX Runtime's own optimized graph.
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
BUILD=${BUILD:-build}
WORK=$BUILD/op_counts
mkdir -p "$WORK"
/usr/bin/python3 scripts/op_counts.py --llmc "$BUILD/llmc" --work "$WORK" >"$WORK/table.txt" 2>&1
rc=$?
sed 's/^/# /' "$WORK/table.txt"
check "op_counts.py ran on every family and opset" test "$rc" -eq 0 -a -s "$WORK/table.txt"
per_layer() { awk -v m="$1" '$1 == m {print $8}' "$WORK/table.txt"; }
for m in llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@17 phi@14 phi@17; do
    count=$(per_layer "$m")
    check "$m: ${count:-?} plan ops per decoder layer (<= 10)" test -n "$count" -a "${count:-99}" -le 10
done
echo "# summary: ops per layer $(awk '$5 == "|" {printf "%s=%s ", $1, $8}' "$WORK/table.txt")"
tap_done
