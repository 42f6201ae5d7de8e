/* rope-fusion: the rotate-half RoPE pattern becomes one llmc.Rope.
 *
 *   y = x * cos + Concat(-x[..., h:], x[..., :h], axis=-1) * sin      (h = D/2)
 *
 * (Slice, Slice, Neg, Concat, Mul, Mul, Add in any operand order) becomes
 * llmc.Rope(x, cos_table, sin_table){rotary_dim = D}; then the partial form
 * Concat(Rope(x[..., :r]), x[..., r:], axis=-1) becomes
 * llmc.Rope(x, cos_table, sin_table){rotary_dim = r}.
 *
 * cos and sin are values the model computes from position_ids (or gathers
 * from a table by position_ids).  Their tables [max_context, D] come from
 * evaluating the model's own subgraph for the value at S = max_context,
 * P = 0 (evaluate.h binds position_ids = 0 .. max_context-1); a second
 * evaluation at S = 3, P = 5 must reproduce table rows 5..7, which is what
 * llmc_ops.h promises the runtime: row P+s for token s.  Tables with equal
 * contents are shared. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "ir/llmc_ops.h"
#include "match.h"
#include "pass.h"
#include "pass_list.h"

/* The cross-check call: 3 new tokens after 5 cached ones. */
#define CHECK_S 3
#define CHECK_P 5

typedef struct {
    int source;             /* the cos/sin value in the graph */
    int table;              /* its [max_context, D] constant; -1: refused */
} rope_table;

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    llmc_error *err;
    rope_table *tables;
    int n_tables, cap_tables;
    int fused, partial;
} rope_fuser;

