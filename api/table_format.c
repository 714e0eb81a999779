/* Markdown and CSV renderings of a {"columns": [...], "rows": [[...]]} table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* A growable string. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
    int failed;
} text_buf;

static void append(text_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void append_str(text_buf *b, const char *s)
{
    append(b, s, strlen(s));
}

static char *finish(text_buf *b)
{
    if (b->failed) {
        free(b->data);
        return NULL;
    }
    if (!b->data)
        append_str(b, "");
    return b->data;
}

/* A cell as text: strings as they are, integers plainly, reals with the
 * column's decimals (>= 0) or else up to 6 significant digits, null as
 * empty. Returns new text. */
static char *cell_text(const json_t *cell, int decimals)
{
    char buf[64];
    if (json_is_string(cell))
        return strdup(json_string_value(cell));
    if (json_is_integer(cell))
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(cell));
    else if (json_is_real(cell) && decimals >= 0)
        snprintf(buf, sizeof buf, "%.*f", decimals, json_real_value(cell));
    else if (json_is_real(cell))
        snprintf(buf, sizeof buf, "%.6g", json_real_value(cell));
    else if (json_is_true(cell))
        snprintf(buf, sizeof buf, "true");
    else if (json_is_false(cell))
        snprintf(buf, sizeof buf, "false");
    else
        buf[0] = '\0';
    return strdup(buf);
}

/* Column col's decimals from the table's "decimals" array, -1 when it has none. */
static int column_decimals(const json_t *table, size_t col)
{
    const json_t *d = json_array_get(json_object_get(table, "decimals"), col);
    return json_is_integer(d) ? (int)json_integer_value(d) : -1;
}

int api_table_settle_decimals(json_t *table)
{
    json_t *decimals = json_object_get(table, "decimals");
    const json_t *rows = json_object_get(table, "rows");
    if (!json_is_array(decimals))
        return 0;
    for (size_t c = 0; c < json_array_size(decimals); c++) {
        if (!json_is_integer(json_array_get(decimals, c)))
            continue;
        int most = (int)json_integer_value(json_array_get(decimals, c));
        double smallest = 0;
        size_t i;
        const json_t *row;
        json_array_foreach(rows, i, row)
        {
            const json_t *cell = json_array_get(row, c);
            double v = json_is_number(cell) ? json_number_value(cell) : 0;
            v = v < 0 ? -v : v;
            if (v > 0 && (smallest == 0 || v < smallest))
                smallest = v;
        }
        /* as web/format.js msDigits: 2 decimals from 1 up, 3 from 0.1, else 4 */
        int want = smallest == 0 || smallest >= 1 ? 2 : smallest >= 0.1 ? 3 : 4;
        int keep = want < most ? want : most;
        /* a column of small values (a CPU's TFLOP/s, KiB in a MiB column): its smallest keeps
         * API_TABLE_SIGNIFICANT digits rather than reading 0.001 or 0.0 */
        if (smallest > 0 && smallest < pow(10.0, -keep) * pow(10.0, API_TABLE_SIGNIFICANT - 1)) {
            int needed = API_TABLE_SIGNIFICANT - 1 - (int)floor(log10(smallest));
            keep = needed > keep ? (needed < API_TABLE_MAX_DECIMALS ? needed : API_TABLE_MAX_DECIMALS) : keep;
        }
        if (json_array_set_new(decimals, c, json_integer(keep)))
            return -1;
    }
    return 0;
}

/* The words a numeric column writes where a row has no number: a point that
 * ran out of memory or failed (attention, memory), a missing figure (an em
 * dash: allreduce's failed rows), an accumulator past its range (numerics). */
static const char *const no_number_cells[] = {"", "—", "OOM", "failed", "N/A", "inf", "-inf", "nan"};

static int is_no_number(const char *s)
{
    for (size_t k = 0; k < sizeof no_number_cells / sizeof no_number_cells[0]; k++)
        if (strcmp(s, no_number_cells[k]) == 0)
            return 1;
    return 0;
}

/* A column is numeric (right-aligned) when it has a number and every other
 * non-null cell is a number, starts with a digit or sign (e.g. "12.3 ± 0.4")
 * or says why its row has none (no_number_cells). */
