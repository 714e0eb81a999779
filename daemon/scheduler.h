/* The scheduler: worker supervisor and dispatcher, one thread.
 *
 * DESIGN: the scheduler thread owns the worker processes (one per GPU, or one
 * CPU worker): it starts them (fork + exec of this binary's internal
 * `__worker` sub-command, with a socketpair), restarts them when they exit,
 * crash or pass a job's deadline, and sends them jobs from the FIFO queue.
 * HTTP threads only push to the queue and call scheduler_wake() /
 * scheduler_request_cancel(); they never block on a worker, nor on the
 * thread's writes to the store (which can wait out its busy timeout while
 * another process holds the database's lock): every function here answers
 * from state the thread shares under a lock held for memory operations only.
 * Every state change goes to the store. */
#ifndef DAEMON_SCHEDULER_H
#define DAEMON_SCHEDULER_H

#include <jansson.h>
#include <stdint.h>

#include "queue.h"
#include "store.h"

typedef struct scheduler scheduler;

typedef struct scheduler_config {
    const char *exe_path; /* this binary, to exec workers */
    int cpu_only;         /* one CPU worker even when GPUs are visible */
    int max_gpus;         /* use at most this many GPUs (0: all) */
    double cancel_grace_s;/* a running job asked to stop is killed after this */
} scheduler_config;

/* Starts the thread and the first worker. Borrowed store and queue must
 * outlive the scheduler. Sets *out (new). Returns 0 or -1. */
int scheduler_start(const scheduler_config *config, store *st, job_queue *queue, scheduler **out);
/* Tells the thread that the queue changed. Safe from any thread. */
void scheduler_wake(scheduler *s);
/* scheduler_request_cancel's answers. */
enum {
    SCHEDULER_CANCEL_FULL = -1,       /* on a worker, but no room to note the request: it is not made */
    SCHEDULER_CANCEL_NOT_RUNNING = 0, /* on no worker (not started, or ended meanwhile) */
    SCHEDULER_CANCEL_SENT = 1,        /* on a worker: the request is on its way (asking twice is one request) */
};
/* Asks the worker running job_id to stop. Returns SCHEDULER_CANCEL_SENT,
 * SCHEDULER_CANCEL_NOT_RUNNING or SCHEDULER_CANCEL_FULL. The request is
 * kept until the job leaves its worker, whether or not it was sent by then.
 * Safe from any thread. */
int scheduler_request_cancel(scheduler *s, int64_t job_id);
/* How many cancel requests the scheduler keeps at once (for messages). */
int scheduler_cancel_capacity(void);
/* Whether the database refuses the thread's writes now (the writes kept for
 * later, scheduler.c): a job no worker runs that the database still shows
 * running waits for that (else its end is being written at this moment).
 * Safe from any thread. */
int scheduler_db_refusing(scheduler *s);
/* Whether the daemon has a GPU worker: 1 yes, 0 certainly none (--cpu-only,
 * or the first worker found no GPU), -1 not known yet (the first worker has
 * not reported its device). Safe from any thread. */
int scheduler_has_gpu(scheduler *s);
/* Workers and devices for GET /v1/system (new; NULL when out of memory): as
 * the thread last published them, before it last waited for its workers. */
json_t *scheduler_describe(scheduler *s);
/* Starts the graceful stop and returns at once: no new dispatches; running
 * jobs finish, time out or are cancelled; then workers are told to exit and
 * the thread ends (scheduler_stopped says when). Queued jobs stay queued. */
void scheduler_begin_stop(scheduler *s);
/* 1 once the thread has ended (every worker reaped), else 0. */
int scheduler_stopped(scheduler *s);
/* Cancels every running job now (the second stop signal): each one's worker
 * is killed and the job marked 'cancelled' as a cancel whose grace ran out;
 * the runs it stored stay. Returns at once. Safe from any thread. */
void scheduler_abort_running(scheduler *s);
/* Graceful stop (scheduler_begin_stop), then waits for the thread to end.
 * Blocks. Frees s. */
void scheduler_stop(scheduler *s);

#endif
