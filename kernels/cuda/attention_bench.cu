/* One point of the attention job on a GPU (lmk_attn_bench_cuda in
 * attention.h): random inputs, warm-up, then CUDA-event timing of forward,
 * backward and forward+backward passes on a private stream, each pass between
 * its own events and waited for (median and mean).
 * Memory comes from cudaMallocAsync (the device's default pool); a failed
 * request makes an OOM row, not an error. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../attention.h"
#include "../stats.h"
extern "C" {
#include "../status.h"
}

namespace {

__device__ __forceinline__ void st(float *p, float x) { *p = x; }
__device__ __forceinline__ void st(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

// x: (n) ← uniform in [−√3, √3] (unit variance) from a counter hash.
template <typename T>
__global__ void fill_kernel(T *x, size_t n, unsigned seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed * 0x9E3779B9u ^ (unsigned)(i >> 32);
        h ^= h >> 16;
        h *= 0x7feb352du;
        h ^= h >> 15;
        h *= 0x846ca68bu;
        h ^= h >> 16;
        st(x + i, ((float)h * (1.f / 4294967296.f) - 0.5f) * 3.4641016f);
    }
}

struct pool {
    void *ptr[16];
    int n;
    uint64_t live;
    cudaStream_t st;
};

/* Returns 0, 1 on OOM (request kept in *oom_bytes), -1 on another error. */
int palloc(pool *p, void **out, size_t bytes, uint64_t *oom_bytes)
{
    void *d = NULL;
    cudaError_t e = cudaMallocAsync(&d, bytes, p->st);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *oom_bytes = bytes;
        return 1;
    }
    if (e != cudaSuccess)
        return -1;
    p->ptr[p->n++] = d;
    p->live += bytes;
    *out = d;
    return 0;
}

int fill(void *x, size_t n, lmk_dtype dt, unsigned seed, cudaStream_t st)
{
    switch (dt) {
    case LMK_F32: fill_kernel<<<1024, 256, 0, st>>>((float *)x, n, seed); break;
    case LMK_F16: fill_kernel<<<1024, 256, 0, st>>>((__half *)x, n, seed); break;
    default: fill_kernel<<<1024, 256, 0, st>>>((__nv_bfloat16 *)x, n, seed);
    }
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

} // namespace

extern "C" int lmk_attn_bench_cuda(int device, lmk_attn_impl impl, const lmk_attn_shape *s,
                                   int warmup, int passes, lmk_attn_loop_hook hook,
                                   void *hook_ctx, lmk_attn_bench_result *r, char *errbuf,
                                   size_t errlen)
{
    if (!s || !r || passes < 1 || warmup < 0)
        return LMK_INVALID;
    if (impl == LMK_ATTN_FLASH && !lmk_attn_head_dim_supported(s->d)) {
        snprintf(errbuf, errlen, "flash: head dim %d not supported", s->d);
        return LMK_INVALID;
    }
    memset(r, 0, sizeof *r);
    int rc = LMK_OK;
    const char *what = "";
    pool p = {};
    cublasHandle_t h = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaError_t ce;
    const size_t es = lmk_dtype_size(s->dtype);
    const size_t n = (size_t)s->B * s->H * s->T * s->d, rows = (size_t)s->B * s->H * s->T;
    void *q = NULL, *k = NULL, *v = NULL, *o = NULL, *dout = NULL, *dq = NULL, *dk = NULL,
         *dv = NULL, *pm = NULL, *dpm = NULL, *lse = NULL,
                                              *work = NULL;
    float ms = 0;
    double *pass_ms = NULL;

#define CU(call)                                            \
    do {                                                    \
        if ((ce = (call)) != cudaSuccess) {                 \
            what = #call;                                   \
            rc = LMK_DEVICE;                                \
            goto out;                                       \
        }                                                   \
    } while (0)
#define ALLOC(ptr, bytes)                                        \
    do {                                                         \
        int a_ = palloc(&p, &(ptr), (bytes), &r->oom_request_bytes); \
        if (a_ == 1) {                                           \
            r->oom = 1;                                          \
            goto out;                                            \
        }                                                        \
        if (a_) {                                                \
            ce = cudaGetLastError();                             \
            what = "cudaMallocAsync";                            \
            rc = LMK_DEVICE;                                     \
            goto out;                                            \
        }                                                        \
    } while (0)
#define STEP(call)                                                   \
    do {                                                             \
        if ((rc = (call)) != LMK_OK) {                               \
            what = #call;                                            \
            ce = cudaGetLastError();                                 \
            goto out;                                                \
        }                                                            \
    } while (0)
#define FWD()                                                                            \
    (impl == LMK_ATTN_FLASH ? lmk_flash_attn_fwd(o, (float *)lse, q, k, v, s, p.st)      \
                            : lmk_naive_attn_fwd(o, pm, q, k, v, s, h, p.st))
#define BWD()                                                                            \
    (impl == LMK_ATTN_FLASH                                                              \
         ? lmk_flash_attn_bwd(dq, dk, dv, (float *)work, dout, q, k, v, o,               \
                              (const float *)lse, s, p.st)                               \
         : lmk_naive_attn_bwd(dq, dk, dv, dpm, dout, q, k, v, pm, s, h, p.st))

    CU(cudaSetDevice(device));
    CU(cudaStreamCreateWithFlags(&p.st, cudaStreamNonBlocking));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    if (impl == LMK_ATTN_NAIVE) {
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
            what = "cublasCreate";
            ce = cudaErrorUnknown;
            rc = LMK_DEVICE;
            goto out;
        }
    }
    /* what the forward leaves for the backward: inputs, output, dO, saved */
    ALLOC(q, n * es);
    ALLOC(k, n * es);
    ALLOC(v, n * es);
    ALLOC(o, n * es);
    ALLOC(dout, n * es);
    if (impl == LMK_ATTN_FLASH)
        ALLOC(lse, rows * sizeof(float));
    else
        ALLOC(pm, rows * (size_t)s->T * es);
    r->mem_before_bwd_bytes = p.live;
    /* the backward's own */
    ALLOC(dq, n * es);
    ALLOC(dk, n * es);
    ALLOC(dv, n * es);
    if (impl == LMK_ATTN_FLASH)
        ALLOC(work, lmk_flash_attn_bwd_work_floats(s) * sizeof(float));
    else
        ALLOC(dpm, rows * (size_t)s->T * es);
    if (fill(q, n, s->dtype, 1, p.st) || fill(k, n, s->dtype, 2, p.st) ||
        fill(v, n, s->dtype, 3, p.st) || fill(dout, n, s->dtype, 4, p.st)) {
        ce = cudaGetLastError();
        what = "fill";
        rc = LMK_DEVICE;
        goto out;
    }
    for (int i = 0; i < warmup; i++) {
        STEP(FWD());
        STEP(BWD());
    }
    /* the stream is idle before each hook call */
