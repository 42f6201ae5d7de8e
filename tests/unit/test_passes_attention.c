/* rope-fusion and attention-fusion on hand-built attention layers.
 *
 * Each layer is built the way torch exports it (head split, rotate-half
 * RoPE from position_ids, past/present Concats, GQA repeat_kv, scale, a
 * causal mask, Softmax, head merge), in several variants.  The checks:
 *  - structure and attributes of the fused llmc.Attention / llmc.Rope;
 *  - numerics: the ORIGINAL graph, evaluated on the runtime's kernels with
 *    random inputs, equals a C reference of the llmc.Attention formula of
 *    compiler/ir/llmc_ops.h run with the fused node's attributes and the cos/sin
 *    tables the pass extracted: what is matched is what the op computes;
 *  - refusals: a non-causal mask, wrong Slice bounds, a present output read
 *    elsewhere leave the layer alone and --explain says why;
 *  - OLMo2's RMSNorm over the whole q and k projections joins the op, and
 *    stays an op of its own (the layer still fused) when only q has one,
 *    the normalized q is read elsewhere, or the epsilons differ. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_util.h"
#include "ir/llmc_ops.h"
#include "codegen/evaluate.h"
#include "passes/pipeline.h"
#include "tap.h"

#define MAX_CONTEXT 64
#define MAX_DIM 64
#define ROPE_THETA 10000.0

typedef enum {
    MASK_ADDITIVE,      /* scores + Where(causal, 0, -3.4e38)  (llama, qwen2, phi) */
    MASK_WHERE,         /* Where(causal, scores, -3.4e38) + padding mask  (gpt2) */
    MASK_NONCAUSAL,     /* additive, but one future key visible */
} mask_style;

typedef struct {
    int layer;
    int64_t heads, kv_heads, dim;
    int64_t rotary;             /* 0: no RoPE */
    mask_style mask;
    bool scale_on_qk;           /* q and K^T each times dim^-1/4, not scores / sqrt(dim) */
    bool bad_slice;             /* the rotate-half's lower half starts at 1 */
    bool halves_from_head;      /* partial: the halves slice the whole head, as
                                 * after a Slice fusion, not x[..., :rotary] */
    bool present_read_elsewhere;
    bool scale_not_const;       /* scores / a graph input (a scalar no pass could fold) */
} layer_spec;

/* OLMo2's RMSNorm over the whole xq / xk (test_whole_norms) */
enum {
    WHOLE_NONE,
    WHOLE_BOTH,         /* on xq and xk, one epsilon */
    WHOLE_Q_ONLY,       /* on xq alone */
    WHOLE_Q_READ,       /* on both, the normalized q also a graph output */
    WHOLE_EPS,          /* on both, epsilons 1e-6 and 1e-5 */
};

/* The graph inputs of one layer; pos/mask are shared by all layers. */
typedef struct {
    int xq, xk, xv, past_k, past_v;
    int out, present_k, present_v;
} layer_io;

typedef struct {
    llmc_graph g;
    int pos, mask;
    char names[32][96];
    int next_name;
} builder;

/* "L<layer>/<what>": value names unique per layer. */
static const char *nm(builder *b, int layer, const char *what)
{
    char *s = b->names[b->next_name++ % 32];
    snprintf(s, 96, "L%d/%s", layer, what);
    return s;
}

static int f32(builder *b, int layer, const char *what, float x)
{
    return g_const(&b->g, nm(b, layer, what), LLMC_DT_FLOAT, SCALAR, &x);
}

static int node_of(builder *b, int v)
{
    return producer_of(&b->g, v);
}

static int last_axis_slice(builder *b, int layer, const char *what, int x, int64_t start, int64_t end)
{
    char n1[64], n2[64], n3[64];
    snprintf(n1, sizeof n1, "%s_starts", what);
    snprintf(n2, sizeof n2, "%s_ends", what);
    snprintf(n3, sizeof n3, "%s_axes", what);
    int starts = CI64(&b->g, nm(b, layer, n1), start), ends = CI64(&b->g, nm(b, layer, n2), end);
    int axes = CI64(&b->g, nm(b, layer, n3), -1);
    return OP(&b->g, "Slice", nm(b, layer, what), x, starts, ends, axes);
}

static int concat_last(builder *b, int layer, const char *what, int a, int c)
{
    int v = OP(&b->g, "Concat", nm(b, layer, what), a, c);
    attr_int(&b->g, node_of(b, v), "axis", -1);
    return v;
}

/* cos or sin of position * inv_freq, as [1, 1, S, rotary] (torch's emb). */
static int rope_table_value(builder *b, const layer_spec *l, const char *fn)
{
    int64_t half = l->rotary / 2;
    float inv_freq[MAX_DIM];
    for (int64_t i = 0; i < half; i++)
        inv_freq[i] = (float)pow(ROPE_THETA, -2.0 * (double)i / (double)l->rotary);
    char what[32];
    snprintf(what, sizeof what, "%s_pos", fn);
    int pos3 = OP(&b->g, "Unsqueeze", nm(b, l->layer, what), b->pos, CI64(&b->g, nm(b, l->layer, "ax2"), 2));
    int posf = OP(&b->g, "Cast", nm(b, l->layer, "posf"), pos3);
    attr_int(&b->g, node_of(b, posf), "to", LLMC_DT_FLOAT);
    int freq = g_const(&b->g, nm(b, l->layer, "inv_freq"), LLMC_DT_FLOAT, SHAPE(K(half)), inv_freq);
    int angles = OP(&b->g, "Mul", nm(b, l->layer, "angles"), posf, freq);
    int emb = concat_last(b, l->layer, "emb", angles, angles);
    int t = OP(&b->g, fn, nm(b, l->layer, fn), emb);
    snprintf(what, sizeof what, "%s4", fn);
    return OP(&b->g, "Unsqueeze", nm(b, l->layer, what), t, CI64(&b->g, nm(b, l->layer, "ax1"), 1));
}

