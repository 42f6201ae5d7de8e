/* XXH64, from the published algorithm description (xxhash spec, "XXH64
 * algorithm overview"): four lanes of 32-byte stripes, merge, tail, avalanche.
 * Reads little-endian bytes one at a time, so any alignment works. */
#include "llmc_rt.h"

#include "plan_format.h"

static const uint64_t PRIME1 = 0x9E3779B185EBCA87u;
static const uint64_t PRIME2 = 0xC2B2AE3D27D4EB4Fu;
static const uint64_t PRIME3 = 0x165667B19E3779F9u;
static const uint64_t PRIME4 = 0x85EBCA77C2B2AE63u;
static const uint64_t PRIME5 = 0x27D4EB2F165667C5u;

static uint64_t rotl(uint64_t x, int r)
{
    return x << r | x >> (64 - r);
}

static uint64_t round64(uint64_t acc, uint64_t lane)
{
    acc += lane * PRIME2;
    acc = rotl(acc, 31);
    return acc * PRIME1;
}

static uint64_t merge(uint64_t acc, uint64_t lane_acc)
{
    acc ^= round64(0, lane_acc);
    return acc * PRIME1 + PRIME4;
}

static uint64_t stripes(const uint8_t **pp, size_t *len, uint64_t seed)
{
    uint64_t v1 = seed + PRIME1 + PRIME2, v2 = seed + PRIME2, v3 = seed, v4 = seed - PRIME1;
    const uint8_t *p = *pp;
    for (; *len >= 32; *len -= 32, p += 32) {
        v1 = round64(v1, fb_u64(p));
        v2 = round64(v2, fb_u64(p + 8));
        v3 = round64(v3, fb_u64(p + 16));
        v4 = round64(v4, fb_u64(p + 24));
    }
    *pp = p;
    uint64_t acc = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    acc = merge(acc, v1);
    acc = merge(acc, v2);
    acc = merge(acc, v3);
    return merge(acc, v4);
}

uint64_t llmc_rt_xxh64(const void *data, size_t len, uint64_t seed)
{
    const uint8_t *p = data;
    uint64_t acc = len >= 32 ? stripes(&p, &len, seed) : seed + PRIME5;
    acc += (uint64_t)len + (uint64_t)(p - (const uint8_t *)data);
    for (; len >= 8; len -= 8, p += 8)
        acc = rotl(acc ^ round64(0, fb_u64(p)), 27) * PRIME1 + PRIME4;
    if (len >= 4) {
        acc = rotl(acc ^ (uint64_t)fb_u32(p) * PRIME1, 23) * PRIME2 + PRIME3;
        len -= 4;
        p += 4;
    }
    for (; len > 0; len--, p++)
        acc = rotl(acc ^ *p * PRIME5, 11) * PRIME1;
    acc ^= acc >> 33;
    acc *= PRIME2;
    acc ^= acc >> 29;
    acc *= PRIME3;
    return acc ^ acc >> 32;
}
