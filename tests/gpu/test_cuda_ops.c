/* The cuda backend against the cpu reference: every op forward and backward
 * on fresh random inputs (odd shapes: dh 80, 25 heads, T 100, V 10007), then
 * whole models (tiny and an odd custom shape) from the same seed: loss, every
 * gradient, and 5 AdamW steps' losses. Check: |gpu − ref| ≤ atol + rtol·|ref|.
 * Exits 77 when no CUDA device is visible (CI), 1 on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/check.h"
#include "gpu_test.h"
#include "backend.h"
#include "cuda/backend_cuda.h"
#include "model.h"
#include "status.h"

static lmk_backend *cpu, *gpu;

static double now_ms_test(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static test_rng rng = {12345};

/* --- helpers ------------------------------------------------------------ */

static float *h_rand(size_t n, float lo, float hi)
{
    float *p = malloc(n * sizeof *p);
    if (!p)
        exit(1);
    for (size_t i = 0; i < n; i++)
        p[i] = test_uniform(&rng, lo, hi);
    return p;
}

static float *h_copy(const float *h, size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p)
        exit(1);
    memcpy(p, h, n * sizeof *p);
    return p;
}

static void *d_from(const void *h, size_t bytes)
{
    void *d = NULL;
    MUST(gpu->mem_alloc(gpu, bytes, &d));
    MUST(gpu->upload(gpu, d, h, bytes));
    return d;
}

static void *d_alloc(size_t bytes)
{
    void *d = NULL;
    MUST(gpu->mem_alloc(gpu, bytes, &d));
    MUST(gpu->mem_zero(gpu, d, bytes));
    return d;
}

/* Downloads n floats of d and compares them with ref. */
static void compare(const char *what, const void *d, const float *ref, size_t n, double atol,
                    double rtol)
{
    float *h = malloc(n * sizeof *h);
    if (!h)
        exit(1);
    int rc = gpu->download(gpu, h, d, n * sizeof *h);
    if (rc != LMK_OK) {
        CHECK(0, "%s: download %d (%s)", what, rc, lmk_backend_cuda_last_error(gpu));
        free(h);
        return;
    }
    double worst = 0.0, max_abs = 0.0;
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)h[i] - ref[i]);
        double lim = atol + rtol * fabs(ref[i]);
        int nan_ok = isnan(h[i]) && isnan(ref[i]);
        if (!nan_ok && !(e <= lim) && !(isinf(ref[i]) && h[i] == ref[i])) {
            if (!bad)
                at = i;
            bad++;
        }
        if (e > max_abs && !nan_ok && !isinf(ref[i]))
            max_abs = e;
        if (lim > 0 && e / lim > worst && !nan_ok && !isinf(ref[i]))
            worst = e / lim;
    }
    printf("  %-44s n=%-9zu max|err|=%.3g  worst err/tol=%.3g  %s\n", what, n, max_abs, worst,
           bad ? "FAIL" : "ok");
    CHECK(!bad, "%s: %zu of %zu outside tolerance; first at %zu: gpu %.9g ref %.9g", what, bad, n,
          at, h[at], ref[at]);
    free(h);
}

static void run_gpu(int rc, const char *what)
{
    if (rc != LMK_OK) {
        fprintf(stderr, "FAIL %s returned %d (%s)\n", what, rc, lmk_backend_cuda_last_error(gpu));
        exit(1);
    }
}
#define GPU(call) run_gpu((call), #call)

/* --- ops ---------------------------------------------------------------- */

static void test_embedding(void)
{
    int n = 2 * 100, d = 120, V = 10007;
    int32_t *ids = malloc(n * sizeof *ids);
    for (int i = 0; i < n; i++) /* half the tokens from a small range: repeats */
        ids[i] = (int32_t)(test_next(&rng) % (i % 2 ? 37 : (uint64_t)V));
    float *w = h_rand((size_t)V * d, -1, 1), *dout = h_rand((size_t)n * d, -1, 1);
    float *dw = h_rand((size_t)V * d, -1, 1), *out = malloc(sizeof(float) * n * d);
    void *d_ids = d_from(ids, n * sizeof *ids), *d_w = d_from(w, sizeof(float) * V * d);
    void *d_out = d_alloc(sizeof(float) * n * d), *d_dout = d_from(dout, sizeof(float) * n * d);
    void *d_dw = d_from(dw, sizeof(float) * V * d);
    MUST(cpu->embedding_fwd(cpu, out, ids, w, n, d, V));
    GPU(gpu->embedding_fwd(gpu, d_out, d_ids, d_w, n, d, V));
    compare("embedding_fwd (200x120, V 10007)", d_out, out, (size_t)n * d, 0, 0);
    MUST(cpu->embedding_bwd(cpu, dw, dout, ids, n, d, V));
    GPU(gpu->embedding_bwd(gpu, d_dw, d_dout, d_ids, n, d, V));
    compare("embedding_bwd (accumulating, repeats)", d_dw, dw, (size_t)V * d, 0, 0);
    gpu->mem_free(gpu, d_ids), gpu->mem_free(gpu, d_w), gpu->mem_free(gpu, d_out);
    gpu->mem_free(gpu, d_dout), gpu->mem_free(gpu, d_dw);
    free(ids), free(w), free(dout), free(dw), free(out);
}

static void test_rmsnorm(int n, int d)
{
    char name[96];
    float *x = h_rand((size_t)n * d, -2, 2), *w = h_rand(d, 0.5f, 1.5f);
    float *dout = h_rand((size_t)n * d, -1, 1), *dw = h_rand(d, -1, 1);
    float *out = malloc(sizeof(float) * n * d), *rstd = malloc(sizeof(float) * n);
    float *dx = malloc(sizeof(float) * n * d);
    void *d_x = d_from(x, sizeof(float) * n * d), *d_w = d_from(w, sizeof(float) * d);
    void *d_dout = d_from(dout, sizeof(float) * n * d), *d_dw = d_from(dw, sizeof(float) * d);
    void *d_out = d_alloc(sizeof(float) * n * d), *d_rstd = d_alloc(sizeof(float) * n);
    void *d_dx = d_alloc(sizeof(float) * n * d);
    MUST(cpu->rmsnorm_fwd(cpu, out, LMK_F32, rstd, x, w, n, d, 1e-5f));
    GPU(gpu->rmsnorm_fwd(gpu, d_out, LMK_F32, d_rstd, d_x, d_w, n, d, 1e-5f));
    snprintf(name, sizeof name, "rmsnorm_fwd out (%dx%d)", n, d);
    compare(name, d_out, out, (size_t)n * d, 1e-6, 1e-5);
    snprintf(name, sizeof name, "rmsnorm_fwd rstd (%d)", n);
    compare(name, d_rstd, rstd, n, 1e-6, 1e-5);
    MUST(cpu->rmsnorm_bwd(cpu, dx, dw, dout, LMK_F32, x, w, rstd, n, d));
    GPU(gpu->rmsnorm_bwd(gpu, d_dx, d_dw, d_dout, LMK_F32, d_x, d_w, d_rstd, n, d));
    snprintf(name, sizeof name, "rmsnorm_bwd dx (%dx%d)", n, d);
    compare(name, d_dx, dx, (size_t)n * d, 1e-5, 1e-4);
    snprintf(name, sizeof name, "rmsnorm_bwd dw (+=, sum over %d rows)", n);
    compare(name, d_dw, dw, d, 1e-6 * sqrt(n), 1e-5);
    gpu->mem_free(gpu, d_x), gpu->mem_free(gpu, d_w), gpu->mem_free(gpu, d_dout);
    gpu->mem_free(gpu, d_dw), gpu->mem_free(gpu, d_out), gpu->mem_free(gpu, d_rstd);
    gpu->mem_free(gpu, d_dx);
    free(x), free(w), free(dout), free(dw), free(out), free(rstd), free(dx);
}

/* Whether two device buffers of bytes each are equal bit for bit. */
static int same_bytes(const void *d1, const void *d2, size_t bytes)
{
    char *h1 = malloc(bytes), *h2 = malloc(bytes);
    if (!h1 || !h2)
        exit(1);
    MUST(gpu->download(gpu, h1, d1, bytes));
    MUST(gpu->download(gpu, h2, d2, bytes));
    int same = memcmp(h1, h2, bytes) == 0;
    free(h1), free(h2);
    return same;
}

/* Prints and checks that two device buffers are equal bit for bit. */
static void bitwise_check(const char *what, const void *d1, const void *d2, size_t bytes)
{
    int same = same_bytes(d1, d2, bytes);
    printf("  %-44s bytes=%-9zu %s\n", what, bytes, same ? "bitwise equal" : "FAIL");
    CHECK(same, "%s: differs", what);
}

/* rope_qkv_fwd / _bwd (q, k and v of a fused projection in one launch)
 * against the three rope_fwd / rope_bwd calls of the same backend, bit for
 * bit: d_qkv (B, T, 3·H·dh) of dt, d_dhead (B, H, T, dh) used as each of the
 * three head gradients (read only), d_table (T, dh/2, 2). */
static void rope_qkv_check(lmk_dtype dt, const void *d_qkv, const void *d_dhead, const float *d_table, int B,
                           int T, int H, int dh)
{
    size_t es = lmk_dtype_size(dt), n = (size_t)B * T * H * dh, D = (size_t)H * dh;
    char name[96];
    if (!gpu->rope_qkv_fwd || !gpu->rope_qkv_bwd) {
        printf("  rope_qkv_fwd / _bwd: not in this build (LMK_ROPE_QKV 0)\n");
        return;
    }
    void *one = d_alloc(n * es), *wide1 = d_alloc(3 * n * es), *wide3 = d_alloc(3 * n * es);
    void *heads[3] = {d_alloc(n * es), d_alloc(n * es), d_alloc(n * es)};
    GPU(gpu->rope_qkv_fwd(gpu, heads, d_qkv, dt, d_table, B, T, H, dh));
    for (int part = 0; part < 3; part++) {
        GPU(gpu->rope_fwd(gpu, one, (const char *)d_qkv + part * D * es, dt, part < 2 ? d_table : NULL, B, T, H,
                          dh, 3 * (int)D));
        snprintf(name, sizeof name, "rope_qkv_fwd %s part %d = rope_fwd (dh%d)", lmk_dtype_name(dt), part, dh);
        bitwise_check(name, heads[part], one, n * es);
    }
    /* the backward from three different gradients: the head input and two rotations of it */
    const void *dheads[3] = {d_dhead, heads[0], heads[1]};
    GPU(gpu->rope_qkv_bwd(gpu, wide1, dheads, dt, d_table, B, T, H, dh));
    for (int part = 0; part < 3; part++)
        GPU(gpu->rope_bwd(gpu, (char *)wide3 + part * D * es, dheads[part], dt, part < 2 ? d_table : NULL, B, T, H,
                          dh, 3 * (int)D));
    snprintf(name, sizeof name, "rope_qkv_bwd %s = 3 x rope_bwd (dh%d)", lmk_dtype_name(dt), dh);
    bitwise_check(name, wide1, wide3, 3 * n * es);
    for (int i = 0; i < 3; i++)
        gpu->mem_free(gpu, heads[i]);
    gpu->mem_free(gpu, one), gpu->mem_free(gpu, wide1), gpu->mem_free(gpu, wide3);
}

/* dh 80: the 16-byte vector kernel; dh 6: one thread per pair or element */
static void test_rope(int with_table, int dh)
{
    int B = 2, T = 100, H = 25;
    char name[64];
    size_t n = (size_t)B * T * H * dh;
    float *table = malloc(sizeof(float) * T * dh);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < dh / 2; k++) {
            double ang = t * pow(10000.0, -2.0 * k / dh);
            table[(size_t)t * dh + 2 * k] = (float)cos(ang);
            table[(size_t)t * dh + 2 * k + 1] = (float)sin(ang);
        }
    float *in = h_rand(n, -1, 1), *out = malloc(n * sizeof *out), *back = malloc(n * sizeof *back);
    void *d_table = d_from(table, sizeof(float) * T * dh), *d_in = d_from(in, n * sizeof *in);
    void *d_out = d_alloc(n * sizeof(float)), *d_back = d_alloc(n * sizeof(float));
    const float *tab = with_table ? table : NULL;
    const float *dtab = with_table ? d_table : NULL;
    int D = H * dh;
    MUST(cpu->rope_fwd(cpu, out, in, LMK_F32, tab, B, T, H, dh, D));
    GPU(gpu->rope_fwd(gpu, d_out, d_in, LMK_F32, dtab, B, T, H, dh, D));
    snprintf(name, sizeof name, "%s (B2 T100 H25 dh%d)", with_table ? "rope_fwd" : "head split", dh);
    compare(name, d_out, out, n, 1e-6, 1e-6);
    MUST(cpu->rope_bwd(cpu, back, in, LMK_F32, tab, B, T, H, dh, D));
    GPU(gpu->rope_bwd(gpu, d_back, d_in, LMK_F32, dtab, B, T, H, dh, D));
    compare(with_table ? "rope_bwd" : "head merge", d_back, back, n, 1e-6, 1e-6);
    /* rows 3·D apart (q, k, v inside a fused (N, 3d) projection); rope_bwd
     * leaves the other columns as they were */
    size_t wn = (size_t)B * T * 3 * D;
    float *wide = h_rand(wn, -1, 1), *wback = malloc(wn * sizeof *wback);
    void *d_wide = d_from(wide, wn * sizeof *wide);
    for (int part = 0; part < 3; part++) {
        MUST(cpu->rope_fwd(cpu, out, wide + (size_t)part * D, LMK_F32, tab, B, T, H, dh, 3 * D));
        GPU(gpu->rope_fwd(gpu, d_out, (float *)d_wide + (size_t)part * D, LMK_F32, dtab, B, T, H, dh, 3 * D));
        snprintf(name, sizeof name, "%s rows 3d apart, part %d (dh%d)", with_table ? "rope_fwd" : "head split",
                 part, dh);
        compare(name, d_out, out, n, 1e-6, 1e-6);
        memcpy(wback, wide, wn * sizeof *wback);
        MUST(cpu->rope_bwd(cpu, wback + (size_t)part * D, in, LMK_F32, tab, B, T, H, dh, 3 * D));
        GPU(gpu->upload(gpu, d_wide, wide, wn * sizeof *wide));
        GPU(gpu->rope_bwd(gpu, (float *)d_wide + (size_t)part * D, d_in, LMK_F32, dtab, B, T, H, dh, 3 * D));
        snprintf(name, sizeof name, "%s rows 3d apart, part %d (dh%d)", with_table ? "rope_bwd" : "head merge",
                 part, dh);
        compare(name, d_wide, wback, wn, 1e-6, 1e-6);
        GPU(gpu->upload(gpu, d_wide, wide, wn * sizeof *wide));
    }
    if (with_table)
        rope_qkv_check(LMK_F32, d_wide, d_in, dtab, B, T, H, dh);
    gpu->mem_free(gpu, d_wide);
    free(wide), free(wback);
    gpu->mem_free(gpu, d_table), gpu->mem_free(gpu, d_in), gpu->mem_free(gpu, d_out);
    gpu->mem_free(gpu, d_back);
    free(table), free(in), free(out), free(back);
}

static const char *round_name(lmk_round r)
{
    static const char *names[] = {"fp32", "tf32", "bf16", "fp16"};
    return names[r];
}

static void test_gemm(int ta, int tb, int m, int n, int k, int batch, float alpha, float beta,
                      lmk_round in, lmk_round outr)
{
    char name[128];
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    lmk_gemm g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .batch = batch,
                  .stride_a = (int64_t)na, .stride_b = (int64_t)nb, .stride_c = (int64_t)nc,
                  .alpha = alpha, .beta = beta, .in_round = in, .out_round = outr};
    float *a = h_rand(na * batch, -1, 1), *bm = h_rand(nb * batch, -1, 1);
    float *c = h_rand(nc * batch, -1, 1);
    void *d_a = d_from(a, sizeof(float) * na * batch), *d_b = d_from(bm, sizeof(float) * nb * batch);
    void *d_c = d_from(c, sizeof(float) * nc * batch);
    MUST(cpu->gemm(cpu, &g, c, a, bm));
    GPU(gpu->gemm(gpu, &g, d_c, d_a, d_b));
    /* entries are sums of k products of magnitude ≤ 1: scale atol by √k */
    double tol = in == LMK_ROUND_TF32 ? 2e-3 : 1e-5;
    double rtol = tol;
    if (outr == LMK_ROUND_BF16)
        rtol = 8e-3; /* one bf16 ulp: sums differing in the last float bits may round apart */
    else if (outr == LMK_ROUND_FP16 || outr == LMK_ROUND_TF32)
        rtol = 2e-3;
    snprintf(name, sizeof name, "gemm %c%c m%d n%d k%d b%d a%.2g b%.2g in %s out %s",
             ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, batch, alpha, beta, round_name(in),
             round_name(outr));
    compare(name, d_c, c, nc * batch, tol * sqrt(k) * fabs(alpha), rtol);
    gpu->mem_free(gpu, d_a), gpu->mem_free(gpu, d_b), gpu->mem_free(gpu, d_c);
    free(a), free(bm), free(c);
}

