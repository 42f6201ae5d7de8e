/* Plan file = FlatBuffer (schemas/plan.fbs), zero padding to 64 bytes,
 * then one 64-byte aligned segment per weight tensor.  The weights are
 * never held whole in memory on the way to a file: the FlatBuffer's size
 * is measured first, the segments are laid out after it and streamed from
 * the graph's constants (mmapped, or lazy views of them) a tile at a time,
 * hashed as they are written (segment_writer.c), and the FlatBuffer, now
 * with the hashes, is written last at offset 0. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen.h"
#include "fb_builder.h"
#include "support/file_map.h"
#include "llmc_rt.h"
#include "llmc_threads.h"
#include "ir/io_roles.h"
#include "support/out_file.h"
#include "support/version.h"
#include "support/layer_name.h"
#include "plan_model.h"
#include "plan_format.h"
#include "segment_writer.h"
#include "tensor_traits.h"

/* Cache positions per KV chunk: 64 rows of a 64..128-wide head are 16..32 KB
 * per head, large enough to stream and small enough that a short context
 * wastes little. */
#define PLAN_KV_CHUNK_POSITIONS 64

/* Plan.kv_cache_dtype the options ask for (0: float32). */
static int kv_dtype_of(const llmc_codegen_options *opt)
{
    return opt->kv_cache_dtype ? opt->kv_cache_dtype : LLMC_RT_F32;
}

#define PLAN_PRODUCER "llmc " LLMC_VERSION
#define SEGMENT_ALIGN 64

_Static_assert(PLAN_FIELD_COUNT <= FB_MAX_FIELDS && OP_FIELD_COUNT <= FB_MAX_FIELDS,
               "the builder has a slot per field of the largest tables");
_Static_assert(LLMC_RT_OP_COUNT <= sizeof(((llmc_codegen_stats *)0)->op_counts) / sizeof(uint32_t),
               "llmc_codegen_stats.op_counts has a slot per OpCode");

typedef struct {
    cg_plan plan;
    const cg_tensor **weight;   /* segment index -> its tensor */
    uint32_t n_segments;        /* the weights' segments, then the tokenizer's */
    cg_tensor tokenizer;        /* the tokenizer's bytes as a segment's source */
    uint64_t *seg_offset;       /* from the start of the file */
    uint64_t *seg_hash;
    fb_builder fb;
    const uint8_t *fb_data;
    size_t fb_size;
    uint64_t file_size;
} plan_image;

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static uint64_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* ---- FlatBuffer encoding of the plan model; empty vectors are left out ---- */

static fb_ref affine_vector(fb_builder *b, const llmc_affine *a, int n)
{
    if (n <= 0)
        return 0;
    fb_vector_begin(b, (size_t)n, AFFINE_BYTES, 8);
    for (int i = n; i-- > 0;) {   /* back to front: fields in reverse too */
        fb_push_le(b, (uint64_t)a[i].p, 8);
        fb_push_le(b, (uint64_t)a[i].s, 8);
        fb_push_le(b, (uint64_t)a[i].c, 8);
    }
    return fb_vector_end(b, (size_t)n);
}

/* A vector of int8 / int32 / uint32 / int64 given as int64 values. */
static fb_ref int_vector(fb_builder *b, const int64_t *v, int n, size_t size)
{
    if (n <= 0)
        return 0;
    fb_vector_begin(b, (size_t)n, size, size);
    for (int i = n; i-- > 0;)
        fb_push_le(b, (uint64_t)v[i], size);
    return fb_vector_end(b, (size_t)n);
}

static fb_ref u32_vector(fb_builder *b, const uint32_t *v, int n)
{
    if (n <= 0)
        return 0;
    fb_vector_begin(b, (size_t)n, 4, 4);
    for (int i = n; i-- > 0;)
        fb_push_le(b, v[i], 4);
    return fb_vector_end(b, (size_t)n);
}

static void field_ref(fb_builder *b, int field, fb_ref ref)
{
    if (ref)
        fb_field_ref(b, field, ref);
}

