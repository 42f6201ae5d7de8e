/* quantize-embedding: the token embedding table stored in 16 or 8 bits, or
 * once with a tied LM head.
 *
 * An embedding Gather reads one row of E [V, H] per token, so its table
 * costs file size and nothing in speed; in a w4a8 Qwen2-0.5B plan the
 * float32 table is 545 of 913 MB.  The Gather whose data is a float32
 * constant [V, H] (axis 0) and whose indices are the input_ids graph input
 * (maybe reshaped) gets attributes codegen packs the table by (compiler/codegen/lower_layout.c), and
 * the runtime's Gather dequantizes the rows it reads:
 *   embed_bits 16   binary16 rows (layout Half)
 *   embed_bits 8    int8 QWeightTiles, a binary16 scale per row and group
 *                   (embed_group: --group-size, K rounded up to 32 for 0)
 *   embed_bits 32   float32 as it is (nothing to mark)
 * Tied weights: when some llmc.Linear's W [H, V] holds E transposed (the LM
 * head of GPT-2, Qwen2-0.5B, ...), the table takes the Linear's own format
 * instead (embed_tied 1, embed_bits = its quant_bits or 32, embed_group its
 * quant_group), so both pack to the same bytes and share one segment
 * (compiler/codegen/weight_sharing.c): the Gather reads rows of the LM head's tiles
 * and --embed-bits does not apply.  Tying is decided by the bytes, never
 * the names: llmc_const_equal on E and a transposed view of W, which
 * compares cached hashes first and then the bytes chunk by chunk (an untied
 * head differs in its first chunk, so no whole transposed matrix is read).
 *
 * A table of a pre-quantized file (a DequantizeLinear in quant_weight.h's
 * table form) keeps the file's bits, its block size the group, and
 * embed_coef 16 or 32 (llmc_quant_weight_form: binary16 or the file's
 * float32 coefficients), and codegen packs its q values, scales and zero
 * points as they are, bit for bit (none of the above applies).
 *
 * Runs after quantize (it reads the Linears' quant_bits).  Preconditions: E
 * a float32 constant of rank 2 with constant dims, or a file's table; the
 * Gather's axis 0. */
#include <stdio.h>
#include <stdlib.h>

#include "ir/const_view.h"
#include "fusion_match.h"
#include "ir/io_roles.h"
#include "ir/llmc_ops.h"
#include "pass.h"
#include "pass_list.h"
#include "quant_weight.h"

static const char PASS[] = "quantize-embedding";

#define PER_CHANNEL_ALIGN 32 /* group of a per-row scale: H rounded up to this */

/* v is the input_ids graph input, maybe reshaped (GPT-2's
 * input_ids.view(-1, S)). */
static bool is_input_ids(const llmc_graph *g, int v)
{
    static const char *const same_values[] = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"};
    int layer;
    while (v >= 0 && g->values[v].producer >= 0) {
        const llmc_node *p = &g->nodes[g->values[v].producer];
        bool kept = false;
        for (size_t i = 0; i < sizeof same_values / sizeof same_values[0]; i++)
            kept = kept || llmc_is_onnx_op(p, same_values[i]);
        v = kept && p->n_inputs > 0 ? p->inputs[0] : -1;
    }
    return v >= 0 && g->values[v].is_graph_input &&
           llmc_io_role(g->values[v].name, 0, &layer) == LLMC_ROLE_INPUT_IDS;
}

static bool is_const_matrix(const llmc_graph *g, int v)
{
    const llmc_value *x = v >= 0 ? &g->values[v] : NULL;
    return x && x->is_const && x->dtype == LLMC_DT_FLOAT && x->shape.rank == 2 &&
           llmc_aff_is_const(x->shape.dims[0]) && llmc_aff_is_const(x->shape.dims[1]);
}

/* An embedding Gather: float32 constant table, axis 0, input_ids indices. */
static bool is_embedding(const llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (n->dead || !llmc_is_onnx_op(n, "Gather") || n->n_inputs != 2 ||
        !(is_const_matrix(g, n->inputs[0]) || llmc_quant_table(g, n->inputs[0]) >= 0))
        return false;
    if (llmc_node_attr_int(g, node, "axis", 0) != 0 || !is_input_ids(g, n->inputs[1])) {
        llmc_pass_explain(ctx, PASS, g, node, "a table [V, H] gathered on axis %lld by '%s', not "
                          "on axis 0 by input_ids: it stays float32",
                          (long long)llmc_node_attr_int(g, node, "axis", 0),
                          n->inputs[1] >= 0 ? g->values[n->inputs[1]].name : "");
        return false;
    }
    return true;
}

/* The Linear whose W is table e transposed, or -1. */
static int tied_linear(const llmc_graph *g, int e)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const llmc_node *n = &g->nodes[i];
        if (!n->dead && llmc_is_op(n, "Linear") && n->n_inputs >= 2 &&
            is_const_matrix(g, n->inputs[1]) && llmc_const_holds_transpose(&g->values[e], &g->values[n->inputs[1]]))
            return i;
    }
    return -1;
}

