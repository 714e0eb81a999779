/* The cuda backend: every op of backend.h on one CUDA stream of one device,
 * memory from a private stream-ordered pool, GEMMs through cuBLAS. */
#ifndef LMK_BACKEND_CUDA_H
#define LMK_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a cuda backend on GPU `device` (0-based): its own non-blocking
 * stream, a memory pool whose release threshold is UINT64_MAX (frees inside a
 * step are cheap and memory stays reserved until destroy), a cuBLAS handle
 * with a fixed 32 MiB workspace. Sets *out (new; free with lmk_backend_free).
 * Returns LMK_OK, LMK_NOMEM, or LMK_DEVICE (no such device, driver missing,
 * cuBLAS failure) with a one-line reason in errbuf (errlen may be 0).
 * create makes `device` current for the calling thread; ops do not switch
 * devices, so call them from a thread whose current device is `device`
 * (cudaSetDevice) — one backend per worker thread is the simple rule. */
int lmk_backend_cuda_create(int device, lmk_backend **out, char *errbuf, size_t errlen);

/* The text of the last CUDA/cuBLAS failure seen by backend b (a cuda
 * backend), "call: error name: message"; "" if none. Borrowed, valid until the
 * next op on b. NULL for a backend of another kind. */
const char *lmk_backend_cuda_last_error(lmk_backend *b);

/* The backend's memory pool (a cuda backend; LMK_UNSUPPORTED for another):
 * bytes the pool holds from the device (reserved) and bytes handed out to
 * live allocations (used), current and high-water marks since the last
 * reset (cudaMemPoolAttrReservedMemCurrent/High, UsedMemCurrent/High). Any
 * pointer may be NULL. Host-side counters: call after synchronize for the
 * figures of work already queued. Returns LMK_OK or LMK_DEVICE. */
int lmk_backend_cuda_pool_usage(lmk_backend *b, uint64_t *reserved_current, uint64_t *reserved_high,
                                uint64_t *used_current, uint64_t *used_high);
/* Synchronises b's stream, then (trim != 0) returns the pool's unused
 * memory to the device (cudaMemPoolTrimTo 0), then restarts both high-water
 * marks from the current values. Returns LMK_OK, LMK_DEVICE or
 * LMK_UNSUPPORTED (not a cuda backend). */
int lmk_backend_cuda_pool_reset(lmk_backend *b, int trim);
/* Synchronises b's stream, then returns to the device the memory the pool
 * caches but no live allocation uses, and the device's graph memory that no
 * graph uses (cudaDeviceGraphMemTrim). Graph replays allocate their own
 * memory, outside the pool: call before capturing phases that eager steps
 * have run (else the pool's cache of those steps and the graphs' memory are
 * both held) and after freeing graphs. High-water marks are kept. Returns
 * LMK_OK, LMK_DEVICE or LMK_UNSUPPORTED (not a cuda backend). */
int lmk_backend_cuda_release_cached(lmk_backend *b);
/* The device's free and total memory (cudaMemGetInfo) for b's device. Free
 * memory excludes what the pool reserves but does not use. Returns LMK_OK,
 * LMK_DEVICE or LMK_UNSUPPORTED. */
int lmk_backend_cuda_device_memory(lmk_backend *b, uint64_t *free_bytes, uint64_t *total_bytes);

/* Number of visible CUDA devices; 0 when there is none or no driver. */
int lmk_cuda_device_count(void);

/* CUDA graphs of a sequence of ops (e.g. forward + backward of a model):
 * begin starts capturing b's stream (ops are recorded, not run); end stops
 * and instantiates, setting *out (new; free with lmk_cuda_graph_free).
 * Nothing between begin and end may synchronise (download, synchronize,
 * lmk_model_loss): such a call fails and the capture is lost. Scratch must
 * already be large enough: run the same sequence once before capturing.
 * Device memory allocated inside the capture is allocated and freed by each
 * replay. Return LMK_OK, LMK_DEVICE (reason in last_error) or LMK_NOMEM. */
typedef struct lmk_cuda_graph lmk_cuda_graph;
int lmk_backend_cuda_capture_begin(lmk_backend *b);
int lmk_backend_cuda_capture_end(lmk_backend *b, lmk_cuda_graph **out);
/* Enqueues one replay of g on b's stream (asynchronous). */
int lmk_cuda_graph_launch(lmk_backend *b, lmk_cuda_graph *g);
void lmk_cuda_graph_free(lmk_cuda_graph *g); /* NULL allowed */

#ifdef __cplusplus
}
#endif

#endif
