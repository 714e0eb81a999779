/* The profile job: CUPTI traces a few steps of the model inside the worker;
 * kernels are joined to lmperf's NVTX ranges and summarised the way people
 * summarise nsys reports by hand (schema/0005_profile.sql).
 *
 * DESIGN: first, before anything is traced, every point's model is built,
 * warmed up and its profile_steps steps run untraced and timed (the overhead
 * baselines: CUPTI may leave part of its cost in a process even after it is
 * detached). Then per point, one model again: warm-up steps run untraced,
 * then the traced steps inside one profiler session (profiler.h), after one
 * traced step that is discarded (CUPTI's first-use cost). With graphs (the
 * default on a cuda worker) the phases of every measured step, untraced and
 * traced, are replays of one CUDA graph per phase captured after the eager
 * warm-up (phase_graphs.h); the traced pass captures inside the session, so
 * CUPTI sees each node created under lmperf's ranges and the replayed
 * kernels land in the same range tables as eager ones (profiler.h). A step
 * that cannot be captured runs eagerly and the run says why (graphs_note).
 * Every step is timed the same way:
 * synchronised wall clock and CUDA events around forward, backward and
 * optimizer (phases: kernel time inside each range beside its GPU span and
 * its event time, schema/0012_profile_phases.sql, and the span split by
 * what ran: a GEMM, other kernels only, nothing, schema/0030_profile_gemm_split.sql),
 * each per-step time kept
 * as its mean and its sample std over the steps (step_clock; the *_std
 * fields, schema/0028_profile_std.sql). With graphs, right after
 * the priming step of each pass (untraced and traced: before the discard, so
 * out of every table) profile_steps more steps are "gated": each phase's
 * replay is enqueued behind a blocking kernel until the host has launched
 * it, so its events hold the GPU's execution without the host's launch work
 * (gpu_gated, schema/0014_profile_gated.sql). Each step is wrapped in a
 * "step" range by the runner; forward, backward, optimizer, "layer N" and
 * the attention sub-ops come from kernels/model.c. A kernel counts in every
 * range open when it was launched. The per-op roofline uses FLOPs and bytes
 * by formula (float32 storage, full T×T attention as the naive kernels
 * compute it) against the device's peaks. The Chrome trace is a bulky field,
 * stored in profile_traces and served by GET /v1/jobs/{id}/trace (and
 * /events?run=N). CUPTI failing to start fails the job with its reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "clock_ms.h"
#include "device_peaks.h"
#include "jobkind.h"
#include "model.h"
#include "model_point.h"
#include "phase_graphs.h"
#include "profiler.h"
#include "stats.h"
#include "status.h"

#ifdef LMPERF_HAVE_CUDA
#include "cuda/backend_cuda.h"
#include "cuda/timing.h"
#else
typedef struct lmk_cuda_timer lmk_cuda_timer;
typedef struct lmk_cuda_gate lmk_cuda_gate;
#endif

#define PROFILE_NOTEWORTHY_PCT 2.0 /* non-GEMM kernels above this share of the step */
#define PROFILE_ALL "(all)"        /* the pseudo-range of every kernel (cuda_gpu_kern_sum) */
#define SOFTMAX_FLOPS_PER_ELEM 5.0 /* max, subtract, exp, sum, divide */
#define SOFTMAX_BWD_FLOPS_PER_ELEM 4.0
#define GATE_TIMEOUT_MS 1000.0     /* the blocking kernel gives up after this (gpu_gated) */

static const char *const bulky_fields[] = {"trace", NULL};

/* Memory bandwidth ceilings measured on the lent machines (device-to-device
 * copy, bytes read + written), matched by device name. */
static const struct { const char *match; double bytes_per_s; } bandwidth_peaks[] = {
    {"H200", 4.3e12},
    {"H100", 3.0e12},
};

/* Half-precision GEMM ceilings measured on the lent machines (8192³ bf16
 * on random data, KINDS.md); other precisions use the vendor peak table. */
static const struct { const char *match; double flops; } half_gemm_peaks[] = {
    {"H200", 790e12},
    {"H100", 798e12},
};

static double gemm_ceiling(const runctx_device *dev, lmk_precision prec)
{
    const char *src;
    if (prec == LMK_PREC_BF16 || prec == LMK_PREC_FP16)
        for (size_t i = 0; i < sizeof half_gemm_peaks / sizeof half_gemm_peaks[0]; i++)
            if (strstr(dev->name, half_gemm_peaks[i].match))
                return half_gemm_peaks[i].flops;
    return device_peak_flops(dev, prec, &src);
}

static double device_peak_bandwidth(const runctx_device *dev)
{
    for (size_t i = 0; i < sizeof bandwidth_peaks / sizeof bandwidth_peaks[0]; i++)
        if (strstr(dev->name, bandwidth_peaks[i].match))
            return bandwidth_peaks[i].bytes_per_s;
    return 0;
}

/* cuBLAS/cuBLASLt/CUTLASS GEMM kernels and the engine's own (causal_*_gemm_kernel) by name. */
static int kernel_is_gemm(const char *name)
{
    static const char *const patterns[] = {"gemm", "GEMM", "cutlass", "xmma", "cublas", "sm90_", "sm80_", "nvjet",
                                           "Kernel2<", "splitKreduce"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++)
        if (strstr(name, patterns[i]))
            return 1;
    return 0;
}

static int spec_int(const json_t *spec, const char *key, int fallback)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : fallback;
}

static int profile_check(json_t *spec, api_error *err)
{
    return model_point_check(spec, err);
}


/* The phases a step's CUDA events bracket; "step" is the runner's own range,
 * the others are kernels/model.c's. */
enum { PH_STEP, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"step", "forward", "backward", "optimizer"};

/* How a series of steps is timed, the same way with tracing off and on: the
 * synchronised wall clock of each step and, on a cuda worker, CUDA events on
 * the model's stream (event 0 before the forward, 1 after it, 2 after the
 * backward, 3 after the optimizer: the GPU's view of each phase, with no
 * synchronisation between phases). Each figure is kept as its mean and its
 * spread over the steps (the seeds report mean ± std). */
typedef struct step_clock {
    lmk_cuda_timer *timer;            /* borrowed; NULL: no events */
    lmk_running_stats wall;           /* ms, synchronised wall clock of each step */
    lmk_running_stats gpu[PH_COUNT];  /* ms per step; NAN values when there are no events, none for a phase
                                         the mode does not run */
    int steps;
    int gate_timed_out;               /* gated steps only: the blocking kernel gave up (figures not measured) */
} step_clock;

static void clock_reset(step_clock *c, lmk_cuda_timer *timer)
{
    *c = (step_clock){.timer = timer};
}

static int clock_mark(step_clock *c, int event)
{
#ifdef LMPERF_HAVE_CUDA
    if (c->timer)
        return lmk_cuda_timer_record(c->timer, event);
#endif
    (void)c, (void)event;
    return LMK_OK;
}

/* Adds the GPU time from event `from` to `to` to phase ph. */
static int clock_add(step_clock *c, int ph, int from, int to)
{
    double ms = NAN;
#ifdef LMPERF_HAVE_CUDA
    if (c->timer) {
        int rc = lmk_cuda_timer_elapsed(c->timer, from, to, &ms);
        if (rc != LMK_OK)
            return rc;
    }
#endif
    (void)from, (void)to;
    lmk_running_add(&c->gpu[ph], ms);
    return LMK_OK;
}

/* Mean ms per step of phase ph (NAN: not timed). */
static double clock_mean(const step_clock *c, int ph)
{
    return c->steps ? lmk_running_mean(&c->gpu[ph]) : NAN;
}

/* The sample standard deviation (ms) of phase ph over the steps; 0 for one step, NAN: not timed. */
static double clock_std(const step_clock *c, int ph)
{
    return c->steps ? lmk_running_std(&c->gpu[ph]) : NAN;
}

/* The model of one point, its step timer and, when its phases run as
 * graph replays, their graphs. */
typedef struct point_model {
    lmk_backend *b; /* borrowed */
    int32_t *tokens;
    lmk_allocator *a;
    lmk_model *m;
    int training;
    lmk_adamw_config opt; /* applied by the step, or inside backward (opt_in_backward) */
    lmk_cuda_timer *timer;                     /* NULL without CUDA */
    lmk_cuda_gate *gate;                       /* the gated steps' blocking kernel; NULL without CUDA */
    lmk_cuda_graph *graph[PHASE_GRAPH_COUNT]; /* per phase; NULL: eager */
} point_model;

/* phase_graphs' call: phase ph of the point's model through the model API. */
static int model_phase(void *ctx, int ph)
{
    point_model *pm = ctx;
    switch (ph) {
    case PHASE_FORWARD:
        return lmk_model_forward(pm->m, pm->training);
    case PHASE_BACKWARD:
        return lmk_model_backward(pm->m);
    default:
        return lmk_model_step(pm->m, &pm->opt);
    }
}

/* Phase ph of one step: a replay of its graph, or the model call. */
static int run_phase(point_model *pm, int ph)
{
    return pm->graph[ph] ? phase_graphs_launch(pm->b, pm->graph[ph]) : model_phase(pm, ph);
}

/* One step of the point's mode inside a "step" range, synchronised, timed
 * into c. */
static int one_step(point_model *pm, step_clock *c)
{
    int training = pm->training;
    double t0 = monotonic_ms();
    profiler_range_push("step");
    int rc = clock_mark(c, 0);
    if (rc == LMK_OK)
        rc = run_phase(pm, PHASE_FORWARD);
    if (rc == LMK_OK)
        rc = clock_mark(c, 1);
    if (rc == LMK_OK && training)
        rc = run_phase(pm, PHASE_BACKWARD);
    if (rc == LMK_OK && training)
        rc = clock_mark(c, 2);
    if (rc == LMK_OK && training)
        rc = run_phase(pm, PHASE_OPTIMIZER);
    if (rc == LMK_OK && training)
        rc = clock_mark(c, 3);
    profiler_range_pop();
    if (rc == LMK_OK)
        rc = pm->b->synchronize(pm->b);
    if (rc != LMK_OK)
        return rc;
    lmk_running_add(&c->wall, monotonic_ms() - t0);
    c->steps++;
    rc = clock_add(c, PH_FORWARD, 0, 1);
    if (rc == LMK_OK && training)
        rc = clock_add(c, PH_BACKWARD, 1, 2);
    if (rc == LMK_OK && training)
        rc = clock_add(c, PH_OPTIMIZER, 2, 3);
    if (rc == LMK_OK)
        rc = clock_add(c, PH_STEP, 0, training ? 3 : 1);
    return rc;
}

