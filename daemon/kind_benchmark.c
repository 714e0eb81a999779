/* The benchmark job: per-step forward / backward / optimizer times of the
 * CS336 TransformerLM over a sweep of model × context_length × batch_size ×
 * precision × mode, one run per point, stored in benchmark_runs and
 * benchmark_samples (schema/0002_benchmark.sql).
 *
 * DESIGN: check() counts the sweep and validates shapes; run() walks the
 * points in order (model outermost, mode innermost), preflights each one's
 * memory estimate against the device, builds a fresh model and allocator per
 * point, times each phase with a synchronise after it, and emits the run as
 * soon as it is done. A point that cannot fit or fails is a failed run with
 * the reason; the sweep goes on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "backend.h"
#include "jobkind.h"
#include "device_peaks.h"
#include "model.h"
#include "model_point.h"
#include "status.h"

#define MIB (1024.0 * 1024.0)

typedef enum bench_mode { MODE_FORWARD, MODE_FORWARD_BACKWARD, MODE_TRAIN_STEP, MODE_COUNT } bench_mode;
static const char *const mode_names[MODE_COUNT] = {"forward", "forward_backward", "train_step"};

enum { PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_TOTAL, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"forward", "backward", "optimizer", "total"};

/* One point of the sweep: the shared model point and this kind's fields. */
typedef struct bench_point {
    model_point base;
    bench_mode mode;
    int warmup, measure, graphs;
} bench_point;

/* --- check ---------------------------------------------------------------------- */

static int parse_mode(const char *name, bench_mode *mode)
{
    for (int i = 0; name && i < MODE_COUNT; i++) {
        if (strcmp(name, mode_names[i]) == 0) {
            *mode = (bench_mode)i;
            return 0;
        }
    }
    return -1;
}

static int spec_int(const json_t *spec, const char *key, int dflt)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

/* The shared model/sweep fields (model_point.c), then this kind's own. */
static int benchmark_check(json_t *spec, api_error *err)
{
    if (model_point_check(spec, err))
        return -1;
    const json_t *modes = json_object_get(spec, "mode");
    for (size_t i = 0; i < (json_is_array(modes) ? json_array_size(modes) : 1); i++) {
        const json_t *v = json_is_array(modes) ? json_array_get(modes, i) : modes;
        bench_mode mo;
        if (v && parse_mode(json_string_value(v), &mo) != 0)
            return api_fail(err, API_ERR_INVALID_SPEC, "mode", "mode must be forward, forward_backward or train_step");
    }
    if (spec_int(spec, "measure_steps", 10) < 1)
        return api_fail(err, API_ERR_INVALID_SPEC, "measure_steps", "measure_steps must be at least 1");
    if (spec_int(spec, "warmup_steps", 5) < 0)
        return api_fail(err, API_ERR_INVALID_SPEC, "warmup_steps", "warmup_steps must be at least 0");
    return 0;
}

/* --- run ------------------------------------------------------------------------ */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* {"mean_ms", "std_ms" (sample), "median_ms", "min_ms", "max_ms"} over v (n ≥ 1). */
static json_t *stats_json(double *v, int n, double *mean_out)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    double mean = sum / n, ss = 0;
    for (int i = 0; i < n; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    double sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    if (mean_out)
        *mean_out = mean;
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", "mean_ms", mean, "std_ms", sd, "median_ms", median,
                     "min_ms", v[0], "max_ms", v[n - 1]);
}

/* Runs one point; returns the run object (new; failed runs carry the reason).
 * Sets *cancelled when the job was cancelled in the middle. */
