#!/usr/bin/python3
"""Write a float32 GGUF file from a LLaMA- or Qwen2-family ONNX export, for
running llama.cpp on the same weights as llmc (scripts/bench_peers.sh).

    onnx_to_gguf.py MODEL.onnx OUT.gguf [--context N]

Reads the exports of scripts/export_llm.py's llama and qwen2 families (both
styles, any size) and transformers-shaped exports like them.  Weights are
found by the ONNX node that reads them, named after transformers' module
tree with or without a leading `/model`:

    /embed_tokens/Gather                    token_embd.weight
    /layers.N/input_layernorm/Mul*          blk.N.attn_norm.weight
    /layers.N/self_attn/q_proj/MatMul, Add  blk.N.attn_q.weight, .bias (k, v alike)
    /layers.N/self_attn/o_proj/MatMul       blk.N.attn_output.weight
    /layers.N/post_attention_layernorm/Mul* blk.N.ffn_norm.weight
    /layers.N/mlp/gate_proj/MatMul          blk.N.ffn_gate.weight (up, down alike)
    /norm/Mul*                              output_norm.weight
    /lm_head/MatMul                         output.weight

The hyperparameters are read off the graph, not given: head size and KV
heads from the `past_key_values.0.key` input [batch, kv_heads, past,
head_dim]; heads from q_proj's width; the RMSNorm epsilon from the scalar
added in layer 0's input norm; the RoPE base from the frequencies the graph
holds (an inv_freq constant [1, d/2, 1], or cos and sin tables [positions,
d] whose row 1 gives them as atan2(sin, cos)), fitted to base^(-2i/d) and
kept to 6 significant digits (the file is refused when they do not follow
that law: llama3 or LongRoPE scaling); the context length from the
tables' rows (else --context).  A model with a weight this mapping does not
place (q/k norms, packed qkv, a tied LM head, ...) is refused, naming it.

Architecture: `qwen2` when q/k/v have biases, else `llama`.  Both
architectures of llama.cpp normalise with RMSNorm, use SwiGLU and GQA;
they differ in RoPE: transformers (and these exports) rotate the two
halves of a head (pairs i, i + d/2), which llama.cpp's `qwen2` does as
well (NEOX order), while its `llama` rotates adjacent pairs (2i, 2i + 1).
For `llama` the rows of q_proj and k_proj are therefore permuted within
each head so that new row 2i + s is old row i + s * d/2 (s = 0, 1): the
same pairs, with the same frequency i, now adjacent; q . k is unchanged
because q and k move alike.  `qwen2` files keep the rows as they are.

GGUF version 3 (little-endian): "GGUF", uint32 version, uint64 tensor and
key/value counts; the key/values (string key, uint32 type, value); per
tensor its name, uint32 dimension count, uint64 dimensions innermost first,
uint32 ggml type (0: F32) and uint64 offset into the data; padding to the
alignment (32); the data, each tensor's offset a multiple of 32.  A MatMul
weight W [in, out] (y = x W) is ggml's matrix of `out` rows of `in`
(W transposed, ne0 = in); the embedding [vocab, hidden] stays as it is.
The vocabulary is `no_vocab` with `{arch}.vocab_size` ids: llama-bench and
scripts/gguf_logits.c feed token ids without a tokenizer.

The file is written beside OUT and renamed into place: nothing is left at
OUT on failure.  Exit codes: 0 ok, 2 usage, 3 unreadable model, 4 a model
this converter does not map.
"""
import argparse
import math
import os
import re
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

GGUF_VERSION = 3
ALIGN = 32
GGML_TYPE_F32 = 0
GGML_FTYPE_ALL_F32 = 0
FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
               onnx.TensorProto.DOUBLE)
# GGUF value types written here: uint32, float32, string.
KV_UINT32, KV_FLOAT32, KV_STRING = 4, 6, 8

# llama.cpp's per-layer tensor name for each transformers projection.
PROJ_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
NORM_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}

