/* The causal GEMMs of the naive attention (backend.h attn_causal_gemm) on
 * tensor cores, one launch each, 16-bit operands and output, float32
 * accumulation (mma.sync m16n8k16), alpha applied in float32 and one
 * rounding per stored element — the arithmetic of cuBLAS's 16-bit GEMMs with
 * CUBLAS_COMPUTE_32F; only the order of the float32 additions differs.
 *
 * Every (T, T) matrix is cut into CT × CT tiles; query tile r needs key tiles
 * 0…r (the causal block of the softmax's zero_block = CT). One block of
 * 4 warps per (64·MT output rows, head), each warp 16·MT rows, blocks with
 * the longest loops first; a warp skips the steps beyond its rows' causal
 * tile (MT 2: a block spans two causal tiles):
 *   scores (c (T,T) = α·a·bmᵀ): query rows, loop over key tiles. The block's
 *     A rows stay in registers; each key tile's product is rounded, staged
 *     in shared memory by stmatrix and stored as 16-byte row pieces.
 *   mix    (c (T,dh) = α·a·bm): query rows, loop over key tiles of a.
 *   mix_t  (c (T,dh) = α·aᵀ·bm): key rows, loop over query tiles of a from
 *     their causal tile on (a's tiles read transposed by ldmatrix.trans).
 * Tiles arrive by 16-byte cp.async in a CG_STAGES-deep ring, one barrier per
 * loop step. Rows in shared memory are padded by 8 elements (conflict-free
 * ldmatrix for every supported dh).
 * Measured on the H200 (kernels/PERF.md, session 11): at xl/1024 bf16 each
 * launch moves 2.1–2.5 TB/s, like cuBLAS's blocked GEMMs (ncu: latency-bound,
 * short-scoreboard and mma waits at 4 warps per scheduler); the gain is
 * fewer launches and tiles at short T and the 64-row causal tiles. */
#include "cuda_internal.cuh"
#include "mma_sm80.cuh"

#include <type_traits>

namespace {

constexpr int CT = 64; /* the causal tile: rows of a query block, the reduction step */
#ifndef LMK_CG_STAGES  /* build-time knob: the cp.async ring depth */
#define LMK_CG_STAGES 3
#endif
/* Build-time knob: m16 row tiles per warp, 1 or 2 (64 or 128 output rows per
 * 4-warp block; 2 where T is a multiple of 128). 2 measured on the H200
 * against 1: xl/1024 bf16 fwd+bwd 112.8 vs 113.9 ms, large/1024 58.7 vs 59.3,
 * small/128 3.43 vs 3.92 (kernels/PERF.md, session 11, call 4). */
#ifndef LMK_CG_MT
#define LMK_CG_MT 2
#endif
constexpr int CG_STAGES = LMK_CG_STAGES;
constexpr int CG_WARPS = 4, CG_THREADS = CG_WARPS * 32;
constexpr int TT_LD = CT + 8; /* shared row stride of a CT-wide tile (elements) */
template <int DH> constexpr int dh_ld() { return DH + 8; }

/* sm (R, LD) ← R rows × W columns of g (row stride ldg elements), by the
 * block's CG_THREADS threads, 16 bytes each per piece. Where a thread's
 * pieces keep one column (CG_THREADS a multiple of the pieces per row) the
 * offsets are set once and stepped by constants. */
template <typename T, int R, int W, int LD>
__device__ __forceinline__ void tile_load(T *sm, const T *g, size_t ldg)
{
    constexpr int CH = W / 8, N = R * CH; /* 16-byte pieces per row, in all */
    if constexpr (CG_THREADS % CH == 0) {
        constexpr int STEP = CG_THREADS / CH; /* rows between a thread's pieces */
        const int r = threadIdx.x / CH, c = (threadIdx.x % CH) * 8;
        T *sp = sm + r * LD + c;
        const T *gp = g + (size_t)r * ldg + c;
#pragma unroll
        for (int i = 0; i < (N + CG_THREADS - 1) / CG_THREADS; i++)
            if (N % CG_THREADS == 0 || r + i * STEP < R)
                cp_async16(sp + i * STEP * LD, gp + (size_t)i * STEP * ldg, true);
    } else {
        for (int idx = threadIdx.x; idx < N; idx += CG_THREADS) {
            const int r = idx / CH, c = (idx - r * CH) * 8;
            cp_async16(sm + r * LD + c, g + (size_t)r * ldg + c, true);
        }
    }
}

/* Four 8×8 b16 matrices to shared memory (the inverse of ldsm4): lane l
 * gives the address of row l%8 of matrix l/8. */
__device__ __forceinline__ void stsm4(const void *p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(p)), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3));
}

