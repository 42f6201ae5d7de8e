/* The plan as codegen builds it in memory, before it is serialized:
 * lower.c fills tensors and ops from the graph, memory_plan.c assigns arena
 * offsets, plan_writer.c writes the FlatBuffer and the weight segments.
 * Enum values mirror schemas/plan.fbs. */
#ifndef LLMC_PLAN_MODEL_H
#define LLMC_PLAN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "support/diag.h"
#include "ir/ir.h"
#include "plan_format.h"
#include "tensor_traits.h"

/* The plan's codes (OP_*, UNARY_*, BINARY_*, REDUCE_*, SCATTER_*, LAYOUT_*,
 * CUMSUM_*) are plan_format.h's, generated from runtime/plan_enums.h. */

/* Writes a weight's segment bytes, in order, into the sink
 * (compiler/codegen/segment_writer.h); 0, or -1 when the sink failed. */
struct cg_tensor;
struct cg_sink;
typedef int (*cg_segment_producer)(const struct cg_tensor *t, struct cg_sink *sink);

typedef struct cg_tensor {
    char *name;
    int dtype;                          /* ONNX numbering, one of plan DType */
    int layout;                         /* plan Layout (LAYOUT_*) */
    uint32_t group;                     /* QWeightTiles, QActTiles */
    int tile_rows, tile_depth;          /* QWeightTiles, QActTiles, FWeightTiles */
    int coef;                           /* QWeightTiles: plan DType of the coefficients */
    int rank;
    llmc_affine dims[LLMC_MAX_RANK];
    bool is_weight;
    /* Weight: bytes in graph memory (or `owned`), and its segment */
    const void *data;
    uint64_t nbytes;                    /* the segment's size: what `produce` writes */
    void *owned;                        /* constants lowering made up (Gemm alpha) */
    uint32_t segment;
    /* Lazy weights (segment_writer.h): the source as a float32 matrix, when
     * data is NULL or its pages may be dropped after writing (a reference,
     * released with the plan); `produce` NULL writes data / view as they
     * are, else it makes the segment from `view` (then required: quantizes,
     * packs).  Tensors
     * share a segment when produce, produce_arg and the sources' bytes are
     * equal (cg_share_weights). */
    llmc_view *view;
    cg_segment_producer produce;
    const void *produce_arg;
    /* Arena: filled by the memory planner */
    uint64_t max_bytes, arena_offset;
    int first_op, last_op;              /* lifetime; -1 = before op 0, n_ops = after the last */
} cg_tensor;

static inline rt_tensor_format cg_tensor_format(const cg_tensor *t)
{
    rt_tensor_format f = {t->dtype, t->layout, t->group, t->tile_rows, t->tile_depth, t->coef};
    return f;
}

/* One strided copy, as llmc.plan.Region. */
typedef struct {
    uint32_t src, dst;
    int src_rank, dst_rank;
    llmc_affine dst_start[LLMC_MAX_RANK];
    llmc_affine size[LLMC_MAX_RANK];
    llmc_affine src_start[LLMC_MAX_RANK];
    int8_t src_axis[LLMC_MAX_RANK];
    int64_t src_step[LLMC_MAX_RANK];
} cg_region;

typedef struct {
    int code;                           /* OP_* */
    char *name;                         /* the ONNX node */
    int n_inputs, n_outputs, n_regions, n_values, n_axes;
    uint32_t *inputs, *outputs;         /* tensor indices */
    cg_region *regions;                 /* Copy */
    llmc_affine *values;                /* Symbols */
    int32_t axes[LLMC_MAX_RANK];        /* Reduce: ascending, non-negative */
    uint8_t kind;
    int32_t axis;
    bool keepdims;
    float epsilon;
    double value;
    int32_t heads, kv_heads, head_dim, rotary_dim;  /* Attention, Rope */
    float scale;                                    /* Attention; QuantizeRows, Linear: static scale */
    uint32_t cache;                                 /* Attention */
    uint32_t window;                                /* Attention: sliding window, 0 none */
    float softcap;                                  /* Attention: score soft-cap, 0 none */
    bool npu;                           /* from a node npu-partition marked */
} cg_op;

/* A run of consecutive npu ops (llmc.plan.Subgraph). */
typedef struct {
    int first_op, n_ops;
    int n_inputs, n_outputs;
    uint32_t *inputs, *outputs;         /* tensor indices */
} cg_subgraph;

typedef struct {
    uint32_t tensor;
    int role;                           /* llmc_io_role */
    int layer;
} cg_binding;

typedef struct {
    int n_tensors, cap_tensors;
    cg_tensor *tensors;
    int n_ops, cap_ops;
    cg_op *ops;
    int n_inputs, n_outputs;
    cg_binding *inputs, *outputs;
    uint32_t n_segments;                /* distinct weights (cg_share_weights) */
    uint64_t arena_size;
    uint32_t npu_chunk;                 /* Plan.npu_chunk: C of the marked nodes; 0: none */
    int n_subgraphs;
    cg_subgraph *subgraphs;             /* cg_group_subgraphs */
} cg_plan;

/* Graph -> tensors, ops and bindings (op order = topological order), with
 * packed layouts for `target` (NULL: "generic"). */
int cg_lower(const llmc_graph *g, const char *target, cg_plan *p, llmc_error *err);
/* True if cg_lower handles this ONNX op type (default domain). */
bool cg_can_lower(const char *op_type);
/* The i-th llmc-domain op (compiler/ir/llmc_ops.h) cg_lower handles; NULL
 * past the last. */
const char *cg_llmc_op(int i);
/* KV caches the Attention ops own, and decoder layers: past_key_values
 * key inputs plus those caches (Plan.n_caches, Plan.n_layers). */
uint32_t cg_cache_count(const cg_plan *p);
uint32_t cg_layer_count(const cg_plan *p);
/* Refuses, by name, bindings the runtime cannot use: a role whose tensor
 * has another dtype or rank than the role needs, a past key without its
 * value (or the reverse), two bindings for one cache layer, a layer >=
 * cg_layer_count, a present output without its past input. */
int cg_check_bindings(const cg_plan *p, llmc_error *err);
/* Weight tensors with identical bytes share one segment (tied embeddings);
 * segments are renumbered in tensor order (weight_sharing.c). */
int cg_share_weights(cg_plan *p, llmc_error *err);
/* Groups the runs of consecutive npu ops into subgraphs and lists the
 * tensors each reads from and writes for the rest (subgraphs.c); refuses
 * a run that an int8 activation tensor enters or leaves. */
int cg_group_subgraphs(cg_plan *p, llmc_error *err);
/* Every CPU QuantizeRows whose tiles only CPU Linears read as x goes into
 * those Linears: each quantizes x itself (kind LINEAR_QUANTIZE, its own
 * tiles its last output) (quant_fold.c); after cg_lower. */
int cg_fold_quantize(cg_plan *p, llmc_error *err);
/* Sizes every Arena tensor for S + P <= max_context and assigns offsets. */
int cg_memory_plan(cg_plan *p, uint32_t max_context, llmc_error *err);
/* Does the op read tensor t (an input or a region's source)? */
bool cg_op_reads(const cg_op *op, uint32_t t);
/* What an op owns; the plan and everything in it. */
void cg_op_free(cg_op *op);
void cg_plan_free(cg_plan *p);

#endif
