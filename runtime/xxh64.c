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

/* The four lanes over the 32-byte stripes, as loops over the lanes
 * (smaller Thumb code than four copies of the 64-bit arithmetic). */
static uint64_t stripes(const uint8_t **pp, size_t *len, uint64_t seed)
{
    static const int rot[4] = {1, 7, 12, 18};
    uint64_t v[4] = {seed + PRIME1 + PRIME2, seed + PRIME2, seed, seed - PRIME1}, acc = 0;
    const uint8_t *p = *pp;
    for (; *len >= 32; *len -= 32, p += 32)
        for (int l = 0; l < 4; l++)
            v[l] = round64(v[l], fb_u64(p + 8 * l));
    *pp = p;
    for (int l = 0; l < 4; l++)
        acc += rotl(v[l], rot[l]);
    for (int l = 0; l < 4; l++)
        acc = merge(acc, v[l]);
    return acc;
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
