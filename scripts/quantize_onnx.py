#!/usr/bin/python3
"""Write the pre-quantized forms people download, from an fp32 ONNX export.

    quantize_onnx.py IN.onnx OUT.onnx --form q4|q4f16|int8|uint8
                     [--reference REF.onnx] [--block-size 32]

With the onnx package and numpy only, by the algorithms of ONNX Runtime's
quantizers (onnxruntime/python/tools/quantization):

  q4      transformers.js model_q4.onnx: every MatMul by a float32
          initializer [K, N] -> com.microsoft MatMulNBits (bits 4,
          block_size 32, accuracy_level 4, no zero_points: 8), round to
          nearest, symmetric, as MLAS's blockwise quantizer computes it
          (range2scale): per block of K the value of largest magnitude m,
          scale = m / -8 (negative when m > 0), q = clamp(roundf(v *
          (1 / scale) + 8), 0, 15) with roundf rounding half away from
          zero; B uint8 [N, K / 32, 16] low nibble first, scales [N * K / 32]
  q4f16   model_q4f16.onnx: the float16 graph of make_fp16.py's compute16
          form, then the same with float16 scales (scale = float16(m / -8))
  int8    model_int8.onnx: quantize_dynamic(MatMulConstBOnly, per-tensor
          weights, QInt8): x -> DynamicQuantizeLinear; MatMulInteger(xq, Wq,
          xzp, wzp) -> Cast(float) -> Mul by Mul(x_scale, w_scale); weights
          symmetric, scale = max|W| * 2 / 254, zero point 0; the embedding
          Gather reads the 8-bit table and a DequantizeLinear follows it
  uint8   model_uint8.onnx: the same with QUInt8 weights: rmin = min(0,
          min W), rmax = max(0, max W), scale = (rmax - rmin) / 255, zero
          point round(-rmin / scale)
  int4    an onnxruntime-genai int4 folder's model.onnx: MatMulNBits as q4
          but asymmetric (MLAS range2scalezp: min = min(0, block min), max =
          max(0, block max), scale = (max - min) / 15, zero point
          roundf(-min / scale) clamped to 0..15, packed two a byte like B),
          and the token embedding a GatherBlockQuantized (uint8 data [V, H /
          2], the same per-row blocks of 32 along H, zero points packed)

--reference writes the fp32 graph with every quantized weight replaced by
its float32 dequantization (q - zero_point) * scale, ONNX Runtime's own
value of it: the model without the quantized arithmetic.

Prints one line: what was quantized.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fp16  # noqa: E402


def initializers(graph):
    return {t.name: t for t in graph.initializer}


def matmul_weights(graph):
    """(node, W) for each MatMul whose B is a 2-D float initializer."""
    inits = initializers(graph)
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits:
            w = numpy_helper.to_array(inits[node.input[1]])
            if w.ndim == 2 and w.dtype in (np.float32, np.float16):
                yield node, w


def roundf(x):
    """C's roundf: half away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))


def pack_nibbles(q):
    """Pairs along the last axis, low nibble first (an odd count padded)."""
    if q.shape[-1] % 2:
        q = np.concatenate([q, np.zeros(q.shape[:-1] + (1,), q.dtype)], axis=-1)
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def quantize_rows_q4(rows, block, scale_type, symmetric):
    """Blocks of `block` along each row of rows [R, L]: (q [R, blocks,
    block], scale [R, blocks], zero point [R, blocks]) as MLAS computes them."""
    r, length = rows.shape
    blocks = (length + block - 1) // block
    padded = np.zeros((r, blocks * block), np.float32)
    padded[:, :length] = rows.astype(np.float32)
    v = padded.reshape(r, blocks, block)
    lo, hi = v.min(axis=2), v.max(axis=2)
    if symmetric:   # range2scale
        m = np.where(np.abs(hi) > np.abs(lo), hi, lo).astype(np.float32)
        scale = (m / np.float32(-8)).astype(scale_type)
        zp = np.full((r, blocks), 8, np.uint8)
    else:           # range2scalezp
        lo, hi = np.minimum(lo, np.float32(0)), np.maximum(hi, np.float32(0))
        s = ((hi - lo) / np.float32(15)).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            zf = np.where(s != 0, np.float32(0) - lo / s, lo).astype(np.float32)
        zp = np.where(zf < 0, 0, np.where(zf > 15, 15, roundf(zf))).astype(np.uint8)
        scale = s.astype(scale_type)
    s32 = scale.astype(np.float32)
    with np.errstate(divide="ignore"):
        recip = np.where(s32 != 0, np.float32(1) / s32, np.float32(0)).astype(np.float32)
    x = (v * recip[:, :, None]).astype(np.float32) + zp[:, :, None].astype(np.float32)
    q = np.clip(roundf(x), 0, 15).astype(np.uint8)
    return q, scale, zp


