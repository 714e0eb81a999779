/* `lmperfd submit`: a job posted to a running lmperfd and followed to its
 * end (client.h). */
#include "client.h"

#include <ctype.h>
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

#define CLIENT_REQUEST_TIMEOUT_S 60.0             /* the connection, then the whole answer */
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

/* --- reading and parsing an answer ------------------------------------------------ */

#define CLIENT_MAX_CHUNK_LINE 4096 /* a chunk-size line (size, extensions, CRLF) longer than this is malformed */
#define CLIENT_MAX_INTERIM 8       /* 1xx interim answers skipped before the final one */
#define CLIENT_MAX_HEAD_BYTES 65536 /* an answer's head (status line and headers) longer than this is malformed */

/* The framing of an answer, read from its head (the final one: 1xx interim
 * heads before it are skipped). */
typedef struct answer_frame {
    int status;
    size_t body_off;  /* bytes before the body: every head, its blank line included */
    int chunked;      /* Transfer-Encoding: chunked (it overrides a Content-Length) */
    int has_length;   /* a valid Content-Length came */
    size_t length;    /* bytes, when has_length */
    int json;         /* Content-Type application/json */
} answer_frame;

/* Where a read answer stands while it comes (read_all) and once it has
 * (client_parse_answer). */
typedef struct answer_reader {
    int head_done;        /* frame is valid */
    answer_frame frame;
    size_t chunks_seen;   /* body bytes of complete, well-formed chunks (chunked_scan's cursor) */
} answer_reader;

