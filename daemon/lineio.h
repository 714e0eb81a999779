/* JSON lines over a stream socket: a buffered reader and a whole-line writer.
 * The worker protocol (daemon/worker.c) is one JSON object per line. */
#ifndef DAEMON_LINEIO_H
#define DAEMON_LINEIO_H

#include <jansson.h>
#include <stddef.h>

#define LINE_MAX_BYTES (256u << 20) /* a result larger than this is a protocol error */

typedef struct line_reader {
    char *buf;
    size_t len, cap;
} line_reader;

/* Reads what is available on fd (one read call) into r.
 * Returns bytes read (> 0), 0 on end of file, -1 on error (EAGAIN included:
 * check errno), -2 when a line exceeds LINE_MAX_BYTES. */
long line_reader_fill(line_reader *r, int fd);
/* Takes the next complete line out of r as parsed JSON (new), or returns
 * NULL when no complete line is buffered. A line that is not valid JSON is
 * returned as a JSON string holding an error message (caller decides). */
json_t *line_reader_next(line_reader *r);
void line_reader_free(line_reader *r);

/* Writes value as one compact line, retrying short writes. Returns 0 or -1. */
int line_write(int fd, const json_t *value);

#endif
