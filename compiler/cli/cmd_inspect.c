/* llmc inspect PLAN [--json | --resolver | --dump-weights DIR]: ops by type, tensors, weight and
 * arena bytes, inputs/outputs, and the passes that produced the plan with
 * their digests; or the op resolver entries its ops need, as C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/layer_name.h"
#include "support/out_file.h"
#include "tokenizer_format.h"
#include "tokenizer_state.h"
#include "cli.h"
#include "ir/io_roles.h"
#include "ir/ir.h"
#include "llmc_rt_resolver.h"
#include "op_resolver.h"
#include "plan_format.h"
#include "tensor_traits.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "quant_format.h"

static const char inspect_help[] =
    "usage: llmc inspect PLAN [--json | --resolver | --dump-weights DIR]\n"
    "\n"
    "Describes a plan: format, target, source model hash, arena bytes, weight bytes,\n"
    "tensors, ops by type, inputs/outputs with their roles, and the passes that ran\n"
    "with their digests and what each reported doing.  --json prints one JSON\n"
    "object (keys: ops_total, layers, op_counts, arena_bytes, session_bytes, weight_bytes, tensors,\n"
    "passes, ...).  --resolver prints, as a C macro LLMC_RESOLVER_ENTRIES, the op\n"
    "resolver entries the plan's ops need (op codes, Unary and Binary kinds, Binary's\n"
    "any-dtype path, Gather and Linear kernels), for a firmware build that links only\n"
    "those kernels: static LLMC_RT_RESOLVER(name, LLMC_RESOLVER_ENTRIES); then\n"
    "llmc_rt_session_init_ops (runtime/llmc_rt.h).  --dump-weights writes each weight matrix\n"
    "(dense float32, or quantized tiles dequantized by the runtime: an embedding table by the\n"
    "Gather's row reader, a Linear's weight by the kernels' block loop) to DIR/INDEX.bin as\n"
    "float32 [rows, cols] and prints INDEX NAME ROWS COLS FORMAT.\n";

typedef struct {
    const char *compiler_version, *target;
    uint64_t weight_bytes;
    uint32_t arena_tensors, weight_tensors;
    uint32_t op_counts[LLMC_RT_OP_COUNT];
    uint32_t layer_ops_min, layer_ops_max;  /* ops per decoder layer (op names) */
    uint64_t kv_position_bytes;             /* fused caches: K and V of one position */
    /* fused caches by kind, [0] full, [1] windowed: how many, and the pool
     * bytes one takes at max context (the largest of its kind) */
    uint32_t kv_layers[2];
    uint64_t kv_layer_bytes[2];
    uint32_t window_max;                    /* the widest sliding window (0: none) */
    float softcap_max;                      /* the largest score soft-cap (0: none) */
} plan_summary;

typedef struct {
    const char *name;
    const char *detail;     /* "" when the pass reported nothing */
    uint32_t nodes;
    uint64_t digest;
} pass_row;

/* The --kv-cache spelling of a Plan.kv_cache_dtype (verified known). */
static const char *kv_dtype_name(int dtype)
{
    return dtype == LLMC_RT_F16 ? "f16" : dtype == LLMC_RT_I8 ? "int8" : "f32";
}

/* One fused cache: its bytes per position, kind and pool bytes at max
 * context (session_prepare.c sizes the pool the same way: rt_kv_ring). */
static void tally_cache(const llmc_rt_plan *p, const rt_op_desc *op, plan_summary *s)
{
    const rt_plan *rp = rt_plan_of(p);
    uint32_t chunks = rt_kv_chunks(rp->max_context, rp->kv_chunk), kind = op->window != 0;
    uint64_t bytes = (uint64_t)rt_kv_ring(op->window, rp->kv_chunk, chunks) * rp->kv_slot_bytes;
    s->kv_position_bytes += rt_kv_position_bytes(rp->kv_cache_dtype, op->kv_heads, op->head_dim);
    s->kv_layers[kind]++;
    s->kv_layer_bytes[kind] = bytes > s->kv_layer_bytes[kind] ? bytes : s->kv_layer_bytes[kind];
    s->window_max = op->window > s->window_max ? op->window : s->window_max;
    s->softcap_max = op->softcap > s->softcap_max ? op->softcap : s->softcap_max;
}