/* One gated step (gpu_gated): each phase's graph replay enqueued behind the
 * gate's blocking kernel, between CUDA events 0 and 1, then the gate opened
 * and the stream synchronised, so the events hold the GPU's execution of the
 * replay (CUPTI's GPU-side cost included) and not the host's work inside the
 * launch call (CUPTI's ≈ 1 µs per node when traced), which a synchronised
 * phase otherwise exposes. Phases run one after another like one_step's, not
 * inside a "step" range. Only for graph replays: one launch waits behind the
 * gate (an eager phase's launches would fill the stream's queue while the
 * GPU waits: the host would block inside a launch). Adds phase times and
 * their sum (step) to c; a timeout sets c->gate_timed_out, runs the step's
 * remaining phases ungated (the step completes) and stops. */
static int gated_step(point_model *pm, step_clock *c)
{
    int last = pm->training ? PHASE_OPTIMIZER : PHASE_FORWARD;
    double step_ms = 0;
    for (int ph = PHASE_FORWARD; ph <= last; ph++) {
        if (!pm->graph[ph])
            return LMK_INVALID;
#ifdef LMPERF_HAVE_CUDA
        int rc = lmk_cuda_gate_close(pm->gate);
        if (rc != LMK_OK)
            return rc;
        rc = lmk_cuda_timer_record(pm->timer, 0);
        if (rc == LMK_OK)
            rc = phase_graphs_launch(pm->b, pm->graph[ph]);
        if (rc == LMK_OK)
            rc = lmk_cuda_timer_record(pm->timer, 1);
        lmk_cuda_gate_open(pm->gate); /* on every path: the kernel must not wait for its timeout */
        int sync = pm->b->synchronize(pm->b);
        if (rc == LMK_OK)
            rc = sync;
        if (rc != LMK_OK)
            return rc;
        if (lmk_cuda_gate_timed_out(pm->gate)) {
            /* the step's later phases still run (ungated, untimed): their
             * graphs free what this one allocated, and a graph whose
             * allocations from its last launch are unfreed cannot be
             * launched again (cudaGraphLaunch: cudaErrorInvalidValue, the
             * next step's forward; seen at large@1024 bf16 on the H100,
             * kernels/PERF.md) */
            c->gate_timed_out = 1;
            for (int rest = ph + 1; rest <= last && rc == LMK_OK; rest++)
                rc = phase_graphs_launch(pm->b, pm->graph[rest]);
            return rc == LMK_OK ? pm->b->synchronize(pm->b) : rc;
        }
        double ms;
        if ((rc = lmk_cuda_timer_elapsed(pm->timer, 0, 1, &ms)) != LMK_OK)
            return rc;
        /* model phases PHASE_* are the clock's PH_FORWARD.. in order */
        lmk_running_add(&c->gpu[PH_FORWARD + ph], ms);
        step_ms += ms;
#endif
    }
    lmk_running_add(&c->gpu[PH_STEP], step_ms);
    c->steps++;
    return LMK_OK;
}

/* `steps` gated steps into c (reset first) when the point's phases are graph
 * replays; none (c->steps 0: every figure NAN) when eager or after a
 * timeout (c->gate_timed_out set). */
static int gated_steps(point_model *pm, int steps, step_clock *c)
{
    clock_reset(c, NULL);
    if (!pm->gate || !pm->graph[PHASE_FORWARD])
        return LMK_OK;
    int rc = LMK_OK;
    for (int st = 0; st < steps && rc == LMK_OK && !c->gate_timed_out; st++)
        rc = gated_step(pm, c);
    if (c->gate_timed_out) {
        clock_reset(c, NULL);
        c->gate_timed_out = 1;
    }
    return rc;
}

/* Whether the point's phases run as graph replays, and in which scope.
 * graphs (the spec's, default true) asks for them; a cpu backend, or a
 * phase that cannot be captured (fp16's optimizer step), runs eagerly and
 * *note says why. Returns the last phase to capture, or -1: eager. */
static int graphs_plan(const json_t *spec, const model_point *p, lmk_backend *b, int training, const char **scope,
                       const char **note)
{
    const json_t *want = json_object_get(spec, "graphs");
    int last = training ? PHASE_OPTIMIZER : PHASE_FORWARD;
    *scope = "none";
    *note = NULL;
    if (want && !json_is_true(want)) {
        *note = "graphs: false: every kernel is launched eagerly (and its launch traced); launch-bound steps pay "
                "CUPTI's per-launch cost";
        return -1;
    }
    if (!phase_graphs_cuda(b)) {
        *note = "graphs ignored: not a cuda worker";
        return -1;
    }
    if (!phase_graphs_capturable(p->prec, last, note))
        return -1;
    *scope = training ? "forward+backward+optimizer" : "forward";
    return last;
}

/* --- the summary: durations per (range name, kernel name) ---------------------- */

typedef struct cell {
    uint64_t *v; /* durations, ns */
    size_t n, cap;
} cell;

typedef struct summary {
    char **ranges;       /* distinct range names; [0] = PROFILE_ALL (borrowed strings) */
    size_t *range_inst;  /* instances per range name */
    size_t nr;
    char **kernels;      /* distinct kernel names (borrowed) */
    size_t nk;
    cell *cells;         /* nr × nk */
    uint64_t *range_total; /* kernel ns per range name */
} summary;

static size_t index_of(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return n;
}

static int cell_push(cell *c, uint64_t v)
{
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 16;
        uint64_t *nv = realloc(c->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        c->v = nv;
        c->cap = nc;
    }
    c->v[c->n++] = v;
    return 0;
}

static void summary_free(summary *s)
{
    if (s->cells)
        for (size_t i = 0; i < s->nr * s->nk; i++)
            free(s->cells[i].v);
    free(s->cells);
    free(s->ranges);
    free(s->range_inst);
    free(s->kernels);
    free(s->range_total);
}

/* Builds the summary of the session's kernels by the ranges each belongs to
 * (profiler_memberships); *unattributed counts kernels outside every range.
 * Returns 0 or -1 (out of memory). */
static int summary_build(summary *s, const profiler *prof, size_t *unattributed)
{
    size_t nr, nops, nmem;
    const prof_range *r = profiler_ranges(prof, &nr);
    const prof_op *ops = profiler_ops(prof, &nops);
    const uint32_t *mem = profiler_memberships(prof, &nmem);
    memset(s, 0, sizeof *s);
    s->ranges = calloc(nr + 1, sizeof *s->ranges);
    s->range_inst = calloc(nr + 1, sizeof *s->range_inst);
    s->kernels = calloc(nops + 1, sizeof *s->kernels);
    if (!s->ranges || !s->range_inst || !s->kernels)
        return -1;
    s->ranges[s->nr++] = PROFILE_ALL;
    s->range_inst[0] = 1;
    for (size_t i = 0; i < nr; i++) {
        size_t k = index_of(s->ranges, s->nr, r[i].name);
        if (k == s->nr)
            s->ranges[s->nr++] = r[i].name;
        s->range_inst[k]++;
    }
    for (size_t i = 0; i < nops; i++)
        if (ops[i].kind == PROF_KERNEL && index_of(s->kernels, s->nk, ops[i].name) == s->nk)
            s->kernels[s->nk++] = ops[i].name;
    s->cells = calloc(s->nr * s->nk + 1, sizeof *s->cells);
    s->range_total = calloc(s->nr, sizeof *s->range_total);
    if (!s->cells || !s->range_total)
        return -1;
    *unattributed = 0;
    for (size_t i = 0; i < nops; i++) {
        if (ops[i].kind != PROF_KERNEL)
            continue;
        size_t k = index_of(s->kernels, s->nk, ops[i].name);
        uint64_t dur = ops[i].end > ops[i].start ? ops[i].end - ops[i].start : 0;
        if (cell_push(&s->cells[k], dur))
            return -1;
        s->range_total[0] += dur;
        for (uint32_t m = 0; m < ops[i].in_count; m++) {
            size_t ri = index_of(s->ranges, s->nr, r[mem[ops[i].in_first + m]].name);
            if (cell_push(&s->cells[ri * s->nk + k], dur))
                return -1;
            s->range_total[ri] += dur;
        }
        *unattributed += ops[i].in_count == 0;
    }
    return 0;
}

static uint64_t cell_total(const cell *c)
{
    uint64_t t = 0;
    for (size_t i = 0; i < c->n; i++)
        t += c->v[i];
    return t;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The nsys columns of one cell (sorts its durations). */
static json_t *cell_row(const summary *s, size_t ri, size_t k)
{
    cell *c = &s->cells[ri * s->nk + k];
    qsort(c->v, c->n, sizeof *c->v, cmp_u64);
    uint64_t total = cell_total(c);
    double avg = (double)total / (double)c->n, var = 0;
    for (size_t i = 0; i < c->n; i++)
        var += ((double)c->v[i] - avg) * ((double)c->v[i] - avg);
    double med = c->n % 2 ? (double)c->v[c->n / 2] : 0.5 * ((double)c->v[c->n / 2 - 1] + (double)c->v[c->n / 2]);
    return json_pack("{s:s, s:I, s:s, s:b, s:I, s:I, s:f, s:f, s:I, s:I, s:f, s:f}", "range", s->ranges[ri],
                     "range_instances", (json_int_t)s->range_inst[ri], "kernel", s->kernels[k], "is_gemm",
                     kernel_is_gemm(s->kernels[k]), "instances", (json_int_t)c->n, "total_ns", (json_int_t)total,
                     "avg_ns", avg, "med_ns", med, "min_ns", (json_int_t)c->v[0], "max_ns",
                     (json_int_t)c->v[c->n - 1], "std_ns", c->n > 1 ? sqrt(var / (double)(c->n - 1)) : 0.0,
                     "share_pct", s->range_total[ri] ? 100.0 * (double)total / (double)s->range_total[ri] : 0.0);
}

static int cmp_row(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(x, "range")), json_string_value(json_object_get(y, "range")));
    if (c)
        return c;
    json_int_t tx = json_integer_value(json_object_get(x, "total_ns")),
               ty = json_integer_value(json_object_get(y, "total_ns"));
    return tx > ty ? -1 : tx < ty;
}

