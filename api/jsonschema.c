/* JSON Schema subset validator. Errors name the path of the first bad value. */
#include "jsonschema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 128

/* The root schema, for "$ref": "#/$defs/<name>". */
typedef struct schema_ctx {
    const json_t *root;
    int depth;
} schema_ctx;

#define REF_DEPTH_MAX 32

static int validate_at(schema_ctx *ctx, const json_t *schema, const json_t *value, const char *path,
                       api_error *err);

/* A real with no fraction (64.0, 1e3): refused where an integer is wanted,
 * with a message that says how to write it. */
static int is_whole_real(const json_t *v)
{
    if (!json_is_real(v))
        return 0;
    double d = json_real_value(v);
    return isfinite(d) && d == floor(d);
}

static int type_matches(const char *type, const json_t *v)
{
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0) /* JSON integers only: the runners read 64.0 (a real to jansson) as 0 */
        return json_is_integer(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(type, "null") == 0)
        return json_is_null(v);
    return 0;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static const char *field_or_root(const char *path)
{
    return path[0] ? path : "(body)";
}

/* Whether type (a string or a list of strings) names "integer". */
static int wants_integer(const json_t *type)
{
    if (json_is_string(type))
        return strcmp(json_string_value(type), "integer") == 0;
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t)
    {
        if (json_is_string(t) && strcmp(json_string_value(t), "integer") == 0)
            return 1;
    }
    return 0;
}

static void describe_value(const json_t *v, char *buf, size_t len)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, len, "%s", text ? text : "?");
    free(text);
}

static void format_number(const json_t *v, char *buf, size_t len);

#define VALUE_TEXT_MAX 48 /* bytes of a value's JSON quoted in a message; a longer one is named by its type */

/* The value given, as a refusal quotes it after "not": a number or literal
 * as written back (64.5, true, null), a string quoted with its type
 * ("\"64\" (a string)"), an array or object by its type and, when short,
 * its text ("an array ([])"). */
static void value_text(const json_t *v, char *buf, size_t len)
{
    char text[VALUE_TEXT_MAX + 1];
    if (json_is_number(v)) {
        format_number(v, buf, len);
        return;
    }
    describe_value(v, text, sizeof text);
    if (json_is_boolean(v) || json_is_null(v))
        snprintf(buf, len, "%s", text);
    else if (strlen(text) < VALUE_TEXT_MAX)
        snprintf(buf, len, "%s (%s)", text, json_type_name(v));
    else
        snprintf(buf, len, "%s", json_type_name(v));
}

static int check_type(const json_t *schema, const json_t *v, const char *path, api_error *err)
{
    const json_t *type = json_object_get(schema, "type");
    if (!type)
        return 0;
    if (json_is_string(type) && type_matches(json_string_value(type), v))
        return 0;
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t)
    {
        if (type_matches(json_string_value(t), v))
            return 0;
    }
    if (is_whole_real(v) && wants_integer(type)) {
        char text[64];
        describe_value(v, text, sizeof text);
        return api_fail(err, API_ERR_INVALID_SPEC, path,
                        "%s must be an integer written without a decimal point or exponent, not %s",
                        field_or_root(path), text);
    }
    char given[VALUE_TEXT_MAX + 32];
    value_text(v, given, sizeof given);
    if (json_is_string(type))
        return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must be %s %s, not %s", field_or_root(path),
                        strchr("aeiou", json_string_value(type)[0]) ? "an" : "a", json_string_value(type), given);
    char names[160] = "";
    json_array_foreach(type, i, t)
    {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? " or " : "", json_string_value(t));
    }
    return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must be %s, not %s", field_or_root(path), names, given);
}

