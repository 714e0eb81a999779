/* Collectives: the all-reduce pattern, check and statistics (plain C), and
 * the NCCL timing loop (one thread per GPU). See collectives.h. */
#include "collectives.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats.h"
#include "status.h"

#if defined(LMPERF_HAVE_CUDA) && defined(LMPERF_HAVE_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#endif

#define PATTERN_PERIOD 16 /* lmk_allreduce_pattern(r, i) depends on i mod 16 */

void lmk_allreduce_fill_host(float *x, size_t count, int rank)
{
    for (size_t i = 0; i < count; i++)
        x[i] = lmk_allreduce_pattern(rank, i);
}

size_t lmk_allreduce_mismatches_host(const float *x, size_t count, int world)
{
    float expected[PATTERN_PERIOD];
    for (size_t k = 0; k < PATTERN_PERIOD; k++)
        expected[k] = lmk_allreduce_expected(world, k);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += x[i] != expected[i % PATTERN_PERIOD];
    return bad;
}

double lmk_allreduce_bus_factor(int world)
{
    return world > 1 ? 2.0 * (world - 1) / world : 0.0;
}

void lmk_allreduce_stats_compute(const double *times_ms, int n, uint64_t bytes, int world,
                                 lmk_allreduce_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n < 1)
        return;
    double *sorted = malloc((size_t)n * sizeof *sorted);
    double sum = 0, lo = times_ms[0], hi = times_ms[0];
    for (int i = 0; i < n; i++) {
        sum += times_ms[i];
        lo = times_ms[i] < lo ? times_ms[i] : lo;
        hi = times_ms[i] > hi ? times_ms[i] : hi;
    }
    double median = times_ms[0];
    if (sorted) {
        memcpy(sorted, times_ms, (size_t)n * sizeof *sorted);
        median = lmk_median_sort(sorted, n);
        free(sorted);
    }
    out->median_ms = median;
    out->mean_ms = sum / n;
    out->min_ms = lo;
    out->max_ms = hi;
    out->algbw_gbps = median > 0 ? (double)bytes / (median * 1e-3) / 1e9 : 0.0;
    out->busbw_gbps = out->algbw_gbps * lmk_allreduce_bus_factor(world);
}

#if defined(LMPERF_HAVE_CUDA) && defined(LMPERF_HAVE_NCCL)

/* Launchers in cuda/collectives.cu. */
int lmk_cuda_allreduce_fill(float *x, size_t count, int rank, cudaStream_t stream);
int lmk_cuda_allreduce_mismatches(const float *x, size_t count, int world, unsigned long long *count_out,
                                  cudaStream_t stream);

enum group_command { CMD_POINT, CMD_EXIT };

typedef struct rank_state {
    struct lmk_nccl_group *group;
    int rank, device;
    pthread_t thread;
    ncclComm_t comm;
    cudaStream_t stream;
    int status;         /* lmk status of the last point */
    char err[256];
    double *start_s, *end_s; /* (iterations) CLOCK_MONOTONIC seconds */
    uint64_t mismatches;
} rank_state;

