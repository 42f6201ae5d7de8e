/* Minimal TAP for unit tests: each check prints "ok N - what" or
 * "not ok N - what"; tests/run_all.sh counts them. */
#ifndef LLMC_TAP_H
#define LLMC_TAP_H
#include <stdio.h>

static int tap_n, tap_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        int ok_ = (cond) ? 1 : 0;                                               \
        printf("%sok %d - ", ok_ ? "" : "not ", ++tap_n);                       \
        printf(__VA_ARGS__);                                                    \
        printf("\n");                                                           \
        if (!ok_) {                                                             \
            tap_failed++;                                                       \
            printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                       \
    } while (0)

#define TAP_DONE() (printf("1..%d\n", tap_n), tap_failed ? 1 : 0)
#endif
