/* Reduce Mean/Sum/Max/Min/Prod over a set of axes. */
#include <math.h>

#include "kernels.h"
#include "plan_format.h"
#include "rt_msg.h"

bool k_reduce_supports(int kind, int x_dtype, int y_dtype)
{
    if (kind < 0 || kind >= REDUCE_COUNT || x_dtype != y_dtype)
        return false;
    return x_dtype == LLMC_RT_F32 ||
           (kind != REDUCE_MEAN && (x_dtype == LLMC_RT_I64 || x_dtype == LLMC_RT_I32));
}

/* The input's axes split into kept and reduced, each with dims and strides. */
typedef struct {
    int n_kept, n_red;
    int64_t kept_dims[RT_R], kept_strides[RT_R];
    int64_t red_dims[RT_R], red_strides[RT_R];
    int64_t red_count;
} reduce_plan;

static llmc_rt_status plan_axes(const rt_view *x, const int *axes, int n_axes, bool keepdims,
                                const rt_view *y, reduce_plan *rp, llmc_rt_error *err)
{
    bool reduced[RT_R] = {false};
    int64_t strides[RT_R];
    rt_view expect = {y->dtype, 0, {0}, 0};
    for (int i = 0; i < n_axes; i++) {
        if (axes[i] < 0 || axes[i] >= x->rank || reduced[axes[i]])
            return rt_fail(err, LLMC_RT_E_EXEC, "axis %d invalid or repeated for rank %d",
                           RT_N(axes[i], x->rank), NULL);
        reduced[axes[i]] = true;
    }
    k_strides(x, strides);
    rp->n_kept = rp->n_red = 0;
    rp->red_count = 1;
    for (int a = 0; a < x->rank; a++) {
        bool red = reduced[a] || n_axes == 0;
        if (red) {
            rp->red_dims[rp->n_red] = x->dims[a];
            rp->red_strides[rp->n_red++] = strides[a];
            rp->red_count *= x->dims[a];
        } else {
            rp->kept_dims[rp->n_kept] = x->dims[a];
            rp->kept_strides[rp->n_kept++] = strides[a];
        }
        if (!red || keepdims)
            expect.dims[expect.rank++] = red ? 1 : x->dims[a];
    }
    if (!k_same_dims(&expect, y)) {
        char tx[96], te[96], ty[96];
        return rt_fail(err, LLMC_RT_E_EXEC, "reducing %s gives %s, not %s", NULL,
                       RT_S(k_dims_text(x, tx, sizeof tx), k_dims_text(&expect, te, sizeof te),
                            k_dims_text(y, ty, sizeof ty)));
    }
    return LLMC_RT_OK;
}

/* Sum and Mean add with a compensated float sum (kernels.h k_fsum). */
static float reduce_f32(int kind, const float *x, const reduce_plan *rp)
{
    float acc = kind == REDUCE_PROD ? 1.0f : kind == REDUCE_MAX ? -INFINITY : INFINITY;
    k_fsum sum = {0, 0};
    int inner = rp->n_red - 1; /* the last reduced axis runs as a strided loop */
    int64_t len = rp->red_dims[inner], step = rp->red_strides[inner];
    /* x's reduced elements lie in memory when there are any */
    int64_t outer = rp->red_count ? (ptrdiff_t)rp->red_count / (ptrdiff_t)len : 0;
    const int64_t *strides[1] = {rp->red_strides};
    k_walk it;
    k_walk_init(&it, inner, rp->red_dims, 1, strides);
    for (int64_t o = 0; o < outer; o++, k_walk_next(&it)) {
        const float *p = x + it.off[0];
        for (int64_t j = 0; j < len; j++) {
            float v = p[j * step];
            switch (kind) {
            case REDUCE_PROD: acc *= v; break;
            case REDUCE_MAX: acc = v > acc || v != v ? v : acc; break;
            case REDUCE_MIN: acc = v < acc || v != v ? v : acc; break;
            default: k_fsum_add(&sum, v); break;
            }
        }
    }
    if (kind == REDUCE_SUM || kind == REDUCE_MEAN)
        acc = k_fsum_value(&sum);
    return kind == REDUCE_MEAN ? acc / k_i64_to_f32(rp->red_count) : acc;
}

static int64_t reduce_int(int kind, const rt_view *x, int64_t base, const reduce_plan *rp)
{
    uint64_t acc = kind == REDUCE_PROD ? 1u : 0u; /* unsigned: wraps instead of overflowing */
    int64_t best = kind == REDUCE_MAX ? INT64_MIN : INT64_MAX;
    const int64_t *strides[1] = {rp->red_strides};
    k_walk it;
    k_walk_init(&it, rp->n_red, rp->red_dims, 1, strides);
    for (int64_t o = 0; o < rp->red_count; o++, k_walk_next(&it)) {
        int64_t v = k_load_i(x, base + it.off[0]);
        if (kind == REDUCE_SUM)
            acc += (uint64_t)v;
        else if (kind == REDUCE_PROD)
            acc *= (uint64_t)v;
        else if (kind == REDUCE_MAX ? v > best : v < best)
            best = v;
    }
    if (kind == REDUCE_MAX || kind == REDUCE_MIN)
        return best;
    return acc <= INT64_MAX ? (int64_t)acc : -(int64_t)~acc - 1;
}

llmc_rt_status k_reduce(int kind, const rt_view *x, const int *axes, int n_axes,
                        bool keepdims, rt_view *y, llmc_rt_error *err)
{
    reduce_plan rp;
    if (!k_reduce_supports(kind, x->dtype, y->dtype))
        return rt_fail(err, LLMC_RT_E_EXEC, "reduce kind %d does not take dtype %d -> %d",
                       RT_N(kind, x->dtype, y->dtype), NULL);
    llmc_rt_status st = plan_axes(x, axes, n_axes, keepdims, y, &rp, err);
    if (st)
        return st;
    int64_t n_out = k_count(y);
    const int64_t *kept[1] = {rp.kept_strides};
    k_walk out;
    k_walk_init(&out, rp.n_kept, rp.kept_dims, 1, kept);
    for (int64_t i = 0; i < n_out; i++, k_walk_next(&out)) {
        int64_t base = out.off[0];
        if (x->dtype != LLMC_RT_F32)
            k_store_i(y, i, reduce_int(kind, x, base, &rp));
        else if (rp.n_red == 0)
            ((float *)y->data)[i] = ((const float *)x->data)[base];
        else
            ((float *)y->data)[i] = reduce_f32(kind, (const float *)x->data + base, &rp);
    }
    return LLMC_RT_OK;
}
