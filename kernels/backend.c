/* Backend-independent pieces: freeing a backend, exact float rounding to the
 * narrower formats used by the autocast emulation. */
#include "backend.h"

#include <math.h>
#include <string.h>

void lmk_backend_free(lmk_backend *b)
{
    if (b && b->destroy)
        b->destroy(b);
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Rounds away the low `drop` bits of the float encoding, ties to even.
 * A carry into the exponent is correct (next binade or infinity). */
static float round_drop_bits(float x, int drop)
{
    uint32_t u = bits_of(x);
    if ((u & 0x7f800000u) == 0x7f800000u) /* inf, nan */
        return x;
    uint32_t half = (1u << (drop - 1)) - 1u;
    u += half + ((u >> drop) & 1u);
    u &= ~((1u << drop) - 1u);
    return float_of(u);
}

static float round_fp16(float x)
{
    float a = fabsf(x);
    if (isnan(x) || isinf(x))
        return x;
    if (a < 0x1p-14f) /* subnormal fp16: multiples of 2^-24 */
        return copysignf(nearbyintf(a * 0x1p24f) * 0x1p-24f, x);
    float r = round_drop_bits(x, 13); /* 10 fraction bits, like fp16 normals */
    if (fabsf(r) > 65504.0f)
        return copysignf(INFINITY, x);
    return r;
}

float lmk_round_value(float x, lmk_round r)
{
    switch (r) {
    case LMK_ROUND_TF32:
        return round_drop_bits(x, 13);
    case LMK_ROUND_BF16:
        return round_drop_bits(x, 16);
    case LMK_ROUND_FP16:
        return round_fp16(x);
    case LMK_ROUND_NONE:
        break;
    }
    return x;
}
