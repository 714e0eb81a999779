/* RMSNorm forward and backward.
 *
 *   forward : r_i = (mean_j x_ij² + eps)^-1/2, out_ij = x_ij · r_i · w_j
 *   backward: dx_ij = r_i dy_ij w_j − x_ij r_i³ / d · Σ_k dy_ik w_k x_ik
 *             dw_j += Σ_i dy_ij x_ij r_i
 * out (forward) and dout (backward) float, bf16 or fp16 (float32 math, one
 * rounding of each stored output). One block per row (sums in double, like the cpu). dw is deterministic:
 * per-chunk partial sums over RMS_ROWS rows in scratch, then one ordered sum
 * per column. rmsnorm_bwd_add's dw runs on the second stream beside the
 * later work (LMK_NORM_DW_SIDE; backend.h), issued after its dx.
 * Fused residual forms (backend.h), the same kernels with the neighbouring
 * elementwise ops folded in, bit for bit the unfused sequence:
 *   add_rmsnorm_fwd: y = x1 + x2 (as add_kernel), stored, then the forward
 *                    on y (the same loops and block sum);
 *   rmsnorm_bwd_add: dx = (the backward's dx) + dres, and its 16-bit copy
 *                    rounded as cast_half_kernel. dx's expression is written
 *                    without FMA contraction (the compiler could contract it
 *                    differently in the two kernels).
 * Vector kernels (knob LMK_RMSNORM_VEC, on; d a multiple of 4, d ≤ 4096, every
 * pointer 16-byte aligned): 128 threads per row, 4 elements per access
 * (16-byte float, 8-byte 16-bit), the row kept in registers between the sum
 * and the output pass; the same expressions per element, the double sums
 * over another order of elements (rstd may differ from the scalar kernels'
 * in the last place). */
#include <initializer_list>
#include <type_traits>

#include "cuda_internal.cuh"

#define RMS_THREADS 256
#define RMS_VEC_THREADS 128
#ifndef LMK_RMSNORM_VEC
#define LMK_RMSNORM_VEC 1
#endif
#define RMS_ROWS 64 /* rows per dw partial */
/* The weight gradient of rmsnorm_bwd_add on the second stream
 * (cuda_side_fork_tracked), beside dx and the GEMMs after it: 1 (default)
 * or 0 (on the main stream, after dx). */
#ifndef LMK_NORM_DW_SIDE
#define LMK_NORM_DW_SIDE 1
#endif
/* The partial sums of dw 4 columns per thread (d a multiple of 4, 16-byte
 * aligned x and 8-byte aligned dout): 1 (default) or 0 (one column per
 * thread); the same order of additions per column, the same bits. */
#ifndef LMK_RMSNORM_DW_VEC
#define LMK_RMSNORM_DW_VEC 1
#endif

// out (n, d) of E, rstd (n), x (n, d), w (d). Fused residual add when X2 is
// not void: x (n, d) = x1 + x2 (x2 of X2) is written first (x may alias x1:
// each element is read, then written, by one thread)
template <typename E, typename X2>
__global__ void rmsnorm_fwd_kernel(E *out, float *rstd, float *x, const float *x1, const X2 *x2, int d,
                                   const float *w, float eps)
{
    __shared__ double sh[32];
    size_t row = blockIdx.x;
    const float *xr = x + row * d;
    E *o = out + row * d;
    double ss = 0.0;
    if constexpr (std::is_void<X2>::value) {
        for (int j = threadIdx.x; j < d; j += blockDim.x)
            ss += (double)xr[j] * xr[j];
    } else {
        float *yr = x + row * d;
        for (int j = threadIdx.x; j < d; j += blockDim.x) {
            float y = x1[row * d + j] + ld_f(x2, row * d + j);
            yr[j] = y;
            ss += (double)y * y;
        }
    }
    ss = block_sum_double(ss, sh);
    float r = (float)(1.0 / sqrt(ss / d + eps));
    if (threadIdx.x == 0)
        rstd[row] = r;
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        st_f(o, j, xr[j] * r * w[j]);
}

