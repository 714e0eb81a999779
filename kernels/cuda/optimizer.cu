/* Gradient norm, clipping factor and fused AdamW (CS336 form).
 *
 *   sum_squares: *sumsq += Σ g² (double partials per block, then one ordered
 *                sum: deterministic for a given n)
 *   clip_factor: norm = sqrt(*sumsq)·unscale; *factor = unscale ·
 *                min(1, max_norm / (norm + 1e-6)); 0 when *sumsq not finite
 *   adamw      : g' = g·f; m = β1 m + (1−β1) g'; v = β2 v + (1−β2) g'²;
 *                p −= α_t m / (√v + ε); p −= lr·wd·p, α_t = lr √(1−β2ᵗ)/(1−β1ᵗ)
 *                (α_t computed on the host in double, or read from the
 *                device scalar written by adamw_begin). Does nothing when
 *                *factor == 0 (read on the device: no synchronisation).
 *   adamw_begin: the device step counter: t += (factor NULL or *factor != 0);
 *                *alpha = α_t in double, rounded once to float (as the cpu).
 * AdamW moves 28 bytes per parameter (p, m, v read+write, g read); float4
 * loads when all four pointers are 16-byte aligned. */
#include "cuda_internal.cuh"

#define SS_THREADS 256
#define SS_MAX_BLOCKS 1024u

// part (gridDim.x) = block sums of g (n)²
__global__ void sum_squares_part_kernel(double *part, const float *g, size_t n)
{
    __shared__ double sh[32];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += (double)g[i] * g[i];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++)
            t += sh[w];
        part[blockIdx.x] = t;
    }
}

// *sumsq += Σ part (parts), one thread, fixed order
__global__ void sum_squares_final_kernel(float *sumsq, const double *part, int parts)
{
    double t = 0.0;
    for (int i = 0; i < parts; i++)
        t += part[i];
    *sumsq = (float)(*sumsq + t);
}

__global__ void clip_factor_kernel(float *factor, const float *sumsq, float max_norm,
                                   float unscale)
{
    float ss = *sumsq;
    if (!isfinite(ss)) {
        *factor = 0.0f;
        return;
    }
    double norm = sqrt((double)ss) * unscale;
    double f = unscale;
    if (max_norm > 0.0f && norm + 1e-6 > max_norm)
        f *= max_norm / (norm + 1e-6);
    *factor = (float)f;
}

struct adamw_k {
    float b1, b2, at, decay, eps;
    const float *alpha; /* device α_t or NULL (then at) */
};

// one thread: *t += step taken; *alpha = α_t
__global__ void adamw_begin_kernel(int64_t *t, float *alpha, const float *factor, float lr,
                                   float b1, float b2)
{
    if (!factor || *factor != 0.0f)
        *t += 1;
    long long tt = *t;
    *alpha = tt > 0 ? (float)(lr * sqrt(1.0 - pow((double)b2, (double)tt)) /
                              (1.0 - pow((double)b1, (double)tt)))
                    : 0.0f;
}

__device__ __forceinline__ void adamw_one(float &p, float g, float &m, float &v, float f,
                                          const adamw_k &k)
{
    float gi = g * f;
    m = k.b1 * m + (1.0f - k.b1) * gi;
    v = k.b2 * v + (1.0f - k.b2) * gi * gi;
    p -= k.at * m / (sqrtf(v) + k.eps);
    p -= k.decay * p;
}

// p, g, m, v (n); factor scalar or NULL; vec4: n4 float4 groups then a tail
__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n,
                             const float *factor, adamw_k k, int vec4)
{
    float f = factor ? *factor : 1.0f;
    if (f == 0.0f)
        return;
    if (k.alpha)
        k.at = *k.alpha;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (vec4) {
        size_t n4 = n / 4;
        float4 *p4 = (float4 *)p, *m4 = (float4 *)m, *v4 = (float4 *)v;
        const float4 *g4 = (const float4 *)g;
        for (size_t i = tid; i < n4; i += stride) {
            float4 pp = p4[i], gg = g4[i], mm = m4[i], vv = v4[i];
            adamw_one(pp.x, gg.x, mm.x, vv.x, f, k);
            adamw_one(pp.y, gg.y, mm.y, vv.y, f, k);
            adamw_one(pp.z, gg.z, mm.z, vv.z, f, k);
            adamw_one(pp.w, gg.w, mm.w, vv.w, f, k);
            p4[i] = pp;
            m4[i] = mm;
            v4[i] = vv;
        }
        done = n4 * 4;
    }
    for (size_t i = done + tid; i < n; i += stride)
        adamw_one(p[i], g[i], m[i], v[i], f, k);
}

int cuda_sum_squares(lmk_backend *b, float *sumsq, const float *g, size_t n)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    unsigned blocks = grid_for(n, SS_THREADS * 8, SS_MAX_BLOCKS);
    void *ws = NULL;
    int rc = cuda_scratch(st, sizeof(double) * blocks, &ws);
    if (rc != LMK_OK)
        return rc;
    sum_squares_part_kernel<<<blocks, SS_THREADS, 0, st->stream>>>((double *)ws, g, n);
    LAUNCH_CHECK(st, "sum_squares_part_kernel");
    sum_squares_final_kernel<<<1, 1, 0, st->stream>>>(sumsq, (const double *)ws, (int)blocks);
    LAUNCH_CHECK(st, "sum_squares_final_kernel");
    return LMK_OK;
}

int cuda_clip_factor(lmk_backend *b, float *factor, const float *sumsq, float max_norm,
                     float unscale)
{
    cuda_state *st = CST(b);
    clip_factor_kernel<<<1, 1, 0, st->stream>>>(factor, sumsq, max_norm, unscale);
    LAUNCH_CHECK(st, "clip_factor_kernel");
    return LMK_OK;
}

int cuda_adamw(lmk_backend *b, float *p, const float *g, float *m, float *v, size_t n,
               const lmk_adamw_hp *hp, const float *factor)
{
    cuda_state *st = CST(b);
    if (!hp->alpha && hp->t < 1)
        return LMK_INVALID;
    if (n == 0)
        return LMK_OK;
    double alpha = hp->alpha ? 0.0
                             : hp->lr * sqrt(1.0 - pow(hp->beta2, (double)hp->t)) /
                                   (1.0 - pow(hp->beta1, (double)hp->t));
    adamw_k k = {hp->beta1, hp->beta2, (float)alpha, hp->lr * hp->weight_decay, hp->eps,
                 hp->alpha};
    int vec4 = (((uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v) & 15) == 0;
    unsigned blocks = grid_for(vec4 ? (n + 3) / 4 : n, 256, 132u * 16u);
    adamw_kernel<<<blocks, 256, 0, st->stream>>>(p, g, m, v, n, factor, k, vec4);
    LAUNCH_CHECK(st, "adamw_kernel");
    return LMK_OK;
}

int cuda_adamw_begin(lmk_backend *b, int64_t *t, float *alpha, const float *factor,
                     const lmk_adamw_hp *hp)
{
    cuda_state *st = CST(b);
    adamw_begin_kernel<<<1, 1, 0, st->stream>>>(t, alpha, factor, hp->lr, hp->beta1, hp->beta2);
    LAUNCH_CHECK(st, "adamw_begin_kernel");
    return LMK_OK;
}
