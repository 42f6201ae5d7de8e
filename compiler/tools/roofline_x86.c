/* The AVX2 + FMA loops of `llmc bench --roofline` (roofline.h).  Built with
 * -mavx2 -mfma on x86-64 hosts only (Makefile); roofline.c calls them only
 * after __builtin_cpu_supports("avx2") and ("fma"), since the compiler may
 * use AVX2 anywhere in this file. */
#include <immintrin.h>

#include "roofline.h"

/* Four 256-bit accumulators: loads, not adds, are the limit. */
static uint64_t read_sum_avx2(const uint64_t *words, size_t n)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += 16) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256((const __m256i *)(words + i)));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256((const __m256i *)(words + i + 4)));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256((const __m256i *)(words + i + 8)));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256((const __m256i *)(words + i + 12)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

/* 12 independent vfmadd231ps chains.  An FMA has 4-5 cycles of latency
 * and up to 2 issue per cycle (Zen 2+, Skylake; Zen 1 splits a 256-bit FMA
 * in two halves), so at least 10 must be in flight to keep the units busy;
 * 12 accumulators + the two operands use 14 of the 16 ymm registers. */
#define FMA_CHAINS 12
#define FMA(c) c = _mm256_fmadd_ps(c, a, b)

static float fma_loop_avx2(uint64_t iters)
{
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
    /* distinct starting values, or the compiler merges identical chains */
    __m256 c0 = _mm256_set1_ps(0.50f), c1 = _mm256_set1_ps(0.51f), c2 = _mm256_set1_ps(0.52f),
           c3 = _mm256_set1_ps(0.53f), c4 = _mm256_set1_ps(0.54f), c5 = _mm256_set1_ps(0.55f),
           c6 = _mm256_set1_ps(0.56f), c7 = _mm256_set1_ps(0.57f), c8 = _mm256_set1_ps(0.58f),
           c9 = _mm256_set1_ps(0.59f), c10 = _mm256_set1_ps(0.60f), c11 = _mm256_set1_ps(0.61f);
    for (uint64_t i = 0; i < iters; i++) {
        FMA(c0); FMA(c1); FMA(c2); FMA(c3); FMA(c4); FMA(c5);
        FMA(c6); FMA(c7); FMA(c8); FMA(c9); FMA(c10); FMA(c11);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* The int8 dot product of an AVX2 kernel without VNNI: vpmaddubsw (32 u8 x
 * s8 products summed in pairs to s16), vpmaddwd by ones (pairs to s32),
 * vpaddd into the accumulator.  Only the add is loop-carried, so 4 chains
 * with their own s8 operand suffice; 4 accumulators + 4 operands + the u8
 * operand + ones + 2 temporaries = 12 ymm registers.  The empty asm makes
 * the u8 operand opaque each iteration so the products are not hoisted. */
#define INT8_CHAINS 4
#define DOT(acc, w) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), ones))

static int32_t int8_loop_avx2(uint64_t iters)
{
    __m256i x = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    const __m256i w0 = _mm256_set1_epi8(1), w1 = _mm256_set1_epi8(-2), w2 = _mm256_set1_epi8(5),
                  w3 = _mm256_set1_epi8(-7);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(x));
        DOT(a0, w0); DOT(a1, w1); DOT(a2, w2); DOT(a3, w3);
    }
    uint32_t lanes[8], sum = 0;
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)));
    for (int i = 0; i < 8; i++)
        sum += lanes[i];
    return (int32_t)(sum & 0x7fffffff);
}

const llmc_roofline_loops llmc_roofline_avx2 = {
    .isa = "avx2",
    .read_sum = read_sum_avx2,
    .fma_loop = fma_loop_avx2,
    .int8_loop = int8_loop_avx2,
    .fma_flops_per_iter = FMA_CHAINS * 8 * 2,   /* 8 lanes, multiply + add */
    .int8_ops_per_iter = INT8_CHAINS * 32 * 2,  /* 32 u8 x s8 multiply-adds per vpmaddubsw */
};

/* The fp32 FMA of the kernels "avx2" plans run on an AVX-512 CPU
 * (f_avx512.c): the same 12 chains on ZMM, 16 lanes. */
#define ZFMA(c) c = _mm512_fmadd_ps(c, a, b)

__attribute__((target("avx512f"))) static float fma_loop_avx512(uint64_t iters)
{
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
    __m512 c0 = _mm512_set1_ps(0.50f), c1 = _mm512_set1_ps(0.51f), c2 = _mm512_set1_ps(0.52f),
           c3 = _mm512_set1_ps(0.53f), c4 = _mm512_set1_ps(0.54f), c5 = _mm512_set1_ps(0.55f),
           c6 = _mm512_set1_ps(0.56f), c7 = _mm512_set1_ps(0.57f), c8 = _mm512_set1_ps(0.58f),
           c9 = _mm512_set1_ps(0.59f), c10 = _mm512_set1_ps(0.60f), c11 = _mm512_set1_ps(0.61f);
    for (uint64_t i = 0; i < iters; i++) {
        ZFMA(c0); ZFMA(c1); ZFMA(c2); ZFMA(c3); ZFMA(c4); ZFMA(c5);
        ZFMA(c6); ZFMA(c7); ZFMA(c8); ZFMA(c9); ZFMA(c10); ZFMA(c11);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
    return _mm512_reduce_add_ps(s);
}

/* The int8 dot product of the kernels "avx2" plans run on an AVX-512 VNNI
 * CPU (q_avx512_vnni.c): vpdpbusd on ZMM, 64 u8 x s8 multiply-adds added
 * into 16 int32 lanes.  About 5 cycles of latency and up to 2 issue per
 * cycle, so 10 chains; 10 accumulators + 2 operands of the 32 registers. */
#define VNNI_CHAINS 10
#define VDOT(acc) acc = _mm512_dpbusd_epi32(acc, u, s)

__attribute__((target("avx512f,avx512vnni"))) static int32_t int8_loop_avx512_vnni(uint64_t iters)
{
    __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0;
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(u));
        VDOT(a0); VDOT(a1); VDOT(a2); VDOT(a3); VDOT(a4);
        VDOT(a5); VDOT(a6); VDOT(a7); VDOT(a8); VDOT(a9);
    }
    __m512i t = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                 _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    t = _mm512_add_epi32(t, _mm512_add_epi32(a8, a9));
    uint32_t lanes[16], sum = 0; /* unsigned: the sums wrap (gcc's reduce adds signed ints) */
    _mm512_storeu_si512(lanes, t);
    for (int i = 0; i < 16; i++)
        sum += lanes[i];
    return (int32_t)(sum & 0x7fffffff);
}

const llmc_roofline_loops llmc_roofline_avx2_avx512 = {
    .isa = "avx2+avx512vnni",
    .read_sum = read_sum_avx2,
    .fma_loop = fma_loop_avx512,
    .int8_loop = int8_loop_avx512_vnni,
    .fma_flops_per_iter = FMA_CHAINS * 16 * 2,
    .int8_ops_per_iter = VNNI_CHAINS * 64 * 2, /* 64 multiply-adds per vpdpbusd */
};