static json_t *run_point(run_ctx *ctx, lmk_backend *b, const bench_point *p, int *cancelled)
{
    json_t *run = model_point_run_json(&p->base);
    json_object_set_new(run, "mode", json_string(mode_names[p->mode]));
    json_object_set_new(run, "warmup_steps", json_integer(p->warmup));
    json_object_set_new(run, "measure_steps", json_integer(p->measure));
    json_object_set_new(run, "graphs", json_boolean(p->graphs));
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    int32_t *tokens = NULL;
    double *times = NULL; /* (steps, PH_COUNT) */
    int training = p->mode != MODE_FORWARD, steps = p->warmup + p->measure;
    int holds = p->mode == MODE_FORWARD            ? LMK_MODEL_INFERENCE
                : p->mode == MODE_FORWARD_BACKWARD ? LMK_MODEL_GRADIENTS
                                                   : LMK_MODEL_TRAIN;
    size_t n = (size_t)p->base.batch * p->base.T;
    int rc;

    if (model_point_preflight(&p->base, holds, runctx_device_info(ctx), run))
        return run;
    tokens = malloc(2 * n * sizeof *tokens);
    times = calloc((size_t)steps * PH_COUNT, sizeof *times);
    if (!tokens || !times) {
        model_point_fail(run, "%s", "out of host memory");
        goto out;
    }
    model_point_tokens(&p->base, tokens, tokens + n);
    if ((rc = lmk_allocator_create(b, &a)) != LMK_OK ||
        (lmk_allocator_set_recording(a, 0), rc = lmk_model_create(b, a, &p->base.cfg, p->base.batch, p->base.T,
                                                                   p->base.prec, p->base.seed, holds, &m)) != LMK_OK ||
        (rc = lmk_model_set_batch(m, tokens, tokens + n)) != LMK_OK) {
        model_point_fail(run, "model set-up failed: %s", lmk_status_text(rc));
        goto out;
    }
    lmk_adamw_config opt = lmk_adamw_defaults();
    for (int st = 0; st < steps; st++) {
        if (runctx_cancelled(ctx)) {
            *cancelled = 1;
            goto out;
        }
        double *t = times + (size_t)st * PH_COUNT;
        double t0 = now_ms();
        rc = lmk_model_forward(m, training);
        if (rc == LMK_OK)
            rc = b->synchronize(b);
        double t1 = now_ms();
        if (rc == LMK_OK && training) {
            rc = lmk_model_backward(m);
            if (rc == LMK_OK)
                rc = b->synchronize(b);
        }
        double t2 = now_ms();
        if (rc == LMK_OK && p->mode == MODE_TRAIN_STEP) {
            rc = lmk_model_step(m, &opt);
            if (rc == LMK_OK)
                rc = b->synchronize(b);
        }
        double t3 = now_ms();
        if (rc != LMK_OK) {
            const char *name = "";
            uint64_t bytes = lmk_allocator_last_failure(a, &name);
            char detail[256];
            if (rc == LMK_NOMEM)
                snprintf(detail, sizeof detail, "out of memory allocating %.1f MiB for %s", bytes / MIB, name);
            else
                snprintf(detail, sizeof detail, "%s", lmk_status_text(rc));
            model_point_fail(run, "step %d: %s", st, detail);
            goto out;
        }
        t[PH_FORWARD] = t1 - t0;
        t[PH_BACKWARD] = t2 - t1;
        t[PH_OPTIMIZER] = t3 - t2;
        t[PH_TOTAL] = t3 - t0;
    }

    /* steps, statistics, throughput */
    int has[PH_COUNT] = {1, training, p->mode == MODE_TRAIN_STEP, 1};
    json_t *jsteps = json_array();
    for (int st = 0; st < steps; st++) {
        const double *t = times + (size_t)st * PH_COUNT;
        json_t *o = json_pack("{s:i, s:b}", "step", st, "warmup", st < p->warmup);
        for (int ph = 0; ph < PH_COUNT; ph++) {
            char key[32];
            snprintf(key, sizeof key, "%s_ms", phase_names[ph]);
            json_object_set_new(o, key, has[ph] ? json_real(t[ph]) : json_null());
        }
        json_array_append_new(jsteps, o);
    }
    json_object_set_new(run, "steps", jsteps);
    json_t *stats = json_object();
    double *v = malloc((size_t)p->measure * sizeof *v), total_mean = 0;
    for (int ph = 0; ph < PH_COUNT && v; ph++) {
        if (!has[ph]) {
            json_object_set_new(stats, phase_names[ph], json_null());
            continue;
        }
        for (int i = 0; i < p->measure; i++)
            v[i] = times[(size_t)(p->warmup + i) * PH_COUNT + ph];
        json_object_set_new(stats, phase_names[ph], stats_json(v, p->measure, ph == PH_TOTAL ? &total_mean : NULL));
    }
    free(v);
    json_object_set_new(run, "stats", stats);
    lmk_model_flops fl = lmk_model_flops_per_step(&p->base.cfg, p->base.batch, p->base.T);
    double flops = fl.forward + (training ? fl.backward : 0) + (p->mode == MODE_TRAIN_STEP ? fl.optimizer : 0);
    double secs = total_mean / 1e3;
    json_object_set_new(run, "tokens_per_s", secs > 0 ? json_real((double)n / secs) : json_null());
    json_object_set_new(run, "flops_per_step", json_real(flops));
    json_object_set_new(run, "achieved_tflops", secs > 0 ? json_real(flops / secs / 1e12) : json_null());
    const char *peak_source;
    double peak = device_peak_flops(runctx_device_info(ctx), p->base.prec, &peak_source);
    json_object_set_new(run, "mfu", peak > 0 && secs > 0 ? json_real(flops / secs / peak) : json_null());
    json_object_set_new(run, "peak_flops", peak > 0 ? json_real(peak) : json_null());
    json_object_set_new(run, "peak_source", json_string(peak_source));
    json_object_set_new(run, "peak_memory_bytes", json_integer((json_int_t)lmk_allocator_peak(a, -1)));
    json_object_set_new(run, "status", json_string("succeeded"));
    json_object_set_new(run, "error", json_null());
out:
    lmk_model_free(m);
    lmk_allocator_free(a);
    free(tokens);
    free(times);
    return run;
}

