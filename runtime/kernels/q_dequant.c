/* QLinear's other prefill path (Plan.prefill_kernel f32-dequant): the same
 * operands and contract as k_qlinear, but the products run on the target's
 * fp32 micro-kernel (ftile) instead of its int8 one.  Weight blocks (int8,
 * or uint4 with mins, fp16 scales; or float32 scales and zero points) are
 * dequantized into [kc][f_hp] fp32 panels, the activation tiles' int8
 * values times their (row, group) scale into fp32 rows, and y = x . w +
 * bias + residual.  So it computes the int8 path's numbers up to fp32
 * rounding: which of the two runs is a
 * speed choice per target (`llmc tune` measures both), not an accuracy one.
 *
 * A task owns TASK_TILES fp32 tiles (f_hp output features each).  It takes
 * the rows in passes of PASS_ROWS; a pass walks the reduction in panels of
 * KC steps: it converts the pass's [PASS_ROWS][KC] int8 values once, then
 * for each of its tiles dequantizes the [KC][f_hp] weights and runs every
 * f_ep-row block against them, the sums staying on the stack.  Each weight
 * is dequantized once per pass, each activation value once per task.  The
 * calls are fixed by the shapes, so the bits do not depend on the thread
 * count.  Stack: 28 KiB at f_hp 16. */
#include <string.h>

#include "kernel_table.h"
#include "rt_div64.h"
#include "rt_msg.h"

#define PASS_ROWS 48   /* a multiple of every f_ep in use (6) */
#define KC 64
#define TASK_TILES 4
#define MAX_HP 16      /* the widest f_hp the stack buffers hold */

typedef struct {
    const rt_kernels *kt;
    const uint8_t *xq;
    rt_qact_shape xs;
    const uint8_t *w;
    rt_qweight_shape ws;
    const float *sx;               /* activation scales [mp][kp / group] */
    const float *bias, *res;       /* bias [n] (absolute columns), residual [m, n_y] */
    float *y;                      /* [m, n_y] */
    int64_t m, n_y, col0;
    int64_t ft0, ft1;              /* fp32 tiles covering y's columns */
    /* the table's dequant_block, or the portable loop */
    void (*dequant_block)(const uint8_t *block, const rt_qweight_shape *ws, int64_t i0,
                          int64_t i1, float *out, int64_t stride);
} dequant_job;

/* Element by element through the format's readers (a table's loop does
 * whole tiles); pointer-wide, as the block lies in memory. */
void rt_dequant_block_generic(const uint8_t *block, const rt_qweight_shape *ws, int64_t i0,
                              int64_t i1, float *out, int64_t stride)
{
    for (ptrdiff_t i = (ptrdiff_t)i0, last = (ptrdiff_t)i1; i < last; i++) {
        float *o = out + (i - i0) * stride;
        for (int r = 0; r < ws->hp; r++)
            o[r] = rt_qweight_value(block, ws, r, rt_qweight_q(block, ws, r, (size_t)i));
    }
}

/* Steps [i0, i1) of group g (offsets inside the group) of weight row tile
 * ht into panel rows [r0, r0 + hq): out[(i - i0) * hp + r] for the panel
 * [.][hp], by the table's loop. */
static void dequant_block(const dequant_job *J, int64_t ht, int64_t g, int64_t i0, int64_t i1,
                          int r0, int hp, float *out)
{
    const uint8_t *block = J->w + rt_qweight_block_offset(&J->ws, ht, g);
    J->dequant_block(block, &J->ws, i0, i1, out + r0, hp);
}

/* Rows [r0, r0 + hq) of the panel's f_hp (weight row tile ht) over the
 * reduction steps [c0, c0 + kc), group by group. */
static void dequant_rows(const dequant_job *J, int64_t ht, int r0, int64_t c0, int64_t kc,
                         int hp, float *panel)
{
    ptrdiff_t group = (ptrdiff_t)J->ws.group, c1 = (ptrdiff_t)(c0 + kc);
    for (ptrdiff_t c = (ptrdiff_t)c0; c < c1;) {
        ptrdiff_t g = c / group, end = (g + 1) * group < c1 ? (g + 1) * group : c1;
        dequant_block(J, ht, g, c - g * group, end - g * group, r0, hp, panel + (c - c0) * hp);
        c = end;
    }
}

/* The weights of fp32 tile ft over [c0, c0 + kc) as panel [kc][f_hp]: the
 * f_hp / hp weight row tiles it covers (rows past np are 0). */
static void dequant_panel(const dequant_job *J, int64_t ft, int64_t c0, int64_t kc, float *panel)
{
    int hp = J->kt->f_hp, hq = J->ws.hp;
    for (int r0 = 0; r0 < hp; r0 += hq) {
        int64_t ht = ((ptrdiff_t)ft * hp + r0) / hq;
        if (ht * hq < J->ws.np) {
            dequant_rows(J, ht, r0, c0, kc, hp, panel);
            continue;
        }
        for (int64_t c = 0; c < kc; c++)
            memset(panel + c * hp + r0, 0, sizeof *panel * (size_t)hq);
    }
}

/* Activation rows [e0, e0 + rows), steps [c0, c0 + kc) as floats xf
 * [rows][kc], each q times its (row, group) scale: a row's lp consecutive
 * values sit together, ep * lp bytes apart (quant_format.h). */
