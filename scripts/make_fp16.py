#!/usr/bin/python3
"""Make 16-bit float variants of an fp32 ONNX export (test inputs for llmc).

    make_fp16.py IN.onnx OUT.onnx --form weights16|compute16|keepio16|weightsbf16|widen32

Written with the onnx package and numpy only (onnxconverter-common is not
available).  Forms:

  weights16    every float32 initializer of rank >= 1 (matrices, and 1-D
               norm weights, biases, RoPE frequency/cos/sin tables too)
               becomes a float16 initializer "<name>.f16" read by a new
               Cast(to=FLOAT) node whose output is "<name>", so the original
               readers see a float32 tensor: the common "fp16 weights"
               export.  Rank-0 float scalars (epsilons, scales, mask values)
               stay float32.  Compute stays float32.
  weightsbf16  the same with bfloat16 ("<name>.bf16"); numpy has no bfloat16,
               so the bits are computed here (round to nearest even from
               float32, NaN kept quiet) and stored as TensorProto.raw_data.
  compute16    every float tensor float16: initializers, Constant node
               values (value, value_float(s)), ConstantOfShape values, graph
               inputs and outputs (past_key_values, present, logits),
               value_info, and Cast(to=FLOAT) becomes Cast(to=FLOAT16).  As
               fp16 exporters do, Softmax, LayerNormalization and ReduceMean
               (RMSNorm's mean of squares) run in float32 between a
               Cast(to=FLOAT) and a Cast(to=FLOAT16).  Float constants are
               clamped to the finite float16 range (+-65504), as an fp16
               export uses finfo(float16).min for its masks where the fp32
               one uses finfo(float32).min.
  keepio16     compute16 with the graph's float inputs and outputs kept
               float32, as transformers.js' fp16 files are (onnxconverter-
               common's keep_io_types): each float input is read through a
               Cast(to=FLOAT16), each float output written by a
               Cast(to=FLOAT) of the float16 value.
  widen32      the reverse, for a float16 graph (compute16, keepio16): every
               float16 tensor, Constant value, Cast target, graph input and
               output and value_info entry made float32, values widened
               exactly.  The result computes in float32 on the float16
               file's own values -- what llmc computes for such a file (it
               widens at import and reads Cast(to=FLOAT16) as to=FLOAT) --
               so ONNX Runtime on it is the reference for llmc's arithmetic,
               apart from ONNX Runtime's float16 arithmetic on the file.

Prints one line: what was converted.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16_MAX = float(np.finfo(np.float16).max)


def bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, round to nearest even."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    rounded[nan] = ((bits[nan] >> 16).astype(np.uint16) | 0x0040)  # quiet, sign kept
    return rounded


def to_bf16_tensor(a, name):
    t = TensorProto(name=name, data_type=TensorProto.BFLOAT16, dims=list(a.shape))
    t.raw_data = bf16_bits(a).astype("<u2").tobytes()
    return t


def to_f16(a, clamp):
    a = np.asarray(a, dtype=np.float32)
    if clamp:
        a = np.where(np.isfinite(a), np.clip(a, -F16_MAX, F16_MAX), a)
    return a.astype(np.float16)


def unique(names, base):
    name, i = base, 1
    while name in names:
        name, i = f"{base}.{i}", i + 1
    names.add(name)
    return name


def all_names(graph):
    names = {t.name for t in graph.initializer}
    names |= {v.name for v in graph.input} | {v.name for v in graph.output}
    for n in graph.node:
        names |= set(n.input) | set(n.output)
    return names


def weights_form(model, bf16):
    g = model.graph
    names = all_names(g)
    input_names = {v.name for v in g.input}
    casts, kept, count, nbytes = [], [], 0, 0
    suffix = ".bf16" if bf16 else ".f16"
    for t in g.initializer:
        if t.data_type != TensorProto.FLOAT or len(t.dims) == 0 or t.name in input_names:
            kept.append(t)
            continue
        a = numpy_helper.to_array(t)
        stored = unique(names, t.name + suffix)
        if bf16:
            kept.append(to_bf16_tensor(a, stored))
        else:
            kept.append(numpy_helper.from_array(to_f16(a, clamp=False), stored))
        casts.append(helper.make_node("Cast", [stored], [t.name], name=unique(names, t.name + ".widen"),
                                      to=TensorProto.FLOAT))
        count += 1
        nbytes += a.size * 2
    del g.initializer[:]
    g.initializer.extend(kept)
    nodes = casts + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    kind = "bfloat16" if bf16 else "float16"
    return f"{count} float32 initializers of rank >= 1 stored as {kind} ({nbytes} bytes), each read through a Cast(to=FLOAT)"


def f16_attr_tensor(t):
    return numpy_helper.from_array(to_f16(numpy_helper.to_array(t), clamp=True), t.name)


def retype(vi, old, new):
    """A value's tensor type old -> new; 1 if it was old."""
    tt = vi.type.tensor_type
    if vi.type.HasField("tensor_type") and tt.elem_type == old:
        tt.elem_type = new
        return 1
    return 0


def set_f16_type(vi):
    return retype(vi, TensorProto.FLOAT, TensorProto.FLOAT16)


FP32_OPS = ("Softmax", "LayerNormalization", "ReduceMean")


