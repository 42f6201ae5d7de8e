/* quant-canonical: the quantized forms a file can hold -> one canonical
 * form of a pre-quantized weight, everything else -> float ops.
 *
 * The canonical form is MatMul(x, DequantizeLinear(Wq, scale, zero_point))
 * with Wq an integer constant [K, N] (uint8 or int8, one value per byte:
 * MatMulNBits' nibbles are unpacked at import, contrib_quant.c), scale a
 * float constant [G, N] and zero_point a constant [G, N] of Wq's type,
 * axis 0 and block_size B, G = ceil(K / B): the blocked layout of ONNX
 * opset 21, one scale per B rows of a column (ir/quant_form.h).  Linear fusion turns it into a
 * Linear that keeps the file's q values, scales and zero points, and
 * codegen packs them as they are (lower_linear_weights.c).
 *
 *  1. ONNX Runtime's dynamic quantization (quantize_dynamic, IntegerOps):
 *       xq, xs, xzp = DynamicQuantizeLinear(x)
 *       y = Mul(Cast<float>(MatMulInteger(xq, Wq, xzp, wzp)), Mul(xs, ws))
 *     -> y = MatMul(x, DequantizeLinear(Wq, ws, wzp)) in canonical form.
 *     The activation's own run-time quantization (one uint8 scale for the
 *     whole tensor) is dropped: llmc quantizes activations itself, per row
 *     to int8 (quantize.c), when it runs the Linear.
 *  2. A DequantizeLinear of constants read only as the right operand of
 *     MatMuls whose left operand is float [..., K] (per tensor, per output
 *     channel, or blocked along K) is put in canonical form; one read only
 *     as the table of Gathers on axis 0 (per tensor, per row, or blocked
 *     along a row) in the table form (ir/quant_form.h), and dynamic
 *     quantization's DequantizeLinear(Gather(Tq, ids)) with one scale
 *     becomes Gather(DequantizeLinear(Tq), ids).
 *  3. Any other DequantizeLinear of constants becomes a float32 constant
 *     here (e.g. a scale per row of K that no tile layout holds): the
 *     quantization ends at compile time.
 *  4. What is left (QuantizeLinear, DynamicQuantizeLinear, MatMulInteger,
 *     DequantizeLinear of run-time values) becomes float ops computing the
 *     ONNX semantics: integers are exact in float32 up to 2^24, rounding
 *     half to even is (v + 1.5 * 2^23) - 1.5 * 2^23 in float32 (|v| <
 *     2^22, clamped first), saturation is Max/Min.
 *
 * Runs right after shape inference, before constant folding (which never
 * evaluates a DequantizeLinear: its lowering only exists inside a Linear),
 * so the float ops of step 4 fold where their inputs are constants. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/llmc_ops.h"
#include "pass.h"
#include "match.h"
#include "pass_list.h"

#define PASS_NAME "quant-canonical"
/* Nodes this pass adds carry this opset, whatever the model imports. */
#define CANON_OPSET 17
/* 1.5 * 2^23: adding and subtracting it rounds |v| < 2^22 half to even. */
#define ROUND_MAGIC 12582912.0f
#define ROUND_LIMIT 4194304.0f

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    int node;     /* the node being rewritten (names what is added) */
    int added;
    llmc_error *err;
} rewriter;

static int oom(rewriter *r)
{
    return llmc_fail(r->err, LLMC_E_NOMEM, "%s: out of memory", PASS_NAME);
}

static int fresh_value(rewriter *r, const char *what, int dtype)
{
    char suffix[96];
    snprintf(suffix, sizeof suffix, "/%s_%d", what, r->added++);
    const llmc_node *n = &r->g->nodes[r->node];
    char *name = llmc_graph_unique_name(r->g, n->name[0] ? n->name : n->op_type, suffix);
    int id = name ? llmc_graph_add_value(r->g, name, dtype) : -1;
    free(name);
    return id < 0 ? (oom(r), -1) : id;
}

/* A node writing `out`; its id, -1 on OOM (err set). */
static int node_into(rewriter *r, const char *op, const int *ins, int n_ins, int out)
{
    const char *base = r->g->values[out].name;
    int id = llmc_graph_add_node(r->g, op, base, ins, n_ins, &out, 1);
    if (id < 0)
        return oom(r), -1;
    r->g->nodes[id].opset = CANON_OPSET;
    return id;
}

