/* Where the per-head (T, dh) matrices of a 16-bit attention tensor lie
 * (backend.h lmk_heads_at), for the kernels of attn_gemm16.cu and
 * attn_mix_wgmma.cu. */
#ifndef LMK_ATTN_HEADS_CUH
#define LMK_ATTN_HEADS_CUH

#include <stddef.h>

#include "../backend.h" /* lmk_heads_at */

/* The (T, DH) matrix of batch index bh (b·heads + h) in a tensor laid out as
 * at: rows at.ld elements apart, Tn rows per batch entry. */
template <typename T, int DH> __device__ __forceinline__ T *head_rows(T *x, lmk_heads_at at, int bh, int Tn)
{
    return x + (size_t)(bh / at.heads) * Tn * at.ld + (size_t)(bh % at.heads) * DH;
}

#endif
