/* attention-fusion (paper 000 §IV.F): one decoder layer's attention, from
 * the per-head split of q/k/v to the merge of the heads, becomes one
 * llmc.Attention that keeps the KV cache as internal state.
 *
 * Matched, starting from each Softmax over the last axis:
 *   scores = [mask ops]([softcap]([scale] MatMul([scale] q_heads, [scale] Transpose(K_all, 0,1,3,2))))
 *   o      = Reshape(Transpose(MatMul(Softmax(scores), V_all), 0,2,1,3), [1, S, H*D])
 *   K_all  = [repeat_kv](Concat(past_key, k_heads, axis=2)), V_all likewise
 *   x_heads = [llmc.Rope](Transpose([llmc.RMSNorm](Reshape(X, [1, S, heads, D])), 0,2,1,3))
 * (the Reshape may be a chain of Reshapes, the RMSNorm anywhere in it over
 * a last dim of D) where the RMSNorm (Qwen3's q_norm / k_norm over head_dim,
 * one weight [D] for all heads; Gemma 3 normalizes after the Transpose
 * instead, the same rows; OLMo2's over the whole projection X before the
 * split, a weight [heads*D]: take_whole_norm) is on both q and k or on
 * neither, of one kind, with one epsilon, and
 * scale ops are Div/Mul by constant scalars (their product is the
 * op's scale), repeat_kv is torch's Unsqueeze(2)/Expand/Reshape chain of
 * GQA, and mask ops are Add(scores, mask) and Where(cond, scores,
 * fill <= -1e4), softcap is Gemma 2's Mul(Tanh(scores / c), c) (Div by c
 * or Mul by 1/c).  Identity Casts (transformers' float32 softmax and
 * upcasts) are gone by now: the identity pass runs first.
 *
 * The mask ops are dropped only once proven causal, with or without a
 * sliding window, whatever ops build them (transformers' masking_utils,
 * our plain exports, GroupQueryAttention's local_window_size as the
 * importer expands it): each mask and condition is evaluated (the
 * context's evaluator, position_ids = P.., attention_mask = ones).  The
 * last query of a call at P = max_context - 1 gives the window: its
 * visible keys must be [P - window + 1, P] (window 0 when they start at 0).
 * Then at a few (S, P), some straddling that window, the masks together
 * must keep exactly the keys with 0 <= P + s - t < window (any t <= P + s
 * without one) unchanged (conditions true, additive masks 0) and push
 * every other key to <= -1e4.
 *
 * The layer's past_key_values inputs and present outputs leave the graph
 * I/O (the runtime owns the cache), so the present values may feed nothing
 * but graph outputs and the attention itself, and the past inputs nothing
 * but their Concat.  Fused layers get cache indices 0, 1, ... in the order
 * of their past_key layer index.  Anything unmatched is left alone and,
 * with --explain, reported with the node and the failed condition. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "ir/io_roles.h"
#include "ir/llmc_ops.h"
#include "match.h"
#include "pass.h"
#include "pass_list.h"

/* A mask value must reach this to count as "minus infinity": softmax then
 * gives the key exp(score - 1e4 - max) = 0 exactly in float32 (whose
 * smallest subnormal is about e^-103) while the scores of one row span less
 * than 1e4 - 103, which is what the fused op does.  Exporters use
 * finfo(float32).min, -1e9 and (older transformers' GPT-2) -1e4. */
#define MASK_NEG_BIG (-1e4)
#define MAX_MASK_TERMS 4
/* How many scale and mask ops a scores path may chain. */
#define MAX_SCORE_OPS 12

typedef enum { MASK_ADD, MASK_WHERE } mask_kind;

typedef struct {
    mask_kind kind;
    int value;              /* the additive mask, or the Where condition */
    int node;
} mask_term;

/* Reshape(X, [1, S, heads, D]) -> [llmc.RMSNorm] -> Transpose(0,2,1,3) -> [llmc.Rope] */
typedef struct {
    int x;                  /* [1, S, heads*D] */
    int64_t heads, dim;
    int norm;               /* llmc.RMSNorm node over D, -1 if none */
    bool whole;             /* norm is over X's whole rows (weight [heads*D]) */
    int rope;               /* llmc.Rope node, -1 if none */
} head_split;

typedef struct {
    int concat;             /* Concat(past, new, axis=2) */
    int past, present;
    int64_t repeat;         /* repeat_kv factor, 1 without */
    head_split heads;
} kv_path;

typedef struct {
    int softmax;
    int out_node, out;      /* the final Reshape and its [1, S, H*D] value */
    head_split q;
    kv_path k, v;
    double scale;
    double softcap;         /* 0: none */
    uint32_t window;        /* 0: none */
    mask_term masks[MAX_MASK_TERMS];
    int n_masks;
    int layer;
    char why[1024];         /* the condition that failed */
} attn_match;

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    llmc_error *err;
} attn_fuser;

static bool refuse(attn_match *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool refuse(attn_match *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->why, sizeof m->why, fmt, ap);
    va_end(ap);
    return false;
}

static void explain(const attn_fuser *f, const attn_match *m)
{
    const llmc_node *n = &f->g->nodes[m->softmax];
    if (f->ctx->explain && f->ctx->log)
        fprintf(f->ctx->log, "attention-fusion: node '%s' (#%d, %s) not fused: %s\n", n->name, m->softmax,
                n->op_type, m->why);
}

