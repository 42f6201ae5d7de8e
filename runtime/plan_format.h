/* Internal: reading the plan FlatBuffer (schemas/plan.fbs).
 *
 * Every accessor checks what it reads against the file bounds and returns
 * a status, so the verifier (llmc_rt_plan_open) and the interpreter share one
 * code path and nothing is ever read unchecked.  Binary format, little-endian:
 *   byte 0: uoffset of the root table; bytes 4..7: identifier "LLMC"
 *   table:  int32 soffset; its vtable is at table_pos - soffset
 *   vtable: uint16 vtable_bytes, uint16 table_bytes, then one uint16 field
 *           offset per field id (absent or 0 = field holds its default)
 *   uoffset fields point forward relative to their own position
 *   vector: uint32 length, elements;  string: uint32 length, bytes, NUL */
#ifndef LLMC_RT_PLAN_FORMAT_H
#define LLMC_RT_PLAN_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llmc_rt_internal.h"
#include "plan_enums.h"

/* The fields of each table of schemas/plan.fbs: X(SUFFIX, schema_name).  A
 * field's id is its position in the list, which is its declaration order in
 * plan.fbs (the schema gives no explicit ids); the reader and
 * codegen/plan_writer.c both name fields by these ids, and
 * tests/t_plan_schema.sh checks every list against plan.fbs (`llmc ops
 * --plan-fields` prints them). */
#define LLMC_PLAN_PLAN_FIELDS(X)                                                    \
    X(FORMAT_VERSION, format_version) X(TARGET, target) X(SOURCE_HASH, source_hash) \
    X(COMPILER_VERSION, compiler_version) X(MAX_CONTEXT, max_context)               \
    X(ARENA_SIZE, arena_size) X(TENSORS, tensors) X(OPS, ops) X(INPUTS, inputs)     \
    X(OUTPUTS, outputs) X(SEGMENTS, segments) X(PASSES, passes)                     \
    X(VOCAB_SIZE, vocab_size) X(N_LAYERS, n_layers) X(N_CACHES, n_caches)           \
    X(KV_CHUNK, kv_chunk) X(GEMM_MIN_ROWS, gemm_min_rows)                           \
    X(PREFILL_KERNEL, prefill_kernel) X(KV_CACHE_DTYPE, kv_cache_dtype)             \
    X(TOKENIZER, tokenizer) X(NPU_CHUNK, npu_chunk) X(SUBGRAPHS, subgraphs)         \
    X(NPU_COSTS, npu_costs) X(DECODE_ISA, decode_isa) X(PREFILL_ISA, prefill_isa)     \
    X(GEMV_PREFETCH, gemv_prefetch)
#define LLMC_PLAN_SUBGRAPH_FIELDS(X)                                          \
    X(NAME, name) X(FIRST_OP, first_op) X(N_OPS, n_ops) X(INPUTS, inputs) \
    X(OUTPUTS, outputs)
#define LLMC_PLAN_TOKENIZER_FIELDS(X) X(SEGMENT, segment)
#define LLMC_PLAN_TENSOR_FIELDS(X)                                                \
    X(NAME, name) X(DTYPE, dtype) X(DIMS, dims) X(KIND, kind)                     \
    X(ARENA_OFFSET, arena_offset) X(MAX_BYTES, max_bytes) X(SEGMENT, segment)     \
    X(LAYOUT, layout) X(GROUP, group) X(TILE_ROWS, tile_rows) X(TILE_DEPTH, tile_depth)   \
    X(COEF, coef)
#define LLMC_PLAN_SEGMENT_FIELDS(X) X(OFFSET, offset) X(SIZE, size) X(XXHASH64, xxhash64)
#define LLMC_PLAN_OP_FIELDS(X)                                                        \
    X(CODE, code) X(NAME, name) X(INPUTS, inputs) X(OUTPUTS, outputs) X(KIND, kind)   \
    X(AXIS, axis) X(AXES, axes) X(KEEPDIMS, keepdims) X(EPSILON, epsilon)             \
    X(VALUE, value) X(VALUES, values) X(REGIONS, regions) X(HEADS, heads)             \
    X(KV_HEADS, kv_heads) X(HEAD_DIM, head_dim) X(ROTARY_DIM, rotary_dim)             \
    X(SCALE, scale) X(CACHE, cache) X(WINDOW, window) X(SOFTCAP, softcap)
