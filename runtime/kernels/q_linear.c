/* The quantized Linear drivers: QuantizeRows (float rows into activation
 * tiles) and QLinear (activation tiles by packed weight blocks), portable C
 * over any target's micro-kernels (kernel_table.h).
 *
 * Both split their work into tasks whose size depends on the shapes only,
 * and every output element is computed by exactly one micro-kernel call
 * whose arguments do not depend on the split, so the result is bitwise the
 * same for any thread count. */
#include <string.h>

#include "q_linear_job.h"
#include "rt_div64.h"
#include "rt_msg.h"

/* ---- shared checks -------------------------------------------------------- */

static bool qact_shape_ok(const rt_qact_shape *s)
{
    rt_qact_shape t;
    return rt_qact_shape_init(&t, s->ep, s->lp, s->m, s->k, s->group) && t.mp == s->mp &&
           t.kp == s->kp;
}

static bool qweight_shape_ok(const rt_qweight_shape *s)
{
    rt_qweight_shape t;
    return rt_qweight_shape_init_coef(&t, s->bits, s->hp, s->lp, s->n, s->k, s->group,
                                      s->coef) &&
           t.np == s->np && t.kp == s->kp;
}

/* The product of every dim but the last (the rows of a [..., k] view). */
static int64_t leading_rows(const rt_view *t)
{
    int64_t m = 1;
    for (int a = 0; a + 1 < t->rank; a++)
        m *= t->dims[a];
    return m;
}

static bool is_bytes(const rt_view *t)
{
    return t->dtype == LLMC_RT_U8 || t->dtype == LLMC_RT_I8;
}

/* The exact int32 group products of quant_format.h stay below 2^31 while
 * group * 128 * 127 does (a Float32 coefficients' group is smaller:
 * RT_QCOEF_FLOAT_MAX_GROUP). */
#define MAX_GROUP 131072

/* The tiles' scales and sums are float32 and int32 at offsets that are
 * multiples of 64 from the data pointer. */
static bool tiles_addressable(const rt_view *xq, const rt_qact_shape *s)
{
    return s->mp == 0 || (xq->data && !((uintptr_t)xq->data & 3u));
}

static llmc_rt_status check_table(const rt_kernels *kt, const char *op, llmc_rt_error *err)
{
    if (!kt || !kt->quantize_rows || !kt->qtile)
        return rt_fail(err, LLMC_RT_E_EXEC, "%s: no quantized kernels in this table", NULL,
                       RT_S(op));
    return LLMC_RT_OK;
}

static llmc_rt_status check_act_shape(const rt_kernels *kt, const rt_qact_shape *s,
                                      const char *op, llmc_rt_error *err)
{
    if (!s || !qact_shape_ok(s) || s->group > MAX_GROUP)
        return rt_fail(err, LLMC_RT_E_EXEC, "%s: invalid activation tile shape", NULL,
                       RT_S(op));
    if (s->ep != kt->q_ep || s->lp != kt->q_lp)
        return rt_fail(err, LLMC_RT_E_EXEC, "%s: activation tiles ep %d lp %d, but target "
                       "'%s' uses ep %d lp %d", RT_N(s->ep, s->lp, kt->q_ep, kt->q_lp),
                       RT_S(op, kt->target));
    return LLMC_RT_OK;
}

/* ---- QuantizeRows ---------------------------------------------------------- */

/* Activation row tiles per task: about QUANT_TASK_ELEMS inputs, enough to
 * hide handing a task out (a decode row is one task). */
#define QUANT_TASK_ELEMS 32768

typedef struct {
    const rt_kernels *kt;
    const float *x;          /* [m, k] */
    const rt_qact_shape *s;
    uint8_t *xq;             /* rt_qact_bytes(s) */
    float scale;             /* > 0: the static scale; 0: each (row, group)'s abs-max */
    ptrdiff_t tiles_per_task;
} quantize_job;

/* Zeroes what quantize_rows does not write in row tile et: its padding
 * rows (data, scale, group sums) and padding columns [k, kp). */
