/* Unary, Binary, Where and Cast with numpy broadcasting. */
#include <math.h>
#include <string.h>

#include "kernel_table.h"
#include "plan_format.h"
#include "rt_div64.h"
#include "rt_msg.h"



static bool is_int(int dtype)
{
    return dtype == LLMC_RT_I32 || dtype == LLMC_RT_I64 || dtype == LLMC_RT_U8 || dtype == LLMC_RT_I8;
}

static bool is_numeric(int dtype)
{
    return dtype == LLMC_RT_F32 || is_int(dtype);
}

/* ---- broadcasting ------------------------------------------------------ */

/* Up to three operands walked against the output's dims: element strides per
 * output axis, 0 where the operand is broadcast. */
typedef struct {
    int rank;
    int64_t dims[RT_R];
    int64_t strides[K_WALK_OPS][RT_R];
    int n_in;
} bcast;

static llmc_rt_status bcast_fail(const rt_view *const *in, int n_in, const rt_view *y,
                                 llmc_rt_error *err)
{
    char a[96], b[96], c[96], out[96];
    return rt_fail(err, LLMC_RT_E_EXEC, "operands %s %s %s do not broadcast to output %s",
                   NULL,
                   RT_S(k_dims_text(in[0], a, sizeof a),
                        n_in > 1 ? k_dims_text(in[1], b, sizeof b) : "",
                        n_in > 2 ? k_dims_text(in[2], c, sizeof c) : "",
                        k_dims_text(y, out, sizeof out)));
}

static llmc_rt_status bcast_init(bcast *w, const rt_view *const *in, int n_in,
                                 const rt_view *y, llmc_rt_error *err)
{
    w->rank = y->rank;
    w->n_in = n_in;
    memcpy(w->dims, y->dims, sizeof w->dims);
    for (int k = 0; k < n_in; k++)
        if (in[k]->rank > y->rank)
            return bcast_fail(in, n_in, y, err);
    for (int axis = 0; axis < y->rank; axis++) {
        int64_t expect = 1;
        for (int k = 0; k < n_in; k++) {
            int a = axis - (y->rank - in[k]->rank);
            int64_t d = a >= 0 ? in[k]->dims[a] : 1;
            if (d != 1 && expect != 1 && d != expect)
                return bcast_fail(in, n_in, y, err);
            if (d != 1)
                expect = d;
        }
        if (expect != y->dims[axis])
            return bcast_fail(in, n_in, y, err);
    }
    for (int k = 0; k < n_in; k++) {
        int64_t s[RT_R];
        int shift = y->rank - in[k]->rank;
        k_strides(in[k], s);
        for (int axis = 0; axis < y->rank; axis++) {
            int a = axis - shift;
            w->strides[k][axis] = a >= 0 && in[k]->dims[a] != 1 ? s[a] : 0;
        }
    }
    return LLMC_RT_OK;
}

/* A walker over the output's rows (every axis but the last): off[k] is
 * operand k's element offset of the current row. */
static void bcast_rows(const bcast *w, k_walk *rows)
{
    const int64_t *strides[K_WALK_OPS] = {w->strides[0], w->strides[1], w->strides[2]};
    k_walk_init(rows, w->rank ? w->rank - 1 : 0, w->dims, w->n_in, strides);
}

static int64_t bcast_row_len(const bcast *w)
{
    return w->rank ? w->dims[w->rank - 1] : 1;
}

static int64_t bcast_inner_stride(const bcast *w, int k)
{
    return w->rank ? w->strides[k][w->rank - 1] : 0;
}

/* ---- Unary ------------------------------------------------------------- */

bool k_unary_supports(int kind, int x_dtype, int y_dtype)
{
    if (x_dtype != y_dtype || kind < 0 || kind >= LLMC_RT_UNARY_COUNT || !k_dtype_size(x_dtype))
        return false;
    if (kind == LLMC_RT_UNARY_Identity)
        return true;
    if (x_dtype == LLMC_RT_F32)
        return kind != LLMC_RT_UNARY_Not;
    if (is_int(x_dtype))
        return kind == LLMC_RT_UNARY_Neg || kind == LLMC_RT_UNARY_Abs || kind == LLMC_RT_UNARY_Relu;
    return x_dtype == LLMC_RT_BOOL && kind == LLMC_RT_UNARY_Not;
}

/* x * sigmoid(x) without overflow: exp of a non-positive argument only. */
static float silu_f32(float x)
{
    if (x >= 0.0f)
        return x / (1.0f + expf(-x));
    float e = expf(x);
    return x * e / (1.0f + e);
}

