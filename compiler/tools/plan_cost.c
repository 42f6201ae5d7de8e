/* A plan's bytes and operations per token (roofline.h), read through the
 * runtime's plan reader like `llmc inspect`.  Bytes are segment sizes, so
 * they hold for any weight layout (quantized tiles, scales); operations
 * come from the logical dims of the weights. */
#include <stdio.h>
#include <string.h>

#include "plan_format.h"
#include "roofline.h"
#include "tensor_traits.h"

/* Element count of a tensor's dims at (S, P); false on overflow. */
static bool elements_at(const fb_reader *r, const rt_tensor_desc *t, int64_t S, int64_t P,
                        uint64_t *out)
{
    int64_t n = 1;
    for (uint32_t k = 0; k < t->dims.len; k++) {
        int64_t d;
        if (!rt_affine_eval(fb_vec_affine(r, t->dims, k), S, P, &d) || d < 0 || !rt_mul_i64(n, d, &n))
            return false;
    }
    *out = (uint64_t)n;
    return true;
}

static int64_t dim_at(const fb_reader *r, const rt_tensor_desc *t, uint32_t k)
{
    int64_t d = 0;
    if (k < t->dims.len && !rt_affine_eval(fb_vec_affine(r, t->dims, k), 1, 0, &d))
        d = 0;
    return d;
}

static llmc_rt_status overflow(const char *what, llmc_rt_error *err)
{
    if (err) {
        err->code = LLMC_RT_E_CORRUPT;
        snprintf(err->msg, sizeof err->msg, "'%s': tensor dims overflow", what ? what : "?");
    }
    return LLMC_RT_E_CORRUPT;
}

/* Input `k` of op as a tensor, with its segment size (0 unless a weight). */
static llmc_rt_status operand(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op, uint32_t k,
                              rt_tensor_desc *t, uint64_t *weight_bytes, llmc_rt_error *err)
{
    llmc_rt_status st = rt_read_tensor(r, p, fb_vec_u32(r, op->inputs, k), t, err);
    rt_segment_desc seg = {0, 0, 0};
    if (!st && t->kind == KIND_WEIGHT)
        st = rt_read_segment(r, p, t->segment, &seg, err);
    *weight_bytes = seg.size;
    return st;
}

/* True in *grows when a Linear's x (input 0) has more elements at S = 2
 * than at S = 1: it runs on every fed token; false for a Linear over a
 * fixed row count (the LM head of `llmc compile --logits last`), which runs
 * once per call. */
static llmc_rt_status rows_grow_with_s(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                       bool *grows, llmc_rt_error *err)
{
    rt_tensor_desc x;
    uint64_t unused, at1, at2;
    llmc_rt_status st = operand(r, p, op, 0, &x, &unused, err);
    if (st)
        return st;
    if (!elements_at(r, &x, 1, 0, &at1) || !elements_at(r, &x, 2, 0, &at2))
        return overflow(op->name, err);
    *grows = at2 > at1;
    return LLMC_RT_OK;
}

/* The int8 mix of a Linear's W: int8 tiles of its bits; -1 for float. */
static int int8_mix_of(const rt_tensor_desc *w)
{
    int bits = rt_dtype_bits(w->dtype);
    for (int m = 0; w->layout == LLMC_RT_LAYOUT_QWeightTiles && m < LLMC_INT8_MIXES; m++)
        if (llmc_int8_mix_bits((llmc_int8_mix)m) == bits)
            return m;
    return -1;
}

/* Linear: every weight operand (W, bias, and whatever a quantized layout
 * adds) is read whole; 2 * N * K operations with W's logical [N, K].
 * MatMul: its weight operand read whole, 2 * elements operations. */
static llmc_rt_status cost_of_product(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                      llmc_plan_cost *c, llmc_rt_error *err)
{
    for (uint32_t k = 0; k < op->inputs.len; k++) {
        rt_tensor_desc t;
        uint64_t bytes, n;
        llmc_rt_status st = operand(r, p, op, k, &t, &bytes, err);
        if (st)
            return st;
        if (t.kind != KIND_WEIGHT)
            continue;
        c->weight_bytes += bytes;
        c->quantized |= t.dtype != LLMC_RT_F32;
        if (op->code == LLMC_RT_OP_Linear && k == 1) {
            uint64_t ops = 2u * (uint64_t)dim_at(r, &t, 0) * (uint64_t)dim_at(r, &t, 1);
            bool per_token;
            st = rows_grow_with_s(r, p, op, &per_token, err);
            if (st)
                return st;
            *(per_token ? &c->linear_ops : &c->linear_ops_per_call) += ops;
            int mix = int8_mix_of(&t);
            if (mix >= 0)
                *(per_token ? &c->int8_ops[mix] : &c->int8_ops_per_call[mix]) += ops;
        }
        else if (op->code == LLMC_RT_OP_MatMul) {
            if (!elements_at(r, &t, 1, 0, &n))
                return overflow(op->name, err);
            c->linear_ops += 2u * n;
        }
    }
    c->linears++;
    return LLMC_RT_OK;
}

/* Gather of a weight: one slice along `axis` per index of a one-token
 * call (an embedding row per token), i.e. segment bytes / dims[axis]. */
