/* llmc runtime: calls for the llmc tools and tests only (profilers,
 * calibration, plan listings, kernel comparisons).  Not installed: an
 * application needs llmc_rt.h, and firmware that trims its kernels
 * llmc_rt_resolver.h. */
#ifndef LLMC_RT_INTERNAL_H
#define LLMC_RT_INTERNAL_H

#include "llmc_rt_resolver.h"

/* What llmc_rt_plan's storage holds: positions inside the caller's bytes
 * and what the verifier counted.  The runtime, the llmc tools and the tests
 * read it through rt_plan_of. */
typedef struct {
    const uint8_t *base;
    size_t size;
    uint32_t root;          /* position of the Plan table */
    uint32_t tensors, ops, inputs, outputs, segments, passes;  /* vector positions */
    uint32_t n_tensors, n_ops, n_inputs, n_outputs, n_segments, n_passes;
    uint64_t arena_size;
    uint64_t kv_bytes;      /* KV store the foundation path needs */
    uint32_t max_context;
    uint32_t vocab_size;
    uint32_t n_layers;
    uint32_t n_caches;      /* KV caches owned by Attention ops */
    uint32_t kv_chunk;      /* cache positions per chunk */
    uint64_t kv_slot_bytes; /* one pool chunk: K and V of the widest cache, 64-aligned */
    uint64_t source_hash;
    const char *target;     /* Plan.target, NUL-terminated inside the plan */
    const struct rt_kernels *kernels; /* the target's kernels for steps of
                               gemm_min_rows rows or more (Plan.prefill_isa);
                               NULL when this build or CPU cannot run it
                               (OPEN_ANY_TARGET) */
    const struct rt_kernels *decode_kernels; /* for shorter steps (Plan.decode_isa) */
    uint32_t decode_isa, prefill_isa; /* Plan's KISA_* (plan_format.h) */
    uint32_t gemm_min_rows; /* Plan.gemm_min_rows, or the runtime's default */
    uint32_t gemv_prefetch; /* Plan.gemv_prefetch, or this CPU's default */
    /* Entries of the session's prepared pools (counted by the verifier;
     * capped at 2^40, which no session can hold): */
    uint64_t n_operands;    /* op inputs plus outputs, over every op */
    uint64_t n_regions;     /* regions of Copy ops */
    uint64_t n_affines;     /* tensor dims + Copy regions' Affines + Symbols values */
    uint32_t prefill_kernel; /* Plan.prefill_kernel (0 int8, 1 f32-dequant) */
    int kv_cache_dtype;     /* Plan.kv_cache_dtype: LLMC_RT_F32, F16 or I8 (K int8,
                               V fp16); sizes in tensor_traits.h rt_kv_row_bytes */
    uint32_t tokenizer_segment; /* Plan.tokenizer's segment, UINT32_MAX if none */
} rt_plan;
LLMC_STATIC_ASSERT(plan_fits, sizeof(rt_plan) <= sizeof(((llmc_rt_plan *)0)->opaque_));

static inline rt_plan *rt_plan_of(const llmc_rt_plan *plan)
{
    return (rt_plan *)(void *)plan->opaque_;
}

/* The plan session s runs (set by init). */
const llmc_rt_plan *llmc_rt_session_plan(const llmc_rt_session *s);

/* An op, for tools (profilers, listings). */
typedef struct {
    int code;                         /* its OpCode: LLMC_RT_OP_Linear, ...
                                         (llmc_rt_op_name prints it) */
    const char *name;                 /* its name; points into the plan */
    int weight_dtype;                 /* Linear: W's dtype (llmc_rt_dtype); else 0 */
    int weight_layout;                /* Linear: W's llmc.plan.Layout; else 0 */
} llmc_rt_op_info;

llmc_rt_status llmc_rt_plan_op(const llmc_rt_plan *plan, uint32_t index, llmc_rt_op_info *op);

