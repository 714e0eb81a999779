/* libmicrohttpd adapter: route table, body limits, auth, JSON errors, static
 * files, request counters. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "jsonschema.h"

#define MAX_PATH_SEGMENTS 8
#define DEFAULT_LIST_LIMIT 50
#define MAX_LIST_LIMIT 1000
#define HTTP_CONNECTION_MEMORY (256u << 10) /* per connection: request line, headers, query arguments */

/* --- requests and responses ------------------------------------------------------ */

/* The value of hexadecimal digit c, −1 for any other character. */
static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decoding of the path and query arguments in place (libmicrohttpd's
 * unescape callback), as libmicrohttpd's own except that %00 stays as it is:
 * a NUL would end the text early, "/v1/jobs/2%00x" acting on job 2. Returns
 * the new length. */
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    char *w = s;
    for (const char *r = s; *r;) {
        int hi = r[0] == '%' ? hex_digit(r[1]) : -1, lo = hi >= 0 ? hex_digit(r[2]) : -1;
        if (lo >= 0 && (hi | lo)) {
            *w++ = (char)(hi << 4 | lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* Per-request state kept between MHD calls (request body accumulation). */
typedef struct request {
    char *body;
    size_t len, cap;
    int too_large;
} request;

typedef struct response {
    int status;
    char *body;        /* owned */
    const char *content_type;
    const char *allow; /* for 405 */
} response;

struct api_server {
    int listen_fd;           /* bound and listening; MHD's once it serves (-1: closed) */
    int port;                /* the port bound */
    struct MHD_Daemon *mhd;  /* NULL until api_server_serve */
    api_config config;
    api_backend backend;
    char web_root[PATH_MAX];
    int have_web_root;
    pthread_mutex_t stats_lock;
    unsigned long long requests[16][6]; /* route index x status class (1xx..5xx, index 0 unused) */
};

typedef struct route {
    const char *method;
    const char *pattern; /* "{id}" matches one path segment */
    void (*handler)(api_server *server, struct MHD_Connection *conn, const char *id, request *req,
                    response *res);
    int needs_auth;
    const char *name; /* label for /metrics */
    const char *const *args; /* the query arguments the handler reads, NULL-terminated; any other is a 400
                                naming it (a misspelt ?fromat=md would answer as if not given). NULL: the
                                route reads none, and ignores any */
} route;

/* A body jansson could not build or write (value NULL: text that is not
 * UTF-8 reached json_pack) is answered with this, never with an empty body. */
static const char unencodable_body[] =
    "{\n  \"error\": {\n    \"code\": \"internal\",\n    \"message\": \"the response could not be encoded as "
    "JSON\",\n    \"field\": null\n  }\n}";

/* flags: jansson's dump flags beside JSON_INDENT(2) | JSON_ENCODE_ANY. */
static void set_json_flags(response *res, int status, json_t *value /* steals */, size_t flags)
{
    res->status = status;
    res->body = value ? json_dumps(value, JSON_INDENT(2) | JSON_ENCODE_ANY | flags) : NULL;
    res->content_type = "application/json; charset=utf-8";
    json_decref(value);
    if (!res->body) {
        res->status = 500;
        res->body = strdup(unencodable_body);
    }
}

static void set_json(response *res, int status, json_t *value /* steals */)
{
    set_json_flags(res, status, value, 0);
}

static void set_error(response *res, const api_error *err)
{
    json_t *body = json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", api_error_wire_code(err->code),
                             "message", err->message, "field", err->field[0] ? err->field : NULL);
    set_json(res, api_error_http_status(err->code), body);
}

static void fail(response *res, api_error_code code, const char *field, const char *fmt, const char *arg)
{
    api_error err;
    api_fail(&err, code, field, fmt, arg);
    set_error(res, &err);
}

typedef struct arg_count {
    const char *name;
    int n;
} arg_count;

static enum MHD_Result count_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind, (void)value;
    arg_count *c = cls;
    c->n += key && strcmp(key, c->name) == 0;
    return MHD_YES;
}

/* The first query argument not among a route's (route.args), for
 * find_unknown_arg. */
typedef struct unknown_arg {
    const char *const *known;
    int found;
    int exact; /* name is the argument's whole name, as text (find_unknown_arg) */
    char name[64]; /* its name ("": ?=x), cut to fit */
} unknown_arg;

static enum MHD_Result find_unknown_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind, (void)value;
    unknown_arg *u = cls;
    for (const char *const *k = u->known; key && *k; k++)
        if (strcmp(*k, key) == 0)
            return MHD_YES;
    snprintf(u->name, sizeof u->name, "%s", key ? key : "");
    u->found = 1;
    /* named as the field only when it reads back as sent: whole, UTF-8 text, no control characters */
    char repaired[sizeof u->name];
    memcpy(repaired, u->name, sizeof repaired);
    utf8_repair(repaired);
    u->exact = key && strlen(key) < sizeof u->name && strcmp(repaired, u->name) == 0;
    for (const char *c = u->name; u->exact && *c; c++)
        u->exact = (unsigned char)*c >= 0x20 && *c != 0x7f;
    return MHD_NO; /* the first is enough */
}

