/* `llmc bench --roofline`: this machine's limits and a plan's cost per token.
 *
 * Peaks (roofline.c drives, the loops are per ISA):
 *   read bandwidth  sum of a buffer 8x the last-level cache (>= 64 MiB),
 *                   GB/s = bytes / seconds, median of several passes, the
 *                   faster of two loop shapes (llmc_roofline_loops.read_sum)
 *   fp32            independent FMA chains (MegPeak-like), GFLOPS, 2 per lane
 *   int8            one loop per instruction mix of the quantized kernels
 *                   (llmc_int8_mix): on AVX2 u8 x s8 -> s16 pairs by
 *                   vpmaddubsw, widened to s32 by vpmaddwd after every one
 *                   (bits 8) or after 8 added in s16 (bits 4); vpdpbusd on
 *                   ZMM for both where the kernels use AVX-512 VNNI, and
 *                   the AVX2 loops beside it), GOPS, 2 per u8 x s8 product
 * all on `threads` threads at once, each checked against threads x max
 * clock x the instruction's ops per cycle per core.  The loops are those of the kernels
 * "avx2" plans run on this CPU (roofline_x86.c, built with -mavx2 -mfma
 * only on x86-64 hosts): AVX2, with the AVX-512 VNNI int8 loop when the
 * runtime picks its AVX-512 table; the portable loops in roofline.c on a
 * CPU without AVX2 and FMA.
 *
 * Operations are counted alike for kernels and loops: 2 per u8 x s8 (or
 * fp32) product, a multiply and an add; a GEMM of x [M, K] by W [N, K]
 * does 2 M N K.  The widening vpmaddwd (by ones) is not an operation of
 * the product, only an instruction the loop must issue.
 *
 * Cost per token (paper 000 §V), from the plan's ops (plan_cost.c):
 *   bytes read per decoded token = weight_bytes + kv_bytes_per_pos * context
 *   ops per token                = linear_ops + linear_ops_per_call / tokens per call
 *                                  + attn_ops_per_pos * context
 * where `context` is the number of cached positions attention reads: for
 * tokens at positions [first, first + n), the mean of p + 1, and for a
 * sliding-window layer the mean of min(p + 1, window) (llmc_plan_cost_at). */
#ifndef LLMC_ROOFLINE_H
#define LLMC_ROOFLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llmc_rt.h"

/* The kinds of core whose issue rates differ from the best cores' (the
 * per_cycle column of the loops' tables). */
typedef enum {
    LLMC_CORE_OTHER,
    LLMC_CORE_ZEN1,  /* AMD family 17h below model 30h: 256-bit ops as two 128-bit halves */
    LLMC_CORE_ZEN4,  /* AMD family 19h with AVX-512: 512-bit ops on two 256-bit pipes */
    LLMC_CORE_KINDS
} llmc_core_kind;

/* This machine, from /proc/cpuinfo and cpufreq. */
typedef struct {
    char model[96];           /* "model name", or "unknown" */
    double max_mhz;           /* the highest clock; 0: unknown */
    const char *clock_source; /* "cpuinfo_max_freq" (cpufreq), "cpu MHz" (/proc/cpuinfo), or "none" */
    /* The clock measured on the calling thread by a chain of dependent adds
     * (llmc_roofline_measure): a VM's "cpu MHz" is the nominal clock, which
     * the host's boost exceeds. */
    double measured_mhz;
    llmc_core_kind core;
    uint32_t cpus;            /* online logical CPUs */
} llmc_cpu_info;

void llmc_cpu_info_read(llmc_cpu_info *cpu);

/* One measured compute peak and its sanity bound: threads (at most the
 * online CPUs) x clock (the larger of max_mhz and measured_mhz) x the
 * instruction's ops per cycle per core.  No
 * core does more, so a rate above it means the loop's count or the clock
 * is wrong: the figure is suspect. */
typedef struct {
    double rate;    /* 1e9 operations per second; 0: not measured */
    double bound;   /* 1e9 operations per second; 0: unknown (no clock or no rate for the loop) */
    bool suspect;   /* rate > bound */
} llmc_roofline_peak;

/* The int8 instruction mixes of the quantized Linears' kernels, by the
 * bits of their weights (QWeightTiles Int8 or Uint4): NAME, bits.  On AVX2
 * (q_avx2.c) bits 8 widens every vpmaddubsw by a vpmaddwd (a pair of
 * products may reach 2 * 128 * 127: no room in s16), bits 4 adds 8
 * vpmaddubsw results in s16 first (8 * 2 * 15 * 127 < 32767), so the two
 * reach different peaks on a core where both instructions share the
 * multiply pipes. */
