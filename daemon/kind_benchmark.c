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
 * the reason; the sweep goes on.
 *
 * On a cuda worker each phase is also bracketed by CUDA events (GPU time:
 * steps[].*_gpu_ms, stats_gpu; the *_ms fields stay the synchronised wall
 * clock, as the seeds measure), and graphs: true replays the phases as CUDA
 * graphs captured after the warm-up (graphs_scope says which; graphs_note why
 * not all). cpu workers ignore graphs and say so. Columns of the GPU fields:
 * schema/0008_benchmark_gpu.sql.
 *
 * optimizer_in_backward: true runs a train step's AdamW inside backward, each
 * layer's update as soon as its gradients are complete, beside the rest of
 * the backward on cuda (lmk_model_optimizer_in_backward); the backward phase
 * then holds most of the optimizer's work and the optimizer phase the token
 * embeddings' update. Refused with fp16 (loss scaling).
 *
 * Around the measured steps (outside the phase timers) the runner samples
 * the host's CPU counters (host_load.c): host_other_cpu_pct is the share of
 * all the host's CPUs that other processes used meanwhile (null when it
 * cannot be known, host_other_cpu_note says why), host_idle_cpu_pct the
 * share nothing used, host_cpus their number; over the whole run
 * (host_load_window "run") when the measured steps were too short. A run that other processes
 * disturbed (host_load_disturbed: they used HOST_LOAD_NOTABLE_PCT or more and
 * left the CPUs all but busy) carries a warning ("warnings": its times may
 * be inflated) and the job's table a "Host Busy (%)" column.
 * Columns: schema/0025_host_load.sql. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "backend.h"
#include "clock_ms.h"
#include "jobkind.h"
#include "device_peaks.h"
#include "host_load.h"
#include "model.h"
#include "model_point.h"
#include "phase_graphs.h"
#include "status.h"

#ifdef LMPERF_HAVE_CUDA
#include "cuda/backend_cuda.h"
#include "cuda/timing.h"
#else
typedef struct lmk_cuda_graph lmk_cuda_graph;
typedef struct lmk_cuda_timer lmk_cuda_timer;
#endif

#define MIB (1024.0 * 1024.0)
#define BENCH_WARMUP_DEFAULT 5 /* the schema's warmup_steps default (the CS336 protocol) */

typedef enum bench_mode { MODE_FORWARD, MODE_FORWARD_BACKWARD, MODE_TRAIN_STEP, MODE_COUNT } bench_mode;
static const char *const mode_names[MODE_COUNT] = {"forward", "forward_backward", "train_step"};

enum { PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_TOTAL, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"forward", "backward", "optimizer", "total"};

/* One point of the sweep: the shared model point and this kind's fields. */
typedef struct bench_point {
    model_point base;
    bench_mode mode;
    int warmup, measure, graphs;
    int opt_in_backward; /* the spec's optimizer_in_backward, on a train_step point (other modes ignore it) */
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
    const json_t *warmups = json_object_get(spec, "warmup_steps");
    for (size_t i = 0; i < (json_is_array(warmups) ? json_array_size(warmups) : 1); i++) {
        const json_t *v = json_is_array(warmups) ? json_array_get(warmups, i) : warmups;
        if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
            return api_fail(err, API_ERR_INVALID_SPEC, "warmup_steps", "warmup_steps must be at least 0");
    }
    return 0;
}

/* --- run ------------------------------------------------------------------------ */


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

/* --- the phases of a step: eager, or CUDA graph replays -------------------------- */

/* How the phases of one step run. Eagerly through the model API; or, with
 * graphs on a cuda backend, after the warm-up, as replays of one CUDA graph
 * per phase captured from the very same model calls (forward's activations
 * are allocated by the forward graph and freed by the backward graph). On
 * cuda two events bracket each phase on the stream (GPU time beside the
 * synchronised wall clock). The host-side phase checks of the model (forward
 * before backward before step) run once, at capture: from then on every
 * phase of the scope must be a replay. */
typedef struct step_runner {
    lmk_backend *b; /* borrowed */
    lmk_model *m;   /* borrowed */
    bench_mode mode;
    lmk_precision prec;
    lmk_adamw_config opt;
    int has[PH_COUNT];             /* phases this mode runs */
    lmk_cuda_graph *graph[PH_TOTAL]; /* per phase; NULL = eager */
    lmk_cuda_timer *timer;         /* events 2·ph, 2·ph+1 bracket phase ph; NULL: cpu */
} step_runner;

static int phase_call(step_runner *r, int ph)
{
    switch (ph) {
    case PH_FORWARD:
        return lmk_model_forward(r->m, r->mode != MODE_FORWARD);
    case PH_BACKWARD:
        return lmk_model_backward(r->m);
    default:
        return lmk_model_step(r->m, &r->opt);
    }
}

#ifdef LMPERF_HAVE_CUDA
static int is_cuda(const lmk_backend *b)
{
    return b->name && strcmp(b->name, "cuda") == 0;
}
#endif

/* Runs phase ph of one step and waits for it; *wall_ms = synchronised wall
 * clock from before the launch to after the synchronisation. */
static int run_phase(step_runner *r, int ph, double *wall_ms)
{
    int rc = LMK_OK;
    double t0 = monotonic_ms();
#ifdef LMPERF_HAVE_CUDA
    if (r->timer)
        rc = lmk_cuda_timer_record(r->timer, 2 * ph);
    if (rc == LMK_OK)
        rc = r->graph[ph] ? lmk_cuda_graph_launch(r->b, r->graph[ph]) : phase_call(r, ph);
    if (rc == LMK_OK && r->timer)
        rc = lmk_cuda_timer_record(r->timer, 2 * ph + 1);
#else
    rc = phase_call(r, ph);
#endif
    if (rc == LMK_OK)
        rc = r->b->synchronize(r->b);
    *wall_ms = monotonic_ms() - t0;
    return rc;
}

