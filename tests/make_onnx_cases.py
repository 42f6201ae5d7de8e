#!/usr/bin/python3
"""Writes the small ONNX models tests/unit/test_import.c reads.

Usage: /usr/bin/python3 tests/make_onnx_cases.py OUT_DIR

Many models are deliberately invalid (cycles, undefined names, unsafe
external data paths ...), so the onnx checker is never run.  Tensor
contents follow simple formulas the C test recomputes; keep both in sync.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def model(nodes, inputs, outputs, initializers=(), opset=OPSET, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=imports, producer_name="llmc-tests")


def save(m, out, name):
    with open(os.path.join(out, name), "wb") as f:
        f.write(m.SerializeToString())


def float_input(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def identity_model(opset=OPSET):
    return model([helper.make_node("Identity", ["x"], ["y"], name="id")],
                 [float_input("x", [2])], [float_input("y", [2])], opset=opset)


def typed(name, dtype, dims, field, values):
    """A TensorProto whose data sits in a typed field (not raw_data)."""
    t = TensorProto(name=name, data_type=dtype, dims=dims)
    getattr(t, field).extend(values)
    return t


def typed_initializers():
    return [
        typed("t_float", TensorProto.FLOAT, [2, 3], "float_data", [1.5 * i - 2 for i in range(6)]),
        typed("t_int32", TensorProto.INT32, [4], "int32_data", [-7, 0, 7, 2**31 - 1]),
        typed("t_int64", TensorProto.INT64, [2], "int64_data", [-(2**40), 5]),
        typed("t_double", TensorProto.DOUBLE, [3], "double_data", [0.1, -2.5, 1e300]),
        typed("t_bool", TensorProto.BOOL, [4], "int32_data", [1, 0, 1, 1]),
        typed("t_float16", TensorProto.FLOAT16, [2], "int32_data", [0x3C00, 0xC000]),
        typed("t_bfloat16", TensorProto.BFLOAT16, [1], "int32_data", [0x3F80]),
        typed("t_uint8", TensorProto.UINT8, [3], "int32_data", [0, 128, 255]),
        typed("t_int8", TensorProto.INT8, [3], "int32_data", [-128, -1, 127]),
        typed("t_int16", TensorProto.INT16, [2], "int32_data", [-300, 300]),
        typed("t_uint16", TensorProto.UINT16, [2], "int32_data", [65535, 1]),
        typed("t_uint32", TensorProto.UINT32, [2], "uint64_data", [4294967295, 7]),
        typed("t_uint64", TensorProto.UINT64, [1], "uint64_data", [2**63 + 5]),
        TensorProto(name="t_empty", data_type=TensorProto.FLOAT, dims=[0, 3]),
    ]


def small_model():
    """An LLM-shaped graph: role inputs, raw and typed initializers,
    Constant nodes of every kind, attributes of every supported type."""
    W = numpy_helper.from_array((np.arange(16, dtype=np.float32) * 0.5).reshape(4, 4), "W")
    ln_w = numpy_helper.from_array(np.ones(4, dtype=np.float32), "ln_w")
    shape_c = numpy_helper.from_array(np.array([2, 2], dtype=np.int64), "shape_c")
    bias = numpy_helper.from_array(np.array([-1, 0, 1 << 40], dtype=np.int64), "bias")
    cos_value = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.25])
    nodes = [
        helper.make_node("Gather", ["W", "input_ids"], ["emb"], name="gather", axis=0),
        helper.make_node("Constant", [], ["half"], name="c_half", value_float=0.5),
        helper.make_node("Constant", [], ["perm_c"], name="c_tensor",
                         value=numpy_helper.from_array(np.array([1, 0], dtype=np.int64))),
        helper.make_node("Constant", [], ["ints_c"], name="c_ints", value_ints=[3, 1]),
        helper.make_node("Constant", [], ["int_c"], name="c_int", value_int=7),
        helper.make_node("Constant", [], ["floats_c"], name="c_floats", value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Mul", ["emb", "half"], ["scaled"], name="mul", coeffs=[0.5, 1.5]),
        helper.make_node("Transpose", ["scaled"], ["t1"], name="transpose", perm=[0, 2, 1],
                         note="hello", tags=["a", "b"]),
        helper.make_node("Softmax", ["t1"], ["probs"], name="softmax", axis=-1),
        helper.make_node("LayerNormalization", ["emb", "ln_w", ""], ["ln"], name="ln",
                         epsilon=1e-5, axis=-1),
        helper.make_node("ConstantOfShape", ["shape_c"], ["filled"], name="cos", value=cos_value),
        helper.make_node("Cast", ["ln"], ["logits"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Concat", ["past_key_values.0.key", "past_key_values.0.value"],
                         ["present.0.key"], name="concat", axis=2),
    ]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]),
        float_input("past_key_values.0.key", ["batch", 2, "past", 4]),
        float_input("past_key_values.0.value", ["batch", 2, "past", 4]),
        float_input("extra", ["foo", 3]),
        float_input("W", [4, 4]),   # an initializer listed as input (IR < 4 style)
    ]
    outputs = [
        float_input("logits", ["batch", "seq", 4]),
        float_input("present.0.key", ["batch", 2, "total", 4]),
        float_input("probs", ["batch", "nobody_knows", "seq"]),
        helper.make_tensor_value_info("filled", TensorProto.FLOAT, None),
    ]
    scalar = numpy_helper.from_array(np.array(-3.0, dtype=np.float32), "scalar")
    inits = [W, ln_w, shape_c, bias, scalar] + typed_initializers()
    return model(nodes, inputs, outputs, inits)


def mask_like_seq_model():
    nodes = [helper.make_node("Identity", ["attention_mask"], ["y"], name="id")]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"])]
    return model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.INT64, ["b", "s"])])


def external(t, location, offset=None, length=None):
    """Marks TensorProto t as stored in `location` (keeps dims and type)."""
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            t.external_data.add(key=key, value=str(value))
    return t


def ext_arrays():
    return {
        "A": (np.arange(6, dtype=np.float32) - 2.5).reshape(2, 3),
        "B": np.array([10, -20, 30, 1 << 50], dtype=np.int64),
        "C": np.arange(5, dtype=np.float32) * 0.25,
    }


def ext_model(tensors):
    """Identity on each external initializer (so each one is used)."""
    nodes = [helper.make_node("Identity", [t.name], ["out_" + t.name], name="id_" + t.name) for t in tensors]
    outputs = [helper.make_tensor_value_info("out_" + t.name, t.data_type, None) for t in tensors]
    return model(nodes, [], outputs, tensors)


def write_ext_single(out):
    """One weights file with location/offset/length; C lives in a subfolder."""
    d = os.path.join(out, "ext_single")
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    arrays = ext_arrays()
    tensors, blob = [], b""
    for name in ("A", "B"):
        blob += b"\x00" * 3           # padding: offsets are not 0 or aligned
        data = arrays[name].tobytes()
        tensors.append(external(numpy_helper.from_array(arrays[name], name), "weights.bin", len(blob), len(data)))
        blob += data
    with open(os.path.join(d, "weights.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(d, "sub", "c.bin"), "wb") as f:
        f.write(arrays["C"].tobytes())
    tensors.append(external(numpy_helper.from_array(arrays["C"], "C"), "sub/c.bin"))
    save(ext_model(tensors), d, "model.onnx")


def write_ext_per_tensor(out):
    """torch's layout for >2 GiB models: one file per tensor, location only."""
    d = os.path.join(out, "ext_per_tensor")
    os.makedirs(d, exist_ok=True)
    tensors = []
    for name, arr in ext_arrays().items():
        with open(os.path.join(d, "onnx__" + name), "wb") as f:
            f.write(arr.tobytes())
        tensors.append(external(numpy_helper.from_array(arr, name), "onnx__" + name))
    save(ext_model(tensors), d, "model.onnx")