// dx (n, d), dout (n, d) of E, x (n, d), w (d), rstd (n); dres (n, d) or NULL:
// added to dx; dx16 (n, d) of H or NULL: dx rounded to H (fmt) as cast_half
template <typename E, typename H>
__global__ void rmsnorm_bwd_dx_kernel(float *dx, const E *dout, const float *x,
                                      const float *w, const float *rstd, int d,
                                      const float *dres, H *dx16, int fmt)
{
    __shared__ double sh[32];
    size_t row = blockIdx.x;
    const float *xr = x + row * d;
    const E *dy = dout + row * d;
    float *dxr = dx + row * d;
    float r = rstd[row];
    double dot = 0.0;
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        dot += (double)ld_f(dy, j) * w[j] * xr[j];
    dot = block_sum_double(dot, sh);
    float c = (float)(dot * r * r * r / d);
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = __fsub_rn(__fmul_rn(__fmul_rn(r, ld_f(dy, j)), w[j]), __fmul_rn(xr[j], c));
        if (dres)
            v = v + dres[row * d + j];
        dxr[j] = v;
        if (dx16) {
            float rv = round_value_dev(v, fmt);
            if constexpr (std::is_same<H, __half>::value)
                dx16[row * d + j] = __float2half_rn(rv);
            else
                dx16[row * d + j] = __float2bfloat16_rn(rv);
        }
    }
}

// four elements of p from element i (4-aligned) as floats, and back (one rounding each)
__device__ __forceinline__ void ld4(const float *p, size_t i, float (&f)[4])
{
    float4 v = *(const float4 *)(p + i);
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
}
template <typename T_> __device__ __forceinline__ void ld4(const T_ *p, size_t i, float (&f)[4])
{
    union {
        uint2 u;
        T_ e[4];
    } v;
    v.u = *(const uint2 *)(p + i);
#pragma unroll
    for (int k = 0; k < 4; k++)
        f[k] = ld_f(v.e, k);
}
__device__ __forceinline__ void st4(float *p, size_t i, const float (&f)[4])
{
    *(float4 *)(p + i) = make_float4(f[0], f[1], f[2], f[3]);
}
template <typename T_> __device__ __forceinline__ void st4(T_ *p, size_t i, const float (&f)[4])
{
    union {
        uint2 u;
        T_ e[4];
    } v;
#pragma unroll
    for (int k = 0; k < 4; k++)
        st_f(v.e, k, f[k]);
    *(uint2 *)(p + i) = v.u;
}

// the first of this thread's 4 elements in chunk c of a row (the vector kernels' layout)
__device__ __forceinline__ int rms_vec_col(int c) { return 4 * (threadIdx.x + RMS_VEC_THREADS * c); }

// as rmsnorm_fwd_kernel, vectors of 4, the row in registers: d ≤ 4·RMS_VEC_THREADS·NV;
// thread t holds elements 4·(t + RMS_VEC_THREADS·c)…+3, c < NV
template <typename E, typename X2, int NV>
__global__ void __launch_bounds__(RMS_VEC_THREADS) rmsnorm_fwd_vec_kernel(E *out, float *rstd, float *x,
                                                                          const float *x1, const X2 *x2, int d,
                                                                          const float *w, float eps)
{
    __shared__ double sh[32];
    size_t row = blockIdx.x, at = row * d;
    float v[NV][4];
    double ss = 0.0;
#pragma unroll
    for (int c = 0; c < NV; c++) {
        int j = rms_vec_col(c);
        if (j >= d)
            break;
        if constexpr (std::is_void<X2>::value) {
            ld4(x, at + j, v[c]);
        } else {
            float a[4], b[4];
            ld4(x1, at + j, a);
            ld4(x2, at + j, b);
#pragma unroll
            for (int k = 0; k < 4; k++)
                v[c][k] = a[k] + b[k];
            st4(x, at + j, v[c]);
        }
#pragma unroll
        for (int k = 0; k < 4; k++)
            ss += (double)v[c][k] * v[c][k];
    }
    ss = block_sum_double(ss, sh);
    float r = (float)(1.0 / sqrt(ss / d + eps));
    if (threadIdx.x == 0)
        rstd[row] = r;
#pragma unroll
    for (int c = 0; c < NV; c++) {
        int j = rms_vec_col(c);
        if (j >= d)
            break;
        float wv[4], o[4];
        ld4(w, j, wv);
#pragma unroll
        for (int k = 0; k < 4; k++)
            o[k] = v[c][k] * r * wv[k];
        st4(out, at + j, o);
    }
}

