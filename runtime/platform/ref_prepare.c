/* The reference delegate's prepare (ref_graph.h): the checks that prove a
 * subgraph's ops runnable, then the graph they run on. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_graph.h"

/* The runtime's float32 loops (llmc_rt.h's op resolver entries) of the
 * kinds it runs, by kind; NULL: refused.  The same functions as the CPU's,
 * so a delegated subgraph and the CPU agree wherever the int8 path does. */
#define REF_UNARY_(Name) [LLMC_RT_UNARY_##Name] = llmc_rt_unary_##Name,
static const llmc_rt_unary_fn unary_loops[LLMC_RT_UNARY_COUNT] = {
    REF_UNARY_(Identity) REF_UNARY_(Neg) REF_UNARY_(Abs) REF_UNARY_(Sqrt) REF_UNARY_(Exp)
    REF_UNARY_(Tanh) REF_UNARY_(Sigmoid) REF_UNARY_(Relu) REF_UNARY_(Silu) REF_UNARY_(Gelu)
    REF_UNARY_(GeluTanh)};
#define REF_BINARY_(Name) [LLMC_RT_BINARY_##Name] = llmc_rt_binary_##Name,
static const llmc_rt_binary_fn binary_loops[LLMC_RT_BINARY_COUNT] = {
    REF_BINARY_(Add) REF_BINARY_(Sub) REF_BINARY_(Mul) REF_BINARY_(Div) REF_BINARY_(Max)
    REF_BINARY_(Min) REF_BINARY_(SwiGLU) REF_BINARY_(GeGLU)};

/* Elements a tensor may have: far beyond any chunk, far below overflow. */
#define MAX_ELEMS ((int64_t)1 << 40)
/* The longest reduction whose int8 products cannot overflow an int32 sum. */
#define MAX_K ((int64_t)(INT32_MAX / (127 * 127)))

/* ---- checks ------------------------------------------------------ */

typedef struct {
    const llmc_rt_subgraph *sg;
    ref_graph *g;
    uint32_t op;                           /* the op being checked */
    llmc_rt_error *err;
} prep;

static void set_error(llmc_rt_error *err, llmc_rt_status code, const char *prefix,
                      const char *fmt, va_list ap)
{
    if (!err)
        return;
    err->code = code;
    int n = snprintf(err->msg, sizeof err->msg, "%s", prefix);
    if (n >= 0 && (size_t)n < sizeof err->msg)
        vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
}

llmc_rt_status ref_fail(llmc_rt_error *err, llmc_rt_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(err, code, "", fmt, ap);
    va_end(ap);
    return code;
}

/* LLMC_RT_E_DELEGATE: "subgraph 3 'name': op 2 (Linear 'fc'): why". */
static llmc_rt_status refuse_op(const prep *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static llmc_rt_status refuse_op(const prep *p, const char *fmt, ...)
{
    const llmc_rt_sg_op *op = &p->sg->ops[p->op];
    const char *code = llmc_rt_op_name(op->code);
    char prefix[160];
    snprintf(prefix, sizeof prefix, "subgraph %u '%s': op %u (%s '%s'): ", p->sg->index,
             ref_text(p->sg->name), p->op, code, ref_text(op->name));
    va_list ap;
    va_start(ap, fmt);
    set_error(p->err, LLMC_RT_E_DELEGATE, prefix, fmt, ap);
    va_end(ap);
    return LLMC_RT_E_DELEGATE;
}

/* The same for what no single op is to blame for. */
static llmc_rt_status refuse_subgraph(const llmc_rt_subgraph *sg, llmc_rt_error *err,
                                      const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static llmc_rt_status refuse_subgraph(const llmc_rt_subgraph *sg, llmc_rt_error *err,
                                      const char *fmt, ...)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "subgraph %u '%s': ", sg->index, ref_text(sg->name));
    va_list ap;
    va_start(ap, fmt);
    set_error(err, LLMC_RT_E_DELEGATE, prefix, fmt, ap);
    va_end(ap);
    return LLMC_RT_E_DELEGATE;
}

