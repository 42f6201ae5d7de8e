/* The plan verifier's op checks that compare dims (verify.h): Linear and
 * its packed operands, QuantizeRows, ShadowLinear, RMSNorm, Rope, Attention,
 * Trilu, ScatterND, CumSum, and Gather (whose packed form reads rows of a
 * weight). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "rt_div64.h"
#include "verify.h"
#include "llmc_rt_internal.h"

/* Dim `axis` (negative: from the end) of tensor t, when it is a constant. */
static bool const_dim(fb_reader *r, const llmc_rt_plan *p, uint32_t t, int axis, int64_t *out)
{
    rt_tensor_desc d;
    if (rt_read_tensor(r, p, t, &d, NULL) != LLMC_RT_OK)
        return false;
    if (axis < 0)
        axis += (int)d.dims.len;
    if (axis < 0 || (uint32_t)axis >= d.dims.len)
        return false;
    const uint8_t *a = fb_vec_affine(r, d.dims, (uint32_t)axis);
    *out = fb_i64(a);
    return !fb_i64(a + 8) && !fb_i64(a + 16);
}

/* Do dims [0, n) of tensors a and b have the same Affines? */
static bool same_leading_dims(fb_reader *r, const llmc_rt_plan *p, uint32_t a, uint32_t b,
                              uint32_t n)
{
    rt_tensor_desc da, db;
    if (rt_read_tensor(r, p, a, &da, NULL) || rt_read_tensor(r, p, b, &db, NULL) ||
        da.dims.len < n || db.dims.len < n)
        return false;
    return memcmp(r->base + da.dims.pos, r->base + db.dims.pos, (size_t)n * AFFINE_BYTES) == 0;
}

static uint32_t op_in(const fb_reader *r, const rt_op_desc *op, uint32_t k)
{
    return fb_vec_u32(r, op->inputs, k);
}

static uint32_t op_out(const fb_reader *r, const rt_op_desc *op, uint32_t k)
{
    return fb_vec_u32(r, op->outputs, k);
}

static bool all_f32(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op)
{
    for (uint32_t k = 0; k < op->inputs.len + op->outputs.len; k++) {
        bool is_in = k < op->inputs.len;
        uint32_t t = is_in ? op_in(r, op, k) : op_out(r, op, k - op->inputs.len);
        if (rt_meta_of(r, p, t).dtype != LLMC_RT_F32)
            return false;
    }
    return true;
}

/* ---- Attention ---------------------------------------------------------- */

/* Dim `axis` of tensor t: *c + *s * S + *q * P (tensors verified already). */
static void dim_of(fb_reader *r, const llmc_rt_plan *p, uint32_t t, uint32_t axis, int64_t *c,
                   int64_t *s, int64_t *q)
{
    rt_tensor_desc d;
    *c = *s = *q = -1;
    if (rt_read_tensor(r, p, t, &d, NULL) == LLMC_RT_OK && axis < d.dims.len) {
        const uint8_t *a = fb_vec_affine(r, d.dims, axis);
        *c = fb_i64(a);
        *s = fb_i64(a + 8);
        *q = fb_i64(a + 16);
    }
}

/* Input k (or the output for k = inputs.len) has dims [want0, want1, ...]
 * where a want of -1 stands for S and others are constants. */
static bool dims_match(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op, uint32_t k,
                       const int64_t *want, uint32_t rank)
{
    uint32_t t = k < op->inputs.len ? fb_vec_u32(r, op->inputs, k) : fb_vec_u32(r, op->outputs, 0);
    for (uint32_t a = 0; a < rank; a++) {
        int64_t c, s, q;
        dim_of(r, p, t, a, &c, &s, &q);
        if (want[a] < 0 ? (c || s != 1 || q) : (c != want[a] || s || q))
            return false;
    }
    return true;
}

static llmc_rt_status bad_shape(const char *fmt, const int64_t *nums, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, fmt, nums, NULL);
}

/* Linear's outputs y_j: all of them but the activation tiles, the last
 * output, of a LINEAR_QUANTIZE op. */
static uint32_t linear_ys(const rt_op_desc *op)
{
    return op->outputs.len - (op->kind & LINEAR_QUANTIZE ? 1u : 0u);
}

/* Bias [N] when kind & LINEAR_BIAS, then residual (y's dims, one y) when
 * kind & LINEAR_RESIDUAL. */