/* A node writing a fresh value of `dtype`: the value, -1 on OOM. */
static int node1(rewriter *r, const char *op, const int *ins, int n_ins, int dtype)
{
    int out = fresh_value(r, op, dtype);
    return out < 0 || node_into(r, op, ins, n_ins, out) < 0 ? -1 : out;
}

static int binary(rewriter *r, const char *op, int a, int b)
{
    int ins[2] = {a, b};
    return a < 0 || b < 0 ? -1 : node1(r, op, ins, 2, LLMC_DT_FLOAT);
}

static int new_const(rewriter *r, int dtype, const llmc_shape *shape, const void *data, uint64_t bytes)
{
    int v = fresh_value(r, "const", dtype);
    if (v >= 0 && llmc_graph_set_const(r->g, v, dtype, shape, data, bytes))
        return oom(r), -1;
    return v;
}

static int const_float(rewriter *r, float f)
{
    llmc_shape scalar = {.rank = 0};
    return new_const(r, LLMC_DT_FLOAT, &scalar, &f, sizeof f);
}

static int cast_to(rewriter *r, int v, int dtype)
{
    if (v < 0)
        return -1;
    int out = fresh_value(r, "Cast", dtype);
    int node = out < 0 ? -1 : node_into(r, "Cast", &v, 1, out);
    if (node >= 0 && llmc_node_set_int(r->g, node, "to", dtype))
        return oom(r), -1;
    return node < 0 ? -1 : out;
}

/* v [C] as [C, 1, ..., 1] with `trailing` ones, so it broadcasts along
 * one axis of a tensor that has `trailing` axes after it. */
static int along_axis(rewriter *r, int v, int trailing)
{
    if (v < 0 || trailing == 0 || r->g->values[v].shape.rank != 1)
        return v;
    int64_t axes[LLMC_MAX_RANK];
    for (int i = 0; i < trailing; i++)
        axes[i] = i + 1;
    llmc_shape vec = {.rank = 1, .dims = {llmc_aff_const(trailing)}};
    int ins[2] = {v, new_const(r, LLMC_DT_INT64, &vec, axes, sizeof *axes * (size_t)trailing)};
    return ins[1] < 0 ? -1 : node1(r, "Unsqueeze", ins, 2, r->g->values[v].dtype);
}

/* Max(Min(v, hi), lo) */
static int clamp(rewriter *r, int v, float lo, float hi)
{
    return binary(r, "Max", binary(r, "Min", v, const_float(r, hi)), const_float(r, lo));
}

/* v rounded half to even (v clamped to +-2^22 first: beyond it every
 * float is an integer already, and the range of every saturation here). */
static int round_even(rewriter *r, int v)
{
    v = clamp(r, v, -ROUND_LIMIT, ROUND_LIMIT);
    return binary(r, "Sub", binary(r, "Add", v, const_float(r, ROUND_MAGIC)), const_float(r, ROUND_MAGIC));
}

static int input_of(const llmc_graph *g, int node, int k)
{
    return k < g->nodes[node].n_inputs ? g->nodes[node].inputs[k] : -1;
}

static bool is_const(const llmc_graph *g, int v)
{
    return v >= 0 && g->values[v].is_const && !g->values[v].is_graph_input;
}

static bool producer_is(const llmc_graph *g, int v, const char *op)
{
    int p = v >= 0 ? g->values[v].producer : -1;
    return p >= 0 && !g->nodes[p].dead && llmc_is_onnx_op(&g->nodes[p], op);
}

/* ---- the layout of a DequantizeLinear's scale ---- */

typedef enum { PER_TENSOR, PER_AXIS, BLOCKED } scale_mode;

typedef struct {
    scale_mode mode;
    int axis, rank;
    int64_t dim, inner, block;   /* x's dim at axis, the product after it, B */
} scale_layout;

/* The node's layout (shape inference checked scale against x). */
static scale_layout layout_of(const llmc_graph *g, int node)
{
    const llmc_shape *x = &g->values[input_of(g, node, 0)].shape, *s = &g->values[input_of(g, node, 1)].shape;
    scale_layout l = {.rank = x->rank, .inner = 1};
    l.block = llmc_node_attr_int(g, node, "block_size", 0);
    int64_t axis = llmc_node_attr_int(g, node, "axis", 1);
    l.axis = x->rank == 0 ? 0 : (int)(axis < 0 ? axis + x->rank : axis);
    bool scalar = s->rank == 0 || (s->rank == 1 && s->dims[0].c == 1 && l.block == 0 && x->rank > 0 &&
                                   x->dims[l.axis].c != 1);
    l.mode = l.block > 0 ? BLOCKED : scalar || x->rank == 0 ? PER_TENSOR : PER_AXIS;
    if (l.mode == PER_TENSOR)
        return l;
    l.dim = x->dims[l.axis].c;
    for (int i = l.axis + 1; i < x->rank; i++)
        l.inner *= x->dims[i].c;
    return l;
}

