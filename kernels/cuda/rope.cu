/* Head split/merge with RoPE.
 *
 *   forward : in (B, T, H, dh) → out (B, H, T, dh); pairs (2k, 2k+1) at
 *             position t rotated by (c, s) = table (T, dh/2, 2)[t, k]:
 *             (x0 c − x1 s, x0 s + x1 c). table NULL: plain split.
 *   backward: dout (B, H, T, dh) → din (B, T, H, dh), rotated by −angle.
 * The (B, T, H, dh) side has rows of ld elements (ld ≥ H·dh; H·dh when
 * contiguous, 3·H·dh for q, k or v inside a fused (N, 3d) projection).
 * in and out of one dtype (float, bf16, fp16); the rotation in float32
 * without FMA contraction (as the cpu computes it), one rounding per stored
 * element. One thread per pair (or per element without a table); any dh,
 * H, T. When dh is a multiple of the 16-byte vector (8 16-bit or 4 float
 * elements) and in, out are 16-byte aligned: one thread per vector, one
 * block row per position (b, t), indices in 32 bits (the same values).
 * q, k and v of a fused (N, 3d) projection go in one such launch
 * (cuda_rope_qkv_*: the same arithmetic per element as three calls). */
#include "cuda_internal.cuh"

// dir > 0: in (B,T,H,dh) → out (B,H,T,dh); dir < 0: in (B,H,T,dh) → out (B,T,H,dh); of E;
// the (B,T,H,dh) side's rows ld elements apart
template <typename E>
__global__ void rope_kernel(E *out, const E *in, const float *table, int B, int T, int H, int dh,
                            int64_t ld, int dir)
{
    int per = table ? dh / 2 : dh; /* work items per (b, t, h) */
    size_t total = (size_t)B * T * H * per;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int k = (int)(idx % per);
        size_t r = idx / per;
        int h = (int)(r % H);
        r /= H;
        int t = (int)(r % T);
        int bb = (int)(r / T);
        size_t bthd = ((size_t)bb * T + t) * (size_t)ld + (size_t)h * dh;
        size_t bhtd = (((size_t)bb * H + h) * T + t) * dh;
        const E *src = in + (dir > 0 ? bthd : bhtd);
        E *dst = out + (dir > 0 ? bhtd : bthd);
        if (!table) {
            dst[k] = src[k];
            continue;
        }
        const float *cs = table + (size_t)t * dh;
        float c = cs[2 * k], s = dir > 0 ? cs[2 * k + 1] : -cs[2 * k + 1];
        float x0 = ld_f(src, 2 * k), x1 = ld_f(src, 2 * k + 1);
        st_f(dst, 2 * k, __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)));
        st_f(dst, 2 * k + 1, __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c)));
    }
}

#define ROPE_ROW_THREADS 128

/* The (B, H, T, dh) side of a row-kernel launch: one tensor per part. */
template <typename E> struct head_tensors {
    E *p[3];
};

// as rope_kernel, a 16-byte vector (VE elements, VE/2 pairs) per thread; dh % VE == 0, ld % VE == 0;
// parts (1 or 3) tensors at once: the (B,T,H,dh) side `rows` holds them side by side in each row (part i's
// H·dh elements at i·H·dh), the (B,H,T,dh) side is heads.p[i]; part i rotated when i < nrot (table non-NULL);
// grid (B·T, ceil(parts·H·dh/VE / ROPE_ROW_THREADS)): block (bt, y) takes vectors y·ROPE_ROW_THREADS… of the
// parts·H·dh/VE in position bt = b·T + t; a vector is read from rows and written to heads (dir > 0, the
// forward), or the reverse with the transposed rotation (dir < 0); copied when not rotated
template <typename E>
__global__ void __launch_bounds__(ROPE_ROW_THREADS)
    rope_rows_kernel(head_tensors<E> heads, E *rows, const float *table, int nrot, int parts, int T, int H, int dh,
                     int64_t ld, int dir)
{
    constexpr int VE = vec16<E>::n;
    unsigned vpr = (unsigned)(dh / VE), per_part = (unsigned)H * vpr;
    unsigned u = blockIdx.y * ROPE_ROW_THREADS + threadIdx.x;
    if (u >= (unsigned)parts * per_part)
        return;
    unsigned part = u / per_part, w = u - part * per_part;
    unsigned bt = blockIdx.x, bb = bt / (unsigned)T, t = bt - bb * (unsigned)T;
    unsigned h = w / vpr, v = w - h * vpr;
    size_t bthd = (size_t)bt * (size_t)ld + (size_t)part * per_part * VE + (size_t)h * dh + (size_t)v * VE;
    size_t bhtd = (((size_t)bb * H + h) * T + t) * dh + (size_t)v * VE;
    E *head = part == 0 ? heads.p[0] : part == 1 ? heads.p[1] : heads.p[2]; /* no indexed parameter array */
    float x[VE], y[VE];
    if (dir > 0)
        ld_vec(rows, bthd, x);
    else
        ld_vec(head, bhtd, x);
    if (!table || (int)part >= nrot) {
#pragma unroll
        for (int q = 0; q < VE; q++)
            y[q] = x[q];
    } else {
        const float *cs = table + (size_t)t * dh + (size_t)v * VE; /* VE/2 (c, s) pairs */
#pragma unroll
        for (int q = 0; q < VE; q += 2) {
            float c = cs[q], sn = dir > 0 ? cs[q + 1] : -cs[q + 1];
            y[q] = __fsub_rn(__fmul_rn(x[q], c), __fmul_rn(x[q + 1], sn));
            y[q + 1] = __fadd_rn(__fmul_rn(x[q], sn), __fmul_rn(x[q + 1], c));
        }
    }
    if (dir > 0)
        st_vec(head, bhtd, y);
    else
        st_vec(rows, bthd, y);
}