/* Rows sorted by range name, then total time descending (new). */
static json_t *summary_rows(const summary *s)
{
    size_t n = 0;
    json_t **rows = malloc((s->nr * s->nk + 1) * sizeof *rows);
    json_t *out = json_array();
    if (!rows)
        return out;
    for (size_t ri = 0; ri < s->nr; ri++)
        for (size_t k = 0; k < s->nk; k++)
            if (s->cells[ri * s->nk + k].n)
                rows[n++] = cell_row(s, ri, k);
    qsort(rows, n, sizeof *rows, cmp_row);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(out, rows[i]);
    free(rows);
    return out;
}

static size_t range_index(const summary *s, const char *name)
{
    return index_of(s->ranges, s->nr, name);
}

static uint64_t range_kernel_ns(const summary *s, const char *range, int gemm_only)
{
    size_t ri = range_index(s, range);
    uint64_t t = 0;
    for (size_t k = 0; ri < s->nr && k < s->nk; k++)
        if (!gemm_only || kernel_is_gemm(s->kernels[k]))
            t += cell_total(&s->cells[ri * s->nk + k]);
    return t;
}

/* Kernel time per instance of a range (ns); 0 when absent. */
static double per_instance_ns(const summary *s, const char *range)
{
    size_t ri = range_index(s, range);
    return ri < s->nr && s->range_inst[ri] ? (double)s->range_total[ri] / (double)s->range_inst[ri] : 0;
}

/* --- the computed answers ------------------------------------------------------------ */

static void add_answers(json_t *run, const summary *s, int training, const model_point *p)
{
    json_t *a = json_object();
    size_t fi = range_index(s, "forward"), bi = range_index(s, "backward");
    size_t top = s->nk, top2 = s->nk;
    uint64_t best = 0, best2 = 0;
    for (size_t k = 0; k < s->nk; k++) {
        uint64_t f = fi < s->nr ? cell_total(&s->cells[fi * s->nk + k]) : 0;
        uint64_t fb = f + (bi < s->nr ? cell_total(&s->cells[bi * s->nk + k]) : 0);
        if (f > best)
            best = f, top = k;
        if (fb > best2)
            best2 = fb, top2 = k;
    }
    if (top < s->nk) {
        json_object_set_new(a, "top_forward_kernel", json_string(s->kernels[top]));
        json_object_set_new(a, "top_forward_calls_per_forward",
                            json_real((double)s->cells[fi * s->nk + top].n / (double)s->range_inst[fi]));
        json_object_set_new(a, "top_forward_share_pct", json_real(100.0 * (double)best / (double)s->range_total[fi]));
    }
    if (training && top2 < s->nk) {
        json_object_set_new(a, "top_fwd_bwd_kernel", json_string(s->kernels[top2]));
        json_object_set_new(a, "top_forward_also_top_fwd_bwd", json_boolean(top == top2));
    }
    uint64_t fwd = range_kernel_ns(s, "forward", 0), step = range_kernel_ns(s, "step", 0);
    if (fwd)
        json_object_set_new(a, "gemm_share_forward_pct",
                            json_real(100.0 * (double)range_kernel_ns(s, "forward", 1) / (double)fwd));
    if (training && step)
        json_object_set_new(a, "gemm_share_step_pct",
                            json_real(100.0 * (double)range_kernel_ns(s, "step", 1) / (double)step));
    json_t *noteworthy = json_array();
    size_t si = range_index(s, "step");
    for (size_t k = 0; si < s->nr && k < s->nk; k++) {
        double share = step ? 100.0 * (double)cell_total(&s->cells[si * s->nk + k]) / (double)step : 0;
        if (!kernel_is_gemm(s->kernels[k]) && share > PROFILE_NOTEWORTHY_PCT)
            json_array_append_new(noteworthy, json_pack("{s:s, s:f}", "kernel", s->kernels[k], "share_pct", share));
    }
    json_object_set_new(a, "non_gemm_above_2pct", noteworthy);
    double sm = per_instance_ns(s, "attention softmax");
    double mm = per_instance_ns(s, "attention scores") + per_instance_ns(s, "attention values");
    double dh = (double)p->cfg.d_model / p->cfg.num_heads;
    double fused = per_instance_ns(s, "attention scores+softmax+values");
    if (fused > 0) /* naive_fused: no softmax time apart from the matmuls' */
        json_object_set_new(
            a, "attention",
            json_pack("{s:b, s:f, s:f, s:s}", "fused", 1, "fused_ns", fused, "flop_ratio_matmul_to_softmax",
                      4.0 * dh / SOFTMAX_FLOPS_PER_ELEM, "note",
                      "forward, per layer; attention naive_fused times the scores, the causal softmax and the "
                      "values as one range (one kernel under bf16/fp16 on a GPU), so the softmax's time is not apart "
                      "from the matmuls': profile attention naive for the split"));
    else
        json_object_set_new(a, "attention",
                        json_pack("{s:f, s:f, s:f, s:f, s:s}", "softmax_ns", sm, "matmul_ns", mm, "time_ratio_matmul_to_softmax",
                                  sm > 0 ? mm / sm : 0.0, "flop_ratio_matmul_to_softmax",
                                  4.0 * dh / SOFTMAX_FLOPS_PER_ELEM, "note",
                                  "forward, per layer; the two matmuls (scores, values) do 4·dh FLOPs per score "
                                  "element, the softmax about 5"));
    json_object_set_new(run, "answers", a);
}

/* --- the roofline ----------------------------------------------------------------------- */

static void roofline_row(json_t *rows, const summary *s, const char *op, const char *range, double flops,
                         double bytes, double time_ns, double peak_flops, double peak_bw)
{
    size_t ri = range ? range_index(s, range) : 0;
    if (range && ri == s->nr)
        return;
    size_t inst = range ? s->range_inst[ri] : 1;
    if (range)
        time_ns = per_instance_ns(s, range);
    if (time_ns <= 0)
        return;
    const char *bound = NULL;
    if (peak_flops > 0 && peak_bw > 0)
        bound = flops / bytes > peak_flops / peak_bw ? "compute" : "memory";
    json_array_append_new(rows, json_pack("{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:s?}", "op", op,
                                          "instances", (json_int_t)inst, "flops", flops, "bytes", bytes, "time_ns",
                                          time_ns, "tflops", flops / time_ns / 1e3, "gbps", bytes / time_ns,
                                          "peak_tflops", peak_flops > 0 ? json_real(peak_flops / 1e12) : json_null(),
                                          "peak_gbps", peak_bw > 0 ? json_real(peak_bw / 1e9) : json_null(),
                                          "bound", bound));
}

static void add_roofline(json_t *run, const summary *s, const model_point *p, const runctx_device *dev)
{
    const char *src;
    double B = p->batch, T = p->T, H = p->cfg.num_heads, d = p->cfg.d_model, ff = p->cfg.d_ff, V = p->cfg.vocab_size;
    double L = p->cfg.num_layers, N = B * T, dh = d / H, BH = B * H, S = BH * T * T;
    /* bytes per stored element: the engine keeps activations, scores and the
     * GEMM operands in 16 bits under bf16/fp16 (autocast storage), float32
     * otherwise; the logits stay float32 */
    int half = p->prec == LMK_PREC_BF16 || p->prec == LMK_PREC_FP16;
    double E = half ? 2.0 : 4.0, E_logits = 4.0;
    double gemm_peak = gemm_ceiling(dev, p->prec);
    double fp32_peak = device_peak_flops(dev, LMK_PREC_FP32, &src);
    double bw = device_peak_bandwidth(dev);
    json_t *rows = json_array();
    int flash = p->attention && strcmp(p->attention, "flash") == 0;
    int fused = range_index(s, "attention scores+softmax+values") < s->nr; /* naive_fused */
    if (flash) {
        /* fused kernels: Q, K, V in, O and the float32 logsumexp out; the
         * backward reads Q, K, V, O, dO and the logsumexp, writes dQ, dK, dV
         * (and D). FLOPs by lmk_attn_flops_* (causal: half the square). */
        lmk_attn_shape shape = {.B = p->batch, .H = p->cfg.num_heads, .T = p->T, .d = (int)dh, .causal = 1,
                                .dtype = half ? (p->prec == LMK_PREC_BF16 ? LMK_BF16 : LMK_F16) : LMK_F32};
        double qkv = BH * T * dh;
        roofline_row(rows, s, "attention flash", "attention flash", lmk_attn_flops_fwd(&shape),
                     E * 4 * qkv + 4.0 * BH * T, 0, gemm_peak, bw);
        roofline_row(rows, s, "attention flash backward", "attention flash backward", lmk_attn_flops_bwd(&shape),
                     E * 8 * qkv + 8.0 * BH * T, 0, gemm_peak, bw);
    } else {
        roofline_row(rows, s, "attention scores", "attention scores", 2 * S * dh, E * (2 * BH * T * dh + S), 0,
                     gemm_peak, bw);
        roofline_row(rows, s, "attention softmax", "attention softmax", SOFTMAX_FLOPS_PER_ELEM * S, E * 2 * S, 0,
                     fp32_peak, bw);
        roofline_row(rows, s, "attention values", "attention values", 2 * S * dh, E * (S + 2 * BH * T * dh), 0,
                     gemm_peak, bw);
        if (fused) /* dK = dSᵀ q alone */
            roofline_row(rows, s, "attention scores backward", "attention scores backward", 2 * S * dh,
                         E * (S + 2 * BH * T * dh), 0, gemm_peak, bw);
        else /* dQ = dS k and dK = dSᵀ q */
            roofline_row(rows, s, "attention scores backward", "attention scores backward", 4 * S * dh,
                         E * (2 * S + 4 * BH * T * dh), 0, gemm_peak, bw);
        roofline_row(rows, s, "attention softmax backward", "attention softmax backward",
                     SOFTMAX_BWD_FLOPS_PER_ELEM * S, E * 3 * S, 0, fp32_peak, bw);
        if (fused) /* dV = Pᵀ dO alone */
            roofline_row(rows, s, "attention values backward", "attention values backward", 2 * S * dh,
                         E * (S + 2 * BH * T * dh), 0, gemm_peak, bw);
        else /* dV = Pᵀ dO and dP = dO vᵀ */
            roofline_row(rows, s, "attention values backward", "attention values backward", 4 * S * dh,
                         E * (2 * S + 4 * BH * T * dh), 0, gemm_peak, bw);
        /* naive_fused: scores, softmax and values in one kernel (reads q, k, v; writes P and o), and dP,
         * the softmax backward and dQ in one (reads dO, v, k, o, P; writes dS and dQ); the values backward
         * range then holds dV alone, the scores backward range dK alone */
        roofline_row(rows, s, "attention scores+softmax+values", "attention scores+softmax+values",
                     4 * S * dh + SOFTMAX_FLOPS_PER_ELEM * S, E * (4 * BH * T * dh + S), 0, gemm_peak, bw);
        roofline_row(rows, s, "attention dP+softmax+dQ backward", "attention dP+softmax+dQ backward",
                     4 * S * dh + SOFTMAX_BWD_FLOPS_PER_ELEM * S, E * (5 * BH * T * dh + 2 * S), 0, gemm_peak, bw);
    }
    /* the linear layers of one forward: GEMM time in forward less the attention matmuls */
    size_t fi = range_index(s, "forward");
    if (fi < s->nr) {
        double lin_flops = 2 * N * (L * (4 * d * d + 3 * d * ff) + d * V);
        double lin_bytes = E * (L * (4 * (2 * N * d + d * d) + 2 * (N * d + d * ff + N * ff) + (N * ff + ff * d + N * d)) +
                                N * d + d * V) + E_logits * N * V;
        double attn_gemm = 0; /* GEMM-classified kernels of the attention (naive: its two matmuls) */
        static const char *const attn[] = {"attention scores", "attention values", "attention flash"};
        for (int i = 0; i < 3; i++)
            attn_gemm += (double)range_kernel_ns(s, attn[i], 1);
        double t = ((double)range_kernel_ns(s, "forward", 1) - attn_gemm) / (double)s->range_inst[fi];
        roofline_row(rows, s, "forward linear layers (GEMMs)", NULL, lin_flops, lin_bytes, t, gemm_peak, bw);
    }
    json_object_set_new(run, "roofline", rows);
    json_object_set_new(run, "roofline_notes",
                        json_string("FLOPs and bytes per instance by formula: the engine's storage (16-bit "
                                    "activations, scores and GEMM operands under bf16/fp16, float32 otherwise; "
                                    "float32 logits), the full T×T scores the naive kernels compute, flash FLOPs "
                                    "by the causal half-square convention; time = kernel time inside the range per "
                                    "instance; "
                                    "ceilings: the measured bf16/fp16 GEMM rate (H100 798, H200 790 TFLOP/s) or "
                                    "the vendor dense peak for other precisions (GEMMs), fp32 (softmax), and the "
                                    "measured copy bandwidth"));
}

