/* The causal GEMMs of the naive attention (backend.h attn_causal_gemm) on
 * tensor cores, one launch each, 16-bit operands and output, float32
 * accumulation (mma.sync m16n8k16), alpha applied in float32 and one
 * rounding per stored element — the arithmetic of cuBLAS's 16-bit GEMMs with
 * CUBLAS_COMPUTE_32F; only the order of the float32 additions differs. On
 * compute capability 9.0, mix and mix_t at dh 64 / 128 and T a multiple of
 * 128 run on warpgroup MMA instead (attn_mix_wgmma.cu, LMK_CG_WGMMA).
 *
 * Every (T, T) matrix is cut into CT × CT tiles; query tile r needs key tiles
 * 0…r (the causal block of the softmax's zero_block = CT). One block of
 * 4 warps per (64·MT output rows, head), each warp 16·MT rows, blocks with
 * the longest loops first; a warp skips the steps beyond its rows' causal
 * tile (MT 2: a block spans two causal tiles):
 *   scores (c (T,T) = α·a·bmᵀ): query rows, loop over key tiles. The block's
 *     A rows stay in registers; each key tile's product is rounded, staged
 *     in shared memory by stmatrix and stored as 16-byte row pieces.
 *   mix    (c (T,dh) = α·a·bm): query rows, loop over key tiles of a.
 *   mix_t  (c (T,dh) = α·aᵀ·bm): key rows, loop over query tiles of a from
 *     their causal tile on (a's tiles read transposed by ldmatrix.trans).
 * Tiles arrive by 16-byte cp.async in a CG_STAGES-deep ring, one barrier per
 * loop step. Rows in shared memory are padded by 8 elements (conflict-free
 * ldmatrix for every supported dh).
 * Measured on the H200 (kernels/PERF.md, session 11): at xl/1024 bf16 each
 * launch moves 2.1–2.5 TB/s, like cuBLAS's blocked GEMMs (ncu: latency-bound,
 * short-scoreboard and mma waits at 4 warps per scheduler); the gain is
 * fewer launches and tiles at short T and the 64-row causal tiles.
 *
 * Attention naive_fused (backend.h attn_scores_softmax, attn_dp_softmax_bwd)
 * runs two more kernels of the scores kind, with a ring of two tiles per
 * step: scores → causal softmax → P (written) → P·V, with the key tiles
 * swept twice (row max and sum, then P), and dP → dS = P ⊙ (dP − D)
 * (written) → dS·K, with D = dout · o. The scores and dP stay in
 * registers; P and dS feed the second product from registers, rounded as
 * written. Measured on the H200 (kernels/PERF.md, session 12): xl/1024 bf16
 * fwd+bwd 112.3 → 106.3 ms against naive in the same call. */
#include "attn_heads.cuh"
#include "attn_mix_wgmma.h"
#include "attn_softmax_wgmma.h"
#include "cuda_internal.cuh"
#include "mma_sm80.cuh"

#include <stdio.h>
#include <type_traits>

namespace {

constexpr int CT = 64; /* the causal tile: rows of a query block, the reduction step */
#ifndef LMK_CG_STAGES  /* build-time knob: the cp.async ring depth */
#define LMK_CG_STAGES 3
#endif
/* Build-time knob: m16 row tiles per warp, 1 or 2 (64 or 128 output rows per
 * 4-warp block; 2 where T is a multiple of 128). 2 measured on the H200
 * against 1: xl/1024 bf16 fwd+bwd 112.8 vs 113.9 ms, large/1024 58.7 vs 59.3,
 * small/128 3.43 vs 3.92 (kernels/PERF.md, session 11, call 4). */
#ifndef LMK_CG_MT
#define LMK_CG_MT 2
#endif
/* Build-time knob: LMK_CG_MT for the kernels with the fused softmax
 * (attn_scores_softmax, attn_dp_softmax_bwd). 1 measured on the H200
 * against 2: xl/1024 bf16 fwd+bwd 111.3 vs 112.4 ms, large/1024 57.7 vs
 * 58.1 (kernels/PERF.md, session 12, call 2). */
#ifndef LMK_CG_SOFTMAX_MT
#define LMK_CG_SOFTMAX_MT 1
#endif
/* Build-time knob, a bit mask of the GEMMs that run on Hopper warpgroup MMA
 * (attn_mix_wgmma.cu) where the device and shape allow: 1 the transposed one
 * (MIX_T: dV, dK), 2 MIX (P·V, dQ of plain naive). Measured on the H200
 * (kernels/PERF.md, session 13), fwd+bwd, bf16:
 *   1 against 0, attention naive_fused: xl/1024 107.1–107.6 vs 108.1–108.2
 *   ms in three calls, large/1024 0.987–0.998 (calls 1–3);
 *   3 against 1, attention naive: xl/1024 112.05 vs 113.23 ms, large/1024
 *   58.06 vs 58.26, medium/256 8.88 vs 9.08 (call 6). */
#ifndef LMK_CG_WGMMA
#define LMK_CG_WGMMA 3
#endif
/* Build-time knob, a bit mask of naive_fused's kernels that run on Hopper
 * warpgroup MMA (attn_softmax_wgmma.cu) where the device and shape allow:
 * 1 attn_scores_softmax, 2 attn_dp_softmax_bwd. */
#ifndef LMK_CG_SOFTMAX_WGMMA
#define LMK_CG_SOFTMAX_WGMMA 3
#endif
constexpr int CG_STAGES = LMK_CG_STAGES;
constexpr int CG_WARPS = 4, CG_THREADS = CG_WARPS * 32;
constexpr int TT_LD = CT + 8; /* shared row stride of a CT-wide tile (elements) */
template <int DH> constexpr int dh_ld() { return DH + 8; }

/* sm (R, LD) ← R rows × W columns of g (row stride ldg elements), by the
 * block's CG_THREADS threads, 16 bytes each per piece. Where a thread's
 * pieces keep one column (CG_THREADS a multiple of the pieces per row) the
 * offsets are set once and stepped by constants. */
template <typename T, int R, int W, int LD>
__device__ __forceinline__ void tile_load(T *sm, const T *g, size_t ldg)
{
    constexpr int CH = W / 8, N = R * CH; /* 16-byte pieces per row, in all */
    if constexpr (CG_THREADS % CH == 0) {
        constexpr int STEP = CG_THREADS / CH; /* rows between a thread's pieces */
        const int r = threadIdx.x / CH, c = (threadIdx.x % CH) * 8;
        T *sp = sm + r * LD + c;
        const T *gp = g + (size_t)r * ldg + c;
#pragma unroll
        for (int i = 0; i < (N + CG_THREADS - 1) / CG_THREADS; i++)
            if (N % CG_THREADS == 0 || r + i * STEP < R)
                cp_async16(sp + i * STEP * LD, gp + (size_t)i * STEP * ldg, true);
    } else {
        for (int idx = threadIdx.x; idx < N; idx += CG_THREADS) {
            const int r = idx / CH, c = (idx - r * CH) * 8;
            cp_async16(sm + r * LD + c, g + (size_t)r * ldg + c, true);
        }
    }
}

/* acc (MT, NB, 4) = 0: MT row tiles of NB mma C blocks. */
template <int MT, int NB> __device__ __forceinline__ void zero_acc(float (&acc)[MT][NB][4])
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NB; n++)
            acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.0f;
}

