/* The allreduce job: time, algorithm and bus bandwidth and a checked sum per
 * (world size, size) point, over NCCL on GPUs (one thread per GPU inside
 * this worker, kernels/collectives; or, nccl_launch "processes", one process
 * per GPU through mpirun, on this machine or a hostfile's) or over Open MPI on
 * CPU processes (mpirun; each rank is `lmperfd __allreduce-rank`).
 *
 * DESIGN: points run backend by backend ("backend" may list both: nccl's
 * points first, after which the GPUs the scheduler reserved for them are
 * given back, so that the mpi points hold one worker as an mpi job does),
 * then world size by world size (an NCCL communicator or an mpirun is set up
 * once per world size), sizes inside. A point that cannot
 * run (more ranks than GPUs, a buffer that does not fit, a wrong sum) is a
 * failed run with its reason; the others go on. The job fails only when no
 * point succeeded. NVLink multicast (NVLS) is always disabled: on shared
 * machines it can take every GPU of the host out of service. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef LMPERF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "allreduce_rank.h"
#include "collectives.h"
#include "device.h"
#include "errors.h"
#include "jobkind.h"
#include "status.h"

#define MPI_MAX_RANKS 64          /* oversubscribed CPU processes, at most */
#define MAX_POINTS 256            /* backends x world sizes x sizes */
#define MAX_SIZE_BYTES (16ull << 30)
#define MPI_MAX_BYTES (4ull * INT_MAX) /* MPI's int element count of floats */
#define HOST_MEMORY_SHARE 0.8     /* of MemAvailable, for the mpi buffers */
#define STDERR_TAIL 800           /* bytes of mpirun's stderr kept for errors */
#define POLL_MS 200               /* cancellation checks while mpirun runs */
#define MPIRUN "mpirun"

/* --- sizes ---------------------------------------------------------------------- */

typedef struct size_point {
    uint64_t bytes;  /* per rank */
    char label[40];  /* as written: "1MB", "1GiB", "4096" */
} size_point;

static const struct {
    const char *unit;
    uint64_t scale;
} size_units[] = {
    {"B", 1},          {"KB", 1000},      {"MB", 1000000},   {"GB", 1000000000},
    {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
};

/* What "sizes" takes, ending each of its refusals. */
#define SIZE_SPELLINGS                                                                                               \
    "a size is a whole number of bytes (4096) or a decimal number and a unit (\"1MB\", \"1.5 GiB\"): B, KB, "        \
    "MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), a multiple of 4 bytes up to %llu GiB"

/* The length of the decimal number at the start of s (digits, then a
 * fraction: "12", "1.5", ".5"; no sign, exponent, hex or white space first), 0 when
 * there is none. */
static size_t decimal_prefix(const char *s)
{
    size_t n = strspn(s, "0123456789");
    if (s[n] == '.' && isdigit((unsigned char)s[n + 1]))
        n += 1 + strspn(s + n + 1, "0123456789");
    return n;
}

/* Parses one entry of "sizes". Returns 0, or -1 with the reason in why
 * (the value quoted; allreduce_check adds the field and SIZE_SPELLINGS). */
static int parse_size(const json_t *v, size_point *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (json_is_integer(v) || json_is_real(v)) {
        double d = json_number_value(v);
        if (d != floor(d)) {
            snprintf(why, whylen, "%g is not a whole number of bytes", d);
            return -1;
        }
        out->bytes = d > 0 ? (uint64_t)d : 0;
        snprintf(out->label, sizeof out->label, "%llu", (unsigned long long)out->bytes);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v), *end = s + decimal_prefix(s);
        uint64_t scale = 0;
        while (end > s && *end == ' ')
            end++;
        for (size_t u = 0; end > s && u < sizeof size_units / sizeof size_units[0]; u++)
            if (strcasecmp(end, size_units[u].unit) == 0)
                scale = size_units[u].scale;
        if (!scale) {
            snprintf(why, whylen, "\"%s\" is not a size", s);
            return -1;
        }
        double bytes = strtod(s, NULL) * (double)scale;
        if (bytes > (double)MAX_SIZE_BYTES) {
            snprintf(why, whylen, "\"%s\" is more than %llu GiB", s, MAX_SIZE_BYTES >> 30);
            return -1;
        }
        /* relative: "0.1MB" is 100000 up to rounding, "4.0000001B" is not 4 */
        if (fabs(bytes - round(bytes)) > 1e-9 * bytes) {
            snprintf(why, whylen, "\"%s\" is not a whole number of bytes", s);
            return -1;
        }
        out->bytes = (uint64_t)llround(bytes);
        snprintf(out->label, sizeof out->label, "%s", s);
    } else {
        snprintf(why, whylen, "a size is a number of bytes or a string like \"1MB\"");
        return -1;
    }
    if (out->bytes == 0 || out->bytes % sizeof(float)) {
        if (json_is_string(v))
            snprintf(why, whylen, "\"%s\" is %llu byte%s%s", out->label, (unsigned long long)out->bytes,
                     out->bytes == 1 ? "" : "s", out->bytes ? ", not a multiple of 4 (float32 elements)" : "");
        else
            snprintf(why, whylen, "%s bytes is not a multiple of 4 (float32 elements)", out->label);
        return -1;
    }
    if (out->bytes > MAX_SIZE_BYTES) {
        snprintf(why, whylen, "%s bytes is more than %llu GiB", out->label, MAX_SIZE_BYTES >> 30);
        return -1;
    }
    return 0;
}

