/* The CS336 TransformerLM on the backend interface: presets, init, forward,
 * backward, AdamW, FLOPs and memory estimates. See model.h. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* NVTX ranges for Nsight Systems and the profile job (header-only NVTX3;
 * no-ops unless a tool is injected). Every kernel of a step is launched
 * inside forward, backward or optimizer; with the optimizer in backward,
 * the updates inside backward are in "optimizer in backward" ranges. */
#ifdef LMPERF_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#define RANGE_PUSH(name) nvtxRangePushA(name)
#define RANGE_POP() nvtxRangePop()
#else
#define RANGE_PUSH(name) ((void)0)
#define RANGE_POP() ((void)0)
#endif

/* "layer N" ranges (name built on the stack). */
static void range_push_layer(int l)
{
    char name[32];
    snprintf(name, sizeof name, "layer %d", l);
    RANGE_PUSH(name);
    (void)name;
}

#define RMS_EPS 1e-5f
/* Build-time knob: 1 (default) = under float32/tf32 a fused group's weights
 * (q, k, v; w1, w3) are stored as one stacked allocation (p_group), so their
 * forward, dx and dW are one GEMM each, as under bf16/fp16 with the stacked
 * copy; 0 = one allocation and one GEMM per weight. On the H200 1 measured
 * fwd+bwd −4…−10% at tf32 small/medium T ≤ 256, −5% fp32 small/128,
 * ±0.2% fp32 medium/512 (kernels/PERF.md, session 10, call 8). */
#ifndef LMK_STACKED_F32
#define LMK_STACKED_F32 1
#endif
/* Build-time knob: 1 (default) = the q, k, v projections run as one GEMM
 * into an (N, 3d) output (RoPE and the head split read it with a row stride)
 * and their backward as one dx GEMM with K = 3d over the (N, 3d) gradient,
 * the weights' 16-bit copies stacked into one (3d, d) matrix; 0 = three
 * GEMMs each way (the float32 dx accumulated by two of them). */
#ifndef LMK_FUSED_QKV
#define LMK_FUSED_QKV 1
#endif
/* Build-time knob: 1 (default) = w1 and w3 likewise: one GEMM into an (N,
 * 2·d_ff) output that SwiGLU reads with rows 2·d_ff apart, one dx GEMM with
 * K = 2·d_ff over the gradient SwiGLU's backward writes there; 0 = two each. */
#ifndef LMK_FUSED_W13
#define LMK_FUSED_W13 1
#endif
/* Build-time knob: 1 (default) = where one fused GEMM makes a norm
 * output's gradient (LMK_FUSED_QKV: ln1's, LMK_FUSED_W13: ln2's) it writes
 * it in the 16-bit activation dtype (autocast's dtype for a linear's dx;
 * float32 accumulation inside the GEMM, one rounding) and the RMSNorm
 * backward reads that; 0 = float32. */
#ifndef LMK_NORM_DX16
#define LMK_NORM_DX16 1
#endif
/* Build-time knob: 1 (default) = a fused group's weight gradients are one
 * float32 (Σ rows, cols) allocation (each weight's g a view into it)
 * written by one dW GEMM over the whole fused gradient; 0 = one allocation
 * and one dW GEMM per weight. On after the lent H100 ran it (with
 * LMK_GEMM_TUNE): test_cuda_ops, graphs bitwise, torch_reference 12/12,
 * test_model_flash passed; large/1024 bf16 fwd+bwd 70.76 -> 70.16 ms on its
 * own (kernels/PERF.md, eng3 call 3). */
#ifndef LMK_FUSED_DW
#define LMK_FUSED_DW 1
#endif
/* Build-time knob: 1 (default) = under bf16/fp16 the naive attention's six
 * causal GEMMs (scores, P·V, dP, dV, dQ, dK) run as the backend's
 * attn_causal_gemm (one launch each over 64-row causal tiles, where the
 * backend has it and supports the shape) and the causal softmax writes
 * zeros up to the end of each 64-row tile; 0 = blocked strided-batched
 * GEMMs (causal_block). On after the H200 measured it against 0 (fwd+bwd
 * xl/1024 bf16 112.8 vs 114.1 ms, large/1024 58.7 vs 59.3, medium/256 9.2
 * vs 9.2–12.7, small/128 3.4 vs 3.8–5.6, 2.7B/512 equal; kernels/PERF.md,
 * session 11, call 4). */
#ifndef LMK_ATTN_GEMM16
#define LMK_ATTN_GEMM16 1
#endif
/* Build-time knob: 1 = under tf32 as well (LMK_ATTN_GEMM16 on), the
 * backend's float32 causal GEMMs (TF32 products, one launch each), and
 * under attention naive_fused its fused softmax kernels, instead of the
 * blocked cuBLAS GEMMs and the separate softmax. 0 (default) until the
 * kernels (cuda/attn_gemm_tf32.cu) have passed tests/gpu on a GPU and been
 * measured against 0: written in session 34, when no GPU was left to run
 * them (kernels/PERF.md, "Session 34"). A variant for that A/B:
 * tests/gpu/obj_variant.sh BUILD OUT "-DLMK_ATTN_GEMM_TF32=1" model.c. */
#ifndef LMK_ATTN_GEMM_TF32
#define LMK_ATTN_GEMM_TF32 0
#endif
/* Build-time knob: 1 = where attention naive_fused runs the backend's fused
 * kernels (m->attn_softmax_fused), they read and write the merged (B, T, H,
 * dh) layout of the (N, d) activations (backend.h lmk_heads_at): the
 * forward's values land in `merged` (no head merge) and the backward's
 * dout is read merged by dV and the dP kernel (no head split), two copies
 * of (N, d) and two launches fewer per layer; 0 = those copies. The
 * allocations keep their sizes and order (the estimate stays exact). On
 * after the H200 measured it against 0 (naive_fused fwd+bwd, three rounds:
 * xl/1024 bf16 104.87 vs 105.80 ms, large/1024 53.46 vs 54.14, small/128
 * with graphs 2.47 vs 2.51; final losses equal; kernels/PERF.md, session
 * 16, call 1). */
#ifndef LMK_ATTN_MERGED_IO
#define LMK_ATTN_MERGED_IO 1
#endif
#define LOSS_SCALE_INIT 65536.0f
#define LOSS_SCALE_GROWTH_INTERVAL 2000

static const lmk_model_config presets[] = {
    {"tiny", 10000, 1024, 512, 1344, 4, 16, 10000.0f, LMK_ATTN_NAIVE},
    {"small", 10000, 1024, 768, 3072, 12, 12, 10000.0f, LMK_ATTN_NAIVE},
    {"medium", 10000, 1024, 1024, 4096, 24, 16, 10000.0f, LMK_ATTN_NAIVE},
    {"large", 10000, 1024, 1280, 5120, 36, 20, 10000.0f, LMK_ATTN_NAIVE},
    {"xl", 10000, 1024, 1600, 6400, 48, 25, 10000.0f, LMK_ATTN_NAIVE},
    {"2.7B", 10000, 1024, 2560, 10240, 32, 32, 10000.0f, LMK_ATTN_NAIVE},
};

static const char *const precision_names[LMK_PREC_COUNT] = {"fp32", "tf32", "bf16", "fp16"};

const char *lmk_precision_name(lmk_precision p)
{
    return (unsigned)p < LMK_PREC_COUNT ? precision_names[p] : "unknown";
}

int lmk_precision_parse(const char *name, lmk_precision *p)
{
    for (int i = 0; i < LMK_PREC_COUNT; i++) {
        if (strcmp(name, precision_names[i]) == 0) {
            *p = (lmk_precision)i;
            return LMK_OK;
        }
    }
    return LMK_INVALID;
}

size_t lmk_model_preset_count(void)
{
    return sizeof presets / sizeof presets[0];
}

const lmk_model_config *lmk_model_preset_at(size_t i)
{
    return i < lmk_model_preset_count() ? &presets[i] : NULL;
}

int lmk_model_preset(const char *name, lmk_model_config *out)
{
    for (size_t i = 0; i < lmk_model_preset_count(); i++) {
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i];
            return LMK_OK;
        }
    }
    return LMK_INVALID;
}

int lmk_model_config_check(const lmk_model_config *c, const char **field)
{
    const char *f = NULL;
    if (c->vocab_size < 1)
        f = "vocab_size";
    else if (c->context_length < 1)
        f = "context_length";
    else if (c->d_model < 1)
        f = "d_model";
    else if (c->d_ff < 1)
        f = "d_ff";
    else if (c->num_layers < 1)
        f = "num_layers";
    else if (c->num_heads < 1 || c->d_model % c->num_heads != 0 ||
             (c->d_model / c->num_heads) % 2 != 0)
        f = "num_heads";
    else if (!(c->rope_theta > 0.0f))
        f = "rope_theta";
    else if ((c->attention != LMK_ATTN_NAIVE && c->attention != LMK_ATTN_FLASH &&
              c->attention != LMK_ATTN_NAIVE_FUSED) ||
             (c->attention == LMK_ATTN_FLASH && !lmk_attn_head_dim_supported(c->d_model / c->num_heads)))
        f = "attention";
    if (f) {
        if (field)
            *field = f;
        return LMK_INVALID;
    }
    return LMK_OK;
}

uint64_t lmk_model_param_count(const lmk_model_config *c)
{
    uint64_t V = (uint64_t)c->vocab_size, d = (uint64_t)c->d_model, ff = (uint64_t)c->d_ff;
    uint64_t L = (uint64_t)c->num_layers;
    return 2 * V * d + L * (4 * d * d + 3 * d * ff + 2 * d) + d;
}

lmk_model_flops lmk_model_flops_per_step(const lmk_model_config *c, int batch, int T)
{
    double B = batch, t = T, d = c->d_model, ff = c->d_ff, L = c->num_layers,
           V = c->vocab_size;
    double per_layer = 2.0 * B * t * (4.0 * d * d + 3.0 * d * ff) + 4.0 * B * t * t * d;
    lmk_model_flops f;
    f.forward = L * per_layer + 2.0 * B * t * d * V;
    f.backward = 2.0 * f.forward;
    f.optimizer = 10.0 * (double)lmk_model_param_count(c);
    return f;
}

lmk_adamw_config lmk_adamw_defaults(void)
{
    return (lmk_adamw_config){.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                              .weight_decay = 0.01f, .max_grad_norm = 0.0f};
}

/* --- the model object ----------------------------------------------------- */

enum { P_LN1, P_WQ, P_WK, P_WV, P_WO, P_LN2, P_W1, P_W2, P_W3, P_PER_LAYER };

static const char *const layer_param_names[P_PER_LAYER] = {
    "ln1.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
    "attn.output_proj.weight", "ln2.weight", "ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight",
};

typedef struct param_slot {
    char name[64];
    lmk_tensor p, g, m, v; /* m, v: NULL data unless training with AdamW; g: from
                            * its first write in backward until lmk_model_step */
    lmk_tensor h;          /* 16-bit copy of p (parameter_copy; bf16/fp16 matrices
                            * but the embedding), from its first use in forward
                            * to the end of its layer's backward */
    int h_view;            /* h points into the copy owned by the first slot of its
                            * fused group (not released through this slot) */
    int fuse_n;            /* > 0: the first of a fused group of fuse_n slots whose
                            * copies are one matrix, rows stacked in fuse[] order */
    int fuse[3];           /* the group's slots (indices into params) */
    int fused_into;        /* the group's first slot, or -1 */
    int p_view;            /* p points into its fused group's p_group */
    lmk_tensor p_group;    /* the first slot of a fused group under float32/tf32: the group's
                            * weights as one allocation, rows stacked in fuse[] order (so one GEMM
                            * reads them, as the 16-bit copies are under bf16/fp16) */
    int g_view;            /* g points into its fused group's g_group (LMK_FUSED_DW) */
    lmk_tensor g_group;    /* the first slot of a fused group: its weights' gradients as one
                            * allocation (LMK_FUSED_DW), from backward until the step */
    int g_ready;           /* g zeroed (or written) in the current backward */
    int rows, cols;        /* (rows, cols); norms: (1, d) (so is w1 / w3 when d_ff is 1) */
    int is_norm;           /* an RMSNorm gain: float32 everywhere (no 16-bit copy), initialised to ones */
    float init_std;        /* 0: ones (the norms) */
} param_slot;

/* One layer's activations saved for backward (see the plan in forward).
 * ln*_rstd, mid are float32; the others are of the model's activation dtype
 * (m->adt: 16-bit under bf16/fp16). */
typedef struct layer_acts {
    lmk_tensor ln1_rstd, ln1_out;  /* (N), (N, d) */
    lmk_tensor qh, kh, vh;         /* (B, H, T, dh) each, after RoPE on q, k */
    lmk_tensor probs;              /* (B, H, T, T), naive attention */
    lmk_tensor o, lse;             /* flash: output (B, H, T, dh), logsumexp (B, H, T) float32 */
    lmk_tensor merged;             /* (N, d) heads merged, input of output_proj */
    lmk_tensor mid;                /* (N, d) x + attention */
    lmk_tensor ln2_rstd, ln2_out;  /* (N), (N, d) */
    lmk_tensor a, g, act;          /* (N, d_ff): w1 x, w3 x, silu(a) ⊙ g; fused_w13: a is
                                    * (N, 2·d_ff) rows [w1 x | w3 x], g empty */
} layer_acts;

struct lmk_model {
    lmk_backend *b;   /* borrowed */
    lmk_allocator *a; /* borrowed */
    lmk_model_config c;
    int B, T, N, H, dh;
    lmk_precision prec;
    lmk_round in_round, out_round;
    lmk_round half;         /* BF16/FP16: real 16-bit GEMM inputs; else NONE */
    lmk_dtype adt;          /* dtype of the activations autocast makes 16-bit (linear
                             * outputs and what only feeds GEMMs): half's, else F32 */
    int training;
    size_t nparams;
    param_slot *params;     /* (nparams) */
    lmk_opt_tensor *opt;    /* (nparams) host table of the multi-tensor optimizer ops,
                             * refilled each step (gradients move between steps) */
    lmk_tensor rope;        /* (T, dh/2, 2) workspace */
    lmk_tensor inputs;      /* (N) int32 */
    lmk_tensor targets;     /* (N) int32 */
    lmk_tensor scalars;     /* [loss, sumsq, factor, alpha] workspace */
    lmk_tensor step;        /* int64 device step counter (training with AdamW) */
    layer_acts *acts;       /* (L) */
    lmk_tensor *resid;      /* (L + 1): embedding output, layer outputs */
    lmk_tensor lnf_rstd, lnf_out, logits;
    int logits_valid; /* logits hold the last forward's logits (no backward since) */
    int keep_logits;  /* a forward without backward keeps its logits (lmk_model_keep_logits) */
    int have_grad_ready;    /* forward(with_backward) done, backward pending */
    int have_grads;         /* backward done, step pending */
    float loss_scale;
    int good_steps;
    int64_t step_calls;     /* lmk_model_step calls that ran the optimizer */
    int64_t skipped;        /* fp16 steps skipped on overflow (host-decided) */
    int fused_qkv;          /* LMK_FUSED_QKV (a model field so both paths stay compiled) */
    int fused_w13;          /* LMK_FUSED_W13 */
    int norm_dx16;          /* LMK_NORM_DX16 */
    int fused_dw;           /* LMK_FUSED_DW */
    int attn_tile;          /* LMK_ATTN_GEMM16: the backend's causal tile (rows), 0 = blocked GEMMs */
    int attn_softmax_fused; /* LMK_ATTN_NAIVE_FUSED where the backend has it (attn_tile set): the
                             * causal softmax inside the scores / dP GEMMs' kernels */
    int attn_merged_io;     /* LMK_ATTN_MERGED_IO with attn_softmax_fused: values and dout merged */
    int persistent_copies;  /* the 16-bit weight copies live from create on and AdamW
                             * rewrites them (bf16/fp16 with optimizer state) */
    int copies_stale;       /* parameters may have been written since the copies were
                             * made (lmk_model_tensor handed one out): forward re-casts */
    int opt_in_backward;    /* lmk_model_optimizer_in_backward is on, with opt_cfg */
    lmk_adamw_config opt_cfg;
    int opt_begun;          /* this step's adamw_begin is issued (optimizer in backward) */
    int tracing;            /* precision report on */
    const char *phase;      /* "forward", "backward", "optimizer" */
    lmk_precision_row *prec_rows; /* (PREC_ROWS_MAX) when tracing was ever on */
    size_t n_prec_rows;
};

