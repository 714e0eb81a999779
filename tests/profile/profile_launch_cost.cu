/* What tracing costs per launch, part by part (issue 6: the launch-bound
 * overhead), and the graph-replay attribution of daemon/profiler.c, on a GPU
 * in one process.
 *
 * Cost: a batch is LAUNCHES launches of an empty kernel on one stream (host
 * time from the first launch call to the return of the last: the GPU runs
 * empty kernels faster than they are launched), or one replay of a graph of
 * LAUNCHES empty kernels (launch + synchronise), or LAUNCHES NVTX push/pop
 * pairs. Per variant of profiler_start's parts (and untraced) a session is
 * started, one batch of each kind is run and discarded, BATCHES batches are
 * timed, the session stopped and detached; the variants are run in ROUNDS
 * rounds, interleaved, against drift. Printed: the median µs per launch (per
 * kernel of a replay, per push/pop pair) and the increase over untraced.
 *
 * Attribution check (asserted): inside one PROF_ALL session a graph of
 * kernels is captured under ranges "outer" > "inner A" / "inner B", then
 * replayed REPLAYS times inside a "step" range: every replayed kernel must
 * belong to "step", "outer" and its inner range; each name must have
 * REPLAYS instances (replayed ranges) and no kernel may be unmapped.
 *
 * usage: profile_launch_cost [OUT.json]; exit 0 ok, 1 a check failed, 77 no
 * GPU or no CUPTI. */
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "profiler.h"
}

#define LAUNCHES 2000
#define BATCHES 5
#define ROUNDS 3
#define REPLAYS 3
#define KERNELS_PER_INNER 4

__global__ void empty_kernel(void) {}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* µs per launch: LAUNCHES eager launches, host time of the calls. */
static double eager_batch(cudaStream_t s)
{
    double t0 = now_us();
    for (int i = 0; i < LAUNCHES; i++)
        empty_kernel<<<1, 32, 0, s>>>();
    double t1 = now_us();
    cudaStreamSynchronize(s);
    return (t1 - t0) / LAUNCHES;
}

/* µs per kernel of one replay of g (launch + synchronise). */
static double replay_batch(cudaStream_t s, cudaGraphExec_t g)
{
    double t0 = now_us();
    cudaGraphLaunch(g, s);
    cudaStreamSynchronize(s);
    return (now_us() - t0) / LAUNCHES;
}

