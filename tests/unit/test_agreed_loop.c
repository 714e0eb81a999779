/* Unit test: lmk_agreed_timed_loop and lmk_thread_agree (kernels/collectives.h),
 * the loop every all-reduce rank runs. With threads as ranks and an iteration
 * that fails on one chosen rank at one chosen iteration (or in the warmup):
 * every rank returns the same verdict, runs the same number of iterations
 * (up to and including the failed one), makes the same number of agrees, and
 * only the failing rank reports its own failure; each iteration starts after
 * every rank ended the one before (the agree is a barrier). A hang here is a
 * rank left behind at a barrier: the test's timeout fails it. The agree alone
 * is checked over many rounds of random votes with random delays, reusing one
 * agreement across loops as consecutive points do. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../engine/check.h"
#include "collectives.h"

#define MAX_RANKS 8
#define ITERATIONS 6

typedef struct rank_run {
    lmk_thread_agree_rank agree;
    int rank;
    int fail_rank, fail_at;  /* fail_at -1: the warmup fails on fail_rank; fail_rank -1: nothing fails */
    unsigned seed;           /* of this rank's random delays */
    int iterations_run;      /* iterate calls */
    int verdict, own_ok;
    double start_s[ITERATIONS], end_s[ITERATIONS];
} rank_run;

static void short_random_delay(unsigned *seed)
{
    int us = rand_r(seed) % 4 == 0 ? rand_r(seed) % 300 : 0;
    if (us)
        usleep((useconds_t)us);
}

static int fake_iteration(void *ctx)
{
    rank_run *r = ctx;
    int it = r->iterations_run++;
    short_random_delay(&r->seed);
    return !(r->rank == r->fail_rank && it == r->fail_at);
}

static void *rank_main(void *arg)
{
    rank_run *r = arg;
    short_random_delay(&r->seed);
    int warmup_ok = !(r->rank == r->fail_rank && r->fail_at == -1);
    r->verdict = lmk_agreed_timed_loop(ITERATIONS, warmup_ok, lmk_thread_agree_call, &r->agree, fake_iteration, r,
                                       r->start_s, r->end_s, &r->own_ok);
    return NULL;
}

/* One point: `world` threads on agreement a, failing as given. */
static void run_point(lmk_thread_agree *a, rank_run *runs, int world, int fail_rank, int fail_at, unsigned seed)
{
    pthread_t threads[MAX_RANKS];
    unsigned calls_before = runs[0].agree.calls;
    for (int r = 0; r < world; r++) {
        lmk_thread_agree_rank keep = runs[r].agree; /* the agreement's call count lives on across points */
        runs[r] = (rank_run){.agree = keep, .rank = r, .fail_rank = fail_rank, .fail_at = fail_at,
                             .seed = seed * 31u + (unsigned)r};
        runs[r].agree.shared = a;
    }
    for (int r = 0; r < world; r++)
        CHECK(pthread_create(&threads[r], NULL, rank_main, &runs[r]) == 0, "start rank %d", r);
    for (int r = 0; r < world; r++)
        pthread_join(threads[r], NULL);

    int fails = fail_rank >= 0;
    int expect_iterations = !fails ? ITERATIONS : fail_at + 1; /* a warmup failure (-1): none */
    for (int r = 0; r < world; r++) {
        CHECK(runs[r].verdict == !fails, "world %d, fail rank %d at %d: rank %d's verdict %d", world, fail_rank,
              fail_at, r, runs[r].verdict);
        CHECK(runs[r].iterations_run == expect_iterations,
              "world %d, fail rank %d at %d: rank %d ran %d iterations, expected %d", world, fail_rank, fail_at, r,
              runs[r].iterations_run, expect_iterations);
        CHECK(runs[r].own_ok == !(fails && r == fail_rank), "world %d, fail rank %d at %d: rank %d's own_ok %d",
              world, fail_rank, fail_at, r, runs[r].own_ok);
        CHECK(runs[r].agree.calls - calls_before == (unsigned)expect_iterations + 1,
              "world %d, fail rank %d at %d: rank %d made %u agrees, expected %d", world, fail_rank, fail_at, r,
              runs[r].agree.calls - calls_before, expect_iterations + 1);
    }
    /* the barrier: iteration it starts on every rank after every rank ended it - 1 */
    for (int it = 1; it < expect_iterations; it++) {
        double last_end = 0, first_start = 1e300;
        for (int r = 0; r < world; r++) {
            last_end = runs[r].end_s[it - 1] > last_end ? runs[r].end_s[it - 1] : last_end;
            first_start = runs[r].start_s[it] < first_start ? runs[r].start_s[it] : first_start;
        }
        CHECK(first_start >= last_end, "world %d: iteration %d started %.3g s before iteration %d ended", world, it,
              last_end - first_start, it - 1);
    }
}

typedef struct vote_run {
    lmk_thread_agree_rank agree;
    int rank, world, rounds;
    unsigned seed;
    int wrong; /* rounds whose result was not the AND of the votes */
} vote_run;

/* Rank r votes 0 in round k when bit r of k's hash is clear: every rank can
 * compute every vote, so each checks the result against the AND. */
static int vote(int rank, int round)
{
    unsigned h = (unsigned)round * 2654435761u;
    return (h >> (rank + 3)) & 1u || (round & 3) == 0; /* every fourth round: all vote 1 */
}

static void *voter(void *arg)
{
    vote_run *v = arg;
    for (int k = 0; k < v->rounds; k++) {
        short_random_delay(&v->seed);
        int expected = 1;
        for (int r = 0; r < v->world; r++)
            expected &= vote(r, k);
        if (lmk_thread_agree_call(&v->agree, vote(v->rank, k)) != expected)
            v->wrong++;
    }
    return NULL;
}

int main(void)
{
    CHECK(lmk_thread_agree_create(0) == NULL, "no agreement for 0 ranks");
    const int worlds[] = {1, 2, 3, 4, 8};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
        int world = worlds[w];
        lmk_thread_agree *a = lmk_thread_agree_create(world);
        CHECK(a != NULL, "agreement for %d ranks", world);
        if (!a)
            continue;
        rank_run runs[MAX_RANKS] = {0};
        unsigned seed = 1;
        run_point(a, runs, world, -1, 0, seed++); /* nothing fails */
        for (int fail_rank = 0; fail_rank < world; fail_rank++)
            for (int fail_at = -1; fail_at < ITERATIONS; fail_at++)
                run_point(a, runs, world, fail_rank, fail_at, seed++);
        run_point(a, runs, world, -1, 0, seed++); /* and the agreement still works after failures */
        lmk_thread_agree_free(a);
    }

    enum { VOTERS = 4, ROUNDS = 3000 };
    lmk_thread_agree *a = lmk_thread_agree_create(VOTERS);
    CHECK(a != NULL, "agreement for %d voters", VOTERS);
    if (a) {
        vote_run votes[VOTERS];
        pthread_t threads[VOTERS];
        for (int r = 0; r < VOTERS; r++) {
            votes[r] = (vote_run){.agree = {.shared = a}, .rank = r, .world = VOTERS, .rounds = ROUNDS,
                                  .seed = 7u + (unsigned)r};
            pthread_create(&threads[r], NULL, voter, &votes[r]);
        }
        for (int r = 0; r < VOTERS; r++) {
            pthread_join(threads[r], NULL);
            CHECK(votes[r].wrong == 0, "voter %d: %d of %d rounds not the AND of the votes", r, votes[r].wrong,
                  ROUNDS);
        }
        lmk_thread_agree_free(a);
    }
    return check_report("agreed_loop");
}