// as rmsnorm_bwd_dx_kernel, one row per block, vectors of 4, dout and x of the row in registers
// (layout as rmsnorm_fwd_vec_kernel)
template <typename E, typename H, int NV>
__global__ void __launch_bounds__(RMS_VEC_THREADS) rmsnorm_bwd_dx_vec_kernel(float *dx, const E *dout,
                                                                             const float *x, const float *w,
                                                                             const float *rstd, int d,
                                                                             const float *dres, H *dx16, int fmt)
{
    __shared__ double sh[32];
    size_t row = blockIdx.x, at = row * d;
    float r = rstd[row];
    float dy[NV][4], xv[NV][4];
    double dot = 0.0;
#pragma unroll
    for (int c = 0; c < NV; c++) {
        int j = rms_vec_col(c);
        if (j >= d)
            break;
        float wv[4];
        ld4(dout, at + j, dy[c]);
        ld4(x, at + j, xv[c]);
        ld4(w, j, wv);
#pragma unroll
        for (int k = 0; k < 4; k++)
            dot += (double)dy[c][k] * wv[k] * xv[c][k];
    }
    dot = block_sum_double(dot, sh);
    float cf = (float)(dot * r * r * r / d);
#pragma unroll
    for (int c = 0; c < NV; c++) {
        int j = rms_vec_col(c);
        if (j >= d)
            break;
        float wv[4], o[4];
        ld4(w, j, wv);
#pragma unroll
        for (int k = 0; k < 4; k++)
            o[k] = __fsub_rn(__fmul_rn(__fmul_rn(r, dy[c][k]), wv[k]), __fmul_rn(xv[c][k], cf));
        if (dres) {
            float rs[4];
            ld4(dres, at + j, rs);
#pragma unroll
            for (int k = 0; k < 4; k++)
                o[k] = o[k] + rs[k];
        }
        st4(dx, at + j, o);
        if (dx16) {
            float h[4];
#pragma unroll
            for (int k = 0; k < 4; k++)
                h[k] = round_value_dev(o[k], fmt);
            st4(dx16, at + j, h);
        }
    }
}

/* The vector kernels' chunks per thread for rows of d (0: the scalar kernels
 * run): LMK_RMSNORM_VEC on, d a multiple of 4 up to 4096, every pointer
 * aligned to 16 bytes (4 floats; 8 would do for 16-bit tensors). */
static int rms_vec_chunks(int d, std::initializer_list<const void *> ptrs)
{
    bool ok = LMK_RMSNORM_VEC && d % 4 == 0 && d <= 4 * RMS_VEC_THREADS * 8;
    for (const void *p : ptrs)
        ok = ok && ((uintptr_t)p & 15) == 0;
    if (!ok)
        return 0;
    int per = (d / 4 + RMS_VEC_THREADS - 1) / RMS_VEC_THREADS;
    return per <= 2 ? 2 : per <= 4 ? 4 : 8;
}

#define RMS_NV_DISPATCH(nv, NV, ...)  \
    do {                              \
        if ((nv) == 2) {              \
            constexpr int NV = 2;     \
            __VA_ARGS__;              \
        } else if ((nv) == 4) {       \
            constexpr int NV = 4;     \
            __VA_ARGS__;              \
        } else {                      \
            constexpr int NV = 8;     \
            __VA_ARGS__;              \
        }                             \
    } while (0)

/* grid (ceil(d/32), chunks), block (32, 8): part (chunks, d) = Σ over the
 * chunk's rows of dy x r, in a fixed order. */
