/* Flash attention (FA2-style), forward and recomputing backward, fused; the
 * math and shapes are in attention.h.
 *
 * Forward: one block per (64 queries, b·h). The query tile stays in shared
 * memory; for each 64-key tile, S = Q·Kᵀ (scaled, in log2 units), online
 * softmax with a running max m and sum l per row, acc = acc·2^(m_old−m_new)
 * + P·V. O = acc / l, lse = (m + log2 l)·ln 2.
 * Backward: D = rowsum(dO∘O); dK/dV kernel (one block per 64 keys, looping
 * over query tiles: P and dP recomputed, dV += Pᵀ·dO, dK += s·dSᵀ·Q); dQ
 * kernel (one block per 64 queries, looping over key tiles: dQ += s·dS·K).
 * Deterministic: no atomics, every output element has one writer.
 *
 * The fp16/bf16 forward runs on tensor cores (flash_fwd_tc_kernel, WMMA with
 * fp32 accumulate); the fp32 forward and every backward run in float32 on
 * CUDA cores (fp16/bf16 converted on load, rounded on store). 256 threads; thread t owns rows 4·(t/16)…+3 of
 * a 64-row tile and columns t%16 + 16·j, so row reductions are shuffles over
 * 16 lanes. Shared tiles are (64, d+1) floats (odd stride: no bank conflicts
 * in either access pattern). Tail tiles are zero-filled and masked. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mma.h>

#include "../attention.h"
extern "C" {
#include "../status.h"
}

namespace {

constexpr int BT = 64;   /* rows of a query or key tile */
constexpr int NT = 256;  /* threads per block */
constexpr int PS = BT + 1; /* row stride of the (64, 64) P / dS tiles */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ float ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float *p, float x) { *p = x; }
__device__ __forceinline__ void st(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

/* sm (64, D+1) ← rows row0… of g (Tn, D); rows past Tn are zero. */
template <typename T, int D>
__device__ __forceinline__ void load_tile(float *sm, const T *g, int row0, int Tn)
{
    for (int idx = threadIdx.x; idx < BT * D; idx += NT) {
        int r = idx / D, c = idx - r * D;
        int gr = row0 + r;
        sm[r * (D + 1) + c] = gr < Tn ? ld(g + (size_t)gr * D + c) : 0.f;
    }
}

/* acc[i][j] += Σ_c A[ra+i][c]·B[cb+16j][c];  A, B: (64, D+1) shared. */
template <int D>
__device__ __forceinline__ void mm_abt(float acc[4][4], const float *A, const float *B, int ra,
                                       int cb)
{
#pragma unroll 4
    for (int c = 0; c < D; c++) {
        float a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            a[i] = A[(ra + i) * (D + 1) + c];
#pragma unroll
        for (int j = 0; j < 4; j++)
            b[j] = B[(cb + 16 * j) * (D + 1) + c];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* acc[i][j] += Σ_k P[ra+i][k]·B[k][cb+16j];  P: (64, 65), B: (64, D+1). */
template <int D>
__device__ __forceinline__ void mm_pb(float acc[4][D / 16], const float *P, const float *B,
                                      int ra, int cb)
{
#pragma unroll 2
    for (int k = 0; k < BT; k++) {
        float p[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            p[i] = P[(ra + i) * PS + k];
#pragma unroll
        for (int j = 0; j < D / 16; j++) {
            float b = B[k * (D + 1) + cb + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[i][j] = fmaf(p[i], b, acc[i][j]);
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
    return sizeof(float) * ((size_t)tiles * BT * (D + 1) + (size_t)ptiles * BT * PS);
}

// o: (B, H, T, D); lse: (B, H, T); q, k, v: (B, H, T, D). grid (ceil(T/64), B·H)
template <typename T, int D>
__global__ void __launch_bounds__(NT) flash_fwd_kernel(T *o, float *lse, const T *q, const T *k,
                                                        const T *v, int Tn, int causal,
                                                        float scale_log2)
{
    extern __shared__ float sm[];
    float *sQ = sm, *sK = sQ + BT * (D + 1), *sV = sK + BT * (D + 1), *sP = sV + BT * (D + 1);
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
            st(o + base + (size_t)qi * D + cb + 16 * j, acc[i][j] * inv);
        if (cb == 0)
            lse[bh * Tn + qi] = (m[i] + log2f(l[i])) * LN2;
    }
}

// dsum: (rows); dout, o: (rows, d). One warp per row, 8 rows per block.
template <typename T>
__global__ void flash_bwd_dot_kernel(float *dsum, const T *dout, const T *o, size_t rows, int d)
{
    const size_t row = (size_t)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
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
template <typename T, int D>
__global__ void __launch_bounds__(NT) flash_bwd_dkdv_kernel(T *dk, T *dv, const T *dout,
                                                             const T *q, const T *k, const T *v,
                                                             const float *lse, const float *dsum,
                                                             int Tn, int causal,
                                                             float scale_log2, float scale)
{
    extern __shared__ float sm[];
    float *sK = sm, *sV = sK + BT * (D + 1), *sQ = sV + BT * (D + 1), *sdO = sQ + BT * (D + 1);
    float *sP = sdO + BT * (D + 1), *sdS = sP + BT * PS;
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
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int ki = k0 + ra + i;
        if (ki >= Tn)
            continue;
#pragma unroll
        for (int j = 0; j < D / 16; j++) {
            st(dk + base + (size_t)ki * D + cb + 16 * j, adk[i][j] * scale);
            st(dv + base + (size_t)ki * D + cb + 16 * j, adv[i][j]);
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
    extern __shared__ float sm[];
    float *sQ = sm, *sdO = sQ + BT * (D + 1), *sK = sdO + BT * (D + 1), *sV = sK + BT * (D + 1);
    float *sdS = sV + BT * (D + 1);
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
            st(dq + base + (size_t)qi * D + cb + 16 * j, adq[i][j] * scale);
    }
}


/* --- tensor-core forward (fp16 / bf16): WMMA 16×16×16, fp32 accumulate ------
 * 4 warps; warp w owns query rows 16w…16w+15 of the 64-row tile. S = Q·Kᵀ
 * and O += P·V on tensor cores; S and O live in shared memory as fp32 so the
 * online-softmax rescale is plain arithmetic; P is rounded to the element
 * type before P·V (as FA2 does). */
constexpr int TC_NT = 128;

template <typename T, int D>
struct tc_layout {
    static constexpr int LQ = D + 8;  /* T elements; multiple of 8 */
    static constexpr int LS = BT + 4; /* floats; multiple of 4 */
    static constexpr int LP = BT + 8;
    static constexpr int LO = D + 4;
    static constexpr size_t bytes = sizeof(T) * (3 * BT * LQ + BT * LP) +
                                    sizeof(float) * (BT * LS + BT * LO);
};

template <typename T, int D>
__device__ __forceinline__ void tc_load(T *sm, const T *g, int row0, int Tn)
{
    for (int idx = threadIdx.x; idx < BT * D; idx += TC_NT) {
        int r = idx / D, c = idx - r * D;
        int gr = row0 + r;
        T z;
        st(&z, 0.f);
        sm[r * tc_layout<T, D>::LQ + c] = gr < Tn ? g[(size_t)gr * D + c] : z;
    }
}

// o: (B, H, T, D); lse: (B, H, T); q, k, v: (B, H, T, D). grid (ceil(T/64), B·H)
template <typename T, int D>
__global__ void __launch_bounds__(TC_NT) flash_fwd_tc_kernel(T *o, float *lse, const T *q,
                                                              const T *k, const T *v, int Tn,
                                                              int causal, float scale_log2)
{
    using namespace nvcuda;
    using L = tc_layout<T, D>;
    extern __shared__ __align__(128) unsigned char smraw[];
    T *sQ = (T *)smraw, *sK = sQ + BT * L::LQ, *sV = sK + BT * L::LQ, *sP = sV + BT * L::LQ;
    float *sS = (float *)(sP + BT * L::LP), *sO = sS + BT * L::LS;
    const int q0 = blockIdx.x * BT;
    const size_t bh = blockIdx.y, base = bh * Tn * D;
    const int w = threadIdx.x / 32, lane = threadIdx.x & 31;
    const int r = 16 * w + lane / 2, half = lane & 1; /* softmax: row r, columns half·32… */
    const int qi = q0 + r;

    tc_load<T, D>(sQ, q + base, q0, Tn);
    for (int idx = threadIdx.x; idx < BT * L::LO; idx += TC_NT)
        sO[idx] = 0.f;
    float m = -INFINITY, l = 0.f;
    const int kend = causal ? min(Tn, q0 + BT) : Tn;
    for (int k0 = 0; k0 < kend; k0 += BT) {
        __syncthreads();
        tc_load<T, D>(sK, k + base, k0, Tn);
        tc_load<T, D>(sV, v + base, k0, Tn);
        __syncthreads();
        /* S (16, 64) of this warp */
#pragma unroll
        for (int n = 0; n < BT / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
            wmma::fill_fragment(c, 0.f);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
                wmma::load_matrix_sync(a, sQ + 16 * w * L::LQ + 16 * kk, L::LQ);
                wmma::load_matrix_sync(b, sK + 16 * n * L::LQ + 16 * kk, L::LQ);
                wmma::mma_sync(c, a, b, c);
            }
            wmma::store_matrix_sync(sS + 16 * w * L::LS + 16 * n, c, L::LS, wmma::mem_row_major);
        }
        __syncwarp();
        /* online softmax of row r over columns half·32 … +31 */
        float x[32], rmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const int kj = k0 + half * 32 + j;
            const bool ok = kj < Tn && (!causal || kj <= qi);
            x[j] = ok ? sS[r * L::LS + half * 32 + j] * scale_log2 : -INFINITY;
            rmax = fmaxf(rmax, x[j]);
        }
        rmax = fmaxf(rmax, __shfl_xor_sync(0xffffffffu, rmax, 1));
        const float mnew = fmaxf(m, rmax);
        const float msub = mnew == -INFINITY ? 0.f : mnew;
        const float alpha = exp2f(m - msub);
        float rs = 0.f;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            T pv;
            st(&pv, exp2f(x[j] - msub));
            sP[r * L::LP + half * 32 + j] = pv;
            rs += ld(&pv); /* the sum of what P·V multiplies */
        }
        rs += __shfl_xor_sync(0xffffffffu, rs, 1);
        l = l * alpha + rs;
        m = mnew;
        for (int c = half * (D / 2); c < (half + 1) * (D / 2); c++)
            sO[r * L::LO + c] *= alpha;
        __syncwarp();
        /* O (16, D) += P (16, 64) · V (64, D) */
#pragma unroll
        for (int n = 0; n < D / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
            wmma::load_matrix_sync(c, sO + 16 * w * L::LO + 16 * n, L::LO, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < BT / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
                wmma::load_matrix_sync(a, sP + 16 * w * L::LP + 16 * kk, L::LP);
                wmma::load_matrix_sync(b, sV + 16 * kk * L::LQ + 16 * n, L::LQ);
                wmma::mma_sync(c, a, b, c);
            }
            wmma::store_matrix_sync(sO + 16 * w * L::LO + 16 * n, c, L::LO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (qi < Tn) {
        const float inv = l > 0.f ? 1.f / l : 0.f;
        for (int c = half * (D / 2); c < (half + 1) * (D / 2); c++)
            st(o + base + (size_t)qi * D + c, sO[r * L::LO + c] * inv);
        if (half == 0)
            lse[bh * Tn + qi] = (m + log2f(l)) * LN2;
    }
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

template <typename T, int D>
int fwd_launch(void *o, float *lse, const void *q, const void *k, const void *v,
               const lmk_attn_shape *s, cudaStream_t st)
{
    const float scale = 1.f / sqrtf((float)D);
    dim3 grid((s->T + BT - 1) / BT, s->B * s->H);
    if constexpr (sizeof(T) == 2) { /* fp16 / bf16: tensor cores */
        auto tk = flash_fwd_tc_kernel<T, D>;
        const size_t tsm = tc_layout<T, D>::bytes;
        if (cudaFuncSetAttribute(tk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tsm) !=
            cudaSuccess)
            return LMK_DEVICE;
        tk<<<grid, TC_NT, tsm, st>>>((T *)o, lse, (const T *)q, (const T *)k, (const T *)v, s->T,
                                     s->causal, scale * LOG2E);
        return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
    }
    const size_t smem = smem_bytes<D>(3, 1);
    auto kern = flash_fwd_kernel<T, D>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
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
    flash_bwd_dot_kernel<T><<<(unsigned)((rows + 7) / 8), 256, 0, st>>>(
        work, (const T *)dout, (const T *)o, rows, D);
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;
    const float scale = 1.f / sqrtf((float)D);
    dim3 grid((s->T + BT - 1) / BT, s->B * s->H);

    const size_t smem_kv = smem_bytes<D>(4, 2);
    auto kkv = flash_bwd_dkdv_kernel<T, D>;
    if (cudaFuncSetAttribute(kkv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv) !=
        cudaSuccess)
        return LMK_DEVICE;
    kkv<<<grid, NT, smem_kv, st>>>((T *)dk, (T *)dv, (const T *)dout, (const T *)q,
                                   (const T *)k, (const T *)v, lse, work, s->T, s->causal,
                                   scale * LOG2E, scale);
    if (cudaGetLastError() != cudaSuccess)
        return LMK_DEVICE;

    const size_t smem_q = smem_bytes<D>(4, 1);
    auto kq = flash_bwd_dq_kernel<T, D>;
    if (cudaFuncSetAttribute(kq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q) !=
        cudaSuccess)
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
