/* The attention job: scaled dot-product attention alone, naive (materialised
 * T×T scores) and/or flash (fused kernels), timed per point of a sweep over
 * dtype × d_head × seq_len × impl (schema/jobs/attention.json,
 * schema/0006_attention.sql).
 *
 * DESIGN: a GPU worker runs each point through lmk_attn_bench_cuda (its own
 * stream and cudaMallocAsync memory; an allocation failure is an OOM row, the
 * run itself succeeds). A CPU worker runs the CPU reference for naive points
 * (so CI can exercise the job) and fails flash points ("flash needs a GPU").
 * A failed point is a row of attention_runs and of the table with its reason
 * (schema/0019_attention_failed.sql), beside the points that ran.
 * FLOPs: the forward is 4·B·H·T²·d, causal counts half; backward 2.5×.
 * GPU state: before each timed loop the worker waits for the board power to
 * fall below half of the limit (gpu_power_settle: a point's figures do not
 * depend on the power cap the previous point ran into), and NVML's SM clock,
 * power and slowdown reasons are sampled while the loops run and stored with
 * the point (schema/0015_attention_timing.sql). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "clock_ms.h"
#include "device.h"
#include "errors.h"
#include "gpu_power.h"
#include "jobkind.h"
#include "stats.h"
#include "status.h"

#define ATTN_MAX_POINTS 512
#define ATTN_FLOP_CONVENTION                                                                 \
    "forward = 4·B·H·T²·d (QKᵀ and PV), causal counts half of it; backward = 2.5× forward "   \
    "(recomputation in the flash backward not counted)"

static const char *const impl_names[] = {"naive", "flash"};

/* Items of a field that is a scalar or a list (borrowed values). */
static size_t list_len(const json_t *v)
{
    return json_is_array(v) ? json_array_size(v) : 1;
}

static const json_t *list_at(const json_t *v, size_t i)
{
    return json_is_array(v) ? json_array_get(v, i) : v;
}

static int impl_count(const json_t *spec, int *first)
{
    const char *impl = json_string_value(json_object_get(spec, "impl"));
    if (!impl || strcmp(impl, "both") == 0) {
        *first = 0;
        return 2;
    }
    *first = strcmp(impl, "flash") == 0;
    return 1;
}

static size_t point_count(const json_t *spec)
{
    int first;
    return (size_t)impl_count(spec, &first) * list_len(json_object_get(spec, "dtype")) *
           list_len(json_object_get(spec, "d_head")) * list_len(json_object_get(spec, "seq_len"));
}

/* The swept field with the most values (seq_len, d_head or dtype; seq_len
 * on a tie): the one a sweep past the limit names. */
static const char *largest_list(const json_t *spec)
{
    static const char *const swept[] = {"seq_len", "d_head", "dtype"};
    const char *largest = swept[0];
    for (size_t i = 1; i < sizeof swept / sizeof swept[0]; i++)
        if (list_len(json_object_get(spec, swept[i])) > list_len(json_object_get(spec, largest)))
            largest = swept[i];
    return largest;
}

static int attention_check(json_t *spec, api_error *err)
{
    int first;
    int impls = impl_count(spec, &first);
    int flash = impls == 2 || first == 1;
    const json_t *ds = json_object_get(spec, "d_head");
    for (size_t i = 0; flash && i < list_len(ds); i++) {
        int d = (int)json_integer_value(list_at(ds, i));
        char field[32] = "d_head";
        if (json_is_array(ds))
            snprintf(field, sizeof field, "d_head[%zu]", i);
        if (!lmk_attn_head_dim_supported(d))
            return api_fail(err, API_ERR_INVALID_SPEC, field,
                            "%s is %d: flash (impl \"%s\") supports d_head 16, 32, 64, 80 and 128; impl \"naive\" "
                            "takes any",
                            field, d, impls == 2 ? "both" : "flash");
    }
    json_int_t B = json_integer_value(json_object_get(spec, "batch"));
    json_int_t H = json_integer_value(json_object_get(spec, "heads"));
    if (B * H > 65535)
        return api_fail(err, API_ERR_INVALID_SPEC, "heads",
                        "batch × heads must be at most 65535 (got %lld)", (long long)(B * H));
    size_t n = point_count(spec);
    if (n > ATTN_MAX_POINTS)
        return api_fail(err, API_ERR_INVALID_SPEC, largest_list(spec),
                        "the sweep has %zu points (impl × dtype × d_head × seq_len: %d × %zu × %zu × %zu); the limit "
                        "is %d",
                        n, impls, list_len(json_object_get(spec, "dtype")), list_len(ds),
                        list_len(json_object_get(spec, "seq_len")), ATTN_MAX_POINTS);
    return 0;
}

