/* The naive attention's transposed causal GEMM on Hopper warpgroup MMA
 * (attn_mix_wgmma.h): c (T, dh) = alpha · aᵀ · bm per head, a (T, T) the
 * probabilities P or their gradient dS (query rows, key columns), bm (T, dh)
 * dO or Q; the output rows are keys. Compiled for sm_90a only
 * (kernels/meson.build).
 *
 * One block of two consumer warpgroups per 128 keys of a head, the blocks
 * with the most query tiles first. Block kb reduces over the query tiles
 * from its causal tile 2·kb on, 64 queries per step; warpgroup w owns keys
 * 64·w… of the block and skips the first step when w = 1 (those keys are
 * right of every query of that tile: entries never written). Each step's
 * tiles arrive by 16-byte cp.async into a ring of stages, in wgmma's
 * 128-byte-swizzled layout (64-column chunks; unit u of row r at
 * r·128 + (u ⊕ r mod 8)·16): the a tile (64 queries × 128 keys) is the
 * MN-major A operand aᵀ, the bm tile (64 queries × dh) the MN-major B
 * operand. Both warpgroups run m64n{dh}k16 products from shared memory,
 * float32 accumulators in registers, alpha applied once at the store. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "attn_mix_wgmma.h"
#include "attn_tile16.cuh" /* CT, row_block_at, round_pair, mask_upper, pack_tile, store_packed, store_rows */
#include "mma_sm80.cuh"    /* cp_commit, cp_wait, st2, tc_ops */
#include "wgmma_sm90.cuh"  /* saddr, descriptors, fences, wg_mma, wg_mma_ss */

#include "../status.h"

