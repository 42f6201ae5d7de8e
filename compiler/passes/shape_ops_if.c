/* Shape of the importer's If (onnx/onnx_if.h): inputs [cond, then
 * outputs..., else outputs...].  The plan's bounds must decide the
 * condition; the outputs then take the selected branch's types, shapes and
 * contents.  An undecided condition is refused with the largest
 * --max-context that decides it when a comparison of known operands
 * computes it (value ranges: symbolic.h). */
#include "shape_ops.h"

#include <stdio.h>

#include "ir/ir_dump.h"

/* The largest max_context in [1, m) at which comparison node `p` is
 * decided, with its value there; 0 when none or when `p` is no comparison
 * of one-element operands of known contents.  Decided at m means decided
 * at every smaller bound (the bounded region only shrinks). */
static uint32_t deciding_bound(const infer *c, int p, bool *value)
{
    const llmc_node *n = &c->g->nodes[p];
    llmc_affine a, b;
    if (n->n_inputs != 2 || llmc_value_ints(c->g, n->inputs[0], &a, 1) != 1 ||
        llmc_value_ints(c->g, n->inputs[1], &b, 1) != 1)
        return 0;
    llmc_op op = llmc_node_op(n);
    uint32_t lo = 0, hi = c->max_context;     /* decided at lo (0: none yet), not at hi */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (infer_compare_decided(op, a, b, mid, value))
            lo = mid;
        else
            hi = mid;
    }
    return lo && infer_compare_decided(op, a, b, lo, value) ? lo : 0;
}

static int undecided(const infer *c)
{
    const llmc_value *cond = input(c, 0);
    int p = cond->producer;
    bool value = false;
    uint32_t bound = p >= 0 && c->max_context > 1 ? deciding_bound(c, p, &value) : 0;
    char what[400] = "";
    if (p >= 0) {
        const llmc_node *n = &c->g->nodes[p];
        llmc_affine a, b;
        char sa[96], sb[96];
        if (n->n_inputs == 2 && llmc_value_ints(c->g, n->inputs[0], &a, 1) == 1 &&
            llmc_value_ints(c->g, n->inputs[1], &b, 1) == 1)
            snprintf(what, sizeof what, " = %s(%s, %s) of node '%.100s'", n->op_type, aff_str(a, sa),
                     aff_str(b, sb), n->name);
        else
            snprintf(what, sizeof what, ", computed from data by node '%.100s' (%s),", n->name, n->op_type);
    }
    if (bound)
        return infer_fail(c, LLMC_E_UNSUPPORTED,
                          "If on condition '%s'%s: it is %s up to a total length of %u and %s beyond, and "
                          "--max-context %u reaches both; compile with --max-context <= %u (the %s branch)",
                          cond->name, what, value ? "true" : "false", bound, value ? "false" : "true",
                          c->max_context, bound, value ? "then" : "else");
    return infer_fail(c, LLMC_E_UNSUPPORTED,
                      "If on condition '%s'%s: the plan's bounds (1 <= S, 0 <= P, S + P <= max_context %u) do "
                      "not decide it, and a plan holds one branch",
                      cond->name, what, c->max_context);
}

int infer_if(infer *c)
{
    int k = c->n->n_outputs;
    if (c->n->n_inputs != 1 + 2 * k)
        return infer_fail(c, LLMC_E_INPUT, "an If of %d outputs reads its condition and %d branch outputs, not %d "
                          "inputs", k, 2 * k, c->n->n_inputs);
    const llmc_value *cond = input(c, 0);
    int64_t numel;
    if (cond->dtype != LLMC_DT_BOOL || !llmc_shape_numel_const(&cond->shape, &numel) || numel != 1)
        return infer_fail(c, LLMC_E_INPUT, "the condition '%s' is not one bool", cond->name);
    for (int j = 0; j < k; j++) {
        const llmc_value *t = input(c, 1 + j), *e = input(c, 1 + k + j);
        if (!t || !e || t->dtype != e->dtype)
            return infer_fail(c, LLMC_E_INPUT, "output %d: the branches' element types differ", j);
    }
    llmc_affine v;
    if (llmc_value_ints(c->g, input_id(c, 0), &v, 1) != 1 || !llmc_aff_is_const(v))
        return undecided(c);
    int from = v.c ? 1 : 1 + k;
    for (int j = 0; j < k; j++) {
        const llmc_value *b = input(c, from + j);
        infer_set_output(c, j, b->dtype, &b->shape);
        if (b->n_sym > 0)
            infer_set_output_sym(c, j, b->sym, b->n_sym);
    }
    return LLMC_OK;
}
