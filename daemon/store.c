/* SQLite store: migrations, job state transitions, runs, environments. */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "schema_embedded.h"

#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
#define BUSY_TIMEOUT_MS 10000

struct store {
    int lock_fd; /* the database file, flock()ed exclusively while the store is open; -1: none */
    sqlite3 *writer;
    sqlite3 *reader;
    pthread_mutex_t write_lock;
    pthread_mutex_t read_lock;
};

static const char *const job_statuses[] = {"queued", "running", "succeeded", "failed",
                                           "cancelled", "interrupted", NULL};

int store_status_known(const char *status)
{
    for (int i = 0; status && job_statuses[i]; i++)
        if (strcmp(job_statuses[i], status) == 0)
            return 1;
    return 0;
}

void store_status_names(char *buf, size_t len)
{
    api_join_names(job_statuses, buf, len);
}

/* --- migrations -------------------------------------------------------------- */

/* Migration files are the embedded names matching NNNN_*.sql; returns NNNN,
 * or 0 for any other file. PRAGMA user_version holds the highest applied. */
static int migration_number(const char *name)
{
    size_t len = strlen(name);
    if (len > 9 && name[4] == '_' && strspn(name, "0123456789") == 4 && strcmp(name + len - 4, ".sql") == 0 &&
        !strchr(name, '/'))
        return atoi(name);
    return 0;
}

int store_migrations_known(void)
{
    int highest = 0;
    for (const schema_file *f = schema_files; f->name; f++)
        if (migration_number(f->name) > highest)
            highest = migration_number(f->name);
    return highest;
}

static int user_version(sqlite3 *db)
{
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

static int migrate(sqlite3 *db, char *errbuf, size_t errlen)
{
    int have = user_version(db);
    int known = store_migrations_known();
    if (have < 0) {
        snprintf(errbuf, errlen, "reading user_version: %s", sqlite3_errmsg(db));
        return -1;
    }
    if (have > known) {
        snprintf(errbuf, errlen, "its schema version %d is newer than this lmperfd's (%d): a newer lmperfd made it",
                 have, known);
        return -1;
    }
    /* apply every migration numbered above user_version, lowest first */
    for (int applied = have;;) {
        const schema_file *next = NULL;
        for (const schema_file *f = schema_files; f->name; f++) {
            int n = migration_number(f->name);
            if (n > applied && (!next || n < migration_number(next->name)))
                next = f;
        }
        if (!next)
            break;
        const schema_file *f = next;
        applied = migration_number(f->name);
        char *msg = NULL;
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", applied);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, f->text, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, pragma, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(errbuf, errlen, "migration %s: %s", f->name, msg ? msg : sqlite3_errmsg(db));
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
        log_info("store", "applied migration %s", f->name);
    }
    return 0;
}

static int open_connection(const char *path, int flags, sqlite3 **out, char *errbuf, size_t errlen)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(errbuf, errlen, "%s", db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    sqlite3_exec(db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
    *out = db;
    return 0;
}

/* Why the file at path, which open() refused with err, cannot be a
 * database, in why. */
static void open_refused(const char *path, int err, char *why, size_t whylen)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
    struct stat st;
    if (err == ENOENT && stat(dir, &st) != 0) {
        snprintf(why, whylen, "its directory %.300s does not exist", dir);
    } else if (err == EISDIR) {
        snprintf(why, whylen, "it is a directory: a database is a file (e.g. %s/lmperf.db)", path);
    } else {
        snprintf(why, whylen, "%s", strerror(err));
    }
}

int store_open(const char *path, store **out, char *errbuf, size_t errlen)
{
    store *s = calloc(1, sizeof *s);
    char *msg = NULL, why[400];
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    s->lock_fd = -1;
    pthread_mutex_init(&s->write_lock, NULL);
    pthread_mutex_init(&s->read_lock, NULL);
    /* One daemon per database: a second one would mark the first one's running
     * jobs interrupted and run its queued jobs again. flock() is apart from
     * SQLite's own fcntl() locks, so readers (sqlite3 -readonly) are not held
     * up; the descriptor stays open until the connections are closed (closing
     * a descriptor of the file would drop SQLite's fcntl() locks). */
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        open_refused(path, errno, why, sizeof why);
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            snprintf(why, sizeof why, "it is in use by another lmperfd (stop it, or give this one its own --db)");
        else
            snprintf(why, sizeof why, "it cannot be locked: %s", strerror(errno));
        goto fail;
    }
    if (open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &s->writer, why, sizeof why))
        goto fail;
    if (sqlite3_exec(s->writer, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL", NULL, NULL,
                     &msg) != SQLITE_OK) {
        int code = sqlite3_errcode(s->writer);
        snprintf(why, sizeof why, "%s (SQLite: %s)",
                 code == SQLITE_NOTADB ? "it is not an SQLite database"
                 : code == SQLITE_READONLY || code == SQLITE_CANTOPEN ? "its journal (the -wal and -shm files beside "
                                                                        "it) cannot be written"
                                                                      : "its journal cannot be set up",
                 msg ? msg : sqlite3_errmsg(s->writer));
        sqlite3_free(msg);
        goto fail;
    }
    /* keep the -wal and -shm files after close so read-only clients can open */
    int persist = 1;
    sqlite3_file_control(s->writer, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    if (migrate(s->writer, why, sizeof why))
        goto fail;
    if (open_connection(path, SQLITE_OPEN_READONLY, &s->reader, why, sizeof why))
        goto fail;
    *out = s;
    return 0;
fail:
    snprintf(errbuf, errlen, "the database %s cannot be opened: %s", path, why);
    store_close(s);
    return -1;
}