/* The scale (and zero point) index of x's element i (row-major). */
static int64_t scale_index(const scale_layout *l, int64_t i)
{
    if (l->mode == PER_TENSOR)
        return 0;
    int64_t a = i / l->inner % l->dim;
    if (l->mode == PER_AXIS)
        return a;
    int64_t groups = (l->dim + l->block - 1) / l->block, outer = i / (l->inner * l->dim);
    return (outer * groups + a / l->block) * l->inner + i % l->inner;
}

static int64_t int_at(const void *data, int dtype, int64_t i)
{
    if (dtype == LLMC_DT_UINT8)
        return ((const uint8_t *)data)[i];
    if (dtype == LLMC_DT_INT8)
        return ((const int8_t *)data)[i];
    return ((const int32_t *)data)[i];
}

static int64_t elements(const llmc_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dims[i].c;
    return n;
}

static bool const_dims(const llmc_shape *s)
{
    for (int i = 0; i < s->rank; i++)
        if (!llmc_aff_is_const(s->dims[i]))
            return false;
    return s->rank >= 0;
}

/* ---- 3. a DequantizeLinear of constants -> a float32 constant ---- */

static int fold_dequantize(rewriter *r)
{
    llmc_graph *g = r->g;
    int node = r->node, xv = input_of(g, node, 0), sv = input_of(g, node, 1), zv = input_of(g, node, 2);
    const llmc_value *x = &g->values[xv];
    const void *q = llmc_const_bytes(&x->konst), *zp = zv >= 0 ? llmc_const_bytes(&g->values[zv].konst) : NULL;
    const float *scale = llmc_const_bytes(&g->values[sv].konst);
    int64_t n = elements(&x->shape);
    float *y = malloc(sizeof *y * (size_t)(n > 0 ? n : 1));
    if (!y || (!q && n) || !scale || (zv >= 0 && !zp)) {
        free(y);
        return oom(r);
    }
    scale_layout l = layout_of(g, node);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = scale_index(&l, i);
        int64_t z = zp ? int_at(zp, x->dtype, s) : 0;
        y[i] = (float)(int_at(q, x->dtype, i) - z) * scale[s];
    }
    int out = g->nodes[node].outputs[0];
    llmc_shape shape = x->shape;
    int rc = llmc_graph_set_const(g, out, LLMC_DT_FLOAT, &shape, y, sizeof *y * (uint64_t)n) ? oom(r) : LLMC_OK;
    free(y);
    if (!rc)
        llmc_graph_erase_node(g, node);
    return rc;
}

/* ---- 2. canonical form of a weight ---- */

/* How node i reads a candidate value as its input j (k: the value's rows). */
typedef bool (*reader_fits)(const llmc_graph *g, int i, int j, int64_t k);

/* v has readers, is no graph output, and every reader fits. */
static bool every_reader(const llmc_graph *g, int v, reader_fits fits, int64_t k)
{
    int readers = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; !g->nodes[i].dead && j < g->nodes[i].n_inputs; j++) {
            if (g->nodes[i].inputs[j] != v)
                continue;
            if (!fits(g, i, j, k))
                return false;
            readers++;
        }
    return readers > 0 && !g->values[v].is_graph_output;
}

/* A MatMul taking it as B [K, N] with a float A [..., K]. */
static bool matmul_weight(const llmc_graph *g, int i, int j, int64_t k)
{
    const llmc_node *n = &g->nodes[i];
    const llmc_value *a = n->n_inputs == 2 ? &g->values[n->inputs[0]] : NULL;
    return llmc_is_onnx_op(n, "MatMul") && j == 1 && a && a->dtype == LLMC_DT_FLOAT && a->shape.rank >= 1 &&
           llmc_aff_eq(a->shape.dims[a->shape.rank - 1], llmc_aff_const(k));
}

/* A Gather taking it as its data, on axis 0. */
static bool gather_table(const llmc_graph *g, int i, int j, int64_t k)
{
    (void)k;
    return llmc_is_onnx_op(&g->nodes[i], "Gather") && j == 0 && llmc_node_attr_int(g, i, "axis", 0) == 0;
}

