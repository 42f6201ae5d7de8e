#!/usr/bin/env bash
# `llmc compile --npu-chunk 32 --npu-export DIR` on the trained model of
# models/: every NPU subgraph of the plan as a standalone ONNX model in QDQ
# form, with reference inputs and the reference delegate's outputs, and a
# manifest.  Checks: every subgraph of the plan (decoded by flatc) has its
# .onnx and .bin files; the manifest lists them with the plan's op ranges,
# boundary tensors (names, dims at S = C), file sizes and a schedule that
# covers the plan's ops in order; onnx.checker (full check) accepts each
# model, opset 17, IR 8; each holds QuantizeLinear, DequantizeLinear and
# MatMul, its int8 2-D initializers are exactly the weights of its Linears
# (one per plan Linear, dequantized per output channel straight into a
# MatMul's B) and its QuantizeLinear scales are the plan's static scales;
# ONNX Runtime runs every model on its .inputs.bin and matches .outputs.bin,
# on the trained model and on the test zoo's gpt2 and phi (LayerNorm, Linear
# biases, tanh and erf GELU); a second export is byte-identical; misuse is
# refused and writes nothing.
#
# Tolerance: max |ORT - delegate| per output <= 1e-3 of the output's max
# magnitude.  ORT (graph optimizations "basic": it runs the QDQ graph as
# written, in float after dequantization) and the delegate (exact int32
# accumulation, then the scales) differ by float rounding only, measured
# ~4e-7 here; a rare one-step difference of a quantized activation at a
# rounding tie would move an output by s_x * |w| <= ~2e-3 of its magnitude
# on this model (the largest weight; ~10x less for a typical one) and does
# not occur on these deterministic inputs.  An export error moves outputs by
# far more: a 1% scale error by 1e-2, a transposed W or a missing Clip
# (-128 instead of -127 at saturation) by more still.  (ORT's "extended"
# and "all" levels fuse the QDQ MatMuls into its int8 kernels, whose AVX2
# u8s8 path saturates int16 pair sums with full-range int8 weights, ORT's
# reduce_range caveat: tens of percent off on a CPU without VNNI, so they
# are not the reference here.)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/npu_export
rm -rf "$WORK" && mkdir -p "$WORK/again"
. tests/tap.sh
. tests/zoo.sh
MODEL=models/tiny-llama.onnx
TOKENIZER=models/tokenizer.json
CALIB=/usr/share/games/fortunes/fortunes    # Debian fortunes (scripts/deps.sh)
CONTEXT=128 CHUNK=32
TOLERANCE=1e-3
EXPORT=$WORK/export

compile() {   # compile OUT.plan LOG [options...]
    local out=$1 log=$2; shift 2
    "$LLMC" compile "$MODEL" --max-context $CONTEXT --tokenizer "$TOKENIZER" --quiet \
        --quant w8a8 --calibrate "$CALIB" -o "$out" "$@" >"$log" 2>&1
}
exported() {
    compile "$WORK/c32.plan" "$WORK/c32.log" --npu-chunk $CHUNK --npu-export "$EXPORT" &&
        cat "$WORK/c32.log" | grep '^npu' &&
        grep -qx "npu export: 8 subgraphs -> $EXPORT (manifest.json)" "$WORK/c32.log"
}
check "compile --npu-chunk $CHUNK --npu-export DIR writes 8 subgraphs and says so" exported
flatc --json --raw-binary --strict-json --defaults-json -o "$WORK" schemas/plan.fbs -- \
    "$WORK/c32.plan"

