/* Naive attention on CUDA: the (B·H, T, T) scores materialised, as the CS336
 * model computes them (math and shapes in attention.h). GEMMs through cuBLAS
 * strided-batched (fp32 compute, no TF32); the row softmax and its backward
 * are own kernels (fp32 math, storage in the element dtype). The causal mask
 * is applied in the softmax (the full T×T scores are computed, as in the
 * CS336 model). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "../attention.h"
extern "C" {
#include "../status.h"
}

namespace {

__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ float ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float *p, float x) { *p = x; }
__device__ __forceinline__ void st(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

constexpr int SM_THREADS = 256;

/* Block-wide reduction of 256 threads (op: 0 sum, 1 max); red: 8 floats. */
__device__ __forceinline__ float block_reduce(float x, int op, float *red)
{
    for (int o = 16; o > 0; o >>= 1) {
        float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = op ? fmaxf(x, y) : x + y;
    }
    const int w = threadIdx.x / 32, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0)
        red[w] = x;
    __syncthreads();
    float r = red[0];
    for (int i = 1; i < SM_THREADS / 32; i++)
        r = op ? fmaxf(r, red[i]) : r + red[i];
    return r;
}

// p: (rows, T) out, in place over s (scaled scores). One block per row.
template <typename T>
__global__ void softmax_rows_kernel(T *p, int Tn, int causal)
{
    __shared__ float red[SM_THREADS / 32];
    const size_t row = blockIdx.x;
    const int qi = (int)(row % Tn);
    const int n = causal ? qi + 1 : Tn;
    T *x = p + row * Tn;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += SM_THREADS)
        m = fmaxf(m, ld(x + j));
    m = block_reduce(m, 1, red);
    float sum = 0.f;
    for (int j = threadIdx.x; j < n; j += SM_THREADS)
        sum += __expf(ld(x + j) - m);
    sum = block_reduce(sum, 0, red);
    const float inv = 1.f / sum;
    for (int j = threadIdx.x; j < Tn; j += SM_THREADS)
        st(x + j, j < n ? __expf(ld(x + j) - m) * inv : 0.f);
}

// ds: (rows, T) out, in place over dp; p: (rows, T). ds = p∘(dp − Σ p∘dp).
template <typename T>
__global__ void softmax_bwd_rows_kernel(T *dp, const T *p, int Tn)
{
    __shared__ float red[SM_THREADS / 32];
    const size_t row = blockIdx.x;
    T *g = dp + row * Tn;
    const T *y = p + row * Tn;
    float dot = 0.f;
    for (int j = threadIdx.x; j < Tn; j += SM_THREADS)
        dot += ld(g + j) * ld(y + j);
    dot = block_reduce(dot, 0, red);
    for (int j = threadIdx.x; j < Tn; j += SM_THREADS)
        st(g + j, ld(y + j) * (ld(g + j) - dot));
}

