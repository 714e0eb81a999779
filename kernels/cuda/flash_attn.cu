/* Flash attention (FA2-style), forward and recomputing backward, fused; the
 * math and shapes are in attention.h.
 *
 * Forward: one block per (64 queries, b·h). The query tile stays in shared
 * memory; for each 64-key tile, S = Q·Kᵀ (scaled, in log2 units), online
 * softmax with a running max m and sum l per row, acc = acc·2^(m_old−m_new)
 * + P·V. O = acc / l, lse = (m + log2 l)·ln 2.
 * Backward: D = rowsum(dO∘O); dK/dV kernel (one block per 64 keys, looping
 * over query tiles: P and dP recomputed, dV += Pᵀ·dO, dK += s·dSᵀ·Q); then
 * either (lmk_attn_shape.atomic_dq, where supported) the same kernel adds
 * s·dS·K of each tile to a float32 dQ by atomics — the single pass, whose
 * rounding order varies between runs — or, deterministic, a dQ kernel (one
 * block per 64 queries, looping over key tiles: dQ += s·dS·K; no atomics,
 * every output element has one writer).
 *
 * fp16/bf16 (16-byte aligned tensors): forward and both backward kernels
 * run on tensor cores (mma.sync m16n8k16, fp32 accumulate; the section
 * "tensor-core path" below; on sm_90 the wgmma kernels of flash_wgmma.cu and
 * flash_wgmma_bwd.cu where they are usable). fp32 with 16-byte aligned
 * tensors runs 3xTF32 on the tensor cores (flash_f32tc.cu, knob
 * LMK_FLASH_F32TC, on) or, with the knob off, the pipelined CUDA-core
 * forward and single-pass backward (sections "fp32 forward, pipelined" and
 * "fp32 single-pass backward, pipelined"); the
 * deterministic fp32 backward, unaligned fp32, and fp16/bf16 tensors that
 * are not 16-byte aligned run the CUDA-core kernels that follow: float32 math
 * (fp16/bf16 converted on load, rounded on store), 256 threads; thread t
 * owns rows 4·(t/16)…+3 of a 64-row tile and columns t%16 + 16·j, so row
 * reductions are shuffles over 16 lanes. Shared tiles are (64, d+1) floats
 * (odd stride: no bank conflicts in either access pattern). Tail tiles are
 * zero-filled and masked. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <initializer_list>

#include "../attention.h"
#include "device_query.cuh"
#include "flash_wgmma.h"
#include "flash_f32tc.h"
#include "flash_wgmma_bwd.h"
#include "mma_sm80.cuh"
extern "C" {
#include "../status.h"
}

namespace {

constexpr int BT = 64;   /* rows of a query or key tile */
constexpr int NT = 256;  /* threads per block */
constexpr int PS = BT + 4; /* row stride of the (64, 64) P / dS tiles (16-byte rows) */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ float ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float *p, float x) { *p = x; }
__device__ __forceinline__ void st(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

/* Row stride of the (64, D) float tiles: 16-byte rows (float4 loads along
 * d), and rows 16 apart land 4 banks apart. */
template <int D> constexpr int ldf() { return D + 4; }

/* sm (64, D+4) ← rows row0… of g (Tn, D); rows past Tn are zero. */
template <typename T, int D>
__device__ __forceinline__ void load_tile(float *sm, const T *g, int row0, int Tn)
{
    for (int idx = threadIdx.x; idx < BT * D; idx += NT) {
        int r = idx / D, c = idx - r * D;
        int gr = row0 + r;
        sm[r * ldf<D>() + c] = gr < Tn ? ld(g + (size_t)gr * D + c) : 0.f;
    }
}

__device__ __forceinline__ float4 lds4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ __forceinline__ float comp(const float4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* Column of output element e (0 … D/16−1) of thread column cb (0 … 15) in
 * mm_pb's results: 4 adjacent columns per float4 load where D is a multiple
 * of 64, 2 at d 32, else 16 apart (d 16, 80). */
template <int D> __device__ __forceinline__ int pb_col(int cb, int e)
{
    if constexpr (D % 64 == 0)
        return 4 * cb + 64 * (e >> 2) + (e & 3);
    else if constexpr (D == 32)
        return 2 * cb + e;
    else
        return cb + 16 * e;
}

/* acc[i][j] += Σ_c A[a0+RS·i][c]·B[b0+CS·j][c];  A, B: (64, D+4) shared. Four
 * c at a time by float4 loads (8 loads per 64 FMA; c still in order); the c
 * loop unrolled UNROLL times. */
template <int D, int RS, int CS, int UNROLL>
__device__ __forceinline__ void mm_abt_strided(float acc[4][4], const float *A, const float *B, int a0,
                                               int b0)
{
#pragma unroll UNROLL
    for (int c = 0; c < D; c += 4) {
        float4 a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            a[i] = lds4(A + (a0 + RS * i) * ldf<D>() + c);
#pragma unroll
        for (int j = 0; j < 4; j++)
            b[j] = lds4(B + (b0 + CS * j) * ldf<D>() + c);
#pragma unroll
        for (int e = 0; e < 4; e++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(comp(a[i], e), comp(b[j], e), acc[i][j]);
    }
}

/* acc[i][j] += Σ_c A[ra+i][c]·B[cb+16j][c] */
template <int D>
__device__ __forceinline__ void mm_abt(float acc[4][4], const float *A, const float *B, int ra,
                                       int cb)
{
    mm_abt_strided<D, 1, 16, 2>(acc, A, B, ra, cb);
}

/* B[k][pb_col(cb, 0 … D/16−1)] into b. */
template <int D>
__device__ __forceinline__ void ld_brow(float b[D / 16], const float *Bk, int cb)
{
    if constexpr (D % 64 == 0) {
#pragma unroll
        for (int jj = 0; jj < D / 64; jj++) {
            const float4 v = lds4(Bk + 4 * cb + 64 * jj);
            b[4 * jj] = v.x;
            b[4 * jj + 1] = v.y;
            b[4 * jj + 2] = v.z;
            b[4 * jj + 3] = v.w;
        }
    } else if constexpr (D == 32) {
        const float2 v = *reinterpret_cast<const float2 *>(Bk + 2 * cb);
        b[0] = v.x;
        b[1] = v.y;
    } else {
#pragma unroll
        for (int e = 0; e < D / 16; e++)
            b[e] = Bk[cb + 16 * e];
    }
}

/* acc[i][e] += Σ_k P[ra+i][k]·B[k][pb_col(cb, e)];  P: (64, 68), B: (64, D+4).
 * P four k at a time by float4 loads (k still in order). */
template <int D>
__device__ __forceinline__ void mm_pb(float acc[4][D / 16], const float *P, const float *B,
                                      int ra, int cb)
{
#pragma unroll 1
    for (int k = 0; k < BT; k += 4) {
        float4 p[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            p[i] = lds4(P + (ra + i) * PS + k);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            float b[D / 16];
            ld_brow<D>(b, B + (k + kk) * ldf<D>(), cb);
#pragma unroll
            for (int e = 0; e < D / 16; e++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    acc[i][e] = fmaf(comp(p[i], kk), b[e], acc[i][e]);
        }
    }
}

__device__ __forceinline__ float max16(float x)
{
#pragma unroll
    for (int o = 8; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ float sum16(float x)
{
#pragma unroll
    for (int o = 8; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

template <int D>
constexpr size_t smem_bytes(int tiles, int ptiles)
{
    return sizeof(float) * ((size_t)tiles * BT * ldf<D>() + (size_t)ptiles * BT * PS);
}

// o: (B, H, T, D); lse: (B, H, T); q, k, v: (B, H, T, D). grid (ceil(T/64), B·H)
template <typename T, int D>
__global__ void __launch_bounds__(NT) flash_fwd_kernel(T *o, float *lse, const T *q, const T *k,
                                                        const T *v, int Tn, int causal,
                                                        float scale_log2)
{
    extern __shared__ __align__(16) float sm[];
    float *sQ = sm, *sK = sQ + BT * ldf<D>(), *sV = sK + BT * ldf<D>(), *sP = sV + BT * ldf<D>();
    const int q0 = blockIdx.x * BT;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int t = threadIdx.x, ra = (t >> 4) * 4, cb = t & 15;

    load_tile<T, D>(sQ, q + base, q0, Tn);
    float m[4], l[4], acc[4][D / 16];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.f;
#pragma unroll
        for (int j = 0; j < D / 16; j++)
            acc[i][j] = 0.f;
    }
    const int kend = causal ? min(Tn, q0 + BT) : Tn;
    for (int k0 = 0; k0 < kend; k0 += BT) {
        __syncthreads(); /* the previous tile's readers are done */
        load_tile<T, D>(sK, k + base, k0, Tn);
        load_tile<T, D>(sV, v + base, k0, Tn);
        __syncthreads();
        float s[4][4] = {};
        mm_abt<D>(s, sQ, sK, ra, cb);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int qi = q0 + ra + i;
            float rmax = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int kj = k0 + cb + 16 * j;
                const bool ok = kj < Tn && (!causal || kj <= qi);
                s[i][j] = ok ? s[i][j] * scale_log2 : -INFINITY;
                rmax = fmaxf(rmax, s[i][j]);
            }
            const float mnew = fmaxf(m[i], max16(rmax));
            const float msub = mnew == -INFINITY ? 0.f : mnew;
            const float alpha = exp2f(m[i] - msub);
            float rs = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float p = exp2f(s[i][j] - msub);
                sP[(ra + i) * PS + cb + 16 * j] = p;
                rs += p;
            }
            l[i] = l[i] * alpha + sum16(rs);
            m[i] = mnew;
#pragma unroll
            for (int j = 0; j < D / 16; j++)
                acc[i][j] *= alpha;
        }
        __syncthreads();
        mm_pb<D>(acc, sP, sV, ra, cb);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int qi = q0 + ra + i;
        if (qi >= Tn)
            continue;
        const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
#pragma unroll
        for (int j = 0; j < D / 16; j++)
            st(o + base + (size_t)qi * D + pb_col<D>(cb, j), acc[i][j] * inv);
        if (cb == 0)
            lse[bh * Tn + qi] = (m[i] + log2f(l[i])) * LN2;
    }
}

// dsum: (rows); dout, o: (rows, d). One warp per row, 8 rows per block.
// zero: (rows, d) float32 set to 0 (the single pass's dQ workspace), or NULL;
// d a multiple of 4 and zero 16-byte aligned when given.
template <typename T>
__global__ void flash_bwd_dot_kernel(float *dsum, float *zero, const T *dout, const T *o,
                                     size_t rows, int d)
{
    const size_t row = (size_t)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    if (zero)
        for (int c = 4 * lane; c < d; c += 128)
            *reinterpret_cast<float4 *>(zero + row * d + c) = make_float4(0.f, 0.f, 0.f, 0.f);
    float acc = 0.f;
    for (int c = lane; c < d; c += 32)
        acc += ld(dout + row * d + c) * ld(o + row * d + c);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0)
        dsum[row] = acc;
}

// dk, dv: (B, H, T, D) out; dout, q, k, v: (B, H, T, D); lse, dsum: (B, H, T).
// grid (ceil(T/64), B·H): block = 64 keys.
// DQ (fp32, D a multiple of 64: the single pass): dq (B, H, T, D) float32,
// zeroed, 16-byte aligned, gets scale·dS·K of each tile added by float4
// atomics (thread t: queries ra…ra+3, columns 4·cb + 64·jj…+3); the order
// of the adds, and so dq's rounding, varies between runs. Otherwise dq is
// unused (the dQ kernel computes it).
template <typename T, int D, bool DQ>
__global__ void __launch_bounds__(NT) flash_bwd_dkdv_kernel(T *dk, T *dv, float *dq,
                                                             const T *dout,
                                                             const T *q, const T *k, const T *v,
                                                             const float *lse, const float *dsum,
                                                             int Tn, int causal,
                                                             float scale_log2, float scale)
{
    extern __shared__ __align__(16) float sm[];
    float *sK = sm, *sV = sK + BT * ldf<D>(), *sQ = sV + BT * ldf<D>(), *sdO = sQ + BT * ldf<D>();
    float *sP = sdO + BT * ldf<D>(), *sdS = sP + BT * PS;
    const int k0 = blockIdx.x * BT;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int t = threadIdx.x, ra = (t >> 4) * 4, cb = t & 15;

    load_tile<T, D>(sK, k + base, k0, Tn);
    load_tile<T, D>(sV, v + base, k0, Tn);
    float adk[4][D / 16] = {}, adv[4][D / 16] = {};
    for (int q0 = causal ? k0 : 0; q0 < Tn; q0 += BT) {
        __syncthreads();
        load_tile<T, D>(sQ, q + base, q0, Tn);
        load_tile<T, D>(sdO, dout + base, q0, Tn);
        __syncthreads();
        float s[4][4] = {}, dp[4][4] = {};
        mm_abt<D>(s, sK, sQ, ra, cb);   /* s[i][j]  = K[key]·Q[query] */
        mm_abt<D>(dp, sV, sdO, ra, cb); /* dp[i][j] = V[key]·dO[query] */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int qj = q0 + cb + 16 * j;
            const float L = qj < Tn ? lse[bh * Tn + qj] * LOG2E : 0.f;
            const float Dq = qj < Tn ? dsum[bh * Tn + qj] : 0.f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int ki = k0 + ra + i;
                const bool ok = qj < Tn && ki < Tn && (!causal || ki <= qj);
                const float p = ok ? exp2f(s[i][j] * scale_log2 - L) : 0.f;
                sP[(ra + i) * PS + cb + 16 * j] = p;
                sdS[(ra + i) * PS + cb + 16 * j] = p * (dp[i][j] - Dq);
            }
        }
        __syncthreads();
        mm_pb<D>(adv, sP, sdO, ra, cb);
        mm_pb<D>(adk, sdS, sQ, ra, cb);
        if constexpr (DQ) { /* dq (queries q0 + ra…, columns 4·cb + 64·jj…) += s·dS·K */
            static_assert(D % 64 == 0, "16 threads × 4 columns");
            float aq[4][D / 16];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < D / 16; j++)
                    aq[i][j] = 0.f;
#pragma unroll 2
            for (int kk = 0; kk < BT; kk++) {
                const float4 p = lds4(sdS + kk * PS + ra); /* dS[queries ra…ra+3][key kk] */
                float b[D / 16];
                ld_brow<D>(b, sK + kk * ldf<D>(), cb); /* columns pb_col(cb, j) */
#pragma unroll
                for (int j = 0; j < D / 16; j++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        aq[i][j] = fmaf(comp(p, i), b[j], aq[i][j]);
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int qi = q0 + ra + i;
                if (qi >= Tn)
                    continue;
#pragma unroll
                for (int jj = 0; jj < D / 64; jj++)
                    atomicAdd(reinterpret_cast<float4 *>(dq + base + (size_t)qi * D + 4 * cb + 64 * jj),
                              make_float4(aq[i][4 * jj] * scale, aq[i][4 * jj + 1] * scale,
                                          aq[i][4 * jj + 2] * scale, aq[i][4 * jj + 3] * scale));
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int ki = k0 + ra + i;
        if (ki >= Tn)
            continue;
#pragma unroll
        for (int j = 0; j < D / 16; j++) {
            st(dk + base + (size_t)ki * D + pb_col<D>(cb, j), adk[i][j] * scale);
            st(dv + base + (size_t)ki * D + pb_col<D>(cb, j), adv[i][j]);
        }
    }
}

// dq: (B, H, T, D) out; dout, q, k, v: (B, H, T, D); lse, dsum: (B, H, T).
// grid (ceil(T/64), B·H): block = 64 queries.
template <typename T, int D>
__global__ void __launch_bounds__(NT) flash_bwd_dq_kernel(T *dq, const T *dout, const T *q,
                                                           const T *k, const T *v,
                                                           const float *lse, const float *dsum,
                                                           int Tn, int causal, float scale_log2,
                                                           float scale)
{
    extern __shared__ __align__(16) float sm[];
    float *sQ = sm, *sdO = sQ + BT * ldf<D>(), *sK = sdO + BT * ldf<D>(), *sV = sK + BT * ldf<D>();
    float *sdS = sV + BT * ldf<D>();
    const int q0 = blockIdx.x * BT;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int t = threadIdx.x, ra = (t >> 4) * 4, cb = t & 15;

    load_tile<T, D>(sQ, q + base, q0, Tn);
    load_tile<T, D>(sdO, dout + base, q0, Tn);
    float L[4], Dq[4], adq[4][D / 16] = {};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int qi = q0 + ra + i;
        L[i] = qi < Tn ? lse[bh * Tn + qi] * LOG2E : 0.f;
        Dq[i] = qi < Tn ? dsum[bh * Tn + qi] : 0.f;
    }
    const int kend = causal ? min(Tn, q0 + BT) : Tn;
    for (int k0 = 0; k0 < kend; k0 += BT) {
        __syncthreads();
        load_tile<T, D>(sK, k + base, k0, Tn);
        load_tile<T, D>(sV, v + base, k0, Tn);
        __syncthreads();
        float s[4][4] = {}, dp[4][4] = {};
        mm_abt<D>(s, sQ, sK, ra, cb);
        mm_abt<D>(dp, sdO, sV, ra, cb);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int qi = q0 + ra + i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int kj = k0 + cb + 16 * j;
                const bool ok = qi < Tn && kj < Tn && (!causal || kj <= qi);
                const float p = ok ? exp2f(s[i][j] * scale_log2 - L[i]) : 0.f;
                sdS[(ra + i) * PS + cb + 16 * j] = p * (dp[i][j] - Dq[i]);
            }
        }
        __syncthreads();
        mm_pb<D>(adq, sdS, sK, ra, cb);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int qi = q0 + ra + i;
        if (qi >= Tn)
            continue;
#pragma unroll
        for (int j = 0; j < D / 16; j++)
            st(dq + base + (size_t)qi * D + pb_col<D>(cb, j), adq[i][j] * scale);
    }
}


