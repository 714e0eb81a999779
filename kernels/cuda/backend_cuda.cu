/* The cuda backend's table, state and memory: one device, one non-blocking
 * stream, a private stream-ordered memory pool (release threshold UINT64_MAX,
 * so cudaFreeAsync inside a step only returns memory to the pool), one cuBLAS
 * handle bound to the stream with a fixed workspace; a second stream for
 * overlap GEMMs (gemm_cuda.cu), which every free, synchronisation and
 * capture end joins first (side work other than GEMMs: the frees of what it
 * tracks are deferred to the join, cuda_side_fork_tracked); a third, the optimizer lane, which
 * synchronisation and capture end join (its users free nothing it reads
 * before joining it). Ops live in the other files of this folder.
 * Nothing here prints; failures are recorded in the state
 * (lmk_backend_cuda_last_error) and returned as lmk statuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "device_query.cuh"

extern "C" {
#include "backend_cuda.h"
}

int cuda_fail(cuda_state *st, const char *what, cudaError_t e)
{
    snprintf(st->last_error, sizeof st->last_error, "%s: %s: %s", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
    /* The runtime also keeps e as the thread's last error, which the next
     * launch check (cudaGetLastError) would report as its own: clear it.
     * A sticky error stays and is reported again by the next call. */
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? LMK_NOMEM : LMK_DEVICE;
}

int cublas_fail(cuda_state *st, const char *what, cublasStatus_t s)
{
    snprintf(st->last_error, sizeof st->last_error, "%s: %s: %s", what, cublasGetStatusName(s),
             cublasGetStatusString(s));
    return s == CUBLAS_STATUS_ALLOC_FAILED ? LMK_NOMEM : LMK_DEVICE;
}

int cuda_scratch_grow(cuda_state *st, cudaStream_t stream, void **buf, size_t *cap, size_t bytes, void **out)
{
    if (bytes <= *cap && *buf) {
        *out = *buf;
        return LMK_OK;
    }
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_TRY(st, cudaStreamIsCapturing(stream, &cs));
    if (cs != cudaStreamCaptureStatusNone) {
        snprintf(st->last_error, sizeof st->last_error,
                 "scratch must grow to %zu bytes during graph capture: run one step first",
                 bytes);
        return LMK_UNSUPPORTED;
    }
    size_t want = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes + bytes / 4;
    void *p = NULL;
    CUDA_TRY(st, cudaMallocFromPoolAsync(&p, want, st->pool, stream));
    if (*buf)
        CUDA_TRY(st, cudaFreeAsync(*buf, stream));
    *buf = p;
    *cap = want;
    *out = p;
    return LMK_OK;
}

int cuda_scratch(cuda_state *st, size_t bytes, void **out)
{
    return cuda_scratch_grow(st, st->stream, &st->scratch, &st->scratch_bytes, bytes, out);
}

/* --- memory ---------------------------------------------------------- */

static int cu_mem_alloc(lmk_backend *b, size_t bytes, void **out)
{
    cuda_state *st = CST(b);
    if (bytes == 0)
        return LMK_INVALID;
    void *p = NULL;
    CUDA_TRY(st, cudaMallocFromPoolAsync(&p, bytes, st->pool, st->stream));
    *out = p;
    return LMK_OK;
}

static void cu_mem_free(lmk_backend *b, void *p)
{
    cuda_state *st = CST(b);
    if (p) {
        if (st->side_pending) {
            /* an overlap GEMM may still read any p (or the lane is on: the
             * join cannot complete); other side work only what it tracks */
            int any = st->opt_main || st->side_gemm_pending;
            if (any || cuda_side_tracks(st, p)) {
                if (!any && st->nside_deferred < CUDA_SIDE_TRACKED_MAX) {
                    st->side_deferred[st->nside_deferred++] = p; /* freed at the next join */
                    return;
                }
                (void)cuda_side_join(st);
            }
        }
        cudaError_t e = cudaFreeAsync(p, st->stream);
        if (e != cudaSuccess)
            (void)cuda_fail(st, "cudaFreeAsync", e);
    }
}

static int cu_mem_zero(lmk_backend *b, void *p, size_t bytes)
{
    cuda_state *st = CST(b);
    CUDA_TRY(st, cudaMemsetAsync(p, 0, bytes, st->stream));
    return LMK_OK;
}

static int cu_mem_copy(lmk_backend *b, void *dst, const void *src, size_t bytes)
{
    cuda_state *st = CST(b);
    CUDA_TRY(st, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st->stream));
    return LMK_OK;
}

