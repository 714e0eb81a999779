/* Unit test: a profile run's summary lands in the 0005 tables, the table
 * endpoint's rows come back in nsys column order, the trace is kept out of
 * the generic run row and comes back (the /trace and /events endpoints) as
 * Trace Event Format: every event named with ph/pid/tid, X events with
 * numeric ts/dur, flow starts and ends paired by id with bp "e". The phase
 * rows and the CUDA-event overhead land in the 0012 table and columns, how
 * the steps ran (CUDA-graph replays) in the 0013 columns, the gated overhead
 * (gpu_gated) in the 0014 columns, the spread over the steps of the step
 * and phase times (*_std) in the 0028 columns. */
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "../engine/check.h"
#include "jobkind.h"
#include "store.h"

static int count_rows(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    int n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

static json_t *synthetic_run(void)
{
    json_t *trace = json_pack(
        "{s:[{s:s, s:s, s:i, s:{s:s}},"
        "    {s:s, s:s, s:s, s:f, s:f, s:i, s:i},"
        "    {s:s, s:s, s:s, s:f, s:f, s:i, s:i},"
        "    {s:s, s:s, s:s, s:i, s:f, s:i, s:i},"
        "    {s:s, s:s, s:s, s:s, s:i, s:f, s:i, s:i}], s:s}",
        "traceEvents", "name", "process_name", "ph", "M", "pid", 1, "args", "name", "CPU",
        "name", "forward", "cat", "nvtx", "ph", "X", "ts", 0.0, "dur", 10.0, "pid", 1, "tid", 7,
        "name", "gemm", "cat", "kernel", "ph", "X", "ts", 3.0, "dur", 4.0, "pid", 2, "tid", 13,
        "name", "launch", "cat", "flow", "ph", "s", "id", 42, "ts", 1.0, "pid", 1, "tid", 7,
        "name", "launch", "cat", "flow", "ph", "f", "bp", "e", "id", 42, "ts", 3.0, "pid", 2, "tid", 13,
        "displayTimeUnit", "ns");
    json_t *row = json_pack("{s:s, s:i, s:s, s:b, s:i, s:i, s:f, s:f, s:i, s:i, s:f, s:f}", "range", "forward",
                            "range_instances", 1, "kernel", "sm90_xmma_gemm", "is_gemm", 1, "instances", 1,
                            "total_ns", 4000, "avg_ns", 4000.0, "med_ns", 4000.0, "min_ns", 4000, "max_ns", 4000,
                            "std_ns", 0.0, "share_pct", 100.0);
    json_t *all = json_deep_copy(row);
    json_object_set_new(all, "range", json_string("(all)"));
    return json_pack("{s:s, s:n, s:s, s:i, s:i, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f,"
                     " s:[o,o], s:{s:s, s:f, s:f, s:[], s:{s:f, s:f, s:f}},"
                     " s:[{s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s}], s:o}",
                     "status", "succeeded", "error", "model", "tiny", "context_length", 16, "batch_size", 4,
                     "precision", "fp32", "mode", "forward", "warmup_steps", 2, "profile_steps", 1, "kernel_count", 1,
                     "kernel_time_ns", 4000, "unattributed_kernels", 0, "range_count", 1, "dropped_records", 0,
                     "step_ms_unprofiled", 1.0, "step_ms_profiled", 1.05, "overhead_pct", 5.0, "kernel_summary", all,
                     row, "answers", "top_forward_kernel", "sm90_xmma_gemm", "top_forward_calls_per_forward", 1.0,
                     "gemm_share_forward_pct", 100.0, "non_gemm_above_2pct", "attention", "softmax_ns", 1.0,
                     "matmul_ns", 2.0, "flop_ratio_matmul_to_softmax", 51.2, "roofline", "op", "attention softmax",
                     "instances", 1, "flops", 10.0, "bytes", 8.0, "time_ns", 1.0, "tflops", 0.01, "gbps", 8.0,
                     "peak_tflops", 66.9, "peak_gbps", 3000.0, "bound", "memory", "trace", trace);
}

/* Trace Event Format checks; returns the number of problems. */
static int check_trace(const json_t *trace)
{
    int bad = 0, starts = 0, ends = 0;
    const json_t *events = json_object_get(trace, "traceEvents");
    CHECK(json_is_array(events) && json_array_size(events) > 0, "traceEvents is a non-empty array");
    size_t i;
    const json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        int ok = ph && json_is_string(json_object_get(e, "name")) && json_is_integer(json_object_get(e, "pid"));
        if (ok && strcmp(ph, "M") != 0)
            ok = json_is_integer(json_object_get(e, "tid")) && json_is_number(json_object_get(e, "ts"));
        if (ok && strcmp(ph, "X") == 0)
            ok = json_is_number(json_object_get(e, "dur")) && json_number_value(json_object_get(e, "dur")) >= 0;
        if (ok && (strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0)) {
            ok = json_is_integer(json_object_get(e, "id"));
            starts += ph[0] == 's';
            ends += ph[0] == 'f';
            if (ph[0] == 'f')
                ok = ok && json_is_string(json_object_get(e, "bp"));
        }
        bad += !ok;
    }
    CHECK(starts == ends, "flow starts %d, ends %d", starts, ends);
    return bad;
}

