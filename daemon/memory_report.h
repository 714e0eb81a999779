/* The memory job's analysis of a tracked allocator's event log: peaks per
 * phase, the category breakdown at the peak, the largest allocations, a
 * timeline downsampled for display (peaks kept), and the full event list. */
#ifndef DAEMON_MEMORY_REPORT_H
#define DAEMON_MEMORY_REPORT_H

#include <jansson.h>
#include <stddef.h>

#include "alloc.h"

/* A phase of a run: events [first_event, end_event) of the log. */
typedef struct memory_phase {
    const char *name; /* "init", "forward", "backward", "optimizer" (static) */
    int step;         /* -1 for init */
    size_t first_event, end_event;
    /* The CUDA pool over the phase (the runner samples it at each phase
     * mark): its reserved bytes at the phase's end and its reserved and used
     * high-water marks during the phase. -1 where there is no pool (cpu). */
    int64_t reserved_end, reserved_peak, pool_used_peak;
} memory_phase;

#define MEMORY_TOP_ALLOCATIONS 10

/* Builds the report (new JSON object):
 *   "peak_allocated_bytes", "event_count",
 *   "phases": [{"name","step","start_bytes","peak_bytes","end_bytes","start_ms","end_ms",
 *               "events","reserved_peak_bytes","reserved_end_bytes","pool_used_peak_bytes"}]
 *              (the three pool figures null where the phase has none),
 *   "peak_by_phase": {"forward": bytes, ...}            (max over steps)
 *   "reserved_peak_by_phase": {"forward": bytes, ...} or null (no pool),
 *   "breakdown_at_peak": {"parameter": bytes, ...},
 *   "peak_phase": "backward", "peak_event": index,
 *   "largest_allocations": [{"name","category","bytes","phase","step"}] (≤ 10, largest first),
 *   "timeline": {"categories": [...], "points": [[t_ms, event_index, live_cat0, ...], ...]},
 *   and with include_events: "events": {"names": [...], "phases": [...],
 *     "columns": ["t_ms","action","bytes","category","name","phase"], "rows": [[...]...]}
 * timeline_points bounds the number of timeline points (each bucket of
 * events contributes the point where the total was highest, so the peak is
 * always drawn). Times are ms since the first event. Only the first
 * event_limit events are replayed (SIZE_MAX: all), e.g. those before a
 * failure, not the frees of the clean-up behind it. Out of host memory, the
 * object holds only "report_error" (a message). */
json_t *memory_report(const lmk_allocator *a, const memory_phase *phases, size_t phase_count,
                      size_t timeline_points, int include_events, size_t event_limit);

#endif