/* --- tensor-core path (fp16 / bf16): mma.sync m16n8k16, fp32 accumulate ----
 * Every product runs on tensor cores with operands fetched from shared
 * memory by ldmatrix (.trans where the stored layout is the transpose of the
 * operand) and accumulators held in registers in the mma C layout: lane
 * 4g+t holds rows g and g+8, columns 2t and 2t+1 of each 16×8 block. A C
 * block pair converts in registers to the A operand of the next product, so
 * P (forward) and Pᵀ, dSᵀ, dS (backward) never touch shared memory; they are
 * rounded to the element type first, as FA2 does. Tiles arrive by cp.async
 * (16 bytes, rows past T zero-filled), double-buffered: the next K/V (or
 * Q/dO) tile loads while the current one is multiplied. Rows are padded by 8
 * elements, which makes ldmatrix conflict-free for every supported d.
 * Each warp owns 16 rows (forward at d ≤ 64: 32) of the block's tile.
 *   forward: 128 queries / block (8 warps × 16 rows; at d ≤ 64 4 warps ×
 *     32 rows, two m16 tiles sharing every K/V fragment), or 64 (4 warps ×
 *     16) when 128-query blocks would leave SMs with fewer than two; 64-key
 *     tiles; causal
 *     blocks stop at the diagonal, and a warp skips tiles wholly above its
 *     rows. The scale is folded into the exponent (one FFMA per score).
 *   dK/dV:   64 keys / block (4 warps), query tiles of 64 (32 for d > 64);
 *     a warp skips tiles wholly below its keys (causal):
 *     Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, dV += Pᵀ·dO, dK += dSᵀ·Q.
 *   dQ:      64 queries / block (4 warps), 64-key tiles: dQ += dS·K.
 *   single pass (atomic_dq; "single pass" section below): the dK/dV loop
 *     plus dQ += dS·K per tile through shared dSᵀ and float32 atomics.
 *   Grids of fewer blocks than two per SM (one head, short T): blocks of
 *     two 4-warp groups (four for the causal forward and dQ at d ≤ 64)
 *     taking alternate tiles of the loop (forward: 64 queries), merged at
 *     the end (group_sync below).
 * Needs 16-byte aligned tensors (cp.async); otherwise the CUDA-core kernels
 * above run. */
constexpr int MW = 32; /* threads per warp */

/* 2^x by the special-function unit (flush-to-zero; 2^-inf = 0). */
__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* sm (ROWS, D + 8) ← rows row0… of g (Tn, D) by cp.async, issued by NTH
 * threads of which this is tid; rows past Tn are zero. */
template <typename T, int D, int ROWS, int NTH>
__device__ __forceinline__ void tile_async_by(T *sm, const T *g, int row0, int Tn, int tid)
{
    constexpr int CH = D / 8; /* 16-byte chunks per row */
    for (int idx = tid; idx < ROWS * CH; idx += NTH) {
        const int r = idx / CH, c = (idx - r * CH) * 8, gr = row0 + r;
        cp_async16(sm + r * (D + 8) + c, g + (size_t)(gr < Tn ? gr : 0) * D + c, gr < Tn);
    }
}
template <typename T, int D, int ROWS, int NTH>
__device__ __forceinline__ void tile_async(T *sm, const T *g, int row0, int Tn)
{
    tile_async_by<T, D, ROWS, NTH>(sm, g, row0, Tn, threadIdx.x);
}

/* Split loops (SP = 2 or 4): a block runs SP groups of NTH threads, each
 * with its own tile buffers, taking every SP-th tile of the block's loop; the
 * groups meet once at the end to add their partial results (groups 1, 2, 3
 * into group 0 in that order: still deterministic). For grids of fewer blocks than SMs
 * can hold, where the longest block sets the time. group_sync is the
 * barrier of one group (named barrier 1 + grp; the block's with SP = 1). */
template <int SP, int NTH> __device__ __forceinline__ void group_sync(int grp)
{
    if constexpr (SP == 1)
        __syncthreads();
    else
        asm volatile("bar.sync %0, %1;\n" ::"r"(1 + grp), "n"(NTH) : "memory");
}

constexpr int FQ = 128, FQ_SMALL = 64, FK = 64; /* forward: queries / block (two sizes), key tile */
#ifndef LMK_FLASH_FWD_MT /* build-time knob: m16 tiles per warp, 128-query blocks, d ≤ 64 */
#define LMK_FLASH_FWD_MT 2
#endif
constexpr int FWD_MT = LMK_FLASH_FWD_MT;
constexpr int BKV = 64, BKV_NT = 128;            /* dK/dV: keys per block, threads */
constexpr int BQ2 = 64, BK2 = 64, BQ_NT = 128;   /* dQ: queries per block, key tile */
static_assert(BQ2 == BKV, "the dQ and dK/dV grids have the same block count");
template <int D> constexpr int bq_kv() { return D <= 64 ? 64 : 32; } /* dK/dV query tile */
/* Backward kernels at d ≤ 64 come twice: as the compiler likes them (dK/dV
 * 226 registers: 2 blocks per SM; dQ 164: 3), and register-capped for more
 * resident blocks (KV_MINB, DQ_MINB; a few spilled bytes). The capped ones
 * run when the grid fills every SM that many times over (H200, bf16 B1 H16
 * T16384 d64: backward 8.15 → 7.75 ms); smaller grids are bound by the
 * longest block, which the uncapped ones run faster (1 head: 0.93 vs 1.00). */
constexpr int KV_MINB = 3, DQ_MINB = 4;
/* The single-pass kernel at d ≤ 64 on full grids (blocks ≥ FUSED_MINB per
 * SM): resident blocks per SM it is compiled for (register cap); build-time
 * knob for variant builds. 3: 168 registers, 36 spilled bytes (H200, bf16
 * B1 H16 T16384 d64: backward 6.63 → 6.04 ms against 2, uncapped 229). */
#ifndef LMK_FLASH_FUSED_MINB
#define LMK_FLASH_FUSED_MINB 3
#endif
constexpr int FUSED_MINB = LMK_FLASH_FUSED_MINB;

template <typename T, int D, int BM, int SP> constexpr size_t tc_fwd_smem()
{
    return sizeof(T) * (D + 8) * (BM + SP * 4 * FK);
}
/* bytes of one group's query-tile buffers in the dK/dV kernel */
template <typename T, int D> constexpr size_t dkdv_group_bytes()
{
    return sizeof(T) * (D + 8) * 4 * bq_kv<D>() + sizeof(float) * 4 * bq_kv<D>();
}
template <typename T, int D, int SP> constexpr size_t tc_dkdv_smem()
{
    return sizeof(T) * (D + 8) * 2 * BKV + SP * dkdv_group_bytes<T, D>();
}
template <typename T, int D, int SP> constexpr size_t tc_dq_smem()
{
    return sizeof(T) * (D + 8) * (2 * BQ2 + SP * 4 * BK2);
}

