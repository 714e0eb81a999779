/* The memory job: every allocation and free of the engine while the model
 * runs inference or train steps, analysed into peaks per phase, the category
 * breakdown at the peak, the largest allocations and a timeline, next to the
 * analytic estimate (schema/0004_memory.sql).
 *
 * DESIGN: one fresh allocator and model per point with event recording on
 * from the first parameter; phases are ranges of the event log marked by the
 * runner (init = model creation and the batch upload; then forward, backward,
 * optimizer per step). The analysis is memory_report.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobkind.h"
#include "memory_report.h"
#include "model_point.h"
#include "status.h"

#define MIB (1024.0 * 1024.0)
#define MEMORY_MAX_PHASES (1 + 3 * 20) /* init + 3 per step, steps ≤ 20 (schema) */

static const char *const bulky_fields[] = {"events", NULL};

static int memory_check(json_t *spec, api_error *err)
{
    return model_point_check(spec, err);
}

static int spec_int(const json_t *spec, const char *key, int fallback)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_number(v) ? (int)json_number_value(v) : fallback;
}

/* Marks the end of the current phase and the start of the next. */
static void phase_mark(memory_phase *phases, size_t *count, const lmk_allocator *a, const char *name, int step)
{
    size_t now = lmk_allocator_event_count(a);
    if (*count > 0)
        phases[*count - 1].end_event = now;
    if (name && *count < MEMORY_MAX_PHASES)
        phases[(*count)++] = (memory_phase){.name = name, .step = step, .first_event = now, .end_event = now};
}

/* The measured parts beside the estimate, with the differences explained. */
static void add_estimate(json_t *run, const model_point *p, const lmk_allocator *a, int training,
                         const json_t *breakdown)
{
    lmk_memory_estimate est = lmk_model_memory_estimate(&p->cfg, p->batch, p->T, training);
    uint64_t activations = (uint64_t)json_integer_value(json_object_get(breakdown, "activation")) +
                           (uint64_t)json_integer_value(json_object_get(breakdown, "temporary"));
    json_t *measured = json_pack("{s:I, s:I, s:I, s:I, s:I}", "parameters",
                                 (json_int_t)lmk_allocator_live(a, LMK_MEM_PARAMETER), "gradients",
                                 (json_int_t)lmk_allocator_live(a, LMK_MEM_GRADIENT), "optimizer_state",
                                 (json_int_t)lmk_allocator_live(a, LMK_MEM_OPTIMIZER_STATE), "activations_at_peak",
                                 (json_int_t)activations, "total_peak", (json_int_t)lmk_allocator_peak(a, -1));
    json_t *estimate = json_pack("{s:I, s:I, s:I, s:I, s:I}", "parameters", (json_int_t)est.parameters, "gradients",
                                 (json_int_t)est.gradients, "optimizer_state", (json_int_t)est.optimizer_state,
                                 "activations", (json_int_t)est.activations, "total", (json_int_t)est.total);
    char notes[512];
    double diff = (double)lmk_allocator_peak(a, -1) - (double)est.total;
    snprintf(notes, sizeof notes,
             "parameters, gradients and optimizer state are exact sizes (4 bytes per float32 element); the "
             "activation estimate counts what the model keeps for backward plus the largest transient "
             "buffers, the measurement is what was live at the peak (activation + temporary). The peak "
             "differs from the estimate by %+.2f MiB (%+.1f%%): inputs, the loss scalar and buffers of the "
             "phase that peaked (%s) that the formula does not model one by one.",
             diff / MIB, est.total ? 100.0 * diff / (double)est.total : 0.0,
             json_string_value(json_object_get(run, "peak_phase")) ?: "none");
    json_object_set_new(run, "measured", measured);
    json_object_set_new(run, "estimate", estimate);
    json_object_set_new(run, "estimate_notes", json_string(notes));
}

