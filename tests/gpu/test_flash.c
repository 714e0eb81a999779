/* GPU test: flash attention (and the naive cuBLAS path) against the CPU
 * reference on fresh random inputs, for every dtype, supported head dim,
 * causal flag and odd sequence lengths: O, logsumexp, dQ, dK, dV within
 * |gpu − ref| ≤ atol + rtol·|ref| (tolerance by dtype). The flash backward
 * runs both ways: deterministic (atomic_dq 0: run twice, it must give the
 * same bits) and, where it exists, the single pass with dQ by atomics
 * (atomic_dq 1: within tolerance; outputs poisoned with NaN first). Grids of
 * many blocks (the unsplit kernels) are checked without the CPU reference:
 * deterministic reruns bit-equal, the single pass within tolerance of the
 * deterministic result. The wgmma single pass (flash_wgmma_bwd.cu, Hopper)
 * runs where flash_attn.cu routes to it (the many-block lines say "wgmma")
 * and directly on small grids ("wgmma*"). Exit 77 without a GPU.
 * `test_flash only DTYPE` runs the checks of one dtype (float32, bfloat16,
 * float16). fp32 has the single pass at d 64, 128, and at every d where the
 * 3xTF32 tensor-core kernels (flash_f32tc.cu) are switched on; the fp32
 * cases also hold O, dQ, dK, dV to a normwise bound, ‖gpu − ref‖ ≤ 5e-6·‖ref‖
 * (true-fp32 and 3xTF32 products both land near 1e-6; tf32 products, near
 * 3e-4, would not), where ref is not rounding noise (rms > 1e-5: dQ and dK
 * at T = 1 are 0 exactly); `test_flash bench [impl dtype B H T d causal]...` prints timing points
 * (JSON lines) instead (impl naive, flash, or flash_det: the deterministic
 * backward). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "cuda/backend_cuda.h"
#include "cuda/flash_f32tc.h"
#include "cuda/flash_wgmma_bwd.h"
#include "dtype.h"
#include "halfprec.h"
#include "status.h"

static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static float urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

/* Host buffer of dtype dt from floats (rounding), and back. */
static void to_dtype(void *dst, const float *src, size_t n, lmk_dtype dt)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == LMK_F32)
            ((float *)dst)[i] = src[i];
        else if (dt == LMK_F16)
            ((lmk_fp16 *)dst)[i] = lmk_fp16_from_double(src[i]);
        else
            ((lmk_bf16 *)dst)[i] = lmk_bf16_from_double(src[i]);
    }
}

static void from_dtype(float *dst, const void *src, size_t n, lmk_dtype dt)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == LMK_F32)
            dst[i] = ((const float *)src)[i];
        else if (dt == LMK_F16)
            dst[i] = lmk_fp16_to_float(((const lmk_fp16 *)src)[i]);
        else
            dst[i] = lmk_bf16_to_float(((const lmk_bf16 *)src)[i]);
    }
}

typedef struct tol {
    double atol, rtol;
} tol;

static tol tol_for(lmk_dtype dt, int grad)
{
    if (dt == LMK_F32)
        return (tol){grad ? 2e-4 : 1e-4, 1e-3};
    if (dt == LMK_F16)
        return (tol){grad ? 6e-3 : 3e-3, 1e-2};
    return (tol){grad ? 3e-2 : 1.5e-2, 3e-2};
}

/* Number of elements outside tolerance; *worst = max |gpu − ref|. */
static size_t compare(const float *gpu, const float *ref, size_t n, tol t, double *worst)
{
    size_t bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)gpu[i] - ref[i]);
        if (!(e <= t.atol + t.rtol * fabs(ref[i])))
            bad++;
        if (!(e <= *worst))
            *worst = e;
    }
    return bad;
}