// o: (B, H, T, D); lse: (B, H, T); q, k, v: (B, H, T, D).
// grid (ceil(T/BM), B·H), 2·BM/MT threads: warp w owns the 16·MT query rows
// from 16·MT·w (MT m16 tiles: each K or V fragment read from shared memory
// feeds MT mma); block x runs query tile gridDim.x−1−x (the longest causal
// rows start first).
template <typename T, int D, int BM, int MT, int SP>
__global__ void __launch_bounds__(SP * 2 * BM / MT) flash_fwd_mma_kernel(T *o, float *lse,
                                                                        const T *q, const T *k,
                                                                        const T *v, int Tn,
                                                                        int causal,
                                                                        float scale_log2)
{
    static_assert(SP == 1 || SP == 2 || SP == 4, "split in 1, 2 or 4");
    constexpr int LD = D + 8, NS = FK / 8, NO = D / 8, F_NT = 2 * BM / MT, RW = 16 * MT;
    extern __shared__ __align__(128) unsigned char smraw[];
    const int grp = SP == 1 ? 0 : threadIdx.x / F_NT; /* split group */
    const int tid = SP == 1 ? threadIdx.x : threadIdx.x % F_NT;
    T *sQ = (T *)smraw, *sK = sQ + BM * LD + grp * 4 * FK * LD, *sV = sK + 2 * FK * LD;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * BM;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int w = tid / MW, lane = tid % MW, g = lane >> 2, t = lane & 3;
    const int wrow = q0 + RW * w; /* this warp's first row; lane rows wrow + 16·mt + g (+8) */

    const int kend = causal ? min(Tn, q0 + BM) : Tn, nk = (kend + FK - 1) / FK;
    tile_async_by<T, D, BM, SP * F_NT>(sQ, q + base, q0, Tn, threadIdx.x);
    cp_commit();
    tile_async_by<T, D, FK, F_NT>(sK, k + base, grp * FK, Tn, tid); /* key tile grp */
    tile_async_by<T, D, FK, F_NT>(sV, v + base, grp * FK, Tn, tid);
    cp_commit();
    cp_wait<1>(); /* the Q tile */
    __syncthreads();
    uint32_t qf[MT][D / 16][4]; /* this warp's query rows as A operands, kept */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            ldsm4(qf[mt][kk], frag_a(sQ, LD, RW * w + 16 * mt, 16 * kk, lane));

    float acc[MT][NO][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
        for (int j = 0; j < NO; j++)
            acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.f;
    }

    for (int it = grp, li = 0; it < nk; it += SP, li++) {
        const int k0 = it * FK, buf = li & 1;
        if (it + SP < nk) {
            tile_async_by<T, D, FK, F_NT>(sK + (buf ^ 1) * FK * LD, k + base, k0 + SP * FK, Tn,
                                          tid);
            tile_async_by<T, D, FK, F_NT>(sV + (buf ^ 1) * FK * LD, v + base, k0 + SP * FK, Tn,
                                          tid);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        group_sync<SP, F_NT>(grp);
        const T *cK = sK + buf * FK * LD, *cV = sV + buf * FK * LD;
        if (!causal || k0 <= wrow + RW - 1) { /* warp-uniform */
            float s[MT][NS][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int j = 0; j < NS; j++)
                    s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
                for (int np = 0; np < FK / 16; np++) {
                    uint32_t b[4];
                    ldsm4(b, frag_b(cK, LD, 16 * np, 16 * kk, lane));
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        tc_ops<T>::mma(s[mt][2 * np], qf[mt][kk], b[0], b[1]);
                        tc_ops<T>::mma(s[mt][2 * np + 1], qf[mt][kk], b[2], b[3]);
                    }
                }
            /* raw scores here; scale_log2 > 0, so the max of the raw scores
             * times scale_log2 is the max of the scaled ones, and each
             * exponent is one FFMA: s·scale_log2 − m */
            float msub[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const int r0 = wrow + 16 * mt + g; /* rows r0, r0 + 8 */
                const bool mask = k0 + FK > Tn || (causal && k0 + FK - 1 > wrow + 16 * mt);
                float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int j = 0; j < NS; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int col = k0 + 8 * j + 2 * t + (e & 1), row = r0 + (e >> 1) * 8;
                        if (mask && (col >= Tn || (causal && col > row)))
                            s[mt][j][e] = -INFINITY;
                        mx[e >> 1] = fmaxf(mx[e >> 1], s[mt][j][e]);
                    }
                float alpha[2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                    const float mnew = fmaxf(m[mt][h], mx[h] * scale_log2);
                    msub[mt][h] = mnew == -INFINITY ? 0.f : mnew;
                    alpha[h] = fast_exp2(m[mt][h] - msub[mt][h]);
                    m[mt][h] = mnew;
                    l[mt][h] *= alpha[h];
                }
#pragma unroll
                for (int j = 0; j < NO; j++) {
                    acc[mt][j][0] *= alpha[0];
                    acc[mt][j][1] *= alpha[0];
                    acc[mt][j][2] *= alpha[1];
                    acc[mt][j][3] *= alpha[1];
                }
            }
            /* P (16·MT, 64) as A operands, O += P·V */
#pragma unroll
            for (int kp = 0; kp < FK / 16; kp++) {
                uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int hb = 0; hb < 2; hb++) {
                        const float *c = s[mt][2 * kp + hb];
                        const float p0 = fast_exp2(fmaf(c[0], scale_log2, -msub[mt][0]));
                        const float p1 = fast_exp2(fmaf(c[1], scale_log2, -msub[mt][0]));
                        const float p2 = fast_exp2(fmaf(c[2], scale_log2, -msub[mt][1]));
                        const float p3 = fast_exp2(fmaf(c[3], scale_log2, -msub[mt][1]));
                        a[mt][2 * hb] = tc_ops<T>::pack(p0, p1);
                        a[mt][2 * hb + 1] = tc_ops<T>::pack(p2, p3);
                        l[mt][0] += p0 + p1; /* unrounded, as FA2 */
                        l[mt][1] += p2 + p3;
                    }
#pragma unroll
                for (int dp = 0; dp < D / 16; dp++) {
                    uint32_t b[4];
                    ldsm4_t(b, frag_a(cV, LD, 16 * kp, 16 * dp, lane));
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        tc_ops<T>::mma(acc[mt][2 * dp], a[mt], b[0], b[1]);
                        tc_ops<T>::mma(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
                    }
                }
            }
        }
        group_sync<SP, F_NT>(grp); /* buffer buf is refilled by the next prefetch */
    }
    if constexpr (SP > 1) { /* groups 1… merged into group 0, in that order */
        constexpr int NX = MT * (4 + 4 * NO); /* floats per thread and group */
        static_assert((size_t)(SP - 1) * NX * F_NT * sizeof(float) <=
                          (size_t)SP * 4 * FK * LD * sizeof(T),
                      "the merge fits in the K/V buffers");
        cp_wait<0>();
        __syncthreads(); /* every group is done with its K/V buffers: reuse them */
        float *x = (float *)(sQ + BM * LD);
        int n = 0;
        if (grp > 0) {
            x += (size_t)(grp - 1) * NX * F_NT;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    x[n++ * F_NT + tid] = m[mt][h];
                    x[n++ * F_NT + tid] = l[mt][h];
                }
#pragma unroll
                for (int j = 0; j < NO; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        x[n++ * F_NT + tid] = acc[mt][j][e];
            }
        }
        __syncthreads();
        if (grp > 0)
            return;
        for (int gi = 1; gi < SP; gi++, x += (size_t)NX * F_NT) {
            n = 0;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                float a0[2], a1[2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const float m1 = x[n++ * F_NT + tid], l1 = x[n++ * F_NT + tid];
                    const float mn = fmaxf(m[mt][h], m1), ms = mn == -INFINITY ? 0.f : mn;
                    a0[h] = fast_exp2(m[mt][h] - ms);
                    a1[h] = fast_exp2(m1 - ms);
                    l[mt][h] = l[mt][h] * a0[h] + l1 * a1[h];
                    m[mt][h] = mn;
                }
#pragma unroll
                for (int j = 0; j < NO; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[mt][j][e] =
                            acc[mt][j][e] * a0[e >> 1] + x[n++ * F_NT + tid] * a1[e >> 1];
            }
        }
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float lh = l[mt][h];
            lh += __shfl_xor_sync(0xffffffffu, lh, 1);
            lh += __shfl_xor_sync(0xffffffffu, lh, 2);
            const int row = wrow + 16 * mt + g + 8 * h;
            if (row >= Tn)
                continue;
            const float inv = lh > 0.f ? 1.f / lh : 0.f;
#pragma unroll
            for (int j = 0; j < NO; j++)
                st2(o + base + (size_t)row * D + 8 * j + 2 * t, acc[mt][j][2 * h] * inv,
                    acc[mt][j][2 * h + 1] * inv);
            if (t == 0)
                lse[bh * Tn + row] = (m[mt][h] + log2f(lh)) * LN2;
        }
}

/* --- backward building blocks ----------------------------------------------
 * Shared by the dK/dV kernel, the single-pass kernel and (the S/dP products
 * and the A-operand packing) the dQ kernel. Accumulators are mma.m16n8k16 C
 * fragments: c[j][e] of a warp's (16, 8·N) tile holds row g + 8·(e >> 1),
 * column 8j + 2t + (e & 1) (g = lane / 4, t = lane % 4). */

/* Both accumulators (N n8 tiles each) set to zero. */
template <int N> __device__ __forceinline__ void zero_acc2(float a[N][4], float b[N][4])
{
#pragma unroll
    for (int j = 0; j < N; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            a[j][e] = b[j][e] = 0.f;
}

/* s (16, NB) = A·Bᵀ and dp (16, NB) = A2·B2ᵀ over D columns, for a warp's 16
 * rows r0… of A, A2; B, B2: (NB, D). All four are shared tiles of row stride
 * D + 8. The two products share the k16 loop (each B fragment feeds two mma). */
template <typename T, int D, int NB>
__device__ __forceinline__ void mma_two_abt(float s[NB / 8][4], float dp[NB / 8][4], const T *a,
                                            const T *b, const T *a2, const T *b2, int r0,
                                            int lane)
{
    constexpr int LD = D + 8;
    zero_acc2<NB / 8>(s, dp);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t aa[4], aa2[4];
        ldsm4(aa, frag_a(a, LD, r0, 16 * kk, lane));
        ldsm4(aa2, frag_a(a2, LD, r0, 16 * kk, lane));
#pragma unroll
        for (int np = 0; np < NB / 16; np++) {
            uint32_t bb[4];
            ldsm4(bb, frag_b(b, LD, 16 * np, 16 * kk, lane));
            tc_ops<T>::mma(s[2 * np], aa, bb[0], bb[1]);
            tc_ops<T>::mma(s[2 * np + 1], aa, bb[2], bb[3]);
            ldsm4(bb, frag_b(b2, LD, 16 * np, 16 * kk, lane));
            tc_ops<T>::mma(dp[2 * np], aa2, bb[0], bb[1]);
            tc_ops<T>::mma(dp[2 * np + 1], aa2, bb[2], bb[3]);
        }
    }
}

/* The A operand (16 rows, columns 16·kq…) of an mma, from the accumulator c
 * (16, ≥ 16·kq + 16) rounded to T. */
template <typename T>
__device__ __forceinline__ void pack_a(uint32_t a[4], const float c[][4], int kq)
{
#pragma unroll
    for (int hb = 0; hb < 2; hb++) {
        a[2 * hb] = tc_ops<T>::pack(c[2 * kq + hb][0], c[2 * kq + hb][1]);
        a[2 * hb + 1] = tc_ops<T>::pack(c[2 * kq + hb][2], c[2 * kq + hb][3]);
    }
}
/* Half hb of two such operands at once (columns 16·kq + 8·hb…: elements
 * 2·hb, 2·hb + 1 of a and a2, from c and c2). */
template <typename T>
__device__ __forceinline__ void pack_a2_half(uint32_t a[4], uint32_t a2[4], const float c[][4],
                                             const float c2[][4], int kq, int hb)
{
    a[2 * hb] = tc_ops<T>::pack(c[2 * kq + hb][0], c[2 * kq + hb][1]);
    a[2 * hb + 1] = tc_ops<T>::pack(c[2 * kq + hb][2], c[2 * kq + hb][3]);
    a2[2 * hb] = tc_ops<T>::pack(c2[2 * kq + hb][0], c2[2 * kq + hb][1]);
    a2[2 * hb + 1] = tc_ops<T>::pack(c2[2 * kq + hb][2], c2[2 * kq + hb][3]);
}

/* Shared memory of the dK/dV and single-pass kernels: the block's K and V
 * tiles (BKV, D + 8), then GB bytes per split group, which start with the
 * group's double-buffered query tiles Q, dO (2 × BQ, D + 8) and their rows'
 * L = lse·log2 e and D = rowsum(dO∘O) (2 × BQ); BQ = bq_kv<D>(). */
template <typename T> struct kv_smem {
    T *sK, *sV, *sQ, *sdO;
    float *sL, *sD;
};
template <typename T, int D, size_t GB>
__device__ __forceinline__ kv_smem<T> kv_smem_carve(unsigned char *smraw, int grp)
{
    constexpr int LD = D + 8, BQ = bq_kv<D>();
    kv_smem<T> sm;
    sm.sK = (T *)smraw;
    sm.sV = sm.sK + BKV * LD;
    sm.sQ = (T *)((unsigned char *)(sm.sV + BKV * LD) + grp * GB);
    sm.sdO = sm.sQ + 2 * BQ * LD;
    sm.sL = (float *)(sm.sdO + 2 * BQ * LD);
    sm.sD = sm.sL + 2 * BQ;
    return sm;
}

/* Query tile q0… (BQ rows) into buffer nb of a group's Q, dO (cp.async by
 * its BKV_NT threads, one commit group) and L, D (plain loads; rows past Tn
 * zero). q, dout: (B, H, T, D); lse, dsum: (B, H, T); bh = b·H + h. */
template <typename T, int D>
__device__ __forceinline__ void kv_load_query_tile(const kv_smem<T> &sm, int nb, const T *q,
                                                   const T *dout, const float *lse,
                                                   const float *dsum, size_t bh, int q0, int Tn,
                                                   int tid)
{
    constexpr int LD = D + 8, BQ = bq_kv<D>();
    const size_t base = bh * Tn * D;
    tile_async_by<T, D, BQ, BKV_NT>(sm.sQ + nb * BQ * LD, q + base, q0, Tn, tid);
    tile_async_by<T, D, BQ, BKV_NT>(sm.sdO + nb * BQ * LD, dout + base, q0, Tn, tid);
    cp_commit();
    for (int i = tid; i < BQ; i += BKV_NT) {
        const int qi = q0 + i;
        sm.sL[nb * BQ + i] = qi < Tn ? lse[bh * Tn + qi] * LOG2E : 0.f;
        sm.sD[nb * BQ + i] = qi < Tn ? dsum[bh * Tn + qi] : 0.f;
    }
}

/* The double-buffered query loop's step for a group at query tile q0 (buffer
 * buf): start loading its next tile q0 + SP·BQ (if below Tn) into buffer
 * buf ^ 1, then wait for this thread's copies into buffer buf (the group's
 * barrier follows in the caller). */
template <typename T, int D, int SP>
__device__ __forceinline__ void kv_prefetch_next(const kv_smem<T> &sm, int buf, const T *q,
                                                 const T *dout, const float *lse,
                                                 const float *dsum, size_t bh, int q0, int Tn,
                                                 int tid)
{
    constexpr int BQ = bq_kv<D>();
    if (q0 + SP * BQ < Tn) {
        kv_load_query_tile<T, D>(sm, buf ^ 1, q, dout, lse, dsum, bh, q0 + SP * BQ, Tn, tid);
        cp_wait<1>();
    } else {
        cp_wait<0>();
    }
}

/* Pᵀ into s and dSᵀ into dp (16 keys, BQ queries) for warp w of a block of
 * keys k0… (this lane's: key0, key0 + 8) against the query tile q0…: Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, then
 * Pᵀ = exp2(Sᵀ·scale_log2 − L) (0 past Tn and, causal, for key > query) and
 * dSᵀ = Pᵀ∘(dPᵀ − D). sK, sV: (BKV, D + 8); cQ, cdO: (BQ, D + 8); cL, cD: (BQ). */
