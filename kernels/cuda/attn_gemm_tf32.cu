/* The causal GEMMs of the naive attention (backend.h attn_causal_gemm) for
 * float32 tensors on TF32 tensor cores, one launch each: the products of
 * lmk_gemm's in_round TF32 (each input rounded to TF32 by cvt.rna, to
 * nearest with ties away from zero where the cpu's rounding takes ties to
 * even; products exact, float32 accumulation in another order than
 * cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32), alpha applied in float32,
 * float32 output.
 *
 * Why: at T ≤ 512 the blocked strided-batched cuBLAS GEMMs are many short
 * launches (13 per layer at T 256: 2.07 ms of a medium/256 tf32 step on the
 * H100, kernels/PERF.md session 34); one launch per GEMM over every head and
 * causal tile replaces them.
 *
 * Every (T, T) matrix is cut into CT × CT tiles (CT = 64); query tile r
 * needs key tiles 0…r. One block of 4 warps per (64 rows, head), the blocks
 * with the longest loops first; warp w owns rows 16w…16w+15 of the block:
 *   scores (c (T,T) = α·a·bmᵀ): query rows; loop over key tiles 0…r, each
 *     a 64 × 64 output tile stored whole (the causal softmax writes the
 *     zeros above the diagonal).
 *   mix    (c (T,dh) = α·a·bm): query rows; loop over key tiles 0…r.
 *   mix_t  (c (T,dh) = α·aᵀ·bm): key rows; loop over query tiles r…T/CT−1.
 * Tiles arrive by 16-byte cp.async, two stages; WMMA m16n16k8 fragments
 * (precision::tf32) from shared memory rows padded by 4 floats. */
#include <mma.h>

#include "attn_heads.cuh"
#include "cuda_internal.cuh"
#include "mma_sm80.cuh" /* cp_async16, cp_commit, cp_wait */

