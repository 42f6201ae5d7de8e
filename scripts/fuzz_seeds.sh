#!/usr/bin/env bash
# Seed corpora of the fuzz targets (tests/fuzz/), generated into
# $BUILD/fuzz/seeds/<target>/ (binary, not committed):
#   fuzz_onnx_import, fuzz_compile   every model.onnx of Debian's ONNX backend
#                                    node cases + tiny LLM exports (torch) in
#                                    every file kind llmc takes: SDPA
#                                    attention, float16 with float32 I/O,
#                                    optimum's merged decoder (If),
#                                    onnxruntime-genai's builder forms of
#                                    LLaMA and Phi-2 (contrib ops), q4
#                                    (MatMulNBits), int4
#                                    (GatherBlockQuantized), int8 (dynamic
#                                    quantization)
#   fuzz_onnx_tensor                 every test_data_set_*/*.pb of those cases
#   fuzz_plan_open                   plans `llmc compile` writes for all of them
#   fuzz_plan_run                    the same plans + an 8-byte seed each
#   fuzz_tokenizer                   tiny byte-level and SentencePiece
#                                    tokenizer.json files
#                                    (tests/make_tiny_tokenizer.py), their
#                                    compiled bytes cut from a plan, and
#                                    truncations of them; a plan compiled
#                                    --tokenizer also seeds fuzz_plan_open
# Does nothing when the seeds are newer than this script and the compiler;
# FORCE=1 regenerates.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
DATA=/usr/share/libonnx-testdata/data/node
SEEDS=$BUILD/fuzz/seeds
STAMP=$SEEDS/.done
PY=/usr/bin/python3

if [ "${FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$STAMP" -nt "$0" ] && [ "$STAMP" -nt "$LLMC" ]; then
    echo "fuzz_seeds: $SEEDS up to date"
    exit 0