static int summarize(const llmc_rt_plan *p, plan_summary *s, llmc_rt_error *rt)
{
    fb_reader r = rt_reader(p);
    fb_table root;
    memset(s, 0, sizeof *s);
    if (fb_table_at(&r, rt_plan_of(p)->root, "Plan", &root, rt) || fb_string_field(&r, &root, PLAN_TARGET, &s->target, rt) ||
        fb_string_field(&r, &root, PLAN_COMPILER_VERSION, &s->compiler_version, rt))
        return -1;
    for (uint32_t i = 0; i < rt_plan_of(p)->n_tensors; i++) {
        rt_tensor_desc t;
        if (rt_read_tensor(&r, p, i, &t, rt))
            return -1;
        s->arena_tensors += t.kind == KIND_ARENA;
        s->weight_tensors += t.kind == KIND_WEIGHT;
    }
    for (uint32_t i = 0; i < rt_plan_of(p)->n_segments; i++) {
        rt_segment_desc seg;
        if (rt_read_segment(&r, p, i, &seg, rt))
            return -1;
        s->weight_bytes += seg.size;
    }
    llmc_layer_tally tally = {{0}, 0};
    for (uint32_t i = 0; i < rt_plan_of(p)->n_ops; i++) {
        rt_op_desc op;
        if (rt_read_op(&r, p, i, &op, rt))
            return -1;
        s->op_counts[op.code]++;
        if (op.code == LLMC_RT_OP_Attention)
            tally_cache(p, &op, s);
        llmc_layer_tally_add(&tally, op.name);
    }
    llmc_layer_tally_limit(&tally, rt_plan_of(p)->n_layers);
    llmc_layer_tally_range(&tally, &s->layer_ops_min, &s->layer_ops_max);
    return 0;
}

static int read_pass(const llmc_rt_plan *p, uint32_t i, pass_row *row, llmc_rt_error *rt)
{
    fb_reader r = rt_reader(p);
    fb_vector passes = {rt_plan_of(p)->passes, rt_plan_of(p)->n_passes};
    fb_table t;
    uint64_t nodes, digest;
    if (fb_vec_table(&r, passes, i, "PassRecord", &t, rt) || fb_string_field(&r, &t, PASS_NAME, &row->name, rt) ||
        fb_string_field(&r, &t, PASS_DETAIL, &row->detail, rt) ||
        fb_scalar(&r, &t, PASS_NODES, 4, 0, &nodes, rt) || fb_scalar(&r, &t, PASS_DIGEST, 8, 0, &digest, rt))
        return -1;
    row->nodes = (uint32_t)nodes;
    row->digest = digest;
    return 0;
}

static void json_io(const llmc_rt_plan *p, int is_output, uint32_t n)
{
    printf("\"%s\": [", is_output ? "outputs" : "inputs");
    for (uint32_t i = 0; i < n; i++) {
        llmc_rt_io io;
        llmc_rt_plan_io(p, is_output, i, &io);
        printf("%s{\"name\": ", i ? ", " : "");
        llmc_cli_json_string(io.name);
        printf(", \"dtype\": \"%s\", \"role\": \"%s\", \"layer\": %d}", llmc_dtype_name(io.dtype),
               llmc_io_role_name(io.role), io.layer);
    }
    printf("]");
}

/* Plan.tokenizer in words: "byte-level BPE (qwen2 split, NFC)" etc. */
static const char *tokenizer_kind(const rt_tokenizer *t)
{
    if (t->model == TOK_MODEL_SENTENCEPIECE) return "SentencePiece BPE";
    if (t->split == TOK_SPLIT_QWEN2) return t->flags & TOK_F_NFC ? "byte-level BPE, Qwen2 split, NFC" : "byte-level BPE, Qwen2 split";
    if (t->split == TOK_SPLIT_LLAMA3) return "byte-level BPE, Llama 3 split";
    if (t->split == TOK_SPLIT_GPT2) return "byte-level BPE, GPT-2 split";
    return "byte-level BPE";
}