static void explain(const rope_fuser *f, int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void explain(const rope_fuser *f, int node, const char *fmt, ...)
{
    const llmc_node *n = &f->g->nodes[node];
    va_list ap;
    if (!f->ctx->explain || !f->ctx->log)
        return;
    fprintf(f->ctx->log, "rope-fusion: node '%s' (#%d, %s) not fused: ", n->name, node, n->op_type);
    va_start(ap, fmt);
    vfprintf(f->ctx->log, fmt, ap);
    va_end(ap);
    fputc('\n', f->ctx->log);
}

/* ---- matching the rotate-half ---- */

/* Concat(Neg(Slice(src, h, 2h)), Slice(src, 0, h), axis=-1): *src gets
 * the sliced value, whose last dim is 2h (x itself) or more (when a Slice
 * fusion merged x = src[..., :2h] into the halves).  *why says which
 * condition failed. */
static bool match_rotate_half(const llmc_graph *g, int v, int *src, const char **why)
{
    int cat = llmc_match_producer(g, v, "Concat");
    if (cat < 0 || g->nodes[cat].n_inputs != 2)
        return (*why = "no Concat of two halves"), false;
    const llmc_node *c = &g->nodes[cat];
    int rank = g->values[v].shape.rank;
    if (rank < 2 || llmc_match_axis_attr(g, cat, "axis", 0, rank) != rank - 1)
        return (*why = "Concat is not on the last axis"), false;
    int neg = llmc_match_producer(g, c->inputs[0], "Neg");
    if (neg < 0)
        return (*why = "the first half of the Concat is not a Neg (of the upper half)"), false;
    int upper = llmc_match_producer(g, g->nodes[neg].inputs[0], "Slice");
    int lower = llmc_match_producer(g, c->inputs[1], "Slice");
    if (upper < 0 || lower < 0)
        return (*why = "the halves are not Slices"), false;
    llmc_affine d = g->values[v].shape.dims[rank - 1];
    if (!llmc_aff_is_const(d) || d.c % 2 != 0 || d.c < 2)
        return (*why = "the last dim is not a known even number"), false;
    int64_t h = d.c / 2;
    int src_upper, src_lower;
    if (!llmc_match_slice_last(g, upper, h, 2 * h, &src_upper))
        return (*why = "the negated Slice is not x[..., D/2:D] on the last axis"), false;
    if (!llmc_match_slice_last(g, lower, 0, h, &src_lower))
        return (*why = "the second Slice is not x[..., :D/2] on the last axis"), false;
    if (src_upper != src_lower)
        return (*why = "the Slices do not cut one x"), false;
    *src = src_upper;
    return true;
}

/* Is v the x whose halves `src` holds: src itself with last dim 2h, or
 * Slice(src)[..., :2h]? */
static bool is_rotated_x(const llmc_graph *g, int v, int src, int64_t two_h)
{
    const llmc_shape *s = &g->values[v].shape;
    int slice = llmc_match_producer(g, v, "Slice"), sliced;
    if (s->rank < 2 || !llmc_aff_eq(s->dims[s->rank - 1], llmc_aff_const(two_h)))
        return false;
    return v == src || (slice >= 0 && llmc_match_slice_last(g, slice, 0, two_h, &sliced) && sliced == src);
}

typedef struct {
    int x, cos, sin;
    int64_t dim;            /* D: the last dim of x */
} rope_match;

/* Mul(x, cos) and Mul(rot, sin) in either operand order, rot = rotate-half(x). */
static bool match_muls(const llmc_graph *g, int x_mul, int rot_mul, rope_match *m, const char **why)
{
    const llmc_node *xm = &g->nodes[x_mul], *rm = &g->nodes[rot_mul];
    for (int i = 0; i < 2; i++) {
        int src;
        if (!match_rotate_half(g, rm->inputs[i], &src, why))
            continue;
        const llmc_shape *rot = &g->values[rm->inputs[i]].shape;
        int64_t two_h = rot->dims[rot->rank - 1].c;
        for (int j = 0; j < 2; j++)
            if (is_rotated_x(g, xm->inputs[j], src, two_h)) {
                *m = (rope_match){xm->inputs[j], xm->inputs[1 - j], rm->inputs[1 - i], two_h};
                return true;
            }
        return (*why = "the other Mul does not read the rotated x"), false;
    }
    return false;
}

/* cos/sin shaped [1, ..., 1, S, D] with rank <= rank of x: one row per
 * token, the same for every head. */
static bool table_shape_ok(const llmc_graph *g, int t, int x, int64_t dim)
{
    const llmc_shape *s = &g->values[t].shape, *xs = &g->values[x].shape;
    if (g->values[t].dtype != LLMC_DT_FLOAT || s->rank < 2 || s->rank > xs->rank)
        return false;
    for (int i = 0; i < s->rank - 2; i++)
        if (!llmc_aff_eq(s->dims[i], llmc_aff_const(1)))
            return false;
    return llmc_match_dim_is_s(s->dims[s->rank - 2]) && llmc_aff_eq(s->dims[s->rank - 1], llmc_aff_const(dim));
}

static bool near(float a, float b)
{
    return fabsf(a - b) <= 1e-6f * fmaxf(1.0f, fabsf(a));
}

/* Rows CHECK_P .. CHECK_P+CHECK_S-1 of `table` equal the evaluation at
 * (CHECK_S, CHECK_P)? */
static bool rows_match(const float *table, const llmc_eval_tensor *check, int64_t dim)
{
    if (check->nbytes != sizeof(float) * CHECK_S * (uint64_t)dim)
        return false;
    const float *rows = check->data;
    for (int64_t i = 0; i < CHECK_S * dim; i++)
        if (!near(rows[i], table[CHECK_P * dim + i]))
            return false;
    return true;
}

/* An existing table with the same bytes, or -1. */
static int find_equal_table(const rope_fuser *f, const void *data, uint64_t nbytes)
{
    for (int i = 0; i < f->n_tables; i++) {
        if (f->tables[i].table < 0)
            continue;
        const llmc_value *t = &f->g->values[f->tables[i].table];
        const void *bytes = t->konst.nbytes == nbytes ? llmc_const_bytes(&t->konst) : NULL;
        if (bytes && memcmp(bytes, data, nbytes) == 0)
            return f->tables[i].table;
    }
    return -1;
}

static int remember_table(rope_fuser *f, int source, int table)
{
    if (f->n_tables == f->cap_tables) {
        int cap = f->cap_tables ? 2 * f->cap_tables : 8;
        rope_table *t = realloc(f->tables, sizeof *t * (size_t)cap);
        if (!t)
            return llmc_fail(f->err, LLMC_E_NOMEM, "rope-fusion: out of memory");
        f->tables = t;
        f->cap_tables = cap;
    }
    f->tables[f->n_tables++] = (rope_table){source, table};
    return LLMC_OK;
}

/* A new constant [max_context, dim] holding `full`'s bytes. */
static int add_table_value(rope_fuser *f, int source, const llmc_eval_tensor *full, int64_t dim, int *table)
{
    llmc_graph *g = f->g;
    char name[512];
    snprintf(name, sizeof name, "%s.rope_table", g->values[source].name);
    int v = llmc_graph_add_value(g, name, LLMC_DT_FLOAT);
    llmc_shape shape = {.rank = 2, .dims = {llmc_aff_const(f->ctx->max_context), llmc_aff_const(dim)}};
    if (v < 0 || llmc_graph_set_const(g, v, LLMC_DT_FLOAT, &shape, full->data, full->nbytes))
        return llmc_fail(f->err, LLMC_E_NOMEM, "rope-fusion: out of memory");
    *table = v;
    return LLMC_OK;
}

/* The [max_context, dim] table of cos/sin value `source` (existing or new),
 * or *table = -1 with an explanation when it is not position-determined. */
static int table_for(rope_fuser *f, int node, int source, int64_t dim, int *table)
{
    *table = -1;
    for (int i = 0; i < f->n_tables; i++)
        if (f->tables[i].source == source) {
            if ((*table = f->tables[i].table) < 0)
                explain(f, node, "'%s' is not a table of positions (above)", f->g->values[source].name);
            return LLMC_OK;
        }
    const llmc_evaluator *ev = llmc_pass_evaluator(f->ctx, "rope-fusion", f->err);
    if (!ev)
        return LLMC_E_INTERNAL;
    llmc_eval_tensor full, check;
    llmc_error why = {0};
    int rc = ev->position_value(f->g, source, f->ctx->max_context, 0, &full, &why);
    if (!rc && (rc = ev->position_value(f->g, source, CHECK_S, CHECK_P, &check, &why)))
        llmc_eval_tensor_free(&full);
    if (rc == LLMC_E_NOMEM)
        return llmc_fail(f->err, rc, "%s", why.msg);
    if (rc) {
        explain(f, node, "'%s' is not a table of positions 0..%u (--max-context): %s", f->g->values[source].name,
                f->ctx->max_context - 1, why.msg);
        return remember_table(f, source, -1);
    }
    rc = LLMC_OK;
    if (full.nbytes != sizeof(float) * f->ctx->max_context * (uint64_t)dim || !rows_match(full.data, &check, dim))
        explain(f, node, "'%s' at 3 tokens after 5 differs from rows 5..7 of its table", f->g->values[source].name);
    else if ((*table = find_equal_table(f, full.data, full.nbytes)) < 0)
        rc = add_table_value(f, source, &full, dim, table);
    if (!rc)
        rc = remember_table(f, source, *table);
    llmc_eval_tensor_free(&full);
    llmc_eval_tensor_free(&check);
    return rc;
}

/* ---- rewriting ---- */

/* Replaces node `node` (one output) by llmc.Rope(x, cos, sin){rotary_dim}. */
static int emit_rope(rope_fuser *f, int node, int x, int cos, int sin, int64_t rotary_dim)
{
    llmc_graph *g = f->g;
    int out = g->nodes[node].outputs[0];
    int ins[3] = {x, cos, sin};
    char name[512];
    snprintf(name, sizeof name, "%s/Rope", g->nodes[node].name);
    llmc_graph_erase_node(g, node);
    int id = llmc_graph_add_llmc_node(g, "Rope", name, ins, 3, &out, 1);
    if (id < 0 || llmc_node_set_int(g, id, "rotary_dim", rotary_dim))
        return llmc_fail(f->err, LLMC_E_NOMEM, "rope-fusion: out of memory");
    return LLMC_OK;
}

/* Add(Mul, Mul) where one Mul reads a Concat of a Neg: meant as RoPE. */
static bool looks_like_rope(const llmc_graph *g, int add, int *m0, int *m1)
{
    const llmc_node *n = &g->nodes[add];
    if (n->n_inputs != 2 || (*m0 = llmc_match_producer(g, n->inputs[0], "Mul")) < 0 ||
        (*m1 = llmc_match_producer(g, n->inputs[1], "Mul")) < 0)
        return false;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            int cat = llmc_match_producer(g, g->nodes[i ? *m1 : *m0].inputs[k], "Concat");
            if (cat >= 0 && g->nodes[cat].n_inputs == 2 && llmc_match_producer(g, g->nodes[cat].inputs[0], "Neg") >= 0)
                return true;
        }
    return false;
}

