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
#define PROF_SPARE_BUFFERS 4         /* zeroed buffers kept ready (CUPTI asks for one after every flush) */

struct pending { uint32_t id; uint64_t start; uint32_t thread; char *name; }; /* a marker start */
struct done_buffer { uint8_t *data; size_t valid; };  /* a completed CUPTI buffer, parsed later */
struct graph_node { uint64_t id, at; uint32_t thread; }; /* created at `at` (ns) on `thread` */
struct graph_clone { uint64_t node, original; };        /* instantiation copied original into node */

struct profiler {
    unsigned parts;            /* PROF_* */
    prof_range *ranges;        /* CPU ranges since the last discard, then (after stop) the replayed ones */
    size_t nranges, cap_ranges;
    prof_range *captured;      /* ranges seen before the last discard: graph captures */
    size_t ncaptured, cap_captured;
    prof_op *ops;
    size_t nops, cap_ops;
    prof_api *apis;
    size_t napis, cap_apis;
    uint32_t *members;         /* range indexes of each op (prof_op.in_first, in_count) */
    size_t nmembers, cap_members;
    struct pending *open;      /* marker starts waiting for their end, by id */
    size_t nopen, cap_open;
    struct done_buffer *done;  /* filled by CUPTI's buffer callback (any thread) */
    size_t ndone, cap_done;
    struct graph_node *nodes;
    size_t nnodes, cap_nodes;
    struct graph_clone *clones;
    size_t nclones, cap_clones;
    size_t unmapped;           /* replayed ops whose node creation was not recorded */
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

const uint32_t *profiler_memberships(const profiler *p, size_t *count)
{
    *count = p->nmembers;
    return p->members;
}

uint64_t profiler_dropped(const profiler *p)
{
    return p->dropped;
}

size_t profiler_graph_nodes(const profiler *p)
{
    return p->nnodes;
}

size_t profiler_unmapped_graph_ops(const profiler *p)
{
    return p->unmapped;
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

static int cmp_node(const void *a, const void *b)
{
    const struct graph_node *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_clone(const void *a, const void *b)
{
    const struct graph_clone *x = a, *y = b;
    return x->node < y->node ? -1 : x->node > y->node;
}

static void free_ranges(prof_range *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(r[i].name);
}

static void free_buffers(profiler *p)
{
    for (size_t i = 0; i < p->ndone; i++)
        free(p->done[i].data);
    p->ndone = 0;
}

void profiler_free(profiler *p)
{
    if (!p)
        return;
    if (p->running) {
        char ignored[64];
        profiler_stop(p, ignored, sizeof ignored);
    }
    free_ranges(p->ranges, p->nranges);
    free_ranges(p->captured, p->ncaptured);
    for (size_t i = 0; i < p->nops; i++)
        free(p->ops[i].name);
    for (size_t i = 0; i < p->nopen; i++)
        free(p->open[i].name);
    free_buffers(p);
    free(p->ranges);
    free(p->captured);
    free(p->ops);
    free(p->apis);
    free(p->members);
    free(p->open);
    free(p->done);
    free(p->nodes);
    free(p->clones);
    free(p);
}

/* Depth of each range among the ranges of its thread (r sorted by start). */
static void set_depths(prof_range *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int depth = 0;
        for (size_t j = 0; j < i; j++)
            depth += r[j].thread == r[i].thread && r[j].end >= r[i].end;
        r[i].depth = depth;
    }
}

/* Whether range r was open at time `at`. Threads are not compared: a worker
 * runs a job's launches, captures and ranges on one thread. */
static int open_at(const prof_range *r, uint64_t at)
{
    return r->start <= at && at <= r->end;
}

/* The recorded creation of the node a replayed op ran (following the clones
 * of instantiation back to the captured node); NULL when unknown. */
static const struct graph_node *node_creation(const profiler *p, uint64_t id)
{
    for (int hop = 0; hop < 8; hop++) {
        struct graph_clone ck = {.node = id};
        const struct graph_clone *c = bsearch(&ck, p->clones, p->nclones, sizeof *p->clones, cmp_clone);
        if (!c)
            break;
        id = c->original;
    }
    struct graph_node nk = {.id = id};
    return bsearch(&nk, p->nodes, p->nnodes, sizeof *p->nodes, cmp_node);
}

static int push_member(profiler *p, uint32_t range)
{
    GROW(p, members, nmembers, cap_members, return -1);
    p->members[p->nmembers++] = range;
    return 0;
}

/* One replayed op in one range of its node's capture, and the replayed
 * range made for it. */
struct replay_key { uint32_t correlation, captured; size_t op; uint32_t range; };

static int cmp_replay(const void *a, const void *b)
{
    const struct replay_key *x = a, *y = b;
    if (x->correlation != y->correlation)
        return x->correlation < y->correlation ? -1 : 1;
    if (x->captured != y->captured)
        return x->captured < y->captured ? -1 : 1;
    return x->op < y->op ? -1 : x->op > y->op;
}

static int cmp_replay_op(const void *a, const void *b)
{
    const struct replay_key *x = a, *y = b;
    return x->op < y->op ? -1 : x->op > y->op ? 1 : (x->range < y->range ? -1 : x->range > y->range);
}

/* The (graph launch, captured range) pairs of the replayed ops, sorted by
 * launch then range. Returns 0 or -1 (out of memory). */
static int replay_keys(profiler *p, struct replay_key **out, size_t *count)
{
    struct replay_key *keys = NULL;
    size_t n = 0, cap = 0;
    p->unmapped = 0;
    for (size_t i = 0; i < p->nops; i++) {
        const prof_op *o = &p->ops[i];
        if (!o->graph_node)
            continue;
        const struct graph_node *node = node_creation(p, o->graph_node);
        if (!node) {
            p->unmapped++;
            continue;
        }
        size_t before = n;
        for (size_t c = 0; c < p->ncaptured && p->captured[c].start <= node->at; c++) {
            if (!open_at(&p->captured[c], node->at))
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 1024;
                struct replay_key *nk = realloc(keys, nc * sizeof *keys);
                if (!nk) {
                    free(keys);
                    return -1;
                }
                keys = nk;
                cap = nc;
            }
            keys[n++] = (struct replay_key){o->correlation, (uint32_t)c, i, 0};
        }
        p->unmapped += n == before; /* created outside every captured range (e.g. at instantiation) */
    }
    if (n)
        qsort(keys, n, sizeof *keys, cmp_replay);
    *out = keys;
    *count = n;
    return 0;
}

/* Appends one replayed range per (graph launch, captured range) of keys
 * (sorted by cmp_replay), spanning its ops on the GPU, nested under the CPU
 * ranges open around the launch; sets each key's range. Returns 0 or -1. */
static int add_replayed_ranges(profiler *p, struct replay_key *keys, size_t nkeys, size_t cpu_ranges)
{
    for (size_t k = 0; k < nkeys;) {
        const prof_op *first = &p->ops[keys[k].op];
        prof_range r = {.start = UINT64_MAX, .thread = first->launch_thread, .replay = keys[k].correlation};
        size_t end = k;
        for (; end < nkeys && keys[end].correlation == keys[k].correlation && keys[end].captured == keys[k].captured;
             end++) {
            const prof_op *o = &p->ops[keys[end].op];
            r.start = o->start < r.start ? o->start : r.start;
            r.end = o->end > r.end ? o->end : r.end;
        }
        int outer = 0;
        uint64_t at = first->launch ? first->launch : first->start;
        for (size_t j = 0; j < cpu_ranges && p->ranges[j].start <= at; j++)
            outer += open_at(&p->ranges[j], at);
        r.depth = p->captured[keys[k].captured].depth + outer;
        if (!(r.name = strdup(p->captured[keys[k].captured].name)))
            return -1;
        GROW(p, ranges, nranges, cap_ranges, {
            free(r.name);
            return -1;
        });
        for (size_t j = k; j < end; j++)
            keys[j].range = (uint32_t)p->nranges;
        p->ranges[p->nranges++] = r;
        k = end;
    }
    return 0;
}

/* Launch times, range depths, the replayed ranges and every op's ranges,
 * once all records are in. Returns 0 or -1 (out of memory: p->nomem). */
static int resolve(profiler *p)
{
    qsort(p->ranges, p->nranges, sizeof *p->ranges, cmp_range);
    set_depths(p->ranges, p->nranges);
    qsort(p->captured, p->ncaptured, sizeof *p->captured, cmp_range);
    set_depths(p->captured, p->ncaptured);
    qsort(p->apis, p->napis, sizeof *p->apis, cmp_api_corr);
    qsort(p->nodes, p->nnodes, sizeof *p->nodes, cmp_node);
    qsort(p->clones, p->nclones, sizeof *p->clones, cmp_clone);
    for (size_t i = 0; i < p->nops; i++) {
        prof_api key = {.correlation = p->ops[i].correlation};
        const prof_api *a = bsearch(&key, p->apis, p->napis, sizeof *p->apis, cmp_api_corr);
        if (a) {
            p->ops[i].launch = a->start;
            p->ops[i].launch_thread = a->thread;
        }
    }
    qsort(p->ops, p->nops, sizeof *p->ops, cmp_op);

    struct replay_key *keys = NULL;
    size_t nkeys = 0, cpu_ranges = p->nranges;
    int rc = replay_keys(p, &keys, &nkeys);
    if (rc == 0)
        rc = add_replayed_ranges(p, keys, nkeys, cpu_ranges);
    if (rc == 0 && nkeys)
        qsort(keys, nkeys, sizeof *keys, cmp_replay_op);
    /* every op's ranges: the CPU ranges open at its launch, then its replayed ones */
    size_t k = 0;
    for (size_t i = 0; i < p->nops && rc == 0; i++) {
        prof_op *o = &p->ops[i];
        uint64_t at = o->launch ? o->launch : o->start;
        o->in_first = (uint32_t)p->nmembers;
        for (size_t j = 0; j < cpu_ranges && p->ranges[j].start <= at && rc == 0; j++)
            if (open_at(&p->ranges[j], at))
                rc = push_member(p, (uint32_t)j);
        for (; k < nkeys && keys[k].op == i && rc == 0; k++)
            rc = push_member(p, keys[k].range);
        o->in_count = (uint32_t)(p->nmembers - o->in_first);
    }
    free(keys);
    if (rc)
        p->nomem = 1;
    return rc;
}

#ifdef LMPERF_HAVE_CUPTI

/* daemon/demangle.cu: abi::__cxa_demangle behind a C name (new or NULL). */
char *lmperf_demangle(const char *mangled);

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static profiler *session; /* the running session (CUPTI callbacks have no user pointer) */
static int callbacks_registered;
static CUpti_SubscriberHandle subscriber; /* launch and graph callbacks; NULL when not subscribed */

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

/* Activity buffers handed to CUPTI are zeroed by us, ahead of time: left to
 * CUPTI (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER 0, its default), an 8
 * MiB buffer is zeroed on the launching thread when CUPTI asks for it, in
 * the middle of a traced step. Under session_lock. */
static uint8_t *spare_buffers[PROF_SPARE_BUFFERS];
static int spare_count;

/* A zeroed buffer with its pages touched (new), or NULL. */
static uint8_t *zeroed_buffer(void)
{
    uint8_t *b = malloc(PROF_BUFFER_BYTES);
    if (b)
        memset(b, 0, PROF_BUFFER_BYTES);
    return b;
}

/* Tops the spare buffers up; called outside the traced steps. */
static void refill_spares(void)
{
    pthread_mutex_lock(&session_lock);
    while (spare_count < PROF_SPARE_BUFFERS) {
        uint8_t *b = zeroed_buffer();
        if (!b)
            break;
        spare_buffers[spare_count++] = b;
    }
    pthread_mutex_unlock(&session_lock);
}

static void free_spares(void)
{
    pthread_mutex_lock(&session_lock);
    while (spare_count > 0)
        free(spare_buffers[--spare_count]);
    pthread_mutex_unlock(&session_lock);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    pthread_mutex_lock(&session_lock);
    uint8_t *b = spare_count > 0 ? spare_buffers[--spare_count] : NULL;
    pthread_mutex_unlock(&session_lock);
    *buffer = b ? b : zeroed_buffer();
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
                                                   p->open[i].thread, 0, 0};
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
                            .grid = {k->gridX, k->gridY, k->gridZ}, .block = {k->blockX, k->blockY, k->blockZ},
                            .graph_node = k->graphNodeId, .graph = k->graphId});
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *c = (const void *)r;
        add_op(p, (prof_op){.kind = PROF_MEMCPY, .name = strdup(memcpy_name(c->copyKind)), .start = c->start,
                            .end = c->end, .stream = c->streamId, .correlation = c->correlationId,
                            .bytes = c->bytes, .graph_node = c->graphNodeId, .graph = c->graphId});
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *s = (const void *)r;
        add_op(p, (prof_op){.kind = PROF_MEMSET, .name = strdup("memset"), .start = s->start, .end = s->end,
                            .stream = s->streamId, .correlation = s->correlationId, .bytes = s->bytes,
                            .graph_node = s->graphNodeId, .graph = s->graphId});
        break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER:
        add_marker(p, (const CUpti_ActivityMarker2 *)r);
        break;
    default:
        break;
    }
}