/* GPU time of phase ph of the step just run (after run_phase). */
static int phase_gpu_ms(step_runner *r, int ph, double *ms)
{
#ifdef LMPERF_HAVE_CUDA
    if (r->timer)
        return lmk_cuda_timer_elapsed(r->timer, 2 * ph, 2 * ph + 1, ms);
#endif
    (void)r, (void)ph, (void)ms;
    return LMK_UNSUPPORTED;
}

#ifdef LMPERF_HAVE_CUDA /* used by the CUDA paths alone */
/* phase_graphs' call: phase ph of the runner's model (the phases share
 * their numbering with phase_graphs.h). */
static int runner_phase_call(void *ctx, int ph)
{
    return phase_call(ctx, ph);
}
#endif

/* Captures the phases of the mode into graphs. Sets *scope ("forward",
 * "forward+backward", "forward+backward+optimizer", or "none" with *note
 * saying why). On failure (rc ≠ LMK_OK) *detail names the phase and the
 * CUDA error; the model's host state is then unusable: fail the run. The
 * capture itself is phase_graphs.c's (shared with the profile job). */
static int runner_capture(step_runner *r, const char **scope, const char **note, char *detail,
                          size_t len)
{
    *scope = "none";
    *note = NULL;
#ifdef LMPERF_HAVE_CUDA
    static const char *const scopes[PH_TOTAL] = {"forward", "forward+backward", "forward+backward+optimizer"};
    if (!is_cuda(r->b)) {
        *note = "graphs ignored: not a cuda worker";
        return LMK_OK;
    }
    int last = r->mode == MODE_FORWARD ? PH_FORWARD : r->mode == MODE_FORWARD_BACKWARD ? PH_BACKWARD : PH_OPTIMIZER;
    if (!phase_graphs_capturable(r->prec, last, note))
        return LMK_OK;
    int rc = phase_graphs_capture(r->b, last, runner_phase_call, r, r->graph, detail, len);
    if (rc != LMK_OK)
        return rc;
    *scope = scopes[last];
#else
    (void)r, (void)detail, (void)len;
    *note = "graphs ignored: this build has no CUDA";
#endif
    return LMK_OK;
}

static void runner_free(step_runner *r)
{
#ifdef LMPERF_HAVE_CUDA
    if (r->graph[0] || r->timer)
        (void)r->b->synchronize(r->b);
    for (int ph = 0; ph < PH_TOTAL; ph++)
        lmk_cuda_graph_free(r->graph[ph]);
    lmk_cuda_timer_free(r->timer);
#endif
    memset(r->graph, 0, sizeof r->graph);
    r->timer = NULL;
}

/* Statistics of column ph of times (steps, PH_COUNT) over the measured steps
 * into obj[name]; null where the phase was not run or not timed. */
static void put_stats(json_t *obj, const double *times, const int *has, const bench_point *p,
                      double *total_mean)
{
    double *v = malloc((size_t)p->measure * sizeof *v);
    for (int ph = 0; ph < PH_COUNT; ph++) {
        int ok = has[ph] && v;
        for (int i = 0; ok && i < p->measure; i++) {
            v[i] = times[(size_t)(p->warmup + i) * PH_COUNT + ph];
            ok = !isnan(v[i]);
        }
        json_object_set_new(obj, phase_names[ph],
                            ok ? stats_json(v, p->measure, ph == PH_TOTAL ? total_mean : NULL) : json_null());
    }
    free(v);
}

/* The run's host load fields from the samples taken at the start of the run
 * (whole) and around its measured steps (start NULL: none began, the run
 * failed before them): host_other_cpu_pct and host_idle_cpu_pct (%, or null
 * with host_other_cpu_note saying why) over host_load_window, the measured
 * steps, or the whole run (set-up, warm-up and measured steps) when those
 * were too short for the host's clock ticks (a GPU's launch-bound points: the
 * ones a busy host slows most); host_cpus; host_disturbed (whether other
 * processes disturbed the run: host_load_disturbed) and then a warning
 * appended to the run's "warnings". run: borrowed. */