/* Runs one point; returns the run object (new). */
static json_t *run_point(run_ctx *ctx, lmk_backend *b, const json_t *spec, const model_point *p, int *cancelled)
{
    json_t *run = model_point_run_json(p);
    int training = p->mode && strcmp(p->mode, "train_step") == 0;
    int steps = spec_int(spec, "steps", 2);
    json_object_set_new(run, "steps", json_integer(steps));
    json_object_set_new(run, "residual_stream_bytes",
                        json_integer((json_int_t)p->batch * p->T * p->cfg.d_model * (json_int_t)sizeof(float)));
    if (model_point_preflight(p, training, runctx_device_info(ctx), run))
        return run;

    size_t n = (size_t)p->batch * p->T;
    int32_t *tokens = malloc(2 * n * sizeof *tokens);
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    memory_phase phases[MEMORY_MAX_PHASES];
    size_t phase_count = 0;
    int rc = LMK_NOMEM;
    if (!tokens || lmk_allocator_create(b, &a) != LMK_OK) {
        model_point_fail(run, "out of host memory");
        goto out;
    }
    model_point_tokens(p, tokens, tokens + n);
    phase_mark(phases, &phase_count, a, "init", -1);
    if ((rc = lmk_model_create(b, a, &p->cfg, p->batch, p->T, p->prec, p->seed, training, &m)) != LMK_OK ||
        (rc = lmk_model_set_batch(m, tokens, tokens + n)) != LMK_OK)
        goto failed;
    lmk_adamw_config opt = lmk_adamw_defaults();
    for (int st = 0; st < steps; st++) {
        if (runctx_cancelled(ctx)) {
            *cancelled = 1;
            goto out;
        }
        phase_mark(phases, &phase_count, a, "forward", st);
        if ((rc = lmk_model_forward(m, training)) != LMK_OK || (rc = b->synchronize(b)) != LMK_OK)
            goto failed;
        if (!training)
            continue;
        phase_mark(phases, &phase_count, a, "backward", st);
        if ((rc = lmk_model_backward(m)) != LMK_OK || (rc = b->synchronize(b)) != LMK_OK)
            goto failed;
        phase_mark(phases, &phase_count, a, "optimizer", st);
        if ((rc = lmk_model_step(m, &opt)) != LMK_OK || (rc = b->synchronize(b)) != LMK_OK)
            goto failed;
    }
    phase_mark(phases, &phase_count, a, NULL, 0);

    json_t *report = memory_report(a, phases, phase_count, (size_t)spec_int(spec, "timeline_points", 2000),
                                   json_is_true(json_object_get(spec, "record_events")));
    json_object_update(run, report);
    json_decref(report);
    json_object_set_new(run, "reserved_peak_bytes", json_null()); /* no pool on the CPU backend */
    add_estimate(run, p, a, training, json_object_get(run, "breakdown_at_peak"));
    json_object_set_new(run, "status", json_string("succeeded"));
    json_object_set_new(run, "error", json_null());
    goto out;
failed:
    if (rc == LMK_NOMEM) {
        const char *name = "";
        uint64_t bytes = lmk_allocator_last_failure(a, &name);
        model_point_fail(run, "out of memory allocating %.1f MiB for %s (%.1f MiB live)", bytes / MIB, name,
                         lmk_allocator_live(a, -1) / MIB);
    } else {
        model_point_fail(run, "%s", lmk_status_text(rc));
    }
out:
    lmk_model_free(m);
    lmk_allocator_free(a);
    free(tokens);
    return run;
}

static int memory_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    lmk_backend *b = NULL;
    int rc = runctx_backend(ctx, &b, errbuf, errlen);
    if (rc != LMK_OK)
        return rc;
    size_t points = model_point_count(spec);
    int succeeded = 0;
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
        json_t *run = run_point(ctx, b, spec, &p, &cancelled);
        if (cancelled) {
            json_decref(run);
            return LMK_CANCELLED;
        }
        succeeded += strcmp(json_string_value(json_object_get(run, "status")), "succeeded") == 0;
        runctx_emit_run(ctx, run);
    }
    runctx_progress(ctx, 1.0, "done");
    *result = json_pack("{s:I, s:i, s:I}", "runs", (json_int_t)points, "succeeded", succeeded, "failed",
                        (json_int_t)(points - (size_t)succeeded));
    return LMK_OK;
}