namespace {

using namespace nvcuda;

constexpr int CT = 64; /* the causal tile, the rows of a block */
constexpr int WARPS = 4, THREADS = WARPS * 32;
constexpr int PAD = 4;               /* floats after each shared row (16 bytes) */
constexpr int TT_LD = CT + PAD;      /* row stride of a CT-wide tile in shared memory */
template <int DH> constexpr int dh_ld() { return DH + PAD; }

typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> frag_a_row;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> frag_a_col;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> frag_acc;

/* The WMMA tf32 operand contract: every element rounded to TF32 first. */
template <typename F> __device__ __forceinline__ void to_tf32(F &f)
{
#pragma unroll
    for (int i = 0; i < f.num_elements; i++)
        f.x[i] = wmma::__float_to_tf32(f.x[i]);
}

/* sm (R, LD) ← R rows × W floats of g (rows ldg floats apart), 16 bytes per
 * thread step, by the block's THREADS threads (cp.async, not waited). */
template <int R, int W, int LD> __device__ __forceinline__ void tile_load(float *sm, const float *g, size_t ldg)
{
    constexpr int CH = W / 4, N = R * CH;
    for (int idx = threadIdx.x; idx < N; idx += THREADS) {
        const int r = idx / CH, c = (idx - r * CH) * 4;
        cp_async16(sm + r * LD + c, g + (size_t)r * ldg + c, true);
    }
}

/* Which tile a block works on: rt the 64-row tile of its output rows (query
 * rows; key rows for mix_t), bh its head; the longest loops first (the last
 * query tiles for scores and mix, the first key tiles for mix_t). */
template <bool FIRST_LONGEST_LOW> __device__ __forceinline__ void block_at(int Tn, int batch, int &rt, int &bh)
{
    const int nt = Tn / CT, lin = blockIdx.x;
    rt = FIRST_LONGEST_LOW ? lin / batch : nt - 1 - lin / batch;
    bh = lin % batch;
}

/* acc[j] += fa · the (8, DH) rows of bm at b (row stride LD), by 16-column
 * blocks j. */
template <int DH, int LD, typename FA>
__device__ __forceinline__ void acc_times_rows(frag_acc (&acc)[DH / 16], const FA &fa, const float *b)
{
#pragma unroll
    for (int j = 0; j < DH / 16; j++) {
        frag_b_row fb;
        wmma::load_matrix_sync(fb, b + j * 16, LD);
        to_tf32(fb);
        wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
}

/* --- warp-level pieces of the kernels below --- */

/* acc (16, CT) = alpha · the warp's 16 rows aw (row stride LD) times the
 * (CT, DH) tile bt transposed (row stride LD): one warp's rows of a scores
 * or dP tile. */
template <int DH, int LD>
__device__ __forceinline__ void warp_scores(frag_acc (&acc)[CT / 16], const float *aw, const float *bt, float alpha)
{
#pragma unroll
    for (int n = 0; n < CT / 16; n++)
        wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int k = 0; k < DH; k += 8) {
        frag_a_row fa;
        wmma::load_matrix_sync(fa, aw + k, LD);
        to_tf32(fa);
#pragma unroll
        for (int n = 0; n < CT / 16; n++) {
            frag_b_col fb; /* B (k, n) = bt (n, k): column-major */
            wmma::load_matrix_sync(fb, bt + n * 16 * LD + k, LD);
            to_tf32(fb);
            wmma::mma_sync(acc[n], fa, fb, acc[n]);
        }
    }
#pragma unroll
    for (int n = 0; n < CT / 16; n++)
#pragma unroll
        for (int i = 0; i < acc[n].num_elements; i++)
            acc[n].x[i] *= alpha;
}

/* warp_scores stored at sw (16 rows, row stride TT_LD: shared memory). */
template <int DH, int LD>
__device__ __forceinline__ void warp_rows_times_tile_t(float *sw, const float *aw, const float *bt, float alpha)
{
    frag_acc acc[CT / 16];
    warp_scores<DH, LD>(acc, aw, bt, alpha);
#pragma unroll
    for (int n = 0; n < CT / 16; n++)
        wmma::store_matrix_sync(sw + n * 16, acc[n], TT_LD, wmma::mem_row_major);
}

/* acc (16, DH) += the warp's (16, CT) tile sw (row stride TT_LD) times the
 * (CT, DH) tile bt (row stride LD): P·V, dS·K. */
template <int DH, int LD>
__device__ __forceinline__ void warp_tile_times_rows(frag_acc (&acc)[DH / 16], const float *sw, const float *bt)
{
#pragma unroll
    for (int k = 0; k < CT; k += 8) {
        frag_a_row fa;
        wmma::load_matrix_sync(fa, sw + k, TT_LD);
        to_tf32(fa);
        acc_times_rows<DH, LD>(acc, fa, bt + k * LD);
    }
}

/* The warp's 16 rows of acc (16, DH) times alpha, staged through stage
 * (16 rows, row stride LD) and stored at out (rows ld floats apart) with
 * plain, coalesced stores (any 4-byte alignment). */
template <int DH, int LD>
__device__ __forceinline__ void warp_store_rows(float *out, size_t ld, frag_acc (&acc)[DH / 16], float *stage,
                                                float alpha, int lane)
{
#pragma unroll
    for (int j = 0; j < DH / 16; j++) {
#pragma unroll
        for (int i = 0; i < acc[j].num_elements; i++)
            acc[j].x[i] *= alpha;
        wmma::store_matrix_sync(stage + j * 16, acc[j], LD, wmma::mem_row_major);
    }
    __syncwarp();
    for (int r = 0; r < 16; r++)
        for (int c = lane; c < DH; c += 32)
            out[(size_t)r * ld + c] = stage[r * LD + c];
}

/* c (batch, T, T) = alpha · a (batch, T, DH) · bmᵀ (bm's (T, DH) matrices
 * where bm_at says), written for the causal tiles only (key tiles 0…r of
 * query tile r), each tile whole. Shared: the a tile (CT, DH) and two
 * stages of bm tiles (CT, DH). */
template <int DH>
__global__ void __launch_bounds__(THREADS)
    causal_scores_tf32_kernel(float *c, const float *a, const float *bm, lmk_heads_at bm_at, int Tn, int batch,
                              float alpha)
{
    extern __shared__ __align__(128) float smem_f[];
    constexpr int LD = dh_ld<DH>();
    float *as = smem_f, *bs = as + CT * LD; /* (CT, LD), then 2 × (CT, LD) */
    int qt, bh;
    block_at<false>(Tn, batch, qt, bh);
    const int warp = threadIdx.x >> 5, nk = qt + 1;
    const float *bg = head_rows<const float, DH>(bm, bm_at, bh, Tn);
    const size_t bld = (size_t)bm_at.ld;
    tile_load<CT, DH, LD>(as, a + ((size_t)bh * Tn + (size_t)qt * CT) * DH, DH);
    tile_load<CT, DH, LD>(bs, bg, bld);
    cp_commit();
    float *crow = c + ((size_t)bh * Tn + (size_t)qt * CT + warp * 16) * Tn;
    for (int kt = 0; kt < nk; kt++) {
        if (kt + 1 < nk)
            tile_load<CT, DH, LD>(bs + ((kt + 1) & 1) * CT * LD, bg + (size_t)(kt + 1) * CT * bld, bld);
        cp_commit();
        cp_wait<1>();
        __syncthreads();
        frag_acc acc[CT / 16];
        warp_scores<DH, LD>(acc, as + warp * 16 * LD, bs + (kt & 1) * CT * LD, alpha);
#pragma unroll
        for (int n = 0; n < CT / 16; n++)
            wmma::store_matrix_sync(crow + (size_t)kt * CT + n * 16, acc[n], Tn, wmma::mem_row_major);
        __syncthreads(); /* the stage is refilled by the next step's load */
    }
}

/* TRANS false: c (batch, T, DH) = alpha · a (batch, T, T) · bm (bm's (T, DH)
 * matrices where bm_at says), query tile r reading a's key tiles 0…r.
 * TRANS true: c = alpha · aᵀ · bm, key tile r reading a's query tiles
 * r…T/CT−1. Shared: two stages of [a tile (CT, TT_LD) | bm tile (CT, LD)]. */
template <int DH, bool TRANS>
__global__ void __launch_bounds__(THREADS)
    causal_mix_tf32_kernel(float *c, const float *a, const float *bm, lmk_heads_at bm_at, int Tn, int batch,
                           float alpha)
{
    extern __shared__ __align__(128) float smem_f[];
    constexpr int LD = dh_ld<DH>(), STAGE = CT * TT_LD + CT * LD;
    int rt, bh;
    block_at<TRANS>(Tn, batch, rt, bh);
    const int warp = threadIdx.x >> 5, nt = Tn / CT;
    const int first = TRANS ? rt : 0, n = TRANS ? nt - rt : rt + 1;
    const float *ab = a + (size_t)bh * Tn * Tn;
    const size_t bld = (size_t)bm_at.ld;
    const float *bg = head_rows<const float, DH>(bm, bm_at, bh, Tn);
    /* step s reduces over tile t = first + s: a's (CT queries, CT keys) tile
     * (query tile rt, key tile t; or query tile t, key tile rt) and bm's rows
     * of tile t */
    auto load = [&](int s) {
        float *st = smem_f + (s & 1) * STAGE;
        const int t = first + s;
        const float *at = TRANS ? ab + (size_t)t * CT * Tn + (size_t)rt * CT : ab + (size_t)rt * CT * Tn + (size_t)t * CT;
        tile_load<CT, CT, TT_LD>(st, at, Tn);
        tile_load<CT, DH, LD>(st + CT * TT_LD, bg + (size_t)t * CT * bld, bld);
    };
    load(0);
    cp_commit();
    frag_acc acc[DH / 16];
#pragma unroll
    for (int j = 0; j < DH / 16; j++)
        wmma::fill_fragment(acc[j], 0.0f);
    for (int s = 0; s < n; s++) {
        if (s + 1 < n)
            load(s + 1);
        cp_commit();
        cp_wait<1>();
        __syncthreads();
        const float *at = smem_f + (s & 1) * STAGE, *bt = at + CT * TT_LD;
        if constexpr (TRANS) {
#pragma unroll
            for (int k = 0; k < CT; k += 8) { /* A (key row, query k) = a tile (query k, key row): column-major */
                frag_a_col fa;
                wmma::load_matrix_sync(fa, at + k * TT_LD + warp * 16, TT_LD);
                to_tf32(fa);
                acc_times_rows<DH, LD>(acc, fa, bt + k * LD);
            }
        } else {
            warp_tile_times_rows<DH, LD>(acc, at + warp * 16 * TT_LD, bt);
        }
        __syncthreads();
    }
    float *crow = c + ((size_t)bh * Tn + (size_t)rt * CT + warp * 16) * DH;
#pragma unroll
    for (int j = 0; j < DH / 16; j++) {
#pragma unroll
        for (int i = 0; i < acc[j].num_elements; i++)
            acc[j].x[i] *= alpha;
        wmma::store_matrix_sync(crow + j * 16, acc[j], DH, wmma::mem_row_major);
    }
}

/* backend.h attn_scores_softmax for float32 tensors (TF32 products): p
 * (batch, T, T) = the causal softmax of alpha · q · kᵀ, o = p · v (where
 * o_at says). One block per (query tile, head); warp w owns query rows
 * 16w… of it. Two sweeps over key tiles 0…r: the rows' running max and sum
 * (sum rescaled at each new max: expf(s − m), as softmax_causal_fwd,
 * summed in another order), then p = expf(s − m) / sum written (zeros
 * right of the diagonal) and p · v accumulated. Shared: the q tile, two
 * stages of k and v tiles, and the scores tile (each warp its rows). */
template <int DH>
__global__ void __launch_bounds__(THREADS)
    causal_scores_softmax_tf32_kernel(float *p, float *o, lmk_heads_at o_at, const float *q, const float *k,
                                      const float *v, int Tn, int batch, float alpha)
{
    extern __shared__ __align__(128) float smem_f[];
    constexpr int LD = dh_ld<DH>();
    float *qs = smem_f, *ks = qs + CT * LD, *vs = ks + 2 * CT * LD, *ss = vs + 2 * CT * LD;
    int qt, bh;
    block_at<false>(Tn, batch, qt, bh);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nk = qt + 1, steps = 2 * nk;
    const int i0 = qt * CT + warp * 16; /* the warp's first query row */
    const float *kg = k + (size_t)bh * Tn * DH, *vg = v + (size_t)bh * Tn * DH;
    auto load = [&](int step) { /* sweep 1: k tiles 0…qt; sweep 2: k and v tiles 0…qt */
        const int t = step < nk ? step : step - nk;
        tile_load<CT, DH, LD>(ks + (step & 1) * CT * LD, kg + (size_t)t * CT * DH, DH);
        if (step >= nk)
            tile_load<CT, DH, LD>(vs + (step & 1) * CT * LD, vg + (size_t)t * CT * DH, DH);
    };
    tile_load<CT, DH, LD>(qs, q + ((size_t)bh * Tn + (size_t)qt * CT) * DH, DH);
    load(0);
    cp_commit();
    float mrow[16], lrow[16]; /* the warp's rows: running max, sum (then 1 / sum); the same in every lane */
#pragma unroll
    for (int r = 0; r < 16; r++)
        mrow[r] = -INFINITY, lrow[r] = 0.0f;
    frag_acc oacc[DH / 16];
#pragma unroll
    for (int j = 0; j < DH / 16; j++)
        wmma::fill_fragment(oacc[j], 0.0f);
    float *sw = ss + warp * 16 * TT_LD;
    float *pw = p + ((size_t)bh * Tn + i0) * Tn;
    for (int step = 0; step < steps; step++) {
        if (step + 1 < steps)
            load(step + 1);
        cp_commit();
        cp_wait<1>();
        __syncthreads();
        const int t = step < nk ? step : step - nk;
        warp_rows_times_tile_t<DH, LD>(sw, qs + warp * 16 * LD, ks + (step & 1) * CT * LD, alpha);
        __syncwarp();
        const int j0 = t * CT + lane, j1 = j0 + 32;
        if (step < nk) {
#pragma unroll
            for (int r = 0; r < 16; r++) {
                const int i = i0 + r;
                const float x0 = j0 <= i ? sw[r * TT_LD + lane] : -INFINITY;
                const float x1 = j1 <= i ? sw[r * TT_LD + lane + 32] : -INFINITY;
                const float m = fmaxf(mrow[r], warp_max(fmaxf(x0, x1))); /* finite: j = t·CT ≤ i */
                const float add = warp_sum(expf(x0 - m) + expf(x1 - m));
                lrow[r] = lrow[r] * expf(mrow[r] - m) + add;
                mrow[r] = m;
            }
            if (step == nk - 1)
#pragma unroll
                for (int r = 0; r < 16; r++)
                    lrow[r] = 1.0f / lrow[r];
        } else {
#pragma unroll
            for (int r = 0; r < 16; r++) {
                const int i = i0 + r;
                const float p0 = j0 <= i ? expf(sw[r * TT_LD + lane] - mrow[r]) * lrow[r] : 0.0f;
                const float p1 = j1 <= i ? expf(sw[r * TT_LD + lane + 32] - mrow[r]) * lrow[r] : 0.0f;
                sw[r * TT_LD + lane] = p0;
                sw[r * TT_LD + lane + 32] = p1;
                pw[(size_t)r * Tn + j0] = p0;
                pw[(size_t)r * Tn + j1] = p1;
            }
            __syncwarp();
            warp_tile_times_rows<DH, LD>(oacc, sw, vs + (step & 1) * CT * LD);
        }
        __syncthreads();
    }
    float *og = head_rows<float, DH>(o, o_at, bh, Tn) + (size_t)i0 * o_at.ld;
    warp_store_rows<DH, LD>(og, (size_t)o_at.ld, oacc, qs + warp * 16 * LD, 1.0f, lane);
}

/* backend.h attn_dp_softmax_bwd for float32 tensors (TF32 products): ds =
 * p ⊙ (dp − D) for j ≤ i (0 right of the diagonal), dp = dout · vᵀ, D_i =
 * dout_i · o_i (float32), then dq = scale · ds · k. dout and o where
 * dout_at and o_at say. One block per (query tile, head), warp w owning
 * rows 16w…; key tiles 0…r in two stages of v and k tiles; p read from
 * global memory, ds written there and staged for the dq product. */
template <int DH>
__global__ void __launch_bounds__(THREADS)
    causal_dp_softmax_bwd_tf32_kernel(float *ds, float *dq, const float *dout, lmk_heads_at dout_at, const float *v,
                                      const float *k, const float *p, const float *o, lmk_heads_at o_at, int Tn,
                                      int batch, float scale)
{
    extern __shared__ __align__(128) float smem_f[];
    constexpr int LD = dh_ld<DH>();
    float *dos = smem_f, *vs = dos + CT * LD, *ks = vs + 2 * CT * LD, *ss = ks + 2 * CT * LD;
    int qt, bh;
    block_at<false>(Tn, batch, qt, bh);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nk = qt + 1;
    const int i0 = qt * CT + warp * 16;
    const size_t dld = (size_t)dout_at.ld, old = (size_t)o_at.ld;
    const float *dg = head_rows<const float, DH>(dout, dout_at, bh, Tn) + (size_t)qt * CT * dld;
    const float *vg = v + (size_t)bh * Tn * DH, *kg = k + (size_t)bh * Tn * DH;
    auto load = [&](int t) {
        tile_load<CT, DH, LD>(vs + (t & 1) * CT * LD, vg + (size_t)t * CT * DH, DH);
        tile_load<CT, DH, LD>(ks + (t & 1) * CT * LD, kg + (size_t)t * CT * DH, DH);
    };
    tile_load<CT, DH, LD>(dos, dg, dld);
    load(0);
    cp_commit();
    float drow[16]; /* D of the warp's rows, the same in every lane */
    {
        const float *dw = dg + (size_t)warp * 16 * dld;
        const float *ow = head_rows<const float, DH>(o, o_at, bh, Tn) + (size_t)i0 * old;
#pragma unroll
        for (int r = 0; r < 16; r++) {
            float acc = 0.0f;
            for (int c = lane; c < DH; c += 32)
                acc += dw[(size_t)r * dld + c] * ow[(size_t)r * old + c];
            drow[r] = warp_sum(acc);
        }
    }
    frag_acc dqacc[DH / 16];
#pragma unroll
    for (int j = 0; j < DH / 16; j++)
        wmma::fill_fragment(dqacc[j], 0.0f);
    float *sw = ss + warp * 16 * TT_LD;
    const float *pw = p + ((size_t)bh * Tn + i0) * Tn;
    float *dsw = ds + ((size_t)bh * Tn + i0) * Tn;
    for (int t = 0; t < nk; t++) {
        if (t + 1 < nk)
            load(t + 1);
        cp_commit();
        cp_wait<1>();
        __syncthreads();
        warp_rows_times_tile_t<DH, LD>(sw, dos + warp * 16 * LD, vs + (t & 1) * CT * LD, 1.0f);
        __syncwarp();
        const int j0 = t * CT + lane, j1 = j0 + 32;
#pragma unroll
        for (int r = 0; r < 16; r++) {
            const int i = i0 + r;
            const float d0 = j0 <= i ? pw[(size_t)r * Tn + j0] * (sw[r * TT_LD + lane] - drow[r]) : 0.0f;
            const float d1 = j1 <= i ? pw[(size_t)r * Tn + j1] * (sw[r * TT_LD + lane + 32] - drow[r]) : 0.0f;
            sw[r * TT_LD + lane] = d0;
            sw[r * TT_LD + lane + 32] = d1;
            dsw[(size_t)r * Tn + j0] = d0;
            dsw[(size_t)r * Tn + j1] = d1;
        }
        __syncwarp();
        warp_tile_times_rows<DH, LD>(dqacc, sw, ks + (t & 1) * CT * LD);
        __syncthreads();
    }
    warp_store_rows<DH, LD>(dq + ((size_t)bh * Tn + i0) * DH, DH, dqacc, dos + warp * 16 * LD, scale, lane);
}

template <int DH> constexpr size_t scores_smem() { return (size_t)3 * CT * dh_ld<DH>() * sizeof(float); }
template <int DH> constexpr size_t mix_smem() { return (size_t)2 * (CT * TT_LD + CT * dh_ld<DH>()) * sizeof(float); }
/* the fused kernels: one (CT, LD) tile, two stages of two more, the (CT, TT_LD) scores tile */
template <int DH> constexpr size_t fused_smem()
{
    return ((size_t)5 * CT * dh_ld<DH>() + (size_t)CT * TT_LD) * sizeof(float);
}

/* Sets kern's dynamic shared memory limit where it is over the default 48
 * KiB, once (bit of *done). */
template <typename K> bool allow_smem(K kern, size_t smem, uint32_t *done, int bit)
{
    const uint32_t mask = 1u << bit;
    if (smem > 48 * 1024 && !(*done & mask)) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
            return false;
        *done |= mask;
    }
    return true;
}

