/* llmc compile MODEL.onnx|FOLDER -o OUT.plan [--variant NAME] [--max-context N]
 *              [--dump-passes DIR [--dot]] [--dim NAME=N] [--threads N] [--quiet]
 *              [--quant f32|w8a8|w4a8] [--group-size N] [--lm-head-bits 8|4]
 *              [--embed-bits 32|16|8] [--logits last|all] [--target generic|avx2|neon-dot|neon-i8mm]
 *              [--kv-cache f32|f16|int8] [--tokenizer tokenizer.json | --no-tokenizer]
 *              [--calibrate TEXT | --calibrate-ids FILE [--calib-percentile P] [--shadow-layers F]]
 *              [--npu-chunk C [--npu-export DIR]] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/calibrate.h"
#include "cli.h"
#include "model_folder.h"
#include "codegen/codegen.h"
#include "tokenizer/tokenizer_json.h"
#include "codegen/plan_model.h"
#include "npu/npu_export.h"
#include "onnx/onnx_import.h"
#include "passes/pipeline.h"
#include "passes/position_tables.h"
#include "support/out_file.h"
#include "codegen/evaluate.h"

#define MAX_DIM_BINDINGS 16
#define MAX_PASSES 64
/* Calibration windows: tokens per window, at most the plan's max context. */
#define CALIB_CONTEXT 256u
/* The clip of a calibrated tensor: this percentile of its |x|. */
#define CALIB_PERCENTILE 99.99
/* Shadow outliers kept in this share of the calibrated Linears (paper 003
 * §3.3 prunes the least important 85% of layers). */
#define SHADOW_FRACTION 0.15

