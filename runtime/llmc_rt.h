/* llmc runtime: executes a plan written by `llmc compile`.  This header is
 * what an application calls; llmc_rt_resolver.h trims the kernels a
 * firmware links (an op resolver).
 *
 * C99, no malloc, no globals, no stdio, no threads; libm only.  The caller
 * owns every byte: the plan file (mapped, in RAM or in flash) and one block
 * of working memory whose size llmc_rt_session_memory() reports.
 *
 *   plan file  ->  llmc_rt_plan_open()       verifies every offset, once
 *   memory     ->  llmc_rt_session_init()    carves the pieces below from it
 *                                            and decodes the plan into tables
 *                                            there, so runs never read the
 *                                            FlatBuffer
 *   tokens     ->  llmc_rt_session_feed()    logits of the last token
 *   logits     ->  llmc_sample()             the next token
 *   (or a speculative step: llmc_rt_speculate_step(), several tokens a feed)
 *
 * Working memory layout (one block, 64-byte aligned pieces):
 *   [ arena: tensors of one call, offsets planned by the compiler ]
 *   [ KV store: past K/V of every unfused layer (PastKey / PastValue
 *     inputs), max_context rows each; a feed copies it into the past inputs
 *     and the present outputs back into it ]
 *   [ cache table: per fused cache (Attention op), uint32 rows held, then
 *     the pool slot of each of its chunks (UINT32_MAX = not taken yet) ]
 *   [ KV pool: n_caches * ceil(context / kv_chunk) chunk slots, each as
 *     large as the widest cache's chunk (64-aligned); a chunk is kv_chunk
 *     positions of one cache: K rows [kv_heads, kv_chunk] then V rows, each
 *     row head_dim values of the plan's KV cache dtype (float32, float16,
 *     or int8 K with a scale and float16 V) ]
 *   [ prepared tables, decoded from the plan at init (runs read only these):
 *     one entry per tensor, op, input and output, then the pools of Copy
 *     regions, Affines and operand indices; their sizes do not depend on
 *     context ]
 * A fused cache takes its next chunk from the pool when a call first
 * writes a position in it; the Attention op appends only the new rows.
 * llmc_rt_session_reset returns every chunk to the pool.
 *
 * Threads: the runtime creates none, takes no locks and keeps no state
 * outside the caller's memory; an opened plan is shared read only by any
 * number of sessions on any threads, a session belongs to one thread at a
 * time (the "threads" section below says which object is which). */
#ifndef LLMC_RT_H
#define LLMC_RT_H

#include <stddef.h>
#include <stdint.h>

#include "plan_enums.h" /* the plan's op codes and kinds */

#define LLMC_RT_FORMAT_VERSION 3u
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
    X(LLMC_RT_E_EXEC, "execution failed")                                        \
    X(LLMC_RT_E_RESOLVER, "op not in the session's op resolver")                \
    X(LLMC_RT_E_DELEGATE, "delegate refused or failed")

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

/* A verified plan: the caller's bytes and what llmc_rt_plan_open proved
 * about them, in storage the caller owns (on the stack, in a struct);
 * llmc_rt_plan_info tells an application what it needs to know. */
typedef struct llmc_rt_plan {
    uint64_t opaque_[32];
} llmc_rt_plan;

/* What an application reads of an open plan. */
typedef struct {
    uint32_t vocab_size;    /* logits per token */
    uint32_t max_context;   /* the most positions a session can hold */
    uint32_t n_layers;
    uint32_t n_inputs, n_outputs;
    const char *target;     /* the kernels it was packed for ("avx2", ...) */
    uint64_t source_hash;   /* XXH64 of the ONNX file it was compiled from */
} llmc_rt_plan_info;


enum {
    LLMC_RT_VERIFY_HASHES = 1u,  /* also hash every weight segment (reads all weights) */
    LLMC_RT_OPEN_ANY_TARGET = 2u /* verify a plan for any target this runtime knows,
                                    even one it cannot run here (plan->kernels is
                                    then NULL and session init fails) */
};

