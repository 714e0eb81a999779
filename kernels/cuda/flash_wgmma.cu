/* Flash attention forward on Hopper's warpgroup MMA (wgmma.mma_async and the
 * tensor memory accelerator, sm_90a only: this file alone is compiled for
 * compute_90a, see kernels/meson.build), fp16/bf16, head dim 64 or 128. Same
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
 *     of S_j then runs while that P·V runs. With PINGPONG (NC 2) the two
 *     consumers take turns issuing their MMAs (named barriers 1 and 2).
 *     Causal: every consumer runs every key tile of its block (a tile wholly
 *     after a consumer's rows only adds exact zeros).
 * Shared tiles are 64-column boxes of 128-byte rows in the 128-byte swizzle
 * that TMA writes and wgmma reads (8-row atoms of 1024 bytes). */
#include <cuda.h> /* CUtensorMap and its enums only: cuTensorMapEncodeTiled comes
                     through the runtime's driver entry point */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "flash_wgmma.h"
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
 *                             LMK_FLASH_WGMMA_D64_WG 2) alternate their MMAs. The
 *                             last H200 call measured it 3–4% faster at d 128
 *                             (1.732 against 1.808 ms, 16 heads T16384 causal) but
 *                             only builds without it were correctness-checked
 *                             there: off until a GPU check of a build with it. */
#ifndef LMK_FLASH_WGMMA
#define LMK_FLASH_WGMMA 1
#endif
#ifndef LMK_FLASH_WGMMA_PINGPONG
#define LMK_FLASH_WGMMA_PINGPONG 0
#endif
/*   LMK_FLASH_WGMMA_D64_WG    consumer warpgroups per block at d 64: 2 (128
 *                             queries) or 3 (192, FlashAttention-3's choice: more
 *                             softmax work in flight beside the MMAs; 1.33 against
 *                             1.47 ms, 1.36 with two and ping-pong); d 128 always
 *                             2 (its accumulators need 232 registers). */
#ifndef LMK_FLASH_WGMMA_D64_WG
#define LMK_FLASH_WGMMA_D64_WG 3
#endif

namespace {

constexpr int FW_BN = 128;      /* keys per tile */
constexpr int FW_BOX = 64;      /* columns per TMA box: 64 × 2 bytes = one 128-byte swizzle row */
constexpr float FW_LN2 = 0.6931471805599453f;

/* Block plan for head dim D and NC consumer warpgroups of 64 query rows:
 * threads, queries per block, register split (setmaxnreg: producer /
 * consumers, within the 64K registers of one block per SM), shared memory
 * (bytes from a 1024-aligned base). */
template <int D, int NC> struct fw_plan {
    static_assert(NC == 2 || NC == 3, "two or three consumer warpgroups");
    static constexpr int THREADS = 128 * (NC + 1);
    static constexpr int BM = 64 * NC;
    static constexpr int REG_PRODUCER = NC == 2 ? 40 : 32;
    static constexpr int REG_CONSUMER = NC == 2 ? 232 : 160;
    static constexpr int NB = D / FW_BOX;                   /* boxes per row of Q, K, V */
    static constexpr int STAGES = D <= 64 ? 3 : 2;          /* K/V ring depth */
    static constexpr int Q_WG = 64 * D * 2;                 /* one consumer's Q rows */
    static constexpr int TILE = FW_BN * D * 2;              /* one K or V tile */
    static constexpr int OFF_K = NC * Q_WG;
    static constexpr int OFF_V = OFF_K + STAGES * TILE;
    static constexpr int OFF_BAR = OFF_V + STAGES * TILE;   /* q_full, k_full[S], v_full[S], k_empty[S], v_empty[S] */
    static constexpr int BYTES = OFF_BAR + 8 * (1 + 4 * STAGES);
    static constexpr size_t SMEM = BYTES + 1024;            /* slack to align the base */
};

__device__ __forceinline__ uint32_t saddr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* wgmma shared-memory descriptor, 128-byte swizzle: start address, leading
 * byte offset (MN-major: stride between 64-column atoms; unused K-major),
 * stride byte offset (between 8-row atoms: 1024). */
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* keeps the compiler from moving register reads/writes across a wgmma wait */
template <int R> __device__ __forceinline__ void pin(float (&d)[R][4])
{
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            asm volatile("" : "+f"(d[j][e])::"memory");
}
template <int R> __device__ __forceinline__ void pin(uint32_t (&a)[R][4])
{
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            asm volatile("" : "+r"(a[j][e])::"memory");
}

/* mbarriers (shared::cta) */
__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* returns once the phase of parity `parity` has completed */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
/* TMA: box at (c0 column, c1 row, c2 head) of the 3-D map → shared dst,
 * completing its bytes on bar */
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0,
                                         int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}
