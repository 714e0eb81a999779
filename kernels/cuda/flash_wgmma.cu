/* Flash attention forward on Hopper's warpgroup MMA (wgmma.mma_async and the
 * tensor memory accelerator, sm_90a only: this file alone is compiled for
 * compute_90a, see kernels/meson.build), fp16/bf16, every head dim (16, 32 on
 * the d 64 tiles, 80 on the d 128 tiles: fw_dpad). Same
 * math and numerics as the mma.sync forward in flash_attn.cu (attention.h
 * has the contract): S = Q·Kᵀ, online softmax in log2 units with the scale
 * folded into one FFMA per score, O += P·V with P rounded to T, fp32
 * accumulators and row sums of the unrounded P, lse saved.
 *
 * Block: NC consumer warpgroups of 64 queries (NC 2 or 3: 128 or 192
 * queries) and one producer warpgroup (FlashAttention-3's plan, own code):
 *   warpgroup 0, the producer: one thread loads the block's Q once and then
 *     K and V tiles of 128 keys into a ring of STAGES shared buffers with TMA
 *     bulk tensor copies (128-byte swizzle, rows past T read as zeros), each
 *     completing on a "full" mbarrier; it refills a buffer once the consumers
 *     arrive on its "empty" mbarrier. Gives its registers away (setmaxnreg).
 *   warpgroups 1…NC, the consumers: 64 query rows each. Per key tile j:
 *     S_j = Q·K_jᵀ (wgmma m64n128k16, both operands from shared memory,
 *     K-major), issued before O += P_{j−1}·V_{j−1} (wgmma m64nDk16, P from
 *     registers in the accumulator layout, V straight from its row-major tile
 *     as an MN-major B operand: the transpose flag, no Vᵀ copy); the softmax
 *     of S_j then runs while that P·V runs; after the item's first tile its
 *     exponentials are taken against the running max as it stands, which
 *     moves only when a score passes it by 2^8 (LAZY_MAX). With PINGPONG (NC 2) the two
 *     consumers take turns issuing their MMAs (named barriers 1 and 2); at
 *     d 128 O is rescaled after P_{j−1}·V_{j−1} is waited for, outside the
 *     turn (LATE_RESCALE). Causal: every consumer runs every key tile of its
 *     block (a tile wholly after a consumer's rows only adds exact zeros).
 *   Persistent blocks (PERSISTENT, unsplit, the d 64 tiles by default): one
 *     block per SM runs a list of query tiles (fw_item); Q is reloaded as
 *     soon as the consumers' last S of a tile is done (q_empty), and the K/V
 *     ring and the ping-pong turns run on across tiles.
 *   Split blocks (grids too small to fill the SMs twice, fw_plan SPLIT): 64
 *     queries, the NC consumers share them and take turns over the key
 *     tiles, then merge their partial rows (m, l, O) as FA2's split-KV does;
 *     the longest block's time is divided by NC.
 * Shared tiles are 64-column boxes of 128-byte rows in the 128-byte swizzle
 * that TMA writes and wgmma reads (8-row atoms of 1024 bytes). */
#include <cuda.h> /* CUtensorMap and its enums only: cuTensorMapEncodeTiled comes
                     through the runtime's driver entry point */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "device_query.cuh"
#include "flash_wgmma.h"
#include "wgmma_sm90.cuh" /* saddr, descriptors, mbarriers, TMA, wg_mma, tensor maps */
extern "C" {
#include "../status.h"
}

/* Build-time knobs (defaults are the shipped configuration; variant builds
 * for A/B timing override them with -D, tests/gpu/ffwd_variant.sh):
 *   LMK_FLASH_WGMMA           1: flash_attn.cu's full-grid forward calls this
 *                             kernel for the shapes lmk_flash_wgmma_usable takes
 *                             (on the H200: 1.33 ms against the mma.sync
 *                             forward's 2.44 at bf16 B1 H16 T16384 d64 causal,
 *                             1.81 against 4.84 at d128; PERF.md);
 *   LMK_FLASH_WGMMA_PINGPONG  1: two consumer warpgroups (d 128, or d 64 with
 *                             LMK_FLASH_WGMMA_D64_WG 2) alternate their MMAs. On
 *                             since the lent H100 checked a build with it (test_flash
 *                             302/302, flash_vs_torch 126/126, 2026-11-22 10:35 UTC):
 *                             d 128 bf16 B1 H16 T16384 causal forward 1.77 against
 *                             1.82–1.83 ms, fp16 1.85–1.88 against 1.95–2.01 (PERF.md). */
#ifndef LMK_FLASH_WGMMA
#define LMK_FLASH_WGMMA 1
#endif
#ifndef LMK_FLASH_WGMMA_PINGPONG
#define LMK_FLASH_WGMMA_PINGPONG 1
#endif
/*   LMK_FLASH_WGMMA_D64_WG    consumer warpgroups per block at d 64: 2 (128
 *                             queries) or 3 (192, FlashAttention-3's choice: more
 *                             softmax work in flight beside the MMAs; 1.33 against
 *                             1.47 ms, 1.36 with two and ping-pong); d 128 always
 *                             2 (its accumulators need 232 registers). */
#ifndef LMK_FLASH_WGMMA_D64_WG
#define LMK_FLASH_WGMMA_D64_WG 3
#endif
/*   LMK_FLASH_WGMMA_DIMS      head dims (bit mask: 1 d 16, 2 d 32, 4 d 64, 8 d 80,
 *                             16 d 128) whose grids of at least two 128-query
 *                             blocks per SM run here; d 16, 32 on the d 64
 *                             kernel's tiles, d 80 on d 128's (fw_dpad);
 *   LMK_FLASH_WGMMA_SPLIT_DIMS  the same for smaller grids (few heads, short T),
 *                             as 64-query blocks whose consumers split the key
 *                             tiles (fw_plan SPLIT; route()). The others go to
 *                             flash_attn.cu's mma.sync kernels. Defaults: every
 *                             d unsplit, split at d 64, 80, 128 (H100, bf16,
 *                             causal, against the mma.sync forward: one head
 *                             T 16384 d 128 0.148 against 0.352 ms; B 8 T 16384
 *                             d 80 0.835 against 1.764; PERF.md). Split at d 16,
 *                             32 too (31) was faster (d 32 one head T 32768
 *                             0.344 against 0.409) and passed test_flash and
 *                             flash_vs_torch, but the attention job's one-head
 *                             sweep stopped answering at its first points (d 16,
 *                             T 4096…) in the call that had it on: off until a
 *                             device call runs that sweep with it. */
