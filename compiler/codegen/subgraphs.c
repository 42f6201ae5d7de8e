/* NPU chunk subgraphs (llmc.plan.Subgraph): every maximal run of
 * consecutive ops lowered from nodes npu-partition marked is one subgraph.
 * Its inputs are the tensors its ops read before an op of the run wrote
 * them (weights aside: the delegate reads those from the plan), its outputs
 * the tensors its ops write that a later op or a graph output reads: what
 * a chunked prefill hands a delegate, and what comes back. */
#include <stdlib.h>

#include "plan_model.h"

static int push_unique(uint32_t **list, int *n, uint32_t t)
{
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == t)
            return 0;
    uint32_t *grown = realloc(*list, sizeof *grown * (size_t)(*n + 1));
    if (!grown)
        return -1;
    grown[(*n)++] = t;
    *list = grown;
    return 0;
}

static bool op_writes(const cg_op *op, uint32_t t)
{
    for (int k = 0; k < op->n_outputs; k++)
        if (op->outputs[k] == t)
            return true;
    return false;
}

bool cg_op_reads(const cg_op *op, uint32_t t)
{
    for (int k = 0; k < op->n_inputs; k++)
        if (op->inputs[k] == t)
            return true;
    for (int r = 0; r < op->n_regions; r++)
        if (op->regions[r].src == t)
            return true;
    return false;
}

static bool written_in(const cg_plan *p, int first, int end, uint32_t t)
{
    for (int i = first; i < end; i++)
        if (op_writes(&p->ops[i], t))
            return true;
    return false;
}

/* Read by an op at or after `from`, or a graph output. */
static bool read_after(const cg_plan *p, int from, uint32_t t)
{
    for (int i = 0; i < p->n_outputs; i++)
        if (p->outputs[i].tensor == t)
            return true;
    for (int i = from; i < p->n_ops; i++)
        if (cg_op_reads(&p->ops[i], t))
            return true;
    return false;
}

static int list_boundary(const cg_plan *p, cg_subgraph *sg)
{
    int end = sg->first_op + sg->n_ops;
    for (int i = sg->first_op; i < end; i++) {
        const cg_op *op = &p->ops[i];
        for (int k = 0; k < op->n_inputs; k++) {
            uint32_t t = op->inputs[k];
            if (!p->tensors[t].is_weight && !written_in(p, sg->first_op, i, t) &&
                push_unique(&sg->inputs, &sg->n_inputs, t))
                return -1;
        }
        for (int k = 0; k < op->n_outputs; k++)
            if (read_after(p, end, op->outputs[k]) &&
                push_unique(&sg->outputs, &sg->n_outputs, op->outputs[k]))
                return -1;
    }
    return 0;
}

/* The op that writes t, or -1. */
static int writer_of(const cg_plan *p, uint32_t t)
{
    for (int i = 0; i < p->n_ops; i++)
        if (op_writes(&p->ops[i], t))
            return i;
    return -1;
}

/* The delegate keeps int8 activations to itself: when one crosses a
 * boundary (a CPU op fell between a QuantizeRows and its Linears in plan
 * order, e.g. phi's parallel attention and MLP), the QuantizeRows and
 * every reader of its output go back to the CPU.  True when one did. */
static bool unmark_crossing(cg_plan *p, const uint32_t *list, int n)
{
    bool moved = false;
    for (int k = 0; k < n; k++) {
        if (p->tensors[list[k]].layout != LLMC_RT_LAYOUT_QActTiles)
            continue;
        int w = writer_of(p, list[k]);
        if (w >= 0)
            p->ops[w].npu = false;
        for (int i = 0; i < p->n_ops; i++)
            if (cg_op_reads(&p->ops[i], list[k]))
                p->ops[i].npu = false;
        moved = true;
    }
    return moved;
}

static void free_subgraphs(cg_plan *p)
{
    for (int i = 0; i < p->n_subgraphs; i++) {
        free(p->subgraphs[i].inputs);
        free(p->subgraphs[i].outputs);
    }
    free(p->subgraphs);
    p->subgraphs = NULL;
    p->n_subgraphs = 0;
}

static int add_subgraph(cg_plan *p, int first, int end, llmc_error *err)
{
    cg_subgraph *grown = realloc(p->subgraphs, sizeof *grown * (size_t)(p->n_subgraphs + 1));
    if (!grown)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory grouping subgraphs");
    p->subgraphs = grown;
    cg_subgraph *sg = &grown[p->n_subgraphs++];
    *sg = (cg_subgraph){.first_op = first, .n_ops = end - first};
    if (list_boundary(p, sg))
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory grouping subgraphs");
    return LLMC_OK;
}

static int group_runs(cg_plan *p, llmc_error *err)
{
    int rc = LLMC_OK;
    for (int i = 0; i < p->n_ops && !rc;) {
        if (!p->ops[i].npu) {
            i++;
            continue;
        }
        int end = i;
        while (end < p->n_ops && p->ops[end].npu)
            end++;
        rc = add_subgraph(p, i, end, err);
        i = end;
    }
    return rc;
}

int cg_group_subgraphs(cg_plan *p, llmc_error *err)
{
    for (;;) { /* every round moves at least one op to the CPU: it ends */
        int rc = group_runs(p, err);
        bool moved = false;
        for (int g = 0; !rc && g < p->n_subgraphs; g++) {
            const cg_subgraph *sg = &p->subgraphs[g];
            moved = unmark_crossing(p, sg->inputs, sg->n_inputs) || moved;
            moved = unmark_crossing(p, sg->outputs, sg->n_outputs) || moved;
        }
        if (rc || !moved)
            return rc;
        free_subgraphs(p);
    }
}
