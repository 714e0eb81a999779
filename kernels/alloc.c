/* The tracked allocator: counters per category, an event log, interned names. */
#include "alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "status.h"

struct lmk_allocator {
    lmk_backend *backend;              /* borrowed */
    uint64_t live[LMK_MEM_CATEGORY_COUNT];
    uint64_t peak[LMK_MEM_CATEGORY_COUNT];
    uint64_t live_total, peak_total;
    uint64_t at_peak[LMK_MEM_CATEGORY_COUNT];
    int recording;
    lmk_mem_event *events;
    size_t nevents, cap_events;
    /* names: offsets into one char buffer; open-addressing hash of ids */
    char *names;
    size_t names_len, names_cap;
    uint32_t *offsets;                 /* (nnames) */
    uint32_t nnames, cap_names;
    uint32_t *hash;                    /* (hash_cap) id + 1, 0 = empty */
    uint32_t hash_cap;
    uint64_t fail_after, limit;
    uint64_t failed_bytes;
    char failed_name[96];
};

static const char *const category_names[] = {
#define XX(name, text) text,
    LMK_MEM_CATEGORY_MAP(XX)
#undef XX
};

const char *lmk_mem_category_name(lmk_mem_category c)
{
    return (unsigned)c < LMK_MEM_CATEGORY_COUNT ? category_names[c] : "unknown";
}

int lmk_allocator_create(lmk_backend *b, lmk_allocator **out)
{
    lmk_allocator *a = calloc(1, sizeof *a);
    if (!a)
        return LMK_NOMEM;
    a->backend = b;
    a->recording = 1;
    *out = a;
    return LMK_OK;
}

void lmk_allocator_free(lmk_allocator *a)
{
    if (!a)
        return;
    free(a->events);
    free(a->names);
    free(a->offsets);
    free(a->hash);
    free(a);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static int hash_grow(lmk_allocator *a)
{
    uint32_t cap = a->hash_cap ? a->hash_cap * 2 : 256;
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h)
        return LMK_NOMEM;
    for (uint32_t id = 0; id < a->nnames; id++) {
        uint32_t i = hash_str(a->names + a->offsets[id]) & (cap - 1);
        while (h[i])
            i = (i + 1) & (cap - 1);
        h[i] = id + 1;
    }
    free(a->hash);
    a->hash = h;
    a->hash_cap = cap;
    return LMK_OK;
}

/* Sets *id to the interned id of name. */
static int intern(lmk_allocator *a, const char *name, uint32_t *id)
{
    if ((a->nnames + 1) * 2 > a->hash_cap && hash_grow(a))
        return LMK_NOMEM;
    uint32_t i = hash_str(name) & (a->hash_cap - 1);
    while (a->hash[i]) {
        uint32_t cand = a->hash[i] - 1;
        if (strcmp(a->names + a->offsets[cand], name) == 0) {
            *id = cand;
            return LMK_OK;
        }
        i = (i + 1) & (a->hash_cap - 1);
    }
    size_t len = strlen(name) + 1;
    if (a->names_len + len > a->names_cap) {
        size_t cap = a->names_cap ? a->names_cap * 2 : 4096;
        while (cap < a->names_len + len)
            cap *= 2;
        char *p = realloc(a->names, cap);
        if (!p)
            return LMK_NOMEM;
        a->names = p;
        a->names_cap = cap;
    }
    if (a->nnames == a->cap_names) {
        uint32_t cap = a->cap_names ? a->cap_names * 2 : 256;
        uint32_t *p = realloc(a->offsets, cap * sizeof *p);
        if (!p)
            return LMK_NOMEM;
        a->offsets = p;
        a->cap_names = cap;
    }
    memcpy(a->names + a->names_len, name, len);
    a->offsets[a->nnames] = (uint32_t)a->names_len;
    a->names_len += len;
    a->hash[i] = a->nnames + 1;
    *id = a->nnames++;
    return LMK_OK;
}

static void record(lmk_allocator *a, int action, uint64_t bytes, int category, uint32_t name_id)
{
    if (!a->recording)
        return;
    if (a->nevents == a->cap_events) {
        size_t cap = a->cap_events ? a->cap_events * 2 : 1024;
        lmk_mem_event *p = realloc(a->events, cap * sizeof *p);
        if (!p) /* the log is best effort; counters stay exact */
            return;
        a->events = p;
        a->cap_events = cap;
    }
    a->events[a->nevents++] = (lmk_mem_event){
        .time_ns = now_ns(), .bytes = bytes, .name_id = name_id,
        .action = (uint8_t)action, .category = (uint8_t)category};
}