static const char *value_name(const llmc_graph *g, int v)
{
    return v >= 0 ? g->values[v].name : "(none)";
}

/* Mul by / Div by a constant scalar: *through gets the other operand,
 * *scale is multiplied by the factor. */
static bool strip_scale(const llmc_graph *g, int v, int *through, double *scale)
{
    int mul = llmc_match_producer(g, v, "Mul"), div = llmc_match_producer(g, v, "Div");
    double c;
    if (div >= 0 && llmc_match_const_scalar(g, g->nodes[div].inputs[1], &c) && c != 0) {
        *through = g->nodes[div].inputs[0];
        *scale /= c;
        return true;
    }
    for (int k = 0; mul >= 0 && k < 2; k++)
        if (llmc_match_const_scalar(g, g->nodes[mul].inputs[k], &c)) {
            *through = g->nodes[mul].inputs[1 - k];
            *scale *= c;
            return true;
        }
    return false;
}

static int strip_scales(const llmc_graph *g, int v, double *scale)
{
    for (int i = 0; i < MAX_SCORE_OPS && strip_scale(g, v, &v, scale); i++)
        ;
    return v;
}

static bool dims_are(const llmc_shape *s, int rank, const llmc_affine *want)
{
    if (s->rank != rank)
        return false;
    for (int i = 0; i < rank; i++)
        if (!llmc_aff_eq(s->dims[i], want[i]))
            return false;
    return true;
}

/* The per-head RMSNorm's weight: a float constant [D]. */
static bool match_head_norm(const llmc_graph *g, const head_split *h, attn_match *m, const char *what)
{
    const llmc_node *n = &g->nodes[h->norm];
    const llmc_value *w = n->n_inputs == 2 && n->inputs[1] >= 0 ? &g->values[n->inputs[1]] : NULL;
    llmc_affine want[1] = {llmc_aff_const(h->dim)};
    if (!w || !w->is_const || w->dtype != LLMC_DT_FLOAT || !dims_are(&w->shape, 1, want))
        return refuse(m, "%s head norm '%s' (RMSNorm) does not scale by a float constant [%lld]", what, n->name,
                      (long long)h->dim);
    return true;
}

static const int64_t PERM_HEADS[4] = {0, 2, 1, 3};    /* [1,S,H,D] <-> [1,H,S,D] */
static const int64_t PERM_KEYS_T[4] = {0, 1, 3, 2};   /* K [1,H,T,D] -> [1,H,D,T] */

/* The llmc op `op_type` that produces v, or -1. */
static int fused_producer(const llmc_graph *g, int v, const char *op_type)
{
    int p = v >= 0 ? g->values[v].producer : -1;
    return p >= 0 && llmc_is_op(&g->nodes[p], op_type) ? p : -1;
}

/* The last dim of v's shape when constant, else 0. */
static int64_t last_dim(const llmc_graph *g, int v)
{
    const llmc_shape *s = &g->values[v].shape;
    return s->rank > 0 && llmc_aff_is_const(s->dims[s->rank - 1]) ? s->dims[s->rank - 1].c : 0;
}

/* The head split below the Transpose: Reshapes and at most one RMSNorm back
 * to X, the chain's earliest float [1, S, heads*D].  Reshapes keep the
 * element order, so an RMSNorm over a last dim of D normalizes each head's
 * D values wherever it sits in the chain (onnxruntime-genai's builder
 * normalizes [1, heads*S, D] between two Reshapes). */
static bool match_split_chain(const llmc_graph *g, int v, head_split *h)
{
    llmc_affine want_x[3] = {llmc_aff_const(1), {0, 1, 0}, llmc_aff_const(h->heads * h->dim)};
    int norm = -1, reshapes = 0;
    h->x = -1;
    for (int i = 0; i < MAX_SCORE_OPS && v >= 0 && g->values[v].producer >= 0; i++) {
        const llmc_node *n = &g->nodes[g->values[v].producer];
        if (reshapes > 0 && dims_are(&g->values[v].shape, 3, want_x) && g->values[v].dtype == LLMC_DT_FLOAT) {
            h->x = v;
            h->norm = norm;
        }
        if (llmc_is_onnx_op(n, "Reshape"))
            reshapes++;
        else if (norm < 0 && llmc_is_op(n, "RMSNorm") && last_dim(g, v) == h->dim)
            norm = g->values[v].producer;
        else
            break;
        v = n->inputs[0];
    }
    if (reshapes > 0 && v >= 0 && dims_are(&g->values[v].shape, 3, want_x) && g->values[v].dtype == LLMC_DT_FLOAT) {
        h->x = v;
        h->norm = norm;
    }
    return h->x >= 0;
}

/* OLMo2's q_norm / k_norm: X = RMSNorm(P, w) over the whole projection P
 * before the head split.  The Attention takes P and w (its norms over
 * whole rows give the RMSNorm op's bits), when: the split has no per-head
 * norm (one norm a side), the norm has no residual input, w is a float
 * constant [heads*D], P a float [1, S, heads*D], and X has no reader but
 * the split and is no graph output (nothing else needs the normalized
 * rows).  check_consistency gives it back (keep_whole_norm) unless q and k
 * both have one, with one epsilon, and v has none. */
