/* Job kinds as data: each kind is a row of callbacks, looked up by name.
 *
 * DESIGN: the daemon validates a spec against schema/jobs/<name>.json, then
 * calls check() for what a schema cannot say (shapes, sweep sizes) and to fill
 * defaults. A worker calls run(). The store's writer calls store_run() for
 * each emitted run (inside a transaction, after inserting the generic row into
 * `runs`) so that each kind keeps its results in real SQL columns, and
 * table() renders the kind's summary table for GET /v1/jobs/{id}/table
 * (selected_table() the same narrowed by query parameters). */
#ifndef DAEMON_JOBKIND_H
#define DAEMON_JOBKIND_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

#include "../api/api.h"
#include "../api/errors.h"
#include "runctx.h"

/* A table for the table endpoint: {"columns": [str...], "rows": [[...]...]}
 * (cells are strings or numbers; already formatted the way people paste them,
 * e.g. "12.34 ± 0.05", with one count of decimals per column:
 * api_table_write_mean_sd). */

/* A column a kind adds to GET /v1/compare's table of several of its jobs
 * (jobkind.compare_column), e.g. each row's speedup against a baseline job. */
typedef struct compare_column {
    char name[96];     /* the column's name, e.g. "Speedup vs job 2 (×)" */
    const char *after; /* static: the merged table's column it follows; NULL, or none such there: the last */
    int decimals;      /* the most decimals its reals keep (the table's "decimals" hint); -1: none */
    json_t *cells;     /* new: one array per job compared, in their order, holding one cell per row of
                          that job's table(), in the table's row order */
} compare_column;

typedef struct jobkind {
    const char *name;
    /* Semantic checks and defaults (daemon side, never touches a device).
     * spec is borrowed and may be modified (defaults filled in).
     * Returns 0, or -1 with err filled (INVALID_SPEC naming the field). */
    int (*check)(json_t *spec, api_error *err);
    /* Submit-time check where no GPU worker exists at all (a daemon started
     * with --cpu-only or seeing no GPU; `lmperfd run` likewise). NULL: every
     * spec of the kind can run on a CPU worker. Returns 0, or -1 with err
     * filled (INVALID_SPEC naming the field that asks for a GPU, the message
     * ending in JOBKIND_NO_GPU) when the job would certainly fail there.
     * spec borrowed, already checked. */
    int (*check_no_gpu)(const json_t *spec, api_error *err);
    /* Number of GPUs the job needs at once (NULL: 1). */
    int (*gpus_needed)(const json_t *spec);
    /* Runs the job in a worker. spec borrowed; on success sets *result (new,
     * a JSON object summarising the job; may be an empty object) and returns
     * 0. On failure returns -1 with a message in errbuf. Cancellation: return
     * LMK_CANCELLED (-5) after noticing runctx_cancelled(). */
    int (*run)(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen);
    /* Stores one emitted run in the kind's own tables. run_id is the row id in
     * `runs` already inserted for it. Returns SQLITE_OK or an sqlite error. */
    int (*store_run)(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec, const json_t *run);
    /* Non-zero: store_run is called for failed runs too (the run's "status"
     * says which), e.g. to keep a failed run's partial event list. */
    int store_failed_runs;
    /* Non-zero: the worker process that ran a job of this kind is replaced by
     * a fresh one when the job ends (however it ends), so that what the job
     * left in the process (an attached profiler) cannot slow later jobs. */
    int fresh_worker_after;
    /* Builds the summary table of a job from the database (reader side).
     * Sets *table (new). Returns 0 or -1 with err filled. */
    int (*table)(sqlite3 *db, int64_t job_id, json_t **table, api_error *err);
    /* GET /v1/jobs/{id}/table narrowed or reshaped by selectors
     * (?experiment=, ?run=, ?range=, ?pivot=: api_table_query), called when one is set; the store lets
     * through only those named in table_params (any other is a 400 naming
     * it), and a pivot only among pivots. query borrowed; same contract as table, plus: a value that can
     * never be valid is a 400, one this job does not have a 404, naming the
     * parameter. NULL when table_params is. */
    int (*selected_table)(sqlite3 *db, int64_t job_id, const api_table_query *query, json_t **table,
                          api_error *err);
    /* The selectors selected_table takes ("experiment", "run", "range", "pivot"),
     * NULL-terminated; NULL: none. */
    const char *const *table_params;
    /* The values ?pivot= takes ("precision"), NULL-terminated, when
     * table_params has "pivot" (jobkind_check_selectors refuses others). */
    const char *const *pivots;
    /* Top-level fields of a run too large for the generic `runs` row (the
     * kind's store_run keeps them in its own tables). NULL-terminated; may
     * be NULL. */
    const char *const *bulky_fields;
    /* GET /v1/jobs/{id}/events?run=N: the full event list of one run, from
     * the kind's tables (NULL: the kind has none). Sets *out (new). */
    int (*events)(sqlite3 *db, int64_t job_id, int run_index, json_t **out, api_error *err);
    /* GET /v1/jobs/{id}/trace?run=N: a Chrome trace of one run (NULL: the
     * kind records none). Same contract as events. */
    int (*trace)(sqlite3 *db, int64_t job_id, int run_index, json_t **out, api_error *err);
    /* GET /v1/compare: a job's table as it enters the comparison, when it is
     * not the table hook's (e.g. with columns the job's own table leaves out
     * because its runs agree in them, which another job's may not). Same
     * contract as table, except that the cells of its "mean_sd" columns may
     * be raw [mean, sd] figures: the comparison writes them out over all the
     * jobs' rows (api_table_write_mean_sd), so that a column has one count of
     * decimals. NULL: table. */
    int (*compare_table)(sqlite3 *db, int64_t job_id, json_t **table, api_error *err);
    /* GET /v1/compare: the column the kind adds to the comparison of
     * job_ids[0..count) (borrowed; all of this kind and finished) against the
     * baseline job baseline_id (one of them), e.g. benchmark's speedup. Fills
     * *column (its cells new) and returns 0, or -1 with err filled. NULL: the
     * kind's comparison has no baseline (baseline= is a 400). A kind with
     * compare_column and table_params adds the column to unselected tables
     * only (its cells follow the unselected table's rows): a comparison of
     * selected tables takes no baseline. */
    int (*compare_column)(sqlite3 *db, const int64_t *job_ids, size_t count, int64_t baseline_id,
                          compare_column *column, api_error *err);
} jobkind;

