/* In-process CUPTI activity tracing for the profile job.
 *
 * DESIGN: lmperf's ranges are NVTX push/pop ranges (kernels/model.c and the
 * profile runner). CUPTI sees them as CUPTI_ACTIVITY_KIND_MARKER records only
 * when it is NVTX's injection library, so a constructor in profiler.c sets
 * NVTX_INJECTION64_PATH to the libcupti this binary loaded, at process start
 * (before any NVTX call, which decides injection once per process), unless
 * the variable is already set (Nsight Systems attached: then CUPTI tracing is
 * refused and the job reports it). Without tracing enabled, the injected
 * CUPTI only forwards NVTX calls: benchmark jobs are unaffected.
 *
 * A session enables concurrent-kernel, memcpy, memset and marker activity
 * records, and CUPTI callbacks on just the runtime and driver calls that put
 * work on the device (launch, memcpy, memset: their times and correlation
 * ids; a driver call under a runtime launch is skipped, its work carries the
 * runtime call's id). Runtime and driver API activity records are not used:
 * they record every call (cuBLAS makes several per GEMM) where only the
 * launches are needed. Stop flushes, disables, unsubscribes and detaches
 * CUPTI from the process (cuptiFinalize): tracing is on only between
 * profiler_start and profiler_stop, and as little of CUPTI as possible stays
 * in the launch path of later steps and jobs of the worker (without
 * detaching, an untraced launch-bound forward after a session took 5.2 ms
 * against 2.6-3.9 ms clean on an H200). A kernel is joined to the API call
 * that launched it by correlation id (its launch time), and belongs to every
 * range open at that time (the nsys rule). Timestamps are CUPTI's (ns, one
 * clock for host and device); thread ids are the system's (gettid).
 *
 * CUDA graphs: a kernel of a graph replay carries the correlation id of the
 * cudaGraphLaunch and the id of its node in the instantiated graph. The
 * session records, through CUPTI resource callbacks, when and on which thread
 * each graph node was created (stream capture creates one per captured
 * launch) and which instantiated node was cloned from which: a replayed
 * kernel then belongs to the ranges open when its node was captured, and each
 * replay makes its own instance of those ranges (a "replayed range": no CPU
 * push/pop exists for it; it spans its kernels on the GPU), beside the CPU
 * ranges open around the cudaGraphLaunch (e.g. the runner's "step"). Capture
 * the graphs inside the session and before profiler_discard: the ranges seen
 * until then are kept as the capture's ranges, not counted as instances.
 *
 * Host cost while tracing: the activity records are only queued by CUPTI's
 * buffer callback and parsed at profiler_discard/stop (never while steps
 * run); the buffers CUPTI asks for are zeroed ahead of time (not by CUPTI on
 * the launching thread); the launch callbacks take one uncontended lock and
 * two timestamps. What each part costs is measured with `parts` subsets
 * (tests/profile/profile_launch_cost.cu; H200: kernel records about +1.1 µs
 * per eager launch and +1.0 µs per kernel of a graph replay, the launch
 * callbacks +0.6 µs per launch, marker records +0.17 µs per NVTX push/pop).
 *
 * CUPTI's buffer callbacks carry no user pointer: one session at a time per
 * process (a worker runs one job at a time). */
#ifndef DAEMON_PROFILER_H
#define DAEMON_PROFILER_H

#include <stddef.h>
#include <stdint.h>

typedef struct profiler profiler;

typedef struct prof_range {   /* one NVTX push/pop range, or one replay of a captured one */
    char *name;               /* owned by the profiler */
    uint64_t start, end;      /* ns: CPU push to pop; a replayed range: first kernel start to last end */
    uint32_t thread;          /* system thread id (a replayed range: the launching thread) */
    int depth;                /* 0 = outermost */
    uint32_t replay;          /* 0: a CPU range; else the correlation id of the graph launch it replays in */
} prof_range;

typedef enum prof_op_kind { PROF_KERNEL, PROF_MEMCPY, PROF_MEMSET } prof_op_kind;