/* Proves every offset, vector, string, tensor index, region and segment of
 * the plan in bounds before anything is executed, and picks the kernels of
 * the plan's target (on x86-64 the tables its decode_isa and prefill_isa
 * name where this CPU runs them, else the fastest it does; every table of
 * a target gives the same bits): LLMC_RT_E_TARGET when the target is
 * unknown, or (without LLMC_RT_OPEN_ANY_TARGET) not built into this runtime
 * or not supported by this CPU.  `bytes` must stay valid and unchanged
 * while the plan is used, and be LLMC_RT_PLAN_ALIGN-byte aligned (a plan
 * linked into flash: align its section to it, e.g. `. = ALIGN(8);` before
 * it in the linker script, or `.balign 8` before an .incbin); LLMC_RT_E_ARG
 * names the address otherwise.  Weight segments start at 64-byte multiples from the plan's
 * first byte, so aligning the plan to 64 puts them on cache lines. */
#define LLMC_RT_PLAN_ALIGN 8
llmc_rt_status llmc_rt_plan_open(llmc_rt_plan *plan, const void *bytes, size_t size,
                                 unsigned flags, llmc_rt_error *err);
/* The facts of an open plan an application sizes its buffers by. */
llmc_rt_status llmc_rt_plan_info_of(const llmc_rt_plan *plan, llmc_rt_plan_info *info);

/* Element types (ONNX numbering) the runtime handles. */
typedef enum {
    LLMC_RT_F32 = 1, LLMC_RT_U8 = 2, LLMC_RT_I8 = 3, LLMC_RT_I32 = 6,
    LLMC_RT_I64 = 7, LLMC_RT_BOOL = 9,
    LLMC_RT_F16 = 10,                 /* KV cache rows only (Plan.kv_cache_dtype) */
    LLMC_RT_U4 = 21                   /* packed weights only (two per byte) */
} llmc_rt_dtype;

/* Op codes (Plan.ops' OpCode: LLMC_RT_OP_Linear, ...), the Unary and
 * Binary kinds (LLMC_RT_UNARY_Silu, LLMC_RT_BINARY_Add, ...) and the
 * tensor layouts (LLMC_RT_LAYOUT_QWeightTiles, ...), from the lists of
 * plan_enums.h. */
#define LLMC_RT_OP_INDEX_(s, Name, v, ...) LLMC_RT_OP_##Name = v,
#define LLMC_RT_UNARY_INDEX_(s, Name, v) LLMC_RT_UNARY_##Name = v,
#define LLMC_RT_BINARY_INDEX_(s, Name, v) LLMC_RT_BINARY_##Name = v,
#define LLMC_RT_LAYOUT_INDEX_(s, Name, v, ...) LLMC_RT_LAYOUT_##Name = v,
enum { LLMC_PLAN_OPS(LLMC_RT_OP_INDEX_) LLMC_RT_OP_COUNT };
enum { LLMC_PLAN_UNARY_KINDS(LLMC_RT_UNARY_INDEX_) LLMC_RT_UNARY_COUNT };
enum { LLMC_PLAN_BINARY_KINDS(LLMC_RT_BINARY_INDEX_) LLMC_RT_BINARY_COUNT };
enum { LLMC_PLAN_LAYOUTS(LLMC_RT_LAYOUT_INDEX_) LLMC_RT_LAYOUT_COUNT };

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

/* The name of op code `code` ("RMSNorm"; "?" for none), for messages. */
const char *llmc_rt_op_name(int code);
/* 1 when an NPU chunk subgraph may hold ops of code `code` (plan_enums.h's
 * npu column: the one list of that set), else 0. */
int llmc_rt_op_npu(int code);

/* What the session's runs moved.  Bytes moved = bytes written into the
 * arena by placing inputs, by every op's outputs (a Copy op: its regions),
 * by the foundation's KV store copies (past in, present out) and the K/V
 * rows Attention ops append to their caches; the cache rows attention reads
 * are not counted.  Also where the session stands: its position and bound. */
typedef struct {
    uint64_t bytes_last;              /* the last run (successful or not) */
    uint64_t bytes_total;             /* since init */
    uint64_t runs;                    /* runs and feeds since init */
    uint32_t kv_chunks_used;          /* pool chunks taken since init / reset */
    uint32_t kv_chunks;               /* pool chunks available */
    uint32_t position;                /* tokens in the KV store: fed since init / reset */
    uint32_t context;                 /* the session's bound on positions */
} llmc_rt_stats;

