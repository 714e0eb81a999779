/* A minimal HTTP/1.1 client of lmperfd's own API, for `lmperfd submit`:
 * plain HTTP (the daemon serves no TLS), one request per connection
 * (Connection: close), the whole answer read into memory and checked
 * (client_parse_answer) before any of it is used.
 *
 * DESIGN: lmperfd holds the GPUs, so a script on the same machine submits
 * to it rather than running a job in-process beside it (`lmperfd run` would
 * compete for the device). client_submit posts a spec, follows the job to
 * its end and prints its document or table, the way `lmperfd run` does. */
#ifndef DAEMON_CLIENT_H
#define DAEMON_CLIENT_H

#include <stddef.h>

#define CLIENT_MAX_ANSWER_BYTES ((size_t)1 << 30) /* a larger answer (or chunk) is not lmperfd's */

/* Where the daemon is: http://HOST[:PORT][/PREFIX]. */
typedef struct client_target {
    char host[256];   /* a name, an IPv4 address, or an IPv6 one without its brackets */
    char port[8];     /* decimal; "80" when the URL gives none */
    char prefix[256]; /* a path the API is mounted under ("" for /), no trailing '/' */
    const char *token; /* borrowed; NULL: no Authorization header */
} client_target;

/* One answer: status code, body (new, NUL-terminated; client_answer_free). */
typedef struct client_answer {
    int status;
    char *body;
    size_t len;
    int json; /* 1: Content-Type application/json */
} client_answer;

/* Parses url into *t (token left as it was). Returns 0, or -1 with the
 * reason in why. */
int client_parse_url(const char *url, client_target *t, char *why, size_t whylen);

/* METHOD t's prefix + path (path starts with '/'), with body (borrowed, may
 * be NULL; sent as application/json) of len bytes. Waits at most timeout_s
 * for the connection, then at most timeout_s for the whole answer (read until
 * it is complete by its framing, or the daemon closes). Fills *answer (body
 * new). Returns 0 when a well-formed HTTP answer came, whatever its status,
 * or -1 with the reason in why (no connection, a timeout, an answer that
 * client_parse_answer refuses); *answer is then untouched. */
int client_request(const client_target *t, const char *method, const char *path, const char *body, size_t len,
                   double timeout_s, client_answer *answer, char *why, size_t whylen);

/* Parses one HTTP/1.x answer as read from a connection, text[0..len) (no
 * NUL needed; steals text: it becomes answer->body, or is freed on failure).
 * 1xx interim answers before the final one are skipped. The body is framed by
 * Transfer-Encoding: chunked (decoded: each hex chunk size at most
 * CLIENT_MAX_ANSWER_BYTES, CRLF after its line and after its data, a last
 * chunk and the end of the trailers required), else by Content-Length
 * (decimal digits only; bytes past it ignored), else by the end of text; a
 * 204 or 304 has none. Returns 0 with *answer filled (body NUL-terminated), or
 * -1 with the reason in why: no status line, a malformed header line, a
 * Content-Length that is not a number or given twice differently, or larger
 * than the bytes that came, a Transfer-Encoding other than chunked, a
 * malformed or cut-short chunked body. Reads no byte outside text[0..len). */
int client_parse_answer(char *text, size_t len, client_answer *answer, char *why, size_t whylen);

void client_answer_free(client_answer *answer);

/* Options of one `lmperfd submit`. */
typedef struct client_submit_options {
    const char *spec_path;    /* borrowed: for messages ("-": stdin) */
    const char *table_format; /* borrowed: "md", "csv", "json", or NULL: the job's document */
    const char *pivot;        /* borrowed: the table's ?pivot= ("precision"), or NULL */
    int wait;                 /* 0: print the accepted job and return */
    int quiet;                /* 1: no progress lines on stderr */
    double poll_s;            /* between status requests while waiting */
} client_submit_options;

/* Submits spec (borrowed, len bytes of JSON text) to t and, when o->wait,
 * follows the job until it ends, printing its status changes on stderr
 * (unless o->quiet) and then its document, or its table in
 * o->table_format, on stdout. A first SIGINT while waiting cancels the job
 * (DELETE) and goes on waiting for its end; a second stops waiting.
 * Returns the exit status: 0 the job succeeded (or was accepted, without
 * wait); 1 it failed, was cancelled or interrupted, or the daemon could not
 * be reached or answered an error; 2 the daemon refused the spec (400, 413,
 * 415: its error document on stdout, one line on stderr); 130 when a second
 * SIGINT stopped the wait. */
int client_submit(const client_target *t, const char *spec, size_t len, const client_submit_options *o);

#endif
