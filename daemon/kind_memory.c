/* The memory job: every allocation and free of the engine while the model
 * runs inference or train steps, analysed into peaks per phase, the category
 * breakdown at the peak, the largest allocations and a timeline, next to the
 * analytic estimate (schema/0004_memory.sql).
 *
 * DESIGN: one fresh allocator and model per point with event recording on
 * from the first parameter; phases are ranges of the event log marked by the
 * runner (init = model creation and the batch upload; then forward, backward,
 * optimizer per step). The analysis is memory_report.c's.
 *
 * On the cuda backend the stream-ordered pool is read at every phase mark
 * (reserved bytes at the mark and high-water marks over the phase, restarted
 * at each mark) and the device's free memory before and after the run
 * (schema/0010_memory_gpu.sql); on the cpu those figures are null with a
 * note. A point that fails (out of memory on the device, or past the spec's
 * memory_limit_bytes) is a failed run carrying the requested and free bytes
 * and the report of the events up to the failure, its event list stored for
 * download like a succeeded run's (store_failed_runs); it is a row of
 * memory_runs and of the table with its reason (schema/0020_memory_failed.sql).
 * The sweep goes on, and the job fails only when no point succeeded
 * (model_point_sweep). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LMPERF_HAVE_CUDA
#include "cuda/backend_cuda.h"
#endif
#include "device.h"
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

/* "12.3 MiB", "48.0 KiB", "512 B" into buf. */
static const char *fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
    if (bytes >= (1u << 30))
        snprintf(buf, len, "%.2f GiB", bytes / (MIB * 1024.0));
    else if (bytes >= (1u << 20))
        snprintf(buf, len, "%.1f MiB", bytes / MIB);
    else if (bytes >= 1024)
        snprintf(buf, len, "%.1f KiB", bytes / 1024.0);
    else
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    return buf;
}

/* --- the CUDA pool and the device's memory --------------------------------------- */

/* Non-zero when b has a stream-ordered pool to read (the cuda backend). */
static int has_pool(lmk_backend *b)
{
#ifdef LMPERF_HAVE_CUDA
    return b && b->name && strcmp(b->name, "cuda") == 0;
#else
    (void)b;
    return 0;
#endif
}

/* Starts a run: the pool gives its unused memory back (what an earlier
 * point left reserved) and its high-water marks restart. */
static void pool_start(lmk_backend *b)
{
#ifdef LMPERF_HAVE_CUDA
    if (has_pool(b))
        (void)lmk_backend_cuda_pool_reset(b, 1);
#else
    (void)b;
#endif
}

/* Closes phase ph's pool figures (after the queued work) and restarts the
 * high-water marks for the next phase. */
static void pool_sample(lmk_backend *b, memory_phase *ph)
{
#ifdef LMPERF_HAVE_CUDA
    uint64_t rc = 0, rh = 0, uh = 0;
    if (has_pool(b) && b->synchronize(b) == LMK_OK &&
        lmk_backend_cuda_pool_usage(b, &rc, &rh, NULL, &uh) == LMK_OK) {
        ph->reserved_end = (int64_t)rc;
        ph->reserved_peak = (int64_t)rh;
        ph->pool_used_peak = (int64_t)uh;
        (void)lmk_backend_cuda_pool_reset(b, 0);
    }
#else
    (void)b;
    (void)ph;
#endif
}

/* The device's free and total bytes; 0 when the backend has none. */
static int device_memory(lmk_backend *b, uint64_t *free_bytes, uint64_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
#ifdef LMPERF_HAVE_CUDA
    if (has_pool(b))
        return lmk_backend_cuda_device_memory(b, free_bytes, total_bytes) == LMK_OK ? 0 : -1;
#else
    (void)b;
#endif
    return -1;
}

/* Pool bytes reserved but not handed out (allocatable without the device). */
static uint64_t pool_unused(lmk_backend *b)
{
#ifdef LMPERF_HAVE_CUDA
    uint64_t rc = 0, uc = 0;
    if (has_pool(b) && lmk_backend_cuda_pool_usage(b, &rc, NULL, &uc, NULL) == LMK_OK && rc > uc)
        return rc - uc;
#else
    (void)b;
#endif
    return 0;
}