static llmc_rt_status verify_linear_extras(op_check *c, int64_t n, llmc_rt_error *err)
{
    fb_reader *r = c->r;
    const llmc_rt_plan *p = c->p;
    const rt_op_desc *op = c->op;
    uint32_t next = 2;
    int64_t bias_n;
    uint32_t want = 2u + (op->kind & LINEAR_BIAS) + (op->kind >> 1 & 1);
    if (op->kind & ~(LINEAR_BIAS | LINEAR_RESIDUAL | LINEAR_QUANTIZE) || op->inputs.len != want)
        return bad_shape("kind %d (bit 0 bias, bit 1 residual, bit 2 quantize) does not match %d inputs",
                         RT_N(op->kind, op->inputs.len), err);
    if (op->kind & LINEAR_BIAS) {
        uint32_t b = op_in(r, op, next);
        if (c->in[next++].rank != 1 || !const_dim(r, p, b, 0, &bias_n) || bias_n != n)
            return bad_shape("bias must be [N] = [%d]", RT_N(n), err);
    }
    if (op->kind & LINEAR_RESIDUAL) {
        uint32_t res = op_in(r, op, next), y = op_out(r, op, 0);
        int rank = c->in[next].rank; /* inputs.len <= 4 (Linear's arity) < MAX_META */
        if (linear_ys(op) != 1 || rank != c->y.rank || !same_leading_dims(r, p, res, y, (uint32_t)rank))
            return bad_shape("residual needs exactly one output, with the residual's dims",
                             NULL, err);
    }
    return LLMC_RT_OK;
}

/* x float32 Dense [..., K] quantized into xq, QActTiles with x's dims
 * (Int8 with the target's tiles: verify_plan.c), by the static scale, 0
 * (per row) or a normal positive float (k_quantize_rows' contract): what a
 * QuantizeRows and a LINEAR_QUANTIZE op compute (mx, mq: their metas). */
static llmc_rt_status verify_quantized_x(fb_reader *r, const llmc_rt_plan *p, uint32_t x,
                                         uint32_t xq, tensor_meta mx, tensor_meta mq, float scale,
                                         llmc_rt_error *err)
{
    if (mx.dtype != LLMC_RT_F32 || mx.layout != LLMC_RT_LAYOUT_Dense || mq.layout != LLMC_RT_LAYOUT_QActTiles)
        return rt_bad_dtypes("float32 x quantized to QActTiles", err);
    if (mx.rank < 1 || mq.rank != mx.rank || !same_leading_dims(r, p, x, xq, (uint32_t)mx.rank))
        return bad_shape("x's tiles must have x's dims", NULL, err);
    if (!(scale == 0.0f || (scale >= FLT_MIN && scale <= FLT_MAX)))
        return bad_shape("static scale: 0 (per row) or a normal positive float", NULL, err);
    return LLMC_RT_OK;
}

/* x and W: float32 Dense both, float32 x by FWeightTiles, or by
 * QWeightTiles activation tiles of W's group: x itself (a QuantizeRows'
 * output), or (LINEAR_QUANTIZE) the op's last output, x float32 quantized
 * with the op's scale (else 0); bias, residual and outputs y_j float32
 * (Dense: verify_op_tensors). */
static llmc_rt_status verify_linear_operands(op_check *c, llmc_rt_error *err)
{
    fb_reader *r = c->r;
    const llmc_rt_plan *p = c->p;
    const rt_op_desc *op = c->op;
    tensor_meta mx = c->in[0], mw = c->in[1];
    bool quantizes = op->kind & LINEAR_QUANTIZE;
    uint32_t tiles = quantizes ? op_out(r, op, op->outputs.len - 1) : op_in(r, op, 0);
    tensor_meta mt = quantizes ? rt_meta_of(r, p, tiles) : mx;
    for (uint32_t k = 2; k < op->inputs.len; k++) /* <= 4 (Linear's arity) < MAX_META */
        if (c->in[k].dtype != LLMC_RT_F32)
            return rt_bad_dtypes("Linear bias and residual float32", err);
    for (uint32_t k = 0; k < linear_ys(op); k++)
        if (rt_meta_of(r, p, op_out(r, op, k)).dtype != LLMC_RT_F32)
            return rt_bad_dtypes("Linear outputs float32", err);
    if (!quantizes && op->scale != 0.0f)
        return bad_shape("a static scale on a Linear that does not quantize x", NULL, err);
    if (mw.layout != LLMC_RT_LAYOUT_QWeightTiles)
        return !quantizes && mx.dtype == LLMC_RT_F32 && mx.layout == LLMC_RT_LAYOUT_Dense &&
                       mw.dtype == LLMC_RT_F32
                   ? LLMC_RT_OK : rt_bad_dtypes("Linear float32 x by float32 W", err);
    if (mt.layout != LLMC_RT_LAYOUT_QActTiles || mt.group != mw.group)
        return bad_shape("x of a quantized W must be activation tiles of its group %d",
                         RT_N(mw.group), err);
    return quantizes ? verify_quantized_x(r, p, op_in(r, op, 0), tiles, mx, mt, op->scale, err) : LLMC_RT_OK;
}