static void take_whole_norm(const llmc_graph *g, head_split *h)
{
    int n = fused_producer(g, h->x, "RMSNorm");
    if (n < 0 || g->nodes[n].n_inputs != 2 || g->nodes[n].inputs[1] < 0 || llmc_match_sole_reader(g, h->x) < 0)
        return;
    const llmc_value *p = &g->values[g->nodes[n].inputs[0]], *w = &g->values[g->nodes[n].inputs[1]];
    llmc_affine want_p[3] = {llmc_aff_const(1), {0, 1, 0}, llmc_aff_const(h->heads * h->dim)};
    if (!w->is_const || w->dtype != LLMC_DT_FLOAT || !dims_are(&w->shape, 1, &want_p[2]) ||
        p->dtype != LLMC_DT_FLOAT || !dims_are(&p->shape, 3, want_p))
        return;
    h->x = g->nodes[n].inputs[0];
    h->norm = n;
    h->whole = true;
}

/* x_heads = [Rope](Transpose(split(X), 0,2,1,3)), split(X) [1, S, heads, D]
 * Reshape(X) with an RMSNorm (weight [D]) before or after it, or within
 * Reshapes (match_split_chain) */
static bool match_head_split(const llmc_graph *g, int v, head_split *h, attn_match *m, const char *what)
{
    h->rope = fused_producer(g, v, "Rope");
    if (h->rope >= 0)
        v = g->nodes[h->rope].inputs[0];
    int after = fused_producer(g, v, "RMSNorm"); /* after the Transpose: the same rows */
    if (after >= 0)
        v = g->nodes[after].inputs[0];
    int tr = llmc_match_producer(g, v, "Transpose");
    if (tr < 0 || !llmc_match_ints_attr(g, tr, "perm", PERM_HEADS, 4))
        return refuse(m, "%s heads '%s' are not Transpose(0,2,1,3) of a head split", what, value_name(g, v));
    int split_v = g->nodes[tr].inputs[0];
    const llmc_shape *split = &g->values[split_v].shape;
    if (split->rank != 4 || !llmc_aff_is_const(split->dims[2]) || !llmc_aff_is_const(split->dims[3]))
        return refuse(m, "%s split '%s' is not [1, S, heads, D]", what, value_name(g, split_v));
    h->heads = split->dims[2].c;
    h->dim = split->dims[3].c;
    llmc_affine want_split[4] = {llmc_aff_const(1), {0, 1, 0}, llmc_aff_const(h->heads), llmc_aff_const(h->dim)};
    if (!dims_are(split, 4, want_split) || !match_split_chain(g, split_v, h) || (after >= 0 && h->norm >= 0))
        return refuse(m, "%s: '%s' is not Reshapes [and one RMSNorm over D] of a float [1, S, heads*D]", what,
                      value_name(g, split_v));
    if (after >= 0)
        h->norm = after;
    if (h->norm >= 0)
        return match_head_norm(g, h, m, what);
    take_whole_norm(g, h);
    return true;
}

/* A whole-row norm given back: X is again the norm's output, which stays
 * an RMSNorm op. */
static void keep_whole_norm(const llmc_graph *g, head_split *h)
{
    if (!h->whole)
        return;
    h->x = g->nodes[h->norm].outputs[0];
    h->norm = -1;
    h->whole = false;
}

/* repeat_kv: Reshape(Expand(Unsqueeze(c, 2) -> [1,kv,1,T,D], [1,kv,n,T,D]), [1,kv*n,T,D]),
 * recognized by the shapes shape inference gave each step. */
static int strip_repeat_kv(const llmc_graph *g, int v, int64_t *repeat)
{
    *repeat = 1;
    int rs = llmc_match_producer(g, v, "Reshape");
    int ex = rs < 0 ? -1 : llmc_match_producer(g, g->nodes[rs].inputs[0], "Expand");
    int un = ex < 0 ? -1 : llmc_match_producer(g, g->nodes[ex].inputs[0], "Unsqueeze");
    if (un < 0)
        return v;
    const llmc_shape *c = &g->values[g->nodes[un].inputs[0]].shape, *u = &g->values[g->nodes[un].outputs[0]].shape;
    const llmc_shape *e = &g->values[g->nodes[ex].outputs[0]].shape, *r = &g->values[v].shape;
    if (c->rank != 4 || u->rank != 5 || e->rank != 5 || r->rank != 4 || !llmc_aff_is_const(e->dims[2]) ||
        !llmc_aff_is_const(c->dims[1]))
        return v;
    llmc_affine want_u[5] = {c->dims[0], c->dims[1], llmc_aff_const(1), c->dims[2], c->dims[3]};
    llmc_affine want_e[5] = {c->dims[0], c->dims[1], e->dims[2], c->dims[2], c->dims[3]};
    llmc_affine want_r[4] = {c->dims[0], llmc_aff_const(c->dims[1].c * e->dims[2].c), c->dims[2], c->dims[3]};
    if (!dims_are(u, 5, want_u) || !dims_are(e, 5, want_e) || !dims_are(r, 4, want_r))
        return v;
    *repeat = e->dims[2].c;
    return g->nodes[un].inputs[0];
}

/* K_all or V_all: [repeat_kv](Concat(past, heads, axis=2)) with past the
 * layer's past_key_values input, read by nothing else, and the Concat's
 * output (present) read only by the attention and its own graph output. */
