/* The HTTP/JSON API server: libmicrohttpd adapter, route table, errors.
 *
 * DESIGN: api/ knows HTTP and JSON, not the daemon's internals. Handlers
 * reach the daemon through api_backend, a table of callbacks the daemon
 * fills in (daemon/service.c). Every callback returns 0 or -1 with an
 * api_error; the server renders errors from the one table in errors.h.
 * Callbacks must not block on a GPU: they read the store or push to the
 * queue. */
#ifndef API_API_H
#define API_API_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"

typedef struct api_job_filter {
    const char *kind;   /* NULL: any */
    const char *status; /* NULL: any */
    int64_t limit;
    int64_t offset;
} api_job_filter;

/* GET /v1/jobs/{id}/table's selectors: query parameters that narrow the
 * table (strings borrowed; unset: NULL, or -1 for run). Which kinds take which
 * is the daemon's business (jobkind.table_params). */
typedef struct api_table_query {
    const char *experiment; /* ?experiment=NAME: one experiment's table (numerics) */
    int64_t run;            /* ?run=N: one run, its 0-based index in the job as /trace?run= (profile) */
    const char *range;      /* ?range=NAME: one NVTX range by its stored name, "forward", "layer 3" (profile) */
    const char *pivot;      /* ?pivot=precision: one row per point, a column per precision (benchmark) */
} api_table_query;

/* GET /v1/compare?jobs=: how many jobs one comparison takes, at most (2 at least). */
#define API_COMPARE_MAX_JOBS 64

typedef struct api_backend {
    void *self;
    /* spec borrowed (may be modified: defaults). Sets *job (new). */
    int (*job_submit)(void *self, json_t *spec, json_t **job, api_error *err);
    int (*job_get)(void *self, int64_t id, json_t **job, api_error *err);
    int (*job_list)(void *self, const api_job_filter *filter, json_t **list, api_error *err);
    /* Sets *job (new) and *accepted: 0 when cancelled at once (was queued),
     * 1 when a running job was asked to stop. */
    int (*job_cancel)(void *self, int64_t id, json_t **job, int *accepted, api_error *err);
    /* {"columns": [...], "rows": [[...]]} (new); query (borrowed) narrows it:
     * a selector the job's kind does not take is a 400 naming it. */
    int (*job_table)(void *self, int64_t id, const api_table_query *query, json_t **table, api_error *err);
    /* GET /v1/compare: the tables of job_ids[0..count) (borrowed; 2 to
     * API_COMPARE_MAX_JOBS distinct ids, in the order given), each narrowed
     * by query's selectors as job_table narrows one (borrowed), as one
     * {"columns","rows","decimals"} (new) led by a "Job" column, against
     * baseline_id (0: not given). Errors name "jobs", "baseline" or a
     * selector. */
    int (*jobs_compare)(void *self, const int64_t *job_ids, size_t count, int64_t baseline_id,
                        const api_table_query *query, json_t **table, api_error *err);
    /* The full event list of one run (memory job), {"columns","rows",...} (new). */
    int (*job_events)(void *self, int64_t id, int run_index, json_t **out, api_error *err);
    /* The Chrome trace (Trace Event Format) of one run of a profile job (new). */
    int (*job_trace)(void *self, int64_t id, int run_index, json_t **out, api_error *err);
    /* The JSON Schema of a job kind (new). */
    int (*schema)(void *self, const char *kind, json_t **out, api_error *err);
    int (*system)(void *self, json_t **out, api_error *err);
    int (*models)(void *self, json_t **out, api_error *err);
    /* Liveness: sets *out (new); *ready = 0 when the daemon cannot take jobs. */
    int (*health)(void *self, json_t **out, int *ready);
    /* Prometheus text of the daemon's gauges (new, free()). */
    char *(*metrics)(void *self);
} api_backend;

typedef struct api_config {
    const char *host;        /* "127.0.0.1" */
    int port;                /* 0: any free port */
    const char *web_root;    /* directory served at / (NULL: none) */
    const char *token;       /* bearer token for POST/DELETE (NULL: none) */
    size_t max_body_bytes;   /* larger request bodies get 413 */
    unsigned timeout_s;      /* idle connection timeout */
    unsigned threads;        /* worker threads of the HTTP server */
} api_config;

typedef struct api_server api_server;

/* Binds and listens on config's host:port (port 0: a free one), serving
 * nothing yet: connections wait in the backlog until api_server_serve. So a
 * daemon binds (or fails on a busy port) before it opens its database or
 * runs any job. Borrowed config strings must outlive the server. Sets *out
 * (new). Returns 0 or -1 with errbuf filled. */
