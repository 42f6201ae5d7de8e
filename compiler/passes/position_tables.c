/* Position tables of a model (position_tables.h). */
#include "position_tables.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ir/io_roles.h"
#include "ir/llmc_ops.h"

/* The constant under v through Casts and Slices (a `cos_cached[:seq_len]`
 * keeps the table's rows as its bound), or -1. */
static int table_under(const llmc_graph *g, int v)
{
    while (v >= 0 && !g->values[v].is_const && g->values[v].producer >= 0) {
        const llmc_node *p = &g->nodes[g->values[v].producer];
        if (!(llmc_is_onnx_op(p, "Cast") || llmc_is_onnx_op(p, "Slice")) || p->n_inputs < 1)
            return -1;
        v = p->inputs[0];
    }
    return v >= 0 && g->values[v].is_const ? v : -1;
}

static bool is_float_matrix(const llmc_value *t)
{
    bool floating = t->dtype == LLMC_DT_FLOAT || t->dtype == LLMC_DT_FLOAT16 || t->dtype == LLMC_DT_BFLOAT16 ||
                    t->dtype == LLMC_DT_DOUBLE;
    return floating && t->shape.rank == 2 && llmc_aff_is_const(t->shape.dims[0]) && t->shape.dims[0].c > 0;
}

/* Are the values of v computed only from position_ids, attention_mask,
 * constants and shapes?  A walk over producers (Shape reads no values);
 * seen[] marks values already walked. */
static bool positions_only(const llmc_graph *g, int v, char *seen)
{
    int *stack = malloc(sizeof(int) * (size_t)g->n_values), n = 0, layer;
    bool ok = stack != NULL;
    if (ok && !seen[v])
        stack[n++] = v, seen[v] = 1;
    while (ok && n > 0) {
        const llmc_value *x = &g->values[stack[--n]];
        if (x->is_graph_input) {
            int role = llmc_io_role(x->name, 0, &layer);
            ok = role == LLMC_ROLE_POSITION_IDS || role == LLMC_ROLE_ATTENTION_MASK;
            continue;
        }
        if (x->is_const || x->producer < 0 || llmc_is_onnx_op(&g->nodes[x->producer], "Shape"))
            continue;
        const llmc_node *p = &g->nodes[x->producer];
        for (int k = 0; k < p->n_inputs; k++)
            if (p->inputs[k] >= 0 && !seen[p->inputs[k]])
                stack[n++] = p->inputs[k], seen[p->inputs[k]] = 1;
    }
    free(stack);
    return ok;
}

void llmc_position_tables(const llmc_graph *g, llmc_position_limit *out)
{
    *out = (llmc_position_limit){.rows = 0, .table = -1, .gather = -1};
    char *seen = calloc((size_t)g->n_values + 1, 1);
    for (int i = 0; seen && i < g->n_nodes; i++) {
        const llmc_node *n = &g->nodes[i];
        if (n->dead || !llmc_is_onnx_op(n, "Gather") || n->n_inputs != 2 || n->inputs[1] < 0 ||
            llmc_node_attr_int(g, i, "axis", 0) != 0)
            continue;
        int t = table_under(g, n->inputs[0]);
        if (t < 0 || !is_float_matrix(&g->values[t]))
            continue;
        memset(seen, 0, (size_t)g->n_values);
        int64_t rows = g->values[t].shape.dims[0].c;
        if (positions_only(g, n->inputs[1], seen) && (out->rows == 0 || rows < out->rows))
            *out = (llmc_position_limit){.rows = rows, .table = t, .gather = i};
    }
    free(seen);
}