#define HOOK(loop)                                \
    do {                                          \
        if (hook) {                               \
            CU(cudaStreamSynchronize(p.st));      \
            hook(hook_ctx, (loop));               \
        }                                         \
    } while (0)
    /* each pass between its own two events, the host waiting for it before
     * the next (the peer's and the seeds' protocol); median and mean */
#define TIMED_LOOP(body, median, mean)                       \
    do {                                                     \
        double sum_ = 0;                                     \
        for (int i = 0; i < passes; i++) {                   \
            CU(cudaEventRecord(e0, p.st));                   \
            body;                                            \
            CU(cudaEventRecord(e1, p.st));                   \
            CU(cudaEventSynchronize(e1));                    \
            CU(cudaEventElapsedTime(&ms, e0, e1));           \
            pass_ms[i] = ms;                                 \
            sum_ += ms;                                      \
        }                                                    \
        (median) = lmk_median_sort(pass_ms, passes);         \
        (mean) = sum_ / passes;                              \
    } while (0)
    if (!(pass_ms = (double *)malloc((size_t)passes * sizeof(double)))) {
        snprintf(errbuf, errlen, "out of host memory for %d pass times", passes);
        rc = LMK_NOMEM;
        goto out;
    }
    HOOK(LMK_ATTN_LOOP_FWD);
    TIMED_LOOP(STEP(FWD()), r->fwd_ms, r->fwd_mean_ms);
    HOOK(LMK_ATTN_LOOP_BWD);
    TIMED_LOOP(STEP(BWD()), r->bwd_ms, r->bwd_mean_ms);
    HOOK(LMK_ATTN_LOOP_FWD_BWD);
    TIMED_LOOP(STEP(FWD()); STEP(BWD()), r->fwd_bwd_ms, r->fwd_bwd_mean_ms);
    if (hook)
        hook(hook_ctx, LMK_ATTN_LOOPS_DONE);
out:
    free(pass_ms);
    if (rc != LMK_OK && rc != LMK_NOMEM && errbuf && errlen)
        snprintf(errbuf, errlen, "%s: %s", what, cudaGetErrorString(ce));
    if (p.st) {
        for (int i = 0; i < p.n; i++)
            cudaFreeAsync(p.ptr[i], p.st);
        cudaStreamSynchronize(p.st);
        cudaStreamDestroy(p.st);
        cudaMemPool_t mp;
        if (cudaDeviceGetDefaultMemPool(&mp, device) == cudaSuccess)
            cudaMemPoolTrimTo(mp, 0);
    }
    if (h)
        cublasDestroy(h);
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaGetLastError();
    return rc;
#undef CU
#undef ALLOC
#undef STEP
#undef HOOK
#undef TIMED_LOOP
#undef FWD
#undef BWD
}
