/* Scheduler thread: worker processes, dispatch, deadlines, restarts. */
#include "scheduler.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device.h"
#include "job_set.h"
#include "jobkind.h"
#include "lineio.h"
#include "log.h"

#define MAX_WORKERS 16
#define MAX_CANCEL_REQUESTS MAX_WORKERS /* at most one per job on a worker: a job's stays until it leaves */
#define RESTART_BACKOFF_MAX_S 10.0
#define STOP_WORKER_WAIT_S 5.0
#define DB_RETRY_MAX_S 30.0 /* the longest wait between tries of a write the database refused */

typedef enum worker_state {
    W_EMPTY,    /* no process (waiting for restart_at) */
    W_STARTING, /* forked, no hello yet */
    W_IDLE,
    W_BUSY,     /* running job_id, leader */
    W_RESERVED, /* held for job_id run by another worker (multi-GPU jobs) */
    W_DYING,    /* killed; waiting for its socket to close */
} worker_state;

static const char *const worker_state_names[] = {"empty", "starting", "idle", "busy", "reserved",
                                                 "dying"};

typedef struct worker_slot {
    int want;             /* DEVICE_AUTO, DEVICE_CPU or a GPU index */
    pid_t pid;
    int fd;
    worker_state state;
    line_reader reader;
    json_t *device;       /* from hello, owned */
    int64_t job_id;       /* BUSY / RESERVED */
    const jobkind *kind;  /* BUSY */
    json_t *spec;         /* BUSY, owned */
    double started;       /* monotonic s */
    double deadline;      /* monotonic s */
    double cancel_deadline; /* 0: no cancel requested */
    double restart_at;
    int quick_failures;   /* consecutive exits soon after start */
    int restarts;         /* after a crash, kill or timeout */
    int recycled;         /* replaced after a job of a fresh_worker_after kind */
    int recycle_pending;  /* replace once the current messages are handled */
} worker_slot;

/* A job's run or end that the database refused for now (STORE_RETRY: a
 * full disk, another writer holding the lock): kept, in the order the writes
 * came, and tried again until the database takes it, so that a job is never
 * left "running" or "queued" in the database while the scheduler has moved
 * on. */
typedef struct pending_write {
    struct pending_write *next;
    int64_t job_id;
    int run_index;        /* a run's index; -1: the job's end */
    const jobkind *kind;  /* run */
    json_t *spec;         /* run, owned */
    json_t *run;          /* run, owned */
    char *status, *error; /* end, owned (error may be NULL) */
    json_t *result;       /* end, owned, may be NULL */
} pending_write;

/* DESIGN (threads): the scheduler thread alone reads and writes the fields
 * from `workers` to `db_refusals`, with no lock: it is the only thread that
 * touches them. It writes to SQLite, and a write can wait out the store's busy
 * timeout (10 s) while another process holds the database's write lock; so
 * the functions called from other threads (HTTP threads, the main thread)
 * never touch those fields. They use only the fields under `shared`, a lock
 * that every thread holds for memory operations alone, never across a system
 * call that can block, SQLite or a worker's socket: what GET /v1/system shows
 * (a copy the thread publishes before each poll), the jobs on a worker, the
 * cancel requests, the stop flags, and whether the database refuses the
 * thread's writes. */
