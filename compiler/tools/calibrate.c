/* Calibration over a text (calibrate.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "codegen/codegen.h"
#include "passes/pipeline.h"
#include "llmc_rt_internal.h"
#include "text_ids.h"

#define MAX_PASSES 64

static int range_index(llmc_calibration *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->ranges[i].name, name))
            return i;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        llmc_act_range *grown = realloc(c->ranges, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        c->ranges = grown;
        c->cap = cap;
    }
    llmc_act_range *r = &c->ranges[c->n];
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    r->hist = calloc(CALIB_BINS, sizeof *r->hist);
    if (!r->name || !r->hist) {
        free(r->name);
        free(r->hist);
        return -1;
    }
    return c->n++;
}

/* The bin of |x| = a (a NaN counts as the largest). */
static int bin_of(float a)
{
    if (!(a > 0.0f))
        return a == 0.0f ? 0 : CALIB_BINS - 1;
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int octave = e - 1 - CALIB_MIN_EXP;
    if (octave < 0)
        return 0;
    if (octave >= CALIB_OCTAVES)
        return CALIB_BINS - 1;
    return 1 + octave * CALIB_SUB + (int)((2.0f * m - 1.0f) * CALIB_SUB);
}

/* The largest |x| bin b holds. */
static double bin_upper(int b)
{
    if (b == 0)
        return 0.0;
    if (b == CALIB_BINS - 1)
        return INFINITY;
    int octave = (b - 1) / CALIB_SUB, sub = (b - 1) % CALIB_SUB;
    return ldexp(1.0 + (sub + 1.0) / CALIB_SUB, octave + CALIB_MIN_EXP);
}

/* n values of rows of `channels`; -1 on OOM or a change of width. */
static int add_values(llmc_act_range *r, const float *x, int64_t n, int64_t channels)
{
    if (!r->channel_absmax && channels > 0) {
        r->channel_absmax = calloc((size_t)channels, sizeof *r->channel_absmax);
        r->channels = channels;
    }
    if (!r->channel_absmax || r->channels != channels)
        return -1;
    for (int64_t row = 0; row < n; row += channels)
        for (int64_t c = 0; c < channels; c++) {
            float a = fabsf(x[row + c]), *ch = &r->channel_absmax[c];
            r->absmax = a > r->absmax ? a : r->absmax;
            *ch = a > *ch ? a : *ch;
            r->hist[bin_of(a)]++;
        }
    r->count += (uint64_t)n;
    return 0;
}



/* clip = the upper edge of the bin where the percentile falls, at most
 * max |x| (a tensor without outliers keeps its whole range). */
static void finish_range(llmc_act_range *r, double percentile)
{
    uint64_t want = (uint64_t)ceil(percentile / 100.0 * (double)r->count), seen = 0;
    double clip = r->absmax;
    for (int b = 0; b < CALIB_BINS; b++) {
        seen += r->hist[b];
        if (seen >= want) {
            clip = fmin(bin_upper(b), r->absmax);
            break;
        }
    }
    r->clip = (float)clip;
    /* a tensor of zeros quantizes exactly at any scale */
    r->scale = r->clip > 0.0f ? r->clip / 127.0f : 1.0f;
    r->beyond = 0;
    for (int b = bin_of(r->clip) + 1; b < CALIB_BINS; b++)
        r->beyond += r->hist[b];
}

typedef struct {
    llmc_rt_session *s;
    llmc_calibration *c;
    const uint8_t *is_linear;   /* per plan op */
    uint32_t S;                 /* the window being run (P = 0) */
    llmc_error *err;
    int rc;
} observer_ctx;

static void observe(void *ctx, uint32_t op, int end)
{
    observer_ctx *o = ctx;
    if (end || !o->is_linear[op] || o->rc)
        return;
    llmc_rt_tensor x;
    const char *name;
    llmc_rt_error rt = {0};
    if (llmc_rt_session_op_input(o->s, op, 0, o->S, 0, &x, &name, &rt) != LLMC_RT_OK) {
        o->rc = llmc_fail(o->err, LLMC_E_RUNTIME, "calibration: op %u: %s", op, rt.msg);
        return;
    }
    if (x.dtype != LLMC_RT_F32)
        return;
    int64_t n = 1;
    for (int d = 0; d < x.rank; d++)
        n *= x.dims[d];
    int i = range_index(o->c, name);
    if (i < 0 || x.rank < 1 ||
        add_values(&o->c->ranges[i], x.data, n, x.dims[x.rank - 1]))
        o->rc = llmc_fail(o->err, LLMC_E_NOMEM, "calibration: out of memory, or '%s' changed "
                          "width", name);
}

