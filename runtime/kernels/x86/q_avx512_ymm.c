/* The AVX-VNNI table's quantized micro-kernels (q_vnni_ymm.h) with
 * vpdpbusd EVEX-encoded on YMM registers (built with the AVX-512 flags;
 * the table is used only after rt_cpu_x86_avx512_vnni_ok(), which checks
 * AVX512VL as well).  AVX-512 CPUs without AVX-VNNI (Zen 4, Ice Lake and
 * Sapphire Rapids servers without it, Cascade Lake) thereby have a 256-bit
 * alternative to the ZMM kernels of q_avx512_vnni.c: on Zen 4, whose ZMM
 * instructions are two 256-bit halves, either can be the faster, and
 * `llmc tune` measures which.  The bits are the AVX2 table's, as the VEX
 * file's (tests/unit/test_rt_quant.c). */
#include "q_x86_tiles.h"

/* As q_avxvnni.c's dot4, EVEX-encoded (said, not left to the assembler:
 * a VEX vpdpbusd is AVX-VNNI, which Zen 4 lacks): any of the 32 registers. */
static inline __m256i dot4(__m256i acc, __m256i u8, __m256i s8)
{
    __asm__("%{evex%} vpdpbusd %[s8], %[u8], %[acc]" : [acc] "+v"(acc) : [u8] "v"(u8), [s8] "v"(s8));
    return acc;
}

#define YMM_NAME(name) rt_q_avx512ymm_##name
#include "q_vnni_ymm.h"
