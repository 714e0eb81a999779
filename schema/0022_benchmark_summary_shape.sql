-- 0022_benchmark_summary_shape: benchmark_summary as the seeds print it.
-- * the model's shape (d_model, d_ff, num_layers, num_heads) beside its name,
--   as seed 004's table, and so that two custom shapes (both named 'custom'
--   unless given a name) are two distinguishable rows;
-- * warmup_steps and measure_steps (the protocol of the statistics);
-- * tot_ms: the whole step (the phases run, summed per step), mean ± std, as
--   seed 002's "Total Time (Forward + Backward)";
-- * speedup_vs_fp32: the fp32 run's total_mean_ms over this run's, for the
--   run of the same job with the same model, shape, context, batch, mode and
--   protocol in fp32 (seed 002's "SPEEDUP ANALYSIS"); 1.0 on the fp32 run
--   itself; NULL when the job has no such fp32 run or either one failed.
-- Times in ms. The other columns are those of 0002.

DROP VIEW benchmark_summary;
CREATE VIEW benchmark_summary AS
SELECT r.job_id                                                   AS job_id,
       r.run_id                                                   AS run_id,
       r.model                                                    AS model,
       r.d_model                                                  AS d_model,
       r.d_ff                                                     AS d_ff,
       r.num_layers                                               AS num_layers,
       r.num_heads                                                AS num_heads,
       r.context_length                                           AS context_length,
       r.batch_size                                               AS batch_size,
       r.precision                                                AS precision,
       r.mode                                                     AS mode,
       r.warmup_steps                                             AS warmup_steps,
       r.measure_steps                                            AS measure_steps,
       CASE WHEN r.forward_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.forward_mean_ms, r.forward_std_ms) END   AS fwd_ms,
       CASE WHEN r.backward_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.backward_mean_ms, r.backward_std_ms) END AS bwd_ms,
       CASE WHEN r.optimizer_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.optimizer_mean_ms, r.optimizer_std_ms) END AS opt_ms,
       CASE WHEN r.total_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.total_mean_ms, r.total_std_ms) END   AS tot_ms,
       CASE WHEN r.status = 'succeeded' AND fp32.total_mean_ms > 0 AND r.total_mean_ms > 0
            THEN fp32.total_mean_ms / r.total_mean_ms END                      AS speedup_vs_fp32,
       r.tokens_per_s                                             AS tokens_per_s,
       r.status                                                   AS status,
       r.error                                                    AS error
FROM benchmark_runs r
LEFT JOIN benchmark_runs fp32
       ON fp32.job_id = r.job_id AND fp32.precision = 'fp32' AND fp32.status = 'succeeded'
      AND fp32.model = r.model AND fp32.d_model IS r.d_model AND fp32.d_ff IS r.d_ff
      AND fp32.num_layers IS r.num_layers AND fp32.num_heads IS r.num_heads
      AND fp32.context_length = r.context_length AND fp32.batch_size = r.batch_size
      AND fp32.vocab_size = r.vocab_size AND fp32.mode = r.mode AND fp32.attention = r.attention
      AND fp32.warmup_steps = r.warmup_steps AND fp32.measure_steps = r.measure_steps
      AND fp32.optimizer_in_backward IS r.optimizer_in_backward
ORDER BY r.job_id, r.run_id;
