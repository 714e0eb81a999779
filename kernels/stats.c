/* Summary statistics of repeated timings (stats.h). */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double lmk_median_sort(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, compare_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

void lmk_running_add(lmk_running_stats *s, double x)
{
    s->n++;
    double delta = x - s->mean;
    s->mean += delta / s->n;
    s->m2 += delta * (x - s->mean);
}

double lmk_running_mean(const lmk_running_stats *s)
{
    return s->n ? s->mean : NAN;
}

double lmk_running_std(const lmk_running_stats *s)
{
    if (s->n == 0)
        return NAN;
    return s->n > 1 ? sqrt(s->m2 / (s->n - 1)) : 0.0 * s->m2; /* 0, or NAN after a NAN */
}