struct scheduler {
    scheduler_config config; /* set before the thread starts, then read-only */
    store *store;
    job_queue *queue;
    pthread_t thread;
    int wake_pipe[2];
    /* the scheduler thread's own state */
    worker_slot workers[MAX_WORKERS];
    int worker_count;
    int gpu_count;
    int stopping;      /* the thread's copy of stop_requested, taken at each loop turn */
    pending_write *pending, **pending_tail; /* oldest first; NULL: the database took every write */
    double db_retry_at;                     /* monotonic s: no write or dispatch before (0: none) */
    int db_refusals;                        /* consecutive STORE_RETRY answers, for the backoff */
    /* shared with other threads, under `shared` */
    pthread_mutex_t shared;
    json_t *view;          /* owned: {"workers", "gpu_count"} as the thread last published it */
    int has_gpu;           /* scheduler_has_gpu's answer: -1, 0 or 1 */
    job_set *on_worker;        /* owned (MAX_WORKERS): the jobs a BUSY worker runs, or is about to (see dispatch) */
    job_set *cancel_requested; /* owned (MAX_CANCEL_REQUESTS): jobs on a worker that a DELETE asked to stop;
                                  each one leaves with its job (on_worker_remove), sent or not */
    int stop_requested;    /* scheduler_begin_stop was called */
    int abort_running;     /* scheduler_abort_running asked: cancel every running job now */
    int db_refusing;       /* the thread's db_retry_at is set: the database refuses its writes */
    int ended;             /* the thread has left its loop and reaped the workers */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --- state shared with other threads (the `shared` lock) --------------------------- */

/* Adds job_id to the jobs on a worker (scheduler_request_cancel's answer).
 * It fits: a job is on a worker only while it holds one of MAX_WORKERS. */
static void on_worker_add(scheduler *s, int64_t job_id)
{
    pthread_mutex_lock(&s->shared);
    int rc = job_set_add(s->on_worker, job_id);
    pthread_mutex_unlock(&s->shared);
    if (rc)
        log_error("scheduler", "job %lld: more jobs on workers than workers; a cancel of it will not find it",
                  (long long)job_id);
}

/* Removes job_id from the jobs on a worker, and its cancel request with it
 * (sent or not: a request never outlives its job on the worker). */
static void on_worker_remove(scheduler *s, int64_t job_id)
{
    pthread_mutex_lock(&s->shared);
    job_set_remove(s->on_worker, job_id);
    job_set_remove(s->cancel_requested, job_id);
    pthread_mutex_unlock(&s->shared);
}

/* Builds what GET /v1/system shows of the workers (new; NULL when out of
 * memory). Shares nothing with the worker slots: other threads read it. */
static json_t *build_view(scheduler *s)
{
    json_t *view = NULL;
    json_t *workers = json_array();
    for (int i = 0; workers && i < s->worker_count; i++) {
        worker_slot *w = &s->workers[i];
        json_t *o = json_pack("{s:i, s:s, s:i, s:o?, s:i, s:i, s:o}", "index", i, "state",
                              worker_state_names[w->state], "pid", (int)w->pid, "device",
                              w->device ? json_deep_copy(w->device) : NULL, "restarts", w->restarts, "recycled",
                              w->recycled, "job_id", w->job_id ? json_integer(w->job_id) : json_null());
        if (!o || json_array_append_new(workers, o)) /* steals o */
            goto out;
    }
    view = json_pack("{s:O, s:i}", "workers", workers, "gpu_count", s->gpu_count);
out:
    json_decref(workers);
    return view;
}

/* Publishes the workers' state for other threads (scheduler_describe,
 * scheduler_has_gpu). Out of memory, the last view stays. */
static void publish_view(scheduler *s)
{
    json_t *view = build_view(s);
    int want = s->workers[0].want; /* DEVICE_AUTO until the first worker says hello, then its GPU or DEVICE_CPU */
    pthread_mutex_lock(&s->shared);
    json_t *old = view ? s->view : NULL;
    if (view)
        s->view = view;
    s->has_gpu = want == DEVICE_AUTO ? -1 : want >= 0;
    pthread_mutex_unlock(&s->shared);
    json_decref(old);
}

/* --- worker processes ------------------------------------------------------------ */

static void spawn_worker(scheduler *s, int index)
{
    worker_slot *w = &s->workers[index];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        log_error("scheduler", "socketpair: %s", strerror(errno));
        w->restart_at = now_s() + 1.0;
        return;
    }
    char want[16];
    snprintf(want, sizeof want, "%d", w->want);
    char *const argv[] = {(char *)s->config.exe_path, "__worker", "--fd", "3", "--device", want, NULL};
    pid_t pid = fork();
    if (pid < 0) {
        log_error("scheduler", "fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        w->restart_at = now_s() + 1.0;
        return;
    }
    if (pid == 0) {
        /* child: only async-signal-safe calls until exec */
        if (dup2(sv[1], 3) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    w->pid = pid;
    w->fd = sv[0];
    w->state = W_STARTING;
    w->started = now_s();
    log_info("scheduler", "worker %d started (pid %d, device %s)", index, (int)pid,
             w->want == DEVICE_AUTO ? "auto" : w->want == DEVICE_CPU ? "cpu" : want);
}

/* Text for a waitpid status. */
static void describe_exit(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(buf, len, "ended");
}

/* Frees the workers job_id holds: its leader (BUSY) too unless only_reserved. */
static void release_job_workers_where(scheduler *s, int64_t job_id, int only_reserved)
{
    for (int i = 0; i < s->worker_count; i++) {
        worker_slot *w = &s->workers[i];
        if (((w->state == W_BUSY && !only_reserved) || w->state == W_RESERVED) && w->job_id == job_id) {
            w->state = W_IDLE;
            w->job_id = 0;
            w->kind = NULL;
            json_decref(w->spec);
            w->spec = NULL;
            w->cancel_deadline = 0;
        }
    }
}

static void release_job_workers(scheduler *s, int64_t job_id)
{
    release_job_workers_where(s, job_id, 0);
}

/* --- writes the database refused for now ------------------------------------------ */

static void pending_free(pending_write *p)
{
    if (!p)
        return;
    json_decref(p->spec);
    json_decref(p->run);
    free(p->status);
    free(p->error);
    json_decref(p->result);
    free(p);
}

/* Tries one write. Returns a store code. */
static int pending_apply(scheduler *s, const pending_write *p)
{
    if (p->run_index >= 0)
        return store_run_add(s->store, p->kind, p->job_id, p->run_index, p->spec, p->run);
    return store_job_finish(s->store, p->job_id, p->status, p->error, p->result);
}

static void pending_describe(const pending_write *p, char *buf, size_t len)
{
    if (p->run_index >= 0)
        snprintf(buf, len, "run %d", p->run_index);
    else
        snprintf(buf, len, "end (%s)", p->status);
}

/* The database refused a write (STORE_RETRY): no write or dispatch until a
 * backoff of 0.5 s doubling to DB_RETRY_MAX_S has passed. */
static void db_refused(scheduler *s)
{
    int n = s->db_refusals < 7 ? s->db_refusals : 7;
    double wait = 0.5 * (double)(1 << n);
    s->db_refusals++;
    s->db_retry_at = now_s() + (wait < DB_RETRY_MAX_S ? wait : DB_RETRY_MAX_S);
    pthread_mutex_lock(&s->shared);
    s->db_refusing = 1;
    pthread_mutex_unlock(&s->shared);
}

/* Records p (steals it): now when the database takes writes and none is
 * waiting, else after the waiting ones. A write refused for good
 * (STORE_ERROR, STORE_CONFLICT) is logged and dropped, as it would be later. */
static void record_write(scheduler *s, int64_t job_id, pending_write *p)
{
    if (!p) {
        log_error("scheduler", "job %lld: out of memory keeping a result to record", (long long)job_id);
        return;
    }
    char what[64];
    pending_describe(p, what, sizeof what);
    if (!s->pending && s->db_retry_at == 0) {
        int rc = pending_apply(s, p);
        if (rc != STORE_RETRY) {
            if (rc != STORE_OK)
                log_warn("scheduler", "job %lld: could not record its %s (%d)", (long long)job_id, what, rc);
            pending_free(p);
            return;
        }
        db_refused(s);
    }
    log_warn("scheduler", "job %lld: the database cannot be written now; its %s is kept and recorded when it can be",
             (long long)p->job_id, what);
    p->next = NULL;
    if (!s->pending)
        s->pending_tail = &s->pending;
    *s->pending_tail = p;
    s->pending_tail = &p->next;
}

/* Tries the waiting writes in order once the backoff has passed (force:
 * now, whatever the backoff). Returns 1 when none is left waiting. */
static int flush_pending(scheduler *s, int force)
{
    if (!s->db_retry_at)
        return 1;
    if (!force && now_s() < s->db_retry_at)
        return 0;
    while (s->pending) {
        pending_write *p = s->pending;
        int rc = pending_apply(s, p);
        if (rc == STORE_RETRY) {
            db_refused(s);
            return 0;
        }
        char what[64];
        pending_describe(p, what, sizeof what);
        if (rc == STORE_OK)
            log_info("scheduler", "job %lld: its %s is recorded now", (long long)p->job_id, what);
        else
            log_warn("scheduler", "job %lld: could not record its %s (%d)", (long long)p->job_id, what, rc);
        s->pending = p->next;
        pending_free(p);
    }
    s->pending_tail = &s->pending;
    s->db_retry_at = 0;
    s->db_refusals = 0;
    pthread_mutex_lock(&s->shared);
    s->db_refusing = 0;
    pthread_mutex_unlock(&s->shared);
    return 1;
}

/* A job's end as a pending write (new; NULL when out of memory). */
static pending_write *end_write(int64_t job_id, const char *status, const char *error, const json_t *result)
{
    pending_write *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->job_id = job_id;
    p->run_index = -1;
    p->status = strdup(status);
    p->error = error ? strdup(error) : NULL;
    p->result = result ? json_deep_copy(result) : NULL;
    if (!p->status || (error && !p->error) || (result && !p->result)) {
        pending_free(p);
        return NULL;
    }
    return p;
}

/* Ends the job a worker is running with status/error, and frees the workers
 * it held. Keeps the leader's state when it is dying. error and result are
 * borrowed and must not point into the worker's slot.
 *
 * The workers are freed, and shown freed to other threads, before the end is
 * written, which may wait (the store's busy timeout): a thread that reads the
 * job ended in the database then sees it on no worker, and a cancel that reads
 * it running there meanwhile gets "not on a worker" (scheduler_request_cancel)
 * and then the status the database has. */
static void finish_job(scheduler *s, worker_slot *w, const char *status, const char *error,
                       const json_t *result)
{
    int64_t job_id = w->job_id;
    if (!job_id)
        return;
    worker_state keep = w->state;
    release_job_workers(s, job_id);
    if (keep == W_DYING) { /* killed (kill_worker): release_job_workers skips it */
        w->state = W_DYING;
        w->job_id = 0;
        w->kind = NULL;
        json_decref(w->spec);
        w->spec = NULL;
        w->cancel_deadline = 0;
    }
    on_worker_remove(s, job_id);
    publish_view(s);
    record_write(s, job_id, end_write(job_id, status, error, result));
    log_info("scheduler", "job %lld %s%s%s", (long long)job_id, status, error ? ": " : "",
             error ? error : "");
}

/* Kills a worker (it will be reaped when its socket closes). */
static void kill_worker(worker_slot *w)
{
    if (w->pid > 0)
        kill(w->pid, SIGKILL);
    w->state = W_DYING;
}

/* Ends a worker's process (killed if it still runs, then reaped) and closes
 * its socket; the slot keeps its job and state for the caller to settle.
 * reason (may be NULL) gets how the process ended. Returns the old pid. */
static pid_t end_process(worker_slot *w, char *reason, size_t len)
{
    pid_t pid = w->pid;
    int status = 0;
    if (pid > 0) {
        kill(pid, SIGKILL); /* a closed socket does not mean it exited */
        if (waitpid(pid, &status, 0) == pid && reason)
            describe_exit(status, reason, len);
    }
    close(w->fd);
    line_reader_free(&w->reader);
    w->pid = 0;
    w->fd = -1;
    w->recycle_pending = 0;
    return pid;
}

/* The worker's socket closed or broke: reap it, fail its job, plan a restart. */
static void reap_worker(scheduler *s, int index)
{
    worker_slot *w = &s->workers[index];
    char reason[160] = "ended";
    pid_t pid = end_process(w, reason, sizeof reason);
    log_warn("scheduler", "worker %d (pid %d) %s", index, (int)pid, reason);
    if (w->job_id && w->state == W_BUSY) {
        char error[256];
        snprintf(error, sizeof error, "worker crashed: %s", reason);
        w->state = W_DYING; /* its process has ended: finish_job does not show it idle */
        finish_job(s, w, "failed", error, NULL);
    }
    w->job_id = 0;
    double lived = now_s() - w->started;
    w->quick_failures = lived < 5.0 ? w->quick_failures + 1 : 0;
    double backoff = w->quick_failures ? 0.25 * (1 << (w->quick_failures < 6 ? w->quick_failures : 6)) : 0;
    w->restart_at = now_s() + (backoff > RESTART_BACKOFF_MAX_S ? RESTART_BACKOFF_MAX_S : backoff);
    w->state = W_EMPTY;
    w->restarts++;
}

/* Replaces an idle worker by a fresh process right away (not a failure: no
 * backoff, not counted in restarts). */
static void recycle_worker(scheduler *s, int index)
{
    worker_slot *w = &s->workers[index];
    pid_t pid = end_process(w, NULL, 0);
    log_info("scheduler", "worker %d (pid %d) replaced by a fresh process", index, (int)pid);
    w->state = W_EMPTY;
    w->restart_at = now_s();
    w->recycled++;
}

/* --- messages from workers -------------------------------------------------------- */

static void handle_hello(scheduler *s, int index, json_t *msg)
{
    worker_slot *w = &s->workers[index];
    json_decref(w->device);
    w->device = json_incref(json_object_get(msg, "device"));
    w->state = W_IDLE;
    int gpu_index = (int)json_integer_value(json_object_get(w->device, "gpu_index"));
    int gpu_count = (int)json_integer_value(json_object_get(msg, "gpu_count"));
    if (w->want == DEVICE_AUTO) {
        /* the first worker tells how many GPUs there are */
        w->want = gpu_index;
        s->gpu_count = gpu_index >= 0 ? gpu_count : 0;
        int use = s->gpu_count;
        if (s->config.max_gpus > 0 && use > s->config.max_gpus)
            use = s->config.max_gpus;
        if (use > MAX_WORKERS)
            use = MAX_WORKERS;
        for (int i = 1; i < use; i++) {
            s->workers[i] = (worker_slot){.want = i, .fd = -1, .state = W_EMPTY};
            s->worker_count = i + 1;
        }
    }
    log_info("scheduler", "worker %d ready: %s", index,
             json_string_value(json_object_get(w->device, "name")));
}

static void handle_message(scheduler *s, int index, json_t *msg)
{
    worker_slot *w = &s->workers[index];
    if (json_is_string(msg)) {
        log_error("scheduler", "worker %d: %s", index, json_string_value(msg));
        return;
    }
    const char *type = json_string_value(json_object_get(msg, "type"));
    json_int_t job_id = json_integer_value(json_object_get(msg, "job_id"));
    if (!type)
        return;
    if (strcmp(type, "hello") == 0) {
        handle_hello(s, index, msg);
        return;
    }
    if (strcmp(type, "fatal") == 0) {
        log_error("scheduler", "worker %d cannot start: %s", index,
                  json_string_value(json_object_get(msg, "error")));
        return;
    }
    if (w->state != W_BUSY || job_id != w->job_id)
        return; /* a message about a job this worker no longer owns (timed out) */
    if (strcmp(type, "progress") == 0) {
        store_job_progress(s->store, job_id, json_number_value(json_object_get(msg, "fraction")),
                           json_string_value(json_object_get(msg, "message")));
    } else if (strcmp(type, "release_gpus") == 0) {
        /* the leader goes on alone (runctx_release_gpus): the others take jobs again */
        release_job_workers_where(s, job_id, 1);
        log_info("scheduler", "job %lld gave back the workers reserved beside its own", (long long)job_id);
    } else if (strcmp(type, "run") == 0) {
        pending_write *p = calloc(1, sizeof *p);
        if (p) {
            p->job_id = job_id;
            p->run_index = (int)json_integer_value(json_object_get(msg, "index"));
            p->kind = w->kind;
            p->spec = json_incref(w->spec);
            p->run = json_incref(json_object_get(msg, "run"));
            if (p->run_index < 0)
                p->run_index = 0;
        }
        record_write(s, job_id, p);
    } else {
        const jobkind *kind = w->kind; /* finish_job forgets it */
        if (strcmp(type, "done") == 0)
            finish_job(s, w, "succeeded", NULL, json_object_get(msg, "result"));
        else if (strcmp(type, "failed") == 0)
            finish_job(s, w, "failed", json_string_value(json_object_get(msg, "error")), NULL);
        else if (strcmp(type, "cancelled") == 0)
            finish_job(s, w, "cancelled", "cancelled while running", NULL);
        else
            return;
        if (kind && kind->fresh_worker_after && w->state == W_IDLE)
            w->recycle_pending = 1; /* read_worker replaces it once the messages are read */
    }
}

static void read_worker(scheduler *s, int index)
{
    worker_slot *w = &s->workers[index];
    for (;;) {
        long n = line_reader_fill(&w->reader, w->fd);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || n == -2) {
            json_t *msg;
            while ((msg = line_reader_next(&w->reader))) { /* what it said before it went */
                handle_message(s, index, msg);
                json_decref(msg);
            }
            reap_worker(s, index);
            return;
        }
        json_t *msg;
        while ((msg = line_reader_next(&w->reader))) {
            handle_message(s, index, msg);
            json_decref(msg);
        }
        if (w->recycle_pending) {
            recycle_worker(s, index);
            return;
        }
        if (n < 0)
            return; /* EAGAIN: all read */
    }
}

/* --- dispatch --------------------------------------------------------------------- */

static int usable_workers(scheduler *s)
{
    int n = 0;
    for (int i = 0; i < s->worker_count; i++)
        n += s->workers[i].state != W_EMPTY || s->workers[i].want != DEVICE_AUTO;
    return n ? n : 1;
}

/* Sends queued jobs to idle workers, in FIFO order: the head waits for as
 * many idle workers as it needs (no overtaking). A job leaves the queue once
 * the database has it running (or it is no longer queued there), removed by
 * id: a cancel may take the head away meanwhile. While the database refuses
 * writes (db_retry_at) nothing is dispatched: the head stays queued. */
static void dispatch(scheduler *s)
{
    int64_t id;
    while (!s->stopping && !s->db_retry_at && queue_peek(s->queue, &id)) {
        json_t *job = NULL;
        int got = store_job_get(s->store, id, 0, &job);
        if (got != STORE_OK) {
            if (got != STORE_NOT_FOUND) {
                db_refused(s); /* a read error: try again later, keeping the job */
                return;
            }
            queue_remove(s->queue, id);
            continue;
        }
        const char *status = json_string_value(json_object_get(job, "status"));
        const jobkind *kind = jobkind_find(json_string_value(json_object_get(job, "kind")));
        json_t *spec = json_object_get(job, "spec");
        if (strcmp(status, "queued") != 0 || !kind) {
            int started = !kind && strcmp(status, "queued") == 0 ? store_job_start(s->store, id, -1, NULL) : STORE_OK;
            json_decref(job);
            if (started == STORE_RETRY) {
                db_refused(s);
                return;
            }
            queue_remove(s->queue, id);
            if (!kind && started == STORE_OK)
                record_write(s, id, end_write(id, "failed", "unknown job kind", NULL));
            continue;
        }
        int need = kind->gpus_needed ? kind->gpus_needed(spec) : 1;
        int available = usable_workers(s);
        if (need > available)
            need = available; /* the runner reports points that need more as failed */
        if (need < 1)
            need = 1;
        int idle[MAX_WORKERS], idle_count = 0;
        for (int i = 0; i < s->worker_count && idle_count < need; i++)
            if (s->workers[i].state == W_IDLE)
                idle[idle_count++] = i;
        if (idle_count < need) {
            json_decref(job);
            return;
        }
        worker_slot *leader = &s->workers[idle[0]];
        char device[32];
        device_label(leader->device, device, sizeof device);
        /* The workers are taken, and shown taken to other threads, before the
         * database says "running", and given back if it does not: a thread
         * that reads the job running there then sees it on its workers, and
         * a cancel finds it (scheduler_request_cancel; the request is sent at
         * the next loop turn). Meanwhile the view may show a job still
         * queued in the database on its workers. */
        leader->state = W_BUSY;
        leader->job_id = id;
        leader->kind = kind;
        leader->spec = json_incref(spec);
        leader->cancel_deadline = 0;
        for (int k = 1; k < need; k++) {
            s->workers[idle[k]].state = W_RESERVED;
            s->workers[idle[k]].job_id = id;
        }
        on_worker_add(s, id);
        publish_view(s);
        int started = store_job_start(s->store, id, idle[0], device);
        if (started != STORE_OK) {
            release_job_workers(s, id);
            on_worker_remove(s, id);
        }
        if (started == STORE_RETRY) {
            log_warn("scheduler", "job %lld: the database cannot be written now; the job stays queued",
                     (long long)id);
            json_decref(job);
            db_refused(s);
            return;
        }
        queue_remove(s->queue, id);
        if (started != STORE_OK) {
            json_decref(job); /* cancelled meanwhile */
            continue;
        }
        store_env_record(s->store, id, leader->device);
        json_t *gpus = json_array(); /* the reserved GPUs, the leader's first */
        for (int k = 0; k < need; k++) {
            int gpu = (int)json_integer_value(json_object_get(s->workers[idle[k]].device, "gpu_index"));
            if (gpu >= 0)
                json_array_append_new(gpus, json_integer(gpu));
        }
        json_t *line = json_pack("{s:s, s:I, s:O, s:O, s:o}", "type", "job", "job_id", (json_int_t)id, "kind",
                                 json_object_get(job, "kind"), "spec", spec, "gpus", gpus);
        double timeout = json_number_value(json_object_get(job, "timeout_s"));
        leader->deadline = now_s() + (timeout > 0 ? timeout : JOB_DEFAULT_TIMEOUT_S);
        log_info("scheduler", "job %lld (%s) -> worker %d (%s)", (long long)id, kind->name, idle[0], device);
        if (line_write(leader->fd, line)) {
            kill_worker(leader); /* first: finish_job keeps it dying, not idle */
            finish_job(s, leader, "failed", "could not send the job to its worker", NULL);
        }
        json_decref(line);
        json_decref(job);
    }
}

/* --- deadlines and cancellation ------------------------------------------------------- */

static void check_deadlines(scheduler *s)
{
    double now = now_s();
    for (int i = 0; i < s->worker_count; i++) {
        worker_slot *w = &s->workers[i];
        if (w->state != W_BUSY)
            continue;
        if (now > w->deadline) {
            char error[160];
            double timeout = json_number_value(json_object_get(w->spec, "timeout_s"));
            snprintf(error, sizeof error, "timed out after %g s (timeout_s); worker restarted",
                     timeout > 0 ? timeout : (double)JOB_DEFAULT_TIMEOUT_S);
            kill_worker(w);
            finish_job(s, w, "failed", error, NULL);
        } else if (w->cancel_deadline > 0 && now > w->cancel_deadline) {
            kill_worker(w);
            finish_job(s, w, "cancelled", "cancelled: the job did not stop in time, its worker was restarted",
                       NULL);
        }
    }
}

/* Sends the cancel requests that scheduler_request_cancel noted to the
 * workers running those jobs, once each (cancel_deadline set). A request
 * stays noted until its job leaves its worker (on_worker_remove). */
static void process_cancel_requests(scheduler *s)
{
    int asked[MAX_WORKERS];
    pthread_mutex_lock(&s->shared);
    for (int i = 0; i < s->worker_count; i++) {
        const worker_slot *w = &s->workers[i];
        asked[i] = w->state == W_BUSY && w->cancel_deadline == 0 && job_set_contains(s->cancel_requested, w->job_id);
    }
    pthread_mutex_unlock(&s->shared);
    for (int i = 0; i < s->worker_count; i++) {
        worker_slot *w = &s->workers[i];
        if (!asked[i])
            continue;
        json_t *line = json_pack("{s:s, s:I}", "type", "cancel", "job_id", (json_int_t)w->job_id);
        line_write(w->fd, line);
        json_decref(line);
        w->cancel_deadline = now_s() + s->config.cancel_grace_s;
        log_info("scheduler", "job %lld: cancel sent to worker %d", (long long)w->job_id, i);
    }
}

/* Cancels every running job at once: its worker killed, the job 'cancelled'
 * as when a cancel's grace runs out. Its runs stored so far stay. */
static void abort_running_jobs(scheduler *s)
{
    for (int i = 0; i < s->worker_count; i++) {
        worker_slot *w = &s->workers[i];
        if (w->state != W_BUSY)
            continue;
        kill_worker(w);
        finish_job(s, w, "cancelled", "cancelled: the daemon was stopped (a second SIGINT/SIGTERM), its worker killed",
                   NULL);
    }
}

/* --- the thread ---------------------------------------------------------------------- */

static int any_busy(scheduler *s)
{
    for (int i = 0; i < s->worker_count; i++)
        if (s->workers[i].state == W_BUSY)
            return 1;
    return 0;
}

static void *scheduler_thread(void *arg)
{
    scheduler *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->shared);
        int abort_now = s->abort_running;
        s->abort_running = 0;
        s->stopping = s->stop_requested;
        pthread_mutex_unlock(&s->shared);
        if (abort_now)
            abort_running_jobs(s);
        if (s->stopping && !any_busy(s))
            break;
        double now = now_s();
        double next = now + 1.0;
        struct pollfd pfds[MAX_WORKERS + 1];
        int owner[MAX_WORKERS + 1];
        int n = 0;
        pfds[n] = (struct pollfd){.fd = s->wake_pipe[0], .events = POLLIN};
        owner[n++] = -1;
        for (int i = 0; i < s->worker_count; i++) {
            worker_slot *w = &s->workers[i];
            if (w->state == W_EMPTY) {
                if (w->restart_at <= now && !s->stopping)
                    spawn_worker(s, i);
                else if (w->restart_at < next)
                    next = w->restart_at;
            }
            if (w->state == W_EMPTY)
                continue;
            if (w->state == W_BUSY) {
                if (w->deadline < next)
                    next = w->deadline;
                if (w->cancel_deadline > 0 && w->cancel_deadline < next)
                    next = w->cancel_deadline;
            }
            pfds[n] = (struct pollfd){.fd = w->fd, .events = POLLIN};
            owner[n++] = i;
        }
        int timeout_ms = (int)((next - now) * 1000.0) + 1;
        if (timeout_ms < 0)
            timeout_ms = 0;
        publish_view(s);
        int ready = poll(pfds, (nfds_t)n, timeout_ms);
        pthread_mutex_lock(&s->shared); /* a stop asked while it polled: no dispatch below */
        s->stopping = s->stop_requested;
        pthread_mutex_unlock(&s->shared);
        if (ready < 0 && errno != EINTR)
            log_error("scheduler", "poll: %s", strerror(errno));
        for (int k = 0; ready > 0 && k < n; k++) {
            if (!pfds[k].revents)
                continue;
            if (owner[k] < 0) {
                char drain[64];
                while (read(s->wake_pipe[0], drain, sizeof drain) > 0)
                    ;
            } else {
                read_worker(s, owner[k]);
            }
        }
        process_cancel_requests(s);
        check_deadlines(s);
        flush_pending(s, 0);
        dispatch(s);
    }
    /* what the database still refuses is lost here: the next start marks
     * those jobs interrupted (still running there) or runs them (queued) */
    if (!flush_pending(s, 1))
        for (pending_write *p = s->pending; p; p = p->next) {
            char what[64];
            pending_describe(p, what, sizeof what);
            log_error("scheduler", "job %lld: its %s could not be recorded before the daemon stopped",
                      (long long)p->job_id, what);
        }
    while (s->pending) {
        pending_write *p = s->pending;
        s->pending = p->next;
        pending_free(p);
    }
    /* stop: close sockets (workers exit on end of file), reap them; every
     * slot, an empty one too (its process ended, its restart not due), gives
     * up what it holds before the last view is built from the slots */
    for (int i = 0; i < s->worker_count; i++) {
        worker_slot *w = &s->workers[i];
        if (w->state != W_EMPTY) {
            close(w->fd);
            double give_up = now_s() + STOP_WORKER_WAIT_S;
            int status;
            while (waitpid(w->pid, &status, WNOHANG) == 0) {
                if (now_s() > give_up) {
                    kill(w->pid, SIGKILL);
                    waitpid(w->pid, &status, 0);
                    break;
                }
                usleep(20000);
            }
            line_reader_free(&w->reader);
        }
        json_decref(w->device);
        w->device = NULL;
        json_decref(w->spec);
        w->spec = NULL;
        w->state = W_EMPTY;
    }
    publish_view(s);
    pthread_mutex_lock(&s->shared);
    s->ended = 1;
    pthread_mutex_unlock(&s->shared);
    return NULL;
}

