/* Internal: what the x86 SwiGLU loops (act_avx2.c, act_avx512.c) share:
 * the constants of their exp(t), t <= 0, so both give each value the same
 * bits.  Range reduction t = n ln2 + r, |r| <= ln2 / 2, with ln2 in two
 * parts (the high one exact in n * hi), and exp(r) = 1 + r + r^2 p(r), p
 * of degree 5 (the Cephes expf coefficients, ~1 ulp). */
#ifndef LLMC_RT_ACT_X86_H
#define LLMC_RT_ACT_X86_H

#define SILU_EXP_LOWEST (-103.972077f) /* ln(2^-150): below it exp is 0 */
#define SILU_EXP_LOG2E 1.44269504088896341f
#define SILU_EXP_LN2_HI 0.693359375f
#define SILU_EXP_LN2_LO (-2.12194440e-4f)
/* p(r) by Horner, the highest power first */
#define SILU_EXP_POLY {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, \
                       4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f}
#define SILU_EXP_POLY_TERMS 6

#endif