/* Marks the end of the current phase and the start of the next (name NULL:
 * only the end). The pool is sampled at every mark. */
static void phase_mark(memory_phase *phases, size_t *count, const lmk_allocator *a, lmk_backend *b, const char *name,
                       int step)
{
    size_t now = lmk_allocator_event_count(a);
    if (*count > 0) {
        phases[*count - 1].end_event = now;
        pool_sample(b, &phases[*count - 1]);
    }
    if (name && *count < MEMORY_MAX_PHASES)
        phases[(*count)++] = (memory_phase){.name = name,
                                            .step = step,
                                            .first_event = now,
                                            .end_event = now,
                                            .reserved_end = -1,
                                            .reserved_peak = -1,
                                            .pool_used_peak = -1};
}

#define NO_POOL_NOTE                                                                                          \
    "the cpu backend has no memory pool or device memory: reserved bytes and device used/free are reported " \
    "on cuda only"

/* The pool's and the device's figures of a run: "reserved_peak_bytes",
 * "pool_used_peak_bytes", "device_memory" {total, free/used before and
 * after}, or nulls with "pool_note" on the cpu. */
static void add_pool_figures(json_t *run, lmk_backend *b, const memory_phase *phases, size_t phase_count,
                             int have_before, uint64_t free_before, uint64_t total)
{
    if (!has_pool(b)) {
        json_object_set_new(run, "reserved_peak_bytes", json_null());
        json_object_set_new(run, "pool_used_peak_bytes", json_null());
        json_object_set_new(run, "device_memory", json_null());
        json_object_set_new(run, "pool_note", json_string(NO_POOL_NOTE));
        return;
    }
    int64_t reserved = -1, used = -1;
    for (size_t p = 0; p < phase_count; p++) {
        reserved = phases[p].reserved_peak > reserved ? phases[p].reserved_peak : reserved;
        used = phases[p].pool_used_peak > used ? phases[p].pool_used_peak : used;
    }
    json_object_set_new(run, "reserved_peak_bytes", reserved >= 0 ? json_integer(reserved) : json_null());
    json_object_set_new(run, "pool_used_peak_bytes", used >= 0 ? json_integer(used) : json_null());
    uint64_t free_after = 0, total_after = 0;
    int have_after = device_memory(b, &free_after, &total_after) == 0;
    if (!total)
        total = total_after;
    json_t *dm = json_object();
    json_object_set_new(dm, "total_bytes", json_integer((json_int_t)total));
    json_object_set_new(dm, "free_before_bytes", have_before ? json_integer((json_int_t)free_before) : json_null());
    json_object_set_new(dm, "used_before_bytes",
                        have_before ? json_integer((json_int_t)(total - free_before)) : json_null());
    json_object_set_new(dm, "free_after_bytes", have_after ? json_integer((json_int_t)free_after) : json_null());
    json_object_set_new(dm, "used_after_bytes",
                        have_after ? json_integer((json_int_t)(total - free_after)) : json_null());
    json_object_set_new(run, "device_memory", dm);
    json_object_set_new(run, "pool_note",
                        json_string("before: after the pool gave back what earlier points left, before the model "
                                    "existed; after: at the end of the last step, the model still allocated. "
                                    "Reserved includes the backend's scratch buffer (not a tracked tensor)."));
}

/* The measured parts beside the estimate, with the differences explained.
 * Gradients are measured as their peak (they exist from backward until the
 * optimizer step releases them); the rest as live at the end or at the peak. */
