#!/usr/bin/env bash
# The firmware checks of the runtime core (make firmware builds the
# archives first): for each Cortex-M CPU,
#   1. the undefined symbols of the whole core, linked into one relocatable
#      object: anything beyond memcpy/memmove/memset/memcmp and the float
#      libm functions of LLMC_RT_LIBM fails, so any libgcc helper does (a
#      64-bit division calls __aeabi_ldivmod: the core uses rt_div64.h), and
#      any soft-double helper (__aeabi_d*, *2d) or double libm;
#   2. the size of tests/firmware/size_probe.c linked with --gc-sections
#      against the core, newlib's libm/libc and libgcc: .text and .rodata of
#      the core's own objects and of everything the link pulled in, without
#      and with the tokenizer, the session with every op (llmc_rt_all_ops)
#      and with the op resolver of the firmware demo's plan (what `make
#      firmware-demo` links; `llmc inspect --resolver`, so $BUILD/llmc must
#      be built).
# Prints a table; exits 1 on a symbol violation.
set -euo pipefail
BUILD=${BUILD:-build}
FW_CC=${FW_CC:-arm-none-eabi-gcc}
NM=${FW_CC%gcc}nm
LD=${FW_CC%gcc}ld
OUT="${FW_LIB_DIR:-$BUILD/firmware}"
status=0

allowed_symbol() {
    [[ " memcpy memmove memset memcmp $LLMC_RT_LIBM " == *" $1 "* ]]
}

check_symbols() { # cpu
    local lib="$OUT/$1/libllmcrt.a" obj="$OUT/$1/core.o" bad=()
    $LD -r --whole-archive "$lib" -o "$obj"
    local syms
    syms=$($NM -u "$obj" | awk '{print $2}' | sort -u)
    for s in $syms; do allowed_symbol "$s" || bad+=("$s"); done
    if [ ${#bad[@]} -gt 0 ]; then
        echo "firmware: $1: the core references symbols it must not: ${bad[*]}" >&2
        status=1
    fi
    echo "$1: undefined symbols of the core: $(echo $syms | tr '\n' ' ')"
}

# Sum of the sizes of a section kind (.text / .rodata) in a link map, split
# into the core's objects (libllmcrt.a) and the rest.
map_sizes() { # map section -> "core rest"
    python3 - "$1" "$2" <<'PY'
import re, sys
path, want = sys.argv[1], sys.argv[2]
core = rest = 0
pending = None
lines = open(path).read().split("Linker script and memory map", 1)[1].splitlines()
# Input sections kept in the image (the map's part after the discarded ones): " .text.name 0xADDR 0xSIZE file", the name on a
# line of its own when it is long.
for line in lines:
    m = re.match(r"^ (\.[A-Za-z_][^ ]*)\s*$", line)
    if m:
        pending = m.group(1)
        continue
    m = re.match(r"^ (\.[A-Za-z_][^ ]*)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+(\S+)", line)
    if m:
        sec, size, obj = m.groups()
    else:
        m = re.match(r"^\s{10,}0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+(\S+)", line)
        if not (m and pending):
            pending = None
            continue
        sec, (size, obj) = pending, m.groups()
    pending = None
    if sec == want or sec.startswith(want + "."):
        if "libllmcrt.a" in obj:
            core += int(size, 16)
        else:
            rest += int(size, 16)
print(core, rest)
PY
}

link_probe() { # cpu arch name extra-cflags "ops | linked" ldflags
    local dir="$OUT/$1" name=$3
    # shellcheck disable=SC2086
    $FW_CC $2 $FW_CFLAGS -I"$OUT" $4 -c tests/firmware/size_probe.c -o "$dir/$name.o"
    # shellcheck disable=SC2086
    $FW_CC $2 $FW_CFLAGS -c tests/firmware/size_probe_data.c -o "$dir/size_probe_data.o"
    # shellcheck disable=SC2086
    $FW_CC $2 --specs=nano.specs -nostartfiles -Wl,--gc-sections -Wl,-e,probe_entry $6 \
        -Wl,-Map,"$dir/$name.map" -o "$dir/$name.elf" "$dir/$name.o" "$dir/size_probe_data.o" \
        "$dir/libllmcrt.a" -lm -lc -lgcc
    local text rodata
    text=$(map_sizes "$dir/$name.map" .text)
    rodata=$(map_sizes "$dir/$name.map" .rodata)
    printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$5" ${text% *} ${text#* } ${rodata% *} ${rodata#* }
    # Armv8-M's newlib cosf/sinf/expf compute in double on the M55's
    # double-precision FPU (a few conversions through libgcc): the
    # soft-double rule is the M4F's, whose FPU is single-precision.
    [ "$1" = cortex-m4 ] || return 0
    if $NM "$dir/$name.elf" | grep -Eq ' (__aeabi_d[a-z0-9]*|__aeabi_[a-z0-9]*2d|exp|pow|sqrt|log|sin|cos|tanh|erf)$'; then
        echo "firmware: $1 $5: the linked image contains a soft-double helper or a double libm function" >&2
        status=1
    fi
}

plan=$(BUILD=$BUILD scripts/firmware_demo_plan.sh)
"$BUILD/llmc" inspect "$plan" --resolver >"$OUT/demo_resolver.h"
demo_ops='-DSIZE_PROBE_RESOLVER="demo_resolver.h"'
echo "| cpu | ops | linked | core .text | libc/libm/libgcc .text | core .rodata | libc/libm/libgcc .rodata |"
echo "|---|---|---|---:|---:|---:|---:|"
for cpu in $FW_CPUS; do
    arch="FW_ARCH_${cpu//-/_}" ld="FW_LD_${cpu//-/_}"
    link_probe "$cpu" "${!arch}" probe_core "" "all | plan + session + sampler" "${!ld:-}"
    link_probe "$cpu" "${!arch}" probe_text "-DSIZE_PROBE_TOKENIZER" \
        "all | ... + tokenizer (encode, detok)" "${!ld:-}"
    link_probe "$cpu" "${!arch}" probe_demo_core "$demo_ops" "demo plan's | plan + session + sampler" \
        "${!ld:-}"
    link_probe "$cpu" "${!arch}" probe_demo_text "$demo_ops -DSIZE_PROBE_TOKENIZER" \
        "demo plan's | ... + tokenizer (encode, detok)" "${!ld:-}"
done
for cpu in $FW_CPUS; do check_symbols "$cpu"; done
exit $status
