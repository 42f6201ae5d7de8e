/* llmc runtime: the op resolver, for firmware that links only the kernels
 * its plan uses.  An application that runs any plan needs only llmc_rt.h.
 *
 * Which kernels a session may call (TensorFlow Lite Micro's op resolver):
 * the exec function of each plan op code, its checks (the verifier's
 * dtype, rank and shape rules for it) and its prepare step, Unary's float32
 * loop of each kind (the libm-heavy part), Binary's float32 loop of each kind whose float32
 * operands give a float32 result (LLMC_PLAN_BINARY_F32_KINDS) and its
 * any-dtype path for every other case (integers, bool, comparisons, Pow of
 * mixed dtypes), Gather's kernel for its table's layout (dense, or packed
 * rows dequantized), Linear's kernel of each weight format (W's layout,
 * and the plan's prefill kernel for QWeightTiles) and Attention's KV cache
 * loops of the plan's kv_cache_dtype (storing rows, scores, weighted sums).  Session init stores the
 * entries each op uses and refuses, with LLMC_RT_E_RESOLVER, a plan whose
 * op needs an entry the resolver lacks: "op 12 (Unary 'act'): Unary kind
 * Erf is not in the session's op resolver".
 *
 * llmc_rt_all_ops holds every entry; llmc_rt_session_init and _init_for
 * use it.  A firmware build declares only what its plan uses, a const
 * table in flash, and opens its plan with it too (llmc_rt_plan_open_ops),
 * so that --gc-sections drops every other kernel, every other op's checks
 * and the libm functions only they call; `llmc inspect PLAN --resolver` prints the
 * list (LLMC_RESOLVER_ENTRIES):
 *
 *   static LLMC_RT_RESOLVER(plan_ops, LLMC_RT_OP(Gather) LLMC_RT_GATHER(Dense)
 *                           LLMC_RT_OP(RMSNorm)
 *                           LLMC_RT_OP(Unary) LLMC_RT_UNARY(Silu)
 *                           LLMC_RT_OP(Binary) LLMC_RT_BINARY(Add)
 *                           LLMC_RT_OP(Linear) LLMC_RT_LINEAR(Dense));
 *   llmc_rt_plan_open_ops(&plan, bytes, size, flags, &plan_ops, &err);
 *   llmc_rt_session_init_ops(&s, &plan, plan.max_context, &plan_ops, mem, size, &err);
 *
 * The entries are the functions declared below; a program calls them only
 * through llmc_rt_plan_open_ops (an op code's checks) and a session. */
#ifndef LLMC_RT_RESOLVER_H
#define LLMC_RT_RESOLVER_H

#include "llmc_rt.h"

struct llmc_rt_op_call; /* one op being run (internal) */
typedef llmc_rt_status (*llmc_rt_op_fn)(struct llmc_rt_op_call *call, llmc_rt_error *err);
struct llmc_rt_op_check; /* one op being verified (internal) */
/* An op code's checks in llmc_rt_plan_open_ops (dtypes, ranks, shapes and
 * attributes of its operands) */
typedef llmc_rt_status (*llmc_rt_verify_fn)(const struct llmc_rt_op_check *check,
                                            llmc_rt_error *err);
struct llmc_rt_op_prep; /* one op being decoded by session init (internal) */
/* What session init decodes of an op code's own fields beyond its operands
 * and attributes: Copy's regions, Symbols' values, Reduce's axes, the packed
 * shape of a Linear's or ShadowLinear's W */
typedef llmc_rt_status (*llmc_rt_prepare_fn)(const struct llmc_rt_op_prep *prep,
                                             llmc_rt_error *err);
/* An op code's entries (TensorFlow Lite Micro's registration): its exec
 * function, its checks, and its prepare step (NULL: the code has no fields
 * of its own), so that a resolver without the code links none of them. */
typedef struct {
    llmc_rt_op_fn exec;
    llmc_rt_verify_fn verify;
    llmc_rt_prepare_fn prepare;
} llmc_rt_op_entry;
/* y[i] = the kind's function of x[i] for i < n (float32) */
typedef void (*llmc_rt_unary_fn)(const float *x, float *y, int64_t n);
/* Binary's float32 loop of a kind: y[i] = a[i * sa] `kind` b[i * sb] for
 * i < n (a stride is 0 for a broadcast operand). */
typedef void (*llmc_rt_binary_fn)(const float *a, int64_t sa, const float *b, int64_t sb,
                                  float *y, int64_t n);