#ifndef LMK_FLASH_WGMMA_DIMS
#define LMK_FLASH_WGMMA_DIMS 31
#endif
/*   LMK_FLASH_WGMMA_HEAVY_FIRST  1: the grid is (B·H, query tiles), the longest
 *                             causal tiles of every head first (longest-processing-
 *                             time order across the heads); 0: (query tiles, B·H),
 *                             longest first within one head only, so the last
 *                             head's long tiles start late (a list-scheduling model
 *                             of 132 SMs: 7% over the mean load at B1 H16 T16384
 *                             d 64 causal, 14% at B8 H1; 0.5% and 2.6% heavy-first).
 *                             H100, bf16 causal d 64: B1 H16 T16384 1.338 → 1.238 ms,
 *                             B8 H1 0.76 → 0.65 (PERF.md, helper fwdfast call 1).
 *   LMK_FLASH_WGMMA_RESCALE_SKIP  1: a warp skips O *= alpha when none of its rows'
 *                             maxima moved (every alpha exactly 1): 1.238 → 1.19–1.20
 *                             ms there, non-causal B1 H16 T8192 0.75 → 0.70–0.72.
 *                             Both on since that call: its checks ran with them on
 *                             (test_flash bf16/fp16 232/232, flash_vs_torch 126/126).
 *   LMK_FLASH_WGMMA_EXP_EMU   how many of the 16 eight-key column groups of a
 *                             64×128 score tile take 2^x on the FMA pipe (Cody-Waite
 *                             split and a minimax polynomial, fw_exp2_fma) instead of
 *                             MUFU.EX2, in tiles without masked keys; 0: none. At d 64
 *                             a tile's 8192 exponentials need as many MUFU cycles
 *                             (16 per clock per SM) as its MMAs need tensor cycles,
 *                             but the kernel is not MUFU-bound (ncu: XU pipe 48%,
 *                             issue 46%): 2, 3, 4, 6 groups measured 1.22, 1.26, 1.30,
 *                             1.34 ms against 1.19–1.20 with none (same call); off.
 *                             At d 128 with ping-pong and LATE_RESCALE, 2 groups:
 *                             1.740–1.748 against 1.700–1.705 ms (helper fwd128).
 */
#ifndef LMK_FLASH_WGMMA_HEAVY_FIRST
#define LMK_FLASH_WGMMA_HEAVY_FIRST 1
#endif
#ifndef LMK_FLASH_WGMMA_EXP_EMU
#define LMK_FLASH_WGMMA_EXP_EMU 0
#endif
#ifndef LMK_FLASH_WGMMA_RESCALE_SKIP
#define LMK_FLASH_WGMMA_RESCALE_SKIP 1
#endif
static_assert(LMK_FLASH_WGMMA_EXP_EMU >= 0 && LMK_FLASH_WGMMA_EXP_EMU <= 16,
              "LMK_FLASH_WGMMA_EXP_EMU counts column groups of 8 keys: 0…16");
#ifndef LMK_FLASH_WGMMA_SPLIT_DIMS
#define LMK_FLASH_WGMMA_SPLIT_DIMS 28
#endif
/*   LMK_FLASH_WGMMA_D128_STAGES  K/V ring depth of the unsplit blocks at d 128 (80):
 *                             2 (160 KB of shared memory) or 3 (224 KB: the most
 *                             one block may have).
 *   LMK_FLASH_WGMMA_TMA_STORE 1: each consumer writes its 64 rows of O into its
 *                             own Q tile (free once its last S = Q·Kᵀ is done) in
 *                             the 128-byte swizzle and one thread stores them with
 *                             TMA (rows past T clipped by the map), instead of
 *                             16 (d 64) or 32 (d 128) four-byte stores per thread
 *                             and row pair.
 *   LMK_FLASH_WGMMA_PERSISTENT  bit 1 (the d 64 tiles: d 16, 32, 64), bit 2 (the
 *                             d 128 tiles: d 80, 128): the unsplit blocks become
 *                             one per SM (at most), each running a list of query
 *                             tiles (fw_item: the heavy-first order dealt out in
 *                             rounds, alternately forwards and backwards); the
 *                             producer loads the next tile's Q as soon as the
 *                             consumers' last S = Q·Kᵀ of the current one is done,
 *                             and its first K/V tiles into the ring as it drains,
 *                             so that neither the block start (barrier set-up,
 *                             register hand-over) nor the first loads' latency
 *                             sits between two tiles. Not with
 *                             LMK_FLASH_WGMMA_TMA_STORE (O would go through the Q
 *                             tile that is already refilled). 1 (d 64 tiles) since
 *                             the lent H100 checked a build with it (helper fwd128
 *                             call 2, 11:01 UTC, with MAX_CHAINS 4: test_flash
 *                             bf16/fp16 232/232, flash_vs_torch 126/126; without
 *                             MAX_CHAINS test_flash 232/232): bf16 B1 H16 T16384
 *                             d 64 causal forward 1.214–1.299 against 1.245–1.353
 *                             ms over both calls' other builds (SDPA 1.25); at
 *                             d 128 (mask 2) nothing alone (1.744 against
 *                             1.753–1.761) and +4% beside LATE_RESCALE (1.751–1.762
 *                             against 1.686–1.690): off there (PERF.md).
 *   LMK_FLASH_WGMMA_LATE_RESCALE  1: at d 128 (80), O *= alpha_j at the end of
 *                             iteration j (once P_{j−1}·V_{j−1} is done and P_j
 *                             converted), as FlashAttention-3 does at d ≤ 128,
 *                             instead of between the issue of S_{j+1} and of
 *                             P_j·V_j: with ping-pong that keeps the multiplies out
 *                             of the consumer's turn to issue; without, they no
 *                             longer run under S_{j+1}. On since the lent H100
 *                             checked a build with it (helper fwd128 call 1, 10:49
 *                             UTC: test_flash bf16/fp16 232/232, flash_vs_torch
 *                             126/126): causal B1 H16 T16384 d 128 forward bf16
 *                             1.686–1.690 against 1.753–1.761 ms, fp16 1.749–1.799
 *                             against 1.838–1.880 (SDPA 1.828, 1.886; PERF.md). */
#ifndef LMK_FLASH_WGMMA_D128_STAGES
#define LMK_FLASH_WGMMA_D128_STAGES 2
#endif
#ifndef LMK_FLASH_WGMMA_TMA_STORE
#define LMK_FLASH_WGMMA_TMA_STORE 0
#endif
#ifndef LMK_FLASH_WGMMA_PERSISTENT
#define LMK_FLASH_WGMMA_PERSISTENT 1
#endif
#ifndef LMK_FLASH_WGMMA_LATE_RESCALE
#define LMK_FLASH_WGMMA_LATE_RESCALE 1
#endif
/*   LMK_FLASH_WGMMA_MAX_CHAINS  independent FMNMX chains per row for a score tile's
 *                             row maxima (1, 2, 4 or 8; combined by a tree at the
 *                             end: the same values). 1: two dependent chains of 64
 *                             (d 128) per thread, one per row, which ncu at d 128
 *                             shows as the top stall (waits on fixed-latency
 *                             dependencies, 1.9 of 5.6 cycles per issued
 *                             instruction) while the consumer's softmax sits
 *                             between the other consumer's MMAs. Measured (helper
 *                             fwd128 call 2, bf16 B1 H16 T16384 d 128 causal): 4
 *                             chains 1.707–1.712 ms, 8 chains 1.714–1.718, against
 *                             1.700–1.705 with 1; d 64 within the noise: off. */
