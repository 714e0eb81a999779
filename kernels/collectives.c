/* Collectives: the all-reduce pattern, check and statistics (plain C), and
 * the NCCL timing loop (one thread per GPU). See collectives.h. */
#include "collectives.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats.h"
#include "status.h"

#include <pthread.h>

#if defined(LMPERF_HAVE_CUDA) && defined(LMPERF_HAVE_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int lmk_agreed_timed_loop(int iterations, int warmup_ok, lmk_agree_fn agree, void *agree_ctx,
                          lmk_iteration_fn iterate, void *iterate_ctx, double *start_s, double *end_s,
                          int *own_ok)
{
    int mine = warmup_ok != 0;
    int all = agree(agree_ctx, mine);
    for (int it = 0; it < iterations && all; it++) {
        start_s[it] = now_s();
        mine = iterate(iterate_ctx) != 0;
        end_s[it] = now_s();
        all = agree(agree_ctx, mine);
    }
    if (own_ok)
        *own_ok = mine;
    return all;
}

/* Three slots, used in turn: call n ANDs into slots[n % 3] and reads it
 * after the barrier, and resets slots[(n + 1) % 3] for call n + 1 before the
 * barrier. No thread can write slot (n + 1) % 3 for call n + 1 before every
 * thread has passed call n's barrier (so after the resets), and none resets
 * slot n % 3 again (at call n + 2) before every thread has passed call
 * n + 1's barrier (so after every read of call n). */
struct lmk_thread_agree {
    pthread_barrier_t barrier;
    int slots[3]; /* 1 until a thread passes ok == 0 (atomic) */
};

lmk_thread_agree *lmk_thread_agree_create(int ranks)
{
    lmk_thread_agree *a = ranks >= 1 ? calloc(1, sizeof *a) : NULL;
    if (!a)
        return NULL;
    if (pthread_barrier_init(&a->barrier, NULL, (unsigned)ranks)) {
        free(a);
        return NULL;
    }
    a->slots[0] = a->slots[1] = a->slots[2] = 1;
    return a;
}

int lmk_thread_agree_call(void *ctx, int ok)
{
    lmk_thread_agree_rank *r = ctx;
    lmk_thread_agree *a = r->shared;
    unsigned n = r->calls++;
    __atomic_store_n(&a->slots[(n + 1) % 3], 1, __ATOMIC_SEQ_CST);
    if (!ok)
        __atomic_store_n(&a->slots[n % 3], 0, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&a->barrier);
    return __atomic_load_n(&a->slots[n % 3], __ATOMIC_SEQ_CST);
}

void lmk_thread_agree_free(lmk_thread_agree *a)
{
    if (!a)
        return;
    pthread_barrier_destroy(&a->barrier);
    free(a);
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
    lmk_thread_agree_rank agree; /* over the group's ranks */
    int status;         /* lmk status of the last point */
    char err[256];
    double *start_s, *end_s; /* (iterations) CLOCK_MONOTONIC seconds */
    uint64_t mismatches;
    int loop_failed;    /* the last point's warmup or timed loop failed on some rank (the same on every rank) */
} rank_state;

struct lmk_nccl_group {
    int world;
    rank_state *ranks;        /* (world) */
    int threads_started;
    pthread_barrier_t command; /* world + 1: the caller and every rank */
    lmk_thread_agree *agree;   /* world: ranks among themselves */
    int barrier_ready;
    /* the current command, written by the caller before `command` */
    enum group_command cmd;
    uint64_t bytes;
    int warmup, iterations;
    int broken; /* a point's warmup or timed loop failed: the communicators are aborted, not destroyed */
};

static int rank_fail(rank_state *r, int status, const char *what, const char *detail)
{
    snprintf(r->err, sizeof r->err, "rank %d (cuda:%d): %s: %s", r->rank, r->device, what, detail);
    r->status = status;
    return status;
}

/* One rank's all-reduce of count floats from send into recv, for
 * lmk_agreed_timed_loop; the first failure stays in nr / ce. */
typedef struct nccl_iteration {
    ncclComm_t comm;
    cudaStream_t stream;
    const float *send;
    float *recv;
    size_t count;
    ncclResult_t nr;
    cudaError_t ce;
} nccl_iteration;

/* Enqueues one all-reduce on n's stream. */
static ncclResult_t nccl_enqueue(const nccl_iteration *n)
{
    return ncclAllReduce(n->send, n->recv, n->count, ncclFloat, ncclSum, n->comm, n->stream);
}

static int nccl_iterate(void *ctx)
{
    nccl_iteration *n = ctx;
    n->nr = nccl_enqueue(n);
    if (n->nr == ncclSuccess)
        n->ce = cudaStreamSynchronize(n->stream);
    return n->nr == ncclSuccess && n->ce == cudaSuccess;
}

