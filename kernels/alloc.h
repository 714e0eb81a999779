/* The tracked allocator and tensors: every allocation of device memory has a
 * category and a name ("layers.3.attn.scores") and is recorded as an event
 * (time, alloc/free, bytes, category, name) in a log owned by the allocator.
 * Live and peak bytes are kept per category and in total.
 *
 * DESIGN: raw memory comes from the backend's mem_alloc/mem_free, so a CUDA
 * backend backed by a stream-ordered pool makes alloc/free cheap and the
 * timeline shows real lifetimes. Names are interned once; an event costs 24
 * bytes. Not thread-safe: one allocator per model/thread. */
#ifndef LMK_ALLOC_H
#define LMK_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "dtype.h"

#define LMK_MEM_CATEGORY_MAP(XX)              \
    XX(PARAMETER, "parameter")                \
    XX(PARAMETER_COPY, "parameter_copy")      \
    XX(GRADIENT, "gradient")                  \
    XX(OPTIMIZER_STATE, "optimizer_state")    \
    XX(ACTIVATION, "activation")              \
    XX(TEMPORARY, "temporary")                \
    XX(INPUT, "input")                        \
    XX(WORKSPACE, "workspace")

typedef enum lmk_mem_category {
#define XX(name, text) LMK_MEM_##name,
    LMK_MEM_CATEGORY_MAP(XX)
#undef XX
    LMK_MEM_CATEGORY_COUNT
} lmk_mem_category;

/* "parameter", "gradient", ... (static). */
const char *lmk_mem_category_name(lmk_mem_category c);

enum { LMK_MEM_ALLOC = 0, LMK_MEM_FREE = 1 };

typedef struct lmk_mem_event {
    uint64_t time_ns;  /* CLOCK_MONOTONIC */
    uint64_t bytes;
    uint32_t name_id;  /* lmk_allocator_name() */
    uint8_t action;    /* LMK_MEM_ALLOC or LMK_MEM_FREE */
    uint8_t category;  /* lmk_mem_category */
} lmk_mem_event;

typedef struct lmk_allocator lmk_allocator;

/* A tensor: a view of one tracked allocation. Plain value; its memory is
 * owned by the allocator until lmk_tensor_release. */
typedef struct lmk_tensor {
    void *data;          /* device memory, NULL when not allocated */
    size_t numel;
    size_t bytes;
    lmk_dtype dtype;
    lmk_mem_category category;
    uint32_t name_id;
} lmk_tensor;

#define LMK_F(t) ((float *)(t).data)
#define LMK_I(t) ((int32_t *)(t).data)

/* Creates an allocator drawing from backend b (borrowed; must outlive it).
 * Sets *out (new). Returns LMK_OK or LMK_NOMEM. */
int lmk_allocator_create(lmk_backend *b, lmk_allocator **out);
/* Frees the log and names (not tensors still live: release them first). */
void lmk_allocator_free(lmk_allocator *a);

/* Allocates numel elements of dtype into *t, named by printf-style fmt.
 * Returns LMK_OK, LMK_NOMEM (the request is kept: lmk_allocator_last_failure)
 * or LMK_INVALID; *t untouched on failure. */
int lmk_tensor_alloc(lmk_allocator *a, lmk_tensor *t, lmk_dtype dtype, size_t numel,
                     lmk_mem_category category, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Frees t's memory (recording the event) and clears *t; NULL data is a no-op. */
void lmk_tensor_release(lmk_allocator *a, lmk_tensor *t);

/* Live / peak bytes of one category, or of all when category < 0. */
uint64_t lmk_allocator_live(const lmk_allocator *a, int category);
uint64_t lmk_allocator_peak(const lmk_allocator *a, int category);
/* Peaks restart from the live values. */
void lmk_allocator_reset_peak(lmk_allocator *a);
/* The whole-total live bytes per category at the moment the total peaked. */
void lmk_allocator_peak_breakdown(const lmk_allocator *a, uint64_t out[LMK_MEM_CATEGORY_COUNT]);

/* Event recording (on by default). Turning it off keeps the counters. */
void lmk_allocator_set_recording(lmk_allocator *a, int on);
void lmk_allocator_clear_events(lmk_allocator *a);
size_t lmk_allocator_event_count(const lmk_allocator *a);
/* The log, borrowed, valid until the next allocation or clear. */
const lmk_mem_event *lmk_allocator_events(const lmk_allocator *a);
/* Name of an interned id (borrowed; "" when unknown). */
const char *lmk_allocator_name(const lmk_allocator *a, uint32_t name_id);

/* Fault injection for tests: the n-th next allocation (1 = the next) fails
 * with LMK_NOMEM; 0 disables. A byte limit on the live total also makes
 * allocations fail (0 = no limit). */
void lmk_allocator_fail_after(lmk_allocator *a, uint64_t n);
void lmk_allocator_set_limit(lmk_allocator *a, uint64_t bytes);
/* The last failed request: bytes and name (borrowed); 0 and "" if none. */
uint64_t lmk_allocator_last_failure(const lmk_allocator *a, const char **name);

#endif
