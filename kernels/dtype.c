/* Names and sizes of element types. */
#include "dtype.h"

#include <string.h>

#include "status.h"

static const struct {
    const char *name;
    const char *short_name;
    size_t size;
} dtype_table[LMK_DTYPE_COUNT] = {
    [LMK_F32] = {"float32", "fp32", 4},
    [LMK_F16] = {"float16", "fp16", 2},
    [LMK_BF16] = {"bfloat16", "bf16", 2},
    [LMK_I32] = {"int32", "i32", 4},
};

const char *lmk_dtype_name(lmk_dtype dtype)
{
    return (unsigned)dtype < LMK_DTYPE_COUNT ? dtype_table[dtype].name : "unknown";
}

size_t lmk_dtype_size(lmk_dtype dtype)
{
    return (unsigned)dtype < LMK_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

int lmk_dtype_parse(const char *name, lmk_dtype *dtype)
{
    for (int i = 0; i < LMK_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_table[i].name) == 0 || strcmp(name, dtype_table[i].short_name) == 0) {
            *dtype = (lmk_dtype)i;
            return LMK_OK;
        }
    }
    return LMK_INVALID;
}
