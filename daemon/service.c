/* API callbacks: submit, list, get, cancel, table, compare, system, health, metrics. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "compare.h"
#include "log.h"
#include "models.h"
#include "spec.h"

static double unix_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static int store_failed(api_error *err, int rc, int64_t id)
{
    if (rc == STORE_NOT_FOUND)
        return api_fail(err, API_ERR_NOT_FOUND, "id", "no job with id %lld", (long long)id);
    if (rc == STORE_RETRY)
        return api_fail(err, API_ERR_UNAVAILABLE, NULL,
                        "the database cannot be written now (disk full, or locked by another writer): "
                        "nothing was changed; try again later");
    return api_fail(err, API_ERR_INTERNAL, NULL, "database error (see the daemon log)");
}

static int svc_submit(void *self, json_t *spec, json_t **job, api_error *err)
{
    service *svc = self;
    const jobkind *kind;
    if (!svc->accepting)
        return api_fail(err, API_ERR_UNAVAILABLE, NULL, "the daemon is shutting down");
    if (spec_validate(spec, &kind, err))
        return -1;
    /* a job that would certainly fail on the CPU worker is refused now, not
     * queued to fail later */
    if (kind->check_no_gpu && scheduler_has_gpu(svc->scheduler) == 0 && kind->check_no_gpu(spec, err))
        return -1;
    int64_t id = 0;
    double timeout = json_number_value(json_object_get(spec, "timeout_s"));
    /* Concurrent submissions: the check, the insert and the push under one
     * lock, so max_queued holds (the scheduler only shortens the queue
     * meanwhile). The answer is the job as stored before it is queued: queued,
     * however fast a worker then runs it. */
    pthread_mutex_lock(&svc->submit_lock);
    int full = queue_length(svc->queue) >= svc->max_queued;
    int inserted = full ? STORE_OK
                        : store_job_insert(svc->store, kind->name, json_string_value(json_object_get(spec, "label")),
                                           timeout, spec, &id);
    int stored = !full && inserted == STORE_OK;
    int got = stored ? store_job_get(svc->store, id, 0, job) : STORE_OK;
    int queued = stored && queue_push(svc->queue, id) == 0;
    pthread_mutex_unlock(&svc->submit_lock);
    if (full)
        return api_fail(err, API_ERR_UNAVAILABLE, NULL, "the queue is full (%zu jobs); try later",
                        svc->max_queued);
    if (inserted == STORE_RETRY)
        return store_failed(err, inserted, 0);
    if (!stored)
        return api_fail(err, API_ERR_INTERNAL, NULL, "could not store the job (see the daemon log)");
    if (queued) {
        scheduler_wake(svc->scheduler);
        log_info("api", "job %lld (%s) queued", (long long)id, kind->name);
    }
    if (got != STORE_OK)
        return store_failed(err, got, id);
    if (!queued) {
        json_decref(*job);
        *job = NULL;
        return api_fail(err, API_ERR_UNAVAILABLE, NULL, "out of memory queuing job %lld", (long long)id);
    }
    return 0;
}

static int svc_get(void *self, int64_t id, json_t **job, api_error *err)
{
    service *svc = self;
    int rc = store_job_get(svc->store, id, 1, job);
    return rc == STORE_OK ? 0 : store_failed(err, rc, id);
}

static int svc_list(void *self, const api_job_filter *filter, json_t **list, api_error *err)
{
    service *svc = self;
    char names[160];
    if (filter->status && !store_status_known(filter->status)) {
        store_status_names(names, sizeof names);
        return api_fail(err, API_ERR_BAD_REQUEST, "status", "status must be one of %s, not '%.40s'", names,
                        filter->status);
    }
    if (filter->kind && !jobkind_find(filter->kind)) {
        jobkind_names(names, sizeof names);
        return api_fail(err, API_ERR_BAD_REQUEST, "kind", "no job kind named '%.40s' (the kinds: %s)", filter->kind,
                        names);
    }
    int rc = store_job_list(svc->store, filter->kind, filter->status, filter->limit, filter->offset, list);
    return rc == STORE_OK ? 0 : store_failed(err, rc, 0);
}

