/* Flash attention backward on Hopper's warpgroup MMA (wgmma.mma_async and the
 * tensor memory accelerator, sm_90a only: compiled alone for compute_90a like
 * flash_wgmma.cu, see kernels/meson.build), fp16/bf16, head dim 64 or 128,
 * the single pass with dQ added by float32 atomics (lmk_attn_shape.atomic_dq;
 * attention.h has the math). FlashAttention-3's plan for the backward, own
 * code:
 *
 * Block: 128 keys of one (b, h), 384 threads = one producer warpgroup and two
 * consumer warpgroups of 64 keys each.
 *   warpgroup 0, the producer: one thread loads the block's K and V tiles
 *     once, then for each query tile of BM rows Q, dO (3-D TMA, 128-byte
 *     swizzle, rows past T read as zeros) into a ring of STAGES buffers,
 *     while the 32 lanes of its warp copy the tile's lse and D =
 *     rowsum(dO∘O) (0 past T; with 1-D tensor maps over the (B·H·T) vectors
 *     instead, the H100 raised an illegal instruction on every shape whose
 *     last box crossed the vector's end): "q full" (Q, lse) and "do
 *     full" (dO, D) mbarriers, refilled once all 8 consumer warps arrive on
 *     the stage's "empty" mbarrier. Warps 1 and 2 (DQ_TMA; PINGPONG off:
 *     warp 1 for both) add consumer 1 / 2's dQ tiles to the workspace (see
 *     below).
 *   warpgroups 1, 2, the consumers, keys k0+64c…k0+64c+63 (c = 0, 1). Per
 *     query tile (queries q0…q0+BM−1; BM 128 at d 64, 64 at d 128):
 *       Sᵀ = K_c·Qᵀ and dPᵀ = V_c·dOᵀ (wgmma m64nBMk16, both operands from
 *         shared memory, K-major);
 *       Pᵀ = 2^(Sᵀ·scale·log2 e − lse·log2 e) (masked: queries ≥ T, causal
 *         keys after the query), dSᵀ = Pᵀ∘(dPᵀ − D), both rounded to T;
 *       dV_c += Pᵀ·dO and dK_c += dSᵀ·Q (m64nDk16, Pᵀ / dSᵀ from registers
 *         in the accumulator layout, dO / Q as MN-major B operands);
 *       dSᵀ to shared memory (128 keys × BM queries in 64-column boxes, the
 *         128-byte swizzle; two buffers, four at d 128 (DS4)) and, once both consumers' halves
 *         are written, dQ_tile = dS·K (A = dS and B = K both MN-major, over
 *         all 128 keys): BM 128: consumer c takes queries 64c…; BM 64: the
 *         D/2 columns c·D/2… (LMK_FLASH_WGMMA_BWD_SPLITN 0: all columns over
 *         its own 64 keys instead, twice the atomics, no shared barrier).
 *         PINGPONG (the default): the consumers do not meet per tile; each
 *         issues dQ of tile i − 1 after dV, dK of tile i, behind named
 *         barriers per dSᵀ buffer ("this half written", "read by the other's
 *         dQ"), so that they drift apart and one's exponentials run beside
 *         the other's MMAs; off: one barrier of both per tile;
 *       dQ_tile (64 × 64 per consumer) to shared memory and, by the
 *         producer's dQ warp, added to the float32 workspace by the tensor
 *         memory accelerator (cp.reduce.async.bulk.tensor .add; DQ_TMA, the
 *         default) — or by the consumers' red.global.add.v4.f32 (lane pairs
 *         exchanging halves); the order of the adds varies between runs.
 *     Causal: the first query tile is the block's diagonal tile (q0 = k0).
 * After the loop dK = scale·dK_c, dV_c are stored; a small kernel converts
 * the workspace (dq = T(scale·dqacc), row-major (B, H, T, D)). T ≥ 128: the
 * tensor maps' boxes (64 or 128 rows) stay within the tensor. */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "device_query.cuh"
#include "flash_wgmma_bwd.h"
#include "wgmma_sm90.cuh"
extern "C" {
#include "../status.h"
}

/* Build-time knobs (defaults are the shipped configuration):
 *   LMK_FLASH_WGMMA_BWD         1 (the default): flash_attn.cu's
 *                               single-pass backward calls this kernel for
 *                               the shapes lmk_flash_wgmma_bwd_preferred
 *                               takes; 0: never, and _usable says 0. Switched
 *                               on after the lent H100 ran this source with it
 *                               on: test_flash 232/232 (bf16, fp16) and
 *                               flash_vs_torch 126/126 passed; leaderboard
 *                               backward 3.63-3.64 ms against the mma.sync
 *                               single pass's 6.0 (PERF.md).
 *   LMK_FLASH_WGMMA_BWD_SPLITN  1: the two consumers split dQ's columns
 *                               (one dQ add per query tile and 128 keys);
 *                               0: its keys (two adds). */
#ifndef LMK_FLASH_WGMMA_BWD
#define LMK_FLASH_WGMMA_BWD 1
#endif
#ifndef LMK_FLASH_WGMMA_BWD_SPLITN
#define LMK_FLASH_WGMMA_BWD_SPLITN 1
#endif
/*   LMK_FLASH_WGMMA_BWD_D64_BM  queries per tile at d 64: 128 (dQ split by
 *                               query rows between the consumers; Sᵀ, dPᵀ as
 *                               m64n128k16; 3.7 against 4.0 ms for 64 at the
 *                               leaderboard shape on the H100, PERF.md) or 64.
 *                               d 128 always 64 (registers). */
#ifndef LMK_FLASH_WGMMA_BWD_D64_BM
#define LMK_FLASH_WGMMA_BWD_D64_BM 128
#endif
/* The knobs below were switched on together after the lent H100 ran this
 * source with them on (2026-11-22 08:38 UTC, PERF.md "attention: the wgmma
 * backward faster"): test_flash 116/116 bf16 and 116/116 fp16,
 * flash_vs_torch --only bf16,fp16 126/126; leaderboard backward 3.62-3.66 ->
 * 2.53-2.54 ms (SDPA 3.14 in that call).
 *   LMK_FLASH_WGMMA_BWD_DQ_TMA  1 (the default): each consumer writes its
 *                               64 × 64 dQ tile to shared memory (128-byte
 *                               swizzle, two 32-column boxes) and a warp of
 *                               the producer warpgroup adds it to the
 *                               workspace with the tensor memory
 *                               accelerator's bulk reduction
 *                               (cp.reduce.async.bulk.tensor .add, rows past
 *                               T clipped by the map), FlashAttention-3's
 *                               way; 0: the consumers' red.global.add.v4
 *                               (leaderboard backward 3.62-3.66 against
 *                               2.99-3.01 ms).
 *   LMK_FLASH_WGMMA_BWD_PINGPONG  1 (the default; needs DQ_TMA): the
 *                               consumers no longer meet once per tile: each
 *                               issues dQ of tile i − 1 with dV, dK of tile
 *                               i, once the other's half of that tile's dSᵀ
 *                               is written (named barriers per consumer and
 *                               dSᵀ buffer), so that one's softmax runs
 *                               beside the other's MMAs; each has its own dQ
 *                               warp (producer warps 1, 2) (2.90 -> 2.53 ms).
 *   LMK_FLASH_WGMMA_BWD_LEAN    1 (the default): the producer stores
 *                               −lse·log2 e (the exponent's bias) instead of
 *                               lse, and the consumers' Pᵀ loop has a masked
 *                               and an unmasked copy (the compiler had
 *                               predicated the mask arithmetic into every
 *                               tile) (2.96-3.01 -> 2.90 ms).
 *   LMK_FLASH_WGMMA_BWD_MIN_BLOCKS_PCT  _preferred takes grids of at least
 *                               this many 128-key blocks per 100
 *                               multiprocessors: 96 (the default) takes one
 *                               head at T 16384 (128 blocks on 132 SMs,
 *                               measured with PINGPONG off: 0.39 against
 *                               the mma.sync pass's 0.45-0.47 ms at d 64,
 *                               0.66 against 0.83-0.85 at d 128) and T 32768
 *                               (0.67 against 1.88-1.91, 1.26-1.34 against
 *                               3.08-3.11); was 200.
 *   LMK_FLASH_WGMMA_BWD_ORDER   1: per tile dV += Pᵀ·dO is issued before dSᵀ
 *                               goes to shared memory, dQ before dK, and the
 *                               dQ epilogue runs while dK's wgmma does (waits
 *                               for dV and dQ only); 0 (the default): dV, dK,
 *                               barrier, dQ, all waited before the epilogue.
 *                               Without DQ_TMA, 9-10% faster at d 128; with it,
 *                               slower at d 128; ignored under PINGPONG.
 *   LMK_FLASH_WGMMA_BWD_HEAVY_FIRST  1: grid (B·H, key blocks), blocks run
 *                               key block by key block over every head, so
 *                               that the causal blocks with most query tiles
 *                               (the first keys) start first across the whole
 *                               grid; 0 (the default): grid (key blocks, B·H),
 *                               head by head (no difference measured). */
