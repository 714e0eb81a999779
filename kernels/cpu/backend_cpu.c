/* The cpu reference backend: plain C, float32 arithmetic (reductions that
 * decide a loss or a norm in double), OpenMP over rows for the heavy ops.
 * Every row-parallel loop writes disjoint rows, so results do not depend on
 * the number of threads. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../halfprec.h"
#include "../status.h"
#include "cpu_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define ST(b) ((cpu_state *)(b)->impl)

/* --- memory ----------------------------------------------------------- */

static int cpu_mem_alloc(lmk_backend *b, size_t bytes, void **out)
{
    (void)b;
    if (bytes == 0)
        return LMK_INVALID;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0)
        return LMK_NOMEM;
    *out = p;
    return LMK_OK;
}

static void cpu_mem_free(lmk_backend *b, void *p)
{
    (void)b;
    free(p);
}

static int cpu_mem_zero(lmk_backend *b, void *p, size_t bytes)
{
    (void)b;
    memset(p, 0, bytes);
    return LMK_OK;
}

static int cpu_mem_copy(lmk_backend *b, void *dst, const void *src, size_t bytes)
{
    (void)b;
    memmove(dst, src, bytes);
    return LMK_OK;
}

static int cpu_synchronize(lmk_backend *b)
{
    (void)b;
    return LMK_OK;
}

/* --- embedding -------------------------------------------------------- */

static int cpu_embedding_fwd(lmk_backend *b, float *out, const int32_t *ids, const float *w,
                             int n, int d, int vocab)
{
    (void)b;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return LMK_INVALID;
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * d, w + (size_t)ids[i] * d, sizeof(float) * d);
    return LMK_OK;
}

static int cpu_embedding_bwd(lmk_backend *b, float *dw, const float *dout, const int32_t *ids,
                             int n, int d, int vocab)
{
    (void)b;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab)
            return LMK_INVALID;
        float *row = dw + (size_t)ids[i] * d;
        const float *g = dout + (size_t)i * d;
        for (int j = 0; j < d; j++)
            row[j] += g[j];
    }
    return LMK_OK;
}

/* --- rmsnorm ---------------------------------------------------------- */

static int cpu_rmsnorm_fwd(lmk_backend *b, void *out, lmk_dtype out_dt, float *rstd, const float *x,
                           const float *w, int n, int d, float eps)
{
    if (!cpu_dt_ok(out_dt))
        return LMK_INVALID;
#pragma omp parallel for num_threads(ST(b)->threads) if (n > 64)
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * d;
        size_t o = (size_t)i * d;
        double ss = 0.0;
        for (int j = 0; j < d; j++)
            ss += (double)xr[j] * xr[j];
        float r = (float)(1.0 / sqrt(ss / d + eps));
        rstd[i] = r;
        for (int j = 0; j < d; j++)
            cpu_st(out, out_dt, o + j, xr[j] * r * w[j]);
    }
    return LMK_OK;
}

/* y = x r w with r = (mean x² + eps)^-1/2:
 * dx_j = r (dy_j w_j) − x_j r³ / d · Σ_k dy_k w_k x_k;  dw_j += Σ_rows dy_j x_j r. */
static int cpu_rmsnorm_bwd(lmk_backend *b, float *dx, float *dw, const void *dout, lmk_dtype dt,
                           const float *x, const float *w, const float *rstd, int n, int d)
{
    if (!cpu_dt_ok(dt))
        return LMK_INVALID;
#pragma omp parallel for num_threads(ST(b)->threads) if (n > 64)
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * d;
        size_t dy = (size_t)i * d;
        float *dxr = dx + (size_t)i * d;
        float r = rstd[i];
        double dot = 0.0;
        for (int j = 0; j < d; j++)
            dot += (double)cpu_ld(dout, dt, dy + j) * w[j] * xr[j];
        float c = (float)(dot * r * r * r / d);
        for (int j = 0; j < d; j++)
            dxr[j] = r * cpu_ld(dout, dt, dy + j) * w[j] - xr[j] * c;
    }
    /* serial over rows per column block: deterministic */
