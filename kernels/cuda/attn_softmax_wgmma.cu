/* Attention naive_fused's two kernels on Hopper warpgroup MMA
 * (attn_softmax_wgmma.h), compiled for sm_90a only (kernels/meson.build):
 *   forward:  p = causal softmax of round(alpha · q kᵀ), written, and
 *             o = p v, the key tiles swept twice (row maxima and sums of
 *             the exponentials, then p);
 *   backward: ds = p ⊙ (round(dout vᵀ) − D), written, and dq = scale · ds k,
 *             one sweep, D_i = dout_i · o_i.
 * The per-element arithmetic is attn_gemm16.cu's mma.sync kernels' (the
 * same rounding of the scores and of dP, exponentials, running maxima and
 * sums in the same order); only the tensor-core products run on wgmma.
 *
 * One block of two warpgroups per 128 rows of a head (queries), the blocks
 * with the most key tiles first; warpgroup w owns the causal tile 2·blk + w
 * of 64 rows and skips the key tile after it (the block's last, never
 * written for its rows). The block's 128 A rows (q or dout) arrive once;
 * per step a 64-key tile of the first operand (k or v: the K-major B of
 * m64n64k16, scores or dP, from shared memory) and of the second (v or k:
 * the MN-major B of m64n{dh}k16, with p or ds from registers in the
 * accumulator layout as the A operand), by 16-byte cp.async into a ring of
 * stages in the 128-byte swizzle (wgmma_sm90.cuh sw128_chunk_load). The
 * written 16-bit tile (p or ds) goes through a per-warp shared staging tile
 * by stmatrix and leaves as 16-byte row pieces. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "attn_heads.cuh"
#include "attn_softmax_wgmma.h"
#include "mma_sm80.cuh"   /* tc_ops, cp_*, st2, frag_a, stsm4, softmax_exp16, round_pair, row_dot_4lanes */
#include "wgmma_sm90.cuh" /* saddr, descriptors, fences, wg_mma, wg_mma_ss, sw128_chunk_load */

#include "../status.h"

namespace {

constexpr int SW_ROWS = 128;          /* query rows per block: two warpgroups of 64 */
constexpr int SW_CT = 64;             /* keys per step: attn_gemm16.cu's causal tile */
constexpr int SW_THREADS = 256;       /* the two warpgroups; every thread also loads */
constexpr int SW_CHUNK = 64 * 128;    /* bytes of a 64-row × 64-column 16-bit chunk */
constexpr int SW_OUT_LD = SW_CT + 8;  /* the staging tile's row stride, elements (conflict-free stmatrix) */

/* Build-time knob: the ring's stages (0: 3 at dh 64, 2 at dh 128). */
#ifndef LMK_SW_STAGES
#define LMK_SW_STAGES 0
#endif

/* Shared memory: the A rows (dh / 64 chunks of 128 rows), the ring (per
 * stage the first operand's tile, then the second's, dh / 64 chunks of 64
 * rows each), the eight warps' (16, SW_OUT_LD) staging tiles. */
template <int DH> struct sw_plan {
    static constexpr int KC = DH / 64;
    static constexpr int A_BYTES = KC * 2 * SW_CHUNK;
    static constexpr int TILE = KC * SW_CHUNK;
    static constexpr int STAGE = 2 * TILE;
    static constexpr int STAGES = LMK_SW_STAGES > 0 ? LMK_SW_STAGES : DH == 64 ? 3 : 2;
    static constexpr int OUT_BYTES = (SW_THREADS / 32) * 16 * SW_OUT_LD * 2;
    static constexpr size_t SMEM = (size_t)A_BYTES + (size_t)STAGES * STAGE + OUT_BYTES + 1024; /* + alignment */
    static_assert(STAGES >= 2 && SMEM <= 227 * 1024, "a block's shared memory on sm_90");
};

/* The block's shared memory as sw_plan lays it out: the A chunks at base
 * (1024-aligned), the ring after them, then the staging tiles. */
template <typename T> struct sw_shared {
    uint32_t base, ring;
    T *out;
};
template <typename T, int DH> __device__ __forceinline__ sw_shared<T> sw_shared_at(unsigned char *raw)
{
    using P = sw_plan<DH>;
    const uint32_t base = (saddr(raw) + 1023) & ~1023u;
    return {base, base + P::A_BYTES,
            reinterpret_cast<T *>(raw + (base - saddr(raw)) + P::A_BYTES + P::STAGES * P::STAGE)};
}

/* The block's 128 rows of a (rows ld elements apart) into the A chunks at
 * base: chunk c (columns 64c…) holds rows 0…63, then 64…127. */
template <typename T, int DH> __device__ __forceinline__ void load_rows128(uint32_t base, const T *a, size_t ld)
{
#pragma unroll
    for (int c = 0; c < DH / 64; c++) {
        sw128_chunk_load<SW_THREADS>(base + c * 2 * SW_CHUNK, a + 64 * c, ld);
        sw128_chunk_load<SW_THREADS>(base + c * 2 * SW_CHUNK + SW_CHUNK, a + (size_t)64 * ld + 64 * c, ld);
    }
}

/* A 64-row tile of x (contiguous rows of DH) into the chunks at s. */
template <typename T, int DH> __device__ __forceinline__ void load_tile64(uint32_t s, const T *x)
{
#pragma unroll
    for (int c = 0; c < DH / 64; c++)
        sw128_chunk_load<SW_THREADS>(s + c * SW_CHUNK, x + 64 * c, DH);
}

/* acc (64 × 64, the warpgroup's rows × the tile's keys) = A · Bᵀ over DH:
 * da the warpgroup's first A chunk, b the tile's first chunk, both K-major;
 * waited for. */
template <typename T, int DH>
__device__ __forceinline__ void rows_times_tile_t(float (&acc)[8][4], uint64_t da, uint32_t b)
{
    const uint64_t db = sw128_desc(b, 16);
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < DH / 16; kk++) /* 16 columns = 32 bytes of a swizzled row; then the next chunk */
        wg_mma_ss<T>::template ss64<0, 0>(acc, sw128_desc_add(da, (kk / 4) * 2 * SW_CHUNK + (kk % 4) * 32),
                                          sw128_desc_add(db, (kk / 4) * SW_CHUNK + (kk % 4) * 32), kk > 0);
    wg_commit();
    wg_wait<0>();
    pin(acc);
}

