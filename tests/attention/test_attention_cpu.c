/* The CPU attention reference: forward (O, logsumexp) against a direct
 * double-precision computation, backward (dQ, dK, dV) against central finite
 * differences of L = Σ dO∘O, on small odd shapes (T = 37, d = 80), causal
 * and not. Tolerance |got − ref| ≤ atol + rtol·|ref|. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention.h"
#include "status.h"

static unsigned long long st = 0x2545F4914F6CDD1Dull;
static float urand(void)
{
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    return (float)((st >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

static int fails;

static void check(const char *what, double got, double ref, double atol, double rtol)
{
    if (!(fabs(got - ref) <= atol + rtol * fabs(ref))) {
        if (fails < 20)
            fprintf(stderr, "FAIL %s: got %.8g want %.8g\n", what, got, ref);
        fails++;
    }
}

/* Direct: full (T, T) matrix per (b, h), mask, max-subtracted softmax. */
static void direct_fwd(double *o, double *lse, const float *q, const float *k, const float *v,
                       int BH, int T, int d, int causal)
{
    double *sc = malloc(sizeof(double) * T);
    for (int bh = 0; bh < BH; bh++)
        for (int i = 0; i < T; i++) {
            double m = -INFINITY;
            for (int j = 0; j < T; j++) {
                double a = 0;
                for (int c = 0; c < d; c++)
                    a += (double)q[((size_t)bh * T + i) * d + c] * k[((size_t)bh * T + j) * d + c];
                sc[j] = (causal && j > i) ? -INFINITY : a / sqrt((double)d);
                m = fmax(m, sc[j]);
            }
            double z = 0;
            for (int j = 0; j < T; j++)
                z += exp(sc[j] - m);
            lse[(size_t)bh * T + i] = m + log(z);
            for (int c = 0; c < d; c++) {
                double a = 0;
                for (int j = 0; j < T; j++)
                    a += exp(sc[j] - m) / z * v[((size_t)bh * T + j) * d + c];
                o[((size_t)bh * T + i) * d + c] = a;
            }
        }
    free(sc);
}

static double loss(const float *q, const float *k, const float *v, const float *g, float *o,
                   float *lse, const lmk_attn_shape *s, size_t n)
{
    if (lmk_attn_cpu_fwd(o, lse, q, k, v, s) != LMK_OK)
        return NAN;
    double L = 0;
    for (size_t i = 0; i < n; i++)
        L += (double)g[i] * o[i];
    return L;
}

static void run(int B, int H, int T, int d, int causal)
{
    lmk_attn_shape s = {B, H, T, d, causal, LMK_F32, 0};
    size_t n = (size_t)B * H * T * d, rows = (size_t)B * H * T;
    float *x[4], *o = malloc(n * 4), *lse = malloc(rows * 4), *gr[3];
    for (int t = 0; t < 4; t++) {
        x[t] = malloc(n * 4);
        for (size_t i = 0; i < n; i++)
            x[t][i] = urand();
    }
    for (int t = 0; t < 3; t++)
        gr[t] = malloc(n * 4);
    double *od = malloc(n * sizeof(double)), *lsed = malloc(rows * sizeof(double));
    if (lmk_attn_cpu_fwd(o, lse, x[0], x[1], x[2], &s) != LMK_OK) {
        fprintf(stderr, "FAIL fwd returned an error\n");
        fails++;
        return;
    }
    direct_fwd(od, lsed, x[0], x[1], x[2], B * H, T, d, causal);
    for (size_t i = 0; i < n; i++)
        check("O", o[i], od[i], 1e-6, 1e-5);
    for (size_t i = 0; i < rows; i++)
        check("lse", lse[i], lsed[i], 1e-6, 1e-5);
    if (lmk_attn_cpu_bwd(gr[0], gr[1], gr[2], x[3], x[0], x[1], x[2], o, lse, &s) != LMK_OK) {
        fprintf(stderr, "FAIL bwd returned an error\n");
        fails++;
        return;
    }
    /* finite differences on 40 random elements of each of q, k, v */
    const char *names[3] = {"dQ", "dK", "dV"};
    const float h = 1e-2f;
    for (int t = 0; t < 3; t++)
        for (int r = 0; r < 40; r++) {
            size_t i = (size_t)((urand() * 0.5f + 0.5f) * (n - 1));
            float keep = x[t][i];
            x[t][i] = keep + h;
            double lp = loss(x[0], x[1], x[2], x[3], o, lse, &s, n);
            x[t][i] = keep - h;
            double lm = loss(x[0], x[1], x[2], x[3], o, lse, &s, n);
            x[t][i] = keep;
            /* the FD step is exact in float (h = 2^-6.6 rounds: use the real step) */
            double step = ((double)(keep + h) - (double)(keep - h));
            check(names[t], gr[t][i], (lp - lm) / step, 2e-3, 2e-2);
        }
    /* invalid arguments */
    lmk_attn_shape bad = s;
    bad.dtype = LMK_BF16;
    if (lmk_attn_cpu_fwd(o, lse, x[0], x[1], x[2], &bad) != LMK_INVALID) {
        fprintf(stderr, "FAIL bf16 accepted by the cpu reference\n");
        fails++;
    }
    for (int t = 0; t < 4; t++)
        free(x[t]);
    for (int t = 0; t < 3; t++)
        free(gr[t]);
    free(o);
    free(lse);
    free(od);
    free(lsed);
}

int main(void)
{
    run(1, 2, 37, 80, 0);
    run(1, 2, 37, 80, 1);
    run(2, 1, 1, 16, 1);
    run(1, 1, 5, 32, 0);
    if (lmk_attn_flops_fwd(&(lmk_attn_shape){8, 1, 1024, 64, 0, LMK_F32, 0}) !=
        4.0 * 8 * 1024 * 1024 * 64) {
        fprintf(stderr, "FAIL flops convention\n");
        fails++;
    }
    /* the flash backward's work buffer: D alone for the deterministic two
     * passes, a float32 dQ accumulator too for the 16-bit single pass */
    const struct {
        lmk_dtype dt;
        int d, atomic;
        size_t per_row;
    } wk[] = {{LMK_BF16, 64, 0, 1}, {LMK_BF16, 64, 1, 65}, {LMK_F16, 128, 1, 129},
              {LMK_F16, 16, 1, 17},  {LMK_BF16, 80, 1, 81}, {LMK_F32, 64, 1, 1}};
    for (size_t i = 0; i < sizeof wk / sizeof wk[0]; i++) {
        lmk_attn_shape s = {2, 3, 1001, wk[i].d, 1, wk[i].dt, wk[i].atomic};
        if (lmk_flash_attn_bwd_work_floats(&s) != (size_t)2 * 3 * 1001 * wk[i].per_row) {
            fprintf(stderr, "FAIL work floats (d %d atomic %d)\n", wk[i].d, wk[i].atomic);
            fails++;
        }
    }
    printf("%s (%d failures)\n", fails ? "FAIL" : "ok", fails);
    return fails ? 1 : 0;
}
