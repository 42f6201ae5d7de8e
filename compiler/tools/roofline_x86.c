/* The AVX2 + FMA loops of `llmc bench --roofline` (roofline.h), and those of
 * the AVX-512 and AVX-VNNI kernels.  Built with -mavx2 -mfma on x86-64 hosts only
 * (Makefile); roofline.c calls them only after __builtin_cpu_supports("avx2")
 * and ("fma"), since the compiler may use AVX2 anywhere in this file.
 *
 * Every compute loop runs independent chains, each from its own starting
 * value with its own multiplicand, so that no two chains compute the same
 * thing and the compiler cannot merge them; test_roofline_loops counts the
 * instructions of each hot loop in this file's object against the table at
 * the end (insns_per_iter), from which the peaks' operation counts derive.
 * The loops are noinline so that their names stay in the object. */
#include <immintrin.h>

#include "roofline.h"

#define LOOP __attribute__((noinline))

/* Four 256-bit accumulators: loads, not adds, are the limit. */
static LOOP uint64_t read_sum_avx2(const uint64_t *words, size_t n)
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

/* The same loads addressed as base + byte index, all four before the index
 * steps (read_sum_avx2 compiles to a pointer stepped between its second
 * and third load).  On Intel Xeon family 6 model 167 this shape streamed
 * 16.7-17.3 GB/s on one thread and 32.1-32.6 on two where the other did
 * 14.2-14.7 and 27.5-27.9 (1 GiB in 2 MiB pages, the two taking turns). */
static LOOP uint64_t read_sum_indexed_avx2(const uint64_t *words, size_t n)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    /* in asm: gcc is free to turn an index back into a stepped pointer */
    for (size_t at = 0; at < n * sizeof *words; at += 128)
        __asm__("vpaddq (%4,%5), %0, %0\n\t"
                "vpaddq 32(%4,%5), %1, %1\n\t"
                "vpaddq 64(%4,%5), %2, %2\n\t"
                "vpaddq 96(%4,%5), %3, %3"
                : "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3)
                : "r"(words), "r"(at)
                : "memory");
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

/* ---- fp32: vfmadd chains c = c * m + b ----
 * An FMA has 4 (Skylake, Zen 3-5) to 5 (Haswell, Zen 1-2) cycles of latency
 * and up to 2 issue per cycle (Intel's and AMD's optimization manuals,
 * uops.info), so 5 x 2 = 10 chains keep every core's FMA units busy.  Chain
 * k multiplies by m_k = 1 - (k + 1) * 1e-6 (distinct floats: their spacing
 * near 1 is 6e-8) and tends to b / (1 - m_k) = 1 / (k + 1): no overflow, no
 * denormals.  On AVX2, 10 accumulators + 10 multiplicands + b exceed the 16
 * ymm registers, so some multiplicands are memory operands (2 loads per
 * cycle keep up with 2 FMAs). */
#define FMA_CHAINS 10
#define M(k) (1.0f - (float)((k) + 1) * 1e-6f)
#define C0(k) (0.50f + 0.01f * (float)(k))

