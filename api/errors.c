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
    utf8_repair(err->field);
    utf8_repair(err->message);
    return -1;
}

/* Length of the well-formed UTF-8 sequence at p (1…4), 0 when there is none:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_sequence(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    int n = (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n)
        return 0;
    unsigned cp = p[0] & (0x7Fu >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = cp << 6 | (p[i] & 0x3Fu);
    }
    static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

char *utf8_repair(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (p && *p) {
        int n = utf8_sequence(p);
        if (n)
            p += n;
        else
            *p++ = '?';
    }
    return s;
}

char *api_join_names(const char *const *names, char *buf, size_t len)
{
    buf[0] = '\0';
    for (const char *const *n = names; n && *n; n++) {
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s", at ? ", " : "", *n);
    }
    return buf;
}