#ifndef LMK_FLASH_WGMMA_MAX_CHAINS
#define LMK_FLASH_WGMMA_MAX_CHAINS 1
#endif
/*   LMK_FLASH_WGMMA_LAZY_MAX  how the tiles after an item's first one update the
 *                             running row max m (log2 units): 0 as the first tile
 *                             (m = the exact running max, O and l rescaled whenever
 *                             it moves); 1 lazily: m moves only when some score of
 *                             the warp's rows exceeds it by more than
 *                             LMK_FLASH_WGMMA_LAZY_TAU (then to the exact max, as
 *                             0), so P stays ≤ 2^TAU and most tiles need no
 *                             rescale, no alpha and no max shuffles (each thread
 *                             tests its own scores, one vote per warp); 2 as 1,
 *                             speculatively: the exponentials are taken against
 *                             the old m while the test runs beside them (no max
 *                             chain before them); when a consumer's test fails
 *                             (any of its 128 threads, bar.red) it runs S = Q·Kᵀ
 *                             of that tile again (K is released after the test)
 *                             and updates as 0. Exact either way: m is only the
 *                             reference of the exponentials (lse = m + log2 l).
 *                             With 2, a 3-deep d 128 ring (D128_STAGES 3) measured d 80
 *                             B8 T16384 −4…−6% but d 128 +1…+2%, persistent d 128
 *                             blocks (PERSISTENT 3) +4…+5% at d 128 (fwd7 call 2).
 *                             2 since the lent H100 checked this build (helper fwd7
 *                             call 2, 13:15 UTC: test_flash bf16/fp16 120/120 each,
 *                             flash_vs_torch 126/126; call 1: TAU 0, the slow path
 *                             in most tiles, 120/120 each and 126/126): causal B1
 *                             H16 T16384 d 128 forward bf16 1.574–1.590 against
 *                             1.670–1.680 ms, fp16 1.677–1.687 against 1.746–1.752
 *                             (SDPA 1.778, 1.881), d 80 B8 −6%, non-causal d 128
 *                             −7%; 1 measured −3…−4% at d 128 (PERF.md). */
#ifndef LMK_FLASH_WGMMA_LAZY_MAX
#define LMK_FLASH_WGMMA_LAZY_MAX 2
#endif
/*   LMK_FLASH_WGMMA_LAZY_MAX_D64  the same for the d 64 tiles (d 16, 32, 64; default:
 *                             as LMK_FLASH_WGMMA_LAZY_MAX). */
#ifndef LMK_FLASH_WGMMA_LAZY_MAX_D64
#define LMK_FLASH_WGMMA_LAZY_MAX_D64 LMK_FLASH_WGMMA_LAZY_MAX
#endif
#ifndef LMK_FLASH_WGMMA_LAZY_TAU
#define LMK_FLASH_WGMMA_LAZY_TAU 8.0f
#endif
/*   LMK_FLASH_WGMMA_NC2_REGS  registers per consumer thread with two consumer
 *                             warpgroups (d 128 tiles): 232 (the producer keeps 40)
 *                             or 240 (producer 24, FlashAttention-3's split). With
 *                             LAZY_MAX 2, 240 measured (helper fwd7 call 2): causal
 *                             B1 H16 T16384 d 128 bf16 1.576–1.619 against 1.574–1.590
 *                             ms, fp16 1.634–1.643 against 1.677–1.687; not yet
 *                             through test_flash / flash_vs_torch on a GPU: 232. */
#ifndef LMK_FLASH_WGMMA_NC2_REGS
#define LMK_FLASH_WGMMA_NC2_REGS 232
#endif
static_assert(LMK_FLASH_WGMMA_NC2_REGS == 232 || LMK_FLASH_WGMMA_NC2_REGS == 240,
              "LMK_FLASH_WGMMA_NC2_REGS: 232 or 240");
static_assert(LMK_FLASH_WGMMA_LAZY_MAX >= 0 && LMK_FLASH_WGMMA_LAZY_MAX <= 2 &&
                  LMK_FLASH_WGMMA_LAZY_MAX_D64 >= 0 && LMK_FLASH_WGMMA_LAZY_MAX_D64 <= 2,
              "LMK_FLASH_WGMMA_LAZY_MAX(_D64): 0, 1 or 2");
static_assert(LMK_FLASH_WGMMA_MAX_CHAINS == 1 || LMK_FLASH_WGMMA_MAX_CHAINS == 2 ||
                  LMK_FLASH_WGMMA_MAX_CHAINS == 4 || LMK_FLASH_WGMMA_MAX_CHAINS == 8,
              "LMK_FLASH_WGMMA_MAX_CHAINS: 1, 2, 4 or 8");
static_assert(LMK_FLASH_WGMMA_D128_STAGES == 2 || LMK_FLASH_WGMMA_D128_STAGES == 3,
              "LMK_FLASH_WGMMA_D128_STAGES: 2 or 3 (shared memory)");
static_assert(!(LMK_FLASH_WGMMA_PERSISTENT && LMK_FLASH_WGMMA_TMA_STORE),
              "LMK_FLASH_WGMMA_PERSISTENT refills the Q tile that LMK_FLASH_WGMMA_TMA_STORE stores O from");

