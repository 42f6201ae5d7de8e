#!/usr/bin/env bash
# The command line contract: help, version, exit codes, atomic output,
# pass dumps and their digests, determinism, inspect, verify.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/cli
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
exits_with() {   # exits_with CODE command... : the command fails with exactly CODE
    local want=$1; shift
    "$@"; local got=$?
    [ "$got" -eq "$want" ] || { echo "exit status $got, expected $want"; return 1; }
}
stderr_names() {   # stderr_names TEXT command... : stderr mentions TEXT
    local text=$1; shift
    "$@" 2>"$WORK/stderr.txt"
    grep -qF -- "$text" "$WORK/stderr.txt" || { echo "stderr lacks '$text':"; cat "$WORK/stderr.txt"; return 1; }
}

MODEL=$WORK/llama.onnx
$PY scripts/export_llm.py --family llama --opset 14 --size tiny --seed 3 --out "$MODEL" 2>/dev/null

check "--version prints the version" sh -c "'$LLMC' --version | grep -q '^llmc [0-9]'"
for cmd in compile inspect run verify check-onnx ops; do
    check "$cmd --help prints usage and exits 0" sh -c "'$LLMC' $cmd --help | grep -q '^usage: llmc $cmd'"
done
check "ops lists the fused llmc-domain ops" sh -c "'$LLMC' ops | grep -qx llmc.Linear && '$LLMC' ops | grep -qx llmc.RMSNorm"
check "unknown command exits 2" exits_with 2 "$LLMC" frobnicate
check "compile without -o exits 2" exits_with 2 "$LLMC" compile "$MODEL"
check "compile with an unknown flag exits 2" exits_with 2 "$LLMC" compile "$MODEL" -o "$WORK/x.plan" --frob
check "compile of a missing file exits 3" exits_with 3 "$LLMC" compile "$WORK/nope.onnx" -o "$WORK/x.plan"
check "compile of a missing file names it" stderr_names "nope.onnx" "$LLMC" compile "$WORK/nope.onnx" -o "$WORK/x.plan"
printf 'this is not a protobuf' >"$WORK/garbage.onnx"
check "compile of a non-ONNX file exits 3" exits_with 3 "$LLMC" compile "$WORK/garbage.onnx" -o "$WORK/x.plan"
check "a failed compile writes nothing" test ! -e "$WORK/x.plan"
check "compile into a missing folder exits 5" exits_with 5 "$LLMC" compile "$MODEL" -o "$WORK/no/such/dir/x.plan"

# value_info is checked against shape inference: a file that lies about a
# shape is refused (exit 3, naming the value); a truthful one compiles.
value_info_model() {   # value_info_model DIMS OUT: Y = Add(A, B) over [2,3], value_info Y: DIMS
    $PY - "$1" "$2" <<'PYEOF'
import sys
import onnx
from onnx import TensorProto, helper
dims = [int(d) for d in sys.argv[1].split(",")]
graph = helper.make_graph(
    [helper.make_node("Add", ["A", "B"], ["Y"], name="add"), helper.make_node("Relu", ["Y"], ["Z"], name="relu")],
    "vi", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "AB"],
    [helper.make_tensor_value_info("Z", TensorProto.FLOAT, [2, 3])],
    value_info=[helper.make_tensor_value_info("Y", TensorProto.FLOAT, dims)])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), sys.argv[2])
PYEOF
}
value_info_model 3,2 "$WORK/vi-wrong.onnx"
value_info_model 2,3 "$WORK/vi-right.onnx"
check "a value_info shape that disagrees with the graph exits 3" exits_with 3 "$LLMC" compile "$WORK/vi-wrong.onnx" -o "$WORK/vi.plan"
check "the value_info error names the value and both shapes" stderr_names "value 'Y': the model declares shape [3,2] but its producer gives [2,3]" "$LLMC" compile "$WORK/vi-wrong.onnx" -o "$WORK/vi.plan"
check "a truthful value_info compiles" "$LLMC" compile "$WORK/vi-right.onnx" -o "$WORK/vi.plan"

check "compile with --dump-passes" "$LLMC" compile "$MODEL" -o "$WORK/a.plan" --max-context 128 --dump-passes "$WORK/dump-a"
"$LLMC" compile "$MODEL" -o "$WORK/b.plan" --max-context 128 --dump-passes "$WORK/dump-b" >"$WORK/compile-b.txt" 2>&1
check "two compiles give byte-identical plans" cmp "$WORK/a.plan" "$WORK/b.plan"
check "two compiles give byte-identical pass dumps" diff -r "$WORK/dump-a" "$WORK/dump-b"
check "a dump per pass, numbered" sh -c "ls '$WORK/dump-a' | grep -q '^01-shape-inference.txt$'"
digests_match() {   # every digest in the pass table is xxh64 of its dump file
    local line pass digest file count=0
    while read -r _ pass _ digest; do
        file=$(ls "$WORK"/dump-b/[0-9][0-9]-"$pass".txt 2>/dev/null | head -1)
        [ -n "$file" ] || { echo "no dump for pass $pass"; return 1; }
        [ "$(xxhsum -H64 "$file" | cut -d' ' -f1)" = "$digest" ] || { echo "digest mismatch for $pass"; return 1; }
        count=$((count + 1))
    done < <(grep -E '^[0-9]+ +[a-z-]+ +[0-9]+ +[0-9a-f]{16}$' "$WORK/compile-b.txt")
    [ "$count" -ge 3 ] || { echo "only $count passes in the table"; return 1; }
}
check "pass table digests are the xxh64 of the dumps" digests_match

