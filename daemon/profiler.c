/* CUPTI activity tracing for the profile job. See profiler.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "profiler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LMPERF_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

#ifdef LMPERF_HAVE_CUPTI
#include <cupti.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define PROF_BUFFER_BYTES (8u << 20) /* one CUPTI activity buffer */
#define PROF_BUFFER_ALIGN 8

struct profiler {
    prof_range *ranges;
    size_t nranges, cap_ranges;
    prof_op *ops;
    size_t nops, cap_ops;
    prof_api *apis;
    size_t napis, cap_apis;
    /* marker starts waiting for their end, by id */
    struct pending { uint32_t id; uint64_t start; uint32_t thread; char *name; } *open;
    size_t nopen, cap_open;
    uint64_t dropped;
    int running, nomem;
};

static char injection_path[1024];
static unsigned sessions_started;

unsigned profiler_sessions(void)
{
    return sessions_started;
}

const char *profiler_injection_path(void)
{
    return injection_path;
}

/* Makes room for one more element of p->arr (n used, cap allocated); out of
 * memory it sets p->nomem and runs on_fail (which must leave the function). */
#define GROW(p, arr, n, cap, on_fail)                                          \
    do {                                                                       \
        if ((p)->n == (p)->cap) {                                              \
            size_t nc = (p)->cap ? 2 * (p)->cap : 1024;                        \
            void *nb = realloc((p)->arr, nc * sizeof *(p)->arr);               \
            if (!nb) {                                                         \
                (p)->nomem = 1;                                                \
                on_fail;                                                       \
            }                                                                  \
            (p)->arr = nb;                                                     \
            (p)->cap = nc;                                                     \
        }                                                                      \
    } while (0)

void profiler_range_push(const char *name)
{
#ifdef LMPERF_HAVE_CUDA
    nvtxRangePushA(name);
#else
    (void)name;
#endif
}

void profiler_range_pop(void)
{
#ifdef LMPERF_HAVE_CUDA
    nvtxRangePop();
#endif
}

const prof_range *profiler_ranges(const profiler *p, size_t *count)
{
    *count = p->nranges;
    return p->ranges;
}

const prof_op *profiler_ops(const profiler *p, size_t *count)
{
    *count = p->nops;
    return p->ops;
}

const prof_api *profiler_apis(const profiler *p, size_t *count)
{
    *count = p->napis;
    return p->apis;
}

uint64_t profiler_dropped(const profiler *p)
{
    return p->dropped;
}

static int cmp_range(const void *a, const void *b)
{
    const prof_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : (x->end > y->end ? -1 : x->end < y->end);
}

