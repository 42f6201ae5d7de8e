#!/usr/bin/env bash
# Chunked prefill's accuracy (paper 003 §3.3, shadow outliers): the trained
# model compiled w8a8 with --calibrate and --npu-chunk 32, evaluated on a
# slice of models/heldout.txt through the reference delegate, has a
# perplexity within 2% of the f32 plan's, with or without shadow outliers;
# with 1% synthetic outliers (clip at the 99th percentile) the shadow path
# brings it within 0.5% and beats no shadow.
# tier: plain-only (the delegate paths these evaluations run are t_npu's, which runs in every tier)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
WORK=$BUILD/test-data/npu_perplexity
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
MODEL=models/tiny-llama.onnx
TOKENIZER=models/tokenizer.json
CALIB=/usr/share/games/fortunes/fortunes    # Debian fortunes (scripts/deps.sh)
CONTEXT=128 STRIDE=64

compile() {   # compile OUT.plan LOG [options...]
    local out=$1 log=$2; shift 2
    "$LLMC" compile "$MODEL" --max-context $CONTEXT --tokenizer "$TOKENIZER" --quiet -o "$out" \
        "$@" >"$log" 2>&1
}
head -c 6000 models/heldout.txt | sed '$d' >"$WORK/slice.txt"
ppl() {   # ppl PLAN [options]
    local plan=$1; shift
    "$LLMC" eval "$plan" --text "$WORK/slice.txt" --context $CONTEXT --stride $STRIDE "$@" |
        sed -n 's/^perplexity \([0-9.]*\) .*/\1/p'
}
plans() {
    compile "$WORK/f32.plan" "$WORK/f32.log" &&
    compile "$WORK/c32.plan" "$WORK/c32.log" --quant w8a8 --calibrate "$CALIB" --npu-chunk 32 &&
    compile "$WORK/c32-noshadow.plan" "$WORK/ns.log" --quant w8a8 --calibrate "$CALIB" \
        --npu-chunk 32 --shadow-layers 0 &&
    compile "$WORK/p99-all.plan" "$WORK/p99a.log" --quant w8a8 --calibrate "$CALIB" \
        --npu-chunk 32 --calib-percentile 99 --shadow-layers 1 &&
    compile "$WORK/p99-none.plan" "$WORK/p99n.log" --quant w8a8 --calibrate "$CALIB" \
        --npu-chunk 32 --calib-percentile 99 --shadow-layers 0
}
check "compile f32 and four calibrated w8a8 plans with --npu-chunk 32" plans
F32=$(ppl "$WORK/f32.plan")
CH=$(ppl "$WORK/c32.plan" --delegate ref)
NS=$(ppl "$WORK/c32-noshadow.plan" --delegate ref)
A99=$(ppl "$WORK/p99-all.plan" --delegate ref)
N99=$(ppl "$WORK/p99-none.plan" --delegate ref)
echo "# perplexity: f32 $F32; chunked w8a8 on the delegate: shadow $CH, no shadow $NS;"
echo "#   1% outliers (clip at the 99th percentile): every Linear shadowed $A99, none $N99"
check "chunked w8a8 perplexity $CH within 2% of f32's $F32" within "$CH" "$F32" 0.02
check "without shadow outliers $NS, within 2% too" within "$NS" "$F32" 0.02
check "1% outliers, all shadowed: $A99 within 0.5% of f32's" within "$A99" "$F32" 0.005
check "... and better than none shadowed ($N99)" awk "BEGIN { exit !($A99 < $N99) }"

tap_done
