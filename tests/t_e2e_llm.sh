#!/usr/bin/env bash
# End-to-end LLM parity: llmc vs ONNX Runtime on tiny random decoder models.
#
# For each family@opset: export a tiny model (cached in $BUILD/models), run
# greedy decoding with ONNX Runtime (scripts/ort_generate.js), compile with
# `llmc compile` and decode with `llmc run`, then check (TAP):
#   - the generated token ids are identical
#   - every logits row is within 1e-4 * max|ref logit| (scripts/compare_logits.py)
# If $BUILD/llmc does not exist the llmc checks are reported as `not ok`.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=/usr/bin/python3          # Debian python: has torch + onnx (pyenv python does not)
PROMPT=5,17,42,7
MAX_NEW=16
VOCAB=512                    # tiny size vocabulary
SEED=0
# family@opset[:external-data layout]; the last two read their weights from
# external files (one file with offsets, and one file per tensor).
VARIANTS="llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@17 phi@14 phi@17 qwen2@14:single gpt2@17:per-tensor"

MODELS=$BUILD/models
WORK=$BUILD/e2e_llm
mkdir -p "$MODELS" "$WORK"

check_no=0
failures=0
ok()     { check_no=$((check_no + 1)); echo "ok $check_no - $1"; }
not_ok() { check_no=$((check_no + 1)); failures=$((failures + 1)); echo "not ok $check_no - $1"; }
diag()   { sed 's/^/# /' "$@"; }

# Export unless a model at least as new as the exporter is cached.
export_model() {
    local family=$1 opset=$2 external=$3 out=$4
    if [ -s "$out" ] && [ "$out" -nt scripts/export_llm.py ]; then return 0; fi
    rm -f "$out"
    if [ "$external" = none ]; then
        "$PY" scripts/export_llm.py --family "$family" --opset "$opset" --size tiny \
            --seed "$SEED" --out "$out.tmp.onnx" >"$out.log" 2>&1 \
            && mv "$out.tmp.onnx" "$out"
    else   # external data files are named after the .onnx: export in place
        "$PY" scripts/export_llm.py --family "$family" --opset "$opset" --size tiny \
            --seed "$SEED" --external "$external" --out "$out" >"$out.log" 2>&1
    fi
}

run_ort() {
    local model=$1 base=$2
    node scripts/ort_generate.js "$model" --prompt-ids "$PROMPT" --max-new "$MAX_NEW" \
        --logits-out "$base.ort.bin" >"$base.ort.tok" 2>"$base.ort.log"
}

run_llmc() {
    local model=$1 base=$2
    "$BUILD/llmc" compile "$model" -o "$base.plan" --max-context 256 >"$base.llmc.log" 2>&1 \
        && "$BUILD/llmc" run "$base.plan" --prompt-ids "$PROMPT" --max-new "$MAX_NEW" \
            --logits-out "$base.llmc.bin" >"$base.llmc.tok" 2>>"$base.llmc.log"
}

# Two checks per variant; any failure before comparing fails both.
test_variant() {
    local spec=${1%:*} external=none
    [ "$spec" != "$1" ] && external=${1#*:}
    local family=${spec%@*} opset=${spec#*@}
    local name="$family opset $opset" tag=$family-op$opset
    if [ "$external" != none ]; then name="$name, $external external data"; tag=$tag-$external; mkdir -p "$MODELS/$tag"; fi
    local model=$MODELS/$tag-s$SEED.onnx base=$WORK/$tag
    [ "$external" != none ] && model=$MODELS/$tag/model.onnx
    rm -f "$base".*
    local why=""
    if ! export_model "$family" "$opset" "$external" "$model"; then
        why="export failed"; diag "$model.log"
    elif ! run_ort "$model" "$base"; then
        why="onnxruntime failed"; diag "$base.ort.log"
    elif [ ! -x "$BUILD/llmc" ]; then
        why="$BUILD/llmc not built"
    elif ! run_llmc "$model" "$base"; then
        why="llmc failed"; diag "$base.llmc.log"
    fi
    if [ -n "$why" ]; then
        not_ok "$name: tokens match onnxruntime ($why)"
        not_ok "$name: logits within 1e-4 of onnxruntime ($why)"
        return
    fi
    if cmp -s "$base.ort.tok" "$base.llmc.tok"; then
        ok "$name: tokens match onnxruntime"
    else
        not_ok "$name: tokens match onnxruntime"
        echo "# ort : $(cat "$base.ort.tok")"
        echo "# llmc: $(cat "$base.llmc.tok")"
    fi
    if "$PY" scripts/compare_logits.py "$base.ort.bin" "$base.llmc.bin" \
            --vocab "$VOCAB" --rtol 1e-4 >"$base.cmp.log" 2>&1; then
        ok "$name: logits within 1e-4 of onnxruntime"
    else
        not_ok "$name: logits within 1e-4 of onnxruntime"
    fi
    diag "$base.cmp.log"
}

set -- $VARIANTS
echo "1..$(($# * 2))"
for variant in "$@"; do
    test_variant "$variant"
done
[ "$failures" -eq 0 ]
