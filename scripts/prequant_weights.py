#!/usr/bin/python3
"""Compare a plan's weights with the dequantized weights of the pre-quantized
ONNX file it was compiled from.

    prequant_weights.py MODEL.onnx DUMP_DIR LISTING

LISTING is what `llmc inspect PLAN --dump-weights DUMP_DIR` printed (INDEX
NAME ROWS COLS FORMAT per weight).  The file's weights are dequantized as
ONNX Runtime does (MatMulNBits: (q - zero_point) * scale in float32 with the
scale widened from float16 for q4f16; DequantizeLinear of MatMulInteger's
and Gather's weights: (q - zero_point) * scale), transposed to the plan's
[N, K].  Each quantized plan weight [N, K] is matched, rows in order, with
the file weights of the same K (linear fusion stacks q/k/v and gate/up).

A GatherBlockQuantized table is matched like a weight (the plan keeps it
in tiles [V, H]), or, dequantized at compile time, must equal one of the
plan's dense weights.

Prints "matched M of F file weights; max relative error E; of the weight's
max A; bitwise B" where E is max |plan - file| / |file| over the elements
with file != 0, A the largest max |plan - file| / max |file| of a weight
(a NaN in the plan counts as an infinite error), and B counts the weights
whose every value is equal (a zero's sign aside: binary16 coefficients'
scale * q + min gives +0 where a negative scale's (q - zp) * scale gives
-0).  Exits 1 if a file weight is not found in the plan.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def unpack_nibbles(b, k):
    lo, hi = b & 15, b >> 4
    return np.stack([lo, hi], axis=-1).reshape(b.shape[0], -1)[:, :k]


def file_weights(path):
    """{name: W^T [N, K] float32} of the quantized weights of the file."""
    model = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    # dynamic quantization's Gather of an 8-bit table, dequantized after
    gathered = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Gather" and n.input[0] in inits}
    out = {}
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            k, n, block = attrs["K"], attrs["N"], attrs["block_size"]
            blocks = (k + block - 1) // block
            q = unpack_nibbles(inits[node.input[1]].reshape(n, -1), k).astype(np.float32)
            scale = inits[node.input[2]].reshape(n, blocks).astype(np.float32)
            zp = np.full((n, blocks), 8.0, np.float32)
            if len(node.input) > 3 and node.input[3]:
                zp = unpack_nibbles(inits[node.input[3]].reshape(n, -1), blocks).astype(np.float32)
            idx = np.arange(k) // block
            out[node.name] = ((q - zp[:, idx]) * scale[:, idx]).astype(np.float32)
        elif node.op_type == "MatMulInteger" and node.input[1] in inits:
            q = inits[node.input[1]].astype(np.int32)
            zp = inits[node.input[3]].astype(np.int32) if len(node.input) > 3 else 0
            scale = scale_of(model, inits, node)
            out[node.name] = ((q - zp).astype(np.float32) * scale).T.astype(np.float32)
        elif node.op_type == "DequantizeLinear" and node.input[0] in gathered:
            q = inits[gathered[node.input[0]]].astype(np.int32)
            zp = inits[node.input[2]].astype(np.int32) if len(node.input) > 2 else 0
            out["table:" + node.name] = ((q - zp).astype(np.float32) * inits[node.input[1]].astype(np.float32))
        elif node.op_type == "GatherBlockQuantized":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            block = attrs.get("block_size", 128)
            data = inits[node.input[0]]
            v, h = data.shape[0], data.shape[1] * 2
            blocks = (h + block - 1) // block
            q = unpack_nibbles(data, h).astype(np.float32)
            scale = inits[node.input[2]].reshape(v, blocks).astype(np.float32)
            zp = np.full((v, blocks), 8.0, np.float32)
            if len(node.input) > 3 and node.input[3]:
                zp = unpack_nibbles(inits[node.input[3]].reshape(v, -1), blocks).astype(np.float32)
            idx = np.arange(h) // block
            out["table:" + node.name] = ((q - zp[:, idx]) * scale[:, idx]).astype(np.float32)
    return out


def scale_of(model, inits, mmi):
    """w_scale of the Mul(x_scale, w_scale) whose product scales mmi's output
    (quantize_onnx.py names it after the output: Y_output_quantized, Y_scales_mul)."""
    want = mmi.output[0].replace("_output_quantized", "_scales_mul")
    for node in model.graph.node:
        if node.op_type == "Mul" and node.output[0] == want:
            for name in node.input:
                if name in inits:
                    return inits[name].astype(np.float32)
    raise SystemExit("no weight scale found for %s" % mmi.name)


def main():
    path, dump, listing = sys.argv[1:4]
    files = file_weights(path)
    plans, dense = [], []
    for line in open(listing):
        idx, name, rows, cols, fmt = line.split()
        w = np.fromfile("%s/%s.bin" % (dump, idx), "<f4").reshape(int(rows), int(cols))
        (dense if fmt == "dense" else plans).append((name, w))
    unmatched = dict(files)
    worst, worst_abs, bitwise = 0.0, 0.0, 0
    # a quantized embedding table is dequantized at compile time: a dense weight
    for fname in [f for f in unmatched if f.startswith("table:")]:
        f = unmatched[fname]
        for name, w in dense:
            if w.shape == f.shape and np.array_equal(w, f):
                unmatched.pop(fname)
                bitwise += 1
                break
    for name, w in plans:
        row = 0
        while row < w.shape[0]:
            best = None
            for fname, f in unmatched.items():
                if f.shape[1] != w.shape[1] or row + f.shape[0] > w.shape[0]:
                    continue
                d = np.nan_to_num(np.abs(w[row:row + f.shape[0]] - f), nan=np.inf).max()
                if best is None or d < best[0]:
                    best = (d, fname)
            if best is None:
                break
            f = unmatched.pop(best[1])
            part = w[row:row + f.shape[0]]
            diff = np.where(np.isnan(part), np.inf, np.abs(part - f))
            nz = f != 0
            worst = max(worst, float((diff[nz] / np.abs(f[nz])).max()) if nz.any() else 0.0)
            worst_abs = max(worst_abs, float(diff.max() / max(np.abs(f).max(), 1e-30)))
            bitwise += int(np.array_equal(part, f))   # equal values (+0 and -0 alike)
            row += f.shape[0]
    matched = len(files) - len(unmatched)
    print("matched %d of %d file weights; max relative error %.3g; of the weight's max %.3g; bitwise %d"
          % (matched, len(files), worst, worst_abs, bitwise))
    sys.exit(0 if not unmatched else 1)


if __name__ == "__main__":
    main()