/* Whether a query argument of r's request is not one of r->args (NULL: any
 * is ignored): then res is set, a 400 naming it and what r takes. */
static int refuses_unknown_arg(const route *r, struct MHD_Connection *conn, response *res)
{
    unknown_arg u = {.known = r->args};
    if (r->args)
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, find_unknown_arg, &u);
    if (!u.found)
        return 0;
    char takes[160];
    api_join_names(r->args, takes, sizeof takes);
    api_error err;
    if (u.name[0])
        api_fail(&err, API_ERR_BAD_REQUEST, u.exact ? u.name : NULL, "unknown query argument '%s%s': %s %s takes %s",
                 u.name, u.exact ? "" : "...", r->method, r->pattern, takes);
    else
        api_fail(&err, API_ERR_BAD_REQUEST, NULL, "a query argument without a name (?=value): %s %s takes %s",
                 r->method, r->pattern, takes);
    set_error(res, &err);
    return 1;
}

/* The value of query argument name in *value (borrowed; NULL when absent).
 * A name given twice (?status=failed&status=queued) is refused: which one
 * was meant is not known. Returns 0, or -1 with res set (400 naming it). */
static int query(struct MHD_Connection *conn, const char *name, const char **value, response *res)
{
    arg_count c = {.name = name};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_arg, &c);
    if (c.n > 1) {
        fail(res, API_ERR_BAD_REQUEST, name, "%s is given more than once; give it once", name);
        return -1;
    }
    *value = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
    return 0;
}

/* Parses a non-negative integer query argument; returns 0 or -1 (res set). */
static int query_int(struct MHD_Connection *conn, const char *name, int64_t fallback, int64_t max,
                     int64_t *out, response *res)
{
    const char *text;
    if (query(conn, name, &text, res))
        return -1;
    if (!text) {
        *out = fallback;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || !isdigit((unsigned char)text[0]) || *end || v < 0 || v > max) { /* digits only: no sign, no space */
        api_error err;
        api_fail(&err, API_ERR_BAD_REQUEST, name, "%s must be an integer from 0 to %lld, not '%.40s'", name,
                 (long long)max, text);
        set_error(res, &err);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_id(const char *text, int64_t *id, response *res)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || !isdigit((unsigned char)text[0]) || *end || v <= 0) { /* digits only: no sign, no space */
        fail(res, API_ERR_NOT_FOUND, "id", "no job with id '%s'", text);
        return -1;
    }
    *id = v;
    return 0;
}

/* --- handlers -------------------------------------------------------------------- */

static void finish_call(response *res, int rc, json_t *value, const api_error *err, int ok_status)
{
    if (rc)
        set_error(res, err);
    else
        set_json(res, ok_status, value);
}

static void handle_health(api_server *server, struct MHD_Connection *conn, const char *id,
                          request *req, response *res)
{
    (void)conn, (void)id, (void)req;
    json_t *out = NULL;
    int ready = 1;
    server->backend.health(server->backend.self, &out, &ready);
    set_json(res, ready ? 200 : 503, out ? out : json_object());
}