#define LLMC_INT8_MIX_LIST(X) X(W8, 8, "w8") X(W4, 4, "w4")
#define LLMC_INT8_MIX_ENUM_(name, bits, text) LLMC_INT8_##name,
typedef enum { LLMC_INT8_MIX_LIST(LLMC_INT8_MIX_ENUM_) LLMC_INT8_MIXES } llmc_int8_mix;
#undef LLMC_INT8_MIX_ENUM_

/* The weight bits of a mix. */
static inline int llmc_int8_mix_bits(llmc_int8_mix m)
{
#define LLMC_INT8_MIX_BITS_(name, bits, text) m == LLMC_INT8_##name ? bits :
    return LLMC_INT8_MIX_LIST(LLMC_INT8_MIX_BITS_) 0;
#undef LLMC_INT8_MIX_BITS_
}

/* Its name in bench's table and JSON ("w8", "w4"). */
static inline const char *llmc_int8_mix_name(llmc_int8_mix m)
{
#define LLMC_INT8_MIX_NAME_(name, bits, text) m == LLMC_INT8_##name ? text :
    return LLMC_INT8_MIX_LIST(LLMC_INT8_MIX_NAME_) "?";
#undef LLMC_INT8_MIX_NAME_
}

typedef struct {
    const char *isa;        /* "avx2", "avx2+avx512vnni", "avx2+avxvnni" or "portable": the loops that ran */
    uint32_t threads;
    double read_gb_s;       /* 1e9 bytes per second */
    uint64_t read_bytes;    /* size of the buffer read */
    llmc_roofline_peak fp32;       /* GFLOPS of the loops' FMA */
    /* GOPS of the loops' int8 per mix: what a plan's Linears of that mix
     * are held to */
    llmc_roofline_peak int8[LLMC_INT8_MIXES];
    /* Both x86 int8 loops where the CPU runs both (int8 is one of them):
     * the AVX2 mixes and vpdpbusd on ZMM (AVX-512 VNNI); rate 0: not run */
    llmc_roofline_peak int8_avx2[LLMC_INT8_MIXES], int8_vnni;
    llmc_cpu_info cpu;
} llmc_roofline_peaks;

/* Measures the peaks on `threads` threads (about a second or two per
 * loop) with the loops of the kernels named by isa (rt_kernels.isa: a
 * plan's table; NULL: the table "avx2" plans run on this CPU), and checks
 * each against its bound.  0, or an errno-style code (ENOMEM: no buffer
 * or no threads). */
int llmc_roofline_measure(uint32_t threads, const char *isa, llmc_roofline_peaks *out);

/* CLOCK_MONOTONIC in seconds (the timer of every bench measurement). */
double llmc_seconds_now(void);
/* Median of v[0, n) (n >= 1); sorts v. */
double llmc_median(double *v, size_t n);

/* The instruction a compute loop repeats, and the one that widens its
 * results where the loop has one (vpmaddwd after vpmaddubsw). */
typedef struct {
    const char *symbol;      /* the loop's function in its object (test_roofline_loops); NULL: not checked */
    const char *insn;        /* fnmatch pattern of its mnemonic in `objdump -d` */
    uint32_t insns_per_iter; /* in the loop's body */
    uint32_t bits;           /* vector width: 256 (ymm), 512 (zmm); the element's for scalar loops */
    uint32_t elem_bits;      /* 32: fp32 lanes; 8: u8 x s8 multiply-adds */
    /* The widening instruction (NULL: none) and how many the body holds:
     * no operations of their own, but they take the same pipes as insn. */
    const char *widen;
    uint32_t widens_per_iter;
    /* insn and widen instructions issued per cycle per core by
     * llmc_core_kind (0: as LLMC_CORE_OTHER; all 0: no bound) */
    double per_cycle[LLMC_CORE_KINDS];
} llmc_roofline_insn;

/* Operations an instruction does: a multiply and an add per lane. */
static inline double llmc_roofline_ops_per_insn(const llmc_roofline_insn *in)
{
    return 2.0 * in->bits / in->elem_bits;
}

/* Operations per iteration of the loop: what its peak counts. */
static inline double llmc_roofline_ops_per_iter(const llmc_roofline_insn *in)
{
    return in->insns_per_iter * llmc_roofline_ops_per_insn(in);
}

/* Operations per issued instruction (insn or widen): what the bound
 * multiplies the issue rate by. */
static inline double llmc_roofline_ops_per_issue(const llmc_roofline_insn *in)
{
    return llmc_roofline_ops_per_iter(in) / (in->insns_per_iter + in->widens_per_iter);
}

#define LLMC_READ_LOOPS 2

/* One ISA's loops.  Each returns a value derived from everything it
 * computed so that no loop can be optimized away. */
