/* The CS336 TransformerLM (shared/MODEL.md), written once against the backend
 * interface: token embedding, pre-norm blocks (RMSNorm → causal MHA with RoPE
 * → residual; RMSNorm → SwiGLU → residual), final RMSNorm, untied LM head,
 * mean cross-entropy; AdamW in the CS336 form; optional global-norm clipping.
 *
 * DESIGN: parameters and optimizer state are allocated at create; each
 * gradient at its first write in backward, released by lmk_model_step
 * (PyTorch's lifetimes with optimizer.zero_grad(set_to_none=True): no
 * gradient exists during forward; a model that never steps keeps them and
 * zeroes them at each backward's first write). Activations are allocated by
 * forward (category activation, or temporary for short-lived buffers) and
 * released by backward as soon as it has consumed them, so the allocator's
 * live curve is the real one. Forward without backward (inference) keeps
 * nothing for backward and releases every tensor after its last reader.
 * Under CUDA graphs the gradients of a captured train step are allocated by
 * the backward graph and freed by the optimizer graph, as the activations
 * are by the forward and backward graphs (addresses are fixed per graph).
 * Parameter names follow cs336_basics' state dict
 * ("layers.3.attn.q_proj.weight").
 *
 * Attention: naive materialises the (B, H, T, T) probabilities (saved for
 * backward); flash (config.attention) runs the backend's fused attn_fwd /
 * attn_bwd and saves O and the float32 logsumexp (B, H, T) instead; under
 * bf16/fp16 its q, k, v, O are 16-bit tensors and the kernels run in that
 * format.
 *
 * Precision (autocast semantics): fp32 computes in float32; tf32 rounds GEMM
 * inputs to a 10-bit mantissa; bf16/fp16 keep float32 master weights,
 * gradients and optimizer state; each weight matrix (all but the embedding)
 * is cast once per step into a real 16-bit copy (category parameter_copy,
 * made at its first use in forward, read by forward and backward, freed at
 * the end of its layer's backward, or of its layer in inference). The
 * tensors autocast makes 16-bit are stored in 16 bits and written so by the
 * op that makes them: linear outputs (the GEMM writes 16-bit C), q, k, v
 * after RoPE, attention scores, probabilities and P·V, SwiGLU, the RMSNorm
 * outputs (read only by GEMMs), and in backward their gradients (dP, dS,
 * dq, dk, dv, ...). GEMMs multiply 16-bit inputs with float32 accumulation;
 * RMSNorm statistics, softmax, RoPE angles and SwiGLU are computed in float32
 * and rounded once on store. Float32: the residual stream (embedding output
 * and the adds, fused into the RMSNorms that follow them), its gradient
 * (written with its 16-bit copy for the two GEMMs that read it by the RMSNorm
 * backward it comes from), gradients that several GEMMs accumulate (of the
 * RMSNorm outputs), the logits (holding 16-bit values) and the loss, parameter
 * gradients and optimizer state. fp16 uses dynamic loss scaling (initial
 * 2^16, halved and the step skipped on overflow, doubled after 2000 good
 * steps).
 *
 * Steps and CUDA graphs: AdamW's step number is a device counter advanced
 * on the device (adamw_begin), so forward + backward + step captured once in
 * a graph and replayed gives the same results as eager steps. Except under
 * fp16 (whose loss scale is decided on the host: lmk_model_step downloads
 * the overflow verdict), lmk_model_step never synchronises.
 *
 * FLOPs: matmuls only (2·m·k·n each); attention counted on the full T×T
 * scores as the naive implementation computes them (4·B·T²·d per layer). */
#ifndef LMK_MODEL_H
#define LMK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "attention.h"
#include "backend.h"

typedef struct lmk_model_config {
    char name[128];      /* preset name or "custom"; UTF-8, up to 31 characters (the API's limit) */
    int vocab_size;      /* V */
    int context_length;  /* maximum T (RoPE table length) */
    int d_model;         /* d */
    int d_ff;
    int num_layers;      /* L */
    int num_heads;       /* H; d_head = d / H */
    float rope_theta;    /* 10000 */
    int attention;       /* LMK_ATTN_NAIVE (0: presets), LMK_ATTN_FLASH or LMK_ATTN_NAIVE_FUSED (attention.h) */
} lmk_model_config;

typedef enum lmk_precision {
    LMK_PREC_FP32 = 0,
    LMK_PREC_TF32,
    LMK_PREC_BF16,
    LMK_PREC_FP16,
    LMK_PREC_COUNT
} lmk_precision;

/* "fp32", "tf32", "bf16", "fp16". */
const char *lmk_precision_name(lmk_precision p);
/* Returns LMK_OK and sets *p, or LMK_INVALID. */
int lmk_precision_parse(const char *name, lmk_precision *p);

