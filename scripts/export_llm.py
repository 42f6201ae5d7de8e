#!/usr/bin/python3
"""Export small decoder-only LLMs with random weights to ONNX (with KV cache).

Run with Debian's python (/usr/bin/python3): it has python3-torch and python3-onnx.

Four families are written here in plain PyTorch (no transformers library):
  llama  RMSNorm, RoPE (cos/sin computed in-graph from position_ids), SwiGLU, no biases
  qwen2  llama + grouped-query attention, q/k/v biases, RoPE cos/sin cache gathered
  gpt2   LayerNorm, tanh GELU, learned positions, `bias` causal buffer, tied lm_head
  phi    LayerNorm, partial RoPE (cache gathered), parallel attn+MLP, erf GELU
  qwen3  llama + grouped-query attention, per-head RMSNorm of q and k before RoPE,
         head_dim x heads != hidden, tied lm_head
  llama32  llama + grouped-query attention, tied lm_head, llama3 RoPE scaling
  smollm2  llama + grouped-query attention, tied lm_head
  smollm3  smollm2 with no RoPE in every no_rope_interval-th layer (NoPE)
  granite  llama + embedding, attention, residual and logits multipliers, tied lm_head
  olmo2    post-norm layers (no input norm), RMSNorm over the whole q and k projections
  phi3   llama with q/k/v packed in one qkv_proj and gate/up in one gate_up_proj;
         size tiny-phi4 (Phi-4-mini's shape): grouped-query attention, rotary
         fraction 0.75, LongRoPE cos/sin, tied lm_head
  mistral llama + grouped-query attention, head_dim x heads != hidden, a sliding
         window (key j visible to query i when 0 <= i - j < sliding_window)
  gemma2 embedding x sqrt(hidden), RMSNorm x (1 + w), four norms a layer (post-attention,
         pre/post-feedforward), tanh-GELU GeGLU, attention scale query_pre_attn_scalar^-0.5,
         sliding-window layers alternating with global ones, logit soft-caps, tied lm_head
  gemma3 gemma2 without soft-caps + per-head q/k RMSNorm x (1 + w), a local RoPE table
         (base 10000) for the sliding layers and a global one (1e6), every Nth layer global
That is --style plain (the default). --style hf writes the same families shaped
the way Hugging Face exports are (scripts/hf_models.py: ports of transformers'
eager forward passes, optimum's input/output names and dynamic axes).

Graph interface (names are a contract with llmc and scripts/ort_generate.js):
  inputs : input_ids [batch,sequence] i64, attention_mask [batch,total_sequence] i64,
           position_ids [batch,sequence] i64,
           past_key_values.{i}.key/.value [batch,kv_heads,past_sequence,head_dim] f32
  outputs: logits [batch,sequence,vocab] f32,
           present.{i}.key/.value [batch,kv_heads,total_sequence,head_dim] f32
--style hf uses the same names with optimum's dimension names (batch_size,
sequence_length, past_sequence_length, ...) and, for gpt2, optimum's input
order (input_ids, past_key_values.*, attention_mask, position_ids).

--opset N above torch's newest (17 for Debian's torch 1.13) exports at that
opset and raises the file to N with scripts/onnx_opset_upgrade.py.

--torch-logits-out FILE --prompt-ids 5,17,42 [--max-new N] also decodes in
PyTorch eager and writes logits rows as ort_generate.js --logits-out does:
  scripts/compare_logits.py ORT.bin FILE --vocab 512
"""
import argparse
import math
import os
import re
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import hf_models
import onnx_opset_upgrade

# Used for every masked attention score (additive masks and torch.where masks).
MASK_VALUE = torch.finfo(torch.float32).min

FAMILIES = ("llama", "qwen2", "gpt2", "phi", "qwen3", "phi3", "mistral")
# Small deployed families: FamilyOptions and the block after qwen3's model.
FAMILIES += ("llama32", "smollm2", "smollm3", "granite", "olmo2")
# Gemma 2 and 3: gemma_config and the block after the small families.
FAMILIES += ("gemma2", "gemma3")


@dataclass
class Config:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    max_pos: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    # How the plain style builds its causal mask (--mask): "range" compares
    # Range positions, "triu" is torch.triu of a full finfo.min matrix, and
    # for gpt2 "where-additive" adds Where(bias slice, 0, -1e9) to the
    # scores instead of Where(bias slice, scores, min).
    mask: str = "range"
    # --style hf attention of llama/qwen2 (--attn): "eager", or "sdpa" as
    # optimum exports it today (transformers' sdpa mask and torch's SDPA
    # decomposition).
    attn: str = "eager"
    # --rotary-slice: llama/qwen2 rotate q[..., :head_dim], as partial-rotary
    # code does at rotary fraction 1.0, and concatenate the empty
    # q[..., head_dim:] back ("cat") or not ("only", code that skips an
    # empty rest).
    rotary_slice: str = "none"
    # --act gelu_tanh: the gpt2/phi MLP uses F.gelu(approximate="tanh")
    # (torch exports it decomposed below opset 20), not the family's own.
    act: str = "default"
    # --rotary-fraction (hf phi): the share of each head that rotates.
    rotary_fraction: float = 0.5
    # qwen3: head_dim set apart from hidden // heads (0: hidden // heads).
    head_size: int = 0
    # llama32/smollm2/smollm3/granite/olmo2: their FamilyOptions.
    opts: object = None
    # phi3: LongRoPE's pretraining context (rope_scaling type longrope,
    # original_max_position_embeddings); 0: plain RoPE.
    original_max_pos: int = 0
    # phi3: lm_head shares the embedding (Phi-4-mini).
    tied: bool = False
    # mistral: the sliding window of every layer; gemma2/gemma3: of the
    # sliding layers (0: none).
    sliding_window: int = 0
    # gemma2/gemma3 (gemma_config): attention scale query_pre_attn_scalar^-0.5;
    # soft-caps c * tanh(x / c) of the attention scores and of the logits
    # (0: none); every sliding_pattern-th layer global; the sliding layers'
    # RoPE base (0: the global table).
    query_pre_attn_scalar: float = 0.0
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    sliding_pattern: int = 0
    rope_local_theta: float = 0.0

    @property
    def head_dim(self):
        return self.head_size or self.hidden // self.heads


