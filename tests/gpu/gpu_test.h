/* Opening the CUDA backend at the start of a GPU test. */
#ifndef GPU_TEST_H
#define GPU_TEST_H

#include <stdio.h>

#include "backend.h"
#include "cuda/backend_cuda.h"
#include "status.h"

/* Creates the CUDA backend on device 0 into *gpu. Returns 0 on success, 77
 * (meson's "skipped") when no CUDA device is visible, 1 when the backend
 * cannot be created; test_name heads the message printed in either case. */
static inline int gpu_test_open(const char *test_name, lmk_backend **gpu)
{
    if (lmk_cuda_device_count() == 0) {
        printf("%s: no CUDA device visible, skipped\n", test_name);
        return 77;
    }
    char err[256] = "";
    if (lmk_backend_cuda_create(0, gpu, err, sizeof err) != LMK_OK) {
        fprintf(stderr, "FAIL %s: cuda backend: %s\n", test_name, err);
        return 1;
    }
    return 0;
}

#endif