/* A DequantizeLinear of constants whose x is an 8-bit integer matrix. */
static bool of_int_matrix(const llmc_graph *g, int node)
{
    int xv = input_of(g, node, 0), sv = input_of(g, node, 1), zv = input_of(g, node, 2);
    const llmc_value *x = &g->values[xv];
    return is_const(g, xv) && is_const(g, sv) && (zv < 0 || is_const(g, zv)) && x->shape.rank == 2 &&
           const_dims(&x->shape) && (x->dtype == LLMC_DT_UINT8 || x->dtype == LLMC_DT_INT8);
}

/* An embedding table [V, H] with one scale per tensor, per row, or per
 * block of H columns of a row, read by Gathers. */
static bool is_table_form(const llmc_graph *g, int node)
{
    if (!of_int_matrix(g, node))
        return false;
    scale_layout l = layout_of(g, node);
    bool along_h = l.mode == PER_TENSOR || (l.mode == PER_AXIS && l.axis == 0) || (l.mode == BLOCKED && l.axis == 1);
    return along_h && every_reader(g, g->nodes[node].outputs[0], gather_table, 0);
}

/* A DequantizeLinear of constants that dequantizes a weight [K, N] with
 * one scale per column, per block of K rows of a column, or per tensor. */
static bool is_weight_form(const llmc_graph *g, int node)
{
    if (!of_int_matrix(g, node))
        return false;
    const llmc_value *x = &g->values[input_of(g, node, 0)];
    scale_layout l = layout_of(g, node);
    bool along_k = l.mode == PER_TENSOR || (l.mode == PER_AXIS && l.axis == 1) || (l.mode == BLOCKED && l.axis == 0);
    return along_k && every_reader(g, g->nodes[node].outputs[0], matmul_weight, x->shape.dims[0].c);
}

/* The canonical DequantizeLinear of wq writing `out`, from a scale and
 * zero point (zps NULL: none) of layout l: axis 0 (a weight [K, N]: scale
 * [G, N], blocks along K) or axis 1 (a table [V, H]: scale [V, G], blocks
 * along H); a scale per tensor, or per column of a weight / row of a
 * table, is one block over the whole axis. */
static int canonical_dequantize(rewriter *r, int wq, const float *scales, const void *zps, scale_layout l, int axis,
                                int out)
{
    const llmc_value *w = &r->g->values[wq];
    int64_t along = w->shape.dims[axis].c, across = w->shape.dims[1 - axis].c;
    int dtype = w->dtype;   /* w moves as values are added */
    int64_t groups = l.mode == BLOCKED ? (along + l.block - 1) / l.block : 1;
    int64_t count = groups * across, block = l.mode == BLOCKED ? l.block : along;
    float *s = malloc(sizeof *s * (size_t)count);
    uint8_t *z = calloc((size_t)count, 1);
    int rc = s && z ? LLMC_OK : oom(r);
    for (int64_t i = 0; !rc && i < count; i++) {
        /* element i of [G, N] (axis 0) or [V, G] (axis 1); a per-axis
         * scale runs along `across` */
        int64_t src = l.mode == PER_TENSOR ? 0 : l.mode == PER_AXIS ? (axis == 0 ? i % across : i / groups) : i;
        s[i] = scales[src];
        z[i] = zps ? ((const uint8_t *)zps)[src] : 0;
    }
    llmc_affine g = llmc_aff_const(groups), a = llmc_aff_const(across);
    llmc_shape shape = {.rank = 2, .dims = {axis == 0 ? g : a, axis == 0 ? a : g}};
    int ins[3] = {wq, rc ? -1 : new_const(r, LLMC_DT_FLOAT, &shape, s, sizeof *s * (uint64_t)count),
                  rc ? -1 : new_const(r, dtype, &shape, z, (uint64_t)count)};
    free(s);
    free(z);
    if (ins[1] < 0 || ins[2] < 0)
        return r->err->code ? r->err->code : oom(r);
    int node = node_into(r, "DequantizeLinear", ins, 3, out);
    if (node < 0 || llmc_node_set_int(r->g, node, "axis", axis) || llmc_node_set_int(r->g, node, "block_size", block))
        return oom(r);
    return LLMC_OK;
}

/* A DequantizeLinear in canonical form along `axis` already. */
static bool is_canonical(const llmc_graph *g, int node, int axis)
{
    scale_layout l = layout_of(g, node);
    return l.mode == BLOCKED && l.axis == axis && input_of(g, node, 2) >= 0 &&
           g->values[input_of(g, node, 1)].shape.rank == 2;
}