def dequantize_rows(q, scale, zp, length):
    """(q - zp) * scale in float32, as ONNX Runtime computes it: [R, length]."""
    d = (q.astype(np.float32) - zp[:, :, None].astype(np.float32)) * scale.astype(np.float32)[:, :, None]
    return np.ascontiguousarray(d.reshape(q.shape[0], -1)[:, :length], np.float32)


def quantize_blocks_q4(w, block, scale_type, symmetric=True):
    """MatMulNBits' (B, scales, zero points or None) and the dequantized W
    of w [K, N]: column n's blocks along K."""
    k, n = w.shape
    q, scale, zp = quantize_rows_q4(w.T, block, scale_type, symmetric)
    deq = dequantize_rows(q, scale, zp, k).T
    return pack_nibbles(q), scale.reshape(-1), None if symmetric else pack_nibbles(zp).reshape(-1), \
        np.ascontiguousarray(deq)


def to_q4(model, block, scale_type, symmetric=True):
    graph = model.graph
    inits = initializers(graph)
    deq, count = {}, 0
    for node, w in list(matmul_weights(graph)):
        k, n = w.shape
        packed, scales, zps, deq[node.input[1]] = quantize_blocks_q4(w, block, scale_type, symmetric)
        b_name, s_name = node.input[1] + "_Q4", node.input[1] + "_scales"
        graph.initializer.extend([numpy_helper.from_array(packed, b_name), numpy_helper.from_array(scales, s_name)])
        inputs = [node.input[0], b_name, s_name]
        if zps is not None:
            graph.initializer.append(numpy_helper.from_array(zps, node.input[1] + "_zp"))
            inputs.append(node.input[1] + "_zp")
        new = helper.make_node("MatMulNBits", inputs, list(node.output),
                               name=(node.name or node.output[0]) + "_Q4", domain="com.microsoft",
                               K=k, N=n, bits=4, block_size=block, accuracy_level=4)
        graph.node.insert(list(graph.node).index(node), new)
        graph.node.remove(node)
        count += 1
    drop_unused(graph, inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return count, deq


def to_gather_block_quantized(model, block):
    """The embedding Gather of a float table [V, H] -> GatherBlockQuantized
    with the table's rows in asymmetric 4-bit blocks along H."""
    graph = model.graph
    inits = initializers(graph)
    deq = {}
    for i, node in enumerate(graph.node):
        if node.op_type != "Gather" or node.input[0] not in inits:
            continue
        table = numpy_helper.to_array(inits[node.input[0]])
        q, scale, zp = quantize_rows_q4(table, block, np.float32, False)
        deq[node.input[0]] = dequantize_rows(q, scale, zp, table.shape[1])
        name = node.input[0]
        graph.initializer.extend([
            numpy_helper.from_array(pack_nibbles(q.reshape(table.shape[0], -1)[:, :table.shape[1]]), name + "_Q4"),
            numpy_helper.from_array(scale, name + "_scales"),
            numpy_helper.from_array(pack_nibbles(zp), name + "_zp")])
        new = helper.make_node("GatherBlockQuantized", [name + "_Q4", node.input[1], name + "_scales", name + "_zp"],
                               list(node.output), name=node.name + "_Q4", domain="com.microsoft",
                               bits=4, block_size=block, gather_axis=0, quantize_axis=1)
        graph.node.insert(i, new)
        graph.node.remove(node)
    drop_unused(graph, inits)
    return len(deq), deq


def weight_params(w, signed):
    """quantize_dynamic's per-tensor weight quantization: (q, scale, zp)."""
    rmin, rmax = min(np.float32(0), w.min()), max(np.float32(0), w.max())
    if signed:
        qmin, qmax = -127, 127
        absmax = max(abs(rmin), abs(rmax))
        rmin, rmax = -absmax, absmax
    else:
        qmin, qmax = 0, 255
    scale = np.float32((rmax - rmin) / np.float32(qmax - qmin))
    if scale == 0:
        scale = np.float32(1)
    zp = int(np.round(qmin - rmin / scale))
    q = np.clip(np.round(w.astype(np.float32) / scale) + zp, qmin, qmax).astype(np.int8 if signed else np.uint8)
    return q, scale, np.array(zp, np.int8 if signed else np.uint8)


def add_weight(graph, name, q, scale, zp):
    graph.initializer.extend([numpy_helper.from_array(q, name + "_quantized"),
                              numpy_helper.from_array(np.array(scale, np.float32), name + "_scale"),
                              numpy_helper.from_array(zp, name + "_zero_point")])
    return name + "_quantized", name + "_scale", name + "_zero_point"


def dequantized(q, scale, zp):
    return ((q.astype(np.int32) - int(zp)).astype(np.float32) * np.float32(scale)).astype(np.float32)


def unique_names(graph):
    """A function giving each name unused in graph, or name_1, name_2, ...
    if it is taken (every name it returns is taken from then on)."""
    taken = {t.name for t in graph.initializer} | {v.name for v in graph.input} | \
        {o for n in graph.node for o in n.output}

    def fresh(name):
        candidate, i = name, 0
        while candidate in taken:
            i += 1
            candidate = "%s_%d" % (name, i)
        taken.add(candidate)
        return candidate
    return fresh


def to_dynamic(model, signed):
    graph = model.graph
    inits = initializers(graph)
    deq, dql, nodes, count = {}, {}, [], 0
    # An activation's DynamicQuantizeLinear writes x_quantized, and a
    # quantized Gather writing x writes x_quantized too: a post-norm layer
    # (OLMo2) projects the embedding's output itself, so names are unique'd.
    fresh = unique_names(graph)
    weights = {node.output[0]: w for node, w in matmul_weights(graph)}
    for node in graph.node:
        if node.op_type == "MatMul" and node.output[0] in weights:
            w = weights[node.output[0]]
            q, scale, zp = weight_params(w, signed)
            deq[node.input[1]] = dequantized(q, scale, zp)
            wq, ws, wzp = add_weight(graph, node.input[1], q, scale, zp)
            x = node.input[0]
            if x not in dql:   # one DynamicQuantizeLinear per activation, as ORT shares it
                dql[x] = tuple(fresh(x + suffix) for suffix in ("_quantized", "_scale", "_zero_point"))
                nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(dql[x]), name=x + "_QuantizeLinear"))
            xq, xs, xzp = dql[x]
            y, base = node.output[0], node.name or node.output[0]
            nodes += [helper.make_node("MatMulInteger", [xq, wq, xzp, wzp], [y + "_output_quantized"],
                                       name=base + "_quant"),
                      helper.make_node("Cast", [y + "_output_quantized"], [y + "_cast_output"], to=TensorProto.FLOAT,
                                       name=base + "_quant_output_scale_mul_cast"),
                      helper.make_node("Mul", [xs, ws], [y + "_scales_mul"], name=base + "_quant_scales_mul"),
                      helper.make_node("Mul", [y + "_cast_output", y + "_scales_mul"], [y],
                                       name=base + "_quant_output_scale_mul")]
            count += 1
        elif node.op_type == "Gather" and node.input[0] in inits:
            w = numpy_helper.to_array(inits[node.input[0]])
            q, scale, zp = weight_params(w, signed)
            deq[node.input[0]] = dequantized(q, scale, zp)
            wq, ws, wzp = add_weight(graph, node.input[0], q, scale, zp)
            y = node.output[0]
            yq = fresh(y + "_quantized")
            nodes += [helper.make_node("Gather", [wq, node.input[1]], [yq], name=node.name, axis=0),
                      helper.make_node("DequantizeLinear", [yq, ws, wzp], [y],
                                       name=y + "_DequantizeLinear")]
            count += 1
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    drop_unused(graph, inits)
    return count, deq