static long long id_or_minus_one(uint32_t id) { return id == UINT32_MAX ? -1 : (long long)id; }

static void json_tokenizer(const llmc_rt_plan *p)
{
    llmc_rt_tokenizer tok;
    if (llmc_rt_plan_tokenizer(p, &tok, NULL)) {
        printf(", \"tokenizer\": null");
        return;
    }
    const rt_tokenizer *t = rt_tok_const(&tok);
    printf(", \"tokenizer\": {\"kind\": \"%s\", \"ids\": %u, \"bos\": %lld, \"eos\": %lld, \"segment\": %u, \"bytes\": %zu}",
           tokenizer_kind(t), t->n_ids, id_or_minus_one(t->bos), id_or_minus_one(t->eos), rt_plan_of(p)->tokenizer_segment, t->size);
}

static void print_tokenizer_text(const llmc_rt_plan *p)
{
    llmc_rt_tokenizer tok;
    if (llmc_rt_plan_tokenizer(p, &tok, NULL)) {
        printf("tokenizer   none\n");
        return;
    }
    const rt_tokenizer *t = rt_tok_const(&tok);
    printf("tokenizer   %s, %u ids, bos %lld, eos %lld, segment %u (%zu bytes)\n", tokenizer_kind(t), t->n_ids,
           id_or_minus_one(t->bos), id_or_minus_one(t->eos), rt_plan_of(p)->tokenizer_segment, t->size);
}

static int print_json(const char *path, const llmc_rt_plan *p, const plan_summary *s, llmc_rt_error *rt)
{
    printf("{\"file\": ");
    llmc_cli_json_string(path);
    printf(", \"file_bytes\": %zu, \"format_version\": %u, \"target\": ", rt_plan_of(p)->size, LLMC_RT_FORMAT_VERSION);
    llmc_cli_json_string(s->target);
    printf(", \"compiler_version\": ");
    llmc_cli_json_string(s->compiler_version);
    printf(", \"source_hash\": \"%016llx\", \"max_context\": %u, \"arena_bytes\": %llu, \"kv_bytes\": %llu, "
           "\"weight_bytes\": %llu, \"segments\": %u, \"tensors\": %u, \"arena_tensors\": %u, "
           "\"weight_tensors\": %u, \"layers\": %u, \"vocab_size\": %u, \"gemm_min_rows\": %u, "
           "\"prefill_kernel\": \"%s\", \"decode_isa\": \"%s\", \"prefill_isa\": \"%s\", "
           "\"decode_kernels_here\": \"%s\", \"prefill_kernels_here\": \"%s\", "
           "\"gemv_prefetch_here\": %u, \"ops_total\": %u, \"ops_per_layer\": %u, "
           "\"kv_cache_dtype\": \"%s\", \"kv_bytes_per_position\": %llu, \"session_bytes\": %llu, "
           "\"kv_full_layers\": %u, \"kv_full_layer_bytes\": %llu, \"kv_window_layers\": %u, "
           "\"kv_window_layer_bytes\": %llu, \"attention_window\": %u, \"attention_softcap\": %g, "
           "\"op_counts\": {",
           (unsigned long long)rt_plan_of(p)->source_hash, rt_plan_of(p)->max_context, (unsigned long long)rt_plan_of(p)->arena_size,
           (unsigned long long)rt_plan_of(p)->kv_bytes, (unsigned long long)s->weight_bytes, rt_plan_of(p)->n_segments, rt_plan_of(p)->n_tensors,
           s->arena_tensors, s->weight_tensors, rt_plan_of(p)->n_layers, rt_plan_of(p)->vocab_size, rt_plan_of(p)->gemm_min_rows,
           rt_prefill_kernel_name(rt_plan_of(p)->prefill_kernel), rt_kernel_isa_name(rt_plan_of(p)->decode_isa),
           rt_kernel_isa_name(rt_plan_of(p)->prefill_isa), llmc_rt_plan_step_isa(p, 1),
           llmc_rt_plan_step_isa(p, rt_plan_of(p)->gemm_min_rows), rt_plan_of(p)->gemv_prefetch,
           rt_plan_of(p)->n_ops, s->layer_ops_max,
           kv_dtype_name(rt_plan_of(p)->kv_cache_dtype), (unsigned long long)s->kv_position_bytes,
           (unsigned long long)llmc_rt_session_memory(p), s->kv_layers[0],
           (unsigned long long)s->kv_layer_bytes[0], s->kv_layers[1], (unsigned long long)s->kv_layer_bytes[1],
           s->window_max, (double)s->softcap_max);
    const char *sep = "";
    for (int c = 0; c < LLMC_RT_OP_COUNT; c++) {
        if (!s->op_counts[c])
            continue;
        printf("%s\"%s\": %u", sep, rt_op_code_name(c), s->op_counts[c]);
        sep = ", ";
    }
    printf("}");
    json_tokenizer(p);
    printf(", ");
    json_io(p, 0, rt_plan_of(p)->n_inputs);
    printf(", ");
    json_io(p, 1, rt_plan_of(p)->n_outputs);
    printf(", \"passes\": [");
    for (uint32_t i = 0; i < rt_plan_of(p)->n_passes; i++) {
        pass_row row;
        if (read_pass(p, i, &row, rt))
            return -1;
        printf("%s{\"name\": ", i ? ", " : "");
        llmc_cli_json_string(row.name);
        printf(", \"nodes\": %u, \"digest\": \"%016llx\", \"detail\": ", row.nodes,
               (unsigned long long)row.digest);
        llmc_cli_json_string(row.detail);
        printf("}");
    }
    printf("]}\n");
    return 0;
}

