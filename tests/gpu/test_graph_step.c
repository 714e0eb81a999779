/* The CUDA-graph step of the benchmark job (daemon/kind_benchmark.c) and the
 * event timers it uses (kernels/cuda/timing.h), on the GPU: one graph per
 * phase (forward; backward, which frees what the forward graph allocated),
 * captured after an eager warm-up and replayed for N steps on a fresh token
 * batch each step (uploaded into the same device buffer), against a second
 * model run eagerly from the same seed: loss and every gradient bitwise
 * equal after each step; then the whole train step (forward, backward and
 * AdamW graphs, the step number on the device): loss, every parameter and
 * the step count bitwise equal to eager steps (fp32, tf32, bf16); the same
 * with the optimizer inside backward, eager and in graphs. Shapes:
 * tiny and an odd custom one (dh 80, V 10007, T 100). Then the event timer: GPU time of a known op is positive and not
 * above its synchronised wall clock.
 * Exits 77 when no CUDA device is visible (CI), 1 on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/check.h"
#include "gpu_test.h"
#include "alloc.h"
#include "backend.h"
#include "cuda/backend_cuda.h"
#include "cuda/timing.h"
#include "model.h"
#include "status.h"

#define GPU(x)                                                                          \
    do {                                                                                \
        int gpu_rc_ = (x);                                                              \
        if (gpu_rc_ != LMK_OK) {                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #x,         \
                    lmk_status_text(gpu_rc_), lmk_backend_cuda_last_error(gpu));        \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

static lmk_backend *gpu;
static test_rng rng = {2026};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void new_batch(lmk_model *a, lmk_model *b, int n, int V)
{
    int32_t *tok = malloc(sizeof *tok * 2 * (size_t)n);
    if (!tok)
        exit(1);
    for (int i = 0; i < 2 * n; i++)
        tok[i] = (int32_t)(test_next(&rng) % (uint64_t)V);
    GPU(lmk_model_set_batch(a, tok, tok + n));
    GPU(lmk_model_set_batch(b, tok, tok + n));
    free(tok);
}

/* Number of gradient elements of m that differ from e's (bitwise). */
static size_t grads_differ(lmk_model *g, lmk_model *e, const char **first)
{
    size_t bad = 0;
    for (size_t i = 0; i < lmk_model_tensor_count(g); i++) {
        const char *name;
        lmk_tensor *pg, *gg, *pe, *ge;
        MUST(lmk_model_tensor(g, i, &name, &pg, &gg));
        MUST(lmk_model_tensor(e, i, NULL, &pe, &ge));
        float *hg = malloc(gg->bytes), *he = malloc(ge->bytes);
        if (!hg || !he)
            exit(1);
        GPU(gpu->download(gpu, hg, gg->data, gg->bytes));
        GPU(gpu->download(gpu, he, ge->data, ge->bytes));
        size_t d = 0;
        for (size_t j = 0; j < gg->numel; j++)
            d += memcmp(&hg[j], &he[j], sizeof(float)) != 0;
        if (d && !bad)
            *first = name;
        bad += d;
        free(hg), free(he);
    }
    return bad;
}

