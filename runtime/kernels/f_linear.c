/* Linear over fp32 weight tiles: y = x W^T + bias + residual for the output
 * columns [col0, col0 + n_y) of z, W packed as np/hp row tiles of [k][hp]
 * (quant_format.h).  The same contract as k_linear (ref_linear.c); only the
 * weight layout differs, and the inner loops are the target's ftile.
 *
 * Work is split along W row tiles (paper 002 §5.2): a task owns whole tiles
 * and runs every row of x against them, f_ep rows per ftile call (the last
 * call gets m % f_ep rows; a decode step is one call of rows = 1).  Each
 * output element comes out of exactly one ftile call whose rows are fixed
 * by m alone, so the bits never depend on how tiles are grouped into tasks
 * or on the thread count. */
#include "kernel_table.h"
#include "rt_msg.h"

/* Bounds the stack buffer one ftile call writes (f_ep * f_hp floats). */
#define FTILE_MAX_OUT 1024

/* A task gets whole tiles worth at least TASK_MACS multiply-adds: a decode
 * tile of 16 x 896 is 14k, so a task streams ~5 tiles (~290 KB) while a
 * prefill tile is a task of its own.  Under PARALLEL_MIN_MACS in all the op
 * runs on this thread (waking workers would cost more). */
#define TASK_MACS (1 << 16)
#define PARALLEL_MIN_MACS (1 << 15)

typedef struct {
    const rt_kernels *kt;
    rt_ftile_args args;
    const float *bias, *residual;   /* bias [N] (absolute columns); residual [m, n_y] */
    float *y;                       /* [m, n_y] */
    int64_t m, col0, n_y;
    int64_t tile0, tiles, per_task; /* the row tiles that hold y's columns */
} ftile_job;

static bool is_f32(const rt_view *t)
{
    return !t || t->dtype == LLMC_RT_F32;
}

static llmc_rt_status check_table(const rt_kernels *kt, const rt_ftile_shape *ws,
                                  llmc_rt_error *err)
{
    if (!kt || !kt->ftile || kt->f_hp < 1 || kt->f_ep < 1 || kt->f_hp > 64 || kt->f_ep > 64 ||
        kt->f_hp * kt->f_ep > FTILE_MAX_OUT)
        return rt_fail(err, LLMC_RT_E_EXEC, "kernel table %s has no fp32 tile kernel (f_hp %d, "
                       "f_ep %d)", RT_N(kt ? kt->f_hp : 0, kt ? kt->f_ep : 0),
                       RT_S(kt && kt->target ? kt->target : "(none)"));
    if (ws->hp != kt->f_hp || ws->n < 0 || ws->k < 0 || ws->np != rt_qround_up(ws->n, ws->hp))
        return rt_fail(err, LLMC_RT_E_EXEC, "weights packed as tiles of %d rows (n %d, np %d) "
                       "do not fit kernel table %s (f_hp %d)",
                       RT_N(ws->hp, ws->n, ws->np, kt->f_hp), RT_S(kt->target ? kt->target : "?"));
    return LLMC_RT_OK;
}

/* y has x's dims except the last (K -> n_y); bias [N]; residual y's dims. */
static llmc_rt_status check_views(const rt_view *x, const float *w, const rt_ftile_shape *ws,
                                  const rt_view *bias, const rt_view *residual, int64_t col0,
                                  const rt_view *y, llmc_rt_error *err)
{
    char tx[96], ty[96];
    if (!is_f32(x) || !is_f32(bias) || !is_f32(residual) || !is_f32(y) || !w)
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear over fp32 tiles takes float32 only",
                       NULL, NULL);
    bool same_lead = x->rank >= 1 && y->rank == x->rank;
    for (int a = 0; same_lead && a + 1 < x->rank; a++)
        same_lead = y->dims[a] == x->dims[a];
    if (!same_lead || x->dims[x->rank - 1] != ws->k)
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear of %s by tiles of W [%d, %d] cannot give %s",
                       RT_N(ws->n, ws->k), RT_S(k_dims_text(x, tx, sizeof tx),
                                                k_dims_text(y, ty, sizeof ty)));
    int64_t n_y = y->dims[y->rank - 1];
    if (col0 < 0 || n_y > ws->n - col0)
        return rt_fail(err, LLMC_RT_E_EXEC, "columns [%d, %d) are outside W's %d rows",
                       RT_N(col0, col0 + n_y, ws->n), NULL);
    if (bias && (bias->rank != 1 || bias->dims[0] != ws->n))
        return rt_fail(err, LLMC_RT_E_EXEC, "bias %s is not [%d]",
                       RT_N(ws->n), RT_S(k_dims_text(bias, tx, sizeof tx)));
    if (residual && !k_same_dims(residual, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "residual %s does not match the output %s", NULL,
                       RT_S(k_dims_text(residual, tx, sizeof tx), k_dims_text(y, ty, sizeof ty)));
    return LLMC_RT_OK;
}

