/* Spec sweeps of the model-running kinds; see model_point.h. */
#include "model_point.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "device.h"
#include "errors.h"
#include "status.h"

#define MIB (1024.0 * 1024.0)

const char *const model_point_fields[MP_FIELD_COUNT] = {"model", "context_length", "batch_size", "precision",
                                                        "mode", "warmup_steps"};

static size_t field_len(const json_t *spec, const char *key)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_array(v) ? json_array_size(v) : 1;
}

/* The i-th value of a sweepable field (a scalar is a one-element list). */
static const json_t *field_at(const json_t *spec, const char *key, size_t i)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_array(v) ? json_array_get(v, i) : v;
}

static int spec_int(const json_t *spec, const char *key, int fallback)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_number(v) ? (int)json_number_value(v) : fallback;
}

/* Fills cfg from a model entry (preset name or shape object). Returns 0, or
 * -1 with *bad set to the offending sub-field ("" for the entry itself). */
static int model_from_json(const json_t *m, int vocab, int T, lmk_model_config *cfg, const char **bad)
{
    *bad = "";
    if (json_is_string(m)) {
        if (lmk_model_preset(json_string_value(m), cfg) != LMK_OK)
            return -1;
    } else if (json_is_object(m)) {
        const char *name = json_string_value(json_object_get(m, "name"));
        memset(cfg, 0, sizeof *cfg);
        snprintf(cfg->name, sizeof cfg->name, "%s", name ? name : "custom");
        utf8_repair(cfg->name); /* the schema bounds characters (31 fit), not bytes */
        cfg->d_model = (int)json_integer_value(json_object_get(m, "d_model"));
        cfg->d_ff = (int)json_integer_value(json_object_get(m, "d_ff"));
        cfg->num_layers = (int)json_integer_value(json_object_get(m, "num_layers"));
        cfg->num_heads = (int)json_integer_value(json_object_get(m, "num_heads"));
        cfg->rope_theta = 10000.0f;
    } else {
        return -1;
    }
    cfg->vocab_size = vocab;
    cfg->context_length = T;
    return lmk_model_config_check(cfg, bad) == LMK_OK ? 0 : -1;
}

/* "naive" / "flash" / "naive_fused" → LMK_ATTN_*. Returns 0, or -1 for
 * another name. */
static int attention_parse(const char *name, int *impl)
{
    if (strcmp(name, "naive") == 0)
        *impl = LMK_ATTN_NAIVE;
    else if (strcmp(name, "flash") == 0)
        *impl = LMK_ATTN_FLASH;
    else if (strcmp(name, "naive_fused") == 0)
        *impl = LMK_ATTN_NAIVE_FUSED;
    else
        return -1;
    return 0;
}

size_t model_point_count(const json_t *spec)
{
    size_t points = 1;
    for (int f = 0; f < MP_FIELD_COUNT; f++)
        points *= field_len(spec, model_point_fields[f]);
    return points;
}

static int check_model_entry(const json_t *spec, size_t i, int vocab, api_error *err)
{
    const json_t *m = field_at(spec, "model", i);
    lmk_model_config cfg;
    const char *bad;
    char field[128];
    if (json_is_array(json_object_get(spec, "model")))
        snprintf(field, sizeof field, "model[%zu]", i);
    else
        snprintf(field, sizeof field, "model");
    if (model_from_json(m, vocab, 1, &cfg, &bad) == 0)
        return 0;
    if (json_is_string(m)) {
        char names[128] = "";
        for (size_t p = 0; p < lmk_model_preset_count(); p++) {
            size_t len = strlen(names);
            snprintf(names + len, sizeof names - len, "%s%.31s", p ? ", " : "", lmk_model_preset_at(p)->name);
        }
        return api_fail(err, API_ERR_INVALID_SPEC, field, "unknown model preset \"%s\" (presets: %s)",
                        json_string_value(m), names);
    }
    size_t len = strlen(field);
    if (strcmp(bad, "num_heads") == 0) {
        snprintf(field + len, sizeof field - len, ".num_heads");
        return api_fail(err, API_ERR_INVALID_SPEC, field,
                        "num_heads (%d) must divide d_model (%d) into an even head dimension", cfg.num_heads,
                        cfg.d_model);
    }
    if (bad[0])
        snprintf(field + len, sizeof field - len, ".%s", bad);
    return api_fail(err, API_ERR_INVALID_SPEC, field, "invalid model shape: %s", bad[0] ? bad : "entry");
}

