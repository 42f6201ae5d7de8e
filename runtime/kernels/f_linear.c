/* Linear over fp32 weight tiles: y = x W^T + bias + residual for the output
 * columns [col0, col0 + n_y) of z, W packed as np/hp row tiles of [k][hp]
 * (quant_format.h).  The same contract as k_linear (ref_linear.c); only the
 * weight layout differs, and the inner loops are the target's ftile.
 *
 * A cache-blocked GEMM.  Work is split along W row tiles (paper 002 §5.2):
 * a task owns whole tiles.  For each tile it takes the rows of x in passes
 * of up to PASS_FLOATS / hp rows whose sums stay on the stack (L1); a pass
 * walks the reduction in panels of KC steps, [KC][hp] weights that stay in
 * L1 while every f_ep-row block of the pass runs against them, the x block
 * of the pass ([rows][KC], ~130 KB) staying in L2.  Every sum is continued
 * in c order across panels and the row blocks are the same whatever the
 * pass (passes hold a multiple of f_ep rows), so each output element comes
 * out of the same ftile calls, fixed by m and k alone: the bits never
 * depend on how tiles are grouped into tasks or on the thread count.  On
 * x86-64 a table with ftile_pair runs the tiles of a task two at a time
 * (tasks hold whole pairs), each panel's sums those of ftile. */
#include <string.h>

#include "kernel_table.h"
#include "rt_div64.h"
#include "rt_msg.h"

/* Bounds f_ep * f_hp (the table check), so a pass holds at least two row
 * blocks. */
#define FTILE_MAX_OUT 1024

/* The sums of one pass on the stack: 8 KiB, 126 rows at hp 16. */
#define PASS_FLOATS 2048

/* Reduction steps per weight panel: [256][16] floats = 16 KiB, half of a
 * 32 KiB L1 beside the pass's sums. */
#define KC 256

/* A task gets whole tiles worth at least TASK_MACS multiply-adds: a decode
 * tile of 16 x 896 is 14k, so a task streams ~5 tiles (~290 KB) while a
 * prefill tile is a task of its own.  Under PARALLEL_MIN_MACS in all the op
 * runs on this thread (waking workers would cost more). */
#define TASK_MACS (1 << 16)
#define PARALLEL_MIN_MACS (1 << 15)