#ifndef LMK_FLASH_WGMMA_BWD_DQ_TMA
#define LMK_FLASH_WGMMA_BWD_DQ_TMA 1
#endif
#ifndef LMK_FLASH_WGMMA_BWD_PINGPONG
#define LMK_FLASH_WGMMA_BWD_PINGPONG 1
#endif
#ifndef LMK_FLASH_WGMMA_BWD_LEAN
#define LMK_FLASH_WGMMA_BWD_LEAN 1
#endif
#ifndef LMK_FLASH_WGMMA_BWD_MIN_BLOCKS_PCT
#define LMK_FLASH_WGMMA_BWD_MIN_BLOCKS_PCT 96
#endif
#ifndef LMK_FLASH_WGMMA_BWD_ORDER
#define LMK_FLASH_WGMMA_BWD_ORDER 0
#endif
#ifndef LMK_FLASH_WGMMA_BWD_HEAVY_FIRST
#define LMK_FLASH_WGMMA_BWD_HEAVY_FIRST 0
#endif
/*   LMK_FLASH_WGMMA_BWD_PAD_DIMS  head dims (bit mask: 2 d 32, 8 d 80) that run
 *                               on the d 64 / d 128 kernel with the columns
 *                               past d zero (helper fwdfast): the TMA fills
 *                               Q, K, V, dO's boxes past d with zeros, Sᵀ and
 *                               dPᵀ take the d columns only (k16 steps), dK,
 *                               dV are stored and dQ added for the d columns
 *                               only, the softmax scale is d's; needs the TMA
 *                               dQ path (DQ_TMA, and SPLITN at d 80). 10 (the
 *                               default, both): the lent H100 ran it (the
 *                               lead's final call): test_flash 116/116
 *                               (bf16, fp16; d 32 / 80 on 544+ blocks against
 *                               the deterministic passes), flash_vs_torch
 *                               126/126; backward at B8 H1 T16384 causal
 *                               d 32 2.01 -> 1.21 ms (SDPA 1.56), d 80 5.07
 *                               -> 2.45 (SDPA 2.43) (PERF.md). */
#ifndef LMK_FLASH_WGMMA_BWD_PAD_DIMS
#define LMK_FLASH_WGMMA_BWD_PAD_DIMS 10
#endif
/*   LMK_FLASH_WGMMA_BWD_STAGES128  depth of the Q/dO ring of the d 128 kernel
 *                               (64-query tiles, d 80 too): 2 (the default)
 *                               or 3 (226.6 of the 227 KB a block may have;
 *                               no faster on the lent H100, alone or with
 *                               DESC and PRELOAD: bf16 B1 H16 T16384 causal
 *                               backward 5.09 against 5.01, 4.80-5.14
 *                               against 4.73-4.86, PERF.md).
 *   LMK_FLASH_WGMMA_BWD_LOOKAHEAD  bit mask of kernels (1: d 64 (and d 32),
 *                               2: d 128 (and d 80)) whose consumers issue
 *                               Sᵀ = K_c·Qᵀ of tile i + 1 before they wait
 *                               for dQ of tile i − 1 and write it out (needs
 *                               PINGPONG): the dQ epilogue and the barriers
 *                               between tiles run beside their own MMA, and
 *                               a tile's Q/dO stage is handed back once dV,
 *                               dK (not dQ) are done; 0 (the default): none
 *                               (3 on the lent H100: d 128 no faster, 5.22
 *                               against 5.01 ms; d 64 10-15% slower, 2.82-2.96
 *                               against 2.57: the consumers wait on their own
 *                               instruction stream, not at the tile's turn). */
/*   LMK_FLASH_WGMMA_BWD_STMATRIX  1: each consumer writes its dSᵀ fragments
 *                               with one stmatrix per 16 queries (4 at 64
 *                               queries) instead of 4 × 4 st.shared.b32 per
 *                               thread; 0 (the default): st.shared (1 on the
 *                               lent H100, with DESC and PRELOAD: 5.07-5.10
 *                               against 4.73-4.86 ms; test_flash passed with
 *                               it, LOOKAHEAD, STAGES128 3 and HEAVY_FIRST). */
#ifndef LMK_FLASH_WGMMA_BWD_STMATRIX
#define LMK_FLASH_WGMMA_BWD_STMATRIX 0
#endif
/*   LMK_FLASH_WGMMA_BWD_DESC    bit mask of kernels as LOOKAHEAD's whose
 *                               consumers build each tile's wgmma
 *                               descriptors from a few base descriptors by
 *                               one 32-bit add each (the tiles of a k-loop lie
 *                               at constant offsets), with the consumer index
 *                               broadcast so that the compiler knows it
 *                               uniform; otherwise each descriptor from its
 *                               address (and, shift, or: ~380 of 746 SASS
 *                               instructions per consumer warp and tile at
 *                               d 128 went to address and descriptor
 *                               arithmetic, H100 ncu). 2 (the default, d 128
 *                               and d 80): with PRELOAD 2 the lent H100 ran
 *                               this kernel (bwd128 call 2, 10:54 UTC):
 *                               test_flash 116/116 bf16 and 116/116 fp16,
 *                               flash_vs_torch --only bf16,fp16 126/126;
 *                               bf16 B1 H16 T16384 causal backward 5.19-5.27
 *                               -> 4.73-4.86 ms (SDPA 4.97), 570-590 SASS
 *                               instructions per consumer warp and tile,
 *                               tensor pipe 60 -> 63% (PERF.md). Not 1
 *                               (d 64): 2.64-2.66 -> 2.71-2.76 ms there. */
#ifndef LMK_FLASH_WGMMA_BWD_DESC
#define LMK_FLASH_WGMMA_BWD_DESC 2
#endif
/*   LMK_FLASH_WGMMA_BWD_PRELOAD  bit mask of kernels as LOOKAHEAD's (not 1:
 *                               the d 64 kernel's 128-query tiles would hold
 *                               64 more registers and spill) whose
 *                               consumers read the tile's −lse·log2 e
 *                               and D values from shared memory into
 *                               registers before they wait for Sᵀ (dPᵀ), not
 *                               after: the shared loads' latency runs beside
 *                               the wgmmas (the FFMA after them waited ~5% of
 *                               the consumers' samples at d 128, H100 ncu);
 *                               otherwise loaded where used. 2 (the default,
 *                               d 128 and d 80): checked with DESC 2, see
 *                               there (bf16 backward 4.88-5.15 with DESC
 *                               alone, 4.73-4.86 with both). */
#ifndef LMK_FLASH_WGMMA_BWD_PRELOAD
#define LMK_FLASH_WGMMA_BWD_PRELOAD 2
#endif
#ifndef LMK_FLASH_WGMMA_BWD_STAGES128
#define LMK_FLASH_WGMMA_BWD_STAGES128 2
#endif
#ifndef LMK_FLASH_WGMMA_BWD_LOOKAHEAD
#define LMK_FLASH_WGMMA_BWD_LOOKAHEAD 0
#endif
/* Helper bwd7's knobs (PERF.md "the wgmma backward at d 128 (helper bwd7 ...)";
 * the lent H100 ran each as a swapped object, 2026-11-22 13:01 and 13:23 UTC).
 * Off, measured slower:
 *   LMK_FLASH_WGMMA_BWD_DQ_BOX8  bit mask of kernels as LOOKAHEAD's whose
 *                               consumers write their 64 × 64 float32 dQ
 *                               tile (DQ_TMA) as eight 8-column boxes of 64
 *                               rows × 32 bytes, unswizzled, which the dQ warp
 *                               adds by eight bulk reductions: a half-warp's
 *                               8-byte stores of one fragment then fill 128
 *                               contiguous bytes (no bank conflict, no
 *                               per-lane choice of fragment, the 32 FSELs
 *                               gone); 0: two 32-column boxes, 128-byte
 *                               swizzle. 3: backward +5..+7% (d 64 2.68-2.73
 *                               -> 2.85-2.86 ms, B8 H1 T16384 d 128 2.50-2.56
 *                               -> 2.67-2.68): eight 32-byte-row bulk
 *                               reductions cost more than the FSELs.
 *   LMK_FLASH_WGMMA_BWD_DNEG    bit mask of kernels as LOOKAHEAD's whose
 *                               dPᵀ accumulator starts at −D (the producer
 *                               stores −D; the consumers read it into the
 *                               accumulator before the Sᵀ issue (after it,
 *                               ptxas waits for Sᵀ first, C7517) and the dPᵀ
 *                               wgmmas add to it): dSᵀ = Pᵀ∘acc, one FMUL an
 *                               element instead of FADD and FMUL. With DS4
 *                               (2 and 1): d 128 / d 80 backward +2..+7%: the
 *                               tile's first wgmma waits for those shared
 *                               loads, which queue behind the other
 *                               consumer's SS wgmmas.
 *   LMK_FLASH_WGMMA_BWD_DQ_NOSEL  bit mask of kernels as LOOKAHEAD's (not
 *                               with DQ_BOX8) whose consumers store dQ
 *                               fragment k at store k in every lane of the
 *                               swizzled two-box layout: no FSELs, rows g and
 *                               g ^ 1 of a half-warp then share banks
 *                               (two-way conflicts); 0: fragment k ^ 2 where
 *                               g is odd. 3: d 64 +15% (2.70 -> 3.10 ms),
 *                               d 128 +2..+6%. */
