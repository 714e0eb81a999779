/* The cpu backend's GEMM: strided batched, row-major, optional transposes,
 * autocast rounding of inputs (while packing) and of the output.
 *
 * Blocked for cache (MB×KB panels of A, KB×NB panels of B, packed and
 * zero-padded) with a 4×16 register micro-kernel that gcc vectorises; built
 * for AVX2/FMA as well as baseline x86-64 (the loader picks, via
 * target_clones). Work is split over OpenMP threads by (batch, row block,
 * column block), so results do not depend on the thread count. Leading
 * dimensions (lmk_gemm.lda/ldb/ldc, 0 = packed) index the sub-matrices while
 * packing and storing. */
#include <string.h>

#include "../halfprec.h"
#include "../status.h"
#include "cpu_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_CLONES
#endif

/* 8 floats, GCC/clang vector extension: one ymm register under AVX2, two
 * xmm registers on baseline x86-64. */
typedef float v8f __attribute__((vector_size(32)));

#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))

/* c (MR, NR; row stride ldc) += a (kb, MR packed) · b (kb, NR packed) */
CPU_CLONES
static void micro_kernel(int kb, const float *restrict a, const float *restrict bp,
                         float *restrict c, int ldc)
{
    _Static_assert(CPU_MR == 4 && CPU_NR == 16, "micro-kernel is 4x16");
    v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
    for (int p = 0; p < kb; p++) {
        v8f b0, b1;
        LOAD8(b0, bp + (size_t)p * CPU_NR);
        LOAD8(b1, bp + (size_t)p * CPU_NR + 8);
        const float *ap = a + (size_t)p * CPU_MR;
        v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        a0 += ap[0], a1 += ap[1], a2 += ap[2], a3 += ap[3];
        c00 += a0 * b0, c01 += a0 * b1;
        c10 += a1 * b0, c11 += a1 * b1;
        c20 += a2 * b0, c21 += a2 * b1;
        c30 += a3 * b0, c31 += a3 * b1;
    }
    v8f rows[CPU_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (int r = 0; r < CPU_MR; r++) {
        float *cr = c + (size_t)r * ldc;
        v8f lo, hi;
        LOAD8(lo, cr);
        LOAD8(hi, cr + 8);
        lo += rows[r][0];
        hi += rows[r][1];
        memcpy(cr, &lo, sizeof lo);
        memcpy(cr + 8, &hi, sizeof hi);
    }
}

static inline float rnd(float x, lmk_round r)
{
    return r == LMK_ROUND_NONE ? x : lmk_round_value(x, r);
}

/* Element i of an input: float32 rounded to r, or 16-bit bits of format r
 * (half != 0) widened exactly, which is the same value. */
static inline float ld(const void *x, size_t i, int half, lmk_round r)
{
    if (!half)
        return rnd(((const float *)x)[i], r);
    uint16_t h = ((const uint16_t *)x)[i];
    return r == LMK_ROUND_BF16 ? lmk_bf16_to_float(h) : lmk_fp16_to_float(h);
}

/* Packs op(A)[i0 .. i0+mb, p0 .. p0+kb] into MR-row panels, zero padded. */
static void pack_a(float *dst, const void *a, int ah, const lmk_gemm *g, int i0, int mb, int p0,
                   int kb)
{
    int panels = (mb + CPU_MR - 1) / CPU_MR;
    for (int q = 0; q < panels; q++) {
        float *d = dst + (size_t)q * CPU_KB * CPU_MR;
        for (int r = 0; r < CPU_MR; r++) {
            int i = q * CPU_MR + r;
            if (i >= mb) {
                for (int p = 0; p < kb; p++)
                    d[(size_t)p * CPU_MR + r] = 0.0f;
                continue;
            }
            int gi = i0 + i;
            if (g->trans_a) { /* A stored (k, m) */
                size_t lda = g->lda ? (size_t)g->lda : (size_t)g->m;
                for (int p = 0; p < kb; p++)
                    d[(size_t)p * CPU_MR + r] = ld(a, (size_t)(p0 + p) * lda + gi, ah, g->in_round);
            } else {
                size_t row = (size_t)gi * (g->lda ? (size_t)g->lda : (size_t)g->k) + p0;
                for (int p = 0; p < kb; p++)
                    d[(size_t)p * CPU_MR + r] = ld(a, row + p, ah, g->in_round);
            }
        }
    }
}

/* Packs op(B)[p0 .. p0+kb, j0 .. j0+nb] into NR-column panels, zero padded. */
static void pack_b(float *dst, const void *bm, int bh, const lmk_gemm *g, int p0, int kb, int j0,
                   int nb)
{
    int panels = (nb + CPU_NR - 1) / CPU_NR;
    for (int q = 0; q < panels; q++) {
        float *d = dst + (size_t)q * CPU_KB * CPU_NR;
        int jn = nb - q * CPU_NR < CPU_NR ? nb - q * CPU_NR : CPU_NR;
        if (g->trans_b) { /* B stored (n, k) */
            for (int j = 0; j < CPU_NR; j++) {
                if (j >= jn) {
                    for (int p = 0; p < kb; p++)
                        d[(size_t)p * CPU_NR + j] = 0.0f;
                    continue;
                }
                size_t row = (size_t)(j0 + q * CPU_NR + j) * (g->ldb ? (size_t)g->ldb : (size_t)g->k) + p0;
                for (int p = 0; p < kb; p++)
                    d[(size_t)p * CPU_NR + j] = ld(bm, row + p, bh, g->in_round);
            }
        } else {
            for (int p = 0; p < kb; p++) {
                size_t row = (size_t)(p0 + p) * (g->ldb ? (size_t)g->ldb : (size_t)g->n) + j0 + q * CPU_NR;
                float *dr = d + (size_t)p * CPU_NR;
                for (int j = 0; j < jn; j++)
                    dr[j] = ld(bm, row + j, bh, g->in_round);
                for (int j = jn; j < CPU_NR; j++)
                    dr[j] = 0.0f;
            }
        }
    }
}

static void gemm_block(cpu_scratch *s, const lmk_gemm *g, void *c, const void *a, int ah,
                       const void *bm, int bh, int i0, int j0)
{
    int mb = g->m - i0 < CPU_MB ? g->m - i0 : CPU_MB;
    int nb = g->n - j0 < CPU_NB ? g->n - j0 : CPU_NB;
    int mpan = (mb + CPU_MR - 1) / CPU_MR, npan = (nb + CPU_NR - 1) / CPU_NR;
    memset(s->cacc, 0, sizeof(float) * CPU_MB * CPU_NB);
    for (int p0 = 0; p0 < g->k; p0 += CPU_KB) {
        int kb = g->k - p0 < CPU_KB ? g->k - p0 : CPU_KB;
        pack_a(s->apack, a, ah, g, i0, mb, p0, kb);
        pack_b(s->bpack, bm, bh, g, p0, kb, j0, nb);
        for (int qi = 0; qi < mpan; qi++)
            for (int qj = 0; qj < npan; qj++)
                micro_kernel(kb, s->apack + (size_t)qi * CPU_KB * CPU_MR,
                             s->bpack + (size_t)qj * CPU_KB * CPU_NR,
                             s->cacc + (size_t)qi * CPU_MR * CPU_NB + qj * CPU_NR, CPU_NB);
    }
    lmk_dtype cdt = !g->c_half ? LMK_F32 : g->out_round == LMK_ROUND_BF16 ? LMK_BF16 : LMK_F16;
    for (int i = 0; i < mb; i++) {
        size_t crow = (size_t)(i0 + i) * (g->ldc ? (size_t)g->ldc : (size_t)g->n) + j0;
        const float *arow = s->cacc + (size_t)i * CPU_NB;
        for (int j = 0; j < nb; j++) {
            float v = g->alpha * arow[j];
            if (g->beta != 0.0f)
                v += g->beta * cpu_ld(c, cdt, crow + j);
            cpu_st(c, cdt, crow + j, rnd(v, g->out_round));
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
    long long mblocks = (g->m + CPU_MB - 1) / CPU_MB, nblocks = (g->n + CPU_NB - 1) / CPU_NB;
    long long tasks = (long long)g->batch * mblocks * nblocks;
#pragma omp parallel for schedule(dynamic) num_threads(st->threads)
    for (long long t = 0; t < tasks; t++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        long long bi = t / (mblocks * nblocks), rest = t % (mblocks * nblocks);
        int i0 = (int)(rest / nblocks) * CPU_MB, j0 = (int)(rest % nblocks) * CPU_NB;
        gemm_block(&st->scratch[tid], g, (char *)c + (size_t)(bi * g->stride_c) * ec,
                   (const char *)a + (size_t)(bi * g->stride_a) * ea, a_half,
                   (const char *)bm + (size_t)(bi * g->stride_b) * eb, b_half, i0, j0);
    }
    return LMK_OK;
}

int cpu_gemm(lmk_backend *b, const lmk_gemm *g, float *c, const float *a, const float *bm)
{
    if (g && g->c_half)
        return LMK_INVALID;
    return cpu_gemm_half(b, g, c, a, 0, bm, 0);
}
