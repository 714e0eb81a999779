/* CUDA graphs of a model step's phases. See phase_graphs.h. */
#include "phase_graphs.h"

#include <stdio.h>
#include <string.h>

#include "status.h"

#ifdef LMPERF_HAVE_CUDA /* used by the CUDA paths alone */
static const char *const phase_graph_names[PHASE_GRAPH_COUNT] = {"forward", "backward", "optimizer"};
#endif

int phase_graphs_cuda(const lmk_backend *b)
{
    return b && b->name && strcmp(b->name, "cuda") == 0;
}

int phase_graphs_capturable(lmk_precision prec, int last, const char **why)
{
    if (last >= PHASE_OPTIMIZER && prec == LMK_PREC_FP16) {
        *why = "graphs not used: fp16's optimizer step reads the overflow verdict back to the host "
               "(dynamic loss scale), which a graph cannot capture, so train_step runs eagerly";
        return 0;
    }
    return 1;
}

int phase_graphs_capture(lmk_backend *b, int last, phase_call_fn call, void *ctx, lmk_cuda_graph **graphs,
                         char *detail, size_t len)
{
#ifdef LMPERF_HAVE_CUDA
    lmk_cuda_graph *made[PHASE_GRAPH_COUNT] = {0};
    /* the replays get their own memory: first return what the pool caches
     * from the eager steps before the capture (else both are held: xl at
     * T 1024 in bf16 did not fit on an 80 GB H100) */
    int rc_release = lmk_backend_cuda_release_cached(b);
    if (rc_release != LMK_OK) {
        if (detail)
            snprintf(detail, len, "releasing the pool's cache before the graph capture failed: %s (%s)",
                     lmk_status_text(rc_release), lmk_backend_cuda_last_error(b));
        return rc_release;
    }
    for (int ph = PHASE_FORWARD; ph <= last; ph++) {
        int rc = lmk_backend_cuda_capture_begin(b);
        int rc_call = rc == LMK_OK ? call(ctx, ph) : LMK_OK;
        int rc_end = rc == LMK_OK ? lmk_backend_cuda_capture_end(b, &made[ph]) : LMK_OK;
        if (rc == LMK_OK)
            rc = rc_call != LMK_OK ? rc_call : rc_end;
        if (rc != LMK_OK) {
            if (detail)
                snprintf(detail, len, "graph capture of the %s phase failed: %s (%s)", phase_graph_names[ph],
                         lmk_status_text(rc), lmk_backend_cuda_last_error(b));
            for (int i = 0; i <= ph; i++)
                lmk_cuda_graph_free(made[i]);
            return rc;
        }
    }
    for (int ph = PHASE_FORWARD; ph <= last; ph++)
        graphs[ph] = made[ph];
    return LMK_OK;
#else
    (void)b, (void)last, (void)call, (void)ctx, (void)graphs;
    if (detail)
        snprintf(detail, len, "graphs need a CUDA build");
    return LMK_UNSUPPORTED;
#endif
}

int phase_graphs_launch(lmk_backend *b, lmk_cuda_graph *g)
{
#ifdef LMPERF_HAVE_CUDA
    return lmk_cuda_graph_launch(b, g);
#else
    (void)b, (void)g;
    return LMK_UNSUPPORTED;
#endif
}

void phase_graphs_free(lmk_backend *b, lmk_cuda_graph **graphs, int n)
{
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= graphs[i] != NULL;
    if (!any)
        return;
#ifdef LMPERF_HAVE_CUDA
    (void)b->synchronize(b);
    for (int i = 0; i < n; i++)
        lmk_cuda_graph_free(graphs[i]);
    (void)lmk_backend_cuda_release_cached(b); /* the graphs' memory, for the next point's eager steps */
#else
    (void)b;
#endif
    memset(graphs, 0, (size_t)n * sizeof *graphs);
}
