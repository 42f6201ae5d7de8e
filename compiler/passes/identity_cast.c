/* identity-cast: a Cast to the dtype its input already has computes nothing,
 * so it is removed and its readers read the input.  Exporters leave many:
 * transformers' `softmax(dtype=torch.float32).to(query.dtype)`, Phi's
 * `.to(torch.float32)` on q and k, RMSNorm's float32 round trip, and every
 * `.to(dtype)` of a model exported in float32 (or widened to it from
 * float16 at import).  Run before the fusions, so they match one form.
 *
 * Preconditions: a default-domain Cast with one input whose dtype equals
 * its `to`, and an output of that same dtype and shape.  When the Cast's
 * output is a graph output (transformers' `present.N.key` produced through
 * a Cast), the input takes over the output's ONNX name, because roles are
 * bound by name; that needs an input that is not itself a graph input,
 * graph output or constant (those keep their names), else the Cast stays. */
#include <stdlib.h>

#include "ir/llmc_ops.h"
#include "pass.h"
#include "pass_list.h"

static const char PASS[] = "identity-cast";

static bool is_identity_cast(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (!llmc_is_onnx_op(n, "Cast") || n->n_inputs != 1 || n->n_outputs != 1 || n->inputs[0] < 0 ||
        n->outputs[0] < 0)
        return false;
    const llmc_value *x = &g->values[n->inputs[0]], *y = &g->values[n->outputs[0]];
    return x->dtype != LLMC_DT_UNDEFINED && llmc_node_attr_int(g, node, "to", 0) == x->dtype &&
           y->dtype == x->dtype && llmc_shape_eq(&x->shape, &y->shape);
}

/* The graph output y is computed by an identity Cast of x: x gets y's name
 * (the names swap, so every name stays unique). */
static bool take_output_name(llmc_graph *g, int x, int y)
{
    llmc_value *in = &g->values[x];
    if (in->is_graph_input || in->is_graph_output || in->is_const)
        return false;
    char *name = in->name;
    in->name = g->values[y].name;
    g->values[y].name = name;
    return true;
}

static int remove_cast(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    int x = g->nodes[node].inputs[0], y = g->nodes[node].outputs[0];
    if (g->values[y].is_graph_output && !take_output_name(g, x, y)) {
        llmc_pass_explain(ctx, PASS, g, node, "its input '%s' is a graph input, output or constant, and "
                          "output '%s' keeps its name", g->values[x].name, g->values[y].name);
        return 0;
    }
    llmc_graph_replace_value(g, y, x);
    llmc_graph_erase_node(g, node);
    return 1;
}

static int run_identity_cast(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    (void)err;
    int removed = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && is_identity_cast(g, i))
            removed += remove_cast(g, ctx, i);
    llmc_pass_detail(ctx, "%d removed", removed);
    return LLMC_OK;
}

const llmc_pass llmc_pass_identity_cast = {"identity-cast", run_identity_cast};