def write_ext_bad(out):
    """Unsafe locations and short files, one model each."""
    d = os.path.join(out, "ext_bad")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(out, "outside.bin"), "wb") as f:
        f.write(b"\x00" * 64)
    with open(os.path.join(d, "data.bin"), "wb") as f:
        f.write(b"\x00" * 10)
    link = os.path.join(d, "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../outside.bin", link)
    four = np.zeros(4, dtype=np.float32)          # needs 16 bytes
    cases = {
        "dotdot": ("../outside.bin", None, None),
        "absolute": ("/etc/passwd", None, None),
        "symlink": ("link.bin", None, None),
        "missing": ("nope.bin", None, None),
        "short": ("data.bin", None, None),
        "offset": ("data.bin", 100, 16),
        "length": ("data.bin", 0, 8),
    }
    for case, (location, offset, length) in cases.items():
        t = external(numpy_helper.from_array(four, "w_" + case), location, offset, length)
        save(ext_model([t]), d, case + ".onnx")


def write_unsupported(out):
    nodes = [
        helper.make_node("FusedMatMul", ["x", "x"], ["a"], name="fused", domain="com.microsoft"),
        helper.make_node("Mod", ["a", "x"], ["b"], name="modder"),
        helper.make_node("Add", ["b", "x"], ["c"], name="adder"),
        helper.make_node("NonZero", ["c"], ["d"], name="nz"),
        helper.make_node("Frobnicate", ["d"], ["e"], name="frob", domain="x.custom"),
    ]
    save(model(nodes, [float_input("x", [2])], [float_input("e", None)],
               extra_opsets=[("com.microsoft", 1)]), out, "unsupported.onnx")
    many = []
    prev = "x"
    for i in range(300):
        many.append(helper.make_node("Mod", [prev, "x"], ["m%d" % i], name="mod_node_with_a_long_name_%03d" % i))
        prev = "m%d" % i
    save(model(many, [float_input("x", [2])], [float_input(prev, None)]), out, "many_unsupported.onnx")