/* acc (MT, NB, 4) = 0: MT row tiles of NB mma C blocks. */
template <int MT, int NB> __device__ __forceinline__ void zero_acc(float (&acc)[MT][NB][4])
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NB; n++)
            acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.0f;
}

/* acc[m][n], acc[m][n + 1] += a[m] · the B operand pair r (blocks n and n + 1,
 * as ldsm4 / ldsm4_t load them), for each of the MT row tiles. */
template <typename T, int MT, int NB>
__device__ __forceinline__ void mma_rows(float (&acc)[MT][NB][4], int n, const uint32_t (&a)[MT][4],
                                         const uint32_t (&r)[4])
{
#pragma unroll
    for (int m = 0; m < MT; m++) {
        tc_ops<T>::mma(acc[m][n], a[m], r[0], r[1]);
        tc_ops<T>::mma(acc[m][n + 1], a[m], r[2], r[3]);
    }
}

/* scores: the A tile (ROWS, DH), whose space then stages the output tiles
 * (ROWS, TT_LD), and the ring of (CT, DH) key tiles */
template <int DH, int ROWS> constexpr int scores_a_elems()
{
    return ROWS * (dh_ld<DH>() > TT_LD ? dh_ld<DH>() : TT_LD);
}
template <typename T, int DH, int ROWS> constexpr size_t scores_smem()
{
    return ((size_t)scores_a_elems<DH, ROWS>() + (size_t)CG_STAGES * CT * dh_ld<DH>()) * sizeof(T);
}
/* mix: per stage the a tile ((ROWS, CT) as stored, or (CT, ROWS) read
 * transposed) and the (CT, DH) bm tile */
template <int ROWS> constexpr int mix_a_elems()
{
    return ROWS * TT_LD > CT * (ROWS + 8) ? ROWS * TT_LD : CT * (ROWS + 8);
}
template <typename T, int DH, int ROWS> constexpr size_t mix_smem()
{
    return (size_t)CG_STAGES * (mix_a_elems<ROWS>() + CT * dh_ld<DH>()) * sizeof(T);
}

/* c (batch, T, T) = alpha · a (batch, T, DH) · bm (batch, T, DH)ᵀ, written
 * for the causal tiles only. Grid: (T / ROWS) · batch blocks of CG_THREADS;
 * ROWS = 64·MT, a warp owns 16·MT rows, which stop at their causal tile's
 * last key tile. */
template <typename T, int DH, int MT>
__global__ void __launch_bounds__(CG_THREADS)
    causal_scores_gemm_kernel(T *c, const T *a, const T *bm, int Tn, int batch, float alpha)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), ROWS = CG_WARPS * 16 * MT, WR = 16 * MT;
    T *as = reinterpret_cast<T *>(smem_raw); /* (ROWS, LD); after the first step (ROWS, TT_LD): outputs */
    T *bs = as + scores_a_elems<DH, ROWS>(); /* CG_STAGES × (CT, LD) */
    const int nt = Tn / ROWS, lin = blockIdx.x;
    const int qt = nt - 1 - lin / batch, bh = lin % batch, nk = (qt + 1) * (ROWS / CT);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int last = (qt * ROWS + warp * WR) / CT; /* this warp's last key tile */
    const T *ag = a + ((size_t)bh * Tn + (size_t)qt * ROWS) * DH;
    const T *bg = bm + (size_t)bh * Tn * DH;
    T *cg = c + ((size_t)bh * Tn + (size_t)qt * ROWS + warp * WR) * Tn;

    tile_load<T, ROWS, DH, LD>(as, ag, DH);
    for (int s = 0; s < CG_STAGES - 1; s++) {
        if (s < nk)
            tile_load<T, CT, DH, LD>(bs + s * CT * LD, bg + (size_t)s * CT * DH, DH);
        cp_commit();
    }
    uint32_t af[DH / 16][MT][4]; /* per k-step, the MT row tiles */
    T *cw = as + warp * WR * TT_LD; /* this warp's rows of the output tile, rounded */
    /* a lane's piece of the warp's (WR, CT) output: row lane / 8 + 4·i, 16 bytes at column (lane % 8)·8 */
    const T *cw_rd = cw + (lane >> 3) * TT_LD + (lane & 7) * 8;
    T *cg_wr = cg + (size_t)(lane >> 3) * Tn + (lane & 7) * 8;
    for (int kt = 0; kt < nk; kt++) {
        cp_wait<CG_STAGES - 2>();
        __syncthreads();
        if (kt == 0) {
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int k = 0; k < DH / 16; k++)
                    ldsm4(af[k][m], frag_a(as, LD, warp * WR + m * 16, k * 16, lane));
            __syncthreads(); /* every warp holds its rows: the A tile's space stages outputs from now on */
        }
        const int pf = kt + CG_STAGES - 1;
        if (pf < nk)
            tile_load<T, CT, DH, LD>(bs + (pf % CG_STAGES) * CT * LD, bg + (size_t)pf * CT * DH, DH);
        cp_commit();
        if (kt > last)
            continue;
        const T *b = bs + (kt % CG_STAGES) * CT * LD;
        float acc[MT][CT / 8][4];
        zero_acc(acc);