#define LLMC_PLAN_REGION_FIELDS(X)                                              \
    X(SRC, src) X(DST, dst) X(DST_START, dst_start) X(SIZE, size)               \
    X(SRC_START, src_start) X(SRC_AXIS, src_axis) X(SRC_STEP, src_step)
#define LLMC_PLAN_IO_FIELDS(X) X(TENSOR, tensor) X(ROLE, role) X(LAYER, layer)
#define LLMC_PLAN_PASS_FIELDS(X) X(NAME, name) X(NODES, nodes) X(DIGEST, digest) X(DETAIL, detail)

/* Every table: Y(SchemaTable, list), for tools that print them all. */
#define LLMC_PLAN_TABLE_LISTS(Y)                                                 \
    Y(Plan, LLMC_PLAN_PLAN_FIELDS) Y(Subgraph, LLMC_PLAN_SUBGRAPH_FIELDS)        \
    Y(Tokenizer, LLMC_PLAN_TOKENIZER_FIELDS) Y(Tensor, LLMC_PLAN_TENSOR_FIELDS)  \
    Y(Segment, LLMC_PLAN_SEGMENT_FIELDS) Y(Op, LLMC_PLAN_OP_FIELDS)              \
    Y(Region, LLMC_PLAN_REGION_FIELDS) Y(IoBinding, LLMC_PLAN_IO_FIELDS)         \
    Y(PassRecord, LLMC_PLAN_PASS_FIELDS)

/* The ids as PLAN_TARGET, TENSOR_LAYOUT, OP_AXIS, ... */
#define PF_PLAN_F(s, n) PLAN_##s,
#define PF_SUBGRAPH_F(s, n) SUBGRAPH_##s,
#define PF_TOKENIZER_F(s, n) TOKENIZER_##s,
#define PF_TENSOR_F(s, n) TENSOR_##s,
#define PF_SEGMENT_F(s, n) SEGMENT_##s,
#define PF_OP_F(s, n) OP_##s,
#define PF_REGION_F(s, n) REGION_##s,
#define PF_IO_F(s, n) IO_##s,
#define PF_PASS_F(s, n) PASS_##s,
enum { LLMC_PLAN_PLAN_FIELDS(PF_PLAN_F) PLAN_FIELD_COUNT };
enum { LLMC_PLAN_SUBGRAPH_FIELDS(PF_SUBGRAPH_F) SUBGRAPH_FIELD_COUNT };
enum { LLMC_PLAN_TOKENIZER_FIELDS(PF_TOKENIZER_F) TOKENIZER_FIELD_COUNT };
enum { LLMC_PLAN_TENSOR_FIELDS(PF_TENSOR_F) TENSOR_FIELD_COUNT };
enum { LLMC_PLAN_SEGMENT_FIELDS(PF_SEGMENT_F) SEGMENT_FIELD_COUNT };
enum { LLMC_PLAN_OP_FIELDS(PF_OP_F) OP_FIELD_COUNT };
enum { LLMC_PLAN_REGION_FIELDS(PF_REGION_F) REGION_FIELD_COUNT };
enum { LLMC_PLAN_IO_FIELDS(PF_IO_F) IO_FIELD_COUNT };
enum { LLMC_PLAN_PASS_FIELDS(PF_PASS_F) PASS_FIELD_COUNT };

/* Codes of schemas/plan.fbs, generated from plan_enums.h; the asserts
 * prove each list is numbered 0, 1, 2, ... in order. */
#define PF_ENUM_(P, s, v) P##s = v,
#define PF_ORD_(P, s) P##ORD_##s,
#define PF_SAME_(P, s) LLMC_STATIC_ASSERT(P##s, (int)P##s == (int)P##ORD_##s);

/* Ops, Unary and Binary kinds and layouts have one name each, the public
 * LLMC_RT_OP_Linear, LLMC_RT_UNARY_Silu, LLMC_RT_BINARY_Add,
 * LLMC_RT_LAYOUT_QWeightTiles (llmc_rt.h); here only their numbering is
 * proved. */
#define PF_PUBLIC_(P, pub, s, n) LLMC_STATIC_ASSERT(P##s, (int)pub##n == (int)P##ORD_##s);
#define PF_OP_O(s, ...) PF_ORD_(OP_, s)
#define PF_OP_A(s, n, ...) PF_PUBLIC_(OP_, LLMC_RT_OP_, s, n)
enum { LLMC_PLAN_OPS(PF_OP_O) };
LLMC_PLAN_OPS(PF_OP_A)

