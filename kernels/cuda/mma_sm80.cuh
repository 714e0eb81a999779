/* Warp-level tensor-core helpers for sm_80+ (mma.sync m16n8k16 with float32
 * accumulation, ldmatrix, cp.async), shared by the flash attention kernels
 * (flash_attn.cu) and the causal attention GEMMs (attn_gemm16.cu). Device
 * code only; no state. The mma C layout: lane 4g+t holds rows g and g+8,
 * columns 2t and 2t+1 of each 16×8 block. */
#ifndef LMK_MMA_SM80_CUH
#define LMK_MMA_SM80_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace { /* internal linkage in every file that includes it */

template <typename T> struct tc_ops;
template <> struct tc_ops<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ float2 unpack(uint32_t v) /* the inverse of pack (exact) */
    {
        return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&v));
    }
    static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct tc_ops<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ float2 unpack(uint32_t v) /* the inverse of pack (exact) */
    {
        return __half22float2(*reinterpret_cast<__half2 *>(&v));
    }
    static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Four 8×8 b16 matrices; lane l gives the address of row l%8 of matrix l/8. */
__device__ __forceinline__ void ldsm4(uint32_t r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm4_t(uint32_t r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* A operand (16×16 at row r0, col c0 of a row-major tile with stride ld);
 * also the B operand pair (two 8-column blocks from column c0) of a tile
 * stored k-major ([k][n]) when loaded with ldsm4_t. */
template <typename T>
__device__ __forceinline__ const T *frag_a(const T *s, int ld, int r0, int c0, int lane)
{
    return s + (r0 + (lane & 15)) * ld + c0 + ((lane >> 4) << 3);
}
/* B operand pair (n blocks n0…n0+7 and n0+8…n0+15, k c0…c0+15) of a tile
 * stored n-major ([n][k]), for ldsm4: r0, r1 = block n0; r2, r3 = block n0+8. */
template <typename T>
__device__ __forceinline__ const T *frag_b(const T *s, int ld, int n0, int c0, int lane)
{
    return s + (n0 + (lane & 7) + ((lane >> 4) << 3)) * ld + c0 + (((lane >> 3) & 1) << 3);
}

__device__ __forceinline__ void cp_async16(void *sm, const void *g, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(sm)), "l"(g),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Two floats stored as one pair of T (4 bytes). */
template <typename T>
__device__ __forceinline__ void st2(T *p, float a, float b)
{
    *reinterpret_cast<uint32_t *>(p) = tc_ops<T>::pack(a, b);
}

/* Four 8×8 b16 matrices to shared memory (the inverse of ldsm4): lane l
 * gives the address of row l%8 of matrix l/8. */
__device__ __forceinline__ void stsm4(const void *p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(p)), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3));
}

constexpr float CG_LOG2E = 1.4426950408889634f;

/* e^(x − mx) as softmax.cu computes it for 16-bit tensors (softmax_exp):
 * 2^x on the special-function unit; x = −inf gives 0. */
__device__ __forceinline__ float softmax_exp16(float x, float mx)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(fmaf(x, CG_LOG2E, -mx * CG_LOG2E)));
    return y;
}

/* (a, b) rounded to T and back: the values stored elements of T hold (one
 * packed conversion for the two). */
template <typename T> __device__ __forceinline__ float2 round_pair(float a, float b)
{
    return tc_ops<T>::unpack(tc_ops<T>::pack(a, b));
}

/* The dot product over DH columns of two 16-bit rows a and b (4-byte
 * aligned), by the 4 lanes of an mma row group: lane t takes the pairs at
 * columns 2t + 8c in order of c, then the 4 partial sums are added across
 * the group (every lane returns the sum). */
template <typename T, int DH> __device__ __forceinline__ float row_dot_4lanes(const T *a, const T *b, int t)
{
    a += 2 * t, b += 2 * t;
    float d = 0.0f;
#pragma unroll
    for (int c = 0; c < DH / 8; c++) {
        const float2 x = tc_ops<T>::unpack(*reinterpret_cast<const uint32_t *>(a + 8 * c));
        const float2 y = tc_ops<T>::unpack(*reinterpret_cast<const uint32_t *>(b + 8 * c));
        d = fmaf(x.x, y.x, d);
        d = fmaf(x.y, y.y, d);
    }
    d += __shfl_xor_sync(0xffffffffu, d, 1);
    d += __shfl_xor_sync(0xffffffffu, d, 2);
    return d;
}

} // namespace

#endif
