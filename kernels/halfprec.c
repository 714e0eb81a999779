/* Exact round-to-nearest-even conversions between double and fp16 / bf16.
 * Rounding from double is correct for results of +, -, *, / of two halves
 * computed in double (53 >= 2p + 2 bits, so double rounding is innocuous). */
#include "halfprec.h"

#include "round.h"

#include <math.h>
#include <string.h>

lmk_fp16 lmk_fp16_from_double(double x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    double a = fabs(x);
    if (isnan(x))
        return (lmk_fp16)(sign | 0x7e00u);
    if (a >= 65520.0) /* max fp16 65504; halfway to 2^16 rounds to inf */
        return (lmk_fp16)(sign | 0x7c00u);
    if (a < 0x1p-14) {
        /* subnormal (or zero): value = m * 2^-24, m in [0, 1024] */
        double m = nearbyint(a * 0x1p24); /* default rounding mode: ties to even */
        return (lmk_fp16)(sign | (uint16_t)m);
    }
    int e;
    double f = frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    /* significand with 11 bits: f * 2^11 in [1024, 2048) */
    double m = nearbyint(f * 2048.0);
    if (m == 2048.0) {
        m = 1024.0;
        e += 1;
    }
    int biased = e - 1 + 15; /* a = (m/1024) * 2^(e-1) */
    if (biased >= 31)
        return (lmk_fp16)(sign | 0x7c00u);
    return (lmk_fp16)(sign | (uint16_t)(biased << 10) | ((uint16_t)m - 1024u));
}

float lmk_fp16_to_float(lmk_fp16 h)
{
    return lmk_fp16_bits_to_float(h);
}

lmk_bf16 lmk_bf16_from_double(double x)
{
    /* Round to float first would double-round; round directly instead. */
    if (isnan(x))
        return (lmk_bf16)(signbit(x) ? 0xffc0u : 0x7fc0u);
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    double a = fabs(x);
    if (a == 0.0)
        return (lmk_bf16)sign;
    if (isinf(a))
        return (lmk_bf16)(sign | 0x7f80u);
    if (a < 0x1p-126) {
        /* subnormal: value = m * 2^-133, m in [0, 128] */
        double m = nearbyint(a * 0x1p133);
        return (lmk_bf16)(sign | (uint16_t)m);
    }
    int e;
    double f = frexp(a, &e);
    double m = nearbyint(f * 256.0); /* 8 significant bits, [128, 256] */
    if (m == 256.0) {
        m = 128.0;
        e += 1;
    }
    int biased = e - 1 + 127;
    if (biased >= 255)
        return (lmk_bf16)(sign | 0x7f80u);
    return (lmk_bf16)(sign | (uint16_t)(biased << 7) | ((uint16_t)m - 128u));
}

float lmk_bf16_to_float(lmk_bf16 h)
{
    return lmk_bf16_bits_to_float(h);
}
