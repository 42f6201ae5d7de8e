/* Copy regions (Region in schemas/plan.fbs) and Reshape. */
#include <string.h>

#include "kernels.h"
#include "plan_format.h"
#include "rt_msg.h"

static llmc_rt_status check_axes(const rt_region *g, const rt_view *src, const rt_view *dst,
                                 llmc_rt_error *err)
{
    for (int k = 0; k < dst->rank; k++) {
        if (g->src_axis[k] < -1 || g->src_axis[k] >= src->rank)
            return rt_fail(err, LLMC_RT_E_EXEC, "dst axis %d walks src axis %d of rank %d",
                           RT_N(k, g->src_axis[k], src->rank), NULL);
        if (g->size[k] < 0)
            return rt_fail(err, LLMC_RT_E_EXEC, "dst axis %d: size %d < 0",
                           RT_N(k, g->size[k]), NULL);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status check_dst_box(const rt_region *g, const rt_view *dst, llmc_rt_error *err)
{
    for (int k = 0; k < dst->rank; k++)
        if (g->dst_start[k] < 0 || g->size[k] > dst->dims[k] - g->dst_start[k])
            return rt_fail(err, LLMC_RT_E_EXEC, "dst axis %d: [%d, %d + %d) outside dim %d",
                           RT_N(k, g->dst_start[k], g->dst_start[k], g->size[k],
                                dst->dims[k]), NULL);
    return LLMC_RT_OK;
}

/* The lowest and highest source index along axis a the region touches. */
static bool src_extent(const rt_region *g, int dst_rank, int a, int64_t *lo, int64_t *hi)
{
    *lo = *hi = g->src_start[a];
    for (int k = 0; k < dst_rank; k++) {
        int64_t span;
        if (g->src_axis[k] != a || g->size[k] <= 1)
            continue;
        if (!rt_mul_i64(g->src_step[k], g->size[k] - 1, &span) ||
            !rt_add_i64(span < 0 ? *lo : *hi, span, span < 0 ? lo : hi))
            return false;
    }
    return true;
}

static llmc_rt_status check_src_box(const rt_region *g, const rt_view *src, int dst_rank,
                                    llmc_rt_error *err)
{
    for (int a = 0; a < src->rank; a++) {
        int64_t lo, hi;
        if (!src_extent(g, dst_rank, a, &lo, &hi))
            return rt_fail(err, LLMC_RT_E_EXEC, "src axis %d: index overflows", RT_N(a), NULL);
        if (lo < 0 || hi >= src->dims[a])
            return rt_fail(err, LLMC_RT_E_EXEC, "src axis %d: indices [%d, %d] outside dim %d",
                           RT_N(a, lo, hi, src->dims[a]), NULL);
    }
    return LLMC_RT_OK;
}

static bool region_empty(const rt_region *g, int dst_rank)
{
    for (int k = 0; k < dst_rank; k++)
        if (g->size[k] == 0)
            return true;
    return false;
}

static void copy_checked_region(const rt_region *g, const rt_view *src, rt_view *dst)
{
    int rd = dst->rank;
    size_t es = k_dtype_size(dst->dtype);
    int64_t dst_strides[RT_R], src_strides[RT_R], src_steps[RT_R];
    int64_t src_base = 0, dst_base = 0;
    k_strides(dst, dst_strides);
    k_strides(src, src_strides);
    for (int a = 0; a < src->rank; a++)
        src_base += g->src_start[a] * src_strides[a];
    for (int k = 0; k < rd; k++) {
        dst_base += g->dst_start[k] * dst_strides[k];
        /* size 1 never steps, and its step may be anything */
        bool walks = g->src_axis[k] >= 0 && g->size[k] > 1;
        src_steps[k] = walks ? g->src_step[k] * src_strides[g->src_axis[k]] : 0;
    }
    const uint8_t *s = src->data;
    uint8_t *d = dst->data;
    int64_t len = rd ? g->size[rd - 1] : 1, rows = 1;
    int64_t s_inner = rd ? src_steps[rd - 1] : 0;
    for (int k = 0; k + 1 < rd; k++)
        rows *= g->size[k];
    const int64_t *steps[2] = {src_steps, dst_strides};
    k_walk it;
    k_walk_init(&it, rd ? rd - 1 : 0, g->size, 2, steps);
    for (int64_t r = 0; r < rows; r++, k_walk_next(&it)) {
        int64_t so = src_base + it.off[0], dof = dst_base + it.off[1];
        if (s_inner == 1) { /* contiguous on both sides */
            memmove(d + dof * es, s + so * es, (size_t)len * es);
            continue;
        }
        for (int64_t j = 0; j < len; j++)
            memmove(d + (dof + j) * es, s + (so + j * s_inner) * es, es);
    }
}

llmc_rt_status k_copy_region(const rt_region *g, const rt_view *src, rt_view *dst,
                             llmc_rt_error *err)
{
    if (src->dtype != dst->dtype || !k_dtype_size(dst->dtype))
        return rt_fail(err, LLMC_RT_E_EXEC, "src dtype %d != dst dtype %d",
                       RT_N(src->dtype, dst->dtype), NULL);
    llmc_rt_status st = check_axes(g, src, dst, err);
    if (st || region_empty(g, dst->rank))
        return st;
    st = check_dst_box(g, dst, err);
    if (!st)
        st = check_src_box(g, src, dst->rank, err);
    if (!st)
        copy_checked_region(g, src, dst);
    return st;
}

llmc_rt_status k_reshape(const rt_view *x, rt_view *y, llmc_rt_error *err)
{
    if (x->dtype != y->dtype || !k_dtype_size(x->dtype))
        return rt_fail(err, LLMC_RT_E_EXEC, "dtype %d != %d", RT_N(x->dtype, y->dtype), NULL);
    if (k_count(x) != k_count(y))
        return rt_fail(err, LLMC_RT_E_EXEC, "element counts differ: %d vs %d",
                       RT_N(k_count(x), k_count(y)), NULL);
    memmove(y->data, x->data, (size_t)k_count(x) * k_dtype_size(x->dtype));
    return LLMC_RT_OK;
}