static void put_host_load(json_t *run, const host_load_sample *whole, const host_load_sample *start,
                          const host_load_sample *end)
{
    host_load_result load = {.cpus = end->cpus};
    int rc = start ? host_load_measure(whole, start, end, &load) : HOST_LOAD_OK;
    int known = start && rc == HOST_LOAD_OK;
    double pct = load.other_pct, idle = load.idle_pct;
    int cpus = load.cpus;
    const char *window = load.window == HOST_LOAD_WINDOW_RUN ? "run" : "measured_steps";
    json_object_set_new(run, "host_other_cpu_pct", known ? json_real(pct) : json_null());
    json_object_set_new(run, "host_idle_cpu_pct", known ? json_real(idle) : json_null());
    json_object_set_new(run, "host_load_window", known ? json_string(window) : json_null());
    json_object_set_new(run, "host_other_cpu_note", known  ? json_null()
                                                    : start ? json_string(host_load_status_text(rc))
                                                            : json_string("the run stopped before its measured steps"));
    json_object_set_new(run, "host_cpus", json_integer(cpus));
    int disturbed = known && host_load_disturbed(pct, idle);
    json_object_set_new(run, "host_disturbed", json_boolean(disturbed)); /* the page's rule too: one place */
    if (disturbed) {
        char warning[240];
        snprintf(warning, sizeof warning,
                 "other processes used %.0f%% of the host's %d CPUs, leaving %.0f%% idle, during the %s: times "
                 "may be inflated",
                 pct, cpus, idle, load.window == HOST_LOAD_WINDOW_RUN ? "run" : "measured steps");
        json_array_append_new(json_object_get(run, "warnings"), json_string(warning));
    }
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
    json_object_set_new(run, "graphs_scope", json_string("none"));
    json_object_set_new(run, "graphs_note", json_null());
    json_object_set_new(run, "optimizer_in_backward", json_boolean(p->opt_in_backward));
    json_object_set_new(run, "warnings", json_array()); /* strings: what may make the figures unreliable */
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    int32_t *tokens = NULL;
    double *times = NULL, *gtimes = NULL; /* (steps, PH_COUNT): wall clock, GPU events (NAN: none) */
    int training = p->mode != MODE_FORWARD, steps = p->warmup + p->measure;
    int holds = p->mode == MODE_FORWARD            ? LMK_MODEL_INFERENCE
                : p->mode == MODE_FORWARD_BACKWARD ? LMK_MODEL_GRADIENTS
                                                   : LMK_MODEL_TRAIN;
    size_t n = (size_t)p->base.batch * p->base.T;
    host_load_sample load_run, load_start = {0}, load_end; /* the run's set-up; around the measured steps */
    int load_sampled = 0;                                     /* load_start taken: the measured steps began */
    step_runner r = {.b = b, .mode = p->mode, .prec = p->base.prec, .opt = lmk_adamw_defaults(),
                     .has = {1, training, p->mode == MODE_TRAIN_STEP, 1}};
    int rc;

    host_load_sample_now(&load_run);
    /* steps run: with graphs and at most one warm-up step, one priming step more (below) */
    if (model_point_preflight(&p->base, holds, steps + (p->graphs && p->warmup <= 1),
                              p->opt_in_backward, runctx_device_info(ctx), run))
        return run;
    tokens = malloc(2 * n * sizeof *tokens);
    times = calloc((size_t)steps * PH_COUNT, sizeof *times);
    gtimes = calloc((size_t)steps * PH_COUNT, sizeof *gtimes);
    if (!tokens || !times || !gtimes) {
        model_point_fail(run, "%s", "out of host memory");
        goto out;
    }
    for (size_t i = 0; i < (size_t)steps * PH_COUNT; i++)
        gtimes[i] = NAN;
    model_point_tokens(&p->base, tokens, tokens + n);
    if ((rc = lmk_allocator_create(b, &a)) != LMK_OK ||
        (lmk_allocator_set_recording(a, 0), rc = lmk_model_create(b, a, &p->base.cfg, p->base.batch, p->base.T,
                                                                   p->base.prec, p->base.seed, holds, &m)) != LMK_OK ||
        (rc = lmk_model_set_batch(m, tokens, tokens + n)) != LMK_OK ||
        (p->opt_in_backward &&
         (rc = lmk_model_optimizer_in_backward(m, &r.opt)) != LMK_OK)) {
        model_point_fail(run, "model set-up failed: %s", lmk_status_text(rc));
        goto out;
    }
    r.m = m;
#ifdef LMPERF_HAVE_CUDA
    if (is_cuda(b) && (rc = lmk_cuda_timer_create(b, 2 * PH_TOTAL, &r.timer)) != LMK_OK) {
        model_point_fail(run, "CUDA events: %s (%s)", lmk_status_text(rc), lmk_backend_cuda_last_error(b));
        goto out;
    }
#endif
    /* graphs: captured at the last warm-up step, so that the first replay
     * (the graphs' upload and their memory's first mapping: 19.0 ms against
     * 11.4 for the forward of large@512 bf16 on the H100) is a warm-up step
     * and every measured step a steady replay. An eager step must come
     * first (it sizes the scratch): with one warm-up step or none, one
     * unreported priming step; with none, the first replay is measured. */
    int capture_at = -1, priming = 0;
    if (p->graphs) {
        const char *scope = "none", *note = NULL;
#ifdef LMPERF_HAVE_CUDA
        if (is_cuda(b)) {
            capture_at = p->warmup > 0 ? p->warmup - 1 : 0;
            priming = p->warmup <= 1;
        } else
#endif
        {
            runner_capture(&r, &scope, &note, NULL, 0); /* says why not */
            json_object_set_new(run, "graphs_note", note ? json_string(note) : json_null());
        }
    }
    for (int st = -priming; st < steps; st++) {
        if (runctx_cancelled(ctx)) {
            *cancelled = 1;
            goto out;
        }
        if (st == capture_at) {
            const char *scope, *note;
            char detail[400] = "";
            if ((rc = runner_capture(&r, &scope, &note, detail, sizeof detail)) != LMK_OK) {
                model_point_fail(run, "%s", detail);
                goto out;
            }
            json_object_set_new(run, "graphs_scope", json_string(scope));
            json_object_set_new(run, "graphs_note", note ? json_string(note) : json_null());
            json_object_set_new(run, "graphs_priming_steps", json_integer(priming));
        }
        if (st == p->warmup) { /* after the warm-up and the capture, before any timer */
            host_load_sample_now(&load_start);
            load_sampled = 1;
        }
        double wall[PH_COUNT] = {0}, gpu[PH_COUNT] = {NAN, NAN, NAN, NAN};
        rc = LMK_OK;
        for (int ph = 0; ph < PH_TOTAL && rc == LMK_OK; ph++) {
            if (!r.has[ph])
                continue;
            rc = run_phase(&r, ph, &wall[ph]);
            if (rc == LMK_OK && phase_gpu_ms(&r, ph, &gpu[ph]) != LMK_OK)
                gpu[ph] = NAN;
        }
        if (rc != LMK_OK) {
            const char *name = "";
            uint64_t bytes = lmk_allocator_last_failure(a, &name);
            char detail[400];
            if (rc == LMK_NOMEM && bytes > 0)
                snprintf(detail, sizeof detail, "out of memory allocating %.1f MiB for %s", bytes / MIB, name);
#ifdef LMPERF_HAVE_CUDA
            else if (is_cuda(b))
                snprintf(detail, sizeof detail, "%s (%s)", lmk_status_text(rc), lmk_backend_cuda_last_error(b));
#endif
            else
                snprintf(detail, sizeof detail, "%s", lmk_status_text(rc));
            model_point_fail(run, "step %d: %s", st, detail);
            goto out;
        }
        if (st < 0)
            continue;
        double *t = times + (size_t)st * PH_COUNT, *g = gtimes + (size_t)st * PH_COUNT;
        g[PH_TOTAL] = 0;
        for (int ph = 0; ph < PH_TOTAL; ph++) {
            t[ph] = wall[ph];
            t[PH_TOTAL] += wall[ph];
            g[ph] = gpu[ph];
            if (r.has[ph])
                g[PH_TOTAL] += gpu[ph]; /* NAN when a phase has no GPU time */
        }
    }
    host_load_sample_now(&load_end); /* after the last measured step's timers */
    put_host_load(run, &load_run, load_sampled ? &load_start : NULL, &load_end);
    float loss = NAN;
    if (lmk_model_loss(m, &loss) == LMK_OK) {
        /* JSON has no NaN or infinity: null, and the note says which */
        json_object_set_new(run, "final_loss", isfinite(loss) ? json_real(loss) : json_null());
        if (!isfinite(loss))
            json_object_set_new(run, "final_loss_note",
                                json_string(isnan(loss) ? "the last loss is NaN" : "the last loss is infinite"));
    }

    /* steps, statistics, throughput */
    int gpu_timed = r.timer != NULL;
    json_t *jsteps = json_array();
    for (int st = 0; st < steps; st++) {
        const double *t = times + (size_t)st * PH_COUNT, *g = gtimes + (size_t)st * PH_COUNT;
        json_t *o = json_pack("{s:i, s:b, s:b}", "step", st, "warmup", st < p->warmup, "graph",
                              capture_at >= 0 && st >= capture_at && r.graph[0] != NULL);
        for (int ph = 0; ph < PH_COUNT; ph++) {
            char key[32];
            snprintf(key, sizeof key, "%s_ms", phase_names[ph]);
            json_object_set_new(o, key, r.has[ph] ? json_real(t[ph]) : json_null());
        }
        for (int ph = 0; ph < PH_COUNT && gpu_timed; ph++) {
            char key[32];
            snprintf(key, sizeof key, "%s_gpu_ms", phase_names[ph]);
            json_object_set_new(o, key, r.has[ph] && !isnan(g[ph]) ? json_real(g[ph]) : json_null());
        }
        json_array_append_new(jsteps, o);
    }
    json_object_set_new(run, "steps", jsteps);
    json_t *stats = json_object();
    double total_mean = 0;
    put_stats(stats, times, r.has, p, &total_mean);
    json_object_set_new(run, "stats", stats);
    if (gpu_timed) {
        json_t *sg = json_object();
        put_stats(sg, gtimes, r.has, p, NULL);
        json_object_set_new(run, "stats_gpu", sg);
    } else {
        json_object_set_new(run, "stats_gpu", json_null());
    }
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
    runner_free(&r);
    lmk_model_free(m);
    lmk_allocator_free(a);
    free(tokens);
    free(times);
    free(gtimes);
    return run;
}

