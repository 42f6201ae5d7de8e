/* The expansion step of the importer (contrib_expand.h): the attribute
 * check and the dispatch over LLMC_CONTRIB_OP_LIST to the expanders, which
 * build with contrib_expand.c's calls (so the calls run one way: here ->
 * expanders -> builders). */
#include <stdbool.h>
#include <string.h>

#include "contrib_expand.h"
#include "contrib_ops.h"

typedef int (*expander_fn)(llmc_expand *);

#define CONTRIB_EXPANDER(dom, op, min_in, max_in, min_out, max_out, expander, attrs) expander,
static const expander_fn expanders[] = {LLMC_CONTRIB_OP_LIST(CONTRIB_EXPANDER)};
#undef CONTRIB_EXPANDER

/* Is `name` one of the space-separated words of `list`? */
static bool listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        size_t word = strcspn(p, " ");
        if (word == len && strncmp(p, name, len) == 0)
            return true;
        p += word + (p[word] == ' ');
    }
    return false;
}

static int check_attributes(llmc_expand *e, const llmc_contrib_op_info *info)
{
    const llmc_node *n = &e->g->nodes[e->node];
    for (int i = 0; i < n->n_attrs; i++)
        if (!listed(info->attributes, n->attrs[i].name))
            return ex_fail(e, LLMC_E_UNSUPPORTED, "attribute '%.100s' is not supported (llmc reads: %s)",
                           n->attrs[i].name, info->attributes);
    return LLMC_OK;
}

static int expand_node(llmc_graph *g, const char *path, int node, llmc_error *err)
{
    const llmc_contrib_op_info *info = llmc_contrib_op_find(g->nodes[node].domain, g->nodes[node].op_type);
    llmc_expand e = {.g = g, .path = path, .node = node, .err = err};
    if (!info)
        return ex_fail(&e, LLMC_E_INTERNAL, "no expansion for this op");
    int rc = check_attributes(&e, info);
    if (!rc)
        rc = expanders[info - llmc_contrib_op_at(0)](&e);
    if (!rc)
        llmc_graph_erase_node(g, node);
    return rc;
}

static bool is_contrib(const llmc_node *n)
{
    return !n->dead && llmc_contrib_op_find(n->domain, n->op_type) != NULL;
}

int llmc_expand_contrib(llmc_graph *g, const char *path, llmc_error *err)
{
    int n_nodes = g->n_nodes;   /* the nodes expanders add are default-domain */
    for (int i = 0; i < n_nodes; i++) {
        if (!is_contrib(&g->nodes[i]))
            continue;
        int rc = expand_node(g, path, i, err);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}
