/* The causal GEMMs of the naive attention (backend.h attn_causal_gemm) on
 * tensor cores, one launch each, 16-bit operands and output, float32
 * accumulation (mma.sync m16n8k16), alpha applied in float32 and one
 * rounding per stored element — the arithmetic of cuBLAS's 16-bit GEMMs with
 * CUBLAS_COMPUTE_32F; only the order of the float32 additions differs.
 *
 * Every (T, T) matrix is cut into CT × CT tiles; query tile r needs key tiles
 * 0…r (the causal block of the softmax's zero_block = CT). One block of
 * CG_THREADS (4 warps × 16 rows) per (output tile, head), blocks with the
 * longest loops first:
 *   scores (c (T,T) = α·a·bmᵀ): query tile r, loop over key tiles 0…r. The
 *     block's A rows stay in registers; each key tile's 64 × 64 product is
 *     rounded, staged in shared memory and stored as 16-byte row pieces.
 *   mix    (c (T,dh) = α·a·bm): query tile r, loop over key tiles 0…r of a.
 *   mix_t  (c (T,dh) = α·aᵀ·bm): key tile r, loop over query tiles r…T/CT−1
 *     of a (its tiles read transposed by ldmatrix.trans).
 * Tiles arrive by 16-byte cp.async in a CG_STAGES-deep ring, one barrier per
 * loop step. Rows in shared memory are padded by 8 elements (conflict-free
 * ldmatrix for every supported dh). */
#include "cuda_internal.cuh"
#include "mma_sm80.cuh"

namespace {

constexpr int CT = 64; /* the causal tile: rows of a query block, the reduction step */
#ifndef LMK_CG_STAGES  /* build-time knob: the cp.async ring depth */
#define LMK_CG_STAGES 3
#endif
#ifndef LMK_CG_ROWS /* build-time knob: output rows per block, 64 or 128 (2 causal tiles) */
#define LMK_CG_ROWS 64
#endif
constexpr int CG_STAGES = LMK_CG_STAGES;
constexpr int TT_LD = CT + 8; /* shared row stride of a CT-wide tile (elements) */
template <int DH> constexpr int dh_ld() { return DH + 8; }
template <int ROWS> constexpr int threads_for() { return ROWS * 2; } /* a warp per 16 rows */

/* sm (R, LD) ← R rows × W columns of g (row stride ldg elements), by the
 * block's NTH threads. */
template <typename T, int R, int W, int LD, int NTH>
__device__ __forceinline__ void tile_load(T *sm, const T *g, size_t ldg)
{
    constexpr int CH = W / 8; /* 16-byte pieces per row */
    for (int idx = threadIdx.x; idx < R * CH; idx += NTH) {
        const int r = idx / CH, c = (idx - r * CH) * 8;
        cp_async16(sm + r * LD + c, g + (size_t)r * ldg + c, true);
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
 * for the causal tiles only. Grid: (T / ROWS) · batch blocks of ROWS · 2
 * threads; a warp's 16 rows stop at their causal tile's last key tile. */
template <typename T, int DH, int ROWS>
__global__ void __launch_bounds__(threads_for<ROWS>())
    causal_scores_kernel(T *c, const T *a, const T *bm, int Tn, int batch, float alpha)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), NTH = threads_for<ROWS>();
    T *as = reinterpret_cast<T *>(smem_raw); /* (ROWS, LD); after the first step (ROWS, TT_LD): outputs */
    T *bs = as + scores_a_elems<DH, ROWS>(); /* CG_STAGES × (CT, LD) */
    const int nt = Tn / ROWS, lin = blockIdx.x;
    const int qt = nt - 1 - lin / batch, bh = lin % batch, nk = (qt + 1) * (ROWS / CT);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int last = (qt * ROWS + warp * 16) / CT; /* this warp's last key tile */
    const T *ag = a + ((size_t)bh * Tn + (size_t)qt * ROWS) * DH;
    const T *bg = bm + (size_t)bh * Tn * DH;
    T *cg = c + ((size_t)bh * Tn + (size_t)qt * ROWS) * Tn;

    tile_load<T, ROWS, DH, LD, NTH>(as, ag, DH);
    for (int s = 0; s < CG_STAGES - 1; s++) {
        if (s < nk)
            tile_load<T, CT, DH, LD, NTH>(bs + s * CT * LD, bg + (size_t)s * CT * DH, DH);
        cp_commit();
    }
    uint32_t af[DH / 16][4];
    T *cw = as + warp * 16 * TT_LD; /* this warp's 16 rows of the output tile, rounded */
    for (int kt = 0; kt < nk; kt++) {
        cp_wait<CG_STAGES - 2>();
        __syncthreads();
        if (kt == 0) {
#pragma unroll
            for (int k = 0; k < DH / 16; k++)
                ldsm4(af[k], frag_a(as, LD, warp * 16, k * 16, lane));
            __syncthreads(); /* every warp holds its rows: the A tile's space stages outputs from now on */
        }
        const int pf = kt + CG_STAGES - 1;
        if (pf < nk)
            tile_load<T, CT, DH, LD, NTH>(bs + (pf % CG_STAGES) * CT * LD, bg + (size_t)pf * CT * DH, DH);
        cp_commit();
        if (kt > last)
            continue;
        const T *b = bs + (kt % CG_STAGES) * CT * LD;
        float acc[CT / 8][4];
#pragma unroll
        for (int n = 0; n < CT / 8; n++)
            acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
        for (int k = 0; k < DH / 16; k++)
#pragma unroll
            for (int n = 0; n < CT / 16; n++) {
                uint32_t r[4];
                ldsm4(r, frag_b(b, LD, n * 16, k * 16, lane));
                tc_ops<T>::mma(acc[2 * n], af[k], r[0], r[1]);
                tc_ops<T>::mma(acc[2 * n + 1], af[k], r[2], r[3]);
            }
#pragma unroll
        for (int n = 0; n < CT / 8; n++) {
            st2(cw + g * TT_LD + n * 8 + 2 * t, alpha * acc[n][0], alpha * acc[n][1]);
            st2(cw + (g + 8) * TT_LD + n * 8 + 2 * t, alpha * acc[n][2], alpha * acc[n][3]);
        }
        __syncwarp();
        /* 16 rows × 8 pieces of 16 bytes: 8 lanes per row */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int idx = i * 32 + lane, r = idx >> 3, p = idx & 7;
            *reinterpret_cast<uint4 *>(cg + (size_t)(warp * 16 + r) * Tn + kt * CT + p * 8) =
                *reinterpret_cast<const uint4 *>(cw + r * TT_LD + p * 8);
        }
        __syncwarp();
    }
}