static void test_softmax(int batch, int T, int in_place)
{
    char name[96];
    size_t n = (size_t)batch * T * T;
    float *s = h_rand(n, -4, 4), *p = malloc(n * sizeof *p), *dp = h_rand(n, -1, 1);
    float *ds = malloc(n * sizeof *ds);
    void *d_s = d_from(s, n * sizeof *s), *d_dp = d_from(dp, n * sizeof *dp);
    void *d_p = in_place ? d_s : d_alloc(n * sizeof(float));
    void *d_ds = in_place ? d_dp : d_alloc(n * sizeof(float));
    MUST(cpu->softmax_causal_fwd(cpu, p, s, LMK_F32, batch, T, 0));
    GPU(gpu->softmax_causal_fwd(gpu, d_p, d_s, LMK_F32, batch, T, 0));
    snprintf(name, sizeof name, "softmax_causal_fwd (%dx%dx%d%s)", batch, T, T,
             in_place ? ", in place" : "");
    compare(name, d_p, p, n, 1e-7, 1e-5);
    MUST(cpu->softmax_causal_bwd(cpu, ds, dp, p, LMK_F32, batch, T, 0));
    GPU(gpu->softmax_causal_bwd(gpu, d_ds, d_dp, d_p, LMK_F32, batch, T, 0));
    snprintf(name, sizeof name, "softmax_causal_bwd (%dx%dx%d%s)", batch, T, T,
             in_place ? ", in place" : "");
    compare(name, d_ds, ds, n, 1e-7, 1e-4);
    gpu->mem_free(gpu, d_s), gpu->mem_free(gpu, d_dp);
    if (!in_place)
        gpu->mem_free(gpu, d_p), gpu->mem_free(gpu, d_ds);
    free(s), free(p), free(dp), free(ds);
}

static void test_elementwise(void)
{
    size_t n = 100003;
    float *a = h_rand(n, -6, 6), *g = h_rand(n, -2, 2), *dout = h_rand(n, -1, 1);
    float *out = malloc(n * sizeof *out), *da = malloc(n * sizeof *da), *dg = malloc(n * sizeof *dg);
    void *d_a = d_from(a, n * 4), *d_g = d_from(g, n * 4), *d_dout = d_from(dout, n * 4);
    void *d_out = d_alloc(n * 4), *d_da = d_alloc(n * 4), *d_dg = d_alloc(n * 4);
    MUST(cpu->swiglu_fwd(cpu, out, a, g, LMK_F32, n, (int)n, (int64_t)n));
    GPU(gpu->swiglu_fwd(gpu, d_out, d_a, d_g, LMK_F32, n, (int)n, (int64_t)n));
    compare("swiglu_fwd (n 100003, float32)", d_out, out, n, 1e-7, 1e-6);
    MUST(cpu->swiglu_bwd(cpu, da, dg, dout, a, g, LMK_F32, n, (int)n, (int64_t)n));
    GPU(gpu->swiglu_bwd(gpu, d_da, d_dg, d_dout, d_a, d_g, LMK_F32, n, (int)n, (int64_t)n));
    compare("swiglu_bwd da", d_da, da, n, 1e-7, 1e-5);
    compare("swiglu_bwd dg", d_dg, dg, n, 1e-7, 1e-5);
    /* add with y aliasing x1, scale */
    float *y = h_copy(a, n);
    MUST(cpu->add(cpu, y, y, g, LMK_F32, n));
    GPU(gpu->add(gpu, d_a, d_a, d_g, LMK_F32, n));
    compare("add (y aliases x1)", d_a, y, n, 0, 0);
    MUST(cpu->scale(cpu, y, n, 0.37f));
    GPU(gpu->scale(gpu, d_a, n, 0.37f));
    compare("scale", d_a, y, n, 0, 0);
    /* cast: exact, including subnormals, halfway cases, overflow, inf/nan */
    float *x = h_rand(n, -70000, 70000);
    for (size_t i = 0; i < n; i += 3)
        x[i] *= (float)ldexp(1.0, -(int)(test_next(&rng) % 40) - 10);
    x[0] = INFINITY, x[1] = -INFINITY, x[2] = NAN, x[3] = 65504.0f, x[4] = 65520.0f;
    x[5] = 0x1p-25f, x[6] = 0x1.8p-24f, x[7] = 1.0f + 0x1p-11f, x[8] = 1.0f + 0x3p-11f;
    void *d_x = d_from(x, n * 4);
    for (int r = 1; r < 4; r++) {
        char name[64];
        float *c = h_copy(x, n);
        MUST(cpu->cast(cpu, c, c, n, (lmk_round)r));
        GPU(gpu->cast(gpu, d_out, d_x, n, (lmk_round)r));
        snprintf(name, sizeof name, "cast %s (special values, exact)", round_name(r));
        compare(name, d_out, c, n, 0, 0);
        free(c);
    }
    gpu->mem_free(gpu, d_a), gpu->mem_free(gpu, d_g), gpu->mem_free(gpu, d_dout);
    gpu->mem_free(gpu, d_out), gpu->mem_free(gpu, d_da), gpu->mem_free(gpu, d_dg);
    gpu->mem_free(gpu, d_x);
    free(a), free(g), free(dout), free(out), free(da), free(dg), free(y), free(x);
}

/* --- 16-bit tensors ------------------------------------------------------- */

static uint16_t *h_half(const float *x, size_t n, lmk_round r)
{
    uint16_t *h = malloc(n * sizeof *h);
    if (!h)
        exit(1);
    MUST(cpu->cast_half(cpu, h, x, n, r));
    return h;
}

/* Downloads n 16-bit values of d (format r) and compares them, widened,
 * with the cpu's 16-bit result ref16 widened. */
static void compare16(const char *what, const void *d, const uint16_t *ref16, size_t n, lmk_round r,
                      double atol, double rtol)
{
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    uint16_t *h = malloc(n * sizeof *h);
    if (!ref || !got || !h)
        exit(1);
    MUST(cpu->cast_float(cpu, ref, ref16, n, r));
    void *dg = d_alloc(n * sizeof(float));
    GPU(gpu->cast_float(gpu, dg, d, n, r));
    compare(what, dg, ref, n, atol, rtol);
    gpu->mem_free(gpu, dg);
    free(ref), free(got), free(h);
}

/* Every op with a dtype argument on 16-bit tensors (same bits on both
 * sides): float32 math, one rounding per output, so the two backends agree
 * to one ulp of the format (two for swiglu's two roundings; expf and
 * summation order differ in the last float bits) and the GEMM writing 16-bit
 * C directly (c_half, beta 0) against the cpu's. */
static void test_half_ops(lmk_round r)
{
    lmk_dtype dt = r == LMK_ROUND_BF16 ? LMK_BF16 : LMK_F16;
    double ulp = r == LMK_ROUND_BF16 ? 0x1p-8 : 0x1p-11; /* half an ulp, relative */
    char name[128];
    const char *fn = round_name(r);
    /* rope / head split, B2 T100 H25 dh80 */
    int Bb = 2, T = 100, H = 25, dh = 80;
    size_t n = (size_t)Bb * T * H * dh;
    float *table = malloc(sizeof(float) * T * dh);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < dh / 2; k++) {
            double ang = t * pow(10000.0, -2.0 * k / dh);
            table[(size_t)t * dh + 2 * k] = (float)cos(ang);
            table[(size_t)t * dh + 2 * k + 1] = (float)sin(ang);
        }
    float *xin = h_rand(n, -3, 3);
    uint16_t *in16 = h_half(xin, n, r), *out16 = malloc(n * 2);
    void *d_table = d_from(table, sizeof(float) * T * dh), *d_in = d_from(in16, n * 2), *d_out = d_alloc(n * 2);
    for (int tb = 0; tb < 2; tb++) {
        MUST(cpu->rope_fwd(cpu, out16, in16, dt, tb ? table : NULL, Bb, T, H, dh, H * dh));
        GPU(gpu->rope_fwd(gpu, d_out, d_in, dt, tb ? d_table : NULL, Bb, T, H, dh, H * dh));
        snprintf(name, sizeof name, "%s %s (16-bit)", tb ? "rope_fwd" : "head split", fn);
        compare16(name, d_out, out16, n, r, 1e-6, 2 * ulp);
        MUST(cpu->rope_bwd(cpu, out16, in16, dt, tb ? table : NULL, Bb, T, H, dh, H * dh));
        GPU(gpu->rope_bwd(gpu, d_out, d_in, dt, tb ? d_table : NULL, Bb, T, H, dh, H * dh));
        snprintf(name, sizeof name, "%s %s (16-bit)", tb ? "rope_bwd" : "head merge", fn);
        compare16(name, d_out, out16, n, r, 1e-6, 2 * ulp);
    }
    { /* q, k, v inside a fused (N, 3d) projection: rows 3·H·dh apart (16-byte vectors) */
        int D = H * dh;
        size_t wn = (size_t)Bb * T * 3 * D;
        float *wx = h_rand(wn, -3, 3);
        uint16_t *w16 = h_half(wx, wn, r), *wb16 = malloc(wn * 2);
        void *d_w = d_from(w16, wn * 2);
        for (int part = 0; part < 3; part++) {
            MUST(cpu->rope_fwd(cpu, out16, w16 + (size_t)part * D, dt, table, Bb, T, H, dh, 3 * D));
            GPU(gpu->rope_fwd(gpu, d_out, (uint16_t *)d_w + (size_t)part * D, dt, d_table, Bb, T, H, dh, 3 * D));
            snprintf(name, sizeof name, "rope_fwd %s rows 3d apart, part %d (16-bit)", fn, part);
            compare16(name, d_out, out16, n, r, 1e-6, 2 * ulp);
            memcpy(wb16, w16, wn * 2);
            MUST(cpu->rope_bwd(cpu, wb16 + (size_t)part * D, in16, dt, table, Bb, T, H, dh, 3 * D));
            GPU(gpu->rope_bwd(gpu, (uint16_t *)d_w + (size_t)part * D, d_in, dt, d_table, Bb, T, H, dh, 3 * D));
            snprintf(name, sizeof name, "rope_bwd %s rows 3d apart, part %d (16-bit)", fn, part);
            compare16(name, d_w, wb16, wn, r, 1e-6, 2 * ulp);
            GPU(gpu->upload(gpu, d_w, w16, wn * 2));
        }
        rope_qkv_check(dt, d_w, d_in, d_table, Bb, T, H, dh);
        gpu->mem_free(gpu, d_w);
        free(wx), free(w16), free(wb16);
    }
    gpu->mem_free(gpu, d_table), gpu->mem_free(gpu, d_in), gpu->mem_free(gpu, d_out);
    free(table), free(xin), free(in16), free(out16);

    /* swiglu forward / backward, add with a 16-bit x2 */
    n = 100003;
    float *a = h_rand(n, -6, 6), *g = h_rand(n, -2, 2), *dy = h_rand(n, -1, 1), *base = h_rand(n, -1, 1);
    uint16_t *a16 = h_half(a, n, r), *g16 = h_half(g, n, r), *dy16 = h_half(dy, n, r);
    uint16_t *o16 = malloc(n * 2), *o16b = malloc(n * 2);
    void *d_a = d_from(a16, n * 2), *d_g = d_from(g16, n * 2), *d_dy = d_from(dy16, n * 2);
    void *d_o = d_alloc(n * 2), *d_ob = d_alloc(n * 2), *d_base = d_from(base, n * 4);
    MUST(cpu->swiglu_fwd(cpu, o16, a16, g16, dt, n, (int)n, (int64_t)n));
    GPU(gpu->swiglu_fwd(gpu, d_o, d_a, d_g, dt, n, (int)n, (int64_t)n));
    snprintf(name, sizeof name, "swiglu_fwd %s (16-bit, two roundings)", fn);
    compare16(name, d_o, o16, n, r, 1e-7, 8 * ulp);
    MUST(cpu->swiglu_bwd(cpu, o16, o16b, dy16, a16, g16, dt, n, (int)n, (int64_t)n));
    GPU(gpu->swiglu_bwd(gpu, d_o, d_ob, d_dy, d_a, d_g, dt, n, (int)n, (int64_t)n));
    snprintf(name, sizeof name, "swiglu_bwd da %s (16-bit)", fn);
    compare16(name, d_o, o16, n, r, 1e-7, 2 * ulp);
    snprintf(name, sizeof name, "swiglu_bwd dg %s (16-bit)", fn);
    compare16(name, d_ob, o16b, n, r, 1e-7, 2 * ulp);
    /* w1 x and w3 x as the halves of rows 2·cols apart (a fused (N, 2·d_ff)
     * projection): cols 1640 (16-byte vectors) and 1001 (scalar kernel) */
    for (int k = 0; k < 2; k++) {
        int cols = k ? 1001 : 1640, rows = 61;
        size_t nn = (size_t)rows * cols, wn = 2 * nn;
        float *wx = h_rand(wn, -6, 6), *dyx = h_rand(nn, -1, 1);
        uint16_t *w16 = h_half(wx, wn, r), *dyw16 = h_half(dyx, nn, r), *ow16 = malloc(nn * 2), *dw16 = malloc(wn * 2);
        void *d_w = d_from(w16, wn * 2), *d_dyw = d_from(dyw16, nn * 2), *d_ow = d_alloc(nn * 2);
        void *d_dw = d_from(w16, wn * 2); /* poison: the inputs' bits */
        MUST(cpu->swiglu_fwd(cpu, ow16, w16, w16 + cols, dt, nn, cols, 2 * cols));
        GPU(gpu->swiglu_fwd(gpu, d_ow, d_w, (uint16_t *)d_w + cols, dt, nn, cols, 2 * cols));
        snprintf(name, sizeof name, "swiglu_fwd %s rows 2·%d apart (16-bit)", fn, cols);
        compare16(name, d_ow, ow16, nn, r, 1e-7, 8 * ulp);
        memcpy(dw16, w16, wn * 2);
        MUST(cpu->swiglu_bwd(cpu, dw16, dw16 + cols, dyw16, w16, w16 + cols, dt, nn, cols, 2 * cols));
        GPU(gpu->swiglu_bwd(gpu, d_dw, (uint16_t *)d_dw + cols, d_dyw, d_w, (uint16_t *)d_w + cols, dt, nn, cols,
                            2 * cols));
        snprintf(name, sizeof name, "swiglu_bwd da, dg %s rows 2·%d apart (16-bit)", fn, cols);
        compare16(name, d_dw, dw16, wn, r, 1e-7, 2 * ulp);
        gpu->mem_free(gpu, d_w), gpu->mem_free(gpu, d_dyw), gpu->mem_free(gpu, d_ow), gpu->mem_free(gpu, d_dw);
        free(wx), free(dyx), free(w16), free(dyw16), free(ow16), free(dw16);
    }
    MUST(cpu->add(cpu, base, base, dy16, dt, n));
    GPU(gpu->add(gpu, d_base, d_base, d_dy, dt, n));
    snprintf(name, sizeof name, "add float32 + %s (exact)", fn);
    compare(name, d_base, base, n, 0, 0);
    gpu->mem_free(gpu, d_a), gpu->mem_free(gpu, d_g), gpu->mem_free(gpu, d_dy);
    gpu->mem_free(gpu, d_o), gpu->mem_free(gpu, d_ob), gpu->mem_free(gpu, d_base);
    free(a), free(g), free(dy), free(base), free(a16), free(g16), free(dy16), free(o16), free(o16b);

    /* rmsnorm: 16-bit output; backward from a 16-bit dout */
    int rows = 200, d = 2000;
    size_t nr = (size_t)rows * d;
    float *x = h_rand(nr, -2, 2), *w = h_rand(d, 0.5f, 1.5f), *dw = h_rand(d, -1, 1);
    float *rstd = malloc(sizeof(float) * rows), *dx = malloc(sizeof(float) * nr), *dout = h_rand(nr, -1, 1);
    uint16_t *y16 = malloc(nr * 2), *dout16 = h_half(dout, nr, r);
    void *d_x = d_from(x, nr * 4), *d_w = d_from(w, d * 4), *d_dw = d_from(dw, d * 4);
    void *d_rstd = d_alloc(rows * 4), *d_y = d_alloc(nr * 2), *d_dx = d_alloc(nr * 4), *d_dout = d_from(dout16, nr * 2);
    MUST(cpu->rmsnorm_fwd(cpu, y16, dt, rstd, x, w, rows, d, 1e-5f));
    GPU(gpu->rmsnorm_fwd(gpu, d_y, dt, d_rstd, d_x, d_w, rows, d, 1e-5f));
    snprintf(name, sizeof name, "rmsnorm_fwd out %s (16-bit)", fn);
    compare16(name, d_y, y16, nr, r, 1e-6, 2 * ulp);
    MUST(cpu->rmsnorm_bwd(cpu, dx, dw, dout16, dt, x, w, rstd, rows, d));
    GPU(gpu->rmsnorm_bwd(gpu, d_dx, d_dw, d_dout, dt, d_x, d_w, d_rstd, rows, d));
    snprintf(name, sizeof name, "rmsnorm_bwd dx (16-bit dout %s)", fn);
    compare(name, d_dx, dx, nr, 1e-5, 1e-4);
    snprintf(name, sizeof name, "rmsnorm_bwd dw (16-bit dout %s)", fn);
    compare(name, d_dw, dw, d, 1e-6 * sqrt(rows), 1e-5);
    gpu->mem_free(gpu, d_x), gpu->mem_free(gpu, d_w), gpu->mem_free(gpu, d_dw), gpu->mem_free(gpu, d_rstd);
    gpu->mem_free(gpu, d_y), gpu->mem_free(gpu, d_dx), gpu->mem_free(gpu, d_dout);
    free(x), free(w), free(dw), free(rstd), free(dx), free(dout), free(y16), free(dout16);

    /* causal softmax forward and backward in place: T 1000 and 1536 (the register kernels, 4 and 8
     * vectors per lane), 2056 (the vector kernel), 1001 (the scalar kernel) */
    static const int sm_shapes[4][2] = {{3, 1000}, {2, 1536}, {1, 2056}, {2, 1001}};
    for (int q = 0; q < 4; q++) {
        int batch = sm_shapes[q][0];
        T = sm_shapes[q][1];
        size_t ns = (size_t)batch * T * T;
        float *s = h_rand(ns, -8, 8), *dp = h_rand(ns, -1, 1);
        uint16_t *s16 = h_half(s, ns, r), *dp16 = h_half(dp, ns, r);
        void *d_s = d_from(s16, ns * 2), *d_dp = d_from(dp16, ns * 2);
        MUST(cpu->softmax_causal_fwd(cpu, s16, s16, dt, batch, T, 0));
        GPU(gpu->softmax_causal_fwd(gpu, d_s, d_s, dt, batch, T, 0));
        snprintf(name, sizeof name, "softmax_causal_fwd %s (16-bit, in place, T %d)", fn, T);
        compare16(name, d_s, s16, ns, r, 1e-7, 2 * ulp);
        /* the backward reads the cpu's probabilities on both sides */
        GPU(gpu->upload(gpu, d_s, s16, ns * 2));
        MUST(cpu->softmax_causal_bwd(cpu, dp16, dp16, s16, dt, batch, T, 0));
        GPU(gpu->softmax_causal_bwd(gpu, d_dp, d_dp, d_s, dt, batch, T, 0));
        snprintf(name, sizeof name, "softmax_causal_bwd %s (16-bit, in place, T %d)", fn, T);
        compare16(name, d_dp, dp16, ns, r, 1e-6, 2 * ulp);
        gpu->mem_free(gpu, d_s), gpu->mem_free(gpu, d_dp);
        free(s), free(dp), free(s16), free(dp16);
    }

    /* GEMMs writing 16-bit C (c_half), batched, with and without beta */
    static const int shapes[][6] = {{0, 1, 200, 333, 512, 1}, {1, 0, 100, 80, 100, 6}, {0, 0, 64, 96, 1000, 1}};
    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
        int ta = shapes[q][0], tb = shapes[q][1], m = shapes[q][2], nn = shapes[q][3], k = shapes[q][4],
            bt = shapes[q][5];
        for (int acc = 0; acc < 1; acc++) { /* c_half takes beta 0 only (backend.h) */
            size_t na = (size_t)m * k, nb = (size_t)k * nn, nc = (size_t)m * nn;
            lmk_gemm gm = {.trans_a = ta, .trans_b = tb, .m = m, .n = nn, .k = k, .batch = bt,
                           .stride_a = (int64_t)na, .stride_b = (int64_t)nb, .stride_c = (int64_t)nc,
                           .alpha = acc ? 0.5f : 1.0f, .beta = acc ? 1.0f : 0.0f, .in_round = r,
                           .out_round = r, .c_half = 1};
            float *fa = h_rand(na * bt, -1, 1), *fb = h_rand(nb * bt, -1, 1), *fc = h_rand(nc * bt, -1, 1);
            uint16_t *ha = h_half(fa, na * bt, r), *hb = h_half(fb, nb * bt, r), *hc = h_half(fc, nc * bt, r);
            void *d_ha = d_from(ha, na * bt * 2), *d_hb = d_from(hb, nb * bt * 2), *d_hc = d_from(hc, nc * bt * 2);
            MUST(cpu->gemm_half(cpu, &gm, hc, ha, 1, hb, 1));
            GPU(gpu->gemm_half(gpu, &gm, d_hc, d_ha, 1, d_hb, 1));
            gm.beta = 1.0f;
            CHECK(gpu->gemm_half(gpu, &gm, d_hc, d_ha, 1, d_hb, 1) == LMK_INVALID, "cuda c_half with beta 1 accepted");
            snprintf(name, sizeof name, "gemm %c%c m%d n%d k%d b%d %s, 16-bit C%s", ta ? 'T' : 'N',
                     tb ? 'T' : 'N', m, nn, k, bt, fn, acc ? " (beta 1)" : "");
            compare16(name, d_hc, hc, nc * bt, r, 1e-5 * sqrt(k), 2 * ulp);
            gpu->mem_free(gpu, d_ha), gpu->mem_free(gpu, d_hb), gpu->mem_free(gpu, d_hc);
            free(fa), free(fb), free(fc), free(ha), free(hb), free(hc);
        }
    }
}