/* named barriers among the two consumer warpgroups (256 threads) */
__device__ __forceinline__ void bar_sync(int id)
{
    asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id)
{
    asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

__device__ __forceinline__ float fw_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

template <typename T> struct fw_pack;
template <> struct fw_pack<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};
template <> struct fw_pack<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};

/* wgmma wrappers; accumulator fragment d[j][e] of a 64×N result: warp w of
 * the warpgroup, lane (g = lane/4, t = lane%4) holds rows 16w+g (e 0, 1) and
 * 16w+g+8 (e 2, 3), columns 8j+2t+(e&1). An A fragment a[4] from registers
 * (64×16): rows 16w+g / +8, columns 2t, 2t+1 / +8 (a[0] (g, 2t), a[1] (g+8, 2t),
 * a[2] (g, 2t+8), a[3] (g+8, 2t+8)) — columns 16k… of the accumulator layout. */
template <typename T> struct wg_mma;
/* The specialisation of wg_mma for element type T_ whose PTX type is AB
 * ("bf16", "f16"): the same three instructions, only the operand type differs. */
#define LMK_WG_MMA_SPECIALISATION(T_, AB) \
template <> struct wg_mma<T_> { \
    /* d (64×128) = (scale_d ? d : 0) + A·B, A and B K-major in shared memory */ \
    static __device__ __forceinline__ void ss128(float (&d)[16][4], uint64_t da, uint64_t db, int scale_d) \
    { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." AB "." AB " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                     "%64, %65, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]) \
                     : "l"(da), "l"(db), "r"(scale_d)); \
    } \
    /* d (64×64) += a (64×16, registers) · B (16×64, shared, MN-major: transposed) */ \
    static __device__ __forceinline__ void rs64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db) \
    { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." AB "." AB " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
                     "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n" \
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]) \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1)); \
    } \
    /* d (64×128) += a (64×16, registers) · B (16×128, shared, MN-major: transposed) */ \
    static __device__ __forceinline__ void rs128(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db) \
    { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." AB "." AB " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                     "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n" \
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]) \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1)); \
    } \
};
LMK_WG_MMA_SPECIALISATION(__nv_bfloat16, "bf16")
LMK_WG_MMA_SPECIALISATION(__half, "f16")
#undef LMK_WG_MMA_SPECIALISATION

/* Online softmax of one 64×128 score tile in place (this thread's rows row0
 * and row0 + 8): MASK: keys ≥ Tn and, causal, keys after the row first set to
 * −∞ (a separate instantiation, so that unmasked tiles carry no mask code);
 * updates the running max m (log2 units, scale folded in) and sum l (rescaled
 * by alpha, then plus the unrounded exponentials); leaves 2^(s·scale_log2 − m)
 * in sc. */
template <bool MASK>
__device__ __forceinline__ void fw_softmax(float (&sc)[FW_BN / 8][4], float (&m)[2], float (&l)[2],
                                           float (&alpha)[2], int k0, int Tn, int causal,
                                           int row0, int t, float scale_log2)
{
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < FW_BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if (MASK) {
                const int col = k0 + 8 * j + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
                if (col >= Tn || (causal && col > row))
                    sc[j][e] = -INFINITY;
            }
            mx[e >> 1] = fmaxf(mx[e >> 1], sc[j][e]);
        }
    float msub[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float mnew = fmaxf(m[h], mx[h] * scale_log2);
        msub[h] = mnew == -INFINITY ? 0.f : mnew;
        alpha[h] = fw_exp2(m[h] - msub[h]);
        m[h] = mnew;
        l[h] *= alpha[h];
    }
#pragma unroll
    for (int j = 0; j < FW_BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            sc[j][e] = fw_exp2(fmaf(sc[j][e], scale_log2, -msub[e >> 1]));
            l[e >> 1] += sc[j][e];
        }
}

/* o: (B, H, T, D); lse: (B, H, T); Q, K, V through the 3-D tensor maps
 * (columns D, rows T, heads B·H; Q boxes 64 × 64 rows, K/V boxes 64 × 128).
 * grid (ceil(T/BM), B·H), 128·(NC+1) threads; block x runs query tile
 * gridDim.x−1−x (longest causal rows first). */