static bool match_kv(const llmc_graph *g, int v, kv_path *kv, int past_role, int present_role, attn_match *m,
                     const char *what)
{
    int all = strip_repeat_kv(g, v, &kv->repeat);
    kv->concat = llmc_match_producer(g, all, "Concat");
    const llmc_node *c = kv->concat < 0 ? NULL : &g->nodes[kv->concat];
    if (!c || c->n_inputs != 2 || llmc_match_axis_attr(g, kv->concat, "axis", 0, 4) != 2)
        return refuse(m, "%s '%s' is not Concat(past, new, axis=2)", what, value_name(g, all));
    kv->past = c->inputs[0];
    kv->present = all;
    int layer, role = g->values[kv->past].is_graph_input ? llmc_io_role(g->values[kv->past].name, 0, &layer) : -1;
    if (role != past_role || (past_role == LLMC_ROLE_PAST_VALUE && layer != m->layer))
        return refuse(m, "%s Concat does not read the past_key_values %s input of this layer", what,
                      past_role == LLMC_ROLE_PAST_KEY ? "key" : "value");
    m->layer = layer;
    if (llmc_graph_use_count(g, kv->past) != 1)
        return refuse(m, "past input '%s' has readers other than its Concat", value_name(g, kv->past));
    bool out = g->values[all].is_graph_output;
    int out_layer, out_role = out ? llmc_io_role(g->values[all].name, 1, &out_layer) : -1;
    if (llmc_graph_use_count(g, all) != 1 + out || (out && (out_role != present_role || out_layer != layer)))
        return refuse(m, "present '%s' feeds more than the attention and its own graph output", value_name(g, all));
    return match_head_split(g, c->inputs[1], &kv->heads, m, what);
}

/* ---- the scores path: mask ops, scale, Q.K^T ---- */

static bool const_all_below(const llmc_graph *g, int v, double limit)
{
    const llmc_value *val = &g->values[v];
    const char *bytes = val->is_const && val->dtype == LLMC_DT_FLOAT ? llmc_const_bytes(&val->konst) : NULL;
    if (!bytes)
        return false;
    for (uint64_t i = 0; i < val->konst.nbytes / sizeof(float); i++) {
        float x;
        memcpy(&x, bytes + i * sizeof x, sizeof x);
        if (!(x <= limit))
            return false;
    }
    return true;
}

static bool add_mask_term(attn_match *m, mask_kind kind, int value, int node)
{
    if (m->n_masks == MAX_MASK_TERMS)
        return refuse(m, "more than %d mask ops before the Softmax", MAX_MASK_TERMS);
    m->masks[m->n_masks++] = (mask_term){kind, value, node};
    return true;
}

/* Does a chain of scale / mask ops from v end in a MatMul? */
static bool reaches_matmul(const llmc_graph *g, int v, int depth)
{
    if (depth > MAX_SCORE_OPS || v < 0 || g->values[v].producer < 0)
        return false;
    const llmc_node *n = &g->nodes[g->values[v].producer];
    if (llmc_match_producer(g, v, "MatMul") >= 0)
        return true;
    if (llmc_match_producer(g, v, "Add") >= 0)
        return reaches_matmul(g, n->inputs[0], depth + 1) || reaches_matmul(g, n->inputs[1], depth + 1);
    if (llmc_match_producer(g, v, "Where") >= 0)
        return reaches_matmul(g, n->inputs[1], depth + 1);
    if (llmc_match_producer(g, v, "Tanh") >= 0) /* a soft-cap */
        return reaches_matmul(g, n->inputs[0], depth + 1);
    bool passes = llmc_match_producer(g, v, "Mul") >= 0 || llmc_match_producer(g, v, "Div") >= 0;
    return passes && (reaches_matmul(g, n->inputs[0], depth + 1) ||
                      (n->n_inputs > 1 && reaches_matmul(g, n->inputs[1], depth + 1)));
}

/* Gemma 2's soft-cap Mul(Tanh(x / c), c) (or x * (1/c)): *through gets x,
 * *cap c.  The same c on both sides, to float32 rounding. */
static bool strip_softcap(const llmc_graph *g, int v, int *through, double *cap)
{
    int mul = llmc_match_producer(g, v, "Mul");
    double c, inv = 1;
    for (int k = 0; mul >= 0 && k < 2; k++) {
        int th = llmc_match_producer(g, g->nodes[mul].inputs[1 - k], "Tanh");
        if (th < 0 || !llmc_match_const_scalar(g, g->nodes[mul].inputs[k], &c) || !(c > 0))
            continue;
        int x = g->nodes[th].inputs[0];
        if (!strip_scale(g, x, through, &inv) || fabs(inv * c - 1) > 1e-6)
            return false;
        *cap = c;
        return true;
    }
    return false;
}

/* One step back along the scores path from v: *next gets the scores
 * operand.  False (with m->why) when v's producer is none of the ops. */