#define PF_UN_O(s, n, v) PF_ORD_(UNARY_, s)
#define PF_UN_A(s, n, v) PF_PUBLIC_(UNARY_, LLMC_RT_UNARY_, s, n)
enum { LLMC_PLAN_UNARY_KINDS(PF_UN_O) };
LLMC_PLAN_UNARY_KINDS(PF_UN_A)

#define PF_BIN_O(s, n, v) PF_ORD_(BINARY_, s)
#define PF_BIN_A(s, n, v) PF_PUBLIC_(BINARY_, LLMC_RT_BINARY_, s, n)
enum { LLMC_PLAN_BINARY_KINDS(PF_BIN_O) };
LLMC_PLAN_BINARY_KINDS(PF_BIN_A)

#define PF_RED_E(s, n, v) PF_ENUM_(REDUCE_, s, v)
#define PF_RED_O(s, n, v) PF_ORD_(REDUCE_, s)
#define PF_RED_A(s, n, v) PF_SAME_(REDUCE_, s)
enum { LLMC_PLAN_REDUCE_KINDS(PF_RED_E) };
enum { LLMC_PLAN_REDUCE_KINDS(PF_RED_O) REDUCE_COUNT };
LLMC_PLAN_REDUCE_KINDS(PF_RED_A)

/* ScatterND's kind (ScatterReduction); CumSum's kind bits. */
#define PF_SC_E(s, n, v) PF_ENUM_(SCATTER_, s, v)
#define PF_SC_O(s, n, v) PF_ORD_(SCATTER_, s)
#define PF_SC_A(s, n, v) PF_SAME_(SCATTER_, s)
enum { LLMC_PLAN_SCATTER_REDUCTIONS(PF_SC_E) };
enum { LLMC_PLAN_SCATTER_REDUCTIONS(PF_SC_O) SCATTER_COUNT };
LLMC_PLAN_SCATTER_REDUCTIONS(PF_SC_A)
enum { CUMSUM_EXCLUSIVE = 1, CUMSUM_REVERSE = 2 };
/* Linear's kind bits: a bias input, a residual input, and x float32
 * quantized by the op itself into activation tiles, its last output (its
 * workspace: QActTiles of W's group, read by no op), with the static scale
 * Op.scale or per row when that is 0. */
enum { LINEAR_BIAS = 1, LINEAR_RESIDUAL = 2, LINEAR_QUANTIZE = 4 };

#define PF_LAY_O(s, n, v, ...) PF_ORD_(LAYOUT_, s)
#define PF_LAY_A(s, n, v, ...) PF_PUBLIC_(LAYOUT_, LLMC_RT_LAYOUT_, s, n)
enum { LLMC_PLAN_LAYOUTS(PF_LAY_O) };
LLMC_PLAN_LAYOUTS(PF_LAY_A)

#define PF_KIND_E(s, n, v) PF_ENUM_(KIND_, s, v)
#define PF_KIND_O(s, n, v) PF_ORD_(KIND_, s)
#define PF_KIND_A(s, n, v) PF_SAME_(KIND_, s)
enum { LLMC_PLAN_TENSOR_KINDS(PF_KIND_E) };
enum { LLMC_PLAN_TENSOR_KINDS(PF_KIND_O) KIND_COUNT };
LLMC_PLAN_TENSOR_KINDS(PF_KIND_A)

#define PF_ROLE_E(s, n, v, d, r) PF_ENUM_(ROLE_, s, v)
#define PF_ROLE_O(s, n, v, d, r) PF_ORD_(ROLE_, s)
#define PF_ROLE_A(s, n, v, d, r) PF_SAME_(ROLE_, s)
enum { LLMC_PLAN_IO_ROLES(PF_ROLE_E) };
enum { LLMC_PLAN_IO_ROLES(PF_ROLE_O) ROLE_COUNT };
LLMC_PLAN_IO_ROLES(PF_ROLE_A)

/* Targets (plan_enums.h) and the tile sizes their layouts use. */
#define PF_TGT_O(s, ...) TARGET_##s,
enum { LLMC_PLAN_TARGETS(PF_TGT_O) TARGET_COUNT };
#define PF_TGT_NAME_(s, text, ...) " " text
#define RT_TARGET_NAMES LLMC_PLAN_TARGETS(PF_TGT_NAME_) /* " generic avx2 ..." */

typedef struct {
    const char *name;
    int q_hp, q_lp, q_ep;   /* QWeightTiles hp, lp; QActTiles ep */
    int f_hp, f_ep;         /* FWeightTiles hp (0: fp32 weights stay Dense); fp32 GEMM rows */
} rt_target_info;