void store_close(store *s)
{
    if (!s)
        return;
    if (s->reader)
        sqlite3_close(s->reader);
    if (s->writer) {
        sqlite3_wal_checkpoint_v2(s->writer, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        sqlite3_close(s->writer);
    }
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* after the connections: releases the flock */
    pthread_mutex_destroy(&s->write_lock);
    pthread_mutex_destroy(&s->read_lock);
    free(s);
}

int store_schema_version(store *s)
{
    pthread_mutex_lock(&s->write_lock);
    int v = user_version(s->writer);
    pthread_mutex_unlock(&s->write_lock);
    return v;
}

/* --- small statement helpers ---------------------------------------------------- */

/* Binds a NULL-able text. */
static void bind_text(sqlite3_stmt *st, int i, const char *text)
{
    if (text)
        sqlite3_bind_text(st, i, text, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Binds a JSON value as compact text (NULL when json is NULL). */
static void bind_json(sqlite3_stmt *st, int i, const json_t *json)
{
    char *text = json ? json_dumps(json, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    bind_text(st, i, text);
    free(text);
}

/* The store code of a failed SQLite call: STORE_RETRY for a refusal that can
 * pass (a full disk, another writer holding the lock past the busy timeout,
 * an I/O or memory error, a database made read-only), STORE_ERROR for the
 * rest (constraints, SQL errors). */
static int failure_code(int sqlite_rc)
{
    switch (sqlite_rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_FULL:
        return STORE_RETRY;
    default:
        return STORE_ERROR;
    }
}

/* Runs one prepared write; returns sqlite3_changes, or STORE_RETRY /
 * STORE_ERROR (failure_code). Logs failures. */
static int exec_write(sqlite3 *db, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    int changes = rc == SQLITE_DONE ? sqlite3_changes(db) : failure_code(rc);
    if (rc != SQLITE_DONE)
        log_error("store", "write failed: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return changes;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        log_error("store", "prepare failed: %s: %s", sqlite3_errmsg(db), sql);
        return NULL;
    }
    return st;
}

/* --- writes -------------------------------------------------------------------- */

int store_job_insert(store *s, const char *kind, const char *label, double timeout_s,
                     const json_t *spec, int64_t *id)
{
    int rc = STORE_ERROR;
    pthread_mutex_lock(&s->write_lock);
    sqlite3_stmt *st = prepare(s->writer,
                               "INSERT INTO jobs (kind, label, spec, status, created_at, timeout_s) "
                               "VALUES (?, ?, ?, 'queued', " NOW_SQL ", ?)");
    if (st) {
        bind_text(st, 1, kind);
        bind_text(st, 2, label);
        bind_json(st, 3, spec);
        sqlite3_bind_double(st, 4, timeout_s);
        int changes = exec_write(s->writer, st);
        if (changes == 1) {
            *id = sqlite3_last_insert_rowid(s->writer);
            rc = STORE_OK;
        } else if (changes < 0) {
            rc = changes;
        }
    }
    pthread_mutex_unlock(&s->write_lock);
    return rc;
}

int store_job_start(store *s, int64_t id, int worker, const char *device)
{
    pthread_mutex_lock(&s->write_lock);
    sqlite3_stmt *st = prepare(s->writer, "UPDATE jobs SET status = 'running', started_at = " NOW_SQL
                                          ", worker = ?, device = ? WHERE id = ? AND status = 'queued'");
    int changes = -1;
    if (st) {
        sqlite3_bind_int(st, 1, worker);
        bind_text(st, 2, device);
        sqlite3_bind_int64(st, 3, id);
        changes = exec_write(s->writer, st);
    }
    pthread_mutex_unlock(&s->write_lock);
    return changes < 0 ? changes : changes == 0 ? STORE_CONFLICT : STORE_OK;
}

int store_job_cancel_requested(store *s, int64_t id)
{
    pthread_mutex_lock(&s->write_lock);
    sqlite3_stmt *st = prepare(s->writer, "UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, " NOW_SQL
                                          ") WHERE id = ? AND status = 'running'");
    int changes = -1;
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        changes = exec_write(s->writer, st);
    }
    pthread_mutex_unlock(&s->write_lock);
    return changes < 0 ? changes : changes == 0 ? STORE_CONFLICT : STORE_OK;
}

int store_job_progress(store *s, int64_t id, double fraction, const char *message)
{
    pthread_mutex_lock(&s->write_lock);
    sqlite3_stmt *st = prepare(s->writer, "UPDATE jobs SET progress = ?, progress_message = ? "
                                          "WHERE id = ? AND status = 'running'");
    int changes = -1;
    if (st) {
        sqlite3_bind_double(st, 1, fraction < 0 ? 0 : fraction > 1 ? 1 : fraction);
        bind_text(st, 2, message);
        sqlite3_bind_int64(st, 3, id);
        changes = exec_write(s->writer, st);
    }
    pthread_mutex_unlock(&s->write_lock);
    return changes < 0 ? STORE_ERROR : STORE_OK;
}

int store_job_finish(store *s, int64_t id, const char *status, const char *error,
                     const json_t *result)
{
    pthread_mutex_lock(&s->write_lock);
    sqlite3_stmt *st = prepare(s->writer,
                               "UPDATE jobs SET status = ?, finished_at = " NOW_SQL ", error = ?, "
                               "result = ?, progress = CASE WHEN ? = 'succeeded' THEN 1 ELSE progress END "
                               "WHERE id = ? AND status = 'running'");
    int changes = -1;
    if (st) {
        bind_text(st, 1, status);
        bind_text(st, 2, error);
        bind_json(st, 3, result);
        bind_text(st, 4, status);
        sqlite3_bind_int64(st, 5, id);
        changes = exec_write(s->writer, st);
    }
    pthread_mutex_unlock(&s->write_lock);
    return changes < 0 ? changes : changes == 0 ? STORE_CONFLICT : STORE_OK;
}

int store_job_cancel_queued(store *s, int64_t id)
{
    pthread_mutex_lock(&s->write_lock);
    sqlite3_stmt *st = prepare(s->writer, "UPDATE jobs SET status = 'cancelled', finished_at = " NOW_SQL
                                          ", error = 'cancelled before it started' "
                                          "WHERE id = ? AND status = 'queued'");
    int changes = -1;
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        changes = exec_write(s->writer, st);
    }
    int exists = 0;
    if (changes == 0) {
        sqlite3_stmt *q = prepare(s->writer, "SELECT 1 FROM jobs WHERE id = ?");
        if (q) {
            sqlite3_bind_int64(q, 1, id);
            exists = sqlite3_step(q) == SQLITE_ROW;
            sqlite3_finalize(q);
        }
    }
    pthread_mutex_unlock(&s->write_lock);
    if (changes < 0)
        return changes;
    if (changes == 0)
        return exists ? STORE_CONFLICT : STORE_NOT_FOUND;
    return STORE_OK;
}

int store_run_add(store *s, const jobkind *kind, int64_t job_id, int run_index,
                  const json_t *spec, const json_t *run)
{
    int rc = STORE_ERROR;
    const char *status = json_string_value(json_object_get(run, "status"));
    const char *error = json_string_value(json_object_get(run, "error"));
    if (!status || (strcmp(status, "succeeded") != 0 && strcmp(status, "failed") != 0))
        status = "failed";
    pthread_mutex_lock(&s->write_lock);
    int sqlite_rc = sqlite3_exec(s->writer, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (sqlite_rc != SQLITE_OK) {
        log_error("store", "begin: %s", sqlite3_errmsg(s->writer));
        rc = failure_code(sqlite_rc);
        goto out;
    }
    sqlite3_stmt *st = prepare(s->writer, "INSERT INTO runs (job_id, run_index, status, error, "
                                          "created_at, result) VALUES (?, ?, ?, ?, " NOW_SQL ", ?)");
    if (!st)
        goto rollback;
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int(st, 2, run_index);
    bind_text(st, 3, status);
    bind_text(st, 4, error);
    if (kind && kind->bulky_fields) {
        json_t *lean = json_copy((json_t *)run); /* shallow: drop the bulky members only */
        for (const char *const *f = kind->bulky_fields; *f; f++)
            json_object_del(lean, *f);
        bind_json(st, 5, lean);
        json_decref(lean);
    } else {
        bind_json(st, 5, run);
    }
    int changes = exec_write(s->writer, st);
    if (changes != 1) {
        rc = changes < 0 ? changes : STORE_ERROR;
        goto rollback;
    }
    int64_t run_id = sqlite3_last_insert_rowid(s->writer);
    if (kind && kind->store_run && (strcmp(status, "succeeded") == 0 || kind->store_failed_runs)) {
        int krc = kind->store_run(s->writer, job_id, run_id, spec, run);
        if (krc != SQLITE_OK) {
            log_error("store", "%s store_run: %s", kind->name, sqlite3_errmsg(s->writer));
            rc = failure_code(krc);
            goto rollback;
        }
    }
    sqlite_rc = sqlite3_exec(s->writer, "COMMIT", NULL, NULL, NULL);
    if (sqlite_rc != SQLITE_OK) {
        log_error("store", "commit: %s", sqlite3_errmsg(s->writer));
        rc = failure_code(sqlite_rc);
        goto rollback;
    }
    rc = STORE_OK;
    goto out;
rollback:
    sqlite3_exec(s->writer, "ROLLBACK", NULL, NULL, NULL);
out:
    pthread_mutex_unlock(&s->write_lock);
    return rc;
}

int store_env_record(store *s, int64_t job_id, const json_t *env)
{
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    int gpu = (int)json_integer_value(json_object_get(env, "gpu_index"));
    pthread_mutex_lock(&s->write_lock);
    sqlite3_stmt *st = prepare(
        s->writer,
        "INSERT OR REPLACE INTO environments (job_id, hostname, lmperf_version, device_kind, gpu_index, "
        "device_name, device_memory_bytes, multiprocessors, compute_capability, clock_mhz, "
        "memory_clock_mhz, driver_version, cuda_runtime_version, cublas_version, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, " NOW_SQL ")");
    int changes = -1;
    if (st) {
        char cc[16];
        snprintf(cc, sizeof cc, "%lld.%lld", (long long)json_integer_value(json_object_get(env, "sm_major")),
                 (long long)json_integer_value(json_object_get(env, "sm_minor")));
        sqlite3_bind_int64(st, 1, job_id);
        bind_text(st, 2, hostname);
        bind_text(st, 3, LMPERF_VERSION);
        bind_text(st, 4, gpu >= 0 ? "cuda" : "cpu");
        if (gpu >= 0)
            sqlite3_bind_int(st, 5, gpu);
        else
            sqlite3_bind_null(st, 5);
        const char *name = json_string_value(json_object_get(env, "name"));
        bind_text(st, 6, name ? name : "unknown");
        sqlite3_bind_int64(st, 7, json_integer_value(json_object_get(env, "total_bytes")));
        sqlite3_bind_int(st, 8, (int)json_integer_value(json_object_get(env, "multiprocessors")));
        bind_text(st, 9, gpu >= 0 ? cc : NULL);
        sqlite3_bind_int(st, 10, (int)json_integer_value(json_object_get(env, "clock_mhz")));
        sqlite3_bind_int(st, 11, (int)json_integer_value(json_object_get(env, "memory_clock_mhz")));
        static const char *const text_fields[] = {"driver", "runtime", "cublas"};
        for (int i = 0; i < 3; i++) {
            const char *v = json_string_value(json_object_get(env, text_fields[i]));
            bind_text(st, 12 + i, v && v[0] ? v : NULL);
        }
        changes = exec_write(s->writer, st);
    }
    pthread_mutex_unlock(&s->write_lock);
    return changes == 1 ? STORE_OK : STORE_ERROR;
}

int store_recover(store *s, int64_t **ids, size_t *count)
{
    int rc = STORE_ERROR;
    int64_t *list = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&s->write_lock);
    char *msg = NULL;
    if (sqlite3_exec(s->writer,
                     "UPDATE jobs SET status = 'interrupted', finished_at = " NOW_SQL
                     ", error = 'the daemon stopped while this job was running' "
                     "WHERE status = 'running'",
                     NULL, NULL, &msg) != SQLITE_OK) {
        log_error("store", "recover: %s", msg);
        sqlite3_free(msg);
        goto out;
    }
    if (sqlite3_changes(s->writer) > 0)
        log_warn("store", "%d running job(s) marked interrupted", sqlite3_changes(s->writer));
    sqlite3_stmt *st = prepare(s->writer, "SELECT id FROM jobs WHERE status = 'queued' ORDER BY id");
    if (!st)
        goto out;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            int64_t *grown = realloc(list, cap * sizeof *list);
            if (!grown) {
                sqlite3_finalize(st);
                goto out;
            }
            list = grown;
        }
        list[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    *ids = list;
    *count = n;
    list = NULL;
    rc = STORE_OK;
out:
    pthread_mutex_unlock(&s->write_lock);
    free(list);
    return rc;
}

/* --- reads --------------------------------------------------------------------- */

#define JOB_COLUMNS                                                                             \
    "id, kind, label, spec, status, created_at, started_at, finished_at, timeout_s, progress, " \
    "progress_message, error, worker, device, result, cancel_requested_at"

static json_t *column_json_text(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    json_t *v = json_loads((const char *)sqlite3_column_text(st, i), JSON_DECODE_ANY, NULL);
    return v ? v : json_null();
}

static json_t *column_text(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    return json_string((const char *)sqlite3_column_text(st, i));
}

/* One row of JOB_COLUMNS as the API's job object. */
static json_t *job_from_row(sqlite3_stmt *st, int with_details)
{
    json_t *job = json_object();
    json_object_set_new(job, "id", json_integer(sqlite3_column_int64(st, 0)));
    json_object_set_new(job, "kind", column_text(st, 1));
    json_object_set_new(job, "label", column_text(st, 2));
    json_object_set_new(job, "status", column_text(st, 4));
    json_object_set_new(job, "created_at", column_text(st, 5));
    json_object_set_new(job, "started_at", column_text(st, 6));
    json_object_set_new(job, "finished_at", column_text(st, 7));
    json_object_set_new(job, "timeout_s", json_real(sqlite3_column_double(st, 8)));
    json_object_set_new(job, "progress",
                        json_pack("{s:f, s:o}", "fraction", sqlite3_column_double(st, 9), "message",
                                  column_text(st, 10)));
    json_object_set_new(job, "error", column_text(st, 11));
    json_object_set_new(job, "worker", sqlite3_column_type(st, 12) == SQLITE_NULL
                                           ? json_null()
                                           : json_integer(sqlite3_column_int(st, 12)));
    json_object_set_new(job, "device", column_text(st, 13));
    json_object_set_new(job, "cancel_requested_at", column_text(st, 15)); /* a running job's cancel under way */
    json_object_set_new(job, "spec", column_json_text(st, 3));
    if (with_details)
        json_object_set_new(job, "result", column_json_text(st, 14));
    return job;
}

static json_t *runs_of(sqlite3 *db, int64_t job_id)
{
    json_t *runs = json_array();
    sqlite3_stmt *st = prepare(db, "SELECT id, run_index, status, error, created_at, result FROM runs "
                                   "WHERE job_id = ? ORDER BY run_index");
    if (!st)
        return runs;
    sqlite3_bind_int64(st, 1, job_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *run = column_json_text(st, 5);
        if (!json_is_object(run)) {
            json_decref(run);
            run = json_object();
        }
        json_object_set_new(run, "run_id", json_integer(sqlite3_column_int64(st, 0)));
        json_object_set_new(run, "index", json_integer(sqlite3_column_int(st, 1)));
        json_object_set_new(run, "status", column_text(st, 2));
        json_object_set_new(run, "error", column_text(st, 3));
        json_object_set_new(run, "created_at", column_text(st, 4));
        json_array_append_new(runs, run);
    }
    sqlite3_finalize(st);
    return runs;
}

static json_t *environment_of(sqlite3 *db, int64_t job_id)
{
    sqlite3_stmt *st = prepare(db, "SELECT * FROM environments WHERE job_id = ?");
    json_t *env = json_null();
    if (!st)
        return env;
    sqlite3_bind_int64(st, 1, job_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        env = json_object();
        for (int i = 1; i < sqlite3_column_count(st); i++) {
            const char *name = sqlite3_column_name(st, i);
            switch (sqlite3_column_type(st, i)) {
            case SQLITE_INTEGER:
                json_object_set_new(env, name, json_integer(sqlite3_column_int64(st, i)));
                break;
            case SQLITE_FLOAT:
                json_object_set_new(env, name, json_real(sqlite3_column_double(st, i)));
                break;
            case SQLITE_NULL:
                json_object_set_new(env, name, json_null());
                break;
            default:
                json_object_set_new(env, name, column_text(st, i));
            }
        }
    }
    sqlite3_finalize(st);
    return env;
}

int store_job_get(store *s, int64_t id, int with_details, json_t **job)
{
    int rc = STORE_ERROR;
    pthread_mutex_lock(&s->read_lock);
    sqlite3_stmt *st = prepare(s->reader, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = ?");
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            json_t *j = job_from_row(st, with_details);
            if (with_details) {
                json_object_set_new(j, "runs", runs_of(s->reader, id));
                json_object_set_new(j, "environment", environment_of(s->reader, id));
            }
            *job = j;
            rc = STORE_OK;
        } else if (step == SQLITE_DONE) {
            rc = STORE_NOT_FOUND;
        }
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->read_lock);
    return rc;
}

int store_job_list(store *s, const char *kind, const char *status, int64_t limit, int64_t offset,
                   json_t **out)
{
    int rc = STORE_ERROR;
    pthread_mutex_lock(&s->read_lock);
    sqlite3_stmt *st = prepare(s->reader, "SELECT " JOB_COLUMNS " FROM jobs "
                                          "WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR status = ?2) "
                                          "ORDER BY id DESC LIMIT ?3 OFFSET ?4");
    sqlite3_stmt *count = prepare(s->reader, "SELECT count(*) FROM jobs "
                                             "WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR status = ?2)");
    if (st && count) {
        bind_text(st, 1, kind);
        bind_text(st, 2, status);
        sqlite3_bind_int64(st, 3, limit);
        sqlite3_bind_int64(st, 4, offset);
        bind_text(count, 1, kind);
        bind_text(count, 2, status);
        json_t *jobs = json_array();
        int step;
        while ((step = sqlite3_step(st)) == SQLITE_ROW)
            json_array_append_new(jobs, job_from_row(st, 0));
        if (step == SQLITE_DONE && sqlite3_step(count) == SQLITE_ROW) {
            *out = json_pack("{s:o, s:I, s:I, s:I}", "jobs", jobs, "total",
                             (json_int_t)sqlite3_column_int64(count, 0), "limit", (json_int_t)limit,
                             "offset", (json_int_t)offset);
            rc = STORE_OK;
        } else {
            json_decref(jobs);
        }
    }
    sqlite3_finalize(st);
    sqlite3_finalize(count);
    pthread_mutex_unlock(&s->read_lock);
    return rc;
}

int store_job_state(store *s, int64_t id, char *kind, size_t kind_len, char *status, size_t status_len)
{
    int rc = STORE_ERROR;
    pthread_mutex_lock(&s->read_lock);
    sqlite3_stmt *st = prepare(s->reader, "SELECT kind, status FROM jobs WHERE id = ?");
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            snprintf(kind, kind_len, "%s", (const char *)sqlite3_column_text(st, 0));
            snprintf(status, status_len, "%s", (const char *)sqlite3_column_text(st, 1));
            rc = STORE_OK;
        } else if (step == SQLITE_DONE) {
            rc = STORE_NOT_FOUND;
        }
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->read_lock);
    return rc;
}

