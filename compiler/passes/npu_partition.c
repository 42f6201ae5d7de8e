/* npu-partition: marks the static operators an NPU runs for chunks of C
 * tokens (paper 003 §3.2, chunk-sharing graphs).
 *
 * With --npu-chunk C, prefill runs in chunks of C tokens, and the ops
 * whose shapes are fixed once S = C, and that an NPU runs in int8, form
 * subgraphs built once and shared by every chunk.  This pass marks them
 * (INT attribute npu_chunk = C); codegen groups runs of consecutive marked
 * ops into Plan.subgraphs.  The rest (embedding, Attention, which depends
 * on the chunk's position, ShadowLinear, layout copies) runs on the CPU.
 *
 * A node is marked when it lowers to a plan op an NPU subgraph may hold
 * (llmc_rt_op_npu: plan_enums.h's npu column) and
 *   - it is RMSNorm, LayerNormalization (one output), SwiGLU, Silu, Gelu,
 *     or a float Add / Sub / Mul / Div whose operands have equal shapes or
 *     whose second is a constant over the trailing dims; or
 *   - a Linear with int8 weights and binary16 scales (not a file's float32
 *     scales and zero points, quant_coef 32), one scale per output channel (quant_group
 *     >= K: NPUs take per-channel weight scales) and at most 5 outputs,
 *     whose x is a QuantizeRows with a static scale (per-tensor: NPUs have
 *     no per-row activation scales); or that QuantizeRows, when every reader
 *     of its int8 output is such a Linear (the int8 tensor never leaves the
 *     subgraph);
 *   and every tensor it reads or writes (constants aside) is float32 (the
 *   QuantizeRows -> Linear pair: int8) and in row form: no dim depends on
 *   P, and S, if present, is the first dim that is not 1, with coefficient
 *   1 (so the first r rows of a chunk buffer are the tensor at S = r: a
 *   padded last chunk runs the same subgraph).
 *
 * Preconditions: ctx->npu_chunk > 0 (else nothing); runs last, after
 * quantize and shadow-outliers. */
#include <stdlib.h>

#include "ir/llmc_ops.h"
#include "llmc_rt.h"
#include "pass.h"
#include "pass_list.h"

static const char PASS[] = "npu-partition";

#define MAX_SUBGRAPH_OP_OUTPUTS 5 /* runtime/llmc_rt.h LLMC_RT_SG_OP_IO */

/* No P; S only as the first non-1 dim, with coefficient 1. */
static bool row_form(const llmc_shape *s)
{
    if (s->rank < 0)
        return false;
    bool leading = true;
    for (int a = 0; a < s->rank; a++) {
        llmc_affine d = s->dims[a];
        if (d.p != 0)
            return false;
        if (d.s != 0 && !(leading && d.s == 1 && d.c == 0))
            return false;
        leading = leading && d.s == 0 && d.c == 1;
    }
    return true;
}

static bool value_ok(const llmc_graph *g, int v, int dtype)
{
    const llmc_value *x = &g->values[v];
    return x->is_const || (x->dtype == dtype && row_form(&x->shape));
}

/* Every non-constant operand float32 in row form (int8 for `int8_in` /
 * `int8_out`: the QuantizeRows -> Linear tensor). */
static bool operands_ok(const llmc_graph *g, const llmc_node *n, bool int8_in, bool int8_out)
{
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 &&
            !value_ok(g, n->inputs[k], int8_in && k == 0 ? LLMC_DT_INT8 : LLMC_DT_FLOAT))
            return false;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && !value_ok(g, n->outputs[k], int8_out ? LLMC_DT_INT8 : LLMC_DT_FLOAT))
            return false;
    return true;
}

/* A float elementwise op over equal shapes, or over a constant b spanning
 * a's trailing dims. */
static bool elementwise_ok(const llmc_graph *g, const llmc_node *n)
{
    if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return false;
    const llmc_value *a = &g->values[n->inputs[0]], *b = &g->values[n->inputs[1]];
    if (llmc_shape_eq(&a->shape, &b->shape))
        return true;
    if (!b->is_const || b->shape.rank > a->shape.rank)
        return false;
    for (int k = 0; k < b->shape.rank; k++)
        if (!llmc_aff_eq(b->shape.dims[k], a->shape.dims[a->shape.rank - b->shape.rank + k]))
            return false;
    return true;
}

/* The static-scale QuantizeRows feeding Linear `node`, or -1. */
static int static_quantizer(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (n->n_inputs < 2 || n->inputs[0] < 0)
        return -1;
    int q = g->values[n->inputs[0]].producer;
    if (q < 0 || g->nodes[q].dead || !llmc_is_op(&g->nodes[q], "QuantizeRows") ||
        !(llmc_node_attr_float(g, q, "scale", 0.0f) > 0.0f))
        return -1;
    return q;
}

/* Why Linear `node` cannot go to the NPU, or NULL. */
static const char *linear_refusal(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (llmc_node_attr_int(g, node, "quant_bits", 0) != 8)
        return "weights are not int8";
    if (llmc_node_attr_int(g, node, "quant_coef", 16) != 16)
        return "weights keep the file's float32 scales and zero points (NPU subgraphs take binary16 scales)";
    if (static_quantizer(g, node) < 0)
        return "x is not quantized per tensor (no static scale: compile with --calibrate)";
    const llmc_shape *x = &g->values[n->inputs[0]].shape;
    int64_t k = x->rank > 0 ? x->dims[x->rank - 1].c : 0;
    if (llmc_node_attr_int(g, node, "quant_group", 0) < k)
        return "weights have a scale per group, not per output channel (--group-size 0)";
    if (n->n_outputs > MAX_SUBGRAPH_OP_OUTPUTS)
        return "more outputs than a subgraph op has";
    if (!operands_ok(g, n, true, false))
        return "a tensor depends on P or is not in row form";
    return NULL;
}

