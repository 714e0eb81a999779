/* A thread-safe FIFO of job ids: HTTP threads push and remove (cancel), the
 * scheduler pops. The database is the durable copy; this is the order. */
#ifndef DAEMON_QUEUE_H
#define DAEMON_QUEUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct job_queue job_queue;

/* Returns a new empty queue, or NULL when out of memory. */
job_queue *queue_create(void);
/* Accepts NULL. */
void queue_free(job_queue *q);
/* Appends id. Returns 0, or -1 when out of memory. */
int queue_push(job_queue *q, int64_t id);
/* Removes the oldest id into *id. Returns 1 when one was removed, 0 when empty. */
int queue_pop(job_queue *q, int64_t *id);
/* Looks at the oldest id without removing it. Returns 1, or 0 when empty. */
int queue_peek(job_queue *q, int64_t *id);
/* Removes id wherever it is. Returns 1 when it was queued, 0 when not. */
int queue_remove(job_queue *q, int64_t id);
/* The number of queued ids. */
size_t queue_length(job_queue *q);

#endif