static const char compile_help[] =
    "usage: llmc compile MODEL.onnx|FOLDER -o OUT.plan [options]\n"
    "\n"
    "Imports MODEL.onnx (external data next to it), runs the pass pipeline and\n"
    "writes OUT.plan atomically: on failure nothing is written.\n"
    "\n"
    "FOLDER is a model as downloaded from the Hugging Face Hub: the ONNX file named by\n"
    "genai_config.json (onnxruntime-genai), or the *.onnx of FOLDER (optimum: model.onnx,\n"
    "decoder_with_past_model.onnx, ...) and FOLDER/onnx (transformers.js: model.onnx,\n"
    "model_fp16.onnx, model_q4.onnx, ...); its tokenizer.json is compiled in.  What\n"
    "was picked is said on stderr; several models and no --variant is an error that\n"
    "lists them.\n"
    "\n"
    "options:\n"
    "  -o, --output PATH     the plan to write (required)\n"
    "  --variant NAME        with FOLDER: the model to compile: fp32 (model.onnx), the X of\n"
    "                        model_X.onnx (fp16, q4, q4f16, quantized, ...), with_past,\n"
    "                        merged or no_past (decoder_with_past_model.onnx, ...), or the\n"
    "                        file's name\n"
    "  --max-context N       bound on past + new tokens the arena is sized for (default: the\n"
    "                        rows of the model's position tables, learned positions or\n"
    "                        RoPE cos/sin, else 2048; more than those rows is refused)\n"
    "  --dump-passes DIR     write DIR/NN-<pass>.txt, the canonical IR after every pass\n"
    "  --dot                 with --dump-passes, also DIR/NN-<pass>.dot: a Graphviz picture\n"
    "                        per pass (layers clustered, fused ops filled, the pass's new\n"
    "                        nodes outlined); render with 'dot -Tsvg'\n"
    "  --dim NAME=N          bind a symbolic input dimension that is not an LLM role\n"
    "  --explain             say why a pattern a pass looks for did not match\n"
    "  --threads N           threads for hashing the plan read back (default 1); the plan\n"
    "                        is byte-identical for every N\n"
    "  --quiet               no progress line on stderr (shown only on a terminal, once\n"
    "                        the compile has taken more than 2 seconds)\n"
    "  --quant MODE          f32 (default): float32 weights; w8a8: int8 weights, symmetric\n"
    "                        per group; w4a8: uint4 weights, asymmetric per group; both\n"
    "                        with int8 activations quantized per row at run time\n"
    "  --group-size N        weights per scale along K: 32, 64, 128, or 0 for one scale per\n"
    "                        output channel (default: 64 for w4a8, 32 otherwise)\n"
    "  --lm-head-bits B      bits of the Linear producing the logits: 8 (default) or 4\n"
    "  --embed-bits B        the token embedding table: 32 (float32), 16 (binary16) or 8\n"
    "                        (int8, a scale per row and group); default 32 for f32, 8\n"
    "                        otherwise.  A table tied to the LM head is stored once, in\n"
    "                        the head's format\n"
    "  --logits last|all     all (default): logits for every position, as the model\n"
    "                        defines them; last: the LM head runs on the last position\n"
    "                        of each call only (Logits [1, 1, vocab])\n"
    "  --target T            kernels the weights are packed for: generic (portable C),\n"
    "                        avx2, neon-dot, neon-i8mm (default: this machine's best)\n"
    "  --kv-cache T          rows of the fused Attention KV caches: f32 (default), f16,\n"
    "                        or int8 (keys int8 with a scale per row, values f16)\n"
    "  --tokenizer PATH      a Hugging Face tokenizer.json (tokenizer_config.json beside it\n"
    "                        is read for bos/eos) compiled into the plan: llmc tokenize,\n"
    "                        llmc run --prompt and llmc_rt_encode use it (default with\n"
    "                        FOLDER: the tokenizer.json there)\n"
    "  --no-tokenizer        with FOLDER: no tokenizer in the plan\n"
    "  --calibrate TEXT      w8a8 with per-tensor activations, as an NPU runs them: the\n"
    "                        model (unquantized) runs over TEXT (tokenized by --tokenizer)\n"
    "                        in windows of up to %u tokens, and every QuantizeRows gets one\n"
    "                        static scale, the clip of its x's range / 127; prints each\n"
    "                        tensor's range, outliers and importance (max |x| / clip)\n"
    "  --calibrate-ids FILE  as --calibrate, over token ids instead of a text (no tokenizer\n"
    "                        needed): one window per line, ids separated by commas or\n"
    "                        spaces (llmc eval --ids's format); a line of more than %u\n"
    "                        tokens is cut into windows as --calibrate cuts its text\n"
    "  --calib-percentile P  the clip: this percentile of |x| over the text (default %g);\n"
    "                        values beyond it are clamped, unless shadowed\n"
    "  --shadow-layers F     with --calibrate: the share, in [0, 1], of the Linears whose\n"
    "                        outliers (|x| beyond the clip) are added back exactly on the CPU\n"
    "                        (ShadowLinear), the most important first (max |x| / clip);\n"
    "                        default %g (the least important 85%% are pruned); 0: none\n"
    "  --npu-chunk C         with --calibrate: prefill in chunks of C tokens (the paper's 256;\n"
    "                        small values for tiny models), the static ops (norms, quantize,\n"
    "                        int8 Linears) grouped into subgraphs an NPU delegate builds once\n"
    "                        for C rows and runs for every chunk; weights default to one\n"
    "                        scale per output channel (--group-size 0)\n"
    "  --npu-export DIR      with --npu-chunk: once the plan is written, each NPU subgraph as\n"
    "                        a standalone ONNX model DIR/<subgraph>.onnx (opset 17, static\n"
    "                        dims at C rows, QDQ form: QuantizeLinear and DequantizeLinear\n"
    "                        around each MatMul, int8 weights with one scale per output\n"
    "                        channel, as vendor NPU converters take it), reference inputs\n"
    "                        and the reference delegate's outputs for them (float32,\n"
    "                        DIR/<subgraph>.inputs.bin, .outputs.bin), and last\n"
    "                        DIR/manifest.json: op ranges, inputs, outputs, chunk schedule\n";

typedef struct {
    const char *model, *output, *dump_dir;
    uint32_t max_context;
    uint32_t threads;
    int explain;
    int dot;
    int quant_bits, lm_head_bits;   /* 0 = float32 */
    int embed_bits;                 /* 0 = the default of quant_bits */
    int logits_last;
    int64_t group;
    const char *target;
    int kv_cache_dtype;             /* Plan.kv_cache_dtype */
    const char *tokenizer;
    const char *variant;            /* --variant NAME (with a folder) */
    int no_tokenizer;               /* --no-tokenizer */
    llmc_model_folder folder;       /* what a folder given as the model holds */
    const char *calibrate;          /* --calibrate TEXT */
    const char *calibrate_ids;      /* --calibrate-ids FILE */
    double calib_percentile;
    double shadow_fraction;         /* < 0: not given */
    uint32_t npu_chunk;             /* --npu-chunk C; 0: no subgraphs */
    const char *npu_export;         /* --npu-export DIR */
    int quiet;
    int n_dims;
    llmc_dim_binding dims[MAX_DIM_BINDINGS];
    char dim_names[MAX_DIM_BINDINGS][128];
} compile_args;

