/* The mixed-precision accumulation experiment (CS336 mixed_precision_accumulation):
 * start an accumulator at 0 and add one summand `count` times.
 *
 *   accumulator   summand    cast       expected for 0.01 x 1000
 *   float32       float32    none       10.0001
 *   float16       float16    none        9.9531
 *   float32       float16    implicit   10.0021   (promoted by the + itself)
 *   float32       float16    explicit   10.0021   (converted first, then added)
 *
 * The CPU version emulates every rounding exactly (IEEE round-to-nearest-even);
 * the CUDA version runs the loop in one GPU thread with the device's own
 * __half / __nv_bfloat16 arithmetic. */
#ifndef LMK_ACCUMULATE_H
#define LMK_ACCUMULATE_H

#include "dtype.h"

typedef enum lmk_cast_kind {
    LMK_CAST_NONE = 0,     /* accumulator and summand of the same dtype */
    LMK_CAST_IMPLICIT = 1, /* acc += summand, promoted by the arithmetic */
    LMK_CAST_EXPLICIT = 2, /* acc += (acc dtype)summand, converted first */
} lmk_cast_kind;

typedef struct lmk_accum_case {
    lmk_dtype accumulator; /* LMK_F32, LMK_F16 or LMK_BF16 */
    lmk_dtype summand;     /* LMK_F32, LMK_F16 or LMK_BF16 */
    lmk_cast_kind cast;
} lmk_accum_case;

/* Runs one case on the CPU. summand_value is rounded to the summand dtype
 * first. *acc is in/out: the accumulator's start value (rounded to the
 * accumulator dtype), then its final value, so a long run can be split into
 * chunks. Returns 0, or LMK_INVALID for an unsupported pair (a wider summand
 * than accumulator) or count < 0; *acc is untouched on failure. */
int lmk_accumulate_cpu(const lmk_accum_case *c, double summand_value, long long count, double *acc);

/* The same on the current CUDA device (synchronises: not for use inside a
 * step). Returns 0, LMK_INVALID, or LMK_DEVICE with a message in errbuf. */
int lmk_accumulate_cuda(const lmk_accum_case *c, double summand_value, long long count, double *acc,
                        char *errbuf, size_t errlen);

#endif