static int to_canonical(rewriter *r, int axis)
{
    llmc_graph *g = r->g;
    int node = r->node;
    if (is_canonical(g, node, axis))
        return LLMC_OK;
    int wq = input_of(g, node, 0), sv = input_of(g, node, 1), zv = input_of(g, node, 2);
    const float *scales = llmc_const_bytes(&g->values[sv].konst);
    const void *zps = zv >= 0 ? llmc_const_bytes(&g->values[zv].konst) : NULL;
    if (!scales || (zv >= 0 && !zps))
        return oom(r);
    scale_layout l = layout_of(g, node);
    int out = g->nodes[node].outputs[0];
    llmc_graph_erase_node(g, node);
    return canonical_dequantize(r, wq, scales, zps, l, axis, out);
}

/* ---- 1. dynamic quantization -> canonical form ---- */

/* The matched nodes of one dynamically quantized MatMul. */
typedef struct {
    int mmi, cast, mul, scale_mul;
    int x, wq, wzp, ws, y;
} dynamic_matmul;

/* ws: the constant of Mul(xs, ws) producing `s`; -1 otherwise. */
static int weight_scale(const llmc_graph *g, int s, int xs)
{
    if (!producer_is(g, s, "Mul"))
        return -1;
    const llmc_node *m = &g->nodes[g->values[s].producer];
    int other = m->inputs[0] == xs ? m->inputs[1] : m->inputs[1] == xs ? m->inputs[0] : -1;
    const llmc_value *w = other >= 0 ? &g->values[other] : NULL;
    bool fits = w && is_const(g, other) && w->dtype == LLMC_DT_FLOAT &&
                (w->shape.rank == 0 || (w->shape.rank == 1 && llmc_aff_is_const(w->shape.dims[0])));
    return fits ? other : -1;
}

static bool match_dynamic(const llmc_graph *g, int mmi, dynamic_matmul *d)
{
    const llmc_node *n = &g->nodes[mmi];
    int a = n->inputs[0], azp = input_of(g, mmi, 2);
    d->mmi = mmi;
    d->wq = n->inputs[1];
    d->wzp = input_of(g, mmi, 3);
    if (!producer_is(g, a, "DynamicQuantizeLinear") || !is_const(g, d->wq) || (d->wzp >= 0 && !is_const(g, d->wzp)) ||
        g->values[d->wq].shape.rank != 2 || !const_dims(&g->values[d->wq].shape))
        return false;
    const llmc_node *dql = &g->nodes[g->values[a].producer];
    if (dql->outputs[0] != a || dql->n_outputs < 3 || (azp >= 0 && azp != dql->outputs[2]))
        return false;
    d->x = dql->inputs[0];
    d->cast = llmc_match_sole_reader(g, n->outputs[0]);
    if (d->cast < 0 || !llmc_is_onnx_op(&g->nodes[d->cast], "Cast") ||
        llmc_node_attr_int(g, d->cast, "to", 0) != LLMC_DT_FLOAT)
        return false;
    int c = g->nodes[d->cast].outputs[0];
    d->mul = llmc_match_sole_reader(g, c);
    if (d->mul < 0 || !llmc_is_onnx_op(&g->nodes[d->mul], "Mul"))
        return false;
    int s = g->nodes[d->mul].inputs[0] == c ? g->nodes[d->mul].inputs[1] : g->nodes[d->mul].inputs[0];
    d->ws = weight_scale(g, s, dql->outputs[1]);
    d->scale_mul = d->ws >= 0 ? g->values[s].producer : -1;
    d->y = g->nodes[d->mul].outputs[0];
    int64_t n_cols = g->values[d->wq].shape.dims[1].c;
    const llmc_value *ws = d->ws >= 0 ? &g->values[d->ws] : NULL;
    const llmc_value *wzp = d->wzp >= 0 ? &g->values[d->wzp] : NULL;
    bool per_column = ws && ws->shape.rank == 1 && ws->shape.dims[0].c == n_cols && n_cols != 1;
    /* the zero point has the scale's layout: one, or one per column */
    return ws && (!wzp || elements(&wzp->shape) == (per_column ? n_cols : 1));
}

