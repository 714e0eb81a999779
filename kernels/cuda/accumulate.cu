/* The accumulation experiment on the GPU: one thread, the device's own
 * half-precision arithmetic (__hadd on __half / __nv_bfloat16). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" {
#include "../accumulate.h"
#include "../status.h"
}

/* acc: (1,) double, in/out. One thread runs the loop so the order is the
 * sequential one. */
__global__ void accumulate_kernel(int accumulator, int summand, int cast, float value,
                                  long long count, double *acc_io)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    float start = (float)*acc_io;
    if (accumulator == LMK_F32 && summand == LMK_F32) {
        float acc = start, x = value;
        for (long long i = 0; i < count; i++)
            acc = __fadd_rn(acc, x);
        *acc_io = acc;
    } else if (accumulator == LMK_F16 && summand == LMK_F16) {
        __half acc = __float2half_rn(start), x = __float2half_rn(value);
        for (long long i = 0; i < count; i++)
            acc = __hadd(acc, x);
        *acc_io = __half2float(acc);
    } else if (accumulator == LMK_BF16 && summand == LMK_BF16) {
        __nv_bfloat16 acc = __float2bfloat16_rn(start), x = __float2bfloat16_rn(value);
        for (long long i = 0; i < count; i++)
            acc = __hadd(acc, x);
        *acc_io = __bfloat162float(acc);
    } else if (accumulator == LMK_F32 && summand == LMK_F16) {
        float acc = start;
        __half x = __float2half_rn(value);
        for (long long i = 0; i < count; i++)
            acc = cast == LMK_CAST_EXPLICIT ? __fadd_rn(acc, __half2float(x)) : acc + (float)x;
        *acc_io = acc;
    } else if (accumulator == LMK_F32 && summand == LMK_BF16) {
        float acc = start;
        __nv_bfloat16 x = __float2bfloat16_rn(value);
        for (long long i = 0; i < count; i++)
            acc = cast == LMK_CAST_EXPLICIT ? __fadd_rn(acc, __bfloat162float(x)) : acc + (float)x;
        *acc_io = acc;
    }
}

extern "C" int lmk_accumulate_cuda(const lmk_accum_case *c, double summand_value, long long count,
                                   double *acc, char *errbuf, size_t errlen)
{
    double check = 0.0;
    if (!c || !acc || lmk_accumulate_cpu(c, summand_value, 0, &check) != LMK_OK)
        return LMK_INVALID;
    /* The summand goes through float first, then the dtype's own rounding on
     * the device (the same value as rounding 0.01 directly, for these cases). */
    double *dev_acc = NULL;
    double value = *acc;
    cudaError_t err = cudaMalloc(&dev_acc, sizeof(double));
    if (err == cudaSuccess)
        err = cudaMemcpy(dev_acc, &value, sizeof(double), cudaMemcpyHostToDevice);
    if (err == cudaSuccess) {
        accumulate_kernel<<<1, 1>>>((int)c->accumulator, (int)c->summand, (int)c->cast,
                                    (float)summand_value, count, dev_acc);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaMemcpy(&value, dev_acc, sizeof(double), cudaMemcpyDeviceToHost);
    if (dev_acc)
        cudaFree(dev_acc);
    if (err != cudaSuccess) {
        snprintf(errbuf, errlen, "accumulate kernel: %s", cudaGetErrorString(err));
        return LMK_DEVICE;
    }
    *acc = value;
    return LMK_OK;
}