/* On a CPU worker only naive float32 points run (bench_cpu; flash points fail
 * "flash needs a GPU"): a sweep with none of them would certainly fail. */
static int attention_check_no_gpu(const json_t *spec, api_error *err)
{
    int first;
    if (impl_count(spec, &first) == 1 && first == LMK_ATTN_FLASH)
        return api_fail(err, API_ERR_INVALID_SPEC, "impl",
                        "flash needs a GPU (impl \"naive\" runs the CPU reference); " JOBKIND_NO_GPU);
    const json_t *dts = json_object_get(spec, "dtype");
    for (size_t i = 0; i < list_len(dts); i++) {
        lmk_dtype dt = LMK_F32;
        if (lmk_dtype_parse(json_string_value(list_at(dts, i)), &dt) == LMK_OK && dt == LMK_F32)
            return 0;
    }
    return api_fail(err, API_ERR_INVALID_SPEC, "dtype",
                    "the CPU reference computes float32 only, other dtypes need a GPU; " JOBKIND_NO_GPU);
}

/* One point on the CPU (reference implementation, float32 only). */
static int bench_cpu(const lmk_attn_shape *s, int warmup, int passes, lmk_attn_bench_result *r,
                     char *errbuf, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (s->dtype != LMK_F32) {
        snprintf(errbuf, errlen, "the cpu reference computes float32 only");
        return LMK_UNSUPPORTED;
    }
    size_t n = (size_t)s->B * s->H * s->T * s->d, rows = (size_t)s->B * s->H * s->T;
    float *buf[8] = {0}, *lse = NULL;
    double *pass_ms = NULL;
    int rc = LMK_OK;
    /* A point that cannot fit in the host's available memory is an OOM row
     * before anything is allocated: each buffer alone may be granted (the
     * kernel overcommits), and filling them would bring the OOM killer onto
     * the worker, or onto another process of the host. The request is then
     * the whole point's. */
    unsigned long long available = device_cpu_available_bytes();
    double need = ((double)n * 8 + (double)rows) * sizeof(float);
    if (available && need > (double)available) {
        r->oom = 1;
        r->oom_request_bytes = need < (double)UINT64_MAX ? (uint64_t)need : UINT64_MAX;
        return LMK_OK;
    }
    for (int i = 0; i < 8; i++)
        if (!(buf[i] = malloc(n * sizeof(float)))) {
            r->oom = 1;
            r->oom_request_bytes = n * sizeof(float);
            goto out;
        }
    if (!(lse = malloc(rows * sizeof(float)))) {
        r->oom = 1;
        r->oom_request_bytes = rows * sizeof(float);
        goto out;
    }
    unsigned x = 12345;
    for (int t = 0; t < 4; t++)
        for (size_t i = 0; i < n; i++) {
            x = x * 1664525u + 1013904223u;
            buf[t][i] = (float)(x >> 8) / 16777216.0f * 2.f - 1.f;
        }
    /* buf: q k v dout o dq dk dv */
    r->mem_before_bwd_bytes = (uint64_t)(5 * n + rows) * sizeof(float);
    for (int i = 0; i < warmup && !rc; i++)
        rc = lmk_attn_cpu_fwd(buf[4], lse, buf[0], buf[1], buf[2], s);
    if (!(pass_ms = malloc((size_t)passes * sizeof *pass_ms))) {
        snprintf(errbuf, errlen, "out of host memory for %d pass times", passes);
        rc = LMK_NOMEM;
        goto out;
    }
    /* per pass, like the GPU: median and mean */
    double sum = 0;
    for (int i = 0; i < passes && !rc; i++) {
        double t0 = monotonic_ms();
        rc = lmk_attn_cpu_fwd(buf[4], lse, buf[0], buf[1], buf[2], s);
        sum += pass_ms[i] = monotonic_ms() - t0;
    }
    if (!rc) {
        r->fwd_ms = lmk_median_sort(pass_ms, passes);
        r->fwd_mean_ms = sum / passes;
    }
    sum = 0;
    for (int i = 0; i < passes && !rc; i++) {
        double t0 = monotonic_ms();
        rc = lmk_attn_cpu_bwd(buf[5], buf[6], buf[7], buf[3], buf[0], buf[1], buf[2], buf[4], lse,
                              s);
        sum += pass_ms[i] = monotonic_ms() - t0;
    }
    if (!rc) {
        r->bwd_ms = lmk_median_sort(pass_ms, passes);
        r->bwd_mean_ms = sum / passes;
    }
    /* the CPU reference is synchronous: forward+backward is the sum */
    r->fwd_bwd_ms = r->fwd_ms + r->bwd_ms;
    r->fwd_bwd_mean_ms = r->fwd_mean_ms + r->bwd_mean_ms;
    if (rc)
        snprintf(errbuf, errlen, "cpu reference: %s", lmk_status_text(rc));
out:
    for (int i = 0; i < 8; i++)
        free(buf[i]);
    free(lse);
    free(pass_ms);
    return rc;
}

