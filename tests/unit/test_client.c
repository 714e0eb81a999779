/* Unit test: client_parse_answer (daemon/client.c, `lmperfd submit`'s HTTP
 * client) on well-formed answers and on malformed, cut-short and hostile
 * ones: every case gets exactly its bytes in a buffer of its own size (no NUL
 * after them), so that a read past them is ASan's error in the sanitized
 * build; every prefix of a good answer, and seeded byte mutations of it, must
 * give an answer or an error, never more. */
#include <string.h>

#include "../engine/check.h"
#include "client.h"

/* One case: the raw answer (len bytes: it may hold NULs; 0: strlen), and
 * either the status, body and json flag it parses to, or a fragment of the
 * error it gives (error != NULL). */
typedef struct answer_case {
    const char *name;
    const char *raw;
    size_t len;
    const char *error; /* NULL: it parses */
    int status;
    const char *body;
    size_t body_len; /* 0: strlen(body) */
    int json;
} answer_case;

/* A case that must be refused with error in its reason. */
#define REFUSED(name, raw, len, error) {name, raw, len, error, 0, NULL, 0, 0}

#define OK_HEAD "HTTP/1.1 200 OK\r\n"
#define CHUNKED_HEAD OK_HEAD "Transfer-Encoding: chunked\r\n\r\n"

