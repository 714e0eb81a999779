-- 0001_init: jobs, their runs, the environment each ran in, and the
-- numerics job's accumulation results. Timestamps are ISO 8601 UTC text
-- ('2026-11-21T10:00:00.000Z'); JSON columns hold the wire objects.

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    kind             TEXT    NOT NULL,
    label            TEXT,
    spec             TEXT    NOT NULL,          -- JSON, as accepted (defaults filled in)
    status           TEXT    NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'succeeded', 'failed',
                                       'cancelled', 'interrupted')),
    created_at       TEXT    NOT NULL,
    started_at       TEXT,
    finished_at      TEXT,
    timeout_s        REAL    NOT NULL,
    progress         REAL    NOT NULL DEFAULT 0, -- fraction in [0, 1]
    progress_message TEXT,
    error            TEXT,                       -- why it failed / was interrupted
    worker           INTEGER,                    -- worker slot that ran it
    device           TEXT,                       -- 'cpu' or 'cuda:0'
    result           TEXT                        -- JSON summary from the runner
);
CREATE INDEX jobs_by_status ON jobs (status, id);
CREATE INDEX jobs_by_kind ON jobs (kind, id);

-- One row per run (a point of a sweep). Kind tables hang off runs.id.
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run_index   INTEGER NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('succeeded', 'failed')),
    error       TEXT,
    created_at  TEXT    NOT NULL,
    result      TEXT    NOT NULL,                -- JSON, the run as emitted
    UNIQUE (job_id, run_index)
);

-- Where a job ran: one row per job, written when it starts.
CREATE TABLE environments (
    job_id               INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    hostname             TEXT NOT NULL,
    lmperf_version       TEXT NOT NULL,
    device_kind          TEXT NOT NULL CHECK (device_kind IN ('cpu', 'cuda')),
    gpu_index            INTEGER,                -- NULL on the CPU worker
    device_name          TEXT NOT NULL,
    device_memory_bytes  INTEGER,
    multiprocessors      INTEGER,
    compute_capability   TEXT,
    clock_mhz            INTEGER,
    memory_clock_mhz     INTEGER,
    driver_version       TEXT,
    cuda_runtime_version TEXT,
    cublas_version       TEXT,
    recorded_at          TEXT NOT NULL
);

-- numerics job, accumulation experiment: one row per (accumulator, summand, cast).
CREATE TABLE numerics_accumulation (
    id                INTEGER PRIMARY KEY,
    run_id            INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    job_id            INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    accumulator_dtype TEXT    NOT NULL,
    summand_dtype     TEXT    NOT NULL,
    cast_kind         TEXT    NOT NULL CHECK (cast_kind IN ('none', 'implicit', 'explicit')),
    summand           REAL    NOT NULL,
    count             INTEGER NOT NULL,
    result            REAL    NOT NULL,
    exact             REAL    NOT NULL,          -- summand * count in exact arithmetic
    error             REAL    NOT NULL,          -- result - exact
    computed_on       TEXT    NOT NULL           -- 'cpu (emulated)' or 'cuda:N'
);
CREATE INDEX numerics_accumulation_by_job ON numerics_accumulation (job_id);