static int check_enum(const json_t *schema, const json_t *v, const char *path, api_error *err)
{
    const json_t *options = json_object_get(schema, "enum");
    const json_t *constant = json_object_get(schema, "const");
    if (constant && !json_equal((json_t *)constant, (json_t *)v)) {
        char want[128];
        describe_value(constant, want, sizeof want);
        return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must be %s", field_or_root(path), want);
    }
    if (!options)
        return 0;
    size_t i;
    const json_t *o;
    json_array_foreach(options, i, o)
    {
        if (json_equal((json_t *)o, (json_t *)v))
            return 0;
    }
    char got[96], allowed[256];
    describe_value(v, got, sizeof got);
    describe_value(options, allowed, sizeof allowed);
    if (json_is_array(v) || json_is_object(v)) { /* no option is one: a list where one value goes */
        value_text(v, got, sizeof got);
        return api_fail(err, API_ERR_INVALID_SPEC, path, "%s takes one value, one of %s, not %s",
                        field_or_root(path), allowed, got);
    }
    return api_fail(err, API_ERR_INVALID_SPEC, path, "%s: %s is not one of %s", field_or_root(path),
                    got, allowed);
}

/* The shortest text that reads back as v's value: integers exactly (1e10 + 1
 * is not "1e+10"), reals with as many digits as they need. */
static void format_number(const json_t *v, char *buf, size_t len)
{
    if (json_is_integer(v)) {
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
        return;
    }
    double x = json_number_value(v);
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

static int check_number(const json_t *schema, const json_t *v, const char *path, api_error *err)
{
    if (!json_is_number(v))
        return 0;
    static const struct {
        const char *keyword, *relation;
        int sign; /* the value is out of range when sign · (x − bound) > 0, or ≥ 0 for exclusive bounds */
        int exclusive;
    } bounds[] = {{"minimum", ">=", -1, 0},
                  {"maximum", "<=", 1, 0},
                  {"exclusiveMinimum", ">", -1, 1},
                  {"exclusiveMaximum", "<", 1, 1}};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        const json_t *bound = json_object_get(schema, bounds[i].keyword);
        if (!bound)
            continue;
        /* integers against integer bounds exactly; anything else as doubles */
        int cmp;
        if (json_is_integer(v) && json_is_integer(bound)) {
            json_int_t a = json_integer_value(v), b = json_integer_value(bound);
            cmp = (a > b) - (a < b);
        } else {
            double a = json_number_value(v), b = json_number_value(bound);
            cmp = (a > b) - (a < b);
        }
        int out = bounds[i].exclusive ? bounds[i].sign * cmp >= 0 : bounds[i].sign * cmp > 0;
        if (out) {
            char want[32], got[32];
            format_number(bound, want, sizeof want);
            format_number(v, got, sizeof got);
            return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must be %s %s, got %s", field_or_root(path),
                            bounds[i].relation, want, got);
        }
    }
    return 0;
}

static int check_string(const json_t *schema, const json_t *v, const char *path, api_error *err)
{
    if (!json_is_string(v))
        return 0;
    /* characters (code points), as JSON Schema counts them; jansson's strings are valid UTF-8 */
    const unsigned char *text = (const unsigned char *)json_string_value(v);
    size_t bytes = json_string_length(v), len = 0;
    for (size_t i = 0; i < bytes; i++)
        len += (text[i] & 0xC0) != 0x80;
    const json_t *bound;
    if ((bound = json_object_get(schema, "minLength")) && (json_int_t)len < json_integer_value(bound)) {
        if (len == 0)
            return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must not be empty (at least %lld character%s)",
                            field_or_root(path), (long long)json_integer_value(bound),
                            json_integer_value(bound) == 1 ? "" : "s");
        return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must have at least %lld characters",
                        field_or_root(path), (long long)json_integer_value(bound));
    }
    if ((bound = json_object_get(schema, "maxLength")) && (json_int_t)len > json_integer_value(bound))
        return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must have at most %lld characters",
                        field_or_root(path), (long long)json_integer_value(bound));
    return 0;
}