#pragma unroll
        for (int k = 0; k < DH / 16; k++)
#pragma unroll
            for (int n = 0; n < CT / 16; n++) {
                uint32_t r[4];
                ldsm4(r, frag_b(b, LD, n * 16, k * 16, lane));
                mma_rows<T>(acc, 2 * n, af[k], r);
            }
        /* rounded into shared memory by 16 × 16 blocks (stmatrix), then out as 16-byte row pieces */
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int n = 0; n < CT / 16; n++) {
                const float(&x)[4] = acc[m][2 * n], (&y)[4] = acc[m][2 * n + 1];
                stsm4(frag_a(cw, TT_LD, m * 16, n * 16, lane), tc_ops<T>::pack(alpha * x[0], alpha * x[1]),
                      tc_ops<T>::pack(alpha * x[2], alpha * x[3]), tc_ops<T>::pack(alpha * y[0], alpha * y[1]),
                      tc_ops<T>::pack(alpha * y[2], alpha * y[3]));
            }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < WR / 4; i++)
            *reinterpret_cast<uint4 *>(cg_wr + (size_t)i * 4 * Tn + kt * CT) =
                *reinterpret_cast<const uint4 *>(cw_rd + i * 4 * TT_LD);
        __syncwarp();
    }
}

/* TRANS false: c (batch, T, DH) = alpha · a (batch, T, T) · bm (batch, T, DH)
 * reading a's causal tiles (query rows r…: key tiles up to their causal
 * tile's). TRANS true: c = alpha · aᵀ · bm (key rows r…: query tiles from
 * their causal tile's on). Grid: (T / ROWS) · batch blocks of CG_THREADS;
 * ROWS = 64·MT, a warp owns 16·MT rows and skips the reduction steps they
 * do not take. */