static void test_cross_entropy(int n, int V, int alias)
{
    char name[96];
    size_t nv = (size_t)n * V;
    float *z = h_rand(nv, -8, 8), *dz = malloc(nv * sizeof *dz), loss = 0;
    int32_t *t = malloc(n * sizeof *t);
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)(test_next(&rng) % (uint64_t)V);
    t[0] = V - 1;
    void *d_z = d_from(z, nv * 4), *d_t = d_from(t, n * sizeof *t), *d_loss = d_alloc(4);
    void *d_dz = alias ? d_z : d_alloc(nv * 4);
    MUST(cpu->cross_entropy(cpu, &loss, dz, z, t, n, V, 2.0f));
    GPU(gpu->cross_entropy(gpu, d_loss, d_dz, d_z, d_t, n, V, 2.0f));
    snprintf(name, sizeof name, "cross_entropy loss (n %d, V %d%s)", n, V,
             alias ? ", dlogits aliases logits" : "");
    compare(name, d_loss, &loss, 1, 1e-6, 1e-5);
    compare("cross_entropy dlogits", d_dz, dz, nv, 1e-9, 1e-5);
    gpu->mem_free(gpu, d_z), gpu->mem_free(gpu, d_t), gpu->mem_free(gpu, d_loss);
    if (!alias)
        gpu->mem_free(gpu, d_dz);
    free(z), free(dz), free(t);
}

static void test_optimizer(void)
{
    size_t n = 1000003;
    float *g = h_rand(n, -1, 1);
    float sumsq = 1.5f;
    void *d_g = d_from(g, n * 4), *d_ss = d_from(&sumsq, 4), *d_f = d_alloc(4);
    MUST(cpu->sum_squares(cpu, &sumsq, g, n));
    GPU(gpu->sum_squares(gpu, d_ss, d_g, n));
    compare("sum_squares (n 1000003, +=)", d_ss, &sumsq, 1, 0, 1e-6);
    struct { float ss, max_norm, unscale; } cases[] = {
        {sumsq, 0.0f, 1.0f}, {sumsq, 1.0f, 1.0f}, {sumsq, 1e6f, 0.5f}, {INFINITY, 1.0f, 1.0f},
        {NAN, 0.0f, 1.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float f = -1.0f;
        MUST(gpu->upload(gpu, d_ss, &cases[i].ss, 4));
        MUST(cpu->clip_factor(cpu, &f, &cases[i].ss, cases[i].max_norm, cases[i].unscale));
        GPU(gpu->clip_factor(gpu, d_f, d_ss, cases[i].max_norm, cases[i].unscale));
        char name[64];
        snprintf(name, sizeof name, "clip_factor case %zu", i);
        compare(name, d_f, &f, 1, 0, 1e-6);
    }
    size_t na = 100003;
    float *p = h_rand(na, -1, 1), *m = h_rand(na, -0.1f, 0.1f), *v = h_rand(na, 0, 0.01f);
    void *d_p = d_from(p, na * 4), *d_m = d_from(m, na * 4), *d_v = d_from(v, na * 4);
    lmk_adamw_hp hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                       .weight_decay = 0.01f, .t = 3};
    float factors[] = {1.0f, 0.5f, 0.0f};
    for (int i = 0; i < 3; i++) {
        MUST(gpu->upload(gpu, d_f, &factors[i], 4));
        MUST(cpu->adamw(cpu, p, g, m, v, na, &hp, i ? &factors[i] : NULL));
        GPU(gpu->adamw(gpu, d_p, d_g, d_m, d_v, na, &hp, i ? d_f : NULL));
        hp.t++;
    }
    compare("adamw p (3 steps, factor 1/0.5/0 skip)", d_p, p, na, 1e-7, 1e-5);
    compare("adamw m", d_m, m, na, 1e-8, 1e-5);
    compare("adamw v", d_v, v, na, 1e-10, 1e-5);
    /* unaligned (scalar path) */
    MUST(cpu->adamw(cpu, p + 1, g, m + 1, v + 1, na - 1, &hp, NULL));
    GPU(gpu->adamw(gpu, (float *)d_p + 1, d_g, (float *)d_m + 1, (float *)d_v + 1, na - 1, &hp,
                   NULL));
    compare("adamw p (unaligned)", d_p, p, na, 1e-7, 1e-5);
    gpu->mem_free(gpu, d_g), gpu->mem_free(gpu, d_ss), gpu->mem_free(gpu, d_f);
    gpu->mem_free(gpu, d_p), gpu->mem_free(gpu, d_m), gpu->mem_free(gpu, d_v);
    free(g), free(p), free(m), free(v);
}

/* The multi-tensor ops against one call per tensor on the same backend: equal
 * bit for bit. Tensors of count sizes (the listed ones, then random up to
 * max_n: around the chunk and block boundaries, an empty one, one unaligned),
 * more than one launch takes when count > 512; two steps: host α_t without a
 * factor, then a device α_t with factor 0.5. */
static void test_optimizer_multi(size_t count, size_t max_n)
{
    static const size_t listed[] = {1, 3, 0, 768, 16384, 16385, 65537, 100003, 1000003,
                                    2100001, 4097, 7};
    size_t nl = sizeof listed / sizeof listed[0];
    size_t *n = malloc(count * sizeof *n), *off = malloc(count * sizeof *off), total = 0;
    lmk_opt_tensor *ta = malloc(count * sizeof *ta), *tb = malloc(count * sizeof *tb);
    if (!n || !off || !ta || !tb)
        exit(1);
    for (size_t i = 0; i < count; i++) {
        n[i] = i < nl ? listed[i] : 1 + (size_t)(test_next(&rng) % max_n);
        off[i] = total + (i == 5); /* tensor 5 starts one float past 16 bytes */
        total = (off[i] + n[i] + 3) / 4 * 4;
    }
    float *g = h_rand(total, -1, 1), *p = h_rand(total, -1, 1), *m = h_rand(total, -0.1f, 0.1f),
          *v = h_rand(total, 0, 0.01f);
    float *dg = d_from(g, total * 4), *dp[2], *dm[2], *dv[2];
    for (int k = 0; k < 2; k++) {
        dp[k] = d_from(p, total * 4);
        dm[k] = d_from(m, total * 4);
        dv[k] = d_from(v, total * 4);
    }
    for (size_t i = 0; i < count; i++) {
        ta[i] = (lmk_opt_tensor){dp[0] + off[i], dg + off[i], dm[0] + off[i], dv[0] + off[i], n[i], NULL};
        tb[i] = (lmk_opt_tensor){dp[1] + off[i], dg + off[i], dm[1] + off[i], dv[1] + off[i], n[i], NULL};
    }
    float init = 1.5f, half = 0.5f, alpha = 7.5e-4f;
    float *d_ss = d_from(&init, 4), *d_ss_multi = d_from(&init, 4), *d_f = d_from(&half, 4),
          *d_alpha = d_from(&alpha, 4);
    for (size_t i = 0; i < count; i++)
        GPU(gpu->sum_squares(gpu, d_ss, tb[i].g, n[i]));
    GPU(gpu->sum_squares_multi(gpu, d_ss_multi, tb, count));
    lmk_adamw_hp hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                       .weight_decay = 0.01f, .t = 1};
    for (int step = 0; step < 2; step++) {
        const float *f = step ? d_f : NULL;
        hp.alpha = step ? d_alpha : NULL;
        for (size_t i = 0; i < count; i++)
            GPU(gpu->adamw(gpu, ta[i].p, ta[i].g, ta[i].m, ta[i].v, n[i], &hp, f));
        GPU(gpu->adamw_multi(gpu, tb, count, &hp, f));
    }
    float *ha = malloc(total * 4), *hb = malloc(total * 4);
    float ss[2];
    if (!ha || !hb)
        exit(1);
    int same = 1;
    float *const *bufs[3] = {dp, dm, dv};
    for (int k = 0; k < 3; k++) {
        MUST(gpu->download(gpu, ha, bufs[k][0], total * 4));
        MUST(gpu->download(gpu, hb, bufs[k][1], total * 4));
        same &= memcmp(ha, hb, total * 4) == 0;
    }
    MUST(gpu->download(gpu, &ss[0], d_ss, 4));
    MUST(gpu->download(gpu, &ss[1], d_ss_multi, 4));
    MUST(gpu->download(gpu, ha, dp[1], total * 4));
    size_t changed = 0;
    for (size_t i = 0; i < total; i++)
        changed += ha[i] != p[i];
    printf("  %-44s n=%-9zu %s\n", "adamw_multi = adamw per tensor (p, m, v)", total,
           same ? "bitwise equal" : "FAIL");
    CHECK(same, "adamw_multi (%zu tensors) differs from per-tensor adamw", count);
    CHECK(changed > total / 2, "adamw_multi changed only %zu of %zu elements", changed, total);
    printf("  %-44s %zu tensors  %.9g vs %.9g  %s\n", "sum_squares_multi = per tensor", count,
           ss[1], ss[0], memcmp(&ss[0], &ss[1], 4) == 0 ? "bitwise equal" : "FAIL");
    CHECK(memcmp(&ss[0], &ss[1], 4) == 0 && ss[0] > init,
          "sum_squares_multi %.9g differs from per tensor %.9g", ss[1], ss[0]);
    for (int k = 0; k < 2; k++)
        gpu->mem_free(gpu, dp[k]), gpu->mem_free(gpu, dm[k]), gpu->mem_free(gpu, dv[k]);
    gpu->mem_free(gpu, dg), gpu->mem_free(gpu, d_ss), gpu->mem_free(gpu, d_ss_multi);
    gpu->mem_free(gpu, d_f), gpu->mem_free(gpu, d_alpha);
    free(n), free(off), free(ta), free(tb), free(g), free(p), free(m), free(v), free(ha), free(hb);
}