template <typename E>
__global__ void rmsnorm_bwd_dw_part_kernel(float *part, const E *dout, const float *x,
                                           const float *rstd, int n, int d)
{
    __shared__ float sh[8][33];
    int j = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * RMS_ROWS, r1 = min(r0 + RMS_ROWS, n);
    float acc = 0.0f;
    if (j < d)
        for (int i = r0 + threadIdx.y; i < r1; i += 8)
            acc += ld_f(dout, (size_t)i * d + j) * x[(size_t)i * d + j] * rstd[i];
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < d) {
        float t = 0.0f;
        for (int y = 0; y < 8; y++)
            t += sh[y][threadIdx.x];
        part[(size_t)blockIdx.y * d + j] = t;
    }
}

/* As rmsnorm_bwd_dw_part_kernel, 4 columns per thread: grid (ceil(d/128),
 * chunks), block (32, 8); d a multiple of 4. Each column's additions in the
 * scalar kernel's order (rows y, y+8, … of the chunk per thread row y, then
 * the 8 thread rows in order): the same bits. */
template <typename E>
__global__ void rmsnorm_bwd_dw_part_vec_kernel(float *part, const E *dout, const float *x,
                                               const float *rstd, int n, int d)
{
    __shared__ float4 sh[8][32];
    int j = 4 * (blockIdx.x * 32 + threadIdx.x);
    int r0 = blockIdx.y * RMS_ROWS, r1 = min(r0 + RMS_ROWS, n);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (j < d)
        for (int i = r0 + threadIdx.y; i < r1; i += 8) {
            float dy[4], xv[4];
            ld4(dout, (size_t)i * d + j, dy);
            ld4(x, (size_t)i * d + j, xv);
            float r = rstd[i];
#pragma unroll
            for (int k = 0; k < 4; k++)
                acc[k] += dy[k] * xv[k] * r;
        }
    sh[threadIdx.y][threadIdx.x] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (threadIdx.y == 0 && j < d) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int y = 0; y < 8; y++) {
            float4 v = sh[y][threadIdx.x];
            t[0] += v.x, t[1] += v.y, t[2] += v.z, t[3] += v.w;
        }
        st4(part, (size_t)blockIdx.y * d + j, t);
    }
}

// dw (d) += Σ_c part (chunks, d)
__global__ void rmsnorm_bwd_dw_sum_kernel(float *dw, const float *part, int chunks, int d)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= d)
        return;
    float t = 0.0f;
    for (int c = 0; c < chunks; c++)
        t += part[(size_t)c * d + j];
    dw[j] += t;
}

int cuda_rmsnorm_fwd(lmk_backend *b, void *out, lmk_dtype out_dt, float *rstd, const float *x,
                     const float *w, int n, int d, float eps)
{
    cuda_state *st = CST(b);
    if (n <= 0 || d <= 0)
        return LMK_INVALID;
    int nv = rms_vec_chunks(d, {out, x, w});
    if (nv)
        RMS_NV_DISPATCH(nv, NV, DT_DISPATCH(out_dt, E, rmsnorm_fwd_vec_kernel<E, void, NV><<<n, RMS_VEC_THREADS, 0,
                                                                                        st->stream>>>(
                                                           (E *)out, rstd, (float *)x, NULL, (const void *)NULL,
                                                           d, w, eps)));
    else
        DT_DISPATCH(out_dt, E, rmsnorm_fwd_kernel<E, void><<<n, RMS_THREADS, 0, st->stream>>>(
                                   (E *)out, rstd, (float *)x, NULL, (const void *)NULL, d, w, eps));
    LAUNCH_CHECK(st, "rmsnorm_fwd_kernel");
    return LMK_OK;
}