cudaDataType_t cuda_type(lmk_dtype t)
{
    return t == LMK_F16 ? CUDA_R_16F : t == LMK_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Row-major C (m, n) = alpha·op(A)·op(B) + beta·C, batched with strides:
 * column-major Cᵀ = op(B)ᵀ·op(A)ᵀ. lda/ldb/ldc: row lengths as stored. */
int gemm_rm(cublasHandle_t h, lmk_dtype dt, bool ta, bool tb, int m, int n, int k, float alpha,
            const void *A, int lda, long long sa, const void *B, int ldb, long long sb,
            void *C, int ldc, long long sc, int batch)
{
    const float beta = 0.f;
    cudaDataType_t ty = cuda_type(dt);
    cublasStatus_t r = cublasGemmStridedBatchedEx(
        h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, B, ty,
        ldb, sb, A, ty, lda, sa, &beta, C, ty, ldc, sc, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return r == CUBLAS_STATUS_SUCCESS ? LMK_OK : LMK_DEVICE;
}

int check(const lmk_attn_shape *s)
{
    if (!s || s->B <= 0 || s->H <= 0 || s->T <= 0 || s->d <= 0)
        return LMK_INVALID;
    if (s->dtype != LMK_F32 && s->dtype != LMK_F16 && s->dtype != LMK_BF16)
        return LMK_INVALID;
    return LMK_OK;
}

} // namespace

extern "C" int lmk_naive_attn_fwd(void *o, void *p, const void *q, const void *k, const void *v,
                                  const lmk_attn_shape *s, void *cublas, void *stream)
{
    if (check(s) != LMK_OK || !o || !p || !q || !k || !v || !cublas)
        return LMK_INVALID;
    cublasHandle_t h = (cublasHandle_t)cublas;
    cudaStream_t st = (cudaStream_t)stream;
    if (cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS)
        return LMK_DEVICE;
    const int T = s->T, d = s->d, nb = s->B * s->H;
    const long long sTd = (long long)T * d, sTT = (long long)T * T;
    /* S = s·Q·Kᵀ into p */
    int rc = gemm_rm(h, s->dtype, false, true, T, T, d, 1.f / sqrtf((float)d), q, d, sTd, k, d,
                     sTd, p, T, sTT, nb);
    if (rc)
        return rc;
    const unsigned rows = (unsigned)((size_t)nb * T);
    switch (s->dtype) {
    case LMK_F32: softmax_rows_kernel<<<rows, SM_THREADS, 0, st>>>((float *)p, T, s->causal); break;
    case LMK_F16: softmax_rows_kernel<<<rows, SM_THREADS, 0, st>>>((__half *)p, T, s->causal); break;
    default:
        softmax_rows_kernel<<<rows, SM_THREADS, 0, st>>>((__nv_bfloat16 *)p, T, s->causal);
    }
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;
    /* O = P·V */
    return gemm_rm(h, s->dtype, false, false, T, d, T, 1.f, p, T, sTT, v, d, sTd, o, d, sTd, nb);
}

extern "C" int lmk_naive_attn_bwd(void *dq, void *dk, void *dv, void *dp, const void *dout,
                                  const void *q, const void *k, const void *v, const void *p,
                                  const lmk_attn_shape *s, void *cublas, void *stream)
{
    if (check(s) != LMK_OK || !dq || !dk || !dv || !dp || !dout || !q || !k || !v || !p ||
        !cublas)
        return LMK_INVALID;
    cublasHandle_t h = (cublasHandle_t)cublas;
    cudaStream_t st = (cudaStream_t)stream;
    if (cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS)
        return LMK_DEVICE;
    const int T = s->T, d = s->d, nb = s->B * s->H;
    const long long sTd = (long long)T * d, sTT = (long long)T * T;
    const float scale = 1.f / sqrtf((float)d);
    /* dV = Pᵀ·dO */
    int rc = gemm_rm(h, s->dtype, true, false, T, d, T, 1.f, p, T, sTT, dout, d, sTd, dv, d, sTd,
                     nb);
    /* dP = dO·Vᵀ */
    if (!rc)
        rc = gemm_rm(h, s->dtype, false, true, T, T, d, 1.f, dout, d, sTd, v, d, sTd, dp, T, sTT,
                     nb);
    if (rc)
        return rc;
    const unsigned rows = (unsigned)((size_t)nb * T);
    switch (s->dtype) {
    case LMK_F32:
        softmax_bwd_rows_kernel<<<rows, SM_THREADS, 0, st>>>((float *)dp, (const float *)p, T);
        break;
    case LMK_F16:
        softmax_bwd_rows_kernel<<<rows, SM_THREADS, 0, st>>>((__half *)dp, (const __half *)p, T);
        break;
    default:
        softmax_bwd_rows_kernel<<<rows, SM_THREADS, 0, st>>>((__nv_bfloat16 *)dp,
                                                             (const __nv_bfloat16 *)p, T);
    }
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;
    /* dQ = s·dS·K; dK = s·dSᵀ·Q */
    rc = gemm_rm(h, s->dtype, false, false, T, d, T, scale, dp, T, sTT, k, d, sTd, dq, d, sTd, nb);
    if (!rc)
        rc = gemm_rm(h, s->dtype, true, false, T, d, T, scale, dp, T, sTT, q, d, sTd, dk, d, sTd,
                     nb);
    return rc;
}