template <typename T, int D, int NC, bool PP>
__global__ void __launch_bounds__(fw_plan<D, NC>::THREADS, 1)
    flash_fwd_wgmma_kernel(const __grid_constant__ CUtensorMap tmq,
                           const __grid_constant__ CUtensorMap tmk,
                           const __grid_constant__ CUtensorMap tmv, T *o, float *lse, int Tn,
                           int causal, float scale_log2)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using P = fw_plan<D, NC>;
    static_assert(!PP || NC == 2, "ping-pong between two consumers");
    constexpr int S = P::STAGES, NB = P::NB;
    extern __shared__ __align__(1024) unsigned char smraw[];
    const uint32_t base = (saddr(smraw) + 1023u) & ~1023u;
    const uint32_t sQ = base, sK = base + P::OFF_K, sV = base + P::OFF_V;
    const uint32_t q_full = base + P::OFF_BAR;
    auto k_full = [&](int s) { return q_full + 8u * (1 + s); };
    auto v_full = [&](int s) { return q_full + 8u * (1 + S + s); };
    auto k_empty = [&](int s) { return q_full + 8u * (1 + 2 * S + s); };
    auto v_empty = [&](int s) { return q_full + 8u * (1 + 3 * S + s); };

    const int q0 = (gridDim.x - 1 - blockIdx.x) * P::BM, bh = blockIdx.y;
    const int kend = causal ? min(Tn, q0 + P::BM) : Tn, nk = (kend + FW_BN - 1) / FW_BN;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
#pragma unroll
        for (int s = 0; s < S; s++) {
            mbar_init(k_full(s), 1);
            mbar_init(v_full(s), 1);
            mbar_init(k_empty(s), 4 * NC); /* one arrival per consumer warp */
            mbar_init(v_empty(s), 4 * NC);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) { /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(P::REG_PRODUCER) : "memory");
        if (threadIdx.x == 0) {
            mbar_expect_tx(q_full, NC * P::Q_WG);
#pragma unroll
            for (int c = 0; c < NC; c++)
#pragma unroll
                for (int b = 0; b < NB; b++)
                    tma_load(sQ + c * P::Q_WG + b * 64 * 128, &tmq, q_full, FW_BOX * b,
                             q0 + 64 * c, bh);
            for (int j = 0; j < nk; j++) {
                const int s = j % S;
                const uint32_t ph = (j / S) & 1;
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
        return;
    }

    /* consumers: c = 0…NC−1, rows q0+64c…q0+64c+63 */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(P::REG_CONSUMER) : "memory");
    const int c = wg - 1, w = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int wrow = q0 + 64 * c + 16 * w, row0 = wrow + g; /* warp's first row; this lane's rows row0, row0 + 8 */
    const uint32_t qa = sQ + c * P::Q_WG;

    float acc[D / 8][4], sc[FW_BN / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f},
                                          alpha[2];
    uint32_t pa[FW_BN / 16][4];
#pragma unroll
    for (int j = 0; j < D / 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    auto issue_s = [&](int s) { /* sc = Q·K(stage s)ᵀ */
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
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
            fw_softmax<true>(sc, m, l, alpha, k0, Tn, causal, row0, t, scale_log2);
        else
            fw_softmax<false>(sc, m, l, alpha, k0, Tn, causal, row0, t, scale_log2);
    };
    auto rescale = [&]() { /* acc (relative to the previous max) *= alpha */
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
     * Each consumer takes nk turns; consumer 1 skips the hand-over after its
     * last, so every arrival meets a wait. */
    if (PP && c == 1)
        bar_arrive(1);

    mbar_wait(q_full, 0);
    mbar_wait(k_full(0), 0);
    if (PP)
        bar_sync(1 + c);
    issue_s(0);
    if (PP && !(c == 1 && nk == 1))
        bar_arrive(2 - c);
    wg_wait<0>();
    pin(sc);
    if (lane == 0)
        mbar_arrive(k_empty(0));
    softmax(0); /* alpha 0 here: acc is still 0 */
    to_p();

    for (int j = 1; j < nk; j++) {
        const int s = j % S, sp = (j - 1) % S;
        mbar_wait(k_full(s), (j / S) & 1);
        if (PP)
            bar_sync(1 + c);
        issue_s(s);
        rescale(); /* by tile j−1's alpha, while S_j runs (acc holds tiles ≤ j−2) */
        mbar_wait(v_full(sp), ((j - 1) / S) & 1);
        issue_pv(sp);
        if (PP && !(c == 1 && j == nk - 1))
            bar_arrive(2 - c);
        wg_wait<1>(); /* S_j done, P_{j−1}·V_{j−1} may still run */
        pin(sc);
        if (lane == 0)
            mbar_arrive(k_empty(s));
        softmax(j * FW_BN);
        wg_wait<0>();
        pin(acc);
        pin(pa);
        if (lane == 0)
            mbar_arrive(v_empty(sp));
        to_p();
    }
    {
        const int sp = (nk - 1) % S;
        rescale();
        mbar_wait(v_full(sp), ((nk - 1) / S) & 1);
        issue_pv(sp);
        wg_wait<0>();
        pin(acc);
        if (lane == 0)
            mbar_arrive(v_empty(sp));
    }

    const size_t rbase = (size_t)bh * Tn;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const int row = row0 + 8 * h;
        if (row >= Tn)
            continue;
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
        T *orow = o + (rbase + row) * D;
#pragma unroll
        for (int j = 0; j < D / 8; j++)
            *reinterpret_cast<uint32_t *>(orow + 8 * j + 2 * t) =
                fw_pack<T>::pack(acc[j][2 * h] * inv, acc[j][2 * h + 1] * inv);
        if (t == 0)
            lse[rbase + row] = (m[h] + log2f(l[h])) * FW_LN2;
    }
#endif
}

