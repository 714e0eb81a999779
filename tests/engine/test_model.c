/* The whole model on the cpu backend: parameter counts, gradients against
 * finite differences, loss at init, training, determinism, precisions,
 * memory accounting and allocation-failure clean-up. */
#include <math.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "check.h"
#include "model.h"
#include "status.h"

static lmk_backend *B;

/* Small enough for finite differences everywhere; d_head 4. */
static const lmk_model_config small_cfg = {"custom", 11, 8, 8, 12, 2, 2, 10000.0f, LMK_ATTN_NAIVE};

typedef struct fixture {
    lmk_allocator *a;
    lmk_model *m;
    int batch, T;
} fixture;

static void make_batch(const lmk_model_config *c, int n, uint64_t seed, int32_t *in, int32_t *tg)
{
    test_rng r = {seed};
    for (int i = 0; i < n; i++) {
        in[i] = (int32_t)(test_next(&r) % (uint64_t)c->vocab_size);
        tg[i] = (int32_t)(test_next(&r) % (uint64_t)c->vocab_size);
    }
}

static void fixture_open(fixture *f, const lmk_model_config *c, int batch, int T,
                         lmk_precision prec, uint64_t seed, int training)
{
    f->batch = batch;
    f->T = T;
    MUST(lmk_allocator_create(B, &f->a));
    MUST(lmk_model_create(B, f->a, c, batch, T, prec, seed, training, &f->m));
    int32_t *in = calloc((size_t)batch * T, sizeof *in), *tg = calloc((size_t)batch * T, sizeof *tg);
    make_batch(c, batch * T, 99, in, tg);
    MUST(lmk_model_set_batch(f->m, in, tg));
    free(in);
    free(tg);
}

static void fixture_close(fixture *f)
{
    lmk_model_free(f->m);
    CHECK(lmk_allocator_live(f->a, -1) == 0, "allocator not empty after model free: %llu bytes",
          (unsigned long long)lmk_allocator_live(f->a, -1));
    lmk_allocator_free(f->a);
}

static float loss_of(lmk_model *m)
{
    float l;
    MUST(lmk_model_forward(m, 0));
    MUST(lmk_model_loss(m, &l));
    return l;
}

static void test_param_counts(void)
{
    static const struct {
        const char *name;
        uint64_t params;
    } want[] = {
        {"tiny", 22696448ull},       {"small", 128625408ull},  {"medium", 423183360ull},
        {"large", 969411840ull},     {"xl", 1998235200ull},    {"2.7B", 3406809600ull},
    };
    CHECK(lmk_model_preset_count() == 6, "6 presets expected");
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        lmk_model_config c;
        MUST(lmk_model_preset(want[i].name, &c));
        CHECK(lmk_model_param_count(&c) == want[i].params, "%s: %llu parameters, want %llu",
              want[i].name, (unsigned long long)lmk_model_param_count(&c),
              (unsigned long long)want[i].params);
        CHECK(lmk_model_config_check(&c, NULL) == LMK_OK, "%s invalid", want[i].name);
    }
    lmk_model_config c;
    CHECK(lmk_model_preset("huge", &c) == LMK_INVALID, "unknown preset accepted");
    const char *field = NULL;
    c = small_cfg;
    c.num_heads = 3;
    CHECK(lmk_model_config_check(&c, &field) == LMK_INVALID && strcmp(field, "num_heads") == 0,
          "heads not dividing d_model accepted");
    /* allocated tensors add up to the formula */
    fixture f;
    fixture_open(&f, &small_cfg, 1, 4, LMK_PREC_FP32, 1, 0);
    uint64_t total = 0;
    for (size_t i = 0; i < lmk_model_tensor_count(f.m); i++) {
        lmk_tensor *p;
        MUST(lmk_model_tensor(f.m, i, NULL, &p, NULL));
        total += p->numel;
    }
    CHECK(total == lmk_model_param_count(&small_cfg), "allocated %llu parameters, formula %llu",
          (unsigned long long)total, (unsigned long long)lmk_model_param_count(&small_cfg));
    const char *name;
    MUST(lmk_model_tensor(f.m, 2, &name, NULL, NULL));
    CHECK(strcmp(name, "layers.0.attn.q_proj.weight") == 0, "tensor 2 is %s", name);
    fixture_close(&f);
}

struct model_ctx {
    lmk_model *m;
};

static double model_J(void *p)
{
    return loss_of(((struct model_ctx *)p)->m);
}

static void test_model_gradients(void)
{
    fixture f;
    fixture_open(&f, &small_cfg, 2, 5, LMK_PREC_FP32, 7, 1);
    MUST(lmk_model_forward(f.m, 1));
    MUST(lmk_model_backward(f.m));
    struct model_ctx ctx = {f.m};
    size_t n = lmk_model_tensor_count(f.m);
    for (size_t i = 0; i < n; i++) {
        const char *name;
        lmk_tensor *p, *g;
        MUST(lmk_model_tensor(f.m, i, &name, &p, &g));
        /* the gradient is overwritten by nothing here: FD uses forward only */
        test_grad_check(name, model_J, &ctx, LMK_F(*p), LMK_F(*g), p->numel, 24, 1e-2f, 3e-4, 3e-2);
    }
    fixture_close(&f);
}

