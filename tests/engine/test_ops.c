/* Every op of the cpu backend: forward against a direct reference, backward
 * against central finite differences of J = Σ w ⊙ out (J in double). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "halfprec.h"
#include "status.h"

static lmk_backend *B;
static test_rng rng = {12345};

typedef struct fd_ctx {
    void (*fwd)(struct fd_ctx *);
    float *out, *w;
    size_t nout;
    void *op;
} fd_ctx;

static double J(void *p)
{
    fd_ctx *c = p;
    c->fwd(c);
    double s = 0.0;
    for (size_t i = 0; i < c->nout; i++)
        s += (double)c->w[i] * c->out[i];
    return s;
}

/* --- rmsnorm --------------------------------------------------------------- */
struct rms_op { float *x, *g, *rstd; int n, d; };
static void rms_fwd(fd_ctx *c)
{
    struct rms_op *o = c->op;
    MUST(B->rmsnorm_fwd(B, c->out, LMK_F32, o->rstd, o->x, o->g, o->n, o->d, 1e-5f));
}

static void test_rmsnorm(void)
{
    int n = 5, d = 12;
    struct rms_op o = {test_alloc(n * d), test_alloc(d), test_alloc(n), n, d};
    float *out = test_alloc(n * d), *w = test_alloc(n * d), *dx = test_alloc(n * d),
          *dg = test_alloc(d), *want = test_alloc(n * d);
    test_fill(&rng, o.x, n * d, -2, 2);
    test_fill(&rng, o.g, d, 0.5f, 1.5f);
    test_fill(&rng, w, n * d, -1, 1);
    fd_ctx c = {rms_fwd, out, w, (size_t)n * d, &o};
    rms_fwd(&c);
    for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int j = 0; j < d; j++)
            ss += (double)o.x[i * d + j] * o.x[i * d + j];
        for (int j = 0; j < d; j++)
            want[i * d + j] = (float)(o.x[i * d + j] / sqrt(ss / d + 1e-5) * o.g[j]);
    }
    test_allclose("rmsnorm fwd", out, want, n * d, 1e-6, 1e-5);
    MUST(B->rmsnorm_bwd(B, dx, dg, w, LMK_F32, o.x, o.g, o.rstd, n, d));
    test_grad_check("rmsnorm dx", J, &c, o.x, dx, n * d, 1000, 1e-2f, 1e-3, 1e-2);
    test_grad_check("rmsnorm dw", J, &c, o.g, dg, d, 1000, 1e-2f, 1e-3, 1e-2);
    free(o.x), free(o.g), free(o.rstd), free(out), free(w), free(dx), free(dg), free(want);
}

/* --- rope / head split ------------------------------------------------------- */
struct rope_op { float *in, *table; int B, T, H, dh; };
static void rope_fwd_c(fd_ctx *c)
{
    struct rope_op *o = c->op;
    MUST(B->rope_fwd(B, c->out, o->in, LMK_F32, o->table, o->B, o->T, o->H, o->dh, o->H * o->dh));
}

static void test_rope(void)
{
    int b = 2, T = 5, H = 3, dh = 6;
    size_t n = (size_t)b * T * H * dh;
    struct rope_op o = {test_alloc(n), test_alloc((size_t)T * dh), b, T, H, dh};
    float *out = test_alloc(n), *w = test_alloc(n), *din = test_alloc(n), *want = test_alloc(n);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < dh / 2; k++) {
            double a = t * pow(10000.0, -2.0 * k / dh);
            o.table[(t * dh / 2 + k) * 2] = (float)cos(a);
            o.table[(t * dh / 2 + k) * 2 + 1] = (float)sin(a);
        }
    test_fill(&rng, o.in, n, -1, 1);
    test_fill(&rng, w, n, -1, 1);
    fd_ctx c = {rope_fwd_c, out, w, n, &o};
    rope_fwd_c(&c);
    for (int bb = 0; bb < b; bb++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int k = 0; k < dh / 2; k++) {
                    double a = t * pow(10000.0, -2.0 * k / dh);
                    const float *x = o.in + (((size_t)bb * T + t) * H + h) * dh;
                    float *y = want + (((size_t)bb * H + h) * T + t) * dh;
                    y[2 * k] = (float)(x[2 * k] * cos(a) - x[2 * k + 1] * sin(a));
                    y[2 * k + 1] = (float)(x[2 * k] * sin(a) + x[2 * k + 1] * cos(a));
                }
    test_allclose("rope fwd", out, want, n, 1e-6, 1e-5);
    MUST(B->rope_bwd(B, din, w, LMK_F32, o.table, b, T, H, dh, H * dh));
    test_grad_check("rope bwd", J, &c, o.in, din, n, 1000, 1e-2f, 1e-4, 1e-3);
    /* without a table: a pure head split, and rope_bwd(NULL) merges back */
    MUST(B->rope_fwd(B, out, o.in, LMK_F32, NULL, b, T, H, dh, H * dh));
    MUST(B->rope_bwd(B, din, out, LMK_F32, NULL, b, T, H, dh, H * dh));
    CHECK(memcmp(din, o.in, n * sizeof(float)) == 0, "head split then merge is not the identity");
    CHECK(out[((size_t)(1 * H + 2) * T + 3) * dh + 4] == o.in[((size_t)(1 * T + 3) * H + 2) * dh + 4],
          "head split puts (b,t,h,i) at the wrong place");
    /* rows ld = 3·H·dh apart (q, k or v inside a fused (N, 3d) projection):
     * the same values as the contiguous op, and rope_bwd writes only its
     * columns (the others keep their poison) */
    int ld = 3 * H * dh;
    size_t rows = (size_t)b * T;
    float *wide = test_alloc(rows * ld), *wback = test_alloc(rows * ld), *ref = test_alloc(n);
    for (int part = 0; part < 3; part++) {
        test_fill(&rng, wide, rows * ld, -1, 1);
        for (size_t r = 0; r < rows; r++)
            memcpy(din + r * H * dh, wide + r * ld + (size_t)part * H * dh, sizeof(float) * H * dh);
        MUST(B->rope_fwd(B, ref, din, LMK_F32, o.table, b, T, H, dh, H * dh));
        MUST(B->rope_fwd(B, out, wide + (size_t)part * H * dh, LMK_F32, o.table, b, T, H, dh, ld));
        CHECK(memcmp(out, ref, n * sizeof(float)) == 0, "rope_fwd with rows %d apart (part %d) differs", ld, part);
        for (size_t i = 0; i < rows * ld; i++)
            wback[i] = -7.0f;
        MUST(B->rope_bwd(B, wback + (size_t)part * H * dh, w, LMK_F32, o.table, b, T, H, dh, ld));
        MUST(B->rope_bwd(B, din, w, LMK_F32, o.table, b, T, H, dh, H * dh));
        int same = 1, untouched = 1;
        for (size_t r = 0; r < rows; r++)
            for (int j = 0; j < ld; j++) {
                float v = wback[r * ld + j];
                int mine = j >= part * H * dh && j < (part + 1) * H * dh;
                if (mine)
                    same &= v == din[r * H * dh + (j - part * H * dh)];
                else
                    untouched &= v == -7.0f;
            }
        CHECK(same && untouched, "rope_bwd with rows %d apart (part %d): values %s, other columns %s", ld, part,
              same ? "ok" : "differ", untouched ? "untouched" : "written");
    }
    CHECK(B->rope_fwd(B, out, o.in, LMK_F32, NULL, b, T, H, dh, H * dh - 1) == LMK_INVALID,
          "rope with ld < H·dh accepted");
    free(wide), free(wback), free(ref);
    free(o.in), free(o.table), free(out), free(w), free(din), free(want);
}