/* acc (64 × DH) += pk (64 × 64 from registers, A fragments by 16 keys) ·
 * the tile at b (64 keys × DH, MN-major); waited for. */
template <typename T, int DH>
__device__ __forceinline__ void tile_times_rows(float (&acc)[DH / 8][4], const uint32_t (&pk)[4][4], uint32_t b)
{
    const uint64_t db = sw128_desc(b, SW_CHUNK);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++) { /* 16 keys = 16 rows = 2048 bytes of each chunk */
        if constexpr (DH == 64)
            wg_mma<T>::rs64(acc, pk[kk], sw128_desc_add(db, kk * 2048));
        else
            wg_mma<T>::rs128(acc, pk[kk], sw128_desc_add(db, kk * 2048));
    }
    wg_commit();
    wg_wait<0>();
    pin(acc);
}

/* x (the accumulator layout of a 64 × 64 tile) rounded to T by pairs into
 * the A fragments of its four 16-key slices (also what stmatrix stores). */
template <typename T> __device__ __forceinline__ void pack_tile(uint32_t (&pk)[4][4], const float (&x)[8][4])
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        pk[kk][0] = tc_ops<T>::pack(x[2 * kk][0], x[2 * kk][1]);
        pk[kk][1] = tc_ops<T>::pack(x[2 * kk][2], x[2 * kk][3]);
        pk[kk][2] = tc_ops<T>::pack(x[2 * kk + 1][0], x[2 * kk + 1][1]);
        pk[kk][3] = tc_ops<T>::pack(x[2 * kk + 1][2], x[2 * kk + 1][3]);
    }
}

/* The warp's 16 rows × 64 keys of pk out to global memory through its
 * staging tile cw: gw is row lane / 8 of the warp's rows at column
 * (lane % 8)·8 of the tile, rows ldg elements apart. */
template <typename T>
__device__ __forceinline__ void store_packed(const uint32_t (&pk)[4][4], T *cw, T *gw, size_t ldg, int lane)
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        stsm4(frag_a(cw, SW_OUT_LD, 0, kk * 16, lane), pk[kk][0], pk[kk][1], pk[kk][2], pk[kk][3]);
    __syncwarp();
    const T *rd = cw + (lane >> 3) * SW_OUT_LD + (lane & 7) * 8;