static int64_t untied_group(const llmc_pass_ctx *ctx, int64_t h)
{
    return ctx->quant_group ? ctx->quant_group
                            : (h + PER_CHANNEL_ALIGN - 1) / PER_CHANNEL_ALIGN * PER_CHANNEL_ALIGN;
}

/* Gather `node`'s file table (DequantizeLinear `dq`) replaced by its
 * float32 values; -1 on OOM. */
static int dequantize_table(llmc_graph *g, int node, int dq)
{
    int e = g->nodes[node].inputs[0];
    llmc_shape shape = g->values[e].shape;
    int64_t count = shape.dims[0].c * shape.dims[1].c;
    float *values = malloc(sizeof *values * (size_t)count);
    char *name = values ? llmc_graph_unique_name(g, g->values[e].name, "/dequantized") : NULL;
    int v = name ? llmc_graph_add_value(g, name, LLMC_DT_FLOAT) : -1;
    int rc = v < 0 || llmc_quant_weight_dequantize(g, dq, values) ||
                     llmc_graph_set_const(g, v, LLMC_DT_FLOAT, &shape, values, sizeof *values * (uint64_t)count)
                 ? -1
                 : 0;
    free(values);
    free(name);
    if (!rc) {
        g->nodes[node].inputs[0] = v;
        if (llmc_graph_use_count(g, e) == 0)
            llmc_graph_erase_node(g, dq);
    }
    return rc;
}

/* The table of a pre-quantized file (quant_weight.h): kept in the file's
 * bits and coefficients (its block size the group; one group over H for a
 * scale per row).  -1 on OOM or constants without bytes. */
static int mark_file_table(llmc_graph *g, int node, int dq, char *what, size_t cap)
{
    int e = g->nodes[node].inputs[0];
    int64_t h = g->values[e].shape.dims[1].c, groups = g->values[llmc_quant_weight_input(g, dq, 1)].shape.dims[1].c;
    int64_t group = groups == 1 ? (h + PER_CHANNEL_ALIGN - 1) / PER_CHANNEL_ALIGN * PER_CHANNEL_ALIGN
                                : llmc_node_attr_int(g, dq, "block_size", 0);
    llmc_quant_tile_form form;
    if (llmc_quant_weight_form(g, dq, &form) || llmc_node_set_int(g, node, "embed_bits", form.bits) ||
        llmc_node_set_int(g, node, "embed_group", group) || llmc_node_set_int(g, node, "embed_coef", form.coef))
        return -1;
    return snprintf(what, cap, "'%s' the file's %d-bit, %s", g->values[e].name, form.bits,
                    form.coef == 32 ? "float32 scales and zero points" : "binary16 coefficients") < 0;
}

/* Other Gathers of a file's table (GPT-2's position table, read by
 * position_ids): its float32 values. */
static int dequantize_other_tables(llmc_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const llmc_node *n = &g->nodes[i];
        int dq = !n->dead && llmc_is_onnx_op(n, "Gather") && n->n_inputs == 2 ? llmc_quant_table(g, n->inputs[0]) : -1;
        if (dq >= 0 && !llmc_node_attr(g, i, "embed_bits") && dequantize_table(g, i, dq))
            return -1;
    }
    return 0;
}

/* Marks one embedding Gather; appends what it chose to `what`. */
static int mark_table(llmc_graph *g, const llmc_pass_ctx *ctx, int node, char *what, size_t cap)
{
    int dq = llmc_quant_table(g, g->nodes[node].inputs[0]);
    if (dq >= 0)
        return mark_file_table(g, node, dq, what, cap);
    int e = g->nodes[node].inputs[0], head = tied_linear(g, e);
    int64_t h = g->values[e].shape.dims[1].c;
    int bits = head >= 0 ? (int)llmc_node_attr_int(g, head, "quant_bits", 32)
                         : ctx->embed_bits ? ctx->embed_bits : 32;
    int64_t group = head >= 0 ? llmc_node_attr_int(g, head, "quant_group", 0) : untied_group(ctx, h);
    if (bits == 32 && head < 0)
        return snprintf(what, cap, "'%s' float32", g->values[e].name) < 0;
    if (llmc_node_set_int(g, node, "embed_bits", bits) ||
        (bits != 32 && bits != 16 && llmc_node_set_int(g, node, "embed_group", group)) ||
        (head >= 0 && llmc_node_set_int(g, node, "embed_tied", 1)))
        return -1;
    if (head >= 0)
        return snprintf(what, cap, "'%s' tied to '%s' (%d-bit)", g->values[e].name,
                        g->nodes[head].name, bits) < 0;
    return snprintf(what, cap, "'%s' %d-bit", g->values[e].name, bits) < 0;
}

static int run_quantize_embedding(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    char what[256] = "";
    int tables = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!is_embedding(g, ctx, i))
            continue;
        if (mark_table(g, ctx, i, what, sizeof what))
            return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
        tables++;
    }
    if (dequantize_other_tables(g))
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
    if (tables == 1)
        llmc_pass_detail(ctx, "embedding %s", what);
    else if (tables > 1)
        llmc_pass_detail(ctx, "%d embeddings, the last %s", tables, what);
    return LLMC_OK;
}

const llmc_pass llmc_pass_quantize_embedding = {"quantize-embedding", run_quantize_embedding};