namespace {

constexpr int MW_KEYS = 128;       /* output rows (keys) per block: two warpgroups of 64 */
constexpr int MW_CT = 64;          /* query rows per step: attn_gemm16.cu's causal tile */
constexpr int MW_THREADS = 256;    /* two consumer warpgroups; every thread also loads */
constexpr int MW_CHUNK = 64 * 128; /* bytes of a 64-row × 64-column 16-bit chunk, swizzled rows */

/* Build-time knob: the ring's stages (0: 4 at dh 64, 3 at dh 128, 96 KB of
 * shared memory either way: two blocks per SM). */
#ifndef LMK_MW_STAGES
#define LMK_MW_STAGES 0
#endif

/* A stage: the a tile's two key chunks, then the bm tile's dh / 64 chunks,
 * each 64 query rows. */
template <int DH> struct mw_plan {
    static constexpr int B_CHUNKS = DH / 64;
    static constexpr int STAGE = (2 + B_CHUNKS) * MW_CHUNK;
    static constexpr int STAGES = LMK_MW_STAGES > 0 ? LMK_MW_STAGES : DH == 64 ? 4 : 3;
    static constexpr size_t SMEM = (size_t)STAGES * STAGE + 1024; /* slack to align the base to 1024 */
    static_assert(STAGES >= 2 && SMEM <= 227 * 1024, "a block's shared memory on sm_90");
};

__device__ __forceinline__ void cp_async16_to(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

/* 64 rows × 64 columns of g (row stride ldg elements) → the swizzled chunk
 * at shared address s (1024-aligned), two 16-byte pieces per thread. */
template <typename T> __device__ __forceinline__ void chunk_load(uint32_t s, const T *g, size_t ldg)
{
#pragma unroll
    for (int i = 0; i < 64 * 8 / MW_THREADS; i++) {
        const int piece = threadIdx.x + i * MW_THREADS, r = piece >> 3, u = piece & 7;
        cp_async16_to(s + r * 128 + ((u ^ (r & 7)) << 4), g + (size_t)r * ldg + u * 8);
    }
}

template <typename T, int DH>
__global__ void __launch_bounds__(MW_THREADS)
    causal_mix_t_wgmma_kernel(T *c, const T *a, const T *bm, int Tn, int batch, float alpha)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using P = mw_plan<DH>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t base = (saddr(smem_raw) + 1023) & ~1023u;
    const int lin = blockIdx.x, kb = lin / batch, bh = lin % batch;
    const int first = kb * (MW_KEYS / MW_CT), n = Tn / MW_CT - first; /* query tiles first… */
    const int wg = threadIdx.x >> 7;
    const T *ab = a + ((size_t)bh * Tn + (size_t)first * MW_CT) * Tn + (size_t)kb * MW_KEYS;
    const T *bb = bm + ((size_t)bh * Tn + (size_t)first * MW_CT) * DH;
    auto load = [&](int s) {
        const uint32_t st = base + (s % P::STAGES) * P::STAGE;
        const T *as = ab + (size_t)s * MW_CT * Tn, *bs = bb + (size_t)s * MW_CT * DH;
        chunk_load(st, as, Tn);
        if (s > 0) /* the first step's second chunk: right of the diagonal, never written */
            chunk_load(st + MW_CHUNK, as + 64, Tn);
#pragma unroll
        for (int j = 0; j < P::B_CHUNKS; j++)
            chunk_load(st + (2 + j) * MW_CHUNK, bs + 64 * j, DH);
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
        if (s > 0 || wg == 0) {
            const uint32_t st = base + (s % P::STAGES) * P::STAGE;
            const uint64_t da = sw128_desc(st + wg * MW_CHUNK, MW_CHUNK);
            const uint64_t db = sw128_desc(st + 2 * MW_CHUNK, MW_CHUNK);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < MW_CT / 16; kk++) { /* 16 query rows: 2048 bytes of each chunk */
                if constexpr (DH == 64)
                    wg_mma_ss<T>::template ss64<1, 1>(acc, sw128_desc_add(da, kk * 2048),
                                                      sw128_desc_add(db, kk * 2048), 1);
                else
                    wg_mma_ss<T>::template ss128<1, 1>(acc, sw128_desc_add(da, kk * 2048),
                                                       sw128_desc_add(db, kk * 2048), 1);
            }
            wg_commit();
            wg_wait<0>();
            pin(acc);
        }
    }
    /* warp w of the warpgroup: rows 16w + g, + 8; columns 8j + 2t, + 1 */
    const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    T *cr = c + ((size_t)bh * Tn + (size_t)kb * MW_KEYS + wg * 64 + 16 * w + g) * DH + 2 * t;
#pragma unroll
    for (int j = 0; j < DH / 8; j++) {
        st2(cr + 8 * j, alpha * acc[j][0], alpha * acc[j][1]);
        st2(cr + 8 * DH + 8 * j, alpha * acc[j][2], alpha * acc[j][3]);
    }
#endif
}

template <typename T, int DH>
int launch(T *c, const T *a, const T *bm, int batch, int T_, float alpha, uint32_t *smem_set, int bit,
           cudaStream_t s)
{
    auto kern = causal_mix_t_wgmma_kernel<T, DH>;
    const size_t smem = mw_plan<DH>::SMEM;
    if (!(*smem_set & (1u << bit))) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
            return LMK_DEVICE;
        *smem_set |= 1u << bit;
    }
    kern<<<(unsigned)(T_ / MW_KEYS) * (unsigned)batch, MW_THREADS, smem, s>>>(c, a, bm, T_, batch, alpha);
    return LMK_OK;
}

/* --- dP → dS = P ⊙ (dP − D) → dS·K on wgmma (attn_dp_softmax_bwd) ------- */

/* Build-time knob: the ring's stages of the fused backward. */
#ifndef LMK_MW_DP_STAGES
#define LMK_MW_DP_STAGES 2
#endif

/* Shared memory of the fused backward (one warpgroup, 64 query rows): the
 * dout tile (dh / 64 swizzled chunks), a ring of [v tile | k tile] (dh / 64
 * chunks each), then the (64, TT_LD) staging rows of the dS stores. */
