#!/usr/bin/python3
"""Export tiny random-weight LLMs in the graph form of onnxruntime-genai's model builder.

Run with Debian's python (/usr/bin/python3: python3-torch, python3-onnx).

The builder (onnxruntime-genai, src/python/py/models/builder.py and
builders/base.py) writes its `cpu-fp32` and `cpu-int4-rtn-block-32-acc-level-4`
models with opset 21 and ONNX Runtime's contrib ops (com.microsoft).  This
script writes the same graph, node by node, from the weights of the tiny
Hugging Face-shaped models of scripts/hf_models.py (same state dict names,
seeded as scripts/export_llm.py seeds them), without the builder itself:

  attention_mask -> ReduceSum(axis 1) - 1 -> Cast int32       seqlens_k
                 -> Shape -> Gather(1) -> Cast int32          total_sequence_length
  input_ids -> Gather(model.embed_tokens.weight)
  per layer:
    SimplifiedLayerNormalization (layer 0) or SkipSimplifiedLayerNormalization
        (residual sum = output 3, chained into the next norm)
    qkv_proj MatMul (q, k, v packed into one weight) [+ packed bias Add]
    GroupQueryAttention(qkv, -, -, past_key, past_value, seqlens_k,
        total_sequence_length, cos_cache, sin_cache){do_rotary=1}
    o_proj MatMul
    SkipSimplifiedLayerNormalization
    gate/up MatMuls, Sigmoid, Mul (SiLU), Mul, down MatMul
  final SkipSimplifiedLayerNormalization (output 0 only), lm_head MatMul -> logits

Graph interface (the builder's names):
  inputs : input_ids [batch_size, sequence_length] i64,
           attention_mask [batch_size, total_sequence_length] i64,
           past_key_values.{i}.key/.value [batch_size, kv_heads, past_sequence_length, kv_cache_dim] f32
  outputs: logits [batch_size, sequence_length, vocab] f32,
           present.{i}.key/.value [batch_size, kv_heads, total_sequence_length, kv_cache_dim] f32
(kv_cache_dim: the head size of a float cache; the builder leaves it
symbolic so one export serves compressed caches too)
No position_ids: GroupQueryAttention rotates q and k itself (with --rotary
separate, RotaryEmbedding nodes do, reading position_ids [batch_size,
sequence_length] i64).

--opset 17 writes the same nodes under opset 17 (ReduceSum takes its axes as
an input from opset 13, and no other op used here changed meaning up to 21).

Weights are float32 MatMul initializers (the builder's cpu-fp32 form).
Every projection goes through Builder.matmul, the one place the int4 form
(MatMulNBits with block-32 weights) replaces the MatMul.

Families: llama and qwen2 (q/k/v biases: one packed Add), and phi, Phi-2
shaped, which the builder (builders/phi.py PhiModel) writes with layer norms
and one residual Add per layer for the parallel attention and MLP:
  LayerNormalization (layer 0) or SkipLayerNormalization (com.microsoft,
      with bias; output 3 chained as above)
  packed qkv MatMul + Add, GroupQueryAttention rotating the first
      rotary_dim = head_size * partial_rotary_factor dims (caches of
      rotary_dim/2 columns), dense MatMul + Add
  fc1 MatMul + Add, Gelu(approximate="tanh") (opset 20 on; below it the
      builder's earlier com.microsoft FastGelu), fc2 MatMul + Add
  residual_add: Add(attention, MLP), the next norm's skip input
  final SkipLayerNormalization, lm_head MatMul + Add(bias) -> logits
and phi3 (Phi-3-mini without rope scaling), which the builder writes as
Mistral, i.e. Llama (builders/phi.py Phi3MiniModel): it unpacks qkv_proj
into q/k/v and gate_up_proj into gate/up, so the graph is llama's.
mistral (builders/mistral.py) is llama with local_window_size = the config's
sliding_window on every GroupQueryAttention (ONNX Runtime 1.30's CPU kernel
then keeps the sliding_window newest keys, as transformers does).  --softcap C sets GroupQueryAttention's
softcap attribute (Gemma 2's score cap) on any family.
gemma2 and gemma3 (builders/gemma.py): the block after genai_config.
"""
import argparse
import json
import math
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

import export_llm
import hf_models

FAMILIES = ("llama", "qwen2", "phi", "phi3", "mistral")
# Newer families: the block after build() (SMALL_FAMILIES: export_llm.FamilyOptions)
FAMILIES += ("qwen3", "llama32", "smollm2", "smollm3", "granite")
# Gemma 2 and 3: the block after genai_config (gemma_layers)
FAMILIES += ("gemma2", "gemma3")
CONST = "/model/constants"