/* One point of the sweep (model_point_runner): this kind's fields from the
 * spec, then run_point. */
static json_t *sweep_point(run_ctx *ctx, lmk_backend *b, const json_t *spec, const model_point *mp, int *cancelled,
                           char *errbuf, size_t errlen)
{
    bench_point p = {.base = *mp, .mode = MODE_TRAIN_STEP};
    if (mp->mode && parse_mode(mp->mode, &p.mode) != 0) {
        snprintf(errbuf, errlen, "mode %s is not a benchmark mode", mp->mode);
        return NULL;
    }
    p.warmup = mp->warmup_steps >= 0 ? mp->warmup_steps : BENCH_WARMUP_DEFAULT;
    p.measure = spec_int(spec, "measure_steps", 10);
    p.graphs = json_is_true(json_object_get(spec, "graphs"));
    p.opt_in_backward = model_point_opt_in_backward(spec, p.mode == MODE_TRAIN_STEP);
    return run_point(ctx, b, &p, cancelled);
}

static int benchmark_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    return model_point_sweep(ctx, spec, sweep_point, result, errbuf, errlen);
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
    /* 0008_benchmark_gpu */
    {"graphs_scope", "graphs_scope"},
    {"graphs_note", "graphs_note"},
    {"final_loss", "final_loss"},