/* kernels/targets.c: the index of a target name (TARGET_*), -1 if unknown;
 * its info (NULL for an index out of range). */
int rt_target_index(const char *name);
const rt_target_info *rt_target_info_of(int index);

/* Plan.prefill_kernel values (plan_enums.h) and their names ("?" past the
 * list). */
#define PF_PK_E(s, n, v) PREFILL_##s = v,
enum { LLMC_PLAN_PREFILL_KERNELS(PF_PK_E) PREFILL_KERNEL_COUNT };
static inline const char *rt_prefill_kernel_name(uint32_t v)
{
#define PF_PK_N(s, n, v) n,
    static const char *const names[] = {LLMC_PLAN_PREFILL_KERNELS(PF_PK_N)};
#undef PF_PK_N
    return v < PREFILL_KERNEL_COUNT ? names[v] : "?";
}

/* Plan.decode_isa and Plan.prefill_isa values (plan_enums.h), their names
 * and the target whose plans each table runs ("?" and -1 past the list). */
#define PF_KISA_O(s, n, t) KISA_##s,
enum { LLMC_PLAN_KERNEL_ISAS(PF_KISA_O) KISA_COUNT };
static inline const char *rt_kernel_isa_name(uint32_t v)
{
#define PF_KISA_N(s, n, t) n,
    static const char *const names[] = {LLMC_PLAN_KERNEL_ISAS(PF_KISA_N)};
#undef PF_KISA_N
    return v < KISA_COUNT ? names[v] : "?";
}
static inline int rt_kernel_isa_target(uint32_t v)
{
#define PF_KISA_T(s, n, t) TARGET_##t,
    static const signed char targets[] = {LLMC_PLAN_KERNEL_ISAS(PF_KISA_T)};
#undef PF_KISA_T
    return v < KISA_COUNT ? targets[v] : -1;
}

/* A Linear over QWeightTiles with fewer rows than this runs one GEMV per
 * row when the plan does not say (Plan.gemm_min_rows 0). */
#define RT_DEFAULT_GEMM_MIN_ROWS 4u

/* Dtypes (ONNX numbering, not consecutive): the runtime's public
 * llmc_rt_dtype must agree with the list. */
#define PF_DT_A(s, n, v, bits) LLMC_STATIC_ASSERT(dtype_##s, (int)LLMC_RT_##s == v);
LLMC_PLAN_DTYPES(PF_DT_A)

/* The dtype (ONNX numbering) and rank an LLM role implies: int64 [b, S]
 * ids and mask, float [b, kv_heads, P, head_dim] caches, float [b, S, vocab]
 * logits; 0 for Generic.  The compiler checks its bindings against these. */
static inline int role_dtype(int role)
{
#define PF_ROLE_DT(s, n, v, d, r) d,
    static const int dtype[ROLE_COUNT] = {LLMC_PLAN_IO_ROLES(PF_ROLE_DT)};
    return role >= 0 && role < ROLE_COUNT ? dtype[role] : 0;
}

static inline int role_rank(int role)
{
#define PF_ROLE_RANK(s, n, v, d, r) r,
    static const int rank[ROLE_COUNT] = {LLMC_PLAN_IO_ROLES(PF_ROLE_RANK)};
    return role >= 0 && role < ROLE_COUNT ? rank[role] : 0;
}

static inline bool role_is_kv(int role)
{
    return role == ROLE_PAST_KEY || role == ROLE_PAST_VALUE || role == ROLE_PRESENT_KEY ||
           role == ROLE_PRESENT_VALUE;
}

#define AFFINE_BYTES 24u /* struct Affine { long c, s, p; } */

/* The bytes being read.  `end` grows to the highest byte any verified object
 * covers, which tells the verifier where the FlatBuffer ends. */
typedef struct {
    const uint8_t *base;
    size_t size;
    uint64_t end;
} fb_reader;

typedef struct {
    const char *what;  /* table type, for messages */
    uint32_t pos;      /* table start */
    uint32_t vtable;   /* vtable start */
    uint16_t n_fields; /* field slots the vtable has */
    uint16_t bytes;    /* table size */
} fb_table;

typedef struct {
    uint32_t pos; /* first element */
    uint32_t len;
} fb_vector;

static inline uint32_t fb_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fb_u64(const uint8_t *p)
{
    return (uint64_t)fb_u32(p) | (uint64_t)fb_u32(p + 4) << 32;
}

