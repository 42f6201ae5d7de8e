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
#                                    quantization); the newer families
#                                    (Qwen3's q/k norms, Phi-3, Mistral's
#                                    sliding window, Gemma 2's soft-caps)
#                                    and their builder forms: Phi-3's packed
#                                    qkv, Mistral's local_window_size,
#                                    Qwen3, RotaryEmbedding nodes,
#                                    GroupQueryAttention's softcap
#   fuzz_onnx_tensor                 every test_data_set_*/*.pb of those cases
#   fuzz_plan_open                   plans `llmc compile` writes for all of them
#   fuzz_plan_run                    the same plans + an 8-byte seed each
#   fuzz_chunked, fuzz_delegate      plans with NPU subgraphs (calibrated
#                                    w8a8, --npu-chunk 2 and 4) of the eight
#                                    families at export_llm.py's fuzz size
#                                    (hidden 16, 1 layer: plans of 35 to 65
#                                    KB) + an 8-byte seed each; the plans
#                                    also seed fuzz_plan_open and _run
#   fuzz_calibrate                   calibration texts and token-id files;
#                                    the plan it runs them on,
#                                    $BUILD/fuzz/models/calibrate.plan
#                                    (Qwen2 at the fuzz size, byte-level
#                                    tokenizer)
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
for t in fuzz_onnx_import fuzz_compile fuzz_onnx_tensor fuzz_plan_open fuzz_plan_run fuzz_tokenizer \
         fuzz_calibrate fuzz_chunked fuzz_delegate; do
    mkdir -p "$SEEDS/$t"
done
models=$BUILD/fuzz/models
mkdir -p "$models"

# Tiny LLMs (vocab 512, hidden 64, 2 layers), weights inside the .onnx,
# and the other file kinds: the test zoo's exports (tests/zoo.sh), taken
# from the tests' cache or exported there in one python process.
. tests/zoo.sh
LLMS="llama@14 qwen2@17 gpt2@14 phi@17 qwen3@17 phi3@17 mistral@17 gemma2@17"
# hf, SDPA, no-past (optimum's decoder_model); the builder forms: LLaMA at
# opset 21, Phi-2's SkipLayerNormalization and FastGelu, Phi-3's packed qkv,
# Mistral's local_window_size, Qwen3's q/k norms, RotaryEmbedding nodes,
# GroupQueryAttention's softcap
KINDS="llama@17:hf llama@17:sdpa llama@17:hf-no-past llama@21:genai phi@17:genai phi3@17:genai
       mistral@17:genai qwen3@17:genai llama@17:genai-rotary llama@17:genai-softcap"
