/* The plan verifier's op checks (verify.h): every op's arity and operands,
 * the meta of its tensors, Copy's regions, and the op resolver's verify
 * entries of the ops that compare no dims; then one op as a whole. */
#include <string.h>

#include "kernels/kernel_table.h"
#include "verify.h"
#include "llmc_rt_internal.h"

#define ANY LLMC_ANY_COUNT

/* Inputs and outputs each op takes: min, max (plan_enums.h). */
#define ARITY_(s, name, v, in_min, in_max, out_min, out_max, npu) \
    {in_min, in_max, out_min, out_max},
static const uint32_t op_arity[LLMC_RT_OP_COUNT][4] = {LLMC_PLAN_OPS(ARITY_)};

tensor_meta rt_meta_of(fb_reader *r, const llmc_rt_plan *p, uint32_t i)
{
    rt_tensor_desc d;
    tensor_meta m = {0, 0, 0, 0, 0};
    if (rt_read_tensor(r, p, i, &d, NULL) == LLMC_RT_OK) { /* verified already */
        m.dtype = d.dtype;
        m.rank = (int)d.dims.len;
        m.kind = d.kind;
        m.layout = d.layout;
        m.group = d.group;
    }
    return m;
}

llmc_rt_status rt_bad_dtypes(const char *what, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, "dtypes not supported: %s", NULL, RT_S(what));
}

llmc_rt_status rt_bad_axis(int64_t axis, int rank, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, "axis %d outside rank %d", RT_N(axis, rank), NULL);
}

/* Where a tensor with a non-Dense layout may appear.  A Linear's outputs:
 * its verify entry proves all Float32 (Dense: the packed layouts of an
 * Arena tensor are Int8) but a quantizing one's tiles. */
static bool packed_operand(int code, bool is_input, uint32_t slot)
{
    return (code == LLMC_RT_OP_Linear && (!is_input || slot <= 1)) ||
           (code == LLMC_RT_OP_ShadowLinear && is_input && slot == 1) ||
           (code == LLMC_RT_OP_QuantizeRows && !is_input) || (code == LLMC_RT_OP_Gather && is_input && slot == 0);
}

static llmc_rt_status verify_op_tensors(fb_reader *r, const llmc_rt_plan *p,
                                        const rt_op_desc *op, llmc_rt_error *err)
{
    const uint32_t *arity = op_arity[op->code];
    if (op->inputs.len < arity[0] || op->inputs.len > arity[1] ||
        op->outputs.len < arity[2] || op->outputs.len > arity[3])
        return rt_fail(err, LLMC_RT_E_CORRUPT, "%u inputs and %u outputs; %s takes %u..%d "
                       "inputs and %u..%d outputs",
                       RT_N(op->inputs.len, op->outputs.len, arity[0],
                            arity[1] == ANY ? -1 : (int64_t)arity[1], arity[2],
                            arity[3] == ANY ? -1 : (int64_t)arity[3]),
                       RT_S(rt_op_code_name(op->code)));
    for (uint32_t k = 0; k < op->inputs.len + op->outputs.len; k++) {
        bool is_in = k < op->inputs.len;
        uint32_t slot = is_in ? k : k - op->inputs.len;
        uint32_t t = fb_vec_u32(r, is_in ? op->inputs : op->outputs, slot);
        if (t >= rt_plan_of(p)->n_tensors)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "%s %u: tensor %u >= %u tensors",
                           RT_N(slot, t, rt_plan_of(p)->n_tensors), RT_S(is_in ? "input" : "output"));
        tensor_meta m = rt_meta_of(r, p, t);
        if (!is_in && m.kind != KIND_ARENA)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "output %u: tensor %u is a weight",
                           RT_N(slot, t), NULL);
        if (m.layout != LLMC_RT_LAYOUT_Dense && !packed_operand(op->code, is_in, slot))
            return rt_fail(err, LLMC_RT_E_CORRUPT, "%s %u: tensor %u has layout %d; only "
                           "Linear's x, W and tiles, Gather's data, ShadowLinear's W and "
                           "QuantizeRows' output may be packed",
                           RT_N(slot, t, m.layout), RT_S(is_in ? "input" : "output"));
    }
    return LLMC_RT_OK;
}

static bool is_output_of(const fb_reader *r, const rt_op_desc *op, uint32_t t)
{
    for (uint32_t k = 0; k < op->outputs.len; k++)
        if (fb_vec_u32(r, op->outputs, k) == t)
            return true;
    return false;
}