/* forward_backward: graphs F and B replayed `steps` times vs eager. */
static void test_fwd_bwd(const lmk_model_config *c, int B, int T, int steps)
{
    lmk_allocator *ag = NULL, *ae = NULL;
    lmk_model *mg = NULL, *me = NULL;
    lmk_cuda_graph *gf = NULL, *gb = NULL;
    int N = B * T;
    MUST(lmk_allocator_create(gpu, &ag));
    MUST(lmk_allocator_create(gpu, &ae));
    GPU(lmk_model_create(gpu, ag, c, B, T, LMK_PREC_FP32, 11, LMK_MODEL_GRADIENTS, &mg));
    GPU(lmk_model_create(gpu, ae, c, B, T, LMK_PREC_FP32, 11, LMK_MODEL_GRADIENTS, &me));
    new_batch(mg, me, N, c->vocab_size);
    GPU(lmk_model_forward(mg, 1)); /* warm-up: sizes the scratch */
    GPU(lmk_model_backward(mg));
    GPU(lmk_backend_cuda_capture_begin(gpu));
    int rc = lmk_model_forward(mg, 1), rc2 = lmk_backend_cuda_capture_end(gpu, &gf);
    CHECK(rc == LMK_OK && rc2 == LMK_OK, "capture forward: %d/%d %s", rc, rc2, lmk_backend_cuda_last_error(gpu));
    GPU(lmk_backend_cuda_capture_begin(gpu));
    rc = lmk_model_backward(mg), rc2 = lmk_backend_cuda_capture_end(gpu, &gb);
    CHECK(rc == LMK_OK && rc2 == LMK_OK, "capture backward: %d/%d %s", rc, rc2, lmk_backend_cuda_last_error(gpu));
    if (!gf || !gb)
        goto out;
    for (int s = 0; s < steps; s++) {
        new_batch(mg, me, N, c->vocab_size);
        GPU(lmk_cuda_graph_launch(gpu, gf));
        GPU(lmk_cuda_graph_launch(gpu, gb));
        GPU(lmk_model_forward(me, 1));
        GPU(lmk_model_backward(me));
        float lg = 0, le = 0;
        GPU(lmk_model_loss(mg, &lg));
        GPU(lmk_model_loss(me, &le));
        const char *first = "";
        size_t bad = grads_differ(mg, me, &first);
        printf("  %s B%d T%d step %d: graph loss %.7f eager %.7f, grads differing %zu  %s\n", c->name, B, T,
               s, lg, le, bad, lg == le && bad == 0 ? "ok" : "FAIL");
        CHECK(lg == le, "%s step %d: graph loss %.9g != eager %.9g", c->name, s, lg, le);
        CHECK(bad == 0, "%s step %d: %zu gradient elements differ (first in %s)", c->name, s, bad, first);
    }
    /* replay vs eager speed, informational */
    double t0 = now_ms();
    for (int s = 0; s < 10; s++) {
        GPU(lmk_cuda_graph_launch(gpu, gf));
        GPU(lmk_cuda_graph_launch(gpu, gb));
    }
    GPU(gpu->synchronize(gpu));
    double t1 = now_ms();
    for (int s = 0; s < 10; s++) {
        GPU(lmk_model_forward(me, 1));
        GPU(lmk_model_backward(me));
    }
    GPU(gpu->synchronize(gpu));
    printf("  %s B%d T%d fwd+bwd: graphs %.3f ms, eager %.3f ms per step\n", c->name, B, T, (t1 - t0) / 10,
           (now_ms() - t1) / 10);
out:
    lmk_cuda_graph_free(gf);
    lmk_cuda_graph_free(gb);
    lmk_model_free(mg);
    lmk_model_free(me);
    lmk_allocator_free(ag);
    lmk_allocator_free(ae);
}

/* Number of parameter elements of g that differ from e's (bitwise). */
static size_t params_differ(lmk_model *g, lmk_model *e, const char **first)
{
    size_t bad = 0;
    for (size_t i = 0; i < lmk_model_tensor_count(g); i++) {
        const char *name;
        lmk_tensor *pg, *pe;
        MUST(lmk_model_tensor(g, i, &name, &pg, NULL));
        MUST(lmk_model_tensor(e, i, NULL, &pe, NULL));
        float *hg = malloc(pg->bytes), *he = malloc(pe->bytes);
        if (!hg || !he)
            exit(1);
        GPU(gpu->download(gpu, hg, pg->data, pg->bytes));
        GPU(gpu->download(gpu, he, pe->data, pe->bytes));
        size_t d = 0;
        for (size_t j = 0; j < pg->numel; j++)
            d += memcmp(&hg[j], &he[j], sizeof(float)) != 0;
        if (d && !bad)
            *first = name;
        bad += d;
        free(hg), free(he);
    }
    return bad;
}