/* OP on chains c0..c9, chain k with operand mk (FMA_CHAINS, VNNI_CHAINS) */
#define CHAINS10(OP, c, m)                                                                         \
    OP(c##0, m##0); OP(c##1, m##1); OP(c##2, m##2); OP(c##3, m##3); OP(c##4, m##4);                \
    OP(c##5, m##5); OP(c##6, m##6); OP(c##7, m##7); OP(c##8, m##8); OP(c##9, m##9)

#define YFMA(c, m) c = _mm256_fmadd_ps(c, m, b)

static LOOP float fma_loop_avx2(uint64_t iters)
{
    const __m256 b = _mm256_set1_ps(1e-6f);
    const __m256 m0 = _mm256_set1_ps(M(0)), m1 = _mm256_set1_ps(M(1)), m2 = _mm256_set1_ps(M(2)),
                 m3 = _mm256_set1_ps(M(3)), m4 = _mm256_set1_ps(M(4)), m5 = _mm256_set1_ps(M(5)),
                 m6 = _mm256_set1_ps(M(6)), m7 = _mm256_set1_ps(M(7)), m8 = _mm256_set1_ps(M(8)),
                 m9 = _mm256_set1_ps(M(9));
    __m256 c0 = _mm256_set1_ps(C0(0)), c1 = _mm256_set1_ps(C0(1)), c2 = _mm256_set1_ps(C0(2)),
           c3 = _mm256_set1_ps(C0(3)), c4 = _mm256_set1_ps(C0(4)), c5 = _mm256_set1_ps(C0(5)),
           c6 = _mm256_set1_ps(C0(6)), c7 = _mm256_set1_ps(C0(7)), c8 = _mm256_set1_ps(C0(8)),
           c9 = _mm256_set1_ps(C0(9));
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS10(YFMA, c, m);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(c8, c9));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* The fp32 FMA of the kernels "avx2" plans run on an AVX-512 CPU
 * (f_avx512.c): the same chains on ZMM, 16 lanes (32 registers: all of
 * them in registers). */
#define ZFMA(c, m) c = _mm512_fmadd_ps(c, m, b)

__attribute__((target("avx512f"))) static LOOP float fma_loop_avx512(uint64_t iters)
{
    const __m512 b = _mm512_set1_ps(1e-6f);
    const __m512 m0 = _mm512_set1_ps(M(0)), m1 = _mm512_set1_ps(M(1)), m2 = _mm512_set1_ps(M(2)),
                 m3 = _mm512_set1_ps(M(3)), m4 = _mm512_set1_ps(M(4)), m5 = _mm512_set1_ps(M(5)),
                 m6 = _mm512_set1_ps(M(6)), m7 = _mm512_set1_ps(M(7)), m8 = _mm512_set1_ps(M(8)),
                 m9 = _mm512_set1_ps(M(9));
    __m512 c0 = _mm512_set1_ps(C0(0)), c1 = _mm512_set1_ps(C0(1)), c2 = _mm512_set1_ps(C0(2)),
           c3 = _mm512_set1_ps(C0(3)), c4 = _mm512_set1_ps(C0(4)), c5 = _mm512_set1_ps(C0(5)),
           c6 = _mm512_set1_ps(C0(6)), c7 = _mm512_set1_ps(C0(7)), c8 = _mm512_set1_ps(C0(8)),
           c9 = _mm512_set1_ps(C0(9));
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS10(ZFMA, c, m);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    return _mm512_reduce_add_ps(_mm512_add_ps(s, _mm512_add_ps(c8, c9)));
}

/* ---- int8 ---- */

/* Operations: 2 per u8 x s8 product, as the kernels' 2 M N K counts them
 * (roofline.h); a ymm vpmaddubsw does 32 products, 64 operations, and its
 * widening vpmaddwd by ones none.
 *
 * Bits 8, the dot product of the AVX2 kernel without VNNI (q_avx2.c
 * w8_tile_row): vpmaddubsw (32 u8 x s8 products summed in pairs to s16),
 * vpmaddwd by ones (pairs to s32), vpaddd into the accumulator.  Only the add (1 cycle) is loop-carried, so
 * at 2 multiplies per cycle 2 chains would do; 4, each with its own s8
 * operand and starting value, leave slack: 4 accumulators + 4 operands +
 * the u8 operand + ones + 2 temporaries = 12 ymm registers.  The empty asm
 * makes the u8 operand opaque each iteration so the products are not
 * hoisted out of the loop. */
#define INT8_CHAINS 4
#define DOT(acc, w) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), ones))

static LOOP int32_t int8_loop_avx2(uint64_t iters)
{
    __m256i x = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    const __m256i w0 = _mm256_set1_epi8(1), w1 = _mm256_set1_epi8(-2), w2 = _mm256_set1_epi8(5),
                  w3 = _mm256_set1_epi8(-7);
    __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2),
            a3 = _mm256_set1_epi32(3);
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

/* Bits 4 (q_avx2.c w4_group_rows): 8 vpmaddubsw added in s16 (vpaddw), then
 * one vpmaddwd by ones and a vpaddd into the s32 accumulator.  2 chains,
 * each with its own opaque u8 operand and starting value, the 8 s8
 * operands shared (16 distinct products): 2 accumulators + 2 u8 + 8 s8 +
 * ones + 3 temporaries = 16 ymm registers.  The s16 sums wrap, as vpaddw
 * does; only their count matters here. */
#define W4_CHAINS 2
#define W4_RUN 8 /* vpmaddubsw per vpmaddwd */
#define MUB(x, w) _mm256_maddubs_epi16(x, w)
#define W4DOT(acc, x)                                                                              \
    acc = _mm256_add_epi32(                                                                        \
        acc, _mm256_madd_epi16(                                                                    \
                 _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(MUB(x, w0), MUB(x, w1)),       \
                                                   _mm256_add_epi16(MUB(x, w2), MUB(x, w3))),      \
                                  _mm256_add_epi16(_mm256_add_epi16(MUB(x, w4), MUB(x, w5)),       \
                                                   _mm256_add_epi16(MUB(x, w6), MUB(x, w7)))),     \
                 ones))