static void test_loss_at_init(void)
{
    lmk_model_config c;
    MUST(lmk_model_preset("tiny", &c));
    fixture f;
    fixture_open(&f, &c, 2, 16, LMK_PREC_FP32, 1, 0);
    float l = loss_of(f.m);
    CHECK(fabs(l - log(10000.0)) < 0.2, "tiny: loss at init %.4f, ln(V) = %.4f", l, log(10000.0));
    fixture_close(&f);
}

static float train(lmk_precision prec, uint64_t seed, int steps, float *first)
{
    lmk_model_config c = {"custom", 64, 16, 32, 64, 2, 4, 10000.0f, LMK_ATTN_NAIVE};
    fixture f;
    fixture_open(&f, &c, 2, 16, prec, seed, 1);
    lmk_adamw_config opt = lmk_adamw_defaults();
    opt.lr = 1e-2f;
    opt.max_grad_norm = 1.0f;
    float l = 0;
    for (int s = 0; s < steps; s++) {
        MUST(lmk_model_forward(f.m, 1));
        MUST(lmk_model_loss(f.m, &l));
        if (s == 0 && first)
            *first = l;
        MUST(lmk_model_backward(f.m));
        MUST(lmk_model_step(f.m, &opt));
        CHECK(lmk_allocator_live(f.a, LMK_MEM_ACTIVATION) == 0 &&
                  lmk_allocator_live(f.a, LMK_MEM_TEMPORARY) == 0,
              "activations left after a step");
    }
    l = loss_of(f.m);
    CHECK(lmk_model_steps_taken(f.m) == steps, "%s: %lld steps taken of %d",
          lmk_precision_name(prec), (long long)lmk_model_steps_taken(f.m), steps);
    fixture_close(&f);
    return l;
}

static void test_training(void)
{
    for (int p = 0; p < LMK_PREC_COUNT; p++) {
        float first, last = train((lmk_precision)p, 3, 15, &first);
        CHECK(isfinite(last) && last < first - 1.0f, "%s: loss %.4f → %.4f after 15 steps",
              lmk_precision_name((lmk_precision)p), first, last);
        printf("  %s: loss %.4f -> %.4f\n", lmk_precision_name((lmk_precision)p), first, last);
    }
}

static void test_determinism(void)
{
    float f1, f2, f3;
    float l1 = train(LMK_PREC_FP32, 5, 3, &f1), l2 = train(LMK_PREC_FP32, 5, 3, &f2);
    (void)train(LMK_PREC_FP32, 6, 3, &f3);
    CHECK(memcmp(&l1, &l2, sizeof l1) == 0 && f1 == f2, "same seed, different loss: %.9g vs %.9g", l1, l2);
    CHECK(f1 != f3, "different seeds give the same loss");
}

static void test_precisions(void)
{
    lmk_model_config c = {"custom", 64, 16, 32, 64, 2, 4, 10000.0f, LMK_ATTN_NAIVE};
    float ref = 0;
    for (int p = 0; p < LMK_PREC_COUNT; p++) {
        fixture f;
        fixture_open(&f, &c, 2, 16, (lmk_precision)p, 11, 0);
        float l = loss_of(f.m);
        if (p == 0)
            ref = l;
        double tol = p == LMK_PREC_BF16 ? 3e-2 : 5e-3;
        CHECK(fabs(l - ref) < tol, "%s loss %.6f vs fp32 %.6f", lmk_precision_name((lmk_precision)p), l, ref);
        CHECK(p == 0 || l != ref, "%s gives exactly the fp32 loss: no rounding applied?",
              lmk_precision_name((lmk_precision)p));
        fixture_close(&f);
    }
    lmk_precision pr;
    CHECK(lmk_precision_parse("bf16", &pr) == 0 && pr == LMK_PREC_BF16, "parse bf16");
    CHECK(lmk_precision_parse("fp8", &pr) != 0, "fp8 accepted");
}

/* Every parameter of a and b bitwise equal; returns the differing elements. */
static size_t params_differ(lmk_model *a, lmk_model *b)
{
    size_t bad = 0;
    for (size_t i = 0; i < lmk_model_tensor_count(a); i++) {
        lmk_tensor *pa, *pb;
        MUST(lmk_model_tensor(a, i, NULL, &pa, NULL));
        MUST(lmk_model_tensor(b, i, NULL, &pb, NULL));
        for (size_t j = 0; j < pa->numel; j++)
            bad += memcmp(LMK_F(*pa) + j, LMK_F(*pb) + j, sizeof(float)) != 0;
    }
    return bad;
}

