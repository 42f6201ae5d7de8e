#!/usr/bin/python3
"""Writes the malformed inputs tests/t_bad_input.sh feeds to llmc.

Usage:
  make_bad_inputs.py onnx OUT_DIR         the bad ONNX models (one per row of docs/testing.md's Bad input table)
  make_bad_inputs.py offsets MODEL N      N cut points inside MODEL's graph field
  make_bad_inputs.py plans PLAN OUT_DIR   mutations of a compiled plan

Nothing here is committed as a binary: every file is rebuilt from this script.
The models are deliberately invalid, so the onnx checker is never run.
Wire-type errors are raw byte edits of a valid serialization that keep every
enclosing length intact, so only the edited field is wrong.

Plan mutations edit bytes of a real plan in place, found by walking its
FlatBuffer (schemas/plan.fbs; field ids as in runtime/plan_format.h):
  bad_magic        bytes 4..7 "LLMC" -> "XXXX"
  bad_version      Plan.format_version (field 0) -> 99
  other_target     Plan.target (field 1) string bytes -> "generix" (same length, unknown)
  root_out_of_range   the root uoffset (bytes 0..3) -> 0x7fffff00
  segment_past_end    Segment[0].offset -> file size + 64 (still a multiple of 64)
  segments_overlap    Segment[1].offset moved back 64 bytes, into Segment[0]
  hash_mismatch    the last byte of the last segment flipped (FlatBuffer untouched)
  truncated        the first half of the plan
"""
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_onnx_cases import external, float_input, model, save, typed  # noqa: E402

RELU = [helper.make_node("Relu", ["x"], ["y"], name="r")]
X2, Y = [float_input("x", [2])], [float_input("y", None)]


def write(out, name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def relu_with(initializers, out, name):
    save(model(RELU, X2, Y, initializers), out, name)


def tensor_errors(out):
    relu_with([TensorProto(name="short_raw", data_type=TensorProto.FLOAT, dims=[3, 4], raw_data=b"\0" * 40)],
              out, "short_raw.onnx")
    relu_with([typed("few_floats", TensorProto.FLOAT, [5], "float_data", [1.0, 2.0])], out, "short_typed.onnx")
    relu_with([TensorProto(name="half_raw", data_type=TensorProto.FLOAT16, dims=[4, 4], raw_data=b"\0" * 30)],
              out, "short_raw_f16.onnx")
    relu_with([TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[1 << 32, 1 << 32, 16])],
              out, "overflow_shape.onnx")
    relu_with([TensorProto(name="neg", data_type=TensorProto.FLOAT, dims=[4, -3])], out, "negative_dim_init.onnx")
    vi = float_input("x", [1, 1])
    vi.type.tensor_type.shape.dim[1].dim_value = -7
    save(model(RELU, [vi], Y), out, "negative_dim_input.onnx")
    absurd = float_input("x", [1 << 40, 1 << 40])
    save(model(RELU, [absurd], Y), out, "absurd_dim_input.onnx")
    save(model(RELU, [float_input("x", [1 << 62])], Y), out, "absurd_bytes_input.onnx")
    unbound = float_input("x", [1, "mystery"])
    save(model(RELU, [unbound], Y), out, "unbound_dim.onnx")
    relu_with([TensorProto(name="odd_type", data_type=TensorProto.STRING, dims=[1], string_data=[b"hi"])],
              out, "string_initializer.onnx")


