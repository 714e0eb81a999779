/* Flash attention forward on Hopper's warpgroup MMA (wgmma.mma_async,
 * sm_90a only: this file alone is compiled for compute_90a, see
 * kernels/meson.build), fp16/bf16, head dim 64. Same math as the mma.sync
 * forward in flash_attn.cu (attention.h has it): S = Q·Kᵀ, online softmax in
 * log2 units with the scale folded into one FFMA per score, O += P·V, fp32
 * accumulators, lse saved.
 *
 * Block: 128 queries, two warpgroups of 64 rows (256 threads); warp w owns
 * rows 16w…16w+15, laid out in registers exactly as in mma.sync m16n8k16 (the
 * wgmma m64nNk16 fragments are four such warps stacked). Per 64-key tile:
 *   S (64×64 per warpgroup) = 4 × wgmma m64n64k16, A = Q from registers
 *     (kept for the whole block), B = the K tile from shared memory;
 *   softmax on the S accumulators in registers;
 *   O += P·V: 4 × wgmma m64n64k16, A = P rounded to T in registers (the S
 *     accumulator layout is the A layout), B = Vᵀ from shared memory.
 * Shared operands use the no-swizzle canonical layout: 8×16-byte "core
 * matrices", K-major, adjacent core matrices 128 B apart along K (LBO) and
 * 1024 B along N (SBO). K tiles go there straight by cp.async (one 16-byte
 * chunk = one core-matrix row); V tiles arrive row-major (cp.async) and the
 * warps transpose them into Vᵀ with ldmatrix.trans + 32-bit stores. Tiles
 * are double-buffered; a warpgroup skips key tiles wholly above its rows
 * (causal). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "flash_wgmma.h"
extern "C" {
#include "../status.h"
}

namespace {

constexpr int WQ = 128, WK = 64, W_NT = 256, WD = 64; /* queries, keys / tile, threads, d */
constexpr int WLD = WD + 8;                            /* padded row of Q and V staging */
constexpr int CORE_LBO = 128, CORE_SBO = 1024;         /* bytes: along K, along N (8 rows × 128 B) */
constexpr float W_LN2 = 0.6931471805599453f;
constexpr size_t W_SMEM = sizeof(uint16_t) * ((size_t)2 * WK * WD /* K core ×2 */ + WK * WD /* Vᵀ */ +
                                              2 * WK * WLD /* V staging ×2 */ + WQ * WLD /* Q */);

__device__ __forceinline__ uint32_t saddr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Shared-memory matrix descriptor, no swizzle. */
__device__ __forceinline__ uint64_t wg_desc(const void *p)
{
    return (uint64_t)((saddr(p) & 0x3FFFF) >> 4) | ((uint64_t)(CORE_LBO >> 4) << 16) |
           ((uint64_t)(CORE_SBO >> 4) << 32);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait0()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
__device__ __forceinline__ void proxy_fence()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* keeps the compiler from moving accumulator reads/writes across wgmma */
__device__ __forceinline__ void pin(float (&d)[8][4])
{
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            asm volatile("" : "+f"(d[j][e])::"memory");
}

template <typename T> struct wg_ops;
template <> struct wg_ops<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    /* d (64×64, this warp's 16 rows) += a (64×16, registers) · B (16×64, desc) */
    static __device__ __forceinline__ void mma(float (&d)[8][4], const uint32_t (&a)[4],
                                               uint64_t desc)
    {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};
template <> struct wg_ops<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ void mma(float (&d)[8][4], const uint32_t (&a)[4],
                                               uint64_t desc)
    {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

__device__ __forceinline__ float wg_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ void cp16(void *sm, const void *g, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr(sm)), "l"(g),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit_() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait_()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* sm (ROWS, WLD) row-major ← rows row0… of g (Tn, WD); rows past Tn zero */
template <typename T, int ROWS>
__device__ __forceinline__ void rows_async(T *sm, const T *g, int row0, int Tn)
{
    for (int idx = threadIdx.x; idx < ROWS * (WD / 8); idx += W_NT) {
        const int r = idx / (WD / 8), c = (idx % (WD / 8)) * 8, gr = row0 + r;
        cp16(sm + r * WLD + c, g + (size_t)(gr < Tn ? gr : 0) * WD + c, gr < Tn);
    }
}
/* K tile (WK keys, WD) into core-matrix layout: key r, chunk c8 at
 * (r/8)·SBO + c8·LBO + (r%8)·16 bytes */
template <typename T>
__device__ __forceinline__ void k_core_async(T *sm, const T *g, int row0, int Tn)
{
    for (int idx = threadIdx.x; idx < WK * (WD / 8); idx += W_NT) {
        const int r = idx / (WD / 8), c8 = idx % (WD / 8), gr = row0 + r;
        char *dst = (char *)sm + (r >> 3) * CORE_SBO + c8 * CORE_LBO + (r & 7) * 16;
        cp16(dst, g + (size_t)(gr < Tn ? gr : 0) * WD + c8 * 8, gr < Tn);
    }
}

__device__ __forceinline__ void ldsm4(uint32_t r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr(p)));
}
__device__ __forceinline__ void ldsm4_t(uint32_t r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr(p)));
}
/* lane's ldmatrix row address for the 16×16 block at (r0, c0), row-major ld */
template <typename T>
__device__ __forceinline__ const T *blk(const T *s, int r0, int c0, int lane)
{
    return s + (r0 + (lane & 15)) * WLD + c0 + ((lane >> 4) << 3);
}

