/* Session init's prepare steps of the op codes with fields of their own
 * (llmc_rt_op_entry: Copy's regions, Symbols' values, Reduce's axes, the
 * packed shape of W), and the pools they take entries from.  A resolver
 * without those codes links none of the steps. */
#include <string.h>

#include "op_resolver.h"
#include "rt_msg.h"
#include "session_prepared.h"
#include "llmc_rt_internal.h"

/* Takes n entries of a pool of `count` of which *used are taken. */
llmc_rt_status rt_prep_take(uint32_t *used, uint64_t count, uint32_t n, const char *pool,
                            rt_prep_list *run, llmc_rt_error *err)
{
    if (n > count - *used) /* the verifier counted what this file takes */
        return rt_fail(err, LLMC_RT_E_CORRUPT, "the %s pool (%u entries) is full",
                       RT_N((int64_t)count), RT_S(pool));
    run->first = *used;
    run->len = n;
    *used += n;
    return LLMC_RT_OK;
}

/* Appends the n Affines of vector v to the Affine pool. */
llmc_rt_status rt_prep_take_affines(fb_reader *r, prep_fill *f, fb_vector v, rt_prep_list *run,
                                    llmc_rt_error *err)
{
    llmc_rt_status st = rt_prep_take(&f->affines, rt_plan_of(f->plan)->n_affines, v.len,
                                     "Affine", run, err);
    for (uint32_t k = 0; !st && k < v.len; k++)
        f->pr->affines[run->first + k] = fb_affine(fb_vec_affine(r, v, k));
    return st;
}

/* One region of a Copy op: its Affines in the pool, its axes and steps. */
static llmc_rt_status prepare_region(fb_reader *r, prep_fill *f, const rt_op_desc *op,
                                     uint32_t i, rt_prep_region *g, llmc_rt_error *err)
{
    rt_region_desc d;
    rt_prep_list dst_start, size, src_start;
    llmc_rt_status st = rt_read_region(r, op, i, &d, err);
    if (!st) /* three consecutive runs: one from dst_start.first on */
        st = rt_prep_take_affines(r, f, d.dst_start, &dst_start, err);
    if (!st)
        st = rt_prep_take_affines(r, f, d.size, &size, err);
    if (!st)
        st = rt_prep_take_affines(r, f, d.src_start, &src_start, err);
    if (st)
        return st;
    memset(g, 0, sizeof *g);
    g->src = d.src;
    g->dst = d.dst;
    g->affines = dst_start.first;
    for (uint32_t k = 0; k < d.src_axis.len; k++) { /* verified: dst rank */
        g->src_axis[k] = (int8_t)r->base[d.src_axis.pos + k];
        g->src_step[k] = fb_i64(r->base + d.src_step.pos + 8u * k);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status prepare_regions(fb_reader *r, prep_fill *f, const rt_op_desc *d,
                                      rt_prep_op *o, llmc_rt_error *err)
{
    llmc_rt_status st = rt_prep_take(&f->regions, rt_plan_of(f->plan)->n_regions,
                                     d->regions.len, "region", &o->regions, err);
    for (uint32_t i = 0; !st && i < d->regions.len; i++) {
        st = prepare_region(r, f, d, i, &f->pr->regions[o->regions.first + i], err);
        if (st)
            st = rt_prefix(err, st, "region %u: ", RT_N(i), NULL);
    }
    return st;
}

/* Input 1 of a Linear or ShadowLinear, W, is a weight (static dims): its
 * packed shape, once. */
static llmc_rt_status prepare_weight_shape(const rt_prepared *pr, rt_prep_op *o,
                                           llmc_rt_error *err)
{
    const rt_prep_tensor *w = &pr->tensors[prep_operand(pr, o->inputs, 1)];
    int64_t dims[LLMC_RT_MAX_RANK];
    uint64_t bytes;
    llmc_rt_status st = rt_dims_at(&pr->affines[w->dims], w->rank, &w->format, 0, 0, dims,
                                   &bytes, LLMC_RT_E_CORRUPT, err);
    bool ok = !st;
    if (ok && w->format.layout == LLMC_RT_LAYOUT_QWeightTiles)
        ok = rt_qweight_shape_of(&w->format, w->rank, dims, &o->w.q);
    else if (ok && w->format.layout == LLMC_RT_LAYOUT_FWeightTiles)
        ok = rt_ftile_shape_of(&w->format, w->rank, dims, &o->w.f);
    return ok ? LLMC_RT_OK : rt_fail(err, LLMC_RT_E_CORRUPT, "W has an invalid packed format",
                                     NULL, NULL);
}

llmc_rt_status rt_prepare_Copy(const struct llmc_rt_op_prep *p, llmc_rt_error *err)
{
    return prepare_regions(p->r, p->f, p->d, p->o, err);
}

llmc_rt_status rt_prepare_Symbols(const struct llmc_rt_op_prep *p, llmc_rt_error *err)
{
    return rt_prep_take_affines(p->r, p->f, p->d->values, &p->o->values, err);
}

/* verified: ascending axes within the rank (<= 8) */
llmc_rt_status rt_prepare_Reduce(const struct llmc_rt_op_prep *p, llmc_rt_error *err)
{
    rt_prep_op *o = p->o;
    (void)err;
    for (o->n_axes = 0; (uint32_t)o->n_axes < p->d->axes.len; o->n_axes++)
        o->axes[o->n_axes] = (int32_t)fb_vec_u32(p->r, p->d->axes, (uint32_t)o->n_axes);
    return LLMC_RT_OK;
}

llmc_rt_status rt_prepare_Linear(const struct llmc_rt_op_prep *p, llmc_rt_error *err)
{
    const rt_prep_op *o = p->o;
    int next = 2 + (o->kind & 1) + (o->kind >> 1 & 1); /* bias, residual */
    if ((uint32_t)next != o->inputs.len) /* the verifier's kind check */
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d does not match %u inputs",
                       RT_N(o->kind, o->inputs.len), NULL);
    return prepare_weight_shape(p->f->pr, p->o, err);
}

llmc_rt_status rt_prepare_ShadowLinear(const struct llmc_rt_op_prep *p, llmc_rt_error *err)
{
    return prepare_weight_shape(p->f->pr, p->o, err);
}
