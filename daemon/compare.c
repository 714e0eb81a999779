/* GET /v1/compare: several jobs' summary tables as one (compare.h). */
#include "compare.h"

#include <stdio.h>
#include <string.h>

#include "jobkind.h"

/* The job's status while it has not finished: its rows so far would be partial. */
static int unfinished(const char *status)
{
    return strcmp(status, "queued") == 0 || strcmp(status, "running") == 0;
}

/* The position in columns of the occurrence-th (0-based) string equal to
 * name, from position from on; -1 when there is none. */
static long find_column(const json_t *columns, size_t from, const char *name, size_t occurrence)
{
    for (size_t i = from; i < json_array_size(columns); i++) {
        const char *c = json_string_value(json_array_get(columns, i));
        if (c && strcmp(c, name) == 0 && occurrence-- == 0)
            return (long)i;
    }
    return -1;
}

/* How many of columns[0..end) equal name. */
static size_t occurrences_before(const json_t *columns, size_t end, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < end; i++) {
        const char *c = json_string_value(json_array_get(columns, i));
        n += c && strcmp(c, name) == 0;
    }
    return n;
}

/* Column c of table (name, and occurrence among the table's equal names) in
 * merged's columns, which hold it. */
static long merged_position(const json_t *merged_columns, const json_t *table_columns, size_t c)
{
    const char *name = json_string_value(json_array_get(table_columns, c));
    return find_column(merged_columns, 1, name ? name : "", occurrences_before(table_columns, c, name ? name : ""));
}

int compare_align_tables(json_t *const *tables, const int64_t *job_ids, size_t count, json_t **merged)
{
    json_t *columns = json_pack("[s]", "Job"), *rows = json_array(), *decimals = json_pack("[n]");
    int failed = !columns || !rows || !decimals;
    /* the header: each table's columns in its order, a new one beside its neighbours */
    for (size_t t = 0; !failed && t < count; t++) {
        const json_t *own = json_object_get(tables[t], "columns");
        long last = -1; /* where the column before this one is; -1: at the first column */
        for (size_t c = 0; !failed && c < json_array_size(own); c++) {
            long at = merged_position(columns, own, c);
            if (at < 0) {
                at = (long)json_array_size(columns); /* a table with no column seen yet: at the end */
                if (last >= 0)
                    at = last + 1;
                else /* the table's first columns: before the first of its columns already there */
                    for (size_t next = c + 1; next < json_array_size(own); next++) {
                        long there = merged_position(columns, own, next);
                        if (there >= 0) {
                            at = there;
                            break;
                        }
                    }
                const char *name = json_string_value(json_array_get(own, c));
                failed = json_array_insert_new(columns, (size_t)at, json_string(name ? name : "")) ||
                         json_array_insert_new(decimals, (size_t)at, json_null());
            }
            last = at;
        }
    }
    /* the rows, and each column's most decimals */
    size_t width = json_array_size(columns);
    for (size_t t = 0; !failed && t < count; t++) {
        const json_t *own = json_object_get(tables[t], "columns");
        const json_t *own_decimals = json_object_get(tables[t], "decimals");
        for (size_t c = 0; !failed && c < json_array_size(own); c++) {
            const json_t *d = json_array_get(own_decimals, c);
            size_t at = (size_t)merged_position(columns, own, c);
            const json_t *most = json_array_get(decimals, at);
            if (json_is_integer(d) && (!json_is_integer(most) || json_integer_value(d) > json_integer_value(most)))
                failed = json_array_set_new(decimals, at, json_integer(json_integer_value(d)));
        }
        size_t r;
        const json_t *row;
        json_array_foreach(json_object_get(tables[t], "rows"), r, row)
        {
            json_t *aligned = json_array();
            failed = !aligned || json_array_append_new(aligned, json_integer(job_ids[t]));
            for (size_t c = 1; !failed && c < width; c++)
                failed = json_array_append_new(aligned, json_null());
            for (size_t c = 0; !failed && c < json_array_size(own); c++) {
                json_t *cell = json_array_get(row, c);
                if (cell)
                    failed = json_array_set(aligned, (size_t)merged_position(columns, own, c), cell);
            }
            if (failed || json_array_append_new(rows, aligned)) {
                if (failed)
                    json_decref(aligned);
                failed = 1;
                break;
            }
        }
    }
    /* the mean ± sd columns any table names (api_table_csv), each once */
    json_t *mean_sd = json_array();
    failed |= !mean_sd;
    for (size_t t = 0; !failed && t < count; t++) {
        size_t i;
        json_t *name;
        json_array_foreach(json_object_get(tables[t], "mean_sd"), i, name)
        {
            int seen = 0;
            size_t k;
            const json_t *had;
            json_array_foreach(mean_sd, k, had)
            {
                seen |= json_equal(had, name);
            }
            if (!seen && json_array_append(mean_sd, name)) {
                failed = 1;
                break;
            }
        }
    }
    if (!failed) {
        json_t *table = json_pack("{s:o, s:o, s:o}", "columns", columns, "rows", rows, "decimals", decimals);
        if (!table) {
            json_decref(mean_sd);
            return -1; /* json_pack's "o" stole them */
        }
        if (!json_array_size(mean_sd)) {
            json_decref(mean_sd);
        } else if (json_object_set_new(table, "mean_sd", mean_sd)) { /* steals mean_sd */
            json_decref(table);
            return -1;
        }
        *merged = table;
        return 0;
    }
    json_decref(columns);
    json_decref(rows);
    json_decref(decimals);
    json_decref(mean_sd);
    return -1;
}