/* µs per NVTX push/pop pair. */
static double nvtx_batch(void)
{
    double t0 = now_us();
    for (int i = 0; i < LAUNCHES; i++) {
        nvtxRangePushA("cost");
        nvtxRangePop();
    }
    return (now_us() - t0) / LAUNCHES;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define NVARIANTS 7
struct variant {
    const char *name;
    int traced;
    unsigned parts;
};
static const variant variants[NVARIANTS] = {
    {"untraced", 0, 0},
    {"kernels", 1, PROF_KERNELS},
    {"markers", 1, PROF_MARKERS},
    {"launch callbacks", 1, PROF_LAUNCHES},
    {"graph callbacks", 1, PROF_GRAPHS},
    {"kernels+launch callbacks", 1, PROF_KERNELS | PROF_LAUNCHES},
    {"all (profile job)", 1, PROF_ALL},
};

enum { EAGER, REPLAY, NVTX, KINDS };

static int failures;
#define CHECK(cond, ...)                                                                                            \
    do {                                                                                                            \
        if (!(cond)) {                                                                                              \
            failures++;                                                                                             \
            printf("FAIL: ");                                                                                       \
            printf(__VA_ARGS__);                                                                                    \
            printf("\n");                                                                                           \
        }                                                                                                           \
    } while (0)

/* Captures LAUNCHES empty kernels into a graph (outside any range). */
static int capture_plain(cudaStream_t s, cudaGraph_t *graph, cudaGraphExec_t *exec)
{
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        return -1;
    for (int i = 0; i < LAUNCHES; i++)
        empty_kernel<<<1, 32, 0, s>>>();
    if (cudaStreamEndCapture(s, graph) != cudaSuccess)
        return -1;
    return cudaGraphInstantiate(exec, *graph, 0) == cudaSuccess ? 0 : -1;
}

/* The attribution check (see the top). */
static void check_graph_attribution(cudaStream_t s)
{
    char err[300];
    profiler *p = NULL;
    if (profiler_start(&p, PROF_ALL, err, sizeof err)) {
        CHECK(0, "attribution: %s", err);
        return;
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    nvtxRangePushA("outer");
    nvtxRangePushA("inner A");
    for (int i = 0; i < KERNELS_PER_INNER; i++)
        empty_kernel<<<1, 32, 0, s>>>();
    nvtxRangePop();
    nvtxRangePushA("inner B");
    for (int i = 0; i < KERNELS_PER_INNER; i++)
        empty_kernel<<<1, 32, 0, s>>>();
    nvtxRangePop();
    nvtxRangePop();
    int ok = cudaStreamEndCapture(s, &graph) == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    CHECK(ok, "attribution: capture failed");
    if (!ok) {
        profiler_free(p);
        return;
    }
    cudaGraphLaunch(exec, s); /* the first replay (upload), discarded like the profile job's */
    cudaStreamSynchronize(s);
    CHECK(profiler_discard(p, err, sizeof err) == 0, "discard: %s", err);
    for (int r = 0; r < REPLAYS; r++) {
        nvtxRangePushA("step");
        cudaGraphLaunch(exec, s);
        nvtxRangePop();
    }
    cudaStreamSynchronize(s);
    CHECK(profiler_stop(p, err, sizeof err) == 0, "stop: %s", err);
    size_t nr, nops, nmem;
    const prof_range *r = profiler_ranges(p, &nr);
    const prof_op *ops = profiler_ops(p, &nops);
    const uint32_t *mem = profiler_memberships(p, &nmem);
    static const char *const names[] = {"step", "outer", "inner A", "inner B"};
    int instances[4] = {0}, replayed[4] = {0};
    for (size_t i = 0; i < nr; i++)
        for (int n = 0; n < 4; n++)
            if (strcmp(r[i].name, names[n]) == 0) {
                instances[n]++;
                replayed[n] += r[i].replay != 0;
            }
    for (int n = 0; n < 4; n++)
        CHECK(instances[n] == REPLAYS, "range '%s': %d instances, want %d", names[n], instances[n], REPLAYS);
    CHECK(replayed[0] == 0 && replayed[1] == REPLAYS, "'step' is a CPU range (%d replayed), 'outer' replayed (%d)",
          replayed[0], replayed[1]);
    CHECK(nops == 2 * KERNELS_PER_INNER * REPLAYS, "%zu kernels traced, want %d", nops,
          2 * KERNELS_PER_INNER * REPLAYS);
    CHECK(profiler_unmapped_graph_ops(p) == 0, "%zu replayed kernels without their node",
          profiler_unmapped_graph_ops(p));
    int in_a = 0, in_b = 0, bad = 0;
    for (size_t i = 0; i < nops; i++) {
        int seen[4] = {0};
        for (uint32_t m = 0; m < ops[i].in_count; m++)
            for (int n = 0; n < 4; n++)
                seen[n] += strcmp(r[mem[ops[i].in_first + m]].name, names[n]) == 0;
        in_a += seen[2];
        in_b += seen[3];
        bad += seen[0] != 1 || seen[1] != 1 || seen[2] + seen[3] != 1 || !ops[i].graph_node || !ops[i].launch;
    }
    CHECK(bad == 0 && in_a == KERNELS_PER_INNER * REPLAYS && in_b == KERNELS_PER_INNER * REPLAYS,
          "replayed kernels in step+outer+one inner: %d wrong, %d in A, %d in B", bad, in_a, in_b);
    /* each replayed range spans its kernels and nests: inner within outer */
    for (size_t i = 0; i < nr; i++)
        if (r[i].replay && strcmp(r[i].name, "outer") == 0)
            CHECK(r[i].depth == 1 && r[i].end > r[i].start, "replayed 'outer' at depth %d", r[i].depth);
    printf("attribution: %zu kernels, %zu ranges, %zu graph nodes recorded, %s\n", nops, nr, profiler_graph_nodes(p),
           failures ? "FAILED" : "ok");
    profiler_free(p);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
}

int main(int argc, char **argv)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("no GPU: skipped\n");
        return 77;
    }
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    char err[300];
    profiler *probe = NULL;
    if (profiler_start(&probe, PROF_KERNELS, err, sizeof err)) {
        printf("%s: skipped\n", err);
        return 77;
    }
    profiler_stop(probe, err, sizeof err);
    profiler_free(probe);

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    if (capture_plain(s, &graph, &exec)) {
        printf("FAIL: graph capture\n");
        return 1;
    }
    static double samples[NVARIANTS][KINDS][ROUNDS * BATCHES];
    size_t recorded[NVARIANTS] = {0};
    for (int round = 0; round < ROUNDS; round++)
        for (int v = 0; v < NVARIANTS; v++) {
            profiler *p = NULL;
            if (variants[v].traced && profiler_start(&p, variants[v].parts, err, sizeof err)) {
                printf("FAIL: %s: %s\n", variants[v].name, err);
                return 1;
            }
            eager_batch(s), replay_batch(s, exec), nvtx_batch(); /* first use, discarded */
            if (p)
                profiler_discard(p, err, sizeof err);
            for (int b = 0; b < BATCHES; b++) {
                samples[v][EAGER][round * BATCHES + b] = eager_batch(s);
                samples[v][REPLAY][round * BATCHES + b] = replay_batch(s, exec);
                samples[v][NVTX][round * BATCHES + b] = nvtx_batch();
            }
            if (p) {
                profiler_stop(p, err, sizeof err);
                size_t n;
                profiler_ops(p, &n);
                recorded[v] += n;
                profiler_free(p);
            }
        }
    double med[NVARIANTS][KINDS];
    for (int v = 0; v < NVARIANTS; v++)
        for (int k = 0; k < KINDS; k++)
            med[v][k] = median(samples[v][k], ROUNDS * BATCHES);
    printf("\n| variant | eager launch µs | + vs untraced | graph replay µs/kernel | + | NVTX push+pop µs | + | "
           "records |\n|---|---|---|---|---|---|---|---|\n");
    FILE *out = argc > 1 ? fopen(argv[1], "w") : NULL;
    if (out)
        fprintf(out, "[\n");
    for (int v = 0; v < NVARIANTS; v++) {
        printf("| %s | %.3f | %+.3f | %.4f | %+.4f | %.3f | %+.3f | %zu |\n", variants[v].name, med[v][EAGER],
               med[v][EAGER] - med[0][EAGER], med[v][REPLAY], med[v][REPLAY] - med[0][REPLAY], med[v][NVTX],
               med[v][NVTX] - med[0][NVTX], recorded[v]);
        if (out)
            fprintf(out,
                    "{\"variant\": \"%s\", \"parts\": %u, \"eager_us_per_launch\": %.4f, "
                    "\"replay_us_per_kernel\": %.5f, \"nvtx_us_per_pair\": %.4f, \"records\": %zu}%s\n",
                    variants[v].name, variants[v].parts, med[v][EAGER], med[v][REPLAY], med[v][NVTX], recorded[v],
                    v + 1 < NVARIANTS ? "," : "");
    }
    if (out) {
        fprintf(out, "]\n");
        fclose(out);
    }
    /* every traced kernel recorded: ROUNDS × (1 + BATCHES) × (eager + replay) */
    size_t want = (size_t)ROUNDS * (BATCHES) * 2 * LAUNCHES;
    CHECK(recorded[1] == want, "kernels variant recorded %zu ops, want %zu", recorded[1], want);
    check_graph_attribution(s);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    printf("profile_launch_cost: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
