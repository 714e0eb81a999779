/* The table of job kinds. Add a kind: one extern and one row. */
#include <string.h>

#include "jobkind.h"

extern const jobkind jobkind_benchmark;
extern const jobkind jobkind_numerics;
extern const jobkind jobkind_memory;
extern const jobkind jobkind_allreduce;
extern const jobkind jobkind_attention;
extern const jobkind jobkind_profile;

const jobkind *const jobkinds[] = {
    &jobkind_benchmark,
    &jobkind_numerics,
    &jobkind_memory,
    &jobkind_allreduce,
    &jobkind_attention,
    &jobkind_profile,
    NULL,
};

const jobkind *jobkind_find(const char *name)
{
    for (int i = 0; name && jobkinds[i]; i++)
        if (strcmp(jobkinds[i]->name, name) == 0)
            return jobkinds[i];
    return NULL;
}

void jobkind_bind_scalar(sqlite3_stmt *st, int i, const json_t *v)
{
    if (json_is_integer(v))
        sqlite3_bind_int64(st, i, (sqlite3_int64)json_integer_value(v));
    else if (json_is_real(v))
        sqlite3_bind_double(st, i, json_real_value(v));
    else if (json_is_string(v))
        sqlite3_bind_text(st, i, json_string_value(v), -1, SQLITE_TRANSIENT);
    else if (json_is_boolean(v))
        sqlite3_bind_int(st, i, json_is_true(v));
    else
        sqlite3_bind_null(st, i);
}

void jobkind_bind_real_or_null(sqlite3_stmt *st, int i, const json_t *v)
{
    if (json_is_number(v))
        sqlite3_bind_double(st, i, json_number_value(v));
    else
        sqlite3_bind_null(st, i);
}