/* Adds column (its cells stolen) to merged, a compare_align_tables table of
 * tables[0..count): after the column named column->after (else last), each
 * job's cells on its rows. Returns 0, or -1 with err filled. */
static int add_compare_column(json_t *merged, json_t *const *tables, size_t count, compare_column *column,
                              api_error *err)
{
    json_t *columns = json_object_get(merged, "columns"), *rows = json_object_get(merged, "rows");
    long after = column->after ? find_column(columns, 1, column->after, 0) : -1;
    size_t at = after < 0 ? json_array_size(columns) : (size_t)after + 1;
    json_t *cells = column->cells;
    column->cells = NULL;
    int rc = -1;
    if (json_array_size(cells) != count) {
        api_fail(err, API_ERR_INTERNAL, NULL, "the %s column has cells for %zu jobs, not %zu", column->name,
                 json_array_size(cells), count);
        goto out;
    }
    if (json_array_insert_new(columns, at, json_string(column->name)) ||
        json_array_insert_new(json_object_get(merged, "decimals"), at,
                              column->decimals >= 0 ? json_integer(column->decimals) : json_null()))
        goto out_of_memory;
    size_t row = 0;
    for (size_t t = 0; t < count; t++) {
        const json_t *job_cells = json_array_get(cells, t);
        size_t own_rows = json_array_size(json_object_get(tables[t], "rows"));
        if (json_array_size(job_cells) != own_rows) {
            api_fail(err, API_ERR_INTERNAL, NULL, "the %s column has %zu cells for a table of %zu rows", column->name,
                     json_array_size(job_cells), own_rows);
            goto out;
        }
        for (size_t i = 0; i < own_rows; i++, row++)
            if (json_array_insert(json_array_get(rows, row), at, json_array_get(job_cells, i)))
                goto out_of_memory;
    }
    rc = 0;
    goto out;
out_of_memory:
    api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory building the comparison");
out:
    json_decref(cells);
    return rc;
}

/* "benchmark (2, 5), numerics (9)": the jobs by kind, kinds in first-seen order. */
static void describe_kinds(char *out, size_t size, const int64_t *job_ids, char (*kinds)[64], size_t count)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < count && len < size; i++) {
        int seen = 0;
        for (size_t k = 0; k < i; k++)
            seen |= strcmp(kinds[k], kinds[i]) == 0;
        if (seen)
            continue;
        len += (size_t)snprintf(out + len, size - len, "%s%s (", len ? ", " : "", kinds[i]);
        const char *sep = "";
        for (size_t j = i; j < count && len < size; j++) {
            if (strcmp(kinds[j], kinds[i]) != 0)
                continue;
            len += (size_t)snprintf(out + len, size - len, "%s%lld", sep, (long long)job_ids[j]);
            sep = ", ";
        }
        if (len < size)
            len += (size_t)snprintf(out + len, size - len, ")");
    }
}

/* The kinds whose comparison takes a baseline: "benchmark". */
static void baseline_kinds(char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (const jobkind *const *k = jobkinds; *k && len < size; k++)
        if ((*k)->compare_column)
            len += (size_t)snprintf(out + len, size - len, "%s%s", len ? ", " : "", (*k)->name);
}