template <int DH> struct dp_plan {
    static constexpr int CHUNKS = DH / 64;
    static constexpr int A = 0, RING = CHUNKS * MW_CHUNK, STAGE = 2 * CHUNKS * MW_CHUNK;
    static constexpr int STAGES = LMK_MW_DP_STAGES;
    static constexpr int STAGING = RING + STAGES * STAGE;
    static constexpr size_t SMEM = (size_t)STAGING + CT * TT_LD * 2 + 1024;
    static_assert(STAGES >= 2 && SMEM <= 227 * 1024, "a block's shared memory on sm_90");
};

/* 64 rows × DH columns of g (row stride ldg) → DH / 64 swizzled chunks at s,
 * by the warpgroup's 128 threads (chunk_load's layout). */
template <typename T, int DH> __device__ __forceinline__ void rows_load128(uint32_t s, const T *g, size_t ldg)
{
#pragma unroll
    for (int c = 0; c < DH / 64; c++)
#pragma unroll
        for (int i = 0; i < 64 * 8 / CG_THREADS; i++) {
            const int piece = threadIdx.x + i * CG_THREADS, r = piece >> 3, u = piece & 7;
            cp_async16_to(s + c * MW_CHUNK + r * 128 + ((u ^ (r & 7)) << 4), g + (size_t)r * ldg + c * 64 + u * 8);
        }
}

/* As causal_dp_softmax_bwd_kernel (attn_gemm16.cu) with MT 1, its two
 * products on warpgroup MMA: dP (64 × 64) = dout tile · v tileᵀ from shared
 * memory (both K-major), dq (64 × DH) += dS · k tile with dS from registers
 * (the A layout pack_tile makes) and the k tile MN-major. Grid (T / 64) ·
 * batch blocks of one warpgroup; the same elementwise steps, masks and
 * stores. */
template <typename T, int DH>
__global__ void __launch_bounds__(CG_THREADS)
    causal_dp_softmax_bwd_wgmma_kernel(T *ds, T *dq, const T *dout, const T *v, const T *k, const T *p, const T *o,
                                       int64_t o_ld, int heads, int Tn, int batch, float scale)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using P = dp_plan<DH>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t base = (saddr(smem_raw) + 1023) & ~1023u;
    T *staging = reinterpret_cast<T *>(smem_raw + (base - saddr(smem_raw)) + P::STAGING);
    const row_block rb = row_block_at<CT>(Tn, batch);
    const int qt = rb.qt, bh = rb.bh, nk = rb.nk, lane = rb.lane, warp = rb.warp, row0 = rb.row0;
    const int g = lane >> 2, t = lane & 3;
    const T *vg = v + (size_t)bh * Tn * DH, *kg = k + (size_t)bh * Tn * DH;
    const T *pg = p + ((size_t)bh * Tn + row0 + g) * Tn + 2 * t; /* row g of the warp, column 2t */
    T *cg_wr = ds + ((size_t)bh * Tn + row0 + (lane >> 3)) * Tn + (lane & 7) * 8;
    T *cw = staging + warp * 16 * TT_LD;
    auto load = [&](int s) {
        const uint32_t st = base + P::RING + (s % P::STAGES) * P::STAGE;
        rows_load128<T, DH>(st, vg + (size_t)s * CT * DH, DH);
        rows_load128<T, DH>(st + P::CHUNKS * MW_CHUNK, kg + (size_t)s * CT * DH, DH);
    };
    rows_load128<T, DH>(base + P::A, dout + ((size_t)bh * Tn + (size_t)qt * CT) * DH, DH);
    for (int s = 0; s < P::STAGES - 1; s++) {
        if (s < nk)
            load(s);
        cp_commit();
    }
    /* D of the lane's rows: columns 2t + 8c (pairs) of dout and o, summed over the row's 4 lanes */
    float dsum[2];
    {
        const T *ob = o + (size_t)(bh / heads) * Tn * o_ld + (size_t)(bh % heads) * DH;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int i = row0 + g + 8 * h;
            const T *dr = dout + ((size_t)bh * Tn + i) * DH + 2 * t, *orow = ob + (size_t)i * o_ld + 2 * t;
            float d = 0.0f;
#pragma unroll
            for (int c = 0; c < DH / 8; c++) {
                const float2 x = tc_ops<T>::unpack(*reinterpret_cast<const uint32_t *>(dr + 8 * c));
                const float2 y = tc_ops<T>::unpack(*reinterpret_cast<const uint32_t *>(orow + 8 * c));
                d = fmaf(x.x, y.x, d);
                d = fmaf(x.y, y.y, d);
            }
            d += __shfl_xor_sync(0xffffffffu, d, 1);
            d += __shfl_xor_sync(0xffffffffu, d, 2);
            dsum[h] = d;
        }
    }
    float qacc[DH / 8][4];
