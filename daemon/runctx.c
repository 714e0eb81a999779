/* run_ctx: progress, runs and cancellation between a runner and the daemon. */
#include "runctx.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lineio.h"
#include "log.h"
#include "status.h"
#include "worker_backend.h"

#define PROGRESS_MIN_INTERVAL_NS 250000000ll /* at most 4 progress lines a second */
#define RUNCTX_MAX_GPUS 64

struct run_ctx {
    runctx_mode mode;
    int fd;
    runctx_device device;
    int64_t job_id;
    int run_index;
    int cancelled;
    long long last_progress_ns;
    char last_progress[160];       /* the message last sent: a new one is never held back */
    json_t *collected;             /* one-shot: emitted runs */
    int gpus[RUNCTX_MAX_GPUS];     /* reserved for the current job, own first */
    int gpu_count;
    line_reader reader;            /* worker: lines arriving during a job */
    struct lmk_backend *backend;   /* created on first use, owned */
    volatile sig_atomic_t *stop;   /* one-shot: set by a signal handler; NULL when none */
};

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

run_ctx *runctx_create(runctx_mode mode, int fd, const runctx_device *device)
{
    run_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->mode = mode;
    ctx->fd = fd;
    ctx->device = *device;
    ctx->collected = json_array();
    return ctx;
}

void runctx_free(run_ctx *ctx)
{
    if (!ctx)
        return;
    worker_backend_free(ctx->backend);
    json_decref(ctx->collected);
    line_reader_free(&ctx->reader);
    free(ctx);
}

void runctx_begin_job(run_ctx *ctx, int64_t job_id)
{
    ctx->job_id = job_id;
    ctx->run_index = 0;
    ctx->cancelled = 0;
    ctx->last_progress_ns = 0;
    ctx->last_progress[0] = '\0';
    ctx->gpu_count = 0;
    json_array_clear(ctx->collected);
}

void runctx_set_gpus(run_ctx *ctx, const int *gpus, int count)
{
    ctx->gpu_count = count < RUNCTX_MAX_GPUS ? count : RUNCTX_MAX_GPUS;
    memcpy(ctx->gpus, gpus, (size_t)ctx->gpu_count * sizeof *gpus);
}

int runctx_gpus(const run_ctx *ctx, int *out, int max)
{
    int n = ctx->gpu_count < max ? ctx->gpu_count : max;
    memcpy(out, ctx->gpus, (size_t)n * sizeof *out);
    return n;
}

void runctx_release_gpus(run_ctx *ctx)
{
    if (ctx->gpu_count <= 1)
        return;
    ctx->gpu_count = 1; /* the worker's own, listed first */
    if (ctx->mode != RUNCTX_WORKER)
        return;
    json_t *line = json_pack("{s:s, s:I}", "type", "release_gpus", "job_id", (json_int_t)ctx->job_id);
    line_write(ctx->fd, line);
    json_decref(line);
}

json_t *runctx_collected_runs(run_ctx *ctx)
{
    return ctx->collected;
}

void runctx_set_cancelled(run_ctx *ctx)
{
    ctx->cancelled = 1;
}

void runctx_progress(run_ctx *ctx, double fraction, const char *message)
{
    /* Repeats of one message are thinned to one per PROGRESS_MIN_INTERVAL_NS; a
     * changed message goes out at once (the kinds change it once per point), so
     * a long point never shows the previous point's text. */
    long long now = now_ns();
    int same = strncmp(message ? message : "", ctx->last_progress, sizeof ctx->last_progress - 1) == 0;
    if (same && now - ctx->last_progress_ns < PROGRESS_MIN_INTERVAL_NS && fraction < 1.0)
        return;
    ctx->last_progress_ns = now;
    snprintf(ctx->last_progress, sizeof ctx->last_progress, "%s", message ? message : "");
    if (ctx->mode == RUNCTX_ONESHOT) {
        log_info("run", "%5.1f%% %s", fraction * 100.0, message ? message : "");
        return;
    }
    json_t *line = json_pack("{s:s, s:I, s:f, s:s?}", "type", "progress", "job_id",
                             (json_int_t)ctx->job_id, "fraction", fraction, "message", message);
    line_write(ctx->fd, line);
    json_decref(line);
}