/* The backends, in the order their points run: nccl before mpi, whatever
 * the order of the spec's list, so that the GPUs nccl needed are given back
 * before the CPU baseline runs. */
static const char *const backend_order[] = {"nccl", "mpi"};
#define BACKEND_COUNT (sizeof backend_order / sizeof backend_order[0])

/* Non-zero when the spec's "backend" (a name or a list of names; absent:
 * the schema's default, nccl) includes name. */
static int uses_backend(const json_t *spec, const char *name)
{
    const json_t *backend = json_object_get(spec, "backend");
    if (!backend)
        return strcmp(name, "nccl") == 0;
    if (json_is_string(backend))
        return strcmp(json_string_value(backend), name) == 0;
    size_t i;
    const json_t *v;
    json_array_foreach(backend, i, v)
    if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
        return 1;
    return 0;
}

/* Non-zero when the spec's nccl points run one process per GPU through
 * mpirun (nccl_launch "processes"); else one thread per GPU in the worker. */
static int nccl_processes(const json_t *spec)
{
    const char *launch = json_string_value(json_object_get(spec, "nccl_launch"));
    return launch && strcmp(launch, "processes") == 0;
}

static size_t backends_used(const json_t *spec)
{
    size_t n = 0;
    for (size_t b = 0; b < BACKEND_COUNT; b++)
        n += uses_backend(spec, backend_order[b]) != 0;
    return n;
}

/* Entry i of "sizes" (parsed as p) is refused when an earlier entry is the
 * same number of bytes written otherwise ("1MB" and "1000KB", 1048576 and
 * "1MiB", "1MB" and "1 mb"): the two would be one point twice, alike in
 * every table and view (which tell points apart by their bytes). Returns 0,
 * or -1 with err naming "sizes[i]". */
static int check_size_repeat(const json_t *sizes, size_t i, const size_point *p, api_error *err)
{
    for (size_t k = 0; k < i; k++) {
        size_point earlier;
        char why[160], field[32];
        if (parse_size(json_array_get(sizes, k), &earlier, why, sizeof why) || earlier.bytes != p->bytes)
            continue;
        snprintf(field, sizeof field, "sizes[%zu]", i);
        return api_fail(err, API_ERR_INVALID_SPEC, field,
                        "%s (%s) is sizes[%zu] (%s) again: both are %llu bytes; list each size once", field,
                        p->label, k, earlier.label, (unsigned long long)p->bytes);
    }
    return 0;
}

/* Non-zero when every world size listed is above MPI_MAX_RANKS: without a
 * hostfile no mpi point could run (run_mpi_world would fail each), so the
 * job is refused at submit instead. */
static int mpi_worlds_too_large(const json_t *worlds)
{
    size_t i;
    const json_t *v;
    json_array_foreach(worlds, i, v)
    if (json_integer_value(v) <= MPI_MAX_RANKS)
        return 0;
    return json_array_size(worlds) > 0;
}

static int allreduce_check(json_t *spec, api_error *err)
{
    const json_t *sizes = json_object_get(spec, "sizes"), *worlds = json_object_get(spec, "world_sizes");
    size_t i;
    const json_t *v;
    json_array_foreach(sizes, i, v)
    {
        size_point p;
        char why[160], field[32];
        snprintf(field, sizeof field, "sizes[%zu]", i);
        if (parse_size(v, &p, why, sizeof why))
            return api_fail(err, API_ERR_INVALID_SPEC, field, "%s: %s; " SIZE_SPELLINGS, field, why,
                            MAX_SIZE_BYTES >> 30);
        if (check_size_repeat(sizes, i, &p, err))
            return -1;
        if (uses_backend(spec, "mpi") && p.bytes > MPI_MAX_BYTES)
            return api_fail(err, API_ERR_INVALID_SPEC, field, "%s: %s is more than the mpi backend takes: at most %llu bytes per rank",
                            field, p.label, (unsigned long long)MPI_MAX_BYTES);
    }
    if (nccl_processes(spec) && !uses_backend(spec, "nccl"))
        return api_fail(err, API_ERR_INVALID_SPEC, "nccl_launch",
                        "nccl_launch is for the nccl backend (the mpi backend always runs a process per rank)");
    const json_t *hostfile = json_object_get(spec, "hostfile");
    /* with a list: the points of the backends that start processes use it */
    if (hostfile && !uses_backend(spec, "mpi") && !nccl_processes(spec))
        return api_fail(err, API_ERR_INVALID_SPEC, "hostfile",
                        "hostfile is for the mpi backend, and for nccl with nccl_launch \"processes\" (one process "
                        "per GPU through mpirun); nccl's threads run on this machine's GPUs only");
    if (hostfile && access(json_string_value(hostfile), R_OK) != 0)
        return api_fail(err, API_ERR_INVALID_SPEC, "hostfile", "cannot read %s: %s", json_string_value(hostfile),
                        strerror(errno));
    if (uses_backend(spec, "mpi") && !hostfile && mpi_worlds_too_large(worlds))
        return api_fail(err, API_ERR_INVALID_SPEC, "world_sizes",
                        "the mpi backend runs at most %d ranks on one machine and every world size listed is more: "
                        "list one of 1 to %d, or give a hostfile to spread the ranks over machines",
                        MPI_MAX_RANKS, MPI_MAX_RANKS);
    size_t backends = backends_used(spec);
    if (backends * json_array_size(sizes) * json_array_size(worlds) > MAX_POINTS)
        return api_fail(err, API_ERR_INVALID_SPEC, "world_sizes",
                        "%zu backend%s x %zu sizes x %zu world sizes is more than %d points", backends,
                        backends == 1 ? "" : "s", json_array_size(sizes), json_array_size(worlds), MAX_POINTS);
    return 0;
}

