/* Lowering: every live node becomes one or more plan ops, through the
 * lowerer its row of the op list names (ir/op_list.h); graph inputs and
 * outputs become bound Arena tensors.  The lowerers are in lower_compute.c,
 * lower_layout.c (regions), lower_constant.c, lower_fused.c and
 * lower_linear_weights.c, all on the context of lower_ctx.c. */
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "ir/io_roles.h"
#include "ir/op_list.h"
#include "kernels/kernels.h"
#include "lower_ctx.h"
#include "lower_ops.h"

/* ---- dispatch ---- */

typedef struct {
    int (*lower)(lower_ctx *L, int kind);
    int kind;
} lowering;

#define LOWERING(op, min_in, max_in, min_out, max_out, lower, kind, shape) {lower, kind},
#define FUSED_LOWERING(op, lower, kind, shape) {lower, kind},
static const lowering lowerings[] = {LLMC_ONNX_OP_LIST(LOWERING) LLMC_FUSED_OP_LIST(FUSED_LOWERING)};
#undef FUSED_LOWERING
#undef LOWERING
_Static_assert(sizeof lowerings / sizeof *lowerings == LLMC_OP_COUNT, "one lowering per op");

const char *cg_llmc_op(int i)
{
    return i >= 0 && i < LLMC_FUSED_OP_COUNT ? llmc_op_name((llmc_op)(LLMC_ONNX_OP_COUNT + i)) : NULL;
}

bool cg_can_lower(const char *op_type)
{
    return llmc_op_of("", op_type) != LLMC_OP_NONE;
}

/* ---- graph inputs and outputs ---- */

static int push_binding(lower_ctx *L, cg_binding **arr, int *n, uint32_t t, int is_output)
{
    cg_binding *a = realloc(*arr, sizeof *a * (size_t)(*n + 1));
    if (!a)
        return lower_out_of_memory(L);
    *arr = a;
    cg_binding *b = &a[(*n)++];
    b->tensor = t;
    b->role = llmc_io_role(L->p->tensors[t].name, is_output, &b->layer);
    return LLMC_OK;
}

