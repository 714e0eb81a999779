/* Flash-attention forward on Hopper warpgroup MMA (cuda/flash_wgmma.cu,
 * compiled for sm_90a only): an internal alternative to the mma.sync forward
 * in cuda/flash_attn.cu, which decides when to call it. */
#ifndef LMK_FLASH_WGMMA_H
#define LMK_FLASH_WGMMA_H

#include "../attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero when the kernel is switched on (LMK_FLASH_WGMMA in flash_wgmma.cu)
 * and takes s: fp16/bf16, B·H ≤ 65535, the current device has compute
 * capability 9.0 (the only one sm_90a code runs on), and s's head dim is
 * switched on for its grid size (LMK_FLASH_WGMMA_DIMS for grids of at least
 * two 128-query blocks per SM, LMK_FLASH_WGMMA_SPLIT_DIMS for smaller ones). */
int lmk_flash_wgmma_usable(const lmk_attn_shape *s);

/* As lmk_flash_attn_fwd (attention.h) for shapes lmk_flash_wgmma_usable
 * accepts; tensors 16-byte aligned. Returns LMK_OK, LMK_INVALID (shape,
 * device) or LMK_DEVICE (tensor maps or launch failed). */
int lmk_flash_wgmma_fwd(void *o, float *lse, const void *q, const void *k, const void *v,
                        const lmk_attn_shape *s, void *stream);

#ifdef __cplusplus
}
#endif

#endif