/* Appends a completed buffer to p's queue. Returns 0 or -1 (out of memory:
 * its records are lost, nomem says so). Caller holds session_lock. */
static int queue_buffer(profiler *p, uint8_t *buffer, size_t valid)
{
    GROW(p, done, ndone, cap_done, return -1);
    p->done[p->ndone++] = (struct done_buffer){buffer, valid};
    return 0;
}

/* CUPTI's thread (or the flushing one): only queues the buffer, so that a
 * launch callback never waits behind record parsing while steps run. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) != CUPTI_SUCCESS)
        dropped = 0;
    pthread_mutex_lock(&session_lock);
    if (session) {
        session->dropped += dropped;
        if (valid && queue_buffer(session, buffer, valid) == 0)
            buffer = NULL; /* the session owns it now */
    }
    pthread_mutex_unlock(&session_lock);
    free(buffer);
}

/* Parses the queued buffers into records (caller's thread, after a flush,
 * with no step running). */
static void parse_buffers(profiler *p)
{
    pthread_mutex_lock(&session_lock);
    struct done_buffer *done = p->done;
    size_t ndone = p->ndone;
    p->done = NULL;
    p->ndone = p->cap_done = 0;
    pthread_mutex_unlock(&session_lock);
    for (size_t i = 0; i < ndone; i++) {
        CUpti_Activity *r = NULL;
        while (cuptiActivityGetNextRecord(done[i].data, done[i].valid, &r) == CUPTI_SUCCESS)
            add_record(p, r);
        free(done[i].data);
    }
    free(done);
}

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