static inline int64_t fb_i64(const uint8_t *p)
{
    uint64_t u = fb_u64(p);
    /* two's complement without implementation-defined conversion */
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* Element i of a verified vector of uint32 / of Affine. */
static inline uint32_t fb_vec_u32(const fb_reader *r, fb_vector v, uint32_t i)
{
    return fb_u32(r->base + v.pos + 4u * i);
}

static inline const uint8_t *fb_vec_affine(const fb_reader *r, fb_vector v, uint32_t i)
{
    return r->base + v.pos + AFFINE_BYTES * i;
}

/* An Affine decoded: c + s*S + p*P. */
typedef struct {
    int64_t c, s, p;
} rt_affine;

static inline rt_affine fb_affine(const uint8_t *a)
{
    rt_affine x = {fb_i64(a), fb_i64(a + 8), fb_i64(a + 16)};
    return x;
}

/* Low-level, in plan_reader.c.  `what` names the table for messages;
 * elem_align is a power of two. */
llmc_rt_status fb_table_at(fb_reader *r, uint64_t pos, const char *what, fb_table *t,
                           llmc_rt_error *err);
llmc_rt_status fb_scalar(fb_reader *r, const fb_table *t, int id, unsigned width,
                         uint64_t dflt, uint64_t *out, llmc_rt_error *err);
llmc_rt_status fb_vector_field(fb_reader *r, const fb_table *t, int id, unsigned elem_size,
                               unsigned elem_align, fb_vector *out, llmc_rt_error *err);
llmc_rt_status fb_string_field(fb_reader *r, const fb_table *t, int id, const char **out,
                               llmc_rt_error *err);
/* Table-driven reads of several fields straight into the decoded struct
 * `out` (the decoders' field lists live in flash as data, not as one call
 * and one copy each): scalar fields of a width of 1, 4 or 8 bytes and a
 * small default, stored as the `size` bytes at byte `offset` of out (8: a
 * uint64_t; 4: the low 32 bits, into a uint32_t, an int32_t, an int or a
 * float's bits; 1: a bool, whether the value is non-zero); vector fields as
 * the fb_vector at byte `offset` of out.  FB_SCALAR and FB_VECTOR name the
 * member; the structs they fill stay under 256 bytes (asserted below). */
typedef struct {
    uint8_t id, width, dflt, offset, size;
} fb_scalar_spec;
typedef struct {
    uint8_t id, elem_size, elem_align, offset;
} fb_vector_spec;
#define FB_SCALAR(id, width, dflt, type, member) \
    {id, width, dflt, offsetof(type, member), sizeof(((type *)0)->member)}
#define FB_VECTOR(id, elem_size, elem_align, type, member) \
    {id, elem_size, elem_align, offsetof(type, member)}
llmc_rt_status fb_scalars(fb_reader *r, const fb_table *t, const fb_scalar_spec *specs, int n,
                          void *out, llmc_rt_error *err);
llmc_rt_status fb_vectors(fb_reader *r, const fb_table *t, const fb_vector_spec *specs, int n,
                          void *out, llmc_rt_error *err);
/* The table a field points to; t->pos 0 when the field is absent. */
llmc_rt_status fb_table_field(fb_reader *r, const fb_table *t, int id, const char *what,
                              fb_table *out, llmc_rt_error *err);
/* Element i of a vector of tables. */
llmc_rt_status fb_vec_table(fb_reader *r, fb_vector v, uint32_t i, const char *what,
                            fb_table *t, llmc_rt_error *err);

/* Decoded tables.  Pointers and vectors point into the plan bytes. */
typedef struct {
    const char *name;
    int dtype;
    int kind;
    fb_vector dims; /* of Affine */
    uint64_t arena_offset, max_bytes;
    uint32_t segment;
    int layout;                 /* LAYOUT_* */
    uint32_t group;             /* QWeightTiles, QActTiles */
    int tile_rows, tile_depth;  /* QWeightTiles, QActTiles, FWeightTiles */
    int coef;                   /* QWeightTiles: LLMC_RT_F16 or LLMC_RT_F32 */
} rt_tensor_desc;

typedef struct {
    uint64_t offset, size, xxhash64;
} rt_segment_desc;

typedef struct {
    int code;
    const char *name;
    fb_vector inputs, outputs; /* of uint32 */
    int kind;
    int32_t axis;
    fb_vector axes; /* of int32 */
    bool keepdims;
    float epsilon;
    uint64_t value_bits; /* Fill: the IEEE binary64 value as stored */
    fb_vector values;  /* of Affine */
    fb_vector regions; /* of Region tables */
    int32_t heads, kv_heads, head_dim, rotary_dim; /* Attention, Rope */
    float scale;                                   /* Attention; QuantizeRows: static scale */
    uint32_t cache;                                /* Attention */
    uint32_t window;                               /* Attention: sliding window, 0 none */
    float softcap;                                 /* Attention: score soft-cap, 0 none */
} rt_op_desc;

typedef struct {
    uint32_t src, dst;
    fb_vector dst_start, size, src_start; /* of Affine */
    fb_vector src_axis;                   /* of int8 */
    fb_vector src_step;                   /* of int64 */
} rt_region_desc;

typedef struct {
    uint32_t tensor;
    int role;
    int32_t layer;
} rt_io_desc;

typedef struct {
    const char *name;
    uint32_t first_op, n_ops;
    fb_vector inputs, outputs; /* of uint32 */
} rt_subgraph_desc;

/* Plan.npu_chunk and Plan.subgraphs: read only by a chunked prefill
 * (chunked.c), which proves them before use; a plain session never looks. */
typedef struct {
    uint32_t chunk;
    fb_vector subgraphs; /* of Subgraph tables */
    fb_vector costs;     /* of uint64: ns per node of a chunk, 0 = estimate */
} rt_npu_desc;

/* The structs the field lists fill (offsets are bytes, fb_scalar_spec). */
LLMC_STATIC_ASSERT(fb_plan_offsets, sizeof(rt_plan) <= 255);
LLMC_STATIC_ASSERT(fb_tensor_offsets, sizeof(rt_tensor_desc) <= 255);
LLMC_STATIC_ASSERT(fb_op_offsets, sizeof(rt_op_desc) <= 255);
LLMC_STATIC_ASSERT(fb_region_offsets, sizeof(rt_region_desc) <= 255);
LLMC_STATIC_ASSERT(fb_subgraph_offsets, sizeof(rt_subgraph_desc) <= 255);

/* Decoders (structure only; the verifier adds the semantic checks). */
llmc_rt_status rt_read_tensor(fb_reader *r, const llmc_rt_plan *p, uint32_t i,
                              rt_tensor_desc *d, llmc_rt_error *err);
llmc_rt_status rt_read_segment(fb_reader *r, const llmc_rt_plan *p, uint32_t i,
                               rt_segment_desc *d, llmc_rt_error *err);
llmc_rt_status rt_read_op(fb_reader *r, const llmc_rt_plan *p, uint32_t i, rt_op_desc *d,
                          llmc_rt_error *err);
llmc_rt_status rt_read_region(fb_reader *r, const rt_op_desc *op, uint32_t i,
                              rt_region_desc *d, llmc_rt_error *err);
llmc_rt_status rt_read_io(fb_reader *r, const llmc_rt_plan *p, int is_output, uint32_t i,
                          rt_io_desc *d, llmc_rt_error *err);
llmc_rt_status rt_read_npu(fb_reader *r, const llmc_rt_plan *p, rt_npu_desc *d,
                           llmc_rt_error *err);
llmc_rt_status rt_read_subgraph(fb_reader *r, const rt_npu_desc *npu, uint32_t i,
                                rt_subgraph_desc *d, llmc_rt_error *err);

/* A reader over a verified plan. */
static inline fb_reader rt_reader(const llmc_rt_plan *p)
{
    fb_reader r = {rt_plan_of(p)->base, rt_plan_of(p)->size, 0};
    return r;
}

const char *rt_op_code_name(int code);

/* Evaluates a tensor's dims at (S, P) and its byte size (tensor_traits.h); a dim that
 * overflows or is negative, or non-zero dims whose byte size is beyond
 * INT64_MAX (even if another dim is 0), fails with `code`. */
llmc_rt_status rt_eval_dims(const fb_reader *r, const rt_tensor_desc *d, int64_t S, int64_t P,
                            int64_t *dims, uint64_t *bytes, llmc_rt_status code,
                            llmc_rt_error *err);

/* c + s*S + p*P of a decoded Affine / of one in the plan; false on int64
 * overflow. */
bool rt_affine_value(const rt_affine *a, int64_t S, int64_t P, int64_t *out);
bool rt_affine_eval(const uint8_t *affine, int64_t S, int64_t P, int64_t *out);

#endif