int store_job_counts(store *s, json_t **counts)
{
    json_t *c = json_object();
    for (int i = 0; job_statuses[i]; i++)
        json_object_set_new(c, job_statuses[i], json_integer(0));
    pthread_mutex_lock(&s->read_lock);
    sqlite3_stmt *st = prepare(s->reader, "SELECT status, count(*) FROM jobs GROUP BY status");
    int rc = STORE_ERROR;
    if (st) {
        while (sqlite3_step(st) == SQLITE_ROW)
            json_object_set_new(c, (const char *)sqlite3_column_text(st, 0),
                                json_integer(sqlite3_column_int64(st, 1)));
        sqlite3_finalize(st);
        rc = STORE_OK;
    }
    pthread_mutex_unlock(&s->read_lock);
    if (rc == STORE_OK)
        *counts = c;
    else
        json_decref(c);
    return rc;
}

/* Runs a per-run view callback (events, trace) on the read connection. */
static int run_view(store *s, int (*view)(sqlite3 *, int64_t, int, json_t **, api_error *), int64_t id,
                    int run_index, json_t **out, api_error *err)
{
    pthread_mutex_lock(&s->read_lock);
    int rc = view(s->reader, id, run_index, out, err);
    pthread_mutex_unlock(&s->read_lock);
    return rc;
}

