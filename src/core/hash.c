/* XXH64 from xxHash (Debian's libxxhash), and XXH64's final avalanche as a mixer of its own
 * (xxHash keeps it internal). */
#include "core/hash.h"

#include <xxhash.h>

uint64_t dt_hash64(const void *p, size_t n, uint64_t seed) { return XXH64(p, n, seed); }

uint64_t dt_mix64(uint64_t h) {
    /* XXH64's primes 2 and 3 */
    h ^= h >> 33; h *= 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29; h *= 0x165667B19E3779F9ULL;
    h ^= h >> 32;
    return h;
}