/* acc[m][n], acc[m][n + 1] += a[m] · the B operand pair r (blocks n and n + 1,
 * as ldsm4 / ldsm4_t load them), for each of the MT row tiles. */
template <typename T, int MT, int NB>
__device__ __forceinline__ void mma_rows(float (&acc)[MT][NB][4], int n, const uint32_t (&a)[MT][4],
                                         const uint32_t (&r)[4])
{
#pragma unroll
    for (int m = 0; m < MT; m++) {
        tc_ops<T>::mma(acc[m][n], a[m], r[0], r[1]);
        tc_ops<T>::mma(acc[m][n + 1], a[m], r[2], r[3]);
    }
}

/* af (DH / 16, MT, 4) ← the warp's 16·MT rows of the A tile as (ROWS, LD)
 * in shared memory (its rows from warp · 16·MT on), by k16 steps. */
template <typename T, int DH, int MT, int LD>
__device__ __forceinline__ void load_rows(uint32_t (&af)[DH / 16][MT][4], const T *as, int warp, int lane)
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int kk = 0; kk < DH / 16; kk++)
            ldsm4(af[kk][m], frag_a(as, LD, warp * 16 * MT + m * 16, kk * 16, lane));
}

/* Where block blockIdx.x of a row-tile kernel works (ROWS query rows per
 * block, the blocks with the most key tiles first): query tile qt of head
 * bh, over nk key tiles; the warp's 16·MT rows start at row0 and end in key
 * tile last (their diagonal tile). */
struct row_block {
    int qt, bh, nk, lane, warp, row0, last;
};
template <int ROWS> __device__ __forceinline__ row_block row_block_at(int Tn, int batch)
{
    const int nt = Tn / ROWS, lin = blockIdx.x, qt = nt - 1 - lin / batch, warp = threadIdx.x >> 5;
    const int row0 = qt * ROWS + warp * (ROWS / CG_WARPS);
    return {qt, lin % batch, (qt + 1) * (ROWS / CT), (int)(threadIdx.x & 31), warp, row0, row0 / CT};
}

/* Starts the cp.async ring: the A tile (ROWS, DH) of rows ag (row stride
 * ldg) into as, then the first STAGES − 1 steps' tiles by load(step). */
template <int STAGES, typename T, int ROWS, int DH, int LD, typename Load>
__device__ __forceinline__ void ring_start(T *as, const T *ag, size_t ldg, int steps, const Load &load)
{
    tile_load<T, ROWS, DH, LD>(as, ag, ldg);
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < steps)
            load(s);
        cp_commit();
    }
}

/* One step s (of steps) of the cp.async ring the row-tile kernels share,
 * STAGES deep: waits for step s's tiles; on the first step every warp
 * takes its A rows into af, after which the A tile's space stages outputs;
 * then issues step s + STAGES − 1's tiles by load(step). */
template <int STAGES, typename T, int DH, int MT, int LD, typename Load>
__device__ __forceinline__ void ring_step(int s, int steps, const Load &load, uint32_t (&af)[DH / 16][MT][4],
                                          const T *as, int warp, int lane)
{
    cp_wait<STAGES - 2>();
    __syncthreads();
    if (s == 0) {
        load_rows<T, DH, MT, LD>(af, as, warp, lane);
        __syncthreads();
    }
    if (s + STAGES - 1 < steps)
        load(s + STAGES - 1);
    cp_commit();
}

/* acc (MT, CT / 8, 4) = the warp's rows af (DH / 16, MT, 4) · btᵀ, bt a
 * (CT, DH) tile in shared memory (row stride LD): one CT-wide tile of
 * scores or dP. */
template <typename T, int DH, int MT, int LD>
__device__ __forceinline__ void rows_times_tile_t(float (&acc)[MT][CT / 8][4], const uint32_t (&af)[DH / 16][MT][4],
                                                  const T *bt, int lane)
{
    zero_acc(acc);
#pragma unroll
    for (int kk = 0; kk < DH / 16; kk++)
#pragma unroll
        for (int n = 0; n < CT / 16; n++) {
            uint32_t r[4];
            ldsm4(r, frag_b(bt, LD, n * 16, kk * 16, lane));
            mma_rows<T>(acc, 2 * n, af[kk], r);
        }
}

/* acc (MT, DH / 8, 4) += pk (CT / 16, MT, 4) · bt, pk a CT-wide tile in the
 * A operand layout (pack_tile), bt a (CT, DH) tile in shared memory (row
 * stride LD): P·V and dS·K from registers. */
template <typename T, int DH, int MT, int LD>
__device__ __forceinline__ void tile_times_rows(float (&acc)[MT][DH / 8][4], const uint32_t (&pk)[CT / 16][MT][4],
                                                const T *bt, int lane)
{
#pragma unroll
    for (int kk = 0; kk < CT / 16; kk++)
#pragma unroll
        for (int j = 0; j < DH / 16; j++) {
            uint32_t r[4];
            ldsm4_t(r, frag_a(bt, LD, kk * 16, j * 16, lane));
            mma_rows<T>(acc, 2 * j, pk[kk], r);
        }
}

/* x (MT, CT / 8, 4) in the mma C layout: each pair of a lane's row (entries
 * 2h, 2h + 1 of block n of row tile m; h 0 the row g, 1 the row g + 8)
 * replaced by f(m, n, h, x0, x1) (a float2), in the order m, n, h. */
template <int MT, typename F> __device__ __forceinline__ void map_pairs(float (&x)[MT][CT / 8][4], const F &f)
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < CT / 8; n++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float2 r = f(m, n, h, x[m][n][2 * h], x[m][n][2 * h + 1]);
                x[m][n][2 * h] = r.x;
                x[m][n][2 * h + 1] = r.y;
            }
}

