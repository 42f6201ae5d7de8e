/* Helpers shared by the reference kernels. */
#include <string.h>

#include "kernels.h"
#include "rt_msg.h"
#include "tensor_traits.h"

int64_t k_count(const rt_view *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

size_t k_dtype_size(int dtype)
{
    return rt_dtype_bytes(dtype);
}

void k_strides(const rt_view *t, int64_t *strides)
{
    int64_t s = 1;
    for (int i = t->rank; i-- > 0;) {
        strides[i] = s;
        s *= t->dims[i];
    }
}

bool k_same_dims(const rt_view *a, const rt_view *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

void k_walk_init(k_walk *w, int n, const int64_t *dims, int n_ops,
                 const int64_t *const *strides)
{
    w->n = n;
    w->n_ops = n_ops;
    for (int a = 0; a < n; a++) {
        w->idx[a] = 0;
        w->dims[a] = dims[a];
        for (int k = 0; k < n_ops; k++)
            w->strides[k][a] = strides[k][a];
    }
    for (int k = 0; k < n_ops; k++)
        w->off[k] = 0;
}

void k_walk_next(k_walk *w)
{
    for (int a = w->n; a-- > 0;) {
        for (int k = 0; k < w->n_ops; k++)
            w->off[k] += w->strides[k][a];
        if (++w->idx[a] < w->dims[a])
            return;
        for (int k = 0; k < w->n_ops; k++)
            w->off[k] -= w->dims[a] * w->strides[k][a];
        w->idx[a] = 0;
    }
}

static void append(char *buf, size_t cap, size_t *len, const char *s)
{
    for (; *s && *len + 1 < cap; s++)
        buf[(*len)++] = *s;
    buf[*len] = '\0';
}

const char *k_dims_text(const rt_view *t, char *buf, size_t cap)
{
    size_t len = 0;
    append(buf, cap, &len, "[");
    for (int i = 0; i < t->rank; i++) {
        char text[RT_DEC_BYTES];
        if (i)
            append(buf, cap, &len, ", ");
        append(buf, cap, &len, rt_dec_text(t->dims[i], false, text));
    }
    append(buf, cap, &len, "]");
    return buf;
}

int64_t k_load_i(const rt_view *t, int64_t i)
{
    switch (t->dtype) {
    case LLMC_RT_F32: return k_f2i(((const float *)t->data)[i]);
    case LLMC_RT_I32: return ((const int32_t *)t->data)[i];
    case LLMC_RT_I64: return ((const int64_t *)t->data)[i];
    case LLMC_RT_I8: return ((const int8_t *)t->data)[i];
    case LLMC_RT_BOOL: return ((const uint8_t *)t->data)[i] != 0;
    default: return ((const uint8_t *)t->data)[i];
    }
}

float k_load_f(const rt_view *t, int64_t i)
{
    if (t->dtype == LLMC_RT_F32)
        return ((const float *)t->data)[i];
    return k_i64_to_f32(k_load_i(t, i));
}

/* Two's complement wrap without implementation-defined conversions. */
static int32_t wrap32(int64_t v)
{
    uint32_t u = (uint32_t)(uint64_t)v;
    return u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

static int8_t wrap8(int64_t v)
{
    uint8_t u = (uint8_t)(uint64_t)v;
    return (int8_t)(u <= INT8_MAX ? u : -(int)(uint8_t)~u - 1);
}

void k_store_i(rt_view *t, int64_t i, int64_t v)
{
    switch (t->dtype) {
    case LLMC_RT_F32: ((float *)t->data)[i] = k_i64_to_f32(v); break;
    case LLMC_RT_I32: ((int32_t *)t->data)[i] = wrap32(v); break;
    case LLMC_RT_I64: ((int64_t *)t->data)[i] = v; break;
    case LLMC_RT_I8: ((int8_t *)t->data)[i] = wrap8(v); break;
    case LLMC_RT_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: ((uint8_t *)t->data)[i] = (uint8_t)(uint64_t)v; break;
    }
}

void k_store_f(rt_view *t, int64_t i, float v)
{
    if (t->dtype == LLMC_RT_F32)
        ((float *)t->data)[i] = (float)v;
    else if (t->dtype == LLMC_RT_BOOL)
        ((uint8_t *)t->data)[i] = v != 0;
    else
        k_store_i(t, i, k_f2i(v));
}

int64_t k_f2i(float v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0f) /* 2^63 as a float */
        return INT64_MAX;
    if (v <= -9223372036854775808.0f)
        return INT64_MIN;
    if (v > -2147483648.0f && v < 2147483648.0f)
        return (int32_t)v; /* truncates toward zero: one FPU instruction */
    /* |v| >= 2^31 is an integer (a float has 24 significant bits); build it
     * from the bits, as libgcc's float -> int64 helper would through double */
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    int shift = (int)(bits >> 23 & 0xFF) - 127 - 23;
    uint64_t mag = (uint64_t)((bits & 0x7FFFFFu) | 0x800000u) << shift;
    return bits >> 31 ? -(int64_t)mag : (int64_t)mag;
}

/* binary64: sign 1, exponent 11 (bias 1023), fraction 52 bits. */
#define F64_FRAC_BITS 52
#define F64_EXP_MAX 0x7FF

static int f64_exponent(uint64_t bits)
{
    return (int)(bits >> F64_FRAC_BITS & F64_EXP_MAX);
}

static uint64_t f64_fraction(uint64_t bits)
{
    return bits & ((UINT64_C(1) << F64_FRAC_BITS) - 1);
}

/* m >> shift rounded to nearest, ties to even (shift in 1..63). */
static uint64_t shift_round_even(uint64_t m, int shift)
{
    uint64_t kept = m >> shift, rest = m & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1)));
}

