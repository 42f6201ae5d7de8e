/* ONNX Runtime's attention contrib ops (ContribOperators.md), as
 * onnxruntime-genai's model builder writes them:
 *
 *   RotaryEmbedding(input, position_ids, cos_cache, sin_cache) -> output
 *   GroupQueryAttention(query, key?, value?, past_key, past_value, seqlens_k,
 *                       total_sequence_length, cos_cache?, sin_cache?)
 *       -> output, present_key, present_value
 *
 * Both expand into the default-domain form torch exports write for LLaMA,
 * the one rope-fusion and attention-fusion match:
 *
 *   heads    Transpose(Reshape(x, [B, S, heads, D]), 0,2,1,3)
 *   RoPE     x * cos + Concat(-x[..., h:], x[..., :h]) * sin  (h = rot/2),
 *            partial: Concat(RoPE(x[..., :rot]), x[..., rot:]);
 *            cos = Concat(c, c, -1), c = Gather(cos_cache, positions)
 *   cache    present = Concat(past, k_heads, axis=2)
 *   GQA      Reshape(Expand(Unsqueeze(present, 2), [1,1,n,1,1]), [B, heads, T, D])
 *   scores   Where(key <= query position, cap(Mul(q . K^T, scale)), finfo.min)
 *   window   Where(query position - key < local_window_size, scores, finfo.min)
 *            (the keys ONNX Runtime 1.30's CPU kernel keeps: local_window_size
 *            of them, as transformers' sliding_window)
 *   cap      Mul(Tanh(Div(x, softcap)), softcap) when softcap > 0
 *   output   Reshape(Transpose(Softmax(scores) . V, 0,2,1,3), [B, S, heads*D])
 *
 * Only the non-interleaved rotation (rotate-half) has that form: interleaved
 * pairs are refused, as are the smooth softmax, the QK output and the later optional inputs (position_ids, attention_bias,
 * head_sink, cache scales), each by name. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "contrib_expand.h"
#include "ir/llmc_ops.h"

/* GroupQueryAttention's inputs and outputs (ContribOperators.md order). */
enum {
    GQA_QUERY, GQA_KEY, GQA_VALUE, GQA_PAST_KEY, GQA_PAST_VALUE, GQA_SEQLENS_K, GQA_TOTAL_SEQ,
    GQA_COS_CACHE, GQA_SIN_CACHE, GQA_FIRST_LATER_INPUT
};
enum { GQA_OUT, GQA_PRESENT_KEY, GQA_PRESENT_VALUE, GQA_OUTPUT_QK };
enum { ROT_INPUT, ROT_POSITION_IDS, ROT_COS_CACHE, ROT_SIN_CACHE };

static const int64_t PERM_HEADS[4] = {0, 2, 1, 3};
static const int64_t PERM_KEYS_T[4] = {0, 1, 3, 2};

/* ---- node builders: every one returns -1 at once when an operand is -1
 * (an earlier step failed, e->err is set) ---- */

static int op1(llmc_expand *e, const char *op, int a, int dtype)
{
    return a < 0 ? -1 : ex_node1(e, op, &a, 1, dtype);
}

static int op2(llmc_expand *e, const char *op, int a, int b, int dtype)
{
    int ins[2] = {a, b};
    return a < 0 || b < 0 ? -1 : ex_node1(e, op, ins, 2, dtype);
}

/* op(a, b) writing `out` when out >= 0, else a fresh value. */
static int op2_into(llmc_expand *e, const char *op, int a, int b, int dtype, int out)
{
    int ins[2] = {a, b};
    if (out < 0)
        return op2(e, op, a, b, dtype);
    return a < 0 || b < 0 || ex_node_into(e, op, ins, 2, out) < 0 ? -1 : out;
}

static int with_ints(llmc_expand *e, const char *op, int a, const int64_t *v, int n, int dtype)
{
    return a < 0 ? -1 : op2(e, op, a, ex_const_ints(e, v, n), dtype);
}

/* A node with one int or ints attribute (axis, perm ...) writing `out`
 * (a fresh value when out < 0); its output. */
