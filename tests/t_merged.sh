#!/usr/bin/env bash
# optimum's merged decoders (decoder_model_merged.onnx: one If on the input
# use_cache_branch, the decoders with and without past as its branches) and
# the importer's If inlining (compiler/onnx/onnx_if.c).
#
# For LLaMA, Qwen2, GPT-2 and Phi (transformers style, opset 17): the merged
# file (tests/zoo.sh zoo_merged: scripts/merge_decoders.py on the exports
# with and without past) compiles with the with-past branch inlined, fuses
# to the same plan ops as the unmerged export, and for prompts of 1, 7 and
# 64 tokens + 32 greedy steps gives ONNX Runtime's ids (ort_generate.js on
# the merged file: its no-past branch at step 0, use_cache_branch = false)
# with logits within 1e-4 * max|logit|.
# Small models: an If on a constant condition runs (llmc check-onnx against
# numpy), and the Ifs llmc does not inline are refused naming the node (and
# the output), with nothing written; so are ONNX's own If cases.
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/merged
MAX_NEW=32
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/zoo.sh

PROMPTS="5 5,17,42,7,99,3,250 $(seq -s, 0 63 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i * 37 + 11) % 512}')"
INLINED="If 'optimum::if': branch then_branch inlined (reads the past key/values; 'use_cache_branch' is constant"

# The plan's op histogram and per-layer count (llmc inspect).
plan_ops() {
    "$LLMC" inspect "$1" | awk '/^ops /{print} /^tokenizer/{on = 1; next} /^inputs:/{on = 0} on'
}

compiled_with_inline() {   # compiled_with_inline MODEL PLAN
    "$LLMC" compile "$1" -o "$2" --max-context 256 >"$2.log" 2>&1 || { cat "$2.log"; return 1; }
    grep -F "$INLINED" "$2.log"
}

same_ops() {   # same_ops MERGED_PLAN UNMERGED_MODEL
    "$LLMC" compile "$2" -o "$1.unmerged" --max-context 256 >"$1.unmerged.log" 2>&1 || { cat "$1.unmerged.log"; return 1; }
    plan_ops "$1" >"$1.ops" && plan_ops "$1.unmerged" >"$1.unmerged.ops" && cat "$1.ops" &&
        diff "$1.unmerged.ops" "$1.ops"
}

same_tokens() {   # same_tokens MODEL PLAN BASE PROMPT
    ort_generate "$1" "$3.ort.bin" --prompt-ids "$4" --max-new "$MAX_NEW" >"$3.ort.tok" || return 1
    "$LLMC" run "$2" --prompt-ids "$4" --max-new "$MAX_NEW" --logits-out "$3.llmc.bin" >"$3.llmc.tok" || return 1
    echo "ort : $(cat "$3.ort.tok")" && echo "llmc: $(cat "$3.llmc.tok")" && cmp -s "$3.ort.tok" "$3.llmc.tok"
}

for family in llama qwen2 gpt2 phi; do
    plan=$WORK/$family.plan
    if ! model=$(zoo_merged "$family" 17 2>"$WORK/$family.export.log"); then
        check "$family: merged decoder exported" sh -c 'cat "$1"; false' - "$WORK/$family.export.log"
        continue
    fi
    check "$family: merged decoder compiles, with-past branch inlined" compiled_with_inline "$model" "$plan"
    check "$family: the same plan ops as the unmerged export" same_ops "$plan" "$(zoo_model "$family" 17 hf)"
    for prompt in $PROMPTS; do
        k=$(echo "$prompt" | tr , '\n' | wc -l)
        base=$WORK/$family-p$k
        check "$family, $k-token prompt + $MAX_NEW: tokens match onnxruntime" same_tokens "$model" "$plan" "$base" "$prompt"
        check "$family, $k-token prompt + $MAX_NEW: logits within 1e-4 of onnxruntime" \
            "$PY" scripts/compare_logits.py "$base.ort.bin" "$base.llmc.bin" --vocab 512 --rtol 1e-4
    done
done

# ---- small If models ----
"$PY" - "$WORK/cases" <<'EOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

root = sys.argv[1]

def const(name, values, dtype=np.float32):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.array(values, dtype=dtype)))

def graph_of(name, nodes, outputs, inits=()):
    return h.make_graph(nodes, name, [], outputs, initializer=list(inits))

def out(name, shape, dtype=T.FLOAT):
    return h.make_tensor_value_info(name, dtype, shape)

