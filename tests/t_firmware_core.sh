#!/usr/bin/env bash
# The runtime core built freestanding for Cortex-M4F and Cortex-M55
# (`make firmware`): every core source compiles with -ffreestanding -Werror
# -Wdouble-promotion, the core references no symbol beyond mem*, the float
# libm functions runtime/llmc_rt.mk documents and libgcc's integer helpers,
# and the linked M4F image holds no soft-double helper.  The symbol check
# must also catch a violation: a core archive with one object calling
# double exp() is refused, naming the symbol.
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
check "the size table has a row per CPU and build" test "$(grep -c 'cortex-m' "$WORK/sizes.md")" -eq 4

# The same check over a core archive with a double-precision call added.
for cpu in cortex-m4 cortex-m55; do
    mkdir -p "$WORK/bad/$cpu"
    cp "$BUILD/firmware/$cpu/libllmcrt.a" "$WORK/bad/$cpu/"
done
printf '#include <math.h>\nfloat uses_double(float x) { return (float)exp(x); }\n' >"$WORK/bad.c"
arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -O2 \
    -c "$WORK/bad.c" -o "$WORK/bad.o"
arm-none-eabi-ar rs "$WORK/bad/cortex-m4/libllmcrt.a" "$WORK/bad.o" 2>/dev/null
make -s firmware BUILD="$BUILD" FW_LIB_DIR="$WORK/bad" >"$WORK/bad.log" 2>&1
check "a core calling double exp() fails the check" test $? -ne 0
check "... and the message names exp and the soft-double helper" \
    grep -q "cortex-m4: the core references symbols it must not: .*__aeabi_f2d.*exp" "$WORK/bad.log"
tap_done
