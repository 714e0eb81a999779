/* FIFO of job ids as a growable ring buffer behind a mutex. */
#include "queue.h"

#include <pthread.h>
#include <stdlib.h>

struct job_queue {
    pthread_mutex_t lock;
    int64_t *ids;
    size_t head;   /* index of the oldest */
    size_t length;
    size_t capacity;
};

job_queue *queue_create(void)
{
    job_queue *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    pthread_mutex_init(&q->lock, NULL);
    return q;
}

void queue_free(job_queue *q)
{
    if (!q)
        return;
    pthread_mutex_destroy(&q->lock);
    free(q->ids);
    free(q);
}

static int grow(job_queue *q)
{
    size_t capacity = q->capacity ? q->capacity * 2 : 16;
    int64_t *ids = malloc(capacity * sizeof *ids);
    if (!ids)
        return -1;
    for (size_t i = 0; i < q->length; i++)
        ids[i] = q->ids[(q->head + i) % q->capacity];
    free(q->ids);
    q->ids = ids;
    q->head = 0;
    q->capacity = capacity;
    return 0;
}

int queue_push(job_queue *q, int64_t id)
{
    int rc = 0;
    pthread_mutex_lock(&q->lock);
    if (q->length == q->capacity && grow(q))
        rc = -1;
    else
        q->ids[(q->head + q->length++) % q->capacity] = id;
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int queue_pop(job_queue *q, int64_t *id)
{
    int found = 0;
    pthread_mutex_lock(&q->lock);
    if (q->length > 0) {
        *id = q->ids[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->length--;
        found = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return found;
}

int queue_peek(job_queue *q, int64_t *id)
{
    int found = 0;
    pthread_mutex_lock(&q->lock);
    if (q->length > 0) {
        *id = q->ids[q->head];
        found = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return found;
}

int queue_remove(job_queue *q, int64_t id)
{
    int found = 0;
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < q->length && !found; i++) {
        if (q->ids[(q->head + i) % q->capacity] != id)
            continue;
        for (size_t j = i; j + 1 < q->length; j++)
            q->ids[(q->head + j) % q->capacity] = q->ids[(q->head + j + 1) % q->capacity];
        q->length--;
        found = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return found;
}

size_t queue_length(job_queue *q)
{
    pthread_mutex_lock(&q->lock);
    size_t n = q->length;
    pthread_mutex_unlock(&q->lock);
    return n;
}