static int make_persistent_copies(lmk_model *m);
static int group_copy(lmk_model *m, param_slot *first, int persistent);
static int opt_lane_join(lmk_model *m, int rc);
static int adamw_in_backward(lmk_model *m, size_t first, size_t count);

#define TRY(x)                   \
    do {                         \
        rc = (x);                \
        if (rc != LMK_OK)        \
            goto out;            \
    } while (0)

static param_slot *layer_param(lmk_model *m, int l, int which)
{
    return &m->params[1 + (size_t)l * P_PER_LAYER + which];
}

static param_slot *param_final_norm(lmk_model *m)
{
    return &m->params[1 + (size_t)m->c.num_layers * P_PER_LAYER];
}

static param_slot *param_lm_head(lmk_model *m)
{
    return &m->params[2 + (size_t)m->c.num_layers * P_PER_LAYER];
}

/* splitmix64: a small, good, stateless-seedable generator. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) /* (0, 1) */
{
    return ((double)(splitmix64(s) >> 11) + 0.5) * 0x1p-53;
}

/* Standard normal truncated to [-3, 3] by rejection (Box-Muller). */
static double trunc_normal(uint64_t *s)
{
    for (;;) {
        double u1 = uniform01(s), u2 = uniform01(s);
        double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        if (z >= -3.0 && z <= 3.0)
            return z;
    }
}

/* A matrix slot (init std) or, with std 0, an RMSNorm gain of ones. */
static void set_slot(param_slot *s, const char *name, int rows, int cols, float std)
{
    snprintf(s->name, sizeof s->name, "%s", name);
    s->rows = rows;
    s->cols = cols;
    s->is_norm = std == 0.0f;
    s->init_std = std;
}

static float linear_std(int din, int dout)
{
    return (float)sqrt(2.0 / ((double)din + dout));
}

/* Initialises every parameter from the seed: stream i is seeded by
 * (seed, i), so values do not depend on the order of initialisation, and
 * the parameters are filled by OpenMP threads (one host buffer each; the
 * normals cost ~30 ns each, a minute for xl on one core). */
static int init_params(lmk_model *m, uint64_t seed)
{
    size_t maxn = 0;
    for (size_t i = 0; i < m->nparams; i++)
        maxn = m->params[i].p.numel > maxn ? m->params[i].p.numel : maxn;
    int rc = LMK_OK;
    long np = (long)m->nparams;
#pragma omp parallel
    {
        float *host = malloc(maxn * sizeof *host);
        if (!host) {
#pragma omp atomic write
            rc = LMK_NOMEM;
        }
#pragma omp for schedule(dynamic)
        for (long i = 0; i < np; i++) {
            param_slot *s = &m->params[i];
            int bad;
#pragma omp atomic read
            bad = rc;
            if (!host || bad != LMK_OK)
                continue;
            uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(i + 1));
            for (size_t j = 0; j < s->p.numel; j++)
                host[j] = s->init_std > 0.0f ? (float)(s->init_std * trunc_normal(&state)) : 1.0f;
            int r;
#pragma omp critical(lmk_init_upload)
            r = m->b->upload(m->b, s->p.data, host, s->p.bytes);
            if (r != LMK_OK) {
#pragma omp atomic write
                rc = r;
            }
        }
        free(host);
    }
    return rc;
}

static int build_rope_table(lmk_model *m)
{
    int half = m->dh / 2;
    size_t n = (size_t)m->T * half * 2;
    float *host = malloc(n * sizeof *host);
    if (!host)
        return LMK_NOMEM;
    for (int t = 0; t < m->T; t++) {
        for (int k = 0; k < half; k++) {
            double angle = t * pow((double)m->c.rope_theta, -2.0 * k / m->dh);
            host[((size_t)t * half + k) * 2] = (float)cos(angle);
            host[((size_t)t * half + k) * 2 + 1] = (float)sin(angle);
        }
    }
    int rc = m->b->upload(m->b, m->rope.data, host, n * sizeof *host);
    free(host);
    return rc;
}

static void release_layer(lmk_model *m, layer_acts *la)
{
    lmk_tensor *ts[] = {&la->ln1_rstd, &la->ln1_out, &la->qh, &la->kh, &la->vh,
                        &la->probs, &la->o, &la->lse, &la->merged, &la->mid, &la->ln2_rstd, &la->ln2_out,
                        &la->a, &la->g, &la->act};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        lmk_tensor_release(m->a, ts[i]);
}

/* Releases s's 16-bit copy (a view into its group's copy is only forgotten:
 * the group's first slot owns the memory, released with it). */
static void copy_drop(lmk_model *m, param_slot *s)
{
    if (s->h_view) {
        s->h = (lmk_tensor){0};
        s->h_view = 0;
        return;
    }
    lmk_tensor_release(m->a, &s->h);
}

/* Releases s's gradient (a view is only forgotten; the group's allocation
 * goes with its first slot). */
static void grad_drop(lmk_model *m, param_slot *s)
{
    if (s->g_view)
        s->g = (lmk_tensor){0};
    else
        lmk_tensor_release(m->a, &s->g);
    s->g_view = 0;
    lmk_tensor_release(m->a, &s->g_group);
}

/* Releases the 16-bit weight copies: all of them (model_free), or only
 * per-step ones (persistent copies stay). */
static void release_param_copies(lmk_model *m, int persistent_too)
{
    if (m->persistent_copies && !persistent_too)
        return;
    for (size_t i = 0; m->params && i < m->nparams; i++)
        copy_drop(m, &m->params[i]);
}

static void release_activations(lmk_model *m)
{
    release_param_copies(m, 0);
    for (int l = 0; l < m->c.num_layers; l++)
        release_layer(m, &m->acts[l]);
    for (int l = 0; l <= m->c.num_layers; l++)
        lmk_tensor_release(m->a, &m->resid[l]);
    lmk_tensor_release(m->a, &m->lnf_rstd);
    lmk_tensor_release(m->a, &m->lnf_out);
    lmk_tensor_release(m->a, &m->logits);
    m->logits_valid = 0;
    m->have_grad_ready = 0;
}

void lmk_model_free(lmk_model *m)
{
    if (!m)
        return;
    (void)opt_lane_join(m, LMK_OK); /* it may still read what is freed below */
    if (m->acts && m->resid)
        release_activations(m);
    release_param_copies(m, 1);
    for (size_t i = 0; m->params && i < m->nparams; i++) {
        if (!m->params[i].p_view)
            lmk_tensor_release(m->a, &m->params[i].p);
        lmk_tensor_release(m->a, &m->params[i].p_group);
        grad_drop(m, &m->params[i]);
        lmk_tensor_release(m->a, &m->params[i].m);
        lmk_tensor_release(m->a, &m->params[i].v);
    }
    lmk_tensor_release(m->a, &m->rope);
    lmk_tensor_release(m->a, &m->inputs);
    lmk_tensor_release(m->a, &m->targets);
    lmk_tensor_release(m->a, &m->scalars);
    lmk_tensor_release(m->a, &m->step);
    free(m->prec_rows);
    free(m->params);
    free(m->opt);
    free(m->acts);
    free(m->resid);
    free(m);
}

int lmk_model_create(lmk_backend *b, lmk_allocator *a, const lmk_model_config *c, int batch,
                     int T, lmk_precision prec, uint64_t seed, int training, lmk_model **out)
{
    int rc = LMK_OK;
    if (!b || !a || !c || !out || lmk_model_config_check(c, NULL) != LMK_OK || batch < 1 ||
        T < 1 || T > c->context_length || (unsigned)prec >= LMK_PREC_COUNT)
        return LMK_INVALID;
    if ((int64_t)batch * T > INT32_MAX / 4)
        return LMK_INVALID;
    lmk_model *m = calloc(1, sizeof *m);
    if (!m)
        return LMK_NOMEM;
    m->b = b;
    m->a = a;
    m->c = *c;
    m->B = batch;
    m->T = T;
    m->N = batch * T;
    m->H = c->num_heads;
    m->dh = c->d_model / c->num_heads;
    m->prec = prec;
    m->training = training;
    m->loss_scale = prec == LMK_PREC_FP16 ? LOSS_SCALE_INIT : 1.0f;
    static const lmk_round in_r[LMK_PREC_COUNT] = {LMK_ROUND_NONE, LMK_ROUND_TF32,
                                                   LMK_ROUND_BF16, LMK_ROUND_FP16};
    static const lmk_round out_r[LMK_PREC_COUNT] = {LMK_ROUND_NONE, LMK_ROUND_NONE,
                                                    LMK_ROUND_BF16, LMK_ROUND_FP16};
    m->in_round = in_r[prec];
    m->out_round = out_r[prec];
    m->half = m->in_round == LMK_ROUND_BF16 || m->in_round == LMK_ROUND_FP16 ? m->in_round
                                                                            : LMK_ROUND_NONE;
    m->adt = m->half == LMK_ROUND_BF16 ? LMK_BF16 : m->half == LMK_ROUND_FP16 ? LMK_F16 : LMK_F32;
    m->persistent_copies = m->half != LMK_ROUND_NONE && training && training != LMK_MODEL_GRADIENTS;

    int L = c->num_layers, d = c->d_model, ff = c->d_ff, V = c->vocab_size;
    m->nparams = 3 + (size_t)L * P_PER_LAYER;
    m->params = calloc(m->nparams, sizeof *m->params);
    m->opt = calloc(m->nparams, sizeof *m->opt);
    m->acts = calloc((size_t)L, sizeof *m->acts);
    m->resid = calloc((size_t)L + 1, sizeof *m->resid);
    if (!m->params || !m->opt || !m->acts || !m->resid) {
        rc = LMK_NOMEM;
        goto out;
    }
    set_slot(&m->params[0], "token_embeddings.weight", V, d, 1.0f);
    for (int l = 0; l < L; l++) {
        static const int shape_rows_is_ff[P_PER_LAYER] = {0, 0, 0, 0, 0, 0, 1, 0, 1};
        for (int j = 0; j < P_PER_LAYER; j++) {
            char name[64];
            snprintf(name, sizeof name, "layers.%d.%s", l, layer_param_names[j]);
            int rows, cols, norm = j == P_LN1 || j == P_LN2;
            if (norm) {
                rows = 1;
                cols = d;
            } else if (j == P_W2) {
                rows = d;
                cols = ff;
            } else {
                rows = shape_rows_is_ff[j] ? ff : d;
                cols = d;
            }
            float std = norm ? 0.0f : linear_std(cols, rows);
            set_slot(layer_param(m, l, j), name, rows, cols, std);
        }
    }
    set_slot(param_final_norm(m), "ln_final.weight", 1, d, 0.0f);
    set_slot(param_lm_head(m), "lm_head.weight", V, d, linear_std(d, V));
    m->fused_qkv = LMK_FUSED_QKV;
    for (size_t i = 0; i < m->nparams; i++)
        m->params[i].fused_into = -1;
    m->fused_w13 = LMK_FUSED_W13;
    m->norm_dx16 = LMK_NORM_DX16;
    m->fused_dw = LMK_FUSED_DW;
    /* float32 activations: only where the GEMMs' inputs are TF32 (the backend's float32 causal GEMMs are
     * TF32 products; pure fp32 keeps cuBLAS's FP32 GEMMs) */
    if (LMK_ATTN_GEMM16 && b->attn_causal_block && b->attn_causal_gemm &&
        (m->adt != LMK_F32 || (LMK_ATTN_GEMM_TF32 && m->in_round == LMK_ROUND_TF32)))
        m->attn_tile = b->attn_causal_block(b, m->adt, T, m->dh);
    m->attn_softmax_fused = c->attention == LMK_ATTN_NAIVE_FUSED && m->attn_tile && b->attn_scores_softmax &&
                            b->attn_dp_softmax_bwd;
    m->attn_merged_io = LMK_ATTN_MERGED_IO && m->attn_softmax_fused;
    for (int l = 0; l < L; l++) { /* q, k, v: one (3d, d) copy; w1, w3: one (2·d_ff, d) */
        static const int qkv[3] = {P_WQ, P_WK, P_WV}, w13[2] = {P_W1, P_W3};
        for (int grp = 0; grp < 2; grp++) {
            const int *members = grp ? w13 : qkv, n = grp ? 2 : 3;
            if (!(grp ? m->fused_w13 : m->fused_qkv))
                continue;
            param_slot *first = layer_param(m, l, members[0]);
            first->fuse_n = n;
            for (int j = 0; j < n; j++) {
                first->fuse[j] = (int)(layer_param(m, l, members[j]) - m->params);
                m->params[first->fuse[j]].fused_into = first->fuse[0];
            }
        }
    }

    for (size_t i = 0; i < m->nparams; i++) {
        param_slot *s = &m->params[i];
        size_t n = (size_t)s->rows * s->cols;
        if (LMK_STACKED_F32 && s->fuse_n && m->half == LMK_ROUND_NONE) { /* float32/tf32: the group stacked */
            size_t total = 0;
            for (int j = 0; j < s->fuse_n; j++)
                total += (size_t)m->params[s->fuse[j]].rows * s->cols;
            TRY(lmk_tensor_alloc(a, &s->p_group, LMK_F32, total, LMK_MEM_PARAMETER, "%s+%d", s->name, s->fuse_n - 1));
            for (int j = 0, at = 0; j < s->fuse_n; j++) {
                param_slot *t = &m->params[s->fuse[j]];
                size_t tn = (size_t)t->rows * t->cols;
                t->p = (lmk_tensor){.data = LMK_F(s->p_group) + (size_t)at * s->cols, .numel = tn, .bytes = 4 * tn,
                                    .dtype = LMK_F32, .category = LMK_MEM_PARAMETER, .name_id = s->p_group.name_id};
                t->p_view = 1;
                at += t->rows;
            }
        }
        if (!s->p_view)
            TRY(lmk_tensor_alloc(a, &s->p, LMK_F32, n, LMK_MEM_PARAMETER, "%s", s->name));
        if (training && training != LMK_MODEL_GRADIENTS) {
            TRY(lmk_tensor_alloc(a, &s->m, LMK_F32, n, LMK_MEM_OPTIMIZER_STATE, "%s.exp_avg",
                                 s->name));
            TRY(lmk_tensor_alloc(a, &s->v, LMK_F32, n, LMK_MEM_OPTIMIZER_STATE,
                                 "%s.exp_avg_sq", s->name));
            TRY(b->mem_zero(b, s->m.data, s->m.bytes));
            TRY(b->mem_zero(b, s->v.data, s->v.bytes));
        }
    }
    TRY(lmk_tensor_alloc(a, &m->rope, LMK_F32, (size_t)T * m->dh, LMK_MEM_WORKSPACE,
                         "rope.cos_sin"));
    TRY(lmk_tensor_alloc(a, &m->inputs, LMK_I32, (size_t)m->N, LMK_MEM_INPUT, "batch.inputs"));
    TRY(lmk_tensor_alloc(a, &m->targets, LMK_I32, (size_t)m->N, LMK_MEM_INPUT,
                         "batch.targets"));
    TRY(lmk_tensor_alloc(a, &m->scalars, LMK_F32, 4, LMK_MEM_WORKSPACE, "loss_and_norm"));
    TRY(b->mem_zero(b, m->scalars.data, m->scalars.bytes));
    if (training && training != LMK_MODEL_GRADIENTS) {
        TRY(lmk_tensor_alloc(a, &m->step, LMK_I32, 2, LMK_MEM_WORKSPACE, "optimizer.step"));
        TRY(b->mem_zero(b, m->step.data, m->step.bytes));
    }
    TRY(b->mem_zero(b, m->inputs.data, m->inputs.bytes));
    TRY(b->mem_zero(b, m->targets.data, m->targets.bytes));
    TRY(build_rope_table(m));
    TRY(init_params(m, seed));
    m->copies_stale = 1;
    TRY(make_persistent_copies(m));
out:
    if (rc != LMK_OK) {
        lmk_model_free(m);
        return rc;
    }
    *out = m;
    return LMK_OK;
}

