"""Hugging Face-shaped models for export_llm.py --style hf.

Ports of the eager forward passes of transformers 4.44/4.45 (modeling_llama.py,
modeling_qwen2.py, modeling_phi.py, modeling_gpt2.py) and of modeling_qwen3.py,
modeling_phi3.py (4.49), modeling_gemma2.py and modeling_gemma3.py (text model),
written without the
transformers library, so that torch.onnx.export writes the graph shapes the
ecosystem's exports (optimum's `text-generation-with-past`) contain: the 4-D
causal mask built with Trilu and an in-place ScatterND, RoPE cos/sin computed
at run time from position_ids, repeat_kv by Expand+Reshape, GPT-2's Conv1D
(Gemm) and `bias` buffer with torch.where.

Only what shapes the graph is ported: no dropout (identity in eval), no
flash/sdpa paths, no Cache classes. The KV cache is optimum's legacy form, a
tuple of (key, value) per layer; appending works like DynamicCache.update
(torch.cat on dim -2).

Parameter names follow the HF state dicts (model.layers.0.self_attn.q_proj,
transformer.h.0.attn.c_attn, lm_head, ...). `cfg` is export_llm.Config.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# LlamaForCausalLM/Qwen2ForCausalLM.forward's default: 0 keeps every position.
NUM_LOGITS_TO_KEEP = 0


# ----------------------------------------------------------------------------
# Shared pieces (modeling_llama.py; Qwen2 and Phi copy them)
# ----------------------------------------------------------------------------

class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def default_rope_parameters(cfg, partial_rotary_factor):
    """modeling_rope_utils._compute_default_rope_parameters: (inv_freq, attention_factor)."""
    dim = int(cfg.head_dim * partial_rotary_factor)
    base = cfg.rope_theta
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    return inv_freq, 1.0


class LlamaRotaryEmbedding(nn.Module):
    """rope_type "default" (or rope_init's); called once per forward at model
    level (position_embeddings)."""

    def __init__(self, cfg, partial_rotary_factor=1.0, rope_init=default_rope_parameters):
        super().__init__()
        inv_freq, self.attention_scaling = rope_init(cfg, partial_rotary_factor)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        # HF disables autocast here; a no-op for this float32 CPU export.
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        # Scaled RoPE types post-scale; the default's factor 1.0 still leaves a Mul.
        cos = cos * self.attention_scaling
        sin = sin * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def cache_update(layer_past, key_states, value_states):
    """DynamicCache.update on a layer that already holds the past (legacy input)."""
    past_key, past_value = layer_past
    return torch.cat([past_key, key_states], dim=-2), torch.cat([past_value, value_states], dim=-2)


def prepare_4d_causal_attention_mask_with_cache_position(
        attention_mask, sequence_length, target_length, dtype, min_dtype, cache_position, batch_size):
    """The 2-D attention_mask branch of HF's function of the same name."""
    causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype, dtype=dtype)
    # Traced with sequence_length > 1, so the Trilu is always in the graph.
    if sequence_length != 1:
        causal_mask = torch.triu(causal_mask, diagonal=1)
    causal_mask *= torch.arange(target_length) > cache_position.reshape(-1, 1)
    return merge_padding(causal_mask, attention_mask, min_dtype, batch_size)


def merge_padding(causal_mask, attention_mask, min_dtype, batch_size):
    """The 2-D attention_mask's padding merged into the [S, T] causal mask
    in place, as transformers' _prepare_4d_... functions do."""
    causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
    causal_mask = causal_mask.clone()  # copy to contiguous memory for in-place edit
    mask_length = attention_mask.shape[-1]
    padding_mask = causal_mask[:, :, :, :mask_length] + attention_mask[:, None, None, :]
    padding_mask = padding_mask == 0
    # In-place slice assignment: exported as ScatterND.
    causal_mask[:, :, :, :mask_length] = causal_mask[:, :, :, :mask_length].masked_fill(
        padding_mask, min_dtype)
    return causal_mask


def update_causal_mask(attention_mask, input_tensor, cache_position):
    """LlamaModel._update_causal_mask, eager attention, 2-D mask, dynamic cache."""
    dtype = input_tensor.dtype
    min_dtype = torch.finfo(dtype).min
    sequence_length = input_tensor.shape[1]
    target_length = attention_mask.shape[-1]
    return prepare_4d_causal_attention_mask_with_cache_position(
        attention_mask, sequence_length=sequence_length, target_length=target_length,
        dtype=dtype, min_dtype=min_dtype, cache_position=cache_position,
        batch_size=input_tensor.shape[0])


def mistral_causal_mask(attention_mask, input_tensor, cache_position, sliding_window):
    """MistralModel._update_causal_mask (transformers 4.45, eager, 2-D mask,
    DynamicCache): _prepare_4d_causal_attention_mask_with_cache_position
    with the sliding-window term, key j masked when j <= i - sliding_window."""
    dtype = input_tensor.dtype
    min_dtype = torch.finfo(dtype).min
    sequence_length, target_length = input_tensor.shape[1], attention_mask.shape[-1]
    causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype, dtype=dtype)
    diagonal_attend_mask = torch.arange(target_length) > cache_position.reshape(-1, 1)
    sliding_attend_mask = torch.arange(target_length) <= (cache_position.reshape(-1, 1) - sliding_window)
    diagonal_attend_mask = diagonal_attend_mask | sliding_attend_mask
    causal_mask = causal_mask * diagonal_attend_mask
    return merge_padding(causal_mask, attention_mask, min_dtype, input_tensor.shape[0])