// o: (B, H, T, 64); lse: (B, H, T); q, k, v: (B, H, T, 64).
// grid (ceil(T/128), B·H), 256 threads; block x runs query tile
// gridDim.x−1−x (longest causal rows first).
template <typename T>
__global__ void __launch_bounds__(W_NT) flash_fwd_wgmma_kernel(T *o, float *lse, const T *q,
                                                                const T *k, const T *v, int Tn,
                                                                int causal, float scale_log2)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int NS = WK / 8, NO = WD / 8;
    extern __shared__ __align__(128) unsigned char smraw[];
    T *sK = (T *)smraw, *sVt = sK + 2 * WK * WD, *sVs = sVt + WK * WD, *sQ = sVs + 2 * WK * WLD;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * WQ;
    const size_t bh = blockIdx.y, base = bh * Tn * WD;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int wg_last = q0 + 64 * (w >> 2) + 63; /* this warpgroup's last row */
    const int row0 = q0 + 16 * w + g;            /* this lane's rows: row0, row0 + 8 */

    const int kend = causal ? min(Tn, q0 + WQ) : Tn, nk = (kend + WK - 1) / WK;
    rows_async<T, WQ>(sQ, q + base, q0, Tn);
    cp_commit_();
    k_core_async<T>(sK, k + base, 0, Tn);
    rows_async<T, WK>(sVs, v + base, 0, Tn);
    cp_commit_();
    cp_wait_<1>();
    __syncthreads();
    uint32_t qf[WD / 16][4];
#pragma unroll
    for (int kk = 0; kk < WD / 16; kk++)
        ldsm4(qf[kk], blk(sQ, 16 * w, 16 * kk, lane));

    float acc[NO][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < NO; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    for (int it = 0; it < nk; it++) {
        const int k0 = it * WK, buf = it & 1;
        if (it + 1 < nk) {
            k_core_async<T>(sK + (buf ^ 1) * WK * WD, k + base, k0 + WK, Tn);
            rows_async<T, WK>(sVs + (buf ^ 1) * WK * WLD, v + base, k0 + WK, Tn);
            cp_commit_();
            cp_wait_<1>();
        } else {
            cp_wait_<0>();
        }
        proxy_fence(); /* this thread's K chunks, for the wgmma reads */
        __syncthreads();
        {   /* Vᵀ (core layout) ← V staging: 16 blocks of 16×16, two per warp */
            const T *cV = sVs + buf * WK * WLD;
            char *vt = (char *)sVt;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int b = 2 * w + i, kp = b >> 2, dp = b & 3;
                uint32_t r[4];
                ldsm4_t(r, blk(cV, 16 * kp, 16 * dp, lane));
                char *p = vt + (2 * dp) * CORE_SBO + (2 * kp) * CORE_LBO + g * 16 + 4 * t;
                *(uint32_t *)p = r[0];
                *(uint32_t *)(p + CORE_LBO) = r[1];
                *(uint32_t *)(p + CORE_SBO) = r[2];
                *(uint32_t *)(p + CORE_SBO + CORE_LBO) = r[3];
            }
        }
        proxy_fence();
        __syncthreads();
        if (!causal || k0 <= wg_last) { /* warpgroup-uniform */
            const T *cK = sK + buf * WK * WD;
            float s[NS][4];
#pragma unroll
            for (int j = 0; j < NS; j++)
                s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
            pin(s);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < WD / 16; kk++) /* 16 d = two 128-byte core columns */
                wg_ops<T>::mma(s, qf[kk], wg_desc((const char *)cK + kk * 2 * CORE_LBO));
            wg_commit();
            wg_wait0();
            pin(s);
            const bool mask = k0 + WK > Tn || (causal && k0 + WK - 1 > q0 + 16 * w);
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int col = k0 + 8 * j + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
                    if (mask && (col >= Tn || (causal && col > row)))
                        s[j][e] = -INFINITY;
                    mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
                }
            float alpha[2], msub[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                const float mnew = fmaxf(m[h], mx[h] * scale_log2);
                msub[h] = mnew == -INFINITY ? 0.f : mnew;
                alpha[h] = wg_exp2(m[h] - msub[h]);
                m[h] = mnew;
                l[h] *= alpha[h];
            }
