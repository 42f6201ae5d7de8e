#!/usr/bin/env bash
# The runtime as firmware sees it: libllmcrt.a needs nothing but libc's
# mem*/str* functions and libm (no malloc, no stdio, no threads, no globals),
# and the embedding example of docs/runtime-api.md, built against llmc_rt.h alone,
# generates the same tokens as `llmc run`.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LIB=$BUILD/libllmcrt.a
WORK=$BUILD/test-data/runtime_embed
mkdir -p "$WORK"
. tests/zoo.sh
n=0 failures=0
result() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else failures=$((failures + 1)); echo "not ok $n - $2"; fi; }

# Undefined symbols the runtime may use: memory/string helpers and libm,
# and the linker's own _GLOBAL_OFFSET_TABLE_ (position-independent code
# taking a function's address through the GOT; no library provides it).
ALLOWED='^(_GLOBAL_OFFSET_TABLE_|memcpy|memmove|memset|memcmp|strlen|strcmp|strncmp|expf|logf|sqrtf|erff|tanhf|sinf|cosf|powf|floorf|ceilf|fabsf|exp|log|sqrt|erf|tanh|sin|cos|pow|floor|ceil|fabs|truncf|roundf|fmaxf|fminf|nearbyintf|lrintf|__[a-z_0-9]+)$'
nm -u "$LIB" 2>/dev/null | awk 'NF == 2 && $1 == "U" {print $2}' | sort -u >"$WORK/undefined.txt"
grep -Ev "$ALLOWED" "$WORK/undefined.txt" | grep -Ev '^(llmc_|rt_|fb_|k_)' >"$WORK/forbidden.txt"
[ -s "$WORK/forbidden.txt" ] && sed 's/^/# forbidden symbol: /' "$WORK/forbidden.txt"
result "$([ -s "$WORK/forbidden.txt" ] && echo 1 || echo 0)" "libllmcrt.a calls no malloc, stdio or threads"
# Symbols in .data/.bss are writable state; .data.rel.ro (const pointer
# tables under PIE) and .rodata are not.
# (__odr_asan.* are ASan's one-definition-rule indicator bytes, which a
# SAN=1 build adds beside every external const table; they are not ours)
writable=$(objdump -t "$LIB" 2>/dev/null | awk '$0 ~ / O (\.data|\.bss|\*COM\*)[ \t]/ {print $NF}' |
    grep -v '^__odr_asan\.')
[ -n "$writable" ] && echo "# writable globals: $writable"
result "$([ -n "$writable" ] && echo 1 || echo 0)" "libllmcrt.a has no writable globals"

# SAN_FLAGS: the sanitizer flags of a `make check SAN=1` build, whose
# library needs the sanitizer runtimes at link time.
gcc -std=c99 -Wall -Wextra -Werror -O2 ${SAN_FLAGS:-} -Iruntime tests/embed/embed_example.c "$LIB" -lm \
    -o "$WORK/embed_example" 2>"$WORK/cc.log"
result $? "the embedding example builds against llmc_rt.h and libllmcrt.a alone"

MODEL=$(zoo_export qwen2-op14-s5 --family qwen2 --opset 14 --size tiny --seed 5 2>/dev/null) &&
    "$BUILD/llmc" compile "$MODEL" -o "$WORK/qwen2.plan" --max-context 64 >/dev/null
result $? "compile a model for the example"
want=$("$BUILD/llmc" run "$WORK/qwen2.plan" --prompt-ids 3,1,4,1,5 --max-new 8)
got=$("$WORK/embed_example" "$WORK/qwen2.plan" 8 3 1 4 1 5)
echo "# llmc run: $want"; echo "# example : $got"
result "$([ -n "$want" ] && [ "$want" = "$got" ] && echo 0 || echo 1)" "the example generates the same tokens as llmc run"
echo "1..$n"
[ "$failures" -eq 0 ]