/* The optimizer in backward: parameters, loss and step count bitwise those
 * of backward-then-step after 4 steps, a lower peak (gradients released once
 * applied) equal to its estimate (fp32, bf16 with its AdamW-written
 * copies, naive; tf32 with flash attention); the refusals: clipping, fp16,
 * no AdamW state, switching between a backward and its step, a step with
 * another configuration, a forward between a backward and its step. */
static void test_optimizer_in_backward(void)
{
    static const lmk_precision precs[3] = {LMK_PREC_FP32, LMK_PREC_BF16, LMK_PREC_TF32};
    lmk_model_config c = {"custom", 64, 16, 32, 64, 2, 4, 10000.0f, LMK_ATTN_NAIVE};
    lmk_adamw_config opt = lmk_adamw_defaults();
    opt.lr = 1e-2f;
    for (int k = 0; k < 3; k++) {
        c.attention = k == 2 ? LMK_ATTN_FLASH : LMK_ATTN_NAIVE;
        c.num_heads = k == 2 ? 2 : 4; /* flash: d_head 16 */
        fixture plain, inb;
        fixture_open(&plain, &c, 2, 16, precs[k], 21, LMK_MODEL_TRAIN);
        fixture_open(&inb, &c, 2, 16, precs[k], 21, LMK_MODEL_TRAIN);
        MUST(lmk_model_optimizer_in_backward(inb.m, &opt));
        float lp = 0, li = 0;
        for (int s = 0; s < 4; s++) {
            lmk_model *both[2] = {plain.m, inb.m};
            for (int j = 0; j < 2; j++) {
                MUST(lmk_model_forward(both[j], 1));
                MUST(lmk_model_backward(both[j]));
                MUST(lmk_model_step(both[j], &opt));
            }
        }
        /* each group's gradients released once applied: a lower peak at this short context, and the
         * estimate of either still equal to it */
        uint64_t pp = lmk_allocator_peak(plain.a, -1), pi = lmk_allocator_peak(inb.a, -1);
        uint64_t ep = lmk_model_memory_estimate_steps(&c, 2, 16, precs[k], LMK_MODEL_TRAIN, 4, 0).total;
        uint64_t ei = lmk_model_memory_estimate_steps(&c, 2, 16, precs[k], LMK_MODEL_TRAIN, 4, 1).total;
        CHECK(pi < pp && pp == ep && pi == ei, "%s: peaks %llu (in backward) vs %llu, estimates %llu vs %llu",
              lmk_precision_name(precs[k]), (unsigned long long)pi, (unsigned long long)pp, (unsigned long long)ei,
              (unsigned long long)ep);
        lp = loss_of(plain.m);
        li = loss_of(inb.m);
        size_t bad = params_differ(plain.m, inb.m);
        CHECK(bad == 0 && memcmp(&lp, &li, sizeof lp) == 0, "%s %s: %zu parameter elements differ, loss %.9g vs %.9g",
              lmk_precision_name(precs[k]), c.attention == LMK_ATTN_FLASH ? "flash" : "naive", bad, lp, li);
        CHECK(lmk_model_steps_taken(inb.m) == 4, "%lld steps taken of 4", (long long)lmk_model_steps_taken(inb.m));
        /* refusals */
        lmk_adamw_config other = opt;
        other.lr = 2e-2f;
        MUST(lmk_model_forward(inb.m, 1));
        MUST(lmk_model_backward(inb.m));
        CHECK(lmk_model_optimizer_in_backward(inb.m, NULL) == LMK_INVALID, "switched off between backward and step");
        CHECK(lmk_model_step(inb.m, &other) == LMK_INVALID, "a step with another configuration accepted");
        CHECK(lmk_model_forward(inb.m, 1) == LMK_INVALID, "a forward between a backward and its step accepted");
        MUST(lmk_model_step(inb.m, &opt));
        MUST(lmk_model_optimizer_in_backward(inb.m, NULL));
        CHECK(lmk_model_step(inb.m, &opt) == LMK_INVALID, "a step without a backward accepted");
        fixture_close(&plain);
        fixture_close(&inb);
    }
    lmk_adamw_config clip = opt;
    clip.max_grad_norm = 1.0f;
    fixture f;
    fixture_open(&f, &c, 2, 16, LMK_PREC_FP32, 3, LMK_MODEL_TRAIN);
    CHECK(lmk_model_optimizer_in_backward(f.m, &clip) == LMK_INVALID, "accepted with clipping");
    fixture_close(&f);
    fixture_open(&f, &c, 2, 16, LMK_PREC_FP16, 3, LMK_MODEL_TRAIN);
    CHECK(lmk_model_optimizer_in_backward(f.m, &opt) == LMK_INVALID, "accepted under fp16 (loss scaling)");
    fixture_close(&f);
    fixture_open(&f, &c, 2, 16, LMK_PREC_FP32, 3, LMK_MODEL_GRADIENTS);
    CHECK(lmk_model_optimizer_in_backward(f.m, &opt) == LMK_INVALID, "accepted without AdamW state");
    fixture_close(&f);
}