static int cmp_op(const void *a, const void *b)
{
    const prof_op *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_api_corr(const void *a, const void *b)
{
    const prof_api *x = a, *y = b;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

void profiler_free(profiler *p)
{
    if (!p)
        return;
    if (p->running) {
        char ignored[64];
        profiler_stop(p, ignored, sizeof ignored);
    }
    for (size_t i = 0; i < p->nranges; i++)
        free(p->ranges[i].name);
    for (size_t i = 0; i < p->nops; i++)
        free(p->ops[i].name);
    for (size_t i = 0; i < p->nopen; i++)
        free(p->open[i].name);
    free(p->ranges);
    free(p->ops);
    free(p->apis);
    free(p->open);
    free(p);
}

/* Range depths and kernel launch times, once all records are in. */
static void resolve(profiler *p)
{
    qsort(p->ranges, p->nranges, sizeof *p->ranges, cmp_range);
    for (size_t i = 0; i < p->nranges; i++) {
        int depth = 0;
        for (size_t j = 0; j < i; j++)
            depth += p->ranges[j].thread == p->ranges[i].thread && p->ranges[j].end >= p->ranges[i].end;
        p->ranges[i].depth = depth;
    }
    qsort(p->apis, p->napis, sizeof *p->apis, cmp_api_corr);
    for (size_t i = 0; i < p->nops; i++) {
        prof_api key = {.correlation = p->ops[i].correlation};
        const prof_api *a = bsearch(&key, p->apis, p->napis, sizeof *p->apis, cmp_api_corr);
        if (a) {
            p->ops[i].launch = a->start;
            p->ops[i].launch_thread = a->thread;
        }
    }
    qsort(p->ops, p->nops, sizeof *p->ops, cmp_op);
}

#ifdef LMPERF_HAVE_CUPTI

/* daemon/demangle.cu: abi::__cxa_demangle behind a C name (new or NULL). */
char *lmperf_demangle(const char *mangled);

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static profiler *session; /* the running session (CUPTI callbacks have no user pointer) */
static int callbacks_registered;
static CUpti_SubscriberHandle subscriber; /* the launch callbacks; NULL when not subscribed */

/* Points NVTX at the libcupti this process loaded, before any NVTX call. */
__attribute__((constructor)) static void profiler_set_injection(void)
{
    Dl_info info;
    const char *set = getenv("NVTX_INJECTION64_PATH");
    if (set) {
        snprintf(injection_path, sizeof injection_path, "%s", set);
        return;
    }
    if (dladdr((void *)cuptiActivityEnable, &info) && info.dli_fname && info.dli_fname[0] == '/') {
        snprintf(injection_path, sizeof injection_path, "%s", info.dli_fname);
        setenv("NVTX_INJECTION64_PATH", injection_path, 0);
    }
}

uint64_t profiler_now(void)
{
    uint64_t t = 0;
    return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(PROF_BUFFER_ALIGN, PROF_BUFFER_BYTES);
    *size = *buffer ? PROF_BUFFER_BYTES : 0;
    *max_records = 0;
}

static char *copy_name(profiler *p, const char *name)
{
    char *s = NULL;
    if (name && strncmp(name, "_Z", 2) == 0)
        s = lmperf_demangle(name);
    if (!s)
        s = strdup(name ? name : "?");
    if (!s)
        p->nomem = 1;
    return s;
}

static const char *memcpy_name(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
    }
}

static void add_op(profiler *p, prof_op op)
{
    if (!op.name) {
        p->nomem = 1;
        return;
    }
    GROW(p, ops, nops, cap_ops, {
        free(op.name);
        return;
    });
    p->ops[p->nops++] = op;
}

static void add_marker(profiler *p, const CUpti_ActivityMarker2 *m)
{
    if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        GROW(p, open, nopen, cap_open, return);
        char *name = strdup(m->name ? m->name : "?");
        if (!name) {
            p->nomem = 1;
            return;
        }
        p->open[p->nopen++] = (struct pending){m->id, m->timestamp, m->objectId.pt.threadId, name};
    } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        for (size_t i = p->nopen; i-- > 0;) {
            if (p->open[i].id != m->id)
                continue;
            GROW(p, ranges, nranges, cap_ranges, { /* the range is lost (nomem says so) */
                free(p->open[i].name);
                p->open[i] = p->open[--p->nopen];
                return;
            });
            p->ranges[p->nranges++] = (prof_range){p->open[i].name, p->open[i].start, m->timestamp,
                                                   p->open[i].thread, 0};
            p->open[i] = p->open[--p->nopen];
            return;
        }
    }
}

static void add_record(profiler *p, CUpti_Activity *r)
{
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)r;
        add_op(p, (prof_op){.kind = PROF_KERNEL, .name = copy_name(p, k->name), .start = k->start, .end = k->end,
                            .stream = k->streamId, .correlation = k->correlationId,
                            .grid = {k->gridX, k->gridY, k->gridZ}, .block = {k->blockX, k->blockY, k->blockZ}});
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *c = (const void *)r;
        add_op(p, (prof_op){.kind = PROF_MEMCPY, .name = strdup(memcpy_name(c->copyKind)), .start = c->start,
                            .end = c->end, .stream = c->streamId, .correlation = c->correlationId,
                            .bytes = c->bytes});
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *s = (const void *)r;
        add_op(p, (prof_op){.kind = PROF_MEMSET, .name = strdup("memset"), .start = s->start, .end = s->end,
                            .stream = s->streamId, .correlation = s->correlationId, .bytes = s->bytes});
        break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER:
        add_marker(p, (const CUpti_ActivityMarker2 *)r);
        break;
    default:
        break;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx, (void)size;
    pthread_mutex_lock(&session_lock);
    profiler *p = session;
    CUpti_Activity *r = NULL;
    if (p) {
        while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS)
            add_record(p, r);
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
            p->dropped += dropped;
    }
    pthread_mutex_unlock(&session_lock);
    free(buffer);
}