int main(void)
{
    char db_path[256], err[256];
    snprintf(db_path, sizeof db_path, "/tmp/lmperf-test-profile-%d.db", (int)getpid());
    store *s = NULL;
    MUST(store_open(db_path, &s, err, sizeof err));
    const jobkind *kind = jobkind_find("profile");
    CHECK(kind && kind->store_run && kind->table && kind->events, "profile kind registered with its callbacks");
    json_t *spec = json_pack("{s:s, s:s, s:i}", "kind", "profile", "model", "tiny", "context_length", 16);
    int64_t id;
    MUST(store_job_insert(s, "profile", NULL, 60, spec, &id));
    MUST(store_job_start(s, id, 0, "gpu0"));
    json_t *run = synthetic_run();
    json_object_set_new(run, "phases",
                        json_pack("[{s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}, "
                                  "{s:s, s:i, s:f, s:f, s:f, s:n, s:n}]",
                                  "phase", "step", "instances", 1, "kernel_ns", 4000.0, "kernel_busy_ns", 3800.0,
                                  "gpu_span_ns", 4200.0,
                                  "range_wall_ns", 10000.0, "event_ns_profiled", 4500.0, "event_ns_unprofiled",
                                  4400.0, "kernel_pct_of_event", 88.9, "gated_ns_profiled", 4300.0,
                                  "gated_ns_unprofiled", 4250.0, "overhead_gated_pct", 1.18, "phase", "forward",
                                  "instances", 1,
                                  "kernel_ns", 4000.0, "gpu_span_ns", 4200.0, "range_wall_ns", 9000.0,
                                  "event_ns_profiled", "event_ns_unprofiled"));
    json_object_set_new(run, "step_gpu_ms_unprofiled", json_real(0.0044));
    json_object_set_new(run, "step_gpu_ms_profiled", json_real(0.0045));
    json_object_set_new(run, "overhead_gpu_pct", json_real(2.27));
    json_object_set_new(run, "kernels_without_launch", json_integer(0));
    json_object_set_new(run, "graphs", json_true());
    json_object_set_new(run, "graphs_scope", json_string("forward"));
    json_object_set_new(run, "graphs_note", json_null());
    json_object_set_new(run, "graph_nodes", json_integer(293));
    json_object_set_new(run, "graph_ops_unmapped", json_integer(0));
    json_object_set_new(run, "replayed_range_count", json_integer(1));
    json_object_set_new(run, "step_gpu_gated_ms_unprofiled", json_real(0.00425));
    json_object_set_new(run, "step_gpu_gated_ms_profiled", json_real(0.0043));
    json_object_set_new(run, "overhead_gpu_gated_pct", json_real(1.18));
    json_object_set_new(run, "gpu_gated_note", json_string("gpu_gated: ..."));
    json_object_set_new(run, "step_ms_unprofiled_std", json_real(0.02));
    json_object_set_new(run, "step_ms_profiled_std", json_real(0.03));
    json_t *step_phase = json_array_get(json_object_get(run, "phases"), 0);
    json_object_set_new(step_phase, "event_ns_profiled_std", json_real(45.0));
    json_object_set_new(step_phase, "event_ns_unprofiled_std", json_real(44.0));
    json_object_set_new(step_phase, "gated_ns_profiled_std", json_real(43.0));
    json_object_set_new(step_phase, "gated_ns_unprofiled_std", json_real(0.0));
    json_object_set_new(step_phase, "gemm_busy_ns", json_real(2600.0));
    json_object_set_new(step_phase, "other_only_ns", json_real(1200.0));
    json_object_set_new(step_phase, "gpu_idle_ns", json_real(400.0));
    CHECK(store_run_add(s, kind, id, 0, spec, run) == STORE_OK, "store a profile run");

    sqlite3 *db = NULL;
    MUST(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL));
    CHECK(count_rows(db, "SELECT count(*) FROM profile_runs WHERE top_forward_kernel = 'sm90_xmma_gemm'") == 1,
          "profile_runs row");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_kernels") == 2, "two kernel summary rows");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_roofline WHERE bound = 'memory'") == 1, "roofline row");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_traces") == 1, "trace stored");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'step' AND event_ns_profiled = 4500 "
                         "AND kernel_pct_of_event > 88") == 1,
          "step phase row with its CUDA-event times");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'forward' AND event_ns_profiled IS NULL "
                         "AND kernel_ns = 4000") == 1,
          "forward phase row, events absent as NULL");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_runs WHERE overhead_gpu_pct > 2.2 AND "
                         "step_gpu_ms_profiled > step_gpu_ms_unprofiled AND kernels_without_launch = 0") == 1,
          "GPU-event overhead columns (0012)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_runs WHERE graphs = 1 AND graphs_scope = 'forward' AND "
                         "graphs_note IS NULL AND graph_nodes = 293 AND graph_ops_unmapped = 0 AND "
                         "replayed_range_count = 1") == 1,
          "graph-replay columns (0013)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_runs WHERE overhead_gpu_gated_pct > 1.1 AND "
                         "step_gpu_gated_ms_profiled > step_gpu_gated_ms_unprofiled AND "
                         "gpu_gated_note LIKE 'gpu_gated:%'") == 1,
          "gated overhead columns (0014)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'step' AND gated_ns_profiled = 4300 AND "
                         "gated_ns_unprofiled = 4250 AND overhead_gated_pct > 1.1") == 1,
          "step phase row with its gated times (0014)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'step' AND kernel_busy_ns = 3800 AND "
                         "kernel_ns = 4000") == 1,
          "step phase row with its busy kernel time (0016)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'step' AND gemm_busy_ns = 2600 AND "
                         "other_only_ns = 1200 AND gpu_idle_ns = 400 AND "
                         "gemm_busy_ns + other_only_ns = kernel_busy_ns AND "
                         "kernel_busy_ns + gpu_idle_ns = gpu_span_ns") == 1,
          "step phase row with its span split by what ran (0030)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'forward' AND gemm_busy_ns IS NULL AND "
                         "other_only_ns IS NULL AND gpu_idle_ns IS NULL") == 1,
          "forward phase row without the split: NULL");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'forward' AND kernel_busy_ns IS NULL") ==
              1,
          "forward phase row without busy time: NULL");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'forward' AND gated_ns_profiled IS NULL "
                         "AND overhead_gated_pct IS NULL") == 1,
          "forward phase row, gated times absent as NULL");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_runs WHERE step_ms_unprofiled_std = 0.02 AND "
                         "step_ms_profiled_std = 0.03") == 1,
          "the steps' wall-clock spread (0028)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'step' AND event_ns_profiled_std = 45 AND "
                         "event_ns_unprofiled_std = 44 AND gated_ns_profiled_std = 43 AND "
                         "gated_ns_unprofiled_std = 0") == 1,
          "step phase row with the spread of its event and gated times (0028)");
    CHECK(count_rows(db, "SELECT count(*) FROM profile_phases WHERE phase = 'forward' AND event_ns_profiled_std IS NULL "
                         "AND gated_ns_unprofiled_std IS NULL") == 1,
          "forward phase row without times: no spread, NULL");
    CHECK(count_rows(db, "SELECT count(*) FROM runs WHERE instr(result, 'traceEvents') > 0") == 0,
          "the trace is not in the generic runs row");

    api_error aerr;
    json_t *table = NULL, *trace = NULL;
    CHECK(store_job_table(s, kind, id, NULL, &table, &aerr) == 0 && json_array_size(json_object_get(table, "rows")) == 2,
          "table rows");
    CHECK(strcmp(json_string_value(json_array_get(json_object_get(table, "columns"), 5)), "NVTX Range") == 0,
          "nsys columns");
    CHECK(store_job_events(s, kind, id, 0, &trace, &aerr) == 0, "trace of run 0");
    CHECK(trace && check_trace(trace) == 0, "trace is Trace Event Format");
    json_t *none = NULL;
    CHECK(store_job_events(s, kind, id, 5, &none, &aerr) != 0 && aerr.code == API_ERR_NOT_FOUND,
          "no trace for an absent run");

    json_decref(table);
    json_decref(trace);
    json_decref(run);
    json_decref(spec);
    sqlite3_close(db);
    store_close(s);
    unlink(db_path);
    return check_failures ? 1 : 0;
}
