/* The context a job kind's runner gets inside a worker (or in one-shot mode).
 *
 * DESIGN: a runner executes one job spec on the worker's device. It reports
 * progress, emits each finished run (a point of a sweep) as soon as it is done
 * so that partial results survive a crash, polls for cancellation at safe
 * points, and returns the job's summary result. The worker owns the device
 * for its whole life; the backend handle is created once, on first use. */
#ifndef DAEMON_RUNCTX_H
#define DAEMON_RUNCTX_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef struct run_ctx run_ctx;
struct lmk_backend;

/* The device a worker owns. gpu_index is -1 for the CPU worker. */
typedef struct runctx_device {
    int gpu_index;
    char name[128];          /* "NVIDIA H100 80GB HBM3" or "cpu: <model name>" */
    uint64_t total_bytes;    /* device memory; CPU: physical RAM */
    uint64_t free_bytes;     /* at worker start-up; CPU: available RAM */
    int sm_major, sm_minor;  /* compute capability; 0 for CPU */
    int multiprocessors;     /* SM count; CPU: online cores */
    int clock_mhz;           /* max SM clock; CPU: 0 */
    int memory_clock_mhz;    /* CPU: 0 */
    char driver[32];         /* CUDA driver version "13.0"; CPU: "" */
    char runtime[32];        /* CUDA runtime version; CPU: "" */
    char cublas[32];         /* cuBLAS version; CPU: "" */
} runctx_device;

/* Reports progress: fraction in [0, 1], message borrowed (may be NULL). */
void runctx_progress(run_ctx *ctx, double fraction, const char *message);

/* Emits one finished run (a point of a sweep). Steals run. The run object
 * must carry "status": "succeeded" | "failed" and, when failed, "error". */
void runctx_emit_run(run_ctx *ctx, json_t *run);

/* A sweep's outcome, run by run (call before runctx_emit_run steals run):
 * returns 1 when run succeeded; otherwise records "what: <its error>" in
 * first_error (len bytes) unless it already holds one, and returns 0. */
int runctx_tally(const json_t *run, const char *what, char *first_error, size_t len);

/* A sweep's verdict for the job: LMK_OK when a point succeeded (or there was
 * none); otherwise "no point succeeded; first: <first_error>" in errbuf and
 * LMK_INVALID: the job fails, its failed runs kept. */
int runctx_sweep_verdict(size_t points, size_t succeeded, const char *first_error, char *errbuf, size_t errlen);

/* Non-zero once the job has been asked to stop (DELETE while running). */
int runctx_cancelled(run_ctx *ctx);

/* The worker's device, borrowed, valid for the worker's life. */
const runctx_device *runctx_device_info(const run_ctx *ctx);

/* The compute backend of this worker (CPU or CUDA), created on first call
 * and reused by every later job. Returns 0 and sets *backend (borrowed), or a
 * negative lmk status with a message in errbuf. */
int runctx_backend(run_ctx *ctx, struct lmk_backend **backend, char *errbuf, size_t errlen);

/* The GPUs the scheduler reserved for this job (the worker's own first), up
 * to max into out. Returns their number; 0 when none were reserved (one-shot
 * mode: the runner may use any visible GPU). */
int runctx_gpus(const run_ctx *ctx, int *out, int max);

/* Gives back the GPUs reserved beside the worker's own (runctx_gpus then
 * returns at most the worker's own): the scheduler may run other jobs on
 * them while this job goes on. For a multi-GPU job whose later points need
 * one worker only. No effect when nothing else is reserved. */
void runctx_release_gpus(run_ctx *ctx);

/* --- for the worker and one-shot mode (not for runners) ------------------- */

/* Where a run_ctx sends what runners report. */
typedef enum runctx_mode {
    RUNCTX_WORKER,  /* JSON lines on a socket to the daemon */
    RUNCTX_ONESHOT, /* collected in memory; progress on stderr */
} runctx_mode;

/* A new context for the life of a worker or a one-shot run (device
 * borrowed, copied). fd is the daemon socket (RUNCTX_WORKER) or -1.
 * Returns NULL when out of memory. */
run_ctx *runctx_create(runctx_mode mode, int fd, const runctx_device *device);
/* Frees the context and the backend it created. Accepts NULL. */
void runctx_free(run_ctx *ctx);
/* Starts a job: resets run numbering, cancellation and collected runs. */
void runctx_begin_job(run_ctx *ctx, int64_t job_id);
/* The runs emitted since runctx_begin_job (RUNCTX_ONESHOT only; borrowed). */
json_t *runctx_collected_runs(run_ctx *ctx);
/* Worker mode: the next line from the daemon (blocking), new; NULL with
 * *closed = 1 when the socket closed or failed. Lines read ahead while a job
 * runs stay buffered here, so a cancel sent right behind its job is seen. */
json_t *runctx_next_message(run_ctx *ctx, int *closed);
/* One-shot mode: *flag non-zero (set by a signal handler, e.g. timeout_s
 * passing) cancels the job like a DELETE does. flag borrowed, may be NULL. */
void runctx_set_stop_flag(run_ctx *ctx, volatile sig_atomic_t *flag);
/* Records the GPUs reserved for the current job (from the job line). */
void runctx_set_gpus(run_ctx *ctx, const int *gpus, int count);
/* Marks the current job cancelled (the worker calls this when a cancel line
 * arrives while it polls). */
void runctx_set_cancelled(run_ctx *ctx);

#endif