static const llmc_rt_sg_tensor *desc(const prep *p, uint32_t t)
{
    return &p->sg->tensors[t];
}

static const char *tname(const prep *p, uint32_t t)
{
    return ref_text(desc(p, t)->name);
}

static bool same_dims(const llmc_rt_sg_tensor *a, const llmc_rt_sg_tensor *b)
{
    return a->rank == b->rank && !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]);
}

/* b's dims are the last b->rank dims of a. */
static bool trailing_dims(const llmc_rt_sg_tensor *b, const llmc_rt_sg_tensor *a)
{
    return b->rank <= a->rank &&
           !memcmp(b->dims, a->dims + (a->rank - b->rank), (size_t)b->rank * sizeof b->dims[0]);
}

/* Rows, columns and elements of t; false when its dims are out of range. */
static bool tensor_extent(const llmc_rt_sg_tensor *t, ref_tensor *x)
{
    if (t->rank < 0 || t->rank > LLMC_RT_MAX_RANK)
        return false;
    int64_t rows = 1, cols = t->rank ? t->dims[t->rank - 1] : 1;
    for (int a = 0; a < t->rank; a++) {
        int64_t d = t->dims[a];
        if (d < 0 || d > MAX_ELEMS)
            return false;
        if (a + 1 < t->rank)
            rows = rows > MAX_ELEMS / (d ? d : 1) ? MAX_ELEMS + 1 : rows * d;
    }
    if (rows > MAX_ELEMS || (cols && rows > MAX_ELEMS / cols))
        return false;
    x->rows = rows;
    x->cols = cols;
    x->count = rows * cols;
    return true;
}

/* Float32 row-major (a weight: its segment holds every value). */
static bool is_f32(const prep *p, uint32_t t)
{
    const llmc_rt_sg_tensor *d = desc(p, t);
    return d->dtype == LLMC_RT_F32 && d->layout == LLMC_RT_LAYOUT_Dense &&
           (!d->weight || d->bytes / 4u >= (uint64_t)p->g->tensors[t].count);
}

/* A float32 weight of n values whose last dim is n (a norm's scale, a bias). */
static bool is_f32_vector_weight(const prep *p, uint32_t t, int64_t n)
{
    const llmc_rt_sg_tensor *d = desc(p, t);
    return d->weight && is_f32(p, t) && d->rank >= 1 && p->g->tensors[t].count == n &&
           d->dims[d->rank - 1] == n;
}

static bool is_act(const prep *p, uint32_t t)
{
    return desc(p, t)->dtype == LLMC_RT_I8 && desc(p, t)->layout == LLMC_RT_LAYOUT_QActTiles;
}

/* What every op must satisfy: operand counts and indices, inputs written
 * before they are read, outputs neither weights nor subgraph inputs, int8
 * activations read by Linears only. */
static llmc_rt_status check_operands(const prep *p, const llmc_rt_sg_op *op)
{
    if (op->n_inputs > LLMC_RT_SG_OP_IO || op->n_outputs > LLMC_RT_SG_OP_IO || !op->n_outputs)
        return refuse_op(p, "%u inputs and %u outputs", op->n_inputs, op->n_outputs);
    for (uint32_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
        uint32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
        if (t >= p->sg->n_tensors)
            return refuse_op(p, "operand %u is tensor %u of %u", i, t, p->sg->n_tensors);
    }
    for (uint32_t i = 0; i < op->n_inputs; i++) {
        uint32_t t = op->inputs[i];
        if (!desc(p, t)->weight && !p->g->tensors[t].written)
            return refuse_op(p, "reads '%s' before any op writes it", tname(p, t));
        if (is_act(p, t) && (op->code != LLMC_RT_OP_Linear || i != 0))
            return refuse_op(p, "reads the int8 activations '%s' (Linears only)", tname(p, t));
    }
    for (uint32_t i = 0; i < op->n_outputs; i++) {
        uint32_t t = op->outputs[i];
        if (desc(p, t)->weight || t < p->sg->n_inputs)
            return refuse_op(p, "writes '%s', a weight or subgraph input", tname(p, t));
    }
    return LLMC_RT_OK;
}