#ifndef LMK_FLASH_WGMMA_BWD_DQ_BOX8
#define LMK_FLASH_WGMMA_BWD_DQ_BOX8 0
#endif
#ifndef LMK_FLASH_WGMMA_BWD_DNEG
#define LMK_FLASH_WGMMA_BWD_DNEG 0
#endif
#ifndef LMK_FLASH_WGMMA_BWD_DQ_NOSEL
#define LMK_FLASH_WGMMA_BWD_DQ_NOSEL 0
#endif
/* The next four, on together (DS4 1, the others 3), take the decoupled
 * consumers' fences off their serial path and let them drift further apart.
 * Switched on after the lent H100 ran this source with them on (helper bwd7,
 * call 2, 2026-11-22 13:23 UTC): test_flash 120/120 bf16 and 120/120 fp16,
 * flash_vs_torch --only bf16,fp16 126/126; backward, causal T16384, against
 * the old default in the same call: bench bf16 B1 H16 d 128 4.41-4.87
 * (median 4.47) against 5.02-5.27 ms, fp16 4.83-5.10 against 5.41-5.58, bf16
 * B8 H1 d 128 2.41-2.46 against 2.61; the attention job bf16 B1 H16 d 128
 * 4.87 / 4.92 against 5.23 / 5.07 (SDPA 4.97), fp16 5.09 / 5.14 against
 * 5.20 / 5.28 (SDPA 5.05), bf16 B8 H1 2.24 / 2.37 against 2.34 / 2.58 (SDPA
 * 2.51); d 64 2.63-2.70 against 2.68-2.75, d 80 4.25-4.29 against 4.24-4.34.
 * Alone or in other subsets none gained (DS4 alone, LATE_FENCE_DS alone,
 * both fences, both fences and EARLY_RELEASE: 0..+5% at d 128; PERF.md):
 *   LMK_FLASH_WGMMA_BWD_DS4     1: the d 128 kernel (and d 80) keeps four
 *                               dSᵀ buffers (64 KB; the block's shared memory
 *                               226 of 227 KB) under PINGPONG instead of two,
 *                               and the "buffer read by the other's dQ"
 *                               barriers go: a consumer writes tile i's half
 *                               into buffer i % 4 after it has waited (in tile
 *                               i − 1) for the other's half of tile i − 2,
 *                               which the other writes after its tile i − 3
 *                               and so its dQ of tile i − 4, the buffer's last
 *                               reader, have completed. The consumers may
 *                               drift up to a tile apart (two buffers: about
 *                               half a tile before the "read" barrier
 *                               waits). 0: two buffers.
 *   LMK_FLASH_WGMMA_BWD_LATE_FENCE_DS  bit mask of kernels as LOOKAHEAD's
 *                               whose consumers (PINGPONG, not LOOKAHEAD)
 *                               issue dV, dK right after their dSᵀ stores and
 *                               only then run the async-proxy fence
 *                               (fence.proxy.async is MEMBAR.ALL.CTA +
 *                               FENCE.VIEW.ASYNC.S: a wait for the stores)
 *                               and the "half written" arrival: the wait runs
 *                               beside their own MMAs (dV and dK do not read
 *                               dSᵀ from shared memory); 0: fence, arrival,
 *                               then dV, dK.
 *   LMK_FLASH_WGMMA_BWD_LATE_FENCE_DQ  the same mask for the dQ tile's
 *                               stores: their fence and "dQ tile written"
 *                               arrival move from the end of tile i to after
 *                               the Sᵀ, dPᵀ issue of tile i + 1 (the dQ warp
 *                               starts its bulk add that much later); 0: at
 *                               the end of tile i.
 *   LMK_FLASH_WGMMA_BWD_EARLY_RELEASE  the same mask: the consumers hand
 *                               the tile's Q/dO stage back once dV and dK are
 *                               done (wait for all but the dQ group), before
 *                               they wait for dQ of tile i − 1, which reads
 *                               neither; 0: after all three. */
#ifndef LMK_FLASH_WGMMA_BWD_DS4
#define LMK_FLASH_WGMMA_BWD_DS4 1
#endif
#ifndef LMK_FLASH_WGMMA_BWD_EARLY_RELEASE
#define LMK_FLASH_WGMMA_BWD_EARLY_RELEASE 3
#endif
#ifndef LMK_FLASH_WGMMA_BWD_LATE_FENCE_DS
#define LMK_FLASH_WGMMA_BWD_LATE_FENCE_DS 3
#endif
#ifndef LMK_FLASH_WGMMA_BWD_LATE_FENCE_DQ
#define LMK_FLASH_WGMMA_BWD_LATE_FENCE_DQ 3
#endif