/* Binary's any-dtype path, one element: y[iy] = a[ia] `kind` b[ib] by the
 * dtypes' rules; 0 on an integer division by zero. */
typedef int (*llmc_rt_binary_any_fn)(int kind, const llmc_rt_tensor *a, int64_t ia,
                                     const llmc_rt_tensor *b, int64_t ib, llmc_rt_tensor *y,
                                     int64_t iy);
/* Linear's outputs ys[0..n_ys), n_ys <= LLMC_RT_LINEAR_OUTPUTS: consecutive
 * columns of x W^T + bias + residual, ys[0] from column col0 (a merged
 * Linear's q, k and v in one call, so that a kernel can run them as one
 * parallel job) */
#define LLMC_RT_LINEAR_OUTPUTS 4
typedef llmc_rt_status (*llmc_rt_linear_fn)(struct llmc_rt_op_call *call, int64_t col0,
                                            llmc_rt_tensor *ys, uint32_t n_ys,
                                            llmc_rt_error *err);

/* Gather's kernels: its table (input 0) Dense (any axis, any dtype), or
 * the packed rows of a quantized embedding dequantized to float32. */
#define LLMC_RT_GATHER_KERNELS(X) X(Dense) X(PackedRows)

/* Attention's KV cache loops, by Plan.kv_cache_dtype: Float32, Float16, or
 * Int8 K rows (with a scale) and Float16 V rows.  An entry sets the loops
 * (internal) that store, score and sum its rows. */
#define LLMC_RT_KV_CACHES(X) X(Float32) X(Float16) X(Int8)
struct llmc_rt_kv_loops;
typedef void (*llmc_rt_kv_fn)(struct llmc_rt_kv_loops *loops);

/* Linear's kernels: W Dense, FWeightTiles, QWeightTiles on the int8 GEMM,
 * QWeightTiles in a plan whose prefill kernel is f32-dequant. */
#define LLMC_RT_LINEAR_KERNELS(X) \
    X(Dense) X(FWeightTiles) X(QWeightTiles) X(QWeightTilesF32Dequant)

#define LLMC_RT_LINEAR_INDEX_(Name) LLMC_RT_LINEAR_##Name,
#define LLMC_RT_GATHER_INDEX_(Name) LLMC_RT_GATHER_##Name,
#define LLMC_RT_KV_INDEX_(Name) LLMC_RT_KV_##Name,
enum { LLMC_RT_LINEAR_KERNELS(LLMC_RT_LINEAR_INDEX_) LLMC_RT_LINEAR_COUNT };
enum { LLMC_RT_GATHER_KERNELS(LLMC_RT_GATHER_INDEX_) LLMC_RT_GATHER_COUNT };
enum { LLMC_RT_KV_CACHES(LLMC_RT_KV_INDEX_) LLMC_RT_KV_COUNT };

#define LLMC_RT_OP_FN_(s, Name, ...)                                                        \
    llmc_rt_status llmc_rt_exec_##Name(struct llmc_rt_op_call *call, llmc_rt_error *err); \
    llmc_rt_status llmc_rt_verify_##Name(const struct llmc_rt_op_check *check, llmc_rt_error *err); \
    extern const llmc_rt_op_entry llmc_rt_op_##Name;
#define LLMC_RT_UNARY_FN_(s, Name, v) void llmc_rt_unary_##Name(const float *x, float *y, int64_t n);
#define LLMC_RT_BINARY_FN_(s, Name)                                                      \
    void llmc_rt_binary_##Name(const float *a, int64_t sa, const float *b, int64_t sb, \
                               float *y, int64_t n);
#define LLMC_RT_LINEAR_FN_(Name)                                                     \
    llmc_rt_status llmc_rt_linear_##Name(struct llmc_rt_op_call *call, int64_t col0, \
                                         llmc_rt_tensor *ys, uint32_t n_ys,          \
                                         llmc_rt_error *err);
LLMC_PLAN_OPS(LLMC_RT_OP_FN_)
LLMC_PLAN_UNARY_KINDS(LLMC_RT_UNARY_FN_)
LLMC_PLAN_BINARY_F32_KINDS(LLMC_RT_BINARY_FN_)
int llmc_rt_binary_any_dtype(int kind, const llmc_rt_tensor *a, int64_t ia,
                             const llmc_rt_tensor *b, int64_t ib, llmc_rt_tensor *y, int64_t iy);