#pragma unroll
    for (int j = 0; j < DH / 8; j++)
        qacc[j][0] = qacc[j][1] = qacc[j][2] = qacc[j][3] = 0.0f;
    for (int kt = 0; kt < nk; kt++) {
        cp_wait<P::STAGES - 2>();
        fence_proxy_async();
        __syncthreads();
        if (kt + P::STAGES - 1 < nk)
            load(kt + P::STAGES - 1);
        cp_commit();
        uint32_t pv[CT / 8][2]; /* p at rows g, g + 8, columns 2t, 2t + 1 of each 8 */
#pragma unroll
        for (int n = 0; n < CT / 8; n++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                pv[n][h] = *reinterpret_cast<const uint32_t *>(pg + (size_t)(8 * h) * Tn + kt * CT + n * 8);
        const uint32_t st = base + P::RING + (kt % P::STAGES) * P::STAGE, kst = st + P::CHUNKS * MW_CHUNK;
        float acc[1][CT / 8][4];
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < DH / 16; kk++) { /* K-major: 16 columns = 32 bytes of a swizzled row */
            const uint32_t off = (kk / 4) * MW_CHUNK + (kk % 4) * 32;
            wg_mma_ss<T>::template ss64<0, 0>(acc[0], sw128_desc(base + P::A + off, 16), sw128_desc(st + off, 16),
                                              kk > 0);
        }
        wg_commit();
        wg_wait<0>();
        pin(acc[0]);
#pragma unroll
        for (int n = 0; n < CT / 8; n++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float2 pp = tc_ops<T>::unpack(pv[n][h]);
                const float2 dp = round_pair<T>(acc[0][n][2 * h], acc[0][n][2 * h + 1]);
                acc[0][n][2 * h] = pp.x * (dp.x - dsum[h]);
                acc[0][n][2 * h + 1] = pp.y * (dp.y - dsum[h]);
            }
        if (kt == nk - 1) /* the diagonal tile */
            mask_upper(acc, row0 + g - kt * CT - 2 * t, 0.0f);
        uint32_t pk[CT / 16][1][4];
        pack_tile<T, 1>(pk, acc);
        store_packed<T, 1>(pk, cw, cg_wr + (size_t)kt * CT, Tn, lane);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < CT / 16; kk++) { /* 16 keys: 2048 bytes of each chunk */
            if constexpr (DH == 64)
                wg_mma<T>::rs64(qacc, pk[kk][0], sw128_desc(kst + kk * 2048, MW_CHUNK));
            else
                wg_mma<T>::rs128(qacc, pk[kk][0], sw128_desc(kst + kk * 2048, MW_CHUNK));
        }
        wg_commit();
        wg_wait<0>();
        pin(qacc);
#pragma unroll
        for (int kk = 0; kk < CT / 16; kk++)
            pin(pk[kk]); /* the A operand's registers, read until the wait */
    }
    float q2[1][DH / 8][4];
#pragma unroll
    for (int j = 0; j < DH / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            q2[0][j][e] = qacc[j][e];
    store_rows<T, DH, 1>(dq + ((size_t)bh * Tn + row0) * DH, q2, scale, lane);
#endif
}

