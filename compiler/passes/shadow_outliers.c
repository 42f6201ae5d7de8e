/* shadow-outliers: the exact part of the activation outliers beyond a
 * calibrated scale, on the CPU beside the int8 Linear (paper 003 §3.3).
 *
 * After quantize with --calibrate, a Linear (int8 W) reads its x through a
 * QuantizeRows with a static scale s, which clamps |x / s| > 127.  For the
 * Linears this pass picks, an llmc.ShadowLinear(x, W, y_0..) -> z_0.. takes
 * over the Linear's outputs: the Linear now writes new values y_j, and
 * z_j = y_j + sum over the outliers c of (x_c - s q_c) W[cols of j, c], so
 * each outlier's product is exact (runtime/kernels/q_shadow.c).
 *
 * Which Linears: the paper prunes the shadow work of the least important
 * layers, importance = max |x| / clip of the calibration run (its Fig. 12).
 * ctx->shadow_fraction of the calibrated Linears (rounded up), the most
 * important first (ties: graph order), keep it; 0 keeps none.
 *
 * Hot channels (§3.3): outliers gather in a few channels; those whose max
 * |x| over the calibration text passed the clip are listed on the node
 * (hot_channels; at most 1/64 of them, the largest max |x| first), and
 * codegen gives the CPU a copy of just their columns
 * of W, so a delegate may own W: an outlier elsewhere (rare) reads W.
 *
 * Preconditions: ctx->calibration set (else the pass does nothing); a
 * Linear with quant_bits 8 and binary16 coefficients (not a file's float32
 * ones, quant_coef 32: the shadow kernel reads binary16 scales) whose
 * input 0 is a QuantizeRows with attribute scale; at most 3 outputs (the runtime's limit; others are explained and
 * left without shadow). */
#include <math.h>
#include <stdlib.h>

#include "calibration.h"
#include "ir/llmc_ops.h"
#include "pass.h"
#include "pass_list.h"

static const char PASS[] = "shadow-outliers";

#define MAX_SHADOW_OUTPUTS 3 /* runtime/kernels/kernels.h RT_SHADOW_OUTPUTS */
/* Hot channels kept per Linear: at most 1/64 of its inputs (paper 003 Fig.
 * 11: under 3% of the channels hold 80% of the outliers), so the float32
 * copy of their columns stays within 1/16 of the int8 W it shadows. */
#define HOT_SHARE 64

typedef struct {
    int node;           /* the Linear */
    int x;              /* the float x its QuantizeRows reads */
    double importance;  /* max |x| / clip */
} candidate;

/* The float x under a static-scale QuantizeRows feeding an int8 Linear,
 * or -1. */
static int calibrated_x(const llmc_graph *g, int node, float *scale)
{
    const llmc_node *n = &g->nodes[node];
    if (n->dead || !llmc_is_op(n, "Linear") || llmc_node_attr_int(g, node, "quant_bits", 0) != 8 ||
        llmc_node_attr_int(g, node, "quant_coef", 16) != 16 || n->n_inputs < 2 || n->inputs[0] < 0)
        return -1;
    int q = g->values[n->inputs[0]].producer;
    if (q < 0 || !llmc_is_op(&g->nodes[q], "QuantizeRows"))
        return -1;
    *scale = llmc_node_attr_float(g, q, "scale", 0.0f);
    return *scale > 0.0f ? g->nodes[q].inputs[0] : -1;
}

/* Most important first; graph order among equals (deterministic). */
static int by_importance(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->importance != y->importance)
        return x->importance > y->importance ? -1 : 1;
    return x->node - y->node;
}

/* Linear `node` writes fresh values; ShadowLinear writes its old outputs.
 * hot: the channels calibration saw beyond the clip, whose W columns the
 * CPU keeps a copy of (INTS hot_channels; none: every outlier reads W). */
