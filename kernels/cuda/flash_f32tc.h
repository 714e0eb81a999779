/* fp32 flash attention on tensor cores with fp32 accuracy (cuda/flash_f32tc.cu):
 * every product as 3xTF32 (mma.sync m16n8k8 tf32, fp32 accumulate), PyTorch
 * memory-efficient SDPA's own fp32 method. An internal alternative to the
 * CUDA-core fp32 kernels in cuda/flash_attn.cu, which decides when to call it. */
#ifndef LMK_FLASH_F32TC_H
#define LMK_FLASH_F32TC_H

#include "../attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero when the kernels are switched on (LMK_FLASH_F32TC in
 * flash_f32tc.cu) and s can run here: fp32, d one of LMK_ATTN_HEAD_DIMS,
 * T ≤ 65535·64 (the grid's y dimension counts blocks of ≥ 64 queries or keys). The
 * caller checks 16-byte alignment. */
int lmk_flash_f32tc_usable(const lmk_attn_shape *s);

/* Forward. o: (B, H, T, d) out; lse: (B, H, T) out (natural log);
 * q, k, v: (B, H, T, d) in; every pointer 16-byte aligned. Returns LMK_OK,
 * LMK_INVALID (shape not usable) or LMK_DEVICE (launch failed). */
int lmk_flash_f32tc_fwd(float *o, float *lse, const float *q, const float *k, const float *v,
                        const lmk_attn_shape *s, void *stream);

/* The single-pass backward (one block per 64 keys; dQ by float32 atomics,
 * so its rounding order varies between runs). dq: (B, H, T, d) float32 out
 * (zeroed here, then gets scale·dS·K added); dk, dv: (B, H, T, d) out;
 * dsum: (B, H, T) out, D = rowsum(dO∘O) as computed here (in the arithmetic
 * of dP, so that dP − D cancels where it does exactly); dout, q, k, v, o:
 * (B, H, T, d); lse: (B, H, T) from the forward. Every pointer 16-byte
 * aligned. Returns as the forward. */
int lmk_flash_f32tc_bwd(float *dq, float *dk, float *dv, float *dsum, const float *dout,
                        const float *q, const float *k, const float *v, const float *o,
                        const float *lse, const lmk_attn_shape *s, void *stream);

#ifdef __cplusplus
}
#endif

#endif
