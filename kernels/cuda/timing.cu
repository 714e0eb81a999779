/* CUDA-event timers and the blocking-kernel gate (timing.h): cudaEvent_t
 * with timing enabled, recorded on the backend's stream; the gate's flag in
 * pinned mapped host memory; failures recorded in the backend's last
 * error. */
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
    int rc = cuda_side_join(st); /* the event marks the overlap GEMMs' work too */
    if (rc != LMK_OK)
        return rc;
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

/* The gate's flag words in pinned host memory, read and written by both
 * sides: [0] open (host writes 1), [1] timed out (the kernel writes 1). */
enum { GATE_OPEN, GATE_TIMED_OUT, GATE_WORDS };

struct lmk_cuda_gate {
    lmk_backend *b;          /* borrowed */
    volatile int *host;      /* (GATE_WORDS) pinned, mapped */
    int *device;             /* the same words as the device sees them */
    unsigned long long timeout_ns;
};

static __device__ __forceinline__ unsigned long long gate_clock_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One thread: returns when flags[GATE_OPEN] != 0, or after timeout_ns
 * (global timer) with flags[GATE_TIMED_OUT] = 1. */
__global__ void gate_wait_kernel(volatile int *flags, unsigned long long timeout_ns)
{
    unsigned long long t0 = gate_clock_ns();
    while (flags[GATE_OPEN] == 0) {
        if (gate_clock_ns() - t0 > timeout_ns) {
            flags[GATE_TIMED_OUT] = 1;
            __threadfence_system();
            return;
        }
        __nanosleep(100);
    }
}

extern "C" void lmk_cuda_gate_free(lmk_cuda_gate *g)
{
    if (!g)
        return;
    if (g->host)
        (void)cudaFreeHost((void *)g->host);
    free(g);
}

extern "C" int lmk_cuda_gate_create(lmk_backend *b, double timeout_ms, lmk_cuda_gate **out)
{
    if (!b || !out || !(timeout_ms > 0) || !b->name || strcmp(b->name, "cuda") != 0)
        return LMK_INVALID;
    cuda_state *st = CST(b);
    lmk_cuda_gate *g = (lmk_cuda_gate *)calloc(1, sizeof *g);
    if (!g)
        return LMK_NOMEM;
    g->b = b;
    g->timeout_ns = (unsigned long long)(timeout_ms * 1e6);
    void *host = NULL;
    cudaError_t e = cudaHostAlloc(&host, GATE_WORDS * sizeof(int), cudaHostAllocMapped);
    if (e != cudaSuccess) {
        free(g);
        return cuda_fail(st, "cudaHostAlloc (gate flag)", e);
    }
    g->host = (volatile int *)host;
    g->host[GATE_OPEN] = 1; /* open until closed: a stray kernel would not wait */
    g->host[GATE_TIMED_OUT] = 0;
    e = cudaHostGetDevicePointer((void **)&g->device, host, 0);
    if (e != cudaSuccess) {
        lmk_cuda_gate_free(g);
        return cuda_fail(st, "cudaHostGetDevicePointer (gate flag)", e);
    }
    *out = g;
    return LMK_OK;
}

extern "C" int lmk_cuda_gate_close(lmk_cuda_gate *g)
{
    if (!g)
        return LMK_INVALID;
    cuda_state *st = CST(g->b);
    g->host[GATE_OPEN] = 0;
    g->host[GATE_TIMED_OUT] = 0;
    __sync_synchronize();
    gate_wait_kernel<<<1, 1, 0, st->stream>>>(g->device, g->timeout_ns);
    LAUNCH_CHECK(st, "gate_wait_kernel");
    return LMK_OK;
}

extern "C" void lmk_cuda_gate_open(lmk_cuda_gate *g)
{
    if (!g)
        return;
    __sync_synchronize();
    g->host[GATE_OPEN] = 1;
    __sync_synchronize();
}

extern "C" int lmk_cuda_gate_timed_out(const lmk_cuda_gate *g)
{
    return g && g->host[GATE_TIMED_OUT] != 0;
}