#pragma unroll
    for (int i = 0; i < 4; i++)
        *reinterpret_cast<uint4 *>(gw + (size_t)i * 4 * ldg) = *reinterpret_cast<const uint4 *>(rd + i * 4 * SW_OUT_LD);
    __syncwarp();
}

/* The entries right of the diagonal of the warpgroup's diagonal tile set to
 * v: entry e of block j is (row 16w + g + 8·(e / 2), column 8j + 2t + e % 2). */
__device__ __forceinline__ void mask_upper(float (&x)[8][4], int w, int g, int t, float v)
{
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (8 * j + 2 * t + (e & 1) > 16 * w + g + 8 * (e >> 1))
                x[j][e] = v;
}

/* Where a thread works: head bh, 128-row block blk of n key tiles, its
 * warpgroup wg (diagonal tile last), warp w in it, lane (g, t). */
struct sw_block {
    int bh, blk, n, wg, last, w, lane, g, t;
};
__device__ __forceinline__ sw_block sw_block_at(int Tn, int batch)
{
    const int lin = blockIdx.x, blk = Tn / SW_ROWS - 1 - lin / batch, wg = threadIdx.x >> 7;
    const int lane = threadIdx.x & 31;
    return {lin % batch, blk, 2 * blk + 2, wg, 2 * blk + wg, (int)((threadIdx.x >> 5) & 3), lane, lane >> 2, lane & 3};
}

template <typename T, int DH>
__global__ void __launch_bounds__(SW_THREADS, DH == 64 ? 2 : 1)
    scores_softmax_wgmma_kernel(T *p, T *o, lmk_heads_at o_at, const T *q, const T *k, const T *v, int Tn, int batch,
                                float alpha)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using P = sw_plan<DH>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const sw_shared<T> sh = sw_shared_at<T, DH>(smem_raw);
    const uint32_t base = sh.base, ring = sh.ring;
    const sw_block sb = sw_block_at(Tn, batch);
    const int n = sb.n, steps = 2 * n, last = sb.last, g = sb.g, t = sb.t, lane = sb.lane;
    const T *kg = k + (size_t)sb.bh * Tn * DH, *vg = v + (size_t)sb.bh * Tn * DH;
    /* step s: key tile s mod n; the second sweep's steps bring its v tile too */
    auto load = [&](int s) {
        const uint32_t st = ring + (s % P::STAGES) * P::STAGE;
        const int kt = s < n ? s : s - n;
        load_tile64<T, DH>(st, kg + (size_t)kt * SW_CT * DH);
        if (s >= n)
            load_tile64<T, DH>(st + P::TILE, vg + (size_t)kt * SW_CT * DH);
    };
    load_rows128<T, DH>(base, q + ((size_t)sb.bh * Tn + (size_t)sb.blk * SW_ROWS) * DH, DH);
    for (int s = 0; s < P::STAGES - 1; s++) {
        if (s < steps)
            load(s);
        cp_commit();
    }
    const int row0 = sb.blk * SW_ROWS + sb.wg * 64 + 16 * sb.w; /* the warp's first row */
    T *gw = p + ((size_t)sb.bh * Tn + row0 + (lane >> 3)) * Tn + (lane & 7) * 8;
    T *cw = sh.out + (threadIdx.x >> 5) * 16 * SW_OUT_LD;
    const uint64_t da = sw128_desc(base + sb.wg * SW_CHUNK, 16);
    float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f}; /* rows g, g + 8: running max and sum */
    float oacc[DH / 8][4];
#pragma unroll
    for (int j = 0; j < DH / 8; j++)
        oacc[j][0] = oacc[j][1] = oacc[j][2] = oacc[j][3] = 0.0f;
    for (int s = 0; s < steps; s++) {
        cp_wait<P::STAGES - 2>();
        fence_proxy_async(); /* this thread's landed pieces, visible to the wgmma reads */
        __syncthreads();     /* every piece of step s; step s − 1's products done (waited) */
        if (s + P::STAGES - 1 < steps)
            load(s + P::STAGES - 1);
        cp_commit();
        const int kt = s < n ? s : s - n;
        if (kt > last) /* warpgroup-uniform */
            continue;
        if (s == n) { /* the rows' max and sum across their 4 lanes; sum becomes 1 / sum */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float rm = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 2));
                float l = sum[h] * softmax_exp16(mx[h], rm); /* a lane without entries: 0 · 0 */
                l += __shfl_xor_sync(0xffffffffu, l, 1);
                l += __shfl_xor_sync(0xffffffffu, l, 2);
                mx[h] = rm;
                sum[h] = 1.0f / l;
            }
        }
        const uint32_t st = ring + (s % P::STAGES) * P::STAGE;
        float acc[8][4];
        rows_times_tile_t<T, DH>(acc, da, st);