int lmk_model_set_batch(lmk_model *m, const int32_t *inputs, const int32_t *targets)
{
    for (int i = 0; i < m->N; i++)
        if (inputs[i] < 0 || inputs[i] >= m->c.vocab_size || targets[i] < 0 ||
            targets[i] >= m->c.vocab_size)
            return LMK_INVALID;
    int rc = m->b->upload(m->b, m->inputs.data, inputs, m->inputs.bytes);
    if (rc == LMK_OK)
        rc = m->b->upload(m->b, m->targets.data, targets, m->targets.bytes);
    return rc;
}

/* --- precision report ------------------------------------------------------- */

#define PREC_ROWS_MAX 96

/* Value format of a rounding ("float32" when none). */
static const char *fmt_of(lmk_round r)
{
    switch (r) {
    case LMK_ROUND_TF32:
        return "tf32";
    case LMK_ROUND_BF16:
        return "bfloat16";
    case LMK_ROUND_FP16:
        return "float16";
    case LMK_ROUND_NONE:
        break;
    }
    return "float32";
}

/* Format of GEMM outputs (and of what only moves them: head split/merge). */
#define F_OUT fmt_of(m->out_round)
#define F32 "float32"

/* Records one op call under the current phase (merged with earlier calls of
 * the same op and phase). in: formats of the inputs, ", "-separated. */
static void rec(lmk_model *m, const char *op, const char *in, const char *out, const char *acc,
                const char *storage)
{
    if (!m->tracing || !m->prec_rows)
        return;
    const char *phase = m->phase ? m->phase : "";
    for (size_t i = 0; i < m->n_prec_rows; i++) {
        lmk_precision_row *r = &m->prec_rows[i];
        if (strcmp(r->op, op) == 0 && strcmp(r->phase, phase) == 0) {
            r->calls++;
            return;
        }
    }
    if (m->n_prec_rows == PREC_ROWS_MAX)
        return;
    lmk_precision_row *r = &m->prec_rows[m->n_prec_rows++];
    snprintf(r->phase, sizeof r->phase, "%s", phase);
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->inputs, sizeof r->inputs, "%s", in);
    snprintf(r->output, sizeof r->output, "%s", out);
    snprintf(r->accumulate, sizeof r->accumulate, "%s", acc);
    snprintf(r->storage, sizeof r->storage, "%s", storage);
    r->calls = 1;
}

/* REC(op, out, acc, input formats...): one call with its input formats;
 * RECS(op, out, acc, storage, input formats...): the same with a storage note. */
static void rec_in(lmk_model *m, const char *op, const char *out, const char *acc, const char *storage, int n, ...)
{
    if (!m->tracing)
        return;
    char in[48] = "";
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(in);
        snprintf(in + len, sizeof in - len, "%s%s", i ? ", " : "", va_arg(ap, const char *));
    }
    va_end(ap);
    rec(m, op, in, out, acc, storage);
}

#define REC_N(...) REC_N_(__VA_ARGS__, 5, 4, 3, 2, 1, 0)
#define REC_N_(a, b, c, d, e, N, ...) N
#define REC(op, out, acc, ...) rec_in(m, (op), (out), (acc), "", REC_N(__VA_ARGS__), __VA_ARGS__)
#define RECS(op, out, acc, storage, ...) rec_in(m, (op), (out), (acc), (storage), REC_N(__VA_ARGS__), __VA_ARGS__)

/* Reductions of the cpu backend (and the cuda rmsnorm) run in double. */
static const char *acc_reduce(const lmk_model *m, int cuda_double)
{
    return strcmp(m->b->name, "cpu") == 0 || cuda_double ? "float64" : "float32";
}

void lmk_model_trace_precision(lmk_model *m, int on)
{
    if (on && !m->prec_rows)
        m->prec_rows = calloc(PREC_ROWS_MAX, sizeof *m->prec_rows);
    m->n_prec_rows = 0;
    m->tracing = on && m->prec_rows;
}

size_t lmk_model_precision_row_count(const lmk_model *m)
{
    return m->n_prec_rows;
}

const lmk_precision_row *lmk_model_precision_row_at(const lmk_model *m, size_t i)
{
    return i < m->n_prec_rows ? &m->prec_rows[i] : NULL;
}

/* --- GEMM helpers ---------------------------------------------------------- */

/* A GEMM input: its float32 values, and/or raw 16-bit bits of m->half; when
 * h is set the backend reads it (f may then be NULL). */
typedef struct operand {
    const float *f;
    const void *h; /* NULL: the backend rounds f itself */
} operand;

static operand op_w(const param_slot *s)
{
    return (operand){LMK_F(s->p), s->h.data};
}

/* A tensor of the model as a GEMM input: float32 or 16-bit by its dtype. */
static operand op_x(const lmk_tensor *t)
{
    return t->dtype == LMK_F32 ? (operand){LMK_F(*t), NULL} : (operand){NULL, t->data};
}

/* A GEMM operand advanced by off elements of its storage. */
static operand op_at(operand o, int64_t off)
{
    if (o.h)
        o.h = (const uint16_t *)o.h + off;
    else
        o.f += off;
    return o;
}

static const char *dtype_fmt(lmk_dtype dt)
{
    return dt == LMK_BF16 ? "bfloat16" : dt == LMK_F16 ? "float16" : "float32";
}

/* Format of the tensors autocast keeps in 16 bits (linear outputs and what
 * only feeds GEMMs): m->adt. */
#define F_ACT dtype_fmt(m->adt)

/* c (of c's dtype: float32, or 16-bit written directly by the GEMM) = the
 * GEMM g of a and bm. */
static int gemm2(lmk_model *m, const char *op, const lmk_gemm *g0, lmk_tensor *c, operand a,
                 operand bm)
{
    lmk_gemm g = *g0;
    g.c_half = c->dtype != LMK_F32;
    if (m->tracing) {
        char in[48], store[80];
        snprintf(in, sizeof in, "%s, %s", fmt_of(g.in_round), fmt_of(g.in_round));
        store[0] = '\0';
        if (m->half != LMK_ROUND_NONE)
            snprintf(store, sizeof store, "%s; %s%s", a.h ? "16-bit tensor" : "cast in gemm",
                     bm.h ? "16-bit tensor" : "cast in gemm", g.c_half ? "; 16-bit output" : "");
        rec(m, op, in, g.c_half ? dtype_fmt(c->dtype) : fmt_of(g.out_round),
            g.in_round == LMK_ROUND_TF32 ? "float32 (tf32 in)" : F32, store);
    }
    if (!a.h && !bm.h && !g.c_half)
        return m->b->gemm(m->b, &g, LMK_F(*c), a.f, bm.f);
    return m->b->gemm_half(m->b, &g, c->data, a.h ? a.h : (const void *)a.f, a.h != NULL,
                           bm.h ? bm.h : (const void *)bm.f, bm.h != NULL);
}

static lmk_dtype half_dtype(const lmk_model *m)
{
    return m->half == LMK_ROUND_BF16 ? LMK_BF16 : LMK_F16;
}

/* Under bf16/fp16, *t16 = new 16-bit copy (category temporary) of x (n), cast
 * once for the GEMMs that read it; otherwise leaves *t16 empty. */
static int half_copy(lmk_model *m, lmk_tensor *t16, const float *x, size_t n, const char *name)
{
    if (m->half == LMK_ROUND_NONE)
        return LMK_OK;
    if (m->tracing) {
        char op[64];
        snprintf(op, sizeof op, "%.40s (cast_half)", name);
        rec(m, op, F32, fmt_of(m->half), "-", "temporary");
    }
    int rc = lmk_tensor_alloc(m->a, t16, half_dtype(m), n, LMK_MEM_TEMPORARY, "%s", name);
    if (rc == LMK_OK)
        rc = m->b->cast_half(m->b, t16->data, x, n, m->half);
    if (rc != LMK_OK)
        lmk_tensor_release(m->a, t16);
    return rc;
}

/* Under bf16/fp16, *t = new 16-bit temporary "layers.L.WHAT.half" of n
 * elements (a float32 tensor's copy that its producer writes); otherwise
 * leaves *t empty. */
static int half_tensor(lmk_model *m, lmk_tensor *t, size_t n, int l, const char *what)
{
    if (m->half == LMK_ROUND_NONE)
        return LMK_OK;
    return lmk_tensor_alloc(m->a, t, half_dtype(m), n, LMK_MEM_TEMPORARY, "layers.%d.%s.half", l, what);
}

/* The 16-bit copies of fused group first's slots as one matrix (rows
 * stacked in first->fuse order; category parameter_copy, owned by first, the
 * others' h views into it), allocated when missing, each slot's rows cast
 * from its parameter (the values of one cast per slot). */
static int group_copy(lmk_model *m, param_slot *first, int persistent)
{
    lmk_dtype dt = half_dtype(m);
    int rc = LMK_OK;
    if (!first->h.data) {
        size_t total = 0;
        for (int j = 0; j < first->fuse_n; j++)
            total += m->params[first->fuse[j]].p.numel;
        rc = lmk_tensor_alloc(m->a, &first->h, dt, total, LMK_MEM_PARAMETER_COPY, "%s+%d.%s", first->name,
                              first->fuse_n - 1, lmk_dtype_name(dt));
        if (rc != LMK_OK)
            return rc;
        size_t at = first->p.numel;
        for (int j = 1; j < first->fuse_n; j++) {
            param_slot *s = &m->params[first->fuse[j]];
            s->h = (lmk_tensor){.data = (uint16_t *)first->h.data + at, .numel = s->p.numel,
                                .bytes = 2 * s->p.numel, .dtype = dt, .category = LMK_MEM_PARAMETER_COPY};
            s->h_view = 1;
            at += s->p.numel;
        }
    }
    for (int j = 0; j < first->fuse_n && rc == LMK_OK; j++) {
        param_slot *s = &m->params[first->fuse[j]];
        rec(m, persistent ? "weights (cast_half, parameters written)" : "weights (cast_half)", F32, fmt_of(m->half),
            "-", persistent ? "parameter_copy, persistent, stacked" : "parameter_copy, once per step, stacked");
        rc = m->b->cast_half(m->b, s->h.data, LMK_F(s->p), s->p.numel, m->half);
    }
    return rc;
}

/* The per-step 16-bit copy of weight matrix s (autocast's cast of each
 * weight, made at its first use in forward and reused by backward): every
 * matrix but the embedding (a lookup, which autocast keeps in float32).
 * Training keeps a layer's copies until the end of its backward; inference
 * releases them at the end of the layer. No-op without 16-bit GEMMs. */
static int param_copy(lmk_model *m, param_slot *s)
{
    if (m->half == LMK_ROUND_NONE || s->is_norm || s->h.data)
        return LMK_OK;
    if (s->fused_into >= 0)
        return group_copy(m, &m->params[s->fused_into], 0);
    lmk_dtype dt = half_dtype(m);
    rec(m, "weights (cast_half)", F32, fmt_of(m->half), "-", "parameter_copy, once per step");
    int rc = lmk_tensor_alloc(m->a, &s->h, dt, s->p.numel, LMK_MEM_PARAMETER_COPY, "%s.%s", s->name,
                              lmk_dtype_name(dt));
    if (rc == LMK_OK)
        rc = m->b->cast_half(m->b, s->h.data, LMK_F(s->p), s->p.numel, m->half);
    return rc;
}

/* Releases s's per-step 16-bit copy (persistent copies stay). */
static void release_copy(lmk_model *m, param_slot *s)
{
    if (!m->persistent_copies)
        copy_drop(m, s);
}

static void release_layer_copies(lmk_model *m, int l)
{
    for (int j = 0; j < P_PER_LAYER; j++)
        release_copy(m, layer_param(m, l, j));
}

/* Persistent copies (bf16/fp16 training with AdamW): every weight matrix's
 * 16-bit copy exists from create on (category parameter_copy) and each
 * lmk_model_step rewrites it from the updated parameter inside the AdamW
 * kernel (2 bytes per parameter there instead of a 6-byte cast per step in
 * forward); the values are those of the per-step cast, bit for bit. When
 * the copies may be stale (after create, or once lmk_model_tensor handed a
 * parameter out for writing), this casts them all again. */
static int make_persistent_copies(lmk_model *m)
{
    if (!m->persistent_copies || !m->copies_stale)
        return LMK_OK;
    lmk_dtype dt = half_dtype(m);
    for (size_t i = 1; i < m->nparams; i++) {
        param_slot *s = &m->params[i];
        if (s->is_norm || (s->fused_into >= 0 && s->fused_into != (int)i))
            continue; /* norms; a fused group's later slots (cast with its first) */
        if (s->fuse_n) {
            int rc = group_copy(m, s, 1);
            if (rc != LMK_OK)
                return rc;
            continue;
        }
        int rc = LMK_OK;
        if (!s->h.data)
            rc = lmk_tensor_alloc(m->a, &s->h, dt, s->p.numel, LMK_MEM_PARAMETER_COPY, "%s.%s", s->name,
                                  lmk_dtype_name(dt));
        if (rc == LMK_OK) {
            rec(m, "weights (cast_half, parameters written)", F32, fmt_of(m->half), "-",
                "parameter_copy, persistent");
            rc = m->b->cast_half(m->b, s->h.data, LMK_F(s->p), s->p.numel, m->half);
        }
        if (rc != LMK_OK)
            return rc;
    }
    m->copies_stale = 0;
    return LMK_OK;
}

/* Orders the backend's later work after the overlap GEMMs issued so far
 * (lmk_gemm.overlap): called before anything they read or write is freed,
 * overwritten or read, also after a failure (nothing left running beside).
 * Returns rc, the status of the work before it, if that failed; else the
 * join's. */
static int lane_join(lmk_model *m, int rc)
{
    int jrc = m->b->lane_join ? m->b->lane_join(m->b) : LMK_OK;
    return rc != LMK_OK ? rc : jrc;
}

/* The gradient of s for a GEMM that writes all of it (dW = dyᵀ x): *beta = 0
 * at the first write of a backward (the GEMM overwrites: no zeroing pass,
 * the same values as accumulating into zeros), else 1 (accumulate);
 * allocated at that first write. */
static int grad_ready_gemm(lmk_model *m, param_slot *s, float *beta)
{
    *beta = 1.0f;
    if (s->g_ready)
        return LMK_OK;
    int rc = LMK_OK;
    if (!s->g.data)
        rc = lmk_tensor_alloc(m->a, &s->g, LMK_F32, s->p.numel, LMK_MEM_GRADIENT, "%s.grad", s->name);
    if (rc == LMK_OK) {
        s->g_ready = 1;
        *beta = 0.0f;
    }
    return rc;
}

/* The gradient of s ready to accumulate into (parameter gradients
 * accumulate, backend.h): allocated at its first write in a backward
 * (PyTorch's semantics: gradients do not exist during forward; they live
 * from backward until lmk_model_step releases them) and zeroed at the first
 * write of every backward. */
static int grad_ready(lmk_model *m, param_slot *s)
{
    float beta = 1.0f;
    int rc = grad_ready_gemm(m, s, &beta);
    if (rc == LMK_OK && beta == 0.0f)
        rc = m->b->mem_zero(m->b, s->g.data, s->g.bytes);
    return rc;
}

/* y (N, dout) = x (N, din) · Wᵀ, W (dout, din); y of m->adt (16-bit under
 * bf16/fp16, written by the GEMM) or float32 (the logits). */
static int linear_fwd(lmk_model *m, const char *op, lmk_tensor *y, operand x, param_slot *w,
                      int n, int din, int dout)
{
    int rc = param_copy(m, w);
    if (rc != LMK_OK)
        return rc;
    lmk_gemm g = {.trans_b = 1, .m = n, .n = dout, .k = din, .batch = 1, .alpha = 1.0f,
                  .in_round = m->in_round, .out_round = m->out_round};
    return gemm2(m, op, &g, y, x, op_w(w));
}

/* dx (N, din) (+)= dy (N, dout) · W;  dW (dout, din) += dyᵀ · x.
 * dW is accumulated in float32 without output rounding: each weight is used
 * once per step, so this equals autocast's half dW only up to that rounding;
 * keeping it exact lets beta = 1 accumulate safely. dx is of its tensor's
 * dtype: 16-bit under bf16/fp16 (the GEMM writes it, rounded once) where one
 * GEMM makes it; float32 and unrounded where several GEMMs accumulate into
 * it (the gradient of an RMSNorm output read by two or three projections:
 * autocast sums their 16-bit gradients in 16 bits, we sum in float32). A
 * float32 dy (the logits') is cast once to a 16-bit temporary read by both
 * GEMMs; a 16-bit dy is read in place; dy_half (or NULL): a 16-bit copy of a
 * float32 dy made by whoever wrote dy (the residual stream's gradient:
 * rmsnorm_bwd_add writes both), read instead of casting. */
