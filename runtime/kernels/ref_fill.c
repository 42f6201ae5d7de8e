/* Fill and Range. */
#include "kernels.h"
#include "rt_msg.h"

llmc_rt_status k_fill(uint64_t value_bits, rt_view *y, llmc_rt_error *err)
{
    if (!k_dtype_size(y->dtype))
        return rt_fail(err, LLMC_RT_E_EXEC, "unsupported dtype %d", RT_N(y->dtype), NULL);
    int64_t n = k_count(y);
    if (y->dtype == LLMC_RT_F32) {
        float v = k_f64_to_f32(value_bits);
        for (int64_t i = 0; i < n; i++)
            ((float *)y->data)[i] = v;
    } else {
        /* bool: any value but +-0 is true, NaN included */
        int64_t v = y->dtype == LLMC_RT_BOOL ? (value_bits << 1) != 0 : k_f64_to_i64(value_bits);
        for (int64_t i = 0; i < n; i++)
            k_store_i(y, i, v);
    }
    return LLMC_RT_OK;
}

static bool range_operand_ok(const rt_view *t, int dtype)
{
    return t->dtype == dtype && k_count(t) == 1;
}

llmc_rt_status k_range(const rt_view *start, const rt_view *limit, const rt_view *delta,
                       rt_view *y, llmc_rt_error *err)
{
    int dt = y->dtype;
    if ((dt != LLMC_RT_F32 && dt != LLMC_RT_I32 && dt != LLMC_RT_I64) ||
        !range_operand_ok(start, dt) || !range_operand_ok(limit, dt) ||
        !range_operand_ok(delta, dt) || y->rank != 1)
        return rt_fail(err, LLMC_RT_E_EXEC, "Range needs one-element start, limit and delta "
                       "of the 1-D output's dtype (float32, int32 or int64)", NULL, NULL);
    int64_t n = y->dims[0];
    if (dt == LLMC_RT_F32) {
        float s = k_load_f(start, 0), d = k_load_f(delta, 0);
        for (int64_t i = 0; i < n; i++)
            k_store_f(y, i, s + k_i64_to_f32(i) * d);
    } else {
        uint64_t s = (uint64_t)k_load_i(start, 0), d = (uint64_t)k_load_i(delta, 0);
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = s + (uint64_t)i * d; /* wraps like the int type would */
            k_store_i(y, i, v <= INT64_MAX ? (int64_t)v : -(int64_t)~v - 1);
        }
    }
    return LLMC_RT_OK;
}