float k_i64_to_f32(int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX)
        return (float)(int32_t)v; /* one FPU instruction */
    /* |v| >> s fits 32 bits, and the bits shifted out only matter as "some
     * were set": a sticky bit 0, below the 8 bits float rounding drops, so
     * the FPU's rounding of t to 24 bits rounds |v|; scaling by 2^s is exact */
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int s = 0;
    float scale = 1.0f;
    while (mag >> s > UINT32_MAX)
        s++, scale *= 2.0f;
    uint32_t t = (uint32_t)(mag >> s) | ((mag & (((uint64_t)1 << s) - 1)) != 0);
    float f = (float)t * scale;
    return v < 0 ? -f : f;
}

float k_f64_to_f32(uint64_t bits)
{
    uint32_t sign = (uint32_t)(bits >> 63) << 31, out;
    int e = f64_exponent(bits);
    uint64_t frac = f64_fraction(bits);
    if (e == F64_EXP_MAX) {
        out = sign | 0x7F800000u | (frac ? 0x400000u : 0u); /* inf, quiet NaN */
    } else if (e == 0 && frac == 0) {
        out = sign;
    } else {
        /* value = m * 2^(e - 1075) with the implicit bit; float32 keeps 24
         * bits of m at exponent fe (bias 127), subnormal below fe == 1. */
        uint64_t m = e ? frac | UINT64_C(1) << F64_FRAC_BITS : frac;
        int fe = (e ? e : 1) - 1023 + 127;
        int shift = F64_FRAC_BITS - 23 + (fe < 1 ? 1 - fe : 0);
        uint64_t r = shift < 64 ? shift_round_even(m, shift) : 0;
        int biased = fe < 1 ? 0 : fe;
        /* r may carry into the next binade (or out of the subnormals): the
         * sum of the biased exponent and the mantissa handles both */
        uint64_t word = ((uint64_t)biased << 23) + (biased ? r - (UINT64_C(1) << 23) : r);
        out = word >= 0x7F800000u ? sign | 0x7F800000u : sign | (uint32_t)word;
    }
    float f;
    memcpy(&f, &out, sizeof f);
    return f;
}

int64_t k_f64_to_i64(uint64_t bits)
{
    int e = f64_exponent(bits), neg = (int)(bits >> 63);
    uint64_t frac = f64_fraction(bits);
    if (e == F64_EXP_MAX && frac)
        return 0;
    int pow2 = e - 1023; /* value = 1.frac * 2^pow2 */
    if (e == 0 || pow2 < 0)
        return 0;
    if (pow2 >= 63)
        return neg ? INT64_MIN : INT64_MAX;
    uint64_t m = frac | UINT64_C(1) << F64_FRAC_BITS;
    uint64_t mag = pow2 >= F64_FRAC_BITS ? m << (pow2 - F64_FRAC_BITS)
                                        : m >> (F64_FRAC_BITS - pow2);
    return neg ? -(int64_t)mag : (int64_t)mag;
}

void rt_parallel_for(const rt_parallel *par, uint32_t n, llmc_rt_task_fn task, void *ctx)
{
    if (par && par->fn && n > 1) {
        par->fn(par->pool, n, task, ctx);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        task(ctx, i);
}

typedef struct {
    const rt_job *jobs;
    uint32_t n_jobs;
} job_list;

/* Task i of the list: the first job's tasks, then the next job's. */
static void job_list_task(void *ctx, uint32_t i)
{
    const job_list *L = ctx;
    for (uint32_t j = 0; j < L->n_jobs; j++) {
        if (i < L->jobs[j].n) {
            L->jobs[j].task(L->jobs[j].ctx, i);
            return;
        }
        i -= L->jobs[j].n;
    }
}

bool rt_parallel_for_jobs(const rt_parallel *par, const rt_job *jobs, uint32_t n_jobs)
{
    uint64_t total = 0;
    bool small = true;
    for (uint32_t j = 0; j < n_jobs; j++) {
        total += jobs[j].n;
        small &= jobs[j].small;
    }
    if (total > UINT32_MAX)
        return false;
    job_list L = {jobs, n_jobs};
    rt_parallel_for(small ? NULL : par, (uint32_t)total, job_list_task, &L);
    return true;
}

llmc_rt_status rt_run_outputs(const rt_parallel *par, rt_view *ys, uint32_t n_ys, int64_t col0,
                              bool residual, rt_output_job_fn job_for, void *ctx,
                              llmc_rt_error *err)
{
    if (n_ys > 1 && residual)
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear: a residual needs exactly one output, not %u",
                       RT_N(n_ys), NULL);
    rt_job jobs[RT_JOBS_MAX];
    for (uint32_t j0 = 0; j0 < n_ys; j0 += RT_JOBS_MAX) {
        uint32_t n = n_ys - j0 < RT_JOBS_MAX ? n_ys - j0 : RT_JOBS_MAX;
        for (uint32_t j = 0; j < n; j++) {
            rt_view *y = &ys[j0 + j];
            llmc_rt_status st = job_for(ctx, j, col0, y, &jobs[j], err);
            if (st)
                return n_ys > 1 ? rt_prefix(err, st, "output %u: ", RT_N(j0 + j), NULL) : st;
            col0 += y->dims[y->rank - 1];
        }
        if (!rt_parallel_for_jobs(par, jobs, n))
            return rt_fail(err, LLMC_RT_E_EXEC, "the outputs add up to more than 2^32 tasks",
                           NULL, NULL);
    }
    return LLMC_RT_OK;
}