/* ---- threads ---------------------------------------------------------------
 * In SQLite's terms the runtime is always in "multi-thread" mode: any
 * number of threads may call it at once as long as no object of the
 * "one thread at a time" list below is used by two of them at once.  It
 * has no writable global or static data, takes no locks and creates no
 * threads, so there is no mode to choose and nothing to initialize.
 *
 * Shared, read only, by any number of threads at once:
 *   - an opened llmc_rt_plan and its bytes: llmc_rt_plan_info_of, _plan_io
 *     and _plan_tokenizer, and llmc_rt_session_init / _init_for of any
 *     number of sessions, which then run at once; no session writes the
 *     plan.  llmc_rt_plan_open is the one call that writes it: it must
 *     return before the plan is handed to other threads (through whatever
 *     orders memory between them: creating the threads after it, a mutex, a
 *     queue), and the bytes must stay valid and unchanged while any session
 *     of the plan lives.
 *   - an opened llmc_rt_tokenizer (llmc_rt_tokenizer_open or
 *     llmc_rt_plan_tokenizer: the same rules as the plan): encodes on any
 *     threads, each call with scratch of its own; llmc_rt_detok_* read it.
 *   - llmc_rt_status_text, llmc_rt_op_name, llmc_rt_op_npu: constant tables.
 * One thread at a time (calls on one object from two threads must be
 * ordered by the caller, e.g. a mutex, or a join when it moves threads):
 *   - a llmc_rt_session with its working memory: every call that takes it
 *     (feed, run, output, stats, reset, rewind, set_parallel, speculate), and the tensors
 *     llmc_rt_session_output points into its arena; two sessions never
 *     share working memory.  A llmc_rt_chunked belongs to its session's
 *     thread, and the runtime calls its delegate from that thread.
 *   - a llmc_sampler (llmc_sample advances its rng) and the scratch it is
 *     given.
 *   - a llmc_rt_detok (one stream of decoded text) and encode scratch.
 *   - the buffers a call writes: logits, ids, output text.
 * Sessions of one plan on different threads compute exactly what each
 * computes alone: ids and logits bitwise equal (tests/t_sessions_parallel.sh,
 * also under ThreadSanitizer: `make check-tsan`).
 *
 * Threads within a session (optional): a caller that has threads installs
 * a parallel-for on the session.  fn(pool, n, task, ctx) must call
 * task(ctx, i) exactly once for every i in [0, n), in any order and on any
 * threads, and return when all calls have returned, with their writes
 * visible to the calling thread (a join, a barrier, a release/acquire
 * counter).  Tasks touch only what the session's call touches (its working
 * memory, the plan).  The pool is the caller's: it creates it, lends it with
 * llmc_rt_session_set_parallel, keeps it alive until the session's last
 * call, and destroys it; the runtime only calls fn from the thread calling
 * the session, one call at a time.  A pool that takes one call at a time
 * (runtime/platform/llmc_threads.h, a pthread implementation) serves one
 * running session: sessions that run at once need a pool each.  The
 * runtime splits Linear (blocks of output features), MatMul (rows),
 * Attention (heads) and the row-wise ops (norms, SwiGLU, quantization) into
 * a number of tasks that depends only on the shapes, never on the threads;
 * each task computes exactly what the serial code computes for its part,
 * in the same order, so outputs are bitwise identical for any thread count
 * and without a hook.  A task uses up to LLMC_RT_TASK_STACK bytes of the
 * stack of the thread that runs it (an x86-64 Attention task keeps its
 * query rows, their softmax state and a widened key block there), so a
 * pool's threads need that much on top of their own frames. */
#define LLMC_RT_TASK_STACK (160u * 1024u)
typedef void (*llmc_rt_task_fn)(void *ctx, uint32_t i);
typedef void (*llmc_rt_parallel_fn)(void *pool, uint32_t n_tasks, llmc_rt_task_fn task,
                                    void *ctx);

/* One sequence over a plan, in storage the caller owns; its buffers are
 * carved from the working memory init is given. */
typedef struct llmc_rt_session {
    uint64_t state_[26];              /* the runtime's: its plan, buffers, position, hooks, stats */
} llmc_rt_session;

/* Bytes of working memory llmc_rt_session_init() needs (arena + KV store +
 * cache table + KV pool for max_context positions + prepared tables +
 * alignment slack). */
size_t llmc_rt_session_memory(const llmc_rt_plan *plan);
/* The same for a session that never goes beyond `context` positions
 * (1 <= context <= max_context): the fused caches' pool shrinks to
 * ceil(context / kv_chunk) chunks per cache; the arena and the unfused KV
 * store stay sized for max_context.  SIZE_MAX if context is out of range. */
size_t llmc_rt_session_memory_for(const llmc_rt_plan *plan, uint32_t context);