def write_graph_errors(out):
    x = [float_input("x", [2])]
    save(model([helper.make_node("Add", ["x", "foo"], ["y"], name="adder")], x, [float_input("y", None)]),
         out, "undefined_input.onnx")
    save(model([helper.make_node("Relu", ["x"], ["y"], name="first"),
                helper.make_node("Neg", ["x"], ["y"], name="second")], x, [float_input("y", None)]),
         out, "duplicate_producer.onnx")
    save(model([helper.make_node("Add", ["x", "b"], ["a"], name="cyc_add"),
                helper.make_node("Relu", ["a"], ["b"], name="cyc_relu")], x, [float_input("a", None)]),
         out, "cycle.onnx")
    save(model([helper.make_node("Relu", ["x"], ["y"], name="r")], x, [float_input("ghost", None)]),
         out, "undefined_output.onnx")
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "b", [], [float_input("z", [2])])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    save(model([helper.make_node("If", ["cond"], ["y"], name="branchy", then_branch=branch, else_branch=branch)],
               x + [cond], [float_input("y", None)]), out, "subgraph.onnx")


def write_dim_errors(out):
    def one_input(dims_fn, name):
        vi = float_input("x", [1, 1])
        dims_fn(vi.type.tensor_type.shape.dim)
        save(model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi], [float_input("y", None)]), out, name)

    def negative(dims):
        dims[0].dim_value = -2

    def unbound(dims):
        dims[1].dim_param = "foo"

    def unsized(dims):
        dims[1].ClearField("dim_value")

    one_input(negative, "negative_dim_input.onnx")
    one_input(unbound, "unbound_dim.onnx")
    one_input(unsized, "unsized_dim.onnx")
    x = [float_input("x", [2])]
    y = [float_input("y", None)]
    relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    save(model(relu, x, y, [TensorProto(name="neg", data_type=TensorProto.FLOAT, dims=[3, -1])]),
         out, "negative_dim_init.onnx")
    huge = TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[1 << 40, 1 << 40])
    save(model(relu, x, y, [huge]), out, "overflow_shape.onnx")
    short = TensorProto(name="short_raw", data_type=TensorProto.FLOAT, dims=[3], raw_data=b"\x00" * 8)
    save(model(relu, x, y, [short]), out, "short_raw.onnx")
    few = typed("few_typed", TensorProto.INT64, [3], "int64_data", [1, 2])
    save(model(relu, x, y, [few]), out, "short_typed.onnx")