/* --- gemm ---------------------------------------------------------------------- */
static double ref_at(const float *x, int trans, int rows, int cols, int i, int j)
{
    /* op(X)[i][j] where op(X) is (rows, cols) */
    return trans ? x[(size_t)j * rows + i] : x[(size_t)i * cols + j];
}

static void test_gemm_shape(int ta, int tb, int m, int n, int k, int batch, lmk_round in_r,
                            lmk_round out_r)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *a = test_alloc(na * batch), *bm = test_alloc(nb * batch), *c = test_alloc(nc * batch),
          *want = test_alloc(nc * batch);
    test_fill(&rng, a, na * batch, -1, 1);
    test_fill(&rng, bm, nb * batch, -1, 1);
    test_fill(&rng, c, nc * batch, -1, 1);
    float alpha = 0.75f, beta = out_r == LMK_ROUND_NONE ? 0.5f : 0.0f;
    for (int q = 0; q < batch; q++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int p = 0; p < k; p++)
                    s += (double)lmk_round_value((float)ref_at(a + q * na, ta, m, k, i, p), in_r) *
                         lmk_round_value((float)ref_at(bm + q * nb, tb, k, n, p, j), in_r);
                size_t ci = q * nc + (size_t)i * n + j;
                want[ci] = (float)(alpha * s + beta * c[ci]);
            }
    lmk_gemm g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .batch = batch,
                  .stride_a = (int64_t)na, .stride_b = (int64_t)nb, .stride_c = (int64_t)nc,
                  .alpha = alpha, .beta = beta, .in_round = in_r, .out_round = out_r};
    MUST(B->gemm(B, &g, c, a, bm));
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d batch %d round %d/%d", ta, tb, m, n, k,
             batch, in_r, out_r);
    double rtol = out_r == LMK_ROUND_BF16 ? 8e-3 : out_r == LMK_ROUND_FP16 ? 1e-3 : 1e-5;
    test_allclose(what, c, want, nc * batch, 1e-4 * sqrt(k), rtol);
    if (out_r != LMK_ROUND_NONE)
        for (size_t i = 0; i < nc * batch; i++)
            if (lmk_round_value(c[i], out_r) != c[i]) {
                CHECK(0, "%s: output %zu not rounded", what, i);
                break;
            }
    free(a), free(bm), free(c), free(want);
}

/* Leading dimensions: a GEMM on sub-matrices of wider ones (lda, ldb, ldc)
 * equals the packed GEMM on copies of those sub-matrices bit for bit, and
 * leaves C outside its sub-matrix untouched; every transpose, batch 2. */
static void test_gemm_leading_dims(void)
{
    enum { M = 19, N = 23, K = 31, W = 40, BATCH = 2 }; /* W: the wide matrices' row length */
    test_rng r = {99};
    size_t wide = (size_t)W * W;
    float *a = malloc(BATCH * wide * sizeof *a), *bm = malloc(BATCH * wide * sizeof *bm);
    float *c = malloc(BATCH * wide * sizeof *c), *c0 = malloc(BATCH * wide * sizeof *c0);
    float *ap = malloc(BATCH * wide * sizeof *ap), *bp = malloc(BATCH * wide * sizeof *bp);
    float *cp = malloc(BATCH * wide * sizeof *cp);
    if (!a || !bm || !c || !c0 || !ap || !bp || !cp)
        exit(1);
    for (size_t i = 0; i < BATCH * wide; i++) {
        a[i] = test_uniform(&r, -1, 1);
        bm[i] = test_uniform(&r, -1, 1);
        c0[i] = test_uniform(&r, -1, 1);
    }
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
            size_t off = 3 * W + 5; /* the sub-matrices start at row 3, column 5 */
            for (int q = 0; q < BATCH; q++) /* packed copies */
                for (int i = 0; i < W; i++)
                    for (int j = 0; j < W; j++) {
                        size_t w = q * wide + off + (size_t)i * W + j;
                        if (i < ar && j < ac)
                            ap[q * wide + (size_t)i * ac + j] = a[w];
                        if (i < br && j < bc)
                            bp[q * wide + (size_t)i * bc + j] = bm[w];
                        if (i < M && j < N)
                            cp[q * wide + (size_t)i * N + j] = c0[w];
                    }
            memcpy(c, c0, BATCH * wide * sizeof *c);
            lmk_gemm g = {.trans_a = ta, .trans_b = tb, .m = M, .n = N, .k = K, .batch = BATCH,
                          .stride_a = (int64_t)wide, .stride_b = (int64_t)wide, .stride_c = (int64_t)wide,
                          .alpha = 0.75f, .beta = 0.5f, .lda = W, .ldb = W, .ldc = W};
            MUST(B->gemm(B, &g, c + off, a + off, bm + off));
            g.lda = g.ldb = g.ldc = 0;
            MUST(B->gemm(B, &g, cp, ap, bp));
            size_t bad = 0;
            for (int q = 0; q < BATCH; q++)
                for (int i = 0; i < W; i++)
                    for (int j = 0; j < W; j++) {
                        size_t w = q * wide + (size_t)i * W + j;
                        int in = i >= 3 && i < 3 + M && j >= 5 && j < 5 + N;
                        float want = in ? cp[q * wide + (size_t)(i - 3) * N + (j - 5)] : c0[w];
                        bad += memcmp(&c[w], &want, sizeof want) != 0;
                    }
            CHECK(bad == 0, "gemm ta=%d tb=%d with leading dimensions: %zu elements differ", ta, tb, bad);
        }
    free(a), free(bm), free(c), free(c0), free(ap), free(bp), free(cp);
}

static void test_gemm(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_gemm_shape(ta, tb, 37, 45, 300, 2, LMK_ROUND_NONE, LMK_ROUND_NONE);
            test_gemm_shape(ta, tb, 130, 270, 19, 1, LMK_ROUND_NONE, LMK_ROUND_NONE);
        }
    /* the cpu GEMM's blocking edges (6×16 tiles, 192×128 and 128×256
     * blocks, 8×8 transposes while packing): m, n, k past a block and off
     * every multiple, batched */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            test_gemm_shape(ta, tb, 197, 275, 267, 2, LMK_ROUND_NONE, LMK_ROUND_NONE);
    test_gemm_shape(0, 1, 50, 40, 140, 1, LMK_ROUND_BF16, LMK_ROUND_BF16);
    test_gemm_shape(0, 0, 50, 40, 140, 1, LMK_ROUND_FP16, LMK_ROUND_NONE);
    test_gemm_shape(1, 1, 50, 40, 140, 1, LMK_ROUND_TF32, LMK_ROUND_FP16);
    test_gemm_shape(0, 1, 1, 1, 1, 3, LMK_ROUND_NONE, LMK_ROUND_NONE);
    test_gemm_shape(0, 1, 33, 17, 65, 1, LMK_ROUND_BF16, LMK_ROUND_BF16);
    test_gemm_shape(1, 0, 33, 17, 65, 1, LMK_ROUND_FP16, LMK_ROUND_FP16);
    test_gemm_shape(0, 0, 33, 17, 65, 1, LMK_ROUND_TF32, LMK_ROUND_NONE);
}

