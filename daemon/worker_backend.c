/* Backend selection for a worker. Until the engine's backends exist this
 * reports that no backend is available. */
#include "worker_backend.h"

#include <stdio.h>

#include "status.h"

int worker_backend_create(const runctx_device *device, struct lmk_backend **out, char *errbuf,
                          size_t errlen)
{
    (void)device;
    (void)out;
    snprintf(errbuf, errlen, "no compute backend in this build");
    return LMK_UNSUPPORTED;
}

void worker_backend_free(struct lmk_backend *backend)
{
    (void)backend;
}