static int check_array(schema_ctx *ctx, const json_t *schema, const json_t *v, const char *path, api_error *err)
{
    if (!json_is_array(v))
        return 0;
    size_t n = json_array_size(v);
    const json_t *bound;
    if ((bound = json_object_get(schema, "minItems")) && (json_int_t)n < json_integer_value(bound)) {
        json_int_t least = json_integer_value(bound);
        if (n == 0) {
            char count[24] = "one";
            if (least != 1)
                snprintf(count, sizeof count, "%lld", (long long)least);
            return api_fail(err, API_ERR_INVALID_SPEC, path, "%s is an empty list: it must list at least %s value%s",
                            field_or_root(path), count, least == 1 ? "" : "s");
        }
        return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must have at least %lld item%s", field_or_root(path),
                        (long long)least, least == 1 ? "" : "s");
    }
    if ((bound = json_object_get(schema, "maxItems")) && (json_int_t)n > json_integer_value(bound))
        return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must have at most %lld item%s",
                        field_or_root(path), (long long)json_integer_value(bound),
                        json_integer_value(bound) == 1 ? "" : "s");
    const json_t *items = json_object_get(schema, "items");
    int unique = json_is_true(json_object_get(schema, "uniqueItems"));
    for (size_t i = 0; i < n; i++) {
        char sub[PATH_MAX_LEN];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (items && validate_at(ctx, items, json_array_get(v, i), sub, err))
            return -1;
        for (size_t j = 0; unique && j < i; j++)
            if (json_equal(json_array_get(v, i), json_array_get(v, j))) {
                /* a sweep's point twice: one row twice in its tables and views */
                char value[96];
                describe_value(json_array_get(v, i), value, sizeof value);
                return api_fail(err, API_ERR_INVALID_SPEC, sub, "%s repeats %s[%zu] (%s): list each value once",
                                sub, field_or_root(path), j, value);
            }
    }
    return 0;
}

static int check_object(schema_ctx *ctx, const json_t *schema, const json_t *v, const char *path, api_error *err)
{
    if (!json_is_object(v))
        return 0;
    const json_t *properties = json_object_get(schema, "properties");
    const json_t *additional = json_object_get(schema, "additionalProperties");
    const json_t *required = json_object_get(schema, "required");
    size_t i;
    const json_t *name;
    json_array_foreach(required, i, name)
    {
        if (!json_object_get(v, json_string_value(name))) {
            char sub[PATH_MAX_LEN];
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", json_string_value(name));
            return api_fail(err, API_ERR_INVALID_SPEC, sub, "%s is required", sub);
        }
    }
    const char *key;
    const json_t *child;
    json_object_foreach((json_t *)v, key, child)
    {
        char sub[PATH_MAX_LEN];
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key[0] ? key : "\"\""); /* "" named */
        const json_t *child_schema = properties ? json_object_get(properties, key) : NULL;
        if (child_schema) {
            if (validate_at(ctx, child_schema, child, sub, err))
                return -1;
        } else if (json_is_false(additional)) {
            return api_fail(err, API_ERR_INVALID_SPEC, sub, "unknown field %s", sub);
        }
    }
    return 0;
}

/* Resolves "#/$defs/<name>" against the root; NULL when unresolvable. */
static const json_t *resolve_ref(schema_ctx *ctx, const char *ref)
{
    static const char prefix[] = "#/$defs/";
    if (!ref || strncmp(ref, prefix, sizeof prefix - 1) != 0)
        return NULL;
    return json_object_get(json_object_get(ctx->root, "$defs"), ref + sizeof prefix - 1);
}

/* The JSON type a branch of oneOf or anyOf takes: its "type" (one name),
 * an enum's when its values are all strings, its "$ref" target's; NULL when
 * it says none. */
static const char *branch_type(schema_ctx *ctx, const json_t *branch, int depth)
{
    const json_t *type = json_object_get(branch, "type"), *options = json_object_get(branch, "enum");
    if (json_is_string(type))
        return json_string_value(type);
    if (json_is_array(options) && json_array_size(options)) {
        size_t i;
        const json_t *o;
        json_array_foreach(options, i, o)
        if (!json_is_string(o))
            return NULL;
        return "string";
    }
    const json_t *target = resolve_ref(ctx, json_string_value(json_object_get(branch, "$ref")));
    return target && depth < REF_DEPTH_MAX ? branch_type(ctx, target, depth + 1) : NULL;
}

static void append_forms(schema_ctx *ctx, const json_t *branch, int depth, char *buf, size_t len);