/* A session with every op (llmc_rt_all_ops). */
llmc_rt_status llmc_rt_session_init(llmc_rt_session *s, const llmc_rt_plan *plan,
                                    void *memory, size_t memory_size, llmc_rt_error *err);
/* A session bounded by `context` positions (llmc_rt_session_memory_for):
 * runs and feeds with S + P > context fail with LLMC_RT_E_BOUNDS. */
llmc_rt_status llmc_rt_session_init_for(llmc_rt_session *s, const llmc_rt_plan *plan,
                                        uint32_t context, void *memory, size_t memory_size,
                                        llmc_rt_error *err);
/* Installs (fn, pool) as the session's parallel-for; fn NULL = serial.
 * Call after init (init clears it); the pool must outlive the runs. */
void llmc_rt_session_set_parallel(llmc_rt_session *s, llmc_rt_parallel_fn fn, void *pool);
llmc_rt_status llmc_rt_session_stats(const llmc_rt_session *s, llmc_rt_stats *out);
/* Generation: feeds n >= 1 tokens (a prompt, or one generated token) at
 * the session's position (0 after init or reset; more feeds continue the
 * sequence), advances the position by n and, if logits is not NULL, writes
 * the logits of the last token (vocab_size floats).  Works for fused plans
 * (Attention ops own the KV caches), unfused ones (past_key_values fed
 * through the KV store) and mixtures of both.  Needs a plan with InputIds
 * and Logits bindings. */
llmc_rt_status llmc_rt_session_feed(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                                    float *logits, llmc_rt_error *err);

/* Forgets the KV store and returns every cache chunk to the pool: the next
 * feed starts at position 0. */
void llmc_rt_session_reset(llmc_rt_session *s);

/* Generic execution (any plan): `inputs` has plan->n_inputs tensors in plan
 * order, each matching the dtype and the dims of its input evaluated at
 * (S, P).  Outputs stay in the arena until the next run.  An Attention op
 * reads positions [0, P) of its cache, so earlier runs must have written
 * them (else LLMC_RT_E_EXEC); it then holds P + S positions.  Runs do not
 * move the session's position (feeds do). */
llmc_rt_status llmc_rt_session_run(llmc_rt_session *s, uint32_t S, uint32_t P,
                                   const llmc_rt_tensor *inputs, llmc_rt_error *err);
llmc_rt_status llmc_rt_session_output(const llmc_rt_session *s, uint32_t index,
                                      llmc_rt_tensor *out, llmc_rt_error *err);

/* ---- re-verification (optional) ------------------------------------------
 * llmc_rt_plan_open checks the weight segments' hashes once (with
 * LLMC_RT_VERIFY_HASHES).  Bytes that change afterwards (a bit flipped in
 * flash or RAM) are caught only by hashing them again: these calls do, on
 * request, and cost one read of every segment (the weights and the
 * tokenizer) per check.  Runs do not read the rest of the plan (a session
 * decodes it into its prepared tables at init).  A firmware that does not
 * call them links none of them (--gc-sections). */

/* Hashes every segment of the open plan again: LLMC_RT_E_HASH names the
 * first one that no longer matches, its byte range in the plan and the
 * tensor stored in it. */
llmc_rt_status llmc_rt_plan_reverify(const llmc_rt_plan *plan, llmc_rt_error *err);
/* The session option "re-verify every N tokens" (0: never, the default
 * after init), which llmc_rt_session_feed_checked applies; setting it
 * restarts the count. */
void llmc_rt_session_set_reverify(llmc_rt_session *s, uint32_t every_tokens);
/* llmc_rt_session_feed, preceded by llmc_rt_plan_reverify once the tokens
 * fed since the last verification (or the option was set) reach the
 * option's N.  A mismatch returns its LLMC_RT_E_HASH without feeding, and
 * so does every later call: generation stops instead of running on changed
 * weights. */
llmc_rt_status llmc_rt_session_feed_checked(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                                            float *logits, llmc_rt_error *err);

