/* Dumps a whole model run on the cuda backend for the PyTorch reference
 * (tests/gpu/torch_reference.py): the model created from a seed, a fixed
 * token batch, forward + backward, then STEPS AdamW steps (default 5; CS336
 * form, defaults of lmk_adamw_defaults, no clipping) on the same batch.
 *   PREFIX.bin   float32, every parameter at creation, then every gradient of
 *                the first forward + backward (cs336_basics order); under
 *                fp16 as the engine holds them, multiplied by loss_scale
 *   PREFIX.logits.bin  float32 (B·T, V) logits of a forward without backward
 *                at the initial parameters (before the forward + backward)
 *   PREFIX.json  config, batch, tokens, precision, the tensors' names, sizes
 *                and offsets (in floats) into PREFIX.bin, the loss, and
 *                losses[k] = loss of the forward after k AdamW steps (k ≤ STEPS),
 *                loss_scale of the first backward, steps_skipped (fp16)
 * usage: dump_model PREFIX MODEL B T PREC [SEED [cpu|cuda [STEPS]]]
 *   MODEL: a preset name, or V,d_model,d_ff,num_layers,num_heads; either ending in
 *          "+fused" for attention naive_fused
 *   cpu: use the cpu reference backend instead (to check the reference
 *   script itself on a machine without a GPU)
 * Exits 77 without a GPU (cuda backend), 1 on failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cuda/backend_cuda.h"
#include "model.h"
#include "status.h"

#define DEFAULT_ADAMW_STEPS 5
#define MAX_ADAMW_STEPS 1000

static lmk_backend *gpu; /* the backend used, cuda unless "cpu" was asked for */

static const char *last_error(void)
{
    const char *e = gpu ? lmk_backend_cuda_last_error(gpu) : NULL;
    return e ? e : "";
}

#define TRY(x)                                                                                 \
    do {                                                                                       \
        int try_rc_ = (x);                                                                     \
        if (try_rc_ != LMK_OK) {                                                               \
            fprintf(stderr, "dump_model: %s: %s (%s)\n", #x, lmk_status_text(try_rc_),        \
                    last_error());                                         \
            goto out;                                                                          \
        }                                                                                      \
    } while (0)

/* MODEL, optionally ending in "+fused": attention naive_fused. */
static int parse_model(const char *arg, lmk_model_config *c)
{
    char s[64];
    snprintf(s, sizeof s, "%s", arg);
    char *plus = strstr(s, "+fused");
    int fused = plus && plus[6] == '\0';
    if (fused)
        *plus = '\0';
    if (lmk_model_preset(s, c) != LMK_OK) {
        memset(c, 0, sizeof *c);
        if (sscanf(s, "%d,%d,%d,%d,%d", &c->vocab_size, &c->d_model, &c->d_ff, &c->num_layers, &c->num_heads) != 5)
            return -1;
        snprintf(c->name, sizeof c->name, "custom");
        c->rope_theta = 10000.0f;
        c->context_length = 1024;
    }
    if (fused)
        c->attention = LMK_ATTN_NAIVE_FUSED;
    return 0;
}

/* Appends the n floats of device tensor t to f. */
static int write_tensor(FILE *f, const lmk_tensor *t)
{
    float *h = malloc(t->bytes);
    int rc = h ? gpu->download(gpu, h, t->data, t->bytes) : LMK_NOMEM;
    if (rc == LMK_OK && fwrite(h, sizeof(float), t->numel, f) != t->numel)
        rc = LMK_INVALID;
    free(h);
    return rc;
}

/* Opens PREFIX+suffix with mode into *f; 0, or -1 with the error printed. */
static int open_output(FILE **f, char *path, size_t len, const char *prefix, const char *suffix, const char *mode)
{
    snprintf(path, len, "%s%s", prefix, suffix);
    if (!(*f = fopen(path, mode))) {
        perror(path);
        return -1;
    }
    return 0;
}

