#!/usr/bin/env bash
# The firmware demo under emulation (scripts/firmware_demo.sh): the plan
# executed in place from flash on QEMU's Cortex-M4F (mps2-an386) and
# Cortex-M55 (mps3-an547), prompt tokenized and text detokenized on the
# device, generates the same ids as the host runtime for the same plan and
# prompt, and reports its RAM use.
# tier: plain-only (arm-none-eabi firmware under qemu-system-arm, no sanitizers)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/firmware-demo
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
BUILD=$BUILD scripts/firmware_demo.sh >"$WORK/demo.log" 2>&1
status=$?
sed 's/^/# /' "$WORK/demo.log"
check "the firmware demo runs on both boards and matches the host" test "$status" -eq 0
for board in mps2-an386 mps3-an547; do
    log=$BUILD/firmware-demo/$board/run.log
    check "$board: the device's prompt ids equal the host tokenizer's" \
        grep -q "^$board: prompt ids identical to the host's llmc tokenize" "$WORK/demo.log"
    check "$board: ids identical to the host's llmc run" \
        grep -q "^$board: ids identical to the host's llmc run" "$WORK/demo.log"
    check "$board: the plan was read in place (hashes verified) and RAM use printed" \
        sh -c "grep -q 'in place at flash address' '$log' && grep -q '^ram: arena [0-9]* bytes + stack [0-9]* bytes' '$log'"
done
tap_done
