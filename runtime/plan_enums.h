/* The enums of schemas/plan.fbs, once.  Every C table that depends on them
 * (the public LLMC_RT_* names, plan_format.h's codes, op names, the verifier's
 * arity table, the kernels' kind checks, dtype sizes) is generated from
 * these lists, and tests/t_plan_schema.sh checks that plan.fbs declares the
 * same names with the same values (`llmc ops --plan-enums` prints them).
 *
 * Each list is X(SUFFIX, SchemaName, value, ...); values are consecutive
 * from 0 unless the list says otherwise (static-asserted where used). */
#ifndef LLMC_PLAN_ENUMS_H
#define LLMC_PLAN_ENUMS_H

#define LLMC_ANY_COUNT 0xffffffffu /* an arity without an upper bound */

/* OpCode: X(SUFFIX, Name, value, min inputs, max inputs, min outputs, max outputs,
 * npu).  npu: 1 when an NPU chunk subgraph (plan.fbs Subgraph) may hold the
 * op, the one list of that set (llmc_rt_op_npu; the conditions that are not
 * per op stay with each check). */
#define LLMC_PLAN_OPS(X)                                                \
    X(COPY, Copy, 0, 0, LLMC_ANY_COUNT, 1, LLMC_ANY_COUNT, 0)           \
    X(RESHAPE, Reshape, 1, 1, 1, 1, 1, 1)                               \
    X(UNARY, Unary, 2, 1, 1, 1, 1, 1)                                   \
    X(BINARY, Binary, 3, 2, 2, 1, 1, 1)                                 \
    X(WHERE, Where, 4, 3, 3, 1, 1, 0)                                   \
    X(CAST, Cast, 5, 1, 1, 1, 1, 0)                                     \
    X(MATMUL, MatMul, 6, 2, 2, 1, 1, 0)                                 \
    X(REDUCE, Reduce, 7, 1, 1, 1, 1, 0)                                 \
    X(SOFTMAX, Softmax, 8, 1, 1, 1, 1, 0)                               \
    X(LAYERNORM, LayerNorm, 9, 2, 3, 1, 3, 1)                           \
    X(GATHER, Gather, 10, 2, 2, 1, 1, 0)                                \
    X(FILL, Fill, 11, 0, 0, 1, 1, 0)                                    \
    X(RANGE, Range, 12, 3, 3, 1, 1, 0)                                  \
    X(SYMBOLS, Symbols, 13, 0, 0, 1, 1, 0)                              \
    X(LINEAR, Linear, 14, 2, 4, 1, LLMC_ANY_COUNT, 1)                   \
    X(RMSNORM, RMSNorm, 15, 2, 3, 1, 1, 1)                              \
    X(ROPE, Rope, 16, 3, 3, 1, 1, 0)                                    \
    X(ATTENTION, Attention, 17, 3, 7, 1, 1, 0)                          \
    X(TRILU, Trilu, 18, 1, 2, 1, 1, 0)                                  \
    X(SCATTER_ND, ScatterND, 19, 3, 3, 1, 1, 0)                         \
    X(CUMSUM, CumSum, 20, 1, 1, 1, 1, 0)                                \
    X(QUANTIZE_ROWS, QuantizeRows, 21, 1, 1, 1, 1, 1)                   \
    X(SHADOW_LINEAR, ShadowLinear, 22, 3, 6, 1, 3, 0)

/* UnaryKind: X(SUFFIX, Name, value) */
#define LLMC_PLAN_UNARY_KINDS(X)                                                        \
    X(IDENTITY, Identity, 0) X(NEG, Neg, 1) X(ABS, Abs, 2) X(SQRT, Sqrt, 3)             \
    X(EXP, Exp, 4) X(LOG, Log, 5) X(ERF, Erf, 6) X(TANH, Tanh, 7) X(SIGMOID, Sigmoid, 8) \
    X(RECIPROCAL, Reciprocal, 9) X(RELU, Relu, 10) X(SIN, Sin, 11) X(COS, Cos, 12)      \
    X(NOT, Not, 13) X(FLOOR, Floor, 14) X(CEIL, Ceil, 15) X(GELU, Gelu, 16)             \
    X(GELU_TANH, GeluTanh, 17) X(SILU, Silu, 18)