/* d_ff 1: w1 and w3 are (1, d) like a norm's gain but are matrices: random
 * (not ones), 16-bit copies under bf16 (the fused w1/w3 GEMM reads both), so
 * the estimate equals the peak and the loss repeats, for inference and a
 * train step. */
static void test_d_ff_one(void)
{
    lmk_model_config c = {"custom", 50, 17, 8, 1, 1, 1, 10000.0f, LMK_ATTN_NAIVE};
    static const int holds[2] = {LMK_MODEL_INFERENCE, LMK_MODEL_TRAIN};
    for (int k = 0; k < 2; k++) {
        float loss[2];
        for (int r = 0; r < 2; r++) {
            fixture f;
            fixture_open(&f, &c, 3, 17, LMK_PREC_BF16, 7, holds[k]);
            lmk_allocator_reset_peak(f.a);
            MUST(lmk_model_forward(f.m, holds[k] != LMK_MODEL_INFERENCE));
            MUST(lmk_model_loss(f.m, &loss[r]));
            if (holds[k] == LMK_MODEL_TRAIN) {
                lmk_adamw_config opt = lmk_adamw_defaults();
                MUST(lmk_model_backward(f.m));
                MUST(lmk_model_step(f.m, &opt));
            }
            lmk_memory_estimate e = lmk_model_memory_estimate(&c, 3, 17, LMK_PREC_BF16, holds[k]);
            uint64_t peak = lmk_allocator_peak(f.a, -1);
            CHECK(peak == e.total, "d_ff 1 bf16 training=%d: peak %llu vs estimate %llu", holds[k],
                  (unsigned long long)peak, (unsigned long long)e.total);
            lmk_tensor *w1;
            const char *name;
            MUST(lmk_model_tensor(f.m, 7, &name, &w1, NULL)); /* embedding, ln1, q, k, v, o, ln2, w1 */
            int ones = 0;
            for (size_t i = 0; i < w1->numel; i++)
                ones += LMK_F(*w1)[i] == 1.0f;
            CHECK(strcmp(name, "layers.0.ffn.w1.weight") == 0 && ones < (int)w1->numel,
                  "%s: %d of %zu elements are 1: initialised as a norm", name, ones, w1->numel);
            fixture_close(&f);
        }
        CHECK(memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0, "d_ff 1 bf16: loss %.9g then %.9g", loss[0], loss[1]);
    }
}

/* The estimate replays the allocation order: equal to the measured peak, for
 * every precision storage (fp32, bf16), attention and what the model holds;
 * gradients exist from backward until the step; nothing of size T² with flash. */