static int with_attr(llmc_expand *e, const char *op, const int *ins, int n_ins, int dtype, const char *attr,
                     const int64_t *v, int n, int out)
{
    int node;
    for (int i = 0; i < n_ins; i++)
        if (ins[i] < 0)
            return -1;
    node = out >= 0 ? ex_node_into(e, op, ins, n_ins, out) : ex_node(e, op, ins, n_ins, dtype, &out, 1);
    if (node < 0 || (n == 1 ? ex_set_int(e, node, attr, v[0]) : ex_set_ints(e, node, attr, v, n)))
        return -1;
    return out;
}

static int transpose(llmc_expand *e, int x, const int64_t perm[4])
{
    return with_attr(e, "Transpose", &x, 1, LLMC_DT_FLOAT, "perm", perm, 4, -1);
}

static int concat_into(llmc_expand *e, int a, int b, int64_t axis, int dtype, int out)
{
    int ins[2] = {a, b};
    return with_attr(e, "Concat", ins, 2, dtype, "axis", &axis, 1, out);
}

static int concat(llmc_expand *e, int a, int b, int64_t axis, int dtype)
{
    return concat_into(e, a, b, axis, dtype, -1);
}

/* x[..., start:end] on the last axis */
static int slice_last(llmc_expand *e, int x, int64_t start, int64_t end)
{
    int64_t axis = -1;
    int ins[4] = {x, ex_const_ints(e, &start, 1), ex_const_ints(e, &end, 1), ex_const_ints(e, &axis, 1)};
    for (int i = 0; i < 4; i++)
        if (ins[i] < 0)
            return -1;
    return ex_node1(e, "Slice", ins, 4, LLMC_DT_FLOAT);
}

/* Dim `axis` of x as an int64 scalar: Gather(Shape(x), axis). */
static int dim_of(llmc_expand *e, int x, int64_t axis)
{
    return op2(e, "Gather", op1(e, "Shape", x, LLMC_DT_INT64), ex_const_int(e, axis), LLMC_DT_INT64);
}

/* ---- shared pieces ---- */

/* [B, S, heads*D] -> [B, heads, S, D] (heads -1: from the width) */
static int split_heads(llmc_expand *e, int x, int64_t heads, int64_t dim)
{
    int64_t shape[4] = {0, 0, heads, dim};
    return transpose(e, with_ints(e, "Reshape", x, shape, 4, LLMC_DT_FLOAT), PERM_HEADS);
}

/* [B, heads, S, D] -> [B, S, heads*D], into `out` when out >= 0 */
static int merge_heads(llmc_expand *e, int x, int out)
{
    int64_t shape[3] = {0, 0, -1};
    return op2_into(e, "Reshape", transpose(e, x, PERM_HEADS), ex_const_ints(e, shape, 3), LLMC_DT_FLOAT, out);
}

/* cos_cache rows at `positions`, each row repeated twice along the last
 * axis: the [.., rot] table of the rotate-half form. */
static int rope_table(llmc_expand *e, int cache, int positions)
{
    int half = op2(e, "Gather", cache, positions, LLMC_DT_FLOAT);
    return concat(e, half, half, -1, LLMC_DT_FLOAT);
}

/* x * cos + Concat(-x[..., h:], x[..., :h]) * sin over the first `rot` of
 * the head's `dim` features (the rest pass through), into `out` when
 * out >= 0. */
static int rotate(llmc_expand *e, int x, int cos, int sin, int64_t rot, int64_t dim, int out)
{
    bool partial = rot < dim;
    int xr = partial ? slice_last(e, x, 0, rot) : x;
    int64_t h = rot / 2;
    int upper = op1(e, "Neg", slice_last(e, xr, h, rot), LLMC_DT_FLOAT);
    int rotated = concat(e, upper, slice_last(e, xr, 0, h), -1, LLMC_DT_FLOAT);
    int y = op2_into(e, "Add", op2(e, "Mul", xr, cos, LLMC_DT_FLOAT), op2(e, "Mul", rotated, sin, LLMC_DT_FLOAT),
                     LLMC_DT_FLOAT, partial ? -1 : out);
    return partial ? concat_into(e, y, slice_last(e, x, rot, INT64_MAX), -1, LLMC_DT_FLOAT, out) : y;
}

/* The last dim of cache v: its own, or the one both branches give an If
 * output (the importer's If of onnx_if.h: onnxruntime-genai's LongRoPE
 * cache pairs differ in rows only); -1 when unknown. */