static const CUpti_ActivityKind traced[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MARKER,
};
#define TRACED_COUNT (sizeof traced / sizeof traced[0])

static void add_api(profiler *p, prof_api a)
{
    GROW(p, apis, napis, cap_apis, return);
    p->apis[p->napis++] = a;
}

/* Runtime and driver calls that put work on the device: launches (kernels,
 * graphs), memcpy, memset. Matched by name so that new API versions count. */
static int puts_work_on_device(const char *name)
{
    return name && (strstr(name, "Launch") || strstr(name, "Memcpy") || strstr(name, "Memset"));
}

/* The calling thread's system id (gettid), cached: the callbacks run on
 * every launch. */
static uint32_t thread_id(void)
{
    static __thread uint32_t tid;
    if (!tid)
        tid = (uint32_t)syscall(SYS_gettid);
    return tid;
}

/* Entry and exit of those calls on the calling thread: the call's times and
 * correlation id (the id of the kernel, memcpy or memset records it makes). */
static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    static __thread int in_runtime; /* runtime launch calls in progress on this thread */
    (void)userdata, (void)cbid;
    const CUpti_CallbackData *cb = data;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        in_runtime += cb->callbackSite == CUPTI_API_ENTER ? 1 : -1;
    else if (in_runtime > 0)
        return; /* the driver call under a runtime launch: its work carries the runtime call's correlation id */
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    pthread_mutex_lock(&session_lock);
    profiler *p = session;
    if (cb->callbackSite == CUPTI_API_ENTER) {
        size_t before = p ? p->napis : 0;
        if (p)
            add_api(p, (prof_api){cb->functionName ? cb->functionName : "api", now, now, thread_id(),
                                  cb->correlationId});
        *cb->correlationData = p && p->napis > before ? p->napis : 0; /* index + 1 */
    } else if (p) {
        uint64_t i = *cb->correlationData;
        if (i && i <= p->napis && p->apis[i - 1].correlation == cb->correlationId)
            p->apis[i - 1].end = now;
    }
    pthread_mutex_unlock(&session_lock);
}

/* Subscribes on_api to the launch, memcpy and memset calls of both domains.
 * Returns CUPTI_SUCCESS or the failing call's result. */
static CUptiResult enable_api_callbacks(void)
{
    static const struct { CUpti_CallbackDomain domain; CUpti_CallbackId size; } domains[] = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE},
    };
    CUptiResult r = cuptiSubscribe(&subscriber, on_api, NULL);
    if (r != CUPTI_SUCCESS) {
        subscriber = NULL;
        return r;
    }
    for (size_t d = 0; d < sizeof domains / sizeof domains[0]; d++) {
        int enabled = 0;
        for (CUpti_CallbackId cbid = 1; cbid < domains[d].size; cbid++) {
            const char *name = NULL;
            if (cuptiGetCallbackName(domains[d].domain, cbid, &name) == CUPTI_SUCCESS && puts_work_on_device(name))
                enabled += cuptiEnableCallback(1, subscriber, domains[d].domain, cbid) == CUPTI_SUCCESS;
        }
        if (!enabled)
            return CUPTI_ERROR_NOT_SUPPORTED;
    }
    return CUPTI_SUCCESS;
}

/* Unsubscribes and detaches CUPTI from the process (cuptiFinalize), so that
 * nothing of it stays in the launch path of later jobs; the next session
 * attaches it again. Called on the thread that makes the CUDA calls, with no
 * call in flight (the caller has synchronised and flushed). */