/* Each kind's float32 function, named as in plan_enums.h.  Not of float32
 * is refused by the verifier (bool Not takes the integer path); its float
 * function is here so that every kind has one entry. */
static float unary_Identity(float x) { return x; }
static float unary_Neg(float x) { return -x; }
static float unary_Abs(float x) { return fabsf(x); }
static float unary_Sqrt(float x) { return k_sqrtf(x); }
static float unary_Exp(float x) { return expf(x); }
static float unary_Log(float x) { return logf(x); }
static float unary_Erf(float x) { return erff(x); }
static float unary_Tanh(float x) { return tanhf(x); }
static float unary_Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float unary_Reciprocal(float x) { return 1.0f / x; }
static float unary_Relu(float x) { return x > 0.0f ? x : 0.0f; }
static float unary_Sin(float x) { return sinf(x); }
static float unary_Cos(float x) { return cosf(x); }
static float unary_Not(float x) { return x == 0.0f ? 1.0f : 0.0f; }
static float unary_Floor(float x) { return floorf(x); }
static float unary_Ceil(float x) { return ceilf(x); }
/* GELU, erf form: 0.5 x (1 + erf(x / sqrt 2)). */
static float unary_Gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static float unary_GeluTanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
static float unary_Silu(float x) { return silu_f32(x); }

/* The op resolver's Unary entries (llmc_rt.h): one loop per kind, so a
 * firmware links the libm functions of its plan's kinds only. */
#define UNARY_LOOP_(s, Name, v)                                   \
    void llmc_rt_unary_##Name(const float *x, float *y, int64_t n) \
    {                                                             \
        for (int64_t i = 0; i < n; i++)                           \
            y[i] = unary_##Name(x[i]);                            \
    }
LLMC_PLAN_UNARY_KINDS(UNARY_LOOP_)

static int64_t unary_int(int kind, int64_t x)
{
    uint64_t neg = 0 - (uint64_t)x; /* wraps for INT64_MIN like ONNX Runtime */
    int64_t negated = neg <= INT64_MAX ? (int64_t)neg : INT64_MIN;
    switch (kind) {
    case LLMC_RT_UNARY_Neg: return negated;
    case LLMC_RT_UNARY_Abs: return x < 0 ? negated : x;
    case LLMC_RT_UNARY_Relu: return x > 0 ? x : 0;
    case LLMC_RT_UNARY_Not: return !x;
    default: return x;
    }
}