/* Launches kernel (a causal GEMM's) after allow_smem. */
template <typename K>
int launch_kernel(cudaStream_t s, K kernel, size_t smem, uint32_t *done, int bit, unsigned blocks, float *c,
                  const float *a, const float *bm, lmk_heads_at bm_at, int T, int batch, float alpha)
{
    if (!allow_smem(kernel, smem, done, bit))
        return LMK_DEVICE;
    kernel<<<blocks, THREADS, smem, s>>>(c, a, bm, bm_at, T, batch, alpha);
    return LMK_OK;
}

/* DHI: the head dim's index (0…4) in the smem_done bits: 3 per head dim
 * for the GEMMs (bits 0…14), 2 for the fused kernels (15…24). */
template <int DH, int DHI>
int launch_dh(cudaStream_t s, lmk_causal_gemm kind, float *c, const float *a, const float *bm, lmk_heads_at bm_at,
              int batch, int T, float alpha, uint32_t *done)
{
    const unsigned blocks = (unsigned)(T / CT) * (unsigned)batch;
    if (kind == LMK_CAUSAL_SCORES)
        return launch_kernel(s, causal_scores_tf32_kernel<DH>, scores_smem<DH>(), done, 3 * DHI, blocks, c, a, bm,
                             bm_at, T, batch, alpha);
    if (kind == LMK_CAUSAL_MIX)
        return launch_kernel(s, causal_mix_tf32_kernel<DH, false>, mix_smem<DH>(), done, 3 * DHI + 1, blocks, c, a,
                             bm, bm_at, T, batch, alpha);
    if (kind == LMK_CAUSAL_MIX_T)
        return launch_kernel(s, causal_mix_tf32_kernel<DH, true>, mix_smem<DH>(), done, 3 * DHI + 2, blocks, c, a,
                             bm, bm_at, T, batch, alpha);
    return LMK_INVALID;
}

} // namespace