namespace {

constexpr bool LEAN = LMK_FLASH_WGMMA_BWD_LEAN != 0;
constexpr float WB_LOG2E = 1.4426950408889634f;

/* Block plan for head dim D: shared memory offsets (bytes from a
 * 1024-aligned base; every tile 1024-aligned, as the swizzle needs). */
template <int D, int BM_, bool DQT = false> struct wb_plan {
    static_assert(BM_ == 64 || (BM_ == 128 && D == 64), "query tiles of 64, or 128 at d 64");
    static constexpr int BN = 128;                  /* keys per block */
    static constexpr int BM = BM_;                  /* queries per tile */
    static constexpr int THREADS = 384;
    /* setmaxnreg: the producer's release must cover the consumers' raise
     * exactly (launch bounds give every thread 168 = 65536 / 384 rounded down
     * to 8; .inc waits for registers the CTA has released — 32 / 240 asked
     * 1024 more than 32 released, and the kernel hung on the H100); DQT:
     * 40 / 232, the producer's dQ warp spilled at 24 */
    static constexpr int REG_PRODUCER = DQT ? 40 : 24, REG_CONSUMER = DQT ? 232 : 240;
    static_assert(REG_PRODUCER * 128 + REG_CONSUMER * 256 == (65536 / THREADS) / 8 * 8 * THREADS,
                  "setmaxnreg split balances the launch allocation");
    static constexpr int NB = D / FW_BOX;           /* 64-column boxes per row */
    static constexpr int STAGES = D * BM <= 64 * 64 ? 3 : D == 128 ? LMK_FLASH_WGMMA_BWD_STAGES128 : 2; /* Q/dO ring depth */
    static_assert(STAGES >= 2 && STAGES <= 3, "a Q/dO ring of 2 or 3 stages");
    static constexpr int KV_TILE = BN * D * 2;
    static constexpr int Q_TILE = BM * D * 2;
    static constexpr int VEC = BM * 4;              /* one tile's lse or D */
    static constexpr int DS_TILE = BN * BM * 2;     /* dSᵀ: 128 keys × BM queries (64-column boxes) */
    static constexpr int OFF_K = 0;
    static constexpr int OFF_V = KV_TILE;
    static constexpr int OFF_Q = 2 * KV_TILE;
    static constexpr int OFF_DO = OFF_Q + STAGES * Q_TILE;
    static constexpr int OFF_DS = OFF_DO + STAGES * Q_TILE;
    /* dSᵀ buffers: 4 at d 128 with DS4 (PINGPONG only), else 2 */
    static constexpr int DS_BUFS = D == 128 && BM == 64 && LMK_FLASH_WGMMA_BWD_DS4 ? 4 : 2;
    static constexpr int DQ_TILE = 64 * 64 * 4;     /* one consumer's float32 dQ tile (DQT) */
    static constexpr int OFF_DQ = OFF_DS + DS_BUFS * DS_TILE; /* two consumers' tiles when DQT */
    static constexpr int OFF_L = OFF_DQ + (DQT ? 2 * DQ_TILE : 0);
    static constexpr int OFF_DD = OFF_L + STAGES * VEC;
    static constexpr int OFF_BAR = OFF_DD + STAGES * VEC; /* kv_full, q_full[S], do_full[S], empty[S] */
    static constexpr int BYTES = OFF_BAR + 8 * (1 + 3 * STAGES);
    static constexpr size_t SMEM = BYTES + 1024;    /* slack to align the base */
    static_assert(SMEM <= 227 * 1024, "a block's shared memory on sm_90");
};

__device__ __forceinline__ void wb_fence_async() /* generic smem writes → wgmma reads */
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ __attribute__((unused)) void wb_st_shared(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ float2 wb_ld_shared2(uint32_t addr)
{
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
    return v;
}
/* four 8 × 8 16-bit matrices to shared memory: lanes 8m…8m+7 address
 * matrix m's rows, register m of lane (g = lane / 4, t = lane % 4) holds its
 * row g, elements 2t, 2t + 1 */
__device__ __forceinline__ __attribute__((unused)) void wb_stmatrix4(uint32_t addr, const uint32_t (&r)[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}
/* *p += v (16-byte aligned) where ok, as a predicated instruction: no
 * branch, so the warp stays converged for the .aligned wgmma and barrier
 * instructions that follow */
__device__ __forceinline__ void wb_red_add4(float *p, float4 v, bool ok)
{
    asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\n"
                 "@q red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(p),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"((int)ok)
                 : "memory");
}
__device__ __forceinline__ __attribute__((unused)) void wb_st_shared2(uint32_t addr, float x, float y)
{
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}
/* global (3-D float32 map, box at column c0, row c1, head c2) += the shared
 * box at src, by the tensor memory accelerator; one bulk group per call */
__device__ __forceinline__ void wb_tma_reduce_add(const CUtensorMap *map, uint32_t src, int c0, int c1,
                                                  int c2)
{
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group "
                 "[%0, {%1, %2, %3}], [%4];\n" ::"l"((uint64_t)map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(src)
                 : "memory");
}
__device__ __forceinline__ void wb_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* the committed bulk groups have read their shared sources */
__device__ __forceinline__ void wb_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
/* the committed bulk groups are complete */
__device__ __forceinline__ void wb_bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void wb_st_shared_f32(uint32_t addr, float v)
{
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}


/* columns 16kq…16kq+15 of an accumulator (this thread's rows g, g+8) → the
 * A fragment of that K step (rounded to T) */
template <typename T, int R>
__device__ __forceinline__ void wb_to_a(uint32_t (&a)[4], const float (&x)[R][4], int kq)
{
    a[0] = fw_pack<T>::pack(x[2 * kq][0], x[2 * kq][1]);
    a[1] = fw_pack<T>::pack(x[2 * kq][2], x[2 * kq][3]);
    a[2] = fw_pack<T>::pack(x[2 * kq + 1][0], x[2 * kq + 1][1]);
    a[3] = fw_pack<T>::pack(x[2 * kq + 1][2], x[2 * kq + 1][3]);
}

/* dk, dv: (B, H, T, D) out; dqacc: (B, H, T, D) float32, zeroed, gets dS·K
 * added (unscaled); Q, K, V, dO through 3-D tensor maps (columns D, rows T,
 * heads B·H; Q/dO boxes 64 × 64 rows, K/V boxes 64 × 128 rows); lse and D
 * through 1-D maps over B·H·T floats (boxes of 64). grid (ceil(T/128), B·H),
 * 384 threads; block x = keys 128x… (the causal blocks with most query tiles
 * first). */
template <typename T, int DR, int D, int BM_, bool SPLITN, bool DQT, bool ORD, bool PP>
__global__ void __launch_bounds__(wb_plan<D, BM_, DQT>::THREADS, 1)
    flash_bwd_wgmma_kernel(const __grid_constant__ CUtensorMap tmq,
                           const __grid_constant__ CUtensorMap tmk,
                           const __grid_constant__ CUtensorMap tmv,
                           const __grid_constant__ CUtensorMap tmdo,
                           const __grid_constant__ CUtensorMap tmdq,
                           const float *__restrict__ lse, const float *__restrict__ dsum,
                           T *dk, T *dv, float *dqacc,
                           int Tn, int causal, float scale_log2, float scale)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using P = wb_plan<D, BM_, DQT>;
    constexpr int S = P::STAGES, NB = P::NB, BN = P::BN, BM = P::BM;
    /* dQ per consumer: BM 128: queries 64c…, all D columns (split M); BM 64:
     * SPLITN the D/2 columns c·D/2…, else all D columns over its own keys */
    constexpr bool SPLITM = BM == 128;
    constexpr int NQ = SPLITM ? D : SPLITN ? D / 2 : D;
    static_assert(!DQT || NQ == 64, "the TMA dQ path takes 64 x 64 tiles per consumer");
    /* DR < D (PAD_DIMS): columns DR… of the shared Q, K, V, dO tiles are
     * zeros; dK, dV, dQ columns past DR are neither stored nor added */
    static_assert(DR == D || (DQT && DR % 16 == 0 && DR < D), "padded head dims: the TMA dQ path");
    /* named barriers: 1 both consumers' dSᵀ written; 2 + c consumer c's;
     * DQT: 4 + c consumer c's dQ tile written ("full"), 6 + c read by the
     * bulk reduction ("empty"), each among that consumer and the dQ warp */
    constexpr int BAR_DQ_FULL = 4, BAR_DQ_EMPTY = 6, DQ_THREADS = 128 + 32;
    /* PP: 8 + 2c + p consumer c's half of dSᵀ buffer p written (arrived by
     * c, waited by the other); 12 + 2c + p buffer p read by the other
     * consumer's dQ (arrived by it, waited by c before writing its half) */
    constexpr int BAR_DS_FULL = 8, BAR_DS_FREE = 12;
    /* PP: dSᵀ buffers, tile i's in buffer i % NDS; NDS 4 (DS4): ids 8 + 4c +
     * p "written", no "read" barriers (see LMK_FLASH_WGMMA_BWD_DS4) */
    constexpr int NDS = PP ? P::DS_BUFS : 2;
    static_assert(NDS == 2 || (NDS == 4 && PP), "four dS buffers: the decoupled consumers");
    /* this kernel's bit in the knobs' masks (1: d 64 and 32, 2: d 128 and 80) */
    constexpr int KBIT = D == 64 ? 1 : 2;
    constexpr bool BOX8 = DQT && (LMK_FLASH_WGMMA_BWD_DQ_BOX8 & KBIT) != 0;
    constexpr bool DNG = (LMK_FLASH_WGMMA_BWD_DNEG & KBIT) != 0;
    constexpr bool NOSEL = !BOX8 && (LMK_FLASH_WGMMA_BWD_DQ_NOSEL & KBIT) != 0;
    constexpr bool LA_ON = (LMK_FLASH_WGMMA_BWD_LOOKAHEAD & KBIT) != 0;
    constexpr bool LFS = PP && !LA_ON && (LMK_FLASH_WGMMA_BWD_LATE_FENCE_DS & KBIT) != 0;
    constexpr bool LFQ = PP && !LA_ON && (LMK_FLASH_WGMMA_BWD_LATE_FENCE_DQ & KBIT) != 0;
    constexpr bool ERL = PP && !LA_ON && (LMK_FLASH_WGMMA_BWD_EARLY_RELEASE & KBIT) != 0;
    static_assert(!PP || (DQT && !ORD), "the decoupled consumers: the TMA dQ path, their own order");    extern __shared__ __align__(1024) unsigned char smraw[];
    const uint32_t base = (saddr(smraw) + 1023u) & ~1023u;
    const uint32_t sK = base + P::OFF_K, sV = base + P::OFF_V;
    const uint32_t kv_full = base + P::OFF_BAR;
    auto q_full = [&](int s) { return kv_full + 8u * (1 + s); };
    auto do_full = [&](int s) { return kv_full + 8u * (1 + S + s); };
    auto empty = [&](int s) { return kv_full + 8u * (1 + 2 * S + s); };
    auto sQ = [&](int s) { return base + P::OFF_Q + (uint32_t)(s * P::Q_TILE); };
    auto sdO = [&](int s) { return base + P::OFF_DO + (uint32_t)(s * P::Q_TILE); };
    auto sL = [&](int s) { return base + P::OFF_L + (uint32_t)(s * P::VEC); };
    auto sDD = [&](int s) { return base + P::OFF_DD + (uint32_t)(s * P::VEC); };

    const int k0 = (LMK_FLASH_WGMMA_BWD_HEAVY_FIRST ? blockIdx.y : blockIdx.x) * BN;
    const int bh = LMK_FLASH_WGMMA_BWD_HEAVY_FIRST ? blockIdx.x : blockIdx.y;
    const int qs = causal ? k0 : 0, nq = (Tn - qs + BM - 1) / BM;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        mbar_init(kv_full, 1);
#pragma unroll
        for (int s = 0; s < S; s++) {
            mbar_init(q_full(s), 33); /* the TMA thread's expect_tx + the warp's 32 lanes */
            mbar_init(do_full(s), 33);
            mbar_init(empty(s), 8); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) { /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(P::REG_PRODUCER) : "memory");
        /* warp 0: lane 0 issues the TMA copies; every lane copies BM/32 of
         * the tile's lse and D values (0 past T) and arrives */
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            const float *lrow = lse + (size_t)bh * Tn, *drow = dsum + (size_t)bh * Tn;
            if (lane == 0) {
                mbar_expect_tx(kv_full, 2 * P::KV_TILE);
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    tma_load(sK + b * BN * 128, &tmk, kv_full, FW_BOX * b, k0, bh);
                    tma_load(sV + b * BN * 128, &tmv, kv_full, FW_BOX * b, k0, bh);
                }
            }
            for (int i = 0; i < nq; i++) {
                const int s = i % S, q0 = qs + i * BM;
                mbar_wait(empty(s), ((i / S) & 1) ^ 1); /* a fresh barrier passes parity 1 */
                if (lane == 0) {
                    mbar_expect_tx(q_full(s), P::Q_TILE);
#pragma unroll
                    for (int b = 0; b < NB; b++)
                        tma_load(sQ(s) + b * BM * 128, &tmq, q_full(s), FW_BOX * b, q0, bh);
                }
#pragma unroll
                for (int r = lane; r < BM; r += 32) /* LEAN: −lse·log2 e, the exponent's bias */
                    wb_st_shared_f32(sL(s) + 4 * r,
                                     q0 + r < Tn ? __ldg(lrow + q0 + r) * (LEAN ? -WB_LOG2E : 1.f) : 0.f);
                mbar_arrive(q_full(s));
                if (lane == 0) {
                    mbar_expect_tx(do_full(s), P::Q_TILE);
#pragma unroll
                    for (int b = 0; b < NB; b++)
                        tma_load(sdO(s) + b * BM * 128, &tmdo, do_full(s), FW_BOX * b, q0, bh);
                }
#pragma unroll
                for (int r = lane; r < BM; r += 32)
                    wb_st_shared_f32(sDD(s) + 4 * r, /* DNG: −D, the dPᵀ accumulator's start */
                                     q0 + r < Tn ? __ldg(drow + q0 + r) * (DNG ? -1.f : 1.f) : 0.f);
                mbar_arrive(do_full(s));
            }
        }
        if constexpr (DQT) {
            /* warp 1: for each query tile and consumer, once its dQ tile
             * is in shared memory, add it to the workspace (two 32-column
             * boxes) and hand the buffer back once read */
            const int warp = threadIdx.x / 32; /* PP: warps 1, 2 for consumers 0, 1 */
            if (PP ? warp == 1 || warp == 2 : warp == 1) {
                const int lane = threadIdx.x & 31;
                const int c_lo = PP ? warp - 1 : 0, c_hi = PP ? warp : 2;
                for (int q0 = qs; q0 < Tn; q0 += BM) {
                    for (int c = c_lo; c < c_hi; c++) {
                        bar_sync_n(BAR_DQ_FULL + c, DQ_THREADS);
                        if (lane == 0) {
                            const uint32_t src = base + P::OFF_DQ + (uint32_t)(c * P::DQ_TILE);
                            const int row = SPLITM ? q0 + 64 * c : q0, col = SPLITM ? 0 : 64 * c;
                            /* BOX8: eight boxes of 8 columns (2 KB each); else two of 32 */
                            constexpr int NBOX = BOX8 ? 8 : 2, BOXC = 64 / NBOX;
#pragma unroll
                            for (int b = 0; b < NBOX; b++)
                                if (DR == D || col + BOXC * b < DR) /* (the map clips a box's columns past DR) */
                                    wb_tma_reduce_add(&tmdq, src + (uint32_t)(b * (P::DQ_TILE / NBOX)),
                                                      col + BOXC * b, row, bh);
                            wb_bulk_commit();
                            wb_bulk_wait_read();
                        }
                        __syncwarp();
                        if (q0 + BM < Tn) /* not the last tile */
                            bar_arrive_n(BAR_DQ_EMPTY + c, DQ_THREADS);
                    }
                }
                if (lane == 0)
                    wb_bulk_wait();
            }
        }
        return;
    }

    /* consumers: c = 0, 1 own keys k0+64c…; warp w of the consumer its rows
     * 16w…, this lane keys key0 and key0 + 8 (accumulator layout) */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(P::REG_CONSUMER) : "memory");
    constexpr bool DSC = (LMK_FLASH_WGMMA_BWD_DESC & (D == 64 ? 1 : 2)) != 0;
    /* DSC: c from lane 0, so that the compiler knows it warp-uniform and the
     * descriptors built from it stay in uniform registers */
    const int c = DSC ? __shfl_sync(0xffffffffu, wg - 1, 0) : wg - 1;
    const int w = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int wkey = k0 + 64 * c + 16 * w, key0 = wkey + g;
    const uint32_t kc = sK + 64 * c * 128, vc = sV + 64 * c * 128; /* this consumer's K, V rows */

    float adk[D / 8][4], adv[D / 8][4];
