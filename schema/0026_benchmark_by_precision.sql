-- 0026_benchmark_by_precision: the seeds' mixed-precision tables (seed 002's
-- "Total Time ... FP32 BF16 FP16" and "Speedup Analysis: Mixed Precision vs
-- FP32"): one row per job × point (everything a benchmark sweep varies but
-- the precision), a column per precision.
-- * <p>_total_ms: the point's mean whole-step time in precision p (ms; the
--   phases the mode runs, summed per step: benchmark_runs.total_mean_ms);
--   NULL where the job ran no such run or the run failed (out of memory).
-- * <p>_speedup_vs_fp32: benchmark_summary.speedup_vs_fp32 of that run (the
--   fp32 run's mean total over its own); NULL without a succeeded fp32 peer.
-- GET /v1/jobs/{id}/table?pivot=precision reads this view.
-- Points are those of benchmark_summary's fp32 peer (the same join key).

CREATE VIEW benchmark_by_precision AS
SELECT r.job_id                                                                      AS job_id,
       MIN(r.run_id)                                                                 AS first_run_id,
       r.model                                                                       AS model,
       r.d_model                                                                     AS d_model,
       r.d_ff                                                                        AS d_ff,
       r.num_layers                                                                  AS num_layers,
       r.num_heads                                                                   AS num_heads,
       r.context_length                                                              AS context_length,
       r.batch_size                                                                  AS batch_size,
       r.mode                                                                        AS mode,
       r.warmup_steps                                                                AS warmup_steps,
       r.measure_steps                                                               AS measure_steps,
       MAX(CASE WHEN r.precision = 'fp32' AND r.status = 'succeeded' THEN r.total_mean_ms END) AS fp32_total_ms,
       MAX(CASE WHEN r.precision = 'tf32' AND r.status = 'succeeded' THEN r.total_mean_ms END) AS tf32_total_ms,
       MAX(CASE WHEN r.precision = 'bf16' AND r.status = 'succeeded' THEN r.total_mean_ms END) AS bf16_total_ms,
       MAX(CASE WHEN r.precision = 'fp16' AND r.status = 'succeeded' THEN r.total_mean_ms END) AS fp16_total_ms,
       MAX(CASE WHEN r.precision = 'tf32' THEN s.speedup_vs_fp32 END)                AS tf32_speedup_vs_fp32,
       MAX(CASE WHEN r.precision = 'bf16' THEN s.speedup_vs_fp32 END)                AS bf16_speedup_vs_fp32,
       MAX(CASE WHEN r.precision = 'fp16' THEN s.speedup_vs_fp32 END)                AS fp16_speedup_vs_fp32
FROM benchmark_runs r
JOIN benchmark_summary s ON s.run_id = r.run_id
GROUP BY r.job_id, r.model, r.d_model, r.d_ff, r.num_layers, r.num_heads, r.context_length, r.batch_size,
         r.vocab_size, r.mode, r.attention, r.warmup_steps, r.measure_steps, r.optimizer_in_backward
ORDER BY r.job_id, first_run_id;