/* Copies the columns of tile ht that belong to y for rows [e0, e0 + rows)
 * out of z (the ftile output), adding bias and residual. */
static void store_tile(const ftile_job *J, int64_t e0, int rows, int64_t ht, const float *z)
{
    int hp = J->args.ws.hp;
    int64_t j0 = ht * hp > J->col0 ? ht * hp : J->col0;
    int64_t j1 = (ht + 1) * hp < J->col0 + J->n_y ? (ht + 1) * hp : J->col0 + J->n_y;
    for (int e = 0; e < rows; e++) {
        int64_t row = (e0 + e) * J->n_y - J->col0; /* + j: element j of y's row */
        for (int64_t j = j0; j < j1; j++) {
            float v = z[e * hp + (j - ht * hp)];
            if (J->bias)
                v += J->bias[j];
            if (J->residual)
                v += J->residual[row + j];
            J->y[row + j] = v;
        }
    }
}

static void ftile_task(void *ctx, uint32_t i)
{
    const ftile_job *J = ctx;
    int ep = J->kt->f_ep;
    float z[FTILE_MAX_OUT];
    int64_t t0 = (int64_t)i * J->per_task;
    int64_t t1 = J->tiles - t0 < J->per_task ? J->tiles : t0 + J->per_task;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t e0 = 0; e0 < J->m; e0 += ep) {
            int rows = J->m - e0 < ep ? (int)(J->m - e0) : ep;
            J->kt->ftile(&J->args, e0, rows, J->tile0 + t, z);
            store_tile(J, e0, rows, J->tile0 + t, z);
        }
}

llmc_rt_status k_linear_tiles(const rt_kernels *kt, const rt_view *x, const float *w,
                              const rt_ftile_shape *ws, const rt_view *bias,
                              const rt_view *residual, int64_t col0, rt_view *y,
                              const rt_parallel *par, llmc_rt_error *err)
{
    llmc_rt_status st = check_table(kt, ws, err);
    if (!st)
        st = check_views(x, w, ws, bias, residual, col0, y, err);
    if (st)
        return st;
    ftile_job J;
    J.kt = kt;
    J.args.x = x->data;
    J.args.x_stride = ws->k;
    J.args.w = w;
    J.args.ws = *ws;
    J.bias = bias ? bias->data : NULL;
    J.residual = residual ? residual->data : NULL;
    J.y = y->data;
    J.n_y = y->dims[y->rank - 1];
    J.m = J.n_y ? k_count(y) / J.n_y : 0;
    J.col0 = col0;
    if (J.m == 0 || J.n_y == 0)
        return LLMC_RT_OK;
    J.tile0 = col0 / ws->hp;
    J.tiles = (col0 + J.n_y - 1) / ws->hp + 1 - J.tile0;
    int64_t tile_macs = J.m * ws->k * ws->hp;
    J.per_task = tile_macs >= TASK_MACS ? 1 : TASK_MACS / (tile_macs ? tile_macs : 1);
    int64_t tasks = (J.tiles + J.per_task - 1) / J.per_task;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear has too many row tiles", NULL, NULL);
    bool small = tile_macs * J.tiles < PARALLEL_MIN_MACS;
    rt_parallel_for(small ? NULL : par, (uint32_t)tasks, ftile_task, &J);
    return LLMC_RT_OK;
}
