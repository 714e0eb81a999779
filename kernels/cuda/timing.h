/* CUDA-event timers on a cuda backend's stream: a fixed set of events that
 * the caller records between ops (or graph launches) and reads back as GPU
 * time, beside the host's synchronised wall clock. */
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

#ifdef __cplusplus
}
#endif

#endif
