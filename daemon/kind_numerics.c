/* The numerics job: the mixed-precision accumulation experiment, on the
 * worker's GPU (real half arithmetic) or emulated exactly on the CPU; and
 * the precision report, recorded by the model itself (lmk_model_trace_
 * precision) during one traced train step per precision. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accumulate.h"
#include "alloc.h"
#include "jobkind.h"
#include "model.h"
#include "status.h"

/* The traced model: small enough to take milliseconds on the cpu backend,
 * every op of the real model (layers merged in the report). */
static const lmk_model_config report_model = {"custom", 64, 16, 32, 64, 2, 2, 10000.0f, LMK_ATTN_NAIVE};
#define REPORT_BATCH 2
#define REPORT_T 8
#define REPORT_COMPUTED_ON "cpu backend (model code shared with cuda)"

#define ACCUMULATE_CHUNK (1ll << 22) /* iterations between cancel checks */

static const struct {
    lmk_dtype accumulator;
    lmk_dtype summand;
    lmk_cast_kind cast;
} accumulation_cases[] = {
    {LMK_F32, LMK_F32, LMK_CAST_NONE},      {LMK_F16, LMK_F16, LMK_CAST_NONE},
    {LMK_F32, LMK_F16, LMK_CAST_IMPLICIT},  {LMK_F32, LMK_F16, LMK_CAST_EXPLICIT},
    {LMK_BF16, LMK_BF16, LMK_CAST_NONE},    {LMK_F32, LMK_BF16, LMK_CAST_IMPLICIT},
    {LMK_F32, LMK_BF16, LMK_CAST_EXPLICIT},
};
#define CASE_COUNT (sizeof accumulation_cases / sizeof accumulation_cases[0])

static const char *const cast_names[] = {"none", "implicit", "explicit"};

static int numerics_check(json_t *spec, api_error *err)
{
    (void)spec;
    (void)err;
    return 0; /* the schema says everything */
}

/* Runs one case in chunks so a long count can be cancelled. */
static int accumulate_case(run_ctx *ctx, int on_gpu, const lmk_accum_case *c, double summand,
                           long long count, double *acc, char *errbuf, size_t errlen)
{
    *acc = 0.0;
    for (long long done = 0; done < count;) {
        long long chunk = count - done < ACCUMULATE_CHUNK ? count - done : ACCUMULATE_CHUNK;
        int rc = on_gpu ? lmk_accumulate_cuda(c, summand, chunk, acc, errbuf, errlen)
                        : lmk_accumulate_cpu(c, summand, chunk, acc);
        if (rc != LMK_OK) {
            if (!errbuf[0])
                snprintf(errbuf, errlen, "accumulation %s/%s: %s", lmk_dtype_name(c->accumulator),
                         lmk_dtype_name(c->summand), lmk_status_text(rc));
            return rc;
        }
        done += chunk;
        if (runctx_cancelled(ctx))
            return LMK_CANCELLED;
    }
    return LMK_OK;
}

/* One traced forward + backward + AdamW step of report_model at precision
 * p; *rows = new JSON array of the model's precision rows. */
static int trace_precision(lmk_backend *b, lmk_precision p, json_t **rows)
{
    lmk_allocator *a = NULL;
    lmk_model *m = NULL;
    int32_t tok[REPORT_BATCH * REPORT_T], tgt[REPORT_BATCH * REPORT_T];
    for (int i = 0; i < REPORT_BATCH * REPORT_T; i++) {
        tok[i] = (i * 7 + 3) % report_model.vocab_size;
        tgt[i] = (i * 5 + 1) % report_model.vocab_size;
    }
    lmk_adamw_config opt = lmk_adamw_defaults();
    int rc = lmk_allocator_create(b, &a);
    if (rc == LMK_OK)
        rc = lmk_model_create(b, a, &report_model, REPORT_BATCH, REPORT_T, p, 1, LMK_MODEL_TRAIN, &m);
    if (rc == LMK_OK)
        rc = lmk_model_set_batch(m, tok, tgt);
    if (rc == LMK_OK) {
        lmk_model_trace_precision(m, 1);
        rc = lmk_model_forward(m, 1);
    }
    if (rc == LMK_OK)
        rc = lmk_model_backward(m);
    if (rc == LMK_OK)
        rc = lmk_model_step(m, &opt);
    if (rc == LMK_OK) {
        json_t *out = json_array();
        for (size_t i = 0; i < lmk_model_precision_row_count(m); i++) {
            const lmk_precision_row *r = lmk_model_precision_row_at(m, i);
            json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "phase", r->phase,
                                                 "op", r->op, "inputs", r->inputs, "output", r->output,
                                                 "accumulate", r->accumulate, "storage", r->storage,
                                                 "calls", r->calls));
        }
        *rows = out;
    }
    lmk_model_free(m);
    lmk_allocator_free(a);
    return rc;
}

