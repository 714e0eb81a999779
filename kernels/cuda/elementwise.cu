/* Elementwise ops: SwiGLU forward/backward, add, scale.
 *
 *   swiglu fwd: out = round(round(silu(a)) · g), silu(a) = a σ(a) (rounding
 *               only when out_round is not NONE, as the cpu does)
 *   swiglu bwd: da = dout · g · σ(a) (1 + a (1 − σ(a))), dg = dout · a σ(a)
 *   add       : y = x1 + x2 (y may alias either input)
 *   scale     : x *= s
 * Grid-stride loops over n elements (n may exceed 2³¹). */
#include "cuda_internal.cuh"

#define EW_THREADS 256
#define EW_MAX_BLOCKS 65535u

#define GRID_STRIDE(i, n)                                                        \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);       \
         i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float sigmoid_dev(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

// out (n), a (n), g (n)
__global__ void swiglu_fwd_kernel(float *out, const float *a, const float *g, size_t n, int r)
{
    GRID_STRIDE(i, n)
    {
        float silu = a[i] * sigmoid_dev(a[i]);
        if (r != LMK_ROUND_NONE)
            silu = round_value_dev(silu, r);
        out[i] = round_value_dev(silu * g[i], r);
    }
}

// da (n), dg (n), dout (n), a (n), g (n)
__global__ void swiglu_bwd_kernel(float *da, float *dg, const float *dout, const float *a,
                                  const float *g, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float s = sigmoid_dev(a[i]);
        float dy = dout[i], gi = g[i], ai = a[i];
        dg[i] = dy * ai * s;
        da[i] = dy * gi * s * (1.0f + ai * (1.0f - s));
    }
}

// y (n) = x1 (n) + x2 (n)
__global__ void add_kernel(float *y, const float *x1, const float *x2, size_t n)
{
    GRID_STRIDE(i, n)
    y[i] = x1[i] + x2[i];
}

// x (n) *= s
__global__ void scale_kernel(float *x, size_t n, float s)
{
    GRID_STRIDE(i, n)
    x[i] *= s;
}

int cuda_swiglu_fwd(lmk_backend *b, float *out, const float *a, const float *g, size_t n,
                    lmk_round out_round)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    swiglu_fwd_kernel<<<grid_for(n, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0, st->stream>>>(
        out, a, g, n, out_round);
    LAUNCH_CHECK(st, "swiglu_fwd_kernel");
    return LMK_OK;
}

int cuda_swiglu_bwd(lmk_backend *b, float *da, float *dg, const float *dout, const float *a,
                    const float *g, size_t n)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    swiglu_bwd_kernel<<<grid_for(n, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0, st->stream>>>(
        da, dg, dout, a, g, n);
    LAUNCH_CHECK(st, "swiglu_bwd_kernel");
    return LMK_OK;
}

int cuda_add(lmk_backend *b, float *y, const float *x1, const float *x2, size_t n)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    add_kernel<<<grid_for(n, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0, st->stream>>>(y, x1, x2,
                                                                                      n);
    LAUNCH_CHECK(st, "add_kernel");
    return LMK_OK;
}

int cuda_scale(lmk_backend *b, float *x, size_t n, float s)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    scale_kernel<<<grid_for(n, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0, st->stream>>>(x, n, s);
    LAUNCH_CHECK(st, "scale_kernel");
    return LMK_OK;
}