template <typename T, int D>
__device__ __forceinline__ void kv_p_ds(float s[bq_kv<D>() / 8][4], float dp[bq_kv<D>() / 8][4],
                                        const T *sK, const T *sV, const T *cQ, const T *cdO,
                                        const float *cL, const float *cD, int k0, int q0,
                                        int key0, int w, int lane, int Tn, int causal,
                                        float scale_log2)
{
    constexpr int BQ = bq_kv<D>(), NS = BQ / 8;
    const int t = lane & 3;
    mma_two_abt<T, D, BQ>(s, dp, sK, cQ, sV, cdO, 16 * w, lane);
    const bool mask = q0 + BQ > Tn || k0 + BKV > Tn || (causal && q0 < k0 + BKV - 1);
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int qc = 8 * j + 2 * t + (e & 1), key = key0 + (e >> 1) * 8;
            float p = fast_exp2(s[j][e] * scale_log2 - cL[qc]);
            if (mask && (q0 + qc >= Tn || key >= Tn || (causal && key > q0 + qc)))
                p = 0.f;
            s[j][e] = p;
            dp[j][e] = p * (dp[j][e] - cD[qc]);
        }
}

/* dV += Pᵀ·dO and dK += dSᵀ·Q over the query rows 16·kq… of the tile: ap,
 * ads the A operands (16 keys, 16 queries) of Pᵀ and dSᵀ; cQ, cdO (BQ, D + 8);
 * adk, adv (16 keys, D). */
template <typename T, int D>
__device__ __forceinline__ void kv_accumulate(float adk[D / 8][4], float adv[D / 8][4],
                                              const uint32_t ap[4], const uint32_t ads[4],
                                              const T *cQ, const T *cdO, int kq, int lane)
{
    constexpr int LD = D + 8;
#pragma unroll
    for (int dn = 0; dn < D / 16; dn++) {
        uint32_t b[4];
        ldsm4_t(b, frag_a(cdO, LD, 16 * kq, 16 * dn, lane));
        tc_ops<T>::mma(adv[2 * dn], ap, b[0], b[1]);
        tc_ops<T>::mma(adv[2 * dn + 1], ap, b[2], b[3]);
        ldsm4_t(b, frag_a(cQ, LD, 16 * kq, 16 * dn, lane));
        tc_ops<T>::mma(adk[2 * dn], ads, b[0], b[1]);
        tc_ops<T>::mma(adk[2 * dn + 1], ads, b[2], b[3]);
    }
}

/* Split groups 1… add their adk, adv (16 keys, 8·NO per warp) into group 0's,
 * in that order, through x (the group buffers, (SP − 1) · 8·NO·BKV_NT floats,
 * free once every group is past its loop). Returns false for groups 1…,
 * which are then done. */
template <int SP, int NO>
__device__ __forceinline__ bool kv_merge_groups(float adk[NO][4], float adv[NO][4], float *x,
                                                int grp, int tid)
{
    cp_wait<0>();
    __syncthreads(); /* every group is done with its buffers: reuse them */
    if (grp > 0) {
        float *xg = x + (size_t)(grp - 1) * 8 * NO * BKV_NT;
#pragma unroll
        for (int j = 0; j < NO; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                xg[(8 * j + e) * BKV_NT + tid] = adk[j][e];
                xg[(8 * j + 4 + e) * BKV_NT + tid] = adv[j][e];
            }
    }
    __syncthreads();
    if (grp > 0)
        return false;
    for (int gi = 1; gi < SP; gi++, x += (size_t)8 * NO * BKV_NT)
#pragma unroll
        for (int j = 0; j < NO; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                adk[j][e] += x[(8 * j + e) * BKV_NT + tid];
                adv[j][e] += x[(8 * j + 4 + e) * BKV_NT + tid];
            }
    return true;
}

/* dk = scale·adk and dv = adv (T) at this lane's keys key0, key0 + 8 (those
 * below Tn). dk, dv: (B, H, T, D), base = bh·T·D; adk, adv (16 keys, D). */
template <typename T, int D>
__device__ __forceinline__ void kv_store(T *dk, T *dv, const float adk[D / 8][4],
                                         const float adv[D / 8][4], size_t base, int key0,
                                         int t, int Tn, float scale)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int key = key0 + 8 * h;
        if (key >= Tn)
            continue;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            st2(dk + base + (size_t)key * D + 8 * j + 2 * t, adk[j][2 * h] * scale,
                adk[j][2 * h + 1] * scale);
            st2(dv + base + (size_t)key * D + 8 * j + 2 * t, adv[j][2 * h], adv[j][2 * h + 1]);
        }
    }
}

// dk, dv: (B, H, T, D) out; dout, q, k, v: (B, H, T, D); lse, dsum: (B, H, T).
// grid (ceil(T/64), B·H), SP·128 threads: block = 64 keys, warp w = keys 16w…
template <typename T, int D, int MINB, int SP>
__global__ void __launch_bounds__(SP * BKV_NT, MINB) flash_bwd_dkdv_mma_kernel(
    T *dk, T *dv, const T *dout, const T *q, const T *k, const T *v, const float *lse,
    const float *dsum, int Tn, int causal, float scale_log2, float scale)
{
    static_assert(SP == 1 || SP == 2 || SP == 4, "split in 1, 2 or 4");
    constexpr int LD = D + 8, BQ = bq_kv<D>(), NS = BQ / 8, NO = D / 8;
    extern __shared__ __align__(128) unsigned char smraw[];
    const int grp = SP == 1 ? 0 : threadIdx.x / BKV_NT; /* split group */
    const int tid = SP == 1 ? threadIdx.x : threadIdx.x % BKV_NT;
    const kv_smem<T> sm = kv_smem_carve<T, D, dkdv_group_bytes<T, D>()>(smraw, grp);
    const int k0 = blockIdx.x * BKV;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int w = tid / MW, lane = tid % MW, g = lane >> 2, t = lane & 3;
    const int key0 = k0 + 16 * w + g; /* this lane's keys: key0, key0 + 8 */
    const int qstart = (causal ? k0 : 0) + grp * BQ; /* k0 is a multiple of BQ; group grp
                                                        takes query tiles grp, grp + SP, … */

    tile_async_by<T, D, BKV, SP * BKV_NT>(sm.sK, k + base, k0, Tn, threadIdx.x);
    tile_async_by<T, D, BKV, SP * BKV_NT>(sm.sV, v + base, k0, Tn, threadIdx.x);
    kv_load_query_tile<T, D>(sm, 0, q, dout, lse, dsum, bh, qstart, Tn, tid);

    float adk[NO][4], adv[NO][4]; /* (16 keys, D) */
    zero_acc2<NO>(adk, adv);
    if constexpr (SP > 1) { /* K and V come from both groups' copies */
        cp_wait<0>();
        __syncthreads();
    }

    for (int q0 = qstart, it = 0; q0 < Tn; q0 += SP * BQ, it++) {
        const int buf = it & 1;
        kv_prefetch_next<T, D, SP>(sm, buf, q, dout, lse, dsum, bh, q0, Tn, tid);
        group_sync<SP, BKV_NT>(grp);
        const T *cQ = sm.sQ + buf * BQ * LD, *cdO = sm.sdO + buf * BQ * LD;
        const float *cL = sm.sL + buf * BQ, *cD = sm.sD + buf * BQ;
        if (!causal || k0 + 16 * w <= q0 + BQ - 1) { /* warp-uniform */
            float s[NS][4], dp[NS][4]; /* Pᵀ, dSᵀ (16 keys, BQ queries) */
            kv_p_ds<T, D>(s, dp, sm.sK, sm.sV, cQ, cdO, cL, cD, k0, q0, key0, w, lane, Tn,
                          causal, scale_log2);
#pragma unroll
            for (int kq = 0; kq < BQ / 16; kq++) {
                uint32_t ap[4], ads[4];
#pragma unroll
                for (int hb = 0; hb < 2; hb++)
                    pack_a2_half<T>(ap, ads, s, dp, kq, hb);
                kv_accumulate<T, D>(adk, adv, ap, ads, cQ, cdO, kq, lane);
            }
        }
        group_sync<SP, BKV_NT>(grp); /* buffer buf is refilled by the next prefetch */
    }
    if constexpr (SP > 1) {
        static_assert((size_t)(SP - 1) * 8 * NO * BKV_NT * sizeof(float) <=
                          (size_t)SP * dkdv_group_bytes<T, D>(),
                      "the merge fits in the Q/dO buffers");
        if (!kv_merge_groups<SP, NO>(adk, adv, (float *)(sm.sV + BKV * LD), grp, tid))
            return;
    }
    kv_store<T, D>(dk, dv, adk, adv, base, key0, t, Tn, scale);
}