/* Presets (tiny, small, medium, large, xl, 2.7B), V = 10000, context 1024. */
size_t lmk_model_preset_count(void);
/* The i-th preset, borrowed; NULL past the end. */
const lmk_model_config *lmk_model_preset_at(size_t i);
/* Copies the preset of that name into *out. Returns LMK_OK or LMK_INVALID. */
int lmk_model_preset(const char *name, lmk_model_config *out);

/* Checks a shape. Returns LMK_OK, or LMK_INVALID with *field set to the
 * offending field's name ("d_model", "num_heads", ...; static). */
int lmk_model_config_check(const lmk_model_config *c, const char **field);

/* 2·V·d + L·(4d² + 3·d·d_ff + 2d) + d, without allocating. */
uint64_t lmk_model_param_count(const lmk_model_config *c);

typedef struct lmk_model_flops {
    double forward;   /* per step of B sequences of length T */
    double backward;  /* 2 × forward */
    double optimizer; /* ~ 10 per parameter (elementwise, not matmul) */
} lmk_model_flops;

lmk_model_flops lmk_model_flops_per_step(const lmk_model_config *c, int batch, int T);

typedef struct lmk_memory_estimate {
    uint64_t parameters, gradients, optimizer_state; /* bytes, whole sizes (float32) */
    uint64_t parameter_copies;  /* 16-bit weight copies live at the peak (bf16/fp16) */
    uint64_t gradients_at_peak; /* gradients live at the peak (they exist from backward on) */
    uint64_t activations;       /* activations and temporaries live at the peak */
    uint64_t inputs;            /* token batch, RoPE table, scalars */
    uint64_t total;             /* the peak: parameters + optimizer_state +
                                 * parameter_copies + gradients_at_peak + activations + inputs */
} lmk_memory_estimate;

/* What a model holds besides its parameters: the `training` argument of
 * lmk_model_create and lmk_model_memory_estimate. Any other non-zero value
 * means LMK_MODEL_TRAIN. */
enum {
    LMK_MODEL_INFERENCE = 0, /* forward only */
    LMK_MODEL_TRAIN = 1,     /* gradients and AdamW state */
    LMK_MODEL_GRADIENTS = 2, /* gradients only: forward + backward, no step */
};

/* Analytic estimate of the peak of the allocator's live total for one step
 * of a model of shape c (c->attention included) at precision prec
 * (training: forward + backward (+ the optimizer step unless
 * LMK_MODEL_GRADIENTS); inference: forward only): the allocation order of
 * forward and backward replayed from the shape, tensor by tensor, without
 * allocating. Backend scratch (GEMM input casts, cuBLAS workspace) is not
 * counted: it is not a tracked tensor. */
lmk_memory_estimate lmk_model_memory_estimate(const lmk_model_config *c, int batch, int T,
                                              lmk_precision prec, int training);
/* The peak over `steps` steps of the same model: as above, except that a
 * model with gradients but no optimizer (LMK_MODEL_GRADIENTS) keeps its
 * gradients from one backward into the next step (nothing releases them, as
 * in PyTorch without zero_grad), so from the second step on they are live
 * through the forward; and opt_in_backward (LMK_MODEL_TRAIN): the optimizer
 * in backward releases each group's gradients as soon as it is applied. */
lmk_memory_estimate lmk_model_memory_estimate_steps(const lmk_model_config *c, int batch, int T,
                                                    lmk_precision prec, int training, int steps, int opt_in_backward);

/* AdamW as CS336 writes it: m = β1 m + (1−β1) g; v = β2 v + (1−β2) g²;
 * α_t = lr·sqrt(1−β2^t)/(1−β1^t); p −= α_t·m/(sqrt(v) + eps); p −= lr·wd·p.
 * (torch.optim.AdamW adds eps to sqrt(v̂) after bias correction instead, and
 * decays before the update: results differ slightly.) Clipping scales the
 * gradients by min(1, max_grad_norm / (‖g‖ + 1e-6)), ‖g‖ the global L2 norm. */
typedef struct lmk_adamw_config {
    float lr, beta1, beta2, eps, weight_decay;
    float max_grad_norm; /* ≤ 0: no clipping */
} lmk_adamw_config;

/* lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, no clipping. */
lmk_adamw_config lmk_adamw_defaults(void);

typedef struct lmk_model lmk_model;

/* Creates a model for batches of (batch, T) tokens, T ≤ context_length,
 * initialised deterministically from seed. training: LMK_MODEL_INFERENCE,
 * LMK_MODEL_TRAIN (gradients and optimizer state) or LMK_MODEL_GRADIENTS. b and a are borrowed and must outlive the
 * model. Sets *out (new). Returns LMK_OK, LMK_INVALID or LMK_NOMEM. */
int lmk_model_create(lmk_backend *b, lmk_allocator *a, const lmk_model_config *c, int batch,
                     int T, lmk_precision prec, uint64_t seed, int training, lmk_model **out);
void lmk_model_free(lmk_model *m);