static int bind_inputs(lower_ctx *L)
{
    for (int i = 0; i < L->g->n_inputs; i++) {
        int v = L->g->inputs[i];
        uint32_t t;
        int rc = L->tensor_of[v] >= 0 ? LLMC_OK : lower_tensor_from_value(L, v, &t);
        if (!rc)
            rc = push_binding(L, &L->p->inputs, &L->p->n_inputs, (uint32_t)L->tensor_of[v], 0);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* An output that is a constant or a graph input gets its own Arena tensor,
 * filled by a Reshape (a plain copy). */
static int output_tensor(lower_ctx *L, int v, uint32_t *t)
{
    int rc = lower_tensor_of_value(L, v, t);
    if (rc || (!L->g->values[v].is_graph_input && !L->p->tensors[*t].is_weight))
        return rc;
    uint32_t src = *t;
    const cg_tensor s = L->p->tensors[src];
    rc = lower_new_tensor(L, s.name, "", s.dtype, s.rank, s.dims, t);
    if (rc)
        return rc;
    cg_op *op = lower_emit_named(L, LLMC_RT_OP_Reshape, s.name);
    if (!op)
        return L->err->code;
    rc = op_add_input(L, op, src);
    return rc ? rc : op_add_output(L, op, *t);
}

static int bind_outputs(lower_ctx *L)
{
    L->node = -1;
    for (int i = 0; i < L->g->n_outputs; i++) {
        int v = L->g->outputs[i];
        uint32_t t;
        if (L->tensor_of[v] < 0 && !L->g->values[v].is_const)
            return llmc_fail(L->err, LLMC_E_UNSUPPORTED, "graph output '%s' is never computed",
                             L->g->values[v].name);
        int rc = output_tensor(L, v, &t);
        if (!rc)
            rc = push_binding(L, &L->p->outputs, &L->p->n_outputs, t, 1);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* ---- driver ---- */

static bool all_float32(const lower_ctx *L, const cg_op *op)
{
    for (int k = 0; k < op->n_inputs; k++)
        if (L->p->tensors[op->inputs[k]].dtype != LLMC_DT_FLOAT)
            return false;
    for (int k = 0; k < op->n_outputs; k++)
        if (L->p->tensors[op->outputs[k]].dtype != LLMC_DT_FLOAT)
            return false;
    return true;
}

/* The dtypes the runtime's kernels handle (the verifier checks the same at
 * plan open: elementwise, Cast and Reduce by the kernels' tables, MatMul,
 * Softmax and LayerNorm float32 only): a node the importer accepts with
 * other dtypes (Ceil on int8, Gemm on int32) is refused here, at compile
 * time, rather than written into a plan the runtime rejects. */
static int check_kernel_dtypes(lower_ctx *L, const cg_op *op)
{
    const cg_tensor *t = L->p->tensors;
    int x = op->n_inputs > 0 ? t[op->inputs[0]].dtype : 0;
    int b = op->n_inputs > 1 ? t[op->inputs[1]].dtype : 0;
    int y = op->n_outputs > 0 ? t[op->outputs[0]].dtype : 0;
    bool ok = true;
    switch (op->code) {
    case LLMC_RT_OP_Unary: ok = k_unary_supports(op->kind, x, y); break;
    case LLMC_RT_OP_Binary: ok = k_binary_supports(op->kind, x, b, y); break;
    case LLMC_RT_OP_Cast: ok = k_cast_supports(x, y); break;
    case LLMC_RT_OP_Reduce: ok = k_reduce_supports(op->kind, x, y); break;
    case LLMC_RT_OP_MatMul: case LLMC_RT_OP_Softmax: case LLMC_RT_OP_LayerNorm: ok = all_float32(L, op); break;
    case LLMC_RT_OP_ScatterND: ok = k_scatter_nd_supports(op->kind, x); break;
    case LLMC_RT_OP_CumSum: ok = k_cumsum_supports(x); break;
    default: break;
    }
    if (ok)
        return LLMC_OK;
    return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "the runtime has no kernel for it on %s%s%s -> %s",
                      llmc_dtype_name(x), op->n_inputs > 1 ? ", " : "",
                      op->n_inputs > 1 ? llmc_dtype_name(b) : "", llmc_dtype_name(y));
}

static int lower_node(lower_ctx *L)
{
    const llmc_node *n = cur_node(L);
    llmc_op op = llmc_node_op(n);
    if (op == LLMC_OP_NONE)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "op '%s%s%s' has no lowering", n->domain,
                          n->domain[0] ? "." : "", n->op_type);
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && L->g->values[n->outputs[k]].shape.rank < 0)
            return lower_fail(L, LLMC_E_UNSUPPORTED, n->outputs[k], "shape is unknown");
    int first_op = L->p->n_ops;
    int rc = lowerings[op].lower(L, lowerings[op].kind);
    for (int i = first_op; !rc && i < L->p->n_ops; i++)
        rc = check_kernel_dtypes(L, &L->p->ops[i]);
    int64_t chunk = llmc_node_attr_int(L->g, L->node, "npu_chunk", 0);
    for (int i = first_op; !rc && chunk > 0 && i < L->p->n_ops; i++) {
        L->p->ops[i].npu = true;
        L->p->npu_chunk = (uint32_t)chunk;
    }
    return rc;
}

static int lower_nodes(lower_ctx *L)
{
    const llmc_graph *g = L->g;
    int *order = malloc(sizeof *order * (size_t)(g->n_nodes + 1));
    if (!order)
        return lower_out_of_memory(L);
    int cycle = -1;
    int n = llmc_graph_topo_order(g, order, &cycle);
    int rc = LLMC_OK;
    if (n < 0)
        rc = cycle >= 0 ? llmc_fail(L->err, LLMC_E_UNSUPPORTED, "node '%s' (#%d, %s) is on a cycle",
                                    g->nodes[cycle].name, cycle, g->nodes[cycle].op_type)
                        : lower_out_of_memory(L);
    for (int i = 0; i < n && !rc; i++) {
        L->node = order[i];
        rc = lower_node(L);
    }
    free(order);
    return rc;
}

int cg_lower(const llmc_graph *g, const char *target, cg_plan *p, llmc_error *err)
{
    memset(p, 0, sizeof *p);
    lower_ctx L = {.g = g, .p = p, .err = err, .node = -1};
    L.target = rt_target_info_of(rt_target_index(target ? target : "generic"));
    if (!L.target)
        return llmc_fail(err, LLMC_E_USAGE, "target '%s' unknown; llmc knows%s", target,
                         RT_TARGET_NAMES);
    L.tensor_of = malloc(sizeof *L.tensor_of * (size_t)(g->n_values + 1));
    if (!L.tensor_of)
        return lower_out_of_memory(&L);
    for (int v = 0; v < g->n_values; v++)
        L.tensor_of[v] = -1;
    int rc = bind_inputs(&L);
    if (!rc)
        rc = lower_nodes(&L);
    if (!rc)
        rc = bind_outputs(&L);
    if (!rc)
        rc = cg_check_bindings(p, err);
    if (!rc)
        rc = cg_share_weights(p, err);
    if (!rc)
        rc = cg_group_subgraphs(p, err);
    free(L.tensor_of);
    return rc;
}

void cg_op_free(cg_op *op)
{
    free(op->name);
    free(op->inputs);
    free(op->outputs);
    free(op->regions);
    free(op->values);
}

void cg_plan_free(cg_plan *p)
{
    for (int i = 0; i < p->n_tensors; i++) {
        free(p->tensors[i].name);
        free(p->tensors[i].owned);
        llmc_view_unref(p->tensors[i].view);
    }
    for (int i = 0; i < p->n_ops; i++)
        cg_op_free(&p->ops[i]);
    for (int i = 0; i < p->n_subgraphs; i++) {
        free(p->subgraphs[i].inputs);
        free(p->subgraphs[i].outputs);
    }
    free(p->subgraphs);
    free(p->tensors);
    free(p->ops);
    free(p->inputs);
    free(p->outputs);
    memset(p, 0, sizeof *p);
}
