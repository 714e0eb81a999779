/* CUDA graphs of a model step's phases (forward, backward, optimizer),
 * captured from the very model calls that run them eagerly: shared by the
 * benchmark and profile jobs. Without CUDA in the build the capture says so
 * and nothing is captured. */
#ifndef DAEMON_PHASE_GRAPHS_H
#define DAEMON_PHASE_GRAPHS_H

#include <stddef.h>

#include "backend.h"
#include "model.h"

#ifdef LMPERF_HAVE_CUDA
#include "cuda/backend_cuda.h"
#else
typedef struct lmk_cuda_graph lmk_cuda_graph;
#endif

enum { PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER, PHASE_GRAPH_COUNT };

/* Runs phase `phase` of one step through the model API (an LMK status). */
typedef int (*phase_call_fn)(void *ctx, int phase);

/* Whether b is the cuda backend (graphs are CUDA graphs). */
int phase_graphs_cuda(const lmk_backend *b);

/* Whether phases 0..last can be captured under precision prec: fp16's
 * optimizer step reads its overflow verdict back to the host (dynamic loss
 * scale), which a graph cannot capture. Returns 1, or 0 with *why (static). */
int phase_graphs_capturable(lmk_precision prec, int last, const char **why);

/* Captures phases 0..last, one graph each, into graphs[0..last] (new; free
 * with phase_graphs_free). Scratch must already be sized by an eager step.
 * Returns LMK_OK, or a status with *detail naming the phase and the CUDA
 * error (the model's host state is then unusable: fail the run); graphs[]
 * is untouched on failure. */
int phase_graphs_capture(lmk_backend *b, int last, phase_call_fn call, void *ctx, lmk_cuda_graph **graphs,
                         char *detail, size_t len);

/* Enqueues one replay of g on b's stream. */
int phase_graphs_launch(lmk_backend *b, lmk_cuda_graph *g);

/* Waits for b's stream and frees graphs[0..n) (NULL entries allowed), then
 * sets them to NULL. */
void phase_graphs_free(lmk_backend *b, lmk_cuda_graph **graphs, int n);

#endif