/* --- the Chrome trace ------------------------------------------------------------------ */

static int cmp_api_correlation(const void *a, const void *b)
{
    const prof_api *x = a, *y = b;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

static double us(uint64_t t, uint64_t t0)
{
    return (double)(int64_t)(t - t0) / 1e3;
}

#define TRACE_REPLAY_TID 0 /* the GPU's track of replayed ranges (stream ids start at 1) */

/* Trace Event Format: CPU ranges and launching API calls on pid 1, device
 * work on pid 2 with one track per stream, the ranges replayed in CUDA
 * graphs on a track of their own on pid 2 (at GPU times: no CPU range exists
 * for them), flow arrows launch → first op of each launch (a graph launch
 * runs many). */
static json_t *build_trace(const profiler *prof, const char *title)
{
    size_t nr, nops, napi;
    const prof_range *r = profiler_ranges(prof, &nr);
    const prof_op *ops = profiler_ops(prof, &nops);
    const prof_api *api = profiler_apis(prof, &napi);
    uint64_t t0 = UINT64_MAX;
    for (size_t i = 0; i < nr; i++)
        t0 = r[i].start < t0 ? r[i].start : t0;
    for (size_t i = 0; i < nops; i++) {
        t0 = ops[i].start < t0 ? ops[i].start : t0;
        if (ops[i].launch)
            t0 = ops[i].launch < t0 ? ops[i].launch : t0;
    }
    json_t *ev = json_array();
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid", 1,
                                        "args", "name", "CPU (lmperf worker)"));
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid", 2,
                                        "args", "name", "GPU"));
    int replays = 0;
    for (size_t i = 0; i < nr; i++) {
        int replayed = r[i].replay != 0;
        replays |= replayed;
        json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:I, s:{s:i, s:I}}", "name", r[i].name,
                                            "cat", "nvtx", "ph", "X", "ts", us(r[i].start, t0), "dur",
                                            (double)(r[i].end - r[i].start) / 1e3, "pid", replayed ? 2 : 1, "tid",
                                            replayed ? (json_int_t)TRACE_REPLAY_TID : (json_int_t)r[i].thread,
                                            "args", "depth", r[i].depth, "graph_launch", (json_int_t)r[i].replay));
    }
    if (replays)
        json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid",
                                            2, "tid", TRACE_REPLAY_TID, "args", "name",
                                            "NVTX ranges replayed in CUDA graphs"));
    /* only the calls that launched device work (the rest is noise); the
     * calls are sorted by correlation id (profiler_stop) */
    unsigned char *launched = calloc(napi + 1, 1);
    for (size_t j = 0; launched && j < nops; j++) {
        if (!ops[j].launch)
            continue;
        prof_api key = {.correlation = ops[j].correlation};
        const prof_api *hit = bsearch(&key, api, napi, sizeof *api, cmp_api_correlation);
        if (!hit)
            continue;
        size_t at = (size_t)(hit - api), lo = at, hi = at;
        while (lo > 0 && api[lo - 1].correlation == key.correlation)
            lo--;
        while (hi + 1 < napi && api[hi + 1].correlation == key.correlation)
            hi++;
        for (size_t i = lo; i <= hi; i++)
            launched[i] |= api[i].start == ops[j].launch;
    }
    for (size_t i = 0; launched && i < napi; i++) {
        if (launched[i])
            json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:I, s:{s:I}}", "name", api[i].name,
                                                "cat", "cuda_api", "ph", "X", "ts", us(api[i].start, t0), "dur",
                                                (double)(api[i].end - api[i].start) / 1e3, "pid", 1, "tid",
                                                (json_int_t)api[i].thread, "args", "correlation",
                                                (json_int_t)api[i].correlation));
    }
    /* one arrow per launch call, to its first op (ops are sorted by start):
     * the launch calls marked above are reused as "arrow drawn" */
    static const char *const cats[] = {"kernel", "memcpy", "memset"};
    for (size_t i = 0; i < nops; i++) {
        const prof_op *o = &ops[i];
        json_t *args = o->kind == PROF_KERNEL
                           ? json_pack("{s:[i,i,i], s:[i,i,i], s:I}", "grid", o->grid[0], o->grid[1], o->grid[2],
                                       "block", o->block[0], o->block[1], o->block[2], "correlation",
                                       (json_int_t)o->correlation)
                           : json_pack("{s:I, s:I}", "bytes", (json_int_t)o->bytes, "correlation",
                                       (json_int_t)o->correlation);
        if (o->graph_node)
            json_object_set_new(args, "graph_node", json_integer((json_int_t)o->graph_node));
        json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:I, s:o}", "name", o->name, "cat",
                                            cats[o->kind], "ph", "X", "ts", us(o->start, t0), "dur",
                                            (double)(o->end - o->start) / 1e3, "pid", 2, "tid",
                                            (json_int_t)o->stream, "args", args));
        if (!o->launch || !launched)
            continue;
        prof_api key = {.correlation = o->correlation};
        const prof_api *hit = bsearch(&key, api, napi, sizeof *api, cmp_api_correlation);
        if (!hit || launched[hit - api] != 1)
            continue;
        launched[hit - api] = 2; /* this launch's arrow is drawn */
        json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:I, s:f, s:i, s:I}", "name", "launch", "cat", "flow",
                                            "ph", "s", "id", (json_int_t)o->correlation, "ts", us(o->launch, t0),
                                            "pid", 1, "tid", (json_int_t)o->launch_thread));
        json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:s, s:I, s:f, s:i, s:I}", "name", "launch", "cat",
                                            "flow", "ph", "f", "bp", "e", "id", (json_int_t)o->correlation, "ts",
                                            us(o->start, t0), "pid", 2, "tid", (json_int_t)o->stream));
    }
    free(launched);
    return json_pack("{s:o, s:s, s:{s:s}}", "traceEvents", ev, "displayTimeUnit", "ns", "otherData", "title", title);
}

/* Per range of the session: the range projected onto the GPU (first start
 * to last end of the kernels inside it; 0 when none: the CPU range ends long
 * before its kernels do when launches run ahead), the time at least one of
 * those kernels ran (busy: the union of their intervals, below their summed
 * time when kernels of two streams overlap, e.g. an eager backward's overlap
 * GEMMs), the time at least one of its GEMM kernels ran (gemm_busy: the union
 * of the intervals of the kernels kernel_is_gemm names; busy − gemm_busy is
 * the time only other kernels ran) and its host time (the CPU range, push to
 * pop; a replayed range has none: the graph launch call that replayed it).
 * ns. */
typedef struct range_times {
    uint64_t span, busy, gemm_busy, host;
} range_times;

/* The union of intervals arriving in order of start, per range: the merged
 * interval so far (start, end) and the total of those already closed. */
typedef struct interval_union {
    uint64_t start, end, total;
} interval_union;

static void interval_union_add(interval_union *u, uint64_t start, uint64_t end)
{
    if (start > u->end) { /* a gap: the merged interval so far is done */
        u->total += u->end - u->start;
        u->start = start;
        u->end = start;
    }
    u->end = end > u->end ? end : u->end;
}

static uint64_t interval_union_total(const interval_union *u)
{
    return u->total + (u->end - u->start);
}

