/* The op resolver of every entry, and which entries an op needs. */
#include "op_resolver.h"
#include "kernels/kernels.h"
#include "plan_format.h"
#include "tensor_traits.h"

/* The public indices come from the lists plan_format.h's codes do. */
LLMC_STATIC_ASSERT(resolver_ops, (int)LLMC_RT_OP_COUNT == (int)LLMC_RT_OP_COUNT);
LLMC_STATIC_ASSERT(resolver_unary_kinds, (int)LLMC_RT_UNARY_COUNT == (int)LLMC_RT_UNARY_COUNT);
LLMC_STATIC_ASSERT(resolver_binary_kinds, (int)LLMC_RT_BINARY_COUNT == (int)LLMC_RT_BINARY_COUNT);

/* Each op code's entries: a resolver that names the code links its exec
 * function, its checks and its prepare step (NULL: session init reads
 * nothing of the op but its operands and attributes). */
#define OP_ENTRY_(Name, prepare)                                                           \
    const llmc_rt_op_entry llmc_rt_op_##Name = {llmc_rt_exec_##Name, llmc_rt_verify_##Name, \
                                                prepare};
OP_ENTRY_(Copy, rt_prepare_Copy)
OP_ENTRY_(Reshape, NULL)
OP_ENTRY_(Unary, NULL)
OP_ENTRY_(Binary, NULL)
OP_ENTRY_(Where, NULL)
OP_ENTRY_(Cast, NULL)
OP_ENTRY_(MatMul, NULL)
OP_ENTRY_(Reduce, rt_prepare_Reduce)
OP_ENTRY_(Softmax, NULL)
OP_ENTRY_(LayerNorm, NULL)
OP_ENTRY_(Gather, NULL)
OP_ENTRY_(Fill, NULL)
OP_ENTRY_(Range, NULL)
OP_ENTRY_(Symbols, rt_prepare_Symbols)
OP_ENTRY_(Linear, rt_prepare_Linear)
OP_ENTRY_(RMSNorm, NULL)
OP_ENTRY_(Rope, NULL)
OP_ENTRY_(Attention, NULL)
OP_ENTRY_(Trilu, NULL)
OP_ENTRY_(ScatterND, NULL)
OP_ENTRY_(CumSum, NULL)
OP_ENTRY_(QuantizeRows, NULL)
OP_ENTRY_(ShadowLinear, rt_prepare_ShadowLinear)

#define ALL_OPS_(s, Name, ...) LLMC_RT_OP(Name)
#define ALL_UNARY_(s, Name, v) LLMC_RT_UNARY(Name)
#define ALL_BINARY_(s, Name) LLMC_RT_BINARY(Name)
const llmc_rt_op_resolver llmc_rt_all_ops = {
    LLMC_PLAN_OPS(ALL_OPS_) LLMC_PLAN_UNARY_KINDS(ALL_UNARY_)
    LLMC_PLAN_BINARY_F32_KINDS(ALL_BINARY_) LLMC_RT_BINARY_ANY_DTYPE
    LLMC_RT_GATHER_KERNELS(LLMC_RT_GATHER)
    LLMC_RT_LINEAR_KERNELS(LLMC_RT_LINEAR) LLMC_RT_KV_CACHES(LLMC_RT_KV_CACHE)
};

/* Linear's kernel for W's layout (verified: Dense, FWeightTiles or
 * QWeightTiles) and the plan's prefill kernel. */
static int linear_kernel_of(int w_layout, uint32_t prefill_kernel)
{
    if (w_layout == LLMC_RT_LAYOUT_QWeightTiles)
        return prefill_kernel == PREFILL_F32_DEQUANT ? LLMC_RT_LINEAR_QWeightTilesF32Dequant
                                                     : LLMC_RT_LINEAR_QWeightTiles;
    return w_layout == LLMC_RT_LAYOUT_FWeightTiles ? LLMC_RT_LINEAR_FWeightTiles : LLMC_RT_LINEAR_Dense;
}

rt_op_needs rt_op_needs_of(const rt_op_key *key)
{
    rt_op_needs n = {key->code, -1, -1, false, -1, -1, -1};
    int kind = key->kind;
    if (key->code == LLMC_RT_OP_Unary && kind >= 0 && kind < LLMC_RT_UNARY_COUNT)
        n.unary = kind;
    if (key->code == LLMC_RT_OP_Binary && k_binary_f32_loop(kind, key->in_dtype[0], key->in_dtype[1]))
        n.binary = kind;
    else if (key->code == LLMC_RT_OP_Binary)
        n.binary_any_dtype = true;
    if (key->code == LLMC_RT_OP_Gather)
        n.gather = key->in_layout[0] == LLMC_RT_LAYOUT_Dense ? LLMC_RT_GATHER_Dense
                                                     : LLMC_RT_GATHER_PackedRows;
    if (key->code == LLMC_RT_OP_Linear)
        n.linear = linear_kernel_of(key->in_layout[1], key->prefill_kernel);
    if (key->code == LLMC_RT_OP_Attention)
        n.kv_cache = rt_kv_cache_index(key->kv_cache_dtype);
    return n;
}

const char *rt_unary_kind_name(int kind)
{
#define UNARY_NAME_(s, Name, v) #Name,
    static const char *const names[LLMC_RT_UNARY_COUNT] = {LLMC_PLAN_UNARY_KINDS(UNARY_NAME_)};
    return kind >= 0 && kind < LLMC_RT_UNARY_COUNT ? names[kind] : "?";
}

const char *rt_binary_kind_name(int kind)
{
#define BINARY_NAME_(s, Name, v) #Name,
    static const char *const names[LLMC_RT_BINARY_COUNT] = {LLMC_PLAN_BINARY_KINDS(BINARY_NAME_)};
    return kind >= 0 && kind < LLMC_RT_BINARY_COUNT ? names[kind] : "?";
}

const char *rt_gather_kernel_name(int kernel)
{
#define GATHER_NAME_(Name) #Name,
    static const char *const names[LLMC_RT_GATHER_COUNT] = {LLMC_RT_GATHER_KERNELS(GATHER_NAME_)};
    return kernel >= 0 && kernel < LLMC_RT_GATHER_COUNT ? names[kernel] : "?";
}

const char *rt_linear_kernel_name(int kernel)
{
#define LINEAR_NAME_(Name) #Name,
    static const char *const names[LLMC_RT_LINEAR_COUNT] = {LLMC_RT_LINEAR_KERNELS(LINEAR_NAME_)};
    return kernel >= 0 && kernel < LLMC_RT_LINEAR_COUNT ? names[kernel] : "?";
}

const char *rt_kv_cache_name(int kv_cache)
{
#define KV_NAME_(Name) #Name,
    static const char *const names[LLMC_RT_KV_COUNT] = {LLMC_RT_KV_CACHES(KV_NAME_)};
    return kv_cache >= 0 && kv_cache < LLMC_RT_KV_COUNT ? names[kv_cache] : "?";
}
