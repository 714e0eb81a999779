/* Backend selection for a worker: the cuda backend on a GPU worker, the cpu
 * reference backend on the CPU worker. */
#include "worker_backend.h"

#include <stdio.h>

#include "backend.h"
#include "status.h"
#ifdef LMPERF_HAVE_CUDA
#include "cuda/backend_cuda.h"
#endif

int worker_backend_create(const runctx_device *device, struct lmk_backend **out, char *errbuf,
                          size_t errlen)
{
    int rc;
    if (device->gpu_index >= 0) {
#ifdef LMPERF_HAVE_CUDA
        rc = lmk_backend_cuda_create(device->gpu_index, out, errbuf, errlen);
#else
        snprintf(errbuf, errlen, "this lmperfd was built without CUDA");
        rc = LMK_UNSUPPORTED;
#endif
        return rc;
    }
    rc = lmk_backend_cpu_create(out);
    if (rc != LMK_OK)
        snprintf(errbuf, errlen, "cpu backend: %s", lmk_status_text(rc));
    return rc;
}

void worker_backend_free(struct lmk_backend *backend)
{
    lmk_backend_free(backend);
}
