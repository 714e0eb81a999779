-- 0020_memory_failed: a point that failed (out of memory on the device, past
-- the spec's memory_limit_bytes, or refused by the preflight estimate) is a
-- row of memory_runs with its reason, no longer left out of memory_runs and
-- memory_summary. memory_runs is rebuilt (SQLite cannot drop NOT NULL): the
-- configuration columns stay NOT NULL, the figures may be NULL; a failed
-- row holds what was measured up to the failure (its peak is the peak
-- before the failed request, NULL when it failed before running). Rows
-- stored before this migration are all 'succeeded'.
-- memory_summary shows a failed mode's peak as 'OOM' (out of memory, or
-- does not fit) or 'failed', and the reasons in `failed` ('<mode>: <error>',
-- '; ' between them; NULL when none failed).

CREATE TABLE memory_runs_rebuilt (
    run_id                     INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    job_id                     INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    status                     TEXT    NOT NULL DEFAULT 'succeeded' CHECK (status IN ('succeeded', 'failed')),
    error                      TEXT,
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
    peak_allocated_bytes       INTEGER,
    peak_phase                 TEXT,               -- init, forward, backward, optimizer
    peak_init_bytes            INTEGER,
    peak_forward_bytes         INTEGER,
    peak_backward_bytes        INTEGER,
    peak_optimizer_bytes       INTEGER,
    parameter_bytes            INTEGER,            -- live at the end
    gradient_bytes             INTEGER,
    optimizer_state_bytes      INTEGER,
    activation_bytes_at_peak   INTEGER,            -- activation + temporary at the peak
    residual_stream_bytes      INTEGER,            -- one (B, T, d) float32 tensor
    estimated_total_bytes      INTEGER,
    estimated_activation_bytes INTEGER,
    reserved_peak_bytes        INTEGER,            -- the CUDA pool's high-water mark (NULL on the CPU)
    event_count                INTEGER,
    reserved_init_bytes        INTEGER,
    reserved_forward_bytes     INTEGER,
    reserved_backward_bytes    INTEGER,
    reserved_optimizer_bytes   INTEGER,
    pool_used_peak_bytes       INTEGER,
    device_total_bytes         INTEGER,
    device_free_before_bytes   INTEGER,
    device_used_before_bytes   INTEGER,
    device_free_after_bytes    INTEGER,
    device_used_after_bytes    INTEGER
);
INSERT INTO memory_runs_rebuilt (
    run_id, job_id, model, d_model, num_layers, num_heads, context_length, batch_size, vocab_size, precision,
    mode, steps, parameters, peak_allocated_bytes, peak_phase, peak_init_bytes, peak_forward_bytes,
    peak_backward_bytes, peak_optimizer_bytes, parameter_bytes, gradient_bytes, optimizer_state_bytes,
    activation_bytes_at_peak, residual_stream_bytes, estimated_total_bytes, estimated_activation_bytes,
    reserved_peak_bytes, event_count, reserved_init_bytes, reserved_forward_bytes, reserved_backward_bytes,
    reserved_optimizer_bytes, pool_used_peak_bytes, device_total_bytes, device_free_before_bytes,
    device_used_before_bytes, device_free_after_bytes, device_used_after_bytes)
SELECT
    run_id, job_id, model, d_model, num_layers, num_heads, context_length, batch_size, vocab_size, precision,
    mode, steps, parameters, peak_allocated_bytes, peak_phase, peak_init_bytes, peak_forward_bytes,
    peak_backward_bytes, peak_optimizer_bytes, parameter_bytes, gradient_bytes, optimizer_state_bytes,
    activation_bytes_at_peak, residual_stream_bytes, estimated_total_bytes, estimated_activation_bytes,
    reserved_peak_bytes, event_count, reserved_init_bytes, reserved_forward_bytes, reserved_backward_bytes,
    reserved_optimizer_bytes, pool_used_peak_bytes, device_total_bytes, device_free_before_bytes,
    device_used_before_bytes, device_free_after_bytes, device_used_after_bytes
FROM memory_runs;
DROP VIEW memory_summary;
DROP TABLE memory_runs;
ALTER TABLE memory_runs_rebuilt RENAME TO memory_runs;
CREATE INDEX memory_runs_by_job ON memory_runs (job_id);

CREATE VIEW memory_summary AS
SELECT job_id, model, batch_size, context_length, precision,
       max(CASE WHEN mode = 'inference' THEN
               CASE WHEN status = 'succeeded' THEN round(peak_allocated_bytes / 1048576.0, 1)
                    WHEN error LIKE 'out of memory%' OR error LIKE 'out of host memory%' OR error LIKE 'does not fit%' THEN 'OOM'
                    ELSE 'failed' END END) AS inference_peak_mib,
       max(CASE WHEN mode = 'train_step' THEN
               CASE WHEN status = 'succeeded' THEN round(peak_allocated_bytes / 1048576.0, 1)
                    WHEN error LIKE 'out of memory%' OR error LIKE 'out of host memory%' OR error LIKE 'does not fit%' THEN 'OOM'
                    ELSE 'failed' END END) AS train_step_peak_mib,
       round(max(residual_stream_bytes) / 1048576.0, 2) AS residual_stream_mib,
       round(max(CASE WHEN mode = 'inference' AND status = 'succeeded' THEN reserved_peak_bytes END) / 1048576.0, 1) AS inference_reserved_mib,
       round(max(CASE WHEN mode = 'train_step' AND status = 'succeeded' THEN reserved_peak_bytes END) / 1048576.0, 1) AS train_step_reserved_mib,
       group_concat(CASE WHEN status = 'failed' THEN mode || ': ' || coalesce(error, 'failed') END, '; ') AS failed
FROM memory_runs
GROUP BY job_id, model, batch_size, context_length, precision
ORDER BY job_id, model, context_length, precision;