static int parse_dim(const char *text, llmc_dim_binding *b, char *name_buf, size_t cap)
{
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || (size_t)(eq - text) >= cap)
        return -1;
    memcpy(name_buf, text, (size_t)(eq - text));
    name_buf[eq - text] = 0;
    int64_t v = llmc_cli_parse_count(eq + 1);
    if (v < 0)
        return -1;
    b->name = name_buf;
    b->value = v;
    return 0;
}

/* Weights per scale when --group-size is not given.  w4a8: 64, 4.5 bits
 * per weight with the fp16 scale and min (llama.cpp Q4_0's size); on the
 * trained model its perplexity is group 32's, and the Qwen2-0.5B-shaped
 * plan prefills and decodes faster (docs/quantization.md, "Quantization, packed weights
 * and targets").  w8a8 keeps 32: there groups of 64 changed neither. */
static int64_t default_group(int quant_bits)
{
    return quant_bits == 4 ? 64 : 32;
}

static bool calibrating(const compile_args *a)
{
    return a->calibrate || a->calibrate_ids;
}

static int parse_args(int argc, char **argv, compile_args *a)
{
    memset(a, 0, sizeof *a);
    a->max_context = 0; /* not given: the model's (resolve_max_context) */
    a->threads = 1;
    a->group = -1; /* not given: default_group */
    a->lm_head_bits = 8;
    a->shadow_fraction = -1;
    a->target = llmc_cli_host_target();
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int has_value = i + 1 < argc;
        if ((!strcmp(arg, "-o") || !strcmp(arg, "--output")) && has_value) {
            a->output = argv[++i];
        } else if (!strcmp(arg, "--max-context") && has_value) {
            int64_t v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > 1 << 24)
                return llmc_cli_usage("compile", "--max-context wants an integer in 1..16777216, got '%s'", argv[i]);
            a->max_context = (uint32_t)v;
        } else if (!strcmp(arg, "--threads") && has_value) {
            if (llmc_cli_parse_threads("compile", argv[++i], &a->threads))
                return LLMC_E_USAGE;
        } else if (!strcmp(arg, "--dump-passes") && has_value) {
            a->dump_dir = argv[++i];
        } else if (!strcmp(arg, "--dim") && has_value) {
            if (a->n_dims == MAX_DIM_BINDINGS)
                return llmc_cli_usage("compile", "at most %d --dim bindings", MAX_DIM_BINDINGS);
            if (parse_dim(argv[++i], &a->dims[a->n_dims], a->dim_names[a->n_dims], sizeof a->dim_names[0]))
                return llmc_cli_usage("compile", "--dim wants NAME=N, got '%s'", argv[i]);
            a->n_dims++;
        } else if (!strcmp(arg, "--quant") && has_value) {
            const char *q = argv[++i];
            a->quant_bits = !strcmp(q, "w8a8") ? 8 : !strcmp(q, "w4a8") ? 4 : 0;
            if (!a->quant_bits && strcmp(q, "f32"))
                return llmc_cli_usage("compile", "--quant wants f32, w8a8 or w4a8, got '%s'", q);
        } else if (!strcmp(arg, "--group-size") && has_value) {
            a->group = llmc_cli_parse_count(argv[++i]);
            if (a->group != 0 && a->group != 32 && a->group != 64 && a->group != 128)
                return llmc_cli_usage("compile", "--group-size wants 32, 64, 128 or 0, got '%s'", argv[i]);
        } else if (!strcmp(arg, "--lm-head-bits") && has_value) {
            a->lm_head_bits = (int)llmc_cli_parse_count(argv[++i]);
            if (a->lm_head_bits != 8 && a->lm_head_bits != 4)
                return llmc_cli_usage("compile", "--lm-head-bits wants 8 or 4, got '%s'", argv[i]);
        } else if (!strcmp(arg, "--embed-bits") && has_value) {
            a->embed_bits = (int)llmc_cli_parse_count(argv[++i]);
            if (a->embed_bits != 32 && a->embed_bits != 16 && a->embed_bits != 8)
                return llmc_cli_usage("compile", "--embed-bits wants 32, 16 or 8, got '%s'", argv[i]);
        } else if (!strcmp(arg, "--logits") && has_value) {
            const char *l = argv[++i];
            a->logits_last = !strcmp(l, "last");
            if (!a->logits_last && strcmp(l, "all"))
                return llmc_cli_usage("compile", "--logits wants last or all, got '%s'", l);
        } else if (!strcmp(arg, "--target") && has_value) {
            a->target = argv[++i];
            if (rt_target_index(a->target) < 0)
                return llmc_cli_usage("compile", "--target wants one of%s, got '%s'", RT_TARGET_NAMES,
                                      a->target);
        } else if (!strcmp(arg, "--kv-cache") && has_value) {
            const char *t = argv[++i];
            a->kv_cache_dtype = !strcmp(t, "f32")    ? LLMC_RT_F32
                                : !strcmp(t, "f16")  ? LLMC_RT_F16
                                : !strcmp(t, "int8") ? LLMC_RT_I8
                                                     : 0;
            if (!a->kv_cache_dtype)
                return llmc_cli_usage("compile", "--kv-cache wants f32, f16 or int8, got '%s'", t);
        } else if (!strcmp(arg, "--tokenizer") && has_value) {
            a->tokenizer = argv[++i];
        } else if (!strcmp(arg, "--calibrate") && has_value) {
            a->calibrate = argv[++i];
        } else if (!strcmp(arg, "--calibrate-ids") && has_value) {
            a->calibrate_ids = argv[++i];
        } else if (!strcmp(arg, "--variant") && has_value) {
            a->variant = argv[++i];
        } else if (!strcmp(arg, "--no-tokenizer")) {
            a->no_tokenizer = 1;
        } else if (!strcmp(arg, "--shadow-layers") && has_value) {
            char *end;
            a->shadow_fraction = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(a->shadow_fraction >= 0 && a->shadow_fraction <= 1))
                return llmc_cli_usage("compile", "--shadow-layers wants a share in [0, 1], got "
                                      "'%s'", argv[i]);
        } else if (!strcmp(arg, "--calib-percentile") && has_value) {
            char *end;
            a->calib_percentile = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(a->calib_percentile > 0 && a->calib_percentile <= 100))
                return llmc_cli_usage("compile", "--calib-percentile wants a number in (0, 100], "
                                      "got '%s'", argv[i]);
        } else if (!strcmp(arg, "--npu-chunk") && has_value) {
            int64_t v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > 1 << 24)
                return llmc_cli_usage("compile", "--npu-chunk wants a token count >= 1, got '%s'",
                                      argv[i]);
            a->npu_chunk = (uint32_t)v;
        } else if (!strcmp(arg, "--npu-export") && has_value) {
            a->npu_export = argv[++i];
        } else if (!strcmp(arg, "--explain")) {
            a->explain = 1;
        } else if (!strcmp(arg, "--dot")) {
            a->dot = 1;
        } else if (!strcmp(arg, "--quiet")) {
            a->quiet = 1;
        } else if (arg[0] == '-') {
            return llmc_cli_usage("compile", "unknown option or missing value: '%s'", arg);
        } else if (!a->model) {
            a->model = arg;
        } else {
            return llmc_cli_usage("compile", "unexpected argument '%s'", arg);
        }
    }
    if (!a->model)
        return llmc_cli_usage("compile", "missing MODEL.onnx");
    if (!a->output)
        return llmc_cli_usage("compile", "missing -o OUT.plan");
    if (a->dot && !a->dump_dir)
        return llmc_cli_usage("compile", "--dot needs --dump-passes DIR (the pictures go beside the dumps)");
    if (a->npu_chunk && !calibrating(a))
        return llmc_cli_usage("compile", "--npu-chunk needs --calibrate TEXT (or --calibrate-ids "
                              "FILE): NPU subgraphs take per-tensor activation scales");
    if (a->npu_export && !a->npu_chunk)
        return llmc_cli_usage("compile", "--npu-export needs --npu-chunk C: it exports the "
                              "plan's NPU subgraphs");
    if (a->max_context && a->npu_chunk > a->max_context)
        return llmc_cli_usage("compile", "--npu-chunk %u is longer than --max-context %u",
                              a->npu_chunk, a->max_context);
    if (a->group < 0) /* NPUs take one weight scale per output channel */
        a->group = a->npu_chunk ? 0 : default_group(a->quant_bits);
    if (calibrating(a) && a->quant_bits != 8)
        return llmc_cli_usage("compile", "--calibrate makes per-tensor int8 activations for "
                              "W8A8 (NPU) plans: use it with --quant w8a8");
    if (a->calibrate && a->calibrate_ids)
        return llmc_cli_usage("compile", "give one of --calibrate TEXT or --calibrate-ids FILE");
    if (a->tokenizer && a->no_tokenizer)
        return llmc_cli_usage("compile", "--tokenizer and --no-tokenizer contradict each other");
    if (a->calib_percentile && !calibrating(a))
        return llmc_cli_usage("compile", "--calib-percentile needs --calibrate TEXT");
    if (!a->calib_percentile)
        a->calib_percentile = CALIB_PERCENTILE;
    if (a->shadow_fraction >= 0 && !calibrating(a))
        return llmc_cli_usage("compile", "--shadow-layers needs --calibrate TEXT");
    if (a->shadow_fraction < 0)
        a->shadow_fraction = SHADOW_FRACTION;
    return LLMC_OK;
}