#pragma omp parallel for num_threads(ST(b)->threads) if (d > 256)
    for (int j0 = 0; j0 < d; j0 += 64) {
        int j1 = j0 + 64 < d ? j0 + 64 : d;
        for (int i = 0; i < n; i++) {
            const float *xr = x + (size_t)i * d;
            size_t dy = (size_t)i * d;
            float r = rstd[i];
            for (int j = j0; j < j1; j++)
                dw[j] += cpu_ld(dout, dt, dy + j) * xr[j] * r;
        }
    }
    return LMK_OK;
}

/* --- rope / head split ------------------------------------------------ */

/* dir > 0: in (B,T,H,dh) → out (B,H,T,dh) rotating by +angle;
 * dir < 0: in (B,H,T,dh) → out (B,T,H,dh) rotating by −angle; the
 * (B,T,H,dh) side's rows ld elements apart. */
static int rope_common(lmk_backend *b, void *out, const void *in, lmk_dtype dt,
                       const float *table, int B, int T, int H, int dh, int ld, int dir)
{
    if ((table && dh % 2) || !cpu_dt_ok(dt) || ld < H * dh)
        return LMK_INVALID;
    size_t es = lmk_dtype_size(dt);
#pragma omp parallel for collapse(2) num_threads(ST(b)->threads) if ((long)B * T * H * dh > 65536)
    for (int bb = 0; bb < B; bb++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < H; h++) {
                size_t bthd = ((size_t)bb * T + t) * (size_t)ld + (size_t)h * dh;
                size_t bhtd = (((size_t)bb * H + h) * T + t) * dh;
                size_t src = dir > 0 ? bthd : bhtd, dst = dir > 0 ? bhtd : bthd;
                if (!table) {
                    memcpy((char *)out + dst * es, (const char *)in + src * es, es * dh);
                    continue;
                }
                const float *cs = table + (size_t)t * dh;
                for (int k = 0; k < dh / 2; k++) {
                    float c = cs[2 * k], s = dir > 0 ? cs[2 * k + 1] : -cs[2 * k + 1];
                    float x0 = cpu_ld(in, dt, src + 2 * k), x1 = cpu_ld(in, dt, src + 2 * k + 1);
                    cpu_st(out, dt, dst + 2 * k, x0 * c - x1 * s);
                    cpu_st(out, dt, dst + 2 * k + 1, x0 * s + x1 * c);
                }
            }
        }
    }
    return LMK_OK;
}

static int cpu_rope_fwd(lmk_backend *b, void *out, const void *in, lmk_dtype dt, const float *table,
                        int B, int T, int H, int dh, int ld)
{
    return rope_common(b, out, in, dt, table, B, T, H, dh, ld, 1);
}

static int cpu_rope_bwd(lmk_backend *b, void *din, const void *dout, lmk_dtype dt, const float *table,
                        int B, int T, int H, int dh, int ld)
{
    return rope_common(b, din, dout, dt, table, B, T, H, dh, ld, -1);
}

/* --- causal softmax --------------------------------------------------- */

/* Float32 math on the loaded values; the probabilities are normalised in
 * float32 and rounded once to dt (the cuda kernels do the same). */
/* The end of row i's written entries for zero_block (backend.h). */
static int softmax_row_end(int i, int T, int zero_block)
{
    if (zero_block <= 0 || zero_block >= T)
        return T;
    long end = ((long)i / zero_block + 1) * zero_block;
    return end < T ? (int)end : T;
}

static int cpu_softmax_causal_fwd(lmk_backend *b, void *p, const void *s, lmk_dtype dt, int batch,
                                  int T, int zero_block)
{
    if (!cpu_dt_ok(dt))
        return LMK_INVALID;
    long rows = (long)batch * T;
    float *row_buf = NULL;
#pragma omp parallel num_threads(ST(b)->threads) if (rows > 256) private(row_buf)
    {
        row_buf = malloc(sizeof(float) * (size_t)T);
#pragma omp for
        for (long r = 0; r < rows; r++) {
            if (!row_buf)
                continue;
            int i = (int)(r % T);
            size_t o = (size_t)r * T;
            float mx = -INFINITY;
            for (int j = 0; j <= i; j++) {
                row_buf[j] = cpu_ld(s, dt, o + j);
                mx = row_buf[j] > mx ? row_buf[j] : mx;
            }
            float sum = 0.0f;
            for (int j = 0; j <= i; j++) {
                row_buf[j] = expf(row_buf[j] - mx);
                sum += row_buf[j];
            }
            float inv = 1.0f / sum;
            for (int j = 0; j <= i; j++)
                cpu_st(p, dt, o + j, row_buf[j] * inv);
            for (int j = i + 1, end = softmax_row_end(i, T, zero_block); j < end; j++)
                cpu_st(p, dt, o + j, 0.0f);
        }
        free(row_buf);
    }
    return LMK_OK;
}