# The manifest and the files against the plan decoded by flatc.
manifest_check() {
    $PY - "$WORK/c32.json" "$EXPORT" $CHUNK <<'PYEOF'
import json, os, sys
plan = json.load(open(sys.argv[1]))
d, chunk = sys.argv[2], int(sys.argv[3])
man = json.load(open(os.path.join(d, "manifest.json")))
ts, ops = plan["tensors"], plan["ops"]
sgs = plan["subgraphs"]
assert plan["npu_chunk"] == chunk and man["chunk"] == chunk, (plan["npu_chunk"], man["chunk"])
assert man["plan"] == "c32.plan", man["plan"]
assert man["onnx"]["opset"] == 17 and man["onnx"]["ir_version"] == 8
assert len(man["subgraphs"]) == len(sgs) == 8, len(man["subgraphs"])
dims_at = lambda t: [a["c"] + a["s"] * chunk + a["p"] * 0 for a in ts[t]["dims"]]
count = lambda dims: eval("*".join(map(str, dims)) or "1")
for want, got in zip(sgs, man["subgraphs"]):
    name = want["name"]
    assert got["name"] == name and got["file"] == name + ".onnx", got
    assert (got["first_op"], got["n_ops"]) == (want["first_op"], want["n_ops"]), (name, got)
    for side in ("inputs", "outputs"):
        listed = [(t["name"], t["dtype"], t["dims"]) for t in got[side]]
        plan_side = [(ts[t]["name"], "float32", dims_at(t)) for t in want[side]]
        assert listed == plan_side, (name, side, listed, plan_side)
        size = os.path.getsize(os.path.join(d, got["check"][side]))
        assert size == 4 * sum(count(t["dims"]) for t in got[side]), (name, side, size)
    assert os.path.getsize(os.path.join(d, got["file"])) > got["weights_bytes"] > 0, name
# The schedule: nodes cover ops [0, n) in order; npu nodes are the subgraphs.
nodes, at, seen = man["schedule"]["nodes"], 0, []
for node in nodes:
    first, n = node["ops"]
    assert first == at and n > 0, (node, at)
    if node["lane"] == "npu":
        sg = next(s for s in sgs if s["name"] == node["subgraph"])
        assert (sg["first_op"], sg["n_ops"]) == (first, n), node
        seen.append(sg["name"])
    else:
        assert node["op_names"] == [op["name"] for op in ops[first:first + n]], node
    at = first + n
assert at == len(ops) and seen == [s["name"] for s in sgs], (at, seen)
last_attention = max(i for i, nd in enumerate(nodes)
                     if any(op["code"] == "Attention" for op in ops[nd["ops"][0]:sum(nd["ops"])]))
assert man["schedule"]["nodes_per_chunk"] == last_attention + 1
assert [bool(nd.get("last_chunk_only")) for nd in nodes] == \
       [i > last_attention for i in range(len(nodes))]
print(len(sgs), "subgraphs,", len(nodes), "nodes per chunk, ops", at)
PYEOF
}
check "the manifest lists every subgraph with the plan's op ranges, boundary tensors and sizes; its schedule covers the plan's ops" manifest_check

# onnx.checker, the QDQ form and the plan's scales and weights.
models_check() {
    $PY - "$WORK/c32.json" "$EXPORT" <<'PYEOF'
import json, os, sys
import numpy as np
import onnx
from onnx import numpy_helper
plan = json.load(open(sys.argv[1]))
d = sys.argv[2]
ops = plan["ops"]
allowed = {"Clip", "QuantizeLinear", "DequantizeLinear", "MatMul", "Add", "Sub", "Mul", "Div",
           "Max", "Min", "ReduceMean", "Sqrt", "Split", "Reshape", "Sigmoid", "Identity", "Neg",
           "Abs", "Exp", "Tanh", "Relu", "Erf", "LayerNormalization"}
for sg in plan["subgraphs"]:
    path = os.path.join(d, sg["name"] + ".onnx")
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    assert m.ir_version == 8, (path, m.ir_version)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)], path
    g = m.graph
    types = {n.op_type for n in g.node}
    assert {"QuantizeLinear", "DequantizeLinear", "MatMul"} <= types, (path, types)
    assert types <= allowed, (path, types - allowed)
    init = {t.name: t for t in g.initializer}
    writer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i, x in enumerate(n.input):
            readers.setdefault(x, []).append((n, i))
    my_ops = ops[sg["first_op"]:sg["first_op"] + sg["n_ops"]]
    # int8 initializers: 2-D ones are Linear weights, read only by a
    # per-channel DequantizeLinear whose output is only a MatMul's B; the
    # others are zero points, all zero.
    weights = [t for t in g.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 2]
    assert len(weights) == sum(op["code"] == "Linear" for op in my_ops), (path, len(weights))
    for w in weights:
        (dq, slot), = readers[w.name]
        assert dq.op_type == "DequantizeLinear" and slot == 0, (path, w.name)
        assert [a.i for a in dq.attribute if a.name == "axis"] == [1], (path, w.name)
        scales = numpy_helper.to_array(init[dq.input[1]])
        assert scales.shape == (w.dims[1],) and (scales > 0).all(), (path, w.name)
        assert all(n.op_type == "MatMul" and i == 1 for n, i in readers[dq.output[0]]), w.name
    for t in g.initializer:
        if t.data_type == onnx.TensorProto.INT8 and len(t.dims) < 2:
            assert not numpy_helper.to_array(t).any(), (path, t.name)
            assert all(n.op_type in ("QuantizeLinear", "DequantizeLinear") and i == 2
                       for n, i in readers[t.name]), (path, t.name)
    # QuantizeLinear scales: the plan's QuantizeRows static scales, in order;
    # each after a Clip to +-127 scale.
    quant = [n for n in g.node if n.op_type == "QuantizeLinear"]
    want = [op["scale"] for op in my_ops if op["code"] == "QuantizeRows"]
    got = [float(numpy_helper.to_array(init[n.input[1]])) for n in quant]
    assert len(got) == len(want) and all(abs(a - b) <= 1e-4 * b for a, b in zip(got, want)), \
        (path, got, want)
    for n, s in zip(quant, got):
        clip = writer[n.input[0]]
        lo, hi = (float(numpy_helper.to_array(init[x])) for x in clip.input[1:3])
        bound = np.float32(127) * np.float32(s)   # float32, as the exporter computes it
        assert clip.op_type == "Clip" and (lo, hi) == (-bound, bound), (n.name, lo, hi, bound)
