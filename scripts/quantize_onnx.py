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


def quantize_blocks_q4(w, block, scale_type):
    """MatMulNBits' (B, scales) and the dequantized W of w [K, N]."""
    k, n = w.shape
    blocks = (k + block - 1) // block
    padded = np.zeros((blocks * block, n), np.float32)
    padded[:k] = w.astype(np.float32)
    v = padded.T.reshape(n, blocks, block)                      # column n's blocks
    lo, hi = v.min(axis=2), v.max(axis=2)
    m = np.where(np.abs(hi) > np.abs(lo), hi, lo).astype(np.float32)
    scale = (m / np.float32(-8)).astype(scale_type)
    s32 = scale.astype(np.float32)
    with np.errstate(divide="ignore"):
        recip = np.where(s32 != 0, np.float32(1) / s32, np.float32(0)).astype(np.float32)
    x = (v * recip[:, :, None]).astype(np.float32) + np.float32(8)
    q = np.clip(np.sign(x) * np.floor(np.abs(x) + np.float32(0.5)), 0, 15).astype(np.uint8)  # roundf
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    deq = ((q.astype(np.float32) - np.float32(8)) * s32[:, :, None]).reshape(n, -1)[:, :k].T
    return packed, scale.reshape(-1), np.ascontiguousarray(deq, np.float32)


def to_q4(model, block, scale_type):
    graph = model.graph
    inits = initializers(graph)
    deq, count = {}, 0
    for node, w in list(matmul_weights(graph)):
        k, n = w.shape
        packed, scales, deq[node.input[1]] = quantize_blocks_q4(w, block, scale_type)
        b_name, s_name = node.input[1] + "_Q4", node.input[1] + "_scales"
        graph.initializer.extend([numpy_helper.from_array(packed, b_name), numpy_helper.from_array(scales, s_name)])
        new = helper.make_node("MatMulNBits", [node.input[0], b_name, s_name], list(node.output),
                               name=(node.name or node.output[0]) + "_Q4", domain="com.microsoft",
                               K=k, N=n, bits=4, block_size=block, accuracy_level=4)
        graph.node.insert(list(graph.node).index(node), new)
        graph.node.remove(node)
        count += 1
    drop_unused(graph, inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return count, deq


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


def to_dynamic(model, signed):
    graph = model.graph
    inits = initializers(graph)
    deq, dql, nodes, count = {}, {}, [], 0
    weights = {node.output[0]: w for node, w in matmul_weights(graph)}
    for node in graph.node:
        if node.op_type == "MatMul" and node.output[0] in weights:
            w = weights[node.output[0]]
            q, scale, zp = weight_params(w, signed)
            deq[node.input[1]] = dequantized(q, scale, zp)
            wq, ws, wzp = add_weight(graph, node.input[1], q, scale, zp)
            x = node.input[0]
            if x not in dql:   # one DynamicQuantizeLinear per activation, as ORT shares it
                dql[x] = (x + "_quantized", x + "_scale", x + "_zero_point")
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
            nodes += [helper.make_node("Gather", [wq, node.input[1]], [y + "_quantized"], name=node.name,
                                       axis=0),
                      helper.make_node("DequantizeLinear", [y + "_quantized", ws, wzp], [y],
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--form", required=True, choices=("q4", "q4f16", "int8", "uint8"))
    ap.add_argument("--reference")
    ap.add_argument("--block-size", type=int, default=32)
    args = ap.parse_args(argv)
    model = onnx.load(args.input)
    if args.form == "q4f16":
        make_fp16.compute_form(model)
        count, deq = to_q4(model, args.block_size, np.float16)
    elif args.form == "q4":
        count, deq = to_q4(model, args.block_size, np.float32)
    else:
        count, deq = to_dynamic(model, args.form == "int8")
    onnx.checker.check_model(model)
    onnx.save(model, args.output)
    if args.reference:
        onnx.save(reference(onnx.load(args.input), deq), args.reference)
    print("%s: %d weights quantized (%s)" % (args.output, count, args.form))


if __name__ == "__main__":
    main()
