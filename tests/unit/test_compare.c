/* Unit test: GET /v1/compare's table. compare_align_tables lines tables up by
 * column name (a column a table lacks is null on its rows, decimals the most
 * of any table); compare_jobs refuses what cannot be compared and, for
 * benchmark jobs, matches each row to its baseline run as compare.h and
 * kind_benchmark.c say (stored runs made up here, so that every time is known). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../engine/check.h"
#include "compare.h"
#include "jobkind.h"
#include "store.h"

static int same_json(const json_t *got, const char *want_text)
{
    json_t *want = json_loads(want_text, 0, NULL);
    int same = want && json_equal(got, want);
    if (!same) {
        char *text = json_dumps(got, JSON_COMPACT);
        fprintf(stderr, "got  %s\nwant %s\n", text ? text : "(null)", want_text);
        free(text);
    }
    json_decref(want);
    return same;
}

static void test_align(void)
{
    json_t *tables[4] = {
        json_loads("{\"columns\": [\"a\", \"b\", \"c\"], \"rows\": [[1, 2.5, \"x\"], [4, 5.5, \"y\"]],"
                   " \"decimals\": [null, 2, null], \"mean_sd\": [\"c\"]}", 0, NULL),
        /* a leading new column (x), a shared one with more decimals (a), one after c (d), b missing */
        json_loads("{\"columns\": [\"x\", \"a\", \"c\", \"d\"], \"rows\": [[\"p\", 7, \"z\", 0.125]],"
                   " \"decimals\": [null, 3, null, 1], \"mean_sd\": [\"d\", \"c\"]}", 0, NULL),
        /* no column in common, no decimals: at the end */
        json_loads("{\"columns\": [\"p\", \"q\"], \"rows\": [[true, null]]}", 0, NULL),
        /* a name twice: the second is a column of its own, after the first */
        json_loads("{\"columns\": [\"a\", \"a\"], \"rows\": [[8, 9]]}", 0, NULL),
    };
    int64_t ids[4] = {2, 5, 9, 11};
    json_t *merged = NULL;
    MUST(compare_align_tables(tables, ids, 4, &merged));
    CHECK(same_json(json_object_get(merged, "columns"),
                    "[\"Job\", \"x\", \"a\", \"a\", \"b\", \"c\", \"d\", \"p\", \"q\"]"),
          "merged columns");
    CHECK(same_json(json_object_get(merged, "rows"),
                    "[[2, null, 1, null, 2.5, \"x\", null, null, null],"
                    " [2, null, 4, null, 5.5, \"y\", null, null, null],"
                    " [5, \"p\", 7, null, null, \"z\", 0.125, null, null],"
                    " [9, null, null, null, null, null, null, true, null],"
                    " [11, null, 8, 9, null, null, null, null, null]]"),
          "merged rows");
    CHECK(same_json(json_object_get(merged, "decimals"), "[null, null, 3, null, 2, null, 1, null, null]"),
          "merged decimals");
    /* the mean ± sd columns any table names, each once (csv splits them in every job's rows) */
    CHECK(same_json(json_object_get(merged, "mean_sd"), "[\"c\", \"d\"]"), "merged mean_sd");
    json_decref(merged);
    for (int i = 0; i < 4; i++)
        json_decref(tables[i]);
}

/* A stored benchmark run: the point (context, precision, d_model), the mean
 * total step time in ms (<= 0: a failed run) and the warm-up steps. */
static json_t *bench_run(int context, const char *precision, int d_model, double total_ms, int warmup)
{
    int ok = total_ms > 0;
    return json_pack("{s:s, s:s?, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s, s:b, s:i, s:i, s:i,"
                     " s:{s:{s:f, s:f}}}",
                     "status", ok ? "succeeded" : "failed", "error", ok ? NULL : "does not fit", "model", "m",
                     "d_model", d_model, "d_ff", 32, "num_layers", 1, "num_heads", 1, "context_length", context,
                     "batch_size", 1, "vocab_size", 50, "precision", precision, "mode", "forward", "attention",
                     "naive", "graphs", 0, "warmup_steps", warmup, "measure_steps", 3, "seed", 0, "stats", "total",
                     "mean_ms", ok ? total_ms : 0.0, "std_ms", 0.0);
}

