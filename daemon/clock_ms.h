/* The monotonic clock in milliseconds, for host-side durations. */
#ifndef LMPERF_CLOCK_MS_H
#define LMPERF_CLOCK_MS_H

#include <time.h>

static inline double monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