def make_config(family, size):
    if size == "fuzz":
        return fuzz_config(family)
    if family in GEMMA_FAMILIES:
        return gemma_config(family, size)
    if family in SMALL_FAMILIES:
        return small_family_config(family, size)
    if family == "phi3":
        return make_phi3_config(size)
    if size == "tiny" and family == "mistral":
        # a window of 16: the 64-token prompt and the decode steps cross it
        return Config(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128,
                      max_pos=256, head_size=32, sliding_window=16)
    if size == "tiny":
        mlp = 4 * 64 if family in ("gpt2", "phi") else 128
        kv_heads = 2 if family in ("qwen2", "qwen3") else 4
        # qwen3 keeps heads x head_dim (128) != hidden (64), as Qwen3 does
        head_size = 32 if family == "qwen3" else 0
        return Config(vocab=512, hidden=64, layers=2, heads=4, kv_heads=kv_heads,
                      intermediate=mlp, max_pos=256, head_size=head_size)
    if size == "qwen2-0.5b":
        return Config(vocab=151936, hidden=896, layers=24, heads=14, kv_heads=2,
                      intermediate=4864, max_pos=4096, rope_theta=1000000.0,
                      norm_eps=1e-6)
    if size == "qwen3-0.6b":
        return Config(vocab=151936, hidden=1024, layers=28, heads=16, kv_heads=8,
                      intermediate=3072, max_pos=4096, rope_theta=1000000.0,
                      norm_eps=1e-6, head_size=128)
    raise ValueError(f"unknown size {size}")


def fuzz_config(family):
    """fuzz: the family's tiny shape at a quarter of the width (hidden 16,
    2 heads, 32 positions) and one layer (Gemma keeps one sliding and one
    global), so that the fuzz targets run its plans fast; it keeps the
    vocabulary (512: the tiny tokenizers fit) and what sets the family
    apart: grouped-query attention, heads x head_dim != hidden, a sliding
    window (4) that a context of 16 crosses."""
    cfg = make_config(family, "tiny")
    cfg.max_pos, cfg.heads = 32, 2
    cfg.kv_heads = 1 if cfg.kv_heads < 4 else 2
    cfg.hidden //= 4
    cfg.intermediate //= 4
    cfg.head_size //= 2
    cfg.sliding_window //= 4
    cfg.original_max_pos //= 8
    cfg.layers = 2 if cfg.sliding_pattern else 1
    return cfg


def make_phi3_config(size):
    """tiny: Phi-3-mini's shape (multi-head, all dims rotate, untied); tiny-phi4:
    Phi-4-mini's (2 kv heads, rotary fraction 0.75, LongRoPE over a 64-token
    pretraining context stretched to 256, tied lm_head)."""
    if size == "tiny":
        return Config(vocab=512, hidden=64, layers=2, heads=4, kv_heads=4, intermediate=128,
                      max_pos=256, rotary_fraction=1.0)
    if size == "tiny-phi4":
        return Config(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128,
                      max_pos=256, rotary_fraction=0.75, original_max_pos=64, tied=True)
    raise ValueError(f"unknown phi3 size {size}")


GEMMA_FAMILIES = ("gemma2", "gemma3")


def gemma_config(family, size):
    """Tiny Gemma: heads x head_dim (128) != hidden (64), a scale apart from
    head_dim^-0.5, both kinds of layer in 2 layers (Gemma 3's pattern 6 is 2),
    a window of 16 that the 64-token prompt and the decode steps cross;
    Gemma 2's soft-caps 50 (scores) and 30 (logits) as in its checkpoints."""
    if size != "tiny":
        raise ValueError(f"unknown size {size} for {family}")
    cfg = Config(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_pos=256,
                 norm_eps=1e-6, head_size=32, query_pre_attn_scalar=24.0, sliding_window=16,
                 sliding_pattern=2)
    if family == "gemma2":
        cfg.attn_softcap, cfg.final_softcap = 50.0, 30.0
    else:
        cfg.rope_theta, cfg.rope_local_theta = 1000000.0, 10000.0
    return cfg