static void field_nonzero(fb_builder *b, int field, uint64_t value, size_t size)
{
    if (value)
        fb_field_scalar(b, field, value, size);
}

static fb_ref write_tensor(fb_builder *b, const cg_tensor *t)
{
    fb_ref name = fb_string(b, t->name), dims = affine_vector(b, t->dims, t->rank);
    fb_table_begin(b);
    field_ref(b, TENSOR_NAME, name);
    if (t->dtype != LLMC_DT_FLOAT)
        fb_field_scalar(b, TENSOR_DTYPE, (uint64_t)t->dtype, 4);
    field_ref(b, TENSOR_DIMS, dims);
    if (t->is_weight) {
        fb_field_scalar(b, TENSOR_KIND, 1, 1);
        field_nonzero(b, TENSOR_SEGMENT, t->segment, 4);
    } else {
        field_nonzero(b, TENSOR_ARENA_OFFSET, t->arena_offset, 8);
        field_nonzero(b, TENSOR_MAX_BYTES, t->max_bytes, 8);
    }
    field_nonzero(b, TENSOR_LAYOUT, (uint64_t)t->layout, 1);
    field_nonzero(b, TENSOR_GROUP, t->group, 4);
    field_nonzero(b, TENSOR_TILE_ROWS, (uint64_t)t->tile_rows, 1);
    field_nonzero(b, TENSOR_TILE_DEPTH, (uint64_t)t->tile_depth, 1);
    if (t->layout == LLMC_RT_LAYOUT_QWeightTiles && t->coef != LLMC_RT_F16)
        fb_field_scalar(b, TENSOR_COEF, (uint64_t)t->coef, 4);
    return fb_table_end(b);
}

static fb_ref write_region(fb_builder *b, const cg_region *r)
{
    int64_t axis[LLMC_MAX_RANK];
    for (int k = 0; k < r->dst_rank; k++)
        axis[k] = r->src_axis[k];
    fb_ref dst_start = affine_vector(b, r->dst_start, r->dst_rank);
    fb_ref size = affine_vector(b, r->size, r->dst_rank);
    fb_ref src_start = affine_vector(b, r->src_start, r->src_rank);
    fb_ref src_axis = int_vector(b, axis, r->dst_rank, 1);
    fb_ref src_step = int_vector(b, r->src_step, r->dst_rank, 8);
    fb_table_begin(b);
    field_nonzero(b, REGION_SRC, r->src, 4);
    field_nonzero(b, REGION_DST, r->dst, 4);
    field_ref(b, REGION_DST_START, dst_start);
    field_ref(b, REGION_SIZE, size);
    field_ref(b, REGION_SRC_START, src_start);
    field_ref(b, REGION_SRC_AXIS, src_axis);
    field_ref(b, REGION_SRC_STEP, src_step);
    return fb_table_end(b);
}

static fb_ref write_regions(fb_builder *b, const cg_op *op)
{
    if (op->n_regions == 0)
        return 0;
    fb_ref *refs = malloc(sizeof *refs * (size_t)op->n_regions);
    if (!refs) {
        b->failed = true;
        return 0;
    }
    for (int i = 0; i < op->n_regions; i++)
        refs[i] = write_region(b, &op->regions[i]);
    fb_ref v = fb_vector_refs(b, refs, (size_t)op->n_regions);
    free(refs);
    return v;
}