/* ---- NPU chunk subgraphs and delegates ------------------------------------
 * A plan compiled with `--npu-chunk C` carries subgraphs (Plan.subgraphs):
 * runs of consecutive ops in Plan.ops whose every tensor has one fixed shape
 * once S = C: Linears over per-tensor int8 activations with per-channel
 * int8 weights, the QuantizeRows with static scales that feed them, norms
 * and elementwise ops (paper 003 §3.2, "static operators").  A session runs
 * them on the CPU like any other op.  A chunked prefill (llmc_rt_chunked_*)
 * splits a prompt into chunks of C tokens, the last one padded with zero
 * rows, hands every subgraph of every chunk to a delegate (an NPU driver an
 * integrator fills in; runtime/platform/llmc_ref_delegate.h is a reference
 * one) and runs the other ops (embedding, attention, shadow outliers) on
 * the calling thread.  The same subgraphs serve every chunk: a delegate
 * builds each once, for C rows.
 *
 * A delegate sees a subgraph through these descriptions, whose shapes are
 * those at S = C.  Its tensors are listed inputs first (written by the CPU
 * side before it runs), then outputs (read after it), then its own:
 * intermediates and weights. */
#define LLMC_RT_SG_OP_IO 5 /* the most operands a subgraph op has on one side */

typedef struct {
    const char *name;                 /* points into the plan */
    int dtype;                        /* llmc_rt_dtype */
    int layout;                       /* LLMC_RT_LAYOUT_*: Dense, QWeightTiles, QActTiles */
    int rank;
    int64_t dims[LLMC_RT_MAX_RANK];   /* logical dims at S = C */
    uint64_t bytes;                   /* its bytes at S = C (a weight: its segment's) */
    const void *weight;               /* a weight: its bytes in the plan; else NULL */
    uint32_t group, tile_rows, tile_depth; /* packed layouts, as in plan.fbs Tensor */
} llmc_rt_sg_tensor;

typedef struct {
    int code;                         /* LLMC_RT_OP_*, one llmc_rt_op_npu accepts */
    int kind;                         /* Unary / Binary kind; Linear: 1 bias, 2 residual */
    float epsilon;                    /* RMSNorm, LayerNorm */
    float scale;                      /* QuantizeRows: the static per-tensor scale */
    const char *name;                 /* the op's name in the plan */
    uint32_t n_inputs, n_outputs;
    uint32_t inputs[LLMC_RT_SG_OP_IO], outputs[LLMC_RT_SG_OP_IO]; /* subgraph tensors */
} llmc_rt_sg_op;

typedef struct {
    uint32_t index;                   /* in Plan.subgraphs */
    const char *name;
    uint32_t rows;                    /* C: the token rows every run has */
    uint32_t n_inputs, n_outputs, n_tensors, n_ops;
    const llmc_rt_sg_tensor *tensors;
    const llmc_rt_sg_op *ops;         /* in execution order */
} llmc_rt_subgraph;

/* Row `row` of an Int8 QWeightTiles weight W [N, K] of a subgraph, unpacked:
 * q[0, K) and its scales[0, ceil(K / group)) (W = scale * q). */
llmc_rt_status llmc_rt_sg_weight_row(const llmc_rt_sg_tensor *w, int64_t row, int8_t *q,
                                     float *scales, llmc_rt_error *err);

/* An NPU as the runtime drives it.  prepare builds a subgraph once (for C
 * rows; a refusal names the op it cannot run); execute starts it on
 * io[0, n_inputs) (the inputs' bytes, dense at S = C) into io[n_inputs,
 * n_inputs + n_outputs) and returns without waiting; wait returns once the
 * execution finishes (block = 0: at once, *finished = 0 while it runs) with
 * its result.  One execution at a time: the runtime calls execute again only
 * after wait reported the previous one finished.  The runtime calls these
 * from the thread that runs the chunked prefill. */
typedef struct {
    void *ctx;
    llmc_rt_status (*prepare)(void *ctx, const llmc_rt_subgraph *sg, void **graph,
                              llmc_rt_error *err);
    llmc_rt_status (*execute)(void *ctx, void *graph, void *const *io, llmc_rt_error *err);
    llmc_rt_status (*wait)(void *ctx, int block, int *finished, llmc_rt_error *err);
    void (*release)(void *ctx, void *graph);
} llmc_rt_delegate;

/* A chunked prefill's state (opaque; in the caller's memory). */
typedef struct llmc_rt_chunked llmc_rt_chunked;

/* Bytes llmc_rt_chunked_init needs for a session bounded by `context`
 * positions with `lanes` chunks in flight (1 <= lanes <= 8: each lane past
 * the first is a copy of the arena at S = C); SIZE_MAX when the plan has no
 * subgraphs or an argument is out of range. */
size_t llmc_rt_chunked_memory(const llmc_rt_plan *plan, uint32_t context, uint32_t lanes);
/* Prepares every subgraph of the session's plan through `delegate` (NULL:
 * the CPU runs them too, chunk by chunk) and returns the chunked state
 * carved from memory.  LLMC_RT_E_ARG when the plan has no subgraphs. */
