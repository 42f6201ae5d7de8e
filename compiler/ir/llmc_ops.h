/* The llmc operator domain: the fused ops graph passes produce.
 *
 * Nodes of these ops have domain "llmc" (LLMC_DOMAIN) and reuse the output
 * value ids of the subgraph they replace, so shapes and dtypes stay what
 * shape inference computed.  Every op is float32 unless stated; every shape
 * is affine in (S, P) as in ir.h.  Codegen lowers each one to the plan op
 * named in brackets (schemas/plan.fbs).
 *
 * Symbols() -> y                                               [Symbols]
 *     INTS values: (c, s, p) per element; y int64 = c + s*S + p*P.
 *
 * RMSNorm(x, scale, residual?) -> y                            [RMSNorm]
 *     FLOAT epsilon.  Over the last axis of x (length D, scale [D]):
 *     y = x / sqrt(mean(x^2) + epsilon) * scale [+ residual, y's shape:
 *     a post-norm layer's x + norm(f(x)), OLMo2].
 *     (LayerNorm fusion produces the ONNX op LayerNormalization.)
 *
 * Gelu(x) -> y                                       [Unary Gelu / GeluTanh]
 *     INT tanh (default 0).  0: y = 0.5 x (1 + erf(x / sqrt 2));
 *     1: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * Silu(x) -> y                                                 [Unary Silu]
 *     y = x * sigmoid(x).
 * SwiGLU(gate, up) -> y                                      [Binary SwiGLU]
 *     y = silu(gate) * up, numpy broadcasting.
 * GeGLU(gate, up) -> y                                        [Binary GeGLU]
 *     y = gelu_tanh(gate) * up (Gelu tanh=1 above; Gemma's MLP), numpy
 *     broadcasting.
 *
 * Linear(x, W, bias?, residual?) -> y_0 .. y_{n-1}              [Linear]
 *     x [..., K]; W constant [K, N] (ONNX MatMul orientation); bias constant
 *     [N] or omitted (-1); residual omitted or [..., N] and only with n == 1.
 *     z = x W + bias + residual is split along the last axis: y_j gets the
 *     next N_j columns (N_j = last dim of y_j, sum N_j = N).  Codegen stores
 *     W transposed, [N, K], so each output feature's weights are contiguous.
 *     After the quantize pass (--quant): INT quant_bits (8 or 4) and INT
 *     quant_group; x is then the output of QuantizeRows and codegen packs W
 *     into the target's QWeightTiles (runtime/quant_format.h):
 *     z = sx * sum_groups (scale * (q_x . q_w) [+ min * sum q_x]).
 *     W a pre-quantized file's DequantizeLinear (ir/quant_form.h): also
 *     INT quant_coef, the tiles' coefficients: 16 binary16, 32 the file's
 *     float32 scales and zero points.
 *     Outside NPU subgraphs codegen folds the QuantizeRows into the plan's
 *     Linear, which then quantizes x itself (codegen/quant_fold.c).
 *
 * QuantizeRows(x) -> xq                                   [QuantizeRows]
 *     INT group.  x float32 [..., K]; xq int8 with x's shape: each row
 *     scaled by 127 / max|x_row| and rounded to nearest even, with the row
 *     scale and the sum of every group of `group` values (QActTiles).
 *     FLOAT scale (set by the quantize pass from --calibrate, else absent):
 *     every row takes this static per-tensor scale instead, q = x * (1 /
 *     scale) rounded half to even and clamped to [-127, 127].
 *
 * ShadowLinear(x, W, y_0 .. y_{n-1}) -> z_0 .. z_{n-1}   [ShadowLinear]
 *     FLOAT scale, INT quant_bits (8) and quant_group: the Linear's, so W
 *     packs to its bytes.  x float32 [..., K] as the static-scale
 *     QuantizeRows read it; y_j the Linear's outputs; z_j = y_j + sum over
 *     the outliers c (|x_c / scale| > 127) of (x_c - scale * q_c) W[c, cols
 *     of j], q_c = +-127: those channels' products exact (shadow-outliers
 *     pass, runtime/kernels/q_shadow.c).  n <= 3.
 *
 * Rope(x, cos, sin) -> y                                          [Rope]
 *     INT rotary_dim (even, <= D).  x [..., S, D]: axis -2 is the token
 *     axis; token s sits at position P + s.  cos, sin constant
 *     [max_context, rotary_dim], row t = the model's table at position t.
 *     With h = rotary_dim / 2, for i < rotary_dim:
 *         rot_i = -x_{i+h} (i < h),  x_{i-h} (i >= h)     (rotate-half)
 *         y_i   = x_i * cos[P+s][i] + rot_i * sin[P+s][i]
 *     and y_i = x_i for rotary_dim <= i < D (partial rotary).
 *
 * Attention(q, k, v, cos?, sin?, q_norm?, k_norm?) -> o       [Attention]
 *     INT heads, kv_heads (divides heads), head_dim, cache (0-based index of
 *     this op's KV cache), rotary_dim (0 = no RoPE; then cos/sin omitted);
 *     FLOAT scale, epsilon (with the norms).  q [1, S, heads*head_dim], k, v
 *     [1, S, kv_heads*head_dim]: the new tokens only, heads interleaved as
 *     [S, heads, head_dim].  q_norm, k_norm (both or neither, the last
 *     two inputs): constant [head_dim] (Qwen3), each q (k) head row first
 *     RMSNorm'ed (above) with q_norm (k_norm) and epsilon; or constant
 *     [heads*head_dim] and [kv_heads*head_dim] (OLMo2), each whole q (k)
 *     row [heads*head_dim] first RMSNorm'ed.
 *     If rotary_dim > 0, Rope (above) is then applied per head to q and k.
 *     The op appends the new k, v rows to its cache (positions P .. P+S-1)
 *     and computes, per head h with kv head g = h / (heads / kv_heads),
 *         o[s, h] = softmax_t(cap(scale * q[s,h] . K[t,g]), t visible) . V[., g]
 *     (causal; the cache holds t < P).  o [1, S, heads*head_dim].
 *     INT window (0 = none): t is visible when 0 <= P + s - t < window
 *     (Mistral's sliding window), else when t <= P + s.  FLOAT softcap (0 =
 *     none): cap(x) = softcap * tanh(x / softcap) (Gemma 2), else x.
 *     The graph's past_key_values inputs and present outputs are gone: the
 *     runtime owns the cache.
 */