namespace {

constexpr int FW_BN = 128;      /* keys per tile */
constexpr float FW_LN2 = 0.6931471805599453f;

/* Block plan for head dim D, NC consumer warpgroups and the split choice:
 * threads, queries per block, register split (setmaxnreg: producer /
 * consumers, within the 64K registers of one block per SM), ring depth,
 * shared memory (bytes from a 1024-aligned base). Unsplit: the consumers
 * own 64 query rows each (BM = 64·NC) and every one reads every K/V tile.
 * SPLIT: they share one 64-row Q tile and take turns over the key tiles
 * (consumer c: tiles c, c + NC, …), so each tile has one reader and the
 * ring is deeper; at the end consumers 1… hand their m, l and accumulators
 * (MERGE_FLOATS per thread) to consumer 0 through the drained ring. */
template <int D, int NC, bool SPLIT> struct fw_plan {
    static_assert(NC == 2 || NC == 3, "two or three consumer warpgroups");
    static constexpr int THREADS = 128 * (NC + 1);
    static constexpr int BM = SPLIT ? 64 : 64 * NC;
    static constexpr int REG_CONSUMER = NC == 2 ? LMK_FLASH_WGMMA_NC2_REGS : 160;
    static constexpr int REG_PRODUCER = NC == 2 ? (LMK_FLASH_WGMMA_NC2_REGS == 240 ? 24 : 40) : 32;
    static constexpr int NB = D / FW_BOX;                   /* boxes per row of Q, K, V */
    static constexpr int STAGES = SPLIT ? (D <= 64 ? 5 : 3)
                                        : (D <= 64 ? 3 : LMK_FLASH_WGMMA_D128_STAGES); /* K/V ring depth */
    static constexpr int READERS = SPLIT ? 4 : 4 * NC;      /* warps that read one K/V tile */
    static constexpr int Q_WG = 64 * D * 2;                 /* one consumer's Q rows */
    static constexpr int TILE = FW_BN * D * 2;              /* one K or V tile */
    static constexpr int OFF_K = (SPLIT ? 1 : NC) * Q_WG;
    static constexpr int OFF_V = OFF_K + STAGES * TILE;
    static constexpr int OFF_BAR = OFF_V + STAGES * TILE;   /* q_full, k_full[S], v_full[S], k_empty[S], v_empty[S], q_empty */
    static constexpr int BYTES = OFF_BAR + 8 * (2 + 4 * STAGES);
    static constexpr size_t SMEM = BYTES + 1024;            /* slack to align the base */
    static_assert(SMEM <= 227 * 1024, "one block's shared memory on sm_90");
    static constexpr int MERGE_FLOATS = 4 + D / 2;          /* m, l (2 rows) and acc per thread */
    static_assert(!SPLIT || (NC - 1) * 128 * MERGE_FLOATS * 4 <= 2 * STAGES * TILE,
                  "the merge fits in the K/V ring");
};

/* 2^x for x ≤ 0 on the FMA pipe (no MUFU): x = n + f with n = round(x), f in
 * [−0.5, 0.5] (the 1.5·2^23 rounding constant, 127 added so that its low bits
 * hold the biased exponent n + 127), 2^f by a minimax polynomial in relative
 * error (degree 3: 7.5e-5, enough below bf16's rounding of P; degree 4:
 * 2.7e-6 for fp16's), times 2^n built from the exponent bits. x is clamped
 * at −125 (2^n stays normal; 2^−125 in place of smaller results, which is
 * below anything P or l can resolve); NaN stays NaN (max.NaN). */
template <typename T> __device__ __forceinline__ float fw_exp2_fma(float x)
{
    float xc;
    asm("max.NaN.f32 %0, %1, 0fC2FA0000;\n" : "=f"(xc) : "f"(x)); /* max(x, −125) */
    const float shift = 12582912.f + 127.f;                       /* 1.5·2^23 + 127 */
    const float t = __fadd_rn(xc, shift);                          /* low bits: n + 127 */
    const float f = __fsub_rn(xc, __fsub_rn(t, shift));            /* x − n */
    float p;
    if constexpr (std::is_same<T, __half>::value)
        p = fmaf(fmaf(fmaf(fmaf(0.009570102207362652f, f, 0.05591785907745361f), f,
                           0.240247443318367f),
                      f, 0.6931217908859253f),
                 f, 0.9999992847442627f);
    else
        p = fmaf(fmaf(fmaf(0.0551716685295105f, f, 0.2426111251115799f), f,
                      0.6932609677314758f),
                 f, 0.9999280571937561f);
    return __fmul_rn(p, __uint_as_float(__float_as_uint(t) << 23)); /* · 2^n */
}

/* Whether column group j (of 16) of a score tile takes fw_exp2_fma: EMU of
 * the 16, spread evenly. */
template <int EMU> __host__ __device__ constexpr bool fw_emu_group(int j)
{
    return (j * EMU) / 16 != ((j + 1) * EMU) / 16;
}

/* Online softmax of one 64×128 score tile in place (this thread's rows row0
 * and row0 + 8): MASK: keys ≥ Tn and, causal, keys after the row first set to
 * −∞ (a separate instantiation, so that unmasked tiles carry no mask code);
 * updates the running max m (log2 units, scale folded in) and sum l (rescaled
 * by alpha, then plus the unrounded exponentials); leaves 2^(s·scale_log2 − m)
 * in sc. */
/* x = −∞ where its key (column 8j + 2t + (e & 1) of the tile at key k0) is
 * past Tn or, causal, past its query row (row0 + 8(e >> 1)). */
__device__ __forceinline__ void fw_mask(float &x, int j, int e, int k0, int Tn, int causal, int row0,
                                        int t)
{
    const int col = k0 + 8 * j + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
    if (col >= Tn || (causal && col > row))
        x = -INFINITY;
}

/* One row's running max m (log2 units), sum l and rescale alpha after a
 * tile whose largest raw score in this thread's part of the row is mx (the
 * quad's four threads share the row); msub: what the tile's exponents
 * subtract (0 while the row has no key yet). */
__device__ __forceinline__ void fw_move_max(float mx, float &m, float &l, float &alpha, float &msub,
                                            float scale_log2)
{
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(m, mx * scale_log2);
    msub = mnew == -INFINITY ? 0.f : mnew;
    alpha = fw_exp2(m - msub);
    m = mnew;
    l *= alpha;
}

template <typename T, bool MASK>
__device__ __forceinline__ void fw_softmax(float (&sc)[FW_BN / 8][4], float (&m)[2], float (&l)[2],
                                           float (&alpha)[2], int k0, int Tn, int causal,
                                           int row0, int t, float scale_log2)
{
    constexpr int CH = LMK_FLASH_WGMMA_MAX_CHAINS; /* chain of column group j: j % CH */
    float mc[2][CH];
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int c = 0; c < CH; c++)
            mc[h][c] = -INFINITY;
#pragma unroll
    for (int j = 0; j < FW_BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if (MASK)
                fw_mask(sc[j][e], j, e, k0, Tn, causal, row0, t);
            mc[e >> 1][j % CH] = fmaxf(mc[e >> 1][j % CH], sc[j][e]);
        }
    float mx[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int w = 1; w < CH; w *= 2)
#pragma unroll
            for (int c = 0; c + w < CH; c += 2 * w)
                mc[h][c] = fmaxf(mc[h][c], mc[h][c + w]);
        mx[h] = mc[h][0];
    }
    float msub[2];
#pragma unroll
    for (int h = 0; h < 2; h++)
        fw_move_max(mx[h], m[h], l[h], alpha[h], msub[h], scale_log2);
#pragma unroll
    for (int j = 0; j < FW_BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float x = fmaf(sc[j][e], scale_log2, -msub[e >> 1]);
            sc[j][e] = !MASK && fw_emu_group<LMK_FLASH_WGMMA_EXP_EMU>(j) ? fw_exp2_fma<T>(x)
                                                                          : fw_exp2(x);
            l[e >> 1] += sc[j][e];
        }
}

/* fw_softmax for a tile after the row's first with a lazy max
 * (LMK_FLASH_WGMMA_LAZY_MAX): m moves (to the exact max; alpha and l as
 * fw_softmax) only when a score of the warp's rows exceeds it by more than
 * TAU, else alpha = 1 and P ≤ 2^TAU; returns true.
 * SPEC: the exponentials are taken against the old m at once, and the test
 * is on their sums instead (no max at all): when any thread of the consumer
 * warpgroup (named barrier bar, 128 threads) has a row whose 32 values sum
 * past 2^TAU (which every P > 2^TAU makes so), or a row with m = −∞, returns
 * false with sc spent and m, l untouched: the caller computes S again and
 * runs fw_softmax. */