/* x * cos + cat(-src[..., h:2h], src[..., :h]) * sin with x = src[..., :2h];
 * `swapped` writes every operand pair the other way round. */
static int rotate_half(builder *b, const layer_spec *l, const char *tag, int x, int src, int cos, int sin,
                       bool swapped)
{
    int64_t h = l->rotary / 2;
    char what[64];
    snprintf(what, sizeof what, "%s_hi", tag);
    int hi = last_axis_slice(b, l->layer, what, src, h, src == x ? INT64_MAX : 2 * h);
    snprintf(what, sizeof what, "%s_lo", tag);
    int lo = l->bad_slice ? last_axis_slice(b, l->layer, what, src, 1, h + 1)
                          : last_axis_slice(b, l->layer, what, src, 0, h);
    snprintf(what, sizeof what, "%s_neg", tag);
    int neg = OP(&b->g, "Neg", nm(b, l->layer, what), hi);
    snprintf(what, sizeof what, "%s_rot", tag);
    int rot = concat_last(b, l->layer, what, neg, lo);
    snprintf(what, sizeof what, "%s_xcos", tag);
    int xc = swapped ? OP(&b->g, "Mul", nm(b, l->layer, what), cos, x) : OP(&b->g, "Mul", nm(b, l->layer, what), x, cos);
    snprintf(what, sizeof what, "%s_rsin", tag);
    int rs = swapped ? OP(&b->g, "Mul", nm(b, l->layer, what), sin, rot) : OP(&b->g, "Mul", nm(b, l->layer, what), rot, sin);
    snprintf(what, sizeof what, "%s_roped", tag);
    return swapped ? OP(&b->g, "Add", nm(b, l->layer, what), rs, xc) : OP(&b->g, "Add", nm(b, l->layer, what), xc, rs);
}

/* RoPE on the first `rotary` dims of x [1, heads, S, dim], the rest passed. */
static int rope(builder *b, const layer_spec *l, const char *tag, int x, int cos, int sin, bool swapped)
{
    if (l->rotary == l->dim)
        return rotate_half(b, l, tag, x, x, cos, sin, swapped);
    char what[64];
    snprintf(what, sizeof what, "%s_rotary", tag);
    int xr = last_axis_slice(b, l->layer, what, x, 0, l->rotary);
    snprintf(what, sizeof what, "%s_pass", tag);
    int xp = last_axis_slice(b, l->layer, what, x, l->rotary, INT64_MAX);
    snprintf(what, sizeof what, "%s_cat", tag);
    int src = l->halves_from_head ? x : xr;
    return concat_last(b, l->layer, what, rotate_half(b, l, tag, xr, src, cos, sin, swapped), xp);
}

/* X [1, S, heads*dim] -> [1, heads, S, dim] */
static int split_heads(builder *b, const layer_spec *l, const char *tag, int x, int64_t heads)
{
    char what[64];
    snprintf(what, sizeof what, "%s_split", tag);
    int shape = CI64(&b->g, nm(b, l->layer, what), 1, -1, heads, l->dim);
    int r = OP(&b->g, "Reshape", nm(b, l->layer, what), x, shape);
    snprintf(what, sizeof what, "%s_heads", tag);
    int t = OP(&b->g, "Transpose", nm(b, l->layer, what), r);
    ATTR_INTS(&b->g, node_of(b, t), "perm", 0, 2, 1, 3);
    return t;
}

/* torch's repeat_kv: [1, kv, T, D] -> [1, kv*n, T, D] */
static int repeat_kv(builder *b, const layer_spec *l, const char *tag, int all)
{
    int64_t n = l->heads / l->kv_heads;
    if (n == 1)
        return all;
    char what[64];
    snprintf(what, sizeof what, "%s_unsq", tag);
    int u = OP(&b->g, "Unsqueeze", nm(b, l->layer, what), all, CI64(&b->g, nm(b, l->layer, "ax2b"), 2));
    snprintf(what, sizeof what, "%s_expand", tag);
    int e = OP(&b->g, "Expand", nm(b, l->layer, what), u, CI64(&b->g, nm(b, l->layer, "rep"), 1, 1, n, 1, 1));
    snprintf(what, sizeof what, "%s_repeated", tag);
    return OP(&b->g, "Reshape", nm(b, l->layer, what), e, CI64(&b->g, nm(b, l->layer, "rep_shape"), 1, l->heads, -1, l->dim));
}

/* dims[i] of value v as an int64 scalar */
static int dim_scalar(builder *b, int layer, const char *what, int v, int64_t i)
{
    int shape = OP(&b->g, "Shape", nm(b, layer, what), v);
    return OP(&b->g, "Gather", nm(b, layer, what), shape, g_scalar_i64(&b->g, nm(b, layer, "idx"), i));
}

