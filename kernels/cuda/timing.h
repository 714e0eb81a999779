/* CUDA-event timers on a cuda backend's stream: a fixed set of events that
 * the caller records between ops (or graph launches) and reads back as GPU
 * time, beside the host's synchronised wall clock; and a gate (a blocking
 * kernel) that holds the stream while the host enqueues the timed work. */
#ifndef LMK_CUDA_TIMING_H
#define LMK_CUDA_TIMING_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmk_cuda_timer lmk_cuda_timer;

/* Creates n (≥ 1) timing events on b's device for b's stream. b is
 * borrowed and must outlive the timer. Sets *out (new; free with
 * lmk_cuda_timer_free). Returns LMK_OK, LMK_INVALID (n < 1 or b not a cuda
 * backend), LMK_NOMEM or LMK_DEVICE (reason in lmk_backend_cuda_last_error). */
int lmk_cuda_timer_create(lmk_backend *b, int n, lmk_cuda_timer **out);
/* Enqueues event i (0 ≤ i < n) on b's stream (asynchronous; re-recording an
 * event replaces its previous time). Not for use inside a graph capture.
 * Returns LMK_OK, LMK_INVALID or LMK_DEVICE. */
int lmk_cuda_timer_record(lmk_cuda_timer *t, int i);
/* *ms = GPU time from event `from` to event `to` (waits for `to`; both must
 * have been recorded). Resolution about 0.5 µs. Returns LMK_OK, LMK_INVALID
 * or LMK_DEVICE; *ms untouched on failure. */
int lmk_cuda_timer_elapsed(lmk_cuda_timer *t, int from, int to, double *ms);
void lmk_cuda_timer_free(lmk_cuda_timer *t); /* NULL allowed */

/* A gate on a cuda backend's stream, the NVBench way of timing GPU work
 * free of the host's enqueueing: lmk_cuda_gate_close enqueues one blocking
 * kernel (one thread) that spins on a flag in pinned, mapped host memory;
 * the caller then enqueues its events and work behind it and opens the gate
 * (lmk_cuda_gate_open), so the work runs back to back on the GPU after the
 * kernel returns. The flag belongs to the gate (no global state). The
 * kernel gives up after timeout_ms (the host never opened the gate, or the
 * queue behind it blocked the host: a stream holds about 1000 pending
 * launches, so only a few launches (graph replays) may wait behind a gate);
 * lmk_cuda_gate_timed_out says so after a synchronisation. */
typedef struct lmk_cuda_gate lmk_cuda_gate;

/* Creates a gate for b's stream (b borrowed, must outlive it) whose kernel
 * waits at most timeout_ms (> 0) milliseconds. Sets *out (new; free with
 * lmk_cuda_gate_free). Returns LMK_OK, LMK_INVALID, LMK_NOMEM or LMK_DEVICE
 * (pinned mapped memory refused; reason in lmk_backend_cuda_last_error). */
int lmk_cuda_gate_create(lmk_backend *b, double timeout_ms, lmk_cuda_gate **out);
/* Resets the flag (closed, not timed out) and enqueues the blocking kernel
 * on b's stream. Not for use inside a graph capture. The caller must open
 * the gate before it synchronises the stream (or wait for the timeout).
 * Returns LMK_OK, LMK_INVALID or LMK_DEVICE. */
int lmk_cuda_gate_close(lmk_cuda_gate *g);
/* Opens the gate: the blocking kernel returns within a few µs (host write,
 * visible to the GPU's polling reads). NULL allowed. */
void lmk_cuda_gate_open(lmk_cuda_gate *g);
/* 1 when the last blocking kernel gave up after timeout_ms instead of
 * seeing the gate open, 0 otherwise. Meaningful once the stream has been
 * synchronised after lmk_cuda_gate_open. */
int lmk_cuda_gate_timed_out(const lmk_cuda_gate *g);
void lmk_cuda_gate_free(lmk_cuda_gate *g); /* NULL allowed; the kernel must have returned */

#ifdef __cplusplus
}
#endif

#endif
