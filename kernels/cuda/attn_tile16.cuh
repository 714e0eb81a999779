/* Device helpers of the naive attention's row-tile kernels, shared by the
 * mma.sync kernels (attn_gemm16.cu) and the wgmma ones (attn_mix_wgmma.cu):
 * the causal tile, the block's position, the softmax's 2^x, the rounding of
 * pairs, the causal mask, the packing of a tile into the A operand layout
 * and its store, the store of a warp's output rows. Tiles in the mma C
 * layout: lane 4g + t holds rows g and g + 8, columns 2t and 2t + 1 of each
 * 16 × 8 block (for wgmma's m64 accumulators, warp w of the warpgroup holds
 * rows 16w… the same way). Device code only; no state. */
#ifndef LMK_ATTN_TILE16_CUH
#define LMK_ATTN_TILE16_CUH

#include <math.h>
#include <stdint.h>

#include "mma_sm80.cuh" /* tc_ops, smem_addr, frag_a, st2 */

namespace {

constexpr int CT = 64; /* the causal tile: rows of a query block, the reduction step */
constexpr int CG_WARPS = 4, CG_THREADS = CG_WARPS * 32;
constexpr int TT_LD = CT + 8; /* shared row stride of a CT-wide tile (elements) */

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

/* Where block blockIdx.x of a row-tile kernel works (ROWS query rows per
 * block, the blocks with the most key tiles first): query tile qt of head
 * bh, over nk key tiles; the warp's 16·MT rows start at row0 and end in key
 * tile last (their diagonal tile). */
struct row_block {
    int qt, bh, nk, lane, warp, row0, last;
};
template <int ROWS> __device__ __forceinline__ row_block row_block_at(int Tn, int batch)
{
    const int nt = Tn / ROWS, lin = blockIdx.x, qt = nt - 1 - lin / batch, warp = threadIdx.x >> 5;
    const int row0 = qt * ROWS + warp * (ROWS / CG_WARPS);
    return {qt, lin % batch, (qt + 1) * (ROWS / CT), (int)(threadIdx.x & 31), warp, row0, row0 / CT};
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

/* x (MT, CT / 8, 4) in the mma C layout of a diagonal tile: the entries
 * right of the diagonal (column j > row i) set to v. d: the lane's row g
 * minus its column 2t, both relative to the tile's corner, so that entry
 * 2h + c of block n of row tile m has i − j = d + 16m + 8h − 8n − c. */
template <int MT>
__device__ __forceinline__ void mask_upper(float (&x)[MT][CT / 8][4], int d, float v)
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < CT / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (d + m * 16 + (e >> 1) * 8 - n * 8 - (e & 1) < 0)
                    x[m][n][e] = v;
}

/* x (MT, CT / 8, 4) in the mma C layout, rounded to T by pairs into the A
 * operand layout of a product over the tile's CT columns (flash
 * attention's register reuse): pk[kk][m] is the m16 × k16 A fragment of
 * columns 16·kk…, and also what stmatrix stores of that 16 × 16 block. */
template <typename T, int MT>
__device__ __forceinline__ void pack_tile(uint32_t (&pk)[CT / 16][MT][4], const float (&x)[MT][CT / 8][4])
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int kk = 0; kk < CT / 16; kk++) {
            const float(&lo)[4] = x[m][2 * kk], (&hi)[4] = x[m][2 * kk + 1];
            pk[kk][m][0] = tc_ops<T>::pack(lo[0], lo[1]);
            pk[kk][m][1] = tc_ops<T>::pack(lo[2], lo[3]);
            pk[kk][m][2] = tc_ops<T>::pack(hi[0], hi[1]);
            pk[kk][m][3] = tc_ops<T>::pack(hi[2], hi[3]);
        }
}

/* The warp's (WR, CT) tile of 16-bit values (packed by pack_tile) out to
 * global memory: into its rows of the shared staging tile by 16 × 16
 * blocks (stmatrix), then as 16-byte row pieces (lane: row lane / 8 + 4·i,
 * column (lane % 8)·8). cw: the warp's staging rows (stride TT_LD); cg_wr:
 * global row lane / 8 of the tile at column (lane % 8)·8, rows ldg
 * elements apart. */
template <typename T, int MT>
__device__ __forceinline__ void store_packed(const uint32_t (&pk)[CT / 16][MT][4], T *cw, T *cg_wr, size_t ldg,
                                             int lane)
{
    constexpr int WR = 16 * MT;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int kk = 0; kk < CT / 16; kk++)
            stsm4(frag_a(cw, TT_LD, m * 16, kk * 16, lane), pk[kk][m][0], pk[kk][m][1], pk[kk][m][2], pk[kk][m][3]);
    __syncwarp();
    const T *cw_rd = cw + (lane >> 3) * TT_LD + (lane & 7) * 8;
#pragma unroll
    for (int i = 0; i < WR / 4; i++)
        *reinterpret_cast<uint4 *>(cg_wr + (size_t)i * 4 * ldg) = *reinterpret_cast<const uint4 *>(cw_rd + i * 4 * TT_LD);
    __syncwarp();
}

/* The (16·MT, DH) accumulators of a warp's rows (mma C layout) times alpha,
 * rounded to T, stored at c (rows DH apart; lane: rows g, g + 8 of each m16
 * tile, columns 2t, 2t + 1 of each 8). */
template <typename T, int DH, int MT>
__device__ __forceinline__ void store_rows(T *c, const float (&acc)[MT][DH / 8][4], float alpha, int lane)
{
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < DH / 8; j++) {
            st2(c + (size_t)(m * 16 + g) * DH + j * 8 + 2 * t, alpha * acc[m][j][0], alpha * acc[m][j][1]);
            st2(c + (size_t)(m * 16 + g + 8) * DH + j * 8 + 2 * t, alpha * acc[m][j][2], alpha * acc[m][j][3]);
        }
}

} // namespace

#endif