static int64_t cache_width(const llmc_graph *g, int v)
{
    const llmc_value *val = &g->values[v];
    if (val->shape.rank == 2 && llmc_aff_is_const(val->shape.dims[1]))
        return val->shape.dims[1].c;
    const llmc_node *n = val->producer >= 0 ? &g->nodes[val->producer] : NULL;
    if (!n || !llmc_is_onnx_op(n, "If") || n->n_inputs != 1 + 2 * n->n_outputs)
        return -1;
    for (int j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] == v) {
            int64_t w = cache_width(g, n->inputs[1 + j]);
            return w == cache_width(g, n->inputs[1 + n->n_outputs + j]) ? w : -1;
        }
    return -1;
}

/* The rotary dim the caches hold (2 x their last dim), checked against the
 * head size. */
static int cache_rotary_dim(llmc_expand *e, int cos_input, int sin_input, int64_t dim, int64_t *rot)
{
    const llmc_shape *c = &e->g->values[ex_input(e, cos_input)].shape;
    const llmc_shape *s = &e->g->values[ex_input(e, sin_input)].shape;
    int64_t width = cache_width(e->g, ex_input(e, cos_input));
    bool shaped = c->rank == 2 && s->rank == 2;
    if (width < 0 || width != cache_width(e->g, ex_input(e, sin_input)) || (shaped && !llmc_shape_eq(c, s)))
        return ex_fail_input(e, LLMC_E_INPUT, cos_input, "cos/sin caches are not two [max_position, rot/2] "
                             "tensors of one shape");
    *rot = 2 * width;
    if (*rot < 2 || *rot > dim)
        return ex_fail_input(e, LLMC_E_INPUT, cos_input, "rotary dim %lld (2 x the caches' last dim) is not in "
                             "2..%lld (the head size)", (long long)*rot, (long long)dim);
    return LLMC_OK;
}

/* A known constant last dim of v: its shape, the shape its file declares,
 * or the columns of the constant weight of MatMul(x, W) [+ bias] making it;
 * -1 if none. */
static int64_t known_width(const llmc_graph *g, int v)
{
    for (int hops = 0; v >= 0 && hops < 3; hops++) {
        const llmc_value *val = &g->values[v];
        const llmc_shape *shapes[2] = {&val->shape, &val->declared};
        for (int i = 0; i < 2; i++)
            if (shapes[i]->rank > 0 && llmc_aff_is_const(shapes[i]->dims[shapes[i]->rank - 1]))
                return shapes[i]->dims[shapes[i]->rank - 1].c;
        const llmc_node *n = val->producer >= 0 ? &g->nodes[val->producer] : NULL;
        if (!n || n->domain[0] || n->n_inputs != 2)
            return -1;
        bool is_add = strcmp(n->op_type, "Add") == 0, is_matmul = strcmp(n->op_type, "MatMul") == 0;
        if (is_matmul && g->values[n->inputs[1]].is_const)
            v = n->inputs[1];
        else if (is_add)
            v = g->values[n->inputs[1]].is_const ? n->inputs[0] : n->inputs[1];
        else
            return -1;
    }
    return -1;
}

/* ---- RotaryEmbedding ---- */

/* Positions -> the [.., S, rot] cos and sin tables broadcast over heads:
 * position_ids [B, S] gather [B, S, rot/2] rows, unsqueezed to [B, 1, S, rot];
 * the older [1] form is an offset: rows offset + 0 .. S-1. */
static int rot_tables(llmc_expand *e, int x_heads, int *cos, int *sin)
{
    int pos = ex_input(e, ROT_POSITION_IDS);
    int rank = e->g->values[pos].shape.rank;
    int64_t one = 1;
    if (rank == 1) {
        int range_in[3] = {ex_const_int(e, 0), dim_of(e, x_heads, 2), ex_const_int(e, 1)};
        int steps = range_in[0] < 0 || range_in[1] < 0 || range_in[2] < 0
                        ? -1 : ex_node1(e, "Range", range_in, 3, LLMC_DT_INT64);
        pos = op2(e, "Add", steps, pos, LLMC_DT_INT64);
    } else if (rank != 2) {
        return ex_fail_input(e, LLMC_E_UNSUPPORTED, ROT_POSITION_IDS, "position_ids of rank %d: llmc reads "
                             "[batch, sequence] or the [1] offset", rank);
    }
    *cos = rope_table(e, ex_input(e, ROT_COS_CACHE), pos);
    *sin = rope_table(e, ex_input(e, ROT_SIN_CACHE), pos);
    if (rank == 2) {
        *cos = with_ints(e, "Unsqueeze", *cos, &one, 1, LLMC_DT_FLOAT);
        *sin = with_ints(e, "Unsqueeze", *sin, &one, 1, LLMC_DT_FLOAT);
    }
    return *cos < 0 || *sin < 0 ? e->err->code : LLMC_OK;
}

