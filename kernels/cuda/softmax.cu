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
 * in the same order, the backward's dot product in explicit FMAs; only a
 * zero's sign may differ: the register backward writes +0).
 * zero_block (backend.h): row i writes only j < row_end(i) (rounded up to
 * whole vectors), the end of its causal block; the blocked attention GEMMs
 * read nothing beyond, so the zeros there are not written.
 * The exponential (softmax_exp): float32 tensors expf; 16-bit tensors 2^x by
 * the special-function unit (relative error ≈ 2^-22, far below their
 * rounding: a stored value may differ from expf's by one unit in the last
 * place), the same in every kernel. The register kernels keep each lane's
 * vectors raw (16 bytes each), mask only the vector holding the diagonal
 * (−inf in the forward, 0 in the backward: exp(−inf) = 0 and 0·0 add nothing,
 * so the sums are the same operations in the same order as the other kernels)
 * and skip the 32-vector groups right of the diagonal warp-wide. */
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

constexpr float SOFTMAX_LOG2E = 1.4426950408889634f;

// e^(x − mx) as every kernel here computes it for tensors of T_ (see the top)
template <typename T_> __device__ __forceinline__ float softmax_exp(float x, float mx)
{
    if constexpr (sizeof(T_) == 2) {
        float y;
        asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(fmaf(x, SOFTMAX_LOG2E, -mx * SOFTMAX_LOG2E)));
        return y;
    } else {
        return expf(x - mx);
    }
}

// row r's query index r % T, in 32 bits where r allows
__device__ __forceinline__ int row_query(size_t r, int T)
{
    return r <= 0xffffffffu ? (int)((unsigned)r % (unsigned)T) : (int)(r % (size_t)T);
}

// p (rows, T), s (rows, T) of T_; float32 math, one rounding per stored p
template <typename T_>
__global__ void softmax_causal_fwd_kernel(T_ *p, const T_ *s, size_t rows, int T, int zb)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = row_query(r, T);
    const T_ *sr = s + r * T;
    T_ *pr = p + r * T;
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32)
        mx = fmaxf(mx, ld_f(sr, j));
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= i; j += 32)
        sum += softmax_exp<T_>(ld_f(sr, j), mx);
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
    for (int j = lane, end = row_end(i, T, zb); j < end; j += 32)
        st_f(pr, j, j <= i ? softmax_exp<T_>(ld_f(sr, j), mx) * inv : 0.0f);
}

// ds (rows, T), dp (rows, T), p (rows, T) of T_
template <typename T_>
__global__ void softmax_causal_bwd_kernel(T_ *ds, const T_ *dp, const T_ *p, size_t rows, int T, int zb)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = row_query(r, T);
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
    int i = row_query(r, T);
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
                sum += softmax_exp<T_>(f[k], mx);
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
                f[k] = v * VE + k <= i ? softmax_exp<T_>(f[k], mx) * inv : 0.0f;
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
    int i = row_query(r, T);
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

// as softmax_causal_fwd_vec_kernel with the row in registers (raw, see the
// top): T ≤ 32·NV vectors
template <typename T_, int NV>
__global__ void __launch_bounds__(32 * SM_WARPS) softmax_causal_fwd_reg_kernel(T_ *p, const T_ *s, size_t rows, int T,
                                                                               int zb)
{
    constexpr int VE = vec16<T_>::n;
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = row_query(r, T);
    int last = i / VE, keep = i - last * VE; /* the diagonal's vector; its entries ≤ keep are j ≤ i */
    int groups = last / 32 + 1, nvec = (row_end(i, T, zb) + VE - 1) / VE; /* groups read; vectors written */
    const T_ *sr = s + r * T;
    T_ *pr = p + r * T;
    vec16<T_> x[NV]; /* vector lane + 32·q, q < groups; −inf right of the diagonal */
    float mx = -INFINITY;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        if (q >= groups)
            break;
        int v = lane + 32 * q;
        if (v < last) {
            x[q].u = *(const uint4 *)(sr + (size_t)v * VE);
        } else if (v == last) {
            x[q].u = *(const uint4 *)(sr + (size_t)v * VE);
#pragma unroll
            for (int k = 1; k < VE; k++)
                if (k > keep)
                    st_f(x[q].e, k, -INFINITY);
        } else {
#pragma unroll
            for (int k = 0; k < VE; k++)
                st_f(x[q].e, k, -INFINITY);
        }
#pragma unroll
        for (int k = 0; k < VE; k++)
            mx = fmaxf(mx, ld_f(x[q].e, k));
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        if (q >= groups)
            break;
#pragma unroll
        for (int k = 0; k < VE; k++)
            sum += softmax_exp<T_>(ld_f(x[q].e, k), mx);
    }
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (32 * q >= nvec)
            break;
        float o[VE];
#pragma unroll
        for (int k = 0; k < VE; k++)
            o[k] = q < groups ? softmax_exp<T_>(ld_f(x[q].e, k), mx) * inv : 0.0f;
        if (v < nvec)
            st_vec(pr, (size_t)v * VE, o);
    }
}

// as softmax_causal_bwd_vec_kernel with the rows in registers (raw, see the
// top): T ≤ 32·NV vectors
template <typename T_, int NV>
__global__ void __launch_bounds__(32 * SM_WARPS) softmax_causal_bwd_reg_kernel(T_ *ds, const T_ *dp, const T_ *p,
                                                                               size_t rows, int T, int zb)
{
    constexpr int VE = vec16<T_>::n;
    size_t r = (size_t)blockIdx.x * SM_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = row_query(r, T);
    int last = i / VE, keep = i - last * VE;
    int groups = last / 32 + 1, nvec = (row_end(i, T, zb) + VE - 1) / VE;
    const T_ *dpr = dp + r * T, *pr = p + r * T;
    T_ *dsr = ds + r * T;
    vec16<T_> a[NV], b[NV]; /* dp, p of vector lane + 32·q, q < groups; 0 right of the diagonal */
    float dot = 0.0f;
#pragma unroll
    for (int q = 0; q < NV; q++) {
        if (q >= groups)
            break;
        int v = lane + 32 * q;
        if (v <= last) {
            a[q].u = *(const uint4 *)(dpr + (size_t)v * VE);
            b[q].u = *(const uint4 *)(pr + (size_t)v * VE);
            if (v == last) {
#pragma unroll
                for (int k = 1; k < VE; k++)
                    if (k > keep) {
                        st_f(a[q].e, k, 0.0f);
                        st_f(b[q].e, k, 0.0f);
                    }
            }
        } else {
            a[q].u = b[q].u = make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int k = 0; k < VE; k++)
            dot = __fmaf_rn(ld_f(a[q].e, k), ld_f(b[q].e, k), dot);
    }
    dot = warp_sum(dot);
#pragma unroll
    for (int q = 0; q < NV; q++) {
        int v = lane + 32 * q;
        if (32 * q >= nvec)
            break;
        float o[VE];
#pragma unroll
        for (int k = 0; k < VE; k++) /* + 0: the zeros right of the diagonal are +0 */
            o[k] = q < groups ? __fmaf_rn(ld_f(b[q].e, k), ld_f(a[q].e, k) - dot, 0.0f) : 0.0f;
        if (v < nvec)
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
