/* The operator interface of the compute library: one table of function
 * pointers per backend (cpu now, cuda later). The model (model.c) is written
 * once against it; backends contain no model logic.
 *
 * DESIGN: every pointer argument named "device" memory lives where the
 * backend computes (host memory for cpu, GPU memory for cuda) and comes from
 * mem_alloc (normally through the tracked allocator, alloc.h). Every op takes
 * the backend handle first; a CUDA backend keeps its stream in it and enqueues
 * the op asynchronously, so ops never allocate and never synchronise (except
 * download and synchronize). Ops return LMK_OK or a negative lmk status; a
 * device error may be reported by a later call.
 *
 * Conventions: row-major; N = rows (tokens, B·T), d = features. Gradients of
 * parameters ACCUMULATE (+=) into their buffer (zeroed once per step);
 * gradients of activations OVERWRITE their output. In-place use is allowed
 * only where an op says so.
 *
 * Half precision: real 16-bit storage is raw bf16 / fp16 bits (uint16 per
 * element, on both backends). cast_half makes it; gemm_half reads it and
 * writes it (c_half); the ops with a lmk_dtype argument read and write
 * tensors of that dtype (LMK_F32, LMK_BF16 or LMK_F16; anything else is
 * LMK_INVALID): they load the values exactly, compute in float32 and store
 * with one IEEE round-to-nearest-even to the output dtype. Float32 storage
 * may also hold values rounded to a half format (lmk_round: the emulation
 * used by gemm's out_round and cast). */
#ifndef LMK_BACKEND_H
#define LMK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "dtype.h"

/* Rounding applied to GEMM inputs or outputs (autocast emulation). */
typedef enum lmk_round {
    LMK_ROUND_NONE = 0, /* float32 */
    LMK_ROUND_TF32 = 1, /* 10-bit mantissa, float32 range */
    LMK_ROUND_BF16 = 2,
    LMK_ROUND_FP16 = 3,
} lmk_round;

/* A strided batched GEMM, row-major, each matrix contiguous:
 *   C[i] (m, n) = alpha · op(A[i]) (m, k) · op(B[i]) (k, n) + beta · C[i]
 * for i < batch, where op(X) = Xᵀ when trans_x (A is then stored (k, m), B
 * stored (n, k)). Inputs are rounded to in_round before multiplying
 * (accumulation in float32); the result is rounded to out_round. beta = 0
 * ignores C's previous contents (even NaN). */
typedef struct lmk_gemm {
    int trans_a, trans_b;
    int m, n, k;
    int batch;
    int64_t stride_a, stride_b, stride_c; /* elements between batch items */
    float alpha, beta;
    lmk_round in_round, out_round;
    /* gemm_half only: c holds raw 16-bit bits of out_round's format (BF16 or
     * FP16, else LMK_INVALID), written once, rounded from the float32
     * alpha·AB. beta must be 0 (else LMK_INVALID): cuBLAS may reduce split-K
     * partial sums through a 16-bit C, so accumulating into one is not a
     * single rounding; accumulate into float32 C instead. */
    int c_half;
    /* Leading dimensions: elements between consecutive rows of A, B, C as
     * stored (row-major); 0 = packed (A: k, or m when trans_a; B: n, or k
     * when trans_b; C: n). A larger value reads or writes a sub-matrix of a
     * wider matrix (e.g. the causal blocks of a (T, T) score matrix); the
     * batch strides stay in stride_a/b/c. cuda: not with a float32 input
     * rounded to 16 bits or an out_round pass over float32 C (LMK_INVALID). */
    int64_t lda, ldb, ldc;
    /* A hint: the GEMM may run concurrently with the work the caller issues
     * after it, up to the next lane_join (cuda with LMK_OVERLAP_GEMMS: on a
     * second stream, ordered after everything issued before it; cpu:
     * ignored). Until lane_join the caller must not free, overwrite or read
     * c, nor free or overwrite a or b. Results are those of the same GEMM
     * without the hint. */
    int overlap;
} lmk_gemm;

