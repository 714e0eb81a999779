/* The one error table of the HTTP API: code name, HTTP status, wire code.
 * Every error the API returns is one of these, rendered as
 *   {"error": {"code": "<wire code>", "message": "...", "field": "..." | null}} */
#ifndef API_ERRORS_H
#define API_ERRORS_H

#include <stddef.h>

#define API_ERROR_MAP(XX)                                              \
    XX(OK, 200, "ok")                                                  \
    XX(BAD_REQUEST, 400, "bad_request")                                \
    XX(MALFORMED_JSON, 400, "malformed_json")                          \
    XX(INVALID_SPEC, 400, "invalid_spec")                              \
    XX(UNAUTHORIZED, 401, "unauthorized")                              \
    XX(NOT_FOUND, 404, "not_found")                                    \
    XX(METHOD_NOT_ALLOWED, 405, "method_not_allowed")                  \
    XX(CONFLICT, 409, "conflict")                                      \
    XX(PAYLOAD_TOO_LARGE, 413, "payload_too_large")                    \
    XX(UNSUPPORTED_MEDIA_TYPE, 415, "unsupported_media_type")          \
    XX(INTERNAL, 500, "internal")                                      \
    XX(UNAVAILABLE, 503, "unavailable")

typedef enum api_error_code {
#define XX(name, status, wire) API_ERR_##name,
    API_ERROR_MAP(XX)
#undef XX
} api_error_code;

/* A filled-in error: code, the offending field (JSON pointer-ish path such as
 * "model" or "layers[2]"; empty when none) and a human-readable message. */
typedef struct api_error {
    api_error_code code;
    char field[128];
    char message[512];
} api_error;

int api_error_http_status(api_error_code code);
const char *api_error_wire_code(api_error_code code);

/* Fills err and returns -1, so callers can `return api_fail(...)`.
 * field may be NULL. */
int api_fail(api_error *err, api_error_code code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Makes s valid UTF-8 in place and returns it: every byte that is not part of
 * a well-formed sequence (a character cut by a fixed-size buffer, text that
 * was never UTF-8) becomes '?'. JSON strings must be valid UTF-8: jansson
 * refuses to build one from anything else. */
char *utf8_repair(char *s);

/* buf (len bytes) = the NULL-terminated names joined by ", " ("a, b, c"),
 * cut to fit; "" when there are none or names is NULL. For messages that
 * list what a field or argument takes. Returns buf. */
char *api_join_names(const char *const *names, char *buf, size_t len);

#endif