static int check_rotary_attributes(llmc_expand *e)
{
    if (llmc_node_attr_int(e->g, e->node, "interleaved", 0) != 0)
        return ex_fail(e, LLMC_E_UNSUPPORTED, "attribute 'interleaved' = 1: llmc compiles the rotate-half "
                       "rotation only (interleaved = 0)");
    if (llmc_node_attr_int(e->g, e->node, "is_packed_batching", 0) != 0)
        return ex_fail(e, LLMC_E_UNSUPPORTED, "attribute 'is_packed_batching' = 1 is not supported");
    if (llmc_node_attr_float(e->g, e->node, "scale", 1.0f) != 1.0f)
        return ex_fail(e, LLMC_E_UNSUPPORTED, "attribute 'scale' other than 1 is not supported");
    return LLMC_OK;
}

/* The head size of the input: [B, N, S, D] states it; [B, S, N*D] needs
 * num_heads and a known width, or (num_heads = 0) is one head-size of the
 * caches (ONNX Runtime's rule). */
static int rot_head_size(llmc_expand *e, int64_t *dim)
{
    int x = ex_input(e, ROT_INPUT);
    const llmc_shape *s = &e->g->values[x].shape;
    int64_t heads = llmc_node_attr_int(e->g, e->node, "num_heads", 0);
    int64_t width = known_width(e->g, x);
    const llmc_shape *c = &e->g->values[ex_input(e, ROT_COS_CACHE)].shape;
    if (s->rank == 4)
        *dim = llmc_aff_is_const(s->dims[3]) ? s->dims[3].c : -1;
    else if (heads > 0)
        *dim = width > 0 && width % heads == 0 ? width / heads : -1;
    else
        *dim = c->rank == 2 && llmc_aff_is_const(c->dims[1]) ? 2 * c->dims[1].c : -1;
    if (*dim <= 0)
        return ex_fail_input(e, LLMC_E_UNSUPPORTED, ROT_INPUT, "the head size is not known (a declared "
                             "[B, N, S, D] shape, or num_heads and the hidden size)");
    return LLMC_OK;
}

int expand_rotary_embedding(llmc_expand *e)
{
    int64_t dim, rot;
    int rc = check_rotary_attributes(e);
    if (rc || (rc = rot_head_size(e, &dim)) || (rc = cache_rotary_dim(e, ROT_COS_CACHE, ROT_SIN_CACHE, dim, &rot)))
        return rc;
    int64_t want = llmc_node_attr_int(e->g, e->node, "rotary_embedding_dim", 0);
    if (want != 0 && want != rot)
        return ex_fail(e, LLMC_E_INPUT, "attribute 'rotary_embedding_dim' = %lld but the caches hold %lld",
                       (long long)want, (long long)rot);
    int x = ex_input(e, ROT_INPUT);
    bool packed = e->g->values[x].shape.rank != 4;   /* [B, S, N*D] */
    int heads = packed ? split_heads(e, x, -1, dim) : x;
    int cos = -1, sin = -1, out = ex_output(e, 0);
    if ((rc = rot_tables(e, heads, &cos, &sin)))
        return rc;
    int y = rotate(e, heads, cos, sin, rot, dim, packed ? -1 : out);
    if (packed)
        y = merge_heads(e, y, out);
    return y < 0 ? e->err->code : LLMC_OK;
}

/* ---- GroupQueryAttention ---- */

typedef struct {
    int64_t heads, kv_heads, dim, rot;  /* rot 0: no rotary */
    int64_t window;                     /* local_window_size, -1: none */
    float scale, softcap;               /* softcap 0: none */
    bool packed;                        /* query holds Q, K and V */
} gqa_shape;