/* Pageable host memory: cudaMemcpyAsync returns once the source is staged,
 * so the caller may reuse it. */
static int cu_upload(lmk_backend *b, void *dst, const void *host_src, size_t bytes)
{
    cuda_state *st = CST(b);
    CUDA_TRY(st, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, st->stream));
    return LMK_OK;
}

static int cu_download(lmk_backend *b, void *host_dst, const void *src, size_t bytes)
{
    cuda_state *st = CST(b);
    int rc = cuda_side_join(st);
    if (rc == LMK_OK)
        rc = cuda_opt_join(st);
    if (rc != LMK_OK)
        return rc;
    CUDA_TRY(st, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, st->stream));
    CUDA_TRY(st, cudaStreamSynchronize(st->stream));
    return LMK_OK;
}

/* Waits for everything issued on b: the overlap stream and the optimizer
 * lane joined first. */
static int cu_synchronize(lmk_backend *b)
{
    cuda_state *st = CST(b);
    int rc = cuda_side_join(st);
    if (rc == LMK_OK)
        rc = cuda_opt_join(st);
    if (rc != LMK_OK)
        return rc;
    CUDA_TRY(st, cudaStreamSynchronize(st->stream));
    return LMK_OK;
}

/* Build-time knob: 1, the backend offers rope_qkv_fwd / rope_qkv_bwd (q, k
 * and v of a fused projection split, and rotated, in one launch each way);
 * 0, the model makes three rope_fwd / rope_bwd calls. On since H200
 * 2026-11-26 (kernels/PERF.md, session 15 calls 4-5): the same losses to
 * the bit; fwd+bwd −8% at small/128 bf16 with graphs, ≈ −1% at the
 * GEMM-bound tf32 points, −0.2% at xl/1024 bf16. */
#ifndef LMK_ROPE_QKV
#define LMK_ROPE_QKV 1
#endif

/* --- the optimizer lane ---------------------------------------------- */

int cuda_forked_create(cuda_state *st, cudaStream_t *stream, cudaEvent_t *fork, cudaEvent_t *join, int priority)
{
    CUDA_TRY(st, cudaStreamCreateWithPriority(stream, cudaStreamNonBlocking, priority));
    CUDA_TRY(st, cudaEventCreateWithFlags(fork, cudaEventDisableTiming));
    CUDA_TRY(st, cudaEventCreateWithFlags(join, cudaEventDisableTiming));
    return LMK_OK;
}

void cuda_forked_free(cudaStream_t *stream, cudaEvent_t *fork, cudaEvent_t *join)
{
    if (*stream)
        (void)cudaStreamSynchronize(*stream);
    if (*fork)
        (void)cudaEventDestroy(*fork);
    if (*join)
        (void)cudaEventDestroy(*join);
    if (*stream)
        (void)cudaStreamDestroy(*stream);
    *stream = NULL;
    *fork = *join = NULL;
}

static int opt_create(cuda_state *st)
{
    int least = 0, greatest = 0;
    CUDA_TRY(st, cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return cuda_forked_create(st, &st->opt, &st->opt_fork_ev, &st->opt_join_ev, LMK_OPT_LANE_PRIORITY ? least : 0);
}

static void opt_free(cuda_state *st)
{
    cuda_forked_free(&st->opt, &st->opt_fork_ev, &st->opt_join_ev);
    st->opt_pending = 0;
}

/* on: the lane's stream forks from the main stream (an event) and becomes
 * st->stream; off: the main stream is st->stream again. The lane's stream
 * is made at its first use outside a capture; inside a capture before that
 * (a graph captured with no eager step first) the ops run on the main
 * stream. */
static int cu_opt_lane(lmk_backend *b, int on)
{
    cuda_state *st = CST(b);
    if (!on) {
        if (st->opt_main) {
            st->stream = st->opt_main;
            st->opt_main = NULL;
        }
        return LMK_OK;
    }
    if (st->opt_main)
        return LMK_OK; /* already on */
    if (!st->opt) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        CUDA_TRY(st, cudaStreamIsCapturing(st->stream, &cs));
        if (cs != cudaStreamCaptureStatusNone)
            return LMK_OK;
        int rc = opt_create(st);
        if (rc != LMK_OK) {
            opt_free(st);
            return rc;
        }
    }
    CUDA_TRY(st, cudaEventRecord(st->opt_fork_ev, st->stream));
    CUDA_TRY(st, cudaStreamWaitEvent(st->opt, st->opt_fork_ev, 0));
    if (st->side_pending) { /* the update may read a gradient that side work writes: the lane waits, not the main stream */
        CUDA_TRY(st, cudaEventRecord(st->join_ev, st->side));
        CUDA_TRY(st, cudaStreamWaitEvent(st->opt, st->join_ev, 0));
    }
    st->opt_pending = 1;
    st->opt_main = st->stream;
    st->stream = st->opt;
    return LMK_OK;
}