static int column_numeric(const json_t *rows, size_t col)
{
    size_t i;
    const json_t *row;
    int seen = 0;
    json_array_foreach(rows, i, row)
    {
        const json_t *cell = json_array_get(row, col);
        if (!cell || json_is_null(cell))
            continue;
        const char *s = json_string_value(cell);
        if (s && is_no_number(s))
            continue;
        if (!json_is_number(cell) && (!s || !strchr("0123456789-+.", s[0])))
            return 0;
        seen = 1;
    }
    return seen;
}

char *api_table_markdown(const json_t *table)
{
    const json_t *columns = json_object_get(table, "columns");
    const json_t *rows = json_object_get(table, "rows");
    size_t ncol = json_array_size(columns);
    text_buf b = {0};
    if (ncol == 0)
        return finish(&b);
    append_str(&b, "|");
    for (size_t c = 0; c < ncol; c++) {
        append_str(&b, " ");
        append_str(&b, json_string_value(json_array_get(columns, c)) ?: "");
        append_str(&b, " |");
    }
    append_str(&b, "\n|");
    for (size_t c = 0; c < ncol; c++)
        append_str(&b, column_numeric(rows, c) ? "---:|" : "---|");
    append_str(&b, "\n");
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row)
    {
        append_str(&b, "|");
        for (size_t c = 0; c < ncol; c++) {
            char *text = cell_text(json_array_get(row, c), column_decimals(table, c));
            append_str(&b, " ");
            for (char *p = text; p && *p; p++) { /* a pipe would end the cell, a line break the row */
                if (*p == '|')
                    append(&b, "\\|", 2);
                else if (*p == '\n' || *p == '\r')
                    append(&b, " ", 1);
                else
                    append(&b, p, 1);
            }
            append_str(&b, " |");
            free(text);
        }
        append_str(&b, "\n");
    }
    return finish(&b);
}

static void append_csv_field(text_buf *b, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        append_str(b, s);
        return;
    }
    append_str(b, "\"");
    for (const char *p = s; *p; p++)
        append(b, *p == '"' ? "\"\"" : p, *p == '"' ? 2 : 1);
    append_str(b, "\"");
}

static const char MEAN_SD_SEP[] = " ± "; /* as api_table_write_mean_sd writes a figure */

/* Splits "mean ± sd" text (a number, " ± ", a number, nothing after) into its
 * two numbers' texts. Returns 1 when cell is such text, else 0. */
static int split_mean_sd(const json_t *cell, char *mean, char *sd, size_t size)
{
    const char *s = json_string_value(cell), *sep = s ? strstr(s, MEAN_SD_SEP) : NULL;
    if (!sep || sep == s || (size_t)(sep - s) >= size)
        return 0;
    char *end;
    strtod(s, &end);
    if (end != sep)
        return 0;
    const char *tail = sep + strlen(MEAN_SD_SEP);
    strtod(tail, &end);
    if (end == tail || *end || strlen(tail) >= size)
        return 0;
    memcpy(mean, s, (size_t)(sep - s));
    mean[sep - s] = '\0';
    strcpy(sd, tail);
    return 1;
}

/* Whether cell is a raw mean ± sd figure: [mean, sd], two numbers. */
static int raw_mean_sd(const json_t *cell)
{
    return json_is_array(cell) && json_array_size(cell) == 2 && json_is_number(json_array_get(cell, 0)) &&
           json_is_number(json_array_get(cell, 1));
}

int api_table_mean_sd_decimals(double smallest)
{
    if (!(smallest > 0))
        return API_MEAN_SD_MIN_DECIMALS;
    int decimals = API_MEAN_SD_SIGNIFICANT - 1 - (int)floor(log10(smallest));
    return decimals < API_MEAN_SD_MIN_DECIMALS   ? API_MEAN_SD_MIN_DECIMALS
           : decimals > API_MEAN_SD_MAX_DECIMALS ? API_MEAN_SD_MAX_DECIMALS
                                                 : decimals;
}

