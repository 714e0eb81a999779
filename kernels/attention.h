/* Scaled dot-product attention, forward and backward: the CPU reference
 * (attention_cpu.c), the fused flash-attention kernels (cuda/flash_attn.cu)
 * and the materialising naive CUDA path (cuda/attention_naive.cu).
 *
 * Math, per (batch b, head h), with s = 1/sqrt(d):
 *   S = s·Q·Kᵀ (T, T), masked to -inf where key > query when causal;
 *   P = softmax(S) row-wise; O = P·V; lse[i] = log Σ_j exp(S[i][j]).
 * Backward, given dO:
 *   D[i] = Σ_c dO[i][c]·O[i][c];  dV = Pᵀ·dO;  dP = dO·Vᵀ;
 *   dS = P∘(dP − D);  dQ = s·dS·K;  dK = s·dSᵀ·Q.
 * Every tensor is (B, H, T, d) contiguous; lse and D are (B, H, T) float32.
 *
 * FLOP convention (lmk_attn_flops): the forward is 4·B·H·T²·d (the two
 * T×T×d matmuls); causal counts half of it; the backward is 2.5× the forward
 * (five matmuls; the flash backward's recomputation of S is not counted). */
#ifndef LMK_ATTENTION_H
#define LMK_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "dtype.h" /* a C header without its own extern "C" */

typedef struct lmk_attn_shape {
    int B, H, T, d;  /* batch, heads, sequence length, head dim */
    int causal;      /* non-zero: key j attends only to queries i ≥ j */
    lmk_dtype dtype; /* element type of Q, K, V, O, dO, dQ, dK, dV */
    int atomic_dq;   /* flash backward: non-zero lets fp16/bf16 at d 16, 32, 64,
                        128 and fp32 at d 64, 128 take the single pass, whose
                        dQ is summed by float32 atomics (faster; its rounding
                        varies between runs; for 16 bits a larger work
                        buffer). 0: the deterministic two passes (every output
                        element has one writer: bit-equal reruns), as for every
                        other dtype and d. */
} lmk_attn_shape;

/* Head dims the flash kernels are compiled for. */
#define LMK_ATTN_HEAD_DIMS(XX) XX(16) XX(32) XX(64) XX(80) XX(128)

/* Non-zero when d is one of LMK_ATTN_HEAD_DIMS. */
int lmk_attn_head_dim_supported(int d);

/* Forward and backward FLOPs by the convention above. */
double lmk_attn_flops_fwd(const lmk_attn_shape *s);
double lmk_attn_flops_bwd(const lmk_attn_shape *s);

/* --- CPU reference (float32 storage, double accumulation) ---------------- */

/* o: (B, H, T, d) out; lse: (B, H, T) out; q, k, v: (B, H, T, d) in.
 * s->dtype must be LMK_F32. Returns LMK_OK, LMK_INVALID, LMK_NOMEM. */
int lmk_attn_cpu_fwd(float *o, float *lse, const float *q, const float *k, const float *v,
                     const lmk_attn_shape *s);
/* dq, dk, dv: (B, H, T, d) out; dout, q, k, v, o: (B, H, T, d) in;
 * lse: (B, H, T) in (from lmk_attn_cpu_fwd). Returns as above. */
int lmk_attn_cpu_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                     const float *k, const float *v, const float *o, const float *lse,
                     const lmk_attn_shape *s);

/* --- CUDA (device pointers; stream is a cudaStream_t; asynchronous) ------- */

/* Flash forward. o: (B, H, T, d) out; lse: (B, H, T) float32 out;
 * q, k, v: (B, H, T, d) in. Returns LMK_OK, LMK_INVALID (shape, head dim),
 * LMK_UNSUPPORTED (no CUDA build) or LMK_DEVICE (launch failed). */
int lmk_flash_attn_fwd(void *o, float *lse, const void *q, const void *k, const void *v,
                       const lmk_attn_shape *s, void *stream);
/* Floats of the work buffer lmk_flash_attn_bwd needs for shape s:
 * B·H·T (D = rowsum(dO∘O)) for the deterministic two passes, and
 * B·H·T·(d + 1) (a float32 dQ accumulator, then D) where s->atomic_dq lets
 * the 16-bit single pass run (fp32 sums into dq itself). */