/* bool [S, P+S]: key t visible to query s (t <= P + s, or + 1 if non-causal) */
static int causal_condition(builder *b, const layer_spec *l, int past_k)
{
    int total = dim_scalar(b, l->layer, "total", b->mask, 1);
    int past = dim_scalar(b, l->layer, "past", past_k, 2);
    int zero = g_scalar_i64(&b->g, nm(b, l->layer, "zero"), 0), one = g_scalar_i64(&b->g, nm(b, l->layer, "one"), 1);
    int keys = OP(&b->g, "Range", nm(b, l->layer, "keys"), zero, total, one);
    int queries = OP(&b->g, "Range", nm(b, l->layer, "queries"), past, total, one);
    if (l->mask == MASK_NONCAUSAL)
        queries = OP(&b->g, "Add", nm(b, l->layer, "queries+1"), queries, one);
    int col = OP(&b->g, "Unsqueeze", nm(b, l->layer, "queries_col"), queries, CI64(&b->g, nm(b, l->layer, "ax1c"), 1));
    return OP(&b->g, "LessOrEqual", nm(b, l->layer, "causal"), keys, col);
}

/* The mask ops between the scaled scores and the Softmax. */
static int masked(builder *b, const layer_spec *l, int scores, int past_k)
{
    int cond = causal_condition(b, l, past_k);
    int neg_big = f32(b, l->layer, "neg_big", -3.4e38f);
    if (l->mask != MASK_WHERE) {
        int add = OP(&b->g, "Where", nm(b, l->layer, "additive"), cond, f32(b, l->layer, "zerof", 0), neg_big);
        return OP(&b->g, "Add", nm(b, l->layer, "masked"), scores, add);
    }
    int kept = OP(&b->g, "Where", nm(b, l->layer, "kept"), cond, scores, neg_big);
    int maskf = OP(&b->g, "Cast", nm(b, l->layer, "maskf"), b->mask);
    attr_int(&b->g, node_of(b, maskf), "to", LLMC_DT_FLOAT);
    int inv = OP(&b->g, "Sub", nm(b, l->layer, "inv"), f32(b, l->layer, "onef", 1), maskf);
    int padding = OP(&b->g, "Mul", nm(b, l->layer, "padding"), inv, neg_big);
    return OP(&b->g, "Add", nm(b, l->layer, "masked"), kept, padding);
}

static int kv_input(builder *b, const layer_spec *l, const char *kind)
{
    char name[64];
    snprintf(name, sizeof name, "past_key_values.%d.%s", l->layer, kind);
    return g_input(&b->g, name, LLMC_DT_FLOAT, SHAPE(K(1), K(l->kv_heads), SYM_P, K(l->dim)));
}

static int present(builder *b, const layer_spec *l, const char *kind, int past, int heads)
{
    char name[64];
    snprintf(name, sizeof name, "present.%d.%s", l->layer, kind);
    int v = llmc_graph_add_value(&b->g, name, LLMC_DT_UNDEFINED);
    int ins[2] = {past, heads};
    int node = llmc_graph_add_node(&b->g, "Concat", name, ins, 2, &v, 1);
    attr_int(&b->g, node, "axis", 2);
    g_output(&b->g, v);
    return v;
}

static void add_layer(builder *b, const layer_spec *l, layer_io *io)
{
    llmc_graph *g = &b->g;
    io->xq = g_input(g, nm(b, l->layer, "xq"), LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(l->heads * l->dim)));
    io->xk = g_input(g, nm(b, l->layer, "xk"), LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(l->kv_heads * l->dim)));
    io->xv = g_input(g, nm(b, l->layer, "xv"), LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(l->kv_heads * l->dim)));
    io->past_k = kv_input(b, l, "key");
    io->past_v = kv_input(b, l, "value");
    int q = split_heads(b, l, "q", io->xq, l->heads), k = split_heads(b, l, "k", io->xk, l->kv_heads);
    int v = split_heads(b, l, "v", io->xv, l->kv_heads);
    if (l->rotary) {
        int cos = rope_table_value(b, l, "Cos"), sin = rope_table_value(b, l, "Sin");
        q = rope(b, l, "q", q, cos, sin, false);
        k = rope(b, l, "k", k, cos, sin, true);
    }
    io->present_k = present(b, l, "key", io->past_k, k);
    io->present_v = present(b, l, "value", io->past_v, v);
    int kt = OP(g, "Transpose", nm(b, l->layer, "kt"), repeat_kv(b, l, "k", io->present_k));
    ATTR_INTS(g, node_of(b, kt), "perm", 0, 1, 3, 2);
    int scores;
    if (l->scale_on_qk) {
        int c = f32(b, l->layer, "quarter_scale", (float)pow((double)l->dim, -0.25));
        scores = OP(g, "MatMul", nm(b, l->layer, "scores"), OP(g, "Mul", nm(b, l->layer, "q_scaled"), q, c),
                    OP(g, "Mul", nm(b, l->layer, "kt_scaled"), c, kt));
    } else {
        int qk = OP(g, "MatMul", nm(b, l->layer, "qk"), q, kt);
        int divisor = l->scale_not_const ? g_input(g, nm(b, l->layer, "sqrt_d_in"), LLMC_DT_FLOAT, SCALAR)
                                         : f32(b, l->layer, "sqrt_d", sqrtf((float)l->dim));
        scores = OP(g, "Div", nm(b, l->layer, "scores"), qk, divisor);
    }
    int probs = OP(g, "Softmax", nm(b, l->layer, "probs"), masked(b, l, scores, io->past_k));
    attr_int(g, node_of(b, probs), "axis", -1);
    int pv = OP(g, "MatMul", nm(b, l->layer, "pv"), probs, repeat_kv(b, l, "v", io->present_v));
    int merged = OP(g, "Transpose", nm(b, l->layer, "merged"), pv);
    ATTR_INTS(g, node_of(b, merged), "perm", 0, 2, 1, 3);
    io->out = OP(g, "Reshape", nm(b, l->layer, "out"), merged, CI64(g, nm(b, l->layer, "out_shape"), 1, -1, l->heads * l->dim));
    g_output(g, io->out);
    if (l->present_read_elsewhere)
        g_output(g, OP(g, "Neg", nm(b, l->layer, "leak"), io->present_k));
}

