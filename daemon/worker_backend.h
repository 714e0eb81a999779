/* Creates the compute backend that fits a worker's device (CPU or CUDA). */
#ifndef DAEMON_WORKER_BACKEND_H
#define DAEMON_WORKER_BACKEND_H

#include <stddef.h>

#include "runctx.h"

struct lmk_backend;

/* Sets *out (new). Returns 0 or a negative lmk status with errbuf filled. */
int worker_backend_create(const runctx_device *device, struct lmk_backend **out, char *errbuf,
                          size_t errlen);
/* Accepts NULL. */
void worker_backend_free(struct lmk_backend *backend);

#endif