/* A folder given as the model: the ONNX file and tokenizer.json in it, said
 * on stderr (model_folder.h).  Then the tokenizer --calibrate needs. */
static int resolve_model(compile_args *a, llmc_error *err)
{
    bool folder = llmc_is_folder(a->model);
    if (a->variant && !folder)
        return llmc_cli_usage("compile", "--variant picks a model in a folder; '%s' is a file",
                              a->model);
    int rc = folder ? llmc_model_folder_find(a->model, a->variant, &a->folder, err) : LLMC_OK;
    if (rc)
        return rc;
    if (folder) {
        const char *found = a->folder.tokenizer;
        if (!a->tokenizer && !a->no_tokenizer && found[0])
            a->tokenizer = found;
        fprintf(stderr, "llmc compile: %s: model %s (%s, variant %s), tokenizer %s%s\n",
                a->model, a->folder.model, a->folder.layout, a->folder.variant,
                a->tokenizer ? a->tokenizer : "none",
                a->tokenizer && a->tokenizer != found ? " (--tokenizer)"
                : a->no_tokenizer && found[0]     ? " (--no-tokenizer)"
                : !found[0]                       ? " (no tokenizer.json in the folder)"
                                                  : "");
        a->model = a->folder.model;
    }
    if (a->calibrate && !a->tokenizer)
        return llmc_cli_usage("compile", "--calibrate needs --tokenizer tokenizer.json to "
                              "tokenize '%s' (or --calibrate-ids FILE of token ids)",
                              a->calibrate);
    return LLMC_OK;
}