int api_server_listen(const api_config *config, api_server **out, char *errbuf, size_t errlen);
/* Starts answering requests on the bound socket with backend (borrowed,
 * must outlive the server). Returns 0 or -1 with errbuf filled. */
int api_server_serve(api_server *server, const api_backend *backend, char *errbuf, size_t errlen);
/* The port actually bound. */
int api_server_port(const api_server *server);
/* Stops serving, closes the socket and frees. Accepts NULL. */
void api_server_stop(api_server *server);

/* A table may carry "decimals": per column, the most decimals its reals
 * need at the scale they are meant for, or null. Settling replaces each by
 * the decimals the whole column prints with: 2 when its smallest non-zero
 * value is 1 or more, 3 from 0.1, else 4, never more than the most, unless
 * the smallest would then keep fewer than API_TABLE_SIGNIFICANT significant
 * digits (0.0008 TFLOP/s on a CPU at 3 decimals): then as many as give it
 * API_TABLE_SIGNIFICANT, at most API_TABLE_MAX_DECIMALS. Markdown, CSV and
 * the page print that column's reals with exactly that many. Returns 0, or
 * -1 out of memory. */
#define API_TABLE_SIGNIFICANT 2
#define API_TABLE_MAX_DECIMALS 8
int api_table_settle_decimals(json_t *table);

/* A "mean ± sd" column (named in the table's "mean_sd") may hold its figures
 * raw, a cell [mean, sd] (two numbers, e.g. ms), until they are written out:
 * api_table_write_mean_sd replaces every such cell with "mean ± sd" text
 * whose two numbers have the decimals of their column, one count for the
 * whole column, so that it reads 12.73 ± 0.06 beside 4.44 ± 0.08. The
 * count is api_table_mean_sd_decimals of the column's smallest non-zero
 * |mean|. Other cells (text already written, "-", null) are left as they
 * are. A kind's table() writes its own; GET /v1/compare writes the merged
 * table's once its jobs' raw cells share a column. Returns 0, or -1 out of
 * memory (the table partly written). */
int api_table_write_mean_sd(json_t *table);

/* The decimals of a "mean ± sd" column whose smallest non-zero |mean| is
 * smallest (0: none): enough for API_MEAN_SD_SIGNIFICANT significant digits
 * of it, at least API_MEAN_SD_MIN_DECIMALS (the seeds print ms with 2) and at
 * most API_MEAN_SD_MAX_DECIMALS: 2 from 1 up, 3 from 0.1, else 4, as the page
 * prints phase times (web/format.js msDigits). */
#define API_MEAN_SD_SIGNIFICANT 3
#define API_MEAN_SD_MIN_DECIMALS 2
#define API_MEAN_SD_MAX_DECIMALS 4
int api_table_mean_sd_decimals(double smallest);

/* Renders a {"columns","rows"[,"decimals"][,"mean_sd"]} table as Markdown (a
 * pipe table, numbers right-aligned) or CSV (RFC 4180; a column of "mean ±
 * sd" text is two numeric fields there, "<column>" and "<column> sd", a "-"
 * cell two empty ones). "mean_sd", when present, names the columns that are
 * "mean ± sd" by their nature: split in CSV even where no row has a figure
 * (a forward-only job's backward), so that every job's CSV has one layout.
 * Returns new text (free()) or NULL. */
char *api_table_markdown(const json_t *table);
char *api_table_csv(const json_t *table);

/* Significant digits of the reals in a table and in a run's document
 * (memory events, profile trace); jansson's default, 17, prints 0.000811 as
 * 0.00081099999999999998. 12 prints a table's cells (rounded for display
 * already, 6 digits at most) as the markdown and CSV forms do, and keeps a
 * memory event's t_ms to well under a nanosecond and a trace's ts and dur
 * (µs since the trace's start) to the nanosecond over 1e7 µs. */
#define API_REAL_DIGITS 12

/* 1 when format is one api_table_render writes ("md", "csv", "json"), else 0. */
int api_table_format_known(const char *format);

/* A table as GET /v1/jobs/{id}/table answers it in format ("md", "csv" or
 * "json", indented, reals to API_REAL_DIGITS): its decimals settled first
 * (api_table_settle_decimals; table is changed), so that every form prints
 * a column's reals alike. Returns new text (free()) or NULL out of memory. */
char *api_table_render(json_t *table, const char *format);

#endif