/* Gather of rows of a packed weight [N, K] (an embedding table, maybe the
 * LM head's own W): axis 0, int32/int64 indices [...] -> float32 [..., K]. */
static llmc_rt_status verify_packed_gather(fb_reader *r, const llmc_rt_plan *p,
                                           const rt_op_desc *op, tensor_meta idx, tensor_meta y,
                                           llmc_rt_error *err)
{
    uint32_t w = op_in(r, op, 0);
    tensor_meta mw = rt_meta_of(r, p, w);
    int64_t n, k, yk;
    if (y.dtype != LLMC_RT_F32 || (idx.dtype != LLMC_RT_I32 && idx.dtype != LLMC_RT_I64))
        return rt_bad_dtypes("Gather of a packed weight, int32/int64 -> float32", err);
    if (mw.kind != KIND_WEIGHT || mw.rank != 2 || op->axis != 0 || !const_dim(r, p, w, 0, &n) ||
        !const_dim(r, p, w, 1, &k))
        return bad_shape("a packed Gather reads rows (axis 0) of a weight [N, K]", NULL, err);
    if (y.rank != idx.rank + 1 || !same_leading_dims(r, p, op_in(r, op, 1), op_out(r, op, 0),
                                                     (uint32_t)idx.rank) ||
        !const_dim(r, p, op_out(r, op, 0), -1, &yk) || yk != k)
        return bad_shape("the output of a packed Gather must be [indices dims..., %d]", RT_N(k),
                         err);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_linear(op_check *c, llmc_rt_error *err)
{
    fb_reader *r = c->r;
    const llmc_rt_plan *p = c->p;
    const rt_op_desc *op = c->op;
    uint32_t x = op_in(r, op, 0), w = op_in(r, op, 1);
    tensor_meta mx = c->in[0], mw = c->in[1];
    int64_t n, k, xk, sum = 0;
    llmc_rt_status st = verify_linear_operands(c, err);
    if (st)
        return st;
    if (mw.kind != KIND_WEIGHT || mw.rank != 2 || !const_dim(r, p, w, 0, &n) ||
        !const_dim(r, p, w, 1, &k))
        return bad_shape("W must be a weight of rank 2 [N, K]", NULL, err);
    if (mx.rank < 1 || (const_dim(r, p, x, -1, &xk) && xk != k))
        return bad_shape("x must be [..., K] with K = %d, W's second dim", RT_N(k), err);
    for (uint32_t j = 0; j < linear_ys(op); j++) {
        uint32_t y = op_out(r, op, j);
        int64_t nj;
        if (rt_meta_of(r, p, y).rank != mx.rank || !const_dim(r, p, y, -1, &nj) ||
            !same_leading_dims(r, p, x, y, (uint32_t)mx.rank - 1))
            return bad_shape("output %u must have x's dims but a constant last one",
                             RT_N(j), err);
        sum += nj;
    }
    if (sum != n)
        return bad_shape("output last dims sum to %d; W has N = %d rows", RT_N(sum, n), err);
    return verify_linear_extras(c, n, err);
}

/* kind 1: input 2 is the hot channels' table, a float32 weight [H, N + 1]. */
static llmc_rt_status verify_hot_table(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                       int64_t n, llmc_rt_error *err)
{
    uint32_t h = op_in(r, op, 2);
    tensor_meta m = rt_meta_of(r, p, h);
    int64_t rows, cols;
    if (m.dtype != LLMC_RT_F32 || m.layout != LLMC_RT_LAYOUT_Dense || m.kind != KIND_WEIGHT ||
        m.rank != 2 || !const_dim(r, p, h, 0, &rows) || !const_dim(r, p, h, 1, &cols) ||
        rows < 1 || cols != n + 1)
        return bad_shape("hot table: a float32 weight [H >= 1, N + 1 = %d]", RT_N(n + 1), err);
    return LLMC_RT_OK;
}

/* ShadowLinear: x float32 [..., K], W an Int8 QWeightTiles weight [N, K],
 * with kind 1 the hot channels' table, then as many float32 inputs y_j as
 * outputs z_j, each z_j with y_j's dims [..., N_j] and x's leading ones,
 * sum N_j = N; a static scale. */
static llmc_rt_status verify_shadow_linear(fb_reader *r, const llmc_rt_plan *p,
                                           const rt_op_desc *op, llmc_rt_error *err)
{
    uint32_t x = op_in(r, op, 0), w = op_in(r, op, 1);
    tensor_meta mx = rt_meta_of(r, p, x), mw = rt_meta_of(r, p, w);
    int64_t n, k, xk, sum = 0;
    if (mx.dtype != LLMC_RT_F32 || mx.layout != LLMC_RT_LAYOUT_Dense || mw.dtype != LLMC_RT_I8 ||
        mw.layout != LLMC_RT_LAYOUT_QWeightTiles || mw.kind != KIND_WEIGHT)
        return rt_bad_dtypes("ShadowLinear float32 x by an Int8 QWeightTiles weight", err);
    if (mw.rank != 2 || !const_dim(r, p, w, 0, &n) || !const_dim(r, p, w, 1, &k) ||
        mx.rank < 1 || !const_dim(r, p, x, -1, &xk) || xk != k)
        return bad_shape("x must be [..., K] and W [N, K], K constant", NULL, err);
    uint32_t ys = 2u + (op->kind == 1);
    if (op->inputs.len != ys + op->outputs.len || op->kind > 1)
        return bad_shape("inputs x, W, the hot table if kind is 1, then one y per output "
                         "(%u); kind 0 or 1", RT_N(op->outputs.len), err);
    llmc_rt_status st = op->kind ? verify_hot_table(r, p, op, n, err) : LLMC_RT_OK;
    if (st)
        return st;
    for (uint32_t j = 0; j < op->outputs.len; j++) {
        uint32_t y = op_in(r, op, ys + j), z = op_out(r, op, j);
        tensor_meta my = rt_meta_of(r, p, y), mz = rt_meta_of(r, p, z);
        int64_t nj;
        if (my.dtype != LLMC_RT_F32 || mz.dtype != LLMC_RT_F32 || my.rank != mx.rank ||
            mz.rank != mx.rank || !same_leading_dims(r, p, y, z, (uint32_t)mx.rank) ||
            !same_leading_dims(r, p, x, z, (uint32_t)mx.rank - 1) || !const_dim(r, p, z, -1, &nj))
            return bad_shape("y %u and z %u: float32 with x's leading dims, the same dims, a "
                             "constant last one", RT_N(j, j), err);
        sum += nj;
    }
    if (sum != n)
        return bad_shape("output last dims sum to %d; W has N = %d rows", RT_N(sum, n), err);
    if (!(op->scale >= FLT_MIN && op->scale <= FLT_MAX))
        return bad_shape("static scale: a normal positive float", NULL, err);
    return LLMC_RT_OK;
}

/* x, scale and y: the metas of its two inputs and one output (its arity). */
static llmc_rt_status verify_rmsnorm(op_check *c, llmc_rt_error *err)
{
    fb_reader *r = c->r;
    const llmc_rt_plan *p = c->p;
    uint32_t x = op_in(r, c->op, 0), scale = op_in(r, c->op, 1);
    int64_t d, sd;
    if (c->in[0].dtype != LLMC_RT_F32 || c->in[1].dtype != LLMC_RT_F32 || c->y.dtype != LLMC_RT_F32)
        return rt_bad_dtypes("RMSNorm float32", err);
    if (c->in[0].rank < 1 || c->y.rank != c->in[0].rank)
        return rt_bad_axis(-1, c->in[0].rank, err);
    if (!const_dim(r, p, x, -1, &d) || c->in[1].rank != 1 ||
        !const_dim(r, p, scale, 0, &sd) || sd != d)
        return bad_shape("scale must be [D] with D the input's constant last dim", NULL, err);
    uint32_t rank = (uint32_t)c->in[0].rank;
    if (c->op->inputs.len > 2 && (rt_meta_of(r, p, op_in(r, c->op, 2)).rank != (int)rank ||
                                  !same_leading_dims(r, p, op_in(r, c->op, 2), op_out(r, c->op, 0), rank)))
        return bad_shape("the residual must have the output's dims", NULL, err);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_rope(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                  llmc_rt_error *err)
{
    uint32_t x = op_in(r, op, 0);
    int rank = rt_meta_of(r, p, x).rank;
    int64_t d, rows, cols;
    if (!all_f32(r, p, op))
        return rt_bad_dtypes("Rope float32", err);
    if (rank < 2 || rt_meta_of(r, p, op_out(r, op, 0)).rank != rank || !const_dim(r, p, x, -1, &d))
        return bad_shape("x must be [..., S, D] with a constant D", NULL, err);
    if (op->rotary_dim <= 0 || op->rotary_dim % 2 || op->rotary_dim > d)
        return bad_shape("rotary_dim %d must be even, > 0 and <= the last dim %d",
                         RT_N(op->rotary_dim, d), err);
    for (uint32_t k = 1; k <= 2; k++) {
        uint32_t t = op_in(r, op, k);
        if (rt_meta_of(r, p, t).rank != 2 || !const_dim(r, p, t, 0, &rows) ||
            !const_dim(r, p, t, 1, &cols) || rows != rt_plan_of(p)->max_context || cols != op->rotary_dim)
            return bad_shape("cos and sin must be [max_context %u, rotary_dim %d]",
                             RT_N(rt_plan_of(p)->max_context, op->rotary_dim), err);
    }
    return LLMC_RT_OK;
}

/* Attention's q_norm and k_norm (inputs n_in, n_in + 1): float32 [D] both
 * (per head) or [H*D] and [G*D] (the whole rows), one finite epsilon. */
static bool head_norms_fit(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                           uint32_t n_in)
{
    int64_t D = op->head_dim;
    bool whole = !dims_match(r, p, op, n_in, &D, 1);
    const int64_t want[2] = {whole ? op->heads * D : D, whole ? op->kv_heads * D : D};
    for (uint32_t k = 0; k < 2; k++) {
        tensor_meta m = rt_meta_of(r, p, op_in(r, op, n_in + k));
        if (m.dtype != LLMC_RT_F32 || m.rank != 1 || !dims_match(r, p, op, n_in + k, &want[k], 1))
            return false;
    }
    return op->epsilon >= 0.0f && isfinite(op->epsilon);
}

static llmc_rt_status verify_attention(fb_reader *r, const llmc_rt_plan *p,
                                       const rt_op_desc *op, const tensor_meta *in,
                                       tensor_meta y, llmc_rt_error *err)
{
    int64_t H = op->heads, G = op->kv_heads, D = op->head_dim, R = op->rotary_dim;
    uint32_t n_in = R > 0 ? 5 : 3;
    bool norms = op->inputs.len == n_in + 2;
    if (H < 1 || G < 1 || rt_umod64((uint64_t)H, (uint64_t)G) || D < 1 ||
        D > RT_ATTN_MAX_HEAD_DIM || R < 0 || R % 2 || R > D)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "heads %d, kv_heads %d, head_dim %d (at most "
                       "%d), rotary_dim %d: need kv_heads | heads and an even rotary_dim <= "
                       "head_dim", RT_N(H, G, D, RT_ATTN_MAX_HEAD_DIM, R), NULL);
    if (!isfinite(op->scale) || !(op->softcap >= 0.0f && isfinite(op->softcap)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "scale must be finite, softcap must be finite and >= 0",
                       NULL, NULL);
    if (op->inputs.len != n_in && !norms)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "%u inputs; rotary_dim %d needs %u (+2 head norms)",
                       RT_N(op->inputs.len, R, n_in), NULL);
    for (uint32_t k = 0; k < n_in; k++)
        if (in[k].dtype != LLMC_RT_F32 || in[k].rank != (k < 3 ? 3 : 2))
            return rt_bad_dtypes("Attention float32 q, k, v [1, S, n] (cos, sin [rows, n])", err);
    if (y.dtype != LLMC_RT_F32 || y.rank != 3)
        return rt_bad_dtypes("Attention -> float32 [1, S, heads*head_dim]", err);
    const int64_t q_dims[3] = {1, -1, H * D}, kv_dims[3] = {1, -1, G * D};
    const int64_t table[2] = {rt_plan_of(p)->max_context, R};
    if (!dims_match(r, p, op, 0, q_dims, 3) || !dims_match(r, p, op, op->inputs.len, q_dims, 3) ||
        !dims_match(r, p, op, 1, kv_dims, 3) || !dims_match(r, p, op, 2, kv_dims, 3))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "q and the output must be [1, S, %d], k and v "
                       "[1, S, %d]", RT_N(H * D, G * D), NULL);
    if (R && (!dims_match(r, p, op, 3, table, 2) || !dims_match(r, p, op, 4, table, 2)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "cos and sin must be [max_context %u, "
                       "rotary_dim %d]", RT_N(rt_plan_of(p)->max_context, R), NULL);
    if (norms && !head_norms_fit(r, p, op, n_in))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "q_norm and k_norm must be float32 [head_dim %d] "
                       "both (per head) or [%d heads * head_dim] and [%d kv_heads * head_dim] "
                       "(whole rows), epsilon finite >= 0", RT_N(D, H, G), NULL);
    if (op->cache >= rt_plan_of(p)->n_caches)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "cache %u >= n_caches %u",
                       RT_N(op->cache, rt_plan_of(p)->n_caches), NULL);
    return LLMC_RT_OK;
}

