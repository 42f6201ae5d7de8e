/* Helpers shared by the reference kernels. */
#include <string.h>

#include "kernels.h"
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

int64_t k_offset_of(int64_t i, int n, const int64_t *dims, const int64_t *strides)
{
    int64_t off = 0;
    for (int a = n; a-- > 0;) {
        off += i % dims[a] * strides[a];
        i /= dims[a];
    }
    return off;
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
        char digits[24];
        int n = 0;
        uint64_t v = t->dims[i] < 0 ? 0 - (uint64_t)t->dims[i] : (uint64_t)t->dims[i];
        do {
            digits[n++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        if (t->dims[i] < 0)
            digits[n++] = '-';
        char text[24];
        for (int j = 0; j < n; j++)
            text[j] = digits[n - 1 - j];
        text[n] = '\0';
        if (i)
            append(buf, cap, &len, ", ");
        append(buf, cap, &len, text);
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

double k_load_f(const rt_view *t, int64_t i)
{
    if (t->dtype == LLMC_RT_F32)
        return ((const float *)t->data)[i];
    return (double)k_load_i(t, i);
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
    case LLMC_RT_F32: ((float *)t->data)[i] = (float)v; break;
    case LLMC_RT_I32: ((int32_t *)t->data)[i] = wrap32(v); break;
    case LLMC_RT_I64: ((int64_t *)t->data)[i] = v; break;
    case LLMC_RT_I8: ((int8_t *)t->data)[i] = wrap8(v); break;
    case LLMC_RT_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: ((uint8_t *)t->data)[i] = (uint8_t)(uint64_t)v; break;
    }
}

void k_store_f(rt_view *t, int64_t i, double v)
{
    if (t->dtype == LLMC_RT_F32)
        ((float *)t->data)[i] = (float)v;
    else if (t->dtype == LLMC_RT_BOOL)
        ((uint8_t *)t->data)[i] = v != 0;
    else
        k_store_i(t, i, k_f2i(v));
}

int64_t k_f2i(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v; /* truncates toward zero */
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
