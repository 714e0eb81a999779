/* GEMM (lmk_gemm) through cuBLAS, and the rounding (cast) kernels.
 *
 * Row-major C (m, n) = op(A) (m, k) · op(B) (k, n) is column-major
 * Cᵀ (n, m) = op(B)ᵀ · op(A)ᵀ: cuBLAS gets (B, A) swapped with m ↔ n.
 *   in_round NONE : float inputs, CUBLAS_COMPUTE_32F (pure FP32, no TF32).
 *   in_round TF32 : float inputs, CUBLAS_COMPUTE_32F_FAST_TF32 (the tensor
 *                   cores' own TF32 conversion; not bit-identical to the cpu's
 *                   round-to-nearest-even, within the tf32 tolerance).
 *   in_round BF16/FP16 : 16-bit A and B (CUDA_R_16BF / CUDA_R_16F) multiplied
 *                   with CUBLAS_COMPUTE_32F (exact products, FP32
 *                   accumulation), which is what the cpu emulates. An input
 *                   given already 16-bit (gemm_half, e.g. the model's
 *                   per-step weight copies) is used in place; a float32 one
 *                   is rounded (RNE, exactly lmk_round_value) into a packed
 *                   16-bit copy in the backend's scratch first.
 *   cast_half     : float32 → raw 16-bit bits, 4 elements per thread step
 *                   (16-byte loads, 8-byte stores) when aligned.
 *   out_round     : c_half (gemm_half, beta 0): C is CUDA_R_16BF / CUDA_R_16F
 *                   and cuBLAS converts the float32 alpha·AB once (round to
 *                   nearest even), no separate pass; otherwise a
 *                   rounding kernel over float32 C after the product (C =
 *                   round(alpha·AB + beta·C), as the cpu does).
 *   lda/ldb/ldc   : passed to cuBLAS (sub-matrices of wider matrices); not
 *                   with a float32 input cast into scratch or the rounding
 *                   pass over float32 C, which assume packed storage.
 *   LMK_GEMM_TUNE : GEMMs with beta 0 are timed once per shape
 *                   (transposes, sizes, leading dimensions, batch strides,
 *                   types, compute type) outside graph capture: cublasGemmEx's default
 *                   against cuBLASLt's heuristic candidates (up to
 *                   GEMM_TUNE_ALGOS, GEMM_TUNE_REPS runs each on the call's
 *                   own operands: beta 0, so C is overwritten); the fastest
 *                   runs from then on (cuBLASLt only when it beats the default
 *                   by GEMM_TUNE_MARGIN). A shape first seen during a capture
 *                   uses the default. The choice is per process: results are
 *                   fixed within one (graphs = eager bit for bit) but may
 *                   differ in the last bits between processes.
 *   overlap       : (LMK_OVERLAP_GEMMS) a GEMM with lmk_gemm.overlap runs on
 *                   the second stream (st->side, its own cuBLAS handles and
 *                   workspace of the same size, so cuBLAS picks the same
 *                   algorithm as on the main stream), after an event
 *                   recorded on the main stream; cuda_side_join makes the
 *                   main stream wait for it. Not for a GEMM that casts into
 *                   scratch or rounds C in a second pass (those kernels and
 *                   the scratch belong to the main stream), nor the timed
 *                   (LMK_GEMM_TUNE) path: those run on the main stream. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string.h>

#include <type_traits>

#include "cuda_internal.cuh"

#ifndef LMK_GEMM_TUNE
#define LMK_GEMM_TUNE 0
#endif
#define GEMM_TUNED_MAX 256
#define GEMM_TUNE_ALGOS 8
#define GEMM_TUNE_REPS 3
#define GEMM_TUNE_MARGIN 0.97f /* a cuBLASLt algorithm must take < 97% of the default's time */
/* Build-time knob: GEMMs marked overlap (the weight gradients beside the
 * input gradients, dV beside dP and dK beside dQ in the naive attention)
 * run on a second stream: 1, in eager steps only (a captured step keeps
 * one stream); 2, in captured steps too; 0, everything on the one stream.
 * 1 measured faster than 0 at every eager point on the H200 (fwd+bwd
 * −1.3…−2.2% large/1024 bf16, −0.3…−1.7% xl/1024, −1.2…−5.4% small/512
 * and medium/256 tf32); 2 in graphs 0.99–1.05× of one stream
 * (kernels/PERF.md, session 10). */
