/* The cpu backend's GEMM: strided batched, row-major, optional transposes,
 * autocast rounding of inputs (while packing) and of the output.
 *
 * Blocked for cache (MB×KB panels of A, KB×NB panels of B, packed and
 * zero-padded) with a 6×16 register micro-kernel (12 accumulators of 8
 * floats: the AVX2 register file's classic shape) that gcc vectorises; built
 * for AVX2/FMA as well as baseline x86-64 (the loader picks, via
 * target_clones). The AVX2 clone of the micro-kernel contracts a·b + c into
 * one FMA (one rounding instead of two); each C element's sum still runs
 * over k in one fixed order. Work is split over OpenMP threads by (batch, row
 * block, column block), so results do not depend on the thread count.
 * Leading dimensions (lmk_gemm.lda/ldb/ldc, 0 = packed) index the
 * sub-matrices while packing and storing. The packers and the store are
 * specialised per input / output format (in_mode, out_mode), so their inner
 * loops carry no per-element format branch. */
#include <string.h>

#include "../round.h"
#include "../status.h"
#include "cpu_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* the micro-kernel only: a·b + c as one FMA where the target has it */
#define CPU_CONTRACT __attribute__((optimize("fp-contract=fast")))
#else
#define CPU_CONTRACT
#endif

/* 8 floats, GCC/clang vector extension: one ymm register under AVX2, two
 * xmm registers on baseline x86-64. */
typedef float v8f __attribute__((vector_size(32)));

#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))

/* x (a plain expression, read 8 times) in all 8 lanes: one broadcast */
#define SPLAT8(x) ((v8f){(x), (x), (x), (x), (x), (x), (x), (x)})

/* c (MR, NR; row stride ldc) = (first ? 0 : c) + a (kb, MR packed) · b (kb,
 * NR packed). */
CPU_CLONES CPU_CONTRACT
static void micro_kernel(int kb, const float *restrict a, const float *restrict bp,
                         float *restrict c, int ldc, int first)
{
    _Static_assert(CPU_MR == 6 && CPU_NR == 16, "micro-kernel is 6x16");
    v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    v8f c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
    for (int p = 0; p < kb; p++) {
        v8f b0, b1;
        LOAD8(b0, bp + (size_t)p * CPU_NR);
        LOAD8(b1, bp + (size_t)p * CPU_NR + 8);
        const float *ap = a + (size_t)p * CPU_MR;
        v8f a0 = SPLAT8(ap[0]), a1 = SPLAT8(ap[1]);
        c00 += a0 * b0, c01 += a0 * b1;
        c10 += a1 * b0, c11 += a1 * b1;
        v8f a2 = SPLAT8(ap[2]), a3 = SPLAT8(ap[3]);
        c20 += a2 * b0, c21 += a2 * b1;
        c30 += a3 * b0, c31 += a3 * b1;
        v8f a4 = SPLAT8(ap[4]), a5 = SPLAT8(ap[5]);
        c40 += a4 * b0, c41 += a4 * b1;
        c50 += a5 * b0, c51 += a5 * b1;
    }
    v8f rows[CPU_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < CPU_MR; r++) {
        float *cr = c + (size_t)r * ldc;
        v8f lo = rows[r][0], hi = rows[r][1];
        if (!first) {
            v8f olo, ohi;
            LOAD8(olo, cr);
            LOAD8(ohi, cr + 8);
            lo = olo + lo;
            hi = ohi + hi;
        }
        memcpy(cr, &lo, sizeof lo);
        memcpy(cr + 8, &hi, sizeof hi);
    }
}

/* How an input is read: float32 as is, float32 rounded to in_round, or raw
 * 16-bit bits widened exactly (the same values as the rounded float32). */
typedef enum in_mode { IN_F32, IN_F32_TF32, IN_F32_BF16, IN_F32_FP16, IN_BF16, IN_FP16 } in_mode;