static void add_estimate(json_t *run, const model_point *p, const lmk_allocator *a, int training, int opt_in_backward,
                         const json_t *breakdown)
{
    lmk_memory_estimate est =
        lmk_model_memory_estimate_steps(&p->cfg, p->batch, p->T, p->prec, training, 1, opt_in_backward);
    uint64_t activations = (uint64_t)json_integer_value(json_object_get(breakdown, "activation")) +
                           (uint64_t)json_integer_value(json_object_get(breakdown, "temporary"));
    json_int_t copies = json_integer_value(json_object_get(breakdown, "parameter_copy"));
    json_int_t grads_at_peak = json_integer_value(json_object_get(breakdown, "gradient"));
    json_int_t inputs = json_integer_value(json_object_get(breakdown, "input")) +
                        json_integer_value(json_object_get(breakdown, "workspace"));
    uint64_t peak = lmk_allocator_peak(a, -1);
    json_t *measured = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "parameters",
                                 (json_int_t)lmk_allocator_live(a, LMK_MEM_PARAMETER), "gradients",
                                 (json_int_t)lmk_allocator_peak(a, LMK_MEM_GRADIENT), "optimizer_state",
                                 (json_int_t)lmk_allocator_live(a, LMK_MEM_OPTIMIZER_STATE), "gradients_at_peak",
                                 grads_at_peak, "parameter_copies_at_peak", copies, "activations_at_peak",
                                 (json_int_t)activations, "inputs_at_peak", inputs, "total_peak", (json_int_t)peak);
    json_t *estimate = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "parameters", (json_int_t)est.parameters,
                                 "gradients", (json_int_t)est.gradients, "optimizer_state",
                                 (json_int_t)est.optimizer_state, "gradients_at_peak", (json_int_t)est.gradients_at_peak,
                                 "parameter_copies_at_peak", (json_int_t)est.parameter_copies, "activations",
                                 (json_int_t)est.activations, "inputs", (json_int_t)est.inputs, "total",
                                 (json_int_t)est.total);
    char notes[1024];
    double diff = (double)peak - (double)est.total;
    snprintf(notes, sizeof notes,
             "parameters, gradients and optimizer state are exact sizes (float32); gradients exist from their "
             "first write in backward until %s, so the peak holds %.2f MiB of them (estimate %.2f); the 16-bit "
             "weight copies "
             "(parameter_copy, bf16/fp16) live from their first use in forward to the end of their layer's "
             "backward: %.2f MiB at the peak (estimate %.2f). The estimate replays the model's allocation order "
             "from the shape, so activations at the peak are %.2f MiB measured vs %.2f estimated. The peak "
             "differs from the estimate by %+.2f MiB (%+.3f%%) in the phase that peaked (%s); a non-zero "
             "difference is a tensor the replay does not know (it should be 0 unless the model code changed).",
             opt_in_backward ? "their layer's update inside backward releases them (optimizer_in_backward)"
                             : "the optimizer step releases them (PyTorch's zero_grad(set_to_none=True))",
             grads_at_peak / MIB, est.gradients_at_peak / MIB, copies / MIB, est.parameter_copies / MIB,
             activations / MIB, est.activations / MIB, diff / MIB, est.total ? 100.0 * diff / (double)est.total : 0.0,
             json_string_value(json_object_get(run, "peak_phase")) ?: "none");
    json_object_set_new(run, "measured", measured);
    json_object_set_new(run, "estimate", estimate);
    json_object_set_new(run, "estimate_notes", json_string(notes));
}

/* The backend a point's model sees: the worker's, with mem_alloc watched so
 * that a failed request is seen when it happens (the model releases what it
 * holds before it returns the error): the live bytes, the event count and
 * the free bytes at that moment. The spec's memory_limit_bytes is applied
 * here too. Ops use the copied table's impl, i.e. the worker backend's state. */
typedef struct mem_watch {
    lmk_backend table; /* first: the model gets &table */
    lmk_backend *inner;
    const lmk_allocator *a;
    uint64_t limit;
    int failed;
    size_t event_count;                            /* events before the failed request */
    uint64_t requested, live, free_bytes, device_free, pool_unused;
    const char *free_source;
} mem_watch;