/* Graph nodes: when each was created (stream capture: inside the captured
 * launch), and which instantiated node copies which captured one. */
static void on_graph(profiler *p, CUpti_CallbackId cbid, const CUpti_ResourceData *rd)
{
    const CUpti_GraphData *g = rd->resourceDescriptor;
    uint64_t id = 0, original = 0;
    if (!g || cuptiGetGraphNodeId(g->node, &id) != CUPTI_SUCCESS)
        return;
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
        uint64_t now = 0;
        cuptiGetTimestamp(&now);
        GROW(p, nodes, nnodes, cap_nodes, return);
        p->nodes[p->nnodes++] = (struct graph_node){id, now, thread_id()};
    } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && g->originalNode &&
               cuptiGetGraphNodeId(g->originalNode, &original) == CUPTI_SUCCESS) {
        GROW(p, clones, nclones, cap_clones, return);
        p->clones[p->nclones++] = (struct graph_clone){id, original};
    }
}

/* Entry and exit of the launch calls on the calling thread: the call's times
 * and correlation id (the id of the kernel, memcpy or memset records it
 * makes); and the graph-node resource callbacks. */
static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    static __thread int in_runtime; /* runtime launch calls in progress on this thread */
    (void)userdata;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        pthread_mutex_lock(&session_lock);
        if (session)
            on_graph(session, cbid, data);
        pthread_mutex_unlock(&session_lock);
        return;
    }
    const CUpti_CallbackData *cb = data;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        in_runtime += cb->callbackSite == CUPTI_API_ENTER ? 1 : -1;
    else if (in_runtime > 0)
        return; /* the driver call under a runtime launch: its work carries the runtime call's correlation id */
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    pthread_mutex_lock(&session_lock);
    profiler *p = session;
    if (p && !(p->parts & PROF_LAUNCHES))
        p = NULL;
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

