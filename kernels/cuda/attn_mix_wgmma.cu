/* The naive attention's causal GEMMs with a (T, dh) output on Hopper
 * warpgroup MMA (attn_mix_wgmma.h), per head, a (T, T) the probabilities P
 * or their gradient dS (query rows, key columns):
 *   mix_t: c = alpha · aᵀ · bm (dV = Pᵀ dO, dK = dSᵀ Q), rows of c are keys;
 *   mix:   c = alpha · a · bm  (O = P V, dQ = dS K), rows of c are queries.
 * Compiled for sm_90a only (kernels/meson.build).
 *
 * One block of two consumer warpgroups per 128 output rows of a head, the
 * blocks with the most steps first, 64 rows of the reduction per step; a
 * warpgroup skips the step whose a entries lie right of its rows' causal
 * tiles (never written). Each step's tiles arrive by 16-byte cp.async into
 * a ring of stages, in wgmma's 128-byte-swizzled layout (64-column chunks;
 * unit u of row r at r·128 + (u ⊕ r mod 8)·16): the a tile is the A operand
 * (MN-major for mix_t, K-major for mix), the bm tile (64 rows × dh) the
 * MN-major B operand. Both warpgroups run m64n{dh}k16 products from shared
 * memory, float32 accumulators in registers, alpha applied once at the
 * store. bm's rows may lie apart (backend.h lmk_heads_at: the merged
 * (B, T, H, dh) layout of dout). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "attn_heads.cuh"
#include "attn_mix_wgmma.h"
#include "mma_sm80.cuh"   /* cp_commit, cp_wait, st2 */
#include "wgmma_sm90.cuh" /* saddr, descriptors, fences, wg_mma_ss */

#include "../status.h"

