/* The AVX2 kernel tables (plans for target "avx2"): paper 002 Table 2's
 * x86 AVX2 tiles, derived in q_x86_tiles.h; the fp32 tiles (16 x 6) in
 * f_avx2.c.  tests/unit/test_rt_quant.c checks them against plan_enums.h's
 * target list.  A CPU with AVX-512 VNNI runs the same plans with the table
 * whose quantized GEMV/GEMM use vpdpbusd on ZMM registers (q_avx512_vnni.c),
 * whose fp32 panels are ZMM FMAs (f_avx512.c), whose attention takes a
 * GQA group's query rows per sweep over the keys (attn_avx512.c) and
 * whose SwiGLU runs on 16 lanes (act_avx512.c): bitwise the same outputs,
 * about half the instructions. */
#include "x86_simd.h"

const rt_kernels rt_kernels_avx2 = {
    "avx2", 8, 4, 4, 16, 6, rt_q_avx2_quantize_rows, rt_q_avx2_qtile, NULL,
    rt_qlinear_pair_task_avx2, rt_ftile_avx2,
    rt_attn_scores_avx2, rt_attn_accumulate_avx2, rt_attn_scores_f16_avx2,
    rt_attn_scores_i8_avx2, rt_attn_accumulate_f16_avx2, rt_attn_exp_avx2,
    rt_swiglu_avx2, rt_dequant_block_avx2, rt_rmsnorm_row_avx2, rt_qlinear_gemv_pair_avx2,
    NULL, NULL, NULL, NULL, /* attn_scores_rows, attn_rows_queries, attn_accumulate_rows,
                             * attn_exp_pair: row by row */
    NULL, /* ftile_pair: ftile per panel (16 YMM registers hold one panel's 2 x 6) */
    NULL, /* attn_widen_rows: no rows loops */
    NULL, /* attn_block_lanes: no rows loops */
    "avx2",
};

const rt_kernels rt_kernels_avx2_avx512 = {
    "avx2", 8, 4, 4, 16, 6, rt_q_avx2_quantize_rows, rt_q_avx512_vnni_qtile,
    rt_q_avx512_vnni_qtile_block, rt_qlinear_pair_task_avx512, rt_ftile_avx512,
    rt_attn_scores_avx2, rt_attn_accumulate_avx2, rt_attn_scores_f16_avx2,
    rt_attn_scores_i8_avx2, rt_attn_accumulate_f16_avx2, rt_attn_exp_avx2,
    rt_swiglu_avx512, rt_dequant_block_avx2, rt_rmsnorm_row_avx2,
    NULL, /* qlinear_gemv_pair: qtile per tile.  Two tiles per call in the
           * lanes of qtile_block ran 1.27x as fast with the weights in L2 but
           * 0.92x from memory on one thread, Intel Xeon family 6 model 167,
           * with every second tile's head prefetched late (rt_pair_prefetch
           * now): docs/benchmarks.md */
    rt_attn_scores_rows_avx512, rt_attn_rows_queries_avx512, rt_attn_accumulate_rows_avx512,
    rt_attn_exp_pair_avx512,
    rt_ftile_pair_avx512, rt_attn_widen_rows_avx512, rt_attn_block_lanes_avx512,
    "avx2+avx512vnni",
};

/* AVX-VNNI without AVX-512: the AVX2 table with vpdpbusd on YMM for the
 * quantized GEMV/GEMM (q_avxvnni.c), bitwise the same outputs. */
const rt_kernels rt_kernels_avx2_avxvnni = {
    "avx2", 8, 4, 4, 16, 6, rt_q_avx2_quantize_rows, rt_q_avxvnni_qtile, NULL,
    rt_qlinear_pair_task_avxvnni, rt_ftile_avx2,
    rt_attn_scores_avx2, rt_attn_accumulate_avx2, rt_attn_scores_f16_avx2,
    rt_attn_scores_i8_avx2, rt_attn_accumulate_f16_avx2, rt_attn_exp_avx2,
    rt_swiglu_avx2, rt_dequant_block_avx2, rt_rmsnorm_row_avx2, rt_qlinear_gemv_pair_avxvnni,
    NULL, NULL, NULL, NULL, /* attn_scores_rows, attn_rows_queries, attn_accumulate_rows,
                             * attn_exp_pair: row by row */
    NULL, /* ftile_pair: ftile per panel */
    NULL, /* attn_widen_rows: no rows loops */
    NULL, /* attn_block_lanes: no rows loops */
    "avx2+avxvnni",
};

/* AVX-512 VNNI on YMM: the AVX-VNNI table's kernels EVEX-encoded
 * (q_avx512_ymm.c), for AVX-512 CPUs without AVX-VNNI; bitwise the same
 * outputs. */
const rt_kernels rt_kernels_avx2_avx512ymm = {
    "avx2", 8, 4, 4, 16, 6, rt_q_avx2_quantize_rows, rt_q_avx512ymm_qtile, NULL,
    rt_qlinear_pair_task_avx512ymm, rt_ftile_avx2,
    rt_attn_scores_avx2, rt_attn_accumulate_avx2, rt_attn_scores_f16_avx2,
    rt_attn_scores_i8_avx2, rt_attn_accumulate_f16_avx2, rt_attn_exp_avx2,
    rt_swiglu_avx2, rt_dequant_block_avx2, rt_rmsnorm_row_avx2, rt_qlinear_gemv_pair_avx512ymm,
    NULL, NULL, NULL, NULL, /* attn_scores_rows, attn_rows_queries, attn_accumulate_rows,
                             * attn_exp_pair: row by row */
    NULL, /* ftile_pair: ftile per panel */
    NULL, /* attn_widen_rows: no rows loops */
    NULL, /* attn_block_lanes: no rows loops */
    "avx2+avx512vnni-ymm",
};
