#!/usr/bin/env bash
# The runtime on Linux/AArch64: build/aarch64/llmc-run (the whole runtime,
# its NEON kernel tables, the pthread platform file and `llmc run`,
# cross-compiled and static) under qemu-aarch64 -cpu max generates the same
# ids, with bitwise the same logits, as the x86-64 build for the same
# generic plans (f32 and w8a8 of a zoo model, w4a8 of the trained model),
# streams the same text from --prompt, and runs plans for its own targets
# (neon-dot, neon-i8mm) to the ids of the generic plan, and with float16
# and int8 KV caches (the NEON tables' own loops, float32 weights) to its
# logits within 1e-4; Gemma 2's sliding window (16, with a ring of KV
# chunks) and soft-caps across a 100-token prompt and 40 steps, with every
# KV dtype, to the x86 run's ids and logits within 1e-4 (the libm tanhf
# and expf of the two C libraries round differently).
# tier: plain-only (cross-compiled without sanitizers, run under qemu)
# needs: aarch64-tests
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/aarch64
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
PY=/usr/bin/python3
A64="qemu-aarch64 -cpu max $BUILD/aarch64/llmc-run"
IDS=913,431,423,350,869,44

check "make aarch64-tests cross-compiles the runtime and llmc-run" \
    make -s aarch64-tests BUILD="$BUILD"

# same_run NAME PLAN ARGS...: x86 and AArch64 print the same and write the
# same logits bytes.
same_run() {
    local name=$1 plan=$2; shift 2
    "$BUILD/llmc" run "$plan" "$@" --logits-out "$WORK/$name.x86.bin" >"$WORK/$name.x86.txt"
    $A64 "$plan" "$@" --logits-out "$WORK/$name.a64.bin" >"$WORK/$name.a64.txt"
    echo "# $name: x86 $(head -c 120 "$WORK/$name.x86.txt" | tr '\n' ' ')"
    check "$name: AArch64 output equals x86's" cmp "$WORK/$name.x86.txt" "$WORK/$name.a64.txt"
    check "$name: logits bitwise equal" cmp "$WORK/$name.x86.bin" "$WORK/$name.a64.bin"
}

$PY scripts/export_llm.py --family llama --opset 14 --size tiny --seed 4 \
    --out "$WORK/llama.onnx" 2>/dev/null
for quant in f32 w8a8; do
    "$BUILD/llmc" compile "$WORK/llama.onnx" --target generic --quant "$quant" \
        --max-context 64 --quiet -o "$WORK/llama-$quant.plan" >/dev/null 2>&1
    same_run "zoo llama $quant" "$WORK/llama-$quant.plan" --prompt-ids 3,1,4,1,5 --max-new 16
done

TRAINED="models/tiny-llama.onnx --tokenizer models/tokenizer.json --max-context 64 --quiet"
for t in generic neon-dot neon-i8mm; do
    # shellcheck disable=SC2086
    "$BUILD/llmc" compile $TRAINED --target "$t" --quant w4a8 -o "$WORK/trained-$t.plan" >/dev/null 2>&1
done
same_run "trained w4a8 ids" "$WORK/trained-generic.plan" --prompt-ids "$IDS" --max-new 16
same_run "trained w4a8 text" "$WORK/trained-generic.plan" --prompt "In the beginning" --max-new 12
for t in neon-dot neon-i8mm; do
    $A64 "$WORK/trained-$t.plan" --prompt-ids "$IDS" --max-new 16 >"$WORK/$t.txt"
    check "trained w4a8 for $t on AArch64: the generic plan's ids" \
        cmp "$WORK/trained w4a8 ids.x86.txt" "$WORK/$t.txt"
done
# The NEON tables' own float16/int8 KV loops and SwiGLU inside a whole run:
# the neon-dot plan's logits on AArch64 against the generic plan's on x86.
# Float32 weights, so that no int8 activation sits between the two tables'
# float differences (about 1e-6) and the logits: one quantized value
# rounding the other way moves a logit by about a quantization step, which
# the w4a8 checks above bound by the ids instead.
for kv in f16 int8; do
    for t in generic neon-dot; do
        # shellcheck disable=SC2086
        "$BUILD/llmc" compile $TRAINED --target "$t" --quant f32 --kv-cache "$kv" \
            -o "$WORK/kv-$kv-$t.plan" >/dev/null 2>&1
    done
    "$BUILD/llmc" run "$WORK/kv-$kv-generic.plan" --prompt-ids "$IDS" --max-new 16 \
        --logits-out "$WORK/kv-$kv.x86.bin" >"$WORK/kv-$kv.x86.txt"
    $A64 "$WORK/kv-$kv-neon-dot.plan" --prompt-ids "$IDS" --max-new 16 \
        --logits-out "$WORK/kv-$kv.a64.bin" >"$WORK/kv-$kv.a64.txt"
    check "--kv-cache $kv: neon-dot on AArch64 gives the generic plan's ids" \
        cmp "$WORK/kv-$kv.x86.txt" "$WORK/kv-$kv.a64.txt"
    check "--kv-cache $kv: and its logits within 1e-4" $PY scripts/compare_logits.py \
        "$WORK/kv-$kv.x86.bin" "$WORK/kv-$kv.a64.bin" --vocab 2048 --rtol 1e-4
done

# Windows and soft-caps in every AArch64 table: the generic plan (portable
# loops) and the neon-dot plans (their KV loops) against x86's generic plan.
$PY scripts/export_llm.py --family gemma2 --opset 17 --size tiny --out "$WORK/gemma2.onnx" 2>/dev/null
IDS100=$(awk 'BEGIN { for (i = 0; i < 100; i++) printf "%s%d", i ? "," : "", (i * 37 + 11) % 512 }')
for kv in f32 f16 int8; do
    for t in generic neon-dot; do
        "$BUILD/llmc" compile "$WORK/gemma2.onnx" --target "$t" --quant f32 --kv-cache "$kv" \
            --max-context 256 --quiet -o "$WORK/gemma2-$kv-$t.plan" >/dev/null 2>&1
    done
    "$BUILD/llmc" run "$WORK/gemma2-$kv-generic.plan" --prompt-ids "$IDS100" --max-new 40 \
        --logits-out "$WORK/gemma2-$kv.x86.bin" >"$WORK/gemma2-$kv.x86.txt"
    for t in generic neon-dot; do
        $A64 "$WORK/gemma2-$kv-$t.plan" --prompt-ids "$IDS100" --max-new 40 \
            --logits-out "$WORK/gemma2-$kv-$t.a64.bin" >"$WORK/gemma2-$kv-$t.a64.txt"
        check "gemma2 window 16 + soft-caps, --kv-cache $kv, $t on AArch64: x86's ids" \
            cmp "$WORK/gemma2-$kv.x86.txt" "$WORK/gemma2-$kv-$t.a64.txt"
        check "... and its logits within 1e-4" $PY scripts/compare_logits.py \
            "$WORK/gemma2-$kv.x86.bin" "$WORK/gemma2-$kv-$t.a64.bin" --vocab 512 --rtol 1e-4
    done
done
tap_done