def compute_form(model):
    g = model.graph
    names = all_names(g)
    stats = dict(initializers=0, constants=0, casts=0, io=0, value_info=0, fp32_islands=0)
    inits = []
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t = numpy_helper.from_array(to_f16(numpy_helper.to_array(t), clamp=True), t.name)
            stats["initializers"] += 1
        inits.append(t)
    del g.initializer[:]
    g.initializer.extend(inits)
    nodes = []
    for n in g.node:
        for a in n.attribute:
            if n.op_type in ("Constant", "ConstantOfShape") and a.type == onnx.AttributeProto.TENSOR \
                    and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(f16_attr_tensor(a.t))
                stats["constants"] += 1
            elif n.op_type == "Constant" and a.name in ("value_float", "value_floats"):
                vals = [a.f] if a.name == "value_float" else list(a.floats)
                arr = np.array(vals if a.name == "value_floats" else vals[0], dtype=np.float32)
                n.ClearField("attribute")
                n.attribute.extend([helper.make_attribute("value", numpy_helper.from_array(to_f16(arr, True)))])
                stats["constants"] += 1
                break
            elif n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
                stats["casts"] += 1
        if n.op_type not in FP32_OPS:
            nodes.append(n)
            continue
        # float32 island: Cast inputs up, the op, Cast its first output down.
        stats["fp32_islands"] += 1
        ins = list(n.input)
        for k, x in enumerate(ins):
            if x == "" or (n.op_type != "LayerNormalization" and k > 0):
                continue   # ReduceMean's axes (opset 18+) and Softmax have one float input
            up = unique(names, x + ".f32")
            nodes.append(helper.make_node("Cast", [x], [up], name=unique(names, up + ".cast"), to=TensorProto.FLOAT))
            ins[k] = up
        del n.input[:]
        n.input.extend(ins)
        out = n.output[0]
        wide = unique(names, out + ".f32")
        n.output[0] = wide
        nodes.append(n)
        nodes.append(helper.make_node("Cast", [wide], [out], name=unique(names, out + ".cast"), to=TensorProto.FLOAT16))
    del g.node[:]
    g.node.extend(nodes)
    for vi in list(g.input) + list(g.output):
        stats["io"] += set_f16_type(vi)
    # Island outputs keep their names (the down-Cast writes them), so every
    # float value_info entry is float16 now.
    for vi in g.value_info:
        stats["value_info"] += set_f16_type(vi)
    return ("float16 compute: {initializers} initializers, {constants} Constant values, {casts} Casts, "
            "{io} graph inputs/outputs, {value_info} value_info entries made float16; "
            "{fp32_islands} Softmax/LayerNormalization/ReduceMean nodes run in float32 between Casts").format(**stats)


def f32_attr_tensor(t):
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)


def set_f32_type(vi):
    return retype(vi, TensorProto.FLOAT16, TensorProto.FLOAT)


def widen_form(model):
    g = model.graph
    stats = dict(initializers=0, constants=0, casts=0, types=0)
    inits = []
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT16:
            t = f32_attr_tensor(t)
            stats["initializers"] += 1
        inits.append(t)
    del g.initializer[:]
    g.initializer.extend(inits)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT16:
                a.t.CopyFrom(f32_attr_tensor(a.t))
                stats["constants"] += 1
            elif n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.FLOAT
                stats["casts"] += 1
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        stats["types"] += set_f32_type(vi)
    return ("float32 compute on the float16 values: {initializers} initializers, {constants} tensor "
            "attributes, {casts} Casts, {types} inputs/outputs/value_info entries made float32").format(**stats)


def keep_io_types(model):
    """Float32 graph inputs and outputs around a float16 graph, with Casts at the edges."""
    g = model.graph
    names = all_names(g)
    inputs = {vi.name for vi in g.input if vi.type.tensor_type.elem_type == TensorProto.FLOAT16}
    outputs = {vi.name for vi in g.output if vi.type.tensor_type.elem_type == TensorProto.FLOAT16}
    renamed = {x: unique(names, x + ".f16") for x in inputs | outputs}
    for n in g.node:
        n.input[:] = [renamed.get(x, x) if x in inputs else x for x in n.input]
        n.output[:] = [renamed.get(y, y) if y in outputs else y for y in n.output]
        # a graph output another node reads keeps its float16 value under the new name
        n.input[:] = [renamed[x] if x in outputs else x for x in n.input]
    edges = [helper.make_node("Cast", [x], [renamed[x]], name=unique(names, x + ".to_f16"), to=TensorProto.FLOAT16)
             for x in sorted(inputs)]
    tail = [helper.make_node("Cast", [renamed[y]], [y], name=unique(names, y + ".to_f32"), to=TensorProto.FLOAT)
            for y in sorted(outputs)]
    nodes = edges + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
    for vi in list(g.input) + list(g.output):
        if vi.name in renamed:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    return f"; {len(inputs)} float inputs and {len(outputs)} outputs kept float32 behind Casts"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--form", required=True, choices=("weights16", "compute16", "keepio16", "weightsbf16", "widen32"))
    args = ap.parse_args(argv)
    model = onnx.load(args.input)
    if args.form == "widen32":
        what = widen_form(model)
    elif args.form in ("compute16", "keepio16"):
        what = compute_form(model)
        if args.form == "keepio16":
            what += keep_io_types(model)
    else:
        what = weights_form(model, bf16=args.form == "weightsbf16")
    big = model.ByteSize() > 2**31 - 2**20
    onnx.save(model, args.output, save_as_external_data=big, all_tensors_to_one_file=True,
              location=(args.output.rsplit("/", 1)[-1] + ".data") if big else None)
    print(f"make_fp16: {args.output}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
