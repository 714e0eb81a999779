/* The naive attention's causal GEMMs with a (T, dh) output (backend.h
 * attn_causal_gemm, LMK_CAUSAL_MIX_T: dV = Pᵀ·dO, dK = dSᵀ·Q; LMK_CAUSAL_MIX:
 * O = P·V, dQ = dS·K) on Hopper warpgroup MMA (cuda/attn_mix_wgmma.cu,
 * compiled for sm_90a only): an internal alternative to the mma.sync
 * kernels in cuda/attn_gemm16.cu, which decides when to call it. */
#ifndef LMK_ATTN_MIX_WGMMA_H
#define LMK_ATTN_MIX_WGMMA_H

#include <stdint.h>

#include "../backend.h" /* lmk_heads_at */
#include "../dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero when lmk_attn_mix_wgmma takes the shape: bf16 or fp16, dh 64 or
 * 128, T a positive multiple of 128. The caller checks the device (compute
 * capability 9.0: sm_90a code runs there only). */
int lmk_attn_mix_wgmma_shape(lmk_dtype dt, int T, int dh);

/* c (batch, T, dh) = alpha · aᵀ · bm (trans) or alpha · a · bm on stream, a
 * (batch, T, T) read in its causal tiles only (row i up to the end of its
 * 64-column tile; zeros above the diagonal inside those tiles), bm's (T, dh)
 * matrices where bm_at says (a valid layout, backend.h); float32
 * accumulation, one rounding per stored element. Tensors 16-byte aligned. *smem_set: the caller's record of the kernels whose
 * shared-memory limit is already raised (one bit per dtype, dh and kind;
 * starts at 0). Returns LMK_OK, or LMK_INVALID (shape) or LMK_DEVICE (a CUDA
 * call failed; the launch is checked by the caller). */
int lmk_attn_mix_wgmma(void *c, const void *a, const void *bm, lmk_heads_at bm_at, int trans, lmk_dtype dt, int batch,
                       int T, int dh, float alpha, uint32_t *smem_set, void *stream);

#ifdef __cplusplus
}
#endif

#endif