llmc_rt_status llmc_rt_chunked_init(llmc_rt_chunked **out, llmc_rt_session *s,
                                    const llmc_rt_delegate *delegate, uint32_t lanes,
                                    void *memory, size_t memory_size, llmc_rt_error *err);
/* Every chunk's logits, for scoring a text (a plan whose Logits output has
 * a row per position): with fn set, every chunk runs on to its logits, and
 * fn(ctx, first, logits) is called when it finishes, `first` the index of
 * its first token in the prompt, logits [1, its rows, vocab] (valid during
 * the call only).  NULL: only the last chunk computes logits. */
typedef void (*llmc_rt_chunk_logits_fn)(void *ctx, uint32_t first, const llmc_rt_tensor *logits);
void llmc_rt_chunked_set_logits(llmc_rt_chunked *c, llmc_rt_chunk_logits_fn fn, void *ctx);
/* llmc_rt_session_feed through chunks: n >= 1 tokens at the session's position,
 * which then advances by n; logits (if not NULL) of the last token. */
llmc_rt_status llmc_rt_chunked_prefill(llmc_rt_chunked *c, const int64_t *tokens, uint32_t n,
                                       float *logits, llmc_rt_error *err);
/* Releases every subgraph the delegate prepared. */
void llmc_rt_chunked_release(llmc_rt_chunked *c);

/* ---- sampling ------------------------------------------------------------
 * A caller-owned sampler; no globals.  temperature <= 0 or top_k == 1 is
 * greedy (argmax, ties to the lowest id, like `llmc run`).  Otherwise the
 * candidates are the top_k highest logits (0 = all), then the smallest set
 * of the most probable ones whose probability reaches top_p (top_p <= 0 or
 * >= 1: no nucleus cut), and one is drawn from softmax(logits / temperature)
 * over them with the sampler's PRNG (xorshift64*, seeded by splitmix64), so
 * a seed reproduces a sequence.  Stop tokens are the caller's list. */
typedef struct {
    float temperature;
    uint32_t top_k;
    float top_p;
    uint64_t rng;                     /* PRNG state, never 0 */
    const int64_t *stop;              /* stop token ids (may be NULL) */
    uint32_t n_stop;
} llmc_sampler;

/* Scratch llmc_sample needs for a vocabulary of n ids: 8 * n bytes (an id
 * and a probability per candidate), 4-byte aligned. */
#define LLMC_SAMPLER_SCRATCH_BYTES(n) ((size_t)(n) * 8u)

void llmc_sampler_init(llmc_sampler *sm, float temperature, uint32_t top_k, float top_p,
                       uint64_t seed);
/* Picks a token from logits[0, n).  scratch may be NULL when sampling is
 * greedy. */
llmc_rt_status llmc_sample(llmc_sampler *sm, const float *logits, uint32_t n, void *scratch,
                           size_t scratch_size, int64_t *token, llmc_rt_error *err);
/* 1 if token is one of the sampler's stop tokens. */
int llmc_sampler_is_stop(const llmc_sampler *sm, int64_t token);

/* ---- speculative decoding ------------------------------------------------
 * Decoding reads every weight once per token; a feed of k + 1 tokens
 * costs little more than one.  A step drafts k tokens (prompt lookup: what
 * followed an earlier occurrence of the sequence's last n-gram), feeds the
 * pending token and the drafts in one call, keeps the drafts the target's
 * rows confirm plus one token of the first row that rejects one (or of
 * the row after the last draft), and rewinds the session over the rest.
 * Greedy, the ids are those of plain greedy decoding; sampling, each
 * draft is kept with the target's probability of it (speculative
 * sampling, Leviathan et al. 2023), so the ids follow the sampler's
 * distribution exactly, though a seed gives other ids than plain sampling.
 * Needs a plan whose logits have a row per position (`llmc compile
 * --logits all`, the default).  The calls live in rewind.c, draft.c and
 * speculate.c: a firmware that does not call them links none of them. */
#define LLMC_RT_SPEC_MAX_DRAFT 32u  /* the most tokens a step drafts */
/* Prompt lookup tries the last 3 tokens, then 2, then 1: a longer match
 * predicts better; a shorter one still drafts in text that repeats single
 * tokens (a rejected draft costs a few rows of one feed). */
#define LLMC_RT_DRAFT_NGRAM_MAX 3u
#define LLMC_RT_DRAFT_NGRAM_MIN 1u