#define GPU_COLUMNS(ph)                                                                                 \
    {#ph "_gpu_mean_ms", "stats_gpu." #ph ".mean_ms"}, {#ph "_gpu_std_ms", "stats_gpu." #ph ".std_ms"}, \
        {#ph "_gpu_median_ms", "stats_gpu." #ph ".median_ms"}
    GPU_COLUMNS(forward),
    GPU_COLUMNS(backward),
    GPU_COLUMNS(optimizer),
    GPU_COLUMNS(total),
#undef GPU_COLUMNS
    /* 0017_benchmark_opt_in_backward */
    {"optimizer_in_backward", "optimizer_in_backward"},
    /* 0025_host_load */
    {"host_other_cpu_pct", "host_other_cpu_pct"},
    {"host_idle_cpu_pct", "host_idle_cpu_pct"},
    {"host_cpus", "host_cpus"},
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
        jobkind_bind_scalar(st, (int)i + 3, json_path(run, run_columns[i].path));
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

/* A phase's mean and std (ms) as a raw [mean, std] cell (api_table_write_mean_sd
 * writes it out with its column's decimals), or "-" where the column is NULL (a
 * phase the mode does not run, a failed point). Returns new. */
static json_t *mean_std_raw(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return json_string("-");
    return json_pack("[f, f]", sqlite3_column_double(st, col), sqlite3_column_double(st, col + 1));
}

/* A number cell: the column's value over divisor (e.g. bytes over MIB), or
 * null where the column is NULL (a point that failed has no figures). */
static json_t *real_cell(sqlite3_stmt *st, int col, double divisor)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? json_null()
                                                         : json_real(sqlite3_column_double(st, col) / divisor);
}

/* An integer cell, or null where the column is NULL (a row stored without the model's shape). */
static json_t *int_cell(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? json_null() : json_integer(sqlite3_column_int64(st, col));
}

/* Inserts a column into a table being built: name at position at of columns,
 * decimal (stolen: the column's "decimals" hint, an integer or null) at the
 * same position of decimals, and cells[i] (borrowed) into row i of rows. */
static void insert_column(json_t *columns, json_t *decimals, json_t *rows, size_t at, const char *name,
                          json_t *decimal, const json_t *cells)
{
    json_array_insert_new(columns, at, json_string(name));
    json_array_insert_new(decimals, at, decimal);
    for (size_t i = 0; i < json_array_size(rows); i++)
        json_array_insert(json_array_get(rows, i), at, json_array_get(cells, i));
}

/* "Warm-up Steps" goes after the context (Model, d_model, d_ff, Layers,
 * Heads, Context Length) in the job's table and in the table by precision. */
enum { WARMUP_AT = 6 };
static const char WARMUP_COLUMN[] = "Warm-up Steps";

/* Whether the rows' warm-up steps (warmups: integers, one per row) differ: a
 * warmup_steps sweep (seed 001's "no warm-up" vs "1 warm-up"), which the
 * tables then show (WARMUP_COLUMN). */
static int warmups_differ(const json_t *warmups)
{
    for (size_t i = 1; i < json_array_size(warmups); i++)
        if (!json_equal(json_array_get(warmups, i), json_array_get(warmups, 0)))
            return 1;
    return 0;
}

/* The summary table of a job (GET /v1/jobs/{id}/table), one row per run:
 * the seeds' Model, shape (seed 004), Context Length, Fwd / Bwd / Opt and
 * the whole step (Total: the phases run, summed per step; seed 002's
 * "Forward + Backward" of a forward_backward run) as "mean ± std" in ms
 * (raw [mean, std] cells here: benchmark_table writes them out, each column
 * with the decimals of its smallest mean, api_table_write_mean_sd; GET
 * /v1/compare once every job's rows share the columns),
 * then — only when the job ran fp32 and another precision at the same points
 * — "Speedup vs fp32" (×, benchmark_summary.speedup_vs_fp32: the fp32 run's
 * mean total over this run's), then the rest of the configuration, tokens/s,
 * TFLOP/s, peak MiB and the status (with a failed point's reason). A job
 * whose runs differ in warm-up steps has "Warm-up Steps" after the context;
 * one with a run whose measured steps other processes disturbed
 * (host_load_disturbed), "Host Busy (%)" (their share of the host's CPUs,
 * empty where unknown) before the status.
 * Rows are in run_id order (benchmark_compare_column's cells follow it).
 * warmup_always: "Warm-up Steps" even when the runs agree (the comparison's
 * table: beside another job's, one job's single warm-up count is a fact the
 * reader needs, not a blank). */
static int benchmark_table_with(sqlite3 *db, int64_t job_id, int warmup_always, json_t **table, api_error *err)
{
    enum {
        C_MODEL, C_D_MODEL, C_D_FF, C_LAYERS, C_HEADS, C_CONTEXT, C_FWD, C_FWD_STD, C_BWD, C_BWD_STD, C_OPT,
        C_OPT_STD, C_TOT, C_TOT_STD, C_SPEEDUP, C_BATCH, C_PRECISION, C_MODE, C_TOKENS, C_TFLOPS, C_PEAK, C_STATUS,
        C_ERROR, C_WARMUP, C_HOST, C_HOST_IDLE
    };
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT r.model, r.d_model, r.d_ff, r.num_layers, r.num_heads, r.context_length, "
                           "r.forward_mean_ms, r.forward_std_ms, r.backward_mean_ms, r.backward_std_ms, "
                           "r.optimizer_mean_ms, r.optimizer_std_ms, r.total_mean_ms, r.total_std_ms, "
                           "s.speedup_vs_fp32, r.batch_size, r.precision, r.mode, r.tokens_per_s, "
                           "r.achieved_tflops, r.peak_memory_bytes, r.status, r.error, r.warmup_steps, "
                           "r.host_other_cpu_pct, r.host_idle_cpu_pct "
                           "FROM benchmark_runs r JOIN benchmark_summary s ON s.run_id = r.run_id "
                           "WHERE r.job_id = ? ORDER BY r.run_id",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "benchmark table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array(), *speedups = json_array(), *warmups = json_array(), *host = json_array();
    int speedup_shown = 0; /* a run in another precision has an fp32 peer */
    int host_shown = 0; /* other processes disturbed some run's measured steps (host_load_disturbed) */
    while (sqlite3_step(st) == SQLITE_ROW) {
        char status[300];
        const char *s = (const char *)sqlite3_column_text(st, C_STATUS);
        const char *e = (const char *)sqlite3_column_text(st, C_ERROR);
        snprintf(status, sizeof status, "%s%s%s", s ? s : "", e ? ": " : "", e ? e : "");
        const char *precision = (const char *)sqlite3_column_text(st, C_PRECISION);
        int has_speedup = sqlite3_column_type(st, C_SPEEDUP) != SQLITE_NULL;
        speedup_shown |= has_speedup && precision && strcmp(precision, "fp32") != 0;
        json_array_append_new(speedups, has_speedup ? json_real(sqlite3_column_double(st, C_SPEEDUP)) : json_null());
        json_array_append_new(warmups, json_integer(sqlite3_column_int(st, C_WARMUP)));
        json_t *busy = real_cell(st, C_HOST, 1);
        host_shown |= json_is_number(busy) && sqlite3_column_type(st, C_HOST_IDLE) != SQLITE_NULL &&
                      host_load_disturbed(json_number_value(busy), sqlite3_column_double(st, C_HOST_IDLE));
        json_array_append_new(host, busy);
        json_t *row = json_pack("[s, o, o, o, o, i, o, o, o, o, i, s, s, o, o, o, s]",
                                sqlite3_column_text(st, C_MODEL), int_cell(st, C_D_MODEL), int_cell(st, C_D_FF),
                                int_cell(st, C_LAYERS), int_cell(st, C_HEADS), sqlite3_column_int(st, C_CONTEXT),
                                mean_std_raw(st, C_FWD), mean_std_raw(st, C_BWD), mean_std_raw(st, C_OPT),
                                mean_std_raw(st, C_TOT), sqlite3_column_int(st, C_BATCH), precision,
                                sqlite3_column_text(st, C_MODE), real_cell(st, C_TOKENS, 1),
                                real_cell(st, C_TFLOPS, 1), real_cell(st, C_PEAK, MIB), status);
        if (row)
            json_array_append_new(rows, row);
    }
    sqlite3_finalize(st);
    /* the speedup goes after Total (index 10), two decimals as the seeds print it; the warm-up steps,
     * when they differ, after the context (WARMUP_AT), inserted second so that SPEEDUP_AT counts without it */
    enum { SPEEDUP_AT = 10 };
    json_t *columns = json_pack("[s,s,s,s,s,s,s,s,s,s,s,s,s,s,s,s,s]", "Model", "d_model", "d_ff", "Layers",
                                "Heads", "Context Length", "Fwd Pass (ms)", "Bwd Pass (ms)", "Opt Step (ms)",
                                "Total (ms)", "Batch", "Precision", "Mode", "Tokens/s", "TFLOP/s",
                                "Peak Memory (MiB)", "Status");
    /* Tokens/s, TFLOP/s and Peak Memory are numbers printed with 0, 3 and 1 decimals */
    json_t *decimals = json_pack("[n,n,n,n,n,n,n,n,n,n,n,n,n,i,i,i,n]", 0, 3, 1);
    if (speedup_shown)
        insert_column(columns, decimals, rows, SPEEDUP_AT, "Speedup vs fp32 (×)", json_integer(2), speedups);
    if (warmups_differ(warmups) || (warmup_always && json_array_size(warmups)))
        insert_column(columns, decimals, rows, WARMUP_AT, WARMUP_COLUMN, json_null(), warmups);
    if (host_shown) /* before the status, inserted last so that the indices above count without it */
        insert_column(columns, decimals, rows, json_array_size(columns) - 1, "Host Busy (%)", json_integer(0), host);
    json_decref(speedups);
    json_decref(warmups);
    json_decref(host);
    /* the phase times are "mean ± std" even where a job has none of a phase (forward only): csv splits them
     * alike in every job (api_table_csv) */
    json_t *mean_sd = json_pack("[s,s,s,s]", "Fwd Pass (ms)", "Bwd Pass (ms)", "Opt Step (ms)", "Total (ms)");
    *table = json_pack("{s:o, s:o, s:o, s:o}", "columns", columns, "rows", rows, "decimals", decimals, "mean_sd",
                       mean_sd);
    return *table ? 0 : api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory building the benchmark table");
}

static int benchmark_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    json_t *own = NULL;
    if (benchmark_table_with(db, job_id, 0, &own, err))
        return -1;
    if (api_table_write_mean_sd(own)) {
        json_decref(own);
        return api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory building the benchmark table");
    }
    *table = own;
    return 0;
}

