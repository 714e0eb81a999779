/* Collectives: timing loops for one all-reduce point (float32 sum), and the
 * pattern, check and statistics shared by every backend.
 *
 * DESIGN: an all-reduce point is `warmup` untimed then `iterations` timed
 * out-of-place all-reduces of `bytes` per rank. Each timed iteration starts
 * after all ranks meet (thread barrier / MPI_Barrier) with the device idle and
 * ends when every rank's result is ready; its time is the span from the first
 * rank's start to the last rank's end (wall clock), which is what a user who
 * writes barrier; sync; t0; all_reduce; sync; t1 measures. Bandwidths follow
 * nccl-tests: algbw = bytes / time, busbw = algbw * 2(n-1)/n.
 *
 * Correctness: rank r sends lmk_allreduce_pattern(r, i) at element i; these
 * are small integers, so every float32 sum of up to LMK_ALLREDUCE_MAX_RANKS
 * ranks is exact in any order and the result is checked for equality.
 *
 * NCCL (lmk_nccl_group_*, built with CUDA and NCCL): one process, one thread
 * per GPU, one communicator per thread (ncclCommInitRank), threads kept for
 * the group's life so that a sweep over sizes initialises NCCL once. The
 * caller must set NCCL_NVLS_ENABLE=0 in the environment on shared machines
 * before lmk_nccl_group_create (this library does not touch the environment).
 * No logging, no global state. */
#ifndef LMK_COLLECTIVES_H
#define LMK_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#define LMK_ALLREDUCE_MAX_RANKS 1024 /* pattern values < 2^14: sums < 2^24 */

/* Summary of the per-iteration times of one point. */
typedef struct lmk_allreduce_stats {
    double median_ms, mean_ms, min_ms, max_ms; /* ms */
    double algbw_gbps;                         /* GB/s (1e9), bytes / median */
    double busbw_gbps;                         /* GB/s, algbw * 2(n-1)/n */
} lmk_allreduce_stats;

#ifdef __CUDACC__
#define LMK_COLLECTIVES_HD __host__ __device__
#else
#define LMK_COLLECTIVES_HD
#endif

/* The value rank `rank` contributes at element i: an integer in [0, 16). */
static inline LMK_COLLECTIVES_HD float lmk_allreduce_pattern(int rank, size_t i)
{
    return (float)((i * 7u + (size_t)rank * 5u) & 15u);
}

/* The exact reduced value at element i for `world` ranks. */
static inline float lmk_allreduce_expected(int world, size_t i)
{
    unsigned sum = 0;
    for (int r = 0; r < world; r++)
        sum += (unsigned)((i * 7u + (size_t)r * 5u) & 15u);
    return (float)sum;
}

/* Fills x (count floats) with rank's pattern. x borrowed. */
void lmk_allreduce_fill_host(float *x, size_t count, int rank);

/* Number of elements of x (count floats) that differ from the exact sum of
 * `world` ranks. x borrowed. */
size_t lmk_allreduce_mismatches_host(const float *x, size_t count, int world);

/* Statistics of times_ms (n >= 1 samples, borrowed, not modified) for
 * `bytes` per rank over `world` ranks. */
void lmk_allreduce_stats_compute(const double *times_ms, int n, uint64_t bytes, int world,
                                 lmk_allreduce_stats *out);

/* Bus-bandwidth factor 2(n-1)/n (0 for one rank). */
double lmk_allreduce_bus_factor(int world);

/* --- the agreed timed loop (plain C; every rank form uses it) ------------------ */

/* A collective over the ranks: returns non-zero when every rank passed
 * ok != 0, the same on every rank, and is a barrier (MPI_Allreduce of MIN
 * for processes, lmk_thread_agree for threads). */
typedef int (*lmk_agree_fn)(void *ctx, int ok);

/* One timed iteration on this rank: one all-reduce, waited for until this
 * rank's result is ready. Returns non-zero on success. */
typedef int (*lmk_iteration_fn)(void *ctx);

/* Runs up to `iterations` timed iterations on this rank. warmup_ok: this
 * rank's untimed warmup succeeded. An agree follows the warmup and every
 * iteration, so each iteration starts after a barrier, and all ranks leave
 * together after the first iteration (or warmup) that failed on any rank:
 * every rank calls agree equally often whatever fails, and no rank waits on
 * a barrier the others have left. start_s and end_s (iterations entries,
 * borrowed) get each iteration's CLOCK_MONOTONIC seconds on this rank.
 * *own_ok (may be NULL) is 0 when this rank's warmup or an iteration failed.
 * Returns non-zero when every rank's warmup and iterations succeeded. */
int lmk_agreed_timed_loop(int iterations, int warmup_ok, lmk_agree_fn agree, void *agree_ctx,
                          lmk_iteration_fn iterate, void *iterate_ctx, double *start_s, double *end_s,
                          int *own_ok);

/* lmk_agree_fn for `ranks` threads of one process: one barrier per call. */
typedef struct lmk_thread_agree lmk_thread_agree;

/* One thread's handle: pass a pointer to it as lmk_thread_agree_call's ctx. */
typedef struct lmk_thread_agree_rank {
    lmk_thread_agree *shared;
    unsigned calls; /* how many agrees this thread has made */
} lmk_thread_agree_rank;