static int watch_alloc(lmk_backend *b, size_t bytes, void **out)
{
    mem_watch *w = (mem_watch *)b;
    uint64_t live = lmk_allocator_live(w->a, -1);
    int rc = w->limit && live + bytes > w->limit ? LMK_NOMEM : w->inner->mem_alloc(w->inner, bytes, out);
    if (rc != LMK_NOMEM || w->failed)
        return rc;
    w->failed = 1;
    w->event_count = lmk_allocator_event_count(w->a);
    w->requested = bytes;
    w->live = live;
    uint64_t total = 0;
    if (w->limit) {
        w->free_bytes = w->limit > live ? w->limit - live : 0;
        w->free_source = "memory_limit_bytes minus the live bytes";
    } else if (device_memory(w->inner, &w->device_free, &total) == 0) {
        w->pool_unused = pool_unused(w->inner);
        w->free_bytes = w->device_free + w->pool_unused;
        w->free_source = "cudaMemGetInfo free plus the pool's reserved-unused, at the failed request";
    } else {
        w->free_bytes = device_cpu_available_bytes();
        w->free_source = "MemAvailable of the host at the failed request";
    }
    return rc;
}

static json_t *oom_json(const mem_watch *w, const lmk_allocator *a, const char *phase, int step)
{
    const char *name = "";
    (void)lmk_allocator_last_failure(a, &name);
    json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:i, s:I, s:I, s:s, s:I}", "stage", "run", "requested_bytes",
                          (json_int_t)w->requested, "name", name, "phase", phase ? phase : "none", "step", step,
                          "live_bytes", (json_int_t)w->live, "free_bytes", (json_int_t)w->free_bytes, "free_source",
                          w->free_source, "event_index", (json_int_t)w->event_count);
    if (w->limit)
        json_object_set_new(o, "limit_bytes", json_integer((json_int_t)w->limit));
    if (w->device_free || w->pool_unused) {
        json_object_set_new(o, "device_free_bytes", json_integer((json_int_t)w->device_free));
        json_object_set_new(o, "pool_unused_bytes", json_integer((json_int_t)w->pool_unused));
    }
    return o;
}

/* Runs one point; returns the run object (new). A point that fails (out of
 * memory included) is a failed run that still carries the report of the
 * events recorded up to the failure: the partial timeline, phases, peaks. */