/* x rounded to TF32 as the tensor cores' conversion (cvt.rna: to nearest,
 * ties away from zero; the cpu's lmk_round rounds ties to even). */
static float tf32_rna(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

/* got (n) against float64 sums ref with magnitudes mag (Σ|terms|) of K
 * products of TF32-rounded inputs each: within the float32 accumulation's
 * own bound, 2·K·2⁻²⁴·mag, a bound a product of unrounded (or truncated)
 * inputs exceeds by far (≈ 2⁻¹²·mag). */
static void check_tf32_sums(const char *name, const float *got, const double *ref, const double *mag, size_t n,
                            int K)
{
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double lim = 2.0 * K * 0x1p-24 * mag[i] + 1e-30, e = fabs((double)got[i] - ref[i]);
        if (!(e <= lim) && !bad++)
            first = i;
        if (e / lim > worst)
            worst = e / lim;
    }
    printf("  %-44s n=%-9zu worst err/tol=%.3g  %s\n", name, n, worst, bad ? "FAIL" : "ok");
    CHECK(!bad, "%s: %zu of %zu outside tolerance; first at %zu: gpu %.9g ref %.9g", name, bad, n, first, got[first],
          ref[first]);
}

/* The float32 causal GEMMs (attn_causal_gemm with LMK_F32: TF32 products)
 * against float64 sums of the TF32-rounded inputs, as the 16-bit test
 * below: scores within the float32 accumulation's bound and untouched
 * beyond each row's tile end, P·V and Pᵀ·dO with NaN beyond the tile ends
 * (never read), the overlap launch equal to the plain one to the bit, and
 * the refusals. */
static void test_attn_causal_gemm_tf32(int batch, int T, int dh)
{
    int tile = gpu->attn_causal_block(gpu, LMK_F32, T, dh);
    const lmk_heads_at split = {1, dh};
    char name[128];
    CHECK(tile > 0 && T % tile == 0, "attn_causal_block(float32, T %d, dh %d) = %d", T, dh, tile);
    if (tile <= 0)
        return;
    size_t nq = (size_t)batch * T * dh, ns = (size_t)batch * T * T;
    float scale = (float)(1.0 / sqrt((double)dh));
    float *hq = h_rand(nq, -1, 1), *hk = h_rand(nq, -1, 1), *hp = h_rand(ns, 0, 1);
    float *hp_clean = malloc(ns * 4), *hc = malloc(nq * 4), *sent = malloc(ns * 4), *got = malloc(ns * 4);
    if (!hp_clean || !hc || !sent || !got)
        exit(1);
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                int end = (i / tile + 1) * tile;
                hp_clean[at] = j <= i ? hp[at] : 0;
                hp[at] = j <= i ? hp[at] : j < end ? 0 : NAN;
            }
    void *d_q = d_from(hq, nq * 4), *d_k = d_from(hk, nq * 4), *d_p = d_from(hp, ns * 4);
    void *d_s = d_alloc(ns * 4), *d_c = d_alloc(nq * 4), *d_c2 = d_alloc(nq * 4);

    size_t nr = ns > nq ? ns : nq; /* the scores, then P v */
    double *ref = malloc(nr * 8), *mag = malloc(nr * 8);
    if (!ref || !mag)
        exit(1);
    for (size_t bh = 0; bh < (size_t)batch; bh++) /* scores = scale · q kᵀ of the rounded inputs */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                double acc = 0.0, m = 0.0;
                for (int c = 0; c < dh; c++) {
                    double t = (double)tf32_rna(hq[(bh * T + i) * dh + c]) * tf32_rna(hk[(bh * T + j) * dh + c]);
                    acc += t, m += fabs(t);
                }
                ref[(bh * T + i) * T + j] = scale * acc, mag[(bh * T + i) * T + j] = scale * m;
            }
    for (size_t i = 0; i < ns; i++)
        sent[i] = 12345.0f; /* the scores kernel must not write beyond the tiles */
    MUST(gpu->upload(gpu, d_s, sent, ns * 4));
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_SCORES, d_s, d_q, d_k, split, LMK_F32, batch, T, dh, scale, 0));
    MUST(gpu->download(gpu, got, d_s, ns * 4));
    size_t outside_bad = 0;
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = (i / tile + 1) * tile; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                outside_bad += got[at] != 12345.0f;
                got[at] = 12345.0f, ref[at] = 12345.0, mag[at] = 0.0;
            }
    snprintf(name, sizeof name, "causal scores tf32 B·H %d T %d dh %d: untouched beyond the tiles", batch, T, dh);
    CHECK(outside_bad == 0, "%s: %zu entries written", name, outside_bad);
    snprintf(name, sizeof name, "causal scores tf32 B·H %d T %d dh %d", batch, T, dh);
    check_tf32_sums(name, got, ref, mag, ns, dh);

    for (int trans = 0; trans < 2; trans++) {
        const float alpha = trans ? scale : 1.0f;
        for (size_t bh = 0; bh < (size_t)batch; bh++) /* c = alpha · P v or alpha · Pᵀ v, rounded inputs */
            for (int i = 0; i < T; i++)
                for (int c = 0; c < dh; c++) {
                    double acc = 0.0, m = 0.0;
                    for (int j = 0; j < T; j++) {
                        float pe = trans ? hp_clean[(bh * T + j) * T + i] : hp_clean[(bh * T + i) * T + j];
                        double t = (double)tf32_rna(pe) * tf32_rna(hq[(bh * T + j) * dh + c]);
                        acc += t, m += fabs(t);
                    }
                    ref[(bh * T + i) * dh + c] = alpha * acc, mag[(bh * T + i) * dh + c] = alpha * m;
                }
        lmk_causal_gemm kind = trans ? LMK_CAUSAL_MIX_T : LMK_CAUSAL_MIX;
        GPU(gpu->attn_causal_gemm(gpu, kind, d_c, d_p, d_q, split, LMK_F32, batch, T, dh, alpha, 0));
        MUST(gpu->download(gpu, hc, d_c, nq * 4));
        snprintf(name, sizeof name, "causal %s tf32 B·H %d T %d dh %d", trans ? "P^T v" : "P v", batch, T, dh);
        check_tf32_sums(name, hc, ref, mag, nq, T);
        GPU(gpu->mem_zero(gpu, d_c2, nq * 4));
        GPU(gpu->attn_causal_gemm(gpu, kind, d_c2, d_p, d_q, split, LMK_F32, batch, T, dh, alpha, 1));
        GPU(gpu->lane_join(gpu));
        snprintf(name, sizeof name, "causal %s tf32 overlap launch = plain, bitwise", trans ? "P^T v" : "P v");
        CHECK(same_bytes(d_c, d_c2, nq * 4), "%s", name);
        printf("  %-44s %s\n", name, same_bytes(d_c, d_c2, nq * 4) ? "ok" : "FAIL");
    }
    CHECK(gpu->attn_causal_block(gpu, LMK_F32, T + 1, dh) == 0, "attn_causal_block(float32) accepts T %d", T + 1);
    CHECK(gpu->attn_causal_block(gpu, LMK_F32, T, 72) == 0, "attn_causal_block(float32) accepts dh 72");
    CHECK(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX, (char *)d_c + 16, d_p, d_q, split, LMK_F32, batch, T, dh, 1.0f,
                                0) == LMK_INVALID,
          "attn_causal_gemm(float32) accepts c 16 bytes off 32-byte alignment");
    CHECK(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX, d_c, (char *)d_p + 4, d_q, split, LMK_F32, batch, T, dh, 1.0f,
                                0) == LMK_INVALID,
          "attn_causal_gemm(float32) accepts a misaligned a");
    gpu->mem_free(gpu, d_q), gpu->mem_free(gpu, d_k), gpu->mem_free(gpu, d_p);
    gpu->mem_free(gpu, d_s), gpu->mem_free(gpu, d_c), gpu->mem_free(gpu, d_c2);
    free(hq), free(hk), free(hp), free(hp_clean), free(hc), free(sent), free(got), free(ref), free(mag);
}

/* attn_scores_softmax and attn_dp_softmax_bwd for float32 tensors (TF32
 * products): p against the unfused float32 path (SCORES, softmax_causal_fwd)
 * within a few float32 ulps, zeros to each tile's end and nothing beyond,
 * o against MIX of the fused p; ds against float64 p ⊙ (dp − D) within the
 * TF32 products' tolerance, dq against MIX of the fused ds. o (and, in the
 * backward, dout) in the merged (nb, T, heads, dh) layout. */
static void test_attn_softmax_fused_tf32(int nb, int heads, int T, int dh)
{
    int batch = nb * heads, tile = gpu->attn_causal_block(gpu, LMK_F32, T, dh);
    const lmk_heads_at split = {1, dh}, merged = {heads, (int64_t)heads * dh};
    char name[160];
    CHECK(tile > 0, "attn_causal_block(float32, T %d, dh %d) = %d", T, dh, tile);
    if (tile <= 0)
        return;
    size_t nq = (size_t)batch * T * dh, ns = (size_t)batch * T * T;
    float scale = (float)(1.0 / sqrt((double)dh)), sentinel = 12345.0f;
    float *hq = h_rand(nq, -2, 2), *hk = h_rand(nq, -2, 2), *hv = h_rand(nq, -1, 1), *hdo = h_rand(nq, -1, 1);
    float *ho = h_rand(nq, -1, 1), *sent = malloc(ns * 4), *got = malloc(ns * 4), *hp = malloc(ns * 4);
    if (!sent || !got || !hp)
        exit(1);
    for (size_t i = 0; i < ns; i++)
        sent[i] = sentinel;
    void *d_q = d_from(hq, nq * 4), *d_k = d_from(hk, nq * 4), *d_v = d_from(hv, nq * 4);
    void *d_do = d_from(hdo, nq * 4), *d_o = d_from(ho, nq * 4), *d_ref = d_from(sent, ns * 4);
    void *d_p = d_from(sent, ns * 4), *d_out = d_alloc(nq * 4), *d_out_ref = d_alloc(nq * 4);
    float *href = malloc(nq * 4);
    if (!href)
        exit(1);

    /* forward: o merged, then o = p v from the fused p (MIX reads split c: compare through a split copy) */
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_SCORES, d_ref, d_q, d_k, split, LMK_F32, batch, T, dh, scale, 0));
    GPU(gpu->softmax_causal_fwd(gpu, d_ref, d_ref, LMK_F32, batch, T, tile));
    GPU(gpu->attn_scores_softmax(gpu, d_p, d_out, merged, d_q, d_k, d_v, LMK_F32, batch, T, dh, scale));
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX, d_out_ref, d_p, d_v, split, LMK_F32, batch, T, dh, 1.0f, 0));
    MUST(gpu->download(gpu, href, d_out_ref, nq * 4));
    float *merged_ref = malloc(nq * 4);
    if (!merged_ref)
        exit(1);
    for (size_t bh = 0; bh < (size_t)batch; bh++) /* split (bh, T, dh) → merged (n, T, heads, dh) */
        for (int i = 0; i < T; i++)
            memcpy(merged_ref + (((bh / heads) * T + i) * heads + bh % heads) * dh, href + (bh * T + i) * dh,
                   (size_t)dh * 4);
    snprintf(name, sizeof name, "fused scores+softmax+values tf32 B·H %d T %d dh %d: o = p v", batch, T, dh);
    compare(name, d_out, merged_ref, nq, 1e-6 * sqrt(T), 1e-5);
    MUST(gpu->download(gpu, got, d_p, ns * 4));
    MUST(gpu->download(gpu, hp, d_ref, ns * 4));
    size_t outside_bad = 0, upper_bad = 0;
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = i + 1; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                if (j >= (i / tile + 1) * tile) {
                    outside_bad += got[at] != sentinel;
                    got[at] = hp[at] = 0;
                } else {
                    upper_bad += got[at] != 0.0f;
                }
            }
    snprintf(name, sizeof name, "fused scores+softmax tf32 B·H %d T %d dh %d: zeros to the tile end, the rest untouched",
             batch, T, dh);
    CHECK(outside_bad == 0 && upper_bad == 0, "%s: %zu written beyond, %zu non-zero above the diagonal", name,
          outside_bad, upper_bad);
    printf("  %-44s %s\n", name, outside_bad == 0 && upper_bad == 0 ? "ok" : "FAIL");
    MUST(gpu->upload(gpu, d_p, got, ns * 4));
    snprintf(name, sizeof name, "fused scores+softmax tf32 B·H %d T %d dh %d = unfused", batch, T, dh);
    compare(name, d_p, hp, ns, 1e-9, 4e-6);

    /* backward: p = the unfused probabilities, NaN beyond the tiles; dout merged, o merged */
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = (i / tile + 1) * tile; j < T; j++)
                hp[(bh * T + i) * T + j] = NAN;
    MUST(gpu->upload(gpu, d_p, hp, ns * 4));
    MUST(gpu->upload(gpu, d_ref, sent, ns * 4));
    GPU(gpu->attn_dp_softmax_bwd(gpu, d_ref, d_out, d_do, merged, d_v, d_k, d_p, d_o, merged, LMK_F32, batch, T, dh,
                                 scale));
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX, d_out_ref, d_ref, d_k, split, LMK_F32, batch, T, dh, scale, 0));
    MUST(gpu->download(gpu, href, d_out_ref, nq * 4));
    snprintf(name, sizeof name, "fused dP+softmax+dQ bwd tf32 B·H %d T %d dh %d: dq = scale ds k", batch, T, dh);
    compare(name, d_out, href, nq, 1e-6 * sqrt(T), 1e-5);
    MUST(gpu->download(gpu, got, d_ref, ns * 4));
    size_t bad = 0, outside = 0, upper = 0, first = 0;
    double worst = 0.0;
    for (size_t bh = 0; bh < (size_t)batch; bh++) {
        size_t n = bh / heads, h = bh % heads;
        for (int i = 0; i < T; i++) {
            size_t row = ((n * T + i) * heads + h) * dh; /* dout and o, merged */
            double D = 0.0;
            for (int c = 0; c < dh; c++)
                D += (double)hdo[row + c] * ho[row + c];
            for (int j = 0; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                if (j > i) {
                    if (j >= (i / tile + 1) * tile)
                        outside += got[at] != sentinel;
                    else
                        upper += got[at] != 0.0f;
                    continue;
                }
                double dp = 0.0, mag = 0.0;
                for (int c = 0; c < dh; c++) {
                    double t = (double)hdo[row + c] * hv[(bh * T + j) * dh + c];
                    dp += t, mag += fabs(t);
                }
                double ref = hp[at] * (dp - D);
                double lim = fabs(hp[at]) * (2e-3 * mag + 1e-5 * fabs(D)) + 1e-30; /* TF32 products of dp */
                double e = fabs(got[at] - ref);
                if (!(e <= lim) && !bad++)
                    first = at;
                if (e / lim > worst)
                    worst = e / lim;
            }
        }
    }
    snprintf(name, sizeof name, "fused dP+softmax bwd tf32 B·H %d (H %d) T %d dh %d", batch, heads, T, dh);
    printf("  %-44s worst err/tol=%.3g  %s\n", name, worst, bad || outside || upper ? "FAIL" : "ok");
    CHECK(!bad, "%s: %zu entries outside tolerance, first at %zu (gpu %.9g)", name, bad, first, got[first]);
    CHECK(!outside && !upper, "%s: %zu written beyond the tiles, %zu non-zero above the diagonal", name, outside,
          upper);
    gpu->mem_free(gpu, d_q), gpu->mem_free(gpu, d_k), gpu->mem_free(gpu, d_v), gpu->mem_free(gpu, d_do);
    gpu->mem_free(gpu, d_o), gpu->mem_free(gpu, d_ref), gpu->mem_free(gpu, d_p);
    gpu->mem_free(gpu, d_out), gpu->mem_free(gpu, d_out_ref);
    free(hq), free(hk), free(hv), free(hdo), free(ho), free(sent), free(got), free(hp), free(href), free(merged_ref);
}

