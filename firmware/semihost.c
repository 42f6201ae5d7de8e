/* Semihosting calls (semihost.h). */
#include "semihost.h"

enum {
    SYS_WRITE0 = 0x04,
    SYS_EXIT = 0x18,
    ADP_STOPPED_APPLICATION_EXIT = 0x20026,
    ADP_STOPPED_RUNTIME_ERROR = 0x20023
};

static uintptr_t sh_call(uintptr_t op, const void *param)
{
    register uintptr_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = param;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void sh_write0(const char *s)
{
    sh_call(SYS_WRITE0, s);
}

/* SYS_WRITE0 of a copy in pieces: SYS_WRITE would need a handle from
 * SYS_OPEN(":tt"), and the bytes here never hold a NUL. */
void sh_write(const char *s, size_t n)
{
    char piece[65];
    while (n) {
        size_t k = n < sizeof piece - 1 ? n : sizeof piece - 1;
        for (size_t i = 0; i < k; i++)
            piece[i] = s[i];
        piece[k] = '\0';
        sh_call(SYS_WRITE0, piece);
        s += k;
        n -= k;
    }
}

void sh_write_u(uint64_t v)
{
    char digits[24];
    int n = 0;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    sh_write(digits + sizeof digits - n, (size_t)n);
}

void sh_exit(int status)
{
    /* AArch32 SYS_EXIT takes the reason code itself, not a block. */
    sh_call(SYS_EXIT, (const void *)(uintptr_t)(status ? ADP_STOPPED_RUNTIME_ERROR
                                                       : ADP_STOPPED_APPLICATION_EXIT));
    for (;;)
        ;
}