/* What a node of each op the pass considers needs besides operands_ok. */
typedef enum {
    ROWS,        /* nothing (LayerNormalization: one output, no Mean and InvStdDev) */
    ELEMENTWISE, /* elementwise_ok */
    LINEAR,      /* linear_refusal: none */
    QUANTIZER    /* quantizer_ok, once the Linears are marked */
} npu_rule;

/* The ops the pass considers, with the plan op codegen lowers each to
 * (ir/llmc_ops.h, compiler/codegen/lower.c). */
typedef struct {
    bool onnx; /* the ONNX domain, else llmc's */
    const char *op_type;
    int plan_op;
    npu_rule rule;
} npu_candidate;

static const npu_candidate candidates[] = {
    {false, "RMSNorm", LLMC_RT_OP_RMSNorm, ROWS},
    {true, "LayerNormalization", LLMC_RT_OP_LayerNorm, ROWS},
    {false, "SwiGLU", LLMC_RT_OP_Binary, ROWS},
    {false, "Silu", LLMC_RT_OP_Unary, ROWS},
    {false, "Gelu", LLMC_RT_OP_Unary, ROWS},
    {true, "Add", LLMC_RT_OP_Binary, ELEMENTWISE},
    {true, "Sub", LLMC_RT_OP_Binary, ELEMENTWISE},
    {true, "Mul", LLMC_RT_OP_Binary, ELEMENTWISE},
    {true, "Div", LLMC_RT_OP_Binary, ELEMENTWISE},
    {false, "Linear", LLMC_RT_OP_Linear, LINEAR},
    {false, "QuantizeRows", LLMC_RT_OP_QuantizeRows, QUANTIZER},
};

/* Node n's entry when it is a live op of the list whose plan op a subgraph
 * may hold, else NULL. */
static const npu_candidate *candidate_of(const llmc_node *n)
{
    for (size_t i = 0; !n->dead && i < sizeof candidates / sizeof candidates[0]; i++) {
        const npu_candidate *c = &candidates[i];
        if ((c->onnx ? llmc_is_onnx_op(n, c->op_type) : llmc_is_op(n, c->op_type)) &&
            llmc_rt_op_npu(c->plan_op))
            return c;
    }
    return NULL;
}

/* Marks float ops and Linears; QuantizeRows next, from their readers. */
static bool candidate(const llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *n = &g->nodes[node];
    const npu_candidate *c = candidate_of(n);
    if (!c)
        return false;
    switch (c->rule) {
    case ROWS:
        return (c->plan_op != LLMC_RT_OP_LayerNorm || n->n_outputs == 1) &&
               operands_ok(g, n, false, false);
    case ELEMENTWISE: return elementwise_ok(g, n) && operands_ok(g, n, false, false);
    case LINEAR: {
        const char *why = linear_refusal(g, node);
        if (why)
            llmc_pass_explain(ctx, PASS, g, node, "stays on the CPU: %s", why);
        return !why;
    }
    case QUANTIZER: return false;
    }
    return false;
}

/* A static QuantizeRows all of whose readers are marked Linears. */
static bool quantizer_ok(const llmc_graph *g, const bool *marked, int node)
{
    const llmc_node *n = &g->nodes[node];
    const npu_candidate *c = candidate_of(n);
    if (!c || c->rule != QUANTIZER || !(llmc_node_attr_float(g, node, "scale", 0.0f) > 0.0f) ||
        n->n_outputs != 1 || !operands_ok(g, n, false, true))
        return false;
    int xq = n->outputs[0], readers = 0;
    if (g->values[xq].is_graph_output)
        return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const llmc_node *r = &g->nodes[i];
        for (int k = 0; !r->dead && k < r->n_inputs; k++)
            if (r->inputs[k] == xq) {
                if (!marked[i] || k != 0 || !llmc_is_op(r, "Linear"))
                    return false;
                readers++;
            }
    }
    return readers > 0;
}

static int run_npu_partition(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    if (!ctx->npu_chunk)
        return LLMC_OK;
    bool *marked = calloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1), sizeof *marked);
    if (!marked)
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
    int linears = 0, all_linears = 0, total = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        marked[i] = candidate(g, ctx, i);
        all_linears += !g->nodes[i].dead && llmc_is_op(&g->nodes[i], "Linear");
        linears += marked[i] && llmc_is_op(&g->nodes[i], "Linear");
    }
    for (int i = 0; i < g->n_nodes; i++)
        marked[i] = marked[i] || quantizer_ok(g, marked, i);
    for (int i = 0; i < g->n_nodes; i++) /* a reader of its int8 x is not a Linear here */
        if (marked[i] && llmc_is_op(&g->nodes[i], "Linear") && !marked[static_quantizer(g, i)]) {
            marked[i] = false;
            linears--;
            llmc_pass_explain(ctx, PASS, g, i, "stays on the CPU: its QuantizeRows feeds "
                              "another reader that does");
        }
    int rc = LLMC_OK;
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        if (!marked[i])
            continue;
        total++;
        if (llmc_node_set_int(g, i, "npu_chunk", ctx->npu_chunk))
            rc = llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
    }
    free(marked);
    llmc_pass_detail(ctx, "%d nodes for the NPU in chunks of %u tokens (%d of %d Linears)", total,
                     ctx->npu_chunk, linears, all_linears);
    return rc;
}

const llmc_pass llmc_pass_npu_partition = {"npu-partition", run_npu_partition};