static int add_shadow(llmc_graph *g, int node, int x, float scale, const int64_t *hot,
                      int64_t n_hot)
{
    int n_out = g->nodes[node].n_outputs, ins[2 + MAX_SHADOW_OUTPUTS], outs[MAX_SHADOW_OUTPUTS];
    ins[0] = x;
    ins[1] = g->nodes[node].inputs[1];
    for (int j = 0; j < n_out; j++) {
        int y = g->nodes[node].outputs[j];
        char *name = llmc_graph_unique_name(g, g->values[y].name, "/int8");
        int part = name ? llmc_graph_add_value(g, name, g->values[y].dtype) : -1;
        free(name);
        if (part < 0)
            return -1;
        g->values[part].shape = g->values[y].shape;
        g->values[part].producer = node;
        g->nodes[node].outputs[j] = part;
        ins[2 + j] = part;
        outs[j] = y;
    }
    char *name = llmc_graph_unique_name(g, g->nodes[node].name, "/shadow");
    int shadow = name ? llmc_graph_add_llmc_node(g, "ShadowLinear", name, ins, 2 + n_out, outs,
                                                 n_out)
                      : -1;
    free(name);
    /* W packs as the Linear's: the same bytes, one segment */
    return shadow < 0 || llmc_node_set_float(g, shadow, "scale", scale) ||
                   llmc_node_set_int(g, shadow, "quant_bits", 8) ||
                   llmc_node_set_int(g, shadow, "quant_group",
                                     llmc_node_attr_int(g, node, "quant_group", 0)) ||
                   (n_hot > 0 && llmc_node_set_ints(g, shadow, "hot_channels", hot, (int)n_hot))
               ? -1
               : 0;
}

static int run_shadow_outliers(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    if (!ctx->calibration)
        return LLMC_OK;
    int n_nodes = g->n_nodes, n = 0, added = 0;
    int64_t hot_total = 0;
    candidate *c = malloc(sizeof *c * (size_t)(n_nodes > 0 ? n_nodes : 1));
    if (!c)
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
    for (int i = 0; i < n_nodes; i++) {
        float scale;
        int x = calibrated_x(g, i, &scale);
        const llmc_act_range *r = x >= 0 ? llmc_calibration_find(ctx->calibration, g->values[x].name)
                                         : NULL;
        if (!r)
            continue;
        c[n++] = (candidate){i, x, r->clip > 0 ? r->absmax / r->clip : 0.0};
    }
    int keep = (int)ceil(ctx->shadow_fraction * n - 1e-9);
    int rc = LLMC_OK;
    qsort(c, (size_t)n, sizeof *c, by_importance);
    for (int i = 0; i < keep && !rc; i++) {
        float scale;
        calibrated_x(g, c[i].node, &scale);
        if (g->nodes[c[i].node].n_outputs > MAX_SHADOW_OUTPUTS) {
            llmc_pass_explain(ctx, PASS, g, c[i].node, "%d outputs; ShadowLinear takes at most "
                              "%d: its outliers stay clamped", g->nodes[c[i].node].n_outputs,
                              MAX_SHADOW_OUTPUTS);
            continue;
        }
        int64_t *hot = NULL;
        const llmc_act_range *r = llmc_calibration_find(ctx->calibration, g->values[c[i].x].name);
        int64_t cap = r->channels / HOT_SHARE > 1 ? r->channels / HOT_SHARE : 1;
        int64_t n_hot = llmc_act_range_hot(r, cap, &hot);
        if (n_hot < 0 || add_shadow(g, c[i].node, c[i].x, scale, hot, n_hot))
            rc = llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
        free(hot);
        added += !rc;
        hot_total += n_hot > 0 ? n_hot : 0;
    }
    free(c);
    llmc_pass_detail(ctx, "%d of %d calibrated Linears keep shadow outliers (fraction %g), "
                     "%lld hot channels with CPU copies", added, n, ctx->shadow_fraction,
                     (long long)hot_total);
    return rc;
}

const llmc_pass llmc_pass_shadow_outliers = {"shadow-outliers", run_shadow_outliers};
