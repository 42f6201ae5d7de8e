/* Unicode tables lookups (bisection over generated ranges) and NFC:
 * canonical decomposition, canonical ordering, canonical composition
 * (UAX #15), with the Hangul syllables computed rather than tabled. */
#include "unicode.h"

#include "unicode_tables.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

enum { HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,
       HANGUL_LC = 19, HANGUL_VC = 21, HANGUL_TC = 28, HANGUL_NC = 21 * 28, HANGUL_SC = 19 * 21 * 28 };

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

unsigned rt_uni_class(uint32_t cp)
{
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return UNI_LETTER;
        if (cp >= '0' && cp <= '9') return UNI_NUMBER;
        return (cp == ' ' || (cp >= 9 && cp <= 13)) ? UNI_SPACE : 0;
    }
    unsigned c = 0;
    if (in_ranges(unicode_letter, N_OF(unicode_letter), cp)) c |= UNI_LETTER;
    else if (in_ranges(unicode_number, N_OF(unicode_number), cp)) c |= UNI_NUMBER;
    if (in_ranges(unicode_space, N_OF(unicode_space), cp)) c |= UNI_SPACE;
    return c;
}

uint32_t rt_uni_next(const uint8_t *p, size_t n, size_t *len)
{
    uint8_t b = p[0];
    if (b < 0x80 || n < 2) { *len = 1; return b; }
    if (b < 0xE0) { *len = 2; return (uint32_t)(b & 0x1F) << 6 | (p[1] & 0x3Fu); }
    if (b < 0xF0 || n < 4) {
        *len = 3;
        return n < 3 ? 0xFFFD : (uint32_t)(b & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3Fu);
    }
    *len = 4;
    return (uint32_t)(b & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3Fu);
}

size_t rt_uni_put(uint8_t *p, uint32_t cp)
{
    if (cp < 0x80) { p[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { p[0] = (uint8_t)(0xC0 | cp >> 6); p[1] = (uint8_t)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        p[0] = (uint8_t)(0xE0 | cp >> 12); p[1] = (uint8_t)(0x80 | (cp >> 6 & 63));
        p[2] = (uint8_t)(0x80 | (cp & 63)); return 3;
    }
    p[0] = (uint8_t)(0xF0 | cp >> 18); p[1] = (uint8_t)(0x80 | (cp >> 12 & 63));
    p[2] = (uint8_t)(0x80 | (cp >> 6 & 63)); p[3] = (uint8_t)(0x80 | (cp & 63)); return 4;
}

/* Length of the well-formed sequence at p (Unicode table 3-7), 0 if the
 * bytes there are not one. */
static size_t wellformed_len(const uint8_t *p, size_t n)
{
    uint8_t b = p[0];
    if (b < 0x80) return 1;
    size_t need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (!need) return 0;
    uint8_t lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    uint8_t hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    for (size_t i = 1; i < need; i++) {
        if (i >= n || p[i] < lo || p[i] > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
    }
    return need;
}

/* Bytes of the maximal subpart of an ill-formed sequence at p: the lead
 * byte plus the continuation bytes that were valid so far (at least 1). */
static size_t maximal_subpart(const uint8_t *p, size_t n)
{
    uint8_t b = p[0];
    size_t need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    uint8_t lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    uint8_t hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    size_t i = 1;
    while (i < need && i < n && p[i] >= lo && p[i] <= hi) {
        i++;
        lo = 0x80;
        hi = 0xBF;
    }
    return i;
}

size_t rt_uni_sanitize(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t i = 0, o = 0;
    while (i < n) {
        size_t len = wellformed_len(src + i, n - i);
        if (len) {
            for (size_t k = 0; k < len; k++) dst[o++] = src[i + k];
            i += len;
        } else {
            o += rt_uni_put(dst + o, 0xFFFD);
            i += maximal_subpart(src + i, n - i);
        }
    }
    return o;
}

static unsigned ccc_of(uint32_t cp)
{
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = N_OF(unicode_ccc);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < unicode_ccc[mid][0]) hi = mid;
        else if (cp > unicode_ccc[mid][1]) lo = mid + 1;
        else return unicode_ccc[mid][2];
    }
    return 0;
}

static const uint32_t *decomp_of(uint32_t cp)
{
    size_t lo = 0, hi = N_OF(unicode_decomp);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < unicode_decomp[mid][0]) hi = mid;
        else if (cp > unicode_decomp[mid][0]) lo = mid + 1;
        else return unicode_decomp[mid];
    }
    return 0;
}