static void convert_rows(const dequant_job *J, int64_t e0, int64_t rows, int64_t c0, int64_t kc,
                         float *xf)
{
    ptrdiff_t lp = J->xs.lp, stride = J->xs.ep * lp, c1 = (ptrdiff_t)(c0 + kc);
    ptrdiff_t group = (ptrdiff_t)J->xs.group, groups = (ptrdiff_t)J->xs.kp / group;
    for (int64_t e = 0; e < rows; e++) {
        const int8_t *row = (const int8_t *)J->xq + rt_qact_index(&J->xs, e0 + e, 0);
        const float *sx = J->sx + (e0 + e) * groups;
        float *out = xf + e * kc;
        for (ptrdiff_t c = (ptrdiff_t)c0; c < c1;) {
            ptrdiff_t end = (c / lp + 1) * lp < c1 ? (c / lp + 1) * lp : c1;
            const int8_t *q = row + (c / lp) * (stride - lp); /* q[c]: value c */
            for (; c < end; c++)
                out[c - c0] = sx[c / group] * (float)q[c];
        }
    }
}

/* y for rows [e0, e0 + rows) and the columns of tile ft: z (+ bias)
 * (+ residual), in that order, as k_qlinear stores. */
static void store_pass(const dequant_job *J, int64_t ft, int64_t e0, int64_t rows, const float *z)
{
    int hp = J->kt->f_hp;
    int64_t j0 = ft * hp > J->col0 ? ft * hp : J->col0;
    int64_t j1 = (ft + 1) * hp < J->col0 + J->n_y ? (ft + 1) * hp : J->col0 + J->n_y;
    for (int64_t e = 0; e < rows; e++) {
        int64_t at = (e0 + e) * J->n_y - J->col0;
        for (int64_t j = j0; j < j1; j++) {
            float v = z[e * hp + (j - ft * hp)];
            if (J->bias)
                v += J->bias[j];
            if (J->res)
                v += J->res[at + j];
            J->y[at + j] = v;
        }
    }
}

static void dequant_task(void *ctx, uint32_t i)
{
    const dequant_job *J = ctx;
    int hp = J->kt->f_hp, ep = J->kt->f_ep;
    int64_t ft0 = J->ft0 + (int64_t)i * TASK_TILES;
    int tiles = J->ft1 - ft0 < TASK_TILES ? (int)(J->ft1 - ft0) : TASK_TILES;
    float z[TASK_TILES * PASS_ROWS * MAX_HP], xf[PASS_ROWS * KC], panel[KC * MAX_HP];
    for (int64_t e0 = 0; e0 < J->m; e0 += PASS_ROWS) {
        int64_t rows = J->m - e0 < PASS_ROWS ? J->m - e0 : PASS_ROWS;
        memset(z, 0, sizeof z);
        for (int64_t c0 = 0; c0 < J->xs.k; c0 += KC) {
            int64_t kc = J->xs.k - c0 < KC ? J->xs.k - c0 : KC;
            convert_rows(J, e0, rows, c0, kc, xf);
            for (int t = 0; t < tiles; t++) {
                dequant_panel(J, ft0 + t, c0, kc, panel);
                for (int64_t e = 0; e < rows; e += ep) {
                    int block = rows - e < ep ? (int)(rows - e) : ep;
                    J->kt->ftile(xf + e * kc, kc, panel, hp, kc, block,
                                 z + (t * PASS_ROWS + e) * hp);
                }
            }
        }
        for (int t = 0; t < tiles; t++)
            store_pass(J, ft0 + t, e0, rows, z + t * PASS_ROWS * hp);
    }
}

bool k_qlinear_dequant_runs(const rt_kernels *kt, const rt_qweight_shape *ws)
{
    return kt && kt->ftile && kt->f_hp >= 1 && kt->f_hp <= MAX_HP && kt->f_ep >= 1 &&
           PASS_ROWS % kt->f_ep == 0 && ws->hp >= 1 && kt->f_hp % ws->hp == 0;
}

llmc_rt_status k_qlinear_dequant(const rt_kernels *kt, const rt_view *xq, const rt_qact_shape *xs,
                                 const void *w, const rt_qweight_shape *ws, const rt_view *bias,
                                 const rt_view *residual, int64_t col0, rt_view *y,
                                 const rt_parallel *par, llmc_rt_error *err)
{
    llmc_rt_status st = k_qlinear_check(kt, xq, xs, w, ws, bias, residual, col0, y, err);
    if (st)
        return st;
    if (!k_qlinear_dequant_runs(kt, ws))
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear: target '%s' has no fp32 tiles that "
                       "hold its weight tiles of %d rows", RT_N(ws->hp), RT_S(kt->target));
    dequant_job J = {kt, xq->data, *xs, w, *ws, NULL, NULL, NULL, y->data, xs->m,
                     y->dims[y->rank - 1], col0, 0, 0,
                     kt->dequant_block ? kt->dequant_block : rt_dequant_block_generic};
    J.sx = (const float *)((const uint8_t *)xq->data + rt_qact_scales_offset(xs));
    J.bias = bias ? bias->data : NULL;
    J.res = residual ? residual->data : NULL;
    if (!J.m || !J.n_y)
        return LLMC_RT_OK;
    /* col0 >= 0 (k_qlinear_check) may lie past memory: W [n, 0] has no bytes */
    J.ft0 = (int64_t)rt_udiv64((uint64_t)col0, (uint64_t)kt->f_hp);
    J.ft1 = (int64_t)rt_udiv64((uint64_t)(col0 + J.n_y - 1), (uint64_t)kt->f_hp) + 1;
    int64_t tasks = (J.ft1 - J.ft0 + TASK_TILES - 1) / TASK_TILES;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "QLinear has too many output features", NULL, NULL);
    rt_parallel_for(par, (uint32_t)tasks, dequant_task, &J);
    return LLMC_RT_OK;
}
