/* Affine dims and polynomials in (S, P); see symbolic.h. */
#include "symbolic.h"

#include <stdio.h>
#include <string.h>

#include "ir/ir_dump.h"

bool llmc_aff_add(llmc_affine a, llmc_affine b, llmc_affine *r)
{
    return !__builtin_add_overflow(a.c, b.c, &r->c) && !__builtin_add_overflow(a.s, b.s, &r->s) &&
           !__builtin_add_overflow(a.p, b.p, &r->p);
}

bool llmc_aff_sub(llmc_affine a, llmc_affine b, llmc_affine *r)
{
    return !__builtin_sub_overflow(a.c, b.c, &r->c) && !__builtin_sub_overflow(a.s, b.s, &r->s) &&
           !__builtin_sub_overflow(a.p, b.p, &r->p);
}

bool llmc_aff_scale(llmc_affine a, int64_t k, llmc_affine *r)
{
    return !__builtin_mul_overflow(a.c, k, &r->c) && !__builtin_mul_overflow(a.s, k, &r->s) &&
           !__builtin_mul_overflow(a.p, k, &r->p);
}

bool llmc_aff_div(llmc_affine a, int64_t k, uint32_t max_context, llmc_affine *r)
{
    if (k == 0 || (k == -1 && a.c == INT64_MIN) || a.s % k || a.p % k)
        return false;
    int64_t lo;
    bool exact = a.c % k == 0;
    /* With c not divisible, truncation equals floor only when a >= 0. */
    if (!exact && !(llmc_aff_is_const(a) || (llmc_aff_min(a, max_context, &lo) && lo >= 0)))
        return false;
    r->c = a.c / k;
    r->s = a.s / k;
    r->p = a.p / k;
    return true;
}

/* Value at the vertices of 1 <= S, 0 <= P, S + P <= M. */
static int vertices(llmc_affine a, uint32_t m, int64_t v[3])
{
    int64_t big = m;
    if (__builtin_add_overflow(a.c, a.s, &v[0]))
        return 0;
    if (m == 0)
        return 1;
    int64_t t1, t2;
    if (__builtin_mul_overflow(a.s, big, &t1) || __builtin_add_overflow(a.c, t1, &v[1]) ||
        __builtin_mul_overflow(a.p, big - 1, &t2) || __builtin_add_overflow(v[0], t2, &v[2]))
        return 0;
    return 3;
}

bool llmc_aff_min(llmc_affine a, uint32_t max_context, int64_t *lo)
{
    int64_t v[3];
    int n = vertices(a, max_context, v);
    if (n == 0 || (n == 1 && (a.s < 0 || a.p < 0)))
        return false;
    *lo = v[0];
    for (int i = 1; i < n; i++)
        *lo = v[i] < *lo ? v[i] : *lo;
    return true;
}

bool llmc_aff_max(llmc_affine a, uint32_t max_context, int64_t *hi)
{
    int64_t v[3];
    int n = vertices(a, max_context, v);
    if (n == 0 || (n == 1 && (a.s > 0 || a.p > 0)))
        return false;
    *hi = v[0];
    for (int i = 1; i < n; i++)
        *hi = v[i] > *hi ? v[i] : *hi;
    return true;
}

bool llmc_aff_provably_ge(llmc_affine a, llmc_affine b, uint32_t max_context)
{
    llmc_affine d;
    int64_t lo;
    return llmc_aff_sub(a, b, &d) && llmc_aff_min(d, max_context, &lo) && lo >= 0;
}

bool llmc_aff_provably_gt(llmc_affine a, llmc_affine b, uint32_t max_context)
{
    llmc_affine d;
    int64_t lo;
    return llmc_aff_sub(a, b, &d) && llmc_aff_min(d, max_context, &lo) && lo > 0;
}

/* ---- polynomials ---- */

void llmc_poly_const(llmc_poly *p, int64_t c)
{
    memset(p, 0, sizeof *p);
    p->c[0][0] = c;
}

/* p += k * S^i * P^j */
static bool poly_add_term(llmc_poly *p, int i, int j, int64_t k)
{
    if (k == 0)
        return true;
    if (i >= LLMC_POLY_DEG || j >= LLMC_POLY_DEG)
        return false;
    return !__builtin_add_overflow(p->c[i][j], k, &p->c[i][j]);
}

bool llmc_poly_mul_aff(llmc_poly *p, llmc_affine a)
{
    llmc_poly r;
    llmc_poly_const(&r, 0);
    for (int i = 0; i < LLMC_POLY_DEG; i++)
        for (int j = 0; j < LLMC_POLY_DEG; j++) {
            int64_t x = p->c[i][j], t;
            if (x == 0)
                continue;
            if (__builtin_mul_overflow(x, a.c, &t) || !poly_add_term(&r, i, j, t) ||
                __builtin_mul_overflow(x, a.s, &t) || !poly_add_term(&r, i + 1, j, t) ||
                __builtin_mul_overflow(x, a.p, &t) || !poly_add_term(&r, i, j + 1, t))
                return false;
        }
    *p = r;
    return true;
}