class Builder:
    """Accumulates nodes, initializers and value_info as the builder's make_* do."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.nodes, self.inits, self.infos = [], [], []
        self.names = set()

    def hidden(self, last):
        return ["batch_size", "sequence_length", last]

    def value(self, name, dtype, shape):
        self.infos.append(helper.make_tensor_value_info(name, dtype, shape))

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=array.dtype), name))

    def const(self, dtype, value):
        """/model/constants/INT64/[1]: a Constant node, made once."""
        name = f"{CONST}/{dtype}/{value}"
        if name not in self.names:
            self.names.add(name)
            elem = TensorProto.INT64 if dtype == "INT64" else TensorProto.FLOAT
            dims = [len(value)] if isinstance(value, list) else []
            vals = value if isinstance(value, list) else [value]
            tensor = helper.make_tensor(name, elem, dims, vals)
            self.nodes.append(helper.make_node("Constant", [], [name], name=name.replace("constants", "constant_nodes"),
                                               value=tensor))
        return name

    def node(self, op, inputs, outputs, name, domain="", **attrs):
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain or None, **attrs))
        return outputs[0]

    def matmul(self, weight, name, x, out=None):
        """MatMul(x, W^T) with W [out, in] as the builder stores it (weight.T)."""
        wname = name[1:].replace("/", ".") + ".weight"
        self.init(wname, weight.T.numpy().astype(np.float32))
        out = out or f"{name}/output_0"
        self.node("MatMul", [x, wname], [out], name)
        self.value(out, TensorProto.FLOAT, self.hidden(weight.shape[0]))
        return out

    def add_bias(self, bias, name, x):
        bname = name[1:].replace("/", ".") + ".bias"
        self.init(bname, bias.numpy().astype(np.float32))
        out = self.node("Add", [x, bname], [f"{name}/output_0"], name)
        self.value(out, TensorProto.FLOAT, self.hidden(bias.shape[0]))
        return out


def attention_mask_reformat(b):
    base = "/model/attn_mask_reformat/attn_mask_subgraph"
    one_v, one = b.const("INT64", [1]), b.const("INT64", 1)
    rs = b.node("ReduceSum", ["attention_mask", one_v], [f"{base}/ReduceSum/output_0"], f"{base}/ReduceSum",
                keepdims=0)
    sub = b.node("Sub", [rs, one_v], [f"{base}/Sub/output_0"], f"{base}/Sub")
    seqlens = b.node("Cast", [sub], [f"{base}/Sub/Cast/output_0"], f"{base}/Sub/Cast", to=TensorProto.INT32)
    shape = b.node("Shape", ["attention_mask"], [f"{base}/Shape/output_0"], f"{base}/Shape")
    gather = b.node("Gather", [shape, one], [f"{base}/Gather/output_0"], f"{base}/Gather", axis=0)
    total = b.node("Cast", [gather], [f"{base}/Gather/Cast/output_0"], f"{base}/Gather/Cast", to=TensorProto.INT32)
    b.value(seqlens, TensorProto.INT32, ["batch_size"])
    b.value(total, TensorProto.INT32, [])
    return seqlens, total


class Norms:
    """The builder's chain of norms: SimplifiedLayerNormalization first, then
    SkipSimplifiedLayerNormalization whose output 3 (the residual sum) is the
    next norm's root input; the final norm writes output 0 only.  With a bias
    (simple=False: Phi) LayerNormalization and SkipLayerNormalization."""

    def __init__(self, b, eps, root):
        self.b, self.eps = b, eps
        self.root = self.skip = root
        self.first = True

    def __call__(self, layer, location, weight, last=False, bias=None):
        b = self.b
        wname = f"model.layers.{layer}.{location}_layernorm.weight"
        b.init(wname, weight.numpy().astype(np.float32))
        params = [wname]
        if bias is not None:
            b.init(wname[:-len("weight")] + "bias", bias.numpy().astype(np.float32))
            params.append(wname[:-len("weight")] + "bias")
        simple = "" if bias is not None else "Simplified"
        base = f"/model/layers.{layer}/{location}_layernorm"
        out0, out3 = f"{base}/output_0", f"{base}/output_3"
        if self.first:
            b.node(f"{simple}LayerNormalization", [self.root, *params], [out0], f"{base}/LayerNorm",
                   epsilon=self.eps, axis=-1, stash_type=1)
            self.first = False
        else:
            outputs = [out0] if last else [out0, "", "", out3]
            b.node(f"Skip{simple}LayerNormalization", [self.root, self.skip, *params], outputs,
                   f"{base}/SkipLayerNorm", domain="com.microsoft", epsilon=self.eps)
            if not last:
                b.value(out3, TensorProto.FLOAT, b.hidden(b.cfg.hidden))
                self.root = out3
        b.value(out0, TensorProto.FLOAT, b.hidden(b.cfg.hidden))
        return out0


def rotary_dim(cfg, family):
    """Dims each head rotates: Phi's and Phi-3's partial_rotary_factor of them, else all."""
    return int(cfg.head_dim * cfg.rotary_fraction) if family in ("phi", "phi3") else cfg.head_dim


def unpack_phi3(cfg, sd):
    """Llama's weight names from Phi-3's packed ones, as the builder's
    make_attention / make_mlp unpack qkv_proj and gate_up_proj."""
    d = cfg.head_dim
    for i in range(cfg.layers):
        p = f"model.layers.{i}"
        qkv = sd.pop(f"{p}.self_attn.qkv_proj.weight").split([cfg.heads * d, cfg.kv_heads * d, cfg.kv_heads * d])
        for name, w in zip("qkv", qkv):
            sd[f"{p}.self_attn.{name}_proj.weight"] = w
        sd[f"{p}.mlp.gate_proj.weight"], sd[f"{p}.mlp.up_proj.weight"] = sd.pop(f"{p}.mlp.gate_up_proj.weight").chunk(2)


def rotary_caches(b, rot, theta=None, names=("cos_cache", "sin_cache")):
    """cos_cache / sin_cache [max_position, rot/2] (the builder's caches from
    scratch, halved; partial rotary keeps the first rot/2 columns) at base
    theta (default: the config's rope_theta)."""
    cfg = b.cfg
    theta = theta or cfg.rope_theta
    inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.int64).float() / rot))
    if cfg.opts is not None and cfg.opts.rope_scaling:   # Llama 3's rescale_inv_freq
        inv_freq = hf_models.llama3_inv_freq(inv_freq, *cfg.opts.rope_scaling)
    freqs = torch.outer(torch.arange(cfg.max_pos, dtype=torch.int64).type_as(inv_freq), inv_freq)
    b.init(names[0], freqs.cos().numpy().astype(np.float32))
    b.init(names[1], freqs.sin().numpy().astype(np.float32))
    return names


