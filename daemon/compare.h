/* GET /v1/compare: the summary tables of several finished jobs of one kind
 * as one table, for pasting into reports.
 *
 * DESIGN: each job's table is its kind's table() (what GET /v1/jobs/{id}/table
 * answers without selectors), or its compare_table() where the kind has one
 * (benchmark: with "Warm-up Steps" always). compare_align_tables() puts them under one
 * header, a leading "Job" column and then the columns by name; the kind's
 * compare_column() (benchmark: the speedup against a baseline job) adds one
 * column; then the jobs' raw mean ± sd figures are written out, one count of
 * decimals per column over every job's rows (api_table_write_mean_sd: a
 * GPU job's 0.0940 ± 0.0030 beside a CPU job's 12.5000 ± 0.7100, not beside
 * 12.50 ± 0.71). compare_jobs() checks the request against the database and builds
 * the whole table; run it on one read snapshot (store_read_snapshot). */
#ifndef DAEMON_COMPARE_H
#define DAEMON_COMPARE_H

#include <jansson.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "../api/api.h"
#include "../api/errors.h"

/* Merges tables[0..count) ({"columns", "rows"[, "decimals"][, "mean_sd"]},
 * borrowed), the tables of jobs job_ids[0..count), into one (*merged, new):
 *  - columns: "Job", then every column name of the tables once, in the order
 *    of the first table; a column first met in a later table comes right
 *    after the column it follows there, or, when it leads its table, before
 *    the first of the table's columns met already (at the end when none
 *    was). A name repeated within one table is one column per occurrence;
 *  - rows: each table's rows in order, the tables in order, each row led by
 *    its job's id; a column the row's table lacks is null there;
 *  - decimals: per column the most any table gives it, null where none does
 *    (null for "Job");
 *  - mean_sd: the "mean ± sd" column names any table gives (api_table_csv),
 *    each once; absent when none does.
 * Returns 0, or -1 out of memory. */
int compare_align_tables(json_t *const *tables, const int64_t *job_ids, size_t count, json_t **merged);

/* The comparison of jobs job_ids[0..count) (distinct, in the order given)
 * against baseline_id (0: none given; the first job where the kind has a
 * compare_column), each job's table narrowed by the selectors of query
 * (borrowed; NULL or none set: the whole table) as GET /v1/jobs/{id}/table
 * narrows it (the kind's selected_table). Reads db (the store's read connection). Sets *table (new,
 * {"columns", "rows", "decimals"} unsettled). Returns 0, or -1 with err
 * filled: a job that does not exist 404, jobs of several kinds 400, a job
 * queued or running 409 (all naming "jobs"); a baseline that is not one of
 * the jobs, or given for a kind that has no baseline, 400 naming "baseline";
 * a selector the kind does not take 400, a value one job does not have 404
 * (naming the selector: "experiment", "run" or "range"). */
int compare_jobs(sqlite3 *db, const int64_t *job_ids, size_t count, int64_t baseline_id,
                 const api_table_query *query, json_t **table, api_error *err);

#endif