int cuda_opt_join(cuda_state *st)
{
    if (!st->opt_pending || st->opt_main)
        return LMK_OK;
    st->opt_pending = 0;
    CUDA_TRY(st, cudaEventRecord(st->opt_join_ev, st->opt));
    CUDA_TRY(st, cudaStreamWaitEvent(st->stream, st->opt_join_ev, 0));
    return LMK_OK;
}

static int cu_opt_lane_join(lmk_backend *b)
{
    return cuda_opt_join(CST(b));
}

/* --- the table ------------------------------------------------------- */

static void cu_destroy(lmk_backend *b)
{
    cuda_state *st = (cuda_state *)b->impl;
    if (st) {
        int old = -1;
        (void)cudaGetDevice(&old);
        (void)cudaSetDevice(st->device);
        if (st->opt_main) {
            st->stream = st->opt_main;
            st->opt_main = NULL;
        }
        (void)cuda_side_join(st); /* the deferred frees */
        if (st->stream)
            (void)cudaStreamSynchronize(st->stream);
        cuda_side_free(st);
        opt_free(st);
        if (st->cublas_batched && st->cublas_batched != st->cublas)
            (void)cublasDestroy(st->cublas_batched);
        if (st->cublas)
            (void)cublasDestroy(st->cublas);
        cuda_gemm_tuned_free(st);
        if (st->scratch)
            (void)cudaFreeAsync(st->scratch, st->stream);
        if (st->stream) {
            (void)cudaStreamSynchronize(st->stream);
            (void)cudaStreamDestroy(st->stream);
        }
        if (st->cublas_ws)
            (void)cudaFree(st->cublas_ws);
        if (st->pool)
            (void)cudaMemPoolDestroy(st->pool);
        if (old >= 0)
            (void)cudaSetDevice(old);
        free(st);
    }
    free(b);
}

static lmk_backend cuda_template(void)
{
    lmk_backend t;
    memset(&t, 0, sizeof t);
    t.name = "cuda";
    t.destroy = cu_destroy;
    t.mem_alloc = cu_mem_alloc;
    t.mem_free = cu_mem_free;
    t.mem_zero = cu_mem_zero;
    t.mem_copy = cu_mem_copy;
    t.upload = cu_upload;
    t.download = cu_download;
    t.synchronize = cu_synchronize;
    t.lane_join = cuda_lane_join;
    t.opt_lane = cu_opt_lane;
    t.opt_lane_join = cu_opt_lane_join;
    t.embedding_fwd = cuda_embedding_fwd;
    t.embedding_bwd = cuda_embedding_bwd;
    t.rmsnorm_fwd = cuda_rmsnorm_fwd;
    t.rmsnorm_bwd = cuda_rmsnorm_bwd;
    t.add_rmsnorm_fwd = cuda_add_rmsnorm_fwd;
    t.rmsnorm_bwd_add = cuda_rmsnorm_bwd_add;
    t.rope_fwd = cuda_rope_fwd;
    t.rope_bwd = cuda_rope_bwd;
#if LMK_ROPE_QKV
    t.rope_qkv_fwd = cuda_rope_qkv_fwd;
    t.rope_qkv_bwd = cuda_rope_qkv_bwd;
#endif
    t.gemm = cuda_gemm;
    t.gemm_half = cuda_gemm_half;
    t.softmax_causal_fwd = cuda_softmax_causal_fwd;
    t.softmax_causal_bwd = cuda_softmax_causal_bwd;
    t.attn_causal_block = cuda_attn_causal_block;
    t.attn_causal_gemm = cuda_attn_causal_gemm;
    t.attn_scores_softmax = cuda_attn_scores_softmax;
    t.attn_dp_softmax_bwd = cuda_attn_dp_softmax_bwd;
    t.swiglu_fwd = cuda_swiglu_fwd;
    t.swiglu_bwd = cuda_swiglu_bwd;
    t.add = cuda_add;
    t.scale = cuda_scale;
    t.cast = cuda_cast;
    t.cast_half = cuda_cast_half;
    t.cast_float = cuda_cast_float;
    t.attn_fwd = cuda_attn_fwd;
    t.attn_bwd = cuda_attn_bwd;
    t.cross_entropy = cuda_cross_entropy;
    t.sum_squares = cuda_sum_squares;
    t.clip_factor = cuda_clip_factor;
    t.adamw_begin = cuda_adamw_begin;
    t.adamw = cuda_adamw;
    t.sum_squares_multi = cuda_sum_squares_multi;
    t.adamw_multi = cuda_adamw_multi;
    return t;
}

