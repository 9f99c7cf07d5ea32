/* 64-bit content hashing (XXH64 from xxHash, Debian's libxxhash) for checks where a
 * CRC-32 collides too often: the one-sided transport validates every tensor it reads with it
 * (src/comm/window.c). Not cryptographic. */
#ifndef DT_HASH_H
#define DT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* XXH64 of n bytes at p with the given seed; equals xxHash's XXH64(p, n, seed). */
uint64_t dt_hash64(const void *p, size_t n, uint64_t seed);

/* A bijective 64-bit mixer (XXH64's final avalanche): distinct inputs give distinct outputs. */
uint64_t dt_mix64(uint64_t x);

#endif