static fb_ref write_op(fb_builder *b, const cg_op *op)
{
    int64_t axes[LLMC_MAX_RANK];
    for (int k = 0; k < op->n_axes; k++)
        axes[k] = op->axes[k];
    fb_ref regions = write_regions(b, op);
    fb_ref name = fb_string(b, op->name);
    fb_ref inputs = u32_vector(b, op->inputs, op->n_inputs);
    fb_ref outputs = u32_vector(b, op->outputs, op->n_outputs);
    fb_ref axes_v = int_vector(b, axes, op->n_axes, 4);
    fb_ref values = affine_vector(b, op->values, op->n_values);
    fb_table_begin(b);
    field_nonzero(b, OP_CODE, (uint64_t)op->code, 1);
    field_ref(b, OP_NAME, name);
    field_ref(b, OP_INPUTS, inputs);
    field_ref(b, OP_OUTPUTS, outputs);
    field_nonzero(b, OP_KIND, op->kind, 1);
    field_nonzero(b, OP_AXIS, (uint32_t)op->axis, 4);
    field_ref(b, OP_AXES, axes_v);
    if (!op->keepdims)
        fb_field_scalar(b, OP_KEEPDIMS, 0, 1);
    field_nonzero(b, OP_EPSILON, float_bits(op->epsilon), 4);
    field_nonzero(b, OP_VALUE, double_bits(op->value), 8);
    field_ref(b, OP_VALUES, values);
    field_ref(b, OP_REGIONS, regions);
    field_nonzero(b, OP_HEADS, (uint32_t)op->heads, 4);
    field_nonzero(b, OP_KV_HEADS, (uint32_t)op->kv_heads, 4);
    field_nonzero(b, OP_HEAD_DIM, (uint32_t)op->head_dim, 4);
    field_nonzero(b, OP_ROTARY_DIM, (uint32_t)op->rotary_dim, 4);
    field_nonzero(b, OP_SCALE, float_bits(op->scale), 4);
    field_nonzero(b, OP_CACHE, op->cache, 4);
    field_nonzero(b, OP_WINDOW, op->window, 4);
    field_nonzero(b, OP_SOFTCAP, float_bits(op->softcap), 4);
    return fb_table_end(b);
}

static fb_ref write_binding(fb_builder *b, const cg_binding *io)
{
    fb_table_begin(b);
    field_nonzero(b, IO_TENSOR, io->tensor, 4);
    field_nonzero(b, IO_ROLE, (uint64_t)io->role, 1);
    if (role_is_kv(io->role))
        field_nonzero(b, IO_LAYER, (uint32_t)io->layer, 4);
    return fb_table_end(b);
}

/* Every Segment field is written even when 0, so the FlatBuffer's size does
 * not depend on the offsets (see build_flatbuffer). */
static fb_ref write_segment(fb_builder *b, uint64_t offset, uint64_t size, uint64_t hash)
{
    fb_table_begin(b);
    fb_field_scalar(b, SEGMENT_OFFSET, offset, 8);
    fb_field_scalar(b, SEGMENT_SIZE, size, 8);
    fb_field_scalar(b, SEGMENT_XXHASH64, hash, 8);
    return fb_table_end(b);
}

static fb_ref write_pass(fb_builder *b, const llmc_pass_record *pr)
{
    fb_ref name = fb_string(b, pr->name ? pr->name : "");
    fb_ref detail = pr->detail[0] ? fb_string(b, pr->detail) : 0;
    fb_table_begin(b);
    field_ref(b, PASS_NAME, name);
    field_nonzero(b, PASS_NODES, pr->nodes, 4);
    field_nonzero(b, PASS_DIGEST, pr->digest, 8);
    field_ref(b, PASS_DETAIL, detail);
    return fb_table_end(b);
}

static fb_ref write_subgraph(fb_builder *b, const cg_subgraph *sg, int index)
{
    char name[32];
    snprintf(name, sizeof name, "npu%d", index);
    fb_ref name_ref = fb_string(b, name);
    fb_ref inputs = u32_vector(b, sg->inputs, sg->n_inputs);
    fb_ref outputs = u32_vector(b, sg->outputs, sg->n_outputs);
    fb_table_begin(b);
    field_ref(b, SUBGRAPH_NAME, name_ref);
    field_nonzero(b, SUBGRAPH_FIRST_OP, (uint32_t)sg->first_op, 4);
    field_nonzero(b, SUBGRAPH_N_OPS, (uint32_t)sg->n_ops, 4);
    field_ref(b, SUBGRAPH_INPUTS, inputs);
    field_ref(b, SUBGRAPH_OUTPUTS, outputs);
    return fb_table_end(b);
}

/* Nodes of a chunk (runtime/chunked_internal.h): each subgraph, and each
 * run of other ops before, between and after them. */