llmc_rt_status k_unary(llmc_rt_unary_fn f32_loop, int kind, const rt_view *x, rt_view *y,
                       llmc_rt_error *err)
{
    if (!k_unary_supports(kind, x->dtype, y->dtype))
        return rt_fail(err, LLMC_RT_E_EXEC, "unary kind %d does not take dtype %d -> %d",
                       RT_N(kind, x->dtype, y->dtype), NULL);
    if (!k_same_dims(x, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "input and output dims differ", NULL, NULL);
    int64_t n = k_count(x);
    if (x->dtype == LLMC_RT_F32)
        f32_loop(x->data, y->data, n);
    else if (kind == LLMC_RT_UNARY_Identity)
        memmove(y->data, x->data, (size_t)n * k_dtype_size(x->dtype));
    else
        for (int64_t i = 0; i < n; i++)
            k_store_i(y, i, unary_int(kind, k_load_i(x, i)));
    return LLMC_RT_OK;
}

/* ---- Binary ------------------------------------------------------------ */

static bool is_arith(int kind)
{
    return kind <= LLMC_RT_BINARY_Min && kind != LLMC_RT_BINARY_Pow;
}

static bool is_compare(int kind)
{
    return kind >= LLMC_RT_BINARY_Equal && kind <= LLMC_RT_BINARY_GreaterOrEqual;
}

bool k_binary_supports(int kind, int a, int b, int y)
{
    if (kind == LLMC_RT_BINARY_Pow)
        return (a == LLMC_RT_F32 || a == LLMC_RT_I32 || a == LLMC_RT_I64) && is_numeric(b) && y == a;
    if (is_arith(kind))
        return a == b && b == y && is_numeric(a);
    if (is_compare(kind))
        return a == b && y == LLMC_RT_BOOL &&
               (is_numeric(a) || (kind == LLMC_RT_BINARY_Equal && a == LLMC_RT_BOOL));
    /* And, Or, Xor on Bool; the gated kinds after them (SwiGLU, GeGLU) on float32 */
    int t = kind <= LLMC_RT_BINARY_Xor ? LLMC_RT_BOOL : LLMC_RT_F32;
    return kind >= LLMC_RT_BINARY_And && kind < LLMC_RT_BINARY_COUNT && a == t && b == t && y == t;
}
LLMC_STATIC_ASSERT(gated_kinds_last, LLMC_RT_BINARY_SwiGLU == LLMC_RT_BINARY_Xor + 1 &&
                                         LLMC_RT_BINARY_GeGLU == LLMC_RT_BINARY_COUNT - 1);

#define F32_KIND_BIT_(s, Name) | 1u << LLMC_RT_BINARY_##Name
#define F32_KINDS (0u LLMC_PLAN_BINARY_F32_KINDS(F32_KIND_BIT_))
LLMC_STATIC_ASSERT(binary_kinds_fit_a_mask, LLMC_RT_BINARY_COUNT <= 32);

bool k_binary_f32_loop(int kind, int a_dtype, int b_dtype)
{
    return kind >= 0 && kind < LLMC_RT_BINARY_COUNT && (F32_KINDS >> kind & 1u) &&
           a_dtype == LLMC_RT_F32 && b_dtype == LLMC_RT_F32;
}

static float max_f32(float a, float b)
{
    return a != a || b != b ? NAN : (a > b ? a : b);
}

static float min_f32(float a, float b)
{
    return a != a || b != b ? NAN : (a < b ? a : b);
}

/* Each float32 kind's function, named as in plan_enums.h. */
static float binary_Add(float a, float b) { return a + b; }
static float binary_Sub(float a, float b) { return a - b; }
static float binary_Mul(float a, float b) { return a * b; }
static float binary_Div(float a, float b) { return a / b; }
static float binary_Pow(float a, float b) { return powf(a, b); }
static float binary_Max(float a, float b) { return max_f32(a, b); }
static float binary_Min(float a, float b) { return min_f32(a, b); }
static float binary_SwiGLU(float a, float b) { return silu_f32(a) * b; }
static float binary_GeGLU(float a, float b) { return unary_GeluTanh(a) * b; }

/* The op resolver's Binary entries for float32 operands (llmc_rt.h): one
 * loop per kind, so a firmware links only its plan's kinds (and powf only
 * with Pow). */
#define BINARY_LOOP_(s, Name)                                                              \
    void llmc_rt_binary_##Name(const float *a, int64_t sa, const float *b, int64_t sb,    \
                               float *y, int64_t n)                                       \
    {                                                                                     \
        for (int64_t i = 0; i < n; i++)                                                   \
            y[i] = binary_##Name(a[i * sa], b[i * sb]);                                   \
    }
LLMC_PLAN_BINARY_F32_KINDS(BINARY_LOOP_)

/* Two's complement wrap of unsigned math without an overflowing cast. */
static int64_t wrap_i64(uint64_t r)
{
    return r <= INT64_MAX ? (int64_t)r : -(int64_t)~r - 1;
}

/* Integer base and exponent: exact powers by squaring, wrapping like the
 * type; a negative exponent leaves 1 / a^-e truncated toward zero. */
static int64_t pow_int(int64_t a, int64_t e)
{
    if (e < 0)
        return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)a;
    for (; e; e >>= 1) {
        if (e & 1)
            r *= b;
        b *= b;
    }
    return wrap_i64(r);
}

/* a / b (b != 0) truncated toward zero, through the unsigned division of
 * the magnitudes (rt_div64.h); INT64_MIN / -1 wraps to INT64_MIN. */
static int64_t div_int(int64_t a, int64_t b)
{
    uint64_t ua = a < 0 ? 0 - (uint64_t)a : (uint64_t)a;
    uint64_t ub = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
    uint64_t q = rt_udiv64(ua, ub);
    return wrap_i64((a < 0) != (b < 0) ? 0 - q : q);
}

/* Integer arithmetic wraps (unsigned math); Div truncates toward zero. */
static int64_t arith_int(int kind, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b, r;
    switch (kind) {
    case LLMC_RT_BINARY_Add: r = ua + ub; break;
    case LLMC_RT_BINARY_Sub: r = ua - ub; break;
    case LLMC_RT_BINARY_Mul: r = ua * ub; break;
    case LLMC_RT_BINARY_Div: return div_int(a, b);
    case LLMC_RT_BINARY_Max: return a > b ? a : b;
    default: return a < b ? a : b;
    }
    return wrap_i64(r);
}

static bool compare(int kind, float a, float b)
{
    switch (kind) {
    case LLMC_RT_BINARY_Equal: return a == b;
    case LLMC_RT_BINARY_Less: return a < b;
    case LLMC_RT_BINARY_Greater: return a > b;
    case LLMC_RT_BINARY_LessOrEqual: return a <= b;
    default: return a >= b;
    }
}

