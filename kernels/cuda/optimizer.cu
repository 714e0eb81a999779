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
 * loads when all four pointers are 16-byte aligned.
 *
 * Multi-tensor forms: a table of up to MT_MAX tensors travels by value as
 * the kernel's parameters (__grid_constant__, < 32764 bytes: Hopper's kernel
 * parameter limit since CUDA 12.1), so a step is one launch (a few for models
 * of more than MT_MAX tensors) and a CUDA graph captures the table with the
 * launch. Work units: adamw_multi splits each tensor into chunks of MT_CHUNK
 * elements; sum_squares_multi gives tensor i exactly the blocks that
 * sum_squares would (grid_for(n, SS_THREADS·8, SS_MAX_BLOCKS)) with the same
 * stride, so each block partial, each tensor's ordered sum and their rounding
 * into *sumsq are those of per-tensor calls. A unit finds its tensor by
 * binary search over the table's prefix of units. adamw_multi also rewrites
 * a tensor's 16-bit copy h (when given) from the updated p, rounded as
 * cast_half_kernel does: 2 more bytes per parameter, against the 6 of a
 * separate cast (the model does not use it yet: kernels/PERF.md, "Engine
 * speed, part 2"). */
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
    double t = block_sum_double(s, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = t;
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
    int copy_fmt;       /* LMK_ROUND_BF16 / FP16: format of the tensors' 16-bit copies */
};

// raw bits of v rounded to fmt (BF16 or FP16), exactly as cast_half_kernel
__device__ __forceinline__ uint16_t half_bits(float v, int fmt)
{
    float r = round_value_dev(v, fmt);
    if (fmt == LMK_ROUND_FP16)
        return __half_as_ushort(__float2half_rn(r));
    return __bfloat16_as_ushort(__float2bfloat16_rn(r));
}

// four updated values' 16-bit copies, packed for one 8-byte store
__device__ __forceinline__ uint2 half_bits4(float4 p, int fmt)
{
    return make_uint2((uint32_t)half_bits(p.x, fmt) | (uint32_t)half_bits(p.y, fmt) << 16,
                      (uint32_t)half_bits(p.z, fmt) | (uint32_t)half_bits(p.w, fmt) << 16);
}

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

// every operation rounded on its own (no FMA contraction, which the compiler
// could choose differently per kernel): the same bits in every kernel that
// calls it, and the cpu's sequence of float operations
__device__ __forceinline__ void adamw_one(float &p, float g, float &m, float &v, float f,
                                          const adamw_k &k)
{
    float gi = __fmul_rn(g, f);
    m = __fadd_rn(__fmul_rn(k.b1, m), __fmul_rn(__fsub_rn(1.0f, k.b1), gi));
    v = __fadd_rn(__fmul_rn(k.b2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, k.b2), gi), gi));
    p = __fsub_rn(p, __fdiv_rn(__fmul_rn(k.at, m), __fadd_rn(__fsqrt_rn(v), k.eps)));
    p = __fsub_rn(p, __fmul_rn(k.decay, p));
}

// adamw_one on the four lanes of a float4 (x, y, z, w in that order)
__device__ __forceinline__ void adamw_four(float4 &p, float4 g, float4 &m, float4 &v, float f,
                                           const adamw_k &k)
{
    adamw_one(p.x, g.x, m.x, v.x, f, k);
    adamw_one(p.y, g.y, m.y, v.y, f, k);
    adamw_one(p.z, g.z, m.z, v.z, f, k);
    adamw_one(p.w, g.w, m.w, v.w, f, k);
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
            adamw_four(pp, gg, mm, vv, f, k);
            p4[i] = pp;
            m4[i] = mm;
            v4[i] = vv;
        }
        done = n4 * 4;
    }
    for (size_t i = done + tid; i < n; i += stride)
        adamw_one(p[i], g[i], m[i], v[i], f, k);
}

/* --- multi-tensor forms ------------------------------------------------- */

#define MT_MAX 512     /* tensors per launch */
#define MT_CHUNK 16384 /* adamw_multi elements per work unit (a multiple of 4) */
#define MT_THREADS 256

/* A launch's tensors (count ≤ MT_MAX) and the prefix of their work units:
 * tensor i owns units [first[i], first[i+1]). vec4: the four pointers are
 * 16-byte aligned (and h, when set, 8-byte aligned). h: 16-bit copies or
 * NULL (adamw_multi only). */
struct mt_table {
    float *p[MT_MAX];
    const float *g[MT_MAX];
    float *m[MT_MAX];
    float *v[MT_MAX];
    uint16_t *h[MT_MAX];
    int64_t n[MT_MAX];
    int64_t first[MT_MAX + 1];
    unsigned char vec4[MT_MAX];
    int count;
};
static_assert(sizeof(mt_table) + sizeof(adamw_k) + 16 <= 32764,
              "multi-tensor table over the kernel parameter limit");