static llmc_rt_status check_counts(const prep *p, const llmc_rt_sg_op *op, uint32_t min_in,
                                   uint32_t max_in, uint32_t max_out)
{
    if (op->n_inputs < min_in || op->n_inputs > max_in || op->n_outputs > max_out)
        return refuse_op(p, "%u inputs and %u outputs, expected %u to %u inputs and at most "
                         "%u outputs", op->n_inputs, op->n_outputs, min_in, max_in, max_out);
    return LLMC_RT_OK;
}

/* y float32 with x's dims. */
static llmc_rt_status check_same_f32(const prep *p, uint32_t x, uint32_t y)
{
    if (!is_f32(p, x) || !is_f32(p, y) || !same_dims(desc(p, x), desc(p, y)))
        return refuse_op(p, "'%s' and '%s' must be float32 of equal dims", tname(p, x),
                         tname(p, y));
    return LLMC_RT_OK;
}

/* RMSNorm (x, scale[, residual]) and LayerNorm (x, scale[, bias]) over the
 * last axis, scale and bias float32 weights of its length, RMSNorm's
 * residual (added after the scale, as Gemma 2's post-norms) a float32
 * tensor of the output's dims. */
static llmc_rt_status prepare_norm(const prep *p, const llmc_rt_sg_op *op, ref_step *s)
{
    bool layer = op->code == LLMC_RT_OP_LayerNorm;
    llmc_rt_status st = check_counts(p, op, 2, 3, layer ? 3 : 1);
    if (st)
        return st;
    if (layer && op->n_outputs != 1)
        return refuse_op(p, "Mean and InvStdDev outputs are not supported");
    uint32_t x = op->inputs[0];
    if ((st = check_same_f32(p, x, op->outputs[0])))
        return st;
    if (!layer && op->n_inputs == 3 && (st = check_same_f32(p, op->inputs[2], op->outputs[0])))
        return st;
    int64_t d = p->g->tensors[x].cols;
    for (uint32_t i = 1; i < (layer ? op->n_inputs : 2); i++)
        if (!is_f32_vector_weight(p, op->inputs[i], d))
            return refuse_op(p, "'%s' must be a float32 weight [%lld]", tname(p, op->inputs[i]),
                             (long long)d);
    s->epsilon = op->epsilon;
    return LLMC_RT_OK;
}

/* Static per-tensor scale into int8 activations internal to the subgraph. */
static llmc_rt_status prepare_quantize(const prep *p, const llmc_rt_sg_op *op, ref_step *s)
{
    llmc_rt_status st = check_counts(p, op, 1, 1, 1);
    if (st)
        return st;
    if (op->scale == 0.0f)
        return refuse_op(p, "per-tensor int8 only (scale 0 quantizes each row by its own)");
    if (!(op->scale > 0.0f) || !isfinite(op->scale))
        return refuse_op(p, "scale %g is not a positive float", (double)op->scale);
    uint32_t x = op->inputs[0], y = op->outputs[0];
    if (!is_f32(p, x) || !is_act(p, y) || !same_dims(desc(p, x), desc(p, y)))
        return refuse_op(p, "needs float32 '%s' and QActTiles int8 '%s' of equal dims",
                         tname(p, x), tname(p, y));
    if (y < p->g->n_io)
        return refuse_op(p, "its QActTiles output '%s' is a subgraph output: int8 "
                         "activations must stay internal to the subgraph", tname(p, y));
    p->g->tensors[y].act_scale = op->scale;
    s->scale = op->scale;
    return LLMC_RT_OK;
}

/* x the int8 activations of a QuantizeRows above, W Int8 QWeightTiles with
 * one scale per output channel, unpacked here. */
