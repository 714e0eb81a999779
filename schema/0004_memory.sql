-- 0004_memory: the memory job. One row per run with the peaks, the measured
-- parts beside the analytic estimate; the largest allocations; the full event
-- list; and memory_summary, the CS336 write-ups' table (context × peak
-- inference / peak train step, per precision). Bytes are bytes; *_mib views
-- divide by 2^20.

CREATE TABLE memory_runs (
    run_id                     INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    job_id                     INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    model                      TEXT    NOT NULL,
    d_model                    INTEGER NOT NULL,
    num_layers                 INTEGER NOT NULL,
    num_heads                  INTEGER NOT NULL,
    context_length             INTEGER NOT NULL,
    batch_size                 INTEGER NOT NULL,
    vocab_size                 INTEGER NOT NULL,
    precision                  TEXT    NOT NULL,
    mode                       TEXT    NOT NULL CHECK (mode IN ('inference', 'train_step')),
    steps                      INTEGER NOT NULL,
    parameters                 INTEGER NOT NULL,   -- count
    peak_allocated_bytes       INTEGER NOT NULL,
    peak_phase                 TEXT,               -- init, forward, backward, optimizer
    peak_init_bytes            INTEGER,
    peak_forward_bytes         INTEGER,
    peak_backward_bytes        INTEGER,
    peak_optimizer_bytes       INTEGER,
    parameter_bytes            INTEGER NOT NULL,   -- live at the end
    gradient_bytes             INTEGER NOT NULL,
    optimizer_state_bytes      INTEGER NOT NULL,
    activation_bytes_at_peak   INTEGER NOT NULL,   -- activation + temporary at the peak
    residual_stream_bytes      INTEGER NOT NULL,   -- one (B, T, d) float32 tensor
    estimated_total_bytes      INTEGER NOT NULL,
    estimated_activation_bytes INTEGER NOT NULL,
    reserved_peak_bytes        INTEGER,            -- the CUDA pool's high-water mark (NULL on the CPU)
    event_count                INTEGER NOT NULL
);
CREATE INDEX memory_runs_by_job ON memory_runs (job_id);

CREATE TABLE memory_allocations (          -- the largest allocations of each run
    run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    rank      INTEGER NOT NULL,             -- 1 = largest
    name      TEXT    NOT NULL,             -- 'layers.3.attn.probs'
    category  TEXT    NOT NULL,
    bytes     INTEGER NOT NULL,
    phase     TEXT    NOT NULL,
    step      INTEGER NOT NULL,
    PRIMARY KEY (run_id, rank)
);

CREATE TABLE memory_events (               -- every allocation and free, in order
    run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    t_ms      REAL    NOT NULL,             -- since the run's first event
    action    TEXT    NOT NULL CHECK (action IN ('alloc', 'free')),
    bytes     INTEGER NOT NULL,
    category  TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    phase     TEXT,
    step      INTEGER,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE VIEW memory_summary AS
SELECT job_id, model, batch_size, context_length, precision,
       round(max(CASE WHEN mode = 'inference' THEN peak_allocated_bytes END) / 1048576.0, 1) AS inference_peak_mib,
       round(max(CASE WHEN mode = 'train_step' THEN peak_allocated_bytes END) / 1048576.0, 1) AS train_step_peak_mib,
       round(max(residual_stream_bytes) / 1048576.0, 2) AS residual_stream_mib
FROM memory_runs
GROUP BY job_id, model, batch_size, context_length, precision
ORDER BY job_id, model, context_length, precision;