/* Looks a kind up by name; NULL when unknown. Returned pointer is static. */
const jobkind *jobkind_find(const char *name);
/* The kinds' names, comma-separated ("benchmark, numerics, ..."), in buf
 * (len bytes), for messages that list them. */
void jobkind_names(char *buf, size_t len);
/* The table of kinds, terminated by NULL. */
extern const jobkind *const jobkinds[];

/* The table selectors set in query (api_table_query, borrowed; NULL: none)
 * against the ones kind takes (table_params). Returns 0 when none is set, 1
 * when some are and kind takes each, or -1 with err filled: 400 naming the
 * first one kind does not take, and which kinds do. */
int jobkind_check_selectors(const jobkind *kind, const api_table_query *query, api_error *err);
/* Whether some kind's table pivots by name (jobkind.pivots): a client's
 * check before it submits. */
int jobkind_pivot_known(const char *name);

/* Helpers for store_run: bind a JSON value to parameter i of a statement.
 * jobkind_bind_scalar: integer, real, string or boolean (0/1) as such,
 * anything else (null, absent, arrays, objects) as NULL.
 * jobkind_bind_real_or_null: a number as a real, anything else as NULL. */
void jobkind_bind_scalar(sqlite3_stmt *st, int i, const json_t *v);
void jobkind_bind_real_or_null(sqlite3_stmt *st, int i, const json_t *v);

/* The end of check_no_gpu's messages. */
#define JOBKIND_NO_GPU "there is no GPU here (started with --cpu-only, or none visible)"

/* Common spec fields every kind accepts (handled by the daemon, not by the
 * kind): "kind" (string), "timeout_s" (number, default JOB_DEFAULT_TIMEOUT_S),
 * "label" (string). */
#define JOB_DEFAULT_TIMEOUT_S 3600
#define JOB_MAX_TIMEOUT_S (7 * 24 * 3600)

#endif