int api_table_write_mean_sd(json_t *table)
{
    const json_t *columns = json_object_get(table, "columns");
    json_t *rows = json_object_get(table, "rows");
    size_t i;
    const json_t *listed;
    json_array_foreach(json_object_get(table, "mean_sd"), i, listed)
    {
        for (size_t c = 0; c < json_array_size(columns); c++) {
            if (!json_equal(json_array_get(columns, c), listed))
                continue;
            double smallest = 0;
            size_t r;
            json_t *row;
            json_array_foreach(rows, r, row)
            {
                const json_t *cell = json_array_get(row, c);
                double mean = raw_mean_sd(cell) ? fabs(json_number_value(json_array_get(cell, 0))) : 0;
                if (mean > 0 && (smallest == 0 || mean < smallest))
                    smallest = mean;
            }
            int decimals = api_table_mean_sd_decimals(smallest);
            json_array_foreach(rows, r, row)
            {
                const json_t *cell = json_array_get(row, c);
                if (!raw_mean_sd(cell))
                    continue;
                char text[96];
                snprintf(text, sizeof text, "%.*f%s%.*f", decimals, json_number_value(json_array_get(cell, 0)),
                         MEAN_SD_SEP, decimals, json_number_value(json_array_get(cell, 1)));
                if (json_array_set_new(row, c, json_string(text)))
                    return -1;
            }
        }
    }
    return 0;
}

/* A column is mean ± sd when the table's "mean_sd" names it (then even
 * when no row has a figure), or when at least one cell is such text and
 * every other non-null cell is a number, "-" or empty (a point with no
 * figure). */
static int column_mean_sd(const json_t *table, size_t col)
{
    const json_t *rows = json_object_get(table, "rows");
    const char *name = json_string_value(json_array_get(json_object_get(table, "columns"), col));
    size_t i;
    const json_t *listed;
    json_array_foreach(json_object_get(table, "mean_sd"), i, listed)
    {
        if (name && json_is_string(listed) && strcmp(json_string_value(listed), name) == 0)
            return 1;
    }
    const json_t *row;
    int seen = 0;
    json_array_foreach(rows, i, row)
    {
        const json_t *cell = json_array_get(row, col);
        char mean[64], sd[64];
        if (!cell || json_is_null(cell) || json_is_number(cell))
            continue;
        if (split_mean_sd(cell, mean, sd, sizeof mean))
            seen = 1;
        else if (!json_is_string(cell) || (strcmp(json_string_value(cell), "-") && json_string_value(cell)[0]))
            return 0;
    }
    return seen;
}

char *api_table_csv(const json_t *table)
{
    const json_t *columns = json_object_get(table, "columns");
    const json_t *rows = json_object_get(table, "rows");
    size_t ncol = json_array_size(columns);
    char *split = calloc(ncol ? ncol : 1, 1); /* column c's "mean ± sd" cells become two fields */
    if (!split)
        return NULL;
    for (size_t c = 0; c < ncol; c++)
        split[c] = (char)column_mean_sd(table, c);
    text_buf b = {0};
    for (size_t c = 0; c < ncol; c++) {
        const char *name = json_string_value(json_array_get(columns, c)) ?: "";
        if (c)
            append_str(&b, ",");
        append_csv_field(&b, name);
        if (split[c]) {
            char *sd_name = malloc(strlen(name) + 4);
            if (!sd_name) {
                b.failed = 1;
                break;
            }
            sprintf(sd_name, "%s sd", name);
            append_str(&b, ",");
            append_csv_field(&b, sd_name);
            free(sd_name);
        }
    }
    append_str(&b, "\r\n");
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row)
    {
        for (size_t c = 0; c < ncol; c++) {
            const json_t *cell = json_array_get(row, c);
            char mean[64], sd[64];
            if (c)
                append_str(&b, ",");
            if (split[c] && split_mean_sd(cell, mean, sd, sizeof mean)) {
                append_str(&b, mean);
                append_str(&b, ",");
                append_str(&b, sd);
                continue;
            }
            /* a split column's "-" (no figure) is two empty fields */
            int none = split[c] && json_is_string(cell) && !strcmp(json_string_value(cell), "-");
            char *text = none ? strdup("") : cell_text(cell, column_decimals(table, c));
            append_csv_field(&b, text ? text : "");
            free(text);
            if (split[c])
                append_str(&b, ",");
        }
        append_str(&b, "\r\n");
    }
    free(split);
    return finish(&b);
}

int api_table_format_known(const char *format)
{
    return strcmp(format, "md") == 0 || strcmp(format, "csv") == 0 || strcmp(format, "json") == 0;
}

char *api_table_render(json_t *table, const char *format)
{
    if (api_table_settle_decimals(table))
        return NULL;
    if (strcmp(format, "md") == 0)
        return api_table_markdown(table);
    if (strcmp(format, "csv") == 0)
        return api_table_csv(table);
    /* cells are the md/csv values (8.3462), not 8.3461999999999996 */
    return json_dumps(table, JSON_INDENT(2) | JSON_REAL_PRECISION(API_REAL_DIGITS));
}