static bool compare_int(int kind, int64_t a, int64_t b)
{
    switch (kind) {
    case LLMC_RT_BINARY_Equal: return a == b;
    case LLMC_RT_BINARY_Less: return a < b;
    case LLMC_RT_BINARY_Greater: return a > b;
    case LLMC_RT_BINARY_LessOrEqual: return a <= b;
    default: return a >= b;
    }
}

static bool logic(int kind, bool a, bool b)
{
    return kind == LLMC_RT_BINARY_And ? a && b : kind == LLMC_RT_BINARY_Or ? a || b : a != b;
}

/* The op resolver's any-dtype Binary entry: every case k_binary_f32_loop
 * leaves (verified by k_binary_supports), one element per call. */
int llmc_rt_binary_any_dtype(int kind, const rt_view *a, int64_t ia, const rt_view *b,
                             int64_t ib, rt_view *y, int64_t iy)
{
    if (kind == LLMC_RT_BINARY_Pow && (a->dtype == LLMC_RT_F32 || b->dtype == LLMC_RT_F32)) {
        k_store_f(y, iy, powf(k_load_f(a, ia), k_load_f(b, ib))); /* the base's type */
    } else if (kind == LLMC_RT_BINARY_Pow) {
        k_store_i(y, iy, pow_int(k_load_i(a, ia), k_load_i(b, ib)));
    } else if (a->dtype == LLMC_RT_F32) {
        ((uint8_t *)y->data)[iy] = compare(kind, k_load_f(a, ia), k_load_f(b, ib));
    } else if (is_arith(kind)) {
        int64_t vb = k_load_i(b, ib);
        if (kind == LLMC_RT_BINARY_Div && vb == 0)
            return 0;
        k_store_i(y, iy, arith_int(kind, k_load_i(a, ia), vb));
    } else if (is_compare(kind)) {
        ((uint8_t *)y->data)[iy] = compare_int(kind, k_load_i(a, ia), k_load_i(b, ib));
    } else {
        ((uint8_t *)y->data)[iy] = logic(kind, k_load_i(a, ia) != 0, k_load_i(b, ib) != 0);
    }
    return 1;
}

static llmc_rt_status binary_unresolved(int kind, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_RESOLVER, "binary kind %d: no loop for its dtypes",
                   RT_N(kind), NULL);
}

llmc_rt_status k_binary(int kind, const k_binary_loops *loops, const rt_view *a,
                        const rt_view *b, rt_view *y, llmc_rt_error *err)
{
    const rt_view *in[2] = {a, b};
    bcast w;
    if (!k_binary_supports(kind, a->dtype, b->dtype, y->dtype))
        return rt_fail(err, LLMC_RT_E_EXEC, "binary kind %d does not take dtypes %d, %d -> %d",
                       RT_N(kind, a->dtype, b->dtype, y->dtype), NULL);
    bool f32 = k_binary_f32_loop(kind, a->dtype, b->dtype);
    if (f32 ? !loops->f32 : !loops->any_dtype)
        return binary_unresolved(kind, err);
    llmc_rt_status st = bcast_init(&w, in, 2, y, err);
    if (st)
        return st;
    /* pointer-wide: the operands lie in memory */
    ptrdiff_t len = (ptrdiff_t)bcast_row_len(&w), rows = len ? (ptrdiff_t)k_count(y) / len : 0;
    ptrdiff_t sa = (ptrdiff_t)bcast_inner_stride(&w, 0), sb = (ptrdiff_t)bcast_inner_stride(&w, 1);
    k_walk it;
    bcast_rows(&w, &it);
    for (ptrdiff_t row = 0; row < rows; row++, k_walk_next(&it)) {
        ptrdiff_t oa = (ptrdiff_t)it.off[0], ob = (ptrdiff_t)it.off[1];
        if (f32) {
            loops->f32((const float *)a->data + oa, sa, (const float *)b->data + ob, sb,
                (float *)y->data + row * len, len);
            continue;
        }
        for (ptrdiff_t j = 0; j < len; j++)
            if (!loops->any_dtype(kind, a, oa + j * sa, b, ob + j * sb, y, row * len + j))
                return rt_fail(err, LLMC_RT_E_EXEC, "integer division by zero", NULL, NULL);
    }
    return LLMC_RT_OK;
}

void rt_swiglu_generic(const float *gate, const float *up, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = binary_SwiGLU(gate[i], up[i]);
}

/* SwiGLU elements per task: ~64 KiB of each operand (a decode step's 4864
 * are one task, run on the caller). */
