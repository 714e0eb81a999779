/* HTTP status and wire code for each API error, from the one table. */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int api_error_http_status(api_error_code code)
{
    switch (code) {
#define XX(name, status, wire) \
    case API_ERR_##name:       \
        return status;
        API_ERROR_MAP(XX)
#undef XX
    }
    return 500;
}

const char *api_error_wire_code(api_error_code code)
{
    switch (code) {
#define XX(name, status, wire) \
    case API_ERR_##name:       \
        return wire;
        API_ERROR_MAP(XX)
#undef XX
    }
    return "internal";
}

int api_fail(api_error *err, api_error_code code, const char *field, const char *fmt, ...)
{
    if (!err)
        return -1;
    err->code = code;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}
