/* What the model-running job kinds (benchmark, memory, later profile) share:
 * decoding a spec's sweep into points (model × context_length × batch_size ×
 * precision × mode), checking it, the run object's configuration fields,
 * the memory preflight, and the deterministic token batch.
 *
 * A point's fields: "model" (preset name or {"d_model","d_ff","num_layers",
 * "num_heads","name"?}), "context_length", "batch_size" (default 4),
 * "precision" (default fp32), "mode" (the kind's own names), "warmup_steps"
 * (a list only where the kind's schema allows one: the benchmark, to compare
 * statistics after 0, 1, 2, 5 warm-up steps in one job), and the scalars
 * "vocab_size" (default 10000), "attention" (default naive), "seed". */
#ifndef DAEMON_MODEL_POINT_H
#define DAEMON_MODEL_POINT_H

#include <jansson.h>
#include <stdint.h>

#include "../api/errors.h"
#include "model.h"
#include "runctx.h"

#define MODEL_POINT_MAX 256           /* points in one sweep */
#define MODEL_POINT_MEMORY_HEADROOM 0.9 /* a point may use this fraction of free memory */

/* The sweepable fields, outermost first. */
enum { MP_MODEL, MP_CONTEXT, MP_BATCH, MP_PRECISION, MP_MODE, MP_WARMUP, MP_FIELD_COUNT };
extern const char *const model_point_fields[MP_FIELD_COUNT];

typedef struct model_point {
    lmk_model_config cfg; /* context_length = T, vocab from the spec */
    int batch, T;
    lmk_precision prec;
    const char *mode;     /* borrowed from the spec; NULL when absent */
    int warmup_steps;     /* the point's warm-up steps; -1 when the spec has none (the kind's default) */
    const char *attention;
    uint64_t seed;
} model_point;

/* Checks the shared fields of spec (after its JSON Schema): the sweep size,
 * model presets and shapes, context and batch, precision, vocab_size,
 * attention and optimizer_in_backward (not with fp16, whose loss scaling
 * needs every gradient before any update). Returns 0, or -1 with err naming
 * the field. */
int model_point_check(const json_t *spec, api_error *err);
/* The number of points of the sweep. */
size_t model_point_count(const json_t *spec);
/* Decodes point idx (warm-up fastest, then mode). Returns 0 or -1 (an invalid spec). */
int model_point_at(const json_t *spec, size_t idx, model_point *p);
/* "small, context 128, batch 4, bf16, train_step" into buf. */
void model_point_describe(const model_point *p, char *buf, size_t len);

/* A new run object with the point's configuration and "status": "failed",
 * "error": null (the runner sets both when done). */
json_t *model_point_run_json(const model_point *p);
/* Marks run failed with a printf-style reason. */
void model_point_fail(json_t *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Free memory of the worker's device in bytes (CPU: MemAvailable). */
uint64_t model_point_available_bytes(const runctx_device *dev);
/* The spec's optimizer_in_backward on a point: only a train step
 * (training) has an optimizer to move. */
int model_point_opt_in_backward(const json_t *spec, int training);
/* Compares the analytic estimate of `steps` steps (lmk_model_memory_estimate_steps;
 * opt_in_backward: the optimizer inside backward) with the device's free
 * memory; sets "estimated_memory_bytes" on run and, when the point cannot
 * fit, fails the run with the estimate's parts and returns -1. */
int model_point_preflight(const model_point *p, int training, int steps, int opt_in_backward, const runctx_device *dev,
                          json_t *run);
struct lmk_backend;

/* Runs one point of a sweep on backend b: returns the run object (new; a
 * failed point is a run with "status": "failed"), or NULL to stop the whole
 * job with errbuf filled. Sets *cancelled when it noticed a cancel. */
typedef json_t *(*model_point_runner)(run_ctx *ctx, struct lmk_backend *b, const json_t *spec,
                                      const model_point *p, int *cancelled, char *errbuf, size_t errlen);

/* Walks the sweep of spec in order: the worker's backend, progress,
 * cancellation between points, each run emitted as soon as it is done, and
 * *result (new) = {"runs", "succeeded", "failed"}. Returns 0, LMK_CANCELLED,
 * or another lmk status with errbuf filled: LMK_INVALID with "no point
 * succeeded; first: …" when every point failed (the runs are emitted). */
int model_point_sweep(run_ctx *ctx, const json_t *spec, model_point_runner run_point, json_t **result,
                      char *errbuf, size_t errlen);

/* Fills inputs and targets (each batch·T) with tokens from the point's seed. */
void model_point_tokens(const model_point *p, int32_t *inputs, int32_t *targets);

#endif
