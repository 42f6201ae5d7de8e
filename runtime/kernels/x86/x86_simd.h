/* Internal: the x86-64 AVX2 kernel table (built only for x86-64; its
 * kernel files with -mavx2 -mfma -mf16c, cpu_x86.c without, so the check
 * itself runs on any x86-64). */
#ifndef LLMC_RT_X86_AVX2_H
#define LLMC_RT_X86_AVX2_H

#include <stdbool.h>
#include <stddef.h>

#include "../kernel_table.h"

/* table_avx2.c: hp 8, lp 4, ep 4 (q_x86_tiles.h says why); the second
 * table is the first with the AVX-512 VNNI qtile, the third with the
 * AVX-VNNI one, the fourth with the same kernels EVEX-encoded (AVX-512
 * VNNI on YMM). */
extern const rt_kernels rt_kernels_avx2;
extern const rt_kernels rt_kernels_avx2_avx512;
extern const rt_kernels rt_kernels_avx2_avxvnni;
extern const rt_kernels rt_kernels_avx2_avx512ymm;

/* cpu_x86.c: true when the CPU and the OS support AVX2, FMA and F16C (the
 * YMM state saved by XSAVE). */
bool rt_cpu_x86_avx2_ok(void);
/* The names of what is missing, comma-separated, into buf (cap bytes, NUL
 * terminated; "" when nothing is). */
void rt_cpu_x86_avx2_missing(char *buf, size_t cap);
/* cpu_x86.c: true when rt_cpu_x86_avx2_ok() and the CPU and the OS support
 * AVX512F, AVX512BW, AVX512VL and AVX512_VNNI (the ZMM state saved). */
bool rt_cpu_x86_avx512_vnni_ok(void);
/* cpu_x86.c: true when rt_cpu_x86_avx2_ok() and the CPU has AVX-VNNI
 * (vpdpbusd on YMM, VEX-encoded). */
bool rt_cpu_x86_avxvnni_ok(void);
/* cpu_x86.c: the i-th table faster than rt_kernels_avx2 that this CPU runs
 * (bitwise its outputs), the fastest first; NULL past the last. */
const rt_kernels *rt_cpu_x86_faster_table(int i);
/* cpu_x86.c: rt_gemv_prefetch_default on this CPU (by vendor). */
uint32_t rt_cpu_x86_gemv_prefetch(void);

/* q_avx2_quantize.c: rt_kernels.quantize_rows (kernel_table.h). */
void rt_q_avx2_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                             int64_t r0, int64_t r1, float scale, uint8_t *xq);
/* q_avx2.c, q_avx512_vnni.c (AVX512_VNNI_FLAGS as well): rt_kernels.qtile. */
void rt_q_avx2_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out);
void rt_q_avx512_vnni_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                            float *out);
/* q_avx2.c, q_avxvnni.c (AVXVNNI_FLAGS as well): rows == 1 of W row tiles
 * ht and ht + 1: out[0..8), out[8..16) */
void rt_q_avx2_gemv_pair(const rt_qtile_args *a, int64_t et, int64_t ht, float *out);
void rt_q_avxvnni_gemv_pair(const rt_qtile_args *a, int64_t et, int64_t ht, float *out);
void rt_q_avx512ymm_gemv_pair(const rt_qtile_args *a, int64_t et, int64_t ht, float *out);
/* q_avx2.c, q_avxvnni.c: rows 1..4 of activation tile et by W row tiles ht
 * and ht + 1 (bits 4: each activation word broadcast once for both): tile
 * ht's outputs at out[0..ep * hp), tile ht + 1's after them (qtile's
 * layout twice). */
void rt_q_avx2_qtile_pair(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                          float *out);
void rt_q_avxvnni_qtile_pair(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                             float *out);
void rt_q_avx512ymm_qtile_pair(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                               float *out);
/* q_avxvnni.c, q_avx512_ymm.c: rt_kernels.qtile (vpdpbusd on YMM, VEX- and
 * EVEX-encoded). */
void rt_q_avxvnni_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out);
void rt_q_avx512ymm_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out);
/* q_avx512_vnni.c: rt_kernels.qtile_block (8 or 16 activation rows by 16
 * W rows). */
void rt_q_avx512_vnni_qtile_block(const rt_qtile_args *a, int64_t et, int tiles, int64_t ht,
                                  float *out);
/* q_avx2_pairs.c, q_avx512_pairs.c (AVX512_VNNI_FLAGS as well):
 * rt_kernels.qlinear_pair_task, the GEMM tasks over pairs of W row tiles
 * (qtile twice; qtile_block) with streamed stores; q_avx2_pairs.c:
 * rt_kernels.qlinear_gemv_pair (rt_q_avx2_gemv_pair, portable stores). */