static void test_memory(void)
{
    /* LM-head-bound and attention-bound shapes (head dims 16 and 16) */
    static const struct {
        lmk_model_config c;
        int T;
    } shapes[] = {
        {{"custom", 500, 64, 64, 160, 3, 4, 10000.0f, LMK_ATTN_NAIVE}, 64},
        {{"custom", 50, 128, 32, 48, 2, 2, 10000.0f, LMK_ATTN_NAIVE}, 128},
    };
    static const int holds[3] = {LMK_MODEL_INFERENCE, LMK_MODEL_TRAIN, LMK_MODEL_GRADIENTS};
    static const lmk_precision precs[2] = {LMK_PREC_FP32, LMK_PREC_BF16};
    for (int k = 0; k < 24; k++) {
        lmk_model_config c = shapes[k / 12].c;
        int training = holds[k % 3], T = shapes[k / 12].T;
        lmk_precision prec = precs[(k / 3) % 2];
        c.attention = (k / 6) % 2 ? LMK_ATTN_FLASH : LMK_ATTN_NAIVE;
        uint64_t P = lmk_model_param_count(&c);
        fixture f;
        fixture_open(&f, &c, 2, T, prec, 1, training);
        lmk_allocator_reset_peak(f.a);
        CHECK(lmk_allocator_live(f.a, LMK_MEM_GRADIENT) == 0, "gradients before the first backward");
        MUST(lmk_model_forward(f.m, training));
        if (training) {
            uint64_t saved = lmk_allocator_live(f.a, LMK_MEM_ACTIVATION);
            CHECK(saved > 0, "no activations saved for backward");
            CHECK(lmk_allocator_peak(f.a, LMK_MEM_GRADIENT) == 0, "gradients allocated in forward");
            MUST(lmk_model_backward(f.m));
            CHECK(lmk_allocator_live(f.a, LMK_MEM_GRADIENT) == 4 * P, "gradients after backward: %llu, want %llu",
                  (unsigned long long)lmk_allocator_live(f.a, LMK_MEM_GRADIENT), (unsigned long long)(4 * P));
            lmk_adamw_config opt = lmk_adamw_defaults();
            if (training == LMK_MODEL_TRAIN) {
                MUST(lmk_model_step(f.m, &opt));
                CHECK(lmk_allocator_live(f.a, LMK_MEM_GRADIENT) == 0, "gradients kept after the step");
            } else {
                CHECK(lmk_model_step(f.m, &opt) == LMK_INVALID, "step without optimizer state accepted");
                CHECK(lmk_allocator_live(f.a, LMK_MEM_GRADIENT) == 4 * P, "gradients-only model dropped them");
            }
            CHECK((lmk_allocator_live(f.a, LMK_MEM_OPTIMIZER_STATE) > 0) == (training == LMK_MODEL_TRAIN),
                  "optimizer state present iff LMK_MODEL_TRAIN");
        }
        CHECK(lmk_allocator_live(f.a, LMK_MEM_ACTIVATION) == 0, "activations live after the step");
        lmk_memory_estimate e = lmk_model_memory_estimate(&c, 2, T, prec, training);
        uint64_t peak = lmk_allocator_peak(f.a, -1), cat[LMK_MEM_CATEGORY_COUNT];
        lmk_allocator_peak_breakdown(f.a, cat);
        CHECK(peak == e.total, "%s %s training=%d: peak %llu vs estimate %llu", lmk_precision_name(prec),
              c.attention ? "flash" : "naive", training, (unsigned long long)peak, (unsigned long long)e.total);
        CHECK(cat[LMK_MEM_GRADIENT] == e.gradients_at_peak && cat[LMK_MEM_PARAMETER_COPY] == e.parameter_copies,
              "gradients / copies at the peak %llu / %llu vs estimate %llu / %llu",
              (unsigned long long)cat[LMK_MEM_GRADIENT], (unsigned long long)cat[LMK_MEM_PARAMETER_COPY],
              (unsigned long long)e.gradients_at_peak, (unsigned long long)e.parameter_copies);
        CHECK(lmk_allocator_peak(f.a, LMK_MEM_PARAMETER) == e.parameters, "parameter bytes %llu vs %llu",
              (unsigned long long)lmk_allocator_peak(f.a, LMK_MEM_PARAMETER),
              (unsigned long long)e.parameters);
        printf("  %s %s training=%d T %d: peak %llu, estimate %llu\n", lmk_precision_name(prec),
               c.attention ? "flash" : "naive", training, T, (unsigned long long)peak, (unsigned long long)e.total);
        /* the log names the big allocations; flash allocates nothing of T² */
        int saw_scores = 0, saw_lse = 0;
        uint64_t largest = 0;
        const lmk_mem_event *ev = lmk_allocator_events(f.a);
        for (size_t i = 0; i < lmk_allocator_event_count(f.a); i++) {
            saw_scores |= strcmp(lmk_allocator_name(f.a, ev[i].name_id), "layers.1.attn.scores") == 0;
            saw_lse |= strcmp(lmk_allocator_name(f.a, ev[i].name_id), "layers.1.attn.lse") == 0;
            if (ev[i].category == LMK_MEM_ACTIVATION || ev[i].category == LMK_MEM_TEMPORARY)
                largest = ev[i].bytes > largest ? ev[i].bytes : largest;
        }
        uint64_t t2 = 2ull * c.num_heads * T * T * 2; /* a bf16 B·H·T² tensor */
        if (c.attention == LMK_ATTN_NAIVE)
            CHECK(saw_scores && !saw_lse, "no layers.1.attn.scores event");
        else /* the attention-bound shape: its logits are smaller than one 16-bit T² tensor */
            CHECK(!saw_scores && saw_lse && (k / 12 == 0 || largest < t2),
                  "flash: scores allocated or largest activation %llu >= %llu", (unsigned long long)largest,
                  (unsigned long long)t2);
        fixture_close(&f);
    }
}

/* attention naive_fused on the cpu backend (which has no fused softmax op:
 * the three ops run in naive_fused's allocation order): the same loss and
 * gradients as naive to the bit, and its own allocation order's peak equal
 * to the estimate in every training mode; the config check refuses an
 * unknown attention. */