/* Attributes whose other values llmc does not compute, refused by name. */
static int check_gqa_attributes(llmc_expand *e, gqa_shape *a)
{
    static const struct { const char *name; int64_t allowed; const char *why; } fixed[] = {
        {"rotary_interleaved", 0, "interleaved rotary pairs (llmc compiles rotate-half)"},
        {"smooth_softmax", 0, "the smooth softmax"},
        {"qk_output", 0, "the QK output"},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
        int64_t v = llmc_node_attr_int(e->g, e->node, fixed[i].name, fixed[i].allowed);
        if (v != fixed[i].allowed)
            return ex_fail(e, LLMC_E_UNSUPPORTED, "attribute '%s' = %lld (%s) is not supported", fixed[i].name,
                           (long long)v, fixed[i].why);
    }
    a->window = llmc_node_attr_int(e->g, e->node, "local_window_size", -1);
    a->softcap = llmc_node_attr_float(e->g, e->node, "softcap", 0.0f);
    if (a->window < -1 || a->window >= INT32_MAX || !(a->softcap >= 0.0f && isfinite(a->softcap)))
        return ex_fail(e, LLMC_E_INPUT, "local_window_size %lld must be -1 or >= 0 and softcap %g finite >= 0",
                       (long long)a->window, (double)a->softcap);
    if (!llmc_node_attr(e->g, e->node, "num_heads") || !llmc_node_attr(e->g, e->node, "kv_num_heads"))
        return ex_fail(e, LLMC_E_INPUT, "attributes 'num_heads' and 'kv_num_heads' are required");
    a->heads = llmc_node_attr_int(e->g, e->node, "num_heads", 0);
    a->kv_heads = llmc_node_attr_int(e->g, e->node, "kv_num_heads", 0);
    if (a->heads <= 0 || a->kv_heads <= 0 || a->heads % a->kv_heads != 0)
        return ex_fail(e, LLMC_E_INPUT, "num_heads %lld is not a positive multiple of kv_num_heads %lld",
                       (long long)a->heads, (long long)a->kv_heads);
    a->scale = llmc_node_attr_float(e->g, e->node, "scale", 0.0f);
    return LLMC_OK;
}

/* Inputs llmc needs present, and the later optional ones absent. */
static int check_gqa_inputs(llmc_expand *e, gqa_shape *a)
{
    static const char *const later[] = {"position_ids", "attention_bias", "head_sink", "k_scale", "v_scale",
                                        "q_norm_weight", "k_norm_weight"};
    for (int i = GQA_FIRST_LATER_INPUT; i < e->g->nodes[e->node].n_inputs; i++)
        if (ex_input(e, i) >= 0)
            return ex_fail_input(e, LLMC_E_UNSUPPORTED, i, "(%s) is not supported",
                                 i - GQA_FIRST_LATER_INPUT < (int)(sizeof later / sizeof *later)
                                     ? later[i - GQA_FIRST_LATER_INPUT] : "a later optional input");
    if ((ex_input(e, GQA_KEY) < 0) != (ex_input(e, GQA_VALUE) < 0))
        return ex_fail(e, LLMC_E_INPUT, "key and value must both be given or both be omitted (packed query)");
    a->packed = ex_input(e, GQA_KEY) < 0;
    for (int i = GQA_PAST_KEY; i <= GQA_PAST_VALUE; i++)
        if (ex_input(e, i) < 0)
            return ex_fail(e, LLMC_E_UNSUPPORTED, "input %d (%s) is omitted: llmc compiles attention with a "
                           "KV cache", i, i == GQA_PAST_KEY ? "past_key" : "past_value");
    bool rotary = llmc_node_attr_int(e->g, e->node, "do_rotary", 0) != 0;
    if (rotary && (ex_input(e, GQA_COS_CACHE) < 0 || ex_input(e, GQA_SIN_CACHE) < 0))
        return ex_fail(e, LLMC_E_INPUT, "do_rotary = 1 needs inputs 7 (cos_cache) and 8 (sin_cache)");
    return ex_refuse_read_output(e, GQA_OUTPUT_QK, "output_qk");
}

