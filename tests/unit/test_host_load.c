/* daemon/host_load.c: the parser on fake /proc/stat texts (the aggregate
 * line's fields summed as busy and total, the cpuN lines counted, malformed
 * texts refused), the share between synthetic samples (our own CPU time
 * taken out, clamped to [0, 100], unknown for unreadable samples and for
 * intervals under HOST_LOAD_MIN_TICKS), a missing file, and a real sample. */
#include <string.h>

#include "../engine/check.h"
#include "host_load.h"

/* A 2-CPU /proc/stat as Linux 6.x prints it: user nice system idle iowait irq softirq steal guest guest_nice. */
static const char stat_2cpu[] = "cpu  1000 20 300 5000 40 5 6 7 100 3\n"
                                "cpu0 500 10 150 2500 20 2 3 3 50 1\n"
                                "cpu1 500 10 150 2500 20 3 3 4 50 2\n"
                                "intr 123456 0 0 9 0\n"
                                "ctxt 987654\n"
                                "btime 1700000000\n"
                                "processes 4242\n"
                                "procs_running 3\n"
                                "procs_blocked 0\n"
                                "softirq 1 2 3 4\n";

/* A sample of the synthetic host: ticks_per_s 100, 2 CPUs. */
static host_load_sample synthetic(uint64_t busy, uint64_t total, double self_s, double at_ms)
{
    host_load_sample s = {.valid = 1, .busy_ticks = busy, .total_ticks = total, .cpus = 2, .ticks_per_s = 100,
                          .self_cpu_s = self_s, .monotonic_ms = at_ms};
    return s;
}

static void test_parse(void)
{
    host_load_sample s;
    memset(&s, 0, sizeof s);
    CHECK(host_load_parse(stat_2cpu, &s) == 0, "a 2-CPU /proc/stat");
    /* busy: user + nice + system + irq + softirq + steal (guest is inside user already) */
    CHECK(s.valid && s.busy_ticks == 1000 + 20 + 300 + 5 + 6 + 7, "busy %llu", (unsigned long long)s.busy_ticks);
    CHECK(s.total_ticks == s.busy_ticks + 5000 + 40, "total %llu", (unsigned long long)s.total_ticks);
    CHECK(s.cpus == 2, "cpus %d", s.cpus);

    /* an old kernel's four fields (no iowait, irq, softirq, steal) */
    host_load_sample old;
    memset(&old, 0, sizeof old);
    CHECK(host_load_parse("cpu 10 1 2 30\ncpu0 10 1 2 30\n", &old) == 0 && old.busy_ticks == 13 &&
              old.total_ticks == 43 && old.cpus == 1,
          "four fields: busy %llu total %llu cpus %d", (unsigned long long)old.busy_ticks,
          (unsigned long long)old.total_ticks, old.cpus);
    /* no newline at the end; a CPU numbered 12 (offline CPUs leave gaps) */
    host_load_sample gaps;
    memset(&gaps, 0, sizeof gaps);
    CHECK(host_load_parse("cpu  1 2 3 4 5 6 7 8\ncpu0 1 1 1 1\ncpu12 0 1 2 3", &gaps) == 0 && gaps.cpus == 2 &&
              gaps.busy_ticks == 1 + 2 + 3 + 6 + 7 + 8 && gaps.total_ticks == 36,
          "gaps: busy %llu total %llu cpus %d", (unsigned long long)gaps.busy_ticks,
          (unsigned long long)gaps.total_ticks, gaps.cpus);

    static const char *const bad[] = {
        "",                                     /* empty */
        "cpu0 1 2 3 4\nintr 1\n",               /* no aggregate line */
        "cpu  1 2 3\ncpu0 1 2 3\n",             /* three fields only */
        "cpu  x y z w\ncpu0 1 2 3 4\n",         /* not numbers */
        "cpu  1 2 3 4\nintr 5\n",               /* no cpuN line */
        "cpux 1 2 3 4\ncpufreq 1\n",            /* neither */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        host_load_sample t = {.busy_ticks = 77};
        CHECK(host_load_parse(bad[i], &t) == -1 && !t.valid && t.busy_ticks == 77,
              "malformed text %zu accepted or written", i);
    }
}