static void zero_tile_padding(const rt_qact_shape *s, ptrdiff_t et, uint8_t *xq)
{
    ptrdiff_t e0 = et * s->ep, e1 = e0 + s->ep, m = (ptrdiff_t)s->m, kp = (ptrdiff_t)s->kp;
    ptrdiff_t groups = kp / (ptrdiff_t)s->group;
    if (e1 > m) {
        /* the tile's data is contiguous: clear all of it (real rows are
         * written over right after) */
        memset(xq + (size_t)e0 * (size_t)kp, 0, (size_t)(s->ep * kp));
        float *scales = (float *)(xq + rt_qact_scales_offset(s));
        int32_t *sums = (int32_t *)(xq + rt_qact_sums_offset(s));
        for (ptrdiff_t i = m * groups; i < e1 * groups; i++) {
            scales[i] = 0.0f;
            sums[i] = 0;
        }
        return;
    }
    for (ptrdiff_t e = e0; e < e1; e++)
        for (ptrdiff_t c = (ptrdiff_t)s->k; c < kp; c++)
            xq[rt_qact_index(s, e, c)] = 0;
}

/* The alignment gaps before the scales and the sums: zero as well, so the
 * whole buffer is a function of x. */
static void zero_gaps(const rt_qact_shape *s, uint8_t *xq)
{
    size_t data_end = (size_t)s->mp * (size_t)s->kp;
    size_t scales_end = rt_qact_scales_offset(s) + 4u * (size_t)rt_qact_coefs(s);
    memset(xq + data_end, 0, (size_t)(rt_qact_scales_offset(s) - data_end));
    memset(xq + scales_end, 0, (size_t)(rt_qact_sums_offset(s) - scales_end));
}

static void quantize_task(void *ctx, uint32_t i)
{
    const quantize_job *J = ctx;
    const rt_qact_shape *s = J->s;
    ptrdiff_t et0 = (ptrdiff_t)i * J->tiles_per_task, et1 = et0 + J->tiles_per_task;
    ptrdiff_t m = (ptrdiff_t)s->m, tiles = (ptrdiff_t)s->mp / s->ep;
    if (et1 > tiles)
        et1 = tiles;
    for (ptrdiff_t et = et0; et < et1; et++) {
        ptrdiff_t r0 = et * s->ep, r1 = r0 + s->ep < m ? r0 + s->ep : m;
        zero_tile_padding(s, et, J->xq);
        J->kt->quantize_rows(J->x, s->k, s, r0, r1, J->scale, J->xq);
    }
}

llmc_rt_status k_quantize_rows(const rt_kernels *kt, const rt_view *x, const rt_qact_shape *s,
                               float scale, rt_view *xq, const rt_parallel *par,
                               llmc_rt_error *err)
{
    static const char op[] = "QuantizeRows";
    llmc_rt_status st = check_table(kt, op, err);
    if (st == LLMC_RT_OK)
        st = check_act_shape(kt, s, op, err);
    if (st != LLMC_RT_OK)
        return st;
    if (!x || !xq || x->dtype != LLMC_RT_F32 || !is_bytes(xq) || !tiles_addressable(xq, s))
        return rt_fail(err, LLMC_RT_E_EXEC, "QuantizeRows takes float32 rows into uint8 or "
                       "int8 tiles (4-byte aligned)", NULL, NULL);
    char tx[96], tq[96];
    if (x->rank < 1 || !k_same_dims(x, xq) || x->dims[x->rank - 1] != s->k ||
        leading_rows(x) != s->m)
        return rt_fail(err, LLMC_RT_E_EXEC, "QuantizeRows of %s into %s: both must be [..., "
                       "k] with m = %d rows of k = %d", RT_N(s->m, s->k),
                       RT_S(k_dims_text(x, tx, sizeof tx), k_dims_text(xq, tq, sizeof tq)));
    quantize_job J = {kt, x->data, s, xq->data, scale, 1};
    int64_t tile_elems = s->ep * (s->k ? s->k : 1);
    if (tile_elems < QUANT_TASK_ELEMS)
        J.tiles_per_task = QUANT_TASK_ELEMS / (int32_t)tile_elems;
    ptrdiff_t tiles = (ptrdiff_t)s->mp / s->ep;
    int64_t tasks = (tiles + J.tiles_per_task - 1) / J.tiles_per_task;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "QuantizeRows has too many rows", NULL, NULL);
    if (s->mp)
        zero_gaps(s, J.xq);
    rt_parallel_for(par, (uint32_t)tasks, quantize_task, &J);
    return LLMC_RT_OK;
}