template <typename T, int DH, bool TRANS, int MT>
__global__ void __launch_bounds__(CG_THREADS)
    causal_mix_gemm_kernel(T *c, const T *a, const T *bm, int Tn, int batch, float alpha)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), ROWS = CG_WARPS * 16 * MT, WR = 16 * MT;
    constexpr int ALD = TRANS ? ROWS + 8 : TT_LD; /* the a tile's shared row stride */
    constexpr int STAGE = mix_a_elems<ROWS>() + CT * LD;
    T *ring = reinterpret_cast<T *>(smem_raw); /* CG_STAGES × [a tile | bm tile (CT, LD)] */
    const int nt = Tn / ROWS, lin = blockIdx.x;
    const int ot = TRANS ? lin / batch : nt - 1 - lin / batch, bh = lin % batch;
    const int first = TRANS ? ot * (ROWS / CT) : 0;
    const int n = TRANS ? Tn / CT - first : (ot + 1) * (ROWS / CT);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int own = (ot * ROWS + warp * WR) / CT; /* the causal tile of this warp's rows */
    const T *ab = a + (size_t)bh * Tn * Tn + (TRANS ? (size_t)first * CT * Tn + (size_t)ot * ROWS
                                                     : (size_t)ot * ROWS * Tn);
    const T *bb = bm + (size_t)bh * Tn * DH + (size_t)first * CT * DH;
    /* step s reduces over tile first + s: a's tile (CT queries, ROWS keys) or (ROWS queries, CT keys) */
    auto load = [&](int s) {
        T *st = ring + (s % CG_STAGES) * STAGE;
        if (TRANS)
            tile_load<T, CT, ROWS, ALD>(st, ab + (size_t)s * CT * Tn, Tn);
        else
            tile_load<T, ROWS, CT, ALD>(st, ab + (size_t)s * CT, Tn);
        tile_load<T, CT, DH, LD>(st + mix_a_elems<ROWS>(), bb + (size_t)s * CT * DH, DH);
    };
    for (int s = 0; s < CG_STAGES - 1; s++) {
        if (s < n)
            load(s);
        cp_commit();
    }
    float acc[MT][DH / 8][4];
    zero_acc(acc);
    for (int s = 0; s < n; s++) {
        cp_wait<CG_STAGES - 2>();
        __syncthreads();
        if (s + CG_STAGES - 1 < n)
            load(s + CG_STAGES - 1);
        cp_commit();
        const int kt = first + s;
        if (TRANS ? kt < own : kt > own) /* beyond this warp's causal tile: not read */
            continue;
        const T *at = ring + (s % CG_STAGES) * STAGE, *bt = at + mix_a_elems<ROWS>();
#pragma unroll
        for (int k = 0; k < CT / 16; k++) {
            uint32_t af[MT][4];
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (TRANS) /* a's tile stored [k][m]: the A operand by transposed 8×8 loads */
                    ldsm4_t(af[m], frag_b(at, ALD, k * 16, warp * WR + m * 16, lane));
                else
                    ldsm4(af[m], frag_a(at, ALD, warp * WR + m * 16, k * 16, lane));
            }
#pragma unroll
            for (int j = 0; j < DH / 16; j++) {
                uint32_t r[4];
                ldsm4_t(r, frag_a(bt, LD, k * 16, j * 16, lane));
                mma_rows<T>(acc, 2 * j, af, r);
            }
        }
    }
    T *cg = c + ((size_t)bh * Tn + (size_t)ot * ROWS + warp * WR) * DH;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < DH / 8; j++) {
            st2(cg + (size_t)(m * 16 + g) * DH + j * 8 + 2 * t, alpha * acc[m][j][0], alpha * acc[m][j][1]);
            st2(cg + (size_t)(m * 16 + g + 8) * DH + j * 8 + 2 * t, alpha * acc[m][j][2], alpha * acc[m][j][3]);
        }
}

bool dh_supported(int dh)
{
    return dh == 32 || dh == 64 || dh == 80 || dh == 96 || dh == 128;
}

/* Opts kern in to smem bytes of dynamic shared memory when that is over the
 * default 48 KiB, once per backend: bit of st->attn_gemm_smem marks it done
 * (cudaFuncSetAttribute costs host time a launch-bound eager step notices). */
