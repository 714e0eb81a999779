/* Summary statistics of repeated timings. */
#ifndef LMK_STATS_H
#define LMK_STATS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The median of x[0..n) (n > 0): the middle value, or the mean of the two
 * middle values for even n. Sorts x in place. */
double lmk_median_sort(double *x, int n);

#ifdef __cplusplus
}
#endif

#endif
