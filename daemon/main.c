/* lmperfd: the daemon (default), one-shot mode (`run SPEC.json`), a client
 * of a running daemon (`submit SPEC.json`), and the
 * internal worker sub-command (`__worker`), and one MPI rank of the allreduce
 * job (`__allreduce-rank`, started by mpirun). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "allreduce_rank.h"
#include "api.h"
#include "client.h"
#include "config.h"
#include "device.h"
#include "jsonschema.h"
#include "log.h"
#include "queue.h"
#include "scheduler.h"
#include "service.h"
#include "spec.h"
#include "store.h"
#include "worker.h"

static int write_port_file(const char *path, int port)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static int serve(int argc, char **argv)
{
    daemon_config config;
    char err[512];
    int rc = config_parse(&config, argc, argv, err, sizeof err);
    if (rc)
        return rc > 0 ? 0 : (fprintf(stderr, "lmperfd: %s\n", err), 2);
    if (config_check_web_root(&config, err, sizeof err))
        return fprintf(stderr, "lmperfd: %s\n", err), 2;
    if (config.verbose)
        log_set_level(LOG_DEBUG);

    /* signals go to sigwait() in this thread only; threads inherit the mask */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "lmperfd: cannot find its own executable: %s\n", strerror(errno));
        return 1;
    }
    exe[n] = '\0';

    /* Start-up order: bind the port first (a busy port ends the start before
     * the database is opened or a recovered job runs), then open and recover
     * the store, start the scheduler, and only then answer requests (those
     * that came meanwhile wait in the socket's backlog). */
    store *st = NULL;
    job_queue *queue = queue_create();
    scheduler *sched = NULL;
    api_server *server = NULL;
    int status = 1;
    api_config ac = {.host = config.host, .port = config.port,
                     .web_root = config.web_root[0] ? config.web_root : NULL,
                     .token = config.token[0] ? config.token : NULL, .max_body_bytes = config.max_body_bytes,
                     .timeout_s = config.http_timeout_s, .threads = config.http_threads};
    if (api_server_listen(&ac, &server, err, sizeof err)) {
        log_error("daemon", "%s", err);
        goto out;
    }
    if (!queue || store_open(config.db_path, &st, err, sizeof err)) {
        log_error("daemon", "%s", queue ? err : "out of memory");
        goto out;
    }
    int64_t *queued = NULL;
    size_t queued_count = 0;
    if (store_recover(st, &queued, &queued_count) != STORE_OK) {
        log_error("daemon", "cannot recover the job queue from %s", config.db_path);
        goto out;
    }
    for (size_t i = 0; i < queued_count; i++)
        queue_push(queue, queued[i]);
    free(queued);
    if (queued_count)
        log_info("daemon", "%zu queued job(s) recovered", queued_count);

    scheduler_config sc = {.exe_path = exe, .cpu_only = config.cpu_only, .max_gpus = config.max_gpus};
    if (scheduler_start(&sc, st, queue, &sched)) {
        log_error("daemon", "cannot start the scheduler");
        goto out;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    service svc = {.store = st, .queue = queue, .scheduler = sched, .db_path = config.db_path,
                   .accepting = 1, .max_queued = (size_t)config.max_queued,
                   .started_unix = (double)tv.tv_sec + tv.tv_usec * 1e-6, .submit_lock = PTHREAD_MUTEX_INITIALIZER};
    api_backend backend;
    service_bind(&svc, &backend);
    if (api_server_serve(server, &backend, err, sizeof err)) {
        log_error("daemon", "%s", err);
        goto out;
    }
    int port = api_server_port(server);
    if (config.port_file[0] && write_port_file(config.port_file, port))
        log_warn("daemon", "cannot write port file %s: %s", config.port_file, strerror(errno));
    log_info("daemon", "lmperfd %s listening on http://%s:%d (database %s, web %s%s)", LMPERF_VERSION,
             config.host, port, config.db_path, config.web_root[0] ? config.web_root : "none",
             config.token[0] ? ", token required for POST/DELETE" : "");

    int sig = 0;
    sigwait(&stop_signals, &sig);
    log_info("daemon", "%s: no new jobs; waiting for running jobs to finish (send it again to cancel them)",
             strsignal(sig));
    svc.accepting = 0; /* the API stays up while jobs drain: healthz says "stopping", POST gets 503, DELETE cancels */
    scheduler_begin_stop(sched);
    /* a second SIGINT/SIGTERM while jobs drain cancels them (workers killed,
     * jobs 'cancelled'; queued jobs stay queued for the next start) */
    int aborted = 0;
    while (!scheduler_stopped(sched)) {
        struct timespec poll_period = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
        sig = sigtimedwait(&stop_signals, NULL, &poll_period);
        if (sig > 0 && !aborted) {
            log_info("daemon", "%s again: cancelling the running jobs and stopping now", strsignal(sig));
            scheduler_abort_running(sched);
            aborted = 1;
        }
    }
    status = 0;
    log_info("daemon", "stopped");
out:
    /* the HTTP threads first: until they are stopped a request (the page polls
     * GET /v1/system) may reach the scheduler and the store */
    api_server_stop(server);
    scheduler_stop(sched); /* its thread has ended: joins and frees */
    store_close(st);
    queue_free(queue);
    return status;
}

