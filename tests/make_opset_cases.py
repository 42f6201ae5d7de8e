#!/usr/bin/python3
"""Writes ONNX backend-style node cases for what opsets 18..21 changed in the
ops llmc compiles: Reduce* axes as input 1 (18), bool ReduceMax/Min (20),
Split num_outputs (18), ScatterND max/min (18), Cast saturate (19), Gelu
(20), ConstantOfShape and the layout ops at 21.  Each case is OUT_DIR/<name>/model.onnx with
test_data_set_0/input_K.pb; the expected outputs are not written here:
scripts/ort_case_outputs.js computes them with ONNX Runtime.  The cases
Debian's libonnx-testdata (ONNX 1.12, opsets up to 17) cannot hold.

Also writes OUT_DIR/refused/<name>.onnx: models that use a type llmc has no
tensors of (float8, int4), which the compiler must refuse by name.

Usage: /usr/bin/python3 tests/make_opset_cases.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper

# ONNX 1.12 (Debian) predates these TensorProto.DataType values.
FLOAT8E4M3FN, INT4 = 17, 22

rng = np.random.default_rng(0)


def save_case(out, name, opset, nodes, inputs, outputs, initializers=()):
    """inputs: [(name, array)]; outputs: [(name, elem_type, dims or None)]."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(n, t, d) for n, t, d in outputs], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="llmc-tests")
    model.ir_version = 10 if opset >= 21 else 9 if opset >= 19 else 8
    case = os.path.join(out, name)
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    with open(os.path.join(case, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for k, (n, a) in enumerate(inputs):
        with open(os.path.join(case, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def floats(*shape):
    return rng.uniform(-3, 3, shape).astype(np.float32)


def i64(*values):
    return np.array(values, dtype=np.int64)


REDUCE_OPS = {"ReduceMean": "reduce_mean", "ReduceMax": "reduce_max", "ReduceMin": "reduce_min",
              "ReduceProd": "reduce_prod"}


def reduce_cases(out):
    """Opset 18: axes is input 1 (fed as a graph input, as ONNX's cases do)."""
    F = TensorProto.FLOAT
    for op, stem in REDUCE_OPS.items():
        data = rng.uniform(0.5, 1.5, (3, 2, 2)).astype(np.float32) if op == "ReduceProd" else floats(3, 2, 2)
        for suffix, axes, attrs in [("do_not_keepdims_random", i64(1), {"keepdims": 0}),
                                    ("keepdims_random", i64(1), {"keepdims": 1}),
                                    ("negative_axes_keepdims_random", i64(-2, 0), {"keepdims": 1}),
                                    ("default_axes_keepdims_random", None, {"keepdims": 1}),
                                    ("empty_axes_input_noop_random", i64(), {"keepdims": 1, "noop_with_empty_axes": 1})]:
            ins = [("data", data)] + ([("axes", axes)] if axes is not None else [])
            node = helper.make_node(op, [n for n, _ in ins], ["reduced"], **attrs)
            save_case(out, "test_%s_%s_opset18" % (stem, suffix), 18, [node], ins, [("reduced", F, None)])
    # opset 20 adds bool to ReduceMax and ReduceMin
    for op, stem in [("ReduceMax", "reduce_max"), ("ReduceMin", "reduce_min")]:
        node = helper.make_node(op, ["data", "axes"], ["reduced"], keepdims=1)
        save_case(out, "test_%s_bool_inputs_opset20" % stem, 20, [node],
                  [("data", rng.uniform(0, 1, (4, 3)) > 0.5), ("axes", i64(1))],
                  [("reduced", TensorProto.BOOL, None)])
    # axes as a constant, with keepdims 0 over the last axis: the form
    # exporters write for norms
    for op, stem in REDUCE_OPS.items():
        axes = numpy_helper.from_array(i64(-1), "axes")
        node = helper.make_node(op, ["data", "axes"], ["reduced"], keepdims=0)
        save_case(out, "test_%s_initializer_axes_opset18" % stem, 18, [node], [("data", floats(2, 3, 4))],
                  [("reduced", F, None)], [axes])


def split_cases(out):
    F = TensorProto.FLOAT
    for name, shape, axis, parts in [("1d_uneven", (7,), 0, 4), ("2d_uneven", (2, 8), 1, 3),
                                     ("equal_parts_1d", (6,), 0, 3)]:
        names = ["output_%d" % i for i in range(parts)]
        node = helper.make_node("Split", ["input"], names, axis=axis, num_outputs=parts)
        save_case(out, "test_split_%s_num_outputs_opset18" % name, 18, [node], [("input", floats(*shape))],
                  [(n, F, None) for n in names])
    node = helper.make_node("Split", ["input", "split"], ["a", "b"], axis=1)
    save_case(out, "test_split_variable_parts_2d_opset18", 18, [node],
              [("input", floats(2, 6)), ("split", i64(2, 4))], [("a", F, None), ("b", F, None)])


def gelu_cases(out):
    F = TensorProto.FLOAT
    for approximate in ["none", "tanh"]:
        stem = "default" if approximate == "none" else "tanh"
        for k, shape in [(1, (3,)), (2, (3, 4, 5))]:
            attrs = {} if approximate == "none" else {"approximate": "tanh"}
            node = helper.make_node("Gelu", ["x"], ["y"], **attrs)
            save_case(out, "test_gelu_%s_%d" % (stem, k), 20, [node], [("x", floats(*shape))], [("y", F, None)])


def cast_cases(out):
    for opset in (19, 21):
        # saturate 1 (the default) written out, or omitted; ONNX Runtime refuses
        # saturate 0 on a cast to a type other than float8
        for to, name, saturate in [(TensorProto.INT32, "INT32", 1), (TensorProto.INT64, "INT64", None),
                                   (TensorProto.BOOL, "BOOL", 1), (TensorProto.UINT8, "UINT8", None)]:
            x = np.array([[0.0, -2.7, 3.2], [7.9, 0.0, 1.5]], dtype=np.float32)
            if to == TensorProto.UINT8:
                x = np.abs(x)       # negative floats to uint8 are undefined
            attrs = {"saturate": saturate} if saturate is not None else {}
            node = helper.make_node("Cast", ["input"], ["output"], to=to, **attrs)
            save_case(out, "test_cast_FLOAT_to_%s%s_opset%d" % (name, "_saturate" if attrs else "", opset), opset,
                      [node],
                      [("input", x)], [("output", to, None)])
        node = helper.make_node("Cast", ["input"], ["output"], to=TensorProto.FLOAT)
        save_case(out, "test_cast_INT64_to_FLOAT_opset%d" % opset, opset, [node],
                  [("input", i64(-3, 0, 5, 1 << 40))], [("output", TensorProto.FLOAT, None)])


def scatter_cases(out):
    data = np.arange(1, 17, dtype=np.float32).reshape(4, 4)
    indices = np.array([[0], [2], [0]], dtype=np.int64)
    updates = floats(3, 4) * 10
    for reduction in ["max", "min"]:
        node = helper.make_node("ScatterND", ["data", "indices", "updates"], ["y"], reduction=reduction)
        save_case(out, "test_scatternd_%s_opset18" % reduction, 18, [node],
                  [("data", data), ("indices", indices), ("updates", updates)], [("y", TensorProto.FLOAT, None)])


def opset21_cases(out):
    """Ops whose opset 21 version only adds types: the float32 forms run."""
    F = TensorProto.FLOAT
    x = floats(2, 3, 4)
    cases = [
        ("transpose", [helper.make_node("Transpose", ["x"], ["y"], perm=[2, 0, 1])]),
        ("flatten", [helper.make_node("Flatten", ["x"], ["y"], axis=2)]),
        ("reshape", [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(i64(4, 0, -1))),
                     helper.make_node("Reshape", ["x", "s"], ["y"])]),
        ("squeeze_unsqueeze", [helper.make_node("Constant", [], ["a"], value=numpy_helper.from_array(i64(1))),
                               helper.make_node("Unsqueeze", ["x", "a"], ["u"]),
                               helper.make_node("Squeeze", ["u", "a"], ["y"])]),
        ("identity", [helper.make_node("Identity", ["x"], ["y"])]),
        ("shape_start_end", [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
                             helper.make_node("ConstantOfShape", ["s"], ["y"],
                                              value=numpy_helper.from_array(np.array([1.5], np.float32)))]),
    ]
    for name, nodes in cases:
        save_case(out, "test_%s_opset21" % name, 21, nodes, [("x", x)], [("y", F, None)])
    for opset in (20, 21):
        node = helper.make_node("ConstantOfShape", ["shape"], ["y"],
                                value=numpy_helper.from_array(np.array([7], np.int32)))
        save_case(out, "test_constantofshape_int32_opset%d" % opset, opset, [node], [("shape", i64(2, 3))],
                  [("y", TensorProto.INT32, None)])


def refused_models(out):
    """Float8 (opset 19) and int4 (opset 21): types llmc has no tensors of."""
    os.makedirs(os.path.join(out, "refused"), exist_ok=True)
    F = TensorProto.FLOAT
    for name, opset, to in [("cast_to_float8e4m3fn", 19, FLOAT8E4M3FN), ("cast_to_int4", 21, INT4)]:
        nodes = [helper.make_node("Cast", ["x"], ["q"], to=to, saturate=1),
                 helper.make_node("Cast", ["q"], ["y"], to=F)]
        graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", F, [4])],
                                  [helper.make_tensor_value_info("y", F, [4])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        with open(os.path.join(out, "refused", name + ".onnx"), "wb") as f:
            f.write(model.SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_opset_cases.py OUT_DIR")
    out = sys.argv[1]
    for make in (reduce_cases, split_cases, gelu_cases, cast_cases, scatter_cases, opset21_cases, refused_models):
        make(out)


if __name__ == "__main__":
    main()
