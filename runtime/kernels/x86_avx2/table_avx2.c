/* The AVX2 kernel table (plans for target "avx2"): paper 002 Table 2's
 * x86 AVX2 tiles, derived in q_avx2.c; the fp32 tiles (16 x 6) in f_avx2.c.
 * tests/unit/test_rt_quant.c checks them against plan_enums.h's target list. */
#include "x86_avx2.h"

const rt_kernels rt_kernels_avx2 = {
    "avx2", 8, 4, 4, 16, 6, rt_q_avx2_quantize_rows, rt_q_avx2_qtile, rt_ftile_avx2,
    rt_attn_scores_avx2, rt_attn_accumulate_avx2, rt_attn_scores_f16_avx2,
    rt_attn_scores_i8_avx2, rt_attn_accumulate_f16_avx2,
    rt_swiglu_avx2, rt_dequant_block_avx2,
};