static int chunk_nodes(const cg_plan *p)
{
    int nodes = 0, at = 0;
    for (int g = 0; g < p->n_subgraphs; g++) {
        nodes += 1 + (p->subgraphs[g].first_op > at);
        at = p->subgraphs[g].first_op + p->subgraphs[g].n_ops;
    }
    return nodes + (p->n_subgraphs && at < p->n_ops);
}

static uint32_t vocab_size(const cg_plan *p)
{
    for (int i = 0; i < p->n_outputs; i++) {
        const cg_tensor *t = &p->tensors[p->outputs[i].tensor];
        if (p->outputs[i].role == LLMC_ROLE_LOGITS && t->rank > 0 &&
            llmc_aff_is_const(t->dims[t->rank - 1]))
            return (uint32_t)t->dims[t->rank - 1].c;
    }
    return 0;
}

static int max_int(int a, int b)
{
    return a > b ? a : b;
}

/* `refs` has room for the longest of the plan's vectors. */
static fb_ref write_plan(plan_image *img, const llmc_graph *g, const llmc_codegen_options *opt,
                         fb_ref *refs)
{
    fb_builder *b = &img->fb;
    const cg_plan *p = &img->plan;
    fb_ref target = fb_string(b, opt->target ? opt->target : "generic");
    fb_ref version = fb_string(b, PLAN_PRODUCER);
    for (int i = 0; i < p->n_tensors; i++)
        refs[i] = write_tensor(b, &p->tensors[i]);
    fb_ref tensors = fb_vector_refs(b, refs, (size_t)p->n_tensors);
    for (int i = 0; i < p->n_ops; i++)
        refs[i] = write_op(b, &p->ops[i]);
    fb_ref ops = fb_vector_refs(b, refs, (size_t)p->n_ops);
    for (int i = 0; i < p->n_inputs; i++)
        refs[i] = write_binding(b, &p->inputs[i]);
    fb_ref inputs = fb_vector_refs(b, refs, (size_t)p->n_inputs);
    for (int i = 0; i < p->n_outputs; i++)
        refs[i] = write_binding(b, &p->outputs[i]);
    fb_ref outputs = fb_vector_refs(b, refs, (size_t)p->n_outputs);
    for (uint32_t i = 0; i < img->n_segments; i++)
        refs[i] = write_segment(b, img->seg_offset[i], img->weight[i]->nbytes, img->seg_hash[i]);
    fb_ref segments = fb_vector_refs(b, refs, img->n_segments);
    fb_ref tokenizer = 0;
    if (opt->tokenizer) {
        fb_table_begin(b);
        fb_field_scalar(b, TOKENIZER_SEGMENT, p->n_segments, 4);
        tokenizer = fb_table_end(b);
    }
    for (int i = 0; i < opt->n_passes; i++)
        refs[i] = write_pass(b, &opt->passes[i]);
    fb_ref passes = fb_vector_refs(b, refs, (size_t)opt->n_passes);
    for (int i = 0; i < p->n_subgraphs; i++)
        refs[i] = write_subgraph(b, &p->subgraphs[i], i);
    fb_ref subgraphs = p->n_subgraphs ? fb_vector_refs(b, refs, (size_t)p->n_subgraphs) : 0;
    int64_t *zeros = calloc((size_t)chunk_nodes(p) + 1, sizeof *zeros);
    fb_ref costs = p->n_subgraphs && zeros ? int_vector(b, zeros, chunk_nodes(p), 8) : 0;
    b->failed = b->failed || !zeros;
    free(zeros);
    fb_table_begin(b);
    fb_field_scalar(b, PLAN_FORMAT_VERSION, LLMC_RT_FORMAT_VERSION, 4);
    field_ref(b, PLAN_TARGET, target);
    field_nonzero(b, PLAN_SOURCE_HASH, g->source_hash, 8);
    field_ref(b, PLAN_COMPILER_VERSION, version);
    field_nonzero(b, PLAN_MAX_CONTEXT, opt->max_context, 4);
    field_nonzero(b, PLAN_ARENA_SIZE, p->arena_size, 8);
    field_ref(b, PLAN_TENSORS, tensors);
    field_ref(b, PLAN_OPS, ops);
    field_ref(b, PLAN_INPUTS, inputs);
    field_ref(b, PLAN_OUTPUTS, outputs);
    field_ref(b, PLAN_SEGMENTS, segments);
    field_ref(b, PLAN_PASSES, passes);
    field_nonzero(b, PLAN_VOCAB_SIZE, vocab_size(p), 4);
    field_nonzero(b, PLAN_N_LAYERS, cg_layer_count(p), 4);
    field_nonzero(b, PLAN_N_CACHES, cg_cache_count(p), 4);
    if (cg_cache_count(p))
        field_nonzero(b, PLAN_KV_CHUNK, PLAN_KV_CHUNK_POSITIONS, 4);
    /* always present, so `llmc tune` can rewrite it in place */
    fb_field_scalar(b, PLAN_GEMM_MIN_ROWS,
                    opt->gemm_min_rows ? opt->gemm_min_rows : RT_DEFAULT_GEMM_MIN_ROWS, 4);
    fb_field_scalar(b, PLAN_PREFILL_KERNEL, PREFILL_INT8, 4); /* `llmc tune` rewrites it too */
    if (kv_dtype_of(opt) != LLMC_RT_F32) /* absent: Float32, the schema's default */
        fb_field_scalar(b, PLAN_KV_CACHE_DTYPE, (uint64_t)kv_dtype_of(opt), 4);
    field_ref(b, PLAN_TOKENIZER, tokenizer);
    if (p->n_subgraphs)
        field_nonzero(b, PLAN_NPU_CHUNK, p->npu_chunk, 4);
    field_ref(b, PLAN_SUBGRAPHS, subgraphs);
    field_ref(b, PLAN_NPU_COSTS, costs); /* present, so `llmc tune --npu` rewrites it in place */
    fb_field_scalar(b, PLAN_DECODE_ISA, KISA_FASTEST, 4); /* `llmc tune` rewrites both */
    fb_field_scalar(b, PLAN_PREFILL_ISA, KISA_FASTEST, 4);
    fb_field_scalar(b, PLAN_GEMV_PREFETCH, 0, 4); /* the CPU's default until `llmc tune` */
    return fb_table_end(b);
}