# Node name -> role; `(?:/model)?` admits transformers-style exports.  The
# RoPE module's constants are read by rope_frequencies, not copied (role "").
ROLE_PATTERNS = [
    (re.compile(r"(?:/model)?/(?:rope|rotary_emb)/"), lambda m: ""),
    (re.compile(r"(?:/model)?/embed_tokens/Gather$"), lambda m: "token_embd.weight"),
    (re.compile(r"(?:/model)?/norm/Mul(?:_\d+)?$"), lambda m: "output_norm.weight"),
    (re.compile(r"(?:/model)?/lm_head/MatMul$"), lambda m: "output.weight"),
    (re.compile(r"(?:/model)?/layers\.(\d+)/(input_layernorm|post_attention_layernorm)/Mul(?:_\d+)?$"),
     lambda m: f"blk.{m[1]}.{NORM_NAMES[m[2]]}.weight"),
    (re.compile(r"(?:/model)?/layers\.(\d+)/(?:self_attn|mlp)/(\w+_proj)/(MatMul|Add)$"),
     lambda m: (f"blk.{m[1]}.{PROJ_NAMES[m[2]]}." + ("weight" if m[3] == "MatMul" else "bias"))
     if m[2] in PROJ_NAMES else None),
]


class Refused(Exception):
    """The model is not one this converter maps (exit 4)."""


class Graph:
    """The ONNX graph's nodes with its initializers and Constant values."""

    def __init__(self, model):
        self.nodes = list(model.graph.node)
        self.inputs = {i.name: i for i in model.graph.input}
        self.inits = {t.name: t for t in model.graph.initializer}
        self.consts = {}
        for n in self.nodes:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)

    def value(self, name):
        """A constant input's array (initializer or Constant node), else None."""
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        return self.consts.get(name)

    def float_constants(self):
        for name in list(self.inits) + list(self.consts):
            a = self.value(name)
            if a.dtype.kind == "f":
                yield name, a


def weights_by_role(g):
    """{GGUF tensor name: (initializer name, node name)} for every float
    initializer the graph reads; a weight read by a node no pattern places
    is refused."""
    roles = {}
    for n in g.nodes:
        for x in n.input:
            if x not in g.inits or g.inits[x].data_type not in FLOAT_TYPES:
                continue
            role = next((f(m) for p, f in ROLE_PATTERNS if (m := p.match(n.name))), None)
            if role == "":
                continue
            if role is None:
                raise Refused(f"initializer '{x}' read by node '{n.name}' ({n.op_type}) has no place "
                              "in a llama/qwen2 GGUF")
            if role in roles and roles[role][0] != x:
                raise Refused(f"node '{n.name}' gives {role} a second weight '{x}' "
                              f"(first '{roles[role][0]}' at '{roles[role][1]}')")
            roles[role] = (x, n.name)
    return roles


def kv_shape(g):
    """(kv_heads, head_dim) from the first layer's past key input."""
    inp = g.inputs.get("past_key_values.0.key")
    dims = [d.dim_value for d in inp.type.tensor_type.shape.dim] if inp else []
    if len(dims) != 4 or not dims[1] or not dims[3]:
        raise Refused("no input past_key_values.0.key [batch, kv_heads, past, head_dim] with "
                      "static kv_heads and head_dim")
    return dims[1], dims[3]


def rms_eps(g):
    """The scalar that layer 0's input norm adds to the mean square."""
    for n in g.nodes:
        if re.match(r"(?:/model)?/layers\.0/input_layernorm/Add$", n.name):
            for x in n.input:
                a = g.value(x)
                if a is not None and a.size == 1:
                    return float(a.reshape(()))
    raise Refused("no epsilon: no Add of a scalar constant in node '/layers.0/input_layernorm/Add'")


def rope_frequencies(g, head_dim):
    """inv_freq[i], i < head_dim/2: the graph's inv_freq constant, or
    atan2(sin, cos) of row 1 of its cos and sin tables; and the tables'
    rows (0 for inv_freq)."""
    half = head_dim // 2
    cos = sin = None
    for name, a in g.float_constants():
        if a.size == half and a.shape in ((1, half, 1), (half,), (1, half)) and a.flat[0] == 1:
            return a.reshape(half).astype(np.float64), 0
        if a.ndim == 2 and a.shape[1] == head_dim and a.shape[0] > 1:
            if np.all(a[0] == 1):
                cos = a
            elif np.all(a[0] == 0):
                sin = a
    if cos is None or sin is None or cos.shape != sin.shape:
        raise Refused(f"no RoPE frequencies: neither an inv_freq constant [1, {half}, 1] nor cos and sin "
                      f"tables [positions, {head_dim}]")
    return np.arctan2(sin[1, :half].astype(np.float64), cos[1, :half].astype(np.float64)), cos.shape[0]


