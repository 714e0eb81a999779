/* Unit test: lmk_running_stats (kernels/stats.h), the profile job's per-step
 * mean and spread: the mean and the sample standard deviation of the values
 * added, as the benchmark job's stats_json gives them (0 for one value, NAN
 * for none or after a NAN), and no cancellation when the spread is tiny
 * beside the mean. */
#include <math.h>
#include <stdio.h>

#include "../engine/check.h"
#include "stats.h"

int main(void)
{
    lmk_running_stats s = {0};
    CHECK(isnan(lmk_running_mean(&s)) && isnan(lmk_running_std(&s)), "no value: NAN");
    lmk_running_add(&s, 12.0);
    CHECK(lmk_running_mean(&s) == 12.0 && lmk_running_std(&s) == 0.0, "one value: its mean, std 0");
    lmk_running_add(&s, 13.0);
    lmk_running_add(&s, 14.0);
    CHECK(fabs(lmk_running_mean(&s) - 13.0) < 1e-12 && fabs(lmk_running_std(&s) - 1.0) < 1e-12,
          "12, 13, 14: 13 ± 1 (sample std), got %g ± %g", lmk_running_mean(&s), lmk_running_std(&s));

    /* 1e9 + {0.1, 0.2, 0.3}: a sum of squares loses the spread (1e18 beside 0.01), Welford keeps it */
    lmk_running_stats big = {0};
    for (int i = 1; i <= 3; i++)
        lmk_running_add(&big, 1e9 + 0.1 * i);
    CHECK(fabs(lmk_running_std(&big) - 0.1) < 1e-6, "a spread of 0.1 on 1e9: got %.9g", lmk_running_std(&big));

    lmk_running_stats nan_in = {0};
    lmk_running_add(&nan_in, NAN);
    CHECK(isnan(lmk_running_mean(&nan_in)) && isnan(lmk_running_std(&nan_in)), "one NAN: NAN, not 0");
    lmk_running_add(&nan_in, 1.0);
    CHECK(isnan(lmk_running_mean(&nan_in)) && isnan(lmk_running_std(&nan_in)), "a NAN, then a value: NAN");
    return check_report("stats");
}
