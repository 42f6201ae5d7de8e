/* The pipeline: one ordered table of passes (pipeline.h). */
#include "pipeline.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ir/ir_dot.h"
#include "ir/ir_dump.h"
#include "support/out_file.h"

static const llmc_pass *const pipeline[] = {
    /* dtypes, affine shapes in (S, P), contents of small int tensors */
    &llmc_pass_shape_inference,
    /* quantized weights (dynamic int8 MatMulInteger, DequantizeLinear) ->
     * MatMul(x, DequantizeLinear(Wq)) in one blocked form; other
     * quantization ops -> float ops (before folding, which folds those) */
    &llmc_pass_quant_canonical,
    /* x (B A)^T -> (x A^T) B^T; before folding turns B A into the dense delta */
    &llmc_pass_lora_reorder,
    /* Shape chains -> constants or llmc.Symbols; constant subgraphs evaluated */
    &llmc_pass_constant_folding,
    /* what folding left unread */
    &llmc_pass_dead_code,
    /* nodes that compute nothing (Casts to the dtype the input has, Slices to
     * the input's shape, empty Concat inputs) -> their readers read the input */
    &llmc_pass_identity,
    /* equal constants, then equal nodes (e.g. the per-layer Symbols) */
    &llmc_pass_cse,
    /* Reshape -> Gemm -> Reshape (HF Conv1D) -> MatMul over the last axis */
    &llmc_pass_gemm_unflatten,
    /* last-axis Slices that tile a MatMul's output (Phi-3's qkv_proj and
     * gate_up_proj) -> one Split, GPT-2's packed form, which the fusions
     * read through and linear-fusion makes outputs of the Linear */
    &llmc_pass_packed_split,
    /* Slice(Slice(x)) -> Slice(x) where the bounds compose exactly */
    &llmc_pass_slice_fusion,
    /* decomposed LayerNorm -> ONNX LayerNormalization (before rmsnorm-fusion,
     * which leaves centered norms to it) */
    &llmc_pass_layernorm_fusion,
    /* x / sqrt(mean(x^2) + eps) * scale -> llmc.RMSNorm */
    &llmc_pass_rmsnorm_fusion,
    /* GELU (erf, tanh), SiLU -> llmc.Gelu, llmc.Silu; then Silu * up -> llmc.SwiGLU */
    &llmc_pass_activation_fusion,
    /* rotate-half RoPE -> llmc.Rope with compile-time cos/sin tables */
    &llmc_pass_rope_fusion,
    /* Q.K^T, causal mask, Softmax, .V, GQA repeat and past/present Concats
     * -> llmc.Attention owning the KV cache */
    &llmc_pass_attention_fusion,
    /* MatMul/Gemm by constant weights (+ bias) -> llmc.Linear; siblings on
     * one input merged; Splits and residual Adds absorbed */
    &llmc_pass_linear_fusion,
    /* --logits last: the hidden state sliced to its last position before the
     * final norm and LM head */
    &llmc_pass_logits_last,
    /* --quant: Linear weights to int8/int4, x through one shared QuantizeRows */
    &llmc_pass_quantize,
    /* --calibrate: the outliers beyond a static scale exact, beside the int8 Linear */
    &llmc_pass_shadow_outliers,
    /* --embed-bits: the embedding table in 16/8 bits, or shared with a tied LM head */
    &llmc_pass_quantize_embedding,
    /* --npu-chunk: the static ops an NPU runs for chunks of C tokens, marked */
    &llmc_pass_npu_partition,
};

#define PIPELINE_LENGTH ((int)(sizeof pipeline / sizeof pipeline[0]))
_Static_assert(PIPELINE_LENGTH <= LLMC_PIPELINE_MAX_PASSES, "raise LLMC_PIPELINE_MAX_PASSES");

int llmc_pipeline_length(void)
{
    return PIPELINE_LENGTH;
}

static int make_dir(const char *dir, llmc_error *err)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST)
        return LLMC_OK;
    return llmc_fail(err, LLMC_E_OUTPUT, "cannot create dump directory '%s': %s", dir, strerror(errno));
}