/* A finished job of kind with the given runs (stolen). */
static int64_t finished_job(store *s, const char *kind_name, json_t **runs, int count)
{
    json_t *spec = json_pack("{s:s, s:i}", "kind", kind_name, "timeout_s", 60);
    int64_t id = 0;
    MUST(store_job_insert(s, kind_name, NULL, 60, spec, &id));
    MUST(store_job_start(s, id, 0, "cpu"));
    for (int i = 0; i < count; i++) {
        MUST(store_run_add(s, jobkind_find(kind_name), id, i, spec, runs[i]));
        json_decref(runs[i]);
    }
    MUST(store_job_finish(s, id, "succeeded", NULL, NULL));
    json_decref(spec);
    return id;
}

typedef struct compare_call {
    const int64_t *ids;
    size_t count;
    int64_t baseline;
    json_t *table;
} compare_call;

static int compare_view(sqlite3 *db, void *arg, api_error *err)
{
    compare_call *c = arg;
    return compare_jobs(db, c->ids, c->count, c->baseline, NULL, &c->table, err);
}

/* compare_jobs on a snapshot; *table (new) on success, else the error. */
static int compare(store *s, const int64_t *ids, size_t count, int64_t baseline, json_t **table, api_error *err)
{
    compare_call c = {.ids = ids, .count = count, .baseline = baseline};
    int rc = store_read_snapshot(s, compare_view, &c, err);
    *table = rc ? NULL : c.table;
    return rc;
}

/* The cells of column name (NULL: no such column). New. */
static json_t *column_cells(const json_t *table, const char *name)
{
    const json_t *columns = json_object_get(table, "columns");
    for (size_t c = 0; c < json_array_size(columns); c++) {
        if (strcmp(json_string_value(json_array_get(columns, c)), name) != 0)
            continue;
        json_t *cells = json_array();
        size_t i;
        const json_t *row;
        json_array_foreach(json_object_get(table, "rows"), i, row)
            json_array_append(cells, json_array_get(row, c));
        return cells;
    }
    return NULL;
}

static void expect_error(store *s, const int64_t *ids, size_t count, int64_t baseline, api_error_code code,
                         const char *field, const char *in_message, const char *what)
{
    json_t *table = NULL;
    api_error err = {0};
    int rc = compare(s, ids, count, baseline, &table, &err);
    CHECK(rc == -1 && err.code == code && strcmp(err.field, field) == 0 && strstr(err.message, in_message),
          "%s: rc %d, code %d, field '%s', message '%s'", what, rc, (int)err.code, err.field, err.message);
    json_decref(table);
}