static bool scores_step(const llmc_graph *g, int v, int *next, attn_match *m)
{
    int node = g->values[v].producer;
    const llmc_node *n = node < 0 ? NULL : &g->nodes[node];
    double cap;
    if (strip_softcap(g, v, next, &cap)) {
        if (m->softcap || m->scale != 1)
            return refuse(m, "soft-cap '%s' after another soft-cap or a scale", n->name);
        m->softcap = cap;
        return true;
    }
    if (strip_scale(g, v, next, &m->scale))
        return true;
    if (llmc_match_producer(g, v, "Where") >= 0) {
        if (!const_all_below(g, n->inputs[2], MASK_NEG_BIG))
            return refuse(m, "Where '%s' does not fill with a constant <= -1e4", n->name);
        *next = n->inputs[1];
        return add_mask_term(m, MASK_WHERE, n->inputs[0], node);
    }
    if (llmc_match_producer(g, v, "Add") >= 0) {
        int k = reaches_matmul(g, n->inputs[0], 0) ? 0 : 1;
        *next = n->inputs[k];
        return add_mask_term(m, MASK_ADD, n->inputs[1 - k], node);
    }
    if (n && (llmc_is_onnx_op(n, "Mul") || llmc_is_onnx_op(n, "Div")) && n->n_inputs == 2)
        return refuse(m, "%s '%s' before the Softmax scales by '%s', which is not a constant scalar (not "
                      "folded: constant-folding's --explain lines say why)", n->op_type, n->name,
                      value_name(g, n->inputs[1]));
    return refuse(m, "'%s' (%s) before the Softmax is not a scale, Add or Where on Q.K^T", value_name(g, v),
                  n ? n->op_type : "a graph input or constant");
}

/* From the Softmax input back to MatMul(q, k^T): returns the MatMul node. */
static int match_scores(const llmc_graph *g, int v, attn_match *m)
{
    for (int i = 0; i < MAX_SCORE_OPS; i++) {
        int qk = llmc_match_producer(g, v, "MatMul");
        if (qk >= 0)
            return qk;
        if (!scores_step(g, v, &v, m))
            return -1;
    }
    return refuse(m, "no Q.K^T MatMul within %d ops of the Softmax", MAX_SCORE_OPS), -1;
}

/* MatMul(q_heads, K^T): the q and k sides, with their scale factors. */
static bool match_qk(const llmc_graph *g, int qk, attn_match *m)
{
    const llmc_node *n = &g->nodes[qk];
    if (!match_head_split(g, strip_scales(g, n->inputs[0], &m->scale), &m->q, m, "q"))
        return false;
    int kt = strip_scales(g, n->inputs[1], &m->scale);
    int tr = llmc_match_producer(g, kt, "Transpose");
    if (tr < 0 || !llmc_match_ints_attr(g, tr, "perm", PERM_KEYS_T, 4))
        return refuse(m, "the right operand of Q.K^T is not Transpose(K, 0,1,3,2)");
    return match_kv(g, strip_scales(g, g->nodes[tr].inputs[0], &m->scale), &m->k, LLMC_ROLE_PAST_KEY,
                    LLMC_ROLE_PRESENT_KEY, m, "K");
}

/* The op reading v, for messages: "3 readers", "graph output", "Cast". */
static const char *readers_of(const llmc_graph *g, int v, char *buf, size_t size)
{
    int reader = llmc_match_sole_reader(g, v), uses = llmc_graph_use_count(g, v);
    if (reader >= 0)
        snprintf(buf, size, "%s '%s'", g->nodes[reader].op_type, g->nodes[reader].name);
    else
        snprintf(buf, size, "%d readers%s", uses, g->values[v].is_graph_output ? ", one a graph output" : "");
    return buf;
}

/* Softmax -> MatMul(probs, V_all) -> Transpose(0,2,1,3) -> Reshape [1, S, H*D] */
static bool match_output(const llmc_graph *g, attn_match *m)
{
    char buf[600];
    int probs = g->nodes[m->softmax].outputs[0];
    int pv = llmc_match_sole_reader(g, probs);
    if (pv < 0 || strcmp(g->nodes[pv].op_type, "MatMul") != 0 || g->nodes[pv].inputs[0] != probs)
        return refuse(m, "the probabilities are read by %s, not by one MatMul(probs, V)",
                      readers_of(g, probs, buf, sizeof buf));
    int tr = llmc_match_sole_reader(g, g->nodes[pv].outputs[0]);
    if (tr < 0 || strcmp(g->nodes[tr].op_type, "Transpose") != 0 || !llmc_match_ints_attr(g, tr, "perm", PERM_HEADS, 4))
        return refuse(m, "probs.V is not read by Transpose(0,2,1,3) alone");
    m->out_node = llmc_match_sole_reader(g, g->nodes[tr].outputs[0]);
    if (m->out_node < 0 || strcmp(g->nodes[m->out_node].op_type, "Reshape") != 0)
        return refuse(m, "the merged heads are not Reshaped alone");
    m->out = g->nodes[m->out_node].outputs[0];
    llmc_affine want[3] = {llmc_aff_const(1), {0, 1, 0}, llmc_aff_const(m->q.heads * m->q.dim)};
    if (!dims_are(&g->values[m->out].shape, 3, want))
        return refuse(m, "the output '%s' is not [1, S, heads*D]", value_name(g, m->out));
    return match_kv(g, g->nodes[pv].inputs[1], &m->v, LLMC_ROLE_PAST_VALUE, LLMC_ROLE_PRESENT_VALUE, m, "V");
}