/* --- the table by precision (GET /v1/jobs/{id}/table?pivot=precision) ------------- */

/* The seeds' mixed-precision tables in one (seed 002's "Total Time ... FP32
 * BF16 FP16" beside its "Speedup Analysis: Mixed Precision vs FP32"): one row
 * per point of the job (view benchmark_by_precision, schema/0026), Model, its
 * shape, Context Length, Warm-up Steps where the points differ in them,
 * Batch and Mode, then "<P> Total (ms)" for each precision the job ran (the
 * mean whole step, "N/A" where that run failed, as the seeds print an OOM)
 * and, when it ran fp32, "<P> Speedup vs FP32 (×)" for each other one. */
static int benchmark_precision_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    enum { C_MODEL, C_D_MODEL, C_D_FF, C_LAYERS, C_HEADS, C_CONTEXT, C_BATCH, C_MODE, C_WARMUP, C_TOTALS,
           C_SPEEDUPS = C_TOTALS + LMK_PREC_COUNT /* then tf32, bf16, fp16: no fp32 speedup */ };
    int ran[LMK_PREC_COUNT] = {0};
    sqlite3_stmt *st = NULL;
    json_t *columns = NULL, *decimals = NULL, *rows = json_array(), *warmups = json_array();
    int rc = -1;
    if (sqlite3_prepare_v2(db, "SELECT DISTINCT precision FROM benchmark_runs WHERE job_id = ?", -1, &st, NULL) !=
        SQLITE_OK)
        goto db_error;
    sqlite3_bind_int64(st, 1, job_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
        lmk_precision p;
        if (lmk_precision_parse((const char *)sqlite3_column_text(st, 0), &p) == LMK_OK)
            ran[p] = 1;
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db,
                           "SELECT model, d_model, d_ff, num_layers, num_heads, context_length, batch_size, mode, "
                           "warmup_steps, fp32_total_ms, tf32_total_ms, bf16_total_ms, fp16_total_ms, "
                           "tf32_speedup_vs_fp32, bf16_speedup_vs_fp32, fp16_speedup_vs_fp32 "
                           "FROM benchmark_by_precision WHERE job_id = ? ORDER BY first_run_id",
                           -1, &st, NULL) != SQLITE_OK)
        goto db_error;
    sqlite3_bind_int64(st, 1, job_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *row = json_pack("[s, o, o, o, o, i, i, s]", sqlite3_column_text(st, C_MODEL), int_cell(st, C_D_MODEL),
                                int_cell(st, C_D_FF), int_cell(st, C_LAYERS), int_cell(st, C_HEADS),
                                sqlite3_column_int(st, C_CONTEXT), sqlite3_column_int(st, C_BATCH),
                                sqlite3_column_text(st, C_MODE));
        if (!row)
            continue;
        for (int p = 0; p < LMK_PREC_COUNT; p++)
            if (ran[p])
                json_array_append_new(row, sqlite3_column_type(st, C_TOTALS + p) == SQLITE_NULL
                                               ? json_string("N/A")
                                               : json_real(sqlite3_column_double(st, C_TOTALS + p)));
        for (int p = LMK_PREC_FP32 + 1; ran[LMK_PREC_FP32] && p < LMK_PREC_COUNT; p++)
            if (ran[p])
                json_array_append_new(row, sqlite3_column_type(st, C_SPEEDUPS + p - 1) == SQLITE_NULL
                                               ? json_string("N/A")
                                               : json_real(sqlite3_column_double(st, C_SPEEDUPS + p - 1)));
        json_array_append_new(rows, row);
        json_array_append_new(warmups, json_integer(sqlite3_column_int(st, C_WARMUP)));
    }
    sqlite3_finalize(st);
    st = NULL;

    columns = json_pack("[s,s,s,s,s,s,s,s]", "Model", "d_model", "d_ff", "Layers", "Heads", "Context Length",
                        "Batch", "Mode");
    decimals = json_pack("[n,n,n,n,n,n,n,n]");
    for (int pass = 0; pass < 2; pass++) /* the totals, then the speedups */
        for (int p = pass; p < LMK_PREC_COUNT && (pass == 0 || ran[LMK_PREC_FP32]); p++) {
            if (!ran[p])
                continue;
            char upper[8], label[64];
            const char *name = lmk_precision_name((lmk_precision)p);
            size_t k = 0;
            for (; name[k] && k + 1 < sizeof upper; k++)
                upper[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 'a' + 'A' : name[k]);
            upper[k] = 0;
            if (pass == 0)
                snprintf(label, sizeof label, "%s Total (ms)", upper);
            else
                snprintf(label, sizeof label, "%s Speedup vs FP32 (×)", upper);
            json_array_append_new(columns, json_string(label));
            json_array_append_new(decimals, json_integer(2));
        }
    if (warmups_differ(warmups))
        insert_column(columns, decimals, rows, WARMUP_AT, WARMUP_COLUMN, json_null(), warmups);
    *table = json_pack("{s:o, s:o, s:o}", "columns", columns, "rows", rows, "decimals", decimals);
    columns = decimals = rows = NULL;
    rc = *table ? 0 : api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory building the precision table");
    goto out;
