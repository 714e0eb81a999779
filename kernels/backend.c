/* Backend-independent pieces: freeing a backend, exact float rounding to the
 * narrower formats used by the autocast emulation. */
#include "backend.h"

#include "round.h"

void lmk_backend_free(lmk_backend *b)
{
    if (b && b->destroy)
        b->destroy(b);
}

float lmk_round_value(float x, lmk_round r)
{
    switch (r) {
    case LMK_ROUND_TF32:
        return lmk_round_drop_bits(x, 13);
    case LMK_ROUND_BF16:
        return lmk_round_drop_bits(x, 16);
    case LMK_ROUND_FP16:
        return lmk_round_fp16f(x);
    case LMK_ROUND_NONE:
        break;
    }
    return x;
}