/* A folder's tokenizer.json that llmc refuses need not stop the model. */
static int compile_tokenizer(const compile_args *a, uint8_t **bytes, size_t *size,
                             llmc_error *err)
{
    int rc = llmc_tokenizer_compile(a->tokenizer, bytes, size, err);
    if (rc && a->tokenizer == a->folder.tokenizer)
        llmc_fail(err, rc, "it came with the folder: --no-tokenizer compiles the model "
                  "without it");
    return rc;
}

/* ---- the progress line ---- */

/* A compile quicker than this shows no progress at all. */
#define PROGRESS_AFTER_S 2.0
/* Redrawn at most this often. */
#define PROGRESS_EVERY_S 0.1

typedef struct {
    bool enabled;               /* stderr is a terminal, no --quiet, no --explain */
    struct timespec start;
    double drawn_at;
    bool shown;                 /* a line is on the terminal */
} progress_line;

static double seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + 1e-9 * (double)(now.tv_nsec - t0->tv_nsec);
}

static void progress_init(progress_line *p, const compile_args *a)
{
    memset(p, 0, sizeof *p);
    /* --explain writes its own lines to stderr, which a redrawn line would garble */
    p->enabled = !a->quiet && !a->explain && isatty(STDERR_FILENO);
    clock_gettime(CLOCK_MONOTONIC, &p->start);
}

/* llmc_progress_fn: bytes when the total is large (weights), else steps
 * (passes, named by `phase`). */
static void progress_report(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
    progress_line *p = ctx;
    double now = p->enabled ? seconds_since(&p->start) : 0;
    if (!p->enabled || now < PROGRESS_AFTER_S || (now - p->drawn_at < PROGRESS_EVERY_S && done < total))
        return;
    p->drawn_at = now;
    p->shown = true;
    if (total >= (1u << 20))
        fprintf(stderr, "\rllmc compile: %s: %.2f of %.2f GB (%d%%)\033[K", phase, (double)done / 1e9,
                (double)total / 1e9, (int)(100 * done / total));
    else
        fprintf(stderr, "\rllmc compile: pass %llu of %llu: %s\033[K", (unsigned long long)done + 1,
                (unsigned long long)total, phase);
}

