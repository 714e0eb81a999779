/* Elementwise ops: SwiGLU forward/backward, add, scale.
 *
 *   swiglu fwd: out = round(round(silu(a)) · g), silu(a) = a σ(a) (the
 *               roundings to the 16-bit dtype; none for float, as the cpu)
 *   swiglu bwd: da = dout · g · σ(a) (1 + a (1 − σ(a))), dg = dout · a σ(a)
 *   add       : y = x1 + x2, x2 float or 16-bit (y may alias a float input)
 * Tensors of one dtype (float, bf16, fp16) per op, float32 math. swiglu's
 * element i of out / dout (contiguous, rows of cols) is at (i / cols)·ld +
 * i % cols in a, g, da, dg (ld ≥ cols: w1 x and w3 x inside a fused (N,
 * 2·d_ff) projection output, ld = 2·cols).
 *   scale     : x *= s
 * Grid-stride loops over n elements (n may exceed 2³¹); swiglu moves 16-byte
 * vectors when its tensors are 16-byte aligned (the same per-element math,
 * written without FMA contraction: the cpu's sequence of float operations). */
#include "cuda_internal.cuh"

#define EW_THREADS 256
#define EW_MAX_BLOCKS 65535u

#define GRID_STRIDE(i, n)                                                        \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);       \
         i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float sigmoid_dev(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

// silu(a) · g before the output's rounding; silu rounded to E first when E is 16-bit
template <typename E>
__device__ __forceinline__ float swiglu_one(float ai, float gi)
{
    float silu = __fmul_rn(ai, sigmoid_dev(ai));
    if (sizeof(E) == 2) { /* autocast: silu's half output, then the half product */
        E sh;
        st_f(&sh, 0, silu);
        silu = ld_f(&sh, 0);
    }
    return __fmul_rn(silu, gi);
}

// *da = dy g σ (1 + a (1 − σ)), *dg = dy a σ, before the outputs' rounding
__device__ __forceinline__ void swiglu_bwd_one(float ai, float gi, float dy, float *da, float *dg)
{
    float s = sigmoid_dev(ai);
    *dg = __fmul_rn(__fmul_rn(dy, ai), s);
    *da = __fmul_rn(__fmul_rn(__fmul_rn(dy, gi), s),
                    __fadd_rn(1.0f, __fmul_rn(ai, __fsub_rn(1.0f, s))));
}

// the offset in a (rows ld apart) of element i of a contiguous tensor with rows of cols
static __device__ __forceinline__ size_t row_at(size_t i, size_t cols, size_t ld)
{
    return ld == cols ? i : i / cols * ld + i % cols;
}

// out (n), a, g (n / cols rows of cols, ld apart) of E; elements from `from` on (the vector kernel's tail)
template <typename E>
__global__ void swiglu_fwd_kernel(E *out, const E *a, const E *g, size_t n, size_t from, size_t cols,
                                  size_t ld)
{
    GRID_STRIDE(j, n - from)
    {
        size_t i = from + j, k = row_at(i, cols, ld);
        st_f(out, i, swiglu_one<E>(ld_f(a, k), ld_f(g, k)));
    }
}

// out, a, g (nv vectors of E), 16-byte aligned; cols, ld multiples of the vector
template <typename E>
__global__ void swiglu_fwd_vec_kernel(E *out, const E *a, const E *g, size_t nv, size_t cols, size_t ld)
{
    constexpr int VE = vec16<E>::n;
    GRID_STRIDE(v, nv)
    {
        float x[VE], y[VE];
        size_t k = row_at(v * VE, cols, ld);
        ld_vec(a, k, x);
        ld_vec(g, k, y);
#pragma unroll
        for (int q = 0; q < VE; q++)
            y[q] = swiglu_one<E>(x[q], y[q]);
        st_vec(out, v * VE, y);
    }
}

// dout (n); da, dg, a, g (n / cols rows of cols, ld apart) of E; elements from `from` on
template <typename E>
__global__ void swiglu_bwd_kernel(E *da, E *dg, const E *dout, const E *a, const E *g, size_t n,
                                  size_t from, size_t cols, size_t ld)
{
    GRID_STRIDE(j, n - from)
    {
        size_t i = from + j, k = row_at(i, cols, ld);
        float dai, dgi;
        swiglu_bwd_one(ld_f(a, k), ld_f(g, k), ld_f(dout, i), &dai, &dgi);
        st_f(dg, k, dgi);
        st_f(da, k, dai);
    }
}

// the same on nv 16-byte vectors, every tensor 16-byte aligned, cols and ld multiples of the vector
template <typename E>
__global__ void swiglu_bwd_vec_kernel(E *da, E *dg, const E *dout, const E *a, const E *g, size_t nv,
                                      size_t cols, size_t ld)
{
    constexpr int VE = vec16<E>::n;
    GRID_STRIDE(v, nv)
    {
        float x[VE], y[VE], d[VE];
        size_t k = row_at(v * VE, cols, ld);
        ld_vec(a, k, x);
        ld_vec(g, k, y);
        ld_vec(dout, v * VE, d);
#pragma unroll
        for (int q = 0; q < VE; q++)
            swiglu_bwd_one(x[q], y[q], d[q], &x[q], &y[q]); /* x ← da, y ← dg */
        st_vec(da, k, x);
        st_vec(dg, k, y);
    }
}

// y (n) = x1 (n) + x2 (n, E)
template <typename E>
__global__ void add_kernel(float *y, const float *x1, const E *x2, size_t n)
{
    GRID_STRIDE(i, n)
    y[i] = x1[i] + ld_f(x2, i);
}

// x (n) *= s
__global__ void scale_kernel(float *x, size_t n, float s)
{
    GRID_STRIDE(i, n)
    x[i] *= s;
}

/* Whole 16-byte vectors of dt in n elements when every pointer is 16-byte
 * aligned, else 0 (then the scalar kernel does all n). */
static size_t ew_vectors(lmk_dtype dt, size_t n, const void *p0, const void *p1, const void *p2,
                         const void *p3, const void *p4)
{
    uintptr_t bits = (uintptr_t)p0 | (uintptr_t)p1 | (uintptr_t)p2 | (uintptr_t)p3 | (uintptr_t)p4;
    if (bits & 15)
        return 0;
    return n / (dt == LMK_F32 ? 4 : 8);
}

/* swiglu's vectors: ew_vectors, and none when a row of cols (or the row
 * stride ld) is not whole vectors (a vector would straddle two rows). */
static size_t swiglu_vectors(lmk_dtype dt, size_t n, size_t cols, size_t ld, const void *p0, const void *p1,
                             const void *p2, const void *p3, const void *p4)
{
    size_t ve = dt == LMK_F32 ? 4 : 8;
    return cols % ve || ld % ve ? 0 : ew_vectors(dt, n, p0, p1, p2, p3, p4);
}

int cuda_swiglu_fwd(lmk_backend *b, void *out, const void *a, const void *g, lmk_dtype dt, size_t n, int cols,
                    int64_t ld)
{
    cuda_state *st = CST(b);
    if (cols <= 0 || ld < cols || n % (size_t)cols)
        return LMK_INVALID;
    if (n == 0)
        return LMK_OK;
    size_t c = (size_t)cols, l = (size_t)ld;
    size_t nv = swiglu_vectors(dt, n, c, l, out, a, g, g, g), from = nv * (dt == LMK_F32 ? 4 : 8);
    if (nv) {
        DT_DISPATCH(dt, E, swiglu_fwd_vec_kernel<E><<<grid_for(nv, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0,
                                                       st->stream>>>((E *)out, (const E *)a, (const E *)g, nv, c, l));
        LAUNCH_CHECK(st, "swiglu_fwd_vec_kernel");
    }
    if (from < n) {
        DT_DISPATCH(dt, E, swiglu_fwd_kernel<E><<<grid_for(n - from, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0,
                                                   st->stream>>>((E *)out, (const E *)a, (const E *)g, n, from, c,
                                                                 l));
        LAUNCH_CHECK(st, "swiglu_fwd_kernel");
    }
    return LMK_OK;
}

int cuda_swiglu_bwd(lmk_backend *b, void *da, void *dg, const void *dout, const void *a,
                    const void *g, lmk_dtype dt, size_t n, int cols, int64_t ld)
{
    cuda_state *st = CST(b);
    if (cols <= 0 || ld < cols || n % (size_t)cols)
        return LMK_INVALID;
    if (n == 0)
        return LMK_OK;
    size_t c = (size_t)cols, l = (size_t)ld;
    size_t nv = swiglu_vectors(dt, n, c, l, da, dg, dout, a, g), from = nv * (dt == LMK_F32 ? 4 : 8);
    if (nv) {
        DT_DISPATCH(dt, E, swiglu_bwd_vec_kernel<E><<<grid_for(nv, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0,
                                                       st->stream>>>((E *)da, (E *)dg, (const E *)dout,
                                                                     (const E *)a, (const E *)g, nv, c, l));
        LAUNCH_CHECK(st, "swiglu_bwd_vec_kernel");
    }
    if (from < n) {
        DT_DISPATCH(dt, E, swiglu_bwd_kernel<E><<<grid_for(n - from, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0,
                                                   st->stream>>>((E *)da, (E *)dg, (const E *)dout, (const E *)a,
                                                                 (const E *)g, n, from, c, l));
        LAUNCH_CHECK(st, "swiglu_bwd_kernel");
    }
    return LMK_OK;
}

int cuda_add(lmk_backend *b, float *y, const float *x1, const void *x2, lmk_dtype dt, size_t n)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    unsigned blocks = grid_for(n, EW_THREADS, EW_MAX_BLOCKS);
    DT_DISPATCH(dt, E, add_kernel<E><<<blocks, EW_THREADS, 0, st->stream>>>(y, x1, (const E *)x2, n));
    LAUNCH_CHECK(st, "add_kernel");
    return LMK_OK;
}

int cuda_scale(lmk_backend *b, float *x, size_t n, float s)
{
    cuda_state *st = CST(b);
    if (n == 0)
        return LMK_OK;
    scale_kernel<<<grid_for(n, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0, st->stream>>>(x, n, s);
    LAUNCH_CHECK(st, "scale_kernel");
    return LMK_OK;
}