static int run_precision_report(run_ctx *ctx, char *errbuf, size_t errlen)
{
    lmk_backend *b = NULL;
    int rc = lmk_backend_cpu_create(&b);
    for (int p = 0; rc == LMK_OK && p < LMK_PREC_COUNT; p++) {
        json_t *rows = NULL;
        rc = trace_precision(b, (lmk_precision)p, &rows);
        if (rc != LMK_OK) {
            snprintf(errbuf, errlen, "precision report %s: %s", lmk_precision_name((lmk_precision)p),
                     lmk_status_text(rc));
            break;
        }
        runctx_emit_run(ctx, json_pack("{s:s, s:n, s:s, s:s, s:s, s:o}", "status", "succeeded", "error",
                                       "experiment", "precision_report", "precision",
                                       lmk_precision_name((lmk_precision)p), "computed_on",
                                       REPORT_COMPUTED_ON, "rows", rows));
        if (runctx_cancelled(ctx))
            rc = LMK_CANCELLED;
    }
    lmk_backend_free(b);
    return rc;
}

static int has_experiment(const json_t *spec, const char *name)
{
    const json_t *list = json_object_get(spec, "experiments");
    size_t i;
    const json_t *e;
    if (!list)
        return strcmp(name, "accumulation") == 0;
    json_array_foreach(list, i, e)
    {
        if (json_is_string(e) && strcmp(json_string_value(e), name) == 0)
            return 1;
    }
    return 0;
}

/* The text of a result JSON cannot hold ("inf", "-inf", "nan"), NULL for a
 * finite one. */
static const char *non_finite_text(double x)
{
    return isnan(x) ? "nan" : isinf(x) ? (x > 0 ? "inf" : "-inf") : NULL;
}

/* One accumulation row (new). A result past the accumulator's range (fp16
 * above 65504: summand 1000, count 100) is "result": null and "error": null
 * with "non_finite": "inf" (JSON has no infinity), not a row left out. */
static json_t *accumulation_row(const lmk_accum_case *c, double acc, double exact)
{
    const char *non_finite = non_finite_text(acc);
    return json_pack("{s:s, s:s, s:s, s:o, s:f, s:o, s:s?}", "accumulator", lmk_dtype_name(c->accumulator),
                     "summand_dtype", lmk_dtype_name(c->summand), "cast", cast_names[c->cast], "result",
                     non_finite ? json_null() : json_real(acc), "exact", exact, "error",
                     non_finite ? json_null() : json_real(acc - exact), "non_finite", non_finite);
}

/* A row's result as a double: "non_finite" read back as the value it names. */
static double row_result(const json_t *row)
{
    const char *non_finite = json_string_value(json_object_get(row, "non_finite"));
    if (!non_finite)
        return json_number_value(json_object_get(row, "result"));
    return strcmp(non_finite, "nan") == 0 ? NAN : strcmp(non_finite, "-inf") == 0 ? -INFINITY : INFINITY;
}