/* ---- Trilu, ScatterND, CumSum ------------------------------------------ */

/* The output has input 0's dtype and exactly its dims (the same Affines). */
static bool same_as_input0(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                           tensor_meta x, tensor_meta y)
{
    return y.dtype == x.dtype && y.rank == x.rank &&
           same_leading_dims(r, p, op_in(r, op, 0), op_out(r, op, 0), (uint32_t)x.rank);
}

static llmc_rt_status verify_trilu(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                   const tensor_meta *in, tensor_meta y, llmc_rt_error *err)
{
    int64_t one;
    if (op->kind > 1)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d: Trilu's kind is 1 (upper) or 0 "
                       "(lower)", RT_N(op->kind), NULL);
    if (in[0].rank < 2 || !same_as_input0(r, p, op, in[0], y))
        return bad_shape("x must have rank >= 2 and the output x's dtype and dims", NULL, err);
    if (op->inputs.len == 2 &&
        (in[1].dtype != LLMC_RT_I64 || in[1].rank > 1 ||
         (in[1].rank == 1 && (!const_dim(r, p, op_in(r, op, 1), 0, &one) || one != 1))))
        return bad_shape("k must be one int64 (rank 0, or rank 1 of dim 1)", NULL, err);
    return LLMC_RT_OK;
}