#pragma unroll
    for (int j = 0; j < D / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            adk[j][e] = adv[j][e] = 0.f;

    /* dQ_tile (64 queries from rq0 × NQ columns from cq0) = dS·K from the
     * dSᵀ buffer at sdsb (both consumers' keys), for the TMA path (SPLITM:
     * this consumer's 64 queries; SPLITN: its D/2 columns) */
    /* DSC: dQ's B operand (K, this consumer's columns), loop-invariant */
    const uint64_t dsc_kq = sw128_desc(sK + (SPLITM ? 0 : D == 64 ? 64 * c : c * BN * 128), BN * 128);
    auto mma_dq = [&](float (&adq)[NQ / 8][4], uint32_t sdsb) {
        const uint64_t dsc_ds = sw128_desc(sdsb + (SPLITM ? c * BN * 128 : 0), BN * 128);
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            if constexpr (SPLITM) {
                wg_mma_ss<T>::template ss64<1, 1>(
                    adq,
                    DSC ? sw128_desc_add(dsc_ds, kk * 16 * 128)
                        : sw128_desc(sdsb + c * BN * 128 + kk * 16 * 128, BN * 128),
                    DSC ? sw128_desc_add(dsc_kq, kk * 16 * 128) : sw128_desc(sK + kk * 16 * 128, BN * 128),
                    kk > 0);
            } else {
                const uint64_t da = DSC ? sw128_desc_add(dsc_ds, kk * 16 * 128)
                                        : sw128_desc(sdsb + kk * 16 * 128, BN * 128);
                const uint64_t db =
                    DSC ? sw128_desc_add(dsc_kq, kk * 16 * 128)
                        : sw128_desc(sK + kk * 16 * 128 + (D == 64 ? 64 * c : c * BN * 128), BN * 128);
                if constexpr (NQ == 32)
                    wg_mma_ss<T>::template ss32<1, 1>(adq, da, db, kk > 0);
                else
                    wg_mma_ss<T>::template ss64<1, 1>(adq, da, db, kk > 0);
            }
        }
    };
    /* DQT: this consumer's dQ tile of query tile j to its shared buffer for
     * the dQ warp. 64 × 64 (rows 16w + g (+8), columns 8j + 2t (+1)) in two
     * 32-column boxes, 128-byte swizzle: 16-byte chunk (column % 32 / 4) ^
     * (row % 8) of the row's 128 bytes. Store k of a lane writes fragment
     * k, or k ^ 2 where g is odd: each half-warp's 8-byte stores then cover
     * 32 distinct banks (with k for all, rows g and g ^ 1 hit the same two
     * chunks) */
    /* the dQ tile's stores visible to the bulk reduction, the dQ warp told */
    auto dq_publish = [&]() {
        wb_fence_async();
        bar_arrive_n(BAR_DQ_FULL + c, DQ_THREADS);
    };
    /* publish 0: the caller runs dq_publish later (LFQ) */
    auto dq_to_shared = [&](const float (&adq)[NQ / 8][4], int j, bool publish = true) {
        if (j > 0)
            bar_sync_n(BAR_DQ_EMPTY + c, DQ_THREADS); /* the last tile's read */
        if constexpr (BOX8) {
            /* box k = columns 8k…8k+7: 64 rows of 32 bytes; row 16w + g
             * (+8), bytes 8t… */
            const uint32_t r0 = base + P::OFF_DQ + (uint32_t)(c * P::DQ_TILE) + (uint32_t)(16 * w + g) * 32 + 8 * t;
#pragma unroll
            for (int k = 0; k < NQ / 8; k++) {
                wb_st_shared2(r0 + (uint32_t)(k * 2048), adq[k][0], adq[k][1]);
                wb_st_shared2(r0 + (uint32_t)(k * 2048 + 8 * 32), adq[k][2], adq[k][3]);
            }
            if (publish)
                dq_publish();
            return;
        }
        const uint32_t r0 = base + P::OFF_DQ + (uint32_t)(c * P::DQ_TILE) +
                            (uint32_t)(16 * w + g) * 128 + 8 * (t & 1);
        const bool godd = !NOSEL && (g & 1);
#pragma unroll
        for (int k = 0; k < NQ / 8; k++) {
            const int f = godd ? k ^ 2 : k; /* same box: k / 4 == f / 4 */
            const uint32_t a = r0 + (uint32_t)((k / 4) * (P::DQ_TILE / 2)) +
                               (uint32_t)(((2 * (f % 4) + (t >> 1)) ^ g) << 4);
            wb_st_shared2(a, godd ? adq[k ^ 2][0] : adq[k][0], godd ? adq[k ^ 2][1] : adq[k][1]);
            wb_st_shared2(a + 8 * 128, godd ? adq[k ^ 2][2] : adq[k][2], godd ? adq[k ^ 2][3] : adq[k][3]);
        }
        if (publish)
            dq_publish();
    };

    /* LA: Sᵀ of tile i + 1 is issued before dQ of tile i − 1 is waited for
     * (st_la, written by that wgmma across the loop's turn) */
    constexpr bool LA = PP && (LMK_FLASH_WGMMA_BWD_LOOKAHEAD & (D == 64 ? 1 : 2)) != 0;
    float st_la[BM / 8][4];
    auto ss_bm = [&](float (&d)[BM / 8][4], uint64_t da, uint64_t db, int scale_d) {
        if constexpr (BM == 64)
            wg_mma_ss<T>::template ss64<0, 0>(d, da, db, scale_d);
        else
            wg_mma_ss<T>::template ss128<0, 0>(d, da, db, scale_d);
    };
    /* d = Sᵀ = K_c·Qᵀ of the tile in stage s_ (fenced, committed) */
    /* DSC: K_c's and V_c's descriptors (A of Sᵀ, dPᵀ), loop-invariant */
    const uint64_t dsc_k = sw128_desc(kc, 16), dsc_v = sw128_desc(vc, 16);
    auto mma_s = [&](float (&d)[BM / 8][4], int s_) {
        const uint64_t dsc_q = sw128_desc(sQ(s_), 16);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < DR / 16; kk++) {
            const uint32_t oa = (kk / 4) * BN * 128 + (kk % 4) * 32, ob = (kk / 4) * BM * 128 + (kk % 4) * 32;
            ss_bm(d, DSC ? sw128_desc_add(dsc_k, oa) : sw128_desc(kc + oa, 16),
                  DSC ? sw128_desc_add(dsc_q, ob) : sw128_desc(sQ(s_) + ob, 16), kk > 0);
        }
        wg_commit();
    };

    mbar_wait(kv_full, 0);
    __syncwarp();
    if constexpr (LA) { /* Sᵀ of the first tile (the block has at least one) */
        mbar_wait(q_full(0), 0);
        __syncwarp();
        mma_s(st_la, 0);
    }
    int i = 0, q0 = qs;
    for (; q0 < Tn; i++, q0 += BM) { /* i < nq; q0 = qs + i·BM */
        const int s = i % S;
        const uint32_t ph = (i / S) & 1;
        const uint32_t sds = base + P::OFF_DS + (uint32_t)((i & (NDS - 1)) * P::DS_TILE);
        float st_own[BM / 8][4], dpt[BM / 8][4];
        float (&st)[BM / 8][4] = *(LA ? &st_la : &st_own);
        uint32_t pa[BM / 16][4], dsa[BM / 16][4];

        /* DNG: dPᵀ's accumulator starts at −D of this thread's columns, read
         * while no wgmma is in flight (after the Sᵀ issue, ptxas waits for
         * Sᵀ before the loads: C7517) */
        auto load_neg_d = [&]() {
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                const float2 a = wb_ld_shared2(sDD(s) + 4 * (8 * j + 2 * t));
                const float2 b = wb_ld_shared2(sDD(s) + 4 * (8 * j + 2 * t));
                dpt[j][0] = a.x;
                dpt[j][1] = a.y;
                dpt[j][2] = b.x;
                dpt[j][3] = b.y;
            }
        };
        if constexpr (!LA) {
            mbar_wait(q_full(s), ph);
            __syncwarp(); /* the spin loops may leave lanes apart: .aligned ops follow */
            if constexpr (DNG) {
                mbar_wait(do_full(s), ph);
                __syncwarp();
                load_neg_d();
            }
            mma_s(st, s); /* Sᵀ = K_c·Qᵀ */
        }
        if constexpr (!DNG || LA) {
            mbar_wait(do_full(s), ph);
            __syncwarp();
        }
        if constexpr (DNG && LA)
            load_neg_d();
        wg_fence();
        {
            const uint64_t dsc_do = sw128_desc(sdO(s), 16);
#pragma unroll
            for (int kk = 0; kk < DR / 16; kk++) { /* dPᵀ = V_c·dOᵀ (DNG: added to −D) */
                const uint32_t oa = (kk / 4) * BN * 128 + (kk % 4) * 32, ob = (kk / 4) * BM * 128 + (kk % 4) * 32;
                ss_bm(dpt, DSC ? sw128_desc_add(dsc_v, oa) : sw128_desc(vc + oa, 16),
                      DSC ? sw128_desc_add(dsc_do, ob) : sw128_desc(sdO(s) + ob, 16), DNG || kk > 0);
            }
        }
        wg_commit();
        if constexpr (LFQ) { /* dQ of tile i − 2, stored at the end of tile i − 1 */
            if (i >= 2)
                dq_publish();
        }

        /* the warp's keys reach past a query of the tile, or the tile past T */
        const bool mask = q0 + BM > Tn || (causal && wkey + 15 > q0); /* warp-uniform */
        /* PRE: this thread's columns 8j + 2t (+1) of the tile's −lse·log2 e
         * (lv) and D (dv_) values, read before the waits */
        constexpr bool PRE = (LMK_FLASH_WGMMA_BWD_PRELOAD & (D == 64 ? 1 : 2)) != 0;
        float2 lv[PRE ? BM / 8 : 1], dv_[PRE ? BM / 8 : 1];
        if constexpr (PRE) {
#pragma unroll
            for (int j = 0; j < BM / 8; j++)
                lv[j] = wb_ld_shared2(sL(s) + 4 * (8 * j + 2 * t));
        }
        wg_wait<1>();
        pin(st);
        /* Pᵀ over the tile; MASKING 0: no element masked, 1: the mask
         * applied, 2: applied where mask says (one code path for both) */
        auto p_tile = [&](auto masking) {
            constexpr int MASKING = decltype(masking)::value;
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                const float2 l = PRE ? lv[PRE ? j : 0] : wb_ld_shared2(sL(s) + 4 * (8 * j + 2 * t)); /* LEAN: −lse·log2 e */
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float bias = LEAN ? (e & 1 ? l.y : l.x) : -(e & 1 ? l.y : l.x) * WB_LOG2E;
                    float p = fw_exp2(fmaf(st[j][e], scale_log2, bias));
                    if (MASKING == 1 || (MASKING == 2 && mask)) {
                        const int col = q0 + 8 * j + 2 * t + (e & 1), key = key0 + 8 * (e >> 1);
                        p = (col >= Tn) | ((causal != 0) & (key > col)) ? 0.f : p;
                    }
                    st[j][e] = p;
                }
            }
        };
        if constexpr (LEAN) { /* two copies of the loop: the unmasked one has no mask arithmetic */
            if (mask)
                p_tile(std::integral_constant<int, 1>{});
            else
                p_tile(std::integral_constant<int, 0>{});
        } else {
            p_tile(std::integral_constant<int, 2>{});
        }
        if constexpr (PRE && !DNG) {
#pragma unroll
            for (int j = 0; j < BM / 8; j++)
                dv_[j] = wb_ld_shared2(sDD(s) + 4 * (8 * j + 2 * t));
        }
        wg_wait<0>();
        pin(dpt);
        /* dSᵀ = Pᵀ∘(dPᵀ − D); Pᵀ and dSᵀ packed 16 columns at a time (their
         * float32 registers die as the fragments fill) */