/* TRANS false: c (batch, T, DH) = alpha · a (batch, T, T) · bm (batch, T, DH)
 * reading a's causal tiles (query rows r…: key tiles up to their causal
 * tile's). TRANS true: c = alpha · aᵀ · bm (key rows r…: query tiles from
 * their causal tile's on). Grid: (T / ROWS) · batch blocks of ROWS · 2
 * threads; a warp skips the reduction steps its 16 rows do not take. */
template <typename T, int DH, bool TRANS, int ROWS>
__global__ void __launch_bounds__(threads_for<ROWS>())
    causal_mix_kernel(T *c, const T *a, const T *bm, int Tn, int batch, float alpha)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = dh_ld<DH>(), NTH = threads_for<ROWS>();
    constexpr int ALD = TRANS ? ROWS + 8 : TT_LD; /* the a tile's shared row stride */
    constexpr int STAGE = mix_a_elems<ROWS>() + CT * LD;
    T *ring = reinterpret_cast<T *>(smem_raw); /* CG_STAGES × [a tile | bm tile (CT, LD)] */
    const int nt = Tn / ROWS, lin = blockIdx.x;
    const int ot = TRANS ? lin / batch : nt - 1 - lin / batch, bh = lin % batch;
    const int first = TRANS ? ot * (ROWS / CT) : 0;
    const int n = TRANS ? Tn / CT - first : (ot + 1) * (ROWS / CT);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int own = (ot * ROWS + warp * 16) / CT; /* the causal tile of this warp's rows */
    const T *ab = a + (size_t)bh * Tn * Tn;
    const T *bb = bm + (size_t)bh * Tn * DH;
    /* step s reduces over tile kt = first + s */
    auto load = [&](int s) {
        const int kt = first + s;
        T *st = ring + (s % CG_STAGES) * STAGE;
        if (TRANS) /* (CT queries, ROWS keys) */
            tile_load<T, CT, ROWS, ALD, NTH>(st, ab + (size_t)kt * CT * Tn + (size_t)ot * ROWS, Tn);
        else /* (ROWS queries, CT keys) */
            tile_load<T, ROWS, CT, ALD, NTH>(st, ab + (size_t)ot * ROWS * Tn + (size_t)kt * CT, Tn);
        tile_load<T, CT, DH, LD, NTH>(st + mix_a_elems<ROWS>(), bb + (size_t)kt * CT * DH, DH);
    };
    for (int s = 0; s < CG_STAGES - 1; s++) {
        if (s < n)
            load(s);
        cp_commit();
    }
    float acc[DH / 8][4];
