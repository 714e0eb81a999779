/* Unit test: api_table_settle_decimals (api.h) and the markdown it prints: a
 * column's decimals from its smallest value, capped by the table's "decimals",
 * except that a column of small values keeps API_TABLE_SIGNIFICANT significant
 * digits (a CPU's TFLOP/s, a few KiB in a MiB column); a numeric column's
 * alignment beside OOM / failed / — / inf cells; api_table_write_mean_sd's
 * "mean ± sd" text, one count of decimals per column. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../engine/check.h"
#include "api.h"

/* The settled decimals of a one-column table of values (JSON text) whose
 * producer gives most (-1: null). */
static int settled(const char *values, int most)
{
    json_t *rows = json_array(), *vals = json_loads(values, 0, NULL);
    size_t i;
    json_t *v;
    json_array_foreach(vals, i, v) json_array_append_new(rows, json_pack("[O]", v));
    json_t *table = json_pack("{s:[s], s:o, s:[o]}", "columns", "x", "rows", rows, "decimals",
                              most < 0 ? json_null() : json_integer(most));
    MUST(api_table_settle_decimals(table));
    const json_t *d = json_array_get(json_object_get(table, "decimals"), 0);
    int out = json_is_integer(d) ? (int)json_integer_value(d) : -1;
    json_decref(table);
    json_decref(vals);
    return out;
}

int main(void)
{
    /* the scale the producer meant: its most, or fewer (2 from 1 up, 3 from 0.1, else 4) */
    CHECK(settled("[150.123, 12.5]", 3) == 2, "GPU-scale TFLOP/s: 2 decimals");
    CHECK(settled("[0.5, 0.75]", 3) == 3, "0.5: 3 decimals");
    CHECK(settled("[59, 2074]", 0) == 0, "tokens/s: none");
    CHECK(settled("[0, 0]", 3) == 2, "all zero: 2, within the most");
    CHECK(settled("[1.5, 2.5]", -1) == -1, "no decimals given: none settled");
    /* small values: enough decimals for 2 significant digits, past the most, at most 8 */
    CHECK(settled("[0.000801, 0.003112]", 3) == 5, "CPU-scale TFLOP/s: 0.00080 (got %d)", settled("[0.000801, 0.003112]", 3));
    CHECK(settled("[0.04, 0.3]", 1) == 3, "KiB in a MiB column: 0.040 (got %d)", settled("[0.04, 0.3]", 1));
    CHECK(settled("[5.2, 80]", 0) == 1, "a rate under 10: one decimal (got %d)", settled("[5.2, 80]", 0));
    CHECK(settled("[0.099, 4]", 1) == 3, "0.099 at 1 decimal would read 0.1: 0.099 (got %d)", settled("[0.099, 4]", 1));
    CHECK(settled("[1e-12]", 3) == API_TABLE_MAX_DECIMALS, "tiny: capped at %d", API_TABLE_MAX_DECIMALS);

    /* the markdown prints the settled decimals */
    json_t *table = json_loads("{\"columns\": [\"TFLOP/s\"], \"rows\": [[0.000801], [0.003112]], \"decimals\": [3]}", 0,
                               NULL);
    char *md = api_table_render(table, "md");
    CHECK(md && strstr(md, "| 0.00080 |") && strstr(md, "| 0.00311 |"), "markdown of small TFLOP/s:\n%s", md ? md : "");
    free(md);
    json_decref(table);

    /* a numeric column stays right-aligned where rows say why they have no number (an OOM or failed
     * attention point, allreduce's em dash, a numerics accumulator past its range); a column of only
     * such words, or of text, is left-aligned */
    table = json_loads("{\"columns\": [\"naive fwd (ms)\", \"median ms\", \"result\", \"none\", \"status\"], \"rows\": ["
                       "[0.0469, 0.0222, 10.0001, \"OOM\", \"succeeded\"], [\"OOM\", \"\u2014\", \"inf\", \"failed\", \"OOM\"],"
                       "[\"failed\", 3.05, 9.95, null, \"failed: flash needs a GPU\"]]}",
                       0, NULL);
    md = api_table_render(table, "md");
    CHECK(md && strstr(md, "\n|---:|---:|---:|---|---|\n"), "alignment with OOM, failed, \u2014 and inf cells:\n%s", md ? md : "");
    free(md);
    json_decref(table);

    /* a mean ± sd column's decimals: 3 significant digits of its smallest non-zero mean, 2 to 4 */
    CHECK(api_table_mean_sd_decimals(12.73) == 2, "12.73 ms: 2");
    CHECK(api_table_mean_sd_decimals(4.44) == 2, "4.44 ms: 2");
    CHECK(api_table_mean_sd_decimals(1.0) == 2, "1 ms: 2");
    CHECK(api_table_mean_sd_decimals(0.5) == 3, "0.5 ms: 3");
    CHECK(api_table_mean_sd_decimals(0.1) == 3, "0.1 ms: 3");
    CHECK(api_table_mean_sd_decimals(0.094) == 4, "0.094 ms: 4");
    CHECK(api_table_mean_sd_decimals(1e-6) == API_MEAN_SD_MAX_DECIMALS, "tiny: capped at %d", API_MEAN_SD_MAX_DECIMALS);
    CHECK(api_table_mean_sd_decimals(0) == API_MEAN_SD_MIN_DECIMALS, "no mean: %d", API_MEAN_SD_MIN_DECIMALS);
    CHECK(api_table_mean_sd_decimals(2500) == API_MEAN_SD_MIN_DECIMALS, "seconds of step: %d", API_MEAN_SD_MIN_DECIMALS);

    /* raw [mean, sd] cells of a "mean_sd" column written with one count of decimals per column, from the smallest
     * non-zero mean (a zero mean does not count); "-", null and a column not named stay as they are */
    table = json_loads("{\"columns\": [\"fwd\", \"opt\", \"raw\"], \"mean_sd\": [\"fwd\", \"opt\"], \"rows\": ["
                       "[[12.734, 0.061], [0.0, 0.0], [1, 2]], [[4.4449, 0.08], [0.094, 0.0031], null],"
                       "[\"-\", [0.25, 0.01], [3, 4]], [null, \"-\", [5, 6]]]}",
                       0, NULL);
    MUST(api_table_write_mean_sd(table));
    json_t *want = json_loads("[[\"12.73 ± 0.06\", \"0.0000 ± 0.0000\", [1, 2]], [\"4.44 ± 0.08\", \"0.0940 ± 0.0031\", null],"
                              "[\"-\", \"0.2500 ± 0.0100\", [3, 4]], [null, \"-\", [5, 6]]]",
                              0, NULL);
    CHECK(json_equal(json_object_get(table, "rows"), want), "mean ± sd cells written: %s",
          json_dumps(json_object_get(table, "rows"), JSON_COMPACT));
    json_decref(want);
    /* written twice: the text stays */
    MUST(api_table_write_mean_sd(table));
    CHECK(!strcmp(json_string_value(json_array_get(json_array_get(json_object_get(table, "rows"), 0), 0)), "12.73 ± 0.06"),
          "written again: unchanged");
    /* csv splits what was written into two numeric fields with the column's decimals */
    char *csv = api_table_render(table, "csv");
    CHECK(csv && strstr(csv, "12.73,0.06,0.0000,0.0000,") && strstr(csv, ",,0.2500,0.0100,"), "csv:\n%s", csv ? csv : "");
    free(csv);
    json_decref(table);

    if (check_failures)
        return 1;
    printf("table_format: ok\n");
    return 0;
}