static LOOP int32_t int8_w4_loop_avx2(uint64_t iters)
{
    __m256i x0 = _mm256_set1_epi8(3), x1 = _mm256_set1_epi8(11), ones = _mm256_set1_epi16(1);
    const __m256i w0 = _mm256_set1_epi8(1), w1 = _mm256_set1_epi8(-2), w2 = _mm256_set1_epi8(3),
                  w3 = _mm256_set1_epi8(-4), w4 = _mm256_set1_epi8(5), w5 = _mm256_set1_epi8(-6),
                  w6 = _mm256_set1_epi8(7), w7 = _mm256_set1_epi8(-8);
    __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1);
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(x0), "+x"(x1));
        W4DOT(a0, x0); W4DOT(a1, x1);
    }
    uint32_t lanes[8], sum = 0;
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi32(a0, a1));
    for (int i = 0; i < 8; i++)
        sum += lanes[i];
    return (int32_t)(sum & 0x7fffffff);
}

/* The int8 dot product of the kernels "avx2" plans run on an AVX-512 VNNI
 * CPU (q_avx512_vnni.c): vpdpbusd on ZMM, 64 u8 x s8 multiply-adds added
 * into 16 int32 lanes.  5 cycles of latency (Ice Lake, Sapphire Rapids;
 * 4 on Zen 4-5) and up to 2 issue per cycle (Sapphire Rapids, Zen 5), so
 * 10 chains; each its own s8 operand and starting value, the u8 operand
 * opaque each iteration (as above): 10 + 10 + 1 of the 32 registers. */
#define VNNI_CHAINS 10
/* vpdpbusd written out: around gcc 12's builtin every accumulator is copied
 * twice per iteration (20 register moves for 10 vpdpbusd). */
#define VDOT(acc, s) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s))

__attribute__((target("avx512f,avx512vnni"))) static LOOP int32_t int8_loop_avx512_vnni(uint64_t iters)
{
    __m512i u = _mm512_set1_epi8(3);
    const __m512i s0 = _mm512_set1_epi8(1), s1 = _mm512_set1_epi8(-2), s2 = _mm512_set1_epi8(3),
                  s3 = _mm512_set1_epi8(-4), s4 = _mm512_set1_epi8(5), s5 = _mm512_set1_epi8(-6),
                  s6 = _mm512_set1_epi8(7), s7 = _mm512_set1_epi8(-8), s8 = _mm512_set1_epi8(9),
                  s9 = _mm512_set1_epi8(-10);
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2),
            a3 = _mm512_set1_epi32(3), a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5),
            a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7), a8 = _mm512_set1_epi32(8),
            a9 = _mm512_set1_epi32(9);
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(u));
        CHAINS10(VDOT, a, s);
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