template <typename T, int DH>
int launch_dp(T *ds, T *dq, const T *dout, const T *v, const T *k, const T *p, const T *o, int64_t o_ld, int heads,
              int batch, int T_, float scale, uint32_t *smem_set, int bit, cudaStream_t s)
{
    auto kern = causal_dp_softmax_bwd_wgmma_kernel<T, DH>;
    const size_t smem = dp_plan<DH>::SMEM;
    if (!(*smem_set & (1u << bit))) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
            return LMK_DEVICE;
        *smem_set |= 1u << bit;
    }
    kern<<<(unsigned)(T_ / CT) * (unsigned)batch, CG_THREADS, smem, s>>>(ds, dq, dout, v, k, p, o, o_ld, heads, T_,
                                                                        batch, scale);
    return LMK_OK;
}

} // namespace

extern "C" int lmk_attn_mix_t_wgmma_shape(lmk_dtype dt, int T, int dh)
{
    return (dt == LMK_BF16 || dt == LMK_F16) && (dh == 64 || dh == 128) && T >= MW_KEYS && T % MW_KEYS == 0;
}

extern "C" int lmk_attn_mix_t_wgmma(void *c, const void *a, const void *bm, lmk_dtype dt, int batch, int T, int dh,
                                   float alpha, uint32_t *smem_set, void *stream)
{
    if (!lmk_attn_mix_t_wgmma_shape(dt, T, dh) || batch <= 0 || (int64_t)(T / MW_KEYS) * batch > INT32_MAX ||
        !c || !a || !bm || !smem_set || (((uintptr_t)c | (uintptr_t)a | (uintptr_t)bm) & 15))
        return LMK_INVALID;
    cudaStream_t s = (cudaStream_t)stream;
    const int bit = (dt == LMK_F16 ? 2 : 0) + (dh == 128 ? 1 : 0);
    if (dt == LMK_BF16) {
        auto *ct = static_cast<__nv_bfloat16 *>(c);
        auto *at = static_cast<const __nv_bfloat16 *>(a), *bt = static_cast<const __nv_bfloat16 *>(bm);
        return dh == 64 ? launch<__nv_bfloat16, 64>(ct, at, bt, batch, T, alpha, smem_set, bit, s)
                        : launch<__nv_bfloat16, 128>(ct, at, bt, batch, T, alpha, smem_set, bit, s);
    }
    auto *ct = static_cast<__half *>(c);
    auto *at = static_cast<const __half *>(a), *bt = static_cast<const __half *>(bm);
    return dh == 64 ? launch<__half, 64>(ct, at, bt, batch, T, alpha, smem_set, bit, s)
                    : launch<__half, 128>(ct, at, bt, batch, T, alpha, smem_set, bit, s);
}

extern "C" int lmk_attn_dp_softmax_bwd_wgmma(void *ds, void *dq, const void *dout, const void *v, const void *k,
                                            const void *p, const void *o, int64_t o_ld, int heads, lmk_dtype dt,
                                            int batch, int T, int dh, float scale, uint32_t *smem_set, void *stream)
{
    if ((dt != LMK_BF16 && dt != LMK_F16) || (dh != 64 && dh != 128) || T < CT || T % CT || batch <= 0 ||
        (int64_t)(T / CT) * batch > INT32_MAX || !smem_set)
        return LMK_INVALID;
    cudaStream_t s = (cudaStream_t)stream;
    const int bit = 4 + (dt == LMK_F16 ? 2 : 0) + (dh == 128 ? 1 : 0);
#define LMK_DP_ARGS(E)                                                                                            \
    static_cast<E *>(ds), static_cast<E *>(dq), static_cast<const E *>(dout), static_cast<const E *>(v),          \
        static_cast<const E *>(k), static_cast<const E *>(p), static_cast<const E *>(o), o_ld, heads, batch, T,   \
        scale, smem_set, bit, s
    if (dt == LMK_BF16)
        return dh == 64 ? launch_dp<__nv_bfloat16, 64>(LMK_DP_ARGS(__nv_bfloat16))
                        : launch_dp<__nv_bfloat16, 128>(LMK_DP_ARGS(__nv_bfloat16));
    return dh == 64 ? launch_dp<__half, 64>(LMK_DP_ARGS(__half)) : launch_dp<__half, 128>(LMK_DP_ARGS(__half));
#undef LMK_DP_ARGS
}