static in_mode input_mode(int half, lmk_round r)
{
    if (half)
        return r == LMK_ROUND_BF16 ? IN_BF16 : IN_FP16;
    return r == LMK_ROUND_TF32 ? IN_F32_TF32 : r == LMK_ROUND_BF16 ? IN_F32_BF16
         : r == LMK_ROUND_FP16 ? IN_F32_FP16 : IN_F32;
}

/* Element i of an input read as mode (a constant after inlining). */
CPU_INLINE float in_ld(const void *x, size_t i, in_mode mode)
{
    const float *f = x;
    const uint16_t *h = x;
    switch (mode) {
    case IN_F32: return f[i];
    case IN_F32_TF32: return lmk_round_drop_bits(f[i], 13);
    case IN_F32_BF16: return lmk_round_drop_bits(f[i], 16);
    case IN_F32_FP16: return lmk_round_fp16f(f[i]);
    case IN_BF16: return lmk_bf16_bits_to_float(h[i]);
    case IN_FP16: break;
    }
    return lmk_fp16_bits_to_float(h[i]);
}

/* *v = elements i .. i+8 of an input read as mode. */
CPU_INLINE void in_ld8(v8f *v, const void *x, size_t i, in_mode mode)
{
    if (mode == IN_F32) {
        LOAD8(*v, (const float *)x + i);
        return;
    }
    float t[8];
    for (int l = 0; l < 8; l++)
        t[l] = in_ld(x, i + l, mode);
    LOAD8(*v, t);
}

typedef int v8i __attribute__((vector_size(32)));

/* r[0..8] (8 rows of 8) transposed in place: r[c][l] = old r[l][c].
 * Three rounds of two-input shuffles (unpack, pair, lane swap). */
CPU_INLINE void transpose8(v8f r[8])
{
    const v8i lo1 = {0, 8, 1, 9, 4, 12, 5, 13}, hi1 = {2, 10, 3, 11, 6, 14, 7, 15};
    const v8i lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
    const v8i lo4 = {0, 1, 2, 3, 8, 9, 10, 11}, hi4 = {4, 5, 6, 7, 12, 13, 14, 15};
    v8f t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shuffle(r[i], r[i + 1], lo1);
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], hi1);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = __builtin_shuffle(t[i], t[i + 2], lo2);
        u[i + 1] = __builtin_shuffle(t[i], t[i + 2], hi2);
        u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], lo2);
        u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], hi2);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = __builtin_shuffle(u[i], u[i + 4], lo4);
        r[i + 4] = __builtin_shuffle(u[i], u[i + 4], hi4);
    }
}

/* Packs op(A)[i0 .. i0+mb, p0 .. p0+kb] into MR-row panels (kb, MR), zero
 * padded; A stored (m, k), or (k, m) when trans_a, rows lda apart. Each
 * stored row is read once, front to back. */
