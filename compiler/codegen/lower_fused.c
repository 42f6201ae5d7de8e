/* Lowerers of the llmc-domain fused ops (compiler/ir/llmc_ops.h) but
 * Symbols, QuantizeRows and ShadowLinear, and of ONNX Gelu. */
#include "lower_ops.h"

#include <math.h>
#include <string.h>

#include "ir/llmc_ops.h"
#include "lower_ctx.h"
#include "lower_linear_weights.h"

/* Gelu: INT tanh selects the tanh approximation. */
int lower_gelu(lower_ctx *L, int kind)
{
    (void)kind;
    bool tanh_form = llmc_node_attr_int(L->g, L->node, "tanh", 0) != 0;
    return lower_unary(L, tanh_form ? LLMC_RT_UNARY_GeluTanh : LLMC_RT_UNARY_Gelu);
}

/* ONNX Gelu (opset 20): STRING approximate "none" (erf) or "tanh", the same
 * two kernels as llmc.Gelu. */
int lower_onnx_gelu(lower_ctx *L, int kind)
{
    (void)kind;
    if (cur_node(L)->opset < 20)
        return lower_fail(L, LLMC_E_INPUT, -1, "Gelu is an operator of opset 20 and later, the node's is %d",
                          cur_node(L)->opset);
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "approximate");
    const char *form = a && a->type == LLMC_ATTR_STRING && a->s ? a->s : "none";
    if (strcmp(form, "none") == 0)
        return lower_unary(L, LLMC_RT_UNARY_Gelu);
    if (strcmp(form, "tanh") == 0)
        return lower_unary(L, LLMC_RT_UNARY_GeluTanh);
    return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "approximate '%.64s' is not 'none' or 'tanh'", form);
}

int lower_rmsnorm(lower_ctx *L, int kind)
{
    const llmc_node *n = &L->g->nodes[L->node];
    int rc = lower_emit_simple(L, LLMC_RT_OP_RMSNorm, kind, n->n_inputs > 2 && n->inputs[2] >= 0 ? 3 : 2);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].epsilon = llmc_node_attr_float(L->g, L->node, "epsilon", 1e-5f);
    return rc;
}

int lower_rope(lower_ctx *L, int kind)
{
    int64_t rotary_dim = llmc_node_attr_int(L->g, L->node, "rotary_dim", 0);
    const llmc_shape *x = &node_in_value(L, 0)->shape;
    if (rotary_dim <= 0 || rotary_dim % 2 || x->rank < 2 ||
        !llmc_aff_is_const(x->dims[x->rank - 1]) || rotary_dim > x->dims[x->rank - 1].c)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "rotary_dim %lld must be even, > 0 and "
                          "at most the constant last dim of x [..., S, D]", (long long)rotary_dim);
    int rc = lower_emit_simple(L, LLMC_RT_OP_Rope, kind, 3);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].rotary_dim = (int32_t)rotary_dim;
    return rc;
}

/* Checks W (a float32 constant [K, N]) against x [..., K] and the outputs,
 * whose last dims must add up to N. */
static int check_linear(lower_ctx *L, int wv)
{
    const llmc_value *w = &L->g->values[wv];
    const llmc_shape *x = &node_in_value(L, 0)->shape;
    bool from_file = lower_file_dequantize(L->g, wv) >= 0 && w->shape.rank == 2 && shape_is_const(&w->shape);
    if (!from_file && (!w->is_const || w->dtype != LLMC_DT_FLOAT || w->shape.rank != 2 ||
                       !shape_is_const(&w->shape) || const_elems(&w->shape) * sizeof(float) != w->konst.nbytes))
        return lower_fail(L, LLMC_E_UNSUPPORTED, wv, "W must be a float32 constant [K, N]");
    if (x->rank < 1 || !llmc_aff_eq(x->dims[x->rank - 1], w->shape.dims[0]))
        return lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, 0), "must be [..., K] with K = %lld",
                          (long long)w->shape.dims[0].c);
    int64_t sum = 0;
    for (int j = 0; j < cur_node(L)->n_outputs; j++) {
        int v = node_out(L, j);
        const llmc_shape *y = v >= 0 ? &L->g->values[v].shape : NULL;
        if (!y || y->rank != x->rank || !llmc_aff_is_const(y->dims[y->rank - 1]))
            return lower_fail(L, LLMC_E_UNSUPPORTED, v, "output %d must have x's rank and a "
                              "constant last dim", j);
        sum += y->dims[y->rank - 1].c;
    }
    if (sum != w->shape.dims[1].c)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "output last dims add up to %lld; W has "
                          "N = %lld columns", (long long)sum, (long long)w->shape.dims[1].c);
    if (node_in(L, 3) >= 0 && cur_node(L)->n_outputs != 1)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "a residual needs exactly one output");
    return LLMC_OK;
}

/* Linear(x, W, bias?, residual?) -> y_0..: kind bit 0 = bias, bit 1 = residual. */
int lower_linear(lower_ctx *L, int kind)
{
    (void)kind;
    int wv = node_in(L, 1);
    uint32_t in[4];
    int n_in = 2;
    uint8_t bits = 0;
    if (wv < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "input 1 (W) is missing");
    int rc = check_linear(L, wv);
    if (!rc)
        rc = lower_input(L, 0, &in[0]);
    if (!rc)
        rc = lower_linear_weight(L, wv, &in[1]);
    for (int k = 2; k <= 3 && !rc; k++)
        if (node_in(L, k) >= 0) {
            bits |= (uint8_t)(1u << (k - 2));
            rc = lower_input(L, k, &in[n_in++]);
        }
    if (rc)
        return rc;
    cg_op *op = lower_emit(L, LLMC_RT_OP_Linear);
    if (!op)
        return L->err->code;
    op->kind = bits;
    for (int k = 0; k < n_in && !rc; k++)
        rc = op_add_input(L, op, in[k]);
    for (int j = 0; j < cur_node(L)->n_outputs && !rc; j++) {
        uint32_t y;
        rc = lower_output(L, j, &y);
        if (!rc)
            rc = op_add_output(L, op, y);
    }
    return rc;
}