def external_errors(out):
    d = os.path.join(out, "ext")
    os.makedirs(d, exist_ok=True)
    write(out, "secret.bin", b"\0" * 64)           # outside the model folder
    write(d, "short.bin", b"\0" * 10)
    link = os.path.join(d, "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(os.path.join(out, "secret.bin")), link)
    four = np.zeros(4, dtype=np.float32)           # needs 16 bytes
    cases = {
        "dotdot": ("../../etc/passwd", None, None),
        "absolute": ("/etc/passwd", None, None),
        "symlink": ("link.bin", None, None),
        "missing": ("nope.bin", None, None),
        "short": ("short.bin", None, None),
        "offset": ("short.bin", 4096, 16),
    }
    for case, (location, offset, length) in cases.items():
        t = external(numpy_helper.from_array(four, "w_" + case), location, offset, length)
        save(model([helper.make_node("Add", ["x", "w_" + case], ["y"], name="add")],
                   [float_input("x", [4])], Y, [t]), d, case + ".onnx")


def graph_errors(out):
    save(model([helper.make_node("Relu", ["x"], ["y"], name="first"),
                helper.make_node("Neg", ["x"], ["y"], name="second")], X2, Y), out, "duplicate_producer.onnx")
    twins = [numpy_helper.from_array(np.full(2, v, np.float32), "w") for v in (1, 2)]
    save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], X2, Y, twins),
         out, "duplicate_initializer.onnx")
    save(model([helper.make_node("Add", ["x", "ghost_value"], ["y"], name="adder")], X2, Y),
         out, "undefined_input.onnx")
    save(model(RELU, X2, [float_input("nowhere", None)]), out, "undefined_output.onnx")
    save(model([helper.make_node("Add", ["x", "b"], ["a"], name="cyc_add"),
                helper.make_node("Relu", ["a"], ["b"], name="cyc_relu"),
                helper.make_node("Neg", ["a"], ["y"], name="after")], X2, Y), out, "cycle.onnx")
    save(model([helper.make_node("Relu", ["y"], ["y"], name="self_loop")], X2, Y), out, "self_loop.onnx")
    save(model(RELU, X2, [float_input("y", [3])]), out, "output_wrong_shape.onnx")
    save(model(RELU, X2, [helper.make_tensor_value_info("y", TensorProto.INT64, [2])]),
         out, "output_wrong_type.onnx")


def unsupported(out):
    nodes = [
        helper.make_node("Mod", ["x", "x"], ["a"], name="modder"),
        helper.make_node("Relu", ["a"], ["b"], name="fine"),
        helper.make_node("NonZero", ["b"], ["c"], name="nz"),
        helper.make_node("FusedMatMul", ["c", "c"], ["y"], name="fused", domain="com.microsoft"),
    ]
    save(model(nodes, X2, Y, extra_opsets=[("com.microsoft", 1)]), out, "unsupported_ops.onnx")
    save(model(RELU, X2, Y, opset=12), out, "opset12.onnx")
    save(model(RELU, X2, Y, opset=22), out, "opset22.onnx")
    nodes = [helper.make_node("Mod", ["x", "x"], ["a"], name="modder"),
             helper.make_node("Frob", ["a"], ["y"], name="frob", domain="x.custom")]
    save(model(nodes, X2, Y, opset=22, extra_opsets=[("x.custom", 3)]), out, "opset_and_ops.onnx")


def subgraphs(out):
    body_if = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "b", [], [float_input("z", [2])])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    save(model([helper.make_node("If", ["cond"], ["y"], name="branchy", then_branch=body_if, else_branch=body_if)],
               X2 + [cond], Y), out, "subgraph_if.onnx")
    it = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    body_loop = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]),
                                   helper.make_node("Relu", ["v"], ["v_out"])], "loop_body",
                                  [it, c, float_input("v", [2])],
                                  [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                                   float_input("v_out", [2])])
    trips = helper.make_tensor_value_info("trips", TensorProto.INT64, [])
    save(model([helper.make_node("Loop", ["trips", "", "x"], ["y"], name="looper", body=body_loop)],
               X2 + [trips], Y), out, "subgraph_loop.onnx")
    body_scan = helper.make_graph([helper.make_node("Add", ["s", "e"], ["s_out"]),
                                   helper.make_node("Identity", ["s_out"], ["o"])], "scan_body",
                                  [float_input("s", [2]), float_input("e", [2])],
                                  [float_input("s_out", [2]), float_input("o", [2])])
    save(model([helper.make_node("Scan", ["x", "seq"], ["y", "ys"], name="scanner", body=body_scan,
                                 num_scan_inputs=1)],
               X2 + [float_input("seq", [3, 2])], Y + [float_input("ys", None)]), out, "subgraph_scan.onnx")


