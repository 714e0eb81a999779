/* Causal softmax over the rows of score matrices (naive attention).
 *
 *   forward : p (batch, T, T)[r, i, j] = exp(s_ij − max) / Σ_{j' ≤ i} … for
 *             j ≤ i, 0 for j > i.
 *   backward: ds_ij = p_ij (dp_ij − Σ_k dp_ik p_ik) for j ≤ i, 0 above.
 * Tensors of one dtype (float, bf16 or fp16), float32 math, one rounding
 * per stored element. One warp per row, any T; in place (p == s, ds == dp)
 * allowed: each element is read before it is written by the same thread. */
#include "cuda_internal.cuh"

#define SM_WARPS 8

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// p (rows, T), s (rows, T) of T_; float32 math, one rounding per stored p
template <typename T_>
__global__ void softmax_causal_fwd_kernel(T_ *p, const T_ *s, size_t rows, int T)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    const T_ *sr = s + r * T;
    T_ *pr = p + r * T;
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32)
        mx = fmaxf(mx, ld_f(sr, j));
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= i; j += 32)
        sum += expf(ld_f(sr, j) - mx);
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
    for (int j = lane; j < T; j += 32)
        st_f(pr, j, j <= i ? expf(ld_f(sr, j) - mx) * inv : 0.0f);
}

// ds (rows, T), dp (rows, T), p (rows, T) of T_
template <typename T_>
__global__ void softmax_causal_bwd_kernel(T_ *ds, const T_ *dp, const T_ *p, size_t rows, int T)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    const T_ *dpr = dp + r * T, *pr = p + r * T;
    T_ *dsr = ds + r * T;
    float dot = 0.0f;
    for (int j = lane; j <= i; j += 32)
        dot += ld_f(dpr, j) * ld_f(pr, j);
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32)
        st_f(dsr, j, j <= i ? ld_f(pr, j) * (ld_f(dpr, j) - dot) : 0.0f);
}

int cuda_softmax_causal_fwd(lmk_backend *b, void *p, const void *s, lmk_dtype dt, int batch, int T)
{
    cuda_state *st = CST(b);
    if (batch <= 0 || T <= 0)
        return LMK_INVALID;
    size_t rows = (size_t)batch * T;
    unsigned blocks = (unsigned)((rows + SM_WARPS - 1) / SM_WARPS);
    DT_DISPATCH(dt, E, softmax_causal_fwd_kernel<E><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                           (E *)p, (const E *)s, rows, T));
    LAUNCH_CHECK(st, "softmax_causal_fwd_kernel");
    return LMK_OK;
}

int cuda_softmax_causal_bwd(lmk_backend *b, void *ds, const void *dp, const void *p, lmk_dtype dt,
                            int batch, int T)
{
    cuda_state *st = CST(b);
    if (batch <= 0 || T <= 0)
        return LMK_INVALID;
    size_t rows = (size_t)batch * T;
    unsigned blocks = (unsigned)((rows + SM_WARPS - 1) / SM_WARPS);
    DT_DISPATCH(dt, E, softmax_causal_bwd_kernel<E><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                           (E *)ds, (const E *)dp, (const E *)p, rows, T));
    LAUNCH_CHECK(st, "softmax_causal_bwd_kernel");
    return LMK_OK;
}
