/* The portable kernel table: plans for target "generic", and the oracle of
 * every SIMD table.  Its tile sizes are AVX2's (paper 002 Table 2), which
 * the scalar code does not care about; fp32 weights stay dense (f_hp 0). */
#include "q_generic.h"

const rt_kernels rt_kernels_generic = {
    "generic", 8, 4, 4, 0, 0, rt_q_generic_quantize_rows, rt_q_generic_qtile,
    NULL, NULL, /* qtile_block, qlinear_pair_task: qtile per tile */
    rt_ftile_generic,
    NULL, NULL, NULL, NULL, NULL, NULL, /* attention: ref_attention.c's portable loops */
    NULL, /* swiglu: rt_swiglu_generic */
    NULL, /* dequant_block: rt_dequant_block_generic */
    NULL, /* rmsnorm_row: rt_rmsnorm_row_generic */
    NULL, /* qlinear_gemv_pair: qtile per tile */
    NULL, NULL, NULL, NULL, /* attn_scores_rows, attn_rows_queries, attn_accumulate_rows,
                             * attn_exp_pair: row by row */
    NULL, /* ftile_pair: ftile per panel */
    NULL, /* attn_widen_rows: no rows loops */
    NULL, /* attn_block_lanes: no rows loops */
    "generic",
};
