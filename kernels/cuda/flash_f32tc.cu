/* fp32 flash attention on tensor cores with fp32 accuracy: the forward and
 * the single-pass backward of cuda/flash_attn.cu's fp32 paths, every matrix
 * product as 3xTF32 on mma.sync m16n8k8 (the math and shapes: attention.h).
 *
 * 3xTF32. Each fp32 operand x is split into big = tf32(x) and small =
 * tf32(x − big) (tf32: 10 explicit mantissa bits, rounded to nearest, ties
 * away from zero; x − big is exact in fp32), and a·b is accumulated as
 * small_a·big_b + big_a·small_b + big_a·big_b in fp32 (the small·small term
 * is dropped). Each operand is then represented to |x − big − small| ≤
 * 2^-22·|x| and each product to about 3·2^-22 ≈ 7e-7 relative before the
 * fp32 accumulation, against fp32's 2^-24 ≈ 6e-8 per rounding: a few fp32
 * ulps, not tf32's 2^-11. It is the method of the PyTorch peer: the
 * memory-efficient SDPA kernel (CUTLASS, from xFormers) runs fp32 on sm80+
 * with OpMultiplyAddFastF32, the same three tf32 products. The softmax
 * (running max, exp2, row sums), the log-sum-exp, D = rowsum(dO∘O) and the
 * scales stay in fp32 on the CUDA cores, as in flash_attn.cu.
 *
 * Accumulation. The tensor cores add into their fp32 accumulator without
 * rounding to nearest: a sum carried through many mma drifts towards zero by
 * about an ulp per mma (H100, 2026-11-22 08:35, PERF.md: O, dK and dV
 * accumulated over all keys / queries in the mma accumulator erred by
 * 7e-6 at T 1000 and 3e-5 to 4.5e-5 at T 4097, growing with T, against
 * SDPA's 5e-7 to 9e-7; dQ, summed per 64-key tile, stayed near 2e-6). So no
 * mma chain here is longer than one tile's k (≤ 16 steps of 8): O, dK and
 * dV sum each tile in fresh accumulators and add them to fp32 registers with
 * rounded adds; the forward's S and the backward's dPᵀ (in 32-query tiles)
 * keep the small terms in an accumulator of their own.
 *
 * Shared tiles are raw fp32, (rows, W) with W = d rounded up to 32 words and
 * column c of row r stored at r·W + (c ^ 8·((r ^ r>>2) & 3)): the XOR keeps
 * 16-byte chunks whole (cp.async) and pairs (2j, 2j+1) adjacent, and makes
 * both fragment reads conflict-free: "row" reads (lane (g, t) = (lane/4,
 * lane%4) reads row g, columns 2t, 2t+1 as one 8-byte load: the A operand,
 * and B where B's columns are the tile's rows) and "column" reads (rows 2t
 * and 2t+1, column g: B where B's k runs along the tile's rows). The k index
 * of every product maps mma position t to element 2t and t+4 to 2t+1 of each
 * group of 8, on both operands, so that an accumulator fragment (a row's
 * columns 2t, 2t+1) is directly the A fragment of the next product (P·V,
 * Pᵀ·dO, dSᵀ·Q) without a shuffle.
 *
 * Forward: one block per (16·NW queries, b·h), NW warps of 16 query rows;
 * 64-key K and V tiles by cp.async, double-buffered; S = Q·Kᵀ, online
 * softmax in log2 units, O += P·V.
 * Grid order (both passes): blockIdx.x is the head b·h and blockIdx.y the
 * query (key) block, so that blocks start in order of causal work, longest
 * first across all heads (the forward's last query blocks, the backward's
 * first key blocks), not head after head: at B 8 T 4096 causal, head after
 * head the last heads' long blocks start late, and a greedy schedule of the
 * block lengths ends 1.59× after the mean load per multiprocessor (1.24× at
 * T 8192), longest first 1.00× (1.01×).
 * Backward (single pass): one block per (64 keys, b·h), 4 warps of 16 keys;
 * loops over BQ-query tiles (Q, dO, lse, D; cp.async, NBUF buffers): Sᵀ =
 * K·Qᵀ, dPᵀ = V·dOᵀ, Pᵀ = exp2(Sᵀ·s·log2e − lse·log2e), dSᵀ = Pᵀ∘(dPᵀ − D);
 * dV += Pᵀ·dO, dK += dSᵀ·Q in registers; dS to shared memory, then dQ +=
 * s·dS·K added to global dq by float2 atomics (rounding order varies
 * between runs).
 *
 * Knob: LMK_FLASH_F32TC (1, the default: flash_attn.cu's fp32 forward and
 * single-pass backward run here; 0: lmk_flash_f32tc_usable says 0 and
 * flash_attn.cu keeps its CUDA-core fp32 kernels). On since the lent H100
 * ran this source's defaults (variant F) through test_flash only float32
 * (100/100) and flash_vs_torch --only fp32 (58/58; the same without
 * FWD_RESPLIT 58/58 with two more seeds) and timed it under SDPA at every
 * point of the CS336 fp32 grid (B 8, causal, d 16–128, T 256–16384:
 * 0.05–0.92×): 2026-11-22 11:06, PERF.md (f32tc2 call 2). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "device_query.cuh"
#include "flash_f32tc.h"
extern "C" {
#include "../status.h"
}

#ifndef LMK_FLASH_F32TC
#define LMK_FLASH_F32TC 1
#endif
/* The backward's query tile at d 64 (64 or 32) and its buffers (1 or 2):
 * a build-time choice for A/B timing. H100 2026-11-22 08:35, before the
 * per-tile accumulators: 64 (one buffer) 17.6 ms, 32 (two) 19.4 ms at B 8
 * T 16384 causal; with the per-tile accumulators 64 spills (208 bytes) and
 * 32 does not: 32, untimed. */