/* The head size: the query's width over its heads (Q, or Q+K+V when
 * packed), else the past key's [B, kv_heads, past, D].  The caches cannot
 * say: they cover the rotary dim, which may be part of the head. */
static int gqa_head_size(llmc_expand *e, gqa_shape *a)
{
    int64_t width = known_width(e->g, ex_input(e, GQA_QUERY));
    int64_t heads = a->packed ? a->heads + 2 * a->kv_heads : a->heads;
    const llmc_shape *past = &e->g->values[ex_input(e, GQA_PAST_KEY)].shape;
    if (width > 0 && width % heads == 0)
        a->dim = width / heads;
    else if (past->rank == 4 && llmc_aff_is_const(past->dims[3]) && past->dims[3].c > 0)
        a->dim = past->dims[3].c;
    else
        return ex_fail_input(e, LLMC_E_UNSUPPORTED, GQA_QUERY, "the head size is not known: neither the query's "
                             "width (declared, or the weight of its MatMul) over its %lld heads nor the past "
                             "key's last dim is a number", (long long)heads);
    if (a->scale == 0.0f)
        a->scale = 1.0f / sqrtf((float)a->dim);
    return LLMC_OK;
}

/* q, k, v as [B, S, width] values: the inputs, or a Split of the packed query. */
static int gqa_projections(llmc_expand *e, const gqa_shape *a, int qkv[3])
{
    if (!a->packed) {
        for (int i = 0; i < 3; i++)
            qkv[i] = ex_input(e, GQA_QUERY + i);
        return LLMC_OK;
    }
    int64_t sizes[3] = {a->heads * a->dim, a->kv_heads * a->dim, a->kv_heads * a->dim};
    int ins[2] = {ex_input(e, GQA_QUERY), ex_const_ints(e, sizes, 3)};
    int64_t axis = -1;
    int node = ins[1] < 0 ? -1 : ex_node(e, "Split", ins, 2, LLMC_DT_FLOAT, qkv, 3);
    return node < 0 || ex_set_int(e, node, "axis", axis) ? e->err->code : LLMC_OK;
}

/* The positions of the new tokens, past_len .. past_len+S-1, with past_len
 * the past key's length (dim 2) and S the query's (dim 1).  For the batch of
 * one with an all-ones attention mask that llmc compiles, ONNX Runtime's
 * seqlens_k + 1 is total_sequence_length = past_len + S, so its rotary
 * positions (seqlens_k + 1 - S + s) and its causal bound (key t visible to
 * query s when t <= seqlens_k + 1 - S + s) are these; and both are
 * functions of the call's (S, P) alone, which is what rope-fusion and
 * attention-fusion need to prove (the mask's ReduceSum would read the mask's
 * contents). */
static int gqa_positions(llmc_expand *e, int query, int *past_len, int *end)
{
    *past_len = dim_of(e, ex_input(e, GQA_PAST_KEY), 2);
    *end = op2(e, "Add", *past_len, dim_of(e, query, 1), LLMC_DT_INT64);
    int ins[3] = {*past_len, *end, ex_const_int(e, 1)};
    return ins[1] < 0 || ins[2] < 0 ? -1 : ex_node1(e, "Range", ins, 3, LLMC_DT_INT64);
}

/* [B, kv, T, D] -> [B, kv*n, T, D]: torch's repeat_kv. */
static int repeat_kv(llmc_expand *e, int kv, const gqa_shape *a)
{
    int64_t n = a->heads / a->kv_heads, axis = 2;
    if (n == 1)
        return kv;
    int64_t expand[5] = {1, 1, n, 1, 1}, shape[4] = {0, a->heads, -1, a->dim};
    int un = with_ints(e, "Unsqueeze", kv, &axis, 1, LLMC_DT_FLOAT);
    return with_ints(e, "Reshape", with_ints(e, "Expand", un, expand, 5, LLMC_DT_FLOAT), shape, 4, LLMC_DT_FLOAT);
}

static int mask_where(llmc_expand *e, int keep, int scores)
{
    int ins[3] = {keep, scores, ex_const_float(e, -FLT_MAX)};
    return ins[0] < 0 || ins[1] < 0 || ins[2] < 0 ? -1 : ex_node1(e, "Where", ins, 3, LLMC_DT_FLOAT);
}