static void new_builder(builder *b)
{
    memset(b, 0, sizeof *b);
    llmc_graph_init(&b->g);
    b->g.opset = 17;
    b->pos = g_input(&b->g, "position_ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    b->mask = g_input(&b->g, "attention_mask", LLMC_DT_INT64, SHAPE(K(1), AFF(0, 1, 1)));
}

/* ---- running passes ---- */

static int run_passes(llmc_graph *g, const llmc_pass *const *passes, int n, FILE *log, char *detail)
{
    char scratch[256];
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = MAX_CONTEXT, .explain = log != NULL, .log = log,
                         .detail = detail ? detail : scratch, .detail_size = sizeof scratch};
    llmc_error err = {0};
    for (int i = 0; i < n; i++)
        if (passes[i]->run(g, &ctx, &err)) {
            printf("# %s: %s\n", passes[i]->name, err.msg);
            return -1;
        }
    return 0;
}

/* What runs before the fusions in the pipeline. */
static int prepare(llmc_graph *g)
{
    const llmc_pass *const passes[] = {&llmc_pass_shape_inference, &llmc_pass_constant_folding, &llmc_pass_dead_code};
    return run_passes(g, passes, 3, NULL, NULL);
}

/* rope-fusion, then attention-fusion; attention-fusion's detail to `detail`. */
static int fuse(llmc_graph *g, FILE *log, char *detail)
{
    return run_passes(g, (const llmc_pass *const[]){&llmc_pass_rope_fusion}, 1, log, NULL) ||
           run_passes(g, (const llmc_pass *const[]){&llmc_pass_attention_fusion}, 1, log, detail);
}

static int count_llmc(const llmc_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].dead && llmc_is_op(&g->nodes[i], op);
    return n;
}

static int find_llmc(const llmc_graph *g, const char *op, int input0)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && llmc_is_op(&g->nodes[i], op) && g->nodes[i].inputs[0] == input0)
            return i;
    return -1;
}

static bool has_io(const int *ids, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == v)
            return true;
    return false;
}

/* ---- evaluating the original graph ---- */

/* Graph inputs bound for one call: roles by contract, the rest random. */
typedef struct {
    int n;
    int value[16];
    llmc_rt_tensor t[16];
} bound_inputs;

static uint32_t rng_state = 12345;