#ifndef LMK_FLASH_F32TC_BQ64
#define LMK_FLASH_F32TC_BQ64 32
#endif
/* The backward's query tile at d 128 (32, one buffer: 107 KB of shared
 * memory; or 16, two buffers: 100 KB), likewise. H100 2026-11-22 11:06,
 * B 8 causal backward, 16 against 32: 34.89 / 33.21 ms at T 16384,
 * 2.33 / 2.21 at T 4096. */
#ifndef LMK_FLASH_F32TC_BQ128
#define LMK_FLASH_F32TC_BQ128 32
#endif
/* Forward blocks per SM the register budget is set for at d ≤ 64 (2: at most
 * 128 registers; 1, the default: H100 2026-11-22 08:35, d 64 B 8 T 16384
 * forward 6.01 ms against 7.25 with 2) — likewise for A/B timing. */
#ifndef LMK_FLASH_F32TC_FWD_MINB
#define LMK_FLASH_F32TC_FWD_MINB 1
#endif
/* The forward's P·V at d 64 and 128 (fwd_pv_resplit below), likewise;
 * 1, the default: H100 2026-11-22 11:06 (PERF.md, f32tc2 call 2), B 8
 * T 16384 causal forward d 64 5.92 ms against 6.08, d 128 11.79 against
 * 12.04; passed test_flash and flash_vs_torch fp32 in that call. */
#ifndef LMK_FLASH_F32TC_FWD_RESPLIT
#define LMK_FLASH_F32TC_FWD_RESPLIT 1
#endif
/* The forward on grids of at most one 64-query block per multiprocessor
 * (B 8 T ≤ 1024, one head T ≤ 8192) at d 64 and 128: 1 splits d between two
 * warps per 16 query rows (each its half of Q·Kᵀ's k-steps, the partial
 * scores exchanged through shared memory and added, then its half of O's
 * columns), so that the longest causal row block's chain of dependent MMAs
 * is half as long and each multiprocessor runs 8 warps instead of 4 (the
 * default); 0: 4 warps of whole rows. On since the lent H100 ran it
 * (2026-11-22 14:07 UTC, PERF.md): test_flash only float32 100/100,
 * flash_vs_torch --only fp32 58/58; causal forward B 8 T 1024 d 128 0.153 →
 * 0.122 ms, one head T 4096 / 8192 d 128 0.545 / 1.088 → 0.443 / 0.861, d 64
 * 6–11% less; T ≥ 4096 at B 8 unchanged (not taken). */
#ifndef LMK_FLASH_F32TC_FWD_DSPLIT
#define LMK_FLASH_F32TC_FWD_DSPLIT 1
#endif

namespace {

constexpr int BK = 64;  /* keys per forward K/V tile and per backward block */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

/* Row stride (floats) of a shared tile of D columns. */
template <int D> __host__ __device__ constexpr int row_words() { return (D + 31) / 32 * 32; }

/* Word offset of (r, c) in a shared tile of row stride W (a multiple of 32). */
template <int W> __device__ __forceinline__ int sidx(int r, int c)
{
    return r * W + (c ^ (((r ^ (r >> 2)) & 3) << 3));
}

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(float *sm, const float *g)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(sm)), "l"(g));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

/* sm (ROWS, W) ← rows row0… of g (T, D) (16-byte aligned); rows past T
 * are zero. NTHR threads. */