size_t lmk_flash_attn_bwd_work_floats(const lmk_attn_shape *s);
/* Flash backward, recomputing P. Two ways (s->atomic_dq above):
 * the single pass (one block per 64 keys: dK, dV accumulated in the block,
 * dQ added by atomics to a float32 workspace, then converted, or for fp32
 * to dq itself) or the deterministic two passes (dK/dV over key blocks, dQ
 * over query blocks; no atomics).
 * dq, dk, dv: (B, H, T, d) out; work: lmk_flash_attn_bwd_work_floats(s)
 * float32 scratch (16-byte aligned for the single pass, else it falls back
 * to the two passes); dout, q, k, v, o: (B, H, T, d) in; lse: (B, H, T) in.
 * Returns as above. */
int lmk_flash_attn_bwd(void *dq, void *dk, void *dv, float *work, const void *dout,
                       const void *q, const void *k, const void *v, const void *o,
                       const float *lse, const lmk_attn_shape *s, void *stream);

/* Naive CUDA path: cuBLAS strided-batched GEMMs with the (B·H, T, T) scores
 * materialised, as the CS336 model computes them. The handle is a
 * cublasHandle_t already set to the stream. Scores/probabilities are stored
 * in the element dtype; softmax math is float32.
 * Forward: o (B,H,T,d) out; p (B,H,T,T) out (the probabilities, kept for the
 * backward); q, k, v in. Backward: dq, dk, dv out; dp (B,H,T,T) scratch;
 * dout, q, k, v, p in. Return LMK_OK, LMK_INVALID, LMK_DEVICE. */
int lmk_naive_attn_fwd(void *o, void *p, const void *q, const void *k, const void *v,
                       const lmk_attn_shape *s, void *cublas, void *stream);
int lmk_naive_attn_bwd(void *dq, void *dk, void *dv, void *dp, const void *dout,
                       const void *q, const void *k, const void *v, const void *p,
                       const lmk_attn_shape *s, void *cublas, void *stream);

/* --- one benchmark point on a GPU (cuda/attention_bench.cu) --------------- */

/* The attention of the model (lmk_model_config.attention) and of this
 * benchmark (naive and flash only). LMK_ATTN_NAIVE_FUSED: the naive
 * attention (the B×H×T×T probabilities materialised and saved for the
 * backward) with the scores, its causal softmax and the values in one
 * kernel, and dP, the softmax backward and dQ in another, where the backend
 * has them (bf16/fp16 on the cuda backend, backend.h attn_scores_softmax);
 * elsewhere the naive ops, in naive_fused's allocation order. */
typedef enum lmk_attn_impl { LMK_ATTN_NAIVE = 0, LMK_ATTN_FLASH = 1, LMK_ATTN_NAIVE_FUSED = 2 } lmk_attn_impl;

typedef struct lmk_attn_bench_result {
    double fwd_ms, bwd_ms, fwd_bwd_ms;      /* medians of the per-pass times (CUDA events
                                               around each pass, the host waiting
                                               for it before the next) */
    double fwd_mean_ms, bwd_mean_ms, fwd_bwd_mean_ms; /* means of the same passes */
    uint64_t mem_before_bwd_bytes;          /* live device bytes of this point after the
                                               forward, dO included */
    int oom;                                /* 1: a point allocation failed */
    uint64_t oom_request_bytes;             /* the request that failed */
} lmk_attn_bench_result;

/* The timed loops of a point, in order; LMK_ATTN_LOOPS_DONE follows the last. */
typedef enum lmk_attn_loop {
    LMK_ATTN_LOOP_FWD = 0,
    LMK_ATTN_LOOP_BWD = 1,
    LMK_ATTN_LOOP_FWD_BWD = 2,
    LMK_ATTN_LOOPS_DONE = 3
} lmk_attn_loop;

/* Called on the host with the point's stream idle (everything before it has
 * finished) just before each timed loop starts and once after the last:
 * the caller may wait there (e.g. for the GPU to leave a power cap) and
 * sample the GPU's clocks while the loop runs. Optional (NULL). */
typedef void (*lmk_attn_loop_hook)(void *ctx, lmk_attn_loop next);

/* Runs one point on GPU `device`: random inputs, `warmup` untimed passes,
 * then `passes` timed forwards, backwards and forward+backwards (each pass
 * between its own two CUDA events, synchronised; `hook` before each loop,
 * may be NULL).
 * Memory comes from cudaMallocAsync; a failed allocation frees everything
 * and returns LMK_OK with r->oom = 1. Returns LMK_OK, LMK_INVALID,
 * LMK_UNSUPPORTED (no CUDA build) or LMK_DEVICE with a reason in errbuf. */
int lmk_attn_bench_cuda(int device, lmk_attn_impl impl, const lmk_attn_shape *s, int warmup,
                        int passes, lmk_attn_loop_hook hook, void *hook_ctx,
                        lmk_attn_bench_result *r, char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
