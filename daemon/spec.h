/* Job spec validation: the kind's JSON Schema (merged with the common
 * fields), then the kind's own check(). Used by POST /v1/jobs and by the
 * one-shot mode, so both accept exactly the same specs. */
#ifndef DAEMON_SPEC_H
#define DAEMON_SPEC_H

#include <jansson.h>

#include "../api/errors.h"
#include "jobkind.h"

/* Validates spec (borrowed, modified: defaults are filled in). Sets *kind.
 * Returns 0, or -1 with err naming the field. */
int spec_validate(json_t *spec, const jobkind **kind, api_error *err);

#endif