/* ---- QLinear --------------------------------------------------------------- */

/* GEMV path (few rows, bound by the weight stream): tasks of about
 * GEMV_TASK_BYTES of weights, then the tail's smaller ones (below),
 * numbered in memory order, so that a pool which gives each thread a
 * contiguous range of task indices (llmc_threads) streams each thread's
 * share of a Linear as one run, and the last tasks are small enough to
 * even the threads out.  Measured on an Intel Xeon (family 6 model 167,
 * Qwen2-0.5B w4a8 decode, paired runs against tasks of 1 MiB handed out
 * one at a time, medians of four or five): these 32 KiB tasks and their
 * tail 1.05x the tok/s on two threads and 0.99x on one (a task's call and
 * claim, ~11,000 a token); equal tasks of 32 KiB 1.06x and 0.99-1.01x, of
 * 64 KiB 1.03-1.04x and 1.00-1.02x, of 128 KiB 1.04x and 1.00x. */
#ifndef GEMV_TASK_BYTES
#define GEMV_TASK_BYTES 32768
#endif
/* GEMM path (compute-bound): a task's weights (~GEMM_TASK_BYTES) stay in L2
 * while blocks of ~ACT_BLOCK_BYTES activation tiles pass over them, so each
 * activation byte is fetched from L3/DRAM once per task, not once per W row
 * tile. */
#define GEMM_TASK_BYTES 32768
#define ACT_BLOCK_BYTES 65536

/* y[h] = out[h] (+ bias[h]) (+ res[h]) for h < n, in that order on
 * every target (out has the activation scales: quant_format.h); the branches are outside the loops, and the values go
 * through a local array, which aliases nothing (res may be y), so that the
 * compiler vectorizes the loops of a whole tile of WHOLE_TILE columns:
 * a few vector stores instead of a scalar store per output, which filled
 * the store buffer while the rows' cache lines missed. */
#define WHOLE_TILE 8 /* hp of every table today */

static inline void tile_values(float *v, const float *out, const float *bias,
                               const float *res, ptrdiff_t n)
{
    for (ptrdiff_t h = 0; h < n; h++)
        v[h] = out[h];
    if (bias)
        for (ptrdiff_t h = 0; h < n; h++)
            v[h] += bias[h];
    if (res)
        for (ptrdiff_t h = 0; h < n; h++)
            v[h] += res[h];
}

static void store_row(float *y, const float *out, const float *bias, const float *res,
                      ptrdiff_t n)
{
    float v[RT_QTILE_MAX_OUT];
    if (n == WHOLE_TILE) {
        tile_values(v, out, bias, res, WHOLE_TILE);
        memcpy(y, v, sizeof(float) * WHOLE_TILE);
        return;
    }
    tile_values(v, out, bias, res, n);
    memcpy(y, v, sizeof(float) * (size_t)n);
}

void rt_qlinear_store_tile(const rt_qlinear_job *J, ptrdiff_t et, int rows, ptrdiff_t ht,
                           const float *out)
{
    int hp = J->a.ws.hp;
    ptrdiff_t j0 = ht * hp - J->col0, h0 = j0 < 0 ? -j0 : 0;
    ptrdiff_t h1 = J->n_y - j0 < hp ? J->n_y - j0 : hp;
    const float *bias = J->bias ? J->bias + j0 + h0 : NULL;
    for (int e = 0; e < rows; e++) {
        ptrdiff_t row = et * J->a.xs.ep + e, at = row * J->n_y + j0 + h0;
        store_row(J->y + at, out + e * hp + h0, bias, J->res ? J->res + at : NULL, h1 - h0);
    }
}

/* The work of a Linear ends with about TAIL_BIG_TASKS tasks' worth of W
 * row tiles cut into tasks about TAIL_SPLIT times smaller, so the threads
 * run out of work at nearly the same time (a thread that finishes early
 * idles up to one task's time otherwise), in a multiple of
 * TAIL_TASK_MULTIPLE equal tasks. */