#pragma unroll
        for (int kq = 0; kq < BM / 16; kq++) {
#pragma unroll
            for (int j = 2 * kq; j < 2 * kq + 2; j++) {
                if constexpr (DNG) { /* dpt holds dPᵀ − D */
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        dpt[j][e] = st[j][e] * dpt[j][e];
                } else {
                    const float2 dd = PRE ? dv_[PRE ? j : 0] : wb_ld_shared2(sDD(s) + 4 * (8 * j + 2 * t));
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        dpt[j][e] = st[j][e] * (dpt[j][e] - (e & 1 ? dd.y : dd.x));
                }
            }
            wb_to_a<T>(pa[kq], st, kq);
            wb_to_a<T>(dsa[kq], dpt, kq);
        }
        /* acc (64 keys × D) += a (registers: 64 keys × BM queries, BM/16
         * k-steps) · the BM × D tile at tile (shared, MN-major; m64nDk16) */
        auto mma_rs = [&](float (&acc)[D / 8][4], const uint32_t (&a)[BM / 16][4], uint32_t tile) {
            const uint64_t dsc_t = sw128_desc(tile, BM * 128);
#pragma unroll
            for (int kq = 0; kq < BM / 16; kq++) {
                const uint64_t desc =
                    DSC ? sw128_desc_add(dsc_t, kq * 16 * 128) : sw128_desc(tile + kq * 16 * 128, BM * 128);
                if constexpr (D == 64)
                    wg_mma<T>::rs64(acc, a[kq], desc);
                else
                    wg_mma<T>::rs128(acc, a[kq], desc);
            }
        };
        /* dV_c += Pᵀ·dO, dK_c += dSᵀ·Q */
        auto mma_dv = [&]() { mma_rs(adv, pa, sdO(s)); };
        auto mma_dk = [&]() { mma_rs(adk, dsa, sQ(s)); };
        /* after the wait for dV and dK: their accumulators and A operands are
         * settled, and the stage's Q and dO go back to the producer */
        auto release_stage = [&]() {
            pin(adk);
            pin(adv);
            pin(pa);
            pin(dsa);
            if (lane == 0)
                mbar_arrive(empty(s));
        };
        if constexpr (ORD) { /* dV runs while dSᵀ goes to shared memory */
            wg_fence();
            mma_dv();
            wg_commit();
        }
        /* dSᵀ rows 64c + 16w + g (+8) to the swizzled tile: query column q in
         * box q / 64, 16-byte chunk (q % 64 / 8) ^ (row % 8) of the row's 128 bytes */
        if constexpr (PP) {
            if (NDS == 2 && i >= 2) /* the other consumer's dQ of tile i − 2 has read this buffer */
                bar_sync_n(BAR_DS_FREE + 2 * c + (i & 1), 256);
        }
        if constexpr (LMK_FLASH_WGMMA_BWD_STMATRIX) {
            /* one stmatrix per k-step: matrix m = lane / 8 (dsa[kq][m]) is rows
             * +8·(m & 1), chunk +(m >> 1); this lane addresses its row lane % 8 */
            const int m = lane >> 3, r = lane & 7;
            const uint32_t r0 = sds + (uint32_t)(64 * c + 16 * w + 8 * (m & 1) + r) * 128;
#pragma unroll
            for (int kq = 0; kq < BM / 16; kq++)
                wb_stmatrix4(r0 + (uint32_t)((kq / 4) * BN * 128) +
                                 (uint32_t)(((2 * (kq % 4) + (m >> 1)) ^ r) << 4),
                             dsa[kq]);
        } else {
            const uint32_t r0 = sds + (uint32_t)(64 * c + 16 * w + g) * 128 + 4 * t;
#pragma unroll
            for (int kq = 0; kq < BM / 16; kq++)
#pragma unroll
                for (int hb = 0; hb < 2; hb++) {
                    const uint32_t off = (uint32_t)((kq / 4) * BN * 128) +
                                         (uint32_t)(((2 * (kq % 4) + hb) ^ g) << 4);
                    wb_st_shared(r0 + off, dsa[kq][2 * hb]);
                    wb_st_shared(r0 + 8 * 128 + off, dsa[kq][2 * hb + 1]);
                }
        }
        if constexpr (LFS) { /* dV, dK first (they do not read dSᵀ from shared memory) */
            __syncwarp();
            wg_fence();
            mma_dv();
            mma_dk();
            wg_commit();
        }
        wb_fence_async();
        __syncwarp();
        if constexpr (PP) {
            bar_arrive_n(BAR_DS_FULL + NDS * c + (i & (NDS - 1)), 256); /* this half of dSᵀ of tile i written */
            /* dV, dK of tile i, then dQ of tile i − 1 (both halves of its dSᵀ
             * written: the other consumer may run up to a tile apart) */
            if constexpr (!LFS) {
                wg_fence();
                mma_dv();
                mma_dk();
                wg_commit();
            }
            /* at i = 0 the dQ MMA runs on the unwritten buffer 1 and its
             * result is dropped: no wgmma under a branch (ptxas then
             * serialised them and spilled) */
            float adq[NQ / 8][4];
            if (i > 0)
                bar_sync_n(BAR_DS_FULL + NDS * (1 - c) + ((i - 1) & (NDS - 1)), 256);
            wg_fence();
            mma_dq(adq, base + P::OFF_DS + (uint32_t)(((i - 1) & (NDS - 1)) * P::DS_TILE));
            wg_commit();
            if constexpr (LA) {
                wg_wait<1>(); /* dV, dK done: the stage's Q and dO are free */
                release_stage();
                /* Sᵀ of tile i + 1; past the last tile on the stale stage, result
                 * unused (no wgmma under a branch) */
                if (q0 + BM < Tn)
                    mbar_wait(q_full((i + 1) % S), ((i + 1) / S) & 1);
                __syncwarp();
                mma_s(st, (i + 1) % S);
                wg_wait<1>(); /* dQ of tile i − 1 done */
                pin(adq);
            } else if constexpr (ERL) {
                wg_wait<1>(); /* dV, dK done: the stage's Q and dO are free */
                release_stage();
                wg_wait<0>();
                pin(adq);
                __syncwarp();
            } else {
                wg_wait<0>();
                pin(adq);
                release_stage();
                __syncwarp();
            }
            if (i > 0) {
                if (NDS == 2 && q0 + BM < Tn) /* tile i − 1 + 2 exists: hand its buffer back */
                    bar_arrive_n(BAR_DS_FREE + 2 * (1 - c) + ((i - 1) & 1), 256);
                dq_to_shared(adq, i - 1, !LFQ);
            }
            if constexpr (LA) { /* no wgmma in flight across the loop's turn: ptxas
                                   serialises them otherwise (C7514) */
                wg_wait<0>();
                pin(st);
            }
            continue;
        }

        if constexpr (!ORD) {
            wg_fence();
            mma_dv();
            mma_dk();
            wg_commit();
        }

        /* dQ_tile (64 queries from rq0 × NQ columns from cq0) = dS·K */
        float adq[NQ / 8][4];
        int cq0 = 0, rq0 = 0; /* the red path's offsets (DQT: the dQ warp's) */
        if constexpr (SPLITM) {
            bar_sync_n(1, 256); /* both consumers' dSᵀ written */
            rq0 = 64 * c;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
                wg_mma_ss<T>::template ss64<1, 1>(
                    adq, sw128_desc(sds + c * BN * 128 + kk * 16 * 128, BN * 128),
                    sw128_desc(sK + kk * 16 * 128, BN * 128), kk > 0);
        } else if constexpr (SPLITN) {
            bar_sync_n(1, 256); /* both consumers' dSᵀ written */
            cq0 = c * NQ;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                const uint64_t da = sw128_desc(sds + kk * 16 * 128, BN * 128);
                const uint64_t db = sw128_desc(sK + kk * 16 * 128 + (D == 64 ? 64 * c : c * BN * 128),
                                               BN * 128);
                if constexpr (NQ == 32)
                    wg_mma_ss<T>::template ss32<1, 1>(adq, da, db, kk > 0);
                else
                    wg_mma_ss<T>::template ss64<1, 1>(adq, da, db, kk > 0);
            }
        } else {
            bar_sync_n(2 + c, 128); /* this consumer's dSᵀ written */
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 64 / 16; kk++) {
                const uint64_t da = sw128_desc(sds + (64 * c + kk * 16) * 128, BN * 128);
                const uint64_t db = sw128_desc(kc + kk * 16 * 128, BN * 128);
                if constexpr (NQ == 64)
                    wg_mma_ss<T>::template ss64<1, 1>(adq, da, db, kk > 0);
                else
                    wg_mma_ss<T>::template ss128<1, 1>(adq, da, db, kk > 0);
            }
        }
        wg_commit();
        if constexpr (ORD) { /* dK runs during the dQ epilogue (its registers were fenced above) */
            mma_dk();
            wg_commit();
            wg_wait<1>(); /* dV and dQ done */
        } else {
            wg_wait<0>();
            release_stage();
            __syncwarp();
        }
        pin(adq);

        if constexpr (DQT) {
            dq_to_shared(adq, i);
            (void)cq0;
            (void)rq0;
        } else {
            /* lane pairs (t, t^1) swap halves: even t adds row g columns
             * 8j+2t…+3, odd t row g+8 columns 8j+2t−2…+1 */
            const bool odd = t & 1;
            const int row = q0 + rq0 + 16 * w + g + (odd ? 8 : 0);
            float *dst = dqacc + ((size_t)bh * Tn + row) * D + cq0 + 2 * (t & ~1);
#pragma unroll
            for (int j = 0; j < NQ / 8; j++) {
                const float x = odd ? adq[j][0] : adq[j][2], y = odd ? adq[j][1] : adq[j][3];
                const float rx = __shfl_xor_sync(0xffffffffu, x, 1);
                const float ry = __shfl_xor_sync(0xffffffffu, y, 1);
                const float4 v = odd ? make_float4(rx, ry, adq[j][2], adq[j][3])
                                     : make_float4(adq[j][0], adq[j][1], rx, ry);
                wb_red_add4(dst + 8 * j, v, row < Tn);
            }
        }
        if constexpr (ORD) {
            wg_wait<0>(); /* dK done: the stage's Q and dO are free */
            release_stage();
            __syncwarp();
        }
    }

    if constexpr (LA) /* (the first tile's Sᵀ, were the loop not entered) */
        wg_wait<0>();
    if constexpr (PP) { /* dQ of the last tile */
        if (LFQ && i >= 2) /* the tile before it, stored in the loop's last turn */
            dq_publish();
        if (i > 0) {
            float adq[NQ / 8][4];
            bar_sync_n(BAR_DS_FULL + NDS * (1 - c) + ((i - 1) & (NDS - 1)), 256);
            wg_fence();
            mma_dq(adq, base + P::OFF_DS + (uint32_t)(((i - 1) & (NDS - 1)) * P::DS_TILE));
            wg_commit();
            wg_wait<0>();
            pin(adq);
            dq_to_shared(adq, i - 1);
        }
    }

    /* dK = scale·dK_c, dV_c: rows key0, key0 + 8 */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int key = key0 + 8 * h;
        if (key >= Tn)
            continue;
        const size_t r = ((size_t)bh * Tn + key) * DR;