static int live_llmc_ops(const llmc_graph *g, const char *op_type)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].dead && llmc_is_op(&g->nodes[i], op_type);
    return n;
}

/* The norm weights q_norm, k_norm (inputs from `first` on): float
 * [head_dim] both (per head) or [heads*head_dim] and [kv_heads*head_dim]
 * (whole rows). */
static int check_head_norms(lower_ctx *L, int first, int64_t heads, int64_t kv_heads, int64_t head_dim)
{
    const int64_t whole[2] = {heads * head_dim, kv_heads * head_dim};
    bool per_head = true, rows = true;
    for (int k = 0; k < 2; k++) {
        const llmc_value *w = node_in_value(L, first + k);
        if (w->dtype != LLMC_DT_FLOAT || w->shape.rank != 1)
            per_head = rows = false;
        per_head = per_head && llmc_aff_eq(w->shape.dims[0], llmc_aff_const(head_dim));
        rows = rows && llmc_aff_eq(w->shape.dims[0], llmc_aff_const(whole[k]));
    }
    if (!per_head && !rows)
        return lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, first), "the norm weights must be float [head_dim "
                          "%lld] both or [heads*head_dim %lld] and [kv_heads*head_dim %lld]",
                          (long long)head_dim, (long long)whole[0], (long long)whole[1]);
    return LLMC_OK;
}

/* llmc.Attention(q, k, v, cos?, sin?, q_norm?, k_norm?): the attributes
 * become op fields; cos, sin and the norm weights, constants, become
 * Weight tensors.  kv_heads defaults to heads, scale to 1/sqrt(head_dim),
 * cache, window and softcap to 0 (none). */
int lower_attention(lower_ctx *L, int kind)
{
    (void)kind;
    const llmc_graph *g = L->g;
    int node = L->node, n_caches = live_llmc_ops(g, "Attention");
    int64_t heads = llmc_node_attr_int(g, node, "heads", 0);
    int64_t kv_heads = llmc_node_attr_int(g, node, "kv_heads", heads);
    int64_t head_dim = llmc_node_attr_int(g, node, "head_dim", 0);
    int64_t rotary_dim = llmc_node_attr_int(g, node, "rotary_dim", 0);
    int64_t cache = llmc_node_attr_int(g, node, "cache", 0);
    float scale = llmc_node_attr_float(g, node, "scale", head_dim > 0 ? 1.0f / sqrtf((float)head_dim) : 1.0f);
    int64_t window = llmc_node_attr_int(g, node, "window", 0);
    float softcap = llmc_node_attr_float(g, node, "softcap", 0.0f);
    int n_in = rotary_dim > 0 ? 5 : 3;
    bool norms = cur_node(L)->n_inputs == n_in + 2;
    if (!norms && cur_node(L)->n_inputs != n_in)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "%d inputs; rotary_dim %lld needs %d, or %d with head norms",
                          cur_node(L)->n_inputs, (long long)rotary_dim, n_in, n_in + 2);
    if (heads < 1 || kv_heads < 1 || heads % kv_heads || head_dim < 1 || heads * head_dim > INT32_MAX ||
        rotary_dim < 0 || rotary_dim % 2 || rotary_dim > head_dim)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "heads %lld, kv_heads %lld, head_dim %lld, rotary_dim "
                          "%lld: need kv_heads | heads and an even rotary_dim <= head_dim",
                          (long long)heads, (long long)kv_heads, (long long)head_dim, (long long)rotary_dim);
    if (cache < 0 || cache >= n_caches)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "cache %lld outside [0, %d Attention ops)",
                          (long long)cache, n_caches);
    if (!isfinite(scale))
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "scale is not finite");
    if (window < 0 || window > UINT32_MAX || !(softcap >= 0.0f && isfinite(softcap)))
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "window %lld must be in [0, 2^32) and softcap %g "
                          "finite >= 0", (long long)window, (double)softcap);
    int rc = norms ? check_head_norms(L, n_in, heads, kv_heads, head_dim) : LLMC_OK;
    n_in += norms ? 2 : 0;
    uint32_t in[7], out;
    for (int k = 0; k < n_in && !rc; k++)
        rc = lower_input(L, k, &in[k]);
    if (!rc)
        rc = lower_output(L, 0, &out);
    cg_op *op = rc ? NULL : lower_emit(L, LLMC_RT_OP_Attention);
    if (!op)
        return rc ? rc : L->err->code;
    op->heads = (int32_t)heads;
    op->kv_heads = (int32_t)kv_heads;
    op->head_dim = (int32_t)head_dim;
    op->rotary_dim = (int32_t)rotary_dim;
    op->scale = scale;
    op->epsilon = norms ? llmc_node_attr_float(g, node, "epsilon", 1e-5f) : 0.0f;
    op->cache = (uint32_t)cache;
    op->window = (uint32_t)window;
    op->softcap = softcap;
    for (int k = 0; k < n_in && !rc; k++)
        rc = op_add_input(L, op, in[k]);
    return rc ? rc : op_add_output(L, op, out);
}