int cuda_add_rmsnorm_fwd(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype x2_dt,
                         void *out, lmk_dtype out_dt, float *rstd, const float *w, int n, int d, float eps)
{
    cuda_state *st = CST(b);
    if (n <= 0 || d <= 0 || (x2_dt != LMK_F32 && x2_dt != LMK_BF16 && x2_dt != LMK_F16))
        return LMK_INVALID;
    int nv = rms_vec_chunks(d, {y, x1, x2, out, w});
    if (nv)
        RMS_NV_DISPATCH(nv, NV,
                        DT_DISPATCH(out_dt, E,
                                    DT_DISPATCH(x2_dt, X,
                                                rmsnorm_fwd_vec_kernel<E, X, NV><<<n, RMS_VEC_THREADS, 0,
                                                                                   st->stream>>>(
                                                    (E *)out, rstd, y, x1, (const X *)x2, d, w, eps))));
    else
        DT_DISPATCH(out_dt, E, DT_DISPATCH(x2_dt, X, rmsnorm_fwd_kernel<E, X><<<n, RMS_THREADS, 0, st->stream>>>(
                                                         (E *)out, rstd, y, x1, (const X *)x2, d, w, eps)));
    LAUNCH_CHECK(st, "rmsnorm_fwd_kernel (add)");
    return LMK_OK;
}

// dw's partial sums (chunks of RMS_ROWS rows) for n rows
static int rmsnorm_dw_chunks(int n) { return (n + RMS_ROWS - 1) / RMS_ROWS; }

// dw (d) += Σ_i dout_i x_i rstd_i on stream, part (rmsnorm_dw_chunks, d)
// its partial sums: the partial and ordered-sum kernels
static int rmsnorm_dw(cuda_state *st, cudaStream_t stream, float *part, float *dw, const void *dout,
                      lmk_dtype dt, const float *x, const float *rstd, int n, int d)
{
    int chunks = rmsnorm_dw_chunks(n);
    dim3 block(32, 8);
    bool vec = LMK_RMSNORM_DW_VEC && d % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)dout & 15) == 0 &&
               ((uintptr_t)part & 15) == 0;
    if (vec) {
        dim3 grid((d + 127) / 128, chunks);
        DT_DISPATCH(dt, E, rmsnorm_bwd_dw_part_vec_kernel<E><<<grid, block, 0, stream>>>(
                               part, (const E *)dout, x, rstd, n, d));
    } else {
        dim3 grid((d + 31) / 32, chunks);
        DT_DISPATCH(dt, E, rmsnorm_bwd_dw_part_kernel<E><<<grid, block, 0, stream>>>(
                               part, (const E *)dout, x, rstd, n, d));
    }
    LAUNCH_CHECK(st, "rmsnorm_bwd_dw_part_kernel");
    rmsnorm_bwd_dw_sum_kernel<<<(d + 255) / 256, 256, 0, stream>>>(dw, part, chunks, d);
    LAUNCH_CHECK(st, "rmsnorm_bwd_dw_sum_kernel");
    return LMK_OK;
}

/* rmsnorm_dw, issued after the dx that reads the same dout, x and rstd:
 * beside (rmsnorm_bwd_add) and a second stream available (LMK_NORM_DW_SIDE;
 * cuda_side_fork_tracked: dout, x, rstd and dw tracked, their frees
 * deferred to the join), on it with the side scratch; else on the main
 * stream with cuda_scratch. */
static int rmsnorm_dw_after_dx(cuda_state *st, bool beside, float *dw, const void *dout, lmk_dtype dt,
                               const float *x, const float *rstd, int n, int d)
{
    cudaStream_t side = NULL;
    if (beside && LMK_NORM_DW_SIDE) {
        const void *tracked[4] = {dout, x, rstd, dw};
        int rc = cuda_side_fork_tracked(st, &side, tracked, 4);
        if (rc != LMK_OK)
            return rc;
    }
    size_t part_bytes = sizeof(float) * (size_t)rmsnorm_dw_chunks(n) * d;
    void *ws = NULL;
    int rc = side ? cuda_side_scratch(st, part_bytes, &ws) : cuda_scratch(st, part_bytes, &ws);
    if (rc != LMK_OK)
        return rc;
    return rmsnorm_dw(st, side ? side : st->stream, (float *)ws, dw, dout, dt, x, rstd, n, d);
}

/* The vector kernels' backward (nv chunks per thread, rms_vec_chunks): dx
 * (+ dres, and dx16 of H when given), one block per row, then dw
 * (rmsnorm_dw_after_dx). One pass for both (four rows per block, each
 * block's share of dw reduced after) measured slower on the H200
 * (kernels/PERF.md, session 10). */