#ifndef LMK_OVERLAP_GEMMS
#define LMK_OVERLAP_GEMMS 1
#endif

/* One GEMM shape as cuBLAS (column-major, B and A swapped) sees it. Zeroed
 * before filling: compared with memcmp. */
typedef struct gemm_shape {
    int op_b, op_a, n, m, k, batch;
    int64_t ldb, lda, ldc, sb, sa, sc;
    int ta, tc, compute; /* cudaDataType_t of A and B, of C; cublasComputeType_t */
    int align; /* bytes (≤ 256, a power of two) every operand pointer is aligned to */
} gemm_shape;

struct gemm_tuned {
    gemm_shape shape;
    int use_lt; /* 1: algo (cuBLASLt) was faster than cublasGemmEx's default */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lb, la, lc; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
};

void cuda_gemm_tuned_free(cuda_state *st)
{
    for (int i = 0; st->tuned && i < st->ntuned; i++) {
        gemm_tuned *t = &st->tuned[i];
        if (t->lc)
            (void)cublasLtMatrixLayoutDestroy(t->lc);
        if (t->la)
            (void)cublasLtMatrixLayoutDestroy(t->la);
        if (t->lb)
            (void)cublasLtMatrixLayoutDestroy(t->lb);
        if (t->desc)
            (void)cublasLtMatmulDescDestroy(t->desc);
    }
    free(st->tuned);
    st->tuned = NULL;
    st->ntuned = 0;
    if (st->lt)
        (void)cublasLtDestroy(st->lt);
    st->lt = NULL;
}

/* A column-major (rows, cols) layout of type t, leading dimension ld, with
 * batch items stride apart. */
static cublasStatus_t lt_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int rows, int cols, int64_t ld,
                                int batch, int64_t stride)
{
    cublasStatus_t s = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
    if (s == CUBLAS_STATUS_SUCCESS && batch > 1) {
        int32_t bc = batch;
        s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                 sizeof stride);
    }
    return s;
}

/* The default path of a shape: cublasGemmEx or its strided-batched form. */
static cublasStatus_t gemm_default(cuda_state *st, const gemm_shape *z, const float *alpha, const void *pb,
                                   const void *pa, const float *beta, void *c)
{
    cudaDataType_t ta = (cudaDataType_t)z->ta, tc = (cudaDataType_t)z->tc;
    cublasComputeType_t compute = (cublasComputeType_t)z->compute;
    if (z->batch == 1)
        return cublasGemmEx(st->cublas, (cublasOperation_t)z->op_b, (cublasOperation_t)z->op_a, z->n, z->m, z->k,
                            alpha, pb, ta, (int)z->ldb, pa, ta, (int)z->lda, beta, c, tc, (int)z->ldc, compute,
                            CUBLAS_GEMM_DEFAULT);
    return cublasGemmStridedBatchedEx(st->cublas_batched, (cublasOperation_t)z->op_b, (cublasOperation_t)z->op_a, z->n,
                                      z->m, z->k, alpha, pb, ta, (int)z->ldb, z->sb, pa, ta, (int)z->lda, z->sa, beta,
                                      c, tc, (int)z->ldc, z->sc, z->batch, compute, CUBLAS_GEMM_DEFAULT);
}

static cublasStatus_t gemm_lt(cuda_state *st, const gemm_tuned *t, const cublasLtMatmulAlgo_t *algo,
                              const float *alpha, const void *pb, const void *pa, const float *beta, void *c)
{
    return cublasLtMatmul(st->lt, t->desc, alpha, pb, t->lb, pa, t->la, beta, c, t->lc, c, t->lc, algo,
                          st->cublas_ws, CUDA_CUBLAS_WS_BYTES, st->stream);
}

/* The candidates must work with pointers aligned to align bytes only. */
static bool pref_align(cublasLtMatmulPreference_t pref, uint32_t align)
{
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        if (cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &align, sizeof align) != CUBLAS_STATUS_SUCCESS)
            return false;
    return true;
}