template <int DH, int DHI>
int launch_scores_softmax(cudaStream_t s, float *p, float *o, lmk_heads_at o_at, const float *q, const float *k,
                          const float *v, int batch, int T, float alpha, uint32_t *done)
{
    auto kern = causal_scores_softmax_tf32_kernel<DH>;
    if (!allow_smem(kern, fused_smem<DH>(), done, 15 + 2 * DHI))
        return LMK_DEVICE;
    kern<<<(unsigned)(T / CT) * (unsigned)batch, THREADS, fused_smem<DH>(), s>>>(p, o, o_at, q, k, v, T, batch, alpha);
    return LMK_OK;
}

template <int DH, int DHI>
int launch_dp_softmax_bwd(cudaStream_t s, float *ds, float *dq, const float *dout, lmk_heads_at dout_at,
                          const float *v, const float *k, const float *p, const float *o, lmk_heads_at o_at,
                          int batch, int T, float scale, uint32_t *done)
{
    auto kern = causal_dp_softmax_bwd_tf32_kernel<DH>;
    if (!allow_smem(kern, fused_smem<DH>(), done, 16 + 2 * DHI))
        return LMK_DEVICE;
    kern<<<(unsigned)(T / CT) * (unsigned)batch, THREADS, fused_smem<DH>(), s>>>(ds, dq, dout, dout_at, v, k, p, o,
                                                                                o_at, T, batch, scale);
    return LMK_OK;
}

