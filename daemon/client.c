/* `lmperfd submit`: a job posted to a running lmperfd and followed to its
 * end (client.h). */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clock_ms.h"

#define CLIENT_MAX_ANSWER_BYTES ((size_t)1 << 30) /* a larger answer is not lmperfd's */
#define CLIENT_REQUEST_TIMEOUT_S 60.0             /* connection and each read */
#define CLIENT_LOST_AFTER_S 30.0 /* no answer for this long while waiting: the daemon is gone */

/* SIGINTs while client_submit waits. A request under way when one comes is
 * abandoned ("interrupted"), so that Ctrl-C is acted on at once even when
 * the daemon does not answer. */
static volatile sig_atomic_t interrupts;

int client_parse_url(const char *url, client_target *t, char *why, size_t whylen)
{
    if (strncasecmp(url, "https://", 8) == 0) {
        snprintf(why, whylen, "lmperfd serves plain HTTP: use http://, not https:// (%s)", url);
        return -1;
    }
    if (strncasecmp(url, "http://", 7) != 0) {
        snprintf(why, whylen, "the URL must start with http:// (%s)", url);
        return -1;
    }
    const char *p = url + 7, *host_end;
    size_t host_len;
    if (*p == '[') { /* [IPv6] */
        host_end = strchr(p, ']');
        if (!host_end) {
            snprintf(why, whylen, "no ']' after the IPv6 address in %s", url);
            return -1;
        }
        host_len = (size_t)(host_end - p - 1);
        p++;
        host_end++;
    } else {
        host_len = strcspn(p, ":/?#");
        host_end = p + host_len;
    }
    if (host_len == 0 || host_len >= sizeof t->host) {
        snprintf(why, whylen, "no host (or one too long) in %s", url);
        return -1;
    }
    client_target out = *t;
    memcpy(out.host, p, host_len);
    out.host[host_len] = '\0';
    p = host_end;
    snprintf(out.port, sizeof out.port, "80");
    if (*p == ':') {
        size_t digits = strspn(p + 1, "0123456789");
        long port = digits && digits <= 5 ? strtol(p + 1, NULL, 10) : 0;
        if (port < 1 || port > 65535) {
            snprintf(why, whylen, "the port must be 1 to 65535 in %s", url);
            return -1;
        }
        snprintf(out.port, sizeof out.port, "%ld", port);
        p += 1 + digits;
    }
    if (*p && *p != '/') {
        snprintf(why, whylen, "the URL may give a path after the port, nothing else (%s)", url);
        return -1;
    }
    size_t prefix_len = strlen(p);
    while (prefix_len && p[prefix_len - 1] == '/')
        prefix_len--;
    if (prefix_len >= sizeof out.prefix || strpbrk(p, "?# ")) {
        snprintf(why, whylen, "the path of %s must be a plain path (no query, at most %zu bytes)", url,
                 sizeof out.prefix - 1);
        return -1;
    }
    memcpy(out.prefix, p, prefix_len);
    out.prefix[prefix_len] = '\0';
    *t = out;
    return 0;
}

void client_answer_free(client_answer *answer)
{
    if (!answer)
        return;
    free(answer->body);
    answer->body = NULL;
    answer->len = 0;
}

/* A connected stream socket to t, with send and receive timeouts of
 * timeout_s; -1 with the reason in why. */