template <int D, int ROWS, int NTHR>
__device__ __forceinline__ void load_rows(float *sm, const float *g, int row0, int T)
{
    constexpr int CH = D / 4; /* 16-byte chunks per row */
    for (int i = threadIdx.x; i < ROWS * CH; i += NTHR) {
        const int r = i / CH, c = (i - r * CH) * 4;
        float *dst = sm + sidx<row_words<D>()>(r, c);
        if (row0 + r < T)
            cp_async16(dst, g + (size_t)(row0 + r) * D + c);
        else
            *reinterpret_cast<float4 *>(dst) = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

/* --- 3xTF32 ------------------------------------------------------------- */

/* x = hi + lo + e, hi and lo tf32 (low 13 bits zero), |e| ≤ 2^-22·|x|.
 * (On the FP32 pipe instead — Veltkamp's hi = c − (c − x), c = x·(2^13 + 1),
 * lo = x − hi truncated — the whole grid ran 1–10% slower: H100,
 * 2026-11-22 10:58, PERF.md.) */
__device__ __forceinline__ void split(float x, uint32_t &hi, uint32_t &lo)
{
    hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    lo = (__float_as_uint(x - __uint_as_float(hi)) + 0x1000u) & 0xffffe000u;
}

struct frag_a { /* an m16k8 A fragment, split */
    uint32_t hi[4], lo[4];
};
struct frag_b { /* a k8n8 B fragment, split */
    uint32_t hi[2], lo[2];
};

__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* a·b in 3xTF32, the big and the small terms in separate accumulators:
 * hi += big_a·big_b; lo += small_a·big_b + big_a·small_b. The tensor cores
 * add into an fp32 accumulator without rounding to nearest (they truncate),
 * so a sum carried through many mma drifts towards zero by about an ulp per
 * mma; the lo terms, 2^-11 of the hi ones, would lose their low bits
 * against the running hi sum. Callers chain at most 16 mma into one hi
 * (one tile's k) and add hi + lo into fp32 registers with ordinary
 * (rounded) adds. */
__device__ __forceinline__ void mma3(float hi[4], float lo[4], const frag_a &a, const frag_b &b)
{
    mma_tf32(lo, a.lo, b.hi[0], b.hi[1]);
    mma_tf32(lo, a.hi, b.lo[0], b.lo[1]);
    mma_tf32(hi, a.hi, b.hi[0], b.hi[1]);
}

/* c += a·b in 3xTF32 in one accumulator (the small terms first): for short
 * chains (one tile's k) where registers are scarce. */
__device__ __forceinline__ void mma3(float c[4], const frag_a &a, const frag_b &b)
{
    mma_tf32(c, a.lo, b.hi[0], b.hi[1]);
    mma_tf32(c, a.hi, b.lo[0], b.lo[1]);
    mma_tf32(c, a.hi, b.hi[0], b.hi[1]);
}

/* Accumulator fragments (N of them) set to 0. */
template <int N> __device__ __forceinline__ void zero(float c[N][4])
{
#pragma unroll
    for (int n = 0; n < N; n++)
        c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
}

/* c[n] = hi[n] + lo[n] (rounded fp32 adds). */
template <int N> __device__ __forceinline__ void fold(float c[N][4], const float hi[N][4],
                                                      const float lo[N][4])
{
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            c[n][e] = hi[n][e] + lo[n][e];
}

/* n-tiles per chunk of a long-running accumulator's per-tile sums: 4 where
 * D/8 allows, else 2 (every head dim is a multiple of 16: D/8 is even). */
template <int D> __host__ __device__ constexpr int chunk() { return (D / 8) % 4 == 0 ? 4 : 2; }

/* An A fragment from its values: u = (row g, k 2t and 2t+1), w = the same
 * of row g+8 (a0, a2 = u; a1, a3 = w under the k mapping above). Every A
 * operand read from memory goes through here, so that the same values give
 * the same fragment bits (f32tc_dsum_kernel relies on it). */
__device__ __forceinline__ frag_a make_a(float2 u, float2 w)
{
    frag_a a;
    split(u.x, a.hi[0], a.lo[0]);
    split(w.x, a.hi[1], a.lo[1]);
    split(u.y, a.hi[2], a.lo[2]);
    split(w.y, a.hi[3], a.lo[3]);
    return a;
}

/* A B fragment from its values: u = (column g, k 2t and 2t+1). */
__device__ __forceinline__ frag_b make_b(float2 u)
{
    frag_b b;
    split(u.x, b.hi[0], b.lo[0]);
    split(u.y, b.hi[1], b.lo[1]);
    return b;
}

/* A fragment of rows r0…r0+15, k-step kk, of a shared (rows, W) tile
 * (a "row" read): a0, a2 = (r0+g, 8kk+2t, +1); a1, a3 = (r0+g+8, …). */
template <int W>
__device__ __forceinline__ frag_a lda_rows(const float *sm, int r0, int kk, int g, int t)
{
    return make_a(*reinterpret_cast<const float2 *>(sm + sidx<W>(r0 + g, 8 * kk + 2 * t)),
                  *reinterpret_cast<const float2 *>(sm + sidx<W>(r0 + g + 8, 8 * kk + 2 * t)));
}

/* B fragment whose n index runs over tile rows n0…n0+7 and k over columns
 * 8kk… (a "row" read): b0, b1 = (n0+g, 8kk+2t, +1). */
template <int W>
__device__ __forceinline__ frag_b ldb_rows(const float *sm, int n0, int kk, int g, int t)
{
    return make_b(*reinterpret_cast<const float2 *>(sm + sidx<W>(n0 + g, 8 * kk + 2 * t)));
}

/* B fragment whose k index runs over tile rows 8kk… and n over columns
 * n0…n0+7 (a "column" read): b0 = (8kk+2t, n0+g), b1 = (8kk+2t+1, n0+g). */
template <int W>
__device__ __forceinline__ frag_b ldb_cols(const float *sm, int kk, int n0, int g, int t)
{
    frag_b b;
    split(sm[sidx<W>(8 * kk + 2 * t, n0 + g)], b.hi[0], b.lo[0]);
    split(sm[sidx<W>(8 * kk + 2 * t + 1, n0 + g)], b.hi[1], b.lo[1]);
    return b;
}

/* The accumulator fragment c (rows g, g+8; columns 2t, 2t+1 of an n-tile) as
 * the A fragment of k-step "that n-tile" under the k mapping above. */
__device__ __forceinline__ frag_a acc_as_a(const float c[4])
{
    frag_a a;
    split(c[0], a.hi[0], a.lo[0]);
    split(c[2], a.hi[1], a.lo[1]);
    split(c[1], a.hi[2], a.lo[2]);
    split(c[3], a.hi[3], a.lo[3]);
    return a;
}

/* acc_as_a, split anew at each call: the empty volatile asm hides c from
 * common-subexpression elimination, so that a loop that splits the same
 * fragments once per chunk keeps one chunk's splits live, not all. */
__device__ __forceinline__ frag_a acc_as_a_anew(const float c[4])
{
    float x[4] = {c[0], c[1], c[2], c[3]};
#pragma unroll
    for (int e = 0; e < 4; e++)
        asm volatile("" : "+f"(x[e]));
    return acc_as_a(x);
}

/* --- forward ------------------------------------------------------------ */

/* The forward's P·V: with FWD_RESPLIT at d 64 and 128, P's fragments are
 * split again for each chunk of 8 n-tiles (no array of all 8 split P
 * fragments: 64 registers, which spilled 108 bytes at d 128), else split
 * once and chunk<D>() n-tiles at a time. */
template <int D> __host__ __device__ constexpr bool fwd_pv_resplit()
{
    return LMK_FLASH_F32TC_FWD_RESPLIT && (D / 8) % 8 == 0;
}
template <int D> __host__ __device__ constexpr int fwd_pv_chunk()
{
    return fwd_pv_resplit<D>() ? 8 : chunk<D>();
}

/* Floats of one warp's partial scores in the d-split exchange: 32 lanes ×
 * (BK / 8) n-tiles × 4. */
constexpr int SX_WORDS = 32 * (BK / 8) * 4;

template <int D, int NW, int DS> constexpr size_t fwd_smem()
{
    /* Q | K[2] | V[2] | DS 2: the partial scores of the NW·2 warps */
    return sizeof(float) * ((size_t)row_words<D>() * (16 * NW + 4 * BK) +
                            (DS == 2 ? (size_t)NW * 2 * SX_WORDS : 0));
}

// o: (B, H, T, D) out; lse: (B, H, T) out; q, k, v: (B, H, T, D), 16-byte
// aligned. grid (B·H, ceil(T/(16·NW))), NW·DS·32 threads, fwd_smem<D, NW,
// DS>(). Warp w: query rows 16(w mod NW)…+15 of the tile; lane (g, t) holds
// rows g, g+8. DS 2 (d-split): warps w and w + NW share their rows, warp
// w / NW = part takes the k-steps and O's n-tiles part·D/16…(part+1)·D/16−1.
template <int D, int NW, int DS>
__global__ void __launch_bounds__(NW * 32 * DS, D <= 64 ? LMK_FLASH_F32TC_FWD_MINB : 1)
    f32tc_fwd_kernel(float *o, float *lse, const float *q, const float *k, const float *v, int T,
                     int causal, float scale_log2)
{
    static_assert(DS == 1 || (DS == 2 && D % 16 == 0 && NW <= 8), "d-split: two warps, even n-tiles");
    constexpr int W = row_words<D>(), BQ = 16 * NW, NT = NW * 32 * DS;
    constexpr int NQ = D / 8 / DS; /* the warp's k-steps of Q·Kᵀ and n-tiles of O */
    extern __shared__ float4 smem4[];
    float *Qs = reinterpret_cast<float *>(smem4); /* (BQ, W) */
    float *Ks = Qs + BQ * W;                       /* [2] (BK, W) */
    float *Vs = Ks + 2 * BK * W;                   /* [2] (BK, W) */
    float *Xs = Vs + 2 * BK * W;                   /* DS 2: [NW·2] (BK / 8 · 4, 32 lanes) */

    const int nqt = (T + BQ - 1) / BQ;
    const int q0 = (causal ? nqt - 1 - (int)blockIdx.y : (int)blockIdx.y) * BQ;
    const size_t head = (size_t)blockIdx.x * T;
    q += head * D;
    k += head * D;
    v += head * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int rows = DS == 1 ? warp : warp % NW, part = DS == 1 ? 0 : warp / NW;
    const int r0 = 16 * rows;
    const int last_row = q0 + r0 + 15; /* the warp's last query */
    const int nkt_all = (T + BK - 1) / BK;
    const int nkt = causal ? min(nkt_all, (q0 + BQ - 1) / BK + 1) : nkt_all;

    load_rows<D, BQ, NT>(Qs, q, q0, T);
    load_rows<D, BK, NT>(Ks, k, 0, T);
    load_rows<D, BK, NT>(Vs, v, 0, T);
    cp_commit();

    float acc[NQ][4]; /* O's n-tiles part·NQ… */
#pragma unroll
    for (int n = 0; n < NQ; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}; /* rows g, g+8; l per thread */

    for (int j = 0; j < nkt; j++) {
        cp_wait_all();
        __syncthreads(); /* tile j landed; tile j−1's buffers are free */
        if (j + 1 < nkt) {
            load_rows<D, BK, NT>(Ks + ((j + 1) & 1) * BK * W, k, (j + 1) * BK, T);
            load_rows<D, BK, NT>(Vs + ((j + 1) & 1) * BK * W, v, (j + 1) * BK, T);
        }
        cp_commit();
        const int k0 = j * BK;
        if (causal && k0 > last_row)
            continue; /* the whole tile is above this warp's diagonal */
        const float *Kb = Ks + (j & 1) * BK * W, *Vb = Vs + (j & 1) * BK * W;

        float s[BK / 8][4];
        {
            float slo[BK / 8][4];
            zero<BK / 8>(s);
            zero<BK / 8>(slo);
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const int kk = part * NQ + i;
                const frag_a a = lda_rows<W>(Qs, r0, kk, g, t);
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
                    mma3(s[n], slo[n], a, ldb_rows<W>(Kb, 8 * n, kk, g, t));
            }
            fold<BK / 8>(s, s, slo);
        }
        if constexpr (DS == 2) { /* s = the two parts' sums added (a + b = b + a:
                                  * both warps hold the same scores) */
            float *mine = Xs + warp * SX_WORDS;
            const float *other = Xs + (part ? rows : rows + NW) * SX_WORDS; /* the other part's warp */
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    mine[(4 * n + e) * 32 + lane] = s[n][e];
            /* the pair's barrier (1 + rows; 0 is __syncthreads'); the next
             * write to mine comes after the loop's __syncthreads, which the
             * other warp reaches after its reads */
            asm volatile("bar.sync %0, 64;\n" ::"r"(1 + rows) : "memory");
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[n][e] += other[(4 * n + e) * 32 + lane];
        }
        /* s in log2 units, rounded before the max is taken and subtracted
         * (no fma): the row's largest entry then gives p = exp2(0) = 1
         * exactly, so that a row with one key (T = 1, a causal row 0) has
         * O = hi + lo of V's own split, which f32tc_dsum_kernel's D matches
         * bit for bit with the backward's dP (dS = P∘(dP − D) = 0 there) */
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] = __fmul_rn(s[n][e], scale_log2);
        if ((causal && k0 + BK - 1 > q0 + r0) || k0 + BK > T) { /* edge tile: mask */
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + 8 * n + 2 * t + (e & 1);
                    const int row = q0 + r0 + g + 8 * (e >> 1);
                    if (key >= T || (causal && key > row))
                        s[n][e] = -INFINITY;
                }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        float alpha[2], mneg[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            /* tile 0 always has an unmasked key for every row, so m is finite
             * from then on */
            const float mnew = fmaxf(m[h], mx[h]);
            alpha[h] = exp2f(m[h] - mnew);
            m[h] = mnew;
            mneg[h] = -mnew;
            l[h] *= alpha[h];
        }
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = exp2f(s[n][e] + mneg[e >> 1]);
                s[n][e] = p;
                l[e >> 1] += p;
            }
#pragma unroll
        for (int n = 0; n < NQ; n++) {
            acc[n][0] *= alpha[0];
            acc[n][1] *= alpha[0];
            acc[n][2] *= alpha[1];
            acc[n][3] *= alpha[1];
        }
        /* acc += P·V: the tile's sum in fresh accumulators, fwd_pv_chunk<D>()
         * n-tiles at a time, then added to acc */
        constexpr int CH = fwd_pv_chunk<D>() < NQ ? fwd_pv_chunk<D>() : NQ;
        static_assert(NQ % CH == 0, "whole chunks of n-tiles");
        const int nb = part * NQ; /* the warp's first n-tile of O */
        if constexpr (fwd_pv_resplit<D>()) { /* P split again for each chunk */
#pragma unroll
            for (int n0 = 0; n0 < NQ; n0 += CH) {
                float hi[CH][4], lo[CH][4];
                zero<CH>(hi);
                zero<CH>(lo);
#pragma unroll
                for (int kk = 0; kk < BK / 8; kk++) {
                    const frag_a pa = acc_as_a_anew(s[kk]);
#pragma unroll
                    for (int n = 0; n < CH; n++)
                        mma3(hi[n], lo[n], pa, ldb_cols<W>(Vb, kk, 8 * (nb + n0 + n), g, t));
                }
#pragma unroll
                for (int n = 0; n < CH; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[n0 + n][e] += hi[n][e] + lo[n][e];
            }
        } else { /* P split once */
            frag_a pa[BK / 8];
#pragma unroll
            for (int kk = 0; kk < BK / 8; kk++)
                pa[kk] = acc_as_a(s[kk]);
#pragma unroll
            for (int n0 = 0; n0 < NQ; n0 += CH) {
                float hi[CH][4], lo[CH][4];
                zero<CH>(hi);
                zero<CH>(lo);
#pragma unroll
                for (int kk = 0; kk < BK / 8; kk++)
#pragma unroll
                    for (int n = 0; n < CH; n++)
                        mma3(hi[n], lo[n], pa[kk], ldb_cols<W>(Vb, kk, 8 * (nb + n0 + n), g, t));
#pragma unroll
                for (int n = 0; n < CH; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[n0 + n][e] += hi[n][e] + lo[n][e];
            }
        }
    }

#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = q0 + r0 + g + 8 * h;
        if (row >= T)
            continue;
        const float inv = 1.f / l[h];
        float *orow = o + (head + row) * D;
#pragma unroll
        for (int n = 0; n < NQ; n++)
            *reinterpret_cast<float2 *>(orow + 8 * (part * NQ + n) + 2 * t) =
                make_float2(acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
        if (t == 0 && part == 0)
            lse[head + row] = (m[h] + log2f(l[h])) * LN2;
    }
}

/* --- backward (single pass) --------------------------------------------- */

template <int D> __host__ __device__ constexpr int bwd_bq()
{
    return D <= 32 ? 64 : D == 64 ? LMK_FLASH_F32TC_BQ64 : D == 128 ? LMK_FLASH_F32TC_BQ128 : 32;
}
/* Query-tile buffers: 2 (the next tile loads during this one) where two
 * blocks per multiprocessor still fit, else 1 */
template <int D> __host__ __device__ constexpr int bwd_nbuf()
{
    return D <= 32 || D == 80 || (D == 64 && LMK_FLASH_F32TC_BQ64 == 32) ||
                   (D == 128 && LMK_FLASH_F32TC_BQ128 == 16)
               ? 2
               : 1;
}
/* Whether the backward's dPᵀ = V·dOᵀ keeps its small terms in an
 * accumulator of its own (hi += big·big, lo += the rest, then hi + lo), or,
 * in 64-query tiles (registers), adds all three products into one
 * accumulator. f32tc_dsum_kernel computes D = rowsum(dO∘O) the same way. */
template <int D> __host__ __device__ constexpr bool dp_lo_apart() { return bwd_bq<D>() != 64; }

template <int D> constexpr size_t bwd_smem()
{
    constexpr int W = row_words<D>(), BQ = bwd_bq<D>(), NB = bwd_nbuf<D>();
    /* K | V | Q[NB] | dO[NB] | dS | lse[NB] | D[NB] */
    return sizeof(float) * ((size_t)2 * BK * W + (size_t)2 * NB * BQ * W + BQ * BK + 2 * NB * BQ);
}

// dk, dv: (B, H, T, D) out; dq: (B, H, T, D) float32, zeroed, gets scale·dS·K
// added by atomics; dout, q, k, v: (B, H, T, D), 16-byte aligned; lse, dsum:
// (B, H, T). grid (B·H, ceil(T/64)), 128 threads, bwd_smem<D>(). Warp w:
// keys 16w…16w+15 of the block's 64; lane (g, t) holds keys g, g+8.
template <int D>
__global__ void __launch_bounds__(128)
    f32tc_bwd_kernel(float *dk, float *dv, float *dq, const float *dout, const float *q,
                     const float *k, const float *v, const float *lse, const float *dsum, int T,
                     int causal, float scale_log2, float scale)
{
    constexpr int W = row_words<D>(), BQ = bwd_bq<D>(), NB = bwd_nbuf<D>();
    constexpr int QG = BQ / 16, CG = 4 / QG, NC = D / CG; /* dQ: warps over rows × columns */
    static_assert(NC % 8 == 0, "dQ column groups of whole n-tiles");
    extern __shared__ float4 smem4[];
    float *Ks = reinterpret_cast<float *>(smem4); /* (BK, W) */
    float *Vs = Ks + BK * W;                       /* (BK, W) */
    float *Qs = Vs + BK * W;                       /* [NB] (BQ, W) */
    float *dOs = Qs + NB * BQ * W;                 /* [NB] (BQ, W) */
    float *dSs = dOs + NB * BQ * W;                /* (BQ, BK): queries × keys */
    float *Ls = dSs + BQ * BK;                     /* [NB] (BQ): lse·log2e, +inf past T */
    float *Ds = Ls + NB * BQ;                      /* [NB] (BQ): D, 0 past T */

    const int k0 = blockIdx.y * BK;
    const size_t head = (size_t)blockIdx.x * T;
    q += head * D;
    k += head * D;
    v += head * D;
    dout += head * D;
    lse += head;
    dsum += head;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int kr0 = 16 * warp;
    const int qt0 = causal ? k0 / BQ : 0, nqt = (T + BQ - 1) / BQ;

    auto load_q_tile = [&](int i, int b) {
        load_rows<D, BQ, 128>(Qs + b * BQ * W, q, i * BQ, T);
        load_rows<D, BQ, 128>(dOs + b * BQ * W, dout, i * BQ, T);
        for (int r = threadIdx.x; r < BQ; r += 128) {
            const int row = i * BQ + r;
            Ls[b * BQ + r] = row < T ? lse[row] * LOG2E : INFINITY;
            Ds[b * BQ + r] = row < T ? dsum[row] : 0.f;
        }
    };

    load_rows<D, BK, 128>(Ks, k, k0, T);
    load_rows<D, BK, 128>(Vs, v, k0, T);
    load_q_tile(qt0, 0);
    cp_commit();

    float dka[D / 8][4], dva[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dka[n][e] = dva[n][e] = 0.f;

    for (int i = qt0; i < nqt; i++) {
        const int b = NB == 2 ? (i - qt0) & 1 : 0, qb = i * BQ;
        cp_wait_all();
        __syncthreads(); /* tile i landed; iteration i−1 is done with dS and tile i−1 */
        if (NB == 2) {
            if (i + 1 < nqt)
                load_q_tile(i + 1, b ^ 1);
            cp_commit();
        }
        const float *Qb = Qs + b * BQ * W, *dOb = dOs + b * BQ * W;
        const float *Lb = Ls + b * BQ, *Db = Ds + b * BQ;

        float st[BQ / 8][4], dpt[BQ / 8][4]; /* Sᵀ, dPᵀ: (16 keys, BQ queries) */
        { /* dPᵀ's small terms apart (dS takes dPᵀ − D, a difference), except
           * in 64-query tiles (registers) */
            constexpr int NLO = dp_lo_apart<D>() ? BQ / 8 : 1;
            float dptlo[NLO][4];
            zero<BQ / 8>(st);
            zero<BQ / 8>(dpt);
            zero<NLO>(dptlo);
#pragma unroll
            for (int kk = 0; kk < D / 8; kk++) {
                const frag_a ak = lda_rows<W>(Ks, kr0, kk, g, t);
#pragma unroll
                for (int n = 0; n < BQ / 8; n++)
                    mma3(st[n], ak, ldb_rows<W>(Qb, 8 * n, kk, g, t));
                const frag_a av = lda_rows<W>(Vs, kr0, kk, g, t);
#pragma unroll
                for (int n = 0; n < BQ / 8; n++) {
                    if constexpr (!dp_lo_apart<D>())
                        mma3(dpt[n], av, ldb_rows<W>(dOb, 8 * n, kk, g, t));
                    else
                        mma3(dpt[n], dptlo[n], av, ldb_rows<W>(dOb, 8 * n, kk, g, t));
                }
            }
            if constexpr (dp_lo_apart<D>())
                fold<BQ / 8>(dpt, dpt, dptlo);
        }
        const bool edge = causal && qb < k0 + BK - 1; /* some query < some key */
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qi = 8 * n + 2 * t + (e & 1);
                float p = exp2f(fmaf(st[n][e], scale_log2, -Lb[qi]));
                if (edge && qb + qi < k0 + kr0 + g + 8 * (e >> 1))
                    p = 0.f;
                st[n][e] = p;
                dpt[n][e] = p * (dpt[n][e] - Db[qi]);
            }
        /* dV += Pᵀ·dO, dK += dSᵀ·Q (k over the tile's queries): the tile's
         * sums (BQ/8 steps) in fresh accumulators, two n-tiles at a time
         * (the A fragments split again for each pair: registers) */
#pragma unroll
        for (int n0 = 0; n0 < D / 8; n0 += 2) {
            float vt[2][4], kt[2][4];
            zero<2>(vt);
            zero<2>(kt);
#pragma unroll
            for (int kk = 0; kk < BQ / 8; kk++) {
                const frag_a ap = acc_as_a_anew(st[kk]);
#pragma unroll
                for (int n = 0; n < 2; n++)
                    mma3(vt[n], ap, ldb_cols<W>(dOb, kk, 8 * (n0 + n), g, t));
                const frag_a as = acc_as_a_anew(dpt[kk]);
#pragma unroll
                for (int n = 0; n < 2; n++)
                    mma3(kt[n], as, ldb_cols<W>(Qb, kk, 8 * (n0 + n), g, t));
            }
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    dva[n0 + n][e] += vt[n][e];
                    dka[n0 + n][e] += kt[n][e];
                }
        }
        /* dS (queries × keys) to shared memory */
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                dSs[sidx<BK>(8 * n + 2 * t + (e & 1), kr0 + g + 8 * (e >> 1))] = dpt[n][e];
        __syncthreads();
        /* dQ rows qr0…+15, columns c0…c0+NC−1 += scale·dS·K */
        const int qr0 = 16 * (warp % QG), c0 = NC * (warp / QG);
        float dqa[NC / 8][4]; /* a fresh sum over the 64 keys, added by atomics */
        zero<NC / 8>(dqa);
#pragma unroll
        for (int kk = 0; kk < BK / 8; kk++) {
            const frag_a a = lda_rows<BK>(dSs, qr0, kk, g, t);
#pragma unroll
            for (int n = 0; n < NC / 8; n++)
                mma3(dqa[n], a, ldb_cols<W>(Ks, kk, c0 + 8 * n, g, t));
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = qb + qr0 + g + 8 * h;
            if (row >= T)
                continue;
            float *dqrow = dq + (head + row) * D + c0 + 2 * t;
#pragma unroll
            for (int n = 0; n < NC / 8; n++)
                atomicAdd(reinterpret_cast<float2 *>(dqrow + 8 * n),
                          make_float2(dqa[n][2 * h] * scale, dqa[n][2 * h + 1] * scale));
        }
        if (NB == 1 && i + 1 < nqt) {
            __syncthreads(); /* every warp is done with tile i */
            load_q_tile(i + 1, 0);
            cp_commit();
        }
    }

#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int key = k0 + kr0 + g + 8 * h;
        if (key >= T)
            continue;
        float *dkrow = dk + (head + key) * D + 2 * t, *dvrow = dv + (head + key) * D + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            *reinterpret_cast<float2 *>(dkrow + 8 * n) =
                make_float2(dka[n][2 * h] * scale, dka[n][2 * h + 1] * scale);
            *reinterpret_cast<float2 *>(dvrow + 8 * n) = make_float2(dva[n][2 * h], dva[n][2 * h + 1]);
        }
    }
}