/* Where(key <= query position, scores, finfo.min) over [S, T], then with a
 * window Where(query position - key < window, ..., finfo.min). */
static int causal(llmc_expand *e, const gqa_shape *a, int scores, int positions, int end)
{
    int64_t one = 1;
    int range_in[3] = {ex_const_int(e, 0), end, ex_const_int(e, 1)};
    int keys = range_in[0] < 0 || range_in[1] < 0 || range_in[2] < 0
                   ? -1 : ex_node1(e, "Range", range_in, 3, LLMC_DT_INT64);
    int queries = with_ints(e, "Unsqueeze", positions, &one, 1, LLMC_DT_INT64);
    int masked = mask_where(e, op2(e, "LessOrEqual", keys, queries, LLMC_DT_BOOL), scores);
    if (a->window < 0)
        return masked;
    int behind = op2(e, "Sub", queries, keys, LLMC_DT_INT64);
    return mask_where(e, op2(e, "Less", behind, ex_const_int(e, a->window), LLMC_DT_BOOL), masked);
}

/* softcap * Tanh(x / softcap), or x without a cap. */
static int soft_cap(llmc_expand *e, const gqa_shape *a, int x)
{
    if (a->softcap == 0.0f)
        return x;
    int t = op2(e, "Div", x, ex_const_float(e, a->softcap), LLMC_DT_FLOAT);
    t = t < 0 ? -1 : ex_node1(e, "Tanh", &t, 1, LLMC_DT_FLOAT);
    return op2(e, "Mul", t, ex_const_float(e, a->softcap), LLMC_DT_FLOAT);
}

/* Softmax(causal(q . K^T * scale)) . V, heads merged into output 0. */
static int attend(llmc_expand *e, const gqa_shape *a, int q, int k_all, int v_all, int positions, int end)
{
    int kt = transpose(e, repeat_kv(e, k_all, a), PERM_KEYS_T);
    int scores = op2(e, "Mul", op2(e, "MatMul", q, kt, LLMC_DT_FLOAT), ex_const_float(e, a->scale), LLMC_DT_FLOAT);
    int64_t last = -1;
    int masked = causal(e, a, soft_cap(e, a, scores), positions, end);
    int probs = with_attr(e, "Softmax", &masked, 1, LLMC_DT_FLOAT, "axis", &last, 1, -1);
    int ctx = op2(e, "MatMul", probs, repeat_kv(e, v_all, a), LLMC_DT_FLOAT);
    return merge_heads(e, ctx, ex_output(e, GQA_OUT));
}

int expand_group_query_attention(llmc_expand *e)
{
    gqa_shape a = {0};
    int rc = check_gqa_attributes(e, &a), qkv[3];
    if (rc || (rc = check_gqa_inputs(e, &a)) || (rc = gqa_head_size(e, &a)) ||
        (rc = gqa_projections(e, &a, qkv)))
        return rc;
    if (llmc_node_attr_int(e->g, e->node, "do_rotary", 0) &&
        (rc = cache_rotary_dim(e, GQA_COS_CACHE, GQA_SIN_CACHE, a.dim, &a.rot)))
        return rc;
    int q = split_heads(e, qkv[0], a.heads, a.dim), k = split_heads(e, qkv[1], a.kv_heads, a.dim);
    int v = split_heads(e, qkv[2], a.kv_heads, a.dim);
    int past_len, end, positions = gqa_positions(e, qkv[0], &past_len, &end);
    if (a.rot) {
        int cos = rope_table(e, ex_input(e, GQA_COS_CACHE), positions);
        int sin = rope_table(e, ex_input(e, GQA_SIN_CACHE), positions);
        q = rotate(e, q, cos, sin, a.rot, a.dim, -1);
        k = rotate(e, k, cos, sin, a.rot, a.dim, -1);
    }
    int k_all = concat_into(e, ex_input(e, GQA_PAST_KEY), k, 2, LLMC_DT_FLOAT, ex_output(e, GQA_PRESENT_KEY));
    int v_all = concat_into(e, ex_input(e, GQA_PAST_VALUE), v, 2, LLMC_DT_FLOAT, ex_output(e, GQA_PRESENT_VALUE));
    return attend(e, &a, q, k_all, v_all, positions, end) < 0 ? e->err->code : LLMC_OK;
}