/* Heads, head dims, GQA factors and RoPE agree between q, k and v. */
static bool check_consistency(const llmc_graph *g, attn_match *m)
{
    head_split *q = &m->q, *k = &m->k.heads, *v = &m->v.heads;
    if (k->heads != v->heads || k->dim != q->dim || v->dim != q->dim || m->k.repeat != m->v.repeat ||
        k->heads * m->k.repeat != q->heads)
        return refuse(m, "q has %lld heads of %lld, k/v %lld/%lld heads repeated %lld/%lld times",
                      (long long)q->heads, (long long)q->dim, (long long)k->heads, (long long)v->heads,
                      (long long)m->k.repeat, (long long)m->v.repeat);
    if (v->rope >= 0)
        return refuse(m, "v is rotated");
    keep_whole_norm(g, v);
    if (q->whole != k->whole || (q->whole && llmc_node_attr_float(g, q->norm, "epsilon", 0) !=
                                                 llmc_node_attr_float(g, k->norm, "epsilon", 0))) {
        keep_whole_norm(g, q);
        keep_whole_norm(g, k);
    }
    if (v->norm >= 0)
        return refuse(m, "v is normalized per head (RMSNorm '%s')", g->nodes[v->norm].name);
    if ((q->norm < 0) != (k->norm < 0))
        return refuse(m, "only one of q and k is normalized per head (RMSNorm '%s')",
                      g->nodes[q->norm >= 0 ? q->norm : k->norm].name);
    if (q->norm >= 0 && llmc_node_attr_float(g, q->norm, "epsilon", 0) != llmc_node_attr_float(g, k->norm, "epsilon", 0))
        return refuse(m, "head norms '%s' and '%s' (RMSNorm) differ in epsilon", g->nodes[q->norm].name,
                      g->nodes[k->norm].name);
    if ((q->rope < 0) != (k->rope < 0))
        return refuse(m, "only one of q and k is rotated");
    if (q->rope < 0)
        return true;
    const llmc_node *qr = &g->nodes[q->rope], *kr = &g->nodes[k->rope];
    if (qr->inputs[1] != kr->inputs[1] || qr->inputs[2] != kr->inputs[2] ||
        llmc_node_attr_int(g, q->rope, "rotary_dim", 0) != llmc_node_attr_int(g, k->rope, "rotary_dim", 0))
        return refuse(m, "q and k are rotated with different tables or rotary_dim");
    return true;
}

/* ---- proving the masks causal ---- */

/* The (S, P) calls each mask is evaluated at. */
static const uint32_t MASK_CALLS[][2] = {{1, 0}, {4, 0}, {1, 6}, {3, 5}};

/* Per (s, t) of one call: are all Where conditions true, the additive sum. */
typedef struct {
    uint32_t S, P, T, window;
    bool *keep;
    float *sum;
    bool *add_positive;     /* some additive mask > 0 there */
} mask_grid;

/* Applies evaluated term `t` broadcast over the [S, T] grid. */
static bool apply_term(mask_grid *grid, mask_kind kind, const llmc_eval_tensor *t)
{
    int r = t->shape.rank;
    int64_t dim_s = r >= 2 ? t->shape.dims[r - 2].c : 1, dim_t = r >= 1 ? t->shape.dims[r - 1].c : 1;
    int64_t n = 1;
    for (int i = 0; i < r; i++)
        n *= t->shape.dims[i].c;
    if ((dim_s != 1 && dim_s != grid->S) || (dim_t != 1 && dim_t != grid->T))
        return false;
    if ((kind == MASK_WHERE && t->dtype != LLMC_DT_BOOL) || (kind == MASK_ADD && t->dtype != LLMC_DT_FLOAT))
        return false;
    for (int64_t e = 0; e < n; e++) {
        int64_t j = e % dim_t, i = (e / dim_t) % dim_s;
        for (uint32_t s = dim_s == 1 ? 0 : (uint32_t)i; s < (dim_s == 1 ? grid->S : (uint32_t)i + 1); s++)
            for (uint32_t u = dim_t == 1 ? 0 : (uint32_t)j; u < (dim_t == 1 ? grid->T : (uint32_t)j + 1); u++) {
                size_t at = (size_t)s * grid->T + u;
                if (kind == MASK_WHERE)
                    grid->keep[at] &= ((const uint8_t *)t->data)[e] != 0;
                else {
                    float x = ((const float *)t->data)[e];
                    grid->sum[at] += x;
                    grid->add_positive[at] |= x > 0;
                }
            }
    }
    return true;
}

/* Is key t of query row s untouched by the masks? */
static bool grid_keeps(const mask_grid *grid, uint32_t s, uint32_t t)
{
    size_t at = (size_t)s * grid->T + t;
    return grid->keep[at] && grid->sum[at] == 0;
}

/* Keys 0 <= P+s-t < window (t <= P+s without a window) untouched; every
 * other key at or below MASK_NEG_BIG. */
static bool grid_is_causal(const mask_grid *grid, uint32_t *bad_s, uint32_t *bad_t)
{
    for (uint32_t s = 0; s < grid->S; s++)
        for (uint32_t t = 0; t < grid->T; t++) {
            size_t at = (size_t)s * grid->T + t;
            bool visible = t <= grid->P + s && (!grid->window || grid->P + s - t < grid->window);
            bool ok = visible ? grid_keeps(grid, s, t)
                              : !grid->add_positive[at] && (!grid->keep[at] || grid->sum[at] <= MASK_NEG_BIG);
            if (!ok)
                return (*bad_s = s), (*bad_t = t), false;
        }
    return true;
}

static void grid_free(mask_grid *grid)
{
    free(grid->keep);
    free(grid->sum);
    free(grid->add_positive);
}

/* Evaluates every mask term at one call (S, P) into *grid (grid_free
 * after); m->why says when a term cannot be evaluated or broadcast. */