static void print_io_text(const llmc_rt_plan *p, int is_output, uint32_t n)
{
    printf("%s:\n", is_output ? "outputs" : "inputs");
    for (uint32_t i = 0; i < n; i++) {
        llmc_rt_io io;
        llmc_rt_plan_io(p, is_output, i, &io);
        printf("  %-32s %-6s %s", io.name, llmc_dtype_name(io.dtype), llmc_io_role_name(io.role));
        int cache_role = io.role >= LLMC_ROLE_PAST_KEY && io.role != LLMC_ROLE_LOGITS;
        printf(cache_role ? " (layer %d)\n" : "\n", io.layer);
    }
}

/* Where the Linears' quantization came from: the quantize pass's report
 * (the file's own quantization, or --quant's). */
static void print_quantization(const llmc_rt_plan *p)
{
    for (uint32_t i = 0; i < rt_plan_of(p)->n_passes; i++) {
        pass_row row;
        if (read_pass(p, i, &row, NULL) == 0 && !strcmp(row.name, "quantize"))
            printf("quantized   %s\n", row.detail[0] ? row.detail : "nothing: float32 Linears");
    }
}

static int print_text(const char *path, const llmc_rt_plan *p, const plan_summary *s, llmc_rt_error *rt)
{
    printf("plan        %s (%zu bytes), format %u, target %s, %s\n", path, rt_plan_of(p)->size, LLMC_RT_FORMAT_VERSION,
           s->target, s->compiler_version);
    printf("source      xxh64 %016llx\n", (unsigned long long)rt_plan_of(p)->source_hash);
    printf("max context %u tokens\n", rt_plan_of(p)->max_context);
    printf("arena       %llu bytes\n", (unsigned long long)rt_plan_of(p)->arena_size);
    printf("kv store    %llu bytes\n", (unsigned long long)rt_plan_of(p)->kv_bytes);
    printf("session     %llu bytes of caller memory at max context (llmc_rt_session_memory: "
           "arena, KV store, caches)\n", (unsigned long long)llmc_rt_session_memory(p));
    if (rt_plan_of(p)->n_caches)
        printf("kv cache    %s, %llu bytes per position (%u caches, %u positions per chunk)\n",
               kv_dtype_name(rt_plan_of(p)->kv_cache_dtype), (unsigned long long)s->kv_position_bytes, rt_plan_of(p)->n_caches,
               rt_plan_of(p)->kv_chunk);
    if (s->kv_layers[1])
        printf("kv layers   %u full of %llu bytes, %u windowed (window %u) of %llu bytes at max context\n",
               s->kv_layers[0], (unsigned long long)s->kv_layer_bytes[0], s->kv_layers[1], s->window_max,
               (unsigned long long)s->kv_layer_bytes[1]);
    if (s->softcap_max > 0)
        printf("attention   scores soft-capped at %g\n", (double)s->softcap_max);
    printf("weights     %llu bytes in %u segments\n", (unsigned long long)s->weight_bytes, rt_plan_of(p)->n_segments);
    printf("tensors     %u (%u arena, %u weights)\n", rt_plan_of(p)->n_tensors, s->arena_tensors, s->weight_tensors);
    printf("layers      %u, vocab %u\n", rt_plan_of(p)->n_layers, rt_plan_of(p)->vocab_size);
    printf("prefill     quantized Linears of >= %u rows on the %s kernel\n", rt_plan_of(p)->gemm_min_rows,
           rt_prefill_kernel_name(rt_plan_of(p)->prefill_kernel));
    printf("kernels     steps of < %u rows on %s, longer on %s; on this CPU: %s and %s\n",
           rt_plan_of(p)->gemm_min_rows, rt_kernel_isa_name(rt_plan_of(p)->decode_isa),
           rt_kernel_isa_name(rt_plan_of(p)->prefill_isa), llmc_rt_plan_step_isa(p, 1),
           llmc_rt_plan_step_isa(p, rt_plan_of(p)->gemm_min_rows));
    if (rt_plan_of(p)->gemv_prefetch)
        printf("gemv        prefetches %u bytes ahead of its weights on this CPU\n",
               rt_plan_of(p)->gemv_prefetch);
    print_quantization(p);
    printf("ops         %u, %u per decoder layer\n", rt_plan_of(p)->n_ops, s->layer_ops_max);
    print_tokenizer_text(p);
    for (int c = 0; c < LLMC_RT_OP_COUNT; c++)
        if (s->op_counts[c])
            printf("  %-12s %u\n", rt_op_code_name(c), s->op_counts[c]);
    print_io_text(p, 0, rt_plan_of(p)->n_inputs);
    print_io_text(p, 1, rt_plan_of(p)->n_outputs);
    printf("passes:\n");
    for (uint32_t i = 0; i < rt_plan_of(p)->n_passes; i++) {
        pass_row row;
        if (read_pass(p, i, &row, rt))
            return -1;
        printf("  %-22s %8u nodes  %016llx%s%s\n", row.name, row.nodes, (unsigned long long)row.digest,
               row.detail[0] ? "  " : "", row.detail);
    }
    return 0;
}