def packed_qkv(b, sd, i, x):
    """One MatMul (and bias Add) for q, k and v: GroupQueryAttention splits it."""
    p = f"model.layers.{i}.self_attn"
    w = torch.cat([sd[f"{p}.{k}_proj.weight"] for k in "qkv"], dim=0)
    qkv = b.matmul(w, f"/model/layers.{i}/attn/qkv_proj/MatMul", x)
    if f"{p}.q_proj.bias" in sd:
        bias = torch.cat([sd[f"{p}.{k}_proj.bias"] for k in "qkv"], dim=0)
        qkv = b.add_bias(bias, f"/model/layers.{i}/attn/qkv_proj/Add", qkv)
    return [qkv, "", ""]


def rotated_qkv(b, sd, i, x, caches, rot):
    """q, k, v MatMuls [+ Adds], q and k through RotaryEmbedding nodes (the
    builder's form where the attention op does not rotate)."""
    cfg, p, paths = b.cfg, f"model.layers.{i}.self_attn", []
    for k in "qkv":
        path = b.matmul(sd[f"{p}.{k}_proj.weight"], f"/model/layers.{i}/attn/{k}_proj/MatMul", x)
        if f"{p}.{k}_proj.bias" in sd:
            path = b.add_bias(sd[f"{p}.{k}_proj.bias"], f"/model/layers.{i}/attn/{k}_proj/Add", path)
        if k != "v":
            name = f"/model/layers.{i}/attn/{k}_rotary/RotaryEmbedding"
            heads = cfg.heads if k == "q" else cfg.kv_heads
            partial = rot != cfg.head_dim   # the builder states heads and dims only then
            path = b.node("RotaryEmbedding", [path, "position_ids", *caches], [f"{name}/output_0"], name,
                          domain="com.microsoft", interleaved=0, num_heads=heads if partial else 0,
                          rotary_embedding_dim=rot if partial else 0)
            b.value(path, TensorProto.FLOAT, b.hidden((cfg.heads if k == "q" else cfg.kv_heads) * cfg.head_dim))
        paths.append(path)
    return paths


def attention(b, sd, i, x, mask_info, caches, rotary, rot):
    cfg = b.cfg
    in_attention = rotary == "attention"
    qkv = packed_qkv(b, sd, i, x) if in_attention else rotated_qkv(b, sd, i, x, caches, rot)
    if f"model.layers.{i}.self_attn.q_norm.weight" in sd:   # normed before the rotation
        qkv = head_norms(b, sd, i, qkv[0])
    if in_attention and not uses_rope(cfg, i):   # NoPE layer: no rotation, no caches
        in_attention, caches = False, ("", "")
    name = f"/model/layers.{i}/attn/GroupQueryAttention"
    seqlens, total = mask_info
    inputs = [*qkv, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens, total,
              *(caches if in_attention else ("", "")), "", "", ""]
    out = b.node("GroupQueryAttention", inputs, [f"{name}/output_0", f"present.{i}.key", f"present.{i}.value"], name,
                 domain="com.microsoft", num_heads=cfg.heads, kv_num_heads=cfg.kv_heads,
                 scale=attention_scale(cfg), local_window_size=local_window(b, i),
                 softcap=b.softcap,
                 do_rotary=int(in_attention), rotary_interleaved=0)
    b.value(out, TensorProto.FLOAT, b.hidden(cfg.heads * cfg.head_dim))
    p = f"model.layers.{i}.self_attn"
    if f"{p}.dense.weight" in sd:   # Phi: dense with a bias
        out = b.matmul(sd[f"{p}.dense.weight"], f"/model/layers.{i}/attn/o_proj/MatMul", out)
        return b.add_bias(sd[f"{p}.dense.bias"], f"/model/layers.{i}/attn/o_proj/Add", out)
    return b.matmul(sd[f"{p}.o_proj.weight"], f"/model/layers.{i}/attn/o_proj/MatMul", out)


