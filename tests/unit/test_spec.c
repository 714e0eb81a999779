/* Unit test: spec validation (schema subset, defaults, error fields) and the
 * table renderings. */
#include <string.h>

#include "../engine/check.h"
#include "api.h"
#include "jsonschema.h"
#include "spec.h"

/* Validates text; returns the error field ("" when valid) in field. */
static int validate_text(const char *text, char *field, size_t len, char *message, size_t mlen)
{
    json_t *spec = json_loads(text, 0, NULL);
    const jobkind *kind = NULL;
    api_error err = {0};
    int rc = spec_validate(spec, &kind, &err);
    snprintf(field, len, "%s", rc ? err.field : "");
    snprintf(message, mlen, "%s", rc ? err.message : "");
    json_decref(spec);
    return rc;
}

static void expect_field(const char *text, const char *want_field)
{
    char field[128], message[512];
    int rc = validate_text(text, field, sizeof field, message, sizeof message);
    if (!want_field) {
        CHECK(rc == 0, "%s should be valid, got error on %s: %s", text, field, message);
        return;
    }
    CHECK(rc != 0, "%s should be rejected", text);
    CHECK(strcmp(field, want_field) == 0, "%s: error names field '%s', want '%s' (%s)", text, field, want_field,
          message);
    CHECK(message[0] != '\0', "%s: empty message", text);
}