/* Appends to buf (len bytes) the forms of the branches of a oneOf or anyOf
 * (append_forms'), "A, B or C". */
static void append_branch_forms(schema_ctx *ctx, const json_t *branches, int depth, char *buf, size_t len)
{
    size_t i;
    const json_t *b;
    json_array_foreach(branches, i, b)
    {
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s", i == 0 ? "" : i + 1 == json_array_size(branches) ? " or " : ", ");
        append_forms(ctx, b, depth + 1, buf, len);
    }
}

/* Appends to buf (len bytes) what branch accepts, as a refusal lists it:
 * "an integer", "an array", "one of [\"fp32\",\"bf16\"]", a $ref's or a
 * nested oneOf's forms. */
static void append_forms(schema_ctx *ctx, const json_t *branch, int depth, char *buf, size_t len)
{
    size_t at = strlen(buf);
    const json_t *type = json_object_get(branch, "type"), *options = json_object_get(branch, "enum");
    const json_t *target = resolve_ref(ctx, json_string_value(json_object_get(branch, "$ref")));
    const json_t *nested = json_object_get(branch, "oneOf") ? json_object_get(branch, "oneOf")
                                                             : json_object_get(branch, "anyOf");
    if (json_is_string(type)) {
        snprintf(buf + at, len - at, "%s %s", strchr("aeiou", json_string_value(type)[0]) ? "an" : "a",
                 json_string_value(type));
    } else if (options) {
        char allowed[256];
        describe_value(options, allowed, sizeof allowed);
        snprintf(buf + at, len - at, "one of %s", allowed);
    } else if (target && depth < REF_DEPTH_MAX) {
        append_forms(ctx, target, depth + 1, buf, len);
    } else if (json_is_array(nested) && depth < REF_DEPTH_MAX) {
        append_branch_forms(ctx, nested, depth, buf, len);
    } else {
        snprintf(buf + at, len - at, "a value of another form");
    }
}

/* oneOf: exactly one branch; anyOf: at least one. The error reported is the
 * one of the branch whose type (branch_type) is the value's, when there is
 * one (a string against the preset names, an array against the list's
 * items); a whole number written as a real, the integer branch's (how to
 * write it); else one that lists every form the field takes ("model must be
 * a string, an object or an array, not 5"). */
static int check_alternatives(schema_ctx *ctx, const json_t *schema, const json_t *v, const char *path, api_error *err)
{
    static const char *const keywords[] = {"oneOf", "anyOf"};
    for (int k = 0; k < 2; k++) {
        const json_t *branches = json_object_get(schema, keywords[k]);
        if (!branches)
            continue;
        size_t i, matches = 0;
        const json_t *branch;
        api_error typed = {0}, integer = {0};
        int have_typed = 0, have_integer = 0;
        json_array_foreach(branches, i, branch)
        {
            api_error e = {0};
            if (validate_at(ctx, branch, v, path, &e) == 0) {
                matches++;
                continue;
            }
            const char *t = branch_type(ctx, branch, 0);
            if (!have_typed && t && type_matches(t, v)) {
                typed = e;
                have_typed = 1;
            }
            if (!have_integer && t && strcmp(t, "integer") == 0 && is_whole_real(v)) {
                integer = e;
                have_integer = 1;
            }
        }
        if (matches == 0 && (have_typed || have_integer)) {
            *err = have_typed ? typed : integer;
            return -1;
        }
        if (matches == 0) {
            char forms[512] = "", given[VALUE_TEXT_MAX + 32];
            append_branch_forms(ctx, branches, 0, forms, sizeof forms);
            value_text(v, given, sizeof given);
            return api_fail(err, API_ERR_INVALID_SPEC, path, "%s must be %s, not %s", field_or_root(path), forms,
                            given);
        }
        if (k == 0 && matches > 1)
            return api_fail(err, API_ERR_INVALID_SPEC, path, "%s matches more than one alternative",
                            field_or_root(path));
    }
    return 0;
}