static void handle_metrics(api_server *server, struct MHD_Connection *conn, const char *id,
                           request *req, response *res);

static void handle_system(api_server *server, struct MHD_Connection *conn, const char *id,
                          request *req, response *res)
{
    (void)conn, (void)id, (void)req;
    json_t *out = NULL;
    api_error err;
    int rc = server->backend.system(server->backend.self, &out, &err);
    finish_call(res, rc, out, &err, 200);
}

static void handle_models(api_server *server, struct MHD_Connection *conn, const char *id,
                          request *req, response *res)
{
    (void)conn, (void)id, (void)req;
    json_t *out = NULL;
    api_error err;
    int rc = server->backend.models(server->backend.self, &out, &err);
    finish_call(res, rc, out, &err, 200);
}

static int content_type_ok(struct MHD_Connection *conn)
{
    const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!type)
        return 1;
    size_t len = strcspn(type, "; ");
    return len == strlen("application/json") && strncasecmp(type, "application/json", len) == 0;
}

static void handle_submit(api_server *server, struct MHD_Connection *conn, const char *id,
                          request *req, response *res)
{
    (void)id;
    if (!content_type_ok(conn)) {
        fail(res, API_ERR_UNSUPPORTED_MEDIA_TYPE, NULL,
             "job specs are JSON: send Content-Type: application/json (got %s)",
             MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE));
        return;
    }
    api_error err;
    json_t *spec = jsonschema_parse_spec(req->body ? req->body : "", req->len, "request body", &err);
    if (!spec) {
        set_error(res, &err);
        return;
    }
    json_t *job = NULL;
    int rc = server->backend.job_submit(server->backend.self, spec, &job, &err);
    json_decref(spec);
    finish_call(res, rc, job, &err, 202);
}

static void handle_list(api_server *server, struct MHD_Connection *conn, const char *id,
                        request *req, response *res)
{
    (void)id, (void)req;
    api_job_filter filter = {0};
    if (query(conn, "kind", &filter.kind, res) || query(conn, "status", &filter.status, res) ||
        query_int(conn, "limit", DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, &filter.limit, res) ||
        query_int(conn, "offset", 0, INT64_MAX / 2, &filter.offset, res))
        return;
    json_t *out = NULL;
    api_error err;
    int rc = server->backend.job_list(server->backend.self, &filter, &out, &err);
    finish_call(res, rc, out, &err, 200);
}

static void handle_get(api_server *server, struct MHD_Connection *conn, const char *id,
                       request *req, response *res)
{
    (void)conn, (void)req;
    int64_t job_id;
    if (parse_id(id, &job_id, res))
        return;
    json_t *out = NULL;
    api_error err;
    int rc = server->backend.job_get(server->backend.self, job_id, &out, &err);
    finish_call(res, rc, out, &err, 200);
}

static void handle_cancel(api_server *server, struct MHD_Connection *conn, const char *id,
                          request *req, response *res)
{
    (void)conn, (void)req;
    int64_t job_id;
    if (parse_id(id, &job_id, res))
        return;
    json_t *out = NULL;
    api_error err;
    int accepted = 0;
    int rc = server->backend.job_cancel(server->backend.self, job_id, &out, &accepted, &err);
    finish_call(res, rc, out, &err, accepted ? 202 : 200);
}


/* The ?format= of a table endpoint: md, csv or json (the default). Returns 0
 * with *format set (static or borrowed), or -1 with res set (400 naming it). */
static int table_format(struct MHD_Connection *conn, const char **format, response *res)
{
    if (query(conn, "format", format, res))
        return -1;
    if (!*format)
        *format = "json";
    if (!api_table_format_known(*format)) {
        fail(res, API_ERR_BAD_REQUEST, "format", "format must be md, csv or json, not '%s'", *format);
        return -1;
    }
    return 0;
}

/* Answers with table (stolen; {"columns","rows"[,"decimals"]}) in format
 * (table_format's). */