/* linear: y = x Wᵀ; dx = dy W; dW += dyᵀ x, as the model composes them */
struct lin_op { float *x, *wt; int n, din, dout; };
static void lin_fwd(fd_ctx *c)
{
    struct lin_op *o = c->op;
    lmk_gemm g = {.trans_b = 1, .m = o->n, .n = o->dout, .k = o->din, .batch = 1, .alpha = 1};
    MUST(B->gemm(B, &g, c->out, o->x, o->wt));
}

static void test_linear(void)
{
    int n = 6, din = 7, dout = 5;
    struct lin_op o = {test_alloc(n * din), test_alloc(dout * din), n, din, dout};
    float *y = test_alloc(n * dout), *w = test_alloc(n * dout), *dx = test_alloc(n * din),
          *dw = test_alloc(dout * din);
    test_fill(&rng, o.x, n * din, -1, 1);
    test_fill(&rng, o.wt, dout * din, -1, 1);
    test_fill(&rng, w, n * dout, -1, 1);
    fd_ctx c = {lin_fwd, y, w, (size_t)n * dout, &o};
    lmk_gemm gx = {.m = n, .n = din, .k = dout, .batch = 1, .alpha = 1};
    lmk_gemm gw = {.trans_a = 1, .m = dout, .n = din, .k = n, .batch = 1, .alpha = 1, .beta = 1};
    MUST(B->gemm(B, &gx, dx, w, o.wt));
    MUST(B->gemm(B, &gw, dw, w, o.x));
    test_grad_check("linear dx", J, &c, o.x, dx, n * din, 1000, 1e-2f, 1e-4, 1e-3);
    test_grad_check("linear dW", J, &c, o.wt, dw, dout * din, 1000, 1e-2f, 1e-4, 1e-3);
    free(o.x), free(o.wt), free(y), free(w), free(dx), free(dw);
}

/* --- causal softmax --------------------------------------------------------------- */
struct sm_op { float *s; int batch, T; };
static void sm_fwd(fd_ctx *c)
{
    struct sm_op *o = c->op;
    MUST(B->softmax_causal_fwd(B, c->out, o->s, LMK_F32, o->batch, o->T, 0));
}

static void test_softmax(void)
{
    int batch = 3, T = 7;
    size_t n = (size_t)batch * T * T;
    struct sm_op o = {test_alloc(n), batch, T};
    float *p = test_alloc(n), *w = test_alloc(n), *ds = test_alloc(n);
    test_fill(&rng, o.s, n, -3, 3);
    test_fill(&rng, w, n, -1, 1);
    fd_ctx c = {sm_fwd, p, w, n, &o};
    sm_fwd(&c);
    for (int r = 0; r < batch * T; r++) {
        int i = r % T;
        double sum = 0;
        for (int j = 0; j < T; j++) {
            sum += p[r * T + j];
            if (j > i)
                CHECK(p[r * T + j] == 0.0f, "softmax: masked entry (%d, %d) = %g", i, j, p[r * T + j]);
        }
        CHECK(fabs(sum - 1.0) < 1e-6, "softmax: row %d sums to %.9f", r, sum);
    }
    MUST(B->softmax_causal_bwd(B, ds, w, p, LMK_F32, batch, T, 0));
    test_grad_check("softmax bwd", J, &c, o.s, ds, n, 1000, 1e-2f, 1e-4, 1e-2);
    /* in place (p recomputed: the check left it perturbed) */
    sm_fwd(&c);
    MUST(B->softmax_causal_bwd(B, ds, w, p, LMK_F32, batch, T, 0));
    float *dp = test_alloc(n);
    memcpy(dp, w, n * sizeof *dp);
    MUST(B->softmax_causal_bwd(B, dp, dp, p, LMK_F32, batch, T, 0));
    CHECK(memcmp(dp, ds, n * sizeof *dp) == 0, "softmax bwd in place differs");
    free(o.s), free(p), free(w), free(ds), free(dp);
}

/* --- swiglu -------------------------------------------------------------------------- */
struct sw_op { float *a, *g; size_t n; };
static void sw_fwd(fd_ctx *c)
{
    struct sw_op *o = c->op;
    MUST(B->swiglu_fwd(B, c->out, o->a, o->g, LMK_F32, o->n, (int)o->n, (int64_t)o->n));
}

static void test_swiglu(void)
{
    size_t n = 64;
    struct sw_op o = {test_alloc(n), test_alloc(n), n};
    float *y = test_alloc(n), *w = test_alloc(n), *da = test_alloc(n), *dg = test_alloc(n);
    test_fill(&rng, o.a, n, -4, 4);
    test_fill(&rng, o.g, n, -2, 2);
    test_fill(&rng, w, n, -1, 1);
    fd_ctx c = {sw_fwd, y, w, n, &o};
    sw_fwd(&c);
    for (size_t i = 0; i < n; i++) {
        double want = o.a[i] / (1.0 + exp(-(double)o.a[i])) * o.g[i];
        CHECK(test_close(y[i], want, 1e-6, 1e-5), "swiglu fwd [%zu] %g vs %g", i, y[i], want);
    }
    MUST(B->swiglu_bwd(B, da, dg, w, o.a, o.g, LMK_F32, n, (int)n, (int64_t)n));
    test_grad_check("swiglu da", J, &c, o.a, da, n, 1000, 1e-2f, 1e-4, 1e-3);
    test_grad_check("swiglu dg", J, &c, o.g, dg, n, 1000, 1e-2f, 1e-4, 1e-3);
    /* a and g as the two halves of rows ld = 2·cols + 3 apart (w1 x, w3 x of a
     * fused projection, plus a gap): the values of the packed op; da, dg
     * land in the same places and the gap keeps its poison */
    enum { ROWS = 4, COLS = 16, LD = 2 * COLS + 3 };
    float *wide = test_alloc(ROWS * LD), *dwide = test_alloc(ROWS * LD), *y2 = test_alloc(n);
    for (int i = 0; i < ROWS * LD; i++)
        wide[i] = 100.0f, dwide[i] = -7.0f;
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < COLS; j++)
            wide[r * LD + j] = o.a[r * COLS + j], wide[r * LD + COLS + j] = o.g[r * COLS + j];
    sw_fwd(&c); /* y again: the gradient checks evaluated perturbed inputs into it */
    MUST(B->swiglu_fwd(B, y2, wide, wide + COLS, LMK_F32, n, COLS, LD));
    CHECK(memcmp(y, y2, n * sizeof *y) == 0, "swiglu_fwd with rows %d apart differs", LD);
    MUST(B->swiglu_bwd(B, dwide, dwide + COLS, w, wide, wide + COLS, LMK_F32, n, COLS, LD));
    int same = 1, gap = 1;
    for (int r = 0; r < ROWS; r++) {
        for (int j = 0; j < COLS; j++)
            same &= dwide[r * LD + j] == da[r * COLS + j] && dwide[r * LD + COLS + j] == dg[r * COLS + j];
        for (int j = 2 * COLS; j < LD; j++)
            gap &= dwide[r * LD + j] == -7.0f;
    }
    CHECK(same && gap, "swiglu_bwd with rows %d apart: values %s, gap %s", LD, same ? "ok" : "differ",
          gap ? "untouched" : "written");
    CHECK(B->swiglu_fwd(B, y2, o.a, o.g, LMK_F32, n, COLS, COLS - 1) == LMK_INVALID, "swiglu ld < cols accepted");
    CHECK(B->swiglu_fwd(B, y2, o.a, o.g, LMK_F32, n, 7, 7) == LMK_INVALID, "swiglu n %% cols != 0 accepted");
    free(wide), free(dwide), free(y2);
    free(o.a), free(o.g), free(y), free(w), free(da), free(dg);
}

