/* Device probing for workers: CUDA properties and versions, or the CPU. */
#include "device.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef LMPERF_HAVE_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#endif

unsigned long long device_cpu_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kib = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024ull;
}

static void probe_cpu(runctx_device *dev)
{
    memset(dev, 0, sizeof *dev);
    dev->gpu_index = DEVICE_CPU;
    char model[96] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(model, sizeof model, "%s", colon + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (f)
        fclose(f);
    snprintf(dev->name, sizeof dev->name, "cpu: %s", model);
    dev->total_bytes = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    dev->free_bytes = device_cpu_available_bytes();
    dev->multiprocessors = (int)sysconf(_SC_NPROCESSORS_ONLN);
}

#ifdef LMPERF_HAVE_CUDA
static void version_text(int v, char *out, size_t len)
{
    snprintf(out, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

static int probe_gpu(int index, runctx_device *dev, char *errbuf, size_t errlen)
{
    memset(dev, 0, sizeof *dev);
    struct cudaDeviceProp prop;
    cudaError_t err = cudaSetDevice(index);
    if (err == cudaSuccess)
        err = cudaGetDeviceProperties(&prop, index);
    if (err != cudaSuccess) {
        snprintf(errbuf, errlen, "GPU %d: %s", index, cudaGetErrorString(err));
        return -1;
    }
    dev->gpu_index = index;
    snprintf(dev->name, sizeof dev->name, "%.127s", prop.name);
    dev->sm_major = prop.major;
    dev->sm_minor = prop.minor;
    dev->multiprocessors = prop.multiProcessorCount;
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index) == cudaSuccess)
        dev->clock_mhz = khz / 1000;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess)
        dev->memory_clock_mhz = khz / 1000;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        dev->free_bytes = free_bytes;
        dev->total_bytes = total_bytes;
    } else {
        dev->total_bytes = prop.totalGlobalMem;
    }
    int v = 0;
    if (cudaDriverGetVersion(&v) == cudaSuccess)
        version_text(v, dev->driver, sizeof dev->driver);
    if (cudaRuntimeGetVersion(&v) == cudaSuccess)
        version_text(v, dev->runtime, sizeof dev->runtime);
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        snprintf(dev->cublas, sizeof dev->cublas, "%d.%d.%d", major, minor, patch);
    return 0;
}
#endif

int device_picks_cpu(int want, int *gpu_count)
{
    int count = 0;
#ifdef LMPERF_HAVE_CUDA
    if (cudaGetDeviceCount(&count) != cudaSuccess)
        count = 0;
#endif
    *gpu_count = count;
    return want == DEVICE_CPU || (want == DEVICE_AUTO && count == 0);
}

int device_probe(int want, runctx_device *dev, int *gpu_count, char *errbuf, size_t errlen)
{
    if (device_picks_cpu(want, gpu_count)) {
        probe_cpu(dev);
        return 0;
    }
    int count = *gpu_count;
    int index = want == DEVICE_AUTO ? 0 : want;
    if (index < 0 || index >= count) {
        snprintf(errbuf, errlen, "GPU %d does not exist (%d visible)", index, count);
        return -1;
    }
#ifdef LMPERF_HAVE_CUDA
    return probe_gpu(index, dev, errbuf, errlen);
#else
    return -1;
#endif
}

json_t *device_to_json(const runctx_device *dev)
{
    return json_pack("{s:i, s:s, s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s}", "gpu_index",
                     dev->gpu_index, "name", dev->name, "total_bytes", (json_int_t)dev->total_bytes,
                     "free_bytes", (json_int_t)dev->free_bytes, "sm_major", dev->sm_major, "sm_minor",
                     dev->sm_minor, "multiprocessors", dev->multiprocessors, "clock_mhz",
                     dev->clock_mhz, "memory_clock_mhz", dev->memory_clock_mhz, "driver", dev->driver,
                     "runtime", dev->runtime, "cublas", dev->cublas);
}

void device_from_json(const json_t *obj, runctx_device *dev)
{
    memset(dev, 0, sizeof *dev);
    dev->gpu_index = (int)json_integer_value(json_object_get(obj, "gpu_index"));
    snprintf(dev->name, sizeof dev->name, "%s", json_string_value(json_object_get(obj, "name")) ?: "");
    dev->total_bytes = (uint64_t)json_integer_value(json_object_get(obj, "total_bytes"));
    dev->free_bytes = (uint64_t)json_integer_value(json_object_get(obj, "free_bytes"));
    dev->sm_major = (int)json_integer_value(json_object_get(obj, "sm_major"));
    dev->sm_minor = (int)json_integer_value(json_object_get(obj, "sm_minor"));
    dev->multiprocessors = (int)json_integer_value(json_object_get(obj, "multiprocessors"));
    dev->clock_mhz = (int)json_integer_value(json_object_get(obj, "clock_mhz"));
    dev->memory_clock_mhz = (int)json_integer_value(json_object_get(obj, "memory_clock_mhz"));
    snprintf(dev->driver, sizeof dev->driver, "%s", json_string_value(json_object_get(obj, "driver")) ?: "");
    snprintf(dev->runtime, sizeof dev->runtime, "%s", json_string_value(json_object_get(obj, "runtime")) ?: "");
    snprintf(dev->cublas, sizeof dev->cublas, "%s", json_string_value(json_object_get(obj, "cublas")) ?: "");
}

void device_label(const json_t *device, char *buf, size_t len)
{
    int gpu = device ? (int)json_integer_value(json_object_get(device, "gpu_index")) : -1;
    if (gpu >= 0)
        snprintf(buf, len, "cuda:%d", gpu);
    else
        snprintf(buf, len, "cpu");
}