/* Subscribes on_api to the parts' callbacks: the launch, memcpy and memset
 * calls of both API domains; graph-node creation and cloning. Returns
 * CUPTI_SUCCESS or the failing call's result. */
static CUptiResult enable_callbacks(unsigned parts)
{
    static const struct { CUpti_CallbackDomain domain; CUpti_CallbackId size; } domains[] = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE},
    };
    CUptiResult r;
    if (!(parts & (PROF_LAUNCHES | PROF_GRAPHS)))
        return CUPTI_SUCCESS;
    if ((r = cuptiSubscribe(&subscriber, on_api, NULL)) != CUPTI_SUCCESS) {
        subscriber = NULL;
        return r;
    }
    for (size_t d = 0; (parts & PROF_LAUNCHES) && d < sizeof domains / sizeof domains[0]; d++) {
        int enabled = 0;
        for (CUpti_CallbackId cbid = 1; cbid < domains[d].size; cbid++) {
            const char *name = NULL;
            if (cuptiGetCallbackName(domains[d].domain, cbid, &name) == CUPTI_SUCCESS && puts_work_on_device(name))
                enabled += cuptiEnableCallback(1, subscriber, domains[d].domain, cbid) == CUPTI_SUCCESS;
        }
        if (!enabled)
            return CUPTI_ERROR_NOT_SUPPORTED;
    }
    if ((parts & PROF_GRAPHS) &&
        ((r = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED)) !=
             CUPTI_SUCCESS ||
         (r = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED)) !=
             CUPTI_SUCCESS))
        return r;
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