#ifdef LMPERF_HAVE_CUDA /* used by the CUDA paths alone */
/* lmk_attn_bench_cuda's hook: settle, then sample while each loop runs. */
static void loop_hook(void *watch, lmk_attn_loop next)
{
    gpu_power_measure(watch, 0);
    if (next != LMK_ATTN_LOOPS_DONE) {
        gpu_power_settle(watch);
        gpu_power_measure(watch, 1);
    }
}
#endif

/* Runs point i; returns the run object (new). `watch` may be NULL. */
static json_t *run_point(run_ctx *ctx, const json_t *spec, size_t i, gpu_power_watch *watch)
{
    int first;
    int impls = impl_count(spec, &first);
    const json_t *dts = json_object_get(spec, "dtype"), *ds = json_object_get(spec, "d_head"),
                 *ts = json_object_get(spec, "seq_len");
    size_t ni = (size_t)impls, nt = list_len(ts), nd = list_len(ds);
    int impl = first + (int)(i % ni);
    size_t it = (i / ni) % nt, id = (i / ni / nt) % nd, idt = i / ni / nt / nd;
    const char *dtname = json_string_value(list_at(dts, idt));
    lmk_attn_shape s = {
        .B = (int)json_integer_value(json_object_get(spec, "batch")),
        .H = (int)json_integer_value(json_object_get(spec, "heads")),
        .T = (int)json_integer_value(list_at(ts, it)),
        .d = (int)json_integer_value(list_at(ds, id)),
        .causal = json_is_true(json_object_get(spec, "causal")),
        .dtype = LMK_F32,
        .atomic_dq = !json_is_true(json_object_get(spec, "deterministic")),
    };
    lmk_dtype_parse(dtname, &s.dtype);
    int passes = (int)json_integer_value(json_object_get(spec, "passes"));
    int warmup = (int)json_integer_value(json_object_get(spec, "warmup"));
    const runctx_device *dev = runctx_device_info(ctx);
    int gpu = dev && dev->gpu_index >= 0;

    json_t *run = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:b, s:i, s:i, s:s, s:s}", "impl",
                            impl_names[impl], "dtype", lmk_dtype_name(s.dtype), "batch", s.B,
                            "heads", s.H, "seq_len", s.T, "d_head", s.d, "causal", s.causal,
                            "passes", passes, "warmup", warmup, "device", gpu ? "cuda" : "cpu",
                            "flop_convention", ATTN_FLOP_CONVENTION);
    lmk_attn_bench_result r;
    memset(&r, 0, sizeof r);
    char err[256] = "";
    int rc;
    if (gpu) {
#ifdef LMPERF_HAVE_CUDA
        gpu_power_reset(watch);
        rc = lmk_attn_bench_cuda(dev->gpu_index, (lmk_attn_impl)impl, &s, warmup, passes,
                                 watch ? loop_hook : NULL, watch, &r, err, sizeof err);
#else
        rc = LMK_UNSUPPORTED;
        snprintf(err, sizeof err, "built without CUDA");
#endif
    } else if (impl == LMK_ATTN_FLASH) {
        rc = LMK_UNSUPPORTED;
        snprintf(err, sizeof err, "flash needs a GPU");
    } else {
        rc = bench_cpu(&s, warmup, passes, &r, err, sizeof err);
    }
    if (rc != LMK_OK) {
        json_object_set_new(run, "status", json_string("failed"));
        json_object_set_new(run, "error", json_string(err[0] ? utf8_repair(err) : lmk_status_text(rc)));
        return run;
    }
    json_object_set_new(run, "status", json_string("succeeded"));
    json_object_set_new(run, "oom", json_boolean(r.oom));
    json_object_set_new(run, "point_status", json_string(r.oom ? "oom" : "ok"));
    double ff = lmk_attn_flops_fwd(&s), fb = lmk_attn_flops_bwd(&s);
    json_object_set_new(run, "fwd_flops", json_real(ff));
    if (r.oom) {
        json_object_set_new(run, "oom_request_bytes", json_integer((json_int_t)r.oom_request_bytes));
        return run;
    }
    json_object_set_new(run, "fwd_ms", json_real(r.fwd_ms));
    json_object_set_new(run, "bwd_ms", json_real(r.bwd_ms));
    json_object_set_new(run, "fwd_bwd_ms", json_real(r.fwd_bwd_ms));
    json_object_set_new(run, "fwd_mean_ms", json_real(r.fwd_mean_ms));
    json_object_set_new(run, "bwd_mean_ms", json_real(r.bwd_mean_ms));
    json_object_set_new(run, "fwd_bwd_mean_ms", json_real(r.fwd_bwd_mean_ms));
    json_object_set_new(run, "mem_before_bwd_bytes",
                        json_integer((json_int_t)r.mem_before_bwd_bytes));
    json_object_set_new(run, "fwd_tflops", json_real(r.fwd_ms > 0 ? ff / r.fwd_ms / 1e9 : 0));
    json_object_set_new(run, "bwd_tflops", json_real(r.bwd_ms > 0 ? fb / r.bwd_ms / 1e9 : 0));
    json_object_set_new(run, "fwd_bwd_tflops",
                        json_real(r.fwd_bwd_ms > 0 ? (ff + fb) / r.fwd_bwd_ms / 1e9 : 0));
    gpu_power_summary g = gpu_power_get(watch);
    if (gpu && g.samples > 0) {
        json_object_set_new(run, "sm_clock_mhz_min", json_integer(g.sm_mhz_min));
        json_object_set_new(run, "sm_clock_mhz_mean", json_real(g.sm_mhz_mean));
        json_object_set_new(run, "power_w_max", json_real(g.power_w_max));
        json_object_set_new(run, "clock_slowdown", json_boolean(g.slowdown));
        json_object_set_new(run, "settle_ms", json_real(g.settle_ms));
    }
    return run;
}