/* The int8 dot product of the kernels "avx2" plans run on an AVX-VNNI CPU
 * (q_avxvnni.c): vpdpbusd on YMM, VEX-encoded, 32 u8 x s8 multiply-adds
 * into 8 int32 lanes.  5 cycles of latency and 2 issue per cycle (Alder
 * Lake P-cores, Sapphire Rapids: ports 0 and 1), so 10 chains as above;
 * 10 accumulators + 5 s8 operands (each shared by two chains that start
 * apart) + the u8 operand fill the 16 YMM registers.  The same loop
 * EVEX-encoded is that of q_avx512_ymm.c (AVX-512 VNNI CPUs without
 * AVX-VNNI, Zen 4 among them).  REG: the asm constraint of a register the
 * encoding reaches ("x": ymm0-15, "v": ymm0-31). */
#define YMM_VNNI_LOOP(DOT, REG)                                                                    \
    __m256i u = _mm256_set1_epi8(3);                                                               \
    const __m256i s0 = _mm256_set1_epi8(1), s1 = _mm256_set1_epi8(-2), s2 = _mm256_set1_epi8(3),   \
                  s3 = _mm256_set1_epi8(-4), s4 = _mm256_set1_epi8(5);                             \
    const __m256i s5 = s0, s6 = s1, s7 = s2, s8 = s3, s9 = s4;                                     \
    __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2),       \
            a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5),       \
            a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7), a8 = _mm256_set1_epi32(8),       \
            a9 = _mm256_set1_epi32(9);                                                             \
    for (uint64_t i = 0; i < iters; i++) {                                                         \
        __asm__ volatile("" : "+" REG(u));                                                         \
        CHAINS10(DOT, a, s);                                                                       \
    }                                                                                              \
    __m256i t = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)), \
                                 _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7))); \
    t = _mm256_add_epi32(t, _mm256_add_epi32(a8, a9));                                             \
    uint32_t lanes[8], sum = 0;                                                                    \
    _mm256_storeu_si256((__m256i *)lanes, t);                                                      \
    for (int i = 0; i < 8; i++)                                                                    \
        sum += lanes[i];                                                                           \
    return (int32_t)(sum & 0x7fffffff)

#define YDOT(acc, s) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s))
#define EDOT(acc, s) __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s))

static LOOP int32_t int8_loop_avxvnni(uint64_t iters)
{
    YMM_VNNI_LOOP(YDOT, "x");
}

__attribute__((target("avx512f,avx512vl,avx512vnni"))) static LOOP int32_t
int8_loop_avx512_ymm(uint64_t iters)
{
    YMM_VNNI_LOOP(EDOT, "v");
}

_Static_assert(FMA_CHAINS == 10 && VNNI_CHAINS == 10, "CHAINS10 runs 10 chains");

/* Instructions issued per cycle per core, for the bound of roofline.c
 * (uops.info's measured throughputs; Agner Fog's instruction tables; AMD's
 * Software Optimization Guides for families 17h and 19h; Intel's
 * Optimization Reference Manual):
 *   vfmadd ymm   2 (Haswell .. Golden Cove: ports 0 and 1; Zen 2-5: FP0,
 *                FP1); Zen 1: 1 (two 128-bit FMA pipes, a ymm op takes both)
 *   vpmaddubsw and vpmaddwd ymm, counted together (they share the pipes):
 *                2 (Skylake and later: ports 0 and 1; Zen 3-5: FP0, FP3);
 *                Zen 1: 0.5 (one 128-bit integer multiply pipe, FP0:
 *                int8_loop_avx2 runs its 8 multiplies in 16 cycles there,
 *                int8_w4_loop_avx2 its 18 in 36)
 *   vfmadd zmm   2 (Skylake-SP/Ice Lake-SP/Sapphire Rapids with two 512-bit
 *                FMA units, Zen 5); Zen 4: 1 (a 512-bit op on two 256-bit pipes)
 *   vpdpbusd zmm 2 (Sapphire Rapids: ports 0 and 5; Zen 5); Zen 4: 1
 *   vpdpbusd ymm 2 (Alder Lake P-cores, Sapphire Rapids: ports 0 and 1;
 *                Zen 4-5: FP0, FP1) */
#define PER_CYCLE(other, zen1, zen4) {[LLMC_CORE_OTHER] = other, [LLMC_CORE_ZEN1] = zen1, [LLMC_CORE_ZEN4] = zen4}