/* One entry per profiler_ranges() (new; NULL when out of memory). */
static range_times *range_times_build(const profiler *prof)
{
    size_t nr, nops, nmem, napi;
    const prof_range *r = profiler_ranges(prof, &nr);
    const prof_op *ops = profiler_ops(prof, &nops);
    const uint32_t *mem = profiler_memberships(prof, &nmem);
    const prof_api *api = profiler_apis(prof, &napi);
    range_times *t = calloc(nr + 1, sizeof *t);
    uint64_t *first = malloc((nr + 1) * sizeof *first), *last = calloc(nr + 1, sizeof *last);
    /* each range's kernels, and its GEMM kernels, merged: ops are sorted by start */
    interval_union *all = calloc(nr + 1, sizeof *all), *gemm = calloc(nr + 1, sizeof *gemm);
    if (!t || !first || !last || !all || !gemm) {
        free(t);
        t = NULL;
        goto out;
    }
    for (size_t i = 0; i < nr; i++)
        first[i] = UINT64_MAX;
    for (size_t i = 0; i < nops; i++) {
        if (ops[i].kind != PROF_KERNEL)
            continue;
        int is_gemm = ops[i].name && kernel_is_gemm(ops[i].name);
        for (uint32_t m = 0; m < ops[i].in_count; m++) {
            size_t ri = mem[ops[i].in_first + m];
            first[ri] = ops[i].start < first[ri] ? ops[i].start : first[ri];
            last[ri] = ops[i].end > last[ri] ? ops[i].end : last[ri];
            interval_union_add(&all[ri], ops[i].start, ops[i].end);
            if (is_gemm)
                interval_union_add(&gemm[ri], ops[i].start, ops[i].end);
        }
    }
    for (size_t i = 0; i < nr; i++) {
        t[i].busy = interval_union_total(&all[i]);
        t[i].gemm_busy = interval_union_total(&gemm[i]);
        t[i].span = last[i] > first[i] ? last[i] - first[i] : 0;
        t[i].host = r[i].end - r[i].start;
        if (r[i].replay) {
            prof_api key = {.correlation = r[i].replay};
            const prof_api *a = bsearch(&key, api, napi, sizeof *api, cmp_api_correlation);
            t[i].host = a && a->end > a->start ? a->end - a->start : 0;
        }
    }
out:
    free(first);
    free(last);
    free(all);
    free(gemm);
    return t;
}

/* A number, or null when not measured (NAN). */
static json_t *real_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

/* The tracing overhead: the same steps untraced and traced, each timed by
 * one_step (synchronised wall clock; CUDA events of the whole step), and by
 * gated_steps (gpu_gated; graphs: whether the phases were replays). */
static void add_overhead(json_t *run, const step_clock *plain, const step_clock *traced, const step_clock *gated_plain,
                         const step_clock *gated_traced, int graphs)
{
    double wall0 = lmk_running_mean(&plain->wall), wall1 = lmk_running_mean(&traced->wall);
    double gpu0 = clock_mean(plain, PH_STEP), gpu1 = clock_mean(traced, PH_STEP);
    json_object_set_new(run, "step_ms_unprofiled", json_real(wall0));
    json_object_set_new(run, "step_ms_profiled", json_real(wall1));
    /* the spread over the steps (sample standard deviation, 0 for one step) */
    json_object_set_new(run, "step_ms_unprofiled_std", real_or_null(lmk_running_std(&plain->wall)));
    json_object_set_new(run, "step_ms_profiled_std", real_or_null(lmk_running_std(&traced->wall)));
    json_object_set_new(run, "overhead_pct", json_real(wall0 > 0 ? 100.0 * (wall1 - wall0) / wall0 : 0.0));
    json_object_set_new(run, "step_gpu_ms_unprofiled", real_or_null(gpu0));
    json_object_set_new(run, "step_gpu_ms_profiled", real_or_null(gpu1));
    json_object_set_new(run, "overhead_gpu_pct", real_or_null(gpu0 > 0 ? 100.0 * (gpu1 - gpu0) / gpu0 : NAN));
    json_object_set_new(run, "overhead_note",
                        json_string("mean per step over profile_steps steps, first untraced (every point before "
                                    "anything is traced), then traced; both after the same warm-up, graph capture "
                                    "(graphs_scope) and one unreported step (graph upload; traced: CUPTI's first "
                                    "use), so like is compared with like: graph replays with graph replays, eager "
                                    "with eager; each step timed the same way: synchronised wall clock "
                                    "(overhead_pct) and CUDA events on the model's stream (overhead_gpu_pct); per "
                                    "phase: phases[].event_ns_unprofiled vs event_ns_profiled; gpu_gated: see "
                                    "gpu_gated_note"));
    double g0 = clock_mean(gated_plain, PH_STEP), g1 = clock_mean(gated_traced, PH_STEP);
    json_object_set_new(run, "step_gpu_gated_ms_unprofiled", real_or_null(g0));
    json_object_set_new(run, "step_gpu_gated_ms_profiled", real_or_null(g1));
    json_object_set_new(run, "overhead_gpu_gated_pct", real_or_null(g0 > 0 ? 100.0 * (g1 - g0) / g0 : NAN));
    const char *note;
    if (gated_plain->gate_timed_out || gated_traced->gate_timed_out)
        note = "gpu_gated not measured: the gate timed out (the blocking kernel gave up after 1 s before the host "
               "had enqueued the replay behind it)";
    else if (!graphs)
        note = "not gated: eager (only a graph replay, one launch, may wait behind the gate: an eager phase's "
               "launches would fill the stream's queue while the GPU waits)";
    else
        note = "gpu_gated: CUDA events around each phase's graph replay, enqueued behind a blocking kernel that "
               "held the GPU until the host had launched it (NVBench's method): the GPU's execution of the phase, "
               "CUPTI's GPU-side cost included, without the host's launch work (CUPTI's ~1 us per node, exposed "
               "by synchronised phases); per step the sum of the phases; profile_steps gated steps untraced and "
               "traced, after the priming step";
    json_object_set_new(run, "gpu_gated_note", json_string(note));
}

/* Per phase (step, forward, backward, optimizer): means per instance of the
 * traced steps' kernel time inside the range (summed, and busy: the union
 * of the kernels' intervals, which kernel_pct_of_event is taken of; busy's
 * GEMM part gemm_busy_ns, the rest other_only_ns, and gpu_idle_ns the span
 * less busy), the
 * range on the GPU (first kernel start to last kernel end), the CPU range
 * (push to pop), and the CUDA-event time of the phase traced and untraced
 * (new), and the gated time of its replay traced and untraced (NULL when
 * eager); each event and gated time (mean per step) with its sample
 * standard deviation over the steps beside it (*_std, ns; 0 for one step,
 * null where the mean is). */
static json_t *phase_rows(const summary *s, const prof_range *r, size_t nr, const range_times *times,
                          const step_clock *plain, const step_clock *traced, const step_clock *gated_plain,
                          const step_clock *gated_traced, int training)
{
    json_t *rows = json_array();
    for (int ph = 0; ph < PH_COUNT; ph++) {
        if (!training && (ph == PH_BACKWARD || ph == PH_OPTIMIZER))
            continue;
        uint64_t wall = 0, span = 0, busy = 0, gemm_busy = 0;
        size_t n = 0;
        for (size_t i = 0; i < nr; i++)
            if (strcmp(r[i].name, phase_names[ph]) == 0) {
                wall += times[i].host, n++;
                span += times[i].span;
                busy += times[i].busy;
                gemm_busy += times[i].gemm_busy;
            }
        double kernel = n ? (double)range_kernel_ns(s, phase_names[ph], 0) / (double)n : 0;
        double kernel_busy = n ? (double)busy / (double)n : 0;
        double ev1 = clock_mean(traced, ph) * 1e6, ev0 = clock_mean(plain, ph) * 1e6;
        double g1 = clock_mean(gated_traced, ph) * 1e6, g0 = clock_mean(gated_plain, ph) * 1e6;
        json_t *row = json_pack(
            "{s:s, s:I, s:f, s:f, s:f, s:f, s:o, s:o, s:o, s:o, s:o, s:o}", "phase", phase_names[ph], "instances",
            (json_int_t)n, "kernel_ns", kernel, "kernel_busy_ns", kernel_busy, "gpu_span_ns",
            n ? (double)span / (double)n : 0.0, "range_wall_ns", n ? (double)wall / (double)n : 0.0,
            "event_ns_profiled", real_or_null(ev1), "event_ns_unprofiled", real_or_null(ev0), "kernel_pct_of_event",
            real_or_null(ev1 > 0 ? 100.0 * kernel_busy / ev1 : NAN), "gated_ns_profiled", real_or_null(g1),
            "gated_ns_unprofiled", real_or_null(g0), "overhead_gated_pct",
            real_or_null(g0 > 0 ? 100.0 * (g1 - g0) / g0 : NAN));
        /* the phase's GPU span split by what ran: a GEMM (gemm_busy_ns), only other kernels (other_only_ns),
         * no kernel (gpu_idle_ns; memcpys and memsets count as idle); the three add up to gpu_span_ns */
        json_object_set_new(row, "gemm_busy_ns", json_real(n ? (double)gemm_busy / (double)n : 0));
        json_object_set_new(row, "other_only_ns", json_real(n ? (double)(busy - gemm_busy) / (double)n : 0));
        json_object_set_new(row, "gpu_idle_ns", json_real(n ? (double)(span - busy) / (double)n : 0)); /* busy ≤ span */
        json_object_set_new(row, "event_ns_profiled_std", real_or_null(clock_std(traced, ph) * 1e6));
        json_object_set_new(row, "event_ns_unprofiled_std", real_or_null(clock_std(plain, ph) * 1e6));
        json_object_set_new(row, "gated_ns_profiled_std", real_or_null(clock_std(gated_traced, ph) * 1e6));
        json_object_set_new(row, "gated_ns_unprofiled_std", real_or_null(clock_std(gated_plain, ph) * 1e6));
        json_array_append_new(rows, row);
    }
    return rows;
}

/* --- running ------------------------------------------------------------------------- */

/* The cuda backend's last error as " (text)", or "". */
static const char *backend_error(lmk_backend *b)
{
    static __thread char text[300];
    text[0] = 0;
#ifdef LMPERF_HAVE_CUDA
    const char *e = lmk_backend_cuda_last_error(b);
    if (e && e[0])
        snprintf(text, sizeof text, " (%s)", e);
#else
    (void)b;
#endif
    return text;
}

