/* daemon/gpu_power.c without a GPU: the summary of samples (min / mean SM
 * clock, max power, slowdown reasons), the settle rule, and that a missing
 * device or NVML is a NULL watch every call accepts. On a GPU machine the
 * attention job's rows carry the readings (tests/gpu/flash_bench.sh). */
#include <string.h>

#include "../engine/check.h"
#include "gpu_power.h"

int main(void)
{
    gpu_power_summary sum;
    memset(&sum, 0, sizeof sum);
    gpu_power_sample a = {.sm_mhz = 1980, .power_w = 300.0, .power_limit_w = 700.0, .reasons = 0x1};
    gpu_power_sample b = {.sm_mhz = 1500, .power_w = 699.0, .power_limit_w = 700.0, .reasons = 0x4};
    gpu_power_sample c = {.sm_mhz = 1800, .power_w = 650.0, .power_limit_w = 700.0, .reasons = 0x0};
    gpu_power_sample idle = {.sm_mhz = 345, .power_w = 70.0, .power_limit_w = 700.0, .reasons = 0x1};
    gpu_power_accumulate(&sum, &idle);
    CHECK(sum.samples == 0, "an idle reading (0x1) is left out");
    a.reasons = 0;
    gpu_power_accumulate(&sum, &a);
    CHECK(sum.samples == 1 && sum.sm_mhz_min == 1980 && sum.sm_mhz_mean == 1980.0, "one sample");
    CHECK(!sum.slowdown, "no reason bit: no slowdown");
    gpu_power_accumulate(&sum, &b);
    gpu_power_accumulate(&sum, &c);
    CHECK(sum.samples == 3, "samples %d", sum.samples);
    CHECK(sum.sm_mhz_min == 1500, "min clock %u", sum.sm_mhz_min);
    CHECK(fabs(sum.sm_mhz_mean - (1980.0 + 1500.0 + 1800.0) / 3) < 1e-9, "mean clock %f", sum.sm_mhz_mean);
    CHECK(sum.power_w_max == 699.0, "max power %f", sum.power_w_max);
    CHECK(sum.slowdown, "the software power cap (0x4) is a slowdown");

    gpu_power_summary only_app_clocks;
    memset(&only_app_clocks, 0, sizeof only_app_clocks);
    gpu_power_sample d = {.sm_mhz = 1755, .power_w = 100.0, .power_limit_w = 700.0, .reasons = 0x2};
    gpu_power_accumulate(&only_app_clocks, &d);
    CHECK(!only_app_clocks.slowdown, "the application clock setting (0x2) is not a slowdown");

    CHECK(gpu_power_is_settled(&a, 0.5), "300 of 700 W is under half");
    CHECK(!gpu_power_is_settled(&c, 0.5), "650 of 700 W is not");
    gpu_power_sample nolimit = {.sm_mhz = 1000, .power_w = 500.0, .power_limit_w = 0.0};
    CHECK(gpu_power_is_settled(&nolimit, 0.5), "no limit reported: settled");

    /* no device here (or an index past the last): NULL, and every call takes it */
    gpu_power_watch *w = gpu_power_open(4096);
    CHECK(w == NULL, "a watch on CUDA device 4096");
    gpu_power_settle(NULL);
    gpu_power_measure(NULL, 1);
    gpu_power_reset(NULL);
    gpu_power_summary none = gpu_power_get(NULL);
    CHECK(none.samples == 0 && none.settle_ms == 0, "the NULL watch's summary is empty");
    gpu_power_sample s;
    CHECK(gpu_power_read(NULL, &s) != 0, "reading the NULL watch fails");
    gpu_power_close(NULL);
    return check_report("test_gpu_power");
}
