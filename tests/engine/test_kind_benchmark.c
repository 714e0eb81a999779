/* The benchmark job kind without a worker: spec validation (schema + check,
 * 400s naming the field), and store_run / table / benchmark_summary on an
 * in-memory database migrated with the embedded schema. */
#include <sqlite3.h>
#include <string.h>

#include "check.h"
#include "jobkind.h"
#include "schema_embedded.h"
#include "spec.h"

static void expect(const char *text, const char *want_field)
{
    json_t *spec = json_loads(text, 0, NULL);
    const jobkind *kind = NULL;
    api_error err = {0};
    int rc = spec_validate(spec, &kind, &err);
    if (!want_field)
        CHECK(rc == 0, "%s rejected: %s: %s", text, err.field, err.message);
    else if (want_field[0] == '*') /* any field, but one must be named */
        CHECK(rc != 0 && err.code == API_ERR_INVALID_SPEC && err.field[0], "%s: accepted or no field", text);
    else
        CHECK(rc != 0 && strcmp(err.field, want_field) == 0, "%s: field '%s' want '%s' (%s)", text,
              rc ? err.field : "", want_field, err.message);
    json_decref(spec);
}

static void test_specs(void)
{
    expect("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":[64,128],"
           "\"mode\":[\"forward\",\"train_step\"],\"warmup_steps\":1,\"measure_steps\":2}", NULL);
    expect("{\"kind\":\"benchmark\",\"model\":[\"small\",{\"name\":\"m\",\"d_model\":2560,\"d_ff\":10240,"
           "\"num_layers\":2,\"num_heads\":32}],\"context_length\":128,\"precision\":[\"fp32\",\"bf16\"]}", NULL);
    expect("{\"kind\":\"benchmark\",\"model\":\"huge\",\"context_length\":64}", "model");
    expect("{\"kind\":\"benchmark\",\"model\":{\"d_model\":100,\"d_ff\":64,\"num_layers\":2,\"num_heads\":3},"
           "\"context_length\":64}", "model.num_heads");
    expect("{\"kind\":\"benchmark\",\"model\":[\"tiny\",\"nope\"],\"context_length\":64}", "model[1]");
    expect("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":0}", "*");
    expect("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"precision\":\"fp8\"}", "*");
    expect("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"extra\":1}", "extra");
    expect("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"precision\":[\"bf16\",\"tf32\"],"
           "\"optimizer_in_backward\":true}", NULL);
    expect("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"precision\":[\"bf16\",\"fp16\"],"
           "\"optimizer_in_backward\":true}", "optimizer_in_backward");
    expect("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"optimizer_in_backward\":1}",
           "*");
    expect("{\"kind\":\"benchmark\",\"context_length\":64}", "*");
    /* 3 × 256 × 256 × 4 × 3 ≈ 2.4 million points */
    char big[8192];
    size_t len = (size_t)snprintf(big, sizeof big, "{\"kind\":\"benchmark\",\"model\":[\"tiny\",\"small\",\"xl\"],"
                                                   "\"precision\":[\"fp32\",\"tf32\",\"bf16\",\"fp16\"],"
                                                   "\"mode\":[\"forward\",\"forward_backward\",\"train_step\"],"
                                                   "\"context_length\":[");
    for (int i = 1; i <= 256; i++)
        len += (size_t)snprintf(big + len, sizeof big - len, "%s%d", i > 1 ? "," : "", i);
    len += (size_t)snprintf(big + len, sizeof big - len, "],\"batch_size\":[");
    for (int i = 1; i <= 256; i++)
        len += (size_t)snprintf(big + len, sizeof big - len, "%s%d", i > 1 ? "," : "", i);
    snprintf(big + len, sizeof big - len, "]}");
    expect(big, "context_length");

    /* defaults are filled in */
    json_t *spec = json_loads("{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64}", 0, NULL);
    const jobkind *kind = NULL;
    api_error err = {0};
    CHECK(spec_validate(spec, &kind, &err) == 0 && kind && strcmp(kind->name, "benchmark") == 0, "validate");
    CHECK(json_integer_value(json_object_get(spec, "batch_size")) == 4, "batch_size default");
    CHECK(json_integer_value(json_object_get(spec, "warmup_steps")) == 5, "warmup default");
    CHECK(json_integer_value(json_object_get(spec, "measure_steps")) == 10, "measure default");
    CHECK(strcmp(json_string_value(json_object_get(spec, "mode")), "train_step") == 0, "mode default");
    CHECK(strcmp(json_string_value(json_object_get(spec, "precision")), "fp32") == 0, "precision default");
    json_decref(spec);
}

