/* Options as data: each row has a flag, an environment variable, a default and
 * a parser. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum option_type { OPT_STRING, OPT_INT, OPT_UINT, OPT_SIZE, OPT_FLAG } option_type;

typedef struct option_row {
    const char *flag;
    const char *env;
    option_type type;
    size_t offset;
    size_t size;      /* strings: buffer size */
    long long min, max;
    const char *default_text;
    const char *help;
} option_row;

#define STR(field) OPT_STRING, offsetof(daemon_config, field), sizeof(((daemon_config *)0)->field), 0, 0
#define INT(field, lo, hi) OPT_INT, offsetof(daemon_config, field), sizeof(int), lo, hi
#define UINT(field, lo, hi) OPT_UINT, offsetof(daemon_config, field), sizeof(unsigned), lo, hi
#define SIZE(field, lo, hi) OPT_SIZE, offsetof(daemon_config, field), sizeof(size_t), lo, hi
#define FLAG(field) OPT_FLAG, offsetof(daemon_config, field), sizeof(int), 0, 1

static const option_row options[] = {
    {"--host", "LMPERF_HOST", STR(host), "127.0.0.1", "listen address (IPv4, or localhost for 127.0.0.1)"},
    {"--port", "LMPERF_PORT", INT(port, 0, 65535), "8080", "listen port; 0 picks a free one"},
    {"--db", "LMPERF_DB", STR(db_path), "./lmperf.db", "SQLite database file"},
    {"--web-root", "LMPERF_WEB_ROOT", STR(web_root), NULL, "directory served at / (default: the source tree's web/)"},
    {"--token", "LMPERF_TOKEN", STR(token), "", "bearer token required for POST and DELETE"},
    {"--port-file", "LMPERF_PORT_FILE", STR(port_file), "", "write the bound port to this file"},
    {"--cpu-only", "LMPERF_CPU_ONLY", FLAG(cpu_only), "0", "one CPU worker even when GPUs are visible"},
    {"--max-gpus", "LMPERF_MAX_GPUS", INT(max_gpus, 0, 1024), "0", "use at most this many GPUs (0: all)"},
    {"--max-queued", "LMPERF_MAX_QUEUED", INT(max_queued, 1, 1000000), "10000", "queued jobs beyond this get 503"},
    {"--max-body", "LMPERF_MAX_BODY", SIZE(max_body_bytes, 1024, 1ll << 30), "1048576", "request body limit in bytes"},
    {"--http-timeout", "LMPERF_HTTP_TIMEOUT", UINT(http_timeout_s, 1, 3600), "30", "idle connection timeout in seconds"},
    {"--http-threads", "LMPERF_HTTP_THREADS", UINT(http_threads, 1, 64), "4", "HTTP worker threads"},
    {"--verbose", "LMPERF_VERBOSE", FLAG(verbose), "0", "debug logging"},
};
#define OPTION_COUNT (sizeof options / sizeof options[0])

/* Sets o from value, given by the flag or, when from_env, by o's
 * environment variable (which the message names then, beside the flag).
 * Returns 0 or -1 with a message in errbuf. */