// the tensor owning work unit u (first[0] ≤ u < first[count]); tensors
// without units are never returned
__device__ __forceinline__ int mt_find(const mt_table &t, int64_t u)
{
    int lo = 0, hi = t.count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (t.first[mid] <= u)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// unit u = (tensor i, block j of its sum_squares grid): part[u] = that
// block's partial, computed as sum_squares_part_kernel does
__global__ void __launch_bounds__(SS_THREADS)
    sum_squares_multi_part_kernel(double *part, const __grid_constant__ mt_table t)
{
    __shared__ double sh[32];
    int64_t units = t.first[t.count];
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        int i = mt_find(t, u);
        const float *g = t.g[i];
        size_t n = (size_t)t.n[i];
        size_t j = (size_t)(u - t.first[i]), blocks = (size_t)(t.first[i + 1] - t.first[i]);
        double s = 0.0;
        for (size_t e = j * SS_THREADS + threadIdx.x; e < n; e += blocks * SS_THREADS)
            s += (double)g[e] * g[e];
        double tot = block_sum_double(s, sh); /* ends with a barrier: sh is free again */
        if (threadIdx.x == 0)
            part[u] = tot;
    }
}

// tsum[i] = Σ part over tensor i's units in order (a thread per tensor); then
// *sumsq += tsum[i] rounded to float once per tensor, in tensor order, as
// sum_squares_final_kernel (tensors without units are skipped, as n = 0 is)
__global__ void sum_squares_multi_final_kernel(float *sumsq, double *tsum, const double *part,
                                               const __grid_constant__ mt_table t)
{
    for (int i = threadIdx.x; i < t.count; i += blockDim.x) {
        double s = 0.0;
        for (int64_t u = t.first[i]; u < t.first[i + 1]; u++)
            s += part[u];
        tsum[i] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 0; i < t.count; i++)
            if (t.first[i + 1] > t.first[i])
                *sumsq = (float)(*sumsq + tsum[i]);
}

// unit u = a chunk of MT_CHUNK elements of one tensor; adamw_one per element
// as adamw_kernel (the same function, so the same result bit for bit)
__global__ void __launch_bounds__(MT_THREADS)
    adamw_multi_kernel(const __grid_constant__ mt_table t, const float *factor, adamw_k k)
{
    float f = factor ? *factor : 1.0f;
    if (f == 0.0f)
        return;
    if (k.alpha)
        k.at = *k.alpha;
    int64_t units = t.first[t.count];
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        int i = mt_find(t, u);
        size_t n = (size_t)t.n[i];
        size_t lo = (size_t)(u - t.first[i]) * MT_CHUNK;
        size_t hi = lo + MT_CHUNK < n ? lo + MT_CHUNK : n;
        float *__restrict__ p = t.p[i];
        const float *__restrict__ g = t.g[i];
        float *__restrict__ m = t.m[i];
        float *__restrict__ v = t.v[i];
        uint16_t *__restrict__ h = t.h[i];
        size_t done = lo;
        if (t.vec4[i]) {
            constexpr int U = 4; /* float4 groups in flight per thread */
            float4 *p4 = (float4 *)p, *m4 = (float4 *)m, *v4 = (float4 *)v;
            const float4 *g4 = (const float4 *)g;
            uint2 *h4 = (uint2 *)h;
            size_t q1 = hi / 4, q = lo / 4 + threadIdx.x; /* lo is a multiple of 4 */
            for (; q + (U - 1) * MT_THREADS < q1; q += U * MT_THREADS) {
                float4 pp[U], gg[U], mm[U], vv[U];
#pragma unroll
                for (int r = 0; r < U; r++) {
                    size_t e = q + (size_t)r * MT_THREADS;
                    pp[r] = p4[e];
                    gg[r] = g4[e];
                    mm[r] = m4[e];
                    vv[r] = v4[e];
                }
#pragma unroll
                for (int r = 0; r < U; r++) {
                    adamw_four(pp[r], gg[r], mm[r], vv[r], f, k);
                    size_t e = q + (size_t)r * MT_THREADS;
                    p4[e] = pp[r];
                    m4[e] = mm[r];
                    v4[e] = vv[r];
                    if (h4)
                        h4[e] = half_bits4(pp[r], k.copy_fmt);
                }
            }
            for (; q < q1; q += MT_THREADS) {
                float4 pp = p4[q], gg = g4[q], mm = m4[q], vv = v4[q];
                adamw_four(pp, gg, mm, vv, f, k);
                p4[q] = pp;
                m4[q] = mm;
                v4[q] = vv;
                if (h4)
                    h4[q] = half_bits4(pp, k.copy_fmt);
            }
            done = hi / 4 * 4;
        }
        for (size_t e = done + threadIdx.x; e < hi; e += MT_THREADS) {
            adamw_one(p[e], g[e], m[e], v[e], f, k);
            if (h)
                h[e] = half_bits(p[e], k.copy_fmt);
        }
    }
}