#define CK(x)                                                                   \
    do {                                                                        \
        cudaError_t e_ = (x);                                                   \
        if (e_ != cudaSuccess) {                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,            \
                    cudaGetErrorString(e_));                                    \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* The wgmma single pass called directly (what lmk_flash_attn_bwd does
 * before it on large grids): D = rowsum(dO∘O) on the host from the GPU's O,
 * the dQ workspace zeroed. dev: q k v o dout dq dk dv (lmk_flash_wgmma_bwd's
 * order below); dout: the rounded dO. Returns a status. */
static int wgmma_bwd_direct(void **dev, float *dlse, float *dwork, const float *dout,
                            const lmk_attn_shape *s)
{
    size_t rows = (size_t)s->B * s->H * s->T, n = rows * s->d, es = lmk_dtype_size(s->dtype);
    void *hx = malloc(n * es);
    float *o = malloc(n * 4), *dsum = malloc(rows * 4);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hx, dev[3], n * es, cudaMemcpyDeviceToHost));
    from_dtype(o, hx, n, s->dtype);
    for (size_t r = 0; r < rows; r++) {
        double acc = 0;
        for (int c = 0; c < s->d; c++)
            acc += (double)dout[r * s->d + c] * o[r * s->d + c];
        dsum[r] = (float)acc;
    }
    CK(cudaMemset(dwork, 0, n * 4));
    CK(cudaMemcpy(dwork + n, dsum, rows * 4, cudaMemcpyHostToDevice));
    int rc = lmk_flash_wgmma_bwd(dev[5], dev[6], dev[7], dwork, dwork + n, dev[4], dev[0], dev[1],
                                 dev[2], dlse, s, NULL);
    free(hx);
    free(o);
    free(dsum);
    return rc;
}

/* Non-zero when dtype dt at head dim d has the single pass (dQ by atomics). */
static int has_single_pass(lmk_dtype dt, int d)
{
    const lmk_attn_shape probe = {1, 1, 64, d, 0, dt, 1};
    return dt != LMK_F32 || d % 64 == 0 || lmk_flash_f32tc_usable(&probe);
}

/* ‖gpu − ref‖ / ‖ref‖ over n elements; 0 when ref's rms is at most 1e-5
 * (rounding noise: no relative bound applies). */
static double norm_rel(const float *gpu, const float *ref, size_t n)
{
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)gpu[i] - ref[i]) * ((double)gpu[i] - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    return r > 1e-10 * (double)n ? sqrt(e / r) : 0;
}

/* fp32's normwise bound on O, dQ, dK, dV against the CPU reference. */
#define F32_NORM_RTOL 5e-6

/* One case (atomic: 0 deterministic, 1 the single pass, 2 the wgmma single
 * pass called directly); returns the number of failed tensors. */