def silu(b, base, gate):
    """The builder's make_activation_with_mul: Sigmoid, then Mul by the gate."""
    sig = b.node("Sigmoid", [gate], [f"{base}/act_fn/Sigmoid/output_0"], f"{base}/act_fn/Sigmoid")
    act = b.node("Mul", [gate, sig], [f"{base}/act_fn/Mul/output_0"], f"{base}/act_fn/Mul")
    b.value(sig, TensorProto.FLOAT, b.hidden(b.cfg.intermediate))
    return act


def mlp(b, sd, i, x, act_fn=silu):
    cfg, p, base = b.cfg, f"model.layers.{i}.mlp", f"/model/layers.{i}/mlp"
    gate = b.matmul(sd[f"{p}.gate_proj.weight"], f"{base}/gate_proj/MatMul", x)
    up = b.matmul(sd[f"{p}.up_proj.weight"], f"{base}/up_proj/MatMul", x)
    act = act_fn(b, base, gate)
    prod = b.node("Mul", [act, up], [f"{base}/Mul/output_0"], f"{base}/Mul")
    for v in (act, prod):
        b.value(v, TensorProto.FLOAT, b.hidden(cfg.intermediate))
    return b.matmul(sd[f"{p}.down_proj.weight"], f"{base}/down_proj/MatMul", prod)


def gelu_tanh(b, base, x):
    """The builder's FastGelu activation: Gelu(approximate="tanh") from opset
    20 on, below it the builder's earlier com.microsoft FastGelu."""
    name = f"{base}/act_fn/FastGelu"
    if b.opset >= 20:
        return b.node("Gelu", [x], [f"{name}/output_0"], name, approximate="tanh")
    return b.node("FastGelu", [x], [f"{name}/output_0"], name, domain="com.microsoft")


def mlp_fc(b, sd, i, x):
    """Phi's fc1 -> tanh GELU -> fc2, each Linear with its bias Add."""
    cfg, p, base = b.cfg, f"model.layers.{i}.mlp", f"/model/layers.{i}/mlp"
    h = b.matmul(sd[f"{p}.fc1.weight"], f"{base}/fc1/MatMul", x)
    h = b.add_bias(sd[f"{p}.fc1.bias"], f"{base}/fc1/Add", h)
    act = gelu_tanh(b, base, h)
    b.value(act, TensorProto.FLOAT, b.hidden(cfg.intermediate))
    h = b.matmul(sd[f"{p}.fc2.weight"], f"{base}/fc2/MatMul", act)
    return b.add_bias(sd[f"{p}.fc2.bias"], f"{base}/fc2/Add", h)


def phi_layers(b, sd, norm, mask_info, caches, rotary, rot):
    """Phi-2's parallel block: one norm feeds attention and MLP, whose sum
    is the next norm's skip input."""
    cfg = b.cfg
    for i in range(cfg.layers):
        p = f"model.layers.{i}.input_layernorm"
        x = norm(i, "input", sd[f"{p}.weight"], bias=sd[f"{p}.bias"])
        a = attention(b, sd, i, x, mask_info, caches, rotary, rot)
        m = mlp_fc(b, sd, i, x)
        name = f"/model/layers.{i}/residual_add/Add"
        norm.skip = b.node("Add", [a, m], [f"{name}/output_0"], name)
        b.value(norm.skip, TensorProto.FLOAT, b.hidden(cfg.hidden))
    x = norm(cfg.layers, "final_norm", sd["model.final_layernorm.weight"], last=True,
             bias=sd["model.final_layernorm.bias"])
    h = b.matmul(sd["lm_head.weight"], "/lm_head/MatMul", x)
    b.node("Add", [h, "lm_head.bias"], ["logits"], "/lm_head/Add")
    b.init("lm_head.bias", sd["lm_head.bias"].numpy().astype(np.float32))


def llama_layers(b, sd, norm, mask_info, caches, rotary, rot):
    cfg = b.cfg
    for i in range(cfg.layers):
        x = norm(i, "input", sd[f"model.layers.{i}.input_layernorm.weight"])
        norm.skip = attention(b, sd, i, x, mask_info, caches, rotary, rot)
        x = norm(i, "post_attention", sd[f"model.layers.{i}.post_attention_layernorm.weight"])
        norm.skip = mlp(b, sd, i, x)
    x = norm(cfg.layers, "final_norm", sd["model.norm.weight"], last=True)
    b.matmul(sd["lm_head.weight"], "/lm_head/MatMul", x, out="logits")


def graph_io(cfg, rotary):
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", i64, ["batch_size", "total_sequence_length"])]
    if rotary == "separate":
        inputs.append(helper.make_tensor_value_info("position_ids", i64, ["batch_size", "sequence_length"]))
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", cfg.vocab])]
    for i in range(cfg.layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kind}", f32, ["batch_size", cfg.kv_heads, "past_sequence_length", "kv_cache_dim"]))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kind}", f32, ["batch_size", cfg.kv_heads, "total_sequence_length", "kv_cache_dim"]))
    return inputs, outputs