static const answer_case cases[] = {
    /* well-formed */
    {"Content-Length", OK_HEAD "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 0, NULL, 200, "{}", 0, 1},
    {"bytes past Content-Length ignored", OK_HEAD "Content-Length: 3\r\n\r\nabcdef", 0, NULL, 200, "abc", 0, 0},
    {"Content-Length 0", "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", 0, NULL, 202, "", 0, 0},
    {"the same Content-Length twice", OK_HEAD "Content-Length: 2\r\ncontent-length: 2\r\n\r\nok", 0, NULL, 200, "ok", 0, 0},
    {"no framing: the body runs to the close", "HTTP/1.0 404 Not Found\r\n\r\nnot here", 0, NULL, 404, "not here", 0, 0},
    {"no reason phrase", "HTTP/1.1 409\r\nContent-Length: 1\r\n\r\nx", 0, NULL, 409, "x", 0, 0},
    {"chunked", CHUNKED_HEAD "4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n", 0, NULL, 200, "Wikipedia", 0, 0},
    {"chunked: case, leading zeros, extensions, BWS, trailers",
     OK_HEAD "TRANSFER-ENCODING:  Chunked \r\n\r\n000A;name=\"v\"\r\n0123456789\r\nb ;x\r\nhello world\r\n0\r\n"
             "X-Trailer: 1\r\n\r\n",
     0, NULL, 200, "0123456789hello world", 0, 0},
    {"chunked: data holding NUL, CR and LF", CHUNKED_HEAD "5\r\na\0\r\nb\r\n0\r\n\r\n", sizeof CHUNKED_HEAD + 15 - 1,
     NULL, 200, "a\0\r\nb", 5, 0},
    {"chunked overrides Content-Length", OK_HEAD "Content-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n",
     0, NULL, 200, "z", 0, 0},
    {"100 Continue before the answer",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nhi", 0, NULL, 201, "hi", 0, 0},
    {"204: no body", "HTTP/1.1 204 No Content\r\n\r\nleftover", 0, NULL, 204, "", 0, 0},
    {"json with a charset", OK_HEAD "content-type: application/json; charset=utf-8\r\n\r\n[]", 0, NULL, 200, "[]", 0, 1},
    {"not json: a longer type", OK_HEAD "Content-Type: application/jsonx\r\n\r\n[]", 0, NULL, 200, "[]", 0, 0},

    /* the head */
    REFUSED("empty", "", 0, "empty answer"),
    REFUSED("the head cut short", OK_HEAD "Content-Length: 5\r\n", 0, "ends inside its head"),
    REFUSED("not HTTP", "SSH-2.0-OpenSSH_9.2\r\n\r\n", 0, "not an HTTP/1.x status line"),
    REFUSED("HTTP/2 status line", "HTTP/2 200\r\n\r\n", 0, "not an HTTP/1.x status line"),
    REFUSED("a two-digit status", "HTTP/1.1 20 OK\r\n\r\n", 0, "not an HTTP/1.x status line"),
    REFUSED("a status past 599", "HTTP/1.1 999 Weird\r\n\r\n", 0, "not an HTTP status"),
    REFUSED("status digits run on", "HTTP/1.1 2000 OK\r\n\r\n", 0, "not an HTTP/1.x status line"),
    REFUSED("a header line without ':'", OK_HEAD "Bogus\r\n\r\n", 0, "malformed header line"),
    REFUSED("a space before ':'", OK_HEAD "Content-Length : 3\r\n\r\nabc", 0, "malformed header line"),
    REFUSED("a NUL in a header", OK_HEAD "X-A: a\0b\r\n\r\n", sizeof OK_HEAD + 12 - 1, "malformed header line"),
    REFUSED("a bare LF in a header", OK_HEAD "X-A: a\nContent-Length: 1\r\n\r\nx", 0, "malformed header line"),
    REFUSED("a head that never ends", OK_HEAD "X-A: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 0, "ends inside"),
    REFUSED("101 Switching Protocols", "HTTP/1.1 101 Switching Protocols\r\n\r\n", 0, "101"),
    REFUSED("endless 100s", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
                     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
                     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
     0, "1xx answers"),

    /* Content-Length */
    REFUSED("Content-Length negative", OK_HEAD "Content-Length: -1\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("Content-Length with a sign", OK_HEAD "Content-Length: +3\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("Content-Length not numeric", OK_HEAD "Content-Length: abc\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("Content-Length empty", OK_HEAD "Content-Length:\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("Content-Length with trailing text", OK_HEAD "Content-Length: 3 bytes\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("Content-Length a list", OK_HEAD "Content-Length: 3, 3\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("Content-Length past 2^64", OK_HEAD "Content-Length: 18446744073709551619\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("Content-Length past the limit", OK_HEAD "Content-Length: 1073741825\r\n\r\nabc", 0, "not a number of bytes"),
    REFUSED("two different Content-Lengths", OK_HEAD "Content-Length: 1\r\nContent-Length: 3\r\n\r\nabc", 0,
     "two different Content-Lengths"),
    REFUSED("Content-Length larger than the body", OK_HEAD "Content-Length: 10\r\n\r\nabc", 0, "Content-Length 10, 3 bytes came"),

    /* Transfer-Encoding and chunks */
    REFUSED("Transfer-Encoding gzip", OK_HEAD "Transfer-Encoding: gzip, chunked\r\n\r\n", 0, "is not supported"),
    REFUSED("a chunk size of 2^64 - 1", CHUNKED_HEAD "ffffffffffffffff\r\nabc\r\n0\r\n\r\n", 0, "past the 1024 MiB limit"),
    REFUSED("a chunk size that wraps size_t", CHUNKED_HEAD "10000000000000003\r\nabc\r\n0\r\n\r\n", 0, "past the 1024 MiB limit"),
    REFUSED("a chunk size past the limit", CHUNKED_HEAD "40000001\r\nabc\r\n0\r\n\r\n", 0, "past the 1024 MiB limit"),
    REFUSED("a chunk larger than what came", CHUNKED_HEAD "10\r\nabc\r\n0\r\n\r\n", 0, "cut short"),
    REFUSED("a chunk cut short", CHUNKED_HEAD "10\r\nabc", 0, "cut short"),
    REFUSED("no CRLF after the data", CHUNKED_HEAD "3\r\nabcXY0\r\n\r\n", 0, "no CRLF after the chunk of 3"),
    REFUSED("a bare LF after the data", CHUNKED_HEAD "3\r\nabc\n0\r\n\r\n", 0, "no CRLF after the chunk of 3"),
    REFUSED("CR without LF after the data", CHUNKED_HEAD "3\r\nabc\rX0\r\n\r\n", 0, "no CRLF after the chunk of 3"),
    REFUSED("no last chunk", CHUNKED_HEAD "3\r\nabc\r\n", 0, "cut short"),
    REFUSED("the last chunk's end missing", CHUNKED_HEAD "3\r\nabc\r\n0\r\n", 0, "cut short"),
    REFUSED("cut inside the trailers", CHUNKED_HEAD "3\r\nabc\r\n0\r\nX-T: 1\r\n", 0, "cut short"),
    REFUSED("cut inside the data's CRLF", CHUNKED_HEAD "3\r\nabc\r", 0, "cut short"),
    REFUSED("an empty body", CHUNKED_HEAD, 0, "cut short"),
    REFUSED("a size that is not hex", CHUNKED_HEAD "zz\r\nabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
    REFUSED("a negative size", CHUNKED_HEAD "-3\r\nabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
    REFUSED("a 0x prefix", CHUNKED_HEAD "0x3\r\nabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
    REFUSED("a space before the size", CHUNKED_HEAD " 3\r\nabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
    REFUSED("a size and junk", CHUNKED_HEAD "3 junk\r\nabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
    REFUSED("a bare LF after the size", CHUNKED_HEAD "3\nabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
    REFUSED("a bare CR in an extension", CHUNKED_HEAD "3;a\rb\r\nabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
    REFUSED("a NUL in the size line", CHUNKED_HEAD "3;\0\r\nabc\r\n0\r\n\r\n", sizeof CHUNKED_HEAD + 15 - 1,
     "malformed chunk-size line"),
    REFUSED("a CR then not LF after the size", CHUNKED_HEAD "3\rXabc\r\n0\r\n\r\n", 0, "malformed chunk-size line"),
};

/* text[0..len) in a buffer of exactly len bytes (steals nothing). */
static char *exact_copy(const char *text, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    memcpy(copy, text, len);
    return copy;
}

/* Parses text[0..len) from an exact copy: 0 or -1, *a filled on 0. */
static int parse(const char *text, size_t len, client_answer *a, char *why, size_t whylen)
{
    *a = (client_answer){0};
    why[0] = '\0';
    return client_parse_answer(exact_copy(text, len), len, a, why, whylen);
}

static void check_cases(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const answer_case *c = &cases[i];
        size_t len = c->len ? c->len : strlen(c->raw);
        client_answer a;
        char why[512];
        int rc = parse(c->raw, len, &a, why, sizeof why);
        if (c->error) {
            CHECK(rc == -1 && strstr(why, c->error), "%s: want an error with '%s', got rc %d (%s)", c->name, c->error,
                  rc, rc ? why : a.body);
        } else {
            size_t body_len = c->body_len ? c->body_len : strlen(c->body);
            CHECK(rc == 0, "%s: refused: %s", c->name, why);
            if (rc == 0)
                CHECK(a.status == c->status && a.len == body_len && memcmp(a.body, c->body, body_len) == 0 &&
                          a.body[a.len] == '\0' && a.json == c->json,
                      "%s: status %d json %d body (%zu bytes) '%.*s'", c->name, a.status, a.json, a.len, (int)a.len,
                      a.body);
        }
        if (rc == 0)
            client_answer_free(&a);
    }
}

/* A chunked answer of many chunks (sizes 1 to 300, in lower and upper hex):
 * decoded whole; each proper prefix of it refused. */
static void check_many_chunks_and_prefixes(void)
{
    size_t cap = 1 << 17, n = 0, want_len = 0;
    char *text = malloc(cap), *want = malloc(cap);
    CHECK(text && want, "out of memory");
    if (!text || !want)
        exit(1);
    n += (size_t)snprintf(text, cap, "%s", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                          "Transfer-Encoding: chunked\r\n\r\n");
    for (int size = 1; size <= 300; size++) {
        n += (size_t)snprintf(text + n, cap - n, size % 2 ? "%x\r\n" : "%X\r\n", (unsigned)size);
        for (int k = 0; k < size; k++)
            want[want_len++] = text[n++] = (char)('a' + (size + k) % 26);
        n += (size_t)snprintf(text + n, cap - n, "\r\n");
    }
    n += (size_t)snprintf(text + n, cap - n, "0\r\n\r\n");
    client_answer a;
    char why[512];
    int rc = parse(text, n, &a, why, sizeof why);
    CHECK(rc == 0 && a.len == want_len && memcmp(a.body, want, want_len) == 0 && a.json,
          "300 chunks: rc %d (%s), %zu bytes, want %zu", rc, rc ? why : "", rc ? 0 : a.len, want_len);
    if (rc == 0)
        client_answer_free(&a);
    int accepted = 0;
    for (size_t cut = 0; cut < n; cut++) {
        rc = parse(text, cut, &a, why, sizeof why);
        if (rc == 0) {
            accepted++;
            client_answer_free(&a);
        }
    }
    CHECK(accepted == 0, "%d proper prefixes of a chunked answer accepted", accepted);
    free(text);
    free(want);
}

/* A head of 70,000 bytes of headers and no end: refused as too long, not
 * read on for more. */
static void check_long_head(void)
{
    size_t n = 70000;
    char *text = malloc(n);
    CHECK(text != NULL, "out of memory");
    if (!text)
        exit(1);
    memcpy(text, OK_HEAD, strlen(OK_HEAD));
    for (size_t i = strlen(OK_HEAD); i < n; i += 16)
        memcpy(text + i, "X-Padding: abc\r\n", n - i < 16 ? n - i : 16);
    client_answer a;
    char why[512];
    CHECK(parse(text, n, &a, why, sizeof why) == -1 && strstr(why, "a head longer than"),
          "a head of %zu bytes without its end: %s", n, why);
    free(text);
}

/* Seeded byte mutations of a chunked and a Content-Length answer: each gives
 * an answer no longer than its bytes, or an error; none crashes or reads
 * past them (ASan). */
static void check_mutations(void)
{
    static const char *const bases[] = {
        CHUNKED_HEAD "4\r\nWiki\r\n5;e=1\r\npedia\r\n0\r\nT: v\r\n\r\n",
        OK_HEAD "Content-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"id\": 123}",
    };
    static const char alphabet[] = "0123456789abcdefABCDEF\r\n:; \t-+xX\0";
    test_rng rng = {.s = 20240611};
    int parsed = 0, refused = 0;
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        size_t len = strlen(bases[b]);
        for (int round = 0; round < 20000; round++) {
            char text[256];
            memcpy(text, bases[b], len);
            size_t n = len;
            for (int edits = 1 + (int)(test_next(&rng) % 3); edits > 0; edits--) {
                size_t at = (size_t)(test_next(&rng) % n);
                char c = alphabet[test_next(&rng) % (sizeof alphabet - 1)];
                switch (test_next(&rng) % 3) {
                case 0: /* replace */
                    text[at] = c;
                    break;
                case 1: /* insert */
                    if (n < sizeof text) {
                        memmove(text + at + 1, text + at, n - at);
                        text[at] = c;
                        n++;
                    }
                    break;
                default: /* delete */
                    if (n > 1) {
                        memmove(text + at, text + at + 1, n - at - 1);
                        n--;
                    }
                }
            }
            client_answer a;
            char why[512];
            if (parse(text, n, &a, why, sizeof why) == 0) {
                CHECK(a.len < n && a.body[a.len] == '\0' && a.status >= 100 && a.status <= 599,
                      "a mutation parsed to %zu bytes of %zu, status %d", a.len, n, a.status);
                client_answer_free(&a);
                parsed++;
            } else {
                CHECK(why[0] != '\0', "a refusal without a reason");
                refused++;
            }
        }
    }
    CHECK(parsed > 0 && refused > 0, "mutations: %d parsed, %d refused", parsed, refused);
}

int main(void)
{
    check_cases();
    check_many_chunks_and_prefixes();
    check_long_head();
    check_mutations();
    return check_report("client");
}