static int fuse_rotate_half(rope_fuser *f, int add)
{
    llmc_graph *g = f->g;
    int m0, m1;
    rope_match m;
    const char *why = "no rotate-half operand";
    if (!looks_like_rope(g, add, &m0, &m1))
        return LLMC_OK;
    if (!match_muls(g, m0, m1, &m, &why) && !match_muls(g, m1, m0, &m, &why))
        return explain(f, add, "%s", why), LLMC_OK;
    const llmc_shape *xs = &g->values[m.x].shape;
    if (g->values[m.x].dtype != LLMC_DT_FLOAT || !llmc_match_dim_is_s(xs->dims[xs->rank - 2]))
        return explain(f, add, "%s", "x is not float with the token axis S at -2"), LLMC_OK;
    if (!table_shape_ok(g, m.cos, m.x, m.dim) || !table_shape_ok(g, m.sin, m.x, m.dim))
        return explain(f, add, "%s", "cos/sin are not float [1, .., 1, S, D] broadcast over x"), LLMC_OK;
    int cos, sin, rc;
    if ((rc = table_for(f, add, m.cos, m.dim, &cos)) || cos < 0 || (rc = table_for(f, add, m.sin, m.dim, &sin)) ||
        sin < 0)
        return rc;
    f->fused++;
    return emit_rope(f, add, m.x, cos, sin, m.dim);
}