// dq: (B, H, T, D) out; dout, q, k, v: (B, H, T, D); lse, dsum: (B, H, T).
// grid (ceil(T/64), B·H), 128 threads: block = 64 queries (reversed, as the
// forward), warp w = queries 16w…
template <typename T, int D, int MINB, int SP>
__global__ void __launch_bounds__(SP * BQ_NT, MINB) flash_bwd_dq_mma_kernel(
    T *dq, const T *dout, const T *q, const T *k, const T *v, const float *lse,
    const float *dsum, int Tn, int causal, float scale_log2, float scale)
{
    static_assert(SP == 1 || SP == 2 || SP == 4, "split in 1, 2 or 4");
    constexpr int LD = D + 8, NS = BK2 / 8, NO = D / 8;
    extern __shared__ __align__(128) unsigned char smraw[];
    const int grp = SP == 1 ? 0 : threadIdx.x / BQ_NT; /* split group */
    const int tid = SP == 1 ? threadIdx.x : threadIdx.x % BQ_NT;
    T *sQ = (T *)smraw, *sdO = sQ + BQ2 * LD, *sK = sdO + BQ2 * LD + grp * 4 * BK2 * LD,
      *sV = sK + 2 * BK2 * LD;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * BQ2;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int w = tid / MW, lane = tid % MW, g = lane >> 2, t = lane & 3;
    const int row0 = q0 + 16 * w + g;
    float L[2], Dq[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = row0 + 8 * h;
        L[h] = row < Tn ? lse[bh * Tn + row] * LOG2E : 0.f;
        Dq[h] = row < Tn ? dsum[bh * Tn + row] : 0.f;
    }
    const int kend = causal ? min(Tn, q0 + BQ2) : Tn, nk = (kend + BK2 - 1) / BK2;
    tile_async_by<T, D, BQ2, SP * BQ_NT>(sQ, q + base, q0, Tn, threadIdx.x);
    tile_async_by<T, D, BQ2, SP * BQ_NT>(sdO, dout + base, q0, Tn, threadIdx.x);
    tile_async_by<T, D, BK2, BQ_NT>(sK, k + base, grp * BK2, Tn, tid); /* key tile grp */
    tile_async_by<T, D, BK2, BQ_NT>(sV, v + base, grp * BK2, Tn, tid);
    cp_commit();

    float adq[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++)
        adq[j][0] = adq[j][1] = adq[j][2] = adq[j][3] = 0.f;
    if constexpr (SP > 1) { /* Q and dO come from both groups' copies */
        cp_wait<0>();
        __syncthreads();
    }

    for (int it = grp, li = 0; it < nk; it += SP, li++) {
        const int k0 = it * BK2, buf = li & 1;
        if (it + SP < nk) {
            tile_async_by<T, D, BK2, BQ_NT>(sK + (buf ^ 1) * BK2 * LD, k + base, k0 + SP * BK2,
                                            Tn, tid);
            tile_async_by<T, D, BK2, BQ_NT>(sV + (buf ^ 1) * BK2 * LD, v + base, k0 + SP * BK2,
                                            Tn, tid);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        group_sync<SP, BQ_NT>(grp);
        const T *cK = sK + buf * BK2 * LD, *cV = sV + buf * BK2 * LD;
        if (!causal || k0 <= q0 + 16 * w + 15) { /* warp-uniform */
            float s[NS][4], dp[NS][4]; /* S = Q·Kᵀ, dP = dO·Vᵀ (16 queries, BK2 keys) */
            mma_two_abt<T, D, BK2>(s, dp, sQ, cK, sdO, cV, 16 * w, lane);
            const bool mask = k0 + BK2 > Tn || q0 + BQ2 > Tn || (causal && k0 + BK2 - 1 > q0 + 16 * w);
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int col = k0 + 8 * j + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
                    float p = fast_exp2(s[j][e] * scale_log2 - L[e >> 1]);
                    if (mask && (col >= Tn || row >= Tn || (causal && col > row)))
                        p = 0.f;
                    dp[j][e] = p * (dp[j][e] - Dq[e >> 1]);
                }
            /* dQ += dS·K */
#pragma unroll
            for (int kp = 0; kp < BK2 / 16; kp++) {
                uint32_t a[4];
                pack_a<T>(a, dp, kp);
#pragma unroll
                for (int dn = 0; dn < D / 16; dn++) {
                    uint32_t b[4];
                    ldsm4_t(b, frag_a(cK, LD, 16 * kp, 16 * dn, lane));
                    tc_ops<T>::mma(adq[2 * dn], a, b[0], b[1]);
                    tc_ops<T>::mma(adq[2 * dn + 1], a, b[2], b[3]);
                }
            }
        }
        group_sync<SP, BQ_NT>(grp); /* buffer buf is refilled by the next prefetch */
    }
    if constexpr (SP > 1) { /* groups 1… added into group 0, in that order */
        static_assert((size_t)(SP - 1) * 4 * NO * BQ_NT * sizeof(float) <=
                          (size_t)SP * 4 * BK2 * LD * sizeof(T),
                      "the merge fits in the K/V buffers");
        cp_wait<0>();
        __syncthreads(); /* every group is done with its K/V buffers: reuse them */
        float *x = (float *)(sdO + BQ2 * LD);
        if (grp > 0) {
            float *xg = x + (size_t)(grp - 1) * 4 * NO * BQ_NT;
#pragma unroll
            for (int j = 0; j < NO; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    xg[(4 * j + e) * BQ_NT + tid] = adq[j][e];
        }
        __syncthreads();
        if (grp > 0)
            return;
        for (int gi = 1; gi < SP; gi++, x += (size_t)4 * NO * BQ_NT)
#pragma unroll
            for (int j = 0; j < NO; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    adq[j][e] += x[(4 * j + e) * BQ_NT + tid];
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = row0 + 8 * h;
        if (row >= Tn)
            continue;
#pragma unroll
        for (int j = 0; j < NO; j++)
            st2(dq + base + (size_t)row * D + 8 * j + 2 * t, adq[j][2 * h] * scale,
                adq[j][2 * h + 1] * scale);
    }
}

/* --- single pass (fp16 / bf16; the default, not bit-reproducible) ----------
 * The dK/dV kernel's loop with dQ added: each query tile's dSᵀ (64 keys ×
 * BQ queries, rounded to T) goes to shared memory, and the block's 4 warps
 * add dS·K (BQ × D) into a float32 dQ workspace with 16-byte atomics
 * (red.global.add.v4.f32, sm_90). 5 tile products per (key, query) tile pair
 * instead of the two-pass kernels' 7 (the dQ kernel recomputes S and dP).
 * The order in which blocks add into one dQ element varies between runs, and
 * so does its rounding: it runs only where lmk_attn_shape.atomic_dq allows
 * it; otherwise the two-pass kernels. dQ stage: warp w computes rows
 * 16·(w % MTQ)… (MTQ = BQ/16 row tiles) and column part w / MTQ of CQ =
 * 4/MTQ: CT 16-column tiles from 16·CT·(w / MTQ), the last part fewer where
 * they do not divide evenly (d 80: 3 and 2 tiles).
 * dqacc: (B, H, T, D) float32; in each aligned group of 16 columns of a row,
 * position 4t + e holds column 2t + (e & 1) + 8·(e >> 1) (as the mma C
 * fragment leaves it: one float4 per lane and row); zeroed by the D kernel,
 * read back by flash_bwd_dq_convert_kernel. */
#ifndef LMK_FLASH_FUSED_D80 /* build-time knob: 0 keeps d 80 on the two passes */
#define LMK_FLASH_FUSED_D80 1
#endif
template <int D> constexpr bool fused_ok()
{
    return D % 16 == 0 && (D != 80 || LMK_FLASH_FUSED_D80);
}
/* bytes of one group's buffers in the single-pass kernel: Q, dO, L, D
 * (double-buffered) and dSᵀ */
template <typename T, int D> constexpr size_t fused_group_bytes()
{
    return dkdv_group_bytes<T, D>() + sizeof(T) * BKV * (bq_kv<D>() + 8);
}
template <typename T, int D, int SP> constexpr size_t tc_fused_smem()
{
    return sizeof(T) * (D + 8) * 2 * BKV + SP * fused_group_bytes<T, D>();
}

// dk, dv: (B, H, T, D) out; dqacc: (B, H, T, D) float32, zeroed, accumulated
// (layout above); dout, q, k, v: (B, H, T, D); lse, dsum: (B, H, T).
// grid (ceil(T/64), B·H), SP·128 threads: block = 64 keys, warp w = keys 16w…
template <typename T, int D, int MINB, int SP>
__global__ void __launch_bounds__(SP * BKV_NT, MINB) flash_bwd_fused_mma_kernel(
    T *dk, T *dv, float *dqacc, const T *dout, const T *q, const T *k, const T *v,
    const float *lse, const float *dsum, int Tn, int causal, float scale_log2, float scale)
{
    static_assert(SP == 1 || SP == 2, "split in 1 or 2");
    static_assert(fused_ok<D>(), "dQ columns split in 16s");
    constexpr int LD = D + 8, BQ = bq_kv<D>(), NS = BQ / 8, NO = D / 8;
    constexpr int LS = BQ + 8; /* row stride of dSᵀ (keys × queries) */
    constexpr int MTQ = BQ / 16, CQ = 4 / MTQ; /* dQ stage: row tiles, column parts */
    constexpr int NCT = D / 16, CT = (NCT + CQ - 1) / CQ; /* 16-column tiles: all, per part */
    extern __shared__ __align__(128) unsigned char smraw[];
    const int grp = SP == 1 ? 0 : threadIdx.x / BKV_NT; /* split group */
    const int tid = SP == 1 ? threadIdx.x : threadIdx.x % BKV_NT;
    const kv_smem<T> sm = kv_smem_carve<T, D, fused_group_bytes<T, D>()>(smraw, grp);
    /* (BKV, LS): the group's dSᵀ, after its dK/dV-kernel buffers (Q, dO, L, D) */
    T *sdS = (T *)(smraw + sizeof(T) * LD * 2 * BKV + grp * fused_group_bytes<T, D>() +
                   dkdv_group_bytes<T, D>());
    const int k0 = blockIdx.x * BKV;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int w = tid / MW, lane = tid % MW, g = lane >> 2, t = lane & 3;
    const int key0 = k0 + 16 * w + g; /* this lane's keys: key0, key0 + 8 */
    const int rt = w % MTQ, cq = w / MTQ; /* dQ stage: row tile, column part */
    const int qstart = (causal ? k0 : 0) + grp * BQ;

    tile_async_by<T, D, BKV, SP * BKV_NT>(sm.sK, k + base, k0, Tn, threadIdx.x);
    tile_async_by<T, D, BKV, SP * BKV_NT>(sm.sV, v + base, k0, Tn, threadIdx.x);
    kv_load_query_tile<T, D>(sm, 0, q, dout, lse, dsum, bh, qstart, Tn, tid);

    float adk[NO][4], adv[NO][4]; /* (16 keys, D) */
    zero_acc2<NO>(adk, adv);
    if constexpr (SP > 1) { /* K and V come from both groups' copies */
        cp_wait<0>();
        __syncthreads();
    }

    for (int q0 = qstart, it = 0; q0 < Tn; q0 += SP * BQ, it++) {
        const int buf = it & 1;
        kv_prefetch_next<T, D, SP>(sm, buf, q, dout, lse, dsum, bh, q0, Tn, tid);
        group_sync<SP, BKV_NT>(grp);
        const T *cQ = sm.sQ + buf * BQ * LD, *cdO = sm.sdO + buf * BQ * LD;
        const float *cL = sm.sL + buf * BQ, *cD = sm.sD + buf * BQ;
        T *wdS = sdS + 16 * w * LS; /* this warp's 16 key rows of dSᵀ */
        if (!causal || k0 + 16 * w <= q0 + BQ - 1) { /* warp-uniform */
            float s[NS][4], dp[NS][4]; /* Pᵀ, dSᵀ (16 keys, BQ queries) */
            kv_p_ds<T, D>(s, dp, sm.sK, sm.sV, cQ, cdO, cL, cD, k0, q0, key0, w, lane, Tn,
                          causal, scale_log2);
            /* Pᵀ and dSᵀ as A operands; dSᵀ also to shared memory for dQ */
            uint32_t ap[BQ / 16][4], ads[BQ / 16][4];
#pragma unroll
            for (int kq = 0; kq < BQ / 16; kq++)
#pragma unroll
                for (int hb = 0; hb < 2; hb++) {
                    pack_a2_half<T>(ap[kq], ads[kq], s, dp, kq, hb);
                    T *d0 = wdS + g * LS + 16 * kq + 8 * hb + 2 * t;
                    *reinterpret_cast<uint32_t *>(d0) = ads[kq][2 * hb];
                    *reinterpret_cast<uint32_t *>(d0 + 8 * LS) = ads[kq][2 * hb + 1];
                }
#pragma unroll
            for (int kq = 0; kq < BQ / 16; kq++)
                kv_accumulate<T, D>(adk, adv, ap[kq], ads[kq], cQ, cdO, kq, lane);
        } else { /* keys all after the tile's queries: dS = 0 */
#pragma unroll
            for (int c = 2 * t; c < BQ; c += 8) {
                *reinterpret_cast<uint32_t *>(wdS + g * LS + c) = 0u;
                *reinterpret_cast<uint32_t *>(wdS + (g + 8) * LS + c) = 0u;
            }
        }
        group_sync<SP, BKV_NT>(grp); /* dSᵀ complete */
        /* dQ (rows 16·rt…, columns 16·CT·cq…) += dS·K over the block's 64 keys */
        {
            /* this warp's column tiles cq·CT + dn, dn < CT, below NCT (warp-uniform) */
            auto has_tile = [&](int dn) { return NCT % CQ == 0 || cq * CT + dn < NCT; };
            float dq[2 * CT][4];
#pragma unroll
            for (int j = 0; j < 2 * CT; j++)
                dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.f;
#pragma unroll
            for (int kp = 0; kp < BKV / 16; kp++) {
                uint32_t a[4];
                ldsm4_t(a, frag_b(sdS, LS, 16 * kp, 16 * rt, lane)); /* dS (16 q, 16 keys) */
#pragma unroll
                for (int dn = 0; dn < CT; dn++)
                    if (has_tile(dn)) {
                        uint32_t b[4];
                        ldsm4_t(b, frag_a(sm.sK, LD, 16 * kp, 16 * CT * cq + 16 * dn, lane));
                        tc_ops<T>::mma(dq[2 * dn], a, b[0], b[1]);
                        tc_ops<T>::mma(dq[2 * dn + 1], a, b[2], b[3]);
                    }
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = q0 + 16 * rt + g + 8 * h;
                if (row >= Tn)
                    continue;
                float *dst = dqacc + (bh * Tn + row) * D + 16 * CT * cq + 4 * t;
#pragma unroll
                for (int dn = 0; dn < CT; dn++)
                    if (has_tile(dn))
                        atomicAdd(reinterpret_cast<float4 *>(dst + 16 * dn),
                                  make_float4(dq[2 * dn][2 * h], dq[2 * dn][2 * h + 1],
                                              dq[2 * dn + 1][2 * h], dq[2 * dn + 1][2 * h + 1]));
            }
        }
        /* No third barrier: the next prefetch refills buffer buf, all of
         * whose reads came before the barrier above (dSᵀ complete); dSᵀ is
         * rewritten after the next iteration's first barrier, which every
         * warp reaches only after this dQ stage. */
    }
    if constexpr (SP > 1) {
        static_assert((size_t)(SP - 1) * 8 * NO * BKV_NT * sizeof(float) <=
                          (size_t)SP * fused_group_bytes<T, D>(),
                      "the merge fits in the group buffers");
        if (!kv_merge_groups<SP, NO>(adk, adv, (float *)(sm.sV + BKV * LD), grp, tid))
            return;
    }
    kv_store<T, D>(dk, dv, adk, adv, base, key0, t, Tn, scale);
}

// dq (n) = T(scale · dqacc) with dqacc's column permutation undone (layout
// above); n a multiple of 16. One float4 of dqacc per thread and step.
template <typename T>
__global__ void flash_bwd_dq_convert_kernel(T *dq, const float *dqacc, size_t n, float scale)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 4; i += stride) {
        const float4 a = reinterpret_cast<const float4 *>(dqacc)[i];
        const size_t c = (4 * i & ~(size_t)15) + 2 * (i & 3); /* column 2t of the group */
        st2(dq + c, a.x * scale, a.y * scale);
        st2(dq + c + 8, a.z * scale, a.w * scale);
    }
}

/* --- fp32 forward, pipelined (CUDA cores; 16-byte aligned q, k, v) ---------
 * flash_fwd_f32_kernel computes what flash_fwd_kernel does (true fp32
 * products, 64 queries per 256-thread group, 64-key tiles; thread t owns S
 * rows ra…ra+3 = 4·(t/16)… and columns cb+16j, cb = t%16), and differs in
 * how it keeps the SM busy:
 *  - at D 64, 128 the O accumulators take their own thread map (rows
 *    16·(w/2) + l/4 + 4i, columns 4·(l%8) + 32·(w%2) + 64·jj … +3 for lane
 *    l of warp w), under which P·V's shared loads are one wavefront each;
 *    the row factors (alpha, the final l) pass through shared memory;
 *  - K and V tiles arrive by cp.async into one buffer each, staggered: the
 *    next K tile loads while P·V runs, the next V tile while Q·Kᵀ runs; two
 *    barriers per key tile;
 *  - shared tiles have no padding; bank conflicts are avoided by the layouts
 *    below instead (d 128: 112 KiB per block, two blocks per SM);
 *  - block x runs query tile gridDim.x−1−x (the longest causal rows first);
 *  - SP = 2 (grids of fewer blocks than two per SM, where the longest block
 *    sets the time): two groups of 256 threads take alternate key tiles and
 *    merge (m, l, acc) at the end;
 *  - masks only on key tiles that cross the diagonal or T; the scale folded
 *    into the exponent's FFMA; each thread keeps a partial row sum l, reduced
 *    across the row's 16 threads once at the end. */

/* Shared (64, W) float tiles, laid out by how they are read.
 * rot_tile: rows read by float4 along the row, two rows per warp (r and
 *   r+4: mm_abt_f32's A): row r's columns rotated by R·((r/4) mod 2)
 *   (mod W), so that the warp's two rows use different banks. W a multiple
 *   of 4.
 * xor_tile: rows read by float4 at one column, rows cb+16j of 16 threads
 *   (mm_abt_f32's B): W a multiple of 32: the float4 chunk index XOR r mod 8;
 *   other W: rows padded to W+4.
 * Plain (64, W) rows: one row read at 16 distinct chunks (mm_pb_f32's B)
 *   or 8 (mm_pv_f32's B). The P tile: p_off below. */
template <int W, int R> struct rot_tile {
    static constexpr int FLOATS = BT * W;
    static __device__ __forceinline__ int off(int r, int c)
    {
        const int x = c + R * ((r >> 2) & 1);
        return r * W + (x >= W ? x - W : x);
    }
};
template <int W> struct xor_tile {
    static constexpr bool SWZ = W % 32 == 0;
    static constexpr int LD = SWZ ? W : W + 4;
    static constexpr int FLOATS = BT * LD;
    static __device__ __forceinline__ int off(int r, int c)
    {
        return SWZ ? r * W + ((((c >> 2) ^ (r & 7)) << 2) | (c & 3)) : r * LD + c;
    }
};
template <int W> struct plain_tile {
    static constexpr int FLOATS = BT * W;
    static __device__ __forceinline__ int off(int r, int c) { return r * W + c; }
};