static int eval_grid(attn_fuser *f, attn_match *m, uint32_t S, uint32_t P, mask_grid *grid)
{
    size_t cells = S * (size_t)(S + P);
    *grid = (mask_grid){S, P, S + P, m->window, calloc(cells, 1), calloc(cells, sizeof(float)),
                        calloc(cells, 1)};
    int rc = grid->keep && grid->sum && grid->add_positive
                 ? LLMC_OK : llmc_fail(f->err, LLMC_E_NOMEM, "attention-fusion: out of memory");
    if (grid->keep)
        memset(grid->keep, 1, cells);
    const llmc_evaluator *ev = rc ? NULL : llmc_pass_evaluator(f->ctx, "attention-fusion", f->err);
    if (!rc && !ev)
        rc = LLMC_E_INTERNAL;
    for (int i = 0; !rc && i < m->n_masks; i++) {
        llmc_eval_tensor t;
        llmc_error why = {0};
        const mask_term *term = &m->masks[i];
        const char *node = f->g->nodes[term->node].name;
        int erc = ev->position_value(f->g, term->value, S, P, &t, &why);
        if (erc == LLMC_E_NOMEM)
            rc = llmc_fail(f->err, erc, "%s", why.msg);
        else if (erc)
            refuse(m, "mask '%s' of '%s' is not a function of positions: %s", value_name(f->g, term->value), node,
                   why.msg);
        else if (!apply_term(grid, term->kind, &t))
            refuse(m, "mask '%s' of '%s' does not broadcast to [S, P+S] at S=%u P=%u", value_name(f->g, term->value),
                   node, S, P);
        llmc_eval_tensor_free(&t);
        if (erc || m->why[0])
            break;
    }
    return rc;
}

/* Evaluates every mask term at one call and checks the result. */
static int check_call(attn_fuser *f, attn_match *m, uint32_t S, uint32_t P, bool *causal)
{
    mask_grid grid;
    int rc = eval_grid(f, m, S, P, &grid);
    uint32_t bad_s, bad_t;
    *causal = false;
    if (!rc && !m->why[0] && !(*causal = grid_is_causal(&grid, &bad_s, &bad_t)))
        refuse(m, "the masks are not %s at S=%u P=%u: query %u, key %u",
               m->window ? "a sliding window" : "causal", S, P, bad_s, bad_t);
    grid_free(&grid);
    return rc;
}

/* The window the masks leave the last position of the context: its first
 * kept key lo gives max_context - lo (0 when lo is 0); the calls that
 * follow prove the rest of the rows. */
static int find_window(attn_fuser *f, attn_match *m)
{
    uint32_t P = f->ctx->max_context ? f->ctx->max_context - 1 : 0, lo = 0;
    mask_grid grid;
    int rc = eval_grid(f, m, 1, P, &grid);
    while (!rc && !m->why[0] && lo < P && !grid_keeps(&grid, 0, lo))
        lo++;
    m->window = lo ? P - lo + 1 : 0;
    grid_free(&grid);
    return rc;
}

static int prove_causal(attn_fuser *f, attn_match *m, bool *causal)
{
    *causal = m->n_masks > 0 || refuse(m, "no mask before the Softmax: attention is not causal");
    int rc = *causal ? find_window(f, m) : LLMC_OK;
    *causal = *causal && !m->why[0];
    for (size_t i = 0; !rc && *causal && i < sizeof MASK_CALLS / sizeof MASK_CALLS[0]; i++)
        rc = check_call(f, m, MASK_CALLS[i][0], MASK_CALLS[i][1], causal);
    /* across the window's edge: decode just past it, a call straddling it,
     * and (small windows) a prompt longer than it */
    uint32_t w = m->window, max = f->ctx->max_context;
    const uint32_t edge[][2] = {{1, w + 1}, {3, w - 1}, {w + 3, 0}, {5, 2 * w}};
    for (size_t i = 0; !rc && *causal && w && i < sizeof edge / sizeof edge[0]; i++)
        if (edge[i][0] + edge[i][1] <= max && edge[i][0] <= 256)
            rc = check_call(f, m, edge[i][0], edge[i][1], causal);
    return rc;
}

/* ---- matching one Softmax, then rewriting ---- */

static bool is_present(const attn_match *m, int v)
{
    return v == m->k.present || v == m->v.present;
}

/* Everything computed from the cache must end in the attention output: no
 * other node may read K_all, V_all, the scores or anything after them, or
 * dropping the past inputs would leave it without data. */
static bool cache_is_private(const llmc_graph *g, attn_match *m)
{
    int *stack = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    bool *seen = calloc((size_t)g->n_values + 1, sizeof(bool));
    int n = 0;
    bool ok = stack && seen;
    if (ok) {
        stack[n++] = m->k.present;
        stack[n++] = m->v.present;
        seen[m->k.present] = seen[m->v.present] = true;
    }
    while (ok && n > 0) {
        int v = stack[--n];
        if (v == m->out)
            continue;
        if (g->values[v].is_graph_output && !is_present(m, v))
            ok = refuse(m, "'%s', computed from the cache, is a graph output", value_name(g, v));
        for (int i = 0; ok && i < g->n_nodes; i++)
            for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
                if (g->nodes[i].inputs[k] == v)
                    for (int o = 0; o < g->nodes[i].n_outputs; o++) {
                        int w = g->nodes[i].outputs[o];
                        if (w >= 0 && !seen[w])
                            seen[w] = true, stack[n++] = w;
                    }
    }
    if (!stack || !seen)
        refuse(m, "out of memory");
    free(stack);
    free(seen);
    return ok;
}