def sdpa_causal_mask(attention_mask, cache_position, batch_size):
    """masking_utils.sdpa_mask_older_torch (transformers >= 4.53) for a
    DynamicCache (kv_offset 0): bool [B, 1, S, T], True where the key takes
    part.  The 2-D mask arrives as bool (_preprocess_mask_arguments)."""
    attention_mask = attention_mask.bool()
    kv_length = attention_mask.shape[-1]
    # prepare_padding_mask(_slice=True): the arange gather, not a Slice
    mask_indices = torch.arange(kv_length)
    padding_mask = attention_mask[:, mask_indices]
    kv_arange = torch.arange(kv_length)
    causal_mask = kv_arange[None, :] <= cache_position[:, None]   # causal_mask_function
    causal_mask = causal_mask[None, None, :, :].expand(batch_size, -1, -1, -1)
    causal_mask = causal_mask * padding_mask[:, None, None, :]
    # allow_torch_fix: a row with no key at all attends to every key (no nan)
    return causal_mask | torch.all(~causal_mask, dim=-1, keepdim=True)


def sdpa(query, key, value, attn_mask, scale):
    """F.scaled_dot_product_attention as torch.onnx exports it (the opset-14
    symbolic of torch >= 2.1), written with torch 1.13 ops so that tracing
    gives the same graph: sqrt(scale) multiplied into q and into k^T, the
    bool mask turned into Where(mask, 0, -inf) and added."""
    sqrt_scale = torch.sqrt(torch.tensor(scale, dtype=query.dtype))
    scores = torch.matmul(query * sqrt_scale, key.transpose(-2, -1) * sqrt_scale)
    scores = scores + torch.where(attn_mask, torch.tensor([0.0]), torch.tensor([-math.inf]))
    return torch.matmul(torch.softmax(scores, dim=-1), value)


def cache_position_for(past_key_values, inputs_embeds):
    # DynamicCache.get_seq_length(): layer 0's cached length.
    past_seen_tokens = past_key_values[0][0].shape[-2]
    return torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1])


# ----------------------------------------------------------------------------
# llama / qwen2 / qwen3 (modeling_llama.py; modeling_qwen2.py differs only in
# biases, modeling_qwen3.py in q_norm/k_norm and an explicit head_dim)
# ----------------------------------------------------------------------------

class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    """Eager attention. qkv_bias: Qwen2Attention's q/k/v biases (o_proj has none).
    qk_norm: Qwen3Attention's q_norm/k_norm, RMSNorm over head_dim before the transpose."""

    def __init__(self, cfg, qkv_bias, qk_norm=False):
        super().__init__()
        self.sdpa = cfg.attn == "sdpa"
        self.num_heads = cfg.heads
        self.head_dim = cfg.head_dim
        self.num_key_value_heads = cfg.kv_heads
        self.num_key_value_groups = cfg.heads // cfg.kv_heads
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)
        self.qk_norm = qk_norm
        if qk_norm:
            self.q_norm = LlamaRMSNorm(cfg.head_dim, eps=cfg.norm_eps)
            self.k_norm = LlamaRMSNorm(cfg.head_dim, eps=cfg.norm_eps)

    def forward(self, hidden_states, attention_mask, past_key_value, position_embeddings):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim)
        if self.qk_norm:
            query_states = self.q_norm(query_states)
        query_states = query_states.transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim)
        if self.qk_norm:
            key_states = self.k_norm(key_states)
        key_states = key_states.transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states, value_states = cache_update(past_key_value, key_states, value_states)
        present = (key_states, value_states)

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        if self.sdpa:  # integrations/sdpa_attention.py: scale = head_dim**-0.5
            causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
            attn_output = sdpa(query_states, key_states, value_states, causal_mask, self.head_dim ** -0.5)
        else:
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
            causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
            attn_weights = attn_weights + causal_mask
            # upcast attention to fp32
            attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
            attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), present


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg, qkv_bias, qk_norm):
        super().__init__()
        self.self_attn = LlamaAttention(cfg, qkv_bias, qk_norm)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)

    def forward(self, hidden_states, attention_mask, past_key_value, position_embeddings):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, attention_mask, past_key_value,
                                                position_embeddings)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states, present