static int numerics_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    int experiments = 0;
    if (has_experiment(spec, "precision_report")) {
        int rc = run_precision_report(ctx, errbuf, errlen);
        if (rc != LMK_OK)
            return rc;
        experiments++;
    }
    if (!has_experiment(spec, "accumulation")) {
        *result = json_pack("{s:i, s:s}", "experiments", experiments, "computed_on", REPORT_COMPUTED_ON);
        return LMK_OK;
    }
    experiments++;
    const runctx_device *dev = runctx_device_info(ctx);
    const char *device = json_string_value(json_object_get(spec, "device"));
    int on_gpu = dev->gpu_index >= 0 && !(device && strcmp(device, "cpu") == 0);
    double summand = json_number_value(json_object_get(spec, "summand"));
    long long count = (long long)json_number_value(json_object_get(spec, "count"));
    char computed_on[32];
    if (on_gpu)
        snprintf(computed_on, sizeof computed_on, "cuda:%d", dev->gpu_index);
    else
        snprintf(computed_on, sizeof computed_on, "cpu (emulated)");

    json_t *rows = json_array();
    errbuf[0] = '\0';
    for (size_t i = 0; i < CASE_COUNT; i++) {
        lmk_accum_case c = {accumulation_cases[i].accumulator, accumulation_cases[i].summand,
                            accumulation_cases[i].cast};
        double acc;
        int rc = accumulate_case(ctx, on_gpu, &c, summand, count, &acc, errbuf, errlen);
        if (rc != LMK_OK) {
            json_decref(rows);
            return rc;
        }
        json_array_append_new(rows, accumulation_row(&c, acc, summand * (double)count));
        runctx_progress(ctx, (double)(i + 1) / CASE_COUNT, "accumulation");
    }
    runctx_emit_run(ctx, json_pack("{s:s, s:n, s:s, s:f, s:I, s:s, s:o}", "status", "succeeded", "error",
                                   "experiment", "accumulation", "summand", summand, "count",
                                   (json_int_t)count, "computed_on", computed_on, "rows", rows));
    *result = json_pack("{s:i, s:s}", "experiments", experiments, "computed_on", computed_on);
    return LMK_OK;
}

static int store_precision(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *run)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO numerics_precision (run_id, job_id, precision, seq, phase, op, "
                                "inputs, output, accumulate, storage, calls, computed_on) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                -1, &st, NULL);
    static const char *const text_fields[] = {"phase", "op", "inputs", "output", "accumulate", "storage"};
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(run, "rows"), i, row)
    {
        if (rc != SQLITE_OK)
            break;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, job_id);
        sqlite3_bind_text(st, 3, json_string_value(json_object_get(run, "precision")), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)i);
        for (int f = 0; f < 6; f++)
            sqlite3_bind_text(st, 5 + f, json_string_value(json_object_get(row, text_fields[f])), -1,
                              SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 11, (sqlite3_int64)json_integer_value(json_object_get(row, "calls")));
        sqlite3_bind_text(st, 12, json_string_value(json_object_get(run, "computed_on")), -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    return rc;
}