namespace {

constexpr int MW_ROWS = 128;       /* output rows (keys or queries) per block: two warpgroups of 64 */
constexpr int MW_CT = 64;          /* reduction rows per step: attn_gemm16.cu's causal tile */
constexpr int MW_THREADS = 256;    /* two consumer warpgroups; every thread also loads */
constexpr int MW_CHUNK = 64 * 128; /* bytes of a 64-row × 64-column 16-bit chunk, swizzled rows */

/* Build-time knob: the ring's stages (0: 4 at dh 64, 3 at dh 128, 96 KB of
 * shared memory either way: two blocks per SM). 3 (three blocks per SM) and 2
 * (four) measured on the H200 against 0: xl/1024 bf16 naive_fused fwd+bwd
 * 107.52 and 107.29 vs 107.57 ms, the same (kernels/PERF.md, session 13,
 * call 3; ncu: 3.06 TB/s from memory, 64% of its peak). */
#ifndef LMK_MW_STAGES
#define LMK_MW_STAGES 0
#endif

/* A stage: the a tile's two chunks (64 × 128 or 128 × 64, see the kernel),
 * then the bm tile's dh / 64 chunks of 64 rows. */
template <int DH> struct mw_plan {
    static constexpr int B_CHUNKS = DH / 64;
    static constexpr int STAGE = (2 + B_CHUNKS) * MW_CHUNK;
    static constexpr int STAGES = LMK_MW_STAGES > 0 ? LMK_MW_STAGES : DH == 64 ? 4 : 3;
    static constexpr size_t SMEM = (size_t)STAGES * STAGE + 1024; /* slack to align the base to 1024 */
    static_assert(STAGES >= 2 && SMEM <= 227 * 1024, "a block's shared memory on sm_90");
};

/* TRANS: c = alpha · aᵀ · bm, block kb of 128 keys over the query tiles from
 * 2·kb on; warpgroup 1 (keys 128·kb + 64…) skips the first. Else c = alpha ·
 * a · bm, block qb of 128 queries (the blocks with the most key tiles first)
 * over the key tiles 0…2·qb + 1; warpgroup 0 (queries 128·qb…) skips the
 * last. A step's a tile: TRANS, 64 queries × 128 keys (two key chunks, the
 * MN-major A operand of each warpgroup); else 128 queries × 64 keys (one
 * chunk of 128 rows, rows 64·w… the K-major A operand of warpgroup w). */
template <typename T, int DH, bool TRANS>
__global__ void __launch_bounds__(MW_THREADS)
    causal_mix_wgmma_kernel(T *c, const T *a, const T *bm, lmk_heads_at bm_at, int Tn, int batch, float alpha)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using P = mw_plan<DH>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t base = (saddr(smem_raw) + 1023) & ~1023u;
    const int lin = blockIdx.x, nb = Tn / MW_ROWS, bh = lin % batch;
    const int blk = TRANS ? lin / batch : nb - 1 - lin / batch; /* the block's 128 output rows */
    const int first = TRANS ? blk * (MW_ROWS / MW_CT) : 0;      /* its first reduction tile */
    const int n = TRANS ? Tn / MW_CT - first : (blk + 1) * (MW_ROWS / MW_CT);
    const int wg = threadIdx.x >> 7;
    const int skip = TRANS ? (wg == 1 ? 0 : -1) : (wg == 0 ? n - 1 : -1); /* the step this warpgroup skips */
    const T *ab = TRANS ? a + ((size_t)bh * Tn + (size_t)first * MW_CT) * Tn + (size_t)blk * MW_ROWS
                        : a + ((size_t)bh * Tn + (size_t)blk * MW_ROWS) * Tn;
    const size_t bld = (size_t)bm_at.ld; /* bm's row stride */
    const T *bb = head_rows<const T, DH>(bm, bm_at, bh, Tn) + (size_t)first * MW_CT * bld;
    auto load = [&](int s) {
        const uint32_t st = base + (s % P::STAGES) * P::STAGE;
        const T *bs = bb + (size_t)s * MW_CT * bld;
        if (TRANS) {
            const T *as = ab + (size_t)s * MW_CT * Tn;
            sw128_chunk_load<MW_THREADS>(st, as, Tn);
            if (s > 0) /* the first step's second chunk: right of the diagonal, never written */
                sw128_chunk_load<MW_THREADS>(st + MW_CHUNK, as + 64, Tn);
        } else {
            const T *as = ab + (size_t)s * MW_CT;
            if (s < n - 1) /* the last step's first 64 rows: right of their diagonal, never written */
                sw128_chunk_load<MW_THREADS>(st, as, Tn);
            sw128_chunk_load<MW_THREADS>(st + MW_CHUNK, as + (size_t)64 * Tn, Tn);
        }
#pragma unroll
        for (int j = 0; j < P::B_CHUNKS; j++)
            sw128_chunk_load<MW_THREADS>(st + (2 + j) * MW_CHUNK, bs + 64 * j, bld);
    };
    for (int s = 0; s < P::STAGES - 1; s++) {
        if (s < n)
            load(s);
        cp_commit();
    }
    float acc[DH / 8][4];
#pragma unroll
    for (int j = 0; j < DH / 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int s = 0; s < n; s++) {
        cp_wait<P::STAGES - 2>();
        fence_proxy_async(); /* this thread's landed pieces, visible to the wgmma reads */
        __syncthreads();     /* every piece of step s; step s − 1's products done (waited below) */
        if (s + P::STAGES - 1 < n)
            load(s + P::STAGES - 1);
        cp_commit();
        if (s != skip) {
            const uint32_t st = base + (s % P::STAGES) * P::STAGE;
            /* A: TRANS, MN-major, 16 queries = 2048 bytes; else K-major, 16 keys = 32 bytes of a swizzled row */
            const uint64_t da = TRANS ? sw128_desc(st + wg * MW_CHUNK, MW_CHUNK) : sw128_desc(st + wg * MW_CHUNK, 16);
            const uint64_t db = sw128_desc(st + 2 * MW_CHUNK, MW_CHUNK);
            constexpr int TA = TRANS ? 1 : 0, A_STEP = TRANS ? 2048 : 32;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < MW_CT / 16; kk++) { /* B: 16 rows = 2048 bytes of each chunk */
                if constexpr (DH == 64)
                    wg_mma_ss<T>::template ss64<TA, 1>(acc, sw128_desc_add(da, kk * A_STEP),
                                                       sw128_desc_add(db, kk * 2048), 1);
                else
                    wg_mma_ss<T>::template ss128<TA, 1>(acc, sw128_desc_add(da, kk * A_STEP),
                                                        sw128_desc_add(db, kk * 2048), 1);
            }
            wg_commit();
            wg_wait<0>();
            pin(acc);
        }
    }
    /* warp w of the warpgroup: rows 16w + g, + 8; columns 8j + 2t, + 1 */
    const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    T *cr = c + ((size_t)bh * Tn + (size_t)blk * MW_ROWS + wg * 64 + 16 * w + g) * DH + 2 * t;
