/* Unit test: the job queue keeps FIFO order, removes from anywhere, grows,
 * and stays consistent under concurrent producers. */
#include <pthread.h>

#include "../engine/check.h"
#include "queue.h"

#define PRODUCERS 4
#define PER_PRODUCER 5000

static void *produce(void *arg)
{
    job_queue *q = ((void **)arg)[0];
    int64_t base = (int64_t)(intptr_t)((void **)arg)[1];
    for (int64_t i = 0; i < PER_PRODUCER; i++)
        queue_push(q, base + i);
    return NULL;
}

int main(void)
{
    job_queue *q = queue_create();
    int64_t id;
    CHECK(q != NULL, "queue_create");
    CHECK(queue_pop(q, &id) == 0, "pop on empty queue must return 0");
    CHECK(queue_peek(q, &id) == 0, "peek on empty queue must return 0");

    for (int64_t i = 1; i <= 100; i++)
        MUST(queue_push(q, i));
    CHECK(queue_length(q) == 100, "length %zu", queue_length(q));
    CHECK(queue_remove(q, 50) == 1, "remove a queued id");
    CHECK(queue_remove(q, 50) == 0, "remove it again");
    CHECK(queue_remove(q, 1000) == 0, "remove an absent id");
    CHECK(queue_peek(q, &id) == 1 && id == 1, "peek the head");
    for (int64_t want = 1; want <= 100; want++) {
        if (want == 50)
            continue;
        CHECK(queue_pop(q, &id) == 1 && id == want, "pop order: want %lld got %lld", (long long)want,
              (long long)id);
    }
    CHECK(queue_length(q) == 0, "empty after popping all");

    /* wrap-around: interleave pushes and pops past the capacity */
    int64_t next_push = 1, next_pop = 1;
    for (int round = 0; round < 1000; round++) {
        for (int k = 0; k < 3; k++)
            MUST(queue_push(q, next_push++));
        for (int k = 0; k < 2; k++) {
            CHECK(queue_pop(q, &id) == 1 && id == next_pop, "wrapped order");
            next_pop++;
        }
    }
    int64_t removed = next_pop + 5;
    CHECK(queue_remove(q, removed) == 1, "remove in a wrapped buffer");
    while (queue_pop(q, &id)) {
        if (next_pop == removed)
            next_pop++;
        CHECK(id == next_pop, "after wrap removal: want %lld got %lld", (long long)next_pop, (long long)id);
        next_pop++;
    }

    /* concurrent producers: nothing lost, each producer's order kept */
    pthread_t threads[PRODUCERS];
    void *args[PRODUCERS][2];
    for (int t = 0; t < PRODUCERS; t++) {
        args[t][0] = q;
        args[t][1] = (void *)(intptr_t)((t + 1) * 1000000);
        pthread_create(&threads[t], NULL, produce, args[t]);
    }
    for (int t = 0; t < PRODUCERS; t++)
        pthread_join(threads[t], NULL);
    CHECK(queue_length(q) == PRODUCERS * PER_PRODUCER, "concurrent pushes: %zu", queue_length(q));
    int64_t last[PRODUCERS] = {0};
    size_t popped = 0;
    while (queue_pop(q, &id)) {
        int t = (int)(id / 1000000) - 1;
        CHECK(t >= 0 && t < PRODUCERS && id > last[t], "per-producer order broken at %lld", (long long)id);
        if (t >= 0 && t < PRODUCERS)
            last[t] = id;
        popped++;
    }
    CHECK(popped == PRODUCERS * PER_PRODUCER, "popped %zu", popped);
    queue_free(q);
    queue_free(NULL);
    return check_report("test_queue");
}