/* Decodes point index idx (mode fastest). */
static int make_point(const json_t *spec, size_t idx, bench_point *p)
{
    memset(p, 0, sizeof *p);
    if (model_point_at(spec, idx, &p->base))
        return -1;
    p->mode = MODE_TRAIN_STEP;
    if (p->base.mode && parse_mode(p->base.mode, &p->mode) != 0)
        return -1;
    p->warmup = spec_int(spec, "warmup_steps", 5);
    p->measure = spec_int(spec, "measure_steps", 10);
    p->graphs = json_is_true(json_object_get(spec, "graphs"));
    return 0;
}

static int benchmark_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    lmk_backend *b = NULL;
    int rc = runctx_backend(ctx, &b, errbuf, errlen);
    if (rc != 0)
        return -1;
    size_t points = model_point_count(spec);
    int succeeded = 0, failed = 0;
    for (size_t i = 0; i < points; i++) {
        if (runctx_cancelled(ctx))
            return LMK_CANCELLED;
        bench_point p;
        if (make_point(spec, i, &p) != 0) {
            snprintf(errbuf, errlen, "point %zu of the sweep is invalid", i);
            return -1;
        }
        char msg[160];
        model_point_describe(&p.base, msg, sizeof msg);
        runctx_progress(ctx, (double)i / points, msg);
        int cancelled = 0;
        json_t *run = run_point(ctx, b, &p, &cancelled);
        if (cancelled) {
            json_decref(run);
            return LMK_CANCELLED;
        }
        if (strcmp(json_string_value(json_object_get(run, "status")), "succeeded") == 0)
            succeeded++;
        else
            failed++;
        runctx_emit_run(ctx, run);
    }
    runctx_progress(ctx, 1.0, "done");
    *result = json_pack("{s:I, s:i, s:i}", "runs", (json_int_t)points, "succeeded", succeeded, "failed", failed);
    return 0;
}