/* --- storage ---------------------------------------------------------------------- */

static json_int_t jint(const json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

static void bind_int_or_null(sqlite3_stmt *st, int i, const json_t *v)
{
    if (json_is_integer(v))
        sqlite3_bind_int64(st, i, json_integer_value(v));
    else
        sqlite3_bind_null(st, i);
}

static int store_events(sqlite3 *db, int64_t run_id, const json_t *events)
{
    const json_t *names = json_object_get(events, "names");
    const json_t *phases = json_object_get(events, "phases");
    const json_t *categories = json_object_get(events, "categories");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO memory_events (run_id, seq, t_ms, action, bytes, category, name, phase, "
                                "step) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                -1, &st, NULL);
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(events, "rows"), i, row)
    {
        if (rc != SQLITE_OK)
            break;
        /* row: [t_ms, action, bytes, category, name_id, phase_index] */
        const json_t *phase = json_array_get(phases, (size_t)json_integer_value(json_array_get(row, 5)));
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
        sqlite3_bind_double(st, 3, json_number_value(json_array_get(row, 0)));
        sqlite3_bind_text(st, 4, json_integer_value(json_array_get(row, 1)) ? "free" : "alloc", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, json_integer_value(json_array_get(row, 2)));
        sqlite3_bind_text(st, 6,
                          json_string_value(json_array_get(categories, (size_t)json_integer_value(json_array_get(row, 3)))),
                          -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 7, json_string_value(json_array_get(names, (size_t)json_integer_value(json_array_get(row, 4)))),
                          -1, SQLITE_TRANSIENT);
        if (phase) {
            sqlite3_bind_text(st, 8, json_string_value(json_object_get(phase, "name")), -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(st, 9, jint(phase, "step"));
        } else {
            sqlite3_bind_null(st, 8);
            sqlite3_bind_null(st, 9);
        }
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    return rc;
}

static int memory_store_run(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec, const json_t *run)
{
    (void)spec;
    const json_t *by_phase = json_object_get(run, "peak_by_phase");
    const json_t *measured = json_object_get(run, "measured");
    const json_t *estimate = json_object_get(run, "estimate");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db,
        "INSERT INTO memory_runs (run_id, job_id, model, d_model, num_layers, num_heads, context_length, batch_size, "
        "vocab_size, precision, mode, steps, parameters, peak_allocated_bytes, peak_phase, peak_init_bytes, "
        "peak_forward_bytes, peak_backward_bytes, peak_optimizer_bytes, parameter_bytes, gradient_bytes, "
        "optimizer_state_bytes, activation_bytes_at_peak, residual_stream_bytes, estimated_total_bytes, "
        "estimated_activation_bytes, reserved_peak_bytes, event_count) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, job_id);
    sqlite3_bind_text(st, 3, json_string_value(json_object_get(run, "model")), -1, SQLITE_TRANSIENT);
    static const char *const ints[] = {"d_model", "num_layers", "num_heads", "context_length", "batch_size",
                                       "vocab_size"};
    for (int i = 0; i < 6; i++)
        sqlite3_bind_int64(st, 4 + i, jint(run, ints[i]));
    sqlite3_bind_text(st, 10, json_string_value(json_object_get(run, "precision")), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 11, json_string_value(json_object_get(run, "mode")), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 12, jint(run, "steps"));
    sqlite3_bind_int64(st, 13, jint(run, "parameters"));
    sqlite3_bind_int64(st, 14, jint(run, "peak_allocated_bytes"));
    const char *peak_phase = json_string_value(json_object_get(run, "peak_phase"));
    if (peak_phase)
        sqlite3_bind_text(st, 15, peak_phase, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 15);
    static const char *const phases[] = {"init", "forward", "backward", "optimizer"};
    for (int i = 0; i < 4; i++)
        bind_int_or_null(st, 16 + i, json_object_get(by_phase, phases[i]));
    sqlite3_bind_int64(st, 20, jint(measured, "parameters"));
    sqlite3_bind_int64(st, 21, jint(measured, "gradients"));
    sqlite3_bind_int64(st, 22, jint(measured, "optimizer_state"));
    sqlite3_bind_int64(st, 23, jint(measured, "activations_at_peak"));
    sqlite3_bind_int64(st, 24, jint(run, "residual_stream_bytes"));
    sqlite3_bind_int64(st, 25, jint(estimate, "total"));
    sqlite3_bind_int64(st, 26, jint(estimate, "activations"));
    bind_int_or_null(st, 27, json_object_get(run, "reserved_peak_bytes"));
    sqlite3_bind_int64(st, 28, jint(run, "event_count"));
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return rc;

    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO memory_allocations (run_id, rank, name, category, bytes, phase, step) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)",
                            -1, &st, NULL);
    size_t i;
    const json_t *alloc;
    json_array_foreach(json_object_get(run, "largest_allocations"), i, alloc)
    {
        if (rc != SQLITE_OK)
            break;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)i + 1);
        sqlite3_bind_text(st, 3, json_string_value(json_object_get(alloc, "name")), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 4, json_string_value(json_object_get(alloc, "category")), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 5, jint(alloc, "bytes"));
        sqlite3_bind_text(st, 6, json_string_value(json_object_get(alloc, "phase")), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 7, jint(alloc, "step"));
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && json_object_get(run, "events"))
        rc = store_events(db, run_id, json_object_get(run, "events"));
    return rc;
}

