/* Replays an allocator's event log into the memory job's report. */
#include "memory_report.h"

#include <stdlib.h>
#include <string.h>

/* The phase index of event i (phases are ordered and disjoint); -1 if none. */
static int phase_of(const memory_phase *phases, size_t phase_count, size_t i, size_t *cursor)
{
    while (*cursor < phase_count && i >= phases[*cursor].end_event)
        (*cursor)++;
    if (*cursor < phase_count && i >= phases[*cursor].first_event)
        return (int)*cursor;
    return -1;
}

static int64_t signed_bytes(const lmk_mem_event *e)
{
    return e->action == LMK_MEM_ALLOC ? (int64_t)e->bytes : -(int64_t)e->bytes;
}

static json_t *bytes_or_null(int64_t v)
{
    return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

static json_t *categories_json(void)
{
    json_t *names = json_array();
    for (int c = 0; c < LMK_MEM_CATEGORY_COUNT; c++)
        json_array_append_new(names, json_string(lmk_mem_category_name((lmk_mem_category)c)));
    return names;
}

/* Keeps the MEMORY_TOP_ALLOCATIONS largest allocation events (indices), one
 * per name (a buffer allocated again each step is listed once). */
static void consider_top(const lmk_mem_event *ev, size_t i, size_t *top, size_t *top_count)
{
    if (ev[i].action != LMK_MEM_ALLOC)
        return;
    for (size_t k = 0; k < *top_count; k++) {
        if (ev[top[k]].name_id != ev[i].name_id)
            continue;
        if (ev[top[k]].bytes >= ev[i].bytes)
            return;
        memmove(top + k, top + k + 1, (*top_count - k - 1) * sizeof *top); /* re-insert below */
        (*top_count)--;
        break;
    }
    size_t n = *top_count;
    if (n == MEMORY_TOP_ALLOCATIONS && ev[top[n - 1]].bytes >= ev[i].bytes)
        return;
    size_t pos = n < MEMORY_TOP_ALLOCATIONS ? n : n - 1;
    while (pos > 0 && ev[top[pos - 1]].bytes < ev[i].bytes) {
        top[pos] = top[pos - 1];
        pos--;
    }
    top[pos] = i;
    if (n < MEMORY_TOP_ALLOCATIONS)
        (*top_count)++;
}

json_t *memory_report(const lmk_allocator *a, const memory_phase *phases, size_t phase_count,
                      size_t timeline_points, int include_events, size_t event_limit)
{
    const lmk_mem_event *ev = lmk_allocator_events(a);
    size_t n = lmk_allocator_event_count(a);
    if (n > event_limit)
        n = event_limit;
    if (timeline_points < 2)
        timeline_points = 2;
    uint64_t t0 = n ? ev[0].time_ns : 0;

    int64_t live[LMK_MEM_CATEGORY_COUNT] = {0};
    int64_t total = 0, peak = 0;
    size_t peak_event = 0;
    int64_t breakdown[LMK_MEM_CATEGORY_COUNT] = {0};
    size_t top[MEMORY_TOP_ALLOCATIONS], top_count = 0;

    json_t *phase_rows = json_array();
    int64_t *phase_peak = calloc(phase_count ? phase_count : 1, sizeof *phase_peak);
    int64_t *phase_start = calloc(phase_count ? phase_count : 1, sizeof *phase_start);
    int64_t *phase_end = calloc(phase_count ? phase_count : 1, sizeof *phase_end);
    if (!phase_peak || !phase_start || !phase_end) {
        free(phase_peak);
        free(phase_start);
        free(phase_end);
        json_decref(phase_rows);
        return json_pack("{s:s}", "report_error", "out of host memory for the memory report");
    }

    json_t *points = json_array();
    size_t bucket = (n + timeline_points - 1) / timeline_points;
    if (bucket == 0)
        bucket = 1;
    int64_t bucket_best = -1;
    json_t *bucket_point = NULL;

    json_t *event_rows = include_events ? json_array() : NULL;
    size_t cursor = 0, next_start = 0;
    for (size_t i = 0; i < n; i++) {
        int p = phase_of(phases, phase_count, i, &cursor);
        /* phases starting here (empty ones included) begin at the current total */
        for (; next_start < phase_count && phases[next_start].first_event <= i; next_start++) {
            phase_start[next_start] = phase_peak[next_start] = phase_end[next_start] = total;
        }
        live[ev[i].category] += signed_bytes(&ev[i]);
        total += signed_bytes(&ev[i]);
        if (p >= 0 && total > phase_peak[p])
            phase_peak[p] = total;
        if (p >= 0)
            phase_end[p] = total;
        if (total > peak) {
            peak = total;
            peak_event = i;
            memcpy(breakdown, live, sizeof live);
        }
        consider_top(ev, i, top, &top_count);
        if (total > bucket_best) {
            bucket_best = total;
            json_decref(bucket_point);
            bucket_point = json_pack("[f, I]", (double)(ev[i].time_ns - t0) * 1e-6, (json_int_t)i);
            for (int c = 0; c < LMK_MEM_CATEGORY_COUNT; c++)
                json_array_append_new(bucket_point, json_integer(live[c]));
        }
        if ((i + 1) % bucket == 0 || i + 1 == n) {
            json_array_append_new(points, bucket_point);
            bucket_point = NULL;
            bucket_best = -1;
        }
        if (event_rows)
            json_array_append_new(event_rows,
                                  json_pack("[f, i, I, i, I, i]", (double)(ev[i].time_ns - t0) * 1e-6,
                                            ev[i].action, (json_int_t)ev[i].bytes, ev[i].category,
                                            (json_int_t)ev[i].name_id, p));
    }
    json_decref(bucket_point);
    for (; next_start < phase_count; next_start++) /* phases after the last event */
        phase_start[next_start] = phase_peak[next_start] = phase_end[next_start] = total;

    json_t *peak_by_phase = json_object();
    json_t *peak_phase = json_null();
    json_t *reserved_by_phase = NULL;
    cursor = 0;
    int peak_p = n ? phase_of(phases, phase_count, peak_event, &cursor) : -1;
    for (size_t p = 0; p < phase_count; p++) {
        const memory_phase *ph = &phases[p];
        double last_ms = n ? (double)(ev[n - 1].time_ns - t0) * 1e-6 : 0.0;
        double start_ms = ph->first_event < n ? (double)(ev[ph->first_event].time_ns - t0) * 1e-6 : last_ms;
        double end_ms = ph->end_event > ph->first_event && ph->end_event <= n
                            ? (double)(ev[ph->end_event - 1].time_ns - t0) * 1e-6
                            : start_ms; /* an empty phase */
        int64_t end_bytes = phase_end[p]; /* the live total after the phase's last event */
        json_array_append_new(phase_rows,
                              json_pack("{s:s, s:i, s:I, s:I, s:I, s:f, s:f, s:I, s:o, s:o, s:o}", "name", ph->name,
                                        "step", ph->step, "start_bytes", (json_int_t)phase_start[p], "peak_bytes",
                                        (json_int_t)phase_peak[p], "end_bytes", (json_int_t)end_bytes,
                                        "start_ms", start_ms, "end_ms", end_ms, "events",
                                        (json_int_t)(ph->end_event - ph->first_event), "reserved_peak_bytes",
                                        bytes_or_null(ph->reserved_peak), "reserved_end_bytes",
                                        bytes_or_null(ph->reserved_end), "pool_used_peak_bytes",
                                        bytes_or_null(ph->pool_used_peak)));
        json_int_t prev = json_integer_value(json_object_get(peak_by_phase, ph->name));
        if (phase_peak[p] > prev)
            json_object_set_new(peak_by_phase, ph->name, json_integer(phase_peak[p]));
        if (ph->reserved_peak >= 0) {
            if (!reserved_by_phase)
                reserved_by_phase = json_object();
            json_int_t rprev = json_integer_value(json_object_get(reserved_by_phase, ph->name));
            if (!json_object_get(reserved_by_phase, ph->name) || ph->reserved_peak > rprev)
                json_object_set_new(reserved_by_phase, ph->name, json_integer(ph->reserved_peak));
        }
        if ((int)p == peak_p) {
            json_decref(peak_phase);
            peak_phase = json_string(ph->name);
        }
    }

    json_t *breakdown_json = json_object();
    for (int c = 0; c < LMK_MEM_CATEGORY_COUNT; c++)
        json_object_set_new(breakdown_json, lmk_mem_category_name((lmk_mem_category)c), json_integer(breakdown[c]));

    json_t *largest = json_array();
    for (size_t k = 0; k < top_count; k++) {
        size_t i = top[k];
        cursor = 0;
        int p = phase_of(phases, phase_count, i, &cursor);
        json_array_append_new(largest, json_pack("{s:s, s:s, s:I, s:s, s:i}", "name", lmk_allocator_name(a, ev[i].name_id),
                                                 "category", lmk_mem_category_name((lmk_mem_category)ev[i].category),
                                                 "bytes", (json_int_t)ev[i].bytes, "phase",
                                                 p >= 0 ? phases[p].name : "none", "step", p >= 0 ? phases[p].step : -1));
    }

    json_t *report = json_pack("{s:I, s:I, s:o, s:o, s:o, s:o, s:I, s:o, s:{s:o, s:o}}", "peak_allocated_bytes",
                               (json_int_t)peak, "event_count", (json_int_t)n, "phases", phase_rows, "peak_by_phase",
                               peak_by_phase, "breakdown_at_peak", breakdown_json, "peak_phase", peak_phase,
                               "peak_event", (json_int_t)peak_event, "largest_allocations", largest, "timeline",
                               "categories", categories_json(), "points", points);
    json_object_set_new(report, "reserved_peak_by_phase", reserved_by_phase ? reserved_by_phase : json_null());
    if (event_rows) {
        json_t *names = json_array();
        /* names by id: ids are dense from 0 in interning order */
        uint32_t max_id = 0;
        for (size_t i = 0; i < n; i++)
            if (ev[i].name_id > max_id)
                max_id = ev[i].name_id;
        for (uint32_t id = 0; n && id <= max_id; id++)
            json_array_append_new(names, json_string(lmk_allocator_name(a, id)));
        json_t *phase_names = json_array();
        for (size_t p = 0; p < phase_count; p++)
            json_array_append_new(phase_names, json_pack("{s:s, s:i}", "name", phases[p].name, "step", phases[p].step));
        json_object_set_new(report, "events",
                            json_pack("{s:o, s:o, s:o, s:[s,s,s,s,s,s], s:o}", "names", names, "phases", phase_names,
                                      "categories", categories_json(), "columns", "t_ms", "action", "bytes",
                                      "category", "name", "phase", "rows", event_rows));
    }
    free(phase_peak);
    free(phase_start);
    free(phase_end);
    return report;
}