/* 1 when [p, p + n) is word (a header's name or a token value), case-insensitively. */
static int same_token(const char *p, size_t n, const char *name)
{
    return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

/* Parses the head at text[0..len) (no NUL needed), each line up to its CRLF.
 * Returns 1 with *f filled once the final head is complete, 0 while it is not
 * (more bytes may complete it), -1 with the reason in why when it is
 * malformed: a head past CLIENT_MAX_HEAD_BYTES, not an HTTP/1.x status line, a header line without a name and
 * ':' or with a stray CR, LF or NUL, a Content-Length that is not a plain
 * decimal number (none, a sign, other characters, past CLIENT_MAX_ANSWER_BYTES)
 * or given twice with different values, a Transfer-Encoding other than
 * chunked, a 101 or too many 1xx answers. */
static int parse_head(const char *text, size_t len, answer_frame *f, char *why, size_t whylen)
{
    size_t at = 0;
    for (int interim = 0;; interim++) {
        const char *head = text + at;
        size_t avail = len - at;
        const char *blank = memmem(head, avail < CLIENT_MAX_HEAD_BYTES ? avail : CLIENT_MAX_HEAD_BYTES, "\r\n\r\n", 4);
        if (!blank && avail >= CLIENT_MAX_HEAD_BYTES) {
            snprintf(why, whylen, "a head longer than %d bytes", CLIENT_MAX_HEAD_BYTES);
            return -1;
        }
        if (!blank)
            return 0;
        const char *head_end = blank + 2; /* after the last header line's CRLF */
        /* the status line: HTTP/1.D SSS[ reason] */
        const char *line_end = memmem(head, (size_t)(head_end - head), "\r\n", 2);
        size_t line_len = (size_t)(line_end - head);
        if (line_len < 12 || memcmp(head, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)head[7]) || head[8] != ' ' ||
            !isdigit((unsigned char)head[9]) || !isdigit((unsigned char)head[10]) ||
            !isdigit((unsigned char)head[11]) || (line_len > 12 && head[12] != ' ') ||
            memchr(head, '\0', line_len) || memchr(head, '\n', line_len)) {
            snprintf(why, whylen, "not an HTTP/1.x status line: '%.*s'", (int)(line_len < 60 ? line_len : 60), head);
            return -1;
        }
        answer_frame out = {.status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0')};
        if (out.status < 100 || out.status > 599) {
            snprintf(why, whylen, "status %d is not an HTTP status", out.status);
            return -1;
        }
        for (const char *line = line_end + 2; line < head_end; line = line_end + 2) {
            line_end = memmem(line, (size_t)(head_end - line), "\r\n", 2);
            size_t n = (size_t)(line_end - line);
            const char *colon = memchr(line, ':', n);
            if (!colon || colon == line || memchr(line, ' ', (size_t)(colon - line)) ||
                memchr(line, '\t', (size_t)(colon - line)) || memchr(line, '\0', n) || memchr(line, '\r', n) ||
                memchr(line, '\n', n)) {
                snprintf(why, whylen, "a malformed header line: '%.*s'", (int)(n < 60 ? n : 60), line);
                return -1;
            }
            const char *value = colon + 1, *value_end = line_end;
            while (value < value_end && (*value == ' ' || *value == '\t'))
                value++;
            while (value_end > value && (value_end[-1] == ' ' || value_end[-1] == '\t'))
                value_end--;
            size_t name_len = (size_t)(colon - line), value_len = (size_t)(value_end - value);
            if (same_token(line, name_len, "Content-Length")) {
                size_t length = 0, digits = 0;
                while (digits < value_len && isdigit((unsigned char)value[digits]) && length <= CLIENT_MAX_ANSWER_BYTES)
                    length = length * 10 + (size_t)(value[digits++] - '0');
                if (digits == 0 || digits != value_len || length > CLIENT_MAX_ANSWER_BYTES) {
                    snprintf(why, whylen, "Content-Length '%.*s' is not a number of bytes (0 to %zu)",
                             (int)(value_len < 40 ? value_len : 40), value, CLIENT_MAX_ANSWER_BYTES);
                    return -1;
                }
                if (out.has_length && out.length != length) {
                    snprintf(why, whylen, "two different Content-Lengths (%zu and %zu)", out.length, length);
                    return -1;
                }
                out.has_length = 1;
                out.length = length;
            } else if (same_token(line, name_len, "Transfer-Encoding")) {
                if (!same_token(value, value_len, "chunked")) {
                    snprintf(why, whylen, "Transfer-Encoding '%.*s' is not supported (only chunked)",
                             (int)(value_len < 40 ? value_len : 40), value);
                    return -1;
                }
                out.chunked = 1;
            } else if (same_token(line, name_len, "Content-Type")) {
                out.json = value_len >= 16 && strncasecmp(value, "application/json", 16) == 0 &&
                           (value_len == 16 || value[16] == ';' || value[16] == ' ');
            }
        }
        at = (size_t)(blank + 4 - text);
        if (out.status >= 200) {
            out.body_off = at;
            *f = out;
            return 1;
        }
        if (out.status == 101) {
            snprintf(why, whylen, "a 101 Switching Protocols answer");
            return -1;
        }
        if (interim + 1 >= CLIENT_MAX_INTERIM) {
            snprintf(why, whylen, "%d 1xx answers in a row", CLIENT_MAX_INTERIM);
            return -1;
        }
    }
}

/* The chunk size in hex at p[0..end): *size (at most CLIENT_MAX_ANSWER_BYTES).
 * Returns the number of hex digits (0: none), or -1 when the size passes
 * the limit. */
static long chunk_size(const char *p, const char *end, size_t *size)
{
    size_t value = 0;
    long digits = 0;
    for (; p + digits < end && isxdigit((unsigned char)p[digits]); digits++) {
        int c = tolower((unsigned char)p[digits]);
        value = value * 16 + (size_t)(isdigit(c) ? c - '0' : c - 'a' + 10);
        if (value > CLIENT_MAX_ANSWER_BYTES)
            return -1;
    }
    *size = value;
    return digits;
}

/* chunked_scan's -1 for a chunk of size data bytes at byte at of the body
 * whose data is not followed by CRLF. */
static int no_crlf_after(size_t size, size_t at, char *why, size_t whylen)
{
    snprintf(why, whylen, "no CRLF after the chunk of %zu data bytes at byte %zu of the body", size, at);
    return -1;
}

/* Walks the chunked body at body[0..len) from *cursor, the start of a chunk
 * (0 at first), advancing it past every complete chunk. Each chunk is a size in hex (at most CLIENT_MAX_ANSWER_BYTES),
 * optional extensions (';' ..., the whole line at most CLIENT_MAX_CHUNK_LINE
 * bytes), CRLF, the data, CRLF; the last chunk has size 0, then trailer lines
 * and an empty line. Returns 1 once the last chunk and the trailers are
 * complete (*cursor: the bytes of the whole chunked body), 0 while more bytes
 * are needed, -1 with the reason in why when malformed (whatever bytes may
 * follow). Reads no byte outside body[0..len). */
static int chunked_scan(const char *body, size_t len, size_t *cursor, char *why, size_t whylen)
{
    const char *end = body + len;
    for (;;) {
        const char *p = body + *cursor;
        size_t size = 0, room = (size_t)(end - p) < CLIENT_MAX_CHUNK_LINE ? (size_t)(end - p) : CLIENT_MAX_CHUNK_LINE;
        long digits = chunk_size(p, end, &size);
        const char *q = p + (digits > 0 ? digits : 0);
        while (digits > 0 && q < end && (*q == ' ' || *q == '\t')) /* BWS before an extension */
            q++;
        const char *crlf = memmem(p, room, "\r\n", 2);
        if (digits < 0) {
            snprintf(why, whylen, "a chunk size at byte %zu of the body past the %zu MiB limit ('%.*s')", *cursor,
                     CLIENT_MAX_ANSWER_BYTES >> 20, (int)(room < 24 ? room : 24), p);
            return -1;
        }
        if (p == end || (digits > 0 && q == end))
            return 0; /* the size line is still coming */
        if (digits == 0 || (*q != ';' && *q != '\r') || (*q == '\r' && q + 1 < end && q[1] != '\n') ||
            (!crlf && room == CLIENT_MAX_CHUNK_LINE) ||
            (crlf && (memchr(p, '\n', (size_t)(crlf - p)) || memchr(p, '\r', (size_t)(crlf - p)) ||
                      memchr(p, '\0', (size_t)(crlf - p))))) {
            size_t show = (size_t)((crlf ? crlf : p + room) - p);
            snprintf(why, whylen, "a malformed chunk-size line at byte %zu of the body: '%.*s'", *cursor,
                     (int)(show < 24 ? show : 24), p);
            return -1;
        }
        if (!crlf)
            return 0; /* its extensions or CRLF are still coming */
        const char *data = crlf + 2;
        if (size == 0) { /* trailer lines, then an empty one */
            for (const char *line = data;;) {
                const char *line_end = memmem(line, (size_t)(end - line), "\r\n", 2);
                if (!line_end)
                    return 0;
                if (line_end == line) {
                    *cursor = (size_t)(line_end + 2 - body);
                    return 1;
                }
                line = line_end + 2;
            }
        }
        if ((size_t)(end - data) < size + 2) {
            if ((size_t)(end - data) > size && data[size] != '\r')
                return no_crlf_after(size, *cursor, why, whylen);
            return 0; /* the data, or its CRLF, is still coming */
        }
        if (data[size] != '\r' || data[size + 1] != '\n')
            return no_crlf_after(size, *cursor, why, whylen);
        *cursor = (size_t)(data + size + 2 - body);
    }
}

/* Decodes the chunked body at body[0..len), already found whole and
 * well-formed by chunked_scan, in place: its data at body[0..return). */
static size_t chunked_decode(char *body, size_t len)
{
    const char *in = body, *end = body + len;
    char *out = body;
    for (;;) {
        size_t size = 0;
        chunk_size(in, end, &size);
        const char *data = (const char *)memmem(in, (size_t)(end - in), "\r\n", 2) + 2;
        if (size == 0)
            return (size_t)(out - body);
        memmove(out, data, size);
        out += size;
        in = data + size + 2;
    }
}

/* Advances r over text[0..len), the answer read so far. Returns 1 when the
 * answer is complete (its head, and its body as Content-Length or the chunks
 * frame it), 0 while it is not (an answer framed by neither ends when the
 * connection closes), -1 with the reason in why when it is malformed. */
static int answer_advance(answer_reader *r, const char *text, size_t len, char *why, size_t whylen)
{
    if (!r->head_done) {
        int got = parse_head(text, len, &r->frame, why, whylen);
        if (got <= 0)
            return got;
        r->head_done = 1;
    }
    const answer_frame *f = &r->frame;
    size_t avail = len - f->body_off;
    if (f->status == 204 || f->status == 304)
        return 1;
    if (f->chunked)
        return chunked_scan(text + f->body_off, avail, &r->chunks_seen, why, whylen);
    return f->has_length && avail >= f->length;
}

int client_parse_answer(char *text, size_t len, client_answer *answer, char *why, size_t whylen)
{
    answer_reader r = {0};
    int got = answer_advance(&r, text, len, why, whylen);
    if (got < 0)
        goto fail;
    if (!r.head_done) {
        snprintf(why, whylen, "%s", len ? "the answer ends inside its head (no blank line after the headers)"
                                        : "an empty answer (the connection closed without one)");
        goto fail;
    }
    const answer_frame *f = &r.frame;
    size_t avail = len - f->body_off, body_len = avail;
    if (f->status == 204 || f->status == 304) {
        body_len = 0;
    } else if (f->chunked) {
        if (got == 0) {
            snprintf(why, whylen, "a chunked answer cut short after %zu bytes of its body (before the end of its last chunk)", avail);
            goto fail;
        }
        body_len = chunked_decode(text + f->body_off, r.chunks_seen);
    } else if (f->has_length) {
        if (avail < f->length) {
            snprintf(why, whylen, "an answer cut short: Content-Length %zu, %zu bytes came", f->length, avail);
            goto fail;
        }
        body_len = f->length; /* bytes past it are not this answer's */
    }
    memmove(text, text + f->body_off, body_len);
    text[body_len] = '\0'; /* body_len < len: the head is at least its status line and blank line */
    *answer = (client_answer){.status = f->status, .body = text, .len = body_len, .json = f->json};
    return 0;
fail:
    free(text);
    return -1;
}

/* What fd sends until the answer is complete (answer_advance) or malformed,
 * or until it closes, in *out (new, len bytes and a NUL after them), within
 * timeout_s for the whole answer. A SIGINT since seen ends it
 * ("interrupted"). Returns 0, or -1 with the reason in why. */
static int read_all(int fd, double timeout_s, char **out, size_t *len, sig_atomic_t seen, char *why, size_t whylen)
{
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap + 1);
    answer_reader r = {0};
    char ignored[8];
    double deadline_ms = monotonic_ms() + timeout_s * 1e3;
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
        double left_ms = deadline_ms - monotonic_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = left_ms > 0 ? poll(&pfd, 1, (int)left_ms + 1) : 0;
        if (ready < 0 && errno == EINTR && interrupts == seen)
            continue;
        ssize_t got = ready > 0 ? recv(fd, buf + n, cap - n, 0) : -1;
        if (got < 0 && errno == EINTR && interrupts == seen)
            continue;
        if (got < 0) {
            snprintf(why, whylen, "no answer: %s",
                     ready == 0 ? "timed out"
                     : errno == EINTR ? "interrupted"
                     : errno == EAGAIN ? "timed out"
                                       : strerror(errno));
            free(buf);
            return -1;
        }
        if (got == 0)
            break;
        n += (size_t)got;
        if (answer_advance(&r, buf, n, ignored, sizeof ignored) != 0)
            break; /* complete, or malformed: client_parse_answer says why */
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
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
        int send_errno = errno;
        if (interrupts != seen || read_all(fd, timeout_s, &text, &text_len, seen, why, whylen) || text_len == 0) {
            free(text);
            snprintf(why, whylen, "cannot send the request: %s", strerror(send_errno));
            close(fd);
            return -1;
        }
    } else if (read_all(fd, timeout_s, &text, &text_len, seen, why, whylen)) {
        close(fd);
        return -1;
    }
    close(fd);
    char reason[384];
    if (client_parse_answer(text, text_len, answer, reason, sizeof reason)) { /* steals text */
        snprintf(why, whylen, "a malformed HTTP answer from %s port %s: %s", t->host, t->port, reason);
        return -1;
    }
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
    if (a.status == 404 && t->prefix[0]) /* the prefix is what was added before /v1/jobs */
        fprintf(stderr, "lmperfd submit: --url is where the daemon answers, http://HOST:PORT (with a proxy's path "
                        "at most): the path %s of it is put before /v1/jobs\n", t->prefix);
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
