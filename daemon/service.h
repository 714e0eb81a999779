/* The daemon's side of the API: binds the store, the queue and the scheduler
 * to the api_backend callbacks. Runs on HTTP threads: reads the store, pushes
 * to the queue, never waits on a worker. */
#ifndef DAEMON_SERVICE_H
#define DAEMON_SERVICE_H

#include <pthread.h>

#include "api.h"
#include "queue.h"
#include "scheduler.h"
#include "store.h"

typedef struct service {
    store *store;           /* borrowed */
    job_queue *queue;       /* borrowed */
    scheduler *scheduler;   /* borrowed */
    const char *db_path;    /* borrowed */
    volatile int accepting; /* 0 once shutdown began */
    double started_unix;    /* s */
    size_t max_queued;      /* more queued jobs than this: 503 */
    pthread_mutex_t submit_lock; /* the queue-length check and the insert as one step (PTHREAD_MUTEX_INITIALIZER) */
} service;

/* Fills *backend with callbacks bound to svc (borrowed). */
void service_bind(service *svc, api_backend *backend);

#endif
