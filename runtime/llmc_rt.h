/* llmc runtime: executes a plan written by `llmc compile`.
 *
 * C99, no malloc, no globals, no stdio, no threads; libm only.  The caller
 * owns every byte: the plan file (mapped, in RAM or in flash) and one block
 * of working memory whose size llmc_rt_session_memory() reports.
 *
 *   plan file  ->  llmc_rt_plan_open()     verifies every offset, once
 *   memory     ->  llmc_rt_session_init()  arena + KV store carved from it
 *   tokens     ->  llmc_rt_session_feed()  logits of the last token
 *
 * Working memory layout (one block, 64-byte aligned pieces):
 *   [ arena: tensors of one call, offsets planned by the compiler ]
 *   [ KV store: present K/V of every layer, up to max_context rows ]
 */
#ifndef LLMC_RT_H
#define LLMC_RT_H

#include <stddef.h>
#include <stdint.h>

#define LLMC_RT_FORMAT_VERSION 2u
#define LLMC_RT_TARGET "generic-f32"
#define LLMC_RT_MAX_RANK 8

/* Result codes.  One list generates the enum and the names. */
#define LLMC_RT_STATUS_LIST(X)                                                   \
    X(LLMC_RT_OK, "ok")                                                          \
    X(LLMC_RT_E_ARG, "invalid argument")                                         \
    X(LLMC_RT_E_TRUNCATED, "plan truncated")                                     \
    X(LLMC_RT_E_MAGIC, "not an llmc plan")                                       \
    X(LLMC_RT_E_VERSION, "unsupported plan format version")                      \
    X(LLMC_RT_E_TARGET, "plan compiled for another target")                      \
    X(LLMC_RT_E_CORRUPT, "plan structure invalid")                               \
    X(LLMC_RT_E_HASH, "weight segment hash mismatch")                            \
    X(LLMC_RT_E_MEMORY, "working memory too small")                              \
    X(LLMC_RT_E_BOUNDS, "sequence outside the compiled bounds")                  \
    X(LLMC_RT_E_EXEC, "execution failed")

typedef enum {
#define LLMC_RT_ENUM_(code, text) code,
    LLMC_RT_STATUS_LIST(LLMC_RT_ENUM_)
#undef LLMC_RT_ENUM_
    LLMC_RT_STATUS_COUNT
} llmc_rt_status;

const char *llmc_rt_status_text(llmc_rt_status status);

/* Every fallible call fills one of these (it may be NULL). The message names
 * the op, tensor or byte offset that failed. */
typedef struct {
    llmc_rt_status code;
    char msg[256];
} llmc_rt_error;

/* A verified plan: positions inside the caller's bytes.  Treat as opaque. */
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
    uint64_t source_hash;
} llmc_rt_plan;

enum {
    LLMC_RT_VERIFY_HASHES = 1u  /* also hash every weight segment (reads all weights) */
};

/* Proves every offset, vector, string, tensor index, region and segment of
 * the plan in bounds before anything is executed. `bytes` must stay valid
 * and unchanged while the plan is used, and be 8-byte aligned. */
llmc_rt_status llmc_rt_plan_open(llmc_rt_plan *plan, const void *bytes, size_t size,
                                 unsigned flags, llmc_rt_error *err);

/* Element types (ONNX numbering) the runtime handles. */
typedef enum {
    LLMC_RT_F32 = 1, LLMC_RT_U8 = 2, LLMC_RT_I8 = 3, LLMC_RT_I32 = 6,
    LLMC_RT_I64 = 7, LLMC_RT_BOOL = 9
} llmc_rt_dtype;

/* A dense row-major tensor view. */
typedef struct {
    int dtype;                        /* llmc_rt_dtype */
    int rank;
    int64_t dims[LLMC_RT_MAX_RANK];
    void *data;
} llmc_rt_tensor;

/* Graph inputs and outputs, in plan order. */
typedef struct {
    const char *name;                 /* points into the plan; NUL-terminated */
    int dtype;
    int role;                         /* llmc.plan.IoRole */
    int layer;
    uint32_t tensor;                  /* plan tensor index */
} llmc_rt_io;

llmc_rt_status llmc_rt_plan_io(const llmc_rt_plan *plan, int is_output, uint32_t index,
                               llmc_rt_io *io);

typedef struct {
    const llmc_rt_plan *plan;
    uint8_t *arena;                   /* plan->arena_size bytes */
    uint8_t *kv;                      /* plan->kv_bytes bytes */
    uint32_t position;                /* P: tokens already in the KV store */
    uint32_t last_S, last_P;          /* (S, P) of the last run, for outputs */
} llmc_rt_session;

/* Bytes of working memory llmc_rt_session_init() needs (arena + KV store +
 * alignment slack). */
size_t llmc_rt_session_memory(const llmc_rt_plan *plan);

llmc_rt_status llmc_rt_session_init(llmc_rt_session *s, const llmc_rt_plan *plan,
                                    void *memory, size_t memory_size, llmc_rt_error *err);

/* Feeds n tokens at the session's position (prompt or one generated token),
 * advances the position by n and writes the logits of the last token
 * (plan->vocab_size floats) to `logits`.  Needs a plan with InputIds and
 * Logits bindings. */
llmc_rt_status llmc_rt_session_feed(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                                    float *logits, llmc_rt_error *err);

/* Forgets the KV store: the next feed starts at position 0. */
void llmc_rt_session_reset(llmc_rt_session *s);

/* Generic execution (any plan): `inputs` has plan->n_inputs tensors in plan
 * order, each matching the dtype and the dims of its input evaluated at
 * (S, P).  Outputs stay in the arena until the next run. */
llmc_rt_status llmc_rt_session_run(llmc_rt_session *s, uint32_t S, uint32_t P,
                                   const llmc_rt_tensor *inputs, llmc_rt_error *err);
llmc_rt_status llmc_rt_session_output(const llmc_rt_session *s, uint32_t index,
                                      llmc_rt_tensor *out, llmc_rt_error *err);

/* XXH64 (seed 0), the hash the plan uses for weight segments. */
uint64_t llmc_rt_xxh64(const void *data, size_t len, uint64_t seed);

#endif
