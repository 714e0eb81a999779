/* Causal softmax over the rows of score matrices (naive attention).
 *
 *   forward : p (batch, T, T)[r, i, j] = exp(s_ij − max) / Σ_{j' ≤ i} … for
 *             j ≤ i, 0 for j > i.
 *   backward: ds_ij = p_ij (dp_ij − Σ_k dp_ik p_ik) for j ≤ i, 0 above.
 * Tensors of one dtype (float, bf16 or fp16), float32 math, one rounding
 * per stored element. One warp per row, any T; in place (p == s, ds == dp)
 * allowed: each element is read before it is written by the same thread.
 * When T is a multiple of the 16-byte vector (8 16-bit or 4 float elements)
 * and the tensors are 16-byte aligned, each lane moves 16 bytes per access
 * (the same math; the row sums are added in another order, so a value may
 * differ from the scalar kernel's in the last place), reads only the vectors
 * that hold entries j ≤ i and writes the zeros above by whole vectors. Rows
 * of at most 32·8 vectors stay in registers between the passes (one read of
 * each input; bit for bit the vector kernels' results: the same operations
 * in the same order, the backward's dot product in explicit FMAs).
 * zero_block (backend.h): row i writes only j < row_end(i) (rounded up to
 * whole vectors), the end of its causal block; the blocked attention GEMMs
 * read nothing beyond, so the zeros there are not written. */
#include "cuda_internal.cuh"

#define SM_WARPS 8

// the end of row i's written entries: its causal block's end (zb in (0, T)), else T
__device__ __forceinline__ int row_end(int i, int T, int zb)
{
    if (zb <= 0 || zb >= T)
        return T;
    int end = (i / zb + 1) * zb;
    return end < T ? end : T;
}

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
__global__ void softmax_causal_fwd_kernel(T_ *p, const T_ *s, size_t rows, int T, int zb)
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
    for (int j = lane, end = row_end(i, T, zb); j < end; j += 32)
        st_f(pr, j, j <= i ? expf(ld_f(sr, j) - mx) * inv : 0.0f);
}

// ds (rows, T), dp (rows, T), p (rows, T) of T_
template <typename T_>
__global__ void softmax_causal_bwd_kernel(T_ *ds, const T_ *dp, const T_ *p, size_t rows, int T, int zb)
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
    for (int j = lane, end = row_end(i, T, zb); j < end; j += 32)
        st_f(dsr, j, j <= i ? ld_f(pr, j) * (ld_f(dpr, j) - dot) : 0.0f);
}