static int attention_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf,
                         size_t errlen)
{
    size_t points = point_count(spec);
    int succeeded = 0, ooms = 0;
    char first_error[320] = "";
    const runctx_device *dev = runctx_device_info(ctx);
    gpu_power_watch *watch = dev && dev->gpu_index >= 0 ? gpu_power_open(dev->gpu_index) : NULL;
    for (size_t i = 0; i < points; i++) {
        if (runctx_cancelled(ctx)) {
            gpu_power_close(watch);
            return LMK_CANCELLED;
        }
        char what[64];
        snprintf(what, sizeof what, "point %zu of %zu", i + 1, points);
        runctx_progress(ctx, (double)i / (double)points, what);
        json_t *run = run_point(ctx, spec, i, watch);
        succeeded += runctx_tally(run, what, first_error, sizeof first_error);
        ooms += json_is_true(json_object_get(run, "oom"));
        runctx_emit_run(ctx, run);
    }
    gpu_power_close(watch);
    runctx_progress(ctx, 1.0, "done");
    int verdict = runctx_sweep_verdict(points, (size_t)succeeded, first_error, errbuf, errlen);
    if (verdict != LMK_OK)
        return verdict;
    *result = json_pack("{s:I, s:i, s:I, s:i, s:s}", "runs", (json_int_t)points, "succeeded",
                        succeeded, "failed", (json_int_t)(points - (size_t)succeeded), "oom", ooms,
                        "flop_convention", ATTN_FLOP_CONVENTION);
    return LMK_OK;
}

/* --- storage ------------------------------------------------------------- */