static json_t *run_point(run_ctx *ctx, lmk_backend *b, const json_t *spec, const model_point *p, int *cancelled,
                         char *errbuf, size_t errlen)
{
    (void)errbuf, (void)errlen; /* a point's failure is a failed run (the job fails only when no point succeeded) */
    json_t *run = model_point_run_json(p);
    int training = p->mode && strcmp(p->mode, "train_step") == 0;
    int opt_in_backward = model_point_opt_in_backward(spec, training);
    int steps = spec_int(spec, "steps", 2);
    uint64_t limit = (uint64_t)json_integer_value(json_object_get(spec, "memory_limit_bytes"));
    int include_events = json_is_true(json_object_get(spec, "record_events"));
    json_object_set_new(run, "steps", json_integer(steps));
    json_object_set_new(run, "optimizer_in_backward", json_boolean(opt_in_backward));
    json_object_set_new(run, "residual_stream_bytes",
                        json_integer((json_int_t)p->batch * p->T * p->cfg.d_model * (json_int_t)sizeof(float)));
    if (!json_is_false(json_object_get(spec, "preflight")) &&
        model_point_preflight(p, training, 1, opt_in_backward, runctx_device_info(ctx), run)) {
        json_object_set_new(
            run, "oom",
            json_pack("{s:s, s:O, s:I}", "stage", "preflight", "requested_bytes",
                      json_object_get(run, "estimated_memory_bytes"), "free_bytes",
                      (json_int_t)model_point_available_bytes(runctx_device_info(ctx))));
        return run;
    }

    size_t n = (size_t)p->batch * p->T;
    int32_t *tokens = malloc(2 * n * sizeof *tokens);
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    memory_phase phases[MEMORY_MAX_PHASES];
    size_t phase_count = 0;
    int rc = LMK_NOMEM;
    uint64_t free_before = 0, total = 0;
    int have_before = 0;
    /* the allocator draws through the watch (declared before any goto) */
    mem_watch watch = {.table = *b, .inner = b, .limit = limit};
    watch.table.mem_alloc = watch_alloc;
    b = &watch.table;
    if (!tokens || lmk_allocator_create(b, &a) != LMK_OK) {
        model_point_fail(run, "out of host memory");
        goto out;
    }
    watch.a = a;
    model_point_tokens(p, tokens, tokens + n);
    pool_start(b);
    have_before = device_memory(b, &free_before, &total) == 0;
    phase_mark(phases, &phase_count, a, b, "init", -1);
    lmk_adamw_config opt = lmk_adamw_defaults();
    if ((rc = lmk_model_create(b, a, &p->cfg, p->batch, p->T, p->prec, p->seed, training, &m)) != LMK_OK ||
        (rc = lmk_model_set_batch(m, tokens, tokens + n)) != LMK_OK ||
        (opt_in_backward && (rc = lmk_model_optimizer_in_backward(m, &opt)) != LMK_OK))
        goto failed;
    for (int st = 0; st < steps; st++) {
        if (runctx_cancelled(ctx)) {
            *cancelled = 1;
            goto out;
        }
        phase_mark(phases, &phase_count, a, b, "forward", st);
        if ((rc = lmk_model_forward(m, training)) != LMK_OK || (rc = b->synchronize(b)) != LMK_OK)
            goto failed;
        if (!training)
            continue;
        phase_mark(phases, &phase_count, a, b, "backward", st);
        if ((rc = lmk_model_backward(m)) != LMK_OK || (rc = b->synchronize(b)) != LMK_OK)
            goto failed;
        phase_mark(phases, &phase_count, a, b, "optimizer", st);
        if ((rc = lmk_model_step(m, &opt)) != LMK_OK || (rc = b->synchronize(b)) != LMK_OK)
            goto failed;
    }
    phase_mark(phases, &phase_count, a, b, NULL, 0);

    json_t *report = memory_report(a, phases, phase_count, (size_t)spec_int(spec, "timeline_points", 2000),
                                   include_events, SIZE_MAX);
    json_object_update(run, report);
    json_decref(report);
    add_pool_figures(run, b, phases, phase_count, have_before, free_before, total);
    add_estimate(run, p, a, training, opt_in_backward, json_object_get(run, "breakdown_at_peak"));
    json_object_set_new(run, "status", json_string("succeeded"));
    json_object_set_new(run, "error", json_null());
    goto out;
failed: {
    /* the report stops at the failed request (the model's clean-up frees
     * behind it are not part of the timeline) */
    const char *phase = phase_count ? phases[phase_count - 1].name : NULL;
    int step = phase_count ? phases[phase_count - 1].step : -1;
    int oom_seen = rc == LMK_NOMEM && watch.failed;
    json_t *oom = oom_seen ? oom_json(&watch, a, phase, step) : NULL;
    size_t upto = oom_seen ? watch.event_count : lmk_allocator_event_count(a);
    if (rc != LMK_NOMEM)
        (void)b->synchronize(b); /* best effort: the device error may be sticky */
    phase_mark(phases, &phase_count, a, b, NULL, 0);
    if (phase_count && phases[phase_count - 1].end_event > upto)
        phases[phase_count - 1].end_event = upto;
    json_t *report = memory_report(a, phases, phase_count, (size_t)spec_int(spec, "timeline_points", 2000),
                                   include_events, upto);
    json_object_update(run, report);
    json_decref(report);
    add_pool_figures(run, b, phases, phase_count, have_before, free_before, total);
    json_object_set_new(run, "failed_phase", phase ? json_string(phase) : json_null());
    if (oom) {
        const char *name = json_string_value(json_object_get(oom, "name"));
        char req[32], live[32], avail[32];
        model_point_fail(run, "out of memory in %s: allocating %s for %s with %s live and %s free",
                         phase ? phase : "init", fmt_bytes(req, sizeof req, watch.requested), name,
                         fmt_bytes(live, sizeof live, watch.live), fmt_bytes(avail, sizeof avail, watch.free_bytes));
        json_object_set_new(run, "oom", oom);
    } else if (rc == LMK_NOMEM) {
        const char *name = "";
        char req[32];
        model_point_fail(run, "out of host memory in %s (%s for %s)", phase ? phase : "init",
                         fmt_bytes(req, sizeof req, lmk_allocator_last_failure(a, &name)), name);
    } else {
        model_point_fail(run, "%s in %s", lmk_status_text(rc), phase ? phase : "init");
    }
}
out:
    lmk_model_free(m);
    lmk_allocator_free(a);
    free(tokens);
    return run;
}

