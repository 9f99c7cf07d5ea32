/* dt_hash64 (XXH64, now from Debian's libxxhash) against XXH64 values computed with the
 * reference library (libxxhash0 0.8.1, through Python ctypes, when dtrain had its own XXH64):
 * every tail length (0..31 bytes), the 32-byte stripe loop and a seed, so the checks stay the
 * same values; dt_mix64 is a bijection (no collisions on a sample). */
#include "core/hash.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(void) {
    CHECK(dt_hash64("", 0, 0) == 0xEF46DB3751D8E999ULL);
    CHECK(dt_hash64("a", 1, 0) == 0xD24EC4F1A98C6E5BULL);
    CHECK(dt_hash64("abc", 3, 0) == 0x44BC2CF5AD770999ULL);

    /* bytes (7i + 3) mod 256, prefixes of length n, seeds 0 and 0x1234567890 */
    unsigned char b[200];
    for (int i = 0; i < 200; i++) b[i] = (unsigned char)(i * 7 + 3);
    static const struct { size_t n; uint64_t h0, hs; } ref[] = {
        {0, 0xef46db3751d8e999ULL, 0x143d0aa52b5b1538ULL},
        {1, 0x1f25c8d0bc1f4bb6ULL, 0x0115c879e686ef7eULL},
        {3, 0x31d2363f52e564c9ULL, 0xe44a83af6261d538ULL},
        {4, 0x9bb64b7d66ee9fdaULL, 0x40a3c6ee4e433325ULL},
        {7, 0x9a7b149959ce60d8ULL, 0x0b57c5233c3aa041ULL},
        {8, 0xdab99d95c6f90092ULL, 0x88e3d7793bb0b2f3ULL},
        {15, 0x1b47cb8243cc8e32ULL, 0xf23f9675dd04e082ULL},
        {31, 0xa2aa5f33cc4a6119ULL, 0xe8c34f06a8a32e68ULL},
        {32, 0x23c3c17ef790fd97ULL, 0x9c47f544bf5cc662ULL},
        {33, 0x50a7cfc7ba588784ULL, 0x12c3c9293b149ab0ULL},
        {63, 0x5e3e54b431c7493cULL, 0xf72d3449eb123781ULL},
        {64, 0x0eb64b3ef6eeb01fULL, 0xecdca833e272b051ULL},
        {100, 0xa61f8d4c170fe531ULL, 0x3c0ee07e5e38d475ULL},
        {200, 0xa6cb3c09bc829b24ULL, 0x06466db215435770ULL},
    };
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        CHECK_MSG(dt_hash64(b, ref[i].n, 0) == ref[i].h0, "n = %zu, seed 0", ref[i].n);
        CHECK_MSG(dt_hash64(b, ref[i].n, 0x1234567890ULL) == ref[i].hs, "n = %zu, seed", ref[i].n);
    }
    /* unaligned start gives the same hash as the same bytes aligned */
    unsigned char u[201];
    for (int i = 0; i < 200; i++) u[i + 1] = b[i];
    CHECK(dt_hash64(u + 1, 200, 0) == ref[13].h0);
    /* one flipped bit anywhere changes the hash */
    for (int i = 0; i < 200; i++) {
        b[i] ^= 0x10;
        CHECK_MSG(dt_hash64(b, 200, 0) != ref[13].h0, "bit flip at byte %d", i);
        b[i] ^= 0x10;
    }

    enum { M = 100000 };
    uint64_t *m = malloc(M * sizeof *m);
    CHECK(m != NULL);
    if (m) {
        for (uint64_t i = 0; i < M; i++) m[i] = dt_mix64(i * 0x9E3779B97F4A7C15ULL);
        qsort(m, M, sizeof *m, cmp_u64);
        int dup = 0;
        for (int i = 1; i < M; i++) dup += m[i] == m[i - 1];
        CHECK_MSG(dup == 0, "%d collisions of dt_mix64", dup);
        free(m);
    }
    return test_summary("test_hash");
}