/* parts tensors (1, or 3: q, k, v of a fused projection, q and k rotated):
 * rows is the (B, T, H, dh) side (in for dir > 0, out for dir < 0; parts·H·dh
 * used elements per row, ld apart), heads[0..parts) the (B, H, T, dh) side.
 * One row-kernel launch when every pointer is 16-byte aligned and dh, ld
 * take whole vectors; else rope_kernel per part. */
static int rope_launch(lmk_backend *b, void *const heads[], void *rows, int parts, lmk_dtype dt,
                       const float *table, int nrot, int B, int T, int H, int dh, int ld, int dir)
{
    cuda_state *st = CST(b);
    if (B <= 0 || T <= 0 || H <= 0 || dh <= 0 || (table && dh % 2) || ld < parts * H * dh)
        return LMK_INVALID;
    int ve = dt == LMK_F32 ? 4 : 8;
    size_t vecs = (size_t)B * T * parts * H * (dh / ve);
    uintptr_t any = (uintptr_t)rows;
    for (int i = 0; i < parts; i++)
        any |= (uintptr_t)heads[i];
    if (dh % ve == 0 && ld % ve == 0 && vecs < (1u << 31) && (any & 15) == 0) {
        unsigned per = (unsigned)(parts * H * (dh / ve)), chunks = (per + ROPE_ROW_THREADS - 1) / ROPE_ROW_THREADS;
        dim3 grid((unsigned)(B * T), chunks);
        DT_DISPATCH(dt, E, {
            head_tensors<E> ht = {{(E *)heads[0], (E *)heads[parts > 1 ? 1 : 0], (E *)heads[parts > 2 ? 2 : 0]}};
            rope_rows_kernel<E><<<grid, ROPE_ROW_THREADS, 0, st->stream>>>(ht, (E *)rows, table, nrot, parts, T, H,
                                                                           dh, ld, dir);
        });
        LAUNCH_CHECK(st, "rope_rows_kernel");
        return LMK_OK;
    }
    size_t es = lmk_dtype_size(dt);
    for (int i = 0; i < parts; i++) {
        const float *tab = i < nrot ? table : NULL;
        void *part_rows = (char *)rows + (size_t)i * H * dh * es;
        void *out = dir > 0 ? heads[i] : part_rows;
        const void *in = dir > 0 ? part_rows : heads[i];
        size_t total = (size_t)B * T * H * (tab ? dh / 2 : dh);
        unsigned blocks = grid_for(total, 256, 1u << 20);
        DT_DISPATCH(dt, E, rope_kernel<E><<<blocks, 256, 0, st->stream>>>((E *)out, (const E *)in, tab, B, T,
                                                                         H, dh, ld, dir));
        LAUNCH_CHECK(st, "rope_kernel");
    }
    return LMK_OK;
}

int cuda_rope_fwd(lmk_backend *b, void *out, const void *in, lmk_dtype dt, const float *table, int B,
                  int T, int H, int dh, int ld)
{
    void *heads[1] = {out};
    return rope_launch(b, heads, (void *)in, 1, dt, table, 1, B, T, H, dh, ld, 1);
}

int cuda_rope_bwd(lmk_backend *b, void *din, const void *dout, lmk_dtype dt, const float *table, int B,
                  int T, int H, int dh, int ld)
{
    void *heads[1] = {(void *)dout};
    return rope_launch(b, heads, din, 1, dt, table, 1, B, T, H, dh, ld, -1);
}

int cuda_rope_qkv_fwd(lmk_backend *b, void *const heads[3], const void *qkv, lmk_dtype dt, const float *table,
                      int B, int T, int H, int dh)
{
    return rope_launch(b, heads, (void *)qkv, 3, dt, table, 2, B, T, H, dh, 3 * H * dh, 1);
}

int cuda_rope_qkv_bwd(lmk_backend *b, void *dqkv, const void *const dheads[3], lmk_dtype dt, const float *table,
                      int B, int T, int H, int dh)
{
    void *heads[3] = {(void *)dheads[0], (void *)dheads[1], (void *)dheads[2]};
    return rope_launch(b, heads, dqkv, 3, dt, table, 2, B, T, H, dh, 3 * H * dh, -1);
}
