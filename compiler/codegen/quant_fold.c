/* A quantized Linear quantizes its own x: every QuantizeRows that runs on
 * the CPU goes into the Linears that read its activation tiles.
 *
 *   QuantizeRows(x) -> xq;  Linear(xq, W, ...) -> y..
 *     =>  Linear(x, W, ...) -> y.., xq    kind | LINEAR_QUANTIZE, scale
 *
 * The tiles become the Linear's last output, its own workspace (no op reads
 * it), so the memory planner still places them, alive for that op only.
 * When one x feeds several Linears, each quantizes its own copy into a
 * workspace of its own: quantizing a row costs O(K), the product O(K N).
 * What stays: a QuantizeRows in an NPU subgraph (the delegate runs the
 * static-scale QuantizeRows -> Linear pair; subgraphs.c has grouped them
 * already), or one whose tiles another kind of op or a graph output reads.
 * Runs on cg_lower's plan, subgraphs grouped: a pair grouping moved back to
 * the CPU folds too. */
#include <stdlib.h>
#include <string.h>

#include "plan_model.h"

/* A CPU Linear that reads t as x and nowhere else. */
static bool folding_reader(const cg_op *op, uint32_t t)
{
    if (op->code != LLMC_RT_OP_Linear || op->npu || op->n_inputs < 2 || op->inputs[0] != t)
        return false;
    for (int k = 1; k < op->n_inputs; k++)
        if (op->inputs[k] == t)
            return false;
    return op->n_regions == 0;
}

/* QuantizeRows op q runs on the CPU and only such Linears read its tiles. */
static bool foldable(const cg_plan *p, int q)
{
    const cg_op *op = &p->ops[q];
    if (op->code != LLMC_RT_OP_QuantizeRows || op->npu || op->n_inputs != 1 || op->n_outputs != 1)
        return false;
    uint32_t xq = op->outputs[0];
    for (int i = 0; i < p->n_outputs; i++)
        if (p->outputs[i].tensor == xq)
            return false;
    int readers = 0;
    for (int i = 0; i < p->n_ops; i++) {
        if (i == q || !cg_op_reads(&p->ops[i], xq))
            continue;
        if (!folding_reader(&p->ops[i], xq))
            return false;
        readers++;
    }
    return readers > 0;
}

/* A copy of tensor t (an Arena tensor's format and dims) named after it
 * and the op that uses it. */
static int copy_tensor(cg_plan *p, uint32_t t, const char *op_name, uint32_t *out)
{
    if (p->n_tensors == p->cap_tensors) {
        int cap = p->cap_tensors ? 2 * p->cap_tensors : 64;
        cg_tensor *arr = realloc(p->tensors, sizeof *arr * (size_t)cap);
        if (!arr)
            return -1;
        p->tensors = arr;
        p->cap_tensors = cap;
    }
    const cg_tensor *src = &p->tensors[t];
    size_t n = strlen(src->name), m = strlen(op_name);
    char *name = malloc(n + m + 2);
    if (!name)
        return -1;
    memcpy(name, src->name, n);
    name[n] = '/';
    memcpy(name + n + 1, op_name, m + 1);
    cg_tensor *x = &p->tensors[p->n_tensors];
    *x = *src;
    x->name = name;
    *out = (uint32_t)p->n_tensors++;
    return 0;
}

/* Linear `op` reads x and writes its tiles into workspace w. */
static int fold_into(cg_op *op, const cg_op *q, uint32_t w)
{
    uint32_t *outs = realloc(op->outputs, sizeof *outs * (size_t)(op->n_outputs + 1));
    if (!outs)
        return -1;
    outs[op->n_outputs++] = w;
    op->outputs = outs;
    op->inputs[0] = q->inputs[0];
    op->kind |= LINEAR_QUANTIZE;
    op->scale = q->scale;
    return 0;
}

/* Folds QuantizeRows op q into its readers: the first takes q's tensor as
 * its workspace, each other one a copy of it. */
static int fold(cg_plan *p, int q)
{
    uint32_t xq = p->ops[q].outputs[0];
    bool first = true;
    for (int i = q + 1; i < p->n_ops; i++) {
        if (!cg_op_reads(&p->ops[i], xq))
            continue;
        uint32_t w = xq;
        if ((!first && copy_tensor(p, xq, p->ops[i].name, &w)) || fold_into(&p->ops[i], &p->ops[q], w))
            return -1;
        first = false;
    }
    return 0;
}

/* Drops the folded ops (none is in a subgraph: those start earlier by the
 * count of dropped ops before them). */
static void drop_ops(cg_plan *p, const bool *dropped)
{
    for (int s = 0; s < p->n_subgraphs; s++) {
        int before = 0;
        for (int i = 0; i < p->subgraphs[s].first_op; i++)
            before += dropped[i];
        p->subgraphs[s].first_op -= before;
    }
    int n = 0;
    for (int i = 0; i < p->n_ops; i++) {
        if (dropped[i])
            cg_op_free(&p->ops[i]);
        else
            p->ops[n++] = p->ops[i];
    }
    p->n_ops = n;
}

int cg_fold_quantize(cg_plan *p, llmc_error *err)
{
    bool *dropped = calloc((size_t)p->n_ops + 1, sizeof *dropped);
    int rc = dropped ? 0 : -1;
    for (int i = 0; !rc && i < p->n_ops; i++)
        if (foldable(p, i)) {
            rc = fold(p, i);
            dropped[i] = true;
        }
    if (!rc)
        drop_ops(p, dropped);
    free(dropped);
    return rc ? llmc_fail(err, LLMC_E_NOMEM, "out of memory folding QuantizeRows into Linears") : LLMC_OK;
}