static void send_table(response *res, const char *format, json_t *table)
{
    char *text = api_table_render(table, format);
    json_decref(table);
    if (!text) {
        fail(res, API_ERR_INTERNAL, NULL, "%s", "out of memory formatting the table");
        return;
    }
    res->status = 200;
    res->body = text;
    res->content_type = strcmp(format, "md") == 0    ? "text/markdown; charset=utf-8"
                        : strcmp(format, "csv") == 0 ? "text/csv; charset=utf-8"
                                                     : "application/json; charset=utf-8";
}

/* A table's selectors: ?experiment=NAME, ?range=NAME, ?run=N, ?pivot=NAME
 * (-1, NULL: absent). Returns 0, or -1 with res set (400 naming the
 * argument). */
static int table_selectors(struct MHD_Connection *conn, api_table_query *selectors, response *res)
{
    *selectors = (api_table_query){.run = -1};
    return query(conn, "experiment", &selectors->experiment, res) || query(conn, "range", &selectors->range, res) ||
                   query_int(conn, "run", -1, INT32_MAX, &selectors->run, res) ||
                   query(conn, "pivot", &selectors->pivot, res)
               ? -1
               : 0;
}

static void handle_table(api_server *server, struct MHD_Connection *conn, const char *id,
                         request *req, response *res)
{
    (void)req;
    int64_t job_id;
    const char *format;
    api_table_query selectors;
    if (parse_id(id, &job_id, res) || table_format(conn, &format, res) || table_selectors(conn, &selectors, res))
        return;
    json_t *table = NULL;
    api_error err;
    if (server->backend.job_table(server->backend.self, job_id, &selectors, &table, &err)) {
        set_error(res, &err);
        return;
    }
    send_table(res, format, table);
}

/* A job id in text[0..len): digits only (no sign, no space), at least 1.
 * Returns 0 with *id set, or -1. */
static int job_id_of(const char *text, size_t len, int64_t *id)
{
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)text[i]) || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (text[i] - '0');
    }
    if (len == 0 || v == 0)
        return -1;
    *id = v;
    return 0;
}

/* ?jobs=2,5,9: 2 to API_COMPARE_MAX_JOBS distinct job ids, comma-separated,
 * into job_ids (API_COMPARE_MAX_JOBS long). Returns 0 with *count set, or -1
 * with res set (400 naming "jobs"). */
static int parse_job_list(const char *text, int64_t *job_ids, size_t *count, response *res)
{
    api_error err;
    if (!text || !text[0]) {
        fail(res, API_ERR_BAD_REQUEST, "jobs", "%s",
             "jobs is required: the ids of the jobs to compare, comma-separated (jobs=2,5)");
        return -1;
    }
    size_t n = 0;
    for (const char *item = text;; n++) {
        size_t len = strcspn(item, ",");
        if (n == API_COMPARE_MAX_JOBS) {
            api_fail(&err, API_ERR_BAD_REQUEST, "jobs", "jobs takes at most %d job ids", API_COMPARE_MAX_JOBS);
            set_error(res, &err);
            return -1;
        }
        if (job_id_of(item, len, &job_ids[n])) {
            api_fail(&err, API_ERR_BAD_REQUEST, "jobs",
                     "jobs must be job ids separated by commas (jobs=2,5): '%.*s' is not a job id",
                     (int)(len > 40 ? 40 : len), item);
            set_error(res, &err);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if (job_ids[i] == job_ids[n]) {
                api_fail(&err, API_ERR_BAD_REQUEST, "jobs", "job %lld is listed twice in jobs",
                         (long long)job_ids[n]);
                set_error(res, &err);
                return -1;
            }
        }
        if (!item[len])
            break;
        item += len + 1;
    }
    if (++n < 2) {
        fail(res, API_ERR_BAD_REQUEST, "jobs", "%s", "jobs takes at least 2 job ids to compare (jobs=2,5)");
        return -1;
    }
    *count = n;
    return 0;
}

/* GET /v1/compare?jobs=2,5,9[&baseline=5][&format=md|csv|json]
 * [&experiment=NAME][&run=N][&range=NAME] (each job's table narrowed as
 * GET /v1/jobs/{id}/table narrows it). */
