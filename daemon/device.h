/* What a worker runs on: probing the GPU (CUDA runtime) or the CPU. Called
 * only inside worker processes and one-shot mode, never in the HTTP daemon
 * (which must not create a CUDA context before forking). */
#ifndef DAEMON_DEVICE_H
#define DAEMON_DEVICE_H

#include <jansson.h>

#include "runctx.h"

#define DEVICE_AUTO (-2) /* GPU 0 when there is one, else the CPU */
#define DEVICE_CPU (-1)

/* Probes the device. want: DEVICE_AUTO, DEVICE_CPU or a GPU index. Fills
 * *dev and sets *gpu_count to the number of visible GPUs (0 without CUDA or a
 * driver). Selects the GPU for this process (cudaSetDevice). Returns 0, or -1
 * with a message in errbuf (a GPU index that does not exist). */
int device_probe(int want, runctx_device *dev, int *gpu_count, char *errbuf, size_t errlen);
/* Whether device_probe(want) runs on the CPU: want DEVICE_CPU, or
 * DEVICE_AUTO with no GPU visible. Sets *gpu_count as device_probe does;
 * counts the GPUs only (no context, no GPU selected). */
int device_picks_cpu(int want, int *gpu_count);

/* The device as a JSON object (new), the shape stored in environments. */
json_t *device_to_json(const runctx_device *dev);
/* Reads that shape back (for the daemon side). */
void device_from_json(const json_t *obj, runctx_device *dev);
/* "cuda:N" for device_to_json's object of GPU N, "cpu" for the cpu worker's
 * (gpu_index -1) or none (NULL), into buf: a job's device column. */
void device_label(const json_t *device, char *buf, size_t len);

/* Bytes of RAM the kernel reports available (MemAvailable), or 0. */
unsigned long long device_cpu_available_bytes(void);

#endif