def build(cfg, sd, opset, rotary, family, softcap=0.0):
    b = Builder(cfg)
    b.opset, b.softcap, b.is_local = opset, softcap or cfg.attn_softcap, gemma_is_local(cfg, family)
    mask_info = attention_mask_reformat(b)
    rot = rotary_dim(cfg, family)
    caches = (longrope_caches(b, rot) if cfg.original_max_pos else
              gemma_caches(b, rot) if family in export_llm.GEMMA_FAMILIES else rotary_caches(b, rot))
    b.init("model.embed_tokens.weight", sd["model.embed_tokens.weight"].numpy().astype(np.float32))
    emb = b.node("Gather", ["model.embed_tokens.weight", "input_ids"], ["/model/embed_tokens/Gather/output_0"],
                 "/model/embed_tokens/Gather")
    b.value(emb, TensorProto.FLOAT, b.hidden(cfg.hidden))
    if cfg.opts is not None:
        emb = scaled(b, emb, cfg.opts.embedding_multiplier, "/model/embed_tokens/Mul")
    if family in export_llm.GEMMA_FAMILIES:
        emb = scaled(b, emb, gemma_embed_scale(cfg), "/model/embed_tokens/Mul")
    norm = Norms(b, cfg.norm_eps, emb)
    if family in export_llm.GEMMA_FAMILIES:
        gemma_layers(b, sd, norm, mask_info, caches, rotary, rot)
    elif family == "phi":
        phi_layers(b, sd, norm, mask_info, caches, rotary, rot)
    elif cfg.opts is not None:
        small_family_layers(b, sd, norm, mask_info, caches, rotary, rot)
    else:
        llama_layers(b, sd, norm, mask_info, caches, rotary, rot)
    inputs, outputs = graph_io(cfg, rotary)
    graph = helper.make_graph(b.nodes, "main_graph", inputs, outputs, initializer=b.inits,
                              value_info=[v for v in b.infos if v.name != "logits"])
    model = helper.make_model(graph, producer_name="onnxruntime-genai",
                              opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10   # the builder's; newer than Debian's onnx checker knows (ONNX Runtime loads it)
    return model


# ----------------------------------------------------------------------------
# qwen3 / llama32 / smollm2 / smollm3 / granite
# ----------------------------------------------------------------------------
# qwen3 (builders/qwen.py Qwen3Model, base.py make_qk_norm on CPU): the packed
# qkv MatMul is Split into q, k, v; q and k each go Reshape [0, -1, head_dim]
# -> SimplifiedLayerNormalization (the per-head RMSNorm) -> Reshape
# [0, -1, heads * head_dim] into GroupQueryAttention, which rotates them.
# llama32 and smollm2 are LlamaForCausalLM (builders/llama.py): llama's graph,
# the tied lm_head written again, Llama 3's rescale_inv_freq in the caches.
# smollm3 (builders/smollm.py): do_rotary=0 and no caches on its NoPE layers.
# granite (builders/granite.py, Mistral's layers): Mul by embedding_multiplier
# after the Gather, by residual_multiplier after attention and after the MLP
# (the next norm's skip input), GroupQueryAttention's scale =
# attention_multiplier, Mul by 1 / logits_scaling after the lm_head.

def uses_rope(cfg, layer):
    return cfg.opts is None or cfg.opts.uses_rope(layer)


def attention_scale(cfg):
    if cfg.query_pre_attn_scalar:   # Gemma 2 and 3
        return cfg.query_pre_attn_scalar ** -0.5
    return cfg.opts.scale(cfg.head_dim) if cfg.opts is not None else 1.0 / math.sqrt(cfg.head_dim)


def scaled(b, x, factor, name):
    """Mul(x, /model/constants/FLOAT/factor), as the builder's make_mul; x itself when factor is 1."""
    if factor == 1.0:
        return x
    out = b.node("Mul", [x, b.const("FLOAT", factor)], [f"{name}/output_0"], name)
    b.value(out, TensorProto.FLOAT, b.hidden(b.cfg.hidden))
    return out


def head_norms(b, sd, i, packed):
    """The packed qkv Split into q, k, v; q and k through the builder's
    Reshape -> SimplifiedLayerNormalization -> Reshape."""
    cfg, name = b.cfg, f"/model/layers.{i}/attn/qkv_proj/Split"
    sizes = [cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim]
    qkv = [f"{name}/output_{j}" for j in range(3)]
    b.node("Split", [packed, b.const("INT64", sizes)], qkv, name, axis=-1)
    for out, size in zip(qkv, sizes):
        b.value(out, TensorProto.FLOAT, b.hidden(size))
    return [head_norm(b, sd, i, k, path, size) for k, path, size in zip("qk", qkv, sizes)] + [qkv[2]]


def head_norm(b, sd, i, k, x, size):
    cfg, base = b.cfg, f"/model/layers.{i}/attn/{k}_norm"
    wname = f"model.layers.{i}.attn.{k}_norm.layernorm.weight"
    b.init(wname, sd[f"model.layers.{i}.self_attn.{k}_norm.weight"].numpy().astype(np.float32))
    heads = ["batch_size", f"sequence_length * {size // cfg.head_dim}", cfg.head_dim]
    split = b.node("Reshape", [x, b.const("INT64", [0, -1, cfg.head_dim])], [f"{base}/Reshape_1/output_0"],
                   f"{base}/Reshape_1")
    normed = b.node("SimplifiedLayerNormalization", [split, wname], [f"{base}/SimplifiedLayerNormalization/output_0"],
                    f"{base}/SimplifiedLayerNormalization", epsilon=cfg.norm_eps, axis=-1, stash_type=1)
    out = b.node("Reshape", [normed, b.const("INT64", [0, -1, size])], [f"{base}/Reshape_2/output_0"],
                 f"{base}/Reshape_2")
    b.value(split, TensorProto.FLOAT, heads)
    b.value(normed, TensorProto.FLOAT, heads)
    b.value(out, TensorProto.FLOAT, b.hidden(size))
    return out


def small_family_layers(b, sd, norm, mask_info, caches, rotary, rot):
    """llama's layers with Granite's residual Muls and lm_head Mul (no-ops at 1)."""
    cfg = b.cfg
    residual = cfg.opts.residual_multiplier
    for i in range(cfg.layers):
        x = norm(i, "input", sd[f"model.layers.{i}.input_layernorm.weight"])
        a = attention(b, sd, i, x, mask_info, caches, rotary, rot)
        norm.skip = scaled(b, a, residual, f"/model/layers.{i}/residual_mul/Mul_1")
        x = norm(i, "post_attention", sd[f"model.layers.{i}.post_attention_layernorm.weight"])
        norm.skip = scaled(b, mlp(b, sd, i, x), residual, f"/model/layers.{i}/residual_mul/Mul_2")
    x = norm(cfg.layers, "final_norm", sd["model.norm.weight"], last=True)
    if cfg.opts.logits_scaling == 1.0:
        b.matmul(sd["lm_head.weight"], "/lm_head/MatMul", x, out="logits")
        return
    h = b.matmul(sd["lm_head.weight"], "/lm_head/MatMul", x)
    b.node("Mul", [h, b.const("FLOAT", 1.0 / cfg.opts.logits_scaling)], ["logits"], "/lm_head/Mul")

# ----------------------------------------------------------------------------
# phi3 --longrope (builders/phi.py Phi3Mini128KModel, base.py
# make_rotary_embedding_multi_cache): two pairs of caches, the long factors'
# over the whole context and the short factors' over the pretraining context,
# chosen by an If on total_sequence_length > original_max_position_embeddings:
#   Gather(Shape(attention_mask), 1) -> Greater(., original) -> If
#       then_branch: Constant cos_cache_large, sin_cache_large [max_pos, rot/2]
#       else_branch: Constant cos_cache_small, sin_cache_small [original, rot/2]
# Both pairs are scaled by LongRoPE's attention factor (hf_models.longrope_mscale).
# The tiny size keeps Phi-3-mini's full rotation: ONNX Runtime's
# GroupQueryAttention rotates only caches whose width is a multiple of 8.
# ----------------------------------------------------------------------------
LONGROPE_ORIGINAL, LONGROPE_MAX_POS = 256, 1024


def longrope_long_factor(rot):
    """rope_scaling's long_factor: made-up values above the short ones, rising
    faster with the pair index (Phi-3.5-mini's run 1.0 .. 60)."""
    pairs = rot // 2
    return [1.0 + 8.0 * i / pairs for i in range(pairs)]


def longrope_cache_pair(cfg, rot, factors, length, tag):
    """The builder's cos/sin caches for one factor list, as Constant nodes of a branch."""
    exponent = torch.arange(0, rot, 2, dtype=torch.int64).float() / rot
    inv_freq = 1.0 / (torch.tensor(factors, dtype=torch.float32) * cfg.rope_theta ** exponent)
    freqs = torch.outer(torch.arange(length, dtype=torch.int64).float(), inv_freq)
    mscale = hf_models.longrope_mscale(cfg)
    nodes, outputs = [], []
    for kind, table in (("cos", freqs.cos() * mscale), ("sin", freqs.sin() * mscale)):
        name = f"{kind}_cache_{tag}"
        array = table.numpy().astype(np.float32)
        nodes.append(helper.make_node("Constant", [], [name], name=f"/{tag}/{kind}_cache/Constant",
                                      value=numpy_helper.from_array(array, name)))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(array.shape)))
    return helper.make_graph(nodes, f"{'large' if tag == 'large' else 'small'}_rotemb_caches_graph", [], outputs)