/* updates dims = indices dims[:-1] + data dims[q:], Affine by Affine. */
static bool scatter_updates_dims(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                 uint32_t lead, uint32_t q, uint32_t data_rank)
{
    rt_tensor_desc data, idx, upd;
    if (rt_read_tensor(r, p, op_in(r, op, 0), &data, NULL) ||
        rt_read_tensor(r, p, op_in(r, op, 1), &idx, NULL) ||
        rt_read_tensor(r, p, op_in(r, op, 2), &upd, NULL) || upd.dims.len != lead + data_rank - q)
        return false;
    return memcmp(r->base + upd.dims.pos, r->base + idx.dims.pos, lead * AFFINE_BYTES) == 0 &&
           memcmp(r->base + upd.dims.pos + lead * AFFINE_BYTES,
                  r->base + data.dims.pos + q * AFFINE_BYTES,
                  (data_rank - q) * AFFINE_BYTES) == 0;
}

static llmc_rt_status verify_scatter_nd(fb_reader *r, const llmc_rt_plan *p,
                                        const rt_op_desc *op, const tensor_meta *in,
                                        tensor_meta y, llmc_rt_error *err)
{
    int64_t q;
    if (!k_scatter_nd_supports(op->kind, in[0].dtype) || in[2].dtype != in[0].dtype ||
        in[1].dtype != LLMC_RT_I64)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d: ScatterND takes T, int64 indices, "
                       "T -> T with reduction 0..4 (none, add, mul, max, min; bool only "
                       "without one); dtypes %d, %d, %d",
                       RT_N(op->kind, in[0].dtype, in[1].dtype, in[2].dtype), NULL);
    if (!same_as_input0(r, p, op, in[0], y))
        return bad_shape("the output must have data's dtype and dims", NULL, err);
    if (in[1].rank < 1 || !const_dim(r, p, op_in(r, op, 1), -1, &q) || q > in[0].rank)
        return bad_shape("indices must be [..., q] with a constant q <= the rank %d of data",
                         RT_N(in[0].rank), err);
    if (!scatter_updates_dims(r, p, op, (uint32_t)in[1].rank - 1, (uint32_t)q,
                              (uint32_t)in[0].rank))
        return bad_shape("updates must have dims indices[:-1] + data[%d:]", RT_N(q), err);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_cumsum(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                    const tensor_meta *in, tensor_meta y, llmc_rt_error *err)
{
    if (!k_cumsum_supports(in[0].dtype) || op->kind & ~3)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d, dtype %d: CumSum takes float32, "
                       "int32 or int64 and kind bits 0 (exclusive) and 1 (reverse)",
                       RT_N(op->kind, in[0].dtype), NULL);
    if (op->axis < 0 || op->axis >= in[0].rank)
        return rt_bad_axis(op->axis, in[0].rank, err);
    return same_as_input0(r, p, op, in[0], y)
               ? LLMC_RT_OK : bad_shape("the output must have x's dtype and dims", NULL, err);
}

