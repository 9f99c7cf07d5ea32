/* XXH64 (xxHash 0.8 specification), plain C: four independent lanes over 32-byte stripes,
 * so the compiler keeps four multiplies in flight (~10 GB/s per core). */
#include "core/hash.h"

#include <string.h>

static const uint64_t P1 = 0x9E3779B185EBCA87ULL, P2 = 0xC2B2AE3D27D4EB4FULL,
                      P3 = 0x165667B19E3779F9ULL, P4 = 0x85EBCA77C2B2AE63ULL,
                      P5 = 0x27D4EB2F165667C5ULL;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
/* unaligned little-endian loads (x86-64 and every other target dtrain builds on) */
static inline uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static inline uint64_t round64(uint64_t acc, uint64_t lane) {
    acc += lane * P2;
    return rotl64(acc, 31) * P1;
}
static inline uint64_t merge64(uint64_t h, uint64_t acc) {
    h ^= round64(0, acc);
    return h * P1 + P4;
}

uint64_t dt_mix64(uint64_t h) {
    h ^= h >> 33; h *= P2;
    h ^= h >> 29; h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t dt_hash64(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = data, *end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const unsigned char *limit = end - 32;
        do {
            v1 = round64(v1, rd64(p));
            v2 = round64(v2, rd64(p + 8));
            v3 = round64(v3, rd64(p + 16));
            v4 = round64(v4, rd64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = merge64(h, v1); h = merge64(h, v2); h = merge64(h, v3); h = merge64(h, v4);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)n;
    for (; p + 8 <= end; p += 8) h = rotl64(h ^ round64(0, rd64(p)), 27) * P1 + P4;
    if (p + 4 <= end) { h = rotl64(h ^ ((uint64_t)rd32(p) * P1), 23) * P2 + P3; p += 4; }
    for (; p < end; p++) h = rotl64(h ^ ((uint64_t)*p * P5), 11) * P1;
    return dt_mix64(h);
}