/* Hyper-parameters of one AdamW step (CS336 form, see model.h). */
typedef struct lmk_adamw_hp {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t t; /* step number, from 1; ignored when alpha is set */
    /* device scalar α_t = lr·sqrt(1−β2ᵗ)/(1−β1ᵗ) written by adamw_begin, so
     * the step number lives on the device (CUDA-graph replay); NULL: α_t
     * from t, computed on the host */
    const float *alpha;
    /* adamw_multi: format of the tensors' 16-bit copies h (LMK_ROUND_BF16
     * or LMK_ROUND_FP16; else LMK_INVALID when a tensor has one) */
    lmk_round copy_fmt;
} lmk_adamw_hp;

/* One parameter tensor as the optimizer sees it: p, g, m, v (n) float32
 * device memory (the multi-tensor ops read g and n only where they say).
 * h: NULL, or (adamw_multi) a 16-bit copy of p (n, raw bits of the call's
 * hp->copy_fmt) that the step rewrites as cast_half of the updated p. */
typedef struct lmk_opt_tensor {
    float *p;
    const float *g;
    float *m, *v;
    size_t n;
    void *h;
} lmk_opt_tensor;

/* The causal GEMMs of the naive attention (attn_causal_gemm). */
typedef enum lmk_causal_gemm {
    LMK_CAUSAL_SCORES = 0, /* c (T, T)  = alpha · a (T, dh) · bm (T, dh)ᵀ: scores, dP */
    LMK_CAUSAL_MIX = 1,    /* c (T, dh) = alpha · a (T, T) · bm (T, dh): P·V, dS·K */
    LMK_CAUSAL_MIX_T = 2,  /* c (T, dh) = alpha · a (T, T)ᵀ · bm (T, dh): Pᵀ·dO, dSᵀ·Q */
} lmk_causal_gemm;

/* Where the per-head (T, dh) matrices of a 16-bit attention tensor lie
 * (attn_causal_gemm's bm; the fused kernels' o and dout): the matrix of
 * batch index bh = n·heads + h starts at element n·T·ld + h·dh, its rows ld
 * elements apart. {1, dh}: contiguous (batch, T, dh); {H, H·dh}: the merged
 * (B, T, H, dh) layout of a (B·T, H·dh) activation. Valid: heads ≥ 1
 * dividing batch, ld ≥ heads·dh, ld a multiple of 8 (16-byte rows). */
typedef struct lmk_heads_at {
    int heads;
    int64_t ld;
} lmk_heads_at;

/* Non-zero when at is a valid layout for batch matrices of dh columns. */
static inline int lmk_heads_at_ok(lmk_heads_at at, int batch, int dh)
{
    return at.heads >= 1 && batch % at.heads == 0 && at.ld >= (int64_t)at.heads * dh && at.ld % 8 == 0;
}

typedef struct lmk_backend lmk_backend;

struct lmk_backend {
    const char *name;          /* "cpu", "cuda" */
    void *impl;                /* backend's private state */
    void (*destroy)(lmk_backend *b);

    /* --- memory ---------------------------------------------------------- */
    /* Sets *out to new device memory of bytes (> 0), or LMK_NOMEM. */
    int (*mem_alloc)(lmk_backend *b, size_t bytes, void **out);
    void (*mem_free)(lmk_backend *b, void *p); /* p may be NULL */
    int (*mem_zero)(lmk_backend *b, void *p, size_t bytes);
    int (*mem_copy)(lmk_backend *b, void *dst, const void *src, size_t bytes);      /* device→device */
    int (*upload)(lmk_backend *b, void *dst, const void *host_src, size_t bytes);   /* host→device */
    int (*download)(lmk_backend *b, void *host_dst, const void *src, size_t bytes); /* device→host, waits */
    /* Waits for all queued work. */
    int (*synchronize)(lmk_backend *b);
    /* Orders all later work after every overlap GEMM (lmk_gemm.overlap)
     * issued so far. NULL: the backend runs overlap GEMMs in order. */
    int (*lane_join)(lmk_backend *b);
    /* The optimizer lane (the optimizer step inside backward, model.h):
     * opt_lane(b, 1) sends the ops issued after it to a lane of their own,
     * ordered after all work issued so far, until opt_lane(b, 0); later work
     * is not ordered after the lane's until opt_lane_join, which also
     * synchronize, download and graph capture end do (cuda: a third stream
     * of lower priority than the others). Only adamw_begin and adamw_multi
     * may be issued on the lane; memory it reads or writes must not be freed
     * before opt_lane_join. NULL: the ops run in order. */
    int (*opt_lane)(lmk_backend *b, int on);
    int (*opt_lane_join)(lmk_backend *b);

