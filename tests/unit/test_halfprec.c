/* Unit test: fp16 / bf16 rounding at the edges — ties to even, subnormals,
 * overflow to infinity, infinities and NaN of both signs. */
#include <math.h>

#include "../engine/check.h"
#include "halfprec.h"

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
    return check_report("test_halfprec");
}