/* One FlatBuffer build with the current offsets and hashes. */
static int build_flatbuffer(plan_image *img, const llmc_graph *g, const llmc_codegen_options *opt,
                            llmc_error *err)
{
    const cg_plan *p = &img->plan;
    int longest = max_int(max_int(p->n_tensors, p->n_ops), max_int(p->n_inputs, p->n_outputs));
    longest = max_int(max_int(longest, (int)img->n_segments), opt->n_passes);
    fb_ref *refs = malloc(sizeof *refs * (size_t)(longest + 1));
    if (!refs)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    fb_free(&img->fb);
    fb_init(&img->fb);
    fb_ref root = write_plan(img, g, opt, refs);
    free(refs);
    if (fb_finish(&img->fb, root, "LLMC", &img->fb_data, &img->fb_size))
        return llmc_fail(err, LLMC_E_NOMEM, "cannot build the plan FlatBuffer "
                                            "(out of memory or larger than 2 GiB)");
    return LLMC_OK;
}

/* The segment offsets and hashes live inside the FlatBuffer, which sits
 * at offset 0: build it once with zeros to learn its size (which their
 * values cannot change), and lay the segments out after it. */
static int lay_out(plan_image *img, const llmc_graph *g, const llmc_codegen_options *opt, llmc_error *err)
{
    int rc = build_flatbuffer(img, g, opt, err);
    if (rc)
        return rc;
    uint64_t at = round_up(img->fb_size, SEGMENT_ALIGN);
    for (uint32_t i = 0; i < img->n_segments; i++) {
        img->seg_offset[i] = at = round_up(at, SEGMENT_ALIGN);
        at += img->weight[i]->nbytes;
    }
    img->file_size = at;
    return LLMC_OK;
}