static llmc_rt_status cost_of_gather(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                     llmc_plan_cost *c, llmc_rt_error *err)
{
    rt_tensor_desc table, idx;
    uint64_t bytes, idx_bytes, n_idx;
    llmc_rt_status st = operand(r, p, op, 0, &table, &bytes, err);
    if (!st)
        st = operand(r, p, op, 1, &idx, &idx_bytes, err);
    if (st || table.kind != KIND_WEIGHT)
        return st;
    int64_t rows = dim_at(r, &table, (uint32_t)op->axis);
    if (!elements_at(r, &idx, 1, 0, &n_idx))
        return overflow(op->name, err);
    if (rows > 0)
        c->weight_bytes += bytes / (uint64_t)rows * n_idx;
    c->gathers++;
    return LLMC_RT_OK;
}

/* PastKey/PastValue inputs (unfused layers): their float bytes per
 * cached position, dims at P = 1 minus dims at P = 0. */
static llmc_rt_status cost_of_past_inputs(fb_reader *r, const llmc_rt_plan *p, llmc_plan_cost *c,
                                          llmc_rt_error *err)
{
    for (uint32_t i = 0; i < rt_plan_of(p)->n_inputs; i++) {
        rt_io_desc io;
        rt_tensor_desc t;
        uint64_t at0, at1;
        llmc_rt_status st = rt_read_io(r, p, 0, i, &io, err);
        if (st)
            return st;
        if (io.role != ROLE_PAST_KEY && io.role != ROLE_PAST_VALUE)
            continue;
        if ((st = rt_read_tensor(r, p, io.tensor, &t, err)))
            return st;
        if (!elements_at(r, &t, 1, 0, &at0) || !elements_at(r, &t, 1, 1, &at1))
            return overflow(t.name, err);
        c->kv_bytes_per_pos += (at1 - at0) * sizeof(float);
    }
    return LLMC_RT_OK;
}

/* An Attention op: K and V rows of the plan's KV dtype per position, q.k
 * and p.v per position; a windowed one also under its window's entry. */
static llmc_rt_status cost_of_attention(const llmc_rt_plan *p, const rt_op_desc *op, llmc_plan_cost *c,
                                        llmc_rt_error *err)
{
    uint64_t bytes = rt_kv_position_bytes(rt_plan_of(p)->kv_cache_dtype, op->kv_heads, op->head_dim);
    uint64_t ops = 4u * (uint64_t)op->heads * (uint64_t)op->head_dim;
    c->kv_bytes_per_pos += bytes;
    c->attn_ops_per_pos += ops;
    c->attentions++;
    if (!op->window)
        return LLMC_RT_OK;
    uint32_t w = 0;
    while (w < c->n_windowed && c->windowed[w].window != op->window)
        w++;
    if (w == LLMC_COST_WINDOWS) {
        if (err) {
            err->code = LLMC_RT_E_ARG;
            snprintf(err->msg, sizeof err->msg, "'%s': more than %d distinct sliding windows",
                     op->name ? op->name : "?", LLMC_COST_WINDOWS);
        }
        return LLMC_RT_E_ARG;
    }
    c->n_windowed += w == c->n_windowed;
    c->windowed[w].window = op->window;
    c->windowed[w].kv_bytes_per_pos += bytes;
    c->windowed[w].attn_ops_per_pos += ops;
    return LLMC_RT_OK;
}

llmc_rt_status llmc_plan_cost_of(const llmc_rt_plan *p, llmc_plan_cost *c, llmc_rt_error *err)
{
    fb_reader r = rt_reader(p);
    memset(c, 0, sizeof *c);
    for (uint32_t i = 0; i < rt_plan_of(p)->n_ops; i++) {
        rt_op_desc op;
        llmc_rt_status st = rt_read_op(&r, p, i, &op, err);
        if (!st && (op.code == LLMC_RT_OP_Linear || op.code == LLMC_RT_OP_MatMul))
            st = cost_of_product(&r, p, &op, c, err);
        else if (!st && op.code == LLMC_RT_OP_Gather)
            st = cost_of_gather(&r, p, &op, c, err);
        else if (!st && op.code == LLMC_RT_OP_Attention)
            st = cost_of_attention(p, &op, c, err);
        if (st)
            return st;
    }
    return cost_of_past_inputs(&r, p, c, err);
}

double llmc_cost_positions(uint64_t first, uint64_t n, uint32_t window)
{
    /* sum of min(c, w) over c = a .. b, the positions read */
    double a = (double)first + 1, b = (double)first + (double)n, w = window;
    if (!window || b <= w)
        return (a + b) / 2;
    if (a >= w)
        return w;
    return ((a + w) * (w - a + 1) / 2 + w * (b - w)) / (double)n;
}

void llmc_plan_cost_at(const llmc_plan_cost *c, uint64_t first, uint64_t n, double *kv_bytes,
                       double *attn_ops)
{
    double full = llmc_cost_positions(first, n, 0);
    uint64_t bytes = c->kv_bytes_per_pos, ops = c->attn_ops_per_pos;
    *kv_bytes = *attn_ops = 0;
    for (uint32_t i = 0; i < c->n_windowed; i++) {
        double at = llmc_cost_positions(first, n, c->windowed[i].window);
        *kv_bytes += (double)c->windowed[i].kv_bytes_per_pos * at;
        *attn_ops += (double)c->windowed[i].attn_ops_per_pos * at;
        bytes -= c->windowed[i].kv_bytes_per_pos;
        ops -= c->windowed[i].attn_ops_per_pos;
    }
    *kv_bytes += (double)bytes * full;
    *attn_ops += (double)ops * full;
}
