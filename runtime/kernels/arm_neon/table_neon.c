/* The NEON kernel tables (q_neon.h).  Tile sizes: paper 002 Table 2, derived
 * from the register budget in q_neon_dot.c and q_neon_i8mm.c.  No fp32
 * weight tiles yet (f_hp 0: fp32 plans keep dense weights). */
#include "q_neon.h"

const rt_kernels rt_kernels_neon_dot = {
    "neon-dot", 8, 4, 12, 0, 0, rt_neon_quantize_rows, rt_neon_dot_qtile,
    NULL, NULL, /* qtile_block, qlinear_pair_task: qtile per tile */
    NULL, /* ftile: dense fp32 weights */
    NULL, NULL, /* float32 attention: ref_attention.c's portable loops */
    rt_neon_attn_scores_f16, rt_neon_attn_scores_i8, rt_neon_attn_accumulate_f16,
    NULL, /* attn_exp: the portable loop */
    rt_neon_swiglu, NULL, /* dequant_block: rt_dequant_block_generic */
    rt_neon_rmsnorm_row,
    NULL, /* qlinear_gemv_pair: qtile per tile */
    NULL, NULL, NULL, NULL, /* attn_scores_rows, attn_rows_queries, attn_accumulate_rows,
                             * attn_exp_pair: row by row */
    NULL, /* ftile_pair: no fp32 tiles */
    NULL, /* attn_widen_rows: no rows loops */
    NULL, /* attn_block_lanes: no rows loops */
    "neon-dot",
};

const rt_kernels rt_kernels_neon_i8mm = {
    "neon-i8mm", 8, 8, 10, 0, 0, rt_neon_quantize_rows, rt_neon_i8mm_qtile,
    NULL, NULL, /* qtile_block, qlinear_pair_task: qtile per tile */
    NULL, /* ftile: dense fp32 weights */
    NULL, NULL, rt_neon_attn_scores_f16, rt_neon_attn_scores_i8, rt_neon_attn_accumulate_f16,
    NULL, /* attn_exp: the portable loop */
    rt_neon_swiglu, NULL, /* dequant_block: rt_dequant_block_generic */
    rt_neon_rmsnorm_row,
    NULL, /* qlinear_gemv_pair: qtile per tile */
    NULL, NULL, NULL, NULL, /* attn_scores_rows, attn_rows_queries, attn_accumulate_rows,
                             * attn_exp_pair: row by row */
    NULL, /* ftile_pair: no fp32 tiles */
    NULL, /* attn_widen_rows: no rows loops */
    NULL, /* attn_block_lanes: no rows loops */
    "neon-i8mm",
};