/* The naive attention's one-launch causal GEMMs (attn_causal_gemm) against
 * the cpu's 16-bit GEMM on the whole matrices: scores (every entry of the
 * causal tiles within two ulps; every entry beyond a row's tile end left as
 * it was), P·V and Pᵀ·dO (a with zeros above the diagonal inside the
 * tiles and NaN beyond each row's tile end, which must not be read). Then
 * an overlap launch (second stream) equal to the plain one to the bit, and
 * the shapes the backend refuses. */
static void test_attn_causal_gemm(lmk_round r, int batch, int T, int dh)
{
    lmk_dtype dt = r == LMK_ROUND_BF16 ? LMK_BF16 : LMK_F16;
    double ulp = r == LMK_ROUND_BF16 ? 0x1p-8 : 0x1p-11;
    int tile = gpu->attn_causal_block(gpu, dt, T, dh);
    const lmk_heads_at split = {1, dh};
    char name[128];
    CHECK(tile > 0 && T % tile == 0, "attn_causal_block(%s, T %d, dh %d) = %d", round_name(r), T, dh, tile);
    if (tile <= 0)
        return;
    size_t nq = (size_t)batch * T * dh, ns = (size_t)batch * T * T;
    float scale = (float)(1.0 / sqrt((double)dh));
    float *fq = h_rand(nq, -1, 1), *fk = h_rand(nq, -1, 1), *fp = h_rand(ns, 0, 1);
    uint16_t *hq = h_half(fq, nq, r), *hk = h_half(fk, nq, r);
    uint16_t *hp = h_half(fp, ns, r), *hp_clean = malloc(ns * 2), *hs = malloc(ns * 2), *hc = malloc(nq * 2);
    uint16_t poison = r == LMK_ROUND_BF16 ? 0x7fc1 : 0x7e01; /* a NaN of each format */
    if (!hp_clean || !hs || !hc)
        exit(1);
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                int end = (i / tile + 1) * tile;
                hp_clean[at] = j <= i ? hp[at] : 0;
                hp[at] = j <= i ? hp[at] : j < end ? 0 : poison;
            }
    void *d_q = d_from(hq, nq * 2), *d_k = d_from(hk, nq * 2), *d_p = d_from(hp, ns * 2);
    void *d_s = d_alloc(ns * 2), *d_c = d_alloc(nq * 2), *d_c2 = d_alloc(nq * 2);

    /* scores = scale · q kᵀ */
    lmk_gemm gs = {.trans_b = 1, .m = T, .n = T, .k = dh, .batch = batch, .stride_a = T * dh,
                   .stride_b = T * dh, .stride_c = (int64_t)T * T, .alpha = scale, .in_round = r,
                   .out_round = r, .c_half = 1};
    MUST(cpu->gemm_half(cpu, &gs, hs, hq, 1, hk, 1));
    uint16_t *sent = malloc(ns * 2), *got = malloc(ns * 2);
    if (!sent || !got)
        exit(1);
    for (size_t i = 0; i < ns; i++)
        sent[i] = 0x3c00; /* a sentinel: the scores kernel must not write beyond the tiles */
    MUST(gpu->upload(gpu, d_s, sent, ns * 2));
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_SCORES, d_s, d_q, d_k, split, dt, batch, T, dh, scale, 0));
    MUST(gpu->download(gpu, got, d_s, ns * 2));
    size_t outside_bad = 0;
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = (i / tile + 1) * tile; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                outside_bad += got[at] != 0x3c00;
                hs[at] = 0x3c00; /* the reference beyond the tiles: the sentinel */
            }
    snprintf(name, sizeof name, "causal scores %s B·H %d T %d dh %d: untouched beyond the tiles", round_name(r),
             batch, T, dh);
    CHECK(outside_bad == 0, "%s: %zu entries written", name, outside_bad);
    snprintf(name, sizeof name, "causal scores %s B·H %d T %d dh %d", round_name(r), batch, T, dh);
    compare16(name, d_s, hs, ns, r, 1e-5 * sqrt(dh), 2 * ulp);

    /* c = P · v (v: the q tensor), then Pᵀ · v */
    for (int trans = 0; trans < 2; trans++) {
        lmk_gemm gm = {.trans_a = trans, .m = T, .n = dh, .k = T, .batch = batch, .stride_a = (int64_t)T * T,
                       .stride_b = T * dh, .stride_c = T * dh, .alpha = trans ? scale : 1.0f, .in_round = r,
                       .out_round = r, .c_half = 1};
        MUST(cpu->gemm_half(cpu, &gm, hc, hp_clean, 1, hq, 1));
        lmk_causal_gemm kind = trans ? LMK_CAUSAL_MIX_T : LMK_CAUSAL_MIX;
        GPU(gpu->attn_causal_gemm(gpu, kind, d_c, d_p, d_q, split, dt, batch, T, dh, gm.alpha, 0));
        snprintf(name, sizeof name, "causal %s %s B·H %d T %d dh %d", trans ? "P^T v" : "P v", round_name(r), batch,
                 T, dh);
        compare16(name, d_c, hc, nq, r, 1e-5 * sqrt(T), 2 * ulp);
        /* the same on the second stream (overlap), read after a join */
        GPU(gpu->mem_zero(gpu, d_c2, nq * 2));
        GPU(gpu->attn_causal_gemm(gpu, kind, d_c2, d_p, d_q, split, dt, batch, T, dh, gm.alpha, 1));
        GPU(gpu->lane_join(gpu));
        snprintf(name, sizeof name, "causal %s %s overlap launch = plain, bitwise", trans ? "P^T v" : "P v",
                 round_name(r));
        CHECK(same_bytes(d_c, d_c2, nq * 2), "%s", name);
        printf("  %-44s %s\n", name, same_bytes(d_c, d_c2, nq * 2) ? "ok" : "FAIL");
    }
    /* refused: T not a multiple of the tile, an unsupported head dim, misaligned */
    CHECK(gpu->attn_causal_block(gpu, dt, T + 1, dh) == 0, "attn_causal_block accepts T %d", T + 1);
    CHECK(gpu->attn_causal_block(gpu, dt, T, 72) == 0, "attn_causal_block accepts dh 72");
    CHECK(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX, d_c, (char *)d_p + 2, d_q, split, dt, batch, T, dh, 1.0f, 0) ==
              LMK_INVALID,
          "attn_causal_gemm accepts a misaligned a");
    gpu->mem_free(gpu, d_q), gpu->mem_free(gpu, d_k), gpu->mem_free(gpu, d_p);
    gpu->mem_free(gpu, d_s), gpu->mem_free(gpu, d_c), gpu->mem_free(gpu, d_c2);
    free(fq), free(fk), free(fp), free(hq), free(hk), free(hp), free(hp_clean), free(hs), free(hc);
    free(sent), free(got);
}

/* The causal softmax fused into the scores GEMM and its backward into the
 * dP GEMM (attn_scores_softmax, attn_dp_softmax_bwd). Forward: p against
 * the unfused cuda path (attn_causal_gemm SCORES, then softmax_causal_fwd
 * with zero_block = the tile): the same rounded scores, the row sums added
 * in another order, so within one ulp; every entry beyond a row's tile end
 * left as it was; o against attn_causal_gemm MIX of the fused p and v.
 * Backward: ds against the contract in double on the host,
 * ds = p (round(dout vᵀ) − dout · o), with p NaN beyond each row's tile end
 * (must not be read), o in the merged (B, T, H, dh) layout (heads H); the
 * zeros at i < j < end(i) and the entries beyond left as they were; dq
 * against attn_causal_gemm MIX of the fused ds and k. */
static void test_attn_softmax_fused(lmk_round r, int nb, int heads, int T, int dh)
{
    lmk_dtype dt = r == LMK_ROUND_BF16 ? LMK_BF16 : LMK_F16;
    double ulp = r == LMK_ROUND_BF16 ? 0x1p-8 : 0x1p-11;
    int batch = nb * heads, tile = gpu->attn_causal_block(gpu, dt, T, dh);
    const lmk_heads_at split = {1, dh}, merged = {heads, (int64_t)heads * dh};
    char name[160];
    CHECK(tile > 0, "attn_causal_block(%s, T %d, dh %d) = %d", round_name(r), T, dh, tile);
    if (tile <= 0 || !gpu->attn_scores_softmax || !gpu->attn_dp_softmax_bwd) {
        CHECK(0, "the cuda backend lacks attn_scores_softmax / attn_dp_softmax_bwd");
        return;
    }
    size_t nq = (size_t)batch * T * dh, ns = (size_t)batch * T * T;
    float scale = (float)(1.0 / sqrt((double)dh));
    /* scores of a few units: the softmax has large and tiny entries */
    float *fq = h_rand(nq, -2, 2), *fk = h_rand(nq, -2, 2), *fv = h_rand(nq, -1, 1), *fdo = h_rand(nq, -1, 1),
          *fo = h_rand(nq, -1, 1);
    uint16_t *hq = h_half(fq, nq, r), *hk = h_half(fk, nq, r), *hv = h_half(fv, nq, r), *hdo = h_half(fdo, nq, r),
             *ho = h_half(fo, nq, r);
    uint16_t *sent = malloc(ns * 2), *got = malloc(ns * 2), *hp = malloc(ns * 2);
    float *p32 = malloc(ns * 4), *ds32 = malloc(ns * 4), *v32 = malloc(nq * 4), *do32 = malloc(nq * 4),
          *o32 = malloc(nq * 4), *dpr = malloc((size_t)T * 4);
    uint16_t *dpr16 = malloc((size_t)T * 2);
    if (!sent || !got || !hp || !p32 || !ds32 || !v32 || !do32 || !o32 || !dpr || !dpr16)
        exit(1);
    for (size_t i = 0; i < ns; i++)
        sent[i] = 0x3c00;
    void *d_q = d_from(hq, nq * 2), *d_k = d_from(hk, nq * 2), *d_v = d_from(hv, nq * 2), *d_do = d_from(hdo, nq * 2);
    void *d_o = d_from(ho, nq * 2), *d_ref = d_from(sent, ns * 2), *d_p = d_from(sent, ns * 2);
    void *d_out = d_alloc(nq * 2), *d_out_ref = d_alloc(nq * 2);
    uint16_t *hout = malloc(nq * 2);
    if (!hout)
        exit(1);

    /* forward */
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_SCORES, d_ref, d_q, d_k, split, dt, batch, T, dh, scale, 0));
    GPU(gpu->softmax_causal_fwd(gpu, d_ref, d_ref, dt, batch, T, tile));
    GPU(gpu->attn_scores_softmax(gpu, d_p, d_out, split, d_q, d_k, d_v, dt, batch, T, dh, scale));
    /* o = p v from the fused p */
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX, d_out_ref, d_p, d_v, split, dt, batch, T, dh, 1.0f, 0));
    MUST(gpu->download(gpu, hout, d_out_ref, nq * 2));
    snprintf(name, sizeof name, "fused scores+softmax+values %s B·H %d T %d dh %d: o = p v", round_name(r), batch, T,
             dh);
    compare16(name, d_out, hout, nq, r, 1e-5 * sqrt(T), 2 * ulp);
    MUST(gpu->download(gpu, got, d_p, ns * 2));
    MUST(gpu->download(gpu, hp, d_ref, ns * 2));
    size_t outside_bad = 0, upper_bad = 0;
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = i + 1; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                if (j >= (i / tile + 1) * tile) {
                    outside_bad += got[at] != 0x3c00;
                    got[at] = hp[at] = 0; /* compared below as equal */
                } else {
                    upper_bad += (got[at] & 0x7fff) != 0;
                }
            }
    snprintf(name, sizeof name, "fused scores+softmax %s B·H %d T %d dh %d: zeros to the tile end, the rest untouched",
             round_name(r), batch, T, dh);
    CHECK(outside_bad == 0 && upper_bad == 0, "%s: %zu written beyond, %zu non-zero above the diagonal", name,
          outside_bad, upper_bad);
    printf("  %-44s %s\n", name, outside_bad == 0 && upper_bad == 0 ? "ok" : "FAIL");
    MUST(gpu->upload(gpu, d_p, got, ns * 2));
    snprintf(name, sizeof name, "fused scores+softmax %s B·H %d T %d dh %d = unfused", round_name(r), batch, T, dh);
    compare16(name, d_p, hp, ns, r, 1e-7, 2 * ulp);

    /* backward: p = the unfused probabilities, NaN beyond the tiles */
    uint16_t poison = r == LMK_ROUND_BF16 ? 0x7fc1 : 0x7e01;
    for (size_t bh = 0; bh < (size_t)batch; bh++)
        for (int i = 0; i < T; i++)
            for (int j = (i / tile + 1) * tile; j < T; j++)
                hp[(bh * T + i) * T + j] = poison;
    MUST(gpu->upload(gpu, d_p, hp, ns * 2));
    MUST(gpu->upload(gpu, d_ref, sent, ns * 2));
    GPU(gpu->attn_dp_softmax_bwd(gpu, d_ref, d_out, d_do, split, d_v, d_k, d_p, d_o, merged, dt, batch, T, dh,
                                 scale));
    /* dq = scale · ds k from the fused ds */
    GPU(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX, d_out_ref, d_ref, d_k, split, dt, batch, T, dh, scale, 0));
    MUST(gpu->download(gpu, hout, d_out_ref, nq * 2));
    snprintf(name, sizeof name, "fused dP+softmax+dQ bwd %s B·H %d T %d dh %d: dq = scale ds k", round_name(r), batch,
             T, dh);
    compare16(name, d_out, hout, nq, r, 1e-6 * sqrt(T), 2 * ulp);
    MUST(gpu->download(gpu, got, d_ref, ns * 2));
    MUST(cpu->cast_float(cpu, p32, hp, ns, r));
    MUST(cpu->cast_float(cpu, ds32, got, ns, r));
    MUST(cpu->cast_float(cpu, v32, hv, nq, r));
    MUST(cpu->cast_float(cpu, do32, hdo, nq, r));
    MUST(cpu->cast_float(cpu, o32, ho, nq, r)); /* (nb, T, heads, dh) */
    size_t bad = 0, outside = 0, upper = 0, first = 0;
    double worst = 0.0;
    for (size_t bh = 0; bh < (size_t)batch; bh++) {
        size_t n = bh / heads, h = bh % heads;
        for (int i = 0; i < T; i++) {
            const float *dor = do32 + (bh * T + i) * dh, *orow = o32 + ((n * T + i) * heads + h) * dh;
            double D = 0.0;
            for (int c = 0; c < dh; c++)
                D += (double)dor[c] * orow[c];
            for (int j = 0; j <= i; j++) {
                double acc = 0.0;
                for (int c = 0; c < dh; c++)
                    acc += (double)dor[c] * v32[(bh * T + j) * dh + c];
                dpr[j] = (float)acc;
            }
            MUST(cpu->cast_half(cpu, dpr16, dpr, (size_t)i + 1, r));
            MUST(cpu->cast_float(cpu, dpr, dpr16, (size_t)i + 1, r));
            for (int j = 0; j < T; j++) {
                size_t at = (bh * T + i) * T + j;
                if (j > i) {
                    if (j >= (i / tile + 1) * tile)
                        outside += got[at] != 0x3c00;
                    else
                        upper += (got[at] & 0x7fff) != 0;
                    continue;
                }
                double ref = p32[at] * (dpr[j] - D);
                /* one rounding of ds, and dp's rounding may fall the other way (float32 vs double sums) */
                double lim = 2 * ulp * fabs(ref) + fabs(p32[at]) * 2 * ulp * fabs(dpr[j]) + 1e-6 * fabs(p32[at]) +
                             (r == LMK_ROUND_FP16 ? 0x1p-24 : 1e-30); /* fp16: the subnormals' spacing */
                double e = fabs(ds32[at] - ref);
                if (!(e <= lim) && !bad++)
                    first = at;
                if (e / lim > worst)
                    worst = e / lim;
            }
        }
    }
    snprintf(name, sizeof name, "fused dP+softmax bwd %s B·H %d (H %d) T %d dh %d", round_name(r), batch, heads, T,
             dh);
    printf("  %-44s worst err/tol=%.3g  %s\n", name, worst, bad || outside || upper ? "FAIL" : "ok");
    CHECK(!bad, "%s: %zu entries outside tolerance, first at %zu (gpu %.9g)", name, bad, first, ds32[first]);
    CHECK(!outside && !upper, "%s: %zu written beyond the tiles, %zu non-zero above the diagonal", name, outside,
          upper);

    /* refused: a misaligned o or p, o rows shorter than heads · dh, batch not a multiple of heads */
    const lmk_heads_at short_rows = {heads, (int64_t)heads * dh - 8};
    CHECK(gpu->attn_scores_softmax(gpu, d_p, (char *)d_out + 2, split, d_q, d_k, d_v, dt, batch, T, dh, scale) ==
              LMK_INVALID,
          "attn_scores_softmax accepts a misaligned o");
    CHECK(gpu->attn_dp_softmax_bwd(gpu, d_ref, d_out, d_do, split, d_v, d_k, (char *)d_p + 2, d_o, merged, dt, batch,
                                   T, dh, scale) == LMK_INVALID,
          "attn_dp_softmax_bwd accepts a misaligned p");
    CHECK(gpu->attn_dp_softmax_bwd(gpu, d_ref, d_out, d_do, split, d_v, d_k, d_p, d_o, short_rows, dt, batch, T, dh,
                                   scale) == LMK_INVALID,
          "attn_dp_softmax_bwd accepts o's ld < heads · dh");
    if (heads > 1)
        CHECK(gpu->attn_dp_softmax_bwd(gpu, d_ref, d_out, d_do, split, d_v, d_k, d_p, d_o, merged, dt, batch - 1, T,
                                       dh, scale) == LMK_INVALID,
              "attn_dp_softmax_bwd accepts batch %d with %d heads", batch - 1, heads);
    gpu->mem_free(gpu, d_q), gpu->mem_free(gpu, d_k), gpu->mem_free(gpu, d_v), gpu->mem_free(gpu, d_do);
    gpu->mem_free(gpu, d_o), gpu->mem_free(gpu, d_ref), gpu->mem_free(gpu, d_p);
    gpu->mem_free(gpu, d_out), gpu->mem_free(gpu, d_out_ref), free(hout);
    free(fq), free(fk), free(fv), free(fdo), free(fo), free(hq), free(hk), free(hv), free(hdo), free(ho);
    free(sent), free(got), free(hp), free(p32), free(ds32), free(v32), free(do32), free(o32), free(dpr), free(dpr16);
}