static int linear_bwd(lmk_model *m, const char *op, lmk_tensor *dx, int accumulate_dx, param_slot *w,
                      const lmk_tensor *dy, const lmk_tensor *dy_half, operand x, int n, int din, int dout)
{
    lmk_tensor dy16 = {0};
    char name[48];
    snprintf(name, sizeof name, "%s dy", op);
    float beta_w = 1.0f;
    int rc = grad_ready_gemm(m, w, &beta_w);
    if (rc == LMK_OK)
        rc = param_copy(m, w); /* made by forward; again only after a failed one */
    if (rc == LMK_OK && dy->dtype == LMK_F32 && !(dy_half && dy_half->data))
        rc = half_copy(m, &dy16, LMK_F(*dy), (size_t)n * dout, name);
    if (rc != LMK_OK)
        return rc;
    operand dyo = op_x(dy);
    if (dy16.data)
        dyo.h = dy16.data;
    else if (dy_half && dy_half->data)
        dyo.h = dy_half->data;
    /* dW first, as an overlap GEMM: it may run beside dx (lane_join below) */
    lmk_gemm gw = {.trans_a = 1, .m = dout, .n = din, .k = n, .batch = 1, .alpha = 1.0f,
                   .beta = beta_w, .in_round = m->in_round, .out_round = LMK_ROUND_NONE, .overlap = 1};
    snprintf(name, sizeof name, "%s dW += dy^T x", op);
    rc = gemm2(m, name, &gw, &w->g, dyo, x);
    if (rc == LMK_OK) {
        lmk_gemm gx = {.m = n, .n = din, .k = dout, .batch = 1, .alpha = 1.0f,
                       .beta = accumulate_dx ? 1.0f : 0.0f, .in_round = m->in_round,
                       .out_round = dx->dtype == LMK_F32 ? LMK_ROUND_NONE : m->out_round};
        snprintf(name, sizeof name, "%s dx = dy W", op);
        rc = gemm2(m, name, &gx, dx, dyo, op_w(w));
    }
    rc = lane_join(m, rc);
    lmk_tensor_release(m->a, &dy16);
    return rc;
}

/* The rows of fused group first's weights together (Σ dout). */
static int group_rows(const lmk_model *m, const param_slot *first)
{
    int rows = 0;
    for (int j = 0; j < first->fuse_n; j++)
        rows += m->params[first->fuse[j]].rows;
    return rows;
}

/* Whether fused group first's weights are one matrix [W_0; W_1; …] for its
 * GEMMs: the stacked 16-bit copy under bf16/fp16, the stacked float32
 * storage (p_group) under float32/tf32. */
static int group_stacked(const lmk_model *m, const param_slot *first)
{
    return m->half != LMK_ROUND_NONE || first->p_group.data;
}

/* The projections of fused group first (LMK_FUSED_QKV) at once: y (N, Σ dout)
 * of its tensor's dtype = x (N, din) · [W_0; W_1; …]ᵀ, W_j (dout_j, din):
 * one GEMM against the stacked weights (group_stacked); otherwise one GEMM
 * per weight into its columns of y. */
static int fused_fwd(lmk_model *m, const char *op, lmk_tensor *y, operand x, param_slot *first, int n, int din)
{
    int rc = param_copy(m, first);
    int total = group_rows(m, first);
    if (rc != LMK_OK)
        return rc;
    if (group_stacked(m, first)) {
        lmk_gemm g = {.trans_b = 1, .m = n, .n = total, .k = din, .batch = 1, .alpha = 1.0f,
                      .in_round = m->in_round, .out_round = m->out_round};
        return gemm2(m, op, &g, y, x, op_w(first));
    }
    int64_t at = 0;
    for (int j = 0; j < first->fuse_n && rc == LMK_OK; j++) {
        param_slot *s = &m->params[first->fuse[j]];
        lmk_gemm g = {.trans_b = 1, .m = n, .n = s->rows, .k = din, .batch = 1, .alpha = 1.0f, .ldc = total,
                      .in_round = m->in_round, .out_round = m->out_round};
        lmk_tensor yj = *y;
        yj.data = (char *)y->data + at * (int64_t)lmk_dtype_size(y->dtype);
        rc = gemm2(m, op, &g, &yj, x, op_w(s));
        at += s->rows;
    }
    return rc;
}

/* fused_fwd's backward: dx (N, din) float32 = dy (N, Σ dout) · [W_0; W_1; …]
 * — one GEMM with K = Σ dout when the weights are stacked (group_stacked;
 * else one per weight, the later ones accumulating) — and dW_j (+)= dy_jᵀ x, one GEMM per weight
 * reading its columns of dy (rows Σ dout apart). names: the weights' ops
 * for their dW rows of the precision report. */
static int fused_bwd(lmk_model *m, const char *op, const char *const *names, lmk_tensor *dx, param_slot *first,
                     const lmk_tensor *dy, operand x, int n, int din)
{
    char name[64];
    int total = group_rows(m, first), rc = LMK_OK;
    float beta_w[3];
    /* LMK_FUSED_DW: the group's gradients as one allocation (views), when
     * none of them exists yet or they already are its views */
    int one_dw = m->fused_dw;
    for (int j = 0; j < first->fuse_n; j++) {
        const param_slot *s = &m->params[first->fuse[j]];
        one_dw &= !s->g.data || (s->g_view && first->g_group.data);
    }
    if (one_dw && !first->g_group.data) {
        rc = lmk_tensor_alloc(m->a, &first->g_group, LMK_F32, (size_t)total * din, LMK_MEM_GRADIENT, "%s+%d.grad",
                              first->name, first->fuse_n - 1);
        for (int j = 0, at = 0; j < first->fuse_n && rc == LMK_OK; j++) {
            param_slot *s = &m->params[first->fuse[j]];
            s->g = (lmk_tensor){.data = LMK_F(first->g_group) + (size_t)at * din, .numel = s->p.numel,
                                .bytes = 4 * s->p.numel, .dtype = LMK_F32, .category = LMK_MEM_GRADIENT};
            s->g_view = 1;
            at += s->rows;
        }
    }
    for (int j = 0; j < first->fuse_n && rc == LMK_OK; j++)
        rc = grad_ready_gemm(m, &m->params[first->fuse[j]], &beta_w[j]);
    if (rc == LMK_OK)
        rc = param_copy(m, first); /* made by forward; again only after a failed one */
    if (rc != LMK_OK)
        return rc;
    operand dyo = op_x(dy);
    /* the dW GEMMs first, as overlap GEMMs: they may run beside dx */
    if (one_dw) { /* [dW_0; dW_1; …] (Σ dout, din) = dyᵀ x */
        lmk_gemm gw = {.trans_a = 1, .m = total, .n = din, .k = n, .batch = 1, .alpha = 1.0f, .beta = beta_w[0],
                       .in_round = m->in_round, .out_round = LMK_ROUND_NONE, .overlap = 1};
        snprintf(name, sizeof name, "%s dW += dy^T x", op);
        rc = gemm2(m, name, &gw, &first->g_group, dyo, x);
    }
    for (int j = 0, at = 0; !one_dw && j < first->fuse_n && rc == LMK_OK; j++) {
        param_slot *s = &m->params[first->fuse[j]];
        lmk_gemm gw = {.trans_a = 1, .m = s->rows, .n = din, .k = n, .batch = 1, .alpha = 1.0f, .beta = beta_w[j],
                       .lda = total, .in_round = m->in_round, .out_round = LMK_ROUND_NONE, .overlap = 1};
        snprintf(name, sizeof name, "%s dW += dy^T x", names[j]);
        rc = gemm2(m, name, &gw, &s->g, op_at(dyo, at), x);
        at += s->rows;
    }
    snprintf(name, sizeof name, "%s dx = dy W", op);
    int stacked = group_stacked(m, first);
    if (rc == LMK_OK && stacked) {
        lmk_gemm gx = {.m = n, .n = din, .k = total, .batch = 1, .alpha = 1.0f, .in_round = m->in_round,
                       .out_round = dx->dtype == LMK_F32 ? LMK_ROUND_NONE : m->out_round};
        rc = gemm2(m, name, &gx, dx, dyo, op_w(first));
    }
    for (int j = 0, at = 0; !stacked && j < first->fuse_n && rc == LMK_OK; j++) {
        param_slot *s = &m->params[first->fuse[j]];
        lmk_gemm gx = {.m = n, .n = din, .k = s->rows, .batch = 1, .alpha = 1.0f, .beta = j ? 1.0f : 0.0f,
                       .lda = total, .in_round = m->in_round, .out_round = LMK_ROUND_NONE};
        rc = gemm2(m, name, &gx, dx, op_at(dyo, at), op_w(s));
        at += s->rows;
    }
    return lane_join(m, rc);
}

/* Per (batch, head) GEMM over (B·H) matrices; c of its tensor's dtype;
 * overlap: lmk_gemm.overlap. */
static int heads_gemm(lmk_model *m, const char *op, lmk_tensor *c, operand a, operand bm, int ta, int tb,
                      int M, int Nn, int K, float alpha, int overlap)
{
    lmk_gemm g = {.trans_a = ta, .trans_b = tb, .m = M, .n = Nn, .k = K,
                  .batch = m->B * m->H, .alpha = alpha,
                  .stride_a = (int64_t)(ta ? K : M) * (ta ? M : K),
                  .stride_b = (int64_t)K * Nn, .stride_c = (int64_t)M * Nn,
                  .in_round = m->in_round, .out_round = m->out_round, .overlap = overlap};
    return gemm2(m, op, &g, c, a, bm);
}

/* Causal attention GEMMs: the (T, T) matrices (scores, P, dP, dS) are
 * computed and read only in blocks at or below the diagonal, in blocks of
 * causal_block(T) queries (or keys): query block [r0, r0 + rows) needs keys
 * [0, r0 + rows), key block [k0, k0 + rows) is needed by queries [k0, T).
 * The GEMMs neither write nor read entries right of a query block's last
 * key; the causal softmax reads only j ≤ i and writes every j > i to zero
 * (the zeros inside the diagonal blocks are what the products read). The
 * products left out are
 * exactly the zero terms (P, dS = 0 above the diagonal), so every computed
 * element is the full product's. One GEMM per block; a single block: the
 * plain heads_gemm. The causal softmax writes each row only up to its block's
 * end (zero_block = causal_block(T)): the zeros beyond are never read. */
#define CAUSAL_MIN_BLOCK 128 /* rows; smaller GEMMs run at a fraction of the bandwidth */
/* Build-time knob: the causal GEMMs' blocks per T (k blocks compute
 * (k + 1) / 2k of the square: 4 → 5/8, 8 → 9/16), before the rounding and
 * the minimum below. 8 measured slower on the H100 (large/1024 fwd+bwd
 * 72.6 → 75.1 ms: twice the GEMM launches, smaller GEMMs) and again on the
 * H200 without cuBLAS's memsets (61.1 → 63.9 ms; with a 64-row minimum
 * also slower at T 512: large 31.5 → 35.2 ms; kernels/PERF.md). */
#ifndef LMK_CAUSAL_BLOCKS
#define LMK_CAUSAL_BLOCKS 4
#endif

/* Query rows per causal block: about T / LMK_CAUSAL_BLOCKS, a multiple of
 * 64, at least CAUSAL_MIN_BLOCK; T itself below 2·CAUSAL_MIN_BLOCK (one
 * GEMM). */
static int causal_block(int T)
{
    if (T < 2 * CAUSAL_MIN_BLOCK)
        return T;
    int rows = ((T + LMK_CAUSAL_BLOCKS - 1) / LMK_CAUSAL_BLOCKS + 63) / 64 * 64;
    return rows < CAUSAL_MIN_BLOCK ? CAUSAL_MIN_BLOCK : rows;
}

typedef enum causal_kind {
    CAUSAL_OUT_TT, /* c (T, T) by query blocks = a (T, dh) · bm (T, dh)ᵀ: scores, dP */
    CAUSAL_IN_TT,  /* c (T, dh) by query blocks = a (T, T) · bm (T, dh): P v, dS k */
    CAUSAL_IN_TTT, /* c (T, dh) by key blocks = a (T, T)ᵀ · bm (T, dh): Pᵀ dO, dSᵀ q */
} causal_kind;

/* The zero_block of the causal softmax: the causal blocks the GEMMs use. */
static int softmax_zero_block(const lmk_model *m)
{
    return m->attn_tile ? m->attn_tile : causal_block(m->T);
}

/* The layouts of an attention tensor's per-head (T, dh) matrices
 * (backend.h lmk_heads_at): split, (B, H, T, dh) as the heads' GEMMs take
 * them; merged, (B, T, H, dh) = the (N, d) activation. */
static lmk_heads_at heads_split(const lmk_model *m)
{
    return (lmk_heads_at){1, m->dh};
}

static lmk_heads_at heads_merged(const lmk_model *m)
{
    return (lmk_heads_at){m->H, m->c.d_model};
}

/* Records a GEMM of float32 tensors with TF32 products run inside one of
 * the backend's attention kernels (op, storage: as rec). */
static void rec_tf32_gemm(lmk_model *m, const char *op, const char *storage)
{
    if (!m->tracing)
        return;
    char in[48];
    snprintf(in, sizeof in, "%s, %s", fmt_of(m->in_round), fmt_of(m->in_round));
    rec(m, op, in, F32, "float32 (tf32 in)", storage);
}

/* The causal GEMM of kind over the B·H heads as the backend's one-launch
 * attn_causal_gemm (m->attn_tile: 16-bit operands and output, or float32
 * ones with TF32 products), bm's heads laid out as bm_at says. */
static int causal_gemm_tiled(lmk_model *m, const char *op, causal_kind kind, lmk_tensor *c, operand a,
                             operand bm, lmk_heads_at bm_at, float alpha, int overlap)
{
    static const lmk_causal_gemm kinds[] = {
        [CAUSAL_OUT_TT] = LMK_CAUSAL_SCORES, [CAUSAL_IN_TT] = LMK_CAUSAL_MIX, [CAUSAL_IN_TTT] = LMK_CAUSAL_MIX_T};
    const int f32 = m->adt == LMK_F32;
    const void *pa = f32 ? (const void *)a.f : a.h, *pb = f32 ? (const void *)bm.f : bm.h;
    if (!pa || !pb || c->dtype != m->adt)
        return LMK_INVALID;
    if (f32)
        rec_tf32_gemm(m, op, "one launch, causal tiles");
    else
        RECS(op, F_ACT, F32, "16-bit tensors; 16-bit output; one launch, causal tiles", F_ACT, F_ACT);
    return m->b->attn_causal_gemm(m->b, kinds[kind], c->data, pa, pb, bm_at, m->adt, m->B * m->H, m->T, m->dh,
                                  alpha, overlap);
}

/* The causal GEMM of kind over the B·H heads (see causal_block); c, a, bm,
 * overlap as for heads_gemm. */