static llmc_rt_status prepare_weights(const prep *p, uint32_t x, uint32_t w, ref_step *s)
{
    const llmc_rt_sg_tensor *W = desc(p, w);
    if (W->dtype != LLMC_RT_I8 || W->layout != LLMC_RT_LAYOUT_QWeightTiles || !W->weight || W->rank != 2)
        return refuse_op(p, "W '%s' is not an Int8 QWeightTiles weight", tname(p, w));
    int64_t n = W->dims[0], k = W->dims[1];
    if (k != p->g->tensors[x].cols)
        return refuse_op(p, "W '%s' is [%lld, %lld] but x has %lld columns", tname(p, w),
                         (long long)n, (long long)k, (long long)p->g->tensors[x].cols);
    if ((int64_t)W->group < k)
        return refuse_op(p, "per-channel weights only: W '%s' has groups of %u < K %lld",
                         tname(p, w), W->group, (long long)k);
    if (k > MAX_K)
        return refuse_op(p, "K %lld overflows the int32 accumulator", (long long)k);
    s->wq = malloc((size_t)p->g->tensors[w].count + 1);
    s->wscale = calloc((size_t)n + 1, sizeof *s->wscale);
    if (!s->wq || !s->wscale)
        return refuse_op(p, "out of memory for W '%s'", tname(p, w));
    for (int64_t r = 0; r < n; r++) {
        llmc_rt_error e;
        if (llmc_rt_sg_weight_row(W, r, s->wq + r * k, s->wscale + r, &e))
            return refuse_op(p, "%s", e.msg);
    }
    return LLMC_RT_OK;
}

/* Linear(x, W[, bias][, residual]) -> y_0 .. y_j, split along the last axis. */
static llmc_rt_status prepare_linear(const prep *p, const llmc_rt_sg_op *op, ref_step *s)
{
    if (op->kind < 0 || op->kind > 3)
        return refuse_op(p, "kind %d", op->kind);
    s->bias = op->kind & 1;
    s->residual = op->kind & 2;
    uint32_t n_in = 2u + s->bias + s->residual;
    llmc_rt_status st = check_counts(p, op, n_in, n_in, LLMC_RT_SG_OP_IO);
    if (st)
        return st;
    uint32_t x = op->inputs[0];
    if (!is_act(p, x) || !(p->g->tensors[x].act_scale > 0.0f))
        return refuse_op(p, "x '%s' is not the int8 output of a static-scale QuantizeRows",
                         tname(p, x));
    s->scale = p->g->tensors[x].act_scale;
    if ((st = prepare_weights(p, x, op->inputs[1], s)))
        return st;
    int64_t m = p->g->tensors[x].rows, n = desc(p, op->inputs[1])->dims[0];
    if (s->bias && !is_f32_vector_weight(p, op->inputs[2], n))
        return refuse_op(p, "bias '%s' must be a float32 weight [%lld]", tname(p, op->inputs[2]),
                         (long long)n);
    uint32_t r = op->inputs[n_in - 1];
    if (s->residual &&
        (!is_f32(p, r) || p->g->tensors[r].rows != m || p->g->tensors[r].cols != n))
        return refuse_op(p, "residual '%s' must be float32 [%lld, %lld]", tname(p, r),
                         (long long)m, (long long)n);
    int64_t cols = 0;
    for (uint32_t j = 0; j < op->n_outputs; j++) {
        uint32_t y = op->outputs[j];
        if (!is_f32(p, y) || desc(p, y)->rank < 1 || p->g->tensors[y].rows != m)
            return refuse_op(p, "output '%s' must be float32 with %lld rows", tname(p, y),
                             (long long)m);
        cols += p->g->tensors[y].cols;
    }
    if (cols != n)
        return refuse_op(p, "outputs have %lld columns, W has %lld rows", (long long)cols,
                         (long long)n);
    return LLMC_RT_OK;
}