/* (nb·heads, T, dh) contiguous 16-bit matrices ↔ the layout {heads, ld}
 * (backend.h lmk_heads_at; rows of ld elements, those past heads · dh
 * left as they are). */
static void heads_to_layout(uint16_t *out, const uint16_t *split, int nb, int heads, int T, int dh, int64_t ld)
{
    for (int n = 0; n < nb; n++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < T; i++)
                memcpy(out + ((size_t)n * T + i) * ld + (size_t)h * dh,
                       split + (((size_t)n * heads + h) * T + i) * dh, (size_t)dh * 2);
}

static void heads_from_layout(uint16_t *split, const uint16_t *in, int nb, int heads, int T, int dh, int64_t ld)
{
    for (int n = 0; n < nb; n++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < T; i++)
                memcpy(split + (((size_t)n * heads + h) * T + i) * dh,
                       in + ((size_t)n * T + i) * ld + (size_t)h * dh, (size_t)dh * 2);
}

/* The naive attention's kernels with their (T, dh) operand in another
 * layout than contiguous (lmk_heads_at {heads, ld}: the merged (B, T, H,
 * dh) activations with ld = heads · dh, and rows padded by 8 elements):
 * bit for bit what they give on the same matrices stored contiguously:
 * attn_causal_gemm's bm (scores, P·V, Pᵀ·dO), attn_scores_softmax's o (p
 * too), attn_dp_softmax_bwd's dout (ds and dq). Then the layouts refused. */
static void test_attn_heads_layout(lmk_round r, int nb, int heads, int T, int dh)
{
    lmk_dtype dt = r == LMK_ROUND_BF16 ? LMK_BF16 : LMK_F16;
    int batch = nb * heads, tile = gpu->attn_causal_block(gpu, dt, T, dh);
    char name[160];
    CHECK(tile > 0 && gpu->attn_scores_softmax && gpu->attn_dp_softmax_bwd,
          "attn_causal_block(%s, T %d, dh %d) = %d, or the fused kernels missing", round_name(r), T, dh, tile);
    if (tile <= 0 || !gpu->attn_scores_softmax || !gpu->attn_dp_softmax_bwd)
        return;
    const lmk_heads_at split = {1, dh};
    size_t nq = (size_t)batch * T * dh, ns = (size_t)batch * T * T;
    float scale = (float)(1.0 / sqrt((double)dh));
    float *fx = h_rand(nq, -2, 2), *fy = h_rand(nq, -2, 2), *fz = h_rand(nq, -1, 1), *fp = h_rand(ns, 0, 1);
    uint16_t *hx = h_half(fx, nq, r), *hy = h_half(fy, nq, r), *hz = h_half(fz, nq, r), *hp = h_half(fp, ns, r);
    for (size_t bh = 0; bh < (size_t)batch; bh++) /* p: zeros above the diagonal to each row's tile end */
        for (int i = 0; i < T; i++)
            for (int j = i + 1; j < T; j++)
                hp[(bh * T + i) * T + j] = 0;
    void *d_x = d_from(hx, nq * 2), *d_y = d_from(hy, nq * 2), *d_z = d_from(hz, nq * 2), *d_p = d_from(hp, ns * 2);
    void *d_c = d_alloc(nq * 2), *d_c2 = d_alloc(nq * 2), *d_s = d_alloc(ns * 2), *d_s2 = d_alloc(ns * 2);
    void *d_p2 = d_alloc(ns * 2);
    for (int pad = 0; pad <= 8; pad += 8) {
        const lmk_heads_at at = {heads, (int64_t)heads * dh + pad};
        size_t nl = (size_t)nb * T * at.ld;
        uint16_t *hl = calloc(nl, 2), *hback = malloc(nq * 2), *hsplit = malloc(nq * 2);
        if (!hl || !hback || !hsplit)
            exit(1);
        heads_to_layout(hl, hz, nb, heads, T, dh, at.ld);
        void *d_zl = d_from(hl, nl * 2), *d_ol = d_alloc(nl * 2);

        /* attn_causal_gemm with bm = z in the layout */
        static const lmk_causal_gemm kinds[3] = {LMK_CAUSAL_SCORES, LMK_CAUSAL_MIX, LMK_CAUSAL_MIX_T};
        static const char *const kind_names[3] = {"scores", "P v", "P^T dout"};
        for (int k = 0; k < 3; k++) {
            int tt = kinds[k] == LMK_CAUSAL_SCORES;
            void *c = tt ? d_s : d_c, *c2 = tt ? d_s2 : d_c2, *a = tt ? d_x : d_p;
            size_t bytes = tt ? ns * 2 : nq * 2;
            GPU(gpu->mem_zero(gpu, c, bytes));
            GPU(gpu->mem_zero(gpu, c2, bytes));
            GPU(gpu->attn_causal_gemm(gpu, kinds[k], c, a, d_z, split, dt, batch, T, dh, scale, 0));
            GPU(gpu->attn_causal_gemm(gpu, kinds[k], c2, a, d_zl, at, dt, batch, T, dh, scale, 0));
            snprintf(name, sizeof name, "causal %s %s H %d T %d dh %d, bm ld %lld", kind_names[k], round_name(r),
                     heads, T, dh, (long long)at.ld);
            bitwise_check(name, c, c2, bytes);
        }

        /* attn_scores_softmax (q x, k y, v z) with o in the layout */
        GPU(gpu->mem_zero(gpu, d_p2, ns * 2));
        GPU(gpu->mem_zero(gpu, d_s2, ns * 2));
        GPU(gpu->attn_scores_softmax(gpu, d_p2, d_c, split, d_x, d_y, d_z, dt, batch, T, dh, scale));
        GPU(gpu->attn_scores_softmax(gpu, d_s2, d_ol, at, d_x, d_y, d_z, dt, batch, T, dh, scale));
        snprintf(name, sizeof name, "fused scores+softmax %s H %d T %d dh %d, o ld %lld: p", round_name(r), heads, T,
                 dh, (long long)at.ld);
        bitwise_check(name, d_p2, d_s2, ns * 2);
        MUST(gpu->download(gpu, hl, d_ol, nl * 2));
        heads_from_layout(hback, hl, nb, heads, T, dh, at.ld);
        MUST(gpu->download(gpu, hsplit, d_c, nq * 2));
        snprintf(name, sizeof name, "fused scores+softmax %s H %d T %d dh %d, o ld %lld: o", round_name(r), heads, T,
                 dh, (long long)at.ld);
        int same = memcmp(hback, hsplit, nq * 2) == 0;
        printf("  %-44s bytes=%-9zu %s\n", name, nq * 2, same ? "bitwise equal" : "FAIL");
        CHECK(same, "%s: differs", name);

        /* attn_dp_softmax_bwd (v y, k x, p the one above, o = that o) with dout z in the layout */
        GPU(gpu->mem_zero(gpu, d_s, ns * 2));
        GPU(gpu->mem_zero(gpu, d_s2, ns * 2));
        GPU(gpu->attn_dp_softmax_bwd(gpu, d_s, d_c, d_z, split, d_y, d_x, d_p2, d_ol, at, dt, batch, T, dh, scale));
        GPU(gpu->attn_dp_softmax_bwd(gpu, d_s2, d_c2, d_zl, at, d_y, d_x, d_p2, d_ol, at, dt, batch, T, dh, scale));
        snprintf(name, sizeof name, "fused dP+softmax bwd %s H %d T %d dh %d, dout ld %lld: ds", round_name(r), heads,
                 T, dh, (long long)at.ld);
        bitwise_check(name, d_s, d_s2, ns * 2);
        snprintf(name, sizeof name, "fused dP+softmax bwd %s H %d T %d dh %d, dout ld %lld: dq", round_name(r), heads,
                 T, dh, (long long)at.ld);
        bitwise_check(name, d_c, d_c2, nq * 2);
        gpu->mem_free(gpu, d_zl), gpu->mem_free(gpu, d_ol);
        free(hl), free(hback), free(hsplit);
    }
    /* refused: ld not a multiple of 8, ld < heads · dh, heads not dividing batch, heads 0 */
    const lmk_heads_at bad[4] = {{heads, (int64_t)heads * dh + 4}, {heads, (int64_t)heads * dh - 8},
                                 {batch + 1, (int64_t)(batch + 1) * dh}, {0, dh}};
    for (int i = 0; i < 4; i++) {
        CHECK(gpu->attn_causal_gemm(gpu, LMK_CAUSAL_MIX_T, d_c, d_p, d_z, bad[i], dt, batch, T, dh, 1.0f, 0) ==
                  LMK_INVALID,
              "attn_causal_gemm accepts bm layout {%d, %lld}", bad[i].heads, (long long)bad[i].ld);
        CHECK(gpu->attn_scores_softmax(gpu, d_p2, d_c, bad[i], d_x, d_y, d_z, dt, batch, T, dh, scale) == LMK_INVALID,
              "attn_scores_softmax accepts o layout {%d, %lld}", bad[i].heads, (long long)bad[i].ld);
        CHECK(gpu->attn_dp_softmax_bwd(gpu, d_s, d_c, d_z, bad[i], d_y, d_x, d_p2, d_c2, split, dt, batch, T, dh,
                                       scale) == LMK_INVALID,
              "attn_dp_softmax_bwd accepts dout layout {%d, %lld}", bad[i].heads, (long long)bad[i].ld);
    }
    gpu->mem_free(gpu, d_x), gpu->mem_free(gpu, d_y), gpu->mem_free(gpu, d_z), gpu->mem_free(gpu, d_p);
    gpu->mem_free(gpu, d_c), gpu->mem_free(gpu, d_c2), gpu->mem_free(gpu, d_s), gpu->mem_free(gpu, d_s2);
    gpu->mem_free(gpu, d_p2);
    free(fx), free(fy), free(fz), free(fp), free(hx), free(hy), free(hz), free(hp);
}

/* Overlap GEMMs (lmk_gemm.overlap): the same bits as without the hint,
 * with another GEMM issued on the main stream meanwhile, and accumulating
 * (beta 1) twice into one C; download joins the second stream itself. in:
 * NONE or TF32 (float32 inputs), BF16 (16-bit inputs through gemm_half:
 * a float32 input rounded into scratch would keep the GEMM on the main
 * stream). */
static void test_gemm_overlap(lmk_round in)
{
    int m = 512, n = 1536, k = 2048;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    int half = in == LMK_ROUND_BF16;
    float *a = h_rand(na, -1, 1), *bm = h_rand(nb, -1, 1);
    void *d_af = d_from(a, 4 * na), *d_bf = d_from(bm, 4 * nb), *d_a = d_af, *d_b = d_bf;
    if (half) {
        d_a = d_alloc(2 * na), d_b = d_alloc(2 * nb);
        GPU(gpu->cast_half(gpu, d_a, d_af, na, in));
        GPU(gpu->cast_half(gpu, d_b, d_bf, nb, in));
    }
    void *c[6];
    for (int i = 0; i < 6; i++)
        c[i] = d_alloc(4 * nc);
    /* g: C (m, n) = A B; g2: C (m, n) = 0.5 · A B as a second, independent product */
    lmk_gemm g = {.m = m, .n = n, .k = k, .batch = 1, .alpha = 1.0f, .in_round = in};
    lmk_gemm g2 = g;
    g2.alpha = 0.5f;
    lmk_gemm gacc = g;
    gacc.beta = 1.0f;
#define RUN_GEMM(gg, cc) GPU(half ? gpu->gemm_half(gpu, &(gg), (cc), d_a, 1, d_b, 1) : gpu->gemm(gpu, &(gg), (cc), d_a, d_b))
    RUN_GEMM(g, c[0]);
    RUN_GEMM(g2, c[1]);
    RUN_GEMM(gacc, c[4]);
    RUN_GEMM(gacc, c[4]);
    g.overlap = g2.overlap = gacc.overlap = 1;
    RUN_GEMM(g, c[2]);
    g2.overlap = 0;
    RUN_GEMM(g2, c[3]); /* main stream, beside c[2]'s */
    RUN_GEMM(gacc, c[5]);
    RUN_GEMM(gacc, c[5]); /* after the first on the second stream */
    CHECK(gpu->lane_join != NULL, "cuda backend without lane_join");
    if (gpu->lane_join)
        GPU(gpu->lane_join(gpu));
    char name[96];
    snprintf(name, sizeof name, "overlap gemm %s = plain", round_name(in));
    CHECK(same_bytes(c[2], c[0], 4 * nc), "%s: differs", name);
    CHECK(same_bytes(c[3], c[1], 4 * nc), "%s: the main-stream GEMM beside it differs", name);
    CHECK(same_bytes(c[5], c[4], 4 * nc), "%s: beta 1 twice differs", name);
    /* no join: the download must see the second stream's result */
    GPU(gpu->mem_zero(gpu, c[2], 4 * nc));
    g.overlap = 1;
    RUN_GEMM(g, c[2]);
    CHECK(same_bytes(c[2], c[0], 4 * nc), "%s: download without lane_join saw an unfinished C", name);
#undef RUN_GEMM
    printf("  %-44s n=%-9zu %s\n", name, nc, "checked");
    for (int i = 0; i < 6; i++)
        gpu->mem_free(gpu, c[i]);
    if (half)
        gpu->mem_free(gpu, d_a), gpu->mem_free(gpu, d_b);
    gpu->mem_free(gpu, d_af), gpu->mem_free(gpu, d_bf);
    free(a), free(bm);
}

/* An overlap GEMM when the second stream cannot get its workspace (device
 * memory exhausted by the pool before the first one): it runs on the main
 * stream, with plain results, instead of failing. Its own backend, destroyed
 * after (which returns the pool's memory). */
