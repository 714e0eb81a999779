/* Text for the library's status codes. */
#include "status.h"

const char *lmk_status_text(int status)
{
    switch (status) {
#define XX(name, value, text) \
    case value:               \
        return text;
        LMK_STATUS_MAP(XX)
#undef XX
    }
    return "unknown status";
}
