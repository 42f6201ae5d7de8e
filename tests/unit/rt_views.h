/* Views the kernel tests hand to the k_* entry points. */
#ifndef LLMC_TEST_RT_VIEWS_H
#define LLMC_TEST_RT_VIEWS_H

#include <string.h>

#include "kernels/kernels.h"

/* A float32 [rows, cols] view of data. */
static inline rt_view test_view_f32(float *data, int64_t rows, int64_t cols)
{
    rt_view v;
    memset(&v, 0, sizeof v);
    v.dtype = LLMC_RT_F32;
    v.rank = 2;
    v.dims[0] = rows;
    v.dims[1] = cols;
    v.data = data;
    return v;
}

#endif