#ifndef LLMC_OPS_H
#define LLMC_OPS_H

#include <stdbool.h>
#include <string.h>

#include "ir.h"

#define LLMC_DOMAIN "llmc"

/* X(op, lowerer, kind, shape handler): the columns of LLMC_ONNX_OP_LIST
 * (op_list.h).  A fused op keeps the shapes of the subgraph it replaces,
 * so only Symbols has a shape handler; `llmc ops` lists them in this
 * order. */
#define LLMC_FUSED_OP_LIST(X)                                   \
    X(Symbols, lower_symbols, 0, infer_symbols)                 \
    X(RMSNorm, lower_rmsnorm, 0, NULL)                          \
    X(Gelu, lower_gelu, 0, NULL)                                \
    X(Silu, lower_unary, LLMC_RT_UNARY_Silu, NULL)                      \
    X(SwiGLU, lower_binary, LLMC_RT_BINARY_SwiGLU, NULL)                \
    X(GeGLU, lower_binary, LLMC_RT_BINARY_GeGLU, NULL)                  \
    X(Linear, lower_linear, 0, NULL)                            \
    X(QuantizeRows, lower_quantize_rows, 0, NULL)               \
    X(ShadowLinear, lower_shadow_linear, 0, NULL)               \
    X(Rope, lower_rope, 0, NULL)                                \
    X(Attention, lower_attention, 0, NULL)

/* Is node `n` a live default-domain (ONNX) op `op_type`? */
static inline bool llmc_is_onnx_op(const llmc_node *n, const char *op_type)
{
    return !n->dead && (n->domain[0] == 0 || strcmp(n->domain, "ai.onnx") == 0) && strcmp(n->op_type, op_type) == 0;
}

/* Is node `n` the llmc-domain op `op_type`? */
static inline bool llmc_is_op(const llmc_node *n, const char *op_type)
{
    return strcmp(n->domain, LLMC_DOMAIN) == 0 && strcmp(n->op_type, op_type) == 0;
}

#endif