static void test_benchmark(store *s)
{
    /* the baseline: fp32 and bf16 at context 8 (its runs differ in precision there), and at 16, where bf16 failed */
    json_t *base_runs[] = {bench_run(8, "fp32", 16, 10, 5), bench_run(8, "bf16", 16, 5, 5),
                           bench_run(16, "fp32", 16, 20, 5), bench_run(16, "bf16", 16, 0, 5)};
    int64_t base = finished_job(s, "benchmark", base_runs, 4);
    json_t *other_runs[] = {
        bench_run(8, "fp32", 16, 8, 5),  /* against the baseline's fp32 at 8: 10 / 8 */
        bench_run(8, "bf16", 16, 4, 5),  /* its bf16 at 8: 5 / 4 */
        bench_run(8, "fp16", 16, 2, 5),  /* the baseline has no fp16 at 8: null */
        bench_run(16, "fp32", 16, 40, 5), /* 20 / 40 */
        bench_run(16, "bf16", 16, 10, 5), /* the baseline's bf16 at 16 failed: null */
        bench_run(32, "fp32", 16, 10, 5), /* no context 32 in the baseline: null */
        bench_run(8, "fp32", 32, 10, 5),  /* another shape: null */
        bench_run(8, "bf16", 16, 2.5, 1), /* warm-up steps the baseline does not vary: not matched, 5 / 2.5 */
    };
    int64_t other = finished_job(s, "benchmark", other_runs, 8);
    json_t *failed_runs[] = {bench_run(16, "fp32", 16, 0, 5)}; /* failed itself: null */
    int64_t failed = finished_job(s, "benchmark", failed_runs, 1);

    int64_t ids[] = {base, other, failed};
    json_t *table = NULL;
    api_error err = {0};
    if (compare(s, ids, 3, 0, &table, &err)) {
        CHECK(0, "benchmark comparison: %s", err.message);
        return;
    }
    char name[96];
    snprintf(name, sizeof name, "Speedup vs job %lld (×)", (long long)base);
    json_t *speedups = column_cells(table, name);
    CHECK(same_json(speedups, "[1.0, 1.0, 1.0, null, 1.25, 1.25, null, 0.5, null, null, null, 2.0, null]"),
          "speedups against the first job");
    json_decref(speedups);
    json_t *jobs = column_cells(table, "Job");
    CHECK(json_array_size(jobs) == 13 && json_integer_value(json_array_get(jobs, 0)) == base &&
              json_integer_value(json_array_get(jobs, 4)) == other &&
              json_integer_value(json_array_get(jobs, 12)) == failed,
          "a Job column, the rows of the jobs in the order given");
    json_decref(jobs);
    const json_t *columns = json_object_get(table, "columns");
    size_t total_at = 0;
    while (total_at < json_array_size(columns) &&
           strcmp(json_string_value(json_array_get(columns, total_at)), "Total (ms)") != 0)
        total_at++;
    CHECK(total_at + 1 < json_array_size(columns) &&
              strcmp(json_string_value(json_array_get(columns, total_at + 1)), name) == 0 &&
              json_integer_value(json_array_get(json_object_get(table, "decimals"), total_at + 1)) == 2,
          "the speedup column after Total, with 2 decimals");
    json_decref(table);

    /* the second job as the baseline: its rows read 1; it varies in precision and warm-up at context 8 (two
     * bf16 runs there, warm-up 5 and 1), so the first job's bf16 at 8 (warm-up 5) is matched to its bf16 with
     * warm-up 5, and in precision only at 16 */
    if (compare(s, ids, 3, other, &table, &err)) {
        CHECK(0, "benchmark comparison against the second job: %s", err.message);
        return;
    }
    snprintf(name, sizeof name, "Speedup vs job %lld (×)", (long long)other);
    speedups = column_cells(table, name);
    CHECK(same_json(speedups, "[0.8, 0.8, 2.0, null, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, null]"),
          "speedups against the second job");
    json_decref(speedups);
    json_decref(table);

    /* refusals */
    int64_t numerics = finished_job(s, "numerics", NULL, 0);
    json_t *spec = json_pack("{s:s, s:i}", "kind", "benchmark", "timeout_s", 60);
    int64_t queued = 0;
    MUST(store_job_insert(s, "benchmark", NULL, 60, spec, &queued));
    json_decref(spec);
    int64_t mixed[] = {base, numerics}, pending[] = {base, queued}, absent[] = {base, 999999};
    int64_t numerics_pair[] = {numerics, finished_job(s, "numerics", NULL, 0)};
    expect_error(s, mixed, 2, 0, API_ERR_BAD_REQUEST, "jobs", "numerics", "jobs of two kinds");
    expect_error(s, pending, 2, 0, API_ERR_CONFLICT, "jobs", "is queued", "a queued job");
    expect_error(s, absent, 2, 0, API_ERR_NOT_FOUND, "jobs", "999999", "a job that does not exist");
    expect_error(s, ids, 2, numerics, API_ERR_BAD_REQUEST, "baseline", "not one of", "a baseline not compared");
    expect_error(s, ids, 1, 0, API_ERR_BAD_REQUEST, "jobs", "2 to", "one job");
    expect_error(s, numerics_pair, 2, numerics, API_ERR_BAD_REQUEST, "baseline", "benchmark",
                 "a baseline for a kind without one");
    int speedup_columns = 0;
    if (compare(s, numerics_pair, 2, 0, &table, &err) == 0) {
        size_t c;
        const json_t *column;
        json_array_foreach(json_object_get(table, "columns"), c, column)
            speedup_columns += strncmp(json_string_value(column), "Speedup", 7) == 0;
        CHECK(speedup_columns == 0 && json_array_size(json_object_get(table, "columns")) > 1,
              "numerics jobs compared: no speedup column");
    } else {
        CHECK(0, "numerics jobs compared: %s", err.message);
    }
    json_decref(table);
}

/* The decimals of a "mean ± sd" cell's mean and sd ("12.50 ± 0.71": 2 and 2), -1 when not such text. */
static void mean_sd_decimals(const json_t *cell, int *mean, int *sd)
{
    const char *s = json_string_value(cell), *sep = s ? strstr(s, " ± ") : NULL;
    *mean = *sd = -1;
    if (!sep)
        return;
    const char *dot = strchr(s, '.');
    *mean = dot && dot < sep ? (int)(sep - dot - 1) : 0;
    const char *tail = sep + strlen(" ± ");
    dot = strchr(tail, '.');
    *sd = dot ? (int)strlen(dot + 1) : 0;
}

