/* On the GPU: the blocking-kernel gate of kernels/cuda/timing.h, which the
 * profile job's gpu_gated figures rely on. (1) It holds the stream: two
 * events recorded behind a closed gate, 30 ms of host time apart, are
 * < 1 ms apart on the GPU once the gate opens (without the hold they would
 * be 30 ms apart). (2) A gate never opened gives up after its timeout
 * (50 ms here): the synchronisation returns, timed_out says so. (3) The
 * gate is reusable after a timeout. (4) Bad arguments are refused.
 * Exits 77 when no CUDA device is visible, 1 on any failure. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../engine/check.h"
#include "../gpu/gpu_test.h"
#include "backend.h"
#include "cuda/backend_cuda.h"
#include "cuda/timing.h"
#include "status.h"

static lmk_backend *gpu;

#define GPU(x)                                                                                                  \
    do {                                                                                                        \
        int gpu_rc_ = (x);                                                                                      \
        if (gpu_rc_ != LMK_OK) {                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #x, lmk_status_text(gpu_rc_),     \
                    lmk_backend_cuda_last_error(gpu));                                                          \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void)
{
    int open_rc = gpu_test_open("test_gate", &gpu);
    if (open_rc != 0)
        return open_rc;
    lmk_cuda_timer *t = NULL;
    lmk_cuda_gate *hold = NULL, *brief = NULL, *bad = NULL;
    GPU(lmk_cuda_timer_create(gpu, 2, &t));
    GPU(lmk_cuda_gate_create(gpu, 2000.0, &hold));
    GPU(lmk_cuda_gate_create(gpu, 50.0, &brief));

    /* (1) the gate holds the stream while the host works */
    double ms = -1;
    GPU(lmk_cuda_gate_close(hold));
    GPU(lmk_cuda_timer_record(t, 0));
    sleep_ms(30);
    GPU(lmk_cuda_timer_record(t, 1));
    lmk_cuda_gate_open(hold);
    GPU(gpu->synchronize(gpu));
    GPU(lmk_cuda_timer_elapsed(t, 0, 1, &ms));
    CHECK(!lmk_cuda_gate_timed_out(hold), "the opened gate says it timed out");
    CHECK(ms >= 0 && ms < 1.0, "events 30 ms apart on the host are %.3f ms apart on the GPU behind the gate", ms);
    printf("held: events 30 ms apart on the host, %.4f ms on the GPU\n", ms);

    /* (2) a gate never opened gives up after its timeout */
    double t0 = now_ms();
    GPU(lmk_cuda_gate_close(brief));
    GPU(gpu->synchronize(gpu));
    double waited = now_ms() - t0;
    CHECK(lmk_cuda_gate_timed_out(brief), "a gate never opened did not time out");
    CHECK(waited >= 45.0 && waited < 1000.0, "the 50 ms gate released the stream after %.1f ms", waited);
    printf("timeout: a 50 ms gate never opened released the stream after %.1f ms, timed_out %d\n", waited,
           lmk_cuda_gate_timed_out(brief));

    /* (3) reusable after a timeout */
    GPU(lmk_cuda_gate_close(brief));
    lmk_cuda_gate_open(brief);
    GPU(gpu->synchronize(gpu));
    CHECK(!lmk_cuda_gate_timed_out(brief), "the gate still says timed out after it was reopened");

    /* (4) bad arguments */
    CHECK(lmk_cuda_gate_create(gpu, 0.0, &bad) == LMK_INVALID && !bad, "timeout 0 accepted");
    CHECK(lmk_cuda_gate_create(NULL, 10.0, &bad) == LMK_INVALID, "NULL backend accepted");
    CHECK(lmk_cuda_gate_close(NULL) == LMK_INVALID, "closing NULL accepted");
    lmk_cuda_gate_open(NULL);
    CHECK(!lmk_cuda_gate_timed_out(NULL), "NULL gate timed out");

    lmk_cuda_gate_free(hold);
    lmk_cuda_gate_free(brief);
    lmk_cuda_timer_free(t);
    lmk_backend_free(gpu);
    return check_report("test_gate");
}
