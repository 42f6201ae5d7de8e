#!/usr/bin/env bash
# make firmware-demo: the trained model of models/ compiled w4a8 for target
# generic with its tokenizer (scripts/firmware_demo_plan.sh), linked into
# firmware for QEMU's mps2-an386 (Cortex-M4F) and mps3-an547 (Cortex-M55)
# with the op resolver of its ops by firmware/Makefile (which includes
# runtime/llmc_rt.mk as a firmware project would), and run under
# qemu-system-arm with semihosting (whose console is QEMU's stderr).  Each
# run prints the generated text, the ids and its RAM use; the script then
# checks the device's prompt ids against `llmc tokenize` and its generated
# ids against the host runtime's `llmc run` of the same plan and prompt,
# and exits 1 on a difference.  BOARDS, DEMO_PROMPT and DEMO_NEW_TOKENS may be overridden.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=$BUILD/firmware-demo
BOARDS=${BOARDS:-mps2-an386 mps3-an547}
export DEMO_PROMPT=${DEMO_PROMPT:-And God said unto Moses,}
export DEMO_NEW_TOKENS=${DEMO_NEW_TOKENS:-16}
PLAN=$(BUILD=$BUILD scripts/firmware_demo_plan.sh)

prompt_ids=$(printf '%s' "$DEMO_PROMPT" | "$BUILD/llmc" tokenize "$PLAN" --add-special)
host_ids=$("$BUILD/llmc" run "$PLAN" --prompt-ids "$prompt_ids" --max-new "$DEMO_NEW_TOKENS")
status=0
for board in $BOARDS; do
    echo "== $board"
    make -s -f firmware/Makefile BOARD="$board" PLAN="$PLAN" LLMC="$BUILD/llmc" \
        OUT="$OUT/$board" >/dev/null
    qemu-system-arm -M "$board" -nographic -monitor none -serial none \
        -semihosting-config enable=on,target=native \
        -kernel "$OUT/$board/demo.elf" >"$OUT/$board/run.log" 2>&1 || status=1
    cat "$OUT/$board/run.log"
    device_prompt=$(sed -n 's/^prompt ids: //p' "$OUT/$board/run.log" | tr ' ' ,)
    if [ "$device_prompt" = "$prompt_ids" ]; then
        echo "$board: prompt ids identical to the host's llmc tokenize"
    else
        echo "$board: prompt ids differ from the host's llmc tokenize: $prompt_ids" >&2
        status=1
    fi
    device_ids=$(sed -n 's/^generated ids: //p' "$OUT/$board/run.log")
    if [ "$device_ids" = "$host_ids" ]; then
        echo "$board: ids identical to the host's llmc run"
    else
        echo "$board: ids differ from the host's llmc run: $host_ids" >&2
        status=1
    fi
done
exit $status
