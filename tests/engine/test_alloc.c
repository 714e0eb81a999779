/* The tracked allocator: counters, peaks, the event log, names, faults. */
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "check.h"
#include "status.h"

int main(void)
{
    lmk_backend *b;
    lmk_allocator *a;
    MUST(lmk_backend_cpu_create(&b));
    MUST(lmk_allocator_create(b, &a));
    lmk_tensor p, x, y;
    MUST(lmk_tensor_alloc(a, &p, LMK_F32, 100, LMK_MEM_PARAMETER, "layers.%d.w", 3));
    MUST(lmk_tensor_alloc(a, &x, LMK_F32, 50, LMK_MEM_ACTIVATION, "layers.%d.attn.scores", 3));
    MUST(lmk_tensor_alloc(a, &y, LMK_I32, 10, LMK_MEM_INPUT, "batch"));
    CHECK(lmk_allocator_live(a, -1) == 640, "live total %llu", (unsigned long long)lmk_allocator_live(a, -1));
    CHECK(lmk_allocator_live(a, LMK_MEM_ACTIVATION) == 200, "live activation");
    lmk_tensor_release(a, &x);
    lmk_tensor_release(a, &x); /* released twice: no-op */
    CHECK(x.data == NULL, "released tensor keeps its pointer");
    CHECK(lmk_allocator_live(a, LMK_MEM_ACTIVATION) == 0, "activation after free");
    CHECK(lmk_allocator_peak(a, LMK_MEM_ACTIVATION) == 200, "activation peak");
    CHECK(lmk_allocator_peak(a, -1) == 640, "total peak");
    uint64_t br[LMK_MEM_CATEGORY_COUNT];
    lmk_allocator_peak_breakdown(a, br);
    CHECK(br[LMK_MEM_PARAMETER] == 400 && br[LMK_MEM_ACTIVATION] == 200 && br[LMK_MEM_INPUT] == 40,
          "breakdown at peak");
    lmk_allocator_reset_peak(a);
    CHECK(lmk_allocator_peak(a, -1) == 440, "peak after reset");

    const lmk_mem_event *ev = lmk_allocator_events(a);
    CHECK(lmk_allocator_event_count(a) == 4, "%zu events", lmk_allocator_event_count(a));
    CHECK(ev[1].action == LMK_MEM_ALLOC && ev[1].bytes == 200 && ev[1].category == LMK_MEM_ACTIVATION,
          "event 1");
    CHECK(strcmp(lmk_allocator_name(a, ev[1].name_id), "layers.3.attn.scores") == 0, "event 1 name");
    CHECK(ev[3].action == LMK_MEM_FREE && ev[3].name_id == ev[1].name_id, "free event");
    CHECK(ev[3].time_ns >= ev[0].time_ns, "time goes backwards");
    CHECK(strcmp(lmk_mem_category_name(LMK_MEM_OPTIMIZER_STATE), "optimizer_state") == 0, "category name");

    /* names are interned: many allocations, few names */
    for (int i = 0; i < 5000; i++) {
        MUST(lmk_tensor_alloc(a, &x, LMK_F32, 1, LMK_MEM_TEMPORARY, "tmp.%d", i % 7));
        lmk_tensor_release(a, &x);
    }
    CHECK(strcmp(lmk_allocator_name(a, lmk_allocator_events(a)[lmk_allocator_event_count(a) - 1].name_id),
                 "tmp.1") == 0, "last name"); /* 4999 % 7 */

    /* recording off keeps counters */
    lmk_allocator_clear_events(a);
    lmk_allocator_set_recording(a, 0);
    MUST(lmk_tensor_alloc(a, &x, LMK_F32, 8, LMK_MEM_WORKSPACE, "ws"));
    CHECK(lmk_allocator_event_count(a) == 0, "recorded while off");
    CHECK(lmk_allocator_live(a, LMK_MEM_WORKSPACE) == 32, "workspace live");
    lmk_tensor_release(a, &x);

    /* faults: injected and by limit, with the request remembered */
    lmk_allocator_fail_after(a, 2);
    MUST(lmk_tensor_alloc(a, &x, LMK_F32, 8, LMK_MEM_TEMPORARY, "ok"));
    CHECK(lmk_tensor_alloc(a, &y, LMK_F32, 8, LMK_MEM_TEMPORARY, "doomed") == LMK_NOMEM, "injected");
    const char *name;
    CHECK(lmk_allocator_last_failure(a, &name) == 32 && strcmp(name, "doomed") == 0, "last failure");
    lmk_tensor_release(a, &x);
    lmk_allocator_set_limit(a, 1000);
    CHECK(lmk_tensor_alloc(a, &x, LMK_F32, 1000, LMK_MEM_ACTIVATION, "big") == LMK_NOMEM, "limit");
    CHECK(lmk_tensor_alloc(a, &x, LMK_F32, 0, LMK_MEM_ACTIVATION, "empty") == LMK_INVALID, "zero size");
    lmk_tensor_release(a, &p);
    lmk_tensor_release(a, &y);
    CHECK(lmk_allocator_live(a, -1) == 0, "leak");
    lmk_allocator_free(a);
    lmk_backend_free(b);
    return check_report("engine alloc");
}