# ----------------------------------------------------------------------------
# Shared building blocks
# ----------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def gain(self):
        return self.weight

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.gain()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(q, k, cos, sin):
    """q,k: [b,h,s,d]; cos,sin: [b,s,d] (broadcast over heads)."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def sliced_rope(q, k, cos, sin, r, cat=True):
    """Partial-rotary code (transformers' Phi): rotate x[..., :r], keep x[..., r:]
    (concatenated back unless `cat` is off and it is empty)."""
    q_rot, k_rot = apply_rope(q[..., :r], k[..., :r], cos, sin)
    if not cat and r == q.shape[-1]:
        return q_rot, k_rot
    return (torch.cat((q_rot, q[..., r:]), dim=-1),
            torch.cat((k_rot, k[..., r:]), dim=-1))


def rope_inv_freq(rot_dim, theta):
    return 1.0 / (theta ** (torch.arange(0, rot_dim, 2, dtype=torch.float32) / rot_dim))


class RopeComputed(nn.Module):
    """cos/sin computed in the graph from position_ids (HF Llama >= 4.38 style)."""

    def __init__(self, rot_dim, theta, max_pos):
        super().__init__()
        self.register_buffer("inv_freq", rope_inv_freq(rot_dim, theta), persistent=False)

    def forward(self, position_ids):
        batch = position_ids.shape[0]
        inv = self.inv_freq[None, :, None].expand(batch, -1, 1)      # [b, d/2, 1]
        pos = position_ids[:, None, :].float()                        # [b, 1, s]
        freqs = torch.matmul(inv, pos).transpose(1, 2)                # [b, s, d/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


class RopeCached(nn.Module):
    """cos/sin precomputed for max_pos positions, gathered by position_ids."""

    def __init__(self, rot_dim, theta, max_pos):
        super().__init__()
        t = torch.arange(max_pos, dtype=torch.float32)
        freqs = torch.outer(t, rope_inv_freq(rot_dim, theta))
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, position_ids):
        return self.cos_cached[position_ids], self.sin_cached[position_ids]


def additive_causal_mask(attention_mask, past_len, seq_len, form="range", window=0):
    """[b,1,s,total] float mask: 0 where attending, MASK_VALUE elsewhere.

    Causal part is built from Range ops so it works for any past length
    (including 0), or with form "triu" from torch.triu (exports as Trilu);
    padding part comes from attention_mask (1 = attend).  window > 0 (range
    form) also masks keys window or more positions behind the query.
    """
    total = past_len + seq_len
    if form == "triu":
        causal = torch.triu(torch.full((seq_len, total), MASK_VALUE), diagonal=past_len + 1)
        padding = attention_mask[:, None, None, :] != 0                   # [b,1,1,total]
        return torch.where(padding, causal[None, None, :, :], torch.full((), MASK_VALUE))
    q_pos = torch.arange(past_len, total, device=attention_mask.device)[:, None]
    k_pos = torch.arange(total, device=attention_mask.device)[None, :]
    causal = k_pos <= q_pos
    if window:
        causal = causal & (q_pos - k_pos < window)
    causal = causal[None, None, :, :]                                 # [1,1,s,total]
    padding = attention_mask[:, None, None, :] != 0                   # [b,1,1,total]
    allowed = causal & padding
    return torch.where(allowed, torch.zeros(()), torch.full((), MASK_VALUE))


def repeat_kv(x, n_rep):
    """[b,kvh,s,d] -> [b,kvh*n_rep,s,d] via expand+reshape (HF repeat_kv)."""
    if n_rep == 1:
        return x
    b, kvh, s, d = x.shape
    x = x[:, :, None, :, :].expand(b, kvh, n_rep, s, d)
    return x.reshape(b, kvh * n_rep, s, d)


def attend(q, k, v, mask, n_rep, head_dim):
    """Scaled dot-product attention with an additive mask; softmax in fp32."""
    k = repeat_kv(k, n_rep)
    v = repeat_kv(v, n_rep)
    # head_dim is passed as a Python int so the scale is a traced constant.
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(head_dim)
    scores = scores + mask
    probs = F.softmax(scores.float(), dim=-1).to(q.dtype)
    return torch.matmul(probs, v)


def split_heads(x, n_heads, head_dim, norm=None):
    """[b,s,h*d] -> [b,h,s,d]; norm (qwen3's q/k RMSNorm) applies before the transpose."""
    b, s, _ = x.shape
    x = x.view(b, s, n_heads, head_dim)
    return (norm(x) if norm is not None else x).transpose(1, 2)


def merge_heads(x):
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def append_past(past_k, past_v, k, v):
    return torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)


# ----------------------------------------------------------------------------
# llama / qwen2
# ----------------------------------------------------------------------------

class LlamaAttention(nn.Module):
    """qk_norm (qwen3): RMSNorm over each q and k head, one weight [head_dim]
    shared by the heads, between the head split and the transpose."""

    def __init__(self, cfg, qkv_bias, qk_norm=False):
        super().__init__()
        self.cfg = cfg
        d = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * d, bias=qkv_bias)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=qkv_bias)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=qkv_bias)
        self.o_proj = nn.Linear(cfg.heads * d, cfg.hidden, bias=False)
        self.q_norm = RMSNorm(d, cfg.norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(d, cfg.norm_eps) if qk_norm else None

    def forward(self, x, cos, sin, mask, past_k, past_v):
        c = self.cfg
        q = split_heads(self.q_proj(x), c.heads, c.head_dim, self.q_norm)
        k = split_heads(self.k_proj(x), c.kv_heads, c.head_dim, self.k_norm)
        v = split_heads(self.v_proj(x), c.kv_heads, c.head_dim)
        if c.rotary_slice != "none":
            q, k = sliced_rope(q, k, cos, sin, c.head_dim, c.rotary_slice == "cat")
        else:
            q, k = apply_rope(q, k, cos, sin)
        k, v = append_past(past_k, past_v, k, v)
        out = attend(q, k, v, mask, c.heads // c.kv_heads, c.head_dim)
        return self.o_proj(merge_heads(out)), k, v


class SwiGLU(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    @staticmethod
    def act(x):
        return F.silu(x)

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, cfg, qkv_bias, qk_norm=False):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.self_attn = LlamaAttention(cfg, qkv_bias, qk_norm)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        attn, k, v = self.self_attn(self.input_layernorm(x), cos, sin, mask, past_k, past_v)
        x = x + attn
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, k, v


class LlamaModel(nn.Module):
    """family llama (qkv_bias=False, computed RoPE), qwen2 (qkv_bias, cached
    RoPE) or qwen3 (qk_norm, computed RoPE, lm_head tied to the embedding)."""

    def __init__(self, cfg, qkv_bias, rope_cls, qk_norm=False):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.rope = rope_cls(cfg.head_dim, cfg.rope_theta, cfg.max_pos)
        self.layers = nn.ModuleList(LlamaLayer(cfg, qkv_bias, qk_norm) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if qk_norm:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.embed_tokens(input_ids)
        cos, sin = self.rope(position_ids)
        mask = additive_causal_mask(attention_mask, past[0].shape[2], input_ids.shape[1], self.cfg.mask,
                                    self.cfg.sliding_window)
        presents = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.norm(x)), *presents)


# ----------------------------------------------------------------------------
# gpt2
# ----------------------------------------------------------------------------

def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def torch_gelu_tanh(x):
    """Gemma's GeGLU activation: torch's own tanh GELU."""
    return F.gelu(x, approximate="tanh")


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        # Lower-triangular causal buffer as in HF GPT-2 (bool, one per layer).
        tril = torch.tril(torch.ones((cfg.max_pos, cfg.max_pos), dtype=torch.bool))
        self.register_buffer("bias", tril.view(1, 1, cfg.max_pos, cfg.max_pos), persistent=False)
        self.c_attn = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.c_proj = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x, padding_mask, past_k, past_v):
        c = self.cfg
        q, k, v = self.c_attn(x).split(c.hidden, dim=2)
        q = split_heads(q, c.heads, c.head_dim)
        k = split_heads(k, c.heads, c.head_dim)
        v = split_heads(v, c.heads, c.head_dim)
        k, v = append_past(past_k, past_v, k, v)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(c.head_dim)
        q_len, k_len = q.shape[-2], k.shape[-2]
        causal = self.bias[:, :, k_len - q_len:k_len, :k_len]
        if c.mask == "where-additive":
            scores = scores + torch.where(causal, torch.zeros(()), torch.full((), -1e9))
        else:
            scores = torch.where(causal, scores, torch.full((), MASK_VALUE))
        # Padding is additive as in HF; where both masks apply the sum is -inf,
        # which is harmless since every query attends at least to itself.
        scores = scores + padding_mask
        probs = F.softmax(scores.float(), dim=-1)
        return self.c_proj(merge_heads(torch.matmul(probs, v))), k, v


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.hidden, cfg.intermediate)
        self.c_proj = nn.Linear(cfg.intermediate, cfg.hidden)
        self.act = torch_gelu_tanh if cfg.act == "gelu_tanh" else gelu_tanh

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x, padding_mask, past_k, past_v):
        attn, k, v = self.attn(self.ln_1(x), padding_mask, past_k, past_v)
        x = x + attn
        x = x + self.mlp(self.ln_2(x))
        return x, k, v


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Embedding(cfg.max_pos, cfg.hidden)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.wte(input_ids) + self.wpe(position_ids)
        # HF GPT-2: (1 - mask) * min, broadcast over heads and queries.
        padding = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * MASK_VALUE
        presents = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, padding, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        # Tied lm_head: logits use the token embedding matrix.
        logits = torch.matmul(self.ln_f(x), self.wte.weight.t())
        return (logits, *presents)


# ----------------------------------------------------------------------------
# phi
# ----------------------------------------------------------------------------

class PhiAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.rot_dim = cfg.head_dim // 2
        self.q_proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.k_proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.v_proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)

    def partial_rope(self, q, k, cos, sin):
        return sliced_rope(q, k, cos, sin, self.rot_dim)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        c = self.cfg
        q = split_heads(self.q_proj(x), c.heads, c.head_dim)
        k = split_heads(self.k_proj(x), c.heads, c.head_dim)
        v = split_heads(self.v_proj(x), c.heads, c.head_dim)
        q, k = self.partial_rope(q, k, cos, sin)
        k, v = append_past(past_k, past_v, k, v)
        out = attend(q, k, v, mask, 1, c.head_dim)
        return self.dense(merge_heads(out)), k, v


class PhiMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden, cfg.intermediate)
        self.act = nn.GELU(approximate="tanh" if cfg.act == "gelu_tanh" else "none")  # erf by default
        self.fc2 = nn.Linear(cfg.intermediate, cfg.hidden)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class PhiLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.self_attn = PhiAttention(cfg)
        self.mlp = PhiMLP(cfg)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        h = self.input_layernorm(x)
        attn, k, v = self.self_attn(h, cos, sin, mask, past_k, past_v)
        return x + attn + self.mlp(h), k, v


class PhiModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.rope = RopeCached(cfg.head_dim // 2, cfg.rope_theta, cfg.max_pos)
        self.layers = nn.ModuleList(PhiLayer(cfg) for _ in range(cfg.layers))
        self.final_layernorm = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=True)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.embed_tokens(input_ids)
        cos, sin = self.rope(position_ids)
        mask = additive_causal_mask(attention_mask, past[0].shape[2], input_ids.shape[1], self.cfg.mask)
        presents = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.final_layernorm(x)), *presents)


# ----------------------------------------------------------------------------
# llama32 / smollm2 / smollm3 / granite / olmo2
# ----------------------------------------------------------------------------

@dataclass
class FamilyOptions:
    """What sets a small family apart from llama (Config.opts)."""
    tied: bool = True                 # lm_head shares the embedding table
    # Llama 3's rope_scaling (rope_type "llama3"): (factor, low_freq_factor,
    # high_freq_factor, original_max_position_embeddings); None: default RoPE
    rope_scaling: tuple = None
    # SmolLM3's no_rope_layer_interval: layer i has no RoPE when
    # (i + 1) % interval == 0 (0: RoPE in every layer)
    no_rope_interval: int = 0
    # Granite's multipliers (1.0 and attention 0: llama's)
    embedding_multiplier: float = 1.0
    attention_multiplier: float = 0.0  # 0: 1 / sqrt(head_dim)
    residual_multiplier: float = 1.0
    logits_scaling: float = 1.0
    # OLMo2: post-norm layers, q/k RMSNorm over the whole projection
    post_norm: bool = False

    def uses_rope(self, layer):
        return self.no_rope_interval == 0 or (layer + 1) % self.no_rope_interval != 0

    def scale(self, head_dim):
        return self.attention_multiplier or 1.0 / math.sqrt(head_dim)


SMALL_FAMILIES = {
    "llama32": FamilyOptions(rope_scaling=(32.0, 1.0, 4.0, 8192)),
    "smollm2": FamilyOptions(),
    # interval 2 in the tiny size, so that two layers hold a NoPE layer (4 in SmolLM3-3B)
    "smollm3": FamilyOptions(no_rope_interval=2),
    "granite": FamilyOptions(embedding_multiplier=12.0, attention_multiplier=0.015625,
                             residual_multiplier=0.22, logits_scaling=8.0),
    "olmo2": FamilyOptions(tied=False, post_norm=True),
}
SMALL_THETA = {"llama32": 500000.0, "smollm2": 100000.0, "smollm3": 5000000.0,
               "granite": 5000000.0, "olmo2": 500000.0}
# Published configurations (hidden, layers, heads, kv_heads, intermediate, vocab)
SMALL_SIZES = ("llama3.2-1b", "smollm2-135m")
SMALL_REAL = {"llama3.2-1b": ("llama32", 2048, 16, 32, 8, 8192, 128256),
              "smollm2-135m": ("smollm2", 576, 30, 9, 3, 1536, 49152)}


def small_family_config(family, size):
    opts = SMALL_FAMILIES[family]
    eps = 1e-6 if family in ("smollm3", "olmo2") else 1e-5
    if size == "tiny":
        # grouped-query attention (4 heads on 2 kv heads) as the real models
        return Config(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128,
                      max_pos=256, rope_theta=SMALL_THETA[family], norm_eps=eps, opts=opts)
    if size in SMALL_REAL and SMALL_REAL[size][0] == family:
        _, hidden, layers, heads, kv_heads, mlp, vocab = SMALL_REAL[size]
        return Config(vocab=vocab, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                      intermediate=mlp, max_pos=4096, rope_theta=SMALL_THETA[family],
                      norm_eps=eps, opts=opts)
    raise ValueError(f"size {size} is not one of family {family}")


class SmallFamilyAttention(nn.Module):
    """llama attention with the family's scale, NoPE layers (no rotation) and
    OLMo2's q/k RMSNorm over the whole projection (before the head split)."""

    def __init__(self, cfg, layer):
        super().__init__()
        self.cfg, self.rope = cfg, cfg.opts.uses_rope(layer)
        d = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * d, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(cfg.heads * d, cfg.hidden, bias=False)
        full = cfg.opts.post_norm
        self.q_norm = RMSNorm(cfg.heads * d, cfg.norm_eps) if full else nn.Identity()
        self.k_norm = RMSNorm(cfg.kv_heads * d, cfg.norm_eps) if full else nn.Identity()

    def forward(self, x, cos, sin, mask, past_k, past_v):
        c = self.cfg
        q = split_heads(self.q_norm(self.q_proj(x)), c.heads, c.head_dim)
        k = split_heads(self.k_norm(self.k_proj(x)), c.kv_heads, c.head_dim)
        v = split_heads(self.v_proj(x), c.kv_heads, c.head_dim)
        if self.rope:
            q, k = apply_rope(q, k, cos, sin)
        k, v = append_past(past_k, past_v, k, v)
        k_all, v_all = repeat_kv(k, c.heads // c.kv_heads), repeat_kv(v, c.heads // c.kv_heads)
        scores = torch.matmul(q, k_all.transpose(2, 3)) * c.opts.scale(c.head_dim) + mask
        out = torch.matmul(F.softmax(scores, dim=-1), v_all)
        return self.o_proj(merge_heads(out)), k, v


class SmallFamilyLayer(nn.Module):
    """Pre-norm x + r * f(norm(x)) (r: Granite's residual multiplier), or
    OLMo2's post-norm x + norm(f(x))."""

    def __init__(self, cfg, layer):
        super().__init__()
        self.opts = cfg.opts
        if not cfg.opts.post_norm:
            self.input_layernorm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.self_attn = SmallFamilyAttention(cfg, layer)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.norm_eps)
        if cfg.opts.post_norm:
            self.post_feedforward_layernorm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        if self.opts.post_norm:
            attn, k, v = self.self_attn(x, cos, sin, mask, past_k, past_v)
            x = x + self.post_attention_layernorm(attn)
            return x + self.post_feedforward_layernorm(self.mlp(x)), k, v
        r = self.opts.residual_multiplier
        attn, k, v = self.self_attn(self.input_layernorm(x), cos, sin, mask, past_k, past_v)
        x = x + (attn * r if r != 1.0 else attn)
        h = self.mlp(self.post_attention_layernorm(x))
        return x + (h * r if r != 1.0 else h), k, v


class SmallFamilyModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg, opts = cfg, cfg.opts
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.rope = RopeComputed(cfg.head_dim, cfg.rope_theta, cfg.max_pos)
        if opts.rope_scaling:
            self.rope.inv_freq = hf_models.llama3_inv_freq(self.rope.inv_freq, *opts.rope_scaling)
        self.layers = nn.ModuleList(SmallFamilyLayer(cfg, i) for i in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if opts.tied:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, input_ids, attention_mask, position_ids, *past):
        opts = self.cfg.opts
        x = self.embed_tokens(input_ids)
        if opts.embedding_multiplier != 1.0:
            x = x * opts.embedding_multiplier
        cos, sin = self.rope(position_ids)
        mask = additive_causal_mask(attention_mask, past[0].shape[2], input_ids.shape[1], self.cfg.mask)
        presents = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        logits = self.lm_head(self.norm(x))
        if opts.logits_scaling != 1.0:
            logits = logits / opts.logits_scaling
        return (logits, *presents)


# ----------------------------------------------------------------------------
# gemma2 / gemma3
# ----------------------------------------------------------------------------

class GemmaRMSNorm(RMSNorm):
    """Gemma's RMSNorm: the weight is stored as an offset from 1."""

    def gain(self):
        return 1.0 + self.weight


def softcap(x, cap):
    return torch.tanh(x / cap) * cap


def gemma_is_sliding(cfg, i):
    """Every sliding_pattern-th layer is global, the others slide (Gemma 2: 2)."""
    return (i + 1) % cfg.sliding_pattern != 0


class GemmaAttention(LlamaAttention):
    """qk_norm (gemma3): GemmaRMSNorm over each q and k head before the transpose."""

    def __init__(self, cfg, qk_norm):
        super().__init__(cfg, qkv_bias=False)
        self.q_norm = GemmaRMSNorm(cfg.head_dim, cfg.norm_eps) if qk_norm else None
        self.k_norm = GemmaRMSNorm(cfg.head_dim, cfg.norm_eps) if qk_norm else None

    def forward(self, x, cos, sin, mask, past_k, past_v):
        c = self.cfg
        q = split_heads(self.q_proj(x), c.heads, c.head_dim, self.q_norm)
        k = split_heads(self.k_proj(x), c.kv_heads, c.head_dim, self.k_norm)
        v = split_heads(self.v_proj(x), c.kv_heads, c.head_dim)
        q, k = apply_rope(q, k, cos, sin)
        k, v = append_past(past_k, past_v, k, v)
        n_rep = c.heads // c.kv_heads
        scores = torch.matmul(q, repeat_kv(k, n_rep).transpose(2, 3)) * c.query_pre_attn_scalar ** -0.5
        if c.attn_softcap:
            scores = softcap(scores, c.attn_softcap)
        probs = F.softmax(scores + mask, dim=-1)
        return self.o_proj(merge_heads(torch.matmul(probs, repeat_kv(v, n_rep)))), k, v


class GeGLU(SwiGLU):
    @staticmethod
    def act(x):
        return torch_gelu_tanh(x)


class GemmaLayer(nn.Module):
    """Norms before and after the attention and the MLP, the after-norms on
    the branch before its residual add."""

    def __init__(self, cfg, qk_norm):
        super().__init__()
        self.input_layernorm = GemmaRMSNorm(cfg.hidden, cfg.norm_eps)
        self.self_attn = GemmaAttention(cfg, qk_norm)
        self.post_attention_layernorm = GemmaRMSNorm(cfg.hidden, cfg.norm_eps)
        self.pre_feedforward_layernorm = GemmaRMSNorm(cfg.hidden, cfg.norm_eps)
        self.mlp = GeGLU(cfg)
        self.post_feedforward_layernorm = GemmaRMSNorm(cfg.hidden, cfg.norm_eps)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        attn, k, v = self.self_attn(self.input_layernorm(x), cos, sin, mask, past_k, past_v)
        x = x + self.post_attention_layernorm(attn)
        x = x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        return x, k, v