MASK_LENGTH = "/model/attn_mask_reformat/attn_mask_subgraph/Gather/output_0"   # total_sequence_length, int64


def longrope_caches(b, rot):
    """cos_cache / sin_cache out of the builder's If over the two cache pairs."""
    cfg, base = b.cfg, "/model/rotemb_caches_subgraph"
    large = longrope_cache_pair(cfg, rot, longrope_long_factor(rot), cfg.max_pos, "large")
    small = longrope_cache_pair(cfg, rot, hf_models.longrope_short_factor(rot), cfg.original_max_pos, "small")
    greater = b.node("Greater", [MASK_LENGTH, b.const("INT64", cfg.original_max_pos)], [f"{base}/Greater/output_0"],
                     f"{base}/Greater")
    b.value(greater, TensorProto.BOOL, [])
    b.node("If", [greater], ["cos_cache", "sin_cache"], f"{base}/If", then_branch=large, else_branch=small)
    for name in ("cos_cache", "sin_cache"):
        b.value(name, TensorProto.FLOAT, ["max_sequence_length", "head_dim / 2"])
    return "cos_cache", "sin_cache"


def genai_config(cfg, family, filename, rotary):
    """The builder's genai_config.json (Model.make_genai_config), the fields
    onnxruntime-genai's runtime reads to drive the decoder; head_size sizes
    the cache whose last dim the graph leaves symbolic."""
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask",
              "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    if rotary == "separate":
        inputs["position_ids"] = "position_ids"
    return {
        "model": {
            "bos_token_id": 1, "context_length": cfg.max_pos, "eos_token_id": 2, "pad_token_id": 2,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename, "head_size": cfg.head_dim, "hidden_size": cfg.hidden,
                "inputs": inputs,
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
                "num_attention_heads": cfg.heads, "num_hidden_layers": cfg.layers,
                "num_key_value_heads": cfg.kv_heads,
            },
            "type": family, "vocab_size": cfg.vocab,
        },
        "search": {"do_sample": False, "max_length": cfg.max_pos, "num_beams": 1, "past_present_share_buffer": True},
    }