/* Appends the full canonical decomposition of cp to out; returns count. */
static size_t decompose(uint32_t cp, uint32_t *out)
{
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SC) {
        uint32_t s = cp - HANGUL_S;
        out[0] = HANGUL_L + s / HANGUL_NC;
        out[1] = HANGUL_V + s % HANGUL_NC / HANGUL_TC;
        if (s % HANGUL_TC == 0) return 2;
        out[2] = HANGUL_T + s % HANGUL_TC;
        return 3;
    }
    const uint32_t *d = cp >= 0xC0 ? decomp_of(cp) : 0;
    if (!d) { out[0] = cp; return 1; }
    size_t n = decompose(d[1], out);
    if (d[2]) n += decompose(d[2], out + n);
    return n;
}

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LC && b >= HANGUL_V && b < HANGUL_V + HANGUL_VC)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VC + (b - HANGUL_V)) * HANGUL_TC;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SC && (a - HANGUL_S) % HANGUL_TC == 0
        && b > HANGUL_T && b < HANGUL_T + HANGUL_TC)
        return a + (b - HANGUL_T);
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = N_OF(unicode_comp);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (key < unicode_comp[mid][0]) hi = mid;
        else if (key > unicode_comp[mid][0]) lo = mid + 1;
        else return (uint32_t)unicode_comp[mid][1];
    }
    return 0;
}

/* Stable sort of a run of non-starters by combining class: insertion sort
 * for short runs, bottom-up merge sort (tmp as large as the run) beyond, so
 * a long run of marks costs n log n, not n^2. */
static void sort_by_ccc(uint32_t *a, size_t n, uint32_t *tmp)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            uint32_t v = a[i];
            unsigned c = ccc_of(v);
            size_t j = i;
            while (j > 0 && ccc_of(a[j - 1]) > c) { a[j] = a[j - 1]; j--; }
            a[j] = v;
        }
        return;
    }
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = ccc_of(a[j]) < ccc_of(a[i]) ? a[j++] : a[i++];
            while (i < mid) tmp[o++] = a[i++];
            while (j < hi) tmp[o++] = a[j++];
        }
        for (size_t i = 0; i < n; i++) a[i] = tmp[i];
    }
}

static int nfc_stable(const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (src[i] < 0xCC) { i++; continue; }   /* below U+0300: always stable */
        size_t len;
        uint32_t cp = rt_uni_next(src + i, n - i, &len);
        if (in_ranges(unicode_nfc_unstable, N_OF(unicode_nfc_unstable), cp)) return 0;
        i += len;
    }
    return 1;
}

size_t rt_uni_nfc_cps(size_t n) { return 4 * n + 4; }

/* Canonical composition of cps[0, n) in place; returns the new count. */
static size_t compose(uint32_t *cps, size_t n)
{
    size_t out = 0, starter = SIZE_MAX;
    unsigned last_ccc = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = cps[i];
        unsigned c = ccc_of(cp);
        int adjacent = starter != SIZE_MAX && out == starter + 1;
        if (starter != SIZE_MAX && (adjacent || (last_ccc != 0 && last_ccc < c))) {
            uint32_t composite = compose_pair(cps[starter], cp);
            if (composite) { cps[starter] = composite; continue; }
        }
        if (c == 0) { starter = out; last_ccc = 0; }
        else last_ccc = c;
        cps[out++] = cp;
    }
    return out;
}

size_t rt_uni_nfc(const uint8_t *src, size_t n, uint32_t *cps, uint8_t *dst, size_t cap)
{
    if (nfc_stable(src, n)) {
        if (n > cap) return SIZE_MAX;
        for (size_t i = 0; i < n; i++) dst[i] = src[i];
        return n;
    }
    uint32_t *tmp = cps + rt_uni_nfc_cps(n);
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t cp = rt_uni_next(src + i, n - i, &len);
        m += decompose(cp, cps + m);
        i += len;
    }
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && ccc_of(cps[j]) != 0) j++;
        if (j - i > 1) sort_by_ccc(cps + i, j - i, tmp);
        i = j > i ? j : i + 1;
    }
    m = compose(cps, m);
    size_t o = 0;
    for (size_t i = 0; i < m; i++) {
        if (cap - o < 4) return SIZE_MAX;
        o += rt_uni_put(dst + o, cps[i]);
    }
    return o;
}
