/* Backend selection for a worker: the CUDA backend on a GPU worker, the cpu
 * reference backend on the CPU worker. */
#include "worker_backend.h"

#include <stdio.h>

#include "backend.h"
#include "status.h"

int worker_backend_create(const runctx_device *device, struct lmk_backend **out, char *errbuf,
                          size_t errlen)
{
    if (device->gpu_index >= 0) {
        snprintf(errbuf, errlen, "the CUDA backend is not built into this binary");
        return LMK_UNSUPPORTED;
    }
    int rc = lmk_backend_cpu_create(out);
    if (rc != LMK_OK)
        snprintf(errbuf, errlen, "cpu backend: %s", lmk_status_text(rc));
    return rc;
}

void worker_backend_free(struct lmk_backend *backend)
{
    lmk_backend_free(backend);
}