def save(case, nodes, inputs, outputs, inits=(), data=None):
    os.makedirs(os.path.join(root, case), exist_ok=True)
    model = h.make_model(h.make_graph(nodes, case, inputs, outputs, initializer=list(inits)),
                         opset_imports=[h.make_opsetid("", 17)])
    onnx.save(model, os.path.join(root, case, "model.onnx"))
    if data:
        d = os.path.join(root, case, "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        for kind, tensors in data.items():
            for i, (name, a) in enumerate(tensors):
                with open(os.path.join(d, f"{kind}_{i}.pb"), "wb") as f:
                    f.write(nh.from_array(a, name).SerializeToString())

x = h.make_tensor_value_info("x", T.FLOAT, [3])
flag = h.make_tensor_value_info("flag", T.BOOL, [])
two = (graph_of("a", [const("a", [1, 2, 3])], [out("a", [3])]),
       graph_of("b", [const("b", [4, 5, 6])], [out("b", [3])]))

# A constant condition: else_branch runs; it reads x and the top-level w
# from the outer scope, its own initializer and Constant node, and names
# its output differently from the If's.
xv, wv, bv = np.array([0.5, -1, 2], np.float32), np.array([3, 4, 5], np.float32), np.array([1, 1, -1], np.float32)
then_g = graph_of("then", [h.make_node("Mul", ["x", "w"], ["t"])], [out("t", [3])])
else_g = graph_of("else", [h.make_node("Add", ["x", "w"], ["e1"]), h.make_node("Add", ["e1", "b"], ["e2"]),
                           const("k", [2, 2, 2]), h.make_node("Mul", ["e2", "k"], ["e_out"])],
                  [out("e_out", [3])], [nh.from_array(bv, "b")])
save("if_constant", [h.make_node("If", ["cond"], ["y"], name="if_const", then_branch=then_g, else_branch=else_g),
                     h.make_node("Add", ["y", "x"], ["z"])],
     [x], [out("z", [3])], [nh.from_array(np.array(False), "cond"), nh.from_array(wv, "w")],
     {"input": [("x", xv)], "output": [("z", (xv + wv + bv) * 2 + xv)]})

save("if_computed", [const("zero", 0.0), h.make_node("ReduceSum", ["x"], ["sum"], keepdims=0, name="sum"),
                     h.make_node("Greater", ["sum", "zero"], ["c"], name="positive"),
                     h.make_node("If", ["c"], ["y"], name="if_computed", then_branch=two[0], else_branch=two[1])],
     [x], [out("y", [3])])
save("if_counts", [h.make_node("If", ["flag"], ["y"], name="if_counts",
                               then_branch=graph_of("a", [const("a", [1, 2, 3]), const("a2", [1])],
                                                    [out("a", [3]), out("a2", [1])]),
                               else_branch=two[1])],
     [flag], [out("y", [3])])
save("if_shapes", [h.make_node("If", ["cond"], ["res"], name="if_shapes", then_branch=two[0],
                               else_branch=graph_of("b", [const("b", [4, 5, 6, 7])], [out("b", [4])]))],
     [], [out("res", [3])], [nh.from_array(np.array(True), "cond")])
inner = h.make_node("If", ["cond"], ["a"], name="inner_if", then_branch=two[0], else_branch=two[1])
save("if_nested", [h.make_node("If", ["cond"], ["y"], name="outer_if",
                               then_branch=graph_of("a", [inner], [out("a", [3])]), else_branch=two[1])],
     [], [out("y", [3])], [nh.from_array(np.array(True), "cond")])
EOF
check "small If models written" test -f "$WORK/cases/if_nested/model.onnx"
check "an If on a constant condition: else_branch inlined, outputs match numpy" \
    "$LLMC" check-onnx "$WORK/cases/if_constant"

refused() {   # refused CASE TEXT...: exit 4, every TEXT in the message, no plan
    local case=$1 out=$WORK/$1.plan rc text
    shift
    "$LLMC" compile "$WORK/cases/$case/model.onnx" -o "$out" >"$WORK/$case.log" 2>&1
    rc=$?
    cat "$WORK/$case.log"
    [ "$rc" -eq 4 ] || { echo "exit status $rc, expected 4"; return 1; }
    [ ! -e "$out" ] || { echo "$out was written"; return 1; }
    for text; do grep -qF "$text" "$WORK/$case.log" || { echo "no '$text' in the message"; return 1; }; done
}
check "refused: an If on a condition computed from data" \
    refused if_computed "node 'if_computed' (#" ", If): If on condition 'c', computed from data by node 'positive' (Greater)" "do not decide it"
check "refused: branches with different output counts" \
    refused if_counts "node 'if_counts' (#0, If)" "different output counts"
check "refused: an If with branch outputs of different shapes, naming the output" \
    refused if_shapes "node 'if_shapes' (#0, If)" "an If with branch outputs of different shapes: output 0 'res'"
check "refused: a nested If in the inlined branch" \
    refused if_nested "node 'outer_if' (#0, If)" "then_branch node 'inner_if' (If)" "nested subgraphs"

# ONNX's own If cases: a data-dependent condition (test_if) and branches
# returning sequences / optionals are refused, naming the node.
for case in test_if test_if_seq test_if_opt; do
    dir=/usr/share/libonnx-testdata/data/node/$case
    [ -d "$dir" ] || continue
    check "ONNX $case refused naming the If" \
        sh -c '"$1" check-onnx "$2"; [ $? -eq 4 ] && "$1" check-onnx "$2" 2>&1 | grep -F "(#0, If)"' - "$LLMC" "$dir"
done
tap_done