static uint8_t *linear_ops(const llmc_rt_plan *plan)
{
    uint8_t *is_linear = calloc(rt_plan_of(plan)->n_ops ? rt_plan_of(plan)->n_ops : 1, 1);
    for (uint32_t i = 0; is_linear && i < rt_plan_of(plan)->n_ops; i++) {
        llmc_rt_op_info info;
        is_linear[i] = llmc_rt_plan_op(plan, i, &info) == LLMC_RT_OK &&
                       info.code == LLMC_RT_OP_Linear;
    }
    return is_linear;
}

/* Runs one window (from position 0) under the observer. */
static int run_window(llmc_rt_session *s, observer_ctx *o, const int64_t *ids, uint32_t n,
                      llmc_calibration *c, llmc_error *err)
{
    llmc_rt_error rt = {0};
    int rc = LLMC_OK;
    o->S = n;
    llmc_rt_session_reset(s);
    if (llmc_rt_session_feed(s, ids, n, NULL, &rt) != LLMC_RT_OK)
        rc = o->rc ? o->rc : llmc_fail(err, LLMC_E_RUNTIME, "calibration: %s", rt.msg);
    c->tokens += n;
    c->windows++;
    return rc ? rc : o->rc;
}

/* Each segment of ids (segment k ends at ends[k]) cut into non-overlapping
 * windows of opt->context tokens, each from position 0. */