/* nccl: a GPU per rank of the largest world (a list with mpi too: held
 * until the nccl points are done, then given back, allreduce_run). */
static int allreduce_gpus_needed(const json_t *spec)
{
    if (!uses_backend(spec, "nccl"))
        return 1; /* one worker; the ranks are mpirun's processes */
    if (nccl_processes(spec) && json_object_get(spec, "hostfile"))
        return 1; /* the hosts' GPUs by local rank, which the job assumes free (the schema says so) */
    int most = 1;
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(spec, "world_sizes"), i, v)
    if (json_integer_value(v) > most)
        most = (int)json_integer_value(v);
    return most;
}

/* --- runs ------------------------------------------------------------------------ */

typedef struct job_state {
    run_ctx *ctx;
    const json_t *spec;
    const char *backend; /* of the points running now */
    int several_backends; /* the spec lists both: errors name the backend */
    int warmup, iterations;
    int done, total;     /* points, for progress */
    int succeeded;
    int all_correct;
    char first_error[640];
} job_state;

/* A new run object with the point's configuration. */
static json_t *point_new(const job_state *js, int world, const size_point *p)
{
    const char *launch = strcmp(js->backend, "nccl") == 0 && !nccl_processes(js->spec) ? "threads" : "processes";
    return json_pack("{s:s, s:s, s:s, s:i, s:I, s:s, s:i, s:i}", "backend", js->backend, "launch", launch, "dtype",
                     "float32", "world_size", world, "size_bytes", (json_int_t)p->bytes, "size", p->label, "warmup",
                     js->warmup, "iterations", js->iterations);
}

static void point_progress(job_state *js, int world, const size_point *p)
{
    char msg[96];
    js->done++;
    snprintf(msg, sizeof msg, "%s: %d ranks, %s", js->backend, world, p->label);
    runctx_progress(js->ctx, js->total ? (double)js->done / js->total : 1.0, msg);
}

/* Keeps the first failed point's error for the job's verdict: "2 ranks, 1MB:
 * why", led by the backend when the job runs both. */
static void note_first_error(job_state *js, int world, const size_point *p, const char *error)
{
    if (!js->first_error[0])
        snprintf(js->first_error, sizeof js->first_error, "%s%s%d ranks, %s: %s",
                 js->several_backends ? js->backend : "", js->several_backends ? ", " : "", world, p->label, error);
}

