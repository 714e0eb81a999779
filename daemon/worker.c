/* Worker process main loop and the one-shot runner; both call the job kind's
 * run() through run_job(). */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "device.h"
#include "errors.h"
#include "jobkind.h"
#include "lineio.h"
#include "log.h"
#include "runctx.h"
#include "status.h"
#include "worker.h"

/* Runs spec with kind's runner. Returns the lmk status of run(); sets
 * *result (new) on success and fills errbuf otherwise. */
static int run_job(run_ctx *ctx, const json_t *spec, json_t **result, char *errbuf, size_t errlen)
{
    const char *kind_name = json_string_value(json_object_get(spec, "kind"));
    const jobkind *kind = kind_name ? jobkind_find(kind_name) : NULL;
    *result = NULL;
    if (!kind || !kind->run) {
        snprintf(errbuf, errlen, "unknown job kind %s", kind_name ? kind_name : "(none)");
        return LMK_INVALID;
    }
    errbuf[0] = '\0';
    int rc = kind->run(ctx, spec, result, errbuf, errlen);
    if (rc != LMK_OK) {
        json_decref(*result);
        *result = NULL;
        if (!errbuf[0])
            snprintf(errbuf, errlen, "%s", lmk_status_text(rc));
        utf8_repair(errbuf); /* e.g. tool output cut inside a character: a JSON string needs UTF-8 */
    } else if (!*result) {
        *result = json_object();
    }
    return rc;
}

static void send_line(int fd, json_t *line /* steals */)
{
    if (line_write(fd, line))
        log_error("worker", "write to daemon failed");
    json_decref(line);
}

int worker_main(int fd, int want)
{
    /* die with the daemon; the stop signals are the daemon's, which drains or
     * cancels the jobs and ends its workers itself (SIGKILL, or end of file):
     * Ctrl-C on its terminal, and a SIGTERM to its whole process group or
     * cgroup (timeout(1), systemctl stop), reach the workers too */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);

    runctx_device device;
    int gpu_count = 0;
    char err[512];
    if (device_probe(want, &device, &gpu_count, err, sizeof err)) {
        utf8_repair(err);
        log_error("worker", "%s", err);
        send_line(fd, json_pack("{s:s, s:s}", "type", "fatal", "error", err));
        return 2;
    }
    run_ctx *ctx = runctx_create(RUNCTX_WORKER, fd, &device);
    if (!ctx)
        return 2;
    send_line(fd, json_pack("{s:s, s:i, s:o, s:i}", "type", "hello", "pid", (int)getpid(), "device",
                            device_to_json(&device), "gpu_count", gpu_count));
    log_info("worker", "ready on %s", device.name);

    int status = 0;
    for (;;) {
        int closed = 0;
        json_t *msg = runctx_next_message(ctx, &closed);
        if (!msg)
            break; /* the daemon closed the socket: exit */
        const char *type = json_string_value(json_object_get(msg, "type"));
        if (!type || strcmp(type, "job") != 0) {
            json_decref(msg); /* a late cancel for a finished job, or noise */
            continue;
        }
        json_int_t job_id = json_integer_value(json_object_get(msg, "job_id"));
        const json_t *spec = json_object_get(msg, "spec");
        runctx_begin_job(ctx, job_id);
        int gpus[64], gpu_count = 0;
        size_t gi;
        json_t *g;
        json_array_foreach(json_object_get(msg, "gpus"), gi, g)
        {
            if (gpu_count < 64 && json_is_integer(g))
                gpus[gpu_count++] = (int)json_integer_value(g);
        }
        runctx_set_gpus(ctx, gpus, gpu_count);
        json_t *result = NULL;
        int rc = run_job(ctx, spec, &result, err, sizeof err);
        if (rc == LMK_OK)
            send_line(fd, json_pack("{s:s, s:I, s:o}", "type", "done", "job_id", job_id, "result", result));
        else if (rc == LMK_CANCELLED || runctx_cancelled(ctx))
            send_line(fd, json_pack("{s:s, s:I}", "type", "cancelled", "job_id", job_id));
        else
            send_line(fd, json_pack("{s:s, s:I, s:s}", "type", "failed", "job_id", job_id, "error", err));
        json_decref(msg);
        if (rc == LMK_DEVICE) {
            /* a device error may be sticky: let the daemon start a fresh worker */
            log_warn("worker", "device error, exiting so the daemon restarts this worker");
            status = 3;
            break;
        }
    }
    runctx_free(ctx);
    return status;
}

/* One-shot mode's timeout_s (the daemon's scheduler enforces it for
 * workers): the first SIGALRM asks the job to stop at its next safe point;
 * one ONESHOT_GRACE_S later, a job still running is ended with the process,
 * as the daemon restarts a worker that does not stop. */
#define ONESHOT_GRACE_S 30
#define ONESHOT_TEXT(x) #x
#define ONESHOT_STR(x) ONESHOT_TEXT(x)
static volatile sig_atomic_t oneshot_timed_out;

static void oneshot_alarm(int sig)
{
    (void)sig;
    if (oneshot_timed_out) {
        static const char msg[] =
            "lmperfd run: the job did not stop within " ONESHOT_STR(ONESHOT_GRACE_S) " s of its timeout_s; exiting\n";
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)ignored;
        _exit(1);
    }
    oneshot_timed_out = 1;
    alarm(ONESHOT_GRACE_S);
}

int worker_run_oneshot(const json_t *spec, int want, json_t **out)
{
    runctx_device device;
    int gpu_count = 0;
    char err[512];
    json_t *doc = json_object();
    json_object_set_new(doc, "kind", json_deep_copy(json_object_get(spec, "kind")));
    json_object_set_new(doc, "spec", json_deep_copy(spec));
    if (device_probe(want, &device, &gpu_count, err, sizeof err)) {
        utf8_repair(err);
        json_object_set_new(doc, "status", json_string("failed"));
        json_object_set_new(doc, "error", json_string(err));
        *out = doc;
        return -1;
    }
    json_object_set_new(doc, "environment", device_to_json(&device));
    run_ctx *ctx = runctx_create(RUNCTX_ONESHOT, -1, &device);
    if (!ctx) {
        json_decref(doc);
        return -1;
    }
    runctx_begin_job(ctx, 0);
    double timeout_s = json_number_value(json_object_get(spec, "timeout_s"));
    unsigned alarm_s = timeout_s > 0 ? (unsigned)ceil(timeout_s) : 0;
    if (alarm_s) {
        oneshot_timed_out = 0;
        runctx_set_stop_flag(ctx, &oneshot_timed_out);
        signal(SIGALRM, oneshot_alarm);
        alarm(alarm_s);
    }
    json_t *result = NULL;
    int rc = run_job(ctx, spec, &result, err, sizeof err);
    alarm(0);
    if (oneshot_timed_out && rc != LMK_OK) {
        snprintf(err, sizeof err, "timed out after %g s (timeout_s)", timeout_s);
        rc = LMK_CANCELLED;
    }
    json_object_set_new(doc, "status", json_string(rc == LMK_OK ? "succeeded" : "failed"));
    json_object_set_new(doc, "error", rc == LMK_OK ? json_null() : json_string(err));
    json_object_set_new(doc, "result", result ? result : json_null());
    json_object_set(doc, "runs", runctx_collected_runs(ctx));
    runctx_free(ctx);
    *out = doc;
    return rc == LMK_OK ? 0 : -1;
}