static int run_case(lmk_attn_impl impl, lmk_dtype dt, int B, int H, int T, int d, int causal,
                    int atomic, cublasHandle_t hb)
{
    lmk_attn_shape s = {B, H, T, d, causal, dt, atomic};
    lmk_attn_shape s32 = s;
    s32.dtype = LMK_F32;
    size_t n = (size_t)B * H * T * d, rows = (size_t)B * H * T, es = lmk_dtype_size(dt);
    float *h[6], *ref[5], *got[5], *lse_ref = malloc(rows * 4), *lse_got = malloc(rows * 4);
    void *hx = malloc(n * 4);
    for (int i = 0; i < 6; i++)
        h[i] = malloc(n * 4);
    for (int i = 0; i < 5; i++) {
        ref[i] = malloc(n * 4);
        got[i] = malloc(n * 4);
    }
    /* q, k, v, dout rounded to dt; the reference sees the rounded values */
    void *dev[9];
    for (int i = 0; i < 9; i++)
        CK(cudaMalloc(&dev[i], n * es));
    float *dlse, *dwork;
    void *dp = NULL, *dpp = NULL;
    CK(cudaMalloc((void **)&dlse, rows * 4));
    CK(cudaMalloc((void **)&dwork, lmk_flash_attn_bwd_work_floats(&s) * 4));
    int in_idx[4] = {0, 1, 2, 4}; /* q k v dout among dev: q k v o dout dq dk dv */
    for (int t = 0; t < 4; t++) {
        for (size_t i = 0; i < n; i++)
            h[t][i] = urand();
        to_dtype(hx, h[t], n, dt);
        from_dtype(h[t], hx, n, dt);
        CK(cudaMemcpy(dev[in_idx[t]], hx, n * es, cudaMemcpyHostToDevice));
    }
    float *q = h[0], *k = h[1], *v = h[2], *g = h[3];
    /* reference: O, lse; gradients use the reference's O (fp32) */
    int rc = lmk_attn_cpu_fwd(ref[0], lse_ref, q, k, v, &s32);
    if (!rc)
        rc = lmk_attn_cpu_bwd(ref[1], ref[2], ref[3], g, q, k, v, ref[0], lse_ref, &s32);
    if (rc) {
        fprintf(stderr, "cpu reference failed: %d\n", rc);
        exit(1);
    }
    if (impl == LMK_ATTN_FLASH) {
        for (int i = 5; i < 8; i++)
            CK(cudaMemset(dev[i], 0xff, n * es)); /* NaN in every dtype */
        rc = lmk_flash_attn_fwd(dev[3], dlse, dev[0], dev[1], dev[2], &s, NULL);
        if (!rc && atomic == 2)
            rc = wgmma_bwd_direct(dev, dlse, dwork, h[3], &s);
        else if (!rc)
            rc = lmk_flash_attn_bwd(dev[5], dev[6], dev[7], dwork, dev[4], dev[0], dev[1], dev[2],
                                    dev[3], dlse, &s, NULL);
    } else {
        CK(cudaMalloc(&dp, rows * T * es));
        CK(cudaMalloc(&dpp, rows * T * es));
        rc = lmk_naive_attn_fwd(dev[3], dp, dev[0], dev[1], dev[2], &s, hb, NULL);
        if (!rc)
            rc = lmk_naive_attn_bwd(dev[5], dev[6], dev[7], dpp, dev[4], dev[0], dev[1], dev[2],
                                    dp, &s, hb, NULL);
    }
    CK(cudaDeviceSynchronize());
    if (rc) {
        fprintf(stderr, "launch failed: %s\n", lmk_status_text(rc));
        exit(1);
    }
    int out_idx[4] = {3, 5, 6, 7};
    for (int t = 0; t < 4; t++) {
        CK(cudaMemcpy(hx, dev[out_idx[t]], n * es, cudaMemcpyDeviceToHost));
        from_dtype(got[t], hx, n, dt);
    }
    CK(cudaMemcpy(lse_got, dlse, rows * 4, cudaMemcpyDeviceToHost));
    const char *names[5] = {"O", "dQ", "dK", "dV", "lse"};
    int fails = 0;
    /* the deterministic flash backward: a second run gives the same bits */
    int nondet = 0;
    if (impl == LMK_ATTN_FLASH && !atomic) {
        float *again = malloc(n * 4);
        rc = lmk_flash_attn_fwd(dev[3], dlse, dev[0], dev[1], dev[2], &s, NULL);
        if (!rc)
            rc = lmk_flash_attn_bwd(dev[5], dev[6], dev[7], dwork, dev[4], dev[0], dev[1], dev[2],
                                    dev[3], dlse, &s, NULL);
        CK(cudaDeviceSynchronize());
        for (int t = 0; t < 4 && !rc; t++) {
            CK(cudaMemcpy(hx, dev[out_idx[t]], n * es, cudaMemcpyDeviceToHost));
            from_dtype(again, hx, n, dt);
            nondet += memcmp(again, got[t], n * 4) != 0;
        }
        free(again);
        if (rc || nondet)
            fails++;
    }
    char line[512];
    int len = snprintf(line, sizeof line, "%-5s %-8s d=%3d T=%4d causal=%d %s", impl ? "flash" : "naive",
                       lmk_dtype_name(dt), d, T, causal,
                       !atomic ? "det   " : atomic == 2 ? "wgmma*" : "atomic");
    for (int t = 0; t < 5; t++) {
        if (t == 4 && impl != LMK_ATTN_FLASH)
            continue;
        double worst;
        size_t bad = t < 4 ? compare(got[t], ref[t], n, tol_for(dt, t > 0), &worst)
                           : compare(lse_got, lse_ref, rows, tol_for(dt, 0), &worst);
        len += snprintf(line + len, sizeof line - len, " %s %.1e%s", names[t], worst,
                        bad ? "!" : "");
        if (t < 4 && dt == LMK_F32 && impl == LMK_ATTN_FLASH) { /* normwise, fp32 */
            const double rel = norm_rel(got[t], ref[t], n);
            len += snprintf(line + len, sizeof line - len, " (%.1e%s)", rel,
                            rel > F32_NORM_RTOL ? "!" : "");
            bad += rel > F32_NORM_RTOL;
        }
        if (bad) {
            fails++;
        }
    }
    printf("%s%s%s\n", line, nondet ? " nondeterministic!" : "", fails ? "  FAIL" : "");
    for (int i = 0; i < 9; i++)
        cudaFree(dev[i]);
    cudaFree(dlse);
    cudaFree(dwork);
    cudaFree(dp);
    cudaFree(dpp);
    for (int i = 0; i < 6; i++)
        free(h[i]);
    for (int i = 0; i < 5; i++) {
        free(ref[i]);
        free(got[i]);
    }
    free(hx);
    free(lse_ref);
    free(lse_got);
    return fails;
}

/* A grid of many blocks, fresh inputs: the deterministic backward run twice
 * must give the same bits, and the single pass must agree with it within
 * the dtype's gradient tolerance (every element written: NaN poison first).
 * Returns 1 on failure. */