/* Uploads a batch: inputs and targets (batch·T) host token ids in [0, V). */
int lmk_model_set_batch(lmk_model *m, const int32_t *inputs, const int32_t *targets);
/* Forward and loss. with_backward keeps the activations for backward. */
int lmk_model_forward(lmk_model *m, int with_backward);
/* Backward into the gradients (allocated and zeroed at their first write).
 * Needs forward(m, 1). */
int lmk_model_backward(lmk_model *m);
/* Clipping (if configured), AdamW, loss-scale update, then the gradients
 * are released. Needs backward and a model created with LMK_MODEL_TRAIN
 * (else LMK_INVALID); with the optimizer in backward on, cfg must equal its
 * configuration (else LMK_INVALID). */
int lmk_model_step(lmk_model *m, const lmk_adamw_config *cfg);
/* The optimizer step inside backward (cfg non-NULL; NULL: off, the
 * default): each later backward runs AdamW (cfg) on every parameter as soon
 * as its gradient is complete (the LM head and final norm first, then each
 * layer as its backward ends) on the backend's optimizer lane, beside the
 * rest of the backward where the backend has one (cuda: a stream of its
 * own) and releases its gradients there (so the peak of a step whose
 * gradients outweigh its activations drops: lmk_model_memory_estimate_steps);
 * the backward's last work waits for the lane (in stream order, the host
 * does not wait), so whatever is issued after it, a timer's event included,
 * follows every update; lmk_model_step(m, cfg) then updates the token
 * embeddings and releases their gradient. Parameters, optimizer state and 16-bit
 * copies are bit for bit those of backward then step; lmk_model_tensor hands
 * out no gradient of an applied group; a forward before the step is refused
 * (LMK_INVALID: the parameters are half updated). A backward that fails
 * part-way may have updated some layers. LMK_INVALID when m has no AdamW state, cfg clips
 * (max_grad_norm > 0) or m is fp16 (its loss scaling): those need every
 * gradient before any update. */
int lmk_model_optimizer_in_backward(lmk_model *m, const lmk_adamw_config *cfg);
/* The loss of the last forward (downloads; synchronises). */
int lmk_model_loss(lmk_model *m, float *loss);
/* Number of optimizer steps taken (skipped steps not counted): the device
 * step counter, downloaded (synchronises); counts graph replays too. 0 when
 * the model has no optimizer state. */
int64_t lmk_model_steps_taken(const lmk_model *m);
/* fp16: steps skipped on overflow (gradients not finite) by eager
 * lmk_model_step calls; 0 for the other precisions. */
int64_t lmk_model_steps_skipped(const lmk_model *m);
/* The current loss scale (fp16 dynamic; 1 for the other precisions). */
float lmk_model_loss_scale(const lmk_model *m);
/* While on (default off), a forward without backward keeps its logits for
 * lmk_model_logits (a forward without backward otherwise frees every
 * activation, the logits included, once the loss is known). */
void lmk_model_keep_logits(lmk_model *m, int on);
/* The float32 (batch·T, vocab_size) logits of the last forward without
 * backward (lmk_model_forward(m, 0)) while lmk_model_keep_logits is on, on the model's backend (device memory
 * on cuda); under bf16/fp16 they hold the 16-bit lm_head output's values.
 * NULL when no such forward ran, or once a forward with backward or a
 * backward followed (the logits then hold their gradient or are freed). */
const lmk_tensor *lmk_model_logits(const lmk_model *m);

/* The precision report: while tracing is on, every backend op the model
 * calls is recorded with the formats it actually passed (one row per model
 * op and phase, layers merged; calls counted). Formats are value formats:
 * "float32", "tf32", "bfloat16", "float16" (a bfloat16 value may be stored
 * in a float32 tensor: the logits under autocast). */
typedef struct lmk_precision_row {
    char phase[12];      /* forward, backward, optimizer */
    char op[48];         /* "attn.q_proj (gemm)", "ln1 (rmsnorm)", ... */
    char inputs[48];     /* formats of the inputs, ", "-separated */
    char output[16];
    char accumulate[24]; /* "float32", "float32 (tf32 in)", "float64" (cpu reductions), "-" */
    char storage[64];    /* how 16-bit GEMM inputs/outputs are held, notes ("" under fp32/tf32) */
    int calls;           /* per traced step */
} lmk_precision_row;

/* Starts (clearing the rows) or stops tracing. */
void lmk_model_trace_precision(lmk_model *m, int on);
size_t lmk_model_precision_row_count(const lmk_model *m);
/* The i-th row (borrowed, valid until the next traced op), NULL past the end. */
const lmk_precision_row *lmk_model_precision_row_at(const lmk_model *m, size_t i);

/* Parameter tensors, in cs336_basics order, for tests and tools. */
size_t lmk_model_tensor_count(const lmk_model *m);
/* Borrowed views of the i-th parameter, its gradient (NULL data before the
 * first backward, after a step, or when not training) and its name.
 * Returns LMK_OK or LMK_INVALID. */
int lmk_model_tensor(lmk_model *m, size_t i, const char **name, lmk_tensor **param,
                     lmk_tensor **grad);

#endif