#pragma unroll
        for (int j = 0; j < 8; j++) { /* the scores as stored in T (rounded by pairs) */
            const float2 lo = round_pair<T>(alpha * acc[j][0], alpha * acc[j][1]);
            const float2 hi = round_pair<T>(alpha * acc[j][2], alpha * acc[j][3]);
            acc[j][0] = lo.x, acc[j][1] = lo.y, acc[j][2] = hi.x, acc[j][3] = hi.y;
        }
        if (kt == last)
            mask_upper(acc, sb.w, g, t, -INFINITY);
        if (s < n) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float tmax = -INFINITY;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    tmax = fmaxf(tmax, fmaxf(acc[j][2 * h], acc[j][2 * h + 1]));
                const float nm = fmaxf(mx[h], tmax);
                if (nm == -INFINITY) /* no entry of this lane's row yet */
                    continue;
                float ts = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    ts += softmax_exp16(acc[j][2 * h], nm) + softmax_exp16(acc[j][2 * h + 1], nm);
                sum[h] = sum[h] * softmax_exp16(mx[h], nm) + ts;
                mx[h] = nm;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[j][e] = softmax_exp16(acc[j][e], mx[e >> 1]) * sum[e >> 1];
            uint32_t pk[4][4];
            pack_tile<T>(pk, acc);
            store_packed<T>(pk, cw, gw + (size_t)kt * SW_CT, Tn, lane);
            tile_times_rows<T, DH>(oacc, pk, st + P::TILE);
        }
    }
    T *orow = head_rows<T, DH>(o, o_at, sb.bh, Tn) + (size_t)(row0 + g) * o_at.ld + 2 * t;
#pragma unroll
    for (int j = 0; j < DH / 8; j++) {
        st2(orow + 8 * j, oacc[j][0], oacc[j][1]);
        st2(orow + 8 * (size_t)o_at.ld + 8 * j, oacc[j][2], oacc[j][3]);
    }
#endif
}

template <typename T, int DH>
__global__ void __launch_bounds__(SW_THREADS, DH == 64 ? 2 : 1)
    dp_softmax_bwd_wgmma_kernel(T *ds, T *dq, const T *dout, lmk_heads_at dout_at, const T *v, const T *k, const T *p,
                                const T *o, lmk_heads_at o_at, int Tn, int batch, float scale)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using P = sw_plan<DH>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const sw_shared<T> sh = sw_shared_at<T, DH>(smem_raw);
    const uint32_t base = sh.base, ring = sh.ring;
    const sw_block sb = sw_block_at(Tn, batch);
    const int n = sb.n, last = sb.last, g = sb.g, t = sb.t, lane = sb.lane;
    const T *vg = v + (size_t)sb.bh * Tn * DH, *kg = k + (size_t)sb.bh * Tn * DH;
    auto load = [&](int s) {
        const uint32_t st = ring + (s % P::STAGES) * P::STAGE;
        load_tile64<T, DH>(st, vg + (size_t)s * SW_CT * DH);
        load_tile64<T, DH>(st + P::TILE, kg + (size_t)s * SW_CT * DH);
    };
    const T *db = head_rows<const T, DH>(dout, dout_at, sb.bh, Tn);
    const size_t dld = (size_t)dout_at.ld, old_ = (size_t)o_at.ld;
    load_rows128<T, DH>(base, db + (size_t)sb.blk * SW_ROWS * dld, dld);
    for (int s = 0; s < P::STAGES - 1; s++) {
        if (s < n)
            load(s);
        cp_commit();
    }
    const int row0 = sb.blk * SW_ROWS + sb.wg * 64 + 16 * sb.w;
    /* D of the lane's rows: columns 2t + 8c (pairs) of dout and o, summed over the row's 4 lanes */
    float dsum[2];
    {
        const T *ob = head_rows<const T, DH>(o, o_at, sb.bh, Tn);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int i = row0 + g + 8 * h;
            dsum[h] = row_dot_4lanes<T, DH>(db + (size_t)i * dld, ob + (size_t)i * old_, t);
        }
    }
    const T *pg = p + ((size_t)sb.bh * Tn + row0 + g) * Tn + 2 * t; /* row g of the warp, column 2t */
    T *gw = ds + ((size_t)sb.bh * Tn + row0 + (lane >> 3)) * Tn + (lane & 7) * 8;
    T *cw = sh.out + (threadIdx.x >> 5) * 16 * SW_OUT_LD;
    const uint64_t da = sw128_desc(base + sb.wg * SW_CHUNK, 16);
    float qacc[DH / 8][4];