#define TAIL_BIG_TASKS 2
#define TAIL_SPLIT 4
#define TAIL_TASK_MULTIPLE 4

/* tiles rounded up to a multiple of the kernel's W row tiles per call. */
static ptrdiff_t whole_steps(const rt_qlinear_job *J, ptrdiff_t tiles)
{
    return (tiles + J->tile_step - 1) / J->tile_step * J->tile_step;
}

/* W row tiles per tail task for a tail of `tail` tiles: at most a
 * TAIL_SPLIT-th of a big task, in a multiple of TAIL_TASK_MULTIPLE tasks
 * of equal size (the last one may be short). */
static ptrdiff_t tail_task_tiles(const rt_qlinear_job *J, ptrdiff_t tail)
{
    ptrdiff_t most = J->tiles_per_task >= TAIL_SPLIT ? J->tiles_per_task / TAIL_SPLIT : 1;
    ptrdiff_t tasks = (tail + most - 1) / most;
    tasks = (tasks + TAIL_TASK_MULTIPLE - 1) / TAIL_TASK_MULTIPLE * TAIL_TASK_MULTIPLE;
    return whole_steps(J, (tail + tasks - 1) / tasks);
}

/* W row tiles [*t0, *t1) of task i, counted from J->ht0. */
static void task_tiles(const rt_qlinear_job *J, ptrdiff_t i, ptrdiff_t *t0, ptrdiff_t *t1)
{
    ptrdiff_t total = J->ht1 - J->ht0, big = J->tiles_per_task, small = J->tail_tiles;
    ptrdiff_t n_big = J->big_tasks;
    if (i < n_big) {
        *t0 = i * big;
        *t1 = *t0 + big;
        return;
    }
    *t0 = n_big * big + (i - n_big) * small;
    *t1 = *t0 + small < total ? *t0 + small : total;
}

void rt_qlinear_one_tile(const rt_qlinear_job *J, ptrdiff_t et, ptrdiff_t ht)
{
    float out[RT_QTILE_MAX_OUT];
    int rows = rt_qlinear_tile_rows(J, et);
    rt_qlinear_prefetch_outputs(J, et, rows, ht);
    J->kt->qtile(&J->a, et, rows, ht, out);
    rt_qlinear_store_tile(J, et, rows, ht, out);
}

/* A decode step (m == 1: one activation tile) takes the table's GEMV pairs
 * where it has them. */
static void qlinear_task(void *ctx, uint32_t i)
{
    const rt_qlinear_job *J = ctx;
    ptrdiff_t ht0, ht1;
    task_tiles(J, i, &ht0, &ht1);
    ht0 += J->ht0;
    ht1 += J->ht0;
    if (J->tile_step == 2) {
        J->kt->qlinear_pair_task(J, ht0, ht1);
        return;
    }
    if (J->m == 1 && J->kt->qlinear_gemv_pair)
        for (; ht0 + 1 < ht1; ht0 += 2)
            J->kt->qlinear_gemv_pair(J, ht0);
    rt_qlinear_pair_walk(J, ht0, ht1, NULL);
}

static llmc_rt_status check_qlinear_shapes(const rt_kernels *kt, const rt_qact_shape *xs,
                                           const rt_qweight_shape *ws, llmc_rt_error *err)
{
    static const char op[] = "QLinear";
    llmc_rt_status st = check_act_shape(kt, xs, op, err);
    if (st != LLMC_RT_OK)
        return st;
    if (!ws || !qweight_shape_ok(ws))
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: invalid weight tile shape", NULL, NULL);
    if (ws->hp != kt->q_hp || ws->lp != kt->q_lp)
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: weight tiles hp %d lp %d, but target "
                       "'%s' uses hp %d lp %d", RT_N(ws->hp, ws->lp, kt->q_hp, kt->q_lp),
                       RT_S(kt->target));
    if (ws->k != xs->k || ws->group != xs->group)
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: activations of k %d in groups of %d, "
                       "weights of k %d in groups of %d", RT_N(xs->k, xs->group, ws->k,
                       ws->group), NULL);
    if ((int64_t)xs->ep * ws->hp > RT_QTILE_MAX_OUT)
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: tiles of %d x %d outputs exceed %d",
                       RT_N(xs->ep, ws->hp, RT_QTILE_MAX_OUT), NULL);
    return LLMC_RT_OK;
}