/* Concat(Rope(x[..., :r]), x[..., r:], axis=-1) -> Rope(x){rotary_dim = r} */
static int fuse_partial(rope_fuser *f, int cat)
{
    llmc_graph *g = f->g;
    const llmc_node *c = &g->nodes[cat];
    if (c->n_inputs != 2 || c->inputs[0] < 0 || g->values[c->inputs[0]].producer < 0)
        return LLMC_OK;
    int rope = g->values[c->inputs[0]].producer;
    if (!llmc_is_op(&g->nodes[rope], "Rope"))
        return LLMC_OK;
    int rank = g->values[c->outputs[0]].shape.rank;
    int64_t r = llmc_node_attr_int(g, rope, "rotary_dim", 0);
    int head = llmc_match_producer(g, g->nodes[rope].inputs[0], "Slice");
    int tail = llmc_match_producer(g, c->inputs[1], "Slice");
    int x_head, x_tail;
    if (llmc_match_axis_attr(g, cat, "axis", 0, rank) != rank - 1)
        return explain(f, cat, "%s", "Concat after a Rope is not on the last axis"), LLMC_OK;
    if (head < 0 || tail < 0 || !llmc_match_slice_last(g, head, 0, r, &x_head) ||
        !llmc_match_slice_last(g, tail, r, -1, &x_tail) || x_head != x_tail)
        return explain(f, cat, "%s", "not Concat(Rope(x[..., :r]), x[..., r:]) of one x"), LLMC_OK;
    int cos = g->nodes[rope].inputs[1], sin = g->nodes[rope].inputs[2];
    f->partial++;
    return emit_rope(f, cat, x_head, cos, sin, r);
}

static int fuse_all(rope_fuser *f, const char *op, int (*fuse)(rope_fuser *, int))
{
    int n = f->g->n_nodes, rc = LLMC_OK;
    for (int i = 0; !rc && i < n; i++) {
        const llmc_node *node = &f->g->nodes[i];
        if (!node->dead && node->domain[0] == 0 && strcmp(node->op_type, op) == 0)
            rc = fuse(f, i);
    }
    return rc;
}

static int run_rope_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    rope_fuser f = {.g = g, .ctx = ctx, .err = err};
    int rc = fuse_all(&f, "Add", fuse_rotate_half);
    if (!rc)
        rc = fuse_all(&f, "Concat", fuse_partial);
    if (!rc && f.fused)
        rc = llmc_match_sweep(g, err);
    if (!rc && ctx->detail)
        snprintf(ctx->detail, ctx->detail_size, "%d fused (%d partial)", f.fused, f.partial);
    free(f.tables);
    return rc;
}

const llmc_pass llmc_pass_rope_fusion = {"rope-fusion", run_rope_fusion};