/* --- D = rowsum(dO∘O) ------------------------------------------------------ */

/* D_i = Σ_c dO_ic·O_ic in the arithmetic of the backward's dPᵀ_ji = Σ_c
 * V_jc·dO_ic: as the diagonal of the 16×16 products O·dOᵀ of 16-row tiles,
 * O as the A operand (V's role), dO as B, the same k mapping, the same
 * split, the same mma order per k-step and the same fold (dp_lo_apart).
 * Where O_i equals V_j bit for bit — one key in the row: T = 1 or a causal
 * row 0, with the forward's p = 1 exactly — D_i equals dP_ij bit for bit
 * and dS_ij = P_ij·(dP_ij − D_i) is exactly 0, as in exact arithmetic (the
 * exact dK and dQ are 0 at T = 1; an fp32 D left both rounding noise of a
 * few ulps of dP: H100 2026-11-22 09:20, dK 4.2e-6 against SDPA's 2.0e-6).
 * Elsewhere D is an fp32-accurate dot product like the CUDA-core one.
 * Also zeroes dq (the single pass's atomics add into it).
 * dsum: (rows) out; dq: (rows, D) out, zeroed; dout, o: (rows, D), 16-byte
 * aligned; rows = B·H·T. grid ceil(rows/64), 128 threads: warp w takes rows
 * 16·(4·block + w)…+15; lane (g, t) computes rows g and g+8 of them. */
