#!/usr/bin/env bash
# onnxruntime-genai's LongRoPE form (scripts/export_genai.py --longrope,
# tests/zoo.sh's genai-longrope; TAP): an If on Greater(total sequence
# length, 256) selects the long or the short factors' cos/sin caches.
#   - at --max-context 256 every reachable length is <= 256: the comparison
#     folds to false over the plan's bounds and the If takes else_branch
#     (tests/t_e2e_llm.sh checks tokens and logits against ONNX Runtime)
#   - at --max-context 512 both branches are reachable: the compile fails,
#     naming the If node, its condition, the threshold and the way out
#     (--max-context <= 256), and leaves no plan
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
BUILD=${BUILD:-build}
WORK=$BUILD/genai_longrope
mkdir -p "$WORK"
rm -f "$WORK"/*
. tests/zoo.sh
IF_NODE=/model/rotemb_caches_subgraph/If

model=$(zoo_spec_model phi3@17:genai-longrope 2>"$WORK/export.log") || cat "$WORK/export.log"

"$BUILD/llmc" compile "$model" -o "$WORK/short.plan" --max-context 256 >"$WORK/short.log" 2>&1
check "--max-context 256 compiles (else_branch: the short factors' caches)" test -s "$WORK/short.plan"
check "the compile log says the If kept both branches for shape inference to decide" \
    grep -q "If '$IF_NODE': both branches inlined" "$WORK/short.log"

"$BUILD/llmc" compile "$model" -o "$WORK/long.plan" --max-context 512 >"$WORK/long.log" 2>&1
rc=$?
check "--max-context 512 is refused (exit $rc)" test "$rc" -ne 0
check "the refusal names the If node, Greater(P+S, 256) and --max-context <= 256" \
    grep -q "node '$IF_NODE' .*Greater(P+S, 256).*--max-context 512 reaches both; compile with --max-context <= 256" \
    "$WORK/long.log"
check "no plan is left at the output path" test ! -e "$WORK/long.plan"
sed 's/^/# /' "$WORK/long.log"
tap_done