static int big_case(lmk_dtype dt, int B, int H, int T, int d, int causal)
{
    lmk_attn_shape s = {B, H, T, d, causal, dt, 0}, sa = s;
    sa.atomic_dq = 1;
    size_t n = (size_t)B * H * T * d, rows = (size_t)B * H * T, es = lmk_dtype_size(dt);
    void *dev[8], *hx = malloc(n * es);
    float *h = malloc(n * 4), *res[3][3], *lse, *work;
    for (int i = 0; i < 8; i++)
        CK(cudaMalloc(&dev[i], n * es));
    CK(cudaMalloc((void **)&lse, rows * 4));
    CK(cudaMalloc((void **)&work, lmk_flash_attn_bwd_work_floats(&sa) * 4));
    for (int t = 0; t < 4; t++) { /* q k v dout: dev 0 1 2 3 */
        for (size_t i = 0; i < n; i++)
            h[i] = urand();
        to_dtype(hx, h, n, dt);
        CK(cudaMemcpy(dev[t], hx, n * es, cudaMemcpyHostToDevice));
    }
    int rc = lmk_flash_attn_fwd(dev[4], lse, dev[0], dev[1], dev[2], &s, NULL);
    for (int run = 0; run < 3 && !rc; run++) { /* det, det, atomic */
        for (int i = 5; i < 8; i++)
            CK(cudaMemset(dev[i], 0xff, n * es));
        rc = lmk_flash_attn_bwd(dev[5], dev[6], dev[7], work, dev[3], dev[0], dev[1], dev[2],
                                dev[4], lse, run < 2 ? &s : &sa, NULL);
        CK(cudaDeviceSynchronize());
        for (int i = 0; i < 3 && !rc; i++) {
            res[run][i] = malloc(n * 4);
            CK(cudaMemcpy(hx, dev[5 + i], n * es, cudaMemcpyDeviceToHost));
            from_dtype(res[run][i], hx, n, dt);
        }
    }
    if (rc) {
        fprintf(stderr, "launch failed: %s\n", lmk_status_text(rc));
        exit(1);
    }
    static const char *names[3] = {"dQ", "dK", "dV"};
    char line[512];
    int len = snprintf(line, sizeof line, "flash %-8s d=%3d T=%4d causal=%d B·H=%d det vs %s",
                       lmk_dtype_name(dt), d, T, causal, B * H,
                       lmk_flash_wgmma_bwd_preferred(&sa) ? "wgmma " : "atomic");
    int nondet = 0, bad = 0;
    for (int i = 0; i < 3; i++) {
        double worst;
        size_t b = compare(res[2][i], res[0][i], n, tol_for(dt, 1), &worst);
        nondet += memcmp(res[0][i], res[1][i], n * 4) != 0;
        bad += b != 0;
        len += snprintf(line + len, sizeof line - len, " %s %.1e%s", names[i], worst, b ? "!" : "");
    }
    printf("%s%s%s\n", line, nondet ? " nondeterministic!" : "", nondet || bad ? "  FAIL" : "");
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 3; i++)
            free(res[r][i]);
    for (int i = 0; i < 8; i++)
        cudaFree(dev[i]);
    cudaFree(lse);
    cudaFree(work);
    free(h);
    free(hx);
    return nondet || bad;
}