static void handle_compare(api_server *server, struct MHD_Connection *conn, const char *id, request *req,
                           response *res)
{
    (void)id, (void)req;
    const char *jobs, *baseline, *format;
    int64_t job_ids[API_COMPARE_MAX_JOBS], baseline_id = 0;
    size_t count = 0;
    api_table_query selectors;
    if (query(conn, "jobs", &jobs, res) || query(conn, "baseline", &baseline, res) ||
        table_format(conn, &format, res) || table_selectors(conn, &selectors, res) ||
        parse_job_list(jobs, job_ids, &count, res))
        return;
    if (baseline && job_id_of(baseline, strlen(baseline), &baseline_id)) {
        fail(res, API_ERR_BAD_REQUEST, "baseline", "baseline must be the id of one of the jobs compared, not '%s'",
             baseline);
        return;
    }
    json_t *table = NULL;
    api_error err;
    if (server->backend.jobs_compare(server->backend.self, job_ids, count, baseline_id, &selectors, &table, &err)) {
        set_error(res, &err);
        return;
    }
    send_table(res, format, table);
}

/* One run's document (memory events, profile trace): GET ...?run=N. */
typedef int (*run_document_fn)(void *self, int64_t id, int run_index, json_t **out, api_error *err);

static void send_run_document(api_server *server, struct MHD_Connection *conn, const char *id, response *res,
                              run_document_fn fn)
{
    int64_t job_id, run_index;
    if (parse_id(id, &job_id, res) || query_int(conn, "run", 0, INT32_MAX, &run_index, res))
        return;
    json_t *out = NULL;
    api_error err;
    int rc = fn(server->backend.self, job_id, (int)run_index, &out, &err);
    if (rc) {
        set_error(res, &err);
        return;
    }
    /* compact: event lists are long */
    res->status = 200;
    res->body = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(API_REAL_DIGITS));
    res->content_type = "application/json; charset=utf-8";
    json_decref(out);
}

static void handle_events(api_server *server, struct MHD_Connection *conn, const char *id,
                          request *req, response *res)
{
    (void)req;
    send_run_document(server, conn, id, res, server->backend.job_events);
}

static void handle_trace(api_server *server, struct MHD_Connection *conn, const char *id,
                         request *req, response *res)
{
    (void)req;
    send_run_document(server, conn, id, res, server->backend.job_trace);
}

static void handle_schema(api_server *server, struct MHD_Connection *conn, const char *kind,
                          request *req, response *res)
{
    (void)conn, (void)req;
    json_t *out = NULL;
    api_error err;
    int rc = server->backend.schema(server->backend.self, kind, &out, &err);
    finish_call(res, rc, out, &err, 200);
}

/* The query arguments of the routes that read some (route.args). */
static const char *const list_args[] = {"kind", "status", "limit", "offset", NULL};
static const char *const table_args[] = {"format", "experiment", "run", "range", "pivot", NULL};
static const char *const run_args[] = {"run", NULL};
static const char *const compare_args[] = {"jobs", "baseline", "format", "experiment", "run", "range", "pivot", NULL};

static const route routes[] = {
    {"GET", "/healthz", handle_health, 0, "healthz", NULL},
    {"GET", "/metrics", handle_metrics, 0, "metrics", NULL},
    {"GET", "/v1/system", handle_system, 0, "system", NULL},
    {"GET", "/v1/models", handle_models, 0, "models", NULL},
    {"GET", "/v1/schemas/{id}", handle_schema, 0, "schema", NULL},
    {"POST", "/v1/jobs", handle_submit, 1, "jobs_submit", NULL},
    {"GET", "/v1/jobs", handle_list, 0, "jobs_list", list_args},
    {"GET", "/v1/jobs/{id}", handle_get, 0, "job_get", NULL},
    {"DELETE", "/v1/jobs/{id}", handle_cancel, 1, "job_cancel", NULL},
    {"GET", "/v1/jobs/{id}/table", handle_table, 0, "job_table", table_args},
    {"GET", "/v1/jobs/{id}/events", handle_events, 0, "job_events", run_args},
    {"GET", "/v1/jobs/{id}/trace", handle_trace, 0, "job_trace", run_args}, /* profile jobs */
    {"GET", "/v1/compare", handle_compare, 0, "compare", compare_args},
};
#define ROUTE_COUNT (sizeof routes / sizeof routes[0])
#define ROUTE_STATIC ROUTE_COUNT         /* counters index for static files */
#define ROUTE_UNMATCHED (ROUTE_COUNT + 1) /* and for everything else */
_Static_assert(ROUTE_UNMATCHED < sizeof ((api_server *)0)->requests / sizeof ((api_server *)0)->requests[0],
               "api_server.requests has a row per route, static files and unmatched");