/* Region i of a Copy op, read into *g. */
static llmc_rt_status verify_region(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                    uint32_t i, rt_region_desc *g, llmc_rt_error *err)
{
    llmc_rt_status st = rt_read_region(r, op, i, g, err);
    if (st)
        return st;
    if (g->src >= rt_plan_of(p)->n_tensors)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u src tensor %u >= %u tensors",
                       RT_N(i, g->src, rt_plan_of(p)->n_tensors), NULL);
    if (!is_output_of(r, op, g->dst))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u dst tensor %u is not an output "
                       "of the op", RT_N(i, g->dst), NULL);
    tensor_meta src = rt_meta_of(r, p, g->src), dst = rt_meta_of(r, p, g->dst);
    uint32_t rd = (uint32_t)dst.rank;
    if (src.dtype != dst.dtype)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u copies dtype %d into %d",
                       RT_N(i, src.dtype, dst.dtype), NULL);
    if (g->dst_start.len != rd || g->size.len != rd || g->src_axis.len != rd ||
        g->src_step.len != rd || g->src_start.len != (uint32_t)src.rank)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u: dst_start/size/src_axis/src_step "
                       "lengths %u/%u/%u/%u must be dst rank %d, src_start length %u src "
                       "rank %d", RT_N(i, g->dst_start.len, g->size.len, g->src_axis.len,
                                       g->src_step.len, rd, g->src_start.len, src.rank), NULL);
    for (uint32_t k = 0; k < rd; k++) {
        int axis = (int8_t)r->base[g->src_axis.pos + k];
        if (axis < -1 || axis >= src.rank)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u: src_axis[%u] = %d outside "
                           "[-1, %d)", RT_N(i, k, axis, src.rank), NULL);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status verify_reduce_axes(fb_reader *r, const rt_op_desc *op, tensor_meta x,
                                         tensor_meta y, llmc_rt_error *err)
{
    int64_t prev = -1;
    for (uint32_t k = 0; k < op->axes.len; k++) {
        int64_t axis = (int32_t)fb_vec_u32(r, op->axes, k);
        if (axis <= prev || axis >= x.rank)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "axes[%u] = %d: axes must ascend within "
                           "rank %d", RT_N(k, axis, x.rank), NULL);
        prev = axis;
    }
    int removed = op->axes.len ? (int)op->axes.len : x.rank; /* no axes: all of them */
    if (y.rank != (op->keepdims ? x.rank : x.rank - removed))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "output rank %d does not follow from input "
                       "rank %d", RT_N(y.rank, x.rank), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_layernorm_stats(fb_reader *r, const llmc_rt_plan *p,
                                             const rt_op_desc *op, int rank, llmc_rt_error *err)
{
    if (op->outputs.len == 2)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "LayerNorm has 1 output or 3 (y, mean, "
                       "inv_std_dev), not 2", NULL, NULL);
    for (uint32_t k = 1; k < op->outputs.len; k++) {
        tensor_meta stats = rt_meta_of(r, p, fb_vec_u32(r, op->outputs, k));
        if (stats.dtype != LLMC_RT_F32 || stats.rank != rank)
            return rt_bad_dtypes("LayerNorm mean and inv_std_dev float32 of the input's rank", err);
    }
    return LLMC_RT_OK;
}

/* ---- per-op checks: the op resolver's verify entries -------------------- */

llmc_rt_status llmc_rt_verify_Copy(op_check *c, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < c->op->regions.len; i++) {
        rt_region_desc g;
        llmc_rt_status st = verify_region(c->r, c->p, c->op, i, &g, err);
        if (st)
            return st;
        *c->region_affines = rt_add_capped(*c->region_affines, (uint64_t)g.dst_start.len +
                                                                   g.size.len + g.src_start.len);
    }
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_verify_Reshape(op_check *c, llmc_rt_error *err)
{
    return c->in[0].dtype == c->y.dtype ? LLMC_RT_OK : rt_bad_dtypes("Reshape T -> T", err);
}

llmc_rt_status llmc_rt_verify_Unary(op_check *c, llmc_rt_error *err)
{
    return k_unary_supports(c->op->kind, c->in[0].dtype, c->y.dtype)
               ? LLMC_RT_OK : rt_bad_dtypes("Unary kind with these dtypes", err);
}

llmc_rt_status llmc_rt_verify_Binary(op_check *c, llmc_rt_error *err)
{
    return k_binary_supports(c->op->kind, c->in[0].dtype, c->in[1].dtype, c->y.dtype)
               ? LLMC_RT_OK : rt_bad_dtypes("Binary kind with these dtypes", err);
}

llmc_rt_status llmc_rt_verify_Where(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    return in[0].dtype == LLMC_RT_BOOL && in[1].dtype == c->y.dtype && in[2].dtype == c->y.dtype
               ? LLMC_RT_OK : rt_bad_dtypes("Where bool, T, T -> T", err);
}

llmc_rt_status llmc_rt_verify_Cast(op_check *c, llmc_rt_error *err)
{
    return k_cast_supports(c->in[0].dtype, c->y.dtype) ? LLMC_RT_OK : rt_bad_dtypes("Cast", err);
}