template <typename K> int allow_smem(cuda_state *st, K kern, size_t smem, int bit)
{
    const uint64_t mask = (uint64_t)1 << bit;
    if (smem > 48 * 1024 && !(st->attn_gemm_smem & mask)) {
        CUDA_TRY(st, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        st->attn_gemm_smem |= mask;
    }
    return LMK_OK;
}

/* The bit of a kernel instance in cuda_state.attn_gemm_smem: 2 dtypes × 5 head
 * dims × 3 kinds × 2 MT = 60 < 64. */
template <typename T, int DH, int MT> constexpr int smem_bit(lmk_causal_gemm kind)
{
    constexpr int dhi = DH == 32 ? 0 : DH == 64 ? 1 : DH == 80 ? 2 : DH == 96 ? 3 : 4;
    return (((std::is_same<T, __half>::value ? 1 : 0) * 5 + dhi) * 3 + (int)kind) * 2 + MT - 1;
}

template <typename T, int DH, int MT>
int launch_kind(cuda_state *st, lmk_causal_gemm kind, cudaStream_t s, void *c, const void *a, const void *bm,
                int Tn, int batch, float alpha)
{
    T *ct = static_cast<T *>(c);
    const T *at = static_cast<const T *>(a), *bt = static_cast<const T *>(bm);
    constexpr int ROWS = CG_WARPS * 16 * MT;
    const unsigned grid = (unsigned)(Tn / ROWS) * (unsigned)batch;
    int rc = LMK_OK;
    if (kind == LMK_CAUSAL_SCORES) {
        constexpr size_t smem = scores_smem<T, DH, ROWS>();
        if ((rc = allow_smem(st, causal_scores_gemm_kernel<T, DH, MT>, smem, smem_bit<T, DH, MT>(kind))) == LMK_OK)
            causal_scores_gemm_kernel<T, DH, MT><<<grid, CG_THREADS, smem, s>>>(ct, at, bt, Tn, batch, alpha);
    } else if (kind == LMK_CAUSAL_MIX) {
        constexpr size_t smem = mix_smem<T, DH, ROWS>();
        if ((rc = allow_smem(st, causal_mix_gemm_kernel<T, DH, false, MT>, smem, smem_bit<T, DH, MT>(kind))) == LMK_OK)
            causal_mix_gemm_kernel<T, DH, false, MT><<<grid, CG_THREADS, smem, s>>>(ct, at, bt, Tn, batch, alpha);
    } else {
        constexpr size_t smem = mix_smem<T, DH, ROWS>();
        if ((rc = allow_smem(st, causal_mix_gemm_kernel<T, DH, true, MT>, smem, smem_bit<T, DH, MT>(kind))) == LMK_OK)
            causal_mix_gemm_kernel<T, DH, true, MT><<<grid, CG_THREADS, smem, s>>>(ct, at, bt, Tn, batch, alpha);
    }
    if (rc != LMK_OK)
        return rc;
    LAUNCH_CHECK(st, "causal attention GEMM");
    return LMK_OK;
}

/* m16 tiles per warp: LMK_CG_MT where T is a multiple of the block's rows, else 1. */
template <typename T, int DH>
int launch_rows(cuda_state *st, lmk_causal_gemm kind, cudaStream_t s, void *c, const void *a, const void *bm,
                int Tn, int batch, float alpha)
{
    if constexpr (LMK_CG_MT == 2)
        if (Tn % (2 * CT) == 0)
            return launch_kind<T, DH, 2>(st, kind, s, c, a, bm, Tn, batch, alpha);
    return launch_kind<T, DH, 1>(st, kind, s, c, a, bm, Tn, batch, alpha);
}

template <typename T>
int launch_dh(cuda_state *st, lmk_causal_gemm kind, cudaStream_t s, void *c, const void *a, const void *bm, int Tn,
              int dh, int batch, float alpha)
{
    switch (dh) {
    case 32: return launch_rows<T, 32>(st, kind, s, c, a, bm, Tn, batch, alpha);
    case 64: return launch_rows<T, 64>(st, kind, s, c, a, bm, Tn, batch, alpha);
    case 80: return launch_rows<T, 80>(st, kind, s, c, a, bm, Tn, batch, alpha);
    case 96: return launch_rows<T, 96>(st, kind, s, c, a, bm, Tn, batch, alpha);
    case 128: return launch_rows<T, 128>(st, kind, s, c, a, bm, Tn, batch, alpha);
    default: return LMK_INVALID;
    }
}

} // namespace

int cuda_attn_causal_block(lmk_backend *b, lmk_dtype dt, int T, int dh)
{
    (void)b;
    if (dt != LMK_BF16 && dt != LMK_F16)
        return 0;
    return T >= CT && T % CT == 0 && dh_supported(dh) ? CT : 0;
}

int cuda_attn_causal_gemm(lmk_backend *b, lmk_causal_gemm kind, void *c, const void *a, const void *bm,
                          lmk_dtype dt, int batch, int T, int dh, float alpha, int overlap)
{
    cuda_state *st = CST(b);
    if (!cuda_attn_causal_block(b, dt, T, dh) || batch <= 0 || !c || !a || !bm ||
        (int64_t)(T / CT) * batch > INT32_MAX || (((uintptr_t)c | (uintptr_t)a | (uintptr_t)bm) & 15))
        return LMK_INVALID;
    if (kind != LMK_CAUSAL_SCORES && kind != LMK_CAUSAL_MIX && kind != LMK_CAUSAL_MIX_T)
        return LMK_INVALID;
    cudaStream_t s = st->stream;
    if (overlap) {
        cudaStream_t side = NULL;
        int rc = cuda_side_fork(st, &side);
        if (rc != LMK_OK)
            return rc;
        if (side)
            s = side;
    }
    if (dt == LMK_BF16)
        return launch_dh<__nv_bfloat16>(st, kind, s, c, a, bm, T, dh, batch, alpha);
    return launch_dh<__half>(st, kind, s, c, a, bm, T, dh, batch, alpha);
}
