/* 64-bit unsigned division for the runtime core.
 *
 * A Cortex-M has no 64-bit divide instruction: a `/` or `%` on int64_t or
 * uint64_t there calls libgcc's __aeabi_ldivmod / __aeabi_uldivmod, whose
 * __udivmoddi4 alone is 0.7 KB of .text.  The runtime divides 64-bit values
 * only where it checks a plan or sets up a call (sizes, overflow bounds,
 * tile counts, a message's digits) and in the integer Div op itself;
 * kernels index what lies in memory pointer-wide (ptrdiff_t, size_t), so no
 * loop divides a 64-bit index.  Those few divisions take rt_udiv64: the
 * native `/` on 64-bit hosts, a short loop on 32-bit targets. */
#ifndef LLMC_RT_DIV64_H
#define LLMC_RT_DIV64_H

#include <stdint.h>

/* a / b for b > 0 by shift and subtract (one quotient bit per step; one
 * 32-bit division when both fit).  Built on every target so the host tests
 * check it. */
uint64_t rt_udiv64_soft(uint64_t a, uint64_t b);

/* a / b for b > 0. */
static inline uint64_t rt_udiv64(uint64_t a, uint64_t b)
{
#if UINTPTR_MAX > 0xffffffffu
    return a / b;
#else
    return rt_udiv64_soft(a, b);
#endif
}

/* a % b for b > 0. */
static inline uint64_t rt_umod64(uint64_t a, uint64_t b)
{
    return a - rt_udiv64(a, b) * b;
}

#endif
