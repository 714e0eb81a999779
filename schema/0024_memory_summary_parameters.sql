-- 0024_memory_summary_parameters: memory_summary gains parameter_mib, the
-- parameters' memory (memory_runs.parameter_bytes: the float32 master weights,
-- live at the end of the run) beside the residual stream, as the CS336
-- memory write-ups answer "how much of it is the model itself" (seed 002 (d):
-- small's parameters in float32). MiB, one decimal; NULL when no run of the
-- point got as far as measuring it. The other columns are those of 0020.

DROP VIEW memory_summary;
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
       round(max(parameter_bytes) / 1048576.0, 1) AS parameter_mib,
       round(max(CASE WHEN mode = 'inference' AND status = 'succeeded' THEN reserved_peak_bytes END) / 1048576.0, 1) AS inference_reserved_mib,
       round(max(CASE WHEN mode = 'train_step' AND status = 'succeeded' THEN reserved_peak_bytes END) / 1048576.0, 1) AS train_step_reserved_mib,
       group_concat(CASE WHEN status = 'failed' THEN mode || ': ' || coalesce(error, 'failed') END, '; ') AS failed
FROM memory_runs
GROUP BY job_id, model, batch_size, context_length, precision
ORDER BY job_id, model, context_length, precision;
