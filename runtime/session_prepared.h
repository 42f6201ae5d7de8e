/* Internal: a session's prepared tables (TensorFlow Lite Micro's Prepare /
 * Eval split).  llmc_rt_session_init decodes the verified plan once
 * (session_prepare.c) into these tables, carved from the session's working
 * memory (layout in llmc_rt.h); runs and feeds (session.c) read only them,
 * never the FlatBuffer: a step evaluates Affines at (S, P) and calls kernels.
 * Names point into the plan and are read only to write error messages. */
#ifndef LLMC_RT_SESSION_PREPARED_H
#define LLMC_RT_SESSION_PREPARED_H

#include "kernels/kernels.h"
#include "plan_format.h"
#include "tensor_traits.h"

#define MAX_OP_INPUTS 7  /* the most any op but Copy takes (verify_ops.c op_arity) */
#define MAX_OP_OUTPUTS 3 /* the most any op but Copy and Linear writes */
#define NO_RUN UINT32_MAX  /* last_S before the first run */
#define NO_SLOT UINT32_MAX /* a cache chunk not taken from the pool yet */

/* A run of entries in one of the pools. */
typedef struct {
    uint32_t first, len;
} rt_prep_list;

typedef struct {
    const char *name;
    uint8_t *data;           /* arena: arena + arena_offset; weight: its segment */
    uint64_t max_bytes;      /* arena tensors: bytes reserved */
    rt_tensor_format format; /* dtype, layout, group, tiles */
    uint32_t dims;           /* its rank Affines start here in the Affine pool */
    int rank;
    int kind;                /* KIND_ARENA or KIND_WEIGHT */
} rt_prep_tensor;

/* An op: the fields of rt_op_desc the interpreter reads, under the same
 * names; vectors become runs of the pools. */
typedef struct {
    int code;
    const char *name;
    rt_prep_list inputs, outputs; /* tensor indices in the operand pool */
    int kind;
    int32_t axis;
    int axes[LLMC_RT_MAX_RANK];   /* Reduce: n_axes ascending axes (verified < rank) */
    int n_axes;
    bool keepdims;
    float epsilon;
    uint64_t value_bits; /* Fill: the IEEE binary64 value as stored */
    rt_prep_list values;          /* Symbols: in the Affine pool */
    rt_prep_list regions;         /* Copy: in the region pool */
    int32_t heads, kv_heads, head_dim, rotary_dim; /* Attention, Rope */
    float scale;                                   /* Attention; QuantizeRows: static scale */
    uint32_t cache;                                /* Attention */
    uint32_t window;                               /* Attention: sliding window, 0 none */
    float softcap;                                 /* Attention: score soft-cap, 0 none */
    union {                       /* Linear, ShadowLinear: W's packed shape (a weight) */
        rt_qweight_shape q;       /* QWeightTiles */
        rt_ftile_shape f;         /* FWeightTiles */
    } w;
    /* From the session's op resolver (init refuses an op without them): */
    llmc_rt_op_fn exec;           /* its code's */
    llmc_rt_unary_fn unary;       /* Unary: its kind's float32 loop */
    k_binary_loops binary;        /* Binary: the loop its dtypes take */
    llmc_rt_op_fn gather;         /* Gather: its table's kernel */
    llmc_rt_linear_fn linear;     /* Linear: W's kernel */
    llmc_rt_kv_fn kv_cache;       /* Attention: its cache dtype's loops */
} rt_prep_op;

/* A Copy region: its Affines are dst_start [dst rank], size [dst rank],
 * then src_start [src rank], from `affines` on in the Affine pool. */
typedef struct {
    uint32_t src, dst;
    uint32_t affines;
    int src_axis[LLMC_RT_MAX_RANK];
    int64_t src_step[LLMC_RT_MAX_RANK];
} rt_prep_region;

/* The KV store keeps, for every PastKey/PastValue input in plan order, a
 * 64-aligned slot holding that tensor at P = max_context:
 * [batch, kv_heads, max_context, head_dim]. */
typedef struct {
    float *data;
    int64_t heads;    /* batch * kv_heads: independent row blocks */
    int64_t rows;     /* max_context */
    int64_t row_len;  /* head_dim */
} kv_slot;

typedef struct {
    uint32_t tensor;
    int role;
    int32_t layer;
    bool has_slot; /* PastKey/PastValue inputs: their slot; PresentKey/PresentValue
                      outputs: the slot of the Past input of their layer, if any */
    kv_slot slot;
} rt_prep_io;