#define SWIGLU_TASK_ELEMS 16384

typedef struct {
    void (*swiglu)(const float *gate, const float *up, float *y, int64_t n);
    const float *gate, *up;
    float *y;
    int64_t n;
} swiglu_job;

static void swiglu_task(void *ctx, uint32_t i)
{
    const swiglu_job *J = ctx;
    int64_t i0 = (int64_t)i * SWIGLU_TASK_ELEMS;
    int64_t n = J->n - i0 < SWIGLU_TASK_ELEMS ? J->n - i0 : SWIGLU_TASK_ELEMS;
    J->swiglu(J->gate + i0, J->up + i0, J->y + i0, n);
}

llmc_rt_status k_binary_kernels(const rt_kernels *kt, int kind, const k_binary_loops *loops,
                                const rt_view *a, const rt_view *b, rt_view *y,
                                const rt_parallel *par, llmc_rt_error *err)
{
    bool swiglu = kind == LLMC_RT_BINARY_SwiGLU && a->dtype == LLMC_RT_F32 &&
                  b->dtype == LLMC_RT_F32 && y->dtype == LLMC_RT_F32 && k_same_dims(a, b) &&
                  k_same_dims(a, y);
    if (!swiglu)
        return k_binary(kind, loops, a, b, y, err);
    swiglu_job J = {kt && kt->swiglu ? kt->swiglu : rt_swiglu_generic, a->data, b->data,
                    y->data, k_count(y)};
    int64_t tasks = (J.n + SWIGLU_TASK_ELEMS - 1) / SWIGLU_TASK_ELEMS;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "SwiGLU has too many elements", NULL, NULL);
    rt_parallel_for(par, (uint32_t)tasks, swiglu_task, &J);
    return LLMC_RT_OK;
}

/* ---- Where ------------------------------------------------------------- */

llmc_rt_status k_where(const rt_view *cond, const rt_view *x, const rt_view *other,
                       rt_view *y, llmc_rt_error *err)
{
    const rt_view *in[3] = {cond, x, other};
    size_t es = k_dtype_size(y->dtype);
    bcast w;
    if (cond->dtype != LLMC_RT_BOOL || x->dtype != y->dtype || other->dtype != y->dtype || !es)
        return rt_fail(err, LLMC_RT_E_EXEC, "Where takes bool, T, T -> T; got %d, %d, %d -> %d",
                       RT_N(cond->dtype, x->dtype, other->dtype, y->dtype), NULL);
    llmc_rt_status st = bcast_init(&w, in, 3, y, err);
    if (st)
        return st;
    ptrdiff_t len = (ptrdiff_t)bcast_row_len(&w), rows = len ? (ptrdiff_t)k_count(y) / len : 0;
    const uint8_t *c = cond->data, *px = x->data, *po = other->data;
    uint8_t *out = y->data;
    k_walk it;
    bcast_rows(&w, &it);
    for (int64_t row = 0; row < rows; row++, k_walk_next(&it)) {
        const int64_t *off = it.off;
        for (int64_t j = 0; j < len; j++) {
            int64_t ic = off[0] + j * bcast_inner_stride(&w, 0);
            int64_t ix = off[1] + j * bcast_inner_stride(&w, 1);
            int64_t io = off[2] + j * bcast_inner_stride(&w, 2);
            const uint8_t *src = c[ic] ? px + ix * es : po + io * es;
            memcpy(out + (row * len + j) * es, src, es);
        }
    }
    return LLMC_RT_OK;
}

/* ---- Cast -------------------------------------------------------------- */

bool k_cast_supports(int x_dtype, int y_dtype)
{
    return k_dtype_size(x_dtype) && k_dtype_size(y_dtype);
}

llmc_rt_status k_cast(const rt_view *x, rt_view *y, llmc_rt_error *err)
{
    if (!k_cast_supports(x->dtype, y->dtype))
        return rt_fail(err, LLMC_RT_E_EXEC, "Cast does not take dtype %d -> %d",
                       RT_N(x->dtype, y->dtype), NULL);
    if (!k_same_dims(x, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "input and output dims differ", NULL, NULL);
    int64_t n = k_count(x);
    if (x->dtype == y->dtype) {
        memmove(y->data, x->data, (size_t)n * k_dtype_size(x->dtype));
    } else if (x->dtype == LLMC_RT_F32) {
        for (int64_t i = 0; i < n; i++)
            k_store_f(y, i, ((const float *)x->data)[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            k_store_i(y, i, k_load_i(x, i));
    }
    return LLMC_RT_OK;
}