check "verify accepts the plan" "$LLMC" verify "$WORK/a.plan"
cp "$WORK/a.plan" "$WORK/flipped.plan"
size=$(stat -c %s "$WORK/flipped.plan")
printf '\xff' | dd of="$WORK/flipped.plan" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
check "verify rejects a flipped weight byte (exit 6)" exits_with 6 "$LLMC" verify "$WORK/flipped.plan"
head -c 100 "$WORK/a.plan" >"$WORK/short.plan"
check "run rejects a truncated plan (exit 6)" exits_with 6 "$LLMC" run "$WORK/short.plan" --prompt-ids 1 --max-new 1

inspect_json() {
    "$LLMC" inspect "$WORK/a.plan" --json >"$WORK/inspect.json" || return 1
    $PY - "$WORK/inspect.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["arena_bytes"] > 0, j["arena_bytes"]
assert j["weight_bytes"] > 0
assert sum(j["op_counts"].values()) == j["ops_total"]
assert [p["name"] for p in j["passes"]][:1] == ["shape-inference"]
assert j["max_context"] == 128
PYEOF
}
check "inspect --json reports ops, arena, weights and passes" inspect_json
# inspect --resolver writes C: a program that declares the plan's resolver
# with it runs the plan through llmc_rt_session_init_ops
inspect_resolver() {
    "$LLMC" inspect "$WORK/a.plan" --resolver >"$WORK/plan_resolver.h" || return 1
    for op in $($PY -c 'import json, sys; print(*json.load(open(sys.argv[1]))["op_counts"])' "$WORK/inspect.json"); do
        grep -q "LLMC_RT_OP($op)" "$WORK/plan_resolver.h" || { echo "no entry for $op"; return 1; }
    done
    cat >"$WORK/resolver_main.c" <<'CEOF'
#include <stdio.h>
#include <stdlib.h>
#include "llmc_rt.h"
#include "plan_resolver.h"
static LLMC_RT_RESOLVER(plan_ops, LLMC_RESOLVER_ENTRIES);
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[argc - 1], "rb");
    static _Alignas(64) unsigned char bytes[64 << 20];
    size_t size = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f)
        fclose(f);
    llmc_rt_plan plan;
    llmc_rt_session s;
    llmc_rt_error err = {0};
    int64_t token = 1;
    if (llmc_rt_plan_open(&plan, bytes, size, 0, &err))
        return puts(err.msg), 1;
    llmc_rt_plan_info info;
    llmc_rt_plan_info_of(&plan, &info);
    size_t n = llmc_rt_session_memory(&plan);
    void *mem = malloc(n);
    int failed = llmc_rt_session_init_ops(&s, &plan, info.max_context, &plan_ops, mem, n, &err) ||
                 llmc_rt_session_feed(&s, &token, 1, NULL, &err);
    if (failed)
        puts(err.msg);
    free(mem);
    return failed;
}
CEOF
    cc -std=c11 -Wall -Wextra -Werror ${SAN_FLAGS:-} -Iruntime -I"$WORK" -o "$WORK/resolver_main" \
        "$WORK/resolver_main.c" "$BUILD/libllmcrt.a" -lm && "$WORK/resolver_main" "$WORK/a.plan"
}
check "inspect --resolver lists every op code; a session with only those runs the plan" inspect_resolver
flatc_agrees() {   # Debian's flatc decodes the LLM plan; its JSON agrees with inspect
    rm -rf "$WORK/flatc" && mkdir -p "$WORK/flatc"
    flatc --json --raw-binary --strict-json -o "$WORK/flatc" schemas/plan.fbs -- "$WORK/a.plan" || return 1
    $PY - "$WORK/flatc/a.json" "$WORK/inspect.json" <<'PYEOF'
import json, sys
plan, inspect = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert plan["format_version"] == 3 and plan["target"] in ("generic", "avx2", "neon-dot", "neon-i8mm")
assert len(plan["tensors"]) == inspect["tensors"], (len(plan["tensors"]), inspect["tensors"])
assert len(plan["ops"]) == inspect["ops_total"]
assert int(plan["arena_size"]) == inspect["arena_bytes"]
assert sum(int(s["size"]) for s in plan["segments"]) == inspect["weight_bytes"]
assert [i["role"] for i in plan["inputs"]][:1] == ["InputIds"]
PYEOF
}
check "flatc decodes the LLM plan against schemas/plan.fbs and agrees with inspect" flatc_agrees
check "inspect prints the arena size" sh -c "'$LLMC' inspect '$WORK/a.plan' | grep -qi 'arena'"
check "run past the max context exits 2" exits_with 2 "$LLMC" run "$WORK/a.plan" --prompt-ids 1,2,3 --max-new 127
check "run prints as many ids as asked" sh -c "test \$('$LLMC' run '$WORK/a.plan' --prompt-ids 1,2,3 --max-new 5 | wc -w) -eq 5"
# check-onnx imports the model before it reads the data set, so a sequence
# input is reported as such, not as a data file that is not a tensor.
SEQ_CASE=$WORK/sequence_case
mkdir -p "$SEQ_CASE/test_data_set_0"
$PY - "$SEQ_CASE" <<'PYEOF'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
case = sys.argv[1]
seq = helper.make_tensor_sequence_value_info
graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [seq("x", TensorProto.FLOAT, [2])], [seq("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
open(case + "/model.onnx", "wb").write(model.SerializeToString())
items = [np.ones(2, np.float32)]
for name in ("input_0", "output_0"):
    data = numpy_helper.from_list(items, name).SerializeToString()
    open("%s/test_data_set_0/%s.pb" % (case, name), "wb").write(data)
PYEOF
check "check-onnx of a sequence input exits 4" exits_with 4 "$LLMC" check-onnx "$SEQ_CASE"
check "check-onnx of a sequence input says it is not a tensor" \
    sh -c "'$LLMC' check-onnx '$SEQ_CASE' | grep -q \"input 'x' is not a tensor\""

tap_done
