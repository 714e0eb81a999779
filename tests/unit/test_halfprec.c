/* Unit test: fp16 / bf16 rounding at the edges — ties to even, subnormals,
 * overflow to infinity, infinities and NaN of both signs; round.h's inline
 * forms against the double-based conversions on every fp16 value, every
 * midpoint between neighbours and a sweep of floats. */
#include <math.h>
#include <string.h>

#include "../engine/check.h"
#include "halfprec.h"
#include "round.h"

/* fp16 bits h as a double, the definition: (-1)^s 2^(e-15) (1 + f/1024), subnormals 2^-14 f/1024 */
static double fp16_ref(uint16_t h)
{
    int e = (h >> 10) & 0x1f, f = h & 0x3ff;
    double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(f | 0x400, e - 25);
    return h & 0x8000 ? -v : v;
}

static void check_round_inline(void)
{
    int bad_widen = 0, bad_from = 0, bad_mid = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        double want = fp16_ref((uint16_t)h);
        float got = lmk_fp16_bits_to_float((uint16_t)h);
        bad_widen += isnan(want) ? !isnan(got) : (double)got != want || !signbit(got) != !signbit(want);
        if (isnan(want))
            continue;
        bad_from += lmk_fp16_bits_from_float((float)want) != h;
        /* the midpoint to the next fp16 value up in magnitude (a tie) and
         * points just either side of it */
        uint16_t up = (uint16_t)(h + 1);
        if ((h & 0x7fffu) >= 0x7c00u || (up & 0x7fffu) > 0x7c00u)
            continue;
        double mid = (want + fp16_ref(up)) / 2.0;
        if (isinf(mid))
            continue;
        float m[3] = {(float)mid, nextafterf((float)mid, 0.0f), nextafterf((float)mid, (float)(2.0 * mid))};
        for (int i = 0; i < 3; i++)
            bad_mid += lmk_fp16_bits_from_float(m[i]) != lmk_fp16_from_double(m[i]) ||
                       lmk_round_fp16f(m[i]) != lmk_fp16_round(m[i]);
    }
    CHECK(bad_widen == 0, "lmk_fp16_bits_to_float: %d of 65536 values differ", bad_widen);
    CHECK(bad_from == 0, "lmk_fp16_bits_from_float of fp16 values: %d differ", bad_from);
    CHECK(bad_mid == 0, "fp16 rounding of midpoints: %d differ from lmk_fp16_from_double", bad_mid);
    int bad_sweep = 0;
    for (uint32_t u = 0; u < 0xffffffffu - 9973u; u += 9973u) { /* about 430k floats of every exponent */
        float x;
        memcpy(&x, &u, sizeof x);
        if (isnan(x))
            continue;
        bad_sweep += lmk_fp16_bits_from_float(x) != lmk_fp16_from_double(x) ||
                     lmk_bf16_bits_to_float((uint16_t)(lmk_bits_of(lmk_round_drop_bits(x, 16)) >> 16)) !=
                         lmk_bf16_round(x);
    }
    CHECK(bad_sweep == 0, "fp16 / bf16 rounding of a float sweep: %d differ", bad_sweep);
}

int main(void)
{
    /* fp16 */
    CHECK(lmk_fp16_from_double(1.0) == 0x3c00, "fp16 1.0");
    CHECK(lmk_fp16_from_double(-2.0) == 0xc000, "fp16 -2.0");
    CHECK(lmk_fp16_from_double(65504.0) == 0x7bff, "fp16 max");
    CHECK(lmk_fp16_from_double(65519.0) == 0x7bff, "fp16 just below the overflow tie");
    CHECK(lmk_fp16_from_double(65520.0) == 0x7c00, "fp16 overflow tie rounds to inf");
    CHECK(lmk_fp16_from_double(INFINITY) == 0x7c00 && lmk_fp16_from_double(-INFINITY) == 0xfc00, "fp16 inf");
    CHECK(isnan(lmk_fp16_to_float(lmk_fp16_from_double(NAN))), "fp16 nan");
    CHECK(lmk_fp16_from_double(0x1p-24) == 0x0001, "fp16 smallest subnormal");
    CHECK(lmk_fp16_from_double(0x1p-25) == 0x0000, "fp16 half the smallest subnormal ties to even (0)");
    CHECK(lmk_fp16_from_double(3 * 0x1p-25) == 0x0002, "fp16 1.5 subnormal ulps ties to even (2)");
    CHECK(lmk_fp16_from_double(1.0 + 0x1p-11) == 0x3c00, "fp16 tie to even below");
    CHECK(lmk_fp16_from_double(1.0 + 3 * 0x1p-11) == 0x3c02, "fp16 tie to even above");
    CHECK(lmk_fp16_round(0.01) == 0.01000213623046875f, "fp16 0.01 (1311 · 2^-17)");
    /* bf16 */
    CHECK(lmk_bf16_from_double(1.0) == 0x3f80, "bf16 1.0");
    CHECK(lmk_bf16_from_double(INFINITY) == 0x7f80 && lmk_bf16_from_double(-INFINITY) == 0xff80, "bf16 inf");
    CHECK(isnan(lmk_bf16_to_float(lmk_bf16_from_double(NAN))), "bf16 nan");
    CHECK(lmk_bf16_from_double(3.4e38) == 0x7f80, "bf16 overflow rounds to inf");
    CHECK(lmk_bf16_from_double(1.0 + 0x1p-8) == 0x3f80, "bf16 tie to even below");
    CHECK(lmk_bf16_from_double(1.0 + 3 * 0x1p-8) == 0x3f82, "bf16 tie to even above");
    CHECK(lmk_bf16_from_double(0x1p-133) == 0x0001, "bf16 smallest subnormal");
    CHECK(lmk_bf16_round(0.01) == 0.010009765625f, "bf16 0.01");
    check_round_inline();
    return check_report("test_halfprec");
}
