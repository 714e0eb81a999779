/* Private to the cuda backend: its state, status checking, the device-side
 * rounding helper and the op launchers (one .cu file per op family). */
#ifndef LMK_CUDA_INTERNAL_CUH
#define LMK_CUDA_INTERNAL_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "../backend.h"
#include "../status.h"
}

/* The side work's tracked allocations at most (cuda_state.side_tracked,
 * side_deferred); more: cuda_side_fork_tracked joins first. */
#define CUDA_SIDE_TRACKED_MAX 16

typedef struct cuda_state {
    int device;
    cudaStream_t stream;
    cudaMemPool_t pool;
    cublasHandle_t cublas;
    cublasHandle_t cublas_batched; /* strided-batched GEMMs: no workspace (LMK_CUBLAS_BATCHED_WS 0), else == cublas */
    void *cublas_ws;        /* cuBLAS workspace, CUDA_CUBLAS_WS_BYTES (NULL when 0) */
    void *scratch;          /* grow-only op scratch (stream-ordered) */
    size_t scratch_bytes;
    char last_error[256];
    cublasLtHandle_t lt;    /* LMK_GEMM_TUNE: cuBLASLt, created at the first tuned GEMM */
    struct gemm_tuned *tuned; /* (GEMM_TUNED_MAX) shapes timed once (gemm_cuda.cu); NULL until then */
    int ntuned;
    /* overlap GEMMs (lmk_gemm.overlap, LMK_OVERLAP_GEMMS; gemm_cuda.cu):
     * a second non-blocking stream with its own cuBLAS handles and
     * workspace, created at the first overlap GEMM outside a capture (NULL
     * until then); fork_ev orders it after the main stream, join_ev the
     * main stream after it; side_pending: work issued since the last join */
    cudaStream_t side;
    cublasHandle_t side_cublas, side_cublas_batched;
    void *side_ws;
    cudaEvent_t fork_ev, join_ev;
    int side_pending;
    int side_unavailable; /* creating the second stream failed: overlap GEMMs run on the main stream */
    /* side work that is not a GEMM (cuda_side_fork_tracked: rmsnorm.cu's
     * weight gradient): side_gemm_pending, an overlap GEMM was issued since
     * the last join (every free then joins first, cu_mem_free);
     * side_tracked, the allocations (base pointers) the other side work
     * reads or writes; side_deferred, those of them freed since: freed on
     * the main stream at the next join (cuda_side_join), the tracked
     * allocator having counted them free at the call, as PyTorch's
     * record_stream; side_scratch, that work's grow-only scratch (the main
     * stream's is cuda_scratch) */
    int side_gemm_pending;
    const void *side_tracked[CUDA_SIDE_TRACKED_MAX];
    int nside_tracked;
    void *side_deferred[CUDA_SIDE_TRACKED_MAX];
    int nside_deferred;
    void *side_scratch;
    size_t side_scratch_bytes;
    uint64_t attn_gemm_smem[2]; /* attn_gemm16.cu: the kernels whose dynamic shared memory limit is set, one bit each */
    uint32_t attn_wgmma_smem;   /* the same for the sm_90a kernels: bits 0…7 attn_mix_wgmma.cu, 8…15 the softmax ones */
    uint32_t attn_tf32_smem;    /* the same for attn_gemm_tf32.cu's kernels (5 kinds × 5 head dims) */
    int sm90;                   /* the device has compute capability 9.0: sm_90a kernels run (set at create) */
    int stream_priority;        /* of the main and overlap streams (LMK_OPT_LANE_PRIORITY) */
    /* the optimizer lane (lmk_backend.opt_lane; backend_cuda.cu): a third
     * non-blocking stream, created at its first use outside a capture;
     * opt_main: the main stream while the lane is on (st->stream is then
     * the lane's, so the AdamW launchers need no change); opt_pending:
     * work issued on it since the last join */
    cudaStream_t opt, opt_main;
    cudaEvent_t opt_fork_ev, opt_join_ev;
    int opt_pending;
} cuda_state;

/* Build-time knob: 1, the main and overlap streams get the device's greatest
 * stream priority and the optimizer lane its least, so that the blocks of
 * the backward's kernels are scheduled before AdamW's where both wait;
 * 0, every stream at the default priority. */
#ifndef LMK_OPT_LANE_PRIORITY
#define LMK_OPT_LANE_PRIORITY 1
#endif

