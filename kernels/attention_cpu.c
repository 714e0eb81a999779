/* Attention on the CPU: the numerical reference for the flash and naive CUDA
 * paths (math and shapes in attention.h). Float32 storage, double sums. */
#include <math.h>
#include <stdlib.h>

#include "attention.h"
#include "status.h"

int lmk_attn_head_dim_supported(int d)
{
#define XX(D) if (d == D) return 1;
    LMK_ATTN_HEAD_DIMS(XX)
#undef XX
    return 0;
}

size_t lmk_flash_attn_bwd_work_floats(const lmk_attn_shape *s)
{
    if (!s || s->B <= 0 || s->H <= 0 || s->T <= 0 || s->d <= 0)
        return 0;
    size_t rows = (size_t)s->B * s->H * s->T;
    /* the single pass (cuda/flash_attn.cu: fused_ok) */
    int single = s->atomic_dq && (s->dtype == LMK_F16 || s->dtype == LMK_BF16) &&
                 (s->d == 16 || s->d == 32 || s->d == 64 || s->d == 80 || s->d == 128);
    return single ? rows * ((size_t)s->d + 1) : rows;
}

double lmk_attn_flops_fwd(const lmk_attn_shape *s)
{
    double f = 4.0 * s->B * s->H * (double)s->T * s->T * s->d;
    return s->causal ? f / 2 : f;
}

double lmk_attn_flops_bwd(const lmk_attn_shape *s)
{
    return 2.5 * lmk_attn_flops_fwd(s);
}

static int shape_ok(const lmk_attn_shape *s)
{
    return s && s->B > 0 && s->H > 0 && s->T > 0 && s->d > 0 && s->dtype == LMK_F32;
}

/* One (b, h) slice: row i's scores into srow (T), returns the row's lse. */
static double score_row(double *srow, const float *q, const float *k, int T, int d, int i,
                        int causal, double scale)
{
    double m = -INFINITY;
    int n = causal ? i + 1 : T;
    for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int c = 0; c < d; c++)
            acc += (double)q[(size_t)i * d + c] * k[(size_t)j * d + c];
        srow[j] = acc * scale;
        if (srow[j] > m)
            m = srow[j];
    }
    double sum = 0;
    for (int j = 0; j < n; j++)
        sum += exp(srow[j] - m);
    return m + log(sum);
}

int lmk_attn_cpu_fwd(float *o, float *lse, const float *q, const float *k, const float *v,
                     const lmk_attn_shape *s)
{
    if (!shape_ok(s) || !o || !lse || !q || !k || !v)
        return LMK_INVALID;
    int T = s->T, d = s->d;
    double scale = 1.0 / sqrt((double)d);
    double *srow = malloc(sizeof(double) * T);
    double *orow = malloc(sizeof(double) * d);
    if (!srow || !orow) {
        free(srow);
        free(orow);
        return LMK_NOMEM;
    }
    for (size_t bh = 0; bh < (size_t)s->B * s->H; bh++) {
        const float *qb = q + bh * T * d, *kb = k + bh * T * d, *vb = v + bh * T * d;
        for (int i = 0; i < T; i++) {
            double l = score_row(srow, qb, kb, T, d, i, s->causal, scale);
            int n = s->causal ? i + 1 : T;
            for (int c = 0; c < d; c++)
                orow[c] = 0;
            for (int j = 0; j < n; j++) {
                double p = exp(srow[j] - l);
                for (int c = 0; c < d; c++)
                    orow[c] += p * vb[(size_t)j * d + c];
            }
            for (int c = 0; c < d; c++)
                o[bh * T * d + (size_t)i * d + c] = (float)orow[c];
            lse[bh * T + i] = (float)l;
        }
    }
    free(srow);
    free(orow);
    return LMK_OK;
}

int lmk_attn_cpu_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                     const float *k, const float *v, const float *o, const float *lse,
                     const lmk_attn_shape *s)
{
    if (!shape_ok(s) || s->d > 256 || !dq || !dk || !dv || !dout || !q || !k || !v || !o ||
        !lse)
        return LMK_INVALID;
    int T = s->T, d = s->d;
    double scale = 1.0 / sqrt((double)d);
    double *srow = malloc(sizeof(double) * T);
    double *dkb = malloc(sizeof(double) * (size_t)T * d);
    double *dvb = malloc(sizeof(double) * (size_t)T * d);
    if (!srow || !dkb || !dvb) {
        free(srow);
        free(dkb);
        free(dvb);
        return LMK_NOMEM;
    }
    for (size_t bh = 0; bh < (size_t)s->B * s->H; bh++) {
        size_t off = bh * T * d;
        const float *qb = q + off, *kb = k + off, *vb = v + off, *ob = o + off,
                    *gb = dout + off;
        for (size_t x = 0; x < (size_t)T * d; x++)
            dkb[x] = dvb[x] = 0;
        for (int i = 0; i < T; i++) {
            /* lse recomputed in double (the float lse argument only rounds it) */
            double l = score_row(srow, qb, kb, T, d, i, s->causal, scale);
            (void)lse;
            int n = s->causal ? i + 1 : T;
            double D = 0;
            for (int c = 0; c < d; c++)
                D += (double)gb[(size_t)i * d + c] * ob[(size_t)i * d + c];
            double dqrow[256] = {0}; /* d ≤ 256 checked above */
            for (int j = 0; j < n; j++) {
                double p = exp(srow[j] - l);
                double dp = 0;
                for (int c = 0; c < d; c++)
                    dp += (double)gb[(size_t)i * d + c] * vb[(size_t)j * d + c];
                double ds = p * (dp - D) * scale;
                for (int c = 0; c < d; c++) {
                    dvb[(size_t)j * d + c] += p * gb[(size_t)i * d + c];
                    dkb[(size_t)j * d + c] += ds * qb[(size_t)i * d + c];
                    dqrow[c] += ds * kb[(size_t)j * d + c];
                }
            }
            for (int c = 0; c < d; c++)
                dq[off + (size_t)i * d + c] = (float)dqrow[c];
        }
        for (size_t x = 0; x < (size_t)T * d; x++) {
            dk[off + x] = (float)dkb[x];
            dv[off + x] = (float)dvb[x];
        }
    }
    free(srow);
    free(dkb);
    free(dvb);
    return LMK_OK;
}