/* ms per run of fn over GEMM_TUNE_REPS runs after one warm-up; < 0 when a run failed. */
template <typename F>
static float time_runs(cuda_state *st, cudaEvent_t e0, cudaEvent_t e1, F fn)
{
    if (fn() != CUBLAS_STATUS_SUCCESS)
        return -1.0f;
    if (cudaEventRecord(e0, st->stream) != cudaSuccess)
        return -1.0f;
    for (int r = 0; r < GEMM_TUNE_REPS; r++)
        if (fn() != CUBLAS_STATUS_SUCCESS)
            return -1.0f;
    float ms = -1.0f;
    if (cudaEventRecord(e1, st->stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
        return -1.0f;
    return ms / GEMM_TUNE_REPS;
}

/* Times shape z (not capturing) and records the choice in st->tuned.
 * Returns the new entry, or NULL (table full, or cuBLASLt unavailable: the
 * default path runs). Leaves no pending CUDA error behind. */
static gemm_tuned *gemm_tune(cuda_state *st, const gemm_shape *z, const float *alpha, const void *pb,
                             const void *pa, const float *beta, void *c)
{
    if (!st->tuned && !(st->tuned = (gemm_tuned *)calloc(GEMM_TUNED_MAX, sizeof *st->tuned)))
        return NULL;
    if (st->ntuned == GEMM_TUNED_MAX || (!st->lt && cublasLtCreate(&st->lt) != CUBLAS_STATUS_SUCCESS))
        return NULL;
    gemm_tuned *t = &st->tuned[st->ntuned];
    memset(t, 0, sizeof *t);
    t->shape = *z;
    cudaDataType_t ta = (cudaDataType_t)z->ta, tc = (cudaDataType_t)z->tc;
    cublasOperation_t ob = (cublasOperation_t)z->op_b, oa = (cublasOperation_t)z->op_a;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res[GEMM_TUNE_ALGOS];
    int found = 0;
    uint64_t ws = CUDA_CUBLAS_WS_BYTES;
    cudaEvent_t e0 = NULL, e1 = NULL;
    bool ok = cublasLtMatmulDescCreate(&t->desc, (cublasComputeType_t)z->compute, CUDA_R_32F) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(t->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ob, sizeof ob) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(t->desc, CUBLASLT_MATMUL_DESC_TRANSB, &oa, sizeof oa) ==
                  CUBLAS_STATUS_SUCCESS &&
              lt_layout(&t->lb, ta, ob == CUBLAS_OP_N ? z->n : z->k, ob == CUBLAS_OP_N ? z->k : z->n, z->ldb,
                        z->batch, z->sb) == CUBLAS_STATUS_SUCCESS &&
              lt_layout(&t->la, ta, oa == CUBLAS_OP_N ? z->k : z->m, oa == CUBLAS_OP_N ? z->m : z->k, z->lda,
                        z->batch, z->sa) == CUBLAS_STATUS_SUCCESS &&
              lt_layout(&t->lc, tc, z->n, z->m, z->ldc, z->batch, z->sc) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                   sizeof ws) == CUBLAS_STATUS_SUCCESS &&
              pref_align(pref, (uint32_t)z->align) &&
              cublasLtMatmulAlgoGetHeuristic(st->lt, t->desc, t->lb, t->la, t->lc, t->lc, pref, GEMM_TUNE_ALGOS,
                                             res, &found) == CUBLAS_STATUS_SUCCESS &&
              cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess;
    if (ok) {
        float best = time_runs(st, e0, e1, [&] { return gemm_default(st, z, alpha, pb, pa, beta, c); });
        float limit = best > 0 ? best * GEMM_TUNE_MARGIN : -1.0f;
        for (int i = 0; i < found && best > 0; i++) {
            if (res[i].state != CUBLAS_STATUS_SUCCESS)
                continue;
            float ms = time_runs(st, e0, e1, [&] { return gemm_lt(st, t, &res[i].algo, alpha, pb, pa, beta, c); });
            if (ms > 0 && ms < limit) {
                limit = ms;
                t->algo = res[i].algo;
                t->use_lt = 1;
            }
        }
    }
    if (pref)
        (void)cublasLtMatmulPreferenceDestroy(pref);
    if (e0)
        (void)cudaEventDestroy(e0);
    if (e1)
        (void)cudaEventDestroy(e1);
    (void)cudaGetLastError(); /* a failed candidate's error is not the caller's */
    st->ntuned++;             /* kept even when !ok: the default runs, untimed again */
    return t;
}

void cuda_side_free(cuda_state *st)
{
    if (st->side)
        (void)cudaStreamSynchronize(st->side); /* before its handles and workspace go */
    if (st->side_cublas_batched && st->side_cublas_batched != st->side_cublas)
        (void)cublasDestroy(st->side_cublas_batched);
    if (st->side_cublas)
        (void)cublasDestroy(st->side_cublas);
    if (st->side_ws)
        (void)cudaFree(st->side_ws);
    if (st->side_scratch)
        (void)cudaFreeAsync(st->side_scratch, st->side);
    for (int i = 0; i < st->nside_deferred; i++) /* a join that failed left them */
        (void)cudaFreeAsync(st->side_deferred[i], st->side);
    cuda_forked_free(&st->side, &st->fork_ev, &st->join_ev);
    st->side_cublas = st->side_cublas_batched = NULL;
    st->side_ws = NULL;
    st->side_scratch = NULL;
    st->side_scratch_bytes = 0;
    st->side_pending = st->side_gemm_pending = 0;
    st->nside_tracked = st->nside_deferred = 0;
}

static int side_create(cuda_state *st)
{
    int rc = cuda_forked_create(st, &st->side, &st->fork_ev, &st->join_ev, st->stream_priority);
    if (rc != LMK_OK)
        return rc;
    if (CUDA_CUBLAS_WS_BYTES > 0)
        CUDA_TRY(st, cudaMalloc(&st->side_ws, CUDA_CUBLAS_WS_BYTES));
    return cuda_cublas_pair(st, st->side, st->side_ws, &st->side_cublas, &st->side_cublas_batched);
}

/* Issues the fork of an overlap GEMM (or kernel): *side = the second stream,
 * ordered after the main stream's work so far. *side NULL (run on the main
 * stream): LMK_OVERLAP_GEMMS is 0; the main stream is being captured and
 * LMK_OVERLAP_GEMMS is 1; or the
 * second stream does not exist yet and the main stream is being captured
 * (creating it there is not allowed; eager steps before a capture create
 * it); or creating it failed once (e.g. no device memory left for its
 * workspace: the GEMMs then run as without overlap, not fail). */
static int side_fork(cuda_state *st, cudaStream_t *side)
{
    *side = NULL;
    if (!LMK_OVERLAP_GEMMS || st->side_unavailable)
        return LMK_OK;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (LMK_OVERLAP_GEMMS < 2 || !st->side)
        CUDA_TRY(st, cudaStreamIsCapturing(st->stream, &cs));
    if (cs != cudaStreamCaptureStatusNone)
        return LMK_OK;
    if (!st->side) {
        char kept[sizeof st->last_error];
        memcpy(kept, st->last_error, sizeof kept);
        if (side_create(st) != LMK_OK) {
            cuda_side_free(st);
            (void)cudaGetLastError();
            memcpy(st->last_error, kept, sizeof kept); /* not this GEMM's error */
            st->side_unavailable = 1;
            return LMK_OK;
        }
    }
    CUDA_TRY(st, cudaEventRecord(st->fork_ev, st->stream));
    CUDA_TRY(st, cudaStreamWaitEvent(st->side, st->fork_ev, 0));
    st->side_pending = 1;
    *side = st->side;
    return LMK_OK;
}

int cuda_side_fork(cuda_state *st, cudaStream_t *side)
{
    int rc = side_fork(st, side);
    if (rc == LMK_OK && *side)
        st->side_gemm_pending = 1;
    return rc;
}

int cuda_side_fork_tracked(cuda_state *st, cudaStream_t *side, const void *const *ptrs, int n)
{
    *side = NULL;
    if (n > CUDA_SIDE_TRACKED_MAX)
        return LMK_OK; /* on the main stream */
    if (st->nside_tracked + n > CUDA_SIDE_TRACKED_MAX) {
        int rc = cuda_side_join(st);
        if (rc != LMK_OK)
            return rc;
        if (st->nside_tracked + n > CUDA_SIDE_TRACKED_MAX) /* the lane is on: the join waits */
            return LMK_OK;
    }
    int rc = side_fork(st, side);
    if (rc != LMK_OK || !*side)
        return rc;
    for (int i = 0; i < n; i++)
        if (ptrs[i] && !cuda_side_tracks(st, ptrs[i]))
            st->side_tracked[st->nside_tracked++] = ptrs[i];
    return LMK_OK;
}

int cuda_side_tracks(const cuda_state *st, const void *p)
{
    for (int i = 0; i < st->nside_tracked; i++)
        if (st->side_tracked[i] == p)
            return 1;
    return 0;
}

int cuda_side_scratch(cuda_state *st, size_t bytes, void **out)
{
    return cuda_scratch_grow(st, st->side, &st->side_scratch, &st->side_scratch_bytes, bytes, out);
}

/* While the optimizer lane is on (st->stream is the lane's), the lane
 * waits for the second stream instead and the main stream's join stays
 * pending: the main stream has not waited, and the deferred frees wait for
 * it. */
int cuda_side_join(cuda_state *st)
{
    if (!st->side_pending)
        return LMK_OK;
    CUDA_TRY(st, cudaEventRecord(st->join_ev, st->side));
    CUDA_TRY(st, cudaStreamWaitEvent(st->stream, st->join_ev, 0));
    if (st->opt_main)
        return LMK_OK;
    st->side_pending = 0;
    st->side_gemm_pending = 0;
    st->nside_tracked = 0;
    int n = st->nside_deferred;
    st->nside_deferred = 0;
    for (int i = 0; i < n; i++)
        CUDA_TRY(st, cudaFreeAsync(st->side_deferred[i], st->stream));
    return LMK_OK;
}

int cuda_lane_join(lmk_backend *b)
{
    return cuda_side_join(CST(b));
}

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
__global__ void cast_half_kernel(T *dst, const float *x, size_t n, int r, int vec);

template <typename T>
static int to_half(cuda_state *st, T *out, const float *x, size_t per, int64_t stride, int batch,
                   int r)
{
    size_t total = per * (size_t)batch;
    if (batch == 1 || stride == (int64_t)per) {
        /* contiguous: one flat vectorised cast, no per-element 64-bit division
         * (the strided kernel's i / per made the casts of the B·H·T×T
         * attention tensors several times slower than their bytes) */
        int vec = ((((uintptr_t)out) & 7) | (((uintptr_t)x) & 15)) == 0;
        cast_half_kernel<T><<<grid_for(vec ? (total + 3) / 4 : total, 256, 132u * 16u), 256, 0,
                              st->stream>>>(out, x, total, r, vec);
        LAUNCH_CHECK(st, "cast_half_kernel");
        return LMK_OK;
    }
    to_half_kernel<T><<<grid_for(total, 256, 65535), 256, 0, st->stream>>>(out, x, per, stride,
                                                                          batch, r);
    LAUNCH_CHECK(st, "to_half_kernel");
    return LMK_OK;
}

int cuda_gemm_run(cuda_state *st, const lmk_gemm *g, void *c, const void *a, int a_half,
                  const void *bm, int b_half)
{
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->batch <= 0)
        return LMK_INVALID;
    const int half_in = g->in_round == LMK_ROUND_BF16 || g->in_round == LMK_ROUND_FP16;
    if ((a_half || b_half) && !half_in)
        return LMK_INVALID;
    if (g->c_half && ((g->out_round != LMK_ROUND_BF16 && g->out_round != LMK_ROUND_FP16) || g->beta != 0.0f))
        return LMK_INVALID; /* see lmk_gemm.c_half: no split-K reduction through 16 bits */
    cudaDataType_t tc = !g->c_half ? CUDA_R_32F : g->out_round == LMK_ROUND_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const int m = g->m, n = g->n, k = g->k;
    /* column-major view: C' (n, m) = op'(B') (n, k) · op'(A') (k, m) */
    cublasOperation_t opB = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* B stored (k, n) or (n, k), A stored (m, k) or (k, m), row-major */
    int64_t ldb = g->ldb ? g->ldb : g->trans_b ? k : n;
    int64_t lda = g->lda ? g->lda : g->trans_a ? m : k;
    int64_t ldc = g->ldc ? g->ldc : n;
    if (lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX)
        return LMK_INVALID;
    const int strided = g->lda || g->ldb || g->ldc;
    if (strided && g->out_round != LMK_ROUND_NONE && !g->c_half)
        return LMK_INVALID; /* the rounding pass walks packed C */
    const void *pa = a, *pb = bm;
    long long sa = g->stride_a, sb = g->stride_b, sc = g->stride_c;
    int main_only = g->out_round != LMK_ROUND_NONE && !g->c_half; /* the rounding pass */
    cudaDataType_t ta = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (g->in_round == LMK_ROUND_TF32) {
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    } else if (half_in) {
        ta = g->in_round == LMK_ROUND_BF16 ? CUDA_R_16BF : CUDA_R_16F;
        size_t na = a_half ? 0 : (size_t)m * k, nb = b_half ? 0 : (size_t)k * n;
        if ((na + nb) && strided)
            return LMK_INVALID; /* the cast into scratch packs its input */
        if (na + nb) {
            main_only = 1; /* reads the main stream's scratch */
            size_t bytes = 2 * (na + nb) * (size_t)g->batch + 256;
            void *ws = NULL;
            int rc = cuda_scratch(st, bytes, &ws);
            if (rc != LMK_OK)
                return rc;
            uint16_t *ha = (uint16_t *)ws, *hb = ha + na * (size_t)g->batch;
            int r = g->in_round;
            if (na) {
                rc = r == LMK_ROUND_BF16
                         ? to_half(st, (__nv_bfloat16 *)ha, (const float *)a, na, g->stride_a,
                                   g->batch, r)
                         : to_half(st, (__half *)ha, (const float *)a, na, g->stride_a, g->batch, r);
                if (rc != LMK_OK)
                    return rc;
                pa = ha;
                sa = (long long)na;
            }
            if (nb) {
                rc = r == LMK_ROUND_BF16
                         ? to_half(st, (__nv_bfloat16 *)hb, (const float *)bm, nb, g->stride_b,
                                   g->batch, r)
                         : to_half(st, (__half *)hb, (const float *)bm, nb, g->stride_b, g->batch, r);
                if (rc != LMK_OK)
                    return rc;
                pb = hb;
                sb = (long long)nb;
            }
        }
    }
    float alpha = g->alpha, beta = g->beta;
    cudaStream_t side = NULL;
    if (LMK_OVERLAP_GEMMS && g->overlap && !main_only) {
        int rc = cuda_side_fork(st, &side);
        if (rc != LMK_OK)
            return rc;
    }
    if (LMK_GEMM_TUNE && beta == 0.0f && !side) {
        gemm_shape z;
        memset(&z, 0, sizeof z);
        z.op_b = opB, z.op_a = opA, z.n = n, z.m = m, z.k = k, z.batch = g->batch;
        z.ldb = ldb, z.lda = lda, z.ldc = ldc, z.sb = g->batch > 1 ? sb : 0, z.sa = g->batch > 1 ? sa : 0;
        z.sc = g->batch > 1 ? sc : 0, z.ta = ta, z.tc = tc, z.compute = compute;
        uintptr_t bits = (uintptr_t)pa | (uintptr_t)pb | (uintptr_t)c | 256;
        z.align = (int)(bits & (~bits + 1)); /* the lowest set bit */
        gemm_tuned *t = NULL;
        for (int i = 0; st->tuned && i < st->ntuned && !t; i++)
            if (memcmp(&st->tuned[i].shape, &z, sizeof z) == 0)
                t = &st->tuned[i];
        if (!t) {
            cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
            CUDA_TRY(st, cudaStreamIsCapturing(st->stream, &cs));
            if (cs == cudaStreamCaptureStatusNone)
                t = gemm_tune(st, &z, &alpha, pb, pa, &beta, c);
        }
        if (t && t->use_lt) {
            if (gemm_lt(st, t, &t->algo, &alpha, pb, pa, &beta, c) == CUBLAS_STATUS_SUCCESS)
                goto rounded;
            t->use_lt = 0; /* not expected (the shape's key holds the alignment): the default from now on */
            (void)cudaGetLastError();
        }
    }
    if (g->batch == 1) {
        CUBLAS_TRY(st, cublasGemmEx(side ? st->side_cublas : st->cublas, opB, opA, n, m, k, &alpha, pb, ta,
                                    (int)ldb, pa, ta, (int)lda, &beta, c, tc, (int)ldc, compute,
                                    CUBLAS_GEMM_DEFAULT));
    } else {
        CUBLAS_TRY(st, cublasGemmStridedBatchedEx(side ? st->side_cublas_batched : st->cublas_batched, opB, opA,
                                                  n, m, k, &alpha, pb, ta,
                                                  (int)ldb, sb, pa, ta, (int)lda, sa, &beta, c, tc,
                                                  (int)ldc, sc, g->batch, compute,
                                                  CUBLAS_GEMM_DEFAULT));
    }
rounded:
    if (g->out_round != LMK_ROUND_NONE && !g->c_half) {
        float *cf = (float *)c;
        size_t per = (size_t)m * n;
        if (g->batch == 1 || g->stride_c == (int64_t)per)
            return cuda_round_launch(st, cf, cf, per * (size_t)g->batch, g->out_round);
        round_strided_kernel<<<grid_for(per * g->batch, 256, 65535), 256, 0, st->stream>>>(
            cf, per, g->stride_c, g->batch, g->out_round);
        LAUNCH_CHECK(st, "round_strided_kernel");
    }
    return LMK_OK;
}