/* Entry i of a model list (checked) is refused when an earlier one is the
 * same model written otherwise ("small" and {"name": "small", ...small's
 * shape}): the two would be one point twice, alike in every table and view
 * (which tell runs apart by the model's name and shape). Returns 0, or -1
 * with err naming "model[i]". */
static int check_model_repeat(const json_t *spec, size_t i, int vocab, api_error *err)
{
    lmk_model_config cfg, earlier;
    const char *bad;
    if (!json_is_array(json_object_get(spec, "model")) ||
        model_from_json(field_at(spec, "model", i), vocab, 1, &cfg, &bad))
        return 0;
    for (size_t k = 0; k < i; k++) {
        if (model_from_json(field_at(spec, "model", k), vocab, 1, &earlier, &bad) == 0 &&
            strcmp(cfg.name, earlier.name) == 0 && cfg.d_model == earlier.d_model && cfg.d_ff == earlier.d_ff &&
            cfg.num_layers == earlier.num_layers && cfg.num_heads == earlier.num_heads) {
            char field[32];
            snprintf(field, sizeof field, "model[%zu]", i);
            return api_fail(err, API_ERR_INVALID_SPEC, field,
                            "%s is model[%zu] again (%s: d_model %d, d_ff %d, %d layers, %d heads); list each "
                            "model once, or give this one another name",
                            field, k, cfg.name, cfg.d_model, cfg.d_ff, cfg.num_layers, cfg.num_heads);
        }
    }
    return 0;
}

/* optimizer_in_backward is refused when the sweep's precisions include
 * fp16, whose loss scaling needs every gradient before any update, and when
 * no point of the sweep is a train step (it applies to those only: other
 * modes of a sweep that has one run as usual). */
static int check_opt_in_backward(const json_t *spec, api_error *err)
{
    if (!json_is_true(json_object_get(spec, "optimizer_in_backward")))
        return 0;
    const json_t *modes = json_object_get(spec, "mode");
    int train_steps = !modes; /* absent: the kind's default, a train step */
    for (size_t i = 0; i < field_len(spec, "mode"); i++) {
        const char *name = json_string_value(field_at(spec, "mode", i));
        train_steps += name && strcmp(name, "train_step") == 0;
    }
    if (!train_steps)
        return api_fail(err, API_ERR_INVALID_SPEC, "optimizer_in_backward",
                        "optimizer_in_backward applies to train steps only, and no point of this sweep is one: "
                        "add \"train_step\" to mode, or leave optimizer_in_backward out");
    const json_t *precs = json_object_get(spec, "precision");
    for (size_t i = 0; i < (json_is_array(precs) ? json_array_size(precs) : 1); i++) {
        const char *name = json_string_value(json_is_array(precs) ? json_array_get(precs, i) : precs);
        if (name && strcmp(name, "fp16") == 0)
            return api_fail(err, API_ERR_INVALID_SPEC, "optimizer_in_backward",
                            "optimizer_in_backward cannot be used with precision fp16: its dynamic loss scaling "
                            "needs every gradient before any parameter is updated");
    }
    return 0;
}