# ----------------------------------------------------------------------------
# gemma2 / gemma3
# ----------------------------------------------------------------------------
# builders/gemma.py.  GemmaModel (Mistral's graph) multiplies the embedding
# by round(sqrt(hidden), 2) (a Mul after the Gather) and stores every RMSNorm
# weight as 1 + w (add_offset: in the initializers, no Add in the graph); its
# gelu_pytorch_tanh is the builder's FastGelu, Mul(Gelu(tanh)(gate), up).
# Gemma2Model: four norms a layer,
#   input_layernorm: SkipSimplifiedLayerNormalization (residual + the last
#       post_feedforward output; output 3 the residual)
#   GroupQueryAttention: scale query_pre_attn_scalar^-0.5, softcap
#       attn_logit_softcapping, local_window_size sliding_window on the
#       local layers and -1 on the others
#   post_attention_layernorm: SimplifiedLayerNormalization of o_proj's output
#   pre_feedforward_layernorm: SkipSimplifiedLayerNormalization (residual +
#       the post_attention output)
#   post_feedforward_layernorm: SimplifiedLayerNormalization of down_proj's
#       output, the next input_layernorm's skip input
# then the final SkipSimplifiedLayerNormalization, lm_head MatMul and
# final_logit_softcapping as Div, Tanh, Mul -> logits.  Its local layers
# (is_local) are the odd ones; transformers' Gemma 2 slides the even ones,
# so beyond the window the file differs from the hf export of the same
# weights, as the builder's own Gemma 2 files do.
# Gemma3Model: qwen3's per-head q/k norms (Split, Reshape,
# SimplifiedLayerNormalization, Reshape), cos/sin_cache_global at rope_theta
# and cos/sin_cache_local at rope_local_base_freq, the local pair on layers
# with (layer + 1) % 6 != 0 (here the config's sliding_pattern: 2 in the tiny
# size, as in its hf export).

def gemma_is_local(cfg, family):
    """Layers whose GroupQueryAttention slides (builders/gemma.py is_local);
    every layer for the other families."""
    if family == "gemma2":
        return lambda i: i % 2 == 1
    if family == "gemma3":
        return lambda i: bool((i + 1) % cfg.sliding_pattern)
    return lambda i: True


def local_window(b, i):
    """GroupQueryAttention's local_window_size: -1 is no window."""
    return b.cfg.sliding_window if b.cfg.sliding_window and b.is_local(i) else -1


def gemma_embed_scale(cfg):
    return float(np.round(np.sqrt(cfg.hidden), decimals=2))


def gemma_caches(b, rot):
    """Each layer's cos/sin caches by is_local: Gemma 3's global and local
    pairs, Gemma 2's one pair for both."""
    cfg = b.cfg
    if not cfg.rope_local_theta:
        caches = rotary_caches(b, rot)
        return {False: caches, True: caches}
    return {False: rotary_caches(b, rot, names=("cos_cache_global", "sin_cache_global")),
            True: rotary_caches(b, rot, theta=cfg.rope_local_theta, names=("cos_cache_local", "sin_cache_local"))}