/* x (MT, CT / 8, 4) in the mma C layout of a diagonal tile: the entries
 * right of the diagonal (column j > row i) set to v. d: the lane's row g
 * minus its column 2t, both relative to the tile's corner, so that entry
 * 2h + c of block n of row tile m has i − j = d + 16m + 8h − 8n − c. */
template <int MT>
__device__ __forceinline__ void mask_upper(float (&x)[MT][CT / 8][4], int d, float v)
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < CT / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (d + m * 16 + (e >> 1) * 8 - n * 8 - (e & 1) < 0)
                    x[m][n][e] = v;
}

/* x (MT, CT / 8, 4) in the mma C layout, rounded to T by pairs into the A
 * operand layout of a product over the tile's CT columns (flash
 * attention's register reuse): pk[kk][m] is the m16 × k16 A fragment of
 * columns 16·kk…, and also what stmatrix stores of that 16 × 16 block. */
template <typename T, int MT>
__device__ __forceinline__ void pack_tile(uint32_t (&pk)[CT / 16][MT][4], const float (&x)[MT][CT / 8][4])
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int kk = 0; kk < CT / 16; kk++) {
            const float(&lo)[4] = x[m][2 * kk], (&hi)[4] = x[m][2 * kk + 1];
            pk[kk][m][0] = tc_ops<T>::pack(lo[0], lo[1]);
            pk[kk][m][1] = tc_ops<T>::pack(lo[2], lo[3]);
            pk[kk][m][2] = tc_ops<T>::pack(hi[0], hi[1]);
            pk[kk][m][3] = tc_ops<T>::pack(hi[2], hi[3]);
        }
}

/* The warp's (WR, CT) tile of 16-bit values (packed by pack_tile) out to
 * global memory: into its rows of the shared staging tile by 16 × 16
 * blocks (stmatrix), then as 16-byte row pieces (lane: row lane / 8 + 4·i,
 * column (lane % 8)·8). cw: the warp's staging rows (stride TT_LD); cg_wr:
 * global row lane / 8 of the tile at column (lane % 8)·8, rows ldg
 * elements apart. */
template <typename T, int MT>
__device__ __forceinline__ void store_packed(const uint32_t (&pk)[CT / 16][MT][4], T *cw, T *cg_wr, size_t ldg,
                                             int lane)
{
    constexpr int WR = 16 * MT;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int kk = 0; kk < CT / 16; kk++)
            stsm4(frag_a(cw, TT_LD, m * 16, kk * 16, lane), pk[kk][m][0], pk[kk][m][1], pk[kk][m][2], pk[kk][m][3]);
    __syncwarp();
    const T *cw_rd = cw + (lane >> 3) * TT_LD + (lane & 7) * 8;
#pragma unroll
    for (int i = 0; i < WR / 4; i++)
        *reinterpret_cast<uint4 *>(cg_wr + (size_t)i * 4 * ldg) = *reinterpret_cast<const uint4 *>(cw_rd + i * 4 * TT_LD);
    __syncwarp();
}

/* The (16·MT, DH) accumulators of a warp's rows (mma C layout) times alpha,
 * rounded to T, stored at c (rows ldc elements apart; lane: rows g, g + 8
 * of each m16 tile, columns 2t, 2t + 1 of each 8). */
template <typename T, int DH, int MT>
__device__ __forceinline__ void store_rows(T *c, size_t ldc, const float (&acc)[MT][DH / 8][4], float alpha, int lane)
{
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < DH / 8; j++) {
            st2(c + (size_t)(m * 16 + g) * ldc + j * 8 + 2 * t, alpha * acc[m][j][0], alpha * acc[m][j][1]);
            st2(c + (size_t)(m * 16 + g + 8) * ldc + j * 8 + 2 * t, alpha * acc[m][j][2], alpha * acc[m][j][3]);
        }
}

/* scores: the A tile (ROWS, DH), whose space then stages the output tiles
 * (ROWS, TT_LD), and the ring of (CT, DH) key tiles */
template <int DH, int ROWS> constexpr int scores_a_elems()
{
    return ROWS * (dh_ld<DH>() > TT_LD ? dh_ld<DH>() : TT_LD);
}
template <typename T, int DH, int ROWS> constexpr size_t scores_smem()
{
    return ((size_t)scores_a_elems<DH, ROWS>() + (size_t)CG_STAGES * CT * dh_ld<DH>()) * sizeof(T);
}
/* mix: per stage the a tile ((ROWS, CT) as stored, or (CT, ROWS) read
 * transposed) and the (CT, DH) bm tile */
template <int ROWS> constexpr int mix_a_elems()
{
    return ROWS * TT_LD > CT * (ROWS + 8) ? ROWS * TT_LD : CT * (ROWS + 8);
}
template <typename T, int DH, int ROWS> constexpr size_t mix_smem()
{
    return (size_t)CG_STAGES * (mix_a_elems<ROWS>() + CT * dh_ld<DH>()) * sizeof(T);
}

/* c (batch, T, T) = alpha · a (batch, T, DH) · bmᵀ (bm's (T, DH) matrices
 * where bm_at says), written for the causal tiles only. Grid: (T / ROWS) · batch blocks of CG_THREADS;
 * ROWS = 64·MT, a warp owns 16·MT rows, which stop at their causal tile's
 * last key tile. */
