/* All-reduce buffers on the GPU: fill rank r's send buffer with its pattern
 * and count the elements of a reduced buffer that differ from the exact sum.
 * The pattern is lmk_allreduce_pattern() of collectives.h:
 *   x[i] = (7 i + 5 r) mod 16, so sum over ranks at i depends on i mod 16. */
#include <cuda_runtime.h>

extern "C" {
#include "../collectives.h"
#include "../status.h"
}

#define PATTERN_PERIOD 16
#define BLOCK 256
#define MAX_BLOCKS 4096 /* grid-stride beyond this */

// x: (count,) float32, out
__global__ void allreduce_fill_kernel(float *x, size_t count, int rank)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        x[i] = lmk_allreduce_pattern(rank, i);
}

// x: (count,) float32; expected: (16,) by value; bad: (1,) accumulated
struct expected_table {
    float v[PATTERN_PERIOD];
};
__global__ void allreduce_mismatch_kernel(const float *x, size_t count, expected_table expected,
                                          unsigned long long *bad)
{
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        local += x[i] != expected.v[i % PATTERN_PERIOD];
    if (local)
        atomicAdd(bad, local);
}

static unsigned grid_for(size_t count)
{
    size_t blocks = (count + BLOCK - 1) / BLOCK;
    return (unsigned)(blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
}

extern "C" int lmk_cuda_allreduce_fill(float *x, size_t count, int rank, cudaStream_t stream)
{
    if (!x || count == 0)
        return LMK_INVALID;
    allreduce_fill_kernel<<<grid_for(count), BLOCK, 0, stream>>>(x, count, rank);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}

/* Sets *bad_out (device pointer) to the number of mismatches (asynchronous). */
extern "C" int lmk_cuda_allreduce_mismatches(const float *x, size_t count, int world, unsigned long long *bad_out,
                                             cudaStream_t stream)
{
    if (!x || !bad_out || world < 1)
        return LMK_INVALID;
    expected_table expected;
    for (int k = 0; k < PATTERN_PERIOD; k++)
        expected.v[k] = lmk_allreduce_expected(world, (size_t)k);
    if (cudaMemsetAsync(bad_out, 0, sizeof *bad_out, stream) != cudaSuccess)
        return LMK_DEVICE;
    allreduce_mismatch_kernel<<<grid_for(count), BLOCK, 0, stream>>>(x, count, expected, bad_out);
    return cudaGetLastError() == cudaSuccess ? LMK_OK : LMK_DEVICE;
}