CPU_INLINE void pack_a_as(float *restrict dst, const void *a, int trans_a, size_t lda, int i0, int mb,
                          int p0, int kb, in_mode mode)
{
    int full = mb / CPU_MR, rest = mb - full * CPU_MR;
    float *restrict tail = dst + (size_t)full * CPU_KB * CPU_MR;
    if (trans_a) { /* stored row p0+p: op(A)[i0 .., p] */
        for (int p = 0; p < kb; p++) {
            size_t row = (size_t)(p0 + p) * lda + (size_t)i0;
            for (int q = 0; q < full; q++)
                for (int r = 0; r < CPU_MR; r++)
                    dst[(size_t)q * CPU_KB * CPU_MR + (size_t)p * CPU_MR + r] =
                        in_ld(a, row + (size_t)q * CPU_MR + r, mode);
            for (int r = 0; rest && r < CPU_MR; r++)
                tail[(size_t)p * CPU_MR + r] = r < rest ? in_ld(a, row + (size_t)full * CPU_MR + r, mode) : 0.0f;
        }
        return;
    }
    for (int q = 0; q < full; q++) { /* MR stored rows at once, 8 columns at a time */
        size_t row = ((size_t)i0 + (size_t)q * CPU_MR) * lda + (size_t)p0;
        float *restrict d = dst + (size_t)q * CPU_KB * CPU_MR;
        int p = 0;
        for (; p + 8 <= kb; p += 8) {
            v8f t[8] = {{0}};
            for (int r = 0; r < CPU_MR; r++)
                in_ld8(&t[r], a, row + (size_t)r * lda + p, mode);
            transpose8(t);
            /* column c's MR values; each 8-wide store's last lanes are
             * overwritten by the next, the last one stores MR exactly */
            for (int c = 0; c < 7; c++)
                memcpy(d + (size_t)(p + c) * CPU_MR, &t[c], sizeof t[c]);
            memcpy(d + (size_t)(p + 7) * CPU_MR, &t[7], sizeof(float) * CPU_MR);
        }
        for (; p < kb; p++)
            for (int r = 0; r < CPU_MR; r++)
                d[(size_t)p * CPU_MR + r] = in_ld(a, row + (size_t)r * lda + p, mode);
    }
    if (rest) {
        size_t row = ((size_t)i0 + (size_t)full * CPU_MR) * lda + (size_t)p0;
        for (int p = 0; p < kb; p++)
            for (int r = 0; r < CPU_MR; r++)
                tail[(size_t)p * CPU_MR + r] = r < rest ? in_ld(a, row + (size_t)r * lda + p, mode) : 0.0f;
    }
}

/* Packs op(B)[p0 .. p0+kb, j0 .. j0+nb] into NR-column panels (kb, NR),
 * zero padded; B stored (k, n), or (n, k) when trans_b, rows ldb apart.
 * Each stored row is read once, front to back. */
CPU_INLINE void pack_b_as(float *restrict dst, const void *bm, int trans_b, size_t ldb, int p0, int kb,
                          int j0, int nb, in_mode mode)
{
    int full = nb / CPU_NR, rest = nb - full * CPU_NR;
    float *restrict tail = dst + (size_t)full * CPU_KB * CPU_NR;
    if (!trans_b) { /* stored row p0+p: op(B)[p, j0 ..] */
        for (int p = 0; p < kb; p++) {
            size_t row = (size_t)(p0 + p) * ldb + (size_t)j0;
            for (int q = 0; q < full; q++)
                for (int j = 0; j < CPU_NR; j++)
                    dst[(size_t)q * CPU_KB * CPU_NR + (size_t)p * CPU_NR + j] =
                        in_ld(bm, row + (size_t)q * CPU_NR + j, mode);
            for (int j = 0; rest && j < CPU_NR; j++)
                tail[(size_t)p * CPU_NR + j] = j < rest ? in_ld(bm, row + (size_t)full * CPU_NR + j, mode) : 0.0f;
        }
        return;
    }
    for (int q = 0; q < full; q++) { /* NR stored rows at once, 8 × 8 at a time */
        size_t row = ((size_t)j0 + (size_t)q * CPU_NR) * ldb + (size_t)p0;
        float *restrict d = dst + (size_t)q * CPU_KB * CPU_NR;
        int p = 0;
        for (; p + 8 <= kb; p += 8)
            for (int h = 0; h < CPU_NR; h += 8) {
                v8f t[8];
                for (int j = 0; j < 8; j++)
                    in_ld8(&t[j], bm, row + (size_t)(h + j) * ldb + p, mode);
                transpose8(t);
                for (int c = 0; c < 8; c++)
                    memcpy(d + (size_t)(p + c) * CPU_NR + h, &t[c], sizeof t[c]);
            }
        for (; p < kb; p++)
            for (int j = 0; j < CPU_NR; j++)
                d[(size_t)p * CPU_NR + j] = in_ld(bm, row + (size_t)j * ldb + p, mode);
    }
    if (rest) {
        size_t row = ((size_t)j0 + (size_t)full * CPU_NR) * ldb + (size_t)p0;
        for (int p = 0; p < kb; p++)
            for (int j = 0; j < CPU_NR; j++)
                tail[(size_t)p * CPU_NR + j] = j < rest ? in_ld(bm, row + (size_t)j * ldb + p, mode) : 0.0f;
    }
}

