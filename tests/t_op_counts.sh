#!/usr/bin/env bash
# The op budget of a fused decoder layer, for every file kind of
# scripts/op_counts.py (our own torch modules, transformers' eager and SDPA
# modeling code, transformers.js' fp16 files, optimum's merged decoders,
# onnxruntime-genai's builder files, ...): at
# most 8 plan ops per layer for LLaMA, Qwen2 and GPT-2 and 6 for Phi (its
# attention and MLP read one LayerNorm), measured by scripts/op_counts.py
# (3-layer minus 2-layer export) beside ONNX Runtime's own optimized graph.
# Exports at opsets 18 and 21 (torch's opset 17 raised by
# scripts/onnx_opset_upgrade.py) fuse to the same ops per layer as opset 17,
# and every other kind to the same ops as the transformers-style export;
# --quant w4a8 and w8a8 plans to the float plan's ops per layer.
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
BUILD=${BUILD:-build}
WORK=$BUILD/op_counts
mkdir -p "$WORK"
# op_counts.py exports into --work unless a file there is newer than the
# exporter.  Its exports are kept in the tests' cache (tests/zoo.sh), keyed
# by op_counts.py (the export arguments), the exporter and ZOO_ENV: the
# folder's models are removed, the cached ones copied in (fresh files, so
# it takes them), and what it exported is stored after it passed.
. tests/zoo.sh
rm -f "$WORK"/*.onnx
EXPORTS=$LLMC_CACHE/op_counts/exports-$(cache_digest "op_counts | $ZOO_ENV" scripts/op_counts.py \
    scripts/export_llm.py scripts/hf_models.py scripts/onnx_opset_upgrade.py scripts/export_genai.py \
    scripts/make_fp16.py scripts/merge_decoders.py scripts/quantize_onnx.py)
keep_exports() {   # keep_exports DIR: the exports of $WORK (not ONNX Runtime's optimized models)
    find "$WORK" -maxdepth 1 -name '*.onnx' ! -name '*.ort.onnx' -exec cp {} "$1/" \;
}
[ -d "$EXPORTS" ] && cp "$EXPORTS"/*.onnx "$WORK/"
/usr/bin/python3 scripts/op_counts.py --llmc "$BUILD/llmc" --work "$WORK" >"$WORK/table.txt" 2>&1
rc=$?
[ "$rc" -eq 0 ] && cache_fill "$EXPORTS" keep_exports
sed 's/^/# /' "$WORK/table.txt"
check "op_counts.py ran on every family, opset and kind" test "$rc" -eq 0 -a -s "$WORK/table.txt"
per_layer() { awk -v m="$1" '$1 == m {print $8}' "$WORK/table.txt"; }
layer_ops() { awk -v m="$1" '$1 == m {$1 = $2 = $3 = $4 = $5 = $6 = $7 = $8 = ""; print}' "$WORK/table.txt"; }
# base_of M: the row M must equal op for op: the opset-17 export of the same
# kind for a higher opset, the transformers-style export for another kind
# (at opset 17 for onnxruntime-genai's builder, which writes opset 21).
base_of() {
    local family=${1%%@*} rest=${1#*@} kind=plain
    local opset=${rest%%:*}
    [ "$rest" != "$opset" ] && kind=${rest#*:}
    if [ "${kind%%-*}" = genai ]; then echo "$family@17:hf"
    elif [ "$opset" -gt 17 ]; then echo "${1/@$opset/@17}"
    elif [ "$kind" != plain ] && [ "$kind" != hf ]; then echo "$family@$opset:hf"
    fi
}
# every row of the table (op_counts.py's VARIANTS: family@opset[:kind])
for m in $(awk '$5 == "|" {print $1}' "$WORK/table.txt"); do
    limit=8
    [ "${m%%@*}" = phi ] && limit=6
    case ${m%%@*} in gemma*) limit=10 ;; esac   # four norms a layer
    count=$(per_layer "$m")
    check "$m: ${count:-?} plan ops per decoder layer (<= $limit)" test -n "$count" -a "${count:-99}" -le "$limit"
    base=$(base_of "$m")
    [ -n "$base" ] && check "$m: the same plan ops per layer as $base ($(layer_ops "$m" | xargs))" \
        test -n "$(layer_ops "$m" | xargs)" -a "$(layer_ops "$m")" = "$(layer_ops "$base")"
done
# Quantized plans: a quantized Linear quantizes its own x, so --quant w4a8
# and w8a8 keep the float plan's layer (llmc inspect's ops_per_layer): 8,
# phi 6, with no QuantizeRows left.
ops_per_layer() { "$BUILD/llmc" inspect "$1" --json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["ops_per_layer"])'; }
quant_summary=""
for family in llama qwen2 gpt2 phi; do
    limit=8
    [ "$family" = phi ] && limit=6
    model=$(zoo_model "$family" 17) || { check "$family@17 exports" false; continue; }
    "$BUILD/llmc" compile "$model" -o "$WORK/$family-f32.plan" --max-context 128 >/dev/null 2>&1
    float=$(ops_per_layer "$WORK/$family-f32.plan")
    for mode in w4a8 w8a8; do
        plan=$WORK/$family-$mode.plan
        "$BUILD/llmc" compile "$model" -o "$plan" --max-context 128 --quant "$mode" >/dev/null 2>&1
        got=$(ops_per_layer "$plan")
        quant_summary="$quant_summary $family@17:$mode=${got:-?}"
        check "$family@17 --quant $mode: ${got:-?} plan ops per decoder layer, the float plan's ${float:-?} (<= $limit), no QuantizeRows" \
            sh -c "[ -n '$got' ] && [ '$got' = '$float' ] && [ '$got' -le $limit ] &&
                   ! '$BUILD/llmc' inspect '$plan' | grep -q '^  QuantizeRows '"
    done
done
echo "# summary: ops per layer $(awk '$5 == "|" {printf "%s=%s ", $1, $8}' "$WORK/table.txt")$quant_summary"
tap_done