struct rt_prepared {
    rt_prep_tensor *tensors;  /* plan->n_tensors */
    rt_prep_op *ops;          /* plan->n_ops */
    rt_prep_io *inputs;       /* plan->n_inputs */
    rt_prep_io *outputs;      /* plan->n_outputs */
    rt_prep_region *regions;  /* plan->n_regions */
    rt_affine *affines;       /* plan->n_affines */
    uint32_t *operands;       /* plan->n_operands */
    bool can_feed;            /* InputIds and Logits bindings */
    bool is_static;           /* nothing depends on S or P */
};

typedef struct rt_prepared rt_prepared;

/* Tensor index k of a run of the operand pool. */
static inline uint32_t prep_operand(const rt_prepared *pr, rt_prep_list l, uint32_t k)
{
    return pr->operands[l.first + k];
}

/* What llmc_rt_session.state_ holds. */
typedef struct {
    const llmc_rt_plan *plan;         /* the plan it runs */
    const rt_prepared *prepared;      /* the decoded plan, in working memory */
    llmc_rt_parallel_fn parallel;     /* NULL: serial (the default after init) */
    void *parallel_pool;              /* passed to parallel as `pool` */
    uint8_t *arena;                   /* plan->arena_size bytes */
    uint8_t *kv;                      /* plan->kv_bytes bytes */
    uint32_t *caches;                 /* n_caches * (1 + chunks_per_cache): rows, slots */
    uint8_t *kv_pool;                 /* pool_chunks * plan->kv_slot_bytes */
    uint32_t chunks_per_cache, pool_chunks, pool_used;
    uint32_t context;                 /* S + P bound of this session (<= max_context) */
    uint32_t position;                /* P: tokens already in the KV store */
    uint32_t last_S, last_P;          /* (S, P) of the last run, for outputs */
    llmc_rt_stats stats;
    llmc_rt_op_observer observer;     /* NULL: none (the default after init) */
    void *observer_ctx;
    uint32_t reverify_every;          /* llmc_rt_session_set_reverify (reverify.c); 0: never */
    uint32_t reverify_since;          /* tokens fed since the last verification */
} rt_session_state;
LLMC_STATIC_ASSERT(session_state_fits,
                   sizeof(rt_session_state) <= sizeof(((llmc_rt_session *)0)->state_));

/* The session's state (sessions are never const objects: a const session
 * pointer only promises the caller reads). */
static inline rt_session_state *rt_state(const llmc_rt_session *s)
{
    return (rt_session_state *)(void *)s->state_;
}

/* One op being run: what its exec function (session_ops.c) gets.  The
 * interpreter (session.c exec_op) has viewed its inputs and outputs at
 * (S, P), but Copy's (none: its regions name their tensors) and Linear's
 * outputs (any number: its exec function views them one at a time). */
struct llmc_rt_op_call {
    llmc_rt_session *s;
    const rt_prep_op *op;
    int64_t S, P;
    const struct rt_kernels *kernels; /* the plan's table for a step of S rows */
    uint8_t *arena;          /* where its arena tensors live: the session's arena, or a
                                chunk's copy of it (chunked_run.c; NULL: the session's) */
    rt_view in[MAX_OP_INPUTS];
    rt_view out[MAX_OP_OUTPUTS];
    uint64_t moved; /* bytes the exec function counted writing (Copy, Linear,
                       QuantizeRows, Attention's cache rows); the interpreter
                       adds the other ops' outputs */
};

typedef struct llmc_rt_op_call rt_op_call;

static inline uint64_t rt_view_bytes(const rt_view *v)
{
    return (uint64_t)k_count(v) * k_dtype_size(v->dtype);
}

/* The kernels' view of the session's parallel-for. */
static inline rt_parallel rt_session_parallel(const llmc_rt_session *s)
{
    rt_parallel par = {rt_state(s)->parallel, rt_state(s)->parallel_pool};
    return par;
}

/* Session init's decoding state (session_prepare.c): the pools' entries
 * taken so far. */
typedef struct {
    rt_prepared *pr;
    const llmc_rt_plan *plan;
    const llmc_rt_op_resolver *ops;
    uint32_t affines, operands, regions;
} prep_fill;

/* The op being decoded, for its code's prepare step (llmc_rt_op_entry). */
struct llmc_rt_op_prep {
    fb_reader *r;
    prep_fill *f;
    const rt_op_desc *d;
    rt_prep_op *o;
};

/* session_prepare_ops.c: takes n entries of a pool of `count` of which
 * *used are taken, as *run; appends the Affines of vector v to the Affine
 * pool. */
llmc_rt_status rt_prep_take(uint32_t *used, uint64_t count, uint32_t n, const char *pool,
                            rt_prep_list *run, llmc_rt_error *err);
llmc_rt_status rt_prep_take_affines(fb_reader *r, prep_fill *f, fb_vector v, rt_prep_list *run,
                                    llmc_rt_error *err);

#endif
