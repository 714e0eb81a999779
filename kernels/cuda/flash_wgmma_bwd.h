/* Flash-attention backward on Hopper warpgroup MMA (cuda/flash_wgmma_bwd.cu,
 * compiled for sm_90a only): an internal alternative to the mma.sync single
 * pass in cuda/flash_attn.cu, which decides when to call it. */
#ifndef LMK_FLASH_WGMMA_BWD_H
#define LMK_FLASH_WGMMA_BWD_H

#include "../attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero when the kernel is switched on (LMK_FLASH_WGMMA_BWD in
 * flash_wgmma_bwd.cu) and s can run here: the single pass (s->atomic_dq),
 * fp16/bf16, d 64 or 128, T ≥ 128 (a tensor map's box may not exceed its
 * tensor), B·H ≤ 65535, B·H·T < 2^31, on a device of compute
 * capability 9.0 (the only one sm_90a code runs on). */
int lmk_flash_wgmma_bwd_usable(const lmk_attn_shape *s);

/* Non-zero when s is usable and its grid has at least 0.96 128-key blocks
 * per multiprocessor (LMK_FLASH_WGMMA_BWD_MIN_BLOCKS_PCT): the shapes
 * flash_attn.cu's single pass hands to this kernel. On smaller grids the
 * longest causal block sets the time and the mma.sync single pass (64-key
 * blocks, split query loop) is taken; one head at T 16384 (128 blocks on the
 * H100's 132 SMs) already runs faster here (PERF.md). */
int lmk_flash_wgmma_bwd_preferred(const lmk_attn_shape *s);

/* The single-pass backward for shapes lmk_flash_wgmma_bwd_usable accepts.
 * dq, dk, dv: (B, H, T, d) out; dqacc: (B, H, T, d) float32, zeroed by the
 * caller, left holding dQ/scale; dsum: (B, H, T) float32, D = rowsum(dO∘O),
 * computed by the caller; dout, q, k, v: (B, H, T, d); lse: (B, H, T). Every
 * pointer 16-byte aligned. Returns LMK_OK, LMK_INVALID (shape, device,
 * alignment) or LMK_DEVICE (tensor maps or launch failed). */
int lmk_flash_wgmma_bwd(void *dq, void *dk, void *dv, float *dqacc, const float *dsum,
                        const void *dout, const void *q, const void *k, const void *v,
                        const float *lse, const lmk_attn_shape *s, void *stream);

#ifdef __cplusplus
}
#endif

#endif
