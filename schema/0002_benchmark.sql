-- 0002_benchmark: the benchmark job. One row per run (a point of a sweep)
-- with every config field and every statistic in its own column, the raw
-- per-step phase times in benchmark_samples, and benchmark_summary printing
-- like the CS336 write-ups' "Benchmark Summary" table. Times in ms.

CREATE TABLE benchmark_runs (
    run_id                 INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    job_id                 INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    status                 TEXT    NOT NULL CHECK (status IN ('succeeded', 'failed')),
    error                  TEXT,
    -- configuration
    model                  TEXT    NOT NULL,     -- preset name or the shape's name ('custom')
    d_model                INTEGER,
    d_ff                   INTEGER,
    num_layers             INTEGER,
    num_heads              INTEGER,
    d_head                 INTEGER,
    context_length         INTEGER NOT NULL,
    batch_size             INTEGER NOT NULL,
    vocab_size             INTEGER NOT NULL,
    precision              TEXT    NOT NULL CHECK (precision IN ('fp32', 'tf32', 'bf16', 'fp16')),
    mode                   TEXT    NOT NULL CHECK (mode IN ('forward', 'forward_backward', 'train_step')),
    attention              TEXT    NOT NULL,
    graphs                 INTEGER NOT NULL DEFAULT 0,   -- 0/1
    warmup_steps           INTEGER NOT NULL,
    measure_steps          INTEGER NOT NULL,
    seed                   INTEGER NOT NULL,
    parameters             INTEGER,
    -- statistics over the measured steps (warm-up excluded); std = sample std
    forward_mean_ms        REAL,
    forward_std_ms         REAL,
    forward_median_ms      REAL,
    forward_min_ms         REAL,
    forward_max_ms         REAL,
    backward_mean_ms       REAL,                 -- NULL in mode 'forward'
    backward_std_ms        REAL,
    backward_median_ms     REAL,
    backward_min_ms        REAL,
    backward_max_ms        REAL,
    optimizer_mean_ms      REAL,                 -- NULL unless mode 'train_step'
    optimizer_std_ms       REAL,
    optimizer_median_ms    REAL,
    optimizer_min_ms       REAL,
    optimizer_max_ms       REAL,
    total_mean_ms          REAL,
    total_std_ms           REAL,
    total_median_ms        REAL,
    total_min_ms           REAL,
    total_max_ms           REAL,
    tokens_per_s           REAL,
    flops_per_step         REAL,                 -- model FLOPs of the phases run
    achieved_tflops        REAL,
    mfu                    REAL,                 -- NULL where the peak is unknown (CPU)
    peak_memory_bytes      INTEGER,              -- measured by the tracked allocator
    estimated_memory_bytes INTEGER               -- preflight estimate
);
CREATE INDEX benchmark_runs_by_job ON benchmark_runs (job_id);
CREATE INDEX benchmark_runs_by_shape ON benchmark_runs (model, context_length, precision, mode);

-- Raw phase times per step; warm-up steps kept (warmup = 1).
CREATE TABLE benchmark_samples (
    run_id  INTEGER NOT NULL REFERENCES benchmark_runs (run_id) ON DELETE CASCADE,
    step    INTEGER NOT NULL,                    -- 0-based, warm-up steps first
    warmup  INTEGER NOT NULL CHECK (warmup IN (0, 1)),
    phase   TEXT    NOT NULL CHECK (phase IN ('forward', 'backward', 'optimizer', 'total')),
    ms      REAL    NOT NULL,
    PRIMARY KEY (run_id, step, phase)
);

-- The seeds' "Benchmark Summary": one row per run, mean ± std per phase.
CREATE VIEW benchmark_summary AS
SELECT r.job_id                                                   AS job_id,
       r.run_id                                                   AS run_id,
       r.model                                                    AS model,
       r.context_length                                           AS context_length,
       r.batch_size                                               AS batch_size,
       r.precision                                                AS precision,
       r.mode                                                     AS mode,
       CASE WHEN r.forward_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.forward_mean_ms, r.forward_std_ms) END   AS fwd_ms,
       CASE WHEN r.backward_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.backward_mean_ms, r.backward_std_ms) END AS bwd_ms,
       CASE WHEN r.optimizer_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.optimizer_mean_ms, r.optimizer_std_ms) END AS opt_ms,
       r.tokens_per_s                                             AS tokens_per_s,
       r.status                                                   AS status,
       r.error                                                    AS error
FROM benchmark_runs r
ORDER BY r.job_id, r.run_id;