/* A dump writer: the canonical text or the picture (which needs the origin). */
typedef int (*dump_writer)(const llmc_graph *g, const llmc_dot_origin *origin, FILE *out);

static int write_text(const llmc_graph *g, const llmc_dot_origin *origin, FILE *out)
{
    (void)origin;
    return llmc_ir_dump(g, out);
}

static int write_file(const llmc_graph *g, const llmc_dot_origin *origin, const char *dir, const char *ext,
                      dump_writer writer, llmc_error *err)
{
    int stage = origin->n_stages - 1;
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/%02d-%s.%s", dir, stage, origin->name[stage], ext);
    if (len < 0 || (size_t)len >= sizeof path)
        return llmc_fail(err, LLMC_E_OUTPUT, "dump path too long in '%s'", dir);
    llmc_output out;
    FILE *f = llmc_out_create(path, &out, err);
    if (!f)
        return err->code;
    int rc = writer(g, origin, f) ? llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s'", path) : LLMC_OK;
    return llmc_out_finish(&out, rc, err);
}

/* The stages run so far (the importer, then each pass): which one created
 * each node, for the pictures (ir_dot.h). */
typedef struct {
    int end[PIPELINE_LENGTH + 1];
    const char *name[PIPELINE_LENGTH + 1];
    llmc_dot_origin origin;
} stage_log;

/* Records that the stage `name` has run (its nodes end at the current node
 * count) and writes its dumps. */
static int end_stage(const llmc_graph *g, const llmc_pipeline_dumps *dumps, stage_log *log, const char *name,
                     llmc_error *err)
{
    llmc_dot_origin *origin = &log->origin;
    log->end[origin->n_stages] = g->n_nodes;
    log->name[origin->n_stages] = name;
    origin->n_stages++;
    if (!dumps->dir)
        return LLMC_OK;
    int rc = write_file(g, origin, dumps->dir, "txt", write_text, err);
    return rc || !dumps->dot ? rc : write_file(g, origin, dumps->dir, "dot", llmc_ir_dot, err);
}

int llmc_pipeline_run_dumps(llmc_graph *g, const llmc_pass_ctx *ctx, const llmc_pipeline_dumps *dumps,
                            llmc_pass_record *records, int *n_records, llmc_error *err)
{
    stage_log log;
    log.origin = (llmc_dot_origin){.n_stages = 0, .end = log.end, .name = log.name};
    int rc = LLMC_OK;
    *n_records = 0;
    if ((dumps->dir && (rc = make_dir(dumps->dir, err))) || (rc = end_stage(g, dumps, &log, "import", err)))
        return rc;
    for (int i = 0; i < PIPELINE_LENGTH; i++) {
        const llmc_pass *pass = pipeline[i];
        llmc_pass_ctx pass_ctx = *ctx;
        pass_ctx.detail = records[i].detail;
        pass_ctx.detail_size = sizeof records[i].detail;
        records[i].detail[0] = '\0';
        if (dumps->progress)
            dumps->progress(dumps->progress_ctx, pass->name, (uint64_t)i, PIPELINE_LENGTH);
        if ((rc = pass->run(g, &pass_ctx, err)))
            return rc;
        records[i].name = pass->name;
        records[i].nodes = (uint32_t)llmc_graph_live_nodes(g);
        records[i].digest = llmc_ir_digest(g);
        *n_records = i + 1;
        if ((rc = end_stage(g, dumps, &log, pass->name, err)))
            return rc;
    }
    return LLMC_OK;
}

int llmc_pipeline_run(llmc_graph *g, const llmc_pass_ctx *ctx, const char *dump_dir,
                      llmc_pass_record *records, int *n_records, llmc_error *err)
{
    llmc_pipeline_dumps dumps = {.dir = dump_dir, .dot = false};
    return llmc_pipeline_run_dumps(g, ctx, &dumps, records, n_records, err);
}
