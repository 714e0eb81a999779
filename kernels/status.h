/* Status codes returned by every function of the compute library (kernels/).
 * 0 is success, negative values are errors. The daemon maps them to its own
 * error table in one place (daemon/errors.c). */
#ifndef LMK_STATUS_H
#define LMK_STATUS_H

#define LMK_STATUS_MAP(XX)                                                   \
    XX(OK, 0, "ok")                                                          \
    XX(NOMEM, -1, "out of memory")                                           \
    XX(INVALID, -2, "invalid argument")                                      \
    XX(UNSUPPORTED, -3, "not supported by this backend")                     \
    XX(DEVICE, -4, "device error")                                           \
    XX(CANCELLED, -5, "cancelled")

typedef enum lmk_status {
#define XX(name, value, text) LMK_##name = value,
    LMK_STATUS_MAP(XX)
#undef XX
} lmk_status;

/* Returns a static string describing status. */
const char *lmk_status_text(int status);

#endif