struct lmk_nccl_group {
    int world;
    rank_state *ranks;        /* (world) */
    int threads_started;
    pthread_barrier_t command; /* world + 1: the caller and every rank */
    pthread_barrier_t step;    /* world: ranks among themselves */
    int barriers_ready;
    /* the current command, written by the caller before `command` */
    enum group_command cmd;
    uint64_t bytes;
    int warmup, iterations;
    int failed; /* any rank failed before the collective (atomic) */
    int failed_stage; /* the first stage an NCCL or CUDA call failed in on any rank (atomic min; INT_MAX: none):
                         0 the warmup, it + 1 timed iteration it */
    int broken;       /* a point's failed_stage was set: the communicators are aborted, not destroyed */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int rank_fail(rank_state *r, int status, const char *what, const char *detail)
{
    snprintf(r->err, sizeof r->err, "rank %d (cuda:%d): %s: %s", r->rank, r->device, what, detail);
    r->status = status;
    __atomic_store_n(&r->group->failed, 1, __ATOMIC_SEQ_CST);
    return status;
}

/* Lowers g->failed_stage to stage. A rank that reads it after the barrier
 * that ends stage s compares it with s only, so a failure in a later stage
 * by a faster rank cannot split the ranks. */
static void note_failed_stage(lmk_nccl_group *g, int stage)
{
    int seen = __atomic_load_n(&g->failed_stage, __ATOMIC_SEQ_CST);
    while (stage < seen &&
           !__atomic_compare_exchange_n(&g->failed_stage, &seen, stage, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
}

/* One point on one rank. Every rank passes every `step` barrier the same
 * number of times, failed or not, so no rank waits forever on another. */
static void rank_point(rank_state *r)
{
    lmk_nccl_group *g = r->group;
    size_t count = (size_t)(g->bytes / sizeof(float));
    float *send = NULL, *recv = NULL;
    unsigned long long *bad = NULL, bad_host = 0;
    cudaError_t ce;
    r->status = LMK_OK;
    r->err[0] = '\0';
    r->mismatches = 0;
    if ((ce = cudaMalloc((void **)&send, g->bytes)) != cudaSuccess ||
        (ce = cudaMalloc((void **)&recv, g->bytes)) != cudaSuccess ||
        (ce = cudaMalloc((void **)&bad, sizeof *bad)) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is not sticky */
        rank_fail(r, ce == cudaErrorMemoryAllocation ? LMK_NOMEM : LMK_DEVICE, "cudaMalloc", cudaGetErrorString(ce));
    } else if (lmk_cuda_allreduce_fill(send, count, r->rank, r->stream) != LMK_OK ||
               cudaMemsetAsync(recv, 0, g->bytes, r->stream) != cudaSuccess ||
               (ce = cudaStreamSynchronize(r->stream)) != cudaSuccess) {
        rank_fail(r, LMK_DEVICE, "fill", cudaGetErrorString(cudaGetLastError()));
    }
    pthread_barrier_wait(&g->step);
    if (__atomic_load_n(&g->failed, __ATOMIC_SEQ_CST))
        goto out; /* every rank sees the same flag after the barrier */

    ncclResult_t nr = ncclSuccess;
    for (int w = 0; w < g->warmup && nr == ncclSuccess; w++)
        nr = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, r->comm, r->stream);
    if (nr == ncclSuccess)
        ce = cudaStreamSynchronize(r->stream);
    if (nr != ncclSuccess || ce != cudaSuccess)
        note_failed_stage(g, 0);
    for (int it = 0; it < g->iterations; it++) {
        pthread_barrier_wait(&g->step);
        /* every rank leaves at the same barrier when any failed in the warmup or an earlier iteration */
        if (__atomic_load_n(&g->failed_stage, __ATOMIC_SEQ_CST) <= it)
            break;
        r->start_s[it] = now_s();
        nr = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, r->comm, r->stream);
        if (nr == ncclSuccess)
            ce = cudaStreamSynchronize(r->stream);
        r->end_s[it] = now_s();
        if (nr != ncclSuccess || ce != cudaSuccess)
            note_failed_stage(g, it + 1);
    }
    if (nr != ncclSuccess) {
        rank_fail(r, LMK_DEVICE, "ncclAllReduce", ncclGetErrorString(nr));
        goto out;
    }
    if (ce != cudaSuccess) {
        rank_fail(r, LMK_DEVICE, "cudaStreamSynchronize", cudaGetErrorString(ce));
        goto out;
    }
    if (lmk_cuda_allreduce_mismatches(recv, count, g->world, bad, r->stream) != LMK_OK ||
        cudaMemcpyAsync(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost, r->stream) != cudaSuccess ||
        (ce = cudaStreamSynchronize(r->stream)) != cudaSuccess) {
        rank_fail(r, LMK_DEVICE, "check", cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    r->mismatches = bad_host;
out:
    cudaFree(send);
    cudaFree(recv);
    cudaFree(bad);
}

static void *rank_thread(void *arg)
{
    rank_state *r = arg;
    lmk_nccl_group *g = r->group;
    cudaSetDevice(r->device);
    for (;;) {
        pthread_barrier_wait(&g->command); /* a command is ready */
        if (g->cmd == CMD_EXIT)
            break;
        rank_point(r);
        pthread_barrier_wait(&g->command); /* the point is done */
    }
    return NULL;
}

int lmk_nccl_available(void)
{
    return 1;
}

int lmk_nccl_group_create(int world, const int *devices, lmk_nccl_group **out, char *errbuf, size_t errlen)
{
    if (world < 1 || world > LMK_ALLREDUCE_MAX_RANKS || !devices) {
        snprintf(errbuf, errlen, "world size %d is out of range", world);
        return LMK_INVALID;
    }
    int rc = LMK_NOMEM;
    ncclComm_t *comms = calloc((size_t)world, sizeof *comms);
    lmk_nccl_group *g = calloc(1, sizeof *g);
    if (!comms || !g || !(g->ranks = calloc((size_t)world, sizeof *g->ranks))) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    g->world = world;
    ncclResult_t nr = ncclCommInitAll(comms, world, devices);
    if (nr != ncclSuccess) {
        snprintf(errbuf, errlen, "ncclCommInitAll over %d GPUs: %s", world, ncclGetErrorString(nr));
        rc = LMK_DEVICE;
        goto fail;
    }
    for (int r = 0; r < world; r++) { /* the ranks own the communicators from here */
        g->ranks[r].group = g;
        g->ranks[r].rank = r;
        g->ranks[r].device = devices[r];
        g->ranks[r].comm = comms[r];
    }
    for (int r = 0; r < world; r++) {
        rank_state *rs = &g->ranks[r];
        cudaError_t ce = cudaSetDevice(devices[r]);
        if (ce == cudaSuccess)
            ce = cudaStreamCreateWithFlags(&rs->stream, cudaStreamNonBlocking);
        if (ce != cudaSuccess) {
            snprintf(errbuf, errlen, "cuda:%d: stream: %s", devices[r], cudaGetErrorString(ce));
            rc = LMK_DEVICE;
            goto fail;
        }
    }
    if (pthread_barrier_init(&g->command, NULL, (unsigned)world + 1) ||
        pthread_barrier_init(&g->step, NULL, (unsigned)world)) {
        snprintf(errbuf, errlen, "pthread_barrier_init failed");
        rc = LMK_NOMEM;
        goto fail;
    }
    g->barriers_ready = 1;
    for (int r = 0; r < world; r++) {
        if (pthread_create(&g->ranks[r].thread, NULL, rank_thread, &g->ranks[r])) {
            snprintf(errbuf, errlen, "cannot start thread for rank %d", r);
            rc = LMK_NOMEM;
            goto fail;
        }
        g->threads_started++;
    }
    free(comms);
    *out = g;
    return LMK_OK;
fail:
    free(comms);
    lmk_nccl_group_free(g);
    return rc;
}

int lmk_nccl_allreduce_point(lmk_nccl_group *g, uint64_t bytes, int warmup, int iterations, double *times_ms,
                             uint64_t *mismatches, char *errbuf, size_t errlen)
{
    if (!g || bytes == 0 || bytes % sizeof(float) || iterations < 1 || warmup < 0 || !times_ms) {
        snprintf(errbuf, errlen, "invalid all-reduce point (bytes %llu must be a positive multiple of 4)",
                 (unsigned long long)bytes);
        return LMK_INVALID;
    }
    int rc = LMK_OK;
    for (int r = 0; r < g->world; r++) {
        g->ranks[r].start_s = calloc((size_t)iterations, sizeof(double));
        g->ranks[r].end_s = calloc((size_t)iterations, sizeof(double));
        if (!g->ranks[r].start_s || !g->ranks[r].end_s)
            rc = LMK_NOMEM;
    }
    if (rc != LMK_OK) {
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    g->cmd = CMD_POINT;
    g->bytes = bytes;
    g->warmup = warmup;
    g->iterations = iterations;
    g->failed = 0;
    g->failed_stage = INT_MAX;
    pthread_barrier_wait(&g->command); /* go */
    pthread_barrier_wait(&g->command); /* done */
    if (g->failed_stage != INT_MAX)
        g->broken = 1;
    uint64_t bad = 0;
    for (int r = 0; r < g->world; r++) {
        if (g->ranks[r].status != LMK_OK && rc == LMK_OK) {
            rc = g->ranks[r].status;
            snprintf(errbuf, errlen, "%s", g->ranks[r].err);
        }
        bad += g->ranks[r].mismatches;
    }
    if (rc != LMK_OK)
        goto out;
    for (int it = 0; it < iterations; it++) {
        double first = g->ranks[0].start_s[it], last = g->ranks[0].end_s[it];
        for (int r = 1; r < g->world; r++) {
            first = g->ranks[r].start_s[it] < first ? g->ranks[r].start_s[it] : first;
            last = g->ranks[r].end_s[it] > last ? g->ranks[r].end_s[it] : last;
        }
        times_ms[it] = (last - first) * 1e3;
    }
    *mismatches = bad;
out:
    for (int r = 0; r < g->world; r++) {
        free(g->ranks[r].start_s);
        free(g->ranks[r].end_s);
        g->ranks[r].start_s = g->ranks[r].end_s = NULL;
    }
    return rc;
}

void lmk_nccl_group_free(lmk_nccl_group *g)
{
    if (!g)
        return;
    if (g->threads_started == g->world) {
        g->cmd = CMD_EXIT;
        pthread_barrier_wait(&g->command);
        for (int r = 0; r < g->world; r++)
            pthread_join(g->ranks[r].thread, NULL);
    } else {
        /* a partial start: the started threads wait on `command`, which can
         * no longer be completed; detach them (only on thread-creation failure) */
        for (int r = 0; r < g->threads_started; r++)
            pthread_detach(g->ranks[r].thread);
    }
    if (g->barriers_ready && g->threads_started == g->world) {
        pthread_barrier_destroy(&g->command);
        pthread_barrier_destroy(&g->step);
    }
    for (int r = 0; g->ranks && r < g->world; r++) {
        if (g->ranks[r].comm) /* destroy waits on outstanding work; after a failure it may never finish */
            (g->broken ? ncclCommAbort : ncclCommDestroy)(g->ranks[r].comm);
        if (g->ranks[r].stream) {
            cudaSetDevice(g->ranks[r].device);
            cudaStreamDestroy(g->ranks[r].stream);
        }
    }
    free(g->ranks);
    free(g);
}

/* --- one process per rank -------------------------------------------------- */

struct lmk_nccl_rank {
    int rank, world, device;
    ncclComm_t comm;
    cudaStream_t stream;
    int broken; /* an NCCL or CUDA call failed on some rank inside a point: abort, not destroy */
};

_Static_assert(sizeof(ncclUniqueId) == LMK_NCCL_ID_BYTES, "LMK_NCCL_ID_BYTES is sizeof(ncclUniqueId)");

int lmk_nccl_unique_id(unsigned char *id, char *errbuf, size_t errlen)
{
    ncclUniqueId uid;
    ncclResult_t nr = ncclGetUniqueId(&uid);
    if (nr != ncclSuccess) {
        snprintf(errbuf, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(nr));
        return LMK_DEVICE;
    }
    memcpy(id, &uid, sizeof uid);
    return LMK_OK;
}

int lmk_nccl_rank_open(int rank, int world, int device, lmk_nccl_rank **out, char *errbuf, size_t errlen)
{
    if (world < 1 || world > LMK_ALLREDUCE_MAX_RANKS || rank < 0 || rank >= world) {
        snprintf(errbuf, errlen, "rank %d of world size %d is out of range", rank, world);
        return LMK_INVALID;
    }
    int gpus = 0;
    cudaError_t ce = cudaGetDeviceCount(&gpus);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        snprintf(errbuf, errlen, "rank %d: no usable GPU: %s", rank, cudaGetErrorString(ce));
        return LMK_DEVICE;
    }
    if (device < 0 || device >= gpus) {
        snprintf(errbuf, errlen, "rank %d: cuda:%d does not exist: its host has %d GPU%s", rank, device, gpus,
                 gpus == 1 ? "" : "s");
        return LMK_INVALID;
    }
    lmk_nccl_rank *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(errbuf, errlen, "out of memory");
        return LMK_NOMEM;
    }
    r->rank = rank;
    r->world = world;
    r->device = device;
    if ((ce = cudaSetDevice(device)) != cudaSuccess ||
        (ce = cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        snprintf(errbuf, errlen, "rank %d (cuda:%d): %s", rank, device, cudaGetErrorString(ce));
        free(r);
        return LMK_DEVICE;
    }
    *out = r;
    return LMK_OK;
}

int lmk_nccl_rank_join(lmk_nccl_rank *r, const unsigned char *id, char *errbuf, size_t errlen)
{
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclResult_t nr = ncclCommInitRank(&r->comm, r->world, uid, r->rank);
    if (nr != ncclSuccess) {
        r->comm = NULL;
        snprintf(errbuf, errlen, "rank %d (cuda:%d): ncclCommInitRank over %d ranks: %s", r->rank, r->device,
                 r->world, ncclGetErrorString(nr));
        return LMK_DEVICE;
    }
    return LMK_OK;
}

int lmk_nccl_rank_point(lmk_nccl_rank *r, uint64_t bytes, int warmup, int iterations, lmk_agree_fn agree,
                        void *agree_ctx, double *times_ms, uint64_t *mismatches, char *errbuf, size_t errlen)
{
    /* the same arguments on every rank, so every rank returns here alike */
    if (!r || !r->comm || bytes == 0 || bytes % sizeof(float) || iterations < 1 || warmup < 0 || !times_ms ||
        !agree) {
        snprintf(errbuf, errlen, "invalid all-reduce point (bytes %llu must be a positive multiple of 4)",
                 (unsigned long long)bytes);
        return LMK_INVALID;
    }
    size_t count = (size_t)(bytes / sizeof(float));
    float *send = NULL, *recv = NULL;
    unsigned long long *bad = NULL, bad_host = 0;
    int rc = LMK_OK;
    cudaError_t ce;
    errbuf[0] = '\0';
    if ((ce = cudaMalloc((void **)&send, bytes)) != cudaSuccess || (ce = cudaMalloc((void **)&recv, bytes)) != cudaSuccess ||
        (ce = cudaMalloc((void **)&bad, sizeof *bad)) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is not sticky */
        rc = ce == cudaErrorMemoryAllocation ? LMK_NOMEM : LMK_DEVICE;
        snprintf(errbuf, errlen, "rank %d (cuda:%d): cudaMalloc: %s", r->rank, r->device, cudaGetErrorString(ce));
    } else if (lmk_cuda_allreduce_fill(send, count, r->rank, r->stream) != LMK_OK ||
               cudaMemsetAsync(recv, 0, bytes, r->stream) != cudaSuccess ||
               cudaStreamSynchronize(r->stream) != cudaSuccess) {
        rc = LMK_DEVICE;
        snprintf(errbuf, errlen, "rank %d (cuda:%d): fill: %s", r->rank, r->device,
                 cudaGetErrorString(cudaGetLastError()));
    }
    if (!agree(agree_ctx, rc == LMK_OK)) {
        if (rc == LMK_OK) /* another rank failed: errbuf stays empty, its message is the caller's to gather */
            rc = LMK_NOMEM;
        goto out;
    }
    ncclResult_t nr = ncclSuccess;
    for (int w = 0; w < warmup && nr == ncclSuccess; w++)
        nr = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, r->comm, r->stream);
    ce = nr == ncclSuccess ? cudaStreamSynchronize(r->stream) : cudaSuccess;
    /* each agree is the barrier before the next iteration and tells every
     * rank whether all of the last one succeeded: all ranks leave together */
    int all_healthy = agree(agree_ctx, nr == ncclSuccess && ce == cudaSuccess);
    for (int it = 0; it < iterations && all_healthy; it++) {
        double t0 = now_s();
        nr = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, r->comm, r->stream);
        if (nr == ncclSuccess)
            ce = cudaStreamSynchronize(r->stream);
        times_ms[it] = (now_s() - t0) * 1e3;
        all_healthy = agree(agree_ctx, nr == ncclSuccess && ce == cudaSuccess);
    }
    if (nr != ncclSuccess || ce != cudaSuccess) {
        rc = LMK_DEVICE; /* the communicator is not to be trusted: the caller frees it */
        r->broken = 1;
        snprintf(errbuf, errlen, "rank %d (cuda:%d): %s: %s", r->rank, r->device,
                 nr != ncclSuccess ? "ncclAllReduce" : "cudaStreamSynchronize",
                 nr != ncclSuccess ? ncclGetErrorString(nr) : cudaGetErrorString(ce));
        goto out;
    }
    if (!all_healthy) { /* another rank failed: errbuf stays empty, its message is the caller's to gather */
        rc = LMK_DEVICE;
        r->broken = 1;
        goto out;
    }
    if (lmk_cuda_allreduce_mismatches(recv, count, r->world, bad, r->stream) != LMK_OK ||
        cudaMemcpyAsync(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost, r->stream) != cudaSuccess ||
        cudaStreamSynchronize(r->stream) != cudaSuccess) {
        rc = LMK_DEVICE;
        snprintf(errbuf, errlen, "rank %d (cuda:%d): check: %s", r->rank, r->device,
                 cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    *mismatches = bad_host;
out:
    cudaFree(send);
    cudaFree(recv);
    cudaFree(bad);
    return rc;
}

void lmk_nccl_rank_free(lmk_nccl_rank *r)
{
    if (!r)
        return;
    if (r->comm) /* destroy waits on the peers' outstanding work; after a failure it may never finish */
        (r->broken ? ncclCommAbort : ncclCommDestroy)(r->comm);
    if (r->stream) {
        cudaSetDevice(r->device);
        cudaStreamDestroy(r->stream);
    }
    free(r);
}

#else /* no NCCL in this build */

struct lmk_nccl_group {
    int unused;
};

int lmk_nccl_available(void)
{
    return 0;
}

int lmk_nccl_group_create(int world, const int *devices, lmk_nccl_group **out, char *errbuf, size_t errlen)
{
    (void)world;
    (void)devices;
    (void)out;
    snprintf(errbuf, errlen, "this build of lmperf has no NCCL (built without CUDA or NCCL)");
    return LMK_UNSUPPORTED;
}

int lmk_nccl_allreduce_point(lmk_nccl_group *g, uint64_t bytes, int warmup, int iterations, double *times_ms,
                             uint64_t *mismatches, char *errbuf, size_t errlen)
{
    (void)g, (void)bytes, (void)warmup, (void)iterations, (void)times_ms, (void)mismatches;
    snprintf(errbuf, errlen, "this build of lmperf has no NCCL");
    return LMK_UNSUPPORTED;
}

void lmk_nccl_group_free(lmk_nccl_group *g)
{
    (void)g;
}


struct lmk_nccl_rank {
    int unused;
};

int lmk_nccl_unique_id(unsigned char *id, char *errbuf, size_t errlen)
{
    (void)id;
    snprintf(errbuf, errlen, "this build of lmperf has no NCCL");
    return LMK_UNSUPPORTED;
}

int lmk_nccl_rank_open(int rank, int world, int device, lmk_nccl_rank **out, char *errbuf, size_t errlen)
{
    (void)rank, (void)world, (void)device, (void)out;
    snprintf(errbuf, errlen, "this build of lmperf has no NCCL (built without CUDA or NCCL)");
    return LMK_UNSUPPORTED;
}

int lmk_nccl_rank_join(lmk_nccl_rank *r, const unsigned char *id, char *errbuf, size_t errlen)
{
    (void)r, (void)id;
    snprintf(errbuf, errlen, "this build of lmperf has no NCCL");
    return LMK_UNSUPPORTED;
}

int lmk_nccl_rank_point(lmk_nccl_rank *r, uint64_t bytes, int warmup, int iterations, lmk_agree_fn agree,
                        void *agree_ctx, double *times_ms, uint64_t *mismatches, char *errbuf, size_t errlen)
{
    (void)r, (void)bytes, (void)warmup, (void)iterations, (void)agree, (void)agree_ctx, (void)times_ms,
        (void)mismatches;
    snprintf(errbuf, errlen, "this build of lmperf has no NCCL");
    return LMK_UNSUPPORTED;
}

void lmk_nccl_rank_free(lmk_nccl_rank *r)
{
    (void)r;
}

#endif