static bool f32_or_null(const rt_view *t)
{
    return !t || (t->dtype == LLMC_RT_F32 && (t->data || k_count(t) == 0));
}

static llmc_rt_status check_qlinear_views(const rt_view *xq, const rt_qact_shape *xs,
                                          const void *w, const rt_qweight_shape *ws,
                                          const rt_view *bias, const rt_view *residual,
                                          int64_t col0, const rt_view *y, llmc_rt_error *err)
{
    if (!xq || !y || !is_bytes(xq) || !f32_or_null(y) || !f32_or_null(bias) ||
        !f32_or_null(residual) || !tiles_addressable(xq, xs) || (!w && ws->np && ws->kp))
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear takes uint8/int8 activation tiles "
                       "(4-byte aligned), packed weights and float32 bias, residual and "
                       "output", NULL, NULL);
    char tx[96], ty[96], tr[96];
    if (xq->rank < 1 || xq->dims[xq->rank - 1] != xs->k || leading_rows(xq) != xs->m)
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: activations %s are not [..., k] with m "
                       "= %d rows of k = %d", RT_N(xs->m, xs->k),
                       RT_S(k_dims_text(xq, tx, sizeof tx)));
    bool rows_ok = y->rank == xq->rank;
    for (int a = 0; rows_ok && a + 1 < y->rank; a++)
        rows_ok = y->dims[a] == xq->dims[a];
    int64_t n_y = rows_ok ? y->dims[y->rank - 1] : 0;
    if (!rows_ok || col0 < 0 || n_y > ws->n - col0)
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear of %s by W [%d, %d] cannot give columns "
                       "%d.. as %s", RT_N(ws->n, ws->k, col0),
                       RT_S(k_dims_text(xq, tx, sizeof tx), k_dims_text(y, ty, sizeof ty)));
    if (bias && (bias->rank != 1 || bias->dims[0] != ws->n))
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: bias %s is not [%d]", RT_N(ws->n),
                       RT_S(k_dims_text(bias, tx, sizeof tx)));
    if (residual && !k_same_dims(residual, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: residual %s does not match the output "
                       "%s", NULL, RT_S(k_dims_text(residual, tr, sizeof tr),
                                        k_dims_text(y, ty, sizeof ty)));
    return LLMC_RT_OK;
}

/* W row tiles per task, the tasks before the tail and activation tiles
 * per cache block, from the shapes only (never the thread count); returns
 * the number of tasks.  Pointer-wide: y has columns, so W's row tiles and
 * the activation tiles lie in memory. */
static int64_t size_tasks(rt_qlinear_job *J, bool gemv)
{
    const rt_qweight_shape *ws = &J->a.ws;
    ptrdiff_t tile_bytes = (ptrdiff_t)rt_qweight_tile_bytes(ws);
    ptrdiff_t act_tile_bytes = J->a.xs.ep * (ptrdiff_t)J->a.xs.kp;
    ptrdiff_t act_tiles = (ptrdiff_t)J->a.xs.mp / J->a.xs.ep;
    ptrdiff_t task_bytes = gemv ? GEMV_TASK_BYTES : GEMM_TASK_BYTES;
    J->tiles_per_task = tile_bytes < task_bytes ? task_bytes / (tile_bytes ? tile_bytes : 1) : 1;
    J->tile_step = !gemv && J->kt->qlinear_pair_task ? 2 : 1;
    J->tiles_per_task = whole_steps(J, J->tiles_per_task);
    J->block_tiles = act_tiles ? act_tiles : 1;
    if (!gemv && act_tile_bytes * act_tiles > ACT_BLOCK_BYTES)
        J->block_tiles = act_tile_bytes < ACT_BLOCK_BYTES ? ACT_BLOCK_BYTES / act_tile_bytes : 1;
    /* qtile_block takes activation tiles 4 (or 2) at a time: a block of
     * whole fours (an odd one would leave a third of a [4864]-deep
     * Linear's tiles to qtile, a block of 18 a ninth of a [896]-deep one's
     * to the 2-tile kernel); whole fours cost the other walks nothing */
    if (J->tile_step == 2)
        J->block_tiles = (J->block_tiles + 3) / 4 * 4;
    ptrdiff_t total = J->ht1 - J->ht0, big = J->tiles_per_task;
    ptrdiff_t tail = total < TAIL_BIG_TASKS * big ? total : TAIL_BIG_TASKS * big;
    J->big_tasks = (total - tail) / big;
    tail = total - J->big_tasks * big;
    J->tail_tiles = tail_task_tiles(J, tail);
    return J->big_tasks + (tail + J->tail_tiles - 1) / J->tail_tiles;
}