int cuda_gemm(lmk_backend *b, const lmk_gemm *g, float *c, const float *a, const float *bm)
{
    if (g->c_half)
        return LMK_INVALID;
    return cuda_gemm_run(CST(b), g, c, a, 0, bm, 0);
}

int cuda_gemm_half(lmk_backend *b, const lmk_gemm *g, void *c, const void *a, int a_half,
                   const void *bm, int b_half)
{
    return cuda_gemm_run(CST(b), g, c, a, a_half, bm, b_half);
}

/* dst (n, 16-bit) = round(x (n)); vec: n/4 groups of float4 → 4 halves. */
template <typename T>
__global__ void cast_half_kernel(T *dst, const float *x, size_t n, int r, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (vec) {
        size_t n4 = n / 4;
        for (size_t i = tid; i < n4; i += stride) {
            float4 v = ((const float4 *)x)[i];
            T h[4];
            float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                float rv = round_value_dev(f[q], r);
                if constexpr (std::is_same<T, __half>::value)
                    h[q] = __float2half_rn(rv);
                else
                    h[q] = __float2bfloat16_rn(rv);
            }
            uint2 packed;
            memcpy(&packed, h, sizeof packed);
            ((uint2 *)dst)[i] = packed;
        }
        done = n4 * 4;
    }
    for (size_t i = done + tid; i < n; i += stride) {
        float rv = round_value_dev(x[i], r);
        if constexpr (std::is_same<T, __half>::value)
            dst[i] = __float2half_rn(rv);
        else
            dst[i] = __float2bfloat16_rn(rv);
    }
}

int cuda_cast_half(lmk_backend *b, void *dst16, const float *x, size_t n, lmk_round fmt)
{
    cuda_state *st = CST(b);
    if (fmt != LMK_ROUND_BF16 && fmt != LMK_ROUND_FP16)
        return LMK_INVALID;
    if (n == 0)
        return LMK_OK;
    int vec = ((((uintptr_t)dst16) & 7) | (((uintptr_t)x) & 15)) == 0;
    unsigned blocks = grid_for(vec ? (n + 3) / 4 : n, 256, 132u * 16u);
    if (fmt == LMK_ROUND_BF16)
        cast_half_kernel<__nv_bfloat16><<<blocks, 256, 0, st->stream>>>((__nv_bfloat16 *)dst16, x,
                                                                       n, fmt, vec);
    else
        cast_half_kernel<__half><<<blocks, 256, 0, st->stream>>>((__half *)dst16, x, n, fmt, vec);
    LAUNCH_CHECK(st, "cast_half_kernel");
    return LMK_OK;
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
