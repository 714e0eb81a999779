/* Summary statistics of repeated timings (stats.h). */
#include "stats.h"

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
