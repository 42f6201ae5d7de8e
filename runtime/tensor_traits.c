/* Tensor sizes and the checked arithmetic they use (tensor_traits.h). */
#include "tensor_traits.h"

#include "rt_div64.h"

/* Checked int64 arithmetic: false on overflow.  GCC and clang's builtins
 * compile to a multiply and a flag test on every target the runtime builds
 * for (about 60 bytes of Thumb-2, against 320 for the portable division
 * test). */
bool rt_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

bool rt_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* A KV cache row's bytes (tensor_traits.h). */
uint64_t rt_kv_row_bytes(int cache_dtype, int which, int64_t head_dim)
{
    int dtype = rt_kv_row_dtype(cache_dtype, which);
    if (!rt_kv_dtype_known(cache_dtype))
        return 0;
    if (dtype == LLMC_RT_I8)
        return rt_kv_scale_offset(head_dim) + sizeof(float);
    return rt_dtype_bytes(dtype) * (uint64_t)head_dim;
}

/* The packed shapes' derived fields (quant_format.h). */
bool rt_qweight_shape_init_coef(rt_qweight_shape *s, int bits, int hp, int lp, int64_t n,
                                int64_t k, int64_t group, rt_qcoef coef)
{
    if ((bits != 4 && bits != 8) || !rt_qtile_dims_ok(hp, n, k) || !rt_qdepth_ok(lp, group) ||
        (coef != RT_QCOEF_HALF && (coef != RT_QCOEF_FLOAT || group > RT_QCOEF_FLOAT_MAX_GROUP)))
        return false;
    s->coef = coef;
    s->bits = bits;
    s->hp = hp;
    s->lp = lp;
    s->n = n;
    s->k = k;
    s->group = group;
    s->np = rt_qround_up(n, hp);
    s->kp = rt_qround_up(k, group);
    return true;
}

bool rt_qact_shape_init(rt_qact_shape *s, int ep, int lp, int64_t m, int64_t k, int64_t group)
{
    if (!rt_qtile_dims_ok(ep, m, k) || !rt_qdepth_ok(lp, group))
        return false;
    s->ep = ep;
    s->lp = lp;
    s->m = m;
    s->k = k;
    s->group = group;
    s->mp = rt_qround_up(m, ep);
    s->kp = rt_qround_up(k, group);
    return true;
}

/* max(rows, 1) * cols <= RT_TT_MAX_ELEMS, for non-negative dims. */
static bool elems_fit(int64_t rows, int64_t cols)
{
    return cols <= (int64_t)rt_udiv64(RT_TT_MAX_ELEMS, rows > 0 ? (uint64_t)rows : 1u);
}

/* W [n, k] of a QWeightTiles tensor. */
bool rt_qweight_shape_of(const rt_tensor_format *f, int rank, const int64_t *dims,
                         rt_qweight_shape *s)
{
    int bits = f->dtype == LLMC_RT_I8 ? 8 : f->dtype == LLMC_RT_U4 ? 4 : 0;
    rt_qcoef coef = f->coef == LLMC_RT_F32 ? RT_QCOEF_FLOAT : RT_QCOEF_HALF;
    return f->layout == LLMC_RT_LAYOUT_QWeightTiles && rank == 2 && bits &&
           (f->coef == LLMC_RT_F16 || f->coef == LLMC_RT_F32) && elems_fit(dims[0], dims[1]) &&
           rt_qweight_shape_init_coef(s, bits, f->tile_rows, f->tile_depth, dims[0], dims[1],
                                      (int64_t)f->group, coef);
}

/* x [..., k] of a QActTiles tensor: m = product of the leading dims. */
bool rt_qact_shape_of(const rt_tensor_format *f, int rank, const int64_t *dims, rt_qact_shape *s)
{
    int64_t m = 1;
    if (f->layout != LLMC_RT_LAYOUT_QActTiles || f->dtype != LLMC_RT_I8 || rank < 1)
        return false;
    for (int a = 0; a + 1 < rank; a++) {
        if (!elems_fit(dims[a], m))
            return false;
        m *= dims[a];
    }
    return elems_fit(m, dims[rank - 1]) &&
           rt_qact_shape_init(s, f->tile_rows, f->tile_depth, m, dims[rank - 1],
                              (int64_t)f->group);
}

/* W [n, k] of an FWeightTiles tensor. */
bool rt_ftile_shape_of(const rt_tensor_format *f, int rank, const int64_t *dims, rt_ftile_shape *s)
{
    return f->layout == LLMC_RT_LAYOUT_FWeightTiles && f->dtype == LLMC_RT_F32 && rank == 2 &&
           elems_fit(dims[0], dims[1]) &&
           rt_ftile_shape_init(s, f->tile_rows, dims[0], dims[1]);
}

/* Bytes of `n` bytes per element over non-negative dims (row-major, no
 * padding); false when the size overflows int64.  Non-zero dims must fit
 * even if another dim is 0. */
static bool rt_dense_bytes(uint64_t n, int rank, const int64_t *dims, uint64_t *bytes)
{
    bool empty = false;
    for (int a = 0; a < rank; a++) {
        if (dims[a] == 0)
            empty = true;
        else if (n > rt_udiv64(INT64_MAX, (uint64_t)dims[a]))
            return false;
        else
            n *= (uint64_t)dims[a];
    }
    *bytes = empty ? 0 : n;
    return true;
}

/* Bytes of a tensor with non-negative dims; false when the format is not
 * valid for them or the size overflows int64. */
bool rt_tensor_bytes(const rt_tensor_format *f, int rank, const int64_t *dims, uint64_t *bytes)
{
    rt_qweight_shape qw;
    rt_qact_shape qa;
    rt_ftile_shape fw;
    switch (f->layout) {
    case LLMC_RT_LAYOUT_Dense:
        return rt_dtype_bytes(f->dtype) && rt_dense_bytes(rt_dtype_bytes(f->dtype), rank, dims, bytes);
    case LLMC_RT_LAYOUT_Half: /* float32 values as binary16 */
        return f->dtype == LLMC_RT_F32 && rt_dense_bytes(RT_HALF_VALUE_BITS / 8u, rank, dims, bytes);
    case LLMC_RT_LAYOUT_QWeightTiles:
        if (!rt_qweight_shape_of(f, rank, dims, &qw))
            return false;
        *bytes = rt_qweight_bytes(&qw);
        return true;
    case LLMC_RT_LAYOUT_QActTiles:
        if (!rt_qact_shape_of(f, rank, dims, &qa))
            return false;
        *bytes = rt_qact_bytes(&qa);
        return true;
    case LLMC_RT_LAYOUT_FWeightTiles:
        if (!rt_ftile_shape_of(f, rank, dims, &fw))
            return false;
        *bytes = rt_ftile_bytes(&fw);
        return true;
    default:
        return false;
    }
}