static int causal_gemm(lmk_model *m, const char *op, causal_kind kind, lmk_tensor *c, operand a,
                       operand bm, float alpha, int overlap)
{
    if (m->attn_tile)
        return causal_gemm_tiled(m, op, kind, c, a, bm, heads_split(m), alpha, overlap);
    int T = m->T, dh = m->dh, block = causal_block(T);
    if (block >= T) {
        if (kind == CAUSAL_OUT_TT)
            return heads_gemm(m, op, c, a, bm, 0, 1, T, T, dh, alpha, overlap);
        return heads_gemm(m, op, c, a, bm, kind == CAUSAL_IN_TTT, 0, T, dh, T, alpha, overlap);
    }
    int64_t tt = (int64_t)T * T, td = (int64_t)T * dh;
    size_t ce = c->dtype == LMK_F32 ? 4 : 2;
    int rc = LMK_OK;
    for (int r0 = 0; r0 < T && rc == LMK_OK; r0 += block) {
        int rows = T - r0 < block ? T - r0 : block, keys = r0 + rows;
        lmk_gemm g = {.batch = m->B * m->H, .alpha = alpha, .in_round = m->in_round,
                      .out_round = m->out_round, .overlap = overlap};
        lmk_tensor cb = *c;
        operand ab = a, bb = bm;
        if (kind == CAUSAL_OUT_TT) { /* c[r0.., 0..keys) = a[r0..] · bm[0..keys)ᵀ */
            g.trans_b = 1, g.m = rows, g.n = keys, g.k = dh, g.ldc = T;
            g.stride_a = td, g.stride_b = td, g.stride_c = tt;
            cb.data = (char *)c->data + (size_t)r0 * T * ce;
            ab = op_at(a, (int64_t)r0 * dh);
        } else if (kind == CAUSAL_IN_TT) { /* c[r0..] = a[r0.., 0..keys) · bm[0..keys) */
            g.m = rows, g.n = dh, g.k = keys, g.lda = T;
            g.stride_a = tt, g.stride_b = td, g.stride_c = td;
            cb.data = (char *)c->data + (size_t)r0 * dh * ce;
            ab = op_at(a, (int64_t)r0 * T);
        } else { /* key block r0: c[r0..] = a[r0..T, r0..r0+rows)ᵀ · bm[r0..T) */
            g.trans_a = 1, g.m = rows, g.n = dh, g.k = T - r0, g.lda = T;
            g.stride_a = tt, g.stride_b = td, g.stride_c = td;
            cb.data = (char *)c->data + (size_t)r0 * dh * ce;
            ab = op_at(a, (int64_t)r0 * T + r0);
            bb = op_at(bm, (int64_t)r0 * dh);
        }
        rc = gemm2(m, op, &g, &cb, ab, bb);
    }
    return rc;
}

#define ACT(t, n, fmt, ...) \
    TRY(lmk_tensor_alloc(m->a, &(t), LMK_F32, (size_t)(n), LMK_MEM_ACTIVATION, fmt, __VA_ARGS__))
#define TMP(t, n, fmt, ...) \
    TRY(lmk_tensor_alloc(m->a, &(t), LMK_F32, (size_t)(n), LMK_MEM_TEMPORARY, fmt, __VA_ARGS__))
/* tensors of m->adt: 16-bit under bf16/fp16 (autocast's half tensors) */
#define ACTA(t, n, fmt, ...) \
    TRY(lmk_tensor_alloc(m->a, &(t), m->adt, (size_t)(n), LMK_MEM_ACTIVATION, fmt, __VA_ARGS__))
#define TMPA(t, n, fmt, ...) \
    TRY(lmk_tensor_alloc(m->a, &(t), m->adt, (size_t)(n), LMK_MEM_TEMPORARY, fmt, __VA_ARGS__))
#define DROP(t) lmk_tensor_release(m->a, &(t))

static lmk_attn_shape attn_shape(const lmk_model *m)
{
    return (lmk_attn_shape){.B = m->B, .H = m->H, .T = m->T, .d = m->dh, .causal = 1, .dtype = m->adt};
}

/* --- forward ---------------------------------------------------------------- */

/* Flash attention forward of layer l: q, k, v (la->qh, kh, vh, (B, H, T, dh)
 * of m->adt: 16-bit under bf16/fp16, the tensor-core kernels) → O of m->adt.
 * Saves O and the float32 logsumexp (B, H, T) instead of the probabilities.
 * keep = 0 (inference): *values = O (new temporary) and everything else is
 * released; keep = 1: O stays in la->o, *values untouched. */
static int flash_forward(lmk_model *m, int l, int keep, lmk_tensor *values)
{
    lmk_backend *b = m->b;
    layer_acts *la = &m->acts[l];
    int rc = LMK_OK;
    size_t n = (size_t)m->N * m->c.d_model;
    lmk_attn_shape s = attn_shape(m);
    if (!b->attn_fwd)
        return LMK_UNSUPPORTED;
    ACT(la->lse, (size_t)m->B * m->H * m->T, "layers.%d.attn.lse", l);
    RECS("attn flash forward (fused)", F_ACT, F32,
         m->adt == LMK_F32 ? "O and logsumexp saved" : "q, k, v, O in 16 bits; logsumexp float32", F_ACT, F_ACT, F_ACT);
    if (keep)
        ACTA(la->o, n, "layers.%d.attn.out", l);
    else
        TMPA(la->o, n, "layers.%d.attn.out", l);
    TRY(b->attn_fwd(b, la->o.data, LMK_F(la->lse), la->qh.data, la->kh.data, la->vh.data, &s));
    if (!keep) {
        DROP(la->qh);
        DROP(la->kh);
        DROP(la->vh);
        DROP(la->lse);
        *values = la->o;
        la->o = (lmk_tensor){0};
    }
out:
    if (!keep)
        DROP(la->lse);
    return rc;
}

/* One block. keep = 1 saves what backward needs (training); keep = 0
 * (inference) releases every tensor as soon as its last reader has run and
 * the layer's 16-bit weight copies at the end. Under bf16/fp16 every tensor
 * but the residual stream (x, mid, out: float32, autocast's fp32 + bf16
 * promotion) and the RMSNorm statistics is 16-bit (m->adt). */
static int layer_forward(lmk_model *m, int l, int keep)
{
    lmk_backend *b = m->b;
    layer_acts *la = &m->acts[l];
    int rc = LMK_OK, N = m->N, d = m->c.d_model, ff = m->c.d_ff, T = m->T;
    lmk_tensor tmp = {0};
    lmk_dtype adt = m->adt;
    const float *x = LMK_F(m->resid[l]);
    float scale = (float)(1.0 / sqrt((double)m->dh));
    int flash = m->c.attention == LMK_ATTN_FLASH;
    const char *norm_store = adt == LMK_F32 ? "" : "16-bit tensor (float32 math, read only by GEMMs)";

    if (l == 0) { /* later layers' ln1: fused into the previous layer's last residual add */
        ACT(la->ln1_rstd, N, "layers.%d.ln1.rstd", l);
        ACTA(la->ln1_out, (size_t)N * d, "layers.%d.ln1.out", l);
        rec(m, "ln1 (rmsnorm)", F32 ", " F32, F_ACT, acc_reduce(m, 1), norm_store);
        TRY(b->rmsnorm_fwd(b, la->ln1_out.data, adt, LMK_F(la->ln1_rstd), x,
                           LMK_F(layer_param(m, l, P_LN1)->p), N, d, RMS_EPS));
        if (!keep)
            DROP(la->ln1_rstd);
    }
    static const int proj[3] = {P_WQ, P_WK, P_WV};
    static const char *const proj_names[3] = {"attn.q_proj", "attn.k_proj", "attn.v_proj"};
    static const char *const rope_names[3] = {"attn.q rope + head split", "attn.k rope + head split",
                                              "attn.v head split"};
    static const char *const head_names[3] = {"q", "k", "v"};
    lmk_tensor *heads[3] = {&la->qh, &la->kh, &la->vh};
    if (m->fused_qkv) { /* one (N, 3d) projection; RoPE / split read q, k, v with rows 3d apart */
        size_t es = lmk_dtype_size(adt);
        TMPA(tmp, (size_t)N * 3 * d, "layers.%d.attn.qkv_proj_out", l);
        TRY(fused_fwd(m, "attn.qkv_proj", &tmp, op_x(&la->ln1_out), layer_param(m, l, P_WQ), N, d));
        for (int i = 0; i < 3; i++) { /* one launch for the three where the backend has it */
            ACTA(*heads[i], (size_t)N * d, "layers.%d.attn.%s", l, head_names[i]);
            if (i < 2)
                REC(rope_names[i], F_ACT, F32, F_ACT, F32);
            else
                REC(rope_names[i], F_ACT, "-", F_ACT);
            if (!b->rope_qkv_fwd)
                TRY(b->rope_fwd(b, heads[i]->data, (char *)tmp.data + (size_t)i * d * es, adt,
                                i < 2 ? LMK_F(m->rope) : NULL, m->B, T, m->H, m->dh, 3 * d));
        }
        if (b->rope_qkv_fwd) {
            void *const out[3] = {la->qh.data, la->kh.data, la->vh.data};
            TRY(b->rope_qkv_fwd(b, out, tmp.data, adt, LMK_F(m->rope), m->B, T, m->H, m->dh));
        }
    } else {
        TMPA(tmp, (size_t)N * d, "layers.%d.attn.proj_out", l);
        for (int i = 0; i < 3; i++) {
            ACTA(*heads[i], (size_t)N * d, "layers.%d.attn.%s", l, head_names[i]);
            TRY(linear_fwd(m, proj_names[i], &tmp, op_x(&la->ln1_out), layer_param(m, l, proj[i]), N, d, d));
            if (i < 2)
                REC(rope_names[i], F_ACT, F32, F_ACT, F32);
            else
                REC(rope_names[i], F_ACT, "-", F_ACT);
            TRY(b->rope_fwd(b, heads[i]->data, tmp.data, adt, i < 2 ? LMK_F(m->rope) : NULL, m->B, T, m->H,
                            m->dh, d));
        }
    }
    DROP(tmp);
    if (!keep)
        DROP(la->ln1_out);

    if (flash) {
        RANGE_PUSH("attention flash");
        rc = flash_forward(m, l, keep, &tmp);
        RANGE_POP();
        TRY(rc);
    } else {
        /* scores = q kᵀ / sqrt(dh) (written in m->adt), causal softmax in place */
        ACTA(la->probs, (size_t)m->B * m->H * T * T, "layers.%d.attn.scores", l);
        if (m->c.attention == LMK_ATTN_NAIVE_FUSED) {
            /* the values buffer first: the fused kernel writes p and the values together (the same order
             * where the backend runs the three ops instead). attn_merged_io: the values go straight into
             * `merged`, and the output projection's output takes the second (N, d) buffer below: the same
             * sizes in the same order */
            if (m->attn_merged_io)
                ACTA(la->merged, (size_t)N * d, "layers.%d.attn.merged", l);
            else
                TMPA(tmp, (size_t)N * d, "layers.%d.attn.values", l);
            RANGE_PUSH("attention scores+softmax+values");
            if (m->attn_softmax_fused && adt == LMK_F32) {
                rec_tf32_gemm(m, "attn.scores = q k^T",
                              "scores staged in shared memory, read by the softmax in the same kernel");
                RECS("attn causal softmax", F_ACT, F32, "fused with the scores GEMM: float32 math", F_ACT);
                rec_tf32_gemm(m, "attn.values = p v", "the probabilities as written, in the same kernel");
            } else if (m->attn_softmax_fused) {
                RECS("attn.scores = q k^T", F_ACT, F32,
                     "16-bit tensors; scores rounded to 16 bits in registers, read by the softmax in the same kernel",
                     F_ACT, F_ACT);
                RECS("attn causal softmax", F_ACT, F32,
                     "fused with the scores GEMM: float32 math, writes 16-bit probabilities", F_ACT);
                RECS("attn.values = p v", F_ACT, F32,
                     "the 16-bit probabilities as written, from registers, in the same kernel; 16-bit tensor; "
                     "16-bit output",
                     F_ACT, F_ACT);
            }
            if (m->attn_softmax_fused) {
                void *values = m->attn_merged_io ? la->merged.data : tmp.data;
                rc = b->attn_scores_softmax(b, la->probs.data, values,
                                            m->attn_merged_io ? heads_merged(m) : heads_split(m), la->qh.data,
                                            la->kh.data, la->vh.data, adt, m->B * m->H, T, m->dh, scale);
            } else {
                rc = causal_gemm(m, "attn.scores = q k^T", CAUSAL_OUT_TT, &la->probs, op_x(&la->qh), op_x(&la->kh),
                                 scale, 0);
                RECS("attn causal softmax", F_ACT, F32,
                     adt == LMK_F32 ? "" : "reads 16-bit scores, float32 math, writes 16-bit probabilities", F_ACT);
                if (rc == LMK_OK)
                    rc = b->softmax_causal_fwd(b, la->probs.data, la->probs.data, adt, m->B * m->H, T,
                                               softmax_zero_block(m));
                if (rc == LMK_OK)
                    rc = causal_gemm(m, "attn.values = p v", CAUSAL_IN_TT, &tmp, op_x(&la->probs), op_x(&la->vh),
                                     1.0f, 0);
            }
            RANGE_POP();
            TRY(rc);
            if (!keep) {
                DROP(la->qh);
                DROP(la->kh);
                DROP(la->probs);
                DROP(la->vh);
            }
        } else {
            RANGE_PUSH("attention scores");
            rc = causal_gemm(m, "attn.scores = q k^T", CAUSAL_OUT_TT, &la->probs, op_x(&la->qh),
                             op_x(&la->kh), scale, 0);
            RANGE_POP();
            TRY(rc);
            if (!keep) {
                DROP(la->qh);
                DROP(la->kh);
            }
            RANGE_PUSH("attention softmax");
            RECS("attn causal softmax", F_ACT, F32,
                 adt == LMK_F32 ? "" : "reads 16-bit scores, float32 math, writes 16-bit probabilities", F_ACT);
            rc = b->softmax_causal_fwd(b, la->probs.data, la->probs.data, adt, m->B * m->H, T,
                                       softmax_zero_block(m));
            RANGE_POP();
            TRY(rc);
            TMPA(tmp, (size_t)N * d, "layers.%d.attn.values", l);
            RANGE_PUSH("attention values");
            rc = causal_gemm(m, "attn.values = p v", CAUSAL_IN_TT, &tmp, op_x(&la->probs), op_x(&la->vh),
                             1.0f, 0);
            RANGE_POP();
            TRY(rc);
            if (!keep) {
                DROP(la->probs);
                DROP(la->vh);
            }
        }
    }
    if (!m->attn_merged_io) {
        const lmk_tensor *values = tmp.data ? &tmp : &la->o;
        ACTA(la->merged, (size_t)N * d, "layers.%d.attn.merged", l);
        REC("attn head merge", F_ACT, "-", F_ACT);
        TRY(b->rope_bwd(b, la->merged.data, values->data, adt, NULL, m->B, T, m->H, m->dh, d));
    }
    if (!tmp.data) /* the values were the saved flash output, or written merged: a new buffer */
        TMPA(tmp, (size_t)N * d, "layers.%d.attn.output_proj.out", l);
    TRY(linear_fwd(m, "attn.output_proj", &tmp, op_x(&la->merged), layer_param(m, l, P_WO), N, d, d));
    if (!keep)
        DROP(la->merged);
    /* mid = x + attention, and ln2 of it, in one pass (add_rmsnorm_fwd) */
    ACT(la->mid, (size_t)N * d, "layers.%d.resid_mid", l);
    ACT(la->ln2_rstd, N, "layers.%d.ln2.rstd", l);
    ACTA(la->ln2_out, (size_t)N * d, "layers.%d.ln2.out", l);
    REC("residual add (attention)", F32, "-", F32, F_ACT);
    rec(m, "ln2 (rmsnorm)", F32 ", " F32, F_ACT, acc_reduce(m, 1), norm_store);
    TRY(b->add_rmsnorm_fwd(b, LMK_F(la->mid), x, tmp.data, adt, la->ln2_out.data, adt, LMK_F(la->ln2_rstd),
                           LMK_F(layer_param(m, l, P_LN2)->p), N, d, RMS_EPS));
    DROP(tmp);
    if (!keep) {
        DROP(m->resid[l]);
        DROP(la->ln2_rstd);
    }

    /* feed-forward */
    const void *w3x; /* w3 x: la->g, or the right half of la->a's rows (fused) */
    int64_t ffld = ff; /* the row stride of w1 x, w3 x */
    if (m->fused_w13) {
        ffld = 2 * (int64_t)ff;
        ACTA(la->a, (size_t)N * 2 * ff, "layers.%d.ffn.w13_out", l);
        TRY(fused_fwd(m, "ffn.w13", &la->a, op_x(&la->ln2_out), layer_param(m, l, P_W1), N, d));
        w3x = (const char *)la->a.data + (size_t)ff * lmk_dtype_size(adt);
    } else {
        ACTA(la->a, (size_t)N * ff, "layers.%d.ffn.w1_out", l);
        TRY(linear_fwd(m, "ffn.w1", &la->a, op_x(&la->ln2_out), layer_param(m, l, P_W1), N, d, ff));
        ACTA(la->g, (size_t)N * ff, "layers.%d.ffn.w3_out", l);
        TRY(linear_fwd(m, "ffn.w3", &la->g, op_x(&la->ln2_out), layer_param(m, l, P_W3), N, d, ff));
        w3x = la->g.data;
    }
    if (!keep)
        DROP(la->ln2_out);
    ACTA(la->act, (size_t)N * ff, "layers.%d.ffn.swiglu", l);
    REC("ffn silu(w1 x) * w3 x", F_ACT, F32, F_ACT, F_ACT);
    TRY(b->swiglu_fwd(b, la->act.data, la->a.data, w3x, adt, (size_t)N * ff, ff, ffld));
    if (!keep) {
        DROP(la->a);
        DROP(la->g);
    }
    TMPA(tmp, (size_t)N * d, "layers.%d.ffn.w2_out", l);
    TRY(linear_fwd(m, "ffn.w2", &tmp, op_x(&la->act), layer_param(m, l, P_W2), N, ff, d));
    if (!keep)
        DROP(la->act);
    /* the layer's output = mid + ffn, and the next norm of it (the next
     * layer's ln1, or ln_final) in one pass */
    int last = l + 1 == m->c.num_layers;
    lmk_tensor *nrstd = last ? &m->lnf_rstd : &m->acts[l + 1].ln1_rstd;
    lmk_tensor *nout = last ? &m->lnf_out : &m->acts[l + 1].ln1_out;
    const float *nw = LMK_F(last ? param_final_norm(m)->p : layer_param(m, l + 1, P_LN1)->p);
    ACT(m->resid[l + 1], (size_t)N * d, "layers.%d.out", l);
    if (last) {
        ACT(*nrstd, N, "%s", "ln_final.rstd");
        ACTA(*nout, (size_t)N * d, "%s", "ln_final.out");
    } else {
        ACT(*nrstd, N, "layers.%d.ln1.rstd", l + 1);
        ACTA(*nout, (size_t)N * d, "layers.%d.ln1.out", l + 1);
    }
    REC("residual add (ffn)", F32, "-", F32, F_ACT);
    rec(m, last ? "ln_final (rmsnorm)" : "ln1 (rmsnorm)", F32 ", " F32, F_ACT, acc_reduce(m, 1), norm_store);
    TRY(b->add_rmsnorm_fwd(b, LMK_F(m->resid[l + 1]), LMK_F(la->mid), tmp.data, adt, nout->data, adt,
                           LMK_F(*nrstd), nw, N, d, RMS_EPS));
    DROP(tmp);
    if (!keep && !last)
        DROP(*nrstd);
    if (!keep) {
        release_layer(m, la);
        release_layer_copies(m, l);
    }
out:
    DROP(tmp);
    return rc;
}