static int numerics_store_run(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec,
                              const json_t *run)
{
    (void)spec;
    const char *experiment = json_string_value(json_object_get(run, "experiment"));
    if (experiment && strcmp(experiment, "precision_report") == 0)
        return store_precision(db, job_id, run_id, run);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO numerics_accumulation (run_id, job_id, accumulator_dtype, "
                                "summand_dtype, cast_kind, summand, count, result, exact, error, computed_on) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                -1, &st, NULL);
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(run, "rows"), i, row)
    {
        if (rc != SQLITE_OK)
            break;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, job_id);
        sqlite3_bind_text(st, 3, json_string_value(json_object_get(row, "accumulator")), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 4, json_string_value(json_object_get(row, "summand_dtype")), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 5, json_string_value(json_object_get(row, "cast")), -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(st, 6, json_number_value(json_object_get(run, "summand")));
        sqlite3_bind_int64(st, 7, (sqlite3_int64)json_number_value(json_object_get(run, "count")));
        /* SQLite keeps infinities in REAL columns (NaN would be NULL: it cannot occur, the summand is > 0) */
        double result = row_result(row), exact = json_number_value(json_object_get(row, "exact"));
        sqlite3_bind_double(st, 8, result);
        sqlite3_bind_double(st, 9, exact);
        sqlite3_bind_double(st, 10, result - exact);
        sqlite3_bind_text(st, 11, json_string_value(json_object_get(run, "computed_on")), -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The precision report as one table (precision, phase, op, ...). */
static int precision_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT precision, phase, op, inputs, output, accumulate, storage, calls "
                           "FROM numerics_precision WHERE job_id = ? ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "precision table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *r = json_array();
        for (int c = 0; c < 7; c++)
            json_array_append_new(r, json_string((const char *)sqlite3_column_text(st, c)));
        json_array_append_new(r, json_integer(sqlite3_column_int64(st, 7)));
        json_array_append_new(rows, r);
    }
    sqlite3_finalize(st);
    *table = json_pack("{s:[s,s,s,s,s,s,s,s], s:o}", "columns", "precision", "phase", "op", "inputs", "output",
                       "accumulate", "16-bit storage", "calls", "rows", rows);
    return 0;
}

/* Whether `sql` (a count of one table's rows of job ?) finds any. */
static int job_has_rows(sqlite3 *db, int64_t job_id, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int n = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, job_id);
        if (sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return n > 0;
}

/* The accumulation experiment as one table (accumulator, summand dtype, ...). */
static int accumulation_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT accumulator_dtype, summand_dtype, cast_kind, summand, count, result, exact, "
                           "error, computed_on FROM numerics_accumulation WHERE job_id = ? ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "numerics table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        char summand[32], result[32], exact[32], error[32];
        snprintf(summand, sizeof summand, "%g", sqlite3_column_double(st, 3));
        snprintf(result, sizeof result, "%.7g", sqlite3_column_double(st, 5));
        snprintf(exact, sizeof exact, "%.7g", sqlite3_column_double(st, 6));
        snprintf(error, sizeof error, "%+.3e", sqlite3_column_double(st, 7));
        json_array_append_new(
            rows, json_pack("[s, s, s, s, I, s, s, s, s]", sqlite3_column_text(st, 0), sqlite3_column_text(st, 1),
                            sqlite3_column_text(st, 2), summand, (json_int_t)sqlite3_column_int64(st, 4), result,
                            exact, error, sqlite3_column_text(st, 8)));
    }
    sqlite3_finalize(st);
    *table = json_pack("{s:[s,s,s,s,s,s,s,s,s], s:o}", "columns", "accumulator", "summand dtype", "cast",
                       "summand", "count", "result", "exact", "error", "computed on", "rows", rows);
    return 0;
}

/* The experiments that have a table, each with the count that says whether a
 * job ran it. */
static const struct {
    const char *name;
    int (*table)(sqlite3 *db, int64_t job_id, json_t **table, api_error *err);
    const char *count_sql;
} experiment_tables[] = {
    {"accumulation", accumulation_table, "SELECT count(*) FROM numerics_accumulation WHERE job_id = ?"},
    {"precision_report", precision_table, "SELECT count(*) FROM numerics_precision WHERE job_id = ?"},
};

/* The accumulation table; a job that ran only the precision report gets
 * the precision table (?experiment= picks either). */
static int numerics_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    if (!job_has_rows(db, job_id, experiment_tables[0].count_sql))
        return precision_table(db, job_id, table, err);
    return accumulation_table(db, job_id, table, err);
}

/* ?experiment=NAME: that experiment's table; 400 for a name with no table,
 * 404 when the job did not run it. */
static int numerics_experiment_table(sqlite3 *db, int64_t job_id, const api_table_query *query, json_t **table,
                                     api_error *err)
{
    const char *experiment = query->experiment;
    for (size_t i = 0; i < sizeof experiment_tables / sizeof experiment_tables[0]; i++) {
        if (strcmp(experiment, experiment_tables[i].name) != 0)
            continue;
        if (!job_has_rows(db, job_id, experiment_tables[i].count_sql))
            return api_fail(err, API_ERR_NOT_FOUND, "experiment",
                            "job %lld has no %s table (not in its experiments, or not run yet)", (long long)job_id,
                            experiment);
        return experiment_tables[i].table(db, job_id, table, err);
    }
    return api_fail(err, API_ERR_BAD_REQUEST, "experiment",
                    "experiment must be accumulation or precision_report, not '%s'", experiment);
}

static const char *const numerics_table_params[] = {"experiment", NULL};

const jobkind jobkind_numerics = {
    .name = "numerics",
    .check = numerics_check,
    .run = numerics_run,
    .store_run = numerics_store_run,
    .table = numerics_table,
    .selected_table = numerics_experiment_table,
    .table_params = numerics_table_params,
};