static void test_naive_fused(void)
{
    static const lmk_precision precs[2] = {LMK_PREC_FP32, LMK_PREC_BF16};
    static const int modes[3] = {LMK_MODEL_INFERENCE, LMK_MODEL_GRADIENTS, LMK_MODEL_TRAIN};
    for (int k = 0; k < 6; k++) {
        lmk_precision prec = precs[k % 2];
        int training = modes[k / 2];
        lmk_model_config c = {"custom", 97, 320, 64, 96, 2, 4, 10000.0f, LMK_ATTN_NAIVE}, cf = c;
        cf.attention = LMK_ATTN_NAIVE_FUSED;
        fixture fn, ff;
        fixture_open(&fn, &c, 2, 128, prec, 5, training);
        fixture_open(&ff, &cf, 2, 128, prec, 5, training);
        float ln, lf;
        MUST(lmk_model_forward(fn.m, training != LMK_MODEL_INFERENCE));
        MUST(lmk_model_forward(ff.m, training != LMK_MODEL_INFERENCE));
        MUST(lmk_model_loss(fn.m, &ln));
        MUST(lmk_model_loss(ff.m, &lf));
        CHECK(memcmp(&ln, &lf, sizeof ln) == 0, "%s: naive_fused loss %.9g naive %.9g", lmk_precision_name(prec), lf,
              ln);
        if (training != LMK_MODEL_INFERENCE) {
            MUST(lmk_model_backward(fn.m));
            MUST(lmk_model_backward(ff.m));
            size_t differ = 0;
            for (size_t i = 0; i < lmk_model_tensor_count(fn.m); i++) {
                lmk_tensor *pn, *gn, *pf, *gf;
                MUST(lmk_model_tensor(fn.m, i, NULL, &pn, &gn));
                MUST(lmk_model_tensor(ff.m, i, NULL, &pf, &gf));
                differ += memcmp(gn->data, gf->data, gn->bytes) != 0;
            }
            CHECK(differ == 0, "%s: %zu gradients of naive_fused differ from naive's", lmk_precision_name(prec),
                  differ);
        }
        if (training == LMK_MODEL_TRAIN) {
            lmk_adamw_config opt = lmk_adamw_defaults();
            MUST(lmk_model_step(fn.m, &opt));
            MUST(lmk_model_step(ff.m, &opt));
        }
        uint64_t en = lmk_model_memory_estimate(&c, 2, 128, prec, training).total;
        uint64_t ef = lmk_model_memory_estimate(&cf, 2, 128, prec, training).total;
        CHECK(lmk_allocator_peak(fn.a, -1) == en && lmk_allocator_peak(ff.a, -1) == ef,
              "%s training=%d: peak / estimate naive %llu / %llu, naive_fused %llu / %llu", lmk_precision_name(prec),
              training, (unsigned long long)lmk_allocator_peak(fn.a, -1), (unsigned long long)en,
              (unsigned long long)lmk_allocator_peak(ff.a, -1), (unsigned long long)ef);
        fixture_close(&fn);
        fixture_close(&ff);
    }
    lmk_model_config bad = {"custom", 97, 320, 64, 96, 2, 4, 10000.0f, 3};
    const char *field = NULL;
    CHECK(lmk_model_config_check(&bad, &field) != LMK_OK && field && strcmp(field, "attention") == 0,
          "attention 3 accepted (field %s)", field ? field : "-");
}

/* Flash attention against naive on the cpu backend (the float32 reference
 * kernels, 16-bit q, k, v, O under bf16): loss and every gradient of two
 * steps' worth of weights, within the dtype's tolerance. Then the shape check. */
static void test_flash_vs_naive(void)
{
    static const lmk_precision precs[3] = {LMK_PREC_FP32, LMK_PREC_TF32, LMK_PREC_BF16};
    /* T 37: one causal block; T 300: the naive path's causal GEMM blocks
     * (128, 128, 44 rows), against the flash reference */
    for (int k = 0; k < 6; k++) {
        lmk_precision prec = precs[k % 3];
        int T = k < 3 ? 37 : 300;
        /* head dim 16, T not a multiple of any tile */
        lmk_model_config c = {"custom", 97, 320, 64, 96, 2, 4, 10000.0f, LMK_ATTN_NAIVE};
        fixture fn, ff;
        fixture_open(&fn, &c, 2, T, prec, 21, LMK_MODEL_GRADIENTS);
        c.attention = LMK_ATTN_FLASH;
        fixture_open(&ff, &c, 2, T, prec, 21, LMK_MODEL_GRADIENTS);
        float ln, lf;
        MUST(lmk_model_forward(fn.m, 1));
        MUST(lmk_model_forward(ff.m, 1));
        MUST(lmk_model_loss(fn.m, &ln));
        MUST(lmk_model_loss(ff.m, &lf));
        double ltol = prec == LMK_PREC_BF16 ? 1e-2 : prec == LMK_PREC_TF32 ? 2e-3 : 1e-5;
        CHECK(fabs((double)lf - ln) <= ltol * fabs(ln), "%s: flash loss %.7f naive %.7f", lmk_precision_name(prec), lf,
              ln);
        MUST(lmk_model_backward(fn.m));
        MUST(lmk_model_backward(ff.m));
        /* |flash − naive| ≤ atol + rtol·|naive|, atol relative to the tensor's largest gradient */
        double rtol = prec == LMK_PREC_BF16 ? 6e-2 : prec == LMK_PREC_TF32 ? 1e-2 : 1e-4;
        double worst = 0;
        const char *worst_name = "";
        for (size_t i = 0; i < lmk_model_tensor_count(fn.m); i++) {
            const char *name;
            lmk_tensor *pn, *gn, *pf, *gf;
            MUST(lmk_model_tensor(fn.m, i, &name, &pn, &gn));
            MUST(lmk_model_tensor(ff.m, i, NULL, &pf, &gf));
            const float *a = gn->data, *b = gf->data;
            double mx = 0, err = 0;
            for (size_t j = 0; j < gn->numel; j++)
                mx = fabs(a[j]) > mx ? fabs(a[j]) : mx;
            size_t bad = 0;
            for (size_t j = 0; j < gn->numel; j++) {
                double e = fabs((double)b[j] - a[j]);
                bad += e > rtol * mx + rtol * fabs(a[j]);
                err = e / (mx > 0 ? mx : 1) > err ? e / (mx > 0 ? mx : 1) : err;
            }
            CHECK(mx > 0, "%s: gradient of %s is zero", lmk_precision_name(prec), name);
            CHECK(bad == 0, "%s: %zu elements of %s beyond tolerance (max rel. err %.3g)", lmk_precision_name(prec),
                  bad, name, err);
            if (err > worst) {
                worst = err;
                worst_name = name;
            }
        }
        printf("  %s T %d: loss naive %.7f flash %.7f; worst gradient %s rel. err %.3g\n", lmk_precision_name(prec),
               T, ln, lf, worst_name, worst);
        fixture_close(&fn);
        fixture_close(&ff);
    }
    const char *field = NULL;
    lmk_model_config c = {"custom", 50, 16, 48, 64, 1, 2, 10000.0f, LMK_ATTN_FLASH}; /* head dim 24 */
    CHECK(lmk_model_config_check(&c, &field) == LMK_INVALID && strcmp(field, "attention") == 0,
          "flash with head dim 24 accepted (field %s)", field ? field : "-");
}