static int memory_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    return model_point_sweep(ctx, spec, run_point, result, errbuf, errlen);
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

/* The pool and device columns of schema/0010_memory_gpu.sql (NULL on the cpu). */
static int store_pool_figures(sqlite3 *db, int64_t run_id, const json_t *run)
{
    const json_t *reserved = json_object_get(run, "reserved_peak_by_phase");
    const json_t *dm = json_object_get(run, "device_memory");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "UPDATE memory_runs SET reserved_init_bytes = ?, reserved_forward_bytes = ?, "
                                "reserved_backward_bytes = ?, reserved_optimizer_bytes = ?, pool_used_peak_bytes = ?, "
                                "device_total_bytes = ?, device_free_before_bytes = ?, device_used_before_bytes = ?, "
                                "device_free_after_bytes = ?, device_used_after_bytes = ? WHERE run_id = ?",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    static const char *const phases[] = {"init", "forward", "backward", "optimizer"};
    for (int i = 0; i < 4; i++)
        bind_int_or_null(st, 1 + i, json_object_get(reserved, phases[i]));
    bind_int_or_null(st, 5, json_object_get(run, "pool_used_peak_bytes"));
    static const char *const device[] = {"total_bytes", "free_before_bytes", "used_before_bytes", "free_after_bytes",
                                         "used_after_bytes"};
    for (int i = 0; i < 5; i++)
        bind_int_or_null(st, 6 + i, json_object_get(dm, device[i]));
    sqlite3_bind_int64(st, 11, run_id);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    return rc;
}

static int memory_store_run(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec, const json_t *run)
{
    (void)spec;
    /* a failed run (out of memory, or refused by the preflight) is a row too,
     * with its reason and what was measured up to the failure (NULL where
     * nothing was: schema/0020_memory_failed.sql); its partial event list
     * stays downloadable */
    const char *status = json_string_value(json_object_get(run, "status"));
    int succeeded = status && strcmp(status, "succeeded") == 0;
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
        "estimated_activation_bytes, reserved_peak_bytes, event_count, status, error) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
    bind_int_or_null(st, 14, json_object_get(run, "peak_allocated_bytes"));
    const char *peak_phase = json_string_value(json_object_get(run, "peak_phase"));
    if (peak_phase)
        sqlite3_bind_text(st, 15, peak_phase, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 15);
    static const char *const phases[] = {"init", "forward", "backward", "optimizer"};
    for (int i = 0; i < 4; i++)
        bind_int_or_null(st, 16 + i, json_object_get(by_phase, phases[i]));
    bind_int_or_null(st, 20, json_object_get(measured, "parameters"));
    bind_int_or_null(st, 21, json_object_get(measured, "gradients"));
    bind_int_or_null(st, 22, json_object_get(measured, "optimizer_state"));
    bind_int_or_null(st, 23, json_object_get(measured, "activations_at_peak"));
    bind_int_or_null(st, 24, json_object_get(run, "residual_stream_bytes"));
    bind_int_or_null(st, 25, json_object_get(estimate, "total"));
    bind_int_or_null(st, 26, json_object_get(estimate, "activations"));
    bind_int_or_null(st, 27, json_object_get(run, "reserved_peak_bytes"));
    bind_int_or_null(st, 28, json_object_get(run, "event_count"));
    sqlite3_bind_text(st, 29, succeeded ? "succeeded" : "failed", -1, SQLITE_STATIC);
    jobkind_bind_scalar(st, 30, json_object_get(run, "error"));
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return rc;
    if ((rc = store_pool_figures(db, run_id, run)) != SQLITE_OK)
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
                           "train_step_peak_mib, residual_stream_mib, parameter_mib, inference_reserved_mib, "
                           "train_step_reserved_mib, failed FROM memory_summary WHERE job_id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "memory table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *row = json_pack("[s, i, i, s]", sqlite3_column_text(st, 0), sqlite3_column_int(st, 1),
                                sqlite3_column_int(st, 2), sqlite3_column_text(st, 3));
        /* a failed mode's peak reads "OOM" or "failed"; "failed" says why */
        for (int c = 4; c <= 10; c++) {
            int type = sqlite3_column_type(st, c);
            json_array_append_new(row, type == SQLITE_NULL ? json_null()
                                       : type == SQLITE_TEXT ? json_string((const char *)sqlite3_column_text(st, c))
                                                             : json_real(sqlite3_column_double(st, c)));
        }
        json_array_append_new(rows, row);
    }
    sqlite3_finalize(st);
    /* decimals: what memory_summary rounds each column to */
    *table = json_pack("{s:[s,s,s,s,s,s,s,s,s,s,s], s:o, s:[n,n,n,n,i,i,i,i,i,i,n]}", "columns", "model", "batch",
                       "context", "precision", "inference peak (MiB)", "train step peak (MiB)", "residual stream (MiB)",
                       "parameters (MiB)", "inference reserved (MiB)", "train step reserved (MiB)", "failed", "rows",
                       rows, "decimals", 1, 1, 2, 1, 1, 1);
    return 0;
}