static int model_forward(lmk_model *m, int with_backward)
{
    int rc = LMK_OK, N = m->N, d = m->c.d_model, V = m->c.vocab_size, L = m->c.num_layers;
    lmk_backend *b = m->b;
    if ((with_backward && !m->training) || (m->opt_in_backward && m->have_grads))
        return LMK_INVALID; /* the optimizer in backward: its step (the rest of it) first */
    TRY(opt_lane_join(m, LMK_OK)); /* after a failed backward the lane may still write parameters */
    release_activations(m);
    m->have_grads = 0;
    TRY(make_persistent_copies(m));
    ACT(m->resid[0], (size_t)N * d, "%s", "token_embeddings.out");
    REC("token_embeddings (lookup)", F32, "-", "int32", F32);
    TRY(b->embedding_fwd(b, LMK_F(m->resid[0]), LMK_I(m->inputs), LMK_F(m->params[0].p), N, d, V));
    for (int l = 0; l < L; l++) {
        range_push_layer(l);
        rc = layer_forward(m, l, with_backward);
        RANGE_POP();
        TRY(rc);
    }
    /* ln_final: computed with the last layer's residual add */
    if (!with_backward) {
        DROP(m->lnf_rstd);
        DROP(m->resid[L]);
    }
    /* the logits stay float32 storage (values rounded to the half format):
     * the loss reads them and lmk_model_logits hands them out */
    ACT(m->logits, (size_t)N * V, "%s", "lm_head.logits");
    TRY(linear_fwd(m, "lm_head", &m->logits, op_x(&m->lnf_out), param_lm_head(m), N, d, V));
    if (!with_backward) {
        DROP(m->lnf_out);
        release_copy(m, param_lm_head(m));
    }
    /* loss; with backward, the logits become their gradient in place */
    REC(with_backward ? "cross-entropy loss + dlogits" : "cross-entropy loss", F32, acc_reduce(m, 0),
        F_OUT, "int32");
    TRY(b->cross_entropy(b, LMK_F(m->scalars), with_backward ? LMK_F(m->logits) : NULL,
                         LMK_F(m->logits), LMK_I(m->targets), N, V, m->loss_scale));
    if (with_backward) {
        m->have_grad_ready = 1;
    } else if (m->keep_logits) { /* everything but the logits */
        lmk_tensor logits = m->logits;
        m->logits = (lmk_tensor){0};
        release_activations(m);
        m->logits = logits;
    } else {
        release_activations(m);
    }
out:
    if (rc != LMK_OK)
        release_activations(m);
    return rc;
}

/* --- backward --------------------------------------------------------------- */

/* Flash attention backward of layer l: dout (B, H, T, dh) of m->adt,
 * released → *dq, *dk, *dv (new (B, H, T, dh) temporaries of m->adt).
 * Recomputes P from the saved logsumexp; releases the layer's q, k, v, O and
 * logsumexp. */
static int flash_backward(lmk_model *m, int l, lmk_tensor *dout, lmk_tensor *dq, lmk_tensor *dk,
                          lmk_tensor *dv)
{
    lmk_backend *b = m->b;
    layer_acts *la = &m->acts[l];
    int rc = LMK_OK;
    size_t n = (size_t)m->N * m->c.d_model;
    lmk_attn_shape s = attn_shape(m);
    lmk_tensor work = {0};
    lmk_tensor *outs[3] = {dq, dk, dv};
    static const char *const names[3] = {"q", "k", "v"};
    if (!b->attn_bwd)
        return LMK_UNSUPPORTED;
    TMP(work, (size_t)m->B * m->H * m->T, "layers.%d.attn.flash_work", l);
    RECS("attn flash backward (fused, recomputes P)", F_ACT, F32, m->adt == LMK_F32 ? "" : "dO, dq, dk, dv in 16 bits",
         F_ACT, F_ACT);
    for (int i = 0; i < 3; i++)
        TMPA(*outs[i], n, "layers.%d.attn.%s.grad", l, names[i]);
    TRY(b->attn_bwd(b, dq->data, dk->data, dv->data, LMK_F(work), dout->data, la->qh.data, la->kh.data,
                    la->vh.data, la->o.data, LMK_F(la->lse), &s));
out:
    DROP(*dout);
    DROP(work);
    DROP(la->qh);
    DROP(la->kh);
    DROP(la->vh);
    DROP(la->o);
    DROP(la->lse);
    return rc;
}

/* dres (N, d) float32: gradient w.r.t. the layer's output on entry, its
 * input on exit (the tensor is replaced); dres16: its 16-bit copy under
 * bf16/fp16 (else empty), replaced likewise (left empty at layer 0). The
 * gradients of 16-bit activations are 16-bit (m->adt), those of the residual
 * stream float32. */
static int layer_backward(lmk_model *m, int l, lmk_tensor *dres, lmk_tensor *dres16)
{
    lmk_backend *b = m->b;
    layer_acts *la = &m->acts[l];
    int rc = LMK_OK, N = m->N, d = m->c.d_model, ff = m->c.d_ff, T = m->T;
    int B = m->B, H = m->H, dh = m->dh;
    lmk_dtype adt = m->adt;
    float scale = (float)(1.0 / sqrt((double)dh));
    lmk_tensor t1 = {0}, t2 = {0}, t3 = {0}, t4 = {0}, t5 = {0};
    param_slot *w1 = layer_param(m, l, P_W1), *w2 = layer_param(m, l, P_W2),
               *w3 = layer_param(m, l, P_W3);

    /* feed-forward: out = mid + w2(act) */
    TMPA(t1, (size_t)N * ff, "layers.%d.ffn.swiglu.grad", l);
    TRY(linear_bwd(m, "ffn.w2", &t1, 0, w2, dres, dres16, op_x(&la->act), N, ff, d));
    DROP(la->act);
    REC("ffn swiglu backward", F_ACT, F32, F_ACT, F_ACT, F_ACT);
    if (m->fused_w13) { /* dw1x, dw3x as the halves of one (N, 2·d_ff) gradient */
        size_t half = (size_t)ff * lmk_dtype_size(adt);
        TMPA(t2, (size_t)N * 2 * ff, "layers.%d.ffn.w13_out.grad", l);
        TRY(b->swiglu_bwd(b, t2.data, (char *)t2.data + half, t1.data, la->a.data, (const char *)la->a.data + half,
                          adt, (size_t)N * ff, ff, 2 * (int64_t)ff));
    } else {
        TMPA(t2, (size_t)N * ff, "layers.%d.ffn.w1_out.grad", l);
        TMPA(t3, (size_t)N * ff, "layers.%d.ffn.w3_out.grad", l);
        TRY(b->swiglu_bwd(b, t2.data, t3.data, t1.data, la->a.data, la->g.data, adt, (size_t)N * ff, ff, ff));
    }
    DROP(t1);
    DROP(la->a);
    DROP(la->g);
    if (m->fused_w13) {
        static const char *const w13_names[2] = {"ffn.w1", "ffn.w3"};
        if (m->norm_dx16)
            TMPA(t1, (size_t)N * d, "layers.%d.ln2.out.grad", l);
        else
            TMP(t1, (size_t)N * d, "layers.%d.ln2.out.grad", l);
        TRY(fused_bwd(m, "ffn.w13", w13_names, &t1, w1, &t2, op_x(&la->ln2_out), N, d));
    } else {
        TMP(t1, (size_t)N * d, "layers.%d.ln2.out.grad", l); /* float32: w1 and w3 accumulate */
        TRY(linear_bwd(m, "ffn.w1", &t1, 0, w1, &t2, NULL, op_x(&la->ln2_out), N, d, ff));
        TRY(linear_bwd(m, "ffn.w3", &t1, 1, w3, &t3, NULL, op_x(&la->ln2_out), N, d, ff));
    }
    DROP(t2);
    DROP(t3);
    DROP(la->ln2_out);
    /* the gradient of mid = ln2's backward + dres, and its 16-bit copy for
     * output_proj's GEMMs, in one pass (rmsnorm_bwd_add) */
    TMP(t2, (size_t)N * d, "layers.%d.resid_mid.grad", l);
    TRY(half_tensor(m, &t5, (size_t)N * d, l, "resid_mid.grad"));
    REC("ln2 (rmsnorm) backward", F32, acc_reduce(m, 1), dtype_fmt(t1.dtype), F32, F32);
    REC("residual add (ln2 backward)", F32, "-", F32, F32);
    TRY(grad_ready(m, layer_param(m, l, P_LN2)));
    TRY(b->rmsnorm_bwd_add(b, LMK_F(t2), t5.data, m->half, LMK_F(layer_param(m, l, P_LN2)->g), t1.data,
                           t1.dtype, LMK_F(*dres), LMK_F(la->mid), LMK_F(layer_param(m, l, P_LN2)->p),
                           LMK_F(la->ln2_rstd), N, d));
    DROP(t1);
    DROP(la->ln2_rstd);
    DROP(la->mid);
    lmk_tensor_release(m->a, dres);
    lmk_tensor_release(m->a, dres16);
    *dres = t2;
    *dres16 = t5;
    t2 = (lmk_tensor){0};
    t5 = (lmk_tensor){0};

    /* attention: mid = x + output_proj(merged) */
    param_slot *wo = layer_param(m, l, P_WO);
    TMPA(t1, (size_t)N * d, "layers.%d.attn.merged.grad", l);
    TRY(linear_bwd(m, "attn.output_proj", &t1, 0, wo, dres, dres16, op_x(&la->merged), N, d, d));
    if (m->c.attention != LMK_ATTN_NAIVE_FUSED) /* naive_fused: merged (the values o) lives on for D */
        DROP(la->merged);
    lmk_heads_at dout_at = heads_split(m);
    if (m->attn_merged_io) { /* the fused kernels and dV read dout merged */
        t2 = t1;
        t1 = (lmk_tensor){0};
        dout_at = heads_merged(m);
    } else {
        TMPA(t2, (size_t)N * d, "layers.%d.attn.values.grad", l);
        TRY(b->rope_fwd(b, t2.data, t1.data, adt, NULL, B, T, H, dh, d)); /* split heads */
        DROP(t1);
    }
    if (m->c.attention == LMK_ATTN_FLASH) {
        /* t2 → t1 (dq), t2 (dk), t4 (dv) */
        lmk_tensor dout = t2;
        t2 = (lmk_tensor){0};
        RANGE_PUSH("attention flash backward");
        rc = flash_backward(m, l, &dout, &t1, &t2, &t4);
        RANGE_POP();
        TRY(rc);
    } else if (m->c.attention == LMK_ATTN_NAIVE_FUSED) {
        TMPA(t3, (size_t)B * H * T * T, "layers.%d.attn.scores.grad", l);
        TMPA(t4, (size_t)N * d, "layers.%d.attn.v.grad", l);
        TMPA(t1, (size_t)N * d, "layers.%d.attn.q.grad", l);
        /* dv as overlap GEMMs beside dP, the softmax backward and dq (one kernel where the backend fuses them) */
        RANGE_PUSH("attention values backward");
        if (m->attn_merged_io)
            rc = causal_gemm_tiled(m, "attn dv = p^T dout", CAUSAL_IN_TTT, &t4, op_x(&la->probs), op_x(&t2), dout_at,
                                   1.0f, 1);
        else
            rc = causal_gemm(m, "attn dv = p^T dout", CAUSAL_IN_TTT, &t4, op_x(&la->probs), op_x(&t2), 1.0f, 1);
        RANGE_POP();
        RANGE_PUSH("attention dP+softmax+dQ backward");
        if (m->attn_softmax_fused) {
            if (adt == LMK_F32) {
                rec_tf32_gemm(m, "attn dp = dout v^T",
                              "dP staged in shared memory, read by the softmax backward in the same kernel");
                rec_tf32_gemm(m, "attn dq = ds k", "dS as written, in the same kernel");
                RECS("attn causal softmax backward", F_ACT, F32,
                     "fused with the dP GEMM: sum_j P dP as dout . o, float32 math", F_ACT, F_ACT, F_ACT, F_ACT);
            } else {
                RECS("attn dp = dout v^T", F_ACT, F32,
                     "16-bit tensors; dP rounded to 16 bits in registers, read by the softmax backward in the same "
                     "kernel",
                     F_ACT, F_ACT);
                RECS("attn dq = ds k", F_ACT, F32,
                     "the 16-bit dS as written, from registers, in the same kernel; 16-bit tensor; 16-bit output",
                     F_ACT, F_ACT);
                RECS("attn causal softmax backward", F_ACT, F32,
                     "fused with the dP GEMM: reads 16-bit P, dout and o, sum_j P dP as dout . o, float32 math, "
                     "writes 16-bit dS",
                     F_ACT, F_ACT, F_ACT, F_ACT);
            }
            if (rc == LMK_OK)
                rc = b->attn_dp_softmax_bwd(b, t3.data, t1.data, t2.data, dout_at, la->vh.data, la->kh.data,
                                            la->probs.data, la->merged.data, heads_merged(m), adt, B * H, T, dh,
                                            scale);
        } else {
            if (rc == LMK_OK)
                rc = causal_gemm(m, "attn dp = dout v^T", CAUSAL_OUT_TT, &t3, op_x(&t2), op_x(&la->vh), 1.0f, 0);
            REC("attn causal softmax backward", F_ACT, F32, F_ACT, F_ACT);
            if (rc == LMK_OK)
                rc = b->softmax_causal_bwd(b, t3.data, t3.data, la->probs.data, adt, B * H, T, softmax_zero_block(m));
            if (rc == LMK_OK)
                rc = causal_gemm(m, "attn dq = ds k", CAUSAL_IN_TT, &t1, op_x(&t3), op_x(&la->kh), scale, 0);
        }
        rc = lane_join(m, rc);
        RANGE_POP();
        TRY(rc);
        DROP(t2);
        DROP(la->vh);
        DROP(la->merged);
        DROP(la->probs);
        TMPA(t2, (size_t)N * d, "layers.%d.attn.k.grad", l);
        RANGE_PUSH("attention scores backward");
        rc = causal_gemm(m, "attn dk = ds^T q", CAUSAL_IN_TTT, &t2, op_x(&t3), op_x(&la->qh), scale, 0);
        RANGE_POP();
        TRY(rc);
        DROP(t3);
        DROP(la->qh);
        DROP(la->kh);
    } else {
        TMPA(t3, (size_t)B * H * T * T, "layers.%d.attn.scores.grad", l);
        TMPA(t4, (size_t)N * d, "layers.%d.attn.v.grad", l);
        RANGE_PUSH("attention values backward");
        /* dv as overlap GEMMs beside dp */
        rc = causal_gemm(m, "attn dv = p^T dout", CAUSAL_IN_TTT, &t4, op_x(&la->probs), op_x(&t2), 1.0f, 1);
        if (rc == LMK_OK)
            rc = causal_gemm(m, "attn dp = dout v^T", CAUSAL_OUT_TT, &t3, op_x(&t2), op_x(&la->vh), 1.0f, 0);
        rc = lane_join(m, rc);
        RANGE_POP();
        TRY(rc);
        DROP(t2);
        DROP(la->vh);
        RANGE_PUSH("attention softmax backward");
        RECS("attn causal softmax backward", F_ACT, F32,
             adt == LMK_F32 ? "" : "reads 16-bit dP and P, float32 math, writes 16-bit dS", F_ACT, F_ACT);
        rc = b->softmax_causal_bwd(b, t3.data, t3.data, la->probs.data, adt, B * H, T, softmax_zero_block(m));
        RANGE_POP();
        TRY(rc);
        DROP(la->probs);
        TMPA(t1, (size_t)N * d, "layers.%d.attn.q.grad", l);
        TMPA(t2, (size_t)N * d, "layers.%d.attn.k.grad", l);
        RANGE_PUSH("attention scores backward");
        /* dk as overlap GEMMs beside dq */
        rc = causal_gemm(m, "attn dk = ds^T q", CAUSAL_IN_TTT, &t2, op_x(&t3), op_x(&la->qh), scale, 1);
        if (rc == LMK_OK)
            rc = causal_gemm(m, "attn dq = ds k", CAUSAL_IN_TT, &t1, op_x(&t3), op_x(&la->kh), scale, 0);
        rc = lane_join(m, rc);
        RANGE_POP();
        TRY(rc);
        DROP(t3);
        DROP(la->qh);
        DROP(la->kh);
    }
    /* back through RoPE / head split, then the three projections */
    static const int proj[3] = {P_WQ, P_WK, P_WV};
    static const char *const proj_names[3] = {"attn.q_proj", "attn.k_proj", "attn.v_proj"};
    lmk_tensor *src[3] = {&t1, &t2, &t4};
    if (m->fused_qkv) { /* dq, dk, dv merged into one (N, 3d) gradient: one dx GEMM, K = 3d */
        size_t es = lmk_dtype_size(adt);
        TMPA(t3, (size_t)N * 3 * d, "layers.%d.attn.qkv_proj_out.grad", l);
        if (b->rope_qkv_bwd) { /* one launch for the three */
            const void *const dheads[3] = {t1.data, t2.data, t4.data};
            TRY(b->rope_qkv_bwd(b, t3.data, dheads, adt, LMK_F(m->rope), B, T, H, dh));
        }
        for (int i = 0; i < 3; i++) {
            if (!b->rope_qkv_bwd)
                TRY(b->rope_bwd(b, (char *)t3.data + (size_t)i * d * es, src[i]->data, adt,
                                i < 2 ? LMK_F(m->rope) : NULL, B, T, H, dh, 3 * d));
            lmk_tensor_release(m->a, src[i]);
        }
        if (m->norm_dx16)
            TMPA(t5, (size_t)N * d, "layers.%d.ln1.out.grad", l);
        else
            TMP(t5, (size_t)N * d, "layers.%d.ln1.out.grad", l);
        TRY(fused_bwd(m, "attn.qkv_proj", proj_names, &t5, layer_param(m, l, P_WQ), &t3, op_x(&la->ln1_out), N,
                      d));
    } else {
        TMPA(t3, (size_t)N * d, "layers.%d.attn.proj_out.grad", l);
        TMP(t5, (size_t)N * d, "layers.%d.ln1.out.grad", l); /* float32: q, k, v accumulate */
        for (int i = 0; i < 3; i++) {
            param_slot *w = layer_param(m, l, proj[i]);
            TRY(b->rope_bwd(b, t3.data, src[i]->data, adt, i < 2 ? LMK_F(m->rope) : NULL, B, T, H, dh, d));
            lmk_tensor_release(m->a, src[i]);
            TRY(linear_bwd(m, proj_names[i], &t5, i > 0, w, &t3, NULL, op_x(&la->ln1_out), N, d, d));
        }
    }
    DROP(t3);
    DROP(la->ln1_out);
    release_layer_copies(m, l); /* the layer's last GEMM has run */
    /* the layer input's gradient = ln1's backward + dres, with its 16-bit
     * copy for the layer below (none below layer 0: the embedding reads
     * float32) */
    TMP(t1, (size_t)N * d, "layers.%d.input.grad", l);
    if (l > 0)
        TRY(half_tensor(m, &t2, (size_t)N * d, l, "input.grad"));
    REC("ln1 (rmsnorm) backward", F32, acc_reduce(m, 1), dtype_fmt(t5.dtype), F32, F32);
    REC("residual add (ln1 backward)", F32, "-", F32, F32);
    TRY(grad_ready(m, layer_param(m, l, P_LN1)));
    TRY(b->rmsnorm_bwd_add(b, LMK_F(t1), t2.data, m->half, LMK_F(layer_param(m, l, P_LN1)->g), t5.data,
                           t5.dtype, LMK_F(*dres), LMK_F(m->resid[l]), LMK_F(layer_param(m, l, P_LN1)->p),
                           LMK_F(la->ln1_rstd), N, d));
    DROP(t5);
    DROP(la->ln1_rstd);
    DROP(m->resid[l]);
    lmk_tensor_release(m->a, dres);
    lmk_tensor_release(m->a, dres16);
    *dres = t1;
    *dres16 = t2;
    t1 = (lmk_tensor){0};
    t2 = (lmk_tensor){0};
out:
    DROP(t1);
    DROP(t2);
    DROP(t3);
    DROP(t4);
    DROP(t5);
    return rc;
}