class LlamaModel(nn.Module):
    def __init__(self, cfg, qkv_bias, qk_norm):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg, qkv_bias, qk_norm) for _ in range(cfg.layers))
        self.norm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(cfg)
        self.sdpa = cfg.attn == "sdpa"
        self.sliding_window = cfg.sliding_window

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        inputs_embeds = self.embed_tokens(input_ids)
        cache_position = cache_position_for(past_key_values, inputs_embeds)
        if self.sliding_window:  # MistralModel
            causal_mask = mistral_causal_mask(attention_mask, inputs_embeds, cache_position, self.sliding_window)
        elif self.sdpa:
            causal_mask = sdpa_causal_mask(attention_mask, cache_position, inputs_embeds.shape[0])
        else:
            causal_mask = update_causal_mask(attention_mask, inputs_embeds, cache_position)
        hidden_states = inputs_embeds
        # create position embeddings to be shared across the decoder layers
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        presents = []
        for decoder_layer, layer_past in zip(self.layers, past_key_values):
            hidden_states, present = decoder_layer(hidden_states, causal_mask, layer_past,
                                                   position_embeddings)
            presents.append(present)
        hidden_states = self.norm(hidden_states)
        return hidden_states, tuple(presents)


class LlamaForCausalLM(nn.Module):
    """LlamaForCausalLM (qkv_bias False), Qwen2ForCausalLM (qkv_bias True) or
    Qwen3ForCausalLM (qk_norm True).

    tie_word_embeddings shares lm_head.weight with embed_tokens (Qwen2-0.5B, Qwen3-0.6B).
    """

    def __init__(self, cfg, qkv_bias, tie_word_embeddings, qk_norm=False):
        super().__init__()
        self.model = LlamaModel(cfg, qkv_bias, qk_norm)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        hidden_states, presents = self.model(input_ids, attention_mask, position_ids, past_key_values)
        logits = self.lm_head(hidden_states[:, -NUM_LOGITS_TO_KEEP:, :]).float()
        return logits, presents


# ----------------------------------------------------------------------------
# phi (modeling_phi.py)
# ----------------------------------------------------------------------------

class NewGELUActivation(nn.Module):
    """gelu_new (PhiConfig.hidden_act, GPT2Config.activation_function): tanh GELU."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class PhiMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.activation_fn = NewGELUActivation()
        self.fc1 = nn.Linear(cfg.hidden, cfg.intermediate)
        self.fc2 = nn.Linear(cfg.intermediate, cfg.hidden)

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        return self.fc2(hidden_states)


class PhiAttention(nn.Module):
    """Eager attention with partial RoPE; qk_layernorm is off (PhiConfig default)."""

    def __init__(self, cfg):
        super().__init__()
        self.hidden_size = cfg.hidden
        self.num_heads = cfg.heads
        self.head_dim = cfg.head_dim
        self.num_key_value_heads = cfg.kv_heads
        self.num_key_value_groups = cfg.heads // cfg.kv_heads
        # PhiConfig.partial_rotary_factor: 0.5 by default (phi-2)
        self.rotary_ndims = int(self.head_dim * cfg.rotary_fraction)
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=True)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=True)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=True)
        self.dense = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=True)

    def partial_rotary(self, query_states, key_states, cos, sin):
        query_rot, query_pass = (query_states[..., : self.rotary_ndims],
                                 query_states[..., self.rotary_ndims:])
        key_rot, key_pass = (key_states[..., : self.rotary_ndims],
                             key_states[..., self.rotary_ndims:])
        query_rot, key_rot = apply_rotary_pos_emb(query_rot, key_rot, cos, sin)
        query_states = torch.cat((query_rot, query_pass), dim=-1)
        key_states = torch.cat((key_rot, key_pass), dim=-1)
        return query_states, key_states

    def forward(self, hidden_states, attention_mask, past_key_value, position_embeddings):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        cos, sin = position_embeddings
        query_states, key_states = self.partial_rotary(query_states, key_states, cos, sin)
        key_states, value_states = cache_update(past_key_value, key_states, value_states)
        present = (key_states, value_states)

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        # Queries and keys upcast to fp32 is required by Phi-2 to avoid overflow
        attn_weights = torch.matmul(
            query_states.to(torch.float32), key_states.to(torch.float32).transpose(2, 3)
        ) / math.sqrt(self.head_dim)
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights += causal_mask
        # upcast attention to fp32
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(value_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        return self.dense(attn_output), present


class PhiDecoderLayer(nn.Module):
    """Attention and MLP in parallel on one layernorm's output."""

    def __init__(self, cfg):
        super().__init__()
        self.self_attn = PhiAttention(cfg)
        self.mlp = PhiMLP(cfg)
        self.input_layernorm = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)

    def forward(self, hidden_states, attention_mask, past_key_value, position_embeddings):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        attn_outputs, present = self.self_attn(hidden_states, attention_mask, past_key_value,
                                               position_embeddings)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = attn_outputs + feed_forward_hidden_states + residual
        return hidden_states, present


class PhiModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(PhiDecoderLayer(cfg) for _ in range(cfg.layers))
        self.final_layernorm = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(cfg, cfg.rotary_fraction)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        inputs_embeds = self.embed_tokens(input_ids)
        cache_position = cache_position_for(past_key_values, inputs_embeds)
        causal_mask = update_causal_mask(attention_mask, inputs_embeds, cache_position)
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        presents = []
        for decoder_layer, layer_past in zip(self.layers, past_key_values):
            hidden_states, present = decoder_layer(hidden_states, causal_mask, layer_past,
                                                   position_embeddings)
            presents.append(present)
        hidden_states = self.final_layernorm(hidden_states)
        return hidden_states, tuple(presents)


class PhiForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model = PhiModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=True)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        hidden_states, presents = self.model(input_ids, attention_mask, position_ids, past_key_values)
        logits = self.lm_head(hidden_states[:, -NUM_LOGITS_TO_KEEP:, :])
        logits = logits.float()
        return logits, presents


# ----------------------------------------------------------------------------
# gpt2 (modeling_gpt2.py, pytorch_utils.Conv1D)
# ----------------------------------------------------------------------------

class Conv1D(nn.Module):
    """A linear layer with its weight stored [in, out]; exported as Reshape, Gemm, Reshape."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        max_positions = cfg.max_pos
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False)
        self.embed_dim = cfg.hidden
        self.num_heads = cfg.heads
        self.head_dim = cfg.head_dim
        self.split_size = cfg.hidden
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def _attn(self, query, key, value, attention_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        # scale_attn_weights
        attn_weights = attn_weights / torch.full(
            [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        # HF: a tensor, or torch.where complains about float vs double.
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = attn_weights + attention_mask
        attn_weights = F.softmax(attn_weights, dim=-1)
        # Downcast back to V's dtype (a no-op in float32)
        attn_weights = attn_weights.type(value.dtype)
        return torch.matmul(attn_weights, value)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (self.num_heads * self.head_dim,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, layer_past, attention_mask):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query)
        key = self._split_heads(key)
        value = self._split_heads(value)
        past_key, past_value = layer_past
        key = torch.cat((past_key, key), dim=-2)
        value = torch.cat((past_value, value), dim=-2)
        present = (key, value)
        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output)
        return self.c_proj(attn_output), present


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Conv1D(cfg.intermediate, cfg.hidden)
        self.c_proj = Conv1D(cfg.hidden, cfg.intermediate)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        return self.c_proj(hidden_states)


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, hidden_states, layer_past, attention_mask):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output, present = self.attn(hidden_states, layer_past, attention_mask)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states, present


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Embedding(cfg.max_pos, cfg.hidden)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)

    def forward(self, input_ids, past_key_values, attention_mask, position_ids):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch_size = input_ids.shape[0]
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds

        attention_mask = attention_mask.view(batch_size, -1)
        # [batch, 1, 1, to_seq]: 0 where attending, the dtype's min elsewhere.
        attention_mask = attention_mask[:, None, None, :]
        attention_mask = attention_mask.to(dtype=hidden_states.dtype)  # fp16 compatibility
        attention_mask = (1.0 - attention_mask) * torch.finfo(hidden_states.dtype).min

        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)
        presents = []
        for block, layer_past in zip(self.h, past_key_values):
            hidden_states, present = block(hidden_states, layer_past, attention_mask)
            presents.append(present)
        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        return hidden_states, tuple(presents)


class GPT2LMHeadModel(nn.Module):
    """lm_head is tied to wte (GPT2Config.tie_word_embeddings)."""

    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    # Argument order is the HF signature's: optimum orders the ONNX inputs by it.
    def forward(self, input_ids, past_key_values, attention_mask, position_ids):
        hidden_states, presents = self.transformer(input_ids, past_key_values, attention_mask,
                                                   position_ids)
        return self.lm_head(hidden_states), presents


# ----------------------------------------------------------------------------
# llama32 / smollm2 (modeling_llama.py), smollm3 (modeling_smollm3.py),
# granite (modeling_granite.py), olmo2 (modeling_olmo2.py); cfg.opts is
# export_llm.FamilyOptions
# ----------------------------------------------------------------------------

def eager_attention(module, query, key, value, attention_mask, scaling, softcap=None):
    """eager_attention_forward of transformers' newer modeling files (Phi-3,
    Granite, OLMo2, SmolLM3, Gemma 3; Gemma 2 with its score softcap)."""
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if softcap is not None:
        attn_weights = attn_weights / softcap
        attn_weights = torch.tanh(attn_weights)
        attn_weights = attn_weights * softcap
    causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
    attn_weights = attn_weights + causal_mask
    # upcast attention to fp32
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous()


TIED_SMALL_FAMILIES = ("llama32", "smollm2", "smollm3", "granite")


def llama3_inv_freq(inv_freq, factor, low_freq_factor, high_freq_factor, old_context_len):
    """modeling_rope_utils._compute_llama3_parameters: only inv_freq changes
    (attention_factor stays 1.0)."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # wavelen < high_freq_wavelen: do nothing; wavelen > low_freq_wavelen: divide by factor
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    # otherwise: interpolate between the two, using a smooth factor
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