class GemmaModel(nn.Module):
    """family gemma2 (one RoPE table, soft-caps, an lm_head of its own here,
    so that the plain exports hold both an untied and a tied head) or gemma3
    (qk_norm, a local RoPE table for the sliding layers, lm_head tied to the
    embedding as in Gemma's checkpoints)."""

    def __init__(self, cfg, qk_norm, tied):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.rope = RopeComputed(cfg.head_dim, cfg.rope_theta, cfg.max_pos)
        self.rope_local = (RopeComputed(cfg.head_dim, cfg.rope_local_theta, cfg.max_pos)
                           if cfg.rope_local_theta else None)
        self.layers = nn.ModuleList(GemmaLayer(cfg, qk_norm) for _ in range(cfg.layers))
        self.norm = GemmaRMSNorm(cfg.hidden, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, input_ids, attention_mask, position_ids, *past):
        c = self.cfg
        x = self.embed_tokens(input_ids) * torch.tensor(c.hidden ** 0.5)
        rope_global = self.rope(position_ids)
        rope_local = self.rope_local(position_ids) if self.rope_local else rope_global
        past_len, seq_len = past[0].shape[2], input_ids.shape[1]
        mask_global = additive_causal_mask(attention_mask, past_len, seq_len)
        mask_local = additive_causal_mask(attention_mask, past_len, seq_len, window=c.sliding_window)
        presents = []
        for i, layer in enumerate(self.layers):
            sliding = gemma_is_sliding(c, i)
            cos, sin = rope_local if sliding else rope_global
            x, k, v = layer(x, cos, sin, mask_local if sliding else mask_global, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        logits = self.lm_head(self.norm(x))
        if c.final_softcap:
            logits = softcap(logits, c.final_softcap)
        return (logits, *presents)


# ----------------------------------------------------------------------------
# phi3 (Phi-3-mini, Phi-3.5-mini, Phi-4-mini)
# ----------------------------------------------------------------------------

class Phi3Rope(RopeComputed):
    """RopeComputed over the rotated dims; with LongRoPE the short factors divide
    the frequencies and the attention factor scales cos and sin (a traced
    export keeps the short factors: its positions lie within the pretraining
    context)."""

    def __init__(self, cfg, rot_dim):
        super().__init__(rot_dim, cfg.rope_theta, cfg.max_pos)
        self.mscale = 1.0
        if cfg.original_max_pos:
            self.inv_freq = self.inv_freq / torch.tensor(hf_models.longrope_short_factor(rot_dim))
            self.mscale = hf_models.longrope_mscale(cfg)

    def forward(self, position_ids):
        cos, sin = super().forward(position_ids)
        if self.mscale == 1.0:
            return cos, sin
        return cos * self.mscale, sin * self.mscale


class Phi3Attention(nn.Module):
    """q, k and v from one packed qkv_proj, split along the last axis."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d = cfg.head_dim
        self.sizes = [cfg.heads * d, cfg.kv_heads * d, cfg.kv_heads * d]
        self.rot_dim = int(d * cfg.rotary_fraction)
        self.qkv_proj = nn.Linear(cfg.hidden, sum(self.sizes), bias=False)
        self.o_proj = nn.Linear(cfg.heads * d, cfg.hidden, bias=False)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        c = self.cfg
        q, k, v = self.qkv_proj(x).split(self.sizes, dim=-1)
        q = split_heads(q, c.heads, c.head_dim)
        k = split_heads(k, c.kv_heads, c.head_dim)
        v = split_heads(v, c.kv_heads, c.head_dim)
        if self.rot_dim < c.head_dim:
            q, k = sliced_rope(q, k, cos, sin, self.rot_dim)
        else:
            q, k = apply_rope(q, k, cos, sin)
        k, v = append_past(past_k, past_v, k, v)
        out = attend(q, k, v, mask, c.heads // c.kv_heads, c.head_dim)
        return self.o_proj(merge_heads(out)), k, v


class Phi3MLP(nn.Module):
    """gate and up from one packed gate_up_proj, chunked in two."""

    def __init__(self, cfg):
        super().__init__()
        self.gate_up_proj = nn.Linear(cfg.hidden, 2 * cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(up * F.silu(gate))


class Phi3Layer(LlamaLayer):
    def __init__(self, cfg):
        nn.Module.__init__(self)
        self.input_layernorm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.self_attn = Phi3Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.mlp = Phi3MLP(cfg)


class Phi3Model(LlamaModel):
    """LlamaModel's forward over Phi3Layers; lm_head tied when cfg.tied."""

    def __init__(self, cfg):
        nn.Module.__init__(self)
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.rope = Phi3Rope(cfg, int(cfg.head_dim * cfg.rotary_fraction))
        self.layers = nn.ModuleList(Phi3Layer(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.embed_tokens.weight


# ----------------------------------------------------------------------------
# LoRA adapters
# ----------------------------------------------------------------------------

LORA_RANK = 4
LORA_SCALE = 0.5
# The projections that get an adapter: q and v (gpt2 computes q, k, v in one
# c_attn projection, so its adapter sits on c_attn).
LORA_TARGETS = ("q_proj", "v_proj", "c_attn")


class LoraLinear(nn.Module):
    """base(x) + x (B A)^T * scale, in the naive order: the dense out x in
    product B @ A is formed first (llmc's lora-reorder pass undoes that)."""

    def __init__(self, base, rank, scale):
        super().__init__()
        self.base = base
        self.lora_a = nn.Parameter(torch.zeros(rank, base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = scale

    def forward(self, x):
        return self.base(x) + torch.matmul(x, (self.lora_b @ self.lora_a).t()) * self.scale


@torch.no_grad()
def add_lora(model, seed):
    """Wraps every LORA_TARGETS Linear in a LoraLinear with random A and B.

    B is nonzero (unlike training's zero init) so the bypass changes the
    logits.  A separate generator leaves the base weights as without --lora.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    targets = [(name, m) for name, m in model.named_modules()
               if name.rsplit(".", 1)[-1] in LORA_TARGETS and isinstance(m, nn.Linear)]
    for name, linear in targets:
        parent_name, _, attr = name.rpartition(".")
        lora = LoraLinear(linear, LORA_RANK, LORA_SCALE)
        lora.lora_a.copy_(torch.randn(lora.lora_a.shape, generator=gen) / math.sqrt(linear.in_features))
        lora.lora_b.copy_(torch.randn(lora.lora_b.shape, generator=gen) / math.sqrt(LORA_RANK))
        setattr(model.get_submodule(parent_name), attr, lora)


def build_model(family, cfg):
    if family in SMALL_FAMILIES:
        return SmallFamilyModel(cfg)
    if family == "llama":
        return LlamaModel(cfg, qkv_bias=False, rope_cls=RopeComputed)
    if family == "qwen2":
        return LlamaModel(cfg, qkv_bias=True, rope_cls=RopeCached)
    if family == "qwen3":
        return LlamaModel(cfg, qkv_bias=False, rope_cls=RopeComputed, qk_norm=True)
    if family == "mistral":
        return LlamaModel(cfg, qkv_bias=False, rope_cls=RopeComputed)
    if family == "gpt2":
        return GPT2Model(cfg)
    if family == "phi":
        return PhiModel(cfg)
    if family == "phi3":
        return Phi3Model(cfg)
    if family in GEMMA_FAMILIES:
        return GemmaModel(cfg, qk_norm=family == "gemma3", tied=family == "gemma3")
    raise ValueError(family)


# ----------------------------------------------------------------------------
# Weights, export
# ----------------------------------------------------------------------------

# HF-style models keep the decoder under model. (llama, qwen2, phi) or transformer. (gpt2).
HF_PREFIX = re.compile(r"^(model|transformer)\.")


@torch.no_grad()
def randomize_weights(model, seed, fan_in_dim=1, tied=("wte.weight", "ln_f.weight")):
    """Seeded random weights scaled so a random model gives O(1..10) logits.

    Linear weights ~ N(0, 1/in_features) keep the residual stream at unit scale
    through the layers, so attention/MLP outputs matter as much as the embedding
    and greedy decoding does not collapse onto one token. A tied lm_head (GPT-2;
    Qwen2 in the hf style) is special: a dominant token embedding makes every
    token predict itself, so the embedding tied[0] is small (std 0.02 as in
    GPT-2's init) and the final norm tied[1] gets a gain of ~10 to bring the
    logits back to O(1..10). Other norm weights are near 1 and biases small but
    nonzero so they are exercised.

    fan_in_dim is 0 for weights stored [in, out] (HF GPT-2's Conv1D). Tied
    weights appear once, under their first name (the embedding's).
    """
    gen = torch.Generator().manual_seed(seed)

    def normal_(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=gen) * std + mean)

    for name, p in model.named_parameters():
        name = HF_PREFIX.sub("", name)
        if name == tied[0]:
            normal_(p, 0.02)
        elif name == tied[1]:
            normal_(p, 1.0, mean=10.0)
        elif name == "wpe.weight":
            normal_(p, 1.0)
        elif name == "embed_tokens.weight":
            normal_(p, 1.0)
        elif p.dim() == 2:
            normal_(p, 1.0 / math.sqrt(p.shape[fan_in_dim]))
        elif name.endswith("bias"):
            normal_(p, 0.05)
        else:  # norm scales
            normal_(p, 0.1, mean=1.0)


def plain_init_options(family):
    """randomize_weights options for the plain models: the tied lm_heads."""
    if family in ("qwen3", "phi3", "gemma3") or (family in SMALL_FAMILIES and make_config(family, "tiny").opts.tied):
        return {"tied": ("embed_tokens.weight", "norm.weight")}
    return {}


def example_inputs(cfg, batch=3, past=5, seq=7):
    """Trace inputs; distinct nonzero sizes so no dimension gets specialized."""
    gen = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, cfg.vocab, (batch, seq), generator=gen)
    attention_mask = torch.ones((batch, past + seq), dtype=torch.int64)
    position_ids = torch.arange(past, past + seq).unsqueeze(0).expand(batch, seq).contiguous()
    kv_shape = (batch, cfg.kv_heads, past, cfg.head_dim)
    pasts = []
    for _ in range(cfg.layers):
        pasts += [torch.randn(kv_shape, generator=gen), torch.randn(kv_shape, generator=gen)]
    return (input_ids, attention_mask, position_ids, *pasts)


def io_names(cfg):
    inputs = ["input_ids", "attention_mask", "position_ids"]
    outputs = ["logits"]
    dyn = {"input_ids": {0: "batch", 1: "sequence"},
           "attention_mask": {0: "batch", 1: "total_sequence"},
           "position_ids": {0: "batch", 1: "sequence"},
           "logits": {0: "batch", 1: "sequence"}}
    for i in range(cfg.layers):
        for kind in ("key", "value"):
            past, present = f"past_key_values.{i}.{kind}", f"present.{i}.{kind}"
            inputs.append(past)
            outputs.append(present)
            dyn[past] = {0: "batch", 2: "past_sequence"}
            dyn[present] = {0: "batch", 2: "total_sequence"}
    return inputs, outputs, dyn


def name_per_tensor_files(model):
    """Give every external initializer a deterministic, filesystem-safe file name.

    onnx's convert_model_to_external_data names a per-tensor file after the
    tensor, but falls back to a random uuid1 for names it considers invalid
    (e.g. torch's "onnx::MatMul_123"), which would break byte-identical output.
    """
    from onnx.external_data_helper import set_external_data, uses_external_data
    used = set()
    for tensor in model.graph.initializer:
        if not uses_external_data(tensor):
            continue
        location = re.sub(r"[^A-Za-z0-9._-]", "_", tensor.name).lstrip(".") or "tensor"
        while location in used:
            location += "_"
        used.add(location)
        set_external_data(tensor, location)


def resave_external(path, mode):
    """Re-save with external data: one .data file or one file per tensor.

    Only initializers move out (size_threshold=0: all of them); Constant node
    attributes stay inline.
    """
    import onnx
    from onnx.external_data_helper import (ExternalDataInfo, convert_model_to_external_data,
                                           uses_external_data)
    model = onnx.load(path)
    if mode == "single":
        convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                       location=os.path.basename(path) + ".data",
                                       size_threshold=0)
    else:
        convert_model_to_external_data(model, all_tensors_to_one_file=False, size_threshold=0)
        name_per_tensor_files(model)
    # onnx appends to existing data files, so remove leftovers of earlier runs.
    out_dir = os.path.dirname(os.path.abspath(path))
    for tensor in model.graph.initializer:
        if uses_external_data(tensor):
            stale = os.path.join(out_dir, ExternalDataInfo(tensor).location)
            if os.path.exists(stale):
                os.remove(stale)
    onnx.save_model(model, path)  # writes the external files next to path


def summarize(path, family, opset, model):
    import onnx
    proto = onnx.load(path, load_external_data=False)
    params = sum(p.numel() for p in model.parameters())
    print(f"export_llm: family={family} opset={opset} nodes={len(proto.graph.node)} "
          f"initializers={len(proto.graph.initializer)} params={params} out={path}",
          file=sys.stderr)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=FAMILIES, required=True)
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--size", choices=("tiny", "fuzz", "qwen2-0.5b", "qwen3-0.6b", "tiny-phi4") + SMALL_SIZES, default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--external", choices=("none", "per-tensor", "single"), default="none")
    ap.add_argument("--layers", type=int, help="number of decoder layers (default: the size's)")
    ap.add_argument("--lora", action="store_true",
                    help=f"rank-{LORA_RANK} LoRA adapters on {', '.join(LORA_TARGETS)} of every layer")
    ap.add_argument("--mask", choices=("range", "triu", "where-additive"), default="range",
                    help="plain style's causal mask: Range comparisons (default), torch.triu "
                         "(llama, qwen2, phi), or Where(bias, 0, -1e9) added to the scores (gpt2)")
    ap.add_argument("--style", choices=("plain", "hf"), default="plain",
                    help="plain: this file's models; hf: Hugging Face-shaped graphs (hf_models.py)")
    ap.add_argument("--attn", choices=("eager", "sdpa"), default="eager",
                    help="--style hf attention of llama and qwen2: eager (default) or sdpa")
    ap.add_argument("--rotary-slice", choices=("none", "cat", "only"), default="none",
                    help="llama/qwen2: rotate q[..., :head_dim] as partial-rotary code writes "
                         "rotary fraction 1.0, and concatenate the empty q[..., head_dim:] back "
                         "(cat) or not (only)")
    ap.add_argument("--act", choices=("default", "gelu_tanh"), default="default",
                    help="gpt2/phi plain MLP activation: the family's own (default) or "
                         "F.gelu(approximate='tanh')")
    ap.add_argument("--rotary-fraction", type=float,
                    help="hf phi: the share of each head that rotates (default 0.5, PhiConfig's)")
    ap.add_argument("--max-positions", type=int,
                    help="rows of the position tables (learned positions, cached RoPE; "
                         "default: the size's)")
    ap.add_argument("--no-past", action="store_true",
                    help="no past_key_values inputs: the graph appends to an empty cache "
                         "(optimum's decoder_model.onnx, the else branch of a merged decoder)")
    ap.add_argument("--torch-logits-out", metavar="FILE",
                    help="also decode greedily in PyTorch and write the logits rows as "
                         "scripts/ort_generate.js --logits-out does (needs --prompt-ids)")
    ap.add_argument("--prompt-ids", help="comma-separated prompt token ids for --torch-logits-out")
    ap.add_argument("--max-new", type=int, default=8, help="tokens to generate for --torch-logits-out")
    args = ap.parse_args(argv)
    if args.style == "hf" and (args.lora or args.mask != "range"):
        ap.error("--lora and --mask are only available with --style plain")
    if (args.mask == "where-additive") != (args.family == "gpt2" and args.mask != "range"):
        ap.error(f"--mask {args.mask} does not apply to family {args.family}")
    if args.attn == "sdpa" and (args.style != "hf" or args.family not in ("llama", "qwen2")):
        ap.error("--attn sdpa applies to --style hf llama and qwen2")
    if args.rotary_slice != "none" and (args.style != "plain" or args.family not in ("llama", "qwen2")):
        ap.error("--rotary-slice applies to --style plain llama and qwen2")
    if args.act != "default" and (args.style != "plain" or args.family not in ("gpt2", "phi")):
        ap.error("--act applies to --style plain gpt2 and phi")
    if args.rotary_fraction is not None and (args.style != "hf" or args.family != "phi"):
        ap.error("--rotary-fraction applies to --style hf phi")
    if args.size == "tiny-phi4" and args.family != "phi3":
        ap.error("--size tiny-phi4 applies to family phi3")
    if args.torch_logits_out and not args.prompt_ids:
        ap.error("--torch-logits-out needs --prompt-ids")
    return args


def torch_opset(opset):
    """The opset torch.onnx.export writes for --opset: at most its newest."""
    from torch.onnx import _constants
    return min(opset, _constants.ONNX_MAX_OPSET)


def raise_opset(path, opset):
    """Raises the export to --opset when torch wrote an older one."""
    import onnx
    proto = onnx.load(path, load_external_data=False)
    onnx.save(onnx_opset_upgrade.upgrade(proto, opset), path)


def export_plain(model, cfg, args):
    inputs, outputs, dyn = io_names(cfg)
    with torch.no_grad():
        # Models > 2 GiB are written by torch with one external file per tensor.
        torch.onnx.export(model, example_inputs(cfg), args.out,
                          input_names=inputs, output_names=outputs, dynamic_axes=dyn,
                          opset_version=torch_opset(args.opset),
                          # torch's folding would replace B @ A by the dense
                          # delta; LoRA exports keep it for lora-reorder.
                          do_constant_folding=not args.lora)


def export_hf(model, cfg, args):
    """As optimum exports text-generation-with-past: batch-2 dummy inputs, the
    cache as a tuple of (key, value) per layer, constant folding on."""
    inputs, outputs, dyn = hf_models.hf_io_names(args.family, cfg)
    input_ids, attention_mask, position_ids, *past = example_inputs(cfg, batch=2)
    dummy = hf_models.hf_args(args.family, input_ids, attention_mask, position_ids, past)
    with torch.no_grad():
        torch.onnx.export(model, dummy, args.out,
                          input_names=inputs, output_names=outputs, dynamic_axes=dyn,
                          opset_version=torch_opset(args.opset), do_constant_folding=True)


class NoPast(torch.nn.Module):
    """The model on (input_ids, attention_mask, position_ids) alone: its past
    is an empty cache made in the graph, so the presents hold the prompt."""

    def __init__(self, model, cfg, family, style):
        super().__init__()
        self.model, self.cfg, self.family, self.style = model, cfg, family, style

    def forward(self, input_ids, attention_mask, position_ids):
        # [batch, kv_heads, 0, head_dim] by broadcasting, so that ONNX shape
        # inference keeps kv_heads and head_dim static in the present outputs
        empty = input_ids[:, None, :0, None].float().expand(-1, self.cfg.kv_heads, -1, self.cfg.head_dim)
        logits, presents = forward_step(self.model, self.family, self.style, input_ids, attention_mask,
                                        position_ids, [empty] * (2 * self.cfg.layers))
        return (logits, *presents)


def export_no_past(model, cfg, args):
    """--no-past: the interface of the style's export without the past inputs."""
    if args.style == "hf":
        inputs, outputs, dyn = hf_models.hf_io_names(args.family, cfg)
    else:
        inputs, outputs, dyn = io_names(cfg)
    inputs = [name for name in inputs if not name.startswith("past_key_values.")]
    input_ids, attention_mask, position_ids, *_ = example_inputs(cfg, past=0)
    with torch.no_grad():
        torch.onnx.export(NoPast(model, cfg, args.family, args.style), (input_ids, attention_mask, position_ids),
                          args.out, input_names=inputs, output_names=outputs,
                          dynamic_axes={k: v for k, v in dyn.items() if k in inputs + outputs},
                          opset_version=args.opset, do_constant_folding=True)


def forward_step(model, family, style, input_ids, attention_mask, position_ids, past):
    """One forward on a flat past list; returns (logits, flat presents)."""
    if style == "plain":
        logits, *presents = model(input_ids, attention_mask, position_ids, *past)
        return logits, presents
    logits, presents = model(*hf_models.hf_args(family, input_ids, attention_mask,
                                                position_ids, past))
    return logits, [t for kv in presents for t in kv]


@torch.no_grad()
def torch_generate(model, cfg, family, style, prompt, max_new):
    """Greedy decoding in PyTorch eager, fed as scripts/ort_generate.js feeds
    ONNX Runtime (batch 1, empty past first); returns the logits rows."""
    past = [torch.zeros((1, cfg.kv_heads, 0, cfg.head_dim))] * (2 * cfg.layers)
    tokens, past_len, rows = prompt, 0, []
    for _ in range(max_new):
        seq = len(tokens)
        logits, past = forward_step(
            model, family, style, torch.tensor([tokens]),
            torch.ones((1, past_len + seq), dtype=torch.int64),
            torch.arange(past_len, past_len + seq).unsqueeze(0), past)
        row = logits[0, -1].float()
        rows.append(row)
        past_len += seq
        tokens = [int(torch.argmax(row))]  # first maximum, as ort_generate.js
    return rows


def write_rows(path, rows):
    with open(path, "wb") as f:
        for row in rows:
            f.write(row.numpy().astype("<f4").tobytes())


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    cfg = make_config(args.family, args.size)
    if args.layers is not None:
        cfg.layers = args.layers
    cfg.mask = args.mask
    cfg.attn = args.attn
    cfg.rotary_slice = args.rotary_slice
    cfg.act = args.act
    if args.rotary_fraction is not None:
        cfg.rotary_fraction = args.rotary_fraction
    if args.max_positions is not None:
        cfg.max_pos = args.max_positions
    if args.style == "hf":
        model = hf_models.build_hf_model(args.family, cfg).eval()
        randomize_weights(model, args.seed, **hf_models.init_options(args.family))
    else:
        model = build_model(args.family, cfg).eval()
        randomize_weights(model, args.seed, **plain_init_options(args.family))
    if args.lora:
        add_lora(model, args.seed)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    if args.no_past:
        export_no_past(model, cfg, args)
    else:
        (export_hf if args.style == "hf" else export_plain)(model, cfg, args)
    if torch_opset(args.opset) < args.opset:
        raise_opset(args.out, args.opset)
    if args.external != "none":
        resave_external(args.out, args.external)
    summarize(args.out, args.family, args.opset, model)
    if args.torch_logits_out:
        prompt = [int(t) for t in args.prompt_ids.split(",") if t]
        write_rows(args.torch_logits_out,
                   torch_generate(model, cfg, args.family, args.style, prompt, args.max_new))


if __name__ == "__main__":
    main()
