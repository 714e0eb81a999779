/* The cuda backend's attention ops (the flash kernels of flash_attn.cu on
 * the backend's stream, so they order with the other ops and are captured
 * in CUDA graphs) and cast_float, the exact 16-bit → float32 widening that
 * the model uses for flash attention's 16-bit outputs. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>

#include "cuda_internal.cuh"

/* out (n) = float(x (n)); exact for bf16 and fp16. */
template <typename T>
__global__ void cast_float_kernel(float *out, const T *x, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if constexpr (std::is_same<T, __half>::value)
            out[i] = __half2float(x[i]);
        else
            out[i] = __bfloat162float(x[i]);
    }
}

int cuda_cast_float(lmk_backend *b, float *out, const void *x16, size_t n, lmk_round fmt)
{
    cuda_state *st = CST(b);
    if (fmt != LMK_ROUND_BF16 && fmt != LMK_ROUND_FP16)
        return LMK_INVALID;
    if (n == 0)
        return LMK_OK;
    unsigned blocks = grid_for(n, 256, 132u * 16u);
    if (fmt == LMK_ROUND_BF16)
        cast_float_kernel<__nv_bfloat16><<<blocks, 256, 0, st->stream>>>(out, (const __nv_bfloat16 *)x16, n);
    else
        cast_float_kernel<__half><<<blocks, 256, 0, st->stream>>>(out, (const __half *)x16, n);
    LAUNCH_CHECK(st, "cast_float_kernel");
    return LMK_OK;
}

/* The flash kernels report a failed launch as LMK_DEVICE without a text:
 * name the call in the backend's last error. */
static int attn_status(cuda_state *st, int rc, const char *what, const lmk_attn_shape *s)
{
    if (rc == LMK_OK)
        return rc;
    cudaError_t e = cudaGetLastError();
    snprintf(st->last_error, sizeof st->last_error, "%s (B %d H %d T %d d %d, %s): %s", what, s->B, s->H, s->T,
             s->d, lmk_dtype_name(s->dtype), e != cudaSuccess ? cudaGetErrorString(e) : lmk_status_text(rc));
    return rc;
}

int cuda_attn_fwd(lmk_backend *b, void *o, float *lse, const void *q, const void *k, const void *v,
                  const lmk_attn_shape *s)
{
    cuda_state *st = CST(b);
    return attn_status(st, lmk_flash_attn_fwd(o, lse, q, k, v, s, st->stream), "lmk_flash_attn_fwd", s);
}

int cuda_attn_bwd(lmk_backend *b, void *dq, void *dk, void *dv, float *work, const void *dout, const void *q,
                  const void *k, const void *v, const void *o, const float *lse, const lmk_attn_shape *s)
{
    cuda_state *st = CST(b);
    return attn_status(st, lmk_flash_attn_bwd(dq, dk, dv, work, dout, q, k, v, o, lse, s, st->stream),
                       "lmk_flash_attn_bwd", s);
}
