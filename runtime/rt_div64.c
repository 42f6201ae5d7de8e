#include "rt_div64.h"

uint64_t rt_udiv64_soft(uint64_t a, uint64_t b)
{
    if (!((a | b) >> 32))
        return (uint32_t)a / (uint32_t)b;
    /* Long division, bit i of a at step i: r <= a >> (i + 1) before the
     * step, so r << 1 never overflows. */
    uint64_t q = 0, r = 0;
    for (int i = 63; i >= 0; i--) {
        r = r << 1 | (a >> i & 1u);
        if (r >= b) {
            r -= b;
            q |= (uint64_t)1 << i;
        }
    }
    return q;
}