/* The cell of row under the column named name (borrowed), NULL when the table has no such column. */
static const json_t *table_cell(const json_t *table, const json_t *row, const char *name)
{
    const json_t *columns = json_object_get(table, "columns");
    for (size_t c = 0; c < json_array_size(columns); c++)
        if (strcmp(json_string_value(json_array_get(columns, c)), name) == 0)
            return json_array_get(row, c);
    return NULL;
}

/* The text of a string cell, "" for anything else (a missing column fails the check, not the process). */
static const char *cell_text(const json_t *cell)
{
    return json_is_string(cell) ? json_string_value(cell) : "";
}

static const char *run_json =
    "{\"status\":\"succeeded\",\"error\":null,\"model\":\"tiny\",\"d_model\":512,\"d_ff\":1344,"
    "\"num_layers\":4,\"num_heads\":16,\"context_length\":64,\"batch_size\":4,\"vocab_size\":10000,"
    "\"precision\":\"fp32\",\"mode\":\"forward_backward\",\"attention\":\"naive\",\"warmup_steps\":1,"
    "\"measure_steps\":2,\"seed\":0,\"graphs\":false,\"parameters\":22696448,"
    "\"steps\":[{\"step\":0,\"warmup\":true,\"forward_ms\":20.0,\"backward_ms\":40.0,\"optimizer_ms\":null,\"total_ms\":60.0},"
    "{\"step\":1,\"warmup\":false,\"forward_ms\":12.0,\"backward_ms\":30.0,\"optimizer_ms\":null,\"total_ms\":42.0},"
    "{\"step\":2,\"warmup\":false,\"forward_ms\":13.0,\"backward_ms\":31.0,\"optimizer_ms\":null,\"total_ms\":44.0}],"
    "\"stats\":{\"forward\":{\"mean_ms\":12.5,\"std_ms\":0.7071,\"median_ms\":12.5,\"min_ms\":12.0,\"max_ms\":13.0},"
    "\"backward\":{\"mean_ms\":30.5,\"std_ms\":0.7071,\"median_ms\":30.5,\"min_ms\":30.0,\"max_ms\":31.0},"
    "\"optimizer\":null,"
    "\"total\":{\"mean_ms\":43.0,\"std_ms\":1.4142,\"median_ms\":43.0,\"min_ms\":42.0,\"max_ms\":44.0}},"
    "\"tokens_per_s\":5953.5,\"flops_per_step\":1.0e10,\"achieved_tflops\":0.2326,\"mfu\":null,"
    "\"peak_memory_bytes\":300000000,\"estimated_memory_bytes\":310000000}";