int scheduler_start(const scheduler_config *config, store *st, job_queue *queue, scheduler **out)
{
    scheduler *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->config = *config;
    if (s->config.cancel_grace_s <= 0)
        s->config.cancel_grace_s = 30.0;
    s->store = st;
    s->queue = queue;
    s->pending_tail = &s->pending;
    s->on_worker = job_set_create(MAX_WORKERS);
    s->cancel_requested = job_set_create(MAX_CANCEL_REQUESTS);
    if (!s->on_worker || !s->cancel_requested) {
        job_set_free(s->on_worker);
        job_set_free(s->cancel_requested);
        free(s);
        return -1;
    }
    pthread_mutex_init(&s->shared, NULL);
    if (pipe2(s->wake_pipe, O_CLOEXEC | O_NONBLOCK)) {
        pthread_mutex_destroy(&s->shared);
        job_set_free(s->on_worker);
        job_set_free(s->cancel_requested);
        free(s);
        return -1;
    }
    s->workers[0] = (worker_slot){.want = config->cpu_only ? DEVICE_CPU : DEVICE_AUTO, .fd = -1};
    s->worker_count = 1;
    publish_view(s); /* before the thread starts: nothing else runs yet */
    if (pthread_create(&s->thread, NULL, scheduler_thread, s)) {
        close(s->wake_pipe[0]);
        close(s->wake_pipe[1]);
        json_decref(s->view);
        pthread_mutex_destroy(&s->shared);
        job_set_free(s->on_worker);
        job_set_free(s->cancel_requested);
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void scheduler_wake(scheduler *s)
{
    char byte = 1;
    if (write(s->wake_pipe[1], &byte, 1) < 0 && errno != EAGAIN)
        log_warn("scheduler", "wake: %s", strerror(errno));
}

/* Answers from the jobs on a worker (on_worker), not from the slots: the
 * scheduler thread may be waiting on the database. on_worker holds a job from
 * just before the database says "running" (dispatch) until just before its
 * end is written (finish_job), so a caller that read "running" there gets
 * SCHEDULER_CANCEL_SENT while a worker runs the job, and
 * SCHEDULER_CANCEL_NOT_RUNNING once it has ended, whether or not its end is
 * recorded yet. The request is noted in cancel_requested, under the same
 * lock, so it leaves with the job whether or not it was sent. */
int scheduler_request_cancel(scheduler *s, int64_t job_id)
{
    pthread_mutex_lock(&s->shared);
    int rc = SCHEDULER_CANCEL_NOT_RUNNING;
    if (job_set_contains(s->on_worker, job_id))
        rc = job_set_add(s->cancel_requested, job_id) == 0 ? SCHEDULER_CANCEL_SENT : SCHEDULER_CANCEL_FULL;
    pthread_mutex_unlock(&s->shared);
    if (rc == SCHEDULER_CANCEL_SENT)
        scheduler_wake(s);
    return rc;
}

int scheduler_cancel_capacity(void)
{
    return MAX_CANCEL_REQUESTS;
}

int scheduler_db_refusing(scheduler *s)
{
    pthread_mutex_lock(&s->shared);
    int refusing = s->db_refusing;
    pthread_mutex_unlock(&s->shared);
    return refusing;
}

int scheduler_has_gpu(scheduler *s)
{
    pthread_mutex_lock(&s->shared);
    int has_gpu = s->has_gpu;
    pthread_mutex_unlock(&s->shared);
    return has_gpu;
}

/* A copy of the view the thread published before its last poll: the
 * workers' state at most one loop turn old. */
json_t *scheduler_describe(scheduler *s)
{
    pthread_mutex_lock(&s->shared);
    json_t *out = json_deep_copy(s->view);
    int stopping = s->stop_requested;
    pthread_mutex_unlock(&s->shared);
    if (out && json_object_set_new(out, "stopping", json_boolean(stopping))) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

void scheduler_begin_stop(scheduler *s)
{
    pthread_mutex_lock(&s->shared);
    s->stop_requested = 1;
    pthread_mutex_unlock(&s->shared);
    scheduler_wake(s);
}

int scheduler_stopped(scheduler *s)
{
    pthread_mutex_lock(&s->shared);
    int ended = s->ended;
    pthread_mutex_unlock(&s->shared);
    return ended;
}

void scheduler_abort_running(scheduler *s)
{
    pthread_mutex_lock(&s->shared);
    s->abort_running = 1;
    pthread_mutex_unlock(&s->shared);
    scheduler_wake(s);
}

void scheduler_stop(scheduler *s)
{
    if (!s)
        return;
    scheduler_begin_stop(s);
    pthread_join(s->thread, NULL);
    close(s->wake_pipe[0]);
    close(s->wake_pipe[1]);
    json_decref(s->view);
    pthread_mutex_destroy(&s->shared);
    job_set_free(s->on_worker);
    job_set_free(s->cancel_requested);
    free(s);
}