static int run_windows(const llmc_rt_plan *plan, const llmc_id_list *ids,
                       const llmc_id_list *ends, const llmc_calibrate_options *opt,
                       llmc_calibration *c, llmc_error *err)
{
    size_t memory = llmc_rt_session_memory_for(plan, opt->context);
    void *mem = memory != SIZE_MAX ? aligned_alloc(64, (memory + 63) / 64 * 64) : NULL;
    uint8_t *is_linear = linear_ops(plan);
    llmc_rt_session s;
    llmc_rt_error rt = {0};
    int rc = LLMC_OK;
    if (!mem || !is_linear)
        rc = llmc_fail(err, LLMC_E_NOMEM, "calibration: no memory for a session of %u tokens",
                       opt->context);
    else if (llmc_rt_session_init_for(&s, plan, opt->context, mem, memory, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "calibration: %s", rt.msg);
    observer_ctx o = {&s, c, is_linear, 0, err, LLMC_OK};
    if (!rc)
        llmc_rt_session_set_observer(&s, observe, &o);
    for (size_t k = 0, at = 0; !rc && k < ends->n; k++)
        for (size_t end = (size_t)ends->ids[k], n; !rc && at < end; at += n) {
            n = end - at < opt->context ? end - at : opt->context;
            rc = run_window(&s, &o, ids->ids + at, (uint32_t)n, c, err);
        }
    free(is_linear);
    free(mem);
    return rc;
}

static int calibration_plan(const char *model, const llmc_import_options *io,
                            const llmc_pass_ctx *ctx, const uint8_t *tokenizer,
                            size_t tokenizer_size, const char *target, uint8_t **plan,
                            size_t *size, llmc_error *err)
{
    llmc_graph g;
    llmc_graph_init(&g);
    llmc_pass_ctx f32 = *ctx;
    f32.quant_bits = 0;
    f32.calibration = NULL;
    f32.log = NULL;
    f32.explain = false;
    llmc_pass_record records[MAX_PASSES];
    int n_records = 0;
    llmc_codegen_stats stats;
    int rc = llmc_import_onnx(model, io, &g, err);
    if (!rc)
        rc = llmc_pipeline_run(&g, &f32, NULL, records, &n_records, err);
    llmc_codegen_options co = {.max_context = ctx->max_context, .n_passes = n_records,
                               .passes = records, .target = target, .tokenizer = tokenizer,
                               .tokenizer_size = tokenizer_size};
    if (!rc)
        rc = llmc_codegen_to_memory(&g, &co, plan, size, &stats, err);
    llmc_graph_free(&g);
    return rc;
}

/* The calibration tokens: the text tokenized whole (one segment), or the
 * ids file's lines (a segment each), ids checked against the vocabulary. */
static int calibration_ids(const llmc_rt_plan *plan, const llmc_calibrate_options *opt,
                           llmc_id_list *ids, llmc_id_list *ends, llmc_error *err)
{
    const char *path = opt->text ? opt->text : opt->ids;
    int rc = opt->text ? llmc_encode_text_file(plan, path, ids, err)
                       : llmc_read_ids(path, rt_plan_of(plan)->vocab_size, ids, ends, err);
    if (!rc && !ids->n)
        return llmc_fail(err, LLMC_E_INPUT, opt->text ? "--calibrate '%s': the text has no tokens"
                         : "--calibrate-ids '%s': the file has no token ids", path);
    if (!rc && opt->text && !ends->n)
        rc = llmc_id_list_push(ends, (int64_t)ids->n) ? LLMC_OK
             : llmc_fail(err, LLMC_E_NOMEM, "calibration: out of memory");
    return rc;
}

int llmc_calibrate_plan(const llmc_rt_plan *plan, const llmc_calibrate_options *opt,
                        llmc_calibration *out, llmc_error *err)
{
    memset(out, 0, sizeof *out);
    out->percentile = opt->percentile;
    out->context = opt->context;
    llmc_id_list ids = {0}, ends = {0};
    int rc = calibration_ids(plan, opt, &ids, &ends, err);
    if (!rc)
        rc = run_windows(plan, &ids, &ends, opt, out, err);
    for (int i = 0; !rc && i < out->n; i++)
        finish_range(&out->ranges[i], opt->percentile);
    free(ids.ids);
    free(ends.ids);
    if (rc)
        llmc_calibration_free(out);
    return rc;
}

int llmc_calibrate(const char *model, const llmc_import_options *io, const llmc_pass_ctx *ctx,
                   const uint8_t *tokenizer, size_t tokenizer_size,
                   const llmc_calibrate_options *opt, llmc_calibration *out, llmc_error *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *bytes = NULL;
    size_t size = 0;
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    int rc = calibration_plan(model, io, ctx, tokenizer, tokenizer_size, opt->target, &bytes,
                              &size, err);
    if (!rc && llmc_rt_plan_open(&plan, bytes, size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "calibration plan: %s", rt.msg);
    if (!rc)
        rc = llmc_calibrate_plan(&plan, opt, out, err);
    free(bytes);
    return rc;
}

void llmc_calibration_print(const llmc_calibration *c, FILE *out)
{
    fprintf(out, "calibration: %llu tokens in %u windows of up to %u; clip at the %g "
            "percentile of |x|\n", (unsigned long long)c->tokens, c->windows, c->context,
            c->percentile);
    int width = (int)strlen("tensor (a Linear's x)");
    for (int i = 0; i < c->n; i++)
        width = (int)strlen(c->ranges[i].name) > width ? (int)strlen(c->ranges[i].name) : width;
    fprintf(out, "%-*s %12s %12s %12s %10s %10s %12s\n", width, "tensor (a Linear's x)",
            "max |x|", "clip", "scale", "outliers", "importance", "hot channels");
    for (int i = 0; i < c->n; i++) {
        const llmc_act_range *r = &c->ranges[i];
        int64_t hot = 0;
        for (int64_t ch = 0; ch < r->channels; ch++)
            hot += r->channel_absmax[ch] > r->clip;
        fprintf(out, "%-*s %12.6g %12.6g %12.6g %9.4f%% %10.3f %12lld\n", width, r->name,
                r->absmax, (double)r->clip, (double)r->scale,
                r->count ? 100.0 * (double)r->beyond / (double)r->count : 0.0,
                r->clip > 0 ? r->absmax / r->clip : 0.0, (long long)hot);
    }
}