int model_point_check(const json_t *spec, api_error *err)
{
    double points = 1;
    const char *largest = model_point_fields[0];
    size_t largest_n = 0;
    for (int f = 0; f < MP_FIELD_COUNT; f++) {
        size_t n = field_len(spec, model_point_fields[f]);
        points *= (double)n;
        if (n > largest_n) {
            largest_n = n;
            largest = model_point_fields[f];
        }
    }
    if (points > MODEL_POINT_MAX)
        return api_fail(err, API_ERR_INVALID_SPEC, largest,
                        "the sweep has %.0f points (model × context_length × batch_size × precision × mode × "
                        "warmup_steps); "
                        "the limit is %d",
                        points, MODEL_POINT_MAX);
    int vocab = spec_int(spec, "vocab_size", 10000);
    if (vocab < 2)
        return api_fail(err, API_ERR_INVALID_SPEC, "vocab_size", "vocab_size must be at least 2");
    if (!json_object_get(spec, "model"))
        return api_fail(err, API_ERR_INVALID_SPEC, "model", "model is required");
    for (size_t i = 0; i < field_len(spec, "model"); i++)
        if (check_model_entry(spec, i, vocab, err) || check_model_repeat(spec, i, vocab, err))
            return -1;
    if (!json_object_get(spec, "context_length"))
        return api_fail(err, API_ERR_INVALID_SPEC, "context_length", "context_length is required");
    for (int f = MP_CONTEXT; f <= MP_BATCH; f++) {
        for (size_t i = 0; i < field_len(spec, model_point_fields[f]); i++) {
            const json_t *v = field_at(spec, model_point_fields[f], i);
            if (v && (!json_is_integer(v) || json_integer_value(v) < 1))
                return api_fail(err, API_ERR_INVALID_SPEC, model_point_fields[f], "%s must be a positive integer",
                                model_point_fields[f]);
        }
    }
    for (size_t i = 0; i < field_len(spec, "precision"); i++) {
        const json_t *v = field_at(spec, "precision", i);
        lmk_precision p;
        if (v && (!json_is_string(v) || lmk_precision_parse(json_string_value(v), &p) != LMK_OK))
            return api_fail(err, API_ERR_INVALID_SPEC, "precision", "precision must be fp32, tf32, bf16 or fp16");
    }
    const char *attention = json_string_value(json_object_get(spec, "attention"));
    int impl = LMK_ATTN_NAIVE;
    if (attention && attention_parse(attention, &impl))
        return api_fail(err, API_ERR_INVALID_SPEC, "attention", "attention \"%s\" is not implemented (naive, flash, naive_fused)",
                        attention);
    for (size_t i = 0; attention && impl == LMK_ATTN_FLASH && i < field_len(spec, "model"); i++) {
        lmk_model_config cfg;
        const char *bad;
        if (model_from_json(field_at(spec, "model", i), vocab, 1, &cfg, &bad) == 0 &&
            !lmk_attn_head_dim_supported(cfg.d_model / cfg.num_heads)) {
            char dims[64] = "";
#define XX(D) snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%d", dims[0] ? ", " : "", D);
            LMK_ATTN_HEAD_DIMS(XX)
#undef XX
            return api_fail(err, API_ERR_INVALID_SPEC, "attention",
                            "attention \"flash\" supports head dimensions %s; model %s has %d (d_model %d / "
                            "num_heads %d): use attention \"naive\"",
                            dims, cfg.name, cfg.d_model / cfg.num_heads, cfg.d_model, cfg.num_heads);
        }
    }
    return check_opt_in_backward(spec, err);
}

int model_point_at(const json_t *spec, size_t idx, model_point *p)
{
    size_t at[MP_FIELD_COUNT];
    for (int f = MP_FIELD_COUNT - 1; f >= 0; f--) {
        size_t n = field_len(spec, model_point_fields[f]);
        at[f] = idx % n;
        idx /= n;
    }
    memset(p, 0, sizeof *p);
    const json_t *batch = field_at(spec, "batch_size", at[MP_BATCH]);
    const char *prec = json_string_value(field_at(spec, "precision", at[MP_PRECISION]));
    const char *attention = json_string_value(json_object_get(spec, "attention"));
    p->T = (int)json_integer_value(field_at(spec, "context_length", at[MP_CONTEXT]));
    p->batch = batch ? (int)json_integer_value(batch) : 4;
    p->prec = LMK_PREC_FP32;
    if (prec && lmk_precision_parse(prec, &p->prec) != LMK_OK)
        return -1;
    p->mode = json_string_value(field_at(spec, "mode", at[MP_MODE]));
    const json_t *warmup = field_at(spec, "warmup_steps", at[MP_WARMUP]);
    p->warmup_steps = json_is_integer(warmup) ? (int)json_integer_value(warmup) : -1;
    p->attention = attention ? attention : "naive";
    const json_t *seed = json_object_get(spec, "seed");
    p->seed = json_is_integer(seed) ? (uint64_t)json_integer_value(seed) : 0;
    const char *bad;
    int impl = LMK_ATTN_NAIVE;
    if (attention_parse(p->attention, &impl) ||
        model_from_json(field_at(spec, "model", at[MP_MODEL]), spec_int(spec, "vocab_size", 10000), p->T, &p->cfg,
                        &bad))
        return -1;
    p->cfg.attention = impl;
    return lmk_model_config_check(&p->cfg, &bad) == LMK_OK ? 0 : -1;
}

void model_point_describe(const model_point *p, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s, context %d, batch %d, %s%s%s", p->cfg.name, p->T, p->batch,
                     lmk_precision_name(p->prec), p->mode ? ", " : "", p->mode ? p->mode : "");
    if (p->warmup_steps >= 0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", %d warm-up", p->warmup_steps);
    utf8_repair(buf); /* a long name may be cut inside a character */
}