static void test_between(void)
{
    double pct = -1;
    int cpus = -1;
    /* 2 s on 2 CPUs: 400 ticks in all, 300 busy, of which we used 1.0 s (100 ticks): others 200 of 400 */
    host_load_sample a = synthetic(1000, 5000, 4.0, 10000.0), b = synthetic(1300, 5400, 5.0, 12000.0);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_OK && fabs(pct - 50.0) < 1e-9 && cpus == 2,
          "half the host: %f%% of %d", pct, cpus);
    /* all the busy time ours: 0 */
    b = synthetic(1100, 5400, 5.0, 12000.0);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_OK && pct == 0.0, "only us: %f", pct);
    /* our time counted more finely than the ticks: a little more than the busy ticks, clamped to 0 */
    b = synthetic(1100, 5400, 5.004, 12000.0);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_OK && pct == 0.0, "below 0 clamps: %f", pct);
    /* every CPU busy with others */
    b = synthetic(1400, 5400, 4.0, 12000.0);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_OK && pct == 100.0, "all others: %f", pct);
    /* busy counted past total (ticks of different CPUs read at different instants): clamped to 100 */
    b = synthetic(1450, 5400, 4.0, 12000.0);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_OK && pct == 100.0, "above 100 clamps: %f", pct);
    /* the CPU count is the end's (a CPU brought online in between) */
    b = synthetic(1300, 5400, 5.0, 12000.0);
    b.cpus = 3;
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_OK && cpus == 3, "cpus of the end: %d", cpus);

    /* idle: total less busy, of total; the same interval checks */
    double idle = -1;
    b = synthetic(1300, 5400, 5.0, 12000.0);
    CHECK(host_load_idle_between(&a, &b, &idle) == HOST_LOAD_OK && fabs(idle - 25.0) < 1e-9, "a quarter idle: %f",
          idle);
    b = synthetic(1450, 5400, 4.0, 12000.0);
    CHECK(host_load_idle_between(&a, &b, &idle) == HOST_LOAD_OK && idle == 0.0, "below 0 clamps: %f", idle);
    idle = -1;
    b = synthetic(1000, 5000, 4.0, 12000.0);
    CHECK(host_load_idle_between(&a, &b, &idle) == HOST_LOAD_TOO_SHORT && idle == -1, "idle: counters unchanged");
    /* disturbed: others took a notable share and left the CPUs all but busy */
    CHECK(host_load_disturbed(75, 2) && host_load_disturbed(HOST_LOAD_NOTABLE_PCT, 0), "others, nothing idle");
    CHECK(!host_load_disturbed(44, 50), "others on idle CPUs (a large host's other GPU workers) delay no one");
    CHECK(!host_load_disturbed(5, 0), "ourselves taking the CPUs");
    CHECK(!host_load_disturbed(50, HOST_LOAD_SATURATED_IDLE_PCT), "idle at the threshold");

    /* unknown: out-parameters untouched */
    pct = -1, cpus = -1;
    host_load_sample bad = b;
    bad.valid = 0;
    CHECK(host_load_between(&a, &bad, &pct, &cpus) == HOST_LOAD_UNREADABLE && pct == -1 && cpus == -1,
          "an unreadable end");
    CHECK(host_load_between(&bad, &b, &pct, &cpus) == HOST_LOAD_UNREADABLE && pct == -1, "an unreadable start");
    /* 19 ticks (190 ms at 100 Hz): too short; 20 and a bit: measured */
    b = synthetic(1010, 5038, 4.0, 10000.0 + 1000.0 * (HOST_LOAD_MIN_TICKS - 1) / 100);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_TOO_SHORT && pct == -1, "under the minimum");
    b.monotonic_ms = 10000.0 + 1000.0 * HOST_LOAD_MIN_TICKS / 100 + 1.0;
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_OK, "just past the minimum");
    /* counters that did not move or went back (a sample of another boot): unknown, never 0 */
    pct = -1;
    b = synthetic(1000, 5000, 4.0, 12000.0);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_TOO_SHORT && pct == -1, "counters unchanged");
    b = synthetic(900, 5400, 4.0, 12000.0);
    CHECK(host_load_between(&a, &b, &pct, &cpus) == HOST_LOAD_TOO_SHORT && pct == -1, "busy went back");
    CHECK(*host_load_status_text(HOST_LOAD_OK) == '\0' && *host_load_status_text(HOST_LOAD_UNREADABLE) &&
              *host_load_status_text(HOST_LOAD_TOO_SHORT),
          "status texts");
}