llmc_rt_status llmc_rt_verify_MatMul(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    if (in[0].dtype != LLMC_RT_F32 || in[1].dtype != LLMC_RT_F32 || c->y.dtype != LLMC_RT_F32)
        return rt_bad_dtypes("MatMul float32", err);
    return in[0].rank && in[1].rank ? LLMC_RT_OK : rt_bad_axis(0, 0, err);
}

llmc_rt_status llmc_rt_verify_Reduce(op_check *c, llmc_rt_error *err)
{
    if (!k_reduce_supports(c->op->kind, c->in[0].dtype, c->y.dtype))
        return rt_bad_dtypes("Reduce kind with these dtypes", err);
    return verify_reduce_axes(c->r, c->op, c->in[0], c->y, err);
}

/* Softmax and LayerNorm: float32 inputs and output, an axis of x. */
static llmc_rt_status verify_f32_axis(op_check *c, llmc_rt_error *err)
{
    for (uint32_t k = 0; k < c->op->inputs.len; k++)
        if (c->in[k].dtype != LLMC_RT_F32)
            return rt_bad_dtypes("float32 only", err);
    if (c->y.dtype != LLMC_RT_F32)
        return rt_bad_dtypes("float32 only", err);
    if (c->op->axis < 0 || c->op->axis >= c->in[0].rank)
        return rt_bad_axis(c->op->axis, c->in[0].rank, err);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_verify_Softmax(op_check *c, llmc_rt_error *err)
{
    return verify_f32_axis(c, err);
}

llmc_rt_status llmc_rt_verify_LayerNorm(op_check *c, llmc_rt_error *err)
{
    llmc_rt_status st = verify_f32_axis(c, err);
    return st ? st : verify_layernorm_stats(c->r, c->p, c->op, c->in[0].rank, err);
}

llmc_rt_status llmc_rt_verify_Fill(op_check *c, llmc_rt_error *err)
{
    (void)c, (void)err; /* any dtype */
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_verify_Range(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    int t = c->y.dtype;
    if ((t != LLMC_RT_F32 && t != LLMC_RT_I32 && t != LLMC_RT_I64) || in[0].dtype != t ||
        in[1].dtype != t || in[2].dtype != t)
        return rt_bad_dtypes("Range T, T, T -> T with T float32/int32/int64", err);
    return c->y.rank == 1 ? LLMC_RT_OK : rt_bad_axis(0, c->y.rank, err);
}

llmc_rt_status llmc_rt_verify_Symbols(op_check *c, llmc_rt_error *err)
{
    return c->y.dtype == LLMC_RT_I64 && c->y.rank <= 1 ? LLMC_RT_OK
                                                       : rt_bad_dtypes("Symbols -> int64 [n]", err);
}

static llmc_rt_status verify_op_body(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                     const llmc_rt_op_resolver *ops, uint64_t *region_affines,
                                     llmc_rt_error *err)
{
    struct llmc_rt_op_check c;
    memset(&c, 0, sizeof c);
    if (op->code < 0 || op->code >= LLMC_RT_OP_COUNT)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "opcode %d unknown", RT_N(op->code), NULL);
    if (!ops->op[op->code])
        return rt_fail(err, LLMC_RT_E_RESOLVER, "op %s is not in the op resolver", NULL,
                       RT_S(rt_op_code_name(op->code)));
    llmc_rt_status st = verify_op_tensors(r, p, op, err);
    if (st)
        return st;
    c.r = r, c.p = p, c.op = op, c.region_affines = region_affines;
    for (uint32_t k = 0; k < op->inputs.len && k < MAX_META; k++)
        c.in[k] = rt_meta_of(r, p, fb_vec_u32(r, op->inputs, k));
    c.y = rt_meta_of(r, p, fb_vec_u32(r, op->outputs, 0));
    return ops->op[op->code]->verify(&c, err);
}

static llmc_rt_status verify_op(fb_reader *r, const llmc_rt_plan *p, uint32_t i,
                                const llmc_rt_op_resolver *ops, uint64_t *region_affines,
                                llmc_rt_error *err)
{
    rt_op_desc op;
    llmc_rt_status st = rt_read_op(r, p, i, &op, err);
    if (st)
        return st;
    st = verify_op_body(r, p, &op, ops, region_affines, err);
    if (st)
        return rt_prefix(err, st, "op %u (%s '%s'): ", RT_N(i),
                         RT_S(rt_op_code_name(op.code), op.name));
    return LLMC_RT_OK;
}

llmc_rt_status rt_verify_ops(fb_reader *r, const llmc_rt_plan *p, const llmc_rt_op_resolver *ops,
                             uint64_t *region_affines, llmc_rt_error *err)
{
    llmc_rt_status st = LLMC_RT_OK;
    for (uint32_t i = 0; !st && i < rt_plan_of(p)->n_ops; i++)
        st = verify_op(r, p, i, ops, region_affines, err);
    return st;
}