static void test_store(void)
{
    sqlite3 *db;
    MUST(sqlite3_open(":memory:", &db));
    for (const schema_file *f = schema_files; f->name; f++) {
        size_t n = strlen(f->name);
        if (n > 4 && strcmp(f->name + n - 4, ".sql") == 0) {
            char *msg = NULL;
            if (sqlite3_exec(db, f->text, NULL, NULL, &msg) != SQLITE_OK) {
                CHECK(0, "migration %s: %s", f->name, msg);
                sqlite3_free(msg);
            }
        }
    }
    MUST(sqlite3_exec(db,
                      "INSERT INTO jobs (id, kind, spec, created_at, timeout_s) VALUES (7, 'benchmark', '{}', 'now', 60);"
                      "INSERT INTO runs (id, job_id, run_index, status, created_at, result) VALUES (70, 7, 0, 'succeeded', 'now', '{}');"
                      "INSERT INTO runs (id, job_id, run_index, status, created_at, result) VALUES (71, 7, 1, 'failed', 'now', '{}');",
                      NULL, NULL, NULL));
    const jobkind *k = jobkind_find("benchmark");
    CHECK(k != NULL, "benchmark kind not registered");
    if (!k)
        return;
    json_t *run = json_loads(run_json, 0, NULL), *spec = json_object();
    CHECK(run != NULL, "run json");
    CHECK(k->store_run(db, 7, 70, spec, run) == SQLITE_OK, "store_run: %s", sqlite3_errmsg(db));
    json_t *bad = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:b, s:I}", "status", "failed",
                            "error", "does not fit: estimated memory 31266.7 MiB", "model", "xl", "context_length", 128,
                            "batch_size", 4, "vocab_size", 10000, "precision", "bf16", "mode", "train_step",
                            "attention", "naive", "warmup_steps", 5, "measure_steps", 10, "seed", 0, "graphs", 0,
                            "estimated_memory_bytes", (json_int_t)32785520192);
    CHECK(k->store_run(db, 7, 71, spec, bad) == SQLITE_OK, "store_run failed point: %s", sqlite3_errmsg(db));

    sqlite3_stmt *st;
    MUST(sqlite3_prepare_v2(db, "SELECT count(*), sum(warmup) FROM benchmark_samples", -1, &st, NULL));
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 9 && sqlite3_column_int(st, 1) == 3,
          "samples: %d rows", sqlite3_column_int(st, 0));
    sqlite3_finalize(st);
    MUST(sqlite3_prepare_v2(db, "SELECT model, context_length, fwd_ms, bwd_ms, opt_ms FROM benchmark_summary "
                                "WHERE run_id = 70", -1, &st, NULL));
    CHECK(sqlite3_step(st) == SQLITE_ROW, "summary row");
    CHECK(strcmp((const char *)sqlite3_column_text(st, 2), "12.50 ± 0.71") == 0, "summary fwd '%s'",
          sqlite3_column_text(st, 2));
    CHECK(strcmp((const char *)sqlite3_column_text(st, 3), "30.50 ± 0.71") == 0, "summary bwd");
    CHECK(sqlite3_column_type(st, 4) == SQLITE_NULL, "summary opt should be NULL");
    sqlite3_finalize(st);
    MUST(sqlite3_prepare_v2(db, "SELECT forward_median_ms, total_max_ms, graphs, estimated_memory_bytes "
                                "FROM benchmark_runs WHERE run_id = 70", -1, &st, NULL));
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_double(st, 0) == 12.5 &&
              sqlite3_column_double(st, 1) == 44.0 && sqlite3_column_int(st, 2) == 0 &&
              sqlite3_column_int64(st, 3) == 310000000,
          "benchmark_runs columns");
    sqlite3_finalize(st);

    json_t *table = NULL;
    api_error err = {0};
    CHECK(k->table(db, 7, &table, &err) == 0 && table, "table: %s", err.message);
    json_t *rows = json_object_get(table, "rows");
    CHECK(json_array_size(rows) == 2, "table rows %zu", json_array_size(rows));
    json_t *r0 = json_array_get(rows, 0), *r1 = json_array_get(rows, 1);
    const json_t *columns = json_object_get(table, "columns");
    CHECK(strcmp(cell_text(table_cell(table, r0, "Model")), "tiny") == 0, "table model");
    /* the shape beside the name, as seed 004's table */
    CHECK(json_integer_value(table_cell(table, r0, "d_model")) == 512 &&
              json_integer_value(table_cell(table, r0, "d_ff")) == 1344 &&
              json_integer_value(table_cell(table, r0, "Layers")) == 4 &&
              json_integer_value(table_cell(table, r0, "Heads")) == 16,
          "table shape columns");
    CHECK(strcmp(cell_text(table_cell(table, r0, "Fwd Pass (ms)")), "12.50 ± 0.71") == 0, "table fwd");
    CHECK(strcmp(cell_text(table_cell(table, r0, "Opt Step (ms)")), "-") == 0, "table opt");
    /* the whole step: forward + backward of a forward_backward run */
    CHECK(strcmp(cell_text(table_cell(table, r0, "Total (ms)")), "43.00 ± 1.41") == 0, "table total");
    CHECK(table_cell(table, r0, "Speedup vs fp32 (×)") == NULL, "speedup column in a job of one precision");
    CHECK(strstr(cell_text(table_cell(table, r1, "Status")), "does not fit") != NULL, "failed row status");
    /* tokens/s, TFLOP/s and peak MiB are numbers (with decimals 0, 3, 1), null on the failed row */
    CHECK(json_is_real(table_cell(table, r0, "Tokens/s")) &&
              json_real_value(table_cell(table, r0, "Tokens/s")) == 5953.5 &&
              json_real_value(table_cell(table, r0, "TFLOP/s")) == 0.2326 &&
              json_real_value(table_cell(table, r0, "Peak Memory (MiB)")) == 300000000 / (1024.0 * 1024.0),
          "table figures as numbers");
    CHECK(json_is_null(table_cell(table, r1, "Tokens/s")) && json_is_null(table_cell(table, r1, "TFLOP/s")) &&
              json_is_null(table_cell(table, r1, "Peak Memory (MiB)")),
          "failed row figures null");
    CHECK(json_array_size(columns) == json_array_size(r0) &&
              json_array_size(json_object_get(table, "decimals")) == json_array_size(r0),
          "columns vs cells vs decimals");
    json_decref(table);
    json_decref(run);
    json_decref(bad);
    json_decref(spec);
    sqlite3_close(db);
}

