/* One rank of an all-reduce started through mpirun: the MPI CPU baseline, or
 * NCCL with one process per GPU (see allreduce_rank.h). This file is the only
 * MPI user of lmperfd. */
#include "allreduce_rank.h"

#include <inttypes.h>
#include <limits.h>
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "status.h"

#define MAX_SIZES 64
#define MAX_DEVICES 1024
#define ERROR_BYTES 256 /* of each rank's message, gathered on rank 0 */

typedef struct rank_args {
    uint64_t sizes[MAX_SIZES]; /* bytes */
    int size_count;
    int warmup, iterations;
    int nccl;                  /* --backend nccl: GPU buffers through NCCL; else host buffers through MPI */
    int devices[MAX_DEVICES];  /* --devices: the GPU of local rank i (none given: local rank i uses cuda:i) */
    int device_count;
} rank_args;

/* Parses "a,b,c" of non-negative integers into out (at most max). Returns
 * the count, or -1. */
static int parse_int_list(const char *p, int *out, int max)
{
    int n = 0;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT_MAX || n == max || (*end && *end != ','))
            return -1;
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int parse_args(int argc, char **argv, rank_args *a)
{
    memset(a, 0, sizeof *a);
    a->iterations = -1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--warmup") == 0) {
            a->warmup = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--iterations") == 0) {
            a->iterations = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--backend") == 0) {
            if (strcmp(argv[i + 1], "nccl") && strcmp(argv[i + 1], "mpi"))
                return -1;
            a->nccl = strcmp(argv[i + 1], "nccl") == 0;
        } else if (strcmp(argv[i], "--devices") == 0) {
            if ((a->device_count = parse_int_list(argv[i + 1], a->devices, MAX_DEVICES)) < 1)
                return -1;
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

/* --- nccl, one process per GPU ------------------------------------------------ */

/* lmk_agree_fn over MPI_COMM_WORLD: every rank's ok, MIN. */
static int agree_all(void *ctx, int ok)
{
    (void)ctx;
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* Collective: rank 0 gets into out the message of the lowest rank whose own
 * message is not empty ("" when none is). */
static void first_error(const char *mine, int rank, int world, char *out, size_t outlen)
{
    char own[ERROR_BYTES] = "";
    snprintf(own, sizeof own, "%s", mine);
    char *all = rank == 0 ? calloc((size_t)world, ERROR_BYTES) : NULL;
    MPI_Gather(own, ERROR_BYTES, MPI_CHAR, all, ERROR_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    out[0] = '\0';
    for (int r = 0; all && r < world && !out[0] && outlen > 0; r++) {
        const char *msg = all + (size_t)r * ERROR_BYTES; /* NUL-terminated by snprintf above */
        size_t len = strnlen(msg, ERROR_BYTES - 1);
        len = len < outlen - 1 ? len : outlen - 1;
        memcpy(out, msg, len);
        out[len] = '\0';
    }
    if (!all)
        snprintf(out, outlen, "out of host memory on rank 0");
    free(all);
}

/* Rank 0: one error line per size from sizes[from] on. */
static void print_errors(const rank_args *a, int from, int world, const char *error)
{
    for (int i = from; i < a->size_count; i++)
        print_line(json_pack("{s:I, s:i, s:s}", "bytes", (json_int_t)a->sizes[i], "world", world, "error", error));
}

/* Collective: rank 0 gets "host:cuda:N,..." of every rank, in rank order (new). */
static char *gather_devices(int device, int rank, int world)
{
    char own[96], host[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(host, &len);
    snprintf(own, sizeof own, "%s:cuda:%d", host, device);
    char *all = rank == 0 ? calloc((size_t)world, sizeof own) : NULL;
    MPI_Gather(own, (int)sizeof own, MPI_CHAR, all, (int)sizeof own, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0 || !all)
        return NULL;
    size_t cap = (size_t)world * sizeof own + 1, used = 0;
    char *list = calloc(1, cap);
    for (int r = 0; list && r < world; r++)
        used += (size_t)snprintf(list + used, cap - used, "%s%.*s", r ? "," : "", (int)sizeof own,
                                 all + (size_t)r * sizeof own);
    free(all);
    return list;
}

/* Every rank: open its GPU (by local rank on its host), join one NCCL
 * communicator, then each size; rank 0 prints the lines. A failure before
 * the communicator exists fails every size with the first rank's reason. */
static void run_nccl(const rank_args *a, int rank, int world)
{
    MPI_Comm host_comm;
    int local_rank = 0, local_size = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host_comm);
    MPI_Comm_rank(host_comm, &local_rank);
    MPI_Comm_size(host_comm, &local_size);
    MPI_Comm_free(&host_comm);
    char err[ERROR_BYTES] = "", first[ERROR_BYTES];
    int device = a->device_count ? (local_rank < a->device_count ? a->devices[local_rank] : -1) : local_rank;
    lmk_nccl_rank *r = NULL;
    if (device < 0)
        snprintf(err, sizeof err, "rank %d: %d ranks on its host and %d GPUs given to the job", rank, local_size,
                 a->device_count);
    else
        (void)lmk_nccl_rank_open(rank, world, device, &r, err, sizeof err);
    unsigned char id[LMK_NCCL_ID_BYTES] = {0};
    int ok = agree_all(NULL, r != NULL);
    if (ok && rank == 0 && lmk_nccl_unique_id(id, err, sizeof err) != LMK_OK)
        ok = 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(id, LMK_NCCL_ID_BYTES, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
    if (ok)
        ok = agree_all(NULL, lmk_nccl_rank_join(r, id, err, sizeof err) == LMK_OK);
    char *devices = gather_devices(device, rank, world);
    first_error(err, rank, world, first, sizeof first);
    if (!ok) {
        if (rank == 0)
            print_errors(a, 0, world, first[0] ? first : "a rank could not start");
        goto out;
    }
    double *times = calloc((size_t)a->iterations, sizeof *times);
    double *slowest = calloc((size_t)a->iterations, sizeof *slowest);
    if (!agree_all(NULL, times && slowest)) {
        if (rank == 0)
            print_errors(a, 0, world, "out of host memory for the times");
        free(times);
        free(slowest);
        goto out;
    }
    for (int i = 0; i < a->size_count; i++) {
        uint64_t bad = 0;
        unsigned long long bad_all = 0, bad_mine;
        err[0] = '\0';
        int rc = lmk_nccl_rank_point(r, a->sizes[i], a->warmup, a->iterations, agree_all, NULL, times, &bad, err,
                                     sizeof err);
        /* agreed failures (a buffer that does not fit on some rank) leave the world usable */
        int all_ok = agree_all(NULL, rc == LMK_OK), usable = agree_all(NULL, rc == LMK_OK || rc == LMK_NOMEM);
        first_error(err, rank, world, first, sizeof first);
        if (!all_ok) {
            if (rank == 0)
                print_line(json_pack("{s:I, s:i, s:s}", "bytes", (json_int_t)a->sizes[i], "world", world, "error",
                                     first[0] ? first : "a rank failed"));
            if (!usable) { /* NCCL or CUDA failed inside the loop: the communicator is not to be trusted */
                if (rank == 0)
                    print_errors(a, i + 1, world, "not run: an earlier size failed with an NCCL or CUDA error");
                break;
            }
            continue;
        }
        bad_mine = bad;
        MPI_Reduce(times, slowest, a->iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&bad_mine, &bad_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            json_t *samples = json_array();
            for (int it = 0; it < a->iterations; it++)
                json_array_append_new(samples, json_real(slowest[it]));
            print_line(json_pack("{s:I, s:i, s:o, s:I, s:s}", "bytes", (json_int_t)a->sizes[i], "world", world,
                                 "times_ms", samples, "mismatches", (json_int_t)bad_all, "devices",
                                 devices ? devices : ""));
        }
    }
    free(times);
    free(slowest);
out:
    free(devices);
    lmk_nccl_rank_free(r);
}

int allreduce_rank_main(int argc, char **argv)
{
    rank_args a;
    if (parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: lmperfd %s --sizes B1,B2,... --warmup W --iterations N [--backend mpi|nccl] "
                        "[--devices D0,D1,...] (internal: started by the allreduce job through mpirun; sizes in "
                        "bytes, multiples of 4; --devices: the GPU of each local rank)\n",
                ALLREDUCE_RANK_COMMAND);
        return 2;
    }
    for (int i = 0; i < a.size_count; i++)
        if (!a.nccl && a.sizes[i] / sizeof(float) > (uint64_t)INT32_MAX) {
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
    if (a.nccl)
        run_nccl(&a, rank, world);
    else
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