typedef struct {
    const char *isa;
    /* Sums of n 64-bit words (n a multiple of 64), by loops of different
     * shapes (the second NULL where there is one only): the same loads
     * stream at different rates on some cores, and the read bandwidth is
     * what the faster attains. */
    uint64_t (*read_sum[LLMC_READ_LOOPS])(const uint64_t *words, size_t n);
    /* `iters` iterations of fma's instructions. */
    float (*fma_loop)(uint64_t iters);
    /* `iters` iterations of int8[mix]'s instructions (one loop may serve
     * several mixes). */
    int32_t (*int8_loop[LLMC_INT8_MIXES])(uint64_t iters);
    llmc_roofline_insn fma, int8[LLMC_INT8_MIXES];
} llmc_roofline_loops;

#if defined(__x86_64__)
/* roofline_x86.c: the AVX2 loops, those of the AVX-512 kernels (FMA and
 * vpdpbusd on ZMM), those of the AVX-VNNI ones (vpdpbusd on YMM) and those
 * of the AVX-512 VNNI kernels on YMM (vpdpbusd EVEX-encoded) */
extern const llmc_roofline_loops llmc_roofline_avx2;
extern const llmc_roofline_loops llmc_roofline_avx2_avx512;
extern const llmc_roofline_loops llmc_roofline_avx2_avxvnni;
extern const llmc_roofline_loops llmc_roofline_avx2_avx512ymm;
#endif

/* Distinct sliding windows llmc_plan_cost_of tells apart (Gemma 2 and 3,
 * Mistral: one). */
#define LLMC_COST_WINDOWS 8

/* A plan's work per token, from its ops (Linear, MatMul with a weight
 * operand, Gather of a weight, Attention, and the PastKey/PastValue
 * inputs of unfused layers). */
typedef struct {
    /* Weight bytes read per decoded token: the segments of every weight
     * operand of Linear (W, bias) and MatMul, and one slice per index of a
     * Gather of a weight (segment bytes / dims[axis]: an embedding lookup
     * reads one row, not the table).  Norm scales, RoPE tables and the
     * constants of elementwise ops are left out (well under 1% on LLMs). */
    uint64_t weight_bytes;
    /* Bytes of K and V read per cached position: a K and a V row of the
     * plan's KV cache dtype (rt_kv_position_bytes: 2 * kv_heads * head_dim *
     * 4 for float32, * 2 for float16, int8 keys with their scales) per
     * Attention op, plus the PastKey/PastValue inputs' float bytes per
     * position of unfused layers. */
    uint64_t kv_bytes_per_pos;
    /* 2 * N * K per Linear (W's logical dims [N, K]) and 2 * elements of
     * the weight operand of a MatMul; activation-by-activation MatMuls of
     * unfused attention are left out. */
    uint64_t linear_ops;
    /* The same for Linears over a fixed row count (`--logits last`'s LM
     * head): once per call, so a prefill of N tokens adds 1/N of it per
     * token, and a decode step all of it. */
    uint64_t linear_ops_per_call;
    /* 4 * heads * head_dim per Attention op per cached position (q.k and
     * p.v, 2 ops per multiply-add each). */
    uint64_t attn_ops_per_pos;
    /* Of linear_ops and linear_ops_per_call: the Linears whose W is int8
     * tiles of each mix (QWeightTiles Int8, Uint4); the rest runs in float. */
    uint64_t int8_ops[LLMC_INT8_MIXES], int8_ops_per_call[LLMC_INT8_MIXES];
    /* The Attention ops with a sliding window, one entry per window: their
     * share of kv_bytes_per_pos and attn_ops_per_pos (a query reads at
     * most `window` of their positions). */
    struct {
        uint32_t window;
        uint64_t kv_bytes_per_pos, attn_ops_per_pos;
    } windowed[LLMC_COST_WINDOWS];
    uint32_t n_windowed;
    uint32_t linears, gathers, attentions; /* ops counted */
    /* A Linear/MatMul weight is not float32 (quantized): prefill may run
     * on the int8 peak; a float32 plan's prefill is held to the fp32 one. */
    bool quantized;
} llmc_plan_cost;

/* Walks the plan's ops and tensors through the runtime's reader; fills
 * `cost` or returns the reader's status with err filled (LLMC_RT_E_ARG:
 * more than LLMC_COST_WINDOWS distinct windows). */
llmc_rt_status llmc_plan_cost_of(const llmc_rt_plan *plan, llmc_plan_cost *cost,
                                 llmc_rt_error *err);

/* Mean over the positions p in [first, first + n) (n >= 1) of the cached
 * positions a query at p reads: p + 1, at most window (0: no window). */
double llmc_cost_positions(uint64_t first, uint64_t n, uint32_t window);

/* K/V bytes and attention operations per token, averaged over tokens at
 * positions [first, first + n): each layer's per-position cost times its
 * llmc_cost_positions. */
void llmc_plan_cost_at(const llmc_plan_cost *cost, uint64_t first, uint64_t n, double *kv_bytes,
                       double *attn_ops);

#endif
