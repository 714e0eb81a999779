/* Other processes' share of the host's CPUs over an interval, from
 * /proc/stat and getrusage (host_load.h says how and why). */
#include "host_load.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock_ms.h"

/* The most of /proc/stat read: the cpu lines come first, and one line per
 * CPU is about 100 bytes; past this the rest (interrupt counts) is dropped. */
#define HOST_LOAD_READ_MAX (1u << 20)
#define HOST_LOAD_READ_CHUNK 8192

/* The aggregate line's counters, in /proc/stat's order (proc(5)); guest and
 * guest_nice are left out: user and nice include them already. */
enum { F_USER, F_NICE, F_SYSTEM, F_IDLE, F_IOWAIT, F_IRQ, F_SOFTIRQ, F_STEAL, F_COUNT };
#define F_REQUIRED 4 /* user, nice, system, idle: every kernel has them */

/* Whether line (up to its newline) is a "cpuN" line. */
static int is_cpu_n_line(const char *line)
{
    return strncmp(line, "cpu", 3) == 0 && isdigit((unsigned char)line[3]);
}

int host_load_parse(const char *text, host_load_sample *s)
{
    unsigned long long f[F_COUNT] = {0};
    int fields = 0, cpus = 0;
    for (const char *line = text; line && *line;) {
        if (strncmp(line, "cpu ", 4) == 0 && fields == 0) {
            const char *p = line + 4;
            while (fields < F_COUNT) {
                char *end;
                while (*p == ' ' || *p == '\t')
                    p++;
                if (!isdigit((unsigned char)*p))
                    break;
                f[fields++] = strtoull(p, &end, 10);
                p = end;
            }
            if (fields < F_REQUIRED)
                return -1;
        } else if (is_cpu_n_line(line)) {
            cpus++;
        }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    if (fields < F_REQUIRED || cpus == 0)
        return -1;
    s->busy_ticks = f[F_USER] + f[F_NICE] + f[F_SYSTEM] + f[F_IRQ] + f[F_SOFTIRQ] + f[F_STEAL];
    s->total_ticks = s->busy_ticks + f[F_IDLE] + f[F_IOWAIT];
    s->cpus = cpus;
    s->valid = 1;
    return 0;
}

/* The text of the file at path, up to HOST_LOAD_READ_MAX bytes (a /proc file
 * has no size to ask for). Returns new (free()) NUL-terminated text, or NULL. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (cap - len < HOST_LOAD_READ_CHUNK + 1) {
            char *grown = realloc(buf, cap + HOST_LOAD_READ_CHUNK + 1);
            if (!grown) {
                free(buf);
                buf = NULL;
                goto out;
            }
            buf = grown;
            cap += HOST_LOAD_READ_CHUNK + 1;
        }
        size_t got = fread(buf + len, 1, HOST_LOAD_READ_CHUNK, f);
        len += got;
        if (got < HOST_LOAD_READ_CHUNK || len >= HOST_LOAD_READ_MAX)
            break;
    }
    if (ferror(f)) {
        free(buf);
        buf = NULL;
        goto out;
    }
    buf[len] = '\0';
out:
    fclose(f);
    return buf;
}

void host_load_sample_from(const char *path, host_load_sample *s)
{
    memset(s, 0, sizeof *s);
    char *text = read_text(path);
    if (!text || host_load_parse(text, s) != 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        s->valid = 0;
        s->cpus = online > 0 ? (int)online : 1;
    }
    free(text);
    s->ticks_per_s = sysconf(_SC_CLK_TCK);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        s->self_cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                        (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    else
        s->valid = 0; /* without our own time the rest cannot be told apart */
    s->monotonic_ms = monotonic_ms();
}

void host_load_sample_now(host_load_sample *s)
{
    host_load_sample_from(HOST_LOAD_PROC_STAT, s);
}

/* The busy and total CPU seconds of all CPUs from start to end; a
 * host_load_between code. */
static int interval_seconds(const host_load_sample *start, const host_load_sample *end, double *busy_s,
                            double *total_s)
{
    if (!start->valid || !end->valid || end->ticks_per_s <= 0)
        return HOST_LOAD_UNREADABLE;
    double ticks = (end->monotonic_ms - start->monotonic_ms) / 1e3 * (double)end->ticks_per_s;
    if (ticks < HOST_LOAD_MIN_TICKS || end->total_ticks <= start->total_ticks || end->busy_ticks < start->busy_ticks)
        return HOST_LOAD_TOO_SHORT;
    double tick_s = 1.0 / (double)end->ticks_per_s;
    *busy_s = (double)(end->busy_ticks - start->busy_ticks) * tick_s;
    *total_s = (double)(end->total_ticks - start->total_ticks) * tick_s;
    return HOST_LOAD_OK;
}

static double clamp_pct(double pct)
{
    return pct < 0.0 ? 0.0 : pct > 100.0 ? 100.0 : pct;
}

/* Both shares and the CPU count from start to end into *r (its window left as
 * it is); a host_load_between code, r untouched unless HOST_LOAD_OK. */
static int shares(const host_load_sample *start, const host_load_sample *end, host_load_result *r)
{
    double busy_s, total_s;
    int rc = interval_seconds(start, end, &busy_s, &total_s);
    if (rc != HOST_LOAD_OK)
        return rc;
    double other_s = busy_s - (end->self_cpu_s - start->self_cpu_s);
    r->other_pct = clamp_pct(100.0 * other_s / total_s);
    r->idle_pct = clamp_pct(100.0 * (total_s - busy_s) / total_s);
    r->cpus = end->cpus;
    return HOST_LOAD_OK;
}

int host_load_between(const host_load_sample *start, const host_load_sample *end, double *other_pct, int *cpus)
{
    host_load_result r;
    int rc = shares(start, end, &r);
    if (rc == HOST_LOAD_OK) {
        *other_pct = r.other_pct;
        *cpus = r.cpus;
    }
    return rc;
}

int host_load_idle_between(const host_load_sample *start, const host_load_sample *end, double *idle_pct)
{
    host_load_result r;
    int rc = shares(start, end, &r);
    if (rc == HOST_LOAD_OK)
        *idle_pct = r.idle_pct;
    return rc;
}

int host_load_disturbed(double other_pct, double idle_pct)
{
    return other_pct >= HOST_LOAD_NOTABLE_PCT && idle_pct < HOST_LOAD_SATURATED_IDLE_PCT;
}

int host_load_measure(const host_load_sample *whole, const host_load_sample *start, const host_load_sample *end,
                      host_load_result *out)
{
    host_load_result r = {.window = HOST_LOAD_WINDOW_STEPS};
    int rc = shares(start, end, &r);
    if (rc == HOST_LOAD_TOO_SHORT && shares(whole, end, &r) == HOST_LOAD_OK) {
        r.window = HOST_LOAD_WINDOW_RUN;
        rc = HOST_LOAD_OK;
    }
    if (rc == HOST_LOAD_OK)
        *out = r;
    return rc;
}

const char *host_load_status_text(int rc)
{
    switch (rc) {
    case HOST_LOAD_OK:
        return "";
    case HOST_LOAD_UNREADABLE:
        return "the host's CPU counters (" HOST_LOAD_PROC_STAT ") could not be read";
    default:
        return "the measured steps were too short for the host's CPU counters (clock ticks)";
    }
}