static void point_model_free(point_model *pm)
{
    if (pm->b)
        phase_graphs_free(pm->b, pm->graph, PHASE_GRAPH_COUNT);
#ifdef LMPERF_HAVE_CUDA
    lmk_cuda_gate_free(pm->gate);
    lmk_cuda_timer_free(pm->timer);
#endif
    lmk_model_free(pm->m);
    lmk_allocator_free(pm->a);
    free(pm->tokens);
    memset(pm, 0, sizeof *pm);
}

/* Builds the point's model with its batch, a 4-event timer and a gate;
 * opt_in_backward: the model's AdamW runs inside backward
 * (lmk_model_optimizer_in_backward). Returns LMK_OK or a status (pm freed);
 * *what says which part failed. */
static int point_model_create(lmk_backend *b, const model_point *p, int training, int opt_in_backward,
                              point_model *pm, const char **what)
{
    size_t n = (size_t)p->batch * p->T;
    int rc = LMK_NOMEM;
    memset(pm, 0, sizeof *pm);
    pm->b = b;
    pm->training = training;
    pm->opt = lmk_adamw_defaults();
    *what = "model";
    pm->tokens = malloc(2 * n * sizeof *pm->tokens);
    if (!pm->tokens || lmk_allocator_create(b, &pm->a) != LMK_OK)
        goto failed;
    model_point_tokens(p, pm->tokens, pm->tokens + n);
    if ((rc = lmk_model_create(b, pm->a, &p->cfg, p->batch, p->T, p->prec, p->seed, training, &pm->m)) != LMK_OK ||
        (rc = lmk_model_set_batch(pm->m, pm->tokens, pm->tokens + n)) != LMK_OK)
        goto failed;
    *what = "optimizer_in_backward";
    if (opt_in_backward && (rc = lmk_model_optimizer_in_backward(pm->m, &pm->opt)) != LMK_OK)
        goto failed;
#ifdef LMPERF_HAVE_CUDA
    *what = "CUDA events";
    if ((rc = lmk_cuda_timer_create(b, 4, &pm->timer)) != LMK_OK)
        goto failed;
    *what = "gate (pinned mapped host memory)";
    if ((rc = lmk_cuda_gate_create(b, GATE_TIMEOUT_MS, &pm->gate)) != LMK_OK)
        goto failed;
#endif
    return LMK_OK;
failed:
    point_model_free(pm);
    return rc;
}

/* The warm-up steps, eager (they size the scratch a capture needs: with no
 * warm-up and graphs (last >= 0), one unreported eager step). Returns LMK_OK
 * or a status. */
static int warm_up(point_model *pm, int warmup, int last)
{
    step_clock ignored;
    clock_reset(&ignored, pm->timer);
    int rc = LMK_OK;
    int eager = last >= 0 && warmup == 0 ? 1 : warmup;
    for (int st = 0; st < eager && rc == LMK_OK; st++)
        rc = one_step(pm, &ignored);
    return rc;
}

/* When last >= 0, captures phases 0..last into graphs; then one unreported
 * step (the first replay uploads the graphs; traced, CUPTI's first use): the
 * untraced and the traced steps both start after it. Returns LMK_OK or a
 * status (detail says which capture failed). */
static int capture_and_prime(point_model *pm, int last, char *detail, size_t len)
{
    step_clock ignored;
    clock_reset(&ignored, pm->timer);
    int rc = LMK_OK;
    if (last >= 0)
        rc = phase_graphs_capture(pm->b, last, model_phase, pm, pm->graph, detail, len);
    return rc == LMK_OK ? one_step(pm, &ignored) : rc;
}

/* The untraced steps of every point, measured before any point is traced:
 * CUPTI may leave part of its cost in the launch path of a process (small
 * bf16 forward untraced after traced points: 5.2 ms without detaching, 3.4 ms
 * after detaching, 2.6-3.9 ms clean on an H200), so a baseline taken after
 * tracing could hide part of the overhead. One job at a time per worker, like the
 * profiler session (profiler.h): run_point takes the baselines in sweep
 * order from here. */
typedef struct baseline {
    int rc;              /* LMK_OK when measured */
    step_clock clock;    /* profile_steps untraced steps after the warm-up (graph replays when graphs_plan says so) */
    step_clock gated;    /* profile_steps untraced gated steps before them (gated_steps) */
    char detail[300];    /* a failed graph capture */
} baseline;

static struct {
    baseline *points;    /* one per sweep point; NULL outside profile_run */
    size_t count, next;
    int traced_before;   /* CUPTI had been attached in this worker before the baselines */
} job_baselines;

static int measure_baselines(run_ctx *ctx, lmk_backend *b, const json_t *spec, char *errbuf, size_t errlen)
{
    size_t count = model_point_count(spec);
    int warmup = spec_int(spec, "warmup_steps", 2), steps = spec_int(spec, "profile_steps", 1);
    job_baselines.points = calloc(count + 1, sizeof *job_baselines.points);
    if (!job_baselines.points) {
        snprintf(errbuf, errlen, "out of host memory");
        return LMK_NOMEM;
    }
    job_baselines.count = count;
    job_baselines.next = 0;
    job_baselines.traced_before = profiler_sessions() > 0;
    for (size_t i = 0; i < count; i++) {
        model_point p;
        point_model pm;
        const char *what;
        baseline *base = &job_baselines.points[i];
        base->rc = LMK_INVALID;
        if (runctx_cancelled(ctx))
            return LMK_CANCELLED;
        if (model_point_at(spec, i, &p))
            continue; /* the sweep reports it */
        int training = !p.mode || strcmp(p.mode, "train_step") == 0;
        int opt_in_backward = model_point_opt_in_backward(spec, training);
        json_t *scratch = json_object();
        int fits = model_point_preflight(&p, training, 2, opt_in_backward, runctx_device_info(ctx), scratch) == 0;
        json_decref(scratch);
        if (!fits || point_model_create(b, &p, training, opt_in_backward, &pm, &what) != LMK_OK)
            continue; /* run_point fails the point with the reason */
        const char *scope, *note;
        int last = graphs_plan(spec, &p, b, training, &scope, &note);
        clock_reset(&base->clock, pm.timer);
        int rc = warm_up(&pm, warmup, last);
        if (rc == LMK_OK)
            rc = capture_and_prime(&pm, last, base->detail, sizeof base->detail);
        if (rc == LMK_OK)
            rc = gated_steps(&pm, steps, &base->gated);
        for (int st = 0; st < steps && rc == LMK_OK; st++)
            rc = one_step(&pm, &base->clock);
        base->clock.timer = NULL;
        base->rc = rc;
        if (rc != LMK_OK && !base->detail[0]) /* the failing call and its message */
            snprintf(base->detail, sizeof base->detail, "%s", backend_error(b));
        point_model_free(&pm);
    }
    return LMK_OK;
}

/* Runs one point. Returns the run (new); *job_error set (and NULL returned)
 * when CUPTI cannot trace: that fails the job. */