template <typename T, int DH, int MT>
__global__ void __launch_bounds__(CG_THREADS)
    causal_scores_gemm_kernel(T *c, const T *a, const T *bm, lmk_heads_at bm_at, int Tn, int batch, float alpha)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), ROWS = CG_WARPS * 16 * MT, WR = 16 * MT;
    T *as = reinterpret_cast<T *>(smem_raw); /* (ROWS, LD); after the first step (ROWS, TT_LD): outputs */
    T *bs = as + scores_a_elems<DH, ROWS>(); /* CG_STAGES × (CT, LD) */
    const row_block rb = row_block_at<ROWS>(Tn, batch);
    const int qt = rb.qt, bh = rb.bh, nk = rb.nk, lane = rb.lane, warp = rb.warp, last = rb.last;
    const T *bg = head_rows<const T, DH>(bm, bm_at, bh, Tn);
    const size_t bld = (size_t)bm_at.ld;
    auto load = [&](int pf) {
        tile_load<T, CT, DH, LD>(bs + (pf % CG_STAGES) * CT * LD, bg + (size_t)pf * CT * bld, bld);
    };
    ring_start<CG_STAGES, T, ROWS, DH, LD>(as, a + ((size_t)bh * Tn + (size_t)qt * ROWS) * DH, DH, nk, load);
    uint32_t af[DH / 16][MT][4]; /* per k-step, the MT row tiles */
    T *cw = as + warp * WR * TT_LD; /* this warp's rows of the output tile, rounded */
    T *cg_wr = c + ((size_t)bh * Tn + rb.row0 + (lane >> 3)) * Tn + (lane & 7) * 8;
    for (int kt = 0; kt < nk; kt++) {
        ring_step<CG_STAGES, T, DH, MT, LD>(kt, nk, load, af, as, warp, lane);
        if (kt > last)
            continue;
        const T *b = bs + (kt % CG_STAGES) * CT * LD;
        float acc[MT][CT / 8][4];
        rows_times_tile_t<T, DH, MT, LD>(acc, af, b, lane);
        map_pairs(acc, [&](int, int, int, float x0, float x1) { return make_float2(x0 * alpha, x1 * alpha); });
        uint32_t pk[CT / 16][MT][4];
        pack_tile<T, MT>(pk, acc);
        store_packed<T, MT>(pk, cw, cg_wr + (size_t)kt * CT, Tn, lane);
    }
}

/* TRANS false: c (batch, T, DH) = alpha · a (batch, T, T) · bm (bm's (T,
 * DH) matrices where bm_at says) reading a's causal tiles (query rows r…: key tiles up to their causal
 * tile's). TRANS true: c = alpha · aᵀ · bm (key rows r…: query tiles from
 * their causal tile's on). Grid: (T / ROWS) · batch blocks of CG_THREADS;
 * ROWS = 64·MT, a warp owns 16·MT rows and skips the reduction steps they
 * do not take. */
template <typename T, int DH, bool TRANS, int MT>
__global__ void __launch_bounds__(CG_THREADS)
    causal_mix_gemm_kernel(T *c, const T *a, const T *bm, lmk_heads_at bm_at, int Tn, int batch, float alpha)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), ROWS = CG_WARPS * 16 * MT, WR = 16 * MT;
    constexpr int ALD = TRANS ? ROWS + 8 : TT_LD; /* the a tile's shared row stride */
    constexpr int STAGE = mix_a_elems<ROWS>() + CT * LD;
    T *ring = reinterpret_cast<T *>(smem_raw); /* CG_STAGES × [a tile | bm tile (CT, LD)] */
    const int nt = Tn / ROWS, lin = blockIdx.x;
    const int ot = TRANS ? lin / batch : nt - 1 - lin / batch, bh = lin % batch;
    const int first = TRANS ? ot * (ROWS / CT) : 0;
    const int n = TRANS ? Tn / CT - first : (ot + 1) * (ROWS / CT);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int own = (ot * ROWS + warp * WR) / CT; /* the causal tile of this warp's rows */
    const T *ab = a + (size_t)bh * Tn * Tn + (TRANS ? (size_t)first * CT * Tn + (size_t)ot * ROWS
                                                     : (size_t)ot * ROWS * Tn);
    const size_t bld = (size_t)bm_at.ld;
    const T *bb = head_rows<const T, DH>(bm, bm_at, bh, Tn) + (size_t)first * CT * bld;
    /* step s reduces over tile first + s: a's tile (CT queries, ROWS keys) or (ROWS queries, CT keys) */
    auto load = [&](int s) {
        T *st = ring + (s % CG_STAGES) * STAGE;
        if (TRANS)
            tile_load<T, CT, ROWS, ALD>(st, ab + (size_t)s * CT * Tn, Tn);
        else
            tile_load<T, ROWS, CT, ALD>(st, ab + (size_t)s * CT, Tn);
        tile_load<T, CT, DH, LD>(st + mix_a_elems<ROWS>(), bb + (size_t)s * CT * bld, bld);
    };
    for (int s = 0; s < CG_STAGES - 1; s++) {
        if (s < n)
            load(s);
        cp_commit();
    }
    float acc[MT][DH / 8][4];
    zero_acc(acc);
    for (int s = 0; s < n; s++) {
        cp_wait<CG_STAGES - 2>();
        __syncthreads();
        if (s + CG_STAGES - 1 < n)
            load(s + CG_STAGES - 1);
        cp_commit();
        const int kt = first + s;
        if (TRANS ? kt < own : kt > own) /* beyond this warp's causal tile: not read */
            continue;
        const T *at = ring + (s % CG_STAGES) * STAGE, *bt = at + mix_a_elems<ROWS>();
#pragma unroll
        for (int k = 0; k < CT / 16; k++) {
            uint32_t af[MT][4];
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (TRANS) /* a's tile stored [k][m]: the A operand by transposed 8×8 loads */
                    ldsm4_t(af[m], frag_b(at, ALD, k * 16, warp * WR + m * 16, lane));
                else
                    ldsm4(af[m], frag_a(at, ALD, warp * WR + m * 16, k * 16, lane));
            }
#pragma unroll
            for (int j = 0; j < DH / 16; j++) {
                uint32_t r[4];
                ldsm4_t(r, frag_a(bt, LD, k * 16, j * 16, lane));
                mma_rows<T>(acc, 2 * j, af, r);
            }
        }
    }
    store_rows<T, DH, MT>(c + ((size_t)bh * Tn + (size_t)ot * ROWS + warp * WR) * DH, DH, acc, alpha, lane);
}

/* --- the causal softmax fused with the scores / dP GEMM ------------------- */

/* Build-time knob: the fused kernels' ring depth. 2 measured on the H200
 * against 3 (attention naive_fused, fwd+bwd): xl/1024 bf16 105.6 vs 106.6
 * ms, large/1024 54.3 vs 54.7, 2.7B/512 72.1 vs 73.9 (kernels/PERF.md,
 * session 12, call 6): the smaller ring fits 4 blocks per SM instead of 3. */
#ifndef LMK_CG_SOFTMAX_STAGES
#define LMK_CG_SOFTMAX_STAGES 2
#endif
constexpr int CG_SM_STAGES = LMK_CG_SOFTMAX_STAGES;
/* The fused kernels' shared memory: the A tile (ROWS, DH), whose space then
 * stages the output tiles (ROWS, TT_LD), and a ring of CG_SM_STAGES pairs
 * of (CT, DH) tiles (k and v; v and k). */