/* Emits a failed point (run stolen). */
static void emit_failed(job_state *js, int world, const size_point *p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void emit_failed(job_state *js, int world, const size_point *p, const char *fmt, ...)
{
    char error[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, sizeof error, fmt, ap);
    va_end(ap);
    utf8_repair(error); /* tool output cut inside a character; the job's error is repaired by the worker */
    json_t *run = point_new(js, world, p);
    json_object_set_new(run, "status", json_string("failed"));
    json_object_set_new(run, "error", json_string(error));
    json_object_set_new(run, "correct", json_null());
    note_first_error(js, world, p, error);
    runctx_emit_run(js->ctx, run);
    point_progress(js, world, p);
}

/* Emits a measured point: statistics of times_ms (n), the check, where. */
static void emit_measured(job_state *js, int world, const size_point *p, const double *times_ms, int n,
                          uint64_t mismatches, const char *devices, int oversubscribed)
{
    lmk_allreduce_stats st;
    lmk_allreduce_stats_compute(times_ms, n, p->bytes, world, &st);
    json_t *samples = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(samples, json_real(times_ms[i]));
    json_t *run = point_new(js, world, p);
    int correct = mismatches == 0;
    char error[160];
    snprintf(error, sizeof error, "wrong sum: %llu elements differ from the exact result",
             (unsigned long long)mismatches);
    json_object_update_new(run, json_pack("{s:s, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:I, s:s, s:b, s:o}",
                                          "status", correct ? "succeeded" : "failed", "error",
                                          correct ? json_null() : json_string(error), "median_ms", st.median_ms,
                                          "mean_ms", st.mean_ms, "min_ms", st.min_ms, "max_ms", st.max_ms,
                                          "algbw_gbps", st.algbw_gbps, "busbw_gbps", st.busbw_gbps, "correct",
                                          correct, "mismatches", (json_int_t)mismatches, "devices", devices,
                                          "oversubscribed", oversubscribed, "times_ms", samples));
    if (correct)
        js->succeeded++;
    else {
        js->all_correct = 0;
        note_first_error(js, world, p, error);
    }
    runctx_emit_run(js->ctx, run);
    point_progress(js, world, p);
}

/* --- nccl ------------------------------------------------------------------------ */

static int visible_gpus(void)
{
#ifdef LMPERF_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

/* The devices of a world when the scheduler named none (one-shot mode): this
 * worker's GPU first, then the others in order. Under the daemon the world
 * uses the GPUs the scheduler reserved (runctx_gpus). */
static void pick_devices(int own, int gpus, int world, int *devices)
{
    int k = 0;
    devices[k++] = own;
    for (int d = 0; d < gpus && k < world; d++)
        if (d != own)
            devices[k++] = d;
}

static int run_ranks_world(job_state *js, int world, const size_point *points, int count, double *times,
                           const char *gpu_devices);
static int mpirun_world(job_state *js, int world, const size_point *runnable, int n, const uint64_t *bytes,
                        double *times, const char *gpu_devices, int oversubscribed);

static int run_nccl_world(job_state *js, int world, const size_point *points, int count, double *times)
{
    int processes = nccl_processes(js->spec), across_hosts = processes && json_object_get(js->spec, "hostfile");
    const runctx_device *dev = runctx_device_info(js->ctx);
    int gpus = visible_gpus();
    const char *why = NULL;
    char reason[256];
    if (!lmk_nccl_available())
        why = "this build of lmperf has no NCCL (built without CUDA or NCCL)";
    else if (dev->gpu_index < 0)
        why = "this worker has no GPU (a CPU worker or --cpu-only)";
    else if (world > gpus && !across_hosts) {
        snprintf(reason, sizeof reason, "world size %d needs %d GPUs; this machine has %d", world, world, gpus);
        why = reason;
    }
    if (why) {
        for (int i = 0; i < count; i++)
            emit_failed(js, world, &points[i], "%s", why);
        return LMK_OK;
    }
    int devices[LMK_ALLREDUCE_MAX_RANKS];
    int reserved = runctx_gpus(js->ctx, devices, LMK_ALLREDUCE_MAX_RANKS);
    if (reserved < world) /* one-shot mode, or fewer reserved: own GPU first, then the others */
        pick_devices(dev->gpu_index, gpus, world, devices);
    if (across_hosts) /* each host's GPUs by local rank */
        return run_ranks_world(js, world, points, count, times, NULL);
    if (processes) { /* local rank r (all on this host) on devices[r] */
        char list[LMK_ALLREDUCE_MAX_RANKS * 6] = "";
        for (int r = 0; r < world; r++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%d", r ? "," : "", devices[r]);
        }
        return run_ranks_world(js, world, points, count, times, list);
    }
    char where[256] = "";
    for (int r = 0; r < world; r++) {
        size_t len = strlen(where);
        snprintf(where + len, sizeof where - len, "%scuda:%d", r ? "," : "", devices[r]);
    }
    lmk_nccl_group *group = NULL;
    char errbuf[512];
    for (int i = 0; i < count; i++) {
        if (runctx_cancelled(js->ctx)) {
            lmk_nccl_group_free(group);
            return LMK_CANCELLED;
        }
        if (!group) {
            errbuf[0] = '\0';
            if (lmk_nccl_group_create(world, devices, &group, errbuf, sizeof errbuf) != LMK_OK) {
                emit_failed(js, world, &points[i], "%s", errbuf);
                continue;
            }
        }
        uint64_t mismatches = 0;
        errbuf[0] = '\0';
        int rc = lmk_nccl_allreduce_point(group, points[i].bytes, js->warmup, js->iterations, times, &mismatches,
                                          errbuf, sizeof errbuf);
        if (rc == LMK_OK) {
            emit_measured(js, world, &points[i], times, js->iterations, mismatches, where, 0);
            continue;
        }
        emit_failed(js, world, &points[i], "%s", errbuf[0] ? errbuf : lmk_status_text(rc));
        if (rc != LMK_NOMEM) { /* NCCL or CUDA error: start over with a fresh communicator */
            lmk_nccl_group_free(group);
            group = NULL;
        }
    }
    lmk_nccl_group_free(group);
    return LMK_OK;
}

/* --- mpi ------------------------------------------------------------------------- */

/* Starts mpirun for `world` ranks over the sizes; its stdout and stderr come
 * back on *out_fd and *err_fd. Returns 0 or -1 with a message in errbuf. */
static int mpirun_start(const job_state *js, int world, const uint64_t *bytes, int count, const char *gpu_devices,
                        pid_t *pid_out, int *out_fd, int *err_fd, char *errbuf, size_t errlen)
{
    char exe[PATH_MAX], sizes[64 * 24] = "", np[16], warmup[16], iterations[16];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(errbuf, errlen, "cannot find lmperfd's own executable: %s", strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    for (int i = 0; i < count; i++) {
        size_t len = strlen(sizes);
        snprintf(sizes + len, sizeof sizes - len, "%s%llu", i ? "," : "", (unsigned long long)bytes[i]);
    }
    snprintf(np, sizeof np, "%d", world);
    snprintf(warmup, sizeof warmup, "%d", js->warmup);
    snprintf(iterations, sizeof iterations, "%d", js->iterations);
    /* --oversubscribe: more ranks than cores is allowed (and reported);
     * --bind-to none: binding to cores fails when oversubscribed. Transports
     * are Open MPI's defaults (shared memory with CMA single copy on one host:
     * forcing single-copy off made 10 MB 10x slower here). */
    const char *argv[32];
    int a = 0;
    argv[a++] = MPIRUN;
    if (geteuid() == 0)
        argv[a++] = "--allow-run-as-root";
    const char *hostfile = json_string_value(json_object_get(js->spec, "hostfile"));
    if (hostfile) { /* across machines: lmperfd must be at the same path on every host */
        argv[a++] = "--hostfile";
        argv[a++] = hostfile;
    }
    int nccl = strcmp(js->backend, "nccl") == 0;
    if (nccl) { /* to every rank, on every host: never NVLink multicast (set by allreduce_run) */
        argv[a++] = "-x";
        argv[a++] = "NCCL_NVLS_ENABLE";
    }
    const char *fixed[] = {"--oversubscribe", "--bind-to", "none", "-np", np, exe, ALLREDUCE_RANK_COMMAND,
                           "--sizes", sizes, "--warmup", warmup, "--iterations", iterations};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[a++] = fixed[i];
    if (nccl) {
        argv[a++] = "--backend";
        argv[a++] = "nccl";
    }
    if (gpu_devices) {
        argv[a++] = "--devices";
        argv[a++] = gpu_devices;
    }
    argv[a] = NULL;

    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
        snprintf(errbuf, errlen, "pipe: %s", strerror(errno));
        goto fail;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(errbuf, errlen, "fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        setpgid(0, 0); /* one group: cancellation kills mpirun and its ranks */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGINT, SIG_DFL); /* the worker ignores the stop signals (worker_main); exec keeps that */
        signal(SIGTERM, SIG_DFL);
        dup2(out_pipe[1], STDOUT_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        execvp(MPIRUN, (char *const *)argv);
        dprintf(STDERR_FILENO, "cannot run %s: %s (install Open MPI: mpirun must be on PATH)\n", MPIRUN,
                strerror(errno));
        _exit(127);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    *pid_out = pid;
    *out_fd = out_pipe[0];
    *err_fd = err_pipe[0];
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (out_pipe[i] >= 0)
            close(out_pipe[i]);
        if (err_pipe[i] >= 0)
            close(err_pipe[i]);
    }
    return -1;
}

/* Appends data to a tail buffer of STDERR_TAIL bytes. */
static void tail_append(char *tail, const char *data, size_t n)
{
    size_t have = strlen(tail);
    if (n >= STDERR_TAIL) {
        memcpy(tail, data + n - STDERR_TAIL + 1, STDERR_TAIL - 1);
        tail[STDERR_TAIL - 1] = '\0';
        return;
    }
    if (have + n >= STDERR_TAIL) {
        size_t drop = have + n - (STDERR_TAIL - 1);
        memmove(tail, tail + drop, have - drop + 1);
        have -= drop;
    }
    memcpy(tail + have, data, n);
    tail[have + n] = '\0';
}

/* One line of rank 0: the result of points[*next]. */
static void mpi_line(job_state *js, int world, const size_point *points, int count, int *next, const char *line,
                     int oversubscribed, double *times)
{
    json_error_t jerr;
    json_t *msg = json_loads(line, 0, &jerr);
    if (!msg || *next >= count) {
        json_decref(msg);
        return; /* not ours (MPI noise on stdout) */
    }
    const size_point *p = &points[(*next)++];
    const char *error = json_string_value(json_object_get(msg, "error"));
    const json_t *samples = json_object_get(msg, "times_ms");
    if (error || json_array_size(samples) != (size_t)js->iterations) {
        emit_failed(js, world, p, "%s", error ? error : "rank 0 reported no times");
    } else {
        for (int i = 0; i < js->iterations; i++)
            times[i] = json_number_value(json_array_get(samples, (size_t)i));
        char where[64];
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        const char *gpus = json_string_value(json_object_get(msg, "devices")); /* nccl: "host:cuda:N,..." */
        if (gpus && gpus[0]) {
            emit_measured(js, world, p, times, js->iterations,
                          (uint64_t)json_integer_value(json_object_get(msg, "mismatches")), gpus, 0);
            json_decref(msg);
            return;
        }
        if (json_object_get(js->spec, "hostfile"))
            snprintf(where, sizeof where, "cpu x%d (mpirun --hostfile)", world);
        else
            snprintf(where, sizeof where, "cpu x%d (mpirun, %ld cores)", world, cores);
        emit_measured(js, world, p, times, js->iterations,
                      (uint64_t)json_integer_value(json_object_get(msg, "mismatches")), where, oversubscribed);
    }
    json_decref(msg);
}

static int run_mpi_world(job_state *js, int world, const size_point *points, int count, double *times)
{
    if (world > MPI_MAX_RANKS && !json_object_get(js->spec, "hostfile")) {
        for (int i = 0; i < count; i++)
            emit_failed(js, world, &points[i], "the mpi backend runs at most %d ranks on one machine (give a hostfile for more)",
                        MPI_MAX_RANKS);
        return LMK_OK;
    }
    /* sizes whose buffers do not fit in host memory fail here; the rest run */
    size_point runnable[64];
    uint64_t bytes[64];
    int n = 0;
    const char *hostfile = json_string_value(json_object_get(js->spec, "hostfile"));
    /* one host: all ranks' buffers share its memory (unknown per host with a hostfile) */
    double budget = hostfile ? 0 : HOST_MEMORY_SHARE * (double)device_cpu_available_bytes();
    for (int i = 0; i < count; i++) {
        double need = 2.0 * (double)points[i].bytes * world;
        if (budget > 0 && need > budget)
            emit_failed(js, world, &points[i], "needs %.1f GB of host memory (%d ranks x send + receive); %.1f GB is available",
                        need / 1e9, world, budget / HOST_MEMORY_SHARE / 1e9);
        else {
            runnable[n] = points[i];
            bytes[n++] = points[i].bytes;
        }
    }
    if (!n)
        return LMK_OK;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int oversubscribed = !hostfile && cores > 0 && world > cores;
    return mpirun_world(js, world, runnable, n, bytes, times, NULL, oversubscribed);
}

/* The nccl points of one world as a process per GPU: gpu_devices "d0,d1,..."
 * (local rank r on cuda:dr, every rank on this host), or NULL across the
 * hostfile's hosts (local rank r on cuda:r of its host). */
static int run_ranks_world(job_state *js, int world, const size_point *points, int count, double *times,
                           const char *gpu_devices)
{
    uint64_t bytes[64];
    for (int i = 0; i < count; i++)
        bytes[i] = points[i].bytes;
    return mpirun_world(js, world, points, count, bytes, times, gpu_devices, 0);
}

/* Runs mpirun for `world` ranks over points (n, with their bytes) and turns
 * rank 0's lines into runs; a size without a line is a failed point with
 * mpirun's exit and the tail of its stderr. */
static int mpirun_world(job_state *js, int world, const size_point *runnable, int n, const uint64_t *bytes,
                        double *times, const char *gpu_devices, int oversubscribed)
{
    pid_t pid;
    int out_fd, err_fd;
    char errbuf[512];
    if (mpirun_start(js, world, bytes, n, gpu_devices, &pid, &out_fd, &err_fd, errbuf, sizeof errbuf)) {
        for (int i = 0; i < n; i++)
            emit_failed(js, world, &runnable[i], "%s", errbuf);
        return LMK_OK;
    }
    char line[1 << 16];
    size_t line_len = 0;
    char tail[STDERR_TAIL] = "";
    int next = 0, cancelled = 0;
    struct pollfd fds[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
        if (!cancelled && runctx_cancelled(js->ctx)) {
            kill(-pid, SIGTERM);
            cancelled = 1;
        }
        if (poll(fds, 2, POLL_MS) < 0 && errno != EINTR)
            break;
        for (int f = 0; f < 2; f++) {
            if (fds[f].fd < 0 || !(fds[f].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            ssize_t got = read(fds[f].fd, buf, sizeof buf);
            if (got <= 0) {
                close(fds[f].fd);
                fds[f].fd = -1;
                continue;
            }
            if (f == 1) {
                tail_append(tail, buf, (size_t)got);
                continue;
            }
            for (ssize_t k = 0; k < got; k++) {
                if (buf[k] != '\n') {
                    if (line_len < sizeof line - 1)
                        line[line_len++] = buf[k];
                    continue;
                }
                line[line_len] = '\0';
                line_len = 0;
                if (!cancelled)
                    mpi_line(js, world, runnable, n, &next, line, oversubscribed, times);
            }
        }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (cancelled)
        return LMK_CANCELLED;
    for (size_t k = strlen(tail); k > 0 && (tail[k - 1] == '\n' || tail[k - 1] == ' '); k--)
        tail[k - 1] = '\0';
    for (; next < n; next++)
        emit_failed(js, world, &runnable[next], "mpirun %s %d before this size: %s",
                    WIFEXITED(status) ? "exited with status" : "was killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), tail[0] ? tail : "(no message)");
    return LMK_OK;
}

static int allreduce_run(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    /* never NVLink multicast (NVLS) here: on shared hosts it can take all GPUs out of service */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    job_state js = {.ctx = ctx, .spec = spec, .all_correct = 1, .several_backends = backends_used(spec) > 1};
    js.warmup = (int)json_integer_value(json_object_get(spec, "warmup"));
    js.iterations = (int)json_integer_value(json_object_get(spec, "iterations"));
    const json_t *sizes = json_object_get(spec, "sizes"), *worlds = json_object_get(spec, "world_sizes");
    int count = (int)json_array_size(sizes);
    js.total = (int)backends_used(spec) * count * (int)json_array_size(worlds);
    size_point points[64];
    double *times = calloc((size_t)(js.iterations > 0 ? js.iterations : 1), sizeof *times);
    int rc = LMK_OK;
    if (!times) {
        snprintf(errbuf, errlen, "out of memory");
        return LMK_NOMEM;
    }
    for (int i = 0; i < count && i < 64; i++) {
        char why[160];
        if (parse_size(json_array_get(sizes, (size_t)i), &points[i], why, sizeof why)) {
            snprintf(errbuf, errlen, "sizes[%d]: %s", i, why);
            rc = LMK_INVALID;
            goto out;
        }
    }
    for (size_t b = 0; b < BACKEND_COUNT; b++) {
        if (!uses_backend(spec, backend_order[b]))
            continue;
        js.backend = backend_order[b];
        int nccl = strcmp(js.backend, "nccl") == 0;
        if (!nccl) /* the GPUs reserved for nccl's points (if any ran) are not needed from here on */
            runctx_release_gpus(ctx);
        size_t w;
        const json_t *v;
        json_array_foreach(worlds, w, v)
        {
            int world = (int)json_integer_value(v);
            rc = nccl ? run_nccl_world(&js, world, points, count, times)
                      : run_mpi_world(&js, world, points, count, times);
            if (rc != LMK_OK)
                goto out;
        }
    }
    rc = runctx_sweep_verdict((size_t)js.total, (size_t)js.succeeded, js.first_error, errbuf, errlen);
    if (rc != LMK_OK)
        goto out;
    /* "backend" as the spec gives it: a name, or the list */
    const json_t *backend = json_object_get(spec, "backend");
    *result = json_pack("{s:o, s:i, s:i, s:b}", "backend", backend ? json_deep_copy(backend) : json_string("nccl"),
                        "points", js.total, "failed", js.total - js.succeeded, "all_correct", js.all_correct);
out:
    free(times);
    return rc;
}

/* --- storage and table --------------------------------------------------------------- */

static int allreduce_store_run(sqlite3 *db, int64_t job_id, int64_t run_id, const json_t *spec, const json_t *run)
{
    (void)spec;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO allreduce_runs (run_id, job_id, backend, dtype, world_size, size_bytes, "
                                "size_label, warmup, iterations, status, error, median_ms, mean_ms, min_ms, max_ms, "
                                "algbw_gbps, busbw_gbps, correct, mismatches, devices, oversubscribed, launch) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    const char *text_fields[] = {"backend", "dtype"};
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, job_id);
    for (int i = 0; i < 2; i++)
        sqlite3_bind_text(st, 3 + i, json_string_value(json_object_get(run, text_fields[i])), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, json_integer_value(json_object_get(run, "world_size")));
    sqlite3_bind_int64(st, 6, json_integer_value(json_object_get(run, "size_bytes")));
    sqlite3_bind_text(st, 7, json_string_value(json_object_get(run, "size")), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 8, json_integer_value(json_object_get(run, "warmup")));
    sqlite3_bind_int64(st, 9, json_integer_value(json_object_get(run, "iterations")));
    sqlite3_bind_text(st, 10, json_string_value(json_object_get(run, "status")), -1, SQLITE_TRANSIENT);
    const char *error = json_string_value(json_object_get(run, "error"));
    if (error)
        sqlite3_bind_text(st, 11, error, -1, SQLITE_TRANSIENT);
    const char *stats[] = {"median_ms", "mean_ms", "min_ms", "max_ms", "algbw_gbps", "busbw_gbps"};
    for (int i = 0; i < 6; i++)
        jobkind_bind_real_or_null(st, 12 + i, json_object_get(run, stats[i]));
    const json_t *correct = json_object_get(run, "correct");
    if (json_is_boolean(correct))
        sqlite3_bind_int(st, 18, json_is_true(correct));
    const json_t *mismatches = json_object_get(run, "mismatches");
    if (json_is_integer(mismatches))
        sqlite3_bind_int64(st, 19, json_integer_value(mismatches));
    const char *devices = json_string_value(json_object_get(run, "devices"));
    if (devices)
        sqlite3_bind_text(st, 20, devices, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 21, json_is_true(json_object_get(run, "oversubscribed")));
    const char *launch = json_string_value(json_object_get(run, "launch"));
    if (launch)
        sqlite3_bind_text(st, 22, launch, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_OK)
        return rc;
    const json_t *samples = json_object_get(run, "times_ms");
    if (!json_array_size(samples))
        return SQLITE_OK;
    rc = sqlite3_prepare_v2(db, "INSERT INTO allreduce_samples (run_id, iteration, ms) VALUES (?, ?, ?)", -1, &st,
                            NULL);
    size_t i;
    const json_t *v;
    json_array_foreach(samples, i, v)
    {
        if (rc != SQLITE_OK)
            break;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
        sqlite3_bind_double(st, 3, json_number_value(v));
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    return rc;
}

/* Rows: one per point, backend by backend (nccl, then mpi: the order they
 * ran), by size then world size inside. "launch": threads or processes
 * ("—" for rows stored before migration 0031). "oversubscribed": yes where
 * the mpi backend ran more ranks than the machine has cores (its times then
 * measure the scheduler as much as the collective), no otherwise. */
static int allreduce_table(sqlite3 *db, int64_t job_id, json_t **table, api_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT backend, size_label, world_size, median_ms, mean_ms, min_ms, max_ms, algbw_gbps, "
                           "busbw_gbps, correct, status, error, oversubscribed, launch FROM allreduce_runs WHERE job_id = ? "
                           "ORDER BY backend = 'mpi', size_bytes, world_size, id",
                           -1, &st, NULL) != SQLITE_OK)
        return api_fail(err, API_ERR_INTERNAL, NULL, "allreduce table: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, job_id);
    json_t *rows = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *launch = (const char *)sqlite3_column_text(st, 13); /* NULL: stored before migration 0031 */
        json_t *row = json_pack("[s, s, s, i]", sqlite3_column_text(st, 0), launch ? launch : "—",
                                sqlite3_column_text(st, 1), sqlite3_column_int(st, 2));
        for (int c = 3; c <= 8; c++) {
            char cell[32] = "—";
            if (sqlite3_column_type(st, c) != SQLITE_NULL)
                snprintf(cell, sizeof cell, c <= 6 ? "%.4f" : "%.2f", sqlite3_column_double(st, c));
            json_array_append_new(row, json_string(cell));
        }
        json_array_append_new(row, json_string(sqlite3_column_type(st, 9) == SQLITE_NULL ? "—"
                                               : sqlite3_column_int(st, 9)                ? "yes"
                                                                                           : "no"));
        json_array_append_new(row, json_string(sqlite3_column_int(st, 12) ? "yes" : "no"));
        const char *status = (const char *)sqlite3_column_text(st, 10);
        const char *error = (const char *)sqlite3_column_text(st, 11);
        char cell[600];
        snprintf(cell, sizeof cell, "%s%s%s", status, error ? ": " : "", error ? error : "");
        json_array_append_new(row, json_string(cell));
        json_array_append_new(rows, row);
    }
    sqlite3_finalize(st);
    *table = json_pack("{s:[s,s,s,s,s,s,s,s,s,s,s,s,s], s:o}", "columns", "backend", "launch", "size", "world", "median ms",
                       "mean ms", "min ms", "max ms", "algbw GB/s", "busbw GB/s", "correct", "oversubscribed",
                       "status", "rows", rows);
    return 0;
}

/* The nccl backend runs on GPUs only (the mpi backend on CPU processes):
 * a spec with nccl, alone or in a list, is refused. */
static int allreduce_check_no_gpu(const json_t *spec, api_error *err)
{
    if (!uses_backend(spec, "nccl"))
        return 0;
    if (json_is_array(json_object_get(spec, "backend")))
        return api_fail(err, API_ERR_INVALID_SPEC, "backend",
                        "the nccl backend needs GPUs (list only \"mpi\", which runs on CPU processes); " JOBKIND_NO_GPU);
    return api_fail(err, API_ERR_INVALID_SPEC, "backend",
                    "the nccl backend needs GPUs (backend \"mpi\" runs on CPU processes); " JOBKIND_NO_GPU);
}

const jobkind jobkind_allreduce = {
    .name = "allreduce",
    .check = allreduce_check,
    .check_no_gpu = allreduce_check_no_gpu,
    .gpus_needed = allreduce_gpus_needed,
    .run = allreduce_run,
    .store_run = allreduce_store_run,
    .store_failed_runs = 1, /* allreduce_runs keeps failed points with their error (0003_allreduce.sql) */
    .table = allreduce_table,
};