/* The FlatBuffer again, now with the hashes the segments were written
 * with: the size measured by lay_out must not change. */
static int finish_flatbuffer(plan_image *img, const llmc_graph *g, const llmc_codegen_options *opt,
                             llmc_error *err)
{
    size_t measured = img->fb_size;
    int rc = build_flatbuffer(img, g, opt, err);
    if (!rc && img->fb_size != measured)
        rc = llmc_fail(err, LLMC_E_INTERNAL, "plan FlatBuffer size changed between builds");
    return rc;
}

/* segment -> the tensor that owns it (the first with its bytes); the
 * tokenizer's bytes, when given, are the last segment. */
static int collect_segments(plan_image *img, const llmc_codegen_options *opt, llmc_error *err)
{
    cg_plan *p = &img->plan;
    img->n_segments = p->n_segments + (opt->tokenizer ? 1u : 0u);
    size_t n = (size_t)img->n_segments + 1;
    img->weight = calloc(n, sizeof *img->weight);
    img->seg_offset = calloc(n, sizeof *img->seg_offset);
    img->seg_hash = calloc(n, sizeof *img->seg_hash);
    if (!img->weight || !img->seg_offset || !img->seg_hash)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    for (int i = 0; i < p->n_tensors; i++)
        if (p->tensors[i].is_weight && !img->weight[p->tensors[i].segment])
            img->weight[p->tensors[i].segment] = &p->tensors[i];
    if (opt->tokenizer) {
        img->tokenizer.data = opt->tokenizer;
        img->tokenizer.nbytes = opt->tokenizer_size;
        img->weight[p->n_segments] = &img->tokenizer;
    }
    return LLMC_OK;
}

static void image_free(plan_image *img)
{
    cg_plan_free(&img->plan);
    fb_free(&img->fb);
    free(img->weight);
    free(img->seg_offset);
    free(img->seg_hash);
}

/* The subgraphs' ops, and the bytes of the distinct weight segments they
 * read: what a delegate holds, whatever the prompt length. */
static void subgraph_stats(const plan_image *img, llmc_codegen_stats *stats)
{
    const cg_plan *p = &img->plan;
    stats->n_subgraphs = (uint32_t)p->n_subgraphs;
    stats->npu_chunk = p->npu_chunk;
    bool *seen = calloc(p->n_segments ? p->n_segments : 1, sizeof *seen);
    for (int g = 0; g < p->n_subgraphs; g++) {
        const cg_subgraph *sg = &p->subgraphs[g];
        stats->subgraph_ops += (uint32_t)sg->n_ops;
        for (int i = sg->first_op; seen && i < sg->first_op + sg->n_ops; i++)
            for (int k = 0; k < p->ops[i].n_inputs; k++) {
                const cg_tensor *t = &p->tensors[p->ops[i].inputs[k]];
                if (t->is_weight && !seen[t->segment]) {
                    seen[t->segment] = true;
                    stats->subgraph_weight_bytes += img->weight[t->segment]->nbytes;
                }
            }
    }
    free(seen);
}

static void fill_stats(const plan_image *img, llmc_codegen_stats *stats)
{
    if (!stats)
        return;
    const cg_plan *p = &img->plan;
    memset(stats, 0, sizeof *stats);
    stats->n_ops = (uint32_t)p->n_ops;
    llmc_layer_tally tally = {{0}, 0};
    for (int i = 0; i < p->n_ops; i++) {
        stats->op_counts[p->ops[i].code]++;
        llmc_layer_tally_add(&tally, p->ops[i].name);
    }
    llmc_layer_tally_limit(&tally, cg_layer_count(p));
    stats->layers = (uint32_t)tally.n_layers;
    llmc_layer_tally_range(&tally, &stats->layer_ops_min, &stats->layer_ops_max);
    stats->n_tensors = (uint32_t)p->n_tensors;
    stats->arena_bytes = p->arena_size;
    for (uint32_t s = 0; s < p->n_segments; s++)
        stats->weight_bytes += img->weight[s]->nbytes;
    stats->file_bytes = img->file_size;
    subgraph_stats(img, stats);
}