template <typename H>
static int rms_bwd_vec(cuda_state *st, int nv, bool beside, float *dx, H *dx16, int fmt, float *dw,
                       const void *dout, lmk_dtype dt, const float *dres, const float *x, const float *w,
                       const float *rstd, int n, int d)
{
    RMS_NV_DISPATCH(nv, NV, DT_DISPATCH(dt, E, rmsnorm_bwd_dx_vec_kernel<E, H, NV>
                                               <<<n, RMS_VEC_THREADS, 0, st->stream>>>(
                                                   dx, (const E *)dout, x, w, rstd, d, dres, dx16, fmt)));
    LAUNCH_CHECK(st, "rmsnorm_bwd_dx_kernel");
    return rmsnorm_dw_after_dx(st, beside, dw, dout, dt, x, rstd, n, d);
}

int cuda_rmsnorm_bwd(lmk_backend *b, float *dx, float *dw, const void *dout, lmk_dtype dt,
                     const float *x, const float *w, const float *rstd, int n, int d)
{
    cuda_state *st = CST(b);
    if (n <= 0 || d <= 0 || (dt != LMK_F32 && dt != LMK_BF16 && dt != LMK_F16))
        return LMK_INVALID;
    int nv = rms_vec_chunks(d, {dx, dout, x, w});
    if (nv)
        return rms_bwd_vec(st, nv, false, dx, (__nv_bfloat16 *)NULL, 0, dw, dout, dt, NULL, x, w, rstd, n, d);
    DT_DISPATCH(dt, E, rmsnorm_bwd_dx_kernel<E, __nv_bfloat16><<<n, RMS_THREADS, 0, st->stream>>>(
                           dx, (const E *)dout, x, w, rstd, d, NULL, NULL, 0));
    LAUNCH_CHECK(st, "rmsnorm_bwd_dx_kernel");
    return rmsnorm_dw_after_dx(st, false, dw, dout, dt, x, rstd, n, d);
}

/* As cuda_rmsnorm_bwd with the residual add and the 16-bit copy; dw beside
 * the later work (rmsnorm_dw_after_dx; backend.h's contract). */
int cuda_rmsnorm_bwd_add(lmk_backend *b, float *dx, void *dx16, lmk_round fmt, float *dw,
                         const void *dout, lmk_dtype dt, const float *dres, const float *x,
                         const float *w, const float *rstd, int n, int d)
{
    cuda_state *st = CST(b);
    if (n <= 0 || d <= 0 || (dt != LMK_F32 && dt != LMK_BF16 && dt != LMK_F16) ||
        (dx16 && fmt != LMK_ROUND_BF16 && fmt != LMK_ROUND_FP16))
        return LMK_INVALID;
    int nv = rms_vec_chunks(d, {dx, dx16, dout, dres, x, w});
    if (nv && fmt == LMK_ROUND_FP16)
        return rms_bwd_vec(st, nv, true, dx, (__half *)dx16, fmt, dw, dout, dt, dres, x, w, rstd, n, d);
    if (nv)
        return rms_bwd_vec(st, nv, true, dx, (__nv_bfloat16 *)dx16, fmt, dw, dout, dt, dres, x, w, rstd, n, d);
    if (fmt == LMK_ROUND_FP16)
        DT_DISPATCH(dt, E, rmsnorm_bwd_dx_kernel<E, __half><<<n, RMS_THREADS, 0, st->stream>>>(
                               dx, (const E *)dout, x, w, rstd, d, dres, (__half *)dx16, fmt))
    else
        DT_DISPATCH(dt, E, rmsnorm_bwd_dx_kernel<E, __nv_bfloat16><<<n, RMS_THREADS, 0, st->stream>>>(
                               dx, (const E *)dout, x, w, rstd, d, dres, (__nv_bfloat16 *)dx16, fmt));
    LAUNCH_CHECK(st, "rmsnorm_bwd_dx_kernel (add)");
    return rmsnorm_dw_after_dx(st, true, dw, dout, dt, x, rstd, n, d);
}