template <int D>
__global__ void __launch_bounds__(128)
    f32tc_dsum_kernel(float *dsum, float *dq, const float *dout, const float *o, long long rows)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const long long r0 = ((long long)blockIdx.x * 4 + warp) * 16;
    if (r0 >= rows)
        return;
    for (int i = lane; i < 16 * D / 4; i += 32) {
        const long long r = r0 + i / (D / 4);
        if (r < rows)
            reinterpret_cast<float4 *>(dq + r * D)[i % (D / 4)] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    /* 8-byte loads of (row, columns 8kk+2t, +1), zero past rows */
    auto ld2 = [&](const float *x, long long r, int kk) {
        return r < rows ? *reinterpret_cast<const float2 *>(x + r * D + 8 * kk + 2 * t)
                        : make_float2(0.f, 0.f);
    };
    float c[2][4], clo[2][4]; /* n-tile 0: dO rows 0…7 of the 16; 1: rows 8…15 */
    zero<2>(c);
    zero<2>(clo);
#pragma unroll
    for (int kk = 0; kk < D / 8; kk++) {
        const frag_a a = make_a(ld2(o, r0 + g, kk), ld2(o, r0 + g + 8, kk));
#pragma unroll
        for (int n = 0; n < 2; n++) {
            const frag_b b = make_b(ld2(dout, r0 + 8 * n + g, kk));
            if constexpr (dp_lo_apart<D>())
                mma3(c[n], clo[n], a, b);
            else
                mma3(c[n], a, b);
        }
    }
    if constexpr (dp_lo_apart<D>())
        fold<2>(c, c, clo);
    /* the diagonal: row g of n-tile 0 is column g = 2t + (g & 1) (element
     * g & 1), row g + 8 of n-tile 1 likewise (element 2 + (g & 1)) */
    if (t == g >> 1) {
        if (r0 + g < rows)
            dsum[r0 + g] = c[0][g & 1];
        if (r0 + g + 8 < rows)
            dsum[r0 + g + 8] = c[1][2 + (g & 1)];
    }
}