/* New agreement for `ranks` >= 1 threads (free with lmk_thread_agree_free);
 * NULL when out of memory. */
lmk_thread_agree *lmk_thread_agree_create(int ranks);

/* The lmk_agree_fn: ctx is this thread's lmk_thread_agree_rank. */
int lmk_thread_agree_call(void *ctx, int ok);

/* Accepts NULL. No thread may be inside lmk_thread_agree_call. */
void lmk_thread_agree_free(lmk_thread_agree *a);

/* --- NCCL ------------------------------------------------------------------ */

typedef struct lmk_nccl_group lmk_nccl_group;

/* Non-zero when this build has NCCL. */
int lmk_nccl_available(void);

/* Starts one thread per device and a communicator across them. devices
 * (world entries, borrowed) are CUDA device indices. On success sets *out
 * (new; free with lmk_nccl_group_free) and returns LMK_OK; else a negative
 * lmk status with a message in errbuf (LMK_UNSUPPORTED without NCCL). */
int lmk_nccl_group_create(int world, const int *devices, lmk_nccl_group **out, char *errbuf, size_t errlen);

/* One all-reduce point on the group: allocates send and receive buffers of
 * `bytes` (a multiple of 4) on every rank, fills them, runs warmup + timed
 * iterations and checks every rank's result. times_ms (iterations entries,
 * borrowed) receives the per-iteration times; *mismatches the number of wrong
 * elements summed over ranks. Returns LMK_OK or a negative status with a
 * message in errbuf (LMK_NOMEM when a buffer does not fit; the group stays
 * usable), LMK_DEVICE on an NCCL/CUDA failure (free the group). */
int lmk_nccl_allreduce_point(lmk_nccl_group *g, uint64_t bytes, int warmup, int iterations, double *times_ms,
                             uint64_t *mismatches, char *errbuf, size_t errlen);

/* Stops the threads, destroys the communicators. Accepts NULL. */
void lmk_nccl_group_free(lmk_nccl_group *g);

/* --- NCCL, one process per rank ------------------------------------------------ */
/* The per-process form, as torch.distributed runs NCCL (and as ranks on
 * several machines must): each process opens its own GPU, rank 0 makes the
 * communicator's unique id, the caller sends it to every rank (MPI_Bcast),
 * and each rank joins. The caller also supplies `agree`, a collective over
 * the ranks (MPI_Allreduce of MIN): returns non-zero when every rank passed
 * ok != 0. It makes failures collective (a rank whose buffer does not fit
 * stops every rank before the all-reduce, not after a hang) and serves as
 * the barrier before each timed iteration. */

#define LMK_NCCL_ID_BYTES 128 /* sizeof(ncclUniqueId) */

typedef struct lmk_nccl_rank lmk_nccl_rank;

/* Makes a new communicator id into id (LMK_NCCL_ID_BYTES bytes, out). Only
 * rank 0 calls it, after lmk_nccl_rank_open. Returns LMK_OK or a negative
 * status with a message in errbuf. */
int lmk_nccl_unique_id(unsigned char *id, char *errbuf, size_t errlen);

/* Opens CUDA device `device` in this process (a stream on it) for rank
 * `rank` of `world`. On success sets *out (new; free with
 * lmk_nccl_rank_free). Returns LMK_OK or a negative status with a message in
 * errbuf (LMK_INVALID for a device this host does not have, LMK_UNSUPPORTED
 * without NCCL). */
int lmk_nccl_rank_open(int rank, int world, int device, lmk_nccl_rank **out, char *errbuf, size_t errlen);

/* Joins the communicator of id (borrowed, from rank 0). Collective: blocks
 * until every rank has joined. Returns LMK_OK or LMK_DEVICE with a message. */
int lmk_nccl_rank_join(lmk_nccl_rank *r, const unsigned char *id, char *errbuf, size_t errlen);

/* One all-reduce point on this rank, collective like
 * lmk_nccl_allreduce_point: buffers of `bytes` (a multiple of 4), warmup
 * untimed and `iterations` timed all-reduces through lmk_agreed_timed_loop
 * with `agree`, each timed from after an agree until this rank's stream has
 * finished. times_ms (iterations entries, borrowed) gets this rank's times
 * (the caller takes the slowest rank's); *mismatches this rank's wrong
 * elements. Returns LMK_OK, or a negative status, the same on every rank:
 * LMK_NOMEM / LMK_DEVICE when a rank could not allocate or fill (the rank
 * stays usable); LMK_DEVICE when NCCL or CUDA failed on any rank in the
 * warmup or a timed iteration (every rank stops at the next agree; the rank
 * is then only fit for lmk_nccl_rank_free, which aborts its communicator).
 * errbuf holds the message on the ranks that failed themselves and is empty
 * on the others. */
int lmk_nccl_rank_point(lmk_nccl_rank *r, uint64_t bytes, int warmup, int iterations, lmk_agree_fn agree,
                        void *agree_ctx, double *times_ms, uint64_t *mismatches, char *errbuf, size_t errlen);

/* Destroys the communicator and the stream. Accepts NULL. */
void lmk_nccl_rank_free(lmk_nccl_rank *r);

#endif
