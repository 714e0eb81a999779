/* CUDA-event timers (timing.h): cudaEvent_t with timing enabled, recorded on
 * the backend's stream; failures recorded in the backend's last error. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"

extern "C" {
#include "timing.h"
}

struct lmk_cuda_timer {
    lmk_backend *b; /* borrowed */
    int n;
    cudaEvent_t *ev; /* (n) */
};

extern "C" void lmk_cuda_timer_free(lmk_cuda_timer *t)
{
    if (!t)
        return;
    for (int i = 0; t->ev && i < t->n; i++)
        if (t->ev[i])
            (void)cudaEventDestroy(t->ev[i]);
    free(t->ev);
    free(t);
}

extern "C" int lmk_cuda_timer_create(lmk_backend *b, int n, lmk_cuda_timer **out)
{
    if (!b || n < 1 || !b->name || strcmp(b->name, "cuda") != 0)
        return LMK_INVALID;
    cuda_state *st = CST(b);
    lmk_cuda_timer *t = (lmk_cuda_timer *)calloc(1, sizeof *t);
    if (!t || !(t->ev = (cudaEvent_t *)calloc((size_t)n, sizeof *t->ev))) {
        free(t);
        return LMK_NOMEM;
    }
    t->b = b;
    t->n = n;
    for (int i = 0; i < n; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&t->ev[i], cudaEventDefault);
        if (e != cudaSuccess) {
            t->ev[i] = NULL;
            lmk_cuda_timer_free(t);
            return cuda_fail(st, "cudaEventCreateWithFlags", e);
        }
    }
    *out = t;
    return LMK_OK;
}

extern "C" int lmk_cuda_timer_record(lmk_cuda_timer *t, int i)
{
    if (!t || i < 0 || i >= t->n)
        return LMK_INVALID;
    cuda_state *st = CST(t->b);
    CUDA_TRY(st, cudaEventRecord(t->ev[i], st->stream));
    return LMK_OK;
}

extern "C" int lmk_cuda_timer_elapsed(lmk_cuda_timer *t, int from, int to, double *ms)
{
    if (!t || from < 0 || from >= t->n || to < 0 || to >= t->n || !ms)
        return LMK_INVALID;
    cuda_state *st = CST(t->b);
    float f = 0.0f;
    CUDA_TRY(st, cudaEventSynchronize(t->ev[to]));
    CUDA_TRY(st, cudaEventElapsedTime(&f, t->ev[from], t->ev[to]));
    *ms = f;
    return LMK_OK;
}