enum { STEP_GRAPHS = 1, STEP_OPT_IN_BACKWARD = 2 };

/* train_step: graphs F, B and O (AdamW with its device step counter)
 * replayed `steps` times vs eager steps: loss, every parameter and the step
 * count bitwise equal after each step. how: STEP_GRAPHS (else the first
 * model runs eagerly too), STEP_OPT_IN_BACKWARD (the first model runs the
 * optimizer inside its backward, on the optimizer lane). */
static void test_train_step(const lmk_model_config *c, int B, int T, lmk_precision prec, int steps, int how)
{
    lmk_allocator *ag = NULL, *ae = NULL;
    lmk_model *mg = NULL, *me = NULL;
    lmk_cuda_graph *g[3] = {NULL, NULL, NULL};
    lmk_adamw_config opt = lmk_adamw_defaults();
    int N = B * T;
    MUST(lmk_allocator_create(gpu, &ag));
    MUST(lmk_allocator_create(gpu, &ae));
    GPU(lmk_model_create(gpu, ag, c, B, T, prec, 13, LMK_MODEL_TRAIN, &mg));
    GPU(lmk_model_create(gpu, ae, c, B, T, prec, 13, LMK_MODEL_TRAIN, &me));
    if (how & STEP_OPT_IN_BACKWARD)
        GPU(lmk_model_optimizer_in_backward(mg, &opt));
    const char *what = how == (STEP_GRAPHS | STEP_OPT_IN_BACKWARD) ? "graph, optimizer in backward"
                       : how == STEP_GRAPHS                       ? "graph"
                                                                  : "eager, optimizer in backward";
    for (int w = 0; w < 2; w++) { /* the same eager warm-up on both */
        new_batch(mg, me, N, c->vocab_size);
        lmk_model *both[2] = {mg, me};
        for (int k = 0; k < 2; k++) {
            GPU(lmk_model_forward(both[k], 1));
            GPU(lmk_model_backward(both[k]));
            GPU(lmk_model_step(both[k], &opt));
        }
    }
    for (int ph = 0; ph < 3 && (how & STEP_GRAPHS); ph++) {
        GPU(lmk_backend_cuda_capture_begin(gpu));
        int rc = ph == 0 ? lmk_model_forward(mg, 1) : ph == 1 ? lmk_model_backward(mg) : lmk_model_step(mg, &opt);
        int rc2 = lmk_backend_cuda_capture_end(gpu, &g[ph]);
        CHECK(rc == LMK_OK && rc2 == LMK_OK, "%s %s: capture of phase %d: %d/%d %s", c->name,
              lmk_precision_name(prec), ph, rc, rc2, lmk_backend_cuda_last_error(gpu));
        if (!g[ph])
            goto out;
    }
    for (int s = 0; s < steps; s++) {
        new_batch(mg, me, N, c->vocab_size);
        if (how & STEP_GRAPHS) {
            for (int ph = 0; ph < 3; ph++)
                GPU(lmk_cuda_graph_launch(gpu, g[ph]));
        } else {
            GPU(lmk_model_forward(mg, 1));
            GPU(lmk_model_backward(mg));
            GPU(lmk_model_step(mg, &opt));
        }
        GPU(lmk_model_forward(me, 1));
        GPU(lmk_model_backward(me));
        GPU(lmk_model_step(me, &opt));
        float lg = 0, le = 0;
        GPU(lmk_model_loss(mg, &lg));
        GPU(lmk_model_loss(me, &le));
        const char *first = "";
        size_t bad = params_differ(mg, me, &first);
        int64_t tg = lmk_model_steps_taken(mg), te = lmk_model_steps_taken(me);
        printf("  %s %s B%d T%d train step %d (%s): loss %.7f eager %.7f, params differing %zu, t %lld/%lld  %s\n",
               c->name, lmk_precision_name(prec), B, T, s, what, lg, le, bad, (long long)tg, (long long)te,
               lg == le && bad == 0 && tg == te ? "ok" : "FAIL");
        CHECK(lg == le, "%s step %d: graph loss %.9g != eager %.9g", c->name, s, lg, le);
        CHECK(bad == 0, "%s step %d: %zu parameter elements differ (first in %s)", c->name, s, bad, first);
        CHECK(tg == te && tg == 3 + s, "%s step %d: steps taken %lld (graphs) %lld (eager)", c->name, s,
              (long long)tg, (long long)te);
    }
out:
    for (int ph = 0; ph < 3; ph++)
        lmk_cuda_graph_free(g[ph]);
    lmk_model_free(mg);
    lmk_model_free(me);
    lmk_allocator_free(ag);
    lmk_allocator_free(ae);
}

