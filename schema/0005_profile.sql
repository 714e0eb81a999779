-- 0005_profile: the profile job. One row per run with the computed answers;
-- the kernel summary per range × kernel (nsys nvtx_kern_sum columns; the
-- range '(all)' is cuda_gpu_kern_sum); the per-op roofline; the Chrome trace
-- (served by GET /v1/jobs/{id}/trace). Times are ns unless named *_ms.

CREATE TABLE profile_runs (
    run_id                    INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    job_id                    INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    model                     TEXT    NOT NULL,
    context_length            INTEGER NOT NULL,
    batch_size                INTEGER NOT NULL,
    precision                 TEXT    NOT NULL,
    mode                      TEXT    NOT NULL CHECK (mode IN ('forward', 'train_step')),
    warmup_steps              INTEGER NOT NULL,
    profile_steps             INTEGER NOT NULL,
    kernel_count              INTEGER NOT NULL,   -- kernels traced (all profiled steps)
    kernel_time_ns            INTEGER NOT NULL,   -- their summed device time
    unattributed_kernels      INTEGER NOT NULL,   -- launched outside every range
    range_count               INTEGER NOT NULL,
    dropped_records           INTEGER NOT NULL,
    step_ms_unprofiled        REAL,               -- mean wall time per step, tracing off
    step_ms_profiled          REAL,               -- the same steps traced
    overhead_pct              REAL,
    forward_wall_ns           INTEGER,            -- mean forward range duration (CPU: push to pop)
    forward_gpu_span_ns       INTEGER,            -- mean forward range on the GPU: first kernel start to last end
    forward_kernel_ns         INTEGER,            -- mean kernel time inside forward
    top_forward_kernel        TEXT,
    top_forward_calls_per_forward REAL,
    top_forward_share_pct     REAL,
    top_forward_also_top_fwd_bwd INTEGER,         -- 0/1; NULL for forward-only runs
    top_fwd_bwd_kernel        TEXT,
    gemm_share_forward_pct    REAL,
    gemm_share_step_pct       REAL,               -- NULL for forward-only runs
    softmax_ns                INTEGER,            -- forward, per layer
    attention_matmul_ns       INTEGER,            -- scores + values GEMMs, forward, per layer
    attention_flop_ratio      REAL                -- matmul FLOPs / softmax FLOPs
);
CREATE INDEX profile_runs_by_job ON profile_runs (job_id);

CREATE TABLE profile_kernels (
    run_id          INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    range_name      TEXT    NOT NULL,   -- 'forward', 'layer 3', 'attention softmax', '(all)'
    range_instances INTEGER NOT NULL,   -- NVTX Inst
    kernel          TEXT    NOT NULL,   -- demangled
    is_gemm         INTEGER NOT NULL,
    instances       INTEGER NOT NULL,   -- Kern Inst
    total_ns        INTEGER NOT NULL,
    avg_ns          REAL    NOT NULL,
    med_ns          REAL    NOT NULL,
    min_ns          INTEGER NOT NULL,
    max_ns          INTEGER NOT NULL,
    std_ns          REAL    NOT NULL,
    share_pct       REAL    NOT NULL,   -- of all kernel time inside the range
    PRIMARY KEY (run_id, range_name, kernel)
) WITHOUT ROWID;

CREATE TABLE profile_noteworthy (       -- non-GEMM kernels above 2% of the step
    run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    kernel     TEXT    NOT NULL,
    share_pct  REAL    NOT NULL,
    PRIMARY KEY (run_id, kernel)
) WITHOUT ROWID;

CREATE TABLE profile_roofline (
    run_id        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    op            TEXT    NOT NULL,     -- 'attention softmax', 'forward GEMMs', ...
    instances     INTEGER NOT NULL,
    flops         REAL    NOT NULL,     -- per instance, by formula
    bytes         REAL    NOT NULL,     -- per instance, by formula (float32 storage)
    time_ns       REAL    NOT NULL,     -- kernel time per instance
    tflops        REAL,
    gbps          REAL,
    peak_tflops   REAL,                 -- device ceiling (NULL when unknown)
    peak_gbps     REAL,
    bound         TEXT,                 -- 'compute' | 'memory' by arithmetic intensity vs the ridge
    PRIMARY KEY (run_id, op)
) WITHOUT ROWID;

CREATE TABLE profile_traces (
    run_id  INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    trace   TEXT NOT NULL              -- Chrome Trace Event Format JSON
);