db_error:
    rc = api_fail(err, API_ERR_INTERNAL, NULL, "benchmark precision table: %s", sqlite3_errmsg(db));
out:
    sqlite3_finalize(st);
    json_decref(columns);
    json_decref(decimals);
    json_decref(rows);
    json_decref(warmups);
    return rc;
}

/* GET /v1/jobs/{id}/table?pivot=NAME (the only selector the kind takes; NAME
 * one of benchmark_pivots: jobkind_check_selectors). */
static int benchmark_selected_table(sqlite3 *db, int64_t job_id, const api_table_query *query, json_t **table,
                                    api_error *err)
{
    (void)query; /* pivot=precision, the one pivot */
    return benchmark_precision_table(db, job_id, table, err);
}

static const char *const benchmark_table_params[] = {"pivot", NULL};
static const char *const benchmark_pivots[] = {"precision", NULL};

/* --- comparison (GET /v1/compare) ------------------------------------------------- */

/* The table a job brings to a comparison: its own, with "Warm-up Steps"
 * always and its phase times raw [mean, std] cells (benchmark_table_with):
 * the comparison writes them out once the jobs share the columns, so that a
 * column has one count of decimals across the jobs. */
static int benchmark_compare_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    return benchmark_table_with(db, job_id, 1, table, err);
}

/* Where a run stands in a sweep: a row's baseline run has each of these equal
 * to the row's own (the model by name and shape, vocab, context, batch, mode). */
static const char *const compare_point_columns[] = {"model", "d_model", "d_ff", "num_layers", "num_heads",
                                                     "vocab_size", "context_length", "batch_size", "mode"};
/* How a run ran: matched too, with the row's own value, in those of them in
 * which the baseline job's runs at the row's point differ (a precision or
 * warm-up sweep); elsewhere the baseline job's one setting is the baseline. */
static const char *const compare_protocol_columns[] = {"precision", "attention", "warmup_steps", "measure_steps",
                                                        "graphs", "optimizer_in_backward", "seed"};
#define COMPARE_POINTS (sizeof compare_point_columns / sizeof compare_point_columns[0])
#define COMPARE_PROTOCOLS (sizeof compare_protocol_columns / sizeof compare_protocol_columns[0])

/* One benchmark_runs row as the comparison reads it. */
typedef struct compare_run {
    sqlite3_value *point[COMPARE_POINTS];       /* new (sqlite3_value_dup) */
    sqlite3_value *protocol[COMPARE_PROTOCOLS]; /* new */
    int succeeded;
    double total_mean_ms; /* ms, the whole step's mean; 0 when NULL */
} compare_run;

static void compare_runs_free(compare_run *runs, size_t count)
{
    for (size_t i = 0; runs && i < count; i++) {
        for (size_t k = 0; k < COMPARE_POINTS; k++)
            sqlite3_value_free(runs[i].point[k]);
        for (size_t k = 0; k < COMPARE_PROTOCOLS; k++)
            sqlite3_value_free(runs[i].protocol[k]);
    }
    free(runs);
}

/* The runs of job_id in run_id order (the table's rows). Sets *runs (new,
 * compare_runs_free) and *count. Returns 0 or -1 with err filled. */
static int compare_runs_load(sqlite3 *db, int64_t job_id, compare_run **runs, size_t *count, api_error *err)
{
    char sql[1024];
    size_t len = (size_t)snprintf(sql, sizeof sql, "SELECT status = 'succeeded', total_mean_ms");
    for (size_t k = 0; k < COMPARE_POINTS; k++)
        len += (size_t)snprintf(sql + len, sizeof sql - len, ", %s", compare_point_columns[k]);
    for (size_t k = 0; k < COMPARE_PROTOCOLS; k++)
        len += (size_t)snprintf(sql + len, sizeof sql - len, ", %s", compare_protocol_columns[k]);
    snprintf(sql + len, sizeof sql - len, " FROM benchmark_runs WHERE job_id = ? ORDER BY run_id");
    sqlite3_stmt *st = NULL;
    compare_run *list = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        api_fail(err, API_ERR_INTERNAL, NULL, "benchmark comparison: %s", sqlite3_errmsg(db));
        goto out;
    }
    sqlite3_bind_int64(st, 1, job_id);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t grown_cap = cap ? cap * 2 : 16;
            compare_run *grown = realloc(list, grown_cap * sizeof *grown);
            if (!grown)
                goto out_of_memory;
            list = grown;
            cap = grown_cap;
        }
        compare_run *r = &list[n++];
        memset(r, 0, sizeof *r);
        r->succeeded = sqlite3_column_int(st, 0);
        r->total_mean_ms = sqlite3_column_double(st, 1);
        int ok = 1;
        for (size_t k = 0; k < COMPARE_POINTS; k++)
            ok &= (r->point[k] = sqlite3_value_dup(sqlite3_column_value(st, 2 + (int)k))) != NULL;
        for (size_t k = 0; k < COMPARE_PROTOCOLS; k++)
            ok &= (r->protocol[k] = sqlite3_value_dup(sqlite3_column_value(st, 2 + (int)(COMPARE_POINTS + k)))) !=
                  NULL;
        if (!ok)
            goto out_of_memory;
    }
    if (step != SQLITE_DONE) {
        api_fail(err, API_ERR_INTERNAL, NULL, "benchmark comparison: %s", sqlite3_errmsg(db));
        goto out;
    }
    *runs = list;
    *count = n;
    list = NULL;
    rc = 0;
    goto out;
