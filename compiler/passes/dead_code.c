/* dead-code: erases nodes whose outputs nobody reads, then drops constants
 * nobody reads, and graph inputs nobody reads whose contents the runtime
 * synthesizes by contract (attention_mask, position_ids: once attention is
 * fused, nothing may read them, and feeding them would cost O(P) per step).
 *
 * A worklist over use counts, so a chain of any length dies in O(nodes)
 * without recursion: erasing a node releases its inputs, and a producer
 * whose defined outputs all reach zero uses is erased next.  Outputs a node
 * no longer defines (constant folding gave them to a constant or to another
 * node) do not keep it alive. */
#include <stdlib.h>

#include "ir/io_roles.h"
#include "pass.h"

/* Uses of every value by live nodes and graph outputs. */
static int *count_uses(const llmc_graph *g)
{
    int *uses = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!uses)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                uses[g->nodes[i].inputs[k]]++;
    for (int k = 0; k < g->n_outputs; k++)
        uses[g->outputs[k]]++;
    return uses;
}

static bool node_is_unused(const llmc_graph *g, const int *uses, int i)
{
    const llmc_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v >= 0 && g->values[v].producer == i && uses[v] > 0)
            return false;
    }
    return true;
}

static int erase_unused_nodes(llmc_graph *g, int *uses)
{
    int *work = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int top = 0;
    if (!work)
        return -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && node_is_unused(g, uses, i))
            work[top++] = i;
    /* Each node is pushed at most once: when it becomes unused, and it can
     * only become unused after it was found used, or be found at the start. */
    while (top > 0) {
        int i = work[--top];
        const llmc_node *n = &g->nodes[i];
        llmc_graph_erase_node(g, i);
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || --uses[v] > 0)
                continue;
            int p = g->values[v].producer;
            if (p >= 0 && !g->nodes[p].dead && node_is_unused(g, uses, p))
                work[top++] = p;
        }
    }
    free(work);
    return 0;
}

/* An unread constant loses its bytes (llmc_graph_drop_const). */
static void drop_unused_constants(llmc_graph *g, const int *uses)
{
    for (int v = 0; v < g->n_values; v++) {
        const llmc_value *val = &g->values[v];
        if (val->is_const && uses[v] == 0 && !val->is_graph_input && !val->is_graph_output)
            llmc_graph_drop_const(g, v);
    }
}

static bool is_synthesized_input(const llmc_value *val)
{
    int layer, role = llmc_io_role(val->name, 0, &layer);
    return role == LLMC_ROLE_ATTENTION_MASK || role == LLMC_ROLE_POSITION_IDS;
}

static void drop_unused_synthesized_inputs(llmc_graph *g, const int *uses)
{
    int kept = 0;
    for (int k = 0; k < g->n_inputs; k++) {
        llmc_value *val = &g->values[g->inputs[k]];
        if (uses[g->inputs[k]] == 0 && is_synthesized_input(val))
            val->is_graph_input = false;
        else
            g->inputs[kept++] = g->inputs[k];
    }
    g->n_inputs = kept;
}

static int run_dead_code(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    (void)ctx;
    int *uses = count_uses(g);
    if (!uses || erase_unused_nodes(g, uses)) {
        free(uses);
        return llmc_fail(err, LLMC_E_NOMEM, "dead-code: out of memory");
    }
    drop_unused_constants(g, uses);
    drop_unused_synthesized_inputs(g, uses);
    free(uses);
    return LLMC_OK;
}

const llmc_pass llmc_pass_dead_code = {"dead-code", run_dead_code};