void runctx_emit_run(run_ctx *ctx, json_t *run)
{
    if (!run)
        return;
    int index = ctx->run_index++;
    if (ctx->mode == RUNCTX_ONESHOT) {
        json_array_append_new(ctx->collected, run);
        return;
    }
    json_t *line = json_pack("{s:s, s:I, s:i, s:o}", "type", "run", "job_id", (json_int_t)ctx->job_id,
                             "index", index, "run", run);
    line_write(ctx->fd, line);
    json_decref(line);
}

/* Handles one line from the daemon that arrived while a job runs: a cancel
 * for this job sets the flag; anything else is dropped (the daemon sends a
 * busy worker nothing but cancels). Frees msg. */
static void note_message(run_ctx *ctx, json_t *msg)
{
    const char *type = json_string_value(json_object_get(msg, "type"));
    if (type && strcmp(type, "cancel") == 0 && json_integer_value(json_object_get(msg, "job_id")) == ctx->job_id)
        ctx->cancelled = 1;
    json_decref(msg);
}

/* Worker mode: looks at the lines already buffered (a cancel may have come
 * in the same read as its job), then reads what is available without
 * blocking. */
static void poll_daemon(run_ctx *ctx)
{
    json_t *msg;
    while ((msg = line_reader_next(&ctx->reader)))
        note_message(ctx, msg);
    struct pollfd pfd = {.fd = ctx->fd, .events = POLLIN};
    while (!ctx->cancelled && poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLIN | POLLHUP))) {
        long n = line_reader_fill(&ctx->reader, ctx->fd);
        if (n <= 0) {
            /* the daemon went away: stop the job, the worker exits after */
            ctx->cancelled = 1;
            return;
        }
        while ((msg = line_reader_next(&ctx->reader)))
            note_message(ctx, msg);
    }
}

json_t *runctx_next_message(run_ctx *ctx, int *closed)
{
    *closed = 0;
    for (;;) {
        json_t *msg = line_reader_next(&ctx->reader);
        if (msg)
            return msg;
        long n = line_reader_fill(&ctx->reader, ctx->fd);
        if (n <= 0) {
            *closed = 1;
            return NULL;
        }
    }
}

int runctx_cancelled(run_ctx *ctx)
{
    if (ctx->mode == RUNCTX_WORKER && !ctx->cancelled)
        poll_daemon(ctx);
    if (ctx->stop && *ctx->stop)
        ctx->cancelled = 1;
    return ctx->cancelled;
}

int runctx_tally(const json_t *run, const char *what, char *first_error, size_t len)
{
    const char *status = json_string_value(json_object_get(run, "status"));
    if (status && strcmp(status, "succeeded") == 0)
        return 1;
    const char *error = json_string_value(json_object_get(run, "error"));
    if (!first_error[0])
        snprintf(first_error, len, "%s: %s", what, error ? error : "failed");
    return 0;
}

int runctx_sweep_verdict(size_t points, size_t succeeded, const char *first_error, char *errbuf, size_t errlen)
{
    if (!points || succeeded)
        return LMK_OK;
    snprintf(errbuf, errlen, "no point succeeded; first: %s", first_error);
    return LMK_INVALID;
}

void runctx_set_stop_flag(run_ctx *ctx, volatile sig_atomic_t *flag)
{
    ctx->stop = flag;
}

const runctx_device *runctx_device_info(const run_ctx *ctx)
{
    return &ctx->device;
}

int runctx_backend(run_ctx *ctx, struct lmk_backend **backend, char *errbuf, size_t errlen)
{
    if (!ctx->backend) {
        int rc = worker_backend_create(&ctx->device, &ctx->backend, errbuf, errlen);
        if (rc != LMK_OK)
            return rc;
    }
    *backend = ctx->backend;
    return LMK_OK;
}
