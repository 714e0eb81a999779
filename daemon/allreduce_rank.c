/* One rank of the MPI CPU all-reduce baseline (see allreduce_rank.h). This
 * file is the only MPI user of lmperfd. */
#include "allreduce_rank.h"

#include <inttypes.h>
#include <limits.h>
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"

#define MAX_SIZES 64

typedef struct rank_args {
    uint64_t sizes[MAX_SIZES]; /* bytes */
    int size_count;
    int warmup, iterations;
} rank_args;

static int parse_args(int argc, char **argv, rank_args *a)
{
    memset(a, 0, sizeof *a);
    a->iterations = -1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--warmup") == 0) {
            a->warmup = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--iterations") == 0) {
            a->iterations = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--sizes") == 0) {
            char *p = argv[i + 1], *end;
            while (*p && a->size_count < MAX_SIZES) {
                unsigned long long v = strtoull(p, &end, 10);
                if (end == p || v == 0 || v % sizeof(float))
                    return -1;
                a->sizes[a->size_count++] = v;
                p = *end == ',' ? end + 1 : end;
                if (*end && *end != ',')
                    return -1;
            }
        } else {
            return -1;
        }
    }
    return a->size_count > 0 && a->iterations > 0 && a->warmup >= 0 ? 0 : -1;
}

#ifdef LMPERF_HAVE_MPI
#include <mpi.h>

static void print_line(json_t *line /* steals */)
{
    json_dumpf(line, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(line);
}

/* One size on every rank. Collective: every rank calls it with the same
 * arguments. */
static void run_size(uint64_t bytes, const rank_args *a, int rank, int world)
{
    size_t count = (size_t)(bytes / sizeof(float));
    float *send = malloc(bytes), *recv = malloc(bytes);
    double *times = calloc((size_t)a->iterations, sizeof *times);
    double *slowest = calloc((size_t)a->iterations, sizeof *slowest);
    int ok = send && recv && times && slowest, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (rank == 0)
            print_line(json_pack("{s:I, s:i, s:s}", "bytes", (json_int_t)bytes, "world", world, "error",
                                 "out of host memory for the send and receive buffers"));
        goto out;
    }
    /* In place, as torch.distributed.all_reduce works (and gloo with it):
     * out of place, Open MPI first copies the whole send buffer into the
     * receive buffer inside the call. Each iteration starts from the same
     * input (copied in before the barrier, outside the timed span), so the
     * result stays checkable exactly. */
    lmk_allreduce_fill_host(send, count, rank);
    for (int it = -a->warmup; it < a->iterations; it++) {
        memcpy(recv, send, bytes);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (it >= 0)
            times[it] = (MPI_Wtime() - t0) * 1e3;
    }
    unsigned long long bad = lmk_allreduce_mismatches_host(recv, count, world), bad_all = 0;
    MPI_Reduce(times, slowest, a->iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bad, &bad_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        json_t *samples = json_array();
        for (int it = 0; it < a->iterations; it++)
            json_array_append_new(samples, json_real(slowest[it]));
        print_line(json_pack("{s:I, s:i, s:o, s:I}", "bytes", (json_int_t)bytes, "world", world, "times_ms",
                             samples, "mismatches", (json_int_t)bad_all));
    }
out:
    free(send);
    free(recv);
    free(times);
    free(slowest);
}

int allreduce_rank_main(int argc, char **argv)
{
    rank_args a;
    if (parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: lmperfd %s --sizes B1,B2,... --warmup W --iterations N "
                        "(internal: started by the allreduce job through mpirun; sizes in bytes, multiples of 4)\n",
                ALLREDUCE_RANK_COMMAND);
        return 2;
    }
    for (int i = 0; i < a.size_count; i++)
        if (a.sizes[i] / sizeof(float) > (uint64_t)INT32_MAX) {
            fprintf(stderr, "lmperfd %s: %" PRIu64 " bytes is more than MPI's int count of floats\n",
                    ALLREDUCE_RANK_COMMAND, a.sizes[i]);
            return 2;
        }
    /* Keep freed memory: Open MPI's large-message all-reduce mallocs and frees
     * a temporary of the message size every call; served by fresh mmaps, each
     * call page-faults it in again (15k faults per 100 MiB call, about half
     * of the time on the lent VMs). From the heap, untrimmed, it is reused. */
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    MPI_Init(&argc, &argv);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    for (int i = 0; i < a.size_count; i++)
        run_size(a.sizes[i], &a, rank, world);
    MPI_Finalize();
    return 0;
}

#else

int allreduce_rank_main(int argc, char **argv)
{
    rank_args a;
    (void)parse_args(argc, argv, &a);
    fprintf(stderr, "lmperfd %s: this build of lmperf has no MPI\n", ALLREDUCE_RANK_COMMAND);
    return 2;
}

#endif
