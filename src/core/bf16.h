/* bfloat16: the upper 16 bits of an IEEE float (8 exponent bits, 7 mantissa bits). One
 * conversion for everything that stores bf16: --compress bf16 (comm/codec.c) and
 * --precision bf16 (layers/bf16_array.h's array forms, models/precision.c). */
#ifndef DT_CORE_BF16_H
#define DT_CORE_BF16_H

#include <stdint.h>
#include <string.h>

/* Round to nearest even; overflow gives infinity; NaN stays (quiet) NaN. */
static inline uint16_t dt_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float dt_bf16_to_f32(uint16_t h) {
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

#endif