static int rewrite_dynamic(rewriter *r, const dynamic_matmul *d)
{
    llmc_graph *g = r->g;
    const float *scales = llmc_const_bytes(&g->values[d->ws].konst);
    const void *zps = d->wzp >= 0 ? llmc_const_bytes(&g->values[d->wzp].konst) : NULL;
    if (!scales || (d->wzp >= 0 && !zps))
        return oom(r);
    const llmc_value *ws = &g->values[d->ws];
    scale_layout l = {.mode = ws->shape.rank == 1 && ws->shape.dims[0].c > 1 ? PER_AXIS : PER_TENSOR};
    llmc_graph_erase_node(g, d->mmi);
    llmc_graph_erase_node(g, d->cast);
    llmc_graph_erase_node(g, d->mul);
    if (llmc_graph_use_count(g, g->nodes[d->scale_mul].outputs[0]) == 0)
        llmc_graph_erase_node(g, d->scale_mul);
    int w = fresh_value(r, "weight", LLMC_DT_FLOAT);
    int rc = w < 0 ? r->err->code : canonical_dequantize(r, d->wq, scales, zps, l, 0, w);
    int ins[2] = {d->x, w};
    return rc ? rc : node_into(r, "MatMul", ins, 2, d->y) < 0 ? r->err->code : LLMC_OK;
}

/* ---- dynamic quantization's Gather -> a table in canonical form ---- */

/* DequantizeLinear(Gather(Tq, ids), scale, zp) with Tq an 8-bit constant
 * [V, H], the Gather on axis 0 read by the DequantizeLinear alone and one
 * constant scale (and zero point) for the tensor: Gather(T, ids), T the
 * table dequantized in canonical form (the same values: a per-tensor scale
 * commutes with the row selection). */
static int gather_of_table(const llmc_graph *g, int node)
{
    int x = input_of(g, node, 0), sv = input_of(g, node, 1), zv = input_of(g, node, 2);
    if (!producer_is(g, x, "Gather") || llmc_match_sole_reader(g, x) != node || !is_const(g, sv) ||
        (zv >= 0 && !is_const(g, zv)) || elements(&g->values[sv].shape) != 1)
        return -1;
    int gather = g->values[x].producer, table = g->nodes[gather].inputs[0];
    const llmc_value *t = &g->values[table];
    bool fits = is_const(g, table) && t->shape.rank == 2 && const_dims(&t->shape) &&
                (t->dtype == LLMC_DT_UINT8 || t->dtype == LLMC_DT_INT8) &&
                llmc_node_attr_int(g, gather, "axis", 0) == 0;
    return fits ? gather : -1;
}

static int rewrite_gather_of_table(rewriter *r, int gather)
{
    llmc_graph *g = r->g;
    int sv = input_of(g, r->node, 1), zv = input_of(g, r->node, 2), out = g->nodes[r->node].outputs[0];
    int table = g->nodes[gather].inputs[0], ids = g->nodes[gather].inputs[1];
    const float *scales = llmc_const_bytes(&g->values[sv].konst);
    const void *zps = zv >= 0 ? llmc_const_bytes(&g->values[zv].konst) : NULL;
    if (!scales || (zv >= 0 && !zps))
        return oom(r);
    llmc_graph_erase_node(g, r->node);
    llmc_graph_erase_node(g, gather);
    scale_layout l = {.mode = PER_TENSOR};
    int t = fresh_value(r, "table", LLMC_DT_FLOAT);
    int rc = t < 0 ? r->err->code : canonical_dequantize(r, table, scales, zps, l, 1, t);
    int ins[2] = {t, ids};
    return rc ? rc : node_into(r, "Gather", ins, 2, out) < 0 ? r->err->code : LLMC_OK;
}

/* ---- 4. float ops for what is left ---- */

/* The axes after a per-axis scale's axis (0 per tensor), for along_axis;
 * blocked scales of run-time values are refused. */
static int trailing_axes(rewriter *r, int *trailing)
{
    const llmc_node *n = &r->g->nodes[r->node];
    scale_layout l = layout_of(r->g, r->node);
    *trailing = l.mode == PER_AXIS ? l.rank - l.axis - 1 : 0;
    return l.mode != BLOCKED ? LLMC_OK
                             : llmc_fail(r->err, LLMC_E_UNSUPPORTED, "node '%s' (#%d, %s): blocked scales are "
                                         "compiled for constant weights only", n->name, r->node, n->op_type);
}

