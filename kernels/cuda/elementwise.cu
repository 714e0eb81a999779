/* Elementwise ops: SwiGLU forward/backward, add, scale.
 *
 *   swiglu fwd: out = round(round(silu(a)) · g), silu(a) = a σ(a) (the
 *               roundings to the 16-bit dtype; none for float, as the cpu)
 *   swiglu bwd: da = dout · g · σ(a) (1 + a (1 − σ(a))), dg = dout · a σ(a)
 *   add       : y = x1 + x2, x2 float or 16-bit (y may alias a float input)
 * Tensors of one dtype (float, bf16, fp16) per op, float32 math.
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

// out (n), a (n), g (n) of E
template <typename E>
__global__ void swiglu_fwd_kernel(E *out, const E *a, const E *g, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float ai = ld_f(a, i);
        float silu = ai * sigmoid_dev(ai);
        if (sizeof(E) == 2) { /* autocast: silu's half output, then the half product */
            E sh;
            st_f(&sh, 0, silu);
            silu = ld_f(&sh, 0);
        }
        st_f(out, i, silu * ld_f(g, i));
    }
}

// da (n), dg (n), dout (n), a (n), g (n) of E
template <typename E>
__global__ void swiglu_bwd_kernel(E *da, E *dg, const E *dout, const E *a, const E *g, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float ai = ld_f(a, i), gi = ld_f(g, i), dy = ld_f(dout, i);
        float s = sigmoid_dev(ai);
        st_f(dg, i, dy * ai * s);
        st_f(da, i, dy * gi * s * (1.0f + ai * (1.0f - s)));
    }
}

// y (n) = x1 (n) + x2 (n, E)
template <typename E>
__global__ void add_kernel(float *y, const float *x1, const E *x2, size_t n)
{
    GRID_STRIDE(i, n)
    y[i] = x1[i] + ld_f(x2, i);
}

// x (n) *= s
__global__ void scale_kernel(float *x, size_t n, float s)
{
    GRID_STRIDE(i, n)
    x[i] *= s;
}

int cuda_swiglu_fwd(lmk_backend *b, void *out, const void *a, const void *g, lmk_dtype dt, size_t n)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    unsigned blocks = grid_for(n, EW_THREADS, EW_MAX_BLOCKS);
    DT_DISPATCH(dt, E, swiglu_fwd_kernel<E><<<blocks, EW_THREADS, 0, st->stream>>>(
                           (E *)out, (const E *)a, (const E *)g, n));
    LAUNCH_CHECK(st, "swiglu_fwd_kernel");
    return LMK_OK;
}

int cuda_swiglu_bwd(lmk_backend *b, void *da, void *dg, const void *dout, const void *a,
                    const void *g, lmk_dtype dt, size_t n)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    unsigned blocks = grid_for(n, EW_THREADS, EW_MAX_BLOCKS);
    DT_DISPATCH(dt, E, swiglu_bwd_kernel<E><<<blocks, EW_THREADS, 0, st->stream>>>(
                           (E *)da, (E *)dg, (const E *)dout, (const E *)a, (const E *)g, n));
    LAUNCH_CHECK(st, "swiglu_bwd_kernel");
    return LMK_OK;
}

int cuda_add(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype dt, size_t n)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    unsigned blocks = grid_for(n, EW_THREADS, EW_MAX_BLOCKS);
    DT_DISPATCH(dt, E, add_kernel<E><<<blocks, EW_THREADS, 0, st->stream>>>(y, x1, (const E *)x2, n));
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