/* --- storage ---------------------------------------------------------------------- */

/* benchmark_runs columns and where each comes from in the run object
 * ("stats.forward.mean_ms" walks objects). */
static const struct {
    const char *column;
    const char *path;
} run_columns[] = {
    {"status", "status"},
    {"error", "error"},
    {"model", "model"},
    {"d_model", "d_model"},
    {"d_ff", "d_ff"},
    {"num_layers", "num_layers"},
    {"num_heads", "num_heads"},
    {"context_length", "context_length"},
    {"batch_size", "batch_size"},
    {"vocab_size", "vocab_size"},
    {"precision", "precision"},
    {"mode", "mode"},
    {"attention", "attention"},
    {"graphs", "graphs"},
    {"warmup_steps", "warmup_steps"},
    {"measure_steps", "measure_steps"},
    {"seed", "seed"},
    {"parameters", "parameters"},
#define STAT_COLUMNS(ph)                                                                        \
    {#ph "_mean_ms", "stats." #ph ".mean_ms"}, {#ph "_std_ms", "stats." #ph ".std_ms"},         \
        {#ph "_median_ms", "stats." #ph ".median_ms"}, {#ph "_min_ms", "stats." #ph ".min_ms"}, \
        {#ph "_max_ms", "stats." #ph ".max_ms"}
    STAT_COLUMNS(forward),
    STAT_COLUMNS(backward),
    STAT_COLUMNS(optimizer),
    STAT_COLUMNS(total),
#undef STAT_COLUMNS
    {"tokens_per_s", "tokens_per_s"},
    {"flops_per_step", "flops_per_step"},
    {"achieved_tflops", "achieved_tflops"},
    {"mfu", "mfu"},
    {"peak_memory_bytes", "peak_memory_bytes"},
    {"estimated_memory_bytes", "estimated_memory_bytes"},
};
#define RUN_COLUMN_COUNT (sizeof run_columns / sizeof run_columns[0])

static const json_t *json_path(const json_t *obj, const char *path)
{
    char key[64];
    while (obj && *path) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        if (len >= sizeof key)
            return NULL;
        memcpy(key, path, len);
        key[len] = '\0';
        obj = json_object_get(obj, key);
        path += len + (dot ? 1 : 0);
    }
    return obj;
}

static void bind_json(sqlite3_stmt *st, int idx, const json_t *v)
{
    if (json_is_string(v))
        sqlite3_bind_text(st, idx, json_string_value(v), -1, SQLITE_TRANSIENT);
    else if (json_is_integer(v))
        sqlite3_bind_int64(st, idx, (sqlite3_int64)json_integer_value(v));
    else if (json_is_real(v))
        sqlite3_bind_double(st, idx, json_real_value(v));
    else if (json_is_boolean(v))
        sqlite3_bind_int(st, idx, json_is_true(v));
    else
        sqlite3_bind_null(st, idx);
}

static int benchmark_store_run(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec,
                               const json_t *run)
{
    (void)spec;
    char sql[4096];
    size_t len = (size_t)snprintf(sql, sizeof sql, "INSERT INTO benchmark_runs (run_id, job_id");
    for (size_t i = 0; i < RUN_COLUMN_COUNT; i++)
        len += (size_t)snprintf(sql + len, sizeof sql - len, ", %s", run_columns[i].column);
    len += (size_t)snprintf(sql + len, sizeof sql - len, ") VALUES (?, ?");
    for (size_t i = 0; i < RUN_COLUMN_COUNT; i++)
        len += (size_t)snprintf(sql + len, sizeof sql - len, ", ?");
    snprintf(sql + len, sizeof sql - len, ")");

    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, job_id);
    for (size_t i = 0; i < RUN_COLUMN_COUNT; i++)
        bind_json(st, (int)i + 3, json_path(run, run_columns[i].path));
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_OK)
        goto out;

    rc = sqlite3_prepare_v2(db, "INSERT INTO benchmark_samples (run_id, step, warmup, phase, ms) "
                                "VALUES (?, ?, ?, ?, ?)", -1, &st, NULL);
    size_t i;
    const json_t *step;
    json_array_foreach(json_object_get(run, "steps"), i, step)
    {
        for (int ph = 0; ph < PH_COUNT && rc == SQLITE_OK; ph++) {
            char key[32];
            snprintf(key, sizeof key, "%s_ms", phase_names[ph]);
            const json_t *ms = json_object_get(step, key);
            if (!json_is_number(ms))
                continue;
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 1, run_id);
            sqlite3_bind_int64(st, 2, (sqlite3_int64)json_integer_value(json_object_get(step, "step")));
            sqlite3_bind_int(st, 3, json_is_true(json_object_get(step, "warmup")));
            sqlite3_bind_text(st, 4, phase_names[ph], -1, SQLITE_STATIC);
            sqlite3_bind_double(st, 5, json_number_value(ms));
            rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        }
        if (rc != SQLITE_OK)
            break;
    }