__device__ __forceinline__ bool fw_any_wg(int bar, bool v)
{
    uint32_t r;
    asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, 128, p;\n"
                 "selp.u32 %0, 1, 0, q;\n}\n"
                 : "=r"(r)
                 : "r"((uint32_t)v), "r"(bar)
                 : "memory");
    return r != 0;
}
template <typename T, bool MASK, bool SPEC>
__device__ __forceinline__ bool fw_softmax_lazy(float (&sc)[FW_BN / 8][4], float (&m)[2],
                                                float (&l)[2], float (&alpha)[2], int k0, int Tn,
                                                int causal, int row0, int t, float scale_log2,
                                                int bar)
{
    constexpr float TAU = LMK_FLASH_WGMMA_LAZY_TAU;
    float ls[2][2] = {{0.f, 0.f}, {0.f, 0.f}}; /* [row][chain] */
    float msub[2];
#pragma unroll
    for (int h = 0; h < 2; h++)
        msub[h] = m[h] == -INFINITY ? 0.f : m[h];
    if constexpr (SPEC) {
#pragma unroll
        for (int j = 0; j < FW_BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (MASK)
                    fw_mask(sc[j][e], j, e, k0, Tn, causal, row0, t);
                sc[j][e] = fw_exp2(fmaf(sc[j][e], scale_log2, -msub[e >> 1]));
                ls[e >> 1][j & 1] += sc[j][e];
            }
        bool need = false;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            ls[h][0] += ls[h][1];
            need |= !(ls[h][0] <= exp2f(TAU)) || m[h] == -INFINITY; /* NaN too */
        }
        if (fw_any_wg(bar, need))
            return false;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            alpha[h] = 1.f;
            l[h] += ls[h][0];
        }
        return true;
    } else {
        float mt[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}}; /* [row][chain] */
#pragma unroll
        for (int j = 0; j < FW_BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (MASK)
                    fw_mask(sc[j][e], j, e, k0, Tn, causal, row0, t);
                mt[e >> 1][j & 1] = fmaxf(mt[e >> 1][j & 1], sc[j][e]);
            }
        bool need = false;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mt[h][0] = fmaxf(mt[h][0], mt[h][1]);
            need |= mt[h][0] * scale_log2 > m[h] + TAU;
        }
        if (__any_sync(0xffffffffu, need)) { /* as fw_softmax */
#pragma unroll
            for (int h = 0; h < 2; h++)
                fw_move_max(mt[h][0], m[h], l[h], alpha[h], msub[h], scale_log2);
        } else {
            alpha[0] = alpha[1] = 1.f;
        }
#pragma unroll
        for (int j = 0; j < FW_BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float x = fmaf(sc[j][e], scale_log2, -msub[e >> 1]);
                sc[j][e] = !MASK && fw_emu_group<LMK_FLASH_WGMMA_EXP_EMU>(j) ? fw_exp2_fma<T>(x)
                                                                              : fw_exp2(x);
                ls[e >> 1][j & 1] += sc[j][e];
            }
#pragma unroll
        for (int h = 0; h < 2; h++)
            l[h] += ls[h][0] + ls[h][1];
        return true;
    }
}

/* The head dim the kernel's tiles and accumulators have for head dim DR: 64
 * (DR 16, 32, 64) or 128 (DR 80, 128). Columns DR… of the shared tiles are
 * zeros (TMA fills the box past the tensor's DR columns): S = Q·Kᵀ runs over
 * the DR columns only (k16 steps), O += P·V over all (its zero columns are
 * not stored). */
__host__ __device__ constexpr int fw_dpad(int dr) { return dr <= 64 ? 64 : 128; }

/* Work item k (0, 1, …) of block b of a persistent grid of G blocks
 * (LMK_FLASH_WGMMA_PERSISTENT): round k holds items kG…kG+G−1 of the
 * heavy-first list, dealt to the blocks forwards when k is even and backwards
 * when odd, so that each block's sum of causal tile lengths stays near the
 * mean. Increasing in k: once past the list, every later item is too. */
__device__ __forceinline__ int fw_item(int k, int b, int G)
{
    return k * G + ((k & 1) ? G - 1 - b : b);
}

/* o: (B, H, T, DR); lse: (B, H, T); Q, K, V through the 3-D tensor maps
 * (columns DR, rows T, heads B·H; Q boxes 64 × 64 rows, K/V boxes 64 × 128);
 * tmo: o's map (as Q's), read only with LMK_FLASH_WGMMA_TMA_STORE; heads:
 * B·H. Grid (B·H, ceil(T/BM)) with HEAVY_FIRST, else (ceil(T/BM), B·H);
 * 128·(NC+1) threads; the block of query-tile index i runs tile count−1−i
 * (longest causal rows first: across all heads with HEAVY_FIRST).
 * Persistent (LMK_FLASH_WGMMA_PERSISTENT, unsplit): grid (G) with G ≤ the
 * tile count; item i of the heavy-first list (fw_item) is query tile
 * count−1−i/heads of head i%heads. SPLIT: fw_plan; the merge of the
 * consumers' partial rows is FA2's (rescale both to the larger max). */