static void test_overlap_without_memory(void)
{
    lmk_backend *g2 = NULL;
    char err[256] = "";
    MUST(lmk_backend_cuda_create(0, &g2, err, sizeof err));
    int m = 256, n = 384, k = 512;
    float *a = h_rand((size_t)m * k, -1, 1), *bm = h_rand((size_t)k * n, -1, 1);
    void *d_a = NULL, *d_b = NULL, *c0 = NULL, *c1 = NULL;
    MUST(g2->mem_alloc(g2, 4 * (size_t)m * k, &d_a));
    MUST(g2->mem_alloc(g2, 4 * (size_t)k * n, &d_b));
    MUST(g2->mem_alloc(g2, 4 * (size_t)m * n, &c0));
    MUST(g2->mem_alloc(g2, 4 * (size_t)m * n, &c1));
    MUST(g2->upload(g2, d_a, a, 4 * (size_t)m * k));
    MUST(g2->upload(g2, d_b, bm, 4 * (size_t)k * n));
    lmk_gemm g = {.m = m, .n = n, .k = k, .batch = 1, .alpha = 1.0f, .in_round = LMK_ROUND_NONE};
    MUST(g2->gemm(g2, &g, c0, d_a, d_b)); /* cuBLAS set up before memory runs out */
    MUST(g2->synchronize(g2));
    /* hold the device's memory: 256 MiB blocks, then 1 MiB ones, until refused */
    enum { MAX_HOLD = 4096 };
    void **held = calloc(MAX_HOLD, sizeof *held);
    size_t nheld = 0, bytes = (size_t)256 << 20;
    if (!held)
        exit(1);
    while (nheld < MAX_HOLD) {
        if (g2->mem_alloc(g2, bytes, &held[nheld]) == LMK_OK && g2->synchronize(g2) == LMK_OK) {
            nheld++;
        } else if (bytes > ((size_t)1 << 20)) {
            bytes = (size_t)1 << 20;
        } else {
            break;
        }
    }
    g.overlap = 1;
    int rc = g2->gemm(g2, &g, c1, d_a, d_b);
    CHECK(rc == LMK_OK, "overlap gemm with the device memory held: %d (%s)", rc, lmk_backend_cuda_last_error(g2));
    if (g2->lane_join)
        MUST(g2->lane_join(g2));
    float *h0 = malloc(4 * (size_t)m * n), *h1 = malloc(4 * (size_t)m * n);
    if (!h0 || !h1)
        exit(1);
    MUST(g2->download(g2, h0, c0, 4 * (size_t)m * n));
    MUST(g2->download(g2, h1, c1, 4 * (size_t)m * n));
    CHECK(memcmp(h0, h1, 4 * (size_t)m * n) == 0, "overlap gemm without memory for the second stream differs");
    printf("  %-44s held=%-7zu %s\n", "overlap gemm, device memory held", nheld, rc == LMK_OK ? "ok" : "FAIL");
    for (size_t i = 0; i < nheld; i++)
        g2->mem_free(g2, held[i]);
    free(held), free(h0), free(h1), free(a), free(bm);
    lmk_backend_free(g2);
}

/* The fused forms on the GPU, bit for bit the unfused cuda ops in sequence:
 * add_rmsnorm_fwd = add + rmsnorm_fwd (y aliasing x1), rmsnorm_bwd_add =
 * rmsnorm_bwd + add + cast_half (also without dres / dx16); the causal
 * softmax with zero_block = the whole-row kernels on every written entry
 * (j < the end of the row's block) for the register, vector and scalar
 * kernels (T 1000 16-bit, T 100 and 37 float32); adamw_multi's 16-bit
 * copies = cast_half of the updated p (and left by a skipped step). */
static void test_fused(lmk_round r)
{
    lmk_dtype dt = r == LMK_ROUND_BF16 ? LMK_BF16 : LMK_F16;
    int rows = 300, d = 1600;
    size_t n = (size_t)rows * d;
    float *x1 = h_rand(n, -2, 2), *x2 = h_rand(n, -1, 1), *w = h_rand(d, 0.5f, 1.5f), *dy = h_rand(n, -1, 1),
          *dres = h_rand(n, -1, 1);
    uint16_t *x2h = h_half(x2, n, r), *dyh = h_half(dy, n, r);
    void *d_x1 = d_from(x1, n * 4), *d_x2 = d_from(x2h, n * 2), *d_w = d_from(w, d * 4), *d_dy = d_from(dyh, n * 2),
         *d_dres = d_from(dres, n * 4), *d_y1 = d_alloc(n * 4), *d_y2 = d_alloc(n * 4), *d_o1 = d_alloc(n * 2),
         *d_o2 = d_alloc(n * 2), *d_r1 = d_alloc(rows * 4), *d_r2 = d_alloc(rows * 4), *d_dx1 = d_alloc(n * 4),
         *d_dx2 = d_alloc(n * 4), *d_dw1 = d_alloc(d * 4), *d_dw2 = d_alloc(d * 4);
    GPU(gpu->add(gpu, d_y1, d_x1, d_x2, dt, n));
    GPU(gpu->rmsnorm_fwd(gpu, d_o1, dt, d_r1, d_y1, d_w, rows, d, 1e-5f));
    GPU(gpu->mem_copy(gpu, d_y2, d_x1, n * 4));
    GPU(gpu->add_rmsnorm_fwd(gpu, d_y2, d_y2, d_x2, dt, d_o2, dt, d_r2, d_w, rows, d, 1e-5f));
    int ok = same_bytes(d_y1, d_y2, n * 4) && same_bytes(d_o1, d_o2, n * 2) && same_bytes(d_r1, d_r2, rows * 4);
    printf("  %-44s %s %s\n", "add_rmsnorm_fwd = add + rmsnorm_fwd", round_name(r), ok ? "bitwise equal" : "FAIL");
    CHECK(ok, "cuda add_rmsnorm_fwd %s differs from add + rmsnorm_fwd", round_name(r));
    GPU(gpu->rmsnorm_bwd(gpu, d_dx1, d_dw1, d_dy, dt, d_y1, d_w, d_r1, rows, d));
    GPU(gpu->add(gpu, d_dx1, d_dx1, d_dres, LMK_F32, n));
    GPU(gpu->cast_half(gpu, d_o1, d_dx1, n, r));
    GPU(gpu->rmsnorm_bwd_add(gpu, d_dx2, d_o2, r, d_dw2, d_dy, dt, d_dres, d_y1, d_w, d_r1, rows, d));
    ok = same_bytes(d_dx1, d_dx2, n * 4) && same_bytes(d_dw1, d_dw2, d * 4) && same_bytes(d_o1, d_o2, n * 2);
    GPU(gpu->rmsnorm_bwd(gpu, d_dx1, d_dw1, d_dy, dt, d_y1, d_w, d_r1, rows, d));
    GPU(gpu->rmsnorm_bwd_add(gpu, d_dx2, NULL, r, d_dw2, d_dy, dt, NULL, d_y1, d_w, d_r1, rows, d));
    ok = ok && same_bytes(d_dx1, d_dx2, n * 4) && same_bytes(d_dw1, d_dw2, d * 4);
    printf("  %-44s %s %s\n", "rmsnorm_bwd_add = rmsnorm_bwd + add + cast", round_name(r),
           ok ? "bitwise equal" : "FAIL");
    CHECK(ok, "cuda rmsnorm_bwd_add %s differs from rmsnorm_bwd + add + cast_half", round_name(r));
    /* dw's 4-column partial sums = the 1-column kernel's, bit for bit (d
     * 1600: a partial last block of 128 columns): x one float off 16-byte
     * alignment takes the 1-column kernels */
    float *d_xs = (float *)d_alloc(n * 4 + 16);
    GPU(gpu->mem_copy(gpu, d_xs + 1, d_y1, n * 4));
    GPU(gpu->mem_zero(gpu, d_dw1, d * 4));
    GPU(gpu->mem_zero(gpu, d_dw2, d * 4));
    GPU(gpu->rmsnorm_bwd(gpu, d_dx1, d_dw1, d_dy, dt, d_y1, d_w, d_r1, rows, d));
    GPU(gpu->rmsnorm_bwd(gpu, d_dx2, d_dw2, d_dy, dt, d_xs + 1, d_w, d_r1, rows, d));
    ok = same_bytes(d_dw1, d_dw2, d * 4);
    printf("  %-44s %s %s\n", "rmsnorm dw 4-column = 1-column kernel", round_name(r), ok ? "bitwise equal" : "FAIL");
    CHECK(ok, "cuda rmsnorm dw 4-column kernel %s differs from the 1-column kernel", round_name(r));
    gpu->mem_free(gpu, d_xs);
    gpu->mem_free(gpu, d_x1), gpu->mem_free(gpu, d_x2), gpu->mem_free(gpu, d_w), gpu->mem_free(gpu, d_dy);
    gpu->mem_free(gpu, d_dres), gpu->mem_free(gpu, d_y1), gpu->mem_free(gpu, d_y2), gpu->mem_free(gpu, d_o1);
    gpu->mem_free(gpu, d_o2), gpu->mem_free(gpu, d_r1), gpu->mem_free(gpu, d_r2), gpu->mem_free(gpu, d_dx1);
    gpu->mem_free(gpu, d_dx2), gpu->mem_free(gpu, d_dw1), gpu->mem_free(gpu, d_dw2);
    free(x1), free(x2), free(w), free(dy), free(dres), free(x2h), free(dyh);

    /* causal softmax with zero blocks: 16-bit T 1000 blocks 256 (registers); float32 T 100 blocks 64
     * (registers), T 1100 blocks 320 (vectors), T 37 blocks 16 (scalar) */
    static const int shapes[4][3] = {{3, 1000, 256}, {4, 100, 64}, {1, 1100, 320}, {2, 37, 16}};
    for (int q = 0; q < 4; q++) {
        int batch = shapes[q][0], T = shapes[q][1], zb = shapes[q][2];
        lmk_dtype sdt = q == 0 ? dt : LMK_F32;
        size_t es = q == 0 ? 2 : 4, ns = (size_t)batch * T * T;
        float *s = h_rand(ns, -6, 6), *dp = h_rand(ns, -1, 1);
        void *hs = s, *hdp = dp;
        uint16_t *s16 = NULL, *dp16 = NULL;
        if (q == 0) {
            hs = s16 = h_half(s, ns, r);
            hdp = dp16 = h_half(dp, ns, r);
        }
        void *d_s = d_from(hs, ns * es), *d_dp = d_from(hdp, ns * es), *d_pf = d_alloc(ns * es),
             *d_pb = d_alloc(ns * es), *d_dsf = d_alloc(ns * es), *d_dsb = d_alloc(ns * es);
        GPU(gpu->softmax_causal_fwd(gpu, d_pf, d_s, sdt, batch, T, 0));
        GPU(gpu->softmax_causal_fwd(gpu, d_pb, d_s, sdt, batch, T, zb));
        GPU(gpu->softmax_causal_bwd(gpu, d_dsf, d_dp, d_pf, sdt, batch, T, 0));
        GPU(gpu->softmax_causal_bwd(gpu, d_dsb, d_dp, d_pf, sdt, batch, T, zb));
        char *hf = malloc(ns * es), *hb = malloc(ns * es), *gf = malloc(ns * es), *gb = malloc(ns * es);
        if (!hf || !hb || !gf || !gb)
            exit(1);
        MUST(gpu->download(gpu, hf, d_pf, ns * es));
        MUST(gpu->download(gpu, hb, d_pb, ns * es));
        MUST(gpu->download(gpu, gf, d_dsf, ns * es));
        MUST(gpu->download(gpu, gb, d_dsb, ns * es));
        size_t bad = 0, written = 0;
        for (size_t row = 0; row < (size_t)batch * T; row++) {
            int i = (int)(row % T), end = (i / zb + 1) * zb < T ? (i / zb + 1) * zb : T;
            size_t at = row * T * es;
            written += end;
            bad += memcmp(hf + at, hb + at, end * es) != 0 || memcmp(gf + at, gb + at, end * es) != 0;
        }
        printf("  %-44s %s T%d blocks %d: %s (%.0f%% of the square written)\n", "softmax zero_block = whole rows",
               q == 0 ? round_name(r) : "fp32", T, zb, bad ? "FAIL" : "bitwise equal",
               100.0 * written / ((double)batch * T * T));
        CHECK(bad == 0, "softmax with zero_block %d at T %d: %zu rows differ from the whole-row kernels", zb, T, bad);
        gpu->mem_free(gpu, d_s), gpu->mem_free(gpu, d_dp), gpu->mem_free(gpu, d_pf), gpu->mem_free(gpu, d_pb);
        gpu->mem_free(gpu, d_dsf), gpu->mem_free(gpu, d_dsb);
        free(s), free(dp), free(s16), free(dp16), free(hf), free(hb), free(gf), free(gb);
    }

    /* adamw_multi's 16-bit copies: tensors of 1, 7, 70001, 16384 elements (one unaligned, one without a copy) */
    static const size_t tn[4] = {1, 7, 70001, 16384};
    size_t off[4], total = 0;
    for (int i = 0; i < 4; i++) {
        off[i] = total + (i == 2);
        total = (off[i] + tn[i] + 7) / 8 * 8;
    }
    float *p = h_rand(total, -1, 1), *g = h_rand(total, -1, 1), *z = calloc(total, 4), zero = 0.0f;
    float *d_p = d_from(p, total * 4), *d_g = d_from(g, total * 4), *d_m = d_from(z, total * 4),
          *d_v = d_from(z, total * 4), *d_zero = d_from(&zero, 4);
    uint16_t *d_h = d_alloc(total * 2), *d_want = d_alloc(total * 2);
    lmk_opt_tensor ts[4];
    for (int i = 0; i < 4; i++)
        ts[i] = (lmk_opt_tensor){d_p + off[i], d_g + off[i], d_m + off[i], d_v + off[i], tn[i],
                                 i == 3 ? NULL : d_h + off[i]};
    lmk_adamw_hp hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f,
                       .t = 1, .copy_fmt = r};
    /* the copies of tensors 0-2 = cast_half of their updated p; tensor 3's range (no copy) and the gaps
     * between tensors stay zero (d_alloc zeroes) */
    uint16_t *hh = malloc(total * 2), *hw = malloc(total * 2);
    if (!hh || !hw)
        exit(1);
    ok = 1;
    for (int step = 0; step < 2; step++) {
        hp.t = 1 + step;
        GPU(gpu->adamw_multi(gpu, ts, 4, &hp, step ? d_zero : NULL)); /* step 2 skipped: factor 0 */
        if (step == 0)
            GPU(gpu->cast_half(gpu, d_want, d_p, total, r));
        MUST(gpu->download(gpu, hh, d_h, total * 2));
        MUST(gpu->download(gpu, hw, d_want, total * 2));
        for (size_t e = 0, t = 0; e < total; e++) {
            while (t < 4 && e >= off[t] + tn[t])
                t++;
            int in_copy = t < 3 && e >= off[t];
            ok &= in_copy ? hh[e] == hw[e] : hh[e] == 0;
        }
    }
    free(hh), free(hw);
    printf("  %-44s %s %s\n", "adamw_multi copies = cast_half(p)", round_name(r), ok ? "bitwise equal" : "FAIL");
    CHECK(ok, "adamw_multi's %s copies differ from cast_half of the updated p", round_name(r));
    gpu->mem_free(gpu, d_p), gpu->mem_free(gpu, d_g), gpu->mem_free(gpu, d_m), gpu->mem_free(gpu, d_v);
    gpu->mem_free(gpu, d_zero), gpu->mem_free(gpu, d_h), gpu->mem_free(gpu, d_want);
    free(p), free(g), free(z);
}

/* --- whole model -------------------------------------------------------- */