int lmk_tensor_alloc(lmk_allocator *a, lmk_tensor *t, lmk_dtype dtype, size_t numel,
                     lmk_mem_category category, const char *fmt, ...)
{
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    size_t es = lmk_dtype_size(dtype);
    if (!a || !t || es == 0 || numel == 0 || (unsigned)category >= LMK_MEM_CATEGORY_COUNT)
        return LMK_INVALID;
    uint64_t bytes = (uint64_t)numel * es;
    int injected = a->fail_after && --a->fail_after == 0;
    void *p = NULL;
    if (injected || (a->limit && a->live_total + bytes > a->limit) ||
        a->backend->mem_alloc(a->backend, bytes, &p) != LMK_OK) {
        a->failed_bytes = bytes;
        snprintf(a->failed_name, sizeof a->failed_name, "%s", name);
        return LMK_NOMEM;
    }
    uint32_t id;
    if (intern(a, name, &id) != LMK_OK) {
        a->backend->mem_free(a->backend, p);
        return LMK_NOMEM;
    }
    a->live[category] += bytes;
    if (a->live[category] > a->peak[category])
        a->peak[category] = a->live[category];
    a->live_total += bytes;
    if (a->live_total > a->peak_total) {
        a->peak_total = a->live_total;
        memcpy(a->at_peak, a->live, sizeof a->at_peak);
    }
    record(a, LMK_MEM_ALLOC, bytes, category, id);
    *t = (lmk_tensor){.data = p, .numel = numel, .bytes = bytes, .dtype = dtype,
                      .category = category, .name_id = id};
    return LMK_OK;
}

void lmk_tensor_release(lmk_allocator *a, lmk_tensor *t)
{
    if (!a || !t || !t->data)
        return;
    a->backend->mem_free(a->backend, t->data);
    a->live[t->category] -= t->bytes;
    a->live_total -= t->bytes;
    record(a, LMK_MEM_FREE, t->bytes, t->category, t->name_id);
    memset(t, 0, sizeof *t);
}

uint64_t lmk_allocator_live(const lmk_allocator *a, int category)
{
    if (category < 0)
        return a->live_total;
    return category < LMK_MEM_CATEGORY_COUNT ? a->live[category] : 0;
}

uint64_t lmk_allocator_peak(const lmk_allocator *a, int category)
{
    if (category < 0)
        return a->peak_total;
    return category < LMK_MEM_CATEGORY_COUNT ? a->peak[category] : 0;
}

void lmk_allocator_reset_peak(lmk_allocator *a)
{
    memcpy(a->peak, a->live, sizeof a->peak);
    memcpy(a->at_peak, a->live, sizeof a->at_peak);
    a->peak_total = a->live_total;
}

void lmk_allocator_peak_breakdown(const lmk_allocator *a, uint64_t out[LMK_MEM_CATEGORY_COUNT])
{
    memcpy(out, a->at_peak, sizeof a->at_peak);
}

void lmk_allocator_set_recording(lmk_allocator *a, int on)
{
    a->recording = on != 0;
}

void lmk_allocator_clear_events(lmk_allocator *a)
{
    a->nevents = 0;
}

size_t lmk_allocator_event_count(const lmk_allocator *a)
{
    return a->nevents;
}

const lmk_mem_event *lmk_allocator_events(const lmk_allocator *a)
{
    return a->events;
}

const char *lmk_allocator_name(const lmk_allocator *a, uint32_t name_id)
{
    return name_id < a->nnames ? a->names + a->offsets[name_id] : "";
}

void lmk_allocator_fail_after(lmk_allocator *a, uint64_t n)
{
    a->fail_after = n;
}

void lmk_allocator_set_limit(lmk_allocator *a, uint64_t bytes)
{
    a->limit = bytes;
}

uint64_t lmk_allocator_last_failure(const lmk_allocator *a, const char **name)
{
    if (name)
        *name = a->failed_name;
    return a->failed_bytes;
}