/* The op resolver entries the plan's ops need (runtime/op_resolver.h). */
typedef struct {
    bool op[LLMC_RT_OP_COUNT], unary[LLMC_RT_UNARY_COUNT], binary[LLMC_RT_BINARY_COUNT];
    bool binary_any_dtype, gather[LLMC_RT_GATHER_COUNT], linear[LLMC_RT_LINEAR_COUNT];
    bool kv_cache[LLMC_RT_KV_COUNT];
} resolver_use;

/* What decides op's entries (its inputs 0 and 1 read from the plan). */
static int op_key_of(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op, rt_op_key *key,
                     llmc_rt_error *rt)
{
    rt_tensor_desc in[2] = {{.dtype = -1, .layout = LLMC_RT_LAYOUT_Dense},
                            {.dtype = -1, .layout = LLMC_RT_LAYOUT_Dense}};
    for (uint32_t k = 0; k < 2 && k < op->inputs.len; k++)
        if (rt_read_tensor(r, p, fb_vec_u32(r, op->inputs, k), &in[k], rt))
            return -1;
    *key = (rt_op_key){op->code, op->kind, {in[0].dtype, in[1].dtype},
                       {in[0].layout, in[1].layout}, rt_plan_of(p)->prefill_kernel, rt_plan_of(p)->kv_cache_dtype};
    return 0;
}