static void test_files(void)
{
    host_load_sample s;
    host_load_sample_from("/nonexistent/proc/stat", &s);
    CHECK(!s.valid && s.cpus >= 1 && s.monotonic_ms > 0, "a missing file: valid %d cpus %d", s.valid, s.cpus);

    /* this machine (Linux): a real /proc/stat, then a second sample later */
    host_load_sample a, b;
    host_load_sample_now(&a);
    CHECK(a.valid && a.cpus >= 1 && a.ticks_per_s > 0 && a.total_ticks > a.busy_ticks, "/proc/stat here");
    host_load_sample_now(&b);
    double pct = -1;
    int cpus = 0;
    int rc = host_load_between(&a, &b, &pct, &cpus);
    CHECK(rc == HOST_LOAD_TOO_SHORT && pct == -1, "two samples at once: %d %f", rc, pct);
}

/* host_load_measure: the measured steps when long enough, else the whole run, else unknown */
static void test_measure(void)
{
    host_load_result r = {.cpus = -1};
    /* the run from t 10 s, its measured steps from t 12 s to 14 s (200 ticks of wall: long enough) */
    host_load_sample whole = synthetic(400, 4000, 1.0, 10000.0), start = synthetic(1000, 5000, 4.0, 12000.0),
                     end = synthetic(1300, 5400, 5.0, 14000.0);
    CHECK(host_load_measure(&whole, &start, &end, &r) == HOST_LOAD_OK && r.window == HOST_LOAD_WINDOW_STEPS &&
              fabs(r.other_pct - 50.0) < 1e-9 && fabs(r.idle_pct - 25.0) < 1e-9 && r.cpus == 2,
          "the measured steps: %f%% others, %f%% idle, window %d", r.other_pct, r.idle_pct, (int)r.window);
    /* measured steps of 100 ms (10 ticks): the whole run, 4.1 s: (1310-400) busy of (5420-4000), we used 4.0 s */
    start = synthetic(1300, 5400, 5.0, 14000.0);
    end = synthetic(1310, 5420, 5.0, 14100.0);
    r = (host_load_result){.cpus = -1};
    CHECK(host_load_measure(&whole, &start, &end, &r) == HOST_LOAD_OK && r.window == HOST_LOAD_WINDOW_RUN &&
              fabs(r.other_pct - 100.0 * (910 - 400) / 1420.0) < 1e-9 &&
              fabs(r.idle_pct - 100.0 * (1420 - 910) / 1420.0) < 1e-9,
          "the whole run: %f%% others, %f%% idle, window %d", r.other_pct, r.idle_pct, (int)r.window);
    /* both too short (a run of 150 ms): unknown, r untouched */
    whole = synthetic(1290, 5380, 5.0, 13950.0);
    r = (host_load_result){.cpus = -1};
    CHECK(host_load_measure(&whole, &start, &end, &r) == HOST_LOAD_TOO_SHORT && r.cpus == -1, "both too short");
    /* an unreadable measured window is not replaced by the run's */
    start.valid = 0;
    whole = synthetic(400, 4000, 1.0, 10000.0);
    CHECK(host_load_measure(&whole, &start, &end, &r) == HOST_LOAD_UNREADABLE && r.cpus == -1, "unreadable");
}

int main(void)
{
    test_parse();
    test_between();
    test_measure();
    test_files();
    return check_report("test_host_load");
}