template <typename T, int DR, int NC, bool PP, bool SPLIT>
__global__ void __launch_bounds__(fw_plan<fw_dpad(DR), NC, SPLIT>::THREADS, 1)
    flash_fwd_wgmma_kernel(const __grid_constant__ CUtensorMap tmq,
                           const __grid_constant__ CUtensorMap tmk,
                           const __grid_constant__ CUtensorMap tmv,
                           const __grid_constant__ CUtensorMap tmo, T *o, float *lse, int Tn,
                           int causal, float scale_log2, int heads)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int D = fw_dpad(DR);
    using P = fw_plan<D, NC, SPLIT>;
    constexpr bool PERSIST = (LMK_FLASH_WGMMA_PERSISTENT & (D == 64 ? 1 : 2)) && !SPLIT;
    constexpr bool LATE = LMK_FLASH_WGMMA_LATE_RESCALE && D == 128;
    constexpr int LAZY = D == 64 ? LMK_FLASH_WGMMA_LAZY_MAX_D64 : LMK_FLASH_WGMMA_LAZY_MAX;
    static_assert(!PP || (NC == 2 && !SPLIT), "ping-pong between two consumers of their own rows");
    constexpr int S = P::STAGES, NB = P::NB;
    extern __shared__ __align__(1024) unsigned char smraw[];
    const uint32_t base = (saddr(smraw) + 1023u) & ~1023u;
    const uint32_t sQ = base, sK = base + P::OFF_K, sV = base + P::OFF_V;
    const uint32_t q_full = base + P::OFF_BAR;
    auto k_full = [&](int s) { return q_full + 8u * (1 + s); };
    auto v_full = [&](int s) { return q_full + 8u * (1 + S + s); };
    auto k_empty = [&](int s) { return q_full + 8u * (1 + 2 * S + s); };
    auto v_empty = [&](int s) { return q_full + 8u * (1 + 3 * S + s); };
    const uint32_t q_empty = q_full + 8u * (1 + 4 * S); /* PERSIST: the Q tiles may be refilled */

    /* this block's k-th work item: its first query row q0, head bh and key
     * tile count nk; false past the block's last */
    const int tiles = (Tn + P::BM - 1) / P::BM;
    int q0 = 0, bh = 0, nk = 0;
    auto has_item = [&](int k) {
        return PERSIST ? fw_item(k, blockIdx.x, gridDim.x) < heads * tiles : k == 0;
    };
    auto take_item = [&](int k) {
        if (PERSIST) {
            const int i = fw_item(k, blockIdx.x, gridDim.x);
            q0 = (tiles - 1 - i / heads) * P::BM;
            bh = i % heads;
        } else {
            q0 = (LMK_FLASH_WGMMA_HEAVY_FIRST ? gridDim.y - 1 - blockIdx.y
                                              : gridDim.x - 1 - blockIdx.x) * P::BM;
            bh = LMK_FLASH_WGMMA_HEAVY_FIRST ? blockIdx.x : blockIdx.y;
        }
        const int kend = causal ? min(Tn, q0 + P::BM) : Tn;
        nk = (kend + FW_BN - 1) / FW_BN;
    };
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
#pragma unroll
        for (int s = 0; s < S; s++) {
            mbar_init(k_full(s), 1);
            mbar_init(v_full(s), 1);
            mbar_init(k_empty(s), P::READERS); /* one arrival per reading warp */
            mbar_init(v_empty(s), P::READERS);
        }
        mbar_init(q_empty, 4 * NC);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) { /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(P::REG_PRODUCER) : "memory");
        if (threadIdx.x == 0) {
            constexpr int QWG = SPLIT ? 1 : NC; /* 64-row Q boxes per block */
            int pos = 0; /* ring position of the next K/V tile, counted over all items */
            for (int k = 0; has_item(k); k++) {
                take_item(k);
                if (PERSIST) /* every consumer warp's last S of item k−1 is done */
                    mbar_wait(q_empty, (k & 1) ^ 1);
                mbar_expect_tx(q_full, QWG * P::Q_WG);
#pragma unroll
                for (int c = 0; c < QWG; c++)
#pragma unroll
                    for (int b = 0; b < NB; b++)
                        tma_load(sQ + c * P::Q_WG + b * 64 * 128, &tmq, q_full, FW_BOX * b,
                                 q0 + 64 * c, bh);
                for (int j = 0; j < nk; j++, pos++) {
                    const int s = pos % S;
                    const uint32_t ph = (pos / S) & 1;
                    mbar_wait(k_empty(s), ph ^ 1); /* a fresh barrier passes parity 1 */
                    mbar_expect_tx(k_full(s), P::TILE);
#pragma unroll
                    for (int b = 0; b < NB; b++)
                        tma_load(sK + s * P::TILE + b * FW_BN * 128, &tmk, k_full(s), FW_BOX * b,
                                 j * FW_BN, bh);
                    mbar_wait(v_empty(s), ph ^ 1);
                    mbar_expect_tx(v_full(s), P::TILE);
#pragma unroll
                    for (int b = 0; b < NB; b++)
                        tma_load(sV + s * P::TILE + b * FW_BN * 128, &tmv, v_full(s), FW_BOX * b,
                                 j * FW_BN, bh);
                }
            }
        }
        return;
    }

    /* consumers: c = 0…NC−1, rows q0+64c…q0+64c+63 (SPLIT: all rows q0…q0+63,
     * key tiles c, c + NC, …) */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(P::REG_CONSUMER) : "memory");
    const int c = wg - 1, w = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    int wrow = 0, row0 = 0; /* per item: warp's first row; this lane's rows row0, row0 + 8 */
    const uint32_t qa = sQ + (SPLIT ? 0 : c * P::Q_WG);
    const int jfirst = SPLIT ? c : 0, jstep = SPLIT ? NC : 1; /* this consumer's key tiles */

    float acc[D / 8][4], sc[FW_BN / 8][4], m[2], l[2], alpha[2];
    uint32_t pa[FW_BN / 16][4];

    auto issue_s = [&](int s) { /* sc = Q·K(stage s)ᵀ */
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < DR / 16; kk++)
            wg_mma<T>::ss128(sc, sw128_desc(qa + (kk / 4) * 64 * 128 + (kk % 4) * 32, 16),
                             sw128_desc(sK + s * P::TILE + (kk / 4) * FW_BN * 128 + (kk % 4) * 32, 16),
                             kk > 0);
        wg_commit();
    };
    auto issue_pv = [&](int s) { /* acc += P·V(stage s) */
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < FW_BN / 16; kk++) {
            const uint64_t dv = sw128_desc(sV + s * P::TILE + kk * 16 * 128, FW_BN * 128);
            if constexpr (D == 64)
                wg_mma<T>::rs64(acc, pa[kk], dv);
            else
                wg_mma<T>::rs128(acc, pa[kk], dv);
        }
        wg_commit();
    };
    /* the tile's keys reach past T, or (causal) past this warp's first row */
    auto softmax = [&](int k0) {
        if (k0 + FW_BN > Tn || (causal && k0 + FW_BN - 1 > wrow)) /* warp-uniform */
            fw_softmax<T, true>(sc, m, l, alpha, k0, Tn, causal, row0, t, scale_log2);
        else
            fw_softmax<T, false>(sc, m, l, alpha, k0, Tn, causal, row0, t, scale_log2);
    };
    /* tiles after the item's first (LMK_FLASH_WGMMA_LAZY_MAX): false when the
     * speculative pass must be redone (sc spent) */
    auto softmax_next = [&](int k0) {
        if constexpr (LAZY == 0) {
            softmax(k0);
            return true;
        } else if (k0 + FW_BN > Tn || (causal && k0 + FW_BN - 1 > wrow)) {
            return fw_softmax_lazy<T, true, LAZY == 2>(sc, m, l, alpha, k0, Tn, causal, row0, t,
                                                       scale_log2, 8 + c);
        } else {
            return fw_softmax_lazy<T, false, LAZY == 2>(sc, m, l, alpha, k0, Tn, causal, row0, t,
                                                        scale_log2, 8 + c);
        }
    };
    auto rescale = [&]() { /* acc (relative to the previous max) *= alpha */
        if (LMK_FLASH_WGMMA_RESCALE_SKIP &&
            !__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f))
            return; /* no row of this warp moved its max */