typedef struct prof_op {      /* one kernel, memcpy or memset on the device */
    prof_op_kind kind;
    char *name;               /* demangled kernel name or "memcpy HtoD" (owned) */
    uint64_t start, end;      /* ns on the device */
    uint64_t launch;          /* ns: start of the API call that launched it; 0 when unknown */
    uint32_t launch_thread;
    uint32_t stream, correlation;
    uint64_t bytes;           /* memcpy/memset; 0 for kernels */
    int grid[3], block[3];    /* kernels */
    uint64_t graph_node;      /* 0: launched eagerly; else its node in the launched graph (CUPTI's id) */
    uint32_t graph;           /* CUPTI's id of that graph; 0 eagerly */
    uint32_t in_first, in_count; /* its ranges: profiler_memberships()[in_first .. + in_count) */
} prof_op;

typedef struct prof_api {     /* one runtime/driver API call */
    const char *name;         /* static (CUPTI's) */
    uint64_t start, end;
    uint32_t thread, correlation;
} prof_api;

/* What a session records. The profile job records PROF_ALL; subsets exist
 * to measure what each part costs per launch. */
enum {
    PROF_KERNELS = 1u << 0,  /* concurrent-kernel activity records */
    PROF_COPIES = 1u << 1,   /* memcpy and memset activity records */
    PROF_MARKERS = 1u << 2,  /* NVTX ranges (marker records) */
    PROF_LAUNCHES = 1u << 3, /* callbacks on launch/memcpy/memset calls: launch times */
    PROF_GRAPHS = 1u << 4,   /* callbacks on graph-node creation and cloning */
    PROF_ALL = (1u << 5) - 1,
};

/* Starts tracing `parts` (PROF_*). Returns 0 and sets *out (new), or -1 with
 * the reason in errbuf (no CUPTI in this build, insufficient privileges,
 * another profiler attached, a session already running). */
int profiler_start(profiler **out, unsigned parts, char *errbuf, size_t errlen);
/* Flushes every buffer, disables all record kinds and resolves the records
 * (launch times, range nesting). The caller synchronizes the device first.
 * Returns 0 or -1 with errbuf. The session's records stay readable. */
int profiler_stop(profiler *p, char *errbuf, size_t errlen);
/* Flushes and drops every record collected so far (tracing stays on): the
 * runner traces one step and discards it, so CUPTI's first-use cost (lazy
 * instrumentation of the context) is left out of the traced steps. The
 * ranges seen so far are kept as the ranges of graph captures (not counted
 * as instances), and the graph nodes seen so far stay known. Returns 0 or -1
 * with errbuf. */
int profiler_discard(profiler *p, char *errbuf, size_t errlen);
/* Frees the session (stops it first when running). Accepts NULL. */
void profiler_free(profiler *p);

/* The records after profiler_stop (borrowed, valid until profiler_free).
 * Ranges: the CPU ranges sorted by start, then the replayed ranges; ops by
 * start; API calls by correlation id. */
const prof_range *profiler_ranges(const profiler *p, size_t *count);
const prof_op *profiler_ops(const profiler *p, size_t *count);
const prof_api *profiler_apis(const profiler *p, size_t *count);
/* Indexes into profiler_ranges(): op i belongs to the ranges
 * memberships[ops[i].in_first .. + ops[i].in_count) (the nsys rule: every CPU
 * range open on the launching thread at its launch; for a replayed kernel
 * also the replayed ranges of its node's capture). */
const uint32_t *profiler_memberships(const profiler *p, size_t *count);
/* Graph nodes whose creation was recorded, and replayed ops whose node was
 * not among them or was created outside every captured range (they belong
 * to the CPU ranges around their launch only). */
size_t profiler_graph_nodes(const profiler *p);
size_t profiler_unmapped_graph_ops(const profiler *p);
/* Records CUPTI dropped (buffers full): non-zero makes the profile partial. */
uint64_t profiler_dropped(const profiler *p);

/* Sessions started in this process so far (CUPTI may leave part of its
 * cost in the launch path even after it is detached: a baseline measured
 * after a session may not be clean). */
unsigned profiler_sessions(void);
/* CUPTI's clock now (ns); 0 without CUPTI. */
uint64_t profiler_now(void);
/* NVTX push/pop for the runner's own ranges ("step"). */
void profiler_range_push(const char *name);
void profiler_range_pop(void);
/* The libcupti NVTX was pointed at ("" when none). Static. */
const char *profiler_injection_path(void);

#endif