def write_misc(out):
    save(identity_model(12), out, "opset12.onnx")
    save(identity_model(22), out, "opset22.onnx")
    no_default = identity_model()
    del no_default.opset_import[:]
    no_default.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    save(no_default, out, "no_default_opset.onnx")
    save(onnx.ModelProto(ir_version=8, opset_import=[helper.make_opsetid("", OPSET)]), out, "no_graph.onnx")
    sparse = helper.make_sparse_tensor(helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
                                       helper.make_tensor("i", TensorProto.INT64, [1], [0]), [4])
    save(model([helper.make_node("Constant", [], ["y"], name="sparse_c", sparse_value=sparse)], [],
               [float_input("y", None)]), out, "constant_sparse.onnx")
    save(model([helper.make_node("Constant", [], ["y"], name="string_c", value_string="hi")], [],
               [float_input("y", None)]), out, "constant_string.onnx")
    save(mask_like_seq_model(), out, "mask_seq.onnx")
    with open(os.path.join(out, "not_onnx.onnx"), "wb") as f:
        f.write(b"\xff\xff\xff\xff this is not a protobuf \x07\x07")


def write_tensor_files(out):
    arr = (np.arange(6, dtype=np.float32) * 1.25 - 1).reshape(2, 3)
    with open(os.path.join(out, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(arr, "x").SerializeToString())
    with open(os.path.join(out, "output_0.pb"), "wb") as f:
        f.write(typed("y", TensorProto.INT64, [3, 1], "int64_data", [4, -5, 1 << 45]).SerializeToString())


def half_model():
    """16-bit floats, which llmc widens to float32: every float16 and every
    bfloat16 bit pattern as raw_data initializers, a float16 Constant, a
    float16 ConstantOfShape value, float16 input/output/value_info and a
    Cast to float16."""
    bits = np.arange(65536, dtype="<u2")
    f16_all = TensorProto(name="f16_all", data_type=TensorProto.FLOAT16, dims=[65536], raw_data=bits.tobytes())
    bf16_all = TensorProto(name="bf16_all", data_type=TensorProto.BFLOAT16, dims=[256, 256],
                           raw_data=bits.tobytes())
    shape_c = numpy_helper.from_array(np.array([3], dtype=np.int64), "shape_c")
    nodes = [
        helper.make_node("Constant", [], ["c16"], name="c16",
                         value=numpy_helper.from_array(np.array([0.5, -65504, 6e-8], dtype=np.float16))),
        helper.make_node("ConstantOfShape", ["shape_c"], ["filled"], name="cos",
                         value=numpy_helper.from_array(np.array([1.5], dtype=np.float16))),
        helper.make_node("Add", ["x", "c16"], ["sum"], name="add"),
        helper.make_node("Cast", ["sum"], ["y"], name="to16", to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["sum"], ["z"], name="tobf16", to=TensorProto.BFLOAT16),
    ]
    m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3]),
               helper.make_tensor_value_info("z", TensorProto.BFLOAT16, [3]),
               helper.make_tensor_value_info("filled", TensorProto.FLOAT16, [3])],
              [f16_all, bf16_all, shape_c])
    m.graph.value_info.append(helper.make_tensor_value_info("sum", TensorProto.FLOAT16, [3]))
    return m


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_onnx_cases.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(small_model(), out, "small.onnx")
    save(half_model(), out, "half.onnx")
    write_ext_single(out)
    write_ext_per_tensor(out)
    write_ext_bad(out)
    write_unsupported(out)
    write_graph_errors(out)
    write_dim_errors(out)
    write_misc(out)
    write_tensor_files(out)


if __name__ == "__main__":
    main()
