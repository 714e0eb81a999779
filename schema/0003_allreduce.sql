-- 0003_allreduce: the allreduce job. One row per (world size, size) point,
-- failed points included (status, error), and the per-iteration times.

CREATE TABLE allreduce_runs (
    id             INTEGER PRIMARY KEY,
    run_id         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    job_id         INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    backend        TEXT    NOT NULL CHECK (backend IN ('nccl', 'mpi')),
    dtype          TEXT    NOT NULL,
    world_size     INTEGER NOT NULL,             -- ranks
    size_bytes     INTEGER NOT NULL,             -- per rank
    size_label     TEXT    NOT NULL,             -- as written in the spec: '1MB', '1GiB', '4096'
    warmup         INTEGER NOT NULL,
    iterations     INTEGER NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('succeeded', 'failed')),
    error          TEXT,
    median_ms      REAL,                         -- per iteration
    mean_ms        REAL,
    min_ms         REAL,
    max_ms         REAL,
    algbw_gbps     REAL,                         -- size_bytes / median, GB/s (10^9)
    busbw_gbps     REAL,                         -- algbw * 2(n-1)/n (nccl-tests)
    correct        INTEGER CHECK (correct IN (0, 1)),
    mismatches     INTEGER,                      -- wrong elements, summed over ranks
    devices        TEXT,                         -- 'cuda:0,cuda:1' or 'cpu x2 (mpirun)'
    oversubscribed INTEGER NOT NULL DEFAULT 0    -- mpi: more ranks than cores
);
CREATE INDEX allreduce_runs_by_job ON allreduce_runs (job_id, size_bytes, world_size);

CREATE TABLE allreduce_samples (
    run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration INTEGER NOT NULL,                  -- 0-based, after warm-up
    ms        REAL    NOT NULL,
    PRIMARY KEY (run_id, iteration)
);

-- The seed's table: duration per backend x size x world size, with the GPU.
CREATE VIEW allreduce_summary AS
SELECT a.job_id, j.label, a.backend, a.size_label, a.size_bytes, a.world_size,
       round(a.median_ms, 4) AS median_ms, round(a.mean_ms, 4) AS mean_ms,
       round(a.min_ms, 4) AS min_ms, round(a.max_ms, 4) AS max_ms,
       round(a.algbw_gbps, 2) AS algbw_gbps, round(a.busbw_gbps, 2) AS busbw_gbps,
       a.correct, a.status, a.error, e.device_name, j.created_at
FROM allreduce_runs a
JOIN jobs j ON j.id = a.job_id
LEFT JOIN environments e ON e.job_id = a.job_id;
