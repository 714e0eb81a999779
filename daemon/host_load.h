/* How much of the host's CPU capacity other processes used over an interval:
 * the system-wide busy time of /proc/stat less this process's own CPU time
 * (getrusage), as a share of all the host's CPUs. A benchmark's step times
 * inflate when other processes compete for the CPUs (OpenMP threads of the
 * CPU backend time-sliced; on a GPU, the launching thread descheduled at
 * launch-bound points); a run records the share so that a reader can tell.
 *
 * DESIGN: a sample is a snapshot (two /proc/stat counters, our CPU time, a
 * monotonic time); host_load_between turns two of them into the share. The
 * parser takes the text of /proc/stat, so that tests feed it fake files.
 * /proc/stat counts in clock ticks (USER_HZ, 10 ms at 100 Hz) per CPU, so an
 * interval shorter than HOST_LOAD_MIN_TICKS ticks has no meaningful share:
 * it is unknown, as is a /proc/stat that cannot be read. Unknown is never 0. */
#ifndef LMPERF_HOST_LOAD_H
#define LMPERF_HOST_LOAD_H

#include <stddef.h>
#include <stdint.h>

/* Where the system-wide counters are read. */
#define HOST_LOAD_PROC_STAT "/proc/stat"

/* The shortest interval with a share, in clock ticks: each CPU's counter is
 * off by under one tick at each end, so the share is off by at most one
 * tick over the interval: 5% here, half of HOST_LOAD_NOTABLE_PCT. */
#define HOST_LOAD_MIN_TICKS 20

/* A run's times may be inflated when other processes used at least
 * HOST_LOAD_NOTABLE_PCT % of the host's CPUs and left under
 * HOST_LOAD_SATURATED_IDLE_PCT % of them idle: the CPUs were all taken, so
 * threads waited for one (host_load_disturbed). Other processes on a host
 * with idle CPUs (the other GPU workers of a large machine, each on its own
 * core) delay no one. A benchmark run that was disturbed carries a warning,
 * and its job's table shows the share. */
#define HOST_LOAD_NOTABLE_PCT 10.0
#define HOST_LOAD_SATURATED_IDLE_PCT 10.0

/* What host_load_between returns. */
enum {
    HOST_LOAD_OK = 0,
    HOST_LOAD_UNREADABLE = -1, /* a sample without /proc/stat (missing, unreadable, unparsable) */
    HOST_LOAD_TOO_SHORT = -2,  /* the interval is under HOST_LOAD_MIN_TICKS, or its counters did not advance */
};

typedef struct host_load_sample {
    int valid;              /* 1: busy_ticks, total_ticks and cpus were read; 0: unknown */
    uint64_t busy_ticks;    /* clock ticks, all CPUs: user + nice + system + irq + softirq + steal */
    uint64_t total_ticks;   /* clock ticks, all CPUs: busy + idle + iowait */
    int cpus;               /* online CPUs: the "cpuN" lines of /proc/stat, or sysconf's count
                             * (_SC_NPROCESSORS_ONLN) when it cannot be read */
    long ticks_per_s;       /* USER_HZ (sysconf(_SC_CLK_TCK)) */
    double self_cpu_s;      /* s, this process's user + system CPU time, all its threads */
    double monotonic_ms;    /* ms, CLOCK_MONOTONIC */
} host_load_sample;

/* Parses the text of /proc/stat (NUL-terminated): the aggregate "cpu" line's
 * counters into s->busy_ticks and s->total_ticks, the number of "cpuN" lines
 * into s->cpus, and sets s->valid. Other fields of s are left as they are.
 * Returns 0, or -1 (s untouched) when there is no aggregate line with at
 * least user, nice, system and idle, or no cpuN line. text: borrowed. */
int host_load_parse(const char *text, host_load_sample *s);

/* A sample now: /proc/stat (HOST_LOAD_PROC_STAT; valid = 0 when it cannot
 * be read or parsed, cpus then sysconf's), getrusage(RUSAGE_SELF), the
 * monotonic clock. Takes tens of µs: keep it out of timed regions. Never
 * fails. */
void host_load_sample_now(host_load_sample *s);

/* host_load_sample_now with the counters read from the file at path instead
 * (tests: a missing or malformed file). path: borrowed. */
void host_load_sample_from(const char *path, host_load_sample *s);

/* The share of all the host's CPUs (%, clamped to [0, 100]) that everything
 * but this process used from start to end, into *other_pct, and the host's
 * CPUs (end's count) into *cpus. Returns HOST_LOAD_OK, or HOST_LOAD_UNREADABLE /
 * HOST_LOAD_TOO_SHORT with the out-parameters untouched. */
int host_load_between(const host_load_sample *start, const host_load_sample *end, double *other_pct, int *cpus);

/* The share of all the host's CPUs (%, clamped to [0, 100]) that nothing
 * used (idle and iowait) from start to end, into *idle_pct. Same returns
 * as host_load_between. */
int host_load_idle_between(const host_load_sample *start, const host_load_sample *end, double *idle_pct);

/* 1 when shares measured over one interval say the run's threads waited
 * for CPUs: other_pct ≥ HOST_LOAD_NOTABLE_PCT and idle_pct <
 * HOST_LOAD_SATURATED_IDLE_PCT; else 0. */
int host_load_disturbed(double other_pct, double idle_pct);

/* What a run records: the shares over the window its samples allow. */
typedef enum host_load_window {
    HOST_LOAD_WINDOW_STEPS, /* the measured steps (start to end) */
    HOST_LOAD_WINDOW_RUN,   /* the whole run (whole to end): the measured steps were too short */
} host_load_window;

typedef struct host_load_result {
    double other_pct, idle_pct; /* host_load_between, host_load_idle_between */
    int cpus;
    host_load_window window;
} host_load_result;

/* The shares from start to end (the measured steps), or, when that interval
 * is HOST_LOAD_TOO_SHORT, from whole (the run's start, earlier) to end. All
 * borrowed. Returns HOST_LOAD_OK with *out filled, or start to end's code
 * (out untouched) when neither window has shares. */
int host_load_measure(const host_load_sample *whole, const host_load_sample *start, const host_load_sample *end,
                      host_load_result *out);

/* Why a host_load_between code has no share, as a phrase ("" for HOST_LOAD_OK). */
const char *host_load_status_text(int rc);

#endif