/* a `kind` b with b of a's dims or a weight of its trailing dims. */
static llmc_rt_status prepare_binary(const prep *p, const llmc_rt_sg_op *op, ref_step *s)
{
    llmc_rt_status st = check_counts(p, op, 2, 2, 1);
    if (st)
        return st;
    s->binary = op->kind >= 0 && op->kind < LLMC_RT_BINARY_COUNT ? binary_loops[op->kind] : NULL;
    if (!s->binary)
        return refuse_op(p, "Binary kind %d is not supported", op->kind);
    uint32_t a = op->inputs[0], b = op->inputs[1];
    if ((st = check_same_f32(p, a, op->outputs[0])))
        return st;
    const llmc_rt_sg_tensor *bd = desc(p, b);
    if (!is_f32(p, b) ||
        !(same_dims(bd, desc(p, a)) || (bd->weight && trailing_dims(bd, desc(p, a)))))
        return refuse_op(p, "b '%s' must be float32 of a's dims or a weight of its trailing "
                         "dims", tname(p, b));
    return LLMC_RT_OK;
}

static llmc_rt_status prepare_unary(const prep *p, const llmc_rt_sg_op *op, ref_step *s)
{
    llmc_rt_status st = check_counts(p, op, 1, 1, 1);
    if (st)
        return st;
    s->unary = op->kind >= 0 && op->kind < LLMC_RT_UNARY_COUNT ? unary_loops[op->kind] : NULL;
    if (!s->unary)
        return refuse_op(p, "Unary kind %d is not supported", op->kind);
    return check_same_f32(p, op->inputs[0], op->outputs[0]);
}

static llmc_rt_status prepare_reshape(const prep *p, const llmc_rt_sg_op *op, ref_step *s)
{
    (void)s;
    llmc_rt_status st = check_counts(p, op, 1, 1, 1);
    if (st)
        return st;
    uint32_t x = op->inputs[0], y = op->outputs[0];
    if (!is_f32(p, x) || !is_f32(p, y) || p->g->tensors[x].count != p->g->tensors[y].count)
        return refuse_op(p, "'%s' and '%s' must be float32 of equal sizes", tname(p, x),
                         tname(p, y));
    return LLMC_RT_OK;
}

/* How the delegate prepares and runs each op code it implements (of those
 * llmc_rt_op_npu accepts: an NPU subgraph holds no other). */
typedef struct {
    llmc_rt_status (*prepare)(const prep *p, const llmc_rt_sg_op *op, ref_step *s);
    ref_run_fn run;
} ref_op;

static const ref_op ref_ops[LLMC_RT_OP_COUNT] = {
    [LLMC_RT_OP_RMSNorm] = {prepare_norm, ref_run_norm},
    [LLMC_RT_OP_LayerNorm] = {prepare_norm, ref_run_norm},
    [LLMC_RT_OP_QuantizeRows] = {prepare_quantize, ref_run_quantize},
    [LLMC_RT_OP_Linear] = {prepare_linear, ref_run_linear},
    [LLMC_RT_OP_Binary] = {prepare_binary, ref_run_binary},
    [LLMC_RT_OP_Unary] = {prepare_unary, ref_run_unary},
    [LLMC_RT_OP_Reshape] = {prepare_reshape, ref_run_reshape},
};

static llmc_rt_status prepare_step(const prep *p, const llmc_rt_sg_op *op, ref_step *s)
{
    llmc_rt_status st = check_operands(p, op);
    if (st)
        return st;
    if (!llmc_rt_op_npu(op->code) || !ref_ops[op->code].prepare)
        return refuse_op(p, "the reference delegate does not run this op");
    s->code = op->code;
    s->run = ref_ops[op->code].run;
    s->n_in = op->n_inputs;
    s->n_out = op->n_outputs;
    memcpy(s->in, op->inputs, sizeof s->in);
    memcpy(s->out, op->outputs, sizeof s->out);
    return ref_ops[op->code].prepare(p, op, s);
}

/* ---- the graph --------------------------------------------------- */

void ref_graph_free(ref_graph *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; g->tensors && i < g->n_tensors; i++)
        free(g->tensors[i].own);
    for (uint32_t i = 0; g->steps && i < g->n_steps; i++) {
        free(g->steps[i].wq);
        free(g->steps[i].wscale);
    }
    free(g->tensors);
    free(g->steps);
    free(g->io);
    free(g);
}