static void handle_metrics(api_server *server, struct MHD_Connection *conn, const char *id,
                           request *req, response *res)
{
    (void)conn, (void)id, (void)req;
    char *daemon_part = server->backend.metrics(server->backend.self);
    size_t cap = 8192 + (daemon_part ? strlen(daemon_part) : 0);
    char *text = malloc(cap);
    if (!text) {
        free(daemon_part);
        fail(res, API_ERR_INTERNAL, NULL, "%s", "out of memory");
        return;
    }
    size_t off = (size_t)snprintf(text, cap, "%s", daemon_part ? daemon_part : "");
    free(daemon_part);
    off += (size_t)snprintf(text + off, cap - off,
                            "# HELP lmperf_http_requests_total HTTP requests by route and status class.\n"
                            "# TYPE lmperf_http_requests_total counter\n");
    pthread_mutex_lock(&server->stats_lock);
    for (size_t r = 0; r <= ROUTE_UNMATCHED; r++) {
        const char *name = r < ROUTE_COUNT ? routes[r].name : r == ROUTE_STATIC ? "static" : "unmatched";
        for (int c = 1; c <= 5; c++)
            if (server->requests[r][c] && off < cap)
                off += (size_t)snprintf(text + off, cap - off,
                                        "lmperf_http_requests_total{route=\"%s\",code=\"%dxx\"} %llu\n", name,
                                        c, server->requests[r][c]);
    }
    pthread_mutex_unlock(&server->stats_lock);
    res->status = 200;
    res->body = text;
    res->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

/* --- static files ---------------------------------------------------------------- */

static const char *mime_type(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
        {".json", "application/json"}, {".svg", "image/svg+xml"}, {".png", "image/png"},
        {".ico", "image/x-icon"}, {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

/* Queues a file under the web root, or returns MHD_NO-equivalent 0 when not
 * found (the caller sends a 404). */
static int serve_static(api_server *server, struct MHD_Connection *conn, const char *url,
                        enum MHD_Result *result)
{
    if (!server->have_web_root || strstr(url, "..") || url[0] != '/')
        return 0;
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s%s%s", server->web_root, url,
                     url[strlen(url) - 1] == '/' ? "index.html" : "");
    if (n <= 0 || (size_t)n >= sizeof path)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!r) {
        close(fd);
        return 0;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, mime_type(path));
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    *result = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return 1;
}

/* --- dispatch -------------------------------------------------------------------- */

/* Matches url against pattern; copies the {id} segment into id. */
static int match(const char *pattern, const char *url, char *id, size_t id_len)
{
    while (*pattern && *url) {
        if (strncmp(pattern, "{id}", 4) == 0) {
            size_t seg = strcspn(url, "/");
            if (seg == 0 || seg >= id_len)
                return 0;
            memcpy(id, url, seg);
            id[seg] = '\0';
            url += seg;
            pattern += 4;
            continue;
        }
        if (*pattern != *url)
            return 0;
        pattern++;
        url++;
    }
    /* a trailing slash is tolerated */
    return *pattern == '\0' && (*url == '\0' || (url[0] == '/' && url[1] == '\0'));
}

static void count_request(api_server *server, size_t route_index, int status)
{
    int c = status / 100;
    if (c < 1 || c > 5)
        c = 5;
    pthread_mutex_lock(&server->stats_lock);
    server->requests[route_index][c]++;
    pthread_mutex_unlock(&server->stats_lock);
}

static enum MHD_Result send_response(struct MHD_Connection *conn, response *res)
{
    const char *type = res->content_type ? res->content_type : "application/json; charset=utf-8";
    size_t len = res->body ? strlen(res->body) : 0;
    /* a JSON document ends with a newline, as curl users expect (the shell's prompt on its own line) */
    int newline = strncmp(type, "application/json", strlen("application/json")) == 0 && len &&
                  res->body[len - 1] != '\n';
    /* the body itself goes to libmicrohttpd, grown by the newline: no copy of a large document */
    char *text = newline ? realloc(res->body, len + 2) : res->body ? res->body : strdup("");
    struct MHD_Response *r = NULL;
    if (text) {
        res->body = NULL; /* text owns it now */
        if (newline)
            memcpy(text + len, "\n", 2);
        r = MHD_create_response_from_buffer(len + (size_t)newline, text, MHD_RESPMEM_MUST_FREE);
        if (!r)
            free(text);
    }
    free(res->body); /* only when growing it failed */
    res->body = NULL;
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (res->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, res->allow);
    if (res->status == 401)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"lmperf\"");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)res->status, r);
    MHD_destroy_response(r);
    return rc;
}