template <typename T, int DH, int ROWS> constexpr size_t fused_smem()
{
    return ((size_t)scores_a_elems<DH, ROWS>() + (size_t)CG_SM_STAGES * 2 * CT * dh_ld<DH>()) * sizeof(T);
}

/* p (batch, T, T) = causal softmax of round(alpha · q · kᵀ) and o = p · v,
 * o's (T, DH) matrices where o_at says (backend.h attn_scores_softmax). Grid and tiles as
 * causal_scores_gemm_kernel; the key tiles are swept twice. The first
 * sweep (k tiles) keeps each lane's running maximum and sum of exponentials
 * of its rows (rescaled when the maximum moves; merged across the row's 4
 * lanes at the end). The second (k and v tiles) recomputes the scores,
 * rounds p = exp(s − max) / sum (the masked entries j > i of the diagonal
 * tile give exp(−inf) = 0) into the A operand layout, stores that and adds
 * its product with the v tile into the rows' o accumulators. */
template <typename T, int DH, int MT>
__global__ void __launch_bounds__(CG_THREADS)
    causal_scores_softmax_kernel(T *p, T *o, lmk_heads_at o_at, const T *q, const T *k, const T *v, int Tn, int batch,
                                 float alpha)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), ROWS = CG_WARPS * 16 * MT, WR = 16 * MT, STAGE = 2 * CT * LD;
    T *as = reinterpret_cast<T *>(smem_raw); /* (ROWS, LD); after the first step (ROWS, TT_LD): outputs */
    T *ring = as + scores_a_elems<DH, ROWS>(); /* CG_SM_STAGES × [k tile | v tile], each (CT, LD) */
    const row_block rb = row_block_at<ROWS>(Tn, batch);
    const int qt = rb.qt, bh = rb.bh, nk = rb.nk, lane = rb.lane, warp = rb.warp, row0 = rb.row0, last = rb.last;
    const int steps = 2 * nk, g = lane >> 2, t = lane & 3;
    const T *kg = k + (size_t)bh * Tn * DH, *vg = v + (size_t)bh * Tn * DH;
    T *cg_wr = p + ((size_t)bh * Tn + row0 + (lane >> 3)) * Tn + (lane & 7) * 8;
    T *cw = as + warp * WR * TT_LD;
    /* step s: key tile s mod nk; the second sweep's steps bring its v tile too */
    auto load = [&](int s) {
        T *st = ring + (s % CG_SM_STAGES) * STAGE;
        const int kt = s < nk ? s : s - nk;
        tile_load<T, CT, DH, LD>(st, kg + (size_t)kt * CT * DH, DH);
        if (s >= nk)
            tile_load<T, CT, DH, LD>(st + CT * LD, vg + (size_t)kt * CT * DH, DH);
    };
    ring_start<CG_SM_STAGES, T, ROWS, DH, LD>(as, q + ((size_t)bh * Tn + (size_t)qt * ROWS) * DH, DH, steps, load);
    uint32_t af[DH / 16][MT][4];
    float mx[MT][2], sum[MT][2]; /* per row (m16 tile m, rows g and g + 8): running max, then the row's max */
    float oacc[MT][DH / 8][4];
    zero_acc(oacc);
#pragma unroll
    for (int m = 0; m < MT; m++)
        mx[m][0] = mx[m][1] = -INFINITY, sum[m][0] = sum[m][1] = 0.0f;
    for (int s = 0; s < steps; s++) {
        ring_step<CG_SM_STAGES, T, DH, MT, LD>(s, steps, load, af, as, warp, lane);
        const int kt = s < nk ? s : s - nk;
        if (kt > last)
            continue;
        if (s == nk) { /* the rows' max and sum across their 4 lanes; sum becomes 1 / sum */
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    float rm = fmaxf(mx[m][h], __shfl_xor_sync(0xffffffffu, mx[m][h], 1));
                    rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 2));
                    float l = sum[m][h] * softmax_exp16(mx[m][h], rm); /* a lane without entries: 0 · 0 */
                    l += __shfl_xor_sync(0xffffffffu, l, 1);
                    l += __shfl_xor_sync(0xffffffffu, l, 2);
                    mx[m][h] = rm;
                    sum[m][h] = 1.0f / l;
                }
        }
        const T *kt_s = ring + (s % CG_SM_STAGES) * STAGE, *vt_s = kt_s + CT * LD;
        float acc[MT][CT / 8][4];
        rows_times_tile_t<T, DH, MT, LD>(acc, af, kt_s, lane);
        /* the scores as stored in T (rounded by pairs); −inf right of the diagonal */
        map_pairs(acc, [&](int, int, int, float x0, float x1) { return round_pair<T>(alpha * x0, alpha * x1); });
        if (kt == last) /* warp-uniform: the masking costs only the diagonal tile */
            mask_upper(acc, row0 + g - kt * CT - 2 * t, -INFINITY);
        if (s < nk) {
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    float tmax = -INFINITY;
#pragma unroll
                    for (int n = 0; n < CT / 8; n++)
                        tmax = fmaxf(tmax, fmaxf(acc[m][n][2 * h], acc[m][n][2 * h + 1]));
                    const float nm = fmaxf(mx[m][h], tmax);
                    if (nm == -INFINITY) /* no entry of this lane's row yet */
                        continue;
                    float ts = 0.0f;
#pragma unroll
                    for (int n = 0; n < CT / 8; n++)
                        ts += softmax_exp16(acc[m][n][2 * h], nm) + softmax_exp16(acc[m][n][2 * h + 1], nm);
                    sum[m][h] = sum[m][h] * softmax_exp16(mx[m][h], nm) + ts;
                    mx[m][h] = nm;
                }
        } else {
            map_pairs(acc, [&](int m, int, int h, float x0, float x1) {
                return make_float2(softmax_exp16(x0, mx[m][h]) * sum[m][h], softmax_exp16(x1, mx[m][h]) * sum[m][h]);
            });
            uint32_t pk[CT / 16][MT][4];
            pack_tile<T, MT>(pk, acc);
            store_packed<T, MT>(pk, cw, cg_wr + (size_t)kt * CT, Tn, lane);
            tile_times_rows<T, DH, MT, LD>(oacc, pk, vt_s, lane);
        }
    }
    store_rows<T, DH, MT>(head_rows<T, DH>(o, o_at, bh, Tn) + (size_t)row0 * o_at.ld, (size_t)o_at.ld, oacc, 1.0f,
                          lane);
}