/* --- cross-entropy ------------------------------------------------------------------------- */
struct ce_op { float *z; int32_t *t; int n, V; float loss; };
static double ce_J(void *p)
{
    struct ce_op *o = p;
    MUST(B->cross_entropy(B, &o->loss, NULL, o->z, o->t, o->n, o->V, 1.0f));
    return o->loss;
}

static void test_cross_entropy(void)
{
    int n = 6, V = 9;
    struct ce_op o = {test_alloc(n * V), calloc(n, sizeof(int32_t)), n, V, 0};
    float *dz = test_alloc(n * V);
    test_fill(&rng, o.z, n * V, -3, 3);
    for (int i = 0; i < n; i++)
        o.t[i] = (int32_t)(test_next(&rng) % V);
    double want = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < V; j++)
            s += exp((double)o.z[i * V + j]);
        want += log(s) - o.z[i * V + o.t[i]];
    }
    want /= n;
    float loss;
    MUST(B->cross_entropy(B, &loss, dz, o.z, o.t, n, V, 1.0f));
    CHECK(test_close(loss, want, 1e-6, 1e-6), "cross-entropy %.9g want %.9g", loss, want);
    test_grad_check("cross-entropy dlogits", ce_J, &o, o.z, dz, n * V, 1000, 1e-2f, 1e-5, 1e-3);
    /* in place, scaled */
    float *z2 = test_alloc(n * V);
    memcpy(z2, o.z, n * V * sizeof *z2);
    MUST(B->cross_entropy(B, &loss, z2, z2, o.t, n, V, 4.0f));
    for (int i = 0; i < n * V; i++)
        dz[i] *= 4.0f;
    test_allclose("cross-entropy in place x4", z2, dz, n * V, 1e-7, 1e-6);
    o.t[0] = V;
    CHECK(B->cross_entropy(B, &loss, NULL, o.z, o.t, n, V, 1.0f) != 0, "target out of range accepted");
    free(o.z), free(o.t), free(dz), free(z2);
}

/* --- embedding ------------------------------------------------------------------------------ */
struct emb_op { float *wt; int32_t *ids; int n, d, V; };
static void emb_fwd(fd_ctx *c)
{
    struct emb_op *o = c->op;
    MUST(B->embedding_fwd(B, c->out, o->ids, o->wt, o->n, o->d, o->V));
}

static void test_embedding(void)
{
    int n = 7, d = 4, V = 5;
    int32_t ids[7] = {0, 3, 3, 1, 4, 3, 0};
    struct emb_op o = {test_alloc(V * d), ids, n, d, V};
    float *out = test_alloc(n * d), *w = test_alloc(n * d), *dw = test_alloc(V * d);
    test_fill(&rng, o.wt, V * d, -1, 1);
    test_fill(&rng, w, n * d, -1, 1);
    fd_ctx c = {emb_fwd, out, w, (size_t)n * d, &o};
    emb_fwd(&c);
    CHECK(out[2 * d + 1] == o.wt[3 * d + 1], "embedding gathers the wrong row");
    MUST(B->embedding_bwd(B, dw, w, ids, n, d, V));
    test_grad_check("embedding dW", J, &c, o.wt, dw, V * d, 1000, 1e-2f, 1e-5, 1e-4);
    free(o.wt), free(out), free(w), free(dw);
}

/* --- optimizer -------------------------------------------------------------------------------- */
static void test_adamw(void)
{
    float p[3] = {0.5f, -1.0f, 2.0f}, g1[3] = {0.1f, -0.2f, 0.0f}, g2[3] = {-0.3f, 0.05f, 1.0f};
    float m[3] = {0}, v[3] = {0};
    double P[3] = {0.5, -1.0, 2.0}, M[3] = {0}, Vv[3] = {0};
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    for (int t = 1; t <= 2; t++) {
        const float *g = t == 1 ? g1 : g2;
        lmk_adamw_hp hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t, NULL, LMK_ROUND_NONE};
        MUST(B->adamw(B, p, g, m, v, 3, &hp, NULL));
        double at = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
        for (int i = 0; i < 3; i++) { /* the CS336 step, by hand */
            M[i] = b1 * M[i] + (1 - b1) * g[i];
            Vv[i] = b2 * Vv[i] + (1 - b2) * (double)g[i] * g[i];
            P[i] -= at * M[i] / (sqrt(Vv[i]) + eps);
            P[i] -= lr * wd * P[i];
        }
    }
    for (int i = 0; i < 3; i++)
        CHECK(test_close(p[i], P[i], 1e-7, 1e-6), "adamw p[%d] %.9g want %.9g", i, p[i], P[i]);
    /* first step by hand for p0: m=0.01, v=1e-5, alpha=1e-3·sqrt(1e-3)/0.1 */
    float q[1] = {0.5f}, gq[1] = {0.1f}, mq[1] = {0}, vq[1] = {0};
    lmk_adamw_hp hp1 = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, NULL, LMK_ROUND_NONE};
    MUST(B->adamw(B, q, gq, mq, vq, 1, &hp1, NULL));
    double expect = 0.5 - 1e-3 * sqrt(1e-3) / 0.1 * 0.01 / (sqrt(1e-5) + 1e-8);
    expect -= 1e-5 * expect;
    CHECK(test_close(q[0], expect, 1e-7, 1e-6), "adamw first step %.9g want %.9g", q[0], expect);
    /* factor 0 skips the step entirely */
    float zero = 0.0f, before = q[0], mb = mq[0];
    MUST(B->adamw(B, q, gq, mq, vq, 1, &hp1, &zero));
    CHECK(q[0] == before && mq[0] == mb, "adamw with factor 0 changed state");
}

/* The multi-tensor forms equal one call per tensor bit for bit (three
 * tensors of different sizes, two steps, the second with a factor). */
static void test_optimizer_multi(void)
{
    enum { TOTAL = 1 + 7 + 70000 };
    static const size_t n[3] = {1, 7, 70000};
    float *buf = malloc(7 * TOTAL * sizeof *buf);
    if (!buf)
        exit(1);
    test_rng r = {77};
    for (size_t i = 0; i < 7 * (size_t)TOTAL; i++)
        buf[i] = test_uniform(&r, 0.0f, 0.5f);
    float *g = buf, *pa = buf + TOTAL, *ma = pa + TOTAL, *va = ma + TOTAL;
    float *pb = va + TOTAL, *mb = pb + TOTAL, *vb = mb + TOTAL;
    memcpy(pb, pa, 3 * TOTAL * sizeof *buf); /* pb, mb, vb = pa, ma, va */
    lmk_opt_tensor ts[3];
    float ss_a = 2.5f, ss_b = 2.5f, half = 0.5f;
    for (size_t i = 0, at = 0; i < 3; at += n[i], i++) {
        ts[i] = (lmk_opt_tensor){pb + at, g + at, mb + at, vb + at, n[i], NULL};
        MUST(B->sum_squares(B, &ss_a, g + at, n[i]));
    }
    MUST(B->sum_squares_multi(B, &ss_b, ts, 3));
    CHECK(memcmp(&ss_a, &ss_b, sizeof ss_a) == 0, "sum_squares_multi %.9g, per tensor %.9g",
          ss_b, ss_a);
    for (int t = 1; t <= 2; t++) {
        lmk_adamw_hp hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t, NULL, LMK_ROUND_NONE};
        const float *f = t == 2 ? &half : NULL;
        for (size_t i = 0, at = 0; i < 3; at += n[i], i++)
            MUST(B->adamw(B, pa + at, g + at, ma + at, va + at, n[i], &hp, f));
        MUST(B->adamw_multi(B, ts, 3, &hp, f));
    }
    CHECK(memcmp(pa, pb, 3 * TOTAL * sizeof *buf) == 0, "adamw_multi differs from per-tensor adamw");
    free(buf);
}