    /* --- ops -------------------------------------------------------------- */
    /* out (n, d) = w[ids[i]] for ids (n) in [0, vocab); w (vocab, d). */
    int (*embedding_fwd)(lmk_backend *b, float *out, const int32_t *ids, const float *w,
                         int n, int d, int vocab);
    /* dw (vocab, d) += scatter of dout (n, d) by ids (n). */
    int (*embedding_bwd)(lmk_backend *b, float *dw, const float *dout, const int32_t *ids,
                         int n, int d, int vocab);

    /* out (n, d, out_dt) = x · rsqrt(mean(x², -1) + eps) · w (float32 math,
     * rounded once to out_dt); rstd (n) saved for bwd. */
    int (*rmsnorm_fwd)(lmk_backend *b, void *out, lmk_dtype out_dt, float *rstd, const float *x,
                       const float *w, int n, int d, float eps);
    /* dx (n, d) = ∂/∂x; dw (d) += ∂/∂w; dout (n, d) of dout_dt. */
    int (*rmsnorm_bwd)(lmk_backend *b, float *dx, float *dw, const void *dout, lmk_dtype dout_dt,
                       const float *x, const float *w, const float *rstd, int n, int d);

    /* Fused residual forms, bit for bit the unfused sequence of ops:
     * add_rmsnorm_fwd: y (n, d) = x1 + x2 (add, x2 of x2_dt), then
     * rmsnorm_fwd(out, out_dt, rstd, y, w). y may alias x1, not x2 or out. */
    int (*add_rmsnorm_fwd)(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype x2_dt,
                           void *out, lmk_dtype out_dt, float *rstd, const float *w, int n, int d,
                           float eps);
    /* rmsnorm_bwd_add: rmsnorm_bwd(dx, dw, dout, ...), then dx += dres
     * (add; dres (n, d) float32, not aliasing dx; NULL: nothing added), then,
     * when dx16 is not NULL, dx16 (n, d, raw bits of fmt: LMK_ROUND_BF16 or
     * LMK_ROUND_FP16) = cast_half(dx): the residual stream's gradient and its
     * 16-bit copy for the GEMMs that read it, in one pass. dw may be
     * written beside the later work, as an overlap GEMM's output (the cuda
     * backend): lane_join before dw is read and before dout, x, rstd or dw
     * is overwritten (freeing them needs no join: the backend defers it);
     * dx and dx16 are ready in order. */
    int (*rmsnorm_bwd_add)(lmk_backend *b, float *dx, void *dx16, lmk_round fmt, float *dw,
                           const void *dout, lmk_dtype dout_dt, const float *dres, const float *x,
                           const float *w, const float *rstd, int n, int d);

    /* Splits heads and applies RoPE: in (B, T, H, dh) → out (B, H, T, dh) with
     * adjacent pairs (2k, 2k+1) of position t rotated by the angle whose
     * (cos, sin) is table (T, dh/2, 2). table NULL: plain head split. dh even
     * when table is given. Not in place. in and out of dtype dt (rotation
     * in float32, one rounding to dt). ld: the row stride of in's (B·T)
     * rows in elements, ≥ H·dh (H·dh: contiguous; 3·H·dh: q, k or v inside a
     * fused (N, 3d) projection output); else LMK_INVALID. */
    int (*rope_fwd)(lmk_backend *b, void *out, const void *in, lmk_dtype dt, const float *table,
                    int B, int T, int H, int dh, int ld);
    /* The adjoint: dout (B, H, T, dh) → din (B, T, H, dh), rotated back; din's
     * rows ld elements apart (the elements between them untouched).
     * table NULL: plain head merge (also the forward of merging heads). */
    int (*rope_bwd)(lmk_backend *b, void *din, const void *dout, lmk_dtype dt, const float *table,
                    int B, int T, int H, int dh, int ld);
    /* q, k and v of a fused (N, 3d) projection in one call: qkv (B, T, 3,
     * H, dh) → heads[0..2] (B, H, T, dh) each, q and k rotated by table, v
     * split only: bit for bit the three rope_fwd calls with ld 3·H·dh (table,
     * table, NULL). rope_qkv_bwd is the adjoint: dheads[0..2] → dqkv (every
     * element written), the three rope_bwd calls. NULL: the caller makes the
     * three calls. */
    int (*rope_qkv_fwd)(lmk_backend *b, void *const heads[3], const void *qkv, lmk_dtype dt,
                        const float *table, int B, int T, int H, int dh);
    int (*rope_qkv_bwd)(lmk_backend *b, void *dqkv, const void *const dheads[3], lmk_dtype dt,
                        const float *table, int B, int T, int H, int dh);