class SmallFamilyAttention(LlamaAttention):
    """LlamaAttention's projections; Granite's scaling (attention_multiplier),
    SmolLM3's use_rope (no_rope_layers), OLMo2's q_norm/k_norm over the
    whole projection before the view."""

    def __init__(self, cfg, layer_idx):
        super().__init__(cfg, qkv_bias=False)
        opts = cfg.opts
        self.scaling = opts.scale(cfg.head_dim)
        self.use_rope = opts.uses_rope(layer_idx)
        self.olmo2 = opts.post_norm
        if self.olmo2:
            self.q_norm = LlamaRMSNorm(cfg.heads * cfg.head_dim, eps=cfg.norm_eps)
            self.k_norm = LlamaRMSNorm(cfg.kv_heads * cfg.head_dim, eps=cfg.norm_eps)

    def forward(self, hidden_states, attention_mask, past_key_value, position_embeddings):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        if self.olmo2:
            query_states = self.q_norm(query_states)
            key_states = self.k_norm(key_states)
        query_states = query_states.view(hidden_shape).transpose(1, 2)
        key_states = key_states.view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)

        if self.use_rope:
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states, value_states = cache_update(past_key_value, key_states, value_states)
        present = (key_states, value_states)

        attn_output = eager_attention(self, query_states, key_states, value_states, attention_mask,
                                      self.scaling)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), present


class SmallFamilyDecoderLayer(nn.Module):
    """GraniteDecoderLayer (residual + hidden_states * residual_multiplier;
    1.0 for llama/smollm) or Olmo2DecoderLayer (post-norm, no input norm)."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.post_norm = cfg.opts.post_norm
        self.residual_multiplier = cfg.opts.residual_multiplier
        self.self_attn = SmallFamilyAttention(cfg, layer_idx)
        self.mlp = LlamaMLP(cfg)
        if not self.post_norm:
            self.input_layernorm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        if self.post_norm:
            self.post_feedforward_layernorm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)

    def forward(self, hidden_states, attention_mask, past_key_value, position_embeddings):
        if self.post_norm:
            residual = hidden_states
            hidden_states, present = self.self_attn(hidden_states, attention_mask, past_key_value,
                                                    position_embeddings)
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.mlp(hidden_states)
            hidden_states = self.post_feedforward_layernorm(hidden_states)
            return residual + hidden_states, present
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, attention_mask, past_key_value,
                                                position_embeddings)
        if self.residual_multiplier != 1.0:
            hidden_states = hidden_states * self.residual_multiplier
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        if self.residual_multiplier != 1.0:
            hidden_states = hidden_states * self.residual_multiplier
        return residual + hidden_states, present


class SmallFamilyModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embedding_multiplier = cfg.opts.embedding_multiplier
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(SmallFamilyDecoderLayer(cfg, i) for i in range(cfg.layers))
        self.norm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(cfg)
        if cfg.opts.rope_scaling:
            self.rotary_emb.inv_freq = llama3_inv_freq(self.rotary_emb.inv_freq, *cfg.opts.rope_scaling)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        inputs_embeds = self.embed_tokens(input_ids)
        if self.embedding_multiplier != 1.0:
            inputs_embeds = inputs_embeds * self.embedding_multiplier  # main diff with Llama
        cache_position = cache_position_for(past_key_values, inputs_embeds)
        causal_mask = update_causal_mask(attention_mask, inputs_embeds, cache_position)
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        presents = []
        for decoder_layer, layer_past in zip(self.layers, past_key_values):
            hidden_states, present = decoder_layer(hidden_states, causal_mask, layer_past,
                                                   position_embeddings)
            presents.append(present)
        return self.norm(hidden_states), tuple(presents)


class SmallFamilyForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.logits_scaling = cfg.opts.logits_scaling
        self.model = SmallFamilyModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.opts.tied:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        hidden_states, presents = self.model(input_ids, attention_mask, position_ids, past_key_values)
        logits = self.lm_head(hidden_states[:, -NUM_LOGITS_TO_KEEP:, :])
        if self.logits_scaling != 1.0:
            logits = logits / self.logits_scaling  # GraniteForCausalLM
        return logits.float(), presents


# ----------------------------------------------------------------------------
# phi3 (modeling_phi3.py of transformers >= 4.49, which added Phi-4-mini's
# partial_rotary_factor and moved the rotary embedding to model level; the
# causal mask is Llama's, Phi-3's 2047-token sliding window lies beyond the
# tiny context)
# ----------------------------------------------------------------------------

def longrope_short_factor(rot_dim):
    """rope_scaling's short_factor, one per rotated pair: made-up values rising
    with the pair index as the published ones do (Phi-3.5-mini's run 1.0 .. 3.0)."""
    pairs = rot_dim // 2
    return [1.0 + 2.0 * i / pairs for i in range(pairs)]


def longrope_mscale(cfg):
    """LongRoPE's attention factor on cos and sin: sqrt(1 + ln(s) / ln(original))
    with s = max_position_embeddings / original_max_position_embeddings (1 if s <= 1)."""
    scale = cfg.max_pos / cfg.original_max_pos
    return 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(cfg.original_max_pos))