/* cuTensorMapEncodeTiled, through the runtime (no link against libcuda) */
typedef CUresult (*fw_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                 const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

fw_encode_fn fw_encoder(void)
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult qr;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &qr) != cudaSuccess ||
        qr != cudaDriverEntryPointSuccess)
        return nullptr;
    return (fw_encode_fn)fn;
}

/* map over x (B·H heads, T rows, d columns, 16-bit), boxes of 64 columns ×
 * rows, 128-byte swizzle, out-of-range rows read as zeros */
bool fw_map(fw_encode_fn enc, CUtensorMap *map, const void *x, const lmk_attn_shape *s, int rows)
{
    const cuuint64_t dims[3] = {(cuuint64_t)s->d, (cuuint64_t)s->T, (cuuint64_t)s->B * s->H};
    const cuuint64_t strides[2] = {(cuuint64_t)s->d * 2, (cuuint64_t)s->T * s->d * 2};
    const cuuint32_t box[3] = {(cuuint32_t)FW_BOX, (cuuint32_t)rows, 1}, es[3] = {1, 1, 1};
    return enc(map,
               s->dtype == LMK_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                    : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
               3, const_cast<void *>(x), dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T, int D>
int launch(void *o, float *lse, const void *q, const void *k, const void *v,
           const lmk_attn_shape *s, cudaStream_t st)
{
    const fw_encode_fn enc = fw_encoder();
    CUtensorMap mq, mk, mv;
    if (!enc || !fw_map(enc, &mq, q, s, 64) || !fw_map(enc, &mk, k, s, FW_BN) ||
        !fw_map(enc, &mv, v, s, FW_BN))
        return LMK_DEVICE;
    constexpr int NC = D <= 64 ? LMK_FLASH_WGMMA_D64_WG : 2;
    using P = fw_plan<D, NC>;
    auto kern = flash_fwd_wgmma_kernel<T, D, NC, NC == 2 && LMK_FLASH_WGMMA_PINGPONG != 0>;
    const size_t smem = P::SMEM;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
        return LMK_DEVICE;
    dim3 grid((s->T + P::BM - 1) / P::BM, s->B * s->H);
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D);
    kern<<<grid, P::THREADS, smem, st>>>(mq, mk, mv, (T *)o, lse, s->T, s->causal, scale_log2);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

} // namespace

extern "C" int lmk_flash_wgmma_usable(const lmk_attn_shape *s)
{
    if (!LMK_FLASH_WGMMA || !s || (s->d != 64 && s->d != 128) ||
        (s->dtype != LMK_F16 && s->dtype != LMK_BF16) || s->T < 1 ||
        (long long)s->B * s->H > 65535 || s->B < 1 || s->H < 1)
        return 0;
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0;
    return major == 9 && minor == 0; /* sm_90a code runs on compute capability 9.0 only */
}

extern "C" int lmk_flash_wgmma_fwd(void *o, float *lse, const void *q, const void *k,
                                   const void *v, const lmk_attn_shape *s, void *stream)
{
    if (!lmk_flash_wgmma_usable(s) || !o || !lse || !q || !k || !v)
        return LMK_INVALID;
    cudaStream_t st = (cudaStream_t)stream;
    if (s->d == 64)
        return s->dtype == LMK_BF16 ? launch<__nv_bfloat16, 64>(o, lse, q, k, v, s, st)
                                    : launch<__half, 64>(o, lse, q, k, v, s, st);
    return s->dtype == LMK_BF16 ? launch<__nv_bfloat16, 128>(o, lse, q, k, v, s, st)
                                : launch<__half, 128>(o, lse, q, k, v, s, st);
}
