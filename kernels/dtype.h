/* Element types of tensors and experiments. */
#ifndef LMK_DTYPE_H
#define LMK_DTYPE_H

#include <stddef.h>

typedef enum lmk_dtype {
    LMK_F32 = 0,
    LMK_F16 = 1,
    LMK_BF16 = 2,
    LMK_I32 = 3,
    LMK_DTYPE_COUNT
} lmk_dtype;

/* "float32", "float16", "bfloat16", "int32". */
const char *lmk_dtype_name(lmk_dtype dtype);
/* Bytes per element. */
size_t lmk_dtype_size(lmk_dtype dtype);
/* Parses "float32"/"fp32", "float16"/"fp16", "bfloat16"/"bf16", "int32".
 * Returns 0 and sets *dtype, or LMK_INVALID. */
int lmk_dtype_parse(const char *name, lmk_dtype *dtype);

#endif