/* Moves the session's position back to p <= position: positions [p,
 * position) are forgotten, the next feed writes over them.  LLMC_RT_E_BOUNDS
 * when p > position, or when a sliding-window cache (a ring of chunks)
 * already reused rows a query at p still needs: after feeding more than
 * llmc_rt_session_rewind_span positions past p. */
llmc_rt_status llmc_rt_session_rewind(llmc_rt_session *s, uint32_t p, llmc_rt_error *err);
/* How many positions may be fed past the session's position with a rewind
 * back to it still possible: UINT32_MAX without sliding-window caches,
 * else at least 2 (0 for a session not initialized). */
uint32_t llmc_rt_session_rewind_span(const llmc_rt_session *s);
/* llmc_rt_session_feed_checked writing every fed token's logits: row i of
 * logits[n * vocab_size] follows tokens[i].  LLMC_RT_E_ARG naming `llmc
 * compile --logits all`, before feeding, when the plan's logits have the
 * last row only (even for n = 1, so that a speculative decoder learns it
 * at its first step). */
llmc_rt_status llmc_rt_session_feed_rows(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                                         float *logits, llmc_rt_error *err);

/* Prompt lookup: the longest n-gram (ngram_max down to ngram_min >= 1
 * tokens) ending seq[0, n_seq) that occurs earlier in it, at its most
 * recent occurrence; writes the max_draft tokens that followed it to draft
 * (which may be seq + n_seq; past seq's end the copy goes on from the
 * drafts, so a repeating pattern continues) and returns max_draft, or 0
 * when no n-gram recurs. */
uint32_t llmc_rt_draft_lookup(const int64_t *seq, uint32_t n_seq, uint32_t ngram_max,
                              uint32_t ngram_min, int64_t *draft, uint32_t max_draft);

/* Bytes of 4-aligned scratch a step of up to max_draft drafts needs: the
 * rows of its feed and the sampler's scratch (0 past LLMC_RT_SPEC_MAX_DRAFT). */
size_t llmc_rt_speculate_scratch(const llmc_rt_plan *plan, uint32_t max_draft);

/* What a step did: drafted tokens fed, and how many of them were kept. */
typedef struct {
    uint32_t drafted, accepted;
} llmc_rt_spec_step;

/* The rule a step applies, for a caller that computes the target's rows
 * itself: rows[(n_draft + 1) * vocab] are the target's logits after the
 * pending token and after each draft; keeps *accepted of draft[0, n_draft)
 * and sets *next, the token that follows them.  Greedy: drafts equal to
 * their row's argmax are kept, *next is the first other argmax.  Sampling:
 * speculative sampling for a drafter that proposes single tokens (q a point
 * mass), draft[i] kept with probability p(draft[i]), p the sampler's
 * distribution over row i, else *next drawn from p without it; so the kept
 * tokens and *next follow the sampler's distribution exactly.  scratch:
 * LLMC_SAMPLER_SCRATCH_BYTES(vocab), 4-aligned (may be NULL when greedy). */
llmc_rt_status llmc_rt_speculate_accept(llmc_sampler *sm, const float *rows, uint32_t vocab,
                                        const int64_t *draft, uint32_t n_draft, void *scratch,
                                        size_t scratch_size, uint32_t *accepted, int64_t *next,
                                        llmc_rt_error *err);
/* Verifies n_draft drafted tokens seq[n_seq, n_seq + n_draft) (any
 * drafter that proposes single tokens: prompt lookup, a greedy draft
 * model).  The session holds seq[0, n_seq - 1) (position n_seq - 1) and
 * seq[n_seq - 1] is pending.  Feeds the pending token and the drafts, keeps
 * *accepted of the drafts, writes the next token at seq[n_seq + *accepted]
 * and leaves the session at position n_seq + *accepted: that token is the
 * new pending one.  seq holds n_seq + n_draft + 1 tokens. */
llmc_rt_status llmc_rt_speculate_verify(llmc_rt_session *s, llmc_sampler *sm, int64_t *seq,
                                        uint32_t n_seq, uint32_t n_draft, void *scratch,
                                        size_t scratch_size, uint32_t *accepted,
                                        llmc_rt_error *err);
/* The most tokens a step may draft with the session at position n_seq - 1:
 * max_draft, at most LLMC_RT_SPEC_MAX_DRAFT, fewer near the session's
 * context, the sequence's capacity `cap` (seq holds the drafts and a token
 * after them) or the rewind span. */
