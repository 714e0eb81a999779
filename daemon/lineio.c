/* Buffered JSON-lines reader and writer. */
#include "lineio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long line_reader_fill(line_reader *r, int fd)
{
    if (r->cap - r->len < 65536) {
        size_t cap = r->cap ? r->cap * 2 : 131072;
        if (cap > LINE_MAX_BYTES + 65536)
            return -2;
        char *grown = realloc(r->buf, cap);
        if (!grown)
            return -1;
        r->buf = grown;
        r->cap = cap;
    }
    ssize_t n;
    do {
        n = read(fd, r->buf + r->len, r->cap - r->len);
    } while (n < 0 && errno == EINTR);
    if (n > 0)
        r->len += (size_t)n;
    return (long)n;
}

json_t *line_reader_next(line_reader *r)
{
    char *newline = r->len ? memchr(r->buf, '\n', r->len) : NULL;
    if (!newline)
        return NULL;
    size_t line_len = (size_t)(newline - r->buf);
    json_error_t error;
    json_t *value = json_loadb(r->buf, line_len, 0, &error);
    if (!value)
        value = json_sprintf("malformed protocol line: %s", error.text);
    r->len -= line_len + 1;
    memmove(r->buf, newline + 1, r->len);
    return value;
}

void line_reader_free(line_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

int line_write(int fd, const json_t *value)
{
    char *text = json_dumps(value, JSON_COMPACT);
    if (!text)
        return -1;
    size_t len = strlen(text);
    char *line = realloc(text, len + 2); /* the line and its newline go out in one write */
    if (!line) {
        free(text);
        return -1;
    }
    line[len++] = '\n';
    int rc = 0;
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, line + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = -1;
            break;
        }
        off += (size_t)n;
    }
    free(line);
    return rc;
}
