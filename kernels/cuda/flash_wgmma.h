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
 * and takes s: fp16/bf16, d 64 or 128, B·H ≤ 65535, the current device has
 * compute capability 9.0 (the only one sm_90a code runs on), and either the
 * grid fills every SM with two 128-query blocks or the split blocks are
 * switched on for s's head dim (LMK_FLASH_WGMMA_SPLIT_D64 / _D128). */
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