static int svc_cancel(void *self, int64_t id, json_t **job, int *accepted, api_error *err)
{
    service *svc = self;
    char kind[64], status[32];
    int rc = store_job_state(svc->store, id, kind, sizeof kind, status, sizeof status);
    if (rc != STORE_OK)
        return store_failed(err, rc, id);
    *accepted = 0;
    if (strcmp(status, "queued") == 0) {
        /* the database first: a job it refuses to cancel stays queued, in
         * its place (the scheduler drops a job that is no longer queued there) */
        rc = store_job_cancel_queued(svc->store, id);
        if (rc == STORE_OK) {
            queue_remove(svc->queue, id);
            log_info("api", "job %lld cancelled while queued", (long long)id);
            return svc_get(self, id, job, err);
        }
        if (rc != STORE_CONFLICT)
            return store_failed(err, rc, id);
        /* it started meanwhile: fall through to the running case */
        strcpy(status, "running");
    }
    int cancel = strcmp(status, "running") == 0 ? scheduler_request_cancel(svc->scheduler, id)
                                                  : SCHEDULER_CANCEL_NOT_RUNNING;
    if (cancel == SCHEDULER_CANCEL_FULL) /* refused, not lost: the client may ask again */
        return api_fail(err, API_ERR_UNAVAILABLE, "id",
                        "job %lld is running, but the daemon cannot note another cancel request now (it keeps %d "
                        "at once, one per job on a worker); ask again",
                        (long long)id, scheduler_cancel_capacity());
    if (cancel == SCHEDULER_CANCEL_SENT) {
        *accepted = 1;
        rc = store_job_cancel_requested(svc->store, id);
        if (rc != STORE_OK && rc != STORE_CONFLICT) /* the cancel goes on; only the note is lost */
            log_warn("api", "job %lld: could not note the cancel request", (long long)id);
        return svc_get(self, id, job, err);
    }
    store_job_state(svc->store, id, kind, sizeof kind, status, sizeof status);
    /* no worker runs it: its end waits for the database, or is being written now */
    if (strcmp(status, "running") == 0 && scheduler_db_refusing(svc->scheduler))
        return api_fail(err, API_ERR_CONFLICT, "id",
                        "job %lld has ended, but its end is not recorded yet (the database cannot be written "
                        "now); it will be once the database takes writes",
                        (long long)id);
    if (strcmp(status, "running") == 0)
        return api_fail(err, API_ERR_CONFLICT, "id",
                        "job %lld has just ended (its end is being recorded): only a queued or running job can be "
                        "cancelled",
                        (long long)id);
    return api_fail(err, API_ERR_CONFLICT, "id",
                    "job %lld has already ended (%s): only a queued or running job can be cancelled", (long long)id,
                    status);
}

/* The kind of job id, for the per-kind views. Returns 0 or -1 with err. */
static int job_kind(service *svc, int64_t id, const jobkind **kind, api_error *err)
{
    char kind_name[64], status[32];
    int rc = store_job_state(svc->store, id, kind_name, sizeof kind_name, status, sizeof status);
    if (rc != STORE_OK)
        return store_failed(err, rc, id);
    *kind = jobkind_find(kind_name);
    if (!*kind)
        return api_fail(err, API_ERR_NOT_FOUND, NULL, "job %lld has an unknown kind %s", (long long)id, kind_name);
    return 0;
}

static int svc_table(void *self, int64_t id, const api_table_query *query, json_t **table, api_error *err)
{
    service *svc = self;
    const jobkind *kind;
    if (job_kind(svc, id, &kind, err))
        return -1;
    return store_job_table(svc->store, kind, id, query, table, err);
}

/* GET /v1/compare's arguments, for compare_view. */
typedef struct compare_args {
    const int64_t *job_ids; /* borrowed */
    size_t count;
    int64_t baseline_id; /* 0: not given */
    const api_table_query *query; /* borrowed */
    json_t *table;       /* new, once compare_view returned 0 */
} compare_args;

static int compare_view(sqlite3 *db, void *arg, api_error *err)
{
    compare_args *a = arg;
    return compare_jobs(db, a->job_ids, a->count, a->baseline_id, a->query, &a->table, err);
}

static int svc_compare(void *self, const int64_t *job_ids, size_t count, int64_t baseline_id,
                       const api_table_query *query, json_t **table, api_error *err)
{
    service *svc = self;
    compare_args args = {.job_ids = job_ids, .count = count, .baseline_id = baseline_id, .query = query};
    if (store_read_snapshot(svc->store, compare_view, &args, err))
        return -1;
    *table = args.table;
    return 0;
}

static int svc_events(void *self, int64_t id, int run_index, json_t **out, api_error *err)
{
    service *svc = self;
    const jobkind *kind;
    if (job_kind(svc, id, &kind, err))
        return -1;
    return store_job_events(svc->store, kind, id, run_index, out, err);
}

/* The Chrome trace of a run (profile jobs). */
static int svc_trace(void *self, int64_t id, int run_index, json_t **out, api_error *err)
{
    service *svc = self;
    const jobkind *kind;
    if (job_kind(svc, id, &kind, err))
        return -1;
    return store_job_trace(svc->store, kind, id, run_index, out, err);
}