/* A KV cache other than float32 exists only inside the fused Attention
 * ops; the unfused PastKey/PastValue inputs and outputs stay float. */
static int check_kv_cache_dtype(const cg_plan *p, int dtype, llmc_error *err)
{
    if (!rt_kv_dtype_known(dtype))
        return llmc_fail(err, LLMC_E_USAGE, "KV cache dtype %d is not float32, float16 or int8",
                         dtype);
    uint32_t unfused = cg_layer_count(p) - cg_cache_count(p);
    if (dtype != LLMC_RT_F32 && unfused)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "--kv-cache %s needs fused Attention caches, "
                         "but %u layer(s) pass their KV through PastKey/PastValue graph inputs "
                         "(float only); compile with --kv-cache f32",
                         dtype == LLMC_RT_F16 ? "f16" : "int8", unfused);
    return LLMC_OK;
}

/* Lowered, memory-planned and laid out: everything but the weights' bytes. */
static int build_image(const llmc_graph *g, const llmc_codegen_options *opt, plan_image *img,
                       llmc_error *err)
{
    memset(img, 0, sizeof *img);
    fb_init(&img->fb);
    int rc = cg_lower(g, opt->target, &img->plan, err);
    if (!rc)
        rc = cg_fold_quantize(&img->plan, err);
    if (!rc)
        rc = check_kv_cache_dtype(&img->plan, kv_dtype_of(opt), err);
    if (!rc)
        rc = cg_memory_plan(&img->plan, opt->max_context, err);
    if (!rc)
        rc = collect_segments(img, opt, err);
    if (!rc)
        rc = lay_out(img, g, opt, err);
    return rc;
}

/* The weights streamed after the FlatBuffer's room, then the FlatBuffer
 * with their hashes. */
static int write_segments(plan_image *img, const llmc_graph *g, const llmc_codegen_options *opt,
                          const cg_sink_target *target, llmc_error *err)
{
    int rc = cg_write_segments(target, img->weight, img->n_segments, img->seg_offset, img->fb_size,
                               img->file_size, img->seg_hash, err);
    return rc ? rc : finish_flatbuffer(img, g, opt, err);
}

static const llmc_codegen_options *options_or_default(const llmc_codegen_options *opt)
{
    static const llmc_codegen_options none;
    return opt ? opt : &none;
}

int llmc_codegen_to_memory(const llmc_graph *g, const llmc_codegen_options *opt,
                           uint8_t **plan, size_t *size, llmc_codegen_stats *stats,
                           llmc_error *err)
{
    plan_image img;
    opt = options_or_default(opt);
    *plan = NULL;
    *size = 0;
    int rc = build_image(g, opt, &img, err);
    void *buf = NULL;
    if (!rc && posix_memalign(&buf, SEGMENT_ALIGN, img.file_size ? img.file_size : 1))
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory for a %llu-byte plan",
                       (unsigned long long)img.file_size);
    cg_sink_target target = {.fd = -1, .mem = buf, .path = "the plan in memory"};
    if (!rc)
        rc = write_segments(&img, g, opt, &target, err);
    if (!rc) {
        memcpy(buf, img.fb_data, img.fb_size);
        *plan = buf;
        *size = img.file_size;
        fill_stats(&img, stats);
    } else {
        free(buf);
    }
    image_free(&img);
    return rc;
}

/* ---- streaming to a file ---- */

typedef struct {
    const uint8_t *base;
    const rt_segment_desc *seg;
    uint64_t *hash;
} readback;

/* Segment s's XXH64 into its own slot: tasks share nothing, so the hashes
 * are the same whichever thread computes which. */
static void readback_task(void *ctx, uint32_t s)
{
    readback *rb = ctx;
    rb->hash[s] = cg_hash_mapped(rb->base + rb->seg[s].offset, rb->seg[s].size);
}

/* Every segment's bytes against the hash the FlatBuffer records, hashed
 * on `threads` threads through windows whose pages are dropped as they
 * go: reading a 2.5 GB plan back must not make it resident. */