/* Tile sm (64, W) in layout L ← rows row0… of g (Tn, W) by 16-byte cp.async,
 * issued by NTH threads of which this is tid; rows past Tn are zero. */
template <class L, int W, int NTH>
__device__ __forceinline__ void f32_tile_async(float *sm, const float *g, int row0, int Tn,
                                               int tid)
{
    constexpr int CH = W / 4; /* 16-byte chunks per row */
#pragma unroll
    for (int idx = tid; idx < BT * CH; idx += NTH) {
        const int r = idx / CH, c = (idx - r * CH) * 4, gr = row0 + r;
        cp_async16(sm + L::off(r, c), g + (size_t)(gr < Tn ? gr : 0) * W + c, gr < Tn);
    }
}

/* acc[i][j] += Σ_c A[ra+i][c]·B[cb+16j][c];  A: rot_tile<D, 4>, B: xor_tile<D>.
 * Four c per step (8 float4 loads per 64 FMA); c in order, except for the
 * swizzled B (D a multiple of 32): chunk u (mod 8) of every 32 columns first,
 * u outer, so that each u needs one row pointer (u XOR cb mod 8). */
template <int D>
__device__ __forceinline__ void mm_abt_f32(float acc[4][4], const float *A, const float *B,
                                           int ra, int cb)
{
    using BL = xor_tile<D>;
    const int sa = 4 * ((ra >> 2) & 1);
    const float *alo = A + ra * D + sa, *awrap = sa ? alo - D : alo; /* columns < D−4, the last */
    auto step = [&](int c, const float *brow) { /* brow: B[cb][c…] */
        float4 a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            a[i] = lds4((c < D - 4 ? alo : awrap) + i * D + c);
#pragma unroll
        for (int j = 0; j < 4; j++)
            b[j] = lds4(brow + 16 * j * BL::LD);
#pragma unroll
        for (int e = 0; e < 4; e++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(comp(a[i], e), comp(b[j], e), acc[i][j]);
    };
    if constexpr (BL::SWZ) {
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float *bu = B + cb * D + 4 * (u ^ (cb & 7));
#pragma unroll
            for (int g = 0; g < D / 32; g++)
                step(32 * g + 4 * u, bu + 32 * g);
        }
    } else {
#pragma unroll
        for (int c = 0; c < D; c += 4)
            step(c, B + cb * BL::LD + c);
    }
}

/* acc[i][e] += Σ_k P[ra+i][k]·B[k][pb_col(cb, e)];  P: p_tile<64, false>,
 * B: plain (64, D). k in order, P four k at a time by float4. The O map of
 * D 16, 32, 80 (O rows = S rows). */
template <int D>
__device__ __forceinline__ void mm_pb_f32(float acc[4][D / 16], const float *P, const float *B,
                                          int ra, int cb)
{
    const int sp = 16 * ((ra >> 2) & 1);
    const float *plo = P + ra * BT + sp, *pwrap = sp ? plo - BT : plo; /* k < 48, k ≥ 48 */
#pragma unroll
    for (int k = 0; k < BT; k += 4) {
        float4 p[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            p[i] = lds4((k < BT - 16 ? plo : pwrap) + i * BT + k);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            float b[D / 16];
            ld_brow<D>(b, B + (k + kk) * D, cb);
#pragma unroll
            for (int e = 0; e < D / 16; e++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    acc[i][e] = fmaf(comp(p[i], kk), b[e], acc[i][e]);
        }
    }
}

/* acc[i][4·jj+e] += Σ_k P[orow+4i][k]·B[k][ocol + 64·jj + e];  P:
 * p_tile<64, true>, B: plain (64, D), D a multiple of 64. The O map of D 64,
 * 128: a warp's loads read 4 rows of P (broadcast) and 8 float4 of a row of
 * B, one wavefront each. k in order. */
template <int D>
__device__ __forceinline__ void mm_pv_f32(float acc[4][D / 16], const float *P, const float *B,
                                          int orow, int ocol)
{
    const int rs = 4 * (orow & 3); /* p_tile's rotation of rows orow + 4i, less 16·(i%2) */
#pragma unroll
    for (int k = 0; k < BT; k += 4) {
        float4 p[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            p[i] = lds4(P + (orow + 4 * i) * BT + ((k + rs + 16 * (i & 1)) & (BT - 1)));
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int jj = 0; jj < D / 64; jj++) {
                const float4 b = lds4(B + (k + kk) * D + ocol + 64 * jj);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float x = comp(p[i], kk);
                    acc[i][4 * jj] = fmaf(x, b.x, acc[i][4 * jj]);
                    acc[i][4 * jj + 1] = fmaf(x, b.y, acc[i][4 * jj + 1]);
                    acc[i][4 * jj + 2] = fmaf(x, b.z, acc[i][4 * jj + 2]);
                    acc[i][4 * jj + 3] = fmaf(x, b.w, acc[i][4 * jj + 3]);
                }
            }
        }
    }
}

/* Offset of P[r][c] in the (64, 64) P tile: row r's columns rotated by
 * 16·((r/4) mod 2) (the S map's scalar writes, rows r and r+4 of a warp, are
 * conflict-free; so are its float4 reads of rows r, r+4), plus 4·(r mod 4)
 * when OM (mm_pv_f32 reads rows r…r+3 of a 4-row group at one column). */
template <bool OM> __device__ __forceinline__ int p_off(int r, int c)
{
    return r * BT + ((c + (OM ? 4 * (r & 3) : 0) + 16 * ((r >> 2) & 1)) & (BT - 1));
}

/* Floats of shared memory of the pipelined forward: the Q tile, then per
 * group K, V, P and 3 × 64 row factors. */
template <int D> constexpr int f32_fwd_group_floats()
{
    return xor_tile<D>::FLOATS + plain_tile<D>::FLOATS + BT * BT + 3 * BT;
}
template <int D, int SP> constexpr size_t f32_fwd_smem()
{
    return sizeof(float) * (rot_tile<D, 4>::FLOATS + SP * f32_fwd_group_floats<D>());
}

#ifndef LMK_FLASH_F32_FWD_MINB /* build-time knob: resident blocks per SM (register cap), SP = 1 */
#define LMK_FLASH_F32_FWD_MINB 2
#endif

// o: (B, H, T, D); lse: (B, H, T); q, k, v: (B, H, T, D) float32, 16-byte
// aligned (o too where D is a multiple of 64). grid (ceil(T/64), B·H),
// SP·256 threads.
template <int D, int SP>
__global__ void __launch_bounds__(SP *NT, SP == 1 ? LMK_FLASH_F32_FWD_MINB : 1)
    flash_fwd_f32_kernel(float *o, float *lse, const float *q, const float *k, const float *v,
                         int Tn, int causal, float scale_log2)
{
    static_assert(SP == 1 || SP == 2, "split in 1 or 2");
    /* OM (D 64, 128): O rows orow + 4i, columns ocol + 64·jj … +3 (mm_pv_f32);
     * else O rows = S rows ra + i, columns pb_col(cb, ·) (mm_pb_f32) */
    constexpr bool OM = D % 64 == 0;
    constexpr int OS = OM ? 4 : 1;
    using QL = rot_tile<D, 4>;
    using KL = xor_tile<D>;
    using VL = plain_tile<D>;
    extern __shared__ __align__(16) float sm[];
    const int grp = SP == 1 ? 0 : threadIdx.x / NT, t = threadIdx.x % NT;
    float *sQ = sm, *sK = sQ + QL::FLOATS + grp * f32_fwd_group_floats<D>();
    float *sV = sK + KL::FLOATS, *sP = sV + VL::FLOATS;
    float *sA = sP + BT * BT, *sA1 = sA + BT, *sL = sA1 + BT; /* per row: alpha (a0), a1, l */
    const int q0 = (gridDim.x - 1 - blockIdx.x) * BT;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int ra = (t >> 4) * 4, cb = t & 15; /* S map */
    const int lane = t & 31, w = t >> 5;
    const int orow = OM ? 16 * (w >> 1) + (lane >> 3) : ra; /* O map */
    const int ocol = OM ? 4 * (lane & 7) + 32 * (w & 1) : cb;
    const int kend = causal ? min(Tn, q0 + BT) : Tn, nk = (kend + BT - 1) / BT;

    f32_tile_async<QL, D, SP * NT>(sQ, q + base, q0, Tn, threadIdx.x);
    if (grp < nk)
        f32_tile_async<KL, D, NT>(sK, k + base, grp * BT, Tn, t);
    cp_commit();
    if (grp < nk)
        f32_tile_async<VL, D, NT>(sV, v + base, grp * BT, Tn, t);
    cp_commit();
    cp_wait<1>(); /* Q and the first K tile */
    __syncthreads();

    /* S map: m: running row max of the scores in log2 units; l: this thread's
     * part of the row sum (its 4 columns of each tile), scaled by 2^−m.
     * O map: acc, scaled by 2^−m of its rows. */
    float m[4], l[4], acc[4][D / 16];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.f;
#pragma unroll
        for (int j = 0; j < D / 16; j++)
            acc[i][j] = 0.f;
    }
    for (int it = grp; it < nk; it += SP) {
        const int k0 = it * BT;
        float s[4][4] = {};
        mm_abt_f32<D>(s, sQ, sK, ra, cb);
        if (k0 + BT > Tn || (causal && k0 + BT - 1 > q0)) { /* tile crosses T or the diagonal */
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int kj = k0 + cb + 16 * j;
                    if (kj >= Tn || (causal && kj > q0 + ra + i))
                        s[i][j] = -INFINITY;
                }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float rmax = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
            const float mnew = fmaxf(m[i], max16(rmax) * scale_log2);
            const float msub = mnew == -INFINITY ? 0.f : mnew;
            const float alpha = exp2f(m[i] - msub);
            float rs = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float p = exp2f(fmaf(s[i][j], scale_log2, -msub));
                sP[p_off<OM>(ra + i, cb + 16 * j)] = p;
                rs += p;
            }
            l[i] = l[i] * alpha + rs;
            m[i] = mnew;
            if constexpr (OM) {
                if (cb == 0)
                    sA[ra + i] = alpha;
            } else {
#pragma unroll
                for (int j = 0; j < D / 16; j++)
                    acc[i][j] *= alpha;
            }
        }
        cp_wait<0>(); /* V of this tile */
        group_sync<SP, NT>(grp); /* P and alpha complete, V visible, K read by all */
        if (it + SP < nk)
            f32_tile_async<KL, D, NT>(sK, k + base, k0 + SP * BT, Tn, t);
        cp_commit();
        if constexpr (OM) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float alpha = sA[orow + 4 * i];
#pragma unroll
                for (int j = 0; j < D / 16; j++)
                    acc[i][j] *= alpha;
            }
            mm_pv_f32<D>(acc, sP, sV, orow, ocol);
        } else {
            mm_pb_f32<D>(acc, sP, sV, ra, cb);
        }
        cp_wait<0>(); /* the next K tile */
        group_sync<SP, NT>(grp); /* P, alpha and V read by all, the next K visible */
        if (it + SP < nk)
            f32_tile_async<VL, D, NT>(sV, v + base, k0 + SP * BT, Tn, t);
        cp_commit();
    }
    /* per row: a0 (this group's factor), a1 (group 1's), l (the full row sum) */
    if constexpr (SP == 2) { /* group 1's (m, l, acc) through its own tiles into group 0 */
        constexpr int NV = 8 + 4 * (D / 16);
        static_assert(NV * NT <= f32_fwd_group_floats<D>(), "merge buffer fits group 1's tiles");
        float *x = sm + QL::FLOATS + f32_fwd_group_floats<D>();
        __syncthreads(); /* both loops done: group 1's tiles are free */
        if (grp == 1) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                x[i * NT + t] = m[i];
                x[(4 + i) * NT + t] = l[i];
#pragma unroll
                for (int j = 0; j < D / 16; j++)
                    x[(8 + i * (D / 16) + j) * NT + t] = acc[i][j];
            }
        }
        __syncthreads();
        if (grp == 1)
            return;
        float a1[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float m1 = x[i * NT + t], mn = fmaxf(m[i], m1);
            const float msub = mn == -INFINITY ? 0.f : mn;
            const float a0 = exp2f(m[i] - msub);
            a1[i] = exp2f(m1 - msub);
            l[i] = l[i] * a0 + x[(4 + i) * NT + t] * a1[i];
            m[i] = mn;
            if (cb == 0) {
                sA[ra + i] = a0;
                sA1[ra + i] = a1[i];
            }
            if constexpr (!OM)
#pragma unroll
                for (int j = 0; j < D / 16; j++)
                    acc[i][j] = acc[i][j] * a0 + x[(8 + i * (D / 16) + j) * NT + t] * a1[i];
        }
        if constexpr (OM) {
            group_sync<SP, NT>(0);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float a0 = sA[orow + 4 * i], b1 = sA1[orow + 4 * i];
#pragma unroll
                for (int j = 0; j < D / 16; j++)
                    acc[i][j] = acc[i][j] * a0 + x[(8 + i * (D / 16) + j) * NT + t] * b1;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        l[i] = sum16(l[i]);
        if (cb == 0) {
            sL[ra + i] = l[i];
            if (q0 + ra + i < Tn)
                lse[bh * Tn + q0 + ra + i] = (m[i] + log2f(l[i])) * LN2;
        }
    }
    if constexpr (OM)
        group_sync<SP, NT>(grp); /* sL */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = orow + OS * i, qi = q0 + r;
        if (qi >= Tn)
            continue;
        const float lr = OM ? sL[r] : l[i];
        const float inv = lr > 0.f ? 1.f / lr : 0.f;
        if constexpr (OM) {
#pragma unroll
            for (int jj = 0; jj < D / 64; jj++)
                *reinterpret_cast<float4 *>(o + base + (size_t)qi * D + ocol + 64 * jj) =
                    make_float4(acc[i][4 * jj] * inv, acc[i][4 * jj + 1] * inv,
                                acc[i][4 * jj + 2] * inv, acc[i][4 * jj + 3] * inv);
        } else {
#pragma unroll
            for (int j = 0; j < D / 16; j++)
                o[base + (size_t)qi * D + pb_col<D>(cb, j)] = acc[i][j] * inv;
        }
    }
}

