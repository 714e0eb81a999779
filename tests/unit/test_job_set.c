/* Unit test: the bounded job-id set (daemon/job_set.c) adds once, refuses
 * when full without changing, removes from anywhere, and matches a plain
 * reference model over a long seeded sequence of operations. */
#include "../engine/check.h"
#include "job_set.h"

#define CAPACITY 16
#define ID_RANGE 40 /* ids drawn from [1, ID_RANGE]: more than fit, so the set fills */

int main(void)
{
    CHECK(job_set_create(0) == NULL, "a set of capacity 0");
    job_set_free(NULL);

    job_set *s = job_set_create(CAPACITY);
    CHECK(s != NULL, "job_set_create");
    if (!s)
        return 1;
    CHECK(job_set_capacity(s) == CAPACITY && job_set_count(s) == 0, "a new set is empty");
    CHECK(!job_set_contains(s, 1) && job_set_remove(s, 1) == 0, "an empty set holds nothing");

    MUST(job_set_add(s, 7));
    MUST(job_set_add(s, 7));
    CHECK(job_set_count(s) == 1 && job_set_contains(s, 7), "adding twice is one entry");
    CHECK(job_set_remove(s, 7) == 1 && job_set_remove(s, 7) == 0 && job_set_count(s) == 0, "remove, then again");

    for (int64_t id = 1; id <= CAPACITY; id++)
        MUST(job_set_add(s, id * 1000));
    CHECK(job_set_count(s) == CAPACITY, "full: %zu", job_set_count(s));
    CHECK(job_set_add(s, 1) == JOB_SET_FULL, "an id past the capacity is refused");
    CHECK(!job_set_contains(s, 1) && job_set_count(s) == CAPACITY, "a refused add changes nothing");
    CHECK(job_set_add(s, 5000) == 0, "an id already in a full set is in it");
    CHECK(job_set_remove(s, 8000) == 1 && !job_set_contains(s, 8000), "remove from the middle");
    for (int64_t id = 1; id <= CAPACITY; id++)
        CHECK(job_set_contains(s, id * 1000) == (id != 8), "after removing 8000: %lld", (long long)(id * 1000));
    MUST(job_set_add(s, 1));
    CHECK(job_set_contains(s, 1) && job_set_count(s) == CAPACITY, "a freed place is taken again");
    CHECK(job_set_add(s, INT64_MIN) == JOB_SET_FULL, "full again: another id is refused");
    for (int64_t id = 1; id <= CAPACITY; id++)
        job_set_remove(s, id * 1000);
    job_set_remove(s, 1);
    CHECK(job_set_count(s) == 0, "emptied: %zu", job_set_count(s));
    MUST(job_set_add(s, INT64_MIN));
    MUST(job_set_add(s, INT64_MAX));
    MUST(job_set_add(s, 0));
    CHECK(job_set_contains(s, INT64_MIN) && job_set_contains(s, INT64_MAX) && job_set_contains(s, 0) &&
              job_set_count(s) == 3,
          "any int64 is an id");
    job_set_remove(s, INT64_MIN);
    job_set_remove(s, INT64_MAX);
    job_set_remove(s, 0);

    /* against a reference: present[id] for ids 1..ID_RANGE */
    int present[ID_RANGE + 1] = {0};
    size_t count = 0;
    test_rng rng = {.s = 42};
    for (int step = 0; step < 200000; step++) {
        int64_t id = 1 + (int64_t)(test_next(&rng) % ID_RANGE);
        switch (test_next(&rng) % 3) {
        case 0:
        case 1: {
            int rc = job_set_add(s, id);
            int want = present[id] || count < CAPACITY ? 0 : JOB_SET_FULL;
            CHECK(rc == want, "step %d: add %lld: %d, want %d", step, (long long)id, rc, want);
            if (rc == 0 && !present[id]) {
                present[id] = 1;
                count++;
            }
            break;
        }
        default: {
            int rc = job_set_remove(s, id);
            CHECK(rc == present[id], "step %d: remove %lld: %d, want %d", step, (long long)id, rc, present[id]);
            if (present[id])
                count--;
            present[id] = 0;
        }
        }
        CHECK(job_set_count(s) == count, "step %d: count %zu, want %zu", step, job_set_count(s), count);
        if (check_failures)
            break;
    }
    for (int64_t id = 1; id <= ID_RANGE; id++)
        CHECK(job_set_contains(s, id) == present[id], "at the end: %lld", (long long)id);
    job_set_free(s);
    return check_report("job_set");
}