static int svc_system(void *self, json_t **out, api_error *err)
{
    (void)err;
    service *svc = self;
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    json_t *kinds = json_array();
    for (int i = 0; jobkinds[i]; i++)
        json_array_append_new(kinds, json_string(jobkinds[i]->name));
    json_t *sched = scheduler_describe(svc->scheduler);
    /* the database's schema version is this binary's latest migration once
     * store_open has succeeded (it applies every one up to it, and refuses a
     * newer database); store_schema_version would wait for the store's write
     * lock, which the scheduler can hold for the busy timeout (scheduler.h) */
    int schema_version = store_migrations_known();
    json_t *devices = json_array();
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(sched, "workers"), i, w)
    {
        json_t *device = json_object_get(w, "device");
        if (json_is_object(device))
            json_array_append(devices, device);
    }
    *out = json_pack("{s:s, s:s, s:f, s:f, s:s, s:i, s:I, s:o, s:o, s:O, s:i, s:b}", "version",
                     LMPERF_VERSION, "hostname", hostname, "started_at_unix", svc->started_unix, "uptime_s",
                     unix_now() - svc->started_unix, "database", svc->db_path, "schema_version",
                     schema_version, "queue_depth", (json_int_t)queue_length(svc->queue),
                     "kinds", kinds, "devices", devices, "workers", json_object_get(sched, "workers"),
                     "gpu_count", (int)json_integer_value(json_object_get(sched, "gpu_count")), "accepting",
                     svc->accepting);
    json_decref(sched);
    return 0;
}

static int svc_schema(void *self, const char *kind, json_t **out, api_error *err)
{
    (void)self;
    return spec_schema(kind, out, err);
}

static int svc_models(void *self, json_t **out, api_error *err)
{
    (void)self;
    (void)err;
    *out = models_describe();
    return 0;
}

static int svc_health(void *self, json_t **out, int *ready)
{
    service *svc = self;
    *ready = svc->accepting;
    *out = json_pack("{s:s, s:b, s:I}", "status", svc->accepting ? "ok" : "stopping", "accepting",
                     svc->accepting, "queue_depth", (json_int_t)queue_length(svc->queue));
    return 0;
}

static char *svc_metrics(void *self)
{
    service *svc = self;
    json_t *counts = NULL;
    store_job_counts(svc->store, &counts);
    json_t *sched = scheduler_describe(svc->scheduler);
    size_t cap = 4096;
    char *text = malloc(cap);
    if (!text) {
        json_decref(counts);
        json_decref(sched);
        return NULL;
    }
    size_t off = (size_t)snprintf(text, cap,
                                  "# HELP lmperf_up The daemon is running.\n# TYPE lmperf_up gauge\nlmperf_up 1\n"
                                  "# HELP lmperf_jobs Jobs in the database by status.\n# TYPE lmperf_jobs gauge\n");
    const char *status;
    json_t *n;
    json_object_foreach(counts, status, n)
    {
        off += (size_t)snprintf(text + off, cap - off, "lmperf_jobs{status=\"%s\"} %lld\n", status,
                                (long long)json_integer_value(n));
    }
    off += (size_t)snprintf(text + off, cap - off,
                            "# HELP lmperf_queue_depth Jobs waiting for a worker.\n# TYPE lmperf_queue_depth gauge\n"
                            "lmperf_queue_depth %zu\n"
                            "# HELP lmperf_worker_busy Worker busy (1) or not (0).\n# TYPE lmperf_worker_busy gauge\n",
                            queue_length(svc->queue));
    size_t i;
    json_t *w;
    long long restarts = 0;
    json_array_foreach(json_object_get(sched, "workers"), i, w)
    {
        const char *state = json_string_value(json_object_get(w, "state"));
        restarts += json_integer_value(json_object_get(w, "restarts"));
        if (off < cap)
            off += (size_t)snprintf(text + off, cap - off, "lmperf_worker_busy{worker=\"%zu\"} %d\n", i,
                                    state && strcmp(state, "busy") == 0);
    }
    if (off < cap)
        snprintf(text + off, cap - off,
                 "# HELP lmperf_worker_restarts_total Worker processes restarted.\n"
                 "# TYPE lmperf_worker_restarts_total counter\nlmperf_worker_restarts_total %lld\n",
                 restarts);
    json_decref(counts);
    json_decref(sched);
    return text;
}

void service_bind(service *svc, api_backend *backend)
{
    *backend = (api_backend){
        .self = svc,
        .job_submit = svc_submit,
        .job_get = svc_get,
        .job_list = svc_list,
        .job_cancel = svc_cancel,
        .job_table = svc_table,
        .jobs_compare = svc_compare,
        .job_events = svc_events,
        .job_trace = svc_trace,
        .system = svc_system,
        .models = svc_models,
        .schema = svc_schema,
        .health = svc_health,
        .metrics = svc_metrics,
    };
}
