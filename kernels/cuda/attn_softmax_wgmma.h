/* Attention naive_fused's two kernels (backend.h attn_scores_softmax,
 * attn_dp_softmax_bwd) on Hopper warpgroup MMA (cuda/attn_softmax_wgmma.cu,
 * compiled for sm_90a only): an internal alternative to the mma.sync
 * kernels of cuda/attn_gemm16.cu, which decides when to call it. Same
 * contract and the same per-element arithmetic: scores and dP rounded to
 * 16 bits as their GEMMs store them, the softmax's exponentials, maxima and
 * sums in the mma.sync kernel's order; the products' float32 additions over
 * 16-wide slices in wgmma's order. */
#ifndef LMK_ATTN_SOFTMAX_WGMMA_H
#define LMK_ATTN_SOFTMAX_WGMMA_H

#include <stdint.h>

#include "../backend.h" /* lmk_heads_at */
#include "../dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero when the two entry points below take the shape: bf16 or fp16,
 * dh 64 or 128, T a positive multiple of 128. The caller checks the device
 * (compute capability 9.0: sm_90a code runs there only). */
int lmk_attn_softmax_wgmma_shape(lmk_dtype dt, int T, int dh);

/* p (batch, T, T) = the causal softmax of round(alpha · q kᵀ) (rows up to
 * the end of their 64-column tile: zeros right of the diagonal, the rest of
 * the row untouched) and o = p v, o's (T, dh) matrices where o_at says;
 * q, k, v (batch, T, dh) contiguous. On stream. Tensors p, q, k, v 16-byte
 * aligned, o 4-byte. *smem_set: the caller's record of the kernels whose
 * shared-memory limit is already raised (bits 8…15 of it; the other bits
 * are left alone). Returns LMK_OK, LMK_INVALID (shape) or LMK_DEVICE (a
 * CUDA call failed; the launch is checked by the caller). */
int lmk_attn_scores_softmax_wgmma(void *p, void *o, lmk_heads_at o_at, const void *q, const void *k, const void *v,
                                  lmk_dtype dt, int batch, int T, int dh, float alpha, uint32_t *smem_set,
                                  void *stream);

/* ds (batch, T, T) = p ⊙ (round(dout vᵀ) − D) for j ≤ i, 0 for i < j up to
 * the end of row i's 64-column tile (the rest untouched), D_i = dout_i ·
 * o_i, and dq (batch, T, dh) = scale · ds k; dout's and o's (T, dh)
 * matrices where dout_at and o_at say, v, k, dq contiguous; p read in its
 * causal tiles only. Alignment, smem_set and returns as above (o 4-byte,
 * the others 16-byte). */
int lmk_attn_dp_softmax_bwd_wgmma(void *ds, void *dq, const void *dout, lmk_heads_at dout_at, const void *v,
                                  const void *k, const void *p, const void *o, lmk_heads_at o_at, lmk_dtype dt,
                                  int batch, int T, int dh, float scale, uint32_t *smem_set, void *stream);

#ifdef __cplusplus
}
#endif

#endif