/* Erases the line before anything else is printed. */
static void progress_clear(progress_line *p)
{
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = false;
}

static void print_pass_table(const llmc_pass_record *r, int n)
{
    printf("%-4s %-22s %8s  %-16s  %s\n", "#", "pass", "nodes", "digest", "what it did");
    for (int i = 0; i < n; i++)
        printf("%-4d %-22s %8u  %016llx%s%s\n", i, r[i].name, r[i].nodes, (unsigned long long)r[i].digest,
               r[i].detail[0] ? "  " : "", r[i].detail);
}

static void print_stats(const char *path, const llmc_codegen_stats *st)
{
    printf("wrote %s: %u ops, %u tensors, arena %llu bytes, weights %llu bytes, file %llu bytes\n",
           path, st->n_ops, st->n_tensors, (unsigned long long)st->arena_bytes,
           (unsigned long long)st->weight_bytes, (unsigned long long)st->file_bytes);
    if (st->layers)
        printf("ops per decoder layer: %u", st->layer_ops_max);
    if (st->layers && st->layer_ops_min != st->layer_ops_max)
        printf(" (%u in the smallest)", st->layer_ops_min);
    if (st->layers)
        printf(" over %u layers", st->layers);
    /* A layer left unfused is a surprise worth a line without --explain. */
    if (st->layers && st->op_counts[LLMC_RT_OP_Attention] < st->layers)
        printf("; attention fused in only %u of %u layers (--explain says why)", st->op_counts[LLMC_RT_OP_Attention],
               st->layers);
    if (st->layers)
        printf("\n");
    if (st->n_subgraphs)
        printf("npu subgraphs: %u for chunks of %u tokens (%u of %u ops), each built once and "
               "shared by every chunk; their weights %llu bytes, read in place: the same for "
               "any prompt length or chunk count\n", st->n_subgraphs, st->npu_chunk,
               st->subgraph_ops, st->n_ops, (unsigned long long)st->subgraph_weight_bytes);
}

/* Without position tables, the context a plan is sized for by default;
 * the most --max-context takes. */
#define DEFAULT_MAX_CONTEXT 2048u
#define MAX_CONTEXT_LIMIT (1u << 24)

/* The max context from the model: a position table's rows bound it (the
 * model computes nothing past them), by default and against an explicit
 * --max-context. */
static int resolve_max_context(compile_args *a, const llmc_graph *g, llmc_error *err)
{
    llmc_position_limit lim;
    llmc_position_tables(g, &lim);
    if (lim.rows && a->max_context > lim.rows)
        return llmc_fail(err, LLMC_E_USAGE, "--max-context %u is more than the %lld rows of position table '%s' "
                         "(read by node '%s'): the model has no position past %lld; pass at most %lld or leave "
                         "--max-context out", a->max_context, (long long)lim.rows, g->values[lim.table].name,
                         g->nodes[lim.gather].name, (long long)lim.rows - 1, (long long)lim.rows);
    if (!a->max_context)
        a->max_context = !lim.rows ? DEFAULT_MAX_CONTEXT : lim.rows < MAX_CONTEXT_LIMIT ? (uint32_t)lim.rows
                                                                                        : MAX_CONTEXT_LIMIT;
    if (a->npu_chunk > a->max_context)
        return llmc_fail(err, LLMC_E_USAGE, "--npu-chunk %u is longer than the max context %u", a->npu_chunk,
                         a->max_context);
    return LLMC_OK;
}

