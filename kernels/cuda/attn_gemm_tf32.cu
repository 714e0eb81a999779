/* The causal GEMMs of the naive attention (backend.h attn_causal_gemm) for
 * float32 tensors on TF32 tensor cores, one launch each: the products of
 * lmk_gemm's in_round TF32 (each input rounded to TF32, cvt.rna, products
 * exact, float32 accumulation; only the order of the float32 additions
 * differs from cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32), alpha applied in
 * float32, float32 output.
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

__device__ __forceinline__ void cp16(float *sm, const float *g)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(sm);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(g));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }

/* sm (R, LD) ← R rows × W floats of g (rows ldg floats apart), 16 bytes per
 * thread step, by the block's THREADS threads (cp.async, not waited). */
template <int R, int W, int LD> __device__ __forceinline__ void tile_load(float *sm, const float *g, size_t ldg)
{
    constexpr int CH = W / 4, N = R * CH;
    for (int idx = threadIdx.x; idx < N; idx += THREADS) {
        const int r = idx / CH, c = (idx - r * CH) * 4;
        cp16(sm + r * LD + c, g + (size_t)r * ldg + c);
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
        cp_wait_one();
        __syncthreads();
        const float *b = bs + (kt & 1) * CT * LD;
        frag_acc acc[CT / 16];
#pragma unroll
        for (int n = 0; n < CT / 16; n++)
            wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
        for (int k = 0; k < DH; k += 8) {
            frag_a_row fa;
            wmma::load_matrix_sync(fa, as + warp * 16 * LD + k, LD);
            to_tf32(fa);
#pragma unroll
            for (int n = 0; n < CT / 16; n++) {
                frag_b_col fb; /* B (k, n) = bm tile (n, k): column-major */
                wmma::load_matrix_sync(fb, b + n * 16 * LD + k, LD);
                to_tf32(fb);
                wmma::mma_sync(acc[n], fa, fb, acc[n]);
            }
        }
#pragma unroll
        for (int n = 0; n < CT / 16; n++) {
#pragma unroll
            for (int i = 0; i < acc[n].num_elements; i++)
                acc[n].x[i] *= alpha;
            wmma::store_matrix_sync(crow + (size_t)kt * CT + n * 16, acc[n], Tn, wmma::mem_row_major);
        }
        __syncthreads(); /* the stage is refilled by the next step's load */
    }
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
        cp_wait_one();
        __syncthreads();
        const float *at = smem_f + (s & 1) * STAGE, *bt = at + CT * TT_LD;
#pragma unroll
        for (int k = 0; k < CT; k += 8) {
            if constexpr (TRANS) { /* A (key row, query k) = a tile (query k, key row): column-major */
                frag_a_col fa;
                wmma::load_matrix_sync(fa, at + k * TT_LD + warp * 16, TT_LD);
                to_tf32(fa);
                acc_times_rows<DH, LD>(acc, fa, bt + k * LD);
            } else {
                frag_a_row fa;
                wmma::load_matrix_sync(fa, at + warp * 16 * TT_LD + k, TT_LD);
                to_tf32(fa);
                acc_times_rows<DH, LD>(acc, fa, bt + k * LD);
            }
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

template <int DH> constexpr size_t scores_smem() { return (size_t)3 * CT * dh_ld<DH>() * sizeof(float); }
template <int DH> constexpr size_t mix_smem() { return (size_t)2 * (CT * TT_LD + CT * dh_ld<DH>()) * sizeof(float); }

/* Sets the kernel's dynamic shared memory limit where it is over the
 * default 48 KiB, once (bit of *done), and launches it. */
template <typename K>
int launch_kernel(cudaStream_t s, K kernel, size_t smem, uint32_t *done, int bit, unsigned blocks, float *c,
                  const float *a, const float *bm, lmk_heads_at bm_at, int T, int batch, float alpha)
{
    const uint32_t mask = 1u << bit;
    if (smem > 48 * 1024 && !(*done & mask)) {
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
            return LMK_DEVICE;
        *done |= mask;
    }
    kernel<<<blocks, THREADS, smem, s>>>(c, a, bm, bm_at, T, batch, alpha);
    return LMK_OK;
}

/* DHI: the head dim's index (0…4) in the smem_done bits, 3 per head dim. */
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
    switch (dh) {
    case 32: return launch_dh<32, 0>(s, kind, c, a, bm, bm_at, batch, T, alpha, smem_done);
    case 64: return launch_dh<64, 1>(s, kind, c, a, bm, bm_at, batch, T, alpha, smem_done);
    case 80: return launch_dh<80, 2>(s, kind, c, a, bm, bm_at, batch, T, alpha, smem_done);
    case 96: return launch_dh<96, 3>(s, kind, c, a, bm, bm_at, batch, T, alpha, smem_done);
    case 128: return launch_dh<128, 4>(s, kind, c, a, bm, bm_at, batch, T, alpha, smem_done);
    default: return LMK_INVALID;
    }
}