static int attention_store_run(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec,
                               const json_t *run)
{
    (void)spec;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db,
        "INSERT INTO attention_runs (run_id, job_id, impl, dtype, batch, heads, seq_len, d_head, "
        "causal, passes, device, oom, oom_request_bytes, fwd_ms, bwd_ms, fwd_bwd_ms, "
        "mem_before_bwd_bytes, fwd_flops, fwd_tflops, bwd_tflops, fwd_bwd_tflops, "
        "sm_clock_mhz_min, sm_clock_mhz_mean, power_w_max, clock_slowdown, settle_ms, "
        "fwd_mean_ms, bwd_mean_ms, fwd_bwd_mean_ms, status, error) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, job_id);
    sqlite3_bind_text(st, 3, json_string_value(json_object_get(run, "impl")), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, json_string_value(json_object_get(run, "dtype")), -1, SQLITE_TRANSIENT);
    static const char *const ints[] = {"batch", "heads", "seq_len", "d_head"};
    for (int i = 0; i < 4; i++)
        sqlite3_bind_int64(st, 5 + i, json_integer_value(json_object_get(run, ints[i])));
    sqlite3_bind_int(st, 9, json_is_true(json_object_get(run, "causal")));
    sqlite3_bind_int64(st, 10, json_integer_value(json_object_get(run, "passes")));
    sqlite3_bind_text(st, 11, json_string_value(json_object_get(run, "device")), -1,
                      SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 12, json_is_true(json_object_get(run, "oom")));
    const json_t *req = json_object_get(run, "oom_request_bytes");
    if (json_is_integer(req))
        sqlite3_bind_int64(st, 13, json_integer_value(req));
    else
        sqlite3_bind_null(st, 13);
    static const char *const reals[] = {"fwd_ms", "bwd_ms", "fwd_bwd_ms", "mem_before_bwd_bytes",
                                        "fwd_flops", "fwd_tflops", "bwd_tflops", "fwd_bwd_tflops"};
    for (int i = 0; i < 8; i++)
        jobkind_bind_real_or_null(st, 14 + i, json_object_get(run, reals[i]));
    const json_t *mem = json_object_get(run, "mem_before_bwd_bytes");
    if (json_is_integer(mem))
        sqlite3_bind_int64(st, 17, json_integer_value(mem));
    static const char *const clocks[] = {"sm_clock_mhz_min", "sm_clock_mhz_mean", "power_w_max"};
    for (int i = 0; i < 3; i++)
        jobkind_bind_real_or_null(st, 22 + i, json_object_get(run, clocks[i]));
    const json_t *slow = json_object_get(run, "clock_slowdown");
    if (json_is_boolean(slow))
        sqlite3_bind_int(st, 25, json_is_true(slow));
    else
        sqlite3_bind_null(st, 25);
    jobkind_bind_real_or_null(st, 26, json_object_get(run, "settle_ms"));
    static const char *const means[] = {"fwd_mean_ms", "bwd_mean_ms", "fwd_bwd_mean_ms"};
    for (int i = 0; i < 3; i++)
        jobkind_bind_real_or_null(st, 27 + i, json_object_get(run, means[i]));
    const char *status = json_string_value(json_object_get(run, "status"));
    sqlite3_bind_text(st, 30, status && strcmp(status, "succeeded") == 0 ? "succeeded" : "failed", -1,
                      SQLITE_STATIC);
    jobkind_bind_scalar(st, 31, json_object_get(run, "error"));
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    return rc;
}

static json_t *cell(sqlite3_stmt *st, int c)
{
    switch (sqlite3_column_type(st, c)) {
    case SQLITE_NULL: return json_null();
    case SQLITE_TEXT: return json_string((const char *)sqlite3_column_text(st, c));
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(st, c));
    default: return json_real(sqlite3_column_double(st, c));
    }
}

static int attention_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT dtype, seq_len, d_head, naive_fwd_ms, naive_bwd_ms, flash_fwd_ms, "
                           "flash_bwd_ms, naive_fwd_bwd_ms, flash_fwd_bwd_ms, naive_mem_mib, flash_mem_mib, "
                           "failed FROM attention_summary "
                           "WHERE job_id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "attention table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *row = json_array();
        for (int c = 0; c < 12; c++)
            json_array_append_new(row, cell(st, c));
        json_array_append_new(rows, row);
    }
    sqlite3_finalize(st);
    /* a failed point's cells read "failed"; "failed" says why ("flash: flash
     * needs a GPU"), null when both impls ran. decimals: what attention_summary
     * rounds each column to (ms 4, MiB 1); the api narrows the ms per column.
     * fwd+bwd: attention_runs.fwd_bwd_ms (the flash benchmark's end-to-end
     * column), after the separate times. */
    *table = json_pack("{s:[s,s,s,s,s,s,s,s,s,s,s,s], s:o, s:[n,n,n,i,i,i,i,i,i,i,i,n]}", "columns", "dtype", "seq",
                       "d", "naive fwd (ms)", "naive bwd (ms)", "flash fwd (ms)", "flash bwd (ms)",
                       "naive fwd+bwd (ms)", "flash fwd+bwd (ms)", "naive mem before bwd (MiB)",
                       "flash mem before bwd (MiB)", "failed", "rows", rows, "decimals", 4, 4, 4, 4, 4, 4, 1, 1);
    return 0;
}

const jobkind jobkind_attention = {
    .name = "attention",
    .check = attention_check,
    .check_no_gpu = attention_check_no_gpu,
    .run = attention_run,
    .store_run = attention_store_run,
    .store_failed_runs = 1, /* a failed point is a table row with its reason (0019_attention_failed.sql) */
    .table = attention_table,
};