/* BinaryKind: X(SUFFIX, Name, value) */
#define LLMC_PLAN_BINARY_KINDS(X)                                                      \
    X(ADD, Add, 0) X(SUB, Sub, 1) X(MUL, Mul, 2) X(DIV, Div, 3) X(POW, Pow, 4)          \
    X(MAX, Max, 5) X(MIN, Min, 6) X(EQUAL, Equal, 7) X(LESS, Less, 8)                   \
    X(GREATER, Greater, 9) X(LESS_OR_EQUAL, LessOrEqual, 10)                            \
    X(GREATER_OR_EQUAL, GreaterOrEqual, 11) X(AND, And, 12) X(OR, Or, 13)               \
    X(XOR, Xor, 14) X(SWIGLU, SwiGLU, 15) X(GEGLU, GeGLU, 16)

/* The Binary kinds that map float32 operands to a float32 result, each
 * with its own float32 loop in the runtime's op resolver (llmc_rt.h
 * LLMC_RT_BINARY); every other kind and dtype takes its any-dtype path:
 * X(SUFFIX, Name) as in LLMC_PLAN_BINARY_KINDS. */
#define LLMC_PLAN_BINARY_F32_KINDS(X)                                              \
    X(ADD, Add) X(SUB, Sub) X(MUL, Mul) X(DIV, Div) X(POW, Pow) X(MAX, Max) X(MIN, Min) \
    X(SWIGLU, SwiGLU) X(GEGLU, GeGLU)

/* ReduceKind: X(SUFFIX, Name, value) */
#define LLMC_PLAN_REDUCE_KINDS(X) \
    X(MEAN, Mean, 0) X(SUM, Sum, 1) X(MAX, Max, 2) X(MIN, Min, 3) X(PROD, Prod, 4)

/* ScatterReduction (ScatterND's kind): X(SUFFIX, Name, value) */
#define LLMC_PLAN_SCATTER_REDUCTIONS(X) \
    X(NONE, None, 0) X(ADD, Add, 1) X(MUL, Mul, 2) X(MAX, Max, 3) X(MIN, Min, 4)

/* DType, numbered as ONNX TensorProto.DataType (not consecutive):
 * X(SUFFIX, Name, value, bits per element) */
#define LLMC_PLAN_DTYPES(X)                                               \
    X(F32, Float32, 1, 32) X(U8, Uint8, 2, 8) X(I8, Int8, 3, 8)           \
    X(I32, Int32, 6, 32) X(I64, Int64, 7, 64) X(BOOL, Bool, 9, 8)         \
    X(F16, Float16, 10, 16) X(U4, Uint4, 21, 4)

/* Layout of a tensor's bytes (runtime/quant_format.h has the
 * formats and sizes them from these columns):
 * X(SUFFIX, Name, value, value bits, coefficient bytes)
 *   value bits: of each stored value (0: the dtype's);
 *   coefficient bytes: of each coefficient stored beside the values (0:
 *   none): QWeightTiles' binary16 scales (and mins at 4 bits) per row and
 *   group, QActTiles' float32 row scales and int32 group sums. */
#define LLMC_PLAN_LAYOUTS(X)                                                     \
    X(DENSE, Dense, 0, 0, 0) X(QWEIGHT, QWeightTiles, 1, 0, 2)                   \
    X(QACT, QActTiles, 2, 8, 4) X(FWEIGHT, FWeightTiles, 3, 32, 0) X(HALF, Half, 4, 16, 0)

/* TensorKind: X(SUFFIX, Name, value) */
#define LLMC_PLAN_TENSOR_KINDS(X) X(ARENA, Arena, 0) X(WEIGHT, Weight, 1)