def rope_base(inv_freq, head_dim):
    """The base b with inv_freq[i] = b^(-2i/d), least squares in the log,
    to 6 significant digits; refused when the frequencies do not follow it."""
    e = 2 * np.arange(len(inv_freq)) / head_dim
    if np.any(inv_freq <= 0):
        raise Refused("RoPE frequencies are not all positive")
    log_base = -np.dot(np.log(inv_freq), e) / np.dot(e, e)
    base = float(f"{math.exp(log_base):.6g}")
    err = np.max(np.abs(base ** -e / inv_freq - 1))
    if err > 1e-4:
        raise Refused(f"RoPE frequencies are not base^(-2i/d) (best base {base:g} misses by {err:.1e}): "
                      "scaled RoPE has no place in a llama/qwen2 GGUF here")
    return base


def scale_factor(g, n):
    """The factor a Mul or Div node applies by a float scalar constant, or None."""
    operands = n.input if n.op_type == "Mul" else n.input[1:] if n.op_type == "Div" else []
    for x in operands:
        a = g.value(x)
        if a is not None and a.size == 1 and a.dtype.kind == "f":
            v = float(a.reshape(()))
            return v if n.op_type == "Mul" else 1 / v
    return None


def check_scales(g, head_dim):
    """llama.cpp's llama and qwen2 scale attention scores by head_dim^-0.5
    and nothing else: refuse multipliers on the embedding, the residuals or
    the logits (nodes outside a module's scope, as Granite has) and any
    other attention scale (the product of layer 0's, so that SDPA's
    d^-0.25 on q and on k counts as one d^-0.5)."""
    attention = 1.0
    for n in g.nodes:
        f = scale_factor(g, n)
        if f is None:
            continue
        if re.fullmatch(r"(?:/model)?(?:/layers\.\d+)?/\w+", n.name):
            raise Refused(f"node '{n.name}' ({n.op_type}) scales by {f:g} outside the norms and attention")
        if re.match(r"(?:/model)?/layers\.0/self_attn/", n.name):
            attention *= f
    if abs(attention * math.sqrt(head_dim) - 1) > 1e-5:
        raise Refused(f"attention scale {attention:g} is not head_dim^-0.5 = {head_dim ** -0.5:g}")


def permute_halves_to_pairs(w, heads):
    """Rows [heads * d, ...] from transformers' halves to llama.cpp's
    adjacent pairs: new row h*d + 2i + s = old row h*d + s*d/2 + i."""
    rows = w.shape[0]
    d = rows // heads
    return w.reshape(heads, 2, d // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def plan_tensors(g, roles):
    """The GGUF's tensors [(name, array)] in a fixed order, the
    architecture and the hyperparameters."""
    kv_heads, head_dim = kv_shape(g)
    layers = 1 + max((int(r.split(".")[1]) for r in roles if r.startswith("blk.")), default=-1)
    need = ["token_embd.weight", "output_norm.weight", "output.weight"]
    need += [f"blk.{i}.{t}.weight" for i in range(layers)
             for t in list(NORM_NAMES.values()) + list(PROJ_NAMES.values())]
    missing = [r for r in need if r not in roles]
    if layers < 1 or missing:
        raise Refused("no weight for " + ", ".join(missing[:4] or ["any layer"]) +
                      (" (a tied LM head is not mapped)" if "output.weight" in missing else ""))
    biases = sorted(r for r in roles if r.endswith(".bias"))
    arch = "qwen2" if biases else "llama"
    if biases and not all(f"blk.{i}.attn_{p}.bias" in roles for i in range(layers) for p in "qkv") or \
            any(not re.search(r"attn_[qkv]\.bias$", b) for b in biases):
        raise Refused(f"biases {', '.join(biases[:4])}: qwen2 GGUFs take q, k and v biases in every layer")

    def weight(role):
        return numpy_helper.to_array(g.inits[roles[role][0]]).astype(np.float32, copy=False)

    hidden = weight("token_embd.weight").shape[1]
    heads = weight("blk.0.attn_q.weight").shape[1] // head_dim
    if heads * head_dim != hidden:
        raise Refused(f"heads x head_dim = {heads} x {head_dim} != hidden {hidden}")
    check_scales(g, head_dim)
    inv_freq, positions = rope_frequencies(g, head_dim)
    hp = dict(vocab=weight("token_embd.weight").shape[0], hidden=hidden, layers=layers, heads=heads,
              kv_heads=kv_heads, head_dim=head_dim, ffn=weight("blk.0.ffn_gate.weight").shape[1],
              rope_base=rope_base(inv_freq, head_dim), eps=rms_eps(g), positions=positions)

    def ggml_matrix(role):
        """ggml's [out rows of in] for a MatMul weight [in, out], RoPE rows
        permuted for `llama`; vectors as they are."""
        a = weight(role)
        a = a.T if a.ndim == 2 and role != "token_embd.weight" else a
        part = re.search(r"attn_([qk])\.", role)
        if arch == "llama" and part:
            a = permute_halves_to_pairs(a, heads if part[1] == "q" else kv_heads)
        return role, a

    order = need[:3] + [r for i in range(layers) for r in need[3:] if r.startswith(f"blk.{i}.")] + biases
    return [ggml_matrix(r) for r in order], arch, hp


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, value):
    if isinstance(value, str):
        return gguf_string(key) + struct.pack("<I", KV_STRING) + gguf_string(value)
    if isinstance(value, float):
        return gguf_string(key) + struct.pack("<If", KV_FLOAT32, value)
    return gguf_string(key) + struct.pack("<II", KV_UINT32, value)


