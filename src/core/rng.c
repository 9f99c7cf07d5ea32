/* Small seedable generator (xoroshiro128+ seeded through splitmix64): the same stream on
 * every platform, so seeds reproduce runs. */
#include "dtrain.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void dt_rng_seed(dt_rng *r, uint64_t seed) {
    r->s[0] = splitmix64(&seed);
    r->s[1] = splitmix64(&seed);
    if (!r->s[0] && !r->s[1]) r->s[1] = 1;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dt_rng_next(dt_rng *r) {
    uint64_t s0 = r->s[0], s1 = r->s[1], result = s0 + s1;
    s1 ^= s0;
    r->s[0] = rotl(s0, 24) ^ s1 ^ (s1 << 16);
    r->s[1] = rotl(s1, 37);
    return result;
}

float dt_rng_uniform(dt_rng *r) { return (float)(dt_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

uint32_t dt_rng_below(dt_rng *r, uint32_t n) {
    return (uint32_t)(((dt_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

void dt_shuffle(int *a, int n, dt_rng *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)dt_rng_below(r, (uint32_t)i + 1);
        int t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

uint64_t dt_seed_mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t x = seed;
    uint64_t h = splitmix64(&x);
    x = h ^ (a * 0xD6E8FEB86659FD93ull); h = splitmix64(&x);
    x = h ^ (b * 0xA0761D6478BD642Full); h = splitmix64(&x);
    x = h ^ (c * 0xE7037ED1A0B428DBull); h = splitmix64(&x);
    return h;
}