def gemma_offset_norms(sd):
    """add_offset: the builder stores each Gemma RMSNorm weight w as 1 + w."""
    for name in sd:
        if name.endswith("norm.weight"):
            sd[name] = sd[name] + 1.0


def gemma_layers(b, sd, norm, mask_info, caches, rotary, rot):
    cfg = b.cfg
    for i in range(cfg.layers):
        p = f"model.layers.{i}"
        x = norm(i, "input", sd[f"{p}.input_layernorm.weight"])
        a = attention(b, sd, i, x, mask_info, caches[b.is_local(i)], rotary, rot)
        # a norm of one input (the post norms): a chain of its own, first norm only
        norm.skip = Norms(b, cfg.norm_eps, a)(i, "post_attention", sd[f"{p}.post_attention_layernorm.weight"])
        x = norm(i, "pre_feedforward", sd[f"{p}.pre_feedforward_layernorm.weight"])
        m = mlp(b, sd, i, x, act_fn=gelu_tanh)
        norm.skip = Norms(b, cfg.norm_eps, m)(i, "post_feedforward", sd[f"{p}.post_feedforward_layernorm.weight"])
    x = norm(cfg.layers, "final_norm", sd["model.norm.weight"], last=True)
    if not cfg.final_softcap:
        b.matmul(sd["lm_head.weight"], "/lm_head/MatMul", x, out="logits")
        return
    h = b.matmul(sd["lm_head.weight"], "/lm_head/MatMul", x)
    cap, base = b.const("FLOAT", cfg.final_softcap), "/lm_head/softcap"
    div = b.node("Div", [h, cap], [f"{base}/Div/output_0"], f"{base}/Div")
    tanh = b.node("Tanh", [div], [f"{base}/Tanh/output_0"], f"{base}/Tanh")
    b.node("Mul", [tanh, cap], ["logits"], f"{base}/Mul")
    for v in (div, tanh):
        b.value(v, TensorProto.FLOAT, b.hidden(cfg.vocab))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=FAMILIES, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, help="number of decoder layers (default: the tiny size's)")
    ap.add_argument("--opset", type=int, default=21,
                    help="default-domain opset: the builder's 21, or 17 (the same nodes; none of them "
                         "changed meaning between the two)")
    ap.add_argument("--rotary", choices=("attention", "separate"), default="attention",
                    help="attention: GroupQueryAttention rotates (do_rotary=1, the CPU form); separate: "
                         "RotaryEmbedding nodes on unpacked q and k read position_ids (the builder's form "
                         "for execution providers without rotary in the attention op)")
    ap.add_argument("--softcap", type=float, default=0.0,
                    help="GroupQueryAttention's softcap attribute (0: none)")
    ap.add_argument("--longrope", action="store_true",
                    help="phi3 only: LongRoPE (Phi-3-mini-128k, Phi-3.5-mini) over a pretraining context of "
                         f"{LONGROPE_ORIGINAL} stretched to {LONGROPE_MAX_POS}: the builder's If between the "
                         "long and the short factors' caches")
    ap.add_argument("--out", required=True, help="the model file; genai_config.json is written beside it")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    cfg = export_llm.make_config(args.family, "tiny")
    if args.layers is not None:
        cfg.layers = args.layers
    if args.longrope:
        if args.family != "phi3" or args.rotary != "attention":
            raise SystemExit("export_genai: --longrope applies to family phi3 with --rotary attention")
        cfg.original_max_pos, cfg.max_pos = LONGROPE_ORIGINAL, LONGROPE_MAX_POS
    if args.family == "phi":
        # ONNX Runtime's GroupQueryAttention rotates only caches whose width
        # (rotary_dim / 2) is a multiple of 8: the tiny size's 4 heads of 16
        # rotate 8 dims, 2 heads of 32 rotate 16 (Phi-2: 32 of 80)
        cfg.heads = cfg.kv_heads = 2
    if args.family in ("qwen3", "gemma3") and args.rotary == "separate":
        raise SystemExit(f"export_genai: {args.family} is written with --rotary attention only (its q/k norms "
                         "precede the rotation)")
    model = hf_models.build_hf_model(args.family, cfg).eval()
    export_llm.randomize_weights(model, args.seed, **hf_models.init_options(args.family))
    sd = {k: v.detach() for k, v in model.state_dict().items()}
    if "lm_head.weight" not in sd:   # tied: the builder writes the embedding again
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    if args.family == "phi3":
        unpack_phi3(cfg, sd)
    if args.family in export_llm.GEMMA_FAMILIES:
        gemma_offset_norms(sd)
    onnx_model = build(cfg, sd, args.opset, args.rotary, args.family, args.softcap)
    folder = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(folder, exist_ok=True)
    onnx.save(onnx_model, args.out)
    with open(os.path.join(folder, "genai_config.json"), "w") as f:
        json.dump(genai_config(cfg, args.family, os.path.basename(args.out), args.rotary), f, indent=4)
    print(f"wrote {args.out}: {args.family}, {cfg.layers} layers, {len(onnx_model.graph.node)} nodes")


if __name__ == "__main__":
    main()