/* The fused forms are the unfused sequences bit for bit: add_rmsnorm_fwd =
 * add + rmsnorm_fwd (also with y aliasing x1); rmsnorm_bwd_add =
 * rmsnorm_bwd + add + cast_half (dres and dx16 NULL: rmsnorm_bwd);
 * adamw_multi's 16-bit copies = cast_half of the updated parameters, left
 * as they were by a skipped step (factor 0); the causal softmax with
 * zero_block writes each row up to its block's end as the whole-row form
 * does (the cpu leaves the rest untouched). */
static uint16_t *half_of(float *x, size_t n, lmk_round r);

static void test_fused(void)
{
    enum { ROWS = 9, D = 37, N = ROWS * D };
    for (int k = 0; k < 2; k++) {
        lmk_round r = k ? LMK_ROUND_FP16 : LMK_ROUND_BF16;
        lmk_dtype dt = k ? LMK_F16 : LMK_BF16;
        float *x1 = test_alloc(N), *x2 = test_alloc(N), *w = test_alloc(D), *y1 = test_alloc(N),
              *y2 = test_alloc(N), *rs1 = test_alloc(ROWS), *rs2 = test_alloc(ROWS), *dy = test_alloc(N),
              *dres = test_alloc(N), *dx1 = test_alloc(N), *dx2 = test_alloc(N), *dw1 = test_alloc(D),
              *dw2 = test_alloc(D);
        test_fill(&rng, x1, N, -2, 2);
        test_fill(&rng, x2, N, -1, 1);
        test_fill(&rng, w, D, 0.5, 1.5);
        test_fill(&rng, dy, N, -1, 1);
        test_fill(&rng, dres, N, -1, 1);
        uint16_t *x2h = half_of(x2, N, r), *dyh = half_of(dy, N, r), *o1 = malloc(N * 2), *o2 = malloc(N * 2);
        MUST(B->add(B, y1, x1, x2h, dt, N));
        MUST(B->rmsnorm_fwd(B, o1, dt, rs1, y1, w, ROWS, D, 1e-5f));
        MUST(B->add_rmsnorm_fwd(B, y2, x1, x2h, dt, o2, dt, rs2, w, ROWS, D, 1e-5f));
        CHECK(memcmp(y1, y2, N * 4) == 0 && memcmp(o1, o2, N * 2) == 0 && memcmp(rs1, rs2, ROWS * 4) == 0,
              "add_rmsnorm_fwd fmt %d differs from add + rmsnorm_fwd", r);
        memcpy(y2, x1, N * 4);
        MUST(B->add_rmsnorm_fwd(B, y2, y2, x2h, dt, o2, dt, rs2, w, ROWS, D, 1e-5f));
        CHECK(memcmp(y1, y2, N * 4) == 0 && memcmp(o1, o2, N * 2) == 0, "add_rmsnorm_fwd in place fmt %d", r);
        memset(dw1, 0, D * 4), memset(dw2, 0, D * 4);
        MUST(B->rmsnorm_bwd(B, dx1, dw1, dyh, dt, y1, w, rs1, ROWS, D));
        MUST(B->add(B, dx1, dx1, dres, LMK_F32, N));
        MUST(B->cast_half(B, o1, dx1, N, r));
        MUST(B->rmsnorm_bwd_add(B, dx2, o2, r, dw2, dyh, dt, dres, y1, w, rs1, ROWS, D));
        CHECK(memcmp(dx1, dx2, N * 4) == 0 && memcmp(dw1, dw2, D * 4) == 0 && memcmp(o1, o2, N * 2) == 0,
              "rmsnorm_bwd_add fmt %d differs from rmsnorm_bwd + add + cast_half", r);
        MUST(B->rmsnorm_bwd(B, dx1, dw1, dyh, dt, y1, w, rs1, ROWS, D));
        MUST(B->rmsnorm_bwd_add(B, dx2, NULL, r, dw2, dyh, dt, NULL, y1, w, rs1, ROWS, D));
        CHECK(memcmp(dx1, dx2, N * 4) == 0 && memcmp(dw1, dw2, D * 4) == 0,
              "rmsnorm_bwd_add without dres differs from rmsnorm_bwd");
        CHECK(B->rmsnorm_bwd_add(B, dx2, o2, LMK_ROUND_TF32, dw2, dyh, dt, dres, y1, w, rs1, ROWS, D) ==
                  LMK_INVALID, "rmsnorm_bwd_add with a tf32 copy accepted");
        /* adamw_multi with 16-bit copies (two tensors, one without), then a skipped step */
        float *p = test_alloc(N), *g = test_alloc(N), *m = test_alloc(N), *v = test_alloc(N), zero = 0.0f;
        test_fill(&rng, p, N, -1, 1);
        test_fill(&rng, g, N, -1, 1);
        memset(m, 0, N * 4), memset(v, 0, N * 4);
        lmk_opt_tensor ts[2] = {{p, g, m, v, 100, o2}, {p + 100, g + 100, m + 100, v + 100, N - 100, NULL}};
        lmk_adamw_hp hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, NULL, r};
        MUST(B->adamw_multi(B, ts, 2, &hp, NULL));
        MUST(B->cast_half(B, o1, p, 100, r));
        CHECK(memcmp(o1, o2, 100 * 2) == 0, "adamw_multi's 16-bit copy fmt %d differs from cast_half of p", r);
        test_fill(&rng, g, N, -1, 1);
        hp.t = 2;
        MUST(B->adamw_multi(B, ts, 2, &hp, &zero));
        CHECK(memcmp(o1, o2, 100 * 2) == 0, "a skipped step changed the 16-bit copy");
        hp.copy_fmt = LMK_ROUND_NONE;
        CHECK(B->adamw_multi(B, ts, 2, &hp, NULL) == LMK_INVALID, "adamw_multi with a copy but no format accepted");
        free(p), free(g), free(m), free(v);
        free(x1), free(x2), free(w), free(y1), free(y2), free(rs1), free(rs2), free(dy), free(dres);
        free(dx1), free(dx2), free(dw1), free(dw2), free(x2h), free(dyh), free(o1), free(o2);
    }
    /* softmax with causal blocks of 4 over T 10: rows write up to 4, 8, 10 */
    enum { SB = 2, ST = 10, ZB = 4, NS = SB * ST * ST };
    float *s = test_alloc(NS), *pf = test_alloc(NS), *pb = test_alloc(NS), *dp = test_alloc(NS),
          *dsf = test_alloc(NS), *dsb = test_alloc(NS);
    test_fill(&rng, s, NS, -3, 3);
    test_fill(&rng, dp, NS, -1, 1);
    for (int i = 0; i < NS; i++)
        pb[i] = dsb[i] = 7.0f;
    MUST(B->softmax_causal_fwd(B, pf, s, LMK_F32, SB, ST, 0));
    MUST(B->softmax_causal_fwd(B, pb, s, LMK_F32, SB, ST, ZB));
    MUST(B->softmax_causal_bwd(B, dsf, dp, pf, LMK_F32, SB, ST, 0));
    MUST(B->softmax_causal_bwd(B, dsb, dp, pf, LMK_F32, SB, ST, ZB));
    int bad = 0;
    for (int row = 0; row < SB * ST; row++) {
        int i = row % ST, end = (i / ZB + 1) * ZB < ST ? (i / ZB + 1) * ZB : ST;
        for (int j = 0; j < ST; j++) {
            size_t at = (size_t)row * ST + j;
            if (j < end ? pb[at] != pf[at] || dsb[at] != dsf[at] : pb[at] != 7.0f || dsb[at] != 7.0f)
                bad++;
        }
    }
    CHECK(bad == 0, "softmax with zero_block: %d entries differ from the whole-row form (or written beyond)", bad);
    free(s), free(pf), free(pb), free(dp), free(dsf), free(dsb);
}

