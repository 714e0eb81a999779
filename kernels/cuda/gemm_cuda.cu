/* GEMM (lmk_gemm) through cuBLAS, and the rounding (cast) kernels.
 *
 * Row-major C (m, n) = op(A) (m, k) · op(B) (k, n) is column-major
 * Cᵀ (n, m) = op(B)ᵀ · op(A)ᵀ: cuBLAS gets (B, A) swapped with m ↔ n.
 *   in_round NONE : float inputs, CUBLAS_COMPUTE_32F (pure FP32, no TF32).
 *   in_round TF32 : float inputs, CUBLAS_COMPUTE_32F_FAST_TF32 (the tensor
 *                   cores' own TF32 conversion; not bit-identical to the cpu's
 *                   round-to-nearest-even, within the tf32 tolerance).
 *   in_round BF16/FP16 : A and B are rounded (RNE, exactly lmk_round_value)
 *                   into 16-bit copies in the backend's scratch, then
 *                   multiplied with CUBLAS_COMPUTE_32F (exact products, FP32
 *                   accumulation), which is what the cpu emulates.
 *   out_round     : a rounding kernel over C after the product (C = round(
 *                   alpha·AB + beta·C), as the cpu does). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda_internal.cuh"

/* out (n) = round(x) in place or not; float storage. */
__global__ void round_kernel(float *out, const float *x, size_t n, int r)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = round_value_dev(x[i], r);
}

/* C[i] (rows, cols) with batch stride: rounds each batch item. */
__global__ void round_strided_kernel(float *c, size_t per, int64_t stride, int batch, int r)
{
    size_t total = per * (size_t)batch;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bi = i / per, j = i % per;
        float *p = c + (size_t)bi * stride + j;
        *p = round_value_dev(*p, r);
    }
}

/* out (batch · per, 16-bit, packed) = round(x (batch items at stride)). */
template <typename T>
__global__ void to_half_kernel(T *out, const float *x, size_t per, int64_t stride, int batch, int r)
{
    size_t total = per * (size_t)batch;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bi = i / per, j = i % per;
        float v = round_value_dev(x[(size_t)bi * stride + j], r);
        if constexpr (sizeof(T) == 2 && std::is_same<T, __half>::value)
            out[i] = __float2half_rn(v);
        else
            out[i] = __float2bfloat16_rn(v);
    }
}

int cuda_round_launch(cuda_state *st, float *out, const float *x, size_t n, int r)
{
    if (n == 0)
        return LMK_OK;
    round_kernel<<<grid_for(n, 256, 65535), 256, 0, st->stream>>>(out, x, n, r);
    LAUNCH_CHECK(st, "round_kernel");
    return LMK_OK;
}

template <typename T>
static int to_half(cuda_state *st, T *out, const float *x, size_t per, int64_t stride, int batch,
                   int r)
{
    size_t total = per * (size_t)batch;
    to_half_kernel<T><<<grid_for(total, 256, 65535), 256, 0, st->stream>>>(out, x, per, stride,
                                                                          batch, r);
    LAUNCH_CHECK(st, "to_half_kernel");
    return LMK_OK;
}

int cuda_gemm_run(cuda_state *st, const lmk_gemm *g, float *c, const float *a, const float *bm)
{
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->batch <= 0)
        return LMK_INVALID;
    const int m = g->m, n = g->n, k = g->k;
    /* column-major view: C' (n, m) = op'(B') (n, k) · op'(A') (k, m) */
    cublasOperation_t opB = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = g->trans_b ? k : n; /* B stored (k, n) or (n, k) row-major */
    int lda = g->trans_a ? m : k; /* A stored (m, k) or (k, m) row-major */
    int ldc = n;
    const void *pa = a, *pb = bm;
    long long sa = g->stride_a, sb = g->stride_b, sc = g->stride_c;
    cudaDataType_t ta = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (g->in_round == LMK_ROUND_TF32) {
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    } else if (g->in_round == LMK_ROUND_BF16 || g->in_round == LMK_ROUND_FP16) {
        size_t na = (size_t)m * k, nb = (size_t)k * n;
        size_t bytes = 2 * (na + nb) * (size_t)g->batch + 256;
        void *ws = NULL;
        int rc = cuda_scratch(st, bytes, &ws);
        if (rc != LMK_OK)
            return rc;
        uint16_t *ha = (uint16_t *)ws, *hb = ha + na * (size_t)g->batch;
        if (g->in_round == LMK_ROUND_BF16) {
            ta = CUDA_R_16BF;
            if ((rc = to_half(st, (__nv_bfloat16 *)ha, a, na, g->stride_a, g->batch, g->in_round)) ||
                (rc = to_half(st, (__nv_bfloat16 *)hb, bm, nb, g->stride_b, g->batch, g->in_round)))
                return rc;
        } else {
            ta = CUDA_R_16F;
            if ((rc = to_half(st, (__half *)ha, a, na, g->stride_a, g->batch, g->in_round)) ||
                (rc = to_half(st, (__half *)hb, bm, nb, g->stride_b, g->batch, g->in_round)))
                return rc;
        }
        pa = ha;
        pb = hb;
        sa = (long long)na;
        sb = (long long)nb;
    }
    float alpha = g->alpha, beta = g->beta;
    if (g->batch == 1) {
        CUBLAS_TRY(st, cublasGemmEx(st->cublas, opB, opA, n, m, k, &alpha, pb, ta, ldb, pa, ta,
                                    lda, &beta, c, CUDA_R_32F, ldc, compute,
                                    CUBLAS_GEMM_DEFAULT));
    } else {
        CUBLAS_TRY(st, cublasGemmStridedBatchedEx(st->cublas, opB, opA, n, m, k, &alpha, pb, ta,
                                                  ldb, sb, pa, ta, lda, sa, &beta, c, CUDA_R_32F,
                                                  ldc, sc, g->batch, compute,
                                                  CUBLAS_GEMM_DEFAULT));
    }
    if (g->out_round != LMK_ROUND_NONE) {
        size_t per = (size_t)m * n;
        if (g->batch == 1 || g->stride_c == (int64_t)per)
            return cuda_round_launch(st, c, c, per * (size_t)g->batch, g->out_round);
        round_strided_kernel<<<grid_for(per * g->batch, 256, 65535), 256, 0, st->stream>>>(
            c, per, g->stride_c, g->batch, g->out_round);
        LAUNCH_CHECK(st, "round_strided_kernel");
    }
    return LMK_OK;
}

int cuda_gemm(lmk_backend *b, const lmk_gemm *g, float *c, const float *a, const float *bm)
{
    return cuda_gemm_run(CST(b), g, c, a, bm);
}

int cuda_cast(lmk_backend *b, float *out, const float *x, size_t n, lmk_round r)
{
    cuda_state *st = CST(b);
    if (r == LMK_ROUND_NONE) {
        if (out != x && n)
            CUDA_TRY(st, cudaMemcpyAsync(out, x, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                         st->stream));
        return LMK_OK;
    }
    return cuda_round_launch(st, out, x, n, r);
}