/* Runs every step of the plan with the kernels of `isa` (an ISA of its
 * target this CPU runs, e.g. the plain "avx2" table on an AVX-512 machine,
 * to compare them) instead of the tuned or fastest ones; LLMC_RT_E_TARGET
 * names the ones there are.  Call before session init. */
llmc_rt_status llmc_rt_plan_use_kernels(llmc_rt_plan *plan, const char *isa,
                                        llmc_rt_error *err);

/* The isa of the kernel table a step of `rows` rows runs on this CPU
 * (Plan.decode_isa's below gemm_min_rows, else Plan.prefill_isa's, or
 * --isa's), for reports; "none" when the plan's target does not run here. */
const char *llmc_rt_plan_step_isa(const llmc_rt_plan *plan, uint32_t rows);

/* Profiling.  The runtime has no clock.  An observer installed on a
 * session is called on the calling thread right before (end = 0) and right after (end = 1)
 * every op of every run and feed, even one that fails; the caller's
 * callback reads its own clock.  op_index is the op's plan index
 * (llmc_rt_plan_op names it). */
typedef void (*llmc_rt_op_observer)(void *ctx, uint32_t op_index, int end);

/* Installs fn(ctx, op_index, end) as the session's op observer; fn NULL =
 * none.  Call after init (init clears it). */
void llmc_rt_session_set_observer(llmc_rt_session *s, llmc_rt_op_observer fn, void *ctx);

/* For an observer (calibration, debugging): input `slot` of op `op_index`
 * as the call of S new tokens after P past ones sizes it, and its tensor's
 * name (points into the plan).  Called from the observer before the op
 * runs (end = 0), the bytes are what the call's earlier ops wrote. */
llmc_rt_status llmc_rt_session_op_input(const llmc_rt_session *s, uint32_t op_index,
                                        uint32_t slot, uint32_t S, uint32_t P,
                                        llmc_rt_tensor *out, const char **name,
                                        llmc_rt_error *err);

/* Chunked prefill: its schedule, its nodes and an observer of them
 * (`llmc tune`, `llmc run --delegate --stats`).  After init the order is
 * out of order with estimated costs. */
/* What a chunked prefill reports to its observer: a node (a subgraph on
 * the delegate lane, or a run of the other ops on the CPU lane) of chunk
 * `chunk` starting (end = 0) or ending (end = 1).  A delegate node's end is
 * reported when wait finds it finished.  The observer reads its own clock. */
typedef struct {
    uint32_t chunk, node;
    int lane;                         /* 0 CPU, 1 delegate */
    int end;
    uint32_t subgraph;                /* the delegate lane's subgraph; UINT32_MAX on the CPU */
    uint32_t first_op, n_ops;         /* the node's ops in Plan.ops */
} llmc_rt_chunk_event;
typedef void (*llmc_rt_chunk_observer)(void *ctx, const llmc_rt_chunk_event *e);

/* The order nodes run in: out_of_order 0 follows the chunks in order on
 * each lane; 1 picks, among the nodes whose dependencies are met (paper
 * 003 Eqs. 2-3), the one by Eq. 6.  cost: one value per node of a chunk
 * (llmc_rt_chunked_nodes), the relative time it takes (`llmc tune`
 * measures them); NULL: the runtime's estimate from multiply-adds. */
void llmc_rt_chunked_set_schedule(llmc_rt_chunked *c, int out_of_order, const uint64_t *cost);
void llmc_rt_chunked_set_observer(llmc_rt_chunked *c, llmc_rt_chunk_observer fn, void *ctx);
/* Nodes of a full chunk, and node k's lane, first op and op count. */
uint32_t llmc_rt_chunked_nodes(const llmc_rt_chunked *c);
llmc_rt_status llmc_rt_chunked_node(const llmc_rt_chunked *c, uint32_t k,
                                    llmc_rt_chunk_event *info);

/* XXH64 (seed 0), the hash the plan uses for weight segments. */
uint64_t llmc_rt_xxh64(const void *data, size_t len, uint64_t seed);

#endif
