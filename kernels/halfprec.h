/* Half-precision storage formats emulated on the CPU with exact IEEE 754
 * round-to-nearest-even, so mixed-precision logic is testable without a GPU.
 *
 * fp16: binary16 (1 sign, 5 exponent, 10 fraction bits), subnormals, inf, nan.
 * bf16: the upper 16 bits of a binary32, rounded to nearest even.
 *
 * The *_round functions return the value of the nearest representable half
 * as a float (every fp16 and bf16 value is exactly representable in float). */
#ifndef LMK_HALFPREC_H
#define LMK_HALFPREC_H

#include <stdint.h>

typedef uint16_t lmk_fp16; /* raw binary16 bits */
typedef uint16_t lmk_bf16; /* raw bfloat16 bits */

lmk_fp16 lmk_fp16_from_double(double x);
float lmk_fp16_to_float(lmk_fp16 h);
lmk_bf16 lmk_bf16_from_double(double x);
float lmk_bf16_to_float(lmk_bf16 h);

/* x rounded to the nearest fp16 / bf16 value, returned as float. */
static inline float lmk_fp16_round(double x) { return lmk_fp16_to_float(lmk_fp16_from_double(x)); }
static inline float lmk_bf16_round(double x) { return lmk_bf16_to_float(lmk_bf16_from_double(x)); }

#endif
