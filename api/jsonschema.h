/* A JSON Schema validator for the subset lmperf's schemas use.
 *
 * Keywords: type (string or list; "integer" takes JSON integers only: 64.0 is
 * refused with a message saying how to write it),
 * properties, required, additionalProperties (boolean), enum, const, minimum,
 * maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, items,
 * minItems, maxItems, uniqueItems, oneOf, anyOf, default, and "$ref" to
 * "#/$defs/<name>" (common.json's $defs are visible to every kind). Annotation keywords
 * ($schema, $id, title, description, examples) are ignored. A refusal quotes
 * the value given ("not 64.5"); one of a oneOf or anyOf whose branches all
 * take another type lists each form ("a string, an object or an array"). */
#ifndef API_JSONSCHEMA_H
#define API_JSONSCHEMA_H

#include <jansson.h>

#include "errors.h"

/* Parses the JSON text of a job spec, text[0..len) (borrowed), as POST
 * /v1/jobs and `lmperfd run` read it: a leading UTF-8 byte order mark left
 * out (RFC 8259 §8.1); a duplicate key, and a NUL byte anywhere, refused (JSON
 * text has none, and jansson skips one that follows a number or a literal:
 * "[2\0, 4]" would read as [2, 4]). what names the text in the message
 * ("request body", a file name). Returns the value (new; any JSON value, the
 * caller checks it is an object), or NULL with err filled (MALFORMED_JSON,
 * no field). */
json_t *jsonschema_parse_spec(const char *text, size_t len, const char *what, api_error *err);

/* Validates instance against schema (both borrowed). Returns 0, or -1 with
 * err filled (INVALID_SPEC, field = path of the offending value such as
 * "context_length[1]" or "model.d_model"). */
int jsonschema_validate(const json_t *schema, const json_t *instance, api_error *err);

/* Validates a job spec against the common schema merged with its kind's
 * schema (properties and required of both; additionalProperties of the
 * kind's), then fills top-level defaults from both into spec (modified). */
int jsonschema_validate_spec(const json_t *common, const json_t *kind_schema, json_t *spec,
                             api_error *err);

#endif
