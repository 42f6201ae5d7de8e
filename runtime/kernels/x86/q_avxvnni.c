/* AVX-VNNI quantized micro-kernels: the AVX2 table's tiles and drivers
 * (q_x86_tiles.h, q_x86_qtile.h) with each group's int8 dot products formed
 * by vpdpbusd on YMM registers (VEX-encoded, built with -mavxvnni as well
 * as the AVX2 flags; the table is used only after rt_cpu_x86_avxvnni_ok()).
 * CPUs with AVX-VNNI and no AVX-512 (Intel Alder Lake and later client and
 * embedded parts) run the "avx2" plans with it; on a CPU with both it is
 * the 256-bit alternative to the ZMM kernels of q_avx512_vnni.c.
 *
 * vpdpbusd multiplies unsigned bytes by signed ones and adds each lane's 4
 * products to its int32 in one instruction, without the int16 step of
 * vpmaddubsw:
 * - bits 4: the nibbles (0..15) are the unsigned operand as they are;
 * - bits 8: w + 128 (0..255, w ^ 0x80) is, and 128 times the group's sum of
 *   activation q is subtracted after (exact for every int8 w, -128
 *   included).
 * The products are exact, so each group's int32 values are those of the
 * AVX2 file, and the float steps are the shared ones: the outputs are
 * bitwise the AVX2 table's (tests/unit/test_rt_quant.c).
 *
 * Counted in gcc 12's objdump of this file, per 32 weight bytes of one row
 * tile and one activation row: bits 4 2 vpdpbusd, 2 vpbroadcastd, and the
 * unpack (vpsrlw, 2 vpand) shared by the rows of a tile; bits 8 1 vpdpbusd,
 * 1 vpbroadcastd and the vpxor shared likewise.  The AVX2 file needs 4
 * vpmaddubsw-side instructions per 32 bytes at bits 8 (vpsignb, vpmaddubsw,
 * vpmaddwd, vpaddd) and 10.75 per 32 bytes at bits 4 in its GEMV.  The
 * 8-bit GEMM of two W row tiles (w8_group_rows_pair) is, per tile of each,
 * 8 vpdpbusd, 2 vpxor with the weight loads and 4 vpbroadcastd loads: at
 * most 80% of the vpdpbusd peak on the two ports both use. */
#include "q_x86_tiles.h"

/* acc + the 4-byte dot products of u8 (unsigned) and s8 (signed) per lane.
 * Written out because gcc 12 copies the accumulator into a new register
 * before every _mm256_dpbusd_avx_epi32 and back after it (6 vmovdqa per 4
 * vpdpbusd in the 4-bit GEMV loop, objdump); tied as "+x" it stays put. */
static inline __m256i dot4(__m256i acc, __m256i u8, __m256i s8)
{
    __asm__("%{vex%} vpdpbusd %[s8], %[u8], %[acc]" : [acc] "+x"(acc) : [u8] "x"(u8), [s8] "x"(s8));
    return acc;
}

#define YMM_NAME(name) rt_q_avxvnni_##name
#include "q_vnni_ymm.h"