static int collect_resolver(const llmc_rt_plan *p, resolver_use *u, llmc_rt_error *rt)
{
    fb_reader r = rt_reader(p);
    memset(u, 0, sizeof *u);
    for (uint32_t i = 0; i < rt_plan_of(p)->n_ops; i++) {
        rt_op_desc op;
        rt_op_key key;
        if (rt_read_op(&r, p, i, &op, rt) || op_key_of(&r, p, &op, &key, rt))
            return -1;
        rt_op_needs need = rt_op_needs_of(&key);
        u->op[need.op] = true;
        if (need.unary >= 0)
            u->unary[need.unary] = true;
        if (need.binary >= 0)
            u->binary[need.binary] = true;
        u->binary_any_dtype |= need.binary_any_dtype;
        if (need.gather >= 0)
            u->gather[need.gather] = true;
        if (need.linear >= 0)
            u->linear[need.linear] = true;
        if (need.kv_cache >= 0)
            u->kv_cache[need.kv_cache] = true;
    }
    return 0;
}

static void print_resolver_entry(const char *macro, const char *name)
{
    printf(" \\\n    %s(%s)", macro, name);
}

static void print_resolver(const char *path, const resolver_use *u)
{
    printf("/* llmc inspect --resolver %s\n"
           " * The op resolver entries the plan's ops use (op codes, Unary and Binary\n"
           " * kinds, Gather and Linear kernels, KV cache dtype).  In the firmware:\n"
           " *   static LLMC_RT_RESOLVER(plan_ops, LLMC_RESOLVER_ENTRIES);\n"
           " *   llmc_rt_plan_open_ops(&plan, bytes, size, flags, &plan_ops, ...);\n"
           " *   llmc_rt_session_init_ops(&session, &plan, context, &plan_ops, ...); */\n"
           "#include \"llmc_rt_resolver.h\"\n"
           "#define LLMC_RESOLVER_ENTRIES",
           path);
    for (int c = 0; c < LLMC_RT_OP_COUNT; c++)
        if (u->op[c])
            print_resolver_entry("LLMC_RT_OP", rt_op_code_name(c));
    for (int k = 0; k < LLMC_RT_UNARY_COUNT; k++)
        if (u->unary[k])
            print_resolver_entry("LLMC_RT_UNARY", rt_unary_kind_name(k));
    for (int k = 0; k < LLMC_RT_BINARY_COUNT; k++)
        if (u->binary[k])
            print_resolver_entry("LLMC_RT_BINARY", rt_binary_kind_name(k));
    if (u->binary_any_dtype)
        printf(" \\\n    LLMC_RT_BINARY_ANY_DTYPE");
    for (int k = 0; k < LLMC_RT_GATHER_COUNT; k++)
        if (u->gather[k])
            print_resolver_entry("LLMC_RT_GATHER", rt_gather_kernel_name(k));
    for (int k = 0; k < LLMC_RT_LINEAR_COUNT; k++)
        if (u->linear[k])
            print_resolver_entry("LLMC_RT_LINEAR", rt_linear_kernel_name(k));
    for (int k = 0; k < LLMC_RT_KV_COUNT; k++)
        if (u->kv_cache[k])
            print_resolver_entry("LLMC_RT_KV_CACHE", rt_kv_cache_name(k));
    printf("\n");
}

static int inspect_resolver(const char *path, const llmc_rt_plan *p, llmc_rt_error *rt)
{
    resolver_use use;
    if (collect_resolver(p, &use, rt))
        return -1;
    print_resolver(path, &use);
    return 0;
}

/* ---- --dump-weights DIR ---- */

/* W [n, k] of QWeightTiles as the Linear kernels dequantize it
 * (rt_dequant_block_generic), row-major into w. */
