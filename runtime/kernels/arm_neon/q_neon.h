/* Internal: the AArch64 NEON kernel tables, targets "neon-dot" (SDOT,
 * ARMv8.2 dotprod) and "neon-i8mm" (SMMLA, ARMv8.6 i8mm).
 *
 * These files are compiled only for AArch64 (Makefile `aarch64-tests`
 * cross-compiles them, tests/t_neon.sh runs them under qemu-aarch64), each
 * kernel file with the -march its instructions need (and
 * -fno-schedule-insns: with it gcc 12 keeps every accumulator of the tile
 * loops in registers, without it some spill); the x86 build never sees
 * this directory.  A table may run only where its CPU check says so:
 * the instructions raise SIGILL elsewhere. */
#ifndef LLMC_RT_Q_NEON_H
#define LLMC_RT_Q_NEON_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel_table.h"

extern const rt_kernels rt_kernels_neon_dot;
extern const rt_kernels rt_kernels_neon_i8mm;

/* cpu_arm.c: whether this CPU has SDOT/UDOT (FEAT_DotProd) and
 * SMMLA/UMMLA/USMMLA (FEAT_I8MM).  Plain ARMv8.0, no libc. */
bool rt_cpu_arm_dotprod_ok(void);
bool rt_cpu_arm_i8mm_ok(void);

/* q_neon_quantize.c: QuantizeRows for either table (any lp in {4, 8};
 * plain ARMv8.0 NEON). */
void rt_neon_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                           int64_t r0, int64_t r1, float scale, uint8_t *xq);

/* q_neon_dot.c (hp 8, lp 4, ep 12) and q_neon_i8mm.c (hp 8, lp 8, ep 10):
 * the qtile entry of kernel_table.h for their table's tile sizes. */
void rt_neon_dot_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out);
void rt_neon_i8mm_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out);

/* attn_neon.c: the float16/int8 KV-cache loops of kernel_table.h
 * (attn_scores_f16, attn_scores_i8, attn_accumulate_f16). */
void rt_neon_attn_scores_f16(const float *q, const uint16_t *k, int64_t nk, int64_t d,
                             float *scores);
void rt_neon_attn_scores_i8(const float *q, const uint8_t *k, int64_t nk, int64_t d,
                            float *scores);
void rt_neon_attn_accumulate_f16(float *o, const uint16_t *v, const float *p, int64_t nk,
                                 int64_t d);

/* act_neon.c: the swiglu and rmsnorm_row entries of kernel_table.h. */
void rt_neon_swiglu(const float *gate, const float *up, float *y, int64_t n);
void rt_neon_rmsnorm_row(const float *x, const float *scale, float *y, int64_t n,
                         float epsilon, float fd);

#endif