/* Build-time knob: the cuBLAS workspace in MiB (0: none, cuBLAS then picks
 * algorithms that need none). */
#ifndef LMK_CUBLAS_WS_MIB
#define LMK_CUBLAS_WS_MIB 32
#endif
#define CUDA_CUBLAS_WS_BYTES ((size_t)LMK_CUBLAS_WS_MIB << 20)
/* Build-time knob: 1, the strided-batched GEMMs (the attention GEMMs) get the
 * workspace too; 0, they run on a handle without one. With a workspace cuBLAS
 * picks kernels whose dynamic tile scheduler needs a counter zeroed by a
 * 4-byte memset before each launch: a stream operation and two launch gaps
 * (≈ 3.5 µs) per GEMM; without it the same tiles, statically scheduled. */
#ifndef LMK_CUBLAS_BATCHED_WS
#define LMK_CUBLAS_BATCHED_WS 0
#endif

/* Block-wide sum of v (double) in a fixed order (warp shuffles, then the
 * warps' partials in warp order): every thread gets the same result. sh holds
 * one double per warp; blockDim.x is a multiple of 32. */
static __device__ __forceinline__ double block_sum_double(double v, double *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    double t = 0.0;
    for (int w = 0; w < nw; w++)
        t += sh[w];
    __syncthreads();
    return t;
}

#define CST(b) ((cuda_state *)(b)->impl)

/* Records "what: error" in st and returns the lmk status for a CUDA error. */
int cuda_fail(cuda_state *st, const char *what, cudaError_t e);
int cublas_fail(cuda_state *st, const char *what, cublasStatus_t s);