int store_job_events(store *s, const jobkind *kind, int64_t id, int run_index, json_t **out, api_error *err)
{
    if (!kind->events)
        return api_fail(err, API_ERR_NOT_FOUND, NULL, "job kind %s records no events", kind->name);
    return run_view(s, kind->events, id, run_index, out, err);
}

int store_job_trace(store *s, const jobkind *kind, int64_t id, int run_index, json_t **out, api_error *err)
{
    if (!kind->trace)
        return api_fail(err, API_ERR_NOT_FOUND, NULL, "job %lld is %s %s job; traces come from profile jobs",
                        (long long)id, strchr("aeiou", kind->name[0]) ? "an" : "a", kind->name);
    return run_view(s, kind->trace, id, run_index, out, err);
}

int store_job_table(store *s, const jobkind *kind, int64_t id, const api_table_query *query, json_t **table,
                    api_error *err)
{
    if (!kind->table)
        return api_fail(err, API_ERR_NOT_FOUND, NULL, "job kind %s has no table view", kind->name);
    int selected = jobkind_check_selectors(kind, query, err);
    if (selected < 0)
        return -1;
    pthread_mutex_lock(&s->read_lock);
    int rc = selected ? kind->selected_table(s->reader, id, query, table, err) : kind->table(s->reader, id, table, err);
    pthread_mutex_unlock(&s->read_lock);
    return rc;
}

int store_read_snapshot(store *s, int (*view)(sqlite3 *db, void *arg, api_error *err), void *arg, api_error *err)
{
    pthread_mutex_lock(&s->read_lock);
    int rc;
    if (sqlite3_exec(s->reader, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        rc = api_fail(err, API_ERR_INTERNAL, NULL, "database error: %s", sqlite3_errmsg(s->reader));
    } else {
        rc = view(s->reader, arg, err);
        sqlite3_exec(s->reader, "COMMIT", NULL, NULL, NULL); /* a read transaction: nothing to keep */
    }
    pthread_mutex_unlock(&s->read_lock);
    return rc;
}