/* ds (batch, T, T) = p ⊙ (round(dout · vᵀ) − D) and dq (batch, T, DH) =
 * scale · ds · k (backend.h attn_dp_softmax_bwd). Grid and tiles as
 * causal_scores_gemm_kernel with dout for the queries and a ring of v and
 * k tiles; each lane reads its p entries in the mma C layout (4 bytes,
 * before the step's products) and first works out D for its rows, a
 * quarter of each dot product per lane; each ds tile is rounded into the A
 * operand layout, stored, and multiplied by the k tile into the rows' dq
 * accumulators. */
template <typename T, int DH, int MT>
__global__ void __launch_bounds__(CG_THREADS)
    causal_dp_softmax_bwd_kernel(T *ds, T *dq, const T *dout, lmk_heads_at dout_at, const T *v, const T *k, const T *p,
                                 const T *o, lmk_heads_at o_at, int Tn, int batch, float scale)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), ROWS = CG_WARPS * 16 * MT, WR = 16 * MT, STAGE = 2 * CT * LD;
    T *as = reinterpret_cast<T *>(smem_raw);
    T *ring = as + scores_a_elems<DH, ROWS>(); /* CG_SM_STAGES × [v tile | k tile], each (CT, LD) */
    const row_block rb = row_block_at<ROWS>(Tn, batch);
    const int qt = rb.qt, bh = rb.bh, nk = rb.nk, lane = rb.lane, warp = rb.warp, row0 = rb.row0, last = rb.last;
    const int g = lane >> 2, t = lane & 3;
    const T *vg = v + (size_t)bh * Tn * DH, *kg = k + (size_t)bh * Tn * DH;
    const T *pg = p + ((size_t)bh * Tn + row0 + g) * Tn + 2 * t; /* row g of the warp, column 2t */
    T *cg_wr = ds + ((size_t)bh * Tn + row0 + (lane >> 3)) * Tn + (lane & 7) * 8;
    T *cw = as + warp * WR * TT_LD;
    auto load = [&](int s) {
        T *st = ring + (s % CG_SM_STAGES) * STAGE;
        tile_load<T, CT, DH, LD>(st, vg + (size_t)s * CT * DH, DH);
        tile_load<T, CT, DH, LD>(st + CT * LD, kg + (size_t)s * CT * DH, DH);
    };
    const T *db = head_rows<const T, DH>(dout, dout_at, bh, Tn);
    const size_t dld = (size_t)dout_at.ld, old_ = (size_t)o_at.ld;
    ring_start<CG_SM_STAGES, T, ROWS, DH, LD>(as, db + (size_t)qt * ROWS * dld, dld, nk, load);
    /* D of the lane's rows: columns 2t + 8c (pairs) of dout and o, summed over the row's 4 lanes */
    float dsum[MT][2];
    {
        const T *ob = head_rows<const T, DH>(o, o_at, bh, Tn);
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int i = row0 + m * 16 + g + 8 * h;
                dsum[m][h] = row_dot_4lanes<T, DH>(db + (size_t)i * dld, ob + (size_t)i * old_, t);
            }
    }
    uint32_t af[DH / 16][MT][4];
    float qacc[MT][DH / 8][4];
    zero_acc(qacc);
    for (int kt = 0; kt < nk; kt++) {
        ring_step<CG_SM_STAGES, T, DH, MT, LD>(kt, nk, load, af, as, warp, lane);
        if (kt > last)
            continue;
        uint32_t pv[MT][CT / 8][2]; /* p at rows g, g + 8 of each m16 tile, columns 2t, 2t + 1 of each 8 */
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int n = 0; n < CT / 8; n++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    pv[m][n][h] = *reinterpret_cast<const uint32_t *>(pg + (size_t)(m * 16 + 8 * h) * Tn + kt * CT +
                                                                      n * 8);
        const T *vt_s = ring + (kt % CG_SM_STAGES) * STAGE, *kt_s = vt_s + CT * LD;
        float acc[MT][CT / 8][4];
        rows_times_tile_t<T, DH, MT, LD>(acc, af, vt_s, lane);
        map_pairs(acc, [&](int m, int n, int h, float x0, float x1) {
            const float2 pp = tc_ops<T>::unpack(pv[m][n][h]), dp = round_pair<T>(x0, x1);
            return make_float2(pp.x * (dp.x - dsum[m][h]), pp.y * (dp.y - dsum[m][h]));
        });
        if (kt == last)
            mask_upper(acc, row0 + g - kt * CT - 2 * t, 0.0f);
        uint32_t pk[CT / 16][MT][4];
        pack_tile<T, MT>(pk, acc);
        store_packed<T, MT>(pk, cw, cg_wr + (size_t)kt * CT, Tn, lane);
        tile_times_rows<T, DH, MT, LD>(qacc, pk, kt_s, lane);
    }
    store_rows<T, DH, MT>(dq + ((size_t)bh * Tn + row0) * DH, DH, qacc, scale, lane);
}

bool dh_supported(int dh)
{
    return dh == 32 || dh == 64 || dh == 80 || dh == 96 || dh == 128;
}

/* One launch of this file's kernels: op, then its tensors (backend.h). */
enum cg_op { CG_SCORES, CG_MIX, CG_MIX_T, CG_SCORES_SOFTMAX, CG_DP_SOFTMAX_BWD, CG_OPS };
struct cg_launch {
    cg_op op;
    void *c;              /* the output: c, p or ds */
    const void *a, *bm;   /* the GEMM's operands: a, bm; q, k; dout, v */
    void *c2;             /* the fused kernels' second output: o (forward), dq (backward) */
    const void *b2;       /* its operand: v (forward), k (backward) */
    const void *p, *o;    /* CG_DP_SOFTMAX_BWD: the probabilities and the forward's output */
    lmk_heads_at a_at;    /* CG_DP_SOFTMAX_BWD: dout's layout */
    lmk_heads_at bm_at;   /* CG_SCORES, CG_MIX, CG_MIX_T: bm's layout */
    lmk_heads_at o_at;    /* the forward's output o: written (CG_SCORES_SOFTMAX) or read (CG_DP_SOFTMAX_BWD) */
    int Tn, batch;
    float alpha;
};

/* Opts kern in to smem bytes of dynamic shared memory when that is over the
 * default 48 KiB, once per backend: bit of st->attn_gemm_smem marks it done
 * (cudaFuncSetAttribute costs host time a launch-bound eager step notices). */