static json_t *run_point(run_ctx *ctx, lmk_backend *b, const json_t *spec, const model_point *p, int *cancelled,
                         char *job_error, size_t errlen)
{
    json_t *run = model_point_run_json(p);
    int training = !p->mode || strcmp(p->mode, "train_step") == 0;
    int opt_in_backward = model_point_opt_in_backward(spec, training);
    int warmup = spec_int(spec, "warmup_steps", 2), steps = spec_int(spec, "profile_steps", 1);
    /* this point's untraced steps (measure_baselines, same sweep order) */
    const baseline *base = NULL;
    if (job_baselines.points && job_baselines.next < job_baselines.count)
        base = &job_baselines.points[job_baselines.next];
    job_baselines.next++;
    if (!p->mode)
        json_object_set_new(run, "mode", json_string("train_step"));
    json_object_set_new(run, "warmup_steps", json_integer(warmup));
    json_object_set_new(run, "profile_steps", json_integer(steps));
    json_object_set_new(run, "optimizer_in_backward", json_boolean(opt_in_backward));
    if (model_point_preflight(p, training, 2, opt_in_backward, runctx_device_info(ctx), run))
        return run;
    point_model pm = {0};
    profiler *prof = NULL;
    const char *what, *scope, *note;
    int rc;
    int last = graphs_plan(spec, p, b, training, &scope, &note);
    json_object_set_new(run, "graphs", json_boolean(last >= 0));
    json_object_set_new(run, "graphs_scope", json_string(scope));
    json_object_set_new(run, "graphs_note", note ? json_string(note) : json_null());
    if ((rc = point_model_create(b, p, training, opt_in_backward, &pm, &what)) != LMK_OK) {
        model_point_fail(run, "%s: %s%s", what, lmk_status_text(rc), backend_error(b));
        goto out;
    }
    /* every step below runs through one_step with the same events as the
     * baseline's untraced steps, after the same warm-up, capture and priming
     * step: both are timed the same way */
    step_clock plain, traced, gated_traced;
    if (!base || base->rc != LMK_OK) {
        const char *detail = base ? base->detail : "";
        model_point_fail(run, "the untraced baseline steps failed: %s%s%s",
                         lmk_status_text(base ? base->rc : LMK_INVALID),
                         detail[0] && detail[0] != ' ' ? ": " : "", detail);
        goto out;
    }
    plain = base->clock;
    json_object_set_new(run, "baseline_after_tracing", json_boolean(job_baselines.traced_before));
    if ((rc = warm_up(&pm, warmup, last)) != LMK_OK)
        goto failed;
    if (runctx_cancelled(ctx)) {
        *cancelled = 1;
        goto out;
    }

    if (profiler_start(&prof, PROF_ALL, job_error, errlen)) {
        json_decref(run);
        run = NULL;
        goto out;
    }
    /* graphs are captured inside the session (CUPTI sees their nodes
     * created under lmperf's ranges), before the discard */
    char perr[300] = "";
    if ((rc = capture_and_prime(&pm, last, perr, sizeof perr)) != LMK_OK) {
        if (perr[0]) {
            model_point_fail(run, "%s", perr);
            goto out;
        }
        goto failed;
    }
    /* the traced gated steps, like the baseline's right after the priming
     * step; before the discard, so their records (the blocking kernels, the
     * extra replays) stay out of every table */
    if ((rc = gated_steps(&pm, steps, &gated_traced)) != LMK_OK)
        goto failed;
    if (profiler_discard(prof, perr, sizeof perr)) {
        model_point_fail(run, "%s", perr);
        goto out;
    }
    clock_reset(&traced, pm.timer);
    for (int st = 0; st < steps && rc == LMK_OK; st++)
        rc = one_step(&pm, &traced);
    if (profiler_stop(prof, perr, sizeof perr)) {
        model_point_fail(run, "%s", perr);
        goto out;
    }
    if (rc != LMK_OK)
        goto failed;

    size_t nr, nops, unattributed = 0;
    const prof_range *ranges = profiler_ranges(prof, &nr);
    const prof_op *ops = profiler_ops(prof, &nops);
    size_t nkernels = 0, unlaunched = 0;
    for (size_t i = 0; i < nops; i++) {
        nkernels += ops[i].kind == PROF_KERNEL;
        unlaunched += ops[i].kind == PROF_KERNEL && !ops[i].launch;
    }
    if (nkernels == 0) {
        model_point_fail(run, "CUPTI recorded no kernels (tracing was enabled but saw no device work)");
        goto out;
    }
    if (nr == 0) {
        model_point_fail(run, "CUPTI recorded no NVTX ranges: NVTX was not injected with CUPTI "
                              "(NVTX_INJECTION64_PATH=%s)",
                         profiler_injection_path()[0] ? profiler_injection_path() : "unset");
        goto out;
    }
    summary s;
    range_times *times = range_times_build(prof);
    if (!times || summary_build(&s, prof, &unattributed)) {
        summary_free(&s);
        free(times);
        model_point_fail(run, "out of host memory");
        goto out;
    }
    json_object_set_new(run, "kernel_summary", summary_rows(&s));
    json_object_set_new(run, "kernel_count", json_integer((json_int_t)nkernels));
    json_object_set_new(run, "kernel_time_ns", json_integer((json_int_t)s.range_total[0]));
    json_object_set_new(run, "unattributed_kernels", json_integer((json_int_t)unattributed));
    json_object_set_new(run, "kernels_without_launch", json_integer((json_int_t)unlaunched));
    json_object_set_new(run, "range_count", json_integer((json_int_t)nr));
    json_object_set_new(run, "dropped_records", json_integer((json_int_t)profiler_dropped(prof)));
    json_object_set_new(run, "nvtx_injection", json_string(profiler_injection_path()));
    add_overhead(run, &plain, &traced, &base->gated, &gated_traced, last >= 0);
    json_object_set_new(run, "phases",
                        phase_rows(&s, ranges, nr, times, &plain, &traced, &base->gated, &gated_traced, training));
    uint64_t fwall = 0, fspan = 0;
    size_t nf = 0, replayed = 0;
    for (size_t i = 0; i < nr; i++) {
        replayed += ranges[i].replay != 0;
        if (strcmp(ranges[i].name, "forward") == 0) {
            fwall += times[i].host, nf++;
            fspan += times[i].span;
        }
    }
    free(times);
    json_object_set_new(run, "replayed_range_count", json_integer((json_int_t)replayed));
    json_object_set_new(run, "graph_nodes", json_integer((json_int_t)profiler_graph_nodes(prof)));
    json_object_set_new(run, "graph_ops_unmapped", json_integer((json_int_t)profiler_unmapped_graph_ops(prof)));
    if (nf) {
        json_object_set_new(run, "forward_wall_ns", json_integer((json_int_t)(fwall / nf)));
        json_object_set_new(run, "forward_gpu_span_ns", json_integer((json_int_t)(fspan / nf)));
        json_object_set_new(run, "forward_kernel_ns", json_integer((json_int_t)(range_kernel_ns(&s, "forward", 0) / nf)));
    }
    size_t copies = 0;
    uint64_t copy_ns = 0;
    for (size_t i = 0; i < nops; i++)
        if (ops[i].kind != PROF_KERNEL)
            copies++, copy_ns += ops[i].end - ops[i].start;
    json_object_set_new(run, "memcpy_memset_count", json_integer((json_int_t)copies));
    json_object_set_new(run, "memcpy_memset_ns", json_integer((json_int_t)copy_ns));
    add_answers(run, &s, training, p);
    add_roofline(run, &s, p, runctx_device_info(ctx));
    summary_free(&s);
    char title[160];
    model_point_describe(p, title, sizeof title);
    json_object_set_new(run, "trace", build_trace(prof, title));
    json_object_set_new(run, "status", json_string("succeeded"));
    json_object_set_new(run, "error", json_null());
    goto out;
failed:
    model_point_fail(run, "%s%s", lmk_status_text(rc), backend_error(b));
out:
    profiler_free(prof);
    point_model_free(&pm);
    return run;
}

/* Every profile job traces CUDA kernels: none runs on a CPU worker. */
static int profile_check_no_gpu(const json_t *spec, api_error *err)
{
    (void)spec;
    return api_fail(err, API_ERR_INVALID_SPEC, "kind", "profile jobs need a GPU worker; " JOBKIND_NO_GPU);
}

static int profile_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    if (runctx_device_info(ctx)->gpu_index < 0) {
        snprintf(errbuf, errlen, "profile jobs need a GPU worker (this worker runs on the CPU: %s)",
                 runctx_device_info(ctx)->name);
        return -1;
    }
    lmk_backend *b = NULL;
    int rc = runctx_backend(ctx, &b, errbuf, errlen);
    if (rc == LMK_OK)
        rc = measure_baselines(ctx, b, spec, errbuf, errlen);
    /* a NULL run (CUPTI unavailable) stops the job with errbuf saying why */
    if (rc == LMK_OK)
        rc = model_point_sweep(ctx, spec, run_point, result, errbuf, errlen);
    free(job_baselines.points);
    job_baselines.points = NULL;
    return rc;
}

/* --- storage ----------------------------------------------------------------------------- */

/* Inserts one row: values are the run's (or obj's) fields named by keys. */
static int insert_row(sqlite3 *db, const char *sql, int64_t run_id, int64_t job_id, const json_t *obj,
                      const char *const *keys, size_t nkeys)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    int col = 1;
    sqlite3_bind_int64(st, col++, run_id);
    if (job_id >= 0)
        sqlite3_bind_int64(st, col++, job_id);
    for (size_t i = 0; i < nkeys; i++)
        jobkind_bind_scalar(st, col++, json_object_get(obj, keys[i]));
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    return rc;
}

/* insert_row for every object of the array rows (run_id first, no job_id). */
static int insert_rows(sqlite3 *db, const char *sql, int64_t run_id, const json_t *rows, const char *const *keys,
                       size_t nkeys)
{
    size_t i;
    const json_t *row;
    int rc = SQLITE_OK;
    json_array_foreach(rows, i, row)
    {
        rc = insert_row(db, sql, run_id, -1, row, keys, nkeys);
        if (rc != SQLITE_OK)
            break;
    }
    return rc;
}

