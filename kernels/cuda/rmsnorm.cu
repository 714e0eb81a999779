/* RMSNorm forward and backward.
 *
 *   forward : r_i = (mean_j x_ij² + eps)^-1/2, out_ij = x_ij · r_i · w_j
 *   backward: dx_ij = r_i dy_ij w_j − x_ij r_i³ / d · Σ_k dy_ik w_k x_ik
 *             dw_j += Σ_i dy_ij x_ij r_i
 * out (forward) and dout (backward) float, bf16 or fp16 (float32 math, one
 * rounding of each stored output). One block per row (sums in double, like the cpu). dw is deterministic:
 * per-chunk partial sums over RMS_ROWS rows in scratch, then one ordered sum
 * per column. */
#include "cuda_internal.cuh"

#define RMS_THREADS 256
#define RMS_ROWS 64 /* rows per dw partial */

// out (n, d) of E, rstd (n), x (n, d), w (d)
template <typename E>
__global__ void rmsnorm_fwd_kernel(E *out, float *rstd, const float *x, const float *w, int d,
                                   float eps)
{
    __shared__ double sh[32];
    size_t row = blockIdx.x;
    const float *xr = x + row * d;
    E *o = out + row * d;
    double ss = 0.0;
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        ss += (double)xr[j] * xr[j];
    ss = block_sum_double(ss, sh);
    float r = (float)(1.0 / sqrt(ss / d + eps));
    if (threadIdx.x == 0)
        rstd[row] = r;
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        st_f(o, j, xr[j] * r * w[j]);
}

// dx (n, d), dout (n, d) of E, x (n, d), w (d), rstd (n)
template <typename E>
__global__ void rmsnorm_bwd_dx_kernel(float *dx, const E *dout, const float *x,
                                      const float *w, const float *rstd, int d)
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
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        dxr[j] = r * ld_f(dy, j) * w[j] - xr[j] * c;
}

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
    DT_DISPATCH(out_dt, E, rmsnorm_fwd_kernel<E><<<n, RMS_THREADS, 0, st->stream>>>((E *)out, rstd, x, w, d, eps));
    LAUNCH_CHECK(st, "rmsnorm_fwd_kernel");
    return LMK_OK;
}

int cuda_rmsnorm_bwd(lmk_backend *b, float *dx, float *dw, const void *dout, lmk_dtype dt,
                     const float *x, const float *w, const float *rstd, int n, int d)
{
    cuda_state *st = CST(b);
    if (n <= 0 || d <= 0 || (dt != LMK_F32 && dt != LMK_BF16 && dt != LMK_F16))
        return LMK_INVALID;
    int chunks = (n + RMS_ROWS - 1) / RMS_ROWS;
    void *ws = NULL;
    int rc = cuda_scratch(st, sizeof(float) * (size_t)chunks * d, &ws);
    if (rc != LMK_OK)
        return rc;
    float *part = (float *)ws;
    /* dw first: dx may not alias anything, but keep reads of dout before writes anyway */
    dim3 grid((d + 31) / 32, chunks), block(32, 8);
    DT_DISPATCH(dt, E, rmsnorm_bwd_dw_part_kernel<E><<<grid, block, 0, st->stream>>>(
                           part, (const E *)dout, x, rstd, n, d));
    LAUNCH_CHECK(st, "rmsnorm_bwd_dw_part_kernel");
    rmsnorm_bwd_dw_sum_kernel<<<(d + 255) / 256, 256, 0, st->stream>>>(dw, part, chunks, d);
    LAUNCH_CHECK(st, "rmsnorm_bwd_dw_sum_kernel");
    DT_DISPATCH(dt, E, rmsnorm_bwd_dx_kernel<E><<<n, RMS_THREADS, 0, st->stream>>>(
                           dx, (const E *)dout, x, w, rstd, d));
    LAUNCH_CHECK(st, "rmsnorm_bwd_dx_kernel");
    return LMK_OK;
}