static void test_model(const lmk_model_config *c, int B, int T, lmk_precision prec, int grads)
{
    lmk_allocator *ac = NULL, *ag = NULL;
    lmk_model *mc = NULL, *mg = NULL;
    MUST(lmk_allocator_create(cpu, &ac));
    MUST(lmk_allocator_create(gpu, &ag));
    MUST(lmk_model_create(cpu, ac, c, B, T, prec, 42, 1, &mc));
    GPU(lmk_model_create(gpu, ag, c, B, T, prec, 42, 1, &mg));
    int N = B * T;
    int32_t *in = malloc(sizeof(int32_t) * N), *tg = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) {
        in[i] = (int32_t)(test_next(&rng) % (uint64_t)c->vocab_size);
        tg[i] = (int32_t)(test_next(&rng) % (uint64_t)c->vocab_size);
    }
    MUST(lmk_model_set_batch(mc, in, tg));
    GPU(lmk_model_set_batch(mg, in, tg));
    /* tf32/bf16/fp16 round differently on the two sides (tensor-core tf32
     * conversion, rounded outputs one ulp apart): loss tolerance by precision */
    double ltol = prec == LMK_PREC_FP32 ? 2e-5 : prec == LMK_PREC_TF32 ? 2e-3 : 1e-2;
    lmk_adamw_config cfg = lmk_adamw_defaults();
    cfg.max_grad_norm = 1.0f;
    printf(" model %s (V %d d %d ff %d L %d H %d) B %d T %d %s\n", c->name, c->vocab_size,
           c->d_model, c->d_ff, c->num_layers, c->num_heads, B, T, lmk_precision_name(prec));
    for (int step = 0; step < 6; step++) {
        float lc = 0, lg = 0;
        MUST(lmk_model_forward(mc, 1));
        GPU(lmk_model_forward(mg, 1));
        MUST(lmk_model_loss(mc, &lc));
        GPU(lmk_model_loss(mg, &lg));
        char name[64];
        snprintf(name, sizeof name, "loss after %d AdamW steps (cpu %.6f)", step, lc);
        double e = fabs((double)lg - lc);
        CHECK(e <= ltol * fabs(lc), "%s: gpu %.7f cpu %.7f", name, lg, lc);
        printf("    step %d loss cpu %.7f gpu %.7f |diff| %.3g %s\n", step, lc, lg, e,
               e <= ltol * fabs(lc) ? "ok" : "FAIL");
        MUST(lmk_model_backward(mc));
        GPU(lmk_model_backward(mg));
        if (step == 0 && grads) {
            for (size_t i = 0; i < lmk_model_tensor_count(mc); i++) {
                const char *pn = NULL;
                lmk_tensor *pc, *gc, *pg, *gg;
                MUST(lmk_model_tensor(mc, i, &pn, &pc, &gc));
                MUST(lmk_model_tensor(mg, i, &pn, &pg, &gg));
                float *ref = gc->data;
                double mx = 0;
                for (size_t j = 0; j < gc->numel; j++)
                    mx = fabs(ref[j]) > mx ? fabs(ref[j]) : mx;
                /* relative to the tensor's largest gradient: sums over B·T
                 * tokens in another order */
                snprintf(name, sizeof name, "grad %s", pn);
                compare(name, gg->data, ref, gc->numel, 1e-4 * mx, 1e-3);
            }
        }
        if (step < 5) {
            MUST(lmk_model_step(mc, &cfg));
            GPU(lmk_model_step(mg, &cfg));
        }
    }
    lmk_model_free(mc);
    lmk_model_free(mg);
    lmk_allocator_free(ac);
    lmk_allocator_free(ag);
    free(in), free(tg);
}

/* A model's forward + backward captured in a CUDA graph and replayed: loss
 * and every gradient bitwise equal to the eager run's; then replay timing. */
static void test_graph(const lmk_model_config *c, int B, int T)
{
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    lmk_cuda_graph *g = NULL;
    MUST(lmk_allocator_create(gpu, &a));
    GPU(lmk_model_create(gpu, a, c, B, T, LMK_PREC_FP32, 7, 1, &m));
    int N = B * T;
    int32_t *tok = malloc(sizeof(int32_t) * 2 * N);
    for (int i = 0; i < 2 * N; i++)
        tok[i] = (int32_t)(test_next(&rng) % (uint64_t)c->vocab_size);
    GPU(lmk_model_set_batch(m, tok, tok + N));
    /* eager reference (also sizes the scratch) */
    GPU(lmk_model_forward(m, 1));
    GPU(lmk_model_backward(m));
    float le = 0, lg = 0;
    GPU(lmk_model_loss(m, &le));
    size_t nt = lmk_model_tensor_count(m);
    float **ref = calloc(nt, sizeof *ref);
    for (size_t i = 0; i < nt; i++) {
        const char *pn;
        lmk_tensor *p, *gr;
        MUST(lmk_model_tensor(m, i, &pn, &p, &gr));
        ref[i] = malloc(gr->bytes);
        GPU(gpu->download(gpu, ref[i], gr->data, gr->bytes));
    }
    int rc = lmk_backend_cuda_capture_begin(gpu);
    if (rc == LMK_OK)
        rc = lmk_model_forward(m, 1);
    if (rc == LMK_OK)
        rc = lmk_model_backward(m);
    int rc2 = lmk_backend_cuda_capture_end(gpu, &g);
    if (rc != LMK_OK || rc2 != LMK_OK) {
        CHECK(0, "graph capture of forward+backward: rc %d/%d (%s)", rc, rc2,
              lmk_backend_cuda_last_error(gpu));
        goto out;
    }
    for (int r = 0; r < 3; r++)
        GPU(lmk_cuda_graph_launch(gpu, g));
    GPU(lmk_model_loss(m, &lg));
    printf("  graph replay loss %.7f eager %.7f  %s\n", lg, le, lg == le ? "ok" : "FAIL");
    CHECK(lg == le, "graph replay loss %.9g != eager %.9g", lg, le);
    for (size_t i = 0; i < nt; i++) {
        const char *pn;
        lmk_tensor *p, *gr;
        MUST(lmk_model_tensor(m, i, &pn, &p, &gr));
        char name[96];
        snprintf(name, sizeof name, "graph replay grad %s (bitwise)", pn);
        compare(name, gr->data, ref[i], gr->numel, 0, 0);
    }
    /* timing: eager forward+backward vs graph replay */
    double t0 = now_ms_test();
    for (int r = 0; r < 10; r++) {
        GPU(lmk_model_forward(m, 1));
        GPU(lmk_model_backward(m));
    }
    GPU(gpu->synchronize(gpu));
    double t1 = now_ms_test();
    for (int r = 0; r < 10; r++)
        GPU(lmk_cuda_graph_launch(gpu, g));
    GPU(gpu->synchronize(gpu));
    double t2 = now_ms_test();
    printf("  fwd+bwd %s B%d T%d: eager %.3f ms, graph %.3f ms per step\n", c->name, B, T,
           (t1 - t0) / 10, (t2 - t1) / 10);
out:
    lmk_cuda_graph_free(g);
    for (size_t i = 0; i < nt; i++)
        free(ref[i]);
    free(ref);
    free(tok);
    lmk_model_free(m);
    lmk_allocator_free(a);
}

int main(void)
{
    int open_rc = gpu_test_open("test_cuda_ops", &gpu);
    if (open_rc != 0)
        return open_rc;
    MUST(lmk_backend_cpu_create(&cpu));

    printf("ops:\n");
    test_embedding();
    test_rmsnorm(200, 2000);
    test_rmsnorm(37, 80);
    test_rmsnorm(21, 5000); /* wider than the one-pass backward: the three-kernel path */
    test_rope(1, 80);
    test_rope(0, 80);
    test_rope(1, 6);
    test_rope(0, 6);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_gemm(ta, tb, 100, 77, 80, 1, 1.0f, 0.0f, LMK_ROUND_NONE, LMK_ROUND_NONE);
            test_gemm(ta, tb, 100, 100, 80, 6, 0.11f, 0.0f, LMK_ROUND_NONE, LMK_ROUND_NONE);
        }
    test_gemm(0, 0, 200, 333, 1000, 1, 1.0f, 1.0f, LMK_ROUND_NONE, LMK_ROUND_NONE);
    test_gemm(1, 0, 160, 432, 200, 1, 1.0f, 1.0f, LMK_ROUND_NONE, LMK_ROUND_NONE);
    test_gemm(0, 1, 200, 10007, 160, 1, 1.0f, 0.0f, LMK_ROUND_NONE, LMK_ROUND_NONE);
    test_gemm(0, 1, 200, 333, 512, 1, 1.0f, 0.0f, LMK_ROUND_TF32, LMK_ROUND_NONE);
    test_gemm(1, 0, 100, 80, 100, 6, 0.5f, 1.0f, LMK_ROUND_TF32, LMK_ROUND_NONE);
    test_gemm(0, 1, 200, 333, 512, 1, 1.0f, 0.0f, LMK_ROUND_BF16, LMK_ROUND_NONE);
    test_gemm(0, 1, 200, 333, 512, 1, 1.0f, 0.0f, LMK_ROUND_BF16, LMK_ROUND_BF16);
    test_gemm(1, 0, 100, 80, 100, 6, 0.5f, 0.0f, LMK_ROUND_BF16, LMK_ROUND_BF16);
    test_gemm(0, 0, 200, 333, 512, 1, 1.0f, 1.0f, LMK_ROUND_FP16, LMK_ROUND_NONE);
    test_gemm(0, 1, 100, 100, 80, 6, 0.11f, 0.0f, LMK_ROUND_FP16, LMK_ROUND_FP16);
    test_gemm_overlap(LMK_ROUND_NONE);
    test_gemm_overlap(LMK_ROUND_TF32);
    test_gemm_overlap(LMK_ROUND_BF16);
    test_overlap_without_memory();
    test_softmax(6, 100, 0);
    test_softmax(3, 1000, 1);
    test_softmax(2, 33, 1);
    test_elementwise();
    test_half_ops(LMK_ROUND_BF16);
    test_half_ops(LMK_ROUND_FP16);
    test_cross_entropy(200, 10007, 0);
    test_cross_entropy(64, 10000, 1);
    test_cross_entropy(3, 50, 0);
    test_optimizer();
    test_optimizer_multi(12, 1);
    test_optimizer_multi(700, 5000);
    test_fused(LMK_ROUND_BF16);
    test_fused(LMK_ROUND_FP16);
    test_attn_causal_gemm(LMK_ROUND_BF16, 6, 256, 64);
    test_attn_causal_gemm(LMK_ROUND_FP16, 6, 256, 64);
    test_attn_causal_gemm(LMK_ROUND_BF16, 5, 192, 80);
    test_attn_causal_gemm(LMK_ROUND_BF16, 3, 128, 32);
    test_attn_causal_gemm(LMK_ROUND_FP16, 3, 64, 128);
    test_attn_causal_gemm(LMK_ROUND_BF16, 2, 128, 96);
    test_attn_causal_gemm(LMK_ROUND_BF16, 3, 384, 128); /* the wgmma MIX, MIX_T at dh 128, three 128-row blocks */
    test_attn_causal_gemm(LMK_ROUND_FP16, 2, 128, 128);
    test_attn_softmax_fused(LMK_ROUND_BF16, 2, 3, 256, 64);
    test_attn_softmax_fused(LMK_ROUND_FP16, 2, 3, 256, 64);
    test_attn_softmax_fused(LMK_ROUND_BF16, 1, 5, 192, 80);
    test_attn_softmax_fused(LMK_ROUND_BF16, 3, 1, 128, 32);
    test_attn_softmax_fused(LMK_ROUND_FP16, 1, 2, 64, 128);
    test_attn_softmax_fused(LMK_ROUND_BF16, 2, 1, 128, 96);
    test_attn_softmax_fused(LMK_ROUND_BF16, 1, 3, 192, 128); /* dh 128 over three tiles */
    /* the wgmma kernels (attn_softmax_wgmma.cu): dh 128 over three 128-row blocks, fp16 dh 128, xl's heads */
    test_attn_softmax_fused(LMK_ROUND_BF16, 1, 3, 384, 128);
    test_attn_softmax_fused(LMK_ROUND_FP16, 2, 2, 128, 128);
    test_attn_softmax_fused(LMK_ROUND_BF16, 1, 25, 512, 64);
    test_attn_heads_layout(LMK_ROUND_BF16, 2, 3, 256, 64);  /* the wgmma P^T dout */
    test_attn_heads_layout(LMK_ROUND_FP16, 1, 25, 128, 64); /* xl's 25 heads */
    test_attn_heads_layout(LMK_ROUND_BF16, 2, 5, 192, 80);  /* mma.sync P^T dout */
    test_attn_heads_layout(LMK_ROUND_BF16, 1, 3, 384, 128);
    test_attn_heads_layout(LMK_ROUND_FP16, 2, 2, 64, 32);

    printf("models:\n");
    lmk_model_config tiny;
    MUST(lmk_model_preset("tiny", &tiny));
    test_model(&tiny, 2, 64, LMK_PREC_FP32, 1);
    lmk_model_config odd = {"custom-odd", 10007, 128, 160, 432, 2, 2, 10000.0f, LMK_ATTN_NAIVE}; /* dh 80 */
    test_model(&odd, 2, 100, LMK_PREC_FP32, 1);
    lmk_model_config heads25 = {"custom-25h", 1003, 128, 200, 328, 1, 25, 10000.0f, LMK_ATTN_NAIVE}; /* dh 8 */
    test_model(&heads25, 3, 100, LMK_PREC_FP32, 1);
    test_model(&tiny, 2, 64, LMK_PREC_TF32, 0);
    test_model(&odd, 2, 100, LMK_PREC_BF16, 0);
    test_model(&tiny, 2, 64, LMK_PREC_BF16, 0);
    test_model(&heads25, 3, 100, LMK_PREC_FP16, 0);
    lmk_model_config tiny_fused = tiny, odd_fused = odd; /* the softmax inside the scores / dP GEMMs */
    tiny_fused.attention = odd_fused.attention = LMK_ATTN_NAIVE_FUSED;
    test_model(&tiny_fused, 2, 128, LMK_PREC_BF16, 0);
    test_model(&odd_fused, 2, 128, LMK_PREC_FP16, 0);
    /* T 300: the causal attention GEMMs in blocks of 128, 128, 44 queries */
    lmk_model_config blocks = {"custom-causal-blocks", 1003, 320, 128, 256, 2, 4, 10000.0f, LMK_ATTN_NAIVE};
    test_model(&blocks, 2, 300, LMK_PREC_FP32, 1);
    test_model(&blocks, 2, 300, LMK_PREC_BF16, 0);
    /* dh 80 and 64 at T 192: the one-launch causal GEMMs where LMK_ATTN_GEMM16 is on */
    lmk_model_config tiles80 = {"custom-tiles-dh80", 1003, 256, 160, 256, 2, 2, 10000.0f, LMK_ATTN_NAIVE};
    test_model(&tiles80, 2, 192, LMK_PREC_BF16, 0);
    test_model(&tiles80, 2, 192, LMK_PREC_FP16, 0);
    lmk_model_config tiles64 = {"custom-tiles-dh64", 1003, 256, 256, 512, 2, 4, 10000.0f, LMK_ATTN_NAIVE};
    test_model(&tiles64, 2, 192, LMK_PREC_BF16, 0);
    /* the same under tf32: with LMK_ATTN_GEMM_TF32 on, the float32 causal GEMMs and (naive_fused) the fused
     * softmax kernels; with it off, the blocked cuBLAS GEMMs */
    test_model(&tiles80, 2, 192, LMK_PREC_TF32, 0);
    test_model(&tiles64, 2, 192, LMK_PREC_TF32, 0);
    test_model(&tiny_fused, 2, 128, LMK_PREC_TF32, 0);
    test_model(&odd_fused, 2, 128, LMK_PREC_TF32, 0);

    printf("graphs:\n");
    test_graph(&tiny, 2, 64);
    lmk_model_config small;
    MUST(lmk_model_preset("small", &small));
    test_graph(&small, 4, 128);

    /* last: the float32 (TF32) attention kernels of cuda/attn_gemm_tf32.cu, written without a GPU (session 34;
     * LMK_ATTN_GEMM_TF32 off until they pass): a fault here cannot hide the results above */
    printf("tf32 attention kernels:\n");
    test_attn_causal_gemm_tf32(6, 256, 64);
    test_attn_causal_gemm_tf32(5, 192, 80);
    test_attn_causal_gemm_tf32(3, 128, 32);
    test_attn_causal_gemm_tf32(2, 384, 128);
    test_attn_causal_gemm_tf32(2, 64, 96);
    test_attn_softmax_fused_tf32(2, 3, 256, 64);
    test_attn_softmax_fused_tf32(1, 2, 192, 80);
    test_attn_softmax_fused_tf32(2, 1, 128, 128);
    test_attn_softmax_fused_tf32(1, 2, 64, 32);

    lmk_backend_free(gpu);
    lmk_backend_free(cpu);
    return check_report("test_cuda_ops");
}