/* One pack_a_as / pack_b_as instance per input mode. */
#define PACK_DISPATCH(fn, mode, ...)                                                                   \
    switch (mode) {                                                                                    \
    case IN_F32: fn(__VA_ARGS__, IN_F32); break;                                                       \
    case IN_F32_TF32: fn(__VA_ARGS__, IN_F32_TF32); break;                                             \
    case IN_F32_BF16: fn(__VA_ARGS__, IN_F32_BF16); break;                                             \
    case IN_F32_FP16: fn(__VA_ARGS__, IN_F32_FP16); break;                                             \
    case IN_BF16: fn(__VA_ARGS__, IN_BF16); break;                                                     \
    case IN_FP16: fn(__VA_ARGS__, IN_FP16); break;                                                     \
    }

/* How C is written: float32 (rounded to out_round, or not), or raw bf16 /
 * fp16 bits (c_half). */
typedef enum out_mode { OUT_F32, OUT_F32_TF32, OUT_F32_BF16, OUT_F32_FP16, OUT_BF16, OUT_FP16 } out_mode;

static out_mode output_mode(const lmk_gemm *g)
{
    if (g->c_half)
        return g->out_round == LMK_ROUND_BF16 ? OUT_BF16 : OUT_FP16;
    return g->out_round == LMK_ROUND_TF32 ? OUT_F32_TF32 : g->out_round == LMK_ROUND_BF16 ? OUT_F32_BF16
         : g->out_round == LMK_ROUND_FP16 ? OUT_F32_FP16 : OUT_F32;
}

/* c row (nb) = round(alpha · acc + beta · c) in mode; beta 0 reads no C
 * (c_half implies beta 0). */
CPU_INLINE void store_row_as(void *c, size_t crow, const float *restrict acc, int nb, float alpha,
                             float beta, out_mode mode)
{
    float *cf = (float *)c + crow;
    uint16_t *ch = (uint16_t *)c + crow;
    for (int j = 0; j < nb; j++) {
        float v = alpha * acc[j];
        if (mode == OUT_BF16 || mode == OUT_FP16) {
            ch[j] = cpu_half_bits(v, mode == OUT_BF16 ? LMK_ROUND_BF16 : LMK_ROUND_FP16);
            continue;
        }
        if (beta != 0.0f)
            v += beta * cf[j];
        cf[j] = mode == OUT_F32_TF32 ? lmk_round_drop_bits(v, 13)
              : mode == OUT_F32_BF16 ? lmk_round_drop_bits(v, 16)
              : mode == OUT_F32_FP16 ? lmk_round_fp16f(v) : v;
    }
}

/* One GEMM block: C[i0 .. i0+MB, j0 .. j0+NB] of one batch item, through
 * the thread's scratch s. */
