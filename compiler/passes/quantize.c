/* quantize: Linear weights to int8 or int4, activations to int8 once per
 * Linear input (papers 000 §IV.C, 002 §4.2).
 *
 * With `--quant w8a8` or `w4a8` every llmc.Linear whose W is a float32
 * constant [K, N] gets the attributes quant_bits (8 or 4) and quant_group
 * (K elements per scale: --group-size, or K rounded up to 32 for 0 = one
 * scale per output channel), and reads its x through an llmc.QuantizeRows
 * node.  Linears that read the same x with the same group share one
 * QuantizeRows (q/k/v and gate/up are usually merged by linear-fusion
 * already; what is left, e.g. an unmerged sibling, still quantizes x once).
 * The Linear producing a graph output (the LM head, whose logits decide
 * every token) takes lm_head_bits instead, 8 by default under w4a8 (paper
 * 002 §4.2).  Codegen packs W into the target's tiles, and folds each
 * QuantizeRows outside NPU subgraphs into its Linears, which quantize x
 * themselves (codegen/quant_fold.c); norms, softmax, attention and the
 * embedding stay float32.
 *
 * A Linear whose W is a pre-quantized file's DequantizeLinear
 * (quant_weight.h) gets the file's bits and group, and INT quant_coef: 16
 * for binary16 tile coefficients, 32 for the file's float32 scales and zero
 * points (llmc_quant_weight_form), whatever --quant says, so its tiles hold
 * the file's values bit for bit.
 *
 * With --calibrate (calibration.h) every QuantizeRows gets the attribute
 * scale: the static per-tensor scale of its x from the calibration run
 * (clip / 127), as an NPU quantizes activations (paper 003 §3.3).
 *
 * Preconditions: W a float32 constant of rank 2 whose K equals x's constant
 * last dim; x float32; with a calibration, a range recorded for every
 * quantized x (the calibration plan ran the same passes).  Without --quant
 * (f32) the pass changes nothing. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#include "calibration.h"
#include "ir/llmc_ops.h"
#include "pass.h"
#include "pass_list.h"
#include "quant_weight.h"

static const char PASS[] = "quantize";

#define PER_CHANNEL_ALIGN 32 /* group of a per-channel scale: K rounded up to this */
/* The group of a file's weight with one scale per column (or per tensor):
 * its scale and zero point repeated every 32 rows of K, so that x takes a
 * scale per (row, 32 values), as ONNX Runtime's MatMulNBits quantizes A at
 * accuracy level 4.  Its 8 coefficient bytes per 32 int8 values add a
 * quarter to the weight's bytes; on the zoo's dynamic uint8 files the
 * logits' error against the fp32-dequantized run falls by a quarter to a
 * third (t_prequant). */
#define FILE_CHANNEL_GROUP 32

typedef struct {
    int x, group, xq;
} shared_input;

/* ---- weights of a pre-quantized file ---- */

typedef struct {
    int linears, eight, file4, file8, file_float_coef, made;
} quant_counts;

static bool quantizable(const llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return false;
    const llmc_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
    if (!w->is_const || w->dtype != LLMC_DT_FLOAT || w->shape.rank != 2 ||
        !llmc_aff_is_const(w->shape.dims[0]) || x->dtype != LLMC_DT_FLOAT ||
        x->shape.rank < 1 || !llmc_aff_eq(x->shape.dims[x->shape.rank - 1], w->shape.dims[0])) {
        llmc_pass_explain(ctx, PASS, g, node, "W is not a float32 constant [K, N] matching "
                          "x's last dim K; it stays float32");
        return false;
    }
    return true;
}

static bool feeds_graph_output(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    for (int j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0 && g->values[n->outputs[j]].is_graph_output)
            return true;
    return false;
}

/* The calibrated static scale of x on QuantizeRows node `node`. */
static int set_static_scale(llmc_graph *g, const llmc_pass_ctx *ctx, int node, int x,
                            llmc_error *err)
{
    const llmc_act_range *r = llmc_calibration_find(ctx->calibration, g->values[x].name);
    if (!r)
        return llmc_fail(err, LLMC_E_INTERNAL, "%s: the calibration run recorded no range for "
                         "'%s'", PASS, g->values[x].name);
    if (!(r->scale >= FLT_MIN && r->scale <= FLT_MAX))
        return llmc_fail(err, LLMC_E_INPUT, "%s: '%s' reached max |x| = %g in the calibration "
                         "run: no int8 scale holds it", PASS, g->values[x].name, r->absmax);
    return llmc_node_set_float(g, node, "scale", r->scale)
               ? llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS)
               : LLMC_OK;
}

/* The QuantizeRows output for (x, group), made on first use; -1 on OOM
 * (err set) or a calibration failure. */
static int quantized_input(llmc_graph *g, const llmc_pass_ctx *ctx, shared_input *made,
                           int *n_made, int x, int group, llmc_error *err)
{
    for (int i = 0; i < *n_made; i++)
        if (made[i].x == x && made[i].group == group)
            return made[i].xq;
    char *name = llmc_graph_unique_name(g, g->values[x].name, "/quantized");
    int xq = name ? llmc_graph_add_value(g, name, LLMC_DT_INT8) : -1;
    free(name);
    if (xq < 0)
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS), -1;
    g->values[xq].shape = g->values[x].shape;
    int node = llmc_graph_add_llmc_node(g, "QuantizeRows", g->values[xq].name, &x, 1, &xq, 1);
    if (node < 0 || llmc_node_set_int(g, node, "group", group))
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS), -1;
    if (ctx->calibration && set_static_scale(g, ctx, node, x, err))
        return -1;
    made[*n_made] = (shared_input){x, group, xq};
    ++*n_made;
    return xq;
}

