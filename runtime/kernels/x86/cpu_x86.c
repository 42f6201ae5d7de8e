/* Does this x86-64 CPU run the AVX2 table?  cpuid and xgetbv only: no libc,
 * no globals.  Built WITHOUT -mavx2 (Makefile): this is the code that runs
 * before anyone knows whether AVX instructions exist. */
#include <cpuid.h>

#include "x86_simd.h"

enum {
    MISSING_AVX2 = 1, MISSING_FMA = 2, MISSING_F16C = 4, MISSING_AVX = 8, MISSING_YMM_STATE = 16
};

/* XCR0: which register states the OS saves; bits 1 (SSE) and 2 (AVX). */
static unsigned xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return lo;
}

static unsigned missing_mask(void)
{
    unsigned a, b, c, d, missing = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return MISSING_AVX2 | MISSING_FMA | MISSING_F16C | MISSING_AVX | MISSING_YMM_STATE;
    if (!(c & 1u << 12))
        missing |= MISSING_FMA;
    if (!(c & 1u << 28))
        missing |= MISSING_AVX;
    if (!(c & 1u << 29))
        missing |= MISSING_F16C;
    /* OSXSAVE (bit 27) says xgetbv may be executed at all */
    if (!(c & 1u << 27) || (xcr0() & 6u) != 6u)
        missing |= MISSING_YMM_STATE;
    if (__get_cpuid_max(0, NULL) < 7 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) ||
        !(b & 1u << 5))
        missing |= MISSING_AVX2;
    return missing;
}

bool rt_cpu_x86_avx2_ok(void)
{
    return missing_mask() == 0;
}

/* CPUID leaf 7: EBX bits 16 (AVX512F), 30 (AVX512BW), 31 (AVX512VL), ECX
 * bit 11 (AVX512_VNNI); XCR0 bits 5-7: the OS saves the opmask and all 32
 * ZMM registers. */
bool rt_cpu_x86_avx512_vnni_ok(void)
{
    unsigned a, b, c, d;
    const unsigned ebx = 1u << 16 | 1u << 30 | 1u << 31;
    return missing_mask() == 0 && __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
           (b & ebx) == ebx && (c & 1u << 11) && (xcr0() & 0xe6u) == 0xe6u;
}

/* CPUID leaf 7 subleaf 1: EAX bit 4 (AVX-VNNI); YMM state as for AVX2. */
bool rt_cpu_x86_avxvnni_ok(void)
{
    unsigned a, b, c, d;
    return missing_mask() == 0 && __get_cpuid_max(0, NULL) >= 7 &&
           __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & 1u << 4);
}

/* AVX-512 VNNI first: a ZMM vpdpbusd does twice the work of a YMM one
 * (where it is not two halves, as on Zen 4: `llmc tune` measures). */
const rt_kernels *rt_cpu_x86_faster_table(int i)
{
    const rt_kernels *runs[3];
    int n = 0;
    if (rt_cpu_x86_avx512_vnni_ok()) {
        runs[n++] = &rt_kernels_avx2_avx512;
        runs[n++] = &rt_kernels_avx2_avx512ymm;
    }
    if (rt_cpu_x86_avxvnni_ok())
        runs[n++] = &rt_kernels_avx2_avxvnni;
    return i >= 0 && i < n ? runs[i] : NULL;
}

void rt_cpu_x86_avx2_missing(char *buf, size_t cap)
{
    static const char *const names[] = {"AVX2", "FMA", "F16C", "AVX",
                                        "OS support for YMM registers (XSAVE)"};
    unsigned missing = missing_mask();
    size_t len = 0;
    if (!cap)
        return;
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++) {
        if (!(missing & 1u << i))
            continue;
        for (const char *p = len ? ", " : ""; *p && len + 1 < cap; p++)
            buf[len++] = *p;
        for (const char *p = names[i]; *p && len + 1 < cap; p++)
            buf[len++] = *p;
    }
    buf[len] = '\0';
}

/* How far ahead the decode GEMV prefetches, by vendor (`llmc tune`
 * measures it per machine: Plan.gemv_prefetch).  The software prefetches
 * must run ahead of the loads by about the bytes the core streams in one
 * memory latency, but no further than the hardware prefetchers keep up:
 * a prefetch that reaches memory before them holds one of the core's ~16
 * line fill buffers for the whole latency.  Measured with `make
 * bench-kernels` (GEMV against a plain read of the same bytes, weights in
 * 2 MiB pages): on an Intel Xeon (family 6 model 167, AVX-512), 2 KiB
 * 84-85 % on one thread and 77-81 % on two, 8 KiB 57-67 % and 65-66 %;
 * 1 and 3 KiB in between.  On AMD, Zen 1 and 3 gave 95-105 % from 2 KiB
 * to 4 KiB, and Zen 5, whose core streams faster, 24-30 GB/s at 2 KiB and
 * 35-37 GB/s at 8 KiB (the whole model's decode 1.2x on one thread). */
uint32_t rt_cpu_x86_gemv_prefetch(void)
{
    unsigned a, b, c, d;
    bool amd = __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u /* "Auth" */ &&
               d == 0x69746e65u /* "enti" */ && c == 0x444d4163u /* "cAMD" */;
    return amd ? 8192 : 2048;
}