print("every model: checker ok, QDQ MatMuls, int8 only for Linear weights, the plan's scales")
PYEOF
}
check "onnx.checker accepts every model; QDQ around each MatMul, int8 initializers only for the Linears' weights, the plan's static scales" models_check

ort_check() {
    node scripts/ort_subgraph_check.js "$EXPORT" --tolerance $TOLERANCE --opt-level basic \
        >"$WORK/ort.txt" 2>&1
    local rc=$?
    cat "$WORK/ort.txt"
    return $rc
}
check "ONNX Runtime runs every subgraph on its inputs and matches the reference delegate within $TOLERANCE of each output's magnitude" ort_check
sed -n 's/^worst /# summary: ORT vs reference delegate, worst relative error /p' "$WORK/ort.txt"

# The zoo's gpt2 and phi (random weights, scripts/export_llm.py) with the
# zoo's tokenizer: the ops the llama-style model has none of.
$PY tests/make_tiny_tokenizer.py "$WORK/zoo-tokenizer" >/dev/null
zoo_check() {   # zoo_check FAMILY
    local fam=$1 dir=$WORK/$1-export model
    model=$(zoo_export "$fam-op14-s1" --family "$fam" --opset 14 --size tiny --seed 1 2>/dev/null) &&
        "$LLMC" compile "$model" --max-context 64 --quiet --quant w8a8             --tokenizer "$WORK/zoo-tokenizer/tokenizer.json" --calibrate "$CALIB"             --npu-chunk 16 -o "$WORK/$fam.plan" --npu-export "$dir" >"$WORK/$fam.log" 2>&1 &&
        grep '^npu export' "$WORK/$fam.log" &&
        $PY -c 'import glob, onnx, sys
types = set()
for f in sorted(glob.glob(sys.argv[1] + "/*.onnx")):
    m = onnx.load(f)
    onnx.checker.check_model(m, full_check=True)
    types |= {n.op_type for n in m.graph.node}
want = {"LayerNormalization", "QuantizeLinear", "DequantizeLinear", "MatMul", sys.argv[2]}
assert want <= types, (want - types)
print("checker ok; ops", sorted(types))' "$dir" "$2" &&
        node scripts/ort_subgraph_check.js "$dir" --tolerance $TOLERANCE --opt-level basic
}
check "gpt2 (LayerNorm, biases, tanh GELU): every subgraph matches in ONNX Runtime" zoo_check gpt2 Tanh
check "phi (LayerNorm, biases, erf GELU): every subgraph matches in ONNX Runtime" zoo_check phi Erf

again() {
    compile "$WORK/again/c32.plan" "$WORK/again.log" --npu-chunk $CHUNK \
        --npu-export "$WORK/again/export" && diff -r "$EXPORT" "$WORK/again/export" &&
        cmp "$WORK/c32.plan" "$WORK/again/c32.plan"
}
check "a second export gives the same bytes in every file" again

refused() {   # refused CODE PATTERN options...: exit code, message, nothing written
    local want=$1 pattern=$2; shift 2
    rm -rf "$WORK/bad.plan" "$WORK/bad-export"
    "$LLMC" compile "$MODEL" --max-context $CONTEXT -o "$WORK/bad.plan" "$@" >"$WORK/bad.out" 2>&1
    local got=$?
    cat "$WORK/bad.out"
    [ "$got" -eq "$want" ] && grep -q -- "$pattern" "$WORK/bad.out" && [ ! -e "$WORK/bad.plan" ] &&
        [ ! -e "$WORK/bad-export" ]
}
check "--npu-export without --npu-chunk is a usage error and writes nothing" \
    refused 2 "--npu-export needs --npu-chunk" --tokenizer "$TOKENIZER" --quant w8a8 \
    --calibrate "$CALIB" --npu-export "$WORK/bad-export"
: >"$WORK/a-file"
not_a_dir() {
    ! compile "$WORK/file.plan" "$WORK/file.log" --npu-chunk $CHUNK --npu-export "$WORK/a-file" &&
        cat "$WORK/file.log" && grep -q "'$WORK/a-file' is not a directory" "$WORK/file.log" &&
        [ ! -s "$WORK/a-file" ]
}
check "--npu-export into a file that is not a directory is refused with its path" not_a_dir
tap_done