def longrope_parameters(cfg, partial_rotary_factor):
    """modeling_rope_utils._compute_longrope_parameters: (inv_freq, attention_factor).
    The short factors: the rotary embedding's longrope update picks the long
    ones only when max(position_ids) + 1 exceeds the pretraining context, a
    Python branch a traced export fixes at the dummy inputs' 12 positions."""
    dim = int(cfg.head_dim * partial_rotary_factor)
    ext_factors = torch.tensor(longrope_short_factor(dim), dtype=torch.float32)
    inv_freq_shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    inv_freq = 1.0 / (ext_factors * cfg.rope_theta ** inv_freq_shape)
    return inv_freq, longrope_mscale(cfg)


def phi3_apply_rotary_pos_emb(q, k, cos, sin):
    """Rotates the first cos.shape[-1] dims of each head, passes the rest."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = torch.cat([(q_rot * cos) + (rotate_half(q_rot) * sin), q_pass], dim=-1)
    k_embed = torch.cat([(k_rot * cos) + (rotate_half(k_rot) * sin), k_pass], dim=-1)
    return q_embed, k_embed


class Phi3MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_up_proj = nn.Linear(cfg.hidden, 2 * cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)
        self.activation_fn = nn.SiLU()

    def forward(self, hidden_states):
        up_states = self.gate_up_proj(hidden_states)
        gate, up_states = up_states.chunk(2, dim=-1)
        up_states = up_states * self.activation_fn(gate)
        return self.down_proj(up_states)


class Phi3Attention(nn.Module):
    """Eager attention; q, k and v sliced out of one qkv_proj."""

    def __init__(self, cfg):
        super().__init__()
        self.head_dim = cfg.head_dim
        self.num_heads = cfg.heads
        self.num_key_value_heads = cfg.kv_heads
        self.num_key_value_groups = cfg.heads // cfg.kv_heads
        self.scaling = self.head_dim ** -0.5
        op_size = cfg.heads * self.head_dim + 2 * (cfg.kv_heads * self.head_dim)
        self.o_proj = nn.Linear(cfg.heads * self.head_dim, cfg.hidden, bias=False)
        self.qkv_proj = nn.Linear(cfg.hidden, op_size, bias=False)

    def forward(self, hidden_states, attention_mask, past_key_value, position_embeddings):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)

        qkv = self.qkv_proj(hidden_states)
        query_pos = self.num_heads * self.head_dim
        query_states = qkv[..., :query_pos]
        key_states = qkv[..., query_pos: query_pos + self.num_key_value_heads * self.head_dim]
        value_states = qkv[..., query_pos + self.num_key_value_heads * self.head_dim:]

        query_states = query_states.view(hidden_shape).transpose(1, 2)
        key_states = key_states.view(hidden_shape).transpose(1, 2)
        value_states = value_states.view(hidden_shape).transpose(1, 2)

        cos, sin = position_embeddings
        query_states, key_states = phi3_apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states, value_states = cache_update(past_key_value, key_states, value_states)
        present = (key_states, value_states)

        attn_output = eager_attention(self, query_states, key_states, value_states, attention_mask,
                                      self.scaling)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), present


class Phi3DecoderLayer(LlamaDecoderLayer):
    """Llama's layer (resid_attn_dropout / resid_mlp_dropout are identities in eval)."""

    def __init__(self, cfg):
        nn.Module.__init__(self)
        self.self_attn = Phi3Attention(cfg)
        self.mlp = Phi3MLP(cfg)
        self.input_layernorm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)


class Phi3Model(LlamaModel):
    def __init__(self, cfg):
        nn.Module.__init__(self)
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(Phi3DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = LlamaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        rope_init = longrope_parameters if cfg.original_max_pos else default_rope_parameters
        self.rotary_emb = LlamaRotaryEmbedding(cfg, cfg.rotary_fraction, rope_init)
        self.sdpa = False
        self.sliding_window = 0  # Phi-3's 2047-token window lies beyond the tiny context


class Phi3ForCausalLM(LlamaForCausalLM):
    """tie_word_embeddings: Phi-4-mini (cfg.tied)."""

    def __init__(self, cfg):
        nn.Module.__init__(self)
        self.model = Phi3Model(cfg)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.model.embed_tokens.weight


# ----------------------------------------------------------------------------
# gemma2 / gemma3 (modeling_gemma2.py, modeling_gemma3.py of transformers
# >= 4.53: masks from masking_utils, RoPE at model level; Gemma 3's text model
# with its local RoPE table)
# ----------------------------------------------------------------------------

class GemmaRMSNorm(nn.Module):
    """Gemma2RMSNorm / Gemma3RMSNorm: the weight is an offset from 1."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        # Llama does x.to(float16) * w whilst Gemma is (x * w).to(float16)
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class GemmaMLP(LlamaMLP):
    """hidden_activation gelu_pytorch_tanh (activations.PytorchGELUTanh)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.act_fn = nn.GELU(approximate="tanh")  # a module, as ACT2FN's PytorchGELUTanh


class GemmaRotaryEmbedding(LlamaRotaryEmbedding):
    """Gemma2RotaryEmbedding, or Gemma 3's rotary_emb_local at rope_local_base_freq."""

    def __init__(self, cfg, base):
        nn.Module.__init__(self)
        dim = cfg.head_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.attention_scaling = 1.0
        self.register_buffer("inv_freq", inv_freq, persistent=False)


class GemmaAttention(LlamaAttention):
    """Gemma2Attention, or Gemma3Attention (qk_norm: q_norm/k_norm after the transpose)."""

    def __init__(self, cfg, layer_idx, qk_norm):
        super().__init__(cfg, qkv_bias=False)
        self.scaling = cfg.query_pre_attn_scalar ** -0.5
        self.attn_logit_softcapping = cfg.attn_softcap or None
        self.qk_norm = qk_norm
        if qk_norm:
            self.q_norm = GemmaRMSNorm(cfg.head_dim, eps=cfg.norm_eps)
            self.k_norm = GemmaRMSNorm(cfg.head_dim, eps=cfg.norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_value):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        if self.qk_norm:
            query_states = self.q_norm(query_states)
            key_states = self.k_norm(key_states)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states, value_states = cache_update(past_key_value, key_states, value_states)
        present = (key_states, value_states)
        attn_output = eager_attention(self, query_states, key_states, value_states, attention_mask,
                                            self.scaling, self.attn_logit_softcapping)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), present