static bool match_attention(const llmc_graph *g, attn_match *m)
{
    int rank = g->values[g->nodes[m->softmax].outputs[0]].shape.rank;
    m->scale = 1;
    m->layer = -1;
    if (rank != 4 || llmc_match_axis_attr(g, m->softmax, "axis", -1, rank) != 3)
        return refuse(m, "Softmax is not over the last axis of [1, H, S, T] scores");
    int qk = match_scores(g, g->nodes[m->softmax].inputs[0], m);
    return qk >= 0 && match_qk(g, qk, m) && match_output(g, m) && check_consistency(g, m) &&
           cache_is_private(g, m);
}

static void drop_io(int *ids, int *n, int v)
{
    int w = 0;
    for (int i = 0; i < *n; i++)
        if (ids[i] != v)
            ids[w++] = ids[i];
    *n = w;
}

/* The graph no longer reads the past or writes the present of this layer. */
static void drop_cache_io(llmc_graph *g, const kv_path *kv)
{
    g->values[kv->past].is_graph_input = false;
    drop_io(g->inputs, &g->n_inputs, kv->past);
    if (g->values[kv->present].is_graph_output) {
        g->values[kv->present].is_graph_output = false;
        drop_io(g->outputs, &g->n_outputs, kv->present);
    }
}

static int emit_attention(attn_fuser *f, const attn_match *m, int cache)
{
    llmc_graph *g = f->g;
    const llmc_node *rope = m->q.rope >= 0 ? &g->nodes[m->q.rope] : NULL;
    int64_t rotary_dim = rope ? llmc_node_attr_int(g, m->q.rope, "rotary_dim", 0) : 0;
    int norm = m->q.norm, ins[7] = {m->q.x, m->k.heads.x, m->v.heads.x}, n_ins = 3;
    if (rope) {
        ins[n_ins++] = rope->inputs[1];
        ins[n_ins++] = rope->inputs[2];
    }
    if (norm >= 0) {
        ins[n_ins++] = g->nodes[norm].inputs[1];
        ins[n_ins++] = g->nodes[m->k.heads.norm].inputs[1];
    }
    char name[512];
    snprintf(name, sizeof name, "%s/Attention", g->nodes[m->softmax].name);
    drop_cache_io(g, &m->k);
    drop_cache_io(g, &m->v);
    llmc_graph_erase_node(g, m->out_node);
    int id = llmc_graph_add_llmc_node(g, "Attention", name, ins, n_ins, &m->out, 1);
    if (id < 0 || llmc_node_set_int(g, id, "heads", m->q.heads) ||
        llmc_node_set_int(g, id, "kv_heads", m->k.heads.heads) || llmc_node_set_int(g, id, "head_dim", m->q.dim) ||
        llmc_node_set_int(g, id, "cache", cache) || llmc_node_set_int(g, id, "rotary_dim", rotary_dim) ||
        llmc_node_set_float(g, id, "scale", (float)m->scale) ||
        (m->window && llmc_node_set_int(g, id, "window", m->window)) ||
        (m->softcap && llmc_node_set_float(g, id, "softcap", (float)m->softcap)) ||
        (norm >= 0 && llmc_node_set_float(g, id, "epsilon", llmc_node_attr_float(g, norm, "epsilon", 1e-5f))))
        return llmc_fail(f->err, LLMC_E_NOMEM, "attention-fusion: out of memory");
    return LLMC_OK;
}

static int by_layer(const void *a, const void *b)
{
    const attn_match *x = a, *y = b;
    return (x->layer > y->layer) - (x->layer < y->layer);
}

/* Matches every Softmax; proven layers go to matches[], *n_matched. */
static int match_all(attn_fuser *f, attn_match *matches, int *n_matched, int *n_softmax)
{
    llmc_graph *g = f->g;
    int rc = LLMC_OK;
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        if (g->nodes[i].dead || g->nodes[i].domain[0] || strcmp(g->nodes[i].op_type, "Softmax") != 0)
            continue;
        attn_match *m = &matches[*n_matched];
        bool causal = false;
        memset(m, 0, sizeof *m);
        m->softmax = i;
        (*n_softmax)++;
        if (match_attention(g, m))
            rc = prove_causal(f, m, &causal);
        if (!rc && causal)
            (*n_matched)++;
        else if (!rc)
            explain(f, m);
    }
    return rc;
}

static int run_attention_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    attn_fuser f = {g, ctx, err};
    attn_match *matches = malloc(sizeof *matches * ((size_t)g->n_nodes + 1));
    int n_matched = 0, n_softmax = 0;
    if (!matches)
        return llmc_fail(err, LLMC_E_NOMEM, "attention-fusion: out of memory");
    int rc = match_all(&f, matches, &n_matched, &n_softmax);
    qsort(matches, (size_t)n_matched, sizeof *matches, by_layer);
    for (int i = 0; !rc && i < n_matched; i++)
        rc = emit_attention(&f, &matches[i], i);
    if (!rc && n_matched)
        rc = llmc_match_sweep(g, err);
    if (!rc && ctx->detail)
        snprintf(ctx->detail, ctx->detail_size, "%d of %d layers fused", n_matched, n_softmax);
    free(matches);
    return rc;
}

const llmc_pass llmc_pass_attention_fusion = {"attention-fusion", run_attention_fusion};
