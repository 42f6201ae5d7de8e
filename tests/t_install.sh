#!/usr/bin/env bash
# `make install` into a scratch prefix, then the runtime API's embedding example
# built two ways a user would: against the installed tree through
# pkg-config (llmc-rt.pc), and from source through runtime/llmc_rt.cmake
# (the runtime compiled by the user's CMake project).  Both must generate
# the same tokens as the installed `llmc run`.
# tier: plain-only (the installed files and the two ways to build against them)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$(realpath -m "$BUILD/test-data/install")
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
PREFIX=$WORK/prefix

check "make install PREFIX=... installs llmc, the archives, the headers and llmc-rt.pc" \
    make -s install BUILD="$BUILD" PREFIX="$PREFIX"
check "the installed tree has what it should" test -x "$PREFIX/bin/llmc" -a \
    -f "$PREFIX/lib/libllmcrt.a" -a -f "$PREFIX/include/llmc/llmc_rt.h" -a \
    -f "$PREFIX/lib/pkgconfig/llmc-rt.pc"

check "the installed headers are the public ones (no llmc_rt_internal.h)" test \
    "$(cd "$PREFIX/include/llmc" && ls | tr '\n' ' ')" = \
    "llmc_ref_delegate.h llmc_rt.h llmc_rt_resolver.h llmc_threads.h plan_enums.h "

export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
sed 's/#include "llmc_rt.h"/#include <llmc_rt.h>/' tests/embed/embed_example.c >"$WORK/example.c"
# shellcheck disable=SC2046
check "the example builds with pkg-config --cflags --libs llmc-rt" \
    gcc -std=c99 -Wall -Wextra -Werror -O2 ${SAN_FLAGS:-} "$WORK/example.c" \
        $(pkg-config --cflags --libs llmc-rt) -o "$WORK/example_pc"

sed 's/#include "\(llmc_[a-z_]*\.h\)"/#include <\1>/' tests/embed/npu_example.c >"$WORK/npu_example.c"
# shellcheck disable=SC2046
check "the delegate example builds with pkg-config --cflags --libs llmc-rt" \
    gcc -std=c11 -Wall -Wextra -Werror -O2 ${SAN_FLAGS:-} "$WORK/npu_example.c" \
        $(pkg-config --cflags --libs llmc-rt) -o "$WORK/npu_example"

mkdir -p "$WORK/cmake"
cat >"$WORK/cmake/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.13)
project(embed_example C)
include($(pwd)/runtime/llmc_rt.cmake)
add_executable(example $(pwd)/tests/embed/embed_example.c)
target_link_libraries(example PRIVATE llmc_rt m)
CMAKE
check "the example builds from source through runtime/llmc_rt.cmake" sh -c \
    "cmake -S '$WORK/cmake' -B '$WORK/cmake/build' -DCMAKE_BUILD_TYPE=Release >/dev/null &&
     cmake --build '$WORK/cmake/build' -j2 >/dev/null"

MODEL=$WORK/llama.onnx
/usr/bin/python3 scripts/export_llm.py --family llama --opset 14 --size tiny --seed 6 --out "$MODEL" 2>/dev/null
check "compile a model with the installed llmc" \
    "$PREFIX/bin/llmc" compile "$MODEL" -o "$WORK/llama.plan" --max-context 64
want=$("$PREFIX/bin/llmc" run "$WORK/llama.plan" --prompt-ids 2,7,1,8 --max-new 8)
echo "# llmc run: $want"
for bin in example_pc cmake/build/example; do
    got=$("$WORK/$bin" "$WORK/llama.plan" 8 2 7 1 8 2>&1)
    check "$bin generates what llmc run does ($got)" test -n "$want" -a "$want" = "$got"
done
tap_done
