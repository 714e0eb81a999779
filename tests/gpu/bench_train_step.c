/* Train-step timing of the cuda backend through the model API: for each
 * preset × context × precision (batch 4 by default), 2 warm-up steps, then
 * `steps` timed steps (forward + backward + AdamW), each closed by a stream
 * synchronisation (synchronised wall clock, CLOCK_MONOTONIC). Prints one
 * line per point: mean and min ms, tokens/s.
 * usage: bench_train_step [steps] [batch] [preset,...] [T,...] [prec,...]
 *        bench_train_step adamw [n]   (AdamW against the copy bandwidth)
 * Exits 77 without a GPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "backend.h"
#include "cuda/backend_cuda.h"
#include "model.h"
#include "status.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int one_point(lmk_backend *b, const char *preset, int B, int T, lmk_precision prec,
                     int steps)
{
    lmk_model_config c;
    if (lmk_model_preset(preset, &c) != LMK_OK)
        return LMK_INVALID;
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    int rc = lmk_allocator_create(b, &a);
    if (rc == LMK_OK)
        rc = lmk_model_create(b, a, &c, B, T, prec, 1, 1, &m);
    int32_t *tok = malloc(sizeof(int32_t) * 2 * B * T);
    double sum = 0, mn = 1e30;
    float loss = 0;
    if (rc != LMK_OK || !tok)
        goto out;
    uint64_t s = 7;
    for (int i = 0; i < 2 * B * T; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)c.vocab_size);
    }
    lmk_adamw_config cfg = lmk_adamw_defaults();
    if ((rc = lmk_model_set_batch(m, tok, tok + B * T)) != LMK_OK)
        goto out;
    for (int i = -2; i < steps; i++) {
        double t0 = now_ms();
        if ((rc = lmk_model_forward(m, 1)) || (rc = lmk_model_backward(m)) ||
            (rc = lmk_model_step(m, &cfg)) || (rc = b->synchronize(b)))
            goto out;
        double dt = now_ms() - t0;
        if (i >= 0) {
            sum += dt;
            mn = dt < mn ? dt : mn;
        }
    }
    rc = lmk_model_loss(m, &loss);
out:
    if (rc == LMK_OK)
        printf("point preset=%s prec=%s B=%d T=%d steps=%d mean_ms=%.3f min_ms=%.3f "
               "tokens_per_s=%.0f loss=%.4f peak_bytes=%llu\n",
               preset, lmk_precision_name(prec), B, T, steps, sum / steps, mn,
               B * T / (sum / steps / 1e3), loss,
               (unsigned long long)lmk_allocator_peak(a, -1));
    else
        printf("point preset=%s prec=%s B=%d T=%d FAILED rc=%d (%s) %s\n", preset,
               lmk_precision_name(prec), B, T, rc, lmk_status_text(rc),
               lmk_backend_cuda_last_error(b));
    lmk_model_free(m);
    lmk_allocator_free(a);
    free(tok);
    return rc;
}

/* AdamW over n parameters (p, g, m, v: 28 bytes moved per parameter)
 * against a device-to-device copy of the same 4 n floats (bytes read +
 * written); prints both and the ratio to the memory floor. */
static int adamw_point(lmk_backend *b, size_t n, int iters)
{
    float *t[5] = {0};
    int rc = LMK_OK;
    for (int i = 0; i < 5 && rc == LMK_OK; i++)
        if ((rc = b->mem_alloc(b, n * sizeof(float), (void **)&t[i])) == LMK_OK)
            rc = b->mem_zero(b, t[i], n * sizeof(float));
    lmk_adamw_hp hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                       .weight_decay = 0.01f, .t = 1};
    double ms[2] = {0, 0}; /* adamw, copy */
    for (int pass = 0; pass < 2 && rc == LMK_OK; pass++) {
        double t0 = 0;
        for (int i = -3; i < iters && rc == LMK_OK; i++) {
            if (i == 0) {
                if ((rc = b->synchronize(b)) != LMK_OK)
                    break;
                t0 = now_ms();
            }
            rc = pass ? b->mem_copy(b, t[4], t[0], n * sizeof(float)) /* 8 bytes per float */
                      : b->adamw(b, t[0], t[1], t[2], t[3], n, &hp, NULL);
        }
        if (rc == LMK_OK && (rc = b->synchronize(b)) == LMK_OK)
            ms[pass] = (now_ms() - t0) / iters;
    }
    double t_adamw = ms[0], t_copy = ms[1];
    if (rc == LMK_OK) {
        double bw_copy = 8.0 * n / (t_copy / 1e3), bw_adamw = 28.0 * n / (t_adamw / 1e3);
        double floor_ms = 28.0 * n / bw_copy * 1e3;
        printf("adamw n=%zu iters=%d adamw_ms=%.3f adamw_GBps=%.0f copy_ms=%.3f copy_GBps=%.0f "
               "floor_ms=%.3f adamw_over_floor=%.2f\n",
               n, iters, t_adamw, bw_adamw / 1e9, t_copy, bw_copy / 1e9, floor_ms,
               t_adamw / floor_ms);
    } else {
        printf("adamw n=%zu FAILED rc=%d %s\n", n, rc, lmk_backend_cuda_last_error(b));
    }
    for (int i = 0; i < 5; i++)
        b->mem_free(b, t[i]);
    return rc;
}

int main(int argc, char **argv)
{
    if (lmk_cuda_device_count() == 0) {
        printf("bench_train_step: no CUDA device, skipped\n");
        return 77;
    }
    int steps = argc > 1 ? atoi(argv[1]) : 10, B = argc > 2 ? atoi(argv[2]) : 4;
    char presets[256] = "small,medium", ts[256] = "128,256,512,1024", precs[64] = "fp32,tf32";
    if (argc > 3)
        snprintf(presets, sizeof presets, "%s", argv[3]);
    if (argc > 4)
        snprintf(ts, sizeof ts, "%s", argv[4]);
    if (argc > 5)
        snprintf(precs, sizeof precs, "%s", argv[5]);
    char err[256];
    lmk_backend *b = NULL;
    if (lmk_backend_cuda_create(0, &b, err, sizeof err) != LMK_OK) {
        fprintf(stderr, "cuda backend: %s\n", err);
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "adamw") == 0) {
        size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : ((size_t)1 << 27);
        int rc = adamw_point(b, n, 20);
        lmk_backend_free(b);
        return rc != LMK_OK;
    }
    int failed = 0;
    char *sp1, *sp2, *sp3;
    for (char *p = strtok_r(presets, ",", &sp1); p; p = strtok_r(NULL, ",", &sp1)) {
        char tcopy[256];
        snprintf(tcopy, sizeof tcopy, "%s", ts);
        for (char *t = strtok_r(tcopy, ",", &sp2); t; t = strtok_r(NULL, ",", &sp2)) {
            char pcopy[64];
            snprintf(pcopy, sizeof pcopy, "%s", precs);
            for (char *q = strtok_r(pcopy, ",", &sp3); q; q = strtok_r(NULL, ",", &sp3)) {
                lmk_precision prec;
                if (lmk_precision_parse(q, &prec) != LMK_OK)
                    continue;
                failed |= one_point(b, p, B, atoi(t), prec, steps) != LMK_OK;
                fflush(stdout);
            }
        }
    }
    lmk_backend_free(b);
    return failed;
}
