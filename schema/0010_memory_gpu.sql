-- 0010_memory_gpu: the memory job's CUDA pool and device figures. The pool
-- (cudaMemPoolAttrReservedMem*/UsedMem*) is sampled at every phase mark, its
-- high-water marks restarted there; per-phase columns are the highest over
-- the run's steps. Device memory is cudaMemGetInfo before the model exists
-- (after the pool gave back what earlier points left) and after the last
-- step (model still allocated). All NULL on the cpu backend.

ALTER TABLE memory_runs ADD COLUMN reserved_init_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN reserved_forward_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN reserved_backward_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN reserved_optimizer_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN pool_used_peak_bytes INTEGER;  -- tracked tensors + backend scratch
ALTER TABLE memory_runs ADD COLUMN device_total_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN device_free_before_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN device_used_before_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN device_free_after_bytes INTEGER;
ALTER TABLE memory_runs ADD COLUMN device_used_after_bytes INTEGER;

-- The write-ups' table, now with the pool's reserved peak beside the allocated peak.
DROP VIEW memory_summary;
CREATE VIEW memory_summary AS
SELECT job_id, model, batch_size, context_length, precision,
       round(max(CASE WHEN mode = 'inference' THEN peak_allocated_bytes END) / 1048576.0, 1) AS inference_peak_mib,
       round(max(CASE WHEN mode = 'train_step' THEN peak_allocated_bytes END) / 1048576.0, 1) AS train_step_peak_mib,
       round(max(residual_stream_bytes) / 1048576.0, 2) AS residual_stream_mib,
       round(max(CASE WHEN mode = 'inference' THEN reserved_peak_bytes END) / 1048576.0, 1) AS inference_reserved_mib,
       round(max(CASE WHEN mode = 'train_step' THEN reserved_peak_bytes END) / 1048576.0, 1) AS train_step_reserved_mib
FROM memory_runs
GROUP BY job_id, model, batch_size, context_length, precision
ORDER BY job_id, model, context_length, precision;