fi
[ -x "$LLMC" ] || { echo "fuzz_seeds: $LLMC missing (run make)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "fuzz_seeds: $DATA missing (libonnx-testdata)" >&2; exit 1; }
rm -rf "$SEEDS"
for t in fuzz_onnx_import fuzz_compile fuzz_onnx_tensor fuzz_plan_open fuzz_plan_run fuzz_tokenizer; do
    mkdir -p "$SEEDS/$t"
done
models=$BUILD/fuzz/models
mkdir -p "$models"

# Tiny LLMs (vocab 512, hidden 64, 2 layers), weights inside the .onnx.
for spec in llama:14 qwen2:17 gpt2:14 phi:17; do
    family=${spec%:*} opset=${spec#*:}
    out=$models/$family-$opset.onnx
    if [ ! -s "$out" ] || [ scripts/export_llm.py -nt "$out" ]; then
        "$PY" scripts/export_llm.py --family "$family" --opset "$opset" --size tiny --seed 1 \
            --out "$out.tmp.onnx" >"$out.log" 2>&1 && mv "$out.tmp.onnx" "$out" ||
            { echo "fuzz_seeds: export of $family@$opset failed (see $out.log)" >&2; exit 1; }
    fi
    cp "$out" "$SEEDS/fuzz_onnx_import/llm-$family-$opset.onnx"
    cp "$out" "$SEEDS/fuzz_compile/llm-$family-$opset.onnx"
    "$LLMC" compile "$out" -o "$SEEDS/fuzz_plan_open/llm-$family-$opset.plan" \
        --max-context 32 >/dev/null
done

# The other file kinds, from llama exports (each seeds both ONNX targets).
kind_seed() {   # kind_seed NAME COMMAND...: COMMAND writes $models/NAME.onnx
    local name=$1 out=$models/$1.onnx
    shift
    if [ ! -s "$out" ] || [ "$0" -nt "$out" ]; then
        "$@" >"$out.log" 2>&1 || { echo "fuzz_seeds: $name failed (see $out.log)" >&2; exit 1; }
    fi
    cp "$out" "$SEEDS/fuzz_onnx_import/llm-$name.onnx"
    cp "$out" "$SEEDS/fuzz_compile/llm-$name.onnx"
}
hf() { "$PY" scripts/export_llm.py --family llama --opset 17 --size tiny --seed 1 --style hf "$@"; }
kind_seed llama-sdpa hf --attn sdpa --out "$models/llama-sdpa.onnx"
kind_seed llama-hf hf --out "$models/llama-hf.onnx"
kind_seed llama-no-past hf --no-past --out "$models/llama-no-past.onnx"
kind_seed llama-merged "$PY" scripts/merge_decoders.py "$models/llama-no-past.onnx" "$models/llama-hf.onnx" \
    --out "$models/llama-merged.onnx"
kind_seed llama-keepio16 "$PY" scripts/make_fp16.py "$models/llama-hf.onnx" "$models/llama-keepio16.onnx" \
    --form keepio16
kind_seed llama-genai "$PY" scripts/export_genai.py --family llama --opset 21 --seed 1 \
    --out "$models/llama-genai.onnx"
# Phi-2's builder form at opset 17: SkipLayerNormalization and FastGelu
kind_seed phi-genai "$PY" scripts/export_genai.py --family phi --opset 17 --seed 1 \
    --out "$models/phi-genai.onnx"
for form in q4 int4 int8; do
    kind_seed "llama-$form" "$PY" scripts/quantize_onnx.py --form "$form" "$models/llama-14.onnx" \
        "$models/llama-$form.onnx"
done

# Tokenizers: tokenizer.json files, the compiled form (cut from a plan's
# tokenizer segment: "LTOK" and its recorded size) and truncated copies.
tok=$SEEDS/fuzz_tokenizer
for style in byte-level sentencepiece; do
    "$PY" tests/make_tiny_tokenizer.py "$models/tok-$style" --style "$style"
    cp "$models/tok-$style/tokenizer.json" "$tok/$style.json"
    head -c 3000 "$tok/$style.json" >"$tok/$style-cut.json"
    "$LLMC" compile "$models/qwen2-17.onnx" --tokenizer "$models/tok-$style/tokenizer.json" \
        -o "$SEEDS/fuzz_plan_open/llm-qwen2-17-tok-$style.plan" --max-context 32 >/dev/null
    "$PY" - "$SEEDS/fuzz_plan_open/llm-qwen2-17-tok-$style.plan" "$tok/$style.ltok" <<'PYEOF'
import struct, sys
plan = open(sys.argv[1], "rb").read()
at = plan.rindex(b"LTOK")
size = struct.unpack_from("<I", plan, at + 4 * 26)[0]   # TOK_H_TOTAL_SIZE
open(sys.argv[2], "wb").write(plan[at:at + size])
PYEOF
done

for dir in "$DATA"/*/; do
    name=$(basename "$dir")
    [ -f "$dir/model.onnx" ] || continue
    cp "$dir/model.onnx" "$SEEDS/fuzz_onnx_import/$name.onnx"
    cp "$dir/model.onnx" "$SEEDS/fuzz_compile/$name.onnx"
    for pb in "$dir"/test_data_set_*/*.pb; do
        [ -f "$pb" ] || continue
        set_name=$(basename "$(dirname "$pb")")
        cp "$pb" "$SEEDS/fuzz_onnx_tensor/$name-$set_name-$(basename "$pb")"
    done
    # Cases whose shape operands are graph inputs do not compile alone: skipped.
    timeout 20 "$LLMC" compile "$dir/model.onnx" -o "$SEEDS/fuzz_plan_open/$name.plan" \
        --max-context 16 >/dev/null 2>&1 || rm -f "$SEEDS/fuzz_plan_open/$name.plan"
done

# Plan + 8-byte little-endian seed, two seeds per plan.
for plan in "$SEEDS"/fuzz_plan_open/*.plan; do
    base=$SEEDS/fuzz_plan_run/$(basename "$plan" .plan)
    { cat "$plan"; printf '\001\000\000\000\000\000\000\000'; } >"$base-1.bin"
    { cat "$plan"; printf '\347\003\000\000\000\000\000\200'; } >"$base-2.bin"
done

for t in "$SEEDS"/*/; do
    printf 'fuzz_seeds: %-18s %5d files %8d KiB\n' "$(basename "$t")" "$(find "$t" -type f | wc -l)" \
        "$(du -sk "$t" | cut -f1)"
done
touch "$STAMP"