/* DequantizeLinear(x, scale, zp) = (float(x) - float(zp)) * scale */
static int float_dequantize(rewriter *r)
{
    const llmc_graph *g = r->g;
    int trailing, rc = trailing_axes(r, &trailing);
    if (rc)
        return rc;
    int x = cast_to(r, input_of(g, r->node, 0), LLMC_DT_FLOAT), zp = input_of(g, r->node, 2);
    if (zp >= 0)
        x = binary(r, "Sub", x, cast_to(r, along_axis(r, zp, trailing), LLMC_DT_FLOAT));
    int ins[2] = {x, along_axis(r, input_of(g, r->node, 1), trailing)}, out = g->nodes[r->node].outputs[0];
    llmc_graph_erase_node(r->g, r->node);
    return ins[0] < 0 || ins[1] < 0 || node_into(r, "Mul", ins, 2, out) < 0 ? r->err->code : LLMC_OK;
}

/* Cast<to>(clamp(v, lo, hi)) into `out` (v integral). */
static int saturate_into(rewriter *r, int v, int to, int out)
{
    float lo = to == LLMC_DT_INT8 ? -128.0f : 0.0f, hi = to == LLMC_DT_INT8 ? 127.0f : 255.0f;
    int c = clamp(r, v, lo, hi);
    int node = c < 0 ? -1 : node_into(r, "Cast", &c, 1, out);
    if (node >= 0 && llmc_node_set_int(r->g, node, "to", to))
        return oom(r);
    return node < 0 ? r->err->code : LLMC_OK;
}

/* QuantizeLinear(x, scale, zp) = saturate(round(x / scale) + zp) */
static int float_quantize(rewriter *r)
{
    const llmc_graph *g = r->g;
    int trailing, rc = trailing_axes(r, &trailing), zp = input_of(g, r->node, 2);
    if (rc)
        return rc;
    int out = g->nodes[r->node].outputs[0], to = g->values[out].dtype;
    int v = round_even(r, binary(r, "Div", input_of(g, r->node, 0), along_axis(r, input_of(g, r->node, 1), trailing)));
    if (zp >= 0)
        v = binary(r, "Add", v, cast_to(r, along_axis(r, zp, trailing), LLMC_DT_FLOAT));
    llmc_graph_erase_node(r->g, r->node);
    return v < 0 ? r->err->code : saturate_into(r, v, to, out);
}

static int reduce_all(rewriter *r, const char *op, int x)
{
    int out = fresh_value(r, op, LLMC_DT_FLOAT);
    int node = out < 0 ? -1 : node_into(r, op, &x, 1, out);
    if (node >= 0 && llmc_node_set_int(r->g, node, "keepdims", 0))
        return oom(r), -1;
    return node < 0 ? -1 : out;
}

/* DynamicQuantizeLinear(x) -> y, scale, zp (uint8; ONNX's reference):
 *   scale = (max(0, max x) - min(0, min x)) / 255
 *   zp = saturate(round(-min(0, min x) / scale)),  y = saturate(round(x / scale) + zp) */
static int float_dynamic_quantize(rewriter *r)
{
    const llmc_node *n = &r->g->nodes[r->node];
    int x = n->inputs[0], y = n->outputs[0], scale_out = n->n_outputs > 1 ? n->outputs[1] : -1;
    int zp_out = n->n_outputs > 2 ? n->outputs[2] : -1;
    int lo = binary(r, "Min", reduce_all(r, "ReduceMin", x), const_float(r, 0.0f));
    int hi = binary(r, "Max", reduce_all(r, "ReduceMax", x), const_float(r, 0.0f));
    int scale = binary(r, "Div", binary(r, "Sub", hi, lo), const_float(r, 255.0f));
    int zp = clamp(r, round_even(r, binary(r, "Sub", const_float(r, 0.0f), binary(r, "Div", lo, scale))), 0.0f, 255.0f);
    int v = binary(r, "Add", round_even(r, binary(r, "Div", x, scale)), zp);
    if (v < 0)
        return r->err->code;
    llmc_graph_erase_node(r->g, r->node);
    int rc = y >= 0 ? saturate_into(r, v, LLMC_DT_UINT8, y) : LLMC_OK;
    if (!rc && scale_out >= 0 && node_into(r, "Identity", &scale, 1, scale_out) < 0)
        rc = r->err->code;
    return rc || zp_out < 0 ? rc : saturate_into(r, zp, LLMC_DT_UINT8, zp_out);
}

/* MatMulInteger(a, b, azp, bzp) = int32(MatMul(float(a) - azp, float(b) - bzp)):
 * exact while every sum stays below 2^24 in magnitude. */
