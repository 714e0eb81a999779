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