class GemmaDecoderLayer(nn.Module):
    def __init__(self, cfg, layer_idx, qk_norm):
        super().__init__()
        # config.layer_types: every sliding_window_pattern-th layer is global
        self.is_sliding = bool((layer_idx + 1) % cfg.sliding_pattern)
        self.self_attn = GemmaAttention(cfg, layer_idx, qk_norm)
        self.mlp = GemmaMLP(cfg)
        self.input_layernorm = GemmaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.post_attention_layernorm = GemmaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.pre_feedforward_layernorm = GemmaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.post_feedforward_layernorm = GemmaRMSNorm(cfg.hidden, eps=cfg.norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_value):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, position_embeddings, attention_mask,
                                                past_key_value)
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.pre_feedforward_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states, present


def gemma_eager_mask(attention_mask, cache_position, batch_size, dtype, sliding_window=None):
    """masking_utils.create_causal_mask / create_sliding_window_causal_mask
    for eager attention: sdpa_mask's bool mask (causal_mask_function, and
    sliding_window_overlay: kv_idx > q_idx - sliding_window) turned into 0 /
    the dtype's min."""
    attention_mask = attention_mask.bool()
    kv_arange = torch.arange(attention_mask.shape[-1])
    q_idx, kv_idx = cache_position[:, None], kv_arange[None, :]
    causal_mask = kv_idx <= q_idx
    if sliding_window is not None:
        causal_mask = causal_mask & (kv_idx > q_idx - sliding_window)
    causal_mask = causal_mask[None, None, :, :].expand(batch_size, -1, -1, -1)
    causal_mask = causal_mask * attention_mask[:, None, None, :]
    # min as a tensor of dtype: torch 1.13 would export a python float as double
    min_dtype = torch.tensor(torch.finfo(dtype).min, dtype=dtype)
    return torch.where(causal_mask, torch.tensor(0.0, dtype=dtype), min_dtype)


class GemmaModel(nn.Module):
    """Gemma2Model (the embedding scaled in forward) or Gemma3TextModel
    (Gemma3TextScaledWordEmbedding, a local RoPE table for sliding layers).
    optimum's Gemma export has no position_ids: they are cache_position."""

    def __init__(self, cfg, gemma3):
        super().__init__()
        self.gemma3 = gemma3
        self.hidden_size = cfg.hidden
        self.sliding_window = cfg.sliding_window
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        if gemma3:
            self.register_buffer("embed_scale", torch.tensor(cfg.hidden ** 0.5), persistent=False)
        self.layers = nn.ModuleList(GemmaDecoderLayer(cfg, i, gemma3) for i in range(cfg.layers))
        self.norm = GemmaRMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.rotary_emb = GemmaRotaryEmbedding(cfg, cfg.rope_theta)
        if gemma3:
            self.rotary_emb_local = GemmaRotaryEmbedding(cfg, cfg.rope_local_theta)

    def embed(self, input_ids):
        if self.gemma3:
            return self.embed_tokens(input_ids) * self.embed_scale.to(self.embed_tokens.weight.dtype)
        return self.embed_tokens(input_ids)

    def forward(self, input_ids, attention_mask, past_key_values):
        inputs_embeds = self.embed(input_ids)
        cache_position = cache_position_for(past_key_values, inputs_embeds)
        position_ids = cache_position.unsqueeze(0)
        batch_size, dtype = inputs_embeds.shape[0], inputs_embeds.dtype
        causal_mask_mapping = {
            False: gemma_eager_mask(attention_mask, cache_position, batch_size, dtype),
            True: gemma_eager_mask(attention_mask, cache_position, batch_size, dtype, self.sliding_window),
        }
        hidden_states = inputs_embeds
        position_embeddings_global = self.rotary_emb(hidden_states, position_ids)
        position_embeddings_local = (self.rotary_emb_local(hidden_states, position_ids) if self.gemma3
                                     else position_embeddings_global)
        if not self.gemma3:
            # Gemma2 downcasts the normalizer to the hidden states' dtype
            normalizer = torch.tensor(self.hidden_size ** 0.5, dtype=hidden_states.dtype)
            hidden_states = hidden_states * normalizer
        presents = []
        for decoder_layer, layer_past in zip(self.layers, past_key_values):
            position_embeddings = (position_embeddings_local if decoder_layer.is_sliding
                                   else position_embeddings_global)
            hidden_states, present = decoder_layer(hidden_states, position_embeddings,
                                                   causal_mask_mapping[decoder_layer.is_sliding], layer_past)
            presents.append(present)
        hidden_states = self.norm(hidden_states)
        return hidden_states, tuple(presents)