#pragma unroll
        for (int jj = 0; jj < D / 8; jj++) {
            acc[jj][0] *= alpha[0];
            acc[jj][1] *= alpha[0];
            acc[jj][2] *= alpha[1];
            acc[jj][3] *= alpha[1];
        }
    };
    auto to_p = [&]() { /* P (rounded to T) in the A-fragment layout */
#pragma unroll
        for (int kp = 0; kp < FW_BN / 16; kp++) {
            pa[kp][0] = fw_pack<T>::pack(sc[2 * kp][0], sc[2 * kp][1]);
            pa[kp][1] = fw_pack<T>::pack(sc[2 * kp][2], sc[2 * kp][3]);
            pa[kp][2] = fw_pack<T>::pack(sc[2 * kp + 1][0], sc[2 * kp + 1][1]);
            pa[kp][3] = fw_pack<T>::pack(sc[2 * kp + 1][2], sc[2 * kp + 1][3]);
        }
    };
    /* PP: barrier 1 + c is consumer c's turn to issue; consumer 0 goes first.
     * Each consumer takes nk turns per item; consumer 1 skips the hand-over
     * after its last turn of the block's last item, so every arrival meets a
     * wait. */
    if (PP && c == 1)
        bar_arrive(1);

    int pos = 0; /* ring position of the item's key tile 0, counted over all items */
    for (int k = 0; has_item(k); k++, pos += nk) {
        take_item(k);
        const bool last_item = !has_item(k + 1);
        wrow = q0 + (SPLIT ? 0 : 64 * c) + 16 * w;
        row0 = wrow + g;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.f;
#pragma unroll
        for (int j = 0; j < D / 8; j++)
            acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
        auto ring = [&](int j) { return (pos + j) % S; };               /* stage of key tile j */
        auto phase = [&](int j) { return (uint32_t)((pos + j) / S) & 1; }; /* its full-barrier parity */

        mbar_wait(q_full, k & 1);
        if (!SPLIT || jfirst < nk) { /* SPLIT: consumers past the last tile keep m = −∞, l = 0 */
            mbar_wait(k_full(ring(jfirst)), phase(jfirst));
            if (PP)
                bar_sync(1 + c);
            issue_s(ring(jfirst));
            if (PP && !(c == 1 && nk == 1 && last_item))
                bar_arrive(2 - c);
            wg_wait<0>();
            pin(sc);
            if (lane == 0) {
                mbar_arrive(k_empty(ring(jfirst)));
                if (PERSIST && nk == 1)
                    mbar_arrive(q_empty);
            }
            softmax(jfirst * FW_BN); /* alpha 0 here: acc is still 0 */
            to_p();

            for (int j = jfirst + jstep; j < nk; j += jstep) {
                const int jp = j - jstep, s = ring(j), sp = ring(jp);
                mbar_wait(k_full(s), phase(j));
                if (PP)
                    bar_sync(1 + c);
                issue_s(s);
                if (!LATE)
                    rescale(); /* by tile jp's alpha, while S_j runs (acc: the tiles before jp) */
                mbar_wait(v_full(sp), phase(jp));
                issue_pv(sp);
                if (PP && !(c == 1 && j == nk - 1 && last_item))
                    bar_arrive(2 - c);
                wg_wait<1>(); /* S_j done, P_jp·V_jp may still run */
                pin(sc);
                if (LAZY != 2 && lane == 0) {
                    mbar_arrive(k_empty(s));
                    if (PERSIST && j == nk - 1) /* this warp's last read of its Q tile */
                        mbar_arrive(q_empty);
                }
                if (!softmax_next(j * FW_BN)) { /* LAZY 2: a max rose past m + TAU */
                    wg_wait<0>(); /* P_jp·V_jp done: pa free (fewer live registers) */
                    pin(acc);
                    pin(pa);
                    issue_s(s);
                    wg_wait<0>();
                    pin(sc);
                    softmax(j * FW_BN);
                }
                if (LAZY == 2 && lane == 0) { /* K_j (and Q) read for the last time */
                    mbar_arrive(k_empty(s));
                    if (PERSIST && j == nk - 1)
                        mbar_arrive(q_empty);
                }
                wg_wait<0>();
                pin(acc);
                pin(pa);
                if (lane == 0)
                    mbar_arrive(v_empty(sp));
                to_p();
                if (LATE)
                    rescale(); /* by tile j's alpha (acc holds the tiles before j) */
            }
            {
                const int jl = jfirst + (nk - 1 - jfirst) / jstep * jstep, sp = ring(jl);
                if (!LATE || jl == jfirst)
                    rescale(); /* late: done in the loop unless tile jl was the first */
                mbar_wait(v_full(sp), phase(jl));
                issue_pv(sp);
                wg_wait<0>();
                pin(acc);
                if (lane == 0)
                    mbar_arrive(v_empty(sp));
            }
        }

        if constexpr (SPLIT) { /* consumers 1… into consumer 0, in that order */
            /* every consumer is past its last MMA and every loaded tile has been
             * waited for: the ring is drained, reuse it */
            bar_sync_n(3, 128 * NC);
            float *x = reinterpret_cast<float *>(smraw + (base - saddr(smraw)) + P::OFF_K);
            const int tid = threadIdx.x & 127;
            if (c > 0) {
                float *xc = x + (size_t)(c - 1) * P::MERGE_FLOATS * 128;
                int n = 0;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    xc[n++ * 128 + tid] = m[h];
                    xc[n++ * 128 + tid] = l[h];
                }
#pragma unroll
                for (int j = 0; j < D / 8; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        xc[n++ * 128 + tid] = acc[j][e];
            }
            bar_sync_n(3, 128 * NC);
            if (c > 0)
                return;
            for (int ci = 1; ci < NC; ci++, x += (size_t)P::MERGE_FLOATS * 128) {
                int n = 0;
                float a0[2], a1[2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const float m1 = x[n++ * 128 + tid], l1 = x[n++ * 128 + tid];
                    const float mn = fmaxf(m[h], m1), ms = mn == -INFINITY ? 0.f : mn;
                    a0[h] = fw_exp2(m[h] - ms);
                    a1[h] = fw_exp2(m1 - ms);
                    l[h] = l[h] * a0[h] + l1 * a1[h];
                    m[h] = mn;
                }
#pragma unroll
                for (int j = 0; j < D / 8; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[j][e] = acc[j][e] * a0[e >> 1] + x[n++ * 128 + tid] * a1[e >> 1];
            }
        }

        const size_t rbase = (size_t)bh * Tn;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
            const int row = row0 + 8 * h;
            const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
            if constexpr (LMK_FLASH_WGMMA_TMA_STORE) {
                /* row r of this consumer's 64, column 8j + 2t: box j/8, 16-byte
                 * chunk j%8 of the row, swizzled by the row within its 8-row atom
                 * (as TMA wrote Q here); rows past T are written and clipped by
                 * the store */
                const int r = 16 * w + g + 8 * h;
#pragma unroll
                for (int j = 0; j < DR / 8; j++)
                    st_shared_u32(qa + (j / 8) * 64 * 128 + r * 128 + (((j % 8) ^ (r & 7)) << 4) + 4 * t,
                                  fw_pack<T>::pack(acc[j][2 * h] * inv, acc[j][2 * h + 1] * inv));
            } else if (row < Tn) {
                T *orow = o + (rbase + row) * DR;
#pragma unroll
                for (int j = 0; j < DR / 8; j++)
                    *reinterpret_cast<uint32_t *>(orow + 8 * j + 2 * t) =
                        fw_pack<T>::pack(acc[j][2 * h] * inv, acc[j][2 * h + 1] * inv);
            }
            if (t == 0 && row < Tn)
                lse[rbase + row] = (m[h] + log2f(l[h])) * FW_LN2;
        }
        if constexpr (LMK_FLASH_WGMMA_TMA_STORE) {
            /* this consumer's Q tile is free: its last S = Q·Kᵀ completed (and
             * with SPLIT every consumer's, bar_sync_n above) */
            fence_proxy_async();
            bar_sync_n(4 + c, 128);
            if ((threadIdx.x & 127) == 0) {
#pragma unroll
                for (int b = 0; b < (DR + FW_BOX - 1) / FW_BOX; b++)
                    tma_store(&tmo, qa + b * 64 * 128, FW_BOX * b, wrow - 16 * w, bh);
                tma_store_commit();
                tma_store_wait_read(); /* before the block's shared memory goes */
            }
        }
    } /* items */
