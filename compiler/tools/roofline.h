/* `llmc bench --roofline`: this machine's limits and a plan's cost per token.
 *
 * Peaks (roofline.c drives, the loops are per ISA):
 *   read bandwidth  sum of a buffer 8x the last-level cache (>= 64 MiB),
 *                   GB/s = bytes / seconds, median of several passes
 *   fp32            independent FMA chains (MegPeak-like), GFLOPS, 2 per lane
 *   int8            u8 x s8 -> s16 pairs -> s32 chains (vpmaddubsw + vpmaddwd +
 *                   vpaddd on AVX2; vpdpbusd on ZMM where the kernels use
 *                   AVX-512 VNNI, and the AVX2 loop beside it), GOPS, 2 per
 *                   multiply-add
 * all on `threads` threads at once, each checked against threads x max
 * clock x the instruction's ops per cycle per core.  The loops are those of the kernels
 * "avx2" plans run on this CPU (roofline_x86.c, built with -mavx2 -mfma
 * only on x86-64 hosts): AVX2, with the AVX-512 VNNI int8 loop when the
 * runtime picks its AVX-512 table; the portable loops in roofline.c on a
 * CPU without AVX2 and FMA.
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

typedef struct {
    const char *isa;        /* "avx2", "avx2+avx512vnni" or "portable": the loops that ran */
    uint32_t threads;
    double read_gb_s;       /* 1e9 bytes per second */
    uint64_t read_bytes;    /* size of the buffer read */
    llmc_roofline_peak fp32;       /* GFLOPS of the loops' FMA */
    llmc_roofline_peak int8;       /* GOPS of the loops' int8: what plans with these kernels are held to */
    /* Both x86 int8 loops where the CPU runs both (int8 is one of them):
     * vpmaddubsw (AVX2) and vpdpbusd on ZMM (AVX-512 VNNI); rate 0: not run */
    llmc_roofline_peak int8_avx2, int8_vnni;
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

/* The instruction a compute loop repeats, one per chain per iteration. */
typedef struct {
    const char *symbol;      /* the loop's function in its object (test_roofline_loops); NULL: not checked */
    const char *insn;        /* fnmatch pattern of its mnemonic in `objdump -d` */
    uint32_t insns_per_iter; /* in the loop's body: one per chain */
    uint32_t bits;           /* vector width: 256 (ymm), 512 (zmm); the element's for scalar loops */
    uint32_t elem_bits;      /* 32: fp32 lanes; 8: u8 x s8 multiply-adds */
    /* instructions issued per cycle per core by llmc_core_kind (0: as
     * LLMC_CORE_OTHER; all 0: no bound) */
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

/* One ISA's loops.  Each returns a value derived from everything it
 * computed so that no loop can be optimized away. */
typedef struct {
    const char *isa;
    /* Sum of n 64-bit words (n a multiple of 64). */
    uint64_t (*read_sum)(const uint64_t *words, size_t n);
    /* `iters` iterations of fma's instructions. */
    float (*fma_loop)(uint64_t iters);
    /* `iters` iterations of int8's instructions. */
    int32_t (*int8_loop)(uint64_t iters);
    llmc_roofline_insn fma, int8;
} llmc_roofline_loops;

#if defined(__x86_64__)
/* roofline_x86.c: the AVX2 loops, and those of the AVX-512 kernels (FMA and
 * vpdpbusd on ZMM) */
extern const llmc_roofline_loops llmc_roofline_avx2;
extern const llmc_roofline_loops llmc_roofline_avx2_avx512;
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