static void test_alloc_failures(void)
{
    /* every allocation of create, forward and backward can fail cleanly */
    int failures_seen = 0;
    for (uint64_t n = 1; n < 400; n++) {
        lmk_allocator *a;
        lmk_model *m = NULL;
        MUST(lmk_allocator_create(B, &a));
        lmk_allocator_fail_after(a, n);
        int rc = lmk_model_create(B, a, &small_cfg, 1, 4, LMK_PREC_FP32, 1, 1, &m);
        if (rc == LMK_OK) {
            int32_t ids[4] = {1, 2, 3, 4};
            MUST(lmk_model_set_batch(m, ids, ids));
            rc = lmk_model_forward(m, 1);
            if (rc == LMK_OK)
                rc = lmk_model_backward(m);
        }
        if (rc == LMK_OK) {
            lmk_model_free(m);
            lmk_allocator_free(a);
            break;
        }
        failures_seen++;
        CHECK(rc == LMK_NOMEM, "injected failure %llu gave %d", (unsigned long long)n, rc);
        lmk_model_free(m);
        CHECK(lmk_allocator_live(a, -1) == 0, "failure %llu leaks %llu bytes", (unsigned long long)n,
              (unsigned long long)lmk_allocator_live(a, -1));
        lmk_allocator_free(a);
    }
    CHECK(failures_seen > 50, "only %d injection points", failures_seen);
}

static void test_flops(void)
{
    lmk_model_config c;
    MUST(lmk_model_preset("small", &c));
    lmk_model_flops f = lmk_model_flops_per_step(&c, 4, 128);
    double d = 768, ff = 3072, N = 512;
    double want = 12 * (2 * N * (4 * d * d + 3 * d * ff) + 4 * 4 * 128.0 * 128 * d) + 2 * N * d * 10000;
    CHECK(test_close(f.forward, want, 0, 1e-12), "forward flops %.6g want %.6g", f.forward, want);
    CHECK(f.backward == 2 * f.forward, "backward flops");
}

/* Autocast: a training model (AdamW) keeps its 16-bit weight copies from
 * create on (2 bytes per matrix element but the embedding) and each step
 * rewrites them; the steps then equal those of a model whose copies are
 * re-cast before every forward (lmk_model_tensor marks them stale), bit for
 * bit. A gradients-only model makes them per step (forward to the end of
 * backward); an inference model frees them layer by layer (never more than
 * one layer's and the LM head's). The step counter and the loss-scale
 * reports. */
