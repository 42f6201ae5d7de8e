#!/usr/bin/python3
"""Re-read a GGUF written by scripts/onnx_to_gguf.py and check it against
the ONNX file it came from, with a reader of its own (struct, no code of
the converter):

    gguf_check.py MODEL.onnx FILE.gguf --rope-base B --eps E

- header: magic, version 3, counts; every key/value parsed (all GGUF
  value types, arrays too); the data section and every tensor offset a
  multiple of general.alignment; tensors in bounds, not overlapping, the
  file ending with the last one (padded);
- metadata: architecture (qwen2 iff the export has q/k/v biases), sizes
  from the ONNX initializers' shapes, the RoPE base and epsilon given
  (the export's configuration), vocabulary size, no_vocab;
- tensors: exactly llama.cpp's names for the layers found, all F32, and
  each one's bytes equal to its ONNX initializer: MatMul weights [in, out]
  transposed to out rows of in; for `llama` the rows of q and k reordered
  per head so that row 2i + s of a head holds transformers' row
  i + s * head_dim/2.
Prints one line per failed check and exits 1 if any failed.
"""
import argparse
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

# GGUF value type -> struct format (scalars), 8 = string, 9 = array.
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def value(self, t):
        if t in SCALARS:
            return self.take(SCALARS[t])
        if t == 8:
            return self.string()
        if t == 9:
            item, n = self.take("I"), self.take("Q")
            return [self.value(item) for _ in range(n)]
        raise ValueError(f"unknown GGUF value type {t} at byte {self.pos}")


def read_gguf(path):
    """(key/values, {name: (dims innermost first, ggml type, offset)},
    data start, file bytes)."""
    data = open(path, "rb").read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("no GGUF magic")
    r.pos = 4
    version, n_tensors, n_kv = r.take("IQQ")
    if version != 3:
        raise ValueError(f"version {version}")
    kv = {}
    for _ in range(n_kv):
        key = r.string()
        kv[key] = r.value(r.take("I"))
    infos = {}
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("Q") for _ in range(r.take("I"))]
        infos[name] = (dims, r.take("I"), r.take("Q"))
    align = kv.get("general.alignment", 32)
    start = -(-r.pos // align) * align
    return kv, infos, start, data


def onnx_weights(path):
    """{(module path, kind): float32 array} from the nodes reading
    initializers: kind 'w' for MatMul/Gather/Mul inputs, 'b' for Add."""
    m = onnx.load(path)
    inits = {t.name: t for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        for x in n.input:
            if x in inits:
                parts = [p for p in n.name.split("/")[:-1] if p and p != "model"]
                out[("/".join(parts), "b" if n.op_type == "Add" else "w")] = \
                    numpy_helper.to_array(inits[x]).astype(np.float32)
    kv = next(i for i in m.graph.input if i.name == "past_key_values.0.key")
    head_dim = kv.type.tensor_type.shape.dim[3].dim_value
    return out, head_dim


def expected(w, head_dim):
    """{gguf name: array as ggml holds it} and the architecture."""
    arch = "qwen2" if any(k == "b" for _, k in w) else "llama"
    heads = {"q_proj": w[("layers.0/self_attn/q_proj", "w")].shape[1] // head_dim,
             "k_proj": w[("layers.0/self_attn/k_proj", "w")].shape[1] // head_dim}
    names = {"self_attn/q_proj": "attn_q", "self_attn/k_proj": "attn_k", "self_attn/v_proj": "attn_v",
             "self_attn/o_proj": "attn_output", "mlp/gate_proj": "ffn_gate", "mlp/up_proj": "ffn_up",
             "mlp/down_proj": "ffn_down", "input_layernorm": "attn_norm",
             "post_attention_layernorm": "ffn_norm"}
    exp = {"token_embd.weight": w[("embed_tokens", "w")], "output_norm.weight": w[("norm", "w")],
           "output.weight": w[("lm_head", "w")].T}
    for (path, kind), a in w.items():
        if not path.startswith("layers."):
            continue
        layer, module = path.split("/", 1)
        name = f"blk.{layer[len('layers.'):]}.{names[module]}." + ("weight" if kind == "w" else "bias")
        a = a.T if a.ndim == 2 else a
        proj = module.split("/")[-1]
        if arch == "llama" and proj in heads:
            d = head_dim
            rows = [h * d + (i % 2) * (d // 2) + i // 2 for h in range(heads[proj]) for i in range(d)]
            a = a[rows]
        exp[name] = a
    return exp, arch, heads["q_proj"], heads["k_proj"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("gguf")
    ap.add_argument("--rope-base", type=float, required=True)
    ap.add_argument("--eps", type=float, required=True)
    args = ap.parse_args()
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    kv, infos, start, data = read_gguf(args.gguf)
    w, head_dim = onnx_weights(args.model)
    exp, arch, heads, kv_heads = expected(w, head_dim)
    embed = w[("embed_tokens", "w")]
    layers = len({p.split("/")[0] for p, _ in w if p.startswith("layers.")})
    want = {"general.architecture": arch, "tokenizer.ggml.model": "no_vocab",
            f"{arch}.vocab_size": embed.shape[0], f"{arch}.embedding_length": embed.shape[1],
            f"{arch}.block_count": layers, f"{arch}.feed_forward_length": w[("layers.0/mlp/up_proj", "w")].shape[1],
            f"{arch}.attention.head_count": heads, f"{arch}.attention.head_count_kv": kv_heads,
            f"{arch}.rope.freq_base": np.float32(args.rope_base),
            f"{arch}.attention.layer_norm_rms_epsilon": np.float32(args.eps)}
    for k, v in want.items():
        check(kv.get(k) == v, f"{k} = {kv.get(k)!r}, expected {v!r}")
    align = kv.get("general.alignment", 32)
    check(set(infos) == set(exp), f"tensors {sorted(set(infos) ^ set(exp))} differ from the expected set")
    end = 0
    for name, (dims, ggml_type, offset) in sorted(infos.items(), key=lambda t: t[1][2]):
        check(ggml_type == 0, f"{name}: ggml type {ggml_type}, not F32")
        check(offset % align == 0 and (start + offset) % align == 0, f"{name}: offset {offset} not aligned")
        check(offset >= end, f"{name}: overlaps the tensor before it")
        nbytes = 4 * int(np.prod(dims))
        end = offset + nbytes
        a = exp.get(name)
        if a is None or start + end > len(data):
            check(a is not None, f"{name}: not expected")
            check(start + end <= len(data), f"{name}: past the end of the file")
            continue
        check(dims == list(a.shape[::-1]), f"{name}: dims {dims}, expected {list(a.shape[::-1])}")
        got = np.frombuffer(data, "<f4", int(np.prod(dims)), start + offset)
        check(got.tobytes() == np.ascontiguousarray(a, "<f4").tobytes(), f"{name}: bytes differ from the ONNX weight")
    check(len(data) - start - end < align, f"{len(data) - start - end} bytes after the last tensor")
    for f in fails:
        print(f"gguf_check: {args.gguf}: {f}")
    print(f"gguf_check: {args.gguf}: {arch}, {len(infos)} tensors, {len(kv)} keys, data at {start}: "
          + ("ok" if not fails else f"{len(fails)} failed"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