static void detach(void)
{
    if (subscriber)
        cuptiUnsubscribe(subscriber);
    subscriber = NULL;
    cuptiFinalize();
    callbacks_registered = 0;
}

static void disable_all(void)
{
    for (size_t i = 0; i < TRACED_COUNT; i++)
        cuptiActivityDisable(traced[i]);
}

static int cupti_fail(CUptiResult r, const char *what, char *errbuf, size_t errlen)
{
    const char *text = NULL;
    cuptiGetResultString(r, &text);
    snprintf(errbuf, errlen, "CUPTI unavailable: %s failed: %s (code %d)%s", what, text ? text : "unknown error",
             (int)r,
             r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                 ? "; profiling needs access to GPU performance counters (NVreg_RestrictProfilingToAdminUsers=0 or root)"
             : r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || r == CUPTI_ERROR_NOT_INITIALIZED
                 ? "; another profiler (Nsight Systems, ncu) may be attached"
                 : "");
    return -1;
}

int profiler_start(profiler **out, char *errbuf, size_t errlen)
{
    CUptiResult r;
    profiler *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(errbuf, errlen, "out of host memory");
        return -1;
    }
    pthread_mutex_lock(&session_lock);
    if (session) {
        pthread_mutex_unlock(&session_lock);
        free(p);
        snprintf(errbuf, errlen, "a profiling session is already running in this worker");
        return -1;
    }
    session = p;
    pthread_mutex_unlock(&session_lock);
    if (!callbacks_registered) {
        if ((r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
            goto failed_r;
        callbacks_registered = 1;
    }
    cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM); /* marker threads = gettid, as in on_api */
    if ((r = enable_api_callbacks()) != CUPTI_SUCCESS)
        goto failed_r;
    for (size_t i = 0; i < TRACED_COUNT; i++)
        if ((r = cuptiActivityEnable(traced[i])) != CUPTI_SUCCESS)
            goto failed_r;
    p->running = 1;
    sessions_started++;
    *out = p;
    return 0;
failed_r:
    disable_all();
    detach();
    pthread_mutex_lock(&session_lock);
    session = NULL;
    pthread_mutex_unlock(&session_lock);
    free(p);
    return cupti_fail(r, "starting the session (launch callbacks, activity records)", errbuf, errlen);
}

/* Frees the collected records, keeping the session. Caller holds session_lock. */
static void drop_records(profiler *p)
{
    for (size_t i = 0; i < p->nranges; i++)
        free(p->ranges[i].name);
    for (size_t i = 0; i < p->nops; i++)
        free(p->ops[i].name);
    p->nranges = p->nops = p->napis = 0;
    p->dropped = 0;
}

int profiler_discard(profiler *p, char *errbuf, size_t errlen)
{
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "flushing activity buffers", errbuf, errlen);
    pthread_mutex_lock(&session_lock);
    drop_records(p);
    pthread_mutex_unlock(&session_lock);
    return 0;
}

int profiler_stop(profiler *p, char *errbuf, size_t errlen)
{
    if (!p->running)
        return 0;
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    disable_all();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&session_lock);
    session = NULL;
    pthread_mutex_unlock(&session_lock);
    detach();
    p->running = 0;
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "flushing activity buffers", errbuf, errlen);
    if (p->nomem) {
        snprintf(errbuf, errlen, "out of host memory while collecting CUPTI records");
        return -1;
    }
    resolve(p);
    return 0;
}

#else /* no CUPTI in this build */

uint64_t profiler_now(void)
{
    return 0;
}

int profiler_start(profiler **out, char *errbuf, size_t errlen)
{
    (void)out;
    snprintf(errbuf, errlen, "CUPTI unavailable: this lmperfd was built without CUPTI");
    return -1;
}

int profiler_discard(profiler *p, char *errbuf, size_t errlen)
{
    (void)p, (void)errbuf, (void)errlen;
    return 0;
}

int profiler_stop(profiler *p, char *errbuf, size_t errlen)
{
    (void)errbuf, (void)errlen;
    if (p->running)
        resolve(p);
    p->running = 0;
    return 0;
}

#endif
