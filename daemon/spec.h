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

/* The JSON Schema of a kind as the validator applies it: the kind's schema
 * with the common fields and $defs merged in. Sets *schema (new). Returns 0,
 * or -1 with err (NOT_FOUND for an unknown kind). */
int spec_schema(const char *kind_name, json_t **schema, api_error *err);

#endif