static int profile_store_run(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec, const json_t *run)
{
    (void)spec;
    if (!json_object_get(run, "kernel_summary"))
        return SQLITE_OK; /* a failed run: the generic row says why */
    json_t *flat = json_deep_copy(run);
    json_object_update(flat, json_object_get(run, "answers"));
    const json_t *att = json_object_get(json_object_get(run, "answers"), "attention");
    json_object_set(flat, "softmax_ns", json_object_get(att, "softmax_ns"));
    json_object_set(flat, "attention_matmul_ns", json_object_get(att, "matmul_ns"));
    json_object_set(flat, "attention_flop_ratio", json_object_get(att, "flop_ratio_matmul_to_softmax"));
    static const char *const run_keys[] = {
        "model", "context_length", "batch_size", "precision", "mode", "warmup_steps", "profile_steps",
        "kernel_count", "kernel_time_ns", "unattributed_kernels", "range_count", "dropped_records",
        "step_ms_unprofiled", "step_ms_profiled", "overhead_pct", "forward_wall_ns", "forward_gpu_span_ns", "forward_kernel_ns",
        "top_forward_kernel", "top_forward_calls_per_forward", "top_forward_share_pct",
        "top_forward_also_top_fwd_bwd", "top_fwd_bwd_kernel", "gemm_share_forward_pct", "gemm_share_step_pct",
        "softmax_ns", "attention_matmul_ns", "attention_flop_ratio", "step_gpu_ms_unprofiled",
        "step_gpu_ms_profiled", "overhead_gpu_pct", "kernels_without_launch", "graphs", "graphs_scope", "graphs_note",
        "graph_nodes", "graph_ops_unmapped", "replayed_range_count", "step_gpu_gated_ms_unprofiled",
        "step_gpu_gated_ms_profiled", "overhead_gpu_gated_pct", "gpu_gated_note", "optimizer_in_backward",
        "step_ms_unprofiled_std", "step_ms_profiled_std"};
    int rc = insert_row(db,
                        "INSERT INTO profile_runs (run_id, job_id, model, context_length, batch_size, precision, mode, "
                        "warmup_steps, profile_steps, kernel_count, kernel_time_ns, unattributed_kernels, range_count, "
                        "dropped_records, step_ms_unprofiled, step_ms_profiled, overhead_pct, forward_wall_ns, "
                        "forward_gpu_span_ns, forward_kernel_ns, top_forward_kernel, top_forward_calls_per_forward, top_forward_share_pct, "
                        "top_forward_also_top_fwd_bwd, top_fwd_bwd_kernel, gemm_share_forward_pct, "
                        "gemm_share_step_pct, softmax_ns, attention_matmul_ns, attention_flop_ratio, "
                        "step_gpu_ms_unprofiled, step_gpu_ms_profiled, overhead_gpu_pct, kernels_without_launch, "
                        "graphs, graphs_scope, graphs_note, graph_nodes, graph_ops_unmapped, replayed_range_count, "
                        "step_gpu_gated_ms_unprofiled, step_gpu_gated_ms_profiled, overhead_gpu_gated_pct, "
                        "gpu_gated_note, optimizer_in_backward, step_ms_unprofiled_std, step_ms_profiled_std) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        run_id, job_id, flat, run_keys, sizeof run_keys / sizeof run_keys[0]);
    json_decref(flat);
    static const char *const kernel_keys[] = {"range", "range_instances", "kernel", "is_gemm", "instances", "total_ns",
                                              "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "share_pct"};
    if (rc == SQLITE_OK)
        rc = insert_rows(db,
                         "INSERT INTO profile_kernels (run_id, range_name, range_instances, kernel, is_gemm, instances, "
                         "total_ns, avg_ns, med_ns, min_ns, max_ns, std_ns, share_pct) VALUES "
                         "(?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         run_id, json_object_get(run, "kernel_summary"), kernel_keys, 12);
    static const char *const phase_keys[] = {"phase",         "instances",         "kernel_ns",
                                             "gpu_span_ns",   "range_wall_ns",     "event_ns_profiled",
                                             "event_ns_unprofiled", "kernel_pct_of_event", "gated_ns_profiled",
                                             "gated_ns_unprofiled", "overhead_gated_pct", "kernel_busy_ns",
                                             "event_ns_profiled_std", "event_ns_unprofiled_std",
                                             "gated_ns_profiled_std", "gated_ns_unprofiled_std",
                                             "gemm_busy_ns",  "other_only_ns",     "gpu_idle_ns"};
    if (rc == SQLITE_OK)
        rc = insert_rows(db,
                         "INSERT INTO profile_phases (run_id, phase, instances, kernel_ns, gpu_span_ns, range_wall_ns, "
                         "event_ns_profiled, event_ns_unprofiled, kernel_pct_of_event, gated_ns_profiled, "
                         "gated_ns_unprofiled, overhead_gated_pct, kernel_busy_ns, event_ns_profiled_std, "
                         "event_ns_unprofiled_std, gated_ns_profiled_std, gated_ns_unprofiled_std, gemm_busy_ns, "
                         "other_only_ns, gpu_idle_ns) "
                         "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         run_id, json_object_get(run, "phases"), phase_keys, sizeof phase_keys / sizeof phase_keys[0]);
    static const char *const note_keys[] = {"kernel", "share_pct"};
    if (rc == SQLITE_OK)
        rc = insert_rows(db, "INSERT INTO profile_noteworthy (run_id, kernel, share_pct) VALUES (?,?,?)", run_id,
                         json_object_get(json_object_get(run, "answers"), "non_gemm_above_2pct"), note_keys, 2);
    static const char *const roof_keys[] = {"op",     "instances", "flops",       "bytes",     "time_ns", "tflops",
                                            "gbps",   "peak_tflops", "peak_gbps", "bound"};
    if (rc == SQLITE_OK)
        rc = insert_rows(db,
                         "INSERT INTO profile_roofline (run_id, op, instances, flops, bytes, time_ns, tflops, gbps, "
                         "peak_tflops, peak_gbps, bound) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         run_id, json_object_get(run, "roofline"), roof_keys, 10);
    const json_t *trace = json_object_get(run, "trace");
    if (rc == SQLITE_OK && trace) {
        char *text = json_dumps(trace, JSON_COMPACT);
        sqlite3_stmt *st = NULL;
        rc = text ? sqlite3_prepare_v2(db, "INSERT INTO profile_traces (run_id, trace) VALUES (?, ?)", -1, &st, NULL)
                  : SQLITE_NOMEM;
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, run_id);
            sqlite3_bind_text(st, 2, text, -1, SQLITE_TRANSIENT);
            rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        }
        sqlite3_finalize(st);
        free(text);
    }
    return rc;
}

/* The kernel summary (the nsys nvtx_kern_sum columns) of the job's runs,
 * or of one run (run_index >= 0), and of every NVTX range or of one (range
 * not NULL, borrowed): run by run, range by range, longest kernel first. */
static int kernel_table(sqlite3 *db, int64_t job_id, int64_t run_index, const char *range, json_t **table,
                        api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT r.run_index, p.model, p.context_length, p.precision, p.mode, k.range_name, "
                           "k.range_instances, k.instances, k.total_ns, k.avg_ns, k.med_ns, k.min_ns, k.max_ns, "
                           "k.std_ns, k.share_pct, k.kernel FROM profile_kernels k "
                           "JOIN profile_runs p ON p.run_id = k.run_id JOIN runs r ON r.id = k.run_id "
                           "WHERE p.job_id = ?1 AND (?2 < 0 OR r.run_index = ?2) AND (?3 IS NULL OR k.range_name = ?3) "
                           "ORDER BY r.run_index, k.range_name, k.total_ns DESC",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "profile table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, run_index);
    if (range)
        sqlite3_bind_text(st, 3, range, -1, SQLITE_TRANSIENT);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(
            rows, json_pack("[i, s, i, s, s, s, i, i, I, f, f, I, I, f, f, s]", sqlite3_column_int(st, 0),
                            sqlite3_column_text(st, 1), sqlite3_column_int(st, 2), sqlite3_column_text(st, 3),
                            sqlite3_column_text(st, 4), sqlite3_column_text(st, 5), sqlite3_column_int(st, 6),
                            sqlite3_column_int(st, 7), (json_int_t)sqlite3_column_int64(st, 8),
                            sqlite3_column_double(st, 9), sqlite3_column_double(st, 10),
                            (json_int_t)sqlite3_column_int64(st, 11), (json_int_t)sqlite3_column_int64(st, 12),
                            sqlite3_column_double(st, 13), sqlite3_column_double(st, 14), sqlite3_column_text(st, 15)));
    sqlite3_finalize(st);
    *table = json_pack("{s:[s,s,s,s,s,s,s,s,s,s,s,s,s,s,s,s], s:o}", "columns", "run", "model", "context",
                       "precision", "mode", "NVTX Range", "NVTX Inst", "Kern Inst", "Total Time (ns)", "Avg (ns)",
                       "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Range %", "Kernel Name", "rows", rows);
    return 0;
}

/* Every run, every range. */
static int profile_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    return kernel_table(db, job_id, -1, NULL, table, err);
}

/* What a selector could have named, for its 404: the one text column of sql
 * (bound: ?1 job_id, ?2 run_index or -1), distinct values joined by ", " into
 * buf (len bytes, cut short with "…" when longer). */
static void known_values(sqlite3 *db, const char *sql, int64_t job_id, int64_t run_index, char *buf, size_t len)
{
    sqlite3_stmt *st = NULL;
    buf[0] = '\0';
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, run_index);
    size_t used = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", v ? v : "");
        if (n < 0 || (size_t)n >= len - used) {
            snprintf(buf + (used < len - 4 ? used : len - 4), 4, "…");
            break;
        }
        used += (size_t)n;
    }
    sqlite3_finalize(st);
    if (!buf[0])
        snprintf(buf, len, "none");
}

static int run_has_kernels(sqlite3 *db, int64_t job_id, int64_t run_index)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT 1 FROM profile_kernels k JOIN runs r ON r.id = k.run_id "
                           "WHERE r.job_id = ? AND r.run_index = ? LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, run_index);
    int found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

/* ?run=N (0-based, as /trace?run=) and / or ?range=NAME (as stored:
 * "forward", "layer 3", "(all)"): that part of the kernel summary. A run with
 * no kernel summary (not in the job, or failed) is a 404 naming run; a range
 * the run (or the job) has no kernels in is a 404 naming range. Both list the
 * values there are. */
static int profile_selected_table(sqlite3 *db, int64_t job_id, const api_table_query *query, json_t **table,
                                  api_error *err)
{
    json_t *out = NULL;
    if (kernel_table(db, job_id, query->run, query->range, &out, err))
        return -1;
    if (json_array_size(json_object_get(out, "rows")) || (query->run < 0 && !query->range)) {
        *table = out;
        return 0;
    }
    json_decref(out);
    char known[320];
    if (query->run >= 0 && !run_has_kernels(db, job_id, query->run)) {
        known_values(db,
                     "SELECT DISTINCT r.run_index FROM profile_kernels k JOIN runs r ON r.id = k.run_id "
                     "WHERE r.job_id = ?1 ORDER BY 1",
                     job_id, -1, known, sizeof known);
        return api_fail(err, API_ERR_NOT_FOUND, "run", "job %lld has no kernel summary for run %lld (runs with one: %s)",
                        (long long)job_id, (long long)query->run, known);
    }
    known_values(db,
                 "SELECT DISTINCT k.range_name FROM profile_kernels k JOIN runs r ON r.id = k.run_id "
                 "WHERE r.job_id = ?1 AND (?2 < 0 OR r.run_index = ?2) ORDER BY 1",
                 job_id, query->run, known, sizeof known);
    char where[64];
    if (query->run >= 0)
        snprintf(where, sizeof where, "run %lld of job %lld", (long long)query->run, (long long)job_id);
    else
        snprintf(where, sizeof where, "job %lld", (long long)job_id);
    return api_fail(err, API_ERR_NOT_FOUND, "range", "%s has no kernels in an NVTX range named '%s' (its ranges: %s)",
                    where, query->range, known);
}

static const char *const profile_table_params[] = {"run", "range", NULL};

/* The Chrome trace of one run (GET /v1/jobs/{id}/trace?run=N and /events). */
static int profile_trace(sqlite3 *db, int64_t job_id, int run_index, json_t **out, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT t.trace FROM profile_traces t JOIN runs r ON r.id = t.run_id "
                           "WHERE r.job_id = ? AND r.run_index = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "profile trace: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int(st, 2, run_index);
    json_t *trace = NULL;
    if (sqlite3_step(st) == SQLITE_ROW)
        trace = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
    sqlite3_finalize(st);
    if (!trace)
        return api_fail(err, API_ERR_NOT_FOUND, "run", "job %lld has no trace for run %d", (long long)job_id,
                        run_index);
    *out = trace;
    return 0;
}

const jobkind jobkind_profile = {
    .name = "profile",
    .check = profile_check,
    .check_no_gpu = profile_check_no_gpu,
    .run = profile_run,
    .store_run = profile_store_run,
    .table = profile_table,
    .selected_table = profile_selected_table,
    .table_params = profile_table_params,
    .bulky_fields = bulky_fields,
    .events = profile_trace, /* the trace is this kind's event list */
    .trace = profile_trace,
    .fresh_worker_after = 1, /* CUPTI stays loaded in the process: later jobs get a clean one */
};