uint32_t llmc_rt_speculate_room(const llmc_rt_session *s, uint32_t max_draft, uint32_t n_seq,
                                uint32_t cap);
/* One step with prompt lookup: drafts up to llmc_rt_speculate_room tokens,
 * verifies them, and grows *n_seq by the kept drafts + 1.  The first step
 * follows the prompt's feed: seq = the prompt and the token sampled from
 * its last logits (pending).  After a step (or llmc_rt_speculate_verify)
 * scratch starts with the feed's rows: row i (i <= accepted) is the
 * distribution the token at the old n_seq + i came from. */
llmc_rt_status llmc_rt_speculate_step(llmc_rt_session *s, llmc_sampler *sm, uint32_t max_draft,
                                      int64_t *seq, uint32_t *n_seq, uint32_t cap, void *scratch,
                                      size_t scratch_size, llmc_rt_spec_step *out,
                                      llmc_rt_error *err);

/* ---- Tokenizer (text <-> ids) ----
 * A compiled tokenizer (runtime/tokenizer_format.h): the plan's tokenizer
 * segment (`llmc compile --tokenizer`), or bytes built by the compiler
 * from a tokenizer.json (compiler/tokenizer/tokenizer_json.h).
 * Encoding needs caller scratch (llmc_rt_tokenizer_scratch / _memory:
 * O(text bytes): 225 bytes per input byte, 543 with NFC) and takes O(n log n) time
 * in the longest pre-token, linear otherwise. */
typedef struct {
    uint64_t opaque_[16];               /* the verified bytes and their header */
} llmc_rt_tokenizer;

/* Proves every offset, size, id and hash table of the bytes before use. */
llmc_rt_status llmc_rt_tokenizer_open(llmc_rt_tokenizer *tok, const void *bytes, size_t size,
                                      llmc_rt_error *err);
/* The plan's tokenizer (verified by llmc_rt_plan_open; LLMC_RT_E_ARG if
 * the plan has none). */
llmc_rt_status llmc_rt_plan_tokenizer(const llmc_rt_plan *plan, llmc_rt_tokenizer *tok,
                                      llmc_rt_error *err);
/* The number of ids and the BOS and EOS ids (UINT32_MAX when absent); any
 * pointer may be NULL. */
void llmc_rt_tokenizer_ids(const llmc_rt_tokenizer *tok, uint32_t *n_ids, uint32_t *bos,
                           uint32_t *eos);
size_t llmc_rt_tokenizer_scratch(const llmc_rt_tokenizer *tok, size_t text_bytes);
llmc_rt_status llmc_rt_tokenizer_encode(const llmc_rt_tokenizer *tok, const char *text, size_t len,
                                        int add_special, void *scratch, size_t scratch_size,
                                        int64_t *ids, size_t max_ids, size_t *n_ids,
                                        llmc_rt_error *err);

/* The same through a plan: memory is 0 when the plan has no tokenizer. */
size_t llmc_rt_tokenizer_memory(const llmc_rt_plan *plan, size_t text_bytes);
llmc_rt_status llmc_rt_encode(const llmc_rt_plan *plan, const char *text, size_t len,
                              int add_special, void *scratch, size_t scratch_size,
                              int64_t *ids, size_t max_ids, size_t *n_ids, llmc_rt_error *err);

/* Streaming decode: one token at a time; bytes of a UTF-8 sequence split
 * across tokens are held until complete (an ill-formed or interrupted
 * sequence becomes U+FFFD, as TextDecoder does).  Each call writes at most
 * llmc_rt_detok_max_bytes() bytes; finish() flushes what is held. */
typedef struct {
    uint32_t opaque_[8];                /* the decoder's state; llmc_rt_detok_init sets it */
} llmc_rt_detok;

void llmc_rt_detok_init(const llmc_rt_tokenizer *tok, llmc_rt_detok *d);
size_t llmc_rt_detok_max_bytes(const llmc_rt_tokenizer *tok);
llmc_rt_status llmc_rt_detok_token(const llmc_rt_tokenizer *tok, llmc_rt_detok *d, int64_t id,
                                   char *out, size_t cap, size_t *n_out, llmc_rt_error *err);
llmc_rt_status llmc_rt_detok_finish(const llmc_rt_tokenizer *tok, llmc_rt_detok *d, char *out,
                                    size_t cap, size_t *n_out, llmc_rt_error *err);

#endif