void rt_qlinear_gemv_pair_avx2(const rt_qlinear_job *J, ptrdiff_t ht);
void rt_qlinear_pair_task_avx2(const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1);
/* q_avx2_pairs.c: the same walks over the YMM vpdpbusd kernels. */
void rt_qlinear_gemv_pair_avxvnni(const rt_qlinear_job *J, ptrdiff_t ht);
void rt_qlinear_pair_task_avxvnni(const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1);
void rt_qlinear_gemv_pair_avx512ymm(const rt_qlinear_job *J, ptrdiff_t ht);
void rt_qlinear_pair_task_avx512ymm(const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1);
void rt_qlinear_pair_task_avx512(const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1);

/* dequant_avx2.c: rt_kernels.dequant_block. */
void rt_dequant_block_avx2(const uint8_t *block, const rt_qweight_shape *ws, int64_t i0,
                           int64_t i1, float *out, int64_t stride);
/* act_avx2.c: rt_kernels.swiglu and rmsnorm_row. */
void rt_swiglu_avx2(const float *gate, const float *up, float *y, int64_t n);
void rt_rmsnorm_row_avx2(const float *x, const float *scale, float *y, int64_t n,
                         float epsilon, float fd);
/* act_avx512.c (AVX512_VNNI_FLAGS as well): rt_kernels.swiglu, each value
 * the bits of rt_swiglu_avx2. */
void rt_swiglu_avx512(const float *gate, const float *up, float *y, int64_t n);

/* attn_avx2.c: rt_kernels.attn_scores and attn_accumulate. */
void rt_attn_scores_avx2(const float *q, const float *k, int64_t nk, int64_t d, float *scores);
void rt_attn_accumulate_avx2(float *o, const float *v, const float *p, int64_t nk, int64_t d);
/* attn_avx2.c: the same over float16 (F16C) and int8 cache rows. */
void rt_attn_scores_f16_avx2(const float *q, const uint16_t *k, int64_t nk, int64_t d,
                             float *scores);
void rt_attn_scores_i8_avx2(const float *q, const uint8_t *k, int64_t nk, int64_t d,
                            float *scores);
void rt_attn_accumulate_f16_avx2(float *o, const uint16_t *v, const float *p, int64_t nk,
                                 int64_t d);
/* attn_avx512.c (AVX512_VNNI_FLAGS as well): rt_kernels.attn_scores_rows,
 * each score the bits of the attn_avx2.c loop of its dtype. */
void rt_attn_scores_rows_avx512(const rt_attn_rows_q *q, int nr, const uint8_t *k, int dtype,
                                int64_t nk, int64_t d, float *s, rt_attn_prefetch *pf);
/* attn_avx512.c: rt_kernels.attn_rows_queries, the layout of
 * rt_attn_scores_rows_avx512. */
void rt_attn_rows_queries_avx512(const float *const *q, int nr, int64_t d, rt_attn_rows_q *out);
/* attn_avx512.c: rt_kernels.attn_accumulate_rows, each element the bits
 * of the attn_avx2.c loop of its dtype. */
void rt_attn_accumulate_rows_avx512(float *const *o, const float *p, int nr, const uint8_t *v,
                                    int dtype, int64_t nk, int64_t d, rt_attn_prefetch *pf);
/* attn_avx512.c: rt_kernels.attn_exp_pair, each value the bits of
 * rt_attn_exp_avx2. */
void rt_attn_exp_pair_avx512(float *pa, float *pb, int64_t n, float off_a, float off_b);
/* attn_avx512.c: rt_kernels.attn_widen_rows. */
void rt_attn_widen_rows_avx512(const uint8_t *rows, int dtype, uint64_t row_bytes, int64_t n,
                               int64_t d, float *out);
/* attn_avx512.c: rt_kernels.attn_block_lanes. */
void rt_attn_block_lanes_avx512(rt_attn_lanes *L, const float *k, const float *v,
                                const float *scale, int64_t t0, int64_t nk);
/* attn_avx2.c: rt_kernels.attn_exp (8 lanes, FMA). */
void rt_attn_exp_avx2(float *p, int64_t n, float off);

/* f_avx2.c, f_avx512.c (-mavx512f as well): rt_kernels.ftile for hp = 16,
 * rows <= 6, and f_avx512.c's rt_kernels.ftile_pair. */
void rt_ftile_avx2(const float *x, int64_t x_stride, const float *panel, int hp, int64_t kc,
                   int rows, float *acc);
void rt_ftile_avx512(const float *x, int64_t x_stride, const float *panel, int hp, int64_t kc,
                     int rows, float *acc);
void rt_ftile_pair_avx512(const float *x, int64_t x_stride, const float *panel_a,
                          const float *panel_b, int hp, int64_t kc, int rows, float *acc_a,
                          float *acc_b);

#endif