#define CUDA_TRY(st, call)                                                  \
    do {                                                                    \
        cudaError_t e_ = (call);                                            \
        if (e_ != cudaSuccess)                                              \
            return cuda_fail((st), #call, e_);                              \
    } while (0)

#define CUBLAS_TRY(st, call)                                                \
    do {                                                                    \
        cublasStatus_t s_ = (call);                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                    \
            return cublas_fail((st), #call, s_);                            \
    } while (0)

/* After a kernel launch: the launch status. */
#define LAUNCH_CHECK(st, name)                                              \
    do {                                                                    \
        cudaError_t e_ = cudaGetLastError();                                \
        if (e_ != cudaSuccess)                                              \
            return cuda_fail((st), "launch " name, e_);                     \
    } while (0)

/* At least bytes of scratch on the stream (grow-only). Sets *out. Growing
 * is refused (LMK_UNSUPPORTED) while the stream is being captured. */
int cuda_scratch(cuda_state *st, size_t bytes, void **out);
/* The grow-only scratch *buf of *cap bytes on stream: at least bytes (the
 * old one freed stream-ordered, 1 MiB at least, a quarter more than asked);
 * refused while stream is being captured. cuda_scratch and
 * cuda_side_scratch are it on their streams. */
int cuda_scratch_grow(cuda_state *st, cudaStream_t stream, void **buf, size_t *cap, size_t bytes, void **out);

/* *h, *batched: the cuBLAS handles of stream (backend_cuda.cu): *h with the
 * workspace ws (CUDA_CUBLAS_WS_BYTES; NULL when that is 0), host pointer
 * mode, default math (pure FP32 for float32 compute); *batched, for the
 * strided-batched GEMMs, without a workspace (LMK_CUBLAS_BATCHED_WS 0), else
 * *h itself. */
int cuda_cublas_pair(cuda_state *st, cudaStream_t stream, void *ws, cublasHandle_t *h, cublasHandle_t *batched);

/* Frees the tuned GEMMs' descriptors and the cuBLASLt handle (backend destroy). */
void cuda_gemm_tuned_free(cuda_state *st);

/* Orders the main stream after the overlap GEMMs issued since the last
 * join (nothing when none was). cuda_lane_join is the backend's lane_join;
 * the memory, synchronisation and capture calls of backend_cuda.cu join
 * first too. cuda_side_free: waits for and frees the second stream's
 * resources (backend destroy). */
int cuda_side_join(cuda_state *st);
/* The fork of an overlap op (gemm_cuda.cu): *side = the second stream,
 * ordered after the main stream's work so far, or NULL: run it on the main
 * stream (LMK_OVERLAP_GEMMS 0; a capture with LMK_OVERLAP_GEMMS 1; no second
 * stream could be made). */
int cuda_side_fork(cuda_state *st, cudaStream_t *side);
/* The fork of side work that is not a GEMM, as cuda_side_fork: *side the
 * second stream or NULL (run it on the main stream). The work reads or
 * writes only the n allocations ptrs (their base pointers, as the allocator
 * returned them; NULL entries skipped) and the side scratch: freeing any of
 * them before the next join is deferred to that join (cu_mem_free), and
 * freeing anything else does not join. The caller's contract is that of an
 * overlap GEMM otherwise: nothing the work reads or writes is read or
 * overwritten before lane_join. */
int cuda_side_fork_tracked(cuda_state *st, cudaStream_t *side, const void *const *ptrs, int n);
/* The side work's scratch of at least bytes, grown (stream-ordered, on the
 * second stream) outside a capture only, as cuda_scratch; called after
 * cuda_side_fork_tracked gave a stream. */
int cuda_side_scratch(cuda_state *st, size_t bytes, void **out);
/* Whether p is one of the side work's tracked allocations. */
int cuda_side_tracks(const cuda_state *st, const void *p);
int cuda_lane_join(lmk_backend *b);
void cuda_side_free(cuda_state *st);
/* Orders the main stream after the optimizer lane's work since the last
 * join (nothing when none was); the lane must be off. */
int cuda_opt_join(cuda_state *st);

/* A stream forked from the main stream (the overlap stream, the optimizer
 * lane) and its fork and join events. cuda_forked_create makes the three
 * (non-blocking stream of the given priority; events without timing); on
 * failure returns the status with what was made left for cuda_forked_free.
 * cuda_forked_free waits for the stream, destroys what exists and clears
 * the three. */
int cuda_forked_create(cuda_state *st, cudaStream_t *stream, cudaEvent_t *fork, cudaEvent_t *join, int priority);
void cuda_forked_free(cudaStream_t *stream, cudaEvent_t *fork, cudaEvent_t *join);

static inline unsigned grid_for(size_t n, unsigned block, unsigned cap)
{
    size_t g = (n + block - 1) / block;
    if (g > cap)
        g = cap;
    return g ? (unsigned)g : 1u;
}

/* Exactly lmk_round_value (backend.c): round-to-nearest-even to tf32, bf16
 * (dropping float encoding bits) or fp16 (with fp16 subnormals and overflow
 * to infinity). */
__device__ __forceinline__ float round_drop_bits_dev(float x, int drop)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    uint32_t half = (1u << (drop - 1)) - 1u;
    u += half + ((u >> drop) & 1u);
    u &= ~((1u << drop) - 1u);
    return __uint_as_float(u);
}

__device__ __forceinline__ float round_value_dev(float x, int r)
{
    if (r == LMK_ROUND_TF32)
        return round_drop_bits_dev(x, 13);
    if (r == LMK_ROUND_BF16)
        return round_drop_bits_dev(x, 16);
    if (r == LMK_ROUND_FP16) {
        float a = fabsf(x);
        if (isnan(x) || isinf(x))
            return x;
        if (a < 0x1p-14f)
            return copysignf(nearbyintf(a * 0x1p24f) * 0x1p-24f, x);
        float rr = round_drop_bits_dev(x, 13);
        if (fabsf(rr) > 65504.0f)
            return copysignf(INFINITY, x);
        return rr;
    }
    return x;
}

/* Loads and stores of the elementwise ops' dtypes (float, __nv_bfloat16,
 * __half): loads exact, stores rounded to nearest even (= cpu_st). */
__device__ __forceinline__ float ld_f(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld_f(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float ld_f(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void st_f(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st_f(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void st_f(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }

/* 16 bytes of T_ (vec16<T_>::n elements) as floats (exact) and back (one
 * rounding each, as st_f). i is an element index, a multiple of n, and the
 * address 16-byte aligned. */
template <typename T_> struct vec16 {
    static constexpr int n = 16 / (int)sizeof(T_);
    union {
        uint4 u;
        T_ e[16 / sizeof(T_)];
    };
};

template <typename T_>
__device__ __forceinline__ void ld_vec(const T_ *p, size_t i, float (&f)[vec16<T_>::n])
{
    vec16<T_> v;
    v.u = *(const uint4 *)(p + i);
#pragma unroll
    for (int k = 0; k < vec16<T_>::n; k++)
        f[k] = ld_f(v.e, k);
}

template <typename T_>
__device__ __forceinline__ void st_vec(T_ *p, size_t i, const float (&f)[vec16<T_>::n])
{
    vec16<T_> v;
#pragma unroll
    for (int k = 0; k < vec16<T_>::n; k++)
        st_f(v.e, k, f[k]);
    *(uint4 *)(p + i) = v.u;
}

/* Runs the statements with T the C++ type of lmk_dtype dt (F32, BF16, F16);
 * any other dt returns LMK_INVALID from the enclosing launcher. */
#define DT_DISPATCH(dt, T, ...)                        \
    switch (dt) {                                      \
    case LMK_F32: {                                    \
        typedef float T;                               \
        __VA_ARGS__;                                   \
        break;                                         \
    }                                                  \
    case LMK_BF16: {                                   \
        typedef __nv_bfloat16 T;                       \
        __VA_ARGS__;                                   \
        break;                                         \
    }                                                  \
    case LMK_F16: {                                    \
        typedef __half T;                              \
        __VA_ARGS__;                                   \
        break;                                         \
    }                                                  \
    default:                                           \
        return LMK_INVALID;                            \
    }

/* --- launchers: (outputs, inputs, sizes, state); LMK_OK or an error ----- */
int cuda_gemm_run(cuda_state *st, const lmk_gemm *g, void *c, const void *a, int a_half,
                  const void *bm, int b_half);
int cuda_round_launch(cuda_state *st, float *out, const float *x, size_t n, int r);

int cuda_embedding_fwd(lmk_backend *b, float *out, const int32_t *ids, const float *w, int n,
                       int d, int vocab);
int cuda_embedding_bwd(lmk_backend *b, float *dw, const float *dout, const int32_t *ids, int n,
                       int d, int vocab);
int cuda_rmsnorm_fwd(lmk_backend *b, void *out, lmk_dtype out_dt, float *rstd, const float *x,
                     const float *w, int n, int d, float eps);
int cuda_rmsnorm_bwd(lmk_backend *b, float *dx, float *dw, const void *dout, lmk_dtype dout_dt,
                     const float *x, const float *w, const float *rstd, int n, int d);
int cuda_add_rmsnorm_fwd(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype x2_dt,
                         void *out, lmk_dtype out_dt, float *rstd, const float *w, int n, int d, float eps);
int cuda_rmsnorm_bwd_add(lmk_backend *b, float *dx, void *dx16, lmk_round fmt, float *dw,
                         const void *dout, lmk_dtype dout_dt, const float *dres, const float *x,
                         const float *w, const float *rstd, int n, int d);
int cuda_rope_fwd(lmk_backend *b, void *out, const void *in, lmk_dtype dt, const float *table, int B,
                  int T, int H, int dh, int ld);
int cuda_rope_bwd(lmk_backend *b, void *din, const void *dout, lmk_dtype dt, const float *table, int B,
                  int T, int H, int dh, int ld);
int cuda_rope_qkv_fwd(lmk_backend *b, void *const heads[3], const void *qkv, lmk_dtype dt, const float *table,
                      int B, int T, int H, int dh);
int cuda_rope_qkv_bwd(lmk_backend *b, void *dqkv, const void *const dheads[3], lmk_dtype dt, const float *table,
                      int B, int T, int H, int dh);
int cuda_gemm(lmk_backend *b, const lmk_gemm *g, float *c, const float *a, const float *bm);
int cuda_softmax_causal_fwd(lmk_backend *b, void *p, const void *s, lmk_dtype dt, int batch, int T,
                            int zero_block);
int cuda_softmax_causal_bwd(lmk_backend *b, void *ds, const void *dp, const void *p, lmk_dtype dt,
                            int batch, int T, int zero_block);
int cuda_swiglu_fwd(lmk_backend *b, void *out, const void *a, const void *g, lmk_dtype dt, size_t n, int cols,
                    int64_t ld);
int cuda_swiglu_bwd(lmk_backend *b, void *da, void *dg, const void *dout, const void *a, const void *g,
                    lmk_dtype dt, size_t n, int cols, int64_t ld);
int cuda_add(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype x2_dt, size_t n);
int cuda_scale(lmk_backend *b, float *x, size_t n, float s);
int cuda_cast(lmk_backend *b, float *out, const float *x, size_t n, lmk_round r);
int cuda_gemm_half(lmk_backend *b, const lmk_gemm *g, void *c, const void *a, int a_half,
                   const void *bm, int b_half);
int cuda_cast_half(lmk_backend *b, void *dst16, const float *x, size_t n, lmk_round fmt);
int cuda_cast_float(lmk_backend *b, float *out, const void *x16, size_t n, lmk_round fmt);
int cuda_attn_fwd(lmk_backend *b, void *o, float *lse, const void *q, const void *k, const void *v,
                  const lmk_attn_shape *s);
int cuda_attn_bwd(lmk_backend *b, void *dq, void *dk, void *dv, float *work, const void *dout, const void *q,
                  const void *k, const void *v, const void *o, const float *lse, const lmk_attn_shape *s);
int cuda_attn_causal_block(lmk_backend *b, lmk_dtype dt, int T, int dh);
/* attn_gemm_tf32.cu: the causal GEMMs of float32 tensors on TF32 tensor
 * cores (attn_causal_gemm with dt LMK_F32). tile: 64 where T and dh are
 * supported, else 0. gemm: enqueues the one launch on s; LMK_INVALID for a
 * shape tile rejects or bm_at.ld not a multiple of 4, LMK_DEVICE when the
 * kernel's shared-memory limit could not be set (launch errors are left
 * for cudaGetLastError). smem_done: one bit per kernel whose limit is set
 * (cuda_state.attn_tf32_smem). */
int cuda_attn_tf32_tile(int T, int dh);
int cuda_attn_causal_gemm_tf32(cudaStream_t s, lmk_causal_gemm kind, float *c, const float *a, const float *bm,
                               lmk_heads_at bm_at, int batch, int T, int dh, float alpha, uint32_t *smem_done);
/* attn_scores_softmax / attn_dp_softmax_bwd (backend.h) for float32 tensors
 * with TF32 products, enqueued on s; the caller has checked the shape,
 * layouts and alignment (dout_at.ld a multiple of 4 here). Returns as
 * cuda_attn_causal_gemm_tf32. */
int cuda_attn_scores_softmax_tf32(cudaStream_t s, float *p, float *o, lmk_heads_at o_at, const float *q,
                                  const float *k, const float *v, int batch, int T, int dh, float alpha,
                                  uint32_t *smem_done);
int cuda_attn_dp_softmax_bwd_tf32(cudaStream_t s, float *ds, float *dq, const float *dout, lmk_heads_at dout_at,
                                  const float *v, const float *k, const float *p, const float *o, lmk_heads_at o_at,
                                  int batch, int T, int dh, float scale, uint32_t *smem_done);
int cuda_attn_causal_gemm(lmk_backend *b, lmk_causal_gemm kind, void *c, const void *a, const void *bm,
                          lmk_heads_at bm_at, lmk_dtype dt, int batch, int T, int dh, float alpha, int overlap);
int cuda_attn_scores_softmax(lmk_backend *b, void *p, void *o, lmk_heads_at o_at, const void *q, const void *k,
                             const void *v, lmk_dtype dt, int batch, int T, int dh, float alpha);
int cuda_attn_dp_softmax_bwd(lmk_backend *b, void *ds, void *dq, const void *dout, lmk_heads_at dout_at,
                             const void *v, const void *k, const void *p, const void *o, lmk_heads_at o_at,
                             lmk_dtype dt, int batch, int T, int dh, float scale);
int cuda_adamw_begin(lmk_backend *b, int64_t *t, float *alpha, const float *factor,
                     const lmk_adamw_hp *hp);
int cuda_cross_entropy(lmk_backend *b, float *loss, float *dlogits, const float *logits,
                       const int32_t *targets, int n, int V, float dscale);
int cuda_sum_squares(lmk_backend *b, float *sumsq, const float *g, size_t n);
int cuda_clip_factor(lmk_backend *b, float *factor, const float *sumsq, float max_norm,
                     float unscale);
int cuda_adamw(lmk_backend *b, float *p, const float *g, float *m, float *v, size_t n,
               const lmk_adamw_hp *hp, const float *factor);
int cuda_sum_squares_multi(lmk_backend *b, float *sumsq, const lmk_opt_tensor *ts, size_t count);
int cuda_adamw_multi(lmk_backend *b, const lmk_opt_tensor *ts, size_t count,
                     const lmk_adamw_hp *hp, const float *factor);

/* The max and the sum of v over the 32 lanes of a warp (butterfly: every
 * lane gets the result; all lanes must call). */
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

#endif