static int model_backward(lmk_model *m)
{
    lmk_backend *b = m->b;
    int rc = LMK_OK, N = m->N, d = m->c.d_model, V = m->c.vocab_size, L = m->c.num_layers;
    lmk_tensor t = {0}, dres = {0}, dres16 = {0};
    if (!m->have_grad_ready)
        return LMK_INVALID;
    m->have_grad_ready = 0;
    m->opt_begun = 0;
    for (size_t i = 0; i < m->nparams; i++)
        m->params[i].g_ready = 0; /* zeroed (allocated) at the first write */
    param_slot *lm = param_lm_head(m), *lnf = param_final_norm(m);
    TMPA(t, (size_t)N * d, "%s", "ln_final.out.grad");
    TRY(linear_bwd(m, "lm_head", &t, 0, lm, &m->logits, NULL, op_x(&m->lnf_out), N, d, V));
    DROP(m->logits);
    DROP(m->lnf_out);
    release_copy(m, lm);
    TMP(dres, (size_t)N * d, "layers.%d.out.grad", L - 1);
    TRY(half_tensor(m, &dres16, (size_t)N * d, L - 1, "out.grad"));
    TRY(grad_ready(m, lnf));
    TRY(b->rmsnorm_bwd_add(b, LMK_F(dres), dres16.data, m->half, LMK_F(lnf->g), t.data, m->adt, NULL,
                           LMK_F(m->resid[L]), LMK_F(lnf->p), LMK_F(m->lnf_rstd), N, d));
    DROP(t);
    DROP(m->lnf_rstd);
    DROP(m->resid[L]);
    /* the optimizer in backward: the final norm and the LM head (adjacent
     * in params) are complete, each layer's parameters at its end */
    TRY(adamw_in_backward(m, (size_t)(param_final_norm(m) - m->params), 2));
    for (int l = L - 1; l >= 0; l--) {
        range_push_layer(l);
        rc = layer_backward(m, l, &dres, &dres16);
        if (rc == LMK_OK)
            rc = adamw_in_backward(m, (size_t)(layer_param(m, l, 0) - m->params), P_PER_LAYER);
        RANGE_POP();
        TRY(rc);
    }
    REC("token_embeddings backward (scatter-add)", F32, F32, F32 ", int32");
    TRY(grad_ready(m, &m->params[0]));
    TRY(b->embedding_bwd(b, LMK_F(m->params[0].g), LMK_F(dres), LMK_I(m->inputs), N, d, V));
    /* layer 0's ln1 weight gradient may still be written beside
     * (rmsnorm_bwd_add): the grad norm and the update read it */
    TRY(lane_join(m, LMK_OK));
    /* the optimizer in backward: its updates end inside the backward (in
     * stream order; the host does not wait): the step's update of the token
     * embeddings reads the step counter and alpha_t that the lane's
     * adamw_begin wrote, and a timer's event after the backward holds them */
    if (m->opt_in_backward)
        TRY(opt_lane_join(m, LMK_OK));
    for (size_t i = 0; i < m->nparams; i++) /* every gradient exists after a backward */
        TRY(grad_ready(m, &m->params[i]));
    m->have_grads = 1;
out:
    DROP(t);
    DROP(dres);
    DROP(dres16);
    release_activations(m);
    return rc;
}

/* --- the memory estimate ------------------------------------------------------ */

/* A ledger of live bytes per estimate category, replaying the allocation
 * order of forward/backward above from the shape alone (no allocation):
 * what the tracked allocator will see, tensor by tensor, without the
 * per-op details that do not move the peak (the ops allocate nothing). */
enum { E_PARAM, E_COPY, E_GRAD, E_OPT, E_ACT, E_INPUT, E_COUNT };

typedef struct ledger {
    int64_t live[E_COUNT], total, peak, at_peak[E_COUNT];
    int grads_kept; /* the gradients are live from the start (a later step without an optimizer step):
                     * backward allocates none */
} ledger;

static void put(ledger *g, int cat, int64_t bytes)
{
    if (cat == E_GRAD && g->grads_kept)
        return;
    g->live[cat] += bytes;
    g->total += bytes;
    if (bytes > 0 && g->total > g->peak) {
        g->peak = g->total;
        memcpy(g->at_peak, g->live, sizeof g->live);
    }
}

/* Sizes in bytes of one point (see lmk_model_memory_estimate): nd, n4 are
 * float32 tensors (residual stream, statistics); the *a sizes are tensors of
 * the activation dtype (2 bytes under bf16/fp16). */
typedef struct est_shape {
    int64_t nd, n4, nda, nffa, scoresa, lse, d, dd, dff;
    int64_t h16; /* a 16-bit copy of an (N, d) float32 tensor under bf16/fp16, else 0 */
    int hp, flash;
    int naive_fused; /* attention naive_fused: its allocation order */
    int persist; /* the weight copies persist (made at create; model.c's persistent_copies) */
    int fused_qkv; /* LMK_FUSED_QKV */
    int fused_w13; /* LMK_FUSED_W13 */
    int64_t ln1_dx, ln2_dx; /* bytes of the ln1 / ln2 output gradients (LMK_NORM_DX16: 16-bit when fused) */
} est_shape;

#define ACTB(x) put(g, E_ACT, (x))
/* per-step weight copies made (positive) or released (negative) */
#define COPY(elems) put(g, E_COPY, z->hp && !z->persist ? 2 * (int64_t)(elems) : 0)

/* first: layer 0 (computes its ln1); last: its residual add computes
 * ln_final (else the next layer's ln1) */
static void est_layer_forward(ledger *g, const est_shape *z, int keep, int first, int last)
{
    int64_t nd = z->nd, nda = z->nda, nffa = z->nffa, n4 = z->n4;
    int tmp_is_values;
    if (first) {
        ACTB(n4 + nda); /* ln1 rstd, out */
        if (!keep)
            ACTB(-n4);
    }
    if (z->fused_qkv) {
        ACTB(3 * nda);  /* (N, 3d) projection output */
        COPY(3 * z->dd); /* the stacked copy */
        ACTB(3 * nda);  /* q, k, v */
        ACTB(-3 * nda - (!keep ? nda : 0)); /* projection output, ln1 out */
    } else {
        ACTB(nda); /* projection output */
        for (int i = 0; i < 3; i++) {
            ACTB(nda); /* q, k, v */
            COPY(z->dd);
        }
        ACTB(-nda - (!keep ? nda : 0)); /* projection output, ln1 out */
    }
    if (z->flash) {
        ACTB(z->lse);
        ACTB(nda); /* O */
        if (!keep)
            ACTB(-3 * nda - z->lse);
        tmp_is_values = !keep;
    } else if (z->naive_fused) {
        ACTB(z->scoresa + nda); /* probs, values */
        if (!keep)
            ACTB(-3 * nda - z->scoresa); /* q, k, v, probs */
        tmp_is_values = 1;
    } else {
        ACTB(z->scoresa);
        if (!keep)
            ACTB(-2 * nda);
        ACTB(nda); /* values */
        if (!keep)
            ACTB(-z->scoresa - nda);
        tmp_is_values = 1;
    }
    ACTB(nda); /* merged */
    if (!tmp_is_values)
        ACTB(nda);
    COPY(z->dd);
    if (!keep)
        ACTB(-nda);
    ACTB(nd);       /* mid */
    ACTB(n4 + nda); /* ln2 (fused with the add) */
    ACTB(-nda);     /* output_proj out */
    if (!keep)
        ACTB(-nd - n4); /* the layer's input, ln2 rstd */
    if (z->fused_w13) {
        ACTB(2 * nffa);    /* (N, 2·d_ff) w1, w3 out */
        COPY(2 * z->dff);  /* the stacked copy */
    } else {
        ACTB(nffa); /* w1 out */
        COPY(z->dff);
        ACTB(nffa); /* w3 out */
        COPY(z->dff);
    }
    if (!keep)
        ACTB(-nda);
    ACTB(nffa); /* swiglu */
    if (!keep)
        ACTB(-2 * nffa);
    ACTB(nda); /* w2 out */
    COPY(z->dff);
    if (!keep)
        ACTB(-nffa);
    ACTB(nd);       /* layer output */
    ACTB(n4 + nda); /* the next norm (fused with the add) */
    ACTB(-nda);     /* w2 out */
    if (!keep && !last)
        ACTB(-n4); /* the next layer's ln1 rstd */
    if (!keep) {
        ACTB(-nd); /* mid */
        COPY(-(4 * z->dd + 3 * z->dff));
    }
}

/* A linear layer's backward: its gradient, then (16-bit GEMMs, float32 dy)
 * the cast of dy. */
static void est_linear_bwd(ledger *g, const est_shape *z, int64_t weight_elems, int64_t dy32_elems)
{
    put(g, E_GRAD, 4 * weight_elems);
    if (z->hp && dy32_elems) {
        ACTB(2 * dy32_elems);
        ACTB(-2 * dy32_elems);
    }
}

/* first: layer 0 (the last one backward runs; no 16-bit copy of its input's
 * gradient) */