/* lmperfd __worker --fd N --device D */
static int worker_command(int argc, char **argv)
{
    int fd = -1, want = DEVICE_AUTO;
    for (int a = 2; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--fd") == 0)
            fd = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--device") == 0)
            want = atoi(argv[a + 1]);
    }
    if (fd < 0) {
        fprintf(stderr, "lmperfd __worker: --fd is required (this sub-command is internal)\n");
        return 2;
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    return worker_main(fd, want);
}

/* lmperfd run SPEC.json [--cpu-only] [--table md|csv|json [--pivot NAME]] [--db FILE] */
#define RUN_SPEC_MAX_BYTES (16u << 20) /* a spec file larger than this is refused unread */

/* The text of the spec file at path ("-": stdin), NUL-terminated, in *text
 * (new) and its length in *len (a byte order mark is still there). Returns 0,
 * or -1 with the reason in why. */
static int read_spec_text(const char *path, char **text, size_t *len, char *why, size_t whylen)
{
    int from_stdin = strcmp(path, "-") == 0;
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(why, whylen, "cannot open it: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (!from_stdin && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        snprintf(why, whylen, "is a directory, not a spec file");
        return -1;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    int rc = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) {
            if (ferror(f)) {
                snprintf(why, whylen, "cannot read it: %s", strerror(errno));
                rc = -1;
            }
            break;
        }
        if (cap >= RUN_SPEC_MAX_BYTES) {
            snprintf(why, whylen, "is larger than %u MiB: not a job spec", RUN_SPEC_MAX_BYTES >> 20);
            rc = -1;
            break;
        }
        cap *= 2;
        char *grown = realloc(buf, cap + 1);
        if (!grown)
            free(buf);
        buf = grown;
    }
    if (!from_stdin)
        fclose(f);
    if (!buf) {
        snprintf(why, whylen, "out of memory reading it");
        return -1;
    }
    if (rc == 0 && n == 0) {
        snprintf(why, whylen, "is empty: a job spec is a JSON object such as {\"kind\": \"numerics\"}");
        rc = -1;
    }
    if (rc) {
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

/* A refused spec in one-shot mode: the API's error document on stdout, one
 * line for a person on stderr. */
static void print_spec_error(const char *path, const api_error *aerr)
{
    json_t *e = json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", api_error_wire_code(aerr->code), "message",
                          aerr->message, "field", aerr->field[0] ? aerr->field : NULL);
    json_dumpf(e, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(e);
    fprintf(stderr, "lmperfd run: %s: %s%s%s%s\n", path, aerr->message, aerr->field[0] ? " (field " : "",
            aerr->field, aerr->field[0] ? ")" : "");
}

/* Opens the database at db_path for a one-shot job (quiet: its migrations
 * are not logged, a scratch database's are not news) in *st (new,
 * store_close). Done before the job runs, so that a database another
 * lmperfd holds, or a path that cannot be one, is refused at once rather
 * than after the job. Returns 0, or -1 with the reason on stderr. */
static int open_oneshot_store(const char *db_path, int quiet, store **st)
{
    char why[512];
    if (quiet)
        log_set_level(LOG_WARN);
    int rc = store_open(db_path, st, why, sizeof why);
    log_set_level(LOG_INFO);
    if (rc)
        fprintf(stderr, "lmperfd run: %s; the job was not run\n", why);
    return rc ? -1 : 0;
}

/* Records a one-shot job's document (worker_run_oneshot: status, error,
 * result, runs, environment) as a job of st (borrowed; open_oneshot_store's,
 * at db_path) as the daemon would have: the job row, its environment, each
 * run through the kind's store_run (so its tables and views), its end. Then,
 * when table_format is "md", "csv" or "json", prints the job's summary table
 * (GET /v1/jobs/{id}/table, with ?pivot=pivot unless NULL) on stdout.
 * Returns 0, or -1 with the reason on stderr. */
static int record_oneshot(store *st, const char *db_path, const jobkind *kind, const json_t *spec,
                          const json_t *doc, const char *table_format, const char *pivot, int quiet_store)
{
    int64_t id = 0;
    const json_t *env = json_object_get(doc, "environment");
    const char *label = json_string_value(json_object_get(spec, "label"));
    double timeout_s = json_number_value(json_object_get(spec, "timeout_s"));
    char device[32];
    device_label(env, device, sizeof device);
    int rc = store_job_insert(st, kind->name, label, timeout_s, spec, &id) || store_job_start(st, id, -1, device);
    if (!rc && env)
        rc = store_env_record(st, id, env);
    size_t i;
    const json_t *run;
    json_array_foreach(json_object_get(doc, "runs"), i, run)
    {
        if (!rc)
            rc = store_run_add(st, kind, id, (int)i, spec, run);
    }
    if (!rc)
        rc = store_job_finish(st, id, json_string_value(json_object_get(doc, "status")) ?: "failed",
                              json_string_value(json_object_get(doc, "error")), json_object_get(doc, "result"));
    if (rc) {
        fprintf(stderr, "lmperfd run: recording the job in %s failed (store code %d)\n", db_path, rc);
        return -1;
    }
    if (!quiet_store)
        fprintf(stderr, "lmperfd run: recorded as job %lld in %s\n", (long long)id, db_path);
    if (table_format) {
        json_t *table = NULL;
        api_error aerr = {0};
        api_table_query all = {.run = -1, .pivot = pivot};
        char *text = store_job_table(st, kind, id, &all, &table, &aerr) ? NULL : api_table_render(table, table_format);
        json_decref(table);
        if (!text) {
            fprintf(stderr, "lmperfd run: the %s job's table: %s\n", kind->name,
                    aerr.message[0] ? aerr.message : "out of memory");
            return -1;
        }
        fputs(text, stdout);
        if (strcmp(table_format, "json") == 0) /* md and csv end in a line break already */
            putchar('\n');
        free(text);
    }
    return 0;
}

/* A scratch database for `run --table` without --db: a new directory under
 * $TMPDIR (or /tmp) holding run.db; dir gets the directory. Returns 0 or -1. */
static int scratch_database(char *dir, size_t dirlen, char *db, size_t dblen)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dirlen, "%s/lmperfd-run-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    snprintf(db, dblen, "%s/run.db", dir);
    return 0;
}

/* Removes scratch_database's directory and what SQLite left in it. */
static void remove_scratch_database(const char *dir, const char *db)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    char path[PATH_MAX + 16];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(path, sizeof path, "%s%s", db, suffixes[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Whether arg asks for a sub-command's usage. */
static int asks_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

static int run_command(int argc, char **argv)
{
    static const char run_usage[] = "usage: lmperfd run " CONFIG_RUN_ARGS "   " CONFIG_SPEC_STDIN "\n";
    const char *path = NULL, *db_path = NULL, *table_format = NULL, *pivot = NULL;
    int want = DEVICE_AUTO;
    for (int a = 2; a < argc; a++) {
        if (asks_help(argv[a]))
            return fputs(run_usage, stdout) < 0;
        if (strcmp(argv[a], "--cpu-only") == 0)
            want = DEVICE_CPU;
        else if ((strcmp(argv[a], "--db") == 0 || strcmp(argv[a], "--table") == 0 ||
                  strcmp(argv[a], "--pivot") == 0) &&
                 (a + 1 >= argc || strncmp(argv[a + 1], "--", 2) == 0)) { /* the next flag is not its value */
            fprintf(stderr, "lmperfd run: %s needs a value\n", argv[a]);
            return 2;
        } else if (strcmp(argv[a], "--db") == 0)
            db_path = argv[++a];
        else if (strcmp(argv[a], "--pivot") == 0)
            pivot = argv[++a];
        else if (strcmp(argv[a], "--table") == 0) {
            table_format = argv[++a];
            if (!api_table_format_known(table_format)) {
                fprintf(stderr, "lmperfd run: --table takes md, csv or json, not '%s'\n", table_format);
                return 2;
            }
        } else if (!path && (argv[a][0] != '-' || strcmp(argv[a], "-") == 0))
            path = argv[a];
        else {
            fprintf(stderr, "lmperfd run: %s %s\n%s", argv[a][0] == '-' ? "unknown option" : "unexpected argument",
                    argv[a], run_usage);
            return 2;
        }
    }
    if (!path) {
        fputs(run_usage, stderr);
        return 2;
    }
    if (pivot && !table_format) {
        fprintf(stderr, "lmperfd run: --pivot reshapes the table: give --table md|csv|json too\n");
        return 2;
    }
    char *text = NULL, why[256];
    size_t len = 0;
    if (read_spec_text(path, &text, &len, why, sizeof why)) {
        fprintf(stderr, "lmperfd run: %s %s\n", path, why);
        return 2;
    }
    api_error aerr;
    json_t *spec = jsonschema_parse_spec(text, len, path, &aerr);
    free(text);
    if (!spec) {
        fprintf(stderr, "lmperfd run: %s\n", aerr.message);
        return 2;
    }
    const jobkind *kind;
    int gpu_count = 0;
    /* the same refusals as POST /v1/jobs on a daemon without a GPU worker (the
     * GPUs counted only: worker_run_oneshot probes the one it runs on) */
    api_table_query pivot_query = {.run = -1, .pivot = pivot};
    if (spec_validate(spec, &kind, &aerr) ||
        (kind->check_no_gpu && device_picks_cpu(want, &gpu_count) && kind->check_no_gpu(spec, &aerr)) ||
        jobkind_check_selectors(kind, &pivot_query, &aerr) < 0) { /* a pivot the kind's table has not */
        print_spec_error(path, &aerr);
        json_decref(spec);
        return 2;
    }
    /* the database first: one that cannot take the job is refused before the job runs */
    char dir[PATH_MAX], scratch[PATH_MAX + 16];
    int use_scratch = !db_path && table_format;
    store *st = NULL;
    if (use_scratch && scratch_database(dir, sizeof dir, scratch, sizeof scratch)) {
        fprintf(stderr, "lmperfd run: no scratch directory for the table: %s; the job was not run\n",
                strerror(errno));
        json_decref(spec);
        return 1;
    }
    if ((db_path || use_scratch) && open_oneshot_store(use_scratch ? scratch : db_path, use_scratch, &st)) {
        if (use_scratch)
            remove_scratch_database(dir, scratch);
        json_decref(spec);
        return 1;
    }
    json_t *out = NULL;
    int rc = worker_run_oneshot(spec, want, &out);
    if (!table_format) { /* the table replaces the document on stdout */
        json_dumpf(out, stdout, JSON_INDENT(2));
        putchar('\n');
    }
    if (st) {
        if (record_oneshot(st, use_scratch ? scratch : db_path, kind, spec, out, table_format, pivot, use_scratch))
            rc = -1;
        store_close(st);
        if (use_scratch)
            remove_scratch_database(dir, scratch);
    }
    if (json_string_value(json_object_get(out, "status")) == NULL ||
        strcmp(json_string_value(json_object_get(out, "status")), "succeeded") != 0)
        fprintf(stderr, "lmperfd run: %s: the job failed: %s\n", path,
                json_string_value(json_object_get(out, "error")) ? json_string_value(json_object_get(out, "error"))
                                                                 : "(no reason given)");
    json_decref(out);
    json_decref(spec);
    return rc == 0 ? 0 : 1;
}

#define SUBMIT_POLL_S 0.5 /* between status requests while waiting for the job */

/* Whether submit's --pivot (borrowed) is one the table of the spec's kind
 * (text[0..len), at path) cannot take: then the reason is on stderr and the
 * job is not posted (it would run to its end and only then have no table).
 * A spec that does not parse, or of no known kind, is the daemon's to
 * refuse: 0. */
static int submit_pivot_refused(const char *path, const char *text, size_t len, const char *pivot)
{
    api_error aerr = {0};
    json_t *spec = jsonschema_parse_spec(text, len, path, &aerr);
    const jobkind *kind = jobkind_find(json_string_value(json_object_get(spec, "kind")));
    api_table_query query = {.run = -1, .pivot = pivot};
    int refused = kind && jobkind_check_selectors(kind, &query, &aerr) < 0;
    if (refused)
        fprintf(stderr, "lmperfd submit: %s: --pivot %s: %s; the job was not submitted\n", path, pivot,
                aerr.message);
    json_decref(spec);
    return refused;
}

/* lmperfd submit SPEC.json [--url URL] [--token TOKEN] [--table md|csv|json] [--no-wait] [--quiet]:
 * the job posted to a running lmperfd (client_submit). The URL defaults to
 * LMPERF_URL, else to where a daemon started with the same environment
 * listens (LMPERF_HOST, LMPERF_PORT: config_parse's defaults); the token to
 * LMPERF_TOKEN. */
static int submit_command(int argc, char **argv)
{
    static const char usage[] = "usage: lmperfd submit " CONFIG_SUBMIT_ARGS "   " CONFIG_SPEC_STDIN "\n";
    const char *url = getenv("LMPERF_URL"), *token = NULL;
    client_submit_options o = {.wait = 1, .poll_s = SUBMIT_POLL_S};
    for (int a = 2; a < argc; a++) {
        if (asks_help(argv[a]))
            return fputs(usage, stdout) < 0;
        int takes_value = strcmp(argv[a], "--url") == 0 || strcmp(argv[a], "--token") == 0 ||
                          strcmp(argv[a], "--table") == 0 || strcmp(argv[a], "--pivot") == 0;
        if (takes_value && (a + 1 >= argc || strncmp(argv[a + 1], "--", 2) == 0)) {
            fprintf(stderr, "lmperfd submit: %s needs a value\n", argv[a]);
            return 2;
        }
        if (strcmp(argv[a], "--url") == 0)
            url = argv[++a];
        else if (strcmp(argv[a], "--token") == 0)
            token = argv[++a];
        else if (strcmp(argv[a], "--table") == 0) {
            o.table_format = argv[++a];
            if (!api_table_format_known(o.table_format)) {
                fprintf(stderr, "lmperfd submit: --table takes md, csv or json, not '%s'\n", o.table_format);
                return 2;
            }
        } else if (strcmp(argv[a], "--pivot") == 0) {
            o.pivot = argv[++a];
            if (!jobkind_pivot_known(o.pivot)) { /* the daemon would refuse it only after the job ran */
                fprintf(stderr, "lmperfd submit: --pivot takes precision (a benchmark job's table), not '%s'\n",
                        o.pivot);
                return 2;
            }
        } else if (strcmp(argv[a], "--no-wait") == 0)
            o.wait = 0;
        else if (strcmp(argv[a], "--quiet") == 0)
            o.quiet = 1;
        else if (!o.spec_path && (argv[a][0] != '-' || strcmp(argv[a], "-") == 0))
            o.spec_path = argv[a];
        else if (strcmp(argv[a], "--host") == 0 || strcmp(argv[a], "--port") == 0) {
            /* the daemon's options: a newcomer who started it with --port tries them here */
            fprintf(stderr, "lmperfd submit: %s is the daemon's option; here the daemon is --url http://HOST:PORT "
                    "(or LMPERF_URL, or LMPERF_HOST and LMPERF_PORT)\n%s", argv[a], usage);
            return 2;
        } else {
            fprintf(stderr, "lmperfd submit: %s %s\n%s", argv[a][0] == '-' ? "unknown option" : "unexpected argument",
                    argv[a], usage);
            return 2;
        }
    }
    if (!o.spec_path) {
        fputs(usage, stderr);
        return 2;
    }
    if (o.pivot && !o.table_format) {
        fprintf(stderr, "lmperfd submit: --pivot reshapes the table: give --table md|csv|json too\n");
        return 2;
    }
    if (o.table_format && !o.wait) {
        fprintf(stderr, "lmperfd submit: --table needs the job to end: leave out --no-wait\n");
        return 2;
    }
    /* the daemon's own defaults and environment: where it listens, its token */
    daemon_config config;
    char why[512], default_url[128];
    char *no_args[] = {argv[0], NULL};
    if (config_parse(&config, 1, no_args, why, sizeof why)) {
        fprintf(stderr, "lmperfd submit: %s\n", why);
        return 2;
    }
    if (!url) {
        if (config.port == 0) {
            fprintf(stderr, "lmperfd submit: LMPERF_PORT is 0 (any free port): give the daemon's --url\n");
            return 2;
        }
        snprintf(default_url, sizeof default_url, "http://%s:%d",
                 strcmp(config.host, "0.0.0.0") == 0 ? "127.0.0.1" : config.host, config.port);
        url = default_url;
    }
    client_target target = {.token = token ? token : config.token[0] ? config.token : NULL};
    if (client_parse_url(url, &target, why, sizeof why)) {
        fprintf(stderr, "lmperfd submit: %s\n", why);
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (read_spec_text(o.spec_path, &text, &len, why, sizeof why)) {
        fprintf(stderr, "lmperfd submit: %s %s\n", o.spec_path, why);
        return 2;
    }
    if (o.pivot && submit_pivot_refused(o.spec_path, text, len, o.pivot)) {
        free(text);
        return 2;
    }
    int rc = client_submit(&target, text, len, &o);
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "__worker") == 0)
        return worker_command(argc, argv);
    if (argc > 1 && strcmp(argv[1], ALLREDUCE_RANK_COMMAND) == 0)
        return allreduce_rank_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "run") == 0)
        return run_command(argc, argv);
    if (argc > 1 && strcmp(argv[1], "submit") == 0)
        return submit_command(argc, argv);
    if (argc > 1 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0))
        return printf("lmperfd %s\n", LMPERF_VERSION) < 0;
    return serve(argc, argv);
}