#pragma unroll
            for (int j = 0; j < NO; j++) {
                acc[j][0] *= alpha[0];
                acc[j][1] *= alpha[0];
                acc[j][2] *= alpha[1];
                acc[j][3] *= alpha[1];
            }
            uint32_t pa[WK / 16][4];
#pragma unroll
            for (int kp = 0; kp < WK / 16; kp++)
#pragma unroll
                for (int hb = 0; hb < 2; hb++) {
                    const float *c = s[2 * kp + hb];
                    const float p0 = wg_exp2(fmaf(c[0], scale_log2, -msub[0]));
                    const float p1 = wg_exp2(fmaf(c[1], scale_log2, -msub[0]));
                    const float p2 = wg_exp2(fmaf(c[2], scale_log2, -msub[1]));
                    const float p3 = wg_exp2(fmaf(c[3], scale_log2, -msub[1]));
                    pa[kp][2 * hb] = wg_ops<T>::pack(p0, p1);
                    pa[kp][2 * hb + 1] = wg_ops<T>::pack(p2, p3);
                    l[0] += p0 + p1; /* unrounded, as FA2 */
                    l[1] += p2 + p3;
                }
            pin(acc);
            wg_fence();
#pragma unroll
            for (int kp = 0; kp < WK / 16; kp++) /* 16 keys = two core columns of Vᵀ */
                wg_ops<T>::mma(acc, pa[kp], wg_desc((const char *)sVt + kp * 2 * CORE_LBO));
            wg_commit();
            wg_wait0();
            pin(acc);
        }
        __syncthreads(); /* buffer buf and Vᵀ are rewritten next */
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const int row = row0 + 8 * h;
        if (row >= Tn)
            continue;
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
#pragma unroll
        for (int j = 0; j < NO; j++)
            *reinterpret_cast<uint32_t *>(o + base + (size_t)row * WD + 8 * j + 2 * t) =
                wg_ops<T>::pack(acc[j][2 * h] * inv, acc[j][2 * h + 1] * inv);
        if (t == 0)
            lse[bh * Tn + row] = (m[h] + log2f(l[h])) * W_LN2;
    }
#endif
}

template <typename T>
int launch(void *o, float *lse, const void *q, const void *k, const void *v,
           const lmk_attn_shape *s, cudaStream_t st)
{
    auto kern = flash_fwd_wgmma_kernel<T>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)W_SMEM) !=
        cudaSuccess)
        return LMK_DEVICE;
    dim3 grid((s->T + WQ - 1) / WQ, s->B * s->H);
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)WD);
    kern<<<grid, W_NT, W_SMEM, st>>>((T *)o, lse, (const T *)q, (const T *)k, (const T *)v, s->T,
                                     s->causal, scale_log2);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

} // namespace

/* Build-time knob: 1 = flash_attn.cu's full-grid forward calls this one for
 * the shapes lmk_flash_wgmma_usable accepts. Off: on the H200 it passed
 * flash_vs_torch but ran 2.61–2.63 ms against the mma.sync forward's
 * 2.51–2.53 (bf16 B1 H16 T16384 causal, PERF.md). */
#ifndef LMK_FLASH_WGMMA
#define LMK_FLASH_WGMMA 0
#endif

extern "C" int lmk_flash_wgmma_usable(const lmk_attn_shape *s)
{
    if (!LMK_FLASH_WGMMA || !s || s->d != WD || (s->dtype != LMK_F16 && s->dtype != LMK_BF16))
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
    return s->dtype == LMK_BF16 ? launch<__nv_bfloat16>(o, lse, q, k, v, s, st)
                                : launch<__half>(o, lse, q, k, v, s, st);
}
