#!/usr/bin/env bash
# Prepare once: a decode step reads only the tables session init decoded,
# never the plan's FlatBuffer (tests/prepare/prepare_check.c garbles it
# between prefill and decode and compares logits with an untouched copy),
# and the op observer sees every op once per call in plan order.  Plans:
# tiny zoo models (tests/zoo.sh) compiled f32 and w4a8, for the portable
# kernels and for this machine's.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/prepare
mkdir -p "$WORK"
. tests/zoo.sh

# Setup failures are one failed check; then the C program speaks TAP.
setup() {
    local qwen gpt2
    qwen=$(zoo_model qwen2 14) && gpt2=$(zoo_model gpt2 17) || return 1
    "$BUILD/llmc" compile "$qwen" -o "$WORK/qwen2-f32.plan" --max-context 64 --target generic --quiet &&
        "$BUILD/llmc" compile "$qwen" -o "$WORK/qwen2-w4a8.plan" --max-context 64 --quant w4a8 --quiet &&
        "$BUILD/llmc" compile "$gpt2" -o "$WORK/gpt2-w8a8.plan" --max-context 64 --quant w8a8 --quiet &&
        "$BUILD/llmc" compile "$gpt2" -o "$WORK/gpt2-f32.plan" --max-context 64 --quiet || return 1
    # SAN_FLAGS: a `make check SAN=1` library needs the sanitizer runtimes
    gcc -std=c11 -Wall -Wextra -Werror -O1 -g ${SAN_FLAGS:-} -Iruntime -Itests/unit \
        tests/prepare/prepare_check.c "$BUILD/libllmcrt.a" -lm -o "$WORK/prepare_check"
}
if ! setup >"$WORK/setup.log" 2>&1; then
    echo "not ok 1 - export, compile the plans and build prepare_check"
    sed 's/^/# /' "$WORK/setup.log" | head -20
    echo "1..1"
    exit 1
fi
exec "$WORK/prepare_check" "$WORK/qwen2-f32.plan" "$WORK/qwen2-w4a8.plan" "$WORK/gpt2-w8a8.plan" \
    "$WORK/gpt2-f32.plan"