static int set_option(daemon_config *config, const option_row *o, const char *value, int from_env, char *errbuf,
                      size_t errlen)
{
    char *field = (char *)config + o->offset, source[64];
    if (from_env)
        snprintf(source, sizeof source, "%s (%s)", o->env, o->flag);
    else
        snprintf(source, sizeof source, "%s", o->flag);
    if (o->type == OPT_STRING) {
        if (strlen(value) >= o->size) {
            snprintf(errbuf, errlen, "%s: value too long (at most %zu bytes)", source, o->size - 1);
            return -1;
        }
        memcpy(field, value, strlen(value) + 1);
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    /* flags: 0/1, and the words people write in environment files, either way */
    static const char *const flag_words[][2] = {{"false", "true"}, {"no", "yes"}, {"off", "on"}};
    for (size_t w = 0; o->type == OPT_FLAG && w < sizeof flag_words / sizeof flag_words[0]; w++)
        for (int on = 0; on <= 1; on++)
            if (strcasecmp(value, flag_words[w][on]) == 0)
                v = on, end = "", errno = 0;
    if (o->type == OPT_FLAG && (errno || end == value || *end || v < o->min || v > o->max)) {
        snprintf(errbuf, errlen, "%s: '%s' is not 0, 1, true, false, yes, no, on or off", source, value);
        return -1;
    }
    if (errno || end == value || *end || v < o->min || v > o->max) {
        snprintf(errbuf, errlen, "%s: '%s' is not an integer from %lld to %lld", source, value, o->min, o->max);
        return -1;
    }
    if (o->type == OPT_SIZE)
        *(size_t *)field = (size_t)v;
    else if (o->type == OPT_UINT)
        *(unsigned *)field = (unsigned)v;
    else
        *(int *)field = (int)v;
    return 0;
}

/* The web/ directory of the source tree this binary was built from, or of
 * an install next to it. */
static void default_web_root(daemon_config *config)
{
    static const char *const candidates[] = {LMPERF_SOURCE_ROOT "/web", "./web", "/usr/local/share/lmperf/web"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (access(candidates[i], R_OK) == 0) {
            snprintf(config->web_root, sizeof config->web_root, "%s", candidates[i]);
            return;
        }
    }
}

void config_usage(const char *program)
{
    printf("usage: %s [options]            serve the HTTP API and run jobs\n"
           "       %s run " CONFIG_RUN_ARGS "\n"
           "              run one job in-process, print the result JSON (or its table; record it in FILE)\n"
           "       %s submit " CONFIG_SUBMIT_ARGS "\n"
           "              post a job to a running lmperfd, follow it to its end, print its result JSON (or table);\n"
           "              URL [LMPERF_URL] default: where LMPERF_HOST and LMPERF_PORT below point (submit takes no\n"
           "              --host or --port: a daemon started with --port 8081 is --url http://127.0.0.1:8081);\n"
           "              Ctrl-C cancels the job\n"
           "       run and submit: --table prints the job's summary table, --pivot precision a benchmark job's\n"
           "              by precision (a row per point, a total and a speedup column per precision);\n"
           "              " CONFIG_SPEC_STDIN "; run --help, submit --help: their usage alone\n"
           "       %s version | --version          print the version\n\n"
           "options (environment variable in brackets):\n",
           program, program, program, program);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        /* flags default to off; an empty default (no token, no port file) is not shown */
        int show_default = options[i].default_text && options[i].default_text[0] && options[i].type != OPT_FLAG;
        printf("  %-16s %s [%s]%s%s\n", options[i].flag, options[i].help, options[i].env,
               show_default ? " default: " : "", show_default ? options[i].default_text : "");
    }
}

/* Checks across the parsed options, before anything is opened: the listen
 * address is an IPv4 address ("localhost" becomes 127.0.0.1). Returns 0 or
 * -1 with a message in errbuf. */
static int config_check(daemon_config *config, char *errbuf, size_t errlen)
{
    if (strcasecmp(config->host, "localhost") == 0)
        snprintf(config->host, sizeof config->host, "127.0.0.1");
    struct in_addr addr;
    if (inet_pton(AF_INET, config->host, &addr) != 1) {
        snprintf(errbuf, errlen, "--host: '%s' is not an IPv4 address (e.g. 127.0.0.1, 0.0.0.0) or localhost",
                 config->host);
        return -1;
    }
    return 0;
}

int config_check_web_root(const daemon_config *config, char *errbuf, size_t errlen)
{
    struct stat st;
    const char *why = !config->web_root[0]                 ? NULL /* none: no web page */
                      : stat(config->web_root, &st) != 0 ? strerror(errno)
                      : !S_ISDIR(st.st_mode)             ? "not a directory"
                                                         : NULL;
    if (why) {
        snprintf(errbuf, errlen, "--web-root: %s: %s (the web/ directory of the source tree, or \"\" for none)",
                 config->web_root, why);
        return -1;
    }
    return 0;
}

int config_parse(daemon_config *config, int argc, char **argv, char *errbuf, size_t errlen)
{
    memset(config, 0, sizeof *config);
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (options[i].default_text && set_option(config, &options[i], options[i].default_text, 0, errbuf, errlen))
            return -1;
    default_web_root(config);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const char *env = getenv(options[i].env);
        if (env && env[0] && set_option(config, &options[i], env, 1, errbuf, errlen))
            return -1;
    }
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            config_usage(argv[0]);
            return 1;
        }
        const option_row *o = NULL;
        const char *value = NULL;
        for (size_t i = 0; i < OPTION_COUNT && !o; i++) {
            size_t len = strlen(options[i].flag);
            if (strncmp(argv[a], options[i].flag, len) == 0 && (argv[a][len] == '\0' || argv[a][len] == '=')) {
                o = &options[i];
                value = argv[a][len] == '=' ? argv[a] + len + 1 : NULL;
            }
        }
        if (!o && a == 1 && argv[a][0] != '-') {
            snprintf(errbuf, errlen, "unknown command %s: the commands are run, submit and version; the daemon "
                     "itself takes options only (see --help)", argv[a]);
            return -1;
        }
        if (!o) {
            snprintf(errbuf, errlen, "%s %s (see --help)", argv[a][0] == '-' ? "unknown option" : "unexpected argument",
                     argv[a]);
            return -1;
        }
        if (!value && o->type == OPT_FLAG)
            value = "1";
        else if (!value && a + 1 < argc)
            value = argv[++a];
        else if (!value) {
            snprintf(errbuf, errlen, "%s needs a value", o->flag);
            return -1;
        }
        if (set_option(config, o, value, 0, errbuf, errlen))
            return -1;
    }
    return config_check(config, errbuf, errlen);
}