def role_bindings(out):
    """Inputs and outputs the runtime's LLM path cannot use (found by fuzz_compile)."""
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT32, [1, "sequence"])
    save(model([helper.make_node("Cast", ["input_ids"], ["y"], name="c", to=TensorProto.FLOAT)], [ids], Y),
         out, "int32_input_ids.onnx")

    past = lambda name: float_input(name, [1, 1, "past_sequence", 2])  # noqa: E731
    new = float_input("x", [1, 1, 1, 2])

    def present(past_name, out_name, other="x"):
        return helper.make_node("Concat", [past_name, other], [out_name], name="cat_" + out_name, axis=2)

    save(model([present("past_key_values.1.value", "present.1.value")],
               [past("past_key_values.1.value"), new], [float_input("present.1.value", None)]),
         out, "kv_value_without_key.onnx")
    save(model([present("past_key_values.3.key", "present.3.key"),
                present("past_key_values.3.value", "present.3.value")],
               [past("past_key_values.3.key"), past("past_key_values.3.value"), new],
               [float_input("present.3.key", None), float_input("present.3.value", None)]),
         out, "kv_layer_past_count.onnx")
    save(model([helper.make_node("Relu", ["x"], ["present.0.key"], name="r")], [new],
               [float_input("present.0.key", None)]), out, "kv_present_without_past.onnx")
    save(model([present("past_key_values.0.key", "present.0.key", "past.0.key"),
                present("past_key_values.0.value", "present.0.value")],
               [past("past_key_values.0.key"), past("past.0.key"), past("past_key_values.0.value"), new],
               [float_input("present.0.key", None), float_input("present.0.value", None)]),
         out, "kv_two_keys.onnx")
    # logits made by a Softmax over a MatMul: `--logits last` cannot slice before it
    w = numpy_helper.from_array(np.ones((4, 8), np.float32), "w")
    save(model([helper.make_node("MatMul", ["x", "w"], ["z"], name="head"),
                helper.make_node("Softmax", ["z"], ["logits"], name="probs", axis=1)],
               [float_input("x", [1, 3, 4])], [float_input("logits", None)], [w]),
         out, "logits_softmax.onnx")
    # a Tanh after the head passes (it acts on each logit), a Mul by another
    # input's rows before it does not
    save(model([helper.make_node("MatMul", ["x", "w"], ["z"], name="head"),
                helper.make_node("Mul", ["z", "g"], ["zg"], name="gate"),
                helper.make_node("Tanh", ["zg"], ["logits"], name="cap")],
               [float_input("x", [1, 3, 4]), float_input("g", [1, 3, 8])], [float_input("logits", None)], [w]),
         out, "logits_gated.onnx")


def chain(out, n=100000):
    nodes = [helper.make_node("Relu" if i % 2 == 0 else "Neg", ["v%d" % i if i else "x"],
                              ["v%d" % (i + 1) if i + 1 < n else "y"], name="n%d" % i) for i in range(n)]
    save(model(nodes, [float_input("x", [1, 8])], [float_input("y", [1, 8])]), out, "chain_100k.onnx")


def wire_types(out):
    """Valid bytes with one field's wire type changed; every length still holds."""
    data = model(RELU, X2, Y).SerializeToString()
    assert data[0] == 0x08                                   # ModelProto.ir_version, varint
    write(out, "wire_ir_version.onnx", b"\x0d" + data[1:2] + b"\0\0\0" + data[2:])  # as fixed32
    at = data.index(b"\x22\x04Relu")                        # NodeProto.op_type (4), length-delimited
    write(out, "wire_op_type.onnx", data[:at] + b"\x25" + data[at + 1:])  # as fixed32
    at = data.index(b"\x3a")                                 # ModelProto.graph (7), length-delimited
    write(out, "wire_graph.onnx", data[:at] + b"\x3b" + data[at + 1:])  # group start: a deprecated wire type


