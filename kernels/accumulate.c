/* CPU emulation of the accumulation experiment with exact rounding. */
#include "accumulate.h"

#include "halfprec.h"
#include "status.h"

/* Rounds x to dtype (exactly, round-to-nearest-even). */
static double round_to(lmk_dtype dtype, double x)
{
    switch (dtype) {
    case LMK_F16:
        return lmk_fp16_round(x);
    case LMK_BF16:
        return lmk_bf16_round(x);
    default:
        return (float)x;
    }
}

static int valid_case(const lmk_accum_case *c)
{
    int ok_acc = c->accumulator == LMK_F32 || c->accumulator == LMK_F16 || c->accumulator == LMK_BF16;
    int ok_sum = c->summand == LMK_F32 || c->summand == LMK_F16 || c->summand == LMK_BF16;
    if (!ok_acc || !ok_sum)
        return 0;
    if (c->accumulator == c->summand)
        return c->cast == LMK_CAST_NONE;
    /* mixed pairs: only a float32 accumulator with a half summand */
    return c->accumulator == LMK_F32 && c->cast != LMK_CAST_NONE;
}

int lmk_accumulate_cpu(const lmk_accum_case *c, double summand_value, long long count, double *acc)
{
    if (!c || !acc || count < 0 || !valid_case(c))
        return LMK_INVALID;
    double summand = round_to(c->summand, summand_value);
    /* Implicit and explicit casts give the same arithmetic: the half summand is
     * exactly representable in float32, so both add it as a float32. */
    double sum = round_to(c->accumulator, *acc);
    for (long long i = 0; i < count; i++)
        sum = round_to(c->accumulator, sum + summand); /* exact in double, then one rounding */
    *acc = sum;
    return LMK_OK;
}

#ifndef LMPERF_HAVE_CUDA
#include <stdio.h>
int lmk_accumulate_cuda(const lmk_accum_case *c, double summand_value, long long count, double *acc,
                        char *errbuf, size_t errlen)
{
    (void)c, (void)summand_value, (void)count, (void)acc;
    snprintf(errbuf, errlen, "built without CUDA");
    return LMK_UNSUPPORTED;
}
#endif