static void test_clip(void)
{
    float g[4] = {3, 4, 0, 0}, ss = 0, f;
    MUST(B->sum_squares(B, &ss, g, 4));
    CHECK(ss == 25.0f, "sum of squares %g", ss);
    MUST(B->clip_factor(B, &f, &ss, 1.0f, 1.0f));
    CHECK(test_close(f, 1.0 / (5.0 + 1e-6), 1e-9, 1e-6), "clip factor %g", f);
    MUST(B->clip_factor(B, &f, &ss, 10.0f, 1.0f));
    CHECK(f == 1.0f, "no clip expected, got %g", f);
    MUST(B->clip_factor(B, &f, &ss, 0.0f, 0.5f));
    CHECK(f == 0.5f, "unscale only expected, got %g", f);
    ss = INFINITY;
    MUST(B->clip_factor(B, &f, &ss, 1.0f, 1.0f));
    CHECK(f == 0.0f, "non-finite norm must give factor 0, got %g", f);
}

/* --- rounding ------------------------------------------------------------------------------------ */
static void test_rounding(void)
{
    int bad_bf = 0, bad_fp = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)test_next(&rng);
        float x;
        memcpy(&x, &u, sizeof x);
        if (isnan(x))
            continue;
        float rb = lmk_round_value(x, LMK_ROUND_BF16), wb = lmk_bf16_round(x);
        float rf = lmk_round_value(x, LMK_ROUND_FP16), wf = lmk_fp16_round(x);
        if (rb != wb && !bad_bf++)
            CHECK(0, "bf16 round of %a: %a want %a", x, rb, wb);
        if (rf != wf && !(rf == 0 && wf == 0) && !bad_fp++)
            CHECK(0, "fp16 round of %a: %a want %a", x, rf, wf);
    }
    CHECK(isinf(lmk_round_value(65520.0f, LMK_ROUND_FP16)), "fp16: 65520 must overflow");
    CHECK(lmk_round_value(65519.0f, LMK_ROUND_FP16) == 65504.0f, "fp16: 65519 → 65504");
    CHECK(lmk_round_value(0x1p-25f, LMK_ROUND_FP16) == 0.0f, "fp16: 2^-25 ties to 0");
    CHECK(lmk_round_value(0x1.8p-25f, LMK_ROUND_FP16) == 0x1p-24f, "fp16: smallest subnormal");
    CHECK(lmk_round_value(1.0f + 0x1p-8f, LMK_ROUND_BF16) == 1.0f, "bf16: tie to even");
    CHECK(lmk_round_value(1.0f + 0x1.8p-8f, LMK_ROUND_BF16) == 1.0f + 0x1p-7f, "bf16: round up");
    CHECK(lmk_round_value(1.0f + 0x1p-11f, LMK_ROUND_TF32) == 1.0f, "tf32: tie to even");
    CHECK(lmk_round_value(1.0f + 0x1p-10f, LMK_ROUND_TF32) == 1.0f + 0x1p-10f, "tf32: exact");
    /* the CS336 accumulation numbers through the same rounding */
    float acc = 0.0f, h = lmk_round_value(0.01f, LMK_ROUND_FP16);
    for (int i = 0; i < 1000; i++)
        acc = lmk_round_value(acc + h, LMK_ROUND_FP16);
    CHECK(fabs(acc - 9.9531) < 1e-4, "fp16 accumulation gives %.4f, want 9.9531", acc);
    float c[4] = {1.0f / 3, 2.5f, -7.1f, 1e-6f}, o[4];
    MUST(B->cast(B, o, c, 4, LMK_ROUND_BF16));
    for (int i = 0; i < 4; i++)
        CHECK(o[i] == lmk_bf16_round(c[i]), "cast bf16 [%d]", i);
}

static void test_elementwise(void)
{
    float a[3] = {1, 2, 3}, b2[3] = {0.5f, -2, 4}, y[3];
    MUST(B->add(B, y, a, b2, LMK_F32, 3));
    CHECK(y[0] == 1.5f && y[1] == 0.0f && y[2] == 7.0f, "add");
    MUST(B->add(B, a, a, b2, LMK_F32, 3));
    CHECK(a[2] == 7.0f, "add in place");
    MUST(B->scale(B, a, 3, 2.0f));
    CHECK(a[2] == 14.0f, "scale");
}

/* --- real 16-bit storage: cast_half, gemm_half ------------------------------------------------- */
static void test_cast_half(void)
{
    enum { N = 4099 };
    float *x = test_alloc(N);
    uint16_t *h = malloc(N * sizeof *h);
    test_fill(&rng, x, N, -70000, 70000); /* fp16 overflow included */
    x[0] = 1.0f + 0x1p-8f, x[1] = 0x1.8p-25f, x[2] = 65519.0f, x[3] = -0.0f, x[4] = INFINITY;
    for (int f = 0; f < 2; f++) {
        lmk_round r = f ? LMK_ROUND_FP16 : LMK_ROUND_BF16;
        memset(h, 0xa5, N * sizeof *h); /* poison */
        MUST(B->cast_half(B, h, x, N, r));
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float back = r == LMK_ROUND_BF16 ? lmk_bf16_to_float(h[i]) : lmk_fp16_to_float(h[i]);
            float want = lmk_round_value(x[i], r);
            if (memcmp(&back, &want, sizeof back) != 0 && !bad++)
                CHECK(0, "cast_half %d [%d]: %a -> %a want %a", r, i, x[i], back, want);
        }
    }
    CHECK(B->cast_half(B, h, x, N, LMK_ROUND_TF32) == LMK_INVALID, "cast_half tf32 accepted");
    free(x), free(h);
}

/* gemm_half on 16-bit copies of either or both inputs equals gemm on the
 * float32 originals bit for bit (same rounded values, same order). */