int compare_jobs(sqlite3 *db, const int64_t *job_ids, size_t count, int64_t baseline_id,
                 const api_table_query *query, json_t **table, api_error *err)
{
    char kinds[API_COMPARE_MAX_JOBS][64], statuses[API_COMPARE_MAX_JOBS][32];
    json_t *tables[API_COMPARE_MAX_JOBS] = {0};
    json_t *merged = NULL;
    compare_column column = {.decimals = -1};
    size_t have_tables = 0;
    int rc = -1;
    if (count < 2 || count > API_COMPARE_MAX_JOBS)
        return api_fail(err, API_ERR_BAD_REQUEST, "jobs", "jobs takes 2 to %d job ids, not %zu", API_COMPARE_MAX_JOBS,
                        count);
    int listed = baseline_id == 0;
    for (size_t i = 0; i < count; i++)
        listed |= job_ids[i] == baseline_id;
    if (!listed)
        return api_fail(err, API_ERR_BAD_REQUEST, "baseline", "baseline %lld is not one of the jobs compared",
                        (long long)baseline_id);

    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT kind, status FROM jobs WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "comparison: %s", sqlite3_errmsg(db));
    for (size_t i = 0; i < count; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, job_ids[i]);
        int step = sqlite3_step(st);
        if (step != SQLITE_ROW) {
            if (step == SQLITE_DONE)
                api_fail(err, API_ERR_NOT_FOUND, "jobs", "no job with id %lld", (long long)job_ids[i]);
            else
                api_fail(err, API_ERR_INTERNAL, NULL, "comparison: %s", sqlite3_errmsg(db));
            sqlite3_finalize(st);
            return -1;
        }
        snprintf(kinds[i], sizeof kinds[i], "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(statuses[i], sizeof statuses[i], "%s", (const char *)sqlite3_column_text(st, 1));
    }
    sqlite3_finalize(st);

    for (size_t i = 1; i < count; i++) {
        if (strcmp(kinds[i], kinds[0]) != 0) {
            char described[400];
            describe_kinds(described, sizeof described, job_ids, kinds, count);
            return api_fail(err, API_ERR_BAD_REQUEST, "jobs", "the jobs compared must be of one kind; these are %s",
                            described);
        }
    }
    const jobkind *kind = jobkind_find(kinds[0]);
    if (!kind || !kind->table)
        return api_fail(err, API_ERR_BAD_REQUEST, "jobs", "%s jobs have no table to compare", kinds[0]);
    int selected = jobkind_check_selectors(kind, query, err);
    if (selected < 0)
        return -1;
    char pending[400] = ""; /* "job 5 is running, job 9 is queued" */
    for (size_t i = 0, len = 0; i < count && len < sizeof pending; i++)
        if (unfinished(statuses[i]))
            len += (size_t)snprintf(pending + len, sizeof pending - len, "%sjob %lld is %s", len ? ", " : "",
                                    (long long)job_ids[i], statuses[i]);
    if (pending[0])
        return api_fail(err, API_ERR_CONFLICT, "jobs",
                        "%s: compare jobs once they have finished (the rows so far would be partial)", pending);
    if (baseline_id && kind->compare_column && selected)
        return api_fail(err, API_ERR_BAD_REQUEST, "baseline",
                        "baseline compares %s jobs' whole tables: leave it out with a table selector "
                        "(the selected tables carry their own ratios)",
                        kind->name);
    if (baseline_id && !kind->compare_column) {
        char takers[128];
        baseline_kinds(takers, sizeof takers);
        return api_fail(err, API_ERR_BAD_REQUEST, "baseline",
                        "%s jobs are compared without a baseline: baseline is for %s jobs", kind->name,
                        takers[0] ? takers : "no");
    }

    for (; have_tables < count; have_tables++) {
        int64_t id = job_ids[have_tables];
        json_t **own = &tables[have_tables];
        if (selected ? kind->selected_table(db, id, query, own, err)
                     : (kind->compare_table ? kind->compare_table : kind->table)(db, id, own, err))
            goto out;
    }
    if (compare_align_tables(tables, job_ids, count, &merged)) {
        api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory building the comparison");
        goto out;
    }
    if (kind->compare_column && !selected &&
        (kind->compare_column(db, job_ids, count, baseline_id ? baseline_id : job_ids[0], &column, err) ||
         add_compare_column(merged, tables, count, &column, err)))
        goto out;
    /* the jobs' raw mean ± sd cells (benchmark_compare_table), one count of decimals per column */
    if (api_table_write_mean_sd(merged)) {
        api_fail(err, API_ERR_INTERNAL, NULL, "%s", "out of memory building the comparison");
        goto out;
    }
    *table = merged;
    merged = NULL;
    rc = 0;
out:
    for (size_t i = 0; i < have_tables; i++)
        json_decref(tables[i]);
    json_decref(merged);
    json_decref(column.cells);
    return rc;
}