/* --- fp32 single-pass backward, pipelined (CUDA cores; 16-byte aligned) ----
 * flash_bwd_f32_kernel computes what flash_bwd_dkdv_kernel<float, D, true>
 * does (64 keys per block, 64-query tiles, (64, D+4) shared tiles, the five
 * products in true fp32, each sum in order) with
 *  - a thread map under which every shared-memory load of a warp touches at
 *    most 128 bytes (one wavefront; the dK/dV kernel's operand-B loads take
 *    two): thread t (lane l, warp w) owns S/dP rows (keys) 32·(w/4) + l/4 +
 *    8i and columns (queries) 16·(w%4) + l%4 + 4j, i, j < 4; dK, dV rows
 *    32·(w/4) + l/4 + 8i and dQ rows (queries) 32·(w/4) + 4·(l/4) + i, both
 *    at columns 4·(l%4) + 16·(w%4) + 64·jj … +3;
 *  - the next Q and dO tiles loaded by cp.async while the current tile's
 *    dQ += dS·K runs (three barriers per query tile, as before);
 *  - masks only on tiles that cross the diagonal or T, and the scale folded
 *    into the exponent's FFMA. */

/* sm (64, D+4) ← rows row0… of g (Tn, D) float32 by 16-byte cp.async (256
 * threads); rows past Tn are zero. */
template <int D>
__device__ __forceinline__ void pad_tile_async(float *sm, const float *g, int row0, int Tn)
{
    constexpr int CH = D / 4;
#pragma unroll
    for (int idx = threadIdx.x; idx < BT * CH; idx += NT) {
        const int r = idx / CH, c = (idx - r * CH) * 4, gr = row0 + r;
        cp_async16(sm + r * ldf<D>() + c, g + (size_t)(gr < Tn ? gr : 0) * D + c, gr < Tn);
    }
}

/* acc[i][j] += Σ_c A[ar+8i][c]·B[bc+4j][c];  A, B: (64, D+4). c in order. */
template <int D>
__device__ __forceinline__ void mm_abt_rc(float acc[4][4], const float *A, const float *B, int ar,
                                          int bc)
{
    mm_abt_strided<D, 8, 4, 4>(acc, A, B, ar, bc);
}

/* acc[i][4·jj+e] += Σ_k P[ar+8i][k]·B[k][bc + 64·jj + e];  P: (64, 68),
 * B: (64, D+4), bc a multiple of 4. k in order. */
template <int D>
__device__ __forceinline__ void mm_pb_rc(float acc[4][D / 16], const float *P, const float *B,
                                         int ar, int bc)
{
#pragma unroll 2
    for (int k = 0; k < BT; k += 4) {
        float4 p[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            p[i] = lds4(P + (ar + 8 * i) * PS + k);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int jj = 0; jj < D / 64; jj++) {
                const float4 b = lds4(B + (k + kk) * ldf<D>() + bc + 64 * jj);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float x = comp(p[i], kk);
                    acc[i][4 * jj] = fmaf(x, b.x, acc[i][4 * jj]);
                    acc[i][4 * jj + 1] = fmaf(x, b.y, acc[i][4 * jj + 1]);
                    acc[i][4 * jj + 2] = fmaf(x, b.z, acc[i][4 * jj + 2]);
                    acc[i][4 * jj + 3] = fmaf(x, b.w, acc[i][4 * jj + 3]);
                }
            }
        }
    }
}

// dk, dv: (B, H, T, D) out; dq: (B, H, T, D) float32, zeroed, gets scale·dS·K
// of each tile added by float4 atomics (the order of the adds, and so dq's
// rounding, varies between runs); dout, q, k, v: (B, H, T, D), 16-byte
// aligned, D a multiple of 64; lse, dsum: (B, H, T). grid (ceil(T/64), B·H):
// block = 64 keys.
template <int D>
__global__ void __launch_bounds__(NT) flash_bwd_f32_kernel(float *dk, float *dv, float *dq,
                                                            const float *dout, const float *q,
                                                            const float *k, const float *v,
                                                            const float *lse, const float *dsum,
                                                            int Tn, int causal, float scale_log2,
                                                            float scale)
{
    static_assert(D % 64 == 0, "4 columns × 4 lanes × 4 warps per 64 columns");
    extern __shared__ __align__(16) float sm[];
    float *sK = sm, *sV = sK + BT * ldf<D>(), *sQ = sV + BT * ldf<D>(), *sdO = sQ + BT * ldf<D>();
    float *sP = sdO + BT * ldf<D>(), *sdS = sP + BT * PS;
    const int k0 = blockIdx.x * BT;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int ar = 32 * (w >> 2) + (lane >> 2);   /* S rows ar + 8i; dK, dV rows too */
    const int sc = 16 * (w & 3) + (lane & 3);     /* S columns sc + 4j */
    const int oc = 4 * (lane & 3) + 16 * (w & 3); /* output columns oc + 64·jj … +3 */
    const int qr = 32 * (w >> 2) + 4 * (lane >> 2); /* dQ rows qr + i */
    const int qbeg = causal ? k0 : 0;

    pad_tile_async<D>(sK, k + base, k0, Tn);
    pad_tile_async<D>(sV, v + base, k0, Tn);
    pad_tile_async<D>(sQ, q + base, qbeg, Tn);
    pad_tile_async<D>(sdO, dout + base, qbeg, Tn);
    cp_commit();
    float adk[4][D / 16] = {}, adv[4][D / 16] = {};
    for (int q0 = qbeg; q0 < Tn; q0 += BT) {
        float L[4], Dq[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int qj = q0 + sc + 4 * j;
            L[j] = qj < Tn ? lse[bh * Tn + qj] * LOG2E : 0.f;
            Dq[j] = qj < Tn ? dsum[bh * Tn + qj] : 0.f;
        }
        cp_wait<0>();
        __syncthreads(); /* this Q, dO tile visible; the last tile's dS read by all */
        float s[4][4] = {}, dp[4][4] = {};
        mm_abt_rc<D>(s, sK, sQ, ar, sc);   /* s[i][j]  = K[key]·Q[query] */
        mm_abt_rc<D>(dp, sV, sdO, ar, sc); /* dp[i][j] = V[key]·dO[query] */
        const bool edge = q0 + BT > Tn || k0 + BT > Tn || (causal && q0 == k0);
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float p = exp2f(fmaf(s[i][j], scale_log2, -L[j]));
                if (edge) {
                    const int qj = q0 + sc + 4 * j, ki = k0 + ar + 8 * i;
                    if (qj >= Tn || ki >= Tn || (causal && ki > qj))
                        p = 0.f;
                }
                sP[(ar + 8 * i) * PS + sc + 4 * j] = p;
                sdS[(ar + 8 * i) * PS + sc + 4 * j] = p * (dp[i][j] - Dq[j]);
            }
        }
        __syncthreads();
        mm_pb_rc<D>(adv, sP, sdO, ar, oc);
        mm_pb_rc<D>(adk, sdS, sQ, ar, oc);
        __syncthreads(); /* Q, dO read by all: the next tile loads during dQ */
        if (q0 + BT < Tn) {
            pad_tile_async<D>(sQ, q + base, q0 + BT, Tn);
            pad_tile_async<D>(sdO, dout + base, q0 + BT, Tn);
        }
        cp_commit();
        /* dq (queries q0 + qr + i, columns oc + 64·jj…) += s·dS·K */
        float aq[4][D / 16];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < D / 16; j++)
                aq[i][j] = 0.f;
#pragma unroll 2
        for (int kk = 0; kk < BT; kk++) {
            const float4 p = lds4(sdS + kk * PS + qr); /* dS[queries qr…qr+3][key kk] */
#pragma unroll
            for (int jj = 0; jj < D / 64; jj++) {
                const float4 b = lds4(sK + kk * ldf<D>() + oc + 64 * jj);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float x = comp(p, i);
                    aq[i][4 * jj] = fmaf(x, b.x, aq[i][4 * jj]);
                    aq[i][4 * jj + 1] = fmaf(x, b.y, aq[i][4 * jj + 1]);
                    aq[i][4 * jj + 2] = fmaf(x, b.z, aq[i][4 * jj + 2]);
                    aq[i][4 * jj + 3] = fmaf(x, b.w, aq[i][4 * jj + 3]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int qi = q0 + qr + i;
            if (qi >= Tn)
                continue;
#pragma unroll
            for (int jj = 0; jj < D / 64; jj++)
                atomicAdd(reinterpret_cast<float4 *>(dq + base + (size_t)qi * D + oc + 64 * jj),
                          make_float4(aq[i][4 * jj] * scale, aq[i][4 * jj + 1] * scale,
                                      aq[i][4 * jj + 2] * scale, aq[i][4 * jj + 3] * scale));
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int ki = k0 + ar + 8 * i;
        if (ki >= Tn)
            continue;
#pragma unroll
        for (int jj = 0; jj < D / 64; jj++) {
            float4 *pk = reinterpret_cast<float4 *>(dk + base + (size_t)ki * D + oc + 64 * jj);
            float4 *pv = reinterpret_cast<float4 *>(dv + base + (size_t)ki * D + oc + 64 * jj);
            *pk = make_float4(adk[i][4 * jj] * scale, adk[i][4 * jj + 1] * scale,
                              adk[i][4 * jj + 2] * scale, adk[i][4 * jj + 3] * scale);
            *pv = make_float4(adv[i][4 * jj], adv[i][4 * jj + 1], adv[i][4 * jj + 2],
                              adv[i][4 * jj + 3]);
        }
    }
}

/* Non-zero when every pointer is 16-byte aligned (cp.async needs it). */
bool aligned16(std::initializer_list<const void *> ps)
{
    for (const void *p : ps)
        if ((uintptr_t)p & 15)
            return false;
    return true;
}

template <typename K>
int set_smem(K kern, size_t bytes)
{
    return cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) ==
                   cudaSuccess
               ? LMK_OK
               : LMK_DEVICE;
}

int check_shape(const lmk_attn_shape *s)
{
    if (!s || s->B <= 0 || s->H <= 0 || s->T <= 0 || !lmk_attn_head_dim_supported(s->d))
        return LMK_INVALID;
    if ((long long)s->B * s->H > 65535)
        return LMK_INVALID;
    if (s->dtype != LMK_F32 && s->dtype != LMK_F16 && s->dtype != LMK_BF16)
        return LMK_INVALID;
    return LMK_OK;
}

/* Multiprocessors of the current device (132 when the query fails). */
int sm_count()
{
    return lmk_cuda_sm_count(132);
}