static int check_segment_hashes(const llmc_rt_plan *plan, uint32_t threads, llmc_rt_error *rt)
{
    uint32_t n = rt_plan_of(plan)->n_segments;
    rt_segment_desc *seg = malloc(sizeof *seg * ((size_t)n + 1));
    uint64_t *hash = malloc(sizeof *hash * ((size_t)n + 1));
    int rc = seg && hash ? 0 : -1;
    fb_reader r = rt_reader(plan);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = rt_read_segment(&r, plan, i, &seg[i], rt) ? -1 : 0;
    if (!rc) {
        readback rb = {rt_plan_of(plan)->base, seg, hash};
        llmc_threads *pool = threads > 1 && n > 1 ? llmc_threads_create(threads) : NULL;
        llmc_threads_parallel(pool, n, readback_task, &rb);
        llmc_threads_destroy(pool);
    }
    for (uint32_t i = 0; !rc && i < n; i++)
        if (hash[i] != seg[i].xxhash64) {
            snprintf(rt->msg, sizeof rt->msg, "%s: segment %u: xxhash64 of %llu bytes at %llu does not match",
                     llmc_rt_status_text(LLMC_RT_E_HASH), i, (unsigned long long)seg[i].size,
                     (unsigned long long)seg[i].offset);
            rc = -1;
        }
    if (!seg || !hash)
        snprintf(rt->msg, sizeof rt->msg, "out of memory");
    free(seg);
    free(hash);
    return rc;
}

/* The bytes just written, read back through the runtime's own verifier
 * and every segment hashed again: a plan the runtime would refuse is a
 * compiler bug, and it must never reach `path`. */
static int verify_written_plan(const char *tmp, const char *path, const llmc_codegen_options *opt,
                               llmc_error *err)
{
    llmc_mapped_file f;
    int e = llmc_map_file(tmp, &f);
    if (e)
        return llmc_fail(err, LLMC_E_OUTPUT, "cannot read back '%s': %s", tmp, strerror(e));
    if (opt->progress)
        opt->progress(opt->progress_ctx, "reading the plan back", 0, f.size);
    llmc_rt_plan plan;
    llmc_rt_error rt;
    int rc = LLMC_OK;
    if (llmc_rt_plan_open(&plan, f.map, (size_t)f.size, LLMC_RT_OPEN_ANY_TARGET, &rt) != LLMC_RT_OK ||
        check_segment_hashes(&plan, opt->threads, &rt))
        rc = llmc_fail(err, LLMC_E_INTERNAL,
                       "the plan for '%s', read back, fails the runtime verifier (a compiler bug or a write error): %s",
                       path, rt.msg);
    if (opt->progress)
        opt->progress(opt->progress_ctx, "reading the plan back", f.size, f.size);
    llmc_unmap_file(&f);
    return rc;
}

static int write_file_atomically(plan_image *img, const llmc_graph *g, const llmc_codegen_options *opt,
                                 const char *path, llmc_error *err)
{
    llmc_output out;
    if (!llmc_out_create(path, &out, err))
        return err->code;
    int fd = fileno(out.file);
    cg_sink_target target = {.fd = fd, .path = path, .progress = opt->progress, .progress_ctx = opt->progress_ctx};
    int rc = write_segments(img, g, opt, &target, err);
    /* the FlatBuffer last, at offset 0, over the room left for it */
    if (!rc && (lseek(fd, 0, SEEK_SET) != 0 || cg_write_all(fd, img->fb_data, img->fb_size)))
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
    if (!rc)
        rc = verify_written_plan(out.tmp, path, opt, err);
    return llmc_out_finish(&out, rc, err);
}

int llmc_codegen_to_file(const llmc_graph *g, const llmc_codegen_options *opt, const char *path,
                         llmc_codegen_stats *stats, llmc_error *err)
{
    plan_image img;
    opt = options_or_default(opt);
    int rc = build_image(g, opt, &img, err);
    if (!rc)
        rc = write_file_atomically(&img, g, opt, path, err);
    if (!rc)
        fill_stats(&img, stats);
    image_free(&img);
    return rc;
}