// as softmax_causal_fwd_kernel, 16-byte vectors; T a multiple of vec16<T_>::n
template <typename T_>
__global__ void softmax_causal_fwd_vec_kernel(T_ *p, const T_ *s, size_t rows, int T, int zb)
{
    constexpr int VE = vec16<T_>::n;
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    int valid = i / VE + 1, nvec = (row_end(i, T, zb) + VE - 1) / VE; /* vectors holding j ≤ i; written */
    const T_ *sr = s + r * T;
    T_ *pr = p + r * T;
    float mx = -INFINITY;
#pragma unroll 4
    for (int v = lane; v < valid; v += 32) {
        float f[VE];
        ld_vec(sr, (size_t)v * VE, f);
#pragma unroll
        for (int k = 0; k < VE; k++)
            if (v * VE + k <= i)
                mx = fmaxf(mx, f[k]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll 4
    for (int v = lane; v < valid; v += 32) {
        float f[VE];
        ld_vec(sr, (size_t)v * VE, f);
#pragma unroll
        for (int k = 0; k < VE; k++)
            if (v * VE + k <= i)
                sum += expf(f[k] - mx);
    }
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
#pragma unroll 4
    for (int v = lane; v < nvec; v += 32) {
        float f[VE];
        if (v < valid) {
            ld_vec(sr, (size_t)v * VE, f);
#pragma unroll
            for (int k = 0; k < VE; k++)
                f[k] = v * VE + k <= i ? expf(f[k] - mx) * inv : 0.0f;
        } else {
#pragma unroll
            for (int k = 0; k < VE; k++)
                f[k] = 0.0f;
        }
        st_vec(pr, (size_t)v * VE, f);
    }
}

// as softmax_causal_bwd_kernel, 16-byte vectors; T a multiple of vec16<T_>::n
template <typename T_>
__global__ void softmax_causal_bwd_vec_kernel(T_ *ds, const T_ *dp, const T_ *p, size_t rows, int T, int zb)
{
    constexpr int VE = vec16<T_>::n;
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    int valid = i / VE + 1, nvec = (row_end(i, T, zb) + VE - 1) / VE;
    const T_ *dpr = dp + r * T, *pr = p + r * T;
    T_ *dsr = ds + r * T;
    float dot = 0.0f;
#pragma unroll 4
    for (int v = lane; v < valid; v += 32) {
        float a[VE], b[VE];
        ld_vec(dpr, (size_t)v * VE, a);
        ld_vec(pr, (size_t)v * VE, b);
#pragma unroll
        for (int k = 0; k < VE; k++)
            if (v * VE + k <= i)
                dot = __fmaf_rn(a[k], b[k], dot);
    }
    dot = warp_sum(dot);
#pragma unroll 4
    for (int v = lane; v < nvec; v += 32) {
        float a[VE], b[VE];
        if (v < valid) {
            ld_vec(dpr, (size_t)v * VE, a);
            ld_vec(pr, (size_t)v * VE, b);
#pragma unroll
            for (int k = 0; k < VE; k++)
                a[k] = v * VE + k <= i ? b[k] * (a[k] - dot) : 0.0f;
        } else {
#pragma unroll
            for (int k = 0; k < VE; k++)
                a[k] = 0.0f;
        }
        st_vec(dsr, (size_t)v * VE, a);
    }
}

// as softmax_causal_fwd_vec_kernel with the row in registers: T ≤ 32·NV vectors
template <typename T_, int NV>
__global__ void softmax_causal_fwd_reg_kernel(T_ *p, const T_ *s, size_t rows, int T, int zb)
{
    constexpr int VE = vec16<T_>::n;
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    int valid = i / VE + 1, nvec = (row_end(i, T, zb) + VE - 1) / VE;
    const T_ *sr = s + r * T;
    T_ *pr = p + r * T;
    float x[NV][VE];
    float mx = -INFINITY;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (v < valid)
            ld_vec(sr, (size_t)v * VE, x[q]);
    }
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (v < valid)
#pragma unroll
            for (int k = 0; k < VE; k++)
                if (v * VE + k <= i)
                    mx = fmaxf(mx, x[q][k]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (v < valid)
#pragma unroll
            for (int k = 0; k < VE; k++)
                if (v * VE + k <= i) {
                    x[q][k] = expf(x[q][k] - mx);
                    sum += x[q][k];
                }
    }
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (v >= nvec)
            break;
        float o[VE];
#pragma unroll
        for (int k = 0; k < VE; k++)
            o[k] = v < valid && v * VE + k <= i ? x[q][k] * inv : 0.0f;
        st_vec(pr, (size_t)v * VE, o);
    }
}

// as softmax_causal_bwd_vec_kernel with the rows in registers: T ≤ 32·NV vectors
template <typename T_, int NV>
__global__ void softmax_causal_bwd_reg_kernel(T_ *ds, const T_ *dp, const T_ *p, size_t rows, int T, int zb)
{
    constexpr int VE = vec16<T_>::n;
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    int valid = i / VE + 1, nvec = (row_end(i, T, zb) + VE - 1) / VE;
    const T_ *dpr = dp + r * T, *pr = p + r * T;
    T_ *dsr = ds + r * T;
    float a[NV][VE], b[NV][VE];
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (v < valid) {
            ld_vec(dpr, (size_t)v * VE, a[q]);
            ld_vec(pr, (size_t)v * VE, b[q]);
        }
    }
    float dot = 0.0f;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (v < valid)