static void test_autocast(void)
{
    lmk_model_config c = {"custom", 64, 16, 32, 64, 2, 4, 10000.0f, LMK_ATTN_NAIVE};
    uint64_t P = lmk_model_param_count(&c);
    uint64_t matrices = P - (uint64_t)c.vocab_size * c.d_model - (2 * c.num_layers + 1) * c.d_model;
    for (int k = 0; k < 3; k++) {
        lmk_precision prec = k == 0 ? LMK_PREC_BF16 : k == 1 ? LMK_PREC_FP16 : LMK_PREC_FP32;
        const char *pn = lmk_precision_name(prec);
        fixture f, fr;
        fixture_open(&f, &c, 2, 16, prec, 3, LMK_MODEL_TRAIN);
        fixture_open(&fr, &c, 2, 16, prec, 3, LMK_MODEL_TRAIN);
        uint64_t want = prec == LMK_PREC_FP32 ? 0 : 2 * matrices;
        CHECK(lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY) == want, "%s: parameter_copy %llu bytes after create, want %llu",
              pn, (unsigned long long)lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY), (unsigned long long)want);
        lmk_adamw_config opt = lmk_adamw_defaults();
        for (int s = 0; s < 3; s++) {
            lmk_allocator_reset_peak(f.a);
            MUST(lmk_model_forward(f.m, 1));
            MUST(lmk_model_backward(f.m));
            MUST(lmk_model_step(f.m, &opt));
            CHECK(lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY) == want &&
                      lmk_allocator_peak(f.a, LMK_MEM_PARAMETER_COPY) == want,
                  "%s: persistent copies %llu (peak %llu) bytes in step %d, want %llu", pn,
                  (unsigned long long)lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY),
                  (unsigned long long)lmk_allocator_peak(f.a, LMK_MEM_PARAMETER_COPY), s, (unsigned long long)want);
            for (size_t i = 0; i < lmk_model_tensor_count(fr.m); i++) { /* stale: re-cast */
                lmk_tensor *p;
                MUST(lmk_model_tensor(fr.m, i, NULL, &p, NULL));
            }
            MUST(lmk_model_forward(fr.m, 1));
            MUST(lmk_model_backward(fr.m));
            MUST(lmk_model_step(fr.m, &opt));
        }
        float la = 0, lb = 0;
        MUST(lmk_model_forward(f.m, 1));
        MUST(lmk_model_loss(f.m, &la));
        MUST(lmk_model_forward(fr.m, 1));
        MUST(lmk_model_loss(fr.m, &lb));
        CHECK(la == lb, "%s: loss after 3 steps with AdamW's copies %.9g vs re-cast copies %.9g", pn, la, lb);
        CHECK(lmk_model_steps_taken(f.m) == 3, "%s: steps taken %lld", pn, (long long)lmk_model_steps_taken(f.m));
        CHECK(lmk_model_steps_skipped(f.m) == 0, "skipped steps");
        CHECK(lmk_model_loss_scale(f.m) == (prec == LMK_PREC_FP16 ? 65536.0f : 1.0f), "%s: loss scale %g", pn,
              lmk_model_loss_scale(f.m));
        fixture_close(&f);
        fixture_close(&fr);
        /* gradients only: per-step copies, made once by forward, freed by backward */
        fixture_open(&f, &c, 2, 16, prec, 3, LMK_MODEL_GRADIENTS);
        for (int s = 0; s < 2; s++) {
            lmk_allocator_reset_peak(f.a);
            MUST(lmk_model_forward(f.m, 1));
            CHECK(lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY) == want,
                  "%s: parameter_copy %llu bytes after forward, want %llu", pn,
                  (unsigned long long)lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY), (unsigned long long)want);
            MUST(lmk_model_backward(f.m));
            CHECK(lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY) == 0 &&
                      lmk_allocator_peak(f.a, LMK_MEM_PARAMETER_COPY) == want,
                  "%s: parameter copies not made once and freed by backward", pn);
        }
        fixture_close(&f);
        /* inference */
        fixture_open(&f, &c, 2, 16, prec, 3, LMK_MODEL_INFERENCE);
        lmk_allocator_reset_peak(f.a);
        MUST(lmk_model_forward(f.m, 0));
        CHECK(lmk_allocator_live(f.a, LMK_MEM_PARAMETER_COPY) == 0, "copies live after inference");
        uint64_t layer = 2 * (4ull * c.d_model * c.d_model + 3ull * c.d_model * c.d_ff);
        uint64_t head = 2ull * c.vocab_size * c.d_model;
        uint64_t most = layer > head ? layer : head;
        CHECK(lmk_allocator_peak(f.a, LMK_MEM_PARAMETER_COPY) == (prec == LMK_PREC_FP32 ? 0 : most),
              "%s: inference copies peak %llu, want one layer's or the head's %llu", pn,
              (unsigned long long)lmk_allocator_peak(f.a, LMK_MEM_PARAMETER_COPY), (unsigned long long)most);
        fixture_close(&f);
    }
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"autocast", test_autocast},
    {"param_counts", test_param_counts},
    {"gradients", test_model_gradients},
    {"loss_at_init", test_loss_at_init},
    {"training", test_training},
    {"determinism", test_determinism},
    {"optimizer_in_backward", test_optimizer_in_backward},
    {"d_ff_one", test_d_ff_one},
    {"precisions", test_precisions},
    {"memory", test_memory},
    {"flash_vs_naive", test_flash_vs_naive},
    {"naive_fused", test_naive_fused},
    {"alloc_failures", test_alloc_failures},
    {"flops", test_flops},
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
        fflush(stdout);
    }
    lmk_backend_free(B);
    return check_report("engine model");
}