out_of_memory:
    api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory comparing benchmark jobs");
out:
    sqlite3_finalize(st);
    compare_runs_free(list, n);
    return rc;
}

/* Whether two column values are equal, NULL equal to NULL (SQL's IS). */
static int same_value(sqlite3_value *a, sqlite3_value *b)
{
    int type = sqlite3_value_type(a);
    if (type != sqlite3_value_type(b))
        return 0;
    switch (type) {
    case SQLITE_NULL:
        return 1;
    case SQLITE_INTEGER:
        return sqlite3_value_int64(a) == sqlite3_value_int64(b);
    case SQLITE_FLOAT:
        return sqlite3_value_double(a) == sqlite3_value_double(b);
    default: {
        const void *da = sqlite3_value_blob(a), *db = sqlite3_value_blob(b);
        int n = sqlite3_value_bytes(a);
        return n == sqlite3_value_bytes(b) && (n == 0 || memcmp(da, db, (size_t)n) == 0);
    }
    }
}

static int same_point(const compare_run *a, const compare_run *b)
{
    for (size_t k = 0; k < COMPARE_POINTS; k++)
        if (!same_value(a->point[k], b->point[k]))
            return 0;
    return 1;
}

/* A row's speedup against the baseline job's runs base[0..base_count): its
 * baseline run's mean total step time over the row's. The baseline run has
 * the row's point and, in each protocol field in which the baseline runs at
 * that point differ, the row's value. Null when there is no such run or more
 * than one, or either run did not succeed. Returns new. */
static json_t *speedup_cell(const compare_run *row, const compare_run *base, size_t base_count)
{
    const compare_run *first = NULL;
    int differs[COMPARE_PROTOCOLS] = {0};
    for (size_t i = 0; i < base_count; i++) {
        if (!same_point(&base[i], row))
            continue;
        if (!first)
            first = &base[i];
        for (size_t k = 0; k < COMPARE_PROTOCOLS; k++)
            differs[k] |= !same_value(first->protocol[k], base[i].protocol[k]);
    }
    const compare_run *match = NULL;
    size_t matches = 0;
    for (size_t i = 0; first && i < base_count; i++) {
        int same = same_point(&base[i], row);
        for (size_t k = 0; same && k < COMPARE_PROTOCOLS; k++)
            same = !differs[k] || same_value(base[i].protocol[k], row->protocol[k]);
        if (same) {
            match = &base[i];
            matches++;
        }
    }
    if (matches != 1 || !match->succeeded || !row->succeeded || !(match->total_mean_ms > 0) ||
        !(row->total_mean_ms > 0))
        return json_null();
    return json_real(match->total_mean_ms / row->total_mean_ms);
}

/* GET /v1/compare's "Speedup vs job N (×)": each row's speedup of the whole
 * step (speedup_cell) against the baseline job, after "Total (ms)". The
 * baseline job's own rows read 1 (each is its own baseline run), unless failed. */
static int benchmark_compare_column(sqlite3 *db, const int64_t *job_ids, size_t count, int64_t baseline_id,
                                    compare_column *column, api_error *err)
{
    compare_run *base = NULL, *runs = NULL;
    size_t base_count = 0, run_count = 0;
    json_t *cells = json_array();
    int rc = -1;
    if (!cells) {
        api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory comparing benchmark jobs");
        goto out;
    }
    if (compare_runs_load(db, baseline_id, &base, &base_count, err))
        goto out;
    for (size_t j = 0; j < count; j++) {
        if (compare_runs_load(db, job_ids[j], &runs, &run_count, err))
            goto out;
        json_t *job_cells = json_array();
        int appended = job_cells != NULL;
        for (size_t i = 0; appended && i < run_count; i++)
            appended = json_array_append_new(job_cells, speedup_cell(&runs[i], base, base_count)) == 0;
        compare_runs_free(runs, run_count);
        runs = NULL;
        if (appended)
            appended = json_array_append_new(cells, job_cells) == 0; /* steals job_cells */
        else
            json_decref(job_cells);
        if (!appended) {
            api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory comparing benchmark jobs");
            goto out;
        }
    }
    snprintf(column->name, sizeof column->name, "Speedup vs job %lld (×)", (long long)baseline_id);
    column->after = "Total (ms)";
    column->decimals = 2; /* as the seeds print a speedup, and as "Speedup vs fp32 (×)" */
    column->cells = cells;
    cells = NULL;
    rc = 0;
out:
    compare_runs_free(base, base_count);
    compare_runs_free(runs, run_count);
    json_decref(cells);
    return rc;
}

const jobkind jobkind_benchmark = {
    .name = "benchmark",
    .check = benchmark_check,
    .run = benchmark_run,
    .store_run = benchmark_store_run,
    .store_failed_runs = 1, /* a point that does not fit is a table row with its reason, as the seeds' OOM rows */
    .table = benchmark_table,
    .selected_table = benchmark_selected_table,
    .table_params = benchmark_table_params,
    .pivots = benchmark_pivots,
    .compare_table = benchmark_compare_table,
    .compare_column = benchmark_compare_column,
};