#pragma unroll
            for (int k = 0; k < VE; k++)
                if (v * VE + k <= i)
                    dot = __fmaf_rn(a[q][k], b[q][k], dot);
    }
    dot = warp_sum(dot);
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (v >= nvec)
            break;
        float o[VE];
#pragma unroll
        for (int k = 0; k < VE; k++)
            o[k] = v < valid && v * VE + k <= i ? b[q][k] * (a[q][k] - dot) : 0.0f;
        st_vec(dsr, (size_t)v * VE, o);
    }
}

// the vector kernels apply: T a multiple of the vector, every tensor 16-byte aligned
static int softmax_vec_ok(lmk_dtype dt, int T, const void *a, const void *b, const void *c)
{
    int ve = dt == LMK_F32 ? 4 : 8;
    return T % ve == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15) == 0;
}

int cuda_softmax_causal_fwd(lmk_backend *b, void *p, const void *s, lmk_dtype dt, int batch, int T,
                            int zero_block)
{
    cuda_state *st = CST(b);
    if (batch <= 0 || T <= 0)
        return LMK_INVALID;
    size_t rows = (size_t)batch * T;
    unsigned blocks = (unsigned)((rows + SM_WARPS - 1) / SM_WARPS);
    int nvec = T / (dt == LMK_F32 ? 4 : 8);
    if (softmax_vec_ok(dt, T, p, s, s) && nvec <= 32 * 4)
        DT_DISPATCH(dt, E, softmax_causal_fwd_reg_kernel<E, 4><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)p, (const E *)s, rows, T, zero_block))
    else if (softmax_vec_ok(dt, T, p, s, s) && nvec <= 32 * 8)
        DT_DISPATCH(dt, E, softmax_causal_fwd_reg_kernel<E, 8><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)p, (const E *)s, rows, T, zero_block))
    else if (softmax_vec_ok(dt, T, p, s, s))
        DT_DISPATCH(dt, E, softmax_causal_fwd_vec_kernel<E><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)p, (const E *)s, rows, T, zero_block))
    else
        DT_DISPATCH(dt, E, softmax_causal_fwd_kernel<E><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)p, (const E *)s, rows, T, zero_block));
    LAUNCH_CHECK(st, "softmax_causal_fwd_kernel");
    return LMK_OK;
}

int cuda_softmax_causal_bwd(lmk_backend *b, void *ds, const void *dp, const void *p, lmk_dtype dt,
                            int batch, int T, int zero_block)
{
    cuda_state *st = CST(b);
    if (batch <= 0 || T <= 0)
        return LMK_INVALID;
    size_t rows = (size_t)batch * T;
    unsigned blocks = (unsigned)((rows + SM_WARPS - 1) / SM_WARPS);
    int nvec = T / (dt == LMK_F32 ? 4 : 8);
    if (softmax_vec_ok(dt, T, ds, dp, p) && nvec <= 32 * 4)
        DT_DISPATCH(dt, E, softmax_causal_bwd_reg_kernel<E, 4><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)ds, (const E *)dp, (const E *)p, rows, T, zero_block))
    else if (softmax_vec_ok(dt, T, ds, dp, p) && nvec <= 32 * 8)
        DT_DISPATCH(dt, E, softmax_causal_bwd_reg_kernel<E, 8><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)ds, (const E *)dp, (const E *)p, rows, T, zero_block))
    else if (softmax_vec_ok(dt, T, ds, dp, p))
        DT_DISPATCH(dt, E, softmax_causal_bwd_vec_kernel<E><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)ds, (const E *)dp, (const E *)p, rows, T, zero_block))
    else
        DT_DISPATCH(dt, E, softmax_causal_bwd_kernel<E><<<blocks, 32 * SM_WARPS, 0, st->stream>>>(
                               (E *)ds, (const E *)dp, (const E *)p, rows, T, zero_block));
    LAUNCH_CHECK(st, "softmax_causal_bwd_kernel");
    return LMK_OK;
}