/* IoRole: X(SUFFIX, Name, value, dtype it implies (0: any), rank (0: any)) */
#define LLMC_PLAN_IO_ROLES(X)                                                      \
    X(GENERIC, Generic, 0, 0, 0) X(INPUT_IDS, InputIds, 1, 7, 2)                    \
    X(ATTENTION_MASK, AttentionMask, 2, 7, 2) X(POSITION_IDS, PositionIds, 3, 7, 2) \
    X(PAST_KEY, PastKey, 4, 1, 4) X(PAST_VALUE, PastValue, 5, 1, 4)                 \
    X(LOGITS, Logits, 6, 1, 3) X(PRESENT_KEY, PresentKey, 7, 1, 4)                  \
    X(PRESENT_VALUE, PresentValue, 8, 1, 4)

/* Plan targets and the tile sizes of their layouts (paper 002 Table 2; the
 * kernels of each target derive them from its register budget), from the
 * most portable to the most capable (compile's default is the last one
 * this machine runs):
 * X(SUFFIX, "name", q_hp, q_lp, q_ep, f_hp, f_ep).  q_*: QWeightTiles hp and
 * lp, QActTiles ep; f_hp: FWeightTiles rows (0: fp32 weights stay Dense),
 * f_ep: rows per fp32 GEMM call. */
#define LLMC_PLAN_TARGETS(X)                   \
    X(GENERIC, "generic", 8, 4, 4, 0, 0)       \
    X(AVX2, "avx2", 8, 4, 4, 16, 6)            \
    X(NEON_DOT, "neon-dot", 8, 4, 12, 0, 0)    \
    X(NEON_I8MM, "neon-i8mm", 8, 8, 10, 0, 0)

/* How a Linear over QWeightTiles runs prefill (Plan.prefill_kernel; rows
 * from Plan.gemm_min_rows): the target's int8 GEMM, or its fp32 GEMM on
 * weight blocks dequantized to fp32 panels (the faster one depends on the
 * target's int8 and fp32 peaks; `llmc tune` measures both).
 * X(SUFFIX, "name", value). */
#define LLMC_PLAN_PREFILL_KERNELS(X) X(INT8, "int8", 0) X(F32_DEQUANT, "f32-dequant", 1)

/* The kernel tables a plan's steps may be tuned to (Plan.decode_isa,
 * Plan.prefill_isa; `llmc tune` measures them): FASTEST (0) is the fastest
 * table of the plan's target that this CPU runs, the others one table by
 * its rt_kernels.isa, each with the target whose plans it runs.  The
 * tables of one target give bitwise the same outputs, so a step may run
 * on any of them.  Values are stored in plans: new tables go at the end.
 * X(SUFFIX, "name", TARGET_SUFFIX). */
#define LLMC_PLAN_KERNEL_ISAS(X)                                            \
    X(FASTEST, "fastest", GENERIC) X(GENERIC, "generic", GENERIC)           \
    X(AVX2, "avx2", AVX2) X(AVX2_AVXVNNI, "avx2+avxvnni", AVX2)             \
    X(AVX2_AVX512VNNI, "avx2+avx512vnni", AVX2)                             \
    X(NEON_DOT, "neon-dot", NEON_DOT) X(NEON_I8MM, "neon-i8mm", NEON_I8MM)   \
    X(AVX2_AVX512VNNI_YMM, "avx2+avx512vnni-ymm", AVX2)

/* Every list, with the schema's enum name, for tools that print them all. */
#define LLMC_PLAN_ENUM_LISTS(Y)                                  \
    Y(OpCode, LLMC_PLAN_OPS) Y(UnaryKind, LLMC_PLAN_UNARY_KINDS) \
    Y(BinaryKind, LLMC_PLAN_BINARY_KINDS)                        \
    Y(ReduceKind, LLMC_PLAN_REDUCE_KINDS)                        \
    Y(ScatterReduction, LLMC_PLAN_SCATTER_REDUCTIONS)            \
    Y(DType, LLMC_PLAN_DTYPES) Y(Layout, LLMC_PLAN_LAYOUTS)      \
    Y(TensorKind, LLMC_PLAN_TENSOR_KINDS) Y(IoRole, LLMC_PLAN_IO_ROLES)

/* C99 static assertion (the runtime is C99: no _Static_assert). */
#define LLMC_STATIC_ASSERT(name, cond) typedef char llmc_static_assert_##name[(cond) ? 1 : -1]

#endif