/* *h: a cuBLAS handle on stream with workspace (ws, bytes; NULL, 0: none),
 * host pointer mode, default math (pure FP32 for float32 compute). */
static int create_cublas(cuda_state *st, cudaStream_t stream, cublasHandle_t *h, void *ws, size_t bytes)
{
    CUBLAS_TRY(st, cublasCreate(h));
    CUBLAS_TRY(st, cublasSetStream(*h, stream));
    CUBLAS_TRY(st, cublasSetWorkspace(*h, ws, bytes));
    CUBLAS_TRY(st, cublasSetPointerMode(*h, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_TRY(st, cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH));
    return LMK_OK;
}

int cuda_cublas_pair(cuda_state *st, cudaStream_t stream, void *ws, cublasHandle_t *h, cublasHandle_t *batched)
{
    int rc = create_cublas(st, stream, h, ws, CUDA_CUBLAS_WS_BYTES);
    *batched = *h;
    if (rc == LMK_OK && !LMK_CUBLAS_BATCHED_WS && CUDA_CUBLAS_WS_BYTES > 0) {
        *batched = NULL;
        rc = create_cublas(st, stream, batched, NULL, 0);
    }
    return rc;
}

static int create_state(cuda_state *st, int device)
{
    int count = 0;
    CUDA_TRY(st, cudaGetDeviceCount(&count));
    if (device < 0 || device >= count) {
        snprintf(st->last_error, sizeof st->last_error, "no CUDA device %d (%d visible)", device,
                 count);
        return LMK_INVALID;
    }
    st->device = device;
    CUDA_TRY(st, cudaSetDevice(device));
    st->sm90 = lmk_cuda_is_sm90();
    int least = 0, greatest = 0;
    CUDA_TRY(st, cudaDeviceGetStreamPriorityRange(&least, &greatest));
    st->stream_priority = LMK_OPT_LANE_PRIORITY ? greatest : 0;
    CUDA_TRY(st, cudaStreamCreateWithPriority(&st->stream, cudaStreamNonBlocking, st->stream_priority));
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    CUDA_TRY(st, cudaMemPoolCreate(&st->pool, &props));
    uint64_t threshold = UINT64_MAX;
    CUDA_TRY(st, cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    if (CUDA_CUBLAS_WS_BYTES > 0)
        CUDA_TRY(st, cudaMalloc(&st->cublas_ws, CUDA_CUBLAS_WS_BYTES));
    return cuda_cublas_pair(st, st->stream, st->cublas_ws, &st->cublas, &st->cublas_batched);
}

extern "C" int lmk_backend_cuda_create(int device, lmk_backend **out, char *errbuf, size_t errlen)
{
    lmk_backend *b = (lmk_backend *)malloc(sizeof *b);
    cuda_state *st = (cuda_state *)calloc(1, sizeof *st);
    int rc = LMK_NOMEM;
    if (!b || !st) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "out of host memory");
        free(b);
        free(st);
        return rc;
    }
    *b = cuda_template();
    b->impl = st;
    rc = create_state(st, device);
    if (rc != LMK_OK) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "%s", st->last_error);
        cu_destroy(b);
        return rc;
    }
    *out = b;
    return LMK_OK;
}

extern "C" const char *lmk_backend_cuda_last_error(lmk_backend *b)
{
    if (!b || !b->name || strcmp(b->name, "cuda") != 0)
        return NULL;
    return CST(b)->last_error;
}

static int is_cuda(lmk_backend *b)
{
    return b && b->name && strcmp(b->name, "cuda") == 0;
}

