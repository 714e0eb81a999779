/* The per-device peak table (dense tensor-core / CUDA-core peaks, FLOP/s). */
#include "device_peaks.h"

#include <string.h>

typedef struct device_peak {
    const char *name_contains; /* matched against the CUDA device name */
    double tflops[LMK_PREC_COUNT]; /* fp32 (CUDA cores), tf32, bf16, fp16: dense */
    const char *source;
} device_peak;

static const device_peak peaks[] = {
    /* H100 SXM5 and H200 share the GH100 compute configuration (132 SMs, 1.98 GHz boost). */
    {"H100 80GB HBM3", {66.9, 494.7, 989.4, 989.4}, "NVIDIA H100 SXM5 datasheet (dense)"},
    {"H200", {66.9, 494.7, 989.4, 989.4}, "NVIDIA H200 SXM datasheet (dense)"},
    {"H100 PCIe", {51.2, 378.0, 756.0, 756.0}, "NVIDIA H100 PCIe datasheet (dense)"},
    {"A100", {19.5, 156.0, 312.0, 312.0}, "NVIDIA A100 datasheet (dense)"},
};

double device_peak_flops(const runctx_device *dev, lmk_precision prec, const char **source)
{
    if (dev->gpu_index < 0) {
        *source = "no peak figure for CPU workers";
        return 0.0;
    }
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++) {
        if (strstr(dev->name, peaks[i].name_contains) && prec < LMK_PREC_COUNT) {
            *source = peaks[i].source;
            return peaks[i].tflops[prec] * 1e12;
        }
    }
    *source = "device not in the peak table";
    return 0.0;
}