static void test_gemm_half(void)
{
    static const int shapes[][7] = {
        /* ta, tb, m, n, k, batch, out_round from in_round */
        {0, 1, 37, 70, 300, 1, 1}, {1, 0, 64, 33, 129, 1, 0}, {0, 0, 17, 23, 40, 3, 1},
        {1, 1, 9, 300, 65, 2, 0},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int ta = shapes[s][0], tb = shapes[s][1], m = shapes[s][2], n = shapes[s][3],
            k = shapes[s][4], batch = shapes[s][5];
        size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
        float *a = test_alloc(na * batch), *bm = test_alloc(nb * batch),
              *want = test_alloc(nc * batch), *got = test_alloc(nc * batch);
        uint16_t *ah = malloc(na * batch * 2), *bh = malloc(nb * batch * 2);
        test_fill(&rng, a, na * batch, -2, 2);
        test_fill(&rng, bm, nb * batch, -2, 2);
        for (int f = 0; f < 2; f++) {
            lmk_round r = f ? LMK_ROUND_FP16 : LMK_ROUND_BF16;
            lmk_gemm g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .batch = batch,
                          .stride_a = (int64_t)na, .stride_b = (int64_t)nb,
                          .stride_c = (int64_t)nc, .alpha = 0.5f, .in_round = r,
                          .out_round = shapes[s][6] ? r : LMK_ROUND_NONE};
            MUST(B->gemm(B, &g, want, a, bm));
            MUST(B->cast_half(B, ah, a, na * batch, r));
            MUST(B->cast_half(B, bh, bm, nb * batch, r));
            for (int mode = 1; mode < 4; mode++) { /* which inputs are 16-bit */
                int a16 = mode & 1, b16 = (mode >> 1) & 1;
                test_fill(&rng, got, nc * batch, 1e30f, 1e30f); /* poison */
                MUST(B->gemm_half(B, &g, got, a16 ? (const void *)ah : a, a16,
                                  b16 ? (const void *)bh : bm, b16));
                CHECK(memcmp(got, want, nc * batch * sizeof *got) == 0,
                      "gemm_half shape %zu fmt %d mode %d differs from gemm", s, r, mode);
            }
            g.in_round = LMK_ROUND_TF32;
            CHECK(B->gemm_half(B, &g, got, ah, 1, bm, 0) == LMK_INVALID,
                  "gemm_half with 16-bit input under tf32 accepted");
        }
        free(a), free(bm), free(want), free(got), free(ah), free(bh);
    }
}

/* --- 16-bit storage ------------------------------------------------------------------------ */

/* x (n) := its values rounded to r (what a 16-bit tensor of them holds), and
 * *h (new, n 16-bit) those values' bits. */
static uint16_t *half_of(float *x, size_t n, lmk_round r)
{
    uint16_t *h = malloc(n * sizeof *h);
    MUST(B->cast_half(B, h, x, n, r));
    MUST(B->cast_float(B, x, h, n, r));
    return h;
}

/* n 16-bit values equal the float32 ones rounded once (bit for bit). */
static void check_rounded_once(const char *what, const uint16_t *got, const float *f32, size_t n,
                               lmk_round r)
{
    uint16_t *want = malloc(n * sizeof *want);
    MUST(B->cast_half(B, want, f32, n, r));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && !bad++)
            first = i;
    CHECK(bad == 0, "%s fmt %d: %zu of %zu differ from the float32 op rounded once (first [%zu] %04x vs %04x)",
          what, r, bad, n, first, bad ? got[first] : 0, bad ? want[first] : 0);
    free(want);
}

/* The ops with a dtype argument: with 16-bit tensors they equal the float32
 * op on the same (widened) values, the outputs rounded once to nearest
 * even; gemm_half's c_half likewise (beta 0 only). */
