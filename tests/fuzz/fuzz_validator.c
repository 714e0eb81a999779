/* libFuzzer target: bytes as the body of POST /v1/jobs, through the same
 * reading and validation the submit handler uses (jsonschema_parse_spec, then
 * spec_validate and, as on a daemon without a GPU, the kind's check_no_gpu).
 * A crash, a sanitizer report or an error without a message is a finding;
 * refusals are the expected outcome for most inputs.
 *
 * Built and run by run_fuzz_validator.sh (clang -fsanitize=fuzzer,address). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobkind.h"
#include "jsonschema.h"
#include "spec.h"

/* An error must say something, and a field, when there is one, must be
 * NUL-terminated text of at most field's size (checked by strlen under ASan). */
static void check_error(const api_error *err)
{
    if (!err->message[0] || strlen(err->field) >= sizeof err->field)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    api_error err = {0};
    json_t *spec = jsonschema_parse_spec((const char *)data, size, "request body", &err);
    if (!spec) {
        check_error(&err);
        return 0;
    }
    const jobkind *kind = NULL;
    memset(&err, 0, sizeof err);
    if (spec_validate(spec, &kind, &err))
        check_error(&err);
    else if (kind->check_no_gpu && kind->check_no_gpu(spec, &err))
        check_error(&err);
    json_decref(spec);
    return 0;
}