static int bench_point(const char *impl, const char *dtn, int B, int H, int T, int d, int causal)
{
    /* impl "flash" takes the default single pass where it applies (as the
     * attention job), "flash_det" the deterministic two passes */
    lmk_attn_shape s = {B, H, T, d, causal, LMK_F32, strcmp(impl, "flash") == 0};
    if (lmk_dtype_parse(dtn, &s.dtype))
        return 1;
    lmk_attn_impl im = strncmp(impl, "flash", 5) == 0 ? LMK_ATTN_FLASH : LMK_ATTN_NAIVE;
    lmk_attn_bench_result r;
    char err[256] = "";
    int passes = T >= 8192 ? 10 : 30;
    int rc = lmk_attn_bench_cuda(0, im, &s, 2, passes, NULL, NULL, &r, err, sizeof err);
    double fl = lmk_attn_flops_fwd(&s);
    printf("{\"impl\": \"%s\", \"dtype\": \"%s\", \"batch\": %d, \"heads\": %d, \"seq\": %d, "
           "\"d\": %d, \"causal\": %d, \"rc\": %d, \"err\": \"%s\", \"oom\": %d, \"fwd_ms\": %.4f, "
           "\"bwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f, \"mem_before_bwd_mib\": %.1f, "
           "\"fwd_tflops\": %.1f, \"fwd_bwd_tflops\": %.1f}\n",
           impl, dtn, B, H, T, d, causal, rc, err, r.oom, r.fwd_ms, r.bwd_ms, r.fwd_bwd_ms,
           r.mem_before_bwd_bytes / 1048576.0, r.fwd_ms > 0 ? fl / r.fwd_ms / 1e9 : 0,
           r.fwd_bwd_ms > 0 ? 3.5 * fl / r.fwd_bwd_ms / 1e9 : 0);
    fflush(stdout);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (lmk_cuda_device_count() < 1) {
        printf("no GPU: skipped\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        int fails = 0;
        for (int a = 2; a + 7 <= argc; a += 7)
            fails += bench_point(argv[a], argv[a + 1], atoi(argv[a + 2]), atoi(argv[a + 3]),
                                 atoi(argv[a + 4]), atoi(argv[a + 5]), atoi(argv[a + 6]));
        return fails ? 1 : 0;
    }
    cublasHandle_t hb;
    if (cublasCreate(&hb) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    const lmk_dtype dts[3] = {LMK_F32, LMK_F16, LMK_BF16};
    lmk_dtype only = LMK_F32;
    int filter = argc > 2 && strcmp(argv[1], "only") == 0 && lmk_dtype_parse(argv[2], &only) == 0;
    const int ds[5] = {16, 32, 64, 80, 128};
    const int Ts[4] = {1, 37, 129, 1000};
    int fails = 0, cases = 0;
    for (int di = 0; di < 3; di++)
        for (int dj = 0; dj < 5 && (!filter || dts[di] == only); dj++)
            for (int c = 0; c < 2; c++)
                for (int ti = 0; ti < 4; ti++) {
                    int T = Ts[ti], B = T >= 1000 ? 1 : 2, H = T >= 1000 ? 1 : 3;
                    fails += run_case(LMK_ATTN_FLASH, dts[di], B, H, T, ds[dj], c, 0, hb) != 0;
                    cases++;
                    if (has_single_pass(dts[di], ds[dj])) { /* the single pass */
                        fails += run_case(LMK_ATTN_FLASH, dts[di], B, H, T, ds[dj], c, 1, hb) != 0;
                        cases++;
                    }
                    if (ti == 2) { /* the naive path on the same shapes, T = 129 */
                        fails += run_case(LMK_ATTN_NAIVE, dts[di], B, H, T, ds[dj], c, 0, hb) != 0;
                        cases++;
                    }
                }
    /* many blocks per SM: the unsplit kernels (the CPU reference would be slow) */
    for (int di = 0; di < 3; di++)
        for (int dj = 0; dj < 5 && (!filter || dts[di] == only); dj++)
            for (int c = 0; c < 2 && has_single_pass(dts[di], ds[dj]); c++) {
                fails += big_case(dts[di], 2, 16, 2100 + 37 * dj, ds[dj], c) != 0;
                cases++;
            }
    /* the wgmma single pass (flash_wgmma_bwd.cu: sm 9.0, fp16/bf16, d 64/128,
     * T ≥ 128): called directly on small grids ("wgmma*": flash_attn.cu routes
     * only grids of ≥ 0.96 blocks per SM to it) with partial key and query
     * tiles and several heads, then through lmk_flash_attn_bwd on 528 blocks
     * against the deterministic two passes */
    for (int di = 1; di < 3; di++)
        for (int d = 64; d <= 128 && (!filter || dts[di] == only); d += 64)
            for (int c = 0; c < 2; c++) {
                const lmk_attn_shape probe = {1, 1, 128, d, c, dts[di], 1};
                if (!lmk_flash_wgmma_bwd_usable(&probe))
                    break;
                fails += run_case(LMK_ATTN_FLASH, dts[di], 2, 3, 129, d, c, 2, hb) != 0;
                fails += run_case(LMK_ATTN_FLASH, dts[di], 2, 3, 200, d, c, 2, hb) != 0;
                fails += run_case(LMK_ATTN_FLASH, dts[di], 1, 2, 1000, d, c, 2, hb) != 0;
                fails += big_case(dts[di], 2, 8, 4097, d, c) != 0;
                cases += 4;
            }
    /* one head, about one 128-key block per SM: the padded d 32 / 80 go to
     * the wgmma kernel there too (flash_attn.cu's routing, partial last
     * tile), checked against the deterministic two passes */
    for (int di = 1; di < 3; di++)
        for (int d = 32; d <= 80 && (!filter || dts[di] == only); d += 48)
            for (int c = 0; c < 2; c++) {
                fails += big_case(dts[di], 1, 1, 16411, d, c) != 0;
                cases++;
            }
    cublasDestroy(hb);
    printf("%d of %d cases failed\n", fails, cases);
    return fails ? 1 : 0;
}
