/* Daemon configuration: defaults, command-line options and environment, from
 * one table of options. */
#ifndef DAEMON_CONFIG_H
#define DAEMON_CONFIG_H

#include <stddef.h>

typedef struct daemon_config {
    char host[64];          /* listen address, IPv4 dotted quad */
    int port;               /* 0: any free port */
    char db_path[512];      /* SQLite file */
    char web_root[512];     /* static files served at / */
    char token[256];        /* bearer token for POST/DELETE; "" = none */
    char port_file[512];    /* write the bound port here ("" = don't) */
    int cpu_only;           /* one CPU worker even with GPUs */
    int max_gpus;           /* 0: all visible */
    int max_queued;         /* more queued jobs than this: 503 */
    size_t max_body_bytes;
    unsigned http_timeout_s;
    unsigned http_threads;
    int verbose;
} daemon_config;

/* Fills defaults, then LMPERF_* environment variables, then argv (argv wins),
 * then checks the whole configuration (host: an IPv4 address; "localhost"
 * is stored as 127.0.0.1), so that a bad one is refused before the database
 * is touched. Returns 0, 1 when --help was printed, or -1 with a message in
 * errbuf. */
int config_parse(daemon_config *config, int argc, char **argv, char *errbuf, size_t errlen);
void config_usage(const char *program);
/* The daemon's check of what it serves: the web root, when one is set, is a
 * directory (a missing one would leave the web page a 404). Returns 0 or -1
 * with a message in errbuf. */
int config_check_web_root(const daemon_config *config, char *errbuf, size_t errlen);

/* The arguments of the sub-commands, for their usage lines and --help
 * (--pivot: the pivots of jobkinds.c, a benchmark job's "precision"). */
#define CONFIG_RUN_ARGS "SPEC.json [--cpu-only] [--db FILE] [--table md|csv|json [--pivot precision]]"
#define CONFIG_SUBMIT_ARGS                                                                                           \
    "SPEC.json [--url http://HOST:PORT] [--token TOKEN] [--table md|csv|json [--pivot precision]] [--no-wait] "      \
    "[--quiet]"
#define CONFIG_SPEC_STDIN "(SPEC.json may be - for stdin)"

#endif
