/* A bounded set of job ids as an unordered array: ids[0..count) distinct. */
#include "job_set.h"

#include <stdlib.h>

struct job_set {
    size_t count;
    size_t capacity;
    int64_t ids[]; /* (capacity); [0, count) in use, in no order */
};

job_set *job_set_create(size_t capacity)
{
    if (capacity == 0 || capacity > (SIZE_MAX - sizeof(job_set)) / sizeof(int64_t))
        return NULL;
    job_set *s = malloc(sizeof *s + capacity * sizeof s->ids[0]);
    if (!s)
        return NULL;
    s->count = 0;
    s->capacity = capacity;
    return s;
}

void job_set_free(job_set *s)
{
    free(s);
}

/* The index of id in s->ids, or s->count when absent. */
static size_t find(const job_set *s, int64_t id)
{
    size_t i = 0;
    while (i < s->count && s->ids[i] != id)
        i++;
    return i;
}

int job_set_add(job_set *s, int64_t id)
{
    if (find(s, id) < s->count)
        return 0;
    if (s->count == s->capacity)
        return JOB_SET_FULL;
    s->ids[s->count++] = id;
    return 0;
}

int job_set_remove(job_set *s, int64_t id)
{
    size_t i = find(s, id);
    if (i == s->count)
        return 0;
    s->ids[i] = s->ids[--s->count];
    return 1;
}

int job_set_contains(const job_set *s, int64_t id)
{
    return find(s, id) < s->count;
}

size_t job_set_count(const job_set *s)
{
    return s->count;
}

size_t job_set_capacity(const job_set *s)
{
    return s->capacity;
}