template <typename K> int allow_smem(cuda_state *st, K kern, size_t smem, int bit)
{
    uint64_t &done = st->attn_gemm_smem[bit / 64];
    const uint64_t mask = (uint64_t)1 << (bit % 64);
    if (smem > 48 * 1024 && !(done & mask)) {
        CUDA_TRY(st, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        done |= mask;
    }
    return LMK_OK;
}

/* The bit of a kernel instance in cuda_state.attn_gemm_smem: 2 dtypes × 5 head
 * dims × CG_OPS ops × 2 MT = 100 < 128. */
template <typename T, int DH, int MT> constexpr int smem_bit(cg_op op)
{
    constexpr int dhi = DH == 32 ? 0 : DH == 64 ? 1 : DH == 80 ? 2 : DH == 96 ? 3 : 4;
    return (((std::is_same<T, __half>::value ? 1 : 0) * 5 + dhi) * CG_OPS + (int)op) * 2 + MT - 1;
}

template <typename T, int DH, int MT> int launch_kind(cuda_state *st, cudaStream_t s, const cg_launch &x)
{
    T *ct = static_cast<T *>(x.c);
    const T *at = static_cast<const T *>(x.a), *bt = static_cast<const T *>(x.bm);
    constexpr int ROWS = CG_WARPS * 16 * MT;
    constexpr size_t sm_scores = scores_smem<T, DH, ROWS>(), sm_mix = mix_smem<T, DH, ROWS>(),
                     sm_fused = fused_smem<T, DH, ROWS>();
    const unsigned grid = (unsigned)(x.Tn / ROWS) * (unsigned)x.batch;
    const int bit = smem_bit<T, DH, MT>(x.op);
    int rc = LMK_OK;
    switch (x.op) {
    case CG_SCORES:
        if ((rc = allow_smem(st, causal_scores_gemm_kernel<T, DH, MT>, sm_scores, bit)) == LMK_OK)
            causal_scores_gemm_kernel<T, DH, MT><<<grid, CG_THREADS, sm_scores, s>>>(ct, at, bt, x.bm_at, x.Tn,
                                                                                    x.batch, x.alpha);
        break;
    case CG_MIX:
        if ((rc = allow_smem(st, causal_mix_gemm_kernel<T, DH, false, MT>, sm_mix, bit)) == LMK_OK)
            causal_mix_gemm_kernel<T, DH, false, MT><<<grid, CG_THREADS, sm_mix, s>>>(ct, at, bt, x.bm_at, x.Tn,
                                                                                     x.batch, x.alpha);
        break;
    case CG_MIX_T:
        if ((rc = allow_smem(st, causal_mix_gemm_kernel<T, DH, true, MT>, sm_mix, bit)) == LMK_OK)
            causal_mix_gemm_kernel<T, DH, true, MT><<<grid, CG_THREADS, sm_mix, s>>>(ct, at, bt, x.bm_at, x.Tn,
                                                                                    x.batch, x.alpha);
        break;
    case CG_SCORES_SOFTMAX:
        if ((rc = allow_smem(st, causal_scores_softmax_kernel<T, DH, MT>, sm_fused, bit)) == LMK_OK)
            causal_scores_softmax_kernel<T, DH, MT><<<grid, CG_THREADS, sm_fused, s>>>(
                ct, static_cast<T *>(x.c2), x.o_at, at, bt, static_cast<const T *>(x.b2), x.Tn, x.batch, x.alpha);
        break;
    case CG_DP_SOFTMAX_BWD:
        if ((rc = allow_smem(st, causal_dp_softmax_bwd_kernel<T, DH, MT>, sm_fused, bit)) == LMK_OK)
            causal_dp_softmax_bwd_kernel<T, DH, MT><<<grid, CG_THREADS, sm_fused, s>>>(
                ct, static_cast<T *>(x.c2), at, x.a_at, bt, static_cast<const T *>(x.b2), static_cast<const T *>(x.p),
                static_cast<const T *>(x.o), x.o_at, x.Tn, x.batch, x.alpha);
        break;
    default:
        return LMK_INVALID;
    }
    if (rc != LMK_OK)
        return rc;
    if (x.op >= CG_SCORES_SOFTMAX)
        LAUNCH_CHECK(st, "causal attention softmax");
    else
        LAUNCH_CHECK(st, "causal attention GEMM");
    return LMK_OK;
}

/* m16 tiles per warp: LMK_CG_MT (LMK_CG_SOFTMAX_MT for the fused softmax)
 * where T is a multiple of the block's rows, else 1. */
template <typename T, int DH> int launch_rows(cuda_state *st, cudaStream_t s, const cg_launch &x)
{
    const int mt = x.op >= CG_SCORES_SOFTMAX ? LMK_CG_SOFTMAX_MT : LMK_CG_MT;
    if (mt == 2 && x.Tn % (2 * CT) == 0)
        return launch_kind<T, DH, 2>(st, s, x);
    return launch_kind<T, DH, 1>(st, s, x);
}

template <typename T> int launch_dh(cuda_state *st, cudaStream_t s, const cg_launch &x, int dh)
{
    switch (dh) {
    case 32: return launch_rows<T, 32>(st, s, x);
    case 64: return launch_rows<T, 64>(st, s, x);
    case 80: return launch_rows<T, 80>(st, s, x);
    case 96: return launch_rows<T, 96>(st, s, x);
    case 128: return launch_rows<T, 128>(st, s, x);
    default: return LMK_INVALID;
    }
}

/* The checks every entry point makes: shape, tile, 16-byte alignment. */
bool launch_ok(lmk_backend *b, lmk_dtype dt, int batch, int T, int dh, const void *c, const void *a, const void *bm)
{
    return cuda_attn_causal_block(b, dt, T, dh) && batch > 0 && c && a && bm &&
           (int64_t)(T / CT) * batch <= INT32_MAX && !(((uintptr_t)c | (uintptr_t)a | (uintptr_t)bm) & 15);
}

int launch(cuda_state *st, cudaStream_t s, lmk_dtype dt, int dh, const cg_launch &x)
{
    if (dt == LMK_BF16)
        return launch_dh<__nv_bfloat16>(st, s, x, dh);
    return launch_dh<__half>(st, s, x, dh);
}

} // namespace

/* The status rc of an sm_90a launcher (attn_mix_wgmma.cu, attn_softmax_wgmma.cu)
 * for the kernel named what: LMK_DEVICE (its cudaFuncSetAttribute failed) and
 * a failed launch become the backend's error. */
