/* Internal: what the x86 attention loops (attn_avx2.c, attn_avx512.c) share:
 * the kinds of cache row they read and the walk over keys 8 at a time. */
#ifndef LLMC_RT_ATTN_X86_H
#define LLMC_RT_ATTN_X86_H

#include <stdint.h>

/* A cache row's values: float32, float16 (F16C), int8 with a float scale
 * (tensor_traits.h rt_kv_row_bytes). */
enum { ROW_F32, ROW_F16, ROW_I8 };

static const int elem_bytes[] = {4, 2, 1};

/* The row pointers of the 8 keys from t0 (row_bytes apart): a whole
 * group's as a running sum (written as the tail's select, gcc vectorized
 * their computation (vpmuludq, vpblendvb, vpextrq) into an eighth of the
 * AVX2 scores' time, perf, head_dim 64); a group cut by nk repeats its
 * first key in the places past nk, so every key goes through the same
 * operations whatever its place. */
static inline __attribute__((always_inline)) void key_group(const uint8_t *k, uint64_t row_bytes,
                                                            int64_t t0, int64_t nk,
                                                            const uint8_t *kr[8])
{
    if (t0 + 8 <= nk) {
        kr[0] = k + (uint64_t)t0 * row_bytes;
#pragma GCC unroll 7
        for (int j = 1; j < 8; j++)
            kr[j] = kr[j - 1] + row_bytes;
        return;
    }
    for (int j = 0; j < 8; j++)
        kr[j] = k + (uint64_t)(t0 + j < nk ? t0 + j : t0) * row_bytes;
}

#endif