/* forward only (inference): one graph, loss equal on fresh batches. */
static void test_forward(const lmk_model_config *c, int B, int T, int steps)
{
    lmk_allocator *ag = NULL, *ae = NULL;
    lmk_model *mg = NULL, *me = NULL;
    lmk_cuda_graph *gf = NULL;
    int N = B * T;
    MUST(lmk_allocator_create(gpu, &ag));
    MUST(lmk_allocator_create(gpu, &ae));
    GPU(lmk_model_create(gpu, ag, c, B, T, LMK_PREC_TF32, 5, LMK_MODEL_INFERENCE, &mg));
    GPU(lmk_model_create(gpu, ae, c, B, T, LMK_PREC_TF32, 5, LMK_MODEL_INFERENCE, &me));
    new_batch(mg, me, N, c->vocab_size);
    GPU(lmk_model_forward(mg, 0));
    GPU(lmk_backend_cuda_capture_begin(gpu));
    int rc = lmk_model_forward(mg, 0), rc2 = lmk_backend_cuda_capture_end(gpu, &gf);
    CHECK(rc == LMK_OK && rc2 == LMK_OK, "capture forward (inference): %d/%d %s", rc, rc2,
          lmk_backend_cuda_last_error(gpu));
    for (int s = 0; gf && s < steps; s++) {
        new_batch(mg, me, N, c->vocab_size);
        GPU(lmk_cuda_graph_launch(gpu, gf));
        GPU(lmk_model_forward(me, 0));
        float lg = 0, le = 0;
        GPU(lmk_model_loss(mg, &lg));
        GPU(lmk_model_loss(me, &le));
        printf("  %s tf32 inference step %d: graph loss %.7f eager %.7f  %s\n", c->name, s, lg, le,
               lg == le ? "ok" : "FAIL");
        CHECK(lg == le, "%s inference step %d: graph %.9g != eager %.9g", c->name, s, lg, le);
    }
    lmk_cuda_graph_free(gf);
    lmk_model_free(mg);
    lmk_model_free(me);
    lmk_allocator_free(ag);
    lmk_allocator_free(ae);
}

/* Events around 20 copies of 256 MiB: GPU time > 0, ≤ wall clock, and the
 * implied bandwidth plausible (10 GB/s … 10 TB/s). */