/* ---- per-op checks: the op resolver's verify entries -------------------- */

llmc_rt_status llmc_rt_verify_Gather(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    tensor_meta y = c->y;
    int32_t axis = c->op->axis;
    if (in[0].layout != LLMC_RT_LAYOUT_Dense)
        return verify_packed_gather(c->r, c->p, c->op, in[1], y, err);
    if (y.dtype != in[0].dtype || (in[1].dtype != LLMC_RT_I32 && in[1].dtype != LLMC_RT_I64))
        return rt_bad_dtypes("Gather T, int32/int64 -> T", err);
    if (axis < 0 || axis >= in[0].rank)
        return rt_bad_axis(axis, in[0].rank, err);
    return y.rank == in[0].rank - 1 + in[1].rank ? LLMC_RT_OK : rt_bad_axis(axis, y.rank, err);
}

llmc_rt_status llmc_rt_verify_Linear(op_check *c, llmc_rt_error *err)
{
    return verify_linear(c, err);
}

llmc_rt_status llmc_rt_verify_ShadowLinear(op_check *c, llmc_rt_error *err)
{
    return verify_shadow_linear(c->r, c->p, c->op, err);
}

llmc_rt_status llmc_rt_verify_RMSNorm(op_check *c, llmc_rt_error *err)
{
    return verify_rmsnorm(c, err);
}