/* A GPU job's sub-millisecond steps beside a CPU job's: the comparison's Total column has one count of decimals,
 * that of its smallest mean over both jobs (0.094 ms: 4), not each job's own (the CPU job's 2). */
static void test_mean_sd_decimals(store *s)
{
    json_t *gpu_runs[] = {bench_run(8, "fp32", 16, 0.094, 5), bench_run(16, "fp32", 16, 0.2, 5)};
    json_object_set_new(json_object_get(json_object_get(gpu_runs[0], "stats"), "total"), "std_ms", json_real(0.003));
    int64_t gpu = finished_job(s, "benchmark", gpu_runs, 2);
    json_t *cpu_runs[] = {bench_run(8, "fp32", 16, 12.5, 5), bench_run(16, "fp32", 16, 30, 5)};
    json_object_set_new(json_object_get(json_object_get(cpu_runs[0], "stats"), "total"), "std_ms", json_real(0.71));
    int64_t cpu = finished_job(s, "benchmark", cpu_runs, 2);
    int64_t ids[] = {cpu, gpu};
    json_t *table = NULL;
    api_error err = {0};
    if (compare(s, ids, 2, 0, &table, &err)) {
        CHECK(0, "comparison of a CPU and a GPU job: %s", err.message);
        return;
    }
    json_t *totals = column_cells(table, "Total (ms)");
    CHECK(same_json(totals, "[\"12.5000 ± 0.7100\", \"30.0000 ± 0.0000\", \"0.0940 ± 0.0030\", \"0.2000 ± 0.0000\"]"),
          "the Total column of a CPU and a GPU job, with the decimals of 0.094");
    json_decref(totals);
    /* every mean ± sd cell of a column, mean and sd, with the column's one count */
    const json_t *columns = json_object_get(table, "columns");
    for (size_t c = 0; c < json_array_size(columns); c++) {
        int seen = -1, mixed = 0;
        size_t i;
        const json_t *row;
        json_array_foreach(json_object_get(table, "rows"), i, row)
        {
            int mean, sd;
            mean_sd_decimals(json_array_get(row, c), &mean, &sd);
            if (mean < 0)
                continue;
            mixed |= mean != sd || (seen >= 0 && mean != seen);
            seen = mean;
        }
        CHECK(!mixed, "column %s mixes decimals", json_string_value(json_array_get(columns, c)));
    }
    /* the rendered forms print the cells as written: markdown as they are, csv as two numeric fields */
    char *md = api_table_render(table, "md");
    CHECK(md && strstr(md, "| 12.5000 ± 0.7100 |") && strstr(md, "| 0.0940 ± 0.0030 |"), "markdown:\n%s",
          md ? md : "");
    free(md);
    char *csv = api_table_render(table, "csv");
    CHECK(csv && strstr(csv, ",12.5000,0.7100,") && strstr(csv, ",0.0940,0.0030,"), "csv:\n%s", csv ? csv : "");
    free(csv);
    json_decref(table);
}

/* The position of column name in table's columns; -1 when there is none. */
static long column_at(const json_t *table, const char *name)
{
    const json_t *columns = json_object_get(table, "columns");
    for (size_t c = 0; c < json_array_size(columns); c++)
        if (strcmp(json_string_value(json_array_get(columns, c)), name) == 0)
            return (long)c;
    return -1;
}

/* The comparison reads as the job page's summary: Job, Model, then the
 * model's shape (d_model, d_ff, Layers, Heads), each row its run's. */