static int memory_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT model, batch_size, context_length, precision, inference_peak_mib, "
                           "train_step_peak_mib, residual_stream_mib FROM memory_summary WHERE job_id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "memory table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *row = json_pack("[s, i, i, s]", sqlite3_column_text(st, 0), sqlite3_column_int(st, 1),
                                sqlite3_column_int(st, 2), sqlite3_column_text(st, 3));
        for (int c = 4; c <= 6; c++)
            json_array_append_new(row, sqlite3_column_type(st, c) == SQLITE_NULL ? json_null()
                                                                                : json_real(sqlite3_column_double(st, c)));
        json_array_append_new(rows, row);
    }
    sqlite3_finalize(st);
    *table = json_pack("{s:[s,s,s,s,s,s,s], s:o}", "columns", "model", "batch", "context", "precision",
                       "inference peak (MiB)", "train step peak (MiB)", "residual stream (MiB)", "rows", rows);
    return 0;
}

static int memory_events(sqlite3 *db, int64_t job_id, int run_index, json_t **out, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT e.t_ms, e.action, e.bytes, e.category, e.name, e.phase, e.step "
                           "FROM memory_events e JOIN runs r ON r.id = e.run_id "
                           "WHERE r.job_id = ? AND r.run_index = ? ORDER BY e.seq",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "memory events: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int(st, 2, run_index);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(rows, json_pack("[f, s, I, s, s, s?, O]", sqlite3_column_double(st, 0),
                                              sqlite3_column_text(st, 1), (json_int_t)sqlite3_column_int64(st, 2),
                                              sqlite3_column_text(st, 3), sqlite3_column_text(st, 4),
                                              sqlite3_column_text(st, 5),
                                              sqlite3_column_type(st, 6) == SQLITE_NULL
                                                  ? json_null()
                                                  : json_integer(sqlite3_column_int64(st, 6))));
    sqlite3_finalize(st);
    if (json_array_size(rows) == 0) {
        json_decref(rows);
        return api_fail(err, API_ERR_NOT_FOUND, "run", "job %lld has no recorded events for run %d",
                        (long long)job_id, run_index);
    }
    *out = json_pack("{s:I, s:i, s:[s,s,s,s,s,s,s], s:o}", "job_id", (json_int_t)job_id, "run", run_index, "columns",
                     "t_ms", "action", "bytes", "category", "name", "phase", "step", "rows", rows);
    return 0;
}

const jobkind jobkind_memory = {
    .name = "memory",
    .check = memory_check,
    .run = memory_run,
    .store_run = memory_store_run,
    .table = memory_table,
    .bulky_fields = bulky_fields,
    .events = memory_events,
};
