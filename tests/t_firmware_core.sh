#!/usr/bin/env bash
# The runtime core built freestanding for Cortex-M4F and Cortex-M55
# (`make firmware`): every core source compiles with -ffreestanding -Werror
# -Wdouble-promotion, the core references no symbol beyond mem* and the
# float libm functions runtime/llmc_rt.mk documents (no libgcc helper), and
# the linked M4F image holds no soft-double helper; linked with the op
# resolver of the firmware demo's plan, the core is smaller than with every
# op, and the M4F core with what it pulls in fits 40 KiB of .text.  The
# symbol check must also catch a violation: a core archive with one object
# calling double exp(), or one dividing 64-bit integers, is refused, naming
# the symbol.
# tier: plain-only (arm-none-eabi builds, no sanitizers)
# needs: firmware-libs
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/firmware-core
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
command -v arm-none-eabi-gcc >/dev/null || { echo "not ok 1 - arm-none-eabi-gcc is missing (scripts/deps.sh)"; exit 1; }

check "make firmware builds the core for cortex-m4 and cortex-m55 and its symbol check passes" \
    make -s firmware BUILD="$BUILD"
make -s firmware BUILD="$BUILD" 2>&1 | grep '^|' >"$WORK/sizes.md"
sed 's/^/# /' "$WORK/sizes.md"
check "the size table has a row per CPU, resolver and build" \
    test "$(grep -c 'cortex-m' "$WORK/sizes.md")" -eq 8
# core .text (column 5) of the row of cpu, resolver and build
core_text() { awk -F' *[|] *' -v c="$1" -v o="$2" -v l="$3" '$2 == c && $3 == o && index($4, l) == 1 { print $5 }' "$WORK/sizes.md"; }
for cpu in cortex-m4 cortex-m55; do
    all=$(core_text $cpu all plan) demo=$(core_text $cpu "demo plan's" plan)
    check "$cpu: the demo plan's resolver links less core .text ($demo) than every op ($all)" \
        test -n "$demo" -a -n "$all" -a "${demo:-0}" -lt "${all:-0}"
done

# The size budget: the Cortex-M4F core with portable kernels, linked for
# the demo plan's ops, and all it pulls in (libc, libm, libgcc) in 40 KiB of
# .text (columns 5 and 6).
fw_text=$(awk -F' *[|] *' -v o="demo plan's" \
    '$2 == "cortex-m4" && $3 == o && index($4, "plan") == 1 { print $5 + $6 }' "$WORK/sizes.md")
check "cortex-m4: the demo plan's linked core and what it pulls in fit 40960 bytes of .text (${fw_text:-?})" \
    test -n "$fw_text" -a "${fw_text:-40961}" -le 40960

# The same check over core archives with a double-precision call (M4F) and
# a 64-bit division (M55) added.
for cpu in cortex-m4 cortex-m55; do
    mkdir -p "$WORK/bad/$cpu"
    cp "$BUILD/firmware/$cpu/libllmcrt.a" "$WORK/bad/$cpu/"
done
printf '#include <math.h>\nfloat uses_double(float x) { return (float)exp(x); }\n' >"$WORK/bad.c"
arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -O2 \
    -c "$WORK/bad.c" -o "$WORK/bad.o"
arm-none-eabi-ar rs "$WORK/bad/cortex-m4/libllmcrt.a" "$WORK/bad.o" 2>/dev/null
printf 'unsigned long long div64(unsigned long long a, unsigned long long b) { return a / b; }\n' \
    >"$WORK/div.c"
arm-none-eabi-gcc -mcpu=cortex-m55 -mthumb -mfloat-abi=hard -O2 -c "$WORK/div.c" -o "$WORK/div.o"
arm-none-eabi-ar rs "$WORK/bad/cortex-m55/libllmcrt.a" "$WORK/div.o" 2>/dev/null
make -s firmware BUILD="$BUILD" FW_LIB_DIR="$WORK/bad" >"$WORK/bad.log" 2>&1
check "a core calling double exp() fails the check" test $? -ne 0
check "... and the message names exp and the soft-double helper" \
    grep -q "cortex-m4: the core references symbols it must not: .*__aeabi_f2d.*exp" "$WORK/bad.log"
check "a core dividing 64-bit integers fails it too, naming libgcc's __aeabi_uldivmod" \
    grep -q "cortex-m55: the core references symbols it must not: __aeabi_uldivmod$" "$WORK/bad.log"
tap_done
