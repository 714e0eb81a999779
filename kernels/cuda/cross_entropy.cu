/* Fused softmax cross-entropy with its gradient.
 *
 *   *loss (device scalar) = mean_i (logsumexp(z_i) − z_i[t_i]),  z (n, V)
 *   dlogits (n, V) = (softmax(z_i) − onehot(t_i)) · dscale / n  (optional;
 *   may alias logits)
 * One block per row (any V, e.g. 10007): max, Σ exp in double, row loss to
 * scratch; then one block sums the n row losses in a fixed order, so the
 * loss is deterministic. Each thread only rewrites the elements it read, and
 * z[t] is read before any write. Targets outside [0, V) are not checked on
 * the device (the model validates them): that row contributes 0. */
#include "cuda_internal.cuh"

#define CE_THREADS 256

// rowloss (n), dlogits (n, V) or NULL, logits (n, V), targets (n)
__global__ void cross_entropy_row_kernel(double *rowloss, float *dlogits, const float *logits,
                                         const int32_t *targets, int V, float gs)
{
    __shared__ double shd[32];
    __shared__ float shf[32];
    __shared__ float zt_sh;
    size_t i = blockIdx.x;
    const float *z = logits + i * V;
    int t = targets[i];
    int valid = t >= 0 && t < V;
    if (threadIdx.x == 0)
        zt_sh = valid ? z[t] : 0.0f;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        mx = fmaxf(mx, z[j]);
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if ((threadIdx.x & 31) == 0)
        shf[threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = -INFINITY;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++)
        mx = fmaxf(mx, shf[w]);
    double sum = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        sum += exp((double)(z[j] - mx));
    sum = block_sum_double(sum, shd); /* also orders the zt read before writes */
    if (threadIdx.x == 0)
        rowloss[i] = valid ? (double)mx + log(sum) - (double)zt_sh : 0.0;
    if (dlogits) {
        float *dz = dlogits + i * V;
        float inv = (float)(1.0 / sum);
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            float v = expf(z[j] - mx) * inv * gs;
            if (j == t)
                v -= gs;
            dz[j] = v;
        }
    }
}

/* One block: *loss = Σ rowloss (n) / n in a fixed order. */
__global__ void cross_entropy_mean_kernel(float *loss, const double *rowloss, int n)
{
    __shared__ double sh[32];
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += rowloss[i];
    s = block_sum_double(s, sh);
    if (threadIdx.x == 0)
        *loss = (float)(s / n);
}

int cuda_cross_entropy(lmk_backend *b, float *loss, float *dlogits, const float *logits,
                       const int32_t *targets, int n, int V, float dscale)
{
    cuda_state *st = CST(b);
    if (n <= 0 || V <= 0)
        return LMK_INVALID;
    void *ws = NULL;
    int rc = cuda_scratch(st, sizeof(double) * (size_t)n, &ws);
    if (rc != LMK_OK)
        return rc;
    double *rowloss = (double *)ws;
    cross_entropy_row_kernel<<<n, CE_THREADS, 0, st->stream>>>(rowloss, dlogits, logits, targets,
                                                              V, dscale / (float)n);
    LAUNCH_CHECK(st, "cross_entropy_row_kernel");
    cross_entropy_mean_kernel<<<1, 1024, 0, st->stream>>>(loss, rowloss, n);
    LAUNCH_CHECK(st, "cross_entropy_mean_kernel");
    return LMK_OK;
}