/* The head dim's instance: F(DH, DHI) for the supported head dims. */
#define TF32_DH_SWITCH(dh, F)                                                                                          \
    switch (dh) {                                                                                                      \
    case 32: return F(32, 0);                                                                                          \
    case 64: return F(64, 1);                                                                                          \
    case 80: return F(80, 2);                                                                                          \
    case 96: return F(96, 3);                                                                                          \
    case 128: return F(128, 4);                                                                                        \
    default: return LMK_INVALID;                                                                                       \
    }

int cuda_attn_tf32_tile(int T, int dh)
{
    const bool dh_ok = dh == 32 || dh == 64 || dh == 80 || dh == 96 || dh == 128;
    return T >= CT && T % CT == 0 && dh_ok ? CT : 0;
}

int cuda_attn_causal_gemm_tf32(cudaStream_t s, lmk_causal_gemm kind, float *c, const float *a, const float *bm,
                               lmk_heads_at bm_at, int batch, int T, int dh, float alpha, uint32_t *smem_done)
{
    if (!cuda_attn_tf32_tile(T, dh) || batch <= 0 || (int64_t)(T / CT) * batch > INT32_MAX || bm_at.ld % 4 != 0)
        return LMK_INVALID;
#define GEMM_AT(DH, DHI) launch_dh<DH, DHI>(s, kind, c, a, bm, bm_at, batch, T, alpha, smem_done)
    TF32_DH_SWITCH(dh, GEMM_AT)
#undef GEMM_AT
}