llmc_rt_status llmc_rt_verify_Rope(op_check *c, llmc_rt_error *err)
{
    return verify_rope(c->r, c->p, c->op, err);
}

llmc_rt_status llmc_rt_verify_Attention(op_check *c, llmc_rt_error *err)
{
    return verify_attention(c->r, c->p, c->op, c->in, c->y, err);
}

llmc_rt_status llmc_rt_verify_Trilu(op_check *c, llmc_rt_error *err)
{
    return verify_trilu(c->r, c->p, c->op, c->in, c->y, err);
}

llmc_rt_status llmc_rt_verify_ScatterND(op_check *c, llmc_rt_error *err)
{
    return verify_scatter_nd(c->r, c->p, c->op, c->in, c->y, err);
}

llmc_rt_status llmc_rt_verify_CumSum(op_check *c, llmc_rt_error *err)
{
    return verify_cumsum(c->r, c->p, c->op, c->in, c->y, err);
}

/* QuantizeRows: float32 Dense x [..., K] -> QActTiles with x's dims, kind 0. */
llmc_rt_status llmc_rt_verify_QuantizeRows(op_check *c, llmc_rt_error *err)
{
    if (c->op->kind)
        return bad_shape("QuantizeRows has kind 0", NULL, err);
    return verify_quantized_x(c->r, c->p, op_in(c->r, c->op, 0), op_out(c->r, c->op, 0), c->in[0], c->y,
                              c->op->scale, err);
}