#pragma unroll
    for (int j = 0; j < DH / 8; j++)
        qacc[j][0] = qacc[j][1] = qacc[j][2] = qacc[j][3] = 0.0f;
    for (int s = 0; s < n; s++) {
        cp_wait<P::STAGES - 2>();
        fence_proxy_async();
        __syncthreads();
        if (s + P::STAGES - 1 < n)
            load(s + P::STAGES - 1);
        cp_commit();
        if (s > last)
            continue;
        uint32_t pv[8][2]; /* p at rows g, g + 8, columns 8j + 2t, + 1 of the tile */
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                pv[j][h] = *reinterpret_cast<const uint32_t *>(pg + (size_t)(8 * h) * Tn + s * SW_CT + 8 * j);
        const uint32_t st = ring + (s % P::STAGES) * P::STAGE;
        float acc[8][4];
        rows_times_tile_t<T, DH>(acc, da, st);
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float2 pp = tc_ops<T>::unpack(pv[j][h]), dp = round_pair<T>(acc[j][2 * h], acc[j][2 * h + 1]);
                acc[j][2 * h] = pp.x * (dp.x - dsum[h]);
                acc[j][2 * h + 1] = pp.y * (dp.y - dsum[h]);
            }
        if (s == last)
            mask_upper(acc, sb.w, g, t, 0.0f);
        uint32_t pk[4][4];
        pack_tile<T>(pk, acc);
        store_packed<T>(pk, cw, gw + (size_t)s * SW_CT, Tn, lane);
        tile_times_rows<T, DH>(qacc, pk, st + P::TILE);
    }
    T *qrow = dq + ((size_t)sb.bh * Tn + row0 + g) * DH + 2 * t;
#pragma unroll
    for (int j = 0; j < DH / 8; j++) {
        st2(qrow + 8 * j, scale * qacc[j][0], scale * qacc[j][1]);
        st2(qrow + 8 * DH + 8 * j, scale * qacc[j][2], scale * qacc[j][3]);
    }
#endif
}

/* Raises kern's shared-memory limit once: bit of *set marks it done. */
template <typename K> int allow_smem(K kern, size_t smem, uint32_t *set, int bit)
{
    if (!(*set & (1u << bit))) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
            return LMK_DEVICE;
        *set |= 1u << bit;
    }
    return LMK_OK;
}

/* bits 8…15 of the caller's record: 8 + 4 (fp16) + 2 (dh 128) + 1 (backward) */
int smem_bit(lmk_dtype dt, int dh, int bwd)
{
    return 8 + (dt == LMK_F16 ? 4 : 0) + (dh == 128 ? 2 : 0) + (bwd ? 1 : 0);
}

template <typename T, int DH>
int launch_fwd(void *p, void *o, lmk_heads_at o_at, const void *q, const void *k, const void *v, int batch, int T_,
               float alpha, uint32_t *set, int bit, cudaStream_t s)
{
    auto kern = scores_softmax_wgmma_kernel<T, DH>;
    const size_t smem = sw_plan<DH>::SMEM;
    if (allow_smem(kern, smem, set, bit) != LMK_OK)
        return LMK_DEVICE;
    kern<<<(unsigned)(T_ / SW_ROWS) * (unsigned)batch, SW_THREADS, smem, s>>>(
        static_cast<T *>(p), static_cast<T *>(o), o_at, static_cast<const T *>(q), static_cast<const T *>(k),
        static_cast<const T *>(v), T_, batch, alpha);
    return LMK_OK;
}