static void test_timer(void)
{
    lmk_cuda_timer *t = NULL;
    void *x = NULL, *y = NULL;
    size_t bytes = (size_t)256 << 20;
    GPU(lmk_cuda_timer_create(gpu, 2, &t));
    CHECK(lmk_cuda_timer_create(gpu, 0, &(lmk_cuda_timer *){NULL}) == LMK_INVALID, "n = 0 accepted");
    CHECK(lmk_cuda_timer_record(t, 2) == LMK_INVALID, "event 2 of 2 accepted");
    GPU(gpu->mem_alloc(gpu, bytes, &x));
    GPU(gpu->mem_alloc(gpu, bytes, &y));
    GPU(gpu->mem_zero(gpu, x, bytes));
    GPU(gpu->synchronize(gpu));
    double w0 = now_ms(), ms = -1;
    GPU(lmk_cuda_timer_record(t, 0));
    for (int i = 0; i < 20; i++)
        GPU(gpu->mem_copy(gpu, y, x, bytes));
    GPU(lmk_cuda_timer_record(t, 1));
    GPU(gpu->synchronize(gpu));
    double wall = now_ms() - w0;
    GPU(lmk_cuda_timer_elapsed(t, 0, 1, &ms));
    double gbps = 20.0 * 2 * bytes / (ms / 1e3) / 1e9;
    printf("  timer: 20 × 256 MiB copies: gpu %.3f ms, wall %.3f ms, %.0f GB/s  %s\n", ms, wall, gbps,
           ms > 0 && ms <= wall * 1.01 + 0.01 && gbps > 10 && gbps < 10000 ? "ok" : "FAIL");
    CHECK(ms > 0 && ms <= wall * 1.01 + 0.01, "event time %.3f ms vs wall %.3f ms", ms, wall);
    CHECK(gbps > 10 && gbps < 10000, "implausible copy bandwidth %.0f GB/s", gbps);
    gpu->mem_free(gpu, x);
    gpu->mem_free(gpu, y);
    lmk_cuda_timer_free(t);
}

int main(void)
{
    int open_rc = gpu_test_open("test_graph_step", &gpu);
    if (open_rc != 0)
        return open_rc;
    lmk_model_config tiny, odd = {.name = "odd", .vocab_size = 10007, .context_length = 128, .d_model = 160,
                                  .d_ff = 432, .num_layers = 2, .num_heads = 2, .rope_theta = 10000.0f};
    MUST(lmk_model_preset("tiny", &tiny));
    printf("graph per phase, forward_backward:\n");
    test_fwd_bwd(&tiny, 2, 64, 4);
    test_fwd_bwd(&odd, 2, 100, 3);
    printf("graph per phase, train_step (AdamW's device step counter):\n");
    test_train_step(&tiny, 2, 64, LMK_PREC_FP32, 4, STEP_GRAPHS);
    test_train_step(&odd, 2, 100, LMK_PREC_TF32, 3, STEP_GRAPHS);
    test_train_step(&tiny, 2, 64, LMK_PREC_BF16, 3, STEP_GRAPHS);
    printf("the optimizer in backward (its own stream), eager and in graphs, against backward then step:\n");
    test_train_step(&tiny, 2, 64, LMK_PREC_BF16, 3, STEP_OPT_IN_BACKWARD);
    test_train_step(&odd, 2, 100, LMK_PREC_TF32, 3, STEP_OPT_IN_BACKWARD);
    test_train_step(&tiny, 2, 64, LMK_PREC_BF16, 3, STEP_GRAPHS | STEP_OPT_IN_BACKWARD);
    test_train_step(&odd, 2, 100, LMK_PREC_FP32, 3, STEP_GRAPHS | STEP_OPT_IN_BACKWARD);
    /* long enough kernels that AdamW's and the backward's do run side by side */
    lmk_model_config wide = {.name = "wide", .vocab_size = 10000, .context_length = 512, .d_model = 1024,
                             .d_ff = 2816, .num_layers = 4, .num_heads = 16, .rope_theta = 10000.0f};
    test_train_step(&wide, 4, 512, LMK_PREC_BF16, 3, STEP_OPT_IN_BACKWARD);
    wide.attention = LMK_ATTN_NAIVE_FUSED;
    test_train_step(&wide, 4, 512, LMK_PREC_BF16, 2, STEP_GRAPHS | STEP_OPT_IN_BACKWARD);
    printf("graph, forward (inference):\n");
    test_forward(&tiny, 2, 64, 3);
    printf("event timer:\n");
    test_timer();
    lmk_backend_free(gpu);
    return check_report("test_graph_step");
}
