-- 0012_profile_phases: what makes a profile trustworthy, in SQL. Per run and
-- phase (the runner's 'step' range and the model's forward, backward,
-- optimizer ranges) the traced kernel time inside the range beside the range
-- on the GPU and CUDA events around the same phase, traced and untraced
-- (events 0–3 on the model's stream: before forward, after forward, after
-- backward, after the optimizer; no synchronisation between phases). Means
-- per instance over the traced steps; ns unless named *_ms.

ALTER TABLE profile_runs ADD COLUMN step_gpu_ms_unprofiled REAL;  -- CUDA events around the whole step, tracing off
ALTER TABLE profile_runs ADD COLUMN step_gpu_ms_profiled REAL;    -- the same steps traced
ALTER TABLE profile_runs ADD COLUMN overhead_gpu_pct REAL;        -- from the two above (overhead_pct: wall clock)
ALTER TABLE profile_runs ADD COLUMN kernels_without_launch INTEGER; -- launching API call not traced: attributed by start

CREATE TABLE profile_phases (
    run_id              INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    phase               TEXT    NOT NULL CHECK (phase IN ('step', 'forward', 'backward', 'optimizer')),
    instances           INTEGER NOT NULL,   -- ranges of this name in the traced steps
    kernel_ns           REAL    NOT NULL,   -- summed kernel time inside the range, per instance
    gpu_span_ns         REAL    NOT NULL,   -- first kernel start to last kernel end, per instance
    range_wall_ns       REAL    NOT NULL,   -- CPU range, push to pop, per instance
    event_ns_profiled   REAL,               -- CUDA events around the phase, traced steps
    event_ns_unprofiled REAL,               -- the same, untraced steps
    kernel_pct_of_event REAL,               -- 100 · kernel_ns / event_ns_profiled
    PRIMARY KEY (run_id, phase)
) WITHOUT ROWID;