def drop_unused(graph, before):
    read = {i for n in graph.node for i in n.input}
    for name, t in before.items():
        if name not in read:
            graph.initializer.remove(t)


def reference(model, deq):
    """The fp32 model with each quantized weight's dequantized values."""
    for t in model.graph.initializer:
        if t.name in deq:
            t.CopyFrom(numpy_helper.from_array(deq[t.name].astype(np.float32), t.name))
    return model


def standard_onnx(model):
    """Can Debian's onnx checker read the input?  It knows neither ONNX
    Runtime's contrib ops nor IR versions past its own, both of which
    onnxruntime-genai's builder files have; ONNX Runtime loading the output
    is their check."""
    return model.ir_version <= onnx.IR_VERSION and all(
        onnx.defs.has(n.op_type, n.domain) for n in model.graph.node)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--form", required=True, choices=("q4", "q4f16", "int4", "int8", "uint8"))
    ap.add_argument("--reference")
    ap.add_argument("--block-size", type=int, default=32)
    args = ap.parse_args(argv)
    model = onnx.load(args.input)
    checkable = standard_onnx(model)
    if args.form == "q4f16":
        make_fp16.compute_form(model)
        count, deq = to_q4(model, args.block_size, np.float16)
    elif args.form == "q4":
        count, deq = to_q4(model, args.block_size, np.float32)
    elif args.form == "int4":
        count, deq = to_q4(model, args.block_size, np.float32, symmetric=False)
        tables, table_deq = to_gather_block_quantized(model, args.block_size)
        count += tables
        deq.update(table_deq)
    else:
        count, deq = to_dynamic(model, args.form == "int8")
    if checkable:
        onnx.checker.check_model(model)
    onnx.save(model, args.output)
    if args.reference:
        onnx.save(reference(onnx.load(args.input), deq), args.reference)
    print("%s: %d weights quantized (%s)" % (args.output, count, args.form))


if __name__ == "__main__":
    main()