CPU_CLONES
static void gemm_block(cpu_scratch *s, const lmk_gemm *g, void *c, const void *a, in_mode am,
                       const void *bm, in_mode bmode, out_mode om, int i0, int j0)
{
    int mb = g->m - i0 < CPU_MB ? g->m - i0 : CPU_MB;
    int nb = g->n - j0 < CPU_NB ? g->n - j0 : CPU_NB;
    int mpan = (mb + CPU_MR - 1) / CPU_MR, npan = (nb + CPU_NR - 1) / CPU_NR;
    size_t lda = g->lda ? (size_t)g->lda : g->trans_a ? (size_t)g->m : (size_t)g->k;
    size_t ldb = g->ldb ? (size_t)g->ldb : g->trans_b ? (size_t)g->k : (size_t)g->n;
    if (g->k == 0)
        memset(s->cacc, 0, sizeof(float) * CPU_MB * CPU_NB);
    for (int p0 = 0; p0 < g->k; p0 += CPU_KB) {
        int kb = g->k - p0 < CPU_KB ? g->k - p0 : CPU_KB;
        PACK_DISPATCH(pack_a_as, am, s->apack, a, g->trans_a, lda, i0, mb, p0, kb)
        PACK_DISPATCH(pack_b_as, bmode, s->bpack, bm, g->trans_b, ldb, p0, kb, j0, nb)
        for (int qi = 0; qi < mpan; qi++)
            for (int qj = 0; qj < npan; qj++)
                micro_kernel(kb, s->apack + (size_t)qi * CPU_KB * CPU_MR,
                             s->bpack + (size_t)qj * CPU_KB * CPU_NR,
                             s->cacc + (size_t)qi * CPU_MR * CPU_NB + qj * CPU_NR, CPU_NB, p0 == 0);
    }
    size_t ldc = g->ldc ? (size_t)g->ldc : (size_t)g->n;
    for (int i = 0; i < mb; i++) {
        size_t crow = (size_t)(i0 + i) * ldc + j0;
        const float *acc = s->cacc + (size_t)i * CPU_NB;
        switch (om) {
        case OUT_F32: store_row_as(c, crow, acc, nb, g->alpha, g->beta, OUT_F32); break;
        case OUT_F32_TF32: store_row_as(c, crow, acc, nb, g->alpha, g->beta, OUT_F32_TF32); break;
        case OUT_F32_BF16: store_row_as(c, crow, acc, nb, g->alpha, g->beta, OUT_F32_BF16); break;
        case OUT_F32_FP16: store_row_as(c, crow, acc, nb, g->alpha, g->beta, OUT_F32_FP16); break;
        case OUT_BF16: store_row_as(c, crow, acc, nb, g->alpha, 0.0f, OUT_BF16); break;
        case OUT_FP16: store_row_as(c, crow, acc, nb, g->alpha, 0.0f, OUT_FP16); break;
        }
    }
}

int cpu_gemm_half(lmk_backend *b, const lmk_gemm *g, void *c, const void *a, int a_half,
                  const void *bm, int b_half)
{
    cpu_state *st = b->impl;
    if (!g || !c || !a || !bm || g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 1)
        return LMK_INVALID;
    if ((a_half || b_half) && g->in_round != LMK_ROUND_BF16 && g->in_round != LMK_ROUND_FP16)
        return LMK_INVALID;
    if (g->c_half && ((g->out_round != LMK_ROUND_BF16 && g->out_round != LMK_ROUND_FP16) || g->beta != 0.0f))
        return LMK_INVALID;
    size_t ec = g->c_half ? 2 : 4;
    if (g->m == 0 || g->n == 0)
        return LMK_OK;
    size_t ea = a_half ? 2 : 4, eb = b_half ? 2 : 4;
    in_mode am = input_mode(a_half, g->in_round), bmode = input_mode(b_half, g->in_round);
    out_mode om = output_mode(g);
    long long mblocks = (g->m + CPU_MB - 1) / CPU_MB, nblocks = (g->n + CPU_NB - 1) / CPU_NB;
    long long tasks = (long long)g->batch * mblocks * nblocks;
#pragma omp parallel for schedule(dynamic) num_threads(st->threads) if (tasks > 1)
    for (long long t = 0; t < tasks; t++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        long long bi = t / (mblocks * nblocks), rest = t % (mblocks * nblocks);
        int i0 = (int)(rest / nblocks) * CPU_MB, j0 = (int)(rest % nblocks) * CPU_NB;
        gemm_block(&st->scratch[tid], g, (char *)c + (size_t)(bi * g->stride_c) * ec,
                   (const char *)a + (size_t)(bi * g->stride_a) * ea, am,
                   (const char *)bm + (size_t)(bi * g->stride_b) * eb, bmode, om, i0, j0);
    }
    return LMK_OK;
}

int cpu_gemm(lmk_backend *b, const lmk_gemm *g, float *c, const float *a, const float *bm)
{
    if (g && g->c_half)
        return LMK_INVALID;
    return cpu_gemm_half(b, g, c, a, 0, bm, 0);
}
