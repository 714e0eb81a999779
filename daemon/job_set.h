/* A small bounded set of job ids: which jobs are on a worker, which of them
 * a DELETE asked to stop (scheduler.c). Its capacity is fixed at creation:
 * an id that does not fit is refused (JOB_SET_FULL), never dropped later.
 *
 * Not thread-safe: the owner holds its own lock around every call. Each call
 * is O(capacity): meant for tens of ids, not thousands. */
#ifndef DAEMON_JOB_SET_H
#define DAEMON_JOB_SET_H

#include <stddef.h>
#include <stdint.h>

typedef struct job_set job_set;

#define JOB_SET_FULL (-1) /* job_set_add: the set holds capacity ids, id not among them */

/* A new empty set for at most capacity ids (≥ 1), or NULL when out of memory
 * or capacity is 0. */
job_set *job_set_create(size_t capacity);
/* Accepts NULL. */
void job_set_free(job_set *s);
/* Puts id in the set. Returns 0 when id is in it now (added, or there
 * already: adding twice is one entry), JOB_SET_FULL when it is full and id is
 * not in it (the set unchanged). */
int job_set_add(job_set *s, int64_t id);
/* Takes id out of the set. Returns 1 when it was there, 0 when not. */
int job_set_remove(job_set *s, int64_t id);
/* 1 when id is in the set, 0 when not. */
int job_set_contains(const job_set *s, int64_t id);
/* The number of ids in the set. */
size_t job_set_count(const job_set *s);
/* The most ids the set holds. */
size_t job_set_capacity(const job_set *s);

#endif
