/* attention "flash" in the whole model on the GPU (issue 9 point 2): for
 * fp32 and bf16 and two shapes (head dims 64 and 80, T not a multiple of the
 * kernels' tiles), forward + backward with flash against naive on the GPU
 * (loss and every gradient within the dtype's tolerance) and against the
 * cpu backend's flash path (the float32 reference kernels); then a flash
 * train step captured per phase in CUDA graphs (forward, backward with its
 * lazily allocated gradients, AdamW releasing them) and replayed against
 * eager steps: loss and every parameter bitwise equal; the gradients of an
 * eager step live only from backward to the step.
 * Exits 77 when no CUDA device is visible (CI), 1 on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/check.h"
#include "gpu_test.h"
#include "alloc.h"
#include "backend.h"
#include "cuda/backend_cuda.h"
#include "model.h"
#include "status.h"

#define GPU(x)                                                                                            \
    do {                                                                                                  \
        int gpu_rc_ = (x);                                                                                \
        if (gpu_rc_ != LMK_OK) {                                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #x, lmk_status_text(gpu_rc_), \
                    lmk_backend_cuda_last_error(gpu));                                                    \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

static lmk_backend *gpu, *cpu;

typedef struct side {
    lmk_backend *b;
    lmk_allocator *a;
    lmk_model *m;
} side;

static void side_open(side *s, lmk_backend *b, const lmk_model_config *c, int B, int T, lmk_precision prec,
                      int training, const int32_t *tok)
{
    s->b = b;
    MUST(lmk_allocator_create(b, &s->a));
    GPU(lmk_model_create(b, s->a, c, B, T, prec, 17, training, &s->m));
    GPU(lmk_model_set_batch(s->m, tok, tok + B * T));
}

static void side_close(side *s)
{
    lmk_model_free(s->m);
    lmk_allocator_free(s->a);
}

static float *grad_host(side *s, size_t i, size_t *n, const char **name)
{
    lmk_tensor *g;
    MUST(lmk_model_tensor(s->m, i, name, NULL, &g));
    float *h = malloc(g->bytes);
    if (!h)
        exit(1);
    GPU(s->b->download(s->b, h, g->data, g->bytes));
    *n = g->numel;
    return h;
}

/* Loss and every gradient of `got` against `ref`: |got − ref| ≤ rtol·(max|ref| + |ref|). */
static void compare(const char *what, side *got, side *ref, double ltol, double rtol)
{
    float lg, lr;
    GPU(lmk_model_loss(got->m, &lg));
    GPU(lmk_model_loss(ref->m, &lr));
    int lok = fabs((double)lg - lr) <= ltol * fabs(lr);
    CHECK(lok, "%s: loss %.7f vs %.7f", what, lg, lr);
    double worst = 0;
    const char *worst_name = "";
    size_t bad_total = 0;
    for (size_t i = 0; i < lmk_model_tensor_count(ref->m); i++) {
        size_t n, n2;
        const char *name;
        float *a = grad_host(ref, i, &n, &name), *b = grad_host(got, i, &n2, NULL);
        double mx = 0, err = 0;
        size_t bad = 0;
        for (size_t j = 0; j < n; j++)
            mx = fabs(a[j]) > mx ? fabs(a[j]) : mx;
        for (size_t j = 0; j < n; j++) {
            double e = fabs((double)b[j] - a[j]);
            bad += !(e <= rtol * (mx + fabs(a[j])));
            err = e / (mx > 0 ? mx : 1) > err ? e / (mx > 0 ? mx : 1) : err;
        }
        CHECK(bad == 0 && mx > 0, "%s: %zu elements of %s's gradient beyond tolerance (max rel. err %.3g)", what,
              bad, name, err);
        bad_total += bad;
        if (err > worst) {
            worst = err;
            worst_name = name;
        }
        free(a), free(b);
    }
    printf("  %-44s loss %.7f vs %.7f, worst gradient %s %.3g  %s\n", what, lg, lr, worst_name, worst,
           lok && bad_total == 0 ? "ok" : "FAIL");
}

static void test_against_naive(const lmk_model_config *c0, int B, int T, lmk_precision prec)
{
    int N = B * T;
    int32_t *tok = malloc(sizeof *tok * 2 * (size_t)N);
    test_rng rng = {(uint64_t)T * 31 + (uint64_t)prec};
    for (int i = 0; i < 2 * N; i++)
        tok[i] = (int32_t)(test_next(&rng) % (uint64_t)c0->vocab_size);
    lmk_model_config cn = *c0, cf = *c0;
    cn.attention = LMK_ATTN_NAIVE;
    cf.attention = LMK_ATTN_FLASH;
    side gn, gf, cfl;
    side_open(&gn, gpu, &cn, B, T, prec, LMK_MODEL_GRADIENTS, tok);
    side_open(&gf, gpu, &cf, B, T, prec, LMK_MODEL_GRADIENTS, tok);
    side_open(&cfl, cpu, &cf, B, T, prec, LMK_MODEL_GRADIENTS, tok);
    side *all[3] = {&gn, &gf, &cfl};
    for (int k = 0; k < 3; k++) {
        GPU(lmk_model_forward(all[k]->m, 1));
        GPU(lmk_model_backward(all[k]->m));
    }
    char what[96];
    int bf = prec == LMK_PREC_BF16;
    snprintf(what, sizeof what, "%.31s dh %d T %d %s: gpu flash vs gpu naive", c0->name, c0->d_model / c0->num_heads,
             T, lmk_precision_name(prec));
    compare(what, &gf, &gn, bf ? 1e-2 : 1e-5, bf ? 6e-2 : 1e-4);
    snprintf(what, sizeof what, "%.31s dh %d T %d %s: gpu flash vs cpu flash", c0->name, c0->d_model / c0->num_heads,
             T, lmk_precision_name(prec));
    compare(what, &gf, &cfl, bf ? 1e-2 : 1e-5, bf ? 6e-2 : 1e-4);
    /* no T² tensor with flash */
    const lmk_mem_event *ev = lmk_allocator_events(gf.a);
    size_t scores = 0;
    for (size_t i = 0; i < lmk_allocator_event_count(gf.a); i++)
        scores += strstr(lmk_allocator_name(gf.a, ev[i].name_id), "scores") != NULL;
    CHECK(scores == 0, "flash allocated %zu scores tensors", scores);
    for (int k = 0; k < 3; k++)
        side_close(all[k]);
    free(tok);
}

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

