/* Hopper (sm_90a) primitives shared by the wgmma flash-attention kernels
 * (flash_wgmma.cu: forward; flash_wgmma_bwd.cu: backward) and the naive
 * attention's wgmma GEMMs (attn_mix_wgmma.cu). Include only from
 * translation units compiled for compute_90a (kernels/meson.build); the
 * instructions are guarded by the callers' __CUDA_ARCH_FEAT_SM90_ALL.
 *
 * Contents: shared-memory addresses and wgmma descriptors (128-byte swizzle),
 * the wgmma fence/commit/wait and register pins, mbarriers, TMA bulk tensor
 * loads and stores, named barriers, ex2, 16-bit packing, the wgmma wrappers, and the 3-D
 * tensor maps over (B·H, T, d) 16-bit tensors. Everything sits in an anonymous
 * namespace: each translation unit gets its own copies (device helpers are
 * inlined; the two host helpers are small). */
#ifndef LMK_WGMMA_SM90_CUH
#define LMK_WGMMA_SM90_CUH

#include <cuda.h> /* CUtensorMap and its enums only: cuTensorMapEncodeTiled comes
                     through the runtime's driver entry point */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../attention.h"

namespace {

constexpr int FW_BOX = 64;      /* columns per TMA box: 64 × 2 bytes = one 128-byte swizzle row */

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
/* TMA store: shared src (the 128-byte-swizzled box the map describes) → box
 * at (c0 column, c1 row, c2 head) of the 3-D map; elements past the map's
 * bounds are not written. Completes as a bulk group of the issuing thread:
 * tma_store_commit, then tma_store_wait_read before src is reused or the
 * block exits. The writers of src run fence_proxy_async first (their
 * ordinary stores become visible to the copy engine), then a barrier. */
__device__ __forceinline__ void tma_store(const CUtensorMap *map, uint32_t src, int c0, int c1,
                                          int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 ::"l"((uint64_t)map), "r"(src), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit()
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
/* returns once this thread's committed bulk stores have read their sources */
__device__ __forceinline__ void tma_store_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
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
/* named barrier id among n threads (a multiple of 32) */
__device__ __forceinline__ void bar_sync_n(int id, int n)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive_n(int id, int n)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
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

/* SS wgmma wrappers (m64n32/64/128k16, both operands in shared memory,
 * either of them transposed); accumulator layout as wg_mma's (above). */
template <typename T> struct wg_mma_ss;
#define LMK_WG_MMA_SS_SPECIALISATION(T_, AB) \
template <> struct wg_mma_ss<T_> { \
    /* d (64×32) = (scale_d ? d : 0) + A·B, A and B in shared memory;
     * TA / TB 1: that operand is MN-major (transposed) */ \
    template <int TA, int TB> \
    static __device__ __forceinline__ void ss32(float (&d)[4][4], uint64_t da, uint64_t db, int scale_d) \
    { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32." AB "." AB " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, " \
                     "%16, %17, p, 1, 1, %19, %20;\n}\n" \
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]) \
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB)); \
    } \
    /* d (64×64) = (scale_d ? d : 0) + A·B, A and B in shared memory;
     * TA / TB 1: that operand is MN-major (transposed) */ \
    template <int TA, int TB> \
    static __device__ __forceinline__ void ss64(float (&d)[8][4], uint64_t da, uint64_t db, int scale_d) \
    { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." AB "." AB " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
                     "%32, %33, p, 1, 1, %35, %36;\n}\n" \
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]) \
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB)); \
    } \
    /* d (64×128) = (scale_d ? d : 0) + A·B, A and B in shared memory;
     * TA / TB 1: that operand is MN-major (transposed) */ \
    template <int TA, int TB> \
    static __device__ __forceinline__ void ss128(float (&d)[16][4], uint64_t da, uint64_t db, int scale_d) \
    { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." AB "." AB " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                     "%64, %65, p, 1, 1, %67, %68;\n}\n" \
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]) \
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB)); \
    } \
};
LMK_WG_MMA_SS_SPECIALISATION(__nv_bfloat16, "bf16")
LMK_WG_MMA_SS_SPECIALISATION(__half, "f16")
#undef LMK_WG_MMA_SS_SPECIALISATION

/* 16 bytes global → shared address dst by cp.async (L2 only) */
__device__ __forceinline__ void cp_async16_to(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

/* 64 rows × 64 columns of 16-bit g (row stride ldg elements) → the chunk at
 * shared address s (1024-aligned) in wgmma's 128-byte swizzle (unit u of
 * row r at r·128 + (u ⊕ r mod 8)·16), by the block's THREADS threads (a
 * divisor of 512), 512 / THREADS 16-byte pieces each; commit and wait are the
 * caller's. */
template <int THREADS, typename T> __device__ __forceinline__ void sw128_chunk_load(uint32_t s, const T *g, size_t ldg)
{
    static_assert(512 % THREADS == 0, "whole pieces per thread");
#pragma unroll
    for (int i = 0; i < 512 / THREADS; i++) {
        const int piece = threadIdx.x + i * THREADS, r = piece >> 3, u = piece & 7;
        cp_async16_to(s + r * 128 + ((u ^ (r & 7)) << 4), g + (size_t)r * ldg + u * 8);
    }
}

/* the descriptor d (sw128_desc) moved on by `bytes` (a multiple of 16): the
 * start-address field (bits 0-13, address / 16) takes the add without a
 * carry, shared addresses being under 256 KB */
__device__ __forceinline__ uint64_t sw128_desc_add(uint64_t d, uint32_t bytes)
{
    return (d & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)d + (bytes >> 4));
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
} // namespace

#endif