#define VNNI_INSN {"int8_loop_avx512_vnni", "vpdpbusd", VNNI_CHAINS, 512, 8, NULL, 0, PER_CYCLE(2, 2, 1)}

const llmc_roofline_loops llmc_roofline_avx2 = {
    .isa = "avx2",
    .read_sum = {read_sum_avx2, read_sum_indexed_avx2},
    .fma_loop = fma_loop_avx2,
    .int8_loop = {[LLMC_INT8_W8] = int8_loop_avx2, [LLMC_INT8_W4] = int8_w4_loop_avx2},
    .fma = {"fma_loop_avx2", "vfmadd*ps", FMA_CHAINS, 256, 32, NULL, 0, PER_CYCLE(2, 1, 2)},
    .int8 = {
        [LLMC_INT8_W8] = {"int8_loop_avx2", "vpmaddubsw", INT8_CHAINS, 256, 8, "vpmaddwd", INT8_CHAINS,
                          PER_CYCLE(2, 0.5, 2)},
        [LLMC_INT8_W4] = {"int8_w4_loop_avx2", "vpmaddubsw", W4_CHAINS * W4_RUN, 256, 8, "vpmaddwd",
                          W4_CHAINS, PER_CYCLE(2, 0.5, 2)},
    },
};

/* Both mixes are vpdpbusd in q_avx512_vnni.c. */
const llmc_roofline_loops llmc_roofline_avx2_avx512 = {
    .isa = "avx2+avx512vnni",
    .read_sum = {read_sum_avx2, read_sum_indexed_avx2},
    .fma_loop = fma_loop_avx512,
    .int8_loop = {[LLMC_INT8_W8] = int8_loop_avx512_vnni, [LLMC_INT8_W4] = int8_loop_avx512_vnni},
    .fma = {"fma_loop_avx512", "vfmadd*ps", FMA_CHAINS, 512, 32, NULL, 0, PER_CYCLE(2, 2, 1)},
    .int8 = {[LLMC_INT8_W8] = VNNI_INSN, [LLMC_INT8_W4] = VNNI_INSN},
};

/* Both mixes are vpdpbusd on YMM in q_avxvnni.c. */
#define YVNNI_INSN {"int8_loop_avxvnni", "vpdpbusd", VNNI_CHAINS, 256, 8, NULL, 0, PER_CYCLE(2, 2, 2)}

const llmc_roofline_loops llmc_roofline_avx2_avxvnni = {
    .isa = "avx2+avxvnni",
    .read_sum = {read_sum_avx2, read_sum_indexed_avx2},
    .fma_loop = fma_loop_avx2,
    .int8_loop = {[LLMC_INT8_W8] = int8_loop_avxvnni, [LLMC_INT8_W4] = int8_loop_avxvnni},
    .fma = {"fma_loop_avx2", "vfmadd*ps", FMA_CHAINS, 256, 32, NULL, 0, PER_CYCLE(2, 1, 2)},
    .int8 = {[LLMC_INT8_W8] = YVNNI_INSN, [LLMC_INT8_W4] = YVNNI_INSN},
};

/* Both mixes are EVEX vpdpbusd on YMM in q_avx512_ymm.c. */
#define EVNNI_INSN {"int8_loop_avx512_ymm", "vpdpbusd", VNNI_CHAINS, 256, 8, NULL, 0, PER_CYCLE(2, 2, 2)}

const llmc_roofline_loops llmc_roofline_avx2_avx512ymm = {
    .isa = "avx2+avx512vnni-ymm",
    .read_sum = {read_sum_avx2, read_sum_indexed_avx2},
    .fma_loop = fma_loop_avx2,
    .int8_loop = {[LLMC_INT8_W8] = int8_loop_avx512_ymm, [LLMC_INT8_W4] = int8_loop_avx512_ymm},
    .fma = {"fma_loop_avx2", "vfmadd*ps", FMA_CHAINS, 256, 32, NULL, 0, PER_CYCLE(2, 1, 2)},
    .int8 = {[LLMC_INT8_W8] = EVNNI_INSN, [LLMC_INT8_W4] = EVNNI_INSN},
};
