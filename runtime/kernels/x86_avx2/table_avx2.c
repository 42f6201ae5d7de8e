/* The AVX2 kernel table (plans for target "avx2"): paper 002 Table 2's
 * x86 AVX2 tiles, derived in q_avx2.c.  f_hp, f_ep and ftile belong to the
 * fp32 work. */
#include "x86_avx2.h"

const rt_kernels rt_kernels_avx2 = {
    "avx2", 8, 4, 4, 0, 0, rt_q_avx2_quantize_rows, rt_q_avx2_qtile, NULL,
};