/* Every tensor's extent; inputs count as written, weights as where they lie. */
static llmc_rt_status describe_tensors(const llmc_rt_subgraph *sg, ref_graph *g,
                                       llmc_rt_error *err)
{
    for (uint32_t t = 0; t < sg->n_tensors; t++) {
        const llmc_rt_sg_tensor *d = &sg->tensors[t];
        ref_tensor *x = &g->tensors[t];
        if (!tensor_extent(d, x))
            return refuse_subgraph(sg, err, "tensor %u '%s': rank %d or its dims out of range",
                                   t, ref_text(d->name), d->rank);
        if (d->weight && t < g->n_io)
            return refuse_subgraph(sg, err, "tensor %u '%s': a weight among the inputs and "
                                   "outputs", t, ref_text(d->name));
        x->weight = d->weight;
        x->written = t < sg->n_inputs;
    }
    return LLMC_RT_OK;
}

/* A buffer for every intermediate an op writes (int8 activations: a byte
 * per value). */
static llmc_rt_status own_buffers(const llmc_rt_subgraph *sg, ref_graph *g, llmc_rt_error *err)
{
    for (uint32_t t = 0; t < sg->n_tensors; t++) {
        ref_tensor *x = &g->tensors[t];
        if (t < g->n_io || x->weight || !x->written)
            continue;
        size_t size = sg->tensors[t].dtype == LLMC_RT_I8 ? 1 : 4;
        x->own = calloc((size_t)x->count + 1, size);
        if (!x->own)
            return refuse_subgraph(sg, err, "out of memory for tensor %u '%s'", t,
                                   ref_text(sg->tensors[t].name));
    }
    return LLMC_RT_OK;
}

static llmc_rt_status build_graph(const llmc_rt_subgraph *sg, ref_graph *g, llmc_rt_error *err)
{
    llmc_rt_status st = describe_tensors(sg, g, err);
    if (st)
        return st;
    prep p = {sg, g, 0, err};
    for (; p.op < sg->n_ops; p.op++) {
        if ((st = prepare_step(&p, &sg->ops[p.op], &g->steps[p.op])))
            return st;
        for (uint32_t j = 0; j < sg->ops[p.op].n_outputs; j++)
            g->tensors[sg->ops[p.op].outputs[j]].written = true;
    }
    for (uint32_t t = sg->n_inputs; t < g->n_io; t++)
        if (!g->tensors[t].written)
            return refuse_subgraph(sg, err, "output %u '%s' is written by no op",
                                   t - sg->n_inputs, ref_text(sg->tensors[t].name));
    return own_buffers(sg, g, err);
}

llmc_rt_status ref_graph_build(const llmc_rt_subgraph *sg, ref_graph **out, llmc_rt_error *err)
{
    *out = NULL;
    if ((uint64_t)sg->n_inputs + sg->n_outputs > sg->n_tensors)
        return refuse_subgraph(sg, err, "%u inputs and %u outputs but %u tensors",
                               sg->n_inputs, sg->n_outputs, sg->n_tensors);
    ref_graph *g = calloc(1, sizeof *g);
    if (g) {
        g->index = sg->index;
        snprintf(g->name, sizeof g->name, "%s", ref_text(sg->name));
        g->n_io = sg->n_inputs + sg->n_outputs;
        g->n_tensors = sg->n_tensors;
        g->n_steps = sg->n_ops;
        g->tensors = calloc((size_t)sg->n_tensors + 1, sizeof *g->tensors);
        g->steps = calloc((size_t)sg->n_ops + 1, sizeof *g->steps);
        g->io = calloc((size_t)g->n_io + 1, sizeof *g->io);
    }
    if (!g || !g->tensors || !g->steps || !g->io) {
        ref_graph_free(g);
        return refuse_subgraph(sg, err, "out of memory");
    }
    llmc_rt_status st = build_graph(sg, g, err);
    if (st) {
        ref_graph_free(g);
        return st;
    }
    *out = g;
    return LLMC_RT_OK;
}