/* Why run_index of job_id has no stored events: no such run (or not yet: a
 * job still queued or running), a job that ran with record_events false, or
 * a run that failed before its first event. Returns -1 with err (NOT_FOUND
 * naming run). */
static int no_events(sqlite3 *db, int64_t job_id, int run_index, api_error *err)
{
    sqlite3_stmt *st = NULL;
    int run_exists = 1, recorded = 1;
    char status[32] = "";
    if (sqlite3_prepare_v2(db,
                           "SELECT (SELECT count(*) FROM runs WHERE job_id = j.id AND run_index = ?), "
                           "coalesce(json_extract(j.spec, '$.record_events'), 1), j.status FROM jobs j WHERE j.id = ?",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int(st, 1, run_index);
        sqlite3_bind_int64(st, 2, job_id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            run_exists = sqlite3_column_int(st, 0) > 0;
            recorded = sqlite3_column_int(st, 1) != 0;
            const char *s = (const char *)sqlite3_column_text(st, 2);
            snprintf(status, sizeof status, "%s", s ? s : "");
        }
    }
    sqlite3_finalize(st);
    if (!run_exists && (strcmp(status, "queued") == 0 || strcmp(status, "running") == 0))
        return api_fail(err, API_ERR_NOT_FOUND, "run",
                        "job %lld has no run %d yet (it is %s; each run's events are stored when the run ends)",
                        (long long)job_id, run_index, status);
    if (!run_exists)
        return api_fail(err, API_ERR_NOT_FOUND, "run", "job %lld has no run %d", (long long)job_id, run_index);
    if (!recorded)
        return api_fail(err, API_ERR_NOT_FOUND, "run",
                        "job %lld ran with record_events false, so the events of its runs were not kept (each run's "
                        "peaks, timeline and largest allocations are in GET /v1/jobs/%lld); submit it again with "
                        "record_events true to download them",
                        (long long)job_id, (long long)job_id);
    return api_fail(err, API_ERR_NOT_FOUND, "run", "job %lld has no recorded events for run %d (it failed before "
                    "its first allocation)", (long long)job_id, run_index);
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
        json_array_append_new(rows, json_pack("[f, s, I, s, s, s?, o]", sqlite3_column_double(st, 0),
                                              sqlite3_column_text(st, 1), (json_int_t)sqlite3_column_int64(st, 2),
                                              sqlite3_column_text(st, 3), sqlite3_column_text(st, 4),
                                              sqlite3_column_text(st, 5),
                                              sqlite3_column_type(st, 6) == SQLITE_NULL
                                                  ? json_null()
                                                  : json_integer(sqlite3_column_int64(st, 6))));
    sqlite3_finalize(st);
    if (json_array_size(rows) == 0) {
        json_decref(rows);
        return no_events(db, job_id, run_index, err);
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
    .store_failed_runs = 1,
    .table = memory_table,
    .bulky_fields = bulky_fields,
    .events = memory_events,
};
