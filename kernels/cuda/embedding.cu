/* Embedding lookup and its deterministic backward.
 *
 *   forward : out (n, d) = w (vocab, d)[ids (n)]
 *   backward: dw (vocab, d) += Σ_{i: ids[i] = v} dout (n, d)[i], rows added in
 *             increasing i, starting from dw's value — the cpu's order exactly,
 *             so the result is bitwise reproducible (no float atomics).
 * Backward is a stable counting sort of the tokens by id (integer atomics
 * for the histogram, one block for the stable ranks), then one block per
 * vocab row sums its tokens in order. Scratch: 3·vocab + n + 1 ints.
 * Ids outside [0, vocab) are not checked on the device: forward writes a zero
 * row, backward skips them (the model validates ids in set_batch). */
#include "cuda_internal.cuh"

// out (n, d), ids (n), w (vocab, d)
__global__ void embedding_fwd_kernel(float *out, const int32_t *ids, const float *w, int n,
                                     int d, int vocab)
{
    int i = blockIdx.x;
    int id = ids[i];
    float *o = out + (size_t)i * d;
    if (id < 0 || id >= vocab) {
        for (int j = threadIdx.x; j < d; j += blockDim.x)
            o[j] = 0.0f;
        return;
    }
    const float *src = w + (size_t)id * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        o[j] = src[j];
}

// counts (vocab) += histogram of ids (n)
__global__ void embedding_hist_kernel(int *counts, const int32_t *ids, int n, int vocab)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int id = ids[i];
        if (id >= 0 && id < vocab)
            atomicAdd(&counts[id], 1);
    }
}

/* One block of 1024: offsets (vocab + 1) = exclusive scan of counts; cursor
 * (vocab) = offsets. */
__global__ void embedding_scan_kernel(int *offsets, int *cursor, const int *counts, int vocab)
{
    __shared__ int part[1024];
    __shared__ int carry;
    if (threadIdx.x == 0)
        carry = 0;
    __syncthreads();
    for (int base = 0; base < vocab; base += 1024) {
        int j = base + threadIdx.x;
        int v = j < vocab ? counts[j] : 0;
        part[threadIdx.x] = v;
        __syncthreads();
        for (int off = 1; off < 1024; off <<= 1) { /* Hillis-Steele inclusive scan */
            int t = threadIdx.x >= off ? part[threadIdx.x - off] : 0;
            __syncthreads();
            part[threadIdx.x] += t;
            __syncthreads();
        }
        if (j < vocab) {
            int ex = carry + part[threadIdx.x] - v;
            offsets[j] = ex;
            cursor[j] = ex;
        }
        __syncthreads();
        if (threadIdx.x == 1023)
            carry += part[1023];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        offsets[vocab] = carry;
}

/* One block of 1024 (32 warps): perm (n) = token indices stably sorted by
 * id. Tokens go in chunks of 1024; inside a chunk the warps take turns, and
 * a warp ranks equal ids with __match_any_sync, so positions follow i. */
__global__ void embedding_rank_kernel(int *perm, int *cursor, const int32_t *ids, int n, int vocab)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int base = 0; base < n; base += 1024) {
        int i = base + threadIdx.x;
        int id = i < n ? ids[i] : -1;
        int valid = i < n && id >= 0 && id < vocab;
        int key = valid ? id : -1 - lane; /* invalid lanes match nobody */
        unsigned peers = __match_any_sync(0xffffffffu, key);
        int rank = __popc(peers & ((1u << lane) - 1u));
        int leader = __ffs(peers) - 1;
        for (int w = 0; w < 32; w++) {
            if (w == warp && valid) {
                int start = cursor[id]; /* every peer reads before the leader writes */
                __syncwarp(peers);
                perm[start + rank] = i;
                if (lane == leader)
                    cursor[id] = start + __popc(peers);
            }
            __syncthreads();
        }
    }
}

/* One block per vocab row v: dw[v] (d) += dout rows perm[offsets[v] ..
 * offsets[v+1]) in order. */
__global__ void embedding_accum_kernel(float *dw, const float *dout, const int *perm,
                                       const int *offsets, int d)
{
    int v = blockIdx.x;
    int s = offsets[v], e = offsets[v + 1];
    if (s == e)
        return;
    float *row = dw + (size_t)v * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float acc = row[j];
        for (int k = s; k < e; k++)
            acc += dout[(size_t)perm[k] * d + j];
        row[j] = acc;
    }
}

int cuda_embedding_fwd(lmk_backend *b, float *out, const int32_t *ids, const float *w, int n,
                       int d, int vocab)
{
    cuda_state *st = CST(b);
    if (n <= 0 || d <= 0 || vocab <= 0)
        return LMK_INVALID;
    int threads = d >= 256 ? 256 : ((d + 31) / 32) * 32;
    embedding_fwd_kernel<<<n, threads, 0, st->stream>>>(out, ids, w, n, d, vocab);
    LAUNCH_CHECK(st, "embedding_fwd_kernel");
    return LMK_OK;
}

int cuda_embedding_bwd(lmk_backend *b, float *dw, const float *dout, const int32_t *ids, int n,
                       int d, int vocab)
{
    cuda_state *st = CST(b);
    if (n <= 0 || d <= 0 || vocab <= 0)
        return LMK_INVALID;
    void *ws = NULL;
    size_t ints = 3 * (size_t)vocab + 1 + (size_t)n;
    int rc = cuda_scratch(st, ints * sizeof(int), &ws);
    if (rc != LMK_OK)
        return rc;
    int *counts = (int *)ws, *offsets = counts + vocab, *cursor = offsets + vocab + 1,
        *perm = cursor + vocab;
    CUDA_TRY(st, cudaMemsetAsync(counts, 0, sizeof(int) * (size_t)vocab, st->stream));
    embedding_hist_kernel<<<grid_for((size_t)n, 256, 1024), 256, 0, st->stream>>>(counts, ids, n,
                                                                                  vocab);
    LAUNCH_CHECK(st, "embedding_hist_kernel");
    embedding_scan_kernel<<<1, 1024, 0, st->stream>>>(offsets, cursor, counts, vocab);
    LAUNCH_CHECK(st, "embedding_scan_kernel");
    embedding_rank_kernel<<<1, 1024, 0, st->stream>>>(perm, cursor, ids, n, vocab);
    LAUNCH_CHECK(st, "embedding_rank_kernel");
    int threads = d >= 256 ? 256 : ((d + 31) / 32) * 32;
    embedding_accum_kernel<<<vocab, threads, 0, st->stream>>>(dw, dout, perm, offsets, d);
    LAUNCH_CHECK(st, "embedding_accum_kernel");
    return LMK_OK;
}