static int token_ok(api_server *server, struct MHD_Connection *conn)
{
    if (!server->config.token || !server->config.token[0])
        return 1;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) /* the scheme is case-insensitive (RFC 7235) */
        return 0;
    const char *given = auth + 7, *want = server->config.token;
    size_t lg = strlen(given), lw = strlen(want);
    unsigned diff = (unsigned)(lg ^ lw);
    for (size_t i = 0; i < lw; i++) /* constant time in the token's length */
        diff |= (unsigned)(want[i] ^ (i < lg ? given[i] : 0));
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    api_server *server = cls;
    request *req = *con_cls;
    response res = {0};

    /* find the route first: unknown routes and wrong methods need no body.
     * HEAD is GET without the body (libmicrohttpd leaves the body out). */
    const char *route_method = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0 ? MHD_HTTP_METHOD_GET : method;
    size_t route_index = ROUTE_UNMATCHED;
    char id[64] = "";
    char allow[64] = "";
    int path_known = 0;
    for (size_t i = 0; i < ROUTE_COUNT; i++) {
        char seg[64];
        if (!match(routes[i].pattern, url, seg, sizeof seg))
            continue;
        path_known = 1;
        size_t len = strlen(allow);
        if (!strstr(allow, routes[i].method))
            snprintf(allow + len, sizeof allow - len, "%s%s", len ? ", " : "", routes[i].method);
        if (strcmp(routes[i].method, route_method) == 0) {
            route_index = i;
            memcpy(id, seg, sizeof id);
        }
    }

    if (!req) {
        req = calloc(1, sizeof *req);
        if (!req)
            return MHD_NO;
        *con_cls = req;
        /* refuse a declared oversized body before reading it */
        const char *length = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length && strtoull(length, NULL, 10) > server->config.max_body_bytes) {
            char limit[32];
            snprintf(limit, sizeof limit, "%zu", server->config.max_body_bytes);
            fail(&res, API_ERR_PAYLOAD_TOO_LARGE, NULL, "request body is larger than %s bytes", limit);
            req->too_large = 2; /* answered */
            count_request(server, route_index, res.status);
            return send_response(conn, &res);
        }
        return MHD_YES;
    }
    if (req->too_large == 2) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (req->len + *upload_data_size > server->config.max_body_bytes) {
            req->too_large = 1;
        } else {
            if (req->len + *upload_data_size + 1 > req->cap) {
                size_t cap = (req->len + *upload_data_size + 1) * 2;
                if (cap > server->config.max_body_bytes + 1)
                    cap = server->config.max_body_bytes + 1;
                char *grown = realloc(req->body, cap);
                if (!grown)
                    return MHD_NO;
                req->body = grown;
                req->cap = cap;
            }
            memcpy(req->body + req->len, upload_data, *upload_data_size);
            req->len += *upload_data_size;
            req->body[req->len] = '\0';
        }
        *upload_data_size = 0;
        return MHD_YES;
    }

    /* the whole request is here */
    if (req->too_large) {
        char limit[32];
        snprintf(limit, sizeof limit, "%zu", server->config.max_body_bytes);
        fail(&res, API_ERR_PAYLOAD_TOO_LARGE, NULL, "request body is larger than %s bytes", limit);
    } else if (route_index != ROUTE_UNMATCHED) {
        if (routes[route_index].needs_auth && !token_ok(server, conn))
            fail(&res, API_ERR_UNAUTHORIZED, NULL, "%s",
                 "this endpoint needs 'Authorization: Bearer <token>' (the daemon's --token)");
        else if (!refuses_unknown_arg(&routes[route_index], conn, &res))
            routes[route_index].handler(server, conn, id, req, &res);
    } else if (path_known) {
        res.allow = allow;
        api_error err;
        api_fail(&err, API_ERR_METHOD_NOT_ALLOWED, NULL, "%s is not allowed on %s (allowed: %s)", method,
                 url, allow);
        set_error(&res, &err);
    } else if (strcmp(route_method, "GET") == 0 && strncmp(url, "/v1/", 4) != 0) {
        enum MHD_Result result;
        if (serve_static(server, conn, url, &result)) {
            count_request(server, ROUTE_STATIC, 200);
            return result;
        }
        fail(&res, API_ERR_NOT_FOUND, NULL, "no such page: %s", url);
    } else {
        fail(&res, API_ERR_NOT_FOUND, NULL, "no such endpoint: %s", url);
    }
    count_request(server, route_index, res.status);
    return send_response(conn, &res);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)conn, (void)code;
    request *req = *con_cls;
    if (req) {
        free(req->body);
        free(req);
        *con_cls = NULL;
    }
}