/* A job that ran fp32 and bf16 at the same points (seed 002's mixed-precision
 * summary): the table and benchmark_summary give bf16's speedup over fp32 by
 * the mean total step time, 1 on the fp32 row, nothing where a point has no
 * fp32 run. */
static void test_speedup(void)
{
    sqlite3 *db;
    MUST(sqlite3_open(":memory:", &db));
    for (const schema_file *f = schema_files; f->name; f++) {
        size_t n = strlen(f->name);
        if (n > 4 && strcmp(f->name + n - 4, ".sql") == 0)
            MUST(sqlite3_exec(db, f->text, NULL, NULL, NULL));
    }
    MUST(sqlite3_exec(db,
                      "INSERT INTO jobs (id, kind, spec, created_at, timeout_s) VALUES (8, 'benchmark', '{}', 'now', 60);"
                      "INSERT INTO runs (id, job_id, run_index, status, created_at, result) VALUES (80, 8, 0, 'succeeded', 'now', '{}');"
                      "INSERT INTO runs (id, job_id, run_index, status, created_at, result) VALUES (81, 8, 1, 'succeeded', 'now', '{}');"
                      "INSERT INTO runs (id, job_id, run_index, status, created_at, result) VALUES (82, 8, 2, 'succeeded', 'now', '{}');",
                      NULL, NULL, NULL));
    const jobkind *k = jobkind_find("benchmark");
    json_t *spec = json_object();
    json_t *fp32 = json_loads(run_json, 0, NULL), *bf16 = json_loads(run_json, 0, NULL),
           *bf16_other_context = json_loads(run_json, 0, NULL);
    json_object_set_new(bf16, "precision", json_string("bf16"));
    json_object_set_new(json_object_get(json_object_get(bf16, "stats"), "total"), "mean_ms", json_real(21.5));
    json_object_set_new(bf16_other_context, "precision", json_string("bf16"));
    json_object_set_new(bf16_other_context, "context_length", json_integer(128));
    CHECK(k->store_run(db, 8, 80, spec, fp32) == SQLITE_OK, "store fp32: %s", sqlite3_errmsg(db));
    CHECK(k->store_run(db, 8, 81, spec, bf16) == SQLITE_OK, "store bf16: %s", sqlite3_errmsg(db));
    CHECK(k->store_run(db, 8, 82, spec, bf16_other_context) == SQLITE_OK, "store bf16: %s", sqlite3_errmsg(db));

    json_t *table = NULL;
    api_error err = {0};
    CHECK(k->table(db, 8, &table, &err) == 0 && table, "table: %s", err.message);
    const json_t *rows = json_object_get(table, "rows");
    const char *col = "Speedup vs fp32 (×)";
    CHECK(json_array_size(rows) == 3, "rows %zu", json_array_size(rows));
    CHECK(json_real_value(table_cell(table, json_array_get(rows, 0), col)) == 1.0, "fp32 row speedup");
    CHECK(json_real_value(table_cell(table, json_array_get(rows, 1), col)) == 2.0, "bf16 speedup over fp32");
    CHECK(json_is_null(table_cell(table, json_array_get(rows, 2), col)), "no fp32 run at context 128: null");
    CHECK(json_array_size(json_object_get(table, "columns")) == json_array_size(json_array_get(rows, 0)),
          "columns vs cells");
    json_decref(table);

    sqlite3_stmt *st;
    MUST(sqlite3_prepare_v2(db, "SELECT d_model, tot_ms, speedup_vs_fp32 FROM benchmark_summary "
                                "WHERE job_id = 8 ORDER BY run_id", -1, &st, NULL));
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 512 &&
              strcmp((const char *)sqlite3_column_text(st, 1), "43.00 ± 1.41") == 0 &&
              sqlite3_column_double(st, 2) == 1.0,
          "summary fp32 row");
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_double(st, 2) == 2.0, "summary bf16 speedup");
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 2) == SQLITE_NULL, "summary: no fp32 peer");
    sqlite3_finalize(st);
    json_decref(fp32);
    json_decref(bf16);
    json_decref(bf16_other_context);
    json_decref(spec);
    sqlite3_close(db);
}