static int64_t per_channel_group(int64_t k)
{
    return (k + PER_CHANNEL_ALIGN - 1) / PER_CHANNEL_ALIGN * PER_CHANNEL_ALIGN;
}

static int quantize_linear(llmc_graph *g, const llmc_pass_ctx *ctx, int node, int bits, int64_t group,
                           shared_input *made, int *n_made, llmc_error *err)
{
    int xq = quantized_input(g, ctx, made, n_made, g->nodes[node].inputs[0], (int)group, err);
    if (xq < 0)
        return err->code;
    if (llmc_node_set_int(g, node, "quant_bits", bits) || llmc_node_set_int(g, node, "quant_group", group))
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
    g->nodes[node].inputs[0] = xq;
    return 0;
}

/* The bits and group --quant gives the float Linear `node`. */
static void flag_quantization(const llmc_graph *g, const llmc_pass_ctx *ctx, int node, int *bits, int64_t *group)
{
    int64_t k = g->values[g->nodes[node].inputs[1]].shape.dims[0].c;
    *bits = feeds_graph_output(g, node) ? ctx->lm_head_bits : ctx->quant_bits;
    *group = ctx->quant_group ? ctx->quant_group : per_channel_group(k);
}

/* A file-quantized Linear: the file's bits, group (its block size, or
 * FILE_CHANNEL_GROUP for a scale per column) and coefficients (quant_weight.h),
 * whatever --quant says: the tiles hold its values bit for bit. */
static int file_quantization(llmc_graph *g, int node, int dq, int *bits, int64_t *group, quant_counts *c,
                             llmc_error *err)
{
    int w = g->nodes[node].inputs[1];
    int64_t groups = g->values[llmc_quant_weight_input(g, dq, 1)].shape.dims[0].c;
    llmc_quant_tile_form form;
    if (llmc_quant_weight_form(g, dq, &form))
        return llmc_fail(err, LLMC_E_INTERNAL, "%s: weight '%s' of node '%s' has no constant bytes", PASS,
                         g->values[w].name, g->nodes[node].name);
    *bits = form.bits;
    *group = groups == 1 ? FILE_CHANNEL_GROUP : llmc_node_attr_int(g, dq, "block_size", 0);
    c->file4 += form.bits == 4;
    c->file8 += form.bits == 8;
    c->file_float_coef += form.coef == 32;
    return llmc_node_set_int(g, node, "quant_coef", form.coef) ? llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS)
                                                               : LLMC_OK;
}

static int visit_linear(llmc_graph *g, const llmc_pass_ctx *ctx, int node, shared_input *made, quant_counts *c,
                        llmc_error *err)
{
    int dq = llmc_quant_weight(g, g->nodes[node].inputs[1]), bits = 0;
    int64_t group = 0;
    int rc = LLMC_OK;
    if (dq >= 0)
        rc = file_quantization(g, node, dq, &bits, &group, c, err);
    else if (ctx->quant_bits && quantizable(g, ctx, node))
        flag_quantization(g, ctx, node, &bits, &group);
    if (rc || !bits)
        return rc;
    c->linears++;
    c->eight += bits == 8;
    return quantize_linear(g, ctx, node, bits, group, made, &c->made, err);
}

/* "N Linears keep the file's quantization (N 4-bit, N 8-bit, <coefficients>)",
 * each count only when it is not 0. */
static void report_file(const llmc_pass_ctx *ctx, const quant_counts *c)
{
    int from_file = c->file4 + c->file8, half = from_file - c->file_float_coef;
    char bits[64], coef[96];
    if (c->file4 && c->file8)
        snprintf(bits, sizeof bits, "%d 4-bit, %d 8-bit", c->file4, c->file8);
    else
        snprintf(bits, sizeof bits, "%d %d-bit", from_file, c->file4 ? 4 : 8);
    if (half && c->file_float_coef)
        snprintf(coef, sizeof coef, "%d with float32 scales and zero points, %d with binary16 coefficients",
                 c->file_float_coef, half);
    else
        snprintf(coef, sizeof coef, "%s", half ? "binary16 coefficients" : "float32 scales and zero points");
    llmc_pass_detail(ctx, "%d Linears keep the file's quantization (%s, %s), %d quantized by --quant; %d QuantizeRows",
                     from_file, bits, coef, c->linears - from_file, c->made);
}

static int run_quantize(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    int n_nodes = g->n_nodes;
    quant_counts c = {0};
    shared_input *made = malloc(sizeof *made * (size_t)(n_nodes > 0 ? n_nodes : 1));
    if (!made)
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
    for (int i = 0; i < n_nodes; i++) {
        if (g->nodes[i].dead || !llmc_is_op(&g->nodes[i], "Linear"))
            continue;
        int rc = visit_linear(g, ctx, i, made, &c, err);
        if (rc) {
            free(made);
            return rc;
        }
    }
    free(made);
    int from_file = c.file4 + c.file8;
    if (c.linears == 0 && !ctx->quant_bits)
        return LLMC_OK;
    if (from_file)
        report_file(ctx, &c);
    else
        llmc_pass_detail(ctx, "%d Linears quantized (%d to 8 bits, %d to 4), %d QuantizeRows%s", c.linears, c.eight,
                         c.linears - c.eight, c.made, ctx->calibration ? " with static scales from calibration" : "");
    return LLMC_OK;
}

const llmc_pass llmc_pass_quantize = {"quantize", run_quantize};