int main(void)
{
    expect_field("{\"kind\":\"numerics\"}", NULL);
    expect_field("{\"kind\":\"numerics\",\"count\":5,\"summand\":0.5,\"device\":\"cpu\",\"label\":\"x\"}", NULL);
    expect_field("{}", "kind");
    expect_field("{\"kind\":\"nope\"}", "kind");
    expect_field("{\"kind\":7}", "kind");
    expect_field("{\"kind\":\"numerics\",\"bogus\":1}", "bogus");
    expect_field("{\"kind\":\"numerics\",\"count\":\"many\"}", "count");
    expect_field("{\"kind\":\"numerics\",\"count\":1.5}", "count");
    expect_field("{\"kind\":\"numerics\",\"count\":0}", "count");
    expect_field("{\"kind\":\"numerics\",\"summand\":0}", "summand");
    expect_field("{\"kind\":\"numerics\",\"device\":\"tpu\"}", "device");
    expect_field("{\"kind\":\"numerics\",\"experiments\":[]}", "experiments");
    expect_field("{\"kind\":\"numerics\",\"experiments\":[\"accumulation\",\"x\"]}", "experiments[1]");
    expect_field("{\"kind\":\"numerics\",\"timeout_s\":0}", "timeout_s");
    expect_field("{\"kind\":\"numerics\",\"timeout_s\":\"1\"}", "timeout_s");

    /* a sweep list that repeats a value is refused at its second occurrence,
     * naming the value and where it first was (every kind's lists) */
    static const struct {
        const char *spec, *field, *message;
    } repeats[] = {
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":[128,256,128]}", "context_length[2]",
         "context_length[2] repeats context_length[0] (128): list each value once"},
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":8,\"precision\":[\"fp32\",\"fp32\"]}",
         "precision[1]", "precision[1] repeats precision[0] (\"fp32\"): list each value once"},
        {"{\"kind\":\"memory\",\"model\":[{\"d_model\":16,\"d_ff\":32,\"num_layers\":1,\"num_heads\":2},"
         "{\"num_heads\":2,\"d_ff\":32,\"d_model\":16,\"num_layers\":1}],\"context_length\":8}",
         "model[1]", "model[1] repeats model[0] ({\"num_heads\":2,\"d_ff\":32,\"d_model\":16,\"num_layers\":1})"},
        {"{\"kind\":\"attention\",\"seq_len\":8,\"dtype\":[\"float16\",\"float16\"]}", "dtype[1]",
         "dtype[1] repeats dtype[0] (\"float16\")"},
        {"{\"kind\":\"allreduce\",\"backend\":\"mpi\",\"sizes\":[1024,1024]}", "sizes[1]",
         "sizes[1] repeats sizes[0] (1024)"},
        /* the same bytes written otherwise: the kind's own check */
        {"{\"kind\":\"allreduce\",\"backend\":\"mpi\",\"sizes\":[\"1KiB\",\"1MB\",1000000]}", "sizes[2]",
         "sizes[2] (1000000) is sizes[1] (1MB) again: both are 1000000 bytes; list each size once"},
        {"{\"kind\":\"allreduce\",\"backend\":\"mpi\",\"sizes\":[\"4KB\",\"4 kb\"]}", "sizes[1]",
         "sizes[1] (4 kb) is sizes[0] (4KB) again: both are 4000 bytes"},
        {"{\"kind\":\"numerics\",\"experiments\":[\"accumulation\",\"accumulation\"]}", "experiments[1]",
         "experiments[1] repeats experiments[0] (\"accumulation\")"},
    };
    for (size_t i = 0; i < sizeof repeats / sizeof repeats[0]; i++) {
        char field[128], message[512];
        int rc = validate_text(repeats[i].spec, field, sizeof field, message, sizeof message);
        CHECK(rc != 0 && strcmp(field, repeats[i].field) == 0 && strstr(message, repeats[i].message),
              "%s: field '%s' (want '%s'), message '%s' (want '%s' in it)", repeats[i].spec, field, repeats[i].field,
              message, repeats[i].message);
    }
    expect_field("{\"kind\":\"allreduce\",\"backend\":\"mpi\",\"sizes\":[\"1MB\",\"1MiB\",1000]}", NULL);

    /* an allreduce size refused names sizes[i], quotes it, says why and what is accepted; the spellings
     * accepted are a decimal number (digits, a fraction) and a unit, nothing strtod would read besides */
    static const struct {
        const char *size, *why; /* why: NULL where the size is accepted */
    } sizes[] = {
        {"\"3B\"", "sizes[1]: \"3B\" is 3 bytes, not a multiple of 4 (float32 elements)"},
        {"6", "sizes[1]: 6 bytes is not a multiple of 4"},
        {"\"0B\"", "sizes[1]: \"0B\" is 0 bytes"},
        {"\"3 bytes\"", "sizes[1]: \"3 bytes\" is not a size"},
        {"\"1e3B\"", "sizes[1]: \"1e3B\" is not a size"},
        {"\"0x10 B\"", "sizes[1]: \"0x10 B\" is not a size"},
        {"\"inf MB\"", "sizes[1]: \"inf MB\" is not a size"},
        {"\"-4B\"", "sizes[1]: \"-4B\" is not a size"},
        {"\" 4KB\"", "sizes[1]: \" 4KB\" is not a size"},
        {"\"1.KB\"", "sizes[1]: \"1.KB\" is not a size"},
        {"\"1.5B\"", "sizes[1]: \"1.5B\" is not a whole number of bytes"},
        {"\"20GB\"", "sizes[1]: \"20GB\" is more than 16 GiB"},
        {"\".5KB\"", NULL},
        {"\"4 kb\"", NULL},
        {"\"1.5 GiB\"", NULL},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char text[256], field[128], message[512];
        snprintf(text, sizeof text, "{\"kind\":\"allreduce\",\"backend\":\"mpi\",\"sizes\":[1024,%s]}", sizes[i].size);
        int rc = validate_text(text, field, sizeof field, message, sizeof message);
        if (!sizes[i].why) {
            CHECK(rc == 0, "size %s should be accepted: %s", sizes[i].size, message);
            continue;
        }
        CHECK(rc != 0 && strcmp(field, "sizes[1]") == 0 && strstr(message, sizes[i].why) == message &&
                  strstr(message, "; a size is a whole number of bytes (4096) or a decimal number and a unit") &&
                  strstr(message, "KiB, MiB, GiB (powers of 1024), a multiple of 4 bytes up to 16 GiB"),
              "size %s: field '%s', message '%s' (want it to start '%s' and list the spellings)", sizes[i].size, field,
              message, sizes[i].why);
    }

    /* each refusal's whole message. A value of the wrong form: the message quotes the value given and,
     * where a field takes several forms (a preset name or a shape or a list of them; one value or a list),
     * names every one */
    static const struct {
        const char *spec, *field, *message;
    } forms[] = {
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64.5}", "context_length",
         "context_length must be an integer or an array, not 64.5"},
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":\"64\"}", "context_length",
         "context_length must be an integer or an array, not \"64\" (a string)"},
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64.0}", "context_length",
         "context_length must be an integer written without a decimal point or exponent, not 64.0"},
        {"{\"kind\":\"benchmark\",\"model\":5,\"context_length\":64}", "model",
         "model must be a string, an object or an array, not 5"},
        {"{\"kind\":\"memory\",\"model\":[true],\"context_length\":64}", "model[0]",
         "model[0] must be a string or an object, not true"},
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"precision\":5}", "precision",
         "precision must be one of [\"fp32\",\"tf32\",\"bf16\",\"fp16\"] or an array, not 5"},
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"precision\":\"fp8\"}", "precision",
         "precision: \"fp8\" is not one of [\"fp32\",\"tf32\",\"bf16\",\"fp16\"]"},
        {"{\"kind\":\"allreduce\",\"backend\":\"mpi\",\"sizes\":[null]}", "sizes[0]",
         "sizes[0] must be an integer or a string, not null"},
        {"{\"kind\":\"numerics\",\"count\":\"many\"}", "count", "count must be an integer, not \"many\" (a string)"},
        {"{\"kind\":\"numerics\",\"label\":[\"x\"]}", "label", "label must be a string, not [\"x\"] (an array)"},
        {"{\"kind\":\"Benchmark\"}", "kind",
         "kind must be one of benchmark, numerics, memory, allreduce, attention, profile, not \"Benchmark\""},
        {"{\"kind\":null}", "kind",
         "kind must be one of benchmark, numerics, memory, allreduce, attention, profile, not null"},
        {"{\"label\":\"x\"}", "kind", "kind is required: one of benchmark, numerics, memory, allreduce, attention, profile"},
        /* an empty list, or a list where one value goes */
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":64,\"attention\":[]}", "attention",
         "attention takes one value, one of [\"naive\",\"flash\",\"naive_fused\"], not [] (an array)"},
        {"{\"kind\":\"benchmark\",\"model\":\"tiny\",\"context_length\":[]}", "context_length",
         "context_length is an empty list: it must list at least one value"},
        {"{\"kind\":\"attention\",\"seq_len\":64,\"dtype\":[]}", "dtype",
         "dtype is an empty list: it must list at least one value"},
        {"{\"kind\":\"benchmark\",\"model\":\"\",\"context_length\":64}", "model",
         "model must not be empty (at least 1 character)"},
        /* the kinds' own checks name the list entry at fault, and a sweep past its limit names its largest list */
        {"{\"kind\":\"attention\",\"seq_len\":64,\"d_head\":[16,24]}", "d_head[1]",
         "d_head[1] is 24: flash (impl \"both\") supports d_head 16, 32, 64, 80 and 128; impl \"naive\" takes any"},
        {"{\"kind\":\"attention\",\"seq_len\":64,\"d_head\":24,\"impl\":\"flash\"}", "d_head",
         "d_head is 24: flash (impl \"flash\") supports d_head 16, 32, 64, 80 and 128; impl \"naive\" takes any"},
        {"{\"kind\":\"attention\",\"impl\":\"naive\",\"seq_len\":[1,2,3,4,5,6,7,8,9,10,11],"
         "\"d_head\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],\"dtype\":[\"float32\",\"float16\",\"bfloat16\"]}",
         "d_head", "the sweep has 528 points (impl × dtype × d_head × seq_len: 1 × 3 × 16 × 11); the limit is 512"},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char field[128], message[512];
        int rc = validate_text(forms[i].spec, field, sizeof field, message, sizeof message);
        CHECK(rc != 0 && strcmp(field, forms[i].field) == 0 && strcmp(message, forms[i].message) == 0,
              "%s: field '%s' (want '%s'), message '%s' (want '%s')", forms[i].spec, field, forms[i].field, message,
              forms[i].message);
    }

    /* defaults are filled in */
    json_t *spec = json_pack("{s:s}", "kind", "numerics");
    const jobkind *kind = NULL;
    api_error err;
    MUST(spec_validate(spec, &kind, &err));
    CHECK(kind && strcmp(kind->name, "numerics") == 0, "kind found");
    CHECK(json_integer_value(json_object_get(spec, "count")) == 1000, "default count");
    CHECK(json_number_value(json_object_get(spec, "timeout_s")) == 3600, "default timeout_s from common.json");
    json_decref(spec);

    /* the schema subset: oneOf sweep fields, nested paths */
    json_t *schema = json_loads("{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
                                "\"n\":{\"oneOf\":[{\"type\":\"integer\",\"minimum\":1},"
                                "{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"integer\",\"minimum\":1}}]},"
                                "\"m\":{\"type\":\"object\",\"required\":[\"d\"],\"properties\":{\"d\":{\"type\":\"integer\"}}}}}",
                                0, NULL);
    static const struct {
        const char *instance, *field;
    } cases[] = {
        {"{\"n\":3}", NULL},         {"{\"n\":[1,2]}", NULL},     {"{\"n\":0}", "n"},
        {"{\"n\":[1,0]}", "n[1]"},   {"{\"n\":\"x\"}", "n"},     {"{\"m\":{}}", "m.d"},
        {"{\"m\":{\"d\":\"x\"}}", "m.d"}, {"{\"z\":1}", "z"},     {"[]", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *inst = json_loads(cases[i].instance, JSON_DECODE_ANY, NULL);
        api_error e = {0};
        int rc = jsonschema_validate(schema, inst, &e);
        if (!cases[i].field)
            CHECK(rc == 0, "%s valid: %s", cases[i].instance, e.message);
        else
            CHECK(rc != 0 && strcmp(e.field, cases[i].field) == 0, "%s: field '%s' want '%s'", cases[i].instance,
                  e.field, cases[i].field);
        json_decref(inst);
    }
    json_decref(schema);

    /* table renderings */
    json_t *table = json_loads("{\"columns\":[\"model\",\"fwd (ms)\",\"note\"],"
                               "\"rows\":[[\"small\",\"12.5 ± 0.1\",\"a|b\"],[\"medium\",3,\"x,\\\"y\\\"\"]]}",
                               0, NULL);
    char *md = api_table_markdown(table);
    char *csv = api_table_csv(table);
    CHECK(md && strcmp(md, "| model | fwd (ms) | note |\n|---|---:|---|\n| small | 12.5 ± 0.1 | a\\|b |\n"
                           "| medium | 3 | x,\"y\" |\n") == 0,
          "markdown:\n%s", md);
    /* csv: a "mean ± sd" column becomes two fields, the sd one named "<column> sd" */
    CHECK(csv && strcmp(csv, "model,fwd (ms),fwd (ms) sd,note\r\nsmall,12.5,0.1,a|b\r\n"
                             "medium,3,,\"x,\"\"y\"\"\"\r\n") == 0,
          "csv:\n%s", csv);
    free(md);
    free(csv);
    json_decref(table);

    /* a point with no figure ("-") is two empty fields; text that is not two
     * numbers around " ± " keeps its column whole */
    table = json_loads("{\"columns\":[\"bwd (ms)\",\"note\"],"
                       "\"rows\":[[\"-\",\"1 ± x\"],[\"0.25 ± 0.01\",\"2 ± 3 s\"],[null,\"-\"]]}",
                       0, NULL);
    csv = api_table_csv(table);
    CHECK(csv && strcmp(csv, "bwd (ms),bwd (ms) sd,note\r\n,,1 ± x\r\n0.25,0.01,2 ± 3 s\r\n,,-\r\n") == 0,
          "csv of mean ± sd with gaps:\n%s", csv);
    free(csv);
    json_decref(table);

    /* a column "mean_sd" names is two fields even where no row has a figure
     * (a forward-only benchmark job's backward): every job's csv has one layout */
    table = json_loads("{\"columns\":[\"fwd (ms)\",\"bwd (ms)\",\"note\"],\"mean_sd\":[\"fwd (ms)\",\"bwd (ms)\"],"
                       "\"rows\":[[\"0.25 ± 0.01\",\"-\",\"-\"],[\"-\",null,\"x\"]]}",
                       0, NULL);
    csv = api_table_csv(table);
    CHECK(csv && strcmp(csv, "fwd (ms),fwd (ms) sd,bwd (ms),bwd (ms) sd,note\r\n0.25,0.01,,,-\r\n,,,,x\r\n") == 0,
          "csv of a mean ± sd column without figures:\n%s", csv);
    free(csv);
    json_decref(table);
    return check_report("test_spec");
}
