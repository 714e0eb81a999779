/* GPU clocks and power through NVML (loaded at run time: a machine without
 * the driver's libnvidia-ml simply has no readings), for timings that say
 * at which clock they were taken and that do not inherit the power cap of
 * what ran before them.
 *
 * A watch is one GPU, sampled every GPU_POWER_SAMPLE_MS by a thread of its
 * own while "measuring" is on (readings NVML marks idle are left out, so a
 * loop shorter than a few periods may have none): the SM clock (min and
 * mean, MHz), the board
 * power (max, W) and whether NVML reported a power cap or a thermal or
 * hardware slowdown as a reason for lowered clocks in any sample.
 * gpu_power_settle waits, before a measurement, until the board power NVML
 * reports (a moving average over about a second on recent GPUs) is below
 * GPU_POWER_SETTLE_FRACTION of the enforced power limit, at most
 * GPU_POWER_SETTLE_MAX_MS. */
#ifndef LMPERF_GPU_POWER_H
#define LMPERF_GPU_POWER_H

#include <stdint.h>

#define GPU_POWER_SAMPLE_MS 5
#define GPU_POWER_SETTLE_FRACTION 0.5
#define GPU_POWER_SETTLE_MAX_MS 3000

/* NVML's clock-lowering reasons that mean "slower than the clock asked for"
 * (nvmlClocksEventReason* bit values): software power cap, hardware
 * slowdown, software thermal, hardware thermal, power brake. Idle and the
 * application clock setting are not among them. */
#define GPU_POWER_SLOWDOWN_REASONS (0x4ull | 0x8ull | 0x20ull | 0x40ull | 0x80ull)

/* NVML's "GPU idle" reason bit: a reading with it is not a busy clock. */
#define GPU_POWER_IDLE_REASON 0x1ull

typedef struct gpu_power_sample {
    unsigned sm_mhz;          /* current SM clock */
    double power_w;           /* board power draw */
    double power_limit_w;     /* enforced power limit */
    uint64_t reasons;         /* NVML clock-lowering reason bits */
} gpu_power_sample;

typedef struct gpu_power_summary {
    int samples;              /* busy readings; 0: none (no NVML, or loops too short) */
    unsigned sm_mhz_min;
    double sm_mhz_mean;
    double power_w_max;
    int slowdown;             /* 1: some sample had a GPU_POWER_SLOWDOWN_REASONS bit */
    double settle_ms;         /* total time spent in gpu_power_settle */
} gpu_power_summary;

typedef struct gpu_power_watch gpu_power_watch;

/* The GPU of CUDA device `cuda_device` (matched by PCI bus id). NULL when NVML
 * or the device cannot be opened: every other call accepts NULL and does
 * nothing. */
gpu_power_watch *gpu_power_open(int cuda_device);
void gpu_power_close(gpu_power_watch *w);

/* One reading now; 0 on success. */
int gpu_power_read(gpu_power_watch *w, gpu_power_sample *out);

/* True when a measurement may start: power below `fraction` of the limit.
 * A sample without a limit (0) counts as settled. */
int gpu_power_is_settled(const gpu_power_sample *s, double fraction);

/* Waits (polling) until gpu_power_is_settled or GPU_POWER_SETTLE_MAX_MS;
 * adds the time waited to the summary. */
void gpu_power_settle(gpu_power_watch *w);

/* Starts / stops accumulating samples into the summary (one reading at each
 * edge besides the thread's); reset clears it. */
void gpu_power_measure(gpu_power_watch *w, int on);
void gpu_power_reset(gpu_power_watch *w);
gpu_power_summary gpu_power_get(gpu_power_watch *w);

/* Folds one sample into a summary (the watch thread's step; exposed for tests). */
void gpu_power_accumulate(gpu_power_summary *sum, const gpu_power_sample *s);

#endif