typedef struct {
    const rt_kernels *kt;
    const float *x, *w;             /* x [m, k]; W's tiles */
    rt_ftile_shape ws;
    const float *bias, *residual;   /* bias [N] (absolute columns); residual [m, n_y] */
    float *y;                       /* [m, n_y] */
    int64_t m, col0, n_y;
    int64_t tile0, tiles, per_task; /* the row tiles that hold y's columns */
    int64_t pass_rows;              /* a multiple of f_ep */
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
 * out of z (the pass's sums), adding bias and residual: (z + bias) +
 * residual per element, read before y is written (y may be the residual's
 * buffer).  One branch-free loop per case, as this runs for every output
 * element. */
static void store_tile(const ftile_job *J, int64_t e0, int rows, int64_t ht, const float *z)
{
    int hp = J->ws.hp;
    int64_t j0 = ht * hp > J->col0 ? ht * hp : J->col0;
    int64_t j1 = (ht + 1) * hp < J->col0 + J->n_y ? (ht + 1) * hp : J->col0 + J->n_y;
    int64_t n = j1 - j0;
    const float *b = J->bias ? J->bias + j0 : NULL;
    for (int e = 0; e < rows; e++) {
        int64_t at = (e0 + e) * J->n_y + (j0 - J->col0); /* y's element of column j0 */
        const float *s = z + e * hp + (j0 - ht * hp);
        const float *r = J->residual ? J->residual + at : NULL;
        float *y = J->y + at;
        if (b && r)
            for (int64_t i = 0; i < n; i++)
                y[i] = s[i] + b[i] + r[i];
        else if (b)
            for (int64_t i = 0; i < n; i++)
                y[i] = s[i] + b[i];
        else if (r)
            for (int64_t i = 0; i < n; i++)
                y[i] = s[i] + r[i];
        else
            for (int64_t i = 0; i < n; i++)
                y[i] = s[i];
    }
}

/* Rows [e0, e0 + rows) of x against tile ht into z [rows][hp] (zeroed
 * first): panel by panel, every row block against each panel. */
static void tile_pass(const ftile_job *J, int64_t ht, int64_t e0, int64_t rows, float *z)
{
    int hp = J->ws.hp, ep = J->kt->f_ep;
    int64_t k = J->ws.k;
    const float *tile = J->w + ht * k * hp, *x = J->x + e0 * k;
    memset(z, 0, sizeof *z * (size_t)(rows * hp));
    for (int64_t c0 = 0; c0 < k; c0 += KC) {
        int64_t kc = k - c0 < KC ? k - c0 : KC;
        for (int64_t e = 0; e < rows; e += ep) {
            int block = rows - e < ep ? (int)(rows - e) : ep;
            J->kt->ftile(x + e * k + c0, k, tile + c0 * hp, hp, kc, block, z + e * hp);
        }
    }
}

#if defined(__x86_64__)
/* tile_pass for tiles ht and ht + 1 at once (the table's ftile_pair). */
static void tile_pair_pass(const ftile_job *J, int64_t ht, int64_t e0, int64_t rows, float *za,
                           float *zb)
{
    int hp = J->ws.hp, ep = J->kt->f_ep;
    int64_t k = J->ws.k;
    const float *ta = J->w + ht * k * hp, *tb = ta + k * hp, *x = J->x + e0 * k;
    memset(za, 0, sizeof *za * (size_t)(rows * hp));
    memset(zb, 0, sizeof *zb * (size_t)(rows * hp));
    for (int64_t c0 = 0; c0 < k; c0 += KC) {
        int64_t kc = k - c0 < KC ? k - c0 : KC;
        for (int64_t e = 0; e < rows; e += ep) {
            int block = rows - e < ep ? (int)(rows - e) : ep;
            J->kt->ftile_pair(x + e * k + c0, k, ta + c0 * hp, tb + c0 * hp, hp, kc, block,
                              za + e * hp, zb + e * hp);
        }
    }
}

/* Tiles [t0, t1) two at a time, with the pass's sums of both on the stack. */
static bool task_in_pairs(const ftile_job *J, int64_t t0, int64_t t1)
{
    if (!J->kt->ftile_pair)
        return false;
    float z[2][PASS_FLOATS];
    for (int64_t t = t0; t < t1; t += 2)
        for (int64_t e0 = 0; e0 < J->m; e0 += J->pass_rows) {
            int64_t rows = J->m - e0 < J->pass_rows ? J->m - e0 : J->pass_rows;
            if (t + 1 < t1) {
                tile_pair_pass(J, J->tile0 + t, e0, rows, z[0], z[1]);
                store_tile(J, e0, (int)rows, J->tile0 + t + 1, z[1]);
            } else {
                tile_pass(J, J->tile0 + t, e0, rows, z[0]);
            }
            store_tile(J, e0, (int)rows, J->tile0 + t, z[0]);
        }
    return true;
}
#endif

static void ftile_task(void *ctx, uint32_t i)
{
    const ftile_job *J = ctx;
    int64_t t0 = (int64_t)i * J->per_task;
    int64_t t1 = J->tiles - t0 < J->per_task ? J->tiles : t0 + J->per_task;
#if defined(__x86_64__)
    if (task_in_pairs(J, t0, t1))
        return;
#endif
    float z[PASS_FLOATS];
    for (int64_t t = t0; t < t1; t++)
        for (int64_t e0 = 0; e0 < J->m; e0 += J->pass_rows) {
            int64_t rows = J->m - e0 < J->pass_rows ? J->m - e0 : J->pass_rows;
            tile_pass(J, J->tile0 + t, e0, rows, z);
            store_tile(J, e0, (int)rows, J->tile0 + t, z);
        }
}

/* k_linear_tiles' operands, and the jobs of its outputs. */
typedef struct {
    const rt_kernels *kt;
    const rt_view *x, *bias, *residual;
    const float *w;
    const rt_ftile_shape *ws;
    ftile_job J[RT_JOBS_MAX];
} ftile_outputs;

/* rt_output_job_fn: the job of the columns [col0, col0 + y's last dim). */
static llmc_rt_status ftile_output_job(void *ctx, uint32_t slot, int64_t col0, rt_view *y,
                                       rt_job *job, llmc_rt_error *err)
{
    ftile_outputs *o = ctx;
    const rt_ftile_shape *ws = o->ws;
    llmc_rt_status st = check_views(o->x, o->w, ws, o->bias, o->residual, col0, y, err);
    if (st)
        return st;
    ftile_job *J = &o->J[slot];
    J->kt = o->kt;
    J->x = o->x->data;
    J->w = o->w;
    J->ws = *ws;
    J->pass_rows = PASS_FLOATS / ws->hp / o->kt->f_ep * o->kt->f_ep;
    J->bias = o->bias ? o->bias->data : NULL;
    J->residual = o->residual ? o->residual->data : NULL;
    J->y = y->data;
    J->n_y = y->dims[y->rank - 1];
    int64_t count = k_count(y);
    J->m = count ? (ptrdiff_t)count / (ptrdiff_t)J->n_y : 0; /* y's rows: in memory */
    J->col0 = col0;
    *job = (rt_job){ftile_task, J, 0, true};
    if (J->m == 0 || J->n_y == 0)
        return LLMC_RT_OK;
    /* col0 >= 0 (check_views) may lie past memory: W [n, 0] has no bytes */
    J->tile0 = (int64_t)rt_udiv64((uint64_t)col0, (uint64_t)ws->hp);
    J->tiles = (int64_t)rt_udiv64((uint64_t)(col0 + J->n_y - 1), (uint64_t)ws->hp) + 1 - J->tile0;
    int64_t tile_macs = J->m * ws->k * ws->hp;
    J->per_task = tile_macs >= TASK_MACS ? 1 : TASK_MACS / (int32_t)(tile_macs ? tile_macs : 1);
#if defined(__x86_64__)
    if (o->kt->ftile_pair) /* whole pairs of tiles per task */
        J->per_task += J->per_task & 1;
#endif
    int64_t tasks = (ptrdiff_t)(J->tiles + J->per_task - 1) / (ptrdiff_t)J->per_task;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear has too many row tiles", NULL, NULL);
    job->n = (uint32_t)tasks;
    job->small = tile_macs * J->tiles < PARALLEL_MIN_MACS;
    return LLMC_RT_OK;
}

llmc_rt_status k_linear_tiles(const rt_kernels *kt, const rt_view *x, const float *w,
                              const rt_ftile_shape *ws, const rt_view *bias,
                              const rt_view *residual, int64_t col0, rt_view *ys, uint32_t n_ys,
                              const rt_parallel *par, llmc_rt_error *err)
{
    llmc_rt_status st = check_table(kt, ws, err);
    if (st)
        return st;
    ftile_outputs o = {kt, x, bias, residual, w, ws, {{0}}};
    return rt_run_outputs(par, ys, n_ys, col0, residual != NULL, ftile_output_job, &o, err);
}
