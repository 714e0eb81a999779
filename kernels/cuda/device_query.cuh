/* Host-side queries of the current CUDA device, shared by the flash kernels'
 * routing (flash_attn.cu, flash_f32tc.cu, flash_wgmma.cu, flash_wgmma_bwd.cu).
 * Header-only: the sm_90a objects are compiled alone (kernels/meson.build). */
#ifndef LMK_DEVICE_QUERY_CUH
#define LMK_DEVICE_QUERY_CUH

#include <cuda_runtime.h>

/* Multiprocessors of the current device; fallback when the query fails. */
static inline int lmk_cuda_sm_count(int fallback)
{
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
        return fallback;
    return n;
}

/* 1 when the current device has compute capability exactly 9.0 (sm_90a code
 * runs there only), 0 otherwise or when the query fails. */
static inline int lmk_cuda_is_sm90(void)
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0;
    return major == 9 && minor == 0;
}

#endif