/* Flash train step as three CUDA graphs vs eager steps, bitwise. */
static void test_graphs(const lmk_model_config *c0, int B, int T, lmk_precision prec, int steps)
{
    lmk_model_config c = *c0;
    c.attention = LMK_ATTN_FLASH;
    int N = B * T;
    int32_t *tok = malloc(sizeof *tok * 2 * (size_t)N);
    test_rng rng = {77};
    for (int i = 0; i < 2 * N; i++)
        tok[i] = (int32_t)(test_next(&rng) % (uint64_t)c.vocab_size);
    side g, e;
    side_open(&g, gpu, &c, B, T, prec, LMK_MODEL_TRAIN, tok);
    side_open(&e, gpu, &c, B, T, prec, LMK_MODEL_TRAIN, tok);
    lmk_adamw_config opt = lmk_adamw_defaults();
    lmk_cuda_graph *gr[3] = {NULL, NULL, NULL};
    for (int w = 0; w < 2; w++) {
        side *both[2] = {&g, &e};
        for (int k = 0; k < 2; k++) {
            GPU(lmk_model_forward(both[k]->m, 1));
            CHECK(lmk_allocator_live(both[k]->a, LMK_MEM_GRADIENT) == 0, "gradients live during forward");
            GPU(lmk_model_backward(both[k]->m));
            CHECK(lmk_allocator_live(both[k]->a, LMK_MEM_GRADIENT) == 4 * lmk_model_param_count(&c),
                  "gradients after backward");
            GPU(lmk_model_step(both[k]->m, &opt));
            CHECK(lmk_allocator_live(both[k]->a, LMK_MEM_GRADIENT) == 0, "gradients after the step");
        }
    }
    for (int ph = 0; ph < 3; ph++) {
        GPU(lmk_backend_cuda_capture_begin(gpu));
        int rc = ph == 0 ? lmk_model_forward(g.m, 1) : ph == 1 ? lmk_model_backward(g.m) : lmk_model_step(g.m, &opt);
        int rc2 = lmk_backend_cuda_capture_end(gpu, &gr[ph]);
        CHECK(rc == LMK_OK && rc2 == LMK_OK, "capture of phase %d: %d/%d %s", ph, rc, rc2,
              lmk_backend_cuda_last_error(gpu));
        if (!gr[ph])
            goto out;
    }
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 2 * N; i++)
            tok[i] = (int32_t)(test_next(&rng) % (uint64_t)c.vocab_size);
        GPU(lmk_model_set_batch(g.m, tok, tok + N));
        GPU(lmk_model_set_batch(e.m, tok, tok + N));
        for (int ph = 0; ph < 3; ph++)
            GPU(lmk_cuda_graph_launch(gpu, gr[ph]));
        GPU(lmk_model_forward(e.m, 1));
        GPU(lmk_model_backward(e.m));
        GPU(lmk_model_step(e.m, &opt));
        float lg, le;
        GPU(lmk_model_loss(g.m, &lg));
        GPU(lmk_model_loss(e.m, &le));
        const char *first = "";
        size_t bad = params_differ(g.m, e.m, &first);
        printf("  %s %s flash graphs step %d: loss %.7f eager %.7f, params differing %zu  %s\n", c.name,
               lmk_precision_name(prec), s, lg, le, bad, lg == le && bad == 0 ? "ok" : "FAIL");
        CHECK(lg == le && bad == 0, "graph step %d: loss %.9g vs %.9g, %zu parameters differ (first %s)", s, lg, le,
              bad, first);
    }
out:
    for (int ph = 0; ph < 3; ph++)
        lmk_cuda_graph_free(gr[ph]);
    side_close(&g);
    side_close(&e);
    free(tok);
}

int main(void)
{
    int open_rc = gpu_test_open("test_model_flash", &gpu);
    if (open_rc != 0)
        return open_rc;
    MUST(lmk_backend_cpu_create(&cpu));
    lmk_model_config h64 = {.name = "dh64", .vocab_size = 1000, .context_length = 256, .d_model = 256,
                            .d_ff = 640, .num_layers = 2, .num_heads = 4, .rope_theta = 10000.0f};
    lmk_model_config h80 = {.name = "dh80", .vocab_size = 10007, .context_length = 128, .d_model = 160,
                            .d_ff = 432, .num_layers = 2, .num_heads = 2, .rope_theta = 10000.0f};
    printf("flash vs naive (gpu) and vs the cpu backend's flash:\n");
    for (int p = 0; p < 2; p++) {
        lmk_precision prec = p ? LMK_PREC_BF16 : LMK_PREC_FP32;
        test_against_naive(&h64, 2, 200, prec);
        test_against_naive(&h80, 2, 100, prec);
    }
    printf("flash train step in CUDA graphs vs eager:\n");
    test_graphs(&h80, 2, 100, LMK_PREC_FP32, 3);
    test_graphs(&h64, 2, 200, LMK_PREC_BF16, 3);
    lmk_backend_free(cpu);
    lmk_backend_free(gpu);
    return check_report("test_model_flash");
}