def bad_files(out):
    write(out, "empty.onnx", b"")
    write(out, "not_protobuf.onnx", b"this is plain text, not a protobuf\n")
    save(onnx.ModelProto(ir_version=8, opset_import=[helper.make_opsetid("", 17)]), out, "no_graph.onnx")


def write_onnx(out):
    os.makedirs(out, exist_ok=True)
    for f in (tensor_errors, external_errors, graph_errors, unsupported, subgraphs, role_bindings, chain, wire_types, bad_files):
        f(out)


def graph_field_offsets(path, n):
    """n cut points strictly inside ModelProto.graph: every cut leaves it short."""
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        tag, pos = varint(data, pos)
        if tag & 7 == 0:
            _, pos = varint(data, pos)
            continue
        assert tag & 7 == 2, "unexpected wire type in a ModelProto"
        length, start = varint(data, pos)
        if tag >> 3 == 7:
            step = max(1, length // n)
            return [start + 1 + i * step for i in range(n) if start + 1 + i * step < start + length]
        pos = start + length
    raise SystemExit("no graph field in " + path)


def varint(data, pos):
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, pos


class FlatBuffer:
    """Just enough of the FlatBuffers wire format to find a field's bytes."""

    def __init__(self, data):
        self.d = data

    def u32(self, at):
        return struct.unpack_from("<I", self.d, at)[0]

    def field(self, table, fid):
        vt = table - struct.unpack_from("<i", self.d, table)[0]
        if 4 + 2 * fid >= struct.unpack_from("<H", self.d, vt)[0]:
            return None
        off = struct.unpack_from("<H", self.d, vt + 4 + 2 * fid)[0]
        return table + off if off else None

    def deref(self, at):
        return at + self.u32(at)

    def root(self):
        return self.u32(0)

    def vector_table(self, table, fid, i):
        vec = self.deref(self.field(table, fid))
        slot = vec + 4 + 4 * i
        return self.deref(slot)


PLAN_FORMAT_VERSION, PLAN_TARGET, PLAN_SEGMENTS = 0, 1, 10
SEGMENT_OFFSET = 0


def write_plans(plan_path, out):
    os.makedirs(out, exist_ok=True)
    base = open(plan_path, "rb").read()
    fb = FlatBuffer(base)
    root = fb.root()

    def mutate(name, edits):
        d = bytearray(base)
        for at, raw in edits:
            d[at:at + len(raw)] = raw
        write(out, name + ".plan", bytes(d))

    mutate("bad_magic", [(4, b"XXXX")])
    mutate("bad_version", [(fb.field(root, PLAN_FORMAT_VERSION), struct.pack("<I", 99))])
    target = fb.deref(fb.field(root, PLAN_TARGET))
    assert base[target + 4:target + 4 + fb.u32(target)] == b"generic"
    mutate("other_target", [(target + 4, b"generix")])
    mutate("root_out_of_range", [(0, struct.pack("<I", 0x7FFFFF00))])
    seg0, seg1 = (fb.vector_table(root, PLAN_SEGMENTS, i) for i in (0, 1))
    past = (len(base) + 127) // 64 * 64
    mutate("segment_past_end", [(fb.field(seg0, SEGMENT_OFFSET), struct.pack("<Q", past))])
    at1 = fb.field(seg1, SEGMENT_OFFSET)
    off1 = struct.unpack_from("<Q", base, at1)[0]
    assert off1 - 64 >= struct.unpack_from("<Q", base, fb.field(seg0, SEGMENT_OFFSET))[0]
    mutate("segments_overlap", [(at1, struct.pack("<Q", off1 - 64))])
    mutate("hash_mismatch", [(len(base) - 1, bytes([base[-1] ^ 0xFF]))])
    write(out, "truncated.plan", base[:len(base) // 2])


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "onnx":
        write_onnx(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "offsets":
        print(" ".join(str(o) for o in graph_field_offsets(sys.argv[2], int(sys.argv[3]))))
    elif len(sys.argv) == 4 and sys.argv[1] == "plans":
        write_plans(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