def metadata(arch, hp, context, name):
    return [("general.architecture", arch), ("general.name", name),
            ("general.file_type", GGML_FTYPE_ALL_F32), ("general.alignment", ALIGN),
            (f"{arch}.vocab_size", hp["vocab"]), (f"{arch}.context_length", context),
            (f"{arch}.embedding_length", hp["hidden"]), (f"{arch}.block_count", hp["layers"]),
            (f"{arch}.feed_forward_length", hp["ffn"]), (f"{arch}.attention.head_count", hp["heads"]),
            (f"{arch}.attention.head_count_kv", hp["kv_heads"]),
            (f"{arch}.rope.freq_base", hp["rope_base"]),
            (f"{arch}.attention.layer_norm_rms_epsilon", hp["eps"]),
            ("tokenizer.ggml.model", "no_vocab")]


def padded(n):
    return -(-n // ALIGN) * ALIGN


def write_gguf(f, kvs, tensors):
    head = b"GGUF" + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kvs))
    head += b"".join(gguf_kv(k, v) for k, v in kvs)
    offset = 0
    for name, a in tensors:
        head += gguf_string(name) + struct.pack("<I", a.ndim) + struct.pack(f"<{a.ndim}Q", *a.shape[::-1])
        head += struct.pack("<IQ", GGML_TYPE_F32, offset)
        offset += padded(a.nbytes)
    f.write(head + bytes(padded(len(head)) - len(head)))
    for _, a in tensors:
        f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
        f.write(bytes(padded(a.nbytes) - a.nbytes))


def convert(model_path, out_path, context):
    try:
        model = onnx.load(model_path)
    except Exception as e:  # onnx raises protobuf's and OSError's kinds
        print(f"onnx_to_gguf: {model_path}: cannot read the model: {e}", file=sys.stderr)
        return 3
    try:
        g = Graph(model)
        tensors, arch, hp = plan_tensors(g, weights_by_role(g))
    except Refused as e:
        print(f"onnx_to_gguf: {model_path}: {e}", file=sys.stderr)
        return 4
    context = context or hp["positions"] or 4096
    kvs = metadata(arch, hp, context, os.path.basename(model_path))
    tmp = f"{out_path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            write_gguf(f, kvs, tensors)
        os.replace(tmp, out_path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    print(f"onnx_to_gguf: {out_path}: {arch}, {len(tensors)} float32 tensors, context {context}, "
          + ", ".join(f"{k} {v:g}" for k, v in hp.items() if k != "positions"))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("output")
    ap.add_argument("--context", type=int, default=0,
                    help="context_length (default: the RoPE tables' rows, else 4096)")
    args = ap.parse_args(argv)
    return convert(args.model, args.output, args.context)


if __name__ == "__main__":
    sys.exit(main())