/* Opens an in-memory database migrated with the embedded schema. */
static sqlite3 *migrated_db(void)
{
    sqlite3 *db = NULL;
    MUST(sqlite3_open(":memory:", &db));
    for (const schema_file *f = schema_files; f->name; f++) {
        size_t n = strlen(f->name);
        if (n > 4 && strcmp(f->name + n - 4, ".sql") == 0)
            MUST(sqlite3_exec(db, f->text, NULL, NULL, NULL));
    }
    return db;
}

/* The decimals of a "mean ± std" text's mean and std ("12.50 ± 0.71": 2, 2); -1 when it is not such text. */
static void pm_decimals(const char *text, int *mean, int *std)
{
    const char *sep = text ? strstr(text, " ± ") : NULL;
    *mean = *std = -1;
    if (!sep)
        return;
    const char *dot = strchr(text, '.');
    *mean = dot && dot < sep ? (int)(sep - dot - 1) : 0;
    dot = strchr(sep, '.');
    *std = dot ? (int)strlen(dot + 1) : 0;
}

/* One job's runs of very different scales (a large model's 12.7 ms forward, a tiny one's 0.094 ms; a forward
 * that rounds to 1.00 and one of 4.44): each phase column, in the job's table and in benchmark_summary, has one
 * count of decimals, that of its smallest mean (3 significant digits, 2 to 4), mean and std alike; another job's
 * runs do not change it. */