static int cpu_softmax_causal_bwd(lmk_backend *b, void *ds, const void *dp, const void *p,
                                  lmk_dtype dt, int batch, int T, int zero_block)
{
    if (!cpu_dt_ok(dt))
        return LMK_INVALID;
    long rows = (long)batch * T;
#pragma omp parallel for num_threads(ST(b)->threads) if (rows > 256)
    for (long r = 0; r < rows; r++) {
        int i = (int)(r % T);
        size_t o = (size_t)r * T;
        float dot = 0.0f;
        for (int j = 0; j <= i; j++)
            dot += cpu_ld(dp, dt, o + j) * cpu_ld(p, dt, o + j);
        for (int j = 0; j <= i; j++)
            cpu_st(ds, dt, o + j, cpu_ld(p, dt, o + j) * (cpu_ld(dp, dt, o + j) - dot));
        for (int j = i + 1, end = softmax_row_end(i, T, zero_block); j < end; j++)
            cpu_st(ds, dt, o + j, 0.0f);
    }
    return LMK_OK;
}

/* --- elementwise ------------------------------------------------------ */

static inline float sigmoidf(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* a, g (and da, dg): rows ld apart; element i of out (dout) at row_at(i). */
static size_t row_at(size_t i, size_t cols, size_t ld)
{
    return i / cols * ld + i % cols;
}

static int cpu_swiglu_fwd(lmk_backend *b, void *out, const void *a, const void *g, lmk_dtype dt,
                          size_t n, int cols, int64_t ld)
{
    if (!cpu_dt_ok(dt) || cols <= 0 || ld < cols || n % (size_t)cols)
        return LMK_INVALID;
    lmk_round r = dt == LMK_BF16 ? LMK_ROUND_BF16 : dt == LMK_F16 ? LMK_ROUND_FP16 : LMK_ROUND_NONE;
    long nn = (long)n;
#pragma omp parallel for num_threads(ST(b)->threads) if (nn > 65536)
    for (long i = 0; i < nn; i++) {
        size_t k = row_at((size_t)i, (size_t)cols, (size_t)ld);
        float ai = cpu_ld(a, dt, k);
        float silu = ai * sigmoidf(ai);
        if (r != LMK_ROUND_NONE)
            silu = cpu_round(silu, r);
        cpu_st(out, dt, i, silu * cpu_ld(g, dt, k));
    }
    return LMK_OK;
}

/* silu'(a) = σ(a) (1 + a (1 − σ(a))) */
static int cpu_swiglu_bwd(lmk_backend *b, void *da, void *dg, const void *dout, const void *a,
                          const void *g, lmk_dtype dt, size_t n, int cols, int64_t ld)
{
    if (!cpu_dt_ok(dt) || cols <= 0 || ld < cols || n % (size_t)cols)
        return LMK_INVALID;
    long nn = (long)n;
#pragma omp parallel for num_threads(ST(b)->threads) if (nn > 65536)
    for (long i = 0; i < nn; i++) {
        size_t k = row_at((size_t)i, (size_t)cols, (size_t)ld);
        float ai = cpu_ld(a, dt, k), gi = cpu_ld(g, dt, k), dy = cpu_ld(dout, dt, i);
        float s = sigmoidf(ai);
        cpu_st(dg, dt, k, dy * ai * s);
        cpu_st(da, dt, k, dy * gi * s * (1.0f + ai * (1.0f - s)));
    }
    return LMK_OK;
}

static int cpu_add(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype dt, size_t n)
{
    (void)b;
    if (!cpu_dt_ok(dt))
        return LMK_INVALID;
    for (size_t i = 0; i < n; i++)
        y[i] = x1[i] + cpu_ld(x2, dt, i);
    return LMK_OK;
}

static int cpu_scale(lmk_backend *b, float *x, size_t n, float s)
{
    (void)b;
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
    return LMK_OK;
}

static int cpu_cast(lmk_backend *b, float *out, const float *x, size_t n, lmk_round r)
{
    (void)b;
    for (size_t i = 0; i < n; i++)
        out[i] = cpu_round(x[i], r);
    return LMK_OK;
}

/* Stores the bits of x rounded with lmk_round_value's rounding:
 * bit-identical to what the float emulation computes. */
static int cpu_cast_half(lmk_backend *b, void *dst16, const float *x, size_t n, lmk_round fmt)
{
    if (fmt != LMK_ROUND_BF16 && fmt != LMK_ROUND_FP16)
        return LMK_INVALID;
    uint16_t *d = dst16;
    long nn = (long)n;
#pragma omp parallel for num_threads(ST(b)->threads) if (nn > 65536)
    for (long i = 0; i < nn; i++)
        d[i] = cpu_half_bits(x[i], fmt);
    return LMK_OK;
}

/* The fused residual forms (backend.h): the unfused ops in sequence. */
static int cpu_add_rmsnorm_fwd(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype x2_dt,
                               void *out, lmk_dtype out_dt, float *rstd, const float *w, int n, int d,
                               float eps)
{
    int rc = cpu_add(b, y, x1, x2, x2_dt, (size_t)n * d);
    return rc == LMK_OK ? cpu_rmsnorm_fwd(b, out, out_dt, rstd, y, w, n, d, eps) : rc;
}

static int cpu_rmsnorm_bwd_add(lmk_backend *b, float *dx, void *dx16, lmk_round fmt, float *dw,
                               const void *dout, lmk_dtype dout_dt, const float *dres, const float *x,
                               const float *w, const float *rstd, int n, int d)
{
    if (dx16 && fmt != LMK_ROUND_BF16 && fmt != LMK_ROUND_FP16)
        return LMK_INVALID;
    int rc = cpu_rmsnorm_bwd(b, dx, dw, dout, dout_dt, x, w, rstd, n, d);
    if (rc == LMK_OK && dres)
        rc = cpu_add(b, dx, dx, dres, LMK_F32, (size_t)n * d);
    if (rc == LMK_OK && dx16)
        rc = cpu_cast_half(b, dx16, dx, (size_t)n * d, fmt);
    return rc;
}

/* The inverse of cpu_cast_half: raw 16-bit bits to their exact float values. */
static int cpu_cast_float(lmk_backend *b, float *out, const void *x16, size_t n, lmk_round fmt)
{
    if (fmt != LMK_ROUND_BF16 && fmt != LMK_ROUND_FP16)
        return LMK_INVALID;
    const uint16_t *x = x16;
    long nn = (long)n;
#pragma omp parallel for num_threads(ST(b)->threads) if (nn > 65536)
    for (long i = 0; i < nn; i++)
        out[i] = fmt == LMK_ROUND_BF16 ? lmk_bf16_bits_to_float(x[i]) : lmk_fp16_bits_to_float(x[i]);
    return LMK_OK;
}

/* --- attention: the float32 reference (attention_cpu.c) ----------------- */

static lmk_round dtype_round(lmk_dtype dt)
{
    return dt == LMK_BF16 ? LMK_ROUND_BF16 : LMK_ROUND_FP16;
}

/* *out = x as float32: x itself for LMK_F32 (*owned = 0), else a new
 * widened copy (*owned = 1). Returns LMK_OK or LMK_NOMEM. */
static int attn_widen(lmk_backend *b, const void *x, size_t n, lmk_dtype dt, float **out, int *owned)
{
    *owned = dt != LMK_F32;
    if (!*owned) {
        *out = (float *)x;
        return LMK_OK;
    }
    if (!(*out = malloc(n * sizeof **out)))
        return LMK_NOMEM;
    return cpu_cast_float(b, *out, x, n, dtype_round(dt));
}

static int cpu_attn_fwd(lmk_backend *b, void *o, float *lse, const void *q, const void *k, const void *v,
                        const lmk_attn_shape *s)
{
    if (s->dtype != LMK_F32 && s->dtype != LMK_BF16 && s->dtype != LMK_F16)
        return LMK_INVALID;
    size_t n = (size_t)s->B * s->H * s->T * s->d;
    const void *in[3] = {q, k, v};
    float *f[4] = {NULL, NULL, NULL, NULL};
    int own[4] = {0, 0, 0, 0}, rc = LMK_OK;
    for (int i = 0; i < 3 && rc == LMK_OK; i++)
        rc = attn_widen(b, in[i], n, s->dtype, &f[i], &own[i]);
    lmk_attn_shape s32 = *s;
    s32.dtype = LMK_F32;
    if (rc == LMK_OK) {
        own[3] = s->dtype != LMK_F32;
        f[3] = own[3] ? malloc(n * sizeof *f[3]) : o;
        rc = f[3] ? lmk_attn_cpu_fwd(f[3], lse, f[0], f[1], f[2], &s32) : LMK_NOMEM;
    }
    if (rc == LMK_OK && own[3])
        rc = cpu_cast_half(b, o, f[3], n, dtype_round(s->dtype));
    for (int i = 0; i < 4; i++)
        if (own[i])
            free(f[i]);
    return rc;
}

static int cpu_attn_bwd(lmk_backend *b, void *dq, void *dk, void *dv, float *work, const void *dout,
                        const void *q, const void *k, const void *v, const void *o, const float *lse,
                        const lmk_attn_shape *s)
{
    (void)work;
    if (s->dtype != LMK_F32 && s->dtype != LMK_BF16 && s->dtype != LMK_F16)
        return LMK_INVALID;
    size_t n = (size_t)s->B * s->H * s->T * s->d;
    const void *in[5] = {dout, q, k, v, o};
    void *outs[3] = {dq, dk, dv};
    float *f[8] = {NULL};
    int own[8] = {0}, rc = LMK_OK;
    for (int i = 0; i < 5 && rc == LMK_OK; i++)
        rc = attn_widen(b, in[i], n, s->dtype, &f[i], &own[i]);
    for (int i = 0; i < 3 && rc == LMK_OK; i++) {
        own[5 + i] = s->dtype != LMK_F32;
        f[5 + i] = own[5 + i] ? malloc(n * sizeof *f[5 + i]) : outs[i];
        if (!f[5 + i])
            rc = LMK_NOMEM;
    }
    lmk_attn_shape s32 = *s;
    s32.dtype = LMK_F32;
    if (rc == LMK_OK)
        rc = lmk_attn_cpu_bwd(f[5], f[6], f[7], f[0], f[1], f[2], f[3], f[4], lse, &s32);
    for (int i = 0; i < 3 && rc == LMK_OK; i++)
        if (own[5 + i])
            rc = cpu_cast_half(b, outs[i], f[5 + i], n, dtype_round(s->dtype));
    for (int i = 0; i < 8; i++)
        if (own[i])
            free(f[i]);
    return rc;
}

/* --- cross-entropy ---------------------------------------------------- */

static int cpu_cross_entropy(lmk_backend *b, float *loss, float *dlogits, const float *logits,
                             const int32_t *targets, int n, int V, float dscale)
{
    for (int i = 0; i < n; i++)
        if (targets[i] < 0 || targets[i] >= V)
            return LMK_INVALID;
    /* fixed chunks summed in order: the result does not depend on threads */
    enum { CHUNKS = 64 };
    double part[CHUNKS] = {0};
    float gs = dscale / (float)n;
#pragma omp parallel for num_threads(ST(b)->threads) schedule(static) if (n > 16)
    for (int c = 0; c < CHUNKS; c++) {
        int i0 = (int)((long)n * c / CHUNKS), i1 = (int)((long)n * (c + 1) / CHUNKS);
        for (int i = i0; i < i1; i++) {
            const float *z = logits + (size_t)i * V;
            float *dz = dlogits ? dlogits + (size_t)i * V : NULL; /* may alias z */
            int t = targets[i];
            float mx = -INFINITY, zt = z[t];
            for (int j = 0; j < V; j++)
                mx = z[j] > mx ? z[j] : mx;
            double sum = 0.0;
            if (dz) {
                for (int j = 0; j < V; j++) {
                    float e = expf(z[j] - mx);
                    sum += e;
                    dz[j] = e;
                }
                float scale = (float)(gs / sum);
                for (int j = 0; j < V; j++)
                    dz[j] *= scale;
                dz[t] -= gs;
            } else {
                for (int j = 0; j < V; j++)
                    sum += expf(z[j] - mx);
            }
            part[c] += mx + log(sum) - zt;
        }
    }
    double total = 0.0;
    for (int c = 0; c < CHUNKS; c++)
        total += part[c];
    *loss = (float)(total / n);
    return LMK_OK;
}

/* --- optimizer -------------------------------------------------------- */

static int cpu_sum_squares(lmk_backend *b, float *sumsq, const float *g, size_t n)
{
    (void)b;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * g[i];
    *sumsq = (float)(*sumsq + s);
    return LMK_OK;
}

static int cpu_clip_factor(lmk_backend *b, float *factor, const float *sumsq, float max_norm,
                           float unscale)
{
    (void)b;
    float ss = *sumsq;
    if (!isfinite(ss)) {
        *factor = 0.0f;
        return LMK_OK;
    }
    double norm = sqrt((double)ss) * unscale;
    double f = unscale;
    if (max_norm > 0.0f && norm + 1e-6 > max_norm)
        f *= max_norm / (norm + 1e-6);
    *factor = (float)f;
    return LMK_OK;
}

/* α_t in double, rounded once to float (the cuda backend does the same). */
static float adamw_alpha(const lmk_adamw_hp *hp, int64_t t)
{
    return (float)(hp->lr * sqrt(1.0 - pow(hp->beta2, (double)t)) /
                   (1.0 - pow(hp->beta1, (double)t)));
}

static int cpu_adamw_begin(lmk_backend *b, int64_t *t, float *alpha, const float *factor,
                           const lmk_adamw_hp *hp)
{
    (void)b;
    if (!factor || *factor != 0.0f)
        *t += 1;
    *alpha = *t > 0 ? adamw_alpha(hp, *t) : 0.0f;
    return LMK_OK;
}

/* Elements [i0, i1) of one AdamW step; h (optional): the 16-bit copy of
 * the new p in format fmt (BF16 or FP16), written while that range of p is
 * still in cache. */
CPU_CLONES
static void adamw_range(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                        uint16_t *restrict h, lmk_round fmt, size_t i0, size_t i1, float f, float b1,
                        float b2, float at, float decay, float eps)
{
    for (size_t i = i0; i < i1; i++) {
        float gi = g[i] * f;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        float pi = p[i] - at * mi / (sqrtf(vi) + eps);
        pi -= decay * pi;
        m[i] = mi, v[i] = vi, p[i] = pi;
    }
    if (h && fmt == LMK_ROUND_BF16)
        for (size_t i = i0; i < i1; i++)
            h[i] = cpu_half_bits(p[i], LMK_ROUND_BF16);
    else if (h)
        for (size_t i = i0; i < i1; i++)
            h[i] = cpu_half_bits(p[i], LMK_ROUND_FP16);
}

/* h (optional): as adamw_range; p, g, m, v, h must not overlap. */
static int adamw_copy(lmk_backend *b, float *p, const float *g, float *m, float *v, uint16_t *h,
                      lmk_round fmt, size_t n, const lmk_adamw_hp *hp, const float *factor)
{
    float f = factor ? *factor : 1.0f;
    if (f == 0.0f)
        return LMK_OK;
    if (!hp->alpha && hp->t < 1)
        return LMK_INVALID;
    float at = hp->alpha ? *hp->alpha : adamw_alpha(hp, hp->t);
    float decay = hp->lr * hp->weight_decay;
    enum { CHUNK = 16384 }; /* elements per OpenMP task: 64 KiB of each array */
    long chunks = (long)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for num_threads(ST(b)->threads) if (chunks > 4)
    for (long c = 0; c < chunks; c++) {
        size_t i0 = (size_t)c * CHUNK, i1 = i0 + CHUNK < n ? i0 + CHUNK : n;
        adamw_range(p, g, m, v, h, fmt, i0, i1, f, hp->beta1, hp->beta2, at, decay, hp->eps);
    }
    return LMK_OK;
}

static int cpu_adamw(lmk_backend *b, float *p, const float *g, float *m, float *v, size_t n,
                     const lmk_adamw_hp *hp, const float *factor)
{
    return adamw_copy(b, p, g, m, v, NULL, LMK_ROUND_NONE, n, hp, factor);
}

static int cpu_sum_squares_multi(lmk_backend *b, float *sumsq, const lmk_opt_tensor *ts,
                                 size_t count)
{
    for (size_t i = 0; i < count; i++)
        (void)cpu_sum_squares(b, sumsq, ts[i].g, ts[i].n);
    return LMK_OK;
}

static int cpu_adamw_multi(lmk_backend *b, const lmk_opt_tensor *ts, size_t count,
                           const lmk_adamw_hp *hp, const float *factor)
{
    if (!hp->alpha && hp->t < 1)
        return LMK_INVALID;
    for (size_t i = 0; i < count; i++)
        if (ts[i].h && hp->copy_fmt != LMK_ROUND_BF16 && hp->copy_fmt != LMK_ROUND_FP16)
            return LMK_INVALID;
    for (size_t i = 0; i < count; i++) {
        int rc = adamw_copy(b, ts[i].p, ts[i].g, ts[i].m, ts[i].v, ts[i].h, hp->copy_fmt, ts[i].n, hp, factor);
        if (rc != LMK_OK)
            return rc;
    }
    return LMK_OK;
}

/* --- the table -------------------------------------------------------- */

static void cpu_destroy(lmk_backend *b)
{
    cpu_state *st = b->impl;
    if (st) {
        for (int i = 0; st->scratch && i < st->threads; i++) {
            free(st->scratch[i].apack);
            free(st->scratch[i].bpack);
            free(st->scratch[i].cacc);
        }
        free(st->scratch);
        free(st);
    }
    free(b);
}

static const lmk_backend cpu_template = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .mem_zero = cpu_mem_zero,
    .mem_copy = cpu_mem_copy,
    .upload = cpu_mem_copy,
    .download = cpu_mem_copy,
    .synchronize = cpu_synchronize,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .add_rmsnorm_fwd = cpu_add_rmsnorm_fwd,
    .rmsnorm_bwd_add = cpu_rmsnorm_bwd_add,
    .rope_fwd = cpu_rope_fwd,
    .rope_bwd = cpu_rope_bwd,
    .gemm = cpu_gemm,
    .gemm_half = cpu_gemm_half,
    .softmax_causal_fwd = cpu_softmax_causal_fwd,
    .softmax_causal_bwd = cpu_softmax_causal_bwd,
    .swiglu_fwd = cpu_swiglu_fwd,
    .swiglu_bwd = cpu_swiglu_bwd,
    .add = cpu_add,
    .scale = cpu_scale,
    .cast = cpu_cast,
    .cast_half = cpu_cast_half,
    .cast_float = cpu_cast_float,
    .attn_fwd = cpu_attn_fwd,
    .attn_bwd = cpu_attn_bwd,
    .cross_entropy = cpu_cross_entropy,
    .sum_squares = cpu_sum_squares,
    .clip_factor = cpu_clip_factor,
    .adamw_begin = cpu_adamw_begin,
    .adamw = cpu_adamw,
    .sum_squares_multi = cpu_sum_squares_multi,
    .adamw_multi = cpu_adamw_multi,
};

int lmk_backend_cpu_create(lmk_backend **out)
{
    int rc = LMK_NOMEM;
    lmk_backend *b = malloc(sizeof *b);
    cpu_state *st = calloc(1, sizeof *st);
    if (!b || !st)
        goto fail;
    *b = cpu_template;
    b->impl = st;
    st->threads = 1;
#ifdef _OPENMP
    st->threads = omp_get_max_threads();
#endif
    st->scratch = calloc((size_t)st->threads, sizeof *st->scratch);
    if (!st->scratch)
        goto fail;
    for (int i = 0; i < st->threads; i++) {
        cpu_scratch *s = &st->scratch[i];
        if (posix_memalign((void **)&s->apack, 64, sizeof(float) * CPU_MB * CPU_KB) ||
            posix_memalign((void **)&s->bpack, 64, sizeof(float) * CPU_KB * CPU_NB) ||
            posix_memalign((void **)&s->cacc, 64, sizeof(float) * CPU_MB * CPU_NB))
            goto fail;
    }
    *out = b;
    return LMK_OK;
fail:
    if (b) {
        b->impl = st;
        b->destroy = cpu_destroy;
        cpu_destroy(b);
    } else {
        free(st);
    }
    return rc;
}
