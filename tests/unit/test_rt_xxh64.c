/* llmc_rt_xxh64 against published vectors and against libxxhash. */
#include <stdlib.h>
#include <xxhash.h>

#include "llmc_rt_internal.h"
#include "tap.h"

int main(void)
{
    CHECK(llmc_rt_xxh64("", 0, 0) == 0xEF46DB3751D8E999ull, "XXH64(\"\") = ef46db3751d8e999");
    CHECK(llmc_rt_xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ull, "XXH64(\"abc\") = 44bc2cf5ad770999");
    unsigned char buf[301 + 7];
    srand(7);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)rand();
    int mismatches = 0;
    for (size_t len = 0; len <= 300; len++)
        for (size_t shift = 0; shift < 8; shift++) /* every alignment */
            for (unsigned long long seed = 0; seed < 3; seed++)
                mismatches += llmc_rt_xxh64(buf + shift, len, seed * 0x9E3779B97F4A7C15ull) !=
                              XXH64(buf + shift, len, seed * 0x9E3779B97F4A7C15ull);
    CHECK(mismatches == 0, "matches libxxhash for lengths 0..300, 8 alignments, 3 seeds");
    return TAP_DONE();
}