static void test_column_decimals(void)
{
    sqlite3 *db = migrated_db();
    const jobkind *k = jobkind_find("benchmark");
    json_t *spec = json_object();
    static const double fwd[] = {12.734, 4.4449, 0.0941}, fwd_std[] = {0.061, 0.08, 0.0031};
    static const double bwd[] = {30.5, 8.25, 2.0};
    static const char *const want_fwd[] = {"12.7340 ± 0.0610", "4.4449 ± 0.0800", "0.0941 ± 0.0031"};
    static const char *const want_bwd[] = {"30.50 ± 0.71", "8.25 ± 0.71", "2.00 ± 0.71"};
    /* job 9: the three runs; job 10: one run of 0.0012 ms, which must not change job 9's decimals */
    for (int i = 0; i < 4; i++) {
        char sql[512];
        int64_t job = i < 3 ? 9 : 10;
        snprintf(sql, sizeof sql,
                 "INSERT OR IGNORE INTO jobs (id, kind, spec, created_at, timeout_s) VALUES (%lld, 'benchmark', '{}', "
                 "'now', 60); INSERT INTO runs (id, job_id, run_index, status, created_at, result) VALUES (%d, %lld, "
                 "%d, 'succeeded', 'now', '{}');",
                 (long long)job, 90 + i, (long long)job, i);
        MUST(sqlite3_exec(db, sql, NULL, NULL, NULL));
        json_t *run = json_loads(run_json, 0, NULL);
        json_t *stats = json_object_get(run, "stats");
        json_object_set_new(json_object_get(stats, "forward"), "mean_ms", json_real(i < 3 ? fwd[i] : 0.0012));
        json_object_set_new(json_object_get(stats, "forward"), "std_ms", json_real(i < 3 ? fwd_std[i] : 0.0001));
        json_object_set_new(json_object_get(stats, "backward"), "mean_ms", json_real(i < 3 ? bwd[i] : 0.5));
        json_object_set_new(run, "context_length", json_integer(64 << i)); /* points of their own */
        CHECK(k->store_run(db, job, 90 + i, spec, run) == SQLITE_OK, "store run %d: %s", i, sqlite3_errmsg(db));
        json_decref(run);
    }

    json_t *table = NULL;
    api_error err = {0};
    CHECK(k->table(db, 9, &table, &err) == 0 && table, "table: %s", err.message);
    const json_t *rows = json_object_get(table, "rows");
    for (size_t i = 0; i < 3 && i < json_array_size(rows); i++) {
        const json_t *row = json_array_get(rows, i);
        CHECK(strcmp(cell_text(table_cell(table, row, "Fwd Pass (ms)")), want_fwd[i]) == 0, "table fwd of run %zu: '%s'",
              i, cell_text(table_cell(table, row, "Fwd Pass (ms)")));
        CHECK(strcmp(cell_text(table_cell(table, row, "Bwd Pass (ms)")), want_bwd[i]) == 0, "table bwd of run %zu: '%s'",
              i, cell_text(table_cell(table, row, "Bwd Pass (ms)")));
    }
    json_decref(table);

    sqlite3_stmt *st;
    MUST(sqlite3_prepare_v2(db, "SELECT fwd_ms, bwd_ms, tot_ms FROM benchmark_summary WHERE job_id = 9 ORDER BY run_id",
                            -1, &st, NULL));
    int first[3] = {-1, -1, -1};
    for (int i = 0; i < 3; i++) {
        CHECK(sqlite3_step(st) == SQLITE_ROW, "summary row %d", i);
        const char *f = (const char *)sqlite3_column_text(st, 0), *b = (const char *)sqlite3_column_text(st, 1);
        CHECK(f && strcmp(f, want_fwd[i]) == 0, "summary fwd of run %d: '%s', want '%s' (the table's)", i, f ? f : "",
              want_fwd[i]);
        CHECK(b && strcmp(b, want_bwd[i]) == 0, "summary bwd of run %d: '%s'", i, b ? b : "");
        for (int c = 0; c < 3; c++) { /* every phase column: one count, mean and std alike */
            int mean, sd;
            pm_decimals((const char *)sqlite3_column_text(st, c), &mean, &sd);
            CHECK(mean >= 0 && mean == sd && (first[c] < 0 || mean == first[c]),
                  "summary column %d of run %d: '%s' has other decimals than the column's %d", c, i,
                  sqlite3_column_text(st, c), first[c]);
            if (first[c] < 0)
                first[c] = mean;
        }
    }
    sqlite3_finalize(st);
    MUST(sqlite3_prepare_v2(db, "SELECT fwd_ms FROM benchmark_summary WHERE job_id = 10", -1, &st, NULL));
    CHECK(sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "0.0012 ± 0.0001") == 0,
          "the other job's own decimals: '%s'", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    json_decref(spec);
    sqlite3_close(db);
}

int main(void)
{
    test_specs();
    test_store();
    test_speedup();
    test_column_decimals();
    return check_report("benchmark kind");
}
