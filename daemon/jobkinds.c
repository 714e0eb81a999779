/* The table of job kinds. Add a kind: one extern and one row. */
#include <stdio.h>
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

void jobkind_names(char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; jobkinds[i]; i++) {
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s", i ? ", " : "", jobkinds[i]->name);
    }
}

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

/* The table selectors by query parameter name (api_table_query). */
static const char *const table_selectors[] = {"experiment", "run", "range", "pivot"};

static int table_selector_set(const api_table_query *query, const char *name)
{
    if (!query)
        return 0;
    if (strcmp(name, "experiment") == 0)
        return query->experiment != NULL;
    if (strcmp(name, "run") == 0)
        return query->run >= 0;
    if (strcmp(name, "range") == 0)
        return query->range != NULL;
    return strcmp(name, "pivot") == 0 && query->pivot != NULL;
}

/* Whether name is in the NULL-terminated list (NULL: empty). */
static int listed(const char *const *list, const char *name)
{
    for (const char *const *p = list; p && *p; p++)
        if (strcmp(*p, name) == 0)
            return 1;
    return 0;
}

static int kind_takes_selector(const jobkind *kind, const char *name)
{
    return listed(kind->table_params, name);
}

int jobkind_pivot_known(const char *name)
{
    for (const jobkind *const *k = jobkinds; *k; k++)
        if (listed((*k)->pivots, name))
            return 1;
    return 0;
}

int jobkind_check_selectors(const jobkind *kind, const api_table_query *query, api_error *err)
{
    int selected = 0;
    for (size_t i = 0; i < sizeof table_selectors / sizeof table_selectors[0]; i++) {
        const char *name = table_selectors[i];
        if (!table_selector_set(query, name))
            continue;
        selected = 1;
        if (kind_takes_selector(kind, name) && strcmp(name, "pivot") == 0 && !listed(kind->pivots, query->pivot)) {
            char names[128]; /* "precision" */
            api_join_names(kind->pivots, names, sizeof names);
            return api_fail(err, API_ERR_BAD_REQUEST, name,
                            "a %s job's table pivots by %s (one row per point, a column per value), not '%.40s'",
                            kind->name, names, query->pivot);
        }
        if (kind_takes_selector(kind, name))
            continue;
        char takers[128] = ""; /* "numerics", "profile" */
        for (const jobkind *const *k = jobkinds; *k; k++) {
            size_t len = strlen(takers);
            if (kind_takes_selector(*k, name))
                snprintf(takers + len, sizeof takers - len, "%s%s", len ? ", " : "", (*k)->name);
        }
        return api_fail(err, API_ERR_BAD_REQUEST, name, "%s %s job's table takes no %s: %s is for %s jobs",
                        strchr("aeiou", kind->name[0]) ? "an" : "a", kind->name, name, name,
                        takers[0] ? takers : "no");
    }
    return selected;
}