    int (*gemm)(lmk_backend *b, const lmk_gemm *g, float *c, const float *a, const float *bm);
    /* The same GEMM where an input may already be 16-bit: a_half / b_half
     * non-zero means a / bm holds raw bits (uint16) of g->in_round's format
     * (LMK_ROUND_BF16 or LMK_ROUND_FP16; anything else is LMK_INVALID when a
     * flag is set), as cast_half writes them, with the strides of g; the
     * other input is float32 and rounded as gemm does. Products of the
     * 16-bit values are accumulated in float32 (cuBLAS CUBLAS_COMPUTE_32F),
     * so the result equals gemm on the float32 originals. */
    int (*gemm_half)(lmk_backend *b, const lmk_gemm *g, void *c, const void *a, int a_half,
                     const void *bm, int b_half);

    /* p (batch, T, T) = softmax over keys j ≤ i of s (batch, T, T); entries
     * j > i set to 0. p and s of dtype dt, softmax in float32 (autocast's
     * float32 softmax, stored in dt). In place (p == s) allowed.
     * zero_block ≤ 0 or ≥ T: whole rows are written. Otherwise row i is
     * written only for j < end(i) = min(T, (i / zero_block + 1)·zero_block)
     * (the end of its causal block: what the blocked causal GEMMs read) and
     * entries j ≥ end(i) are unspecified (left as they were, or zero). */
    int (*softmax_causal_fwd)(lmk_backend *b, void *p, const void *s, lmk_dtype dt, int batch,
                              int T, int zero_block);
    /* ds = p ⊙ (dp − Σ_j dp ⊙ p), all of dtype dt, float32 math; reads only
     * j ≤ i of dp and p. In place (ds == dp) allowed. zero_block as for
     * softmax_causal_fwd (which entries of ds are written). */
    int (*softmax_causal_bwd)(lmk_backend *b, void *ds, const void *dp, const void *p,
                              lmk_dtype dt, int batch, int T, int zero_block);