static void test_shape_columns(store *s)
{
    json_t *first_runs[] = {bench_run(8, "fp32", 16, 10, 5)};
    int64_t first = finished_job(s, "benchmark", first_runs, 1);
    json_t *second_runs[] = {bench_run(8, "fp32", 32, 12, 5), bench_run(16, "fp32", 64, 30, 5)};
    json_object_set_new(second_runs[1], "num_layers", json_integer(3));
    json_object_set_new(second_runs[1], "num_heads", json_integer(4));
    int64_t second = finished_job(s, "benchmark", second_runs, 2);
    int64_t ids[] = {first, second};
    json_t *table = NULL;
    api_error err = {0};
    if (compare(s, ids, 2, 0, &table, &err)) {
        CHECK(0, "comparison of two benchmark jobs: %s", err.message);
        return;
    }
    long model = column_at(table, "Model");
    CHECK(model == 1 && column_at(table, "d_model") == 2 && column_at(table, "d_ff") == 3 &&
              column_at(table, "Layers") == 4 && column_at(table, "Heads") == 5 &&
              column_at(table, "Context Length") == 6,
          "Job, Model, d_model, d_ff, Layers, Heads, Context Length lead the comparison");
    json_t *shapes = json_array();
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(table, "rows"), i, row)
        json_array_append_new(shapes, json_pack("[O, O, O, O, O]", json_array_get(row, 0), json_array_get(row, 2),
                                                json_array_get(row, 3), json_array_get(row, 4),
                                                json_array_get(row, 5)));
    char want[160];
    snprintf(want, sizeof want, "[[%lld, 16, 32, 1, 1], [%lld, 32, 32, 1, 1], [%lld, 64, 32, 3, 4]]",
             (long long)first, (long long)second, (long long)second);
    CHECK(same_json(shapes, want), "each row's shape cells are its run's");
    json_decref(shapes);
    json_decref(table);
}

typedef struct summary_rows {
    int64_t job_id;
    int rows, runs;        /* benchmark_summary's rows of the job, and its distinct runs */
    double speedups[8];    /* speedup_vs_fp32 per row in run_id order; -1: NULL */
} summary_rows;

static int read_summary(sqlite3 *db, void *arg, api_error *err)
{
    summary_rows *got = arg;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT speedup_vs_fp32, (SELECT COUNT(DISTINCT run_id) FROM benchmark_summary "
                           "WHERE job_id = ?1) FROM benchmark_summary WHERE job_id = ?1 ORDER BY run_id",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "benchmark_summary: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, got->job_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (got->rows < (int)(sizeof got->speedups / sizeof got->speedups[0]))
            got->speedups[got->rows] = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 0);
        got->rows++;
        got->runs = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    return 0;
}

/* A job holding one point twice in fp32 (a sweep list that named a value
 * twice, which earlier lmperfd versions stored): still one benchmark_summary
 * row per run, each other run's speedup against the first fp32 run, and one
 * table and comparison row per run. */
static void test_repeated_point(store *s)
{
    json_t *runs[] = {bench_run(8, "fp32", 16, 10, 5), bench_run(8, "fp32", 16, 8, 5), bench_run(8, "bf16", 16, 5, 5)};
    int64_t job = finished_job(s, "benchmark", runs, 3);
    summary_rows got = {.job_id = job};
    api_error err = {0};
    MUST(store_read_snapshot(s, read_summary, &got, &err));
    CHECK(got.rows == 3 && got.runs == 3, "benchmark_summary of a job with a point twice: %d rows for %d runs",
          got.rows, got.runs);
    CHECK(got.rows == 3 && got.speedups[0] == 1.0 && got.speedups[1] == 1.25 && got.speedups[2] == 2.0,
          "speedups against the first fp32 run: %g %g %g", got.speedups[0], got.speedups[1], got.speedups[2]);
    json_t *other_runs[] = {bench_run(8, "fp32", 16, 20, 5)};
    int64_t other = finished_job(s, "benchmark", other_runs, 1);
    int64_t ids[] = {job, other};
    json_t *table = NULL;
    if (compare(s, ids, 2, 0, &table, &err)) {
        CHECK(0, "comparison with a job holding a point twice: %s", err.message);
        return;
    }
    CHECK(json_array_size(json_object_get(table, "rows")) == 4, "the comparison has %zu rows, not 4 (one per run)",
          json_array_size(json_object_get(table, "rows")));
    json_decref(table);
}

int main(void)
{
    test_align();
    char db_path[256], err[256];
    snprintf(db_path, sizeof db_path, "/tmp/lmperf-test-compare-%d.db", (int)getpid());
    store *s = NULL;
    MUST(store_open(db_path, &s, err, sizeof err));
    test_benchmark(s);
    test_mean_sd_decimals(s);
    test_shape_columns(s);
    test_repeated_point(s);
    store_close(s);
    char path[300];
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(path, sizeof path, "%s%s", db_path, suffixes[i]);
        unlink(path);
    }
    return check_report("compare");
}