static int64_t ss_units(size_t n)
{
    return n ? (int64_t)grid_for(n, SS_THREADS * 8, SS_MAX_BLOCKS) : 0;
}

static int64_t adamw_units(size_t n)
{
    return (int64_t)((n + MT_CHUNK - 1) / MT_CHUNK);
}

/* Fills t with ts (count ≤ MT_MAX), tensor i owning units_of(n) units.
 * Returns the total number of units. */
static int64_t mt_fill(mt_table *t, const lmk_opt_tensor *ts, size_t count,
                       int64_t (*units_of)(size_t n))
{
    int64_t u = 0;
    t->count = (int)count;
    for (size_t i = 0; i < count; i++) {
        t->p[i] = ts[i].p;
        t->g[i] = ts[i].g;
        t->m[i] = ts[i].m;
        t->v[i] = ts[i].v;
        t->h[i] = (uint16_t *)ts[i].h;
        t->n[i] = (int64_t)ts[i].n;
        t->vec4[i] = (((uintptr_t)ts[i].p | (uintptr_t)ts[i].g | (uintptr_t)ts[i].m |
                       (uintptr_t)ts[i].v) & 15) == 0 && ((uintptr_t)ts[i].h & 7) == 0;
        t->first[i] = u;
        u += units_of(ts[i].n);
    }
    t->first[count] = u;
    return u;
}

static unsigned mt_grid(int64_t units)
{
    return units < INT32_MAX ? (unsigned)units : (unsigned)INT32_MAX;
}

/* The kernels' AdamW constants for hp: α_t computed here in double and
 * rounded once to float when the step number is on the host (hp->alpha NULL),
 * else read by the kernels from the device (hp->alpha). */
static adamw_k adamw_constants(const lmk_adamw_hp *hp)
{
    double alpha = hp->alpha ? 0.0
                             : hp->lr * sqrt(1.0 - pow(hp->beta2, (double)hp->t)) /
                                   (1.0 - pow(hp->beta1, (double)hp->t));
    adamw_k k = {hp->beta1, hp->beta2, (float)alpha, hp->lr * hp->weight_decay, hp->eps,
                 hp->alpha, (int)hp->copy_fmt};
    return k;
}

int cuda_sum_squares_multi(lmk_backend *b, float *sumsq, const lmk_opt_tensor *ts, size_t count)
{
    cuda_state *st = CST(b);
    mt_table t; /* host staging, passed by value */
    for (size_t at = 0; at < count; at += MT_MAX) {
        size_t c = count - at < MT_MAX ? count - at : MT_MAX;
        int64_t units = mt_fill(&t, ts + at, c, ss_units);
        if (units == 0)
            continue;
        void *ws = NULL;
        int rc = cuda_scratch(st, sizeof(double) * (size_t)(units + (int64_t)c), &ws);
        if (rc != LMK_OK)
            return rc;
        double *part = (double *)ws, *tsum = part + units;
        sum_squares_multi_part_kernel<<<mt_grid(units), SS_THREADS, 0, st->stream>>>(part, t);
        LAUNCH_CHECK(st, "sum_squares_multi_part_kernel");
        sum_squares_multi_final_kernel<<<1, 256, 0, st->stream>>>(sumsq, tsum, part, t);
        LAUNCH_CHECK(st, "sum_squares_multi_final_kernel");
    }
    return LMK_OK;
}

int cuda_adamw_multi(lmk_backend *b, const lmk_opt_tensor *ts, size_t count,
                     const lmk_adamw_hp *hp, const float *factor)
{
    cuda_state *st = CST(b);
    if (!hp->alpha && hp->t < 1)
        return LMK_INVALID;
    for (size_t i = 0; i < count; i++)
        if (ts[i].h && hp->copy_fmt != LMK_ROUND_BF16 && hp->copy_fmt != LMK_ROUND_FP16)
            return LMK_INVALID;
    const adamw_k k = adamw_constants(hp);
    mt_table t; /* host staging, passed by value */
    for (size_t at = 0; at < count; at += MT_MAX) {
        size_t c = count - at < MT_MAX ? count - at : MT_MAX;
        int64_t units = mt_fill(&t, ts + at, c, adamw_units);
        if (units == 0)
            continue;
        adamw_multi_kernel<<<mt_grid(units), MT_THREADS, 0, st->stream>>>(t, factor, k);
        LAUNCH_CHECK(st, "adamw_multi_kernel");
    }
    return LMK_OK;
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
    const adamw_k k = adamw_constants(hp);
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
