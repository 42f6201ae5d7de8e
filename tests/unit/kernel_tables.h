/* The kernel tables a kernel test runs on this CPU (header-only). */
#ifndef LLMC_TEST_KERNEL_TABLES_H
#define LLMC_TEST_KERNEL_TABLES_H

#include "kernels/kernel_table.h"

/* The portable loops (NULL), the AVX2 table and the faster one this CPU
 * runs for avx2 plans (AVX-512), where built and supported: their count. */
static int x86_tables(const rt_kernels *tables[3])
{
    const rt_kernels *best = rt_kernels_for_target("avx2", NULL);
    int n = 0;
    tables[n++] = NULL;
    if (best && rt_kernels_for_isa("avx2", "avx2", NULL) != best)
        tables[n++] = rt_kernels_for_isa("avx2", "avx2", NULL);
    if (best)
        tables[n++] = best;
    return n;
}

#endif