static int connect_to(const client_target *t, double timeout_s, sig_atomic_t seen, char *why, size_t whylen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found = NULL;
    int gai = getaddrinfo(t->host, t->port, &hints, &found);
    if (gai) {
        snprintf(why, whylen, "cannot resolve %s: %s", t->host, gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    snprintf(why, whylen, "cannot connect to %s port %s", t->host, t->port);
    for (struct addrinfo *a = found; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0)
            continue;
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc && errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int err = 0;
            socklen_t errlen = sizeof err;
            int ready;
            do
                ready = poll(&pfd, 1, (int)(timeout_s * 1000));
            while (ready < 0 && errno == EINTR && interrupts == seen);
            if (ready == 0)
                err = ETIMEDOUT;
            else if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen))
                err = errno;
            rc = err ? -1 : 0;
            errno = err;
        }
        if (rc) {
            snprintf(why, whylen, "cannot connect to %s port %s: %s", t->host, t->port, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = (time_t)timeout_s, .tv_usec = (suseconds_t)((timeout_s - (time_t)timeout_s) * 1e6)};
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv)) {
        snprintf(why, whylen, "cannot set up the connection: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *data, size_t len, sig_atomic_t seen)
{
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR && interrupts == seen)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Everything fd sends until it closes, in *out (new, NUL-terminated). A
 * SIGINT since seen ends it ("interrupted"). */
static int read_all(int fd, char **out, size_t *len, sig_atomic_t seen, char *why, size_t whylen)
{
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            snprintf(why, whylen, "out of memory reading the answer");
            return -1;
        }
        if (n == cap) {
            if (cap >= CLIENT_MAX_ANSWER_BYTES) {
                snprintf(why, whylen, "the answer is larger than %zu MiB", CLIENT_MAX_ANSWER_BYTES >> 20);
                free(buf);
                return -1;
            }
            cap *= 2;
            char *grown = realloc(buf, cap + 1);
            if (!grown)
                free(buf);
            buf = grown;
            continue;
        }
        ssize_t got = recv(fd, buf + n, cap - n, 0);
        if (got < 0 && errno == EINTR && interrupts == seen)
            continue;
        if (got < 0) {
            snprintf(why, whylen, "no answer: %s",
                     errno == EINTR ? "interrupted" : errno == EAGAIN ? "timed out" : strerror(errno));
            free(buf);
            return -1;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* The value of header name in head[0..end) (borrowed, up to its CR), or NULL. */
static const char *header_value(const char *head, const char *end, const char *name)
{
    size_t name_len = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line && line + 2 < end; line = strstr(line + 2, "\r\n")) {
        const char *h = line + 2;
        if (strncasecmp(h, name, name_len) == 0 && h[name_len] == ':') {
            h += name_len + 1;
            while (*h == ' ' || *h == '\t')
                h++;
            return h;
        }
    }
    return NULL;
}

/* Decodes a chunked body in place ([body, body + *len)); -1 when malformed. */
static int unchunk(char *body, size_t *len)
{
    const char *in = body, *end = body + *len;
    char *out = body;
    for (;;) {
        char *after;
        unsigned long size = strtoul(in, &after, 16);
        const char *crlf = strstr(after, "\r\n");
        if (after == in || !crlf)
            return -1;
        in = crlf + 2;
        if (size == 0)
            break;
        if ((size_t)(end - in) < size + 2)
            return -1;
        memmove(out, in, size);
        out += size;
        in += size + 2;
    }
    *len = (size_t)(out - body);
    body[*len] = '\0';
    return 0;
}

int client_request(const client_target *t, const char *method, const char *path, const char *body, size_t len,
                   double timeout_s, client_answer *answer, char *why, size_t whylen)
{
    sig_atomic_t seen = interrupts;
    int fd = connect_to(t, timeout_s, seen, why, whylen);
    if (fd < 0)
        return -1;
    char head[2048];
    int head_len = snprintf(head, sizeof head,
                            "%s %s%s HTTP/1.1\r\nHost: %s%s%s:%s\r\nConnection: close\r\nAccept: application/json\r\n"
                            "User-Agent: lmperfd-submit\r\n",
                            method, t->prefix, path, strchr(t->host, ':') ? "[" : "", t->host,
                            strchr(t->host, ':') ? "]" : "", t->port);
    if (t->token && head_len > 0 && (size_t)head_len < sizeof head)
        head_len += snprintf(head + head_len, sizeof head - (size_t)head_len, "Authorization: Bearer %s\r\n", t->token);
    if (body && head_len > 0 && (size_t)head_len < sizeof head)
        head_len += snprintf(head + head_len, sizeof head - (size_t)head_len,
                             "Content-Type: application/json\r\nContent-Length: %zu\r\n", len);
    if (head_len > 0 && (size_t)head_len < sizeof head)
        head_len += snprintf(head + head_len, sizeof head - (size_t)head_len, "\r\n");
    if (head_len <= 0 || (size_t)head_len >= sizeof head) {
        snprintf(why, whylen, "the request line and headers are too long");
        close(fd);
        return -1;
    }
    char *text = NULL;
    size_t text_len = 0;
    if (send_all(fd, head, (size_t)head_len, seen) || (body && send_all(fd, body, len, seen))) {
        /* the daemon may have answered (e.g. 413) and closed before taking the whole body */
        if (interrupts != seen || read_all(fd, &text, &text_len, seen, why, whylen) || text_len == 0) {
            free(text);
            snprintf(why, whylen, "cannot send the request: %s", strerror(errno));
            close(fd);
            return -1;
        }
    } else if (read_all(fd, &text, &text_len, seen, why, whylen)) {
        close(fd);
        return -1;
    }
    close(fd);
    int status = 0;
    char *end_of_head = strstr(text, "\r\n\r\n");
    if (sscanf(text, "HTTP/1.%*d %d", &status) != 1 || status < 100 || status > 599 || !end_of_head) {
        snprintf(why, whylen, "not an HTTP answer from %s port %s", t->host, t->port);
        free(text);
        return -1;
    }
    const char *type = header_value(text, end_of_head, "Content-Type");
    const char *encoding = header_value(text, end_of_head, "Transfer-Encoding");
    const char *length = header_value(text, end_of_head, "Content-Length");
    size_t body_off = (size_t)(end_of_head + 4 - text), body_len = text_len - body_off;
    int chunked = encoding && strncasecmp(encoding, "chunked", 7) == 0;
    if (!chunked && length && strtoull(length, NULL, 10) < body_len)
        body_len = (size_t)strtoull(length, NULL, 10);
    int json = type && strncasecmp(type, "application/json", 16) == 0;
    memmove(text, text + body_off, body_len);
    text[body_len] = '\0';
    if (chunked && unchunk(text, &body_len)) {
        snprintf(why, whylen, "a malformed chunked answer from %s port %s", t->host, t->port);
        free(text);
        return -1;
    }
    *answer = (client_answer){.status = status, .body = text, .len = body_len, .json = json};
    return 0;
}

/* --- lmperfd submit ------------------------------------------------------------------ */

static void on_interrupt(int sig)
{
    (void)sig;
    interrupts++;
}

/* "message (field f)" of an API error document, or the body's first line. */
static void describe_error(const client_answer *a, char *out, size_t size)
{
    json_t *doc = a->json ? json_loadb(a->body, a->len, 0, NULL) : NULL;
    const json_t *err = json_object_get(doc, "error");
    const char *message = json_string_value(json_object_get(err, "message"));
    const char *field = json_string_value(json_object_get(err, "field"));
    if (message)
        snprintf(out, size, "%s%s%s%s", message, field ? " (field " : "", field ? field : "", field ? ")" : "");
    else
        snprintf(out, size, "%.*s", (int)strcspn(a->body, "\r\n"), a->body);
    json_decref(doc);
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL); /* a SIGINT ends it early: the loop looks at it at once */
}

static int terminal(const char *status)
{
    static const char *const ends[] = {"succeeded", "failed", "cancelled", "interrupted"};
    for (size_t i = 0; status && i < sizeof ends / sizeof ends[0]; i++)
        if (strcmp(status, ends[i]) == 0)
            return 1;
    return 0;
}

/* Prints the job's status line on stderr when it differs from the last one
 * (last: CLIENT_STATUS_LINE bytes, updated). */
#define CLIENT_STATUS_LINE 512
static void report_status(const json_t *job, char *last, const client_submit_options *o)
{
    const char *status = json_string_value(json_object_get(job, "status"));
    const json_t *progress = json_object_get(job, "progress");
    const char *message = json_string_value(json_object_get(progress, "message"));
    const char *device = json_string_value(json_object_get(job, "device"));
    char line[CLIENT_STATUS_LINE];
    snprintf(line, sizeof line, "job %lld %s%s%s%s%s%s", (long long)json_integer_value(json_object_get(job, "id")),
             status ? status : "?", device ? " on " : "", device ? device : "", message ? ": " : "",
             message ? message : "",
             json_string_value(json_object_get(job, "cancel_requested_at")) && !terminal(status) ? " (cancel requested)"
                                                                                   : "");
    if (strcmp(line, last) == 0)
        return;
    snprintf(last, CLIENT_STATUS_LINE, "%s", line);
    if (!o->quiet)
        fprintf(stderr, "lmperfd submit: %s\n", line);
}


/* Posts the spec; *id set on 202. Returns -1 (accepted) or the exit status. */
static int post_spec(const client_target *t, const char *spec, size_t len, const client_submit_options *o,
                     client_answer *accepted, long long *id)
{
    char why[512], what[768];
    client_answer a;
    if (client_request(t, "POST", "/v1/jobs", spec, len, CLIENT_REQUEST_TIMEOUT_S, &a, why, sizeof why)) {
        fprintf(stderr, "lmperfd submit: %s; is lmperfd running there? (--url, LMPERF_URL)\n", why);
        return 1;
    }
    describe_error(&a, what, sizeof what);
    if (a.status == 202) {
        json_t *job = json_loadb(a.body, a.len, 0, NULL);
        *id = json_integer_value(json_object_get(job, "id"));
        json_decref(job);
        if (*id > 0) {
            *accepted = a;
            return -1;
        }
        fprintf(stderr, "lmperfd submit: the daemon accepted the job but its answer has no job id\n");
        client_answer_free(&a);
        return 1;
    }
    int refused = a.status == 400 || a.status == 413 || a.status == 415;
    if (refused) { /* as lmperfd run: the error document on stdout */
        fwrite(a.body, 1, a.len, stdout);
        if (a.len && a.body[a.len - 1] != '\n')
            putchar('\n');
    }
    if (refused)
        fprintf(stderr, "lmperfd submit: %s: %s\n", o->spec_path, what);
    else
        fprintf(stderr, "lmperfd submit: %s: the daemon answered %d: %s\n", o->spec_path, a.status, what);
    if (a.status == 401)
        fprintf(stderr, "lmperfd submit: give the daemon's token with --token or LMPERF_TOKEN\n");
    client_answer_free(&a);
    return refused ? 2 : 1;
}

/* Prints the ended job's table in o->table_format; 0, or 1 when there is none. */
static int print_table(const client_target *t, long long id, const client_submit_options *o)
{
    char path[160], why[512];
    snprintf(path, sizeof path, "/v1/jobs/%lld/table?format=%s%s%.40s", id, o->table_format,
             o->pivot ? "&pivot=" : "", o->pivot ? o->pivot : "");
    client_answer a;
    if (client_request(t, "GET", path, NULL, 0, CLIENT_REQUEST_TIMEOUT_S, &a, why, sizeof why)) {
        fprintf(stderr, "lmperfd submit: job %lld: its table: %s\n", id, why);
        return 1;
    }
    int rc = 0;
    if (a.status == 200) {
        fwrite(a.body, 1, a.len, stdout);
        if (a.len && a.body[a.len - 1] != '\n')
            putchar('\n');
    } else {
        describe_error(&a, why, sizeof why);
        fprintf(stderr, "lmperfd submit: job %lld has no table: %s\n", id, why);
        rc = 1;
    }
    client_answer_free(&a);
    return rc;
}

int client_submit(const client_target *t, const char *spec, size_t len, const client_submit_options *o)
{
    client_answer a = {0};
    long long id = 0;
    int rc = post_spec(t, spec, len, o, &a, &id);
    if (rc >= 0)
        return rc;
    if (!o->wait) {
        fwrite(a.body, 1, a.len, stdout);
        if (a.len && a.body[a.len - 1] != '\n')
            putchar('\n');
        client_answer_free(&a);
        return 0;
    }
    client_answer_free(&a);

    struct sigaction on = {.sa_handler = on_interrupt}, before;
    sigemptyset(&on.sa_mask);
    sigaction(SIGINT, &on, &before); /* no SA_RESTART: a SIGINT ends the wait at once */
    interrupts = 0;
    char last[CLIENT_STATUS_LINE] = "", path[64], why[512];
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    double last_answer = monotonic_ms() / 1e3;
    int cancelled = 0;
    json_t *job = NULL;
    rc = 1;
    for (;;) {
        if (interrupts >= 2) {
            fprintf(stderr, "lmperfd submit: stopped waiting for job %lld (GET %s%s follows it)\n", id, t->prefix,
                    path);
            rc = 130;
            break;
        }
        if (interrupts == 1 && !cancelled) {
            cancelled = 1;
            client_answer c;
            if (client_request(t, "DELETE", path, NULL, 0, CLIENT_REQUEST_TIMEOUT_S, &c, why, sizeof why) == 0) {
                describe_error(&c, why, sizeof why);
                if (c.status == 200 || c.status == 202)
                    fprintf(stderr, "lmperfd submit: cancelling job %lld; waiting for it to stop (Ctrl-C again: stop "
                                    "waiting)\n",
                            id);
                else
                    fprintf(stderr, "lmperfd submit: could not cancel job %lld: %s\n", id, why);
                client_answer_free(&c);
            } else {
                fprintf(stderr, "lmperfd submit: could not cancel job %lld: %s\n", id, why);
            }
            continue; /* a second Ctrl-C meanwhile is acted on first */
        }
        client_answer g;
        sig_atomic_t seen = interrupts;
        if (client_request(t, "GET", path, NULL, 0, CLIENT_REQUEST_TIMEOUT_S, &g, why, sizeof why)) {
            if (monotonic_ms() / 1e3 - last_answer > CLIENT_LOST_AFTER_S) {
                fprintf(stderr, "lmperfd submit: lost the daemon while waiting for job %lld: %s\n", id, why);
                break;
            }
            if (interrupts == seen) /* a Ctrl-C is acted on at once */
                sleep_s(1.0);
            continue;
        }
        last_answer = monotonic_ms() / 1e3;
        if (g.status != 200) {
            describe_error(&g, why, sizeof why);
            fprintf(stderr, "lmperfd submit: job %lld: the daemon answered %d: %s\n", id, g.status, why);
            client_answer_free(&g);
            break;
        }
        json_decref(job);
        job = json_loadb(g.body, g.len, 0, NULL);
        client_answer_free(&g);
        if (!job) {
            fprintf(stderr, "lmperfd submit: job %lld: the daemon's answer is not JSON\n", id);
            break;
        }
        report_status(job, last, o);
        const char *status = json_string_value(json_object_get(job, "status"));
        if (terminal(status)) {
            rc = strcmp(status, "succeeded") == 0 ? 0 : 1;
            if (rc)
                fprintf(stderr, "lmperfd submit: job %lld %s: %s\n", id, status,
                        json_string_value(json_object_get(job, "error"))
                            ? json_string_value(json_object_get(job, "error"))
                            : "(no reason given)");
            if (o->table_format) {
                if (print_table(t, id, o))
                    rc = 1;
            } else {
                json_dumpf(job, stdout, JSON_INDENT(2));
                putchar('\n');
            }
            break;
        }
        sleep_s(o->poll_s);
    }
    json_decref(job);
    sigaction(SIGINT, &before, NULL);
    return rc;
}
