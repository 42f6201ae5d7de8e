#!/usr/bin/env bash
# Sessions in parallel on one plan: tests/parallel/sessions_parallel.c opens
# each plan once and runs 1..8 sessions on as many threads, prefills
# staggered so that they overlap the others' decode steps, without a
# parallel hook and with a pool of 2 threads per session; every session's
# ids, logits (bitwise) and text must equal its run alone.  Plans: the
# trained model (GQA, 4 layers) with its tokenizer, each session encoding
# its own text through the one shared tokenizer; tiny Qwen2 (GQA, q/k/v
# biases) with float32, float16 and int8 KV caches, the int8 one for the
# portable kernels.  `make check-tsan` runs it under ThreadSanitizer with
# SESSIONS_STEPS=4 (decode steps per session; default 16).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/sessions-parallel
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/zoo.sh

# Setup failures are one failed check; then the C program speaks TAP.
setup() {
    local qwen kv
    qwen=$(zoo_model qwen2 17) || return 1
    "$BUILD/llmc" compile models/tiny-llama.onnx -o "$WORK/trained.plan" --max-context 128 \
        --tokenizer models/tokenizer.json --quiet || return 1
    for kv in f32 f16; do
        "$BUILD/llmc" compile "$qwen" -o "$WORK/qwen2-kv$kv.plan" --max-context 128 \
            --kv-cache $kv --quiet || return 1
    done
    "$BUILD/llmc" compile "$qwen" -o "$WORK/qwen2-kvint8-generic.plan" --max-context 128 \
        --kv-cache int8 --target generic --quiet || return 1
    # SAN_FLAGS: a sanitizer build's archives need its runtime (ASan, TSan)
    gcc -std=c11 -Wall -Wextra -Werror -O2 -g ${SAN_FLAGS:-} -D_POSIX_C_SOURCE=200809L \
        -Iruntime -Iruntime/platform -Itests/unit tests/parallel/sessions_parallel.c \
        "$BUILD/libllmcrt_threads.a" "$BUILD/libllmcrt.a" -lm -pthread -o "$WORK/sessions_parallel"
}
if ! setup >"$WORK/setup.log" 2>&1; then
    echo "not ok 1 - export, compile the plans and build sessions_parallel"
    sed 's/^/# /' "$WORK/setup.log" | head -20
    echo "1..1"
    exit 1
fi
exec "$WORK/sessions_parallel" --steps "${SESSIONS_STEPS:-16}" "$WORK/trained.plan" "$WORK/qwen2-kvf32.plan" \
    "$WORK/qwen2-kvf16.plan" "$WORK/qwen2-kvint8-generic.plan"