static float random_unit(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static void bind_inputs(const llmc_graph *g, uint32_t S, uint32_t P, bound_inputs *in)
{
    in->n = g->n_inputs;
    for (int k = 0; k < g->n_inputs; k++) {
        const llmc_value *val = &g->values[g->inputs[k]];
        llmc_rt_tensor *t = &in->t[k];
        int64_t n = 1;
        in->value[k] = g->inputs[k];
        t->dtype = val->dtype;
        t->rank = val->shape.rank;
        for (int i = 0; i < t->rank; i++) {
            t->dims[i] = val->shape.dims[i].c + val->shape.dims[i].s * S + val->shape.dims[i].p * P;
            n *= t->dims[i];
        }
        t->data = malloc((size_t)(n ? n : 1) * 8);
        for (int64_t i = 0; i < n; i++) {
            if (strcmp(val->name, "position_ids") == 0)
                ((int64_t *)t->data)[i] = P + i;
            else if (strcmp(val->name, "attention_mask") == 0)
                ((int64_t *)t->data)[i] = 1;
            else
                ((float *)t->data)[i] = random_unit();
        }
    }
}

static const float *input_data(const bound_inputs *in, int v)
{
    for (int k = 0; k < in->n; k++)
        if (in->value[k] == v)
            return in->t[k].data;
    return NULL;
}

static void free_inputs(bound_inputs *in)
{
    for (int k = 0; k < in->n; k++)
        free(in->t[k].data);
}

/* ---- the llmc.Attention formula of compiler/ir/llmc_ops.h, in C ---- */

typedef struct {
    int64_t heads, kv_heads, dim, rotary;
    float scale;
    const float *cos, *sin;     /* [MAX_CONTEXT, rotary] */
} attn_attrs;

static attn_attrs read_attrs(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    attn_attrs a = {llmc_node_attr_int(g, node, "heads", 0), llmc_node_attr_int(g, node, "kv_heads", 0),
                    llmc_node_attr_int(g, node, "head_dim", 0), llmc_node_attr_int(g, node, "rotary_dim", 0),
                    llmc_node_attr_float(g, node, "scale", 0), NULL, NULL};
    if (a.rotary > 0 && n->n_inputs == 5) {
        a.cos = g->values[n->inputs[3]].konst.data;
        a.sin = g->values[n->inputs[4]].konst.data;
    }
    return a;
}

/* Rope on one head row at position pos. */
static void ref_rope(float *y, const float *x, const attn_attrs *a, int64_t pos)
{
    int64_t h = a->rotary / 2;
    for (int64_t i = 0; i < a->dim; i++) {
        if (i >= a->rotary) {
            y[i] = x[i];
            continue;
        }
        float rot = i < h ? -x[i + h] : x[i - h];
        y[i] = x[i] * a->cos[pos * a->rotary + i] + rot * a->sin[pos * a->rotary + i];
    }
}

/* The cache after this call: K or V [kv_heads, P+S, dim]; new K rows rotated. */
static float *ref_cache(const attn_attrs *a, uint32_t S, uint32_t P, const float *past, const float *x, bool rotate)
{
    int64_t T = S + P, D = a->dim;
    float *c = malloc(sizeof(float) * (size_t)(a->kv_heads * T * D));
    for (int64_t g = 0; g < a->kv_heads; g++)
        for (int64_t t = 0; t < T; t++) {
            float *row = &c[(g * T + t) * D];
            const float *src = t < P ? &past[(g * P + t) * D] : &x[((t - P) * a->kv_heads + g) * D];
            if (t >= P && rotate && a->rotary > 0)
                ref_rope(row, src, a, t);
            else
                memcpy(row, src, sizeof(float) * (size_t)D);
        }
    return c;
}

/* o[s, h] = softmax_t(scale * q[s,h] . K[t,g], t <= P+s) . V[., g] */
static void ref_attention(const attn_attrs *a, uint32_t S, uint32_t P, const float *xq, const float *K, const float *V,
                          float *o)
{
    int64_t T = S + P, D = a->dim, group = a->heads / a->kv_heads;
    float q[MAX_DIM], w[MAX_CONTEXT];
    for (int64_t s = 0; s < S; s++)
        for (int64_t h = 0; h < a->heads; h++) {
            const float *x = &xq[(s * a->heads + h) * D];
            int64_t g = h / group;
            if (a->rotary > 0)
                ref_rope(q, x, a, P + s);
            else
                memcpy(q, x, sizeof(float) * (size_t)D);
            double top = -INFINITY, sum = 0;
            for (int64_t t = 0; t <= P + s; t++) {
                double dot = 0;
                for (int64_t i = 0; i < D; i++)
                    dot += (double)q[i] * K[(g * T + t) * D + i];
                w[t] = (float)(a->scale * dot);
                top = fmax(top, w[t]);
            }
            for (int64_t t = 0; t <= P + s; t++)
                sum += (w[t] = (float)exp(w[t] - top));
            for (int64_t i = 0; i < D; i++) {
                double acc = 0;
                for (int64_t t = 0; t <= P + s; t++)
                    acc += w[t] / sum * V[(g * T + t) * D + i];
                o[(s * a->heads + h) * D + i] = (float)acc;
            }
        }
}

static double max_diff(const float *a, const float *b, int64_t n)
{
    double d = 0;
    for (int64_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* ---- one layer: structure, attributes, numerics ---- */

/* One call of the unfused graph: its inputs and outputs. */
typedef struct {
    uint32_t S, P;
    bound_inputs in;
    int n_out;
    int out_value[4];
    llmc_eval_tensor out[4];
} call;

static int evaluate_call(const llmc_graph *g, call *c)
{
    llmc_error err = {0};
    bind_inputs(g, c->S, c->P, &c->in);
    c->n_out = g->n_outputs;
    memcpy(c->out_value, g->outputs, sizeof(int) * (size_t)g->n_outputs);
    int rc = llmc_evaluate_graph(g, c->S, c->P, MAX_CONTEXT, c->in.t, c->out, &err);
    if (rc)
        printf("# evaluation at S=%u P=%u: %s\n", c->S, c->P, err.msg);
    return rc;
}

static const float *output_data(const call *c, int v)
{
    for (int k = 0; k < c->n_out; k++)
        if (c->out_value[k] == v)
            return c->out[k].data;
    return NULL;
}

static void free_call(call *c)
{
    free_inputs(&c->in);
    for (int k = 0; k < c->n_out; k++)
        llmc_eval_tensor_free(&c->out[k]);
}

/* The original graph's output and present.key at this call against the
 * llmc.Attention reference with the fused node's attributes and tables. */
static void compare_call(const char *what, const attn_attrs *a, const layer_io *io, const call *c)
{
    int64_t T = c->S + c->P, n_out = c->S * a->heads * a->dim;
    float *o = malloc(sizeof(float) * (size_t)n_out);
    float *K = ref_cache(a, c->S, c->P, input_data(&c->in, io->past_k), input_data(&c->in, io->xk), true);
    float *V = ref_cache(a, c->S, c->P, input_data(&c->in, io->past_v), input_data(&c->in, io->xv), false);
    ref_attention(a, c->S, c->P, input_data(&c->in, io->xq), K, V, o);
    double d_out = max_diff(o, output_data(c, io->out), n_out);
    double d_key = max_diff(K, output_data(c, io->present_k), a->kv_heads * T * a->dim);
    CHECK(d_out < 1e-5, "%s: S=%u P=%u: the original graph's output = llmc.Attention's formula (max diff %.2g)", what,
          c->S, c->P, d_out);
    CHECK(d_key < 1e-5, "%s: S=%u P=%u: present.key = past + rotated new keys, as the cache holds them (max diff %.2g)",
          what, c->S, c->P, d_key);
    free(o);
    free(K);
    free(V);
}

static bool table_input_ok(const llmc_graph *g, int v, int64_t rotary)
{
    const llmc_value *t = &g->values[v];
    return t->is_const && t->dtype == LLMC_DT_FLOAT && shape_eq(t->shape, SHAPE(K(MAX_CONTEXT), K(rotary)));
}

static void check_fused_node(const char *what, const llmc_graph *g, int att, const layer_spec *l, const layer_io *io)
{
    const llmc_node *n = &g->nodes[att];
    attn_attrs a = read_attrs(g, att);
    float want_scale = 1.0f / sqrtf((float)l->dim);
    CHECK(a.heads == l->heads && a.kv_heads == l->kv_heads && a.dim == l->dim && a.rotary == l->rotary &&
          llmc_node_attr_int(g, att, "cache", -1) == 0 && fabsf(a.scale - want_scale) < 1e-6f,
          "%s: heads=%lld kv_heads=%lld head_dim=%lld rotary_dim=%lld cache=0 scale=1/sqrt(%lld)", what,
          (long long)l->heads, (long long)l->kv_heads, (long long)l->dim, (long long)l->rotary, (long long)l->dim);
    bool tables = l->rotary ? n->n_inputs == 5 && table_input_ok(g, n->inputs[3], l->rotary) &&
                                  table_input_ok(g, n->inputs[4], l->rotary)
                            : n->n_inputs == 3;
    CHECK(n->inputs[0] == io->xq && n->inputs[1] == io->xk && n->inputs[2] == io->xv && tables &&
              n->outputs[0] == io->out,
          "%s: reads xq, xk, xv%s, writes the merged output", what,
          l->rotary ? " and constant [max_context, rotary_dim] cos/sin" : "");
    CHECK(!has_io(g->inputs, g->n_inputs, io->past_k) && !has_io(g->inputs, g->n_inputs, io->past_v) &&
              !has_io(g->outputs, g->n_outputs, io->present_k) && !has_io(g->outputs, g->n_outputs, io->present_v) &&
              has_io(g->outputs, g->n_outputs, io->out),
          "%s: past inputs and present outputs left the graph", what);
}

static void test_variant(const char *what, layer_spec l)
{
    builder b;
    layer_io io;
    call calls[2] = {{.S = 3, .P = 4}, {.S = 1, .P = 7}};
    char detail[256] = "";
    new_builder(&b);
    add_layer(&b, &l, &io);
    llmc_graph *g = &b.g;
    CHECK(prepare(g) == 0, "%s: shape inference and folding", what);
    for (int i = 0; i < 2; i++)
        CHECK(evaluate_call(g, &calls[i]) == 0, "%s: the original graph runs at S=%u P=%u", what, calls[i].S, calls[i].P);
    CHECK(fuse(g, NULL, detail) == 0, "%s: rope-fusion and attention-fusion run", what);
    int att = find_llmc(g, "Attention", io.xq);
    CHECK(att >= 0 && count_llmc(g, "Attention") == 1 && count_op(g, "Softmax") == 0 && count_llmc(g, "Rope") == 0 &&
              strcmp(detail, "1 of 1 layers fused") == 0,
          "%s: one llmc.Attention, no Softmax, no Rope left (detail '%s')", what, detail);
    if (att >= 0) {
        check_fused_node(what, g, att, &l, &io);
        attn_attrs a = read_attrs(g, att);
        for (int i = 0; i < 2; i++)
            compare_call(what, &a, &io, &calls[i]);
    }
    for (int i = 0; i < 2; i++)
        free_call(&calls[i]);
    llmc_graph_free(g);
}

/* ---- refusals ---- */

/* The passes' --explain text. */
typedef struct {
    char *text;
    size_t len;
    FILE *f;
} explain_log;

static void test_refusal(const char *what, layer_spec l, const char *expect)
{
    builder b;
    layer_io io;
    explain_log log = {0};
    new_builder(&b);
    add_layer(&b, &l, &io);
    llmc_graph *g = &b.g;
    log.f = open_memstream(&log.text, &log.len);
    CHECK(prepare(g) == 0 && fuse(g, log.f, NULL) == 0, "%s: the passes run", what);
    fclose(log.f);
    CHECK(count_llmc(g, "Attention") == 0 && count_op(g, "Softmax") == 1 && has_io(g->inputs, g->n_inputs, io.past_k) &&
              has_io(g->outputs, g->n_outputs, io.present_k),
          "%s: not fused, past input and present output kept", what);
    CHECK(strstr(log.text, expect) != NULL, "%s: --explain says '%s'", what, expect);
    if (!strstr(log.text, expect))
        printf("# explanation: %s", log.text);
    free(log.text);
    llmc_graph_free(g);
}

static void test_refusals(void)
{
    layer_spec llama = {.heads = 4, .kv_heads = 4, .dim = 8, .rotary = 8, .mask = MASK_ADDITIVE};
    layer_spec l = llama;
    l.mask = MASK_NONCAUSAL;
    test_refusal("non-causal mask", l, "the masks are not causal at S=4 P=0: query 0, key 1");
    l = llama;
    l.bad_slice = true;
    test_refusal("rotate-half taking x[..., 1:h+1]", l, "the second Slice is not x[..., :D/2] on the last axis");
    l = llama;
    l.present_read_elsewhere = true;
    test_refusal("present.0.key read by another node", l,
                 "present 'present.0.key' feeds more than the attention and its own graph output");
    l = llama;
    l.scale_not_const = true;
    test_refusal("scores divided by a value that is not a constant", l,
                 "Div 'L0/scores' before the Softmax scales by 'L0/sqrt_d_in', which is not a constant scalar");
}

/* ---- OLMo2's q/k RMSNorm over the whole projection ---- */

/* The weight input i of Attention node att: a float constant [n]? */
static bool weight_is(const llmc_graph *g, int att, int i, int64_t n)
{
    const llmc_value *w = &g->values[g->nodes[att].inputs[i]];
    return g->nodes[att].n_inputs > i && w->is_const && w->dtype == LLMC_DT_FLOAT && shape_eq(w->shape, SHAPE(K(n)));
}

/* llmc.RMSNorm(x, w [n]) between the projection x [1, S, n] and the
 * head split that reads it (after shape inference: it has no llmc ops). */
static int whole_norm(builder *b, int x, int64_t n, float eps)
{
    llmc_graph *g = &b->g;
    float w[8 * MAX_DIM];
    for (int64_t i = 0; i < n; i++)
        w[i] = 1.0f + 0.01f * (float)i;
    char name[64];
    snprintf(name, sizeof name, "%s_norm", g->values[x].name);
    int ins[2] = {x, g_const(g, nm(b, 0, name), LLMC_DT_FLOAT, SHAPE(K(n)), w)};
    int y = llmc_graph_add_value(g, nm(b, 0, name), LLMC_DT_FLOAT), split = -1;
    for (int i = 0; i < g->n_nodes; i++)
        split = !g->nodes[i].dead && g->nodes[i].n_inputs > 0 && g->nodes[i].inputs[0] == x ? i : split;
    g->values[y].shape = SHAPE(K(1), SYM_S, K(n));
    llmc_node_set_float(g, llmc_graph_add_llmc_node(g, "RMSNorm", name, ins, 2, &y, 1), "epsilon", eps);
    g->nodes[split].inputs[0] = y;
    return y;
}

/* Both norms join the op (the projections are its inputs, the weights its
 * q_norm / k_norm); any other case keeps them as RMSNorm ops and still
 * fuses the layer, reading the normalized rows. */
static void test_whole_norms(void)
{
    static const struct { int kind; const char *what; } cases[] = {
        {WHOLE_BOTH, "q and k normalized over the whole projection: the norms join the Attention"},
        {WHOLE_Q_ONLY, "only q normalized: the norm stays, the layer fuses"},
        {WHOLE_Q_READ, "the normalized q is also a graph output: both norms stay, the layer fuses"},
        {WHOLE_EPS, "q and k norms of different epsilons: both stay, the layer fuses"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        builder b;
        layer_io io;
        char detail[256] = "";
        layer_spec l = {.heads = 6, .kv_heads = 2, .dim = 8, .rotary = 4, .mask = MASK_ADDITIVE};
        int kind = cases[i].kind;
        new_builder(&b);
        add_layer(&b, &l, &io);
        llmc_graph *g = &b.g;
        bool ran = prepare(g) == 0;
        int xq = whole_norm(&b, io.xq, 48, 1e-6f);
        if (kind != WHOLE_Q_ONLY)
            whole_norm(&b, io.xk, 16, kind == WHOLE_EPS ? 1e-5f : 1e-6f);
        if (kind == WHOLE_Q_READ)
            g_output(g, xq);
        ran = ran && fuse(g, NULL, detail) == 0;
        int att = -1;
        for (int n = 0; n < g->n_nodes; n++)
            att = !g->nodes[n].dead && llmc_is_op(&g->nodes[n], "Attention") ? n : att;
        const llmc_node *a = att >= 0 ? &g->nodes[att] : NULL;
        bool fused = ran && a && strcmp(detail, "1 of 1 layers fused") == 0;
        if (kind == WHOLE_BOTH)
            CHECK(fused && a->inputs[0] == io.xq && a->inputs[1] == io.xk && a->n_inputs == 7 && weight_is(g, att, 5, 48) &&
                      weight_is(g, att, 6, 16) && llmc_node_attr_float(g, att, "epsilon", 0) == 1e-6f &&
                      count_llmc(g, "RMSNorm") == 0,
                  "%s: reads xq, xk, q_norm [48], k_norm [16], epsilon 1e-6; no RMSNorm left (detail '%s')",
                  cases[i].what, detail);
        else
            CHECK(fused && a->n_inputs == 5 && a->inputs[0] != io.xq && a->inputs[2] == io.xv &&
                      count_llmc(g, "RMSNorm") == (kind == WHOLE_Q_ONLY ? 1 : 2) &&
                      llmc_is_op(&g->nodes[producer_of(g, a->inputs[0])], "RMSNorm"),
                  "%s: reads the normalized q, no norm inputs (detail '%s')", cases[i].what, detail);
        llmc_graph_free(g);
    }
}

/* ---- several layers: cache order, partial fusion ---- */

static void test_layers(void)
{
    builder b;
    layer_io io0, io1;
    char detail[256] = "";
    layer_spec l1 = {.layer = 1, .heads = 4, .kv_heads = 2, .dim = 8, .mask = MASK_WHERE};
    layer_spec l0 = {.layer = 0, .heads = 2, .kv_heads = 2, .dim = 16, .rotary = 16, .mask = MASK_ADDITIVE};
    new_builder(&b);
    add_layer(&b, &l1, &io1);      /* node order is not layer order */
    add_layer(&b, &l0, &io0);
    CHECK(prepare(&b.g) == 0 && fuse(&b.g, NULL, detail) == 0, "two layers: the passes run");
    int a0 = find_llmc(&b.g, "Attention", io0.xq), a1 = find_llmc(&b.g, "Attention", io1.xq);
    CHECK(a0 >= 0 && a1 >= 0 && llmc_node_attr_int(&b.g, a0, "cache", -1) == 0 &&
              llmc_node_attr_int(&b.g, a1, "cache", -1) == 1 && strcmp(detail, "2 of 2 layers fused") == 0,
          "two layers: cache 0 for layer 0, cache 1 for layer 1 (detail '%s')", detail);
    CHECK(b.g.n_inputs == 6 && b.g.n_outputs == 2,
          "two layers: only the q/k/v inputs and the outputs left (mask and positions unread, dropped)");
    llmc_graph_free(&b.g);

    l0.mask = MASK_NONCAUSAL;
    new_builder(&b);
    add_layer(&b, &l0, &io0);
    add_layer(&b, &l1, &io1);
    CHECK(prepare(&b.g) == 0 && fuse(&b.g, NULL, detail) == 0, "partial: the passes run");
    a1 = find_llmc(&b.g, "Attention", io1.xq);
    CHECK(a1 >= 0 && count_llmc(&b.g, "Attention") == 1 && llmc_node_attr_int(&b.g, a1, "cache", -1) == 0 &&
              strcmp(detail, "1 of 2 layers fused") == 0,
          "partial: layer 1 fused with cache 0, layer 0 not (detail '%s')", detail);
    CHECK(has_io(b.g.inputs, b.g.n_inputs, io0.past_k) && has_io(b.g.outputs, b.g.n_outputs, io0.present_v) &&
              !has_io(b.g.inputs, b.g.n_inputs, io1.past_k) && !has_io(b.g.outputs, b.g.n_outputs, io1.present_v),
          "partial: the unfused layer keeps its past inputs and present outputs");
    llmc_graph_free(&b.g);
}

/* ---- rope-fusion alone: the tables ---- */

static void test_rope_tables(void)
{
    builder b;
    layer_io io;
    layer_spec l = {.heads = 2, .kv_heads = 2, .dim = 16, .rotary = 8, .mask = MASK_ADDITIVE};
    new_builder(&b);
    add_layer(&b, &l, &io);
    CHECK(prepare(&b.g) == 0 &&
              run_passes(&b.g, (const llmc_pass *const[]){&llmc_pass_rope_fusion}, 1, NULL, NULL) == 0,
          "partial rotary: rope-fusion runs");
    int q_heads = -1, rope = -1;
    for (int i = 0; i < b.g.n_nodes && rope < 0; i++)
        if (!b.g.nodes[i].dead && llmc_is_op(&b.g.nodes[i], "Rope")) {
            rope = i;
            q_heads = b.g.nodes[i].inputs[0];
        }
    CHECK(rope >= 0 && count_llmc(&b.g, "Rope") == 2 && count_op(&b.g, "Neg") == 0 && count_op(&b.g, "Slice") == 0 &&
              llmc_node_attr_int(&b.g, rope, "rotary_dim", 0) == 8 && b.g.values[q_heads].shape.rank == 4,
          "partial rotary: two llmc.Rope{rotary_dim=8} on the whole heads, no Slice or Neg left");
    if (rope < 0)
        return llmc_graph_free(&b.g);
    const float *cos = b.g.values[b.g.nodes[rope].inputs[1]].konst.data;
    const float *sin = b.g.values[b.g.nodes[rope].inputs[2]].konst.data;
    double worst = 0;
    for (int t = 0; t < MAX_CONTEXT; t++)
        for (int i = 0; i < 8; i++) {
            float inv_freq = (float)pow(ROPE_THETA, -2.0 * (i % 4) / 8.0), angle = (float)t * inv_freq;
            worst = fmax(worst, fmax(fabs(cos[t * 8 + i] - cosf(angle)), fabs(sin[t * 8 + i] - sinf(angle))));
        }
    CHECK(worst < 1e-6, "partial rotary: table row t = cos/sin(t * inv_freq), t < max_context (max diff %.2g)", worst);
    llmc_graph_free(&b.g);
}

/* ---- llmc_evaluate_position_value ---- */

static void test_position_value(void)
{
    builder b;
    layer_io io;
    layer_spec l = {.heads = 2, .kv_heads = 2, .dim = 8, .rotary = 8, .mask = MASK_ADDITIVE};
    llmc_eval_tensor t;
    llmc_error err = {0};
    new_builder(&b);
    add_layer(&b, &l, &io);
    prepare(&b.g);
    int cond = llmc_graph_find_value(&b.g, "L0/causal");
    int rc = llmc_evaluate_position_value(&b.g, cond, 2, 3, &t, &err);
    const uint8_t want[2 * 5] = {1, 1, 1, 1, 0, 1, 1, 1, 1, 1};
    CHECK(rc == LLMC_OK && t.dtype == LLMC_DT_BOOL && t.nbytes == sizeof want && memcmp(t.data, want, sizeof want) == 0,
          "position value: the causal condition at S=2 P=3 (%s)", err.msg);
    llmc_eval_tensor_free(&t);
    rc = llmc_evaluate_position_value(&b.g, io.present_k, 2, 3, &t, &err);
    CHECK(rc == LLMC_E_UNSUPPORTED && strstr(err.msg, "depends on graph input") != NULL,
          "position value: present.key depends on other inputs (%s)", err.msg);
    llmc_graph_free(&b.g);
}

int main(void)
{
    test_variant("MHA, full RoPE, additive mask",
                 (layer_spec){.heads = 4, .kv_heads = 4, .dim = 8, .rotary = 8, .mask = MASK_ADDITIVE});
    test_variant("GQA 4/2, full RoPE, Where mask + padding",
                 (layer_spec){.heads = 4, .kv_heads = 2, .dim = 8, .rotary = 8, .mask = MASK_WHERE});
    test_variant("partial rotary 4 of 8, scale on q and k",
                 (layer_spec){.heads = 2, .kv_heads = 2, .dim = 8, .rotary = 4, .mask = MASK_ADDITIVE, .scale_on_qk = true});
    test_variant("partial rotary, halves sliced from the whole head",
                 (layer_spec){.heads = 2, .kv_heads = 2, .dim = 16, .rotary = 8, .mask = MASK_ADDITIVE,
                              .halves_from_head = true});
    test_variant("no RoPE, Where mask + padding (gpt2)",
                 (layer_spec){.heads = 2, .kv_heads = 2, .dim = 16, .mask = MASK_WHERE});
    test_variant("GQA 4/1, no RoPE, additive mask, scale on q and k",
                 (layer_spec){.heads = 4, .kv_heads = 1, .dim = 8, .mask = MASK_ADDITIVE, .scale_on_qk = true});
    test_refusals();
    test_whole_norms();
    test_layers();
    test_rope_tables();
    test_position_value();
    return TAP_DONE();
}