llmc_rt_status k_qlinear_check(const rt_kernels *kt, const rt_view *xq, const rt_qact_shape *xs,
                               const void *w, const rt_qweight_shape *ws, const rt_view *bias,
                               const rt_view *residual, int64_t col0, const rt_view *y,
                               llmc_rt_error *err)
{
    llmc_rt_status st = check_table(kt, "QLinear", err);
    if (st == LLMC_RT_OK)
        st = check_qlinear_shapes(kt, xs, ws, err);
    if (st == LLMC_RT_OK)
        st = check_qlinear_views(xq, xs, w, ws, bias, residual, col0, y, err);
    return st;
}

/* k_qlinear's operands, and the jobs of its outputs. */
typedef struct {
    const rt_kernels *kt;
    const rt_view *xq, *bias, *residual;
    const rt_qact_shape *xs;
    const void *w;
    const rt_qweight_shape *ws;
    int64_t gemm_min_rows;
    uint32_t gemv_prefetch;
    rt_qlinear_job J[RT_JOBS_MAX];
} qlinear_outputs;

/* rt_output_job_fn: the job of the columns [col0, col0 + y's last dim). */
static llmc_rt_status qlinear_output_job(void *ctx, uint32_t slot, int64_t col0, rt_view *y,
                                         rt_job *job, llmc_rt_error *err)
{
    qlinear_outputs *o = ctx;
    const rt_qact_shape *xs = o->xs;
    const rt_qweight_shape *ws = o->ws;
    llmc_rt_status st = k_qlinear_check(o->kt, o->xq, xs, o->w, ws, o->bias, o->residual, col0,
                                        y, err);
    if (st != LLMC_RT_OK)
        return st;
    rt_qlinear_job *J = &o->J[slot];
    J->kt = o->kt;
    J->a.xq = o->xq->data;
    J->a.xs = *xs;
    J->a.w = o->w;
    J->a.ws = *ws;
    J->a.prefetch = o->gemv_prefetch;
    J->bias = o->bias ? (const float *)o->bias->data + col0 : NULL;
    J->res = o->residual ? o->residual->data : NULL;
    J->y = y->data;
    J->m = xs->m;
    J->n_y = y->dims[y->rank - 1];
    J->col0 = col0;
    /* col0 >= 0 (k_qlinear_check) may lie past memory: W [n, 0] has no bytes */
    J->ht0 = (ptrdiff_t)rt_udiv64((uint64_t)col0, (uint64_t)ws->hp);
    J->ht1 = (ptrdiff_t)rt_udiv64((uint64_t)(col0 + J->n_y + ws->hp - 1), (uint64_t)ws->hp);
    int64_t tasks = J->m && J->n_y ? size_tasks(J, J->m < o->gemm_min_rows) : 0;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear has too many output features", NULL, NULL);
    *job = (rt_job){qlinear_task, J, (uint32_t)tasks, false};
    return LLMC_RT_OK;
}

llmc_rt_status k_qlinear(const rt_kernels *kt, const rt_view *xq, const rt_qact_shape *xs,
                         const void *w, const rt_qweight_shape *ws, const rt_view *bias,
                         const rt_view *residual, int64_t col0, rt_view *ys, uint32_t n_ys,
                         int64_t gemm_min_rows, uint32_t gemv_prefetch, const rt_parallel *par,
                         llmc_rt_error *err)
{
    qlinear_outputs o = {kt, xq, bias, residual, xs, w, ws, gemm_min_rows, gemv_prefetch, {{0}}};
    return rt_run_outputs(par, ys, n_ys, col0, residual != NULL, qlinear_output_job, &o, err);
}