static void est_layer_backward(ledger *g, const est_shape *z, int first)
{
    int64_t nd = z->nd, nda = z->nda, nffa = z->nffa, n4 = z->n4, h16 = z->h16;
    ACTB(nffa); /* swiglu grad */
    est_linear_bwd(g, z, z->dff, 0); /* dy: dres's 16-bit copy */
    ACTB(-nffa);     /* swiglu out */
    ACTB(2 * nffa);  /* w1, w3 out grads */
    ACTB(-3 * nffa); /* swiglu grad, w1 and w3 outs */
    ACTB(z->ln2_dx); /* ln2 out grad */
    est_linear_bwd(g, z, z->dff, 0);
    est_linear_bwd(g, z, z->dff, 0);
    ACTB(-2 * nffa - nda); /* w1, w3 out grads, ln2 out */
    ACTB(nd + h16);        /* mid grad and its 16-bit copy */
    put(g, E_GRAD, 4 * z->d);
    ACTB(-z->ln2_dx - n4 - nd); /* ln2 out grad, rstd, mid */
    ACTB(-nd - h16);      /* the old dres and its copy */
    ACTB(nda);            /* merged grad */
    est_linear_bwd(g, z, z->dd, 0);
    if (!z->naive_fused)
        ACTB(-nda); /* merged (naive_fused: after the softmax backward, which reads it) */
    ACTB(nda);  /* values grad (heads split; not made where the fused kernels read dout merged, never at the
                 * peak: the attention backward's buffers come after it) */
    ACTB(-nda); /* merged grad */
    if (z->flash) {
        ACTB(z->lse); /* work (D) */
        ACTB(3 * nda);
        ACTB(-nda - z->lse - 4 * nda - z->lse); /* dout, work, q, k, v, O, lse */
    } else if (z->naive_fused) {
        ACTB(z->scoresa + 2 * nda); /* dS, dv, dq */
        ACTB(-2 * nda);             /* values grad, v */
        ACTB(-nda - z->scoresa);    /* merged, probs */
        ACTB(nda);                  /* dk */
        ACTB(-z->scoresa);          /* dS */
        ACTB(-2 * nda);             /* q, k */
    } else {
        ACTB(z->scoresa + nda); /* dP, dv */
        ACTB(-2 * nda);         /* values grad, v */
        ACTB(-z->scoresa);      /* probs */
        ACTB(2 * nda);          /* dq, dk */
        ACTB(-z->scoresa);      /* dS */
        ACTB(-2 * nda);         /* q, k */
    }
    if (z->fused_qkv) {
        ACTB(3 * nda);  /* (N, 3d) projection output grad */
        ACTB(-3 * nda); /* dq, dk, dv */
        ACTB(z->ln1_dx); /* ln1 out grad */
        for (int i = 0; i < 3; i++)
            est_linear_bwd(g, z, z->dd, 0);
        ACTB(-3 * nda - nda); /* proj out grad, ln1 out */
    } else {
        ACTB(nda + nd); /* proj out grad, ln1 out grad (float32: accumulated) */
        for (int i = 0; i < 3; i++) {
            ACTB(-nda); /* dq, dk, dv */
            est_linear_bwd(g, z, z->dd, 0);
        }
        ACTB(-2 * nda); /* proj out grad, ln1 out */
    }
    COPY(-(4 * z->dd + 3 * z->dff));
    ACTB(nd + (first ? 0 : h16)); /* input grad (and its 16-bit copy) */
    put(g, E_GRAD, 4 * z->d);
    ACTB(-z->ln1_dx - n4 - nd); /* ln1 out grad, rstd, the layer's input */
    ACTB(-nd - h16);      /* the old dres and its copy */
}

/* The estimate of one step; grads_kept: a later step of a model without
 * AdamW, whose gradients stay from the step before (lmk_model_step releases
 * them; nothing else does). */
static lmk_memory_estimate estimate_step(const lmk_model_config *c, int batch, int T, lmk_precision prec,
                                         int training, int grads_kept, int opt_in_backward)
{
    int64_t N = (int64_t)batch * T, d = c->d_model, ff = c->d_ff, V = c->vocab_size;
    int64_t H = c->num_heads, L = c->num_layers, P = (int64_t)lmk_model_param_count(c), dh = d / H;
    int hp = prec == LMK_PREC_BF16 || prec == LMK_PREC_FP16;
    int64_t ea = hp ? 2 : 4; /* bytes of an activation-dtype element */
    int adamw = training && training != LMK_MODEL_GRADIENTS;
    est_shape zs = {.nd = 4 * N * d, .n4 = 4 * N, .nda = ea * N * d, .nffa = ea * N * ff,
                    .scoresa = ea * (int64_t)batch * H * T * T, .lse = 4 * N * H, .d = d, .dd = d * d,
                    .dff = d * ff, .h16 = hp ? 2 * N * d : 0, .hp = hp,
                    .flash = c->attention == LMK_ATTN_FLASH, .naive_fused = c->attention == LMK_ATTN_NAIVE_FUSED,
                    .persist = hp && adamw,
                    .fused_qkv = LMK_FUSED_QKV, .fused_w13 = LMK_FUSED_W13,
                    .ln1_dx = LMK_FUSED_QKV && LMK_NORM_DX16 ? ea * N * d : 4 * N * d,
                    .ln2_dx = LMK_FUSED_W13 && LMK_NORM_DX16 ? ea * N * d : 4 * N * d};
    const est_shape *z = &zs;
    ledger lg = {0}, *g = &lg;
    put(g, E_PARAM, 4 * P);
    if (grads_kept) {
        put(g, E_GRAD, 4 * P);
        lg.grads_kept = 1;
    }
    int grads_applied = opt_in_backward && adamw; /* each group's gradients released once applied */
    if (adamw)
        put(g, E_OPT, 8 * P);
    if (zs.persist) /* every matrix but the embedding */
        put(g, E_COPY, 2 * (P - V * d - (2 * L + 1) * d));
    /* inputs, targets, rope table, loss/norm scalars, step counter */
    put(g, E_INPUT, 8 * N + 4 * T * dh + 16 + (adamw ? 8 : 0));
    int keep = training != 0;
    ACTB(z->nd); /* embedding out */
    for (int l = 0; l < L; l++)
        est_layer_forward(g, z, keep, l == 0, l == L - 1);
    if (!keep) /* ln_final (made by the last layer): its rstd, its input */
        ACTB(-z->n4 - z->nd);
    ACTB(4 * N * V); /* logits */
    COPY(V * d);
    if (keep) {
        ACTB(z->nda); /* ln_final out grad */
        est_linear_bwd(g, z, V * d, N * V);
        ACTB(-4 * N * V - z->nda); /* logits, ln_final out */
        COPY(-V * d);
        ACTB(z->nd + z->h16); /* dres and its 16-bit copy */
        put(g, E_GRAD, 4 * d);
        ACTB(-z->nda - z->n4 - z->nd);
        if (grads_applied)
            put(g, E_GRAD, -4 * (V * d + d)); /* the LM head's and final norm's, applied */
        for (int l = L - 1; l >= 0; l--) {
            est_layer_backward(g, z, l == 0);
            if (grads_applied)
                put(g, E_GRAD, -4 * (4 * z->dd + 3 * z->dff + 2 * d)); /* the layer's, applied */
        }
        put(g, E_GRAD, 4 * V * d); /* embedding */
    }
    lmk_memory_estimate e = {0};
    e.parameters = (uint64_t)(4 * P);
    e.gradients = training ? (uint64_t)(4 * P) : 0;
    e.optimizer_state = adamw ? (uint64_t)(8 * P) : 0;
    e.parameter_copies = (uint64_t)lg.at_peak[E_COPY];
    e.gradients_at_peak = (uint64_t)lg.at_peak[E_GRAD];
    e.activations = (uint64_t)lg.at_peak[E_ACT];
    e.inputs = (uint64_t)lg.at_peak[E_INPUT];
    e.total = (uint64_t)lg.peak;
    return e;
}

lmk_memory_estimate lmk_model_memory_estimate(const lmk_model_config *c, int batch, int T, lmk_precision prec,
                                              int training)
{
    return estimate_step(c, batch, T, prec, training, 0, 0);
}

lmk_memory_estimate lmk_model_memory_estimate_steps(const lmk_model_config *c, int batch, int T, lmk_precision prec,
                                                    int training, int steps, int opt_in_backward)
{
    lmk_memory_estimate first = estimate_step(c, batch, T, prec, training, 0, opt_in_backward);
    if (steps < 2 || training != LMK_MODEL_GRADIENTS)
        return first;
    lmk_memory_estimate later = estimate_step(c, batch, T, prec, training, 1, 0);
    return later.total > first.total ? later : first;
}
#undef ACTB
#undef COPY

/* --- optimizer ---------------------------------------------------------------- */

/* AdamW's hyper-parameters from cfg for m (the step number on the device). */
static lmk_adamw_hp adamw_hp(const lmk_model *m, const lmk_adamw_config *cfg)
{
    return (lmk_adamw_hp){.lr = cfg->lr, .beta1 = cfg->beta1, .beta2 = cfg->beta2, .eps = cfg->eps,
                          .weight_decay = cfg->weight_decay, .t = 0, .alpha = LMK_F(m->scalars) + 3,
                          .copy_fmt = m->half};
}

/* m->opt[first, first + count): the multi-tensor ops' table of those
 * params (refilled each step: gradients move between steps). */
static void opt_table(lmk_model *m, size_t first, size_t count)
{
    for (size_t i = first; i < first + count; i++) {
        param_slot *s = &m->params[i];
        m->opt[i] = (lmk_opt_tensor){.p = LMK_F(s->p), .g = LMK_F(s->g), .m = LMK_F(s->m),
                                     .v = LMK_F(s->v), .n = s->p.numel,
                                     .h = m->persistent_copies ? s->h.data : NULL};
    }
}

/* AdamW on params [first, first + count), whose gradients are complete:
 * one multi-tensor call (the same results as any split of the table). */
static int adamw_params(lmk_model *m, size_t first, size_t count, const lmk_adamw_hp *hp, const float *factor)
{
    opt_table(m, first, count);
    return m->b->adamw_multi(m->b, m->opt + first, count, hp, factor);
}

/* The optimizer in backward: AdamW on params [first, first + count) on the
 * backend's optimizer lane, the step counter advanced before the first of
 * a step. Nothing when it is off. */
static int adamw_in_backward(lmk_model *m, size_t first, size_t count)
{
    if (!m->opt_in_backward)
        return LMK_OK;
    lmk_backend *b = m->b;
    lmk_adamw_hp hp = adamw_hp(m, &m->opt_cfg);
    RANGE_PUSH("optimizer in backward"); /* inside "backward" (and "layer N") */
    int rc = b->opt_lane ? b->opt_lane(b, 1) : LMK_OK;
    if (rc == LMK_OK && !m->opt_begun) {
        rc = b->adamw_begin(b, (int64_t *)m->step.data, LMK_F(m->scalars) + 3, NULL, &hp);
        m->opt_begun = rc == LMK_OK;
    }
    if (rc == LMK_OK)
        rc = adamw_params(m, first, count, &hp, NULL);
    /* applied: released now, on the lane (its stream orders the frees after
     * the update that reads them), not at the step */
    for (size_t i = first; rc == LMK_OK && i < first + count; i++)
        grad_drop(m, &m->params[i]);
    int off = b->opt_lane ? b->opt_lane(b, 0) : LMK_OK;
    RANGE_POP();
    return rc != LMK_OK ? rc : off;
}

/* Waits (in stream order) for the optimizer lane: before anything it reads
 * or writes is freed, and at the end of a backward. */
static int opt_lane_join(lmk_model *m, int rc)
{
    int jrc = m->b->opt_lane_join ? m->b->opt_lane_join(m->b) : LMK_OK;
    return rc != LMK_OK ? rc : jrc;
}

int lmk_model_optimizer_in_backward(lmk_model *m, const lmk_adamw_config *cfg)
{
    if (m->have_grads)
        return LMK_INVALID; /* between a backward and its step */
    if (!cfg) {
        m->opt_in_backward = 0;
        return LMK_OK;
    }
    if (!m->params[0].m.data || cfg->max_grad_norm > 0.0f || m->prec == LMK_PREC_FP16)
        return LMK_INVALID;
    m->opt_in_backward = 1;
    m->opt_cfg = *cfg;
    return LMK_OK;
}

static int model_step(lmk_model *m, const lmk_adamw_config *cfg)
{
    lmk_backend *b = m->b;
    int rc = LMK_OK;
    if (!m->have_grads || !m->params[0].m.data)
        return LMK_INVALID;
    if (m->opt_in_backward && memcmp(cfg, &m->opt_cfg, sizeof *cfg) != 0)
        return LMK_INVALID;
    m->have_grads = 0;
    float *sumsq = LMK_F(m->scalars) + 1, *factor = LMK_F(m->scalars) + 2;
    int need_factor = cfg->max_grad_norm > 0.0f || m->prec == LMK_PREC_FP16;
    lmk_adamw_hp hp = adamw_hp(m, cfg);
    /* every tensor in one table: the multi-tensor ops take one or a few
     * launches per step (the same results as one call per tensor); with the
     * optimizer in backward, only the token embeddings are left */
    size_t count = m->opt_in_backward ? 1 : m->nparams;
    if (need_factor) {
        opt_table(m, 0, m->nparams);
        TRY(b->mem_zero(b, sumsq, sizeof(float)));
        TRY(b->sum_squares_multi(b, sumsq, m->opt, m->nparams));
        REC("gradient norm (sum of squares)", F32, "float64", F32);
        TRY(b->clip_factor(b, factor, sumsq, cfg->max_grad_norm, 1.0f / m->loss_scale));
    }
    /* the step number lives on the device: the whole step can be replayed
     * from a CUDA graph with the right bias correction */
    REC("AdamW step counter and alpha_t", F32, "float64", "int64");
    if (!m->opt_begun)
        TRY(b->adamw_begin(b, (int64_t *)m->step.data, LMK_F(m->scalars) + 3, need_factor ? factor : NULL, &hp));
    REC("AdamW (p, m, v master copies)", F32, F32, F32, F32, F32, F32);
    if (m->persistent_copies)
        rec(m, "weights (16-bit copies written by AdamW)", F32, fmt_of(m->half), "-",
            "parameter_copy, rewritten by each step");
    TRY(adamw_params(m, 0, count, &hp, need_factor ? factor : NULL));
    m->step_calls++;
    if (m->prec != LMK_PREC_FP16)
        goto out; /* nothing to decide on the host: no synchronisation */
    /* dynamic loss scaling: the host needs the verdict (synchronises) */
    float f = 1.0f;
    TRY(b->download(b, &f, factor, sizeof f));
    if (f == 0.0f) { /* overflow: skipped */
        m->skipped++;
        if (m->loss_scale > 1.0f)
            m->loss_scale *= 0.5f;
        m->good_steps = 0;
    } else if (++m->good_steps >= LOSS_SCALE_GROWTH_INTERVAL) {
        m->loss_scale *= 2.0f;
        m->good_steps = 0;
    }
out:
    m->opt_begun = 0; /* the backward joined the optimizer lane at its end */
    /* optimizer.zero_grad(set_to_none=True): the next backward allocates
     * them again (stream-ordered: the frees follow the AdamW kernels) */
    for (size_t i = 0; i < m->nparams; i++)
        grad_drop(m, &m->params[i]);
    return rc;
}

int lmk_model_loss(lmk_model *m, float *loss)
{
    return m->b->download(m->b, loss, m->scalars.data, sizeof *loss);
}

int64_t lmk_model_steps_taken(const lmk_model *m)
{
    int64_t t = 0;
    if (!m->step.data || m->b->download(m->b, &t, m->step.data, sizeof t) != LMK_OK)
        return 0;
    return t;
}

int64_t lmk_model_steps_skipped(const lmk_model *m)
{
    return m->skipped;
}

float lmk_model_loss_scale(const lmk_model *m)
{
    return m->loss_scale;
}

void lmk_model_keep_logits(lmk_model *m, int on)
{
    m->keep_logits = on != 0;
}

const lmk_tensor *lmk_model_logits(const lmk_model *m)
{
    return m->logits_valid ? &m->logits : NULL;
}

size_t lmk_model_tensor_count(const lmk_model *m)
{
    return m->nparams;
}

int lmk_model_tensor(lmk_model *m, size_t i, const char **name, lmk_tensor **param,
                     lmk_tensor **grad)
{
    if (i >= m->nparams)
        return LMK_INVALID;
    if (name)
        *name = m->params[i].name;
    if (param) {
        *param = &m->params[i].p;
        m->copies_stale = 1; /* the caller may write it: the next forward re-casts */
    }
    if (grad)
        *grad = &m->params[i].g;
    return LMK_OK;
}

int lmk_model_forward(lmk_model *m, int with_backward)
{
    RANGE_PUSH("forward");
    m->phase = "forward";
    m->logits_valid = 0;
    int rc = model_forward(m, with_backward);
    m->logits_valid = rc == LMK_OK && !with_backward && m->logits.data;
    RANGE_POP();
    return rc;
}

int lmk_model_backward(lmk_model *m)
{
    RANGE_PUSH("backward");
    m->phase = "backward";
    m->logits_valid = 0;
    int rc = model_backward(m);
    RANGE_POP();
    return rc;
}

int lmk_model_step(lmk_model *m, const lmk_adamw_config *cfg)
{
    RANGE_PUSH("optimizer");
    m->phase = "optimizer";
    int rc = model_step(m, cfg);
    RANGE_POP();
    return rc;
}
