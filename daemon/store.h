/* The SQLite store: jobs, runs, environments and each kind's tables.
 *
 * DESIGN: one database file in WAL mode with a persistent WAL, so that
 * `sqlite3 -readonly lmperf.db` works while the daemon runs and after it
 * stops. Migrations are the embedded schema/NNNN_*.sql files, applied in
 * number order at open; PRAGMA user_version holds the last one's NNNN. All writes go through
 * one write connection behind a mutex, each in BEGIN IMMEDIATE; reads use a
 * second connection. State transitions are conditional updates
 * (`... WHERE status = 'queued'`), so races between cancel and dispatch are
 * settled by the database. */
#ifndef DAEMON_STORE_H
#define DAEMON_STORE_H

#include <jansson.h>
#include <stdint.h>

#include "jobkind.h"

typedef struct store store;

enum {
    STORE_OK = 0,
    STORE_ERROR = -1,     /* SQLite failure (logged by the caller) */
    STORE_NOT_FOUND = -2, /* no such job */
    STORE_CONFLICT = -3,  /* the job is not in the state the call needs */
    STORE_RETRY = -4,     /* the database cannot be written now (disk full, locked by another writer
                             past the busy timeout, I/O error): the same write may succeed later */
};

/* Opens (creating if needed) and migrates the database at path, holding it
 * exclusively until store_close: a store on it in another process (a second
 * daemon) is refused with "in use"; read-only sqlite3 clients are not held
 * up. Open a database once per process: a refused second store_open here
 * would close a descriptor of the file, which drops this process's SQLite
 * locks on it. Sets *out (new; free with store_close). Returns 0, or -1 with
 * a message in errbuf. */
int store_open(const char *path, store **out, char *errbuf, size_t errlen);
/* Checkpoints and closes. Accepts NULL. */
void store_close(store *s);
/* PRAGMA user_version: the number NNNN of the last migration applied. */
int store_schema_version(store *s);
/* The highest migration number embedded in this binary. */
int store_migrations_known(void);
/* Whether status is a job status (queued, running, succeeded, failed,
 * cancelled, interrupted), and those names, comma-separated, in buf (len
 * bytes), for messages that list them. */
int store_status_known(const char *status);
void store_status_names(char *buf, size_t len);

/* --- writes ---------------------------------------------------------------- */

/* Writes return STORE_OK, STORE_RETRY when SQLite refused the write for a
 * reason that can pass (see the enum), STORE_ERROR for any other failure,
 * and the conflicts named below. */

/* Inserts a queued job; spec borrowed. Sets *id. */
int store_job_insert(store *s, const char *kind, const char *label, double timeout_s,
                     const json_t *spec, int64_t *id);
/* queued -> running. STORE_CONFLICT when the job is no longer queued. */
int store_job_start(store *s, int64_t id, int worker, const char *device);
int store_job_progress(store *s, int64_t id, double fraction, const char *message);
/* running -> status (succeeded, failed, cancelled). error, result may be NULL.
 * STORE_CONFLICT when the job is not running. */
int store_job_finish(store *s, int64_t id, const char *status, const char *error,
                     const json_t *result);
/* queued -> cancelled. STORE_CONFLICT when not queued, STORE_NOT_FOUND. */
int store_job_cancel_queued(store *s, int64_t id);
/* Notes that a cancel of running job id was asked for (cancel_requested_at,
 * the first request's time). STORE_CONFLICT when the job is not running. */
int store_job_cancel_requested(store *s, int64_t id);
/* Stores one emitted run: the generic row in `runs`, then kind->store_run.
 * All borrowed. */
int store_run_add(store *s, const jobkind *kind, int64_t job_id, int run_index,
                  const json_t *spec, const json_t *run);
/* Records where a job runs: env is the worker's device object (see
 * daemon/worker.c, "hello"). */
int store_env_record(store *s, int64_t job_id, const json_t *env);
/* At start-up: marks every running job interrupted and returns the ids of
 * queued jobs in submission order (*ids new, free()). */
int store_recover(store *s, int64_t **ids, size_t *count);

/* --- reads ----------------------------------------------------------------- */

/* The job as the API returns it; with_details adds runs, result and
 * environment. Sets *job (new). STORE_NOT_FOUND when absent. */
int store_job_get(store *s, int64_t id, int with_details, json_t **job);
/* Jobs newest first; kind and status may be NULL (no filter). Sets *out (new)
 * to {"jobs": [...], "total": N, "limit": L, "offset": O}. */
int store_job_list(store *s, const char *kind, const char *status, int64_t limit, int64_t offset,
                   json_t **out);
/* The kind and status of a job (into caller buffers). STORE_NOT_FOUND. */
int store_job_state(store *s, int64_t id, char *kind, size_t kind_len, char *status,
                    size_t status_len);
/* {"queued": n, "running": n, ...} for every status (new). */
int store_job_counts(store *s, json_t **counts);
/* Calls kind->events on the read connection. */
int store_job_events(store *s, const jobkind *kind, int64_t id, int run_index, json_t **out, api_error *err);
/* Calls kind->trace on the read connection (404 for kinds without traces). */
int store_job_trace(store *s, const jobkind *kind, int64_t id, int run_index, json_t **out, api_error *err);
/* Calls kind->table on the read connection, or kind->selected_table when
 * query (borrowed; NULL: none) sets a selector. A selector the kind does not
 * list in table_params is a 400 naming it and the kinds that take it. */
int store_job_table(store *s, const jobkind *kind, int64_t id, const api_table_query *query, json_t **table,
                    api_error *err);
/* Runs view(db, arg) on the read connection inside one read transaction, so
 * that all it reads is one state of the database (a job that finishes
 * meanwhile is seen before or after, never half). Returns view's result;
 * -1 with err filled when the transaction cannot begin. */
int store_read_snapshot(store *s, int (*view)(sqlite3 *db, void *arg, api_error *err), void *arg, api_error *err);

#endif
