/* Causal softmax over the rows of score matrices (naive attention).
 *
 *   forward : p (batch, T, T)[r, i, j] = exp(s_ij − max) / Σ_{j' ≤ i} … for
 *             j ≤ i, 0 for j > i.
 *   backward: ds_ij = p_ij (dp_ij − Σ_k dp_ik p_ik) for j ≤ i, 0 above.
 * One warp per row, any T; in place (p == s, ds == dp) allowed: each
 * element is read before it is written by the same thread. */
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

// p (rows, T), s (rows, T); rows = batch · T
__global__ void softmax_causal_fwd_kernel(float *p, const float *s, size_t rows, int T)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    const float *sr = s + r * T;
    float *pr = p + r * T;
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32)
        mx = fmaxf(mx, sr[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= i; j += 32)
        sum += expf(sr[j] - mx);
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
    for (int j = lane; j < T; j += 32)
        pr[j] = j <= i ? expf(sr[j] - mx) * inv : 0.0f;
}

// ds (rows, T), dp (rows, T), p (rows, T)
__global__ void softmax_causal_bwd_kernel(float *ds, const float *dp, const float *p, size_t rows,
                                          int T)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    const float *dpr = dp + r * T, *pr = p + r * T;
    float *dsr = ds + r * T;
    float dot = 0.0f;
    for (int j = lane; j <= i; j += 32)
        dot += dpr[j] * pr[j];
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32)
        dsr[j] = j <= i ? pr[j] * (dpr[j] - dot) : 0.0f;
}

int cuda_softmax_causal_fwd(lmk_backend *b, float *p, const float *s, int batch, int T)
{
    cuda_state *st = CST(b);
    if (batch <= 0 || T <= 0)
        return LMK_INVALID;
    size_t rows = (size_t)batch * T;
    softmax_causal_fwd_kernel<<<(unsigned)((rows + SM_WARPS - 1) / SM_WARPS), 32 * SM_WARPS, 0,
                                st->stream>>>(p, s, rows, T);
    LAUNCH_CHECK(st, "softmax_causal_fwd_kernel");
    return LMK_OK;
}

int cuda_softmax_causal_bwd(lmk_backend *b, float *ds, const float *dp, const float *p,
                            int batch, int T)
{
    cuda_state *st = CST(b);
    if (batch <= 0 || T <= 0)
        return LMK_INVALID;
    size_t rows = (size_t)batch * T;
    softmax_causal_bwd_kernel<<<(unsigned)((rows + SM_WARPS - 1) / SM_WARPS), 32 * SM_WARPS, 0,
                                st->stream>>>(ds, dp, p, rows, T);
    LAUNCH_CHECK(st, "softmax_causal_bwd_kernel");
    return LMK_OK;
}
