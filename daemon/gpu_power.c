/* GPU clocks and power through NVML, loaded with dlopen (gpu_power.h). */
#include "gpu_power.h"
#include "clock_ms.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef LMPERF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* The few NVML entry points used, by their C signatures in nvml.h (return
 * 0 = NVML_SUCCESS; the device handle is an opaque pointer). */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_by_pci_fn)(const char *pci_bus_id, void **device);
typedef int (*nvml_clock_fn)(void *device, int clock_type, unsigned *mhz);
typedef int (*nvml_milliwatts_fn)(void *device, unsigned *mw);
typedef int (*nvml_reasons_fn)(void *device, unsigned long long *reasons);
#define NVML_CLOCK_SM 1

struct gpu_power_watch {
    void *lib;
    void *device;
    nvml_shutdown_fn shutdown;
    nvml_clock_fn clock_info;
    nvml_milliwatts_fn power_usage, power_limit;
    nvml_reasons_fn reasons;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t lock;
    int measuring, stop;          /* under lock */
    gpu_power_summary sum;        /* under lock */
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}


int gpu_power_read(gpu_power_watch *w, gpu_power_sample *out)
{
    if (!w || !out)
        return -1;
    memset(out, 0, sizeof *out);
    unsigned mhz = 0, mw = 0, limit_mw = 0;
    unsigned long long reasons = 0;
    if (w->clock_info(w->device, NVML_CLOCK_SM, &mhz) != 0 || w->power_usage(w->device, &mw) != 0)
        return -1;
    if (w->power_limit(w->device, &limit_mw) != 0)
        limit_mw = 0;
    if (w->reasons && w->reasons(w->device, &reasons) != 0)
        reasons = 0;
    out->sm_mhz = mhz;
    out->power_w = mw / 1000.0;
    out->power_limit_w = limit_mw / 1000.0;
    out->reasons = reasons;
    return 0;
}

int gpu_power_is_settled(const gpu_power_sample *s, double fraction)
{
    return s->power_limit_w <= 0 || s->power_w < fraction * s->power_limit_w;
}

void gpu_power_accumulate(gpu_power_summary *sum, const gpu_power_sample *s)
{
    if (s->reasons & GPU_POWER_IDLE_REASON)
        return; /* nothing ran: the idle clock says nothing of the measurement */
    if (sum->samples == 0 || s->sm_mhz < sum->sm_mhz_min)
        sum->sm_mhz_min = s->sm_mhz;
    sum->sm_mhz_mean += (s->sm_mhz - sum->sm_mhz_mean) / (sum->samples + 1);
    if (s->power_w > sum->power_w_max)
        sum->power_w_max = s->power_w;
    if (s->reasons & GPU_POWER_SLOWDOWN_REASONS)
        sum->slowdown = 1;
    sum->samples++;
}

#ifdef LMPERF_HAVE_CUDA /* used by the CUDA paths alone */
static void *watch_main(void *arg)
{
    gpu_power_watch *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int stop = w->stop, measuring = w->measuring;
        pthread_mutex_unlock(&w->lock);
        if (stop)
            return NULL;
        gpu_power_sample s;
        if (measuring && gpu_power_read(w, &s) == 0) {
            pthread_mutex_lock(&w->lock);
            if (w->measuring) /* still: a sample taken across "off" is dropped */
                gpu_power_accumulate(&w->sum, &s);
            pthread_mutex_unlock(&w->lock);
        }
        sleep_ms(GPU_POWER_SAMPLE_MS);
    }
}
#endif

gpu_power_watch *gpu_power_open(int cuda_device)
{
#ifdef LMPERF_HAVE_CUDA
    char bus[64];
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, cuda_device) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return NULL;
    gpu_power_watch *w = calloc(1, sizeof *w);
    if (!w) {
        dlclose(lib);
        return NULL;
    }
    w->lib = lib;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_by_pci_fn by_pci = (nvml_by_pci_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    w->shutdown = (nvml_shutdown_fn)dlsym(lib, "nvmlShutdown");
    w->clock_info = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
    w->power_usage = (nvml_milliwatts_fn)dlsym(lib, "nvmlDeviceGetPowerUsage");
    w->power_limit = (nvml_milliwatts_fn)dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit");
    w->reasons = (nvml_reasons_fn)dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!w->reasons) /* the name before NVML 12 */
        w->reasons = (nvml_reasons_fn)dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!init || !by_pci || !w->shutdown || !w->clock_info || !w->power_usage || !w->power_limit ||
        init() != 0) {
        dlclose(lib);
        free(w);
        return NULL;
    }
    gpu_power_sample probe;
    if (by_pci(bus, &w->device) != 0 || gpu_power_read(w, &probe) != 0) {
        w->shutdown();
        dlclose(lib);
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->thread_started = pthread_create(&w->thread, NULL, watch_main, w) == 0;
    return w;
#else
    (void)cuda_device;
    return NULL;
#endif
}

void gpu_power_close(gpu_power_watch *w)
{
    if (!w)
        return;
    if (w->thread_started) {
        pthread_mutex_lock(&w->lock);
        w->stop = 1;
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
    }
    pthread_mutex_destroy(&w->lock);
    w->shutdown();
    dlclose(w->lib);
    free(w);
}

void gpu_power_settle(gpu_power_watch *w)
{
    if (!w)
        return;
    const double t0 = monotonic_ms();
    gpu_power_sample s;
    while (gpu_power_read(w, &s) == 0 && !gpu_power_is_settled(&s, GPU_POWER_SETTLE_FRACTION) &&
           monotonic_ms() - t0 < GPU_POWER_SETTLE_MAX_MS)
        sleep_ms(GPU_POWER_SAMPLE_MS);
    const double waited = monotonic_ms() - t0;
    pthread_mutex_lock(&w->lock);
    w->sum.settle_ms += waited;
    pthread_mutex_unlock(&w->lock);
}

void gpu_power_measure(gpu_power_watch *w, int on)
{
    if (!w)
        return;
    /* one reading at each edge (kept only if the GPU was busy then) */
    gpu_power_sample s;
    int have = gpu_power_read(w, &s) == 0;
    pthread_mutex_lock(&w->lock);
    if (have && (on || w->measuring))
        gpu_power_accumulate(&w->sum, &s);
    w->measuring = on;
    pthread_mutex_unlock(&w->lock);
}

void gpu_power_reset(gpu_power_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    memset(&w->sum, 0, sizeof w->sum);
    pthread_mutex_unlock(&w->lock);
}

gpu_power_summary gpu_power_get(gpu_power_watch *w)
{
    gpu_power_summary s;
    memset(&s, 0, sizeof s);
    if (!w)
        return s;
    pthread_mutex_lock(&w->lock);
    s = w->sum;
    pthread_mutex_unlock(&w->lock);
    return s;
}