static int float_matmul_integer(rewriter *r)
{
    const llmc_graph *g = r->g;
    int a = cast_to(r, input_of(g, r->node, 0), LLMC_DT_FLOAT), b = cast_to(r, input_of(g, r->node, 1), LLMC_DT_FLOAT);
    int azp = input_of(g, r->node, 2), bzp = input_of(g, r->node, 3), out = g->nodes[r->node].outputs[0];
    if (azp >= 0) /* per row of A: [M] -> [M, 1] */
        a = binary(r, "Sub", a, cast_to(r, along_axis(r, azp, 1), LLMC_DT_FLOAT));
    if (bzp >= 0)
        b = binary(r, "Sub", b, cast_to(r, bzp, LLMC_DT_FLOAT));
    int product = binary(r, "MatMul", a, b);
    llmc_graph_erase_node(r->g, r->node);
    int node = product < 0 ? -1 : node_into(r, "Cast", &product, 1, out);
    if (node >= 0 && llmc_node_set_int(r->g, node, "to", LLMC_DT_INT32))
        return oom(r);
    return node < 0 ? r->err->code : LLMC_OK;
}

/* ---- the walk ---- */

typedef struct {
    int dynamic, weights, folded, float_ops;
} counts;

static int visit(rewriter *r, counts *c, bool weights_only)
{
    llmc_graph *g = r->g;
    const llmc_node *n = &g->nodes[r->node];
    dynamic_matmul d;
    if (weights_only) {
        if (!llmc_is_onnx_op(n, "MatMulInteger") || !match_dynamic(g, r->node, &d))
            return LLMC_OK;
        c->dynamic++;
        return rewrite_dynamic(r, &d);
    }
    if (llmc_is_onnx_op(n, "DequantizeLinear")) {
        bool all_const = is_const(g, n->inputs[0]) && is_const(g, n->inputs[1]) &&
                         (input_of(g, r->node, 2) < 0 || is_const(g, input_of(g, r->node, 2)));
        int gather = gather_of_table(g, r->node);
        if (is_weight_form(g, r->node) || is_table_form(g, r->node)) {
            c->weights++;
            return to_canonical(r, is_weight_form(g, r->node) ? 0 : 1);
        }
        if (gather >= 0) {
            c->weights++;
            return rewrite_gather_of_table(r, gather);
        }
        if (all_const && const_dims(&g->values[n->inputs[0]].shape)) {
            llmc_pass_explain(r->ctx, PASS_NAME, g, r->node, "not read as a MatMul weight [K, N] with scales "
                              "along K, nor as a Gather's table [V, H] with scales along H: dequantized to "
                              "float32 at compile time");
            c->folded++;
            return fold_dequantize(r);
        }
        c->float_ops++;
        return float_dequantize(r);
    }
    int (*rewrite)(rewriter *) = llmc_is_onnx_op(n, "QuantizeLinear")          ? float_quantize
                                 : llmc_is_onnx_op(n, "DynamicQuantizeLinear") ? float_dynamic_quantize
                                 : llmc_is_onnx_op(n, "MatMulInteger")         ? float_matmul_integer
                                                                               : NULL;
    if (!rewrite)
        return LLMC_OK;
    bool read = false;
    for (int k = 0; k < n->n_outputs; k++)
        read = read || (n->outputs[k] >= 0 && llmc_graph_use_count(g, n->outputs[k]) > 0);
    if (!read) { /* e.g. a DynamicQuantizeLinear whose MatMuls step 1 rewrote */
        llmc_graph_erase_node(g, r->node);
        return LLMC_OK;
    }
    c->float_ops++;
    return rewrite(r);
}

static int run_quant_canonical(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    counts c = {0};
    /* first the dynamic MatMuls (they read DynamicQuantizeLinear outputs
     * that step 4 would otherwise rewrite), then the rest */
    for (int pass = 0; pass < 2; pass++) {
        int n_nodes = g->n_nodes;
        for (int i = 0; i < n_nodes; i++) {
            if (g->nodes[i].dead)
                continue;
            rewriter r = {g, ctx, i, 0, err};
            int rc = visit(&r, &c, pass == 0);
            if (rc)
                return rc;
        }
    }
    llmc_pass_detail(ctx, "%d dynamic int8 MatMuls, %d weights in canonical form, %d dequantized at compile "
                     "time, %d rewritten to float ops", c.dynamic, c.weights, c.folded, c.float_ops);
    return LLMC_OK;
}

const llmc_pass llmc_pass_quant_canonical = {PASS_NAME, run_quant_canonical};