bool llmc_poly_eq(const llmc_poly *a, const llmc_poly *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

bool llmc_poly_is_const(const llmc_poly *p)
{
    llmc_poly k;
    llmc_poly_const(&k, p->c[0][0]);
    return llmc_poly_eq(p, &k);
}

/* Leading term in graded order (total degree, then the power of S). */
static bool poly_leading(const llmc_poly *p, int *li, int *lj)
{
    for (int d = 2 * (LLMC_POLY_DEG - 1); d >= 0; d--)
        for (int i = LLMC_POLY_DEG - 1; i >= 0; i--) {
            int j = d - i;
            if (j >= 0 && j < LLMC_POLY_DEG && p->c[i][j] != 0) {
                *li = i;
                *lj = j;
                return true;
            }
        }
    return false;
}

/* Multivariate long division; with a graded monomial order the leading
 * term of a multiple of den is always divisible by den's leading term, so a
 * stuck step proves den does not divide num. */
bool llmc_poly_div(const llmc_poly *num, const llmc_poly *den, llmc_poly *q)
{
    int di, dj, ri, rj;
    llmc_poly r = *num;
    llmc_poly_const(q, 0);
    if (!poly_leading(den, &di, &dj))
        return false;
    while (poly_leading(&r, &ri, &rj)) {
        int64_t lead = den->c[di][dj];
        if (ri < di || rj < dj || r.c[ri][rj] % lead != 0)
            return false;
        int64_t t = r.c[ri][rj] / lead;
        q->c[ri - di][rj - dj] = t;
        for (int i = 0; i < LLMC_POLY_DEG; i++)
            for (int j = 0; j < LLMC_POLY_DEG; j++) {
                int64_t prod;
                if (den->c[i][j] == 0)
                    continue;
                if (__builtin_mul_overflow(den->c[i][j], t, &prod) ||
                    !poly_add_term(&r, i + ri - di, j + rj - dj, -prod))
                    return false;
            }
    }
    return true;
}

bool llmc_poly_to_affine(const llmc_poly *p, llmc_affine *a)
{
    for (int i = 0; i < LLMC_POLY_DEG; i++)
        for (int j = 0; j < LLMC_POLY_DEG; j++)
            if (i + j > 1 && p->c[i][j] != 0)
                return false;
    a->c = p->c[0][0];
    a->s = p->c[1][0];
    a->p = p->c[0][1];
    return true;
}

static void append_power(char *buf, size_t size, size_t *len, const char *sym, int power, bool *first)
{
    if (power == 0)
        return;
    int w = snprintf(buf + *len, size - *len, "%s%s", *first ? "" : "*", sym);
    if (w > 0 && power > 1)
        w += snprintf(buf + *len + (size_t)w, size - *len - (size_t)w, "^%d", power);
    *first = false;
    if (w > 0)
        *len = *len + (size_t)w < size ? *len + (size_t)w : size - 1;
}

static void append_monomial(char *buf, size_t size, size_t *len, int64_t k, int i, int j)
{
    bool first = true;
    const char *sign = k < 0 ? "-" : (*len ? "+" : "");
    uint64_t mag = k < 0 ? (uint64_t)0 - (uint64_t)k : (uint64_t)k;
    int w = snprintf(buf + *len, size - *len, "%s", sign);
    *len += w > 0 ? (size_t)w : 0;
    if (mag != 1 || (i == 0 && j == 0)) {
        w = snprintf(buf + *len, size - *len, "%llu", (unsigned long long)mag);
        *len += w > 0 ? (size_t)w : 0;
        first = false;
    }
    if (*len >= size)
        *len = size - 1;
    append_power(buf, size, len, "S", i, &first);
    append_power(buf, size, len, "P", j, &first);
}

void llmc_poly_format(const llmc_poly *p, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    for (int d = 2 * (LLMC_POLY_DEG - 1); d >= 0; d--)
        for (int i = LLMC_POLY_DEG - 1; i >= 0; i--) {
            int j = d - i;
            if (j >= 0 && j < LLMC_POLY_DEG && p->c[i][j] != 0)
                append_monomial(buf, size, &len, p->c[i][j], i, j);
        }
    if (len == 0)
        snprintf(buf, size, "0");
}

bool llmc_shape_product(const llmc_shape *s, int from, int to, llmc_poly *p)
{
    llmc_poly_const(p, 1);
    for (int i = from; i < to; i++)
        if (!llmc_poly_mul_aff(p, s->dims[i]))
            return false;
    return true;
}

bool llmc_shape_numel_const(const llmc_shape *s, int64_t *numel)
{
    *numel = 1;
    for (int i = 0; i < s->rank; i++)
        if (!llmc_aff_is_const(s->dims[i]) || __builtin_mul_overflow(*numel, s->dims[i].c, numel))
            return false;
    return s->rank >= 0;
}

void llmc_shape_format(const llmc_shape *s, char *buf, size_t size)
{
    size_t len = 0;
    if (s->rank < 0) {
        snprintf(buf, size, "?");
        return;
    }
    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->rank && len < size; i++) {
        char d[96];
        llmc_ir_format_affine(s->dims[i], d, sizeof d);
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", d);
    }
    if (len < size)
        snprintf(buf + len, size - len, "]");
}