static void test_half_storage(void)
{
    enum { Bt = 2, T = 9, H = 3, DH = 8, D = H * DH, NT = Bt * T, ROWS = 5, DR = 40 };
    for (int f = 0; f < 2; f++) {
        lmk_round r = f ? LMK_ROUND_FP16 : LMK_ROUND_BF16;
        lmk_dtype dt = f ? LMK_F16 : LMK_BF16;
        /* rope forward and backward (and plain split / merge) */
        size_t n = (size_t)NT * D;
        float *in = test_alloc(n), *out = test_alloc(n), *tab = test_alloc((size_t)T * DH);
        uint16_t *o16 = malloc(n * 2);
        test_fill(&rng, in, n, -3, 3);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < DH / 2; k++) {
                double a = t * pow(10000.0, -2.0 * k / DH);
                tab[(t * DH / 2 + k) * 2] = (float)cos(a), tab[(t * DH / 2 + k) * 2 + 1] = (float)sin(a);
            }
        uint16_t *i16 = half_of(in, n, r);
        for (int tb = 0; tb < 2; tb++) {
            const float *table = tb ? tab : NULL;
            MUST(B->rope_fwd(B, out, in, LMK_F32, table, Bt, T, H, DH, D));
            MUST(B->rope_fwd(B, o16, i16, dt, table, Bt, T, H, DH, D));
            check_rounded_once(tb ? "rope_fwd" : "head split", o16, out, n, r);
            MUST(B->rope_bwd(B, out, in, LMK_F32, table, Bt, T, H, DH, D));
            MUST(B->rope_bwd(B, o16, i16, dt, table, Bt, T, H, DH, D));
            check_rounded_once(tb ? "rope_bwd" : "head merge", o16, out, n, r);
        }
        /* swiglu */
        float *a = test_alloc(n), *g = test_alloc(n), *dy = test_alloc(n), *da = test_alloc(n),
              *dg = test_alloc(n);
        test_fill(&rng, a, n, -4, 4);
        test_fill(&rng, g, n, -2, 2);
        test_fill(&rng, dy, n, -1, 1);
        uint16_t *a16 = half_of(a, n, r), *g16 = half_of(g, n, r), *dy16 = half_of(dy, n, r);
        uint16_t *da16 = malloc(n * 2), *dg16 = malloc(n * 2);
        MUST(B->swiglu_bwd(B, da, dg, dy, a, g, LMK_F32, n, (int)n, (int64_t)n));
        MUST(B->swiglu_bwd(B, da16, dg16, dy16, a16, g16, dt, n, (int)n, (int64_t)n));
        check_rounded_once("swiglu_bwd da", da16, da, n, r);
        check_rounded_once("swiglu_bwd dg", dg16, dg, n, r);
        MUST(B->swiglu_fwd(B, o16, a16, g16, dt, n, (int)n, (int64_t)n));
        for (size_t i = 0; i < n; i++) /* autocast: silu rounded, then the product rounded */
            out[i] = lmk_round_value(a[i] / (1.0f + expf(-a[i])), r) * g[i];
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            float got = f ? lmk_fp16_to_float(o16[i]) : lmk_bf16_to_float(o16[i]);
            float want = lmk_round_value(out[i], r);
            if (!test_close(got, want, 1e-6, f ? 0x1p-10 : 0x1p-7) && !bad++)
                CHECK(0, "swiglu_fwd fmt %d [%zu] %g vs %g", r, i, got, want);
        }
        /* add: float32 + 16-bit */
        MUST(B->add(B, da, in, dy, LMK_F32, n));
        MUST(B->add(B, dg, in, dy16, dt, n));
        CHECK(memcmp(da, dg, n * sizeof *da) == 0, "add with a 16-bit x2 fmt %d", r);
        /* rmsnorm: 16-bit output, 16-bit dout */
        float *x = test_alloc((size_t)ROWS * DR), *w = test_alloc(DR), *rs = test_alloc(ROWS),
              *y = test_alloc((size_t)ROWS * DR), *dx = test_alloc((size_t)ROWS * DR),
              *dx2 = test_alloc((size_t)ROWS * DR), *dw = test_alloc(DR), *dw2 = test_alloc(DR);
        uint16_t *y16 = malloc((size_t)ROWS * DR * 2);
        test_fill(&rng, x, (size_t)ROWS * DR, -2, 2);
        test_fill(&rng, w, DR, 0.5, 1.5);
        MUST(B->rmsnorm_fwd(B, y, LMK_F32, rs, x, w, ROWS, DR, 1e-5f));
        MUST(B->rmsnorm_fwd(B, y16, dt, rs, x, w, ROWS, DR, 1e-5f));
        check_rounded_once("rmsnorm_fwd", y16, y, (size_t)ROWS * DR, r);
        test_fill(&rng, y, (size_t)ROWS * DR, -1, 1);
        free(y16);
        y16 = half_of(y, (size_t)ROWS * DR, r);
        memset(dw, 0, DR * sizeof *dw), memset(dw2, 0, DR * sizeof *dw2);
        MUST(B->rmsnorm_bwd(B, dx, dw, y, LMK_F32, x, w, rs, ROWS, DR));
        MUST(B->rmsnorm_bwd(B, dx2, dw2, y16, dt, x, w, rs, ROWS, DR));
        CHECK(memcmp(dx, dx2, (size_t)ROWS * DR * sizeof *dx) == 0 && memcmp(dw, dw2, DR * sizeof *dw) == 0,
              "rmsnorm_bwd with a 16-bit dout fmt %d", r);
        /* causal softmax forward (in place) and backward (in place) */
        size_t ns = (size_t)Bt * T * T;
        float *s = test_alloc(ns), *p = test_alloc(ns), *dp = test_alloc(ns), *ds = test_alloc(ns);
        test_fill(&rng, s, ns, -6, 6);
        test_fill(&rng, dp, ns, -1, 1);
        uint16_t *s16 = half_of(s, ns, r), *dp16 = half_of(dp, ns, r);
        MUST(B->softmax_causal_fwd(B, p, s, LMK_F32, Bt, T, 0));
        MUST(B->softmax_causal_fwd(B, s16, s16, dt, Bt, T, 0));
        check_rounded_once("softmax_causal_fwd", s16, p, ns, r);
        MUST(B->cast_float(B, p, s16, ns, r)); /* backward from the 16-bit probabilities */
        MUST(B->softmax_causal_bwd(B, ds, dp, p, LMK_F32, Bt, T, 0));
        MUST(B->softmax_causal_bwd(B, dp16, dp16, s16, dt, Bt, T, 0));
        check_rounded_once("softmax_causal_bwd", dp16, ds, ns, r);
        /* gemm with a 16-bit output, then accumulated into (beta = 1) */
        enum { GM = 7, GN = 13, GK = 40 };
        float *ga = test_alloc(GM * GK), *gb = test_alloc(GN * GK), *c = test_alloc(GM * GN);
        uint16_t *c16 = malloc(GM * GN * 2);
        test_fill(&rng, ga, GM * GK, -2, 2);
        test_fill(&rng, gb, GN * GK, -2, 2);
        lmk_gemm gm = {.trans_b = 1, .m = GM, .n = GN, .k = GK, .batch = 1, .alpha = 0.75f,
                       .in_round = r, .out_round = r};
        MUST(B->gemm(B, &gm, c, ga, gb));
        gm.c_half = 1;
        MUST(B->gemm_half(B, &gm, c16, ga, 0, gb, 0));
        check_rounded_once("gemm c_half", c16, c, GM * GN, r);
        gm.beta = 1.0f;
        CHECK(B->gemm_half(B, &gm, c16, ga, 0, gb, 0) == LMK_INVALID, "c_half with beta 1 accepted");
        gm.beta = 0.0f;
        gm.out_round = LMK_ROUND_NONE;
        CHECK(B->gemm_half(B, &gm, c16, ga, 0, gb, 0) == LMK_INVALID, "c_half without a 16-bit out_round accepted");
        CHECK(B->rope_fwd(B, o16, i16, LMK_I32, NULL, Bt, T, H, DH, D) == LMK_INVALID, "rope int32 accepted");
        free(ga), free(gb);
        free(c), free(c16);
        free(in), free(out), free(tab), free(o16), free(i16), free(a), free(g), free(dy), free(da), free(dg);
        free(a16), free(g16), free(dy16), free(da16), free(dg16), free(x), free(w), free(rs), free(y), free(dx);
        free(dx2), free(dw), free(dw2), free(y16), free(s), free(p), free(dp), free(ds), free(s16), free(dp16);
    }
}

/* The device step counter: adamw_begin + adamw reading α_t from it equals
 * adamw with the host step number; a zero factor neither counts nor steps. */
static void test_adamw_counter(void)
{
    enum { N = 5 };
    float p1[N], p2[N], m1[N] = {0}, m2[N] = {0}, v1[N] = {0}, v2[N] = {0}, g[N];
    test_fill(&rng, p1, N, -1, 1);
    memcpy(p2, p1, sizeof p1);
    int64_t t = 0;
    float alpha = -1.0f, one = 1.0f, zero = 0.0f;
    for (int step = 1; step <= 4; step++) {
        test_fill(&rng, g, N, -1, 1);
        lmk_adamw_hp host = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, NULL, LMK_ROUND_NONE};
        MUST(B->adamw(B, p1, g, m1, v1, N, &host, NULL));
        lmk_adamw_hp dev = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0, &alpha, LMK_ROUND_NONE};
        MUST(B->adamw_begin(B, &t, &alpha, step == 2 ? &one : NULL, &dev));
        MUST(B->adamw(B, p2, g, m2, v2, N, &dev, NULL));
        CHECK(t == step, "step counter %lld after step %d", (long long)t, step);
        /* a skipped step: factor 0 */
        MUST(B->adamw_begin(B, &t, &alpha, &zero, &dev));
        MUST(B->adamw(B, p2, g, m2, v2, N, &dev, &zero));
        CHECK(t == step, "skipped step counted: %lld", (long long)t);
    }
    CHECK(memcmp(p1, p2, sizeof p1) == 0 && memcmp(m1, m2, sizeof m1) == 0 &&
              memcmp(v1, v2, sizeof v1) == 0,
          "adamw with the device step counter differs from the host step number");
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"cast_half", test_cast_half},
    {"gemm_half", test_gemm_half},
    {"half_storage", test_half_storage},
    {"adamw_counter", test_adamw_counter},
    {"rmsnorm", test_rmsnorm},
    {"rope", test_rope},
    {"gemm", test_gemm},
    {"gemm_leading_dims", test_gemm_leading_dims},
    {"linear", test_linear},
    {"softmax", test_softmax},
    {"swiglu", test_swiglu},
    {"cross_entropy", test_cross_entropy},
    {"embedding", test_embedding},
    {"adamw", test_adamw},
    {"optimizer_multi", test_optimizer_multi},
    {"fused", test_fused},
    {"clip", test_clip},
    {"rounding", test_rounding},
    {"elementwise", test_elementwise},
};

int main(int argc, char **argv)
{
    MUST(lmk_backend_cpu_create(&B));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        int before = check_failures;
        cases[i].fn();
        printf("%-14s %s\n", cases[i].name, check_failures == before ? "ok" : "FAILED");
    }
    lmk_backend_free(B);
    return check_report("engine ops");
}