#pragma unroll
        for (int j = 0; j < DR / 8; j++) {
            *reinterpret_cast<uint32_t *>(dk + r + 8 * j + 2 * t) =
                fw_pack<T>::pack(adk[j][2 * h] * scale, adk[j][2 * h + 1] * scale);
            *reinterpret_cast<uint32_t *>(dv + r + 8 * j + 2 * t) =
                fw_pack<T>::pack(adv[j][2 * h], adv[j][2 * h + 1]);
        }
    }
#endif
}

/* dq (n elements) = T(scale · dqacc); n a multiple of 4, both 16-byte aligned */
template <typename T>
__global__ void flash_bwd_wgmma_dq_kernel(T *dq, const float *dqacc, size_t n, float scale)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 4; i += stride) {
        const float4 a = reinterpret_cast<const float4 *>(dqacc)[i];
        uint2 o;
        o.x = fw_pack<T>::pack(a.x * scale, a.y * scale);
        o.y = fw_pack<T>::pack(a.z * scale, a.w * scale);
        reinterpret_cast<uint2 *>(dq)[i] = o;
    }
}

/* map over the float32 workspace (B·H heads, T rows, d columns), boxes of
 * 32 columns × 64 rows, 128-byte swizzle (box8: 8 columns × 64 rows,
 * unswizzled): the dQ warp's bulk reductions */