# shellcheck disable=SC2086
zoo_prefetch $LLMS $KINDS
zoo_seed() {   # zoo_seed SPEC: the zoo model of SPEC as $models/NAME.onnx, seeding both ONNX targets
    local name=${1/@/-} model
    name=${name/:/-}
    model=$(zoo_spec_model "$1") || { echo "fuzz_seeds: export of $1 failed" >&2; exit 1; }
    cp "$model" "$models/$name.onnx"
    cp "$model" "$SEEDS/fuzz_onnx_import/llm-$name.onnx"
    cp "$model" "$SEEDS/fuzz_compile/llm-$name.onnx"
}
for spec in $LLMS; do
    zoo_seed "$spec"
    family=${spec%@*} opset=${spec#*@}
    "$LLMC" compile "$models/$family-$opset.onnx" -o "$SEEDS/fuzz_plan_open/llm-$family-$opset.plan" \
        --max-context 32 >/dev/null
done
for spec in $KINDS; do
    zoo_seed "$spec"
done
kind_seed() {   # kind_seed NAME COMMAND...: COMMAND writes $models/NAME.onnx
    local name=$1 out=$models/$1.onnx
    shift
    "$@" >"$out.log" 2>&1 || { echo "fuzz_seeds: $name failed (see $out.log)" >&2; exit 1; }
    cp "$out" "$SEEDS/fuzz_onnx_import/llm-$name.onnx"
    cp "$out" "$SEEDS/fuzz_compile/llm-$name.onnx"
}
kind_seed llama-merged "$PY" scripts/merge_decoders.py "$models/llama-17-hf-no-past.onnx" \
    "$models/llama-17-hf.onnx" --out "$models/llama-merged.onnx"
kind_seed llama-keepio16 "$PY" scripts/make_fp16.py "$models/llama-17-hf.onnx" "$models/llama-keepio16.onnx" \
    --form keepio16
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

seeded() {   # seeded PLAN DIR: two copies of PLAN in DIR, each + an 8-byte little-endian seed
    local base=$2/$(basename "$1" .plan)
    { cat "$1"; printf '\001\000\000\000\000\000\000\000'; } >"$base-1.bin"
    { cat "$1"; printf '\347\003\000\000\000\000\000\200'; } >"$base-2.bin"
}

# Plans with NPU subgraphs, small so that the chunked targets run them fast
# (a tiny LLM's plan took 5 times as long): the families at the fuzz size
# (exported into the tests' cache), calibrated w8a8 over token ids with a
# clip that leaves outliers (shadowed Linears with hot channels), chunks of
# 2 and 4 (the int8 kernel's GEMM rows).
ids=$models/calibrate-ids.txt
"$PY" -c "import random; r = random.Random(3)
for _ in range(4): print(' '.join(str(r.randrange(3, 500)) for _ in range(24)))" >"$ids"
fuzz_model() {   # fuzz_model FAMILY OPSET: the family's fuzz-size export
    zoo_export "$1-op$2-fuzz-s0" --family "$1" --opset "$2" --size fuzz --seed 0
}
for spec in $LLMS; do
    family=${spec%@*}
    model=$(fuzz_model "$family" "${spec#*@}") || { echo "fuzz_seeds: fuzz-size export of $spec failed" >&2; exit 1; }
    for chunk in 2 4; do
        plan=$SEEDS/fuzz_plan_open/llm-$family-npu$chunk.plan
        "$LLMC" compile "$model" --max-context 16 --quant w8a8 --calibrate-ids "$ids" --calib-percentile 99.9 \
            --npu-chunk "$chunk" --quiet -o "$plan" >"$models/$family-npu$chunk.log" 2>&1 ||
            { echo "fuzz_seeds: --npu-chunk $chunk of $family failed (see $models/$family-npu$chunk.log)" >&2; exit 1; }
        seeded "$plan" "$SEEDS/fuzz_chunked"
        seeded "$plan" "$SEEDS/fuzz_delegate"
    done
done

# Calibration: the plan fuzz_calibrate runs on, texts and id files.
model=$(fuzz_model qwen2 17) || { echo "fuzz_seeds: fuzz-size export of qwen2 failed" >&2; exit 1; }
"$LLMC" compile "$model" --tokenizer "$models/tok-byte-level/tokenizer.json" \
    --max-context 16 --logits last --quiet -o "$models/calibrate.plan" >/dev/null
cal=$SEEDS/fuzz_calibrate
cp "$ids" "$cal/ids-lines.txt"
printf '1, 2,3\r\n\n  499\t7\n' >"$cal/ids-separators.txt"
printf '5 6 7' >"$cal/ids-no-newline.txt"
head -n 1 "$ids" | cut -c1-30 >"$cal/ids-short.txt"
printf 'Hello world, the calibration text.\n' >"$cal/text-ascii.txt"
printf 'na\xc3\xafve caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 <s> \xff\n' >"$cal/text-utf8.txt"
head -c 32 README.md >"$cal/text-readme.txt"
head -c 2000 README.md >"$cal/text-readme-long.txt"

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

for plan in "$SEEDS"/fuzz_plan_open/*.plan; do
    seeded "$plan" "$SEEDS/fuzz_plan_run"
done

for t in "$SEEDS"/*/; do
    printf 'fuzz_seeds: %-18s %5d files %8d KiB\n' "$(basename "$t")" "$(find "$t" -type f | wc -l)" \
        "$(du -sk "$t" | cut -f1)"
done
touch "$STAMP"
