/* Unit test: the store applies migrations, holds its database against a
 * second daemon, survives a restart (running jobs become interrupted, queued
 * ones come back in order), enforces state transitions, and lets a read-only
 * connection read while it writes and after it closes (persistent WAL). */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../engine/check.h"
#include "jobkind.h"
#include "store.h"

static char db_path[256];

static json_t *spec_of(const char *kind)
{
    return json_pack("{s:s, s:i}", "kind", kind, "timeout_s", 60);
}

static int count_rows(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    int n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

static const char *status_of(store *s, int64_t id, char *buf, size_t len)
{
    char kind[32];
    if (store_job_state(s, id, kind, sizeof kind, buf, len) != STORE_OK)
        snprintf(buf, len, "(none)");
    return buf;
}

/* Whether store_open of db_path fails with "in use" in a child process (as a
 * second daemon would). In another process, not this one: a store refused
 * here would close a descriptor of the file, and that drops this process's
 * SQLite locks on it (POSIX fcntl semantics; store.h: once per process). */
static int second_process_refused(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        char err[256] = "";
        store *second = NULL;
        int refused = store_open(db_path, &second, err, sizeof err) != 0 && !second && strstr(err, "in use");
        if (!refused)
            fprintf(stderr, "second store: %s\n", second ? "opened" : err);
        _exit(refused ? 0 : 1);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void)
{
    snprintf(db_path, sizeof db_path, "/tmp/lmperf-test-store-%d.db", (int)getpid());
    char err[256], status[32];
    store *s = NULL;
    MUST(store_open(db_path, &s, err, sizeof err));
    CHECK(store_schema_version(s) == store_migrations_known(), "user_version %d, migrations %d",
          store_schema_version(s), store_migrations_known());
    /* one store per database: a second daemon (another process) is refused, saying why */
    CHECK(second_process_refused(), "a store in a second process on an open database was not refused");
    CHECK(store_migrations_known() >= 1, "at least one migration embedded");

    /* a reader on its own connection sees committed writes while the store is open */
    sqlite3 *reader = NULL;
    MUST(sqlite3_open_v2(db_path, &reader, SQLITE_OPEN_READONLY, NULL));
    char mode[16] = "";
    {
        sqlite3_stmt *st;
        sqlite3_prepare_v2(reader, "PRAGMA journal_mode", -1, &st, NULL);
        if (sqlite3_step(st) == SQLITE_ROW)
            snprintf(mode, sizeof mode, "%s", sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    CHECK(strcmp(mode, "wal") == 0, "journal_mode is %s, want wal", mode);

    int64_t ids[4];
    for (int i = 0; i < 4; i++) {
        json_t *spec = spec_of("numerics");
        MUST(store_job_insert(s, "numerics", i == 0 ? "first" : NULL, 60, spec, &ids[i]));
        json_decref(spec);
    }
    CHECK(count_rows(reader, "SELECT count(*) FROM jobs WHERE status = 'queued'") == 4,
          "reader sees 4 queued jobs");

    /* transitions */
    CHECK(store_job_start(s, ids[0], 0, "cpu") == STORE_OK, "queued -> running");
    CHECK(store_job_start(s, ids[0], 0, "cpu") == STORE_CONFLICT, "running -> running is a conflict");
    CHECK(store_job_cancel_queued(s, ids[0]) == STORE_CONFLICT, "cannot cancel-as-queued a running job");
    CHECK(store_job_cancel_queued(s, 999999) == STORE_NOT_FOUND, "cancel of an absent job");
    CHECK(store_job_cancel_queued(s, ids[1]) == STORE_OK, "cancel a queued job");
    CHECK(strcmp(status_of(s, ids[1], status, sizeof status), "cancelled") == 0, "status %s", status);
    CHECK(store_job_start(s, ids[1], 0, "cpu") == STORE_CONFLICT, "a cancelled job cannot start");
    MUST(store_job_progress(s, ids[0], 0.5, "half"));
    json_t *run = json_pack("{s:s, s:n, s:i}", "status", "succeeded", "error", "value", 7);
    CHECK(store_run_add(s, NULL, ids[0], 0, NULL, run) == STORE_OK, "store a run");
    CHECK(store_run_add(s, NULL, ids[0], 0, NULL, run) == STORE_ERROR, "the same run index twice fails");
    json_decref(run);

    json_t *job = NULL;
    MUST(store_job_get(s, ids[0], 1, &job));
    CHECK(json_real_value(json_object_get(json_object_get(job, "progress"), "fraction")) == 0.5, "progress");
    CHECK(json_array_size(json_object_get(job, "runs")) == 1, "one run");
    CHECK(json_integer_value(json_object_get(json_array_get(json_object_get(job, "runs"), 0), "value")) == 7,
          "run payload round-trips");
    json_decref(job);
    CHECK(store_job_get(s, 424242, 1, &job) == STORE_NOT_FOUND, "get an absent job");

    json_t *list = NULL;
    MUST(store_job_list(s, NULL, "queued", 10, 0, &list));
    CHECK(json_integer_value(json_object_get(list, "total")) == 2, "2 queued");
    CHECK(json_integer_value(json_object_get(json_array_get(json_object_get(list, "jobs"), 0), "id")) == ids[3],
          "newest first");
    json_decref(list);
    MUST(store_job_list(s, "numerics", NULL, 1, 1, &list));
    CHECK(json_array_size(json_object_get(list, "jobs")) == 1 && json_integer_value(json_object_get(list, "total")) == 4,
          "paging");
    json_decref(list);

    /* "crash": close without finishing the running job, reopen */
    store_close(s);
    s = NULL;
    CHECK(access(db_path, F_OK) == 0, "database file exists");
    char wal[300];
    snprintf(wal, sizeof wal, "%s-wal", db_path);
    CHECK(access(wal, F_OK) == 0, "the WAL file persists after close");
    CHECK(count_rows(reader, "SELECT count(*) FROM jobs") == 4, "reader still works after the writer closed");

    MUST(store_open(db_path, &s, err, sizeof err));
    int64_t *queued = NULL;
    size_t queued_count = 0;
    MUST(store_recover(s, &queued, &queued_count));
    CHECK(queued_count == 2 && queued[0] == ids[2] && queued[1] == ids[3], "queued jobs recovered in order");
    free(queued);
    CHECK(strcmp(status_of(s, ids[0], status, sizeof status), "interrupted") == 0,
          "running job became interrupted, got %s", status);
    CHECK(store_job_finish(s, ids[0], "succeeded", NULL, NULL) == STORE_CONFLICT,
          "an interrupted job cannot finish");
    CHECK(store_schema_version(s) == store_migrations_known(), "migrations not re-applied");
    CHECK(count_rows(reader, "SELECT count(*) FROM runs") == 1, "runs survive the restart");

    MUST(store_job_start(s, ids[2], 0, "cpu"));
    json_t *result = json_pack("{s:i}", "answer", 42);
    MUST(store_job_finish(s, ids[2], "succeeded", NULL, result));
    json_decref(result);
    MUST(store_job_get(s, ids[2], 1, &job));
    CHECK(json_integer_value(json_object_get(json_object_get(job, "result"), "answer")) == 42, "result stored");
    CHECK(json_real_value(json_object_get(json_object_get(job, "progress"), "fraction")) == 1.0,
          "succeeded means progress 1");
    json_decref(job);

    json_t *counts = NULL;
    MUST(store_job_counts(s, &counts));
    CHECK(json_integer_value(json_object_get(counts, "interrupted")) == 1 &&
              json_integer_value(json_object_get(counts, "succeeded")) == 1 &&
              json_integer_value(json_object_get(counts, "queued")) == 1 &&
              json_integer_value(json_object_get(counts, "cancelled")) == 1,
          "counts by status");
    json_decref(counts);
    CHECK(count_rows(reader, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'") == 1,
          "integrity_check ok");

    store_close(s);
    store_close(NULL);
    sqlite3_close(reader);
    unlink(db_path);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", db_path);
    unlink(wal);
    return check_report("test_store");
}
