/* Inline forms of the autocast emulation's exact conversions, for hot loops
 * (the cpu backend's GEMM packers and elementwise ops): float rounded to
 * tf32 / bf16 / fp16 (round to nearest even, the value kept as a float) and
 * raw 16-bit bits widened to float or made from a float. The one definition:
 * backend.c's lmk_round_value and halfprec.c's widenings call these.
 * Branch-light integer and power-of-two arithmetic, so loops over them
 * vectorise. C only (not included by the cuda sources). */
#ifndef LMK_ROUND_H
#define LMK_ROUND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t lmk_bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float lmk_float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x with the low `drop` bits of its encoding rounded away, ties to even
 * (tf32: drop 13, bf16: drop 16). Inf and NaN unchanged; a carry into the
 * exponent is correct (next binade or infinity). */
static inline float lmk_round_drop_bits(float x, int drop)
{
    uint32_t u = lmk_bits_of(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    uint32_t half = (1u << (drop - 1)) - 1u;
    u += half + ((u >> drop) & 1u);
    u &= ~((1u << drop) - 1u);
    return lmk_float_of(u);
}

/* x rounded to the nearest fp16 value (subnormals, overflow to inf). */
static inline float lmk_round_fp16f(float x)
{
    float a = fabsf(x);
    if (isnan(x) || isinf(x))
        return x;
    if (a < 0x1p-14f) /* subnormal fp16: multiples of 2^-24 */
        return copysignf(nearbyintf(a * 0x1p24f) * 0x1p-24f, x);
    float r = lmk_round_drop_bits(x, 13); /* 10 fraction bits, like fp16 normals */
    if (fabsf(r) > 65504.0f)
        return copysignf(INFINITY, x);
    return r;
}

/* The exact float value of bf16 bits h. */
static inline float lmk_bf16_bits_to_float(uint16_t h)
{
    return lmk_float_of((uint32_t)h << 16);
}

/* The exact float value of fp16 bits h: the exponent and fraction placed in
 * a float's, scaled by 2^(127-15) (exact for normals and subnormals alike);
 * inf of h's sign; NaN: the quiet NaN of h's sign. */
static inline float lmk_fp16_bits_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu;
    if (em >= 0x7c00u)
        return lmk_float_of(sign | (em == 0x7c00u ? 0x7f800000u : 0x7fc00000u));
    return lmk_float_of(lmk_bits_of(lmk_float_of(em << 13) * 0x1p112f) | sign);
}

/* The fp16 bits of x rounded to nearest even (lmk_round_fp16f's value
 * encoded); NaN: 0x7e00 with x's sign. */
static inline uint16_t lmk_fp16_bits_from_float(float x)
{
    float r = lmk_round_fp16f(x);
    uint32_t u = lmk_bits_of(r);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    float a = fabsf(r);
    if (isnan(r))
        return (uint16_t)(sign | 0x7e00u);
    if (isinf(r))
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x1p-14f) /* subnormal or zero: a = m · 2^-24 exactly */
        return (uint16_t)(sign | (uint16_t)(a * 0x1p24f));
    uint32_t e = ((u >> 23) & 0xffu) - 127u + 15u;
    return (uint16_t)(sign | (e << 10) | ((u >> 13) & 0x3ffu));
}

#endif