static int wgmma_status(cuda_state *st, int rc, const char *what)
{
    char call[96];
    if (rc == LMK_DEVICE) {
        snprintf(call, sizeof call, "cudaFuncSetAttribute (%s)", what);
        return cuda_fail(st, call, cudaGetLastError());
    }
    if (rc != LMK_OK)
        return rc;
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(call, sizeof call, "launch %s", what);
        return cuda_fail(st, call, e);
    }
    return LMK_OK;
}

int cuda_attn_causal_block(lmk_backend *b, lmk_dtype dt, int T, int dh)
{
    (void)b;
    if (dt == LMK_F32)
        return cuda_attn_tf32_tile(T, dh); /* attn_gemm_tf32.cu: the same tile */
    if (dt != LMK_BF16 && dt != LMK_F16)
        return 0;
    return T >= CT && T % CT == 0 && dh_supported(dh) ? CT : 0;
}

int cuda_attn_causal_gemm(lmk_backend *b, lmk_causal_gemm kind, void *c, const void *a, const void *bm,
                          lmk_heads_at bm_at, lmk_dtype dt, int batch, int T, int dh, float alpha, int overlap)
{
    cuda_state *st = CST(b);
    if (!launch_ok(b, dt, batch, T, dh, c, a, bm) || !lmk_heads_at_ok(bm_at, batch, dh))
        return LMK_INVALID;
    if (kind != LMK_CAUSAL_SCORES && kind != LMK_CAUSAL_MIX && kind != LMK_CAUSAL_MIX_T)
        return LMK_INVALID;
    cudaStream_t s = st->stream;
    if (overlap) {
        cudaStream_t side = NULL;
        int rc = cuda_side_fork(st, &side);
        if (rc != LMK_OK)
            return rc;
        if (side)
            s = side;
    }
    if (dt == LMK_F32) { /* TF32 products (attn_gemm_tf32.cu); its global stores need 32-byte alignment */
        if ((uintptr_t)c & 31)
            return LMK_INVALID;
        int rc = cuda_attn_causal_gemm_tf32(s, kind, (float *)c, (const float *)a, (const float *)bm, bm_at, batch,
                                            T, dh, alpha, &st->attn_tf32_smem);
        return wgmma_status(st, rc, "causal attention GEMM (tf32)");
    }
    const int wg_kind = kind == LMK_CAUSAL_MIX_T ? 1 : kind == LMK_CAUSAL_MIX ? 2 : 0;
    if ((LMK_CG_WGMMA & wg_kind) && st->sm90 && lmk_attn_mix_wgmma_shape(dt, T, dh)) {
        return wgmma_status(st, lmk_attn_mix_wgmma(c, a, bm, bm_at, kind == LMK_CAUSAL_MIX_T, dt, batch, T, dh,
                                                   alpha, &st->attn_wgmma_smem, s),
                            "causal attention GEMM (wgmma)");
    }
    const cg_op op = kind == LMK_CAUSAL_SCORES ? CG_SCORES : kind == LMK_CAUSAL_MIX ? CG_MIX : CG_MIX_T;
    cg_launch x = {op, c, a, bm, NULL, NULL, NULL, NULL, {}, bm_at, {}, T, batch, alpha};
    return launch(st, s, dt, dh, x);
}

int cuda_attn_scores_softmax(lmk_backend *b, void *p, void *o, lmk_heads_at o_at, const void *q, const void *k,
                             const void *v, lmk_dtype dt, int batch, int T, int dh, float alpha)
{
    if (!launch_ok(b, dt, batch, T, dh, p, q, k) || !o || !v || ((uintptr_t)v & 15) || ((uintptr_t)o & 3) ||
        !lmk_heads_at_ok(o_at, batch, dh))
        return LMK_INVALID;
    cuda_state *st = CST(b);
    if (dt == LMK_F32) /* TF32 products (attn_gemm_tf32.cu) */
        return wgmma_status(st, cuda_attn_scores_softmax_tf32(st->stream, (float *)p, (float *)o, o_at,
                                                              (const float *)q, (const float *)k, (const float *)v,
                                                              batch, T, dh, alpha, &st->attn_tf32_smem),
                            "causal attention softmax (tf32)");
    if ((LMK_CG_SOFTMAX_WGMMA & 1) && st->sm90 && lmk_attn_softmax_wgmma_shape(dt, T, dh))
        return wgmma_status(st, lmk_attn_scores_softmax_wgmma(p, o, o_at, q, k, v, dt, batch, T, dh, alpha,
                                                              &st->attn_wgmma_smem, st->stream),
                            "causal attention softmax (wgmma)");
    cg_launch x = {CG_SCORES_SOFTMAX, p, q, k, o, v, NULL, NULL, {}, {}, o_at, T, batch, alpha};
    return launch(st, st->stream, dt, dh, x);
}

int cuda_attn_dp_softmax_bwd(lmk_backend *b, void *ds, void *dq, const void *dout, lmk_heads_at dout_at,
                             const void *v, const void *k, const void *p, const void *o, lmk_heads_at o_at,
                             lmk_dtype dt, int batch, int T, int dh, float scale)
{
    if (!launch_ok(b, dt, batch, T, dh, ds, dout, v) || !dq || !k || !p || !o ||
        (((uintptr_t)dq | (uintptr_t)k | (uintptr_t)p) & 15) || ((uintptr_t)o & 3) ||
        !lmk_heads_at_ok(dout_at, batch, dh) || !lmk_heads_at_ok(o_at, batch, dh))
        return LMK_INVALID;
    cuda_state *st = CST(b);
    if (dt == LMK_F32)
        return wgmma_status(st, cuda_attn_dp_softmax_bwd_tf32(st->stream, (float *)ds, (float *)dq,
                                                              (const float *)dout, dout_at, (const float *)v,
                                                              (const float *)k, (const float *)p, (const float *)o,
                                                              o_at, batch, T, dh, scale, &st->attn_tf32_smem),
                            "causal attention softmax bwd (tf32)");
    if ((LMK_CG_SOFTMAX_WGMMA & 2) && st->sm90 && lmk_attn_softmax_wgmma_shape(dt, T, dh))
        return wgmma_status(st, lmk_attn_dp_softmax_bwd_wgmma(ds, dq, dout, dout_at, v, k, p, o, o_at, dt, batch, T,
                                                              dh, scale, &st->attn_wgmma_smem, st->stream),
                            "causal attention softmax bwd (wgmma)");
    cg_launch x = {CG_DP_SOFTMAX_BWD, ds, dout, v, dq, k, p, o, dout_at, {}, o_at, T, batch, scale};
    return launch(st, st->stream, dt, dh, x);
}