json_t *model_point_run_json(const model_point *p)
{
    return json_pack("{s:s, s:n, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s?, s:s, s:I, s:I}", "status",
                     "failed", "error", "model", p->cfg.name, "d_model", p->cfg.d_model, "d_ff", p->cfg.d_ff,
                     "num_layers", p->cfg.num_layers, "num_heads", p->cfg.num_heads, "context_length", p->T,
                     "batch_size", p->batch, "vocab_size", p->cfg.vocab_size, "precision",
                     lmk_precision_name(p->prec), "mode", p->mode, "attention", p->attention, "seed",
                     (json_int_t)p->seed, "parameters", (json_int_t)lmk_model_param_count(&p->cfg));
}

void model_point_fail(json_t *run, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    utf8_repair(msg);
    json_object_set_new(run, "status", json_string("failed"));
    json_object_set_new(run, "error", json_string(msg));
}

uint64_t model_point_available_bytes(const runctx_device *dev)
{
    if (dev->gpu_index >= 0)
        return dev->free_bytes;
    uint64_t avail = device_cpu_available_bytes();
    return avail ? avail : dev->free_bytes;
}

int model_point_opt_in_backward(const json_t *spec, int training)
{
    return training && json_is_true(json_object_get(spec, "optimizer_in_backward"));
}

int model_point_preflight(const model_point *p, int training, int steps, int opt_in_backward, const runctx_device *dev,
                          json_t *run)
{
    lmk_memory_estimate est =
        lmk_model_memory_estimate_steps(&p->cfg, p->batch, p->T, p->prec, training, steps, opt_in_backward);
    json_object_set_new(run, "estimated_memory_bytes", json_integer((json_int_t)est.total));
    uint64_t avail = model_point_available_bytes(dev);
    if ((double)est.total <= MODEL_POINT_MEMORY_HEADROOM * (double)avail)
        return 0;
    model_point_fail(run,
                     "does not fit: estimated memory %.1f MiB (parameters %.1f, gradients %.1f, optimizer state "
                     "%.1f, 16-bit weight copies %.1f, activations %.1f at the peak) but only %.1f MiB available",
                     est.total / MIB, est.parameters / MIB, est.gradients_at_peak / MIB, est.optimizer_state / MIB,
                     est.parameter_copies / MIB, est.activations / MIB, avail / MIB);
    return -1;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void model_point_tokens(const model_point *p, int32_t *inputs, int32_t *targets)
{
    size_t n = (size_t)p->batch * p->T;
    uint64_t s = p->seed ^ 0x6a09e667f3bcc908ull;
    for (size_t i = 0; i < n; i++)
        inputs[i] = (int32_t)(splitmix64(&s) % (uint64_t)p->cfg.vocab_size);
    for (size_t i = 0; i < n; i++)
        targets[i] = (int32_t)(splitmix64(&s) % (uint64_t)p->cfg.vocab_size);
}

int model_point_sweep(run_ctx *ctx, const json_t *spec, model_point_runner run_point, json_t **result,
                      char *errbuf, size_t errlen)
{
    lmk_backend *b = NULL;
    int rc = runctx_backend(ctx, &b, errbuf, errlen);
    if (rc != LMK_OK)
        return rc;
    size_t points = model_point_count(spec);
    size_t succeeded = 0;
    char first_error[320] = "";
    for (size_t i = 0; i < points; i++) {
        model_point p;
        if (runctx_cancelled(ctx))
            return LMK_CANCELLED;
        if (model_point_at(spec, i, &p)) {
            snprintf(errbuf, errlen, "point %zu of the sweep is invalid", i);
            return LMK_INVALID;
        }
        char what[160];
        model_point_describe(&p, what, sizeof what);
        runctx_progress(ctx, (double)i / (double)points, what);
        int cancelled = 0;
        json_t *run = run_point(ctx, b, spec, &p, &cancelled, errbuf, errlen);
        if (!run) { /* not the device's fault: the job fails, the worker carries on */
            if (errlen && !errbuf[0])
                snprintf(errbuf, errlen, "point %zu (%s): its run record could not be built", i, what);
            return LMK_INVALID;
        }
        if (cancelled) {
            json_decref(run);
            return LMK_CANCELLED;
        }
        succeeded += (size_t)runctx_tally(run, what, first_error, sizeof first_error);
        runctx_emit_run(ctx, run);
    }
    runctx_progress(ctx, 1.0, "done");
    int verdict = runctx_sweep_verdict(points, succeeded, first_error, errbuf, errlen);
    if (verdict != LMK_OK)
        return verdict;
    *result = json_pack("{s:I, s:I, s:I}", "runs", (json_int_t)points, "succeeded", (json_int_t)succeeded,
                        "failed", (json_int_t)(points - succeeded));
    return LMK_OK;
}