#pragma unroll
    for (int j = 0; j < DH / 8; j++) {
        st2(cr + 8 * j, alpha * acc[j][0], alpha * acc[j][1]);
        st2(cr + 8 * DH + 8 * j, alpha * acc[j][2], alpha * acc[j][3]);
    }
#endif
}

template <typename T, int DH>
int launch(T *c, const T *a, const T *bm, lmk_heads_at bm_at, int trans, int batch, int T_, float alpha,
           uint32_t *smem_set, int bit, cudaStream_t s)
{
    auto kern = trans ? causal_mix_wgmma_kernel<T, DH, true> : causal_mix_wgmma_kernel<T, DH, false>;
    const size_t smem = mw_plan<DH>::SMEM;
    if (!(*smem_set & (1u << bit))) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
            return LMK_DEVICE;
        *smem_set |= 1u << bit;
    }
    kern<<<(unsigned)(T_ / MW_ROWS) * (unsigned)batch, MW_THREADS, smem, s>>>(c, a, bm, bm_at, T_, batch, alpha);
    return LMK_OK;
}

} // namespace

extern "C" int lmk_attn_mix_wgmma_shape(lmk_dtype dt, int T, int dh)
{
    return (dt == LMK_BF16 || dt == LMK_F16) && (dh == 64 || dh == 128) && T >= MW_ROWS && T % MW_ROWS == 0;
}

extern "C" int lmk_attn_mix_wgmma(void *c, const void *a, const void *bm, lmk_heads_at bm_at, int trans, lmk_dtype dt,
                                 int batch, int T, int dh, float alpha, uint32_t *smem_set, void *stream)
{
    if (!lmk_attn_mix_wgmma_shape(dt, T, dh) || batch <= 0 || (int64_t)(T / MW_ROWS) * batch > INT32_MAX || !c ||
        !a || !bm || !smem_set || (((uintptr_t)c | (uintptr_t)a | (uintptr_t)bm) & 15) ||
        !lmk_heads_at_ok(bm_at, batch, dh))
        return LMK_INVALID;
    cudaStream_t s = (cudaStream_t)stream;
    const int bit = (dt == LMK_F16 ? 4 : 0) + (dh == 128 ? 2 : 0) + (trans ? 1 : 0);
    if (dt == LMK_BF16) {
        auto *ct = static_cast<__nv_bfloat16 *>(c);
        auto *at = static_cast<const __nv_bfloat16 *>(a), *bt = static_cast<const __nv_bfloat16 *>(bm);
        return dh == 64 ? launch<__nv_bfloat16, 64>(ct, at, bt, bm_at, trans, batch, T, alpha, smem_set, bit, s)
                        : launch<__nv_bfloat16, 128>(ct, at, bt, bm_at, trans, batch, T, alpha, smem_set, bit, s);
    }
    auto *ct = static_cast<__half *>(c);
    auto *at = static_cast<const __half *>(a), *bt = static_cast<const __half *>(bm);
    return dh == 64 ? launch<__half, 64>(ct, at, bt, bm_at, trans, batch, T, alpha, smem_set, bit, s)
                    : launch<__half, 128>(ct, at, bt, bm_at, trans, batch, T, alpha, smem_set, bit, s);
}