LLMC_RT_LINEAR_KERNELS(LLMC_RT_LINEAR_FN_)
#define LLMC_RT_GATHER_FN_(Name) \
    llmc_rt_status llmc_rt_gather_##Name(struct llmc_rt_op_call *call, llmc_rt_error *err);
LLMC_RT_GATHER_KERNELS(LLMC_RT_GATHER_FN_)
#define LLMC_RT_KV_FN_(Name) void llmc_rt_kv_##Name(struct llmc_rt_kv_loops *loops);
LLMC_RT_KV_CACHES(LLMC_RT_KV_FN_)

/* NULL entries: not available to the session. */
typedef struct {
    const llmc_rt_op_entry *op[LLMC_RT_OP_COUNT];     /* by OpCode */
    llmc_rt_unary_fn unary[LLMC_RT_UNARY_COUNT];      /* by UnaryKind */
    llmc_rt_binary_fn binary[LLMC_RT_BINARY_COUNT];   /* by BinaryKind (its float32 kinds) */
    llmc_rt_binary_any_fn binary_any_dtype;           /* Binary's other operands */
    llmc_rt_op_fn gather[LLMC_RT_GATHER_COUNT];       /* by LLMC_RT_GATHER_KERNELS */
    llmc_rt_linear_fn linear[LLMC_RT_LINEAR_COUNT];   /* by LLMC_RT_LINEAR_KERNELS */
    llmc_rt_kv_fn kv_cache[LLMC_RT_KV_COUNT];         /* by LLMC_RT_KV_CACHES */
} llmc_rt_op_resolver;

/* A resolver of the entries listed (names as in plan_enums.h,
 * LLMC_RT_GATHER_KERNELS, LLMC_RT_LINEAR_KERNELS and LLMC_RT_KV_CACHES):
 * `static LLMC_RT_RESOLVER(name, LLMC_RT_OP(Rope) ...);`
 * LLMC_RT_BINARY takes the kinds of LLMC_PLAN_BINARY_F32_KINDS. */
#define LLMC_RT_RESOLVER(name, entries) const llmc_rt_op_resolver name = {entries}
#define LLMC_RT_OP(Name) .op[LLMC_RT_OP_##Name] = &llmc_rt_op_##Name,
#define LLMC_RT_UNARY(Name) .unary[LLMC_RT_UNARY_##Name] = llmc_rt_unary_##Name,
#define LLMC_RT_BINARY(Name) .binary[LLMC_RT_BINARY_##Name] = llmc_rt_binary_##Name,
#define LLMC_RT_BINARY_ANY_DTYPE .binary_any_dtype = llmc_rt_binary_any_dtype,
#define LLMC_RT_GATHER(Name) .gather[LLMC_RT_GATHER_##Name] = llmc_rt_gather_##Name,
#define LLMC_RT_LINEAR(Name) .linear[LLMC_RT_LINEAR_##Name] = llmc_rt_linear_##Name,
#define LLMC_RT_KV_CACHE(Name) .kv_cache[LLMC_RT_KV_##Name] = llmc_rt_kv_##Name,

/* Every op code, Unary kind, Binary entry, Gather and Linear kernel, KV cache dtype. */
extern const llmc_rt_op_resolver llmc_rt_all_ops;

/* llmc_rt_plan_open with the checks of the op codes in `ops` only (the
 * verify functions of its op entries): an op of
 * another code is refused with LLMC_RT_E_RESOLVER ("op 3 (Rope 'rope'): op
 * Rope is not in the op resolver"), so every op is still proved before
 * anything runs, and a firmware that opens its plan this way links only the
 * checks of its plan's ops.  Every other check is llmc_rt_plan_open's. */
llmc_rt_status llmc_rt_plan_open_ops(llmc_rt_plan *plan, const void *bytes, size_t size,
                                     unsigned flags, const llmc_rt_op_resolver *ops,
                                     llmc_rt_error *err);

/* llmc_rt_session_init_for with the kernels of `ops` only (not NULL: a program that names
 * its resolver links nothing else); LLMC_RT_E_RESOLVER when an op of the
 * plan needs an entry ops lacks.  ops may go away after init. */
llmc_rt_status llmc_rt_session_init_ops(llmc_rt_session *s, const llmc_rt_plan *plan,
                                        uint32_t context, const llmc_rt_op_resolver *ops,
                                        void *memory, size_t memory_size, llmc_rt_error *err);

#endif
