/* Spec validation against the embedded JSON Schemas. */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonschema.h"
#include "schema_embedded.h"

static json_t *load_schema(const char *name, api_error *err)
{
    const char *text = schema_file_text(name);
    json_error_t jerr;
    json_t *schema = text ? json_loads(text, 0, &jerr) : NULL;
    if (!schema)
        api_fail(err, API_ERR_INTERNAL, NULL, "schema %s is missing or invalid", name);
    return schema;
}

int spec_schema(const char *kind_name, json_t **schema_out, api_error *err)
{
    const jobkind *kind = jobkind_find(kind_name);
    if (!kind) {
        char known[256];
        jobkind_names(known, sizeof known);
        return api_fail(err, API_ERR_NOT_FOUND, "kind", "no job kind named '%.40s' (the kinds: %s)", kind_name, known);
    }
    char name[96];
    snprintf(name, sizeof name, "jobs/%s.json", kind->name);
    json_t *common = load_schema("jobs/common.json", err);
    json_t *schema = common ? load_schema(name, err) : NULL;
    if (!schema) {
        json_decref(common);
        return -1;
    }
    json_t *props = json_object_get(schema, "properties");
    if (!props)
        json_object_set_new(schema, "properties", props = json_object());
    json_object_update_missing(props, json_object_get(common, "properties"));
    json_t *required = json_object_get(schema, "required");
    if (!required)
        json_object_set_new(schema, "required", required = json_array());
    json_array_extend(required, json_object_get(common, "required"));
    json_t *defs = json_object_get(schema, "$defs");
    if (!defs)
        json_object_set_new(schema, "$defs", defs = json_object());
    json_object_update_missing(defs, json_object_get(common, "$defs"));
    json_decref(common);
    *schema_out = schema;
    return 0;
}

int spec_validate(json_t *spec, const jobkind **kind_out, api_error *err)
{
    int rc = -1;
    json_t *common = NULL, *schema = NULL;
    if (!json_is_object(spec))
        return api_fail(err, API_ERR_INVALID_SPEC, NULL, "the job spec must be a JSON object");
    json_t *kind_value = json_object_get(spec, "kind");
    const jobkind *kind = jobkind_find(json_string_value(kind_value));
    if (!kind) {
        char known[256], *given = kind_value ? json_dumps(kind_value, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        jobkind_names(known, sizeof known);
        if (!kind_value)
            return api_fail(err, API_ERR_INVALID_SPEC, "kind", "kind is required: one of %s", known);
        api_fail(err, API_ERR_INVALID_SPEC, "kind", "kind must be one of %s, not %.60s%s", known, given ? given : "?",
                 given && strlen(given) > 60 ? "..." : "");
        free(given);
        return -1;
    }
    char name[96];
    snprintf(name, sizeof name, "jobs/%s.json", kind->name);
    if (!(common = load_schema("jobs/common.json", err)) || !(schema = load_schema(name, err)))
        goto out;
    if (jsonschema_validate_spec(common, schema, spec, err))
        goto out;
    if (kind->check && kind->check(spec, err))
        goto out;
    *kind_out = kind;
    rc = 0;
out:
    json_decref(common);
    json_decref(schema);
    return rc;
}