    /* Optional (NULL: the model runs the naive attention's causal GEMMs as
     * blocked strided-batched gemm_half calls). attn_causal_block: the tile
     * (rows) these GEMMs work in for dtype dt, context T and head dim dh, 0
     * when not supported. attn_causal_gemm: one GEMM of kind over batch heads,
     * every matrix row-major, a and c contiguous (batch strides T·T and
     * T·dh), bm where bm_at says (the (T, dh) operand: k, v, dout or q),
     * 16-bit operands and output of dt, float32 accumulation, alpha applied
     * in float32, one rounding per stored element; dt LMK_F32: float32
     * operands and output, the products of lmk_gemm's in_round TF32 (the
     * model calls it only where TF32 is the GEMMs' precision), c 32-byte
     * aligned. With block = the tile,
     * query row i's causal end is end(i) = (i / block + 1)·block: SCORES
     * writes c[i][j] for j < end(i) only (the rest untouched); MIX and
     * MIX_T read a[i][j] for j < end(i) only, and the caller's entries
     * i < j < end(i) must be 0 (the causal softmax with zero_block = block
     * writes them so). overlap: as lmk_gemm.overlap. A shape the block
     * function rejects, a layout that is not valid, or a pointer not 16-byte
     * aligned: LMK_INVALID. */
    int (*attn_causal_block)(lmk_backend *b, lmk_dtype dt, int T, int dh);
    int (*attn_causal_gemm)(lmk_backend *b, lmk_causal_gemm kind, void *c, const void *a, const void *bm,
                            lmk_heads_at bm_at, lmk_dtype dt, int batch, int T, int dh, float alpha, int overlap);
    /* Optional (NULL: attn_causal_gemm, then the causal softmax, then
     * attn_causal_gemm). The same shapes, dtypes and tiles as
     * attn_causal_gemm (block = the tile of attn_causal_block; only where
     * that is non-zero, else LMK_INVALID; every pointer 16-byte aligned but
     * o's).
     * attn_scores_softmax: p (batch, T, T) = the causal softmax
     * (softmax_causal_fwd with zero_block = block) of the scores
     * alpha · q (T, dh) · k (T, dh)ᵀ, each score rounded to dt first as the
     * SCORES GEMM stores it; the scores never reach memory. p written for
     * j < end(i) (zeros at i < j < end(i)), the rest untouched. The row sums
     * are added in another order than softmax_causal_fwd's, so a p may
     * differ from it in the last place. Then o (batch, T, dh) = p · v from
     * the stored (rounded) p, as the MIX GEMM computes it, stored where o_at
     * says (o 4-byte aligned).
     * attn_dp_softmax_bwd: ds (batch, T, T) = p ⊙ (dp − D) for j ≤ i, 0 for
     * i < j < end(i), the rest untouched, where dp = dout (T, dh) · v (T, dh)ᵀ
     * (float32 accumulation, rounded to dt as the SCORES GEMM stores dP)
     * and D_i = Σ_k dout[i][k] · o[i][k] in float32, o = p · v the forward's
     * output: Σ_j p_ij dp_ij up to the roundings of o and dp (the flash
     * backward's D). dp never reaches memory. Then dq (batch, T, dh) =
     * scale · ds · k from the stored (rounded) ds, as the MIX GEMM computes
     * it. dout and o lie where dout_at and o_at say (o 4-byte aligned): the
     * merged layout {H, H·dh} spares the model its head split and merge. */
    int (*attn_scores_softmax)(lmk_backend *b, void *p, void *o, lmk_heads_at o_at, const void *q, const void *k,
                               const void *v, lmk_dtype dt, int batch, int T, int dh, float alpha);
    int (*attn_dp_softmax_bwd)(lmk_backend *b, void *ds, void *dq, const void *dout, lmk_heads_at dout_at,
                               const void *v, const void *k, const void *p, const void *o, lmk_heads_at o_at,
                               lmk_dtype dt, int batch, int T, int dh, float scale);

    /* out (n) = silu(a) ⊙ g, all of dtype dt; under a 16-bit dt silu(a) is
     * rounded to dt before the product (autocast: two half ops). out is n /
     * cols rows of cols; a and g hold the same rows ld ≥ cols elements apart
     * (ld = cols: contiguous; 2·cols: w1 x and w3 x inside one fused (N,
     * 2·d_ff) projection output). n % cols != 0 or ld < cols: LMK_INVALID. */
    int (*swiglu_fwd)(lmk_backend *b, void *out, const void *a, const void *g, lmk_dtype dt,
                      size_t n, int cols, int64_t ld);
    /* da = dout ⊙ g ⊙ silu'(a); dg = dout ⊙ silu(a), all of dtype dt; dout
     * contiguous, da, dg, a, g with rows ld apart as for swiglu_fwd (da and
     * dg's elements between the rows untouched). */
    int (*swiglu_bwd)(lmk_backend *b, void *da, void *dg, const void *dout, const void *a,
                      const void *g, lmk_dtype dt, size_t n, int cols, int64_t ld);

    /* y (n) = x1 + x2 (x2 of dtype x2_dt, float32 sum); y may alias either
     * float32 input. */
    int (*add)(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype x2_dt,
               size_t n);
    /* x (n) *= s. */
    int (*scale)(lmk_backend *b, float *x, size_t n, float s);
    /* out (n) = x rounded to r (may be in place). */
    int (*cast)(lmk_backend *b, float *out, const float *x, size_t n, lmk_round r);
    /* dst16 (n, uint16) = raw bits of x (n) rounded (RNE) to fmt, which is
     * LMK_ROUND_BF16 or LMK_ROUND_FP16 (else LMK_INVALID). Not in place. */
    int (*cast_half)(lmk_backend *b, void *dst16, const float *x, size_t n, lmk_round fmt);
    /* out (n) = the float32 values of x16 (n, raw bits of fmt, LMK_ROUND_BF16
     * or LMK_ROUND_FP16; else LMK_INVALID): exact, the inverse of cast_half. */
    int (*cast_float)(lmk_backend *b, float *out, const void *x16, size_t n, lmk_round fmt);