static void dequantize_tiles(const rt_qweight_shape *s, const uint8_t *bytes, float *w)
{
    float panel[64 * 256];
    for (int64_t ht = 0; ht < s->np / s->hp; ht++)
        for (int64_t g = 0; g < s->kp / s->group; g++)
            for (int64_t i0 = 0; i0 < s->group; i0 += 256) {
                int64_t i1 = s->group - i0 < 256 ? s->group : i0 + 256;
                rt_dequant_block_generic(bytes + rt_qweight_block_offset(s, ht, g), s, i0, i1, panel, s->hp);
                for (int64_t i = i0; i < i1 && g * s->group + i < s->k; i++)
                    for (int r = 0; r < s->hp && ht * s->hp + r < s->n; r++)
                        w[(ht * s->hp + r) * s->k + g * s->group + i] = panel[(i - i0) * s->hp + r];
            }
}

/* Every row of table `name` [n, k] as the Gather reads it (k_gather_rows). */
static int gather_table(const char *name, const rt_tensor_format *f, const uint8_t *bytes, int64_t n, int64_t k,
                        float *w, llmc_error *err)
{
    int64_t *ids = malloc(sizeof *ids * (size_t)(n > 0 ? n : 1));
    if (!ids)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        ids[i] = i;
    rt_view data = {f->dtype, 2, {n, k}, (void *)bytes}, idx = {LLMC_RT_I64, 1, {n}, ids},
            y = {LLMC_RT_F32, 2, {n, k}, w};
    llmc_rt_error rt = {0};
    llmc_rt_status st = k_gather_rows(f, &data, &idx, &y, &rt);
    free(ids);
    return st ? llmc_fail(err, LLMC_E_RUNTIME, "table '%s': %s", name, rt.msg) : LLMC_OK;
}

/* Which tensors a Gather reads as its table (input 0): tables[t]. */
static int gather_tables(const llmc_rt_plan *p, bool *tables, llmc_rt_error *rt)
{
    fb_reader r = rt_reader(p);
    for (uint32_t i = 0; i < rt_plan_of(p)->n_ops; i++) {
        rt_op_desc op;
        if (rt_read_op(&r, p, i, &op, rt))
            return -1;
        if (op.code == LLMC_RT_OP_Gather && op.inputs.len > 0) {
            uint32_t t = fb_vec_u32(&r, op.inputs, 0);
            if (t < rt_plan_of(p)->n_tensors)
                tables[t] = true;
        }
    }
    return 0;
}

static const char *tile_format_name(const rt_qweight_shape *s)
{
    if (s->coef == RT_QCOEF_FLOAT)
        return s->bits == 4 ? "uint4-tiles-f32" : "int8-tiles-f32";
    return s->bits == 4 ? "uint4-tiles" : "int8-tiles";
}

/* Weight tensor t as float32 [n, k], row-major, into DIR/<t>.bin, and a
 * line "t name n k format" on stdout: QWeightTiles dequantized by the
 * runtime (a Gather's table by its row reader, a Linear's weight by the
 * kernels' block loop), dense float32 as it is; matrices of other formats
 * are skipped. */