int api_server_listen(const api_config *config, api_server **out, char *errbuf, size_t errlen)
{
    api_server *server = calloc(1, sizeof *server);
    if (!server) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    server->config = *config;
    server->listen_fd = -1;
    pthread_mutex_init(&server->stats_lock, NULL);
    if (config->web_root && realpath(config->web_root, server->web_root))
        server->have_web_root = 1;

    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)config->port)};
    socklen_t addr_len = sizeof addr;
    int one = 1;
    if (inet_pton(AF_INET, config->host, &addr.sin_addr) != 1) {
        snprintf(errbuf, errlen, "listen address must be an IPv4 address, not '%s'", config->host);
        goto fail;
    }
    server->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server->listen_fd < 0 ||
        setsockopt(server->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(server->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(server->listen_fd, SOMAXCONN) != 0 ||
        getsockname(server->listen_fd, (struct sockaddr *)&addr, &addr_len) != 0) {
        int why = errno;
        snprintf(errbuf, errlen, "cannot listen on %s:%d: %s%s", config->host, config->port, strerror(why),
                 why == EADDRINUSE ? " (another process, perhaps another lmperfd, holds it: start this one with "
                                     "--port N or LMPERF_PORT=N, 0 for a free port)"
                                   : "");
        goto fail;
    }
    server->port = ntohs(addr.sin_port);
    *out = server;
    return 0;
fail:
    if (server->listen_fd >= 0)
        close(server->listen_fd);
    pthread_mutex_destroy(&server->stats_lock);
    free(server);
    return -1;
}

int api_server_serve(api_server *server, const api_backend *backend, char *errbuf, size_t errlen)
{
    const api_config *config = &server->config;
    server->backend = *backend;
    server->mhd = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC, (uint16_t)server->port, NULL, NULL,
        on_request, server, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)server->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(config->threads ? config->threads : 4),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(config->timeout_s ? config->timeout_s : 30),
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)256, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, server,
        MHD_OPTION_END);
    if (!server->mhd) {
        snprintf(errbuf, errlen, "cannot serve on %s:%d: %s", config->host, server->port,
                 errno ? strerror(errno) : "libmicrohttpd failed to start");
        return -1;
    }
    server->listen_fd = -1; /* MHD's now: MHD_stop_daemon closes it */
    return 0;
}

int api_server_port(const api_server *server)
{
    return server->port;
}

void api_server_stop(api_server *server)
{
    if (!server)
        return;
    if (server->mhd)
        MHD_stop_daemon(server->mhd);
    if (server->listen_fd >= 0)
        close(server->listen_fd);
    pthread_mutex_destroy(&server->stats_lock);
    free(server);
}