int cuda_attn_scores_softmax_tf32(cudaStream_t s, float *p, float *o, lmk_heads_at o_at, const float *q,
                                  const float *k, const float *v, int batch, int T, int dh, float alpha,
                                  uint32_t *smem_done)
{
    if (!cuda_attn_tf32_tile(T, dh) || batch <= 0 || (int64_t)(T / CT) * batch > INT32_MAX)
        return LMK_INVALID;
#define FWD_AT(DH, DHI) launch_scores_softmax<DH, DHI>(s, p, o, o_at, q, k, v, batch, T, alpha, smem_done)
    TF32_DH_SWITCH(dh, FWD_AT)
#undef FWD_AT
}

int cuda_attn_dp_softmax_bwd_tf32(cudaStream_t s, float *ds, float *dq, const float *dout, lmk_heads_at dout_at,
                                  const float *v, const float *k, const float *p, const float *o, lmk_heads_at o_at,
                                  int batch, int T, int dh, float scale, uint32_t *smem_done)
{
    if (!cuda_attn_tf32_tile(T, dh) || batch <= 0 || (int64_t)(T / CT) * batch > INT32_MAX || dout_at.ld % 4 != 0)
        return LMK_INVALID;
#define BWD_AT(DH, DHI) launch_dp_softmax_bwd<DH, DHI>(s, ds, dq, dout, dout_at, v, k, p, o, o_at, batch, T, scale, \
                                                     smem_done)
    TF32_DH_SWITCH(dh, BWD_AT)
#undef BWD_AT
}