static int validate_at(schema_ctx *ctx, const json_t *schema, const json_t *value, const char *path,
                       api_error *err)
{
    if (json_is_true(schema))
        return 0;
    if (!json_is_object(schema))
        return api_fail(err, API_ERR_INTERNAL, path, "schema for %s is not an object", field_or_root(path));
    const json_t *ref = json_object_get(schema, "$ref");
    if (ref) {
        const json_t *target = resolve_ref(ctx, json_string_value(ref));
        if (!target || ctx->depth >= REF_DEPTH_MAX)
            return api_fail(err, API_ERR_INTERNAL, path, "schema $ref %s cannot be resolved",
                            json_string_value(ref) ? json_string_value(ref) : "?");
        ctx->depth++;
        int rc = validate_at(ctx, target, value, path, err);
        ctx->depth--;
        if (rc)
            return rc;
    }
    if (check_type(schema, value, path, err) || check_enum(schema, value, path, err) ||
        check_number(schema, value, path, err) || check_string(schema, value, path, err) ||
        check_array(ctx, schema, value, path, err) || check_object(ctx, schema, value, path, err) ||
        check_alternatives(ctx, schema, value, path, err))
        return -1;
    return 0;
}

json_t *jsonschema_parse_spec(const char *text, size_t len, const char *what, api_error *err)
{
    static const char bom[] = "\xEF\xBB\xBF";
    if (len >= sizeof bom - 1 && memcmp(text, bom, sizeof bom - 1) == 0) {
        text += sizeof bom - 1;
        len -= sizeof bom - 1;
    }
    const char *nul = memchr(text, '\0', len);
    json_t *value = NULL;
    json_error_t jerr;
    if (nul)
        api_fail(err, API_ERR_MALFORMED_JSON, NULL, "%s is not valid JSON: a NUL byte at byte %zu", what,
                 (size_t)(nul - text));
    else if (!(value = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)))
        api_fail(err, API_ERR_MALFORMED_JSON, NULL, "%s is not valid JSON: %s (line %d, column %d)", what,
                 jerr.text, jerr.line, jerr.column);
    return value;
}

int jsonschema_validate(const json_t *schema, const json_t *instance, api_error *err)
{
    schema_ctx ctx = {.root = schema};
    return validate_at(&ctx, schema, instance, "", err);
}

static void fill_defaults(const json_t *schema, json_t *spec)
{
    const char *key;
    json_t *prop;
    schema_ctx ctx = {.root = schema};
    json_object_foreach(json_object_get(schema, "properties"), key, prop)
    {
        json_t *def = json_object_get(prop, "default");
        if (!def && json_object_get(prop, "$ref"))
            def = json_object_get(resolve_ref(&ctx, json_string_value(json_object_get(prop, "$ref"))), "default");
        if (def && !json_object_get(spec, key))
            json_object_set_new(spec, key, json_deep_copy(def));
    }
}

int jsonschema_validate_spec(const json_t *common, const json_t *kind_schema, json_t *spec,
                             api_error *err)
{
    int rc = -1;
    json_t *merged = json_deep_copy(kind_schema);
    json_t *props = json_object_get(merged, "properties");
    json_t *required = json_object_get(merged, "required");
    if (!merged)
        return api_fail(err, API_ERR_INTERNAL, NULL, "out of memory");
    if (!props) {
        props = json_object();
        json_object_set_new(merged, "properties", props);
    }
    if (!required) {
        required = json_array();
        json_object_set_new(merged, "required", required);
    }
    json_object_update_missing(props, json_object_get(common, "properties"));
    json_t *defs = json_object_get(merged, "$defs");
    if (!defs) {
        defs = json_object();
        json_object_set_new(merged, "$defs", defs);
    }
    json_object_update_missing(defs, json_object_get(common, "$defs"));
    json_array_extend(required, json_object_get(common, "required"));
    if (!json_is_object(spec)) {
        api_fail(err, API_ERR_INVALID_SPEC, "", "the job spec must be a JSON object");
        goto out;
    }
    if (jsonschema_validate(merged, spec, err))
        goto out;
    fill_defaults(merged, spec);
    rc = 0;
out:
    json_decref(merged);
    return rc;
}