/* The activity kinds of each part. */
static const struct { unsigned part; CUpti_ActivityKind kind; } traced[] = {
    {PROF_KERNELS, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {PROF_COPIES, CUPTI_ACTIVITY_KIND_MEMCPY},
    {PROF_COPIES, CUPTI_ACTIVITY_KIND_MEMSET},
    {PROF_MARKERS, CUPTI_ACTIVITY_KIND_MARKER},
};
#define TRACED_COUNT (sizeof traced / sizeof traced[0])

static void disable_all(void)
{
    for (size_t i = 0; i < TRACED_COUNT; i++)
        cuptiActivityDisable(traced[i].kind);
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

int profiler_start(profiler **out, unsigned parts, char *errbuf, size_t errlen)
{
    CUptiResult r;
    profiler *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(errbuf, errlen, "out of host memory");
        return -1;
    }
    p->parts = parts;
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
    uint8_t zeroed = 1; /* our buffers come zeroed (refill_spares); refused by an old CUPTI: it zeroes them itself */
    size_t zeroed_size = sizeof zeroed;
    (void)cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zeroed_size, &zeroed);
    refill_spares();
    if ((r = enable_callbacks(parts)) != CUPTI_SUCCESS)
        goto failed_r;
    for (size_t i = 0; i < TRACED_COUNT; i++)
        if ((parts & traced[i].part) && (r = cuptiActivityEnable(traced[i].kind)) != CUPTI_SUCCESS)
            goto failed_r;
    p->running = 1;
    sessions_started++;
    *out = p;
    return 0;
failed_r:
    disable_all();
    detach();
    free_spares();
    pthread_mutex_lock(&session_lock);
    session = NULL;
    pthread_mutex_unlock(&session_lock);
    free_buffers(p);
    free(p->done);
    free(p);
    return cupti_fail(r, "starting the session (callbacks, activity records)", errbuf, errlen);
}

/* Keeps the ranges collected so far as the captures' ranges and frees the
 * other records, keeping the session and the graph nodes. */
static int keep_captured(profiler *p, prof_range r)
{
    GROW(p, captured, ncaptured, cap_captured, return -1);
    p->captured[p->ncaptured++] = r;
    return 0;
}

static void drop_records(profiler *p)
{
    for (size_t i = 0; i < p->nranges; i++)
        if (keep_captured(p, p->ranges[i]))
            free(p->ranges[i].name); /* lost: nomem says so */
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
    parse_buffers(p);
    pthread_mutex_lock(&session_lock);
    drop_records(p);
    pthread_mutex_unlock(&session_lock);
    refill_spares();
    return 0;
}

int profiler_stop(profiler *p, char *errbuf, size_t errlen)
{
    if (!p->running)
        return 0;
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    disable_all();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    parse_buffers(p);
    pthread_mutex_lock(&session_lock);
    session = NULL;
    pthread_mutex_unlock(&session_lock);
    detach();
    free_spares();
    p->running = 0;
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "flushing activity buffers", errbuf, errlen);
    if (p->nomem || resolve(p)) {
        snprintf(errbuf, errlen, "out of host memory while collecting CUPTI records");
        return -1;
    }
    return 0;
}

#else /* no CUPTI in this build */

uint64_t profiler_now(void)
{
    return 0;
}

int profiler_start(profiler **out, unsigned parts, char *errbuf, size_t errlen)
{
    (void)out, (void)parts;
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