template <typename T, int DH>
int launch_bwd(void *ds, void *dq, const void *dout, lmk_heads_at dout_at, const void *v, const void *k,
               const void *p, const void *o, lmk_heads_at o_at, int batch, int T_, float scale, uint32_t *set,
               int bit, cudaStream_t s)
{
    auto kern = dp_softmax_bwd_wgmma_kernel<T, DH>;
    const size_t smem = sw_plan<DH>::SMEM;
    if (allow_smem(kern, smem, set, bit) != LMK_OK)
        return LMK_DEVICE;
    kern<<<(unsigned)(T_ / SW_ROWS) * (unsigned)batch, SW_THREADS, smem, s>>>(
        static_cast<T *>(ds), static_cast<T *>(dq), static_cast<const T *>(dout), dout_at,
        static_cast<const T *>(v), static_cast<const T *>(k), static_cast<const T *>(p), static_cast<const T *>(o),
        o_at, T_, batch, scale);
    return LMK_OK;
}

bool misaligned16(const void *x)
{
    return ((uintptr_t)x & 15) != 0;
}

} // namespace

extern "C" int lmk_attn_softmax_wgmma_shape(lmk_dtype dt, int T, int dh)
{
    return (dt == LMK_BF16 || dt == LMK_F16) && (dh == 64 || dh == 128) && T >= SW_ROWS && T % SW_ROWS == 0;
}

extern "C" int lmk_attn_scores_softmax_wgmma(void *p, void *o, lmk_heads_at o_at, const void *q, const void *k,
                                             const void *v, lmk_dtype dt, int batch, int T, int dh, float alpha,
                                             uint32_t *smem_set, void *stream)
{
    if (!lmk_attn_softmax_wgmma_shape(dt, T, dh) || batch <= 0 || (int64_t)(T / SW_ROWS) * batch > INT32_MAX ||
        !p || !o || !q || !k || !v || !smem_set || misaligned16(p) || misaligned16(q) || misaligned16(k) ||
        misaligned16(v) || ((uintptr_t)o & 3) || !lmk_heads_at_ok(o_at, batch, dh))
        return LMK_INVALID;
    cudaStream_t s = (cudaStream_t)stream;
    const int bit = smem_bit(dt, dh, 0);
    if (dt == LMK_BF16)
        return dh == 64 ? launch_fwd<__nv_bfloat16, 64>(p, o, o_at, q, k, v, batch, T, alpha, smem_set, bit, s)
                        : launch_fwd<__nv_bfloat16, 128>(p, o, o_at, q, k, v, batch, T, alpha, smem_set, bit, s);
    return dh == 64 ? launch_fwd<__half, 64>(p, o, o_at, q, k, v, batch, T, alpha, smem_set, bit, s)
                    : launch_fwd<__half, 128>(p, o, o_at, q, k, v, batch, T, alpha, smem_set, bit, s);
}

extern "C" int lmk_attn_dp_softmax_bwd_wgmma(void *ds, void *dq, const void *dout, lmk_heads_at dout_at,
                                             const void *v, const void *k, const void *p, const void *o,
                                             lmk_heads_at o_at, lmk_dtype dt, int batch, int T, int dh, float scale,
                                             uint32_t *smem_set, void *stream)
{
    if (!lmk_attn_softmax_wgmma_shape(dt, T, dh) || batch <= 0 || (int64_t)(T / SW_ROWS) * batch > INT32_MAX ||
        !ds || !dq || !dout || !v || !k || !p || !o || !smem_set || misaligned16(ds) || misaligned16(dq) ||
        misaligned16(dout) || misaligned16(v) || misaligned16(k) || misaligned16(p) || ((uintptr_t)o & 3) ||
        !lmk_heads_at_ok(dout_at, batch, dh) || !lmk_heads_at_ok(o_at, batch, dh))
        return LMK_INVALID;
    cudaStream_t s = (cudaStream_t)stream;
    const int bit = smem_bit(dt, dh, 1);
    if (dt == LMK_BF16)
        return dh == 64 ? launch_bwd<__nv_bfloat16, 64>(ds, dq, dout, dout_at, v, k, p, o, o_at, batch, T, scale,
                                                        smem_set, bit, s)
                        : launch_bwd<__nv_bfloat16, 128>(ds, dq, dout, dout_at, v, k, p, o, o_at, batch, T, scale,
                                                         smem_set, bit, s);
    return dh == 64
               ? launch_bwd<__half, 64>(ds, dq, dout, dout_at, v, k, p, o, o_at, batch, T, scale, smem_set, bit, s)
               : launch_bwd<__half, 128>(ds, dq, dout, dout_at, v, k, p, o, o_at, batch, T, scale, smem_set, bit, s);
}