int llmc_cmd_compile(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        printf(compile_help, CALIB_CONTEXT, CALIB_CONTEXT, CALIB_PERCENTILE, SHADOW_FRACTION);
        return 0;
    }
    compile_args a;
    llmc_error err = {0};
    int rc = parse_args(argc, argv, &a);
    if (!rc)
        rc = resolve_model(&a, &err);
    if (rc == LLMC_E_USAGE && !err.msg[0])
        return rc;
    if (rc)
        return llmc_cli_report(&err);
    llmc_graph g;
    llmc_graph_init(&g);
    llmc_import_report report;
    llmc_import_options io = {.n_dims = a.n_dims, .dims = a.dims, .report = &report};
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = a.max_context, .explain = a.explain, .log = stderr,
                         .quant_bits = a.quant_bits,
                         .lm_head_bits = a.quant_bits == 8 ? 8 : a.lm_head_bits,
                         .quant_group = a.group,
                         .embed_bits = a.embed_bits ? a.embed_bits : a.quant_bits ? 8 : 32,
                         .logits_last = a.logits_last};
    progress_line progress;
    progress_init(&progress, &a);
    /* the dumps appear at --dump-passes DIR once every pass has run, or not at all */
    llmc_out_dir dump_dir = {0};
    if (a.dump_dir)
        rc = llmc_out_dir_create(a.dump_dir, &dump_dir, &err);
    llmc_pipeline_dumps dumps = {.dir = dump_dir.tmp, .dot = a.dot, .progress = progress_report,
                                 .progress_ctx = &progress};
    llmc_pass_record records[MAX_PASSES];
    int n_records = 0;
    llmc_codegen_stats stats;
    uint8_t *tokenizer = NULL;
    size_t tokenizer_size = 0;
    if (a.tokenizer)   /* first: a refused tokenizer.json costs no import */
        rc = compile_tokenizer(&a, &tokenizer, &tokenizer_size, &err);
    if (!rc)
        rc = llmc_import_onnx(a.model, &io, &g, &err);
    if (!rc) {
        char widened[512];
        llmc_import_report_line(&report, widened, sizeof widened);
        if (widened[0])
            printf("%s\n", widened);
        if (report.inlined_if[0])
            printf("%s\n", report.inlined_if);
    }
    if (!rc && !(rc = resolve_max_context(&a, &g, &err)))
        ctx.max_context = a.max_context;
    llmc_calibration calibration = {0};
    if (!rc && calibrating(&a)) {
        llmc_calibrate_options copt = {
            .text = a.calibrate, .ids = a.calibrate_ids, .percentile = a.calib_percentile,
            .context = a.max_context < CALIB_CONTEXT ? a.max_context : CALIB_CONTEXT,
            .target = llmc_cli_host_target()};
        rc = llmc_calibrate(a.model, &io, &ctx, tokenizer, tokenizer_size, &copt, &calibration,
                            &err);
        if (!rc)
            llmc_calibration_print(&calibration, stdout);
        ctx.calibration = &calibration;
        ctx.shadow_fraction = a.shadow_fraction;
        ctx.npu_chunk = a.npu_chunk;
    }
    if (!rc)
        rc = llmc_pipeline_run_dumps(&g, &ctx, &dumps, records, &n_records, &err);
    rc = llmc_out_dir_finish(&dump_dir, NULL, rc, &err);
    progress_clear(&progress);
    if (!rc) {
        print_pass_table(records, n_records);
        fflush(stdout);
        llmc_codegen_options co = {.max_context = a.max_context, .n_passes = n_records, .passes = records,
                                   .threads = a.threads, .target = a.target,
                                   .kv_cache_dtype = a.kv_cache_dtype, .progress = progress_report,
                                   .progress_ctx = &progress, .tokenizer = tokenizer,
                                   .tokenizer_size = tokenizer_size};
        rc = llmc_codegen_to_file(&g, &co, a.output, &stats, &err);
    }
    progress_clear(&progress);
    if (!rc) {
        printf("target %s, %s weights\n", a.target,
               a.quant_bits == 8 ? "w8a8" : a.quant_bits == 4 ? "w4a8" : "f32");
        for (int i = 0; i < n_records; i++) /* a pre-quantized file's weights */
            if (!strcmp(records[i].name, "quantize") && strstr(records[i].detail, "the file's"))
                printf("quantized: %s\n", records[i].detail);
        print_stats(a.output, &stats);
        if (tokenizer)
            printf("tokenizer %s: %zu bytes\n", a.tokenizer, tokenizer_size);
    }
    uint32_t exported = 0;
    if (!rc && a.npu_export)
        rc = llmc_npu_export(a.output, a.npu_export, &exported, &err);
    if (!rc && a.npu_export)
        printf("npu export: %u subgraphs -> %s (%s)\n", exported, a.npu_export, "manifest.json");
    free(tokenizer);
    llmc_calibration_free(&calibration);
    llmc_graph_free(&g);
    return rc ? llmc_cli_report(&err) : 0;
}