/* `warmup` untimed all-reduces, then waits for them. Returns non-zero on success. */
static int nccl_warmup(nccl_iteration *n, int warmup)
{
    n->nr = ncclSuccess;
    n->ce = cudaSuccess;
    for (int w = 0; w < warmup && n->nr == ncclSuccess; w++)
        n->nr = nccl_enqueue(n);
    if (n->nr == ncclSuccess)
        n->ce = cudaStreamSynchronize(n->stream);
    return n->nr == ncclSuccess && n->ce == cudaSuccess;
}

/* "ncclAllReduce: ..." or "cudaStreamSynchronize: ..." of n's failure. */
static void nccl_iteration_error(const nccl_iteration *n, const char **what, const char **detail)
{
    *what = n->nr != ncclSuccess ? "ncclAllReduce" : "cudaStreamSynchronize";
    *detail = n->nr != ncclSuccess ? ncclGetErrorString(n->nr) : cudaGetErrorString(n->ce);
}

/* One point on one rank. Every rank makes the same agrees, failed or not,
 * so no rank waits forever on another. */
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
    r->loop_failed = 0;
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
    if (!lmk_thread_agree_call(&r->agree, r->status == LMK_OK))
        goto out; /* a rank could not allocate or fill: no rank starts */

    nccl_iteration n = {.comm = r->comm, .stream = r->stream, .send = send, .recv = recv, .count = count};
    int warmup_ok = nccl_warmup(&n, g->warmup), own_ok = 1;
    if (!lmk_agreed_timed_loop(g->iterations, warmup_ok, lmk_thread_agree_call, &r->agree, nccl_iterate, &n,
                               r->start_s, r->end_s, &own_ok)) {
        r->loop_failed = 1;
        if (own_ok) /* another rank failed: its message is the point's */
            r->status = LMK_DEVICE;
        else {
            const char *what, *detail;
            nccl_iteration_error(&n, &what, &detail);
            rank_fail(r, LMK_DEVICE, what, detail);
        }
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
    if (pthread_barrier_init(&g->command, NULL, (unsigned)world + 1)) {
        snprintf(errbuf, errlen, "pthread_barrier_init failed");
        rc = LMK_NOMEM;
        goto fail;
    }
    g->barrier_ready = 1;
    if (!(g->agree = lmk_thread_agree_create(world))) {
        snprintf(errbuf, errlen, "out of memory for the ranks' barrier");
        rc = LMK_NOMEM;
        goto fail;
    }
    for (int r = 0; r < world; r++)
        g->ranks[r].agree = (lmk_thread_agree_rank){.shared = g->agree};
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
    errbuf[0] = '\0';
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
    pthread_barrier_wait(&g->command); /* go */
    pthread_barrier_wait(&g->command); /* done */
    uint64_t bad = 0;
    for (int r = 0; r < g->world; r++) {
        /* the message of the first rank that failed itself (the others' are empty) */
        if (g->ranks[r].status != LMK_OK && (rc == LMK_OK || (!errbuf[0] && g->ranks[r].err[0]))) {
            rc = g->ranks[r].status;
            snprintf(errbuf, errlen, "%s", g->ranks[r].err);
        }
        g->broken |= g->ranks[r].loop_failed;
        bad += g->ranks[r].mismatches;
    }
    if (rc != LMK_OK && !errbuf[0])
        snprintf(errbuf, errlen, "a rank failed");
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
    if (g->barrier_ready && g->threads_started == g->world) {
        pthread_barrier_destroy(&g->command);
        lmk_thread_agree_free(g->agree);
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
    double *end_s = calloc((size_t)iterations, sizeof *end_s); /* CLOCK_MONOTONIC seconds */
    if (!end_s) {
        rc = LMK_NOMEM;
        snprintf(errbuf, errlen, "rank %d: out of host memory for the times", r->rank);
    } else if ((ce = cudaMalloc((void **)&send, bytes)) != cudaSuccess ||
               (ce = cudaMalloc((void **)&recv, bytes)) != cudaSuccess ||
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
    nccl_iteration n = {.comm = r->comm, .stream = r->stream, .send = send, .recv = recv, .count = count};
    int warmup_ok = nccl_warmup(&n, warmup), own_ok = 1;
    /* times_ms holds the starts until the ends are known */
    int all_ok = lmk_agreed_timed_loop(iterations, warmup_ok, agree, agree_ctx, nccl_iterate, &n, times_ms, end_s,
                                       &own_ok);
    if (!all_ok) {
        rc = LMK_DEVICE; /* the communicator is not to be trusted: the caller frees it */
        r->broken = 1;
        if (!own_ok) { /* else another rank failed: errbuf stays empty, its message is the caller's to gather */
            const char *what, *detail;
            nccl_iteration_error(&n, &what, &detail);
            snprintf(errbuf, errlen, "rank %d (cuda:%d): %s: %s", r->rank, r->device, what, detail);
        }
        goto out;
    }
    for (int it = 0; it < iterations; it++)
        times_ms[it] = (end_s[it] - times_ms[it]) * 1e3;
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
    free(end_s);
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