#pragma unroll
    for (int j = 0; j < DH / 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
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
            uint32_t af[4];
            if (TRANS) /* a's tile stored [k][m]: the A operand by transposed 8×8 loads */
                ldsm4_t(af, frag_b(at, ALD, k * 16, warp * 16, lane));
            else
                ldsm4(af, frag_a(at, ALD, warp * 16, k * 16, lane));
#pragma unroll
            for (int j = 0; j < DH / 16; j++) {
                uint32_t r[4];
                ldsm4_t(r, frag_a(bt, LD, k * 16, j * 16, lane));
                tc_ops<T>::mma(acc[2 * j], af, r[0], r[1]);
                tc_ops<T>::mma(acc[2 * j + 1], af, r[2], r[3]);
            }
        }
    }
    T *cg = c + ((size_t)bh * Tn + (size_t)ot * ROWS + warp * 16) * DH;
#pragma unroll
    for (int j = 0; j < DH / 8; j++) {
        st2(cg + (size_t)g * DH + j * 8 + 2 * t, alpha * acc[j][0], alpha * acc[j][1]);
        st2(cg + (size_t)(g + 8) * DH + j * 8 + 2 * t, alpha * acc[j][2], alpha * acc[j][3]);
    }
}

bool dh_supported(int dh)
{
    return dh == 32 || dh == 64 || dh == 80 || dh == 96 || dh == 128;
}

/* Opts kern in to smem bytes of dynamic shared memory when that is over the
 * default 48 KiB. */
template <typename K> int allow_smem(cuda_state *st, K kern, size_t smem)
{
    if (smem > 48 * 1024)
        CUDA_TRY(st, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return LMK_OK;
}

template <typename T, int DH, int ROWS>
int launch_kind(cuda_state *st, lmk_causal_gemm kind, cudaStream_t s, void *c, const void *a, const void *bm,
                int Tn, int batch, float alpha)
{
    T *ct = static_cast<T *>(c);
    const T *at = static_cast<const T *>(a), *bt = static_cast<const T *>(bm);
    const unsigned grid = (unsigned)(Tn / ROWS) * (unsigned)batch;
    constexpr int NTH = threads_for<ROWS>();
    int rc = LMK_OK;
    if (kind == LMK_CAUSAL_SCORES) {
        constexpr size_t smem = scores_smem<T, DH, ROWS>();
        if ((rc = allow_smem(st, causal_scores_kernel<T, DH, ROWS>, smem)) == LMK_OK)
            causal_scores_kernel<T, DH, ROWS><<<grid, NTH, smem, s>>>(ct, at, bt, Tn, batch, alpha);
    } else if (kind == LMK_CAUSAL_MIX) {
        constexpr size_t smem = mix_smem<T, DH, ROWS>();
        if ((rc = allow_smem(st, causal_mix_kernel<T, DH, false, ROWS>, smem)) == LMK_OK)
            causal_mix_kernel<T, DH, false, ROWS><<<grid, NTH, smem, s>>>(ct, at, bt, Tn, batch, alpha);
    } else {
        constexpr size_t smem = mix_smem<T, DH, ROWS>();
        if ((rc = allow_smem(st, causal_mix_kernel<T, DH, true, ROWS>, smem)) == LMK_OK)
            causal_mix_kernel<T, DH, true, ROWS><<<grid, NTH, smem, s>>>(ct, at, bt, Tn, batch, alpha);
    }
    if (rc != LMK_OK)
        return rc;
    LAUNCH_CHECK(st, "causal attention GEMM");
    return LMK_OK;
}

/* The block rows for T: LMK_CG_ROWS where T is a multiple of it, else CT. */
template <typename T, int DH>
int launch_rows(cuda_state *st, lmk_causal_gemm kind, cudaStream_t s, void *c, const void *a, const void *bm,
                int Tn, int batch, float alpha)
{
    if (LMK_CG_ROWS != CT && Tn % LMK_CG_ROWS == 0)
        return launch_kind<T, DH, LMK_CG_ROWS>(st, kind, s, c, a, bm, Tn, batch, alpha);
    return launch_kind<T, DH, CT>(st, kind, s, c, a, bm, Tn, batch, alpha);
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