/* --- launchers ----------------------------------------------------------- */

template <typename K> int set_smem(K kern, size_t bytes)
{
    return cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) ==
                   cudaSuccess
               ? LMK_OK
               : LMK_DEVICE;
}

/* Multiprocessors of the current device (132 when the query fails). */
int sm_count()
{
    return lmk_cuda_sm_count(132);
}

template <int D, int NW, int DS>
int fwd_launch_nw(float *o, float *lse, const float *q, const float *k, const float *v,
                  const lmk_attn_shape *s, cudaStream_t st)
{
    auto kern = f32tc_fwd_kernel<D, NW, DS>;
    constexpr size_t smem = fwd_smem<D, NW, DS>();
    if (set_smem(kern, smem) != LMK_OK)
        return LMK_DEVICE;
    dim3 grid(s->B * s->H, (s->T + 16 * NW - 1) / (16 * NW));
    kern<<<grid, NW * 32 * DS, smem, st>>>(o, lse, q, k, v, s->T, s->causal,
                                           LOG2E / sqrtf((float)D));
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

template <int D>
int fwd_launch(float *o, float *lse, const float *q, const float *k, const float *v,
               const lmk_attn_shape *s, cudaStream_t st)
{
    /* 128-query blocks (8 warps) where the grid fills every multiprocessor,
     * else 64-query blocks (4 warps) */
    if ((long long)s->B * s->H * ((s->T + 127) / 128) >= sm_count())
        return fwd_launch_nw<D, 8, 1>(o, lse, q, k, v, s, st);
    if constexpr (LMK_FLASH_F32TC_FWD_DSPLIT && (D == 64 || D == 128))
        if ((long long)s->B * s->H * ((s->T + 63) / 64) <= sm_count()) /* d-split */
            return fwd_launch_nw<D, 4, 2>(o, lse, q, k, v, s, st);
    return fwd_launch_nw<D, 4, 1>(o, lse, q, k, v, s, st);
}

template <int D>
int bwd_launch(float *dq, float *dk, float *dv, float *dsum, const float *dout, const float *q,
               const float *k, const float *v, const float *o, const float *lse,
               const lmk_attn_shape *s, cudaStream_t st)
{
    const long long rows = (long long)s->B * s->H * s->T;
    f32tc_dsum_kernel<D><<<(unsigned)((rows + 63) / 64), 128, 0, st>>>(dsum, dq, dout, o, rows);
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;
    auto kern = f32tc_bwd_kernel<D>;
    constexpr size_t smem = bwd_smem<D>();
    if (set_smem(kern, smem) != LMK_OK)
        return LMK_DEVICE;
    const float scale = 1.f / sqrtf((float)D);
    dim3 grid(s->B * s->H, (s->T + BK - 1) / BK);
    kern<<<grid, 128, smem, st>>>(dk, dv, dq, dout, q, k, v, lse, dsum, s->T, s->causal,
                                  scale * LOG2E, scale);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

} // namespace

extern "C" int lmk_flash_f32tc_usable(const lmk_attn_shape *s)
{
    return LMK_FLASH_F32TC && s && s->dtype == LMK_F32 && s->B > 0 && s->H > 0 && s->T > 0 &&
           (long long)s->B * s->H <= 0x7fffffff && s->T <= 65535 * 64 &&
           lmk_attn_head_dim_supported(s->d);
}

extern "C" int lmk_flash_f32tc_fwd(float *o, float *lse, const float *q, const float *k,
                                   const float *v, const lmk_attn_shape *s, void *stream)
{
    if (!lmk_flash_f32tc_usable(s) || !o || !lse || !q || !k || !v)
        return LMK_INVALID;
    cudaStream_t st = (cudaStream_t)stream;
    switch (s->d) {
#define XX(D) \
    case D: return fwd_launch<D>(o, lse, q, k, v, s, st);
        LMK_ATTN_HEAD_DIMS(XX)
#undef XX
    }
    return LMK_INVALID;
}

extern "C" int lmk_flash_f32tc_bwd(float *dq, float *dk, float *dv, float *dsum,
                                   const float *dout, const float *q, const float *k,
                                   const float *v, const float *o, const float *lse,
                                   const lmk_attn_shape *s, void *stream)
{
    if (!lmk_flash_f32tc_usable(s) || !dq || !dk || !dv || !dsum || !dout || !q || !k || !v ||
        !o || !lse)
        return LMK_INVALID;
    cudaStream_t st = (cudaStream_t)stream;
    switch (s->d) {
#define XX(D) \
    case D: return bwd_launch<D>(dq, dk, dv, dsum, dout, q, k, v, o, lse, s, st);
        LMK_ATTN_HEAD_DIMS(XX)
#undef XX
    }
    return LMK_INVALID;
}