extern "C" int lmk_backend_cuda_pool_usage(lmk_backend *b, uint64_t *reserved_current, uint64_t *reserved_high,
                                           uint64_t *used_current, uint64_t *used_high)
{
    if (!is_cuda(b))
        return LMK_UNSUPPORTED;
    cuda_state *st = CST(b);
    static const cudaMemPoolAttr attrs[4] = {cudaMemPoolAttrReservedMemCurrent, cudaMemPoolAttrReservedMemHigh,
                                             cudaMemPoolAttrUsedMemCurrent, cudaMemPoolAttrUsedMemHigh};
    uint64_t *outs[4] = {reserved_current, reserved_high, used_current, used_high};
    for (int i = 0; i < 4; i++) {
        if (!outs[i])
            continue;
        uint64_t v = 0; /* the attributes are cuuint64_t (64-bit) */
        CUDA_TRY(st, cudaMemPoolGetAttribute(st->pool, attrs[i], &v));
        *outs[i] = (uint64_t)v;
    }
    return LMK_OK;
}

extern "C" int lmk_backend_cuda_pool_reset(lmk_backend *b, int trim)
{
    if (!is_cuda(b))
        return LMK_UNSUPPORTED;
    cuda_state *st = CST(b);
    int rc = cu_synchronize(b);
    if (rc != LMK_OK)
        return rc;
    if (trim)
        CUDA_TRY(st, cudaMemPoolTrimTo(st->pool, 0));
    uint64_t zero = 0; /* setting a high-water mark to 0 restarts it from the current value */
    CUDA_TRY(st, cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReservedMemHigh, &zero));
    CUDA_TRY(st, cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrUsedMemHigh, &zero));
    return LMK_OK;
}

extern "C" int lmk_backend_cuda_release_cached(lmk_backend *b)
{
    if (!is_cuda(b))
        return LMK_UNSUPPORTED;
    cuda_state *st = CST(b);
    int dev = 0;
    int rc = cu_synchronize(b);
    if (rc != LMK_OK)
        return rc;
    CUDA_TRY(st, cudaMemPoolTrimTo(st->pool, 0));
    CUDA_TRY(st, cudaGetDevice(&dev));
    CUDA_TRY(st, cudaDeviceGraphMemTrim(dev));
    return LMK_OK;
}

extern "C" int lmk_backend_cuda_device_memory(lmk_backend *b, uint64_t *free_bytes, uint64_t *total_bytes)
{
    if (!is_cuda(b))
        return LMK_UNSUPPORTED;
    cuda_state *st = CST(b);
    size_t f = 0, t = 0;
    CUDA_TRY(st, cudaMemGetInfo(&f, &t));
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return LMK_OK;
}

extern "C" int lmk_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* --- graphs ------------------------------------------------------------ */

struct lmk_cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

extern "C" int lmk_backend_cuda_capture_begin(lmk_backend *b)
{
    cuda_state *st = CST(b);
    int rc = cuda_side_join(st); /* nothing of the second stream pending into the capture */
    if (rc != LMK_OK)
        return rc;
    CUDA_TRY(st, cudaStreamBeginCapture(st->stream, cudaStreamCaptureModeThreadLocal));
    return LMK_OK;
}

extern "C" void lmk_cuda_graph_free(lmk_cuda_graph *g)
{
    if (!g)
        return;
    if (g->exec)
        (void)cudaGraphExecDestroy(g->exec);
    if (g->graph)
        (void)cudaGraphDestroy(g->graph);
    free(g);
}

extern "C" int lmk_backend_cuda_capture_end(lmk_backend *b, lmk_cuda_graph **out)
{
    cuda_state *st = CST(b);
    lmk_cuda_graph *g = (lmk_cuda_graph *)calloc(1, sizeof *g);
    cudaGraph_t graph = NULL;
    (void)cuda_side_join(st); /* an unjoined stream fails the capture; the error then shows below */
    (void)cuda_opt_join(st);
    cudaError_t e = cudaStreamEndCapture(st->stream, &graph);
    if (e != cudaSuccess) {
        free(g);
        return cuda_fail(st, "cudaStreamEndCapture", e);
    }
    if (!g) {
        (void)cudaGraphDestroy(graph);
        return LMK_NOMEM;
    }
    g->graph = graph;
    e = cudaGraphInstantiate(&g->exec, g->graph, 0);
    if (e != cudaSuccess) {
        lmk_cuda_graph_free(g);
        return cuda_fail(st, "cudaGraphInstantiate", e);
    }
    *out = g;
    return LMK_OK;
}

extern "C" int lmk_cuda_graph_launch(lmk_backend *b, lmk_cuda_graph *g)
{
    cuda_state *st = CST(b);
    CUDA_TRY(st, cudaGraphLaunch(g->exec, st->stream));
    return LMK_OK;
}