class GemmaForCausalLM(nn.Module):
    """Gemma2ForCausalLM / Gemma3ForCausalLM: lm_head tied to embed_tokens,
    the logits soft-capped when final_logit_softcapping is set (Gemma 2)."""

    def __init__(self, cfg, gemma3):
        super().__init__()
        self.model = GemmaModel(cfg, gemma3)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight
        self.final_logit_softcapping = cfg.final_softcap or None

    def forward(self, input_ids, attention_mask, past_key_values):
        hidden_states, presents = self.model(input_ids, attention_mask, past_key_values)
        logits = self.lm_head(hidden_states[:, -NUM_LOGITS_TO_KEEP:, :])
        if self.final_logit_softcapping is not None:
            logits = logits / self.final_logit_softcapping
            logits = torch.tanh(logits)
            logits = logits * self.final_logit_softcapping
        return logits, presents


# ----------------------------------------------------------------------------
# Building, optimum's export interface
# ----------------------------------------------------------------------------

def build_hf_model(family, cfg):
    if cfg.opts is not None:
        return SmallFamilyForCausalLM(cfg)
    if family == "llama":
        return LlamaForCausalLM(cfg, qkv_bias=False, tie_word_embeddings=False)
    if family == "qwen2":
        return LlamaForCausalLM(cfg, qkv_bias=True, tie_word_embeddings=True)
    if family == "qwen3":
        return LlamaForCausalLM(cfg, qkv_bias=False, tie_word_embeddings=True, qk_norm=True)
    if family == "mistral":  # MistralForCausalLM: llama's layers, head_dim, sliding window
        return LlamaForCausalLM(cfg, qkv_bias=False, tie_word_embeddings=False)
    if family == "phi":
        return PhiForCausalLM(cfg)
    if family == "gpt2":
        return GPT2LMHeadModel(cfg)
    if family == "phi3":
        return Phi3ForCausalLM(cfg)
    if family in ("gemma2", "gemma3"):
        return GemmaForCausalLM(cfg, gemma3=family == "gemma3")
    raise ValueError(family)


def init_options(family):
    """export_llm.randomize_weights options for the HF parameter layout."""
    if family == "gpt2":
        return {"fan_in_dim": 0}  # Conv1D weights are [in, out]
    if family in ("qwen2", "qwen3", "phi3", "gemma2", "gemma3") or family in TIED_SMALL_FAMILIES:
        return {"tied": ("embed_tokens.weight", "norm.weight")}
    return {}


def input_order(family):
    """Forward-signature order of the non-cache inputs and where the cache goes."""
    if family == "gpt2":
        return ("input_ids", "past_key_values", "attention_mask", "position_ids")
    if family in ("gemma2", "gemma3"):  # optimum's Gemma exports have no position_ids
        return ("input_ids", "attention_mask", "past_key_values")
    return ("input_ids", "attention_mask", "position_ids", "past_key_values")


def hf_io_names(family, cfg):
    """optimum's text-generation-with-past names and dynamic axes.

    attention_mask's total length is "past_sequence_length + sequence_length";
    optimum labels the present outputs "past_sequence_length + 1" (the decode
    step's length) although a prompt step makes them longer.
    """
    dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
           "attention_mask": {0: "batch_size", 1: "past_sequence_length + sequence_length"},
           "logits": {0: "batch_size", 1: "sequence_length"}}
    if "position_ids" in input_order(family):
        dyn["position_ids"] = {0: "batch_size", 1: "sequence_length"}
    inputs, outputs = [], ["logits"]
    for name in input_order(family):
        if name != "past_key_values":
            inputs.append(name)
            continue
        for i in range(cfg.layers):
            for kind in ("key", "value"):
                inputs.append(f"past_key_values.{i}.{kind}")
                dyn[inputs[-1]] = {0: "batch_size", 2: "past_sequence_length"}
    for i in range(cfg.layers):
        for kind in ("key", "value"):
            outputs.append(f"present.{i}.{kind}")
            dyn[outputs[-1]] = {0: "batch_size", 2: "past_sequence_length + 1"}
    return inputs, outputs, dyn


def hf_args(family, input_ids, attention_mask, position_ids, flat_past):
    """Model arguments in signature order; the cache as ((k, v), ...) per layer."""
    past = tuple((flat_past[i], flat_past[i + 1]) for i in range(0, len(flat_past), 2))
    named = {"input_ids": input_ids, "attention_mask": attention_mask,
             "position_ids": position_ids, "past_key_values": past}
    return tuple(named[name] for name in input_order(family))
