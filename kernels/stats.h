/* Summary statistics of repeated timings. */
#ifndef LMK_STATS_H
#define LMK_STATS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The median of x[0..n) (n > 0): the middle value, or the mean of the two
 * middle values for even n. Sorts x in place. */
double lmk_median_sort(double *x, int n);

/* The mean and spread of a series of timings kept one value at a time, for
 * callers that do not keep the values (the profile job's step clocks).
 * Welford's update: the sum of squared differences from the running mean,
 * not a sum of squares from which the squared sum is subtracted (that
 * cancels when the spread is small beside the mean: 12.73 ± 0.0006 ms).
 * Zero-initialise ({0}) before the first value. */
typedef struct lmk_running_stats {
    int n;       /* values added */
    double mean; /* of the values added, their unit */
    double m2;   /* sum of squared differences from mean, the unit squared */
} lmk_running_stats;

/* Adds x (a NAN makes the mean and the spread NAN from then on). */
void lmk_running_add(lmk_running_stats *s, double x);
/* The mean of the values added; NAN when none was. */
double lmk_running_mean(const lmk_running_stats *s);
/* Their sample standard deviation (divisor n - 1); 0 for one value (as the
 * benchmark job's std_ms of one measured step), NAN for none. */
double lmk_running_std(const lmk_running_stats *s);

#ifdef __cplusplus
}
#endif

#endif
