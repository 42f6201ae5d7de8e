/* The runtime's 64-bit division (rt_div64.h) against the C operators:
 *   - rt_udiv64_soft, the loop 32-bit targets run, on edge cases (a < b,
 *     b = 1, b = 2^32 +- 1, a = UINT64_MAX, values straddling 2^32, b above
 *     2^63) and on pseudo-random pairs of every bit width (fixed seed);
 *   - rt_udiv64 and rt_umod64 on the same pairs;
 *   - rt_dec_text (rt_msg.h), the decimal printer built on it, against
 *     snprintf. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rt_div64.h"
#include "rt_msg.h"
#include "tap.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;

/* splitmix64 */
static uint64_t next_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A random value of a random bit width (0 to 64 bits). */
static uint64_t next_value(void)
{
    unsigned width = (unsigned)(next_u64() % 65);
    return width ? next_u64() >> (64 - width) : 0;
}

static int bad_pairs; /* printed once each, the first few */

static void check_pair(uint64_t a, uint64_t b)
{
    uint64_t soft = rt_udiv64_soft(a, b), q = rt_udiv64(a, b), r = rt_umod64(a, b);
    if (soft == a / b && q == a / b && r == a % b)
        return;
    if (bad_pairs++ < 5)
        printf("# %" PRIu64 " / %" PRIu64 ": soft %" PRIu64 ", rt_udiv64 %" PRIu64
               ", rt_umod64 %" PRIu64 "\n", a, b, soft, q, r);
}

static const uint64_t edges[] = {
    0, 1, 2, 3, 7, 10, 0x7fffffffull, 0x80000000ull, 0xfffffffeull, 0xffffffffull,
    0x100000000ull, 0x100000001ull, 0x1ffffffffull, 0x200000000ull, 0xffffffff00000000ull,
    0x7fffffffffffffffull, 0x8000000000000000ull, 0x8000000000000001ull,
    0xfffffffffffffffeull, UINT64_MAX};

static void check_edges(void)
{
    size_t n = sizeof edges / sizeof edges[0];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (edges[j])
                check_pair(edges[i], edges[j]);
}

static int dec_mismatches(int64_t v)
{
    char want[32], got[RT_DEC_BYTES];
    snprintf(want, sizeof want, "%" PRId64, v);
    int bad = strcmp(rt_dec_text(v, false, got), want) != 0;
    snprintf(want, sizeof want, "%" PRIu64, (uint64_t)v);
    return bad + (strcmp(rt_dec_text(v, true, got), want) != 0);
}

int main(void)
{
    check_edges();
    CHECK(bad_pairs == 0, "rt_udiv64_soft, rt_udiv64, rt_umod64 on %d edge pairs",
          (int)(sizeof edges / sizeof edges[0] * (sizeof edges / sizeof edges[0] - 1)));
    for (int i = 0; i < 100000; i++) {
        uint64_t a = next_value(), b = next_value();
        check_pair(a, b ? b : 1);
    }
    CHECK(bad_pairs == 0, "... and on 100000 random pairs of every bit width");

    int bad = 0;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        bad += dec_mismatches((int64_t)edges[i]) + dec_mismatches(-(int64_t)(edges[i] >> 1));
    bad += dec_mismatches(INT64_MIN) + dec_mismatches(INT64_MAX) + dec_mismatches(-1);
    for (int i = 0; i < 10000; i++)
        bad += dec_mismatches((int64_t)next_value());
    CHECK(bad == 0, "rt_dec_text prints int64 and uint64 as snprintf does (%d mismatches)", bad);
    char text[RT_DEC_BYTES];
    CHECK(!strcmp(rt_dec_text(INT64_MIN, false, text), "-9223372036854775808") &&
              !strcmp(rt_dec_text(-1, true, text), "18446744073709551615"),
          "rt_dec_text: the longest texts fit RT_DEC_BYTES");
    return TAP_DONE();
}