#endif
}

template <typename T, int DR, bool SPLIT>
int launch(void *o, float *lse, const void *q, const void *k, const void *v,
           const lmk_attn_shape *s, cudaStream_t st)
{
    const fw_encode_fn enc = fw_encoder();
    CUtensorMap mq, mk, mv, mo = {};
    if (!enc || !fw_map(enc, &mq, q, s, 64) || !fw_map(enc, &mk, k, s, FW_BN) ||
        !fw_map(enc, &mv, v, s, FW_BN) ||
        (LMK_FLASH_WGMMA_TMA_STORE && !fw_map(enc, &mo, o, s, 64)))
        return LMK_DEVICE;
    constexpr int D = fw_dpad(DR), NC = D <= 64 ? LMK_FLASH_WGMMA_D64_WG : 2;
    using P = fw_plan<D, NC, SPLIT>;
    auto kern =
        flash_fwd_wgmma_kernel<T, DR, NC, !SPLIT && NC == 2 && LMK_FLASH_WGMMA_PINGPONG != 0, SPLIT>;
    const size_t smem = P::SMEM;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
        return LMK_DEVICE;
    const unsigned tiles = (s->T + P::BM - 1) / P::BM, heads = s->B * s->H;
    dim3 grid = LMK_FLASH_WGMMA_HEAVY_FIRST ? dim3(heads, tiles) : dim3(tiles, heads);
    if ((LMK_FLASH_WGMMA_PERSISTENT & (D == 64 ? 1 : 2)) && !SPLIT) { /* as the kernel's PERSIST */
        const long long items = (long long)tiles * heads, sms = lmk_cuda_sm_count(1); /* route(): ≤ INT32_MAX */
        grid = dim3((unsigned)(items < sms ? items : sms));
    }
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)DR);
    kern<<<grid, P::THREADS, smem, st>>>(mq, mk, mv, LMK_FLASH_WGMMA_TMA_STORE ? mo : mq, (T *)o,
                                         lse, s->T, s->causal, scale_log2, (int)heads);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

/* How the wgmma forward runs s: FW_NONE (not here: flash_attn.cu's mma.sync
 * kernels), FW_FULL (the unsplit blocks) or FW_SPLIT. A grid of 128-query
 * blocks that would not give every SM two (few heads, short T) is bound by
 * its longest block (causal: the last query rows, all T keys): the split
 * blocks divide it by NC. Which head dims run here, unsplit and split: the
 * bit masks LMK_FLASH_WGMMA_DIMS and LMK_FLASH_WGMMA_SPLIT_DIMS. */
enum fw_route { FW_NONE, FW_FULL, FW_SPLIT };
fw_route route(const lmk_attn_shape *s)
{
    if (!LMK_FLASH_WGMMA || !s || (s->dtype != LMK_F16 && s->dtype != LMK_BF16) || s->T < 1 ||
        (long long)s->B * s->H > 65535 || s->B < 1 || s->H < 1)
        return FW_NONE;
    if (LMK_FLASH_WGMMA_HEAVY_FIRST && (s->T + 63) / 64 > 65535) /* query tiles on grid y */
        return FW_NONE;
    if (LMK_FLASH_WGMMA_PERSISTENT && (long long)s->B * s->H * ((s->T + 63) / 64) > INT32_MAX)
        return FW_NONE; /* the persistent blocks count their tiles in int */
    const int bit = s->d == 16 ? 1 : s->d == 32 ? 2 : s->d == 64 ? 4 : s->d == 80 ? 8 : s->d == 128 ? 16 : 0;
    if (!(bit & (LMK_FLASH_WGMMA_DIMS | LMK_FLASH_WGMMA_SPLIT_DIMS)))
        return FW_NONE;
    const int sms = lmk_cuda_sm_count(0);
    if (sms == 0 || !lmk_cuda_is_sm90())
        return FW_NONE;
    const bool small = (long long)s->B * s->H * ((s->T + 127) / 128) < 2LL * sms;
    if (small)
        return bit & LMK_FLASH_WGMMA_SPLIT_DIMS ? FW_SPLIT : FW_NONE;
    return bit & LMK_FLASH_WGMMA_DIMS ? FW_FULL : FW_NONE;
}

template <typename T, int DR>
int launch_routed(void *o, float *lse, const void *q, const void *k, const void *v,
                  const lmk_attn_shape *s, fw_route r, cudaStream_t st)
{
    return r == FW_SPLIT ? launch<T, DR, true>(o, lse, q, k, v, s, st)
                         : launch<T, DR, false>(o, lse, q, k, v, s, st);
}

template <typename T>
int launch_dims(void *o, float *lse, const void *q, const void *k, const void *v,
                const lmk_attn_shape *s, fw_route r, cudaStream_t st)
{
    switch (s->d) {
    case 16: return launch_routed<T, 16>(o, lse, q, k, v, s, r, st);
    case 32: return launch_routed<T, 32>(o, lse, q, k, v, s, r, st);
    case 64: return launch_routed<T, 64>(o, lse, q, k, v, s, r, st);
    case 80: return launch_routed<T, 80>(o, lse, q, k, v, s, r, st);
    case 128: return launch_routed<T, 128>(o, lse, q, k, v, s, r, st);
    }
    return LMK_INVALID;
}

} // namespace

extern "C" int lmk_flash_wgmma_usable(const lmk_attn_shape *s) { return route(s) != FW_NONE; }

extern "C" int lmk_flash_wgmma_fwd(void *o, float *lse, const void *q, const void *k,
                                   const void *v, const lmk_attn_shape *s, void *stream)
{
    const fw_route r = route(s);
    if (r == FW_NONE || !o || !lse || !q || !k || !v)
        return LMK_INVALID;
    cudaStream_t st = (cudaStream_t)stream;
    return s->dtype == LMK_BF16 ? launch_dims<__nv_bfloat16>(o, lse, q, k, v, s, r, st)
                                : launch_dims<__half>(o, lse, q, k, v, s, r, st);
}