out:
    sqlite3_finalize(st);
    return rc;
}

/* --- table ------------------------------------------------------------------------ */

static json_t *mean_std_cell(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return json_string("-");
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f ± %.2f", sqlite3_column_double(st, col), sqlite3_column_double(st, col + 1));
    return json_string(buf);
}

static int benchmark_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT model, context_length, batch_size, precision, mode, "
                           "forward_mean_ms, forward_std_ms, backward_mean_ms, backward_std_ms, "
                           "optimizer_mean_ms, optimizer_std_ms, tokens_per_s, achieved_tflops, "
                           "peak_memory_bytes, status, error "
                           "FROM benchmark_runs WHERE job_id = ? ORDER BY run_id",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "benchmark table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        char tps[32] = "-", tflops[32] = "-", mem[32] = "-", status[300];
        if (sqlite3_column_type(st, 11) != SQLITE_NULL)
            snprintf(tps, sizeof tps, "%.0f", sqlite3_column_double(st, 11));
        if (sqlite3_column_type(st, 12) != SQLITE_NULL)
            snprintf(tflops, sizeof tflops, "%.3f", sqlite3_column_double(st, 12));
        if (sqlite3_column_type(st, 13) != SQLITE_NULL)
            snprintf(mem, sizeof mem, "%.1f", sqlite3_column_int64(st, 13) / MIB);
        const char *s = (const char *)sqlite3_column_text(st, 14);
        const char *e = (const char *)sqlite3_column_text(st, 15);
        snprintf(status, sizeof status, "%s%s%s", s ? s : "", e ? ": " : "", e ? e : "");
        json_t *row = json_pack("[s, i, o, o, o, i, s, s, s, s, s, s]", sqlite3_column_text(st, 0),
                                sqlite3_column_int(st, 1), mean_std_cell(st, 5), mean_std_cell(st, 7),
                                mean_std_cell(st, 9), sqlite3_column_int(st, 2), sqlite3_column_text(st, 3),
                                sqlite3_column_text(st, 4), tps, tflops, mem, status);
        if (row)
            json_array_append_new(rows, row);
    }
    sqlite3_finalize(st);
    *table = json_pack("{s:[s,s,s,s,s,s,s,s,s,s,s,s], s:o}", "columns", "Model", "Context Length",
                       "Fwd Pass (ms)", "Bwd Pass (ms)", "Opt Step (ms)", "Batch", "Precision", "Mode",
                       "Tokens/s", "TFLOP/s", "Peak Memory (MiB)", "Status", "rows", rows);
    return 0;
}

const jobkind jobkind_benchmark = {
    .name = "benchmark",
    .check = benchmark_check,
    .run = benchmark_run,
    .store_run = benchmark_store_run,
    .table = benchmark_table,
};