template <typename T, int D, int BM, int MT, int SP>
int fwd_mma_launch(void *o, float *lse, const void *q, const void *k, const void *v,
                   const lmk_attn_shape *s, float scale_log2, cudaStream_t st)
{
    auto tk = flash_fwd_mma_kernel<T, D, BM, MT, SP>;
    const size_t tsm = tc_fwd_smem<T, D, BM, SP>();
    if (set_smem(tk, tsm) != LMK_OK)
        return LMK_DEVICE;
    dim3 tgrid((s->T + BM - 1) / BM, s->B * s->H);
    tk<<<tgrid, SP * 2 * BM / MT, tsm, st>>>((T *)o, lse, (const T *)q, (const T *)k, (const T *)v, s->T,
                                   s->causal, scale_log2);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

template <int D>
int fwd_f32_launch(float *o, float *lse, const float *q, const float *k, const float *v,
                   const lmk_attn_shape *s, float scale_log2, cudaStream_t st)
{
    /* fewer blocks than two per SM: the longest block sets the time, so its
     * key loop splits in two (512 threads) */
    const bool split = (long long)s->B * s->H * ((s->T + BT - 1) / BT) < 2LL * sm_count();
    auto kern = split ? flash_fwd_f32_kernel<D, 2> : flash_fwd_f32_kernel<D, 1>;
    const size_t smem = split ? f32_fwd_smem<D, 2>() : f32_fwd_smem<D, 1>();
    if (set_smem(kern, smem) != LMK_OK)
        return LMK_DEVICE;
    dim3 grid((s->T + BT - 1) / BT, s->B * s->H);
    kern<<<grid, split ? 2 * NT : NT, smem, st>>>(o, lse, q, k, v, s->T, s->causal, scale_log2);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

template <typename T, int D>
int fwd_launch(void *o, float *lse, const void *q, const void *k, const void *v,
               const lmk_attn_shape *s, cudaStream_t st)
{
    const float scale = 1.f / sqrtf((float)D);
    if constexpr (sizeof(T) == 2) { /* fp16 / bf16: tensor cores */
        if (aligned16({o, q, k, v})) {
            if (lmk_flash_wgmma_usable(s)) /* flash_wgmma.cu decides which shapes it takes */
                return lmk_flash_wgmma_fwd(o, lse, q, k, v, s, st);
            /* Grids that would not give every SM two 128-query blocks (few
             * heads, short T) are bound by their longest causal block: 64-query
             * blocks (4 warps × 16 rows) with the key loop split in two
             * (8 warps). Otherwise 128 queries: at d ≤ 64, 4 warps × 32 rows
             * (each K/V fragment feeds two mma), else 8 warps × 16 rows. */
            const bool small = (long long)s->B * s->H * ((s->T + FQ - 1) / FQ) < 2LL * sm_count();
            if (small) { /* causal at d ≤ 64: four groups (16 warps, 128 registers) */
                if constexpr (D <= 64)
                    if (s->causal)
                        return fwd_mma_launch<T, D, FQ_SMALL, 1, 4>(o, lse, q, k, v, s,
                                                                    scale * LOG2E, st);
                return fwd_mma_launch<T, D, FQ_SMALL, 1, 2>(o, lse, q, k, v, s, scale * LOG2E,
                                                            st);
            }
            return fwd_mma_launch<T, D, FQ, (D <= 64 ? FWD_MT : 1), 1>(o, lse, q, k, v, s,
                                                                       scale * LOG2E, st);
        }
    }
    if constexpr (sizeof(T) == 4) /* fp32: 3xTF32 tensor cores (flash_f32tc.cu decides), else
                                     the pipelined CUDA-core kernel (cp.async) */
        if (aligned16({o, q, k, v})) {
            if (lmk_flash_f32tc_usable(s) && aligned16({lse}))
                return lmk_flash_f32tc_fwd((float *)o, lse, (const float *)q, (const float *)k,
                                           (const float *)v, s, st);
            return fwd_f32_launch<D>((float *)o, lse, (const float *)q, (const float *)k,
                                     (const float *)v, s, scale * LOG2E, st);
        }
    dim3 grid((s->T + BT - 1) / BT, s->B * s->H);
    const size_t smem = smem_bytes<D>(3, 1);
    auto kern = flash_fwd_kernel<T, D>;
    if (set_smem(kern, smem) != LMK_OK)
        return LMK_DEVICE;
    kern<<<grid, NT, smem, st>>>((T *)o, lse, (const T *)q, (const T *)k, (const T *)v, s->T,
                                 s->causal, scale * LOG2E);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

template <typename T, int D>
int bwd_launch(void *dq, void *dk, void *dv, float *work, const void *dout, const void *q,
               const void *k, const void *v, const void *o, const float *lse,
               const lmk_attn_shape *s, cudaStream_t st)
{
    const size_t rows = (size_t)s->B * s->H * s->T;
    const float scale = 1.f / sqrtf((float)D);
    const unsigned dot_blocks = (unsigned)((rows + 7) / 8);
    if constexpr (sizeof(T) == 2 && fused_ok<D>()) { /* the single pass */
        /* flash_wgmma_bwd.cu decides which shapes it takes (sm 9.0, d 64/128
         * and the zero-padded d 32/80, grids of about one 128-key block per SM
         * and more) */
        const bool wgmma = s->atomic_dq && lmk_flash_wgmma_bwd_preferred(s) && aligned16({lse});
        /* d 80 on grids of fewer than two 64-key blocks per SM that the wgmma
         * kernel does not take: the two passes are faster than the mma.sync
         * single pass there (H100, bf16, one head T 16384 causal: 0.752
         * against 0.798 ms; at B 8 T 16384 the single pass is 9% faster) */
        const bool d80_small =
            D == 80 && !wgmma && (long long)s->B * s->H * ((s->T + BKV - 1) / BKV) < 2LL * sm_count();
        if (s->atomic_dq && !d80_small && aligned16({dq, dk, dv, dout, q, k, v, work})) {
            float *dqacc = work, *dsum = work + rows * D; /* lmk_flash_attn_bwd_work_floats */
            flash_bwd_dot_kernel<T><<<dot_blocks, 256, 0, st>>>(dsum, dqacc, (const T *)dout,
                                                                 (const T *)o, rows, D);
            if (cudaGetLastError() != cudaSuccess)
                return LMK_DEVICE;
            if (wgmma)
                return lmk_flash_wgmma_bwd(dq, dk, dv, dqacc, dsum, dout, q, k, v, lse, s, st);
            const long long blocks = (long long)s->B * s->H * ((s->T + BKV - 1) / BKV);
            const int sms = sm_count();
            /* fewer blocks than two per SM: the longest block sets the time,
             * so the query loop splits in two (8 warps per block) */
            const int sp = blocks < 2LL * sms ? 2 : 1;
            auto kf = flash_bwd_fused_mma_kernel<T, D, 1, 1>;
            size_t smf = tc_fused_smem<T, D, 1>();
            if (sp == 2) {
                kf = flash_bwd_fused_mma_kernel<T, D, 1, 2>;
                smf = tc_fused_smem<T, D, 2>();
            } else if constexpr (D <= 64) {
                if (blocks >= (long long)FUSED_MINB * sms)
                    kf = flash_bwd_fused_mma_kernel<T, D, FUSED_MINB, 1>;
            }
            if (set_smem(kf, smf) != LMK_OK)
                return LMK_DEVICE;
            dim3 grid((s->T + BKV - 1) / BKV, s->B * s->H);
            kf<<<grid, sp * BKV_NT, smf, st>>>((T *)dk, (T *)dv, dqacc, (const T *)dout,
                                               (const T *)q, (const T *)k, (const T *)v, lse,
                                               dsum, s->T, s->causal, scale * LOG2E, scale);
            if (cudaGetLastError() != cudaSuccess)
                return LMK_DEVICE;
            const size_t n = rows * D;
            const size_t cblocks = (n / 4 + 255) / 256, cmax = (size_t)sms * 16;
            flash_bwd_dq_convert_kernel<T><<<(unsigned)(cblocks < cmax ? cblocks : cmax), 256, 0,
                                             st>>>((T *)dq, dqacc, n, scale);
            return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
        }
    }
    if constexpr (sizeof(T) == 4) { /* fp32 single pass: dQ by atomics into dq */
        const bool tc = lmk_flash_f32tc_usable(s) && /* 3xTF32 tensor cores, any d */
                        aligned16({dq, dk, dv, dout, q, k, v, o, lse, work});
        if (s->atomic_dq && (tc || D % 64 == 0) && aligned16({dq})) {
            if (tc) /* D = rowsum(dO∘O) and the zeroed dq there (D in the arithmetic of dP) */
                return lmk_flash_f32tc_bwd((float *)dq, (float *)dk, (float *)dv, work,
                                           (const float *)dout, (const float *)q,
                                           (const float *)k, (const float *)v, (const float *)o,
                                           lse, s, st);
            flash_bwd_dot_kernel<T><<<dot_blocks, 256, 0, st>>>(work, (float *)dq,
                                                                 (const T *)dout, (const T *)o,
                                                                 rows, D);
            if (cudaGetLastError() != cudaSuccess)
                return LMK_DEVICE;
            if constexpr (D % 64 == 0) { /* the CUDA-core single pass */
                dim3 grid((s->T + BT - 1) / BT, s->B * s->H);
                const size_t smem_kv = smem_bytes<D>(4, 2);
                if (aligned16({dk, dv, dout, q, k, v})) { /* pipelined */
                    auto kp = flash_bwd_f32_kernel<D>;
                    if (set_smem(kp, smem_kv) != LMK_OK)
                        return LMK_DEVICE;
                    kp<<<grid, NT, smem_kv, st>>>((float *)dk, (float *)dv, (float *)dq,
                                                  (const float *)dout, (const float *)q,
                                                  (const float *)k, (const float *)v, lse, work,
                                                  s->T, s->causal, scale * LOG2E, scale);
                    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
                }
                auto kkv = flash_bwd_dkdv_kernel<T, D, true>;
                if (set_smem(kkv, smem_kv) != LMK_OK)
                    return LMK_DEVICE;
                kkv<<<grid, NT, smem_kv, st>>>((T *)dk, (T *)dv, (float *)dq, (const T *)dout,
                                               (const T *)q, (const T *)k, (const T *)v, lse, work,
                                               s->T, s->causal, scale * LOG2E, scale);
                return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
            }
        }
    }
    flash_bwd_dot_kernel<T><<<dot_blocks, 256, 0, st>>>(work, nullptr, (const T *)dout,
                                                         (const T *)o, rows, D);
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;
    if constexpr (sizeof(T) == 2) { /* fp16 / bf16: tensor cores, two passes */
        if (aligned16({dq, dk, dv, dout, q, k, v})) {
            const long long blocks = (long long)s->B * s->H * ((s->T + BKV - 1) / BKV);
            const int sms = sm_count();
            /* fewer blocks than two per SM: the longest block sets the time,
             * so both loops split in two (8 warps per block) */
            const int sp = blocks < 2LL * sms ? 2 : 1;
            int spq = sp; /* dQ at d ≤ 64: four groups (16 warps, 128 registers) */
            auto kkv = flash_bwd_dkdv_mma_kernel<T, D, 1, 1>;
            auto kq = flash_bwd_dq_mma_kernel<T, D, 1, 1>;
            size_t smkv = tc_dkdv_smem<T, D, 1>(), smq = tc_dq_smem<T, D, 1>();
            if (sp == 2) {
                kkv = flash_bwd_dkdv_mma_kernel<T, D, 1, 2>;
                smkv = tc_dkdv_smem<T, D, 2>();
                if constexpr (D <= 64) {
                    spq = 4;
                    kq = flash_bwd_dq_mma_kernel<T, D, 1, 4>;
                    smq = tc_dq_smem<T, D, 4>();
                } else {
                    kq = flash_bwd_dq_mma_kernel<T, D, 1, 2>;
                    smq = tc_dq_smem<T, D, 2>();
                }
            } else if constexpr (D <= 64) {
                if (blocks >= (long long)KV_MINB * sms)
                    kkv = flash_bwd_dkdv_mma_kernel<T, D, KV_MINB, 1>;
                if (blocks >= (long long)DQ_MINB * sms) /* BQ2 == BKV: same block count */
                    kq = flash_bwd_dq_mma_kernel<T, D, DQ_MINB, 1>;
            }
            if (set_smem(kkv, smkv) != LMK_OK)
                return LMK_DEVICE;
            dim3 gkv((s->T + BKV - 1) / BKV, s->B * s->H);
            kkv<<<gkv, sp * BKV_NT, smkv, st>>>((T *)dk, (T *)dv, (const T *)dout, (const T *)q,
                                          (const T *)k, (const T *)v, lse, work, s->T,
                                          s->causal, scale * LOG2E, scale);
            if (cudaGetLastError() != cudaSuccess)
                return LMK_DEVICE;
            if (set_smem(kq, smq) != LMK_OK)
                return LMK_DEVICE;
            dim3 gq((s->T + BQ2 - 1) / BQ2, s->B * s->H);
            kq<<<gq, spq * BQ_NT, smq, st>>>((T *)dq, (const T *)dout, (const T *)q, (const T *)k,
                                       (const T *)v, lse, work, s->T, s->causal,
                                       scale * LOG2E, scale);
            return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
        }
    }
    dim3 grid((s->T + BT - 1) / BT, s->B * s->H);
    const size_t smem_kv = smem_bytes<D>(4, 2);
    auto kkv = flash_bwd_dkdv_kernel<T, D, false>;
    if (set_smem(kkv, smem_kv) != LMK_OK)
        return LMK_DEVICE;
    kkv<<<grid, NT, smem_kv, st>>>((T *)dk, (T *)dv, nullptr, (const T *)dout, (const T *)q,
                                   (const T *)k, (const T *)v, lse, work, s->T, s->causal,
                                   scale * LOG2E, scale);
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;
    const size_t smem_q = smem_bytes<D>(4, 1);
    auto kq = flash_bwd_dq_kernel<T, D>;
    if (set_smem(kq, smem_q) != LMK_OK)
        return LMK_DEVICE;
    kq<<<grid, NT, smem_q, st>>>((T *)dq, (const T *)dout, (const T *)q, (const T *)k,
                                 (const T *)v, lse, work, s->T, s->causal, scale * LOG2E, scale);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

template <typename T>
int fwd_dispatch(void *o, float *lse, const void *q, const void *k, const void *v,
                 const lmk_attn_shape *s, cudaStream_t st)
{
    switch (s->d) {
#define XX(D) \
    case D: return fwd_launch<T, D>(o, lse, q, k, v, s, st);
        LMK_ATTN_HEAD_DIMS(XX)
#undef XX
    }
    return LMK_INVALID;
}

template <typename T>
int bwd_dispatch(void *dq, void *dk, void *dv, float *work, const void *dout, const void *q,
                 const void *k, const void *v, const void *o, const float *lse,
                 const lmk_attn_shape *s, cudaStream_t st)
{
    switch (s->d) {
#define XX(D) \
    case D: return bwd_launch<T, D>(dq, dk, dv, work, dout, q, k, v, o, lse, s, st);
        LMK_ATTN_HEAD_DIMS(XX)
#undef XX
    }
    return LMK_INVALID;
}

} // namespace

extern "C" int lmk_flash_attn_fwd(void *o, float *lse, const void *q, const void *k,
                                  const void *v, const lmk_attn_shape *s, void *stream)
{
    int rc = check_shape(s);
    if (rc != LMK_OK || !o || !lse || !q || !k || !v)
        return LMK_INVALID;
    cudaStream_t st = (cudaStream_t)stream;
    switch (s->dtype) {
    case LMK_F32: return fwd_dispatch<float>(o, lse, q, k, v, s, st);
    case LMK_F16: return fwd_dispatch<__half>(o, lse, q, k, v, s, st);
    case LMK_BF16: return fwd_dispatch<__nv_bfloat16>(o, lse, q, k, v, s, st);
    default: return LMK_INVALID;
    }
}

extern "C" int lmk_flash_attn_bwd(void *dq, void *dk, void *dv, float *work, const void *dout,
                                  const void *q, const void *k, const void *v, const void *o,
                                  const float *lse, const lmk_attn_shape *s, void *stream)
{
    int rc = check_shape(s);
    if (rc != LMK_OK || !dq || !dk || !dv || !work || !dout || !q || !k || !v || !o || !lse)
        return LMK_INVALID;
    cudaStream_t st = (cudaStream_t)stream;
    switch (s->dtype) {
    case LMK_F32: return bwd_dispatch<float>(dq, dk, dv, work, dout, q, k, v, o, lse, s, st);
    case LMK_F16: return bwd_dispatch<__half>(dq, dk, dv, work, dout, q, k, v, o, lse, s, st);
    case LMK_BF16:
        return bwd_dispatch<__nv_bfloat16>(dq, dk, dv, work, dout, q, k, v, o, lse, s, st);
    default: return LMK_INVALID;
    }
}