static int dump_weight(const llmc_rt_plan *p, uint32_t t, bool table, const char *dir, llmc_error *err)
{
    fb_reader r = rt_reader(p);
    llmc_rt_error rt = {0};
    rt_tensor_desc d;
    rt_segment_desc seg;
    if (rt_read_tensor(&r, p, t, &d, &rt) || (d.kind == KIND_WEIGHT && rt_read_segment(&r, p, d.segment, &seg, &rt)))
        return llmc_fail(err, LLMC_E_RUNTIME, "%s", rt.msg);
    bool tiles = d.layout == LLMC_RT_LAYOUT_QWeightTiles;
    if (d.kind != KIND_WEIGHT || d.dims.len != 2 || !(tiles || (d.layout == LLMC_RT_LAYOUT_Dense && d.dtype == LLMC_RT_F32)))
        return LLMC_OK;
    const uint8_t *bytes = rt_plan_of(p)->base + seg.offset;
    int64_t dims[2] = {fb_affine(fb_vec_affine(&r, d.dims, 0)).c, fb_affine(fb_vec_affine(&r, d.dims, 1)).c};
    int64_t n = dims[0], k = dims[1];
    rt_tensor_format f = rt_format_of(&d);
    rt_qweight_shape s;
    if (tiles && !rt_qweight_shape_of(&f, 2, dims, &s))
        return llmc_fail(err, LLMC_E_INPUT, "weight '%s': bad tile shape", d.name);
    char path[4096];
    snprintf(path, sizeof path, "%s/%u.bin", dir, t);
    float *w = malloc(sizeof *w * (size_t)(n * k > 0 ? n * k : 1));
    if (!w)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory for weight '%s'", d.name);
    llmc_output file;
    FILE *out = llmc_out_create(path, &file, err);
    if (!out) {
        free(w);
        return err->code;
    }
    int rc = LLMC_OK;
    if (tiles && table)
        rc = gather_table(d.name, &f, bytes, n, k, w, err);
    else if (tiles)
        dequantize_tiles(&s, bytes, w);
    else
        memcpy(w, bytes, sizeof *w * (size_t)(n * k));
    if (!rc && fwrite(w, sizeof *w, (size_t)(n * k), out) != (size_t)(n * k))
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s'", path);
    free(w);
    if ((rc = llmc_out_finish(&file, rc, err)))
        return rc;
    printf("%u %s %lld %lld %s\n", t, d.name, (long long)n, (long long)k, tiles ? tile_format_name(&s) : "dense");
    return LLMC_OK;
}

/* DIR/<tensor>.bin for each weight matrix; DIR appears complete or not at all. */
static int dump_weights(const llmc_rt_plan *p, const char *dir, llmc_error *err)
{
    llmc_rt_error rt = {0};
    bool *tables = calloc(rt_plan_of(p)->n_tensors + 1u, sizeof *tables);
    if (!tables)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    llmc_out_dir out = {0};
    if (gather_tables(p, tables, &rt))
        llmc_fail(err, LLMC_E_RUNTIME, "%s", rt.msg);
    else
        llmc_out_dir_create(dir, &out, err);
    for (uint32_t t = 0; !err->code && t < rt_plan_of(p)->n_tensors; t++)
        dump_weight(p, t, tables[t], out.tmp, err);
    llmc_out_dir_finish(&out, NULL, err->code, err);
    free(tables);
    return err->code;
}

static int inspect_summary(const char *path, const llmc_rt_plan *p, int json, llmc_rt_error *rt)
{
    plan_summary s;
    if (summarize(p, &s, rt))
        return -1;
    return json ? print_json(path, p, &s, rt) : print_text(path, p, &s, rt);
}

int llmc_cmd_inspect(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        fputs(inspect_help, stdout);
        return 0;
    }
    const char *path = NULL, *weights = NULL;
    int json = 0, resolver = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dump-weights") && i + 1 < argc)
            weights = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--resolver"))
            resolver = 1;
        else if (argv[i][0] == '-' || path)
            return llmc_cli_usage("inspect", "unexpected argument '%s'", argv[i]);
        else
            path = argv[i];
    }
    if (!path)
        return llmc_cli_usage("inspect", "missing PLAN");
    if (json && resolver)
        return llmc_cli_usage("inspect", "--json and --resolver exclude each other");
    llmc_error err = {0};
    llmc_mapped_file file;
    if (llmc_open_input(path, false, &file, &err))
        return llmc_cli_report(&err);
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    if (llmc_rt_plan_open(&plan, file.map, file.size, LLMC_RT_OPEN_ANY_TARGET, &rt) ||
        (!weights && (resolver ? inspect_resolver(path, &plan, &rt) : inspect_summary(path, &plan, json, &rt))))
        llmc_fail(&err, LLMC_E_RUNTIME, "'%s': %s", path, rt.msg);
    else if (weights)
        dump_weights(&plan, weights, &err);
    llmc_unmap_file(&file);
    return err.code ? llmc_cli_report(&err) : 0;
}