    /* Fused scaled dot-product attention with attention.h's math and
     * layouts: q, k, v, o, dout, dq, dk, dv (B, H, T, d) contiguous of
     * s->dtype (float32, or raw bf16/fp16 bits); lse, work (B, H, T) float32.
     * cuda: the flash kernels on the backend's stream (head dims of
     * LMK_ATTN_HEAD_DIMS); cpu: the float32 reference (16-bit tensors
     * widened, outputs rounded back). Backward recomputes P from lse. */
    int (*attn_fwd)(lmk_backend *b, void *o, float *lse, const void *q, const void *k,
                    const void *v, const lmk_attn_shape *s);
    int (*attn_bwd)(lmk_backend *b, void *dq, void *dk, void *dv, float *work, const void *dout,
                    const void *q, const void *k, const void *v, const void *o, const float *lse,
                    const lmk_attn_shape *s);

    /* Fused softmax cross-entropy over logits (n, V) with targets (n):
     * *loss (device scalar) = mean_i (logsumexp(logits_i) − logits_i[t_i]);
     * when dlogits is not NULL, dlogits (n, V) = (softmax − onehot) · dscale / n.
     * dlogits may alias logits. */
    int (*cross_entropy)(lmk_backend *b, float *loss, float *dlogits, const float *logits,
                         const int32_t *targets, int n, int V, float dscale);

    /* *sumsq (device scalar) += Σ g². */
    int (*sum_squares)(lmk_backend *b, float *sumsq, const float *g, size_t n);
    /* *factor (device scalar) = gradient multiplier for the optimizer:
     * with norm = sqrt(*sumsq) · unscale, factor = unscale · min(1,
     * max_norm / (norm + 1e-6)) (max_norm ≤ 0: no clipping); factor = 0 when
     * *sumsq is not finite (fp16 overflow: the step must be skipped). */
    int (*clip_factor)(lmk_backend *b, float *factor, const float *sumsq, float max_norm,
                       float unscale);
    /* The device step counter of AdamW (a whole step can then be captured in
     * a CUDA graph and replayed): when factor is NULL or *factor != 0,
     * *t += 1 (device int64; a skipped fp16 step leaves it); then *alpha
     * (device scalar) = lr·sqrt(1−β2^t)/(1−β1^t) for the new t, computed in
     * double (hp->lr, beta1, beta2 used; hp->t, hp->alpha ignored). *t = 0
     * leaves *alpha = 0. */
    int (*adamw_begin)(lmk_backend *b, int64_t *t, float *alpha, const float *factor,
                       const lmk_adamw_hp *hp);
    /* AdamW on n elements; g is multiplied by *factor (device scalar; NULL =
     * 1); does nothing when *factor == 0. p, m, v updated in place. α_t from
     * hp->alpha (device) when set, else from hp->t. */
    int (*adamw)(lmk_backend *b, float *p, const float *g, float *m, float *v, size_t n,
                 const lmk_adamw_hp *hp, const float *factor);

    /* Multi-tensor forms (one or a few launches per step on cuda). ts
     * (count) is host memory, borrowed for the call only (the cuda backend
     * passes it by value as kernel parameters, so a CUDA graph captures the
     * pointers of the call).
     * sum_squares_multi: *sumsq += Σ ts[i].g² for i = 0 … count−1, reading
     * g and n only; bit for bit the same as count sum_squares calls in that
     * order. */
    int (*sum_squares_multi)(lmk_backend *b, float *sumsq, const lmk_opt_tensor *ts, size_t count);
    /* adamw_multi: adamw on every tensor of ts with the same hp and factor;
     * bit for bit the same as count adamw calls, each followed, where
     * ts[i].h is set, by cast_half(h, p, n, hp->copy_fmt) (skipped with the
     * step when *factor == 0: the copy stays that of p). */
    int (*adamw_multi)(lmk_backend *b, const lmk_opt_tensor *ts, size_t count,
                       const lmk_adamw_hp *hp, const float *factor);
};

/* Creates the cpu reference backend (OpenMP threads for the heavy ops).
 * Sets *out (new; free with lmk_backend_free). Returns LMK_OK or LMK_NOMEM. */
int lmk_backend_cpu_create(lmk_backend **out);
/* Frees a backend of any kind; NULL is allowed. */
void lmk_backend_free(lmk_backend *b);

/* Exact round-to-nearest-even of a float to the given format (as float). */
float lmk_round_value(float x, lmk_round r);

#endif