bool wb_map_dq(fw_encode_fn enc, CUtensorMap *map, float *dqacc, const lmk_attn_shape *s, bool box8)
{
    const cuuint64_t dims[3] = {(cuuint64_t)s->d, (cuuint64_t)s->T, (cuuint64_t)s->B * s->H};
    const cuuint64_t strides[2] = {(cuuint64_t)s->d * 4, (cuuint64_t)s->T * s->d * 4};
    const cuuint32_t box[3] = {box8 ? 8u : 32u, 64, 1}, es[3] = {1, 1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, dqacc, dims, strides, box, es,
               CU_TENSOR_MAP_INTERLEAVE_NONE, box8 ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The kernel's head dim for head dim DR: 64 (DR 32, 64) or 128 (DR 80, 128) */
constexpr int wb_dpad(int dr) { return dr <= 64 ? 64 : 128; }

template <typename T, int DR>
int launch(void *dq, void *dk, void *dv, float *dqacc, const float *dsum, const void *dout,
           const void *q, const void *k, const void *v, const float *lse, const lmk_attn_shape *s,
           cudaStream_t st)
{
    constexpr int D = wb_dpad(DR);
    constexpr int BM = D == 64 ? LMK_FLASH_WGMMA_BWD_D64_BM : 64;
    constexpr bool SPLITN = LMK_FLASH_WGMMA_BWD_SPLITN != 0;
    /* the TMA dQ path where each consumer's dQ tile is 64 × 64 */
    constexpr bool DQT = LMK_FLASH_WGMMA_BWD_DQ_TMA != 0 && (BM == 128 || (SPLITN && D == 128));
    using P = wb_plan<D, BM, DQT>;
    const fw_encode_fn enc = fw_encoder();
    const size_t rows = (size_t)s->B * s->H * s->T;
    CUtensorMap mq, mk, mv, mdo, mdq = {}; /* mdq: DQT only */
    if (!enc || !fw_map(enc, &mq, q, s, P::BM) || !fw_map(enc, &mk, k, s, P::BN) ||
        !fw_map(enc, &mv, v, s, P::BN) || !fw_map(enc, &mdo, dout, s, P::BM) ||
        (DQT && !wb_map_dq(enc, &mdq, dqacc, s, (LMK_FLASH_WGMMA_BWD_DQ_BOX8 & (D == 64 ? 1 : 2)) != 0)))
        return LMK_DEVICE;
    constexpr bool PP = DQT && LMK_FLASH_WGMMA_BWD_PINGPONG != 0;
    auto kern = flash_bwd_wgmma_kernel<T, DR, D, BM, SPLITN, DQT, LMK_FLASH_WGMMA_BWD_ORDER != 0 && !PP, PP>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)P::SMEM) !=
        cudaSuccess)
        return LMK_DEVICE;
    const float scale = 1.f / sqrtf((float)DR);
    const unsigned key_blocks = (unsigned)((s->T + P::BN - 1) / P::BN), heads = (unsigned)(s->B * s->H);
    const dim3 grid = LMK_FLASH_WGMMA_BWD_HEAVY_FIRST ? dim3(heads, key_blocks) : dim3(key_blocks, heads);
    kern<<<grid, P::THREADS, P::SMEM, st>>>(mq, mk, mv, mdo, mdq, lse, dsum, (T *)dk, (T *)dv, dqacc,
                                            s->T, s->causal, scale * WB_LOG2E, scale);
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;
    const size_t n = rows * DR, blocks = (n / 4 + 255) / 256;
    flash_bwd_wgmma_dq_kernel<T><<<(unsigned)(blocks < 132 * 16 ? blocks : 132 * 16), 256, 0, st>>>(
        (T *)dq, dqacc, n, scale);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

} // namespace

extern "C" int lmk_flash_wgmma_bwd_usable(const lmk_attn_shape *s)
{
    /* padded dims: the TMA dQ path's 64 x 64 tiles (d 32: 128-query tiles;
     * d 80: dQ split by columns) */
    const bool pad_ok =
        LMK_FLASH_WGMMA_BWD_DQ_TMA && s &&
        ((s->d == 32 && (LMK_FLASH_WGMMA_BWD_PAD_DIMS & 2) && LMK_FLASH_WGMMA_BWD_D64_BM == 128) ||
         (s->d == 80 && (LMK_FLASH_WGMMA_BWD_PAD_DIMS & 8) && LMK_FLASH_WGMMA_BWD_SPLITN));
    if (!LMK_FLASH_WGMMA_BWD || !s || !s->atomic_dq || (s->d != 64 && s->d != 128 && !pad_ok) ||
        (s->dtype != LMK_F16 && s->dtype != LMK_BF16) || s->T < 128 || s->B < 1 || s->H < 1 ||
        (long long)s->B * s->H > 65535 || (long long)s->B * s->H * s->T + 64 > INT32_MAX ||
        (LMK_FLASH_WGMMA_BWD_HEAVY_FIRST && (s->T + 127) / 128 > 65535)) /* grid.y */
        return 0;
    return lmk_cuda_is_sm90();
}

extern "C" int lmk_flash_wgmma_bwd_preferred(const lmk_attn_shape *s)
{
    if (!lmk_flash_wgmma_bwd_usable(s))
        return 0;
    const int sms = lmk_cuda_sm_count(0);
    if (sms == 0)
        return 0;
    return 100LL * s->B * s->H * ((s->T + 127) / 128) >= (long long)LMK_FLASH_WGMMA_BWD_MIN_BLOCKS_PCT * sms;
}

extern "C" int lmk_flash_wgmma_bwd(void *dq, void *dk, void *dv, float *dqacc, const float *dsum,
                                   const void *dout, const void *q, const void *k, const void *v,
                                   const float *lse, const lmk_attn_shape *s, void *stream)
{
    if (!lmk_flash_wgmma_bwd_usable(s) || !dq || !dk || !dv || !dqacc || !dsum || !dout || !q ||
        !k || !v || !lse)
        return LMK_INVALID;
    for (const void *p : {(const void *)dq, (const void *)dk, (const void *)dv, (const void *)dqacc,
                          (const void *)dsum, dout, q, k, v, (const void *)lse})
        if ((uintptr_t)p & 15)
            return LMK_INVALID;
    cudaStream_t st = (cudaStream_t)stream;
    const bool bf = s->dtype == LMK_BF16;
    switch (s->d) {
    case 64:
        return bf ? launch<__nv_bfloat16, 64>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st)
                  : launch<__half, 64>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st);
    case 128:
        return bf ? launch<__nv_bfloat16, 128>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st)
                  : launch<__half, 128>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st);
#if LMK_FLASH_WGMMA_BWD_PAD_DIMS & 2
    case 32:
        return bf ? launch<__nv_bfloat16, 32>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st)
                  : launch<__half, 32>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st);
#endif
#if LMK_FLASH_WGMMA_BWD_PAD_DIMS & 8
    case 80:
        return bf ? launch<__nv_bfloat16, 80>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st)
                  : launch<__half, 80>(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st);
#endif
    }
    return LMK_INVALID;
}