/* Closes *f (set to NULL); 0, or -1 with the error printed. */
static int close_output(FILE **f, const char *path)
{
    int rc = fclose(*f);
    *f = NULL;
    if (rc != 0)
        perror(path);
    return rc != 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: dump_model PREFIX MODEL B T PREC [SEED [cpu|cuda [STEPS]]]\n");
        return 2;
    }
    int use_cpu = argc > 7 && strcmp(argv[7], "cpu") == 0;
    if (!use_cpu && lmk_cuda_device_count() == 0) {
        printf("dump_model: no CUDA device, skipped\n");
        return 77;
    }
    const char *prefix = argv[1];
    lmk_model_config c;
    int B = atoi(argv[3]), T = atoi(argv[4]);
    lmk_precision prec;
    uint64_t seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 1;
    int adamw_steps = argc > 8 ? atoi(argv[8]) : DEFAULT_ADAMW_STEPS;
    if (adamw_steps < 0 || adamw_steps > MAX_ADAMW_STEPS) {
        fprintf(stderr, "dump_model: STEPS must be 0..%d\n", MAX_ADAMW_STEPS);
        return 2;
    }
    if (parse_model(argv[2], &c) != 0 || lmk_precision_parse(argv[5], &prec) != LMK_OK || B < 1 || T < 1) {
        fprintf(stderr, "dump_model: bad model, batch, context or precision\n");
        return 2;
    }
    if (T > c.context_length)
        c.context_length = T;
    const char *field = NULL;
    if (lmk_model_config_check(&c, &field) != LMK_OK) {
        fprintf(stderr, "dump_model: invalid shape (%s)\n", field ? field : "?");
        return 2;
    }
    char err[256] = "", path[1024];
    int status = 1, N = B * T;
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    FILE *fb = NULL, *fj = NULL;
    int32_t *tok = malloc(sizeof *tok * 2 * (size_t)N);
    float *losses = calloc((size_t)adamw_steps + 1, sizeof *losses), first_scale = 1.0f;
    if (!tok || !losses)
        return 1;
    if (use_cpu ? lmk_backend_cpu_create(&gpu) != LMK_OK : lmk_backend_cuda_create(0, &gpu, err, sizeof err) != LMK_OK) {
        fprintf(stderr, "dump_model: cuda backend: %s\n", err);
        free(tok);
        return 1;
    }
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 12345;
    for (int i = 0; i < 2 * N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)c.vocab_size);
    }
    TRY(lmk_allocator_create(gpu, &a));
    TRY(lmk_model_create(gpu, a, &c, B, T, prec, seed, LMK_MODEL_TRAIN, &m));
    TRY(lmk_model_set_batch(m, tok, tok + N));

    if (open_output(&fb, path, sizeof path, prefix, ".bin", "wb"))
        goto out;
    size_t nt = lmk_model_tensor_count(m);
    for (size_t i = 0; i < nt; i++) {
        lmk_tensor *p;
        TRY(lmk_model_tensor(m, i, NULL, &p, NULL));
        TRY(write_tensor(fb, p));
    }
    if (close_output(&fb, path))
        goto out;
    /* the logits, from a forward without backward (a training forward turns
     * them into their gradient in place) */
    if (open_output(&fb, path, sizeof path, prefix, ".logits.bin", "wb"))
        goto out;
    lmk_model_keep_logits(m, 1);
    TRY(lmk_model_forward(m, 0));
    lmk_model_keep_logits(m, 0);
    const lmk_tensor *logits = lmk_model_logits(m);
    if (!logits) {
        fprintf(stderr, "dump_model: the model kept no logits after a forward without backward\n");
        goto out;
    }
    TRY(write_tensor(fb, logits));
    if (close_output(&fb, path))
        goto out;
    if (open_output(&fb, path, sizeof path, prefix, ".bin", "ab"))
        goto out;
    lmk_adamw_config opt = lmk_adamw_defaults();
    for (int k = 0; k <= adamw_steps; k++) {
        TRY(lmk_model_forward(m, 1));
        TRY(lmk_model_loss(m, &losses[k]));
        TRY(lmk_model_backward(m));
        if (k == 0) {
            first_scale = lmk_model_loss_scale(m);
            for (size_t i = 0; i < nt; i++) {
                lmk_tensor *g;
                TRY(lmk_model_tensor(m, i, NULL, NULL, &g));
                TRY(write_tensor(fb, g));
            }
        }
        if (k < adamw_steps)
            TRY(lmk_model_step(m, &opt));
    }
    if (close_output(&fb, path))
        goto out;

    if (open_output(&fj, path, sizeof path, prefix, ".json", "w"))
        goto out;
    fprintf(fj, "{\"model\": \"%s\", \"vocab_size\": %d, \"d_model\": %d, \"d_ff\": %d, \"num_layers\": %d, "
                "\"num_heads\": %d, \"rope_theta\": %.1f, \"batch\": %d, \"T\": %d, \"precision\": \"%s\", "
                "\"seed\": %llu,\n",
            c.name, c.vocab_size, c.d_model, c.d_ff, c.num_layers, c.num_heads, c.rope_theta, B, T,
            lmk_precision_name(prec), (unsigned long long)seed);
    lmk_adamw_config d = lmk_adamw_defaults();
    fprintf(fj, " \"adamw\": {\"lr\": %.9g, \"beta1\": %.9g, \"beta2\": %.9g, \"eps\": %.9g, \"weight_decay\": %.9g},\n",
            d.lr, d.beta1, d.beta2, d.eps, d.weight_decay);
    for (int part = 0; part < 2; part++) {
        fprintf(fj, " \"%s\": [", part ? "targets" : "inputs");
        for (int i = 0; i < N; i++)
            fprintf(fj, "%s%d", i ? "," : "", tok[part * N + i]);
        fprintf(fj, "],\n");
    }
    fprintf(fj, " \"loss\": %.9g,\n \"losses\": [", losses[0]);
    for (int k = 0; k <= adamw_steps; k++)
        fprintf(fj, "%s%.9g", k ? ", " : "", losses[k]);
    fprintf(fj, "],\n \"loss_scale\": %.9g, \"steps_skipped\": %lld,\n \"tensors\": [\n", first_scale,
            (long long)lmk_model_steps_skipped(m));
    size_t off = 0, total = 0;
    for (size_t i = 0; i < nt; i++) {
        lmk_tensor *p;
        TRY(lmk_model_tensor(m, i, NULL, &p, NULL));
        total += p->numel;
    }
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        lmk_tensor *p;
        TRY(lmk_model_tensor(m, i, &name, &p, NULL));
        fprintf(fj, "  {\"name\": \"%s\", \"numel\": %zu, \"param_offset\": %zu, \"grad_offset\": %zu}%s\n", name,
                p->numel, off, total + off, i + 1 < nt ? "," : "");
        off += p->numel;
    }
    fprintf(fj, " ]}\n");
    if (close_output(&fj, path))
        goto out;
    printf("dump_model: %s %s B%d T%d: %zu tensors, %zu parameters, loss %.7f, after %d steps %.7f\n", c.name,
           lmk_precision_name(prec), B, T, nt, total, losses[0], adamw_steps, losses[adamw_steps]);
    status = 0;
out:
    if (fb)
        fclose(fb);
    if (fj)
        fclose(fj);
    lmk_model_free(m);
    lmk_allocator_free(a);
    lmk_backend_free(gpu);
    free(tok);
    free(losses);
    return status;
}
